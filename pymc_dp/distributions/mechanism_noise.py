"""The noise law of each built-in mechanism as a PyMC distribution (the registry's entries).

Mechanisms do not import distributions (they sit below them): :meth:`Mechanism.noise_dist`
looks its factory up in the registry of :func:`pymc_dp.mechanisms.base.register_noise_dist`,
and this module fills it when ``pymc_dp.distributions`` (so ``pymc_dp``) is imported:

========================  ================================================
mechanism                 ``noise_dist(**kwargs)``
========================  ================================================
``Laplace``               ``pm.Laplace.dist(0, scale)``
``Gaussian``              ``pm.Normal.dist(0, sigma)``
``Geometric``             ``DiscreteLaplace.dist(log_alpha=log_alpha)``
``DiscreteGaussian``      ``DiscreteNormal.dist(sigma)``
========================  ================================================

All parameters are float64 constants (a float literal exact in float32 would otherwise become a
float32 constant). ``kwargs`` (``size``, ``rng``, ...) go to ``.dist``.

Examples
--------
>>> import numpy as np, pymc as pm
>>> import pymc_dp as pmdp
>>> noise = pmdp.Geometric(epsilon=1.0).noise_dist(size=2)
>>> pm.draw(noise, random_seed=1).dtype
dtype('int64')
>>> bool(np.isclose(pm.logp(pmdp.Laplace(scale=2.0).noise_dist(), 0.0).eval(), np.log(0.25)))
True
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
from pymc_dp.distributions.discrete_normal import DiscreteNormal
from pymc_dp.mechanisms.base import register_noise_dist
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

__all__ = ["discrete_gaussian_noise", "gaussian_noise", "geometric_noise", "laplace_noise"]


def laplace_noise(mechanism: Laplace, **kwargs):
    """``pm.Laplace.dist(0, b)`` with float64 constants."""
    return pm.Laplace.dist(mu=np.float64(0.0), b=np.float64(mechanism.scale), **kwargs)


def gaussian_noise(mechanism: Gaussian, **kwargs):
    """``pm.Normal.dist(0, sigma)`` with float64 constants."""
    return pm.Normal.dist(mu=np.float64(0.0), sigma=np.float64(mechanism.sigma), **kwargs)


def geometric_noise(mechanism: Geometric, **kwargs):
    """``DiscreteLaplace.dist(log_alpha=-rate)`` of the sampled rate (float64; not the rounded
    ``alpha``, which misstates the law when ``alpha`` is close to 1)."""
    return DiscreteLaplace.dist(log_alpha=np.float64(mechanism.log_alpha), **kwargs)


def discrete_gaussian_noise(mechanism: DiscreteGaussian, **kwargs):
    """``DiscreteNormal.dist(sigma)`` of the sampled variance (float64)."""
    return DiscreteNormal.dist(np.float64(mechanism.sigma), **kwargs)


register_noise_dist(Laplace, laplace_noise)
register_noise_dist(Gaussian, gaussian_noise)
register_noise_dist(Geometric, geometric_noise)
register_noise_dist(DiscreteGaussian, discrete_gaussian_noise)
