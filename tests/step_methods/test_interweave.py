"""The non-centred interweaving move (:mod:`pymc_dp.step_methods.interweave`, issue 23).

Exactness is checked against references computed without the model graph, with the suite's
false-alarm rate (:data:`pymc_dp.testing.FALSE_ALARM`, 1e-6 per assertion):

* n = 3 Normal records with known variance, ``mu ~ N(0, 1)``, the unclamped sum released with
  Gaussian noise: the posterior of ``mu`` is Normal in closed form (mean and second moment
  within k MCSE);
* a chain of records (``y``'s location reads the record ``X``, as in the regression) with
  ``(sum X, sum y)`` released: Normal posterior of ``mu`` in closed form;
* Ju et al.'s regression with d = 1, n = 6 (X, then y | X; every parameter unknown, the
  clamped (X'X, X'y, y'y) released with Laplace noise): posterior means of beta and v against
  self-normalised importance sampling from the prior (numpy), the reference's own standard
  error in the bound;
* n = 3 Normal records with unknown variance ``v ~ InvGamma(4, 3)``, the *clamped* sum
  released with Gaussian noise: the posterior of ``log v`` on a grid, the likelihood computed
  by quadrature over the records (Gauss-Legendre over two clamped records, the third
  integrated in closed form; checked against Monte Carlo while writing it). Checked with
  :func:`pymc_dp.testing.grid_posterior_check` (mean and three quantiles).

In all four, the parameters are moved *only* by the interweaving move (steps
``[DataAugmentation(records), Interweave]``: no conjugate step), so a wrong move cannot hide
behind an exact centred step. Negative controls: the same move without the Jacobian term
``sum log scale(theta)`` (``jacobian=False``) must fail the same check (with known variance
the Jacobian is constant, so the controls are on the unknown-variance and regression models;
measured at z = 52 and 140 against 1.1 and 0.5 for the right move). Plain ``pm.sample()`` with
the hook installed adds the move and passes the grid check, also beside NUTS on a
non-conjugate prior.
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.sampling import mcmc
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.step_methods.interweave import (
    Interweave,
    hook_installed,
    install_interweave_hook,
    interweave_plan,
    uninstall_interweave_hook,
)
from pymc_dp.testing import FALSE_ALARM, grid_posterior_check, mcse_check


def f64(x):
    return np.asarray(x, dtype=np.float64)


@pytest.fixture
def hook():
    """The hook installed for the test, and PyMC left as it was found afterwards."""
    was = hook_installed()
    install_interweave_hook()
    yield
    if not was:
        uninstall_interweave_hook()


# ---------------------------------------------------------------------- models
Z_SUM, NOISE_SUM = 2.0, 1.5  # known-variance model: release of sum x + N(0, 1.5)


def sum_model():
    with pm.Model() as m:
        mu = pm.Normal("mu", f64(0.0), f64(1.0))
        x = pm.Normal("x", mu, f64(1.0), shape=3)
        pmdp.Release("z", x.sum(), pmdp.Gaussian(sigma=NOISE_SUM), observed=f64(Z_SUM))
    return m


def sum_posterior():
    """mu ~ N(0, 1); z | mu ~ N(3 mu, sqrt(3 + s^2)): Normal posterior (mean, variance)."""
    tau2 = 3.0 + NOISE_SUM**2
    prec = 1.0 + 9.0 / tau2
    return (3.0 * Z_SUM / tau2) / prec, 1.0 / prec


M, LO, HI, SIG, Z_CL = 0.3, -1.0, 1.0, 0.5, 2.2  # clamped model
A0, B0 = 4.0, 3.0


def clamped_model():
    with pm.Model() as m:
        v = pm.InverseGamma("v", f64(A0), f64(B0))
        x = pm.Normal("x", f64(M), pt.sqrt(v), shape=3)
        pmdp.Release(
            "z", pt.clip(x, f64(LO), f64(HI)).sum(), pmdp.Gaussian(sigma=SIG), observed=f64(Z_CL)
        )
    return m


def clamped_loglik(v, k=60, mean=M):
    """log p(z | v) of :func:`clamped_model`: z = sum_{i<3} clip(x_i) + N(0, SIG).

    Two clamped records by quadrature (each an atom at LO, an atom at HI and Gauss-Legendre
    nodes on (LO, HI) weighted by the Normal density), the third in closed form: for
    ``w = z - c1 - c2``, ``E N(w - clip(x3); 0, SIG)`` is the two atoms plus
    ``N(w; M, sqrt(SIG^2 + v)) [Phi((HI - m*) / t) - Phi((LO - m*) / t)]`` with the Gaussian
    product's ``m* = (w v + M SIG^2) / (SIG^2 + v)``, ``t = SIG sqrt(v / (SIG^2 + v))``.
    """
    M = mean  # the record mean (the module constant by default)
    v = np.asarray(v, dtype=np.float64)[:, None, None]
    s = np.sqrt(v)
    nodes, weights = np.polynomial.legendre.leggauss(k)
    xk = 0.5 * (HI - LO) * nodes + 0.5 * (HI + LO)
    wk = 0.5 * (HI - LO) * weights
    p_lo = stats.norm.cdf((LO - M) / s)[..., 0]
    p_hi = stats.norm.sf((HI - M) / s)[..., 0]
    dens = wk[None, :] * stats.norm.pdf((xk[None, :] - M) / s[..., 0]) / s[..., 0]
    vals = np.concatenate([[LO, HI], xk])
    wts = np.concatenate([p_lo, p_hi, dens], axis=1)
    w = (Z_CL - vals[:, None] - vals[None, :])[None]
    pair = wts[:, :, None] * wts[:, None, :]
    tot2 = SIG**2 + v
    m_star = (w * v + M * SIG**2) / tot2
    t = SIG * s / np.sqrt(tot2)
    inner = stats.norm.pdf(w, M, np.sqrt(tot2)) * (
        stats.norm.cdf((HI - m_star) / t) - stats.norm.cdf((LO - m_star) / t)
    )
    g = (
        p_lo[..., None] * stats.norm.pdf(w - LO, 0.0, SIG)
        + p_hi[..., None] * stats.norm.pdf(w - HI, 0.0, SIG)
        + inner
    )
    return np.log((pair * g).sum(axis=(1, 2)))


def log_v_grid():
    """Grid over ``log v`` and the unnormalised log posterior of ``log v``."""
    u = np.linspace(-4.0, 4.0, 1601)
    v = np.exp(u)
    logprior = stats.invgamma.logpdf(v, A0, scale=B0) + u  # density of log v
    return u, logprior + clamped_loglik(v)


def run(model, steps, draws=3000, seed=11, **kw):
    with model:
        return pm.sample(
            draws=draws,
            tune=1000,
            chains=2,
            cores=1,
            step=steps,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **kw,
        )


# ---------------------------------------------------------------------- plan / refusal
def test_plan_finds_normal_records_and_their_parameters():
    plan = interweave_plan(clamped_model())
    assert [r.name for r in plan.records] == ["x"]
    assert [p.name for p in plan.parameters] == ["v"]


def test_plan_follows_a_chain_of_records():
    """Regression: y's location reads the record X, so both are transformed, X first."""
    from pymc_dp.releases import release_sufficient_statistics

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(6, 2)), rng.normal(size=6)
    rel = release_sufficient_statistics(
        (X, y), "linear_regression", bounds=((-1.0, 1.0), (-1.0, 1.0)),
        mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=100.0), rng=rng, allow_float=True
    )  # fmt: skip
    plan = interweave_plan(rel.model((np.zeros(2), np.eye(2), 2.0, 1.0)))
    assert [r.name for r in plan.records] == ["X", "y"]
    assert sorted(p.name for p in plan.parameters) == ["X_mu", "X_v", "beta_white", "v"]
    assert sorted(sorted(p.name for p in b) for b in plan.blocks) == [
        ["X_mu", "X_v"],
        ["beta_white", "v"],
    ]


