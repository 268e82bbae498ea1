"""Alg. 2 of Zhang et al. (2016): Fourier coefficients, sensitivity, privacy loss, consistency.

All checks are exact (enumeration, brute-force sums; no statistics, so no false-alarm rate):

* the coefficients against the two textbook definitions (the record sum and the inner product
  with the normalised basis vector ``f^alpha`` on the full table), the reconstruction against
  the brute-force inverse; negative control: the check sees a one-record change;
* the sensitivity against the maximum over all replace-one neighbours on tiny domains;
* the privacy loss of the released counts, enumerated over all datasets of two records, all
  neighbours and a box of outputs, equals the stated epsilon; negative control: the noise at
  half the scale has loss 2 epsilon;
* consistency: shared sub-marginals of the reconstructed tables agree exactly; negative
  control: Alg. 1's independently noised tables disagree.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.releases import (
    DiscreteBayesNet,
    bayes_net_count_tables,
    bayes_net_fourier_coefficients,
    fourier_closure,
    fourier_sensitivity,
    release_bayes_net_counts,
    release_bayes_net_fourier,
)


def _naive_bayes(d):
    feats = [f"x{i}" for i in range(d)]
    return DiscreteBayesNet({"y": 2, **dict.fromkeys(feats, 2)}, dict.fromkeys(feats, ("y",)))


NETS = {
    "edge": DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]}),
    "chain": DiscreteBayesNet({"a": 2, "b": 2, "c": 2}, {"b": ["a"], "c": ["b"]}),
    "vstruct": DiscreteBayesNet({"a": 2, "b": 2, "c": 2, "d": 2}, {"c": ["b", "a"], "d": ["c"]}),
    "naive3": _naive_bayes(3),
    "lonely": DiscreteBayesNet({"a": 2, "b": 2}),
}


def _records(net, n, rng):
    return (rng.random((n, len(net.nodes))) < 0.4).astype(np.int64)


def _brute_coefficients(x, net):
    """Both definitions: sum_r (-1)^{|alpha ∩ x_r|} and 2^{d/2} <f^alpha, h> on the full table."""
    d = len(net.nodes)
    alphas = [np.array([v in a for v in net.nodes], dtype=np.int64) for a in fourier_closure(net)]
    by_records = [int(sum((-1) ** int(a @ r) for r in x)) for a in alphas]
    h = np.zeros((2,) * d)
    for r in x:
        h[tuple(r)] += 1
    cells = list(itertools.product((0, 1), repeat=d))
    by_basis = []
    for a in alphas:
        f = np.array([(-1) ** int(a @ np.array(g)) * 2 ** (-d / 2) for g in cells])
        by_basis.append(float(f @ np.array([h[g] for g in cells])) * 2 ** (d / 2))
    return by_records, by_basis


@pytest.mark.parametrize("name", NETS)
def test_coefficients_match_brute_force_definitions(name, rng):
    net = NETS[name]
    x = _records(net, 9, rng)
    got = bayes_net_fourier_coefficients(x, net)
    by_records, by_basis = _brute_coefficients(x, net)
    assert got.tolist() == by_records
    np.testing.assert_allclose(got, by_basis, rtol=0, atol=1e-9)
    assert got[0] == 9 and fourier_closure(net)[0] == ()
    y = x.copy()
    y[0] = 1 - y[0]  # negative control: the comparison sees one flipped record
    assert _brute_coefficients(y, net)[0] != got.tolist()


@pytest.mark.parametrize("name", NETS)
def test_reconstruction_is_the_brute_force_inverse(name, rng):
    """Near-zero noise gives the true tables; any coefficients give the inverse transform."""
    net = NETS[name]
    x = _records(net, 11, rng)
    rel = release_bayes_net_fourier(
        x, net, mechanism=pmdp.Laplace(scale=1e-12, sensitivity=fourier_sensitivity(net)[0]),
        rng=rng, allow_float=True,
    )  # fmt: skip
    true = bayes_net_count_tables(x, net)
    for v, t in rel.tables().items():
        np.testing.assert_allclose(t, true[v], rtol=0, atol=1e-9)
    noisy = release_bayes_net_fourier(
        x, net, mechanism=functools.partial(pmdp.Geometric, epsilon=0.7), rng=rng
    )
    coef = dict(zip(fourier_closure(net), noisy.coefficients(), strict=True))
    for v, t in noisy.tables().items():
        fam = (*net.parents[v], v)
        for beta in itertools.product((0, 1), repeat=len(fam)):
            total = 0.0
            for mask in itertools.product((0, 1), repeat=len(fam)):
                sub = tuple(
                    u for u in net.nodes if u in {f for f, m in zip(fam, mask, strict=True) if m}
                )
                total += coef[sub] * (-1) ** sum(m * b for m, b in zip(mask, beta, strict=True))
            assert math.isclose(t[beta], total / 2 ** len(fam), abs_tol=1e-9)
    assert not np.allclose(noisy.tables()[net.nodes[-1]], true[net.nodes[-1]])  # noise is there


def _parity_counts(x, net):
    return (len(x) - bayes_net_fourier_coefficients(x, net)[1:]) // 2


@pytest.mark.parametrize("name", NETS)
def test_sensitivity_equals_max_over_replace_one_neighbours(name):
    net = NETS[name]
    d = len(net.nodes)
    records = [np.array(r) for r in itertools.product((0, 1), repeat=d)]
    base = np.zeros((2, d), dtype=np.int64)  # a fixed other record: changes cancel
    worst = 0
    for r, r2 in itertools.product(records, repeat=2):
        a, b = base.copy(), base.copy()
        a[0], b[0] = r, r2
        worst = max(worst, int(np.abs(_parity_counts(a, net) - _parity_counts(b, net)).sum()))
    l1, l2 = fourier_sensitivity(net)
    assert l1 == worst and l2 >= math.sqrt(worst) and l2 == pytest.approx(math.sqrt(worst))
    # Zhang et al.'s Corollary 2 (2|N_I| in units of hat h = |N_I| parity counts) bounds it
    assert worst <= len(fourier_closure(net))


def test_naive_bayes_sensitivity_is_2d():
    for d in (1, 2, 5, 16):
        expected = max(d + 1, 2 * d)  # flip y and nothing else: d + 1; flip all x: 2d
        assert fourier_sensitivity(_naive_bayes(d))[0] == expected


@pytest.mark.parametrize("name", ["edge", "chain"])
def test_exact_privacy_loss_equals_epsilon(name):
    """Enumerate every dataset of two records and every replace-one neighbour; the log ratio of
    the released counts' pmf over a box of outputs (wide enough that the maximum is inside)
    peaks at exactly epsilon. Negative control: the same enumeration at half the noise scale
    gives 2 epsilon."""
    net, eps, n = NETS[name], 1.0, 2
    rel = release_bayes_net_fourier(
        np.zeros((n, len(net.nodes)), dtype=np.int64), net,
        mechanism=functools.partial(pmdp.Geometric, epsilon=eps), rng=np.random.default_rng(0),
    )  # fmt: skip
    assert rel.guarantee().epsilon == eps
    rate = -rel.mechanism.log_alpha
    records = [np.array(r) for r in itertools.product((0, 1), repeat=len(net.nodes))]
    datasets = [np.array(p) for p in itertools.product(records, repeat=n)]
    stats_ = [tuple(_parity_counts(x, net)) for x in datasets]
    pairs = {
        (stats_[i], stats_[j])
        for i, j in itertools.permutations(range(len(datasets)), 2)
        if int((datasets[i] != datasets[j]).any(axis=1).sum()) == 1  # replace-one neighbours
    }
    box = np.array(list(itertools.product(range(-1, n + 2), repeat=len(stats_[0]))))

    def loss(a):
        lp = {s: stats.dlaplace.logpmf(box - np.array(s), a).sum(axis=1) for s in set(stats_)}
        return max(float(np.max(lp[s] - lp[t])) for s, t in pairs)

    assert loss(rate) == pytest.approx(eps, abs=1e-9)
    assert loss(2 * rate) == pytest.approx(2 * eps, abs=1e-9)  # negative control exceeds eps


@pytest.mark.parametrize("name", ["chain", "vstruct", "naive3"])
def test_tables_are_consistent_and_alg1_tables_are_not(name, rng):
    net = NETS[name]
    x = _records(net, 30, rng)
    mech = functools.partial(pmdp.Geometric, epsilon=0.5)
    four = release_bayes_net_fourier(x, net, mechanism=mech, rng=rng).tables()
    alg1 = {v: np.asarray(t, float) for v, t in
            release_bayes_net_counts(x, net, mechanism=mech, rng=rng).tables.items()}  # fmt: skip

    def shared_gaps(tables):
        """Differences between every pair of families' marginals on their common nodes."""
        gaps = []
        for u, v in itertools.combinations(net.nodes, 2):
            fu, fv = (*net.parents[u], u), (*net.parents[v], v)
            common = [c for c in net.nodes if c in fu and c in fv]
            if not common:
                gaps.append(abs(tables[u].sum() - tables[v].sum()))  # both total n
                continue
            mu = tables[u].sum(axis=tuple(i for i, c in enumerate(fu) if c not in common))
            mv = tables[v].sum(axis=tuple(i for i, c in enumerate(fv) if c not in common))
            ou = [c for c in fu if c in common]
            ov = [c for c in fv if c in common]
            gaps.append(float(np.abs(mu - np.transpose(mv, [ov.index(c) for c in ou])).max()))
        return gaps

    assert max(shared_gaps(four)) < 1e-9
    for t in four.values():
        assert t.sum() == pytest.approx(30.0, abs=1e-9)  # n is public and exact
    assert max(shared_gaps(alg1)) > 0  # negative control: independent noise is inconsistent


