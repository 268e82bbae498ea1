"""Tests of pymc_dp.accounting: exact closed forms, the analytic Gaussian curve against mpmath,
composition, zCDP conversions, monotonicity, and refusal of NaN / bad inputs."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import pairwise

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymc_dp.accounting import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    as_distance,
    compose,
    compose_repeated,
    gaussian_delta_for_distance,
    gaussian_rho,
    gaussian_sigma_from_rho,
    geometric_rate,
    implied_rho,
    laplace_epsilon,
    laplace_scale,
    linear_epsilon,
    quadratic_rho,
    round_up,
    zcdp_to_approx_dp,
)
from pymc_dp.mechanisms.base import PrivacyGuarantee
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.laplace import Laplace

REL = 1e-12


def mp_delta(eps, sigma, sens=1.0):
    with mp.workdps(50):
        e, s, d = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sens)
        return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


def test_closed_forms_exact():
    for b in [1e-6, 0.3, 1.0, 4.0, 1e6]:
        for d in [1e-3, 1.0, 2.5]:
            assert math.isclose(laplace_epsilon(b, d), d / b, rel_tol=REL)
            s = b
            assert math.isclose(gaussian_rho(s, d), d * d / (2 * s * s), rel_tol=REL)
            rho = d * d / (2 * s * s)
            assert math.isclose(gaussian_sigma_from_rho(rho, d), s, rel_tol=REL)
    assert laplace_epsilon(4.0, 2.0) == 0.5
    assert gaussian_rho(2.0, 2.0) == 0.5


def test_analytic_delta_against_mpmath():
    # relative error <= 1e-12 on σ/Δ in [0.05, 50], ε in [0, 20] (measured max ~1.5e-13);
    # far outside (Δ/σ < 1e-3) the erfcx difference loses a few more digits.
    worst = 0.0
    for eps in [0.0, 1e-8, 1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]:
        for s in [0.05, 0.1, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]:
            for sens in [1.0, 3.0]:
                ref = mp_delta(eps, s * sens, sens)
                if ref < mp.mpf("1e-300"):
                    assert analytic_gaussian_delta(eps, s * sens, sens) < 1e-290
                    continue
                got = analytic_gaussian_delta(eps, s * sens, sens)
                worst = max(worst, float(abs(got - ref) / ref))
    assert worst < REL


def test_analytic_inverses_are_conservative_and_tight():
    for eps in [0.05, 0.7, 1.0, 4.0, 30.0, 1e4]:
        for delta in [1e-12, 1e-6, 1e-3, 0.3, 0.99]:
            s = analytic_gaussian_sigma(eps, delta, 2.0)
            assert analytic_gaussian_delta(eps, s, 2.0) <= delta
            assert analytic_gaussian_delta(eps, s * (1 - 1e-9), 2.0) > delta
            e = analytic_gaussian_epsilon(delta, s, 2.0)
            assert analytic_gaussian_delta(e, s, 2.0) <= delta
            assert abs(e / eps - 1) < 1e-9


def test_monotone_more_noise_never_raises_epsilon():
    scales = np.geomspace(1e-3, 1e3, 100)
    assert np.all(np.diff([laplace_epsilon(b) for b in scales]) < 0)
    assert np.all(np.diff([gaussian_rho(b) for b in scales]) < 0)
    sig = np.geomspace(0.05, 100, 100)
    assert np.all(np.diff([analytic_gaussian_epsilon(1e-6, s) for s in sig]) < 0)
    d = [analytic_gaussian_delta(1.0, s) for s in sig]
    assert np.all(np.diff(d) <= 0)
    rhos = np.geomspace(1e-4, 1e2, 100)
    for method in ("bs16", "cks20"):
        e = [zcdp_to_approx_dp(r, 1e-6, method=method) for r in rhos]
        assert np.all(np.diff(e) > 0)


def test_compose_exact():
    gs = [PrivacyGuarantee(0.1), PrivacyGuarantee(0.2, 1e-6), PrivacyGuarantee(0.3, 2e-6)]
    c = compose(gs)
    assert math.isclose(c.epsilon, 0.6, rel_tol=REL) and math.isclose(c.delta, 3e-6, rel_tol=REL)
    assert c.rho is None
    # rho adds when every input has one; ε=inf propagates
    g2 = Gaussian(sigma=2.0, sensitivity=1.0)
    c = compose([g2, Gaussian(rho=0.25), PrivacyGuarantee(math.inf, 0.0, 0.5)])
    assert c == PrivacyGuarantee(math.inf, 0.0, 0.125 + 0.25 + 0.5)
    # a mechanism given by its noise scale only makes no claim, nor does any composition with it
    assert compose([Gaussian(sigma=2.0), Laplace(epsilon=1.0)]) == PrivacyGuarantee.no_claim()
    assert compose_repeated(PrivacyGuarantee.no_claim(), 3) == PrivacyGuarantee.no_claim()
    # mechanisms and guarantees mix; the rho of a pure-DP Laplace is None
    c = compose([Laplace(epsilon=0.5), Gaussian(epsilon=1.0, delta=1e-6)])
    assert math.isclose(c.epsilon, 1.5, rel_tol=REL) and c.delta == 1e-6 and c.rho is None
    # k-fold composition of the same mechanism is exact (fsum)
    c = compose([Laplace(epsilon=0.1)] * 10)
    assert math.isclose(c.epsilon, 1.0, rel_tol=REL)
    assert compose([]) == PrivacyGuarantee(0.0, 0.0, 0.0)
    assert compose([PrivacyGuarantee(1.0, 0.7), PrivacyGuarantee(1.0, 0.7)]).delta == 1.0
    assert compose(iter([PrivacyGuarantee(1.0)])).epsilon == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        PrivacyGuarantee(math.nan),
        PrivacyGuarantee(-1.0),
        PrivacyGuarantee(1.0, math.nan),
        PrivacyGuarantee(1.0, -0.1),
        PrivacyGuarantee(1.0, 1.5),
        PrivacyGuarantee(1.0, 0.0, math.nan),
        PrivacyGuarantee(1.0, 0.0, -1.0),
        PrivacyGuarantee(True),
        PrivacyGuarantee("1"),
        (1.0, 0.0),
        1.0,
    ],
)
def test_compose_refuses_bad_guarantees(bad):
    with pytest.raises((TypeError, ValueError), match=r"guarantees\[1\]"):
        compose([PrivacyGuarantee(0.5), bad])


def test_zcdp_conversions():
    # Bun & Steinke 2016, Prop. 1.3, exact
    for rho in [1e-4, 0.01, 0.5, 3.0]:
        for delta in [1e-10, 1e-5, 0.1]:
            with mp.workdps(50):
                ref = float(mp.mpf(rho) + 2 * mp.sqrt(mp.mpf(rho) * mp.log(1 / mp.mpf(delta))))
            assert math.isclose(zcdp_to_approx_dp(rho, delta), ref, rel_tol=REL)
    assert zcdp_to_approx_dp(0.0, 1e-6) == 0.0
    assert zcdp_to_approx_dp(0.0, 1e-6, method="cks20") == 0.0


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 3.0, 50.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.1])
def test_cks20_against_brute_force(rho, delta):
    # CKS 2020 Cor. 13: δ(α) = exp((α-1)(αρ-ε) + α log1p(-1/α))/(α-1); the returned ε must be
    # valid (min over α of δ(α) <= δ), at least as tight as BS16, and within 1e-9 of the
    # brute-force minimum over a fine α grid.
    eps = zcdp_to_approx_dp(rho, delta, method="cks20")
    assert eps <= zcdp_to_approx_dp(rho, delta)
    with mp.workdps(50):
        r, dl = mp.mpf(rho), mp.mpf(delta)

        def eps_of(a):
            a = mp.mpf(a)
            return a * r + (mp.log(1 / dl) - mp.log(a)) / (a - 1) + mp.log(1 - 1 / a)

        a_star = 1 + mp.sqrt(mp.log(1 / dl) / r)
        grid = [1 + (a_star - 1) * mp.mpf(t) / 400 for t in range(1, 1200)]
        best = min(eps_of(a) for a in grid)
        # refine around the best grid point
        a_best = mp.findroot(lambda a: mp.diff(eps_of, a), grid[0] + (a_star - 1) / 2)
        exact = min(best, eps_of(a_best)) if a_best > 1 else best
    exact = max(0.0, float(exact))  # a negative bound means ε = 0 already holds
    assert eps >= exact - 1e-12 * max(1.0, exact)
    assert eps <= max(0.0, float(best)) + 1e-9


# ---- no NaN / bad value ever gives a finite answer (hypothesis) ------------------------------
ANY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([True, False, "0.5", None, 1 + 0j, np.nan, -0.0, 0, 1]),
    st.integers(-5, 5),
)


def _legal(v, lo_open=True, hi=None):
    if isinstance(v, bool | str | complex) or v is None:
        return False
    if not math.isfinite(v):
        return False
    ok = v > 0 if lo_open else v >= 0
    return ok and (hi is None or v < hi)


@settings(max_examples=1000, deadline=None)
@given(a=ANY, b=ANY)
def test_no_nan_becomes_an_epsilon(a, b):
    calls = [
        (lambda: laplace_epsilon(a, b), _legal(a) and _legal(b)),
        (lambda: gaussian_rho(a, b), _legal(a) and _legal(b)),
        (lambda: gaussian_sigma_from_rho(a, b), _legal(a) and _legal(b)),
        (lambda: zcdp_to_approx_dp(a, b), _legal(a, lo_open=False) and _legal(b, hi=1.0)),
        (
            lambda: zcdp_to_approx_dp(a, b, method="cks20"),
            _legal(a, lo_open=False) and _legal(b, hi=1.0),
        ),
        (lambda: analytic_gaussian_epsilon(b, a), _legal(a) and _legal(b, hi=1.0)),
        (lambda: analytic_gaussian_delta(a, 1.0), not (isinstance(a, bool | str | complex))),
    ]
    for call, legal in calls:
        try:
            out = call()
        except (TypeError, ValueError):
            continue
        except (OverflowError, ZeroDivisionError, RuntimeError):
            # extreme but legal magnitudes may be refused; never for NaN or illegal inputs
            assert legal
            continue
        assert legal or (isinstance(a, int | float) and a == math.inf)
        assert not math.isnan(out) and out >= 0.0


def test_analytic_delta_wide_range_against_mpmath():
    # σ/Δ from 1e-4 to 1e6 and ε up to 1e4, 300-digit reference (δ itself may be ~1e-290):
    # relative error <= 1e-12 wherever δ is representable (measured max 8.8e-14).
    worst = 0.0
    for eps in [0.0, 1e-8, 0.01, 1.0, 20.0, 1e4]:
        for s in [1e-4, 1e-2, 0.3, 1.0, 7.0, 100.0, 1e4, 1e6]:
            with mp.workdps(300):
                ref = mp_delta(eps, s)
                if eps and s > 10:  # mp_delta works at 50 digits; redo at 300 where it cancels
                    e, sm = mp.mpf(eps), mp.mpf(s)
                    ref = mp.ncdf(1 / (2 * sm) - e * sm) - mp.exp(e) * mp.ncdf(
                        -1 / (2 * sm) - e * sm
                    )
            got = analytic_gaussian_delta(eps, s)
            if ref < mp.mpf("1e-300"):
                assert got < 1e-290
                continue
            worst = max(worst, float(abs(got - ref) / ref))
    assert worst < REL


def test_inverses_safe_at_extreme_parameters(rng):
    # random (ε, δ, Δ, σ) over 24 decades of ε and 300 of δ: the calibrated σ and ε_at(δ) are
    # never unsafe against a 400-digit evaluation (a certified rounding margin is added), or the
    # call refuses with ValueError.
    def exact(eps, sigma, sens):
        with mp.workdps(400):
            e, s, d = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sens)
            return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)

    for _ in range(40):
        eps = 10 ** rng.uniform(-12, 12)
        delta = 10 ** rng.uniform(-300, -1e-9)
        sens = 10 ** rng.uniform(-5, 5)
        s = analytic_gaussian_sigma(eps, delta, sens)
        assert exact(eps, s, sens) <= delta
        s2 = sens * 10 ** rng.uniform(-5, 5)
        e2 = analytic_gaussian_epsilon(delta, s2, sens)
        assert e2 == 0.0 or exact(e2, s2, sens) <= delta


def test_unreliable_regimes_refuse():
    # ε ~ 1e14: a = Δ/(2σ) - εσ/Δ is not resolvable in double precision near the root
    with pytest.raises(ValueError, match="not reliable"):
        analytic_gaussian_sigma(1e14, 1e-6)
    # σ = 1e-10 Δ needs ε ≈ 5e19: the answer may be loose there, but never unsafe
    e = analytic_gaussian_epsilon(1e-6, 1e-10)
    with mp.workdps(100):
        sm, em = mp.mpf(1e-10), mp.mpf(e)
        assert (
            mp.ncdf(1 / (2 * sm) - em * sm) - mp.exp(em) * mp.ncdf(-1 / (2 * sm) - em * sm) <= 1e-6
        )
    with pytest.raises(ValueError, match="out of range"):
        gaussian_rho(1e300, 1e-300)
    with pytest.raises(ValueError):
        Gaussian(epsilon=1e14, delta=1e-6)


# ---- exact rationals, calibration rounded to more noise, privacy-map helpers -------------------
def test_round_up_is_the_smallest_double_at_or_above():
    for x in [Fraction(1, 3), Fraction(2, 3), Fraction(10**20 + 1, 7), Fraction(1, 10**400)]:
        f = round_up(x)
        assert Fraction(f) >= x and Fraction(math.nextafter(f, -math.inf)) < x
    assert round_up(Fraction(1, 2)) == 0.5 and round_up(0) == 0.0
    assert round_up(Fraction(10**400)) == math.inf
    # negative control: float() rounds to nearest, which is below 1/3
    assert Fraction(float(Fraction(1, 3))) < Fraction(1, 3)


def test_as_distance_validates_and_keeps_exact_values():
    assert as_distance(2) == 2 and as_distance(0.1) == Fraction(0.1)
    assert as_distance(Fraction(1, 3)) == Fraction(1, 3)  # not rounded through a float
    assert as_distance(np.int64(4), integer=True) == 4 and as_distance(3.0, integer=True) == 3
    for bad, err in [
        (math.nan, ValueError),
        (-0.5, ValueError),
        (math.inf, ValueError),
        ("2", TypeError),
        (np.bool_(True), TypeError),
        (Fraction(-1, 2), ValueError),
    ]:
        with pytest.raises(err, match="d_in"):
            as_distance(bad)
    with pytest.raises(ValueError, match="d_in must be an integer"):
        as_distance(2.5, integer=True)


def test_calibration_holds_the_stated_guarantee_exactly():
    """b = Δ/ε and σ = Δ/sqrt(2ρ) are raised by ulps until the stated ε / ρ holds in exact
    arithmetic; the geometric rate until its ε is at most the nearest double."""
    bumped = 0
    for eps in [0.3, 0.7, 1e-3, 2.2, 1 / 3, 9.99]:
        for d in [1.0, 0.1, 3.0]:
            b = laplace_scale(eps, d)
            assert Fraction(d) / Fraction(b) <= Fraction(eps) and math.isclose(b, d / eps)
            bumped += b != d / eps
            rho = eps
            s = gaussian_sigma_from_rho(rho, d)
            assert Fraction(d) ** 2 / (2 * Fraction(s) ** 2) <= Fraction(rho)
    assert bumped > 0  # negative control: plain Δ/ε is not always safe
    for eps, sens in [(1e-6, 7), (0.1, 3), (2.3, 1), (700.0, 5)]:
        r = geometric_rate(Fraction(eps) / sens, sens)
        assert r <= Fraction(eps) / sens and Fraction(round_up(sens * r)) >= sens * r
        assert float(sens * r) == round_up(sens * r)  # the report equals the nearest double


def test_scaling_helpers_exact():
    assert linear_epsilon(Fraction(1, 4), 6) == 1.5
    assert quadratic_rho(Fraction(4), 6) == 4.5
    assert implied_rho(PrivacyGuarantee(0.5)) == 0.125
    assert implied_rho(PrivacyGuarantee(math.inf)) is None
    assert implied_rho(PrivacyGuarantee(1.0, 1e-6)) is None
    g = compose_repeated(PrivacyGuarantee(0.5, 0.4, 0.125), 3)
    assert g == PrivacyGuarantee(1.5, 1.0, 0.375)  # delta capped at 1
    assert compose_repeated(PrivacyGuarantee(math.inf, 0.0, 0.5), 2).epsilon == math.inf
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must"):
            compose_repeated(PrivacyGuarantee(1.0), bad)


def test_gaussian_delta_for_distance_bounds_the_curve():
    eps, delta = 1.0, 1e-5
    sigma = analytic_gaussian_sigma(eps, delta)
    stated = (1.0, delta)
    ds = [0.0, 0.25, 0.5, 0.9, 1.0, 1.1, 2.0, 5.0, 1e200]
    got = [gaussian_delta_for_distance(eps, sigma, d, stated) for d in ds]
    assert got[0] == 0.0 and got[4] == delta and got[-1] == 1.0
    assert all(b >= a for a, b in pairwise(got))
    for d, g in zip(ds[1:-1], got[1:-1], strict=True):
        if d != 1.0:  # at least the exact curve (mpmath), at most 1
            assert mp_delta(eps, sigma, d) <= g * (1 + 1e-12) and g <= 1.0
