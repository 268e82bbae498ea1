"""DataAugmentation: exact posteriors, acceptance bound, assignment, validity errors, pickling.

Statistical assertions use :func:`pymc_dp.testing.mcse_check` with its default false-alarm rate
1e-6 (|mean - exact| <= 4.89 MCSE); every exact-posterior test also asserts that the
noise-ignoring posterior is rejected by the same check (negative control).
"""

from __future__ import annotations

import itertools
import math

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods import STEP_METHODS
from scipy import optimize, stats

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.testing import mcse_check as _mcse_check

SEED = 20261122


def mcse_check(samples, reference):
    """:func:`pymc_dp.testing.mcse_check` (false-alarm rate 1e-6), printing z for the report."""
    res = _mcse_check(samples, reference)
    print(f"mcse_check: mean={res.mean:.5f} ref={reference:.5f} z={res.z:.2f} ess={res.ess:.0f}")
    return res


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Register DataAugmentation the way pymc_dp.step_methods.register_step_methods will, and
    take CollapsedRecords out for this module: its sum-of-records models are the ones that step
    collapses, and this module tests the data-augmentation step itself (the collapse has its own
    tests, tests/step_methods/test_collapsed_records.py)."""
    saved = list(STEP_METHODS)
    if DataAugmentation not in STEP_METHODS:
        STEP_METHODS.insert(0, DataAugmentation)
    for c in [c for c in STEP_METHODS if c.__name__ == "CollapsedRecords"]:
        STEP_METHODS.remove(c)
    yield
    STEP_METHODS[:] = saved  # the list as it was, order included


def _sample(model, draws=2000, tune=500, seed=SEED, **kw):
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **{"var_names": [v.name for v in model.free_RVs], **kw},  # records too
        )


def _check_quantiles(draws, cdf_inv, probs=(0.05, 0.5, 0.95)):
    """P(theta <= exact q-quantile) from the draws is q within 4.89 MCSE of the indicator."""
    out = []
    for q in probs:
        ind = (np.asarray(draws) <= cdf_inv(q)).astype(np.float64)
        res = mcse_check(ind, q)
        assert res.passed, (q, res)
        out.append(res.z)
    return out


def _mixture_quantile(cdf, lo, hi):
    return lambda q: optimize.brentq(lambda t: cdf(t) - q, lo, hi, xtol=1e-12)


# --------------------------------------------------------------------------- Bernoulli
N_B, EPS_B, Z_B = 20, 0.5, 1.0


@pytest.fixture(scope="module")
def bernoulli_run():
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N_B)
        Release("z", x.sum(), Laplace(epsilon=EPS_B, sensitivity=1.0), observed=Z_B)
    return model, _sample(model, draws=2500)


def test_bernoulli_count_exact_posterior(bernoulli_run):
    """p ~ Beta(1,1), x_i ~ Bern(p), z = sum x + Laplace(2): enumerate the count s.

    With a Beta(1, 1) prior the count is uniform on 0..n a priori, so
    P(s | z) ∝ Lap(z - s) and p | s, z ~ Beta(1 + s, 1 + n - s).
    """
    _, idata = bernoulli_run
    s = np.arange(N_B + 1)
    w = np.exp(-np.abs(Z_B - s) * EPS_B)
    w /= w.sum()
    mean_p = float(np.sum(w * (1 + s) / (N_B + 2)))
    mean_s = float(np.sum(w * s))
    post = idata.posterior
    p_draws = post["p"].values
    s_draws = post["x"].values.sum(-1)
    assert mcse_check(p_draws, mean_p).passed
    assert mcse_check(s_draws, mean_s).passed

    def cdf(t):
        return float(np.sum(w * stats.beta.cdf(t, 1 + s, 1 + N_B - s)))

    _check_quantiles(p_draws, _mixture_quantile(cdf, 1e-12, 1 - 1e-12))
    # negative control: the noise-ignoring posterior Beta(1 + z, 1 + n - z)
    assert not mcse_check(p_draws, (1 + Z_B) / (N_B + 2)).passed
    # the DA step is there and ran
    assert np.all(np.isfinite(idata.sample_stats["da_accept_rate"].values))


def test_acceptance_at_least_exp_minus_epsilon(bernoulli_run):
    """Ju et al.: for an epsilon-DP release every acceptance probability is >= e^-epsilon."""
    _, idata = bernoulli_run
    st = idata.sample_stats
    amin = st["da_accept_min"].values
    assert amin.min() >= math.exp(-EPS_B) - 1e-12
    # the bound is attained (some record moves the count away from z)
    assert amin.min() <= math.exp(-EPS_B) + 1e-9
    assert np.all(st["da_accept_mean"].values >= amin - 1e-12)
    rate = st["da_accept_rate"].values
    assert 0.0 < rate.mean() <= 1.0


# --------------------------------------------------------------------------- categorical
N_C, K_C, EPS_C = 15, 3, 1.0
Z_C = np.array([1.0, 6.0, 8.0])


def _record_step(model, records, method):
    """The explicit record step for ``method="soma"`` (``pm.sample`` picks DA by itself)."""
    if method == "da":
        return {}
    with model:
        return {"step": [DataAugmentation(records, method=method)]}


@pytest.mark.parametrize("method", ["da", "soma"])
def test_categorical_count_vector_exact_posterior(method):
    """w ~ Dir(1,1,1), c_i ~ Cat(w), z = counts + Laplace(b = 2/eps) (sensitivity 2).

    Under Dir(1, ..., 1) every count vector s with sum n has the same prior mass, so
    P(s | z) ∝ prod_k Lap(z_k - s_k) and w_0 | s ~ Beta(1 + s_0, K - 1 + n - s_0).
    """
    mech = Laplace(epsilon=EPS_C, sensitivity=2.0)
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(K_C))
        c = pm.Categorical("c", p=w, shape=N_C)
        Release("zc", pt.eq(c[:, None], pt.arange(K_C)).sum(0), mech, observed=Z_C)
    idata = _sample(model, draws=2500, **_record_step(model, [c], method))
    tables = np.array(
        [t for t in itertools.product(range(N_C + 1), repeat=K_C) if sum(t) == N_C], float
    )
    logw = -np.abs(Z_C - tables).sum(1) / mech.scale
    wt = np.exp(logw - logw.max())
    wt /= wt.sum()
    w_draws = idata.posterior["w"].values
    for k in range(K_C):
        exact = float(np.sum(wt * (1 + tables[:, k]) / (N_C + K_C)))
        assert mcse_check(w_draws[..., k], exact).passed, k
    s0 = tables[:, 0]

    def cdf(t):
        return float(np.sum(wt * stats.beta.cdf(t, 1 + s0, K_C - 1 + N_C - s0)))

    _check_quantiles(w_draws[..., 0], _mixture_quantile(cdf, 1e-12, 1 - 1e-12))
    # negative control: noise-ignoring posterior Dir(1 + z)
    assert not mcse_check(w_draws[..., 0], (1 + Z_C[0]) / (N_C + K_C)).passed
    amin = idata.sample_stats["da_accept_min"].values.min()
    assert amin >= math.exp(-EPS_C) - 1e-12


# --------------------------------------------------------------------------- Normal sums
def _grid_posterior(theta, log_prior, m_of_theta, v_of_theta, z, b):
    """Posterior on a theta grid when z = S + Laplace(b), S | theta ~ N(m, v) (quadrature)."""
    s_grid = np.linspace(z - 40 * b - 60, z + 40 * b + 60, 40001)
    ds = s_grid[1] - s_grid[0]
    lap = np.exp(-np.abs(z - s_grid) / b) / (2 * b)
    m = m_of_theta(theta)[:, None]
    v = v_of_theta(theta)[:, None]
    dens = np.exp(-0.5 * (s_grid[None, :] - m) ** 2 / v) / np.sqrt(2 * np.pi * v)
    like = (dens * lap[None, :]).sum(1) * ds
    post = np.exp(log_prior(theta)) * like
    dt = theta[1] - theta[0]
    post /= post.sum() * dt
    cdf = np.cumsum(post) * dt
    mean = float(np.sum(theta * post) * dt)
    return mean, lambda q: float(np.interp(q, cdf, theta))


@pytest.mark.parametrize("method", ["da", pytest.param("soma", marks=pytest.mark.slow)])
def test_normal_sum_exact_posterior(method):
    """mu ~ N(0, 1), x_i ~ N(mu, 1) (n = 10), z = sum x + Laplace(10): quadrature reference."""
    n, b, z = 10, 10.0, 8.0
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=n)
        Release("z", x.sum(), Laplace(scale=b), observed=z)
    idata = _sample(model, draws=2500, **_record_step(model, [x], method))
    theta = np.linspace(-6, 6, 3001)
    mean, qf = _grid_posterior(
        theta, lambda t: -0.5 * t**2, lambda t: n * t, lambda t: np.full_like(t, n), z, b
    )
    d = idata.posterior["mu"].values
    assert mcse_check(d, mean).passed
    _check_quantiles(d, qf)
    # negative control: noise-ignoring posterior mu | S = z ~ N(z / (n + 1), 1 / (n + 1))
    assert not mcse_check(d, z / (n + 1)).passed


def test_public_predictor_private_response_exact_posterior():
    """Regression record with a public x_i (pm.Data) and a private y_i ~ N(beta x_i, 1).

    z = sum_i x_i y_i + Laplace(5); S | beta ~ N(beta A, A) with A = sum x_i^2.
    """
    rng = np.random.default_rng(7)
    n, b, z = 12, 5.0, 10.0
    xv = rng.normal(size=n)
    A = float(np.sum(xv**2))
    with pm.Model() as model:
        x = pm.Data("x", xv)
        beta = pm.Normal("beta", 0.0, 1.0)
        y = pm.Normal("y", beta * x, 1.0, shape=n)
        Release("s", (x * y).sum(), Laplace(scale=b), observed=z)
    idata = _sample(model, draws=2500)
    theta = np.linspace(-6, 6, 3001)
    mean, qf = _grid_posterior(
        theta, lambda t: -0.5 * t**2, lambda t: A * t, lambda t: np.full_like(t, A), z, b
    )
    d = idata.posterior["beta"].values
    assert mcse_check(d, mean).passed
    _check_quantiles(d, qf)
    assert not mcse_check(d, z / (A + 1)).passed


def test_private_record_with_public_observed_child_exact_posterior():
    """x_i ~ N(mu, 1) private, y_i ~ N(x_i, 1) public (observed child), z = sum x + Laplace(3).

    The observed child's per-record likelihood ratio enters the acceptance ratio. Given mu and
    y: x_i ~ N((mu + y_i) / 2, 1/2), so S = sum x ~ N((n mu + sum y) / 2, n / 2) and
    y_i | mu ~ N(mu, 2); quadrature over mu.
    """
    rng = np.random.default_rng(11)
    n, b, z = 8, 3.0, 0.0
    y_obs = rng.normal(1.0, np.sqrt(2.0), size=n)
    sy = float(y_obs.sum())
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=n)
        pm.Normal("y", x, 1.0, observed=y_obs)
        Release("z", x.sum(), Laplace(scale=b), observed=z)
    idata = _sample(model, draws=2500)
    theta = np.linspace(-6, 6, 3001)

    def log_prior(t):
        return -0.5 * t**2 - 0.25 * ((y_obs[None, :] - t[:, None]) ** 2).sum(1)

    mean, qf = _grid_posterior(
        theta, log_prior, lambda t: (n * t + sy) / 2, lambda t: np.full_like(t, n / 2), z, b
    )
    d = idata.posterior["mu"].values
    res = mcse_check(d, mean)
    assert res.passed, res
    _check_quantiles(d, qf)
    # negative control: noise-ignoring posterior (S = z exactly), on the same grid
    lp = log_prior(theta) - 0.5 * (z - (n * theta + sy) / 2) ** 2 / (n / 2)
    w = np.exp(lp - lp.max())
    assert not mcse_check(d, float(np.sum(theta * w) / np.sum(w))).passed


def test_generic_path_mixed_families_exact_posterior():
    """Two releases of different families (Laplace total, geometric partial count).

    One DataAugmentation block cannot use the one-family numba kernel, so the exact generic
    path (scan over records, statistic recomputed) runs. Reference by enumeration of
    (s1, s2) = (sum of the first 5, sum of the last 5):
    P(s1, s2) ∝ C(5, s1) C(5, s2) B(1 + s, 1 + n - s), p | s ~ Beta(1 + s, 1 + n - s).
    """
    from scipy.special import betaln, comb

    from pymc_dp.mechanisms.geometric import Geometric

    n, a_obs, b_obs = 10, 7.5, 1
    lap, geo = Laplace(scale=1.0), Geometric(epsilon=1.0)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        Release("a", x.sum(), lap, observed=a_obs)
        Release("b", x[:5].sum(), geo, observed=b_obs)
        step = DataAugmentation([x])
    assert step._blocks[0].generic
    idata = _sample(model, draws=2500)
    s1, s2 = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    s = s1 + s2
    logw = (
        np.log(comb(5, s1)) + np.log(comb(5, s2)) + betaln(1 + s, 1 + n - s)
        + lap.logpdf(a_obs - s) + geo.logpdf(b_obs - s1)
    )  # fmt: skip
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean_p = float(np.sum(w * (1 + s) / (n + 2)))
    d = idata.posterior["p"].values
    assert mcse_check(d, mean_p).passed
    mean_s1 = float(np.sum(w * s1))
    assert mcse_check(idata.posterior["x"].values[..., :5].sum(-1), mean_s1).passed
    # negative control: ignoring the geometric release
    w2 = np.exp(logw - geo.logpdf(b_obs - s1) - (logw - geo.logpdf(b_obs - s1)).max())
    w2 /= w2.sum()
    assert not mcse_check(
        idata.posterior["x"].values[..., :5].sum(-1), float(np.sum(w2 * s1))
    ).passed
    assert idata.sample_stats["da_accept_min"].values.min() >= math.exp(-2.0) - 1e-12


# --------------------------------------------------------------------------- assignment
def _assignment(model, methods):
    with model:
        _, selected = assign_step_methods(model, methods=methods)
    return {cls.__name__: sorted(v.name for v in vs) for cls, vs in selected.items()}


def test_ordinary_model_assignment_unchanged():
    """Registering the step never changes how a model without a Release is sampled."""
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        pm.Bernoulli("b", p=p, shape=5)
        w = pm.Dirichlet("w", np.ones(3))
        pm.Categorical("c", p=w, shape=4)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("x", mu, 1.0, shape=3)
        pm.Poisson("k", 3.0)
        pm.Normal("y", mu, 1.0, observed=np.zeros(3))
        # an unregistered release graph of b (never added to the model) claims nothing
        Release.dist(model["b"].sum(), Laplace(scale=1.0))
    # PyMC's own list versus the list with every registered pymc_dp step
    plain = [m for m in STEP_METHODS if not m.__module__.startswith("pymc_dp")]
    with_da = list(STEP_METHODS)
    assert DataAugmentation in STEP_METHODS
    assert _assignment(model, with_da) == _assignment(model, plain)
    assert "DataAugmentation" not in _assignment(model, with_da)
    # also outside the model context
    _, sel = assign_step_methods(model, methods=with_da)
    assert DataAugmentation not in sel


def test_auto_assignment_blocks_a_record():
    """(X_i, y_i) records feeding a Release go to ONE DataAugmentation; beta (a Normal
    prior entering the Normal likelihood of the latent y linearly) to ConjugateGibbs."""
    n = 6
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        X = pm.Normal("X", 0.0, 1.0, shape=(n, 1))
        y = pm.Normal("y", beta[0] + X[:, 0] * beta[1], 1.0, shape=n)
        Release("xy", (pt.clip(X[:, 0], -1, 1) * pt.clip(y, -1, 1)).sum(), Laplace(scale=1.0),
                observed=0.5)  # fmt: skip
    sel = _assignment(model, None)
    assert sel == {"DataAugmentation": ["X", "y"], "ConjugateGibbs": ["beta"]}
    with model:
        step = DataAugmentation([X, y])
    assert [b.names for b in step._blocks] == [["X", "y"]]


def test_latent_record_part_outside_the_statistic_joins_the_block():
    """w_i ~ N(x_i, 1) is latent and not released: it is proposed jointly with x_i."""
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=6)
        w = pm.Normal("w", x, 1.0, shape=6)
        Release("z", x.sum(), Laplace(scale=1.0), observed=2.0)
    sel = _assignment(model, None)
    assert sel["DataAugmentation"] == ["w", "x"]
    with model:
        step = DataAugmentation([x, w])
        with pytest.raises(ValueError, match="pass it to DataAugmentation together"):
            DataAugmentation([x])
    assert [b.names for b in step._blocks] == [["x", "w"]]


def test_two_record_sets_two_blocks_one_step():
    """Records of different lengths with their own releases: one step, two blocks, exact.

    x (n=6) Bernoulli(p) with a Laplace count; c (n=4) Bernoulli(q) with a Laplace count and a
    second release of x.sum() + c.sum() linking both sets. Checked against enumeration of the
    two counts.
    """
    from scipy.special import betaln, comb

    nx, nc, b = 6, 4, 1.0
    zx, zc, zt = 1.5, 3.5, 4.0
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        q = pm.Beta("q", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=nx)
        c = pm.Bernoulli("c", p=q, shape=nc)
        Release("zx", x.sum(), Laplace(scale=b), observed=zx)
        Release("zc", c.sum(), Laplace(scale=b), observed=zc)
        Release("zt", x.sum() + c.sum(), Laplace(scale=b), observed=zt)
    assert _assignment(model, None)["DataAugmentation"] == ["c", "x"]
    with model:
        step = DataAugmentation([x, c])
    assert sorted(bl.names[0] for bl in step._blocks) == ["c", "x"]
    idata = _sample(model, draws=2000)
    sx, sc = np.meshgrid(np.arange(nx + 1), np.arange(nc + 1), indexing="ij")
    logw = (
        np.log(comb(nx, sx)) + betaln(1 + sx, 1 + nx - sx)
        + np.log(comb(nc, sc)) + betaln(1 + sc, 1 + nc - sc)
        - (np.abs(zx - sx) + np.abs(zc - sc) + np.abs(zt - sx - sc)) / b
    )  # fmt: skip
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert mcse_check(idata.posterior["x"].values.sum(-1), float(np.sum(w * sx))).passed
    assert mcse_check(idata.posterior["q"].values, float(np.sum(w * (1 + sc) / (nc + 2)))).passed
    # negative control: dropping the linking release zt
    logw2 = logw + np.abs(zt - sx - sc) / b
    w2 = np.exp(logw2 - logw2.max())
    w2 /= w2.sum()
    assert not mcse_check(idata.posterior["x"].values.sum(-1), float(np.sum(w2 * sx))).passed


# --------------------------------------------------------------------------- errors
def test_error_record_prior_depends_on_other_records():
    n = 8
    with pm.Model():
        a = pm.Normal("a", 0.0, 1.0, shape=n)
        b = pm.Normal("b", a.mean(), 1.0, shape=n)
        Release("s", (a + b).sum(), Laplace(scale=1.0), observed=0.0)
        with pytest.raises(ValueError, match="not conditionally independent"):
            DataAugmentation([a, b])


def test_error_free_non_record_child():
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0, shape=5)
        pm.Normal("w", x.sum(), 1.0)
        Release("s", x.sum(), Laplace(scale=1.0), observed=0.0)
        with pytest.raises(ValueError, match="free child 'w'"):
            DataAugmentation([x])


def test_error_observed_child_couples_records():
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0, shape=5)
        pm.Normal("o", x.sum(), 1.0, observed=1.0)
        Release("s", x.sum(), Laplace(scale=1.0), observed=0.0)
        with pytest.raises(ValueError, match="no record axis"):
            DataAugmentation([x])


def test_error_not_forward_samplable_at_step_assignment():
    """A record with only a logp cannot be proposed: pm.sample fails at step assignment."""
    with pm.Model() as model:
        x = pm.CustomDist("x", logp=lambda v: -0.5 * v**2, shape=5)
        Release("s", x.sum(), Laplace(scale=1.0), observed=0.0)
    with model, pytest.raises(ValueError, match="cannot be forward-sampled"):
        pm.sample(10, tune=0, chains=1, progressbar=False)


def test_statistic_not_a_sum_takes_generic_path():
    """max() is not a sum over records: the exact generic path is used (checked: T moves)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=5)
        Release("s", x.max(), Laplace(scale=1.0), observed=3.0)
        step = DataAugmentation([x], rng=3)
    assert step._blocks[0].generic
    point = model.initial_point()
    for _ in range(30):
        point, [st] = step.step(point)
    assert 0.0 < st["da_accept_min"] <= st["da_accept_mean"] <= 1.0
    assert point["x"].max() > 0.5


