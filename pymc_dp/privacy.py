"""The privacy cost of the releases a model conditions on, and its record on sampling results.

Every ``pmdp.Privatized`` and ``pmdp.Release`` node keeps its mechanism, and
``OnePosteriorSample.tempered_likelihood`` (:mod:`pymc_dp.releases.ops`) tags the potential it
adds. :func:`privacy_report` collects them and composes their guarantees;
:func:`attach_privacy` writes the report onto an ArviZ ``DataTree`` (a JSON attribute and a
``privacy`` group), and ``pm.sample`` does so itself once pymc_dp is imported
(:func:`install_privacy_hook`), so that a saved result says which releases it was computed from
and at what privacy cost.

Accounting conventions (stated, not hidden):

* **no claim without a sensitivity**: a mechanism given by its noise scale only
  (``Laplace(scale=2)``, ``Gaussian(sigma=42)``, ``Geometric(alpha=0.5)``, no ``sensitivity``)
  describes a noise law, not a guarantee (:attr:`Mechanism.has_privacy_claim
  <pymc_dp.mechanisms.base.Mechanism.has_privacy_claim>`); its node states no epsilon or rho,
  and neither does the total (``report.total.claimed`` is False, :attr:`PrivacyReport.no_claim`
  names the nodes);
* ``contributions`` (an argument of :func:`privacy_report`, default 1) is the largest number of
  values (records) one individual contributes to a node; it is part of the claim and the report
  states it. With the default, one individual is one record: one row of the record variables
  of a ``Release`` (row ``i`` of every record variable of the same length is record ``i``, as
  in :mod:`pymc_dp.distributions.sensitivity`), one value of a ``Privatized`` node;
* a ``Privatized`` node releases each of its values through its own draw of noise; an individual
  with ``k`` values pays ``k`` releases of the mechanism (``k epsilon``, ``k delta``, ``k rho``);
* a ``Release`` node releases one statistic whose sensitivity ``Δ`` the mechanism declares for
  the change one record can make; an individual with ``k`` records pays ``mechanism.map(k Δ)``
  (``k epsilon`` for pure DP, ``k**2 rho`` for the Gaussians' zCDP);
* a model with a tempered (One Posterior Sample) likelihood costs ``released_draws`` times the
  guarantee of one draw (Foulds et al. 2016; it holds for a converged chain only);
* **parallel composition** where releases read disjoint individuals, so that per-group releases
  cost their maximum, not their sum (a :class:`ParallelGroup` each):

  - *proven from the graph*: ``Release`` statistics that read the records through constant row
    indices (``x[:50]``, ``x[idx]``, ``x[mask]``; ``pm.Data`` indices are not constant) of one
    record set (record variables of the same length); the group costs the maximum over records
    of the composition of the releases that read that record, so overlapping releases add up
    where they overlap. Needs ``contributions == 1`` for each (else an individual may hold
    rows in several groups);
  - *declared*: ``privacy_report(model, disjoint=[["a", "b", ...], ...])`` states that no
    individual's records enter two releases of a group (e.g. groups fixed by a public
    attribute); the group costs the maximum of its releases;
  - *mixtures*: each value of an observed ``pm.Mixture`` was released by one of its components:
    its privatized components cost their maximum (a mixture of mechanisms chosen independently
    of the data is as private as its least private component: for pure DP by the triangle
    inequality, for zCDP by the joint convexity of ``exp((a-1) D_a)``);
* everything else is composed sequentially (``pymc_dp.accounting.compose``), an upper bound
  whenever the nodes concern the same individuals; nodes nested in another observed variable
  (the graph of a ``pm.CustomDist``, ...) are each counted in full;
* only *observed* nodes are releases: an unobserved ``Privatized``/``Release`` variable is a
  simulation, not data, and costs nothing. A likelihood written by hand (``pm.Potential`` of
  a log-density) holds no mechanism: the report lists such potentials in its notes as not
  counted;
* the total is stated in every form that applies: ``epsilon`` and ``delta`` (``epsilon`` is
  infinite when a node has no finite epsilon, e.g. a Gaussian given by ``rho``), and ``rho``
  when every node has a zCDP guarantee, where a pure ``epsilon``-DP node counts as
  ``epsilon**2 / 2``-zCDP (Bun & Steinke 2016, Prop. 1.4). All values are Python floats.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.graph.op import HasInnerGraph

from pymc_dp.accounting import PrivacyGuarantee, compose, compose_repeated, implied_rho
from pymc_dp.distributions.privatized import PrivatizedRV
from pymc_dp.distributions.release import ReleaseRV, is_random_variable

__all__ = [
    "ParallelGroup",
    "PrivacyReport",
    "ReleaseEntry",
    "attach_privacy",
    "install_privacy_hook",
    "privacy_report",
]


def _plain(g: PrivacyGuarantee) -> PrivacyGuarantee:
    """The guarantee with plain Python floats and ``rho`` filled in where it is implied."""
    if not g.claimed:
        return PrivacyGuarantee.no_claim()
    return PrivacyGuarantee(epsilon=float(g.epsilon), delta=float(g.delta), rho=implied_rho(g))


def _worst(gs) -> PrivacyGuarantee:
    """Componentwise maximum: what an individual pays who is in exactly one of the parts."""
    gs = [_plain(g) for g in gs]
    if not gs:
        return PrivacyGuarantee(0.0, 0.0, 0.0)
    if not all(g.claimed for g in gs):
        return PrivacyGuarantee.no_claim()
    rho = None if any(g.rho is None for g in gs) else max(g.rho for g in gs)
    return PrivacyGuarantee(
        epsilon=max(g.epsilon for g in gs), delta=max(g.delta for g in gs), rho=rho
    )


@dataclass(frozen=True)
class ReleaseEntry:
    """One privatized node of a model: its name, kind, mechanism and number of released values.

    ``kind`` is ``"privatized"``, ``"release"`` or ``"ops"`` (a One Posterior Sample tempered
    likelihood, whose ``mechanism`` is the :class:`~pymc_dp.releases.ops.OnePosteriorSample`
    and ``size`` the number of released draws). ``name`` is the observed variable's name (the
    potential's for ``"ops"``); a node nested in another observed variable (e.g. a
    ``pm.Mixture`` component) is named ``"<variable>[<k>]"``. ``contributions`` is the largest
    number of values one individual contributes to the node.
    """

    name: str
    kind: str
    mechanism: object
    size: int
    contributions: int = 1

    @property
    def claimed(self) -> bool:
        """Whether the node states a privacy guarantee (its mechanism declares a sensitivity;
        always for ``"ops"``)."""
        return self.kind == "ops" or bool(self.mechanism.has_privacy_claim)

    @property
    def d_in(self) -> float | None:
        """The largest change of a ``Release`` statistic one individual can make:
        ``contributions * sensitivity`` (for a ``Privatized`` node, the change of each value);
        ``None`` without a privacy claim or for ``"ops"``."""
        if not self.claimed or self.kind == "ops":
            return None
        if self.kind == "release":
            return float(self.contributions * self.mechanism.sensitivity)
        return float(self.mechanism.sensitivity)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """What one individual pays for this node (see the module docstring), as plain floats,
        with ``rho = epsilon**2 / 2`` for a pure-DP mechanism: ``mechanism.map(k Δ)`` for a
        ``Release``, ``k`` releases of the mechanism for a ``Privatized`` node
        (``k = contributions``), ``size`` draws for ``"ops"``; no claim when the mechanism
        declares no sensitivity."""
        k, m = self.contributions, self.mechanism
        if self.kind == "ops":
            return _plain(compose_repeated(_plain(m.guarantee()), self.size))
        if not self.claimed:
            return PrivacyGuarantee.no_claim()
        if k == 1:
            return _plain(m.guarantee())
        if self.kind == "release":
            return _plain(m.map(Fraction(k) * Fraction(m.sensitivity)))
        # compose with rho filled in: k (epsilon^2/2), tighter than (k epsilon)^2/2
        return _plain(compose_repeated(_plain(m.guarantee()), k))


@dataclass(frozen=True)
class ParallelGroup:
    """Nodes composed in parallel: what one individual pays for all of them together.

    ``reason`` is ``"proven"`` (constant row indices of one record set, from the graph),
    ``"declared"`` (``privacy_report(disjoint=...)``) or ``"mixture"`` (components of one
    observed mixture); ``detail`` says which; ``guarantee`` is the maximum over individuals of
    the composition of the nodes that individual enters (module docstring).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     x = pm.Bernoulli("x", 0.5, shape=6)
    ...     for g in range(3):
    ...         _ = pmdp.Release(f"s{g}", x[2 * g : 2 * g + 2].sum(),
    ...                          pmdp.Laplace(epsilon=1.0), observed=1.0)
    >>> [(g.names, g.reason, g.guarantee.epsilon) for g in pmdp.privacy_report(m).groups]
    [(('s0', 's1', 's2'), 'proven', 1.0)]
    """

    names: tuple[str, ...]
    reason: str
    detail: str
    guarantee: PrivacyGuarantee


#: how the report states the cost of k values per individual (plain words, no API names)
_COST_OF_K = (
    "the cost for a person with k values is: for a Release, the mechanism's guarantee when one "
    "person can change the released statistic by k times the sensitivity (k epsilon for the "
    "Laplace and geometric mechanisms, k^2 rho for the Gaussian ones); for a Privatized node, "
    "k separate releases (k epsilon, k delta, k rho)"
)

_COMPOSITION = (
    "sequential across nodes, except parallel groups (nodes that read disjoint individuals: "
    "proven from constant row indices of one record set, declared by the user, or the "
    "components of one mixture), which cost the most any one individual pays in them; an "
    "individual contributes at most `contributions` values to a node: a Release costs the "
    "mechanism's guarantee for a change of its statistic by `contributions` times the "
    "sensitivity, a Privatized node `contributions` sequential releases (parallel across "
    "individuals); a tempered (OPS) likelihood costs `released_draws` draws; rho of a pure "
    "epsilon-DP node is epsilon^2/2 (Bun & Steinke 2016, Prop. 1.4); a mechanism given by its "
    "noise scale only (no sensitivity declared) makes no privacy claim, and then neither does "
    "the total"
)


def _num(x):
    return None if x is None else (float(x) if math.isfinite(x) else "inf")


def _guar_dict(g: PrivacyGuarantee) -> dict:
    return {"epsilon": _num(g.epsilon), "delta": _num(g.delta), "rho": _num(g.rho)}


@dataclass(frozen=True)
class PrivacyReport:
    """The releases of a model and their composition (``total``).

    ``groups`` are the parallel groups (:class:`ParallelGroup`); ``notes`` what the report
    assumed or could not count (e.g. potentials written by hand). ``total.claimed`` is False
    when a node makes no privacy claim (:attr:`no_claim` names them).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    ...     z = pmdp.Privatized("z", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.25),
    ...                         observed=np.array([4]))
    >>> report = pmdp.privacy_report(m)
    >>> [(e.name, e.mechanism.epsilon) for e in report.entries], report.total.epsilon
    ([('y', 0.5), ('z', 0.25)], 0.75)
    >>> report.to_dict()["total"]
    {'epsilon': 0.75, 'delta': 0.0, 'rho': 0.15625}
    """

    entries: tuple[ReleaseEntry, ...]
    total: PrivacyGuarantee
    groups: tuple[ParallelGroup, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def no_claim(self) -> tuple[str, ...]:
        """Names of the nodes whose mechanism makes no privacy claim (no sensitivity)."""
        return tuple(e.name for e in self.entries if not e.claimed)

    def to_dict(self) -> dict:
        """A JSON-serialisable description (infinite values as the string ``"inf"``, no claim
        as ``None``)."""
        releases = []
        for e in self.entries:
            m = e.mechanism
            sens = getattr(m, "sensitivity", None) if e.kind != "ops" else None
            releases.append(
                {
                    "name": e.name,
                    "kind": e.kind,
                    "mechanism": type(m).__name__,
                    "family": getattr(m, "family", None),
                    "sensitivity": float(sens) if sens is not None and e.claimed else None,
                    "size": e.size,
                    "contributions": e.contributions,
                    "d_in": e.d_in,
                    "claimed": e.claimed,
                    **_guar_dict(e.guarantee),
                }
            )
        return {
            "composition": _COMPOSITION,
            "claimed": self.total.claimed,
            "total": _guar_dict(self.total),
            "releases": releases,
            "parallel_groups": [
                {"names": list(g.names), "reason": g.reason, "detail": g.detail}
                | _guar_dict(g.guarantee)
                for g in self.groups
            ],
            "no_claim": list(self.no_claim),
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        lines = [f"{'node':<16} {'kind':<11} {'mechanism':<40} {'values':>8}"]
        for e in self.entries:
            mech = repr(e.mechanism) if e.kind != "ops" else f"OPS(T={e.mechanism.temperature:.4g})"
            lines.append(f"{e.name:<16} {e.kind:<11} {mech:<40} {e.size:>8}")
        for g in self.groups:
            lines.append(
                f"parallel ({g.reason}: {g.detail}): {', '.join(g.names)} cost "
                + _describe(g.guarantee)
            )
        t = self.total
        if t.claimed:
            lines.append(f"total: {_describe(t)}")
            if t.rho is not None:
                lines[-1] += " (zCDP; pure epsilon-DP counts as epsilon^2/2)"
        else:
            lines.append(
                "total: no privacy claim: the mechanisms of "
                f"{', '.join(self.no_claim)} declare no sensitivity (given by their noise scale "
                "only); give sensitivity=... to state a guarantee"
            )
        ks = sorted({e.contributions for e in self.entries if e.kind != "ops"})
        if ks:
            lines.append(
                f"assumes an individual contributes at most {', '.join(map(str, ks))} value(s) to "
                "a node (privacy_report(contributions=...)); " + _COST_OF_K
            )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _describe(g: PrivacyGuarantee) -> str:
    if not g.claimed:
        return "no privacy claim"
    out = f"epsilon={g.epsilon:.6g}, delta={g.delta:.3g}"
    if g.rho is not None:
        out += f", rho={g.rho:.6g}"
    return out


def _as_count(name: str, k) -> int:
    if isinstance(k, bool | np.bool_) or not isinstance(k, numbers.Integral) or not k >= 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def _contributions(contributions, names) -> dict[str, int]:
    """Per-entry number of values one individual contributes (validated)."""
    if not isinstance(contributions, Mapping):
        k = _as_count("contributions", contributions)
        return dict.fromkeys(names, k)
    unknown = sorted(set(contributions) - set(names))
    if unknown:
        raise ValueError(
            f"contributions names releases the model does not have: {unknown}; its releases "
            f"are {list(names)}"
        )
    return {n: _as_count(f"contributions[{n!r}]", contributions.get(n, 1)) for n in names}


# ---- walking the model ------------------------------------------------------------------------
def _nested_nodes(root, model_rvs):
    """Privatized/Release nodes in the graph of ``root`` (its own node included when it is one),
    inner graphs included, without walking past other model variables."""
    found, seen_nodes, seen_vars = [], set(), set()
    stack = [root]
    while stack:
        var = stack.pop()
        if var in seen_vars or (var in model_rvs and var is not root):
            continue
        seen_vars.add(var)
        node = var.owner
        if node is None or node in seen_nodes:
            continue
        seen_nodes.add(node)
        if isinstance(node.op, PrivatizedRV | ReleaseRV):
            found.append(node)
        if isinstance(node.op, HasInnerGraph):
            stack.extend(node.op.inner_outputs)
        stack.extend(node.inputs)
    return found


def _kind(op) -> str | None:
    if isinstance(op, PrivatizedRV):
        return "privatized"
    if isinstance(op, ReleaseRV):
        return "release"
    return None


def _is_mixture(op) -> bool:
    from pymc.distributions.mixture import _BaseMixtureRV

    return isinstance(op, _BaseMixtureRV)


def _size(model, rv) -> int:
    data = model.rvs_to_values.get(rv)
    if data is None:
        return 1
    # constants and pm.Data hold their value: no graph to compile (``eval`` compiles one, about
    # a second per node with the numba backend, paid on every pm.sample through the hook)
    held = getattr(data, "data", None)
    if held is None and hasattr(data, "get_value"):
        held = data.get_value(borrow=True)
    if held is not None:
        return int(np.size(held))
    if all(d is not None for d in data.type.shape):
        return int(np.prod(data.type.shape, dtype=np.int64))
    shape = _eval_shape(data.shape)
    return 1 if shape is None else int(np.prod(shape))  # a size not evaluated is reported as 1


def _eval_shape(shape):
    """The value of a symbolic shape (or one length) by PyTensor's Python linker, with nothing
    to compile (``.eval()`` with the default mode compiles, about a second per call with the
    numba backend, paid on every ``pm.sample`` through the hook); None when it cannot be."""
    from pytensor.compile.mode import Mode

    try:
        return shape.eval(mode=Mode(linker="py", optimizer="fast_compile"))
    except Exception:
        return None


def _collect(model):
    """``(found, mixtures, notes)``: ``found`` lists ``(name, kind, mechanism, size, node)`` of
    every observed node, nested ones included; ``mixtures`` maps an observed mixture's name to
    the per-component lists of its entries' names."""
    model_rvs = set(model.basic_RVs)
    found, mixtures, notes = [], {}, []
    for rv in model.observed_RVs:
        size = _size(model, rv)
        kind = _kind(rv.owner.op) if rv.owner is not None else None
        if kind is not None:
            found.append((rv.name, kind, rv.owner.op.mechanism, size, rv.owner))
            continue
        if rv.owner is not None and _is_mixture(rv.owner.op):
            comps, k = [], 0
            for j, comp in enumerate(rv.owner.inputs[2:]):
                names = []
                for node in _nested_nodes(comp, model_rvs):
                    name = f"{rv.name}[{k}]"
                    found.append((name, _kind(node.op), node.op.mechanism, size, node))
                    names.append(name)
                    k += 1
                if not names:
                    notes.append(
                        f"component {j} of mixture {rv.name!r} has no mechanism: values drawn "
                        "from it are modelled as released without noise, which no report can "
                        "bound; only the privatized components are counted"
                    )
                comps.append(names)
            if k:
                mixtures[rv.name] = comps
            continue
        nested = _nested_nodes(rv, model_rvs - {rv})
        for k, node in enumerate(nested):
            found.append((f"{rv.name}[{k}]", _kind(node.op), node.op.mechanism, size, node))
        if len(nested) > 1:
            notes.append(
                f"{len(nested)} nodes nested in {rv.name!r} are counted in full and composed "
                "sequentially (an upper bound)"
            )
    return found, mixtures, notes


