"""Marginal log-likelihoods of privatized observations against independent references.

References: 40-digit mpmath (incomplete gamma functions) for Poisson + geometric/Laplace,
scipy quadrature and 50-digit mpmath for Normal + Laplace, scipy for Normal + Gaussian, and
brute-force numpy logsumexp over wide windows for the finite and truncated sums.
Pass criterion everywhere: 0 NaN, 0 +inf, relative error <= 1e-10 (absolute where |logp| < 1).
"""

from __future__ import annotations

import json
import math
import pathlib

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, special, stats

import pymc_dp.distributions.marginals as marg
from pymc_dp.distributions.marginal_normal import log_ndtr, normal_laplace_logp
from pymc_dp.distributions.marginal_poisson import (
    PoissonTwoSidedExpLogp,
    poisson_two_sided_exp_logp,
    poisson_two_sided_exp_logp_numpy,
)
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

REFERENCE = pathlib.Path(__file__).with_name("data") / "poisson_two_sided_reference.json"
RTOL = 1e-10


def rel_err(got, ref):
    got, ref = np.asarray(got, float), np.asarray(ref, float)
    return np.abs(got - ref) / np.maximum(1.0, np.abs(ref))


def assert_accurate(got, ref, rtol=RTOL):
    got = np.asarray(got, float)
    assert not np.any(np.isnan(got)), "NaN"
    assert not np.any(got == np.inf), "+inf"
    assert np.all(np.isfinite(got)), "-inf where the reference is finite"
    err = rel_err(got, ref)
    assert err.max() <= rtol, (err.max(), int(err.argmax()))
    return err.max()


def logc_of(family, a):
    return math.log(math.tanh(a / 2)) if family == "geometric" else math.log(a / 2)


# ---------------------------------------------------------------------------------------------
# Poisson + two-sided exponential noise (closed form)


def _mp_poisson_conv(z, mu, a, family):
    """40-digit reference from the incomplete gamma form (see marginal_poisson docstring)."""
    with mp.workdps(40):
        z, mu, a = mp.mpf(z), mp.mpf(mu), mp.mpf(a)
        logc = mp.log(mp.tanh(a / 2)) if family == "geometric" else mp.log(a / 2)
        n = int(mp.floor(z))
        m = max(n + 1, 0)
        l1, l2 = mu * mp.exp(a), mu * mp.exp(-a)
        s = mp.mpf(0)
        if n >= 0:
            s += mp.exp(-mu + l1 - a * z) * mp.gammainc(n + 1, l1, mp.inf, regularized=True)
        s += mp.exp(-mu + l2 + a * z) * (1 if m == 0 else mp.gammainc(m, 0, l2, regularized=True))
        return float(mp.log(s) + logc)


@pytest.fixture(scope="module")
def reference_rows():
    return json.loads(REFERENCE.read_text())


def test_poisson_two_sided_vs_mpmath_table(reference_rows):
    """432 points: mu 1e-8..1e6, z -1e4..1e6, epsilon 0.01..20, both noise families."""
    rows = reference_rows
    assert len(rows) >= 400
    for family in ("geometric", "laplace"):
        sub = [r for r in rows if r[0] == family]
        assert len(sub) >= 200
        for a in sorted({r[3] for r in sub}):
            pts = np.array([[r[1], r[2], r[4]] for r in sub if r[3] == a])
            got, _ = poisson_two_sided_exp_logp_numpy(pts[:, 0], pts[:, 1], a, logc_of(family, a))
            assert_accurate(got, pts[:, 2])


def test_poisson_two_sided_gradient_vs_mpmath(reference_rows):
    """d logp / d mu, including points where all but one term underflow (z = -1e4, 1e6)."""
    rows = [r for r in reference_rows if r[5] is not None]
    assert len(rows) >= 100
    for r in rows:
        family, z, mu, a, _, dref = r
        _, d = poisson_two_sided_exp_logp_numpy(z, mu, a, logc_of(family, a))
        assert np.isfinite(d)
        assert abs(d - dref) <= 1e-8 * max(1.0, abs(dref)), r


