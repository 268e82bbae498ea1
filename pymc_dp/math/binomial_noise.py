r"""A binomial count seen through two-sided exponential noise, summed exactly near its mode.

The marginal of ``z = y + noise`` with ``y ~ Binomial(n, p)`` and the noise law
``eta(t) = c e^{-a |t|}`` (Laplace: ``a = 1/b``, ``c = 1/(2b)``; two-sided geometric:
``a = -log alpha``, ``c = tanh(a/2)``, ``z`` an integer) is the finite sum

.. math::

    p(z) = \sum_{y=0}^{n} w(y), \qquad w(y) = B(y)\, \eta(z - y),
    \qquad B(y) = \binom{n}{y} p^y q^{n-y},\ q = 1 - p.

Summing the whole support costs ``n + 1`` terms per count, each a log-pmf (three
``lgamma``), a noise log-density and an ``exp``. Here each count sums only the terms that
matter, from its own mode outwards, by multiplying ratios, and the neglected rest is bounded.

Mode
----
``h(y) = log w(y)`` is concave on ``0..n``: ``log B`` is (its increments
``log((n - y)/(y + 1)) + lambda``, ``lambda = log(p/q)``, fall with ``y``) and so is
``-a|z - y|``. Its increment ``d(y) = h(y + 1) - h(y)`` is

* ``log((n - y)/(y + 1)) + lambda + a`` for ``y + 1 <= z`` (the step moves towards ``z``),
* ``log((n - y)/(y + 1)) + lambda - a`` for ``y >= z``,
* ``log((n - y)/(y + 1)) + lambda + a (2 (z - y) - 1)`` for the step across a non-integer ``z``.

The mode ``M`` (the smallest ``y`` with ``d(y) <= 0``, or ``n``) is found in closed form: in
the first region ``d(y) <= 0`` exactly when ``y >= (n + 1) theta_+ - 1``, ``theta_+`` the
logistic function of ``lambda + a`` (and ``theta_-`` of ``lambda - a`` in the second), so
``M`` is ``ceil((n + 1) theta_+ - 1)`` if that lies before ``z``, else the crossing step if its
increment is not positive, else ``max(ceil((n + 1) theta_- - 1), ceil(z))``, clipped to
``0..n``. (A rounding error that moves ``M`` by one only happens where ``d`` is within
rounding of 0, and the walk below does not depend on ``M`` being exact.)

Walk and neglected mass
-----------------------
With ``t(y) = w(y) / w(M)``, ``t(M) = 1`` and the terms on each side follow from the ratios
``t(y + 1)/t(y) = (n - y)/(y + 1) e^{d'}`` (``e^{d'}`` one of three constants per count), so a
term costs a division and two multiplications. Walking up from ``M``, every ratio from ``y``
on is at most ``r(y) = t(y + 1)/t(y)`` (concavity), so once ``r(y) < 1``

.. math::  \sum_{j > y} t(j) \le t(y)\, \frac{r(y)}{1 - r(y)},

and the walk stops at the first ``y`` where this bound is below ``2^{-60}`` of the partial sum
``S`` (or at ``y = n``); the same downwards (bound with ``1/r(y - 1)``, stop at 0). The two
neglected tails together are at most ``2^{-59} S``: a relative error below ``2 \cdot 10^{-18}``
in ``p(z)``, certified for every count (no fallback is needed). The cost is the number of
terms within about 9 standard deviations of the posterior of ``y`` given ``z`` (bounded by
``n + 1``). Ratios multiplied over ``k`` steps carry a relative error of about ``k`` ulps; for
``n <= 10^4`` (``k`` at most a few hundred in the bulk) that is below ``10^{-13}``.

Then ``log p(z) = log c - a |z - M| + log B(M) + log S``, with ``log B(M)`` in Loader's
saddle-point form (:func:`pymc_dp.math.poisson.stirlerr`, :func:`~pymc_dp.math.poisson.bd0`),
accurate to a few ulps of the result, also for large ``n``.

Derivatives
-----------
With :math:`\partial_p B_n(y) = n\,(B_{n-1}(y-1) - B_{n-1}(y))`,

.. math::

    \partial_p p(z) = n \sum_{y=0}^{n-1} B_{n-1}(y)\,(\eta(z-y-1) - \eta(z-y)),

and each step ``y -> y + 1`` is written with the factor of modulus at most 1:
``B_{n-1}(y) eta(z - y - 1) n = w(y + 1) (y + 1)/p`` times ``1 - e^{-a}`` for a step towards
``z``, ``B_{n-1}(y) eta(z - y) n = w(y) (n - y)/q`` times ``e^{-a} - 1`` for a step away from
it (and for the step across a non-integer ``z = y + f`` whichever of the two forms has the
factor ``-expm1(-a |2f - 1|)``). So

.. math::

    \partial_p \log p(z) = \Big[-\mathrm{expm1}(-a) \Big(\frac{L}{p} - \frac{H}{q}\Big)
        + X\Big] / S, \qquad L = \sum_{1 \le y \le z} y\,t(y),\quad
        H = \sum_{y \ge z} (n - y)\,t(y),

with ``X`` the crossing step: no factor ``e^{a}`` that could overflow for a narrow noise, no
division by ``p(1 - p)`` for ``p`` near 0 or 1. In the observation (Laplace; ``|t|`` has
derivative 0 at 0, as PyTensor's ``abs``),
``\partial_z \log p(z) = -a (S_{y < z} - S_{y > z}) / S``.

:func:`binomial_two_sided_exp_numpy` evaluates arrays; :class:`BinomialTwoSidedExpLogp` is the
PyTensor Op (value and both derivatives in one pass; numba lowering).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_dp._cache import SOURCE_INT, numba_registration
from pymc_dp.math.poisson import bd0, stirlerr

__all__ = [
    "STOP",
    "BinomialTwoSidedExpLogp",
    "binomial_mode",
    "binomial_two_sided_exp_kernel",
    "binomial_two_sided_exp_logp",
    "binomial_two_sided_exp_numpy",
    "log_binomial_pmf",
]

#: a walk stops where its neglected tail is certified below ``STOP`` times the partial sum
STOP = 2.0**-60
_LOG_2PI = math.log(2.0 * math.pi)
# bump for a change of the compiled code that the source hash cannot see
_VERSION = 1


@numba.njit(cache=True)
def log_binomial_pmf(y, n, p, logp, logq):
    r""":math:`\log\binom{n}{y} p^y q^{n-y}` for integers ``0 <= y <= n`` (floats), in
    Loader's form (``logp = log p``, ``logq = log q`` given, for the end points).

    Examples
    --------
    >>> import math
    >>> from scipy import stats
    >>> p = 0.3
    >>> v = log_binomial_pmf(40.0, 100.0, p, math.log(p), math.log1p(-p))
    >>> bool(abs(v - stats.binom.logpmf(40, 100, p)) < 1e-13)
    True
    """
    if y == 0.0:
        return n * logq if n > 0.0 else 0.0
    if y == n:
        return n * logp
    m = n - y
    q = 1.0 - p
    return (
        stirlerr(n)
        - stirlerr(y)
        - stirlerr(m)
        - bd0(y, n * p)
        - bd0(m, n * q)
        + 0.5 * (math.log(n) - math.log(y) - math.log(m) - _LOG_2PI)
    )


@numba.njit(cache=True)
def _sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@numba.njit(cache=True)
def binomial_mode(z, n, lam, a):
    """Mode of ``h(y) = log B(y) - a |z - y|`` on ``0..n`` (module docstring), as a float.

    ``lam = log(p / q)``. The smallest ``y`` with ``h(y + 1) <= h(y)``, or ``n``.

    Examples
    --------
    Binomial(100, 1/2) seen at ``z = 80`` through noise of rate ``a = 1``: the noise pulls
    the mode from 50 towards ``z`` until the binomial ratio ``(100 - y)/(y + 1)`` falls below
    ``e^{-1}``.

    >>> binomial_mode(80.0, 100.0, 0.0, 1.0)
    73.0
    """
    fz = np.floor(z)
    ya = max(np.ceil((n + 1.0) * _sigmoid(lam + a) - 1.0), 0.0)
    if ya <= fz - 1.0:
        return min(ya, n)
    if fz != z and 0.0 <= fz <= n - 1.0:
        d = math.log((n - fz) / (fz + 1.0)) + lam + a * (2.0 * (z - fz) - 1.0)
        if d <= 0.0:
            return fz
    yc = max(np.ceil((n + 1.0) * _sigmoid(lam - a) - 1.0), np.ceil(z), 0.0)
    return min(yc, n)


@numba.njit(cache=True, inline="always")
def _add_term(y, t, z, n, fz, s_lo, s_hi, s_eq, low, high, t_fz, t_fz1):  # pragma: no cover
    """Add the term ``t = t(y)`` to the sums of :func:`binomial_two_sided_exp_kernel` (below,
    above and at ``z``; the gradient's weighted sums; the terms either side of ``z``)."""
    if y < z:
        s_lo += t
        low += y * t
    elif y > z:
        s_hi += t
        high += (n - y) * t
    else:
        s_eq += t
        low += y * t
        high += (n - y) * t
    if y == fz:
        t_fz = t
    elif y == fz + 1.0:
        t_fz1 = t
    return s_lo, s_hi, s_eq, low, high, t_fz, t_fz1


@numba.njit(cache=True, error_model="numpy")
def binomial_two_sided_exp_kernel(z, n, p, a, logc, integer):
    r"""``(log p(z), d/dp, d/dz)`` for ``Binomial(n, p)`` plus noise ``exp(logc - a |t|)``.

    Numba scalar kernel (module docstring). ``n`` is a count (a float; negative counts as 0),
    ``p`` in ``[0, 1]``, ``a > 0``; ``integer``: the noise lives on the integers (then a
    non-integer ``z`` has probability 0). Non-finite ``z`` or ``p`` outside ``[0, 1]`` give
    ``-inf`` or NaN with zero derivatives.

    Examples
    --------
    >>> import math
    >>> lp, dp, dz = binomial_two_sided_exp_kernel(3.0, 10.0, 0.4, 1.0, math.log(0.5), False)
    >>> round(lp, 12), round(dp, 12), round(dz, 12)
    (-1.632021110022, -2.990129332567, 0.193283613569)
    """
    if not (p >= 0.0 and p <= 1.0) or z != z:
        return np.nan, 0.0, 0.0
    if math.isinf(z) or (integer and z != np.floor(z)):
        return -np.inf, 0.0, 0.0
    n = max(np.floor(n), 0.0)
    q = 1.0 - p
    logp = math.log(p) if p > 0.0 else -np.inf
    logq = math.log1p(-p) if p < 0.5 else math.log(q)
    lam = logp - logq
    if p == 0.0:
        mode = 0.0
    elif q == 0.0:
        mode = n
    else:
        mode = binomial_mode(z, n, lam, a)
    fz = np.floor(z)
    frac = z - fz
    # ratio constants t(y + 1) / t(y): towards z, away from z, across z; and their inverses
    up_to = math.exp(lam + a)
    up_away = math.exp(lam - a)
    up_cross = math.exp(lam + a * (2.0 * frac - 1.0))
    dn_to = math.exp(-(lam + a))
    dn_away = math.exp(-(lam - a))
    dn_cross = math.exp(-(lam + a * (2.0 * frac - 1.0)))

    ip = 1.0 / p if p > 0.0 else 0.0  # gradient weights (an end point has no other term)
    iq = 1.0 / q if q > 0.0 else 0.0
    s_lo = 0.0  # sum of t(y), y < z
    s_hi = 0.0  # y > z
    s_eq = 0.0  # y == z
    low = 0.0  # sum of y t(y), y <= z
    high = 0.0  # sum of (n - y) t(y), y >= z
    t_fz = 0.0  # t(floor z), t(floor z + 1): the step across a non-integer z
    t_fz1 = 0.0

    # upwards from the mode (the mode itself included)
    y = mode
    t = 1.0
    while True:
        s_lo, s_hi, s_eq, low, high, t_fz, t_fz1 = _add_term(
            y, t, z, n, fz, s_lo, s_hi, s_eq, low, high, t_fz, t_fz1
        )
        if y >= n:
            break
        if y + 1.0 <= z:
            c = up_to
        elif y >= z:
            c = up_away
        else:
            c = up_cross
        r = (n - y) / (y + 1.0) * c
        if r < 1.0 and t * r <= STOP * (s_lo + s_hi + s_eq) * (1.0 - r):
            weight = (y + 1.0 / (1.0 - r)) * ip + (n - y) * iq
            if t * r * weight <= STOP * (low * ip + high * iq) * (1.0 - r):
                break
        t *= r
        y += 1.0
    # downwards from the mode
    y = mode
    t = 1.0
    while y > 0.0:
        if y <= z:
            c = dn_to
        elif y - 1.0 >= z:
            c = dn_away
        else:
            c = dn_cross
        r = y / (n - y + 1.0) * c
        if r < 1.0 and t * r <= STOP * (s_lo + s_hi + s_eq) * (1.0 - r):
            weight = y * ip + (n - y + 1.0 / (1.0 - r)) * iq
            if t * r * weight <= STOP * (low * ip + high * iq) * (1.0 - r):
                break
        t *= r
        y -= 1.0
        s_lo, s_hi, s_eq, low, high, t_fz, t_fz1 = _add_term(
            y, t, z, n, fz, s_lo, s_hi, s_eq, low, high, t_fz, t_fz1
        )

    s = s_lo + s_hi + s_eq
    lp = logc - a * abs(z - mode) + log_binomial_pmf(mode, n, p, logp, logq) + math.log(s)
    # d/dp: steps towards z (1 - e^{-a}) y t(y) / p, away (e^{-a} - 1) (n - y) t(y) / q
    g = -math.expm1(-a)
    dp = 0.0
    if low > 0.0:
        dp += g * low / p
    if high > 0.0:
        dp -= g * high / q
    if frac != 0.0 and 0.0 <= fz <= n - 1.0:
        if frac >= 0.5 and t_fz1 > 0.0:  # w(fz + 1) (fz + 1) / p (1 - e^{-a (2f - 1)})
            dp += -math.expm1(-a * (2.0 * frac - 1.0)) * (fz + 1.0) * t_fz1 / p
        elif frac < 0.5 and t_fz > 0.0:  # w(fz) (n - fz) / q (e^{a (2f - 1)} - 1)
            dp += math.expm1(a * (2.0 * frac - 1.0)) * (n - fz) * t_fz / q
    dp /= s
    dz = -a * (s_lo - s_hi) / s
    return lp, dp, dz


@numba.njit(cache=True)
def _kernel_arrays(z, n, p, a, logc, integer, out, dp, dz):
    for i in range(z.shape[0]):
        out[i], dp[i], dz[i] = binomial_two_sided_exp_kernel(z[i], n[i], p[i], a, logc, integer)


def binomial_two_sided_exp_numpy(z, n, p, a, logc, integer=False):
    """``(log p(z), d/dp, d/dz)`` on numpy arrays (broadcast together).

    Parameters
    ----------
    z : array_like
        Observed noisy counts.
    n, p : array_like
        Binomial trials and success probabilities.
    a, logc : float
        Noise law ``exp(logc - a |t|)``.
    integer : bool
        Whether the noise lives on the integers (two-sided geometric).

    Returns
    -------
    logp, dlogp_dp, dlogp_dz : ndarray

    Examples
    --------
    Binomial(12, 0.3) through Laplace noise of scale 2, against the whole-support sum:

    >>> import numpy as np
    >>> from scipy import special, stats
    >>> z = np.array([-3.5, 4.2, 30.0])
    >>> lp, _, _ = binomial_two_sided_exp_numpy(z, 12, 0.3, 0.5, -np.log(4.0))
    >>> y = np.arange(13)
    >>> ref = [special.logsumexp(stats.binom.logpmf(y, 12, 0.3) - np.log(4.0)
    ...                          - 0.5 * np.abs(zi - y)) for zi in z]
    >>> bool(np.allclose(lp, ref, rtol=1e-13))
    True
    """
    z, n, p = np.broadcast_arrays(
        np.asarray(z, np.float64), np.asarray(n, np.float64), np.asarray(p, np.float64)
    )
    shape = z.shape
    outs = [np.empty(z.size) for _ in range(3)]
    _kernel_arrays(
        np.ascontiguousarray(z).ravel(),
        np.ascontiguousarray(n).ravel(),
        np.ascontiguousarray(p).ravel(),
        float(a),
        float(logc),
        bool(integer),
        *outs,
    )
    return tuple(o.reshape(shape) for o in outs)


class BinomialTwoSidedExpLogp(Op):
    """Elementwise ``(log p(z), d/dp, d/dz)`` on 1-d float64 inputs ``z, n, p`` of one length.

    ``a``, ``logc`` (the noise law ``exp(logc - a |t|)``) and ``integer`` (noise on the
    integers) are Op properties. The derivative outputs are used by :meth:`pullback`; they are
    not themselves differentiable. ``n`` has no gradient (a count).
    """

    __props__ = ("a", "logc", "integer")

    def __init__(self, a: float, logc: float, integer: bool):
        self.a = float(a)
        self.logc = float(logc)
        self.integer = bool(integer)
        super().__init__()

    def make_node(self, z, n, p):
        z, n, p = (pt.as_tensor_variable(v).astype("float64") for v in (z, n, p))
        if z.ndim != 1 or n.ndim != 1 or p.ndim != 1:
            raise TypeError("BinomialTwoSidedExpLogp takes 1-d inputs")
        return Apply(self, [z, n, p], [z.type(), z.type(), z.type()])

    def perform(self, node, inputs, output_storage):
        z, n, p = (np.ascontiguousarray(v) for v in inputs)
        outs = [np.empty(z.shape[0]) for _ in range(3)]
        _kernel_arrays(z, n, p, self.a, self.logc, self.integer, *outs)
        for storage, o in zip(output_storage, outs, strict=True):
            storage[0] = o

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]] * 3

    def pullback(self, inputs, outputs, cotangents):
        z, n, _p = inputs
        g_lp, g_dp, g_dz = cotangents
        if not (
            isinstance(g_dp.type, DisconnectedType) and isinstance(g_dz.type, DisconnectedType)
        ):
            raise NotImplementedError("the derivative outputs of BinomialTwoSidedExpLogp are final")
        if isinstance(g_lp.type, DisconnectedType):
            return [DisconnectedType()() for _ in range(3)]
        if self.integer:
            g_z = grad_undefined(self, 0, z, "the noise lives on the integers")
        else:
            g_z = g_lp * outputs[2]
        return [g_z, pt.zeros_like(n), g_lp * outputs[1]]


