"""Per-record contributions of a large block, evaluated a slice of records at a time.

A block of ``n >= LARGE_BLOCK`` records whose statistic is ``T(x) = C + sum_i t(x_i)`` (the
additive path of :mod:`pymc_dp.step_methods.da_additive`) would otherwise hold ``t`` of all its
records at once: an ``(n, m)`` float64 array for the current records, another for the
proposals, and the intermediates of the graph that computes them (``X_i * y_i`` of a
regression is ``(n, k)``). For a regression with 10 covariates that is over 250 bytes per
record. Here ``t`` is compiled with the record range as an input, ``fn(*args, start, stop,
*records[start:stop])``, and the sweep (Ju et al. 2022, Algorithm 1: records offered their
proposals in order, against the running statistic) walks the records chunk by chunk:

* the statistic of the current records, ``T = C + sum_k sum_{i in chunk k} t(x_i)``, is summed
  chunk by chunk, or taken from the previous sweep when the records are the very arrays it
  returned (it re-summed them afresh, so rounding does not accumulate over sweeps);
* chunk ``k``'s records are offered their proposals by the same compiled kernel
  (:func:`~pymc_dp.kernels.da_sweep.da_step`) with the constant ``T - sum_{i in k} t(x_i)``:
  every other record's contribution, at its value after the chunks before. The kernel's
  running statistic is then the statistic of all ``n`` records, as in one sweep of the whole
  block, and the uniforms are drawn from the same generator in the same order, so the
  decisions are those of the whole-block sweep (the same bit for bit when the contributions
  sum exactly, e.g. counts).

The records are updated in place (:func:`chunked_sweep`). Memory is then the records (one
array per record variable, for the whole run), their proposals during a sweep, and a chunk's
arrays; time is one more evaluation of ``t`` on the first sweep.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.step_methods import da_chunks
>>> from pymc_dp.step_methods.data_augmentation import DataAugmentation
>>> with pm.Model() as model, da_chunks.chunking(large_block=64, size=50):
...     x = pm.Bernoulli("x", p=0.5, shape=120)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=60.0)
...     step = DataAugmentation([x], rng=1)
>>> spec = step._blocks[0][0]
>>> spec.chunk_fn.bounds()
[(0, 50), (50, 100), (100, 120)]
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from pymc_dp.kernels.da_sweep import DAState, SensitivityExceeded, da_step
from pymc_dp.step_methods.da_checks import sensitivity_message

__all__ = ["CHUNK", "LARGE_BLOCK", "RecordChunks", "chunked_sweep", "chunking"]

#: from this many records on, a block keeps no per-record arrays between sweeps beyond the
#: records themselves, its compiled functions free their intermediates after each call, and
#: its contributions are evaluated :data:`CHUNK` records at a time
LARGE_BLOCK = 1 << 16

#: records per chunk (about 5 MB per float64 array of 10 components)
CHUNK = 1 << 16


@contextlib.contextmanager
def chunking(large_block: int, size: int):
    """Temporarily set :data:`LARGE_BLOCK` and :data:`CHUNK` (tests and examples: the chunked
    path on small blocks). Steps built inside keep their chunk size."""
    global LARGE_BLOCK, CHUNK
    old = LARGE_BLOCK, CHUNK
    LARGE_BLOCK, CHUNK = int(large_block), int(size)
    try:
        yield
    finally:
        LARGE_BLOCK, CHUNK = old


class RecordChunks:
    """A compiled ``fn(*args, start, stop, *records) -> [t]`` over record ranges.

    Parameters
    ----------
    fn : compiled function
        ``t`` of records ``start:stop`` (given as arrays of that length), shape
        ``(stop - start, m)``.
    n : int
        Records in the block.
    size : int
        Records per chunk.
    """

    def __init__(self, fn, n: int, size: int):
        self.fn, self.n, self.size = fn, int(n), max(1, int(size))

    def bounds(self) -> list:
        """``[(start, stop), ...]`` covering ``0..n`` in order."""
        return [(s, min(s + self.size, self.n)) for s in range(0, self.n, self.size)]

    def rows(self, args, recs, start: int, stop: int) -> np.ndarray:
        """``t`` of records ``start:stop`` of ``recs`` (C-contiguous float64, (stop-start, m))."""
        # 0-d arrays: the function trusts its input (no conversion of numpy scalars)
        lo, hi = np.array(start, dtype=np.int64), np.array(stop, dtype=np.int64)
        out = self.fn(*args, lo, hi, *(r[start:stop] for r in recs))
        return np.ascontiguousarray(out[0], dtype=np.float64)

    def total(self, args, recs) -> np.ndarray:
        """``sum_i t(x_i)`` over all records, summed chunk by chunk in record order."""
        acc = None
        for s, e in self.bounds():
            part = self.rows(args, recs, s, e).sum(axis=0)
            acc = part if acc is None else acc + part
        return acc

    def pairs(self, args, new, old):
        """``(start, t(new[start:stop]), t(old[start:stop]))`` for each chunk, in order."""
        for s, e in self.bounds():
            yield s, self.rows(args, new, s, e), self.rows(args, old, s, e)


def _cached_total(scratch, cur):
    """The previous sweep's statistic when ``cur`` are the very arrays it returned."""
    last = getattr(scratch, "last_ref", None)
    if last is None or len(last) != len(cur):
        return None
    if any(ref() is not c for ref, c in zip(last, cur, strict=True)):
        return None
    return scratch.total


