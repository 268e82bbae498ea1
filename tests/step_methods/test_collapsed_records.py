"""CollapsedRecords: exchangeable records collapsed into their released statistic (issue 12).

Exactness: every posterior is compared with an exact reference (a grid over the parameter, the
statistic summed out) by :func:`pymc_dp.testing.grid_posterior_check` (mean within 4.89 MCSE and
three quantiles within 4.89 binomial standard errors: false-alarm rate about 1e-6 per check, 4
checks per call). Each family has a negative control: the posterior that treats the release as
the exact statistic (noise ignored), which the same check must reject on the same draws.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import signal, special, stats

import pymc_dp as pmdp
from pymc_dp.distributions.sensitivity import _unchecked
from pymc_dp.step_methods import ConjugateGibbs, DataAugmentation
from pymc_dp.step_methods.collapse_plan import collapse_plan
from pymc_dp.step_methods.collapsed import CollapsedRecords
from pymc_dp.testing import grid_posterior_check

f64 = np.float64


def _assigned(model):
    """{step class name: sorted variable names} as pm.sample assigns them."""
    from pymc.sampling.mcmc import assign_step_methods

    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, selected = assign_step_methods(model, None, methods=pm.step_methods.STEP_METHODS)
    return {
        cls.__name__: sorted(model.values_to_rvs[v].name for v in vs)
        for cls, vs in selected.items()
    }


def _sample(model, var, draws=1500, step=None, seed=None):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            draws=draws,
            tune=200,
            chains=2,
            cores=1,
            step=step,
            var_names=[var],
            progressbar=False,
            compute_convergence_checks=False,
            random_seed=seed,
        )
    return idata.posterior[var].values


def _check(draws, grid, exact, naive):
    ok, chk = grid_posterior_check(draws, grid, exact)
    assert ok, f"collapsed posterior differs from the exact one: {chk}"
    bad, _ = grid_posterior_check(draws, grid, naive)
    assert not bad, "negative control (noise ignored) was not rejected"


# ------------------------------------------------------------------ Bernoulli


def _bernoulli_model(n, z, eps):
    with pm.Model() as m:
        p = pm.Beta("p", f64(2.0), f64(2.0))
        x = pm.Bernoulli("x", p, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=eps), observed=f64(z))
    return m


def _bernoulli_reference(n, z, scale, grid):
    lo, hi = max(0, int(z - 40 * scale)), min(n, int(z + 40 * scale))
    s = np.arange(lo, hi + 1)
    lw = stats.laplace.logpdf(z - s, scale=scale)
    ll = special.logsumexp(stats.binom.logpmf(s[None, :], n, grid[:, None]) + lw, axis=1)
    exact = stats.beta.logpdf(grid, 2, 2) + ll
    naive = stats.beta.logpdf(grid, 2 + z, 2 + n - z)
    return exact, naive


@pytest.mark.parametrize(
    ("n", "z", "eps"),
    [(100, 31.0, 0.1), pytest.param(10**6, 300_400.0, 0.003, marks=pytest.mark.slow)],
)
def test_bernoulli_exact(n, z, eps):
    """At N = 1e6 the noise (sd 470) is as wide as the Binomial's (460): the exact posterior
    is 1.4 times wider than the noise-ignoring one, which the same check rejects."""
    m = _bernoulli_model(n, z, eps)
    assert _assigned(m) == {"CollapsedRecords": ["p", "x"]}
    draws = _sample(m, "p", draws=1000)
    centre, half = z / n, 12 * np.sqrt(0.25 / n + (1 / eps / n) ** 2) + 0.02 * (n < 1000)
    grid = np.linspace(max(centre - half, 1e-6), min(centre + half, 1 - 1e-6), 1500)
    exact, naive = _bernoulli_reference(n, z, 1 / eps, grid)
    _check(draws, grid, exact, naive)


def test_bernoulli_same_posterior_as_data_augmentation():
    """N = 1000: the DataAugmentation + ConjugateGibbs run and the collapsed run both pass the
    exact check on the same model."""
    n, z, eps = 1000, 412.0, 0.05
    grid = np.linspace(0.2, 0.65, 1500)
    exact, naive = _bernoulli_reference(n, z, 1 / eps, grid)
    m = _bernoulli_model(n, z, eps)
    with m:
        steps = [DataAugmentation([m["x"]]), ConjugateGibbs([m["p"]])]
    _check(_sample(m, "p", step=steps), grid, exact, naive)
    _check(_sample(m, "p"), grid, exact, naive)


# ------------------------------------------------------------------ Categorical table


def _table_reference(n, z, eps, grid):
    """w ~ Dirichlet(1, 1, 1): the Dirichlet-multinomial of the counts is uniform on the
    compositions of n, so p(c0 | z) ∝ eta(z0 - c0) * sum_c1 eta(z1 - c1) eta(z2 - n + c0 + c1)
    (a convolution), and w0 | c0 ~ Beta(1 + c0, 2 + n - c0)."""
    alpha = np.exp(-eps / 2.0)
    w = int(np.ceil(40 / (1 - alpha))) + 10

    def eta(k):  # two-sided geometric log pmf
        return np.log1p(-alpha) - np.log1p(alpha) + np.abs(k) * np.log(alpha)

    c1 = np.arange(max(0, int(z[1]) - w), min(n, int(z[1]) + w) + 1)
    c0 = np.arange(max(0, int(z[0]) - w), min(n, int(z[0]) + w) + 1)
    # t = c0 + c1 ranges over sums; eta2 reads n - t
    e1 = np.exp(eta(z[1] - c1))
    tt = np.arange(c0[0] + c1[0], c0[-1] + c1[-1] + 1)
    e2 = np.exp(eta(z[2] - (n - tt)))
    # sum_c1 e1(c1) e2(c0 + c1) for each c0: correlation
    corr = signal.fftconvolve(e2, e1[::-1], mode="valid")[: len(c0)]
    logp_c0 = eta(z[0] - c0) + np.log(np.maximum(corr, 1e-300))
    valid = c0 + c1[0] <= n
    logp_c0 = np.where(valid, logp_c0, -np.inf)
    wts = np.exp(logp_c0 - special.logsumexp(logp_c0))
    keep = wts > 1e-14
    dens = stats.beta.pdf(grid[:, None], 1 + c0[keep], 2 + n - c0[keep]) @ wts[keep]
    exact = np.log(np.maximum(dens, 1e-300))
    naive = stats.beta.logpdf(grid, 1 + z[0], 2 + n - z[0])
    return exact, naive


@pytest.mark.parametrize(
    ("n", "eps"), [(100, 0.5), pytest.param(10**6, 0.004, marks=pytest.mark.slow)]
)
def test_categorical_table_exact(n, eps):
    z = np.array([0.5 * n, 0.3 * n, 0.2 * n]).round().astype(np.int64)
    z[0] += 3
    with pm.Model() as m:
        w = pm.Dirichlet("w", np.ones(3))
        x = pm.Categorical("x", w, shape=n)
        table = pm.math.stack([pm.math.eq(x, k).sum() for k in range(3)])
        pmdp.Release("t", table, pmdp.Geometric(epsilon=eps, sensitivity=2), observed=z)
    assert _assigned(m) == {"CollapsedRecords": ["w", "x"]}
    with m, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            draws=1500,
            tune=300,
            chains=2,
            cores=1,
            var_names=["w"],
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["w"].values[..., 0]
    sd = np.sqrt(0.25 / n + (2 * 2 / eps / n) ** 2)
    grid = np.linspace(max(z[0] / n - 12 * sd, 1e-6), min(z[0] / n + 12 * sd, 1 - 1e-6), 1200)
    exact, naive = _table_reference(n, z, eps, grid)
    _check(draws, grid, exact, naive)


# ------------------------------------------------------------------ Poisson


@pytest.mark.parametrize(
    ("n", "scale"), [(100, 20.0), pytest.param(10**6, 400.0, marks=pytest.mark.slow)]
)
def test_poisson_exact(n, scale):
    a, b = 2.0, 200.0 if n > 1000 else 1.0
    lam_true = a / b
    z = float(round(n * lam_true) + 0.3 * scale)
    with pm.Model() as m:
        lam = pm.Gamma("lam", f64(a), f64(b))
        x = pm.Poisson("x", lam, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(scale=scale), observed=z)
    assert _assigned(m) == {"CollapsedRecords": ["lam", "x"]}
    draws = _sample(m, "lam")
    s = np.arange(max(0, int(z - 30 * scale)), int(z + 30 * scale) + 1)
    # S | z ∝ Laplace(z - S) * NegBin(S; a, b / (b + n)) (the Gamma-Poisson marginal)
    lw = stats.laplace.logpdf(z - s, scale=scale) + stats.nbinom.logpmf(s, a, b / (b + n))
    wts = np.exp(lw - special.logsumexp(lw))
    keep = wts > 1e-14
    sd = np.sqrt(z + scale**2) / n + 0.5 * (n < 1000)
    grid = np.linspace(max(z / n - 10 * sd, 1e-9), z / n + 10 * sd, 1200)
    dens = stats.gamma.pdf(grid[:, None], a + s[keep], scale=1 / (b + n)) @ wts[keep]
    exact = np.log(np.maximum(dens, 1e-300))
    naive = stats.gamma.logpdf(grid, a + z, scale=1 / (b + n))
    _check(draws, grid, exact, naive)


# ------------------------------------------------------------------ Normal


@pytest.mark.parametrize(("n", "noise"), [(100, "gaussian"), (10**6, "laplace")])
def test_normal_exact(n, noise):
    sigma, s0 = 2.0, 10.0
    scale = 5.0 * np.sqrt(n) * sigma
    z = 0.7 * n + 0.5 * scale
    mech = pmdp.Gaussian(sigma=scale) if noise == "gaussian" else pmdp.Laplace(scale=scale)
    with pm.Model() as m:
        mu = pm.Normal("mu", f64(0.0), f64(s0))
        x = pm.Normal("x", mu, f64(sigma), shape=n)
        pmdp.Release("z", x.sum(), mech, observed=f64(z))
    assert _assigned(m) == {"CollapsedRecords": ["mu", "x"]}
    draws = _sample(m, "mu")
    v_s = n * sigma**2
    sd_noise = scale if noise == "gaussian" else np.sqrt(2) * scale
    half = 12 * np.sqrt(v_s + sd_noise**2) / n
    grid = np.linspace(z / n - half, z / n + half, 1500)
    prior = stats.norm.logpdf(grid, 0, s0)
    if noise == "gaussian":
        exact = prior + stats.norm.logpdf(z, n * grid, np.sqrt(v_s + scale**2))
    else:  # z - n mu = S' + e, S' ~ N(0, v_s), e ~ Laplace(scale): the normal-Laplace density
        sd, r = np.sqrt(v_s), z - n * grid
        t1 = special.log_ndtr(r / sd - sd / scale) + sd**2 / (2 * scale**2) - r / scale
        t2 = special.log_ndtr(-r / sd - sd / scale) + sd**2 / (2 * scale**2) + r / scale
        exact = prior + np.logaddexp(t1, t2)
    naive = prior + stats.norm.logpdf(z, n * grid, np.sqrt(v_s))
    _check(draws, grid, exact, naive)


# ------------------------------------------------------------------ what falls back


def _base(n=40):
    m = pm.Model()
    with m:
        p = pm.Beta("p", f64(1.0), f64(1.0))
        x = pm.Bernoulli("x", p, shape=n)
    return m, p, x


def test_falls_back_for_weighted_and_clamped_statistics():
    m, _p, x = _base()
    with m:
        pmdp.Release("z", (np.arange(40) % 3 * x).sum(), pmdp.Laplace(scale=2.0), observed=f64(9))
    assert _assigned(m) == {"DataAugmentation": ["x"], "ConjugateGibbs": ["p"]}
    with pm.Model() as m2:
        lam = pm.Gamma("lam", f64(2.0), f64(1.0))
        y = pm.Poisson("y", lam, shape=30)
        pmdp.Release(
            "z",
            pm.math.clip(y, 0, 4).sum(),
            pmdp.Laplace(epsilon=1.0, sensitivity=4),
            observed=f64(40),
        )
    assert _assigned(m2) == {"DataAugmentation": ["y"], "ConjugateGibbs": ["lam"]}


def test_falls_back_with_observed_child_or_free_sigma():
    m, _p, x = _base()
    with m:
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(12))
        pm.Normal("y", x, f64(1.0), observed=np.zeros(40))
    assert "CollapsedRecords" not in _assigned(m)
    with pm.Model() as m2:
        mu = pm.Normal("mu", f64(0.0), f64(1.0))
        s = pm.HalfNormal("s", f64(1.0))
        x2 = pm.Normal("x", mu, s, shape=20)
        pmdp.Release("z", x2.sum(), pmdp.Laplace(scale=3.0), observed=f64(1.0))
    assert "CollapsedRecords" not in _assigned(m2)


def test_non_conjugate_parent_keeps_nuts_and_records_collapse():
    with pm.Model() as m:
        a = pm.Normal("a", f64(0.0), f64(1.5))
        x = pm.Bernoulli("x", pm.math.invlogit(a), shape=200)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=0.5), observed=f64(70))
    assigned = _assigned(m)
    assert assigned["CollapsedRecords"] == ["x"] and assigned["NUTS"] == ["a"]
    draws = _sample(m, "a", draws=1000)
    grid = np.linspace(-3.5, 2.5, 1500)
    s = np.arange(0, 201)
    lw = stats.laplace.logpdf(70 - s, scale=2.0)
    p = special.expit(grid)
    ll = special.logsumexp(stats.binom.logpmf(s[None, :], 200, p[:, None]) + lw, axis=1)
    exact = stats.norm.logpdf(grid, 0, 1.5) + ll
    ok, chk = grid_posterior_check(draws, grid, exact)
    assert ok, chk
    # negative control: the prior alone (the release ignored) is rejected on the same draws
    bad, _ = grid_posterior_check(draws, grid, stats.norm.logpdf(grid, 0, 1.5))
    assert not bad


def test_records_stay_a_valid_draw():
    """The records in the point always sum to the drawn statistic, and are 0/1."""
    m = _bernoulli_model(500, 200.0, 0.2)
    with m:
        step = CollapsedRecords([m["x"], m["p"]], rng=3)
    point = m.initial_point()
    for _ in range(50):
        point, _ = step.step(point)
        x = point["x"]
        assert set(np.unique(x)) <= {0, 1}
        assert int(step._blocks[0].counts()[1]) == int(x.sum())


def test_declared_sensitivity_checked():
    with pm.Model() as m:
        w = pm.Dirichlet("w", np.ones(3))
        x = pm.Categorical("x", w, shape=50)
        table = pm.math.stack([pm.math.eq(x, k).sum() for k in range(3)])
        with _unchecked():  # the step's check is under test (Release's proof refuses 1)
            pmdp.Release(
                "t",
                table,
                pmdp.Geometric(epsilon=1.0, sensitivity=1),
                observed=np.array([20, 20, 10]),
            )
    with m, pytest.raises(ValueError, match=r"declares sensitivity 1.*moves its statistic by 2"):
        CollapsedRecords([m["x"], m["w"]])
    with pm.Model() as m2:
        lam = pm.Gamma("lam", f64(2.0), f64(1.0))
        y = pm.Poisson("y", lam, shape=30)
        pmdp.Release("z", y.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(40))
    with m2, pytest.raises(ValueError, match="without bound"):
        CollapsedRecords([m2["y"]])


def test_plan_refuses_non_affine_and_other_inputs():
    with pm.Model() as m:
        x = pm.Bernoulli("x", f64(0.3), shape=10)
        c = pm.Normal("c", f64(0.0), f64(1.0))
        pmdp.Release("z", x.sum() + c, pmdp.Laplace(scale=1.0), observed=f64(3))
    assert collapse_plan(m, m["x"]) is None
    with pm.Model() as m2:
        y = pm.Poisson("y", f64(3.0), shape=10)
        pmdp.Release("z", (y**2).sum(), pmdp.Laplace(scale=1.0), observed=f64(3))
    assert collapse_plan(m2, m2["y"]) is None


# ------------------------------------------------------------------ a table of cells


def test_table_of_cells_exact():
    """Three record variables (the cells), each Bernoulli with its own Beta(1, 1) rate, one
    Release of the three counts and their total (Laplace, sensitivity 6): the cells are drawn
    in turn, each given the others, with its rate integrated out. Reference: p(S | z) ∝
    prod_g eta(z_g - S_g) * eta(z_3 - sum S) (the Beta(1, 1)-binomial is uniform), enumerated
    over all 31^3 count triples; p_0 | S_0 ~ Beta(1 + S_0, 1 + N - S_0)."""
    n, scale = 30, 3.0
    z = np.array([9.0, 20.0, 14.0, 41.0])
    with pm.Model() as m:
        cells = []
        for g in range(3):
            p = pm.Beta(f"p{g}", f64(1.0), f64(1.0))
            cells.append(pm.Bernoulli(f"x{g}", p, shape=n))
        counts = pm.math.stack([c.sum() for c in cells])
        table = pm.math.concatenate([counts, counts.sum()[None]])
        # a record is row i of x0, x1, x2 (Release's rule): it moves the three counts and
        # the total by up to 3 each, L1 6 (the scale is given, so this is accounting only)
        pmdp.Release("t", table, pmdp.Laplace(scale=scale, sensitivity=6.0), observed=z)
    assert _assigned(m) == {"CollapsedRecords": ["p0", "p1", "p2", "x0", "x1", "x2"]}
    draws = _sample(m, "p0")
    s = np.arange(n + 1)
    lap = stats.laplace.logpdf
    lw = (
        lap(z[0] - s, scale=scale)[:, None, None]
        + lap(z[1] - s, scale=scale)[None, :, None]
        + lap(z[2] - s, scale=scale)[None, None, :]
        + lap(z[3] - (s[:, None, None] + s[None, :, None] + s[None, None, :]), scale=scale)
    )
    w0 = np.exp(special.logsumexp(lw, axis=(1, 2)) - special.logsumexp(lw))
    grid = np.linspace(1e-4, 1 - 1e-4, 2000)
    exact = np.log(stats.beta.pdf(grid[:, None], 1 + s, 1 + n - s) @ w0)
    naive = stats.beta.logpdf(grid, 1 + z[0], 1 + n - z[0])
    _check(draws, grid, exact, naive)


def test_cells_must_share_the_step():
    with pm.Model() as m:
        p = pm.Beta("p", f64(1.0), f64(1.0))
        a = pm.Bernoulli("a", p, shape=10)
        b = pm.Bernoulli("b", p, shape=10)
        pmdp.Release(
            "t",
            pm.math.stack([a.sum(), b.sum()]),
            pmdp.Laplace(scale=1.0),
            observed=np.array([3.0, 4.0]),
        )
    with m, pytest.raises(ValueError, match="give CollapsedRecords both"):
        CollapsedRecords([m["a"]])


# ------------------------------------------------------------------ the hot path


def _reference_chain(n, z, eps, ab, x0, seed, iters, refresh=16):
    """The Bernoulli-Beta iteration written with the public kernels only: S from its
    beta-binomial marginal given z (window sampler at u = rng.random()), the records moved to
    it and refreshed (CategoricalAllocation.move_to / refresh), then p ~ Beta(a + S, b + N - S)
    clipped into (0, 1) as draw_beta does; yields (log-odds of p, records) per iteration."""
    from pymc_dp.kernels.allocation import CategoricalAllocation
    from pymc_dp.kernels.collapsed_stat import BETA_BINOMIAL, marginal_count_sampler

    mech = pmdp.Laplace(epsilon=eps)
    sampler = marginal_count_sampler(mech.numba_logpdf)
    params = mech.numba_params[None, :].copy()
    rng = np.random.default_rng(seed)
    alloc = CategoricalAllocation(x0, 2)
    a, b = ab
    for _ in range(iters):
        s, _w = sampler(BETA_BINOMIAL, n, a, b, np.zeros(1), np.ones(1), np.array([z]), params,
                        rng.random())  # fmt: skip
        alloc.move_to(np.array([n - s, s]), rng)
        if refresh:
            alloc.refresh(refresh, rng)
        p = np.clip(rng.beta(a + s, b + (n - s)), np.finfo(np.float64).tiny, np.nextafter(1, 0))
        yield np.log(p) - np.log1p(-p), alloc.x


@pytest.mark.parametrize("n", [2000, 200_000])
def test_step_is_the_reference_iteration_draw_for_draw(n):
    """The step's cached hot path (constant prior, compiled kernels, one compiled call for
    the records' move and refresh, the direct Beta draw) makes exactly the draws of the
    iteration written with the public kernels, for the same generator (deterministic:
    false-alarm rate 0). Negative control: the reference without the refresh moves differs."""
    eps, z, ab = 0.1, 0.4 * n + 3.5, (10.0, 10.0)
    with pm.Model() as m:
        p = pm.Beta("p", f64(ab[0]), f64(ab[1]))
        x = pm.Bernoulli("x", p, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=f64(eps)), observed=f64(z))
        step = CollapsedRecords([x, p], rng=np.random.default_rng(21))
    point = m.initial_point()
    ref = _reference_chain(n, z, eps, ab, point["x"], 21, 200)
    control = _reference_chain(n, z, eps, ab, point["x"], 21, 200, refresh=0)
    same_control = True
    for (lo, xs), (lo_c, xs_c) in zip(ref, control, strict=True):
        point, _ = step.step(point)
        np.testing.assert_array_equal(point["p_logodds__"], lo)
        np.testing.assert_array_equal(point["x"], xs)
        same_control &= bool(np.array_equal(point["x"], xs_c) and point["p_logodds__"] == lo_c)
    assert not same_control


def test_prior_is_cached_only_when_constant():
    """Constant hyperparameters: prior() is one object, computed once. Hyperparameters that
    are model variables are read from each point (a changed value changes the prior)."""
    m = _bernoulli_model(300, 100.0, 0.2)
    with m:
        step = CollapsedRecords([m["x"], m["p"]], rng=1)
    upd = step._updaters[0]
    point = m.initial_point()
    assert upd.prior(point) is upd.prior(point)
    with pm.Model() as m2:
        a = pm.Gamma("a", f64(20.0), f64(10.0))
        p = pm.Beta("p", a, f64(2.0))
        x = pm.Bernoulli("x", p, shape=300)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=0.2), observed=f64(100.0))
        step2 = CollapsedRecords([x, p], rng=1)
    upd2 = step2._updaters[0]
    pt = m2.initial_point()
    first = float(upd2.prior(pt)[1][0])
    pt["a_log__"] = np.asarray(np.log(5.0))
    assert upd2.prior(pt)[1][0] == pytest.approx(5.0) and first == pytest.approx(2.0)
    # its draws follow the current a: Beta(a + S, 2 + N - S) with S fixed by the release
    new, _ = step2.step(pt)
    assert np.isfinite(new["p_logodds__"])


def test_pickled_step_continues_the_same_chain():
    """A step pickled mid-chain (records' index, compiled kernels and generator pointers are
    dropped and rebuilt) continues with the same statistic and parameter draws as the
    original (the rebuilt index orders the records afresh, so which records move differs)."""
    import copy

    import cloudpickle  # as pm.sample sends steps to its worker processes

    m = _bernoulli_model(1000, 400.0, 0.1)
    with m:
        step = CollapsedRecords([m["x"], m["p"]], rng=np.random.default_rng(4))
    point = m.initial_point()
    for _ in range(5):
        point, _ = step.step(point)
    twin = cloudpickle.loads(cloudpickle.dumps(step))
    twin.rng = copy.deepcopy(step.rng)
    p1, p2 = dict(point), {k: v.copy() for k, v in point.items()}
    for _ in range(20):
        p1, _ = step.step(p1)
        p2, _ = twin.step(p2)
        assert int(p1["x"].sum()) == int(p2["x"].sum())
        assert p1["p_logodds__"] == p2["p_logodds__"]
    assert twin._blocks[0]._words.rng is twin.rng
