r"""Stable logarithm of the modified Bessel function of the first kind, :math:`\log I_\nu(x)`.

The obvious ``log(iv(nu, x))`` overflows once ``x`` exceeds about 713, and ``log(ive(nu, x)) + x``
fails at large order because ``ive(300, 3)`` underflows to 0. This module evaluates
:math:`\log I_\nu(x)` for every real order :math:`\nu \ge 0` and every :math:`x \ge 0` without
overflow or underflow, together with the ratio :math:`r_\nu(x) = I_{\nu+1}(x) / I_\nu(x)` that
gives the derivative

.. math:: \frac{\partial}{\partial x} \log I_\nu(x) = r_\nu(x) + \frac{\nu}{x}.

Method (regions)
----------------
Let :math:`N_0 = 20` (``DEBYE_MIN_ORDER``) and :math:`K = 12` (``DEBYE_TERMS``).

1. ``x == 0``: :math:`\log I_0(0) = 0`; :math:`\log I_\nu(0) = -\infty` for :math:`\nu > 0`.
2. ``0 < x < 1e-100``, or ``x <= 2`` and :math:`\nu < N_0` (power series, DLMF 10.25.2, in
   log space): :math:`\log I_\nu(x) = \nu \log(x/2) - \log\Gamma(\nu+1)
   + \operatorname{log1p}\big(\sum_{k \ge 1} (x^2/4)^k / (k!\,(\nu+1)_k)\big)`; all terms are
   positive, and the sum stops when a term falls below :math:`10^{-17}` of the sum (the tail
   is then below :math:`1.4 \cdot 10^{-17}` relative: for :math:`x \le 2` the term ratio
   :math:`(x^2/4)/(k(\nu+k))` is at most 1/4 from :math:`k = 2` on).
3. :math:`\nu \ge N_0` (uniform asymptotic expansion, Abramowitz & Stegun 9.7.7, DLMF 10.41.3):
   with :math:`z = x/\nu`, :math:`s = \sqrt{1+z^2}`, :math:`t = 1/s`,
   :math:`\eta = s + \log(z / (1 + s))`,

   .. math:: \log I_\nu(\nu z) = \nu\eta - \tfrac12\log(2\pi\nu) - \tfrac14\log(1+z^2)
             + \log\Big(1 + \sum_{k=1}^{K} u_k(t)/\nu^k\Big),

   where the Debye polynomials :math:`u_k` are generated exactly (rational arithmetic, at import)
   from the recurrence DLMF 10.41.9,
   :math:`u_{k+1}(t) = \tfrac12 t^2 (1-t^2) u_k'(t) + \tfrac18\int_0^t (1-5s^2) u_k(s)\,ds`.
   The expansion is uniform in :math:`z \in (0, \infty)`; the remainder after :math:`K` terms is
   :math:`O(\nu^{-K-1})` uniformly (DLMF 10.41(iv)); its size is that of the first omitted
   term, :math:`\max_{t \in [0,1]} |u_{13}(t)| / \nu^{13} \le 48.2 / 20^{13} = 5.9
   \cdot 10^{-16}` (absolute, in the logarithm) for :math:`\nu \ge 20`. The ratio
   :math:`r_\nu(x)` comes from the term-by-term derivative (DLMF 10.41.4 is the same
   expansion for :math:`I_\nu'`):
   :math:`\eta'(z) = s/z`, so :math:`r_\nu = z/(1+s) - z/(2\nu(1+z^2)) - z t^3 S'(t)/(\nu(1+S))`
   with :math:`S = \sum_k u_k(t)/\nu^k`. The exponentially scaled form
   :math:`\log I_\nu(x) - x = \nu(\eta - z) + \dots` is computed without forming
   :math:`\nu\eta` and :math:`x` separately, with
   :math:`\eta - z = 1/(s+z) - \operatorname{log1p}((1 + 1/(s+z))/z)` for :math:`z > 1`.
4. :math:`\nu < N_0` and :math:`x > 2` (downward recurrence): with
   :math:`N = \nu + \lceil N_0 - \nu \rceil`, take
   :math:`\log I_N(x)` and :math:`r_N(x)` from region 3, then apply the three-term recurrence
   :math:`I_{j-1} = I_{j+1} + (2j/x) I_j` downwards,
   :math:`1/r_{j-1} = 2j/x + r_j`, and
   :math:`\log I_\nu = \log I_N + \sum_{j=\nu}^{N-1} \log(1/r_j)`. Every term is positive (no
   cancellation) and :math:`I_\nu` is the minimal solution of the recurrence in the direction of
   increasing order, so the downward direction is stable; the error grows by at most
   :math:`N_0` roundings.

Measured against mpmath (50 digits) on a 201-point grid of :math:`\nu \in [0, 10^5]`
(integer and half-integer), :math:`x \in \{0\} \cup [10^{-300}, 2 \cdot 10^{6}]`
(``tests/math/test_bessel.py``): error of :math:`\log I_\nu(x)` at most
:math:`1.1 \cdot 10^{-14}`, relative where :math:`|\log I_\nu| \ge 1` and absolute elsewhere
(the worst points are small orders at :math:`x \approx 3`, after the 20-step recurrence); the
ratio :math:`r_\nu` agrees to :math:`10^{-12}` relative or better on its test grid.

Forms provided
--------------
* numpy (broadcasting ufuncs): :func:`log_iv`, :func:`log_ive`, :func:`iv_ratio`,
  :func:`dlog_iv`. They also accept PyTensor variables and then build a graph.
* PyTensor: the scalar Ops :class:`LogIv`, :class:`LogIve`, :class:`IvRatio`, :class:`DLogIv`
  (Elemwise wrappers ``log_iv_pt`` etc.), with gradients in ``x`` (``pullback``; the gradient in
  ``nu`` is undefined, as for ``pytensor.tensor.iv``) and native Numba implementations, so graphs
  containing them compile without object-mode fallbacks (built by
  :mod:`pymc_dp.math.scalar_op`).
* numba scalar kernels for other compiled code: :func:`log_iv_scalar`, :func:`log_ive_scalar`,
  :func:`iv_ratio_scalar`, :func:`debye_log_ive_and_ratio`.

Orders must be :math:`\ge 0` (real orders are supported); negative orders, negative ``x`` and NaN
give NaN.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np
from pytensor.graph.basic import Variable
from pytensor.scalar import basic as ps

from pymc_dp._cache import lazy_vectorize
from pymc_dp.math.scalar_op import KernelScalarOp, no_gradient, scalar_elemwise

__all__ = [
    "DEBYE_MIN_ORDER",
    "DEBYE_TERMS",
    "DLogIv",
    "IvRatio",
    "LogIv",
    "LogIve",
    "debye_log_ive_and_ratio",
    "debye_polynomials",
    "dlog_iv",
    "dlog_iv_pt",
    "dlog_iv_scalar",
    "iv_ratio",
    "iv_ratio_pt",
    "iv_ratio_scalar",
    "log1pmx_scalar",
    "log_iv",
    "log_iv_pt",
    "log_iv_scalar",
    "log_ive",
    "log_ive_pt",
    "log_ive_scalar",
    "log_skellam_kernel",
]

DEBYE_MIN_ORDER = 20.0
DEBYE_TERMS = 12
_SMALL_X = 1e-100
_SERIES_MAX_X = 2.0
_LOG_2PI = math.log(2.0 * math.pi)


def debye_polynomials(n_terms: int) -> list[dict[int, Fraction]]:
    r"""Exact coefficients of the Debye polynomials :math:`u_0, \dots, u_{n}` (DLMF 10.41.9).

    Returns a list of ``{power: coefficient}`` dicts.

    Examples
    --------
    >>> debye_polynomials(2)[1] == {1: Fraction(1, 8), 3: Fraction(-5, 24)}
    True
    """
    polys = [{0: Fraction(1)}]
    for _ in range(n_terms):
        u = polys[-1]
        new: dict[int, Fraction] = {}
        for p, c in u.items():
            if p > 0:  # 1/2 t^2 (1 - t^2) u'(t)
                new[p + 1] = new.get(p + 1, Fraction(0)) + Fraction(1, 2) * p * c
                new[p + 3] = new.get(p + 3, Fraction(0)) - Fraction(1, 2) * p * c
            # 1/8 int_0^t (1 - 5 s^2) u(s) ds
            new[p + 1] = new.get(p + 1, Fraction(0)) + Fraction(1, 8) * c / (p + 1)
            new[p + 3] = new.get(p + 3, Fraction(0)) - Fraction(5, 8) * c / (p + 3)
        polys.append({p: c for p, c in new.items() if c != 0})
    return polys


def _coefficient_table(n_terms: int) -> np.ndarray:
    table = np.zeros((n_terms + 1, 3 * n_terms + 1), dtype=np.float64)
    for k, poly in enumerate(debye_polynomials(n_terms)):
        for p, c in poly.items():
            table[k, p] = float(c)
    return table


_U = _coefficient_table(DEBYE_TERMS)


@numba.njit(cache=True)
def _debye_sum(nu, t):
    """Return S = sum_k u_k(t) / nu^k (k = 1..K) and dS/dt."""
    s = 0.0
    ds = 0.0
    inv = 1.0 / nu
    pw = 1.0
    for k in range(1, DEBYE_TERMS + 1):
        pw *= inv
        deg = 3 * k
        b = _U[k, deg]
        d = 0.0
        for p in range(deg - 1, -1, -1):
            d = d * t + b
            b = b * t + _U[k, p]
        s += b * pw
        ds += d * pw
    return s, ds


@numba.njit(cache=True)
def debye_log_ive_and_ratio(nu, x):
    r"""Uniform expansion (region 3): ``(log I_nu(x) - x, I_{nu+1}(x)/I_nu(x))`` for nu >= N_0.

    Requires ``nu >= DEBYE_MIN_ORDER`` and ``0 < x < inf``; see the module docstring.
    """
    z = x / nu
    s = math.hypot(1.0, z)
    t = 1.0 / s
    if z > 1.0:
        w = 1.0 / (s + z)
        eta_m_z = w - math.log1p((1.0 + w) / z)
    else:
        eta_m_z = (s - z) + math.log(z / (1.0 + s))
    if z < 1e150:
        l1pz2 = math.log1p(z * z)
    else:
        l1pz2 = 2.0 * math.log(z)
    S, dS = _debye_sum(nu, t)
    log_ive = nu * eta_m_z - 0.5 * (_LOG_2PI + math.log(nu)) - 0.25 * l1pz2 + math.log1p(S)
    ratio = z / (1.0 + s) - 0.5 * z * t * t / nu - z * t * t * t * dS / (nu * (1.0 + S))
    return log_ive, ratio


@numba.njit(cache=True)
def _series_log_ive_and_ratio(nu, x):
    """Power series (region 2'), for 0 < x <= 2 and nu < N_0: all terms positive."""
    y = 0.25 * x * x
    s0 = 0.0  # sum_{k>=1} y^k / (k! (nu+1)_k)
    s1 = 0.0  # sum_{k>=1} y^k / (k! (nu+2)_k)
    t0 = 1.0
    t1 = 1.0
    k = 0
    while True:
        k += 1
        t0 *= y / (k * (nu + k))
        t1 *= y / (k * (nu + 1.0 + k))
        s0 += t0
        s1 += t1
        if t0 <= 1e-17 * s0:
            break
    log_iv = nu * math.log(0.5 * x) - math.lgamma(nu + 1.0) + math.log1p(s0)
    ratio = 0.5 * x / (nu + 1.0) * (1.0 + s1) / (1.0 + s0)
    return log_iv - x, ratio


@numba.njit(cache=True)
def _log_ive_and_ratio(nu, x):
    """Core: (log I_nu(x) - x, I_{nu+1}(x)/I_nu(x)) for all nu >= 0, x >= 0."""
    nu = float(nu)
    x = float(x)
    if not (nu >= 0.0 and x >= 0.0):
        return np.nan, np.nan
    if x == 0.0:
        return (0.0 if nu == 0.0 else -np.inf), 0.0
    if x == np.inf:
        return -np.inf, 1.0
    if x < _SMALL_X:
        y = 0.25 * x * x
        lv = nu * math.log(0.5 * x) - math.lgamma(nu + 1.0) + math.log1p(y / (nu + 1.0))
        return lv - x, 0.5 * x / (nu + 1.0)
    if nu >= DEBYE_MIN_ORDER:
        return debye_log_ive_and_ratio(nu, x)
    if x <= _SERIES_MAX_X:
        return _series_log_ive_and_ratio(nu, x)
    n = math.ceil(DEBYE_MIN_ORDER - nu)
    top = nu + n
    log_ive, r = debye_log_ive_and_ratio(top, x)
    acc = 0.0
    for i in range(n):
        j = top - i  # r_{j-1} = 1 / (2 j / x + r_j)
        inv = 2.0 * j / x + r
        acc += math.log(inv)
        r = 1.0 / inv
    return log_ive + acc, r


@numba.njit(cache=True)
def log_ive_scalar(nu, x):
    r""":math:`\log I_\nu(x) - x` (numba scalar kernel)."""
    return _log_ive_and_ratio(nu, x)[0]


@numba.njit(cache=True)
def log_iv_scalar(nu, x):
    r""":math:`\log I_\nu(x)` (numba scalar kernel)."""
    x = float(x)
    if x == np.inf:  # I_nu(inf) = inf for nu >= 0
        return np.inf if float(nu) >= 0.0 else np.nan
    return _log_ive_and_ratio(nu, x)[0] + x


@numba.njit(cache=True)
def iv_ratio_scalar(nu, x):
    r""":math:`I_{\nu+1}(x) / I_\nu(x)` (numba scalar kernel)."""
    return _log_ive_and_ratio(nu, x)[1]


@numba.njit(cache=True)
def dlog_iv_scalar(nu, x):
    r""":math:`\partial_x \log I_\nu(x) = I_{\nu+1}(x)/I_\nu(x) + \nu/x` (numba scalar kernel).

    At ``x == 0`` this is 0 for ``nu == 0`` and ``+inf`` for ``nu > 0``.
    """
    nu = float(nu)
    x = float(x)
    r = _log_ive_and_ratio(nu, x)[1]
    if x == 0.0 and nu >= 0.0:
        return 0.0 if nu == 0.0 else np.inf
    return r + nu / x


@numba.njit(cache=True)
def log1pmx_scalar(u):
    r""":math:`\log(1+u) - u`, accurate for small ``u`` (series for :math:`|u| < 0.25`)."""
    if abs(u) >= 0.25:
        return math.log1p(u) - u
    term = u
    acc = 0.0
    j = 2
    while True:
        term *= -u
        add = term / j
        acc += add
        if abs(add) <= 1e-17 * abs(acc):
            break
        j += 1
    return acc


@numba.njit(cache=True)
def _debye_f(delta, m1, m2, s, log_2m1):
    r"""f = s - m1 - m2 + log(2 m1 / (1 + s)) without cancellation; delta = m1 - m2.

    ``log_2m1`` is :math:`\log(2 m_1)`, passed in so that a subnormal :math:`m_1` (a tiny rate at
    a huge order) loses no digits. Far from the mode,
    :math:`\log(2m_1/(1+s)) = \operatorname{log1p}(u)` with :math:`u = (d - A)/(1+s)` exactly,
    used while :math:`u > -1/2` (when :math:`m_1, m_2` are
    huge, :math:`2m_1/(1+s)` rounds to 1 and the direct logarithm, multiplied by the order, would
    lose everything); below, the direct logarithm.
    """
    d = delta - 1.0
    a = ((1.0 - delta) / (s + m1 + m2)) * (1.0 + delta)  # = s - m1 - m2, no overflow
    u = (d - a) / (1.0 + s)  # 1 + u = 2 m1 / (1 + s)
    if abs(d) > 0.5:
        if u > -0.5:
            return a + math.log1p(u)
        return a + (log_2m1 - math.log1p(s))
    first = -4.0 * m1 * m2 * d * d * (d + 2.0)
    first /= (1.0 + s) * (s + m1 + m2) * (m1 + m2 + delta * s)
    return first + log1pmx_scalar(u)


@numba.njit(cache=True)
def log_skellam_kernel(nu, mu1, mu2):
    r""":math:`-(\mu_1+\mu_2) + \tfrac{\nu}{2}\log(\mu_1/\mu_2) + \log I_\nu(2\sqrt{\mu_1\mu_2})`.

    For real :math:`\nu \ge 0` and :math:`\mu_1, \mu_2 > 0` (no checks). For integer
    :math:`\nu` this is the Skellam log-pmf at :math:`k = \nu`; the derivation of the
    cancellation-free evaluation is in :mod:`pymc_dp.distributions.skellam`.
    """
    r1 = math.sqrt(mu1)
    r2 = math.sqrt(mu2)
    if nu < DEBYE_MIN_ORDER:
        half_diff = (mu1 - mu2) / (r1 + r2)  # = r1 - r2, without cancellation or overflow
        head = -(half_diff * half_diff)
        half_x = r1 * r2  # x / 2
        if half_x <= 5e16:  # the argument is clamped so that no branch ever sees a huge x
            log_ive = log_ive_scalar(nu, 2.0 * min(half_x, 5e16))
        else:  # x > 1e17 (even beyond the float range): Hankel's expansion, A&S 9.7.1,
            # log I_nu(x) - x = -log(2 pi x)/2 + log(1 - (4 nu^2 - 1)/(8 x) + O(x^-2)),
            # relative O(nu^4 / x^2) < 1e-28 here
            log_x = math.log(2.0) + 0.5 * (math.log(mu1) + math.log(mu2))
            corr = math.log1p(-(4.0 * nu * nu - 1.0) / (16.0 * max(half_x, 5e16)))
            log_ive = -0.5 * (_LOG_2PI + log_x) + corr
        return head + 0.5 * nu * (math.log(mu1) - math.log(mu2)) + log_ive
    m1 = mu1 / nu
    m2 = mu2 / nu
    z = (2.0 * r1) * (r2 / nu)  # x / nu without overflow of x
    s = math.hypot(1.0, z)
    t = 1.0 / s
    log_2m1 = math.log(2.0) + math.log(mu1) - math.log(nu)
    big = nu * _debye_f((mu1 - mu2) / nu, m1, m2, s, log_2m1)
    zc = min(z, 1e150)
    l1pz2 = math.log1p(zc * zc) if z < 1e150 else 2.0 * math.log(z)
    S, _ = _debye_sum(nu, t)
    return big - 0.5 * (_LOG_2PI + math.log(nu)) - 0.25 * l1pz2 + math.log1p(S)


_SIG = ["float64(float64, float64)", "float64(int64, float64)"]


@lazy_vectorize(_SIG, cache=True)
def _log_iv_ufunc(nu, x):
    return log_iv_scalar(nu, x)


@lazy_vectorize(_SIG, cache=True)
def _log_ive_ufunc(nu, x):
    return log_ive_scalar(nu, x)


@lazy_vectorize(_SIG, cache=True)
def _iv_ratio_ufunc(nu, x):
    return iv_ratio_scalar(nu, x)


@lazy_vectorize(_SIG, cache=True)
def _dlog_iv_ufunc(nu, x):
    return dlog_iv_scalar(nu, x)


def _is_symbolic(*args) -> bool:
    return any(isinstance(a, Variable) for a in args)


def log_iv(nu, x):
    r"""Logarithm of the modified Bessel function of the first kind, :math:`\log I_\nu(x)`.

    Stable for all real orders ``nu >= 0`` and all ``x >= 0`` (regions and error bounds in the
    module docstring). Broadcasts like a ufunc; with PyTensor inputs it returns
    ``log_iv_pt(nu, x)``.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import iv
    >>> bool(np.isclose(log_iv(2.5, 3.0), np.log(iv(2.5, 3.0)), rtol=1e-14))
    True
    >>> float(log_iv(0, 1e4))  # log(iv(0, 1e4)) overflows
    9994.4759...
    >>> float(log_iv(300, 3.0))  # ive(300, 3) underflows to 0
    -1293.2588...
    """
    if _is_symbolic(nu, x):
        return log_iv_pt(nu, x)
    return _log_iv_ufunc(np.asarray(nu, dtype=np.float64), np.asarray(x, dtype=np.float64))


def log_ive(nu, x):
    r"""Exponentially scaled form :math:`\log I_\nu(x) - x`, without cancellation at large ``x``.

    Examples
    --------
    >>> float(log_ive(0, 1e12))  # -log(2 pi 1e12) / 2 + O(1/x)
    -14.734...
    """
    if _is_symbolic(nu, x):
        return log_ive_pt(nu, x)
    return _log_ive_ufunc(np.asarray(nu, dtype=np.float64), np.asarray(x, dtype=np.float64))


def iv_ratio(nu, x):
    r"""Ratio :math:`r_\nu(x) = I_{\nu+1}(x) / I_\nu(x)` in :math:`[0, 1)`.

    Examples
    --------
    >>> from scipy.special import iv
    >>> bool(np.isclose(iv_ratio(1, 2.0), iv(2, 2.0) / iv(1, 2.0), rtol=1e-14))
    True
    """
    if _is_symbolic(nu, x):
        return iv_ratio_pt(nu, x)
    return _iv_ratio_ufunc(np.asarray(nu, dtype=np.float64), np.asarray(x, dtype=np.float64))


def dlog_iv(nu, x):
    r"""Derivative :math:`\partial_x \log I_\nu(x) = r_\nu(x) + \nu / x`.

    Examples
    --------
    >>> float(dlog_iv(0, 0.0)), float(dlog_iv(3, 0.0))
    (0.0, inf)
    """
    if _is_symbolic(nu, x):
        return dlog_iv_pt(nu, x)
    return _dlog_iv_ufunc(np.asarray(nu, dtype=np.float64), np.asarray(x, dtype=np.float64))


# --------------------------------------------------------------------------------------------
# PyTensor scalar Ops (wrapped in Elemwise) with native numba implementations
# --------------------------------------------------------------------------------------------


def _f64(v):
    return ps.constant(np.float64(v))


_NU_NO_GRAD = "derivative with respect to the order is not defined"


class _BesselScalarOp(KernelScalarOp):
    """Scalar Op ``f(nu, x)``; the order is usually a count (no d/dnu, as for ``pt.iv``)."""

    nin = 2
    cache_version = 2

    def _nu_grad(self, nu):
        return no_gradient(self, 0, nu, _NU_NO_GRAD)


class LogIv(_BesselScalarOp):
    r"""Scalar Op :math:`\log I_\nu(x)`; gradient in ``x`` is :math:`r_\nu(x) + \nu/x`."""

    kernel = staticmethod(log_iv_scalar)

    def pullback(self, inputs, outputs, output_grads):
        nu, x = inputs
        (gz,) = output_grads
        return [self._nu_grad(nu), gz * dlog_iv_scalar_op(nu, x)]


class LogIve(_BesselScalarOp):
    r"""Scalar Op :math:`\log I_\nu(x) - x`; gradient in ``x`` is :math:`r_\nu(x) + \nu/x - 1`."""

    kernel = staticmethod(log_ive_scalar)

    def pullback(self, inputs, outputs, output_grads):
        nu, x = inputs
        (gz,) = output_grads
        return [self._nu_grad(nu), gz * (dlog_iv_scalar_op(nu, x) - _f64(1.0))]


class IvRatio(_BesselScalarOp):
    r"""Scalar Op :math:`r_\nu(x) = I_{\nu+1}(x)/I_\nu(x)`.

    Gradient: :math:`r_\nu' = 1 - (2\nu+1) r_\nu / x - r_\nu^2`, from
    :math:`I_\nu' = I_{\nu+1} + (\nu/x) I_\nu` and
    :math:`I_{\nu+1}' = I_\nu - ((\nu+1)/x) I_{\nu+1}`.
    """

    kernel = staticmethod(iv_ratio_scalar)

    def pullback(self, inputs, outputs, output_grads):
        nu, x = inputs
        (r,) = outputs
        (gz,) = output_grads
        dr = _f64(1.0) - (_f64(2.0) * nu + _f64(1.0)) * r / x - r * r
        return [self._nu_grad(nu), gz * dr]


class DLogIv(_BesselScalarOp):
    r"""Scalar Op :math:`\partial_x \log I_\nu(x) = r_\nu(x) + \nu / x`."""

    kernel = staticmethod(dlog_iv_scalar)

    def pullback(self, inputs, outputs, output_grads):
        nu, x = inputs
        (gz,) = output_grads
        r = iv_ratio_scalar_op(nu, x)
        d2 = _f64(1.0) - (_f64(2.0) * nu + _f64(1.0)) * r / x - r * r - nu / (x * x)
        return [self._nu_grad(nu), gz * d2]


# scalar Ops and their Elemwise forms; numba lowerings are registered by KernelScalarOp
log_iv_scalar_op, log_iv_pt = scalar_elemwise(LogIv, "log_iv")
log_ive_scalar_op, log_ive_pt = scalar_elemwise(LogIve, "log_ive")
iv_ratio_scalar_op, iv_ratio_pt = scalar_elemwise(IvRatio, "iv_ratio")
dlog_iv_scalar_op, dlog_iv_pt = scalar_elemwise(DLogIv, "dlog_iv")
