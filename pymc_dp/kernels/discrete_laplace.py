r"""Core log-pmf of the discrete Laplace (two-sided geometric) law, in numpy, PyTensor and numba.

The two-sided geometric law with parameter :math:`\alpha \in (0, 1)` (Schein et al. 2019, eq. 6;
Ghosh et al. 2012) has pmf

.. math:: p(k \mid \alpha) = \frac{1 - \alpha}{1 + \alpha}\,\alpha^{|k|}, \qquad k \in \mathbb{Z}.

Everything here is written in terms of :math:`a = -\log\alpha > 0`, which keeps full relative
precision when :math:`\alpha` is close to 1 (small epsilon) or close to 0 (large epsilon).

Derivation of the stable log normaliser. With :math:`\alpha = e^{-a}`,

.. math:: \log\frac{1-\alpha}{1+\alpha} = \log\bigl(-\operatorname{expm1}(-a)\bigr)
          - \operatorname{log1p}(e^{-a}) = \log\tanh(a/2).

``-expm1(-a)`` is accurate to a relative ulp for every ``a > 0`` (it is ``a`` to first order for
small ``a`` and ``1 - e^{-a}`` for large ``a``), and ``log1p(e^{-a})`` is accurate everywhere, so
the difference has no cancellation: the two terms have opposite signs. The naive
``log(1 - alpha) - log(1 + alpha)`` loses all digits of ``1 - alpha`` once alpha is a float close
to 1 (see testing.md).

Derivation of the log CDF. Summing the geometric series,

.. math:: F(k) = \frac{\alpha^{-k}}{1+\alpha}\ (k < 0), \qquad
          F(k) = 1 - \frac{\alpha^{k+1}}{1+\alpha}\ (k \ge 0),

so :math:`\log F(k) = -|k|\,a - \operatorname{log1p}(\alpha)` for :math:`k<0` and
:math:`\log F(k) = \operatorname{log1mexp}(-(k+1)a - \operatorname{log1p}(\alpha))` for
:math:`k \ge 0`.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.discrete_laplace import logpmf
>>> alpha = 0.5
>>> round(float(np.exp(logpmf(0, np.log(alpha)))), 12)  # (1 - 0.5) / (1 + 0.5)
0.333333333333
>>> round(float(np.exp(logpmf(-2, np.log(alpha)))), 12)  # 1/3 * 0.25
0.083333333333
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt

__all__ = [
    "log_normalizer",
    "logcdf",
    "logcdf_pt",
    "logpmf",
    "logpmf_pt",
    "numba_logpmf",
    "numba_logpmf_scalar",
]


# ---- numpy --------------------------------------------------------------------------------------
def log_normalizer(a):
    """``log((1 - alpha) / (1 + alpha))`` for ``alpha = exp(-a)``, ``a > 0`` (numpy, stable)."""
    a = np.asarray(a, dtype=np.float64)
    return np.log(-np.expm1(-a)) - np.log1p(np.exp(-a))


def _is_integer(x):
    return np.isfinite(x) & (x == np.round(x))


def logpmf(k, log_alpha):
    """Log pmf of the two-sided geometric law at ``k`` with ``log_alpha = log(alpha) < 0``.

    Non-integer (or non-finite) ``k`` has log pmf ``-inf``.
    """
    k = np.asarray(k)
    a = -np.asarray(log_alpha, dtype=np.float64)
    kf = k.astype(np.float64)
    ok = _is_integer(kf)
    kk = np.where(ok, np.abs(kf), 0.0)
    res = log_normalizer(a) - kk * a
    return np.where(ok, res, -np.inf)[()]


def logcdf(k, log_alpha):
    """Log CDF ``log P(X <= k)`` of the two-sided geometric law (numpy); ``k`` is floored."""
    a = -np.asarray(log_alpha, dtype=np.float64)
    kf = np.floor(np.asarray(k, dtype=np.float64))
    log1p_alpha = np.log1p(np.exp(-a))
    neg = -np.abs(kf) * a - log1p_alpha
    # log(1 - alpha^{k+1}/(1+alpha)); argument of log1mexp is < -log(1 + alpha) < 0
    arg = -(np.maximum(kf, 0.0) + 1.0) * a - log1p_alpha
    pos = np.where(arg > -math.log(2.0), np.log(-np.expm1(arg)), np.log1p(-np.exp(arg)))
    return np.where(kf < 0, neg, pos)[()]


# ---- PyTensor -----------------------------------------------------------------------------------
def _pt_a(alpha=None, log_alpha=None):
    if log_alpha is not None:
        return -pt.as_tensor_variable(log_alpha)
    return -pt.log(pt.as_tensor_variable(alpha))


def logpmf_pt(value, alpha=None, *, log_alpha=None):
    """Log pmf as a PyTensor graph (float64); give ``alpha`` or ``log_alpha``.

    Float-typed ``value`` that is not an integer gets ``-inf``.
    """
    value = pt.as_tensor_variable(value)
    a = _pt_a(alpha, log_alpha)
    norm = pt.log(-pt.expm1(-a)) - pt.log1p(pt.exp(-a))
    if value.dtype.startswith("float"):
        ok = pt.eq(value, pt.round(value))
        absval = pt.switch(ok, pt.abs(value), np.float64(0.0))
        return pt.switch(ok, norm - absval * a, -np.inf)
    # |value| in float64: abs of int64 -2**63 wraps to a negative number in integer arithmetic
    return norm - pt.abs(value.astype("float64")) * a


def logcdf_pt(value, alpha=None, *, log_alpha=None):
    """Log CDF as a PyTensor graph (float64); give ``alpha`` or ``log_alpha``."""
    value = pt.as_tensor_variable(value)
    value = pt.floor(value if value.dtype.startswith("float") else value.astype("float64"))
    a = _pt_a(alpha, log_alpha)
    log1p_alpha = pt.log1p(pt.exp(-a))
    neg = -pt.abs(value) * a - log1p_alpha
    arg = -(pt.maximum(value, np.float64(0.0)) + np.float64(1.0)) * a - log1p_alpha
    pos = pt.log1mexp(arg)
    return pt.switch(pt.lt(value, 0), neg, pos)


# ---- numba --------------------------------------------------------------------------------------
@numba.njit(cache=True)
def numba_logpmf_scalar(x, log_alpha):
    """Scalar log pmf ``f(x, log_alpha)`` (numba); ``x`` is taken in float64 (no wrap)."""
    x = np.float64(x)
    if not (math.isfinite(x) and x == math.floor(x)):
        return -math.inf
    a = -log_alpha
    return math.log(-math.expm1(-a)) - math.log1p(math.exp(-a)) - abs(x) * a


@numba.njit(cache=True)
def numba_logpmf(x, params):
    """Log pmf ``f(x: float64, params: float64[::1])`` (numba).

    ``params = [log_alpha]``, or ``[log_alpha, log((1-alpha)/(1+alpha))]`` with the log
    normaliser precomputed (as :class:`~pymc_dp.mechanisms.geometric.Geometric` passes it).
    """
    x = np.float64(x)
    if params.size == 1:
        return numba_logpmf_scalar(x, params[0])
    if not (math.isfinite(x) and x == math.floor(x)):
        return -math.inf
    return params[1] + abs(x) * params[0]
