"""Exact marginals of ``Privatized`` at the extremes of their value types, in float64, in bounded
memory.

References are 50-digit mpmath sums (exact integer observations, exact pmfs). Pass criterion: no
NaN, no +inf, no positive log-pmf for a discrete base, relative error <= 1e-13 (closed forms and
finite sums) or 1e-11 (truncated sums, whose neglected tail is asserted <= 1e-12), and ``-inf``
only where the reference itself is below the float64 range. These are deterministic checks:
no statistical assertion, so no false-alarm rate to state.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import jacobian

import pymc_dp.distributions.marginals as marg
from pymc_dp.distributions.marginal_poisson import poisson_two_sided_exp_logp_numpy
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min
DOUBLE_MIN_LOG = -np.finfo(np.float64).max
GRAD_DPS = 400


def _rel(got, ref):
    return abs(got - ref) / max(1.0, abs(ref))


def _check(got, ref, rtol, what):
    """``got`` (float) against an mpmath ``ref``; -inf only where ``ref`` underflows float64."""
    assert not math.isnan(got), f"NaN at {what}"
    assert got != math.inf, f"+inf at {what}"
    if ref < DOUBLE_MIN_LOG:
        assert got == -math.inf or got < -1e307, (what, got, float(ref))
        return
    assert math.isfinite(got), (what, got, float(ref))
    err = _rel(got, float(ref))
    assert err <= rtol, (what, got, float(ref), err)


# ---------------------------------------------------------------------------------------------
# mpmath references


def _mp_log_eta(mech, t):
    """Noise log-density at an exact mpmath ``t``."""
    fam = mech.family
    if fam == "laplace":
        b = mp.mpf(mech.scale)
        return -abs(t) / b - mp.log(2 * b)
    if fam == "geometric":
        a = -mp.mpf(mech.log_alpha)
        return mp.log(mp.tanh(a / 2)) - a * abs(t)
    if fam == "gaussian":
        s = mp.mpf(mech.sigma)
        return -(t**2) / (2 * s**2) - mp.log(s) - mp.log(2 * mp.pi) / 2
    # discrete Gaussian: the normaliser by its theta series
    s = mp.mpf(mech.sigma)
    k = int(40 * mech.sigma) + 40
    log_z = mp.log(mp.fsum(mp.exp(-(mp.mpf(j) ** 2) / (2 * s**2)) for j in range(-k, k + 1)))
    return -(t**2) / (2 * s**2) - log_z


def _mp_logsumexp(terms):
    terms = [t for t in terms if t != -mp.inf]
    m = max(terms)
    return m + mp.log(mp.fsum(mp.exp(t - m) for t in terms))


def _mp_finite(log_pmf, support, mech, z):
    with mp.workdps(max(mp.mp.dps, 50)):
        z = mp.mpf(z) if not isinstance(z, int | np.integer) else mp.mpf(int(z))
        return _mp_logsumexp([log_pmf(k) + _mp_log_eta(mech, z - k) for k in support])


def _mp_pois(k, mu):
    return -mu + k * mp.log(mu) - mp.loggamma(k + 1)


def _mp_upper_series(m, lam):
    """``log P(Y >= m)`` for ``Y ~ Poisson(lam)``, ``m >> lam`` (first term times ratio sum)."""
    if m <= 0:
        return mp.mpf(0)
    first = _mp_pois(mp.mpf(m), lam)
    s, t, k = mp.mpf(1), mp.mpf(1), 1
    while t > mp.mpf(10) ** -55:
        t *= lam / (m + k)
        s += t
        k += 1
    return first + mp.log(s)


def _mp_poisson_far(z, mu, mech):
    """50-digit ``log p(z)`` for Poisson(mu) + two-sided exponential noise, ``|z| >> mu``."""
    with mp.workdps(max(mp.mp.dps, 50)):
        z = mp.mpf(int(z)) if isinstance(z, int | np.integer) else mp.mpf(z)
        mu = mp.mpf(mu)
        if mech.family == "geometric":
            a = -mp.mpf(mech.log_alpha)
            logc = mp.log(mp.tanh(a / 2))
        else:
            a = 1 / mp.mpf(mech.scale)
            logc = -mp.log(2 * mp.mpf(mech.scale))
        n = int(mp.floor(z))
        m = max(n + 1, 0)
        lam1, lam2 = mu * mp.exp(a), mu * mp.exp(-a)
        terms = []
        if n >= 0:  # e^{-mu + lam1 - a z} (1 - P(Y1 >= n + 1))
            terms.append(-mu + lam1 - a * z + mp.log1p(-mp.exp(_mp_upper_series(n + 1, lam1))))
        terms.append(-mu + lam2 + a * z + _mp_upper_series(m, lam2))
        return logc + _mp_logsumexp(terms)


# ---------------------------------------------------------------------------------------------
# item 6: Poisson + Laplace / geometric at the ends of float64 and int64


POISSON_FAR = [
    (Laplace(epsilon=1.0), [1e19, -1e19, 1e300, -1e300, 2.0**62 + 0.5 * 2**10, -(2.0**62)]),
    (Laplace(scale=7.0), [1e17 + 0.25 * 16, 1e250, -1e250]),
    (Geometric(epsilon=1.0), [I64_MAX, I64_MIN, 2**62, -(2**62), 2**53 + 1]),
    (Geometric(epsilon=0.05), [I64_MAX, I64_MIN]),
]


@pytest.mark.parametrize("mech,zs", POISSON_FAR, ids=lambda x: getattr(x, "family", ""))
def test_poisson_closed_form_far_values_vs_mpmath(mech, zs):
    """Was: +1e19 at z = 1e19 and +9.2e18 at z = 2**63 - 1 (numba's int64 ``floor`` wrapped)."""
    dtype = np.int64 if mech.integer else np.float64
    z = np.array(zs, dtype=dtype)
    mu = pt.dscalar("mu")
    lp = pm.logp(Privatized.dist(pm.Poisson.dist(mu), mech, shape=z.shape), z)
    f = pytensor.function([mu], [lp, pytensor.grad(lp.sum(), mu), jacobian(lp, mu)])
    for mu0 in (0.5, 3.0, 40.0):
        got, _, jac = f(mu0)
        assert np.all(got < 0), (mech, mu0, got)
        for zi, gi, ji in zip(zs, got, jac, strict=True):
            ref = _mp_poisson_far(zi, mu0, mech)
            _check(float(gi), ref, 1e-13, (mech, zi, mu0))
            with mp.workdps(GRAD_DPS):  # log p ~ 1e300: d/dmu needs > 300 digits
                dref = mp.diff(lambda m, zi=zi: _mp_poisson_far(zi, m, mech), mp.mpf(mu0))
            assert np.isfinite(ji), (mech, zi, mu0, ji)
            assert abs(ji - float(dref)) <= 1e-12 * max(1.0, abs(float(dref))), (zi, mu0, ji)


def test_poisson_closed_form_numpy_far_values_never_positive():
    z = np.array([1e19, 1e300, 2.0**63, -(2.0**63), np.finfo(np.float64).max, 1e308])
    lp, d = poisson_two_sided_exp_logp_numpy(z, 3.0, 1.0, math.log(math.tanh(0.5)))
    assert not np.isnan(lp).any() and not np.isnan(d).any()
    assert np.all(lp < 0)
    assert np.all(np.isfinite(d))
    # the true value there is -a z + O(1): finite down to -1.8e308
    assert np.isfinite(lp[:4]).all()


# ---------------------------------------------------------------------------------------------
# item 6: finite supports at the int64 edges and the float64 ends


FINITE_BASES = {
    "bernoulli": (
        lambda: pm.Bernoulli.dist(p=np.float64(0.3)),
        lambda k: mp.log(mp.mpf("0.3") if k == 1 else 1 - mp.mpf("0.3")),
        range(2),
    ),
    "binomial": (
        lambda: pm.Binomial.dist(n=4, p=np.float64(0.3)),
        lambda k: (
            mp.log(mp.binomial(4, k))
            + k * mp.log(mp.mpf("0.3"))
            + (4 - k) * mp.log(1 - mp.mpf("0.3"))
        ),
        range(5),
    ),
    "discrete_uniform": (
        lambda: pm.DiscreteUniform.dist(-2, 3),
        lambda k: -mp.log(6),
        range(-2, 4),
    ),
}

INT_EDGES = [I64_MAX, I64_MIN, I64_MIN + 1, 2**53 + 1, -(2**53) - 1, 2**62]
FLOAT_ENDS = [1e19, -1e19, 1e300, -1e300, np.finfo(np.float64).max, -np.finfo(np.float64).max]


@pytest.mark.parametrize("base", list(FINITE_BASES))
def test_finite_support_at_int64_edges_and_float_ends_vs_mpmath(base):
    """Was: +9.2e18 for Bernoulli + geometric at z = INT64_MIN (``value - k`` wrapped in int64)."""
    make, log_pmf, support = FINITE_BASES[base]
    cases = [
        (Geometric(epsilon=1.0), INT_EDGES),
        (DiscreteGaussian(sigma=3.0), INT_EDGES),
        (Laplace(epsilon=1.0), FLOAT_ENDS),
        (Gaussian(sigma=2.0), FLOAT_ENDS),
    ]
    for mech, zs in cases:
        z = np.array(zs, dtype=np.int64 if mech.integer else np.float64)
        got = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z).eval()
        for zi, gi in zip(zs, got, strict=True):
            ref = _mp_finite(lambda k: log_pmf(k) if k in support else -mp.inf, support, mech, zi)
            _check(float(gi), ref, 1e-14, (base, mech, zi))


