"""Tests of pymc_dp.step_methods.ffbs through pm.sample, against exact enumeration."""

from __future__ import annotations

import itertools

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods.compound import Competence
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.distributions.markov_chain import MarkovChain
from pymc_dp.step_methods.ffbs import FFBS, emission_loglik, ffbs_plan, log_chain_params
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, grid_posterior_check

INIT = np.array([0.6, 0.4])
TRANS = np.array([[0.8, 0.2], [0.3, 0.7]])
RATES = np.array([1.0, 6.0])
Y = np.array([0, 4, 7, 2])
T = 4
PATHS = np.array(list(itertools.product(range(2), repeat=T)))


def path_log_prior(init, trans, paths):
    lp = np.log(init[paths[:, 0]])
    for t in range(1, paths.shape[1]):
        lp = lp + np.log(trans[paths[:, t - 1], paths[:, t]])
    return lp


def exact_state_posterior(log_emis, init=INIT, trans=TRANS):
    """Normalised log posterior of the 16 paths; ``log_emis[t, k]`` = log p(y_t | s_t = k)."""
    lp = path_log_prior(init, trans, PATHS) + log_emis[np.arange(T), PATHS].sum(-1)
    return lp - special.logsumexp(lp)


def codes(states):
    return (states * 2 ** np.arange(T - 1, -1, -1)).sum(-1).ravel()


