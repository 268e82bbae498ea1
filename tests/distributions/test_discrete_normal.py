"""DiscreteNormal distribution and the discrete Gaussian kernel (numpy, PyTensor, numba).

Pass criteria (testing.md): 0 NaN, relative error <= 1e-10 where |logp| >= 1, absolute
<= 1e-10 elsewhere. Statistical assertions: false alarm <= 1e-6, each with a negative control.
"""

import math

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_dp.distributions.discrete_normal import DiscreteNormal
from pymc_dp.kernels import discrete_gaussian as dg
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, mcse_check

SIGMAS = [0.05, 0.1, 0.5, 0.99, 1.0, 1.01, 3.0, 100.0, 1e4, 1e6]
KS = np.array([0, 1, -1, 10, -10, 999, -999, 100_000, -100_000, 1_000_000, -1_000_000])


def _close(got, ref, tol=1e-10):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert not np.any(np.isnan(got))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(np.abs(ref) >= 1, np.abs(got / ref - 1), np.abs(got - ref))
    assert np.max(err) <= tol, (np.max(err), got, ref)


def _mp_log_z(sigma):
    """log Z by Jacobi theta_3 (sigma <= 100) or its imaginary transformation (larger sigma)."""
    s = mp.mpf(sigma)
    if sigma <= 100:
        return mp.log(mp.jtheta(3, 0, mp.exp(-1 / (2 * s * s))))
    return mp.log(s * mp.sqrt(2 * mp.pi) * mp.jtheta(3, 0, mp.exp(-2 * mp.pi**2 * s * s)))


def _mp_logpmf(k, sigma):
    with mp.workdps(50):
        s = mp.mpf(sigma)
        return float(-(mp.mpf(int(k)) ** 2) / (2 * s * s) - _mp_log_z(sigma))


@pytest.fixture(scope="module")
def pt_funcs():
    s = pt.dscalar("sigma")
    k = pt.lvector("k")
    lp = pm.logp(DiscreteNormal.dist(s), k)
    return pytensor.function([s, k], [lp, pytensor.grad(lp.sum(), s)])


def test_theta_references_agree():
    with mp.workdps(50):
        for s in (3.0, 30.0, 100.0):
            a = mp.log(mp.jtheta(3, 0, mp.exp(-1 / (2 * mp.mpf(s) ** 2))))
            b = mp.log(
                s * mp.sqrt(2 * mp.pi) * mp.jtheta(3, 0, mp.exp(-2 * mp.pi**2 * mp.mpf(s) ** 2))
            )
            assert abs(a - b) < mp.mpf(10) ** -40


@pytest.mark.parametrize("sigma", SIGMAS)
def test_logpmf_all_forms_vs_mpmath(sigma, pt_funcs):
    ref = np.array([_mp_logpmf(k, sigma) for k in KS])
    _close(dg.logpmf(KS, sigma), ref)
    _close(pt_funcs(sigma, KS)[0], ref)
    _close([dg.numba_logpmf(float(k), np.array([sigma])) for k in KS], ref)
    with mp.workdps(50):
        lz = float(_mp_log_z(sigma))
    _close(dg.log_normalizer(sigma), lz, tol=1e-13)
    _close(dg.numba_log_normalizer(sigma), lz, tol=1e-13)


def test_log_normalizer_vs_brute_force_sum():
    for s in (0.3, 0.999, 1.0, 7.5, 2000.0):
        k = np.arange(-int(40 * s) - 5, int(40 * s) + 6, dtype=np.float64)
        ref = math.log(math.fsum(np.exp(-0.5 * (k / s) ** 2).tolist()))
        _close(dg.log_normalizer(s), ref, tol=1e-13)


def test_non_integers_have_zero_mass():
    assert dg.logpmf(0.5, 2.0) == -np.inf
    assert dg.numba_logpmf(np.nan, np.array([2.0])) == -np.inf
    f = pytensor.function([], dg.logpmf_pt(pt.as_tensor(np.array([0.5, 1.0])), np.float64(2.0)))
    out = f()
    assert out[0] == -np.inf and np.isfinite(out[1])


