"""Private MAP of a discrete Bayesian network (Zhang et al. 2016, Alg. 3): exact selection law,
goodness of fit of the draws, exact privacy loss over all replace-one neighbours, validation."""

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_dp.kernels.exponential_mechanism import sample_exponential_mechanism
from pymc_dp.releases.bayes_net import DiscreteBayesNet
from pymc_dp.releases.bayes_net_map import (
    UTILITY_GRID,
    _exact_law,
    _select,
    map_selection_log_probabilities,
    map_utility_sensitivity,
    private_map,
)
from pymc_dp.testing import empirical_epsilon_lower_bound

ALPHA = 1e-6  # false-alarm rate of each chi-square assertion
N = 10_000  # releases per data set in the support test

NET = DiscreteBayesNet({"a": 2, "b": 3}, {"b": ["a"]})
CANDS = [
    {"a": [0.3, 0.7], "b": [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]},
    {"a": [0.6, 0.4], "b": [[0.1, 0.1, 0.8], [0.25, 0.5, 0.25]]},
    {"a": [0.5, 0.5], "b": [[1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]]},
]
DATA = [[0, 2], [1, 0], [1, 1], [0, 2], [1, 0]]


def _hand_log_probs(data, cands, epsilon, prior):
    """Reference: Zhang et al.'s law written out by hand (record-by-record log-likelihood,
    scipy Dirichlet log prior, Delta as the sum over nodes of each table's log range), as
    ``(log probabilities, utilities, Delta)``."""
    u, spans = [], []
    for c in cands:
        ll = sum(np.log(c["a"][a]) + np.log(c["b"][a][b]) for a, b in data)
        lp = stats.dirichlet.logpdf(c["a"], [prior] * 2) + sum(
            stats.dirichlet.logpdf(row, [prior] * 3) for row in c["b"]
        )
        u.append(ll + lp)
        spans.append(
            np.log(max(c["a"]))
            - np.log(min(c["a"]))
            + np.log(np.max(c["b"]))
            - np.log(np.min(c["b"]))
        )
    w = epsilon * np.asarray(u) / (2 * max(spans))
    return w - logsumexp(w), np.asarray(u), max(spans)


@pytest.mark.parametrize("prior", [1.0, 2.5])
def test_selection_probabilities_equal_hand_softmax(prior):
    ref, _, delta = _hand_log_probs(DATA, CANDS, 0.7, prior)
    got = map_selection_log_probabilities(
        DATA, NET, epsilon=0.7, candidates=CANDS, prior=prior, allow_float=True
    )
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    # the exact mechanism's law (utility on the 2**-24 grid) is within 1e-6 of it (the
    # derived bound: test_private_map_exact_law_and_draws)
    exact = map_selection_log_probabilities(DATA, NET, epsilon=0.7, candidates=CANDS, prior=prior)
    assert np.max(np.abs(exact - ref)) < 1e-6
    assert map_utility_sensitivity(NET, CANDS) == pytest.approx(delta, rel=1e-14)
    # control: the softmax at twice epsilon is a different law
    assert np.max(np.abs(got - _hand_log_probs(DATA, CANDS, 1.4, prior)[0])) > 1e-2


def test_sensitivity_bound_covers_brute_force_and_is_attained_without_parents():
    joint = list(itertools.product(range(2), range(3)))
    for c in CANDS:  # sup over record pairs of |log p(x) - log p(y)| <= Delta
        lp = [np.log(c["a"][a]) + np.log(c["b"][a][b]) for a, b in joint]
        assert max(lp) - min(lp) <= map_utility_sensitivity(NET, CANDS) + 1e-12
    flat = DiscreteBayesNet({"a": 2, "b": 3})
    cands = [{"a": [0.3, 0.7], "b": [0.2, 0.3, 0.5]}]
    lp = [np.log(cands[0]["a"][a]) + np.log(cands[0]["b"][b]) for a, b in joint]
    assert map_utility_sensitivity(flat, cands) == pytest.approx(max(lp) - min(lp), rel=1e-14)


def _chi2_p(counts, log_probs):
    expected = counts.sum() * np.exp(log_probs)
    return stats.chisquare(counts, expected).pvalue


