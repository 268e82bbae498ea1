"""Slow tier: the noise-aware fits reconstruct the true counts better than the naive fit.

Design. ``R`` independent replicates at epsilon = 0.75 (Schein et al.'s strongest noise):
simulate a 30 x 24 block-structured truth (K = 3), privatize it with
``alpha = exp(-0.75 / N)``, fit the naive model and a noise-aware model, and record the paired
difference ``delta_r = MAE(naive) - MAE(aware)`` of the posterior-mean rates against the true
counts. The assertion is a one-sided paired t-test of ``H0: E[delta] <= 0``: it passes when
``t = mean(delta) / (sd(delta) / sqrt(R)) > t_{R-1}(1 - 1e-6)``, so a noise-aware fit that is
no better than the naive one passes with probability at most 1e-6 (for normal ``delta``).

Failure rate when the claim holds. A pilot with R = 10 (replicates 0-9 of this test) gave
t = 26.7 for the marginal and t = 15.4 for the augmented fit (MAE naive 1.167, marginal
0.801, augmented 0.893, means over replicates), i.e. standardized effects
``mean(delta) / sd(delta)`` of about 7.7 and 4.5 after the small-sample bias of t. With
R = 20 the threshold is t_19(1 - 1e-6) = 6.72 and the non-central t gives a failure
probability of 8e-18 at effect 4.5, and still 5e-6 at effect 3.0 (two thirds of the
augmented pilot's). The R = 20 run gave t = 23.6 (marginal) and t = 13.7 (augmented), MAE
naive 1.181, marginal 0.817, augmented 0.877; the null control t = -1.88.

Negative controls, asserted to fail the same test: the reversed claim (naive better than
aware), and two naive fits of the same release with different MCMC seeds (a true null:
``E[delta] = 0`` since the two seeds are exchangeable). Each passes with probability at most
1e-6, so asserting that they fail adds at most 1e-6 each to the false-alarm rate.

Run time: 9.8 minutes for both parametrizations on a loaded 2-core machine
(``pytest -m slow``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pymc_dp.examples import poisson_factorization as pf

R, ROWS, COLS, K, EPSILON = 20, 30, 24, 3, 0.75
LEVEL = 1e-6
SAMPLER = {"draws": 300, "tune": 300, "chains": 1, "cores": 1}


def _fit_mae(counts, how, noisy, mech, seed):
    model = pf.build_model(noisy, K, how=how, mechanism=mech)
    idata = pf.fit(model, random_seed=seed, compute_convergence_checks=False, **SAMPLER)
    return pf.mae(pf.posterior_mean_rates(idata), counts)


def _replicates(aware: str) -> np.ndarray:
    """``(R, 3)``: MAE of naive, of ``aware`` and of naive again (another MCMC seed)."""
    out = np.empty((R, 3))
    for r in range(R):
        rng = np.random.default_rng([20261125, r])
        truth = pf.simulate(ROWS, COLS, K, rng=rng)
        noisy, mech = pf.privatize(truth["counts"], EPSILON, rng=rng)
        y = truth["counts"]
        out[r, 0] = _fit_mae(y, "naive", noisy, mech, seed=r)
        out[r, 1] = _fit_mae(y, aware, noisy, mech, seed=r)
        out[r, 2] = _fit_mae(y, "naive", noisy, mech, seed=1000 + r)
    return out


def _passes(delta) -> tuple[bool, float]:
    """One-sided paired t-test of E[delta] > 0 at LEVEL."""
    delta = np.asarray(delta, dtype=np.float64)
    t = delta.mean() / (delta.std(ddof=1) / np.sqrt(delta.size))
    return bool(t > stats.t.isf(LEVEL, delta.size - 1)), float(t)


def _check(aware: str):
    mae = _replicates(aware)
    ok, t = _passes(mae[:, 0] - mae[:, 1])
    assert ok, f"{aware}: t = {t:.2f}; MAE naive/aware per replicate {mae[:, :2].tolist()}"
    reversed_ok, _ = _passes(mae[:, 1] - mae[:, 0])
    null_ok, t_null = _passes(mae[:, 0] - mae[:, 2])
    assert not reversed_ok, "control: the reversed claim must fail"
    assert not null_ok, f"control: naive vs naive (another seed) must fail, t = {t_null:.2f}"
    print(f"{aware}: t = {t:.2f} (null control t = {t_null:.2f}); mean MAE {mae.mean(axis=0)}")
    return mae, t


@pytest.mark.slow
@pytest.mark.parametrize("aware", ["marginal", "augmented"])
def test_noise_aware_mae_below_naive(aware):
    """Noise-aware (exact marginal under NUTS, or CountAugmentation + NUTS) vs naive."""
    _check(aware)
