"""Tests of the conjugate pairs added with the PAIRS table (pymc_dp.step_methods.conjugate_pairs):
Gamma-Exponential, InverseGamma-Normal variance and the Normal-InverseGamma joint block.

Statistical assertions: many independent exact draws from the step at a fixed point, KS against
the closed-form posterior (scipy, an independent reference), false-alarm rate ALPHA = 1e-6 per
assertion. Each exact test has a wrong-hyperparameter negative control: the same KS test against
the posterior computed with one prior hyperparameter changed must reject (p < ALPHA).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.tensor.random.basic import ExponentialRV, GammaRV, InvGammaRV, NormalRV
from scipy import stats

from pymc_dp.kernels.conjugate import (
    draw_invgamma,
    draw_normal_invgamma,
    gamma_exponential_posterior,
    invgamma_normal_posterior,
    normal_invgamma_posterior,
)
from pymc_dp.step_methods.conjugate import ConjugateGibbs, conjugate_family
from pymc_dp.step_methods.conjugate_pairs import PAIRS, pair_for

ALPHA = 1e-6  # false-alarm rate per statistical assertion
NDRAWS = 6000


def draws_at(step, point, names, n=NDRAWS):
    """``n`` independent exact draws: the step applied ``n`` times to the same ``point``."""
    out = {k: np.empty((n, *np.shape(point[k]))) for k in names}
    for i in range(n):
        new, _ = step.step(point)
        for k in names:
            out[k][i] = new[k]
    return out


def assert_fits(draws, dist, neg_dist):
    """KS: draws fit ``dist`` (p > ALPHA) and reject ``neg_dist`` (p < ALPHA)."""
    p_ok = stats.kstest(draws, dist.cdf).pvalue
    p_neg = stats.kstest(draws, neg_dist.cdf).pvalue
    assert p_ok > ALPHA, p_ok
    assert p_neg < ALPHA, p_neg


def test_table_rows():
    assert [p.family for p in PAIRS] == [
        "beta",
        "gamma",
        "dirichlet",
        "normal",
        "invgamma",
        "normal_invgamma",
    ]
    assert pair_for(GammaRV).link(ExponentialRV).label == "Exponential"
    assert pair_for(InvGammaRV).link(NormalRV).slot == 1  # the variance enters sigma
    assert pair_for(InvGammaRV, block=True).partner is NormalRV


# ---- kernels: closed forms against the unnormalised posterior density ------------------------
def _assert_proportional(log_unnorm, log_closed):
    """prior x likelihood and the closed-form posterior density differ by a constant."""
    diff = np.asarray(log_unnorm - log_closed)
    assert np.ptp(diff) < 1e-9 * max(1.0, np.abs(diff).max()), np.ptp(diff)


def test_kernel_closed_forms_against_prior_times_likelihood():
    x = np.array([0.3, 1.7, 0.9])
    # Gamma-Exponential: prior Gamma(2, rate 0.5)
    a, b = gamma_exponential_posterior(2.0, 0.5, x.sum(), x.size)
    lam = np.linspace(0.01, 20.0, 2001)
    logd = stats.gamma.logpdf(lam, 2.0, scale=2.0) + stats.expon.logpdf(
        x[:, None], scale=1 / lam
    ).sum(0)
    _assert_proportional(logd, stats.gamma.logpdf(lam, a, scale=1 / b))
    # InverseGamma-Normal variance: c_i = (1, 2, 0.5), known mean 0.4
    c = np.array([1.0, 2.0, 0.5])
    a, b = invgamma_normal_posterior(3.0, 2.0, 3, np.sum(((x - 0.4) / c) ** 2))
    v = np.linspace(0.01, 40.0, 2001)
    logd = stats.invgamma.logpdf(v, 3.0, scale=2.0) + stats.norm.logpdf(
        x[:, None], 0.4, c[:, None] * np.sqrt(v)
    ).sum(0)
    _assert_proportional(logd, stats.invgamma.logpdf(v, a, scale=b))
    # Normal-InverseGamma: the joint density on a 2-D grid
    m0, c0, a0, b0 = 0.5, 2.0, 3.0, 2.0
    wts = 1 / c**2
    xbar = np.sum(wts * x) / wts.sum()
    s = np.sum(wts * (x - xbar) ** 2)
    m, k, a, b = normal_invgamma_posterior((m0, 1 / c0**2, a0, b0), wts.sum(), xbar, (s, 3))
    mu_g = np.linspace(-8.0, 8.0, 161)[:, None]
    v_g = np.linspace(0.01, 30.0, 300)[None, :]
    logd = (
        stats.invgamma.logpdf(v_g, a0, scale=b0)
        + stats.norm.logpdf(mu_g, m0, c0 * np.sqrt(v_g))
        + sum(stats.norm.logpdf(xi, mu_g, ci * np.sqrt(v_g)) for xi, ci in zip(x, c, strict=True))
    )
    closed = stats.invgamma.logpdf(v_g, a, scale=b) + stats.norm.logpdf(mu_g, m, np.sqrt(v_g / k))
    _assert_proportional(logd, closed)
    # the textbook sums give the same (m, k, a, b) as the merged statistics
    np.testing.assert_allclose(_nig_exact(x, c), (m, k, a, b), rtol=1e-12)


def test_kernel_draws_fit(rng):
    v = draw_invgamma(rng, np.full(NDRAWS, 3.0), 2.0)
    assert_fits(v, stats.invgamma(3.0, scale=2.0), stats.invgamma(3.0, scale=2.2))
    mu, v = draw_normal_invgamma(rng, 1.0, 4.0, np.full(NDRAWS, 3.0), 2.0)
    # mu marginal: Student-t with 2a degrees of freedom, scale sqrt(b / (a k))
    t_scale = np.sqrt(2.0 / (3.0 * 4.0))
    assert_fits(mu, stats.t(6.0, 1.0, t_scale), stats.t(6.0, 1.0, 1.25 * t_scale))


# ---- Gamma-Exponential --------------------------------------------------------------------------
def test_gamma_exponential_exact(rng):
    """lam ~ Gamma(2, rate 0.5); Exponential children (rate lam) and Poisson children of the
    same lam: Gamma(alpha + m_E + s_P, beta + s_E + m_P). Negative control: prior rate 1.5."""
    xe = rng.exponential(1 / 2.0, size=6)
    xp = rng.poisson(2.0, size=3)
    with pm.Model() as m:
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        pm.Exponential("xe", lam=lam, observed=xe)
        pm.Poisson("xp", mu=lam, observed=xp)
    assert conjugate_family(lam, m) == "gamma"
    step = ConjugateGibbs([lam], model=m, rng=rng)
    draws = np.exp(draws_at(step, m.initial_point(), ["lam_log__"])["lam_log__"])
    a = 2.0 + xe.size + xp.sum()
    b, wrong_b = 0.5 + xe.sum() + xp.size, 1.5 + xe.sum() + xp.size
    assert_fits(draws, stats.gamma(a, scale=1 / b), stats.gamma(a, scale=1 / wrong_b))


def test_gamma_exponential_indexed_vector(rng):
    """Per-group rates lam[g], every group checked (negative control: prior alpha 2 -> 4)."""
    g = rng.integers(0, 3, size=30)
    x = rng.exponential(1.0, size=30)
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 1.0, shape=3)
        pm.Exponential("x", lam=lam[g], observed=x)
    step = ConjugateGibbs([lam], model=m, rng=rng)
    draws = np.exp(draws_at(step, m.initial_point(), ["lam_log__"])["lam_log__"])
    for k in range(3):
        nk, sk = (g == k).sum(), x[g == k].sum()
        assert_fits(
            draws[:, k],
            stats.gamma(2 + nk, scale=1 / (1 + sk)),
            stats.gamma(4 + nk, scale=1 / (1 + sk)),
        )


def test_exponential_values_checked():
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 1.0)
        pm.Exponential("x", lam=lam, observed=np.array([1.0, -0.5]))
    step = ConjugateGibbs([lam], model=m, rng=0)
    with pytest.raises(ValueError, match=r"child x of lam \(Exponential\) .*-0\.5"):
        step.step(m.initial_point())


# ---- InverseGamma-Normal variance -------------------------------------------------------------
SIGMA_FORMS = {
    "sqrt": lambda v, c: {"sigma": c * pt.sqrt(v)},
    "pow": lambda v, c: {"sigma": c * v**0.5},
    "sqrt_ratio": lambda v, c: {"sigma": pt.sqrt(v / c**-2)},
    "tau": lambda v, c: {"tau": 1.0 / (c**2 * v)},
}


@pytest.mark.parametrize("form", sorted(SIGMA_FORMS))
def test_invgamma_normal_variance_exact(rng, form):
    """v ~ InverseGamma(3, 2); x_i ~ N(m_i, c_i sqrt(v)) with known per-record m_i, c_i and
    the mean of a second child the current value of another variable. Exact:
    InverseGamma(a + n / 2, b + sum((x - m) / c)^2 / 2). Negative control: prior b = 3."""
    n = 8
    mean = rng.normal(size=n)
    c = rng.uniform(0.5, 2.0, size=n)
    x = mean + c * np.sqrt(1.5) * rng.normal(size=n)
    y = rng.normal(0.7, 1.2, size=4)
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0)
        mu2 = pm.Normal("mu2", 0.0, 1.0)
        pm.Normal("x", mean, observed=x, **SIGMA_FORMS[form](v, c))
        pm.Normal("y", mu2, sigma=pt.sqrt(v), observed=y)
    assert conjugate_family(v, m) == "invgamma"
    step = ConjugateGibbs([v], model=m, rng=rng)
    assert step.families == {"v_log__": "invgamma"}
    point = m.initial_point()
    point["mu2"] = np.array(0.7)  # the step must use the current value of mu2
    draws = np.exp(draws_at(step, point, ["v_log__"])["v_log__"])
    q = np.sum(((x - mean) / c) ** 2) + np.sum((y - 0.7) ** 2)
    a = 3.0 + (n + 4) / 2
    assert_fits(draws, stats.invgamma(a, scale=2.0 + q / 2), stats.invgamma(a, scale=3.0 + q / 2))


def test_invgamma_factor_from_a_free_variable(rng):
    """sigma = s * sqrt(v) with s a free variable: its current value (2) is used, never a fresh
    draw of s (regression: the factor's graph was rebuilt with a copy of s's random variable).
    Negative control: the posterior with s = 1."""
    x = 2.0 * rng.normal(size=6)
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("x", 0.0, sigma=s * pt.sqrt(v), observed=x)
    step = ConjugateGibbs([v], model=m, rng=rng)
    point = m.initial_point()
    point["s_log__"] = np.log(2.0)
    draws = np.exp(draws_at(step, point, ["v_log__"])["v_log__"])
    q = np.sum(x**2)
    assert_fits(draws, stats.invgamma(6.0, scale=2 + q / 8), stats.invgamma(6.0, scale=2 + q / 2))


def test_invgamma_refuses_other_forms():
    """sigma = v, sqrt(v + 1), exp(v), v in the mean, a cast to an integer (floor: not
    homogeneous), a sign of a shifted v, exp(log(v) / 2) (equal, but not recognised): refused."""
    cases = [
        (lambda v: {"mu": 0.0, "sigma": v}, "not c \\* sqrt"),
        (lambda v: {"mu": 0.0, "sigma": pt.sqrt(v + 1.0)}, "enters through"),
        (lambda v: {"mu": 0.0, "sigma": pt.exp(v)}, "enters through"),
        (lambda v: {"mu": v, "sigma": 1.0}, "another parameter"),
        (lambda v: {"mu": 0.0, "sigma": pt.sqrt(v.astype("int64"))}, "cast to int64"),
        (lambda v: {"mu": 0.0, "sigma": pt.sqrt(v) * pt.sign(v - 1.0)}, "enters through"),
        (lambda v: {"mu": 0.0, "sigma": pt.exp(pt.log(v) / 2)}, "enters through"),
    ]
    for make, msg in cases:
        with pm.Model() as m:
            v = pm.InverseGamma("v", 3.0, 2.0)
            pm.Normal("x", observed=np.zeros(3), **make(v))
        assert conjugate_family(v, m) is None
        with pytest.raises(ValueError, match=msg):
            ConjugateGibbs([v], model=m)


def test_invgamma_indexed_and_summed_forms(rng):
    """Per-group variances v[g] with sigma = sqrt(v[g]) + sqrt(v[g]) (c = 2, one access):
    group k's posterior InverseGamma(3 + n_k / 2, 2 + sum(x^2) / 8). Negative control: c = 1."""
    g = rng.integers(0, 2, size=20)
    x = 2.0 * rng.normal(size=20)
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0, shape=2)
        pm.Normal("x", 0.0, sigma=pt.sqrt(v[g]) + pt.sqrt(v[g]), observed=x)
    step = ConjugateGibbs([v], model=m, rng=rng)
    draws = np.exp(draws_at(step, m.initial_point(), ["v_log__"])["v_log__"])
    with pm.Model() as m2:  # degree 1/2 but two different accesses v[g], v[1 - g]: refused
        v2 = pm.InverseGamma("v", 3.0, 2.0, shape=2)
        sig = pt.sqrt(v2[g]) * pt.sqrt(v2[1 - g]) / pt.sqrt(v2[1 - g])
        pm.Normal("x", 0.0, sigma=sig, observed=x)
    with pytest.raises(ValueError, match="several expressions"):
        ConjugateGibbs([v2], model=m2)
    for k in range(2):
        a, q = 3.0 + (g == k).sum() / 2, np.sum(x[g == k] ** 2)
        assert_fits(
            draws[:, k], stats.invgamma(a, scale=2 + q / 8), stats.invgamma(a, scale=2 + q / 2)
        )


