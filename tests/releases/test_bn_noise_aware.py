"""The noise-aware model of a Bayesian-network count release against exact references.

* Structure, exactly: the model's statistic equals :func:`bayes_net_count_tables` of the same
  records, and the model's joint log-density at a point equals a hand-written sum (Dirichlet
  rows, categorical records indexed by their parents' configuration, Laplace noise of every
  cell) on a network with a two-parent node; the privacy report is the release's guarantee.
  For a release published projected (``project=True``: tables clipped to ``[0, n]``) and
  Laplace noise the log-density differs from the raw model's by a constant over records (the
  same posterior); with Gaussian noise it does not (control). ``project=True`` publishes
  exactly the clipped raw tables.
* Posterior, statistically: on ``a -> b`` (binary) with ``n = 8`` records, ``P(b = 1 | a = 0)``
  from ``pm.sample`` against the exact posterior by enumeration over all ``4^8`` record
  vectors (a mixture of Beta posteriors weighted by the prior predictive of the record vector
  and the noise likelihood of its tables, written with scipy independently of the library).
  :func:`pymc_dp.testing.grid_posterior_check`: posterior mean within 4.89 MCSE and the grid
  CDF at the 0.1/0.5/0.9 draw quantiles within 4.89 binomial standard errors, each at
  false-alarm rate 1e-6 (so at most 4e-6 per check). Raw Laplace release: negative controls
  the same check must reject are the noise-ignoring plug-in posterior (Zhang et al.'s
  Beta(alpha + Z1, beta + Z2); mean z about 25) and the exact posterior at a wrong epsilon
  (noise scale halved; z 14-17 over three seeds). Projected (clipped) Gaussian release, the
  censored likelihood: control, the clipped values taken as exact observations (z 8.5-10.6
  over three seeds; the passing check had z 0.4-1.9).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pymc as pm
import pytest
from pytensor.compile.mode import Mode
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


def _release(net, data, mech, tables=None, project=False):
    """A release of ``data``; with ``tables``, a release object holding those tables (clipped
    to ``[0, n]`` when ``project``) in place of the drawn ones."""
    rel = release_bayes_net_counts(
        data, net, mechanism=mech, rng=np.random.default_rng(0), project=project, allow_float=True
    )
    if tables is None:
        return rel
    from types import MappingProxyType

    hi = rel.n if project else np.inf
    tabs = {v: np.clip(np.asarray(tables[v], dtype=np.float64), 0.0 if project else -np.inf, hi)
            for v in net.nodes}  # fmt: skip
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
    logp = m.compile_logp(jacobian=False, mode=Mode(linker="py", optimizer="fast_compile"))
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
@pytest.mark.parametrize("project", [False, True])
def test_privacy_report_is_the_release_guarantee(mech, project):
    rel = _release(NET3, np.array([[0, 1, 1], [1, 2, 0]]), mech, project=project)
    report = pmdp.privacy_report(rel.model()).total
    g = rel.guarantee()
    assert (report.epsilon, report.delta) == (g.epsilon, g.delta)
    if g.rho is not None:  # (the report also states pure epsilon as epsilon^2/2-zCDP)
        assert report.rho == g.rho


def test_model_validation():
    rel = _release(AB, np.array([[0, 1], [1, 1]]), functools.partial(pmdp.Laplace, epsilon=1.0))
    with pytest.raises(ValueError, match="project"):
        release_bayes_net_counts(
            [[0, 1]], AB, mechanism=rel.mechanism, project="yes", allow_float=True
        )
    with pytest.raises(ValueError, match="clashes"):
        rel.model(name="x_a")
    with pytest.raises(ValueError, match="name"):
        rel.model(name="")
    with pytest.raises(ValueError, match="prior"):
        rel.model(prior=-1.0)


# ---- the posterior against enumeration -------------------------------------------------------
N = 8
ALPHA = 1.0
SCALE = 2.0  # Laplace(epsilon = 2, sensitivity 2|I| = 4)
Z = {"a": [6.3, 0.4], "b": [[-1.2, 5.9], [2.4, -0.7]]}  # a set release (the noise is its value)


def _enumeration():
    """All 4^N record vectors (cell = 2 a + b): their tables ``(a: 2, b: 4 cells)``, log prior
    predictive (Beta-Bernoulli marginals of the three rows) and the counts c00, c01 of row a=0."""
    cells = np.array(list(itertools.product(range(4), repeat=N)))
    c = np.stack([(cells == k).sum(1) for k in range(4)], axis=1)  # counts of 00, 01, 10, 11
    ta = np.stack([c[:, 0] + c[:, 1], c[:, 2] + c[:, 3]], axis=1)
    logw = special.betaln(ALPHA + ta[:, 0], ALPHA + ta[:, 1])
    logw += special.betaln(ALPHA + c[:, 0], ALPHA + c[:, 1])
    logw += special.betaln(ALPHA + c[:, 2], ALPHA + c[:, 3])
    return np.concatenate([ta, c], axis=1).astype(np.float64), logw, c[:, 0], c[:, 1]


def _mixture_logpdf(grid, loglik):
    """Exact log posterior density of P(b = 1 | a = 0) on ``grid``: a mixture of Beta posteriors
    over the record vectors, weighted by prior predictive x ``loglik(tables)`` (per cell)."""
    t, logw, c00, c01 = _enumeration()
    logw = logw + loglik(t).sum(axis=1)
    w = np.exp(logw - special.logsumexp(logw))
    keys, inv = np.unique(np.stack([c00, c01], 1), axis=0, return_inverse=True)
    wk = np.bincount(inv.ravel(), weights=w)
    dens = stats.beta.pdf(grid[:, None], ALPHA + keys[None, :, 1], ALPHA + keys[None, :, 0])
    return np.log(dens @ wk)


def _laplace(z, scale):
    z = np.concatenate([np.ravel(z["a"]), np.ravel(z["b"])])
    return lambda t: stats.laplace.logpdf(z[None, :] - t, scale=scale)


def _draws(rel, seed=11, old_steps=False):
    """Draws of theta_b[0, 1]: by pm.sample's own steps, or (``old_steps``) by
    DataAugmentation on the records and ConjugateGibbs on the tables, given explicitly."""
    with rel.model(ALPHA) as m:
        step = None
        if old_steps:
            step = [
                pmdp.DataAugmentation([m["x_a"], m["x_b"]]),
                pmdp.ConjugateGibbs([m["theta_a"], m["theta_b"]]),
            ]
        idata = pm.sample(
            draws=4000, tune=500, chains=2, cores=1, random_seed=seed, progressbar=False,
            compute_convergence_checks=False, step=step,
        )  # fmt: skip
    return m, idata.posterior["theta_b"].values[..., 0, 1]


def _step_names(model):
    """Which step class ``pm.sample`` assigns to which variables (by name)."""
    from pymc.sampling.mcmc import assign_step_methods

    import pymc_dp.step_methods  # noqa: F401  (registers the pymc_dp steps)

    _, selected = assign_step_methods(model)
    names = model.values_to_rvs
    return {c.__name__: sorted(names[v].name for v in vs) for c, vs in selected.items()}


@pytest.mark.parametrize("old_steps", [False, True], ids=["collapsed", "da-gibbs"])
def test_posterior_matches_enumeration(old_steps):
    """pm.sample's own choice (CollapsedNaiveBayes: exact independent draws) and the general
    steps (DataAugmentation + ConjugateGibbs) both match the enumerated posterior."""
    rel = _release(AB, np.zeros((N, 2), dtype=int), pmdp.Laplace(scale=SCALE, sensitivity=4.0), Z)
    m, draws = _draws(rel, old_steps=old_steps)
    assert _step_names(m) == {"CollapsedNaiveBayes": ["theta_a", "theta_b", "x_a", "x_b"]}
    grid = np.linspace(1e-6, 1 - 1e-6, 20_001)
    ok, chk = grid_posterior_check(draws, grid, _mixture_logpdf(grid, _laplace(Z, SCALE)))
    assert ok, chk
    # negative controls, rejected by the same check
    alpha_plugin = rel.plugin_posterior(ALPHA)["b"][0]
    plugin = stats.beta.logpdf(grid, alpha_plugin[1], alpha_plugin[0])
    assert not grid_posterior_check(draws, grid, plugin)[0]
    assert not grid_posterior_check(draws, grid, _mixture_logpdf(grid, _laplace(Z, SCALE / 2)))[0]


# a Gaussian release with cells below 0 and above n = 8: b is projected to [[0, 4.1], [8, 0]]
ZG = {"a": [7.1, 3.3], "b": [[-2.2, 4.1], [8.9, -1.5]]}
SIGMA = 2.0  # L2 sensitivity sqrt(2|I|) = 2


def _censored_gaussian(zp, sigma):
    zp = np.concatenate([np.ravel(zp["a"]), np.ravel(zp["b"])])[None, :]

    def loglik(t):
        inside = stats.norm.logpdf(zp - t, scale=sigma)
        low = stats.norm.logcdf((0.0 - t) / sigma)
        high = stats.norm.logsf((N - t) / sigma)
        return np.where(zp <= 0.0, low, np.where(zp >= N, high, inside))

    return loglik


def test_projected_gaussian_posterior_matches_enumeration():
    """Conditioning on the clipped tables (Alg. 1 output): censored cells enter through the
    Gaussian tail probabilities. Control: the clipped values taken as exact observations
    (density at the clip point), the right likelihood for Laplace only."""
    mech = pmdp.Gaussian(sigma=SIGMA, sensitivity=2.0)
    rel = _release(AB, np.zeros((N, 2), dtype=int), mech, ZG, project=True)
    zp = rel.tables
    assert rel.projection == (0, N)
    assert np.sum(zp["b"] == 0.0) == 2 and np.sum(zp["b"] == N) == 1
    _, draws = _draws(rel, seed=12)
    grid = np.linspace(1e-6, 1 - 1e-6, 20_001)
    ok, chk = grid_posterior_check(
        draws, grid, _mixture_logpdf(grid, _censored_gaussian(zp, SIGMA))
    )
    assert ok, chk
    flat = np.concatenate([np.ravel(zp["a"]), np.ravel(zp["b"])])[None, :]
    at_clip = _mixture_logpdf(grid, lambda t: stats.norm.logpdf(flat - t, scale=SIGMA))
    assert not grid_posterior_check(draws, grid, at_clip)[0]


def _logp_fn(model):
    fn = model.compile_logp(jacobian=False, mode=Mode(linker="py", optimizer="fast_compile"))
    return lambda x: fn({"x_a": x[:, 0], "x_b": x[:, 1], "theta_a_simplex__": np.zeros(1),
                         "theta_b_simplex__": np.zeros((2, 1))})  # fmt: skip


@pytest.mark.parametrize(
    "mech",
    [pmdp.Laplace(scale=SCALE, sensitivity=4.0), pmdp.Gaussian(sigma=SIGMA, sensitivity=2.0)],
)
def test_projected_laplace_equals_raw(rng, mech):
    """Exact: for Laplace the projected (censored) model's log-density differs from the raw
    model's by a constant over all records (the same posterior); for Gaussian (control) not."""
    zeros = np.zeros((N, 2), dtype=int)
    raw = _logp_fn(_release(AB, zeros, mech, ZG).model(ALPHA))
    proj = _logp_fn(_release(AB, zeros, mech, ZG, project=True).model(ALPHA))
    diffs = [proj(x) - raw(x) for x in rng.integers(0, 2, size=(6, N, 2))]
    spread = max(diffs) - min(diffs)
    if isinstance(mech, pmdp.Laplace):
        assert spread < 1e-9
    else:
        assert spread > 0.1


