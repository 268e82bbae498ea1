"""The direct draw of Poisson true counts given their geometric release
(pymc_dp.kernels.count_posterior) against the exact conditional by brute force.

Reference: P(y | z, mu) ∝ mu^y / y! alpha^|y - z| from scipy (xlogy, gammaln), normalised by
log-sum-exp over a window around the mode whose neglected tail mass is asserted below 1e-15
(log-concavity: past a window end the terms fall at least geometrically with the end's ratio).
This reference is about 1e-9 off at y ~ 1e6 (cancellation in y log mu - lgamma), far below
what 2e5 draws resolve.

Each chi-square assertion (pymc_dp.testing.chisquare_gof, at most 300 pooled bins) has a
false-alarm rate of 1e-6; each case has a negative control that must be rejected at the same
threshold (the pmf at a perturbed alpha, or at a perturbed mu where the law does not depend on
alpha to resolution). Laws that are a point mass to within 1e-12 are checked by asserting
every draw equals it (false-alarm rate N * 1e-12 < 1e-6). The envelope checks are
deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.kernels.count_posterior import (
    MAX_MU,
    NARROW_RATIO,
    SMALL_MODE,
    _envelope,
    _narrow,
    draw_true_counts,
    posterior_mode,
)
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof

N = 200_000


def _log_f(y, z, mu, alpha):
    """``y log mu - log y! + |y - z| log alpha`` (the constant ``-mu`` left out: at
    ``mu = 3e12`` it would cost scipy's Poisson log-pmf 1e-4 of accuracy)."""
    y = np.asarray(y)
    out = special.xlogy(y, mu) - special.gammaln(y + 1.0) + math.log(alpha) * np.abs(y - z)
    return np.where(y < 0, -np.inf, out)


def _window(z, mu, alpha):
    """``(y, log f(y))`` on a window around the mode holding all but 1e-15 of the mass
    (asserted), with ``log f = log Pois(y; mu) + |y - z| log alpha`` unnormalised."""
    m = int(posterior_mode(z, mu, alpha))
    w = int(40 * math.sqrt(m + 1.0) + 60)
    y = np.arange(max(0, m - w), m + w + 1)
    lf = _log_f(y, z, mu, alpha)
    rel = lf - lf.max()
    tail = 0.0
    for end, nxt in ((-1, -2), (0, 1)):
        if end == 0 and y[0] == 0:
            continue
        r = math.exp(rel[end] - rel[nxt])
        assert r < 1.0
        tail += math.exp(rel[end]) * r / (1.0 - r)
    assert tail < 1e-15, tail
    return y, lf


def exact_logpmf(z, mu, alpha):
    """``k -> log P(k | z, mu)`` (vectorised; -inf below 0)."""
    norm = special.logsumexp(_window(z, mu, alpha)[1])

    return lambda k: _log_f(k, z, mu, alpha) - norm


def _gof(y, z, mu, alpha):
    return chisquare_gof(y, exact_logpmf(z, mu, alpha), max_bins=300)


ORDINARY = [
    (3, 4.0, 0.5),
    (7, 3.0, 0.5),
    (-5, 2.0, 0.3),
    (0, 0.5, 0.6),
    (9, 2.0, 0.6),
    (40, 30.0, 0.9),
    (100, 50.0, 0.2),
    (50, 50.5, 0.9),  # mode 50 = SMALL_MODE: the last inversion case
    (0, 73.6, 0.7),  # mode 51, not narrow: the first rejection case
    (15, 14.0, 0.99),
    (400, 3.0, 0.01),
    (400, 300.0, 0.5),  # mode 400 at the kink, ratios 0.37 and 0.67: narrow, inversion
    (160, 150.0, 0.85),  # mode 160, left ratio 0.906: rejection
]


@pytest.mark.parametrize(("z", "mu", "alpha"), ORDINARY)
def test_draws_match_exact_conditional(z, mu, alpha):
    y = draw_true_counts(np.full(N, z), mu, alpha, rng=11)
    assert_gof(_gof(y, z, mu, alpha), what=f"z={z} mu={mu} alpha={alpha}")
    # control: the conditional at another noise level
    wrong = alpha * 1.06 if alpha < 0.9 else alpha - 0.09
    assert_rejects(_gof(y, z, mu, wrong), what="perturbed alpha")


EXTREME = [
    # (z, mu, alpha, control (mu, alpha))
    (10**6, 1e6, 0.9, (1e6, 0.88)),  # huge mu and z, mode at the kink z
    (0, 1e6, 0.5, (1e6, 0.499)),  # huge mu, y ~ Poisson(5e5)
    (-(10**6), 1e6, 0.999, (1e6, 0.9989)),  # huge |z| below 0
    (10**6, 3.0, 0.5, (3.0, 0.55)),  # huge z, small rate: Poisson(6) truncated at 10^6
    (10**6, 5e-7, 1e-12, (5e-7, 1.01e-12)),  # alpha ~ 0: x2 = 5e5, Poisson(x2) below z
    (-7, 3e12, 1e-12, (3e12, 1.05e-12)),  # alpha ~ 0, z < 0: Poisson(3)
    (0, 1e6, 1.0 - 1e-9, (1e6 * 1.002, 1.0 - 1e-9)),  # alpha ~ 1: Poisson(1e6)
    (30, 25.0, 1.0 - 1e-9, (25.0 * 1.03, 1.0 - 1e-9)),  # alpha ~ 1, small mode
    (5 * 10**5, 1e6, 1.0 - 1e-4, (1e6, 1.0 - 2e-4)),  # alpha near 1, a pull of 0.1 sd
    (3, 1e-9, 0.5, (1e-9, 0.55)),  # tiny rate: y = 0 but for 2e-9 of the mass
]


@pytest.mark.parametrize(("z", "mu", "alpha", "control"), EXTREME)
def test_extreme_parameters(z, mu, alpha, control):
    y = draw_true_counts(np.full(N, z), mu, alpha, rng=5)
    assert_gof(_gof(y, z, mu, alpha), what=f"z={z} mu={mu} alpha={alpha}")
    if mu < 1e-6:  # the control differs from the law by far less than N can see
        return
    assert_rejects(_gof(y, z, *control), what=f"control {control}")


@pytest.mark.parametrize(
    ("z", "mu", "alpha", "value"),
    [
        (5, 5.0, 1e-12, 5),  # the kink at z swallows everything: P(y != 5) ~ 1.2e-12
        (10**6, 1e6, 1e-12, 10**6),
        (10**6, 1e15, 1e-300, 10**6),  # mu / alpha overflows: a left slope of -inf
        (-(10**6), 0.0, 0.5, 0),  # mu = 0
        (10**6, 0.0, 1e-12, 0),
        (20, 1e-300, 0.5, 0),
    ],
)
def test_point_masses(z, mu, alpha, value):
    """Laws within 5e-12 of a point mass: every draw is that value (the false-alarm rate,
    N times the mass elsewhere, is asserted below 1e-6)."""
    if mu > 0.0:
        y_win, lf = _window(z, mu, alpha)
        p = np.exp(lf - special.logsumexp(lf))
        assert N * (1.0 - p[y_win == value].sum()) < 1e-6
    y = draw_true_counts(np.full(N, z), mu, alpha, rng=2)
    assert (y == value).all()


def test_per_count_parameters_are_each_counts_own():
    """Interleaved counts with their own (z, mu, alpha), in one call: each group matches its
    own law, and not its neighbour's (control)."""
    groups = [(4, 2.0, 0.5), (30, 1e3, 0.8), (-2, 7.0, 0.9)]
    z, mu, alpha = (np.tile([g[i] for g in groups], N // 3) for i in range(3))
    y = draw_true_counts(z, mu, alpha, rng=8)
    for j, g in enumerate(groups):
        assert_gof(_gof(y[j::3], *g), what=str(g))
    assert_rejects(_gof(y[0::3], 4, 2.0, 0.9), what="group 0 against group 2's alpha")


def test_shape_dtype_seed():
    z = np.array([[3, -1, 7], [0, 1000, 2]])
    a = draw_true_counts(z, np.array([1.0, 50.0, 3.0]), 0.5, rng=np.random.default_rng(4))
    b = draw_true_counts(z, np.array([1.0, 50.0, 3.0]), 0.5, rng=np.random.default_rng(4))
    assert a.shape == (2, 3) and a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    assert draw_true_counts(4, 2.0, 0.5, rng=1).shape == ()
    assert draw_true_counts(np.array([], dtype=np.int64), 2.0, 0.5).shape == (0,)
    # integral floats are accepted as counts
    np.testing.assert_array_equal(draw_true_counts(z.astype(float), 0.0, 0.5), np.zeros((2, 3)))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"z": [1.5]}, "z"),
        ({"z": [np.nan]}, "z"),
        ({"z": ["a"]}, "z"),
        ({"z": [2**51]}, "z"),
        ({"mu": -1.0}, "mu"),
        ({"mu": np.nan}, "mu"),
        ({"mu": np.inf}, "mu"),
        ({"mu": MAX_MU * 2}, "mu"),
        ({"mu": [1.0, 2.0]}, "mu"),  # does not broadcast to z's shape (3,)
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": np.nan}, "alpha"),
        ({"alpha": -0.5}, "alpha"),
        ({"alpha": [0.5, 0.5]}, "alpha"),
    ],
)
def test_validation_names_the_argument(kwargs, name):
    args = {"z": [1, 2, 3], "mu": 2.0, "alpha": 0.5} | kwargs
    with pytest.raises(ValueError, match=f"^{name} "):
        draw_true_counts(args["z"], args["mu"], args["alpha"])