def test_error_potential_on_records():
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0, shape=5)
        pm.Potential("pot", -(x**2).sum())
        Release("s", x.sum(), Laplace(scale=1.0), observed=0.0)
        with pytest.raises(ValueError, match="Potential 'pot'"):
            DataAugmentation([x])


# --------------------------------------------------------------------------- step mechanics
def test_step_does_not_modify_point_and_pickles(rng):
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=10)
        Release("z", x.sum(), Laplace(scale=1.0), observed=4.0)
        step = DataAugmentation([x], rng=1)
    point = model.initial_point()
    before = {k: v.copy() for k, v in point.items()}
    new, [_st] = step.step(point)
    assert all(np.array_equal(point[k], before[k]) for k in point)
    assert new["x"] is not point["x"]
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    a = np.random.default_rng(5)
    step.setup_chain(np.random.default_rng(5), 0, 1)
    clone.setup_chain(a, 0, 1)
    p1, p2 = point, point
    for _ in range(5):
        p1, s1 = step.step(p1)
        p2, s2 = clone.step(p2)
    assert np.array_equal(p1["x"], p2["x"]) and s1 == s2


def test_progressbar_config():
    cols, stats_ = DataAugmentation._progressbar_config(2)
    assert set(stats_) == {"da_accept_rate", "da_accept_min"} and len(cols) == 2
    (upd,) = DataAugmentation._make_progressbar_update_functions()
    assert upd({"da_accept_rate": 0.5, "da_accept_min": 0.3, "da_accept_mean": 0.6}) == {
        "da_accept_rate": 0.5,
        "da_accept_min": 0.3,
    }


