"""Never silently wrong: Skellam, Bessel and DiscreteNormal at invalid and extreme inputs.

Every invalid parameter raises (draws: ``ValueError`` naming the parameter; logp/logcdf:
``ParameterValueError`` from ``check_parameters``), and every valid one gives a value that is
neither NaN nor ``+inf`` nor a positive log-pmf, equal to an mpmath reference (relative error
<= 1e-10 where ``|logp| >= 1``, absolute otherwise) at the int64 edges and at huge or tiny
parameters. No statistical assertions here except where stated (false-alarm rate 1e-6).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pymc as pm
import pytest
from pymc.logprob.utils import ParameterValueError

from pymc_dp.distributions.bessel import Bessel
from pymc_dp.distributions.discrete_normal import DiscreteNormal
from pymc_dp.distributions.skellam import Skellam, skellam_logpmf
from pymc_dp.kernels.bessel_sampling import bessel_logpmf, sample_bessel
from pymc_dp.testing import chisquare_gof, mpmath_log_iv

I64_MIN = int(np.iinfo(np.int64).min)
I64_MAX = int(np.iinfo(np.int64).max)
EDGE_KS = [I64_MIN, I64_MIN + 1, -(10**15), -1, 0, 1, 10**5, 10**15, I64_MAX]
ALPHA = 1e-6  # false-alarm rate of each goodness-of-fit assertion
f64 = np.float64


def _err(got, ref):
    got = float(got)
    ref = float(ref)
    return abs(got - ref) / max(1.0, abs(ref))


# ---- references (mpmath; precision raised with the magnitude of the cancelling terms) ----------
def _dps(*vals):
    mag = max(abs(float(mp.log10(abs(mp.mpf(v))))) if v != 0 else 0.0 for v in vals)
    return int(60 + mag)


def mp_skellam(k, mu1, mu2):
    dps = _dps(mu1, mu2, k)
    with mp.workdps(dps):
        m1, m2 = mp.mpf(mu1), mp.mpf(mu2)
        x = 2 * mp.sqrt(m1 * m2)
        return (
            -(m1 + m2)
            + mp.mpf(k) / 2 * (mp.log(m1) - mp.log(m2))
            + mpmath_log_iv(abs(k), x, dps=dps)
        )


def mp_bessel(n, nu, a):
    dps = _dps(nu, a, n)
    with mp.workdps(dps):
        n_, nu_, a_ = mp.mpf(n), mp.mpf(nu), mp.mpf(a)
        return (
            (2 * n_ + nu_) * mp.log(a_ / 2)
            - mpmath_log_iv(nu_, a_, dps=dps)
            - mp.loggamma(n_ + 1)
            - mp.loggamma(n_ + nu_ + 1)
        )


# ---- Skellam ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mu1, mu2, name",
    [
        (np.nan, 1.0, "mu1"),
        (-1.0, 1.0, "mu1"),
        (0.0, 1.0, "mu1"),
        (np.inf, 1.0, "mu1"),
        (1e19, 1.0, "mu1"),
        (1.0, np.nan, "mu2"),
        (1.0, -1.0, "mu2"),
        (1.0, np.inf, "mu2"),
        (1.0, 1e19, "mu2"),
    ],
)
def test_skellam_draws_refuse_invalid_or_unrepresentable_rates(mu1, mu2, name):
    x = Skellam.dist(f64(mu1), f64(mu2), size=3)
    with pytest.raises(ValueError, match=name):
        pm.draw(x, random_seed=1)
    # the Python rng_fn (used outside the numba backend) refuses the same way
    with pytest.raises(ValueError, match=name):
        Skellam.rv_op.rng_fn(np.random.default_rng(1), f64(mu1), f64(mu2), (3,))


def test_skellam_draws_at_the_rate_bound_are_exact_in_law():
    from pymc_dp.distributions.skellam import RATE_MAX

    top = f64(RATE_MAX)
    d = pm.draw(Skellam.dist(top, f64(2.0), size=20_000), random_seed=3)
    assert d.dtype == np.int64
    # mean/var of Poisson(top) - Poisson(2): z-test of the mean (rate 1e-6: 4.89 sd)
    assert abs(d.mean() - (top - 2.0)) <= 4.89 * np.sqrt((top + 2.0) / d.size)
    with pytest.raises(ValueError, match="mu1"):
        pm.draw(Skellam.dist(f64(np.nextafter(RATE_MAX, np.inf)), f64(2.0)), random_seed=3)


@pytest.mark.parametrize("mu1, mu2", [(np.inf, 1.0), (1.0, np.inf), (np.nan, 1.0), (0.0, 2.0)])
def test_skellam_logp_refuses_invalid_rates(mu1, mu2):
    with pytest.raises(ParameterValueError, match="mu1"):
        pm.logp(Skellam.dist(f64(mu1), f64(mu2)), 0).eval()


SKELLAM_HUGE = [
    (1e300, 1e300),
    (1e300, 1.0),
    (1.0, 1e300),
    (1e300, 1e-300),
    (1.7e308, 1.7e308),
    (1.7e308, 1.0),
    (1e-300, 1e-300),
    (1e-300, 1.0),
    (1e-300, 1e12),
    (1e19, 1e19),
    (1e19, 1.0),
    (1e12, 1e12),
]


@pytest.mark.parametrize("mu1, mu2", SKELLAM_HUGE)
def test_skellam_logpmf_at_int64_edges_and_huge_rates_vs_mpmath(mu1, mu2):
    ks = np.array(EDGE_KS, dtype=np.int64)
    ours = pm.logp(Skellam.dist(f64(mu1), f64(mu2)), ks).eval()
    np.testing.assert_array_equal(ours, skellam_logpmf(ks, mu1, mu2))
    assert not np.any(np.isnan(ours)) and not np.any(ours > 0.0), ours
    for k, v in zip(EDGE_KS, ours, strict=True):
        # int64 values reach the kernel as float64: the reference takes the same float k
        ref = mp_skellam(int(float(k)), mu1, mu2)
        assert _err(v, ref) <= 1e-10, (k, mu1, mu2, v, mp.nstr(ref, 17))


# ---- Bessel -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "nu, a, name",
    [
        (1.0, 0.0, "a"),
        (1.0, -1.0, "a"),
        (1.0, np.nan, "a"),
        (1.0, np.inf, "a"),
        (1.0, 1e300, "a"),
        (-1.0, 1.0, "nu"),
        (np.nan, 1.0, "nu"),
        (np.inf, 1.0, "nu"),
        (1e300, 1.0, "nu"),
        (1e18, 1e18, "nu"),
    ],
)
def test_bessel_draws_refuse_invalid_or_unrepresentable_parameters(nu, a, name):
    x = Bessel.dist(f64(nu), f64(a), size=3)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        pm.draw(x, random_seed=1)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        Bessel.rv_op.rng_fn(np.random.default_rng(1), f64(nu), f64(a), (3,))


def test_bessel_sampler_near_its_bounds_matches_pmf():
    from pymc_dp.kernels.bessel_sampling import A_MAX, NU_MAX

    for nu, a in [(NU_MAX, A_MAX), (3.0, A_MAX), (NU_MAX, 6e4)]:
        draws = sample_bessel(nu, a, rng=5, size=50_000)
        assert chisquare_gof(draws, lambda s, nu=nu, a=a: bessel_logpmf(s, nu, a)) > ALPHA
        # negative control: a x 1.05 (the mode moves by many sd) must be rejected
        bad = chisquare_gof(draws, lambda s, nu=nu, a=a: bessel_logpmf(s, nu, 1.05 * a))
        assert bad < ALPHA


@pytest.mark.parametrize("nu, a", [(np.inf, 1.0), (1.0, np.inf), (1.0, 0.0), (np.nan, 2.0)])
def test_bessel_logp_refuses_invalid_parameters(nu, a):
    with pytest.raises(ParameterValueError, match="nu"):
        pm.logp(Bessel.dist(f64(nu), f64(a)), 0).eval()


BESSEL_HUGE = [(1.0, 1e300), (0.0, 1e300), (1e300, 1.0), (1e18, 1e18), (3.0, 1e-300), (1e15, 1e5)]


@pytest.mark.parametrize("nu, a", BESSEL_HUGE)
def test_bessel_logpmf_at_int64_edges_and_huge_parameters_vs_mpmath(nu, a):
    ns = np.array([0, 1, 10**5, 10**15, I64_MAX], dtype=np.int64)
    ours = pm.logp(Bessel.dist(f64(nu), f64(a)), ns).eval()
    np.testing.assert_array_equal(ours, bessel_logpmf(ns, nu, a))
    assert not np.any(np.isnan(ours)) and not np.any(ours > 0.0), ours
    for n, v in zip(ns, ours, strict=True):
        ref = mp_bessel(int(float(n)), nu, a)
        assert _err(v, ref) <= 1e-10, (int(n), nu, a, v, mp.nstr(ref, 17))
    assert pm.logp(Bessel.dist(f64(nu), f64(a)), np.int64(I64_MIN)).eval() == -np.inf


# a^2 / (4 nu) below the normal range: once NaN (nu = 9.4e305, a = 6.8e-278, found by
# tests/test_fuzz.py), +6e296 (nu = 1e305, a = 1e-10) or 1e-8 relative error (subnormal q*)
BESSEL_TINY_Q = [
    (9.442114821779076e305, 6.828867792932625e-278),
    (1e305, 1e-10),
    (1e300, 1e-10),
    (2e8, 1e-155),
    (5e7, 1e-155),
    (1001.0, 1e-160),
    (0.5, 1e-200),
]


@pytest.mark.parametrize("nu, a", BESSEL_TINY_Q)
def test_bessel_logpmf_when_a_is_negligible_against_nu_vs_mpmath(nu, a):
    ns = np.array([0, 1, 11, 10**6, 2**62], dtype=np.int64)
    ours = pm.logp(Bessel.dist(f64(nu), f64(a)), ns).eval()
    assert not np.any(np.isnan(ours)) and not np.any(ours > 0.0), ours
    for n, v in zip(ns, ours, strict=True):
        ref = mp_bessel(int(n), nu, a)
        assert _err(v, ref) <= 1e-12, (int(n), nu, a, v, mp.nstr(ref, 17))


# ---- DiscreteNormal -----------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [np.nan, np.inf, 0.0, -1.0, 1e300, 1e15])
def test_discrete_normal_draws_refuse_invalid_or_unrepresentable_sigma(sigma):
    x = DiscreteNormal.dist(f64(sigma), size=3)
    with pytest.raises(ValueError, match="sigma"):
        pm.draw(x, random_seed=1)
    with pytest.raises(ValueError, match="sigma"):
        DiscreteNormal.rv_op.rng_fn(np.random.default_rng(1), f64(sigma), (3,))


@pytest.mark.parametrize("sigma", [5e-324, 1e-300, 1e-10, 0.05])
def test_discrete_normal_draws_at_tiny_sigma(sigma):
    # P(K != 0) = 2 exp(-1/(2 sigma^2)) / Z < 1e-86 here: every draw is 0
    d = pm.draw(DiscreteNormal.dist(f64(sigma), size=1000), random_seed=2)
    assert d.dtype == np.int64 and np.all(d == 0)
    d = DiscreteNormal.rv_op.rng_fn(np.random.default_rng(2), f64(sigma), (1000,))
    assert np.all(d == 0)


def test_discrete_normal_draws_at_the_sigma_bound_match_pmf():
    from pymc_dp.distributions.discrete_normal import DRAW_SIGMA_MAX
    from pymc_dp.kernels.discrete_gaussian import logpmf

    sigma = DRAW_SIGMA_MAX
    d = pm.draw(DiscreteNormal.dist(f64(sigma), size=40_000), random_seed=4)
    # chi-square on the scaled draws, binned by rounding to multiples of sigma/20
    # (the pmf of a bin is its Riemann sum, exact to ~1e-12 at this sigma)
    edges = np.arange(-120, 121) * (sigma / 20.0)
    obs = np.histogram(d, bins=edges)[0]
    assert obs.sum() == d.size
    from scipy import stats

    cdf = stats.norm.cdf(edges / sigma)
    p = np.diff(cdf)
    p /= p.sum()
    keep = p * d.size >= 5
    exp = p * d.size
    chi = np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep]) + (
        (obs[~keep].sum() - exp[~keep].sum()) ** 2 / max(exp[~keep].sum(), 1e-300)
    )
    pval = stats.chi2.sf(chi, keep.sum())
    assert pval > ALPHA
    bad = np.diff(stats.norm.cdf(edges / (1.05 * sigma)))
    bad /= bad.sum()
    chi_bad = np.sum((obs[keep] - d.size * bad[keep]) ** 2 / (d.size * bad[keep]))
    assert stats.chi2.sf(chi_bad, keep.sum()) < ALPHA
    assert np.isfinite(logpmf(0, sigma))
    with pytest.raises(ValueError, match="sigma"):
        pm.draw(DiscreteNormal.dist(f64(np.nextafter(sigma, np.inf))), random_seed=4)


@pytest.mark.parametrize("sigma", [np.inf, np.nan, 0.0, -2.0])
def test_discrete_normal_logp_and_logcdf_refuse_invalid_sigma(sigma):
    x = DiscreteNormal.dist(f64(sigma))
    with pytest.raises(ParameterValueError, match="sigma"):
        pm.logp(x, 0).eval()
    with pytest.raises(ParameterValueError, match="sigma"):
        pm.logcdf(x, 0).eval()


def _mp_dn_logz(sigma):
    s = mp.mpf(sigma)
    if s <= 100:
        return mp.log(mp.jtheta(3, 0, mp.exp(-1 / (2 * s * s))))
    return mp.log(s * mp.sqrt(2 * mp.pi) * mp.jtheta(3, 0, mp.exp(-2 * mp.pi**2 * s * s)))


def _mp_dn_logcdf(k, sigma):
    """log P(K <= k) from the upper tail T(a) = sum_{y >= a} exp(-y^2/(2 sigma^2)) (mpmath)."""
    s = mp.mpf(sigma)
    lz = _mp_dn_logz(sigma)

    def log_tail(a):  # a >= 1 and sigma <= 0.3: the terms j >= 60 are below exp(-4e4)
        a = mp.mpf(a)
        lead = -(a * a) / (2 * s * s)
        rest = mp.fsum(mp.exp(-(2 * a * j + j * j) / (2 * s * s)) for j in range(60))
        return lead + mp.log(rest)

    if k < 0:
        return log_tail(-k) - lz
    return mp.log(-mp.expm1(log_tail(k + 1) - lz))


@pytest.mark.parametrize("sigma", [1e-300, 1e-160, 1e-3, 0.05, 0.3])
def test_discrete_normal_tiny_sigma_logp_logcdf_vs_mpmath(sigma):
    ks = np.array([I64_MIN, -(10**6), -2, -1, 0, 1, 2, 10**6, I64_MAX], dtype=np.int64)
    x = DiscreteNormal.dist(f64(sigma))
    lp = pm.logp(x, ks).eval()
    lc = pm.logcdf(x, ks).eval()
    for got in (lp, lc):
        assert not np.any(np.isnan(got)) and not np.any(got > 0.0), got
    with mp.workdps(60):
        for k, vp, vc in zip(ks, lp, lc, strict=True):
            kk = mp.mpf(int(float(k)))
            s = mp.mpf(sigma)
            ref_p = -(kk * kk) / (2 * s * s) - _mp_dn_logz(sigma)
            ref_c = _mp_dn_logcdf(int(float(k)), sigma)
            for got, ref in ((vp, ref_p), (vc, ref_c)):
                if ref < -1e308:  # below the float range: -inf is the correctly rounded value
                    assert got == -np.inf, (k, sigma, got)
                else:
                    assert _err(got, ref) <= 1e-10, (int(k), sigma, got, mp.nstr(ref, 17))


@pytest.mark.parametrize("sigma", [1.0, 1e10, 1e300])
def test_discrete_normal_logp_logcdf_at_int64_edges_vs_mpmath(sigma):
    ks = np.array([I64_MIN, -1, 0, I64_MAX], dtype=np.int64)
    x = DiscreteNormal.dist(f64(sigma))
    lp = pm.logp(x, ks).eval()
    lc = pm.logcdf(x, ks).eval()
    for got in (lp, lc):
        assert not np.any(np.isnan(got)) and not np.any(got > 0.0), got
    with mp.workdps(80):
        s = mp.mpf(sigma)
        lz = _mp_dn_logz(sigma)
        for k, v in zip(ks, lp, strict=True):
            kk = mp.mpf(int(float(k)))
            assert _err(v, -(kk * kk) / (2 * s * s) - lz) <= 1e-10, (int(k), sigma, v)
    if sigma < 1e100:  # the tail is its first term up to a factor O(sigma^2 / |k|)
        assert _err(lc[0], lp[0]) <= 1e-10
        assert lc[-1] == 0.0 or -1e-300 < lc[-1] <= 0.0
    else:  # sigma = 1e300: P(K <= -2^63) = 1/2 - O(2^63 / sigma)
        assert abs(lc[0] - np.log(0.5)) <= 1e-10 and abs(lc[-1] - np.log(0.5)) <= 1e-10
    assert lc[1] < lc[2] <= 0.0
