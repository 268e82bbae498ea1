"""Exact samplers of a collapsed released statistic (issue 12): pymc_dp.kernels.collapsed_stat.

* Exact (no randomness): the window sampler's inverse CDF against full enumeration of
  ``pi(S) ∝ f_S(S) prod_k eta_k(z_k - a_k - b_k S)`` with scipy's Binomial / Poisson log-pmf and
  each mechanism's own numpy ``logpdf`` / ``logcdf`` (the whole support, or 0..2000 for a
  Poisson of mean <= 40): at every window point ``k``, ``u = F(k) - 1e-12`` gives ``S <= k`` and
  ``u = F(k) + 1e-12`` gives ``S > k`` (the CDFs agree to 1e-12), and the enumerated mass
  outside the window is at most 1e-14 of the mass inside (plus 1e-15 for rounding).
* Extreme inputs (theta at 1e-300, 1 - 1e-16, 0, 1; z 1e9 away; b = 0, b < 0; m = 2, 3;
  n = 1e12; impossible releases): finite draws in the support, the documented codes.
* Statistical, false-alarm rate 1e-6 per assertion (``pymc_dp.testing.FALSE_ALARM``):
  chi-square of 1e5 draws against the enumerated pmf; Gibbs sweeps over Multinomial counts
  (K = 3, N = 6) against the exact law after t sweeps from a start law, computed from the exact
  one-sweep transition matrix (built from the reference conditional, not from the kernel);
  KS of Normal-sum draws against a quadrature CDF. Each has a negative control (``b`` halved,
  the count matrix halved, the Laplace scale x 1.3) that the same test must reject.
  Margins of the controls (measured): chi-square p-values 0.0 (b halved, 20000 draws); the
  Gibbs control's exact noncentrality is 2270 on 27 degrees of freedom (1e-6 critical value
  about 70); the KS control's distance is 0.075 against a 1e-6 critical value of 0.0085.
* Marginal laws (parameter integrated out): the same exact enumeration checks, chi-square and
  extremes for the beta-binomial (family 2) and negative binomial (family 3) against scipy's
  ``betabinom`` / ``nbinom`` (40-digit log-gamma at n = 1e12 and alpha = 1e8); the
  Dirichlet-multinomial pair sweep against its exact sweep matrix (K = 3, N = 6); the -2 codes
  where log-concavity fails (alpha, beta or r below 1). Margins of their controls (measured):
  chi-square p-values 0.0 (b halved, 20000 draws; the correct draws gave 0.68 and 0.82); the
  Dirichlet control (the Multinomial pair sweep with p = alpha / sum(alpha)) has exact
  noncentrality 2807 on 27 degrees of freedom at 5000 chains (1e-6 critical value 77).
"""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from pymc_dp.kernels.collapsed_stat import (
    BETA_BINOMIAL,
    NEG_BINOMIAL,
    count_log_marginal,
    count_sampler,
    counts_gibbs_sampler,
    marginal_count_sampler,
    marginal_counts_gibbs_sampler,
    sample_normal_sum,
)
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, ks_gof

LAP = Laplace(scale=2.0)
GEO = Geometric(epsilon=0.7)
DG = DiscreteGaussian(sigma=3.0)
GAU = Gaussian(sigma=4.0)
POISSON_GRID = 2001  # enumeration 0..2000 for Poisson means <= 40 (tail beyond < 1e-300)


def _kernel(mech, side):
    """``(numba logpdf, numpy logpdf, params row)``; ``side`` -1 / +1 is a release censored at
    its lower / upper bound (log CDF / log SF), ``None`` an interior one."""
    if side is None:
        return mech.numba_logpdf, mech.logpdf, mech.numba_params
    row = np.concatenate([[float(side)], mech.numba_params])
    return mech.numba_censored_logpdf, (mech.logcdf if side < 0 else mech.logsf), row


def _arrays(a, b, z, row):
    a, b, z = (np.atleast_1d(np.asarray(v, np.float64)) for v in (a, b, z))
    params = np.ascontiguousarray(np.repeat(row[None, :], z.size, axis=0))
    return a, b, z, params


def _ref_logw(case):
    """Enumerated log weights over the support (or 0..2000) and the support grid."""
    mech, side, family, n, theta, a, b, z = case
    grid = np.arange(n + 1) if family == 0 else np.arange(POISSON_GRID)
    base = stats.binom.logpmf(grid, n, theta) if family == 0 else stats.poisson.logpmf(grid, theta)
    np_logpdf = _kernel(mech, side)[1]
    a, b, z, _ = _arrays(a, b, z, np.zeros(1))
    noise = sum(np_logpdf((z[k] - a[k]) - b[k] * grid.astype(float)) for k in range(z.size))
    return grid, base + noise


def _draw(case, u):
    mech, side, family, n, theta, a, b, z = case
    nb, _, row = _kernel(mech, side)
    f = count_sampler(nb)
    return f(family, n, theta, *_arrays(a, b, z, row), u)


CASES = {
    "laplace-binom": (LAP, None, 0, 200, 0.3, 0.0, 1.0, 80.0),
    "laplace-binom-m3-bneg": (
        LAP,
        None,
        0,
        60,
        0.6,
        [1.0, 0.0, 5.0],
        [1.0, -1.0, 2.0],
        [40.0, -30.0, 90.0],
    ),
    "geometric-poisson-m2": (GEO, None, 1, 0, 25.0, [0.0, 3.0], [1.0, 1.0], [31.0, 36.0]),
    "dgauss-binom": (DG, None, 0, 500, 0.01, 2.0, 3.0, 30.0),
    "gauss-poisson-b0": (GAU, None, 1, 0, 40.0, 0.0, 0.0, 7.0),
    "gauss-censored-binom": (GAU, -1, 0, 100, 0.5, 0.0, 1.0, 40.0),
    "gauss-censored-upper-poisson-bneg": (GAU, 1, 1, 0, 30.0, 50.0, -1.0, 28.0),
    "laplace-binom-far": (LAP, None, 0, 50, 0.5, 0.0, 1.0, 1e4),
}