def test_invgamma_values_checked():
    with pm.Model() as m:
        v = pm.InverseGamma("v", pm.Data("a", 3.0), 2.0)
        pm.Normal("x", 0.0, sigma=pm.Data("c", 1.0) * pt.sqrt(v), observed=np.ones(3))
    step = ConjugateGibbs([v], model=m, rng=0)
    point = m.initial_point()
    with m:
        pm.set_data({"c": -1.0})
    with pytest.raises(ValueError, match=r"sigma of child x of v \(at variance 1\) .*-1\.0"):
        step.step(point)
    with m:
        pm.set_data({"c": 1.0, "a": 0.0})
    with pytest.raises(ValueError, match=r"prior parameter alpha of v .*0\.0"):
        step.step(point)
    with m:
        pm.set_data({"a": 3.0})
    assert np.isfinite(step.step(point)[0]["v_log__"])  # valid again


# ---- Normal-InverseGamma joint block ----------------------------------------------------------
def _nig_model(x, c, m0=0.5, c0=2.0, a0=3.0, b0=2.0):
    with pm.Model() as m:
        v = pm.InverseGamma("v", a0, b0)
        mu = pm.Normal("mu", m0, sigma=pt.sqrt(v) * c0)
        pm.Normal("x", mu, sigma=c * pt.sqrt(v), observed=x)
    return m


