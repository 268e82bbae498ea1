"""Tests of the Bessel distribution (pymc_dp.distributions.bessel) and its exact sampler."""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError
from scipy.special import logsumexp

from pymc_dp.distributions.bessel import Bessel, BesselRV
from pymc_dp.kernels.bessel_sampling import (
    bessel_logpmf,
    bessel_mode,
    expected_proposals,
    log_poisson_real,
    sample_bessel,
)
from pymc_dp.testing import chisquare_gof
from pymc_dp.testing import mpmath_log_iv as mp_log_iv

mp.mp.dps = 50

ALPHA = 1e-6  # false-alarm rate of each goodness-of-fit assertion


@functools.cache
def ref_log_iv(nu, a):
    return mp_log_iv(nu, a)


def mp_bessel_logpmf(n, nu, a):
    n, nu_, a_ = mp.mpf(n), mp.mpf(nu), mp.mpf(a)
    return (
        (2 * n + nu_) * mp.log(a_ / 2)
        - ref_log_iv(nu, a)
        - mp.loggamma(n + 1)
        - mp.loggamma(n + nu_ + 1)
    )


def chi2_pvalue(draws, support, logpmf):
    """Pearson chi-square p-value (``pymc_dp.testing.chisquare_gof``); draws must lie in support."""
    assert support[0] <= draws.min() and draws.max() <= support[-1], "draws outside support"
    return chisquare_gof(draws, logpmf)


def _support(nu, a, width=40):
    m = bessel_mode(nu, a)
    sd = 1.0 / np.sqrt(1.0 / (m + 1) + 1.0 / (m + nu + 1))
    return np.arange(max(0, int(m - width * sd - 20)), int(m + width * sd + 20))


NUS = [0.0, 0.5, 3.0, 20.5, 999.0, 1e4, 1e5]
AS = [1e-3, 1.0, 30.0, 1e3, 1e4, 1e6]


def test_logpmf_vs_mpmath_grid():
    pts = []
    for nu in NUS:
        for a in AS:
            m = bessel_mode(nu, a)
            sd = 1.0 / np.sqrt(1.0 / (m + 1) + 1.0 / (m + nu + 1))
            for n in {0, int(m), int(m + 3 * sd), int(m + 30 * sd + 5), max(0, int(m - 3 * sd))}:
                pts.append((n, nu, a))
    n, nu, a = (np.array(c, dtype=np.float64) for c in zip(*pts, strict=True))
    ours = bessel_logpmf(n, nu, a)
    assert not np.any(np.isnan(ours)) and not np.any(ours == np.inf)
    errs = [
        abs(v - float(mp_bessel_logpmf(*p))) / max(1.0, abs(float(mp_bessel_logpmf(*p))))
        for v, p in zip(ours, pts, strict=True)
    ]
    worst = int(np.argmax(errs))
    assert errs[worst] <= 1e-12, (pts[worst], errs[worst])
    via_pm = pm.logp(Bessel.dist(nu, a), n.astype(np.int64)).eval()
    np.testing.assert_array_equal(via_pm, ours)


@pytest.mark.parametrize(
    "nu, a",
    [(0.0, 1e-3), (0.0, 1.0), (2.5, 7.0), (20.5, 300.0), (1e4, 1e4), (0.5, 1e4), (1e4, 10.0)],
)
def test_normalisation(nu, a):
    # the support spans the mode +- 40 sd (+20): the neglected log-concave tails are < 1e-300
    assert abs(logsumexp(bessel_logpmf(_support(nu, a), nu, a))) <= 1e-10


def test_log_poisson_real_vs_mpmath():
    for y, lam in [(0.0, 3.0), (0.5, 1e-3), (7.0, 7.5), (14.9, 20.0), (1e5 + 0.5, 1e5), (3e6, 1e3)]:
        ref = mp.mpf(y) * mp.log(lam) - lam - mp.loggamma(mp.mpf(y) + 1)
        assert log_poisson_real(y, lam) == pytest.approx(float(ref), rel=1e-14, abs=1e-14)


def test_edge_values():
    assert bessel_logpmf(0, 2.0, 0.0) == 0.0
    assert bessel_logpmf(1, 2.0, 0.0) == -np.inf
    assert bessel_logpmf(-1, 2.0, 3.0) == -np.inf
    assert np.isnan(bessel_logpmf(1, -0.5, 3.0))
    assert np.all(sample_bessel(3.0, 0.0, rng=1, size=5) == 0)
    with pytest.raises(ValueError, match="nu"):
        sample_bessel(-1.0, 2.0, rng=1)
    with pytest.raises(ValueError, match="a must"):
        sample_bessel(1.0, np.inf, rng=1)


