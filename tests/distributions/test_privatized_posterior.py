"""NUTS on Privatized models against posteriors computed independently on a grid.

Each model is sampled once (2 chains x 1000 draws, cores=1). The test: the posterior mean is
within 4 MCSE of the grid mean (false-alarm rate 6e-5), and the grid CDF at the sample
0.1/0.5/0.9 quantiles is within 4.5 standard errors ``sqrt(q (1 - q) / ESS)`` of ``q``, with
zero divergences. Negative control (asserted): the same draws fail the same test against the
posterior of the model that ignores the noise.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

from pymc_dp.distributions.privatized import Privatized
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import grid_posterior_check

SAMPLE = dict(draws=1000, tune=1000, chains=2, cores=1, progressbar=False, nuts_sampler="pymc")


def _passes(draws, grid, logpost):
    """The test of the module docstring (mean within 4 MCSE, quantiles within 4.5 SE)."""
    return grid_posterior_check(draws, grid, logpost, k_mean=4.0, k_quantile=4.5)


def _check(idata, var, grid, logpost, naive_logpost):
    draws = idata.posterior[var].values
    assert int(idata.sample_stats["diverging"].sum()) == 0
    ok, info = _passes(draws, grid, logpost)
    assert ok, info
    bad, info_bad = _passes(draws, grid, naive_logpost)
    assert not bad, ("negative control passed", info_bad)


def test_gamma_poisson_geometric_noise():
    rng = np.random.default_rng(101)
    mech = Geometric(epsilon=0.5)
    y = rng.poisson(4.0, size=40)
    z = mech.release(y, rng=rng)
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("z", pm.Poisson.dist(lam), mech, observed=z)
        idata = pm.sample(**SAMPLE, random_seed=1)
        pp = pm.sample_posterior_predictive(idata, random_seed=2, progressbar=False)
    assert pp.posterior_predictive["z"].shape == (2, 1000, 40)
    grid = np.linspace(1e-3, 15, 3000)
    ys = np.arange(0, 200)
    noise = mech.logpdf(z[:, None] - ys[None, :])  # (n, y)
    loglik = np.array(
        [
            special.logsumexp(stats.poisson.logpmf(ys, g)[None, :] + noise, axis=1).sum()
            for g in grid
        ]
    )
    logprior = stats.gamma.logpdf(grid, 2.0, scale=2.0)
    # noise ignored: negative releases clipped to 0 and treated as Poisson counts
    naive = stats.poisson.logpmf(np.maximum(z, 0)[:, None], grid[None, :]).sum(0)
    _check(idata, "lam", grid, logprior + loglik, logprior + naive)


def _nl_logpdf(z, mu, sigma, b):
    """Normal + Laplace density in numpy/scipy (independent code path, same closed form)."""
    d = z - mu
    r = sigma / b
    t1 = r**2 / 2 - d / b + special.log_ndtr(d / sigma - r)
    t2 = r**2 / 2 + d / b + special.log_ndtr(-d / sigma - r)
    return -np.log(2 * b) + np.logaddexp(t1, t2)


def test_normal_mean_laplace_noise():
    rng = np.random.default_rng(202)
    mech = Laplace(scale=1.5)
    y = rng.normal(1.0, 1.0, size=40)
    z = mech.release(y, rng=rng, allow_float=True)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        Privatized("z", pm.Normal.dist(mu, 1.0), mech, observed=z)
        idata = pm.sample(**SAMPLE, random_seed=3)
    grid = np.linspace(-4, 6, 4000)
    logprior = stats.norm.logpdf(grid, 0, 5)
    loglik = _nl_logpdf(z[:, None], grid[None, :], 1.0, 1.5).sum(0)
    naive = stats.norm.logpdf(z[:, None], grid[None, :], 1.0).sum(0)
    _check(idata, "mu", grid, logprior + loglik, logprior + naive)


def test_beta_binomial_discrete_laplace_noise():
    rng = np.random.default_rng(303)
    mech = Geometric(epsilon=0.5)
    y = rng.binomial(10, 0.3, size=30)
    z = mech.release(y, rng=rng)
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        Privatized("z", pm.Binomial.dist(10, p), mech, observed=z)
        idata = pm.sample(**SAMPLE, random_seed=5)
    grid = np.linspace(1e-4, 1 - 1e-4, 4000)
    ks = np.arange(11)
    noise = mech.logpdf(z[:, None] - ks[None, :])
    loglik = np.array(
        [
            special.logsumexp(stats.binom.logpmf(ks, 10, g)[None, :] + noise, axis=1).sum()
            for g in grid
        ]
    )
    naive = stats.binom.logpmf(np.clip(z, 0, 10)[:, None], 10, grid[None, :]).sum(0)
    _check(idata, "p", grid, loglik, naive)


@pytest.mark.slow
def test_negative_binomial_geometric_noise_slow():
    rng = np.random.default_rng(404)
    mech = Geometric(epsilon=0.2)
    y = rng.negative_binomial(2.0, 2.0 / (2.0 + 5.0), size=60)
    z = mech.release(y, rng=rng)
    with pm.Model():
        m = pm.Gamma("m", 2.0, 0.4)
        Privatized("z", pm.NegativeBinomial.dist(mu=m, alpha=2.0), mech, observed=z)
        idata = pm.sample(**SAMPLE, random_seed=7)
    grid = np.linspace(0.5, 20, 3000)
    ys = np.arange(0, 600)
    noise = mech.logpdf(z[:, None] - ys[None, :])
    loglik = np.array(
        [
            special.logsumexp(
                stats.nbinom.logpmf(ys, 2.0, 2.0 / (2.0 + g))[None, :] + noise, axis=1
            ).sum()
            for g in grid
        ]
    )
    logprior = stats.gamma.logpdf(grid, 2.0, scale=1 / 0.4)
    naive = stats.nbinom.logpmf(np.maximum(z, 0)[:, None], 2.0, 2.0 / (2.0 + grid[None, :])).sum(0)
    _check(idata, "m", grid, logprior + loglik, logprior + naive)


def test_nutpie_backend_if_installed():
    """nutpie compiles the logp with PyTensor's numba backend: the numba Op of the closed form
    runs there too. Skipped where nutpie is not installed (it is not a dependency)."""
    pytest.importorskip("nutpie")
    rng = np.random.default_rng(101)
    mech = Geometric(epsilon=0.5)
    z = mech.release(rng.poisson(4.0, size=40), rng=rng)
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("z", pm.Poisson.dist(lam), mech, observed=z)
        idata = pm.sample(**{**SAMPLE, "nuts_sampler": "nutpie"}, random_seed=1)
    grid = np.linspace(1e-3, 15, 3000)
    ys = np.arange(0, 200)
    noise = mech.logpdf(z[:, None] - ys[None, :])
    loglik = np.array(
        [special.logsumexp(stats.poisson.logpmf(ys, g) + noise, axis=1).sum() for g in grid]
    )
    logprior = stats.gamma.logpdf(grid, 2.0, scale=2.0)
    naive = stats.poisson.logpmf(np.maximum(z, 0)[:, None], grid[None, :]).sum(0)
    _check(idata, "lam", grid, logprior + loglik, logprior + naive)