def _proof_notes(found) -> list[str]:
    """A note per claimed ``Release`` whose declared sensitivity the statistic's graph does not
    prove (:func:`pymc_dp.distributions.sensitivity.prove_sensitivity`): the claim then rests on
    the user's statement (and on the records' steps, which check the changes they propose)."""
    from pymc_dp.distributions.sensitivity import RTOL, _proof_of, sensitivity_norm

    out = []
    for name, kind, mech, _, node in found:
        if kind != "release" or not mech.has_privacy_claim:
            continue
        proof = _proof_of(node.inputs[0])
        norm = sensitivity_norm(mech)
        bound = proof.bound(norm)
        declared = float(mech.sensitivity)
        if not proof.proven:
            out.append(
                f"release {name!r}: its declared {norm.upper()} sensitivity {declared:g} is not "
                f"proven from the statistic's graph ({proof.reason}); the claim rests on that "
                "declaration"
            )
        elif bound > declared * (1.0 + RTOL):
            out.append(
                f"release {name!r}: the proven {norm.upper()} bound {bound:g} exceeds the "
                f"declared sensitivity {declared:g} and no neighbouring pair confirmed it (the "
                "bound may be loose); the claim rests on the declaration"
            )
    return out


def _ops_potentials(model, notes):
    """``(name, ops)`` of the potentials added by ``OnePosteriorSample.tempered_likelihood``;
    other potentials are named in ``notes`` as not counted."""
    ops, other = [], []
    for pot in model.potentials:
        tagged = getattr(pot.tag, "pymc_dp_ops", None)
        if tagged is not None:
            ops.append((pot.name, tagged))
        else:
            other.append(pot.name)
    if other:
        notes.append(
            f"potentials {other} hold no mechanism and are not counted: if one is the "
            "likelihood of released data, its privacy cost is not in this report"
        )
    return ops


