"""DiscreteGaussian mechanism (Canonne, Kamath & Steinke 2020).

Accounting: rho closed form exact for the sampled rational sigma, the exact delta(epsilon) curve
(Theorem 7) against an mpmath sum of the definition, calibrations round towards more noise.
Validation by hypothesis; exact-sampler goodness of fit and empirical privacy, each statistical
assertion at false alarm <= 1e-6 with a negative control.
"""

import itertools
import math
import numbers
from fractions import Fraction

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import pymc_dp.kernels.discrete_gaussian as dgk
from pymc_dp import accounting
from pymc_dp.mechanisms.base import PrivacyGuarantee
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.testing import (
    assert_gof,
    assert_rejects,
    chisquare_gof,
    empirical_delta_lower_bound,
)

# ---- zCDP accounting -------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 2.0, 3.7, 100.0, 1e6])
@pytest.mark.parametrize("sens", [1, 3])
def test_sigma_parameterization_rho(sigma, sens):
    m = DiscreteGaussian(sigma=sigma, sensitivity=sens)
    assert m.family == "discrete_gaussian" and m.integer
    assert m.sigma2 >= Fraction(sigma) ** 2  # more noise, never less
    assert m.sigma / sigma - 1 <= 1e-8
    g = m.guarantee()
    assert g == PrivacyGuarantee(epsilon=math.inf, delta=0.0, rho=g.rho)
    exact = Fraction(sens**2) / (2 * m.sigma2)  # rho of the law sampled (CKS Thm 4)
    assert abs(g.rho / float(exact) - 1) <= 1e-15
    assert abs(g.rho / (sens**2 / (2 * sigma**2)) - 1) <= 2e-8
    assert m.rho == g.rho


def test_short_binary_values_exact():
    assert DiscreteGaussian(sigma=2.0, sensitivity=1).guarantee().rho == 0.125
    assert DiscreteGaussian(sigma=2.0).map(1).rho == 0.125
    assert not DiscreteGaussian(sigma=2.0).guarantee().claimed  # no sensitivity: no claim
    assert DiscreteGaussian(rho=0.125).sigma2 == 4
    assert DiscreteGaussian(rho=0.5, sensitivity=2).sigma == 2.0
    assert DiscreteGaussian(sigma=0.5).sigma2 == Fraction(1, 4)


@pytest.mark.parametrize("rho", [1e-9, 1e-3, 0.3, 2.0, 1e4])
def test_rho_parameterization_rounds_towards_more_noise(rho):
    m = DiscreteGaussian(rho=rho, sensitivity=2)
    assert m.sigma2 >= Fraction(4) / (2 * Fraction(rho))
    assert m.rho <= rho
    assert m.rho / rho - 1 >= -2e-8


def test_monotonicity_more_noise_never_raises_privacy_loss():
    sigmas = [0.2, 0.5, 1.0, 1.7, 3.0, 8.0, 20.0]
    ms = [DiscreteGaussian(sigma=s) for s in sigmas]
    for a, b in itertools.pairwise(ms):
        assert b.rho < a.rho
        assert b.delta_at(1.0) <= a.delta_at(1.0)
        assert b.epsilon_at(1e-6) <= a.epsilon_at(1e-6)
    m = ms[3]
    deltas = [m.delta_at(e) for e in np.linspace(0.0, 10.0, 41)]
    assert all(d2 <= d1 for d1, d2 in itertools.pairwise(deltas))


# ---- exact delta(epsilon), CKS Theorem 7 -----------------------------------------------------


def _mp_delta(eps, sigma, sens):
    """sum_y max(0, p(y) - e^eps p(y - sens)), p the discrete Gaussian pmf, in mpmath."""
    with mp.workdps(40):
        s = mp.mpf(sigma)
        half = int(60 * sigma + abs(eps) * sigma**2 / sens + 3 * sens + 10)
        w = [mp.exp(-(mp.mpf(y) ** 2) / (2 * s * s)) for y in range(-half - sens, half + 1)]
        z = mp.fsum(w)
        ee = mp.exp(eps)
        tot = mp.fsum(max(mp.mpf(0), w[i + sens] - ee * w[i]) for i in range(len(w) - sens))
        return float(tot / z)


