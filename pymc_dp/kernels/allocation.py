r"""Latent records kept consistent with a collapsed statistic: transport and refresh moves.

A model with :math:`N` exchangeable latent records :math:`x_1, \dots, x_N` whose release depends
on them only through a statistic :math:`S` (their sum, or their category counts) can be sampled
by drawing :math:`S` from its exact conditional instead of visiting every record. The records must
still be a draw of :math:`x \mid S`, and for i.i.d. records this law is free of the parameters:

* Categorical (values :math:`0, \dots, K-1`; Bernoulli is :math:`K = 2`) with counts :math:`c`:
  uniform over the :math:`M(c) = N! / \prod_j c_j!` arrangements with those counts;
* Poisson with total :math:`S`: :math:`\mathrm{Multinomial}(S, (1/N, \dots, 1/N))`;
* Normal :math:`(\mu, \sigma^2)`, :math:`\sigma` fixed, with sum :math:`S`:
  :math:`\mathcal N(S/N\,\mathbf 1, \sigma^2 (I - \mathbf 1 \mathbf 1^\top / N))`.

Each class here holds the records (``.x``, a 1-D numpy array updated **in place**) and offers

* ``move_to(new, rng)``, a *transport*: it maps a draw of :math:`x \mid S` to an exact draw of
  :math:`x \mid S'` at cost :math:`O(|S' - S|)` (times :math:`K` for categorical records), without
  a pass over the records (except Normal, where every record moves by :math:`(S' - S)/N`: one
  vectorised in-place add);
* ``refresh(n, rng)``: ``n`` cheap moves that leave :math:`x \mid S` invariant and make the
  records' chain irreducible (and aperiodic), :math:`O(n)`.

Proofs
------
*Relabelling (categorical).* Let :math:`x` be uniform over arrangements with counts :math:`c`,
and relabel a uniformly chosen member of category :math:`j` as :math:`k \ne j`; write
:math:`c' = c - e_j + e_k`. An arrangement :math:`x'` with counts :math:`c'` arises from exactly
:math:`c'_k = c_k + 1` pairs (arrangement, chosen record): its members of category :math:`k`,
each turned back into :math:`j`. Each pair has probability :math:`1/(M(c)\,c_j)`, so
:math:`P(x') = (c_k + 1)/(M(c)\,c_j) = 1/M(c')` because
:math:`M(c') = M(c)\,c_j/(c_k + 1)`: uniform. ``move_to`` is a sequence of such relabellings,
from categories above their target to categories below it (the sequence depends on
:math:`c, c'` only), so it maps the uniform law on :math:`c` to the uniform law on :math:`c'`.
A record is relabelled at most once (it lands in a receiving category, never a donor).

*Bulk transport (categorical, large moves).* When one category :math:`j` gives :math:`m`
records to one other :math:`r` (e.g. Bernoulli records), each of its :math:`c_j` members is
taken independently with probability :math:`t/256` (one byte of a random word each: exact)
and relabelled :math:`r`, then a uniformly chosen subset of the taken ones is put back, or of
the others taken, until exactly :math:`m` are (exact integer uniforms, Floyd's algorithm). The
procedure treats the records alike whatever their indices: for a permutation :math:`\sigma`
of the records, its result from :math:`\sigma x` has the law of its result from :math:`x`
permuted by :math:`\sigma`. So it maps a permutation-invariant law (the uniform law on
arrangements with counts :math:`c`) to a permutation-invariant law on arrangements with
counts :math:`c'` (reached exactly), and the only such law is the uniform one. (The
one-at-a-time relabelling is exact by the same argument.)

*Swaps (categorical refresh).* Pick records :math:`i, j` uniformly and independently and swap
their values. For each fixed pair this is a bijection of the arrangements with counts
:math:`c`, so it maps the uniform law to itself; the mixture over pairs does too. Transpositions
generate the symmetric group, so every arrangement is reachable (irreducible), and :math:`i = j`
has positive probability (aperiodic).

*Units (Poisson).* :math:`\mathrm{Multinomial}(S, p)` counts are the labels of :math:`S` i.i.d.
units. Adding a unit to a record drawn from :math:`p` gives :math:`\mathrm{Multinomial}(S + 1,
p)`. Removing a uniformly chosen unit (record :math:`r` with probability :math:`x_r/S`) gives
:math:`\sum_r P(x' + e_r)\,(x'_r + 1)/S = \frac{(S-1)!}{\prod_r x'_r!} \prod_r p_r^{x'_r}
\sum_r p_r`, the :math:`\mathrm{Multinomial}(S - 1, p)` pmf. The refresh move (a uniformly chosen
unit moved to a uniform record) is a removal followed by an addition, so it is invariant; it
reaches every configuration and can stay put (irreducible, aperiodic).

*Shift and pairs (Normal).* If :math:`x \sim \mathcal N(S/N\,\mathbf 1, \Sigma)` then
:math:`x + (S' - S)/N\,\mathbf 1 \sim \mathcal N(S'/N\,\mathbf 1, \Sigma)`: the same covariance,
the shifted mean. Given all records but :math:`x_i, x_j` and the sum, the pair's conditional is
that of i.i.d. normals given :math:`x_i + x_j = s`: :math:`x_i \sim \mathcal N(s/2, \sigma^2/2)`,
:math:`x_j = s - x_i` (:math:`x_i - x_j` is independent of :math:`x_i + x_j`). Redrawing it is a
Gibbs step, so the law is invariant; the differences :math:`e_i - e_j` span the sum-zero
hyperplane, so random pairs make the chain irreducible there.

Index structures, cost and memory
---------------------------------
:class:`CategoricalAllocation` keeps the records grouped by category: a permutation ``order``
of the record indices in which category :math:`j` occupies positions
``start[j] : start[j + 1]`` (built once by a counting sort, :math:`O(N + K)`). A uniform member
of category :math:`j` is ``order[start[j] + U]``; relabelling it moves it across the
:math:`|k - j|` group boundaries between the two categories by one swap each, so ``move_to``
costs :math:`O(K \sum_j |c'_j - c_j|)`. A swap of two uniform records swaps their entries in
``order`` (positions keep their category) and their values: :math:`O(1)`. Memory:
:math:`N` (the records, the input's integer dtype) plus :math:`N` indices (int32 below
:math:`2^{31}` records, else int64), e.g. 500 MB for :math:`10^8` int8 records.

:class:`PoissonAllocation` keeps an array ``units`` of length :math:`\ge S` (unit to its record):
adding a unit appends it, removing unit :math:`u` moves the last unit into slot :math:`u`
(swap-remove). The buffer grows geometrically (at least doubling), so growth is amortised
:math:`O(1)` per unit. Memory :math:`O(N + S)`: :math:`N` records plus at most
:math:`2 \max S` indices (int32 or int64 as above).

:class:`NormalAllocation` has no index: a shift is one in-place add over the records, a pair
update :math:`O(1)`. Rounding makes the records' sum drift from the statistic by about
:math:`\varepsilon |x_i + x_j|` per pair update (a random walk); :meth:`NormalAllocation.resync`
re-sums them (compensated summation) and spreads the discrepancy evenly. Calling it every
:math:`10^3`--:math:`10^4` refresh calls keeps the sum to rounding.

Each call has a fixed cost of about 20--40 microseconds (argument checks and numba's dispatch
on a ``Generator``), measured on the development machine; the moves themselves cost
0.2 microseconds per swap, unit move or pair update at :math:`N = 10^8` (cache misses).

Random draws: uniform integers by rejection from 64-bit words masked to the next power of two
(exact), standard normals by numba's implementation of numpy's ziggurat, both read from the
``numpy.random.Generator``'s bit generator inside numba (so ``rng`` advances as with numpy).
"""