# ---- proving that releases read disjoint records ----------------------------------------------
def _const_int(v):
    if v is None or isinstance(v, numbers.Integral):
        return v
    if isinstance(v, Constant):
        data = np.asarray(v.data)
        if data.ndim == 0 and data.dtype.kind in "iu":
            return int(data)
    raise _NotConstant


class _NotConstant(Exception):
    pass


def _first_axis_rows(node, n: int):
    """Rows of the indexed variable that an indexing node reads (its first-axis index, when
    constant), as a sorted int array, or ``None`` when they are not known."""
    from pytensor.tensor.subtensor import AdvancedSubtensor, Subtensor, indices_from_subtensor

    op = node.op
    try:
        if not isinstance(op, Subtensor | AdvancedSubtensor):
            return None
        idx = indices_from_subtensor(node.inputs[1:], op.idx_list)
        if not idx:
            return None
        first = idx[0]
        if isinstance(first, slice):
            sl = slice(_const_int(first.start), _const_int(first.stop), _const_int(first.step))
            return np.arange(n)[sl]
        if isinstance(first, Constant):
            data = np.asarray(first.data)
            if data.dtype == bool:
                if data.shape[:1] != (n,):
                    return None
                return np.flatnonzero(data.reshape(n, -1).any(axis=1))
            if data.dtype.kind in "iu":
                rows = data.astype(np.int64).ravel()
                if np.any((rows < -n) | (rows >= n)):
                    return None
                return np.unique(np.where(rows < 0, rows + n, rows))
        return None
    except _NotConstant:
        return None