@pytest.mark.parametrize(
    ("eps", "sigma", "sens"),
    [(1.0, 2.0, 1), (0.5, 3.0, 2), (0.1, 10.0, 1), (2.0, 0.5, 1), (0.0, 1.3, 1), (3.0, 1.3, 5)],
)
def test_delta_at_vs_mpmath_definition(eps, sigma, sens):
    m = DiscreteGaussian(sigma=sigma, sensitivity=sens)
    ref = _mp_delta(eps, m.sigma, sens)
    got = m.delta_at(eps)
    assert abs(got / ref - 1) <= 1e-12


def test_delta_large_sigma_euler_maclaurin_vs_direct_sum(monkeypatch):
    cases = [(1e-4, 5e4, 1), (2e-4, 2e4, 3), (1e-3, 3e4, 1)]
    em = [accounting.discrete_gaussian_delta(*c) for c in cases]
    monkeypatch.setattr(accounting, "_MAX_TERMS", 10**8)
    direct = [accounting.discrete_gaussian_delta(*c) for c in cases]
    for a, b in zip(em, direct, strict=True):
        assert abs(a / b - 1) <= 1e-9


def test_delta_extreme_arguments_finite_and_bounded():
    cases = [(1.0, 2.0, 10**6), (1.0, 2.0, 10**30), (1e-3, 2e4, 10**30), (1e300, 3.0, 1)]
    for eps, s, d in cases:
        v = accounting.discrete_gaussian_delta(eps, s, d)
        assert 0.0 <= v <= 1.0
    assert accounting.discrete_gaussian_delta(1.0, 2.0, 10**6) == 1.0  # neighbours 25e4 sigma apart
    assert accounting.discrete_gaussian_delta(1e300, 3.0, 1) == 0.0
    # delta(0) is the total variation distance; large sigma vs the continuous 2 Phi(D/2s) - 1
    tv = accounting.discrete_gaussian_delta(0.0, 3e4, 10**5)
    assert abs(tv - (2 * stats.norm.cdf(10**5 / 6e4) - 1)) < 1e-8


def test_delta_at_and_epsilon_at_edges():
    m = DiscreteGaussian(sigma=2.0)
    assert m.delta_at(math.inf) == 0.0
    assert 0 < m.delta_at(0.0) < 1
    with pytest.raises(ValueError, match="epsilon"):
        m.delta_at(math.nan)
    with pytest.raises(ValueError, match="epsilon"):
        m.delta_at(-1.0)
    with pytest.raises(TypeError):
        m.delta_at("1")
    with pytest.raises(ValueError, match="delta"):
        m.epsilon_at(0.0)
    assert m.epsilon_at(0.99) == 0.0  # delta(0) is the total variation distance < 0.99


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_epsilon_at_is_the_rounded_up_inverse(delta):
    m = DiscreteGaussian(sigma=3.0, sensitivity=2)
    e = m.epsilon_at(delta)
    assert m.delta_at(e) <= delta
    assert m.delta_at(e * (1 - 1e-9)) > delta


@pytest.mark.parametrize(
    ("eps", "delta", "sens"), [(0.5, 1e-5, 1), (1.0, 1e-6, 3), (3.0, 1e-3, 1), (0.01, 1e-9, 1)]
)
def test_epsilon_delta_calibration(eps, delta, sens):
    m = DiscreteGaussian(epsilon=eps, delta=delta, sensitivity=sens)
    g = m.guarantee()
    assert g.epsilon == eps
    assert g.delta == m.delta_at(eps)
    assert 0 < g.delta <= delta  # the requested guarantee holds for the law sampled
    assert g.delta >= delta * (1 - 1e-6)  # and sigma is not much larger than needed
    smaller = DiscreteGaussian(sigma=m.sigma * (1 - 1e-6), sensitivity=sens)
    assert smaller.delta_at(eps) > delta  # minimal up to the stated tolerance
    assert g.rho == m.rho and repr(m).startswith("DiscreteGaussian(epsilon=")


