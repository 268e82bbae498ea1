"""The Poisson CP tensor example and its exact Gibbs kernel (``examples.poisson_tensor``,
``kernels.poisson_tensor``).

Default tier (about 4 s):

* a mode's full conditional against its closed form: with ``C = 1``, ``theta_i | phi, psi, y``
  is ``Gamma(a + sum_jk y_ijk, b + sum_j phi_j sum_k psi_k)`` (KS); control: the matrix rate
  that forgets the third mode, ``b + sum_j phi_j``, is rejected by the same test;
* the allocation: with two components and one cell the count given to component 0 is
  ``Binomial(y, w_0 / (w_0 + w_1))``, so the next draw of that mode is the exact mixture of
  Gammas over the binomial (KS); control: the equal split (weights ignored) is rejected;
* the whole noise-aware chain (1 x 1 x 2, C = 1; the kernel's ``alpha`` path, which
  ``CPGibbs`` runs): the posterior mean of a rate against 4-D quadrature with the true counts
  summed out (a 48-point grid equals a 64-point one within 2e-7); control: the naive chain
  (clipped release as truth) is rejected (z about 30); that path is, draw for draw, true
  counts then scan (deterministic; control: another alpha);
* ``build_model``'s log-density equals scipy's (nonprivate, augmented);
* arguments are checked, naming the argument; a tiny ``fit`` runs the step.

False-alarm rate: each statistical assertion at 1e-6 (``ALPHA``; 3 in all); each control must
fall beyond the same threshold.

Slow tier: Geweke joint-distribution tests of the whole scan (non-private and noise-aware)
against the prior's exact moments; control: the naive scan (clipped release as truth) fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.examples import poisson_tensor as pt3
from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.kernels.poisson_tensor import cp_scan

ALPHA = 1e-6  # false-alarm rate of each p-value assertion


def test_mode_conditional_uses_every_other_mode(rng):
    a, b = 1.5, 0.7
    y = np.array([[[2, 0], [1, 3]], [[0, 1], [4, 0]]])
    phi, psi = np.array([0.8, 1.4]), np.array([0.5, 1.5])
    start = [np.zeros((2, 1)), np.log(phi)[:, None], np.log(psi)[:, None]]
    draws = np.exp([cp_scan(y, start, a, b, rng)[0][0, 0] for _ in range(3000)])
    right = stats.kstest(
        draws, stats.gamma(a + y[0].sum(), scale=1 / (b + phi.sum() * psi.sum())).cdf
    )
    matrix = stats.kstest(draws, stats.gamma(a + y[0].sum(), scale=1 / (b + phi.sum())).cdf)
    assert right.pvalue > ALPHA
    assert matrix.pvalue < ALPHA  # negative control: the third mode forgotten


def test_allocation_splits_by_component_weight(rng):
    # one cell, y = 12 (> 2 C: the binomial path); mode 0's shape is a + n_0c, so with rate
    # fixed the draws of theta_00 given the allocation are Gamma(a + Binomial(12, p), b + 1)
    a, b, y = 1.0, 1.0, np.array([[[12]]])
    w = np.array([1.0, 3.0])  # component weights through phi
    start = [np.zeros((1, 2)), np.log(w)[None, :], np.zeros((1, 2))]
    draws = np.exp([cp_scan(y, start, a, b, rng)[0][0, 0] for _ in range(4000)])
    p = w[0] / w.sum()
    n = np.arange(13)
    pmf = stats.binom(12, p).pmf(n)

    # the law of the draw: a mixture of Gamma(a + n, b + w_0) over the binomial allocation
    def cdf(x):
        return np.sum(pmf[:, None] * stats.gamma(a + n[:, None], scale=1 / (b + w[0])).cdf(x), 0)

    right = stats.kstest(draws, cdf)
    pmf_wrong = stats.binom(12, 0.5).pmf(n)  # control: equal split, weights ignored

    def cdf_wrong(x):
        return np.sum(
            pmf_wrong[:, None] * stats.gamma(a + n[:, None], scale=1 / (b + w[0])).cdf(x), 0
        )

    assert right.pvalue > ALPHA
    assert stats.kstest(draws, cdf_wrong).pvalue < ALPHA


@pytest.mark.parametrize("how", ["nonprivate", "augmented"])
def test_model_logp_matches_scipy(how, rng):
    truth = pt3.simulate((3, 2, 2), 2, rng=rng)
    noisy, mech = pt3.privatize(truth["counts"] + 1, 1.0, rng=rng)
    counts = truth["counts"] if how == "nonprivate" else noisy
    model = pt3.build_model(counts, 2, how=how, mechanism=mech)
    f = [rng.gamma(2.0, 0.5, (n, 2)) for n in (3, 2, 2)]
    mu = np.einsum("ic,jc,kc->ijk", *f)
    point = {f"{n}_log__": np.log(x) for n, x in zip(("theta", "phi", "psi"), f, strict=True)}
    ref = sum(stats.gamma(0.1, scale=1.0).logpdf(x).sum() + np.log(x).sum() for x in f)
    if how == "nonprivate":
        ref += stats.poisson(mu).logpmf(counts).sum()
    else:
        yt = np.maximum(counts, 0) + 1
        point["y_true"] = yt
        al = mech.alpha
        ref += stats.poisson(mu).logpmf(yt).sum()
        ref += (np.log((1 - al) / (1 + al)) + np.abs(counts - yt) * np.log(al)).sum()
    got = model.compile_logp(mode="FAST_COMPILE")(point)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_fit_runs_the_gibbs_step(rng):
    truth = pt3.simulate((3, 3, 2), 2, rng=rng)
    noisy, mech = pt3.privatize(truth["counts"], 1.0, rng=rng)
    model = pt3.build_model(noisy, 2, how="augmented", mechanism=mech)
    idata = pt3.fit(model, draws=20, tune=5, chains=1, random_seed=rng.integers(2**31))
    rates = pt3.posterior_mean_rates(idata)
    assert rates.shape == (3, 3, 2) and np.all(np.isfinite(rates)) and np.all(rates >= 0)
    assert int(idata.posterior["y_true"].min()) >= 0


def test_refuses_bad_arguments(rng):
    y = np.ones((2, 2, 2), dtype=np.int64)
    z = [np.zeros((2, 1))] * 3
    cases = [
        (lambda: pt3.build_model(y, 1, how="nope"), "how"),
        (lambda: pt3.build_model(y[0], 1, how="naive"), "counts"),
        (lambda: pt3.build_model(-y, 1, how="nonprivate"), "counts"),
        (lambda: pt3.build_model(y, 0, how="naive"), "n_components"),
        (lambda: pt3.build_model(y, 1, how="naive", prior_rate=-1.0), "prior_rate"),
        (lambda: pt3.privatize(y, 0.0), "epsilon"),
        (lambda: pt3.simulate((2, 2), 1), "shape"),
        (lambda: cp_scan(y, z[:2], 1.0, 1.0, rng), "log_factors"),
        (lambda: cp_scan(-y, z, 1.0, 1.0, rng), "y must"),
        (lambda: cp_scan(y, z, np.nan, 1.0, rng), "a must"),
        (lambda: cp_scan(y, z, 1.0, 1.0, rng, n_scans=0), "n_scans"),
        (lambda: cp_scan(y, [np.full((2, 1), -np.inf)] * 3, 1.0, 1.0, rng), "impossible"),
    ]
    for call, word in cases:
        with pytest.raises(ValueError, match=word):
            call()


def _grid_mean(z, alpha, a, b, n_grid=48, y_max=30):
    """E[mu | release] for a 1 x 1 x 2 tensor, C = 1 (mu_k = theta phi psi_k), by 4-D quadrature
    on a log grid, the true counts summed out exactly."""
    u = np.linspace(-7.0, 3.5, n_grid)
    lp = stats.gamma(a, scale=1 / b).logpdf(np.exp(u)) + u  # density of log x
    base = u[:, None] + u[None, :]  # log(theta phi)
    ys = np.arange(y_max)
    log_lik = 0.0
    log_mu = []
    for k, ze in enumerate(z):
        shape = [n_grid, n_grid, 1, 1]
        shape[2 + k] = n_grid
        lm = base[:, :, None, None] + u.reshape(shape[2:])[None, None]
        noise = np.log((1 - alpha) / (1 + alpha)) + np.abs(ze - ys) * np.log(alpha)
        t = ys * lm[..., None] - np.exp(lm)[..., None] - special.gammaln(ys + 1) + noise
        log_lik = log_lik + special.logsumexp(t, axis=-1)
        log_mu.append(lm)
    lw = (
        lp[:, None, None, None] + lp[None, :, None, None] + lp[None, None, :, None]
        + lp[None, None, None, :] + log_lik
    )  # fmt: skip
    w = np.exp(lw - lw.max())
    return float((w * np.exp(log_mu[0])).sum() / w.sum())


def _chain_mean(z, alpha, a, b, rng, n, *, naive):
    lfs = [np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((2, 1))]
    out = np.empty(n)
    for t in range(n):
        if naive:
            lfs = cp_scan(np.clip(z, 0, None), lfs, a, b, rng)
        else:  # the kernel's own noise-aware scan (what CPGibbs runs)
            lfs, _ = cp_scan(z, lfs, a, b, rng, alpha=alpha)
        out[t] = np.exp(lfs[0][0, 0] + lfs[1][0, 0] + lfs[2][0, 0])  # mu of cell (0, 0, 0)
    batches = out[n // 10 :].reshape(50, -1).mean(axis=1)
    return batches.mean(), batches.std(ddof=1) / np.sqrt(50)


def test_noise_aware_chain_matches_quadrature(rng):
    """The whole noise-aware chain (true counts given the release, then ``cp_scan``) against the
    posterior mean of ``mu_000`` by 4-D quadrature (1 x 1 x 2 tensor, C = 1, release (2, -1),
    alpha = 0.5, Gamma(2, rate 2) priors; a 48-point log grid per factor). Batch-means t_49
    statistic, bound 5.59 (two-sided 1e-6). Control: the naive chain is rejected."""
    z, alpha, a, b = np.array([[[2, -1]]]), 0.5, 2.0, 2.0
    exact = _grid_mean(z.ravel(), alpha, a, b)
    bound = stats.t.isf(ALPHA / 2, 49)
    mean, se = _chain_mean(z, alpha, a, b, rng, 10_000, naive=False)
    assert abs(mean - exact) < bound * se, (mean, se, exact)
    naive, naive_se = _chain_mean(z, alpha, a, b, rng, 3_000, naive=True)
    assert abs(naive - exact) > bound * naive_se, (naive, naive_se, exact)  # negative control


def test_noise_aware_scan_is_true_counts_then_scan(rng):
    """``cp_scan(release, ..., alpha=alpha)`` is, draw for draw, per scan the true counts given
    the release and the current rates (``draw_true_counts``) then the scan. Deterministic (the
    same seed on both sides); control: another alpha gives other true counts."""
    z = rng.integers(-3, 8, (3, 2, 2))
    lfs = [rng.normal(size=(s, 2)) for s in z.shape]
    seed = int(rng.integers(2**32))

    def composed(noise):
        g, f = np.random.default_rng(seed), lfs
        for _ in range(3):
            mu = np.einsum("ic,jc,kc->ijk", *[np.exp(x) for x in f])
            y = draw_true_counts(z, mu, noise, g)
            f = cp_scan(y, f, 0.3, 1.0, g)
        return f, y

    got, y = cp_scan(z, lfs, 0.3, 1.0, np.random.default_rng(seed), n_scans=3, alpha=0.4)
    want, y_want = composed(0.4)
    np.testing.assert_array_equal(y, y_want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(y, composed(0.9)[1])  # control: another noise law


# --- slow: Geweke ---------------------------------------------------------------------------

SHAPE, C, A, B = (2, 3, 2), 2, 2.0, 2.0
Z_MAX = 6.5  # |t_49| > 6.5: about 4e-8 per function; 3 functions: below 1.2e-7 per run


def _geweke(rng, n, *, alpha=None, naive=False):
    lfs = [np.log(rng.gamma(A, 1 / B, (s, C))) for s in SHAPE]

    def mu(lfs):
        return np.einsum("ic,jc,kc->ijk", *[np.exp(f) for f in lfs])

    y = rng.poisson(mu(lfs))
    out = np.empty((n, 3))
    for t in range(n):
        seen = y
        if alpha is not None:
            z = y + rng.geometric(1 - alpha, y.shape) - rng.geometric(1 - alpha, y.shape)
            seen = np.clip(z, 0, None) if naive else draw_true_counts(z, mu(lfs), alpha, rng)
        lfs = cp_scan(seen, lfs, A, B, rng)
        y = rng.poisson(mu(lfs))
        out[t] = np.exp(lfs[0]).sum(), np.exp(lfs[2]).sum(), y.sum()
    truth = np.array([SHAPE[0] * C, SHAPE[2] * C, np.prod(SHAPE) * C * (A / B) ** 3])
    batches = out.reshape(50, -1, 3).mean(axis=1)
    return (batches.mean(0) - truth) / (batches.std(0, ddof=1) / np.sqrt(50))


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [None, 0.5])
def test_geweke_whole_scan(alpha, rng):
    z = _geweke(rng, 20_000, alpha=alpha)
    assert np.all(np.abs(z) < Z_MAX), z


@pytest.mark.slow
def test_geweke_negative_control_naive(rng):
    z = _geweke(rng, 20_000, alpha=0.5, naive=True)
    assert np.max(np.abs(z)) > Z_MAX, z
