"""Bayesian-network count releases (Zhang et al. 2016, Alg. 1): tables, sensitivity, posterior.

References are exact: tables counted by hand, the sensitivity against brute-force enumeration of
every replace-one neighbour, the plug-in posterior against Dirichlet parameters written by hand.
Where noise matters its value is recovered exactly (same generator) or the assertion holds for
any noise draw; the one statistical precondition (a negative noisy count) has a stated rate.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.releases.bayes_net import (
    BayesNetCountsRelease,
    DiscreteBayesNet,
    bayes_net_count_tables,
    release_bayes_net_counts,
)

# a (2 states) -> b (3 states); a, b -> c (2 states)
NET = DiscreteBayesNet({"a": 2, "b": 3, "c": 2}, {"b": ["a"], "c": ["a", "b"]})
DATA = np.array(
    [
        [0, 0, 1],
        [0, 2, 0],
        [1, 1, 1],
        [1, 1, 0],
        [0, 0, 1],
        [1, 2, 1],
    ]
)
# counted by hand from DATA
TRUE = {
    "a": np.array([3, 3]),
    "b": np.array([[2, 0, 1], [0, 2, 1]]),  # b | a
    "c": np.array(  # c | a, b
        [
            [[0, 2], [0, 0], [1, 0]],
            [[0, 0], [1, 1], [0, 1]],
        ]
    ),
}
TINY = 1e-12  # Laplace scale: |noise| < 1e-6 except with probability exp(-1e6)


def _near_exact(data=DATA, net=NET):
    mech = pmdp.Laplace(scale=TINY, sensitivity=float(2 * len(net.nodes)))
    return release_bayes_net_counts(
        data, net, mechanism=mech, rng=np.random.default_rng(0), allow_float=True
    )


def test_count_tables_match_hand_count():
    got = bayes_net_count_tables(DATA, NET)
    assert list(got) == ["a", "b", "c"]
    for v in TRUE:
        assert got[v].shape == NET.table_shape(v)
        np.testing.assert_array_equal(got[v], TRUE[v])
    by_name = bayes_net_count_tables({v: DATA[:, j] for j, v in enumerate(NET.nodes)}, NET)
    for v in TRUE:
        np.testing.assert_array_equal(by_name[v], TRUE[v])


def test_count_tables_follow_parent_order():
    net = DiscreteBayesNet({"a": 2, "b": 3, "c": 2}, {"b": ["a"], "c": ["b", "a"]})
    got = bayes_net_count_tables(DATA, net)["c"]
    assert got.shape == (3, 2, 2)
    np.testing.assert_array_equal(got, TRUE["c"].transpose(1, 0, 2))


def _l1_l2_change(t1, t2):
    d = np.concatenate([(t1[v] - t2[v]).ravel() for v in t1])
    return int(np.abs(d).sum()), int((d * d).sum())


@pytest.mark.parametrize(
    "net",
    [
        NET,
        DiscreteBayesNet({"a": 2, "b": 2, "c": 3}, {"b": ["a"], "c": ["b"]}),  # chain
        DiscreteBayesNet({"a": 3, "b": 2, "c": 2}),  # no edges
    ],
)
def test_sensitivity_equals_brute_force_max_over_replace_one_neighbours(net):
    """All datasets of 2 records and every replacement of one record by any configuration:
    the largest L1 change of all tables together is 2|I| = 6 exactly, the L2² change 6."""
    configs = list(itertools.product(*(range(k) for k in net.cardinalities)))
    best_l1 = best_l2sq = 0
    for d in itertools.product(configs, repeat=2):
        base = bayes_net_count_tables(np.array(d), net)
        for i, new in itertools.product(range(2), configs):
            nb = np.array(d)
            nb[i] = new
            l1, l2sq = _l1_l2_change(base, bayes_net_count_tables(nb, net))
            best_l1, best_l2sq = max(best_l1, l1), max(best_l2sq, l2sq)
    l1, l2 = net.sensitivity()
    assert best_l1 == 6 and l1 == 6.0
    assert best_l2sq == 6  # L2: sqrt(6), rounded up to the nearest double
    assert Fraction(l2) ** 2 >= 6 > Fraction(np.nextafter(l2, 0.0)) ** 2


def test_laplace_release_is_tables_plus_noise_and_guarantee_is_exact():
    rel = release_bayes_net_counts(
        DATA,
        NET,
        mechanism=functools.partial(pmdp.Laplace, epsilon=0.5),
        rng=np.random.default_rng(7),
        allow_float=True,
    )
    assert isinstance(rel, BayesNetCountsRelease)
    assert rel.mechanism.scale == 12.0  # 2|I| / epsilon
    assert rel.guarantee().epsilon == 0.5 and rel.sensitivity[0] == 6.0 and rel.n == 6
    flat = np.concatenate([TRUE[v].ravel() for v in ("a", "b", "c")])
    noise = np.random.default_rng(7).laplace(0.0, 12.0, size=flat.size)
    got = np.concatenate([rel.tables[v].ravel() for v in ("a", "b", "c")])
    np.testing.assert_allclose(got, flat + noise, rtol=0, atol=1e-12)
    assert not rel.tables["c"].flags.writeable
    with pytest.raises(TypeError):
        rel.tables["a"] = TRUE["a"]
    with pytest.raises(AttributeError):
        rel.n = 7


def test_geometric_release_is_integer_with_exact_guarantee():
    rel = release_bayes_net_counts(
        DATA,
        NET,
        mechanism=functools.partial(pmdp.Geometric, epsilon=1.0),
        rng=np.random.default_rng(1),
    )
    assert rel.mechanism.sensitivity == 6 and rel.guarantee().epsilon == pytest.approx(1.0, 1e-12)
    for v in TRUE:
        assert rel.tables[v].dtype == np.int64 and rel.tables[v].shape == TRUE[v].shape


def test_mechanism_below_the_sensitivity_is_refused():
    with pytest.raises(ValueError, match="below"):
        release_bayes_net_counts(
            DATA, NET, mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=5.0), allow_float=True
        )
    with pytest.raises(ValueError, match="below"):
        release_bayes_net_counts(DATA, NET, mechanism=pmdp.Geometric(epsilon=1.0, sensitivity=2))
    ok = release_bayes_net_counts(
        DATA, NET, mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=6.0), allow_float=True
    )
    assert ok.guarantee().epsilon == 1.0


def test_plugin_posterior_equals_hand_computed_dirichlet_parameters():
    rel = _near_exact()
    post = rel.plugin_posterior(0.5)
    hand = {
        "a": [3.5, 3.5],
        "b": [[2.5, 0.5, 1.5], [0.5, 2.5, 1.5]],
        "c": [[[0.5, 2.5], [0.5, 0.5], [1.5, 0.5]], [[0.5, 0.5], [1.5, 1.5], [0.5, 1.5]]],
    }
    for v in hand:
        np.testing.assert_allclose(post[v], hand[v], rtol=0, atol=1e-6)
    per_node = rel.plugin_posterior({"a": [1.0, 2.0], "b": 1.0, "c": np.full((2, 3, 2), 3.0)})
    np.testing.assert_allclose(per_node["a"], [4.0, 5.0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(per_node["c"], TRUE["c"] + 3.0, rtol=0, atol=1e-6)


def test_plugin_posterior_uses_projection_and_differs_without_it():
    """Noisy tables with a negative cell and a cell above n = 6, set by hand (no randomness):
    the plug-in posterior is prior + clip(tables, 0, n); without the clip it differs."""
    noisy = {
        "a": np.array([-2.5, 3.25]),
        "b": np.array([[2.0, 0.0, 9.5], [0.0, 2.0, 1.0]]),
        "c": TRUE["c"]
        + np.array([-1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 0.0]).reshape(2, 3, 2),
    }
    mech = pmdp.Laplace(epsilon=1.0, sensitivity=6.0)
    rel = BayesNetCountsRelease(NET, noisy, mech, 6, NET.sensitivity())
    raw = np.concatenate([rel.tables[v].ravel() for v in NET.nodes])
    assert np.any(raw < 0) and np.any(raw > rel.n)
    post = rel.plugin_posterior(1.0)
    proj = rel.projected()
    for v in NET.nodes:
        clipped = np.clip(rel.tables[v], 0.0, 6.0)
        np.testing.assert_array_equal(proj[v], clipped)
        np.testing.assert_array_equal(post[v], 1.0 + clipped)
        assert np.all(post[v] > 0)
    # control: the parameters without the projection differ (and are invalid)
    unprojected = np.concatenate([(1.0 + rel.tables[v]).ravel() for v in NET.nodes])
    with_projection = np.concatenate([post[v].ravel() for v in NET.nodes])
    assert not np.allclose(unprojected, with_projection)
    assert np.any(unprojected <= 0)


@pytest.mark.parametrize(
    ("states", "parents", "match"),
    [
        ({"a": 2, "b": 2}, {"b": ["a"], "a": ["b"]}, "parents.*acyclic"),
        ({"a": 2, "b": 2, "c": 2}, {"a": ["c"], "b": ["a"], "c": ["b"]}, "parents.*cycle"),
        ({"a": 2, "b": 2}, {"b": ["z"]}, r"parents\['b'\].*unknown"),
        ({"a": 2, "b": 2}, {"z": ["a"]}, "parents names nodes not in states"),
        ({"a": 2, "b": 2}, {"b": ["b"]}, r"parents\['b'\]"),
        ({"a": 2, "b": 2}, {"b": ["a", "a"]}, r"parents\['b'\]"),
        ({"a": 2, "b": 2}, {"b": "a"}, r"parents\['b'\]"),
        ({"a": 2, "b": 1}, None, r"states\['b'\]"),
        ({"a": 2, "b": 2.5}, None, r"states\['b'\]"),
        ({"a": 2, "b": True}, None, r"states\['b'\]"),
        ({}, None, "states"),
        ({"a": 2}, [("a", [])], "parents must be a mapping"),
    ],
)
def test_network_validation_names_the_argument(states, parents, match):
    with pytest.raises(ValueError, match=match):
        DiscreteBayesNet(states, parents)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (DATA[:, :2], r"shape \(n, 3\)"),
        (np.array([[0, 3, 0]]), "0..states_j - 1"),
        (np.array([[0, -1, 0]]), "0..states_j - 1"),
        (np.array([[0.5, 0, 0]]), "whole numbers"),
        (np.array([[np.nan, 0, 0]]), "finite"),
        ({"a": [0], "b": [0]}, "exactly the nodes"),
        ({"a": [0], "b": [0], "c": [0, 1]}, "equal length"),
    ],
)
def test_data_validation(data, match):
    with pytest.raises(ValueError, match=match):
        release_bayes_net_counts(
            data, NET, mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=6.0), allow_float=True
        )


def test_prior_validation():
    rel = _near_exact()
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="finite and > 0"):
            rel.plugin_posterior(bad)
    with pytest.raises(ValueError, match="exactly the nodes"):
        rel.plugin_posterior({"a": 1.0})
    with pytest.raises(ValueError, match="broadcast"):
        rel.plugin_posterior({"a": [1.0, 1.0, 1.0], "b": 1.0, "c": 1.0})
    with pytest.raises(TypeError, match="DiscreteBayesNet"):
        bayes_net_count_tables(DATA, {"a": 2})


def test_gaussian_is_calibrated_to_the_l2_sensitivity():
    rel = release_bayes_net_counts(
        DATA,
        NET,
        mechanism=functools.partial(pmdp.Gaussian, rho=0.5),
        rng=np.random.default_rng(2),
        allow_float=True,
    )
    assert rel.mechanism.sensitivity == NET.sensitivity()[1]
    assert rel.guarantee().rho == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ValueError, match="L2 sensitivity"):
        release_bayes_net_counts(
            DATA, NET, mechanism=pmdp.Gaussian(rho=0.5, sensitivity=2.0), allow_float=True
        )