def bernoulli_model():
    with pm.Model() as m:
        p = pm.Beta("p", f64(1.0), f64(1.0))
        x = pm.Bernoulli("x", p, shape=5)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(2.0))
    return m


def plain_model():
    """An ordinary PyMC model (no Release) with Normal latents and a discrete variable, so
    that pm.sample builds a compound step through instantiate_steppers."""
    with pm.Model() as m:
        mu = pm.Normal("mu", f64(0.0), f64(1.0))
        x = pm.Normal("x", mu, f64(1.0), shape=3)
        k = pm.Bernoulli("k", f64(0.5))
        pm.Normal("y", x.sum() + k, f64(1.0), observed=f64(0.5))
    return m


def test_no_move_without_normal_records_or_release():
    assert interweave_plan(bernoulli_model()) is None
    assert interweave_plan(plain_model()) is None
    with pytest.raises(ValueError, match=r"no continuous pm\.Normal record"):
        Interweave(model=bernoulli_model())


def _instantiated(model, **step_kwargs):
    """What pm.sample would build (assign_step_methods, then the possibly hooked
    instantiate_steppers)."""
    provided, selected = mcmc.assign_step_methods(model, None, methods=mcmc.STEP_METHODS)
    steps = mcmc.instantiate_steppers(
        model, provided, selected, step_kwargs=step_kwargs, initial_point=model.initial_point()
    )
    steps = steps if isinstance(steps, list) else [steps]
    return [type(s).__name__ for s in steps], steps


