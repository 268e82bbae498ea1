"""The Poisson-factorization kernel: multinomial allocation and log-scale Gamma draws are exact.

Each goodness-of-fit assertion has the suite's false-alarm rate (``pymc_dp.testing``, 1e-6;
4 in all) and a negative control (a slightly wrong law) that must be rejected; draws come from
the ``rng`` fixture.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.kernels.poisson_factor import allocate_counts, draw_log_gamma, factor_scan
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, ks_gof

P = np.array([0.2, 0.5, 0.3])


def _one_cell_allocations(n, reps, rng):
    """``reps`` independent allocations of a count ``n`` over 3 components with weights P,
    as rows of ``(reps, 3)``: each replicate is its own row of a ``(reps, 1)`` matrix."""
    y = np.full((reps, 1), n, dtype=np.int64)
    # the weights split unevenly between theta and phi, so both enter the allocation
    log_theta = np.tile(np.log(P * np.array([2.0, 1.0, 4.0])), (reps, 1))
    log_phi = np.log(1.0 / np.array([[2.0], [1.0], [4.0]]))
    rows, cols = allocate_counts(y, log_theta, log_phi, rng)
    assert (rows.sum(axis=1) == n).all()
    assert cols[:, 0].tolist() == rows.sum(axis=0).tolist()
    return rows


def _multinomial_code_logpmf(n, p):
    """log-pmf of ``c0 * (n + 1) + c1`` for ``(c0, c1, c2) ~ Multinomial(n, p)``."""

    def logpmf(code):
        code = np.asarray(code, dtype=np.int64)
        c0, c1 = code // (n + 1), code % (n + 1)
        c2 = n - c0 - c1
        ok = c2 >= 0
        c = np.stack([c0, c1, np.where(ok, c2, 0)], axis=-1)
        out = stats.multinomial.logpmf(c, n, p)
        return np.where(ok, out, -np.inf)

    return logpmf


@pytest.mark.parametrize("n", [5, 40], ids=["unit-by-unit", "binomials"])
def test_allocation_is_multinomial(n, rng):
    rows = _one_cell_allocations(n, 40_000, rng)
    code = rows[:, 0] * (n + 1) + rows[:, 1]
    assert_gof(chisquare_gof(code, _multinomial_code_logpmf(n, P)), what=f"n={n}")
    wrong = np.array([0.22, 0.48, 0.30])  # negative control
    assert_rejects(chisquare_gof(code, _multinomial_code_logpmf(n, wrong)), what="wrong p")


def test_allocation_with_a_zero_component_and_validation():
    rng = np.random.default_rng(0)
    rows, _ = allocate_counts([[9]], [[0.0, -np.inf]], [[0.0], [0.0]], rng)
    assert rows.tolist() == [[9, 0]]
    with pytest.raises(ValueError, match="every component's rate is 0"):
        allocate_counts([[1]], [[-np.inf, -np.inf]], [[0.0], [0.0]], rng)
    with pytest.raises(ValueError, match="y must be non-negative"):
        allocate_counts([[-1]], [[0.0]], [[0.0]], rng)
    with pytest.raises(ValueError, match="y must be a 2-D integer"):
        allocate_counts([[1.5]], [[0.0]], [[0.0]], rng)
    with pytest.raises(ValueError, match="same K"):
        allocate_counts([[1]], [[0.0, 0.0]], [[0.0]], rng)
    with pytest.raises(ValueError, match="y must have shape"):
        allocate_counts([[1, 2]], [[0.0]], [[0.0]], rng)
    with pytest.raises(ValueError, match="finite or -inf"):
        allocate_counts([[1]], [[np.nan]], [[0.0]], rng)
    with pytest.raises(TypeError, match="rng must be"):
        allocate_counts([[1]], [[0.0]], [[0.0]], 3)


@pytest.mark.parametrize("shape", [0.05, 3.5], ids=["shape<1", "shape>=1"])
def test_log_gamma_draws(shape, rng):
    rate = 2.5
    x = draw_log_gamma(np.full(50_000, shape), rate, rng)
    assert np.isfinite(x).all()

    def cdf(a):
        return lambda t: special.gammainc(a, rate * np.exp(t))

    assert_gof(ks_gof(x, cdf(shape)), what=f"shape {shape}")
    assert_rejects(ks_gof(x, cdf(shape * 1.05)), what="shape x 1.05")


def test_log_gamma_tiny_shape_is_finite_and_validated():
    x = draw_log_gamma(np.full(1000, 1e-4), 1.0, np.random.default_rng(1))
    assert np.isfinite(x).all() and x.min() < -1000  # exp() would be 0: kept on the log scale
    with pytest.raises(ValueError, match="shape must be positive"):
        draw_log_gamma(0.0, 1.0, np.random.default_rng(1))
    with pytest.raises(ValueError, match="rate must be positive"):
        draw_log_gamma(1.0, np.inf, np.random.default_rng(1))


def test_scan_full_conditionals_one_component(rng):
    """K = 1: the allocation is trivial, so theta | y, phi is Gamma(a + row sum, b + sum phi)."""
    y = np.array([[3, 5, 0]])
    log_phi = np.log([[0.5, 2.0, 1.0]])
    draws = np.array(
        [
            factor_scan(y, [[0.0]], log_phi, 2.0, 1.5, 1.0, 1.0, rng, phi=False)[0][0, 0]
            for _ in range(20_000)
        ]
    )
    a, b = 2.0 + 8, 1.5 + 3.5
    assert_gof(ks_gof(draws, lambda t: special.gammainc(a, b * np.exp(t))))
    assert_rejects(ks_gof(draws, lambda t: special.gammainc(a, 1.05 * b * np.exp(t))))


def test_scan_same_seed_same_draws_and_inputs_untouched():
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    y = np.random.default_rng(0).poisson(2.0, size=(6, 5))
    lt, lp = np.zeros((6, 2)), np.zeros((2, 5))
    out_a = factor_scan(y, lt, lp, 0.1, 1.0, 0.1, 1.0, rng_a)
    out_b = factor_scan(y, lt, lp, 0.1, 1.0, 0.1, 1.0, rng_b)
    assert all(np.array_equal(a, b) for a, b in zip(out_a, out_b, strict=True))
    assert not lt.any() and not lp.any()
    out_c = factor_scan(y, lt, lp, 0.1, 1.0, 0.1, 1.0, np.random.default_rng(10))
    assert not np.array_equal(out_a[0], out_c[0])  # control: another seed differs
    kept = factor_scan(y, lt, lp, 0.1, 1.0, 0.1, 1.0, rng_a, theta=False, phi=False)
    assert np.array_equal(kept[0], lt) and kept[0] is not lt