def test_finite_support_gradient_at_int64_edges():
    p = pt.dscalar("p")
    z = np.array(INT_EDGES, dtype=np.int64)
    lp = pm.logp(Privatized.dist(pm.Bernoulli.dist(p), Geometric(epsilon=1.0), shape=6), z)
    jac = pytensor.function([p], jacobian(lp, p))(0.3)
    with mp.workdps(GRAD_DPS):
        for zi, ji in zip(INT_EDGES, jac, strict=True):
            ref = mp.diff(
                lambda q, zi=zi: _mp_finite(
                    lambda k: mp.log(q if k == 1 else 1 - q), range(2), Geometric(epsilon=1.0), zi
                ),
                mp.mpf("0.3"),
            )
            assert abs(ji - float(ref)) <= 1e-12 * max(1.0, abs(float(ref))), (zi, ji, ref)


# ---------------------------------------------------------------------------------------------
# item 6: Normal base at the float64 ends


def test_normal_marginals_at_float_ends():
    mu = pt.dscalar("mu")
    z = np.array([1e19, -1e19, 1e300, -1e300, 1e154, -1e154])
    for mech in (Laplace(epsilon=1.0), Gaussian(sigma=2.0)):
        lp = pm.logp(Privatized.dist(pm.Normal.dist(mu, np.float64(1.5)), mech, shape=6), z)
        f = pytensor.function([mu], [lp, jacobian(lp, mu)])
        got, jac = f(0.25)
        assert not np.isnan(got).any() and not (got == np.inf).any()
        for zi, gi, ji in zip(z, got, jac, strict=True):
            with mp.workdps(50):
                d = mp.mpf(zi) - mp.mpf("0.25")
                if mech.family == "laplace":
                    # |d| >> sigma: log p = -log 2b + r^2/2 - |d|/b + log Phi(|d|/sigma - r)
                    b, s = mp.mpf(mech.scale), mp.mpf("1.5")
                    ref = -mp.log(2 * b) + (s / b) ** 2 / 2 - abs(d) / b
                    dref = mp.sign(d) / b
                else:
                    v = mp.mpf("1.5") ** 2 + mp.mpf(mech.sigma) ** 2
                    ref = -(d**2) / (2 * v) - mp.log(2 * mp.pi * v) / 2
                    dref = d / v
            _check(float(gi), ref, 1e-14, (mech, zi))
            if math.isfinite(gi):
                assert np.isfinite(ji) and _rel(float(ji), float(dref)) <= 1e-13, (zi, ji, dref)


