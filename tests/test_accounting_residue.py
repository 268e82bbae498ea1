"""Issue 24 (part C), accounting residue: each test failed before its fix.

* ``zcdp_to_approx_dp(5e-324, 1e-5, method="cks20")`` raised ``RuntimeError`` (the bracket of
  the root find overflowed for a subnormal rho);
* ``DiscreteGaussian(epsilon=996.53, delta=1e-40, sensitivity=5847682596)`` raised
  ``OverflowError`` (``exp(epsilon)`` in the Euler-Maclaurin branch of the delta curve).

References are independent: mpmath at 60 digits for the CKS bound, brute-force summation over
the integers (in log space) for the discrete Gaussian curve. No test here is
statistical (no false-alarm rate to state); each has a negative control showing that its
comparison rejects a wrong value.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from pymc_dp.accounting import discrete_gaussian_delta, zcdp_to_approx_dp
from pymc_dp.kernels.discrete_gaussian import log_normalizer
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian


# ---- zCDP -> (epsilon, delta), CKS 2020 Cor. 13 ------------------------------------------------
def _cks_reference(rho: float, delta: float) -> float:
    """``max(0, min(bs16, min_alpha eps(alpha)))`` at 60 digits (bisection on eps'(alpha))."""
    with mp.workdps(60):
        r, L = mp.mpf(rho), -mp.log(mp.mpf(delta))
        bs = r + 2 * mp.sqrt(r * L)

        def eps(a):
            return a * r + (L - mp.log(a)) / (a - 1) + mp.log(1 - 1 / a)

        def deriv(a):
            return r * (a - 1) ** 2 - (L - mp.log(a))

        lo, hi = mp.mpf(1) + mp.mpf(10) ** -40, 2 + mp.sqrt(L / r)
        for _ in range(2000):  # bisection to 60 digits (the bracket spans up to 1e162)
            mid = (lo + hi) / 2
            if deriv(mid) < 0:
                lo = mid
            else:
                hi = mid
            if hi - lo <= mp.mpf(10) ** -50 * hi:
                break
        return float(max(mp.mpf(0), min(bs, eps(hi))))


def _bound_ok(got: float, ref: float) -> bool:
    """A valid and tight bound: never below the exact optimum, above it by <= 1e-12 relative
    (absolute 1e-300 at 0)."""
    return ref <= got <= ref + 1e-12 * max(ref, 1e-288)


@pytest.mark.parametrize("rho", [5e-324, 1e-310, 1e-300, 1e-200, 1e-30, 1e-3, 0.5, 10.0, 1e6])
@pytest.mark.parametrize("delta", [1e-5, 1e-12, 0.3])
def test_cks20_tiny_and_ordinary_rho_against_mpmath(rho, delta):
    got = zcdp_to_approx_dp(rho, delta, method="cks20")
    ref = _cks_reference(rho, delta)
    assert math.isfinite(got) and got >= 0.0
    assert _bound_ok(got, ref), (got, ref)
    assert got <= zcdp_to_approx_dp(rho, delta)  # never looser than BS16


def test_cks20_regression_and_control():
    """The reported input gives (0, 1e-5)-DP (the exact optimum is negative, so 0); the
    comparison rejects an under-count and a loose value."""
    assert zcdp_to_approx_dp(5e-324, 1e-5, method="cks20") == 0.0
    ref = _cks_reference(0.5, 1e-5)
    assert not _bound_ok(ref * (1 - 1e-9), ref)  # under-counts
    assert not _bound_ok(ref * (1 + 1e-9), ref)  # not tight


# ---- discrete Gaussian delta curve with epsilon beyond exp's range ------------------------------
def test_discrete_gaussian_huge_epsilon_and_sensitivity_is_a_clear_error():
    with pytest.raises(ValueError, match=r"epsilon=996\.53, delta=1e-40.*need sigma"):
        DiscreteGaussian(epsilon=996.53, delta=1e-40, sensitivity=5847682596)


def _dg_delta_brute(eps: float, sigma: float, sens: int) -> float:
    """``delta(eps) = [sum_{y > a} e^{-y^2/2s^2} - sum_{y > a + sens} e^{eps - y^2/2s^2}] / Z``
    by summing every integer term above e^-60 of the largest (log space; numpy pairwise sums,
    relative error about 1e-15)."""
    a = eps * sigma * sigma / sens - sens / 2.0
    top = math.ceil(max(45.0, math.sqrt(2.0 * eps + 120.0)) * sigma)  # e^-60 past the end
    y = np.arange(math.floor(a) + 1, top + 1, dtype=np.float64)
    first = float(np.sum(np.exp(-0.5 * (y / sigma) ** 2)))
    y2 = y[y > a + sens]
    second = float(np.sum(np.exp(eps - 0.5 * (y2 / sigma) ** 2)))
    all_y = np.arange(-top, top + 1, dtype=np.float64)
    z = float(np.sum(np.exp(-0.5 * (all_y / sigma) ** 2)))
    return (first - second) / z


@pytest.mark.parametrize("eps", [750.0, 996.53])
def test_discrete_gaussian_delta_beyond_exp_range_against_brute_force(eps):
    sigma = 2.0e4  # over 1e5 terms: the Euler-Maclaurin branch, where exp(eps) overflowed
    sens = int(sigma * math.sqrt(2.0 * eps))  # a = eps s^2/sens - sens/2 is near 0
    got = discrete_gaussian_delta(eps, sigma, sens)
    ref = _dg_delta_brute(eps, sigma, sens)
    assert 0.3 < ref < 0.5  # both tails matter (the second is e^eps times a tiny mass)
    assert abs(got / ref - 1.0) <= 1e-10, (got, ref)
    # control: dropping the second tail (what an overflow guard returning 0 would do) is caught
    assert abs((ref + 0.01) / ref - 1.0) > 1e-10
    # the normaliser the brute force used agrees with the library's (independent sums)
    all_y = np.arange(-math.ceil(45 * sigma), math.ceil(45 * sigma) + 1, dtype=np.float64)
    z = float(np.sum(np.exp(-0.5 * (all_y / sigma) ** 2)))
    assert abs(math.log(z) - float(log_normalizer(sigma))) < 1e-12
