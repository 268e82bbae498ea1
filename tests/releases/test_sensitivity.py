"""Sensitivities of the sufficient statistics (replace-one neighbours) and the calibration.

References: hand-derived closed forms, and brute force over every pair of neighbouring datasets
of small data (all datasets enumerated for the count families; for the real families the
statistic's change depends only on the replaced record's old and new values, so a fine grid of
value pairs is enumerated). No randomness.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.releases import release_sufficient_statistics, sufficient_statistic_sensitivity
from pymc_dp.releases._families import FAMILIES


def _neighbour_max(family: str, datasets, bounds) -> tuple[float, float]:
    """Largest L1 and L2 change of the statistic over all replace-one neighbours."""
    fam = FAMILIES[family]
    best1 = best2 = 0.0
    for data in datasets:
        t = fam.statistic(fam.records(np.array(data), bounds), bounds).astype(float)
        for i, v in itertools.product(range(len(data)), sorted(set(itertools.chain(*datasets)))):
            other = list(data)
            other[i] = v
            d = fam.statistic(fam.records(np.array(other), bounds), bounds).astype(float) - t
            best1, best2 = max(best1, np.abs(d).sum()), max(best2, math.sqrt((d * d).sum()))
    return best1, best2


def test_bernoulli_pair_sensitivity_closed_form_and_enumeration():
    datasets = list(itertools.product([0, 1], repeat=4))
    assert _neighbour_max("bernoulli", datasets, None) == (2.0, math.sqrt(2.0))
    assert sufficient_statistic_sensitivity("bernoulli") == 2.0  # Foulds et al.; theory.md errata
    l2 = sufficient_statistic_sensitivity("bernoulli", norm="l2")
    assert l2 == pytest.approx(math.sqrt(2.0), rel=1e-15)


def test_categorical_sensitivity_enumeration():
    datasets = list(itertools.product(range(3), repeat=3))
    assert _neighbour_max("categorical", datasets, 3) == (2.0, math.sqrt(2.0))
    assert sufficient_statistic_sensitivity("categorical", 3) == 2.0


@pytest.mark.parametrize("u", [1, 3, 7])
def test_poisson_clamped_sum_sensitivity(u):
    # records above U are clamped: values up to U + 3 enumerated
    datasets = list(itertools.product(range(u + 4), repeat=2))
    assert _neighbour_max("poisson", datasets, u) == (float(u), float(u))
    assert sufficient_statistic_sensitivity("poisson", u) == float(u)
    assert sufficient_statistic_sensitivity("poisson", (0, u), norm="l2") == float(u)


def _grid_max(bounds, norm):
    a, b = bounds
    # grid containing the interior maximisers (x' = ±1/2, and -x ± ... checked by refinement)
    g = np.unique(np.concatenate([np.linspace(a, b, 1601), np.clip([-0.5, 0.5], a, b)]))
    x, y = np.meshgrid(g, g, indexing="ij")
    d1, d2 = x - y, x * x - y * y
    v = np.abs(d1) + np.abs(d2) if norm == "l1" else np.sqrt(d1 * d1 + d2 * d2)
    return float(v.max())


@pytest.mark.parametrize(
    ("bounds", "l1", "l2"),
    [
        ((0.0, 3.0), 3.0 + 9.0, 3.0 * math.sqrt(10.0)),  # [0, B]: B + B², B sqrt(1 + B²)
        ((-1.0, 1.0), 2.25, 2.0),  # x = 1, x' = -1/2; x = 1, x' = -1
        ((-2.0, 0.5), None, None),
        ((-3.0, 5.0), None, None),
        ((0.2, 0.7), 0.5 + 0.45, math.sqrt(0.25 + 0.45**2)),  # monotone: both at the ends
    ],
)
def test_normal_moment_sensitivity_closed_form_and_grid(bounds, l1, l2):
    got1 = sufficient_statistic_sensitivity("normal", bounds)
    got2 = sufficient_statistic_sensitivity("normal", bounds, norm="l2")
    for got, norm, exact in ((got1, "l1", l1), (got2, "l2", l2)):
        brute = _grid_max(bounds, norm)
        assert got >= brute  # never below any attained change
        assert got == pytest.approx(brute, rel=2e-5)  # and attained up to the grid's step
        if exact is not None:
            assert got == pytest.approx(exact, rel=1e-15)


def test_rational_sensitivities_are_exact_doubles():
    assert sufficient_statistic_sensitivity("normal", (0.0, 3.0)) == 12.0
    assert sufficient_statistic_sensitivity("normal", (-1.0, 1.0)) == 2.25
    assert sufficient_statistic_sensitivity("normal", (-1.0, 1.0), norm="l2") == 2.0
    # irrational values: the smallest double at or above (checked in exact arithmetic)
    from fractions import Fraction

    for fam, bounds, sq in (("normal", (0.0, 3.0), 90), ("bernoulli", None, 2)):
        got = sufficient_statistic_sensitivity(fam, bounds, norm="l2")
        assert Fraction(got) ** 2 >= sq > Fraction(math.nextafter(got, 0.0)) ** 2


def test_normal_sensitivity_negative_control_sum_of_ranges_is_not_exact():
    # the naive per-component sum over-counts on [-1, 1] (2 + 1 = 3 > 9/4): the closed form is
    # the joint supremum, not a bound that the brute force would fail to reach
    assert _grid_max((-1.0, 1.0), "l1") < 3.0 - 0.5


def test_regression_sensitivity_is_hand_bound_and_covers_enumeration():
    bounds = ((0.0, 1.0), (-1.0, 2.0))
    # d = 2: x_j² ranges 1 (x2), x1 x2 range 1, x_j y corners {0, -1, 2}: 3 (x2), y² range 4
    assert sufficient_statistic_sensitivity("linear_regression", bounds, dimension=2) == (
        pytest.approx(1 + 1 + 1 + 3 + 3 + 4, rel=1e-15)
    )
    l2 = sufficient_statistic_sensitivity("linear_regression", bounds, norm="l2", dimension=2)
    assert l2 == pytest.approx(math.sqrt(1 + 1 + 1 + 9 + 9 + 16), rel=1e-15)
    fam = FAMILIES["linear_regression"]
    g = np.linspace(0.0, 1.0, 5)
    gy = np.linspace(-1.0, 2.0, 7)
    recs = np.array(list(itertools.product(g, g, gy)))
    stats = np.array(
        [fam.statistic((r[None, :2], r[2:]), fam.bounds(bounds)) for r in recs], dtype=float
    )
    diff = stats[:, None, :] - stats[None, :, :]
    assert np.abs(diff).sum(-1).max() <= 13.0
    assert np.sqrt((diff * diff).sum(-1)).max() <= l2


def test_calibration_with_a_factory_uses_the_exact_sensitivity():
    x = np.array([0, 1, 1, 0, 1])
    rng = np.random.default_rng(0)
    rel = release_sufficient_statistics(
        x,
        "bernoulli",
        mechanism=functools.partial(pmdp.Laplace, epsilon=0.5),
        rng=rng,
        allow_float=True,
    )
    assert rel.mechanism == pmdp.Laplace(epsilon=0.5, sensitivity=2.0)
    assert rel.mechanism.scale == 4.0 and rel.guarantee() == pmdp.Laplace(
        scale=4.0, sensitivity=2.0
    ).map(2.0)
    rel = release_sufficient_statistics(
        x, "bernoulli", mechanism=functools.partial(pmdp.Geometric, epsilon=0.5), rng=rng
    )
    assert rel.mechanism.sensitivity == 2 and rel.guarantee().epsilon == 0.5
    rel = release_sufficient_statistics(
        x,
        "bernoulli",
        mechanism=functools.partial(pmdp.Gaussian, rho=0.5),
        rng=rng,
        allow_float=True,
    )
    assert rel.mechanism.sensitivity == pytest.approx(math.sqrt(2.0), rel=1e-15)
    assert rel.guarantee().rho <= 0.5
    # integer L2 mechanism: sqrt(2) rounded up to the integer 2 (over-counted, never under)
    rel = release_sufficient_statistics(
        x, "bernoulli", mechanism=functools.partial(pmdp.DiscreteGaussian, rho=0.5), rng=rng
    )
    assert rel.mechanism.sensitivity == 2 and rel.guarantee().rho <= 0.5
    rel = release_sufficient_statistics(
        np.array([0.5, 4.0]), "normal", bounds=(0.0, 2.0),
        mechanism=functools.partial(pmdp.Laplace, epsilon=1.0), rng=rng, allow_float=True
    )  # fmt: skip
    assert rel.mechanism.sensitivity == pytest.approx(6.0, rel=1e-15)


@pytest.mark.parametrize(
    ("mech", "family", "bounds", "match"),
    [
        (pmdp.Laplace(epsilon=0.5), "bernoulli", None, "mechanism.sensitivity=1.0"),
        (pmdp.Geometric(epsilon=0.5), "categorical", 3, "mechanism.sensitivity=1"),
        (pmdp.Laplace(epsilon=1.0, sensitivity=4.0), "poisson", 5, "mechanism.sensitivity=4.0"),
        (pmdp.Gaussian(rho=1.0, sensitivity=1.0), "bernoulli", None, "L2 sensitivity"),
        (pmdp.Laplace(epsilon=1.0, sensitivity=5.0), "normal", (0.0, 2.0), "below the L1"),
        (pmdp.Geometric(epsilon=1.0, sensitivity=9), "normal", (0.0, 2.0), "releases integers"),
    ],
)
def test_inconsistent_sensitivity_is_refused(mech, family, bounds, match):
    data = np.array([0, 1, 2]) if family != "bernoulli" else np.array([0, 1, 1])
    with pytest.raises(ValueError, match=match):
        release_sufficient_statistics(
            data, family, mechanism=mech, bounds=bounds, rng=np.random.default_rng(1)
        )


def test_a_larger_declared_sensitivity_is_accepted_and_counted():
    rel = release_sufficient_statistics(
        np.array([0, 1]), "bernoulli", mechanism=pmdp.Laplace(epsilon=0.5, sensitivity=3.0),
        rng=np.random.default_rng(2), allow_float=True
    )  # fmt: skip
    assert rel.guarantee().epsilon == 0.5  # the declared claim (an upper bound), not 1/3
