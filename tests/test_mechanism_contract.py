"""The contract every mechanism keeps, checked for EVERY mechanism class of pymc_dp.

The classes are found by walking ``Mechanism.__subclasses__()`` recursively, so a new mechanism
cannot be forgotten: ``test_every_mechanism_has_contract_settings`` fails until it has settings
here. For each class, at ordinary and extreme parameters:

* its three log-densities agree: numpy ``logpdf``, the PyTensor graph ``logpdf_pt`` and the
  numba kernel ``numba_logpdf(x, numba_params)``, and so does the log-density of its PyMC noise
  law ``noise_dist()`` (relative 1e-12, or absolute 1e-12 near 0; -inf at the same points);
* ``release`` and ``sample_noise`` return int64 for integer mechanisms, float64 otherwise;
* the guarantee is monotone in the noise: more noise never gives a larger epsilon, delta or rho
  (and strictly smaller where finite: the check has power, see its negative control);
* the privacy map: ``map(sensitivity) == guarantee()``, ``map(0)`` is zero, ``map`` is
  non-decreasing in ``d_in``, pure epsilon scales as ``d_in`` and zCDP rho as ``d_in**2`` (exact,
  rounded up), and ``d_in`` is validated (error naming ``d_in``).

Plus the architecture the mechanisms rely on: no upward import from kernels, mechanisms or
accounting (imports inside functions included), one secure random source, and the noise-law
registry's errors. Every check here is deterministic (no statistical assertion, so no false-alarm
rate to state); each has a negative control that must fail.
"""

from __future__ import annotations

import ast
import inspect
import math
import pathlib
from fractions import Fraction
from itertools import pairwise

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp.accounting import discrete_gaussian_delta, round_up
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee, register_noise_dist
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

PKG = pathlib.Path(pymc_dp.__file__).parent


def _all_mechanisms() -> set[type]:
    """Every concrete Mechanism subclass defined in pymc_dp (classes made by tests excluded)."""
    out, stack = set(), list(Mechanism.__subclasses__())
    while stack:
        c = stack.pop()
        stack.extend(c.__subclasses__())
        if c.__module__.startswith("pymc_dp.") and not inspect.isabstract(c):
            out.add(c)
    return out


#: parameter settings per class, ordinary and extreme
SETTINGS = {
    Laplace: [
        {"scale": 1.0},
        {"epsilon": 0.3, "sensitivity": 2.5},
        {"scale": 1e-6},
        {"scale": 1e6, "sensitivity": 1e-3},
    ],
    Gaussian: [
        {"sigma": 1.0},
        {"epsilon": 1.0, "delta": 1e-5},
        {"rho": 0.3, "sensitivity": 2.0},
        {"sigma": 1e-6},
        {"sigma": 1e6},
    ],
    Geometric: [
        {"epsilon": 1.0},
        {"epsilon": 0.1, "sensitivity": 3},
        {"alpha": 1.0 - 1e-9},
        {"epsilon": 700.0},
    ],
    DiscreteGaussian: [
        {"sigma": 2.0},
        {"epsilon": 1.0, "delta": 1e-6},
        {"rho": 0.3, "sensitivity": 2},
        {"sigma": 1e-3},
        {"sigma": 1e6},
    ],
}

#: mechanisms with increasing noise, one ladder per class: noise(s) for s = 1, 2, 4, ...
NOISE_LADDER = {
    Laplace: lambda s: Laplace(scale=0.5 * s, sensitivity=1.5),
    Gaussian: lambda s: Gaussian(sigma=0.5 * s, sensitivity=1.5),
    Geometric: lambda s: Geometric(epsilon=2.0 / s, sensitivity=2),
    DiscreteGaussian: lambda s: DiscreteGaussian(sigma=0.5 * s, sensitivity=2),
}
LADDER = [1.0, 2.0, 4.0, 8.0, 64.0]
#: (epsilon, delta)-parameterized mechanisms whose delta curve must fall with more noise
CURVE_LADDER = {
    Gaussian: lambda s: Gaussian(sigma=s),
    DiscreteGaussian: lambda s: DiscreteGaussian(sigma=s),
}

