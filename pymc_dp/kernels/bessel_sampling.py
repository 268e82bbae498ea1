r"""Exact sampler and log-pmf kernels for the Bessel distribution :math:`\mathrm{Bes}(\nu, a)`.

The Bessel distribution (Yuan & Kalbfleisch 2000; Schein et al. 2019, eqs. 12-13) has pmf

.. math:: P(N = n) = \frac{(a/2)^{2n+\nu}}{I_\nu(a)\, n!\, \Gamma(n+\nu+1)}, \qquad n = 0, 1, \dots

for :math:`\nu \ge 0` (real) and :math:`a \ge 0` (:math:`a = 0` is the point mass at 0). It
arises in the Skellam augmentation: if :math:`K = Y_1 - Y_2` with independent
:math:`Y_i \sim \mathrm{Poisson}(\lambda_i)`, then
:math:`\min(Y_1, Y_2) \mid K \sim \mathrm{Bes}(|K|, 2\sqrt{\lambda_1\lambda_2})`
(Schein et al. 2019, Theorem 3 and eq. 13; eq. 12 as printed there shows
:math:`2\sqrt{2\lambda^{(+)}\lambda^{(-)}}`, but the conditional pmf
:math:`\propto (\lambda_1\lambda_2)^m / (m!(m+|K|)!)` gives :math:`a = 2\sqrt{\lambda_1\lambda_2}`).

Log-pmf without cancellation. Directly, :math:`(2n+\nu)\log(a/2) - \log I_\nu(a) - \log n!
- \log\Gamma(n+\nu+1)` subtracts terms of size :math:`a\log a` or :math:`\nu\log\nu` to get
a result of size :math:`\log a` (about :math:`10^{-11}` relative lost at :math:`a = 10^4`,
:math:`10^{-9}` at :math:`10^6`). For any :math:`\lambda_1\lambda_2 = a^2/4`,

.. math:: \log P(n) = \log\mathrm{Pois}(n+\nu; \lambda_1) + \log\mathrm{Pois}(n; \lambda_2)
          - \log\mathrm{Skel}(\nu; \lambda_1, \lambda_2),

(expand the three terms: the :math:`\lambda` powers give :math:`(a/2)^{2n+\nu}`, the
:math:`e^{-\lambda}` factors cancel), where
:math:`\log\mathrm{Skel}(\nu; \lambda_1,\lambda_2) = -(\lambda_1+\lambda_2)
+ \tfrac{\nu}{2}\log(\lambda_1/\lambda_2) + \log I_\nu(2\sqrt{\lambda_1\lambda_2})`
(:func:`pymc_dp.math.bessel.log_skellam_kernel`, real :math:`\nu`). We take
:math:`\lambda_2 = q^\ast` and :math:`\lambda_1 = q^\ast + \nu` (:math:`q^\ast` below; then
:math:`\lambda_1\lambda_2 = a^2/4`): :math:`\nu` is the mode of that Skellam, evaluated by the
cancellation-free near-mode formula, and :math:`n + \nu`, :math:`n` sit near the modes of the two
Poisson terms, evaluated in Loader's (2000) form :math:`-\mathrm{stirlerr}(y) - \mathrm{bd0}(y,
\lambda) - \tfrac12\log(2\pi y)` (:mod:`pymc_dp.math.poisson`). Every piece is then of the
size of the result. Measured against mpmath (50 digits) for :math:`\nu \le 10^5`,
:math:`a \le 10^6`: relative error
below :math:`10^{-14}` (``tests/distributions/test_bessel.py``).

Sampler (:func:`bessel_draw`, :func:`bessel_draw_bitgen`). Two exact regimes, chosen by the
mode: with :math:`x = a^2/4`, the mode is at most :math:`M` = ``INVERSION_MODE_MAX`` iff
:math:`x < (M+1)(M+1+\nu)` (below).

*Inversion from 0* (mode :math:`\le M`). With :math:`t_0 = 1`,
:math:`t_k = t_{k-1} r_k`, :math:`r_k = x/(k(k+\nu))` (so :math:`t_k \propto P(k)`, no
transcendental call) and partial sums :math:`S_k`, the draw is the least :math:`j` with
:math:`S_j > uS`, :math:`u` uniform, :math:`S = \sum_k t_k = {}_0F_1(;\nu+1;x)` unknown. The
ratios decrease in :math:`k`, so once :math:`r_{n+1} < 1`,
:math:`S_n \le S \le S_n + t_n r_{n+1}/(1-r_{n+1})`. A lookahead cursor ``n`` extends the
sums; a candidate ``j`` moves on while :math:`S_j \le uS_n` (then certainly
:math:`S_j \le uS`) and is returned once :math:`S_j > u` times the upper bracket (certainly
:math:`S_j > uS`). Every decision is certain, so the law is exactly :math:`t_j/S` (up to the
rounding of the terms, about :math:`10^{-16}` relative each). Most draws with a small
:math:`x` end at the first test, :math:`u < 1 - r_1` (one uniform, one multiply). Expected work:
about the draw's value plus one or two terms.

*Mode-centred rejection* (mode :math:`> M`), for a discrete log-concave law (after Devroye
2002, "Simulating Bessel random variables", whose algorithms rest on the log-concavity of the
pmf and on its mode; this is a reconstruction, not a transcription). Let
:math:`g(n) = \log P(n) + \text{const} = 2n\log(a/2) - \log n! - \log\Gamma(n+\nu+1)`.

* Log-concavity: :math:`g(n+1) - g(n) = 2\log(a/2) - \log(n+1) - \log(n+\nu+1)` decreases in
  :math:`n`.
* Mode: :math:`P(n+1) \ge P(n) \iff (n+1)(n+1+\nu) \le a^2/4`, so
  :math:`m = \lfloor q^\ast \rfloor` with
  :math:`q^\ast = (\sqrt{\nu^2 + a^2} - \nu)/2 = a^2 / (2(\sqrt{\nu^2+a^2} + \nu))`.
* Hat: with :math:`\sigma^{-2} = 1/(m+1) + 1/(m+\nu+1)` (minus the curvature of :math:`g` at the
  mode) and :math:`\delta = \max(1, \lfloor 1.1\,\sigma \rceil)`, set :math:`n_R = m + \delta`,
  :math:`n_L = m - \delta`. The hat is :math:`e^{g(m)}` on the centre
  :math:`[c_L, n_R - 1]`, the tangent-line geometric tail
  :math:`e^{g(n_R) + s_R (n - n_R)}`, :math:`s_R = g(n_R+1) - g(n_R) < 0`, for :math:`n \ge n_R`,
  and, if :math:`n_L \ge 1`, the tail :math:`e^{g(n_L) - s_L (n_L - n)}`,
  :math:`s_L = g(n_L) - g(n_L - 1) > 0`, for :math:`n \le n_L` (then :math:`c_L = n_L + 1`,
  else :math:`c_L = 0`). Concavity makes each tail line an upper bound of :math:`g` on its side
  (the increments beyond :math:`n_R` are :math:`\le s_R`, those below :math:`n_L` are
  :math:`\ge s_L`), and :math:`g \le g(m)` on the centre, so the hat dominates the pmf and
  rejection returns *exact* draws (up to floating-point evaluation of :math:`g`).
* Cost: the expected number of proposals is the hat mass over the pmf mass; for large
  :math:`\sigma` it tends to that of a flat-top-plus-exponential hat over a normal density,
  :math:`\approx 1.28`, and for small :math:`\sigma` the centre holds the mode alone. Measured
  on a grid of :math:`\nu \in [0, 10^4]`, :math:`a \in [10^{-3}, 10^4]` it is at most 1.29
  (:func:`expected_proposals`; the tests assert < 1.6). The sampler needs no normalising
  constant (no Bessel function): one mode, four ``lgamma`` pairs for the hat, then about
  1.3 proposals of one ``lgamma`` pair each (a few hundred ns per draw).

Tests: chi-square against the log-pmf in both regimes and at the switch
(``tests/kernels/test_bessel_sampling.py``, ``tests/distributions/test_bessel.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.np.random.distributions import random_standard_exponential
from numba.np.random.generator_core import next_double

from pymc_dp._cache import lazy_vectorize
from pymc_dp.math.bessel import log1pmx_scalar, log_iv_scalar, log_skellam_kernel
from pymc_dp.math.poisson import bd0, log_poisson_scalar, stirlerr

__all__ = [
    "A_MAX",
    "INVERSION_MODE_MAX",
    "NU_MAX",
    "bd0",
    "bessel_draw",
    "bessel_draw_bitgen",
    "bessel_logpmf",
    "bessel_logpmf_scalar",
    "bessel_mode",
    "expected_proposals",
    "log_poisson_real",
    "sample_bessel",
    "stirlerr",
]

_SPREAD = 1.1
_LOG2 = math.log(2.0)

#: Largest order and argument the sampler accepts. The rejection test compares values of
#: ``g(n) = 2n log(a/2) - log n! - log Gamma(n+nu+1)``, whose float64 rounding grows like
#: ``(n + nu) log(n + nu)`` ulps; within these bounds it stays below 1e-5 in log-probability
#: (1e-9 for parameters below 1e5). Beyond them (where ``n + nu`` would also stop being exact in
#: float64 at ``~ 2**53``) draws are refused rather than silently distorted. Skellam rates up to
#: 1e9 give ``a = 2 sqrt(mu1 mu2) <= 2e9``.
NU_MAX = 1e9
A_MAX = 2e9

#: Largest mode drawn by inversion from 0. Measured (thread CPU time, 2-core machine under
#: load): inversion 31 / 63 / 99 / 156 / 192 ns at modes 2 / 10 / 24 / 48 / 64 (nu = 0; 5-10%
#: more at nu = 1000), rejection 165-210 ns at every mode; 40 keeps inversion about 25% cheaper
#: at the switch. Its largest term, about exp(2 sqrt(x)) <= exp(82) at nu = 0, is far from
#: overflow.
INVERSION_MODE_MAX = 40.0


#: Loader's Poisson log-pmf for real ``y`` (one implementation: :mod:`pymc_dp.math.poisson`)
log_poisson_real = log_poisson_scalar


@numba.njit(cache=True)
def bessel_logpmf_scalar(n, nu, a):
    r"""Bessel log-pmf :math:`\log P(N = n)` (numba scalar kernel).

    NaN for invalid parameters (:math:`\nu < 0`, :math:`a < 0`, non-finite), :math:`-\infty`
    outside the support. Evaluated without cancellation as (module docstring)
    :math:`\log\mathrm{Pois}(n+\nu; \lambda_1) + \log\mathrm{Pois}(n; \lambda_2)
    - \log\mathrm{Skel}(\nu; \lambda_1, \lambda_2)` with :math:`\lambda_2 = q^\ast`,
    :math:`\lambda_1 = q^\ast + \nu`.
    """
    n = float(n)
    nu = float(nu)
    a = float(a)
    if not (nu >= 0.0 and a >= 0.0 and nu < np.inf and a < np.inf):
        return np.nan
    if n < 0.0 or n != math.floor(n):
        return -np.inf
    if a == 0.0:
        return 0.0 if n == 0.0 else -np.inf
    lam2 = (0.5 * a) * (a / (math.hypot(nu, a) + nu))  # q*: lam2 (lam2 + nu) = a^2 / 4
    if lam2 > 1e-280:
        lam1 = lam2 + nu
        return (
            log_poisson_real(n + nu, lam1)
            + log_poisson_real(n, lam2)
            - log_skellam_kernel(nu, lam1, lam2)
        )
    # a^2/4 is negligible against nu + 1 (lam2 ~ a^2 / (4 nu) would be subnormal): with
    # I_nu(a) = (a/2)^nu / Gamma(nu + 1) * 0F1(; nu + 1; a^2/4),
    # log P(n) = 2n log(a/2) - log n! - log[Gamma(nu + 1 + n) / Gamma(nu + 1)] - log 0F1,
    # the (a/2)^nu of numerator and I_nu cancelled analytically (no cancellation at nu ~ 1e300).
    # log(a/2) as log(a) - log(2): a/2 rounds to 0 at a = 5e-324 (then 2n log(a/2) was -inf,
    # and 0 * -inf NaN at n = 0); log a is finite here (a > 0), so n = 0 needs no special case
    # log 0F1(; nu + 1; a^2/4) = a^2 / (4 (nu + 1)) (1 + O(a^2)), below 1e-280 here
    log_f = (0.25 * a) * (a / (nu + 1.0))
    return 2.0 * n * (math.log(a) - _LOG2) - math.lgamma(n + 1.0) - _log_rising(nu + 1.0, n) - log_f


@numba.njit(cache=True)
def _log_rising(x, h):
    """``log Gamma(x + h) - log Gamma(x)`` for ``x >= 1``, ``h >= 0``, without cancellation."""
    if x < 1e3:
        return math.lgamma(x + h) - math.lgamma(x)
    # Stirling: (x + h - 1/2) log(x + h) - (x - 1/2) log x - h + stirlerr(x + h) - stirlerr(x),
    # written as h log(x + h) - log1p(h/x)/2 + x log1pmx(h/x) + ...; stirlerr(y) = 1/(12 y)
    # - 1/(360 y^3) + O(y^-5), an error below 1e-15 at x >= 1e3
    y = x + h
    stirl = (1.0 / 12.0) * (1.0 / y - 1.0 / x) - (1.0 / 360.0) * (1.0 / y**3 - 1.0 / x**3)
    return h * math.log(y) - 0.5 * math.log1p(h / x) + x * log1pmx_scalar(h / x) + stirl


@lazy_vectorize(
    ["float64(float64, float64, float64)", "float64(int64, float64, float64)"], cache=True
)
def _bessel_logpmf_ufunc(n, nu, a):
    return bessel_logpmf_scalar(n, nu, a)


def bessel_logpmf(n, nu, a):
    """Bessel log-pmf on numpy arrays (broadcasting).

    Examples
    --------
    >>> import numpy as np
    >>> float(np.exp(bessel_logpmf(np.arange(200), 3.0, 20.0)).sum())
    1.0000000000...
    """
    # results are finite or correctly -inf; an untaken branch may raise a spurious flag
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        return _bessel_logpmf_ufunc(
            np.asarray(n, dtype=np.float64),
            np.asarray(nu, dtype=np.float64),
            np.asarray(a, dtype=np.float64),
        )


@numba.njit(cache=True)
def bessel_mode(nu, a):
    r"""Mode :math:`\lfloor a^2 / (2(\sqrt{\nu^2+a^2}+\nu)) \rfloor` (numba scalar kernel)."""
    if a == 0.0:
        return 0.0
    return math.floor(a * a / (2.0 * (math.hypot(nu, a) + nu)))


@numba.njit(cache=True)
def _g(n, nu, two_log_half_a):
    return n * two_log_half_a - math.lgamma(n + 1.0) - math.lgamma(n + nu + 1.0)


@numba.njit(cache=True)
def _hat(nu, a):
    """Hat of the rejection sampler: mode, bounds, log-heights, slopes and masses (units p(m))."""
    tl = 2.0 * math.log(0.5 * a)
    m = bessel_mode(nu, a)
    sigma = 1.0 / math.sqrt(1.0 / (m + 1.0) + 1.0 / (m + nu + 1.0))
    delta = max(1.0, math.floor(_SPREAD * sigma + 0.5))
    gm = _g(m, nu, tl)
    n_right = m + delta
    g_right = _g(n_right, nu, tl) - gm
    s_right = _g(n_right + 1.0, nu, tl) - gm - g_right
    w_right = math.exp(g_right) / (-math.expm1(s_right))
    n_left = m - delta
    if n_left >= 1.0:
        g_left = _g(n_left, nu, tl) - gm
        s_left = g_left - (_g(n_left - 1.0, nu, tl) - gm)
        w_left = math.exp(g_left) / (-math.expm1(-s_left))
        c_left = n_left + 1.0
    else:
        g_left = 0.0
        s_left = 0.0
        w_left = 0.0
        c_left = 0.0
    w_centre = n_right - c_left
    return (
        m,
        c_left,
        n_left,
        n_right,
        gm,
        g_left,
        g_right,
        s_left,
        s_right,
        w_centre,
        w_right,
        w_left,
    )


@numba.njit(cache=True)
def _bessel_inversion(bitgen, nu, x):
    r"""Exact inversion from 0 for :math:`\mathrm{Bes}(\nu, 2\sqrt{x})`, normaliser unknown.

    Terms :math:`t_0 = 1`, :math:`t_k = t_{k-1} r_k`, :math:`r_k = x / (k (k + \nu))`;
    partial sums :math:`S_k`; the answer is the least :math:`j` with :math:`S_j > u S`. A
    lookahead cursor ``n`` brackets :math:`S \in [S_n, S_n + t_n r_{n+1} / (1 - r_{n+1})]`
    once :math:`r_{n+1} < 1` (the ratios decrease in :math:`k`); the candidate cursor ``j``
    (recomputing the same terms) moves on while :math:`S_j \le u S_n` (certainly below) and
    stops when :math:`S_j > u` times the upper bound (certainly the answer).
    """
    u = next_double(bitgen)
    d = 1.0 + nu
    if u * d < d - x:  # the first step below at n = j = 0: u < 1 - r_1 (mostly taken)
        return 0
    j, tj, sj = 0, 1.0, 1.0
    n, tn, sn = 0, 1.0, 1.0
    while True:
        r = x / ((n + 1.0) * (n + 1.0 + nu))
        if r < 1.0:
            usn = u * sn
            while sj <= usn and j < n:
                j += 1
                tj *= x / (j * (j + nu))
                sj += tj
            # sj > u (sn + tn r / (1 - r)), multiplied out by 1 - r > 0
            if (sj - usn) * (1.0 - r) > u * (tn * r):
                return j
        n += 1
        tn *= r
        sn += tn


@numba.njit(cache=True)
def _bessel_rejection(bitgen, nu, a):
    """Mode-centred rejection (module docstring) for ``a > 0``."""
    tl = 2.0 * math.log(0.5 * a)
    (_m, c_left, n_left, n_right, gm, g_left, g_right, s_left, s_right, w_c, w_r, w_l) = _hat(nu, a)
    total = w_c + w_r + w_l
    while True:
        u = next_double(bitgen) * total
        if u < w_c:
            n = c_left + math.floor(u)
            if n >= n_right:  # guard against rounding at the upper edge
                continue
            log_hat = 0.0
        elif u < w_c + w_r:
            j = math.floor(random_standard_exponential(bitgen) / (-s_right))
            n = n_right + j
            log_hat = g_right + s_right * j
        else:
            j = math.floor(random_standard_exponential(bitgen) / s_left)
            n = n_left - j
            if n < 0.0:
                continue
            log_hat = g_left - s_left * j
        log_target = _g(n, nu, tl) - gm
        if math.log(next_double(bitgen)) <= log_target - log_hat:
            return int(n)


@numba.njit(cache=True)
def bessel_draw_bitgen(bitgen, nu, x):
    r"""One exact draw from :math:`\mathrm{Bes}(\nu, a)` given :math:`x = a^2/4` (numba).

    ``bitgen`` is a numpy Generator's ``bit_generator`` inside numba (``rng.bit_generator``):
    a helper that takes the Generator itself pays reference counting on every call. Inversion
    from 0 (:func:`_bessel_inversion`) when the mode is at most ``INVERSION_MODE_MAX``
    (:math:`x < (M+1)(M+1+\nu)`), else the mode-centred rejection. No validation: ``nu`` and
    ``x`` must be valid (``0 <= nu <= NU_MAX``, ``0 <= x <= A_MAX**2 / 4``; :func:`bessel_draw`
    checks).
    """
    if x == 0.0:
        return 0
    m1 = INVERSION_MODE_MAX + 1.0
    if x < m1 * (m1 + nu):
        return _bessel_inversion(bitgen, nu, x)
    return _bessel_rejection(bitgen, nu, 2.0 * math.sqrt(x))


@numba.njit(cache=True)
def bessel_draw(rng, nu, a):
    r"""One exact draw from :math:`\mathrm{Bes}(\nu, a)` (numba; ``rng`` a numpy Generator)."""
    nu = float(nu)
    a = float(a)
    if not (nu >= 0.0 and nu <= NU_MAX):  # False for NaN
        raise ValueError(
            "Bessel draw: nu must be >= 0 and <= 1e9 (NU_MAX, the sampler's exact range); "
            "got a NaN, negative or larger nu"
        )
    if not (a >= 0.0 and a <= A_MAX):
        raise ValueError(
            "Bessel draw: a must be >= 0 and <= 2e9 (A_MAX, the sampler's exact range); "
            "got a NaN, negative or larger a"
        )
    half = 0.5 * a
    return bessel_draw_bitgen(rng.bit_generator, nu, half * half)


@numba.njit(cache=True)
def _sample_flat(nu, a, rng, out):
    bitgen = rng.bit_generator
    for i in range(out.size):
        half = 0.5 * a[i]
        out[i] = bessel_draw_bitgen(bitgen, nu[i], half * half)


def sample_bessel(nu, a, rng=None, size=None):
    r"""Exact draws from :math:`\mathrm{Bes}(\nu, a)`, vectorised (numba) over arrays.

    Parameters
    ----------
    nu : array_like of float
        Orders, in ``[0, NU_MAX]`` (real orders allowed).
    a : array_like of float
        Arguments, in ``[0, A_MAX]``.
    rng : numpy.random.Generator or int or None
        Source of randomness.
    size : tuple of int, optional
        Output shape; ``nu`` and ``a`` must broadcast to it. Default: their broadcast shape.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> import numpy as np
    >>> x = sample_bessel(np.array([0.0, 5.0, 1e4]), np.array([1.0, 30.0, 1e4]), rng=1)
    >>> x.dtype, x.shape
    (dtype('int64'), (3,))
    """
    rng = np.random.default_rng(rng)
    nu = np.asarray(nu, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    shape = np.broadcast_shapes(nu.shape, a.shape) if size is None else tuple(np.atleast_1d(size))
    nu_b = np.ascontiguousarray(np.broadcast_to(nu, shape)).ravel()
    a_b = np.ascontiguousarray(np.broadcast_to(a, shape)).ravel()
    if not np.all((nu_b >= 0) & (nu_b <= NU_MAX)):
        raise ValueError(f"nu must be finite, >= 0 and <= NU_MAX = {NU_MAX:g}, got {nu!r}")
    if not np.all((a_b >= 0) & (a_b <= A_MAX)):
        raise ValueError(f"a must be finite, >= 0 and <= A_MAX = {A_MAX:g}, got {a!r}")
    out = np.empty(nu_b.size, dtype=np.int64)
    _sample_flat(nu_b, a_b, rng, out)
    return out.reshape(shape)


def expected_proposals(nu, a):
    r"""Expected number of proposals per draw (hat mass / pmf mass) at one ``(nu, a)``.

    Examples
    --------
    >>> 1.0 <= expected_proposals(10.0, 100.0) < 1.6
    True
    """
    nu = float(nu)
    a = float(a)
    if a == 0.0:
        return 1.0
    _, _, _, _, gm, _, _, _, _, w_c, w_r, w_l = _hat(nu, a)
    log_pm = gm + nu * math.log(0.5 * a) - float(log_iv_scalar(nu, a))
    return float((w_c + w_r + w_l) * math.exp(log_pm))
