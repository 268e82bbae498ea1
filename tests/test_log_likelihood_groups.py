"""Per-group vector releases and Monte Carlo marginals in pmdp.compute_log_likelihood (issue 26).

LOO with the groups of a vector release as observations: tests/test_log_likelihood.py (with the
brute-force LOO-CV of separate releases it shares).

* Per-group vector Release (exact, no randomness): a vector Release of per-group counts of one
  record variable (Bernoulli records with a per-group ``q[g]``; Poisson records with a shared
  ``mu`` and the counts written as a one-hot table sum) gives one value per component, equal to
  the scipy enumeration of ``log sum_s Binom(s; n_k, q_k) Laplace(z_k - s)`` (Poisson: ``Poisson
  (s; n_k mu)``) to 1e-10. Negative control: the reference with the noise scale x 1.05 differs
  by more than 1e-4.
* Refusals: components that share records (naming the record and the alternative), records
  with parameters that differ inside a component or are picked by a boolean mask, a Monte
  Carlo request for records read by another observed variable, and an invalid
  ``n_simulations``. Controls: the disjoint version of the same release, and an integer index
  of the same blocks, are accepted.
* Monte Carlo (clamped Poisson sum, weighted Bernoulli sum): the estimate lies within 5.33
  reported MCSE of the exact value (clamped: convolution of the clipped Poisson pmf; weighted:
  brute-force enumeration of all 2^8 record vectors) at 2 draws each, and again for the clamped
  sum simulated in chunks and as one of two per-group Releases: 7 comparisons at a two-sided
  1e-7 each, a false-alarm rate below 1e-6 (the weights are bounded by the Laplace density's
  maximum, so the normal approximation holds at 2000 to 20 000 simulations; the Jensen bias of
  the log, about MCSE^2 / 2, is below 1e-2 of the margin). Negative control: the same test
  rejects the value that ignores the clamp (unclamped Poisson sum) and the unweighted sum.
"""

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.log_likelihood import compute_log_likelihood, stack_log_likelihood

SIGMA_MC = 5.33  # two-sided normal quantile of 1e-7 (4 assertions: total below 1e-6)


def _idata(**draws):
    data = {}
    for k, v in draws.items():
        v = np.asarray(v, dtype=np.float64)
        data[k] = (("chain", "draw", *[f"{k}_dim_{i}" for i in range(v.ndim - 2)]), v)
    return xr.DataTree.from_dict({"posterior": xr.Dataset(data)})


def _laplace(x, b):
    return -np.abs(x) / b - math.log(2.0 * b)


# ---------------------------------------------------------------- (1) exact per component

G_SMALL = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 0])
Z_SMALL = np.array([1.5, 3.0, 2.2])


def _bernoulli_groups():
    with pm.Model() as m:
        q = pm.Beta("q", 2.0, 2.0, shape=3)
        x = pm.Bernoulli("x", q[G_SMALL], shape=len(G_SMALL))
        stat = pt.stack([x[G_SMALL == k].sum() for k in range(3)])
        pmdp.Release("z", stat, pmdp.Laplace(scale=1.5), observed=Z_SMALL)
    draws = np.array([[0.2, 0.5, 0.7], [0.4, 0.4, 0.1], [0.999, 1e-3, 0.5]])

    def ref(q, scale):
        n = np.bincount(G_SMALL)
        out = []
        for k in range(3):
            s = np.arange(n[k] + 1)
            logw = stats.binom.logpmf(s, n[k], q[k]) + _laplace(Z_SMALL[k] - s, 1.5 * scale)
            out.append(special.logsumexp(logw))
        return np.array(out)

    return m, "q", draws, ref