def test_draws_follow_the_selection_law_chi_square(rng):
    n_draws, eps = 100_000, 0.7
    logp = map_selection_log_probabilities(
        DATA, NET, epsilon=eps, candidates=CANDS, allow_float=True
    )
    # the floating-point opt-in draws its index with _select from the same log probabilities
    # and generator (the exact default: test_private_map_exact_law_and_draws)
    for seed in range(20):
        res = private_map(DATA, NET, epsilon=eps, candidates=CANDS, rng=seed, allow_float=True)
        assert res.index == _select(logp, np.random.default_rng(seed))
        for v, t in res.estimate.items():
            np.testing.assert_array_equal(t, CANDS[res.index][v])
    draws = _select(logp, rng, size=n_draws)
    counts = np.bincount(draws, minlength=len(CANDS))
    assert _chi2_p(counts, logp) > ALPHA
    control = map_selection_log_probabilities(
        DATA, NET, epsilon=2 * eps, candidates=CANDS, allow_float=True
    )
    assert _chi2_p(counts, control) < ALPHA


def _max_privacy_loss(net, cands, epsilon, n, allow_float=False):
    """Exact max |log P(c | D) - log P(c | D')| over all datasets of n records and all their
    replace-one neighbours (the exact mechanism's law by default)."""
    joint = list(itertools.product(*(range(k) for k in net.cardinalities)))
    worst = 0.0
    for data in itertools.product(joint, repeat=n):
        lp = map_selection_log_probabilities(
            list(data), net, epsilon=epsilon, candidates=cands, allow_float=allow_float
        )
        for i, y in itertools.product(range(n), joint):
            nb = list(data)
            nb[i] = y
            lq = map_selection_log_probabilities(
                nb, net, epsilon=epsilon, candidates=cands, allow_float=allow_float
            )
            worst = max(worst, float(np.max(np.abs(lp - lq))))
    return worst


SINGLE = DiscreteBayesNet({"a": 2})
SINGLE_CANDS = [{"a": [0.9, 0.1]}, {"a": [0.1, 0.9]}]


@pytest.mark.parametrize(
    ("net", "cands", "n"), [(SINGLE, SINGLE_CANDS, 4), (NET, CANDS, 2)], ids=["single", "a->b"]
)
def test_exact_privacy_loss_within_epsilon(net, cands, n):
    eps = 1.0
    assert _max_privacy_loss(net, cands, eps, n) <= eps + 1e-12
    assert _max_privacy_loss(net, cands, eps, n, allow_float=True) <= eps + 1e-12


def test_half_sensitivity_control_exceeds_epsilon():
    # Delta / 2 in place of Delta is the softmax at 2 epsilon: its loss must exceed epsilon
    # (exact value: log sigmoid(-2) - log sigmoid(-4) = 1.8909 at the all-ones dataset)
    loss = _max_privacy_loss(SINGLE, SINGLE_CANDS, 2.0, 4, allow_float=True)
    assert loss > 1.5
    ref = np.log(1 / (1 + np.exp(2.0))) - np.log(1 / (1 + np.exp(4.0)))
    assert loss == pytest.approx(ref, rel=1e-12)
    # the exact mechanism at twice the rate: the same loss up to the utility grid's rounding
    assert _max_privacy_loss(SINGLE, SINGLE_CANDS, 2.0, 4) == pytest.approx(ref, abs=1e-6)


def test_guarantee_is_pure_epsilon():
    g = private_map(
        DATA, NET, epsilon=0.7, candidates=CANDS, rng=np.random.default_rng(1)
    ).guarantee()
    assert (g.epsilon, g.delta) == (0.7, 0.0)


# ---- the exact mechanism (the default): law, draws, support test ---------------------------
def test_private_map_exact_law_and_draws(rng):
    eps = 0.7
    got = map_selection_log_probabilities(DATA, NET, epsilon=eps, candidates=CANDS)
    ref, u, delta = _hand_log_probs(DATA, CANDS, eps, 1.0)
    # rounding bound: g u~ is within (n |V| + |rows|) g/2 of u (each rounded log is off by
    # <= g/2), Delta~ g within |V| g of Delta (two roundings per node); the weights
    # eps u / (2 Delta) move by at most eps/(2 Delta) (that + |u| |V| g / (Delta - |V| g)),
    # and the normalised log-probabilities by at most twice that (the rate's rounding to s/t,
    # relative 2^-60, is far below)
    g, n_nodes = UTILITY_GRID, 2
    terms = (len(DATA) * n_nodes + 3) * g / 2 + np.abs(u).max() * n_nodes * g / (delta - 2 * g)
    assert np.max(np.abs(got - ref)) <= 2 * eps / (2 * delta) * terms * (1 + 1e-9) + 1e-14
    # private_map's draw is the kernel's draw on the exact law, from the same words
    q, r, d = _exact_law(DATA, NET, eps, CANDS, 1.0)[:3]
    for seed in range(10):
        res = private_map(DATA, NET, epsilon=eps, candidates=CANDS, rng=np.random.default_rng(seed))
        assert (
            res.index
            == sample_exponential_mechanism(q, r, d, size=1, rng=np.random.default_rng(seed))[0]
        )
    draws = sample_exponential_mechanism(q, r, d, size=100_000, rng=rng)
    assert _chi2_p(np.bincount(draws, minlength=3), ref) > ALPHA
    # negative control: the law at twice epsilon
    assert (
        _chi2_p(np.bincount(draws, minlength=3), _hand_log_probs(DATA, CANDS, 2 * eps, 1.0)[0])
        < ALPHA
    )


