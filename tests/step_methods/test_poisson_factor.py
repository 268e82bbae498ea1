"""PoissonFactorGibbs: exact against enumeration + quadrature, chosen by pm.sample by rule 5.

Exact references. With ``D = V = 1`` and ``K = 2`` the posterior of ``theta_1`` is a finite
mixture over the allocations ``(c, y - c)`` of the count: integrating ``phi_k`` out,

    g_c(t) = Gamma(t; a_t, b_t) * b_p^a_p Gamma(a_p + c) t^c / (Gamma(a_p) c! (b_p + t)^(a_p + c)),
    M(c) = int g_c(t) dt,    p(theta_1 = t | y) ∝ sum_c g_c(t) M(y - c),

on a fine grid (1-D quadrature). With a privatized count the true count is summed too, weighted
by the two-sided geometric noise. Assertions use ``pymc_dp.testing.grid_posterior_check`` (false
alarm 1e-6 per check); each has a negative control that must be rejected. Sampler seeds come
from the ``rng`` fixture.
"""

from __future__ import annotations

import functools

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from scipy import special

import pymc_dp as pmdp
from pymc_dp.kernels import poisson_factor as kernel
from pymc_dp.step_methods import PoissonFactorGibbs
from pymc_dp.step_methods.claims import poisson_factorizations
from pymc_dp.testing import grid_posterior_check, mcse_check

A_T, B_T, A_P, B_P = 2.0, 1.0, 1.5, 0.8
GRID = np.linspace(1e-9, 40.0, 40_001)


@functools.cache
def _log_g(c):
    """log g_c on GRID (cached: the references reuse each c many times)."""
    t = GRID
    prior = A_T * np.log(B_T) - special.gammaln(A_T) + (A_T - 1) * np.log(t) - B_T * t
    marg = (
        A_P * np.log(B_P)
        + special.gammaln(A_P + c)
        - special.gammaln(A_P)
        - special.gammaln(c + 1)
        + c * np.log(t)
        - (A_P + c) * np.log(B_P + t)
    )
    return prior + marg


@functools.cache
def _log_m(c):
    lg = _log_g(c)
    return special.logsumexp(lg) + np.log(GRID[1] - GRID[0])


def _log_post_theta1(y_weights):
    """Unnormalised log p(theta_1 | data) on GRID; ``y_weights[y]`` = log weight of true count y
    (for observed counts, one entry)."""
    out = np.full(GRID.shape, -np.inf)
    for y, w in y_weights.items():
        for c in range(y + 1):
            out = np.logaddexp(out, w + _log_g(c) + _log_m(y - c))
    return out


def _model(observed, *, private, transform=True):
    with pm.Model() as m:
        kw = {} if transform else {"default_transform": None}
        theta = pm.Gamma("theta", np.float64(A_T), np.float64(B_T), shape=(1, 2), **kw)
        phi = pm.Gamma("phi", np.float64(A_P), np.float64(B_P), shape=(2, 1), **kw)
        if private:
            pmdp.Privatized(
                "y",
                pm.Poisson.dist(theta @ phi),
                pmdp.Geometric(epsilon=1.0),
                marginalize=False,
                observed=np.array([[observed]]),
            )
        else:
            pm.Poisson("y", theta @ phi, observed=np.array([[observed]]))
    return m


def _sample(model, draws, seed, step=None, steps=None, **kw):
    kw.setdefault("cores", 1)
    with model:
        if step is not None:
            steps = [step([model["theta"], model["phi"]])]
        return pm.sample(
            draws=draws,
            tune=200,
            chains=2,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            step=steps,
            **kw,
        )


def _seed(rng):
    return int(rng.integers(2**31))


def test_exact_nonprivate_posterior_of_a_factor(rng):
    idata = _sample(_model(4, private=False), 1_500, _seed(rng), step=PoissonFactorGibbs)
    draws = idata.posterior["theta"].values[:, :, 0, 0]
    ok, chk = grid_posterior_check(draws, GRID, _log_post_theta1({4: 0.0}))
    assert ok, chk
    # negative control: the posterior given a count of 6 instead of 4
    assert not grid_posterior_check(draws, GRID, _log_post_theta1({6: 0.0}))[0]