@pytest.mark.parametrize("name", list(CASES))
def test_window_inverse_cdf_matches_enumeration(name):
    """The sampler's CDF equals the enumerated CDF to 1e-12 at every window point, and the
    enumerated mass outside the window is at most 1e-14 of the window mass (exact check)."""
    case = CASES[name]
    grid, logw = _ref_logw(case)
    pmf = np.exp(logw - special.logsumexp(logw))
    cdf = np.cumsum(pmf)
    lo, width = _draw(case, 5e-324)
    hi = lo + width - 1
    assert 0 <= lo <= hi <= grid[-1]
    inside = pmf[lo : hi + 1].sum()
    assert (pmf[:lo].sum() + pmf[hi + 1 :].sum()) <= 1e-14 * inside + 1e-15
    for k in range(lo, hi + 1):
        if 1e-12 < cdf[k] - 1e-12 < 1.0:
            assert _draw(case, cdf[k] - 1e-12)[0] <= k
        if cdf[k] + 1e-12 < 1.0:
            assert _draw(case, cdf[k] + 1e-12)[0] > k


def test_window_negative_control_detected():
    """The exact check above rejects a wrong law (b halved): some CDF point disagrees."""
    mech, side, family, n, theta, a, b, z = CASES["laplace-binom"]
    _, logw = _ref_logw(CASES["laplace-binom"])
    cdf = np.cumsum(np.exp(logw - special.logsumexp(logw)))
    wrong = (mech, side, family, n, theta, a, b / 2, z)
    bad = [k for k in range(60, 120) if _draw(wrong, min(cdf[k] + 1e-12, 0.999))[0] <= k]
    assert len(bad) > 0


@pytest.mark.parametrize("name", ["laplace-binom", "geometric-poisson-m2"])
def test_count_sampler_chisquare(name):
    """1e5 draws against the enumerated pmf: chi-square, false-alarm rate 1e-6; the same test
    rejects draws made with ``b`` halved (negative control)."""
    case = CASES[name]
    grid, logw = _ref_logw(case)
    logpmf = logw - special.logsumexp(logw)

    def ref(k):
        out = np.full(k.shape, -np.inf)
        ok = (k >= 0) & (k < grid.size)
        out[ok] = logpmf[k[ok]]
        return out

    us = np.random.default_rng(12).random(100_000)
    draws = np.array([_draw(case, u)[0] for u in us])
    assert_gof(chisquare_gof(draws, ref), what=name)
    mech, side, family, n, theta, a, b, z = case
    wrong = (mech, side, family, n, theta, a, np.asarray(b) / 2, z)
    bad = np.array([_draw(wrong, u)[0] for u in us[:20_000]])
    assert_rejects(chisquare_gof(bad, ref), what=f"{name}, b halved")


# ---------------------------------------------------------------- extremes


def _extreme(mech, args, u=0.37):
    family, n, theta, a, b, z = args
    return _draw((mech, None, family, n, theta, a, b, z), u)


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ((0, 10**12, 1e-300, 0.0, 1.0, 1e9), (0, 3)),
        ((0, 10**12, 1.0 - 1e-16, 0.0, 1.0, -1e9), (10**12 - 6, 10**12)),
        ((0, 10, 0.0, 0.0, 1.0, 3.0), (0, 0)),
        ((0, 10, 1.0, 0.0, 1.0, 3.0), (10, 10)),
        ((1, 0, 0.0, 0.0, 1.0, 3.0), (0, 0)),
        ((1, 0, 1e-300, 0.0, 1.0, 1e9), (0, 2)),
        ((1, 0, 3.0, 0.0, -1.0, -1e9), (0, 40)),
        ((0, 10**12, 0.5, 0.0, 1.0, 5e11 + 1e9), (5e11, 5e11 + 1e9 + 100)),
        ((0, 10**12, 0.5, [0.0, 1.0], [1.0, -2.0], [5e11 + 7, -1e12 + 1]), (5e11 - 30, 5e11 + 30)),
        ((1, 0, 1e12, 0.0, 1.0, 1e12 - 5e6), (1e12 - 5e6 - 100, 1e12)),
    ],
)
def test_extremes_finite_in_support(args, expect):
    """Extreme parameters: the draw is in its documented range and the window is small."""
    for u in (1e-300, 0.37, 1.0 - 2**-53):
        s, width = _extreme(GEO, args, u)
        assert expect[0] <= s <= expect[1]
        assert 1 <= width <= 200


def test_n_1e12_exact_near_mode():
    """n = 1e12, Laplace noise: the window CDF against scipy's Binomial logpmf on the window
    (40-digit log-gamma; the tail beyond it is below 1e-14), to 1e-12."""
    case = (LAP, None, 0, 10**12, 0.5, 0.0, 1.0, 5e11 + 40.0)
    lo, width = _draw(case, 5e-324)
    assert width < 500  # set by the noise, not by n
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    k = np.arange(lo, lo + width)
    # scipy's binom.logpmf is off by ~4e-3 in log at n = 1e12: 40-digit log-gamma instead
    half = mp.log(mp.mpf(1) / 2) * 10**12
    lf = [
        mp.loggamma(10**12 + 1) - mp.loggamma(int(j) + 1) - mp.loggamma(10**12 - int(j) + 1) + half
        for j in k
    ]
    logw = np.array([float(v - lf[0]) for v in lf]) + LAP.logpdf(5e11 + 40.0 - k)
    cdf = np.cumsum(np.exp(logw - special.logsumexp(logw)))
    for j in range(width - 1):
        if 1e-12 < cdf[j] - 1e-12 and cdf[j] + 1e-12 < 1.0:
            assert _draw(case, cdf[j] - 1e-12)[0] <= k[j] < _draw(case, cdf[j] + 1e-12)[0]


