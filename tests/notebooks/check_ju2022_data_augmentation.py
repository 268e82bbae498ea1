"""Headline check of notebooks/ju2022_data_augmentation.md (called by tests/test_notebooks.py).

False-alarm rates (stated per group; the whole file is below about 2.2e-5):

* calibration coverage: 5 epsilons x 5 classes, each checked with the exact binomial band at rate
  4e-8, so 1e-6 in all (union bound; the classes of one replicate are dependent, the bound does
  not need independence);
* the data-augmentation sampler's (the paper's, built explicitly) posterior mean of each p_i
  against the exact noise-aware mean: 4.89 MCSE each (1e-6), 5 classes, 5e-6;
* the same for the step a plain ``pm.sample()`` picks (CollapsedRecords): 5e-6;
* the privacy accounting: exact equalities;
* the data-augmentation acceptance bound of Ju et al. (smallest acceptance probability over all
  sweeps at least exp(-epsilon)): deterministic, no false alarm; it is not vacuous, since the
  smallest acceptance probability at epsilon = 0.1 is below 1.

* acceptance across epsilon (section 3): the smallest record acceptance probability of each
  epsilon at least exp(-epsilon) (deterministic) and attained (below exp(-epsilon / 2): the
  negative control, a mechanism claimed at epsilon / 2 fails the same bound; the chance that
  no record of the run moves a count away from the release is far below 1e-6); the mean
  acceptance decreases with epsilon (the slides' claim): each of the 4 consecutive differences
  exceeds 4.89 standard errors (across independent chains): a pair with equal true means would
  pass with probability below 1e-6 (4e-6 for the four), and the same check on the reversed
  order (the negative control) fails;
* the log-linear (naive Bayes) model (section 4): the data-augmentation fit of 5 posterior
  means against exact enumeration, 4.89 MCSE each (5e-6), the naive analysis rejected by the
  same check; the acceptance bound at epsilon 1; the privacy report's epsilon (exact).

Negative controls: the naive analysis's coverage at epsilon = 0.1 and 0.3 lies outside the same
band for every class, and its posterior means are rejected against the exact noise-aware means by
the same 4.89-MCSE check (for at least one class), with either sampler's MCSE.
"""

import math

from nbrun import Z, binomial_band, within

__all__ = ["check"]

CELLS = 25  # epsilons x classes in the calibration table
RATE = 1e-6 / CELLS


def check(h: dict) -> None:
    """Noise-aware intervals are calibrated at every epsilon; the naive ones are not at small eps.

    Also: the DA sampler's and the collapsed sampler's means match the exact posterior; the naive
    means do not (control); the privacy reports give the epsilons the notebook released at.
    """
    lo, hi = binomial_band(h["replicates"], 0.9, rate=RATE)
    assert len(h["epsilons"]) * len(h["calibration_aware"][0]) == CELLS
    for row in h["calibration_aware"]:
        assert all(lo <= c <= hi for c in row), (row, lo, hi)
    for eps, row in zip(h["epsilons"], h["calibration_naive"], strict=True):
        if eps <= 0.3:  # negative control: the same band rejects the naive analysis
            assert not any(lo <= c <= hi for c in row), (eps, row)
    mcmc, se, exact = h["mcmc_mean_p"], h["mcse_mean_p"], h["exact_mean_p"]
    assert all(within(m, e, s) for m, e, s in zip(mcmc, exact, se, strict=True))
    assert not all(within(m, e, s) for m, e, s in zip(h["naive_mean_p"], exact, se, strict=True))
    collapsed, se_c = h["collapsed_mean_p"], h["collapsed_mcse_p"]
    assert all(within(m, e, s) for m, e, s in zip(collapsed, exact, se_c, strict=True))
    assert not all(within(m, e, s) for m, e, s in zip(h["naive_mean_p"], exact, se_c, strict=True))
    assert h["epsilon_section1"] == 0.1
    assert h["epsilon_section2"] == 10.0
    assert 1.0 > h["da_accept_min_section1"] >= math.exp(-0.1) - 1e-12
    assert h["da_accept_min_section2"] >= math.exp(-10.0) - 1e-12
    _check_acceptance(h)
    _check_log_linear(h)


def _decreasing(means, ses) -> bool:
    """Each consecutive mean is below the previous one by more than 4.89 combined SEs."""
    return all(
        (a - b) > Z * math.hypot(sa, sb)
        for a, b, sa, sb in zip(means, means[1:], ses, ses[1:], strict=False)
    )


def _check_acceptance(h: dict) -> None:
    """Section 3: the exp(-epsilon) bound holds and is attained; smaller epsilon, higher mean."""
    for eps, low in zip(h["epsilons"], h["acc_min"], strict=True):
        assert low >= math.exp(-eps) - 1e-12, (eps, low)
        assert not low >= math.exp(-eps / 2) - 1e-12, (eps, low)  # control: claim at eps/2
    assert list(h["epsilons"]) == sorted(h["epsilons"])
    means, ses = h["acc_mean"], h["acc_mean_se"]
    assert _decreasing(means, ses), (means, ses)
    assert not _decreasing(means[::-1], ses[::-1])  # control: the reversed order fails


def _check_log_linear(h: dict) -> None:
    """Section 4: the fit matches enumeration; the naive analysis does not."""
    m, se, ex = h["ll_mcmc_mean"], h["ll_mcse"], h["ll_exact_mean"]
    assert all(within(a, b, s) for a, b, s in zip(m, ex, se, strict=True)), (m, ex, se)
    naive = h["ll_naive_mean"]
    assert not all(within(a, b, s) for a, b, s in zip(m, naive, se, strict=True)), (m, naive)
    assert 1.0 > h["ll_accept_min"] >= math.exp(-h["ll_epsilon"]) - 1e-12
    assert h["ll_epsilon"] == 1.0