@pytest.mark.parametrize(
    "nu, a", [(0.0, 1.0), (2.5, 7.0), (10.0, 100.0), (0.5, 1e4), (1e4, 1e4), (1e4, 30.0)]
)
def test_sampler_matches_pmf_chi_square(nu, a, rng):
    draws = sample_bessel(nu, a, rng=rng, size=100_000)
    support = _support(nu, a, width=60)
    p = chi2_pvalue(draws, support, lambda s: bessel_logpmf(s, nu, a))
    assert p > ALPHA
    # negative control: a x 1.05 must be rejected
    support_bad = np.arange(0, max(support[-1], _support(nu, 1.05 * a, 60)[-1]) + 1)
    p_bad = chi2_pvalue(draws, support_bad, lambda s: bessel_logpmf(s, nu, 1.05 * a))
    assert p_bad < ALPHA


def test_sampler_vectorised_over_parameters(rng):
    nu = np.array([0.0, 5.0, 1e4])[:, None]
    a = np.array([1.0, 30.0, 1e4, 3.0])[None, :]
    draws = sample_bessel(nu, a, rng=rng, size=(2000, 3, 4))
    assert draws.shape == (2000, 3, 4) and draws.dtype == np.int64
    for i in range(3):
        for j in range(4):
            n = _support(nu[i, 0], a[0, j])
            mean = np.sum(n * np.exp(bessel_logpmf(n, nu[i, 0], a[0, j])))
            var = np.sum((n - mean) ** 2 * np.exp(bessel_logpmf(n, nu[i, 0], a[0, j])))
            # 2000 draws: 6 standard errors (false alarm ~2e-9 each under normality)
            assert abs(draws[:, i, j].mean() - mean) <= 6 * np.sqrt(var / 2000) + 1e-12


def test_expected_proposals_bounded():
    worst = max(
        expected_proposals(nu, a)
        for nu in (0.0, 0.5, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4)
        for a in (1e-3, 0.1, 1.0, 3.0, 10.0, 30.0, 100.0, 1e3, 1e4)
    )
    assert 1.0 <= worst < 1.6


def test_rv_native_numba_draws_match_pmf():
    # warnings are errors: an object-mode rng_fn would fail here
    nu, a = 3.0, 12.0
    x = Bessel.dist(np.float64(nu), np.float64(a), size=100_000)
    assert isinstance(x.owner.op, BesselRV)
    draws = pm.draw(x, random_seed=5)
    assert draws.dtype == np.int64
    support = _support(nu, a, width=60)
    assert chi2_pvalue(draws, support, lambda s: bessel_logpmf(s, nu, a)) > ALPHA
    assert chi2_pvalue(draws, support, lambda s: bessel_logpmf(s, nu, 1.05 * a)) < ALPHA


def test_gradient_in_a_and_undefined_in_nu():
    a = pt.dscalar("a")
    nu = pt.dscalar("nu")
    ns = np.array([0, 4, 10, 3000])
    lp = pm.logp(Bessel.dist(nu, a), ns).sum()
    f = pytensor.function([nu, a], pytensor.grad(lp, a))
    for nuv, av in [(3.0, 7.0), (0.0, 1e-3), (999.0, 1e3), (20.5, 5e3)]:
        ref = mp.diff(
            lambda t, nuv=nuv: sum(
                (2 * k + nuv) * mp.log(t / 2) - mp.log(mp.besseli(nuv, t)) for k in ns
            ),
            mp.mpf(av),
        )
        assert f(nuv, av) == pytest.approx(float(ref), rel=1e-10), (nuv, av)
    with pytest.raises(NullTypeGradError):
        pytensor.grad(lp, nu)


def test_support_point_and_validation():
    from pymc.distributions.distribution import support_point

    for nu, a in [(0.0, 1.0), (3.0, 12.0), (1e4, 1e4)]:
        assert support_point(Bessel.dist(np.float64(nu), np.float64(a))).eval() == bessel_mode(
            nu, a
        )
    with pytest.raises(Exception, match="nu >= 0, a > 0"):
        pm.logp(Bessel.dist(np.float64(-1.0), np.float64(2.0)), 0).eval()


def test_skellam_augmentation_identity(rng):
    """min(Y1, Y2) | Y1 - Y2 = k ~ Bessel(|k|, 2 sqrt(lam1 lam2)) (Schein et al. 2019, Thm 3).

    Negative control: the argument 2 sqrt(2 lam1 lam2), as eq. 12 is printed, must be rejected.
    """
    lam1, lam2, k = 6.0, 4.0, 2
    y1 = rng.poisson(lam1, 1_500_000)
    y2 = rng.poisson(lam2, 1_500_000)
    m = np.minimum(y1, y2)[(y1 - y2) == k]
    assert m.size > 100_000
    support = np.arange(0, 80)
    a = 2 * np.sqrt(lam1 * lam2)
    assert chi2_pvalue(m, support, lambda s: bessel_logpmf(s, k, a)) > ALPHA
    a_bad = 2 * np.sqrt(2 * lam1 * lam2)
    assert chi2_pvalue(m, support, lambda s: bessel_logpmf(s, k, a_bad)) < ALPHA
    # and the library's sampler reproduces the same conditional law
    draws = sample_bessel(float(k), a, rng=rng, size=m.size)
    assert chi2_pvalue(draws, support, lambda s: bessel_logpmf(s, k, a)) > ALPHA