def test_b_zero_is_the_prior_and_wide_windows_terminate():
    """b = 0: S follows f_S (window of a Binomial(1e12, 1/2) ~ 8.5e6 counts, finite work)."""
    s, width = _extreme(LAP, (0, 10**12, 0.5, 0.0, 0.0, 3.0), 0.5)
    assert abs(s - 5e11) <= 2 and 8e6 < width < 9e6


def test_impossible_and_invalid_codes():
    """-1: the release has zero likelihood for every S (geometric noise at a non-integer);
    -2: invalid parameters."""
    assert _extreme(GEO, (0, 10, 0.3, 0.0, 1.0, 0.5))[0] == -1
    assert _extreme(GEO, (0, 10, 0.3, 0.0, 0.0, 0.5))[0] == -1
    assert _extreme(GEO, (0, 10, 0.0, 0.0, 1.0, 0.5))[0] == -1
    assert _extreme(GEO, (1, 0, 2.0, 0.0, 1.0, 0.5))[0] == -1
    assert _extreme(GEO, (0, 10, math.nan, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (0, 10, 1.5, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (1, 0, -1.0, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (2, 0, 1.0, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (1, 0, 1e300, 0.0, 1.0, 3.0))[0] == -2


# ---------------------------------------------------------------- Multinomial Gibbs

K3, N6 = 3, 6
P3 = np.array([0.5, 0.3, 0.2])
M3 = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0]])
C3 = np.array([0.5, -1.0])
Z3 = np.array([4.0, 1.0])
STATES = [c for c in itertools.product(range(N6 + 1), repeat=K3) if sum(c) == N6]
INDEX = {c: i for i, c in enumerate(STATES)}


def _multinomial(c):
    return stats.multinomial.logpmf(c, N6, P3)


def _gibbs_target(m, prior=_multinomial):
    """Exact ``pi`` over the 28 states (``prior`` x Laplace noise of ``C + m @ c``)."""
    c = np.array(STATES, float)
    logw = prior(c)
    logw = logw + LAP.logpdf(Z3[None, :] - C3[None, :] - c @ m.T).sum(axis=1)
    return np.exp(logw - special.logsumexp(logw))


def _sweep_matrix(pi):
    """Exact one-sweep transition matrix: for j in order, partner k uniform among the others,
    (c_j, c_k) redrawn from pi restricted to the fibre (others fixed, c_j + c_k fixed)."""
    size = len(STATES)
    total = np.eye(size)
    for j in range(K3):
        step = np.zeros((size, size))
        for k in (x for x in range(K3) if x != j):
            for i, c in enumerate(STATES):
                fibre = [
                    INDEX[d]
                    for d in STATES
                    if all(d[x] == c[x] for x in range(K3) if x not in (j, k))
                ]
                step[i, fibre] += pi[fibre] / pi[fibre].sum() / (K3 - 1)
        total = total @ step
    return total


def _run_chains(starts, sweeps, m, seed, law=(counts_gibbs_sampler, P3)):
    """Final states of independent chains; ``law = (sampler factory, p or alpha)``."""
    factory, weights = law
    g = factory(LAP.numba_logpdf)
    params = np.repeat(LAP.numba_params[None, :], 2, axis=0)
    rng = np.random.default_rng(seed)
    out = np.empty(len(starts), np.int64)
    for i, s in enumerate(starts):
        counts = np.array(STATES[s], np.int64)
        for _ in range(sweeps):
            assert g(counts, weights, C3, m, Z3, params, rng.random(2 * K3)) > 0
        assert counts.sum() == N6
        out[i] = INDEX[tuple(counts)]
    return out


def _law(p):
    logp = np.log(np.maximum(p, 1e-300))

    def ref(k):
        return np.where((k >= 0) & (k < len(p)), logp[np.clip(k, 0, len(p) - 1)], -np.inf)

    return ref


def test_gibbs_sweep_matrix_reference():
    """The reference matrix is stochastic, leaves pi invariant and is irreducible (P^2 > 0)."""
    pi = _gibbs_target(M3)
    P = _sweep_matrix(pi)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(pi @ P, pi, rtol=0, atol=1e-13)
    assert np.all(np.linalg.matrix_power(P, 2) > 0)


def test_gibbs_invariance_and_from_corner():
    """20000 independent chains: started from pi, after one sweep they follow pi; started at the
    corner (6, 0, 0), after two sweeps they follow row (6,0,0) of P^2 (chi-square, false-alarm
    rate 1e-6 each). Negative control: the sweep with the count matrix halved is rejected."""
    pi = _gibbs_target(M3)
    P2 = np.linalg.matrix_power(_sweep_matrix(pi), 2)
    rng = np.random.default_rng(5)
    starts = rng.choice(len(STATES), size=20_000, p=pi)
    assert_gof(chisquare_gof(_run_chains(starts, 1, M3, 1), _law(pi)), what="invariance")
    corner = np.full(20_000, INDEX[(6, 0, 0)])
    law2 = P2[INDEX[(6, 0, 0)]]
    assert_gof(chisquare_gof(_run_chains(corner, 2, M3, 2), _law(law2)), what="corner")
    bad = _run_chains(corner[:5000], 2, M3 / 2, 3)
    assert_rejects(chisquare_gof(bad, _law(law2)), what="M halved")


# ---------------------------------------------------------------- Normal sums


def _quad_cdf(mean, var, release, scale):
    """CDF of ``N(mean, var) x exp(-|z - a - bS|/scale)`` by quadrature on a fine grid."""
    a, b, z = release
    sd = math.sqrt(var)
    kink = (z - a) / b
    lo, hi = min(mean, kink) - 40 * sd, max(mean, kink) + 40 * sd
    x = np.union1d(np.linspace(lo, hi, 400_001), [kink])
    logd = stats.norm.logpdf(x, mean, sd) + stats.laplace.logpdf(z - a - b * x, scale=scale)
    d = np.exp(logd - logd.max())
    c = integrate.cumulative_trapezoid(d, x, initial=0.0)
    return lambda s: np.interp(s, x, c / c[-1])


def test_normal_sum_laplace_cdf_and_ks():
    """Laplace noise: F(draw(u)) = u to 1e-7 (quadrature CDF, at 99 quantiles); 1e5 draws pass
    KS (false-alarm rate 1e-6); draws with the scale x 1.3 are rejected (negative control)."""
    mean, var, release, scale = 2.0, 9.0, (1.0, -2.0, -9.0), 1.5
    cdf = _quad_cdf(mean, var, release, scale)
    qs = np.linspace(0.01, 0.99, 99)
    s = sample_normal_sum(mean, var, *release, ("laplace", scale), qs)
    np.testing.assert_allclose(cdf(s), qs, rtol=0, atol=1e-7)
    u = np.random.default_rng(7).random(100_000)
    assert_gof(ks_gof(sample_normal_sum(mean, var, *release, ("laplace", scale), u), cdf))
    bad = sample_normal_sum(mean, var, *release, ("laplace", 1.3 * scale), u)
    assert_rejects(ks_gof(bad, cdf), what="scale x 1.3")


def test_normal_sum_gaussian_closed_form():
    """Gaussian noise, m = 2: quantiles equal the normalised product by quadrature to 1e-9."""
    mean, var = -1.0, 4.0
    a, b, z, sd = np.array([0.0, 2.0]), np.array([1.0, -3.0]), np.array([1.5, 5.0]), [1.0, 2.0]
    qs = np.linspace(0.05, 0.95, 19)
    s = sample_normal_sum(mean, var, a, b, z, ("gaussian", sd), qs)

    def dens(x):
        return stats.norm.pdf(x, mean, 2.0) * np.prod(
            [stats.norm.pdf(z[k] - a[k] - b[k] * x, 0.0, sd[k]) for k in range(2)], axis=0
        )

    norm = integrate.quad(dens, -30, 30, epsabs=0, epsrel=1e-13, limit=200)[0]
    got = [integrate.quad(dens, -30, x, epsabs=0, epsrel=1e-13, limit=200)[0] / norm for x in s]
    np.testing.assert_allclose(got, qs, rtol=0, atol=1e-9)


def test_normal_sum_extreme_release():
    """A release 1e6 sd away: the Laplace tilt is exact, S ~ N(mean +- var/scale, var)."""
    qs = np.array([1e-12, 0.3, 0.5, 0.9, 1 - 1e-12])
    right = sample_normal_sum(0.0, 1.0, 0.0, 1.0, 1e6, ("laplace", 1.0), qs)
    left = sample_normal_sum(0.0, 1.0, 0.0, 1.0, -1e6, ("laplace", 1.0), qs)
    np.testing.assert_allclose(right, 1.0 + special.ndtri(qs), rtol=0, atol=1e-9)
    np.testing.assert_allclose(left, -1.0 + special.ndtri(qs), rtol=0, atol=1e-9)
    assert np.all(np.isfinite(sample_normal_sum(0.0, 1.0, 0.0, 1e-3, 1e12, ("laplace", 1e-9), qs)))


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"noise": ("cauchy", 1.0)}, "noise"),
        ({"noise": ("gaussian", -1.0)}, "noise"),
        ({"noise": ("laplace", 1.0), "z": [1.0, 2.0]}, "laplace"),
        ({"var": -1.0}, "var"),
        ({"mean": math.nan}, "mean"),
        ({"u": 1.0}, "u"),
        ({"a": [0.0, 1.0], "z": [1.0, 2.0, 3.0]}, "a"),
    ],
)
def test_normal_sum_rejects(kwargs, word):
    """Invalid arguments raise ValueError naming the argument."""
    args = {"mean": 0.0, "var": 1.0, "a": 0.0, "b": 1.0, "z": 1.0}
    args |= {"noise": ("gaussian", 1.0), "u": 0.5} | kwargs
    with pytest.raises(ValueError, match=word):
        sample_normal_sum(**args)


