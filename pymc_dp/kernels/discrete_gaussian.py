r"""Core log-pmf of the discrete Gaussian law, with its normaliser and its exact privacy curve.

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

Exact privacy curve (CKS 2020, Theorem 7). For integer sensitivity :math:`\Delta`, the privacy loss
of :math:`M(x) = x + Y` at output :math:`y` between neighbours 0 and :math:`\Delta` is
:math:`\log p(y)/p(y-\Delta) = (\Delta^2 - 2y\Delta)/(2\sigma^2)`, so the tight
:math:`\delta(\epsilon) = \sum_y [p(y) - e^\epsilon p(y - \Delta)]_+` is

.. math:: \delta(\epsilon) = P[Y > a] - e^{\epsilon} P[Y > a + \Delta],
          \qquad a = \frac{\epsilon\sigma^2}{\Delta} - \frac{\Delta}{2},

and, shifting the second sum by :math:`\Delta`, the same value is the sum of *positive* terms

.. math:: \delta(\epsilon) = \frac{1}{Z}\sum_{y > a} e^{-y^2/(2\sigma^2)}
          \Bigl(-\operatorname{expm1}\bigl(\epsilon - \tfrac{2y\Delta + \Delta^2}{2\sigma^2}
          \bigr)\Bigr),

which :func:`delta_exact` sums directly (no cancellation) whenever at most 100 000 terms carry
mass above :math:`e^{-40}` relative to the first (terms with :math:`y < -40\sigma`, each below
:math:`e^{-800}`, are dropped). Beyond that (very large ``sigma`` or
``sensitivity``) it evaluates the two tails by the Euler-Maclaurin formula with three Bernoulli
corrections, :math:`\sum_{y \ge k} f(y) = \sigma\sqrt{\pi/2}\operatorname{erfc}(u/\sqrt2) + f(k)
[\tfrac12 + \tfrac{1}{12}\sigma^{-1}He_1(u) - \tfrac{1}{720}\sigma^{-3}He_3(u) +
\tfrac{1}{30240}\sigma^{-5}He_5(u)]` with :math:`u = k/\sigma` (relative truncation error below
1e-16 there, since then :math:`\sigma > 10^4`); the difference of the tails then has
relative error about :math:`10^{-16}\,P[Y > a]/\delta`.

Log CDF. By symmetry :math:`P(Y \le k) = T(-k)/Z` with the upper tail
:math:`T(a) = \sum_{y \ge a} e^{-y^2/(2\sigma^2)}`, so only :math:`T(a)` for :math:`a \ge 1` is
needed: :math:`\log F(k) = \log T(|k|) - \log Z` for :math:`k < 0` and
:math:`\log F(k) = \operatorname{log1mexp}(\log T(k+1) - \log Z)` for :math:`k \ge 0`.
Writing :math:`T(a) = e^{-a^2/(2\sigma^2)} S(a)`,

* :math:`S(a) = \sum_{j \ge 0} e^{-(2aj + j^2)/(2\sigma^2)}` is summed over
  :math:`j < 400` when :math:`\sigma < 10` or :math:`a \ge \sigma^2/10` (the first neglected
  term is then below :math:`e^{-78}` times the first);
* otherwise (:math:`\sigma \ge 10`, :math:`a < \sigma^2/10`) the Euler-Maclaurin formula above
  gives :math:`S(a) = \sigma\sqrt{\pi/2}\operatorname{erfcx}(u/\sqrt2) + \tfrac12 +
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

import numba
import numpy as np
import pytensor.tensor as pt
from scipy import special

__all__ = [
    "delta_exact",
    "log_normalizer",
    "log_normalizer_pt",
    "logcdf_pt",
    "logpmf",
    "logpmf_pt",
    "numba_log_normalizer",
    "numba_logpmf",
    "numba_logpmf_scalar",
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


# ---- exact privacy curve ------------------------------------------------------------------------
_MAX_TERMS = 100_000


def _tail_em(k: float, sigma: float) -> float:
    """``sum_{y >= k} exp(-y^2/(2 sigma^2))`` for integer ``k`` by Euler-Maclaurin (large sigma)."""
    u = k / sigma
    if u >= 40.0:  # below exp(-800) relative to Z
        return 0.0
    if u <= -40.0:  # all of Z up to exp(-800)
        return math.exp(float(log_normalizer(sigma)))
    f = math.exp(-0.5 * u * u)
    he1 = u
    he3 = u**3 - 3.0 * u
    he5 = u**5 - 10.0 * u**3 + 15.0 * u
    corr = 0.5 + he1 / (12.0 * sigma) - he3 / (720.0 * sigma**3) + he5 / (30240.0 * sigma**5)
    return sigma * math.sqrt(math.pi / 2.0) * special.erfc(u / math.sqrt(2.0)) + f * corr


def delta_exact(epsilon: float, sigma: float, sensitivity: int) -> float:
    """Tight ``delta(epsilon)`` of the discrete Gaussian mechanism (CKS 2020, Theorem 7).

    See the module docstring for the derivation and the evaluation method.

    Examples
    --------
    >>> round(delta_exact(1.0, 2.0, 1), 10)
    0.0072487768
    """
    eps = float(epsilon)
    s = float(sigma)
    d = int(sensitivity)
    a = eps * s * s / d - d / 2.0
    if not a < 40.0 * s:  # delta <= P[Y > 40 s] < exp(-800): 0 in float64
        return 0.0
    k1 = math.floor(a) + 1  # first integer y > a (the term at y == a is 0 anyway)
    log_z = float(log_normalizer(s))
    # the summand decays at least like exp(-(y^2 - k1^2)/(2 s^2)) beyond y >= max(k1, 0), and
    # is at most p(y) < exp(-800) for y < -40 s - 2: those terms are dropped
    start0 = max(k1, 0)
    first = max(k1, -math.ceil(40.0 * s) - 2)
    width = math.sqrt(start0 * start0 + 80.0 * s * s) - start0 + 2.0
    n_terms = (start0 - first) + width
    if n_terms <= _MAX_TERMS:
        y = np.arange(first, start0 + math.ceil(width) + 1, dtype=np.float64)
        z = y / s
        arg = eps - (2.0 * y * d + d * d) / (2.0 * s * s)
        log_terms = -0.5 * z * z + np.log(-np.expm1(np.minimum(arg, 0.0))) - log_z
        return float(math.fsum(np.exp(log_terms).tolist()))
    z_ = math.exp(log_z)
    res = (_tail_em(k1, s) - math.exp(eps) * _tail_em(k1 + d, s)) / z_
    return min(max(res, 0.0), 1.0)
