"""Sufficient-statistic releases: statistics, projection, plug-in posterior, accounting, refusals.

The plug-in posteriors are compared with conjugate updates computed by hand from the projected
statistics (exact to 1e-12); accounting against :mod:`pymc_dp.accounting` and the privacy
report. Noise is drawn with fixed generators only where its value does not matter; where the
statistic must be known, the noise is the release's own (``value - statistic`` recomputed).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.accounting import laplace_epsilon
from pymc_dp.releases import NormalInverseGamma, release_sufficient_statistics

LAP = functools.partial(pmdp.Laplace, epsilon=1.0)


def _rel(data, family, bounds=None, mech=LAP, seed=0):
    return release_sufficient_statistics(
        data,
        family,
        mechanism=mech,
        bounds=bounds,
        rng=np.random.default_rng(seed),
        allow_float=True,
    )


def test_bernoulli_release_value_is_the_pair_plus_laplace_noise():
    x = np.array([1, 0, 1, 1, 0, 1], dtype=bool)
    rel = _rel(x, "bernoulli", seed=3)
    noise = np.random.default_rng(3).laplace(0.0, 2.0, size=2)  # scale = 2 / epsilon
    np.testing.assert_allclose(rel.value, np.array([4, 2]) + noise, rtol=0, atol=1e-12)
    assert rel.n == 6 and rel.sensitivity[0] == 2.0
    assert not rel.value.flags.writeable
    with pytest.raises(AttributeError):
        rel.n = 7  # frozen


def test_projection_clips_counts_to_0_n():
    rel = _rel(np.array([0, 0, 1]), "bernoulli", mech=pmdp.Laplace(scale=50.0, sensitivity=2.0))
    v = np.asarray(rel.value)
    np.testing.assert_array_equal(rel.projected(), np.clip(v, 0.0, 3.0))
    rel = _rel(
        np.array([0, 1, 2, 2]),
        "categorical",
        bounds=3,
        mech=pmdp.Geometric(alpha=0.99, sensitivity=2),
    )
    np.testing.assert_array_equal(rel.projected(), np.clip(rel.value, 0, 4))


@pytest.mark.parametrize("seed", range(4))
def test_plugin_beta_equals_hand_update(seed):
    x = np.random.default_rng(seed).binomial(1, 0.3, size=40)
    rel = _rel(x, "bernoulli", mech=pmdp.Laplace(scale=15.0, sensitivity=2.0), seed=seed)
    s, f = np.clip(rel.value, 0.0, 40.0)
    post = rel.plugin_posterior({"alpha": 2.0, "beta": 3.0})
    assert post.args == pytest.approx((2.0 + s, 3.0 + f), rel=1e-15)
    # negative control: the unprojected statistics would give another posterior when clipped
    if np.any((rel.value < 0) | (rel.value > 40)):
        assert post.args != pytest.approx((2.0 + rel.value[0], 3.0 + rel.value[1]))


def test_plugin_dirichlet_and_gamma_equal_hand_updates():
    rel = _rel(np.array([0, 2, 2, 1, 2]), "categorical", bounds=3)
    c = np.clip(rel.value, 0, 5)
    post = rel.plugin_posterior(np.array([0.5, 1.0, 2.0]))
    np.testing.assert_allclose(post.alpha, np.array([0.5, 1.0, 2.0]) + c, rtol=1e-15)
    x = np.array([0, 3, 12, 5])  # 12 is clamped to U = 6
    rel = _rel(x, "poisson", bounds=6, mech=pmdp.Geometric(alpha=1e-6, sensitivity=6))
    assert rel.value[0] - (0 + 3 + 6 + 5) in range(-3, 4)  # tiny noise: the clamped sum
    post = rel.plugin_posterior((2.0, 0.5))
    ssum = float(np.clip(rel.value[0], 0, 24))
    assert post.mean() == pytest.approx((2.0 + ssum) / (0.5 + 4), rel=1e-13)
    assert post.var() == pytest.approx((2.0 + ssum) / (0.5 + 4) ** 2, rel=1e-13)


def test_plugin_normal_inverse_gamma_equals_hand_update():
    x = np.array([0.3, -0.2, 1.7, 0.9, 2.5])  # 2.5 clamped to 2
    rel = _rel(x, "normal", bounds=(-1.0, 2.0), mech=pmdp.Laplace(scale=1e-9, sensitivity=7.0))
    xc = np.clip(x, -1.0, 2.0)
    np.testing.assert_allclose(rel.value, [xc.sum(), (xc**2).sum()], atol=1e-7)
    s1, s2 = rel.projected()
    n, mu0, k0, a0, b0 = 5, 0.5, 2.0, 3.0, 1.5
    post = rel.plugin_posterior((mu0, k0, a0, b0))
    xbar = s1 / n
    expect = NormalInverseGamma(
        mu=(k0 * mu0 + s1) / (k0 + n), precision=k0 + n, alpha=a0 + n / 2,
        beta=b0 + 0.5 * (s2 - n * xbar**2) + 0.5 * k0 * n * (xbar - mu0) ** 2 / (k0 + n),
    )  # fmt: skip
    np.testing.assert_allclose(
        np.array(post, dtype=float), np.array(expect, dtype=float), rtol=1e-12
    )


def test_plugin_regression_equals_hand_update_and_projects_to_psd():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(30, 2))
    y = X @ np.array([0.5, -0.3]) + rng.normal(0, 0.2, size=30)
    bounds = ((-1.0, 1.0), (-2.0, 2.0))
    rel = _rel(
        (X, y), "linear_regression", bounds=bounds, mech=pmdp.Laplace(scale=1e-9, sensitivity=50.0)
    )
    assert rel.names == ("XtX_00", "XtX_01", "XtX_11", "Xty_0", "Xty_1", "yty")
    m0, lam0, a0, b0 = np.zeros(2), np.eye(2), 2.0, 1.0
    post = rel.plugin_posterior((m0, lam0, a0, b0))
    lamn = X.T @ X + lam0
    mn = np.linalg.solve(lamn, X.T @ y)
    np.testing.assert_allclose(post.mu, mn, rtol=1e-7)
    np.testing.assert_allclose(post.precision, lamn, rtol=1e-7)
    assert post.beta == pytest.approx(b0 + 0.5 * (y @ y - mn @ lamn @ mn), rel=1e-6)
    noisy = _rel(
        (X, y), "linear_regression", bounds=bounds, mech=pmdp.Laplace(scale=1e3, sensitivity=50.0)
    )
    p = noisy.projected()
    xtx = np.array([[p[0], p[1]], [p[1], p[2]]])
    assert np.linalg.eigvalsh(xtx).min() >= -1e-9


def test_guarantee_is_the_accounting_and_the_report_sees_the_model():
    rel = _rel(np.array([1, 0, 1]), "bernoulli", mech=functools.partial(pmdp.Laplace, epsilon=0.3))
    assert rel.guarantee().epsilon == laplace_epsilon(rel.mechanism.scale, 2.0) <= 0.3
    report = pmdp.privacy_report(rel.model())
    assert report.total.epsilon == rel.guarantee().epsilon
    assert [(e.name, e.kind) for e in report.entries] == [("release", "release")]
    rel = _rel(
        np.array([0, 4, 1]),
        "poisson",
        bounds=2,
        mech=functools.partial(pmdp.Geometric, epsilon=0.7),
    )
    assert (
        pmdp.privacy_report(rel.model((1.0, 1.0))).total.epsilon == rel.guarantee().epsilon == 0.7
    )


def test_models_compute_the_statistic_from_clamped_records():
    import pymc as pm

    rel = _rel(
        np.array([0, 4, 1]), "poisson", bounds=2, mech=pmdp.Laplace(scale=1.0, sensitivity=2.0)
    )
    m = rel.model((1.0, 1.0), name="z")
    z = m["z"]
    lp = pm.logp(z, rel.value).eval({m["x"]: np.array([0, 4, 1])})  # min(x, 2) sums to 3
    assert float(lp.sum()) == pytest.approx(
        float(rel.mechanism.logpdf(rel.value - 3.0).sum()), rel=1e-12
    )
    rel = _rel(
        np.array([0, 2, 2]), "categorical", bounds=3, mech=pmdp.Laplace(scale=1.0, sensitivity=2.0)
    )
    m = rel.model()
    lp = pm.logp(m["release"], rel.value).eval({m["x"]: np.array([0, 2, 2])})
    np.testing.assert_allclose(
        lp, rel.mechanism.logpdf(rel.value - np.array([1, 0, 2])), rtol=1e-12
    )


@pytest.mark.parametrize(
    ("data", "family", "bounds", "exc", "match"),
    [
        (np.array([0, 1, 2]), "bernoulli", None, ValueError, "only 0 and 1"),
        (np.array([0.0, np.nan]), "normal", (0, 1), ValueError, "finite"),
        (np.ma.masked_array([0, 1], mask=[0, 1]), "bernoulli", None, ValueError, "masked"),
        (np.array([0, 3]), "categorical", 3, ValueError, "0..2"),
        (np.array([0, 1]), "categorical", None, ValueError, "bounds=K"),
        (np.array([-1, 2]), "poisson", 3, ValueError, "non-negative"),
        (np.array([1.5, 2]), "poisson", 3, ValueError, "whole numbers"),
        (np.array([1, 2]), "poisson", None, ValueError, "bounds=U"),
        (np.array([1.0, 2.0]), "normal", (1.0, 1.0), ValueError, "lo < hi"),
        (np.array([1.0, 2.0]), "gamma", None, ValueError, "family must be one of"),
        (np.array(["a", "b"]), "bernoulli", None, TypeError, "real numbers"),
    ],
)
def test_invalid_inputs_are_refused(data, family, bounds, exc, match):
    with pytest.raises(exc, match=match):
        _rel(data, family, bounds=bounds)


def test_pymc_classes_name_families_and_unsupported_models_are_refused():
    import pymc as pm

    rel = _rel(np.array([0.1, 0.4]), pm.Normal, bounds=(0.0, 1.0))
    assert rel.family == "normal"
    reg = _rel((np.ones((2, 1)), np.zeros(2)), "linear_regression", bounds=((0, 1), (0, 1)))
    with pytest.raises(ValueError, match="needs prior"):
        reg.model()
    with pytest.raises(ValueError, match="needs prior"):
        rel.plugin_posterior()
    with pytest.raises(ValueError, match="for bernoulli releases"):
        rel.sample_noise_aware_posterior()
