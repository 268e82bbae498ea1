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
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = [
    "A_MAX",
    "in_domain",
    "noise_constants",
    "short_sum_kernel",
    "short_sum_logp_dmu",
]

#: largest noise decay rate ``a`` of the short-sum kernel (``e^a`` bounds the gradient's error)
A_MAX = 3.0
_Z_LO = -100.0
_Z_HI = 101.0
_X1_MAX = 128.0
_INV = np.array([0.0] + [1.0 / j for j in range(1, 512)])
_STOP = 2.0**-56


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
    return logc - mu + math.log(tot), num / tot
