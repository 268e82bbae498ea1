"""Tests of the conjugate Gibbs steps (pymc_dp.step_methods.conjugate, pymc_dp.kernels.conjugate).

Statistical assertions: KS tests of independent exact draws against the exact posterior marginal
(scipy), false-alarm rate 1e-6 per assertion; each family has a negative control (the posterior
with a wrong hyperparameter) asserted to be rejected at the same level.
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods import NUTS, STEP_METHODS
from pymc.step_methods.compound import Competence
from scipy import stats

from pymc_dp.kernels.conjugate import (
    beta_binomial_posterior,
    dirichlet_categorical_posterior,
    draw_dirichlet,
    gamma_poisson_posterior,
    normal_normal_posterior,
    sum_to_shape,
)
from pymc_dp.step_methods.conjugate import (
    _FORWARD,
    CONJUGATE_STEPS,
    ConjugateGibbs,
    conjugate_family,
)

ALPHA = 1e-6  # false-alarm rate per statistical assertion
NDRAWS = 6000


def run_step(step, point, n=NDRAWS):
    """n successive step() calls from ``point``; returns the list of points."""
    out = []
    for _ in range(n):
        point, _ = step.step(point)
        out.append(point)
    return out


def back(model, rv, values):
    """Map transformed draws back to the parameter scale with PyMC's own backward transform."""
    tr = model.rvs_to_transforms[rv]
    values = np.asarray(values)
    if tr is None:
        return values
    return tr.backward(values, *rv.owner.inputs).eval()


def assert_fits(draws, dist, neg_dist):
    """KS: draws fit ``dist`` (p > ALPHA) and reject ``neg_dist`` (p < ALPHA)."""
    p_ok = stats.kstest(draws, dist.cdf).pvalue
    p_neg = stats.kstest(draws, neg_dist.cdf).pvalue
    assert p_ok > ALPHA, p_ok
    assert p_neg < ALPHA, p_neg


# ---- pure kernels -----------------------------------------------------------------------------
def test_kernels_closed_forms():
    assert beta_binomial_posterior(2.0, 3.0, 4, 10) == (6.0, 9.0)
    assert gamma_poisson_posterior(2.0, 0.5, 7, 3) == (9.0, 3.5)
    np.testing.assert_array_equal(dirichlet_categorical_posterior([1, 2], [3, 4]), [4.0, 6.0])
    # normal-normal against brute-force numeric integration of the posterior density
    x = np.array([0.3, 1.2, -0.4])
    sig = np.array([0.5, 1.0, 2.0])
    mean, sd = normal_normal_posterior(1.0, 2.0, np.sum(x / sig**2), np.sum(1 / sig**2))
    grid = np.linspace(-6, 6, 200001)
    logd = stats.norm.logpdf(grid, 1.0, 2.0) + stats.norm.logpdf(
        x[:, None], grid, sig[:, None]
    ).sum(0)
    w = np.exp(logd - logd.max())
    w /= w.sum()
    m_num = np.sum(w * grid)
    assert abs(mean - m_num) < 1e-8
    assert abs(sd - np.sqrt(np.sum(w * (grid - m_num) ** 2))) < 1e-8


def test_sum_to_shape():
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(sum_to_shape(a, (3, 1)), a.sum(0).sum(1, keepdims=True))
    np.testing.assert_array_equal(sum_to_shape(a, (1, 1, 4)), a.sum((0, 1), keepdims=True))
    with pytest.raises(ValueError, match="cannot sum"):
        sum_to_shape(a, (2, 4))


def test_draw_dirichlet_tiny_alpha_stays_on_simplex(rng):
    th = draw_dirichlet(rng, np.full((50, 3), 1e-3))
    assert np.all(th > 0)
    np.testing.assert_allclose(th.sum(-1), 1.0, rtol=1e-14)
    assert np.all(np.isfinite(_FORWARD[type(pm.distributions.transforms.simplex)](th)))


def test_numpy_forward_transforms_match_pymc(rng):
    tr = pm.distributions.transforms
    p = rng.uniform(size=5)
    th = rng.dirichlet(np.ones(4), size=3)
    for t, v in [(tr.logodds, p), (tr.log, p * 7), (tr.simplex, th)]:
        np.testing.assert_allclose(_FORWARD[type(t)](v), t.forward(v).eval(), rtol=1e-13)


# ---- each family, step alone, observed children ------------------------------------------------
def test_beta_bernoulli_binomial(rng):
    xb = rng.binomial(1, 0.3, size=40)
    nb = np.array([5, 7, 9])
    xn = rng.binomial(nb, 0.3)
    with pm.Model() as m:
        p = pm.Beta("p", 2.0, 3.0)
        pm.Bernoulli("xb", p=p, observed=xb)
        pm.Binomial("xn", n=nb, p=p, observed=xn)
    step = ConjugateGibbs([p], model=m, rng=rng)
    assert step.families == {"p_logodds__": "beta"}
    draws = back(m, p, [pt["p_logodds__"] for pt in run_step(step, m.initial_point())])
    s, t = xb.sum() + xn.sum(), xb.size + nb.sum()
    assert_fits(draws, stats.beta(2 + s, 3 + t - s), stats.beta(3 + s, 3 + t - s))


