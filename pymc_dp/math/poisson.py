r"""Loader's saddle-point helpers for Poisson (and binomial) log-probabilities.

C. Loader (2000), "Fast and accurate computation of binomial probabilities", writes

.. math:: \log \mathrm{Pois}(y; \lambda) = -\mathrm{stirlerr}(y) - \mathrm{bd0}(y, \lambda)
          - \tfrac12 \log(2\pi y), \qquad y > 0,

with the Stirling remainder :math:`\mathrm{stirlerr}(y) = \log\Gamma(y+1) - (y+\tfrac12)\log y
+ y - \tfrac12\log 2\pi` and the deviance :math:`\mathrm{bd0}(y, \lambda) = y\log(y/\lambda)
+ \lambda - y \ge 0`. Each piece is of the size of the result, so the log-pmf keeps its
relative accuracy at huge :math:`y, \lambda` where :math:`y\log\lambda - \lambda - \log y!`
cancels catastrophically. This is the one implementation in pymc_dp (the Bessel log-pmf and
the Poisson marginals use it).

stirlerr (real :math:`y > 0`)
-----------------------------
* :math:`y \ge 10`: the Stirling series :math:`\sum_{k=1}^{10} B_{2k} / (2k(2k-1)\,y^{2k-1})`
  (DLMF 5.11.1); the first omitted term is :math:`|B_{22}|/(462\, y^{21}) < 1.3 \cdot
  10^{-21}`, below :math:`2 \cdot 10^{-19}` relative to :math:`\mathrm{stirlerr}(10)
  = 0.00833`.
* :math:`2y` an integer below 20: a table of the exact values (rounded once from 40-digit
  mpmath; Loader's ``sferr_halves``).
* :math:`1/4 \le y < 10`: the recurrence :math:`\mathrm{stirlerr}(y) = g(y) +
  \mathrm{stirlerr}(y+1)` with :math:`g(y) = (y+\tfrac12)\log(1+1/y) - 1`, applied until the
  argument reaches 10. With :math:`u = 1/(2y+1)`, :math:`\log(1+1/y) = 2\,\mathrm{atanh}(u)`
  and :math:`y + \tfrac12 = 1/(2u)`, so
  :math:`g(y) = \sum_{k \ge 1} u^{2k}/(2k+1)`: positive terms, ratio at most
  :math:`u^2 \le 4/9`. Every summand is positive, so nothing cancels.
* :math:`0 < y < 1/4`: the definition with ``lgamma``; here :math:`-\tfrac12\log y`
  dominates and the cancellation is at most a factor 4.

bd0 (:math:`y \ge 0`, :math:`\lambda > 0`)
--------------------------------------------
With :math:`v = (y-\lambda)/(y+\lambda)`, :math:`\log(y/\lambda) = 2\,\mathrm{atanh}(v)`, so
(Loader's series) :math:`\mathrm{bd0} = (y-\lambda)v + 2y\sum_{j\ge1} v^{2j+1}/(2j+1)`. It is
used for :math:`|v| < 0.6` (:math:`y/\lambda \in (1/4, 4)`), where the direct form would lose
up to a factor of 10 to cancellation. The second term over the first is
:math:`(1+v)|v|/3 \le 0.32`, and later terms shrink by :math:`v^2 < 0.36`, so nothing cancels
(for :math:`v < 0` the terms after the first are negative but sum to less than 9% of it).
Beyond, :math:`y\log(y/\lambda) + \lambda - y` loses at most a factor 2.5, and the logarithm
is taken as :math:`\log y - \log\lambda` where the ratio would over- or underflow.
The sums of :math:`y` and :math:`\lambda` are formed from halves, so nothing overflows below
the largest double.

Accuracy (``tests/math/test_poisson.py``, against 50-digit mpmath on log-spaced grids from
:math:`10^{-300}` to :math:`10^{300}`): relative error of ``stirlerr`` and ``bd0`` within a few
ulps. Measured maxima: ``stirlerr`` 1.4 ulp for :math:`y \ge 10`, 2.6 ulp on
:math:`[1/2, 10)`, 4 ulp on :math:`[1/4, 1/2)` (the rounding of :math:`u` as :math:`u \to 1`),
6.3 ulp below 1/4; ``bd0`` 4 ulp (median 0.3). The tests assert these bounds (plus margin).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np

from pymc_dp._cache import lazy_vectorize

__all__ = ["bd0", "log_poisson_pmf", "log_poisson_scalar", "stirlerr"]

_LOG_2PI = math.log(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * _LOG_2PI

# B_{2k} for k = 1..10 (exact); the Stirling coefficients are B_{2k} / (2k (2k - 1))
_BERNOULLI = (
    Fraction(1, 6),
    Fraction(-1, 30),
    Fraction(1, 42),
    Fraction(-1, 30),
    Fraction(5, 66),
    Fraction(-691, 2730),
    Fraction(7, 6),
    Fraction(-3617, 510),
    Fraction(43867, 798),
    Fraction(-174611, 330),
)
_STIRLING = np.array([float(b / (2 * k * (2 * k - 1))) for k, b in enumerate(_BERNOULLI, start=1)])
_SERIES_FROM = 10.0
_RECURRENCE_FROM = 0.25

# stirlerr(i / 2) for i = 0..19, exact values rounded once (40-digit mpmath); entry 0 unused
_HALVES = np.array(
    [
        np.inf,
        0.15342640972002736,
        0.08106146679532726,
        0.05481412105191765,
        0.0413406959554093,
        0.03316287351993629,
        0.02767792568499834,
        0.023746163656297496,
        0.020790672103765093,
        0.018488450532673187,
        0.016644691189821193,
        0.015134973221917378,
        0.013876128823070748,
        0.012810465242920227,
        0.01189670994589177,
        0.011104559758206917,
        0.010411265261972096,
        0.009799416126158804,
        0.009255462182712733,
        0.008768700134139386,
    ]
)


@numba.njit(cache=True)
def _stirling_series(y):
    inv = 1.0 / y
    inv2 = inv * inv
    acc = 0.0
    for i in range(_STIRLING.shape[0] - 1, -1, -1):
        acc = acc * inv2 + _STIRLING[i]
    return acc * inv


@numba.njit(cache=True)
def _g_step(y):
    """``stirlerr(y) - stirlerr(y + 1) = sum_k u^(2k) / (2k + 1)``, ``u = 1/(2y + 1)``."""
    u = 1.0 / (2.0 * y + 1.0)
    u2 = u * u
    term = u2
    acc = u2 / 3.0
    j = 5.0
    while True:
        term *= u2
        add = term / j
        if add <= 1e-18 * acc:
            return acc
        acc += add
        j += 2.0


@numba.njit(cache=True)
def stirlerr(y):
    r"""Stirling remainder :math:`\log\Gamma(y+1) - (y+\tfrac12)\log y + y - \tfrac12\log 2\pi`.

    Numba scalar kernel for real :math:`y > 0` (``+inf`` at 0, NaN below); the method and
    its error are in the module docstring.

    Examples
    --------
    >>> import math
    >>> round(stirlerr(1.0), 15) == round(1.0 - 0.5 * math.log(2 * math.pi), 15)
    True
    >>> stirlerr(1e300)  # 1 / (12 y)
    8.333333333333334e-302
    """
    if not y > 0.0:
        return np.inf if y == 0.0 else np.nan
    if y >= _SERIES_FROM:
        return _stirling_series(y)
    twice = 2.0 * y
    if twice == math.floor(twice):
        return _HALVES[int(twice)]
    if y < _RECURRENCE_FROM:
        return math.lgamma(y + 1.0) - (y + 0.5) * math.log(y) + y - _HALF_LOG_2PI
    acc = 0.0
    while y < _SERIES_FROM:
        acc += _g_step(y)
        y += 1.0
    return acc + _stirling_series(y)


@numba.njit(cache=True)
def _bd0_series(y, lam, v):
    """Loader's series, summed in halves (``2 y v`` would overflow near the largest double)."""
    acc = 0.5 * ((y - lam) * v)
    ej = y * v
    v2 = v * v
    j = 3.0
    while True:
        ej *= v2
        new = acc + ej / j
        if new == acc:
            return 2.0 * acc
        acc = new
        j += 2.0


