"""CollapsedNaiveBayes: exact independent draws for naive-Bayes-network count releases.

References are written here with scipy and itertools, independently of the kernel: on a tiny
network (binary ``y``, two binary features, ``n = 5`` records) every one of the ``8^5``
record vectors is enumerated; its weight is the prior predictive of the records with the
Dirichlet (Beta) rows integrated analytically (Beta-function identities) times the noise
likelihood of its tables, and the posterior of a CPT entry is the mixture of the Beta
posteriors of the record vectors. A ternary root with a ternary feature (``n = 4``, ``9^4``
vectors, geometric noise) checks the general compositions.

Statistical assertions (false-alarm rate of each stated):

* :func:`pymc_dp.testing.grid_posterior_check` (mean within 4.89 MCSE and the grid CDF at the
  0.1/0.5/0.9 draw quantiles within 4.89 binomial standard errors, each at rate 1e-6: at most
  4e-6 per check) of ``theta_y[1]`` and ``theta_x0[0, 1]`` from ``pm.sample`` with the step;
  negative controls the same check must reject: the noise-ignoring plug-in posterior and the
  exact posterior at half the noise scale. Projected Gaussian release (censored cells): the same
  check; control, the clipped values taken as exact observations.
* :func:`pymc_dp.testing.chisquare_gof` (rate 1e-6) of the joint pattern of ``(y, x0)`` over
  the 5 records (1024 categories) against its exact posterior law: the records are an exact
  draw given the tables (uniform arrangement). Negative controls: the same draws against the
  law at half the noise scale, and draws with the feature values left sorted within each class
  (no shuffle) against the exact law.

Raw R-hat/ESS thresholds are not asserted (the benchmark reports them).
"""

from __future__ import annotations

import functools
import itertools
from types import MappingProxyType

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.kernels.collapsed_bn import (
    NaiveBayesPosterior,
    arrange_records,
    compositions,
    enumeration_sizes,
)
from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
from pymc_dp.step_methods.collapsed_bn import (
    CollapsedNaiveBayes,
    _posterior,
    cell_loglik,
    naive_bayes_plan,
)
from pymc_dp.testing import (
    assert_gof,
    assert_rejects,
    chisquare_gof,
    grid_posterior_check,
    mcse_check,
)

NB2 = DiscreteBayesNet({"y": 2, "x0": 2, "x1": 2}, {"x0": ["y"], "x1": ["y"]})
N = 5
ALPHA = 1.0
SCALE = 2.0  # Laplace at L1 sensitivity 2|I| = 6
# a set release in node order y, x0 (rows y = 0, 1), x1 (the noise is its value)
Z = {"y": [4.6, -0.3], "x0": [[0.8, 4.1], [-1.7, 1.2]], "x1": [[2.9, 1.4], [0.3, -2.2]]}
ZG = {"y": [5.6, -0.8], "x0": [[-1.2, 3.3], [6.4, 1.0]], "x1": [[2.2, -0.4], [0.7, 2.6]]}
SIGMA = 1.5
GRID = np.linspace(1e-6, 1 - 1e-6, 20_001)


@pytest.fixture
def registered():
    """The step at the front of PyMC's step list, as ``import pymc_dp`` puts it."""
    from pymc_dp.step_methods import register_step_methods

    register_step_methods()
    assert pm.step_methods.STEP_METHODS[0] is CollapsedNaiveBayes
    yield


def _release(net, tables, mech, project=False, n=N):
    """A release of ``net`` holding ``tables`` (clipped to ``[0, n]`` when ``project``)."""
    data = np.zeros((n, len(net.nodes)), dtype=np.int64)
    rel = release_bayes_net_counts(
        data,
        net,
        mechanism=mech,
        rng=np.random.default_rng(0),
        project=project,
        allow_float=True,  # the tests set the tables themselves; the float path is only built
    )
    lo, hi = (0.0, float(n)) if project else (-np.inf, np.inf)
    dtype = np.int64 if mech.integer else np.float64
    tabs = {v: np.clip(np.asarray(tables[v], dtype=np.float64), lo, hi).astype(dtype)
            for v in net.nodes}  # fmt: skip
    return type(rel)(**{**rel.__dict__, "tables": MappingProxyType(tabs)})