def _poisson_onehot():
    g = np.array([2, 0, 1, 1, 0, 2, 2, 1])
    z = np.array([4.3, 9.9, 7.0])
    with pm.Model() as m:
        mu = pm.Gamma("mu", 2.0, 1.0)
        x = pm.Poisson("x", mu, shape=len(g))
        stat = (pt.eye(3)[g] * x[:, None]).sum(axis=0)  # one-hot table sum
        pmdp.Release("z", stat, pmdp.Laplace(scale=2.0), observed=z)
    draws = np.array([0.5, 1.7, 4.0])

    def ref(mu, scale):
        n = np.bincount(g)
        s = np.arange(400)
        return np.array(
            [
                special.logsumexp(
                    stats.poisson.logpmf(s, n[k] * mu) + _laplace(z[k] - s, 2 * scale)
                )
                for k in range(3)
            ]
        )

    return m, "mu", draws, ref


def test_one_hot_table_rows_are_the_groups():
    """A (group x value) one-hot table of 0/1 records: each row (both cells read the same
    records) is one observation, its exact value ``log sum_S Binom(S; n_k, q_k)
    eta(z_k0 - (n_k - S)) eta(z_k1 - S)`` (scipy, 1e-10); control: the cells taken as
    independent components (the product of their own marginals) differs by more than 1e-3."""
    g = np.array([0, 1, 1, 2, 0, 2, 2, 1, 0, 0])
    z = np.array([[2.5, 1.0], [0.7, 2.2], [1.9, 0.4]])
    with pm.Model() as m:
        q = pm.Beta("q", 2.0, 2.0, shape=3)
        x = pm.Bernoulli("x", q[g], shape=len(g))
        onehot_v = pt.stack([1 - x, x], axis=1)  # (records, 2)
        table = (pt.eye(3)[g][:, :, None] * onehot_v[:, None, :]).sum(axis=0)
        pmdp.Release("z", table, pmdp.Laplace(scale=1.0), observed=z)
    draws = np.array([[0.2, 0.5, 0.7], [0.9, 0.1, 0.4]])
    ll = compute_log_likelihood(_idata(q=draws[None]), model=m, extend_inferencedata=False)
    assert ll["z"].dims == ("chain", "draw", "z_dim_0")
    n = np.bincount(g)
    want, cells = np.empty((2, 3)), np.empty((2, 3))
    for d, qd in enumerate(draws):
        for k in range(3):
            s = np.arange(n[k] + 1)
            lb = stats.binom.logpmf(s, n[k], qd[k])
            want[d, k] = special.logsumexp(
                lb + _laplace(z[k, 0] - (n[k] - s), 1.0) + _laplace(z[k, 1] - s, 1.0)
            )
            cells[d, k] = special.logsumexp(lb + _laplace(z[k, 0] - (n[k] - s), 1.0))
            cells[d, k] += special.logsumexp(lb + _laplace(z[k, 1] - s, 1.0))
    np.testing.assert_allclose(ll["z"].values[0], want, rtol=0, atol=1e-10)
    assert np.max(np.abs(ll["z"].values[0] - cells)) > 1e-3


@pytest.mark.parametrize("build", [_bernoulli_groups, _poisson_onehot])
def test_group_components_equal_scipy(build):
    """One value per component, equal to the scipy enumeration to 1e-10 at three draws; the
    reference with the noise scale x 1.05 (negative control) differs by more than 1e-4."""
    model, var, draws, ref = build()
    ll = compute_log_likelihood(
        _idata(**{var: draws[None]}), model=model, extend_inferencedata=False
    )
    got = ll["z"].values[0]
    assert ll["z"].dims == ("chain", "draw", "z_dim_0") and got.shape == (3, 3)
    want = np.array([ref(d, 1.0) for d in draws])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    control = np.array([ref(d, 1.05) for d in draws])
    assert np.max(np.abs(got - control)) > 1e-4


# ---------------------------------------------------------------- (2) refusals


def _post(model):
    return _idata(**{v.name: np.full((1, 2, *v.type.shape), 0.4) for v in model.free_RVs[:1]})