def test_beta_vector_indexed_by_class(rng):
    g = rng.integers(0, 3, size=200)
    x = rng.binomial(1, np.array([0.2, 0.5, 0.8])[g])
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0, shape=3)
        pm.Bernoulli("x", p=p[g], observed=x)
    step = ConjugateGibbs([p], model=m, rng=rng)
    draws = back(m, p, [pt["p_logodds__"] for pt in run_step(step, m.initial_point())])
    for k in range(3):
        s, t = x[g == k].sum(), (g == k).sum()
        assert_fits(draws[:, k], stats.beta(1 + s, 1 + t - s), stats.beta(3 + s, 1 + t - s))


def test_gamma_poisson(rng):
    y = rng.poisson(3.0, size=(20, 2))
    with pm.Model() as m:
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)  # rate parameterization
        pm.Poisson("y", mu=lam, observed=y)
    step = ConjugateGibbs([lam], model=m, rng=rng)
    draws = back(m, lam, [pt["lam_log__"] for pt in run_step(step, m.initial_point())])
    a, b = 2.0 + y.sum(), 0.5 + y.size
    wrong_b = 1.5 + y.size  # negative control: prior rate 1.5 in place of 0.5
    assert_fits(draws, stats.gamma(a, scale=1 / b), stats.gamma(a, scale=1 / wrong_b))


def test_dirichlet_categorical_indexed(rng):
    y = rng.integers(0, 2, size=150)
    x = rng.integers(0, 3, size=150)
    alpha = np.array([2.0, 1.0, 3.0])
    with pm.Model() as m:
        th = pm.Dirichlet("th", a=np.tile(alpha, (2, 1)))
        pm.Categorical("x", p=th[y], observed=x)
        d = pm.Dirichlet("d", a=alpha)
        pm.Categorical("z", p=d, observed=x)
    step = ConjugateGibbs([th, d], model=m, rng=rng)
    pts = run_step(step, m.initial_point())
    th_draws = back(m, th, [pt["th_simplex__"] for pt in pts])
    d_draws = back(m, d, [pt["d_simplex__"] for pt in pts])
    post_d = alpha + np.bincount(x, minlength=3)
    for j in range(3):
        a0 = post_d.sum()
        assert_fits(
            d_draws[:, j],
            stats.beta(post_d[j], a0 - post_d[j]),
            stats.beta(post_d[j] + 1, a0 - post_d[j]),
        )
    for k in range(2):
        post = alpha + np.bincount(x[y == k], minlength=3)
        j = 1
        assert_fits(
            th_draws[:, k, j],
            stats.beta(post[j], post.sum() - post[j]),
            stats.beta(post[j] + 1, post.sum() - post[j]),
        )


def test_normal_known_sigma_from_other_variable(rng):
    x = rng.normal(1.5, 0.7, size=25)
    with pm.Model() as m:
        mu = pm.Normal("mu", 1.0, 2.0)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("x", mu=mu, sigma=s, observed=x)
    step = ConjugateGibbs([mu], model=m, rng=rng)
    point = m.initial_point()
    point["s_log__"] = np.log(0.7)  # the step must use the current value of s
    draws = np.array([pt["mu"] for pt in run_step(step, point)])
    mean, sd = normal_normal_posterior(1.0, 2.0, x.sum() / 0.49, x.size / 0.49)
    wmean, wsd = normal_normal_posterior(1.0, 2.0, x.sum(), x.size)  # sigma=1: ignores s
    assert_fits(draws, stats.norm(mean, sd), stats.norm(wmean, wsd))


# ---- step mechanics ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bern_model():
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        pm.Bernoulli("x", p=p, observed=np.array([1, 0, 0, 1, 1]))
    return m


def test_no_mutation_reproducible_and_pickles(bern_model):
    step = ConjugateGibbs([bern_model["p"]], model=bern_model, rng=3)
    point = bern_model.initial_point()
    frozen = {k: v.copy() for k, v in point.items()}
    new, stats_ = step.step(point)
    assert stats_ == [{}]
    assert all(np.array_equal(point[k], frozen[k]) for k in point)
    assert new["p_logodds__"] is not point["p_logodds__"]
    # PyMC pickles steps with cloudpickle (spawn / forkserver); the model goes along with them
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    step.setup_chain(np.random.default_rng(7), 0, 1)
    clone.setup_chain(np.random.default_rng(7), 0, 1)
    a = [pt["p_logodds__"] for pt in run_step(step, point, 3)]
    b = [pt["p_logodds__"] for pt in run_step(clone, point, 3)]
    np.testing.assert_array_equal(a, b)
    assert len(set(np.ravel(a))) == 3


def test_pm_sample_explicit_same_seed_same_draws(bern_model):
    with bern_model:
        kw = dict(draws=200, tune=0, chains=2, cores=1, progressbar=False, random_seed=11)
        a = pm.sample(step=ConjugateGibbs([bern_model["p"]]), **kw)
        b = pm.sample(step=ConjugateGibbs([bern_model["p"]]), **kw)
    pa = a.posterior["p"].values
    np.testing.assert_array_equal(pa, b.posterior["p"].values)
    assert not np.array_equal(pa[0], pa[1])  # chains get different generators
    assert np.all((pa > 0) & (pa < 1))


