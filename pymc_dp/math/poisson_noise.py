r"""Short-sum kernel for a Poisson count seen through two-sided exponential noise.

The marginal of :mod:`pymc_dp.distributions.marginal_poisson` is, with ``n = floor(z)``,
``m = max(n + 1, 0)``, ``x1 = mu e^{a}``, ``x2 = mu e^{-a}`` and ``T(x, y) = x^y / y!``,

.. math::

    p(z) = c\,e^{-\mu}\,(A_1 + A_2), \qquad A_1 = e^{-az} S_1,\ S_1 = \sum_{y=0}^{n} T(x_1, y),
    \qquad A_2 = e^{az} S_2,\ S_2 = \sum_{y \ge m} T(x_2, y).

Where ``n``, ``|z|`` and ``x1`` are small (the domain of :func:`in_domain`: ``a <= 3``,
``-100 <= z < 101``, ``0 < x1 <= 128``) the sums are short and formed directly in linear
space; nothing overflows (``e^{a|z|} <= e^{303}``, ``S_1 <= e^{128}``), and the terms neglected
to underflow are below ``1e-300`` against a total of at least ``e^{-303}``:

* ``S1`` is summed forwards (``T(x, y) = T(x, y - 1) x / y``), positive terms, no cancellation;
  the same pass keeps ``S1' = S1 - T(x1, n)`` (the sum before its last term, not a difference)
  and the partial sum of ``T(x2, y)`` for ``y < m``;
* ``S2`` for ``x2 < m`` is ``T(x2, m)`` times the series ``sum_k prod_{j<=k} x2 / (m + j)``
  (ratios below 1), summed four terms per step (the products of ratios are formed off the
  dependent chain) until a term is below ``2^-56`` of ``S2 + S1 e^{-2az}``; the ratios keep
  falling, so the neglected tail is at most a few times that term (``m <= 101``): below
  ``2^-53`` of ``e^{2az} (A1 + A2)``, which bounds its effect on ``log p`` and, through
  ``expm1(-a) S2``, on the derivative;
* ``S2`` for ``x2 >= m`` is ``e^{x2}`` minus the partial sum, where
  :math:`P(m, x_2) \ge 0.4` bounds the cancellation by a factor 2.5.

The derivative uses :math:`\partial_\mu p(z) = p(z-1) - p(z)` in the same pass: ``p(z - 1)``
has ``S1' = S1 - T(x1, n)`` and ``S2' = S2 + T(x2, m - 1)``, so

.. math::

    \partial_\mu \log p(z) = \frac{e^{-az}\,(\mathrm{expm1}(a) S_1' - T(x_1, n))
        + e^{az}\,(\mathrm{expm1}(-a) S_2 + e^{-a} T(x_2, m - 1))}{A_1 + A_2},

whose absolute rounding error is a few ulps times ``e^{a} <= 20`` (``a <= 3`` bounds it).
For ``n < 0`` the closed form ``log c + mu expm1(-a) + a z`` (derivative ``expm1(-a)``) is
exact. Outside the domain the caller uses the general kernel.

Many counts at once
-------------------
:func:`short_sum_group` evaluates many counts that share ``n = floor(z)`` in lockstep: the
loops run over the counts innermost (``y`` or the tail step outermost), with the same
operations in the same order as :func:`short_sum_kernel`, so each result is bitwise the one
of the scalar kernel; a count whose tail series has met its stopping rule keeps its sum
(selects, not branches) while the others go on. Equal trip counts and no data-dependent
branches let the compiler use SIMD and remove the mispredicted loop exits of the scalar
kernel (per count about 6 forward steps and 6 tail steps of 4 terms at ``mu = 6``, ``a = 1``).
:func:`group_by_floor` sorts the counts into these groups (a counting sort, linear time).
Both kernels take ``log`` of the total with :func:`_log_normal` (within 1 ulp, branch-free, so
it vectorizes where the libm call does not; the totals are positive normal doubles).
"""

from __future__ import annotations

