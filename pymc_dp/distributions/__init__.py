"""Noise distributions and the wrappers that condition a model on privatized data.

Importing this package registers the noise law of every built-in mechanism
(:mod:`pymc_dp.distributions.mechanism_noise`), which :meth:`pymc_dp.Mechanism.noise_dist`
looks up.
"""

from pymc_dp.distributions import mechanism_noise  # noqa: F401  (registers the noise laws)
from pymc_dp.distributions.markov_chain import MarkovChain

__all__ = ["MarkovChain"]