# ---- the exact reference: enumeration of all record vectors ---------------------------------
def _enumerate():
    """All 8^N record vectors of (y, x0, x1): the release layout of their tables (10 cells),
    log prior predictive, and the codes of the (y, x0) pattern over the records."""
    cells = np.array(list(itertools.product(range(8), repeat=N)))  # cell = 4 y + 2 x0 + x1
    y, x0, x1 = cells // 4, (cells // 2) % 2, cells % 2
    c = np.stack([(y == j).sum(1) for j in range(2)], 1)
    tabs = [np.stack([((y == j) & (x == k)).sum(1) for j in range(2) for k in range(2)], 1)
            for x in (x0, x1)]  # fmt: skip
    t = np.concatenate([c, *tabs], axis=1).astype(np.float64)
    logw = special.betaln(ALPHA + c[:, 1], ALPHA + c[:, 0])
    for a in tabs:
        logw += special.betaln(ALPHA + a[:, 1], ALPHA + a[:, 0])
        logw += special.betaln(ALPHA + a[:, 3], ALPHA + a[:, 2])
    code = (y * 2 ** np.arange(N)).sum(1) + (x0 * 2 ** np.arange(N, 2 * N)).sum(1)
    return t, logw, code


ENUM = _enumerate()


def _flat(z):
    return np.concatenate([np.ravel(z[v]) for v in ("y", "x0", "x1")])


def _laplace(z, scale):
    return lambda t: stats.laplace.logpdf(_flat(z)[None, :] - t, scale=scale)


def _censored_gaussian(zp, sigma):
    flat = _flat(zp)[None, :]

    def loglik(t):
        inside = stats.norm.logpdf(flat - t, scale=sigma)
        low = stats.norm.logcdf((0.0 - t) / sigma)
        high = stats.norm.logsf((N - t) / sigma)
        return np.where(flat <= 0.0, low, np.where(flat >= N, high, inside))

    return loglik


def _weights(loglik):
    t, logw, _ = ENUM
    lw = logw + loglik(t).sum(axis=1)
    return np.exp(lw - special.logsumexp(lw))


def _mixture_logpdf(loglik, success, failure):
    """Log density on GRID of a CPT entry whose Beta posterior given the tables ``t`` is
    ``Beta(ALPHA + t[success], ALPHA + t[failure])``."""
    t = ENUM[0]
    w = _weights(loglik)
    keys, inv = np.unique(t[:, [success, failure]], axis=0, return_inverse=True)
    wk = np.bincount(inv.ravel(), weights=w)
    dens = stats.beta.pdf(GRID[:, None], ALPHA + keys[None, :, 0], ALPHA + keys[None, :, 1])
    return np.log(dens @ wk)


# cells of the release layout: c0 c1 | x0: (0,0) (0,1) (1,0) (1,1) | x1: ...
THETA_Y1 = (1, 0)  # theta_y[1] ~ Beta(alpha + c1, alpha + c0)
THETA_X0_01 = (3, 2)  # theta_x0[0, 1] ~ Beta(alpha + a_001, alpha + a_000)


def _sample(rel, seed, draws=2000, auto=False):
    """Draws of theta_y[1] and theta_x0[0, 1]; ``auto``: pm.sample assigns the steps itself."""
    with rel.model(ALPHA) as m:
        step = None if auto else [CollapsedNaiveBayes(m.free_RVs)]
        idata = pm.sample(
            draws=draws, tune=50, chains=2, cores=1, random_seed=seed, progressbar=False,
            step=step, compute_convergence_checks=False,
        )  # fmt: skip
    if auto:
        assert _steps(m) == {"CollapsedNaiveBayes": sorted(v.name for v in m.free_RVs)}
        assert "cnb_frac_changed" in idata.sample_stats
    post = idata.posterior
    return post["theta_y"].values[..., 1], post["theta_x0"].values[..., 0, 1]


def test_posterior_matches_enumeration(registered):
    """A plain pm.sample (the step assigned by competence) against the exact posterior."""
    rel = _release(NB2, Z, pmdp.Laplace(scale=SCALE, sensitivity=6.0))
    ty, tx = _sample(rel, seed=3, auto=True)
    right = _laplace(Z, SCALE)
    for draws, cells in ((ty, THETA_Y1), (tx, THETA_X0_01)):
        ok, chk = grid_posterior_check(draws, GRID, _mixture_logpdf(right, *cells))
        assert ok, chk
        # negative controls: the exact posterior at half the noise scale, and the plug-in
        wrong = _mixture_logpdf(_laplace(Z, SCALE / 2), *cells)
        assert not grid_posterior_check(draws, GRID, wrong)[0]
    plug = rel.plugin_posterior(ALPHA)
    plugin = stats.beta.logpdf(GRID, plug["y"][1], plug["y"][0])
    assert not grid_posterior_check(ty, GRID, plugin)[0]