# ---------------------------------------------------------------- marginal laws (issue 12)

MARGINAL_CASES = {
    "laplace-betabinom": (LAP, None, BETA_BINOMIAL, 200, (2.0, 5.0), 0.0, 1.0, 80.0),
    "geometric-betabinom-flat-m2-bneg": (
        GEO,
        None,
        BETA_BINOMIAL,
        300,
        (1.0, 1.0),
        [0.0, 3.0],
        [1.0, -1.0],
        [150.0, -140.0],
    ),
    "dgauss-betabinom-b0": (DG, None, BETA_BINOMIAL, 400, (3.0, 1.0), 0.0, 0.0, 7.0),
    "gauss-censored-betabinom": (GAU, -1, BETA_BINOMIAL, 100, (1.5, 2.5), 0.0, 1.0, 40.0),
    "laplace-betabinom-far": (LAP, None, BETA_BINOMIAL, 50, (4.0, 1.0), 0.0, 1.0, -1e4),
    "laplace-negbinom": (LAP, None, NEG_BINOMIAL, 0, (3.0, 0.2), 0.0, 1.0, 20.0),
    "geometric-negbinom-r1-m2": (
        GEO,
        None,
        NEG_BINOMIAL,
        0,
        (1.0, 0.05),
        [0.0, 3.0],
        [1.0, 1.0],
        [31.0, 36.0],
    ),
    "gauss-censored-upper-negbinom-bneg": (GAU, 1, NEG_BINOMIAL, 0, (5.0, 0.3), 50.0, -1.0, 28.0),
    "laplace-negbinom-q-near-1": (LAP, None, NEG_BINOMIAL, 0, (2.0, 0.999), 0.0, 1.0, 5.0),
    "gauss-negbinom-b0": (GAU, None, NEG_BINOMIAL, 0, (40.0, 0.5), 0.0, 0.0, 3.0),
}


