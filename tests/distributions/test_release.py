"""Release: log-likelihood against the mechanism's numpy density, forward draws, accounting."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_dp.distributions.release import Release, record_parents, released_mechanisms
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, ks_gof


def test_logp_scalar_and_vector_match_numpy_reference(rng):
    mech = Laplace(scale=1.7)
    n, K = 12, 4
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.4, shape=n)
        c = pm.Categorical("c", p=np.ones(K) / K, shape=n)
        z = Release("z", x.sum(), mech, observed=3.25)
        zc = Release("zc", pt.eq(c[:, None], pt.arange(K)).sum(0), mech, observed=[1.0, 2, 3, 4])
    xs = rng.integers(0, 2, size=n)
    cs = rng.integers(0, K, size=n)
    logp = model.compile_logp(vars=[z, zc], sum=False)
    got = logp({"x": xs, "c": cs})
    want_z = mech.logpdf(3.25 - xs.sum())
    want_zc = mech.logpdf(np.array([1.0, 2, 3, 4]) - np.bincount(cs, minlength=K))
    np.testing.assert_allclose(got[0], want_z, rtol=1e-14)
    np.testing.assert_allclose(got[1], want_zc, rtol=1e-14)
    # extreme residuals stay finite and exact (log-density linear in |x|)
    far = pm.logp(Release.dist(pt.as_tensor(np.float64(0.0)), mech), 1e8).eval()
    np.testing.assert_allclose(far, mech.logpdf(1e8), rtol=1e-14)


def test_forward_draws_are_statistic_plus_noise(rng):
    """Draws minus the statistic follow the noise law (KS), not a 1.05x wider one."""
    mech = Laplace(scale=2.0)
    stat = pt.as_tensor(np.array([3.0, -1.0, 10.0]))
    draws = pm.draw(Release.dist(stat, mech), draws=40000, random_seed=rng)
    assert draws.shape == (40000, 3)
    noise = (draws - np.array([3.0, -1.0, 10.0])).ravel()
    assert_gof(ks_gof(noise, stats.laplace(scale=2.0).cdf), what="release noise")
    assert_rejects(ks_gof(noise, stats.laplace(scale=2.1).cdf), what="scale x1.05")


def test_integer_mechanism_release_is_integer(rng):
    mech = Geometric(epsilon=0.7)
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.5, shape=6)
        z = Release("z", x.sum(), mech, observed=4)
    assert z.dtype == "int64"
    pri = pm.sample_prior_predictive(4000, model=model, random_seed=rng)
    zs = pri.prior_predictive["z"].values.ravel()
    xs = pri.prior["x"].values.reshape(-1, 6).sum(1)
    assert zs.dtype == np.int64
    assert_gof(chisquare_gof(zs - xs, mech.logpdf), what="geometric release noise")
    lp = model.compile_logp(vars=[z], sum=False)({"x": np.array([1, 1, 0, 0, 1, 0])})[0]
    np.testing.assert_allclose(lp, mech.logpdf(4 - 3), rtol=1e-14)


def test_prior_predictive_and_accounting():
    lap = Laplace(epsilon=0.5)
    geo = Geometric(epsilon=1.0)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=5)
        Release("a", x.sum(), lap, observed=2.0)
        Release("b", x.sum(), geo, observed=3)
        pm.Normal("other", 0.0, 1.0, observed=0.1)
    mechs = released_mechanisms(model)
    assert mechs == {"a": lap, "b": geo}
    assert sum(m.epsilon for m in mechs.values()) == pytest.approx(1.5)
    pri = pm.sample_prior_predictive(10, model=model, random_seed=1)
    assert pri.prior_predictive["a"].shape == (1, 10)


def test_record_parents_stop_at_random_variables():
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=5)
        d = pm.Deterministic("d", 2 * x)
        xo = pm.Normal("xo", 0.0, 1.0, observed=np.zeros(5))
    assert record_parents(x.sum()) == [x]
    assert set(record_parents((d * xo).sum() + 1)) == {x, xo}


def test_validation_errors():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=(3, 2))
        with pytest.raises(TypeError, match="mechanism must be a pymc_dp Mechanism"):
            Release("z", x.sum(), "laplace", observed=1.0)
        # tables of any shape are released as they are (issue 10 item 5)
        assert Release("z2", x, Laplace(scale=1.0), observed=np.zeros((3, 2))).ndim == 2
        with pytest.raises(ValueError, match="observed release has shape"):
            Release("z3", x.sum(0), Laplace(scale=1.0), observed=np.zeros(3))


def test_release_with_dims_and_posterior_predictive_shape():
    K = 3
    with pm.Model(coords={"cat": ["a", "b", "c"]}) as model:
        c = pm.Categorical("c", p=np.ones(K) / K, shape=12)
        z = Release(
            "zc",
            pt.eq(c[:, None], pt.arange(K)).sum(0),
            Geometric(epsilon=1.0, sensitivity=2),
            observed=[3, 4, 5],
            dims="cat",
        )
    assert z.dtype == "int64"
    pri = pm.sample_prior_predictive(5, model=model, random_seed=1)
    assert pri.prior_predictive["zc"].dims == ("chain", "draw", "cat")
