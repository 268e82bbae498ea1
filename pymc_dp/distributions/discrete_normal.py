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

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Discrete
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.graph.basic import Variable
from pytensor.link.numba.dispatch.basic import numba_njit
from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.kernels.discrete_gaussian import logcdf_pt, logpmf_pt

__all__ = ["DiscreteNormal", "DiscreteNormalRV", "discrete_normal"]


def _draw_numpy(rng, sigma):
    """One draw (CKS 2020 Algorithm 3 with float uniforms): discrete Laplace proposal with
    scale ``t = floor(sigma) + 1``, accepted with probability
    ``exp(-(|y| - sigma^2/t)^2 / (2 sigma^2))``."""
    t = math.floor(sigma) + 1.0
    p = -math.expm1(-1.0 / t)  # geometric success probability, 1 - exp(-1/t)
    while True:
        y = int(rng.geometric(p)) - int(rng.geometric(p))
        u = abs(y) - sigma * sigma / t
        if rng.random() < math.exp(-u * u / (2.0 * sigma * sigma)):
            return y


class DiscreteNormalRV(RandomVariable):
    """Random variable op of the discrete Gaussian (rejection from a discrete Laplace)."""

    name = "discrete_normal"
    signature = "()->()"
    dtype = "int64"
    _print_name = ("DiscreteNormal", "\\operatorname{DiscreteNormal}")

    @classmethod
    def rng_fn(cls, rng, sigma, size):
        sigma = np.asarray(sigma, dtype=np.float64)
        if not np.all(np.isfinite(sigma) & (sigma > 0.0)):
            raise ValueError(f"DiscreteNormal: sigma must be finite and > 0, got {sigma!r}")
        shape = np.broadcast_shapes(sigma.shape, () if size is None else tuple(size))
        sig = np.broadcast_to(sigma, shape)
        out = np.empty(shape, dtype=np.int64)
        for idx in np.ndindex(shape):  # fallback only; the numba core below is the hot path
            out[idx] = _draw_numpy(rng, float(sig[idx]))
        return out


discrete_normal = DiscreteNormalRV()


@numba_core_rv_funcify.register(DiscreteNormalRV)
def _discrete_normal_numba_core(op, node):
    @numba_njit
    def random(rng, sigma):
        if not (sigma > 0.0 and sigma < math.inf):
            raise ValueError("DiscreteNormal: sigma must be finite and > 0")
        t = math.floor(sigma) + 1.0
        p = -math.expm1(-1.0 / t)
        c = sigma * sigma / t
        while True:
            y = rng.geometric(p) - rng.geometric(p)
            u = abs(y) - c
            if rng.random() < math.exp(-u * u / (2.0 * sigma * sigma)):
                return y

    return random


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
    generator's float uniforms: exact in law up to float rounding, meant for simulation. For real
    releases use the mechanism's exact integer sampler.
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
        safe = pt.maximum(sigma, np.float64(1e-300))  # keep the masked branch finite
        res = logpmf_pt(value, safe)
        return check_parameters(res, sigma > 0, msg="sigma > 0")

    def logcdf(value, sigma):
        safe = pt.maximum(sigma, np.float64(1e-300))
        res = logcdf_pt(value, safe)
        return check_parameters(res, sigma > 0, msg="sigma > 0")
