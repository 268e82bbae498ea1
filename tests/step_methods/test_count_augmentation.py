"""CountAugmentation: the Skellam-Bessel Gibbs step for Privatized Poisson true counts.

Both methods are tested: ``"augmentation"`` (Schein et al.'s chain, the default) and
``"direct"`` (an exact draw of each count, pymc_dp.kernels.count_posterior).

Statistical assertions have a false-alarm rate of 1e-6: chi-square p-value > 1e-6 for the
one-count conditional (independent counts of one node, 60 sweeps from the prior of the
auxiliary rates: see tests/kernels/test_count_augmentation.py; one sweep for "direct"), and
the posterior mean of the Gamma-Poisson rate within 4.89 MCSE of the exact grid posterior mean
(pymc_dp.testing.mcse_check). Each has a negative control asserted to fail (the conditional at
another alpha; the noise-ignoring grid posterior). Step-assignment tests are deterministic.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods.compound import Competence
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp import CountAugmentation, PoissonFactorGibbs
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.step_methods.claims import privatized_true_counts
from pymc_dp.testing import mcse_check

F = np.float64
RATE = 1e-6


def _exact_conditional(z, mu, alpha, y_max=300):
    y = np.arange(y_max + 1)
    logp = stats.poisson.logpmf(y, mu) + np.abs(z - y) * np.log(alpha)
    p = np.exp(logp - special.logsumexp(logp))
    assert p[-50:].sum() < 1e-12
    return p


def _chi2_pvalue(draws, p):
    obs = np.bincount(draws, minlength=p.size)[: p.size].astype(float)
    assert obs.sum() == draws.size
    exp = p * draws.size
    keep = exp >= 5.0
    return stats.chisquare(
        np.append(obs[keep], obs[~keep].sum()), np.append(exp[keep], exp[~keep].sum())
    ).pvalue


@pytest.mark.parametrize(("method", "sweeps"), [("augmentation", 60), ("direct", 1)])
def test_step_reads_rate_release_and_alpha_from_the_graph(method, sweeps):
    """Fixed rate written as an expression (2 * w, w data); 40000 copies of one count."""
    n, z, alpha = 40_000, 2, 0.8
    with pm.Model() as model:
        w = pm.Data("w", np.full(n, 1.5))
        Privatized(
            "z",
            pm.Poisson.dist(F(2.0) * w),
            Geometric(alpha=alpha),
            marginalize=False,
            observed=np.full(n, z),
        )
        step = CountAugmentation([model["z_true"]], rng=3, method=method)
    point = model.initial_point()
    for _ in range(sweeps):
        point, _ = step.step(point)
    y = point["z_true"]
    assert _chi2_pvalue(y, _exact_conditional(z, 3.0, alpha)) > RATE
    # control: the wrong noise level (or the wrong rate) is rejected
    assert _chi2_pvalue(y, _exact_conditional(z, 3.0, 0.7)) < RATE
    assert _chi2_pvalue(y, _exact_conditional(z, 3.3, alpha)) < RATE


def _gamma_poisson_data():
    rng = np.random.default_rng(101)
    mech = Geometric(epsilon=0.5)
    y = rng.poisson(4.0, size=40)
    return mech, mech.release(y, rng=rng)


def _grid_posteriors(mech, z):
    grid = np.linspace(1e-3, 15, 3000)
    ys = np.arange(0, 200)
    noise = mech.logpdf(z[:, None] - ys[None, :])
    loglik = special.logsumexp(
        stats.poisson.logpmf(ys[None, :, None], grid[None, None, :]) + noise[:, :, None], axis=1
    ).sum(0)
    logprior = stats.gamma.logpdf(grid, 2.0, scale=2.0)
    naive = stats.poisson.logpmf(np.maximum(z, 0)[:, None], grid[None, :]).sum(0)

    def mean(logpost):
        post = np.exp(logpost - special.logsumexp(logpost))
        return float(np.sum(grid * post) / post.sum())

    return mean(logprior + loglik), mean(logprior + naive)


def test_gamma_poisson_rate_posterior_matches_grid():
    """pm.sample picks CountAugmentation (method="direct", the default) for the counts and NUTS
    for the rate by itself."""
    mech, z = _gamma_poisson_data()
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(0.5))
        Privatized("z", pm.Poisson.dist(lam), mech, marginalize=False, observed=z)
        _, selected = assign_step_methods(model)
        assert selected[CountAugmentation] == [model.rvs_to_values[model["z_true"]]]
        idata = pm.sample(
            draws=4000, tune=1000, chains=2, cores=1, progressbar=False, random_seed=1
        )
    assert "ca_frac_changed" in idata.sample_stats
    exact, naive = _grid_posteriors(mech, z)
    draws = idata.posterior["lam"].values
    assert mcse_check(draws, exact).passed, (mcse_check(draws, exact), exact)
    assert not mcse_check(draws, naive).passed, ("noise-ignoring control passed", naive)


def test_gamma_poisson_rate_posterior_matches_grid_augmentation():
    """method="augmentation" (Schein's chain) given explicitly; NUTS for the rate (assigned by
    pm.sample)."""
    mech, z = _gamma_poisson_data()
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(0.5))
        Privatized("z", pm.Poisson.dist(lam), mech, marginalize=False, observed=z)
        step = CountAugmentation([model["z_true"]], method="augmentation")
        idata = pm.sample(
            draws=4000,
            tune=1000,
            chains=2,
            cores=1,
            step=[step],
            progressbar=False,
            random_seed=1,
        )
    assert idata.posterior["z_true"].shape[-1] == z.size
    exact, naive = _grid_posteriors(mech, z)
    draws = idata.posterior["lam"].values
    assert mcse_check(draws, exact).passed, (mcse_check(draws, exact), exact)
    assert not mcse_check(draws, naive).passed, ("noise-ignoring control passed", naive)


def test_method_is_validated():
    model = _model("claimed")
    with model, pytest.raises(ValueError, match="method must be one of"):
        CountAugmentation([model["z_true"]], method="Direct")


def _model(kind):
    """Models whose variables CountAugmentation must not claim (and one it must)."""
    z = np.array([3, -1, 7, 0])
    with pm.Model() as m:
        lam = pm.Gamma("lam", F(2.0), F(0.5))
        if kind == "claimed":
            Privatized(
                "z", pm.Poisson.dist(lam), Geometric(epsilon=1.0), marginalize=False, observed=z
            )
        elif kind == "marginalized":
            Privatized("z", pm.Poisson.dist(lam), Geometric(epsilon=1.0), observed=z)
        elif kind == "laplace":
            Privatized(
                "z", pm.Poisson.dist(lam), pmdp.Laplace(epsilon=1.0), marginalize=False, observed=z
            )
        elif kind == "binomial":
            Privatized(
                "z",
                pm.Binomial.dist(10, 0.3),
                Geometric(epsilon=1.0),
                marginalize=False,
                observed=z,
            )
        elif kind == "read_elsewhere":
            Privatized(
                "z", pm.Poisson.dist(lam), Geometric(epsilon=1.0), marginalize=False, observed=z
            )
            pm.Normal("w", m["z_true"].sum().astype("float64"), F(1.0), observed=F(10.0))
        elif kind == "potential":
            Privatized(
                "z", pm.Poisson.dist(lam), Geometric(epsilon=1.0), marginalize=False, observed=z
            )
            pm.Potential("pot", -F(0.1) * m["z_true"].sum())
        elif kind == "plain_poisson":
            pm.Poisson("x", lam, shape=4)
    return m


@pytest.mark.parametrize(
    "kind", ["marginalized", "laplace", "binomial", "read_elsewhere", "potential", "plain_poisson"]
)
def test_step_claims_nothing_else(kind):
    model = _model(kind)
    assert privatized_true_counts(model) == {}
    with model:
        for rv in model.free_RVs:
            assert CountAugmentation.competence(rv) == Competence.INCOMPATIBLE, rv.name
        _, selected = assign_step_methods(model)
        assert CountAugmentation not in selected
        if "z_true" in model:
            with pytest.raises(ValueError, match="CountAugmentation cannot sample"):
                CountAugmentation([model["z_true"]])


def test_step_claims_the_true_counts_only():
    """Control of the test above: the plain case is claimed, the rate is not."""
    model = _model("claimed")
    with model:
        assert CountAugmentation.competence(model["z_true"]) == Competence.IDEAL
        assert CountAugmentation.competence(model["lam"]) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(model)
    assert selected[CountAugmentation] == [model.rvs_to_values[model["z_true"]]]
    with model, pytest.raises(ValueError, match="CountAugmentation cannot sample"):
        CountAugmentation([model["lam"]])


@pytest.mark.parametrize("method", ["augmentation", "direct"])
def test_sampling_state_round_trip(method):
    """Restoring the state (generator and auxiliary rates) reproduces the next sweep; a chain's
    setup works for both methods ("direct" keeps no auxiliary rates)."""
    model = _model("claimed")
    with model:
        step = CountAugmentation([model["z_true"]], rng=5, method=method)
    step.setup_chain(np.random.default_rng(6), tune=0, draws=1)
    point = model.initial_point()
    point, _ = step.step(point)
    state = step.sampling_state
    a, _ = step.step(point)
    step.sampling_state = state
    b, _ = step.step(point)
    np.testing.assert_array_equal(a["z_true"], b["z_true"])
    n_aux = 1 if method == "augmentation" else 0
    assert len(state.lam_plus) == n_aux and [x.shape for x in state.lam_plus] == [(4,)] * n_aux


@pytest.mark.parametrize("method", ["augmentation", "direct"])
def test_factorization_rate_expression(method):
    """Rate theta @ phi (D x V counts): pm.sample's assignment gives the counts to the
    factorization's scan (PoissonFactorGibbs, rule 5) and to this step once the rate is any
    other expression; given explicitly, the compiled rate equals theta @ phi at a random point
    and a sweep returns counts of the matrix's shape."""
    rng = np.random.default_rng(0)
    d, k, v = 6, 2, 5
    z = rng.integers(-3, 8, size=(d, v))
    with pm.Model(coords={"doc": range(d), "word": range(v)}) as model:
        theta = pm.Gamma("theta", F(1.0), F(1.0), shape=(d, k))
        phi = pm.Gamma("phi", F(1.0), F(1.0), shape=(k, v))
        Privatized(
            "y",
            pm.Poisson.dist(theta @ phi),
            Geometric(epsilon=1.0),
            marginalize=False,
            observed=z,
            dims=("doc", "word"),
        )
        _, selected = assign_step_methods(model)
        step = CountAugmentation([model["y_true"]], rng=1, method=method)
    assert CountAugmentation not in selected
    assert model.rvs_to_values[model["y_true"]] in selected[PoissonFactorGibbs]
    with pm.Model() as other:  # a rate that is not a plain product: CountAugmentation's
        theta = pm.Gamma("theta", F(1.0), F(1.0), shape=(d, k))
        phi = pm.Gamma("phi", F(1.0), F(1.0), shape=(k, v))
        Privatized(
            "y",
            pm.Poisson.dist(theta @ phi + F(0.5)),
            Geometric(epsilon=1.0),
            marginalize=False,
            observed=z,
        )
    _, selected = assign_step_methods(other)
    assert selected[CountAugmentation] == [other.rvs_to_values[other["y_true"]]]
    point = model.initial_point()
    point["theta_log__"] = rng.normal(size=(d, k))
    point["phi_log__"] = rng.normal(size=(k, v))
    mu, zz = step._targets[0].fn(point)
    expect = np.exp(point["theta_log__"]) @ np.exp(point["phi_log__"])
    np.testing.assert_allclose(mu, expect, rtol=1e-14)
    np.testing.assert_array_equal(zz, z)
    new, _ = step.step(point)
    assert new["y_true"].shape == (d, v) and (new["y_true"] >= 0).all()


