"""One Posterior Sample: closed-form log-likelihood ranges, temperatures and guarantees, the
privacy loss of one draw from its exact output densities, the exact samplers (KS against the
exact truncated-Beta CDF, false-alarm rate 1e-6 per assertion, each with a rejected negative
control) and the PyMC tempered-likelihood route (posterior mean within 4.89 MCSE of the exact
mean, false-alarm rate 1e-6, with the untempered model as rejected control).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.releases import (
    OnePosteriorSample,
    beta_bernoulli_log_likelihood_range,
    dirichlet_categorical_log_likelihood_range,
    truncated_beta_rvs,
)
from pymc_dp.testing import assert_gof, assert_rejects, ks_gof, mcse_check


def _trunc_cdf(a, b, lo, hi):
    def cdf(x):
        fl = stats.beta.cdf(lo, a, b)
        return (stats.beta.cdf(np.clip(x, lo, hi), a, b) - fl) / (stats.beta.cdf(hi, a, b) - fl)

    return cdf


def _trunc_logpdf(theta, a, b, lo, hi):
    """Exact log density of Beta(a, b) truncated to [lo, hi] (mass by cdf or sf side)."""
    mass = stats.beta.cdf(hi, a, b) - stats.beta.cdf(lo, a, b)
    mass_sf = stats.beta.sf(lo, a, b) - stats.beta.sf(hi, a, b)
    m = mass if stats.beta.cdf(lo, a, b) <= 0.5 else mass_sf
    return stats.beta.logpdf(theta, a, b) - math.log(m)


# ---- closed forms ------------------------------------------------------------------------------
def test_log_likelihood_ranges_closed_forms():
    c = beta_bernoulli_log_likelihood_range(0.1)
    assert c == pytest.approx(math.log(9.0), rel=1e-15) and c >= math.log(0.9) - math.log(0.1)
    c = dirichlet_categorical_log_likelihood_range(0.01, 4)
    assert c == pytest.approx(math.log(0.97 / 0.01), rel=1e-15)
    assert dirichlet_categorical_log_likelihood_range(
        0.2, 2
    ) == beta_bernoulli_log_likelihood_range(0.2)
    # brute force over a grid of the truncated simplex (K = 3): max |log θ_j - log θ_k|
    p0, g = 0.05, np.linspace(0.05, 0.9, 1701)
    t1, t2 = np.meshgrid(g, g)
    t3 = 1 - t1 - t2
    ok = t3 >= p0 - 1e-12
    th = np.stack([t1[ok], t2[ok], np.maximum(t3[ok], p0)])
    brute = np.log(th.max(0) / th.min(0)).max()
    assert dirichlet_categorical_log_likelihood_range(p0, 3) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize(
    ("p0", "k"), [(0.0, 2), (0.5, 2), (0.34, 3), (-0.1, 2), (math.nan, 2), (0.1, 1)]
)
def test_no_finite_bound_is_refused(p0, k):
    with pytest.raises(ValueError):
        dirichlet_categorical_log_likelihood_range(p0, k)
    if k == 2:
        with pytest.raises(ValueError, match="truncation"):
            OnePosteriorSample.beta_bernoulli(1.0, p0)


def test_zero_truncation_message_says_why():
    with pytest.raises(ValueError, match="unbounded"):
        OnePosteriorSample.beta_bernoulli(1.0, 0.0)
    with pytest.raises(ValueError, match="finite bound"):
        OnePosteriorSample(1.0, math.inf)


@pytest.mark.parametrize("eps", [0.1, 0.3, 1.0, 7.0])
def test_temperature_and_guarantee(eps):
    ops = OnePosteriorSample.beta_bernoulli(eps, 0.1)
    c = ops.log_likelihood_range
    assert ops.temperature == pytest.approx(max(1.0, 2 * c / eps), rel=1e-15)
    g = ops.guarantee()
    assert g.epsilon <= eps and g.epsilon == pytest.approx(2 * c / ops.temperature, rel=1e-15)
    assert g.delta == 0.0


def test_temperature_is_capped_at_one():
    ops = OnePosteriorSample.beta_bernoulli(100.0, 0.1)  # 2 log 9 = 4.39 < 100
    assert ops.temperature == 1.0
    assert ops.guarantee().epsilon == pytest.approx(2 * math.log(9.0), rel=1e-14)
    assert OnePosteriorSample(0.5, 0.0).guarantee().epsilon == 0.0


# ---- exact privacy loss of one draw -------------------------------------------------------------
def _worst_loss(eps: float, p0: float, temperature: float, sizes) -> float:
    """sup over θ in [p0, 1-p0] and all neighbours (s, n-s) ~ (s+1, n-s-1), n in sizes, of
    |log q_D(θ) - log q_D'(θ)|, q the tempered truncated Beta(1 + s/T, 1 + f/T) density."""
    theta = np.concatenate([[p0, 1 - p0], np.linspace(p0, 1 - p0, 201)])
    worst = 0.0
    for n in sizes:
        for s in range(n):
            a, b = 1 + s / temperature, 1 + (n - s) / temperature
            a2, b2 = 1 + (s + 1) / temperature, 1 + (n - s - 1) / temperature
            d = _trunc_logpdf(theta, a, b, p0, 1 - p0) - _trunc_logpdf(theta, a2, b2, p0, 1 - p0)
            worst = max(worst, float(np.abs(d).max()))
    return worst


