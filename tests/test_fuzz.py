"""Property-based fuzz test over every public entry point (issue 7).

Every call either gives an answer that is right against an independent reference (closed forms,
scipy, brute-force sums) or raises ``ValueError``/``TypeError`` whose message names the argument,
within a time bound. It never returns NaN, +inf, a positive log-probability of a discrete law, an
integer that wrapped, or hangs.

Entry points and examples per run (fast tier; hypothesis may stop early on a small space):

=============================================  ========
mechanism constructors (8 parameterizations)      4,800
noise log-densities (numpy, 4 mechanisms)          1,200
``release`` (4 mechanisms)                         1,200
distributions' logp (4 noise laws)                 1,600
distributions' draws (4 noise laws)                  400
``Privatized`` (build and ``pm.set_data``)           450
``Release`` (build and ``pm.set_data``)              350
``privacy_report``                                    60
=============================================  ========

The examples are derandomized (a fixed hypothesis seed), so CI and ``make test`` see the same
inputs every run, on every machine. Random exploration is a separate target: ``make fuzz``
(``PYMC_DP_FUZZ_RANDOM=1``: hypothesis draws new inputs each run, 10x the examples) over this
file and ``tests/test_fuzz_release.py``.

How a found failure becomes a fixed example: hypothesis prints the failing input (the
``Falsifying example``, with the values of every ``data.draw`` label); fix the bug, then add the
input to the ``FOUND_*`` table of the entry point it hit (tests that draw with ``st.data()``
cannot take ``@example``, so each table feeds a parametrized test that runs the same check on
its rows), and add a regression test against an independent reference (mpmath, brute-force sums)
in ``tests/test_residue_numeric.py``. The table rows run in every default run.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

import pymc_dp as pmdp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_harness
from fuzz_harness import FUZZ
from fuzz_harness import n_examples as _n
from fuzz_harness import positive as _plain_positive

# ---- harness (tests/fuzz_harness.py) ---------------------------------------------------------

#: seconds one example may take before it counts as a hang
TIME_BOUND = 20.0

bounded = functools.partial(fuzz_harness.bounded, TIME_BOUND)
call = functools.partial(fuzz_harness.call, time_bound=TIME_BOUND)


def assert_logp(lp, ref=None, *, discrete: bool, rtol=1e-9, atol=1e-9):
    """A log-density: never NaN or +inf, never positive for a discrete law; equal to ``ref``."""
    lp = np.asarray(lp, dtype=np.float64)
    assert not np.any(np.isnan(lp)), "NaN log-density"
    assert not np.any(lp == np.inf), "+inf log-density"
    if discrete:
        assert np.all(lp <= 1e-12), f"positive log-pmf {lp.max()}"
    if ref is not None:
        ref = np.asarray(ref, dtype=np.float64)
        both_finite = np.isfinite(ref) & np.isfinite(lp)
        np.testing.assert_array_equal(np.isneginf(lp) & np.isfinite(ref), False)
        np.testing.assert_allclose(lp[both_finite], ref[both_finite], rtol=rtol, atol=atol)


# "anything a user or a broken pipeline might pass as a number"
ANY_SCALAR = fuzz_harness.any_scalar(
    ["1", "nan", "", "1.5"],
    [np.float32(0.5), np.int64(3), np.uint64(2**64 - 1), np.float64("nan")],
    st.builds(np.asarray, st.floats(min_value=0.01, max_value=10)),
    st.lists(st.floats(min_value=0.1, max_value=2), min_size=1, max_size=2),
)
POSITIVE = st.one_of(
    st.floats(min_value=1e-12, max_value=1e6),
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from([5e-324, 1e-300, 1e300, 2.0**-60, 745.2, 1e-16]),
)


# ---- mechanism constructors ------------------------------------------------------------------

CONSTRUCTORS = [
    (pmdp.Laplace, ("scale",)),
    (pmdp.Laplace, ("epsilon", "sensitivity")),
    (pmdp.Geometric, ("alpha",)),
    (pmdp.Geometric, ("epsilon", "sensitivity")),
    (pmdp.Gaussian, ("sigma",)),
    (pmdp.Gaussian, ("epsilon", "delta")),
    (pmdp.DiscreteGaussian, ("rho",)),
    (pmdp.DiscreteGaussian, ("epsilon", "delta")),
]


def _check_guarantee(mech, kwargs):
    if mech.has_privacy_claim:
        g = mech.guarantee()
    else:  # given by its noise scale only: no privacy claim (issue 24); check its map at 1
        assert mech.guarantee() == pmdp.PrivacyGuarantee.no_claim()
        g = mech.map(mech.sensitivity)
    assert isinstance(g.epsilon, float) and isinstance(g.delta, float)
    assert not math.isnan(g.epsilon) and g.epsilon > 0
    assert 0.0 <= g.delta < 1.0
    assert g.rho is None or (isinstance(g.rho, float) and g.rho > 0 and math.isfinite(g.rho))
    sens = float(mech.sensitivity)
    assert math.isfinite(sens) and sens > 0
    # reference closed forms (Laplace eps = s/b; geometric eps = s ln(1/alpha); Gaussian zCDP)
    if "scale" in kwargs:
        assert g.epsilon == pytest.approx(sens / float(kwargs["scale"]), rel=1e-12)
    if "epsilon" in kwargs and "delta" not in kwargs:
        # a requested epsilon is never exceeded (rational rounding adds noise, never removes it)
        assert g.epsilon <= float(kwargs["epsilon"]) * (1 + 1e-12)
        assert g.epsilon == pytest.approx(float(kwargs["epsilon"]), rel=1e-6)
    if "alpha" in kwargs:
        ref = -math.log(float(kwargs["alpha"]))
        assert g.epsilon <= ref * (1 + 1e-12)
        assert g.epsilon == pytest.approx(ref, rel=1e-6)
    if "delta" in kwargs:
        assert g.delta <= float(kwargs["delta"]) * (1 + 1e-9)
        assert g.epsilon <= float(kwargs["epsilon"]) * (1 + 1e-9)
    if "rho" in kwargs:
        assert g.rho <= float(kwargs["rho"]) * (1 + 1e-9)
    if "sigma" in kwargs:
        # (s / sigma)^2 / 2: sigma**2 overflows a float from sigma ~ 1.4e154 (make fuzz found
        # sigma = 3.3e156); a subnormal rho holds fewer digits
        ref = (sens / float(kwargs["sigma"])) ** 2 / 2
        assert g.rho == pytest.approx(ref, rel=1e-12, abs=1e-320)


@pytest.mark.parametrize(("cls", "args"), CONSTRUCTORS, ids=lambda v: str(v))
@settings(FUZZ, max_examples=_n(600))
@given(data=st.data())
def test_mechanism_constructors(cls, args, data):
    kwargs = {}
    for a in args:
        if a == "delta":
            kwargs[a] = data.draw(
                st.one_of(ANY_SCALAR, st.floats(min_value=1e-320, max_value=0.5)), label=a
            )
        else:
            kwargs[a] = data.draw(st.one_of(ANY_SCALAR, POSITIVE), label=a)
    mech, exc = call(cls, **kwargs, names=args)
    if exc is not None:
        return
    # accepted: every argument was a plain positive number (delta in (0, 1))
    for a, v in kwargs.items():
        assert _plain_positive(v), f"{cls.__name__} accepted {a}={v!r}"
    _check_guarantee(mech, kwargs)


#: constructor inputs that ``make fuzz`` found failing (the test's own reference overflowed)
FOUND_CONSTRUCTORS = [(pmdp.Gaussian, {"sigma": 3.2989513676808755e156})]


@pytest.mark.parametrize(("cls", "kwargs"), FOUND_CONSTRUCTORS)
def test_mechanism_constructors_found(cls, kwargs):
    _check_guarantee(cls(**kwargs), kwargs)


# ---- noise log-densities ---------------------------------------------------------------------

MECHANISMS = {
    "laplace": pmdp.Laplace(scale=0.7),
    "geometric": pmdp.Geometric(epsilon=0.5),
    "gaussian": pmdp.Gaussian(sigma=1.3),
    "discrete_gaussian": pmdp.DiscreteGaussian(sigma=2.0),
}


def _noise_reference(name, x):
    x = np.asarray(x, dtype=np.float64)
    if name == "laplace":
        # the closed form: scipy's laplace.logpdf is 3e-6 off at x = 512 (scipy 1.18)
        return -np.log(1.4) - np.abs(x) / 0.7
    if name == "gaussian":
        return stats.norm.logpdf(x, scale=1.3)
    if name == "geometric":
        mech = MECHANISMS["geometric"]
        a = mech.alpha
        return np.log((1 - a) / (1 + a)) + np.abs(x) * mech.log_alpha
    k = np.arange(-60, 61, dtype=np.float64)
    log_z = special.logsumexp(-(k**2) / 8.0)
    return -(x**2) / 8.0 - log_z


EXTREME_INTS = st.sampled_from(
    [0, 1, -1, 2**31, -(2**31) - 1, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 10**6]
)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@settings(FUZZ, max_examples=_n(300))
@given(
    x=st.one_of(
        st.floats(allow_nan=False, allow_infinity=True),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        EXTREME_INTS,
    )
)
def test_noise_logpdf(name, x):
    mech = MECHANISMS[name]
    arg = np.int64(x) if isinstance(x, int) else np.float64(x)
    with bounded():
        lp = mech.logpdf(arg)
    with np.errstate(all="ignore"):  # the reference overflows to -inf at |x| ~ 1e154
        ref = _noise_reference(name, arg)
    if mech.integer and not float(arg).is_integer():
        ref = -np.inf
    assert_logp(lp, ref, discrete=mech.integer, rtol=1e-12)


# ---- release ---------------------------------------------------------------------------------

VALUES = st.one_of(
    st.lists(st.integers(min_value=-(10**9), max_value=10**9), min_size=1, max_size=5),
    st.lists(st.integers(min_value=-(2**64), max_value=2**64), min_size=1, max_size=3),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3),
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=3),
    st.sampled_from(
        [
            np.array([2**63 - 1]),
            np.array([2**64 - 1], dtype=np.uint64),
            np.array([1e19]),
            np.array([1 + 2j]),
            np.array(["5"]),
            np.array(["2020-01-01"], dtype="datetime64[D]"),
            np.array([5], dtype="timedelta64[s]"),
            np.ma.masked_array([1, -999], mask=[False, True]),
            np.array([True, False]),
            np.array([3], dtype=np.int8),
            np.array([], dtype=np.int64),
            np.array(7),
            "7",
            None,
        ]
    ),
)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
@settings(FUZZ, max_examples=_n(300))
@given(values=VALUES)
def test_release(name, values):
    mech = MECHANISMS[name]
    rng = np.random.default_rng(0)
    # the floating-point path needs its explicit opt-in (tests/test_fuzz_release.py fuzzes both)
    kwargs = {} if mech.integer else {"allow_float": True}
    out, exc = call(mech.release, values, rng=rng, names=("values",), **kwargs)
    if exc is not None:
        return
    arr = np.asarray(values)
    assert not np.ma.isMaskedArray(values) or not np.ma.getmaskarray(values).any()
    assert arr.dtype.kind in "iuf", f"released non-real values of dtype {arr.dtype}"
    assert out.shape == arr.shape
    assert out.dtype == (np.int64 if mech.integer else np.float64)
    if out.size == 0:
        return
    exact = arr.astype(object) if arr.dtype.kind in "iu" else arr.astype(np.float64)
    noise = np.asarray(out, dtype=object) - exact if mech.integer else out - exact
    # the noise of these mechanisms is below 60 in magnitude with probability > 1 - 1e-30
    assert np.all(np.abs(np.asarray(noise, dtype=np.float64)) <= 60 + 1e-9 * np.abs(exact)), (
        f"release wrapped or lost precision: {values!r} -> {out!r}"
    )


# ---- noise distributions ---------------------------------------------------------------------


def _skellam_ref(k, mu1, mu2):
    # 30-digit mpmath: scipy's skellam loses digits when one rate is tiny (at mu1 = 47.7,
    # mu2 = 1e-3, k = -25 it is 2e-6 off, relative)
    with mpmath.workdps(30):
        m1, m2 = mpmath.mpf(float(mu1)), mpmath.mpf(float(mu2))
        kk = int(k)
        lp = (
            -(m1 + m2)
            + mpmath.mpf(kk) / 2 * mpmath.log(m1 / m2)
            + mpmath.log(mpmath.besseli(abs(kk), 2 * mpmath.sqrt(m1 * m2)))
        )
        return float(lp)


def _dlaplace_ref(k, alpha):
    return stats.dlaplace.logpmf(k, -np.log(alpha))


def _dnormal_ref(k, sigma):
    j = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41, dtype=np.float64)
    return -(float(k) ** 2) / (2 * sigma**2) - special.logsumexp(-(j**2) / (2 * sigma**2))


def _bessel_ref(k, nu, a):
    # log P(k) = (2k + nu) log(a/2) - log I_nu(a) - log k! - log Gamma(k + nu + 1)
    k = float(k)
    return (
        (2 * k + nu) * np.log(a / 2)
        - (np.log(special.ive(nu, a)) + a)
        - special.gammaln(k + 1)
        - special.gammaln(k + nu + 1)
    )


NOISE_DISTS = {
    "Skellam": (pmdp.Skellam, ("mu1", "mu2"), _skellam_ref),
    "DiscreteLaplace": (pmdp.DiscreteLaplace, ("alpha",), _dlaplace_ref),
    "DiscreteNormal": (pmdp.DiscreteNormal, ("sigma",), _dnormal_ref),
    "Bessel": (pmdp.Bessel, ("nu", "a"), _bessel_ref),
}
_COMPILED: dict = {}


def _compiled(name, what):
    key = (name, what)
    if key not in _COMPILED:
        cls, params, _ = NOISE_DISTS[name]
        syms = [pt.dscalar(p) for p in params]
        rv = cls.dist(*syms)
        if what == "logp":
            value = pt.lscalar("value")
            # pytensor.function keeps the parameter checks raising (pm.compile turns them to -inf)
            _COMPILED[key] = pytensor.function([*syms, value], pm.logp(rv, value))
        else:
            _COMPILED[key] = pm.compile(syms, cls.dist(*syms, size=5), random_seed=1)
    return _COMPILED[key]


def _valid(name, vals) -> bool:
    if name == "DiscreteLaplace":
        return 0 < vals[0] < 1
    if name == "Bessel":
        return vals[0] >= 0 and vals[1] > 0
    return all(v > 0 for v in vals)


PARAM = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-3, max_value=50.0),
    st.sampled_from([0.0, -1.0, 1e-300, 1e19, 0.999999, 0.5]),
)


@pytest.mark.parametrize("name", sorted(NOISE_DISTS))
@settings(FUZZ, max_examples=_n(400))
@given(data=st.data())
def test_noise_distribution_logp(name, data):
    _, params, _ = NOISE_DISTS[name]
    vals = [data.draw(PARAM, label=p) for p in params]
    k = data.draw(st.one_of(st.integers(-50, 50), EXTREME_INTS), label="value")
    _check_noise_logp(name, vals, k)


#: inputs the fuzz (or a review) found failing, kept as fixed examples: (name, params, value)
FOUND_NOISE_LOGP = [
    # NaN log-density found by a random run of issue 24 (a fresh clone's make test)
    ("Bessel", (1.9, 9.009463052461551e259), 2**63 - 1),
    # issue 24's hostile-input review: -inf, NaN at subnormal / huge a, reported hangs
    ("Bessel", (0.0, 5e-324), 0),
    ("Bessel", (0.0, 5e-324), 1),
    ("Bessel", (216.6, 5e-324), 1),
    ("Bessel", (0.0, 4e297), 0),
    ("Bessel", (0.0, 4e297), 2**63 - 1),
    ("Bessel", (1e6, 1.2e160), 679),
    ("Bessel", (216.6, 4.2e216), 8046),
]


@pytest.mark.parametrize(("name", "vals", "k"), FOUND_NOISE_LOGP)
def test_noise_distribution_logp_found(name, vals, k):
    """The fuzz's found failures, re-run through the same check every run (each is also
    compared with mpmath in ``tests/test_residue_numeric.py::test_bessel_logp_hard_points``)."""
    _check_noise_logp(name, list(vals), k)


def _check_noise_logp(name, vals, k):
    _, params, ref_fn = NOISE_DISTS[name]
    fn = _compiled(name, "logp")
    lp, exc = call(fn, *vals, k, names=params)
    if exc is not None:
        assert not _valid(name, vals) or not all(math.isfinite(v) for v in vals), (
            f"{name}{tuple(vals)} refused at k={k}: {exc}"
        )
        return
    assert _valid(name, vals) and all(math.isfinite(v) for v in vals), (
        f"{name}{tuple(vals)} gave logp {lp} instead of a parameter error"
    )
    ref = None
    moderate = abs(k) <= 50 and all(1e-3 <= v <= 50 for v in vals if name != "DiscreteLaplace")
    if moderate and (name != "DiscreteLaplace" or 1e-3 < vals[0] < 0.999):
        with np.errstate(all="ignore"):
            ref = ref_fn(k, *vals)
        if not np.isfinite(ref) or ref < -700:
            ref = None  # scipy's own accuracy limit; mpmath checks live in the family tests
    assert_logp(lp, ref, discrete=True, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", sorted(NOISE_DISTS))
@settings(FUZZ, max_examples=_n(100))
@given(data=st.data())
def test_noise_distribution_draws(name, data):
    _, params, _ = NOISE_DISTS[name]
    vals = [data.draw(PARAM, label=p) for p in params]
    fn = _compiled(name, "draw")
    draws, exc = call(fn, *vals, names=params)
    if exc is not None:
        return
    assert _valid(name, vals) and all(math.isfinite(v) for v in vals), (
        f"{name}{tuple(vals)} drew {draws} instead of refusing its parameters"
    )
    draws = np.asarray(draws)
    assert draws.dtype == np.int64 and draws.shape == (5,)
    if name == "Bessel":
        assert np.all(draws >= 0)


# ---- Privatized ------------------------------------------------------------------------------

OBSERVED = st.one_of(
    st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=4),
    st.lists(st.integers(min_value=-(2**64), max_value=2**64), min_size=1, max_size=3),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3),
    st.sampled_from(
        [
            np.ma.masked_array([1, 2], mask=[False, True]),
            np.array([1.7, 2.2]),
            np.array([3_000_000_000, 3_000_000_001]),
            np.array([2**63 - 1]),
            np.array([-(2**63)]),
            np.array(["1"]),
            np.array([1 + 1j]),
        ]
    ),
)


def _exact_integer(values) -> np.ndarray | None:
    arr = np.asarray(values)
    if np.ma.isMaskedArray(values) or arr.dtype.kind not in "iuf" or arr.size == 0:
        return None
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
        return None
    return arr.astype(object)


def _poisson_geometric_ref(z, lam, mech):
    """Brute-force log sum_y Poisson(y; lam) eta(z - y), y over 0..400 (tail < 1e-300)."""
    y = np.arange(0, 401, dtype=np.float64)
    a = mech.alpha
    out = []
    for zi in z:
        d = np.abs(float(zi) - y)
        terms = stats.poisson.logpmf(y, lam) + np.log((1 - a) / (1 + a)) + d * mech.log_alpha
        out.append(special.logsumexp(terms))
    return np.array(out)


@settings(FUZZ, max_examples=_n(150))
@given(observed=OBSERVED, shape=st.sampled_from([None, None, (2,), (4,)]))
def test_privatized_build(observed, shape):
    """Built with any observed data: refused naming it, or the model holds it exactly."""
    mech = MECHANISMS["geometric"]
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        kwargs = {} if shape is None else {"shape": shape}

        def build():
            return pmdp.Privatized("y", pm.Poisson.dist(lam), mech, observed=observed, **kwargs)

        y, exc = call(build, names=("observed", "shape", "values"))
    if exc is not None:
        return
    exact = _exact_integer(observed)
    assert exact is not None, f"accepted observed={observed!r}"
    if shape is not None:
        assert exact.shape == shape, f"shape={shape} accepted {exact.size} values"
    held = np.asarray(model.rvs_to_values[y].data)
    assert held.dtype == np.int64
    np.testing.assert_array_equal(held.astype(object), exact)
    assert model.free_RVs == [lam], "a release entry became an imputed variable"


@pytest.fixture(scope="module")
def privatized_data_model():
    mech = MECHANISMS["geometric"]
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        data = pm.Data("z", np.array([3, 4], dtype=np.int64))
        y = pmdp.Privatized("y", pm.Poisson.dist(lam), mech, observed=data)
    logp = model.compile_logp(vars=[y])
    return model, logp, mech


@settings(FUZZ, max_examples=_n(300))
@given(observed=OBSERVED)
def test_privatized_set_data(privatized_data_model, observed):
    """``pm.set_data`` gets the same refusal as the build; accepted data give the exact marginal."""
    model, logp, mech = privatized_data_model

    def run():
        with model:
            pm.set_data({"z": observed})
        return logp({"lam_log__": np.log(4.0)})

    lp, exc = call(run, names=("observed", "z", "values", "data"))
    if exc is not None:
        return
    exact = _exact_integer(observed)
    assert exact is not None, f"set_data accepted {observed!r} (logp {lp})"
    ref = _poisson_geometric_ref(exact, 4.0, mech).sum()
    assert_logp(lp, ref, discrete=True, rtol=1e-9)


# ---- Release ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release_data_model():
    mech = MECHANISMS["laplace"]
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=6)
        data = pm.Data("zd", np.float64(2.5))
        z = pmdp.Release("z", x.sum(), mech, observed=data)
    logp = model.compile_logp(vars=[z])
    return model, logp, mech


RELEASED = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-100, max_value=100),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([1e300, -1e300, 1e19, "3", 1 + 2j, None]),
)


@settings(FUZZ, max_examples=_n(250))
@given(value=RELEASED)
def test_release_set_data(release_data_model, value):
    model, logp, mech = release_data_model
    x = np.array([1, 0, 1, 1, 0, 0], dtype=np.int64)

    def run():
        with model:
            pm.set_data({"zd": value})
        return logp({"p_logodds__": 0.0, "x": x})

    lp, exc = call(run, names=("observed", "zd", "values", "data"))
    if exc is not None:
        return
    assert isinstance(value, int | float) and math.isfinite(float(value)), f"accepted {value!r}"
    ref = mech.logpdf(np.float64(value) - 3.0)
    assert_logp(lp, ref, discrete=False, rtol=1e-12)


@settings(FUZZ, max_examples=_n(100))
@given(value=RELEASED, integer=st.booleans())
def test_release_build(value, integer):
    mech = MECHANISMS["geometric" if integer else "laplace"]
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)

        def build():
            return pmdp.Release("z", x.sum(), mech, observed=value)

        z, exc = call(build, names=("observed", "values"))
    if exc is not None or value is None:  # observed=None: an unobserved release (no data)
        return
    v = float(value)
    assert math.isfinite(v) and (not integer or v.is_integer()), f"accepted {value!r}"
    held = np.asarray(model.rvs_to_values[z].data)
    if integer:
        assert held.dtype == np.int64 and int(held) == int(value)
    else:
        assert float(held) == v


# ---- privacy report --------------------------------------------------------------------------

MECH_CHOICES = st.sampled_from(
    [
        pmdp.Laplace(epsilon=0.5),
        pmdp.Geometric(epsilon=0.25),
        pmdp.Laplace(epsilon=1.0, sensitivity=2.0),
        pmdp.Gaussian(rho=0.1),
        pmdp.DiscreteGaussian(rho=0.2),
    ]
)


@settings(FUZZ, max_examples=_n(60))
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["privatized", "release", "unobserved"]), MECH_CHOICES),
        min_size=1,
        max_size=4,
    )
)
def test_privacy_report_never_undercounts(nodes):
    """The report's totals bound the sum over observed releases (basic composition)."""
    eps, rho, pure = 0.0, 0.0, True
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=3)
        for i, (kind, mech) in enumerate(nodes):
            g = mech.guarantee()
            if kind == "privatized":
                base = pm.Poisson.dist(2.0) if mech.integer else pm.Normal.dist(0.0, 1.0)
                obs = np.array([1, 2]) if mech.integer else np.array([0.5, 1.5])
                pmdp.Privatized(f"n{i}", base, mech, observed=obs)
            elif kind == "release":
                pmdp.Release(f"n{i}", x.sum(), mech, observed=1 if mech.integer else 1.0)
            else:
                continue
            pure &= g.rho is None
            eps += g.epsilon
            rho += g.rho if g.rho is not None else g.epsilon**2 / 2
        with bounded():
            report = pmdp.privacy_report(model)
    total = report.total
    if pure:
        assert total.epsilon >= eps * (1 - 1e-12)
        assert total.delta == 0.0
    if eps == 0.0:
        assert total.epsilon == 0.0
    if any(k != "unobserved" for k, _ in nodes) and not pure:
        # pure epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)
        assert total.rho is not None and total.rho >= rho * (1 - 1e-12)
    assert type(total.epsilon) is float and type(total.delta) is float
    assert total.rho is None or type(total.rho) is float
