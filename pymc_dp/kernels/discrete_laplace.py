r"""The discrete Laplace (two-sided geometric) law: log-pmf (numpy, PyTensor, numba), CDF, sampler.

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

Exact sampler (Canonne, Kamath & Steinke 2020, Algorithm 2). :func:`sample_discrete_laplace`
draws with pmf :math:`\propto e^{-|y|\,s/t}` for integers ``s, t >= 1`` (so
:math:`\alpha = e^{-s/t}`) in int64 arithmetic on the random words of
:func:`pymc_dp.kernels.exact_sampling.random_words`. Integer-overflow safety: ``1 <= s, t <=
2**61`` and ``t / s <= 2**50`` (a draw is about ``(t / s) V`` with ``V`` geometric,
``P(V >= v) = e^{-v}``, so it could leave int64 only if ``V >= 2**12``, with probability below
``e^{-4096}``; larger scales, where about 1% of draws wrapped, are refused).

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.discrete_laplace import logpmf, sample_discrete_laplace
>>> y = sample_discrete_laplace(1, 1, 5, rng=np.random.default_rng(0))  # alpha = exp(-1)
>>> y.dtype, y.shape
(dtype('int64'), (5,))
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

from pymc_dp.kernels.exact_sampling import _bernoulli_exp_unit, _check_int, _drive, _uniform_below

__all__ = [
    "MAX_LAPLACE_SCALE",
    "log_normalizer",
    "logcdf",
    "logcdf_pt",
    "logpmf",
    "logpmf_pt",
    "numba_logpmf",
    "numba_logpmf_scalar",
    "sample_discrete_laplace",
]

#: largest scale t / s of the exact sampler (see the module docstring)
MAX_LAPLACE_SCALE = 2**50


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


# ---- exact sampler (CKS 2020 Algorithm 2) -------------------------------------------------------
@numba.njit(cache=True)
def _discrete_laplace_one(s, t, words, st):
    """One draw with pmf proportional to ``exp(-|y| s / t)`` (CKS Algorithm 2)."""
    while True:
        if st[1]:
            return np.int64(0)
        # U uniform on {0..t-1} kept with prob exp(-U/t): P(U = u) propto exp(-u/t)
        u = _uniform_below(t, words, st)
        if not _bernoulli_exp_unit(u, t, words, st):
            continue
        # V geometric: P(V = v) propto exp(-v)
        v = np.int64(0)
        while _bernoulli_exp_unit(1, 1, words, st):
            if st[1]:
                return np.int64(0)
            v += 1
        if st[1]:
            return np.int64(0)
        # X = U + t V has P(X = x) propto exp(-x/t); Y = floor(X / s) has P(Y = y) propto
        # exp(-y s/t). floor((U + t V)/s) is accumulated V times so nothing overflows.
        y = u // s
        rem = u - y * s
        for _ in range(v):
            rem += t
            qq = rem // s
            y += qq
            rem -= qq * s
        # random sign; reject (negative zero) so that 0 is not counted twice
        b = _uniform_below(2, words, st)
        if st[1]:
            return np.int64(0)
        if b == 1 and y == 0:
            continue
        return -y if b == 1 else y


@numba.njit(cache=True)
def _fill_discrete_laplace(out, start, words, pos, s, t):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    i = start
    while i < out.size:
        p = st[0]
        y = _discrete_laplace_one(s, t, words, st)
        if st[1]:
            return i, p
        out[i] = y
        i += 1
    return i, st[0]


def sample_discrete_laplace(s: int, t: int, size, rng=None) -> np.ndarray:
    """Exact draws with pmf ``(1 - alpha)/(1 + alpha) alpha**|y|``, ``alpha = exp(-s/t)``.

    CKS Algorithm 2 for integers ``1 <= s, t <= 2**61`` with ``t / s <= 2**50``; see the module
    docstring for the random source (``rng=None`` is secure, a ``Generator`` is reproducible).
    """
    s = _check_int("s", s)
    t = _check_int("t", t)
    if t > s * MAX_LAPLACE_SCALE:
        raise ValueError(
            f"the scale t / s = {t}/{s} exceeds 2**50: draws could overflow int64 "
            "(use s / t >= 2**-50, i.e. epsilon / sensitivity >= 8.9e-16)"
        )
    return _drive(_fill_discrete_laplace, size, (np.int64(s), np.int64(t)), rng, 12.0)