def test_same_seed_same_draws_and_spawn(bernoulli_run):
    model, _idata = bernoulli_run
    short = dict(draws=50, tune=20, seed=11)
    a = _sample(model, **short)
    b = _sample(model, **short)
    np.testing.assert_array_equal(a.posterior["x"].values, b.posterior["x"].values)
    np.testing.assert_array_equal(a.posterior["p"].values, b.posterior["p"].values)
    with model:
        c = pm.sample(
            50, tune=20, chains=2, cores=2, mp_ctx="spawn", random_seed=11, progressbar=True,
            compute_convergence_checks=False, var_names=["p", "x"],
        )  # fmt: skip
    np.testing.assert_array_equal(a.posterior["x"].values, c.posterior["x"].values)
    np.testing.assert_array_equal(a.posterior["p"].values, c.posterior["p"].values)


# --------------------------------------------------------------------------- proposal paths
def _proposal_kinds(step):
    """Per block: "compiled", or the list of direct draw kinds ("rng_fn" for the op's own)."""
    out = []
    for b in step._blocks:
        specs = getattr(b.proposer, "specs", None)
        out.append("compiled" if specs is None else [s[-1] or "rng_fn" for s in specs])
    return out


def test_proposal_paths_chosen():
    """Plain RandomVariables are drawn with numpy; transformed records take the compiled graph."""
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=5)
        w = pm.Dirichlet("w", np.ones(3))
        c = pm.Categorical("c", p=w, shape=4)
        mu = pm.Normal("mu", 0.0, 1.0)
        y = pm.Normal("y", mu, 1.0, shape=3)
        h = pm.HalfNormal("h", 1.0, shape=3)
        Release("zx", x.sum(), Laplace(scale=1.0), observed=2.0)
        Release("zc", pt.eq(c[:, None], pt.arange(3)).sum(0), Laplace(scale=2.0),
                observed=np.ones(3))  # fmt: skip
        Release("zy", y.sum(), Laplace(scale=1.0), observed=0.0)
        Release("zh", h.sum(), Laplace(scale=1.0), observed=1.0)
        assert _proposal_kinds(DataAugmentation([x, c, y, h])) == [
            ["bernoulli"], ["rng_fn"], ["normal"], "compiled"
        ]  # fmt: skip
        assert _proposal_kinds(DataAugmentation([x], direct_proposals=False)) == ["compiled"]


