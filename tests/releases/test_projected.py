"""Projected sufficient-statistic releases (``project=True``): published clipped to the valid
region, remembered, used by the plug-in posterior, and conditioned on exactly by ``model()``.

The exact-posterior test samples ``model()`` with ``pm.sample`` (data augmentation for the
records) and compares it with the enumeration over the true count
(:meth:`noise_aware_count_posterior`, itself checked against a hand enumeration with scipy's
normal CDF). Statistical assertions: :func:`pymc_dp.testing.mcse_check` (4.89 MCSE, false-alarm
rate 1e-6 each); negative control: the posterior that treats the clipped values as unclipped
(plain density) is rejected by the same check.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pymc as pm
import pytest
from pymc.step_methods import STEP_METHODS
from scipy import stats
from scipy.special import betaln, comb, logsumexp

from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases.sufficient import release_sufficient_statistics
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.testing import mcse_check


@pytest.fixture(scope="module", autouse=True)
def registered():
    added = DataAugmentation not in STEP_METHODS
    if added:
        STEP_METHODS.insert(0, DataAugmentation)
    yield
    if added:
        STEP_METHODS.remove(DataAugmentation)


@pytest.mark.parametrize(
    ("family", "data", "bounds", "box"),
    [
        ("bernoulli", np.array([1, 0, 1, 1, 0, 1]), None, (0, 6)),
        ("categorical", np.array([0, 2, 2, 1, 0, 2, 2]), 3, (0, 7)),
        ("poisson", np.array([0, 5, 1, 2]), 3, (0, 12)),
    ],
)
def test_projected_value_is_clipped_noisy_value(family, data, bounds, box):
    """Same noise draws with and without projection: the published value is the clip."""
    mech = functools.partial(Geometric, epsilon=0.05)  # wide noise: bounds are hit
    hits = 0
    for seed in range(4):
        raw = release_sufficient_statistics(
            data, family, mechanism=mech, bounds=bounds, rng=np.random.default_rng(seed)
        )
        proj = release_sufficient_statistics(
            data, family, mechanism=mech, bounds=bounds, rng=np.random.default_rng(seed),
            project=True,
        )  # fmt: skip
        assert raw.projection is None and proj.projection == box
        np.testing.assert_array_equal(proj.value, np.clip(raw.value, *box))
        assert proj.value.dtype == raw.value.dtype
        np.testing.assert_array_equal(proj.projected(), raw.projected())
        assert proj.guarantee() == raw.guarantee()  # post-processing: same cost
        hits += int(np.any((proj.value == box[0]) | (proj.value == box[1])))
    assert hits > 0  # the clip was exercised


def test_projection_refused_where_region_is_not_a_box():
    with pytest.raises(ValueError, match="normal family"):
        release_sufficient_statistics(
            np.zeros(4), "normal", mechanism=functools.partial(Laplace, epsilon=1.0),
            bounds=(-1.0, 1.0), project=True, allow_float=True
        )  # fmt: skip
    X, y = np.zeros((4, 2)), np.zeros(4)
    with pytest.raises(ValueError, match="linear_regression family"):
        release_sufficient_statistics(
            (X, y), "linear_regression", mechanism=functools.partial(Laplace, epsilon=1.0),
            bounds=((-1.0, 1.0), (-1.0, 1.0)), project=True, allow_float=True
        )  # fmt: skip


def test_plugin_posterior_uses_projected_value():
    rel = release_sufficient_statistics(
        np.ones(5, dtype=int), "bernoulli", mechanism=Laplace(scale=3.0, sensitivity=2.0),
        rng=np.random.default_rng(0), project=True, allow_float=True
    )  # fmt: skip
    rel = dataclasses.replace(rel, value=np.array([5.0, 0.0]))
    post = rel.plugin_posterior((1, 1))
    assert post.args == (6.0, 1.0)


def test_model_conditions_on_clipped_value_exactly():
    """model(): a censored Release at [0, n]; its logp at the bound cells is the log CDF /
    log survival (checked against scipy), not the density."""
    n, sigma = 6, 2.0
    rel = release_sufficient_statistics(
        np.ones(n, dtype=int), "bernoulli", mechanism=Gaussian(sigma=sigma, sensitivity=2.0),
        rng=np.random.default_rng(0), project=True, allow_float=True
    )  # fmt: skip
    rel = dataclasses.replace(rel, value=np.array([float(n), 0.0]))
    model = rel.model()
    z = model["release"]
    assert (float(z.owner.op.lower), float(z.owner.op.upper)) == (0.0, float(n))
    x = np.array([1, 1, 0, 1, 0, 0])
    s = x.sum()
    got = model.compile_logp(vars=[z])({"x": x, "p_logodds__": 0.0})
    want = stats.norm.logsf(n - s, scale=sigma) + stats.norm.logcdf(0 - (n - s), scale=sigma)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the unprojected release of the same value uses the plain density
    plain = dataclasses.replace(rel, projection=None).model()
    got_plain = plain.compile_logp(vars=[plain["release"]])({"x": x, "p_logodds__": 0.0})
    dens = stats.norm.logpdf(n - s, scale=sigma) + stats.norm.logpdf(-(n - s), scale=sigma)
    np.testing.assert_allclose(got_plain, dens, rtol=1e-12)
    assert abs(got_plain - want) > 0.05


def _hand_count_posterior(n, sigma, z, censored):
    s = np.arange(n + 1)
    logw = np.log(comb(n, s)) + betaln(1 + s, 1 + n - s)
    if censored:  # z = (n, 0): successes at the upper bound, failures at the lower bound
        logw = logw + stats.norm.logsf(z[0] - s, scale=sigma)
        logw = logw + stats.norm.logcdf(z[1] - (n - s), scale=sigma)
    else:
        logw = logw + stats.norm.logpdf(z[0] - s, scale=sigma)
        logw = logw + stats.norm.logpdf(z[1] - (n - s), scale=sigma)
    return np.exp(logw - logsumexp(logw))


def test_noise_aware_posterior_of_projected_release_exact():
    """n = 8 Bernoulli records whose (successes, failures) release was clipped to [0, 8],
    hitting both bounds; pm.sample on model() against the enumeration over the count."""
    n, sigma = 8, 2.0
    rel = release_sufficient_statistics(
        np.ones(n, dtype=int), "bernoulli", mechanism=Gaussian(sigma=sigma, sensitivity=2.0),
        rng=np.random.default_rng(0), project=True, allow_float=True
    )  # fmt: skip
    z = np.array([float(n), 0.0])
    rel = dataclasses.replace(rel, value=z)
    w = rel.noise_aware_count_posterior()
    np.testing.assert_allclose(w, _hand_count_posterior(n, sigma, z, True), rtol=1e-10)
    w_plain = _hand_count_posterior(n, sigma, z, False)
    s = np.arange(n + 1)
    with rel.model():
        idata = pm.sample(
            2500, tune=500, chains=2, cores=1, random_seed=11, progressbar=False,
            compute_convergence_checks=False, var_names=["p", "x"],
        )  # fmt: skip
    s_draws = idata.posterior["x"].values.sum(-1)
    p_draws = idata.posterior["p"].values
    assert mcse_check(s_draws, float(np.sum(w * s))).passed
    assert mcse_check(p_draws, float(np.sum(w * (1 + s) / (n + 2)))).passed
    control = mcse_check(s_draws, float(np.sum(w_plain * s)))
    print(f"control z = {control.z:.2f}")
    assert not control.passed