CASES = [(cls, kw) for cls, kws in SETTINGS.items() for kw in kws]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in CASES]


def test_every_mechanism_has_contract_settings():
    found = _all_mechanisms()
    assert found >= {Laplace, Gaussian, Geometric, DiscreteGaussian}
    assert set(SETTINGS) == found, f"add contract settings for {found - set(SETTINGS)}"
    assert set(NOISE_LADDER) == found, f"add a noise ladder for {found - set(NOISE_LADDER)}"
    # negative control: a mechanism class defined in pymc_dp without settings is detected
    fake = type("Fake", (Laplace,), {"__module__": "pymc_dp.mechanisms.fake"})
    try:
        assert fake in _all_mechanisms() and set(SETTINGS) != _all_mechanisms()
    finally:
        del fake
        import gc

        gc.collect()


def _grid(m: Mechanism) -> np.ndarray:
    """Points around the bulk and far in the tails of the noise law (x64)."""
    scale = max(float(getattr(m, "scale", 0.0) or getattr(m, "sigma", 0.0) or 1.0), 1.0)
    if isinstance(m, Geometric):
        scale = max(1.0, 1.0 / float(m.rate))
    base = np.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.25, 7.5])
    wide = np.array([1.0, -2.0, 5.0, -10.0, 30.0]) * scale
    far = np.array([1e6, -1e9, 2.0**53, -(2.0**62)])
    x = np.concatenate([base, wide, far])
    return np.round(x) if m.integer else x


def _assert_close(got, ref, what):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert np.array_equal(np.isneginf(got), np.isneginf(ref)), what
    ok = np.isfinite(ref)
    assert np.all(np.isfinite(got[ok])), what
    err = np.abs(got[ok] - ref[ok])
    tol = np.maximum(1e-12, 1e-12 * np.abs(ref[ok]))
    assert np.all(err <= tol), f"{what}: max error {err.max()}"


@pytest.mark.parametrize(("cls", "kw"), CASES, ids=IDS)
def test_log_densities_agree(cls, kw):
    """numpy == PyTensor == numba == noise_dist logp, at ordinary and extreme points."""
    m = cls(**kw)
    x = _grid(m)
    ref = m.logpdf(x)
    xv = pt.lvector("x") if m.integer else pt.dvector("x")
    f = pytensor.function([xv], [m.logpdf_pt(xv), pm.logp(m.noise_dist(), xv)])
    x_in = x.astype(np.int64) if m.integer else x
    lp_pt, lp_dist = f(x_in)
    lp_nb = np.array([m.numba_logpdf(float(v), m.numba_params) for v in x])
    _assert_close(lp_pt, ref, "logpdf_pt")
    _assert_close(lp_nb, ref, "numba_logpdf")
    _assert_close(lp_dist, ref, "noise_dist logp")
    assert np.isfinite(ref[0]) and ref[0] == np.max(ref)  # mode at 0 (symmetric, unimodal)
    # negative control: the same comparison rejects a density of another noise level
    other = cls(**kw).logpdf(x + (1 if m.integer else 0.5))
    with pytest.raises(AssertionError):
        _assert_close(other, ref, "shifted")


@pytest.mark.parametrize("cls", sorted(SETTINGS, key=lambda c: c.__name__))
def test_integer_mechanisms_put_no_mass_off_the_integers(cls):
    m = cls(**SETTINGS[cls][0])
    x = np.array([0.5, -2.25, 3.0])
    xv = pt.dvector("x")
    f = pytensor.function([xv], m.logpdf_pt(xv))
    lp = [m.logpdf(x), f(x), [m.numba_logpdf(v, m.numba_params) for v in x]]
    for got in lp:
        if m.integer:
            assert np.isneginf(got[:2]).all() and np.isfinite(got[2])
        else:
            assert np.isfinite(got).all()