D0 = [[0]] * 4
D1 = [[0]] * 3 + [[1]]  # a replace-one neighbour


def _map_draws(data, epsilon, rng):
    """10^3 releases by private_map, the rest by the kernel on its exact law."""
    calls = [
        private_map(data, SINGLE, epsilon=epsilon, candidates=SINGLE_CANDS, rng=rng).index
        for _ in range(N // 10)
    ]
    q, r, d = _exact_law(data, SINGLE, epsilon, SINGLE_CANDS, 1.0)[:3]
    return np.concatenate([calls, sample_exponential_mechanism(q, r, d, size=N - N // 10, rng=rng)])


def test_private_map_support_test(rng):
    eps = 1.0
    # "candidate 1 selected": P = sigmoid(-1) = 0.269 under D1, sigmoid(-2) = 0.119 under D0
    z1, z0 = _map_draws(D1, eps, rng), _map_draws(D0, eps, rng)
    lb = empirical_epsilon_lower_bound(z1, z0, lambda z: np.asarray(z) == 1)
    assert lb <= eps
    # negative control: twice the rate (Delta in place of 2 Delta): log ratio 1.89 > epsilon
    w1, w0 = _map_draws(D1, 2 * eps, rng), _map_draws(D0, 2 * eps, rng)
    assert empirical_epsilon_lower_bound(w1, w0, lambda z: np.asarray(z) == 1) > eps


def test_private_map_rng_and_opt_in():
    with pytest.raises(TypeError, match="rng"):
        private_map(DATA, NET, epsilon=1.0, candidates=CANDS, rng=3)
    with pytest.raises(TypeError, match="allow_float"):
        private_map(DATA, NET, epsilon=1.0, candidates=CANDS, allow_float="yes")
    # the float opt-in keeps Zhang et al.'s softmax and accepts an int seed
    res = private_map(DATA, NET, epsilon=1.0, candidates=CANDS, rng=3, allow_float=True)
    assert 0 <= res.index < 3
    fl = map_selection_log_probabilities(DATA, NET, epsilon=1.0, candidates=CANDS, allow_float=True)
    np.testing.assert_allclose(fl, _hand_log_probs(DATA, CANDS, 1.0, 1.0)[0], rtol=0, atol=1e-12)
    # an epsilon below the smallest rational rate selects uniformly (0-DP), never an error
    tiny = map_selection_log_probabilities(DATA, NET, epsilon=1e-300, candidates=CANDS)
    np.testing.assert_allclose(tiny, np.log(np.full(3, 1 / 3)), rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"prior": -1.0}, "prior"),
        ({"prior": float("nan")}, "prior"),
        ({"candidates": []}, "candidates"),
        ({"candidates": CANDS[0]}, "candidates"),
        ({"candidates": [{"a": [0.5, 0.5]}]}, "candidates"),
        ({"candidates": [{**CANDS[0], "a": [1.0, 0.0]}]}, "candidates"),
        ({"candidates": [{**CANDS[0], "a": [0.6, 0.6]}]}, "candidates"),
        ({"candidates": [{**CANDS[0], "a": [0.5, 0.5, 0.0]}]}, "candidates"),
        ({"candidates": [{**CANDS[0], "a": [float("nan"), 0.5]}]}, "candidates"),
        ({"network": "a->b"}, "network"),
        ({"data": [[0, 3]]}, "data"),
    ],
)
def test_validation_names_the_argument(kwargs, name):
    args = {"data": DATA, "network": NET, "epsilon": 1.0, "candidates": CANDS} | kwargs
    data, net = args.pop("data"), args.pop("network")
    with pytest.raises(ValueError, match=name):
        private_map(data, net, **args)