import math
from decimal import Decimal

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = [
    "A_MAX",
    "N_GROUPS",
    "group_by_floor",
    "in_domain",
    "noise_constants",
    "short_sum_group",
    "short_sum_kernel",
    "short_sum_logp_dmu",
    "work_arrays",
]

#: largest noise decay rate ``a`` of the short-sum kernel (``e^a`` bounds the gradient's error)
A_MAX = 3.0
_Z_LO = -100.0
_Z_HI = 101.0
_X1_MAX = 128.0
_INV = np.array([0.0] + [1.0 / j for j in range(1, 512)])
_STOP = 2.0**-56


@intrinsic
def _float_bits(typingctx, x):
    """The IEEE bits of a float64 as an int64 (no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _bits_float(typingctx, b):
    """The float64 whose IEEE bits are the int64 ``b``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


def _clear_low_bits(x: float, nbits: int) -> float:
    """``x`` with the last ``nbits`` bits of its significand set to zero."""
    bits = int(np.array([x]).view(np.int64)[0]) & ~((1 << nbits) - 1)
    return float(np.array([bits]).view(np.float64)[0])


# log 2 split so that k * _LN2_HI is exact for |k| < 2^21 (its last 21 bits are zero)
_LN2 = Decimal("0.69314718055994530941723212145817656807550013436")
_LN2_HI = _clear_low_bits(float(_LN2), 21)
_LN2_LO = float(_LN2 - Decimal(_LN2_HI))
_SQRT_HALF_BITS = int(np.array([math.sqrt(0.5)]).view(np.int64)[0])


@numba.njit(cache=True, error_model="numpy")
def _log_normal(x):
    """``log x`` for a positive, normal, finite float64, within 1 ulp; branch-free (inlined
    into loops, it vectorizes, unlike the libm call).

    ``x = 2^k (1 + f)`` with ``1 + f`` in ``[sqrt(1/2), sqrt(2))`` (integer bit operations), and
    with ``s = f / (2 + f)``, ``log(1 + f) = 2 atanh(s) = 2 s + s R``,
    ``R = sum_{j=1}^{11} 2 s^{2j} / (2j + 1)`` (``s^2 <= 0.0295``: the omitted terms are below
    ``2^-60`` of the result). Since ``s f = f^2/2 - s f^2/2``, ``log(1 + f) = f - (h - s (h + R))``
    with ``h = f^2 / 2``, summed as ``k ln2_hi - ((h - (s (h + R) + k ln2_lo)) - f)`` so the
    large parts are exact (the classical fdlibm arrangement). Measured against 40-digit mpmath
    in ``tests/math/test_poisson_noise_log.py`` (at most 0.81 ulp).
    """
    b = _float_bits(x)
    k = (b - _SQRT_HALF_BITS) >> 52
    f = _bits_float(b - (k << 52)) - 1.0
    s = f / (2.0 + f)
    z = s * s
    r = 2.0 / 21.0 + z * (2.0 / 23.0)
    r = 2.0 / 19.0 + z * r
    r = 2.0 / 17.0 + z * r
    r = 2.0 / 15.0 + z * r
    r = 2.0 / 13.0 + z * r
    r = 2.0 / 11.0 + z * r
    r = 2.0 / 9.0 + z * r
    r = 2.0 / 7.0 + z * r
    r = 2.0 / 5.0 + z * r
    r = z * (2.0 / 3.0 + z * r)
    h = 0.5 * f * f
    dk = float(k)
    return dk * _LN2_HI - ((h - (s * (h + r) + dk * _LN2_LO)) - f)


@numba.njit(cache=True)
def in_domain(z, mu, ea):
    """Whether :func:`short_sum_logp_dmu` applies (``ea = e^a`` with ``a <= A_MAX``)."""
    return _Z_LO <= z < _Z_HI and mu > 0.0 and mu * ea <= _X1_MAX