# ---------------------------------------------------------------------------------------------
# item 9: float64 exactness with Python literal parameters (float32 constants)


LITERAL_BASES = {
    "discrete_uniform": (lambda: pm.DiscreteUniform.dist(0, 5), lambda k: -mp.log(6), range(6)),
    "binomial": (
        lambda: pm.Binomial.dist(n=10, p=0.5),
        lambda k: mp.log(mp.binomial(10, k)) - 10 * mp.log(2),
        range(11),
    ),
    "bernoulli": (lambda: pm.Bernoulli.dist(0.5), lambda k: -mp.log(2), range(2)),
    "categorical": (
        lambda: pm.Categorical.dist(p=[0.25, 0.75]),
        lambda k: mp.log(mp.mpf("0.25") if k == 0 else mp.mpf("0.75")),
        range(2),
    ),
    "beta_binomial": (
        lambda: pm.BetaBinomial.dist(n=10, alpha=2.0, beta=3.0),
        lambda k: (
            mp.log(mp.binomial(10, k)) + mp.log(mp.beta(k + 2, 10 - k + 3)) - mp.log(mp.beta(2, 3))
        ),
        range(11),
    ),
}


@pytest.mark.parametrize("base", list(LITERAL_BASES))
def test_finite_support_float64_exact_with_literal_parameters(base):
    """Was 2.4e-8 for DiscreteUniform: the base log-pmf was float32."""
    make, log_pmf, support = LITERAL_BASES[base]
    for mech, z in (
        (Laplace(epsilon=1.0), np.array([-3.3, 0.0, 0.7, 2.5, 4.0, 9.1])),
        (Geometric(epsilon=1.0), np.array([-3, 0, 1, 2, 5, 9])),
        (DiscreteGaussian(sigma=2.0), np.array([-3, 0, 1, 2, 5, 9])),
    ):
        lp = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z)
        assert lp.dtype == "float64"
        got = lp.eval()
        for zi, gi in zip(z.tolist(), got, strict=True):
            ref = _mp_finite(log_pmf, support, mech, zi)
            err = _rel(float(gi), float(ref))
            assert err <= 1e-14, (base, mech, zi, err)


