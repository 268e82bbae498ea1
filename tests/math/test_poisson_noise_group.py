"""The lockstep short sums (``short_sum_group``) against the scalar kernel, bit for bit.

``pymc_dp.math.poisson_noise.short_sum_group`` evaluates many counts that share
``n = floor(z)`` with the operations of ``short_sum_kernel`` in the same order, so every
result must be bitwise the scalar one (the scalar kernel is itself checked against 40-digit
mpmath in ``tests/distributions/test_marginal_poisson_speed.py``). Deterministic: no false
alarms. Control: the same comparison sees a rate one ulp off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_dp.math.poisson_noise import (
    A_MAX,
    N_GROUPS,
    group_by_floor,
    noise_constants,
    short_sum_group,
    short_sum_kernel,
    work_arrays,
)

A_VALUES = (0.01, 0.4, 1.0, A_MAX)
N_VALUES = (0, 1, 2, 3, 6, 17, 50, 99, 100)


def _rates(a, size, rng):
    """Rates log-uniform over the whole domain ``(0, 128 e^{-a}]``, with both ends."""
    hi = 128.0 / math.exp(a)
    mu = np.exp(rng.uniform(math.log(1e-8), math.log(hi), size))
    mu[:4] = (1e-300, 1e-8, hi, np.nextafter(hi, 0.0))
    return mu


def _group(n, z, mu, k, chunk=None):
    """The group in chunks of ``chunk`` counts, one work array reused across chunks."""
    chunk = chunk or z.size
    lp, dlp = np.full(z.size, np.nan), np.full(z.size, np.nan)
    w = work_arrays(chunk)
    for c in range(0, z.size, chunk):
        e = c + chunk
        bad = short_sum_group(n, (z[c:e], mu[c:e], lp[c:e], dlp[c:e]), k, w)
        assert bad == 0
    return lp, dlp


def _scalar(z, mu, k):
    out = np.array([short_sum_kernel(zi, mi, k) for zi, mi in zip(z, mu, strict=True)])
    return out[:, 0], out[:, 1]


@pytest.mark.parametrize("a", A_VALUES)
def test_group_equals_scalar_kernel_bitwise(a):
    """Integer and real z, rates over the whole domain (x2 < m and x2 >= m), work arrays
    shorter than the group (reused across chunks)."""
    rng = np.random.default_rng(int(a * 100))
    k = noise_constants(a, math.log(math.tanh(a / 2)))
    for n in N_VALUES:
        mu = _rates(a, 300, rng)
        frac = np.where(np.arange(300) % 3 == 0, rng.uniform(0.0, 1.0, 300), 0.0)
        z = n + frac
        lp, dlp = _group(n, z, mu, k, chunk=128)
        ref_lp, ref_dlp = _scalar(z, mu, k)
        assert np.all(np.isfinite(lp)) and np.all(np.isfinite(dlp))
        np.testing.assert_array_equal(lp, ref_lp)
        np.testing.assert_array_equal(dlp, ref_dlp)


def test_group_covers_both_tail_forms():
    """The points above use both forms of S2: the series (x2 < m) and e^{x2} minus the
    partial sum (x2 >= m), so the bitwise test checks both."""
    rng = np.random.default_rng(1)
    large = small = 0
    for a in A_VALUES:
        for n in N_VALUES:
            x2 = _rates(a, 300, rng) * math.exp(-a)
            large += np.sum(x2 >= n + 1)
            small += np.sum(x2 < n + 1)
    assert large > 100 and small > 100


def test_control_one_ulp_off_is_seen():
    """The bitwise comparison fails for rates one ulp off (value and derivative)."""
    a = 1.0
    k = noise_constants(a, math.log(math.tanh(a / 2)))
    mu = _rates(a, 300, np.random.default_rng(5))
    z = np.full(300, 6.0)
    lp, dlp = _group(6, z, mu, k)
    ref_lp, ref_dlp = _scalar(z, np.nextafter(mu, np.inf), k)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(lp, ref_lp)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(dlp, ref_dlp)


def test_group_reports_rates_outside_domain():
    """Rates outside the domain (0, negative, NaN, inf, just above 128 e^{-a}) are counted and
    leave the other counts of the group exact."""
    a = 1.0
    k = noise_constants(a, math.log(math.tanh(a / 2)))
    hi = 128.0 / math.e
    mu = np.array([3.0, 0.0, 5.5, -1.0, np.nan, 7.0, np.inf, np.nextafter(hi, np.inf), hi])
    z = np.full(mu.size, 4.0)
    lp, dlp = np.full(mu.size, np.nan), np.full(mu.size, np.nan)
    bad = short_sum_group(4, (z, mu, lp, dlp), k, work_arrays(mu.size))
    assert bad == 5
    good = [0, 2, 5, 8]
    ref_lp, ref_dlp = _scalar(z[good], mu[good], k)
    np.testing.assert_array_equal(lp[good], ref_lp)
    np.testing.assert_array_equal(dlp[good], ref_dlp)


def test_group_by_floor_partition():
    """Every count in exactly one group, in increasing order, the group given by floor(z)."""
    edges = [-100.0, np.nextafter(-100.0, -np.inf), -0.0, -1e-300, 0.0, 5e-324]
    edges += [np.nextafter(5.0, 0.0), 5.0, 100.75, np.nextafter(101.0, 0.0), 101.0]
    edges += [np.nan, np.inf, -np.inf, 1e300, -(2.0**63)]
    z = np.concatenate([edges, np.random.default_rng(2).uniform(-120.0, 120.0, 500)])
    order, starts = group_by_floor(z, True)
    assert starts[0] == 0 and starts[-1] == z.size and starts.size == N_GROUPS + 1
    assert np.array_equal(np.sort(order), np.arange(z.size))
    with np.errstate(invalid="ignore"):
        inside = (z >= -100.0) & (z < 101.0)
        expected = np.where(inside, np.where(z < 0, 1, np.floor(np.where(inside, z, 0)) + 2), 0)
    for g in range(N_GROUPS):
        members = order[starts[g] : starts[g + 1]]
        assert np.all(np.diff(members) > 0)
        assert np.array_equal(members, np.flatnonzero(expected == g))
    # spot checks of the edges: just below 5 is n = 4, -0.0 is n = 0, 101 is outside
    assert expected[6] == 6 and expected[2] == 2 and expected[10] == 0
    # short=False: everything in group 0
    order, starts = group_by_floor(z, False)
    assert starts[1] == z.size and np.array_equal(order, np.arange(z.size))
