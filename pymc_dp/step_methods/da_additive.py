"""The additive path of the data-augmentation step: ``T(x) = C + sum_i t(x_i)``.

:func:`per_record` derives the graph of the per-record contribution ``t`` from the statistic
itself (the statistic on one-record data sets, vectorized over records);
:func:`compile_additive` compiles ``t`` and checks numerically that the decomposition holds
(the same ``C`` at the current records, forward draws and records made to differ; also at
random values of other variables when ``T`` involves them) and that the records are
conditionally independent (changing record ``j`` changes only row ``j`` of the terms).
:func:`additive_sweep` runs one sweep of a block: draw the ``n`` proposals, evaluate their
contributions, and run the compiled accept/reject kernel (:mod:`pymc_dp.kernels.da_sweep`).

A block sweep takes ``(spec, scratch, args, rng)`` and returns a :class:`SweepResult`: the new
record arrays (fresh arrays, in the order of ``spec.names``) and the acceptance statistics. The
generic path (:func:`pymc_dp.step_methods.da_generic.generic_sweep`) and other record steps
follow the same contract, so the adapter can swap them.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.step_methods.data_augmentation import DataAugmentation
>>> with pm.Model() as model:
...     x = pm.Bernoulli("x", p=0.5, shape=10)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=4.0)
...     step = DataAugmentation([x], rng=1)
>>> (spec, scratch), point = step._blocks[0], model.initial_point()
>>> args = [point[name] for name in step._input_names]
>>> res = additive_sweep(spec, scratch, args, np.random.default_rng(0))
>>> [r.shape for r in res.records], 0.0 < res.min_prob <= res.mean_prob <= 1.0
([(10,)], True)
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.type import RandomType

from pymc_dp.kernels.da_sweep import DANoise, DAState, SensitivityExceeded, da_step
from pymc_dp.step_methods import da_chunks
from pymc_dp.step_methods.da_blocks import is_zeros
from pymc_dp.step_methods.da_checks import (
    additive_consts,
    check_rows,
    differing_records,
    forward_error,
    mixtures,
    sensitivity_message,
)
from pymc_dp.step_methods.da_chunks import RecordChunks, chunked_sweep

__all__ = [
    "AdditiveFit",
    "SweepResult",
    "additive_sweep",
    "compile_additive",
    "per_record",
]


def _large(n: int) -> bool:
    """Whether a block of ``n`` records is large (:data:`~pymc_dp.step_methods.da_chunks.
    LARGE_BLOCK`, read at call time)."""
    return n >= da_chunks.LARGE_BLOCK


class SweepResult(NamedTuple):
    """What a block sweep returns.

    ``records``: the new record arrays (fresh, in the order of ``spec.names``);
    ``n_accepted``: accepted proposals; ``min_prob`` / ``mean_prob``: minimum and mean over
    records of the acceptance probability ``min(1, r_i)``.
    """

    records: list
    n_accepted: int
    min_prob: float
    mean_prob: float


class AdditiveFit(NamedTuple):
    """A compiled, checked additive decomposition (:func:`compile_additive`).

    ``check_pairs()`` yields ``(start, t_alt, t_cur)``: ``t`` at the records made to differ and
    at the current ones, from record ``start`` on (one pair, or one per chunk), for the
    construction-time sensitivity check. ``chunks`` is the
    :class:`~pymc_dp.step_methods.da_chunks.RecordChunks` of a large block (else None).
    """

    fn: object
    has_extra: bool
    proposer: object
    const: np.ndarray
    free_T: bool
    check_pairs: object
    chunks: object = None


def _batched_leaves(stats, replace, n, rows, span=None):
    """Constants and shared data of leading length ``n`` in ``stats``, split into records
    (only records ``start:stop`` with ``span = (start, stop)``, symbolic scalars)."""
    for leaf in graph_inputs(stats):
        if leaf in replace or isinstance(leaf.type, RandomType):
            continue
        if isinstance(leaf, Constant):
            shape = np.shape(leaf.data)
        elif isinstance(leaf, SharedVariable):
            shape = np.shape(leaf.get_value(borrow=True))
        else:
            continue
        if len(shape) >= 1 and shape[0] == n:
            part = rows(leaf) if span is None else leaf[span[0] : span[1]]
            replace[leaf] = pt.expand_dims(part, 1)


def per_record(g, batch_leaves, recs=None, span=None):
    """Graph of t(x_i) for all i, shape (n, m): the statistic on one-record data sets.

    ``g`` is a :class:`~pymc_dp.step_methods.da_blocks.BlockGraph`. With ``batch_leaves``,
    data of leading length ``n`` in the statistic are split into records too. With ``recs``
    (value var -> replacement), t is evaluated at the replacement records (e.g. the proposals)
    instead of the value variables. With ``span = (start, stop)`` (symbolic scalars) the
    replacement records are records ``start:stop`` and the data are sliced to match. None when
    the statistic cannot be vectorized so.
    """

    def rows(v):
        return v if recs is None else recs.get(v, v)

    replace = {v: pt.expand_dims(rows(v), 1) for v in g.values}
    if batch_leaves:
        _batched_leaves(g.stats, replace, g.n, rows, span)
    try:
        t = vectorize_graph(g.T_flat, replace=replace)
    except Exception:
        return None
    if t.type.ndim != 2:
        return None
    return t


def _free_inputs(g) -> list:
    """Inputs of the statistic other than the block's records, constants and shared data."""
    block_set = set(g.values)
    return [
        i
        for i in graph_inputs([g.T_flat])
        if not isinstance(i, Constant | SharedVariable) and i not in block_set
    ]


