"""pymc_dp: Bayesian inference from differentially private releases, as a PyMC extension.

Write a PyMC model of the *true* data, declare what was released and through which mechanism,
and call ``pm.sample()``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (imported on first use)
_PUBLIC = {
    "Mechanism": "pymc_dp.mechanisms.base",
    "PrivacyGuarantee": "pymc_dp.mechanisms.base",
    "Laplace": "pymc_dp.mechanisms.laplace",
    "Geometric": "pymc_dp.mechanisms.geometric",
    "Gaussian": "pymc_dp.mechanisms.gaussian",
    "DiscreteGaussian": "pymc_dp.mechanisms.discrete_gaussian",
    "Skellam": "pymc_dp.distributions.skellam",
    "Bessel": "pymc_dp.distributions.bessel",
    "DiscreteLaplace": "pymc_dp.distributions.discrete_laplace",
    "DiscreteNormal": "pymc_dp.distributions.discrete_normal",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'pymc_dp' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