@pytest.mark.parametrize(
    "make,log_pmf",
    [
        (lambda: pm.Poisson.dist(3.0), lambda k: _mp_pois(mp.mpf(k), mp.mpf(3))),
        (
            lambda: pm.NegativeBinomial.dist(n=3.0, p=0.5),
            lambda k: mp.log(mp.binomial(k + 2, k)) - (k + 3) * mp.log(2),
        ),
    ],
    ids=["poisson", "negbin"],
)
def test_truncated_sum_float64_with_literal_parameters(make, log_pmf):
    mech = DiscreteGaussian(sigma=2.0)
    z = np.array([-4, 0, 3, 8, 20])
    got = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z).eval()
    for zi, gi in zip(z.tolist(), got, strict=True):
        ref = _mp_finite(log_pmf, range(0, 120), mech, zi)
        assert _rel(float(gi), float(ref)) <= 1e-12, (zi, gi, ref)


# ---------------------------------------------------------------------------------------------
# item 13: memory of the truncated sums


def _grid_cells(z, make_base, mech):
    _start, length = marg.truncated_sum_window(
        pt.as_tensor(z.astype(np.float64)), make_base(), mech
    )
    return int(length.eval()) * z.size


def test_truncated_sum_memory_does_not_grow_with_noise_scale():
    """Was: NegativeBinomial + Laplace(epsilon=1e-3), 2,000 records: 900 MB (10,000: MemoryError).

    The window now follows the base distribution's bulk when that is narrower than the noise's,
    so the grid is records x (a few hundred points) whatever the noise scale.
    """
    rng = np.random.default_rng(1)

    def make():
        return pm.NegativeBinomial.dist(mu=np.float64(20.0), alpha=np.float64(2.0))

    cells = {}
    for eps in (1e-1, 1e-3, 1e-5):
        mech = Laplace(epsilon=eps)
        y = rng.negative_binomial(2.0, 2.0 / 22.0, size=2000)
        z = y + rng.laplace(0.0, mech.scale, size=y.size)
        cells[eps] = _grid_cells(z, make, mech)
    assert cells[1e-5] <= 2000 * 1000, cells
    assert cells[1e-3] <= 2000 * 1000, cells
    assert cells[1e-3] <= marg.MAX_GRID_CELLS


