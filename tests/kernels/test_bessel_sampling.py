"""Exactness of the samplers inside the augmentation sweep, against exact laws.

* Bessel (:func:`pymc_dp.kernels.bessel_sampling.bessel_draw_bitgen`): inversion from 0 with
  the normaliser bracketed, or mode-centred rejection beyond ``INVERSION_MODE_MAX``; chi-square
  against the log-pmf ``bessel_logpmf`` (itself within 1e-12 of 50-digit mpmath,
  tests/distributions/test_bessel.py) in each regime: the one-step exit at n = 0, the first
  ratio just below and just above 1, the candidate lagging the lookahead, real and huge orders,
  and both sides of the switch point.
* Binomial (``count_augmentation._binomial_draw``): inversion with ``q^n`` by squaring for
  ``n <= 64``, numba's numpy algorithms beyond; chi-square against ``scipy.stats.binom`` on
  both sides of the switch and of ``p = 1/2``.
* Gamma(1 + g) (``count_augmentation._gamma_int_draw``): a sum of ``1 + g`` exponentials for
  ``g <= _GAMMA_SUM_MAX``, Marsaglia-Tsang beyond; KS against ``scipy.stats.gamma``.

Every assertion has a false-alarm rate of 1e-6 (p-value threshold). Each case has a negative
control that must be rejected at the same threshold: the exact law at a perturbed argument (the
Bessel ``x = a^2/4``, the binomial's smaller probability, the Gamma scale). The perturbation is
the smallest listed factor whose expected chi-square noncentrality is >= 300 (for KS: whose
exact sup-distance is >= 2x the 1e-6 critical value), asserted, so each control has power
(with <= 60 pooled bins the 1e-6 critical value is below 120; a noncentral statistic with
noncentrality 300 exceeds it by more than 5 standard deviations).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels import count_augmentation as ca
from pymc_dp.kernels.bessel_sampling import (
    INVERSION_MODE_MAX,
    bessel_logpmf,
    bessel_mode,
    sample_bessel,
)
from pymc_dp.testing import chisquare_gof, ks_gof

RATE = 1e-6
N = 100_000
FACTORS = (1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0)
M1 = INVERSION_MODE_MAX + 1.0


def _noncentrality(p, q, n):
    """Expected chi-square noncentrality ``n sum (p - q)^2 / q`` of draws from ``p`` tested
    against ``q``, over the values where ``n q >= 5``."""
    keep = n * q >= 5.0
    return n * float(np.sum((p[keep] - q[keep]) ** 2 / q[keep]))


def _control_factor(pmf_at, support, n=N):
    """Smallest factor c in FACTORS with noncentrality(pmf_at(1), pmf_at(c)) >= 300."""
    p = pmf_at(1.0)(support)
    for c in FACTORS:
        if _noncentrality(p, pmf_at(c)(support), n) >= 300.0:
            return c
    raise AssertionError("no listed perturbation gives the control power")


# ---- Bessel ----------------------------------------------------------------------------------
def _regime(nu, x):
    return "inversion" if x < M1 * (M1 + nu) else "rejection"


BESSEL_CASES = [
    # (nu, x = a^2 / 4, regime, what)
    (0.0, 1e-3, "inversion", "tiny x: the one-step exit at n = 0"),
    (6.0, 0.5, "inversion", "sparse-like: mode 0"),
    (2.0, 2.9, "inversion", "first ratio x/(1+nu) just below 1"),
    (2.0, 3.1, "inversion", "first ratio just above 1: no exit at n = 0"),
    (0.0, 12.25, "inversion", "mode 3: candidate lags the lookahead"),
    (7.0, 6.0, "inversion", "dense-like"),
    (0.5, 4.0, "inversion", "real order"),
    (1e4, 225.0, "inversion", "large order, small x"),
    (1e6, 0.999 * M1 * (M1 + 1e6), "inversion", "huge order at the switch"),
    (0.0, M1 * M1 * (1.0 - 1e-9), "inversion", "just below the switch, nu = 0"),
    (0.0, M1 * M1 * (1.0 + 1e-9), "rejection", "just above the switch, nu = 0"),
    (10.0, M1 * (M1 + 10.0) * (1.0 - 1e-9), "inversion", "just below the switch, nu = 10"),
    (10.0, M1 * (M1 + 10.0) * (1.0 + 1e-9), "rejection", "just above the switch, nu = 10"),
    (3.0, 2.5e5, "rejection", "large mode"),
]


def _bessel_support(nu, x):
    a = 2.0 * math.sqrt(x)
    m = bessel_mode(nu, a)
    sd = 1.0 / math.sqrt(1.0 / (m + 1.0) + 1.0 / (m + nu + 1.0))
    return np.arange(max(0, int(m - 40 * sd - 20)), int(m + 40 * sd + 20))


def _bessel_pmf_at(nu, x):
    return lambda c: lambda k: np.exp(bessel_logpmf(k, nu, 2.0 * math.sqrt(c * x)))


@pytest.mark.parametrize(
    ("nu", "x", "regime", "what"), BESSEL_CASES, ids=[c[3] for c in BESSEL_CASES]
)
def test_bessel_draws_match_pmf(nu, x, regime, what, rng):
    assert _regime(nu, x) == regime
    a = 2.0 * math.sqrt(x)
    draws = sample_bessel(nu, a, rng=rng, size=N)
    assert chisquare_gof(draws, lambda k: bessel_logpmf(k, nu, a)) > RATE
    c = _control_factor(_bessel_pmf_at(nu, x), _bessel_support(nu, x))
    assert chisquare_gof(draws, lambda k: bessel_logpmf(k, nu, 2.0 * math.sqrt(c * x))) < RATE


def test_bessel_degenerate_arguments(rng):
    """x = 0 is the point mass at 0; x = 1e-300 leaves P(1) ~ 1e-300 (all draws 0)."""
    assert np.all(sample_bessel(4.0, 0.0, rng=rng, size=1000) == 0)
    assert np.all(sample_bessel(0.0, 2e-150, rng=rng, size=1000) == 0)


# ---- binomial ---------------------------------------------------------------------------------
@numba.njit
def _binomial_draws(rng, n, p, size):
    bitgen = rng.bit_generator
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        out[i] = ca._binomial_draw(bitgen, n, p, 1.0 - p)
    return out


BINOMIAL_CASES = [
    (1, 0.3),
    (3, 0.5),  # p = q: no flip
    (8, 0.815),  # flipped (dense-like)
    (7, 0.984),  # flipped, mostly the first-step exit
    (30, 0.4),
    (64, 0.18),  # n = _BINV_N_MAX: inversion
    (64, 0.82),  # the same flipped
    (64, 0.5),  # the longest inversion (mean 32)
    (65, 0.05),  # n > _BINV_N_MAX: numba's inversion
    (300, 0.5),  # numba's BTPE
]
N_INVERSION_CASES = 8


def _binomial_pmf_at(n, p):
    def at(c):
        pp = min(p, 1.0 - p) * c
        return lambda k: stats.binom.pmf(k, n, pp if p <= 0.5 else 1.0 - pp)

    return at


@pytest.mark.parametrize(("n", "p"), BINOMIAL_CASES)
def test_binomial_draws_match_pmf(n, p, rng):
    # the regime each case is meant to hit
    assert (n <= ca._BINV_N_MAX) == ((n, p) in BINOMIAL_CASES[:N_INVERSION_CASES])
    draws = _binomial_draws(rng, n, p, N)
    assert chisquare_gof(draws, lambda k: stats.binom.logpmf(k, n, p)) > RATE
    c = _control_factor(_binomial_pmf_at(n, p), np.arange(n + 1))
    bad = _binomial_pmf_at(n, p)(c)
    assert chisquare_gof(draws, lambda k: np.log(bad(k))) < RATE


# ---- Gamma(1 + g) -----------------------------------------------------------------------------
@numba.njit
def _gamma_draws(rng, g, scale, size):
    bitgen = rng.bit_generator
    out = np.empty(size)
    for i in range(size):
        out[i] = ca._gamma_int_draw(bitgen, g, scale)
    return out


@pytest.mark.parametrize("g", [0, 1, ca._GAMMA_SUM_MAX, ca._GAMMA_SUM_MAX + 1, 6, 40])
def test_gamma_draws_match_cdf(g, rng):
    scale = 0.6
    draws = _gamma_draws(rng, g, scale, N)
    assert ks_gof(draws, stats.gamma(1.0 + g, scale=scale).cdf) > RATE
    # control: scale x 1.05, whose exact KS distance is >= 2x the 1e-6 critical value
    grid = np.linspace(0.0, stats.gamma(1.0 + g, scale=scale).ppf(1 - 1e-9), 20_001)
    dist = np.max(np.abs(stats.gamma.cdf(grid, 1.0 + g, scale=scale * 1.05)
                         - stats.gamma.cdf(grid, 1.0 + g, scale=scale)))  # fmt: skip
    assert dist >= 2.0 * math.sqrt(math.log(2.0 / RATE) / (2.0 * N))
    assert ks_gof(draws, stats.gamma(1.0 + g, scale=scale * 1.05).cdf) < RATE
