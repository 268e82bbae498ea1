"""The per-count path of the Poisson + two-sided exponential marginal, bit for bit.

With a different rate per count, ``poisson_two_sided_exp_logp_numpy`` groups the counts by
``floor(z)`` and evaluates each group in lockstep (``short_sum_group``), falling back to the
general kernel outside the short-sum domain. Every value and derivative must be bitwise the
count-by-count evaluation ``_one_logp_dmu`` (itself checked against 40-digit mpmath in
``test_marginal_poisson_speed.py`` and ``test_marginals*.py``). Deterministic: no false alarms.
Control: the same comparison sees the rates paired with other counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_dp.distributions.marginal_poisson import _one_logp_dmu, poisson_two_sided_exp_logp_numpy
from pymc_dp.math.poisson_noise import A_MAX, noise_constants


def _one_by_one(z, mu, a, logc):
    k = noise_constants(a, logc)
    out = np.array([_one_logp_dmu(zi, mi, k, a <= A_MAX) for zi, mi in zip(z, mu, strict=True)])
    return out[:, 0], out[:, 1]


def _mixed(a, rng):
    """Counts in and out of the short-sum domain: a group larger than the lockstep chunk
    (1024), z outside [-100, 101), negative z, real z, rates at and beyond 128 e^{-a}, zero
    and NaN rates."""
    hi = 128.0 / math.exp(a)
    z = np.concatenate(
        [
            np.full(1500, 6.0),
            rng.integers(-130, 140, 2000).astype(float),
            rng.uniform(-5.0, 30.0, 300),
            [-100.0, 100.0, 100.5, 101.0, 5.0, 5.0, 5.0, 5.0, 2.0**60],
        ]
    )
    mu = np.exp(rng.uniform(math.log(1e-6), math.log(1.5 * hi), z.size))
    mu[-9:] = (3.0, 3.0, 3.0, 3.0, hi, np.nextafter(hi, np.inf), 0.0, np.nan, 2.0)
    return z, mu


@pytest.mark.parametrize(
    ("a", "family"), [(0.01, "laplace"), (1.0, "geometric"), (3.0, "geometric"), (3.5, "laplace")]
)
def test_per_count_path_equals_one_by_one(a, family):
    rng = np.random.default_rng(int(10 * a))
    logc = math.log(math.tanh(a / 2)) if family == "geometric" else math.log(a / 2)
    z, mu = _mixed(a, rng)
    lp, dlp = poisson_two_sided_exp_logp_numpy(z, mu, a, logc)
    ref_lp, ref_dlp = _one_by_one(z, mu, a, logc)
    np.testing.assert_array_equal(lp, ref_lp)
    np.testing.assert_array_equal(dlp, ref_dlp)
    assert np.isnan(lp[-2]) and np.isfinite(lp[:-2]).all()  # only the NaN rate gives NaN


def test_control_rates_paired_with_other_counts():
    """The comparison fails when the rates of one group are permuted (same multiset)."""
    a, logc = 1.0, math.log(math.tanh(0.5))
    z, mu = _mixed(a, np.random.default_rng(1))
    lp, _ = poisson_two_sided_exp_logp_numpy(z, mu, a, logc)
    perm = mu.copy()
    perm[:1500] = np.random.default_rng(2).permutation(mu[:1500])
    ref_lp, _ = _one_by_one(z, perm, a, logc)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(lp, ref_lp)