@numba.njit(cache=True)
def bd0(y, lam):
    r"""Deviance term :math:`y\log(y/\lambda) + \lambda - y \ge 0` without cancellation.

    Numba scalar kernel for :math:`y \ge 0`, :math:`\lambda > 0` (``bd0(0, lam) = lam``;
    ``+inf`` for :math:`\lambda = 0 < y`); method in the module docstring.

    Examples
    --------
    >>> bd0(1e6 + 1.0, 1e6)  # y log(y/lam) + lam - y cancels to 5e-7 (direct: 1e-10 error)
    4.99999833333416...e-07
    """
    if not (y >= 0.0 and lam >= 0.0):
        return np.nan
    if y == 0.0:
        return lam
    if lam == 0.0:
        return np.inf
    half_sum = 0.5 * y + 0.5 * lam
    v = (0.5 * y - 0.5 * lam) / half_sum
    if abs(v) < 0.6:
        return _bd0_series(y, lam, v)
    ratio = y / lam
    if 1e-300 < ratio < 1e300:
        return y * math.log(ratio) + lam - y
    return y * (math.log(y) - math.log(lam)) + lam - y


@numba.njit(cache=True)
def log_poisson_scalar(y, lam):
    r""":math:`\log \mathrm{Pois}(y;\lambda) = y\log\lambda - \lambda - \log\Gamma(y+1)`.

    Numba scalar kernel in Loader's form, for real :math:`y` (integer :math:`y` gives the
    Poisson log-pmf): ``-inf`` for :math:`y < 0`, :math:`-\lambda` at :math:`y = 0`, the point
    mass at 0 for :math:`\lambda = 0`; NaN for :math:`\lambda < 0` or NaN.
    """
    if not lam >= 0.0:
        return np.nan
    if y < 0.0:
        return -np.inf
    if y == 0.0:
        return -lam
    if lam == 0.0:
        return -np.inf
    return -stirlerr(y) - bd0(y, lam) - 0.5 * (_LOG_2PI + math.log(y))


@lazy_vectorize(["float64(float64, float64)"], cache=True)
def _log_poisson_ufunc(y, lam):
    return log_poisson_scalar(y, lam)


def log_poisson_pmf(k, mu):
    """Accurate log Poisson pmf on numpy arrays (broadcasting; real ``k`` allowed).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> k, mu = np.array([0.0, 3.0, 1e6]), np.array([2.0, 2.5, 1e6])
    >>> bool(np.allclose(log_poisson_pmf(k, mu), stats.poisson.logpmf(k, mu), rtol=1e-12))
    True
    """
    return _log_poisson_ufunc(np.asarray(k, dtype=np.float64), np.asarray(mu, dtype=np.float64))