def test_truncated_sum_wide_noise_values_exact():
    """Small epsilon (base window) and records far beyond it, against a brute-force sum."""
    mech = Laplace(epsilon=1e-3)
    z = np.array([-3e4, -2000.5, -1.3, 0.0, 7.7, 20.0, 555.5, 2e4, 9e4])
    mu, alpha = 20.0, 2.0
    lp = pm.logp(
        Privatized.dist(
            pm.NegativeBinomial.dist(mu=np.float64(mu), alpha=np.float64(alpha)), mech, shape=9
        ),
        z,
    ).eval()
    from scipy import special, stats

    ys = np.arange(0, 200_000)
    lpmf = stats.nbinom.logpmf(ys, alpha, alpha / (alpha + mu))
    ref = np.array([special.logsumexp(lpmf + mech.logpdf(zi - ys)) for zi in z])
    assert np.isfinite(lp).all()
    np.testing.assert_allclose(lp, ref, rtol=1e-11)


def test_truncated_sum_grid_capped_never_silently_wrong(monkeypatch):
    """Error path: a grid that would exceed MAX_GRID_CELLS is cut to it; what the cut window
    cannot certify is -inf (never a wrong number, never a MemoryError)."""
    # (windows centred on the mode certify most records at 400 cells each: 280 leaves some out)
    monkeypatch.setattr(marg, "MAX_GRID_CELLS", 28000)
    mech = DiscreteGaussian(sigma=30.0)
    z = np.arange(-200, 2000, 22)  # 100 records, windows of ~1000 points would be needed
    make = lambda: pm.Poisson.dist(np.float64(500.0))  # noqa: E731
    assert _grid_cells(z.astype(np.float64), make, mech) <= 28000
    lp = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z).eval()
    from scipy import special, stats

    ys = np.arange(0, 5000)
    ref = np.array(
        [special.logsumexp(stats.poisson.logpmf(ys, 500.0) + mech.logpdf(zi - ys)) for zi in z]
    )
    finite = np.isfinite(lp)
    assert (~finite).any() and finite.any()
    assert np.all(lp[~finite] == -np.inf)
    np.testing.assert_allclose(lp[finite], ref[finite], rtol=1e-11)


# ---------------------------------------------------------------------------------------------
# truncated sums at far observations: the window is centred on the mass (issue 8, item 4)


def _mp_log_eta_shape(mech, t):
    """``log eta(t) - log eta(0)`` in mpmath."""
    if mech.family == "laplace":
        return -abs(t) / mp.mpf(mech.scale)
    if mech.family == "geometric":
        return mp.mpf(mech.log_alpha) * abs(t)
    return -(t**2) / (2 * mp.mpf(mech.sigma) ** 2)


