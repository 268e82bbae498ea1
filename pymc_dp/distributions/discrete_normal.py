r"""The discrete Gaussian (discrete normal) distribution on the integers, as a PyMC distribution.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> from pymc_dp.distributions.discrete_normal import DiscreteNormal
>>> x = DiscreteNormal.dist(sigma=np.float64(2.0))
>>> round(float(pm.logp(x, 0).eval()), 10)  # -log Z(2)
-1.6120857138
>>> pm.draw(DiscreteNormal.dist(sigma=np.float64(2.0), size=3), random_seed=1).dtype
dtype('int64')
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Discrete
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.graph.basic import Variable
from pytensor.tensor.random.op import RandomVariable

from pymc_dp._cache import SOURCE_INT, numba_registration
from pymc_dp.kernels.discrete_gaussian import logcdf_pt, logpmf_pt

__all__ = ["DRAW_SIGMA_MAX", "DiscreteNormal", "DiscreteNormalRV", "discrete_normal"]


#: Largest ``sigma`` the random draws accept. The discrete-Laplace proposals are differences of
#: float-inversion geometric draws of mean about ``sigma``; up to ``1e9`` they stay far below
#: ``2**53`` (integers exact in float64, rounding of the inversion below 1e-6 in absolute value).
#: Larger ``sigma`` is refused (before, the int64 proposals overflowed and the sampler hung).
DRAW_SIGMA_MAX = 1e9
_DRAW_CACHE_VERSION = 4
_DRAW_POINT_MASS_SIGMA = 0.1
#: below it the log-CDF is the closed form of a law whose mass off 0 is below exp(-200)
_LOGCDF_SMALL_SIGMA = 0.05


@numba.njit(cache=True)  # no fastmath: NaN/inf/subnormal tests must hold
def _draw(rng, sigma):
    """One draw (CKS 2020 Algorithm 3 with float uniforms): discrete Laplace proposal with
    scale ``t = floor(sigma) + 1``, accepted with probability
    ``exp(-((|y| - sigma^2/t) / sigma)^2 / 2)`` (in this form no division by an underflowing
    ``sigma**2``: a subnormal ``sigma`` gives 0 exactly)."""
    if not (sigma > 0.0 and sigma <= DRAW_SIGMA_MAX):  # False for NaN
        raise ValueError(
            "DiscreteNormal draw: sigma must be > 0 and <= 1e9 (DRAW_SIGMA_MAX, the sampler's "
            "exact range); got a NaN, non-positive or larger sigma"
        )
    if sigma <= _DRAW_POINT_MASS_SIGMA:
        # P(K != 0) = 2 exp(-1/(2 sigma^2)) / Z < 4e-22, below the resolution 2**-53 of the
        # float uniforms: the sampler below would return 0 (and subnormal sigma is avoided)
        return 0
    t = math.floor(sigma) + 1.0
    p = -math.expm1(-1.0 / t)  # geometric success probability, 1 - exp(-1/t)
    c = sigma * sigma / t
    while True:
        y = rng.geometric(p) - rng.geometric(p)
        u = (abs(y) - c) / sigma
        if rng.random() < math.exp(-0.5 * u * u):
            return y


@numba.njit(cache=True)  # no fastmath: NaN/inf/subnormal tests must hold
def _draw_flat(rng, sigma, out):
    for i in range(out.size):
        out[i] = _draw(rng, sigma[i])


class DiscreteNormalRV(RandomVariable):
    """Random variable op of the discrete Gaussian (rejection from a discrete Laplace)."""

    name = "discrete_normal"
    signature = "()->()"
    dtype = "int64"
    _print_name = ("DiscreteNormal", "\\operatorname{DiscreteNormal}")

    @classmethod
    def rng_fn(cls, rng, sigma, size):
        sigma = np.asarray(sigma, dtype=np.float64)
        if not np.all((sigma > 0.0) & (sigma <= DRAW_SIGMA_MAX)):
            raise ValueError(
                f"DiscreteNormal draw: sigma must be > 0 and <= {DRAW_SIGMA_MAX:g}, got {sigma!r}"
            )
        shape = np.broadcast_shapes(sigma.shape, () if size is None else tuple(size))
        sig = np.ascontiguousarray(np.broadcast_to(sigma, shape)).ravel()
        out = np.empty(sig.size, dtype=np.int64)
        _draw_flat(rng, sig, out)  # the numba core below is the hot path of pm.draw
        return out.reshape(shape)


discrete_normal = DiscreteNormalRV()


def _discrete_normal_numba_core(op, node):
    from pytensor.link.numba.dispatch.basic import numba_njit

    @numba_njit
    def random(rng, sigma):
        return _draw(rng, sigma)

    # the key makes PyTensor's on-disk cache follow this code (SOURCE_KEY: any source change)
    return random, (_DRAW_CACHE_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

    numba_core_rv_funcify.register(DiscreteNormalRV)(_discrete_normal_numba_core)


class DiscreteNormal(Discrete):
    r"""Discrete Gaussian distribution :math:`\mathcal{N}_{\mathbb{Z}}(0, \sigma^2)`.

    .. math:: p(k \mid \sigma) = \frac{e^{-k^2/(2\sigma^2)}}
              {\sum_{j\in\mathbb{Z}} e^{-j^2/(2\sigma^2)}}, \qquad k \in \mathbb{Z}

    (Canonne, Kamath & Steinke 2020, Definition 1): the noise law of
    :class:`pymc_dp.mechanisms.discrete_gaussian.DiscreteGaussian`. The log normaliser is
    exact to about 1e-16 for every ``sigma > 0`` (direct series below 1, Jacobi-theta dual series
    above; see :mod:`pymc_dp.kernels.discrete_gaussian`). ``logcdf`` sums the upper tail
    directly, or by the Euler-Maclaurin formula for ``sigma >= 10`` near the centre (relative
    error below 1e-12, see the kernel module).

    ========  ==========================================================
    Support   :math:`k \in \mathbb{Z}`
    Mean      0
    Variance  :math:`< \sigma^2` (CKS 2020, Prop. 19)
    ========  ==========================================================

    Parameters
    ----------
    sigma : tensor_like of float
        Scale, ``sigma > 0``.

    Notes
    -----
    Forward draws (``pm.draw``, predictive sampling) use CKS Algorithm 3 with the PyMC random
    generator's float uniforms: exact in law up to float rounding, meant for simulation, for
    ``sigma <= DRAW_SIGMA_MAX = 1e9``. For real releases use the mechanism's exact integer
    sampler. NaN, infinite or non-positive ``sigma`` raises ``ParameterValueError`` in
    ``logp``/``logcdf`` and ``ValueError`` in draws (as does ``sigma > 1e9`` there).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.distributions.discrete_normal import DiscreteNormal
    >>> k = np.arange(-40, 41)
    >>> p = np.exp(pm.logp(DiscreteNormal.dist(sigma=2.0), k).eval())
    >>> round(float(p.sum()), 12), bool(p[40] > p[41] > p[42])
    (1.0, True)
    >>> bool(np.isclose(p[42] / p[40], np.exp(-4 / 8)))  # exp(-k**2 / (2 sigma**2)), k = 2
    True
    """

    rv_op = discrete_normal

    @classmethod
    def dist(cls, sigma, **kwargs):
        if not isinstance(sigma, Variable):  # numbers: float64, never float32 constants
            sigma = np.asarray(sigma, dtype=np.float64)
        sigma = pt.as_tensor_variable(sigma)
        return super().dist([sigma], **kwargs)

    def support_point(rv, size, sigma):
        mode = pt.zeros_like(sigma, dtype="int64")
        if not rv_size_is_none(size):
            mode = pt.full(size, mode)
        return mode

    def logp(value, sigma):
        # keep the masked branch finite; below 1e-300 the law is the point mass at 0 either way
        safe = pt.clip(sigma, np.float64(1e-300), np.float64(1e300))
        res = logpmf_pt(value, safe)
        return check_parameters(res, sigma > 0, pt.isfinite(sigma), msg="sigma > 0, sigma finite")

    def logcdf(value, sigma):
        # sigma < 0.05: the mass off 0 is below exp(-200), and exactly (to relative 1e-80)
        # log F(k) = -k^2/(2 sigma^2) for k < 0 and log F(k) = -exp(-(k+1)^2/(2 sigma^2))
        # for k >= 0 (the upper tail is its first term); written with k/sigma so that a tiny
        # sigma gives -inf and -0.0, never 0/0
        k = pt.floor(pt.as_tensor_variable(value)).astype("float64")
        s_small = pt.clip(sigma, np.float64(5e-324), np.float64(_LOGCDF_SMALL_SIGMA))
        z_neg = k / s_small
        z_pos = (k + np.float64(1.0)) / s_small
        small = pt.switch(
            pt.lt(k, np.float64(0.0)),
            np.float64(-0.5) * z_neg * z_neg,
            -pt.exp(np.float64(-0.5) * z_pos * z_pos),
        )
        big = logcdf_pt(value, pt.clip(sigma, np.float64(_LOGCDF_SMALL_SIGMA), np.float64(1e300)))
        res = pt.switch(pt.lt(sigma, np.float64(_LOGCDF_SMALL_SIGMA)), small, big)
        return check_parameters(res, sigma > 0, pt.isfinite(sigma), msg="sigma > 0, sigma finite")