def test_poisson_two_sided_graph_and_pytensor_gradient():
    """The PyTensor graph (numba backend) equals the kernel; its gradient equals FD."""
    z = np.array([-1e4, -3.0, 0.0, 2.0, 40.0, 1e6])
    mu0 = np.array([1e6, 0.5, 3.0, 1e-8, 7.0, 2.0])
    a, logc = 0.7, logc_of("laplace", 0.7)
    mu = pt.dvector("mu")
    lp = poisson_two_sided_exp_logp(z, mu, a, logc)
    f = pytensor.function([mu], [lp, pytensor.grad(lp.sum(), mu)])
    val, grad = f(mu0)
    ref, dref = poisson_two_sided_exp_logp_numpy(z, mu0, a, logc)
    np.testing.assert_allclose(val, ref, rtol=1e-15)
    np.testing.assert_allclose(grad, dref, rtol=1e-15)
    h = np.where(mu0 < 1e-3, 0.5 * mu0, 1e-6 * mu0)  # FD at mu = 1e-8 needs a wide step
    fd = (f(mu0 + h)[0] - f(mu0 - h)[0]) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-9)
    assert np.all(np.isfinite(grad))


def test_poisson_two_sided_verify_grad():
    op_in = np.array([-2.0, 0.0, 5.0, 30.0])
    rng = np.random.default_rng(1)

    def fn(mu):
        return PoissonTwoSidedExpLogp(1.3, logc_of("geometric", 1.3))(pt.as_tensor(op_in), mu)[0]

    pytensor.gradient.verify_grad(fn, [np.array([0.3, 2.0, 4.0, 25.0])], rng=rng)


@pytest.mark.parametrize("family", ["geometric", "laplace"])
def test_poisson_through_privatized_vs_brute_force(family):
    """The registry glue uses the mechanism's own rate; brute-force numpy sum as reference."""
    mech = Geometric(epsilon=0.8) if family == "geometric" else Laplace(scale=1.7)
    z = np.arange(-20, 60, 3) + (0.0 if family == "geometric" else 0.25)
    mu = np.float64(6.5)
    lp = pm.logp(Privatized.dist(pm.Poisson.dist(mu), mech, shape=z.shape), z).eval()
    y = np.arange(0, 400)
    ref = [special.logsumexp(stats.poisson.logpmf(y, mu) + mech.logpdf(zi - y)) for zi in z]
    assert_accurate(lp, ref, rtol=1e-12)


def test_poisson_geometric_rejects_fractional_value():
    mech = Geometric(epsilon=1.0)
    lp = marg.poisson_geometric(pt.as_tensor(np.array([1.5, 2.0])), pm.Poisson.dist(2.0), mech)
    out = lp.eval()
    assert out[0] == -np.inf and np.isfinite(out[1])


@pytest.mark.slow
def test_reference_table_reproduces(reference_rows):
    """Recompute a subset of the stored table with mpmath (the table is generated this way)."""
    for r in reference_rows[::9]:
        family, z, mu, a, lp = r[:5]
        assert abs(_mp_poisson_conv(z, mu, a, family) - lp) <= 1e-14 * max(1, abs(lp))


# ---------------------------------------------------------------------------------------------
# Normal + Laplace, Normal + Gaussian


def _mp_normal_laplace(z, mu, sigma, b):
    with mp.workdps(50):
        d, sigma, b = mp.mpf(z) - mp.mpf(mu), mp.mpf(sigma), mp.mpf(b)
        r = sigma / b
        t1 = r**2 / 2 - d / b + mp.log(mp.ncdf(d / sigma - r))
        t2 = r**2 / 2 + d / b + mp.log(mp.ncdf(-d / sigma - r))
        return float(-mp.log(2 * b) + t1 + mp.log1p(mp.exp(t2 - t1)))