def _nig_exact(x, c, m0=0.5, c0=2.0, a0=3.0, b0=2.0):
    """(m, k, a, b) by the textbook formulas in numpy (sums, not the library's merge)."""
    w = 1 / c**2
    k = 1 / c0**2 + w.sum()
    m = (m0 / c0**2 + np.sum(w * x)) / k
    b = b0 + 0.5 * (np.sum(w * x**2) + m0**2 / c0**2 - k * m**2)
    return m, k, a0 + x.size / 2, b


def test_normal_invgamma_joint_exact(rng):
    """v marginal InverseGamma(a, b); mu marginal Student-t(2a, m, sqrt(b / (a k))); joint law:
    (mu - m) / sqrt(v / k) ~ N(0, 1) independent of v (checked on the draws with v above and
    below its median). Negative controls: prior beta 2 -> 4 for v, prior factor c0 = 0.5 -> 1
    (mu ~ N(m0, sqrt(v)) in place of N(m0, sqrt(v) / 2)) for mu and the standardized mu."""
    c = np.array([1.0, 2.0, 0.5])
    x = 1.0 + c * rng.normal(size=c.size)
    m = _nig_model(x, c, c0=0.5)
    step = ConjugateGibbs([m["mu"], m["v"]], model=m, rng=rng)
    assert step.families == {"mu": "normal_invgamma", "v_log__": "normal_invgamma"}
    d = draws_at(step, m.initial_point(), ["mu", "v_log__"])
    mu, v = d["mu"], np.exp(d["v_log__"])
    mm, k, a, b = _nig_exact(x, c, c0=0.5)
    wb = _nig_exact(x, c, c0=0.5, b0=4.0)[3]
    wm, wk, _, wb_c = _nig_exact(x, c, c0=1.0)
    assert_fits(v, stats.invgamma(a, scale=b), stats.invgamma(a, scale=wb))
    t_sd, wt_sd = np.sqrt(b / (a * k)), np.sqrt(wb_c / (a * wk))
    assert_fits(mu, stats.t(2 * a, mm, t_sd), stats.t(2 * a, wm, wt_sd))
    z = (mu - mm) / np.sqrt(v / k)
    wz = (mu - wm) / np.sqrt(v / wk)
    low = v < np.median(v)
    for sel in (low, ~low):
        assert stats.kstest(z[sel], stats.norm().cdf).pvalue > ALPHA
        assert stats.kstest(wz[sel], stats.norm().cdf).pvalue < ALPHA


