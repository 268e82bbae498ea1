"""Tests of pymc_dp.math.bessel: log I_nu(x) against mpmath (50 digits) and scipy, gradients."""

from __future__ import annotations

import functools

import mpmath as mp
import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError, verify_grad
from scipy import special

from pymc_dp.math.bessel import (
    DEBYE_TERMS,
    debye_polynomials,
    dlog_iv,
    dlog_iv_pt,
    iv_ratio,
    iv_ratio_pt,
    log_iv,
    log_iv_pt,
    log_iv_scalar,
    log_ive,
    log_ive_pt,
)
from pymc_dp.testing import mpmath_log_iv as mp_log_iv

mp.mp.dps = 50


@functools.cache
def ref_log_iv(nu: float, x: float):
    return mp_log_iv(nu, x)


def rel_or_abs_err(value, ref):
    """|error| / max(1, |ref|): relative where |ref| >= 1, absolute elsewhere."""
    ref = float(ref)
    if np.isinf(ref):
        return 0.0 if value == ref else np.inf
    return abs(value - ref) / max(1.0, abs(ref))


NUS = [0.0, 0.5, 1.0, 2.5, 7.0, 19.5, 20.0, 20.5, 50.0, 300.0, 999.0, 1e4, 1e5]
XS = [0.0, 1e-300, 1e-90, 1e-20, 1e-5, 0.01, 0.5, 1.0, 2.0, 3.0, 10.0, 19.0, 100.0, 714.0, 1e4]
XS_HUGE = [2e6]  # only where the reference is cheap