@pytest.mark.parametrize("sigma", [0.05, 0.7, 1.0, 2.5, 1e3, 1e5])
def test_normalisation(sigma):
    # |k| <= K holds all but 2 sum_{k>K} e^{-k^2/2s^2}/Z <= 1e-15 of the mass
    kmax = math.ceil(sigma * math.sqrt(2 * math.log(2 / 1e-15))) + 1
    k = np.arange(-kmax, kmax + 1)
    assert abs(logsumexp(dg.logpmf(k, sigma))) <= 1e-10


@pytest.mark.parametrize("sigma", [0.05, 0.5, 0.999, 1.0, 1.001, 5.0, 1e3, 1e6])
def test_gradient_wrt_sigma(sigma, pt_funcs):
    ks = np.array([0, 1, -3, 40])
    with mp.workdps(40):
        ref = float(
            mp.diff(
                lambda s: (
                    sum(-(mp.mpf(int(k)) ** 2) / (2 * s * s) for k in ks)
                    - len(ks) * _mp_log_z_mp(s)
                ),
                mp.mpf(sigma),
            )
        )
    got = float(pt_funcs(sigma, ks)[1])
    assert np.isfinite(got)
    assert abs(got - ref) <= 1e-8 * max(1.0, abs(ref))
    h = 1e-6 * sigma  # central finite difference as a second reference
    fd = (pt_funcs(sigma + h, ks)[0].sum() - pt_funcs(sigma - h, ks)[0].sum()) / (2 * h)
    assert abs(fd - got) <= 1e-5 * max(1.0, abs(got))


def _mp_log_z_mp(s):
    if s <= 100:
        return mp.log(mp.jtheta(3, 0, mp.exp(-1 / (2 * s * s))))
    return mp.log(s * mp.sqrt(2 * mp.pi) * mp.jtheta(3, 0, mp.exp(-2 * mp.pi**2 * s * s)))


def test_invalid_sigma_raises_in_logp():
    s = pt.dscalar("s")
    f = pytensor.function([s], pm.logp(DiscreteNormal.dist(s), 0))
    with pytest.raises(Exception, match="sigma > 0"):
        f(-1.0)


@pytest.mark.parametrize("sigma", [0.4, 3.0])
def test_pm_draw_gof_with_negative_control(sigma):
    y = pm.draw(DiscreteNormal.dist(np.float64(sigma), size=100_000), random_seed=12)
    assert y.dtype == np.int64
    assert_gof(chisquare_gof(y, lambda k: dg.logpmf(k, sigma)), what=f"pm.draw sigma={sigma}")
    assert_rejects(chisquare_gof(y, lambda k: dg.logpmf(k, 1.05 * sigma)))


def test_numpy_rng_fn_matches_law():
    rng = np.random.default_rng(4)
    y = DiscreteNormal.rv_op.rng_fn(rng, np.float64(2.0), (30_000,))
    assert_gof(chisquare_gof(y, lambda k: dg.logpmf(k, 2.0)))
    assert_rejects(chisquare_gof(y, lambda k: dg.logpmf(k, 2.3)))