N_L, P_L, Z_L, B_L = 8, 0.3, 6.0, 1.0
X0_L = np.array([1, 0, 0, 1, 0, 0, 0, 0])


def _sweep_matrix(n, p, z, b):
    """Exact transition matrix of one DA sweep on the 2^n configurations (records in order)."""
    states = np.array(list(itertools.product([0, 1], repeat=n)))
    index = {tuple(s): k for k, s in enumerate(states)}
    total = np.eye(len(states))
    for i in range(n):
        step = np.zeros((len(states), len(states)))
        for k, s in enumerate(states):
            flipped = s.copy()
            flipped[i] = 1 - s[i]
            q = p if s[i] == 0 else 1.0 - p  # the proposal differs from the current value
            a = min(1.0, math.exp((abs(z - s.sum()) - abs(z - flipped.sum())) / b))
            step[k, index[tuple(flipped)]] += q * a
            step[k, k] += 1.0 - q * a
        total = total @ step
    return states, index, total


def _chisquare_counts(counts, pmf):
    """Chi-square goodness-of-fit p-value, bins with expected < 5 merged into their neighbour."""
    exp = pmf * counts.sum()
    obs_m, exp_m, o_acc, e_acc = [], [], 0.0, 0.0
    for o, e in zip(counts, exp, strict=True):
        o_acc, e_acc = o_acc + o, e_acc + e
        if e_acc >= 5:
            obs_m.append(o_acc)
            exp_m.append(e_acc)
            o_acc = e_acc = 0.0
    if e_acc > 0:
        obs_m[-1] += o_acc
        exp_m[-1] += e_acc
    return stats.chisquare(obs_m, exp_m).pvalue