def _length(rv) -> int | None:
    if rv.type.ndim == 0:
        return None
    n = rv.type.shape[0]
    if n is None:
        n = _eval_shape(rv.shape[0])
    return None if n is None else int(n)


def _footprint(statistic):
    """``(n, rows)``: the records (rows of the record set of length ``n``) the statistic reads,
    or ``None`` when that is not known (random variables of several lengths or scalars, row
    indices that are not constant)."""
    reads: dict = {}
    stack, seen = [statistic], set()
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        if is_random_variable(var):
            reads[var] = None  # every row
            continue
        node = var.owner
        if node is None:
            continue
        base = node.inputs[0] if node.inputs else None
        if base is not None and is_random_variable(base) and base not in seen:
            n = _length(base)
            rows = None if n is None else _first_axis_rows(node, n)
            if rows is not None:
                if base not in reads:
                    reads[base] = rows
                elif reads[base] is not None:
                    reads[base] = np.union1d(reads[base], rows)
                stack.extend(node.inputs[1:])
                continue
        stack.extend(node.inputs)
    lengths = {_length(rv) for rv in reads}
    if len(lengths) != 1 or None in lengths:
        return None
    (n,) = lengths
    mask = np.zeros(n, dtype=bool)
    for rows in reads.values():
        if rows is None:
            mask[:] = True
        else:
            mask[rows] = True
    return n, mask


