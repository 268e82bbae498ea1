"""Graph analysis of the data-augmentation step: record blocks and what surrounds them.

:func:`partition` groups the record variables into blocks (same record axis length, linked as
parent and child or by a common Release statistic). :func:`block_graph` gathers, for one block,
everything later stages need as one frozen :class:`BlockGraph`: the releases and observed
children of the records (refusing free children and potentials), the statistic and the
per-record log-density terms in terms of value variables (refusing terms the structural analysis
of :mod:`pymc_dp.step_methods.row_locality` finds coupled), and the forward (ancestral) graph of
the proposals.

Examples
--------
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> with pm.Model() as m:
...     p = pm.Beta("p", 1.0, 1.0)
...     x = pm.Bernoulli("x", p=p, shape=4)
...     w = pm.Normal("w", x, 1.0)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=2.0)
>>> [[v.name for v in b] for b in partition(m, [x, w], m.initial_point())]
[['x', 'w']]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.pytensorf import compile
from pytensor.compile.mode import Mode

from pymc_dp.distributions.release import is_release, record_parents
from pymc_dp.step_methods.chain_records import (
    CHAIN_ADVICE,
    chain_kind,
    chain_message,
    is_shift_coupling,
)
from pymc_dp.step_methods.claims import direct_rv_parents
from pymc_dp.step_methods.da_checks import (
    RowCheck,
    check_rows_randomized,
    coupled_message,
    joint_message,
)
from pymc_dp.step_methods.da_proposals import reseed
from pymc_dp.step_methods.row_locality import ROW, Coupled, Unknown, row_states

#: the mode of functions run only by construction-time checks (no C/numba compilation)
CHECK_MODE = Mode(linker="py", optimizer="fast_compile")

__all__ = [
    "CHECK_MODE",
    "BlockGraph",
    "BuildOptions",
    "block_graph",
    "is_zeros",
    "partition",
    "rows",
]


@dataclass(frozen=True)
class BuildOptions:
    """What every block of a step is built with.

    ``ip`` is the point of the construction-time checks, ``input_names`` the names of the
    model's value variables (the order of the compiled functions' inputs), ``ck`` the
    compilation keywords and ``direct`` whether proposals of plain random variables are drawn
    with numpy (:class:`~pymc_dp.step_methods.da_proposals.DirectProposer`).
    """

    model: object
    ip: dict
    input_names: list
    ck: dict
    direct: bool = True


@dataclass(frozen=True)
class BlockGraph:
    """The symbolic description of one record block (built by :func:`block_graph`).

    ``values`` are the record value variables, ``pos`` their positions among the model's value
    variables, ``stats`` the statistics of the ``releases`` in value variables and ``T_flat``
    their flattened concatenation (float64), ``row_terms`` the per-record log-density terms
    (records' priors, observed children) summed to shape (n,), ``lw_cur`` the observed
    children's per-record log-likelihood (the literal zeros placeholder when there is none,
    :func:`is_zeros`), ``prop_vals`` the forward draws of the records given everything else.
    """

    opts: BuildOptions
    block_rvs: list
    values: list
    label: str
    n: int
    releases: list
    observed_children: list
    stats: list
    T_flat: object
    row_terms: list
    lw_cur: object
    prop_vals: list
    undecided: list = field(default_factory=list)

    @property
    def model(self):
        return self.opts.model

    @property
    def ck(self) -> dict:
        return self.opts.ck

    @property
    def direct(self) -> bool:
        return self.opts.direct

    @property
    def input_names(self) -> list:
        return self.opts.input_names

    @property
    def names(self) -> list:
        return [v.name for v in self.values]

    @property
    def pos(self) -> list:
        return [self.opts.input_names.index(v.name) for v in self.values]

    @property
    def args(self) -> list:
        """The construction point, as the compiled functions' arguments."""
        return [np.asarray(self.opts.ip[name]) for name in self.opts.input_names]

    def compile(self, outputs, extra_inputs=()):
        """Compile ``outputs`` as a function of the model's value variables (+ extra inputs)."""
        inputs = [*self.model.value_vars, *extra_inputs]
        return compile(inputs, outputs, on_unused_input="ignore", **self.ck)

    def compile_check(self, outputs, extra_inputs=(), mode=None):
        """:meth:`compile` for a function run only by the construction-time checks.

        It runs a few times, so it is not worth a C or numba compilation (most of a cold
        step construction was spent compiling C modules of check-only graphs): PyTensor's
        Python linker with the ``fast_compile`` rewrites (:data:`CHECK_MODE`), unless ``mode``
        is given.
        """
        inputs = [*self.model.value_vars, *extra_inputs]
        ck = {**self.ck, "mode": CHECK_MODE if mode is None else mode}
        return compile(inputs, outputs, on_unused_input="ignore", **ck)