@pytest.fixture(scope="module")
def bernoulli_sweep_model():
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N_L)
        Release("z", x.sum(), Laplace(scale=B_L), observed=Z_L)
    point = model.initial_point()
    point["p_logodds__"] = np.asarray(np.log(P_L / (1 - P_L)))
    point["x"] = X0_L.copy()
    return model, point


@pytest.mark.parametrize("direct", [True, False])
def test_one_and_two_sweeps_exact_law(bernoulli_sweep_model, direct):
    """The count after one and after two sweeps from a fixed state, against the exact law.

    The exact law is the product of the per-record Metropolis-Hastings kernels on all 2^8
    configurations. The second sweep starts from the records the first returned, so it uses the
    cached contributions t(x_i); the first starts from a point the step never returned, so it
    evaluates them. Both proposal paths (numpy draws, compiled graph) must pass the chi-square
    test (p > 1e-6). Negative control: the law without the accept/reject correction
    (Binomial(8, p) after two sweeps) is rejected (p < 1e-6).
    """
    model, point = bernoulli_sweep_model
    with model:
        step = DataAugmentation([model["x"]], rng=np.random.default_rng(SEED),
                                direct_proposals=direct)  # fmt: skip
    assert (_proposal_kinds(step)[0] == "compiled") is not direct
    reps = 4000
    c1, c2 = np.zeros(N_L + 1), np.zeros(N_L + 1)
    for _ in range(reps):
        p1, _ = step.step(point)
        p2, _ = step.step(p1)
        c1[p1["x"].sum()] += 1
        c2[p2["x"].sum()] += 1
    states, index, K = _sweep_matrix(N_L, P_L, Z_L, B_L)
    start = np.zeros(len(states))
    start[index[tuple(X0_L)]] = 1.0
    law1, law2 = start @ K, start @ K @ K
    counts = states.sum(1)
    pmf1 = np.bincount(counts, weights=law1, minlength=N_L + 1)
    pmf2 = np.bincount(counts, weights=law2, minlength=N_L + 1)
    p_1, p_2 = _chisquare_counts(c1, pmf1), _chisquare_counts(c2, pmf2)
    print(f"direct={direct}: chi-square p after one sweep {p_1:.3g}, after two {p_2:.3g}")
    assert p_1 > 1e-6 and p_2 > 1e-6
    # negative control: no accept/reject (every proposal kept)
    assert _chisquare_counts(c2, stats.binom.pmf(np.arange(N_L + 1), N_L, P_L)) < 1e-6


