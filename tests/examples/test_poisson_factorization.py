"""The Poisson factorization example: models, step assignment, fits, helpers.

Default tier (deterministic, exact references): each of the four models has the stated free
variables, shapes, observed data and step assignment; its log-density at a random point equals
one written independently with scipy (Gamma priors, Poisson, the two-sided geometric pmf, and
for the marginal the sum over the true count); a tiny fit of each runs; the helpers equal
hand-computed values; bad inputs raise ValueError naming the argument.

The slow statistical claim (noise-aware MAE below naive MAE at epsilon = 0.75) is in
``test_poisson_factorization_slow.py``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from pymc.sampling.mcmc import assign_step_methods
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp import PoissonFactorGibbs
from pymc_dp.examples import poisson_factorization as pf

D, V, K = 5, 4, 2
A0, B0 = 0.1, 1.0


@pytest.fixture
def data(rng):
    truth = pf.simulate(D, V, K, rng=rng)
    noisy, mech = pf.privatize(truth["counts"] + 1, 1.0, rng=rng)
    noisy[0, 0] = -3  # a negative cell for the naive model to clip, whatever the draws
    return truth, noisy, mech


def _build(how, data):
    truth, noisy, mech = data
    counts = truth["counts"] if how == "nonprivate" else noisy
    return pf.build_model(counts, K, how=how, mechanism=mech)


# --- the four models -------------------------------------------------------------------------


@pytest.mark.parametrize("how", pf.HOWS)
def test_free_variables_shapes_and_observed(how, data):
    truth, noisy, _ = data
    model = _build(how, data)
    names = {v.name for v in model.free_RVs}
    assert names == ({"theta", "phi", "y_true"} if how == "augmented" else {"theta", "phi"})
    assert model["theta"].type.shape == (D, K) and model["phi"].type.shape == (K, V)
    point = model.initial_point()
    assert point["theta_log__"].shape == (D, K) and point["phi_log__"].shape == (K, V)
    observed = np.asarray(model.rvs_to_values[model["y"]].data)
    expect = {
        "nonprivate": truth["counts"],
        "naive": np.clip(noisy, 0, None),
        "augmented": noisy,
        "marginal": noisy,
    }[how]
    np.testing.assert_array_equal(observed, expect)


@pytest.mark.parametrize("how", pf.HOWS)
def test_step_assignment(how, data):
    model = _build(how, data)
    _, selected = assign_step_methods(model)
    got = {cls: sorted(v.name for v in vs) for cls, vs in selected.items() if vs}
    factors = ["phi_log__", "theta_log__"]
    expect = {pm.NUTS: factors}
    if how == "augmented":  # an all-Gibbs scan: no NUTS
        expect = {PoissonFactorGibbs: [*factors, "y_true"]}
    assert got == expect


def _ref_logp(how, point, noisy, counts, alpha):
    """Log-density at ``point`` written with scipy alone (no Jacobian)."""
    theta, phi = np.exp(point["theta_log__"]), np.exp(point["phi_log__"])
    mu = theta @ phi
    lp = stats.gamma.logpdf(theta, A0, scale=1.0 / B0).sum()
    lp += stats.gamma.logpdf(phi, A0, scale=1.0 / B0).sum()

    def noise(k):
        return np.log((1.0 - alpha) / (1.0 + alpha)) + np.abs(k) * np.log(alpha)

    if how == "nonprivate":
        return lp + stats.poisson.logpmf(counts, mu).sum()
    if how == "naive":
        return lp + stats.poisson.logpmf(np.clip(noisy, 0, None), mu).sum()
    if how == "augmented":
        y = point["y_true"]
        return lp + (stats.poisson.logpmf(y, mu) + noise(noisy - y)).sum()
    y = np.arange(400)[:, None, None]  # P(y >= 400) < 1e-300 at these rates
    terms = stats.poisson.logpmf(y, mu) + noise(noisy - y)
    return lp + special.logsumexp(terms, axis=0).sum()


@pytest.mark.parametrize("how", pf.HOWS)
def test_log_density_equals_an_independent_one(how, data, rng):
    """The model is what the docstring says (priors, likelihood, the mechanism's alpha).

    Control: the same reference with alpha changed by 5% differs (noise-aware models only).
    """
    truth, noisy, mech = data
    model = _build(how, data)
    point = model.initial_point()
    point["theta_log__"] = rng.normal(0.0, 0.7, size=(D, K))
    point["phi_log__"] = rng.normal(0.0, 0.7, size=(K, V))
    if how == "augmented":
        point["y_true"] = rng.integers(0, 9, size=(D, V))
    got = model.compile_logp(jacobian=False)(point)
    ref = _ref_logp(how, point, noisy, truth["counts"], mech.alpha)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    if how in ("augmented", "marginal"):
        wrong = _ref_logp(how, point, noisy, truth["counts"], mech.alpha * 1.05)
        assert abs(got - wrong) > 1e-3 * abs(ref)


@pytest.mark.parametrize("how", pf.HOWS)
def test_tiny_fit_runs(how, data):
    model = _build(how, data)
    idata = pf.fit(
        model, draws=10, tune=10, chains=1, random_seed=3, cores=1, compute_convergence_checks=False
    )
    post = idata["posterior"]
    assert post["theta"].shape == (1, 10, D, K) and post["phi"].shape == (1, 10, K, V)
    rates = pf.posterior_mean_rates(idata)
    assert rates.shape == (D, V) and np.all(np.isfinite(rates)) and np.all(rates > 0)
    if how == "augmented":
        y = post["y_true"].values
        assert y.shape == (1, 10, D, V) and y.dtype.kind == "i" and (y >= 0).all()


# --- validation ------------------------------------------------------------------------------


def test_validation_names_the_argument(data):
    truth, noisy, mech = data
    with pytest.raises(ValueError, match="counts must be non-negative"):
        pf.build_model(noisy, K, how="nonprivate")
    with pytest.raises(ValueError, match="how must be one of"):
        pf.build_model(noisy, K, how="Naive", mechanism=mech)
    for how in ("augmented", "marginal"):
        with pytest.raises(ValueError, match=f"how='{how}' needs the release's mechanism"):
            pf.build_model(noisy, K, how=how)
    with pytest.raises(ValueError, match="needs a Geometric mechanism"):
        pf.build_model(noisy, K, how="augmented", mechanism=pmdp.Laplace(epsilon=1.0))
    with pytest.raises(ValueError, match="counts must be a non-empty 2-D matrix"):
        pf.build_model(noisy.ravel(), K, how="naive")
    with pytest.raises(ValueError, match="counts must hold finite integers"):
        pf.build_model(noisy + 0.5, K, how="naive")
    with pytest.raises(ValueError, match="n_components must be a positive integer"):
        pf.build_model(noisy, 0, how="naive")
    with pytest.raises(ValueError, match="prior_shape must be a finite number > 0"):
        pf.build_model(noisy, K, how="naive", prior_shape=float("nan"))
    with pytest.raises(ValueError, match="counts are all zero"):
        pf.privatize(np.zeros((2, 3), dtype=int), 1.0)
    with pytest.raises(ValueError, match="counts must be non-negative"):
        pf.privatize(noisy, 1.0)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        pf.privatize(truth["counts"] + 1, float("inf"))
    with pytest.raises(ValueError, match="rates and counts must have the same shape"):
        pf.mae(np.ones((2, 3)), np.ones((3, 2)))


# --- helpers ---------------------------------------------------------------------------------


def test_posterior_mean_rates_is_the_mean_of_theta_phi():
    """Small integer draws and 2 x 4 draws: every sum and the division by 8 are exact.

    Control: the product of the posterior means (not label-invariant) differs.
    """
    rng = np.random.default_rng(5)
    theta = rng.integers(0, 5, size=(2, 4, 3, 2)).astype(float)
    phi = rng.integers(0, 5, size=(2, 4, 2, 4)).astype(float)
    post = xr.Dataset(
        {
            "theta": (("chain", "draw", "row", "component"), theta),
            "phi": (("chain", "draw", "component", "col"), phi),
        }
    )
    idata = xr.DataTree.from_dict({"posterior": post})
    expect = np.zeros((3, 4))
    for c in range(2):
        for s in range(4):
            expect += theta[c, s] @ phi[c, s]
    expect /= 8.0
    got = pf.posterior_mean_rates(idata)
    np.testing.assert_array_equal(got, expect)
    assert not np.array_equal(got, theta.mean(axis=(0, 1)) @ phi.mean(axis=(0, 1)))


def test_mae_by_hand():
    assert pf.mae([[1.5, 2.0], [0.0, 4.25]], [[1, 3], [0, 4]]) == (0.5 + 1.0 + 0.0 + 0.25) / 4


def test_privatize_is_schein_setting():
    """alpha = exp(-eps / N) (to the mechanism's rational rounding), noise from its release."""
    counts = np.array([[0, 3, 1], [4, 0, 2]])  # N = 10 / 6
    noisy, mech = pf.privatize(counts, 0.75, rng=np.random.default_rng(9))
    assert isinstance(mech, pmdp.Geometric)
    np.testing.assert_allclose(mech.alpha, np.exp(-0.75 / (10 / 6)), rtol=1e-14)
    same = pmdp.Geometric(alpha=np.exp(-0.75 / (10 / 6))).release(
        counts, rng=np.random.default_rng(9)
    )
    np.testing.assert_array_equal(noisy, same)
    _, per_count = pf.privatize(counts, 0.75, relative_to_mean=False)
    assert per_count.guarantee().epsilon == 0.75


def test_simulate_structure():
    """Shapes, dtypes, rates = theta @ phi; block truth zero or small off its blocks; seeded."""
    a = pf.simulate(9, 6, 3, rng=np.random.default_rng(2))
    b = pf.simulate(9, 6, 3, rng=np.random.default_rng(2))
    for key in ("theta", "phi", "rates", "counts"):
        np.testing.assert_array_equal(a[key], b[key])
    assert a["theta"].shape == (9, 3) and a["phi"].shape == (3, 6)
    assert a["counts"].dtype == np.int64 and (a["counts"] >= 0).all()
    np.testing.assert_array_equal(a["rates"], a["theta"] @ a["phi"])
    row_block, col_block = np.arange(9) * 3 // 9, np.arange(6) * 3 // 6
    on_theta = row_block[:, None] == np.arange(3)
    on_phi = np.arange(3)[:, None] == col_block
    assert (a["theta"][on_theta] > 0).all() and (a["phi"][on_phi] > 0).all()
    flat = pf.simulate(9, 6, 3, rng=np.random.default_rng(2), block=False)
    assert flat["counts"].shape == (9, 6)
