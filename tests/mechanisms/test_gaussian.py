"""Tests of the float Gaussian mechanism: parameterizations, the analytic (ε, δ) curve against
mpmath, the three logpdf forms, release GoF and an empirical (ε, δ) check."""

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
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.testing import assert_gof, assert_rejects, empirical_delta_lower_bound, ks_gof


def mp_delta(eps, sigma, sens=1.0):
    """Balle & Wang 2018, Thm. 8, in 50-digit arithmetic (independent of the library)."""
    with mp.workdps(50):
        e, s, d = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sens)
        return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


def mp_sigma(eps, delta, sens=1.0):
    """The exact calibrated σ by a 50-digit root find in log σ."""
    with mp.workdps(50):
        target = mp.log(mp.mpf(delta))
        x0 = mp.log(mp.sqrt(2 * mp.log(mp.mpf(1.25) / delta)) / eps)

        def f(x):
            return mp.log(mp_delta(eps, mp.exp(x), 1)) - target

        lo, hi = x0 - 1, x0 + 1
        while f(lo) < 0:
            lo -= 1
        while f(hi) > 0:
            hi += 1
        return float(sens * mp.exp(mp.findroot(f, (lo, hi), solver="anderson")))


def test_parameterizations_and_guarantees():
    g = Gaussian(sigma=2.0, sensitivity=3.0).guarantee()
    assert g == PrivacyGuarantee(epsilon=math.inf, delta=0.0, rho=9.0 / 8.0)
    r = Gaussian(rho=0.5, sensitivity=2.0)
    assert r.sigma == 2.0 and r.rho == 0.5
    assert r.guarantee() == PrivacyGuarantee(epsilon=math.inf, delta=0.0, rho=0.5)
    m = Gaussian(epsilon=3.0, delta=1e-7, sensitivity=2.0)
    g = m.guarantee()
    assert (g.epsilon, g.delta) == (3.0, 1e-7) and (m.epsilon, m.delta) == (3.0, 1e-7)
    assert math.isclose(g.rho, 4.0 / (2.0 * m.sigma**2), rel_tol=1e-12)
    assert m.family == "gaussian" and m.integer is False
    assert "Gaussian(epsilon=3" in repr(m) and "sigma=2" in repr(Gaussian(sigma=2.0))


@pytest.mark.parametrize("sens", [0.5, 1.0, 7.0])
def test_rho_exact(sens):
    for s in [1e-3, 0.2, 1.0, 13.0, 1e4]:
        assert math.isclose(
            Gaussian(sigma=s, sensitivity=sens).rho, sens**2 / (2 * s**2), rel_tol=1e-12
        )
    for rho in [1e-4, 0.05, 1.0, 30.0]:
        m = Gaussian(rho=rho, sensitivity=sens)
        assert math.isclose(m.sigma, sens / math.sqrt(2 * rho), rel_tol=1e-12)
        assert math.isclose(m.rho, rho, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("eps", "delta"),
    [(0.01, 1e-6), (0.1, 1e-5), (0.5, 1e-3), (1.0, 1e-5), (2.0, 1e-9), (5.0, 1e-6), (20.0, 0.1)],
)
def test_analytic_calibration_matches_mpmath(eps, delta):
    # the calibrated σ is the exact (50-digit) root to 1e-10 and is on the safe side:
    # the 50-digit δ(ε; σ) does not exceed δ (beyond double rounding) — valid for ε > 1 too
    sens = 2.5
    m = Gaussian(epsilon=eps, delta=delta, sensitivity=sens)
    ref = mp_sigma(eps, delta, sens)
    assert abs(m.sigma / ref - 1) < 1e-10
    assert float(mp_delta(eps, m.sigma, sens)) <= delta * (1 + 1e-12)
    assert m.delta_at(eps) <= delta
    assert float(mp_delta(eps, m.sigma * (1 - 1e-9), sens)) > delta  # minimal