def _t_function(g, t_recs, recs_in, free):
    """Compiled ``fn(*args, *records) -> [t (n, m), extra (n,)?, T?]`` and ``has_extra``."""
    outputs = [pt.cast(t_recs, "float64")]
    has_extra = bool(g.lw_cur.owner is not None and not is_zeros(g.lw_cur))
    if has_extra:
        value_to_recs = dict(zip(g.values, recs_in, strict=True))
        outputs.append(graph_replace(g.lw_cur, value_to_recs, strict=False) - g.lw_cur)
    if free:
        outputs.append(g.T_flat)
    fn = g.compile(outputs, recs_in)
    fn.trust_input = True
    return fn, has_extra


def _chunk_function(g, batch_leaves, free, has_extra):
    """:class:`~pymc_dp.step_methods.da_chunks.RecordChunks` of a large block, or None.

    Only when ``t`` reads nothing but the records and data split into records (no other
    variable, no observed children's log-ratios): then ``t`` of records ``start:stop`` is rows
    ``start:stop`` of ``t`` of all records, whatever else the point holds.
    """
    if not _large(g.n) or free or has_extra:
        return None
    start, stop = pt.lscalar("start"), pt.lscalar("stop")
    recs = [pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape[1:]), name=f"{v.name}_chunk")
            for v in g.values]  # fmt: skip
    t = per_record(g, batch_leaves, dict(zip(g.values, recs, strict=True)), (start, stop))
    if t is None:
        return None
    allowed = {start, stop, *recs}
    if any(
        not isinstance(i, Constant | SharedVariable) and i not in allowed for i in graph_inputs([t])
    ):
        return None
    fn = g.compile([pt.cast(t, "float64")], [start, stop, *recs])
    fn.trust_input = True
    return RecordChunks(fn, g.n, da_chunks.CHUNK)


class _Checker:
    """Evaluates ``[T, sum_i t(x_i)]`` (:meth:`at`) and the stacked per-record log-density
    terms (:meth:`rows_at`) with given records put into a point.

    Two functions, so that the many additivity evaluations do not also compute the row terms.
    For large blocks (:data:`~pymc_dp.step_methods.da_chunks.LARGE_BLOCK` records on) they are
    compiled in the block's own mode (by default the C VM: fused loops, garbage collection):
    unfused, a Python-linker evaluation of 10^8 records held several temporary arrays per term
    at once (the peak of the step's construction). With ``chunks``, ``sum_i t(x_i)`` is summed
    chunk by chunk, by the very function the sweep uses: the decomposition checked is the one
    sampled, and no ``(n, m)`` array is made.
    """

    def __init__(self, g, t_flat, chunks=None):
        # the block's own compile mode (the C VM with garbage collection by default for large
        # blocks); None: the Python linker (CHECK_MODE)
        mode = g.ck.get("mode") if _large(g.n) else None
        outs = [g.T_flat] if chunks is not None else [g.T_flat, t_flat.sum(0)]
        self.check = g.compile_check(outs, mode=mode)
        self._rows = g.compile_check([pt.stack(g.row_terms)], mode=mode)
        self.chunks = chunks
        self.pos = g.pos
        self.args = g.args
        self.n = g.n

    def _point(self, recs, base):
        a = list(self.args if base is None else base)
        for p, r in zip(self.pos, recs, strict=True):
            a[p] = r
        return a

    def at(self, recs, base=None):
        """``[T, sum_i t(x_i), None]`` at records ``recs`` (in ``base``, default the point)."""
        point = self._point(recs, base)
        out = [np.asarray(o, dtype=np.float64) for o in self.check(*point)]
        if self.chunks is not None:
            out.append(self.chunks.total(point, recs))
        return [*out, None]

    def rows_at(self, recs, base=None):
        """The stacked per-record log-density terms at records ``recs``."""
        return np.asarray(self._rows(*self._point(recs, base))[0], dtype=np.float64)