def test_shared_records_refused_disjoint_accepted():
    with pm.Model() as m:
        p = pm.Beta("p", 2.0, 2.0)
        x = pm.Bernoulli("x", p, shape=10)
        pmdp.Release(
            "z", pt.stack([x[:6].sum(), x[4:].sum()]), pmdp.Laplace(scale=1.0), observed=[3.0, 2.0]
        )
    with pytest.raises(ValueError, match="Release 'z'") as err:
        compute_log_likelihood(_post(m), model=m)
    msg = str(err.value)
    assert "record 4 of 'x' is read by components [0, 1]" in msg and "n_simulations" in msg
    with pm.Model() as ok:  # control: disjoint groups
        p = pm.Beta("p", 2.0, 2.0)
        x = pm.Bernoulli("x", p, shape=10)
        pmdp.Release(
            "z", pt.stack([x[:4].sum(), x[4:].sum()]), pmdp.Laplace(scale=1.0), observed=[3.0, 2.0]
        )
    ll = compute_log_likelihood(_post(ok), model=ok, extend_inferencedata=False)
    assert ll["z"].shape == (1, 2, 2) and np.all(np.isfinite(ll["z"].values))


def test_parameters_differing_inside_a_component_refused():
    g = np.array([0, 0, 1, 1, 2, 2])
    with pm.Model() as m:
        q = pm.Beta("q", 2.0, 2.0, shape=3)
        x = pm.Bernoulli("x", q[g], shape=6)
        pmdp.Release(
            "z", pt.stack([x[:3].sum(), x[3:].sum()]), pmdp.Laplace(scale=1.0), observed=[1.0, 2.0]
        )
    post = _idata(q=np.full((1, 2, 3), 0.4))
    with pytest.raises(ValueError, match="not exchangeable"):
        compute_log_likelihood(post, model=m)


def test_parameters_picked_by_a_boolean_mask_refused_integer_index_accepted():
    """``q[mask]`` selects parameters, it does not group records: records 0, 1 get q0, q1
    (the mask's first entries are both True, as an index of groups would read it) and are
    refused as one component; control: ``q[g]`` with an integer ``g`` of the same blocks."""
    mask = np.array([True, True, False, False, True, True])

    def build(index):
        with pm.Model() as m:
            q = pm.Beta("q", 2.0, 2.0, shape=6)
            x = pm.Bernoulli("x", q[index], shape=4)
            stat = pt.stack([x[:2].sum(), x[2:].sum()])
            pmdp.Release("z", stat, pmdp.Laplace(scale=1.0), observed=[1.0, 2.0])
        return m

    post = _idata(q=np.linspace(0.2, 0.7, 6)[None, None])
    with pytest.raises(ValueError, match="not exchangeable"):
        compute_log_likelihood(post, model=build(mask))
    ll = compute_log_likelihood(
        post, model=build(np.array([0, 0, 4, 4])), extend_inferencedata=False
    )
    assert ll["z"].shape == (1, 1, 2) and np.all(np.isfinite(ll["z"].values))


def test_monte_carlo_refused_when_records_read_elsewhere_and_bad_n():
    with pm.Model() as m:
        mu = pm.Gamma("mu", 2.0, 1.0)
        x = pm.Poisson("x", mu, shape=5)
        pm.Normal("y", x.astype("float64"), 1.0, observed=np.ones(5))
        pmdp.Release("zk", pt.clip(x, 0, 3).sum(), pmdp.Laplace(scale=1.0), observed=8.0)
    post = _idata(mu=np.full((1, 2), 1.0))
    with pytest.raises(ValueError, match="also read by"):
        compute_log_likelihood(post, model=m, var_names=["zk"], n_simulations=100)
    for bad in (1, 2.5, True, -3):
        with pytest.raises(ValueError, match="n_simulations"):
            compute_log_likelihood(post, model=m, var_names=["zk"], n_simulations=bad)


# ---------------------------------------------------------------- (3) Monte Carlo marginal

N_SIM = 20_000


