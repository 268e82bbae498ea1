r"""The discrete Gaussian law: log-pmf (numpy, PyTensor, numba), normaliser, log CDF, sampler.

The discrete Gaussian :math:`\mathcal{N}_{\mathbb{Z}}(0, \sigma^2)` (Canonne, Kamath & Steinke
2020, Definition 1) has pmf

.. math:: p(k \mid \sigma) = \frac{e^{-k^2/(2\sigma^2)}}{Z(\sigma)}, \qquad
          Z(\sigma) = \sum_{k\in\mathbb{Z}} e^{-k^2/(2\sigma^2)}.

Log normaliser. Two series, both with positive terms and no cancellation:

* direct, for :math:`\sigma < 1`: :math:`\log Z = \operatorname{log1p}\bigl(2\sum_{k=1}^{12}
  e^{-k^2/(2\sigma^2)}\bigr)`; the first neglected term is below :math:`e^{-84.5} < 10^{-36}`;
* Poisson summation (Jacobi theta dual), for :math:`\sigma \ge 1`:
  :math:`Z = \sigma\sqrt{2\pi}\,\bigl(1 + 2\sum_{n\ge1} e^{-2\pi^2\sigma^2 n^2}\bigr)`, so
  :math:`\log Z = \log\sigma + \tfrac12\log 2\pi + \operatorname{log1p}\bigl(2\sum_{n=1}^{3}
  e^{-2\pi^2\sigma^2n^2}\bigr)`; the first neglected term is below :math:`e^{-32\pi^2} < 10^{-137}`.

Both series are evaluated in both branches of the PyTensor ``switch`` and stay finite everywhere
(``sigma`` is floored at 1e-3 in the direct branch, where every term is already 0), so gradients
are never NaN.

The exact privacy curve of the mechanism built on this law (CKS 2020, Theorem 7) is
accounting, and lives in :mod:`pymc_dp.accounting` (``discrete_gaussian_delta``).

Exact sampler (CKS 2020, Algorithm 3). :func:`sample_discrete_gaussian` proposes from the
discrete Laplace law with scale ``t`` (:mod:`pymc_dp.kernels.discrete_laplace`) and accepts with
probability :math:`\exp(-(|Y| - \sigma^2/t)^2/(2\sigma^2))`, all in int64 arithmetic for
rational :math:`\sigma^2 = t m / d` (:func:`gaussian_rational` picks ``t, m, d`` with
``t m / d >= sigma**2``, more noise never less, and every product inside int64). It never returns
:math:`|y| >` ``ymax`` with ``ymax >= sigma**2 / t + 40 sigma``; under the target law that event
has probability below :math:`e^{-800} < 10^{-340}` (it is proposed again instead), which keeps
``(d|y| - m)^2`` inside int64 and is the only departure from the exact law.

Log CDF. By symmetry :math:`P(Y \le k) = T(-k)/Z` with the upper tail
:math:`T(a) = \sum_{y \ge a} e^{-y^2/(2\sigma^2)}`, so only :math:`T(a)` for :math:`a \ge 1` is
needed: :math:`\log F(k) = \log T(|k|) - \log Z` for :math:`k < 0` and
:math:`\log F(k) = \operatorname{log1mexp}(\log T(k+1) - \log Z)` for :math:`k \ge 0`.
Writing :math:`T(a) = e^{-a^2/(2\sigma^2)} S(a)`,

* :math:`S(a) = \sum_{j \ge 0} e^{-(2aj + j^2)/(2\sigma^2)}` is summed over
  :math:`j < 400` when :math:`\sigma < 10` or :math:`a \ge \sigma^2/10` (the first neglected
  term is then below :math:`e^{-78}` times the first);
* otherwise (:math:`\sigma \ge 10`, :math:`a < \sigma^2/10`) the Euler-Maclaurin formula with
  three Bernoulli corrections gives
  :math:`S(a) = \sigma\sqrt{\pi/2}\operatorname{erfcx}(u/\sqrt2) + \tfrac12 +
  \tfrac{He_1(u)}{12\sigma} - \tfrac{He_3(u)}{720\sigma^3} + \tfrac{He_5(u)}{30240\sigma^5}`,
  :math:`u = a/\sigma`; the first neglected correction is of order
  :math:`(a/\sigma^2)^7/1209600 < 10^{-13}`.

Both branches are evaluated on clipped inputs so the unused one stays finite (no NaN gradient).

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.discrete_gaussian import log_normalizer, logpmf
>>> k = np.arange(-60, 61)
>>> round(float(np.log(np.sum(np.exp(logpmf(k, 3.0))))), 12)
0.0
>>> round(float(log_normalizer(1.0)), 12)  # log sqrt(2 pi) + 2 e^{-2 pi^2} + ...
0.918938538555
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np
import pytensor.tensor as pt

from pymc_dp.kernels.discrete_laplace import _discrete_laplace_one
from pymc_dp.kernels.exact_sampling import _MAX63, _bernoulli_exp, _check_int, _drive, best_rational

__all__ = [
    "gaussian_rational",
    "log_normalizer",
    "log_normalizer_pt",
    "logcdf_pt",
    "logpmf",
    "logpmf_pt",
    "numba_log_normalizer",
    "numba_logpmf",
    "numba_logpmf_scalar",
    "sample_discrete_gaussian",
    "variance",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_TWO_PI2 = 2.0 * math.pi**2
_K_DIRECT = np.arange(1, 13, dtype=np.float64)
_N_DUAL = np.arange(1, 4, dtype=np.float64)
_SIGMA_FLOOR = 1e-3  # below it every direct term exp(-k^2/(2 sigma^2)) is exactly 0.0


# ---- numpy --------------------------------------------------------------------------------------
def log_normalizer(sigma):
    """``log Z(sigma) = log sum_k exp(-k^2/(2 sigma^2))`` (numpy, vectorised, stable)."""
    s = np.asarray(sigma, dtype=np.float64)
    sd = np.maximum(s, _SIGMA_FLOOR)[..., None]
    direct = np.log1p(2.0 * np.sum(np.exp(-(_K_DIRECT**2) / (2.0 * sd * sd)), axis=-1))
    sp = s[..., None]
    dual = (
        np.log(s)
        + _HALF_LOG_2PI
        + np.log1p(2.0 * np.sum(np.exp(-_TWO_PI2 * (sp * sp) * _N_DUAL**2), axis=-1))
    )
    return np.where(s < 1.0, direct, dual)[()]


def logpmf(k, sigma):
    """Log pmf of the discrete Gaussian at ``k`` (``-inf`` off the integers)."""
    kf = np.asarray(k).astype(np.float64)
    s = np.asarray(sigma, dtype=np.float64)
    ok = np.isfinite(kf) & (kf == np.round(kf))
    with np.errstate(over="ignore", under="ignore"):
        z = np.where(ok, kf, 0.0) / s
        return np.where(ok, -0.5 * z * z - log_normalizer(s), -np.inf)[()]


# ---- PyTensor -----------------------------------------------------------------------------------
def variance(sigma: float) -> float:
    r"""Variance of the discrete Gaussian with parameter ``sigma``:
    ``sum_k k^2 e^{-k^2/(2 sigma^2)} / sum_k e^{-k^2/(2 sigma^2)}``, summed over
    ``|k| <= 40 sigma + 2`` for ``sigma < 50``; ``sigma^2`` beyond (exact to about
    ``e^{-2 pi^2 sigma^2}``, Poisson summation).

    Examples
    --------
    >>> round(variance(0.5), 6), variance(100.0)
    (0.215013, 10000.0)
    """
    sigma = float(sigma)
    if sigma >= 50.0:
        return sigma**2
    k = np.arange(-math.ceil(40 * sigma) - 2, math.ceil(40 * sigma) + 3, dtype=np.float64)
    w = np.exp(-(k**2) / (2.0 * sigma**2))
    return float(np.sum(k**2 * w) / np.sum(w))


def log_normalizer_pt(sigma):
    """``log Z(sigma)`` as a float64 PyTensor graph (both branches finite, see module doc)."""
    sigma = pt.as_tensor_variable(sigma)
    sd = pt.shape_padright(pt.maximum(sigma, np.float64(_SIGMA_FLOOR)))
    k2 = pt.as_tensor_variable(_K_DIRECT**2)
    direct = pt.log1p(np.float64(2.0) * pt.sum(pt.exp(-k2 / (np.float64(2.0) * sd * sd)), axis=-1))
    sp = pt.shape_padright(sigma)
    n2 = pt.as_tensor_variable(_TWO_PI2 * _N_DUAL**2)
    dual = (
        pt.log(sigma)
        + np.float64(_HALF_LOG_2PI)
        + pt.log1p(np.float64(2.0) * pt.sum(pt.exp(-n2 * sp * sp), axis=-1))
    )
    return pt.switch(pt.lt(sigma, np.float64(1.0)), direct, dual)


def logpmf_pt(value, sigma):
    """Log pmf as a float64 PyTensor graph; float ``value`` off the integers gets ``-inf``."""
    value = pt.as_tensor_variable(value)
    sigma = pt.as_tensor_variable(sigma)
    z = value.astype("float64") / sigma
    res = np.float64(-0.5) * z * z - log_normalizer_pt(sigma)
    if value.dtype.startswith("float"):
        return pt.switch(pt.eq(value, pt.round(value)), res, -np.inf)
    return res


_J_TAIL = np.arange(400, dtype=np.float64)


def _log_upper_tail_pt(a, sigma):
    """``log sum_{y >= a} exp(-y^2/(2 sigma^2))`` for ``a >= 1`` (PyTensor, see module doc)."""
    two_s2 = np.float64(2.0) * sigma * sigma
    lead = -(a * a) / two_s2
    # direct: S(a) = sum_j exp(-(2 a j + j^2)/(2 sigma^2)), a >= 1 so every term is <= 1
    j = pt.as_tensor_variable(_J_TAIL)
    a_ = pt.shape_padright(a)
    s2_ = pt.shape_padright(two_s2)
    direct = pt.log(pt.sum(pt.exp(-(np.float64(2.0) * a_ * j + j * j) / s2_), axis=-1))
    # Euler-Maclaurin on clipped inputs (sigma >= 10, a <= sigma^2/10)
    se = pt.maximum(sigma, np.float64(10.0))
    ae = pt.minimum(a, se * se / np.float64(10.0))
    u = ae / se
    he1 = u
    he3 = u**3 - np.float64(3.0) * u
    he5 = u**5 - np.float64(10.0) * u**3 + np.float64(15.0) * u
    em = (
        se * np.float64(math.sqrt(math.pi / 2.0)) * pt.erfcx(u / np.float64(math.sqrt(2.0)))
        + np.float64(0.5)
        + he1 / (np.float64(12.0) * se)
        - he3 / (np.float64(720.0) * se**3)
        + he5 / (np.float64(30240.0) * se**5)
    )
    use_em = pt.and_(pt.ge(sigma, np.float64(10.0)), pt.lt(a * np.float64(10.0), sigma * sigma))
    return lead + pt.switch(use_em, pt.log(em), direct)


def logcdf_pt(value, sigma):
    """Log CDF ``log P(Y <= value)`` as a float64 PyTensor graph (``value`` is floored)."""
    k = pt.floor(pt.as_tensor_variable(value)).astype("float64")
    sigma = pt.as_tensor_variable(sigma)
    neg = pt.lt(k, np.float64(0.0))
    a = pt.switch(neg, -k, k + np.float64(1.0))  # >= 1 in both cases
    log_t = _log_upper_tail_pt(a, sigma)
    log_z = log_normalizer_pt(sigma)
    return pt.switch(neg, log_t - log_z, pt.log1mexp(pt.minimum(log_t - log_z, np.float64(0.0))))


# ---- numba --------------------------------------------------------------------------------------
@numba.njit(cache=True)
def numba_log_normalizer(sigma):
    """Scalar ``log Z(sigma)`` (numba)."""
    if sigma < 1.0:
        sd = max(sigma, _SIGMA_FLOOR)
        acc = 0.0
        for k in range(1, 13):
            acc += math.exp(-(k * k) / (2.0 * sd * sd))
        return math.log1p(2.0 * acc)
    acc = 0.0
    for n in range(1, 4):
        acc += math.exp(-_TWO_PI2 * sigma * sigma * (n * n))
    return math.log(sigma) + _HALF_LOG_2PI + math.log1p(2.0 * acc)


@numba.njit(cache=True)
def numba_logpmf_scalar(x, sigma):
    """Scalar log pmf ``f(x, sigma)`` (numba); ``x`` is taken in float64 (no wrap)."""
    x = np.float64(x)
    if not (math.isfinite(x) and x == math.floor(x)):
        return -math.inf
    z = x / sigma
    return -0.5 * z * z - numba_log_normalizer(sigma)


@numba.njit(cache=True)
def numba_logpmf(x, params):
    """Log pmf ``f(x: float64, params: float64[::1])`` (numba).

    ``params = [sigma]``, or ``[sigma, log Z(sigma)]`` with the log normaliser precomputed (as
    :class:`~pymc_dp.mechanisms.discrete_gaussian.DiscreteGaussian` passes it).
    """
    x = np.float64(x)
    if params.size == 1:
        return numba_logpmf_scalar(x, params[0])
    if not (math.isfinite(x) and x == math.floor(x)):
        return -math.inf
    z = x / params[0]
    return -0.5 * z * z - params[1]


# ---- exact sampler (CKS 2020 Algorithm 3) -------------------------------------------------------
@numba.njit(cache=True)
def _discrete_gaussian_one(t, m, d, ymax, words, st):
    """One draw with pmf proportional to ``exp(-y^2 / (2 sigma^2))``, ``sigma^2 = t m / d``.

    CKS Algorithm 3: propose ``Y`` from the discrete Laplace with scale ``t`` (``s = 1``) and accept
    with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``. With ``sigma^2 / t = m / d`` the
    exponent is the rational ``(d|Y| - m)^2 / (2 d t m)``.
    """
    den = 2 * d * t * m
    while True:
        y = _discrete_laplace_one(1, t, words, st)
        if st[1]:
            return np.int64(0)
        ay = abs(y)
        if ay > ymax:
            continue
        a = d * ay - m
        if _bernoulli_exp(a * a, den, words, st):
            if st[1]:
                return np.int64(0)
            return y
        if st[1]:
            return np.int64(0)


@numba.njit(cache=True)
def _fill_discrete_gaussian(out, start, words, pos, t, m, d, ymax):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    i = start
    while i < out.size:
        p = st[0]
        y = _discrete_gaussian_one(t, m, d, ymax, words, st)
        if st[1]:
            return i, p
        out[i] = y
        i += 1
    return i, st[0]


# Largest |d y - m| kept in int64 when squared: floor(sqrt(2**63 - 1)).
_A_MAX = math.isqrt(_MAX63)


def gaussian_rational(sigma2: Fraction):
    """Integer parameters ``(t, m, d, ymax)`` of the exact discrete Gaussian sampler.

    The sampled variance is ``t m / d >= sigma2`` (rounded towards more noise), with
    ``t = floor(sigma) + 1`` (CKS's choice of proposal scale) and ``m / d`` the best rational
    approximation from above of ``sigma2 / t`` whose terms keep every product in int64:
    ``d * ymax + m <= floor(sqrt(2**63 - 1))`` and ``2 d t m <= 2**62``.
    Exact binary rationals with small denominators (``sigma = 2.0``, ``0.5`` ...) are kept exactly.

    Examples
    --------
    >>> from fractions import Fraction
    >>> t, m, d, ymax = gaussian_rational(Fraction(4))
    >>> (t, m, d), Fraction(t * m, d)
    ((3, 4, 3), Fraction(4, 1))
    """
    if not sigma2 > 0:
        raise ValueError(f"sigma**2 must be > 0, got {sigma2}")
    sigma = math.sqrt(float(sigma2))
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1  # floor(sigma) + 1
    c = sigma2 / t  # c < sigma + 1
    ceil_c = math.ceil(c)  # exact on a Fraction
    ymax = ceil_c + math.ceil(40.0 * sigma) + 2
    # d * ymax + m <= A_MAX with m <= c d + 1 and 2 d t m <= 2**62:
    dmax = (_A_MAX - 1) // (ymax + ceil_c + 1)
    dmax = min(dmax, math.isqrt((2**61) // (t * (ceil_c + 1))))
    if dmax < 1:
        raise ValueError(f"sigma={sigma!r} is too large for the exact int64 sampler")
    approx = best_rational(c, dmax, "above", pbound=_A_MAX)
    m, d = approx.numerator, approx.denominator
    if d > dmax or d * ymax + m > _A_MAX or 2 * d * t * m > 2**62:  # pragma: no cover - guard
        raise ValueError(f"sigma={sigma!r} is out of range for the exact int64 sampler")
    return t, m, d, ymax


def sample_discrete_gaussian(t: int, m: int, d: int, ymax: int, size, rng=None) -> np.ndarray:
    """Exact discrete Gaussian draws with ``sigma**2 = t m / d`` (CKS Algorithm 3).

    Get the parameters from :func:`gaussian_rational`.

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> y = sample_discrete_gaussian(*gaussian_rational(Fraction(4)), 20_000,
    ...                              rng=np.random.default_rng(2))
    >>> bool(abs(y.var() / 4 - 1) < 0.05)
    True
    """
    t, m, d, ymax = (_check_int(n, v) for n, v in zip("tmdy", (t, m, d, ymax), strict=True))
    if d * ymax + m > _A_MAX or 2 * d * t * m > 2**62:
        raise ValueError("discrete Gaussian parameters overflow int64; use gaussian_rational")
    params = (np.int64(t), np.int64(m), np.int64(d), np.int64(ymax))
    return _drive(_fill_discrete_gaussian, size, params, rng, 24.0)
