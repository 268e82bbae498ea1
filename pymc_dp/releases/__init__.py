"""The release side: what a data holder publishes, and what it costs.

* :func:`release_sufficient_statistics` — clamp records to declared bounds, compute a conjugate
  family's sufficient statistics, calibrate a mechanism to their exact sensitivity and release
  them once (Foulds et al. 2016, Sec. 3.2); the returned
  :class:`SufficientStatisticsRelease` gives the plug-in posterior, the noise-aware PyMC model
  and the privacy guarantee.
* :class:`OnePosteriorSample` — One Posterior Sample (Foulds et al. 2016, Sec. 3.1; Wang et al.
  2015): one draw of a tempered posterior, epsilon-DP from a bound on the log-likelihood's
  range; exact draws for truncated Beta-Bernoulli and Dirichlet-categorical, a tempered
  likelihood for a general PyMC model.
* :func:`release_bayes_net_counts` — the count tables of a discrete Bayesian network (Zhang et
  al. 2016, Alg. 1), optionally projected to ``[0, n]``; its release gives the plug-in posterior
  and the noise-aware model; :func:`private_map` is Alg. 3;
  :func:`release_bayes_net_fourier` is Alg. 2 (Laplace noise on the Fourier coefficients,
  consistent tables of a binary network).
* :func:`release_with_noisy_size` — a noisy number of records and a noisy number of successes
  among them (add/remove-one neighbours: the size itself is private); the returned
  :class:`NoisySizeRelease` gives the noise-aware model with the number of records latent.
* :func:`release_hmm_counts` — per-step feature counts of a private HMM (Foulds et al. 2016,
  Sec. 5), with the plug-in Gibbs sampler and the noise-aware PyMC model (:class:`MarkovChain`
  states, sampled by the FFBS step); :func:`hmm_one_posterior_sample` is One Posterior Sample
  of the same HMM (a Gibbs draw of its tempered, truncated posterior; Sec. 4's guarantees).

``project=True`` publishes the noisy statistics clipped to their valid region (Foulds eq. 16,
Zhang step 4); the noise-aware models then condition on them exactly (a censored
:class:`~pymc_dp.distributions.release.Release`).

Neighbouring datasets are replace-one (``n`` public), as in the rest of pymc_dp.
"""

from pymc_dp.releases.bayes_net import (
    BayesNetCountsRelease,
    DiscreteBayesNet,
    bayes_net_count_tables,
    release_bayes_net_counts,
)
from pymc_dp.releases.bayes_net_fourier import (
    BayesNetFourierRelease,
    bayes_net_fourier_coefficients,
    fourier_closure,
    fourier_sensitivity,
    release_bayes_net_fourier,
)
from pymc_dp.releases.bayes_net_map import (
    PrivateMAP,
    map_selection_log_probabilities,
    map_utility_sensitivity,
    private_map,
)
from pymc_dp.releases.hmm import (
    HMMCountsRelease,
    HMMPrior,
    PluginGibbsResult,
    hmm_count_sensitivity,
    hmm_count_table,
    release_hmm_counts,
)
from pymc_dp.releases.hmm_ops import (
    HMMOnePosteriorSample,
    hmm_one_posterior_sample,
    hmm_ops_log_likelihood_range,
    mcmc_sample_guarantee,
    tempered_hmm_gibbs,
)
from pymc_dp.releases.noisy_size import NoisySizeRelease, release_with_noisy_size
from pymc_dp.releases.ops import (
    OnePosteriorSample,
    beta_bernoulli_log_likelihood_range,
    dirichlet_categorical_log_likelihood_range,
    truncated_beta_rvs,
)
from pymc_dp.releases.sufficient import (
    NormalInverseGamma,
    SufficientStatisticsRelease,
    release_sufficient_statistics,
    sufficient_statistic_sensitivity,
)

__all__ = [
    "BayesNetCountsRelease",
    "BayesNetFourierRelease",
    "DiscreteBayesNet",
    "HMMCountsRelease",
    "HMMOnePosteriorSample",
    "HMMPrior",
    "NoisySizeRelease",
    "NormalInverseGamma",
    "OnePosteriorSample",
    "PluginGibbsResult",
    "PrivateMAP",
    "SufficientStatisticsRelease",
    "bayes_net_count_tables",
    "bayes_net_fourier_coefficients",
    "beta_bernoulli_log_likelihood_range",
    "dirichlet_categorical_log_likelihood_range",
    "fourier_closure",
    "fourier_sensitivity",
    "hmm_count_sensitivity",
    "hmm_count_table",
    "hmm_one_posterior_sample",
    "hmm_ops_log_likelihood_range",
    "map_selection_log_probabilities",
    "map_utility_sensitivity",
    "mcmc_sample_guarantee",
    "private_map",
    "release_bayes_net_counts",
    "release_bayes_net_fourier",
    "release_hmm_counts",
    "release_sufficient_statistics",
    "release_with_noisy_size",
    "sufficient_statistic_sensitivity",
    "tempered_hmm_gibbs",
    "truncated_beta_rvs",
]
