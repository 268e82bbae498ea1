"""SOMA sweep of a DataAugmentation record block (pymc_dp.step_methods.soma).

Exactness against enumerated posteriors, with the block built by ``DataAugmentation`` and driven
through :func:`soma_sweep` (``soma_sweep(spec, scratch, args, rng)``):

* records at a fixed parameter: chains started at exact posterior draws stay exactly
  posterior-distributed after two sweeps (Pearson chi-square on the count, false-alarm 1e-6);
  negative control: the same sweeps with weights of a 3x noise scale leave the posterior
  (rejected at 1e-6; power computed from the exact count chain and asserted);
* Beta-Bernoulli with Laplace noise, the parameter by ConjugateGibbs: posterior means of ``p``
  and of the count within 4.89 MCSE (:func:`pymc_dp.testing.mcse_check`, 1e-6 each); negative
  controls: the noise-ignoring posterior and the prior are rejected by the same check.

Exchangeability refusals (position-dependent law, public per-row data in the statistic,
observed children, non-additive statistic, a coupling that vanishes at the initial point), the
missing-information warning and the noise variances.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import special, stats

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.conjugate import ConjugateGibbs
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.step_methods.soma import (
    check_exchangeable,
    missing_information_fraction,
    noise_variance,
    release_noise_variances,
    soma_sweep,
    warn_if_uninformative,
)
from pymc_dp.testing import FALSE_ALARM, chisquare_gof, mcse_check

SEED = 20261125


def _block(model, rvs, rng=1):
    """``(spec, scratch)`` of the one record block DataAugmentation builds for ``rvs``: a
    (spec, scratch) pair, or one block object holding both (then passed as both)."""
    with model:
        step = DataAugmentation(rvs, rng=rng)
    (block,) = step._blocks
    if isinstance(block, tuple):
        return block[0], block[1]
    return block, block


class _Override:
    """``base`` with some attributes replaced (works for frozen specs too)."""

    def __init__(self, base, **attrs):
        self._base = base
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        return getattr(self._base, name)


def _args(model, point):
    return [np.asarray(point[v.name]) for v in model.value_vars]


# --------------------------------------------------------------------------- fixed parameter
N_F, P_F, Z_F = 6, 0.3, 4
GEOM_F = Geometric(alpha=0.6)


def _count_posterior(mech):
    s = np.arange(N_F + 1)
    logw = stats.binom.logpmf(s, N_F, P_F) + mech.logpdf(Z_F - s)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def _count_chain(mech_used):
    """Exact transition matrix of the count under one SOMA sweep (n attempts) whose weights use
    ``mech_used`` (Bernoulli records are exchangeable, so the count is a Markov chain)."""
    n = N_F
    one = np.zeros((n + 1, n + 1))
    for s in range(n + 1):
        for y, fy in ((0, 1 - P_F), (1, P_F)):
            # positions holding a 1 (s of them) and a 0 (n - s): the count after the swap
            groups = [(s, s - 1 + y), (n - s, s + y)]
            logw = np.array([mech_used.logpdf(Z_F - t) for _, t in groups], dtype=float)
            cnt = np.array([c for c, _ in groups], dtype=float)
            w_cur = math.exp(float(mech_used.logpdf(Z_F - s)))
            w = np.exp(logw)
            big_w = float(np.sum(cnt * w))
            for (c, t), wj in zip(groups, w, strict=True):
                if c == 0:
                    continue
                acc = min(1.0, big_w / (big_w + w_cur - wj))
                one[s, t] += fy * c * wj / big_w * acc
        one[s, s] += 1.0 - one[s].sum()
    return np.linalg.matrix_power(one, n)


@pytest.fixture(scope="module")
def fixed_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=P_F, shape=N_F)
        Release("z", x.sum(), GEOM_F, observed=Z_F)
    return model, _block(model, [x])


def _posterior_records(n_chains, rng):
    """Exact posterior draws of the records: the count from p(s | z), then a uniformly random
    arrangement (the prior is exchangeable, so x | s, z is uniform over arrangements)."""
    s = rng.choice(N_F + 1, size=n_chains, p=_count_posterior(GEOM_F))
    keys = rng.random((n_chains, N_F))
    ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
    return (ranks < s[:, None]).astype(np.int64)


def _run_from_posterior(spec, scratch, n_chains, sweeps, rng):
    starts = _posterior_records(n_chains, rng)
    counts = np.empty(n_chains, np.int64)
    moved = 0
    for c in range(n_chains):
        args = [starts[c].copy()]
        for _ in range(sweeps):
            (args[0],), _ = soma_sweep(spec, scratch, args, rng)
        counts[c] = args[0].sum()
        moved += not np.array_equal(args[0], starts[c])
    return counts, moved / n_chains


def test_fixed_parameter_posterior_is_stationary(fixed_model):
    """Chains started at exact posterior draws: the count after two sweeps against p(s | z)
    (chi-square, 1e-6). Control: weights of a 3x noise scale (rejected; power asserted)."""
    model, (spec, scratch) = fixed_model
    check_exchangeable(model, spec)
    post = _count_posterior(GEOM_F)
    wide = Geometric(alpha=0.6 ** (1 / 3))
    n_chains, sweeps = 4000, 2
    law_bad = post @ np.linalg.matrix_power(_count_chain(wide), sweeps)
    lam = n_chains * np.sum((law_bad - post) ** 2 / post)
    power = stats.ncx2.sf(stats.chi2.isf(FALSE_ALARM, N_F), N_F, lam)
    assert power > 1 - 1e-6
    # the reference count chain itself keeps the posterior (the algebra)
    assert np.abs(post @ _count_chain(GEOM_F) - post).max() < 1e-12
    rng = np.random.default_rng(SEED)
    counts, moved = _run_from_posterior(spec, scratch, n_chains, sweeps, rng)
    p_good = chisquare_gof(counts, lambda k: np.log(post[np.clip(k, 0, N_F)]))
    wrong = _Override(spec, params=np.ascontiguousarray(wide.numba_params[None, :]))
    bad, _ = _run_from_posterior(wrong, scratch, n_chains, sweeps, rng)
    p_bad = chisquare_gof(bad, lambda k: np.log(post[np.clip(k, 0, N_F)]))
    print(f"fixed parameter: p = {p_good:.3g}, control p = {p_bad:.3g}, moved {moved:.3f}")
    assert p_good > FALSE_ALARM
    assert p_bad < FALSE_ALARM
    assert moved > 0.3  # the sweep moves (a do-nothing sweep would also keep the law)


# --------------------------------------------------------------------------- with ConjugateGibbs
N_B, EPS_B, Z_B = 20, 0.5, 1.0


def test_beta_bernoulli_with_conjugate_gibbs_exact_posterior():
    """p ~ Beta(1, 1), x_i ~ Bern(p), z = sum x + Laplace(2): p(s | z) ∝ Lap(z - s) (the count
    is uniform a priori) and p | s ~ Beta(1 + s, 1 + n - s). SOMA for x, ConjugateGibbs for p,
    12,000 iterations: means of p and s within 4.89 MCSE; controls: noise-ignoring posterior
    (mean 0.091 against 0.139: about 20 MCSE away) and the prior rejected."""
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N_B)
        Release("z", x.sum(), Laplace(epsilon=EPS_B, sensitivity=1.0), observed=Z_B)
        cg = ConjugateGibbs([p], rng=2)
    spec, scratch = _block(model, [x])
    check_exchangeable(model, spec)
    rng = np.random.default_rng(SEED)
    point = model.initial_point()
    iters, burn = 12_000, 500
    p_draws, s_draws, acc_min = np.empty(iters), np.empty(iters), 1.0
    for it in range(iters):
        (point["x"],), (_, mn, _) = soma_sweep(spec, scratch, _args(model, point), rng)
        acc_min = min(acc_min, mn)
        point, _ = cg.step(point)
        p_draws[it] = special.expit(point["p_logodds__"])
        s_draws[it] = point["x"].sum()
    p_draws, s_draws = p_draws[burn:], s_draws[burn:]
    s = np.arange(N_B + 1)
    w = np.exp(-np.abs(Z_B - s) * EPS_B)
    w /= w.sum()
    res_p = mcse_check(p_draws, float(np.sum(w * (1 + s) / (N_B + 2))))
    res_s = mcse_check(s_draws, float(np.sum(w * s)))
    ctrl = mcse_check(p_draws, (1 + Z_B) / (N_B + 2))  # noise ignored
    print(f"p: z = {res_p.z:.2f} (ess {res_p.ess:.0f}), s: z = {res_s.z:.2f}, control {ctrl.z:.1f}")
    assert res_p.passed and res_s.passed
    assert not ctrl.passed
    assert not mcse_check(p_draws, 0.5).passed  # the prior
    assert acc_min >= math.exp(-EPS_B) * (1 - 1e-12)


# --------------------------------------------------------------------------- refusals
def _refused(model, rvs, match):
    spec, _ = _block(model, rvs)
    with pytest.raises(ValueError, match=match) as err:
        check_exchangeable(model, spec)
    assert "method='soma'" in str(err.value)


def test_refuses_position_dependent_law():
    with pm.Model() as model:
        x = pm.Normal("x", mu=np.linspace(-1.0, 1.0, 8), sigma=1.0)
        Release("z", x.sum(), Laplace(scale=1.0), observed=0.5)
    _refused(model, [x], "log-prior terms")


def test_refuses_coupling_zero_at_initial_point():
    """mu_i = theta * i with theta = 0 at the initial point: exchangeable there only."""
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 1.0)
        x = pm.Normal("x", mu=theta * np.arange(8.0), sigma=1.0)
        Release("z", x.sum(), Laplace(scale=1.0), observed=0.5)
    _refused(model, [x], "log-prior terms")


def test_refuses_public_data_in_statistic():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.4, shape=8)
        Release("z", (np.arange(1.0, 9.0) * x).sum(), Laplace(scale=3.0), observed=10.0)
    _refused(model, [x], "contributions to the statistic")


def test_refuses_observed_children_and_generic_path():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=6)
        pm.Normal("y", mu=x, sigma=1.0, observed=np.zeros(6))
        Release("z", x.sum(), Laplace(scale=1.0), observed=0.5)
    _refused(model, [x], "observed per-record children")
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=6)
        Release("z", x.max(), Laplace(scale=1.0), observed=0.5)
    _refused(model, [x], "not a sum over records")


def test_accepts_joint_regression_records():
    """(X_i, y_i) records with y_i | X_i ~ N(beta0 + X_i beta): exchangeable given beta."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=3)
        X = pm.Normal("X", 0.5, 1.0, shape=(10, 2))
        y = pm.Normal("y", beta[0] + (X * beta[1:]).sum(-1), 1.0, shape=10)
        stat = pt.concatenate([(X * y[:, None]).sum(0), (y**2).sum()[None]])
        Release("z", stat, Laplace(scale=5.0), observed=np.array([1.0, 2.0, 3.0]))
    spec, scratch = _block(model, [X, y])
    check_exchangeable(model, spec)
    (x_new, y_new), (acc, mn, mean) = soma_sweep(
        spec, scratch, _args(model, model.initial_point()), np.random.default_rng(SEED)
    )
    assert x_new.shape == (10, 2) and y_new.shape == (10,)
    assert 0 <= acc <= 10 and 0.0 <= mn <= mean <= 1.0