def test_analytic_beats_classic_bound():
    # classic σ = Δ sqrt(2 ln(1.25/δ))/ε (valid for ε < 1) is larger than the analytic one
    for eps in [0.1, 0.5, 0.9]:
        classic = math.sqrt(2 * math.log(1.25 / 1e-5)) / eps
        assert Gaussian(epsilon=eps, delta=1e-5).sigma < classic


def test_delta_at_and_epsilon_at_against_mpmath():
    worst = 0.0
    for s in [0.3, 1.0, 4.0, 20.0]:
        m = Gaussian(sigma=s, sensitivity=1.3)
        for eps in [0.0, 0.1, 1.0, 3.0, 8.0]:
            ref = float(mp_delta(eps, s, 1.3))
            if ref < 1e-300:
                continue
            worst = max(worst, abs(m.delta_at(eps) / ref - 1))
        for delta in [1e-9, 1e-5, 0.01]:
            e = m.epsilon_at(delta)
            assert float(mp_delta(e, s, 1.3)) <= delta * (1 + 1e-12)
            if e > 0:
                assert float(mp_delta(e * (1 - 1e-9), s, 1.3)) > delta
    assert worst < 1e-12
    assert Gaussian(sigma=1.0).delta_at(math.inf) == 0.0


def test_more_noise_never_raises_privacy_cost():
    sig = np.geomspace(0.05, 50, 60)
    ms = [Gaussian(sigma=s) for s in sig]
    rho = np.array([m.rho for m in ms])
    d1 = np.array([m.delta_at(1.0) for m in ms])
    e5 = np.array([m.epsilon_at(1e-5) for m in ms])
    assert np.all(np.diff(rho) < 0)
    assert np.all(np.diff(d1) <= 0)
    assert np.all(np.diff(e5) < 0)
    # and a smaller δ target or ε never needs less noise
    s_eps = [Gaussian(epsilon=e, delta=1e-6).sigma for e in [0.2, 0.5, 1, 2, 5]]
    s_del = [Gaussian(epsilon=1.0, delta=d).sigma for d in [1e-12, 1e-8, 1e-4, 0.1]]
    assert np.all(np.diff(s_eps) < 0) and np.all(np.diff(s_del) < 0)


def test_logpdf_three_forms_agree_with_scipy():
    sigmas = [1e-3, 0.37, 1.0, 12.5, 1e4]
    xs = np.array([-1e3, -37.0, -3.0, -1e-9, 0.0, 1e-300, 0.5, 2.0, 55.5, 1e3])
    mechs = [Gaussian(sigma=s) for s in sigmas]
    xv = pt.dvector("x")
    outs = [m.logpdf_pt(xv) for m in mechs]
    assert all(o.dtype == "float64" for o in outs)
    pt_vals = pytensor.function([xv], outs)(xs)
    worst = 0.0
    for m, got_pt in zip(mechs, pt_vals, strict=True):
        ref = stats.norm(scale=m.sigma).logpdf(xs)
        with mp.workdps(50):
            s = mp.mpf(m.sigma)
            ref_mp = np.array(
                [float(-((mp.mpf(x) / s) ** 2) / 2 - mp.log(s) - mp.log(2 * mp.pi) / 2) for x in xs]
            )
        np.testing.assert_allclose(ref, ref_mp, rtol=1e-12, atol=1e-12)
        got_nb = np.array([m.numba_logpdf(float(x), m.numba_params) for x in xs])
        for got in (m.logpdf(xs), got_pt, got_nb):
            np.testing.assert_allclose(got, ref_mp, rtol=1e-12, atol=1e-12)
            worst = max(worst, float(np.max(np.abs(got - ref_mp) / np.maximum(1, abs(ref_mp)))))
    assert worst < 1e-14


def test_release_shapes_rng_and_secure_range(rng):
    m = Gaussian(sigma=1.5)
    seed = int(rng.integers(2**31))
    a = m.release(np.zeros((2, 5)), rng=np.random.default_rng(seed), allow_float=True)
    np.testing.assert_array_equal(
        a, m.release(np.zeros((2, 5)), rng=np.random.default_rng(seed), allow_float=True)
    )
    assert m.sample_noise((3, 2)).shape == (3, 2) and np.ndim(m.sample_noise(())) == 0
    z = m.sample_noise(100_000)
    assert np.all(np.isfinite(z)) and np.max(np.abs(z)) < 9.23 * 1.5
    with pytest.raises(TypeError, match="Generator"):
        m.sample_noise(3, rng=1)


