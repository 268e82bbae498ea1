"""Headline check of notebooks/zhang2016_bayesian_networks.md (tests/test_notebooks.py).

Each statistical assertion has a false-alarm rate of about 1e-6 (see tests/test_notebooks.py):
4.89 standard errors (MCMC central limit theorem with ArviZ's MCSE, or the central limit theorem
for a mean over independent repeats), or the exact binomial band. Each has a negative control
that the same check rejects.
"""

import math

from nbrun import binomial_band, within

__all__ = ["check"]


def _check_exact_posterior(h: dict) -> None:
    """Noise-aware MCMC mean and sd match the exact (enumerated) posterior; plug-in sd does not."""
    for k, (exact_mean, exact_sd) in h["exact"].items():
        mean, sd = h["aware"][k]
        mcse_mean, mcse_sd = h["mcse"][k]
        assert within(mean, exact_mean, mcse_mean), k
        assert within(sd, exact_sd, mcse_sd), k
        assert not within(h["plugin"][k][1], exact_sd, mcse_sd), k  # negative control


def _check_fig1(h: dict) -> None:
    """Fig. 1 trend: the non-private accuracy does not depend on epsilon (exact reference 0 for
    the difference between the largest and smallest epsilon); the plug-in's does (rejected)."""
    for method, flat in (("non-private", True), ("plug-in (Alg. 1)", False)):
        mean, se = h["fig1_mean"][method], h["fig1_se"][method]
        diff = mean[-1] - mean[0]
        assert within(diff, 0.0, math.hypot(se[-1], se[0])) is flat, method
    assert h["fig1_mean"]["plug-in (Alg. 1)"][-1] > h["fig1_mean"]["plug-in (Alg. 1)"][0]


def _check_private_map(h: dict) -> None:
    """Alg. 3 selects its most probable candidate at the exact rate; at eps/Delta it would not."""
    lo, hi = binomial_band(h["map_runs"], h["map_p_top"])
    assert lo <= h["map_freq_top"] <= hi
    lo, hi = binomial_band(h["map_runs"], h["map_p_top_wrong_scale"])
    assert not lo <= h["map_freq_top"] <= hi  # negative control: twice too sharp


def check(h: dict) -> None:
    """Privacy costs from the accounting, the exact-posterior check, Fig. 1 and Alg. 3."""
    assert h["epsilon_spent_small"] == h["eps_small"] == 0.5
    assert h["laplace_scale_small"] == 2 * 2 / h["eps_small"]  # Lemma 1: 2|I| / epsilon, |I| = 2
    assert h["epsilon_spent_na"] == h["eps_na"] == 10.0
    assert h["map_epsilon"] == 1.0
    _check_exact_posterior(h)
    _check_fig1(h)
    _check_private_map(h)