# --------------------------------------------------------------------------- cache contract
def test_cache_and_contract(fixed_model):
    """The returned arrays are new, the cache holds their t and is reused (and is correct)."""
    _, (spec, scratch) = fixed_model
    rng = np.random.default_rng(SEED)
    args = [np.ones(N_F, np.int64)]
    recs, _ = soma_sweep(spec, scratch, args, rng)
    assert recs[0] is not args[0] and args[0].tolist() == [1] * N_F
    assert scratch.last[0] is recs[0]
    np.testing.assert_array_equal(scratch.t_cur[:, 0], recs[0])
    for _ in range(20):  # the cached path: t stays that of the returned records
        recs, _ = soma_sweep(spec, scratch, recs, rng)
        np.testing.assert_array_equal(scratch.t_cur[:, 0], recs[0])


# --------------------------------------------------------------------------- information
def test_missing_information_fraction_and_warning():
    """lambda = V_e / (V_e + n p (1 - p)) (Bernoulli(0.5): the sample variance of the offers'
    t is 1/4 up to O(1/n_draws)); warns above 0.99 only."""
    n = 50
    for eps, warn in ((0.01, True), (2.0, False)):
        with pm.Model() as model:
            x = pm.Bernoulli("x", p=0.5, shape=n)
            Release("z", x.sum(), Laplace(epsilon=eps), observed=20.0)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            spec, _ = _block(model, [x])  # DataAugmentation warns at construction
        assert any("missing information" in str(r.message) for r in rec) is warn
        var = release_noise_variances(model, spec)
        assert var.tolist() == [2.0 / eps**2]
        exact = var[0] / (var[0] + n * 0.25)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            lam = missing_information_fraction(
                spec, _args(model, model.initial_point()), var, np.random.default_rng(SEED),
                draws=20,
            )  # fmt: skip
        assert abs(lam[0] - exact) <= 0.01 * exact
        msgs = [str(r.message) for r in rec if "missing information" in str(r.message)]
        assert bool(msgs) is warn, (eps, lam, msgs)
        if warn:
            assert f"{lam[0]:.4f}" in msgs[0]
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            lam2 = warn_if_uninformative(model, spec)
        assert abs(lam2[0] - exact) <= 0.05 * exact
        assert any("missing information" in str(r.message) for r in rec) is warn