def test_normal_invgamma_vector_block(rng):
    """mu and v of shape (2,), children of shape (4, 2) broadcast by a leading axis: each
    column is its own Normal-InverseGamma block (v marginal; negative control: prior beta 4)."""
    x = rng.normal(size=(4, 2)) + np.array([0.0, 3.0])
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0, shape=2)
        mu = pm.Normal("mu", 0.5, sigma=pt.sqrt(v) * 0.5, shape=2)
        pm.Normal("x", mu, sigma=pt.sqrt(v), observed=x)
    step = ConjugateGibbs([mu, v], model=m, rng=rng)
    assert step.families == {"mu": "normal_invgamma", "v_log__": "normal_invgamma"}
    d = draws_at(step, m.initial_point(), ["mu", "v_log__"])
    for j in range(2):
        _, _, a, b = _nig_exact(x[:, j], np.ones(4), c0=0.5)
        wb = _nig_exact(x[:, j], np.ones(4), c0=0.5, b0=4.0)[3]
        v_j = np.exp(d["v_log__"][:, j])
        assert_fits(v_j, stats.invgamma(a, scale=b), stats.invgamma(a, scale=wb))


def test_normal_invgamma_block_ignores_current_values():
    """A joint block draw does not read the current mu or v: same generator, same draws."""
    x, c = np.array([0.3, 1.2, 2.0]), np.ones(3)
    m = _nig_model(x, c)
    step = ConjugateGibbs([m["v"], m["mu"]], model=m)
    outs = []
    for mu0, lv0 in [(0.0, 0.0), (50.0, 5.0)]:
        step.setup_chain(np.random.default_rng(3), 0, 1)
        new, _ = step.step({"mu": np.array(mu0), "v_log__": np.array(lv0)})
        outs.append((float(new["mu"]), float(new["v_log__"])))
    assert outs[0] == outs[1]