def test_normal_records_direct_and_compiled_same_law():
    """Normal records (numpy shortcut loc + scale * standard_normal) against the compiled path.

    Sum of the records after two sweeps from a fixed state, 4000 repetitions per path:
    two-sample KS p > 1e-6. Negative control: the direct path against draws without the
    accept/reject correction (sum ~ N(n mu, n)) is rejected (p < 1e-6).
    """
    n, mu0 = 5, 0.5
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=n)
        Release("z", x.sum(), Laplace(scale=1.0), observed=-3.0)
        fast = DataAugmentation([x], rng=np.random.default_rng(SEED))
        slow = DataAugmentation([x], rng=np.random.default_rng(SEED + 1), direct_proposals=False)
    assert _proposal_kinds(fast) == [["normal"]] and _proposal_kinds(slow) == ["compiled"]
    point = model.initial_point()
    point["mu"] = np.asarray(mu0)
    point["x"] = np.linspace(-1.0, 1.0, n)

    def sums(step, reps=4000):
        out = np.empty(reps)
        for r in range(reps):
            p1, _ = step.step(point)
            p2, _ = step.step(p1)
            out[r] = p2["x"].sum()
        return out

    s_fast, s_slow = sums(fast), sums(slow)
    p_same = stats.ks_2samp(s_fast, s_slow).pvalue
    p_ctrl = stats.kstest(s_fast, stats.norm(n * mu0, np.sqrt(n)).cdf).pvalue
    print(f"KS fast vs compiled p = {p_same:.3g}; fast vs no accept/reject p = {p_ctrl:.3g}")
    assert p_same > 1e-6
    assert p_ctrl < 1e-6