@pytest.mark.parametrize("method", ["augmentation", "direct"])
def test_set_data_release_is_read_at_each_sweep(method):
    """A pm.Data release changed by pm.set_data is what the step uses at the next sweep."""
    with pm.Model() as model:
        zd = pm.Data("zd", np.array([1, 2, 3]))
        Privatized(
            "z", pm.Poisson.dist(F(3.0)), Geometric(alpha=0.01), marginalize=False, observed=zd
        )
        step = CountAugmentation([model["z_true"]], rng=2, method=method)
    point = model.initial_point()
    with model:
        pm.set_data({"zd": np.array([400, 400, 400])})
    for _ in range(10):
        point, _ = step.step(point)
    # P(y | z = 400, mu = 3, alpha = 0.01) has its mode at 299 (ratio P(y+1)/P(y) = 300/(y+1))
    # and P(y <= 150) < exp(-40); with the old release [1, 2, 3], y <= 150 with probability
    # above 1 - 1e-40
    assert (point["z_true"] > 150).all(), point["z_true"]


def test_claimed_outside_the_model_context():
    """``pm.sample(model=m)`` outside ``with m:`` finds the model (Privatized announces it)."""
    model = _model("claimed")
    _, selected = assign_step_methods(model)  # no model in context here
    assert selected.get(CountAugmentation) == [model.rvs_to_values[model["z_true"]]]
    assert CountAugmentation.competence(model["z_true"]) == Competence.IDEAL


