"""Tests of pymc_dp.kernels.ffbs against the exact posterior by enumeration of all K^T paths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymc_dp.kernels.ffbs import ffbs_sample, forward_filter
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof

K, T = 3, 4
PATHS = np.array(list(itertools.product(range(K), repeat=T)))


def _problem(seed):
    rng = np.random.default_rng(seed)
    log_init = np.log(rng.dirichlet(np.ones(K)))
    log_trans = np.log(rng.dirichlet(np.ones(K) * 0.7, size=K))
    log_emis = rng.normal(0.0, 1.5, size=(T, K))
    return log_init, log_trans, log_emis


def exact_path_logprobs(log_init, log_trans, log_emis):
    """Normalised log posterior of every path (base-K code order), and log p(data)."""
    lp = log_init[PATHS[:, 0]] + log_emis[0, PATHS[:, 0]]
    for t in range(1, T):
        lp = lp + log_trans[PATHS[:, t - 1], PATHS[:, t]] + log_emis[t, PATHS[:, t]]
    log_z = np.logaddexp.reduce(lp)
    return lp - log_z, log_z


def codes(states):
    return (states * K ** np.arange(T - 1, -1, -1)).sum(-1)


def tiled(n, log_init, log_trans, log_emis):
    return (
        np.tile(log_init, (n, 1)),
        np.tile(log_trans, (n, 1, 1)),
        np.tile(log_emis, (n, 1, 1)),
    )


def filter_only_sample(log_init, log_trans, log_emis, rng):
    """Negative control: each s_t drawn independently from its filtered marginal (no backward
    pass)."""
    log_alpha, _ = forward_filter(log_init, log_trans, log_emis)
    p = np.exp(log_alpha)
    u = rng.random(p.shape[:-1])[..., None]
    return (u >= np.cumsum(p, axis=-1)).sum(-1).clip(0, K - 1)


@pytest.mark.parametrize("seed", [1, 2])
def test_ffbs_draws_match_enumeration(seed):
    """Chi-square of 40,000 FFBS paths over the 81 paths; false-alarm rate 1e-6 per assertion.

    Negative controls, each rejected by the same test: the filter-only sampler (draws each
    s_t from p(s_t | data_0:t), no backward pass), and FFBS run with the transposed transition
    matrix.
    """
    log_init, log_trans, log_emis = _problem(seed)
    exact, _ = exact_path_logprobs(log_init, log_trans, log_emis)
    n = 40000
    args = tiled(n, log_init, log_trans, log_emis)
    states, _ = ffbs_sample(*args, np.random.default_rng(seed))
    assert_gof(chisquare_gof(codes(states), lambda c: exact[c]), what="FFBS")
    wrong = filter_only_sample(*args, np.random.default_rng(seed + 100))
    assert_rejects(chisquare_gof(codes(wrong), lambda c: exact[c]), what="filter only")
    bad_trans = np.tile(log_trans.T.copy(), (n, 1, 1))
    wrong2, _ = ffbs_sample(args[0], bad_trans, args[2], np.random.default_rng(seed + 200))
    assert_rejects(chisquare_gof(codes(wrong2), lambda c: exact[c]), what="transposed P")


def test_log_marginal_exact_and_batched_chains_independent():
    problems = [_problem(s) for s in (3, 4, 5)]
    log_init = np.stack([p[0] for p in problems])
    log_trans = np.stack([p[1] for p in problems])
    log_emis = np.stack([p[2] for p in problems])
    _, log_marginal = ffbs_sample(log_init, log_trans, log_emis, np.random.default_rng(0))
    expected = [exact_path_logprobs(*p)[1] for p in problems]
    np.testing.assert_allclose(log_marginal, expected, rtol=1e-13)


def test_zero_probabilities_are_respected():
    """Forbidden transitions and impossible emissions never appear (a deterministic cycle)."""
    with np.errstate(divide="ignore"):
        log_trans = np.log(np.array([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.0, 0.5]]]))
        log_init = np.log(np.array([[1.0, 0.0, 0.0]]))
    log_emis = np.zeros((1, 5, 3))
    args = tiled(500, log_init[0], log_trans[0], log_emis[0])
    states, _ = ffbs_sample(*args, np.random.default_rng(0))
    np.testing.assert_array_equal(states[:, :3], np.tile([0, 1, 2], (500, 1)))
    assert set(np.unique(states[:, 3])) <= {0, 2}
    assert not np.any((states[:, 3] == 0) & (states[:, 4] != 1))


def test_refusals():
    log_init = np.log(np.full((1, 2), 0.5))
    log_trans = np.log(np.full((1, 2, 2), 0.5))
    with pytest.raises(ValueError, match="no state path"):
        ffbs_sample(log_init, log_trans, np.full((1, 3, 2), -np.inf), np.random.default_rng(0))
    with pytest.raises(ValueError, match="shapes disagree"):
        ffbs_sample(log_init, log_trans, np.zeros((1, 3, 3)), np.random.default_rng(0))