def test_normal_invgamma_single_variable_gibbs(rng):
    """Given only one of the two, the other is held fixed: mu | v is Normal-Normal, v | mu an
    InverseGamma update with children mu and x (negative control: without mu's term)."""
    c = np.ones(4)
    x = np.array([0.2, 1.1, 0.7, 1.9])
    m = _nig_model(x, c)
    assert conjugate_family(m["mu"], m) == "normal" and conjugate_family(m["v"], m) == "invgamma"
    point = m.initial_point()
    point["mu"] = np.array(1.3)
    step = ConjugateGibbs([m["v"]], model=m, rng=rng)
    v = np.exp(draws_at(step, point, ["v_log__"])["v_log__"])
    q = np.sum((x - 1.3) ** 2) + (1.3 - 0.5) ** 2 / 4.0
    wq = np.sum((x - 1.3) ** 2)
    assert_fits(
        v, stats.invgamma(3 + 5 / 2, scale=2 + q / 2), stats.invgamma(3 + 2, scale=2 + wq / 2)
    )


def test_normal_invgamma_refused_structures():
    """A child of mu whose sigma does not read v, or a v of another shape: no joint block
    (the ValueError of the single-variable analysis, or two separate updates)."""
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0)
        mu = pm.Normal("mu", 0.0, sigma=pt.sqrt(v))
        pm.Normal("x", mu, sigma=pt.sqrt(v), observed=np.zeros(3))
        pm.Normal("y", mu, sigma=1.0, observed=np.zeros(2))  # sigma free of v
    step = ConjugateGibbs([mu, v], model=m, rng=0)
    assert step.families == {"mu": "normal", "v_log__": "invgamma"}
    with pm.Model() as m2:
        v = pm.InverseGamma("v", 3.0, 2.0)
        mu = pm.Normal("mu", 0.0, sigma=pt.sqrt(v), shape=2)
        pm.Normal("x", mu, sigma=pt.sqrt(v), observed=np.zeros((3, 2)))
    step = ConjugateGibbs([mu, v], model=m2, rng=0)
    assert step.families == {"mu": "normal", "v_log__": "invgamma"}


