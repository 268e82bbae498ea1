"""Tail probabilities of the noise laws: ``logcdf``/``logsf`` in numpy, PyTensor and numba.

References are independent of the code under test: scipy (``laplace``, ``log_ndtr``,
``dlaplace``), mpmath at 40 digits, and for the discrete Gaussian a brute-force ``math.fsum``
over the integers with the leading factor ``exp(-a^2/(2 sigma^2))`` taken out exactly (integer
``y^2 - a^2``), truncated where the neglected terms are below ``exp(-800)`` relative.
Deterministic: no statistical assertions.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import special, stats

from pymc_dp.mechanisms._tails import dg_logcdf, erfcx, log_ndtr
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

RTOL = 1e-12


def _rel(got, ref):
    got, ref = np.asarray(got, float), np.asarray(ref, float)
    both_inf = np.isneginf(got) & np.isneginf(ref)
    err = np.where(both_inf, 0.0, np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300))
    return float(np.max(err))


def _pt_eval(fn, x):
    xv = pt.dvector("x")
    return pytensor.function([xv], fn(xv))(np.asarray(x, np.float64))


def _check(mech, x, ref_cdf, ref_sf):
    """numpy, PyTensor and numba forms of logcdf and logsf against the references."""
    x = np.asarray(x, np.float64)
    numba_cdf = np.array([mech.numba_logcdf(v, mech.numba_params) for v in x])
    numba_sf = np.array([mech.numba_logsf(v, mech.numba_params) for v in x])
    errs = {
        "logcdf": _rel(mech.logcdf(x), ref_cdf),
        "logsf": _rel(mech.logsf(x), ref_sf),
        "logcdf_pt": _rel(_pt_eval(mech.logcdf_pt, x), ref_cdf),
        "logsf_pt": _rel(_pt_eval(mech.logsf_pt, x), ref_sf),
        "numba_logcdf": _rel(numba_cdf, ref_cdf),
        "numba_logsf": _rel(numba_sf, ref_sf),
    }
    bad = {k: v for k, v in errs.items() if not v <= RTOL}
    assert not bad, bad
    return errs


@pytest.mark.parametrize("b", [1e-3, 0.37, 1.0, 7.25, 1e4])
def test_laplace_vs_scipy(b):
    x = b * np.array([-700.0, -50.0, -3.0, -1e-9, 0.0, 1e-9, 0.5, 3.0, 30.0, 700.0])
    ref_cdf = stats.laplace.logcdf(x, scale=b)
    ref_sf = stats.laplace.logsf(x, scale=b)  # continuous: P(Y >= x) = P(Y > x)
    _check(Laplace(scale=b), x, ref_cdf, ref_sf)


@pytest.mark.parametrize("sigma", [1e-3, 0.5, 1.0, 3.7, 1e4])
def test_gaussian_vs_scipy_and_mpmath(sigma):
    u = np.array([-1e4, -300.0, -38.0, -30.0, -10.0, -1.5, -1.0, -0.3, 0.0, 0.7, 5.0, 37.0, 40.0])
    x = sigma * u
    ref_cdf = special.log_ndtr(u)
    _check(Gaussian(sigma=sigma), x, ref_cdf, special.log_ndtr(-u))
    mp.mp.dps = 40
    for v in [-1e4, -300.0, -38.0, -5.0, 0.0, 5.0]:
        ref = float(mp.log(mp.ncdf(mp.mpf(v))))
        assert abs(log_ndtr(v) - ref) <= 1e-14 * abs(ref)


def test_erfcx_vs_mpmath():
    mp.mp.dps = 40
    for t in [0.0, 0.7, 1.0, 5.0, 20.0, 25.999, 26.0, 27.0, 100.0, 1e5, 1e150]:
        ref = float(mp.exp(mp.mpf(t) ** 2) * mp.erfc(mp.mpf(t)))
        assert abs(erfcx(t) / ref - 1.0) <= 2e-15, t


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 1.0, 5.0, 50.0])
def test_geometric_vs_scipy_dlaplace(epsilon):
    m = Geometric(epsilon=epsilon)
    a = -m.log_alpha
    k = np.array([-(10**6), -5000, -30, -2, -1, 0, 1, 2, 30, 5000, 10**6], dtype=np.float64)
    k = np.unique(np.concatenate([k, np.round(k / a) if a < 1 else k]))
    # scipy's dlaplace loses digits deep in the tails and near log(1): the closed form in
    # mpmath is the reference, checked against scipy where scipy is exact
    mp.mp.dps = 40

    def exact(kk):
        al = mp.exp(-mp.mpf(a))
        kk = int(kk)
        if kk < 0:
            return float(abs(kk) * mp.log(al) - mp.log1p(al))
        return float(mp.log1p(-(al ** (kk + 1)) / (1 + al)))

    ref_cdf = np.array([exact(v) for v in k])
    ref_sf = np.array([exact(-v) for v in k])
    # scipy is exact away from log(1 - tiny) and from underflow: the two references agree there
    near = (ref_cdf < -1e-3) & (ref_cdf > -600.0)
    assert _rel(stats.dlaplace.logcdf(k[near], a), ref_cdf[near]) <= 1e-9
    _check(m, k, ref_cdf, ref_sf)
    # non-integers: P(Y <= 2.5) = P(Y <= 2), P(Y >= 2.5) = P(Y >= 3)
    assert m.logcdf(2.5) == m.logcdf(2.0) and m.logsf(2.5) == m.logsf(3.0)


def _dg_brute_logcdf(k: int, sigma: float) -> float:
    """Brute-force log P(Y <= k) (fsum over the integers, leading factor taken out)."""
    span = int(40 * sigma) + 60
    y = np.arange(0, span + 1, dtype=np.float64)
    w = np.exp(-(y * y) / (2 * sigma * sigma))
    log_z = math.log(math.fsum(w) * 2 - 1.0)

    def log_tail(a):  # log sum_{y >= a} exp(-y^2/(2 sigma^2)), a >= 1 (integers)
        yy = np.arange(a, a + span + 1, dtype=np.float64)
        d = (yy - a) * (yy + a)  # exact: y^2 - a^2
        return -(a * a) / (2 * sigma * sigma) + math.log(math.fsum(np.exp(-d / (2 * sigma**2))))

    if k < 0:
        return log_tail(-k) - log_z
    return math.log1p(-math.exp(log_tail(k + 1) - log_z))


def _dg_mpmath_logcdf(k: int, sigma: float) -> float:
    mp.mp.dps = 40
    s2 = 2 * mp.mpf(sigma) ** 2
    span = int(45 * sigma) + 60
    z = 1 + 2 * mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / s2) for y in range(1, span))
    if k < 0:
        t = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / s2) for y in range(-k, -k + span))
        return float(mp.log(t / z))
    t = mp.fsum(mp.exp(-(mp.mpf(y) ** 2) / s2) for y in range(k + 1, k + 1 + span))
    return float(mp.log1p(-t / z))


@pytest.mark.parametrize("sigma", [0.1, 0.5, 1.0, 3.3, 9.99, 10.0, 37.5, 250.0, 1e4])
def test_discrete_gaussian_vs_brute_force(sigma):
    m = DiscreteGaussian(sigma=sigma)
    s = m.sigma
    mult = np.array([-40.0, -20.0, -6.0, -2.0, -0.6, 0.0, 0.4, 1.5, 8.0, 38.0])
    k = np.unique(np.concatenate([np.round(mult * s), [-3.0, -1.0, 0.0, 1.0, 2.0, 5.0]]))
    k = k[np.abs(k) <= 40 * s + 5]
    ref_cdf = np.array([_dg_brute_logcdf(int(v), s) for v in k])
    ref_sf = np.array([_dg_brute_logcdf(int(-v), s) for v in k])
    _check(m, k, ref_cdf, ref_sf)
    # non-integers floor/ceil
    assert m.logcdf(0.5) == m.logcdf(0.0) and m.logsf(0.5) == m.logsf(1.0)


@pytest.mark.parametrize("sigma", [0.1, 1.0, 7.3, 12.0])
def test_discrete_gaussian_vs_mpmath(sigma):
    m = DiscreteGaussian(sigma=sigma)
    s = m.sigma
    for k in {-int(30 * s) - 1, -int(5 * s) - 1, -1, 0, 1, int(3 * s) + 1, int(25 * s) + 2}:
        ref = _dg_mpmath_logcdf(k, s)
        got = dg_logcdf(float(k), m.numba_params)
        assert abs(got - ref) <= 1e-12 * abs(ref), (k, got, ref)


def test_discrete_gaussian_euler_maclaurin_branch_boundary():
    """Both sides of the switch between the two tail forms agree with the brute force."""
    m = DiscreteGaussian(sigma=100.0)
    for k in [-499, -500, -501, 498, 499, 500]:  # a = sigma^2/20 = 500
        ref = _dg_brute_logcdf(k, m.sigma)
        assert abs(float(m.logcdf(k)) - ref) <= 1e-12 * abs(ref)


def test_normalization_of_censored_pieces():
    """P(Y <= c) + P(c < Y < d) + P(Y >= d) = 1 for the integer laws (pmf sum in between)."""
    for m in (Geometric(epsilon=0.7), DiscreteGaussian(sigma=2.5)):
        inner = np.arange(-3, 7)
        total = np.exp(m.logcdf(-4.0)) + np.exp(m.logpdf(inner)).sum() + np.exp(m.logsf(7.0))
        assert abs(total - 1.0) <= 1e-14


def test_censored_kernel_dispatch():
    for m in (
        Laplace(scale=1.5),
        Gaussian(sigma=2.0),
        Geometric(epsilon=0.5),
        DiscreteGaussian(sigma=3.0),
    ):
        f = m.numba_censored_logpdf
        p = m.numba_params
        for x in (-4.0, 0.0, 3.0):
            assert f(x, np.concatenate([[0.0], p])) == m.numba_logpdf(x, p)
            assert f(x, np.concatenate([[-1.0], p])) == m.numba_logcdf(x, p)
            assert f(x, np.concatenate([[1.0], p])) == m.numba_logsf(x, p)
        assert f.__qualname__ == f.__name__  # module level (numba's disk cache needs it)


class _NoTails(Laplace):
    """A user mechanism without tail probabilities (inherits only the density)."""

    logcdf = Mechanism.logcdf
    logsf = Mechanism.logsf
    logcdf_pt = Mechanism.logcdf_pt
    logsf_pt = Mechanism.logsf_pt
    numba_logcdf = Mechanism.numba_logcdf
    numba_logsf = Mechanism.numba_logsf


def test_user_mechanism_without_tails_gets_clear_error():
    m = _NoTails(scale=1.0)
    with pytest.raises(NotImplementedError, match="logcdf"):
        m.logcdf(0.0)
    with pytest.raises(NotImplementedError, match=r"z is censored.*logcdf, logsf"):
        m.check_tails("z")
    assert m.numba_censored_logpdf is None  # no kernel: DataAugmentation takes its generic path

    class OwnDensity(Laplace):  # changed numba density: Laplace's censored kernel is not its
        @property
        def numba_logpdf(self):
            return Laplace(scale=1.0).numba_logpdf

    assert OwnDensity(scale=1.0).numba_censored_logpdf is None
    assert Laplace(scale=1.0).numba_censored_logpdf is not None
    Laplace(scale=1.0).check_tails("z")  # the built-in one has them


@pytest.mark.parametrize(
    "mech", [Laplace(scale=1.3), Gaussian(sigma=2.0)], ids=["laplace", "gaussian"]
)
def test_gradients_finite_and_exact(mech):
    """d/dx of logcdf_pt / logsf_pt: finite far into both tails and equal to the exact
    derivative (density / CDF; scipy's log_ndtr for the Gaussian, closed form for Laplace)."""
    x = np.array([-1e4, -80.0, -5.0, -2.1, -0.3, 0.0, 0.4, 3.0, 60.0, 1e4])
    xv = pt.dvector("x")
    for fn, sign in ((mech.logcdf_pt, 1.0), (mech.logsf_pt, -1.0)):
        g = pytensor.function([xv], pytensor.grad(fn(xv).sum(), xv))(x)
        assert np.all(np.isfinite(g))
        if isinstance(mech, Gaussian):
            u = sign * x / mech.sigma
            want = sign * np.exp(stats.norm.logpdf(u) - special.log_ndtr(u)) / mech.sigma
        else:
            t, b = sign * x, mech.scale  # d/dt log F(t): 1/b below 0, e/(2b(1 - e/2)) above
            e = np.exp(-np.abs(t) / b)
            want = sign * np.where(t < 0, 1.0 / b, e / (2.0 * b * (1.0 - e / 2.0)))
        # 1e-8: PyTensor's erfcx gradient (2 t erfcx(t) - 2/sqrt(pi)) cancels at |u| = 5000
        np.testing.assert_allclose(g, want, rtol=1e-8, atol=1e-300)