def _random_point(args, pos, rng) -> list:
    """``args`` with unit-scale noise on every float input that is not a record."""
    r_args = list(args)
    for i_, a_ in enumerate(r_args):
        if i_ not in pos and np.issubdtype(np.asarray(a_).dtype, np.floating):
            # an ndarray of the same dtype (the compiled functions trust input)
            r_args[i_] = np.asarray(a_ + rng.normal(size=np.shape(a_)), dtype=np.asarray(a_).dtype)
    return r_args


def _holds_elsewhere(chk, proposer, rng) -> bool:
    """The decomposition at two random values of the other variables, with random records.

    A coupling term whose coefficient is 0 at the initial point passes the check there; this
    one does not.
    """
    for _ in range(2):
        r_args = _random_point(chk.args, chk.pos, rng)
        try:
            r_cur = [np.array(r) for r in proposer.draw(r_args, rng)]
            r_alt, _ = differing_records(lambda a=r_args: proposer.draw(a, rng), r_cur, chk.n)
        except Exception:
            return False
        configs = itertools.chain([r_cur], mixtures(r_cur, r_alt, chk.n, rng))
        if additive_consts(chk.at, r_args, configs) is None:
            return False
    return True


def _forward_draws(g, proposer, rng, k=2):
    """``k`` forward draws of the records at the construction point, one at a time (each is a
    full set of records: a generator keeps one in memory)."""
    for _ in range(k):
        try:
            d = proposer.draw(g.args, rng)
        except Exception as err:
            raise forward_error(g.label, err) from err
        yield d


def compile_additive(g, batch_leaves, get_proposer):
    """Compile and check the additive decomposition of block graph ``g``.

    ``get_proposer()`` returns the block's proposer (built once per block). Returns an
    :class:`AdditiveFit`, or None when the statistic is not (provably) additive, or when its
    one-record form cannot be evaluated (records picked by a mask or an index): the exact
    generic path is then taken. Raises ``ValueError`` when the records cannot be forward-sampled
    or are not conditionally independent.
    """
    t_flat = per_record(g, batch_leaves)
    if t_flat is None:
        return None
    recs_in = [v.type(name=f"{v.name}_records") for v in g.values]
    t_recs = per_record(g, batch_leaves, dict(zip(g.values, recs_in, strict=True)))
    if t_recs is None:
        return None
    free = bool(_free_inputs(g))
    fn, has_extra = _t_function(g, t_recs, recs_in, free)
    chunks = _chunk_function(g, batch_leaves, free, has_extra)
    proposer = get_proposer()
    chk = _Checker(g, t_flat, chunks)
    rng = np.random.default_rng(12345)
    proposer.reseed(rng)
    first = next(_forward_draws(g, proposer, rng, 1))
    cur = [chk.args[p] for p in chk.pos]
    if any(d.shape != np.shape(a) for d, a in zip(first, cur, strict=True)):
        return None
    del first
    # 1. additivity: D(x) = T(x) - sum_i t(x_i) is the same constant at the current records,
    # at two draws, and at configurations built from records that (really) differ from the
    # current ones: all records changed, each of up to 16 records changed alone, and random
    # halves changed. Sparse records (Bernoulli(0.01)) rarely change in a draw, so the
    # changed records are searched for (further draws, then a neighbouring discrete value);
    # a record that cannot be changed makes the check inconclusive: generic path.
    alt, changed = differing_records(lambda: proposer.draw(chk.args, rng), cur, g.n)
    if not changed.all():
        return None
    configs = itertools.chain([cur], _forward_draws(g, proposer, rng), mixtures(cur, alt, g.n, rng))
    try:
        consts = additive_consts(chk.at, chk.args, configs)
        if chunks is None:  # (a chunked block's sums above ran the chunk function)
            fn(*chk.args, *cur)
    except Exception:
        # the one-record graph does not run: records selected by a boolean mask or an integer
        # index (x[mask].sum(), x[idx].sum()) have no one-record form (broadcast / index
        # errors). Not a decomposition: the next candidate, or the exact generic path
        return None
    if consts is None or (free and not _holds_elsewhere(chk, proposer, rng)):
        return None
    # 2. conditional independence: changing record j changes only row j of the terms
    check_rows(chk.rows_at, cur, alt, changed, g.n, g.label)
    const = np.ascontiguousarray(np.asarray(consts, dtype=np.float64).reshape(-1))
    if chunks is not None:
        pairs = lambda: chunks.pairs(chk.args, alt, cur)  # noqa: E731
    else:
        t_cur = np.ascontiguousarray(fn(*chk.args, *cur)[0], dtype=np.float64)
        t_alt = np.ascontiguousarray(fn(*chk.args, *alt)[0], dtype=np.float64)
        pairs = lambda: iter([(0, t_alt, t_cur)])  # noqa: E731
    return AdditiveFit(fn, has_extra, proposer, const, free, pairs, chunks)