def test_uninformative_warning_says_what_to_do():
    """The warning ends with what the user can do: the interweaving move for Normal records
    (named with the parameters it moves), the generic list (Privatized, collapsible records,
    longer chains with the r_hat / ess_bulk check) for others."""
    with pm.Model() as bern:
        x = pm.Bernoulli("x", p=0.5, shape=50)
        Release("z", (2 * x).sum(), Laplace(epsilon=0.01, sensitivity=2.0), observed=20.0)
    with pm.Model() as normal:
        mu = pm.Normal("mu", np.float64(0.0), np.float64(1.0))
        y = pm.Normal("y", mu, np.float64(1.0), shape=50)
        Release("z", pt.clip(y, -1.0, 1.0).sum(), Laplace(epsilon=0.01, sensitivity=2.0),
                observed=np.float64(3.0))  # fmt: skip
    for model, rv, expect, absent in (
        (bern, x, ["pmdp.Privatized", "CollapsedRecords", "az.summary(idata)"], "interweaving"),
        (normal, y, ["interweaving move", "moves mu", "interweave=False"], "CollapsedRecords"),
    ):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            _block(model, [rv])
        msgs = [str(r.message) for r in rec if "What you can do" in str(r.message)]
        assert len(msgs) == 1, [str(r.message) for r in rec]
        assert all(e in msgs[0] for e in expect), msgs[0]
        assert absent not in msgs[0]