def test_exact_privatized_posterior_by_plain_pm_sample(rng):
    z, alpha = -2, np.exp(-1.0)  # a negative release: the noise matters
    model = _model(z, private=True)
    _, steps = assign_step_methods(model)
    names = {cls.__name__: sorted(v.name for v in vs) for cls, vs in steps.items()}
    assert names == {"PoissonFactorGibbs": ["phi_log__", "theta_log__", "y_true"]}
    idata = _sample(model, 5_000, _seed(rng))  # 2 x 5000: the control's z about 11
    assert "diverging" not in idata.sample_stats  # no gradient-based step at all
    assert np.all(idata.sample_stats["pf_frac_changed"].values <= 1.0)
    log_noise = {y: abs(z - y) * np.log(alpha) for y in range(0, 60)}  # tail < 1e-20
    exact = _log_post_theta1(log_noise)
    draws = idata.posterior["theta"].values[:, :, 0, 0]
    ok, chk = grid_posterior_check(draws, GRID, exact)
    assert ok, chk
    # negative control: the noise-ignoring posterior (the release clipped at 0 taken as the
    # true count; its mean is 1.215 against the exact 1.329). With 2 x 2500 draws its z was
    # 5.5 to 9.0 over 6 seeds against the bound 4.89 (fails to reject about 1 seed in 300)
    assert not grid_posterior_check(draws, GRID, _log_post_theta1({0: 0.0}))[0]
    # the true counts to CountAugmentation, the factors alone to this step, one scan a call
    with model:
        split = [
            pmdp.CountAugmentation([model["y_true"]]),
            PoissonFactorGibbs([model["theta"], model["phi"]], n_scans=1),
        ]
    idata = _sample(model, 3_000, _seed(rng), steps=split)
    assert grid_posterior_check(idata.posterior["theta"].values[:, :, 0, 0], GRID, exact)[0]


def test_untransformed_factors(rng):
    model = _model(4, private=False, transform=False)
    idata = _sample(model, 1_000, _seed(rng), step=PoissonFactorGibbs)
    draws = idata.posterior["theta"].values[:, :, 0, 0]
    assert grid_posterior_check(draws, GRID, _log_post_theta1({4: 0.0}))[0]


def _geweke(monkeypatch=None, iters=6_000, seed=0):
    """Successive-conditional simulator (Geweke 2004): y ~ Poisson(theta phi), then one step.
    The factors' stationary law is their prior. Returns the chain of theta[0, 0], phi[1, 2]."""
    y0 = np.zeros((3, 4), dtype=np.int64)
    with pm.Model() as m:
        theta = pm.Gamma("theta", np.float64(2.0), np.float64(1.0), shape=(3, 2))
        phi = pm.Gamma("phi", np.float64(3.0), np.float64(2.0), shape=(2, 4))
        data = pm.Data("counts", y0)
        pm.Poisson("y", theta @ phi, observed=data)
        step = PoissonFactorGibbs([theta, phi], rng=seed, n_scans=1)
    rng = np.random.default_rng(seed + 1)
    point = m.initial_point()
    out = np.empty((iters, 2))
    for i in range(iters):
        rates = np.exp(point["theta_log__"]) @ np.exp(point["phi_log__"])
        data.set_value(rng.poisson(rates).astype(data.dtype))
        point, _ = step.step(point)
        out[i] = np.exp(point["theta_log__"][0, 0]), np.exp(point["phi_log__"][1, 2])
    return out


def test_geweke_joint_distribution_keeps_the_prior(monkeypatch, rng):
    seed = _seed(rng)
    out = _geweke(seed=seed)
    for j, mean in enumerate((2.0, 1.5)):  # Gamma(2, 1) and Gamma(3, 2) means
        chk = mcse_check(out[500:, j], mean)
        assert chk.passed, chk
    # negative control: phi's full conditional with the prior's rate (2) counted twice. The
    # chain stays stationary with phi's mean near 0.8 (z 54 to 68 over 10 seeds). (A rate
    # that forgets the prior's rate is no control: that chain drifts off, its ESS falls to
    # about 2 and mcse_check passed it at 6 of 8 seeds.)
    original = kernel.draw_log_gamma
    calls = {"n": 0}

    def wrong(shape, rate, rng):
        calls["n"] += 1
        if calls["n"] % 2 == 0:  # the phi draw of each scan
            rate = rate + 2.0
        return original(shape, rate, rng)

    monkeypatch.setattr(kernel, "draw_log_gamma", wrong)
    bad = _geweke(seed=seed)
    assert not mcse_check(bad[500:, 1], 1.5).passed


def _privatized(theta_kw=None, extra=None, rate=None):
    with pm.Model() as m:
        theta = pm.Gamma("theta", **(theta_kw or {"alpha": 0.1, "beta": 1.0}), shape=(3, 2))
        phi = pm.Gamma("phi", 0.1, 1.0, shape=(2, 4))
        mu = theta @ phi if rate is None else rate(theta, phi)
        pmdp.Privatized(
            "y",
            pm.Poisson.dist(mu),
            pmdp.Geometric(epsilon=1.0),
            marginalize=False,
            observed=np.ones((3, 4), dtype=np.int64),
        )
        if extra is not None:
            extra(theta)
    return m


