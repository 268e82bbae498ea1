r"""Normal values observed through Laplace or Gaussian noise, integrated out exactly.

Normal + Laplace (the normal-Laplace convolution)
-------------------------------------------------
Let ``Y ~ N(mu, sigma^2)``, noise ``~ Laplace(0, b)``, ``d = z - mu`` and ``r = sigma / b``.
Completing the square in :math:`\int \phi((y-\mu)/\sigma)/\sigma \cdot e^{-|z-y|/b}/(2b)\,dy`
on each side of ``y = z`` gives (Reed 2006, eq. 1)

.. math::

    p(z) = \frac{1}{2b} e^{r^2/2} \left[ e^{-d/b}\,\Phi(d/\sigma - r)
           + e^{d/b}\,\Phi(-d/\sigma - r) \right].

Each bracket term is evaluated in log space as ``T(u, s) = r^2/2 - s d/b + log Phi(u)``, with
``u = s d / sigma - r`` (``s = +1`` and ``-1``). For ``u < 0``,
``log Phi(u) = log(erfcx(-u/sqrt 2) / 2) - u^2/2`` and
``r^2/2 - s d/b - u^2/2 = -d^2 / (2 sigma^2)`` exactly, so

.. math::  T(u) = -\frac{d^2}{2\sigma^2} + \log\frac{\mathrm{erfcx}(-u/\sqrt2)}{2}
           \quad (u < 0), \qquad
           T(u) = \frac{r^2}{2} - s\frac{d}{b} + \mathrm{log1p}(-\mathrm{erfc}(u/\sqrt2)/2)
           \quad (u \ge 0),

and ``log p = -log(2b) + logaddexp(T_-, T_+)``. Nothing overflows or cancels, for ``r`` up to
1e6 and beyond (the naive form is NaN once ``r`` exceeds about 38). Both switch branches get
clipped arguments so that the unused branch stays finite, including its gradient.

Normal + Gaussian
-----------------
``z ~ N(mu, sigma^2 + s^2)``: the sum of independent normals.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import zero_grad

__all__ = ["log_erfcx", "log_ndtr", "normal_gaussian_logp", "normal_laplace_logp"]

_SQRT2 = np.float64(np.sqrt(2.0))
_HALF = np.float64(0.5)
_LOG_HALF = np.float64(np.log(0.5))


_ASYMPTOTIC_FROM = np.float64(30.0)
_LOG_SQRT_PI = np.float64(0.5 * np.log(np.pi))


def log_erfcx(x):
    """``log erfcx(x)`` for ``x >= 0`` with an accurate gradient.

    PyTensor's gradient of ``erfcx`` is ``2 x erfcx(x) - 2/sqrt(pi)``, which cancels to a
    relative error of about ``eps x^2`` for large ``x`` (5e-3 at ``x = 7e6``). For
    ``x >= 30`` the asymptotic series ``erfcx(x) = (1/(x sqrt pi)) sum_k (-1)^k (2k-1)!! /
    (2x^2)^k`` (DLMF 7.12.1; seven terms, truncation error below 1e-17) is used instead, and
    autodiff of it is accurate.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import special
    >>> x = np.array([0.0, 1.0, 29.0, 31.0, 1e4, 1e8])
    >>> np.allclose(log_erfcx(x).eval(), np.log(special.erfcx(x)), rtol=1e-15, atol=0)
    True
    """
    x = pt.as_tensor_variable(x).astype("float64")
    small = pt.log(pt.erfcx(pt.minimum(x, _ASYMPTOTIC_FROM)))
    xl = pt.maximum(x, _ASYMPTOTIC_FROM)
    t = np.float64(1.0) / (np.float64(2.0) * xl * xl)
    series = np.float64(1.0)
    coef = np.float64(1.0)
    term = np.float64(1.0)
    for k in range(1, 8):
        coef = coef * np.float64(2 * k - 1)
        term = term * t
        series = series + np.float64((-1) ** k) * coef * term
    large = -pt.log(xl) - _LOG_SQRT_PI + pt.log(series)
    return pt.switch(x < _ASYMPTOTIC_FROM, small, large)


def log_ndtr(x):
    """``log Phi(x)`` (standard normal CDF) in PyTensor, stable for all ``x``.

    Uses ``log(erfcx(-x/sqrt 2)/2) - x^2/2`` for ``x < 0`` and ``log1p(-erfc(x/sqrt 2)/2)``
    otherwise; both branches see clipped arguments so their gradients stay finite.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import special
    >>> x = np.array([-1e5, -40.0, -1.0, 0.0, 3.0, 40.0])
    >>> np.allclose(log_ndtr(x).eval(), special.log_ndtr(x), rtol=1e-14, atol=0)
    True
    """
    x = pt.as_tensor_variable(x).astype("float64")
    xn = pt.minimum(x, 0.0)
    xp = pt.maximum(x, 0.0)
    neg = log_erfcx(-xn / _SQRT2) + _LOG_HALF - _HALF * xn * xn
    pos = pt.log1p(-_HALF * pt.erfc(xp / _SQRT2))
    return pt.switch(x < 0, neg, pos)


def _nl_term(d, sigma, b, r, s):
    u = s * d / sigma - r
    un = pt.minimum(u, 0.0)
    up = pt.maximum(u, 0.0)
    neg = -_HALF * pt.sqr(d / sigma) + log_erfcx(-un / _SQRT2) + _LOG_HALF
    pos = _HALF * r * r - s * d / b + pt.log1p(-_HALF * pt.erfc(up / _SQRT2))
    return pt.switch(u < 0, neg, pos)


def normal_laplace_logp(value, mu, sigma, b):
    """Log density of ``N(mu, sigma^2) + Laplace(0, b)`` at ``value`` (PyTensor).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import integrate, stats
    >>> f = lambda y: stats.norm.pdf(y, 1.0, 2.0) * stats.laplace.pdf(0.5 - y, scale=0.7)
    >>> ref = np.log(integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-13)[0])
    >>> bool(np.isclose(normal_laplace_logp(0.5, 1.0, 2.0, 0.7).eval(), ref, rtol=1e-11))
    True
    """
    value = pt.as_tensor_variable(value).astype("float64")
    b = pt.as_tensor_variable(b).astype("float64")
    d = value - mu
    r = sigma / b
    return -pt.log(np.float64(2.0) * b) + pt.logaddexp(
        _nl_term(d, sigma, b, r, -1.0), _nl_term(d, sigma, b, r, 1.0)
    )


def normal_gaussian_logp(value, mu, sigma, s):
    """Log density of ``N(mu, sigma^2) + N(0, s^2)`` at ``value`` (PyTensor).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> ref = stats.norm.logpdf(0.5, 1.0, np.hypot(2.0, 0.7))
    >>> bool(np.isclose(normal_gaussian_logp(0.5, 1.0, 2.0, 0.7).eval(), ref, rtol=1e-14))
    True
    """
    value = pt.as_tensor_variable(value).astype("float64")
    s = pt.as_tensor_variable(s).astype("float64")
    # scale = hypot(sigma, s), scaled by the larger so that sigma^2 cannot overflow (it did at
    # sigma = 1.4e154: -inf for a density of about 1e-155); the factor is constant for the
    # gradient (the expression does not depend on it)
    big = zero_grad(pt.maximum(pt.abs(sigma), s))
    scale = big * pt.sqrt(pt.sqr(sigma / big) + pt.sqr(s / big))
    u = (value - mu) / scale
    return -(np.float64(0.5 * np.log(2 * np.pi)) + pt.log(scale)) - _HALF * pt.sqr(u)