def _current_t(spec, scratch, args, cur):
    """t of the current records: cached from the previous sweep when these are the very arrays
    it returned (and T involves no other variable), else evaluated."""
    last = scratch.last
    if (
        spec.free_T
        or last is None
        or len(last) != len(cur)
        or any(a is not c for a, c in zip(last, cur, strict=True))
    ):
        return np.array(spec.fn(*args, *cur)[0], dtype=np.float64, order="C")
    return scratch.t_cur


def additive_sweep(spec, scratch, args, rng) -> SweepResult:
    """One sweep of a block whose statistic is ``C + sum_i t(x_i)``.

    Parameters
    ----------
    spec : BlockSpec
        The block (:class:`~pymc_dp.step_methods.da_spec.BlockSpec`, additive).
    scratch : BlockScratch
        Its buffers and the cached contributions of the current records (updated).
    args : list of ndarray
        Values of the model's value variables (the current records at ``spec.pos``).
    rng : numpy.random.Generator

    Returns
    -------
    SweepResult
    """
    if getattr(spec, "chunk_fn", None) is not None:
        props, n_acc, min_prob, mean_prob = chunked_sweep(spec, scratch, args, rng, _noise(spec))
        return SweepResult(props, n_acc, min_prob, mean_prob)
    cur = [args[p] for p in spec.pos]
    # evaluated first, so that nothing computed below can share memory with its output
    t_cur = _current_t(spec, scratch, args, cur)
    props = spec.proposer.draw(args, rng)
    res = spec.fn(*args, *props)
    extra = np.ascontiguousarray(res[1], dtype=np.float64) if spec.has_extra else None
    const = spec.const
    if spec.free_T:  # C depends on other variables: C = T(current records) - sum_i t(x_i)
        const = np.asarray(res[-1], dtype=np.float64).reshape(-1) - t_cur.sum(axis=0)
    state = DAState(t_cur, const, np.empty_like(const))
    try:
        _, info = da_step(state, res[0], rng, _noise(spec), extra, inplace=True)
    except SensitivityExceeded as e:
        raise ValueError(sensitivity_message(spec, e.record, e.release, e.change)) from None
    # the proposal arrays are fresh: they become the new records, with the rejected rows
    # restored from the current ones
    rej = info.rejected
    for prop, c in zip(props, cur, strict=True):
        prop[rej] = c[rej]
    if not _large(spec.n):
        scratch.t_cur = t_cur
        scratch.last = props
    else:
        # not kept: 8 bytes per record and released component for the whole run, against
        # one evaluation of t per sweep (about 5% of a sweep's time)
        scratch.t_cur = scratch.last = None
    return SweepResult(props, info.n_accepted, info.min_prob, info.mean_prob)


def _noise(spec) -> DANoise:
    """The kernel's view of the block's releases (values, noise law, declared sensitivities)."""
    sens = spec.sens if spec.sens is not None and np.isfinite(spec.sens).any() else None
    return DANoise(spec.z, spec.logpdf, spec.params, sens, spec.comp_release, spec.l2)