def _marginal_ref_logw(case):
    """Enumerated log weights over the support (beta-binomial) or 0..2000 (negative binomial,
    tail beyond 2000 below 1e-40 of the mass for these cases) with scipy's log-pmf."""
    mech, side, family, n, (t1, t2), a, b, z = case
    if family == BETA_BINOMIAL:
        grid = np.arange(n + 1)
        base = stats.betabinom.logpmf(grid, n, t1, t2)
    else:
        grid = np.arange(POISSON_GRID)
        base = stats.nbinom.logpmf(grid, t1, t2)
    np_logpdf = _kernel(mech, side)[1]
    a, b, z, _ = _arrays(a, b, z, np.zeros(1))
    noise = sum(np_logpdf((z[k] - a[k]) - b[k] * grid.astype(float)) for k in range(z.size))
    return grid, base + noise


def _mdraw(case, u):
    mech, side, family, n, (t1, t2), a, b, z = case
    nb, _, row = _kernel(mech, side)
    return marginal_count_sampler(nb)(family, n, t1, t2, *_arrays(a, b, z, row), u)


def _assert_window_cdf(draw, grid_cdf, lo_hi):
    """At every window point ``k`` (``k`` indexes ``grid_cdf`` from ``lo``): ``u = F(k) -
    1e-12`` draws ``<= k`` and ``u = F(k) + 1e-12`` draws ``> k``."""
    lo, hi = lo_hi
    for k in range(lo, hi + 1):
        c = grid_cdf[k - lo]
        if 1e-12 < c - 1e-12 < 1.0:
            assert draw(c - 1e-12)[0] <= k
        if c + 1e-12 < 1.0:
            assert draw(c + 1e-12)[0] > k


@pytest.mark.parametrize("name", list(MARGINAL_CASES))
def test_marginal_window_matches_enumeration(name):
    """Beta-binomial / negative binomial marginal: the sampler's CDF equals the enumerated CDF
    (scipy betabinom / nbinom x the mechanism's numpy log-density) to 1e-12 at every window
    point, and the enumerated mass outside the window is at most 1e-14 of the window mass."""
    case = MARGINAL_CASES[name]
    grid, logw = _marginal_ref_logw(case)
    pmf = np.exp(logw - special.logsumexp(logw))
    cdf = np.cumsum(pmf)
    lo, width = _mdraw(case, 5e-324)
    hi = lo + width - 1
    assert 0 <= lo <= hi <= grid[-1]
    inside = pmf[lo : hi + 1].sum()
    assert (pmf[:lo].sum() + pmf[hi + 1 :].sum()) <= 1e-14 * inside + 1e-15
    _assert_window_cdf(lambda u: _mdraw(case, u), cdf[lo : hi + 1], (lo, hi))


def test_marginal_window_negative_control_detected():
    """The exact check above rejects the conditional law in place of the marginal one
    (Binomial(n, alpha/(alpha+beta)) for the beta-binomial): some CDF point disagrees."""
    case = MARGINAL_CASES["laplace-betabinom"]
    _, logw = _marginal_ref_logw(case)
    cdf = np.cumsum(np.exp(logw - special.logsumexp(logw)))
    mech, side, _, n, (t1, t2), a, b, z = case
    wrong = (mech, side, 0, n, t1 / (t1 + t2), a, b, z)
    bad = [k for k in range(40, 120) if _draw(wrong, min(cdf[k] + 1e-12, 0.999))[0] <= k]
    assert len(bad) > 0


@pytest.mark.parametrize("name", ["laplace-betabinom", "geometric-negbinom-r1-m2"])
def test_marginal_chisquare(name):
    """1e5 draws against the enumerated pmf: chi-square, false-alarm rate 1e-6; the same test
    rejects draws made with ``b`` halved (negative control, 20000 draws)."""
    case = MARGINAL_CASES[name]
    _, logw = _marginal_ref_logw(case)
    ref = _law(np.exp(logw - special.logsumexp(logw)))
    us = np.random.default_rng(13).random(100_000)
    draws = np.array([_mdraw(case, u)[0] for u in us])
    assert_gof(chisquare_gof(draws, ref), what=name)
    mech, side, family, n, theta, a, b, z = case
    wrong = (mech, side, family, n, theta, a, np.asarray(b) / 2, z)
    bad = np.array([_mdraw(wrong, u)[0] for u in us[:20_000]])
    assert_rejects(chisquare_gof(bad, ref), what=f"{name}, b halved")