def chunked_sweep(spec, scratch, args, rng, noise):
    """One sweep of a large additive block, chunk by chunk (see the module docstring).

    The records are updated in place: the arrays of ``args`` at ``spec.pos`` (copies when they
    are read-only) receive the accepted proposals, chunk by chunk, and are returned. A large
    block's records are then one array per record variable for the whole run: the point, NUTS's
    view of the other variables' values, and PyMC's initial point share it, where fresh arrays
    every sweep would keep two generations of records alive (the point's and the one NUTS saw
    last). Returns ``(records, n_accepted, min_prob, mean_prob)``; ``scratch.total`` /
    ``scratch.last_ref`` keep the records' statistic (``m`` numbers) and weak references to the
    arrays for the next sweep.
    """
    chunks = spec.chunk_fn
    cur = [args[p] if args[p].flags.writeable else args[p].copy() for p in spec.pos]
    total = _cached_total(scratch, cur)
    if total is None:
        total = spec.const + chunks.total(args, cur)
    props = spec.proposer.draw(args, rng)
    stat = np.array(total, dtype=np.float64)
    new_total = np.array(spec.const, dtype=np.float64)
    n_acc, min_prob, sum_prob = 0, 1.0, 0.0
    for s, e in chunks.bounds():
        t_cur = chunks.rows(args, cur, s, e)
        t_prop = chunks.rows(args, props, s, e)
        const_k = stat - t_cur.sum(axis=0)
        state = DAState(t_cur, const_k, np.empty_like(const_k))
        try:
            state, info = da_step(state, t_prop, rng, noise, None, inplace=True)
        except SensitivityExceeded as err:
            msg = sensitivity_message(spec, s + err.record, err.release, err.change)
            raise ValueError(msg) from None
        stat = state.stat.copy()
        new_total += t_cur.sum(axis=0)  # updated in place: the new records' contributions
        for prop, c in zip(props, cur, strict=True):
            p_k, c_k = prop[s:e], c[s:e]
            p_k[info.rejected] = c_k[info.rejected]
            c_k[...] = p_k
        n_acc += info.n_accepted
        min_prob = min(min_prob, info.min_prob)
        sum_prob += info.mean_prob * (e - s)
    del props
    scratch.total = new_total
    scratch.last_ref = [weakref.ref(c) for c in cur]
    return cur, n_acc, min_prob, sum_prob / spec.n