#: largest number of distinct record memberships composed one by one in a proven group
_MAX_PATTERNS = 10_000


def _rows_group(members, guarantees):
    """``(guarantee, detail)`` of releases reading row masks of one record set: the maximum
    over records of the composition of the releases reading that record."""
    masks = np.stack([mask for _, mask in members], axis=1)  # (n, m)
    touched = masks[masks.any(axis=1)]
    patterns = np.unique(np.packbits(touched, axis=1), axis=0)
    if len(patterns) > _MAX_PATTERNS:  # pragma: no cover - exotic index sets
        return compose(guarantees), "too many overlap patterns: composed sequentially"
    unpacked = np.unpackbits(patterns, axis=1, count=masks.shape[1]).astype(bool)
    per_record = [compose([guarantees[j] for j in np.flatnonzero(p)]) for p in unpacked]
    overlap = int(unpacked.sum(axis=1).max()) if len(unpacked) else 0
    detail = (
        f"constant row indices of {masks.shape[0]} records; at most {overlap} of these "
        "releases read any one record"
    )
    return _worst(per_record), detail


def _groups(entries, nodes, mixtures, disjoint):
    """Parallel groups: mixtures, declared ones, then those proven from the graph."""
    by_name = {e.name: e for e in entries}
    groups, grouped = [], set()
    for root, comps in mixtures.items():
        names = tuple(n for c in comps for n in c)
        cost = _worst(compose([by_name[n].guarantee for n in c]) for c in comps if c)
        if len(names) > 1:
            detail = f"each value of {root!r} was released by one of its components"
            groups.append(ParallelGroup(names, "mixture", detail, cost))
            grouped.update(names)
    for i, group in enumerate(_declared(disjoint, by_name, grouped)):
        cost = _worst(by_name[n].guarantee for n in group)
        groups.append(ParallelGroup(group, "declared", f"disjoint[{i}]", cost))
        grouped.update(group)
    record_sets: dict[int, list] = {}
    for e in entries:
        if e.name in grouped or e.kind != "release" or e.contributions != 1:
            continue
        fp = _footprint(nodes[e.name].inputs[0])
        if fp is not None:
            record_sets.setdefault(fp[0], []).append((e.name, fp[1]))
    for members in record_sets.values():
        if len(members) < 2:
            continue
        names = tuple(n for n, _ in members)
        cost, detail = _rows_group(members, [by_name[n].guarantee for n in names])
        groups.append(ParallelGroup(names, "proven", detail, cost))
        grouped.update(names)
    return groups, grouped