def test_out_of_range_sigma_refused():
    with pytest.raises(ValueError, match="sigma"):
        DiscreteGaussian(sigma=1e8)
    with pytest.raises(ValueError, match="rho"):
        DiscreteGaussian(rho=1e-20)
    with pytest.raises(ValueError, match="sigma"):
        DiscreteGaussian(epsilon=1e-9, delta=1e-10)


# ---- validation ------------------------------------------------------------------------------

ANY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.text(max_size=3),
    st.just(np.float64("nan")),
    st.just(-np.inf),
    st.just(np.bool_(False)),
    st.fractions(),
    st.complex_numbers(max_magnitude=2),
)
BAD_POSITIVE = st.one_of(
    st.floats(max_value=0.0),
    st.just(math.nan),
    st.just(math.inf),
    st.just(np.float64("nan")),
    st.integers(max_value=0),
    st.booleans(),
    st.text(max_size=3),
    st.complex_numbers(max_magnitude=2),
)
BAD_UNIT = st.one_of(BAD_POSITIVE, st.floats(min_value=1.0), st.integers(min_value=1))


def _real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)


@settings(max_examples=1000, deadline=None)
@given(ANY)
def test_sigma_validation(sigma):
    valid = _real(sigma) and math.isfinite(float(sigma)) and float(sigma) > 0
    try:
        m = DiscreteGaussian(sigma=sigma)
    except (ValueError, TypeError) as err:
        assert not valid or not 1e-6 <= float(sigma) <= 1e7, err
        assert "sigma" in str(err)
        return
    assert valid
    assert math.isfinite(m.rho) and m.rho > 0 and m.sigma >= float(sigma)


@settings(max_examples=1000, deadline=None)
@given(ANY)
def test_rho_validation(rho):
    valid = _real(rho) and math.isfinite(float(rho)) and float(rho) > 0
    try:
        m = DiscreteGaussian(rho=rho)
    except (ValueError, TypeError) as err:
        assert not valid or float(rho) <= 5e-15 or float(rho) > 5e11, err  # sigma = 1e7 at 5e-15
        assert "rho" in str(err)
        return
    assert valid
    assert 0 < m.rho <= float(rho)
    if float(rho) <= 5e5:  # sigma >= 1e-3: the rational is within 2e-8 (module docstring)
        assert m.rho >= float(rho) * (1 - 2e-8)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.tuples(BAD_POSITIVE, st.one_of(ANY, st.floats(1e-12, 0.5))),
        st.tuples(st.one_of(ANY, st.floats(0.01, 10.0)), BAD_UNIT),
        st.tuples(st.none(), ANY),
        st.tuples(ANY, st.none()),
    )
)
def test_epsilon_delta_validation(pair):
    eps, delta = pair
    with pytest.raises((ValueError, TypeError)):
        DiscreteGaussian(epsilon=eps, delta=delta)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.01, 20.0), st.floats(1e-12, 0.5), st.integers(1, 5))
def test_valid_epsilon_delta_meet_the_target(eps, delta, sens):
    try:
        m = DiscreteGaussian(epsilon=eps, delta=delta, sensitivity=sens)
    except ValueError as err:  # only when sigma would exceed the sampler's range
        assert "1e+07" in str(err)
        return
    assert 0 < m.delta <= delta and m.epsilon == eps


