"""Tests of pymc_dp.distributions.markov_chain: exact logp, exact draws, validation."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.distributions.shape_utils import change_dist_size

from pymc_dp.distributions.markov_chain import MarkovChain, MarkovChainRV
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof

INIT = np.array([0.2, 0.5, 0.3])
TRANS = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])


def brute_logp(path, init, trans):
    """log pi[s0] + sum log P[s_{t-1}, s_t] by a plain loop."""
    with np.errstate(divide="ignore"):
        lp = np.log(init[path[0]])
        for a, b in itertools.pairwise(path):
            lp += np.log(trans[a, b])
    return lp


def path_table(init, trans, steps):
    """Exact log-probabilities of all K^T paths, indexed by their base-K code."""
    k = init.shape[-1]
    paths = np.array(list(itertools.product(range(k), repeat=steps)))
    return np.array([brute_logp(p, init, trans) for p in paths])


def path_codes(draws, k):
    steps = draws.shape[-1]
    return (draws * k ** np.arange(steps - 1, -1, -1)).sum(-1).ravel()


def test_logp_matches_brute_force_with_batches():
    rng = np.random.default_rng(0)
    init = rng.dirichlet(np.ones(3), size=2)  # (2, K): one per region
    trans = rng.dirichlet(np.ones(3), size=3)  # (K, K), shared
    values = rng.integers(0, 3, size=(2, 6))
    lp = pm.logp(MarkovChain.dist(init, trans, shape=(2, 6)), values).eval()
    expected = [brute_logp(values[r], init[r], trans) for r in range(2)]
    np.testing.assert_allclose(lp, expected, rtol=1e-13)
    lp_batched = pm.logp(
        MarkovChain.dist(
            INIT, np.stack([TRANS, TRANS.T / TRANS.T.sum(-1, keepdims=True)]), shape=(2, 6)
        ),
        values,
    ).eval()
    other = TRANS.T / TRANS.T.sum(-1, keepdims=True)
    np.testing.assert_allclose(
        lp_batched,
        [brute_logp(values[0], INIT, TRANS), brute_logp(values[1], INIT, other)],
        rtol=1e-13,
    )


def test_logp_outside_support_and_normalised():
    dist = MarkovChain.dist(INIT, TRANS, shape=4)
    for bad in ([0, 3, 1, 1], [-1, 0, 0, 0]):
        assert pm.logp(dist, np.array(bad)).eval() == -np.inf
    value = pt.lvector("v")
    f = pm.compile([value], pm.logp(dist, value))
    total = np.logaddexp.reduce([f(np.array(p)) for p in itertools.product(range(3), repeat=4)])
    assert abs(total) < 1e-12


def test_logp_with_zero_transition_is_minus_inf():
    trans = np.array([[1.0, 0.0], [0.5, 0.5]])
    lp = pm.logp(MarkovChain.dist(np.array([1.0, 0.0]), trans, shape=3), np.array([0, 1, 1]))
    assert lp.eval() == -np.inf


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_draws_match_exact_path_probabilities(backend):
    """Chi-square of 4-step paths (81 categories) against the exact law; false-alarm 1e-6.

    Negative control: the same draws against a chain with a wrong transition matrix (rows
    swapped) are rejected by the same test.
    """
    steps, n = 4, 30000
    table = path_table(INIT, TRANS, steps)
    if backend == "numba":
        draws = pm.draw(MarkovChain.dist(INIT, TRANS, shape=(n, steps)), random_seed=11)
    else:
        draws = MarkovChainRV.rng_fn(np.random.default_rng(11), INIT, TRANS, steps, (n,))
    codes = path_codes(draws, 3)
    assert_gof(chisquare_gof(codes, lambda c: table[c]), what="exact paths")
    wrong = path_table(INIT, TRANS[[1, 0, 2]], steps)
    assert_rejects(chisquare_gof(codes, lambda c: wrong[c]), what="wrong transition")


def test_chains_are_independent_and_broadcast():
    """Two regions with different initial laws: each row follows its own law (rate 1e-6 each)."""
    init = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    draws = pm.draw(MarkovChain.dist(init, TRANS, shape=(2, 3)), draws=20000, random_seed=5)
    assert draws.shape == (20000, 2, 3)
    for r in range(2):
        table = path_table(init[r], TRANS, 3)
        assert_gof(chisquare_gof(path_codes(draws[:, r], 3), lambda c, t=table: t[c]))


def test_model_dims_support_point_resize_and_predictive():
    coords = {"region": range(2), "month": range(5)}
    with pm.Model(coords=coords) as model:
        trans = pm.Dirichlet("trans", np.ones(2), shape=(2, 2))
        MarkovChain("s", np.array([0.5, 0.5]), trans, dims=("region", "month"))
    point = model.initial_point()
    assert point["s"].shape == (2, 5)
    assert np.isfinite(model.compile_logp()(point))
    prior = pm.sample_prior_predictive(draws=7, model=model, random_seed=1)
    assert prior.prior["s"].shape == (1, 7, 2, 5)
    s = MarkovChain.dist(INIT, TRANS, shape=(3, 4))
    assert pm.draw(change_dist_size(s, (5, 3)), random_seed=1).shape == (5, 3, 4)
    assert pm.draw(MarkovChain.dist(INIT, TRANS, steps=6), random_seed=1).shape == (6,)


def test_support_point_has_positive_probability():
    trans = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    init = np.array([0.0, 0.0, 1.0])
    with pm.Model() as model:
        MarkovChain("s", init, trans, shape=5)
    np.testing.assert_array_equal(model.initial_point()["s"], [2, 0, 1, 2, 0])


@pytest.mark.parametrize(
    ("init", "trans", "match"),
    [
        (np.array([0.5, 0.6]), np.eye(2), "init_probs"),
        (np.array([-0.5, 1.5]), np.eye(2), "init_probs"),
        (np.array([0.5, np.nan]), np.eye(2), "init_probs"),
        (np.array([0.5, 0.5]), np.array([[0.5, 0.5], [0.5, 0.5 + 2e-8]]), "transition"),
        (np.array([0.5, 0.5]), np.array([[1.5, -0.5], [0.5, 0.5]]), "transition"),
        (np.array([0.5, 0.5]), np.eye(3), "number of states"),
        (np.array([0.5, 0.5]), np.ones((2, 3)) / 3, "number of states"),
    ],
)
def test_validation(init, trans, match):
    with pytest.raises(ValueError, match=match):
        MarkovChain.dist(init, trans, shape=3)


def test_validation_tolerance_and_steps():
    # rows off by 1e-9 are accepted (tolerance 1e-8)
    MarkovChain.dist(np.array([0.5, 0.5 + 1e-9]), np.eye(2), shape=3)
    with pytest.raises(ValueError, match="shape"):
        MarkovChain.dist(INIT, TRANS)
