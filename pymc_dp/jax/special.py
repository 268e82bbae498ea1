r"""JAX forms of pymc_dp's special functions (elementwise, float64, ``jax.jit``-compatible).

Each function here is the vectorized twin of a numba scalar kernel, with the same regions,
series and stopping rules (read the derivations beside the numba kernels):

* :func:`log_ive_and_ratio`, :func:`log_iv`, :func:`dlog_iv` --
  :mod:`pymc_dp.math.bessel` (power series, Debye expansion, downward recurrence);
* :func:`skellam_logpmf` -- :mod:`pymc_dp.distributions.skellam`;
* :func:`stirlerr`, :func:`bd0`, :func:`log_poisson` -- :mod:`pymc_dp.math.poisson` (Loader);
* :func:`bessel_logpmf` -- :mod:`pymc_dp.kernels.bessel_sampling`;
* :func:`count_mode` -- :mod:`pymc_dp.math.count_mode` (64 halvings).

Branches become ``jnp.where`` over every branch (each evaluated on placeholder inputs where it
does not apply, so nothing there overflows into the selected value), and the numba loops
become loops with a fixed number of steps at least the largest the numba loop can take, whose
further terms are below the numba stopping threshold. Gradients are not taken through these
functions: :mod:`pymc_dp.jax.dispatch` gives each Op its analytic derivative.

Examples
--------
>>> import jax
>>> jax.config.update("jax_enable_x64", True)
>>> import numpy as np
>>> from pymc_dp.math.bessel import log_iv as log_iv_numba
>>> nu, x = np.array([0.0, 3.5, 300.0]), np.array([1e4, 3.0, 3.0])
>>> bool(np.allclose(log_iv(nu, x), log_iv_numba(nu, x), rtol=1e-14))
True
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln

from pymc_dp.math import bessel as _nb_bessel
from pymc_dp.math import poisson as _nb_poisson

__all__ = [
    "bd0",
    "bessel_logpmf",
    "count_mode",
    "dlog_iv",
    "iv_ratio",
    "log1pmx",
    "log_iv",
    "log_ive",
    "log_ive_and_ratio",
    "log_poisson",
    "log_skellam_kernel",
    "skellam_logpmf",
    "stirlerr",
]

_N0 = _nb_bessel.DEBYE_MIN_ORDER
_U = _nb_bessel._U  # exact Debye coefficients (one table: the numba module's)
_LOG_2PI = math.log(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * _LOG_2PI
_STIRLING = _nb_poisson._STIRLING
_HALVES = _nb_poisson._HALVES


def _f64(*xs):
    return [jnp.asarray(x, dtype=jnp.float64) for x in xs]


# ------------------------------------------------------------------------------------------
# log I_nu(x)


def log1pmx(u):
    r""":math:`\log(1+u) - u`, by its series for :math:`|u| < 1/4` (30 terms: the 31st is
    below :math:`10^{-18}` of the sum), else directly.

    Examples
    --------
    >>> float(log1pmx(1e-5))  # -u^2/2 + u^3/3: log1p(u) - u would keep 6 digits
    -4.99996666...e-11
    """
    (u,) = _f64(u)
    small = jnp.abs(u) < 0.25
    us = jnp.where(small, u, 0.0)

    def step(j, carry):
        term, acc = carry
        term = term * -us
        return term, acc + term / j

    _, acc = lax.fori_loop(2, 32, step, (us, jnp.zeros_like(us)))
    return jnp.where(small, acc, jnp.log1p(u) - u)


def _debye_sum(nu, t):
    """``S = sum_k u_k(t) / nu^k`` (k = 1..12) and ``dS/dt`` (Horner, as the numba kernel)."""
    table = jnp.asarray(_U)
    top = table.shape[1] - 1  # leading zero coefficients leave b = d = 0 exactly
    inv = 1.0 / nu

    def order(k, carry):
        s, ds, pw = carry
        pw = pw * inv

        def horner(i, bd):
            b, d = bd
            return b * t + table[k, top - i], d * t + b

        b, d = lax.fori_loop(1, top + 1, horner, (jnp.full_like(t, table[k, top]), 0.0 * t))
        return s + b * pw, ds + d * pw, pw

    s, ds, _ = lax.fori_loop(1, table.shape[0], order, (0.0 * t, 0.0 * t, 1.0 + 0.0 * t))
    return s, ds


def _debye(nu, x):
    """Region 3 (nu >= 20, 0 < x < inf): ``(log I_nu(x) - x, I_{nu+1}(x) / I_nu(x))``."""
    z = x / nu
    s = jnp.hypot(1.0, z)
    t = 1.0 / s
    w = 1.0 / (s + z)
    big = z > 1.0
    zb = jnp.where(big, z, 2.0)
    zs = jnp.where(big, 0.5, z)
    eta_m_z = jnp.where(
        big, w - jnp.log1p((1.0 + w) / zb), (s - z) + jnp.log(zs / (1.0 + jnp.hypot(1.0, zs)))
    )
    zc = jnp.minimum(z, 1e150)
    l1pz2 = jnp.where(z < 1e150, jnp.log1p(zc * zc), 2.0 * jnp.log(z))
    S, dS = _debye_sum(nu, t)
    log_ive = nu * eta_m_z - 0.5 * (_LOG_2PI + jnp.log(nu)) - 0.25 * l1pz2 + jnp.log1p(S)
    ratio = z / (1.0 + s) - 0.5 * z * t * t / nu - z * t * t * t * dS / (nu * (1.0 + S))
    return log_ive, ratio


def _series(nu, x):
    """Region 2 (0 < x <= 2, nu < 20): power series, 20 terms (the 20th is below 1e-36)."""
    y = 0.25 * x * x

    def step(k, c):
        t0, t1, s0, s1 = c
        t0 = t0 * (y / (k * (nu + k)))
        t1 = t1 * (y / (k * (nu + 1.0 + k)))
        return t0, t1, s0 + t0, s1 + t1

    one, zero = jnp.ones_like(x), jnp.zeros_like(x)
    _, _, s0, s1 = lax.fori_loop(1, 21, step, (one, one, zero, zero))
    log_iv = nu * jnp.log(0.5 * x) - gammaln(nu + 1.0) + jnp.log1p(s0)
    ratio = 0.5 * x / (nu + 1.0) * (1.0 + s1) / (1.0 + s0)
    return log_iv - x, ratio


def log_ive_and_ratio(nu, x):
    r"""``(log I_nu(x) - x, I_{nu+1}(x)/I_nu(x))`` for all ``nu >= 0``, ``x >= 0``.

    NaN for negative or NaN inputs (as the numba core in :mod:`pymc_dp.math.bessel`).

    Examples
    --------
    >>> lv, r = log_ive_and_ratio(0.0, 1e4)
    >>> round(float(lv), 6), round(float(r), 6)
    (-5.524096, 0.99995)
    """
    nu, x = jnp.broadcast_arrays(*_f64(nu, x))
    valid = (nu >= 0.0) & (x >= 0.0)
    nu_ok = jnp.where(valid & jnp.isfinite(nu), nu, 1.0)
    x_ok = jnp.where(valid & (x > 0.0) & jnp.isfinite(x), x, 1.0)
    # Debye at nu itself (nu >= 20) or at nu + ceil(20 - nu), recurred down (x > 2)
    steps = jnp.where(nu_ok >= _N0, 0.0, jnp.ceil(_N0 - nu_ok))
    top = nu_ok + steps
    log_ive, r = _debye(top, x_ok)

    def down(i, c):
        acc, r = c
        inv = 2.0 * (top - i) / x_ok + r
        on = i < steps
        return acc + jnp.where(on, jnp.log(inv), 0.0), jnp.where(on, 1.0 / inv, r)

    acc, r = lax.fori_loop(0, int(_N0), down, (jnp.zeros_like(x_ok), r))
    rec = (log_ive + acc, r)
    xs = jnp.where(x_ok <= 2.0, x_ok, 1.0)
    ser = _series(nu_ok, xs)
    y = 0.25 * x_ok * x_ok
    tiny_lv = (
        nu_ok * jnp.log(0.5 * x_ok) - gammaln(nu_ok + 1.0) + jnp.log1p(y / (nu_ok + 1.0)) - x_ok
    )
    tiny_r = 0.5 * x_ok / (nu_ok + 1.0)
    use_ser = (nu_ok < _N0) & (x_ok <= 2.0)
    lv = jnp.where(x_ok < 1e-100, tiny_lv, jnp.where(use_ser, ser[0], rec[0]))
    rv = jnp.where(x_ok < 1e-100, tiny_r, jnp.where(use_ser, ser[1], rec[1]))
    lv = jnp.where(x == jnp.inf, -jnp.inf, lv)
    rv = jnp.where(x == jnp.inf, 1.0, rv)
    lv = jnp.where(x == 0.0, jnp.where(nu == 0.0, 0.0, -jnp.inf), lv)
    rv = jnp.where(x == 0.0, 0.0, rv)
    return jnp.where(valid, lv, jnp.nan), jnp.where(valid, rv, jnp.nan)


def log_ive(nu, x):
    r""":math:`\log I_\nu(x) - x`.

    Examples
    --------
    >>> float(log_ive(0.0, 1e12))  # -log(2 pi 1e12) / 2 + O(1/x)
    -14.734...
    """
    return log_ive_and_ratio(nu, x)[0]


def log_iv(nu, x):
    r""":math:`\log I_\nu(x)` (``+inf`` at ``x = inf``).

    Examples
    --------
    >>> float(log_iv(300.0, 3.0))  # ive(300, 3) underflows to 0
    -1293.2588...
    """
    nu, x = jnp.broadcast_arrays(*_f64(nu, x))
    lv = log_ive_and_ratio(nu, x)[0] + jnp.where(jnp.isfinite(x), x, 0.0)
    return jnp.where(x == jnp.inf, jnp.where(nu >= 0.0, jnp.inf, jnp.nan), lv)


def iv_ratio(nu, x):
    r""":math:`I_{\nu+1}(x) / I_\nu(x)`.

    Examples
    --------
    >>> from scipy.special import iv
    >>> bool(abs(float(iv_ratio(1.0, 2.0)) - iv(2, 2.0) / iv(1, 2.0)) < 1e-15)
    True
    """
    return log_ive_and_ratio(nu, x)[1]


def dlog_iv(nu, x):
    r""":math:`\partial_x \log I_\nu(x) = r_\nu(x) + \nu/x` (0 or ``+inf`` at ``x = 0``).

    Examples
    --------
    >>> [float(v) for v in dlog_iv([0.0, 3.0], [0.0, 0.0])]
    [0.0, inf]
    """
    nu, x = jnp.broadcast_arrays(*_f64(nu, x))
    r = log_ive_and_ratio(nu, x)[1]
    at0 = (x == 0.0) & (nu >= 0.0)
    xs = jnp.where(x == 0.0, 1.0, x)
    return jnp.where(at0, jnp.where(nu == 0.0, 0.0, jnp.inf), r + nu / xs)


# ------------------------------------------------------------------------------------------
# Skellam


def _debye_f(delta, m1, m2, s, log_2m1):
    """``s - m1 - m2 + log(2 m1 / (1 + s))`` without cancellation (numba ``_debye_f``)."""
    d = delta - 1.0
    a = ((1.0 - delta) / (s + m1 + m2)) * (1.0 + delta)
    u = (d - a) / (1.0 + s)
    far = jnp.where(u > -0.5, a + jnp.log1p(jnp.maximum(u, -0.5)), a + (log_2m1 - jnp.log1p(s)))
    first = -4.0 * m1 * m2 * d * d * (d + 2.0)
    first = first / ((1.0 + s) * (s + m1 + m2) * (m1 + m2 + delta * s))
    return jnp.where(jnp.abs(d) > 0.5, far, first + log1pmx(u))


def log_skellam_kernel(nu, mu1, mu2):
    r""":math:`-(\mu_1+\mu_2) + \tfrac{\nu}{2}\log(\mu_1/\mu_2) + \log I_\nu(2\sqrt{\mu_1\mu_2})`
    for real ``nu >= 0`` and ``mu1, mu2 > 0`` (no checks), as the numba kernel.

    Examples
    --------
    >>> float(log_skellam_kernel(100_000.0, 1e5, 1e-8))  # Poisson(1e5) at its mean
    -6.67540209902...
    """
    nu, mu1, mu2 = jnp.broadcast_arrays(*_f64(nu, mu1, mu2))
    r1 = jnp.sqrt(mu1)
    r2 = jnp.sqrt(mu2)
    # nu < 20: exponentially scaled Bessel, Hankel's expansion beyond x = 1e17
    half_diff = (mu1 - mu2) / (r1 + r2)
    half_x = r1 * r2
    low_nu = jnp.where(nu < _N0, nu, 0.0)
    log_ive_small = log_ive(low_nu, 2.0 * jnp.minimum(half_x, 5e16))
    log_x = math.log(2.0) + 0.5 * (jnp.log(mu1) + jnp.log(mu2))
    corr = jnp.log1p(-(4.0 * low_nu * low_nu - 1.0) / (16.0 * jnp.maximum(half_x, 5e16)))
    hankel = -0.5 * (_LOG_2PI + log_x) + corr
    lv = jnp.where(half_x <= 5e16, log_ive_small, hankel)
    small = -(half_diff * half_diff) + 0.5 * low_nu * (jnp.log(mu1) - jnp.log(mu2)) + lv
    # nu >= 20: the uniform expansion, orders of nu combined into nu f
    hi_nu = jnp.where(nu >= _N0, nu, _N0)
    m1 = mu1 / hi_nu
    m2 = mu2 / hi_nu
    z = (2.0 * r1) * (r2 / hi_nu)
    s = jnp.hypot(1.0, z)
    t = 1.0 / s
    log_2m1 = math.log(2.0) + jnp.log(mu1) - jnp.log(hi_nu)
    big = hi_nu * _debye_f((mu1 - mu2) / hi_nu, m1, m2, s, log_2m1)
    zc = jnp.minimum(z, 1e150)
    l1pz2 = jnp.where(z < 1e150, jnp.log1p(zc * zc), 2.0 * jnp.log(z))
    S, _ = _debye_sum(hi_nu, t)
    large = big - 0.5 * (_LOG_2PI + jnp.log(hi_nu)) - 0.25 * l1pz2 + jnp.log1p(S)
    return jnp.where(nu < _N0, small, large)


def skellam_logpmf(k, mu1, mu2):
    """Skellam log-pmf (NaN for invalid rates, ``-inf`` off the integers).

    Examples
    --------
    >>> from scipy.stats import skellam
    >>> bool(abs(float(skellam_logpmf(3, 4.0, 1.5)) - skellam.logpmf(3, 4.0, 1.5)) < 1e-13)
    True
    """
    k, mu1, mu2 = jnp.broadcast_arrays(*_f64(k, mu1, mu2))
    valid = (mu1 > 0.0) & (mu2 > 0.0) & (mu1 < jnp.inf) & (mu2 < jnp.inf)
    integer = k == jnp.floor(k)
    neg = k < 0.0
    a = jnp.where(valid, jnp.where(neg, mu2, mu1), 1.0)
    b = jnp.where(valid, jnp.where(neg, mu1, mu2), 1.0)
    kk = jnp.where(integer & jnp.isfinite(k), jnp.abs(k), 0.0)
    lp = log_skellam_kernel(kk, a, b)
    return jnp.where(valid, jnp.where(integer, lp, -jnp.inf), jnp.nan)


# ------------------------------------------------------------------------------------------
# Loader's Poisson helpers and the Bessel log-pmf


def _stirling_series(y):
    inv = 1.0 / y
    inv2 = inv * inv
    acc = jnp.zeros_like(y)
    for c in _STIRLING[::-1]:
        acc = acc * inv2 + c
    return acc * inv


def _g_step(y):
    """``sum_k u^(2k) / (2k + 1)``, ``u = 1/(2y + 1) <= 2/3``: 60 terms (ratio <= 4/9)."""
    u = 1.0 / (2.0 * y + 1.0)
    u2 = u * u

    def step(i, c):
        term, acc = c
        term = term * u2
        return term, acc + term / (2.0 * i + 5.0)

    return lax.fori_loop(0, 60, step, (u2, u2 / 3.0))[1]


def stirlerr(y):
    r"""Stirling remainder :math:`\log\Gamma(y+1) - (y+\tfrac12)\log y + y - \tfrac12\log 2\pi`.

    Examples
    --------
    >>> float(stirlerr(1e300))  # 1 / (12 y)
    8.333333333333334e-302
    """
    (y,) = _f64(y)
    yv = jnp.where(y > 0.0, y, 1.0)
    twice = 2.0 * yv
    half_int = (twice == jnp.floor(twice)) & (twice < 20.0)
    table = jnp.asarray(_HALVES)[jnp.clip(twice, 0, 19).astype(jnp.int32)]
    ys = jnp.where(yv < 0.25, yv, 1.0)
    direct = gammaln(ys + 1.0) - (ys + 0.5) * jnp.log(ys) + ys - _HALF_LOG_2PI

    def up(_, c):
        acc, w = c
        on = w < 10.0
        return acc + jnp.where(on, _g_step(w), 0.0), jnp.where(on, w + 1.0, w)

    w0 = jnp.where(yv < 10.0, jnp.maximum(yv, 0.25), yv)
    acc, w = lax.fori_loop(0, 10, up, (jnp.zeros_like(yv), w0))
    rec = acc + _stirling_series(w)
    out = jnp.where(yv >= 10.0, _stirling_series(yv), jnp.where(half_int, table, rec))
    out = jnp.where((yv < 10.0) & ~half_int & (yv < 0.25), direct, out)
    return jnp.where(y > 0.0, out, jnp.where(y == 0.0, jnp.inf, jnp.nan))


def _bd0_series(y, lam, v):
    v2 = v * v

    def step(i, c):  # |v| < 0.6: 80 terms reach below one ulp of the sum
        ej, acc = c
        ej = ej * v2
        return ej, acc + ej / (2.0 * i + 3.0)

    return 2.0 * lax.fori_loop(0, 80, step, (y * v, 0.5 * ((y - lam) * v)))[1]


def bd0(y, lam):
    r"""Deviance :math:`y\log(y/\lambda) + \lambda - y` without cancellation.

    Examples
    --------
    >>> float(bd0(1e6 + 1.0, 1e6))
    4.99999833333416...e-07
    """
    y, lam = jnp.broadcast_arrays(*_f64(y, lam))
    ok = (y >= 0.0) & (lam >= 0.0)
    yv = jnp.where(ok & (y > 0.0), y, 1.0)
    lv = jnp.where(ok & (lam > 0.0), lam, 1.0)
    v = (0.5 * yv - 0.5 * lv) / (0.5 * yv + 0.5 * lv)
    near = jnp.abs(v) < 0.6
    series = _bd0_series(yv, lv, jnp.where(near, v, 0.0))
    ratio = yv / lv
    in_range = (ratio > 1e-300) & (ratio < 1e300)
    split = jnp.log(yv) - jnp.log(lv)
    log_ratio = jnp.where(in_range, jnp.log(jnp.where(in_range, ratio, 1.0)), split)
    out = jnp.where(near, series, yv * log_ratio + lv - yv)
    out = jnp.where(lam == 0.0, jnp.inf, out)
    out = jnp.where(y == 0.0, lam, out)
    return jnp.where(ok, out, jnp.nan)


def log_poisson(y, lam):
    r""":math:`y\log\lambda - \lambda - \log\Gamma(y+1)` in Loader's form (real ``y``).

    Examples
    --------
    >>> from pymc_dp.math.poisson import log_poisson_pmf
    >>> bool(abs(float(log_poisson(1e6, 1e6)) / log_poisson_pmf(1e6, 1e6) - 1.0) < 1e-15)
    True
    """
    y, lam = jnp.broadcast_arrays(*_f64(y, lam))
    yv = jnp.where(y > 0.0, y, 1.0)
    main = -stirlerr(yv) - bd0(yv, lam) - 0.5 * (_LOG_2PI + jnp.log(yv))
    out = jnp.where(lam == 0.0, -jnp.inf, main)
    out = jnp.where(y == 0.0, -lam, out)
    out = jnp.where(y < 0.0, -jnp.inf, out)
    return jnp.where((lam >= 0.0) & ~jnp.isnan(y), out, jnp.nan)


def _log_rising(x, h):
    """``log Gamma(x + h) - log Gamma(x)`` for ``x >= 1``, ``h >= 0``."""
    y = x + h
    stirl = (1.0 / 12.0) * (1.0 / y - 1.0 / x) - (1.0 / 360.0) * (1.0 / y**3 - 1.0 / x**3)
    big = h * jnp.log(y) - 0.5 * jnp.log1p(h / x) + x * log1pmx(h / x) + stirl
    return jnp.where(x < 1e3, gammaln(y) - gammaln(x), big)


def bessel_logpmf(n, nu, a):
    """Bessel log-pmf (NaN for invalid parameters, ``-inf`` off the support).

    Examples
    --------
    >>> import numpy as np
    >>> float(np.exp(bessel_logpmf(np.arange(200.0), 3.0, 20.0)).sum())
    1.0000000000...
    """
    n, nu, a = jnp.broadcast_arrays(*_f64(n, nu, a))
    valid = (nu >= 0.0) & (a >= 0.0) & (nu < jnp.inf) & (a < jnp.inf)
    support = (n >= 0.0) & (n == jnp.floor(n))
    nv = jnp.where(support & jnp.isfinite(n), n, 0.0)
    nuv = jnp.where(valid, nu, 1.0)
    av = jnp.where(valid & (a > 0.0), a, 1.0)
    lam2 = (0.5 * av) * (av / (jnp.hypot(nuv, av) + nuv))
    regular = lam2 > 1e-280
    l2 = jnp.where(regular, lam2, 1.0)
    l1 = l2 + nuv
    main = log_poisson(nv + nuv, l1) + log_poisson(nv, l2) - log_skellam_kernel(nuv, l1, l2)
    tiny = 2.0 * nv * jnp.log(0.5 * av) - gammaln(nv + 1.0) - _log_rising(nuv + 1.0, nv) - lam2
    out = jnp.where(regular, main, tiny)
    out = jnp.where(a == 0.0, jnp.where(nv == 0.0, 0.0, -jnp.inf), out)
    return jnp.where(valid, jnp.where(support, out, -jnp.inf), jnp.nan)


# ------------------------------------------------------------------------------------------
# the count mode


def _mode_step(y, z, params):
    base, b1, b2, noise, q = params
    pois = jnp.log(b1) - jnp.log1p(y)
    negbin = jnp.log1p(-b2) + jnp.log(y + b1) - jnp.log1p(y)
    t = z - y
    den = 0.5 * jnp.abs(t - 1.0) + 0.5 * jnp.abs(t)
    expo = jnp.where(den > 0.0, q * (t - 0.5) / jnp.where(den > 0.0, den, 1.0), 0.0)
    gauss = ((t - 0.5) / q) / q
    base_step = jnp.where(base.astype(jnp.int64) == 0, pois, negbin)
    return base_step + jnp.where(noise.astype(jnp.int64) == 0, expo, gauss)


def count_mode(z, upper, base, b1, b2, noise, q):
    """Mode of ``log p(y) + log eta(z - y)`` in ``[0, upper]`` (64 halvings, as numba).

    Examples
    --------
    Poisson(30) through Gaussian noise of scale 40 at ``z = 1e6`` (codes 0 = Poisson,
    1 = Gaussian; :mod:`pymc_dp.math.count_mode`):

    >>> y = float(count_mode(1e6, 1e6 + 1.0, 0.0, 30.0, 0.0, 1.0, 40.0))
    >>> 983_000 < y < 984_000
    True
    """
    z, upper, *params = jnp.broadcast_arrays(*_f64(z, upper, base, b1, b2, noise, q))

    def halve(_, c):
        lo, hi = c
        go = lo < hi
        mid = jnp.floor(0.5 * lo + 0.5 * hi)
        down = _mode_step(mid, z, params) <= 0.0
        return jnp.where(go & ~down, mid + 1.0, lo), jnp.where(go & down, mid, hi)

    init = (jnp.zeros_like(z), jnp.maximum(jnp.floor(upper), 0.0))
    lo, hi = lax.fori_loop(0, 64, halve, init)
    return jnp.minimum(lo, hi)