@pytest.mark.parametrize(("cls", "kw"), CASES, ids=IDS)
def test_release_dtype(cls, kw):
    m = cls(**kw)
    rng = np.random.default_rng(1)
    want = np.int64 if m.integer else np.float64
    opt_in = {} if m.integer else {"allow_float": True}  # float noise: explicit opt-in only
    for values in (np.array([0, 5, -3]), [1, 2], 7):
        out = m.release(values, rng=rng, **opt_in)
        assert out.dtype == want and out.shape == np.shape(values)
    assert m.release(np.array([1.0, 2.0]), **opt_in).dtype == want  # the secure source too
    if not m.integer:  # without the opt-in a float mechanism refuses, naming it
        with pytest.raises(ValueError, match="allow_float=True"):
            m.release(np.array([1.0, 2.0]), rng=rng)
    assert m.sample_noise((2, 3), rng=rng).dtype == want
    assert m.sample_noise(4).shape == (4,)


def _non_increasing(gs) -> bool:
    """Each coordinate of the guarantees (epsilon, delta, rho) is non-increasing along ``gs``."""
    for a, b in pairwise(gs):
        if b.epsilon > a.epsilon or b.delta > a.delta:
            return False
        if (a.rho is None) != (b.rho is None) or (a.rho is not None and b.rho > a.rho):
            return False
    return True


@pytest.mark.parametrize("cls", sorted(NOISE_LADDER, key=lambda c: c.__name__))
def test_guarantee_monotone_in_the_noise(cls):
    ms = [NOISE_LADDER[cls](s) for s in LADDER]
    gs = [m.guarantee() for m in ms]
    assert _non_increasing(gs)
    # strictly: the noise ladder really changes the guarantee (finite coordinates)
    key = [g.epsilon if math.isfinite(g.epsilon) else g.rho for g in gs]
    assert all(b < a for a, b in pairwise(key))
    # negative control: the reversed ladder (less noise) is caught
    assert not _non_increasing(gs[::-1])
    if cls in CURVE_LADDER:  # the exact (epsilon, delta) curve falls with more noise too
        deltas = [CURVE_LADDER[cls](s).delta_at(1.0) for s in LADDER]
        assert all(b < a for a, b in pairwise(deltas))
        eps = [CURVE_LADDER[cls](s).epsilon_at(1e-6) for s in LADDER]
        assert all(b < a for a, b in pairwise(eps))


def _distances(m: Mechanism) -> list:
    s = m.sensitivity
    if m.integer:
        return [0, 1, s, s + 1, 2 * s, 3 * s, 10 * s, 1000 * s]
    return [0.0, 0.25 * s, 0.5 * s, s, 1.5 * s, 2 * s, 3 * s, 100 * s]


@pytest.mark.parametrize(("cls", "kw"), CASES, ids=IDS)
def test_privacy_map(cls, kw):
    m = cls(**kw)
    g = m.map(m.sensitivity)  # the guarantee at the sensitivity, whether claimed or not
    # a mechanism given by its noise scale only makes no privacy claim (issue 24)
    assert m.guarantee() == (g if m.has_privacy_claim else PrivacyGuarantee.no_claim())
    zero = m.map(0)
    assert zero.epsilon == 0.0 and zero.delta == 0.0 and zero.rho in (None, 0.0)
    ds = _distances(m)
    gs = [m.map(d) for d in ds]
    assert _non_increasing(gs[::-1])  # non-decreasing in d_in
    for d, gd in zip(ds, gs, strict=True):
        if d == 0:
            continue
        k = Fraction(d) / Fraction(m.sensitivity)
        if g.delta == 0.0 and math.isfinite(g.epsilon):  # pure: linear, rounded up
            exact = k * Fraction(g.epsilon)
            assert Fraction(gd.epsilon) >= exact * (1 - Fraction(1, 2**52))
            assert abs(gd.epsilon / float(exact) - 1) <= 4e-16
        if g.rho is not None:  # zCDP: quadratic, rounded up
            exact = k * k * Fraction(g.rho)
            assert abs(gd.rho / float(exact) - 1) <= 4e-16
            # negative control: a linear scaling of rho is told apart (when d != sensitivity)
            if k != 1:
                assert abs(gd.rho / float(k * Fraction(g.rho)) - 1) > 1e-3
        if math.isfinite(g.epsilon) and g.delta > 0.0:
            assert gd.epsilon == g.epsilon and 0.0 <= gd.delta <= 1.0