# ---- end to end: records of an observed Release, steps assigned by pm.sample -----------------
def _sample(model):
    import pymc_dp  # noqa: F401  (registers the steps)

    with model:
        return pm.sample(
            draws=2000,
            tune=300,
            chains=2,
            cores=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )


def _assert_mean(draws, exact, naive):
    """Posterior mean within 4.89 MCSE of the exact one (1e-6 two-sided) and the
    noise-ignoring mean rejected at the same level."""
    import arviz as az

    mcse = float(az.mcse(np.asarray(draws)))
    mean = float(np.mean(draws))
    assert abs(mean - exact) < 4.89 * mcse, (mean, exact, mcse)
    assert abs(mean - naive) > 4.89 * mcse, (mean, naive, mcse)


@pytest.mark.filterwarnings("ignore:records .* the release is nearly uninformative:UserWarning")
def test_release_gamma_exponential_end_to_end():
    """lam ~ Gamma(2, 1), records x_i ~ Exponential(lam) (n = 10), released z = sum x +
    Laplace(10). pm.sample assigns ConjugateGibbs to lam and DataAugmentation to x. Exact:
    sum x ~ Gamma(n, rate lam), so p(lam | z) is proportional to Gamma(lam; 2, 1) times
    int Gamma(s; n, lam) exp(-|z - s| / 10) ds (grid quadrature). Control: the noise-ignoring
    posterior Gamma(2 + n, 1 + z)."""
    from pymc.sampling.mcmc import assign_step_methods

    import pymc_dp as pmdp

    n, z, scale = 10, 1.0, 10.0
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 1.0)
        x = pm.Exponential("x", lam=lam, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(scale=scale), observed=z)
    _, sel = assign_step_methods(m)
    assert {c.__name__: [v.name for v in vs] for c, vs in sel.items()} == {
        "ConjugateGibbs": ["lam_log__"],
        "DataAugmentation": ["x_log__"],
    }
    draws = _sample(m).posterior["lam"].values
    grid = np.linspace(1e-3, 25.0, 2501)
    s = np.linspace(1e-6, 120.0, 6001)
    lik = stats.gamma.pdf(s[None, :], n, scale=1 / grid[:, None]) @ np.exp(-np.abs(z - s) / scale)
    w = stats.gamma.pdf(grid, 2.0) * lik
    _assert_mean(draws, float(np.sum(w * grid) / np.sum(w)), (2.0 + n) / (1.0 + z))


