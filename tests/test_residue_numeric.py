"""Issue 24: the numeric residue of the hostile-input review, each against an independent reference.

Every case below failed before its fix (the value it gave then is in the comment). References:
mpmath at 40+ digits (working precision raised with the magnitude of the terms), brute-force
sums, or the exact limit. Deterministic: no random draws.
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_dp as pmdp
from pymc_dp.distributions.markov_chain import MarkovChain
from pymc_dp.kernels.bessel_sampling import bessel_logpmf

F64 = np.float64


def _bessel_mp(k, nu, a):
    """log P(N = k) of Bessel(nu, a) in mpmath (series for log I_nu where a^2/4 < nu + 1)."""
    k, nu, a = mpmath.mpf(int(k)), mpmath.mpf(nu), mpmath.mpf(a)
    big = max(abs(k * mpmath.log(a + 2)), a, nu * mpmath.log(nu + 2), k * mpmath.log(k + 2), 10)
    with mpmath.workdps(int(40 + mpmath.log10(big))):
        y = a * a / 4
        if y < (nu + 1) / 4:  # 0F1 series, term ratio <= 1/4
            s = t = mpmath.mpf(1)
            j = 0
            while t > s * mpmath.mpf(10) ** (-mpmath.mp.dps - 5):
                j += 1
                t *= y / (j * (nu + j))
                s += t
            log_i = nu * mpmath.log(a / 2) - mpmath.loggamma(nu + 1) + mpmath.log(s)
        else:
            log_i = mpmath.log(mpmath.besseli(nu, a, maxterms=10**6))
        lp = (2 * k + nu) * mpmath.log(a / 2) - log_i
        return float(lp - mpmath.loggamma(k + 1) - mpmath.loggamma(k + nu + 1))


# ---- Bessel ----------------------------------------------------------------------------------

# a = 5e-324: a / 2 rounds to 0, so 2n log(a/2) was -inf (n >= 1) and 0 * -inf NaN (n = 0)
BESSEL_TINY_A = [
    (k, nu)
    for nu in (0.0, 1e-300, 0.5, 1.9, 4.0, 216.6, 1e6, 1e15)
    for k in (0, 1, 679, 2**31, 2**63 - 1)
]


def test_bessel_logpmf_at_the_smallest_subnormal_a():
    """Before: NaN at k = 0 and -inf at k >= 1 (exact about -1490 at k = 1)."""
    k = np.array([c[0] for c in BESSEL_TINY_A], dtype=np.int64)
    nu = np.array([c[1] for c in BESSEL_TINY_A])
    got = bessel_logpmf(k, nu, 5e-324)
    ref = np.array([_bessel_mp(kk, n, 5e-324) for kk, n in BESSEL_TINY_A])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # negative control: the same comparison rejects the law at twice the argument (log P
    # moves by 2k log 2 for k >= 1); before the fix the logarithm was taken of a / 2 = 0
    wrong = bessel_logpmf(k, nu, 1e-323)
    assert not np.allclose(wrong, ref, rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def bessel_logp_fn():
    nu, a = pt.dscalar("nu"), pt.dscalar("a")
    value = pt.lscalar("value")
    lp = pm.logp(pmdp.Bessel.dist(nu, a), value)
    return pytensor.function([nu, a, value], [lp, pytensor.grad(lp, a)])


@pytest.mark.parametrize(
    ("nu", "a", "k"),
    [
        (1.9, 9.009463052461551e259, 2**63 - 1),  # the fresh-clone fuzz failure (NaN)
        (0.0, 5e-324, 0),  # NaN before
        (0.0, 5e-324, 1),  # -inf before
        (216.6, 5e-324, 1),  # -inf before (exact -1495.6)
        (0.0, 4e297, 0),
        (0.0, 4e297, 2**63 - 1),
        (1e6, 1.2e160, 679),  # reported hangs
        (216.6, 4.2e216, 8046),
    ],
)
def test_bessel_logp_hard_points(bessel_logp_fn, nu, a, k):
    lp, da = bessel_logp_fn(nu, a, k)
    assert float(lp) == pytest.approx(_bessel_mp(k, nu, a), rel=1e-12, abs=1e-12)
    # d/da log P = 2k/a - I_{nu+1}(a)/I_nu(a): finite unless 2k/a overflows
    with mpmath.workdps(30):
        ratio = mpmath.besseli(nu + 1, a) / mpmath.besseli(nu, a) if a > 1e-300 else 0
        ref_da = float(2 * mpmath.mpf(k) / mpmath.mpf(a) - ratio)
    if np.isfinite(ref_da):
        assert float(da) == pytest.approx(ref_da, rel=1e-9, abs=1e-12)


# ---- Privatized logp: infinite observations, huge sigma, far counts -------------------------


def test_poisson_laplace_at_infinite_values():
    """Before: NaN at +-inf. The marginal sum_y Pois(y) e^{-|z - y|/b} / (2b) is 0 there."""
    mech = pmdp.Laplace(scale=1e3)
    mu = pt.dscalar("mu")
    z = pmdp.Privatized.dist(pm.Poisson.dist(mu), mech)
    v = pt.dscalar("v")
    lp = pm.logp(z, v)
    f = pytensor.function([mu, v], [lp, pytensor.grad(lp, mu)])
    for value in (np.inf, -np.inf):
        out, dmu = f(2.2, value)
        assert float(out) == -np.inf
        assert np.isfinite(dmu)
    # the finite neighbour still agrees with a brute-force sum (the fix touched only +-inf)
    y = np.arange(0, 200)
    from scipy import stats

    ref = np.logaddexp.reduce(
        stats.poisson.logpmf(y, 2.2) - np.log(2 * mech.scale) - np.abs(3.5 - y) / mech.scale
    )
    assert float(f(2.2, 3.5)[0]) == pytest.approx(ref, rel=1e-12)


def _normal_gaussian_mp(z, mu, sigma, s):
    with mpmath.workdps(50):
        var = mpmath.mpf(sigma) ** 2 + mpmath.mpf(s) ** 2
        d = mpmath.mpf(z) - mpmath.mpf(mu)
        lp = -mpmath.log(2 * mpmath.pi * var) / 2 - d * d / (2 * var)
        dsigma = -mpmath.mpf(sigma) / var + d * d * mpmath.mpf(sigma) / var**2
        return float(lp), float(dsigma)


@pytest.mark.parametrize(
    ("mu", "sigma"),
    [(80.0, 5.8e286), (0.0, 2.7e191), (0.0, 1.4e154), (3.0, 1e307), (1.0, 2.0), (0.0, 1e-300)],
)
def test_normal_gaussian_huge_sigma(mu, sigma):
    """Before: -inf once sigma^2 overflows (exact -661.2 and -441.7 at the first two)."""
    m, sg = pt.dscalar("mu"), pt.dscalar("sigma")
    z = pmdp.Privatized.dist(pm.Normal.dist(m, sg), pmdp.Gaussian(sigma=1.0))
    lp = pm.logp(z, F64(0.0))
    f = pytensor.function([m, sg], [lp, pytensor.grad(lp, sg)])
    got, dsg = f(mu, sigma)
    ref, ref_d = _normal_gaussian_mp(0.0, mu, sigma, 1.0)
    assert float(got) == pytest.approx(ref, rel=1e-13)
    assert float(dsg) == pytest.approx(ref_d, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(
    ("bad", "which", "mech"),
    [
        (np.nan, "mu", pmdp.Laplace(scale=1.0)),
        (np.nan, "mu", pmdp.Gaussian(sigma=1.0)),
        (-np.inf, "mu", pmdp.Laplace(scale=1.0)),
        (np.inf, "sigma", pmdp.Gaussian(sigma=1.0)),
        (np.nan, "sigma", pmdp.Laplace(scale=1.0)),
    ],
)
def test_normal_base_nonfinite_parameters_are_parameter_errors(bad, which, mech):
    """Before: NaN (mu = NaN; sigma = inf with Gaussian noise). Now the base's parameter check
    (ParameterValueError, a ValueError) as for every other invalid parameter."""
    mu, sigma = (bad, 2.0) if which == "mu" else (1.0, bad)
    z = pmdp.Privatized.dist(pm.Normal.dist(F64(mu), F64(sigma)), mech)
    with pytest.raises(ValueError, match="mu and sigma finite"):
        pm.logp(z, F64(3.0)).eval()
    with pm.Model() as model:
        m = pm.Data("m", F64(mu))
        pmdp.Privatized("z", pm.Normal.dist(m, F64(sigma)), mech, observed=np.array([3.0]))
    assert model.compile_logp()({}) == -np.inf


def _negbin_geometric_mp(z, mu, alpha, mech):
    """Brute-force log sum_y NB(y) eta(z - y) over y within 500 of z and of the mean."""
    with mpmath.workdps(50):
        n = mpmath.mpf(alpha)
        p = n / (n + mpmath.mpf(mu))
        la = mpmath.mpf(mech.log_alpha)
        logc = mpmath.log((1 - mpmath.exp(la)) / (1 + mpmath.exp(la)))

        def term(y):
            y = mpmath.mpf(y)
            lnb = (
                mpmath.loggamma(y + n)
                - mpmath.loggamma(n)
                - mpmath.loggamma(y + 1)
                + n * mpmath.log(p)
                + y * mpmath.log(1 - p)
            )
            return lnb + logc + la * abs(mpmath.mpf(z) - y)

        ys = sorted(set(range(max(z - 500, 0), z + 500)) | set(range(0, 3000)))
        terms = [term(y) for y in ys]
        m = max(terms)
        return float(m + mpmath.log(mpmath.fsum(mpmath.exp(t - m) for t in terms)))


@pytest.mark.slow  # a far observation sums the longest window allowed (2**24 cells): ~10 s
@pytest.mark.parametrize("z", [2**53, 2**52 + 3, 10**12])
def test_negative_binomial_geometric_far_observation(z):
    """Before: -7.625e15 (and later -inf) at 2**53 against the exact -6.243e15: the window was
    clipped at 2**52 and its tail check differenced values of size 6e15."""
    mech = pmdp.Geometric(epsilon=1.0)
    base = pm.NegativeBinomial.dist(mu=F64(309.7), alpha=F64(309.7))
    got = float(pm.logp(pmdp.Privatized.dist(base, mech), np.int64(z)).eval())
    assert got == pytest.approx(_negbin_geometric_mp(z, 309.7, 309.7, mech), rel=1e-12)


def test_negative_binomial_geometric_near_observations():
    """The tail check's closed-form increments change nothing for ordinary observations."""
    mech = pmdp.Geometric(epsilon=1.0)
    base = pm.NegativeBinomial.dist(mu=F64(309.7), alpha=F64(309.7))
    zs = np.array([-20, 0, 300, 5000], dtype=np.int64)
    got = pm.logp(pmdp.Privatized.dist(base, mech, shape=4), zs).eval()
    ref = [_negbin_geometric_mp(int(z), 309.7, 309.7, mech) for z in zs]
    np.testing.assert_allclose(got, ref, rtol=1e-12)


