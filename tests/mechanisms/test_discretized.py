"""Discretized: exact snap, integer sensitivity with the rounding, privacy loss by enumeration.

The exact privacy loss of a snapped release is computed by enumeration on small grids: every
pair of neighbouring inputs on a fine float grid (including the rounding boundaries), every
output in a window holding all but 1e-15 of the noise mass, the log ratio of the exact
probabilities. It must equal the stated guarantee (rounding included), and the guarantee of a
mechanism that ignores the rounding (sensitivity ``Δ/g`` instead of ``ceil(Δ/g)``) must be
exceeded: the negative control. These are deterministic computations (no false alarms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_dp.accounting import discrete_gaussian_delta
from pymc_dp.mechanisms.discretized import Discretized, as_grid, snap, snap_pt
from pymc_dp.mechanisms.geometric import Geometric


def _exact_worst_integer_shift(sens: float, grid: float, dim: int = 1) -> int:
    """max over neighbours |T - T'|_1 <= sens (inputs on a fine grid with the boundaries) of
    the L1 distance of the snapped statistics, by enumeration."""
    fine = grid / 8.0  # the rounding boundaries (odd multiples of g/2) are on this grid
    xs = np.arange(-4 * grid, 4 * grid + fine / 2, fine)
    best = 0
    if dim == 1:
        k = snap(xs, grid)
        for i, x in enumerate(xs):
            near = np.abs(xs - x) <= sens
            best = max(best, int(np.abs(k[near] - k[i]).max()))
        return best
    pts = np.array(np.meshgrid(xs, xs)).reshape(2, -1).T
    k = snap(pts, grid)
    for i in range(0, len(pts), 3):
        near = np.abs(pts - pts[i]).sum(axis=1) <= sens
        best = max(best, int(np.abs(k[near] - k[i]).sum(axis=1).max()))
    return best


@pytest.mark.parametrize(
    ("grid", "sens"), [(0.25, 0.25), (0.25, 0.6), (0.5, 1.3), (2.0**-3, 0.5), (1.0, 2.0)]
)
def test_geometric_loss_by_enumeration_equals_guarantee(grid, sens):
    eps = 0.7
    d = Discretized(grid=grid, epsilon=eps, sensitivity=sens)
    shift = _exact_worst_integer_shift(sens, grid)
    assert shift == d.base.sensitivity == math.ceil(sens / grid)
    # exact loss over outputs: log P(Y = z - k) / P(Y = z - k') for the worst shift
    z = np.arange(-400, 401)
    lp = d.base.logpdf(z)
    loss = float(np.max(np.abs(lp - d.base.logpdf(z - shift))))
    assert loss == pytest.approx(d.guarantee().epsilon, rel=1e-12)
    assert d.guarantee().epsilon == pytest.approx(eps, rel=1e-12)
    # negative control: calibrating to sens / grid (the rounding ignored) under-states the loss
    if sens / grid != shift:
        naive = Geometric(epsilon=eps, sensitivity=max(1, math.floor(sens / grid)))
        lossn = float(np.max(np.abs(naive.logpdf(z) - naive.logpdf(z - shift))))
        assert lossn > eps * (1 + 1e-3)


def test_two_dimensional_rounding_adds_one_step_per_coordinate():
    grid, sens = 0.5, 0.5
    d = Discretized(grid=grid, epsilon=1.0, sensitivity=sens, dimension=2)
    assert _exact_worst_integer_shift(sens, grid, dim=2) == d.base.sensitivity == 2


@pytest.mark.parametrize(("grid", "sens"), [(0.25, 0.6), (0.5, 1.0)])
def test_discrete_gaussian_delta_by_enumeration(grid, sens):
    d = Discretized(grid=grid, epsilon=1.0, delta=1e-3, sensitivity=sens)
    shift = _exact_worst_integer_shift(sens, grid)
    assert shift == d.base.sensitivity
    z = np.arange(-2000, 2001)
    p, q = np.exp(d.base.logpdf(z)), np.exp(d.base.logpdf(z - shift))
    delta = float(np.maximum(p - math.exp(1.0) * q, 0.0).sum())  # exact hockey stick
    assert delta <= d.guarantee().delta * (1 + 1e-9)
    assert delta == pytest.approx(discrete_gaussian_delta(1.0, d.base.sigma, shift), rel=1e-9)


def test_snap_is_exact_half_up_and_matches_the_graph():
    x = np.array([0.49999999999999994, 0.5, -0.5, -1.5, 2.5, 1e-300, -0.75, 3.0])
    want = np.floor(np.array([0, 1, 0, -1, 3, 0, -1, 3], dtype=float)).astype(np.int64)
    np.testing.assert_array_equal(snap(x, 1.0), want)
    np.testing.assert_array_equal(snap_pt(x, 1.0).eval(), want)
    np.testing.assert_array_equal(snap(x * 0.125, 0.125), want)
    with pytest.raises(ValueError, match="grid"):
        snap([1.0], 0.1)
    with pytest.raises(ValueError, match="values"):
        snap([2.0**60], 1.0)
    with pytest.raises(ValueError, match="grid"):
        as_grid(3.0)


def test_release_on_grid_and_units(rng):
    d = Discretized(grid=2.0**-4, epsilon=1.0, sensitivity=0.5)
    z = d.release(rng.normal(size=1000), rng=rng)
    k = d.to_units(z)
    np.testing.assert_array_equal(k.astype(np.float64) * 2.0**-4, z)
    assert d.release([0.1]).dtype == np.float64  # secure source
    with pytest.raises(ValueError, match="grid"):
        d.to_units([0.01])
    # on the grid but beyond 2**53 steps (no release gives it): an error, not a wrapped int64
    for far in (2.0**53, 1e300, np.inf, np.nan):
        with pytest.raises(ValueError, match="released"):
            d.to_units([0.0, far])
    assert d.to_units([2.0**49]).tolist() == [2**53]  # the edge itself is kept
    with pytest.raises(ValueError, match="rho"):
        Discretized(grid=1.0, epsilon=1.0, rho=0.5)
