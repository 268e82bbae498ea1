r"""Poisson counts observed through two-sided exponential noise, integrated out exactly.

Both the two-sided geometric (discrete Laplace) mechanism and the Laplace mechanism have a noise
law of the form ``eta(t) = c * exp(-a |t|)``:

* geometric, ``alpha = exp(-a)``: ``c = (1 - alpha) / (1 + alpha) = tanh(a / 2)``, ``t`` integer;
* Laplace with scale ``b``: ``a = 1 / b`` and ``c = 1 / (2 b)``, ``t`` real.

Derivation of the closed form
-----------------------------
Let ``Y ~ Poisson(mu)`` and ``z = Y + noise``. Write ``n = floor(z)``, ``m = max(n + 1, 0)``,
``lambda1 = mu e^{a}`` and ``lambda2 = mu e^{-a}``. Splitting the sum at ``y <= n`` and
``y >= m``,

.. math::

    p(z) = c \sum_{y=0}^{n} \frac{e^{-\mu}\mu^y}{y!} e^{-a(z-y)}
         + c \sum_{y\ge m} \frac{e^{-\mu}\mu^y}{y!} e^{-a(y-z)}
         = c\,e^{-\mu + \lambda_1 - a z}\, Q(n+1, \lambda_1)
         + c\,e^{-\mu + \lambda_2 + a z}\, P(m, \lambda_2),

because :math:`\sum_{y=0}^{n} e^{-\lambda}\lambda^y/y! = Q(n+1, \lambda)` and
:math:`\sum_{y\ge m} e^{-\lambda}\lambda^y/y! = P(m, \lambda)` (regularized upper and lower
incomplete gamma functions; ``P(0, .) = 1``). The first sum is absent when ``n < 0``.

Computing this naively fails: ``Q`` and ``P`` underflow in their tails while ``mu``, ``lambda``
and ``a z`` are huge and cancel. Each sum is therefore evaluated in one of two exact forms,
chosen so that the series used converges geometrically and nothing cancels:

* *boundary form* (the sum is a tail of the Poisson(lambda) law): factor out the boundary term,
  e.g. for ``lambda1 >= n + 1``

  .. math::

      \sum_{y=0}^{n} \mathrm{Pois}(y;\mu) e^{-a(z-y)} = \mathrm{Pois}(n;\mu)\, e^{-a(z-n)}
      \sum_{j=0}^{n} \prod_{i<j} \frac{n-i}{\lambda_1},

  and for ``lambda2 < m + 1``, :math:`\mathrm{Pois}(m;\mu) e^{-a(m-z)} \sum_{k\ge 0}
  \lambda_2^k m!/(m+k)!`. The log Poisson pmf uses Loader's saddle-point form
  (``-stirlerr(k) - bd0(k, mu) - log(2 pi k)/2``), accurate to a few ulps of the *result*;
* *bulk form* (the sum is most of the Poisson(lambda) mass): ``-mu + lambda - a z + log1p(-R)``
  with ``-mu + lambda1 = mu expm1(a)``, ``-mu + lambda2 = -mu (-expm1(-a))`` and ``R`` the
  complementary tail (at most about 0.6), again from a geometric series.

The result ``log p(z) = log c + logaddexp(L1, L2)`` keeps 1e-13 relative accuracy for
``mu`` in [1e-8, 1e6], ``z`` in [-1e4, 1e6] and ``a`` in [0.01, 20] (checked against mpmath in
``tests/distributions/test_marginals.py``).

Gradient
--------
Since :math:`\partial_\mu \mathrm{Pois}(y;\mu) = \mathrm{Pois}(y-1;\mu) - \mathrm{Pois}(y;\mu)`,
:math:`\partial_\mu p(z) = p(z-1) - p(z)` for any noise law, so

.. math::  \partial_\mu \log p(z) = \mathrm{expm1}(\log p(z-1) - \log p(z)),

which stays finite and exact where all but one term underflow (the ratio is at most ``e^a``).
Beyond ``|z| = 2**52`` float64 cannot represent ``z - 1``; there (and wherever ``e^a`` is
smaller than ``|log p|``, which bounds that form's rounding) the same identity is applied to each
branch: with ``B1 = Pois(n; mu) e^{-a(z-n)}`` the last term of ``S1`` and
``B2 = Pois(m-1; mu) e^{-a(m-1-z)}`` the term just below ``S2``,

.. math::  \partial_\mu \log S_1 = \mathrm{expm1}(a) - e^{a} B_1/S_1, \qquad
           \partial_\mu \log S_2 = \mathrm{expm1}(-a) + e^{-a} B_2/S_2,

where ``B1/S1 = 1/rev_sum`` (boundary form) or ``Pois(n; lambda1)/(1 - tail)`` (bulk form) and
likewise for ``B2/S2``, so no large ``a z`` terms cancel. ``n = floor(z)`` is kept in float64
(numba's ``math.floor`` returns an int64 that wraps beyond ``2**63``): the marginal is right for
every finite float64 ``z`` (checked against mpmath up to ``|z| = 1e300`` and at the int64 edges
in ``tests/distributions/test_marginals_extreme.py``).
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
from pymc_dp.math.poisson import (
    log_poisson_pmf,  # re-exported (the tests' reference)
    log_poisson_scalar,
)
from pymc_dp.math.poisson_noise import (
    A_MAX,
    N_GROUPS,
    group_by_floor,
    in_domain,
    noise_constants,
    short_sum_group,
    short_sum_kernel,
    work_arrays,
)

__all__ = [
    "PoissonTwoSidedExpLogp",
    "log_poisson_pmf",
    "poisson_two_sided_exp_logp",
    "poisson_two_sided_exp_logp_numpy",
]

_TOL = 1e-17
_CHUNK = 1024  # counts evaluated in lockstep (work arrays in L2; 512: +10%, 4096: same)
# with SOURCE_INT (any source change), the key of PyTensor's compile cache. numba's own
# on-disk cache (cache=True) checks only this file's time stamp, not the modules its functions
# call: bump this line when a kernel of math/poisson_noise.py changes, so that the cached
# _conv_logp_and_dmu and _per_count are rebuilt with it
_VERSION = 6


_log_pois = log_poisson_scalar  # Loader's form, one implementation (pymc_dp.math.poisson)


@numba.njit(cache=True)
def _log_rev_sum(n, lam):
    """``log sum_{j=0}^{n} prod_{i<j} (n - i) / lam`` for ``lam > n`` (terms shrink)."""
    t = 1.0
    s = 1.0
    i = 0.0
    while i < n:
        t *= (n - i) / lam
        s += t
        if t < s * _TOL:
            break
        i += 1.0
    return math.log(s)


@numba.njit(cache=True)
def _log_fwd_sum(m, lam):
    """``log sum_{k>=0} lam^k m! / (m + k)!`` for ``lam < m + 1`` (terms shrink)."""
    t = 1.0
    s = 1.0
    k = 1.0
    while True:
        t *= lam / (m + k)
        s += t
        if t < s * _TOL:
            break
        k += 1.0
    return math.log(s)


@numba.njit(cache=True)
def _logaddexp(x, y):
    if x == -np.inf:
        return y
    if y == -np.inf:
        return x
    if x > y:
        return x + math.log1p(math.exp(y - x))
    return y + math.log1p(math.exp(x - y))


@numba.njit(cache=True)
def _conv_logp_dmu(z, mu, a, logc):
    """``(log p(z), d log p(z) / d mu)`` for ``sum_y Pois(y; mu) c exp(-a |z - y|)``.

    See the module docstring. ``n = floor(z)`` stays a float (numba's ``math.floor`` returns
    an int64, which wraps beyond 2**63). The derivative is analytic (module docstring,
    *Gradient*), so it needs no evaluation at ``z - 1``, which float64 cannot represent once
    ``|z| > 2**53``.
    """
    if not (mu >= 0.0) or math.isnan(z) or not math.isfinite(mu):
        return np.nan, np.nan
    if not math.isfinite(z):  # every term e^{-a |z - y|} is 0 at z = +-inf
        return -np.inf, 0.0
    n = np.floor(z)
    lam1 = mu * math.exp(a)
    lam2 = mu * math.exp(-a)
    # y <= n: l1 = log S1 and r1 = log(Pois(n; mu) e^{-a(z - n)} / S1)
    if n < 0.0:
        l1 = -np.inf
        r1 = -np.inf
    elif lam1 >= n + 1.0:
        rev = _log_rev_sum(n, lam1)
        l1 = _log_pois(n, mu) - a * (z - n) + rev
        r1 = -rev
    else:
        p_tail = math.exp(_log_pois(n + 1.0, lam1) + _log_fwd_sum(n + 1.0, lam1))
        l1 = mu * math.expm1(a) - a * z + math.log1p(-p_tail)
        r1 = _log_pois(n, lam1) - math.log1p(-p_tail)
    # y >= m: l2 = log S2 and r2 = log(Pois(m - 1; mu) e^{-a(m - 1 - z)} / S2)
    m = max(n + 1.0, 0.0)
    if m == 0.0:
        l2 = mu * math.expm1(-a) + a * z
        r2 = -np.inf
    elif lam2 < m + 1.0:
        fwd = _log_fwd_sum(m, lam2)
        l2 = _log_pois(m, mu) - a * (m - z) + fwd
        r2 = math.log(m) - math.log(lam2) - fwd if lam2 > 0.0 else np.inf
    else:
        q_tail = math.exp(_log_pois(m - 1.0, lam2) + _log_rev_sum(m - 1.0, lam2))
        l2 = mu * math.expm1(-a) + a * z + math.log1p(-q_tail)
        r2 = _log_pois(m - 1.0, lam2) - math.log1p(-q_tail)
    lse = _logaddexp(l1, l2)
    # d l1/d mu = expm1(a) - e^{a + r1};  d l2/d mu = expm1(-a) + e^{-a + r2}
    d = 0.0
    if l1 > -np.inf:
        d += math.exp(l1 - lse) * (math.expm1(a) - math.exp(a + r1))
    if l2 > -np.inf:
        d += math.exp(l2 - lse) * math.expm1(-a)
    if m > 0.0:
        if l2 > -np.inf and r2 < np.inf:
            d += math.exp(l2 - lse - a + r2)
        else:  # S2 = 0 (mu = 0) or lam2 underflowed: the boundary term directly
            d += math.exp(-a + _log_pois(m - 1.0, mu) + a * (z - (m - 1.0)) - lse)
    return logc + lse, d


@numba.njit(cache=True)
def _conv_logp(z, mu, a, logc):
    """log of ``sum_y Pois(y; mu) c exp(-a |z - y|)``; see the module docstring."""
    return _conv_logp_dmu(z, mu, a, logc)[0]


@numba.njit(cache=True)
def _use_neighbour(z, a, lp):
    """Whether ``expm1(log p(z - 1) - log p(z))`` is the more accurate derivative.

    Its rounding error is about ``eps |log p|``; the analytic form's is about ``eps e^a``
    (its two branch terms cancel when ``E[Y | z]`` is close to ``mu``). Beyond ``2**52``,
    ``z - 1`` is not representable and only the analytic form is right.
    """
    return abs(z) < 2.0**52 and math.exp(a) > max(abs(lp), 1.0)


@numba.njit(cache=True)
def _table_applies(z, mu):
    """Shared rate and integer values spanning fewer points than there are records."""
    n = z.shape[0]
    if n < 64:
        return False
    zmin = z[0]
    zmax = z[0]
    for i in range(n):
        if mu[i] != mu[0] or not abs(z[i]) < 2.0**52 or z[i] != np.floor(z[i]):
            return False
        zmin = min(zmin, z[i])
        zmax = max(zmax, z[i])
    return zmax - zmin + 2.0 <= n


@numba.njit(cache=True)
def _one_logp_dmu(z, mu, k, short):
    """``(log p(z), d/dmu)`` at one point: the short sums inside their domain, else the
    general kernel with the more accurate of its two derivative forms."""
    a, logc = k[0], k[1]
    if short and in_domain(z, mu, k[2]):
        return short_sum_kernel(z, mu, k)
    lp, d = _conv_logp_dmu(z, mu, a, logc)
    if _use_neighbour(z, a, lp):
        d = math.expm1(_conv_logp(z - 1.0, mu, a, logc) - lp)
    return lp, d


@numba.njit(cache=True)
def _conv_logp_and_dmu(z, mu, a, logc, out, dout):
    short = a <= A_MAX
    k = noise_constants(a, logc)
    if _table_applies(z, mu):
        # one evaluation per integer in [min z - 1, max z]; d/dmu reuses the neighbour
        # (the short sums give it in their own pass: the same numbers as record by record)
        zmin = np.min(z)
        size = int(np.max(z) - zmin) + 1
        table = np.empty(size + 1)
        dtable = np.empty(size + 1)
        for j in range(size + 1):
            table[j], dtable[j] = _conv_logp_dmu(zmin - 1.0 + j, mu[0], a, logc)
        for j in range(size, 0, -1):  # downwards: table[j - 1] is still the general value
            zj = zmin - 1.0 + j
            if short and in_domain(zj, mu[0], k[2]):
                table[j], dtable[j] = short_sum_kernel(zj, mu[0], k)
            elif _use_neighbour(zj, a, table[j]):
                dtable[j] = math.expm1(table[j - 1] - table[j])
        for i in range(z.shape[0]):
            j = int(z[i] - zmin) + 1
            out[i] = table[j]
            dout[i] = dtable[j]
        return
    _per_count(z, mu, k, out, dout)


@numba.njit(cache=True, error_model="numpy")
def _per_count(z, mu, k, out, dout):
    """Every count with its own rate: the counts grouped by ``floor(z)``, each group inside the
    short-sum z range in lockstep (:func:`~pymc_dp.math.poisson_noise.short_sum_group`) in
    chunks copied into small buffers, the rest, and rates outside the short-sum domain, one by
    one (:func:`_one_logp_dmu`). The same numbers as :func:`_one_logp_dmu` everywhere.

    Temporary memory is one index per count plus a few chunks: copies of all rates in group
    order were 10% faster when the allocator reused memory, but 2.5x slower when it handed
    back the pages each call (about 1000 page faults per call at 10^5 counts).
    """
    short = k[0] <= A_MAX
    order, starts = group_by_floor(z, short)
    for p in range(starts[0], starts[2]):  # outside the z range, or z < 0
        i = order[p]
        out[i], dout[i] = _one_logp_dmu(z[i], mu[i], k, short)
    w = work_arrays(_CHUNK)
    zc, muc, lpc, dlpc = np.empty(_CHUNK), np.empty(_CHUNK), np.empty(_CHUNK), np.empty(_CHUNK)
    for n in range(N_GROUPS - 2):
        for c in range(starts[n + 2], starts[n + 3], _CHUNK):
            idx = order[c : min(c + _CHUNK, starts[n + 3])]
            size = idx.shape[0]
            for q in range(size):
                zc[q] = z[idx[q]]
                muc[q] = mu[idx[q]]
            if short_sum_group(n, (zc[:size], muc[:size], lpc[:size], dlpc[:size]), k, w):
                for q in range(size):  # rates outside the short-sum domain (rare)
                    if not in_domain(zc[q], muc[q], k[2]):
                        lpc[q], dlpc[q] = _one_logp_dmu(zc[q], muc[q], k, short)
            for q in range(size):
                out[idx[q]] = lpc[q]
                dout[idx[q]] = dlpc[q]


def poisson_two_sided_exp_logp_numpy(z, mu, a, logc):
    """Numpy evaluation of the marginal and of its derivative in ``mu``.

    Parameters
    ----------
    z, mu : array_like
        Observed noisy values and Poisson rates (broadcast together).
    a, logc : float
        Noise decay rate and log normalising constant: ``eta(t) = exp(logc - a |t|)``.

    Returns
    -------
    logp, dlogp_dmu : ndarray

    Examples
    --------
    Poisson(3) with geometric noise ``alpha = e^{-1}``, checked against a brute-force sum:

    >>> import numpy as np
    >>> from scipy import stats
    >>> a = 1.0; logc = np.log(np.tanh(a / 2))
    >>> lp, _ = poisson_two_sided_exp_logp_numpy(np.array([-2.0, 4.0]), 3.0, a, logc)
    >>> y = np.arange(200)
    >>> ref = [np.logaddexp.reduce(stats.poisson.logpmf(y, 3.0) + logc - a * np.abs(z - y))
    ...        for z in (-2.0, 4.0)]
    >>> np.allclose(lp, ref, rtol=1e-13)
    True
    """
    z, mu = np.broadcast_arrays(np.asarray(z, np.float64), np.asarray(mu, np.float64))
    shape = z.shape
    out = np.empty(z.size)
    dout = np.empty(z.size)
    _conv_logp_and_dmu(
        np.ascontiguousarray(z).ravel(),
        np.ascontiguousarray(mu).ravel(),
        float(a),
        float(logc),
        out,
        dout,
    )
    return out.reshape(shape), dout.reshape(shape)


class PoissonTwoSidedExpLogp(Op):
    """Elementwise ``(log p(z), d log p / d mu)`` on 1-d inputs ``z``, ``mu`` of equal length.

    ``a`` and ``logc`` (the noise law ``exp(logc - a |t|)``) are fixed Op properties. The second
    output is the gradient used by :meth:`pullback`; it is not itself differentiable.
    """

    __props__ = ("a", "logc")

    def __init__(self, a: float, logc: float):
        self.a = float(a)
        self.logc = float(logc)
        super().__init__()

    def make_node(self, z, mu):
        z = pt.as_tensor_variable(z).astype("float64")
        mu = pt.as_tensor_variable(mu).astype("float64")
        if z.ndim != 1 or mu.ndim != 1:
            raise TypeError("PoissonTwoSidedExpLogp takes 1-d inputs")
        return Apply(self, [z, mu], [z.type(), z.type()])

    def perform(self, node, inputs, output_storage):
        z, mu = inputs
        out = np.empty(z.shape[0])
        dout = np.empty(z.shape[0])
        _conv_logp_and_dmu(
            np.ascontiguousarray(z), np.ascontiguousarray(mu), self.a, self.logc, out, dout
        )
        output_storage[0][0] = out
        output_storage[1][0] = dout

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0], input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        z, _mu = inputs
        g_lp, g_d = cotangents
        if not isinstance(g_d.type, DisconnectedType):
            raise NotImplementedError("the derivative output of PoissonTwoSidedExpLogp is final")
        if isinstance(g_lp.type, DisconnectedType):
            return [DisconnectedType()(), DisconnectedType()()]
        return [
            grad_undefined(self, 0, z, "the marginal is not differentiated in the observation"),
            g_lp * outputs[1],
        ]


def _numba_funcify_poisson_two_sided(op, node, **kwargs):
    a = op.a
    logc = op.logc

    @numba.njit
    def impl(z, mu):
        out = np.empty(z.shape[0])
        dout = np.empty(z.shape[0])
        _conv_logp_and_dmu(np.ascontiguousarray(z), np.ascontiguousarray(mu), a, logc, out, dout)
        return out, dout

    return impl, (_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    register_funcify_default_op_cache_key(PoissonTwoSidedExpLogp)(_numba_funcify_poisson_two_sided)


def poisson_two_sided_exp_logp(value, mu, a: float, logc: float):
    """PyTensor graph of the exact marginal (any shapes; broadcast like an elementwise op).

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> mu = pt.dvector("mu")
    >>> lp = poisson_two_sided_exp_logp(pt.as_tensor(np.array([0.0, 5.0])), mu, 1.0, -0.8)
    >>> lp.eval({mu: np.array([1.0, 1.0])}).round(4)
    array([-1.4321, -4.1361])
    """
    value = pt.as_tensor_variable(value)
    mu = pt.as_tensor_variable(mu)
    z_b, mu_b = pt.broadcast_arrays(value.astype("float64"), mu.astype("float64"))
    shape = z_b.shape
    lp, _ = PoissonTwoSidedExpLogp(a, logc)(z_b.ravel(), mu_b.ravel())
    return lp.reshape(shape)