# ---- timedelta64 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "arg"),
    [
        (pmdp.Laplace, "scale"),
        (pmdp.Laplace, "epsilon"),
        (pmdp.Geometric, "epsilon"),
        (pmdp.Geometric, "alpha"),
        (pmdp.Gaussian, "sigma"),
        (pmdp.Gaussian, "rho"),
        (pmdp.DiscreteGaussian, "rho"),
        (pmdp.DiscreteGaussian, "sigma"),
    ],
)
def test_timedelta_mechanism_parameters_are_type_errors(cls, arg):
    """Before: a raw TypeError from float() ('... not datetime.timedelta') naming nothing."""
    with pytest.raises(TypeError, match=arg):
        cls(**{arg: np.timedelta64(5, "s")})
    if arg in ("epsilon",):
        with pytest.raises(TypeError, match="sensitivity"):
            cls(epsilon=1.0, sensitivity=np.timedelta64(2, "s"))


@pytest.mark.parametrize(
    "observed",
    [np.array([5], dtype="timedelta64[s]"), np.timedelta64(5, "s")],
    ids=["array", "scalar"],
)
def test_timedelta_observed_is_a_type_error(observed):
    """Before: 'int() argument must be ... not datetime.timedelta' (timedelta64 is an integer
    subtype for numpy)."""
    with pm.Model():
        with pytest.raises(TypeError, match="observed"):
            pmdp.Privatized(
                "y", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=1.0), observed=observed
            )
        x = pm.Poisson("x", 2.0, shape=3)
        with pytest.raises(TypeError, match="observed"):
            pmdp.Release("r", x.sum(), pmdp.Geometric(epsilon=1.0), observed=observed)