def test_map_values_exact():
    assert Laplace(epsilon=0.5).map(3).epsilon == 1.5
    assert Laplace(scale=2.0, sensitivity=3.0).map(1.0).epsilon == 0.5
    assert Geometric(epsilon=0.25, sensitivity=2).map(6).epsilon == 0.75
    assert Gaussian(rho=0.125).map(3).rho == 9 * 0.125
    assert DiscreteGaussian(sigma=2.0).map(4).rho == 2.0  # 16 / (2 * 4)
    # never under-counted: Laplace(b = 3) gives the smallest double >= 1/3; the nearest double
    # (the naive 1 / 3, the negative control) is below 1/3
    e = Laplace(scale=3.0).map(1).epsilon
    assert Fraction(e) >= Fraction(1, 3) and e == round_up(Fraction(1, 3))
    assert Fraction(1 / 3) < Fraction(1, 3) and e == math.nextafter(1 / 3, 1.0)
    # changes beyond the double range: answered conservatively, never an error or a small value
    for big in (Gaussian(epsilon=1.0, delta=1e-5), DiscreteGaussian(epsilon=1.0, delta=1e-6)):
        g = big.map(10**400)
        assert g.epsilon == 1.0 and g.delta == 1.0 and g.rho == math.inf
    # DiscreteGaussian (epsilon, delta): delta(d) is the exact curve for sensitivity d
    m = DiscreteGaussian(epsilon=1.0, delta=1e-6)
    assert m.map(2).delta == discrete_gaussian_delta(1.0, m.sigma, 2)
    assert m.map(2).delta > 1e-6
    # Gaussian (epsilon, delta): above the sensitivity at least the stated delta, below at most
    gm = Gaussian(epsilon=1.0, delta=1e-5)
    assert gm.map(2.0).delta >= gm.delta_at(1.0) and gm.map(2.0).delta >= 1e-5
    assert gm.map(2.0).delta >= Gaussian(sigma=gm.sigma, sensitivity=2.0).delta_at(1.0)
    assert gm.map(0.5).delta <= 1e-5


@pytest.mark.parametrize(
    ("d_in", "err"),
    [
        (math.nan, ValueError),
        (math.inf, ValueError),
        (-1.0, ValueError),
        (-1, ValueError),
        ("1", TypeError),
        (True, TypeError),
        (None, TypeError),
        (10**400, None),  # a huge integer: answered, conservatively (inf)
    ],
)
@pytest.mark.parametrize("cls", sorted(SETTINGS, key=lambda c: c.__name__))
def test_map_validates_d_in(cls, d_in, err):
    m = cls(**SETTINGS[cls][0])
    if err is None:
        g = m.map(d_in)
        assert g.epsilon == math.inf or g.rho == math.inf
        return
    with pytest.raises(err, match="d_in"):
        m.map(d_in)


@pytest.mark.parametrize("cls", [Geometric, DiscreteGaussian])
def test_integer_mechanisms_refuse_fractional_d_in(cls):
    m = cls(**SETTINGS[cls][0])
    with pytest.raises(ValueError, match="d_in"):
        m.map(1.5)
    assert m.map(2.0) == m.map(2)  # integral floats are integers


def test_noise_dist_registry():
    class Unregistered(Laplace):
        pass

    m = Unregistered(scale=1.0)
    with pytest.raises(NotImplementedError, match="Unregistered"):
        m.noise_dist()
    with pytest.raises(ValueError, match="already registered"):
        register_noise_dist(Laplace, lambda mech, **kw: None)
    with pytest.raises(TypeError):
        register_noise_dist(int, lambda mech, **kw: None)


# ---- architecture ----------------------------------------------------------------------------
#: what each layer may import from pymc_dp (the package's own modules)
LAYERS = {
    "kernels": ("pymc_dp.kernels", "pymc_dp.math", "pymc_dp._cache", "pymc_dp._validation"),
    "mechanisms": (
        "pymc_dp.kernels",
        "pymc_dp.math",
        "pymc_dp.mechanisms",
        "pymc_dp.accounting",
        "pymc_dp._validation",
        "pymc_dp._cache",
    ),
}
LAYERS["accounting"] = LAYERS["mechanisms"]


