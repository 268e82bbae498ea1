"""Issue 24 (A): ``private_map`` and ``OnePosteriorSample.sample`` are exact by default.

Both run an exponential mechanism over a finite public set (candidates; a grid of the truncated
parameter space) with utilities on an integer grid and a rational rate, sampled exactly from
random words (:mod:`pymc_dp.kernels.exponential_mechanism`). The tests of the kernel and of
the OPS draw are here, those of ``private_map`` with its other tests in
``tests/releases/test_bayes_net_map.py``:

* the kernel's output law equals the exponential mechanism's law, computed independently with
  40-digit mpmath from the rational gammas: chi-square over >= 10^5 draws, false-alarm rate
  1e-6; negative control: the law with every gamma x 1.1 is rejected by the same test;
* the exact laws of ``private_map`` and of the OPS draw equal their definitions (hand softmax of
  the float utility; scipy's tempered Beta density on the grid) within the stated bound of the
  utility's rounding, and draws through the public functions are the kernel's draws;
* the support test (Mironov 2012; as in ``test_exact_releases.py``): >= 10^4 releases under
  neighbouring data sets ``D, D'``, the event "z is an output ``release(D)`` can give", the
  Clopper-Pearson lower bound on ``log(P_D / P_D')`` (false-alarm rate 1e-6 per assertion)
  must not exceed epsilon for the exact path. Negative controls: the OPS floating-point opt-in
  (its doubles under ``D`` are missed by a third of the draws under ``D'``: log ratio about 0.4
  at epsilon 0.1), and, for ``private_map``, whose output is a candidate index (the float
  opt-in has the same support, so it cannot fail a support test), the mechanism at twice the
  rate (the "missing factor 2" bug: log ratio 1.89 at epsilon 1) for the event "candidate 1".
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.exponential_mechanism import (
    exact_log_probabilities,
    log_weights_to_gammas,
    sample_exponential_mechanism,
)
from pymc_dp.releases import OnePosteriorSample
from pymc_dp.releases.ops import OPS_GRID, truncated_beta_rvs
from pymc_dp.testing import empirical_epsilon_lower_bound

ALPHA = 1e-6  # false-alarm rate of each chi-square assertion
N = 10_000  # releases per data set in the support tests


def _chi2_p(draws, log_probs):
    """Chi-square p-value of the draws against ``exp(log_probs)``; cells with expected count
    below 5 are pooled into one."""
    counts = np.bincount(draws, minlength=log_probs.size)
    expected = draws.size * np.exp(log_probs)
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp_ = np.append(expected[big], expected[~big].sum())
    if exp_[-1] < 5:  # the pooled tail is itself tiny: fold it into the largest cell
        obs[np.argmax(exp_[:-1])] += obs[-1]
        exp_[np.argmax(exp_[:-1])] += exp_[-1]
        obs, exp_ = obs[:-1], exp_[:-1]
    return stats.chisquare(obs, exp_ * obs.sum() / exp_.sum()).pvalue


# ---- the kernel against mpmath ------------------------------------------------------------------
def _mpmath_law(q, r, d, scale=1):
    with mpmath.workdps(40):
        w = [
            mpmath.exp(-scale * (mpmath.mpf(int(a)) + mpmath.mpf(int(b)) / d))
            for a, b in zip(q, r, strict=True)
        ]
        tot = mpmath.fsum(w)
        return np.array([float(mpmath.log(x / tot)) for x in w])


def test_kernel_law_equals_the_exponential_mechanism_by_enumeration(rng):
    # log-weights n_j / d: gammas 0, 1/3, 2/3 + 1, 2 + 5/6 ... and one at 40 + 1/6 (q > 0 path)
    num = [6, 4, -4, -11, -7, -235, 3]
    q, r, d = log_weights_to_gammas(num, 6)
    assert q.tolist() == [0, 0, 1, 2, 2, 40, 0] and r.tolist() == [0, 2, 4, 5, 1, 1, 3]
    ref = _mpmath_law(q, r, d)
    np.testing.assert_allclose(exact_log_probabilities(q, r, d), ref, rtol=0, atol=1e-13)
    draws = sample_exponential_mechanism(q, r, d, size=200_000, rng=rng)
    assert _chi2_p(draws, ref) > ALPHA
    assert np.sum(draws == 5) == 0  # P = e^-40 per draw: seen with probability 9e-13
    # negative control: every gamma x 1.1 is a different law, rejected by the same test
    assert _chi2_p(draws, _mpmath_law(q, r, d, scale=mpmath.mpf("1.1"))) < ALPHA
    # the secure source (rng=None) gives indices in range
    sec = sample_exponential_mechanism(q, r, d, size=1000)
    assert sec.dtype == np.int64 and np.all((sec >= 0) & (sec < 7))


def test_kernel_refuses_bad_input():
    with pytest.raises(ValueError, match="gamma = 0"):
        sample_exponential_mechanism([1, 2], [0, 0], 1, size=1)
    with pytest.raises(ValueError, match="den"):
        sample_exponential_mechanism([0], [0], 0, size=1)
    with pytest.raises(TypeError, match="rng"):
        sample_exponential_mechanism([0], [0], 1, size=1, rng=3)
    # the law takes the same (q, r, den) and refuses the same inputs (den = 0 gave NaN)
    with pytest.raises(ValueError, match="den"):
        exact_log_probabilities([0], [0], 0)
    with pytest.raises(ValueError, match="gamma = 0"):
        exact_log_probabilities([1, 2], [0, 0], 1)
    # fractional inputs are refused, not truncated (int(2.5) = 2 gave another law)
    with pytest.raises(TypeError, match="den"):
        exact_log_probabilities([0, 1], [0, 1], 2.5)
    with pytest.raises(TypeError, match="q and r"):
        sample_exponential_mechanism([0, 1.5], [0, 0], 1, size=1)
    with pytest.raises(TypeError, match="numerators"):
        log_weights_to_gammas([0, 2.5], 4)
    with pytest.raises(TypeError, match="denominator"):
        log_weights_to_gammas([0, 2], 4.0)
    with pytest.raises(ValueError, match="numerators"):
        log_weights_to_gammas([], 4)


# ---- One Posterior Sample ------------------------------------------------------------------------
def _ops_bound(ops, n, d):
    """Bound on the exact OPS law's log-probabilities against the tempered posterior on the
    grid: the utility's rounding n g / 2 times the rate 1/T, the rate's relative error
    g / (C - g) (Delta~ g is within g of C) on a log-likelihood of at most n |log p0|, and
    1/(2d) from the prior's rounding; twice that for the normalised law."""
    g, c, t = OPS_GRID, ops.log_likelihood_range, ops.temperature
    per = n * g / (2 * t) + n * abs(math.log(ops.truncation)) * g / (t * (c - g)) + 1 / (2 * d)
    return 2 * per * (1 + 1e-9) + 1e-14