def _declared(disjoint, by_name, grouped) -> list[tuple[str, ...]]:
    if disjoint is None:
        return []
    if isinstance(disjoint, str) or not isinstance(disjoint, Iterable):
        raise TypeError(
            f"disjoint must be a list of groups, each a list of release names, got {disjoint!r}"
        )
    out, used = [], set()
    for i, group in enumerate(disjoint):
        if isinstance(group, str) or not isinstance(group, Iterable):
            raise TypeError(f"disjoint[{i}] must be a list of release names, got {group!r}")
        group = tuple(group)
        if len(group) < 2 or len(set(group)) != len(group):
            raise ValueError(
                f"disjoint[{i}] must name at least two different releases, got {group}"
            )
        for name in group:
            if name not in by_name:
                raise ValueError(
                    f"disjoint[{i}] names {name!r}, which is not a release of the model; its "
                    f"releases are {list(by_name)}"
                )
            if name in used:
                raise ValueError(f"disjoint names {name!r} in two groups")
            if name in grouped:
                raise ValueError(
                    f"disjoint[{i}] names {name!r}, a component of a mixture, already composed "
                    "in parallel with the other components"
                )
            if by_name[name].kind == "ops":
                raise ValueError(
                    f"disjoint[{i}] names {name!r}, a tempered (OPS) likelihood: one posterior "
                    "draw depends on every record"
                )
            used.add(name)
        out.append(group)
    return out