def test_mapping_prior_rows():
    """Per-node priors reach the Dirichlet rows in the table's C order (b: parents (c, a))."""
    rel = _release(
        NET3, np.array([[0, 1, 1], [1, 2, 0]]), functools.partial(pmdp.Laplace, epsilon=1.0)
    )
    pb = np.arange(1.0, 13.0).reshape(3, 2, 2)  # [c, a, b]
    m = rel.model({"a": [1.0, 2.0], "c": 0.5, "b": pb})
    a_of = {v: m[f"theta_{v}"].owner.inputs[-1].eval() for v in NET3.nodes}
    np.testing.assert_array_equal(a_of["a"], [1.0, 2.0])
    np.testing.assert_array_equal(a_of["c"], np.full((2, 3), 0.5))
    np.testing.assert_array_equal(a_of["b"], pb.reshape(6, 2))


@pytest.mark.parametrize(
    "mech",
    [functools.partial(pmdp.Laplace, epsilon=0.5), functools.partial(pmdp.Geometric, epsilon=0.5)],
)
def test_project_publishes_the_clipped_tables(rng, mech):
    data = np.column_stack([rng.integers(0, k, 5) for k in NET3.cardinalities])
    raw = release_bayes_net_counts(
        data, NET3, mechanism=mech, rng=np.random.default_rng(7), allow_float=True
    )
    pub = release_bayes_net_counts(
        data, NET3, mechanism=mech, rng=np.random.default_rng(7), project=True, allow_float=True
    )
    assert raw.projection is None and pub.projection == (0, 5)
    assert pub.guarantee() == raw.guarantee()
    for v in NET3.nodes:
        np.testing.assert_array_equal(pub.tables[v], np.clip(raw.tables[v], 0, 5))
        assert pub.tables[v].dtype == raw.tables[v].dtype
    # the published release is modelled as censored, the raw one not
    release = pub.model()["release"]
    assert release.owner.op.censored and not raw.model()["release"].owner.op.censored