def test_normal_laplace_vs_quadrature():
    """Direct numerical convolution (independent of the closed form): 120 points."""
    zs, mus, sigmas, bs, refs = [], [], [], [], []
    for sigma in (0.1, 1.0, 10.0):
        for b in (0.1, 1.0, 10.0):
            for d in (-30.0, -5.0, -1.0, -0.2, 0.0, 0.3, 1.0, 4.0, 12.0, 40.0, 200.0, -150.0, 7.7):
                if abs(d) / max(sigma, b) > 40:
                    continue  # quad loses the far tail; covered by the mpmath test
                z = 0.5 + d
                # the normal factor is < e^-800 outside 0.5 +- 40 sigma
                lo, hi = 0.5 - 40 * sigma, 0.5 + 40 * sigma

                def f(y, z=z, sigma=sigma, b=b):
                    return stats.norm.pdf(y, 0.5, sigma) * stats.laplace.pdf(z - y, scale=b)

                pts = sorted({p for p in (z, 0.5) if lo < p < hi})
                val = integrate.quad(f, lo, hi, points=pts, epsabs=0, epsrel=1e-13, limit=500)[0]
                zs.append(z), mus.append(0.5), sigmas.append(sigma), bs.append(b)
                refs.append(math.log(val))
    assert len(refs) >= 90
    got = normal_laplace_logp(np.array(zs), np.array(mus), np.array(sigmas), np.array(bs)).eval()
    assert_accurate(got, refs, rtol=1e-11)


def test_normal_laplace_extremes_vs_mpmath():
    """sigma/b up to 1e6, |z - mu| up to 1e8: 50-digit evaluation of the closed form."""
    pts = []
    for sigma in (1e-3, 1.0, 1e3, 1e6):
        for b in (1e-3, 1.0, 1e3):
            for d in (-1e8, -1e4, -30.0, -1.0, 0.0, 0.5, 3.0, 1e3, 1e6, 1e8):
                pts.append((d + 2.0, 2.0, sigma, b))
    pts = np.array(pts)
    assert len(pts) >= 120
    ref = [_mp_normal_laplace(*p) for p in pts]
    got = normal_laplace_logp(pts[:, 0], pts[:, 1], pts[:, 2], pts[:, 3]).eval()
    assert_accurate(got, ref)


def test_normal_laplace_gradients_vs_mpmath():
    """d/dmu and d/dsigma, finite and equal to 50-digit finite differences (one compile)."""
    mu, sigma, z, b = pt.dscalars("mu", "sigma", "z", "b")
    lp = normal_laplace_logp(z, mu, sigma, b)
    f = pytensor.function([z, b, mu, sigma], pytensor.grad(lp, [mu, sigma]))
    for z0, b0 in [(2.0, 1.0), (1e6, 1e-3), (-1e4, 1.0), (0.3, 1e-3), (50.0, 1e3)]:
        for m0, s0 in [(0.0, 1.0), (1.0, 1e3), (-2.0, 1e-2), (0.0, 1e6)]:
            g = np.array(f(z0, b0, m0, s0))
            assert np.all(np.isfinite(g))
            with mp.workdps(50):
                h = mp.mpf(10) ** -20
                gm = (_mp_hp(z0, m0 + h, s0, b0) - _mp_hp(z0, m0 - h, s0, b0)) / (2 * h)
                hs = s0 * h
                gs = (_mp_hp(z0, m0, s0 + hs, b0) - _mp_hp(z0, m0, s0 - hs, b0)) / (2 * hs)
            ref = np.array([float(gm), float(gs)])
            np.testing.assert_allclose(g, ref, rtol=1e-7, atol=1e-12, err_msg=f"{z0, b0, m0, s0}")


def _mp_hp(z, mu, sigma, b):
    d, sigma, b = mp.mpf(z) - mp.mpf(mu), mp.mpf(sigma), mp.mpf(b)
    r = sigma / b
    t1 = r**2 / 2 - d / b + mp.log(mp.ncdf(d / sigma - r))
    t2 = r**2 / 2 + d / b + mp.log(mp.ncdf(-d / sigma - r))
    return -mp.log(2 * b) + t1 + mp.log1p(mp.exp(t2 - t1))


def test_log_ndtr_vs_scipy():
    x = np.concatenate([-np.logspace(-3, 8, 60), [0.0], np.logspace(-3, 2, 40)])
    got = log_ndtr(x).eval()
    assert_accurate(got, special.log_ndtr(x), rtol=1e-13)


