"""The noise-aware model of a Bayesian-network count release against exact references.

* Structure, exactly: the model's statistic equals :func:`bayes_net_count_tables` of the same
  records, and the model's joint log-density at a point equals a hand-written sum (Dirichlet
  rows, categorical records indexed by their parents' configuration, Laplace noise of every
  cell) on a network with a two-parent node; the privacy report is the release's guarantee.
* Posterior, statistically: on ``a -> b`` (binary) with ``n = 8`` records, ``P(b = 1 | a = 0)``
  from ``pm.sample`` against the exact posterior by enumeration over all ``4^8`` record
  vectors (a mixture of Beta posteriors weighted by the prior predictive of the record vector
  and the Laplace likelihood of its tables, written with scipy independently of the library).
  :func:`pymc_dp.testing.grid_posterior_check`: posterior mean within 4.89 MCSE and the grid
  CDF at the 0.1/0.5/0.9 draw quantiles within 4.89 binomial standard errors, each at
  false-alarm rate 1e-6 (so at most 4e-6 for the test). Negative controls that the same check
  must reject: the noise-ignoring plug-in posterior (Zhang et al.'s Beta(alpha + Z1,
  beta + Z2)) and the exact posterior at a wrong epsilon (noise scale halved).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.releases.bayes_net import (
    DiscreteBayesNet,
    bayes_net_count_tables,
    release_bayes_net_counts,
)
from pymc_dp.testing import grid_posterior_check

AB = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
# b has two parents listed in the order (c, a): the configuration index is c * 2 + a
NET3 = DiscreteBayesNet({"a": 2, "c": 3, "b": 2}, {"b": ["c", "a"], "c": ["a"]})


def _release(net, data, mech, tables=None):
    rel = release_bayes_net_counts(data, net, mechanism=mech, rng=np.random.default_rng(0))
    if tables is None:
        return rel
    from types import MappingProxyType

    tabs = {v: np.asarray(tables[v], dtype=np.float64) for v in net.nodes}
    return type(rel)(**{**rel.__dict__, "tables": MappingProxyType(tabs)})


def test_statistic_is_the_count_tables(rng):
    data = np.column_stack([rng.integers(0, k, 12) for k in NET3.cardinalities])
    rel = _release(NET3, data, functools.partial(pmdp.Laplace, epsilon=1.0))
    m = rel.model()
    stat = m["release"].owner.inputs[0]
    other = np.column_stack([rng.integers(0, k, 12) for k in NET3.cardinalities])
    got = stat.eval({m[f"x_{v}"]: other[:, j] for j, v in enumerate(NET3.nodes)})
    want = bayes_net_count_tables(other, NET3)
    np.testing.assert_array_equal(got, np.concatenate([want[v].ravel() for v in NET3.nodes]))
    # control: the tables of b with its parents in the other order (a, c) differ
    swapped = DiscreteBayesNet(dict(zip(NET3.nodes, NET3.cardinalities, strict=True)),
                               {"b": ["a", "c"], "c": ["a"]})  # fmt: skip
    assert not np.array_equal(got[-12:], bayes_net_count_tables(other, swapped)["b"].ravel())


def _hand_logp(rel, alpha, theta, x):
    """Joint log-density written out: Dirichlet rows, categorical records, Laplace noise."""
    a, c, b = x[:, 0], x[:, 1], x[:, 2]
    lp = stats.dirichlet.logpdf(theta["a"], alpha * np.ones(2))
    lp += sum(stats.dirichlet.logpdf(row, alpha * np.ones(3)) for row in theta["c"])
    lp += sum(stats.dirichlet.logpdf(row, alpha * np.ones(2)) for row in theta["b"])
    lp += np.log(theta["a"][a]).sum() + np.log(theta["c"][a, c]).sum()
    lp += np.log(theta["b"][c * 2 + a, b]).sum()
    scale = rel.mechanism.scale
    for v in NET3.nodes:
        t = bayes_net_count_tables(x, NET3)[v].ravel()
        lp += stats.laplace.logpdf(np.asarray(rel.tables[v]).ravel() - t, scale=scale).sum()
    return lp


def test_joint_logp_matches_hand_sum(rng):
    data = np.column_stack([rng.integers(0, k, 7) for k in NET3.cardinalities])
    rel = _release(NET3, data, functools.partial(pmdp.Laplace, epsilon=2.0))
    alpha = 1.5
    m = rel.model(alpha)
    theta = {
        "a": rng.dirichlet(np.ones(2)),
        "c": rng.dirichlet(np.ones(3), size=2),
        "b": rng.dirichlet(np.ones(2), size=6),
    }
    x = np.column_stack([rng.integers(0, k, 7) for k in NET3.cardinalities])
    point = {f"x_{v}": x[:, j] for j, v in enumerate(NET3.nodes)}
    point |= {f"theta_{v}": theta[v] for v in NET3.nodes}
    logp = m.compile_logp(jacobian=False)
    tr = {}
    for rv in m.free_RVs:
        val = m.rvs_to_values[rv]
        tf = m.rvs_to_transforms[rv]
        raw = point[rv.name]
        tr[val.name] = raw if tf is None else tf.forward(raw, *rv.owner.inputs).eval()
    assert logp(tr) == pytest.approx(_hand_logp(rel, alpha, theta, x), rel=1e-10, abs=1e-9)
    # control: parent configurations ordered (a, c) instead of (c, a)
    wrong = dict(theta, b=theta["b"].reshape(3, 2, 2).transpose(1, 0, 2).reshape(6, 2))
    assert logp(tr) != pytest.approx(_hand_logp(rel, alpha, wrong, x), rel=1e-6)


@pytest.mark.parametrize(
    "mech",
    [
        functools.partial(pmdp.Laplace, epsilon=0.7),
        functools.partial(pmdp.Gaussian, rho=0.3),
        functools.partial(pmdp.Geometric, epsilon=1.3),
    ],
)
def test_privacy_report_is_the_release_guarantee(mech):
    rel = _release(NET3, np.array([[0, 1, 1], [1, 2, 0]]), mech)
    report = pmdp.privacy_report(rel.model()).total
    g = rel.guarantee()
    assert (report.epsilon, report.delta) == (g.epsilon, g.delta)
    if g.rho is not None:  # (the report also states pure epsilon as epsilon^2/2-zCDP)
        assert report.rho == g.rho


# ---- the posterior against enumeration -------------------------------------------------------
N = 8
ALPHA = 1.0
SCALE = 2.0  # Laplace(epsilon = 2, sensitivity 2|I| = 4)
Z = {"a": [6.3, 0.4], "b": [[-1.2, 5.9], [2.4, -0.7]]}  # a set release (the noise is its value)


def _exact_mixture(scale):
    """Weights of the counts (c00, c01) of the a = 0 row and the Beta posterior of
    P(b = 1 | a = 0) given them, by enumerating all 4^N record vectors (cell = 2 a + b)."""
    cells = np.array(list(itertools.product(range(4), repeat=N)))
    c = np.stack([(cells == k).sum(1) for k in range(4)], axis=1)  # counts of 00, 01, 10, 11
    ta = np.stack([c[:, 0] + c[:, 1], c[:, 2] + c[:, 3]], axis=1)
    logw = special.betaln(ALPHA + ta[:, 0], ALPHA + ta[:, 1])
    logw += special.betaln(ALPHA + c[:, 0], ALPHA + c[:, 1])
    logw += special.betaln(ALPHA + c[:, 2], ALPHA + c[:, 3])
    z = np.concatenate([np.ravel(Z["a"]), np.ravel(Z["b"])])
    t = np.concatenate([ta, c], axis=1)
    logw += stats.laplace.logpdf(z[None, :] - t, scale=scale).sum(1)
    return np.exp(logw - special.logsumexp(logw)), c[:, 0], c[:, 1]


def _mixture_logpdf(grid, scale):
    w, c00, c01 = _exact_mixture(scale)
    keys, inv = np.unique(np.stack([c00, c01], 1), axis=0, return_inverse=True)
    wk = np.bincount(inv.ravel(), weights=w)
    dens = stats.beta.pdf(grid[:, None], ALPHA + keys[None, :, 1], ALPHA + keys[None, :, 0])
    return np.log(dens @ wk)


def _step_names(model):
    """Which step class ``pm.sample`` assigns to which variables (by name)."""
    from pymc.sampling.mcmc import assign_step_methods

    import pymc_dp.step_methods  # noqa: F401  (registers the pymc_dp steps)

    _, selected = assign_step_methods(model)
    names = model.values_to_rvs
    return {c.__name__: sorted(names[v].name for v in vs) for c, vs in selected.items()}


def test_posterior_matches_enumeration():
    rel = _release(AB, np.zeros((N, 2), dtype=int), pmdp.Laplace(scale=SCALE, sensitivity=4.0), Z)
    with rel.model(ALPHA) as m:
        idata = pm.sample(
            draws=4000, tune=500, chains=2, cores=1, random_seed=11, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    assert _step_names(m) == {"ConjugateGibbs": ["theta_a", "theta_b"],
                              "DataAugmentation": ["x_a", "x_b"]}  # fmt: skip
    draws = idata.posterior["theta_b"].values[..., 0, 1]
    grid = np.linspace(1e-6, 1 - 1e-6, 20_001)
    ok, chk = grid_posterior_check(draws, grid, _mixture_logpdf(grid, SCALE))
    assert ok, chk
    # negative controls, rejected by the same check
    alpha_plugin = rel.plugin_posterior(ALPHA)["b"][0]
    plugin = stats.beta.logpdf(grid, alpha_plugin[1], alpha_plugin[0])
    assert not grid_posterior_check(draws, grid, plugin)[0]
    assert not grid_posterior_check(draws, grid, _mixture_logpdf(grid, SCALE / 2))[0]