def privacy_report(
    model=None, *, contributions=1, disjoint=None, released_draws=1
) -> PrivacyReport:
    """Collect the observed privatized nodes of ``model`` (default: the model in context) and
    compose them.

    Every observed variable's graph is walked (inner graphs included), so nodes nested in a
    ``pm.Mixture`` or ``pm.CustomDist`` are counted; unobserved nodes are not releases;
    potentials added by ``OnePosteriorSample.tempered_likelihood`` are counted. Releases that
    read disjoint individuals are composed in parallel (module docstring).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    contributions : int or mapping of str to int, default 1
        The largest number of values (records) one individual contributes to a node: one
        positive integer for every node, or a mapping from node names (as in
        ``report.entries``) to positive integers (nodes not named: 1). An individual with
        ``k`` records in a ``Release`` changes its statistic by at most ``k * sensitivity`` and
        pays ``mechanism.map(k * sensitivity)``; with ``k`` values of a ``Privatized`` node it
        pays ``k`` releases of the mechanism (module docstring).
    disjoint : list of lists of str, optional
        Groups of node names that read disjoint individuals (no individual's records enter two
        nodes of a group, whatever their values); each group costs the maximum of its nodes.
    released_draws : int, default 1
        Number of posterior draws published from a model with a tempered (OPS) likelihood;
        each costs the guarantee of one draw.

    Raises
    ------
    ValueError
        If a contribution count or ``released_draws`` is not a positive integer, a mapping or
        ``disjoint`` names a node the model does not have, or a node is declared twice.
    TypeError
        If ``disjoint`` is not a list of lists of names.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    >>> report = pmdp.privacy_report(m)
    >>> report.total.epsilon, report.total.rho
    (0.5, 0.125)
    >>> [(e.name, e.kind, e.size) for e in report.entries]
    [('y', 'privatized', 3)]
    >>> pmdp.privacy_report(m, contributions=3).total.epsilon  # 3 values of one individual
    1.5

    Separate releases of the sums of two groups, kept in two record variables (so not proven
    disjoint from the graph) and declared disjoint:

    >>> with pm.Model() as m2:
    ...     a = pm.Bernoulli("a", 0.5, shape=10)
    ...     b = pm.Bernoulli("b", 0.5, shape=12)
    ...     _ = pmdp.Release("sa", a.sum(), pmdp.Laplace(epsilon=1.0), observed=4.0)
    ...     _ = pmdp.Release("sb", b.sum(), pmdp.Laplace(epsilon=1.0), observed=7.0)
    >>> pmdp.privacy_report(m2).total.epsilon, pmdp.privacy_report(
    ...     m2, disjoint=[["sa", "sb"]]).total.epsilon
    (2.0, 1.0)
    """
    import pymc as pm

    model = pm.modelcontext(model)
    draws = _as_count("released_draws", released_draws)
    found, mixtures, notes = _collect(model)
    ops = _ops_potentials(model, notes)
    ks = _contributions(contributions, [f[0] for f in found])
    entries = [
        ReleaseEntry(name=n, kind=kind, mechanism=mech, size=size, contributions=ks[n])
        for n, kind, mech, size, _ in found
    ]
    entries += [ReleaseEntry(name=n, kind="ops", mechanism=o, size=draws) for n, o in ops]
    if ops:
        notes.append(
            "a tempered (OPS) likelihood is private only for draws of a converged chain "
            f"(Foulds et al. 2016, Sec. 4.1); counted for {draws} released draw(s) "
            "(privacy_report(released_draws=...))"
        )
    notes.extend(_proof_notes(found))
    nodes = {f[0]: f[4] for f in found}
    groups, grouped = _groups(entries, nodes, mixtures, disjoint)
    parts = [g.guarantee for g in groups] + [e.guarantee for e in entries if e.name not in grouped]
    t = compose(parts)
    if t.claimed:
        rho = None if t.rho is None else float(t.rho)
        t = PrivacyGuarantee(epsilon=float(t.epsilon), delta=float(t.delta), rho=rho)
    return PrivacyReport(entries=tuple(entries), total=t, groups=tuple(groups), notes=tuple(notes))


def _write(idata, report: PrivacyReport):
    import xarray as xr

    d = report.to_dict()
    idata.attrs["pymc_dp_privacy"] = json.dumps(d)
    gs = [e.guarantee for e in report.entries]

    def col(values):
        return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

    attrs = {"composition": d["composition"], "claimed": int(report.total.claimed)}
    if report.total.claimed:
        attrs["total_epsilon"] = report.total.epsilon
        attrs["total_delta"] = report.total.delta
        if report.total.rho is not None:
            attrs["total_rho"] = report.total.rho
    else:
        attrs["no_claim"] = ", ".join(report.no_claim)
    ds = xr.Dataset(
        {
            "epsilon": ("release", col([g.epsilon for g in gs])),
            "delta": ("release", col([g.delta for g in gs])),
            "rho": ("release", col([g.rho for g in gs])),
            "sensitivity": ("release", col([r["sensitivity"] for r in d["releases"]])),
            "contributions": (
                "release",
                np.array([e.contributions for e in report.entries], dtype=np.int64),
            ),
            "claimed": ("release", np.array([e.claimed for e in report.entries], dtype=bool)),
        },
        coords={"release": [e.name for e in report.entries]},
        attrs=attrs,
    )
    idata["privacy"] = xr.DataTree(ds)
    return idata