def _record_lengths(model, rvs, ip) -> dict:
    free = set(model.free_RVs)
    lengths = {}
    for rv in rvs:
        if rv not in free:
            raise ValueError(f"{rv.name!r} is not a free variable of the model")
        shape = np.shape(ip[model.rvs_to_values[rv].name])
        if len(shape) == 0:
            raise ValueError(
                f"record variable {rv.name!r} is a scalar; DataAugmentation needs record "
                "variables with a leading record axis (shape (n, ...))"
            )
        lengths[rv] = shape[0]
    return lengths


class _UnionFind:
    """Union of record variables with the same record axis length."""

    def __init__(self, lengths):
        self.lengths = lengths
        self.parent = {rv: rv for rv in lengths}

    def find(self, a):
        parent = self.parent
        while parent[a] is not a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(self, a, b):
        if self.lengths[a] != self.lengths[b]:
            return
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


def partition(model, rvs, ip) -> list[list]:
    """Group record variables into blocks: same record axis length and linked.

    Two record variables are linked when one is a direct parent of the other, or when they
    appear together in the statistic of a Release. Blocks and their members are in model order.
    """
    lengths = _record_lengths(model, rvs, ip)
    uf = _UnionFind(lengths)
    rv_set = set(model.basic_RVs)
    rv_list = list(rvs)
    in_block = set(rv_list)
    for rv in rv_list:
        for p in direct_rv_parents(rv, rv_set) & in_block:
            if lengths[p] != lengths[rv]:
                raise ValueError(
                    f"record variables {p.name!r} (n={lengths[p]}) and {rv.name!r} "
                    f"(n={lengths[rv]}) are parent and child with different record axes"
                )
            uf.union(p, rv)
    for rel in model.observed_RVs:
        if is_release(rel):
            members = [v for v in record_parents(rel.owner.inputs[0]) if v in in_block]
            for a in members[1:]:
                uf.union(members[0], a)
    groups: dict = {}
    for rv in rv_list:
        groups.setdefault(uf.find(rv), []).append(rv)
    order = {rv: i for i, rv in enumerate(model.free_RVs)}
    blocks = [sorted(g, key=order.__getitem__) for g in groups.values()]
    return sorted(blocks, key=lambda g: order[g[0]])


def _neighbours(model, block_rvs, label):
    """The releases and observed children of a block; refuses free children and potentials."""
    rv_set = set(model.basic_RVs)
    block_set = set(block_rvs)
    releases, observed_children = [], []
    for rv in model.basic_RVs:
        if rv in block_set or not direct_rv_parents(rv, rv_set) & block_set:
            continue
        if is_release(rv):
            if rv not in model.observed_RVs:
                raise ValueError(f"Release {rv.name!r} of records [{label}] is not observed")
            releases.append(rv)
        elif rv in model.observed_RVs:
            observed_children.append(rv)
        else:
            raise ValueError(
                f"record variable(s) [{label}] have the free child {rv.name!r}, which is "
                "neither a record of the same block nor a Release: given the other "
                "variables the records are not conditionally independent of it. If "
                f"{rv.name!r} is a per-record latent part, pass it to DataAugmentation "
                "together with the records (it is then proposed jointly)"
            )
    for pot in model.potentials:
        if direct_rv_parents(pot, rv_set) & block_set:
            raise ValueError(
                f"pm.Potential {pot.name!r} depends on record variable(s) [{label}]; "
                "DataAugmentation does not support potentials on records"
            )
    if not releases:
        raise ValueError(f"record variable(s) [{label}] feed no observed Release")
    return releases, observed_children


def rows(term, n):
    """Sum a per-element log-density term over all but the leading (record) axis."""
    if term.type.ndim == 0:
        return None
    return term.sum(axis=tuple(range(1, term.type.ndim))) if term.type.ndim > 1 else term


def is_zeros(var) -> bool:
    """Whether ``var`` is the literal zeros placeholder (no observed children)."""
    return getattr(var.tag, "pymc_dp_zeros", False)