@pytest.mark.parametrize(("eps", "p0"), [(1.0, 0.1), (0.5, 0.25), (2.0, 0.01)])
def test_exact_privacy_loss_of_one_draw_within_epsilon(eps, p0):
    ops = OnePosteriorSample.beta_bernoulli(eps, p0)
    sizes = [1, 2, 3, 5, 10, 40, 400]
    worst = _worst_loss(eps, p0, ops.temperature, sizes)
    assert worst <= ops.guarantee().epsilon * (1 + 1e-9)
    assert worst >= 0.9 * eps  # and the bound is nearly attained (adversarial large-n data)
    # negative control: half the temperature (twice the claimed loss) exceeds epsilon
    assert _worst_loss(eps, p0, ops.temperature / 2, sizes) > 1.5 * eps


# ---- exact samplers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "lo", "hi"),
    [
        (2.0, 5.0, 0.1, 0.9),  # interior, cdf side
        (30.0, 2.0, 0.25, 0.75),  # mass above: cdf side with most mass beyond hi
        (3.0, 40.0, 0.2, 0.8),  # mass below lo: sf side
        (400.0, 5000.0, 0.3, 0.7),  # interval mass ~1e-290: rejection from the lo end
        (1.0, 1e6, 0.1, 0.9),  # mass underflows: rejection
        (0.5, 0.7, 0.01, 0.99),  # U-shaped
    ],
)
def test_truncated_beta_draws_follow_the_exact_law(rng, a, b, lo, hi):
    x = truncated_beta_rvs(np.full(50_000, a), b, lo, hi, rng=rng)
    assert np.all((x >= lo) & (x <= hi))
    if stats.beta.cdf(hi, a, b) - stats.beta.cdf(lo, a, b) > 1e-250:
        assert_gof(ks_gof(x, _trunc_cdf(a, b, lo, hi)), what=f"trunc beta {a},{b}")
        assert_rejects(ks_gof(x, _trunc_cdf(a * 1.1, b / 1.1, lo, hi)), what="a, b x 1.1, / 1.1")
    else:  # exponential tail from the end: P(x - lo > t) ~ exp(-λ t) with λ the log-slope
        lam = (b - 1) / (1 - lo) - (a - 1) / lo
        ref = stats.expon(scale=1.0 / lam).cdf
        assert_gof(ks_gof(x - lo, ref), what="tail")
        assert_rejects(ks_gof(x - lo, stats.expon(scale=1.05 / lam).cdf), what="tail x 1.05")