def test_normal_gaussian_vs_scipy():
    mech = Gaussian(sigma=0.7)
    z = np.linspace(-50, 50, 201)
    lp = pm.logp(
        Privatized.dist(pm.Normal.dist(np.float64(1.0), np.float64(2.0)), mech, shape=z.shape), z
    ).eval()
    assert_accurate(lp, stats.norm.logpdf(z, 1.0, math.hypot(2.0, 0.7)), rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# finite supports (any mechanism) and truncated sums


MECHS = {
    "geometric": Geometric(epsilon=0.7),
    "laplace": Laplace(scale=1.3),
    "discrete_gaussian": DiscreteGaussian(sigma=1.5),
    "gaussian": Gaussian(sigma=0.9),
}

FINITE = {
    "bernoulli": (
        lambda: pm.Bernoulli.dist(p=np.float64(0.3)),
        lambda y: stats.bernoulli.logpmf(y, 0.3),
    ),
    "binomial": (
        lambda: pm.Binomial.dist(n=np.int64(12), p=np.float64(0.3)),
        lambda y: stats.binom.logpmf(y, 12, 0.3),
    ),
    "betabinomial": (
        lambda: pm.BetaBinomial.dist(n=np.int64(9), alpha=np.float64(1.5), beta=np.float64(2.5)),
        lambda y: stats.betabinom.logpmf(y, 9, 1.5, 2.5),
    ),
    "discreteuniform": (
        lambda: pm.DiscreteUniform.dist(lower=np.int64(2), upper=np.int64(7)),
        lambda y: stats.randint.logpmf(y, 2, 8),
    ),
    "categorical": (
        lambda: pm.Categorical.dist(p=np.array([0.2, 0.5, 0.3])),
        lambda y: np.where(y < 3, np.log(np.array([0.2, 0.5, 0.3])[np.minimum(y, 2)]), -np.inf),
    ),
}


def _brute(z, logpmf, mech, ys):
    with np.errstate(divide="ignore"):
        return np.array([special.logsumexp(logpmf(ys) + mech.logpdf(zi - ys)) for zi in z])


def _zgrid(mech):
    z = np.array([-1e4, -300, -40, -5, -1, 0, 1, 2, 3, 5, 8, 13, 30, 400, 1e5])
    return z if mech.integer else z + 0.37


@pytest.mark.parametrize("base", list(FINITE))
def test_finite_support_vs_brute_force(base):
    make, logpmf = FINITE[base]
    n_points = 0
    for mech in MECHS.values():
        z = _zgrid(mech)
        lp = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z).eval()
        assert_accurate(lp, _brute(z, logpmf, mech, np.arange(0, 20)), rtol=1e-12)
        n_points += len(z)
    assert n_points >= 60  # x 5 bases >= 300 points


def test_finite_support_gradients_where_terms_underflow():
    """Bernoulli + narrow Gaussian at z = 1: the k = 0 term is exp(-2e4) and underflows."""
    p = pt.dscalar("p")
    for mech, zs in [
        (Gaussian(sigma=0.005), [1.0, 0.0, 0.5, 0.9]),
        (Geometric(epsilon=20.0), [1, 0, -3, 5]),
        (Laplace(scale=1e-3), [1.0, 0.2, -0.5]),
    ]:
        z = np.array(zs)
        lp = pm.logp(Privatized.dist(pm.Bernoulli.dist(p), mech, shape=z.shape), z).sum()
        f = pytensor.function([p], [lp, pytensor.grad(lp, p)])
        for p0 in (1e-3, 0.3, 0.99):
            v, g = f(p0)
            assert np.isfinite(v) and np.isfinite(g)
            h = 1e-7
            fd = (f(p0 + h)[0] - f(p0 - h)[0]) / (2 * h)
            assert abs(g - fd) <= 1e-5 * max(1.0, abs(fd)), (mech, p0, g, fd)