def test_projected_gaussian_matches_enumeration():
    """Censored cells (the tables clipped to [0, n]) enter through the Gaussian tails, as in the
    model's Release; control: the clipped values taken as exact observations."""
    mech = pmdp.Gaussian(sigma=SIGMA, sensitivity=2.5)
    rel = _release(NB2, ZG, mech, project=True)
    zp = {v: np.asarray(rel.tables[v]) for v in NB2.nodes}
    assert (_flat(zp) == 0.0).sum() == 3 and (_flat(zp) == N).sum() == 2
    ty, tx = _sample(rel, seed=4, draws=4000)
    for draws, cells in ((ty, THETA_Y1), (tx, THETA_X0_01)):
        ok, chk = grid_posterior_check(
            draws, GRID, _mixture_logpdf(_censored_gaussian(zp, SIGMA), *cells)
        )
        assert ok, chk
    at_clip = lambda t: stats.norm.logpdf(_flat(zp)[None, :] - t, scale=SIGMA)  # noqa: E731
    assert not grid_posterior_check(ty, GRID, _mixture_logpdf(at_clip, *THETA_Y1))[0]


def _pattern_draws(kernel, size, rng, shuffle=True):
    """Codes of the (y, x0) pattern of ``size`` kernel draws (records arranged)."""
    codes = np.empty(size, dtype=np.int64)
    pw = 2 ** np.arange(2 * N)
    for s in range(size):
        d = kernel.draw(rng)
        y, xs = arrange_records(d.counts, d.tables, rng)
        x0 = xs[0]
        if not shuffle:  # wrong: feature values sorted within each class, in record order
            x0 = np.empty_like(x0)
            for j in range(2):
                x0[y == j] = np.repeat([0, 1], d.tables[0][j])
        codes[s] = (np.concatenate([y, x0]) * pw).sum()
    return codes


def _pattern_logpmf(loglik):
    w = _weights(loglik)
    p = np.bincount(ENUM[2], weights=w, minlength=4**N)
    with np.errstate(divide="ignore"):
        return lambda k: np.log(p[k])


def test_records_are_exact_draws_given_the_tables(rng):
    rel = _release(NB2, Z, pmdp.Laplace(scale=SCALE, sensitivity=6.0))
    kernel = _posterior(naive_bayes_plan(rel.model(ALPHA)["theta_y"])[1])
    codes = _pattern_draws(kernel, 20_000, rng)
    assert_gof(chisquare_gof(codes, _pattern_logpmf(_laplace(Z, SCALE))), what="records")
    assert_rejects(chisquare_gof(codes, _pattern_logpmf(_laplace(Z, SCALE / 2))))
    sorted_codes = _pattern_draws(kernel, 20_000, rng, shuffle=False)
    assert_rejects(chisquare_gof(sorted_codes, _pattern_logpmf(_laplace(Z, SCALE))))


# ---- a ternary root and a ternary feature: general compositions ------------------------------
NB3 = DiscreteBayesNet({"y": 3, "x": 3}, {"x": ["y"]})
Z3 = {"y": [4, -1, 0], "x": [[1, 0, 2], [0, -1, 1], [2, 1, -2]]}
N3 = 4


def _enumerate3(alpha_log):
    """All 9^4 record vectors of (y, x): tables (3 + 9 cells) and log prior predictive."""
    cells = np.array(list(itertools.product(range(9), repeat=N3)))
    y, x = cells // 3, cells % 3
    c = np.stack([(y == j).sum(1) for j in range(3)], 1)
    a = np.stack([((y == j) & (x == k)).sum(1) for j in range(3) for k in range(3)], 1)

    def dm(counts):  # log Dirichlet-multinomial of one sequence, alpha = 1
        return special.gammaln(1.0 + counts).sum(1) - special.gammaln(3.0 + counts.sum(1))

    logw = dm(c) + sum(dm(a[:, 3 * j : 3 * j + 3]) for j in range(3))
    t = np.concatenate([c, a], axis=1).astype(np.float64)
    return t, logw + alpha_log(t)