def _trunc_beta_logpdf_on_grid(theta, a, b):
    lp = stats.beta.logpdf(theta, a, b)
    return lp - np.logaddexp.reduce(lp)


@pytest.mark.parametrize("resolution", [64, None])
def test_ops_exact_law_is_the_tempered_posterior_on_the_grid(rng, resolution):
    ops = OnePosteriorSample.beta_bernoulli(0.5, 0.2)
    data = np.array([1] * 30 + [0] * 10)
    t = ops.temperature
    points, q, r, d = ops._grid_law(ops._counts(data), ops._alpha((2.0, 1.0)), resolution)
    m = 4096 if resolution is None else resolution
    np.testing.assert_allclose(
        np.sort(points[:, 1]), 0.2 + 0.6 * np.arange(m + 1) / m, rtol=0, atol=1e-15
    )
    ref = _trunc_beta_logpdf_on_grid(points[:, 1], 2 + 30 / t, 1 + 10 / t)
    got = exact_log_probabilities(q, r, d)
    assert np.max(np.abs(got - ref)) <= _ops_bound(ops, 40, d)
    # draws through sample() are the kernel's draws
    for seed in range(5):
        theta = ops.sample(data, prior=(2.0, 1.0), rng=np.random.default_rng(seed), resolution=m)
        j = sample_exponential_mechanism(q, r, d, size=1, rng=np.random.default_rng(seed))[0]
        assert theta == points[j, 1]
    draws = sample_exponential_mechanism(q, r, d, size=100_000, rng=rng)
    assert _chi2_p(draws, ref) > ALPHA
    # negative controls: the untempered posterior, and half the temperature
    assert _chi2_p(draws, _trunc_beta_logpdf_on_grid(points[:, 1], 32.0, 11.0)) < ALPHA
    assert _chi2_p(draws, _trunc_beta_logpdf_on_grid(points[:, 1], 2 + 60 / t, 1 + 20 / t)) < ALPHA