def test_explicit_refuses_non_conjugate():
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        pm.Bernoulli("x", p=p**2, observed=np.array([1, 0]))
        lam = pm.Gamma("lam", 1.0, 1.0)
        # a Gamma prior on the *scale* of an Exponential is not conjugate (on its rate it is,
        # since the Gamma-Exponential pair: tests/step_methods/test_conjugate_pairs.py)
        pm.Exponential("e", scale=lam, observed=np.array([1.0]))
        q = pm.Beta("q", 1.0, 1.0)
        pm.Bernoulli("w", p=q, observed=np.array([1]))
        pm.Potential("pot", pm.math.log(q))
    for rv, msg in [(p, "conjugate parameter"), (lam, "not conjugate"), (q, "Potential")]:
        with pytest.raises(ValueError, match=msg):
            ConjugateGibbs([rv], model=m)
        assert conjugate_family(rv, m) is None


# ---- automatic assignment ----------------------------------------------------------------------
@pytest.fixture
def registered():
    """ConjugateGibbs first in STEP_METHODS (whether or not ``import pymc_dp`` registered it);
    the list is restored afterwards."""
    saved = list(STEP_METHODS)
    STEP_METHODS[:] = [*CONJUGATE_STEPS, *(c for c in saved if c not in CONJUGATE_STEPS)]
    try:
        yield
    finally:
        STEP_METHODS[:] = saved


def test_ordinary_models_keep_nuts(registered):
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=5)  # latent children, but no pymc_dp node
        pm.Normal("y", mu=x, sigma=1.0, observed=np.zeros(5))
        lam = pm.Gamma("lam", 2.0, 1.0)
        pm.Poisson("c", mu=lam, observed=np.array([1, 2]))
    assert conjugate_family(p, m) == "beta"
    with m:
        assert ConjugateGibbs.competence(p, True) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(m)
    assert {v.name for v in selected[NUTS]} == {"p_logodds__", "lam_log__"}
    assert ConjugateGibbs not in selected


def _release_model(child_p=lambda p: p, n=20):
    from pymc_dp.distributions.release import Release
    from pymc_dp.mechanisms.laplace import Laplace

    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=child_p(p), shape=n)
        Release("z", x.sum(), Laplace(epsilon=1.0), observed=np.float64(7.0))
    return m


def test_claims_parameter_of_released_records(registered):
    m = _release_model()
    p = m["p"]
    # also without a model context: the model is found through its Release
    assert ConjugateGibbs.competence(p, True) == Competence.IDEAL
    with m:
        assert ConjugateGibbs.competence(p, True) == Competence.IDEAL
        assert ConjugateGibbs.competence(m["x"], False) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(m)
    assert [v.name for v in selected[ConjugateGibbs]] == ["p_logodds__"]


def test_non_conjugate_child_of_release_not_claimed(registered):
    m = _release_model(child_p=lambda p: p**2)
    with m:
        assert ConjugateGibbs.competence(m["p"], True) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(m)
    assert ConjugateGibbs not in selected
    assert [v.name for v in selected[NUTS]] == ["p_logodds__"]


# ---- with DataAugmentation: exact posterior of p given a Laplace-noised count ------------------
def test_with_data_augmentation_matches_exact_posterior():
    """p ~ Beta(1, 1), x_i ~ Bernoulli(p) (n = 30), z = sum(x) + Laplace(2) (epsilon = 0.5).

    Exact posterior: a mixture over s = sum(x) of Beta(1 + s, 1 + n - s) with weights
    proportional to C(n, s) B(1 + s, 1 + n - s) eta(z - s) = eta(z - s) / (n + 1).
    Posterior mean within 4.89 MCSE (1e-6); the noise-ignoring mean (z read as the count)
    must be rejected at the same level.
    """
    import arviz as az

    from pymc_dp.distributions.release import Release
    from pymc_dp.mechanisms.laplace import Laplace
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    n, eps, z = 30, 0.5, 0.5
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        Release("z", x.sum(), Laplace(epsilon=eps), observed=np.float64(z))
        da = DataAugmentation([x])
        cg = ConjugateGibbs([p])
        _, selected = assign_step_methods(m, methods=[DataAugmentation, *CONJUGATE_STEPS, NUTS])
    assert {c.__name__: [v.name for v in vs] for c, vs in selected.items()} == {
        "DataAugmentation": ["x"],
        "ConjugateGibbs": ["p_logodds__"],
    }
    da.setup_chain(np.random.default_rng(1), 0, 1)
    cg.setup_chain(np.random.default_rng(2), 0, 1)
    point = m.initial_point()
    draws = np.empty(6000)
    for i in range(draws.size):
        point, _ = da.step(point)
        point, _ = cg.step(point)
        draws[i] = point["p_logodds__"]
    draws = 1.0 / (1.0 + np.exp(-draws[500:]))
    s = np.arange(n + 1)
    w = np.exp(-np.abs(z - s) * eps)
    w /= w.sum()
    exact = np.sum(w * (1 + s) / (n + 2))
    naive = (1 + z) / (n + 2)
    mcse = float(az.mcse(draws[None, :]))
    assert abs(draws.mean() - exact) < 4.89 * mcse, (draws.mean(), exact, mcse)
    assert abs(draws.mean() - naive) > 4.89 * mcse, (draws.mean(), naive, mcse)


