"""Loader's ``stirlerr`` and ``bd0`` (pymc_dp.math.poisson) against 50-digit mpmath.

Bounds are in units of the double rounding unit ``EPS = 2**-52`` of the relative error; the
measured maxima are in the module docstring. Negative controls: the direct formulas (and the
previous 5-term series) must fail the same bounds, so the tests can tell accurate from not.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from pymc_dp.math.poisson import bd0, log_poisson_pmf, log_poisson_scalar, stirlerr

EPS = 2.0**-52
_C = 0.5 * math.log(2.0 * math.pi)


def _stirlerr_ref(y: float) -> mp.mpf:
    # loggamma(y + 1) and (y + 1/2) log y are ~y log y: 2 log10(y) more digits are needed
    with mp.workdps(50 + max(0, int(2.2 * math.log10(y)))):
        x = mp.mpf(y)
        return +(mp.loggamma(x + 1) - (x + mp.mpf(1) / 2) * mp.log(x) + x - mp.log(2 * mp.pi) / 2)


def _bd0_ref(y: float, lam: float) -> mp.mpf:
    with mp.workdps(60):
        x, m = mp.mpf(y), mp.mpf(lam)
        return +(x * mp.log(x / m) + m - x)


def _rel_ulps(value: float, ref: mp.mpf) -> float:
    return float(abs((mp.mpf(value) - ref) / ref)) / EPS


def _stirlerr_points() -> np.ndarray:
    rng = np.random.default_rng(20261125)
    return np.concatenate(
        [
            np.logspace(-300, 300, 241),
            np.logspace(-20, 1.2, 200),
            rng.uniform(0.0, 12.0, 600),
            rng.uniform(0.0, 0.5, 400),
            np.arange(1, 60) / 2.0,
            np.nextafter(np.arange(1, 21) / 2.0, np.inf),  # just off the table points
            [1e-323, 5e-324, 0.25, np.nextafter(0.25, 0), 10.0, np.nextafter(10.0, 0)],
        ]
    )


# (lower, upper, bound in ulps): measured maxima 6.3, 4.0, 2.6, 1.4 (module docstring)
_STIRLERR_BOUNDS = [(0.0, 0.25, 8.0), (0.25, 0.5, 5.0), (0.5, 10.0, 3.5), (10.0, np.inf, 2.0)]


@pytest.mark.parametrize(("lo", "hi", "bound"), _STIRLERR_BOUNDS)
def test_stirlerr_vs_mpmath(lo, hi, bound):
    ys = [float(y) for y in _stirlerr_points() if lo <= y < hi and y > 0]
    errs = [_rel_ulps(stirlerr(y), _stirlerr_ref(y)) for y in ys]
    assert len(ys) > 100
    assert max(errs) <= bound, ys[int(np.argmax(errs))]


def test_stirlerr_negative_control_direct_formula_fails():
    """The direct difference (what the Bessel kernel used below 15) fails the [1/2, 10) bound."""
    ys = [float(y) for y in np.linspace(0.51, 9.99, 200)]
    errs = [
        _rel_ulps(math.lgamma(y + 1.0) - (y + 0.5) * math.log(y) + y - _C, _stirlerr_ref(y))
        for y in ys
    ]
    assert max(errs) > 3.5 * 4  # far beyond the bound, not marginally


def test_stirlerr_negative_control_short_series_fails():
    """The 5-term series the Poisson marginal used from 15 on misses the y >= 10 bound."""
    coef = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
    ys = [float(y) for y in np.linspace(15.5, 20.0, 50)]
    errs = []
    for y in ys:
        s = sum(c / y ** (2 * i + 1) for i, c in enumerate(coef))
        errs.append(_rel_ulps(s, _stirlerr_ref(y)))
    assert max(errs) > 2.0


def test_stirlerr_edges():
    assert stirlerr(0.0) == np.inf
    assert math.isnan(stirlerr(-1.0))
    assert math.isnan(stirlerr(np.nan))
    assert stirlerr(np.inf) == 0.0


def _bd0_points():
    ratios = np.concatenate(
        [
            np.logspace(-6, 6, 97),
            1.0 + np.logspace(-15, -0.2, 40),
            1.0 - np.logspace(-15, -0.2, 40),
            [0.25, 0.2500001, 0.2499999, 4.0, 3.9999999, 4.0000001],
        ]
    )
    for lam in np.logspace(-300, 300, 41):
        for r in ratios:
            y = float(lam * r)
            if 0.0 < y < 1e305:
                yield y, float(lam)


def test_bd0_vs_mpmath():
    errs, pts = [], []
    for y, lam in _bd0_points():
        ref = _bd0_ref(y, lam)
        if ref < mp.mpf(1e-290):  # the true value is below the normal range
            continue
        errs.append(_rel_ulps(bd0(y, lam), ref))
        pts.append((y, lam))
    assert len(errs) > 5000
    assert max(errs) <= 5.0, pts[int(np.argmax(errs))]  # measured 4.0
    assert np.median(errs) <= 1.0


def test_bd0_negative_control_direct_formula_fails():
    """``y log(y/lam) + lam - y`` near ``y = lam`` (Loader's series exists for this)."""
    errs = []
    for r in np.linspace(1.05, 1.4, 30):
        y, lam = 1e3 * float(r), 1e3
        errs.append(_rel_ulps(y * math.log(y / lam) + lam - y, _bd0_ref(y, lam)))
    assert max(errs) > 5.0 * 2


def test_bd0_edges():
    assert bd0(0.0, 3.5) == 3.5
    assert bd0(2.0, 0.0) == np.inf
    assert bd0(7.0, 7.0) == 0.0
    assert math.isnan(bd0(-1.0, 2.0))
    assert math.isnan(bd0(1.0, np.nan))
    # no overflow of y / lam or y + lam
    assert _rel_ulps(bd0(1e300, 1e-300), _bd0_ref(1e300, 1e-300)) <= 4.0
    assert _rel_ulps(bd0(1.7e308, 1.6e308), _bd0_ref(1.7e308, 1.6e308)) <= 4.0


def test_log_poisson_vs_mpmath_and_scipy():
    mp.mp.dps = 50
    worst = 0.0
    for lam in (1e-8, 0.3, 2.5, 40.0, 1e6, 1e12):
        for y in (1.0, 2.0, 7.0, 0.5 * lam, lam, lam + 1.0, 3.0 * lam + 5.0, 1e4 + 0.25):
            y = float(math.floor(y)) if y >= 1 else y
            with mp.workdps(60 + int(max(0, math.log10(max(y, lam))))):
                ref = mp.mpf(y) * mp.log(lam) - lam - mp.loggamma(mp.mpf(y) + 1)
            got = log_poisson_scalar(y, lam)
            err = float(abs(got - ref) / max(abs(ref), 1))
            worst = max(worst, err)
    assert worst <= 1e-14
    k = np.arange(0, 60, dtype=np.float64)
    np.testing.assert_allclose(log_poisson_pmf(k, 7.5), stats.poisson.logpmf(k, 7.5), rtol=1e-13)
    assert log_poisson_scalar(0.0, 0.0) == 0.0
    assert log_poisson_scalar(3.0, 0.0) == -np.inf
    assert log_poisson_scalar(-1.0, 2.0) == -np.inf
    assert log_poisson_scalar(0.0, 2.0) == -2.0
    assert math.isnan(log_poisson_scalar(1.0, -1.0))
