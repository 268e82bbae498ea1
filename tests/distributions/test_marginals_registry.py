"""Every registered marginal against a brute-force reference, at ordinary and extreme parameters.

The test walks the marginals registry: each built-in ``(base Op, noise family)`` pair (a
marginal implemented in the pymc_dp package) must have an entry in :data:`REFERENCE_CASES`,
keyed like :func:`registered_marginals`. A pair registered without one fails
:func:`test_every_registered_pair_has_reference_cases`.

References are independent of the library's marginals: the noise log-densities are written
here from their definitions, the base log-pmfs are scipy's, and the marginal is the direct
log-sum over the true value (discrete bases) or mpmath quadrature (the Normal base). Pass:
relative error <= 1e-10 where ``|log p| >= 1``, else absolute <= 1e-10 (docs/testing.md).
Negative control: the same reference with the noise scale x 1.05 must be rejected by the
same comparison at every case.
"""

from __future__ import annotations

import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import special, stats

import pymc_dp
import pymc_dp.distributions.marginals as marg
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

TOL = 1e-10
PACKAGE = Path(pymc_dp.__file__).resolve().parent
F = np.float64

# ---------------------------------------------------------------------------------------------
# noise log-densities from their definitions (scale multiplied by `stretch` for the control)


def noise_logpdf(mech, t, stretch=1.0):
    t = np.asarray(t, dtype=np.float64)
    if isinstance(mech, Laplace):
        b = mech.scale * stretch
        return -np.abs(t) / b - math.log(2.0 * b)
    if isinstance(mech, Geometric):
        a = -mech.log_alpha / stretch  # eta(t) = tanh(a/2) exp(-a |t|), t integer
        return math.log(math.tanh(a / 2.0)) - a * np.abs(t)
    if isinstance(mech, Gaussian):
        s = mech.sigma * stretch
        return -0.5 * (t / s) ** 2 - math.log(s * math.sqrt(2.0 * math.pi))
    if isinstance(mech, DiscreteGaussian):
        s = mech.sigma * stretch
        k = np.arange(-int(40 * s) - 40, int(40 * s) + 41, dtype=np.float64)
        return -0.5 * (t / s) ** 2 - special.logsumexp(-0.5 * (k / s) ** 2)
    raise TypeError(mech)


def noise_logpdf_mp(mech, t, stretch=1.0):
    """The continuous noise laws in mpmath (``t`` an mpf, no rounding of ``z - y``)."""
    if isinstance(mech, Laplace):
        b = mp.mpf(mech.scale) * stretch
        return -abs(t) / b - mp.log(2 * b)
    s = mp.mpf(mech.sigma) * stretch
    return -((t / s) ** 2) / 2 - mp.log(s * mp.sqrt(2 * mp.pi))


def brute_discrete(logpmf, ys):
    """Reference for a discrete base: ``log sum_y p(y) eta(z - y)`` over ``ys``."""

    def ref(z, mech, stretch=1.0):
        base = logpmf(ys)
        with np.errstate(divide="ignore"):
            return np.array(
                [special.logsumexp(base + noise_logpdf(mech, zi - ys, stretch)) for zi in z]
            )

    return ref


_STEPS = (-60, -20, -8, -3, -1, 0, 1, 3, 8, 20, 60)


def quad_normal(mu, sigma):
    """Reference for a Normal base: ``log int N(y; mu, sigma) eta(z - y) dy`` by quadrature."""

    def one(z, mech, stretch):
        mp.mp.dps = 20
        if isinstance(mech, Laplace):
            b = mech.scale * stretch
            w = sigma * sigma / b
            peaks = [min(mu + w, z), max(mu - w, z), z]
            spread = [sigma, b]
        else:
            s = mech.sigma * stretch
            peaks = [(mu * s * s + z * sigma * sigma) / (sigma * sigma + s * s)]
            spread = [sigma * s / math.hypot(sigma, s)]
        # dense breakpoints around each peak of the integrand, on the scale of each factor
        pts = sorted({p + k * h for p in peaks for h in spread for k in _STEPS})

        def log_integrand(y):
            return mp.log(mp.npdf(y, mu, sigma)) + noise_logpdf_mp(mech, mp.mpf(z) - y, stretch)

        # mpmath's quad stops on an absolute error: scale the integrand to about 1 first
        shift = max(log_integrand(mp.mpf(p)) for p in pts)
        total = mp.quad(lambda y: mp.exp(log_integrand(y) - shift), [-mp.inf, *pts, mp.inf])
        return float(shift + mp.log(total))

    def ref(z, mech, stretch=1.0):
        return np.array([one(float(zi), mech, stretch) for zi in z])

    return ref