def test_support_point_prior_predictive_and_nuts_vs_grid_posterior():
    y_obs = pm.draw(DiscreteNormal.dist(np.float64(3.0), size=300), random_seed=5)
    with pm.Model() as model:
        s = pm.HalfNormal("s", 5.0)
        DiscreteNormal("y", s, observed=y_obs)
        DiscreteNormal("z", s, shape=2)
    assert np.all(model.initial_point()["z"] == 0)
    with model:
        prior = pm.sample_prior_predictive(draws=50, random_seed=1)
        idata = pm.sample(
            draws=500,
            tune=500,
            chains=2,
            cores=1,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert prior.prior_predictive["y"].shape[-1] == 300
    grid = np.linspace(1e-3, 10.0, 100_001)
    ssq = float(np.sum(y_obs.astype(np.float64) ** 2))
    logpost = (
        stats.halfnorm(scale=5.0).logpdf(grid)
        - ssq / (2 * grid**2)
        - y_obs.size * dg.log_normalizer(grid)
    )
    w = np.exp(logpost - logpost.max())
    mean = float(np.sum(w * grid) / np.sum(w))
    post = idata.posterior["s"].values
    res = mcse_check(post, mean)
    assert res.passed, res
    assert not mcse_check(post, mean + 8 * res.mcse).passed  # negative control


@pytest.mark.parametrize("sigma", [0.0, -1.0, np.inf, np.nan])
def test_draws_refuse_invalid_sigma(sigma):
    with pytest.raises(ValueError, match="sigma"):
        pm.draw(DiscreteNormal.dist(np.float64(sigma)), random_seed=1)
    with pytest.raises(ValueError, match="sigma"):
        DiscreteNormal.rv_op.rng_fn(np.random.default_rng(0), np.float64(sigma), None)


# ---- logcdf ---------------------------------------------------------------------------------


def _ref_logcdf(k, sigma):
    """P(Y <= k) = T(-k)/Z, T(a) = e^{-a^2/2s^2} sum_j e^{-(2aj+j^2)/2s^2} (fsum over 60 sigma)."""

    def log_tail(a):
        j = np.arange(int(60 * sigma) + 50, dtype=np.float64)
        terms = np.exp(-(2.0 * a * j + j * j) / (2.0 * sigma * sigma))
        return -(a * a) / (2.0 * sigma * sigma) + math.log(math.fsum(terms.tolist()))

    with mp.workdps(50):
        lz = float(_mp_log_z(sigma))
    if k < 0:
        return log_tail(-k) - lz
    return math.log1p(-math.exp(log_tail(k + 1) - lz))


@pytest.fixture(scope="module")
def pt_logcdf():
    s = pt.dscalar("sigma")
    k = pt.lvector("k")
    lc = pm.logcdf(DiscreteNormal.dist(s), k)
    return pytensor.function([s, k], [lc, pytensor.grad(lc.sum(), s)])


@pytest.mark.parametrize("sigma", [0.05, 0.5, 3.0, 9.99, 10.0, 37.0, 1000.0, 3e4])
def test_logcdf_vs_reference(sigma, pt_logcdf):
    ks = np.array([-(10**6), -1000, -100, -30, -10, -3, -1, 0, 1, 2, 10, 100, 1000, 10**5])
    got, grad = pt_logcdf(sigma, ks)
    ref = np.array([_ref_logcdf(int(k), sigma) for k in ks])
    _close(got, ref, tol=1e-11)
    assert np.isfinite(grad)


@pytest.mark.parametrize("sigma", [0.7, 5.0, 12.0, 400.0])
def test_logcdf_differences_are_the_pmf_and_gradient(sigma, pt_logcdf):
    ks = np.arange(-40, 41) * max(1, int(sigma / 10))
    lc = pt_logcdf(sigma, ks)[0]
    lc_prev = pt_logcdf(sigma, ks - 1)[0]
    pmf = np.exp(lc) - np.exp(lc_prev)
    np.testing.assert_allclose(pmf, np.exp(dg.logpmf(ks, sigma)), rtol=1e-9, atol=1e-15)
    h = 1e-6 * sigma
    ks2 = np.array([-7, 0, 3])
    fd = (pt_logcdf(sigma + h, ks2)[0].sum() - pt_logcdf(sigma - h, ks2)[0].sum()) / (2 * h)
    got = pt_logcdf(sigma, ks2)[1]
    assert abs(fd - got) <= 1e-5 * max(1.0, abs(got))


def test_python_float_parameter_is_float64():
    """2.0 is exact in float32; the parameter must still be a float64 constant."""
    x = DiscreteNormal.dist(2.0)
    assert x.owner.inputs[-1].dtype == "float64"
    assert abs(float(pm.logp(x, 3).eval()) / _mp_logpmf(3, 2.0) - 1) <= 1e-15