def sample_states(model, draws=4000):
    with model:
        idata = pm.sample(
            draws,
            tune=0,
            chains=2,
            cores=2,
            random_seed=7,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata.posterior["s"].values.reshape(-1, T)


def poisson_hmm():
    with pm.Model() as model:
        s = MarkovChain("s", INIT, TRANS, shape=T)
        pm.Poisson("y", pt.as_tensor(RATES)[s], observed=Y)
    return model


def test_pm_sample_picks_ffbs():
    model = poisson_hmm()
    _, selected = assign_step_methods(model)
    assert {cls: [v.name for v in vs] for cls, vs in selected.items()} == {FFBS: ["s"]}
    with pm.Model():
        c = pm.Categorical("c", p=np.array([0.5, 0.5]), shape=3)
        assert FFBS.competence(c, False) == Competence.INCOMPATIBLE


def test_poisson_hmm_states_match_enumeration():
    """Chi-square of 8000 pm.sample draws (2 chains, cores=2) over the 16 paths; rate 1e-6.

    With fixed parameters every FFBS draw is an independent exact draw, so the draws are iid.
    Negative control: the same draws against the posterior under the transposed transition
    matrix are rejected.
    """
    log_emis = stats.poisson.logpmf(Y[:, None], RATES[None, :])
    exact = exact_state_posterior(log_emis)
    draws = sample_states(poisson_hmm())
    assert_gof(chisquare_gof(codes(draws), lambda c: exact[c]), what="Poisson HMM")
    wrong = exact_state_posterior(log_emis, trans=TRANS.T / TRANS.T.sum(1, keepdims=True))
    assert_rejects(chisquare_gof(codes(draws), lambda c: wrong[c]), what="transposed P")


def test_privatized_binomial_hmm_states_match_enumeration():
    """Emissions released through a Geometric mechanism (Privatized, marginalised): chi-square
    of 8000 draws over the 16 paths at rate 1e-6; negative control: the posterior that ignores
    the noise (z taken as the true counts) is rejected."""
    n, phi, z = 10, np.array([0.2, 0.7]), np.array([1, 8, 6, 3])
    mech = pmdp.Geometric(epsilon=1.0)
    with pm.Model() as model:
        s = MarkovChain("s", INIT, TRANS, shape=T)
        pmdp.Privatized("z", pm.Binomial.dist(n=n, p=pt.as_tensor(phi)[s]), mech, observed=z)
    ks = np.arange(n + 1)
    noise = np.log((1 - mech.alpha) / (1 + mech.alpha)) + np.abs(z[:, None] - ks) * np.log(
        mech.alpha
    )
    log_emis = np.stack(
        [special.logsumexp(stats.binom.logpmf(ks, n, p) + noise, axis=1) for p in phi], axis=1
    )
    exact = exact_state_posterior(log_emis)
    draws = sample_states(model)
    assert_gof(chisquare_gof(codes(draws), lambda c: exact[c]), what="Privatized HMM")
    naive = exact_state_posterior(stats.binom.logpmf(z[:, None], n, phi[None, :]))
    assert_rejects(chisquare_gof(codes(draws), lambda c: naive[c]), what="noise ignored")


def _p00_log_posterior(grid, y, rates):
    """Exact marginal log posterior of P[0, 0] on ``grid``: Dirichlet(1, 1) rows, s_0 fixed law
    INIT, the other row integrated out in closed form (a Beta function)."""
    paths = np.array(list(itertools.product(range(2), repeat=len(y))))
    prev, nxt = paths[:, :-1], paths[:, 1:]
    n = {(i, j): ((prev == i) & (nxt == j)).sum(1) for i in range(2) for j in range(2)}
    log_w = np.log(INIT[paths[:, 0]]) + stats.poisson.logpmf(y, rates[paths]).sum(1)
    log_w = log_w + special.betaln(n[1, 1] + 1, n[1, 0] + 1)
    a = grid[:, None]
    terms = log_w + n[0, 0] * np.log(a) + n[0, 1] * np.log1p(-a)
    return special.logsumexp(terms, axis=1)


def test_random_transition_by_nuts_matches_exact_marginal():
    """P rows ~ Dirichlet(1, 1) sampled by NUTS, states by FFBS (chosen by pm.sample).

    The posterior of P[0, 0] against its exact marginal on a grid: mean within 4.89 MCSE and
    the grid CDF at the 0.1/0.5/0.9 draw quantiles within 4.89 binomial SE (rate about 1e-6 per
    check). Negative control: the same check against the marginal computed with the
    emissions' rates swapped fails.
    """
    y, rates = np.array([0, 0, 0, 0, 9, 8, 9, 0]), np.array([0.5, 8.0])
    with pm.Model():
        trans = pm.Dirichlet("P", np.ones(2), shape=(2, 2))
        s = MarkovChain("s", INIT, trans, shape=len(y))
        pm.Poisson("y", pt.as_tensor(rates)[s], observed=y)
        idata = pm.sample(
            1500,
            tune=1000,
            chains=2,
            cores=2,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert int(idata.sample_stats["diverging"].sum()) == 0
    a = idata.posterior["P"].values[..., 0, 0]
    grid = np.linspace(5e-5, 1 - 5e-5, 10000)
    ok, chk = grid_posterior_check(a, grid, _p00_log_posterior(grid, y, rates))
    assert ok, chk
    bad, _ = grid_posterior_check(a, grid, _p00_log_posterior(grid, y, rates[::-1]))
    assert not bad


def test_batched_chains_with_latent_children_and_pickle():
    """Two regions (shape (2, 5)), a free child per state read through indexing: accepted;
    the step pickles and draws valid states after unpickling."""
    with pm.Model() as model:
        mu = pm.Normal("mu", np.array([0.0, 3.0]), 1.0, shape=2)
        s = MarkovChain("s", INIT, TRANS, shape=(2, 5))
        x = pm.Normal("x", mu[s], 1.0)
        pm.Normal("obs", x, 0.5, observed=np.zeros((2, 5)))
        assert FFBS.competence(s, False) == Competence.IDEAL
        step = FFBS([s], rng=1)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point, stats_ = clone.step(model.initial_point())
    assert stats_ == [{}]
    assert point["s"].shape == (2, 5) and set(np.unique(point["s"])) <= {0, 1}


def _coupled_model(vanishing):
    with pm.Model() as model:
        rates = pm.Gamma("rates", np.float64(2.0), np.float64(1.0), shape=2)
        w = pm.DiscreteUniform("w", -1000, 1000)  # 0 at the initial point
        s = MarkovChain("s", INIT, TRANS, shape=T)
        if vanishing == "rates":  # equal rates at the initial point: the coupling vanishes
            mu = rates[s[:-1]] * rates[s[1:]]
        elif vanishing == "discrete":  # w = 0 at the initial point: the coupling vanishes
            mu = rates[s[:-1]] + pt.abs(w) * rates[s[1:]]
        else:
            mu = rates[s[:-1]] + 0.5 * rates[s[1:]]
        pm.Poisson("y", mu, observed=Y[:-1])
    return model, s


@pytest.mark.parametrize("vanishing", ["no", "rates", "discrete"])
def test_coupled_children_are_refused(vanishing):
    """Terms reading s[t] and s[t+1] are refused, also when the coupling vanishes at the
    initial point (equal rates; a discrete coefficient at its support point 0)."""
    model, s = _coupled_model(vanishing)
    assert model.initial_point()["w"] == 0
    with model:
        with pytest.raises(ValueError, match="depends on several state elements"):
            FFBS([s])
        with pytest.warns(UserWarning, match="falls back"):
            assert FFBS.competence(s, False) == Competence.INCOMPATIBLE


def test_transform_depending_on_states_is_refused():
    with pm.Model() as model:
        s = MarkovChain("s", INIT, TRANS, shape=T)
        pm.Uniform("u", pt.as_tensor(np.array([0.0, 1.0]))[s], 5.0)
    with model, pytest.raises(ValueError, match="transform of its child 'u'"):
        FFBS([s])


def test_non_markov_chain_is_refused():
    with pm.Model() as model:
        c = pm.Categorical("c", p=np.array([0.5, 0.5]), shape=3)
    with model, pytest.raises(ValueError, match="free MarkovChain"):
        FFBS([c])


def test_emission_loglik_sums_feature_terms_into_their_state():
    """E[c, t, k] for two regions, a (R, T, F) feature child, an (R, T) child and a masked
    child whose masked elements read no state, against the terms computed by hand (exact to
    1e-12); the initial/transition parameters per region."""
    rates = np.array([[0.5, 2.0, 1.0], [4.0, 1.5, 3.0]])  # (K, F)
    y = np.arange(2 * 3 * 3).reshape(2, 3, 3) % 5
    w = np.array([[0.1, -0.3, 2.0], [1.0, 0.0, -1.0]])
    init = np.array([[0.6, 0.4], [0.1, 0.9]])
    mask = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    with pm.Model() as model:
        s = MarkovChain("s", init, TRANS, shape=(2, 3))
        pm.Poisson("y", pt.as_tensor(rates)[s], observed=y)
        pm.Normal("w", pt.as_tensor(np.array([0.0, 1.0]))[s], 1.0, observed=w)
        # elements with mask 0 read no state: they must not be attributed to any
        pm.Normal("v", pt.as_tensor(np.array([0.0, 2.0]))[s] * mask, 1.0, observed=w)
    plan = ffbs_plan(model, s)
    point = model.initial_point()
    log_emis = emission_loglik(plan, [point[n] for n in plan.inputs])
    expected = np.empty((2, 3, 2))
    for k in range(2):
        expected[..., k] = stats.poisson.logpmf(y, rates[k]).sum(-1) + stats.norm.logpdf(w, k, 1)
        expected[..., k] += np.where(mask > 0, stats.norm.logpdf(w, 2.0 * k, 1), 0.0)
    np.testing.assert_allclose(log_emis, expected, rtol=1e-12)
    log_init, log_trans = log_chain_params(plan, [point[n] for n in plan.inputs])
    np.testing.assert_allclose(np.exp(log_init), init, rtol=1e-15)
    np.testing.assert_allclose(np.exp(log_trans), np.stack([TRANS, TRANS]), rtol=1e-15)


def test_without_children_samples_the_prior_and_potentials_count():
    """No child: FFBS draws follow the MarkovChain law itself (chi-square of 8000 draws over
    16 paths at rate 1e-6; control: the transposed-P law is rejected). A Potential reading the
    states is a child term like any other."""
    with pm.Model() as model:
        MarkovChain("s", INIT, TRANS, shape=T)
    draws = sample_states(model)
    prior = path_log_prior(INIT, TRANS, PATHS)
    assert_gof(chisquare_gof(codes(draws), lambda c: prior[c]), what="prior")
    wrong = path_log_prior(INIT, TRANS.T / TRANS.T.sum(1, keepdims=True), PATHS)
    assert_rejects(chisquare_gof(codes(draws), lambda c: wrong[c]), what="transposed P")
    with pm.Model() as model:
        s = MarkovChain("s", INIT, TRANS, shape=T)
        pm.Potential("only_zero", pt.switch(pt.eq(s, 0), 0.0, -np.inf))
        step = FFBS([s], rng=2)
    point = model.initial_point()
    for _ in range(20):
        point, _ = step.step(point)
        np.testing.assert_array_equal(point["s"], 0)