def test_ternary_posterior_matches_enumeration(rng):
    mech = pmdp.Geometric(epsilon=1.0, sensitivity=4)
    rel = _release(NB3, Z3, mech, n=N3)
    flat = np.concatenate([np.ravel(Z3["y"]), np.ravel(Z3["x"])]).astype(np.float64)
    t, lw = _enumerate3(lambda t: mech.logpdf(flat[None, :] - t).sum(1))
    w = np.exp(lw - special.logsumexp(lw))
    # exact posterior means of theta_y[0] and theta_x[1, 2] (Dirichlet(1 + counts) means)
    mean_y0 = w @ ((1.0 + t[:, 0]) / (3.0 + N3))
    mean_x12 = w @ ((1.0 + t[:, 3 + 5]) / (3.0 + t[:, 1]))
    m = rel.model(1.0)
    step = CollapsedNaiveBayes(m.free_RVs, model=m, rng=rng)
    point = m.initial_point()
    ys, xs = [], []
    for _ in range(4000):
        point, _ = step.step(point)
        th = special.softmax(
            np.append(point["theta_y_simplex__"], -point["theta_y_simplex__"].sum())
        )
        ys.append(th[0])
        row = point["theta_x_simplex__"][1]
        xs.append(special.softmax(np.append(row, -row.sum()))[2])
    chk_y, chk_x = mcse_check(np.array(ys), mean_y0), mcse_check(np.array(xs), mean_x12)
    assert chk_y.passed and chk_x.passed, (chk_y, chk_x)
    # negative control: the noise-ignoring posterior mean (Dirichlet(1 + clipped release [4, 0,
    # 0]) of theta_y[0])
    assert not mcse_check(np.array(ys), (1.0 + 4.0) / (3.0 + 4.0)).passed


# ---- kernel pieces --------------------------------------------------------------------------
def test_compositions_and_sizes():
    for total, parts in [(0, 1), (0, 3), (4, 1), (5, 2), (6, 3), (4, 4)]:
        got = compositions(total, parts)
        want = [c for c in itertools.product(range(total + 1), repeat=parts) if sum(c) == total]
        assert got.tolist() == [list(c) for c in want]
    assert enumeration_sizes(50, 2, [2] * 16) == (51, 16 * 2 * 1326)
    with pytest.raises(ValueError):
        compositions(-1, 2)


@pytest.mark.parametrize(
    "mech",
    [
        pmdp.Gaussian(sigma=SIGMA, sensitivity=2.5),
        pmdp.Laplace(scale=SCALE, sensitivity=6.0),
        pmdp.Geometric(epsilon=1.0, sensitivity=6),
        pmdp.DiscreteGaussian(sigma=SIGMA, sensitivity=3),
    ],
)
@pytest.mark.parametrize("project", [False, True])
def test_cell_loglik_matches_the_release_logp(mech, project):
    """The step's per-cell log-likelihood equals the model's Release log-density term by term
    (raw and censored releases, real and integer mechanisms)."""
    tables = {v: np.round(np.asarray(ZG[v])) if mech.integer else ZG[v] for v in NB2.nodes}
    rel = _release(NB2, tables, mech, project=project)
    m = rel.model(ALPHA)
    plan = naive_bayes_plan(m["theta_y"])[1]
    op = plan.release.owner.op
    assert op.censored == project
    lp = cell_loglik(mech, plan.observed, N, op.lower, op.upper)
    t = np.random.default_rng(1).integers(0, N + 1, size=plan.observed.size)
    ref = pm.logp(m["release"], plan.observed).eval({m["release"].owner.inputs[0]: t})
    np.testing.assert_allclose(lp[np.arange(t.size), t], ref, rtol=1e-12)
    assert np.all(np.isfinite(lp))


def test_noise_free_release_recovers_the_tables(rng):
    """Degenerate check: with a noise-free release the drawn tables are the released ones."""
    data = rng.integers(0, 2, size=(7, 3))
    rel = release_bayes_net_counts(
        data, NB2, mechanism=pmdp.Geometric(epsilon=200.0, sensitivity=6), rng=rng
    )
    kernel = _posterior(naive_bayes_plan(rel.model()["theta_y"])[1])
    d = kernel.draw(rng)
    y, xs = arrange_records(d.counts, d.tables, rng)
    assert np.bincount(y, minlength=2).tolist() == list(rel.tables["y"])
    for i, v in enumerate(("x0", "x1")):
        got = [np.bincount(xs[i][y == j], minlength=2).tolist() for j in range(2)]
        assert got == np.asarray(rel.tables[v]).tolist()