def _whole_number(x) -> bool:
    """True for a non-bool integer or a real number that equals an integer exactly."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        return False
    if isinstance(x, numbers.Integral):
        return True
    try:
        return math.isfinite(float(x)) and float(x).is_integer() and float(x) == x
    except OverflowError:
        return False


@settings(max_examples=1000, deadline=None)
@given(ANY)
def test_sensitivity_validation(sens):
    valid = _whole_number(sens) and sens >= 1  # integers, and floats holding one (2.0)
    try:
        m = DiscreteGaussian(rho=0.5, sensitivity=sens)
    except (ValueError, TypeError) as err:
        assert not valid or sens > 1e7, err
        assert "sensitivity" in str(err) or "rho" in str(err)
        return
    assert valid and m.rho <= 0.5


def test_exactly_one_parameterization():
    with pytest.raises(ValueError, match="exactly one"):
        DiscreteGaussian()
    with pytest.raises(ValueError, match="exactly one"):
        DiscreteGaussian(sigma=1.0, rho=0.5)
    with pytest.raises(ValueError, match="exactly one"):
        DiscreteGaussian(sigma=1.0, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="together"):
        DiscreteGaussian(epsilon=1.0)
    with pytest.raises(ValueError, match="together"):
        DiscreteGaussian(delta=1e-5)
    with pytest.raises(TypeError, match="sensitivity"):
        DiscreteGaussian(sigma=1.0, sensitivity=1.5)


# ---- log-pmf forms and the PyMC noise law -----------------------------------------------------


def test_logpdf_forms_agree():
    m = DiscreteGaussian(sigma=3.7)
    x = np.array([-50.0, -1.0, 0.0, 2.0, 9.0, 1e6, 0.5, np.inf])
    ref = dgk.logpmf(x, m.sigma)
    for got in (
        m.logpdf(x),
        m.logpdf_pt(pt.as_tensor(x)).eval(),
        np.array([m.numba_logpdf(float(v), m.numba_params) for v in x]),
    ):
        np.testing.assert_allclose(got[:6], ref[:6], rtol=1e-14)
        assert np.all(got[6:] == -np.inf)
    xi = x[:6].astype(np.int64)
    np.testing.assert_allclose(pm.logp(m.noise_dist(), xi).eval(), ref[:6], rtol=1e-13)
    assert pm.draw(m.noise_dist(size=(2, 3)), random_seed=1).shape == (2, 3)


# ---- release: exact sampler against the pmf, and empirical privacy ----------------------------


@pytest.mark.parametrize(
    ("kw", "value"), [({"sigma": 2.0}, 0), ({"rho": 0.3, "sensitivity": 2}, 4)]
)
def test_release_gof_with_negative_control(kw, value, rng):
    m = DiscreteGaussian(**kw)
    noise = m.release(np.full(200_000, value), rng=rng) - value
    assert_gof(chisquare_gof(noise, m.logpdf), what=f"release {kw}")
    assert_rejects(chisquare_gof(noise, lambda k: dgk.logpmf(k, 1.05 * m.sigma)))
    assert m.release([1, 2]).dtype == np.int64  # secure default


@pytest.mark.parametrize(("eps", "delta", "sens"), [(0.5, 0.05, 1), (1.0, 0.02, 2)])
def test_empirical_privacy_at_the_worst_event(eps, delta, sens, rng):
    """The event {y < sens/2 - sigma^2 eps / sens} attains delta(eps) (CKS Thm 7)."""
    n = 300_000

    def lower_bound(m):
        a = m.release(np.zeros(n, dtype=np.int64), rng=rng)
        b = m.release(np.full(n, sens), rng=rng)
        thr = sens / 2 - m.sigma**2 * eps / sens
        return empirical_delta_lower_bound(a, b, lambda y: y < thr, eps)

    m = DiscreteGaussian(epsilon=eps, delta=delta, sensitivity=sens)
    lb = lower_bound(m)
    assert lb <= m.delta
    assert lb >= 0.6 * m.delta  # close to the claim
    # negative control: less noise (sigma / 1.3) is caught exceeding the claimed delta
    assert lower_bound(DiscreteGaussian(sigma=m.sigma / 1.3, sensitivity=sens)) > delta


def test_pickle_roundtrip():
    import pickle

    m = DiscreteGaussian(epsilon=1.0, delta=1e-6, sensitivity=2)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.guarantee() == m.guarantee() and m2.sigma2 == m.sigma2
    np.testing.assert_array_equal(
        m2.sample_noise(50, rng=np.random.default_rng(1)),
        m.sample_noise(50, rng=np.random.default_rng(1)),
    )