def test_naive_bayes_structure_is_assigned():
    """Class y and answers x_k form one record; P(Y) and the indexed P(X_k | Y) are conjugate."""
    import pytensor.tensor as pt

    from pymc_dp.distributions.release import Release
    from pymc_dp.mechanisms.laplace import Laplace
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    n, n_class, n_ans = 10, 3, 2
    with pm.Model() as m:
        pi = pm.Dirichlet("pi", a=np.full(n_class, 2.0))
        y = pm.Categorical("y", p=pi, shape=n)
        th = pm.Dirichlet("th", a=np.full((n_class, n_ans), 2.0))
        x = pm.Categorical("x", p=th[y], shape=n)
        one_y = pt.eq(y[:, None], np.arange(n_class)).astype("float64")
        one_x = pt.eq(x[:, None], np.arange(n_ans)).astype("float64")
        table = (one_y[:, :, None] * one_x[:, None, :]).sum(0).ravel()
        Release("z", table, Laplace(epsilon=1.0, sensitivity=2), observed=np.zeros(6))
        _, selected = assign_step_methods(m, methods=[DataAugmentation, *CONJUGATE_STEPS, NUTS])
    assert {c.__name__: [v.name for v in vs] for c, vs in selected.items()} == {
        "DataAugmentation": ["y", "x"],
        "ConjugateGibbs": ["pi_simplex__", "th_simplex__"],
    }


def test_uses_current_data_and_hyperparameters():
    """pm.Data hyperparameters and observed children are read at each step: a draw equals the
    kernel's draw from the exact posterior parameters under the same generator state."""
    from pymc_dp.kernels.conjugate import draw_beta

    with pm.Model() as m:
        a = pm.Data("a", 2.0)
        xd = pm.Data("xd", np.array([1, 0, 1]))
        p = pm.Beta("p", a, 3.0)
        pm.Bernoulli("x", p=p, observed=xd)
    step = ConjugateGibbs([p], model=m)
    point = m.initial_point()
    for a_val, x_val in [(2.0, [1, 0, 1]), (5.0, [1, 1, 1, 1, 0])]:
        pm.set_data({"a": a_val, "xd": np.array(x_val)}, model=m)
        step.setup_chain(np.random.default_rng(4), 0, 1)
        got = step.step(point)[0]["p_logodds__"]
        s, t = sum(x_val), len(x_val)
        want = draw_beta(np.random.default_rng(4), a_val + s, 3.0 + t - s)
        np.testing.assert_allclose(got, np.log(want / (1 - want)), rtol=1e-12)


# ---- Normal linear regression: beta enters Normal children through a linear predictor ----------
def _regression_posterior(prior_mean, prior_cov, designs, ys, sds):
    """Exact N(m, V) of beta (numpy, independent of the library's graph code)."""
    prec = np.linalg.inv(prior_cov)
    h = prec @ prior_mean
    for X, y, sd in zip(designs, ys, sds, strict=True):
        w = np.broadcast_to(1.0 / np.square(sd), y.shape)
        prec = prec + X.T @ (w[:, None] * X)
        h = h + X.T @ (w * y)
    cov = np.linalg.inv(prec)
    return cov @ h, cov


def _assert_mvn_fits(draws, mean, cov, neg_mean, neg_cov):
    """KS per coordinate and for two linear combinations (one along the direction of least
    posterior variance, which is sensitive to the covariance); the negative control must be
    rejected by at least one of them."""
    _, vecs = np.linalg.eigh(cov)
    combos = [*np.eye(len(mean)), vecs[:, 0], np.ones(len(mean))]
    neg_p = []
    for c in combos:
        d = draws @ c
        p_ok = stats.kstest(d, stats.norm(c @ mean, np.sqrt(c @ cov @ c)).cdf).pvalue
        assert p_ok > ALPHA, (c, p_ok)
        neg_p.append(stats.kstest(d, stats.norm(c @ neg_mean, np.sqrt(c @ neg_cov @ c)).cdf).pvalue)
    assert min(neg_p) < ALPHA, neg_p


def test_regression_exact_posterior_independent_prior(rng):
    """beta ~ N(mu0, diag(sd0^2)); y1 ~ N(beta[0] + X1 @ beta[1:], per-record sigma) and
    y2 ~ N((X2 * beta).sum(-1), s) with s a free variable (its current value is used)."""
    n1, n2 = 12, 8
    X1 = rng.normal(size=(n1, 2))
    X2 = rng.normal(size=(n2, 3))
    sig1 = rng.uniform(0.5, 2.0, size=n1)
    beta_true = np.array([0.5, -1.0, 2.0])
    y1 = beta_true[0] + X1 @ beta_true[1:] + sig1 * rng.normal(size=n1)
    y2 = X2 @ beta_true + 0.8 * rng.normal(size=n2)
    mu0, sd0 = np.array([0.0, 1.0, -1.0]), np.array([1.0, 2.0, 0.5])
    with pm.Model() as m:
        beta = pm.Normal("beta", mu0, sd0, shape=3)
        s = pm.HalfNormal("s", 1.0)
        xd = pm.Data("X1", X1)
        pm.Normal("y1", beta[0] + xd @ beta[1:], sig1, observed=y1)
        pm.Normal("y2", (X2 * beta).sum(-1), s, observed=y2)
    assert conjugate_family(beta, m) == "regression"
    step = ConjugateGibbs([beta], model=m, rng=rng)
    assert step.families == {"beta": "regression"}
    point = m.initial_point()
    point["s_log__"] = np.log(0.8)
    draws = np.array([pt["beta"] for pt in run_step(step, point)])
    designs = [np.c_[np.ones(n1), X1], X2]
    mean, cov = _regression_posterior(mu0, np.diag(sd0**2), designs, [y1, y2], [sig1, 0.8])
    # negative control: prior variances x 2
    neg_mean, neg_cov = _regression_posterior(
        mu0, np.diag(2 * sd0**2), designs, [y1, y2], [sig1, 0.8]
    )
    _assert_mvn_fits(draws, mean, cov, neg_mean, neg_cov)