def test_secure_noise_tail_from_two_words(monkeypatch):
    """The secure draw's extreme words: w2 = 0 gives u near 2^-65 and |Z| = isf(u/2) = 9.2
    sigma (scipy's isf as the reference), the sign is bit 0 of w1; control: the one-word draw
    stopped at 8.37 sigma."""
    import pymc_dp.kernels.exact_sampling as es

    w1 = np.array([1, 0, 2**64 - 1, 2**13], dtype=np.uint64)
    w2 = np.array([0, 0, 1, 2**40], dtype=np.uint64)
    monkeypatch.setattr(es, "random_words", lambda n, rng=None: np.concatenate([w1, w2]))
    z = Gaussian(sigma=2.0).sample_noise(4)
    u = np.array([(2.0**52 + 1) * 2.0**-117, (2.0**52 + 1) * 2.0**-117,
                  (2.0**53 - 1) * 2.0**-53, (2.0**52 + 3) * 2.0**-93])  # fmt: skip
    ref = 2.0 * np.array([1, -1, 1, -1]) * stats.norm.isf(u / 2)
    np.testing.assert_allclose(z, ref, rtol=1e-14, atol=0)
    assert abs(z[0]) > 9.2 * 2.0 > 2.0 * stats.norm.isf(2.0**-55)


def test_noise_dist_is_float64_normal():
    m = Gaussian(sigma=0.7)
    d = m.noise_dist(size=3)
    assert d.dtype == "float64" and all(p.dtype == "float64" for p in d.owner.inputs[2:])
    x = np.array([-2.0, 0.0, 5.0])
    np.testing.assert_allclose(
        pm_logp(d, x).eval(), stats.norm(scale=0.7).logpdf(x), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("secure", [False, True])
def test_release_ks_and_negative_control(rng, secure):
    # 4e5 draws; KS passes at false-alarm 1e-6, scale x1.05 rejected (sqrt(n) D ≈ 7.4).
    # The secure source (os.urandom) cannot be seeded: that case is random, false alarm 1e-6.
    m = Gaussian(epsilon=2.0, delta=1e-6, sensitivity=3.0)
    n = 400_000
    values = np.round(rng.normal(0, 50, n))
    out = m.release(values, rng=None if secure else rng, allow_float=True)
    noise = out - values
    assert_gof(ks_gof(noise, stats.norm(scale=m.sigma).cdf), what="Gaussian release")
    assert_rejects(ks_gof(noise, stats.norm(scale=1.05 * m.sigma).cdf), what="scale x1.05")


def test_empirical_delta_curve(rng):
    # neighbours 0 and Δ, σ = Δ: the privacy loss exceeds ε exactly on S_ε = {y > εσ²/Δ + Δ/2},
    # the worst-case event, whose δ is δ(ε). The Clopper–Pearson lower bound on
    # P[M(Δ) ∈ S] - e^ε P[M(0) ∈ S] (false alarm 1e-6 per ε) must not exceed the claimed δ(ε),
    # and is close to it; a mechanism claiming σ x1.2 (less δ) would be caught.
    sens, sigma = 2.0, 2.0
    m = Gaussian(sigma=sigma, sensitivity=sens)
    n = 1_000_000
    y1 = m.release(np.full(n, sens), rng=rng, allow_float=True)
    y0 = m.release(np.zeros(n), rng=rng, allow_float=True)
    wrong = Gaussian(sigma=1.2 * sigma, sensitivity=sens)
    for eps in [0.25, 0.5, 1.0, 2.0]:
        cut = eps * sigma**2 / sens + sens / 2

        def event(y, cut=cut):
            return y > cut

        lb = empirical_delta_lower_bound(y1, y0, event, eps)
        claimed = m.delta_at(eps)
        assert lb <= claimed
        assert lb > claimed - 0.01
        assert lb > wrong.delta_at(eps)  # negative control


# ---- validation (hypothesis) ----------------------------------------------------------------
GOOD = st.one_of(st.floats(1e-2, 50.0), st.integers(1, 50), st.floats(1e-2, 50.0).map(np.float64))
GOOD_DELTA = st.one_of(st.floats(1e-12, 0.5), st.floats(1e-12, 0.5).map(np.float64))
BAD = st.one_of(
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 0.0, -0.0, 0, True, False, np.nan, np.inf, np.bool_(True)]
    ),
    st.floats(max_value=0.0, allow_nan=False),
    st.integers(max_value=0),
    st.text(max_size=3),
    st.just(1 + 1j),
)
BAD_DELTA = st.one_of(
    BAD, st.floats(min_value=1.0), st.just(1), st.sampled_from([1.0, 1.5, 2, -1e-300])
)


