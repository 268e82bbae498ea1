"""Issue 24 (part C): ``Geometric(...).noise_dist()`` describes the law actually sampled, also
at the smallest accepted rates.

Before the fix the noise law was ``DiscreteLaplace.dist(alpha)`` with ``alpha`` the double
nearest ``exp(-rate)``: at rate ~1e-15 that double holds ``1 - alpha`` to a few percent only, so
the log pmf (-35.3505 against -35.3373) and the draws' scale (1.0123) were those of another law.
Now it is parameterized by ``log_alpha = -rate``.

References: mpmath at 50 digits with the mechanism's exact rational rate. The statistical test
(KS of ``|X|`` against its exact CDF, 2e6 draws) has false-alarm rate 1e-6
(:data:`pymc_dp.testing.FALSE_ALARM`); its negative control, the law of the rounded ``alpha``
(5% off in scale here), must be rejected by the same test.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pymc as pm
import pytest

from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.testing import assert_gof, assert_rejects, ks_gof

EPSILON = 1.055e-15  # the double nearest exp(-rate) is 5.2% off in 1 - alpha


def _mp_logpmf(k: int, rate) -> float:
    with mp.workdps(50):
        r = mp.mpf(rate.numerator) / mp.mpf(rate.denominator)
        return float(mp.log(mp.tanh(r / 2)) - abs(k) * r)


@pytest.mark.parametrize("epsilon", [EPSILON, 2.0**-50, 1e-9, 0.5, 700.0])
def test_noise_dist_logp_is_that_of_the_sampled_rate(epsilon):
    m = Geometric(epsilon=epsilon)
    ks = np.array([0, 1, -1, 10**6, -(10**15), 10**17], dtype=np.int64)
    got = pm.logp(m.noise_dist(), ks).eval()
    ref = np.array([_mp_logpmf(int(k), m.rate) for k in ks])
    finite = np.isfinite(ref)
    assert np.all(np.isfinite(got) == finite)
    g, f = got[finite], ref[finite]  # relative error where |logp| >= 1, else absolute
    err = np.where(np.abs(f) >= 1.0, np.abs(g - f) / np.maximum(np.abs(f), 1.0), np.abs(g - f))
    assert np.max(err) <= 1e-12, (got, ref)
    if epsilon == EPSILON:  # control: the rounded alpha is off by far more than the tolerance
        rounded = pm.logp(DiscreteLaplace.dist(np.float64(m.alpha)), 0).eval()
        assert abs(rounded / ref[0] - 1.0) > 1e-4


def test_noise_dist_draws_have_the_sampled_scale(rng):
    m = Geometric(epsilon=EPSILON)
    r = float(m.rate)
    n = 2_000_000

    def cdf_abs(x):
        # P(|X| <= k) = 1 - 2 alpha^(k+1) / (1 + alpha) at the exact rate (k = floor(x))
        k = np.floor(x)
        return 1.0 - 2.0 * np.exp(-(k + 1.0) * r) / (1.0 + math.exp(-r))

    seed = int(rng.integers(2**31))
    draws = pm.draw(m.noise_dist(size=n), random_seed=seed)
    assert draws.dtype == np.int64
    assert_gof(ks_gof(np.abs(draws).astype(np.float64), cdf_abs), what="exact-rate law")
    wrong = pm.draw(DiscreteLaplace.dist(np.float64(m.alpha), size=n), random_seed=seed + 1)
    assert_rejects(ks_gof(np.abs(wrong).astype(np.float64), cdf_abs), what="rounded alpha")


def test_log_alpha_parameterization_checks_its_argument():
    with pytest.raises(ValueError, match="alpha or log_alpha"):
        DiscreteLaplace.dist(0.5, log_alpha=-1.0)
    lp = pm.logp(DiscreteLaplace.dist(log_alpha=np.float64(0.5)), 0)
    with pytest.raises(Exception, match="log_alpha < 0"):
        lp.eval()