def test_ops_sample_is_the_tempered_truncated_posterior(rng):
    ops = OnePosteriorSample.beta_bernoulli(0.5, 0.2)
    data = np.array([1] * 30 + [0] * 10)
    t = ops.temperature
    x = np.array(
        [ops.sample(data, prior=(2.0, 1.0), rng=rng, allow_float=True) for _ in range(6000)]
    )
    assert_gof(ks_gof(x, _trunc_cdf(2 + 30 / t, 1 + 10 / t, 0.2, 0.8)), what="OPS law")
    # negative controls: the untempered posterior, and Foulds's whole-joint tempering
    assert_rejects(ks_gof(x, _trunc_cdf(2 + 30, 1 + 10, 0.2, 0.8)), what="T = 1")
    assert_rejects(ks_gof(x, _trunc_cdf(1 + 31 / t, 1 + 10 / t, 0.2, 0.8)), what="joint")


def test_dirichlet_ops_sample(rng):
    ops = OnePosteriorSample.dirichlet_categorical(1.0, 0.05, 3)
    th = ops.sample(np.array([0, 0, 1, 2, 2, 2]), rng=rng, allow_float=True)
    assert th.shape == (3,) and np.all(th >= 0.05) and th.sum() == pytest.approx(1.0)
    # K = 2 is the Beta case: the first coordinate follows the truncated Beta law
    ops2 = OnePosteriorSample.dirichlet_categorical(1.0, 0.2, 2)
    data = np.array([1] * 12 + [0] * 4)
    t = ops2.temperature
    x = np.array([ops2.sample(data, rng=rng, allow_float=True)[1] for _ in range(3000)])
    assert_gof(ks_gof(x, _trunc_cdf(1 + 12 / t, 1 + 4 / t, 0.2, 0.8)), what="dirichlet K=2")
    assert_rejects(ks_gof(x, _trunc_cdf(1 + 12, 1 + 4, 0.2, 0.8)), what="untempered")
    with pytest.raises(ValueError, match=r"0\.\.1"):
        ops2.sample(np.array([0, 2]), rng=rng)
    with pytest.raises(ValueError, match="tempered_likelihood"):
        OnePosteriorSample(1.0, 2.0).sample(np.array([0, 1]))


# ---- PyMC route ---------------------------------------------------------------------------------
def _trunc_mean(a, b, lo, hi):
    inc = special.betainc
    return a / (a + b) * (inc(a + 1, b, hi) - inc(a + 1, b, lo)) / (inc(a, b, hi) - inc(a, b, lo))


def test_tempered_likelihood_in_a_pymc_model():
    import pymc as pm

    ops = OnePosteriorSample.beta_bernoulli(1.0, 0.1)
    data = np.array([1] * 40 + [0] * 10)
    with pm.Model():
        p = pm.Truncated("p", pm.Beta.dist(np.float64(1.0), np.float64(1.0)), lower=0.1, upper=0.9)
        ops.tempered_likelihood("loglik", pm.Bernoulli.dist(p=p), data)
        idata = pm.sample(
            draws=2000, tune=1000, chains=2, cores=1, random_seed=11, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    draws = idata.posterior["p"].values
    t = ops.temperature
    exact = _trunc_mean(1 + 40 / t, 1 + 10 / t, 0.1, 0.9)
    assert mcse_check(draws, exact).passed
    assert not mcse_check(draws, _trunc_mean(41.0, 11.0, 0.1, 0.9)).passed  # untempered


def test_dirichlet_ops_refuses_when_the_truncated_region_has_no_mass(rng):
    ops = OnePosteriorSample.dirichlet_categorical(100.0, 0.3, 3)  # T = 1: the posterior itself
    assert ops.temperature == 1.0
    with pytest.raises(RuntimeError, match="tempered_likelihood"):
        # Dirichlet(3001, 1, 1): P(region) ~ 0
        ops.sample(np.zeros(3000, dtype=int), rng=rng, allow_float=True)