def _row_terms(model, block_rvs, observed_children, values, n, label):
    """Per-record terms (summed to (n,)), the observed children's ``lw_cur`` and the terms
    the structural analysis could not decide; refuses joint and coupled terms."""
    block_set = set(block_rvs)
    prior_terms = model.logp(vars=block_rvs, sum=False)
    child_terms = model.logp(vars=observed_children, sum=False) if observed_children else []
    row_terms, undecided = [], []
    leaves = dict.fromkeys(values, ROW)
    for rv, term in zip(
        [*block_rvs, *observed_children], [*prior_terms, *child_terms], strict=True
    ):
        observed = rv not in block_set
        if term.type.ndim == 0 or term.type.shape[0] not in (None, n):
            kind = None if observed else chain_kind(rv)
            if kind is not None:
                what = f"{rv.name!r} is drawn from {kind}, one joint law over its {n} rows"
                raise ValueError(chain_message(label, what))
            raise ValueError(joint_message(rv, label, n, observed))
        state = row_states([term], leaves, n)[term]
        if isinstance(state, Coupled):
            msg = coupled_message(rv, label, state, observed)
            if is_shift_coupling(state.reason):
                msg += " If the records form a chain (a record's law reads the previous record): "
                msg += CHAIN_ADVICE
            raise ValueError(msg)
        if isinstance(state, Unknown):
            undecided.append((rv, state))
        row_terms.append(rows(term, n))
    if child_terms:
        lw_cur = sum(rows(t, n) for t in child_terms)
    else:
        lw_cur = pt.zeros((n,), "float64")
        lw_cur.tag.pymc_dp_zeros = True
    return row_terms, lw_cur, undecided


def _proposal_graph(model, block_rvs, values):
    """Forward (ancestral) draws of the block's records given everything else, as values."""
    block_set = set(block_rvs)
    others = {rv: val for rv, val in model.rvs_to_values.items() if rv not in block_set}
    transforms = {
        rv: tr
        for rv, tr in model.rvs_to_transforms.items()
        if rv not in block_set and tr is not None
    }
    prop_rvs = replace_rvs_by_values(
        list(block_rvs), rvs_to_values=others, rvs_to_transforms=transforms
    )
    prop_vals = []
    for rv, prv in zip(block_rvs, prop_rvs, strict=True):
        tr = model.rvs_to_transforms.get(rv)
        prop_vals.append(tr.forward(prv, *prv.owner.inputs) if tr is not None else prv)
    return [pt.cast(p, v.dtype) for p, v in zip(prop_vals, values, strict=True)]


def block_graph(opts: BuildOptions, block_rvs) -> BlockGraph:
    """Analyse one record block (see :class:`BlockGraph`); raises ``ValueError`` when the
    records have free children, potentials, no observed release, or per-record terms that
    read other records (structurally, or numerically for operations without a rule)."""
    model = opts.model
    values = [model.rvs_to_values[rv] for rv in block_rvs]
    n = int(np.shape(opts.ip[values[0].name])[0])
    label = ", ".join(rv.name for rv in block_rvs)
    releases, observed_children = _neighbours(model, block_rvs, label)
    stats = model.replace_rvs_by_values([r.owner.inputs[0] for r in releases])
    row_terms, lw_cur, undecided = _row_terms(model, block_rvs, observed_children, values, n, label)
    g = BlockGraph(
        opts=opts,
        block_rvs=list(block_rvs),
        values=values,
        label=label,
        n=n,
        releases=releases,
        observed_children=observed_children,
        stats=stats,
        T_flat=pt.concatenate([pt.cast(s, "float64").ravel() for s in stats]),
        row_terms=row_terms,
        lw_cur=lw_cur,
        prop_vals=_proposal_graph(model, block_rvs, values),
        undecided=undecided,
    )
    if undecided:
        _check_undecided(g)
    return g


def _check_undecided(g: BlockGraph) -> None:
    """Numerical row check at random points for the terms without a structural rule."""
    rng = np.random.default_rng(20261123)
    prop_fn = g.compile_check(g.prop_vals)
    rc = RowCheck(
        rows_fn=g.compile_check(pt.stack(g.row_terms)),
        prop_fn=prop_fn,
        base=g.args,
        pos=g.pos,
        n=g.n,
        label=g.label,
    )
    reseed(prop_fn, rng)
    what = ", ".join(f"{rv.name!r} (operation {type(u.node.op).__name__})" for rv, u in g.undecided)
    check_rows_randomized(rc, what, rng)