def test_binomial_recordwise_n_and_symbolic_gradient():
    n = np.array([1, 5, 12])
    z = np.array([3, 0, 11])
    mech = Geometric(epsilon=1.0)
    p = pt.dscalar("p")
    lp = pm.logp(Privatized.dist(pm.Binomial.dist(n=n, p=p), mech), z)
    f = pytensor.function([p], [lp, pytensor.grad(lp.sum(), p)])
    v, g = f(0.4)
    ks = np.arange(13)
    ref = [
        special.logsumexp(stats.binom.logpmf(ks, ni, 0.4) + mech.logpdf(zi - ks))
        for ni, zi in zip(n, z, strict=True)
    ]
    assert_accurate(v, ref, rtol=1e-12)
    fd = (f(0.4 + 1e-7)[0].sum() - f(0.4 - 1e-7)[0].sum()) / 2e-7
    assert abs(g - fd) < 1e-5 * max(1, abs(fd))


TRUNC = {
    "poisson": (lambda: pm.Poisson.dist(np.float64(6.5)), lambda y: stats.poisson.logpmf(y, 6.5)),
    "negbin": (
        lambda: pm.NegativeBinomial.dist(mu=np.float64(6.5), alpha=np.float64(1.7)),
        lambda y: stats.nbinom.logpmf(y, 1.7, 1.7 / (1.7 + 6.5)),
    ),
}


@pytest.mark.parametrize(
    "base,family",
    [
        ("poisson", "discrete_gaussian"),
        ("negbin", "geometric"),
        ("negbin", "laplace"),
        ("negbin", "discrete_gaussian"),
    ],
)
def test_truncated_sums_vs_brute_force(base, family):
    make, logpmf = TRUNC[base]
    mech = MECHS[family]
    z = np.concatenate([_zgrid(mech)[:-1], np.arange(-10, 40, 1.0) + (0 if mech.integer else 0.37)])
    lp = pm.logp(Privatized.dist(make(), mech, shape=z.shape), z).eval()
    ref = _brute(z, logpmf, mech, np.arange(0, 3000))
    assert len(z) >= 60
    assert_accurate(lp, ref, rtol=1e-11)


def test_truncated_sum_gradient_matches_fd():
    mu, alpha = pt.dscalars("mu", "alpha")
    z = np.array([-30, 0, 4, 9, 60])
    for mech in (MECHS["geometric"],):  # one compile (the value test covers the others)
        lp = pm.logp(
            Privatized.dist(pm.NegativeBinomial.dist(mu=mu, alpha=alpha), mech, shape=5), z
        )
        f = pytensor.function([mu, alpha], [lp.sum(), *pytensor.grad(lp.sum(), [mu, alpha])])
        v, gm, ga = f(5.0, 2.0)
        h = 1e-6
        fdm = (f(5.0 + h, 2.0)[0] - f(5.0 - h, 2.0)[0]) / (2 * h)
        fda = (f(5.0, 2.0 + h)[0] - f(5.0, 2.0 - h)[0]) / (2 * h)
        assert np.isfinite([v, gm, ga]).all()
        np.testing.assert_allclose([gm, ga], [fdm, fda], rtol=1e-5)


def test_truncated_sum_never_silently_wrong(monkeypatch):
    """With a window far too narrow, every value is either within 1e-12 or -inf."""
    monkeypatch.setattr(marg, "TAIL_NATS", 1.0)
    mech = DiscreteGaussian(sigma=3.0)
    z = np.arange(-20, 60)
    lp = pm.logp(Privatized.dist(pm.Poisson.dist(np.float64(30.0)), mech, shape=z.shape), z).eval()
    ref = _brute(z, lambda y: stats.poisson.logpmf(y, 30.0), mech, np.arange(0, 500))
    finite = np.isfinite(lp)
    assert (~finite).sum() > 0  # the bound did fail somewhere ...
    assert np.all(lp[~finite] == -np.inf)  # ... and then the answer is -inf,
    assert rel_err(lp[finite], ref[finite]).max() <= 1e-12  # never a wrong number


# ---------------------------------------------------------------------------------------------
# registry