@pytest.mark.parametrize("name", ["laplace-binom", "geometric-poisson-m2", "gauss-poisson-b0"])
def test_marginal_sampler_serves_binomial_and_poisson(name):
    """Families 0 and 1 through the marginal factory (t2 ignored) give count_sampler's draws."""
    mech, side, family, n, theta, a, b, z = CASES[name]
    nb, _, row = _kernel(mech, side)
    f = marginal_count_sampler(nb)
    for u in (1e-300, 0.01, 0.37, 0.5, 0.93, 1.0 - 2**-53):
        got = f(family, n, theta, 123.0, *_arrays(a, b, z, row), u)
        assert got == _draw(CASES[name], u)


def _mp_logf(family, n, t, k):
    """40-digit ``log f_S(k)`` up to a constant (mpmath log-gamma)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    t1, t2 = mp.mpf(t[0]), mp.mpf(t[1])
    out = []
    for j in (int(v) for v in k):
        if family == BETA_BINOMIAL:
            v = mp.loggamma(j + t1) + mp.loggamma(n - j + t2)
            v -= mp.loggamma(j + 1) + mp.loggamma(n - j + 1)
        else:
            v = mp.loggamma(j + t1) - mp.loggamma(j + 1) + j * mp.log1p(-t2)
        out.append(v)
    return np.array([float(v - out[0]) for v in out])


@pytest.mark.parametrize(
    ("family", "n", "t", "z"),
    [
        (BETA_BINOMIAL, 10**12, (3.0, 2.0), 4e11 + 0.5),
        (BETA_BINOMIAL, 10**12, (1e8, 1e8), 5e11 + 3e7),
        (BETA_BINOMIAL, 10**6, (1e8, 1e8), 5e5 + 40.0),
        (NEG_BINOMIAL, 0, (1e8, 0.5), 1e8 + 4e4),
        (NEG_BINOMIAL, 0, (1.0, 1e-300), 1e15),
        (NEG_BINOMIAL, 0, (2.5, 1e-15), 2.5e15 + 0.5),
    ],
)
def test_marginal_extreme_exact_near_mode(family, n, t, z):
    """N up to 1e12, alpha/beta/r up to 1e8, q at 1e-300 and 1e-15, Laplace(2) noise: the
    window CDF against 40-digit log-gamma log-pmfs (scipy loses digits there), to 1e-12."""
    case = (LAP, None, family, n, t, 0.0, 1.0, z)
    lo, width = _mdraw(case, 5e-324)
    assert 1 < width < 500  # set by the noise, not by n or the prior's spread
    k = np.arange(lo, lo + width)
    logw = _mp_logf(family, n, t, k) + LAP.logpdf(z - k)
    cdf = np.cumsum(np.exp(logw - special.logsumexp(logw)))
    _assert_window_cdf(lambda u: _mdraw(case, u), cdf, (lo, lo + width - 1))


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ((BETA_BINOMIAL, 10**12, (1.0, 1.0), 0.0, 1.0, 2e12), (10**12 - 60, 10**12)),
        ((BETA_BINOMIAL, 10**12, (1.0, 1e8), 0.0, 1.0, -1e9), (0, 60)),
        (
            (BETA_BINOMIAL, 10**12, (1e8, 1.0), [0.0, 1.0], [1.0, -2.0], [3e11, -6e11]),
            (3e11 - 40, 3e11 + 40),
        ),
        ((BETA_BINOMIAL, 0, (2.0, 3.0), 0.0, 1.0, 5.0), (0, 0)),
        ((NEG_BINOMIAL, 0, (1e8, 1.0 - 2**-53), 0.0, 1.0, 1e9), (0, 3)),
        ((NEG_BINOMIAL, 0, (3.0, 1.0), 0.0, 1.0, 1e9), (0, 0)),
        ((NEG_BINOMIAL, 0, (1.0, 1e-300), 0.0, -1.0, 1e9), (0, 60)),
        ((NEG_BINOMIAL, 0, (1e8, 1e-300), 0.0, 1.0, 4e15), (4e15 - 100, 4e15 + 100)),
        ((NEG_BINOMIAL, 0, (1.0, 1e-3), 0.0, 0.0, 5.0), (0, 40_000)),
    ],
)
def test_marginal_extremes_finite_in_support(args, expect):
    """Extreme parameters: the draw is in its documented range and the window is bounded."""
    family, n, t, a, b, z = args
    for u in (1e-300, 0.37, 1.0 - 2**-53):
        s, width = _mdraw((GEO, None, family, n, t, a, b, z), u)
        assert expect[0] <= s <= expect[1]
        assert 1 <= width <= (40_000 if b == 0.0 else 200)


@pytest.mark.parametrize(
    ("family", "n", "t"),
    [
        (BETA_BINOMIAL, 10, (0.999, 2.0)),
        (BETA_BINOMIAL, 10, (2.0, 0.5)),
        (BETA_BINOMIAL, 10, (math.nan, 2.0)),
        (BETA_BINOMIAL, 10, (2.0, math.inf)),
        (BETA_BINOMIAL, -1, (2.0, 2.0)),
        (NEG_BINOMIAL, 0, (0.5, 0.3)),
        (NEG_BINOMIAL, 0, (math.nan, 0.3)),
        (NEG_BINOMIAL, 0, (2.0, 0.0)),
        (NEG_BINOMIAL, 0, (2.0, 1.5)),
        (NEG_BINOMIAL, 0, (2.0, math.nan)),
        (4, 10, (2.0, 0.3)),
        (-1, 10, (2.0, 0.3)),
        (0, 10, (1.5, 0.3)),
        (1, 10, (-1.0, 0.3)),
    ],
)
def test_marginal_invalid_code(family, n, t):
    """-2 for invalid parameters, including shape parameters below 1 (log-concavity fails)."""
    assert _mdraw((GEO, None, family, n, t, 0.0, 1.0, 3.0), 0.5) == (-2, 0)


def test_marginal_impossible_and_count_sampler_keeps_its_families():
    """-1 for an impossible release (geometric noise at a non-integer); count_sampler still
    rejects the marginal family codes with -2."""
    assert _mdraw((GEO, None, BETA_BINOMIAL, 10, (2.0, 2.0), 0.0, 1.0, 0.5), 0.5)[0] == -1
    assert _mdraw((GEO, None, NEG_BINOMIAL, 0, (2.0, 0.5), 0.0, 1.0, 0.5), 0.5)[0] == -1
    assert _mdraw((GEO, None, NEG_BINOMIAL, 0, (2.0, 1.0), 0.0, 1.0, 0.5), 0.5)[0] == -1
    assert _extreme(GEO, (BETA_BINOMIAL, 10, 0.3, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (NEG_BINOMIAL, 10, 0.3, 0.0, 1.0, 3.0))[0] == -2


def test_counts_beyond_2_to_53_are_refused():
    """-2 when the mode lies beyond 2**53 (float(S) inexact there) or n exceeds it: a
    negative binomial of mode 1e300 with flat noise, a Poisson of mean 1e17 (either kernel),
    a beta-binomial or Binomial with n = 2**53 + 1."""
    assert _mdraw((GEO, None, NEG_BINOMIAL, 0, (2.0, 1e-300), 0.0, 0.0, 3.0), 0.5)[0] == -2
    assert _extreme(GEO, (1, 0, 1e17, 0.0, 1.0, 1e17))[0] == -2
    assert _mdraw((GEO, None, 1, 0, (1e17, 0.0), 0.0, 1.0, 1e17), 0.5)[0] == -2
    assert _mdraw((GEO, None, BETA_BINOMIAL, 2**53 + 1, (1.0, 1.0), 0.0, 1.0, 3.0), 0.5)[0] == -2
    assert _extreme(GEO, (0, 2**53 + 1, 0.5, 0.0, 1.0, 3.0))[0] == -2
    assert _extreme(GEO, (1, 0, 1e15, 0.0, 1.0, 1e15))[0] > 0  # below 2**53: fine


ALPHA3 = np.array([1.0, 2.5, 1.5])


def _dirichlet_multinomial(c):
    return stats.dirichlet_multinomial.logpmf(c, ALPHA3, N6)


def test_dirichlet_sweep_matrix_reference():
    """The reference matrix for the Dirichlet-multinomial target is stochastic, leaves pi
    invariant and is irreducible (P^2 > 0); its pair conditionals are BetaBinomial(s, alpha_j,
    alpha_k) x noise (checked on every fibre against scipy's betabinom)."""
    pi = _gibbs_target(M3, _dirichlet_multinomial)
    P = _sweep_matrix(pi)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(pi @ P, pi, rtol=0, atol=1e-13)
    assert np.all(np.linalg.matrix_power(P, 2) > 0)
    c = np.array(STATES)
    for s in range(N6 + 1):  # fibre of (c_0, c_1) with c_2 = N - s
        idx = np.flatnonzero(c[:, 2] == N6 - s)
        cj = c[idx, 0]
        noise = LAP.logpdf(Z3[None, :] - C3[None, :] - c[idx] @ M3.T).sum(axis=1)
        ref = stats.betabinom.logpmf(cj, s, ALPHA3[0], ALPHA3[1]) + noise
        got = np.log(pi[idx])
        np.testing.assert_allclose(got - got[0], ref - ref[0], rtol=0, atol=1e-12)


def test_dirichlet_gibbs_invariance_and_from_corner():
    """20000 independent chains of the Dirichlet-multinomial sweep: started from pi, after one
    sweep they follow pi; started at (6, 0, 0), after two sweeps they follow that row of P^2
    (chi-square, false-alarm rate 1e-6 each). Negative control: the conditional sweep with
    p = alpha / sum(alpha) (Multinomial, the parameter not integrated out) is rejected."""
    pi = _gibbs_target(M3, _dirichlet_multinomial)
    P2 = np.linalg.matrix_power(_sweep_matrix(pi), 2)
    law = (marginal_counts_gibbs_sampler, ALPHA3)
    starts = np.random.default_rng(6).choice(len(STATES), size=20_000, p=pi)
    got = _run_chains(starts, 1, M3, 11, law)
    assert_gof(chisquare_gof(got, _law(pi)), what="dirichlet invariance")
    corner = np.full(20_000, INDEX[(6, 0, 0)])
    law2 = P2[INDEX[(6, 0, 0)]]
    assert_gof(chisquare_gof(_run_chains(corner, 2, M3, 12, law), _law(law2)), what="corner")
    wrong = (counts_gibbs_sampler, ALPHA3 / ALPHA3.sum())
    bad = _run_chains(corner[:5000], 2, M3, 13, wrong)
    assert_rejects(chisquare_gof(bad, _law(law2)), what="multinomial pair law")


def test_dirichlet_gibbs_invalid_alpha_leaves_counts():
    """-2 (before any move, counts untouched) for alpha below 1, NaN, infinite or of another
    length than counts; K = 1 with valid alpha returns 0."""
    g = marginal_counts_gibbs_sampler(LAP.numba_logpdf)
    params = np.repeat(LAP.numba_params[None, :], 2, axis=0)
    u = np.full(2 * K3, 0.5)
    for alpha in ([1.0, 0.99, 2.0], [1.0, math.nan, 2.0], [1.0, math.inf, 2.0], [1.0, 2.0]):
        counts = np.array([3, 2, 1])
        assert g(counts, np.array(alpha), C3, M3, Z3, params, u) == -2
        assert counts.tolist() == [3, 2, 1]
    one = np.array([6])
    assert g(one, np.array([2.0]), C3, M3[:, :1], Z3, params, u) == 0


# ---------------------------------------------------------------- log of the total mass (issue 14)


def _log_marginal(case):
    mech, side, family, n, theta, a, b, z = case
    nb, _, row = _kernel(mech, side)
    return count_log_marginal(nb)(family, n, theta, 0.0, *_arrays(a, b, z, row))


def _scipy_logw(case):
    """:func:`_ref_logw` with the censored Gaussian sides from scipy's ``norm.logcdf`` /
    ``logsf`` (independent of the mechanism's own numba tails)."""
    mech, side, family, n, theta, a, b, z = case
    if side is None:
        return _ref_logw(case)
    tail = stats.norm(scale=mech.sigma)
    np_logpdf = tail.logcdf if side < 0 else tail.logsf
    grid = np.arange(n + 1) if family == 0 else np.arange(POISSON_GRID)
    base = stats.binom.logpmf(grid, n, theta) if family == 0 else stats.poisson.logpmf(grid, theta)
    a, b, z, _ = _arrays(a, b, z, np.zeros(1))
    noise = sum(np_logpdf((z[k] - a[k]) - b[k] * grid.astype(float)) for k in range(z.size))
    return grid, base + noise


@pytest.mark.parametrize("name", list(CASES))
def test_log_marginal_matches_enumeration(name):
    """count_log_marginal equals scipy's logsumexp over the whole support (or 0..2000 for a
    Poisson of mean <= 40) to 1e-12 relative (exact check, no randomness)."""
    _, logw = _scipy_logw(CASES[name])
    ref = special.logsumexp(logw)
    got = _log_marginal(CASES[name])
    assert abs(got - ref) <= 1e-12 * max(1.0, abs(ref))


def test_log_marginal_negative_control_detected():
    """The same comparison rejects a wrong release map (b halved)."""
    mech, side, family, n, theta, a, b, z = CASES["laplace-binom"]
    _, logw = _ref_logw((mech, side, family, n, theta, a, b, z))
    got = _log_marginal((mech, side, family, n, theta, a, 0.5 * b, z))
    assert abs(got - special.logsumexp(logw)) > 1e-3


def _mp_log_mass(family, n, theta, z, window):
    """40-digit reference: log sum over ``window`` of the exact log-gamma pmf x Laplace(2)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    th, tot = mp.mpf(theta), mp.mpf(0)
    for s in window:
        s = int(s)
        if family == 0:
            lf = mp.loggamma(n + 1) - mp.loggamma(s + 1) - mp.loggamma(n - s + 1)
            lf += s * mp.log(th) + (n - s) * mp.log(1 - th)
        else:
            lf = -th + s * mp.log(th) - mp.loggamma(s + 1)
        tot += mp.exp(lf - abs(mp.mpf(z) - s) / 2 - mp.log(4))
    return float(mp.log(tot))


@pytest.mark.parametrize(
    ("family", "n", "theta", "z", "window"),
    [
        (0, 10**12, 0.3, 3e11 + 40.5, range(3 * 10**11 - 160, 3 * 10**11 + 240)),
        (0, 10**12, 1e-9, 1012.0, range(600, 1500)),
        (1, 0, 1e9, 1e9 - 300.0, range(10**9 - 700, 10**9 + 100)),
        (0, 1000, 0.01, 3.0, range(0, 90)),
    ],
)
def test_log_marginal_large_n_against_40_digit_log_gamma(family, n, theta, z, window):
    """At n = 1e12 (where scipy's binom.logpmf is off by ~4e-3) and a Poisson mean of 1e9, the
    kernel equals a 40-digit log-gamma sum over a window holding all but < 1e-30 of the mass
    (Laplace(2) noise decays by e^-80 over its margins), to 1e-12 relative."""
    got = count_log_marginal(LAP.numba_logpdf)(
        family, n, theta, 0.0, *_arrays(0.0, 1.0, z, LAP.numba_params)
    )
    ref = _mp_log_mass(family, n, theta, z, window)
    assert abs(got - ref) <= 1e-12 * max(1.0, abs(ref))


def test_log_marginal_codes_and_degenerate_laws():
    """-inf: impossible release (geometric noise at a non-integer); NaN: invalid parameters;
    theta 0 / 1 and n = 0 give the noise at the one possible sum; b = 0 the noise alone."""
    f = count_log_marginal(GEO.numba_logpdf)
    row = GEO.numba_params

    def call(family, n, theta, b, z):
        return f(family, n, theta, 0.0, *_arrays(0.0, b, z, row))

    assert call(0, 10, 0.3, 1.0, 0.5) == -math.inf
    assert call(0, 10, 0.3, 0.0, 0.5) == -math.inf
    for family, n, theta in [(0, 10, math.nan), (0, 10, 1.5), (1, 0, -1.0), (2, 5, 0.5)]:
        assert math.isnan(call(family, n, theta, 1.0, 3.0))
    assert call(0, 10, 1.0, 1.0, 7.0) == pytest.approx(float(GEO.logpdf(-3.0)), abs=1e-15)
    assert call(0, 10, 0.0, 1.0, 7.0) == pytest.approx(float(GEO.logpdf(7.0)), abs=1e-15)
    assert call(1, 0, 3.0, 0.0, 7.0) == pytest.approx(float(GEO.logpdf(7.0)), abs=1e-13)
