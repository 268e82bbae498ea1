"""Headline check of notebooks/why_dp_noise_matters.md (called by tests/test_notebooks.py).

Each assertion has a false-alarm rate of about 1e-6 (see tests/test_notebooks.py); the seven
statistical ones below together stay under 7e-6 (union bound).
"""

from nbrun import binomial_band, within

__all__ = ["check"]


def check(h: dict) -> None:
    """Noise-aware 90% intervals cover 90% (binomial band, 1e-6); the naive ones do not.

    Also: NUTS on each model matches that model's exact posterior mean (4.89 MCSE), and the naive
    sampler's mean is rejected against the noise-aware exact mean (negative control). Section 3:
    the step ``pm.sample`` picks for the released total (CollapsedRecords) matches the exact
    posterior mean and standard deviation of ``p`` (4.89 MCSE each, 1e-6 each); the naive
    posterior's standard deviation is rejected by the same check (negative control).
    """
    lo, hi = binomial_band(h["replicates"], 0.9)
    assert lo <= h["coverage_aware"] <= hi
    assert not lo <= h["coverage_naive"] <= hi
    assert within(h["aware_mcmc_mean"], h["exact_aware_mean"], h["aware_mcse_mean"])
    assert within(h["naive_mcmc_mean"], h["exact_naive_mean"], h["naive_mcse_mean"])
    assert not within(h["naive_mcmc_mean"], h["exact_aware_mean"], h["naive_mcse_mean"])
    assert h["epsilon_total_section3"] == 0.1
    assert within(h["p_mcmc_mean"], h["p_exact_mean"], h["p_mcse_mean"])
    assert within(h["p_mcmc_sd"], h["p_exact_sd"], h["p_mcse_sd"])
    assert not within(h["p_naive_sd"], h["p_exact_sd"], h["p_mcse_sd"])