def _pymc_dp_imports(source: str) -> set[str]:
    """Every pymc_dp module imported anywhere in ``source`` (function bodies included)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("pymc_dp")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pymc_dp"):
            out.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("pymc_dp.") and " " not in node.value:  # importlib names
                out.add(node.value)
    return out


def _upward(source: str, layer: str) -> set[str]:
    return {m for m in _pymc_dp_imports(source) if not m.startswith(LAYERS[layer])}


def test_no_upward_imports():
    files = {
        "kernels": [
            PKG / "kernels" / f
            for f in ("discrete_laplace.py", "discrete_gaussian.py", "exact_sampling.py")
        ],
        "mechanisms": sorted((PKG / "mechanisms").glob("*.py")),
        "accounting": [PKG / "accounting.py"],
    }
    for layer, paths in files.items():
        for p in paths:
            assert not _upward(p.read_text(), layer), (
                f"{p.name} imports {_upward(p.read_text(), layer)}"
            )
    # negative control: an import hidden in a function body is found
    hidden = "def f():\n    from pymc_dp.distributions.discrete_laplace import DiscreteLaplace\n"
    assert _upward(hidden, "mechanisms") == {"pymc_dp.distributions.discrete_laplace"}


def test_one_secure_random_source():
    """``os.urandom`` is read in exactly one function of the package; no other OS source."""
    hits = {}
    for p in PKG.rglob("*.py"):
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in ("urandom", "SystemRandom"):
                name = node.attr
            elif isinstance(node, ast.Name) and node.id in ("urandom", "SystemRandom", "secrets"):
                name = node.id
            elif isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "secrets" in mods or "random" in mods:
                    name = "import secrets/random"
            if name:
                hits.setdefault(p.relative_to(PKG).as_posix(), []).append(name)
    assert hits == {"kernels/exact_sampling.py": ["urandom"]}


#: the exact rational privacy loss of each class at a change ``d``: (field, value)
EXACT = {
    Laplace: lambda m, d: ("epsilon", d / Fraction(m.scale)),
    Geometric: lambda m, d: ("epsilon", d * m.rate),
    Gaussian: lambda m, d: ("rho", d * d / (2 * Fraction(m.sigma) ** 2)),
    DiscreteGaussian: lambda m, d: ("rho", d * d / (2 * m.sigma2)),
}


@pytest.mark.parametrize(("cls", "kw"), CASES, ids=IDS)
def test_map_never_under_counts(cls, kw):
    """Each map value is the smallest double at or above the exact rational loss of the law
    actually sampled (so floating point never under-counts)."""
    assert set(EXACT) == _all_mechanisms()
    m = cls(**kw)
    for d in _distances(m)[1:]:
        field, exact = EXACT[cls](m, Fraction(d))
        got = getattr(m.map(d), field)
        assert Fraction(got) >= exact and got == round_up(exact)


def test_plain_rounding_would_under_count_somewhere():
    """Negative control for the test above: rounding to nearest is below the exact loss for
    some of the contract cases, so the round-up is doing work."""
    below = 0
    for cls, kw in CASES:
        m = cls(**kw)
        for d in _distances(m)[1:]:
            _, exact = EXACT[cls](m, Fraction(d))
            below += Fraction(float(exact)) < exact
    assert below > 0


@pytest.mark.parametrize("s", [1.0, 8.0])
@pytest.mark.parametrize("cls", sorted(NOISE_LADDER, key=lambda c: c.__name__))
def test_noise_variance_matches_draws(cls, s):
    """``noise_variance`` (closed form) against the sample variance of 2 * 10^5 draws, within
    4.89 standard errors (two-sided false-alarm rate 1e-6 by the normal approximation; the
    standard error from the draws' fourth moment); control: 1.1 times it is rejected."""
    mech = NOISE_LADDER[cls](s)
    x = np.asarray(mech.sample_noise(200_000, rng=np.random.default_rng(11)), np.float64)
    x = x - x.mean()
    v_hat = float(np.mean(x**2))
    se = math.sqrt(max(float(np.mean(x**4)) - v_hat**2, 0.0) / x.size)
    v = mech.noise_variance
    assert abs(v_hat - v) <= 4.89 * se, (v_hat, v, se)
    assert abs(v_hat - 1.1 * v) > 4.89 * se