def test_shift_adds_the_corollary_3_increment_to_every_cell():
    net = NETS["chain"]
    x = _records(net, 20, np.random.default_rng(5))
    mech = functools.partial(pmdp.Geometric, epsilon=0.5)
    plain = release_bayes_net_fourier(x, net, mechanism=mech, rng=np.random.default_rng(1))
    t = math.log(10.0)
    shifted = release_bayes_net_fourier(
        x, net, mechanism=mech, rng=np.random.default_rng(1), shift_t=t
    )
    n_closure = len(fourier_closure(net))
    assert shifted.shift == pytest.approx(4 * t * n_closure**2 / 0.5, rel=1e-15)
    np.testing.assert_array_equal(shifted.parity_counts, plain.parity_counts)
    for v, tab in shifted.tables().items():
        inc = shifted.shift / 2**tab.ndim
        np.testing.assert_allclose(tab - plain.tables()[v], inc, rtol=1e-12)
    assert shifted.is_nonnegative()
    np.testing.assert_allclose(
        shifted.coefficients(normalized=True), shifted.coefficients() * 2.0**-1.5, rtol=1e-15
    )


def test_plugin_and_projection():
    net = NETS["edge"]
    x = np.array([[0, 1], [0, 1], [1, 0]])
    rel = release_bayes_net_fourier(
        x, net, mechanism=pmdp.Laplace(scale=40.0, sensitivity=2.0),
        rng=np.random.default_rng(3), allow_float=True,
    )  # fmt: skip
    proj = rel.projected()
    assert all(((t >= 0) & (t <= 3)).all() for t in proj.values())
    post = rel.plugin_posterior(1.0)
    np.testing.assert_allclose(post["x"], 1.0 + proj["x"])
    with pytest.raises(ValueError, match="prior"):
        rel.plugin_posterior(-1.0)
    with pytest.raises(ValueError, match="prior"):
        rel.plugin_posterior(float("nan"))
    with pytest.raises(TypeError, match="prior"):
        rel.plugin_posterior({"x": 1.0})
    with pytest.raises(TypeError, match="normalized"):
        rel.coefficients(normalized=1)
    np.testing.assert_array_equal(rel.plugin_posterior(np.int64(2))["y"], 2 + proj["y"])


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"network": DiscreteBayesNet({"a": 3, "b": 2})}, ValueError, "binary"),
        ({"network": "net"}, TypeError, "network"),
        ({"shift_t": 0.0}, ValueError, "shift_t"),
        ({"shift_t": float("nan")}, ValueError, "shift_t"),
        ({"shift_t": True}, TypeError, "shift_t"),
        ({"shift_t": "1"}, TypeError, "shift_t"),
        ({"shift_t": -1.0}, ValueError, "shift_t"),
        ({"mechanism": pmdp.Geometric(epsilon=1.0, sensitivity=1)}, ValueError, "sensitivity"),
        ({"mechanism": functools.partial(pmdp.Laplace, epsilon=1.0)}, ValueError, "allow_float"),
        ({"data": [[0, 2]]}, ValueError, "data"),
    ],
)
def test_invalid_inputs_are_refused_naming_the_argument(kwargs, exc, match):
    args = {
        "data": [[0, 1], [1, 1]],
        "network": NETS["edge"],
        "mechanism": functools.partial(pmdp.Geometric, epsilon=1.0),
        "rng": np.random.default_rng(0),
    }
    args.update(kwargs)
    data, network = args.pop("data"), args.pop("network")
    with pytest.raises(exc, match=match):
        release_bayes_net_fourier(data, network, **args)