@numba.njit(cache=True)
def _tail_series(x2, m, t_m, w):
    """``S2 = sum_{y >= m} T(x2, y)`` for ``x2 < m`` from ``t_m = T(x2, m)``, to a relative
    ``2^-56`` of ``S2 + w`` (``w = S1 e^{-2az}``: ``S2`` matters only next to it)."""
    s = t_m
    t = t_m
    for j in range(m + 1, 508, 4):  # four terms per step: a quarter of the dependent products
        q1 = x2 * _INV[j]
        q2 = q1 * (x2 * _INV[j + 1])
        q3 = q2 * (x2 * _INV[j + 2])
        q4 = q3 * (x2 * _INV[j + 3])
        t1 = t * q1
        s += (t1 + t * q2) + (t * q3 + t * q4)
        t = t * q4
        if t1 < (s + w) * _STOP:
            break
    return s


@numba.njit(cache=True)
def noise_constants(a, logc):
    """``(a, logc, e^a, e^-a, expm1(a), expm1(-a))``, computed once per noise law."""
    return (a, logc, math.exp(a), math.exp(-a), math.expm1(a), math.expm1(-a))


@numba.njit(cache=True)
def short_sum_logp_dmu(z, mu, a, logc):
    """``(log p(z), d log p(z) / d mu)`` by the short sums; only inside :func:`in_domain`.

    Examples
    --------
    Poisson(3) seen through geometric noise ``alpha = e^{-1}`` at ``z = 4``, against a
    brute-force sum and a central difference:

    >>> import math
    >>> import numpy as np
    >>> from scipy import stats
    >>> a, logc = 1.0, math.log(math.tanh(0.5))
    >>> def brute(mu):
    ...     y = np.arange(200)
    ...     return np.logaddexp.reduce(stats.poisson.logpmf(y, mu) + logc - a * np.abs(4.0 - y))
    >>> lp, d = short_sum_logp_dmu(4.0, 3.0, a, logc)
    >>> bool(abs(lp - brute(3.0)) < 1e-13)
    True
    >>> bool(abs(d - (brute(3.0 + 1e-6) - brute(3.0 - 1e-6)) / 2e-6) < 1e-8)
    True
    """
    return short_sum_kernel(z, mu, noise_constants(a, logc))


@numba.njit(cache=True)
def short_sum_kernel(z, mu, k):
    """:func:`short_sum_logp_dmu` with the constants ``k`` of :func:`noise_constants`."""
    a, logc, ea, ema, em1a, em1ma = k
    n = math.floor(z)
    if n < 0:
        return logc + mu * em1ma + a * z, em1ma
    x1 = mu * ea
    x2 = mu * ema
    t1 = 1.0
    s1 = 1.0
    s1p = 0.0  # S1' (the sum without its last term), kept apart: S1 - T(x1, n) may cancel
    t2 = 1.0
    s2lo = 1.0
    for y in range(1, n + 1):
        t1 *= x1 * _INV[y]
        t2 *= x2 * _INV[y]
        s1p = s1
        s1 += t1
        s2lo += t2
    m = n + 1
    e = math.exp(a * z)
    if x2 < m:
        s2 = _tail_series(x2, m, t2 * x2 * _INV[m], s1 / e / e)
    else:
        s2 = math.exp(x2) - s2lo
    tot = s1 / e + s2 * e
    num = (em1a * s1p - t1) / e + (em1ma * s2 + ema * t2) * e
    return logc - mu + _log_normal(tot), num / tot


#: number of groups of :func:`group_by_floor`: 0 outside the z range, 1 for ``z < 0``,
#: ``2 + n`` for ``n = floor(z)`` in ``0 .. 100``
N_GROUPS = 103