def test_claims_rule_5():
    m = _privatized()
    assert {v.name for v in poisson_factorizations(m)} == {"theta", "phi", "y_true"}
    assert pmdp.CountAugmentation.competence(m["y_true"]) < PoissonFactorGibbs.competence(
        m["y_true"]
    )
    # the factor read by another random variable: its conditional is not the factorization's
    m = _privatized(extra=lambda t: pm.Normal("w", t.sum(), 1.0, observed=1.0))
    assert poisson_factorizations(m) == {}
    # a Potential on a factor, likewise
    m = _privatized(extra=lambda t: pm.Potential("pot", -t.sum()))
    assert poisson_factorizations(m) == {}


@pytest.mark.parametrize(
    "build",
    [
        lambda: _privatized(rate=lambda t, p: t @ p + 1.0),
        lambda: _privatized(rate=lambda t, p: (t @ p) * 2.0),
    ],
    ids=["offset", "scaled"],
)
def test_not_claimed_when_the_rate_is_not_a_plain_product(build):
    m = build()
    assert poisson_factorizations(m) == {}
    _, steps = assign_step_methods(m)
    assert PoissonFactorGibbs not in steps


def test_hierarchical_rate_is_not_claimed_and_explicit_use_is_refused():
    with pm.Model() as m:
        b = pm.Gamma("b", 1.0, 1.0)
        theta = pm.Gamma("theta", 0.1, b, shape=(3, 2))
        phi = pm.Gamma("phi", 0.1, 1.0, shape=(2, 4))
        pmdp.Privatized(
            "y",
            pm.Poisson.dist(theta @ phi),
            pmdp.Geometric(epsilon=1.0),
            marginalize=False,
            observed=np.ones((3, 4), dtype=np.int64),
        )
    assert poisson_factorizations(m) == {}
    with m, pytest.raises(ValueError, match="cannot sample 'theta'"):
        PoissonFactorGibbs([theta])


def test_ordinary_and_marginal_models_untouched():
    y = np.ones((3, 4), dtype=np.int64)
    with pm.Model() as plain:
        theta = pm.Gamma("theta", 0.1, 1.0, shape=(3, 2))
        phi = pm.Gamma("phi", 0.1, 1.0, shape=(2, 4))
        pm.Poisson("y", theta @ phi, observed=y)
    with pm.Model() as marginal:
        theta = pm.Gamma("theta", 0.1, 1.0, shape=(3, 2))
        phi = pm.Gamma("phi", 0.1, 1.0, shape=(2, 4))
        pmdp.Privatized("y", pm.Poisson.dist(theta @ phi), pmdp.Geometric(epsilon=1.0), observed=y)
    for m in (plain, marginal):
        _, steps = assign_step_methods(m)
        assert PoissonFactorGibbs not in steps
        assert [c.__name__ for c in steps] == ["NUTS"]


def test_n_scans():
    model = _model(3, private=True)
    with model:
        assert PoissonFactorGibbs([model["theta"]]).n_scans == 10  # 1 x 1 x 2: the cap
        for bad in (0, 1.5, True, "2"):
            with pytest.raises(ValueError, match="n_scans must be a positive integer"):
                PoissonFactorGibbs([model["theta"]], n_scans=bad)
    with pm.Model():  # latent counts that no release reads
        theta = pm.Gamma("theta", 1.0, 1.0, shape=(1, 2))
        phi = pm.Gamma("phi", 1.0, 1.0, shape=(2, 1))
        y = pm.Poisson("y", theta @ phi)
        with pytest.raises(ValueError, match="only when they are the true counts"):
            PoissonFactorGibbs([theta, y])


def test_same_seed_same_draws_any_cores_and_pickles():
    model = _model(3, private=True)
    a = _sample(model, 100, 7)
    b = _sample(model, 100, 7, cores=2)
    c = _sample(model, 100, 8)
    ta, tb = a.posterior["theta"].values, b.posterior["theta"].values
    assert np.array_equal(ta, tb)
    assert not np.array_equal(ta, c.posterior["theta"].values)  # control: another seed
    with model:
        step = PoissonFactorGibbs([model["theta"], model["phi"]], rng=1)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point = model.initial_point()
    point["y_true"] = np.array([[3]])
    p1, _ = step.step(point)
    p2, _ = clone.step(point)
    assert p1["theta_log__"].shape == p2["theta_log__"].shape == (1, 2)