def test_unsupported_pair_names_the_pair_and_alternatives():
    with pytest.raises(NotImplementedError, match=r"Gamma with laplace noise.*marginalize=False"):
        Privatized.dist(pm.Gamma.dist(2.0, 1.0), Laplace(scale=1.0))
    with pytest.raises(NotImplementedError, match="Release"):
        Privatized.dist(pm.Geometric.dist(0.5), Geometric(epsilon=1.0))
    # a continuous base under an integer mechanism is refused earlier, by the input checks
    with pytest.raises(TypeError, match="integer noise to integer values"):
        Privatized.dist(pm.Normal.dist(), Geometric(epsilon=1.0))


def test_register_marginal_decorator_and_overwrite():
    @marg.register_marginal(pm.Gamma, "laplace")
    def gamma_laplace(value, base_rv, mechanism):
        return pt.zeros_like(pt.as_tensor_variable(value), dtype="float64")

    try:
        assert marg.get_marginal(pm.Gamma.dist(2.0, 1.0).owner.op, Laplace(scale=1.0)) is (
            gamma_laplace
        )
        with pytest.raises(ValueError, match="already registered"):
            marg.register_marginal(pm.Gamma, "laplace", lambda *a: None)
        z = pm.logp(Privatized.dist(pm.Gamma.dist(2.0, 1.0), Laplace(scale=1.0)), 0.3).eval()
        assert z == 0.0
    finally:
        del marg._REGISTRY[(pm.Gamma.rv_type, "laplace")]
    with pytest.raises(TypeError, match="Distribution class"):
        marg.register_marginal("Gamma", "laplace", gamma_laplace)
    with pytest.raises(TypeError, match="family name"):
        marg.register_marginal(pm.Gamma, 3, gamma_laplace)


def test_finite_support_gradient_finite_at_rounded_boundary():
    """sigmoid(40) == 1.0 in floating point: the marginal and its gradient stay finite.

    (PyMC's own Beta prior on the log-odds scale has a NaN gradient there; this is about the
    likelihood, so the log-odds enter directly.)
    """
    x = pt.dscalar("x")
    base = pm.Binomial.dist(10, pm.math.sigmoid(x))
    z = np.array([3, 9, -2])
    lp = pm.logp(Privatized.dist(base, Geometric(epsilon=0.5), shape=3), z).sum()
    f = pytensor.function([x], [lp, pytensor.grad(lp, x)])
    for v in (-800.0, -40.0, 40.0, 800.0):
        assert np.isfinite(f(v)).all(), v


def test_poisson_table_path_equals_elementwise_path():
    """Integer releases with a shared rate use a per-integer table: same numbers."""
    rng = np.random.default_rng(7)
    z = rng.integers(-30, 60, size=500).astype(float)
    a, logc = 0.4, logc_of("geometric", 0.4)
    fast, dfast = poisson_two_sided_exp_logp_numpy(z, 6.0, a, logc)
    slow = [poisson_two_sided_exp_logp_numpy(z[i : i + 1], 6.0, a, logc) for i in range(50)]
    np.testing.assert_array_equal(fast[:50], [s[0][0] for s in slow])
    np.testing.assert_array_equal(dfast[:50], [s[1][0] for s in slow])


# ---------------------------------------------------------------------------------------------
# the base distribution's own parameter checks


