"""Slow tier: simulation-based calibration (Talts et al. 2018) of the DataAugmentation sampler.

Model: p ~ Beta(1, 1), x_i ~ Bernoulli(p) (n = 50), z = sum x + Laplace(b = 2) (epsilon = 0.5).
For each of R replicates: draw p0 from the prior, simulate x, release z with the library's own
mechanism, run DataAugmentation (records) + ConjugateGibbs (p) and rank p0 among L thinned
posterior draws. Ranks must be uniform (chi-square, p > 1e-3) and the central 90% interval
must cover p0 in a fraction inside its Clopper-Pearson band (1e-6). Negative control: the
noise-ignoring posterior Beta(1 + z, 1 + n - z) (z clipped to [0, n]) must fail the uniformity
test.

The model is compiled once; each replicate writes its release into the step (``z`` is read when
the step is built) and calls the steps directly.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.conjugate import ConjugateGibbs
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.testing import clopper_pearson

N, EPS, R, L, THIN, BURN = 50, 0.5, 600, 99, 4, 200


def _ranks_uniform_pvalue(ranks, n_ranks, bins=20):
    counts = np.bincount(np.asarray(ranks) * bins // n_ranks, minlength=bins)
    return stats.chisquare(counts).pvalue


@pytest.mark.slow
def test_sbc_bernoulli_count_release():
    rng = np.random.default_rng(20261122)
    mech = Laplace(epsilon=EPS, sensitivity=1.0)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N)
        Release("z", x.sum(), mech, observed=0.0)
        da = DataAugmentation([x], rng=1)
        cg = ConjugateGibbs([p], rng=2)
    block = da._blocks[0]
    ranks, covered, ranks_naive = [], 0, []
    for _ in range(R):
        p0 = rng.beta(1.0, 1.0)
        x0 = rng.binomial(1, p0, size=N)
        z = float(mech.release(float(x0.sum()), rng=rng, allow_float=True))
        block.z[:] = z
        da.setup_chain(np.random.default_rng(rng.integers(2**63)), 0, 1)
        cg.setup_chain(np.random.default_rng(rng.integers(2**63)), 0, 1)
        point = model.initial_point()
        draws = []
        for it in range(BURN + L * THIN):
            point, _ = da.step(point)
            point, _ = cg.step(point)
            if it >= BURN and (it - BURN) % THIN == 0:
                draws.append(1.0 / (1.0 + np.exp(-point["p_logodds__"])))
        draws = np.asarray(draws, dtype=float).ravel()
        ranks.append(int(np.sum(draws < p0)))
        lo, hi = np.quantile(draws, [0.05, 0.95])
        covered += int(lo <= p0 <= hi)
        zc = min(max(z, 0.0), N)
        naive = rng.beta(1.0 + zc, 1.0 + N - zc, size=L)
        ranks_naive.append(int(np.sum(naive < p0)))
    p_da = _ranks_uniform_pvalue(ranks, L + 1)
    p_naive = _ranks_uniform_pvalue(ranks_naive, L + 1)
    lo, hi = clopper_pearson(covered, R)
    print(f"SBC: rank chi2 p = {p_da:.3g}, coverage = {covered / R:.3f}; naive p = {p_naive:.3g}")
    assert p_da > 1e-3
    assert lo <= 0.90 <= hi
    # negative control: ignoring the noise is miscalibrated
    assert p_naive < 1e-3
