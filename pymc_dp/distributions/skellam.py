r"""Skellam distribution: the difference of two independent Poisson counts.

If :math:`Y_1 \sim \mathrm{Poisson}(\mu_1)` and :math:`Y_2 \sim \mathrm{Poisson}(\mu_2)` are
independent, :math:`K = Y_1 - Y_2` has the Skellam law (Schein et al. 2019, eq. 11)

.. math:: \log P(K = k) = -(\mu_1 + \mu_2) + \tfrac{k}{2}\log\frac{\mu_1}{\mu_2}
          + \log I_{|k|}\big(2\sqrt{\mu_1\mu_2}\big), \qquad k \in \mathbb{Z}.

Numerics (derivations)
----------------------
By the symmetry :math:`P(k; \mu_1, \mu_2) = P(-k; \mu_2, \mu_1)` we take :math:`k \ge 0`.
Write :math:`x = 2\sqrt{\mu_1\mu_2}`.

* :math:`k < N_0 = 20`: exactly
  :math:`-(\mu_1+\mu_2) + x = -(\mu_1-\mu_2)^2 / (\sqrt{\mu_1}+\sqrt{\mu_2})^2`, so
  :math:`\log P = -(\mu_1-\mu_2)^2/(\sqrt{\mu_1}+\sqrt{\mu_2})^2
  + \tfrac{k}{2}(\log\mu_1 - \log\mu_2) + \log(I_k(x) e^{-x})`, with the exponentially scaled
  :func:`pymc_dp.math.bessel.log_ive` (no :math:`e^{x}` overflow, no cancellation of
  :math:`\mu_1 + \mu_2` against :math:`x`).
* :math:`k \ge N_0`: insert the uniform (Debye) expansion of :math:`\log I_k(kz)` (A&S 9.7.7),
  :math:`z = x/k`, :math:`s = \sqrt{1+z^2}`. With :math:`m_i = \mu_i / k` all terms of order
  :math:`k` combine into :math:`k f` with

  .. math:: f = s - m_1 - m_2 + \log\frac{2 m_1}{1+s},

  (because :math:`\tfrac12\log(m_1/m_2) + \log z = \log(2 m_1)`), and
  :math:`\log P = k f - \tfrac12\log(2\pi k) - \tfrac14\log(1+z^2) + \log(1 + \sum_j u_j(t)/k^j)`.
  Near the mode :math:`k \approx \mu_1 - \mu_2`, :math:`f` is :math:`O(d^2)` with
  :math:`d = m_1 - m_2 - 1` while its two parts are :math:`O(d)`; evaluated naively this loses
  :math:`\epsilon\,(\mu_1 + \mu_2)` absolutely. For :math:`|d| \le 1/2` we use the exact
  rearrangement (from :math:`s^2 = 1 + 4 m_1 m_2` and :math:`1 - (m_1-m_2)^2 = -d(d+2)`):
  :math:`A = s - m_1 - m_2 = (1 - \delta)(1 + \delta)/(s + m_1 + m_2)` with
  :math:`\delta = m_1 - m_2 = (\mu_1 - \mu_2)/k` (always used: it avoids the cancellation of
  :math:`s` against :math:`m_1 + m_2` when both are large), :math:`u = (d - A)/(1+s)`
  (so that :math:`1 + u = 2m_1/(1+s)`, i.e. :math:`f = A + \operatorname{log1p}(u)`), and

  .. math:: f = -\frac{4 m_1 m_2 d^2 (d+2)}{(1+s)(s+m_1+m_2)(m_1+m_2+(m_1-m_2)s)}
            + \operatorname{log1pmx}(u),

  where :math:`\operatorname{log1pmx}(u) = \log(1+u) - u`; every factor is positive for
  :math:`|d| \le 1/2`. For :math:`\mu_2 \to 0` this reduces to the Poisson "bd0" form
  :math:`f = \log m_1 - (m_1 - 1)`.

Gradients: with :math:`r = I_{|k|+1}(x)/I_{|k|}(x)` (:func:`pymc_dp.math.bessel.iv_ratio`),

.. math:: \partial_{\mu_1}\log P = -1 + \frac{k_+}{\mu_1} + \sqrt{\mu_2/\mu_1}\, r, \qquad
          \partial_{\mu_2}\log P = -1 + \frac{k_-}{\mu_2} + \sqrt{\mu_1/\mu_2}\, r,

:math:`k_\pm = \max(\pm k, 0)` (from :math:`\partial_x \log I_\nu = r + \nu/x` and
:math:`\partial_{\mu_1} x = x/(2\mu_1)`). Both are finite for all :math:`\mu_1, \mu_2 > 0`.

The log-CDF is not provided: an exact finite sum is not viable for large rates, and a stable
closed form (e.g. via the non-central chi-square / Marcum Q function) is not implemented.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.scalar import basic as ps
from pytensor.tensor.random.op import RandomVariable

from pymc_dp._cache import SOURCE_INT, lazy_vectorize, numba_registration
from pymc_dp.math.bessel import iv_ratio_scalar_op, log_skellam_kernel
from pymc_dp.math.scalar_op import KernelScalarOp, no_gradient, scalar_elemwise

__all__ = [
    "RATE_MAX",
    "Skellam",
    "SkellamLogPMF",
    "SkellamRV",
    "skellam",
    "skellam_logpmf",
    "skellam_logpmf_scalar",
]

_LOG_2PI = math.log(2.0 * math.pi)

#: Largest Poisson rate the random draws accept. numpy's and numba's Poisson samplers (PTRS,
#: Hoermann 1993) evaluate their acceptance test in float64 on terms of size
#: ``mu log(mu)``; at ``mu = 1e9`` its rounding is below 4e-6 in log-probability, and it grows
#: linearly beyond (at ``1e19`` the draws overflow int64). Larger rates are refused.
RATE_MAX = 1e9


@numba.njit(cache=True)
def skellam_logpmf_scalar(k, mu1, mu2):
    r"""Skellam log-pmf :math:`\log P(K = k)` (numba scalar kernel; NaN outside the support)."""
    k = float(k)
    mu1 = float(mu1)
    mu2 = float(mu2)
    if not (mu1 > 0.0 and mu2 > 0.0 and mu1 < np.inf and mu2 < np.inf):
        return np.nan
    if k != math.floor(k):
        return -np.inf
    if k < 0.0:
        k = -k
        mu1, mu2 = mu2, mu1
    return log_skellam_kernel(k, mu1, mu2)


@lazy_vectorize(
    ["float64(float64, float64, float64)", "float64(int64, float64, float64)"], cache=True
)
def _skellam_logpmf_ufunc(k, mu1, mu2):
    return skellam_logpmf_scalar(k, mu1, mu2)


def skellam_logpmf(k, mu1, mu2):
    """Skellam log-pmf on numpy arrays (broadcasting).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import skellam as sp_skellam
    >>> bool(np.isclose(skellam_logpmf(3, 4.0, 1.5), sp_skellam.logpmf(3, 4.0, 1.5), rtol=1e-13))
    True
    >>> float(skellam_logpmf(100_000, 1e5, 1e-8))  # Poisson(1e5) at its mean
    -6.67540209902...
    """
    # the kernel's results are finite or correctly -inf; LLVM may evaluate a branch that is
    # not taken, whose overflow flag numpy would otherwise report
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        return _skellam_logpmf_ufunc(
            np.asarray(k, dtype=np.float64),
            np.asarray(mu1, dtype=np.float64),
            np.asarray(mu2, dtype=np.float64),
        )


class SkellamLogPMF(KernelScalarOp):
    """Scalar Op ``skellam_logpmf(k, mu1, mu2)`` with gradients in ``mu1`` and ``mu2``."""

    nin = 3
    kernel = staticmethod(skellam_logpmf_scalar)
    cache_version = 4

    def pullback(self, inputs, outputs, output_grads):
        k, mu1, mu2 = inputs
        (gz,) = output_grads
        zero = ps.constant(np.float64(0.0))
        one = ps.constant(np.float64(1.0))
        kf = ps.cast(k, "float64")
        r1 = ps.sqrt(mu1)
        r2 = ps.sqrt(mu2)
        r = iv_ratio_scalar_op(ps.abs(kf), ps.constant(np.float64(2.0)) * r1 * r2)
        d1 = -one + ps.maximum(kf, zero) / mu1 + (r2 / r1) * r
        d2 = -one + ps.maximum(-kf, zero) / mu2 + (r1 / r2) * r
        return [no_gradient(self, 0, k), gz * d1, gz * d2]


skellam_logpmf_scalar_op, skellam_logpmf_pt = scalar_elemwise(SkellamLogPMF, "skellam_logpmf")

_DRAW_CACHE_VERSION = 3


class SkellamRV(RandomVariable):
    """Skellam random variable: ``Poisson(mu1) - Poisson(mu2)``."""

    name = "skellam"
    signature = "(),()->()"
    dtype = "int64"
    _print_name = ("Skellam", "\\operatorname{Skellam}")

    @classmethod
    def rng_fn(cls, rng, mu1, mu2, size):
        for name, mu in (("mu1", mu1), ("mu2", mu2)):
            mu = np.asarray(mu, dtype=np.float64)
            if not np.all((mu > 0.0) & (mu <= RATE_MAX)):
                raise ValueError(
                    f"Skellam draw: {name} must be > 0 and <= {RATE_MAX:g} (the largest rate the "
                    f"Poisson sampler draws exactly), got {mu!r}"
                )
        return rng.poisson(mu1, size=size) - rng.poisson(mu2, size=size)


skellam = SkellamRV()


@numba.njit(cache=True)  # no fastmath: NaN/inf/subnormal tests must hold
def _skellam_draw(rng, mu1, mu2):
    if not (mu1 > 0.0 and mu1 <= RATE_MAX):  # False for NaN
        raise ValueError(
            "Skellam draw: mu1 must be > 0 and <= 1e9 (the largest rate the Poisson sampler "
            "draws exactly); got a NaN, non-positive or larger mu1"
        )
    if not (mu2 > 0.0 and mu2 <= RATE_MAX):
        raise ValueError(
            "Skellam draw: mu2 must be > 0 and <= 1e9 (the largest rate the Poisson sampler "
            "draws exactly); got a NaN, non-positive or larger mu2"
        )
    return rng.poisson(mu1) - rng.poisson(mu2)


def _skellam_numba_core(op, node):
    from pytensor.link.numba.dispatch.basic import numba_njit

    @numba_njit
    def random(rng, mu1, mu2):
        return _skellam_draw(rng, mu1, mu2)

    # the key makes PyTensor's on-disk cache follow this code (SOURCE_KEY: any source change);
    # without one, a stale compiled draw is reused across versions of this module
    return random, (_DRAW_CACHE_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

    numba_core_rv_funcify.register(SkellamRV)(_skellam_numba_core)


class Skellam(pm.Discrete):
    r"""Skellam distribution, the law of :math:`Y_1 - Y_2` for independent Poissons.

    .. math:: P(K = k) = e^{-(\mu_1+\mu_2)} (\mu_1/\mu_2)^{k/2} I_{|k|}(2\sqrt{\mu_1\mu_2})

    Mean :math:`\mu_1 - \mu_2`, variance :math:`\mu_1 + \mu_2`. The log-pmf is accurate to
    about :math:`10^{-13}` relative for :math:`|k|` up to :math:`10^5` and rates from
    :math:`10^{-8}` to :math:`10^6` (see the module docstring for the method), and its gradients
    in ``mu1`` and ``mu2`` are finite everywhere. Random draws are native Numba (difference of
    Poissons), for rates up to :data:`RATE_MAX` ``= 1e9``; larger, NaN or non-positive rates
    raise ``ValueError`` naming the rate. The log-pmf refuses (``ParameterValueError``) NaN,
    infinite or non-positive rates. No ``logcdf``.

    Parameters
    ----------
    mu1, mu2 : tensor_like of float
        Poisson rates, finite and > 0 (``<= 1e9`` for random draws).

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> x = Skellam.dist(mu1=np.float64(3.0), mu2=np.float64(2.0))
    >>> float(pm.logp(x, 1).eval())
    -1.69814...
    """

    rv_op = skellam

    @classmethod
    def dist(cls, mu1, mu2, **kwargs):
        mu1 = pt.as_tensor_variable(mu1)
        mu2 = pt.as_tensor_variable(mu2)
        return super().dist([mu1, mu2], **kwargs)

    def support_point(rv, size, mu1, mu2):
        mode = pt.round(mu1 - mu2).astype("int64")
        if not rv_size_is_none(size):
            mode = pt.full(size, mode)
        return mode

    def logp(value, mu1, mu2):
        res = skellam_logpmf_pt(value, mu1, mu2)
        return check_parameters(
            res,
            mu1 > 0,
            mu2 > 0,
            pt.isfinite(mu1),
            pt.isfinite(mu2),
            msg="mu1 > 0, mu2 > 0, mu1 and mu2 finite",
        )