def _mp_count_logpmf(kind, params, y):
    y = mp.mpf(y)
    if kind == "poisson":
        mu = mp.mpf(params[0])
        return y * mp.log(mu) - mu - mp.loggamma(y + 1)
    n, p = (mp.mpf(v) for v in params)
    return (
        mp.loggamma(y + n) - mp.loggamma(n) - mp.loggamma(y + 1) + n * mp.log(p) + y * mp.log1p(-p)
    )


def _mp_far_reference(kind, params, mech, z, around):
    """``log sum_y p(y) eta(z - y)`` in 30-digit mpmath over ``around +- 1500`` (the terms
    outside are below e^-100 of the largest: checked by the two end terms)."""
    with mp.workdps(30):
        lo = max(0, int(around) - 1500)
        # the noise's log-density up to its constant (the discrete Gaussian's theta series
        # is summed once)
        const = _mp_log_eta(mech, mp.mpf(0))
        terms = [
            _mp_count_logpmf(kind, params, y) + _mp_log_eta_shape(mech, mp.mpf(z) - y) + const
            for y in range(lo, int(around) + 1501)
        ]
        top = max(terms)
        assert terms[-1] < top - 100 and (lo == 0 or terms[0] < top - 100)
        return _mp_logsumexp(terms)


# (kind, params, mechanism, observations, argmax of the summand: scipy, brute force)
FAR_CASES = [
    # light-tailed noise, far observation: the mass hugs z (mode ~ z - sigma^2 log(z/mu))
    ("poisson", (30.0,), DiscreteGaussian(sigma=40.0), [1e6, 3e4], [983_364, 19_626]),
    # noise heavier than the NB tail: the mass stays at the NB bulk however far z is
    ("negbin", (2.0, 2.0 / 7.0), Laplace(scale=5.0), [1e5 + 0.3, 3e7 + 0.3], [6, 6]),
    ("negbin", (2.0, 2.0 / 7.0), Geometric(epsilon=0.1), [2e6, -5e4], [3, 1]),
    # NB tail heavier than the noise: the mass follows z
    ("negbin", (3.0, 0.01), DiscreteGaussian(sigma=5.0), [1e6], [1e6]),
]


@pytest.mark.parametrize(("kind", "params", "mech", "zs", "around"), FAR_CASES)
def test_truncated_sum_far_observations_vs_mpmath(monkeypatch, kind, params, mech, zs, around):
    """A grid cap of 2000 cells (what ~10^4 records get) used to leave the mass outside the
    window for far observations (-inf); the window is now centred on the mode."""
    monkeypatch.setattr(marg, "MAX_GRID_CELLS", 2000)
    if kind == "poisson":
        base = pm.Poisson.dist(np.float64(params[0]))
    else:
        base = pm.NegativeBinomial.dist(n=np.float64(params[0]), p=np.float64(params[1]))
    z = np.array(zs, dtype=np.float64)
    lp = pm.logp(Privatized.dist(base, mech, shape=z.shape), z).eval()
    for got, zi, ai in zip(lp, zs, around, strict=True):
        ref = _mp_far_reference(kind, params, mech, zi, ai)
        _check(float(got), ref, 1e-11, (kind, mech, zi))


def test_posterior_mode_is_the_argmax():
    """The bisection returns the argmax of log p(y) + log eta(z - y) (brute force)."""
    from scipy import stats

    mech = DiscreteGaussian(sigma=7.0)
    z = np.array([-40.0, 0.0, 12.0, 300.0, 5000.0])
    base = pm.NegativeBinomial.dist(n=np.float64(2.5), p=np.float64(0.1))
    mode = marg._posterior_mode(pt.as_tensor(z), base, mech, pt.as_tensor(np.float64(6000.0)))
    ys = np.arange(0, 6001)
    h = stats.nbinom.logpmf(ys, 2.5, 0.1)[None, :] + mech.logpdf(z[:, None] - ys[None, :])
    np.testing.assert_array_equal(mode.eval(), ys[np.argmax(h, axis=1)])