def test_valid_edges_are_accepted():
    """Control of the test above: the edges of the domain are accepted."""
    y = draw_true_counts([2**50, -(2**50), 0], [MAX_MU, 0.0, 1e-300], [1e-12, 1 - 1e-9, 0.5])
    assert y[1] == 0 and y[2] == 0 and y[0] > 0


GRID = [
    (z_of(mu), mu, alpha)
    for mu in (14.0, 50.0, 1e3, 1e5, 1e6)
    for alpha in (1e-12, 0.1, 0.5, 0.9, 0.99, 1 - 1e-9)
    for z_of in (
        lambda mu: -(10**6),
        lambda mu: 0,
        lambda mu: int(mu) - 1,
        lambda mu: int(mu) + 1,
        lambda mu: int(1.05 * mu),
        lambda mu: int(2 * mu),
        lambda mu: 10**6,
    )
    if posterior_mode(z_of(mu), mu, alpha) > 12  # the envelope is also checked below SMALL_MODE
]


def _envelope_check(z, mu, alpha, shrink=1.0):
    """(envelope mass / true mass, max of log f - log envelope) on the exact window."""
    c, right, left = _envelope(z, mu, alpha)
    m = int(c[0])
    y, lf = _window(z, mu, alpha)
    lf = lf - lf[y == m][0]  # log f(y) - log f(m), by scipy
    tr, dr, sr, mr = right
    tl, dl, sl, ml = left
    log_env = np.where(y >= tr, dr + (y - tr) * sr, np.where(y <= tl, dl + (tl - y) * sl, 0.0))
    excess = float(np.max(lf - (log_env + math.log(shrink))))
    ratio = ((tr - tl - 1.0) + mr + ml) / math.exp(special.logsumexp(lf))
    return ratio, excess


