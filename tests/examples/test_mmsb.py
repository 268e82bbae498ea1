"""The MMSB example and its exact Gibbs kernel (``pymc_dp.examples.mmsb``, ``kernels.mmsb``).

Default tier (about 7 s): each full conditional of the scan against its closed form, and the
log-density of the models against scipy:

* allocation: pooled pair counts of many entries against the multinomial probabilities
  ``theta_ic theta_jd pi_cd / mu_ij`` (chi-square, both the unit-by-unit and the binomial
  path); control: the transposed ``pi`` (sender and receiver roles swapped) is rejected;
* ``theta_i`` collects both roles: ``theta_0 | theta_1, pi, y`` is
  ``Gamma(a + y_01 + y_10, b + 2 pi theta_1)`` (KS); control: the sender-only law
  ``Gamma(a + y_01, b + pi theta_1)`` is rejected by the same test;
* ``pi`` excludes the diagonal: ``pi | theta, y`` is ``Gamma(a + sum y, b + sum_{i != j}
  theta_i theta_j)`` (KS); control: the exposure with self-loops is rejected;
* ``build_model``'s log-density at a random point equals scipy's (observed subset only);
  held-out entries are not in the model; arguments are checked, naming the argument;
* the whole noise-aware chain (``V = 2``, ``C = 1``; the kernel's ``alpha`` path, which
  ``MMSBGibbs`` runs): the posterior mean of the rate against 3-D quadrature with the true
  counts summed out; control: the naive chain is rejected. That path is, draw for draw, true
  counts then scan (deterministic; control: another alpha).

False-alarm rate: every statistical assertion is at 1e-6 (``ALPHA``); there are 6, so the file
fails by chance with probability below 1e-5. Each control must fall beyond the same threshold.

Slow tier (``-m slow``): Geweke joint-distribution tests of the whole scan, non-private and
noise-aware (true counts drawn given the release), against the prior's exact moments; control:
the naive scan (clipped release taken as the truth) must fail.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

from pymc_dp.examples import mmsb
from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.kernels.mmsb import allocate_pairs, mmsb_scan, observed_pairs

ALPHA = 1e-6  # false-alarm rate of each p-value assertion


# --- the kernel's full conditionals ---------------------------------------------------------


def _pair_probs(lt, lp, i, j):
    w = np.exp(lt[i][:, None] + lt[j][None, :] + lp)
    return (w / w.sum()).ravel()


@pytest.mark.parametrize("count", [1, 11])  # 1: inverse CDF; 11 > 2 C^2: binomials
def test_allocation_is_multinomial(count, rng):
    lt = np.log(np.array([[0.5, 2.0], [1.5, 0.3], [1.0, 1.0]]))
    lp = np.log(np.array([[1.0, 4.0], [0.2, 0.7]]))  # asymmetric: roles matter
    n_entries = 4000 // count
    rows = np.zeros(n_entries, dtype=np.int64)
    cols = np.ones(n_entries, dtype=np.int64)
    y = np.full(n_entries, count)
    send, recv, pairs = allocate_pairs(y, rows, cols, lt, lp, rng)
    total = n_entries * count
    assert send.sum() == recv.sum() == pairs.sum() == total
    assert np.array_equal(send[0], pairs.sum(axis=1)) and np.array_equal(recv[1], pairs.sum(0))
    obs = pairs.ravel()
    right = stats.chisquare(obs, total * _pair_probs(lt, lp, 0, 1)).pvalue
    wrong = stats.chisquare(obs, total * _pair_probs(lt, lp.T, 0, 1)).pvalue
    assert right > ALPHA
    assert wrong < ALPHA  # negative control: sender / receiver roles swapped


def test_theta_row_collects_sender_and_receiver_roles(rng):
    a, b, pi, theta1 = 1.5, 0.8, 1.7, 0.6
    y = np.array([3, 5])  # y_01, y_10
    rows, cols = np.array([0, 1]), np.array([1, 0])
    lt0 = np.log(np.array([[1.0], [theta1]]))
    lp = np.log(np.array([[pi]]))
    # row 0 is drawn first, given row 1's current value: read it from each fresh scan
    draws = np.array(
        [np.exp(mmsb_scan(y, rows, cols, lt0, lp, a, b, a, b, rng, pi=False)[0][0, 0])
         for _ in range(3000)]
    )  # fmt: skip
    right = stats.kstest(draws, stats.gamma(a + 8, scale=1 / (b + 2 * pi * theta1)).cdf)
    sender_only = stats.kstest(draws, stats.gamma(a + 3, scale=1 / (b + pi * theta1)).cdf)
    assert right.pvalue > ALPHA
    assert sender_only.pvalue < ALPHA  # negative control


def test_pi_excludes_self_loops(rng):
    a, b = 0.7, 1.3
    theta = np.array([0.5, 1.2, 2.0])
    rows, cols = observed_pairs(3)
    y = np.array([1, 0, 2, 4, 0, 3])
    lt = np.log(theta)[:, None]
    draws = np.array(
        [np.exp(mmsb_scan(y, rows, cols, lt, [[0.0]], a, b, a, b, rng, theta=False)[1][0, 0])
         for _ in range(3000)]
    )  # fmt: skip
    off = theta.sum() ** 2 - (theta**2).sum()
    right = stats.kstest(draws, stats.gamma(a + y.sum(), scale=1 / (b + off)).cdf)
    loops = stats.kstest(draws, stats.gamma(a + y.sum(), scale=1 / (b + theta.sum() ** 2)).cdf)
    assert right.pvalue > ALPHA
    assert loops.pvalue < ALPHA  # negative control: self-loops in the exposure


def test_kernel_refuses_bad_input(rng):
    rows, cols = observed_pairs(3)
    lt, lp = np.zeros((3, 2)), np.zeros((2, 2))
    y = np.ones(6, dtype=np.int64)
    with pytest.raises(ValueError, match="self-loops"):
        allocate_pairs([1], [1], [1], lt, lp, rng)
    with pytest.raises(ValueError, match="y must be non-negative"):
        mmsb_scan(-y, rows, cols, lt, lp, 1.0, 1.0, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="log_theta"):
        mmsb_scan(y, rows, cols, np.full((3, 2), np.nan), lp, 1.0, 1.0, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="a_theta"):
        mmsb_scan(y, rows, cols, lt, lp, np.nan, 1.0, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="rows and cols"):
        mmsb_scan(y, rows + 3, cols, lt, lp, 1.0, 1.0, 1.0, 1.0, rng)
    with pytest.raises(TypeError, match="rng"):
        mmsb_scan(y, rows, cols, lt, lp, 1.0, 1.0, 1.0, 1.0, 0)
    with pytest.raises(ValueError, match="impossible"):
        allocate_pairs([2], [0], [1], [[-np.inf], [0.0]], [[0.0]], rng)
    with pytest.raises(ValueError, match="mask"):
        observed_pairs(3, mask=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="n_actors"):
        observed_pairs(0)


# --- the example module ---------------------------------------------------------------------


def _gamma_logpdf(x, a, b):
    return stats.gamma(a, scale=1 / b).logpdf(x)


@pytest.mark.parametrize("how", mmsb.HOWS)
def test_model_logp_matches_scipy_on_observed_entries(how, rng):
    v, c, a0, b0 = 4, 2, 0.1, 1.0
    truth = mmsb.simulate(v, c, rng=rng)
    noisy, mech = mmsb.privatize(truth["counts"] + 1, 1.0, rng=rng)
    mask = np.zeros((v, v), dtype=bool)
    mask[0, 2] = mask[3, 1] = True
    counts = truth["counts"] if how == "nonprivate" else noisy
    model = mmsb.build_model(counts, c, how=how, mechanism=mech, mask=mask)
    rows, cols = observed_pairs(v, mask)
    assert np.asarray(model.rvs_to_values[model["y"]].data).shape == (v * (v - 1) - 2,)
    assert not any((r, q) in {(0, 2), (3, 1)} for r, q in zip(rows, cols, strict=True))
    theta = rng.gamma(2.0, 0.5, (v, c))
    pi = rng.gamma(2.0, 0.5, (c, c))
    mu = np.einsum("ec,cd,ed->e", theta[rows], pi, theta[cols])
    z = counts[rows, cols]
    ref = _gamma_logpdf(theta, a0, b0).sum() + _gamma_logpdf(pi, a0, b0).sum()
    point = {"theta_log__": np.log(theta), "pi_log__": np.log(pi)}
    jac = np.log(theta).sum() + np.log(pi).sum()  # log transform
    alpha = mech.alpha
    if how == "nonprivate":
        ref += stats.poisson(mu).logpmf(z).sum()
    elif how == "naive":
        ref += stats.poisson(mu).logpmf(np.clip(z, 0, None)).sum()
    elif how == "augmented":
        ytrue = np.maximum(z, 0) + 1
        point["y_true"] = ytrue
        ref += stats.poisson(mu).logpmf(ytrue).sum()
        ref += (np.log((1 - alpha) / (1 + alpha)) + np.abs(z - ytrue) * np.log(alpha)).sum()
    else:
        k = np.arange(400)[:, None]
        terms = stats.poisson(mu).logpmf(k) + np.log((1 - alpha) / (1 + alpha))
        ref += special.logsumexp(terms + np.abs(z - k) * np.log(alpha), axis=0).sum()
    got = model.compile_logp(mode="FAST_COMPILE")(point)
    assert got == pytest.approx(ref + jac, rel=1e-9, abs=1e-8)


def test_top_actor_mask_matches_brute_force(rng):
    y = mmsb.simulate(7, 2, rng=rng)["counts"]
    mask = mmsb.top_actor_mask(y, 2)
    sent, got = y.sum(1), y.sum(0)
    top_s = sorted(range(7), key=lambda i: (-sent[i], i))[:2]
    top_r = sorted(range(7), key=lambda i: (-got[i], i))[:2]
    ref = np.array([[i in top_s or j in top_r for j in range(7)] for i in range(7)])
    assert np.array_equal(mask, ref)


def test_augmented_fit_runs_with_the_gibbs_step(rng):
    truth = mmsb.simulate(5, 2, rng=rng)
    noisy, mech = mmsb.privatize(truth["counts"], 1.0, rng=rng)
    model = mmsb.build_model(noisy, 2, how="augmented", mechanism=mech)
    idata = mmsb.fit(model, draws=30, tune=10, chains=1, random_seed=rng.integers(2**31))
    rates = mmsb.posterior_mean_rates(idata)
    assert rates.shape == (5, 5) and np.all(np.diag(rates) == 0)
    assert np.all(np.isfinite(rates)) and np.all(rates >= 0)
    assert idata.posterior["y_true"].shape == (1, 30, 20)
    assert int(idata.posterior["y_true"].min()) >= 0


def _step_of_foreign_model():
    with pm.Model() as model:
        pm.Gamma("theta", np.float64(1.0), np.float64(1.0))
        return mmsb.MMSBGibbs(model)


def test_example_refuses_bad_arguments():
    y = np.array([[0, 2, 1], [0, 0, 3], [1, 0, 0]])
    cases = [
        (lambda: mmsb.build_model(y, 2, how="nope"), "how"),
        (lambda: mmsb.build_model(y, 2, how="augmented"), "mechanism"),
        (lambda: mmsb.build_model(y[:2], 2, how="naive"), "counts"),
        (lambda: mmsb.build_model(y, 0, how="naive"), "n_communities"),
        (lambda: mmsb.build_model(y, 2, how="naive", prior_shape=np.nan), "prior_shape"),
        (lambda: mmsb.build_model(y, 2, how="naive", mask=np.ones((3, 3), bool)), "mask"),
        (lambda: mmsb.build_model(y, 2, how="naive", mask=np.ones((2, 2), bool)), "mask"),
        (lambda: mmsb.privatize(y, float("nan")), "epsilon"),
        (lambda: mmsb.privatize(np.zeros((3, 3), int), 1.0), "relative_to_mean"),
        (lambda: mmsb.simulate(1, 2), "n_actors"),
        (lambda: mmsb.top_actor_mask(y, 3), "n_top"),
        (lambda: mmsb.mae(np.ones((3, 3)), y, mask=np.zeros((3, 3))), "mask"),
        (_step_of_foreign_model, "model"),
        (lambda: mmsb.MMSBGibbs("not a model"), "model"),
    ]
    for call, word in cases:
        with pytest.raises(ValueError, match=word):
            call()


# --- slow: Geweke joint-distribution tests --------------------------------------------------

V, C, A, B = 3, 2, 2.0, 2.0


def _mu(lt, lp, rows, cols):
    th = np.exp(lt)
    return np.einsum("ec,cd,ed->e", th[rows], np.exp(lp), th[cols])


def _geweke(rng, n, *, alpha=None, naive=False):
    """Successive-conditional simulator: scan given the data, then the data given the
    parameters (and the release given the true counts). Records sum(theta), sum(pi), sum(y)."""
    rows, cols = observed_pairs(V)
    lt = np.log(rng.gamma(A, 1 / B, (V, C)))
    lp = np.log(rng.gamma(A, 1 / B, (C, C)))
    y = rng.poisson(_mu(lt, lp, rows, cols))
    out = np.empty((n, 3))
    for t in range(n):
        seen = y
        if alpha is not None:
            noise = rng.geometric(1 - alpha, y.size) - rng.geometric(1 - alpha, y.size)
            z = y + noise
            seen = (
                np.clip(z, 0, None)
                if naive
                else draw_true_counts(z, _mu(lt, lp, rows, cols), alpha, rng)
            )
        lt, lp = mmsb_scan(seen, rows, cols, lt, lp, A, B, A, B, rng)
        y = rng.poisson(_mu(lt, lp, rows, cols))
        out[t] = np.exp(lt).sum(), np.exp(lp).sum(), y.sum()
    return out


def _geweke_z(out):
    # prior moments: E theta = E pi = A / B = 1, E y_ij = C^2 (A / B)^3
    truth = np.array([V * C, C * C, V * (V - 1) * C * C]) * np.array([1, 1, (A / B) ** 3])
    batches = out.reshape(50, -1, 3).mean(axis=1)
    return (batches.mean(0) - truth) / (batches.std(0, ddof=1) / np.sqrt(50))


# |t_49| > 6.5 has probability about 4e-8; three functions: false alarm below 1.2e-7 per run.
Z_MAX = 6.5


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [None, 0.5])
def test_geweke_whole_scan(alpha, rng):
    z = _geweke_z(_geweke(rng, 20_000, alpha=alpha))
    assert np.all(np.abs(z) < Z_MAX), z


@pytest.mark.slow
def test_geweke_negative_control_naive_scan(rng):
    z = _geweke_z(_geweke(rng, 20_000, alpha=0.5, naive=True))
    assert np.max(np.abs(z)) > Z_MAX, z


# --- the whole posterior against quadrature (default tier) -----------------------------------


def _grid_posterior_mean_rate(z, alpha, a, b, n_grid=48, y_max=30):
    """E[mu | release] for V = 2, C = 1 (mu_01 = mu_10 = theta_0 theta_1 pi) by quadrature on a
    log grid of (theta_0, theta_1, pi), the true counts summed out exactly for each entry."""
    u = np.linspace(-7.0, 3.5, n_grid)
    log_prior = stats.gamma(a, scale=1 / b).logpdf(np.exp(u)) + u  # density of log x
    log_mu = u[:, None, None] + u[None, :, None] + u[None, None, :]
    mu = np.exp(log_mu)[..., None]
    ys = np.arange(y_max)
    log_lik = 0.0
    for ze in z:
        noise = np.log((1 - alpha) / (1 + alpha)) + np.abs(ze - ys) * np.log(alpha)
        terms = ys * log_mu[..., None] - mu - special.gammaln(ys + 1) + noise
        log_lik = log_lik + special.logsumexp(terms, axis=-1)
    lw = log_prior[:, None, None] + log_prior[None, :, None] + log_prior[None, None, :] + log_lik
    w = np.exp(lw - lw.max())
    return float((w * np.exp(log_mu)).sum() / w.sum())


def _chain_mean_rate(z, alpha, a, b, rng, n, *, naive):
    rows, cols = observed_pairs(2)
    lt, lp = np.zeros((2, 1)), np.zeros((1, 1))
    out = np.empty(n)
    for t in range(n):
        if naive:
            lt, lp = mmsb_scan(np.clip(z, 0, None), rows, cols, lt, lp, a, b, a, b, rng)
        else:  # the kernel's own noise-aware scan (what MMSBGibbs runs)
            lt, lp, _ = mmsb_scan(z, rows, cols, lt, lp, a, b, a, b, rng, alpha=alpha)
        out[t] = np.exp(lt.sum() + lp[0, 0])
    batches = out[n // 10 :].reshape(50, -1).mean(axis=1)  # burn-in: the first tenth
    return batches.mean(), batches.std(ddof=1) / np.sqrt(50)


def test_noise_aware_scan_matches_quadrature(rng):
    """The whole noise-aware chain (true counts given the release, then the scan) against the
    posterior mean of the rate by quadrature, V = 2, C = 1, release (3, -1), alpha = 0.5,
    Gamma(2, rate 2) priors. Quadrature: a 48-point log grid per factor, counts summed to 30;
    it equals a 90-point grid with sums to 80 within 4e-7, far below the MCSE (about 0.01).
    The chain mean is a batch-means t_49 statistic (integrated autocorrelation time about 2.5
    scans, batches of 216): bound 5.59, two-sided 1e-6. Control: the naive chain (clipped
    release as the truth; 3000 scans) is rejected (z about 60)."""
    z, alpha, a, b = np.array([3, -1]), 0.5, 2.0, 2.0
    exact = _grid_posterior_mean_rate(z, alpha, a, b)
    bound = stats.t.isf(ALPHA / 2, 49)
    mean, se = _chain_mean_rate(z, alpha, a, b, rng, 12_000, naive=False)
    assert abs(mean - exact) < bound * se, (mean, se, exact)
    naive, naive_se = _chain_mean_rate(z, alpha, a, b, rng, 3_000, naive=True)
    assert abs(naive - exact) > bound * naive_se, (naive, naive_se, exact)  # negative control


def test_noise_aware_scan_is_true_counts_then_scan(rng):
    """``mmsb_scan(release, ..., alpha=alpha)`` is, draw for draw, the composition it stands
    for: per scan the true counts given the release and the current rates
    (``draw_true_counts``), then the scan. Deterministic (the same seed on both sides); control:
    the composition at another alpha gives other true counts."""
    rows, cols = observed_pairs(4)
    z = rng.integers(-3, 8, rows.size)
    lt, lp = rng.normal(size=(4, 2)), rng.normal(size=(2, 2))
    seed = int(rng.integers(2**32))

    def composed(noise):
        g, t, p = np.random.default_rng(seed), lt, lp
        for _ in range(3):
            y = draw_true_counts(z, _mu(t, p, rows, cols), noise, g)
            t, p = mmsb_scan(y, rows, cols, t, p, 0.3, 1.0, 0.3, 1.0, g)
        return t, p, y

    got = mmsb_scan(z, rows, cols, lt, lp, 0.3, 1.0, 0.3, 1.0, np.random.default_rng(seed),
                    n_scans=3, alpha=0.4)  # fmt: skip
    for a, b in zip(got, composed(0.4), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[2], composed(0.9)[2])  # control: another noise law