@pytest.mark.parametrize(
    "mech",
    [Laplace(scale=1.7), Geometric(alpha=0.7), Gaussian(sigma=2.5), DiscreteGaussian(sigma=0.8)],
    ids=lambda m: type(m).__name__,
)
def test_noise_variance(mech):
    """Against the sample variance of 10^6 of the mechanism's draws: within 6 standard errors
    of the sample variance (sd from the sample fourth moment; two-sided rate about 2e-9)."""
    d = np.asarray(mech.sample_noise(10**6, rng=np.random.default_rng(SEED)), np.float64)
    v = d.var()
    se = math.sqrt((np.mean((d - d.mean()) ** 4) - v**2) / d.size)
    assert abs(noise_variance(mech) - v) <= 6 * se
    # negative control: a 5% larger variance is outside the band
    assert abs(1.05 * noise_variance(mech) - v) > 6 * se


# --------------------------------------------------------------------------- through pm.sample
def _soma_wired() -> bool:
    return "method" in inspect.signature(DataAugmentation.__init__).parameters


@pytest.mark.skipif(not _soma_wired(), reason="DataAugmentation has no method= option yet")
def test_pm_sample_method_soma_exact_posterior():
    """``DataAugmentation(method="soma")`` with ConjugateGibbs in pm.sample (2 chains x 3,000
    draws): the exact Beta-Bernoulli posterior of the test above (means of p and s within 4.89
    MCSE); controls: noise-ignoring posterior and prior rejected. ``method="soma"`` refuses
    non-exchangeable records at construction."""
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N_B)
        Release("z", x.sum(), Laplace(epsilon=EPS_B, sensitivity=1.0), observed=Z_B)
        step = [DataAugmentation([x], method="soma"), ConjugateGibbs([p])]
        idata = pm.sample(
            3000, tune=300, chains=2, cores=1, step=step, random_seed=SEED,
            progressbar=False, compute_convergence_checks=False, var_names=["p", "x"],
        )  # fmt: skip
    s = np.arange(N_B + 1)
    w = np.exp(-np.abs(Z_B - s) * EPS_B)
    w /= w.sum()
    p_draws = idata.posterior["p"].values
    s_draws = idata.posterior["x"].values.sum(-1)
    assert mcse_check(p_draws, float(np.sum(w * (1 + s) / (N_B + 2)))).passed
    assert mcse_check(s_draws, float(np.sum(w * s))).passed
    assert not mcse_check(p_draws, (1 + Z_B) / (N_B + 2)).passed
    assert not mcse_check(p_draws, 0.5).passed
    acc_min = float(idata.sample_stats["da_accept_min"].min())
    assert acc_min >= math.exp(-EPS_B) * (1 - 1e-12)
    with pm.Model():
        x = pm.Normal("x", mu=np.linspace(-1.0, 1.0, 8), sigma=1.0)
        Release("z", x.sum(), Laplace(scale=1.0), observed=0.5)
        with pytest.raises(ValueError, match="method='soma'"):
            DataAugmentation([x], method="soma")