def _numba_funcify_binomial_two_sided(op, node, **kwargs):
    a, logc, integer = op.a, op.logc, op.integer

    @numba.njit
    def impl(z, n, p):
        size = z.shape[0]
        out, dp, dz = np.empty(size), np.empty(size), np.empty(size)
        _kernel_arrays(
            np.ascontiguousarray(z),
            np.ascontiguousarray(n),
            np.ascontiguousarray(p),
            a,
            logc,
            integer,
            out,
            dp,
            dz,
        )
        return out, dp, dz

    return impl, (_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    register_funcify_default_op_cache_key(BinomialTwoSidedExpLogp)(
        _numba_funcify_binomial_two_sided
    )


def binomial_two_sided_exp_logp(value, n, p, a: float, logc: float, integer: bool = False):
    """PyTensor graph of the exact marginal (any shapes, broadcast like an elementwise op).

    Examples
    --------
    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> p = pt.dscalar("p")
    >>> lp = binomial_two_sided_exp_logp(np.array([3.0, -1.0]), np.array([10, 4]), p,
    ...                                  1.0, np.log(0.5)).sum()
    >>> f = pytensor.function([p], [lp, pytensor.grad(lp, p)])
    >>> [round(float(v), 10) for v in f(0.4)]
    [-4.4911160231, -6.3742907773]
    """
    value = pt.as_tensor_variable(value).astype("float64")
    n = pt.as_tensor_variable(n).astype("float64")
    p = pt.as_tensor_variable(p).astype("float64")
    z_b, n_b, p_b = pt.broadcast_arrays(value, n, p)
    shape = z_b.shape
    lp, _, _ = BinomialTwoSidedExpLogp(a, logc, integer)(z_b.ravel(), n_b.ravel(), p_b.ravel())
    return lp.reshape(shape)