def dirac_ref(c):
    def ref(z, mech, stretch=1.0):
        return noise_logpdf(mech, np.asarray(z, dtype=np.float64) - c, stretch)

    return ref


# ---------------------------------------------------------------------------------------------
# reference cases: (label, make_base, mechanism, observations, reference)

ALL_MECHS = {
    "geometric": Geometric(epsilon=0.7),
    "laplace": Laplace(scale=1.3),
    "discrete_gaussian": DiscreteGaussian(sigma=1.5),
    "gaussian": Gaussian(sigma=0.9),
}


def _obs(mech, z):
    z = np.asarray(z, dtype=np.float64)
    return z if mech.integer else z + 0.37


def _poisson(mu):
    return lambda: pm.Poisson.dist(F(mu))


def _poisson_ref(mu, hi):
    return brute_discrete(lambda y: stats.poisson.logpmf(y, mu), np.arange(0, hi))


def _negbin(mu, alpha):
    return lambda: pm.NegativeBinomial.dist(mu=F(mu), alpha=F(alpha))


def _negbin_ref(mu, alpha, hi):
    n, p = alpha, alpha / (mu + alpha)
    return brute_discrete(lambda y: stats.nbinom.logpmf(y, n, p), np.arange(0, hi))


def _count_cases(family, make, make_ref):
    """Ordinary and extreme cases for a count base (Poisson or NegativeBinomial)."""
    small = {
        "geometric": Geometric(epsilon=20.0),
        "laplace": Laplace(scale=0.05),
        "discrete_gaussian": DiscreteGaussian(sigma=0.3),
    }[family]
    wide = {
        "geometric": Geometric(epsilon=0.02),
        "laplace": Laplace(scale=50.0),
        "discrete_gaussian": DiscreteGaussian(sigma=40.0),
    }[family]
    mech = ALL_MECHS[family]
    return [
        ("ordinary", make(3.5), mech, _obs(mech, [-6, -1, 0, 1, 3, 4, 7, 12, 30]), make_ref(3.5)),
        ("tiny rate", make(1e-6), small, _obs(small, [0, 1, 2, 5, -3]), make_ref(1e-6)),
        ("huge rate, wide noise", make(1e4), wide, _obs(wide, [9500, 1e4, 10300]), make_ref(1e4)),
        ("far observations", make(30.0), mech, _obs(mech, [-400, 150, 400]), make_ref(30.0)),
    ]


def _poisson_cases(family):
    return _count_cases(family, _poisson, lambda mu: _poisson_ref(mu, int(3 * mu) + 2000))


def _negbin_cases(family):
    return _count_cases(
        # NB(alpha = 2): exponential tail of rate ~2/mu, so 16 mu + 3000 leaves below e^-30
        family,
        lambda mu: _negbin(mu, 2.0),
        lambda mu: _negbin_ref(mu, 2.0, int(16 * mu) + 3000),
    )