def _clamped():
    with pm.Model() as m:
        mu = pm.Gamma("mu", 2.0, 1.0)
        x = pm.Poisson("x", mu, shape=5)
        pmdp.Release("zk", pt.clip(x, 0, 3).sum(), pmdp.Laplace(scale=1.0), observed=8.0)

    def ref(mu, clamp=True):
        s = np.arange(200)
        pk = stats.poisson.pmf(s, mu)
        if clamp:
            pk = np.concatenate([pk[:3], [stats.poisson.sf(2, mu)]])
        dist = np.array([1.0])
        for _ in range(5):
            dist = np.convolve(dist, pk)
        t = np.arange(len(dist))
        return special.logsumexp(np.log(dist + 1e-300) + _laplace(8.0 - t, 1.0))

    return m, "mu", np.array([1.0, 2.5]), ref


WEIGHTS = np.array([1.0, 2.0, 0.5, 1.5, 3.0, 1.0, 2.5, 0.5])


def _weighted():
    with pm.Model() as m:
        p = pm.Beta("p", 2.0, 2.0)
        x = pm.Bernoulli("x", p, shape=8)
        pmdp.Release("zk", (WEIGHTS * x).sum(), pmdp.Laplace(scale=1.0), observed=6.0)

    def ref(p, weighted=True):
        xs = (np.arange(256)[:, None] >> np.arange(8)) & 1  # all 2^8 record vectors
        logpx = xs.sum(1) * math.log(p) + (8 - xs.sum(1)) * math.log1p(-p)
        t = xs @ (WEIGHTS if weighted else np.ones(8))
        return special.logsumexp(logpx + _laplace(6.0 - t, 1.0))

    return m, "p", np.array([0.3, 0.6]), ref


@pytest.mark.parametrize("build", [_clamped, _weighted])
def test_monte_carlo_marginal_within_mcse(build, rng):
    """The estimate is within 5.33 MCSE of the exact value (false-alarm rate: module
    docstring); the wrong model (no clamp / no weights) is rejected by the same test."""
    model, var, draws, ref = build()
    seed = int(rng.integers(2**31))
    out = compute_log_likelihood(
        _idata(**{var: draws[None]}), model=model, n_simulations=N_SIM, random_seed=seed
    )
    est = out["log_likelihood"]["zk"].values[0]
    se = out["log_likelihood_mcse"]["zk"].values[0]
    assert out["log_likelihood"]["zk"].attrs["n_simulations"] == N_SIM
    assert np.all((se > 0) & (se < 0.05)), se
    want = np.array([ref(d) for d in draws])
    assert np.all(np.abs(est - want) <= SIGMA_MC * se), (est, want, se)
    wrong = np.array([ref(d, False) for d in draws])
    assert np.any(np.abs(est - wrong) > SIGMA_MC * se), (est, wrong, se)


def test_monte_carlo_refusal_without_n_simulations_names_it():
    model, _, _, _ = _clamped()
    with pytest.raises(ValueError, match="n_simulations="):
        compute_log_likelihood(_idata(mu=np.full((1, 2), 1.0)), model=model)


def test_clamp_on_a_group_total_is_not_taken_for_a_sum():
    """Silent-wrong check: a clamp that bites only when a group's total is large (never at
    random half-full records) is refused without ``n_simulations`` and estimated with it;
    control: the unclamped release gets the exact per-group values."""

    def build(clamp):
        with pm.Model() as m:
            p = pm.Beta("p", 2.0, 2.0)
            x = pm.Bernoulli("x", p, shape=60)
            first = pt.minimum(x[:30].sum(), 25) if clamp else x[:30].sum()
            stat = pt.stack([first, x[30:].sum()])
            pmdp.Release("z", stat, pmdp.Laplace(scale=1.0), observed=[20.0, 14.0])
        return m

    post = _idata(p=np.full((1, 2), 0.6))
    with pytest.raises(ValueError, match="n_simulations="):
        compute_log_likelihood(post, model=build(True))
    out = compute_log_likelihood(post, model=build(True), n_simulations=2000, random_seed=3)
    assert out["log_likelihood"]["z"].dims == ("chain", "draw")  # one value: Monte Carlo
    ll = compute_log_likelihood(post, model=build(False), extend_inferencedata=False)
    assert ll["z"].dims == ("chain", "draw", "z_dim_0")