@numba.njit(cache=True, error_model="numpy")
def group_by_floor(z, short):
    """Counting sort of the counts by ``n = floor(z)``: ``(order, starts)``.

    The counts of group ``g`` are ``order[starts[g]:starts[g + 1]]`` (increasing). Group 0 holds
    the counts outside ``-100 <= z < 101`` (all counts when ``short`` is false), group 1 those
    with ``-100 <= z < 0`` and group ``2 + n`` those with ``floor(z) = n``. NaN goes to group 0.

    Examples
    --------
    >>> import numpy as np
    >>> order, starts = group_by_floor(np.array([3.0, -1.0, 3.5, 500.0, 0.0]), True)
    >>> [order[starts[g] : starts[g + 1]].tolist() for g in (0, 1, 2, 5)]
    [[3], [1], [4], [0, 2]]
    """
    size = z.shape[0]
    group = np.empty(size, np.uint8)
    for i in range(size):  # branch-free: vectorizes (the unselected int(z) may be garbage)
        zi = z[i]
        inside = short & (zi >= _Z_LO) & (zi < _Z_HI)
        g = 1 if zi < 0.0 else int(zi) + 2
        group[i] = g if inside else 0
    # four interleaved histograms: consecutive counts of one group do not wait on each other
    hist = np.zeros((4, N_GROUPS + 1), np.int64)
    quarter = size // 4
    for i in range(quarter):
        hist[0, group[4 * i] + 1] += 1
        hist[1, group[4 * i + 1] + 1] += 1
        hist[2, group[4 * i + 2] + 1] += 1
        hist[3, group[4 * i + 3] + 1] += 1
    for i in range(4 * quarter, size):
        hist[0, group[i] + 1] += 1
    starts = np.zeros(N_GROUPS + 1, np.int64)
    for g in range(1, N_GROUPS + 1):
        starts[g] = starts[g - 1] + hist[0, g] + hist[1, g] + hist[2, g] + hist[3, g]
    fill = starts[:N_GROUPS].copy()
    order = np.empty(size, np.int64)
    for i in range(size):
        g = group[i]
        order[fill[g]] = i
        fill[g] += 1
    return order, starts


@numba.njit(cache=True)
def work_arrays(size):
    """The work arrays of :func:`short_sum_group` for up to ``size`` counts (a tuple of 12).

    Separate arrays, not the rows of one: the compiler then vectorizes the lockstep loops.
    """
    return (
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(size),
    )


@numba.njit(cache=True, error_model="numpy")
def _group_start(n, data, k, w):
    """Rates and ``e^{az}``; the number of rates outside :func:`in_domain` (set to 1 here)."""
    z, mu = data[0], data[1]
    a, ea, ema = k[0], k[2], k[3]
    x1, x2, ez, rate = w[0], w[1], w[6], w[11]
    fn = float(n)
    en = math.exp(a * fn)
    other = 0
    bad = 0
    for i in range(z.shape[0]):
        m = mu[i]
        ok = (m > 0.0) & (m * ea <= _X1_MAX)  # NaN fails
        bad += 0 if ok else 1
        m = m if ok else 1.0
        rate[i] = m
        x1[i] = m * ea
        x2[i] = m * ema
        ez[i] = en
        other += z[i] != fn
    if other:  # real-valued releases (Laplace): e^{az} per count
        for i in range(z.shape[0]):
            if z[i] != fn:
                ez[i] = math.exp(a * z[i])
    return bad


@numba.njit(cache=True, error_model="numpy")
def _group_forward(n, size, w):
    """``S1``, ``S1'`` (``S1`` before its last term), ``T(x1, n)`` and ``T(x2, n)``."""
    x1, x2, t1, s1, s1p, t2 = w[0], w[1], w[2], w[3], w[4], w[5]
    for i in range(size):
        t1[i] = 1.0
        s1[i] = 1.0
        t2[i] = 1.0
        s1p[i] = 0.0
    for y in range(1, n + 1):
        if y == n:
            for i in range(size):
                s1p[i] = s1[i]
        r = _INV[y]
        for i in range(size):
            u1 = t1[i] * (x1[i] * r)
            t1[i] = u1
            t2[i] = t2[i] * (x2[i] * r)
            s1[i] = s1[i] + u1


@numba.njit(cache=True, error_model="numpy")
def _group_tail_start(m, size, w):
    """First term ``T(x2, m)`` and the stopping weight ``S1 e^{-2az}``; flags ``x2 >= m``."""
    x2, s1, t2, ez, s, t, wt, done = w[1], w[3], w[5], w[6], w[7], w[8], w[9], w[10]
    fm = float(m)
    rm = _INV[m]
    large = 0
    for i in range(size):
        e = ez[i]
        t_m = t2[i] * x2[i] * rm
        s[i] = t_m
        t[i] = t_m
        big = x2[i] >= fm
        done[i] = 1.0 if big else 0.0
        large += 1 if big else 0
        wt[i] = s1[i] / e / e
    return large


