"""Tests of the float Laplace mechanism: validation, accounting, the three logpdf forms, release."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymc.logprob.basic import logp as pm_logp
from scipy import stats

from pymc_dp.mechanisms.base import PrivacyGuarantee
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import (
    assert_gof,
    assert_rejects,
    empirical_epsilon_lower_bound,
    ks_gof,
)

SCALES = [1e-3, 0.37, 1.0, 7.25, 1e4]
XS = np.array([-1e6, -123.4, -3.0, -1.0, -1e-9, 0.0, 1e-300, 0.5, 2.0, 55.5, 1e6])


def test_core_and_guarantee_exact():
    m = Laplace(epsilon=0.5, sensitivity=2.0)
    assert m.scale == 4.0
    assert m.guarantee() == PrivacyGuarantee(epsilon=0.5, delta=0.0, rho=None)
    assert (m.epsilon, m.delta) == (0.5, 0.0)
    assert m.family == "laplace" and m.integer is False
    for b in SCALES:
        for d in [0.01, 1.0, 3.0, 250.0]:
            assert math.isclose(Laplace(scale=b, sensitivity=d).epsilon, d / b, rel_tol=1e-12)
            assert math.isclose(Laplace(epsilon=d / b, sensitivity=d).scale, b, rel_tol=1e-12)
    assert "Laplace(epsilon=0.5" in repr(m)


def test_more_noise_never_raises_epsilon():
    scales = np.geomspace(1e-3, 1e3, 200)
    eps = np.array([Laplace(scale=b, sensitivity=1.7).epsilon for b in scales])
    assert np.all(np.diff(eps) < 0)


def test_logpdf_three_forms_agree_with_scipy():
    mechs = [Laplace(scale=b) for b in SCALES]
    xv = pt.dvector("x")
    outs = [m.logpdf_pt(xv) for m in mechs]
    assert all(o.dtype == "float64" for o in outs)
    f = pytensor.function([xv], outs)
    pt_vals = f(XS)
    max_err = 0.0
    for m, got_pt in zip(mechs, pt_vals, strict=True):
        # independent references: scipy where it is finite (it underflows to -inf far out),
        # and the closed form in 50-digit mpmath everywhere
        with mp.workdps(50):
            b = mp.mpf(m.scale)
            ref = np.array([float(-abs(mp.mpf(x)) / b - mp.log(2 * b)) for x in XS])
        sp = stats.laplace(scale=m.scale).logpdf(XS)
        fin = np.isfinite(sp)
        np.testing.assert_allclose(sp[fin], ref[fin], rtol=1e-12, atol=1e-12)
        got_np = m.logpdf(XS)
        got_nb = np.array([m.numba_logpdf(float(x), m.numba_params) for x in XS])
        for got in (got_np, got_pt, got_nb):
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
            max_err = max(max_err, float(np.max(np.abs(got - ref) / np.maximum(1, np.abs(ref)))))
        assert m.numba_params.dtype == np.float64
    assert max_err < 1e-14


def test_noise_dist_is_float64_laplace():
    m = Laplace(scale=0.3)
    d = m.noise_dist(size=4)
    assert d.dtype == "float64"
    params = d.owner.inputs[2:]
    assert all(p.dtype == "float64" for p in params)
    x = np.array([-2.0, 0.0, 0.1, 5.0])
    np.testing.assert_allclose(
        pm_logp(d, x).eval(), stats.laplace(scale=0.3).logpdf(x), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("secure", [False, True])
def test_release_ks_and_negative_control(rng, secure):
    # 4e5 draws: KS against the exact CDF passes (false alarm 1e-6) and scale x1.05 is rejected
    # (sqrt(n) * sup|F_b - F_1.05b| ≈ 5.7, p ≈ 1e-28). The secure source (os.urandom) cannot be
    # seeded, so that case is random with false-alarm rate 1e-6.
    m = Laplace(epsilon=0.8, sensitivity=1.5)
    n = 400_000
    values = np.round(rng.normal(0, 50, n))
    out = m.release(values, rng=None if secure else rng, allow_float=True)
    assert out.shape == values.shape and out.dtype == np.float64
    noise = out - values
    assert_gof(ks_gof(noise, stats.laplace(scale=m.scale).cdf), what="Laplace release")
    assert_rejects(ks_gof(noise, stats.laplace(scale=1.05 * m.scale).cdf), what="scale x1.05")


def test_release_rng_reproducible_and_shapes(rng):
    m = Laplace(scale=2.0)
    seed = int(rng.integers(2**31))
    a = m.release(np.zeros((3, 4)), rng=np.random.default_rng(seed), allow_float=True)
    b = m.release(np.zeros((3, 4)), rng=np.random.default_rng(seed), allow_float=True)
    np.testing.assert_array_equal(a, b)
    assert m.sample_noise((2, 3)).shape == (2, 3)
    assert m.sample_noise(5).shape == (5,)
    assert np.ndim(m.sample_noise(())) == 0
    with pytest.raises(ValueError, match="finite"):
        m.release([1.0, np.nan], allow_float=True)
    for bad_rng in (0, np.random.RandomState(0), "secure"):
        with pytest.raises(TypeError, match="Generator"):
            m.release([1.0], rng=bad_rng, allow_float=True)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_empirical_privacy_neighbours(rng, eps):
    # neighbours 0 and Δ; the optimal event S = {y > Δ} has P[M(Δ) ∈ S] / P[M(0) ∈ S] = e^ε
    # exactly. The Clopper–Pearson lower bound (false alarm 1e-6) must not exceed ε, and with
    # 5e5 draws each it is within 0.05 of ε: a mechanism claiming 0.95 ε would be caught.
    delta_x = 1.5
    m = Laplace(epsilon=eps, sensitivity=delta_x)
    n = 500_000
    y1 = m.release(np.full(n, delta_x), rng=rng, allow_float=True)
    y0 = m.release(np.zeros(n), rng=rng, allow_float=True)
    lb = empirical_epsilon_lower_bound(y1, y0, lambda y: y > delta_x)
    assert lb <= m.epsilon
    assert lb > m.epsilon - 0.05
    assert lb > 0.95 * m.epsilon  # negative control: an under-stated ε is detected


# ---- validation (hypothesis) ----------------------------------------------------------------
GOOD = st.one_of(
    st.floats(1e-3, 1e3),
    st.integers(1, 1000),
    st.floats(1e-3, 1e3).map(np.float64),
)
BAD = st.one_of(
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 0.0, -0.0, 0, True, False, np.nan, np.inf, np.bool_(True)]
    ),
    st.floats(max_value=0.0, allow_nan=False),
    st.integers(max_value=0),
    st.text(max_size=3),
    st.just(1 + 1j),
    st.just([1.0]),
)


@settings(max_examples=1000, deadline=None)
@given(
    scale=st.one_of(st.none(), GOOD, BAD),
    epsilon=st.one_of(st.none(), GOOD, BAD),
    sensitivity=st.one_of(GOOD, BAD, st.none()),
    kind=st.integers(0, 2),
)
def test_no_bad_parameter_gets_through(scale, epsilon, sensitivity, kind):
    kwargs = {"epsilon": epsilon, "sensitivity": sensitivity}
    if kind == 0:
        kwargs.pop("sensitivity")  # default sensitivity
        sensitivity = 1.0

    def good(v):
        return (
            v is not None
            and not isinstance(v, bool | np.bool_ | str | complex | list)
            and math.isfinite(v)
            and v > 0
        )

    valid = ((scale is None) != (epsilon is None)) and good(sensitivity)
    valid = valid and all(good(v) for v in (scale, epsilon) if v is not None)
    if valid:
        m = Laplace(scale=scale, **kwargs)
        g = m.guarantee()
        assert math.isfinite(g.epsilon) and g.epsilon > 0 and g.delta == 0.0
        assert math.isfinite(m.scale) and m.scale > 0
    else:
        with pytest.raises((TypeError, ValueError)):
            Laplace(scale=scale, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale": math.nan}, "scale"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"scale": 1.0, "sensitivity": math.inf}, "sensitivity"),
        ({"scale": 1.0, "epsilon": 1.0}, "exactly one"),
        ({}, "exactly one"),
        ({"scale": True}, "scale"),
        ({"epsilon": "1"}, "epsilon"),
        ({"scale": 1e-300, "sensitivity": 1e300}, "out of range"),
    ],
)
def test_errors_name_the_argument(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Laplace(**kwargs)