def test_timedelta_set_data_is_a_type_error():
    with pm.Model() as model:
        data = pm.Data("z", np.array([3, 4], dtype=np.int64))
        pmdp.Privatized("y", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=1.0), observed=data)
    with model, pytest.raises(TypeError, match="observed"):
        pm.set_data({"z": np.array([1, 2], dtype="timedelta64[s]")})


# ---- MarkovChain -------------------------------------------------------------------------------


def _modal_path(init, trans, steps):
    path = [int(np.argmax(init))]
    for _ in range(steps - 1):
        path.append(int(np.argmax(trans[path[-1]])))
    return path


@pytest.mark.parametrize("shape", [(1, 5), (1, 1, 4), (2, 5), (3, 1), (6,)])
def test_markov_chain_initial_point_any_batch_shape(shape):
    """Before: shape=(1, T) failed in initial_point (scan: Vector(int64, shape=(1,)) against
    Vector(int64, shape=(?,))); the support point was a Fortran-ordered view for batch > 1."""
    init = np.array([0.2, 0.1, 0.7])
    trans = np.array([[0.1, 0.8, 0.1], [0.6, 0.2, 0.2], [0.05, 0.9, 0.05]])
    with pm.Model() as model:
        MarkovChain("s", init, trans, shape=shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = model.initial_point()["s"]
    assert s.shape == shape and s.dtype == np.int64
    assert s.flags["C_CONTIGUOUS"]
    expect = np.broadcast_to(np.array(_modal_path(init, trans, shape[-1])), shape)
    np.testing.assert_array_equal(s, expect)


# ---- Privatized draws --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "mech"),
    [
        (np.nan, pmdp.Geometric(epsilon=1.0)),
        (-1.0, pmdp.Geometric(epsilon=1.0)),
        (np.inf, pmdp.Geometric(epsilon=1.0)),
        (1e19, pmdp.Geometric(epsilon=1.0)),
        (2.0**62 * 1.5, pmdp.Geometric(epsilon=1.0)),
        (np.nan, pmdp.DiscreteGaussian(sigma=2.0)),
        (np.inf, pmdp.DiscreteGaussian(sigma=2.0)),
    ],
)
def test_privatized_draw_refuses_invalid_or_huge_rates(rate, mech):
    """Before: a NaN or negative rate drew a number (PyMC's Poisson draw gives 0 there) and a
    rate >= 1e19 or inf a wrapped int64 extreme (numpy itself refuses such rates)."""
    z = pmdp.Privatized.dist(pm.Poisson.dist(F64(rate)), mech, shape=(3,))
    with pytest.raises(ValueError, match="dist"):
        pm.draw(z, random_seed=1)
    # the same inside a compiled function with a symbolic rate (what predictive sampling uses)
    mu = pt.dscalar("mu")
    f = pm.compile([mu], pmdp.Privatized.dist(pm.Poisson.dist(mu), mech, shape=(3,)))
    with pytest.raises(ValueError, match="dist"):
        f(rate)


def test_privatized_draw_at_valid_rates_is_base_plus_noise():
    """Valid rates up to 2**62 draw: Poisson(mu) + noise within 60 noise scales of mu (the
    Poisson's own spread is below 40 standard deviations with probability 1 - 1e-300)."""
    mech = pmdp.Geometric(epsilon=1.0)
    mu = pt.dscalar("mu")
    f = pm.compile(
        [mu], pmdp.Privatized.dist(pm.Poisson.dist(mu), mech, shape=(50,)), random_seed=3
    )
    for rate in (0.0, 3.5, 1e6, 1e15, 2.0**62):
        z = np.asarray(f(rate))
        assert z.dtype == np.int64 and z.shape == (50,)
        spread = 40 * np.sqrt(rate) + 60 / -mech.log_alpha + 1e-3 * rate / 2**52
        assert np.all(np.abs(z.astype(float) - rate) <= spread), (rate, z[:5])