def test_rejection_envelope_dominates_and_is_tight():
    """The envelope is >= f everywhere on the exact window (to scipy's 1e-9 accuracy) and its
    mass is at most 1.6 times f's (expected trials per draw) over a grid of parameter sets
    with modes > 12 (the rejection path takes modes > SMALL_MODE): mu from 14 to 1e6, alpha
    from 1e-12 to 1 - 1e-9, z below, at, above and far from the rate."""
    assert len(GRID) > 150
    worst = max(_envelope_check(*case) for case in GRID)
    excess = max(_envelope_check(*case)[1] for case in GRID)
    assert worst[0] <= 1.6, worst
    assert excess <= 1e-6, excess
    # control: the envelope scaled by 0.9 no longer dominates f
    assert max(_envelope_check(*case, shrink=0.9)[1] for case in GRID[:20]) > 0.05


def test_mode_is_the_argmax():
    rng = np.random.default_rng(0)
    for _ in range(300):
        mu = float(np.exp(rng.uniform(-5, 8)))
        alpha = float(rng.uniform(0.01, 0.99))
        z = int(rng.integers(-20, 3 * mu + 20))
        y = np.arange(0, int(10 * mu / alpha) + 200)
        lf = stats.poisson.logpmf(y, mu) + math.log(alpha) * np.abs(y - z)
        m = int(posterior_mode(z, mu, alpha))
        assert lf[m] >= lf.max() - 1e-9 * abs(lf.max()), (z, mu, alpha, m, int(np.argmax(lf)))


def test_both_paths_are_tested():
    """The chi-square cases straddle the switches from inversion to rejection."""
    assert posterior_mode(50, 50.5, 0.9) == SMALL_MODE
    assert posterior_mode(0, 73.6, 0.7) == SMALL_MODE + 1
    assert not _narrow(51, (0.0, 73.6 * 0.7, 73.6 / 0.7))
    assert _narrow(400, (400.0, 150.0, 600.0))
    assert not _narrow(160, (160.0, 150 * 0.85, 150 / 0.85))
    assert 160 / (150 / 0.85) > NARROW_RATIO > 127.5 / 161
    for case in [(0, 73.6, 0.7), (50, 50.5, 0.9), (400, 300.0, 0.5), (160, 150.0, 0.85)]:
        assert case in ORDINARY


@pytest.mark.slow
def test_random_parameters_fuzz():
    """120 random (z, mu, alpha): mu log-uniform on [1e-3, 1e6], alpha logit-uniform on
    (1e-6, 1 - 1e-6), z around, below and far from the rate; 5e4 draws each. Bonferroni: each
    p-value > 1e-6 / 120 (family-wise rate 1e-6). Control: against mu * 1.05 with the same
    threshold, the test rejects in at least a third of the cases (56 of 120 measured; the
    others are near point masses or tiny rates, where 5% of mu is invisible)."""
    rng = np.random.default_rng(2024)
    cases, rejected = 120, 0
    for _ in range(cases):
        mu = float(10 ** rng.uniform(-3, 6))
        alpha = float(special.expit(rng.uniform(-13.8, 13.8)))
        z = int(np.round(mu * np.exp(rng.normal(0, 1)) + rng.normal(0, 3 + 2 * math.sqrt(mu))))
        y = draw_true_counts(np.full(50_000, z), mu, alpha, rng=rng)
        assert_gof(_gof(y, z, mu, alpha), alpha=1e-6 / cases, what=f"z={z} mu={mu} a={alpha}")
        rejected += _gof(y, z, mu * 1.05, alpha) < 1e-6 / cases
    assert rejected >= cases // 3, rejected