def test_hook_adds_the_move_only_where_it_applies(hook):
    names, steps = _instantiated(clamped_model())
    assert names[-1] == "Interweave" and names.count("Interweave") == 1
    assert steps[-1].n_steps_per_block == [10]
    assert "Interweave" not in _instantiated(clamped_model(), interweave=False)[0]
    _, steps = _instantiated(clamped_model(), interweave={"n_steps": 2})
    assert steps[-1].n_steps_per_block == [2]
    assert "Interweave" not in _instantiated(bernoulli_model())[0]
    assert "Interweave" not in _instantiated(plain_model())[0]
    # steps passed for every variable are left as they are
    m = clamped_model()
    with m:
        given = [DataAugmentation([m["x"]]), pm.Metropolis([m["v"]])]
    assert _instantiated_given(m, given) == ["DataAugmentation", "Metropolis"]
    # the move passed alone: PyMC still assigns DataAugmentation to the records (ergodic)
    with m:
        alone = [Interweave(model=m)]
    assert _instantiated_given(m, alone) == ["Interweave", "DataAugmentation"]


def _instantiated_given(model, given):
    provided, selected = mcmc.assign_step_methods(model, given, methods=mcmc.STEP_METHODS)
    steps = mcmc.instantiate_steppers(model, provided, selected, step_kwargs={})
    return [type(s).__name__ for s in (steps if isinstance(steps, list) else [steps])]


# ---------------------------------------------------------------------- exactness
def test_closed_form_posterior_known_variance():
    m = sum_model()
    with m:
        steps = [DataAugmentation([m["x"]]), Interweave(model=m)]
    idata = run(m, steps)
    mean, var = sum_posterior()
    draws = idata.posterior["mu"].values
    chk1 = mcse_check(draws, mean)
    chk2 = mcse_check(draws**2, var + mean**2)
    assert chk1.passed, chk1
    assert chk2.passed, chk2
    assert float(idata.sample_stats["iw_accept"].mean()) > 0.1  # the move does move


B_CHAIN, NOISE_CHAIN, Z_CHAIN = 0.7, 1.0, np.array([1.5, 0.4])


def chain_model():
    """A chain of records as in the regression: y's location reads the record X."""
    with pm.Model() as m:
        mu = pm.Normal("mu", f64(0.0), f64(1.0))
        X = pm.Normal("X", mu, f64(1.0), shape=3)
        y = pm.Normal("y", f64(B_CHAIN) * X, f64(1.0), shape=3)
        pmdp.Release(
            "z", pt.stack([X.sum(), y.sum()]), pmdp.Gaussian(sigma=NOISE_CHAIN),
            observed=f64(Z_CHAIN),
        )  # fmt: skip
    return m


def chain_posterior():
    """(sum X, sum y) | mu ~ N(mu a, C) with a = 3 (1, b), C = 3 [[1, b], [b, b^2 + 1]];
    z adds N(0, NOISE^2 I): the Normal posterior of mu (mean, variance)."""
    b = B_CHAIN
    a = 3.0 * np.array([1.0, b])
    cov = 3.0 * np.array([[1.0, b], [b, b * b + 1.0]]) + NOISE_CHAIN**2 * np.eye(2)
    prec = 1.0 + a @ np.linalg.solve(cov, a)
    return float(a @ np.linalg.solve(cov, Z_CHAIN)) / prec, 1.0 / prec


def test_closed_form_posterior_chain_of_records():
    m = chain_model()
    plan = interweave_plan(m)
    assert [r.name for r in plan.records] == ["X", "y"]
    with m:
        steps = [DataAugmentation([m["X"], m["y"]]), Interweave(model=m)]
    idata = run(m, steps)
    mean, var = chain_posterior()
    draws = idata.posterior["mu"].values
    chk1 = mcse_check(draws, mean)
    chk2 = mcse_check(draws**2, var + mean**2)
    assert chk1.passed, chk1
    assert chk2.passed, chk2


