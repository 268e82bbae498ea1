"""Tests of pymc_dp.distributions.skellam against scipy, mpmath (50 digits) and its own draws."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_dp.distributions.skellam import Skellam, SkellamRV, skellam_logpmf
from pymc_dp.testing import chisquare_gof, mcse_check
from pymc_dp.testing import mpmath_log_iv as mp_log_iv

mp.mp.dps = 50

ALPHA = 1e-6  # false-alarm rate of each goodness-of-fit assertion


@functools.cache
def _log_iv_of_rates(nu, lo, hi):
    return mp_log_iv(nu, 2 * mp.sqrt(mp.mpf(lo) * mp.mpf(hi)))


def mp_skellam_logpmf(k, mu1, mu2):
    m1 = mp.mpf(mu1)
    m2 = mp.mpf(mu2)
    return (
        -(m1 + m2)
        + mp.mpf(k) / 2 * mp.log(m1 / m2)
        + _log_iv_of_rates(abs(k), min(mu1, mu2), max(mu1, mu2))
    )


def chi2_pvalue(draws, support, logpmf):
    """Pearson chi-square p-value (``pymc_dp.testing.chisquare_gof``); draws must lie in support."""
    assert support[0] <= draws.min() and draws.max() <= support[-1], "draws outside support"
    return chisquare_gof(draws, logpmf)


MUS = [10.0**e for e in range(-8, 7, 2)]
KS = [0, 1, -1, 10, -10, 999, -999, 100_000, -100_000]
# near-mode points where the Debye terms cancel to O(1): the hardest ones
NEAR_MODE = [
    (100_000, 1e5, 1e-8),
    (100_000, 1.0001e5, 2.0),
    (-100_000, 2.0, 1.0001e5),
    (999, 1000.0, 1.0),
    (20, 20.0, 1e-8),
    (25, 1e6, 1e6 - 25),
    (1000, 1e6, 1e6 - 1000.5),
    (19, 19.3, 1e-3),
    (100_000, 1e6, 9e5),
]


def test_logpmf_vs_mpmath_extreme_grid():
    pts = [(k, a, b) for k in KS for a in MUS for b in MUS] + NEAR_MODE
    k, m1, m2 = (np.array(c, dtype=np.float64) for c in zip(*pts, strict=True))
    ours = skellam_logpmf(k, m1, m2)
    assert not np.any(np.isnan(ours)) and not np.any(ours == np.inf)
    errs = np.array(
        [
            abs(v - float(r)) / max(1.0, abs(float(r)))
            for v, r in zip(ours, (mp_skellam_logpmf(*p) for p in pts), strict=True)
        ]
    )
    worst = int(np.argmax(errs))
    assert errs[worst] <= 1e-12, (pts[worst], errs[worst])
    # the PyTensor path evaluates the same kernel
    via_pm = pm.logp(Skellam.dist(m1, m2), k.astype(np.int64)).eval()
    np.testing.assert_array_equal(via_pm, ours)


def test_logpmf_vs_scipy_where_accurate():
    ks = np.arange(-60, 61)
    for mu1, mu2 in [(3.0, 2.0), (30.0, 1.0), (0.5, 40.0), (100.0, 100.0), (1e-3, 2.0)]:
        np.testing.assert_allclose(
            skellam_logpmf(ks, mu1, mu2), stats.skellam.logpmf(ks, mu1, mu2), rtol=1e-12
        )


@pytest.mark.parametrize(
    "mu1, mu2", [(1e-8, 1e-8), (0.3, 7.0), (1e4, 1e-8), (1e6, 1e6), (2e5, 3e3), (50.0, 50.0)]
)
def test_normalisation(mu1, mu2):
    # Chernoff: P(|K - mean| > 40 sd + 60) < 1e-15 for these rates
    mean, sd = mu1 - mu2, np.sqrt(mu1 + mu2)
    ks = np.arange(np.floor(mean - 40 * sd - 60), np.ceil(mean + 40 * sd + 60) + 1)
    assert abs(logsumexp(skellam_logpmf(ks, mu1, mu2))) <= 1e-10


HARD_GRAD_POINTS = [
    (0, 1e6, 1e-8),
    (1, 1e-8, 1e6),
    (999, 1e6, 1e-8),
    (-100_000, 1e-8, 1e6),
    (10, 1e-8, 1e-8),
    (100_000, 1e5, 1e-8),
]


def _grad_fn():
    k = pt.lvector("k")
    mu1 = pt.dvector("mu1")
    mu2 = pt.dvector("mu2")
    lp = pm.logp(Skellam.dist(mu1, mu2), k)
    g1, g2 = pytensor.grad(lp.sum(), [mu1, mu2])
    return pytensor.function([k, mu1, mu2], [g1, g2])


@functools.lru_cache(maxsize=1)
def grad_fn():
    return _grad_fn()


def test_gradients_vs_mpmath_at_hard_points():
    k, m1, m2 = (np.array(c) for c in zip(*HARD_GRAD_POINTS, strict=True))
    g1, g2 = grad_fn()(k.astype(np.int64), m1.astype(float), m2.astype(float))
    for i, (kk, a, b) in enumerate(HARD_GRAD_POINTS):
        # all x = 2 sqrt(mu1 mu2) <= 50 here, where mpmath's besseli is quick
        r1 = mp.diff(lambda t, kk=kk, b=b: _mp_lp(kk, t, b), mp.mpf(a))
        r2 = mp.diff(lambda t, kk=kk, a=a: _mp_lp(kk, a, t), mp.mpf(b))
        assert g1[i] == pytest.approx(float(r1), rel=1e-9, abs=1e-12), (kk, a, b)
        assert g2[i] == pytest.approx(float(r2), rel=1e-9, abs=1e-12), (kk, a, b)


def _mp_lp(k, m1, m2):
    return (
        -(m1 + m2)
        + mp.mpf(k) / 2 * mp.log(m1 / m2)
        + mp.log(mp.besseli(abs(k), 2 * mp.sqrt(m1 * m2)))
    )


def test_gradients_finite_on_grid_and_match_finite_differences():
    pts = [(k, a, b) for k in KS for a in MUS for b in MUS]
    k, m1, m2 = (np.array(c, dtype=np.float64) for c in zip(*pts, strict=True))
    g1, g2 = grad_fn()(k.astype(np.int64), m1, m2)
    assert np.all(np.isfinite(g1)) and np.all(np.isfinite(g2))
    h = 1e-5
    fd1 = (skellam_logpmf(k, m1 * (1 + h), m2) - skellam_logpmf(k, m1 * (1 - h), m2)) / (2 * h * m1)
    fd2 = (skellam_logpmf(k, m1, m2 * (1 + h)) - skellam_logpmf(k, m1, m2 * (1 - h))) / (2 * h * m2)
    # FD error: O(h^2) curvature + rounding of |logp| * eps / (h mu)
    lp = np.abs(skellam_logpmf(k, m1, m2))
    tol1 = 1e-6 * np.abs(g1) + 1e-9 * lp / (h * m1) + 1e-9
    tol2 = 1e-6 * np.abs(g2) + 1e-9 * lp / (h * m2) + 1e-9
    assert np.all(np.abs(g1 - fd1) <= tol1)
    assert np.all(np.abs(g2 - fd2) <= tol2)


@pytest.mark.parametrize("mu1, mu2", [(3.5, 1.2), (200.0, 150.0)])
def test_draws_match_pmf_chi_square(mu1, mu2):
    n = 100_000
    draws = pm.draw(Skellam.dist(np.float64(mu1), np.float64(mu2), size=n), random_seed=7)
    assert draws.dtype == np.int64
    sd = np.sqrt(mu1 + mu2)
    support = np.arange(int(mu1 - mu2 - 12 * sd - 10), int(mu1 - mu2 + 12 * sd + 11))
    p = chi2_pvalue(draws, support, lambda s: skellam_logpmf(s, mu1, mu2))
    assert p > ALPHA
    # negative control: rates x 1.05 must be rejected
    p_bad = chi2_pvalue(draws, support, lambda s: skellam_logpmf(s, 1.05 * mu1, 1.05 * mu2))
    assert p_bad < ALPHA


def test_native_numba_draws_and_prior_predictive():
    # warnings are errors: a Python rng_fn would raise the object-mode UserWarning
    x = Skellam.dist(np.array([3.0, 30.0]), np.float64(2.0), size=(4000, 2))
    d = pm.draw(x, random_seed=1)
    assert d.shape == (4000, 2) and d.dtype == np.int64
    # z-test of each column mean (variance mu1 + mu2): 4.89 sd, false-alarm rate 1e-6 each
    np.testing.assert_array_less(
        np.abs(d.mean(0) - [1.0, 28.0]), 4.89 * np.sqrt(np.array([5.0, 32.0]) / 4000)
    )
    assert isinstance(x.owner.op, SkellamRV)
    with pm.Model():
        m1 = pm.Gamma("mu1", 2.0, 0.5)
        Skellam("y", m1, np.float64(1.0), observed=np.zeros(5, dtype=np.int64))
        prior = pm.sample_prior_predictive(draws=20, random_seed=1)
    y = prior["prior_predictive"]["y"]
    assert y.dtype == np.int64 and y.shape == (1, 20, 5)


def test_support_point_and_invalid_parameters():
    from pymc.distributions.distribution import support_point

    assert support_point(Skellam.dist(np.float64(7.4), np.float64(2.0))).eval() == 5
    assert support_point(Skellam.dist(np.float64(1.0), np.float64(2.0), size=3)).eval().shape == (
        3,
    )
    with pytest.raises(Exception, match="mu1 > 0, mu2 > 0"):
        pm.logp(Skellam.dist(np.float64(-1.0), np.float64(2.0)), 0).eval()


def _quadrature_posterior_means(data, a=2.0, rate=0.5, n=241):
    """Exact posterior means of (mu1, mu2) under Gamma(a, rate) priors by 2-D quadrature.

    The posterior is smooth and its mass at the grid's edges is asserted negligible, so the
    Riemann sum on the uniform grid is accurate far beyond the Monte Carlo error.
    """
    vals, counts = np.unique(data, return_counts=True)
    m, v = data.mean(), data.var()
    s1, s2 = (v + m) / 2, (v - m) / 2  # moment estimates of mu1, mu2
    half = 20 * np.sqrt((s1 + s2) / data.size) + 0.5  # about 20 posterior sd on each side
    g1 = np.linspace(max(s1 - half, 1e-3), s1 + half, n)
    g2 = np.linspace(max(s2 - half, 1e-3), s2 + half, n)
    m1, m2 = np.meshgrid(g1, g2, indexing="ij")
    lp = stats.gamma.logpdf(m1, a, scale=1 / rate) + stats.gamma.logpdf(m2, a, scale=1 / rate)
    for k, c in zip(vals, counts, strict=True):
        lp += c * skellam_logpmf(k, m1, m2)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    edge = max(w[0].sum(), w[-1].sum(), w[:, -1].sum(), w[:, 0].sum() if g2[0] > 1e-3 else 0.0)
    assert edge < 1e-12, edge
    return float((w * m1).sum()), float((w * m2).sum())


@pytest.mark.slow  # a NUTS run; the log-pmf and gradient it samples are checked against mpmath
# in the default run (test_logpmf_vs_mpmath_extreme_grid, test_gradients_vs_mpmath_at_hard_points)
def test_nuts_matches_quadrature_posterior():
    """NUTS posterior means of both rates against the exact (quadrature) posterior means.

    Each assertion is ``pymc_dp.testing.mcse_check`` (mean within 4.89 MCSE: false-alarm rate
    1e-6 each); no raw r_hat/ESS thresholds, so the test does not depend on the seed or the
    machine. Negative control: the same draws against means scaled by 1.05 must fail (the
    shift is >= 10 MCSE at these draws).
    """
    rng = np.random.default_rng(11)
    data = rng.poisson(4.0, 300) - rng.poisson(1.5, 300)
    ref1, ref2 = _quadrature_posterior_means(data)
    with pm.Model():
        mu1 = pm.Gamma("mu1", np.float64(2.0), np.float64(0.5))
        mu2 = pm.Gamma("mu2", np.float64(2.0), np.float64(0.5))
        Skellam("y", mu1, mu2, observed=data)
        idata = pm.sample(
            draws=2000,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    post = idata.posterior
    for name, ref in (("mu1", ref1), ("mu2", ref2)):
        draws = post[name].values
        res = mcse_check(draws, ref)
        assert res.passed, (name, ref, res)
        bad = mcse_check(draws, 1.05 * ref)
        assert not bad.passed, (name, ref, bad)