def test_kernel_refuses_impossible_release():
    eta = np.full((2, 3), -np.inf)
    with pytest.raises(ValueError, match="probability zero"):
        NaiveBayesPosterior(2, [1.0, 1.0], eta, [], [])


# ---- claims: which models the step takes --------------------------------------------------
LAPLACE = functools.partial(pmdp.Laplace, epsilon=1.0)


def _model(net, n=4, project=False):
    data = np.zeros((n, len(net.nodes)), dtype=np.int64)
    rel = release_bayes_net_counts(
        data,
        net,
        mechanism=LAPLACE,
        rng=np.random.default_rng(1),
        project=project,
        allow_float=True,
    )
    return rel.model()


def _steps(model, methods=None):
    _, selected = assign_step_methods(model, methods=methods)
    names = model.values_to_rvs
    return {c.__name__: sorted(names[v].name for v in vs) for c, vs in selected.items()}


def test_claims_naive_bayes_models(registered):
    for net in (NB2, NB3, DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})):
        m = _model(net, project=True)
        assert _steps(m) == {"CollapsedNaiveBayes": sorted(v.name for v in m.free_RVs)}


@pytest.mark.parametrize(
    "net",
    [
        DiscreteBayesNet({"a": 2, "c": 2, "b": 2}, {"b": ["a", "c"]}),  # two parents
        DiscreteBayesNet({"a": 2, "b": 2, "c": 2}, {"b": ["a"], "c": ["b"]}),  # depth 2
        DiscreteBayesNet({"a": 2, "b": 2}),  # two roots
    ],
)
def test_other_networks_keep_todays_steps(registered, net):
    m = _model(net)
    assert naive_bayes_plan(m.free_RVs[0]) is None
    steps = _steps(m)
    assert "CollapsedNaiveBayes" not in steps
    today = [c for c in pm.step_methods.STEP_METHODS if c is not CollapsedNaiveBayes]
    assert steps == _steps(m, today)
    if len(m.free_RVs) == 6:  # the connected networks: data augmentation + conjugate Gibbs
        assert set(steps) == {"ConjugateGibbs", "DataAugmentation"}
    with pytest.raises(ValueError, match="naive-Bayes"):
        CollapsedNaiveBayes(m.free_RVs, model=m)


def test_changed_model_is_not_claimed(registered):
    m = _model(NB2)
    with m:
        pm.Potential("extra", -m["theta_y"][0])
    assert naive_bayes_plan(m["theta_y"]) is None
    assert "CollapsedNaiveBayes" not in _steps(m)
    with pytest.raises(ValueError, match="unchanged"):
        CollapsedNaiveBayes(m.free_RVs, model=m)
    m2 = _model(NB2)
    with m2:
        pm.Normal("other", 0.0, 1.0)
    assert CollapsedNaiveBayes.competence(m2["theta_y"]) == 0


def test_subset_and_refusals():
    m = _model(NB2)
    with pytest.raises(ValueError, match="jointly"):
        CollapsedNaiveBayes([m["theta_y"], m["x_y"]], model=m)
    # a 7-state root over 60 records: C(66, 6) = 9.1e7 class-count vectors, refused
    big = _model(DiscreteBayesNet({"y": 7, "x": 2}, {"x": ["y"]}), n=60)
    assert naive_bayes_plan(big["theta_y"]) is not None
    assert CollapsedNaiveBayes.competence(big["theta_y"]) == 0
    with pytest.raises(ValueError, match="MAX_ROOT_COMPOSITIONS"):
        CollapsedNaiveBayes(big.free_RVs, model=big)


def test_step_does_not_write_the_incoming_point(rng):
    m = _model(NB2)
    step = CollapsedNaiveBayes(m.free_RVs, model=m, rng=rng)
    point = m.initial_point()
    frozen = {k: v.copy() for k, v in point.items()}
    for v in point.values():
        v.setflags(write=False)
    new, [stats] = step.step(point)
    assert all(np.array_equal(point[k], frozen[k]) for k in point)
    assert set(new) == set(point) and 0.0 <= stats["cnb_frac_changed"] <= 1.0
    assert all(new[k].dtype == point[k].dtype and new[k].shape == point[k].shape for k in point)