def _invalid_base_cases():
    lap, geo = Laplace(scale=1.0), Geometric(epsilon=1.0)
    bad_simplex = pytensor.shared(np.array([0.5, -0.1, 0.6]))  # symbolic: skips the eager check
    return {
        "bernoulli_p_above_1": (pm.Bernoulli.dist(1.5), lap, "0 <= p <= 1"),
        "bernoulli_p_below_0": (pm.Bernoulli.dist(-0.5), geo, "0 <= p <= 1"),
        "binomial_negative_n": (pm.Binomial.dist(n=-3, p=0.5), lap, "n >= 0"),
        "binomial_p_above_1": (pm.Binomial.dist(n=3, p=1.5), lap, "p <= 1"),
        "categorical_negative_p": (pm.Categorical.dist(p=bad_simplex), lap, "p"),
        "discrete_uniform_lower_above_upper": (pm.DiscreteUniform.dist(3, 1), lap, "lower"),
        "beta_binomial_negative_alpha": (pm.BetaBinomial.dist(-1.0, 1.0, 3), lap, "alpha > 0"),
        "beta_binomial_negative_n": (pm.BetaBinomial.dist(1.0, 1.0, -3), lap, "n >= 0"),
        "normal_laplace_negative_sigma": (pm.Normal.dist(0.0, -1.0), lap, "sigma > 0"),
        "normal_gaussian_negative_sigma": (pm.Normal.dist(0.0, -1.0), Gaussian(sigma=1.0), "sigma"),
        "poisson_geometric_negative_mu": (pm.Poisson.dist(-1.0), geo, "mu >= 0"),
        "poisson_laplace_nan_mu": (pm.Poisson.dist(np.nan), lap, "mu >= 0"),
        "poisson_laplace_inf_mu": (pm.Poisson.dist(np.inf), lap, "finite"),
        "poisson_discrete_gaussian_negative_mu": (
            pm.Poisson.dist(-1.0),
            DiscreteGaussian(sigma=1.0),
            "mu >= 0",
        ),
        "negative_binomial_negative_n": (pm.NegativeBinomial.dist(n=-1.0, p=0.5), lap, "n > 0"),
        "negative_binomial_p_above_1": (pm.NegativeBinomial.dist(n=1.0, p=1.5), geo, "p <= 1"),
    }


@pytest.mark.parametrize("case", sorted(_invalid_base_cases()))
def test_invalid_base_parameters_raise_like_pymc(case):
    """Invalid base parameters raise ParameterValueError, as PyMC's own logp does (the
    closed forms and the clipped finite sums used to return a finite number or NaN)."""
    base, mech, msg = _invalid_base_cases()[case]
    with pytest.raises(pm.logprob.utils.ParameterValueError, match=msg):
        pm.logp(Privatized.dist(base, mech), 1.0).eval()


@pytest.mark.parametrize(
    "make",
    [
        lambda: pm.Bernoulli.dist(1.0),  # the boundary values are valid
        lambda: pm.Binomial.dist(n=0, p=0.0),
        lambda: pm.Normal.dist(0.0, 1e-300),
        lambda: pm.Poisson.dist(0.0),
        lambda: pm.DiscreteUniform.dist(2, 2),
    ],
)
def test_valid_boundary_base_parameters_stay_finite(make):
    lp = pm.logp(Privatized.dist(make(), Laplace(scale=1.0)), 1.0).eval()
    assert np.isfinite(lp)


@pytest.mark.parametrize(
    "build",
    [
        lambda x: (pm.Normal.dist(0.0, x), Laplace(scale=1.0), np.array([0.3, -2.0]), [-1.0]),
        lambda x: (pm.Normal.dist(0.0, x), Gaussian(sigma=1.0), np.array([0.3, -2.0]), [-1.0]),
        lambda x: (pm.Poisson.dist(x), Geometric(epsilon=1.0), np.array([0.0, 3.0]), [-1.0]),
        # 100 equal values: the closed form runs on the unique values
        lambda x: (pm.Poisson.dist(x), Laplace(scale=1.0), np.full(100, 2.0), [-1.0]),
        lambda x: (pm.Bernoulli.dist(x), Laplace(scale=1.0), np.array([0.3, 2.0]), [-1.0, 1.5]),
        lambda x: (pm.Binomial.dist(5, x), Geometric(epsilon=1.0), np.array([1, 7]), [-1.0, 1.5]),
    ],
)
def test_invalid_base_parameters_give_minus_inf_in_a_model(build):
    """Inside a model the check becomes ``-inf`` with a finite gradient; valid points are
    unchanged (negative control: a valid parameter gives a finite logp)."""
    with pm.Model() as model:
        x = pm.Flat("x")
        base, mech, z, bads = build(x)
        Privatized("z", base, mech, observed=z)
    f = model.compile_fn([model.logp(), model.dlogp()], point_fn=False)
    for bad in bads:
        lp, g = f(np.float64(bad))
        assert lp == -np.inf, bad
        assert np.isfinite(g).all(), (bad, g)
    lp, g = f(np.float64(0.4))
    assert np.isfinite(lp) and np.isfinite(g).all()