_SKEWED = np.array([1 - 2e-9, 1e-9, 1e-9])
FINITE = {
    "BernoulliRV": [
        (lambda: pm.Bernoulli.dist(p=F(0.3)), lambda y: stats.bernoulli.logpmf(y, 0.3)),
        (lambda: pm.Bernoulli.dist(p=F(1e-12)), lambda y: stats.bernoulli.logpmf(y, 1e-12)),
    ],
    "BinomialRV": [
        (lambda: pm.Binomial.dist(n=12, p=F(0.3)), lambda y: stats.binom.logpmf(y, 12, 0.3)),
        (
            lambda: pm.Binomial.dist(n=500, p=F(0.999)),
            lambda y: stats.binom.logpmf(y, 500, 0.999),
        ),
    ],
    "BetaBinomialRV": [
        (
            lambda: pm.BetaBinomial.dist(n=9, alpha=F(1.5), beta=F(2.5)),
            lambda y: stats.betabinom.logpmf(y, 9, 1.5, 2.5),
        ),
        (
            lambda: pm.BetaBinomial.dist(n=300, alpha=F(1e-3), beta=F(50.0)),
            lambda y: stats.betabinom.logpmf(y, 300, 1e-3, 50.0),
        ),
    ],
    "DiscreteUniformRV": [
        (
            lambda: pm.DiscreteUniform.dist(lower=2, upper=7),
            lambda y: stats.randint.logpmf(y, 2, 8),
        ),
        (
            lambda: pm.DiscreteUniform.dist(lower=-300, upper=400),
            lambda y: stats.randint.logpmf(y, -300, 401),
        ),
    ],
    "CategoricalRV": [
        (lambda: pm.Categorical.dist(p=np.array([0.2, 0.5, 0.3])), np.log([0.2, 0.5, 0.3])),
        (lambda: pm.Categorical.dist(p=_SKEWED), np.log(_SKEWED)),
    ],
}


def _finite_cases(name):
    cases = []
    for (make, logpmf), label in zip(FINITE[name], ("ordinary", "extreme"), strict=True):
        if isinstance(logpmf, np.ndarray):
            table = logpmf
            ys = np.arange(table.size)
            fn = lambda y, table=table: table[y]  # noqa: E731
        else:
            ys, fn = np.arange(-300, 501), logpmf
        for mech in ALL_MECHS.values():
            z = _obs(mech, [-1e4, -40, -2, 0, 1, 2, 5, 40, 1e4])
            cases.append((f"{label}, {mech.family}", make, mech, z, brute_discrete(fn, ys)))
    return cases


#: finite bases with their own marginal for two-sided exponential noise (a sum from the mode)
_TWO_SIDED = ("BernoulliRV", "BinomialRV")


def _finite_key(name, family):
    """The registry key that a finite base with this noise resolves to."""
    if name in _TWO_SIDED and family in ("geometric", "laplace"):
        return (name, family)
    return (name, "*")


def _two_sided_extra_cases(family):
    """Binomial with n = 10^4, p near 0 and 1, and noise scales from 1e-3 to 1e6."""
    if family == "laplace":
        small, wide = Laplace(scale=1e-3), Laplace(scale=1e6)
    else:
        small, wide = Geometric(epsilon=50.0), Geometric(epsilon=1e-6)
    ys = np.arange(0, 10_001)
    z = [-1e6, -40, 0, 3, 30, 5000, 9990, 1e4 + 7, 1e7]
    out = []
    for p in (1e-3, 1 - 1e-9):
        for mech in (small, wide):
            out.append(
                (
                    f"n = 10^4, p = {p:g}, {mech.family}",
                    lambda p=p: pm.Binomial.dist(n=10_000, p=F(p)),
                    mech,
                    _obs(mech, z),
                    brute_discrete(lambda y, p=p: stats.binom.logpmf(y, 10_000, p), ys),
                )
            )
    return out


def _reference_finite_cases():
    cases = {}
    for name in FINITE:
        for case in _finite_cases(name):
            cases.setdefault(_finite_key(name, case[2].family), []).append(case)
    for family in ("geometric", "laplace"):
        cases[("BinomialRV", family)] += _two_sided_extra_cases(family)
    return cases


def _normal_cases(family):
    if family == "laplace":
        return [
            ("ordinary", (1.0, 2.0), Laplace(scale=1.3), [-50.0, -3.0, 0.0, 1.0, 2.5, 40.0]),
            ("sigma/b = 1e4", (0.0, 1e4), Laplace(scale=1.0), [-3e4, 0.0, 5e3, 1e6]),
            ("sigma/b = 1e-4", (0.0, 1e-3), Laplace(scale=10.0), [-1e3, 0.0, 7.0]),
        ]
    return [
        ("ordinary", (1.0, 2.0), Gaussian(sigma=0.9), [-20.0, 0.0, 1.0, 4.0]),
        ("narrow base, far", (5.0, 1e-4), Gaussian(sigma=1e4), [0.0, 1e5, -3e6]),
    ]