def test_release_normal_invgamma_end_to_end():
    """v ~ InverseGamma(3, 2), mu ~ N(0, sqrt(v)), records x_i ~ N(mu, sqrt(v)) (n = 10),
    released z = sum x + Laplace(10). pm.sample gives ConjugateGibbs both mu and v (one joint
    block) and DataAugmentation x. Exact: given v, sum x ~ N(0, sqrt(v n (n + 1))) and
    E[mu | s, v] = s / (n + 1); grid quadrature over (v, s). Controls: the noise-ignoring means
    (z read as the sum: E[mu] = z / (n + 1), v ~ InverseGamma(3.5, 2 + z^2 / (2 n (n + 1))))."""
    from pymc.sampling.mcmc import assign_step_methods

    import pymc_dp as pmdp
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    n, z, scale = 10, 30.0, 10.0
    with pm.Model() as m:
        v = pm.InverseGamma("v", 3.0, 2.0)
        mu = pm.Normal("mu", 0.0, sigma=pt.sqrt(v))
        x = pm.Normal("x", mu, sigma=pt.sqrt(v), shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(scale=scale), observed=z)
    _, sel = assign_step_methods(m)
    assert [v.name for v in sel[DataAugmentation]] == ["x"]
    block = ConjugateGibbs(sel[ConjugateGibbs], model=m)
    assert block.families == {"mu": "normal_invgamma", "v_log__": "normal_invgamma"}
    post = _sample(m).posterior
    vg = np.linspace(1e-3, 200.0, 2001)[:, None]
    s = np.linspace(-400.0, 400.0, 4001)[None, :]
    w = (
        stats.invgamma.pdf(vg, 3.0, scale=2.0)
        * stats.norm.pdf(s, 0.0, np.sqrt(vg * n * (n + 1)))
        * np.exp(-np.abs(z - s) / scale)
    )
    w /= w.sum()
    b_naive = 2.0 + z**2 / (2 * n * (n + 1))
    _assert_mean(post["v"].values, float(np.sum(w * vg)), b_naive / 2.5)
    _assert_mean(post["mu"].values, float(np.sum(w * s)) / (n + 1), z / (n + 1))


def test_normal_invgamma_merge_of_children(rng):
    """Two children (one empty) of the same block: the pooled statistics (Chan et al.'s
    merge) give the same draw as one child holding all records."""
    x1, x2 = rng.normal(size=3), rng.normal(size=4) + 1.0
    draws = []
    for parts in [(np.concatenate([x1, x2]),), (x1, np.zeros(0), x2)]:
        with pm.Model() as m:
            v = pm.InverseGamma("v", 3.0, 2.0)
            mu = pm.Normal("mu", 0.5, sigma=pt.sqrt(v))
            for i, xi in enumerate(parts):
                pm.Normal(f"x{i}", mu, sigma=pt.sqrt(v), observed=xi)
        step = ConjugateGibbs([mu, v], model=m, rng=7)
        new, _ = step.step(m.initial_point())
        draws.append((float(new["mu"]), float(new["v_log__"])))
    np.testing.assert_allclose(draws[0], draws[1], rtol=1e-12)