def attach_privacy(idata, model=None, *, contributions=1, disjoint=None, released_draws=1):
    """Record :func:`privacy_report` on a sampling result (an ArviZ ``DataTree``); returns it.

    Adds ``idata.attrs["pymc_dp_privacy"]`` (a JSON string, which survives netCDF round trips)
    and a ``privacy`` group with one entry per release (epsilon, delta, rho, sensitivity,
    contributions, claimed; NaN where a node states no value: rho without a zCDP guarantee,
    everything without a privacy claim) and the totals as attributes (``total_rho`` only when
    every node has one; no totals but ``no_claim`` when a node makes no privacy claim). The
    keyword arguments are passed to :func:`privacy_report`. ``pm.sample`` calls this itself
    with the defaults (:func:`install_privacy_hook`); call it again to record other
    ``contributions`` or ``disjoint`` groups.

    Examples
    --------
    >>> import json, numpy as np, pymc as pm, arviz as az, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    >>> idata = az.from_dict({"posterior": {"lam": np.ones((1, 5))}})  # stands in for pm.sample
    >>> idata = pmdp.attach_privacy(idata, m)
    >>> json.loads(idata.attrs["pymc_dp_privacy"])["total"]
    {'epsilon': 0.5, 'delta': 0.0, 'rho': 0.125}
    >>> idata["privacy"]["epsilon"].values.tolist(), idata["privacy"].attrs["total_rho"]
    ([0.5], 0.125)
    """
    report = privacy_report(
        model, contributions=contributions, disjoint=disjoint, released_draws=released_draws
    )
    return _write(idata, report)


# ---- pm.sample attaches the report ------------------------------------------------------------
_PYMC_SAMPLE_RETURN = None
_PYMC_SAMPLE_EXTERNAL = None


def _with_report(result, model):
    """``result`` with the privacy report attached when it is a DataTree of a model with
    releases; a report that cannot be made is a warning, never a lost run."""
    if model is None or not (hasattr(result, "attrs") and hasattr(result, "children")):
        return result
    try:
        report = privacy_report(model)
    except Exception as err:  # a finished run must not be lost to the report
        warnings.warn(
            f"pymc_dp could not attach the privacy report to the sampling result "
            f"({type(err).__name__}: {err}); call pymc_dp.attach_privacy(idata, model) to "
            "see why",
            UserWarning,
            stacklevel=3,
        )
        return result
    if not report.entries:
        return result
    return _write(result, report)


def _sample_return(*args, **kwargs):
    return _with_report(_PYMC_SAMPLE_RETURN(*args, **kwargs), kwargs.get("model"))


def _sample_external_nuts(*args, **kwargs):
    return _with_report(_PYMC_SAMPLE_EXTERNAL(*args, **kwargs), kwargs.get("model"))


def install_privacy_hook() -> None:
    """Make ``pm.sample`` attach the privacy report to its result (idempotent).

    PyMC has no registry for this, so the two functions through which every ``pm.sample`` run
    returns its ``DataTree``, ``pymc.sampling.mcmc._sample_return`` (PyMC's samplers) and
    ``_sample_external_nuts`` (nutpie, numpyro, blackjax), are wrapped
    (:func:`pymc_dp._pymc_hooks.wrap_module_function`). The result gets
    :func:`attach_privacy` with the defaults when the model has at least one release (an
    observed ``Privatized``/``Release`` node or a tempered OPS likelihood); models without one,
    and ``return_inferencedata=False`` (a ``MultiTrace``), are returned unchanged.

    Examples
    --------
    >>> from pymc.sampling import mcmc
    >>> install_privacy_hook()
    >>> install_privacy_hook()  # a second call changes nothing
    >>> mcmc._sample_return.__name__, mcmc._sample_external_nuts.__name__
    ('_sample_return', '_sample_external_nuts')
    >>> getattr(mcmc._sample_return, "_pymc_dp_hook", False)
    True
    """
    global _PYMC_SAMPLE_RETURN, _PYMC_SAMPLE_EXTERNAL
    from pymc.sampling import mcmc

    from pymc_dp._pymc_hooks import wrap_module_function

    original = wrap_module_function([mcmc], "_sample_return", _sample_return)
    if original is not None:
        _PYMC_SAMPLE_RETURN = original
    original = wrap_module_function([mcmc], "_sample_external_nuts", _sample_external_nuts)
    if original is not None:
        _PYMC_SAMPLE_EXTERNAL = original


# importing pymc_dp (which imports this module) installs the hook; idempotent
install_privacy_hook()
