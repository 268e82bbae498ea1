"""DiscreteLaplace distribution and its core kernel (numpy, PyTensor, numba) vs references.

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

from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
from pymc_dp.kernels import discrete_laplace as dl
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, mcse_check

ALPHAS = [1e-12, 1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 1 - 1e-6, 1 - 1e-9]
KS = np.array([0, 1, -1, 10, -10, 999, -999, 100_000, -100_000, 1_000_000, -1_000_000])


def _close(got, ref, tol=1e-10):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert not np.any(np.isnan(got))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(np.abs(ref) >= 1, np.abs(got / ref - 1), np.abs(got - ref))
    assert np.max(err) <= tol, (np.max(err), got, ref)
    return float(np.max(err))


def _mp_logpmf(k, alpha):
    with mp.workdps(50):
        a = mp.mpf(alpha)
        return float(mp.log((1 - a) / (1 + a)) + abs(int(k)) * mp.log(a))


def _mp_logcdf(k, alpha):
    with mp.workdps(50):
        a = mp.mpf(alpha)
        k = int(k)
        if k < 0:
            return float(-k * mp.log(a) - mp.log1p(a))
        return float(mp.log(1 - a ** (k + 1) / (1 + a)))


@pytest.fixture(scope="module")
def pt_funcs():
    a = pt.dscalar("alpha")
    k = pt.lvector("k")
    dist = DiscreteLaplace.dist(a)
    lp = pm.logp(dist, k)
    lc = pm.logcdf(dist, k)
    grad = pytensor.grad(lp.sum(), a)
    return pytensor.function([a, k], [lp, lc, grad])


@pytest.mark.parametrize("alpha", ALPHAS)
def test_logpmf_all_forms_vs_mpmath(alpha, pt_funcs):
    ref = np.array([_mp_logpmf(k, alpha) for k in KS])
    la = math.log(alpha)
    _close(dl.logpmf(KS, la), ref)
    _close(pt_funcs(alpha, KS)[0], ref)
    _close([dl.numba_logpmf(float(k), np.array([la])) for k in KS], ref)


@pytest.mark.parametrize("a", [0.01, 0.5, 1.0, 3.0, 27.0])
def test_logpmf_vs_scipy_dlaplace(a):
    k = np.arange(-60, 61)
    k = k[np.abs(k) * a < 700]  # scipy's pmf underflows beyond
    ref = stats.dlaplace(a).logpmf(k)
    _close(dl.logpmf(k, -a), ref, tol=1e-12)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_logcdf_vs_mpmath(alpha, pt_funcs):
    ks = np.array([-1_000_000, -999, -10, -1, 0, 1, 10, 999, 1_000_000])
    ref = np.array([_mp_logcdf(k, alpha) for k in ks])
    _close(dl.logcdf(ks, math.log(alpha)), ref)
    _close(pt_funcs(alpha, ks)[1], ref)


def test_logcdf_is_the_cumulative_pmf():
    for alpha in (0.2, 0.7, 0.95):
        k = np.arange(-400, 401)
        cum = np.logaddexp.accumulate(dl.logpmf(k, math.log(alpha)))
        # mass below -400 added exactly: alpha^401/(1+alpha)
        below = 401 * math.log(alpha) - math.log1p(alpha)
        cum = np.logaddexp(cum, below)
        _close(dl.logcdf(k, math.log(alpha)), cum, tol=1e-12)


@pytest.mark.parametrize("alpha", [1e-12, 0.01, 0.5, 0.99, 1 - 1e-5])
def test_normalisation(alpha):
    # support |k| <= K holds 1 - 2 alpha^(K+1)/(1+alpha) >= 1 - 1e-15 of the mass
    la = math.log(alpha)
    kmax = max(1, math.ceil((math.log(1e-15 / 2) + math.log1p(alpha)) / la))
    k = np.arange(-kmax, kmax + 1)
    assert abs(logsumexp(dl.logpmf(k, la))) <= 1e-10


@pytest.mark.parametrize("alpha", [1e-12, 1e-3, 0.3, 0.9, 1 - 1e-6, 1 - 1e-9])
def test_gradient_wrt_alpha(alpha, pt_funcs):
    ks = np.array([0, 3, -20, 1000])
    # d/dalpha [log(1-a) - log(1+a) + |k| log a] = -1/(1-a) - 1/(1+a) + |k|/a
    with mp.workdps(50):
        a = mp.mpf(alpha)
        ref = float(sum(-1 / (1 - a) - 1 / (1 + a) + abs(int(k)) / a for k in ks))
    got = pt_funcs(alpha, ks)[2]
    assert np.isfinite(got)
    assert abs(got / ref - 1) <= 1e-8
    if 1e-3 <= alpha <= 0.9:  # central finite difference as a second reference
        h = 1e-6 * alpha
        fd = (pt_funcs(alpha + h, ks)[0].sum() - pt_funcs(alpha - h, ks)[0].sum()) / (2 * h)
        assert abs(fd / got - 1) <= 1e-6


def test_invalid_alpha_gives_minus_inf_not_nan():
    x = DiscreteLaplace.dist(pt.dscalar("a"))
    f = pytensor.function([x.owner.inputs[-1]], pm.logp(x, 0))
    with pytest.raises(Exception, match="0 < alpha < 1"):
        f(1.5)


@pytest.mark.parametrize("alpha", [0.3, 0.9])
def test_pm_draw_gof_with_negative_control(alpha):
    y = pm.draw(DiscreteLaplace.dist(np.float64(alpha), size=100_000), random_seed=11)
    assert y.dtype == np.int64
    la = math.log(alpha)
    assert_gof(chisquare_gof(y, lambda k: dl.logpmf(k, la)), what=f"pm.draw alpha={alpha}")
    assert_rejects(chisquare_gof(y, lambda k: dl.logpmf(k, la / 1.05)))


def test_numpy_rng_fn_matches_law():
    rng = np.random.default_rng(3)
    y = DiscreteLaplace.rv_op.rng_fn(rng, np.float64(0.6), (100_000,))
    assert_gof(chisquare_gof(y, lambda k: dl.logpmf(k, math.log(0.6))))
    assert_rejects(chisquare_gof(y, lambda k: dl.logpmf(k, math.log(0.6) / 1.05)))


def test_support_point_and_prior_predictive_and_nuts_vs_grid_posterior():
    rng = np.random.default_rng(7)
    y_obs = DiscreteLaplace.rv_op.rng_fn(rng, np.float64(0.6), (400,))
    with pm.Model() as model:
        a = pm.Beta("a", 2.0, 2.0)
        y = DiscreteLaplace("y", a, observed=y_obs)
        z = DiscreteLaplace("z", a, shape=3)
    assert np.all(model.initial_point()["z"] == 0)
    with model:
        prior = pm.sample_prior_predictive(draws=50, random_seed=1)
        idata = pm.sample(
            draws=500,
            tune=500,
            chains=2,
            cores=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert prior.prior_predictive["y"].shape[-1] == 400
    assert y is not None and z is not None
    # exact posterior of a by quadrature on a fine grid, through the sufficient statistics
    # (n, sum |y|): log p(y | a) = n log((1-a)/(1+a)) + sum|y| log a
    grid = np.linspace(1e-6, 1 - 1e-6, 200_001)
    s_abs = np.abs(y_obs).sum()
    logpost = (
        stats.beta(2, 2).logpdf(grid)
        + y_obs.size * dl.log_normalizer(-np.log(grid))
        + s_abs * np.log(grid)
    )
    w = np.exp(logpost - logpost.max())
    mean = float(np.sum(w * grid) / np.sum(w))
    post = idata.posterior["a"].values
    res = mcse_check(post, mean)
    assert res.passed, res
    assert not mcse_check(post, mean + 8 * res.mcse).passed  # negative control


@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5, np.nan])
def test_draws_refuse_invalid_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        pm.draw(DiscreteLaplace.dist(np.float64(alpha)), random_seed=1)
    with pytest.raises(ValueError, match="alpha"):
        DiscreteLaplace.rv_op.rng_fn(np.random.default_rng(0), np.float64(alpha), None)


def test_python_float_parameter_is_float64():
    """0.5 is exact in float32; the parameter must still be a float64 constant."""
    x = DiscreteLaplace.dist(0.5)
    assert x.owner.inputs[-1].dtype == "float64"
    assert abs(float(pm.logp(x, 3).eval()) - _mp_logpmf(3, 0.5)) <= 1e-15