def test_few_simulations_warn_that_the_mcse_is_unreliable():
    """Fewer than 100 effective simulated weights: a UserWarning (the 20 000-simulation test
    above runs with warnings as errors, so it asserts the absence of this warning)."""
    model, var, draws, _ = _clamped()
    with pytest.warns(UserWarning, match="effective sample size"):
        compute_log_likelihood(
            _idata(**{var: draws[None]}), model=model, n_simulations=50, random_seed=0
        )


def test_pm_compute_log_likelihood_routes_group_releases():
    """``pm.compute_log_likelihood`` (wrapped at import) gives the per-group exact values."""
    model, var, draws, ref = _bernoulli_groups()
    post = _idata(**{var: draws[None]})
    with model:
        ll = pm.compute_log_likelihood(post, extend_inferencedata=False, progressbar=False)
    want = np.array([ref(d, 1.0) for d in draws])
    np.testing.assert_allclose(ll["z"].values[0], want, rtol=0, atol=1e-10)


def test_monte_carlo_in_chunks_matches_exact(monkeypatch):
    """Simulations split over several calls (7 chunks of 300 for 2000, the last cut) give an
    estimate within 5.33 MCSE of the exact clamped value (2 assertions at 1e-7, counted in the
    module's 1e-6 budget); control: the unclamped value is rejected."""
    import pymc_dp.log_likelihood as ll_mod

    monkeypatch.setattr(ll_mod, "_MC_CHUNK_VALUES", 5 * 300)
    model, var, draws, ref = _clamped()
    out = compute_log_likelihood(
        _idata(**{var: draws[None]}), model=model, n_simulations=2000, random_seed=11
    )
    est = out["log_likelihood"]["zk"].values[0]
    se = out["log_likelihood_mcse"]["zk"].values[0]
    want = np.array([ref(d) for d in draws])
    assert np.all(np.abs(est - want) <= SIGMA_MC * se), (est, want, se)
    wrong = np.array([ref(d, False) for d in draws])
    assert np.any(np.abs(est - wrong) > SIGMA_MC * se), (est, wrong, se)


def test_clamped_groups_as_separate_releases_give_pointwise_monte_carlo():
    """The route for per-group pointwise values of clamped counts: one record variable and one
    Release per group, each estimated by Monte Carlo, stacked for az.loo. Each value within
    5.33 MCSE of the exact clamped value (1 comparison at 1e-7, in the module's budget with
    the 6 above: 7e-7); control: the unclamped value is rejected."""
    zs = [8.0, 5.0]
    with pm.Model() as m:
        mu = pm.Gamma("mu", 2.0, 1.0)
        for k, zk in enumerate(zs):
            x = pm.Poisson(f"x{k}", mu, shape=5)
            pmdp.Release(f"z{k}", pt.clip(x, 0, 3).sum(), pmdp.Laplace(scale=1.0), observed=zk)
    _, _, _, ref = _clamped()  # log p(z = 8 | mu) of 5 clamped records
    out = compute_log_likelihood(
        _idata(mu=np.array([[2.5]])), model=m, n_simulations=5000, random_seed=5
    )
    est = out["log_likelihood"]["z0"].values[0, 0]
    se = out["log_likelihood_mcse"]["z0"].values[0, 0]
    assert abs(est - ref(2.5)) <= SIGMA_MC * se, (est, ref(2.5), se)
    assert abs(est - ref(2.5, False)) > SIGMA_MC * se
    stacked = stack_log_likelihood(out, ["z0", "z1"])
    assert stacked["log_likelihood"]["releases"].shape == (1, 1, 2)
    assert np.all(np.isfinite(stacked["log_likelihood"]["releases"].values))
