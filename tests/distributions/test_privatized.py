"""The Privatized wrapper: draws, shapes, dims, resizing, latent mode, errors, mechanisms."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.distributions.shape_utils import change_dist_size
from scipy import special, stats

from pymc_dp.distributions.marginal_poisson import poisson_two_sided_exp_logp_numpy
from pymc_dp.distributions.privatized import Privatized, PrivatizedRV, privatized_mechanisms
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import FALSE_ALARM, assert_gof, assert_rejects, chisquare_gof


def test_draws_are_base_plus_noise_gof():
    """pm.draw of Poisson + geometric against the exact marginal pmf (chi-square, 1e-6)."""
    mech = Geometric(epsilon=0.6)
    a = -mech.log_alpha
    logc = np.log(np.tanh(a / 2))
    x = Privatized.dist(pm.Poisson.dist(np.float64(5.0)), mech, shape=(20000,))
    draws = pm.draw(x, random_seed=11)
    assert draws.dtype == np.int64 and draws.shape == (20000,)

    def logpmf(k, mu=5.0):
        return poisson_two_sided_exp_logp_numpy(np.asarray(k, float), mu, a, logc)[0]

    assert_gof(chisquare_gof(draws, logpmf), what="Poisson+geometric draws")
    # negative controls: the noise-free Poisson, and the right noise with mu x 1.05
    assert_rejects(chisquare_gof(draws, lambda k: stats.poisson.logpmf(k, 5.0)), what="no noise")
    assert_rejects(chisquare_gof(draws, lambda k: logpmf(k, 5.25)), what="mu x 1.05")


def test_continuous_draws_mean_and_variance():
    """Normal + Laplace: mean mu, variance sigma^2 + 2 b^2 (z-tests at 1e-6 each)."""
    n = 40000
    x = Privatized.dist(pm.Normal.dist(np.float64(2.0), np.float64(1.5)), Laplace(scale=2.0))
    d = pm.draw(x, draws=n, random_seed=3)
    var = 1.5**2 + 2 * 2.0**2
    k = stats.norm.isf(FALSE_ALARM / 2)
    assert abs(d.mean() - 2.0) <= k * np.sqrt(var / n)
    # var of the sample variance: (mu4 - var^2) / n, mu4 = 3 s^4 + 6 s^2 (2 b^2) + 24 b^4
    mu4 = 3 * 1.5**4 + 6 * 1.5**2 * 8.0 + 24 * 2.0**4
    assert abs(d.var() - var) <= k * np.sqrt((mu4 - var**2) / n)
    assert abs(d.var() - 1.5**2) > k * np.sqrt((mu4 - var**2) / n)  # noise is really there


def test_shapes_dims_and_resize():
    mech = Laplace(scale=1.0)
    x = Privatized.dist(pm.Poisson.dist(np.array([1.0, 50.0, 900.0])), mech)
    assert pm.draw(x, random_seed=1).shape == (3,)
    y = change_dist_size(x, (4, 2), expand=True)
    assert isinstance(y.owner.op, PrivatizedRV)
    d = pm.draw(y, random_seed=2)
    assert d.shape == (4, 2, 3)
    # the per-column means follow the base rates
    big = pm.draw(change_dist_size(x, (3000,), expand=True), random_seed=4)
    np.testing.assert_allclose(big.mean(0), [1.0, 50.0, 900.0], atol=5 * np.sqrt(932.0 / 3000))
    z = change_dist_size(Privatized.dist(pm.Normal.dist(), mech, shape=(2,)), (5,))
    assert pm.draw(z, random_seed=1).shape == (5,)
    with pm.Model(coords={"obs": range(4)}) as m:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("y", pm.Poisson.dist(lam), mech, dims="obs")
        prior = pm.sample_prior_predictive(draws=7, random_seed=5)
    assert prior.prior["y"].shape == (1, 7, 4)
    assert prior.prior["y"].dims[-1] == "obs"
    assert m["y"].owner.op.mechanism is mech


def test_model_logp_matches_marginal_and_dtype():
    mech = Geometric(epsilon=1.0)
    obs = np.array([3, -2, 7, 0])
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 0.5)
        y = Privatized("y", pm.Poisson.dist(lam), mech, observed=obs)
    assert y.dtype == "int64"
    lp = m.compile_logp(vars=[y], sum=False)({"lam_log__": np.log(3.5)})[0]
    ys = np.arange(0, 300)
    ref = [special.logsumexp(stats.poisson.logpmf(ys, 3.5) + mech.logpdf(z - ys)) for z in obs]
    np.testing.assert_allclose(lp, ref, rtol=1e-12)
    assert np.isfinite(m.compile_dlogp()(m.initial_point())).all()


def test_marginalize_false_keeps_latent_truth():
    mech = Laplace(scale=2.0)
    obs = np.array([1.3, 4.2, -0.5])
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("y", pm.Poisson.dist(lam), mech, observed=obs, marginalize=False)
    assert {v.name for v in m.free_RVs} == {"lam", "y_true"}
    assert m["y_true"].type.shape == (3,) or tuple(m["y_true"].shape.eval()) == (3,)
    pt_ = {"lam_log__": np.log(2.0), "y_true": np.array([1, 3, 0])}
    lp = m.compile_logp(vars=[m["y"]], sum=False)(pt_)[0]
    np.testing.assert_allclose(lp, mech.logpdf(obs - np.array([1, 3, 0])), rtol=1e-14)
    assert privatized_mechanisms(m) == {"y": mech}
    with pm.Model(coords={"obs": range(3)}) as m2:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("y", pm.Poisson.dist(lam), mech, observed=obs, dims="obs", marginalize=False)
    assert m2.named_vars_to_dims["y_true"] == ("obs",)


def test_privatized_mechanisms_collects_all_releases():
    m1, m2 = Geometric(epsilon=1.0), Gaussian(sigma=2.0)
    with pm.Model() as m:
        mu = pm.Normal("mu")
        Privatized("a", pm.Poisson.dist(pm.math.exp(mu)), m1, observed=[1, 2])
        Privatized("b", pm.Normal.dist(mu), m2, observed=[0.1])
        pm.Normal("c", mu, observed=[0.0])
    assert privatized_mechanisms(m) == {"a": m1, "b": m2}


def test_input_errors():
    mech = Laplace(scale=1.0)
    with pytest.raises(ValueError, match=r"\.dist\(\)"):
        Privatized.dist(np.ones(3), mech)
    with pytest.raises(TypeError, match="Mechanism"):
        Privatized.dist(pm.Normal.dist(), 1.0)
    with pytest.raises(NotImplementedError, match="univariate"):
        Privatized.dist(pm.MvNormal.dist(np.zeros(2), np.eye(2)), mech)
    with pm.Model():
        x = pm.Normal("x")
        with pytest.raises(ValueError):
            Privatized("y", x, mech, observed=[1.0])
    with pm.Model(), pytest.raises(NotImplementedError, match="Exponential with laplace"):
        Privatized("y", pm.Exponential.dist(1.0), mech, observed=[1.0])
