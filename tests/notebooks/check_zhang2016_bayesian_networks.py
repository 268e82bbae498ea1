"""Headline check of notebooks/zhang2016_bayesian_networks.md (tests/test_notebooks.py).

The Fourier checks are exact; the Fig. 2 checks are t tests over paired repeats at a
two-sided rate of 1e-6.

Each statistical assertion has a false-alarm rate of about 1e-6 (see tests/test_notebooks.py):
4.89 standard errors (MCMC central limit theorem with ArviZ's MCSE, or the central limit theorem
for a mean over independent repeats), or the exact binomial band. Each has a negative control
that the same check rejects.
"""

import math

from nbrun import binomial_band, within
from scipy import stats

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


def _check_fourier(h: dict) -> None:
    """Alg. 2: exact sensitivity 2d = 32 (Corollary 2's |N_I| = 34 bounds it), the guarantee
    from the mechanism, and consistent tables (exact: gap 0 up to rounding); the same check on
    Alg. 1's independently noised tables finds them inconsistent (negative control)."""
    assert h["fourier_epsilon"] == 1.0
    assert h["fourier_sensitivity"] == 32.0
    assert h["fourier_gap"] < 1e-9
    assert not h["alg1_gap"] < 1e-9  # negative control


def _check_fig2(h: dict) -> None:
    """Fig. 2: the sampler's excess MSE grows once the ball binds (b = 100 against b = 1, paired
    over repeats; t test with repeats - 1 degrees of freedom at two-sided rate 1e-6). Negative
    control: between b = 1 and b = 5 (the ball does not bind) the same test finds no change.
    Epsilon of one draw falls with b (exact formula (1 + 10/sqrt(b))^2 / sigma^2)."""
    crit = stats.t.isf(5e-7, h["reg_repeats"] - 1)
    mean, se = h["reg_trend"]
    assert mean > crit * se
    mean, se = h["reg_control"]
    assert not abs(mean) > crit * se  # negative control: no trend where the ball is slack
    for b, eps in zip(h["reg_b"], h["reg_epsilon"], strict=True):
        assert math.isclose(eps, (1 + 10 / math.sqrt(b)) ** 2 / 0.3**2, rel_tol=1e-9)
    assert h["reg_epsilon"][0] > h["reg_epsilon"][-1]


def check(h: dict) -> None:
    """Privacy costs from the accounting, the exact-posterior check, Fig. 1 and Alg. 3."""
    assert h["epsilon_spent_small"] == h["eps_small"] == 0.5
    assert h["laplace_scale_small"] == 2 * 2 / h["eps_small"]  # Lemma 1: 2|I| / epsilon, |I| = 2
    assert h["epsilon_spent_na"] == h["eps_na"] == 10.0
    assert h["map_epsilon"] == 1.0
    _check_exact_posterior(h)
    _check_fig1(h)
    _check_private_map(h)
    _check_fourier(h)
    _check_fig2(h)