def _two_sample_z(a, b) -> float:
    """|mean(a) - mean(b)| in units of the combined MCSE (each from its own ArviZ ESS)."""
    ra, rb = mcse_check(a, 0.0), mcse_check(b, 0.0)
    return abs(ra.mean - rb.mean) / float(np.hypot(ra.mcse, rb.mcse))


def _rate_draws(z, mech, kind, seed):
    with pm.Model():
        lam = pm.Gamma("lam", F(2.0), F(0.5))
        if kind == "naive":
            pm.Poisson("z", lam, observed=np.maximum(z, 0))
        else:
            Privatized("z", pm.Poisson.dist(lam), mech, marginalize=kind == "marginal", observed=z)
        idata = pm.sample(
            draws=3000, tune=1000, chains=2, cores=1, progressbar=False, random_seed=seed
        )
    return idata.posterior["lam"].values


def test_gamma_poisson_rate_posterior_matches_exact_marginal_nuts():
    """The rate's posterior with CountAugmentation (default method) against NUTS on the exact
    marginal (marginalize=True) on the same data: two-sample z on the means within 4.89
    (false-alarm rate 1e-6); control: the noise-ignoring model's draws are rejected."""
    mech, z = _gamma_poisson_data()
    augmented = _rate_draws(z, mech, "augmented", 11)
    marginal = _rate_draws(z, mech, "marginal", 12)
    naive = _rate_draws(z, mech, "naive", 13)
    k = mcse_check(augmented, 0.0).k
    z_ok, z_control = _two_sample_z(augmented, marginal), _two_sample_z(naive, marginal)
    assert z_ok <= k, (z_ok, augmented.mean(), marginal.mean())
    assert z_control > k, ("noise-ignoring control passed", z_control, naive.mean())