def test_shift_needs_pure_epsilon():
    with pytest.raises(ValueError, match="shift_t"):
        release_bayes_net_fourier(
            [[0, 1]], NETS["edge"], mechanism=functools.partial(pmdp.Gaussian, rho=0.5),
            rng=np.random.default_rng(0), shift_t=1.0, allow_float=True,
        )  # fmt: skip


def test_exact_release_from_the_secure_source_passes_the_support_and_loss_test():
    """Draws of the default (exact geometric, secure source) release under two neighbours: every
    release is an integer, and the Clopper-Pearson lower bound on the privacy loss of the
    neighbours' tail event (false-alarm rate 1e-6, ``pymc_dp.testing``) is at most epsilon.
    Negative control: the same check on a release with half the noise (2 epsilon) finds a loss
    above epsilon."""
    from pymc_dp.testing import empirical_epsilon_lower_bound, neighbour_tail_event

    net, eps, n_draws = NETS["edge"], 1.0, 10_000
    d0 = np.array([[0, 1], [1, 1], [1, 0]])
    d1 = np.array([[0, 1], [1, 1], [0, 0]])  # changes two parity counts: the sensitivity
    t0, t1 = _parity_counts(d0, net), _parity_counts(d1, net)
    assert int(np.abs(t0 - t1).sum()) == fourier_sensitivity(net)[0]

    def draws(data, mech):
        calls = [release_bayes_net_fourier(data, net, mechanism=mech) for _ in range(100)]
        true = _parity_counts(data, net)
        rest = calls[0].mechanism.release(np.tile(true, (n_draws - 100, 1)))
        return np.concatenate([np.stack([c.parity_counts for c in calls]), rest])

    def bound(mech):
        z0, z1 = draws(d0, mech), draws(d1, mech)
        assert z0.dtype.kind == "i" and z1.dtype.kind == "i"
        return empirical_epsilon_lower_bound(z0, z1, neighbour_tail_event(t0, t1))

    assert bound(functools.partial(pmdp.Geometric, epsilon=eps)) <= eps
    assert bound(pmdp.Geometric(epsilon=2 * eps, sensitivity=2)) > eps  # negative control
