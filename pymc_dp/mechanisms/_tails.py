r"""Tail probabilities of the built-in noise laws, and the censored noise log-density.

A release projected to a box, ``z = clip(T + noise, lower, upper)``, has the likelihood of a
censored observation (Foulds et al. 2016, eq. 16; Zhang et al. 2016, step 4)::

    lower < z < upper : log p(z - T)                 (density or pmf)
    z == lower        : log P(noise <= lower - T)    (log CDF at z - T)
    z == upper        : log P(noise >= upper - T)    (log survival at z - T)

so each cell needs ``logcdf(x) = log P(Y <= x)`` and ``logsf(x) = log P(Y >= x)`` of the noise
``Y``. All four built-in laws are symmetric, ``P(Y >= x) = P(Y <= -x)`` for every real ``x``
(also for the integer laws), so ``logsf(x) = logcdf(-x)``. This module holds their numba scalar
kernels ``f(x, params)`` (with the mechanism's own ``numba_params``) and the numpy forms (a
compiled loop over the flattened input). Each built-in mechanism module also defines its
censored kernel ``f(x, row)`` for the data-augmentation sweeps (a module-level ``njit``
function, so that numba's on-disk cache of the sweeps, which records the kernel's type, can
always find it again): the row is ``[side, *mechanism params]`` with ``side`` 0 (interior),
-1 (at ``lower``) or +1 (at ``upper``).

Numerics (relative error below 1e-13 at every finite result, tails included):

* Laplace: ``x < 0``: ``x/b - log 2``; ``x >= 0``: ``log1p(-exp(-x/b)/2)`` (closed form).
* Gaussian: ``log Phi(u)``, ``u = x / sigma``: ``log1p(-erfc(u/sqrt2)/2)`` for ``u >= -1``, and
  ``log(erfcx(-u/sqrt2)/2) - u^2/2`` below, so it stays exact far into the lower tail (no
  underflow of ``Phi``). ``erfcx(t)`` is ``exp(t^2) erfc(t)`` with ``t^2`` split exactly into two
  doubles (Dekker) for ``t < 26``, and its asymptotic series (9 terms, truncation below 1e-20
  relative) beyond.
* two-sided geometric (``alpha = e^{-a}``): ``P(Y <= k) = alpha^{|k|}/(1+alpha)`` for ``k < 0``
  and ``1 - alpha^{k+1}/(1+alpha)`` for ``k >= 0`` (``k = floor(x)``), in log space with
  ``log1mexp``.
* discrete Gaussian: ``P(Y <= k) = T(-k)/Z`` for ``k < 0`` and ``1 - T(k+1)/Z`` for ``k >= 0``,
  with the upper tail ``T(a) = sum_{y >= a} exp(-y^2/(2 sigma^2)) = exp(-a^2/(2 sigma^2)) S(a)``,
  ``S(a) = sum_{j >= 0} t_j``, ``t_j = exp(-(2 a j + j^2)/(2 sigma^2))``.

  - Direct partial sum when ``sigma < 10`` or ``a >= sigma^2 / 20``. The ratio
    ``r_j = t_{j+1}/t_j = exp(-(2a + 2j + 1)/(2 sigma^2))`` decreases in ``j``, so the tail after
    term ``J`` is at most ``t_J r_J / (1 - r_J)`` (a geometric series): the sum stops at the
    first ``J`` where that certified bound is below ``1e-17`` times the partial sum (so the
    neglected tail is below 1e-17 relative). At most a few thousand terms: ``r_j <= e^{-1/20}``
    once ``a >= sigma^2/20``, and for ``sigma < 10`` the terms fall below 1e-17 by
    ``j ~ 9 sigma``.
  - Euler-Maclaurin otherwise (``sigma >= 10``, ``a < sigma^2/20``):
    ``S(a) = sigma sqrt(pi/2) erfcx(u/sqrt2) + 1/2 + He1(u)/(12 sigma) - He3(u)/(720 sigma^3)
    + He5(u)/(30240 sigma^5)``, ``u = a/sigma``; the remainder is of the order of the next
    correction ``|He7(u)|/(1209600 sigma^7) <= (a/sigma^2)^7/1209600 + O(sigma^-2) < 1e-15``
    relative to ``S(a) >= 1/2``.

  The normaliser is :func:`pymc_dp.kernels.discrete_gaussian.numba_log_normalizer` (certified
  there). Checked against mpmath at 40 digits for sigma in [0.1, 1e4] and ``|x|`` up to 40 sigma
  (``tests/mechanisms/test_logcdf.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pymc_dp.kernels.discrete_gaussian import numba_log_normalizer

__all__ = [
    "dg_logcdf",
    "dg_logsf",
    "erfcx",
    "gaussian_logcdf",
    "gaussian_logsf",
    "geometric_logcdf",
    "geometric_logsf",
    "laplace_logcdf",
    "laplace_logsf",
    "log_ndtr",
    "vectorized",
]

_LOG2 = math.log(2.0)
_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_SPLIT = 134217729.0  # 2**27 + 1 (Dekker split)


@numba.njit(cache=True)
def _log1mexp(x):  # pragma: no cover - compiled
    """``log(1 - exp(x))`` for ``x <= 0`` (Maechler 2012)."""
    if x > -_LOG2:
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


@numba.njit(cache=True)
def erfcx(t):  # pragma: no cover - compiled
    """Scaled complementary error function ``exp(t^2) erfc(t)`` for ``t >= 0`` (numba)."""
    if t < 26.0:
        c = _SPLIT * t
        hi = c - (c - t)
        lo = t - hi
        p = t * t
        err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo  # t^2 = p + err exactly
        return math.exp(p) * math.erfc(t) * (1.0 + err)
    # asymptotic series 1/(t sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2 t^2)^k; at t >= 26 the
    # first neglected term (k = 9) is below 1e-20
    w = 1.0 / (2.0 * t * t)
    term = 1.0
    acc = 1.0
    for k in range(1, 9):
        term *= -(2.0 * k - 1.0) * w
        acc += term
    return acc / (t * _SQRT_PI)


@numba.njit(cache=True)
def log_ndtr(u):  # pragma: no cover - compiled
    """``log Phi(u)`` of the standard normal CDF, stable in both tails (numba)."""
    if u >= -1.0:
        return math.log1p(-0.5 * math.erfc(u / _SQRT2))
    if u == -math.inf:
        return -math.inf
    return math.log(0.5 * erfcx(-u / _SQRT2)) - 0.5 * u * u


@numba.njit(cache=True)
def laplace_logcdf(x, params):  # pragma: no cover - compiled
    """``log P(Y <= x)``, ``Y ~ Laplace(0, b)``, ``params = [b]``."""
    b = params[0]
    x = np.float64(x)
    if x < 0.0:
        return x / b - _LOG2
    return math.log1p(-0.5 * math.exp(-x / b))


@numba.njit(cache=True)
def gaussian_logcdf(x, params):  # pragma: no cover - compiled
    """``log P(Y <= x)``, ``Y ~ N(0, sigma^2)``, ``params = [sigma]``."""
    return log_ndtr(np.float64(x) / params[0])


@numba.njit(cache=True)
def geometric_logcdf(x, params):  # pragma: no cover - compiled
    """``log P(Y <= x)`` of the two-sided geometric law, ``params = [log_alpha, ...]``."""
    a = -params[0]
    k = math.floor(np.float64(x))
    if k == -math.inf:
        return -math.inf
    if k == math.inf:
        return 0.0
    log1p_alpha = math.log1p(math.exp(-a))
    if k < 0.0:
        return -abs(k) * a - log1p_alpha
    return _log1mexp(-(k + 1.0) * a - log1p_alpha)


@numba.njit(cache=True)
def _dg_log_s_direct(a, sigma):  # pragma: no cover - compiled
    """``log S(a)`` by the partial sum with a certified geometric tail bound."""
    two_s2 = 2.0 * sigma * sigma
    acc = 0.0
    j = 0.0
    while True:
        t_j = math.exp(-(2.0 * a * j + j * j) / two_s2)
        acc += t_j
        r_j = math.exp(-(2.0 * a + 2.0 * j + 1.0) / two_s2)
        if t_j * r_j <= 1e-17 * acc * (1.0 - r_j):
            return math.log(acc)
        j += 1.0


@numba.njit(cache=True)
def _dg_log_s_em(a, sigma):  # pragma: no cover - compiled
    """``log S(a)`` by Euler-Maclaurin (``sigma >= 10``, ``a < sigma^2/20``)."""
    u = a / sigma
    he1 = u
    he3 = u**3 - 3.0 * u
    he5 = u**5 - 10.0 * u**3 + 15.0 * u
    s = (
        sigma * _SQRT_HALF_PI * erfcx(u / _SQRT2)
        + 0.5
        + he1 / (12.0 * sigma)
        - he3 / (720.0 * sigma**3)
        + he5 / (30240.0 * sigma**5)
    )
    return math.log(s)


@numba.njit(cache=True)
def _dg_log_upper_tail(a, sigma):  # pragma: no cover - compiled
    """``log sum_{y >= a} exp(-y^2/(2 sigma^2))`` for integer ``a >= 1``."""
    lead = -(a * a) / (2.0 * sigma * sigma)
    if sigma >= 10.0 and 20.0 * a < sigma * sigma:
        return lead + _dg_log_s_em(a, sigma)
    return lead + _dg_log_s_direct(a, sigma)


@numba.njit(cache=True)
def dg_logcdf(x, params):  # pragma: no cover - compiled
    """``log P(Y <= x)`` of the discrete Gaussian, ``params = [sigma]`` or ``[sigma, log Z]``."""
    sigma = params[0]
    log_z = params[1] if params.size > 1 else numba_log_normalizer(sigma)
    k = math.floor(np.float64(x))
    if k == -math.inf:
        return -math.inf
    if k == math.inf:
        return 0.0
    if k < 0.0:
        return _dg_log_upper_tail(-k, sigma) - log_z
    return _log1mexp(min(_dg_log_upper_tail(k + 1.0, sigma) - log_z, 0.0))


@numba.njit(cache=True)
def laplace_logsf(x, params):  # pragma: no cover - compiled
    """``log P(Y >= x) = laplace_logcdf(-x)`` (symmetric law)."""
    return laplace_logcdf(-np.float64(x), params)


@numba.njit(cache=True)
def gaussian_logsf(x, params):  # pragma: no cover - compiled
    """``log P(Y >= x) = gaussian_logcdf(-x)`` (symmetric law)."""
    return gaussian_logcdf(-np.float64(x), params)


@numba.njit(cache=True)
def geometric_logsf(x, params):  # pragma: no cover - compiled
    """``log P(Y >= x) = geometric_logcdf(-x)`` (symmetric law, any real ``x``)."""
    return geometric_logcdf(-np.float64(x), params)


@numba.njit(cache=True)
def dg_logsf(x, params):  # pragma: no cover - compiled
    """``log P(Y >= x) = dg_logcdf(-x)`` (symmetric law, any real ``x``)."""
    return dg_logcdf(-np.float64(x), params)


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _apply(f, x, params, sign):  # pragma: no cover - compiled
    out = np.empty(x.size)
    for i in range(x.size):
        out[i] = f(sign * x[i], params)
    return out


def vectorized(f, x, params, *, survival: bool = False) -> np.ndarray:
    """Apply a numba tail kernel ``f(x, params)`` to an array (numpy in, numpy out).

    With ``survival=True`` returns ``f(-x)``, i.e. ``log P(Y >= x)`` for a symmetric law.
    ``x`` is taken in float64 (integer inputs are exact up to ``2**53``).

    Examples
    --------
    >>> import numpy as np
    >>> out = vectorized(laplace_logcdf, np.array([0.0, -1.0]), np.array([1.0]))
    >>> bool(np.allclose(out, [np.log(0.5), -1.0 - np.log(2.0)]))
    True
    """
    xa = np.asarray(x).astype(np.float64)
    p = np.ascontiguousarray(params, dtype=np.float64)
    out = _apply(f, np.ascontiguousarray(xa.ravel()), p, -1.0 if survival else 1.0)
    return out.reshape(xa.shape)[()]