def _normal(cases):
    return [
        (label, lambda m=m, s=s: pm.Normal.dist(F(m), F(s)), mech, np.array(z), quad_normal(m, s))
        for label, (m, s), mech, z in cases
    ]


def _dirac_cases():
    cases = []
    for mech in ALL_MECHS.values():
        z = _obs(mech, [-1e6, -2, 3, 4, 9e15])
        cases.append((mech.family, lambda: pm.DiracDelta.dist(3), mech, z, dirac_ref(3.0)))
    return cases


REFERENCE_CASES = {
    **{("PoissonRV", f): _poisson_cases(f) for f in ("geometric", "laplace", "discrete_gaussian")},
    **{
        ("NegBinomialRV", f): _negbin_cases(f)
        for f in ("geometric", "laplace", "discrete_gaussian")
    },
    ("NormalRV", "laplace"): _normal(_normal_cases("laplace")),
    ("NormalRV", "gaussian"): _normal(_normal_cases("gaussian")),
    ("DiracDeltaRV", "*"): _dirac_cases(),
    **_reference_finite_cases(),
}


# ---------------------------------------------------------------------------------------------
# the walk


def builtin_pairs() -> dict[tuple[str, str], object]:
    """The registered pairs whose marginal is implemented in the pymc_dp package.

    (Registrations made by tests or doctests, e.g. the ``register_marginal`` examples, are
    user extensions and not walked.)
    """
    out = {}
    for (op_type, family), func in marg._REGISTRY.items():
        source = Path(func.__code__.co_filename).resolve()
        if PACKAGE in source.parents:
            out[(op_type.__name__, family)] = func
    return out


def missing_reference_cases(pairs, cases) -> list:
    return sorted(set(pairs) - {k for k, v in cases.items() if v})


def test_every_registered_pair_has_reference_cases():
    pairs = builtin_pairs()
    assert len(pairs) >= 13
    assert set(pairs) <= set(marg.registered_marginals())  # keyed like the public view
    assert missing_reference_cases(pairs, REFERENCE_CASES) == []
    # and no stale case for a pair that is no longer registered
    assert set(REFERENCE_CASES) <= set(pairs)


def test_coverage_check_sees_a_pair_without_cases():
    """Control: a new built-in pair without reference cases is reported."""
    pairs = {**builtin_pairs(), ("GeometricRV", "laplace"): object()}
    assert missing_reference_cases(pairs, REFERENCE_CASES) == [("GeometricRV", "laplace")]
    empty = {**REFERENCE_CASES, ("PoissonRV", "laplace"): []}
    assert ("PoissonRV", "laplace") in missing_reference_cases(builtin_pairs(), empty)


def _errors(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    scale = np.maximum(np.abs(ref), 1.0)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - ref) / scale
    return np.where(got == ref, 0.0, err)  # equal infinities


def _evaluate(func, make, mech, z):
    base = make()
    value = pt.dvector("z")
    lp = func(value, base, mech)
    f = pytensor.function([value], lp, mode="FAST_COMPILE")
    return f(np.asarray(z, dtype=np.float64))


CASES = [
    pytest.param(key, case, id=f"{key[0]}-{key[1]}-{case[0]}")
    for key, cases in REFERENCE_CASES.items()
    for case in cases
]


@pytest.mark.parametrize(("key", "case"), CASES)
def test_registered_marginal_vs_brute_force(key, case):
    label, make, mech, z, reference = case
    func = builtin_pairs()[key]
    # the case exercises this very pair: the registry resolves its base and mechanism to it
    assert marg.get_marginal(make().owner.op, mech) is func
    got = _evaluate(func, make, mech, z)
    ref = reference(z, mech)
    assert np.isfinite(ref).all()
    assert not np.isnan(got).any()
    err = _errors(got, ref)
    assert err.max() <= TOL, (label, z[np.argmax(err)], got, ref)
    # negative control: a reference with the noise scale x 1.05 is rejected at this tolerance
    wrong = reference(z, mech, stretch=1.05)
    assert _errors(got, wrong).max() > 10 * TOL