def test_ops_dirichlet_grid_law():
    ops = OnePosteriorSample.dirichlet_categorical(1.0, 0.05, 3)
    counts = np.array([2.0, 1.0, 3.0])
    points, q, r, d = ops._grid_law(counts, np.array([1.0, 2.0, 1.5]), 16)
    assert points.shape == (math.comb(18, 2), 3)
    np.testing.assert_allclose(points.sum(1), 1.0, rtol=0, atol=1e-15)
    assert np.all(points >= 0.05 - 1e-17)
    t = ops.temperature
    ref = stats.dirichlet.logpdf(points.T, np.array([1.0, 2.0, 1.5]) + counts / t)
    ref -= np.logaddexp.reduce(ref)
    assert np.max(np.abs(exact_log_probabilities(q, r, d) - ref)) <= _ops_bound(ops, 6, d)
    # control: the untempered law is far from it
    bad = stats.dirichlet.logpdf(points.T, np.array([1.0, 2.0, 1.5]) + counts)
    assert np.max(np.abs(exact_log_probabilities(q, r, d) - bad + np.logaddexp.reduce(bad))) > 0.1
    theta = ops.sample(np.array([0, 0, 1, 2, 2, 2]), rng=None)
    assert theta.shape == (3,) and np.all(theta >= 0.05 - 1e-17)


def _float_ops_support(a, b, lo, hi, width=8):
    """Membership in the set of doubles ``truncated_beta_rvs(a, b, lo, hi)`` can output from
    numpy's ``random()`` (``u = k 2^-53``, ``x = clip(ppf(F(lo) + u (F(hi) - F(lo))))``), by
    inverting the CDF and trying the neighbouring ``k``."""
    fl, fh = stats.beta.cdf(lo, a, b), stats.beta.cdf(hi, a, b)

    def member(z):
        z = np.asarray(z, dtype=np.float64)
        k0 = np.round((stats.beta.cdf(z, a, b) - fl) / (fh - fl) * 2.0**53)
        hit = np.zeros(z.shape, dtype=bool)
        for dk in range(-width, width + 1):
            u = np.clip(k0 + dk, 0, 2.0**53 - 1) * 2.0**-53
            hit |= np.clip(stats.beta.ppf(fl + u * (fh - fl), a, b), lo, hi) == z
        return hit

    return member


def test_ops_support_test_exact_and_float_control(rng):
    eps = 0.1
    ops = OnePosteriorSample.beta_bernoulli(eps, 0.1)
    t = ops.temperature
    x0, x1 = np.zeros(4, dtype=np.int64), np.array([0, 0, 0, 1])  # replace-one neighbours

    def exact(x):  # 200 releases by sample(), the rest by the kernel on its exact law
        calls = [ops.sample(x, rng=rng) for _ in range(200)]
        points, q, r, d = ops._grid_law(ops._counts(x), ops._alpha(None), None)
        rest = points[sample_exponential_mechanism(q, r, d, size=N - 200, rng=rng), 1]
        return np.concatenate([calls, rest]), set(points[:, 1].tolist())

    z0, grid = exact(x0)
    z1, _ = exact(x1)
    on_grid = lambda z: np.isin(np.asarray(z), list(grid))  # noqa: E731
    assert on_grid(z0).all() and on_grid(z1).all()  # the support: reachable from both inputs
    # the loss on the event the tempered likelihood ratio favours most (fewer successes under
    # x0: small theta); "on the grid" itself has probability 1 under both and says nothing
    assert empirical_epsilon_lower_bound(z0, z1, lambda z: np.asarray(z) < 0.5) <= eps

    def floats(x):  # the opt-in: 200 releases by sample(), the rest by its sampler
        c = np.bincount(x, minlength=2)
        calls = [ops.sample(x, rng=rng, allow_float=True) for _ in range(200)]
        a, b = 1 + c[1] / t, 1 + c[0] / t
        return np.concatenate(
            [calls, truncated_beta_rvs(np.full(N - 200, a), b, 0.1, 0.9, rng=rng)]
        )

    f0, f1 = floats(x0), floats(x1)
    member = _float_ops_support(1.0, 1 + 4 / t, 0.1, 0.9)
    assert member(f0).all()  # the membership test is right: every release under D is in it
    assert empirical_epsilon_lower_bound(f0, f1, member) > eps


def test_ops_sample_validation():
    ops = OnePosteriorSample.beta_bernoulli(1.0, 0.1)
    x = np.array([0, 1, 1])
    with pytest.raises(TypeError, match="rng"):
        ops.sample(x, rng=5)
    with pytest.raises(TypeError, match="allow_float"):
        ops.sample(x, allow_float=1)
    for bad in (0, -3, 2.5, True, 2**21):
        with pytest.raises(ValueError, match="resolution"):
            ops.sample(x, resolution=bad)
    assert 0.1 <= ops.sample(x, rng=5, allow_float=True) <= 0.9
    # a tiny epsilon: the rate rounds to 0 and the draw follows the prior on the grid
    tiny = OnePosteriorSample.beta_bernoulli(1e-300, 0.1)
    _, q, r, d = tiny._grid_law(tiny._counts(x), tiny._alpha(None), 8)
    np.testing.assert_allclose(exact_log_probabilities(q, r, d), -np.log(9.0), atol=1e-15)
