"""Tests of the shared statistical helpers in pymc_dp.testing: each must accept the right law,
reject a wrong one (negative controls), and give calibrated p-values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pymc_dp.testing import (
    FALSE_ALARM,
    MCSECheck,
    assert_gof,
    assert_rejects,
    chisquare_gof,
    clopper_pearson,
    empirical_delta_lower_bound,
    empirical_epsilon_lower_bound,
    ks_gof,
    mcse_check,
)


def two_sided_geometric_logpmf(alpha):
    # P(k) = (1-α)/(1+α) α^|k|, an independent closed form
    return lambda k: np.log((1 - alpha) / (1 + alpha)) + np.abs(k) * np.log(alpha)


def test_chisquare_accepts_right_law_rejects_wrong(rng):
    x = rng.poisson(6.0, size=100_000)
    assert_gof(chisquare_gof(x, stats.poisson(6.0).logpmf))
    assert_rejects(chisquare_gof(x, stats.poisson(6.0 * 1.05).logpmf))
    # two-sided law with long tails (pooled on both sides)
    a = 0.8
    g = rng.geometric(1 - a, size=(2, 100_000)) - 1
    y = g[0] - g[1]
    assert_gof(chisquare_gof(y, two_sided_geometric_logpmf(a)))
    assert_rejects(chisquare_gof(y, two_sided_geometric_logpmf(a**1.05)))
    # a shifted law is rejected
    assert_rejects(chisquare_gof(y + 1, two_sided_geometric_logpmf(a)))


def test_chisquare_pvalues_uniform_under_null(rng):
    # 400 replicates of 500 draws: the p-values of a correct law are (close to) uniform.
    # KS of the p-values at false-alarm 1e-6; negative control: the p-values for a 10% wrong
    # rate pile up near 0.
    lam = 3.0
    reps = rng.poisson(lam, size=(400, 500))
    p_ok = np.array([chisquare_gof(r, stats.poisson(lam).logpmf) for r in reps])
    p_bad = np.array([chisquare_gof(r, stats.poisson(lam * 1.1).logpmf) for r in reps])
    assert_gof(stats.kstest(p_ok, "uniform").pvalue)
    assert_rejects(stats.kstest(p_bad, "uniform").pvalue)


def test_chisquare_mass_outside_observed_range_counts(rng):
    # draws from Poisson(3) tested against a 50/50 mixture of Poisson(3) and Poisson(300):
    # the mixture's mass at ~300 is never observed, which must be rejected
    x = rng.poisson(3.0, size=2_000)

    def mix(k):
        return np.logaddexp(
            stats.poisson(3.0).logpmf(k), stats.poisson(300.0).logpmf(k)
        ) - math.log(2)

    assert_rejects(chisquare_gof(x, mix))


def test_chisquare_wide_support_and_impossible_values(rng):
    # a two-sided geometric with scale ~1e4: ~2e5 support points, pooled quickly. With bins of
    # expected count 5 there are ~4e4 of them and a 5% scale error is not detected (p ~ 0.05);
    # capping the number of bins (max_bins) restores the power.
    a = 1 - 1e-4
    g = rng.geometric(1 - a, size=(2, 200_000)) - 1
    y = g[0] - g[1]
    right, wrong = two_sided_geometric_logpmf(a), two_sided_geometric_logpmf(1 - 1.05e-4)
    assert_gof(chisquare_gof(y, right))
    assert_gof(chisquare_gof(y, right, max_bins=250))
    assert_rejects(chisquare_gof(y, wrong, max_bins=250))
    with pytest.raises(ValueError, match="max_bins"):
        chisquare_gof(y, right, max_bins=1)
    # a value of probability zero (a negative count under a Poisson law) is an outright rejection
    x = rng.poisson(5.0, size=1_000)
    x[0] = -1
    assert chisquare_gof(x, stats.poisson(5.0).logpmf) == 0.0
    # even-only support: odd values never drawn are fine, one odd value rejects
    ev = 2 * rng.poisson(3.0, size=5_000)

    def even_logpmf(k):
        return np.where(k % 2 == 0, stats.poisson(3.0).logpmf(k // 2), -np.inf)

    assert_gof(chisquare_gof(ev, even_logpmf))
    assert chisquare_gof(np.append(ev, 3), even_logpmf) == 0.0


def test_chisquare_input_errors():
    with pytest.raises(ValueError, match="integers"):
        chisquare_gof([0.5, 1.0], stats.poisson(1.0).logpmf)
    with pytest.raises(ValueError, match="normalised"):
        chisquare_gof([0, 1, 2], lambda k: np.zeros(k.shape))
    with pytest.raises(ValueError, match="NaN"):
        chisquare_gof([0, 1, 2], lambda k: np.full(k.shape, np.nan))
    with pytest.raises(ValueError, match="empty"):
        chisquare_gof(np.array([], dtype=int), stats.poisson(1.0).logpmf)
    with pytest.raises(ValueError, match="min_expected"):
        chisquare_gof([0, 1], stats.poisson(1.0).logpmf, min_expected=0)
    # integral floats are accepted; a single bin carries no information
    assert chisquare_gof(np.zeros(3), lambda k: np.zeros(k.shape)) == 1.0


def test_ks_accepts_right_law_rejects_wrong(rng):
    x = rng.normal(0, 2.0, size=200_000)
    assert_gof(ks_gof(x, stats.norm(scale=2.0).cdf))
    assert_rejects(ks_gof(x, stats.norm(scale=2.1).cdf))
    assert_rejects(ks_gof(x, stats.laplace(scale=2.0 / math.sqrt(2)).cdf))  # same variance
    with pytest.raises(ValueError):
        ks_gof([1.0, np.nan], stats.norm.cdf)


def test_ks_pvalues_uniform_under_null(rng):
    reps = rng.laplace(0, 1.0, size=(300, 2_000))
    p = np.array([ks_gof(r, stats.laplace.cdf) for r in reps])
    assert_gof(stats.kstest(p, "uniform").pvalue)


def test_assert_helpers():
    assert FALSE_ALARM == 1e-6
    assert_gof(2e-6)
    with pytest.raises(AssertionError, match="rejected"):
        assert_gof(1e-6)
    with pytest.raises(AssertionError, match="my law"):
        assert_gof(math.nan, what="my law")  # NaN never passes
    assert_rejects(0.5e-6)
    with pytest.raises(AssertionError, match="not rejected"):
        assert_rejects(1e-6)
    with pytest.raises(AssertionError):
        assert_rejects(math.nan)
    assert_gof(0.02, alpha=0.01)
    assert_rejects(0.005, alpha=0.01)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (3, 17), (500, 1000), (1, 100000)])
@pytest.mark.parametrize("alpha", [0.05, 1e-6])
def test_clopper_pearson_matches_scipy(k, n, alpha):
    lo, hi = clopper_pearson(k, n, alpha)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    assert math.isclose(lo, ci.low, rel_tol=1e-9, abs_tol=1e-15)
    assert math.isclose(hi, ci.high, rel_tol=1e-9, abs_tol=1e-15)


def test_clopper_pearson_errors():
    for k, n in [(-1, 5), (6, 5), (0, 0)]:
        with pytest.raises(ValueError):
            clopper_pearson(k, n)


def test_empirical_epsilon_bound(rng):
    # Laplace with ε = 1 and Δ = 1: the optimal event {y > 1} has log-ratio exactly 1
    n = 400_000
    y1 = 1.0 + rng.laplace(0, 1.0, n)
    y0 = rng.laplace(0, 1.0, n)
    lb = empirical_epsilon_lower_bound(y1, y0, lambda y: y > 1.0)
    assert 0.95 < lb <= 1.0
    # a sub-optimal event gives a smaller (still valid) bound
    assert empirical_epsilon_lower_bound(y1, y0, lambda y: y > 0.0) < lb
    # negative control: samples of a less private mechanism (ε = 1.2) exceed the claim ε = 1
    y1b = 1.2 + rng.laplace(0, 1.0, n)
    y0b = rng.laplace(0, 1.0, n)
    assert empirical_epsilon_lower_bound(y1b, y0b, lambda y: y > 1.2) > 1.0
    # an event never hit under x gives -inf; a bad event function is refused
    assert empirical_epsilon_lower_bound(y1, y0, lambda y: y > 1e9) == -math.inf
    with pytest.raises(ValueError, match="shape"):
        empirical_epsilon_lower_bound(y1, y0, lambda y: True)


def test_empirical_delta_bound(rng):
    from pymc_dp.accounting import analytic_gaussian_delta

    n = 400_000
    y1 = 1.0 + rng.normal(0, 1.0, n)
    y0 = rng.normal(0, 1.0, n)
    for eps in [0.5, 1.0]:
        lb = empirical_delta_lower_bound(y1, y0, lambda y, c=eps + 0.5: y > c, eps)
        true = analytic_gaussian_delta(eps, 1.0)
        assert true - 0.02 < lb <= true
        # negative control: the δ of a mechanism with σ = 1.2 is exceeded
        assert lb > analytic_gaussian_delta(eps, 1.2)


def test_mcse_check(rng):
    # AR(1) chains with φ = 0.9: the iid standard error would be ~4x too small, the ESS-based
    # MCSE is right; a reference 10 MCSE away is rejected (negative control).
    phi, n = 0.9, 4_000
    e = rng.normal(size=(4, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / math.sqrt(1 - phi**2)
    for t in range(1, n):  # a loop over 4000 steps of a test fixture, not a hot path
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    res = mcse_check(x, 0.0)
    assert isinstance(res, MCSECheck) and res.passed
    assert 0.03 < res.ess / x.size < 0.1  # ESS/N ≈ (1-φ)/(1+φ) ≈ 0.053
    assert math.isclose(res.k, stats.norm.isf(FALSE_ALARM / 2))
    assert not mcse_check(x, 10 * res.mcse).passed
    naive = x.std() / math.sqrt(x.size)
    assert res.mcse > 3 * naive
    # one chain as 1-D; custom k
    assert mcse_check(x[0], 0.0, k=10).k == 10.0
    with pytest.raises(ValueError):
        mcse_check(np.zeros((2, 2, 2)), 0.0)
    with pytest.raises(ValueError):
        mcse_check(np.array([1.0, np.nan, 2.0, 3.0]), 0.0)