@numba.njit(cache=True, error_model="numpy")
def _group_tail(m, size, w):
    """``S2`` into ``w[7]``: the tail series of :func:`_tail_series` in lockstep (a count keeps
    its sum once its own stopping rule holds), or ``e^{x2}`` minus the partial sum (formed as
    in :func:`short_sum_kernel`) where ``x2 >= m``."""
    x2, s, t, wt, done = w[1], w[7], w[8], w[9], w[10]
    large = _group_tail_start(m, size, w)
    for j in range(m + 1, 508, 4):
        r1, r2, r3, r4 = _INV[j], _INV[j + 1], _INV[j + 2], _INV[j + 3]
        running = 0  # an integer count: a float sum would keep the loop scalar
        for i in range(size):
            x = x2[i]
            q1 = x * r1
            q2 = q1 * (x * r2)
            q3 = q2 * (x * r3)
            q4 = q3 * (x * r4)
            tt = t[i]
            ta = tt * q1
            s0 = s[i]
            s_next = s0 + ((ta + tt * q2) + (tt * q3 + tt * q4))
            finished = done[i] != 0.0
            s[i] = s0 if finished else s_next
            t[i] = tt if finished else tt * q4
            stop = finished | (ta < (s_next + wt[i]) * _STOP)  # no branch: stays SIMD
            done[i] = 1.0 if stop else 0.0
            running += 0 if stop else 1
        if running == 0:
            break
    if large:
        for i in range(size):
            if x2[i] >= m:
                t2 = 1.0
                s2lo = 1.0
                for y in range(1, m):
                    t2 *= x2[i] * _INV[y]
                    s2lo += t2
                s[i] = math.exp(x2[i]) - s2lo


@numba.njit(cache=True, error_model="numpy")
def short_sum_group(n, data, k, w):
    """:func:`short_sum_kernel` at every count of ``data = (z, mu, lp, dlp)``, in lockstep.

    Writes ``lp`` and ``dlp``, each bitwise equal to :func:`short_sum_kernel` (the same
    operations in the same order). All counts must have ``floor(z) = n >= 0`` and
    ``-100 <= z < 101``; ``k`` is :func:`noise_constants` and ``w`` is :func:`work_arrays` of at
    least ``len(z)``. Returns the number of counts whose rate is outside :func:`in_domain`:
    their results are meaningless, for the caller to replace.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> z, mu = np.array([4.0, 4.0, 4.5]), np.array([3.0, 0.5, 40.0])
    >>> lp, dlp = np.zeros(3), np.zeros(3)
    >>> k = noise_constants(1.0, math.log(math.tanh(0.5)))
    >>> short_sum_group(4, (z, mu, lp, dlp), k, work_arrays(3))
    0
    >>> scalar = [short_sum_kernel(z[i], mu[i], k) for i in range(3)]
    >>> bool(np.array_equal(lp, [s[0] for s in scalar]))
    True
    >>> bool(np.array_equal(dlp, [s[1] for s in scalar]))
    True
    """
    bad = _group_start(n, data, k, w)
    size = data[0].shape[0]
    _group_forward(n, size, w)
    _group_tail(n + 1, size, w)
    logc, ema, em1a, em1ma = k[1], k[3], k[4], k[5]
    t1, s1, s1p, t2, ez, s, rate = w[2], w[3], w[4], w[5], w[6], w[7], w[11]
    lp, dlp = data[2], data[3]
    for i in range(size):
        e = ez[i]
        s2 = s[i]
        tot = s1[i] / e + s2 * e
        num = (em1a * s1p[i] - t1[i]) / e + (em1ma * s2 + ema * t2[i]) * e
        dlp[i] = num / tot
        lp[i] = logc - rate[i] + _log_normal(tot)
    return bad