def test_compiled_proposals_exact_posterior(bernoulli_run):
    """The compiled proposal path in pm.sample: the exact posterior of the Bernoulli test."""
    model, _ = bernoulli_run
    with model:
        step = DataAugmentation([model["x"]], direct_proposals=False)
    idata = _sample(model, draws=2500, step=[step])
    s = np.arange(N_B + 1)
    w = np.exp(-np.abs(Z_B - s) * EPS_B)
    w /= w.sum()
    p_draws = idata.posterior["p"].values
    assert mcse_check(p_draws, float(np.sum(w * (1 + s) / (N_B + 2)))).passed
    assert mcse_check(idata.posterior["x"].values.sum(-1), float(np.sum(w * s))).passed
    # negative control: the noise-ignoring posterior Beta(1 + z, 1 + n - z)
    assert not mcse_check(p_draws, (1 + Z_B) / (N_B + 2)).passed


def test_cached_contributions_match_fresh_evaluation(bernoulli_sweep_model):
    """After chained sweeps the kept t(x_i) equal t evaluated afresh at the returned records."""
    model, point = bernoulli_sweep_model
    with model:
        step = DataAugmentation([model["x"]], rng=3)
    b = step._blocks[0]
    for _ in range(50):
        point, _ = step.step(point)
    args = [point[name] for name in step._input_names]
    fresh = np.asarray(b.fn(*args, point["x"])[0])
    np.testing.assert_array_equal(b.t_cur, fresh)
    assert b.last[0] is point["x"]
    # the cache is not pickled
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone._blocks[0].t_cur is None


def test_joint_record_block_direct_and_compiled_same_law():
    """Regression records (x_i, y_i), y_i ~ N(beta x_i, 1): ancestral numpy draws (y drawn with
    the *proposed* x) against the compiled graph.

    The released statistic after two sweeps from a fixed state, 4000 repetitions per path:
    two-sample KS p > 1e-6. Negative control: the statistic of plain forward draws (no
    accept/reject) is rejected against the direct path (p < 1e-6).
    """
    n, beta0 = 4, 1.5
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0)
        x = pm.Normal("x", 0.0, 1.0, shape=n)
        y = pm.Normal("y", beta * x, 1.0, shape=n)
        stat = (pt.clip(x, -2.0, 2.0) * pt.clip(y, -2.0, 2.0)).sum()
        Release("s", stat, Laplace(scale=1.0), observed=-4.0)
        fast = DataAugmentation([x, y], rng=np.random.default_rng(SEED))
        slow = DataAugmentation([x, y], rng=np.random.default_rng(SEED + 1), direct_proposals=False)
    assert _proposal_kinds(fast) == [["normal", "normal"]]
    assert _proposal_kinds(slow) == ["compiled"]
    point = model.initial_point()
    point["beta"] = np.asarray(beta0)
    point["x"] = np.linspace(-1.0, 1.0, n)
    point["y"] = np.linspace(1.0, -1.0, n)

    def released(p):
        return float((np.clip(p["x"], -2, 2) * np.clip(p["y"], -2, 2)).sum())

    def sweeps(step, reps=4000):
        out = np.empty(reps)
        for r in range(reps):
            p1, _ = step.step(point)
            p2, _ = step.step(p1)
            out[r] = released(p2)
        return out

    s_fast, s_slow = sweeps(fast), sweeps(slow)
    rng = np.random.default_rng(SEED + 2)
    xf = rng.standard_normal((4000, n))
    yf = beta0 * xf + rng.standard_normal((4000, n))
    s_prior = (np.clip(xf, -2, 2) * np.clip(yf, -2, 2)).sum(1)
    p_same = stats.ks_2samp(s_fast, s_slow).pvalue
    p_ctrl = stats.ks_2samp(s_fast, s_prior).pvalue
    print(f"KS fast vs compiled p = {p_same:.3g}; fast vs forward draws p = {p_ctrl:.3g}")
    assert p_same > 1e-6
    assert p_ctrl < 1e-6