def test_regression_mvnormal_prior_latent_design(rng):
    """beta ~ MvNormal(mu0, Sigma0) with correlations; the design is the current value of a
    latent variable (here fixed in the point), y ~ N(dot(Xl, beta), 2); few records so that the
    prior matters (negative control: prior covariance x 2)."""
    n = 4
    X = rng.normal(size=(n, 2))
    y = X @ np.array([1.0, -0.5]) + 2.0 * rng.normal(size=n)
    mu0 = np.array([0.3, -0.2])
    cov0 = np.array([[1.0, 0.6], [0.6, 2.0]])
    with pm.Model() as m:
        beta = pm.MvNormal("beta", mu0, cov0)
        xl = pm.Normal("xl", 0.0, 1.0, shape=(n, 2))
        pm.Normal("y", pm.math.dot(xl, beta), 2.0, observed=y)
    step = ConjugateGibbs([beta], model=m, rng=rng)
    point = m.initial_point()
    point["xl"] = X.copy()
    draws = np.array([pt["beta"] for pt in run_step(step, point)])
    mean, cov = _regression_posterior(mu0, cov0, [X], [y], [2.0])
    neg_mean, neg_cov = _regression_posterior(mu0, 2 * cov0, [X], [y], [2.0])
    _assert_mvn_fits(draws, mean, cov, neg_mean, neg_cov)