from __future__ import annotations

import ctypes
import math
import numbers

import numba
import numpy as np
from numba.core import cgutils
from numba.core import types as nb_types
from numba.extending import intrinsic
from numba.np.random.distributions import random_standard_normal
from numba.np.random.generator_core import next_uint64

from pymc_dp._validation import _is_date_or_duration

__all__ = ["CategoricalAllocation", "NormalAllocation", "PoissonAllocation", "RngWords"]

# record dtypes kept as given (numba kernels are compiled per dtype); others are converted to
# int64 when copying (uint64 is left out: its maximum does not fit the int64 kernels)
_KEPT_INT = tuple(
    np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32)
)
_KEPT_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))
_INT32_RECORDS = 2**31 - 1
#: default :attr:`CategoricalAllocation.bulk_min`: about 10^6 records (one at a time is as fast
#: while the records fit the CPU's caches, and keeps the draws of earlier versions)
BULK_MIN = 2**20


# --------------------------------------------------------------------------- raw bit generator

_BITGEN_TYPE = nb_types.NumPyRandomBitGeneratorType("bit_generator")


@intrinsic
def _bitgen_from(typingctx, state, next_u64, next_u32, next_dbl):  # pragma: no cover - compiled
    """numba's bit-generator struct from raw pointers (what unboxing a ``Generator`` builds on
    every call, through ``ctypes.cast``: about 6 us; here built once per :class:`RngWords`)."""
    sig = _BITGEN_TYPE(nb_types.uintp, nb_types.uintp, nb_types.uintp, nb_types.uintp)

    def codegen(context, builder, signature, args):
        bg = cgutils.create_struct_proxy(_BITGEN_TYPE)(context, builder)
        bg.parent = cgutils.get_null_value(context.get_value_type(nb_types.pyobject))
        bg.state_address = args[0]
        bg.state = args[0]
        bg.fnptr_next_uint64 = args[1]
        bg.fnptr_next_uint32 = args[2]
        bg.fnptr_next_double = args[3]
        bg.bit_generator = context.get_constant(nb_types.uintp, 0)
        return bg._getvalue()

    return sig, codegen


@numba.njit(cache=True)
def _bits(words):  # pragma: no cover - compiled
    """The bit generator of :attr:`RngWords.words`."""
    return _bitgen_from(words[0], words[1], words[2], words[3])


class RngWords:
    """A ``numpy.random.Generator``'s bit generator as raw pointers, for the ``advance`` methods.

    numba unboxes a ``Generator`` argument on every call by four ``ctypes.cast`` calls (about
    6 us); the pointers never change for a given bit generator, so they are read once here and
    passed as one uint64 array. The kernels then draw from the very same stream as the
    Generator (the same words in the same order as the ``rng`` methods), so results are
    identical. The object keeps ``rng`` alive: the pointers are valid as long as it exists.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> w = RngWords(rng)
    >>> w.rng is rng, w.words.dtype, w.words.shape
    (True, dtype('uint64'), (4,))
    """

    __slots__ = ("rng", "words")

    def __init__(self, rng):
        _check_rng(rng)
        c = rng.bit_generator.ctypes
        fns = (c.next_uint64, c.next_uint32, c.next_double)
        ptrs = [c.state.value] + [ctypes.cast(f, ctypes.c_void_p).value for f in fns]
        self.words = np.array(ptrs, dtype=np.uint64)
        self.rng = rng

    @classmethod
    def of(cls, rng, cached=None):
        """``cached`` if it holds ``rng`` itself, else new words for ``rng``."""
        if cached is not None and cached.rng is rng:
            return cached
        return cls(rng)