def test_log_iv_vs_mpmath_grid():
    pts = [(nu, x) for nu in NUS for x in XS]
    pts += [(nu, x) for nu in (0.0, 0.5, 1.0, 7.0, 20.5, 999.0) for x in XS_HUGE]
    errs = []
    vals = log_iv(np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
    assert not np.any(np.isnan(vals))
    assert not np.any(vals == np.inf)
    for (nu, x), v in zip(pts, vals, strict=True):
        errs.append(rel_or_abs_err(v, ref_log_iv(nu, x)))
    worst = int(np.argmax(errs))
    assert errs[worst] <= 1e-12, (pts[worst], errs[worst])


def test_log_ive_is_log_iv_minus_x_without_cancellation():
    # log I_0(x) - x at x = 1e12: -log(2 pi x)/2 + 1/(8x) + ...
    x = 1e12
    expected = -0.5 * np.log(2 * np.pi * x) + 1 / (8 * x)
    assert log_ive(0, x) == pytest.approx(expected, rel=1e-14)
    nu, x = 20.5, 1e4
    assert log_ive(nu, x) == pytest.approx(float(ref_log_iv(nu, x) - x), rel=1e-13)


def test_log_iv_vs_scipy_where_scipy_is_accurate():
    nu = np.array([0.0, 0.3, 1.0, 2.0, 5.5, 10.0, 25.0, 40.0])[:, None]
    x = np.geomspace(1e-3, 700.0, 60)[None, :]
    ours = log_iv(nu, x)
    theirs = np.log(special.ive(nu, x)) + x
    assert np.all(np.abs(ours - theirs) <= 1e-13 * np.maximum(1.0, np.abs(theirs)))


def test_iv_ratio_vs_mpmath():
    pts = [
        (nu, x) for nu in (0.0, 0.5, 3.0, 19.5, 20.0, 300.0, 1e5) for x in (1e-5, 1.0, 19.0, 1e4)
    ]
    for nu, x in pts:
        ref = mp.exp(ref_log_iv(nu + 1, x) - ref_log_iv(nu, x))
        assert iv_ratio(nu, x) == pytest.approx(float(ref), rel=1e-12), (nu, x)


def test_edge_values():
    assert log_iv(0, 0.0) == 0.0
    assert log_iv(2.5, 0.0) == -np.inf
    assert np.isnan(log_iv(-1.0, 1.0))
    assert np.isnan(log_iv(1.0, -1.0))
    assert np.isnan(log_iv(np.nan, 1.0))
    assert log_iv(3.0, np.inf) == np.inf
    assert iv_ratio(0, 0.0) == 0.0
    assert dlog_iv(0, 0.0) == 0.0
    assert dlog_iv(1, 0.0) == np.inf
    # the two failure modes of the naive forms
    assert np.isfinite(log_iv(0, 800.0)) and np.isinf(np.log(special.iv(0, 800.0)))
    assert np.isfinite(log_iv(300, 3.0)) and special.ive(300, 3.0) == 0.0


def test_debye_polynomials_match_abramowitz_stegun():
    from fractions import Fraction as F

    u = debye_polynomials(3)
    assert u[2] == {2: F(9, 128), 4: F(-77, 192), 6: F(385, 1152)}  # A&S 9.3.9
    assert u[3] == {3: F(75, 1024), 5: F(-4563, 5120), 7: F(17017, 9216), 9: F(-85085, 82944)}
    assert len(debye_polynomials(DEBYE_TERMS)) == DEBYE_TERMS + 1


def test_pytensor_ops_match_numpy_and_compile_natively():
    # warnings are errors: an object-mode fallback would fail this test
    nu = pt.dvector("nu")
    x = pt.dvector("x")
    out = [log_iv_pt(nu, x), log_ive_pt(nu, x), iv_ratio_pt(nu, x), dlog_iv_pt(nu, x)]
    total = (log_iv_pt(nu, x) * 2 + log_ive_pt(nu, x)).sum()
    f = pytensor.function([nu, x], [*out, pytensor.grad(total, x)])
    nv = np.array([0.0, 3.0, 25.0, 400.0])
    xv = np.array([0.3, 30.0, 2.0, 900.0])
    res = f(nv, xv)
    np.testing.assert_allclose(res[0], log_iv(nv, xv), rtol=1e-15)
    np.testing.assert_allclose(res[1], log_ive(nv, xv), rtol=1e-15)
    np.testing.assert_allclose(res[2], iv_ratio(nv, xv), rtol=1e-15)
    np.testing.assert_allclose(res[3], dlog_iv(nv, xv), rtol=1e-15)
    np.testing.assert_allclose(res[4], 3 * dlog_iv(nv, xv) - 1, rtol=1e-13)
    # symbolic inputs to the numpy-level function build the same graph
    assert log_iv(nu, x).owner.op == log_iv_pt


@pytest.mark.parametrize("nu", [0.0, 2.0, 20.5, 300.0])
def test_verify_grad(nu, rng):
    xv = np.array([0.05, 1.5, 40.0, 650.0])
    for fn in (log_iv_pt, log_ive_pt, iv_ratio_pt, dlog_iv_pt):
        # FAST_COMPILE (Python perform): the Numba path is covered above, and four Numba
        # compilations per order would dominate the test time.
        verify_grad(lambda x, fn=fn: fn(np.float64(nu), x), [xv], rng=rng, mode="FAST_COMPILE")


def test_dlog_iv_matches_mpmath_derivative():
    for nu, x in [(0.0, 1e-5), (0.5, 3.0), (20.0, 19.0), (999.0, 1.0)]:
        ref = mp.diff(lambda t, nu=nu: mp.log(mp.besseli(nu, t)), mp.mpf(x))
        assert dlog_iv(nu, x) == pytest.approx(float(ref), rel=1e-12)


def test_gradient_wrt_order_is_undefined():
    nu = pt.dscalar("nu")
    with pytest.raises(NullTypeGradError):
        pytensor.grad(log_iv_pt(nu, np.float64(2.0)), nu)


def test_scalar_kernel_is_callable_from_numba():
    @numba.njit
    def total(nus, xs):
        acc = 0.0
        for i in range(nus.size):
            acc += log_iv_scalar(nus[i], xs[i])
        return acc

    nus = np.array([0.0, 5.0, 500.0])
    xs = np.array([1.0, 1e3, 10.0])
    assert total(nus, xs) == pytest.approx(float(np.sum(log_iv(nus, xs))), rel=1e-15)