def _good(v, delta=False):
    if v is None or isinstance(v, bool | np.bool_ | str | complex):
        return False
    if not math.isfinite(v):
        return False
    return 0 < v < 1 if delta else v > 0


@settings(max_examples=1000, deadline=None)
@given(
    sigma=st.one_of(st.none(), GOOD, BAD),
    epsilon=st.one_of(st.none(), GOOD, BAD),
    delta=st.one_of(st.none(), GOOD_DELTA, BAD_DELTA),
    rho=st.one_of(st.none(), GOOD, BAD),
    sensitivity=st.one_of(GOOD, BAD, st.none()),
)
def test_no_bad_parameter_gets_through(sigma, epsilon, delta, rho, sensitivity):
    groups = [sigma is not None, epsilon is not None or delta is not None, rho is not None]
    valid = sum(groups) == 1 and _good(sensitivity)
    if valid and groups[0]:
        valid = _good(sigma)
    elif valid and groups[1]:
        valid = _good(epsilon) and _good(delta, delta=True)
    elif valid:
        valid = _good(rho)
    kw = {"epsilon": epsilon, "delta": delta, "rho": rho, "sensitivity": sensitivity}
    if valid:
        m = Gaussian(sigma=sigma, **kw)
        g = m.guarantee()
        assert math.isfinite(m.sigma) and m.sigma > 0
        assert math.isfinite(g.rho) and g.rho > 0
        assert (g.epsilon == math.inf) or (math.isfinite(g.epsilon) and g.epsilon > 0)
        assert 0.0 <= g.delta < 1.0
        if groups[1]:
            assert m.delta_at(float(epsilon)) <= float(delta)
    else:
        with pytest.raises((TypeError, ValueError)):
            Gaussian(sigma=sigma, **kw)


@settings(max_examples=1000, deadline=None)
@given(x=st.one_of(BAD, st.floats(allow_nan=True)))
def test_delta_at_epsilon_at_refuse_bad_input(x):
    m = Gaussian(sigma=1.0)
    for f, ok in ((m.delta_at, lambda v: v >= 0), (m.epsilon_at, lambda v: 0 < v < 1)):
        try:
            out = f(x)
        except (TypeError, ValueError):
            continue
        # accepted: x was a legal number and the answer is a legal, non-NaN value
        assert not isinstance(x, bool | str | complex) and ok(x)
        assert not math.isnan(out) and out >= 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma": math.nan}, "sigma"),
        ({"epsilon": 1.0}, "together"),
        ({"delta": 1e-5}, "together"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"epsilon": math.inf, "delta": 1e-5}, "epsilon"),
        ({"rho": -1.0}, "rho"),
        ({"sigma": 1.0, "rho": 1.0}, "exactly one"),
        ({"sigma": 1.0, "epsilon": 1.0, "delta": 1e-6}, "exactly one"),
        ({}, "exactly one"),
        ({"sigma": 1.0, "sensitivity": "1"}, "sensitivity"),
        ({"sigma": 1e200, "sensitivity": 1e-200}, "out of range"),
    ],
)
def test_errors_name_the_argument(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Gaussian(**kwargs)