# --------------------------------------------------------------------------- sparse records
def test_sparse_records_positional_statistic_not_taken_as_additive():
    """x[:5].sum() with Bernoulli(0.01) records: records 5..9 never change in a few draws, yet
    the statistic is not sum_i t(x_i) for the one-record contribution t(x_i) = x_i. The check
    must see it (records are made to differ) and take the exact generic path.

    Exact: the records 5..9 do not enter the statistic, so their posterior mean is 0.01; the
    count s = x[:5].sum() has P(s | z) ∝ Binom(s; 5, 0.01) Lap(z - s; 0.5). Negative control:
    the mean of x[5:] under the wrongly-additive kernel (about 0.07) is rejected; here 0.02.
    """
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.01, shape=10)
        Release("z", x[:5].sum(), Laplace(scale=0.5), observed=4.0)
        step = DataAugmentation([x], rng=np.random.default_rng(SEED))
    assert step._blocks[0].generic
    point = model.initial_point()
    draws = np.empty((4000, 10))
    for k in range(len(draws)):
        point, _ = step.step(point)
        draws[k] = point["x"]
    tail = draws[:, 5:].mean(1)
    assert mcse_check(tail, 0.01).passed
    assert not mcse_check(tail, 0.02).passed
    s = np.arange(6)
    w = stats.binom.pmf(s, 5, 0.01) * np.exp(-np.abs(4.0 - s) / 0.5)
    w /= w.sum()
    assert mcse_check(draws[:, :5].sum(1), float(np.sum(w * s))).passed


def test_sparse_records_true_sum_keeps_additive_path():
    """Positive control of the check above: x.sum() with sparse records stays additive."""
    with pm.Model():
        x = pm.Bernoulli("x", p=0.01, shape=10)
        Release("z", x.sum(), Laplace(scale=0.5), observed=4.0)
        step = DataAugmentation([x], rng=1)
    assert not step._blocks[0].generic


@pytest.mark.parametrize("coupled", [True, False])
def test_sparse_records_observed_child_coupling_detected(coupled):
    """An observed child coupling neighbouring records is detected even when Bernoulli(0.01)
    draws leave every record unchanged (the check must not pass vacuously); the uncoupled
    child (mu = 4 x) is accepted."""
    with pm.Model():
        x = pm.Bernoulli("x", p=0.01, shape=10)
        mu = 2.0 * (x + pt.roll(x, 1)) if coupled else 4.0 * x
        pm.Normal("y", mu=mu, sigma=1.0, observed=np.full(10, 2.0))
        Release("z", x.sum(), Laplace(scale=0.5), observed=4.0)
        if coupled:
            with pytest.raises(ValueError, match="not conditionally independent"):
                DataAugmentation([x], rng=1)
        else:
            DataAugmentation([x], rng=1)


# --------------------------------------------------------------------------- method keyword
def _count_model():
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=8)
        Release("z", x.sum(), Laplace(epsilon=1.0), observed=3.2)
    return model


@pytest.mark.parametrize("method", ["DA", "mh", None])
def test_method_must_be_known(method):
    model = _count_model()
    with model, pytest.raises(ValueError, match=r"method must be one of 'da', 'soma'"):
        DataAugmentation([model["x"]], method=method)


def test_method_soma_wired():
    """method="soma" sweeps additive blocks with pymc_dp.step_methods.soma.soma_sweep (its law
    is tested in tests/step_methods/test_soma.py); a generic block is refused, naming method."""
    from pymc_dp.step_methods import da_additive, soma

    model = _count_model()
    with model:
        da = DataAugmentation([model["x"]], rng=2)
        step = DataAugmentation([model["x"]], rng=2, method="soma")
    assert step.sampling_state.method == "soma" and da.sampling_state.method == "da"
    calls = []
    real = soma.soma_sweep

    def spy(*a):
        calls.append(1)
        return real(*a)

    soma.soma_sweep = spy
    try:
        point, [stats] = step.step(model.initial_point())
    finally:
        soma.soma_sweep = real
    assert calls == [1] and point["x"].shape == (8,) and 0.0 <= stats["da_accept_min"] <= 1.0
    assert da._sweeps == [da_additive.additive_sweep]
    with pm.Model():
        y = pm.Normal("y", 0.0, 1.0, shape=4)
        Release("r", y.max(), Laplace(scale=1.0), observed=0.5)
        with pytest.raises(ValueError, match=r"method='soma'"):
            DataAugmentation([y], method="soma")
