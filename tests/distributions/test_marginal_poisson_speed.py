"""Exactness of the short-sum path of the Poisson + two-sided exponential marginal.

``pymc_dp.math.poisson_noise`` evaluates ``log p(z)`` and ``d log p / d mu`` in one pass of
short sums inside its domain (``a <= 3``, ``-100 <= z < 101``, ``mu e^a <= 128``); the general
kernel covers the rest. Reference: a 40-digit mpmath brute-force sum over ``y = 0..599`` (the
neglected Poisson(128) tail is below 1e-60 of the total) and its mpmath derivative.
Pass: relative error <= 1e-13 for the log marginal (absolute where ``|log p| < 1``), and
absolute error <= 1e-13 * max(1, |d|) for the derivative. Deterministic, no false alarms.
Controls: a rate off by a relative 1e-11 and a derivative at the neighbouring count must fail.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.distributions.marginal_poisson import (
    PoissonTwoSidedExpLogp,
    poisson_two_sided_exp_logp,
    poisson_two_sided_exp_logp_numpy,
)
from pymc_dp.math.poisson_noise import A_MAX, in_domain, short_sum_logp_dmu

RTOL = 1e-13
Y_MAX = 600


def _logc(a, family):
    return math.log(math.tanh(a / 2)) if family == "geometric" else math.log(a / 2)


def _mp_log_marginal(z, mu, a, logc):
    """log sum_{y < Y_MAX} Pois(y; mu) exp(logc - a |z - y|) at the working precision."""
    z, mu, a = mp.mpf(z), mp.mpf(mu), mp.mpf(a)
    total = mp.mpf(0)
    term = mp.exp(-mu)  # Pois(0; mu)
    for y in range(Y_MAX):
        total += term * mp.exp(-a * abs(z - y))
        term *= mu / (y + 1)
    return mp.log(total) + mp.mpf(logc)


def _reference(z, mu, a, logc):
    with mp.workdps(40):
        lp = _mp_log_marginal(z, mu, a, logc)
        d = mp.diff(lambda m: _mp_log_marginal(z, m, a, logc), mp.mpf(mu))
        return float(lp), float(d)


def _points():
    """Ordinary and extreme points of the short-sum domain, and just outside it."""
    out = []
    for a in (0.01, 1.0, A_MAX):
        mu_hi = 128.0 / math.exp(a)
        mus = (1e-8, 1e-3, 0.7, 6.0, 0.5 * mu_hi, mu_hi)
        zs = (-100.0, -3.0, -0.5, 0.0, 0.25, 2.0, 6.0, 40.0, 100.0, 100.75)
        out += [(z, mu, a) for z, mu in itertools.product(zs, mus)]
    # just outside: z = 101, mu e^a > 128, a > A_MAX (the general kernel)
    out += [(101.0, 6.0, 1.0), (5.0, 1.001 * 128.0 / math.e, 1.0), (4.0, 3.0, 3.5)]
    return out


@pytest.fixture(scope="module")
def table():
    pts = _points()
    refs = np.array([_reference(z, mu, a, 0.0) for z, mu, a in pts])
    return np.array(pts), refs


def _rel(got, ref):
    return np.abs(got - ref) / np.maximum(1.0, np.abs(ref))


def _evaluate(pts, family):
    """Values and derivatives through the public numpy entry, one call per ``a``."""
    lp, d = np.empty(len(pts)), np.empty(len(pts))
    for a in np.unique(pts[:, 2]):
        sel = pts[:, 2] == a
        lp[sel], d[sel] = poisson_two_sided_exp_logp_numpy(
            pts[sel, 0], pts[sel, 1], a, _logc(a, family)
        )
    return lp, d


def test_domain_covers_the_points(table):
    pts, _ = table
    inside = [in_domain(z, mu, math.exp(a)) and a <= A_MAX for z, mu, a in pts]
    assert sum(inside) == len(pts) - 3
    assert not any(inside[-3:])


@pytest.mark.parametrize("family", ["geometric", "laplace"])
def test_per_count_rates_vs_mpmath(table, family):
    """Per-count rates (no shared-rate table): every point against 40-digit mpmath."""
    pts, refs = table
    shift = np.array([_logc(a, family) for a in pts[:, 2]])
    lp, d = _evaluate(pts, family)
    assert np.all(np.isfinite(lp)) and np.all(np.isfinite(d))
    assert _rel(lp, refs[:, 0] + shift).max() <= RTOL
    assert _rel(d, refs[:, 1]).max() <= RTOL


def test_kernel_itself_vs_mpmath(table):
    pts, refs = table
    got = np.array([short_sum_logp_dmu(z, mu, a, 0.0) for z, mu, a in pts[:-3]])
    assert _rel(got[:, 0], refs[:-3, 0]).max() <= RTOL
    assert _rel(got[:, 1], refs[:-3, 1]).max() <= RTOL


def test_controls_fail(table):
    """The same criterion rejects a rate off by 1e-11 and the derivative of the next count."""
    pts, refs = table
    pts_off = pts.copy()
    pts_off[:, 1] *= 1.0 + 1e-11
    lp_off, _ = _evaluate(pts_off, "laplace")
    shift = np.log(pts[:, 2] / 2)
    assert _rel(lp_off, refs[:, 0] + shift).max() > RTOL
    pts_next = pts.copy()
    pts_next[:, 0] += 1.0
    _, d_next = _evaluate(pts_next, "laplace")
    assert _rel(d_next, refs[:, 1]).max() > RTOL


def test_op_gradient_per_count_rates():
    """Through PyTensor (numba): gradient equals the kernel's derivative, central FD and
    ``verify_grad``, with records inside and outside the short-sum domain in one vector."""
    z = np.array([-100.0, -2.0, 0.0, 3.0, 7.0, 20.0, 100.0, 150.0, 5.0])
    mu0 = np.array([1.0, 0.3, 6.0, 6.0, 2.5, 40.0, 47.0, 60.0, 200.0])
    a, logc = 1.0, _logc(1.0, "geometric")
    mu = pt.dvector("mu")
    lp = poisson_two_sided_exp_logp(z, mu, a, logc)
    f = pytensor.function([mu], [lp, pytensor.grad(lp.sum(), mu)])
    val, grad = f(mu0)
    ref, dref = poisson_two_sided_exp_logp_numpy(z, mu0, a, logc)
    # the same kernel compiled in another context (PyTensor's numba lowering vs the module's
    # njit): equal up to a few ulps (one differed by 1 ulp on a cold cache), not bit for bit
    np.testing.assert_allclose(val, ref, rtol=1e-15, atol=0)
    np.testing.assert_allclose(grad, dref, rtol=1e-15, atol=1e-300)
    h = 1e-6 * mu0
    fd = (f(mu0 + h)[0] - f(mu0 - h)[0]) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)

    def fn(m):
        return PoissonTwoSidedExpLogp(a, logc)(pt.as_tensor(z), m)[0]

    pytensor.gradient.verify_grad(fn, [mu0], rng=np.random.default_rng(3))


def test_shared_rate_table_equals_per_count_path():
    """The shared-rate table and the per-count loop give bitwise the same numbers,
    including at the domain edge (z = 100 inside, 101 outside)."""
    z = np.concatenate([np.arange(-5.0, 106.0), np.full(40, 100.0)])
    a, logc = 1.0, _logc(1.0, "geometric")
    shared, dshared = poisson_two_sided_exp_logp_numpy(z, 9.0, a, logc)
    # chunks of fewer than 64 records never use the table
    chunks = [poisson_two_sided_exp_logp_numpy(c, 9.0, a, logc) for c in np.array_split(z, 4)]
    np.testing.assert_array_equal(shared, np.concatenate([c[0] for c in chunks]))
    np.testing.assert_array_equal(dshared, np.concatenate([c[1] for c in chunks]))
