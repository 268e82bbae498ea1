"""pymc_dp: Bayesian inference from differentially private releases, as a PyMC extension.

Write a PyMC model of the *true* data, declare what was released and through which mechanism,
and call ``pm.sample()``:

* mechanisms describe (and can make) a release: :class:`Laplace`, :class:`Geometric`,
  :class:`Gaussian`, :class:`DiscreteGaussian`;
* :class:`Privatized` wraps a base distribution whose every value was released with noise, and
  integrates the true value out exactly;
* :class:`Release` conditions latent records on a released statistic of them; ``pm.sample`` then
  picks the :class:`DataAugmentation` step for the records (Ju, Awan, Gong & Rao 2022), or
  :class:`CollapsedRecords` when exchangeable records enter only through their sum (their
  statistic is drawn exactly instead, at a cost that does not grow with their number);
* with ``marginalize=False``, the Poisson true counts behind a :class:`Geometric` release get
  the :class:`CountAugmentation` Gibbs step (Schein et al. 2019), and the Gamma factors of a
  rate ``theta @ phi`` the :class:`PoissonFactorGibbs` step (allocation of the counts);
* the release side: :func:`release_sufficient_statistics` clamps data, releases a conjugate
  family's sufficient statistics through a mechanism and returns the plug-in posterior and the
  noise-aware model; :class:`OnePosteriorSample` (Foulds et al. 2016);
* :class:`MarkovChain` is the latent state chain of a hidden Markov model; ``pm.sample`` gives it
  the :class:`FFBS` step (forward filtering, backward sampling of every chain's whole path);
* noise distributions :class:`Skellam`, :class:`DiscreteLaplace`, :class:`DiscreteNormal`,
  :class:`Bessel` are ordinary PyMC distributions.

Importing the package registers its step methods with PyMC once (idempotently); their
competence claims only variables that feed a pymc_dp node, so ordinary models sample as before.
"""

from pymc_dp.accounting import compose, zcdp_to_approx_dp
from pymc_dp.diagnostics import install_convergence_hook, plot_release_ppc, statistic_trace
from pymc_dp.distributions.bessel import Bessel
from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
from pymc_dp.distributions.discrete_normal import DiscreteNormal
from pymc_dp.distributions.marginals import register_marginal, registered_marginals
from pymc_dp.distributions.markov_chain import MarkovChain
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.distributions.release import Release
from pymc_dp.distributions.sensitivity import SensitivityProofWarning, prove_sensitivity
from pymc_dp.distributions.skellam import Skellam
from pymc_dp.log_likelihood import (
    compute_log_likelihood,
    install_pymc_hook,
    stack_log_likelihood,
)
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.discretized import Discretized
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.privacy import (
    ParallelGroup,
    PrivacyReport,
    attach_privacy,
    install_privacy_hook,
    privacy_report,
)
from pymc_dp.releases import (
    OnePosteriorSample,
    SufficientStatisticsRelease,
    release_sufficient_statistics,
    sufficient_statistic_sensitivity,
)
from pymc_dp.step_methods import (
    CONJUGATE_STEPS,
    FFBS,
    CollapsedNaiveBayes,
    CollapsedRecords,
    ConjugateGibbs,
    CountAugmentation,
    DataAugmentation,
    Interweave,
    NoisySizeGibbs,
    PoissonFactorGibbs,
    register_step_methods,
)
from pymc_dp.step_methods.interweave import install_interweave_hook

__version__ = "0.1.0"

__all__ = [
    "CONJUGATE_STEPS",
    "FFBS",
    "Bessel",
    "CollapsedNaiveBayes",
    "CollapsedRecords",
    "ConjugateGibbs",
    "CountAugmentation",
    "DataAugmentation",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DiscreteNormal",
    "Discretized",
    "Gaussian",
    "Geometric",
    "Interweave",
    "Laplace",
    "MarkovChain",
    "Mechanism",
    "NoisySizeGibbs",
    "OnePosteriorSample",
    "ParallelGroup",
    "PoissonFactorGibbs",
    "PrivacyGuarantee",
    "PrivacyReport",
    "Privatized",
    "Release",
    "SensitivityProofWarning",
    "Skellam",
    "SufficientStatisticsRelease",
    "__version__",
    "attach_privacy",
    "compose",
    "compute_log_likelihood",
    "plot_release_ppc",
    "privacy_report",
    "prove_sensitivity",
    "register_marginal",
    "register_step_methods",
    "registered_marginals",
    "release_sufficient_statistics",
    "stack_log_likelihood",
    "statistic_trace",
    "sufficient_statistic_sensitivity",
    "zcdp_to_approx_dp",
]

register_step_methods()

# pmdp.interop.from_opendp (OpenDP itself is imported on the first call, not here), and the
# JAX implementations of pymc_dp's Ops, registered when PyTensor's JAX backend is first imported
# (pm.sample(nuts_sampler="numpyro" / "blackjax"), mode="JAX"); this import does not import jax
from pymc_dp import interop  # noqa: E402, F401
from pymc_dp import jax as _jax_backend  # noqa: E402, F401

install_pymc_hook()
install_convergence_hook()
install_interweave_hook()
install_privacy_hook()