N_REG, Z_REG, LAPLACE_B = 6, np.array([2.5, 1.2, 2.0]), 1.0  # regression chain, d = 1


def regression_chain_model():
    """Ju et al.'s regression with d = 1 written out: private X and y | X, the clamped
    (X'X, X'y, y'y) released with Laplace noise of scale 1."""
    with pm.Model() as m:
        xv = pm.InverseGamma("X_v", f64(2.0), f64(1.0))
        xm = pm.Normal("X_mu", f64(0.0), pt.sqrt(xv))
        X = pm.Normal("X", xm, pt.sqrt(xv), shape=N_REG)
        v = pm.InverseGamma("v", f64(3.0), f64(1.0))
        beta = pm.Normal("beta", f64(0.0), pt.sqrt(v))
        y = pm.Normal("y", beta * X, pt.sqrt(v), shape=N_REG)
        xc, yc = pt.clip(X, f64(-1.0), f64(1.0)), pt.clip(y, f64(-1.0), f64(1.0))
        stat = pt.stack([(xc * xc).sum(), (xc * yc).sum(), (yc * yc).sum()])
        pmdp.Release("z", stat, pmdp.Laplace(scale=LAPLACE_B), observed=f64(Z_REG))
    return m


def regression_reference(draws=1_000_000, chunk=250_000):
    """Self-normalised importance sampling of E[beta | z] and E[v | z] from the prior (numpy),
    weights the Laplace density of z - T(clip X, clip y): ((mean, standard error) of each,
    effective sample size)."""
    rng = np.random.default_rng(7)
    logw, betas, vs = [], [], []
    for _ in range(draws // chunk):
        xv = 1.0 / rng.gamma(2.0, size=chunk)
        xm = np.sqrt(xv) * rng.standard_normal(chunk)
        X = xm[:, None] + np.sqrt(xv)[:, None] * rng.standard_normal((chunk, N_REG))
        v = 1.0 / rng.gamma(3.0, size=chunk)
        beta = np.sqrt(v) * rng.standard_normal(chunk)
        y = beta[:, None] * X + np.sqrt(v)[:, None] * rng.standard_normal((chunk, N_REG))
        xc, yc = np.clip(X, -1.0, 1.0), np.clip(y, -1.0, 1.0)
        t = np.stack([(xc * xc).sum(1), (xc * yc).sum(1), (yc * yc).sum(1)], axis=1)
        logw.append(-np.abs(Z_REG[None, :] - t).sum(1) / LAPLACE_B)
        betas.append(beta)
        vs.append(v)
    lw = np.concatenate(logw)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    out = []
    for f in (np.concatenate(betas), np.concatenate(vs)):
        est = float(w @ f)
        out.append((est, float(np.sqrt(np.sum(w * w * (f - est) ** 2)))))
    return out, float(1.0 / np.sum(w * w))


def _z_against(draws, reference) -> float:
    """|mean - ref| / sqrt(MCSE^2 + SE_ref^2); <= 4.89 has false-alarm rate 1e-6."""
    res = mcse_check(draws, reference[0])
    return abs(res.mean - reference[0]) / float(np.hypot(res.mcse, reference[1]))


def test_regression_chain_against_importance_sampling_and_negative_control():
    """The regression's chain of records (X, then y | X), every parameter moved only by the
    move: posterior means of beta and v against importance sampling; without the Jacobian
    the same check fails."""
    (ref_beta, ref_v), ess = regression_reference()
    assert ess > 2e4
    k = float(stats.norm.isf(FALSE_ALARM / 2.0))
    m = regression_chain_model()
    with m:
        good = [DataAugmentation([m["X"], m["y"]]), Interweave(model=m)]
        bad = [DataAugmentation([m["X"], m["y"]]), Interweave(model=m, jacobian=False)]
    post = run(m, good).posterior
    assert _z_against(post["beta"].values, ref_beta) <= k
    assert _z_against(post["v"].values, ref_v) <= k
    post = run(m, bad).posterior
    assert max(_z_against(post["beta"].values, ref_beta), _z_against(post["v"].values, ref_v)) > k


def _check_log_v(idata):
    u, logpost = log_v_grid()
    return grid_posterior_check(np.log(idata.posterior["v"].values), u, logpost)


def test_clamped_sum_quadrature_and_negative_control():
    m = clamped_model()
    with m:
        good = [DataAugmentation([m["x"]]), Interweave(model=m)]
        bad = [DataAugmentation([m["x"]]), Interweave(model=m, jacobian=False)]
    ok, chk = _check_log_v(run(m, good))
    assert ok, chk
    ok_bad, chk_bad = _check_log_v(run(m, bad))
    assert not ok_bad, chk_bad  # the move without the Jacobian is caught


def test_plain_pm_sample_adds_the_move_and_is_exact(hook):
    m = clamped_model()
    idata = run(m, None)
    assert "iw_accept" in idata.sample_stats
    ok, chk = _check_log_v(idata)
    assert ok, chk


def test_plain_pm_sample_with_a_non_conjugate_prior_and_nuts(hook):
    """mu ~ StudentT(3) (NUTS, not conjugate), three Normal records, clamped sum released with
    Gaussian noise: the move is added besides NUTS and DataAugmentation, and the posterior
    of mu matches a grid with the likelihood by quadrature (variance known, so the grid is
    over mu: the clamped-sum likelihood of :func:`clamped_loglik` with the mean moved)."""
    with pm.Model() as m:
        mu = pm.StudentT("mu", nu=f64(3.0), mu=f64(0.0), sigma=f64(1.0))
        x = pm.Normal("x", mu, f64(1.0), shape=3)
        pmdp.Release(
            "z", pt.clip(x, f64(LO), f64(HI)).sum(), pmdp.Gaussian(sigma=SIG), observed=f64(Z_CL)
        )
    names, _ = _instantiated(m)
    assert "NUTS" in names and "Interweave" in names
    idata = run(m, None)
    grid = np.linspace(-6.0, 6.0, 1201)
    loglik = np.array([clamped_loglik(np.array([1.0]), mean=g)[0] for g in grid])
    logpost = stats.t.logpdf(grid, 3.0) + loglik
    ok, chk = grid_posterior_check(idata.posterior["mu"].values, grid, logpost)
    assert ok, chk


# ---------------------------------------------------------------------- mechanics
def test_same_draws_with_one_and_two_cores(hook):
    m = clamped_model()
    out = []
    for cores in (1, 2):
        with m:
            idata = pm.sample(
                draws=30, tune=30, chains=2, cores=cores, random_seed=5, progressbar=False,
                compute_convergence_checks=False,
            )  # fmt: skip
        assert "iw_accept" in idata.sample_stats
        out.append(idata.posterior["v"].values)
    np.testing.assert_array_equal(out[0], out[1])
    assert not np.array_equal(out[0][0], out[0][1])  # each chain its own generator


def test_not_added_where_records_are_collapsed_and_lp_kept(hook):
    """Records that CollapsedRecords integrates out get no move; with DataAugmentation
    records and NUTS last (it reports PyMC's lp), the move goes before NUTS so that lp is the
    model's log density at the final point."""
    assert "CollapsedRecords" in _instantiated(sum_model())[0]
    assert "Interweave" not in _instantiated(sum_model())[0]
    m = clamped_model()
    with m:
        s = pm.HalfNormal("s", f64(1.0))
        pm.Normal("y", f64(0.0), s, observed=f64([0.3, -0.2]))
    names, _ = _instantiated(m)
    assert names[-2:] == ["Interweave", "NUTS"]
    with m:
        idata = pm.sample(
            draws=5, tune=5, chains=1, random_seed=2, progressbar=False, var_names=["v", "s", "x"],
            compute_convergence_checks=False,
        )  # fmt: skip
    post = idata.posterior.isel(chain=0, draw=-1)
    point = {"v_log__": np.log(post["v"].values), "x": post["x"].values,
             "s_log__": np.log(post["s"].values)}  # fmt: skip
    lp = float(idata.sample_stats["lp"].values[0, -1])
    np.testing.assert_allclose(lp, m.compile_logp()(point), rtol=1e-10)


def test_pickle_round_trip_continues_identically():
    m = clamped_model()
    step = Interweave(model=m, rng=3)
    point = m.initial_point()
    for _ in range(5):
        point, _ = step.step(point)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    a, sa = step.step(point)
    b, sb = clone.step(point)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert sa == sb


def test_adapts_while_tuning_only_and_restarts_per_chain():
    m = clamped_model()
    step = Interweave(model=m)
    step.setup_chain(np.random.default_rng(1), 100, 100)
    fresh = step.adaptation
    point = m.initial_point()
    for _ in range(60):
        point, _ = step.step(point)
    tuned = step.adaptation
    assert tuned[0]["n_adapt"] > 0 and not np.array_equal(tuned[0]["factor"], fresh[0]["factor"])
    step.stop_tuning()
    for _ in range(20):
        point, _ = step.step(point)
    frozen = step.adaptation
    assert frozen[0]["n_adapt"] == tuned[0]["n_adapt"]
    np.testing.assert_array_equal(frozen[0]["factor"], tuned[0]["factor"])
    assert frozen[0]["log_scale"] == tuned[0]["log_scale"]
    step.setup_chain(np.random.default_rng(1), 100, 100)  # next chain starts untrained
    assert step.tune and step.adaptation[0]["n_adapt"] == 0
    # the sampling state round-trips
    state = step.sampling_state
    step.sampling_state = state
    assert step.adaptation[0]["n_adapt"] == 0


def test_incoming_point_is_not_modified():
    m = clamped_model()
    step = Interweave(model=m, rng=2)
    point = {k: np.array(v) for k, v in m.initial_point().items()}
    copy = {k: v.copy() for k, v in point.items()}
    for _ in range(10):
        new, _ = step.step(point)
    for k in point:
        np.testing.assert_array_equal(point[k], copy[k])
    assert set(new) == set(point)


# ---------------------------------------------------------------------- thinning after tuning
def _two_moment_model(sig, n=50):
    """``n`` Normal records, mean and variance unknown, their clamped sum and sum of squares
    released with Gaussian noise ``sig`` (the normal family's release)."""
    with pm.Model() as m:
        v = pm.InverseGamma("v", f64(4.0), f64(3.0))
        mu = pm.Normal("mu", f64(0.0), pt.sqrt(v))
        x = pm.Normal("x", mu, pt.sqrt(v), shape=n)
        xc = pt.clip(x, f64(-2.0), f64(2.0))
        stat = pt.stack([xc.sum(), (xc * xc).sum()])
        pmdp.Release("z", stat, pmdp.Gaussian(sigma=sig), observed=f64([10.0, 60.0]))
    return m


@pytest.mark.parametrize(
    ("sig", "others", "thinned"),
    [(0.5, True, True), (50.0, True, False), (0.5, False, False)],
    ids=["informative", "noisy", "move-alone"],
)
def test_move_stops_only_where_the_scan_already_mixes(sig, others, thinned, rng):
    """With the default ``n_steps``, the move keeps its 10 steps where it moves the parameters
    farther than the rest of the scan, and stops from the middle of tuning on where the scan
    (ConjugateGibbs + DataAugmentation) already moves them: the move's mean squared jump per
    coordinate in the second quarter of tuning was 0.003-0.006 of the scan's with an
    informative release (sigma 0.5) and 7-28 times it with a noisy one (sigma 50), over three
    seeds; the threshold THIN_BELOW = 0.25 is 40 times from both, so either decision flipping
    by chance is far below the suite's 1e-6. Control: when no other step moves the parameters
    (the move alone), it never stops, whatever the release."""
    from pymc_dp.step_methods.conjugate import ConjugateGibbs
    from pymc_dp.step_methods.interweave import THIN_BELOW

    m = _two_moment_model(sig)
    with m:
        iw = Interweave(model=m)
        steps = [ConjugateGibbs([m["v"], m["mu"]]), iw] if others else [iw]
        pm.sample(
            tune=1000, draws=5, chains=1, cores=1, step=steps, progressbar=False,
            compute_convergence_checks=False, random_seed=rng,
        )  # fmt: skip
    assert iw.n_steps_per_block == ([0] if thinned else [10]), iw.jumps[0]
    if others:
        ratio = iw.jumps[0]["move"] / iw.jumps[0]["scan"]
        assert np.all(ratio < THIN_BELOW / 10) if thinned else np.all(ratio > THIN_BELOW * 10)
    # an explicit n_steps is kept as given
    with m:
        fixed = Interweave(model=m, n_steps=4)
        steps = [ConjugateGibbs([m["v"], m["mu"]]), fixed] if others else [fixed]
        pm.sample(
            tune=200, draws=2, chains=1, cores=1, step=steps, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    assert fixed.n_steps_per_block == [4]