def test_regression_linear_forms_recognised(rng):
    """Jacobian and offset of several ways of writing a linear predictor, against the graph."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_dp.step_methods.conjugate import _analyze

    PY = pytensor.compile.mode.Mode(linker="py", optimizer="fast_compile")

    X = rng.normal(size=(6, 3))
    with pm.Model() as m:
        b = pm.Normal("b", 0.0, 1.0, shape=3)
        xl = pm.Normal("xl", 0.0, 1.0, shape=(6, 2))
        design = pt.concatenate([pt.ones((6, 1)), xl], axis=1)
        forms = {
            "matmul": X @ b,
            "dot": pt.dot(X, b),
            "mul_sum": (X * b).sum(-1),
            "intercept": b[0] + xl @ b[1:],
            "concat": design @ b,
            "scaled": 2.0 * (X @ b) / 3.0 - b[1] + np.float64(0.5),
            "reversed": X[:, ::-1] @ b[::-1],
            "row_vec": (b[None, :] @ X.T)[0],
            "negated": -(X[:, :2] @ b[np.array([2, 0])]),
            "float32_data": X.astype("float32") @ b,
        }
        for name, mu in forms.items():
            pm.Normal(f"y_{name}", mu, 1.0, observed=np.zeros(6))
    plan = _analyze(b, m)
    assert plan.family == "regression" and len(plan.children) == len(forms)
    b_val, xl_val = rng.normal(size=3), rng.normal(size=(6, 2))
    for c in plan.children:
        mu = c.rv.owner.op.dist_params(c.rv.owner)[0]
        f_mu = pytensor.function([b, xl], mu, on_unused_input="ignore", mode=PY)
        want = f_mu(b_val, xl_val)
        offset = pt.zeros(()) if c.offset is None else c.offset
        f_lin = pytensor.function([xl], [offset, c.jac], on_unused_input="ignore", mode=PY)
        off, jac = f_lin(xl_val)
        tol = 1e-6 if c.rv.name == "y_float32_data" else 1e-12
        np.testing.assert_allclose(off + jac @ b_val, want, rtol=tol, atol=tol)


def _regression_release_model(mean=lambda b, x: b[0] + x @ b[1:], n=8):
    """Ju et al.'s private regression in miniature: latent records (x_i, y_i), Laplace release of
    clipped sufficient statistics (the clipping is in the statistic, not in the likelihood)."""
    import pytensor.tensor as pt

    from pymc_dp.distributions.release import Release
    from pymc_dp.mechanisms.laplace import Laplace

    with pm.Model() as m:
        b = pm.Normal("beta", 0.0, np.sqrt(2.0), shape=3)
        x = pm.Normal("X", 0.0, 1.0, shape=(n, 2))
        y = pm.Normal("y", mean(b, x), np.sqrt(2.0), shape=n)
        xc, yc = pt.clip(x, -3.0, 3.0), pt.clip(y, -5.0, 5.0)
        design = pt.concatenate([pt.ones((n, 1)), xc], axis=1)
        stat = pt.concatenate([(design * yc[:, None]).sum(0), (yc**2).sum()[None]])
        Release("z", stat, Laplace(epsilon=1.0, sensitivity=20.0), observed=np.zeros(4))
    return m


def test_regression_assignment(registered):
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    methods = [DataAugmentation, *CONJUGATE_STEPS, NUTS]
    # ordinary regression, latent responses but no pymc_dp node: NUTS keeps beta
    X = np.linspace(-1.0, 1.0, 12).reshape(6, 2)
    with pm.Model() as plain:
        b = pm.Normal("beta", 0.0, 1.0, shape=2)
        y = pm.Normal("y", X @ b, 1.0, shape=6)
        pm.Normal("obs", y, 0.5, observed=np.zeros(6))
    assert conjugate_family(b, plain) == "regression"
    with plain:
        assert ConjugateGibbs.competence(b, True) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(plain, methods=methods)
    assert ConjugateGibbs not in selected and {v.name for v in selected[NUTS]} == {"beta", "y"}
    # latent records feeding a Release: beta goes to ConjugateGibbs, the records to DA
    m = _regression_release_model()
    with m:
        assert ConjugateGibbs.competence(m["beta"], True) == Competence.IDEAL
        _, selected = assign_step_methods(m, methods=methods)
    assert {c.__name__: [v.name for v in vs] for c, vs in selected.items()} == {
        "DataAugmentation": ["X", "y"],
        "ConjugateGibbs": ["beta"],
    }
    # non-conjugate mean in the same structure: not claimed, NUTS samples beta
    m_exp = _regression_release_model(mean=lambda b, x: pm.math.exp(b[0] + x @ b[1:]))
    with m_exp:
        assert ConjugateGibbs.competence(m_exp["beta"], True) == Competence.INCOMPATIBLE
        _, selected = assign_step_methods(m_exp, methods=methods)
    assert ConjugateGibbs not in selected and [v.name for v in selected[NUTS]] == ["beta"]


def test_regression_refuses_non_conjugate():
    """beta inside exp, beta times itself, beta in sigma, a non-Normal child: refused. (A free
    sigma that does not depend on beta is accepted: its current value is used, see above.)"""
    X = np.linspace(-1.0, 1.0, 8).reshape(4, 2)
    cases = [
        (lambda b: {"mu": pm.math.exp(X @ b), "sigma": 1.0}, "linear predictor"),
        (lambda b: {"mu": (X @ b) * b[0], "sigma": 1.0}, "product"),
        (lambda b: {"mu": X @ b, "sigma": pm.math.exp(b[0])}, "sigma"),
    ]
    for make, msg in cases:
        with pm.Model() as m:
            b = pm.Normal("b", 0.0, 1.0, shape=2)
            pm.Normal("y", observed=np.zeros(4), **make(b))
        assert conjugate_family(b, m) is None
        with pytest.raises(ValueError, match=msg):
            ConjugateGibbs([b], model=m)
    with pm.Model() as m:
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Poisson("c", mu=pm.math.exp(X @ b), observed=np.zeros(4))
        mv = pm.MvNormal("mv", np.zeros(2), np.eye(2))
        pm.Normal("w", mu=mv, sigma=pm.math.exp(mv[0]), observed=np.zeros(2))
    for rv, msg in [(b, "not Normal"), (mv, "sigma")]:
        assert conjugate_family(rv, m) is None
        with pytest.raises(ValueError, match=msg):
            ConjugateGibbs([rv], model=m)


def test_draw_mvnormal_precision_refuses_non_positive_definite(rng):
    from pymc_dp.kernels.conjugate import draw_mvnormal_precision

    with pytest.raises(ValueError, match="positive definite"):
        draw_mvnormal_precision(rng, np.array([[1.0, 2.0], [2.0, 1.0]]), np.zeros(2))
    with pytest.raises(ValueError, match="positive definite"):
        draw_mvnormal_precision(rng, np.eye(2), np.array([np.nan, 0.0]))


def test_regression_with_data_augmentation_matches_exact_posterior():
    """beta ~ N(0, 1), public x (pm.Data), private y_i ~ N(beta x_i, 1) (n = 12), released
    z = sum x_i y_i + Laplace(5). Given beta, S = sum x_i y_i ~ N(beta A, A), A = sum x_i^2, so
    the exact posterior density of beta is proportional to phi(beta) * int N(s; beta A, A)
    exp(-|z - s| / 5) ds (grid quadrature). DA (records) + ConjugateGibbs (beta, auto-assigned):
    posterior mean within 4.89 MCSE (1e-6); the noise-ignoring mean z / (A + 1) is rejected.
    """
    import arviz as az

    from pymc_dp.distributions.release import Release
    from pymc_dp.mechanisms.laplace import Laplace
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    xv = np.random.default_rng(7).normal(size=12)
    A, b, z = float(np.sum(xv**2)), 5.0, 10.0
    with pm.Model() as m:
        x = pm.Data("x", xv)
        beta = pm.Normal("beta", 0.0, 1.0)
        y = pm.Normal("y", beta * x, 1.0, shape=12)
        Release("s", (x * y).sum(), Laplace(scale=b), observed=z)
        _, selected = assign_step_methods(m, methods=[DataAugmentation, *CONJUGATE_STEPS, NUTS])
        da = DataAugmentation([y])
        cg = ConjugateGibbs([beta])
    assert {c.__name__: [v.name for v in vs] for c, vs in selected.items()} == {
        "DataAugmentation": ["y"],
        "ConjugateGibbs": ["beta"],
    }
    da.setup_chain(np.random.default_rng(1), 0, 1)
    cg.setup_chain(np.random.default_rng(2), 0, 1)
    point = m.initial_point()
    draws = np.empty(6000)
    for i in range(draws.size):
        point, _ = da.step(point)
        point, _ = cg.step(point)
        draws[i] = point["beta"]
    draws = draws[500:]
    theta = np.linspace(-6.0, 6.0, 2401)
    s = np.linspace(-120.0, 120.0, 4801)
    lik = stats.norm.pdf(s[None, :], theta[:, None] * A, np.sqrt(A)) @ np.exp(-np.abs(z - s) / b)
    w = stats.norm.pdf(theta) * lik
    exact = float(np.sum(w * theta) / np.sum(w))
    naive = z / (A + 1.0)
    mcse = float(az.mcse(draws[None, :]))
    assert abs(draws.mean() - exact) < 4.89 * mcse, (draws.mean(), exact, mcse)
    assert abs(draws.mean() - naive) > 4.89 * mcse, (draws.mean(), naive, mcse)


def test_assignment_without_model_context():
    """``pm.sample(model=m)`` outside ``with m:`` still assigns the pymc_dp steps."""
    from pymc.sampling.mcmc import assign_step_methods

    import pymc_dp as pmdp

    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p, shape=5)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=2.3)
    _, sel = assign_step_methods(m)  # no model on the context stack here
    assert {c.__name__: [v.name for v in vs] for c, vs in sel.items()} == {
        "CollapsedRecords": ["p_logodds__", "x"],
    }


# ---- validation of values: invalid sigmas, hyperparameters and records raise ValueError ---------
def _bad_value_cases():
    """(label, model builder returning (model, parameter), expected message regex)."""
    ones = np.ones(4)

    def normal_child(sigma):
        def build():
            with pm.Model() as m:
                t = pm.Normal("t", 0.0, 1.0)
                pm.Normal("x", t, sigma, observed=ones)
            return m, t

        return build

    def normal_prior(mu, sigma):
        def build():
            with pm.Model() as m:
                t = pm.Normal("t", pm.Data("m0", mu), pm.Data("s0", sigma))
                pm.Normal("x", t, 1.0, observed=ones)
            return m, t

        return build

    def regression(prior_sd, sigma):
        def build():
            with pm.Model() as m:
                b = pm.Normal("b", 0.0, pm.Data("s0", prior_sd), shape=2)
                pm.Normal("y", b[0] + np.arange(4.0) * b[1], pm.Data("sy", sigma), observed=ones)
            return m, b

        return build

    def beta_prior(a, b, child="bern", obs=(1, 0, 1), n=3):
        def build():
            with pm.Model() as m:
                p = pm.Beta("p", pm.Data("a", a), pm.Data("b", b))
                if child == "bern":
                    pm.Bernoulli("x", p, observed=np.array(obs))
                else:
                    pm.Binomial("x", n, p, observed=np.array(obs))
            return m, p

        return build

    def gamma_prior(alpha, beta, obs=(1, 2, 3)):
        def build():
            with pm.Model() as m:
                lam = pm.Gamma("lam", pm.Data("al", alpha), pm.Data("be", beta))
                pm.Poisson("x", lam, observed=np.array(obs))
            return m, lam

        return build

    def dirichlet_prior(a, obs=(0, 1, 2)):
        def build():
            with pm.Model() as m:
                th = pm.Dirichlet("th", pm.Data("a", np.asarray(a, dtype=float), shape=(3,)))
                pm.Categorical("x", th, observed=np.array(obs))
            return m, th

        return build

    child_sigma = "sigma of child x of t must be finite and > 0"
    return [
        ("normal child sigma 0", normal_child(0.0), child_sigma + ", got 0.0"),
        ("normal child sigma < 0", normal_child(-1.0), child_sigma + ", got -1.0"),
        ("normal child sigma nan", normal_child(np.nan), child_sigma + ", got nan"),
        ("normal child sigma inf", normal_child(np.array([1.0, 1.0, np.inf, 1.0])), child_sigma),
        ("normal prior sigma < 0", normal_prior(0.0, -2.0), "prior parameter sigma of t .*-2.0"),
        ("normal prior sigma 0", normal_prior(0.0, 0.0), "prior parameter sigma of t .*0.0"),
        ("normal prior mu inf", normal_prior(np.inf, 1.0), "prior parameter mu of t .*finite"),
        ("regression prior sd < 0", regression(-1.0, 1.0), "prior parameter sigma of b .*-1.0"),
        ("regression sigma < 0", regression(1.0, -0.5), "sigma of child y of b .*-0.5"),
        (
            "regression sigma 0 in a vector",
            regression(1.0, np.array([1.0, 0.0, 1.0, 1.0])),
            "sigma of child y of b must be finite and > 0, got 0.0",
        ),
        ("beta alpha 0", beta_prior(0.0, 1.0), "prior parameter alpha of p .*0.0"),
        ("beta beta < 0", beta_prior(1.0, -1.0), "prior parameter beta of p .*-1.0"),
        ("gamma alpha < 0", gamma_prior(-1.0, 1.0), "prior parameter alpha of lam .*-1.0"),
        ("gamma beta 0", gamma_prior(1.0, 0.0), "prior parameter beta of lam .*0.0"),
        ("gamma beta < 0", gamma_prior(1.0, -2.0), "prior parameter beta of lam .*-2.0"),
        ("dirichlet a 0", dirichlet_prior([1.0, 0.0, 1.0]), "prior parameter a of th .*0.0"),
        (
            "bernoulli 2",
            beta_prior(1.0, 1.0, obs=(1, 2, 0)),
            r"child x of p \(Bernoulli\) must be 0 or 1, got 2",
        ),
        (
            "bernoulli -1",
            beta_prior(1.0, 1.0, obs=(1, -1, 0)),
            r"child x of p \(Bernoulli\) must be 0 or 1, got -1",
        ),
        (
            "binomial > n",
            beta_prior(1.0, 1.0, "binom", obs=(1, 4, 0), n=3),
            r"child x of p \(Binomial\) must be in 0..n, got 4 with n = 3",
        ),
        (
            "binomial < 0",
            beta_prior(1.0, 1.0, "binom", obs=(1, -1, 0), n=3),
            r"child x of p \(Binomial\) must be in 0..n, got -1",
        ),
        (
            "binomial > per-record n",
            beta_prior(1.0, 1.0, "binom", obs=(1, 2, 0), n=np.array([3, 1, 2])),
            r"child x of p \(Binomial\) must be in 0..n, got 2 with n = 1",
        ),
        (
            "poisson < 0",
            gamma_prior(1.0, 1.0, obs=(1, -3, 0)),
            r"child x of lam \(Poisson\) must be >= 0, got -3",
        ),
        (
            "categorical K",
            dirichlet_prior([1.0, 1.0, 1.0], obs=(0, 3, 1)),
            r"child x of th \(Categorical\) must be in 0..2, got 3",
        ),
        (
            "categorical < 0",
            dirichlet_prior([1.0, 1.0, 1.0], obs=(0, -1, 1)),
            r"child x of th \(Categorical\) must be in 0..2, got -1",
        ),
    ]


@pytest.mark.parametrize(
    ("build", "msg"), [c[1:] for c in _bad_value_cases()], ids=[c[0] for c in _bad_value_cases()]
)
def test_invalid_values_raise_naming_the_variable(build, msg):
    m, rv = build()
    step = ConjugateGibbs([rv], model=m, rng=0)
    with pytest.raises(ValueError, match=msg):
        step.step(m.initial_point())


def test_invalid_values_negative_controls():
    """The same models with valid values step without error and give finite draws (so the
    checks above fire on the invalid value, not on the structure)."""
    with pm.Model() as m:
        t = pm.Normal("t", 0.0, pm.Data("s0", 1.0))
        sy = pm.Data("sy", 1.0)
        pm.Normal("x", t, sy, observed=np.ones(4))
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Normal("y", b[0] + np.arange(4.0) * b[1], sy, observed=np.ones(4))
        p = pm.Beta("p", 1.0, 1.0)
        pm.Binomial("xb", 3, p, observed=np.array([0, 3, 1]))
        pm.Bernoulli("xbe", p, observed=np.array([0, 1]))
        lam = pm.Gamma("lam", 1.0, 1.0)
        pm.Poisson("xp", lam, observed=np.array([0, 5]))
        th = pm.Dirichlet("th", np.ones(3))
        pm.Categorical("xc", th, observed=np.array([0, 2]))
    step = ConjugateGibbs([t, b, p, lam, th], model=m, rng=0)
    point, _ = step.step(m.initial_point())
    assert all(np.all(np.isfinite(v)) for v in point.values())
    # a value changed at run time (shared data) is checked at the next step, then valid again
    with m:
        pm.set_data({"sy": -1.0})
    with pytest.raises(ValueError, match=r"sigma of child x of t .*-1.0"):
        step.step(point)
    with m:
        pm.set_data({"sy": 2.0})
    point, _ = step.step(point)
    assert all(np.all(np.isfinite(v)) for v in point.values())


def test_invalid_sigma_from_a_free_variable_is_named(rng):
    """sigma is the current value of another (untransformed) free variable."""
    with pm.Model() as m:
        t = pm.Normal("t", 0.0, 1.0)
        s = pm.Normal("s", 1.0, 1.0)
        pm.Normal("x", t, s, observed=np.ones(3))
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Normal("y", b[0] + np.arange(3.0) * b[1], s, observed=np.ones(3))
    point = m.initial_point()
    point["s"] = np.array(-0.25)
    for rv, msg in [(t, "sigma of child x of t .*-0.25"), (b, "sigma of child y of b .*-0.25")]:
        step = ConjugateGibbs([rv], model=m, rng=rng)
        with pytest.raises(ValueError, match=msg):
            step.step(point)
        point_ok = dict(point, s=np.array(0.25))
        assert np.all(np.isfinite(step.step(point_ok)[0][step.vars[0].name]))


def test_support_check_of_float_records():
    """Float records (e.g. a latent stored as float) must be integer-valued; NaN fails too."""
    from pytensor.tensor.random.basic import BernoulliRV, PoissonRV

    from pymc_dp.step_methods.conjugate import _check_support

    _check_support(PoissonRV, np.array([0.0, 4.0]), None, "child x of lam")  # valid: no error
    with pytest.raises(ValueError, match=r"child x of p has a non-integer value 0\.5"):
        _check_support(BernoulliRV, np.array([1.0, 0.5]), None, "child x of p")
    with pytest.raises(ValueError, match="child x of lam has a non-integer value nan"):
        _check_support(PoissonRV, np.array([1.0, np.nan]), None, "child x of lam")
