"""Geometric (two-sided geometric / discrete Laplace) mechanism.

Accounting exact to 1e-12, eager validation (hypothesis), exact-sampler goodness of fit and an
empirical privacy check, each statistical assertion at false alarm <= 1e-6 with a negative control.
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

from pymc_dp.kernels import discrete_laplace as dl
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.testing import (
    assert_gof,
    assert_rejects,
    chisquare_gof,
    empirical_epsilon_lower_bound,
)

# ---- accounting ------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-6, 0.1, 0.5, 1.0, 2.3, 10.0, 700.0])
@pytest.mark.parametrize("sens", [1, 2, 7])
def test_epsilon_parameterization_is_exact(eps, sens):
    m = Geometric(epsilon=eps, sensitivity=sens)
    assert isinstance(m, Mechanism)
    assert m.family == "geometric" and m.integer
    assert m.rate <= Fraction(eps) / sens  # never less noise than asked
    g = m.guarantee()
    assert g == PrivacyGuarantee(epsilon=g.epsilon, delta=0.0, rho=None)
    assert abs(g.epsilon / eps - 1) <= 1e-12
    assert m.epsilon == g.epsilon and m.delta == 0.0
    assert g.epsilon == float(sens * m.rate)
    assert abs(m.alpha / math.exp(-eps / sens) - 1) <= 1e-12


def test_short_binary_epsilons_are_kept_exactly():
    for eps, sens in [(1.0, 1), (0.5, 1), (1.25, 2), (3.0, 4)]:
        m = Geometric(epsilon=eps, sensitivity=sens)
        assert m.rate == Fraction(eps) / sens
        assert m.guarantee().epsilon == eps


@pytest.mark.parametrize("alpha", [1e-300, 1e-12, 0.01, 0.3, 0.5, 0.9, 1 - 1e-6, 1 - 1e-9])
@pytest.mark.parametrize("sens", [1, 3])
def test_alpha_parameterization_vs_mpmath(alpha, sens):
    m = Geometric(alpha=alpha, sensitivity=sens)
    with mp.workdps(60):
        exact = -mp.log(mp.mpf(alpha))  # ln(1/alpha) of the float alpha
        assert mp.mpf(m.rate.numerator) / m.rate.denominator <= exact  # more noise
        ref = float(sens * exact)
    assert abs(m.guarantee().epsilon / ref - 1) <= 1e-12
    assert abs(m.alpha / alpha - 1) <= 1e-12


def test_monotonicity_more_noise_never_raises_epsilon():
    alphas = np.sort(
        np.concatenate([np.geomspace(1e-12, 0.5, 40), 1 - np.geomspace(0.5, 1e-9, 40)])
    )
    eps = [Geometric(alpha=float(a), sensitivity=1).epsilon for a in alphas]
    assert all(e2 <= e1 for e1, e2 in itertools.pairwise(eps))
    epss = np.geomspace(1e-8, 100, 60)
    rates = [Geometric(epsilon=float(e)).rate for e in epss]
    assert all(r2 >= r1 for r1, r2 in itertools.pairwise(rates))
    # larger sensitivity at fixed epsilon: more noise
    assert Geometric(epsilon=1.0, sensitivity=2).alpha > Geometric(epsilon=1.0).alpha


def test_limited_precision_schein_theorem_1():
    m = Geometric(alpha=0.5)
    for n in (1, 2, 10):
        nn, e = m.limited_precision(n)
        assert nn == n
        assert abs(e / (n * math.log(2.0)) - 1) <= 1e-12
    with pytest.raises(TypeError):
        m.limited_precision(1.0)
    with pytest.raises(ValueError):
        m.limited_precision(0)


def test_extreme_rates():
    huge = Geometric(epsilon=700.0)  # the largest allowed rate
    assert huge.rate == 700 and huge.guarantee().epsilon == 700.0
    assert np.all(huge.sample_noise(1000, rng=np.random.default_rng(0)) == 0)
    for eps in (1e300, 701.0, 1e-20, 2.0**-51):
        with pytest.raises(ValueError, match="2\\*\\*-50, 700"):
            Geometric(epsilon=eps)


# ---- validation ------------------------------------------------------------------------------

BAD_OR_ANY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.just(np.float64("nan")),
    st.just(np.inf),
    st.just(np.bool_(True)),
    st.just(np.int64(3)),
    st.fractions(),
    st.complex_numbers(max_magnitude=2),
    st.just([1.0]),
)


def _real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)


@settings(max_examples=1000, deadline=None)
@given(BAD_OR_ANY)
def test_epsilon_validation(eps):
    valid = _real(eps) and math.isfinite(float(eps)) and float(eps) > 0
    try:
        m = Geometric(epsilon=eps)
    except (ValueError, TypeError) as err:
        if valid:  # only the documented range [2**-50, 700] may refuse a valid epsilon
            assert not Geometric.RATE_MIN <= float(eps) <= Geometric.RATE_MAX, err
        elif eps is not None:
            assert "epsilon" in str(err)
        return
    assert valid
    e = m.guarantee().epsilon
    assert math.isfinite(e) and 0 < e <= float(eps)
    assert abs(e / float(eps) - 1) <= 1e-12


@settings(max_examples=1000, deadline=None)
@given(BAD_OR_ANY)
def test_alpha_validation(alpha):
    valid = _real(alpha) and 0 < float(alpha) < 1
    try:
        m = Geometric(alpha=alpha)
    except (ValueError, TypeError) as err:
        # only the documented range ln(1/alpha) in [2**-50, 700] may refuse a valid alpha
        assert not valid or not (
            Geometric.RATE_MIN < -math.log(float(alpha)) < Geometric.RATE_MAX
        ), err
        if alpha is not None:
            assert "alpha" in str(err)
        return
    assert valid
    assert not m.guarantee().claimed  # alpha only, no sensitivity: no privacy claim
    e = m.map(1).epsilon
    assert math.isfinite(e) and e > 0
    assert abs(e / -math.log(float(alpha)) - 1) <= 1e-12


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
@given(BAD_OR_ANY)
def test_sensitivity_validation(sens):
    valid = _whole_number(sens) and sens >= 1  # integers, and floats holding one (2.0)
    try:
        m = Geometric(epsilon=1.0, sensitivity=sens)
    except (ValueError, TypeError) as err:
        assert not valid or sens > 2**50, err  # epsilon / sensitivity >= 2**-50
        assert "sensitivity" in str(err) or "epsilon" in str(err)
        return
    assert valid
    assert m.sensitivity == int(sens)
    assert abs(m.guarantee().epsilon - 1.0) <= 1e-12


def test_exactly_one_parameterization():
    with pytest.raises(ValueError, match="exactly one"):
        Geometric()
    with pytest.raises(ValueError, match="exactly one"):
        Geometric(alpha=0.5, epsilon=1.0)
    with pytest.raises(TypeError, match="sensitivity"):
        Geometric(epsilon=1.0, sensitivity=1.5)  # not a whole number


# ---- the three log-pmf forms and the PyMC noise law -------------------------------------------


def test_logpdf_forms_agree():
    m = Geometric(epsilon=0.7, sensitivity=2)
    x = np.array([-5.0, -1.0, 0.0, 1.0, 3.0, 1000.0, 0.5, np.nan])
    ref = dl.logpmf(x, -0.35)
    got_np = m.logpdf(x)
    got_pt = m.logpdf_pt(pt.as_tensor(x)).eval()
    got_nb = np.array([m.numba_logpdf(float(v), m.numba_params) for v in x])
    for got in (got_np, got_pt, got_nb):
        np.testing.assert_allclose(got[:6], ref[:6], rtol=1e-14)
        assert np.all(got[6:] == -np.inf)
    xi = x[:6].astype(np.int64)
    np.testing.assert_allclose(pm.logp(m.noise_dist(), xi).eval(), ref[:6], rtol=1e-13)
    assert pm.draw(m.noise_dist(size=4), random_seed=1).shape == (4,)
    assert repr(m) == "Geometric(epsilon=0.7, sensitivity=2)"


# ---- release: exact sampler against the pmf, and empirical privacy ----------------------------


@pytest.mark.parametrize(("eps", "sens", "value"), [(1.0, 1, 0), (0.3, 3, 5), (2.5, 1, -7)])
def test_release_gof_with_negative_control(eps, sens, value, rng):
    m = Geometric(epsilon=eps, sensitivity=sens)
    out = m.release(np.full(200_000, value), rng=rng)
    assert out.dtype == np.int64
    noise = out - value
    assert_gof(chisquare_gof(noise, m.logpdf), what=f"release eps={eps}")
    assert_rejects(chisquare_gof(noise, lambda k: dl.logpmf(k, 1.05 * m.log_alpha)))


def test_release_values_and_secure_default():
    m = Geometric(epsilon=1.0)
    assert m.release([1.0, 2.0]).dtype == np.int64  # integral floats accepted, os.urandom
    with pytest.raises(ValueError, match="integers"):
        m.release([0.5])
    with pytest.raises(ValueError, match="integers"):
        m.release([np.nan])
    a = m.release(np.arange(10), rng=np.random.default_rng(3))
    b = m.release(np.arange(10), rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("eps", "sens"), [(1.0, 1), (0.5, 2)])
def test_empirical_privacy_at_the_worst_event(eps, sens, rng):
    """P[M(0) <= 0] / P[M(sens) <= 0] = alpha^-sens = e^eps exactly (the worst event)."""
    n = 300_000
    m = Geometric(epsilon=eps, sensitivity=sens)
    a = m.release(np.zeros(n, dtype=np.int64), rng=rng)
    b = m.release(np.full(n, sens), rng=rng)
    lb = empirical_epsilon_lower_bound(a, b, lambda y: y <= 0)
    assert lb <= m.epsilon
    assert lb >= 0.95 * m.epsilon  # close to the claim: the bound is tight
    # negative control: a mechanism with 1.2x the privacy loss is caught claiming eps
    bad = Geometric(epsilon=1.2 * eps, sensitivity=sens)
    a2 = bad.release(np.zeros(n, dtype=np.int64), rng=rng)
    b2 = bad.release(np.full(n, sens), rng=rng)
    assert empirical_epsilon_lower_bound(a2, b2, lambda y: y <= 0) > eps


def test_pickle_roundtrip():
    import pickle

    m = Geometric(epsilon=0.3, sensitivity=2)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.guarantee() == m.guarantee() and m2.rate == m.rate
    np.testing.assert_array_equal(
        m2.sample_noise(50, rng=np.random.default_rng(1)),
        m.sample_noise(50, rng=np.random.default_rng(1)),
    )
