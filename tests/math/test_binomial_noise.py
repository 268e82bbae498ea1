"""Binomial count + two-sided exponential noise (pymc_dp.math.binomial_noise).

References: a 40-digit mpmath sum over the whole support (value, d/dp, d/dz), the project's
whole-support logsumexp (``finite_support_marginal``) and brute-force argmax for the mode.
Negative controls: a 5% wrong noise rate, and a sum cut short, fail the same assertions.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import special, stats

from pymc_dp.distributions import marginals as marg
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.math.binomial_noise import (
    BinomialTwoSidedExpLogp,
    binomial_mode,
    binomial_two_sided_exp_logp,
    binomial_two_sided_exp_numpy,
    log_binomial_pmf,
)
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

LOGC = -2.0  # the normaliser only shifts the value; the tests use a fixed one


#: the reference sums the terms within this many nats of the largest (the rest, at most
#: ``(n + 1) e^-150`` of the sum even after the gradient's weights ``y/p <= 1e16``, is below
#: 1e-45 of it: far below the digits compared)
_MP_WINDOW_NATS = 150.0


def _mp_reference(z, n, p, a, logc=LOGC, dps=40):
    """``(log p(z), d/dp, d/dz)`` in ``dps``-digit arithmetic, summed over the ``y`` in
    ``0..n`` whose term is within :data:`_MP_WINDOW_NATS` of the largest (located in float64
    with scipy's binomial log-pmf, independently of the code under test)."""
    y_all = np.arange(n + 1)
    h = stats.binom.logpmf(y_all, n, p) - a * np.abs(z - y_all)
    near = np.flatnonzero(h >= h.max() - _MP_WINDOW_NATS)
    lo, hi = int(near[0]), int(near[-1])
    with mp.workdps(dps):
        z, p, a = mp.mpf(z), mp.mpf(p), mp.mpf(a)
        q = 1 - p
        s = d = dz = mp.mpf(0)
        b = mp.binomial(n, lo) * p**lo * q ** (n - lo)  # B(lo), then by ratios
        for y in range(lo, hi + 1):
            w = b * mp.exp(-a * abs(z - y))
            s += w
            d += w * (y / p - (n - y) / q)
            dz += -a * mp.sign(z - y) * w
            b = b * (n - y) / (y + 1) * p / q
        return float(logc + mp.log(s)), float(d / s), float(dz / s)


def _rel_err(x, ref):
    return abs(x - ref) / max(1.0, abs(ref))


# n up to 10^4, p within 1e-12 of 0 and 1, z far outside [0, n], noise scales 1e-3 .. 1e6
HARD = [
    *itertools.product(
        [0, 1, 7, 300],
        [1e-12, 1e-5, 0.3, 0.5, 1 - 1e-5, 1 - 1e-12],
        [1e-6, 0.02, 1.0, 30.0, 1000.0],
        [-1e6, -30.5, 0.0, 0.4, 3.0, 150.7, 1e4 + 2.5, 1e8],
    ),
    *itertools.product(
        [10_000], [1e-12, 0.3, 1 - 1e-12], [1e-6, 1.0, 1000.0], [-30.5, 5000.0, 1e4 + 2.5]
    ),
]


def test_against_mpmath_at_hard_points():
    worst = np.zeros(3)
    for case in HARD:
        ni, pi, ai, zi = case
        got = binomial_two_sided_exp_numpy(zi, ni, pi, ai, LOGC)
        ref = _mp_reference(zi, ni, pi, ai)
        for j, (v, r) in enumerate(zip(got, ref, strict=True)):
            assert np.isfinite(v), (case, j, v)
            worst[j] = max(worst[j], _rel_err(v, r))
    # measured: 9e-16 (value), 1.7e-14 (d/dp), 1.6e-15 (d/dz)
    assert worst[0] <= 1e-13, worst
    assert worst[1] <= 1e-11, worst
    assert worst[2] <= 1e-12, worst
    assert len(HARD) >= 900


def test_negative_controls_fail_the_same_assertions():
    """A 5% wrong rate, and the sum cut to the terms within 3 of the mode, are caught."""
    cases = [(3.0, 10, 0.4, 0.7), (150.7, 300, 0.5, 0.02), (-30.5, 300, 0.3, 1.0)]
    for z, n, p, a in cases:
        ref = _mp_reference(z, n, p, a)
        wrong, _, _ = binomial_two_sided_exp_numpy(z, n, p, 1.05 * a, LOGC)
        assert _rel_err(float(wrong), ref[0]) > 1e-6
        # truncated: only |y - mode| <= 3 (what an unasserted window would give)
        lam = math.log(p) - math.log1p(-p)
        m = int(binomial_mode(z, float(n), lam, a))
        y = np.arange(max(m - 3, 0), min(m + 3, n) + 1)
        short = LOGC + special.logsumexp(stats.binom.logpmf(y, n, p) - a * np.abs(z - y))
        assert _rel_err(short, ref[0]) > 1e-6


def test_mode_is_the_first_non_increase():
    rng = np.random.default_rng(3)
    for _ in range(3000):
        n = int(rng.integers(0, 60))
        p = float(rng.uniform(0.001, 0.999))
        a = float(10 ** rng.uniform(-2, 1.5))
        z = float(rng.uniform(-10, n + 10))
        if rng.random() < 0.5:
            z = float(round(z))
        y = np.arange(n + 1)
        h = stats.binom.logpmf(y, n, p) - a * np.abs(z - y)
        d = np.diff(h)
        first = int(np.flatnonzero(d <= 0)[0]) if np.any(d <= 0) else n
        got = binomial_mode(z, float(n), math.log(p) - math.log1p(-p), a)
        # off by one only where the increment is 0 up to rounding
        assert got == first or abs(d[min(int(got), first)]) < 1e-9, (n, p, a, z, got, first)


def test_log_binomial_pmf_against_mpmath():
    for n, y, p in [(10, 3, 0.4), (10_000, 1, 1e-12), (10_000, 9999, 0.5), (10**9, 5 * 10**8, 0.5)]:
        with mp.workdps(40):
            ref = float(mp.log(mp.binomial(n, y)) + y * mp.log(p) + (n - y) * mp.log(1 - mp.mpf(p)))
        got = log_binomial_pmf(float(y), float(n), p, math.log(p), math.log1p(-p))
        assert _rel_err(got, ref) <= 1e-14, (n, y, p, got, ref)


def test_geometric_normalises_and_refuses_non_integers():
    mech = Geometric(epsilon=0.3)
    a = -mech.log_alpha
    logc = math.log(-math.expm1(-a)) - math.log1p(math.exp(-a))
    z = np.arange(-400.0, 450.0)
    lp, _, _ = binomial_two_sided_exp_numpy(z, 25, 0.35, a, logc, integer=True)
    assert abs(special.logsumexp(lp)) <= 1e-10
    lp, dp, dz = binomial_two_sided_exp_numpy(np.array([2.5, np.inf]), 25, 0.35, a, logc, True)
    assert np.all(lp == -np.inf) and np.all(dp == 0.0) and np.all(dz == 0.0)


def test_invalid_inputs_give_no_nan_derivative():
    lp, dp, dz = binomial_two_sided_exp_numpy(
        np.array([1.0, 1.0, 1.0, np.nan]),
        np.array([5, 5, -3, 5]),
        np.array([np.nan, 1.5, 0.3, 0.3]),
        1.0,
        LOGC,
    )
    assert np.isnan(lp[[0, 1, 3]]).all() and np.isfinite(lp[2])
    assert np.all(dp == dp) and np.all(dz == dz)


# ---------------------------------------------------------------------------------------------
# against the whole-support sum of the registry (value and PyTensor gradient)


EQUAL_MECHS = [
    Laplace(scale=1e-3),
    Laplace(scale=0.7),
    Laplace(scale=50.0),
    Laplace(scale=1e6),
    Geometric(epsilon=0.05),
    Geometric(epsilon=2.0),
    Geometric(epsilon=20.0),
]


def _equal_inputs():
    """Counts, probabilities and (real, integer) observations: edge cases, then random ones."""
    rng = np.random.default_rng(11)
    size = 60
    n = np.concatenate([[0, 1, 2, 300], rng.integers(0, 400, size - 4)]).astype(np.int64)
    p = np.concatenate([[0.5, 1e-9, 1 - 1e-9, 0.999], rng.uniform(0, 1, size - 4) ** 3])
    z = rng.uniform(-60, 460, size)
    z[:4] = [0.0, -1e5, 1e5, 299.0]
    return n, p, z, np.round(z)


@pytest.fixture(scope="module")
def marginals_and_grads():
    """``[new, d new/dp, old, d old/dp]`` per mechanism of :data:`EQUAL_MECHS`, where new is
    :func:`binomial_two_sided_exp` and old the whole-support ``finite_support_marginal``: one
    compiled function for all (compiling them one by one cost about 6 s more)."""
    n, p_values, z_real, z_int = _equal_inputs()
    p = pt.dvector("p")
    base = pm.Binomial.dist(n=n, p=p)
    outs = []
    for mech in EQUAL_MECHS:
        z = z_int if mech.integer else z_real
        for fn in (marg.binomial_two_sided_exp, marg.finite_support_marginal):
            lp = fn(z, base, mech)
            outs += [lp, pytensor.grad(lp.sum(), p)]
    values = pytensor.function([p], outs)(p_values)
    return [values[4 * i : 4 * i + 4] for i in range(len(EQUAL_MECHS))]


@pytest.mark.parametrize(
    "i",
    range(len(EQUAL_MECHS)),
    ids=[f"{m.family}-{getattr(m, 'scale', None) or -m.log_alpha:g}" for m in EQUAL_MECHS],
)
def test_equals_finite_support_marginal(marginals_and_grads, i):
    mech = EQUAL_MECHS[i]
    n, p, z_real, z_int = _equal_inputs()
    z = z_int if mech.integer else z_real
    new, g_new, old, g_old = marginals_and_grads[i]
    assert np.all(np.isfinite(new)) and np.all(np.isfinite(g_new))
    a = 1.0 / mech.scale if isinstance(mech, Laplace) else -mech.log_alpha
    logc = float(mech.logpdf(0.0))  # eta(t) = c e^{-a |t|}
    ref = np.array([_mp_reference(*c, a, logc)[:2] for c in zip(z, n, p, strict=True)])
    scale = np.maximum(1.0, np.abs(ref))
    err_new = np.abs(np.stack([new, g_new], axis=1) - ref) / scale
    err_old = np.abs(np.stack([old, g_old], axis=1) - ref) / scale
    assert err_new[:, 0].max() <= 1e-14 and err_new[:, 1].max() <= 1e-11, err_new.max(axis=0)
    # new and old agree to 1e-12 relative; where they differ by more, it is the old sum's
    # own error against mpmath (its gradient sums y/p - (n - y)/q: about 1e-16 n/(p q)
    # absolute where the noise is wide; PyMC's lgamma log-pmf loses 1e-11 at n = 300)
    diff = np.abs(np.stack([new, g_new], axis=1) - np.stack([old, g_old], axis=1)) / scale
    assert np.all(diff <= 1e-12 + err_old), (diff - err_old).max(axis=0)
    assert np.mean(diff[:, 0] <= 1e-12) >= 0.9  # values: the old loses only at large n


def test_bernoulli_and_registry():
    for mech in (Laplace(scale=0.8), Geometric(epsilon=1.0)):
        for base in (pm.Bernoulli.dist(p=np.float64(0.3)), pm.Binomial.dist(n=4, p=0.3)):
            assert marg.get_marginal(base.owner.op, mech) is marg.binomial_two_sided_exp
        z = np.array([-2.0, 0.0, 1.0, 3.0]) + (0.0 if mech.integer else 0.25)
        lp = pm.logp(Privatized.dist(pm.Bernoulli.dist(p=np.float64(0.3)), mech, shape=4), z)
        ref = [
            special.logsumexp(
                stats.bernoulli.logpmf([0, 1], 0.3) + mech.logpdf(zi - np.array([0, 1]))
            )
            for zi in z
        ]
        np.testing.assert_allclose(lp.eval(), ref, rtol=1e-13)
    for mech in (Gaussian(sigma=1.0), DiscreteGaussian(sigma=1.0)):
        base = pm.Binomial.dist(n=4, p=0.3)
        assert marg.get_marginal(base.owner.op, mech) is marg.finite_support_marginal


def test_verify_grad_of_the_op():
    rng = np.random.default_rng(5)
    z = np.array([3.3, -2.2, 40.6, 7.9])
    n = np.array([10.0, 5.0, 30.0, 8.0])

    def fn(p, z_):
        return BinomialTwoSidedExpLogp(0.6, LOGC, False)(z_, pt.as_tensor(n), p)[0]

    pytensor.gradient.verify_grad(
        fn, [rng.uniform(0.1, 0.9, 4), z], rng=rng, abs_tol=1e-6, rel_tol=1e-6
    )


def test_graph_builder_broadcasts():
    p = pt.dscalar("p")
    lp = binomial_two_sided_exp_logp(np.zeros((2, 3)), np.array([1, 2, 3]), p, 1.0, LOGC)
    assert lp.eval({p: 0.5}).shape == (2, 3)