# --------------------------------------------------------------------------- compiled kernels


@numba.njit(cache=True)
def _below(bitgen, n):  # pragma: no cover - compiled
    """A uniform integer in ``[0, n)`` (``n >= 1``): masked 64-bit words, rejection (exact)."""
    top = np.uint64(n - 1)
    mask = top
    mask |= mask >> np.uint64(1)
    mask |= mask >> np.uint64(2)
    mask |= mask >> np.uint64(4)
    mask |= mask >> np.uint64(8)
    mask |= mask >> np.uint64(16)
    mask |= mask >> np.uint64(32)
    v = next_uint64(bitgen) & mask
    while v > top:
        v = next_uint64(bitgen) & mask
    return np.int64(v)


@numba.njit(cache=True)
def _group(x, k, order, start):  # pragma: no cover - compiled
    """Counting sort of ``x`` into ``order``/``start``; the first bad index, or -1."""
    n = x.size
    start[:] = 0
    for i in range(n):
        v = np.int64(x[i])
        if v < 0 or v >= k:
            return i
        start[v + 1] += 1
    for j in range(k):
        start[j + 1] += start[j]
    fill = start[:k].copy()
    for i in range(n):
        v = np.int64(x[i])
        order[fill[v]] = i
        fill[v] += 1
    return -1


@numba.njit(cache=True)
def _relabel(bitgen, x, order, start, j, k):  # pragma: no cover - compiled
    """Relabel a uniformly chosen member of category ``j`` (non-empty) as ``k``."""
    cur = start[j] + _below(bitgen, start[j + 1] - start[j])
    rec = order[cur]
    if k > j:
        for g in range(j, k):  # to the end of group g, then across the boundary g | g+1
            last = start[g + 1] - 1
            order[cur] = order[last]
            order[last] = rec
            start[g + 1] = last
            cur = last
    else:
        for g in range(j, k, -1):  # to the start of group g, then across g-1 | g
            first = start[g]
            order[cur] = order[first]
            order[first] = rec
            start[g] = first + 1
            cur = first
    x[rec] = k


@numba.njit(cache=True)
def _categorical_move(rng, x, order, start, target, bulk_min):  # pragma: no cover - compiled
    """Relabel records from categories above their target count to categories below it."""
    _categorical_move_bits(rng.bit_generator, x, order, start, target, bulk_min)


@numba.njit(cache=True)
def _categorical_move_bits(bitgen, x, order, start, target, bulk_min):  # pragma: no cover
    """:func:`_categorical_move` on a bit generator: one relabelling at a time, or
    :func:`_categorical_bulk` when one category gives to one other at least ``bulk_min``
    records and a quarter of all records."""
    k = target.size
    moved = 0
    donor = receiver = -1
    donors = receivers = 0
    for j in range(k):
        d = start[j + 1] - start[j] - target[j]
        if d > 0:
            moved += d
            donor = j
            donors += 1
        elif d < 0:
            receiver = j
            receivers += 1
    if donors == 1 and receivers == 1 and moved >= bulk_min and 4 * moved >= order.size:
        _categorical_bulk(bitgen, x, order, start, (donor, receiver, moved))
        return
    _categorical_relabel_all(bitgen, x, order, start, target)


@numba.njit(cache=True)
def _uniform_ranks(bitgen, d, n):  # pragma: no cover - compiled
    """A uniform ``d``-subset of ``0 .. n-1``, sorted (Floyd's algorithm, exact uniforms)."""
    chosen = set()
    for top in range(n - d, n):
        v = _below(bitgen, top + 1)
        chosen.add(top if v in chosen else v)
    out = np.empty(d, dtype=np.int64)
    i = 0
    for v in chosen:
        out[i] = v
        i += 1
    out.sort()
    return out