def test_declared_sensitivity_checked_in_the_sweep(fixed_model):
    """An offer moving the count by 1 against a declared sensitivity of 0.5: ValueError naming
    the release (control: sensitivity 1 passes)."""
    _, (spec, scratch) = fixed_model
    common = {"comp_release": np.zeros(1, np.int64), "l2": np.zeros(1, np.bool_)}
    small = _Override(spec, sens=np.array([0.5]), **common)
    args = [np.zeros(N_F, np.int64)]
    with pytest.raises(ValueError, match=r"'z'.*declared sensitivity 0\.5"):
        for seed in range(20):  # an offer of 1 at some position (P = 1 - 0.7^6 per sweep)
            soma_sweep(small, scratch, args, np.random.default_rng(seed))
    ok = _Override(spec, sens=np.array([1.0]), **common)
    for seed in range(20):
        soma_sweep(ok, scratch, args, np.random.default_rng(seed))


def test_statistic_with_other_variables():
    """T = sum (x_i - mu) involves the free mu: T is evaluated, not cached; after a sweep the
    kept contributions are those of the returned records at the current mu."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Normal("x", mu, 1.0, shape=5)
        Release("z", (x - mu).sum(), Laplace(scale=1.0), observed=0.7)
    spec, scratch = _block(model, [x])
    assert spec.free_T
    check_exchangeable(model, spec)
    point = model.initial_point()
    point["mu"] = np.asarray(0.8)
    rng = np.random.default_rng(SEED)
    for _ in range(5):
        (point["x"],), _ = soma_sweep(spec, scratch, _args(model, point), rng)
        np.testing.assert_allclose(scratch.t_cur[:, 0], point["x"] - 0.8, rtol=1e-12)


def test_missing_information_fraction_pools_batches_exactly():
    """The batch-by-batch pooled variance (one batch in memory) equals the variance of all
    batches concatenated, to rounding; a wrong pooling (mean of batch variances, which drops
    the between-batch term) is a negative control that differs."""
    from types import SimpleNamespace

    batches = [np.random.default_rng(s).normal(loc=3.0 * s, size=(50 + s, 2)) for s in range(4)]

    class Offers:
        def __init__(self):
            self.k = 0

        def draw(self, args, rng):
            self.k += 1
            return [batches[self.k - 1]]

    spec = SimpleNamespace(names=["x"], n=100, proposer=Offers(), fn=lambda recs: [recs])
    noise = np.array([7.0, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lam = missing_information_fraction(spec, [], noise, np.random.default_rng(0))
    v_ref = 100 * np.concatenate(batches).var(axis=0, ddof=1)
    np.testing.assert_allclose(lam, noise / (noise + v_ref), rtol=1e-12)
    v_wrong = 100 * np.mean([b.var(axis=0, ddof=1) for b in batches], axis=0)
    assert np.all(np.abs(noise / (noise + v_wrong) - lam) > 1e-3)