@numba.njit(cache=True)
def _categorical_bulk(bitgen, x, order, start, move):  # pragma: no cover - compiled
    """Relabel a uniform ``m``-subset of category ``j`` as ``r`` (``move = (j, r, m)``) in one
    pass, then rebuild the grouping (counting sort): ``O(N)``, sequential memory access, no
    allocation of ``O(N)`` memory.

    Each member is taken independently with probability ``t / 256``, ``t = round(256 m /
    c_j)`` (one byte of a 64-bit word per member: exact), then a uniform subset of the taken
    ones is put back, or of the others taken, to reach exactly ``m`` (ranks by Floyd's
    algorithm). Exact: see the module docstring, *Bulk transport*."""
    j, r, m = move
    lo = start[j]
    c = start[j + 1] - lo
    t = min(max((256 * m + c // 2) // c, 1), 256)
    taken = 0
    word = np.uint64(0)
    i = 0
    while i < c:
        word = next_uint64(bitgen)
        for b in range(min(8, c - i)):  # branch-free: every member is written (j or r)
            take = np.int64(np.int64((word >> np.uint64(8 * b)) & np.uint64(255)) < t)
            x[order[lo + i]] = j + (r - j) * take
            taken += take
            i += 1
    if taken != m:
        # put back taken - m of the taken, or take m - taken of the others: uniform ranks
        # among the members now labelled ``frm``, walked in segment order
        frm, to, d = (r, j, taken - m) if taken > m else (j, r, m - taken)
        ranks = _uniform_ranks(bitgen, d, taken if taken > m else c - taken)
        seen = 0
        nxt = 0
        for i in range(c):
            rec = order[lo + i]
            if x[rec] == frm:
                if seen == ranks[nxt]:
                    x[rec] = to
                    nxt += 1
                    if nxt == d:
                        break
                seen += 1
    _group(x, np.int64(start.size - 1), order, start)


@numba.njit(cache=True)
def _categorical_relabel_all(bitgen, x, order, start, target):  # pragma: no cover - compiled
    """Relabel one record at a time (:func:`_relabel`), donors and receivers in index order."""
    k = target.size
    donor = 0
    receiver = 0
    while True:
        while donor < k and start[donor + 1] - start[donor] <= target[donor]:
            donor += 1
        while receiver < k and start[receiver + 1] - start[receiver] >= target[receiver]:
            receiver += 1
        if donor == k or receiver == k:
            return
        _relabel(bitgen, x, order, start, donor, receiver)


@numba.njit(cache=True)
def _categorical_swaps(rng, x, order, n_swaps):  # pragma: no cover - compiled
    """Swap the values of two uniform records, ``n_swaps`` times (positions keep categories)."""
    _categorical_swaps_bits(rng.bit_generator, x, order, n_swaps)


@numba.njit(cache=True)
def _categorical_swaps_bits(bitgen, x, order, n_swaps):  # pragma: no cover - compiled
    """:func:`_categorical_swaps` on a bit generator."""
    n = order.size
    for _ in range(n_swaps):
        p = _below(bitgen, n)
        q = _below(bitgen, n)
        a = order[p]
        b = order[q]
        va = x[a]
        x[a] = x[b]
        x[b] = va
        order[p] = b
        order[q] = a


@numba.njit(cache=True)
def _categorical_advance(words, x, order, start, target, n_swaps, bulk_min):  # pragma: no cover
    """``move_to(target)`` then ``refresh(n_swaps)`` in one call; False (nothing done) unless
    ``target`` has ``k`` entries, each ``>= 0``, summing to the number of records."""
    k = start.size - 1
    if target.size != k:
        return False
    tot = 0
    for j in range(k):
        if target[j] < 0:
            return False
        tot += target[j]
    if tot != order.size:
        return False
    bitgen = _bits(words)
    _categorical_move_bits(bitgen, x, order, start, target, bulk_min)
    _categorical_swaps_bits(bitgen, x, order, n_swaps)
    return True


@numba.njit(cache=True)
def _fill_units(x, units):  # pragma: no cover - compiled
    """Write record ``r`` into ``x[r]`` consecutive slots of ``units`` (record order)."""
    u = 0
    for r in range(x.size):
        for _ in range(x[r]):
            units[u] = r
            u += 1


@numba.njit(cache=True)
def _units_add(rng, x, units, s, d, top):  # pragma: no cover - compiled
    """Add ``d`` units to uniform records; -1 (state unchanged) if a record would pass ``top``."""
    return _units_add_bits(rng.bit_generator, x, units, s, d, top)


@numba.njit(cache=True)
def _units_add_bits(bitgen, x, units, s, d, top):  # pragma: no cover - compiled
    """:func:`_units_add` on a bit generator."""
    n = x.size
    for t in range(d):
        r = _below(bitgen, n)
        if x[r] >= top:
            for u in range(s, s + t):  # roll back this call's units
                x[units[u]] -= 1
            return -1
        x[r] += 1
        units[s + t] = r
    return s + d


@numba.njit(cache=True)
def _units_remove(rng, x, units, s, d):  # pragma: no cover - compiled
    """Remove ``d`` uniformly chosen units (swap-remove); the new total."""
    return _units_remove_bits(rng.bit_generator, x, units, s, d)


@numba.njit(cache=True)
def _units_remove_bits(bitgen, x, units, s, d):  # pragma: no cover - compiled
    """:func:`_units_remove` on a bit generator."""
    for _ in range(d):
        u = _below(bitgen, s)
        x[units[u]] -= 1
        s -= 1
        units[u] = units[s]
    return s


@numba.njit(cache=True)
def _units_refresh(rng, x, units, s, n_moves, top):  # pragma: no cover - compiled
    """Move a uniform unit to a uniform record, ``n_moves`` times; the number of moves made."""
    return _units_refresh_bits(rng.bit_generator, x, units, s, n_moves, top)


@numba.njit(cache=True)
def _units_refresh_bits(bitgen, x, units, s, n_moves, top):  # pragma: no cover - compiled
    """:func:`_units_refresh` on a bit generator."""
    n = x.size
    for t in range(n_moves):
        u = _below(bitgen, s)
        r = _below(bitgen, n)
        old = units[u]
        if r != old:
            if x[r] >= top:
                return t
            x[old] -= 1
            x[r] += 1
            units[u] = r
    return n_moves


@numba.njit(cache=True)
def _units_advance(words, x, units, s, target, n_moves, top):  # pragma: no cover - compiled
    """``move_to(target)`` then ``refresh(n_moves)`` in one call (``units`` holds at least
    ``target`` slots). Returns ``(total, moves made)``; total ``-1``: a record would pass
    ``top`` while adding (state unchanged, no refresh)."""
    bitgen = _bits(words)
    if target > s:
        s = _units_add_bits(bitgen, x, units, s, target - s, top)
        if s < 0:
            return s, 0
    elif target < s:
        s = _units_remove_bits(bitgen, x, units, s, s - target)
    if s == 0:
        return s, n_moves
    return s, _units_refresh_bits(bitgen, x, units, s, n_moves, top)


@numba.njit(cache=True)
def _pair_refresh(rng, x, n_pairs, half_sd):  # pragma: no cover - compiled
    """Redraw ``(x_i, x_j)`` given ``x_i + x_j`` for ``n_pairs`` uniform pairs ``i != j``."""
    _pair_refresh_bits(rng.bit_generator, x, n_pairs, half_sd)


@numba.njit(cache=True)
def _pair_refresh_words(words, x, n_pairs, half_sd):  # pragma: no cover - compiled
    """:func:`_pair_refresh` on :attr:`RngWords.words`."""
    _pair_refresh_bits(_bits(words), x, n_pairs, half_sd)


@numba.njit(cache=True)
def _pair_refresh_bits(bitgen, x, n_pairs, half_sd):  # pragma: no cover - compiled
    """:func:`_pair_refresh` on a bit generator."""
    n = x.size
    if n < 2:
        return
    for _ in range(n_pairs):
        i = _below(bitgen, n)
        j = _below(bitgen, n - 1)
        if j >= i:
            j += 1
        s = np.float64(x[i]) + np.float64(x[j])
        xi = 0.5 * s + half_sd * random_standard_normal(bitgen)
        x[i] = xi
        x[j] = s - xi


@numba.njit(cache=True)
def _compensated_sum(x):  # pragma: no cover - compiled
    """Neumaier's compensated sum of ``x`` in float64 (error about one rounding of the result)."""
    total = 0.0
    comp = 0.0
    for i in range(x.size):
        v = np.float64(x[i])
        t = total + v
        if abs(total) >= abs(v):
            comp += (total - t) + v
        else:
            comp += (v - t) + total
        total = t
    return total + comp


# --------------------------------------------------------------------------- validation


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def _plain(value, kind) -> bool:
    """``value`` is a number of ``kind`` (``numbers.Integral`` or ``numbers.Real``) and not a
    bool or a numpy duration (``np.timedelta64`` subclasses ``np.signedinteger``)."""
    return (
        isinstance(value, kind)
        and not isinstance(value, bool | np.bool_)
        and not _is_date_or_duration(value)
    )


def _count(name: str, value) -> int:
    """``value`` as an int if it is an integer >= 0 (bool and integral floats are refused)."""
    if not _plain(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= 0, got {value!r}")
    v = int(value)
    if v >= 0:
        return v
    raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


def _index_dtype(n: int):
    return np.int32 if n <= _INT32_RECORDS else np.int64


def _adopt(x, floating: bool) -> np.ndarray:
    """``x`` itself (``copy=False``): a writeable contiguous 1-D array of a kernel dtype."""
    if not isinstance(x, np.ndarray):
        raise TypeError("with copy=False, x must be a numpy array")
    ok = x.dtype in (_KEPT_FLOAT if floating else _KEPT_INT)
    if not (ok and x.ndim == 1 and x.flags.c_contiguous and x.flags.writeable):
        kind = "float32/64" if floating else "int8/16/32/64 or uint8/16/32"
        raise ValueError(
            f"with copy=False, x must be a writeable C-contiguous 1-D {kind} array, "
            f"got dtype {x.dtype}, shape {x.shape}"
        )
    return x


def _copy_integers(x) -> np.ndarray:
    """A C-contiguous 1-D copy of integer records: kernel dtypes kept, others to int64."""
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {a.shape}")
    if a.dtype in _KEPT_INT:
        return np.array(a, order="C", copy=True)
    if a.dtype.kind in "biu" or (a.dtype.kind == "f" and np.all(np.isfinite(a))):
        b = a.astype(np.int64)
        if np.array_equal(b, a):
            return b
    raise ValueError(f"x must hold integers, got dtype {a.dtype}")


def _records(x, copy: bool, floating: bool = False) -> np.ndarray:
    if not copy:
        return _adopt(x, floating)
    if not floating:
        return _copy_integers(x)
    a = np.array(x, order="C", copy=True)
    if a.dtype not in _KEPT_FLOAT:
        a = a.astype(np.float64)
    if a.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {a.shape}")
    return a


# --------------------------------------------------------------------------- categorical


class CategoricalAllocation:
    """Categorical (or Bernoulli, ``k = 2``) records given their category counts.

    Parameters
    ----------
    x : array_like of int, shape (N,)
        Values in ``0 .. k-1``; ``N >= 1``.
    k : int
        Number of categories (``k - 1`` must fit the dtype of ``x``).
    copy : bool, default True
        ``True``: the object keeps its own C-contiguous copy of ``x`` (int8/16/32/64 and
        uint8/16/32 dtypes kept, other integral inputs stored as int64). ``False``: ``x`` must
        already be a writeable C-contiguous 1-D array of one of those dtypes, and the object
        updates that very array. Either way ``.x`` is the array updated in place.

    Attributes
    ----------
    x : numpy.ndarray
        The records (updated in place by :meth:`move_to` and :meth:`refresh`).
    counts : numpy.ndarray of int64, shape (k,)
        The category counts (a fresh array on each access).
    bulk_min : int
        A transport that moves at least this many records (default :data:`BULK_MIN`) and at
        least a quarter of all records is made in one pass (see :meth:`move_to`).

    Notes
    -----
    Construction is :math:`O(N + k)` (counting sort into ``order``/``start``, see the module
    notes); memory is the records plus :math:`N` int32 (int64 beyond :math:`2^{31} - 1`
    records) indices. The law of ``x`` given its counts is uniform over arrangements; both
    moves keep it (proofs in the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> alloc = CategoricalAllocation(np.array([0, 0, 1, 2, 2, 2], dtype=np.int8), 3)
    >>> alloc.counts
    array([2, 1, 3])
    >>> rng = np.random.default_rng(0)
    >>> alloc.move_to([1, 3, 2], rng)
    >>> alloc.counts, alloc.x.dtype
    (array([1, 3, 2]), dtype('int8'))
    >>> alloc.refresh(10, rng)
    >>> np.bincount(alloc.x, minlength=3)
    array([1, 3, 2])
    """

    def __init__(self, x, k, *, copy: bool = True):
        if not _plain(k, numbers.Integral) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self._x = _records(x, copy)
        if self._x.size == 0:
            raise ValueError("x must hold at least one record")
        if k - 1 > np.iinfo(self._x.dtype).max:
            raise ValueError(f"k = {k} categories do not fit dtype {self._x.dtype}")
        self._k = int(k)
        self._order = np.empty(self._x.size, dtype=_index_dtype(self._x.size))
        self._start = np.zeros(self._k + 1, dtype=np.int64)
        bad = _group(self._x, np.int64(self._k), self._order, self._start)
        if bad >= 0:
            raise ValueError(f"x[{bad}] = {self._x[bad]} is not in 0 .. {self._k - 1}")
        self.bulk_min = BULK_MIN

    @property
    def x(self) -> np.ndarray:
        """The records (the array updated in place)."""
        return self._x

    @property
    def k(self) -> int:
        """Number of categories."""
        return self._k

    @property
    def counts(self) -> np.ndarray:
        """Category counts, int64 of shape ``(k,)``."""
        return np.diff(self._start)

    def count(self, j: int) -> int:
        """The count of category ``j`` (``counts[j]`` without building the array)."""
        return int(self._start[j + 1] - self._start[j])

    def move_to(self, counts_new, rng: np.random.Generator) -> None:
        """Relabel uniformly chosen records so the counts become ``counts_new``.

        Exact transport of the uniform law on arrangements with the current counts to the
        uniform law with ``counts_new``. Cost :math:`O(k \\sum_j |\\Delta_j|)`; exactly
        :math:`\\sum_j \\max(\\Delta_j, 0)` records change. A move from one category to
        one other of at least :attr:`bulk_min` records and a quarter of all records (e.g. the
        first move of a chain of Bernoulli records from PyMC's initial point at large ``N``)
        is made in one sequential pass instead (module docstring, *Bulk transport*), about
        :math:`O(N)` at a few nanoseconds per record where one relabelling at a time costs
        about 100 ns per moved record once the records exceed the CPU's caches; it draws
        other words from ``rng`` than the one-at-a-time path.

        Parameters
        ----------
        counts_new : array_like of int, shape (k,)
            Non-negative counts with the same total ``N``.
        rng : numpy.random.Generator
        """
        _check_rng(rng)
        target = np.asarray(counts_new)
        if target.shape != (self._k,) or target.dtype.kind not in "iu":
            raise ValueError(f"counts_new must be {self._k} integers, got {counts_new!r}")
        target = target.astype(np.int64)
        if not (np.all(target >= 0) and int(target.sum()) == self._x.size):
            raise ValueError(
                f"counts_new must be >= 0 and sum to N = {self._x.size}, got {counts_new!r}"
            )
        _categorical_move(rng, self._x, self._order, self._start, target, self.bulk_min)

    def refresh(self, n_swaps, rng: np.random.Generator) -> None:
        """Swap the values of two uniformly chosen records, ``n_swaps`` times (:math:`O(1)` each).

        Invariant for the uniform law on arrangements with the current counts, irreducible and
        aperiodic on them.
        """
        n_swaps = _count("n_swaps", n_swaps)
        _check_rng(rng)
        _categorical_swaps(rng, self._x, self._order, n_swaps)

    def advance(self, counts_new, n_swaps: int, words: RngWords) -> None:
        """:meth:`move_to` then :meth:`refresh` in one compiled call (the sampler's hot path).

        The same moves and the same random stream as ``move_to(counts_new, rng)`` followed by
        ``refresh(n_swaps, rng)`` with ``words = RngWords(rng)``: identical results. The
        target is checked inside the kernel (``ValueError`` before any move if ``counts_new``
        is not an int64 array of ``k`` counts ``>= 0`` summing to ``N``); ``n_swaps`` must be a
        non-negative int (not checked).

        Examples
        --------
        >>> import numpy as np
        >>> alloc = CategoricalAllocation(np.array([0, 0, 1, 2, 2, 2]), 3)
        >>> alloc.advance(np.array([1, 3, 2]), 5, RngWords(np.random.default_rng(0)))
        >>> alloc.counts
        array([1, 3, 2])
        """
        ok = isinstance(counts_new, np.ndarray) and counts_new.dtype == np.int64
        if not (ok and counts_new.ndim == 1) or not _categorical_advance(
            words.words, self._x, self._order, self._start, counts_new, n_swaps, self.bulk_min
        ):
            raise ValueError(
                f"counts_new must be {self._k} int64 counts >= 0 summing to N = "
                f"{self._x.size}, got {counts_new!r}"
            )


# --------------------------------------------------------------------------- Poisson


class PoissonAllocation:
    """Poisson records given their total: :math:`\\mathrm{Multinomial}(S, \\text{uniform})`.

    Parameters
    ----------
    x : array_like of int, shape (N,)
        Non-negative counts; ``N >= 1``.
    copy : bool, default True
        As in :class:`CategoricalAllocation`: keep a copy (integer dtype kept) or, with
        ``False``, update the given array itself.

    Attributes
    ----------
    x : numpy.ndarray
        The records (updated in place).
    total : int
        Their sum :math:`S`.

    Notes
    -----
    Memory :math:`O(N + S)`: the records and a ``units`` buffer (unit to record, int32 or
    int64 indices) of capacity between :math:`S` and about :math:`2 \\max S`, grown
    geometrically. A record never exceeds its dtype's maximum: a move that would make it do so
    raises :class:`OverflowError` (:meth:`move_to` leaves the state unchanged then; use a wider
    dtype).

    Examples
    --------
    >>> import numpy as np
    >>> alloc = PoissonAllocation(np.array([3, 0, 1], dtype=np.int16))
    >>> alloc.total
    4
    >>> rng = np.random.default_rng(1)
    >>> alloc.move_to(10, rng)
    >>> alloc.total, int(alloc.x.sum()), alloc.x.dtype
    (10, 10, dtype('int16'))
    >>> alloc.refresh(5, rng)
    >>> alloc.move_to(2, rng)
    >>> int(alloc.x.sum())
    2
    """

    def __init__(self, x, *, copy: bool = True):
        self._x = _records(x, copy)
        if self._x.size == 0:
            raise ValueError("x must hold at least one record")
        if not np.all(self._x >= 0):
            raise ValueError("x must be non-negative")
        self._top = np.int64(np.iinfo(self._x.dtype).max)
        self._s = int(self._x.sum(dtype=np.int64))
        self._units = np.empty(max(self._s, 16), dtype=_index_dtype(self._x.size))
        _fill_units(self._x, self._units)

    @property
    def x(self) -> np.ndarray:
        """The records (the array updated in place)."""
        return self._x

    @property
    def total(self) -> int:
        """The records' sum."""
        return self._s

    def _reserve(self, size: int) -> None:
        if size > self._units.size:
            grown = np.empty(max(size, 2 * self._units.size), dtype=self._units.dtype)
            grown[: self._s] = self._units[: self._s]
            self._units = grown

    def move_to(self, total_new, rng: np.random.Generator) -> None:
        """Add units to uniform records, or remove uniformly chosen units, to reach ``total_new``.

        Exact transport of :math:`\\mathrm{Multinomial}(S)` to
        :math:`\\mathrm{Multinomial}(S')`; :math:`O(|S' - S|)` amortised, at most
        :math:`|S' - S|` records change.
        """
        total_new = _count("total_new", total_new)
        _check_rng(rng)
        d = total_new - self._s
        if d > 0:
            self._reserve(total_new)
            s = _units_add(rng, self._x, self._units, self._s, d, self._top)
            if s < 0:
                raise OverflowError(
                    f"a record would exceed the maximum of dtype {self._x.dtype}; state "
                    f"unchanged (total {self._s}); use a wider dtype"
                )
            self._s = int(s)
        elif d < 0:
            self._s = int(_units_remove(rng, self._x, self._units, self._s, -d))

    def refresh(self, n_moves, rng: np.random.Generator) -> None:
        """Move a uniformly chosen unit to a uniform record, ``n_moves`` times.

        Invariant for :math:`\\mathrm{Multinomial}(S, \\text{uniform})`, irreducible and
        aperiodic. No-op when :math:`S = 0`.
        """
        n_moves = _count("n_moves", n_moves)
        _check_rng(rng)
        if self._s == 0:
            return
        done = _units_refresh(rng, self._x, self._units, self._s, n_moves, self._top)
        if done < n_moves:
            raise OverflowError(
                f"a record would exceed the maximum of dtype {self._x.dtype} after {done} "
                "moves (each completed move kept the law); use a wider dtype"
            )

    def advance(self, total_new: int, n_moves: int, words: RngWords) -> None:
        """:meth:`move_to` then :meth:`refresh` in one compiled call (the sampler's hot path).

        Identical results to ``move_to(total_new, rng)`` then ``refresh(n_moves, rng)`` with
        ``words = RngWords(rng)``, and the same errors; ``total_new`` and ``n_moves`` must be
        non-negative ints (not checked).

        Examples
        --------
        >>> import numpy as np
        >>> alloc = PoissonAllocation(np.array([3, 0, 1]))
        >>> alloc.advance(7, 4, RngWords(np.random.default_rng(0)))
        >>> alloc.total, int(alloc.x.sum())
        (7, 7)
        """
        self._reserve(total_new)
        s, done = _units_advance(
            words.words, self._x, self._units, self._s, total_new, n_moves, self._top
        )
        if s < 0:
            raise OverflowError(
                f"a record would exceed the maximum of dtype {self._x.dtype}; state "
                f"unchanged (total {self._s}); use a wider dtype"
            )
        self._s = int(s)
        if done < n_moves:
            raise OverflowError(
                f"a record would exceed the maximum of dtype {self._x.dtype} after {done} "
                "moves (each completed move kept the law); use a wider dtype"
            )


# --------------------------------------------------------------------------- Normal


class NormalAllocation:
    """Normal records with fixed :math:`\\sigma` given their sum.

    Their law given the sum :math:`S` is :math:`\\mathcal N(S/N\\,\\mathbf 1, \\sigma^2
    (I - \\mathbf 1\\mathbf 1^\\top/N))`.

    Parameters
    ----------
    x : array_like of float, shape (N,)
        Finite records; ``N >= 1``.
    sigma : float
        The records' standard deviation (a finite scalar > 0).
    copy : bool, default True
        Keep a C-contiguous copy (float32 and float64 kept, other inputs stored as float64)
        or, with ``False``, update the given writeable C-contiguous float32/64 array itself.

    Attributes
    ----------
    x : numpy.ndarray
        The records (updated in place).
    total : float
        The statistic :math:`S` the records are consistent with (set at construction to their
        compensated sum, then by :meth:`move_to`). Their actual sum equals it up to rounding;
        :meth:`resync` removes the accumulated drift.

    Examples
    --------
    >>> import numpy as np
    >>> alloc = NormalAllocation(np.array([1.0, 2.0, 3.0, 4.0]), sigma=1.5)
    >>> alloc.total
    10.0
    >>> rng = np.random.default_rng(2)
    >>> alloc.move_to(2.0, rng)
    >>> alloc.x
    array([-1., 0., 1., 2.])
    >>> alloc.refresh(100, rng)
    >>> bool(abs(alloc.x.sum() - 2.0) < 1e-12)
    True
    >>> drift = alloc.resync()
    """

    def __init__(self, x, sigma, *, copy: bool = True):
        if not (_plain(sigma, numbers.Real) and math.isfinite(float(sigma)) and float(sigma) > 0.0):
            raise ValueError(f"sigma must be a finite scalar > 0, got {sigma!r}")
        self._x = _records(x, copy, floating=True)
        if self._x.size == 0:
            raise ValueError("x must hold at least one record")
        if not np.all(np.isfinite(self._x)):
            raise ValueError("x must be finite")
        self._sigma = float(sigma)
        self._total = float(_compensated_sum(self._x))

    @property
    def x(self) -> np.ndarray:
        """The records (the array updated in place)."""
        return self._x

    @property
    def sigma(self) -> float:
        """The records' standard deviation."""
        return self._sigma

    @property
    def total(self) -> float:
        """The statistic the records are consistent with."""
        return self._total

    def move_to(self, total_new, rng: np.random.Generator | None = None) -> None:
        """Shift every record by ``(total_new - total) / N`` (one vectorised in-place add).

        Exact transport of :math:`x \\mid S` to :math:`x \\mid S'`; deterministic (``rng`` is
        accepted for a uniform interface and not used).
        """
        if not _plain(total_new, numbers.Real):
            raise TypeError(f"total_new must be a real number, got {total_new!r}")
        total_new = float(total_new)
        if not math.isfinite(total_new):
            raise ValueError(f"total_new must be finite, got {total_new!r}")
        self._x += (total_new - self._total) / self._x.size
        self._total = total_new

    def refresh(self, n_pairs, rng: np.random.Generator) -> None:
        """Redraw ``(x_i, x_j)`` given ``x_i + x_j`` for ``n_pairs`` uniform pairs ``i != j``.

        Exact Gibbs updates of :math:`x \\mid S` (:math:`x_i \\sim \\mathcal N(s/2,
        \\sigma^2/2)`, :math:`x_j = s - x_i`): invariant and irreducible. No-op when
        :math:`N = 1`.
        """
        n_pairs = _count("n_pairs", n_pairs)
        _check_rng(rng)
        _pair_refresh(rng, self._x, n_pairs, self._sigma / math.sqrt(2.0))

    def advance(self, total_new: float, n_pairs: int, words: RngWords) -> None:
        """:meth:`move_to` then :meth:`refresh` (the sampler's hot path): identical results to
        ``move_to(total_new)`` then ``refresh(n_pairs, rng)`` with ``words = RngWords(rng)``;
        ``total_new`` must be a finite float, ``n_pairs`` a non-negative int (not checked).

        Examples
        --------
        >>> import numpy as np
        >>> alloc = NormalAllocation(np.array([1.0, 2.0, 3.0]), sigma=1.0)
        >>> alloc.advance(9.0, 10, RngWords(np.random.default_rng(0)))
        >>> bool(abs(alloc.x.sum() - 9.0) < 1e-12)
        True
        """
        self._x += (total_new - self._total) / self._x.size
        self._total = total_new
        _pair_refresh_words(words.words, self._x, n_pairs, self._sigma / math.sqrt(2.0))

    def resync(self) -> float:
        """Re-sum the records (compensated) and spread the drift from ``total`` over them.

        Call every :math:`10^3`--:math:`10^4` refresh calls (the drift is a random walk of
        about one rounding of :math:`x_i + x_j` per pair update). :math:`O(N)`.

        Returns
        -------
        float
            The drift removed: ``total`` minus the records' sum before the correction.
        """
        drift = self._total - float(_compensated_sum(self._x))
        if drift != 0.0:
            self._x += drift / self._x.size
        return drift
