"""Issue 24, release-side residue: the raw errors that ``tests/test_fuzz_release.py`` tolerated in
its ``RESIDUALS`` table, each fixed at its source. Every test here failed before its fix (a raw
error, a warning turned into an error by the test configuration, an accepted non-number, or a
message that did not name the argument).

References are independent: exact ``Fraction`` arithmetic, and mpmath at 50 digits for the
Gaussian curves. No test here is statistical (no false-alarm rate to state); where a value is
compared, a negative control shows that the comparison rejects a wrong value.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp import accounting as acc
from pymc_dp.kernels.exact_sampling import MAX_INT
from pymc_dp.releases._families import _sqrt_up
from pymc_dp.releases.bayes_net import DiscreteBayesNet
from pymc_dp.releases.bayes_net_map import (
    map_selection_log_probabilities,
    map_utility_sensitivity,
    private_map,
)
from pymc_dp.releases.hmm import release_hmm_counts
from pymc_dp.releases.ops import OnePosteriorSample
from pymc_dp.releases.sufficient import release_sufficient_statistics

NON_NUMBERS = [True, np.bool_(False), "1", 1 + 2j, None, np.timedelta64(3, "s")]


# ---- accounting: non-numbers are refused naming the argument --------------------------------
@pytest.mark.parametrize("bad", NON_NUMBERS, ids=repr)
def test_round_up_refuses_non_numbers(bad):
    with pytest.raises(TypeError, match="x must be"):
        acc.round_up(bad)


def test_round_up_values():
    assert acc.round_up(0.1) == 0.1
    third = acc.round_up(Fraction(1, 3))
    assert Fraction(third) >= Fraction(1, 3) and Fraction(math.nextafter(third, 0)) < Fraction(1, 3)
    assert acc.round_up(10**400) == math.inf and acc.round_up(math.inf) == math.inf
    assert acc.round_up(np.int64(3)) == 3.0 and acc.round_up(np.float32(0.5)) == 0.5
    with pytest.raises(ValueError, match="x must be"):
        acc.round_up(math.nan)


@pytest.mark.parametrize("bad", NON_NUMBERS, ids=repr)
def test_as_distance_refuses_non_numbers(bad):
    with pytest.raises(TypeError, match="d_in"):
        acc.as_distance(bad)


@pytest.mark.parametrize("bad", NON_NUMBERS, ids=repr)
@pytest.mark.parametrize("arg", ["rate", "sensitivity"])
def test_geometric_rate_refuses_non_numbers(arg, bad):
    kwargs = {"rate": Fraction(1, 2), "sensitivity": 1, arg: bad}
    with pytest.raises(TypeError, match=arg):
        acc.geometric_rate(**kwargs)


@pytest.mark.parametrize(
    ("rate", "sensitivity", "name"),
    [
        (0, 1, "rate"),
        (-1.0, 1, "rate"),
        (math.nan, 1, "rate"),
        (1e-320, 1, "rate"),  # below 1 / MAX_INT: no rational in the sampler's range
        (Fraction(1, 2 * MAX_INT), 1, "rate"),
        (0.5, 0, "sensitivity"),
        (0.5, math.inf, "sensitivity"),
        (2.0**60, 10**400, "sensitivity"),  # epsilon = rate * sensitivity beyond the doubles
    ],
)
def test_geometric_rate_refuses_out_of_range(rate, sensitivity, name):
    with pytest.raises(ValueError, match=name):
        acc.geometric_rate(rate, sensitivity)


def test_geometric_rate_tiny_sensitivity():
    """``sensitivity = 1e-320`` made ``Δ s/t`` round to 0.0 and the rate correction divided 0
    (a raw "x must be > 0"). The rate is then the best rational below the request, never above.
    """
    out = acc.geometric_rate(1e-6, 1e-320)
    assert 0 < out <= Fraction(1e-6)
    assert Fraction(1e-6) - out <= Fraction(1e-6) * Fraction(1, 10**12)
    # negative control: the comparison rejects a rate above the request
    assert not Fraction(1e-6) * (1 + Fraction(1, 10**9)) <= Fraction(1e-6)


@pytest.mark.parametrize("bad", NON_NUMBERS, ids=repr)
def test_discrete_gaussian_sigma2_from_rho_refuses_non_integer_sensitivity(bad):
    with pytest.raises(TypeError, match="sensitivity"):
        acc.discrete_gaussian_sigma2_from_rho(0.5, bad)


def test_discrete_gaussian_sigma2_from_rho_subnormal_rho():
    assert acc.discrete_gaussian_sigma2_from_rho(1e-308, 3) == Fraction(9) / (2 * Fraction(1e-308))


# ---- discrete Gaussian epsilon at extreme sigma ------------------------------------------------
def _point_mass_epsilon(delta, sigma, sens):
    """For a point mass at 0 (sigma far below 1): ``delta = 1 - e^(eps - d^2 / (2 sigma^2))``."""
    with mp.workdps(50):
        loss = mp.mpf(sens) ** 2 / (2 * mp.mpf(sigma) ** 2)
        return float(loss + mp.log1p(-mp.mpf(delta)))


@pytest.mark.parametrize(("delta", "sigma", "sens"), [(0.5, 5e-4, 1), (1e-6, 1e-5, 3)])
def test_discrete_gaussian_epsilon_point_mass(delta, sigma, sens):
    """Tiny sigma: the law is a point mass at 0 (mass off 0 below exp(-500000))."""
    ref = _point_mass_epsilon(delta, sigma, sens)
    out = acc.discrete_gaussian_epsilon(delta, sigma, sens)
    assert out >= ref * (1 - 1e-15) and out == pytest.approx(ref, rel=1e-9)
    # negative control: the continuous-Gaussian answer (no point mass) is rejected
    wrong = acc.analytic_gaussian_epsilon(delta, sigma, sens)
    assert wrong != pytest.approx(ref, rel=1e-9)


def test_discrete_gaussian_epsilon_subnormal_sigma():
    """``sigma = 9.2e-301`` gave "divide by zero" (``sigma**2`` underflowed): epsilon is beyond
    the double range, reported as ``inf`` (never under-counted)."""
    assert acc.discrete_gaussian_epsilon(0.99999, 9.246608754106624e-301, 714943) == math.inf


def test_discrete_gaussian_epsilon_huge_sensitivity():
    """``sensitivity = 2**70`` with ``sigma = 0.5`` gave "divide by zero in log" (a term that is
    exactly 0). ``δ(ε) >= p(0) (1 - e^(ε - d²/(2σ²)))``, so ``ε`` is at least about
    ``d²/(2σ²)`` for a tiny delta."""
    d, s = 2**70, 0.5
    out = acc.discrete_gaussian_epsilon(5e-324, s, d)
    assert out >= d * d / (2 * s * s) * (1 - 1e-12)


def test_discrete_gaussian_epsilon_refuses_huge_sigma():
    """``sigma = 1e300`` overflowed (a warning, or ``OverflowError`` beyond 1e61)."""
    for sigma in (1e62, 1e300):
        with pytest.raises(ValueError, match="sigma"):
            acc.discrete_gaussian_epsilon(1e-6, sigma, 2)
    assert 0.0 <= acc.discrete_gaussian_epsilon(1e-6, 1e60, 2) < 1e-50


# ---- analytic Gaussian at a subnormal sensitivity ---------------------------------------------
def test_analytic_gaussian_subnormal_sensitivity():
    """``sensitivity = 5e-324`` gave "math domain error" (``log(0.5 h)`` with ``0.5 h == 0``)."""
    assert 0.0 <= acc.analytic_gaussian_delta(0, 1.0, 5e-324) <= 5e-324
    assert acc.analytic_gaussian_epsilon(0.5, 1.0, 5e-324) == 0.0
    # delta(0) = erf(Δ / (2 sqrt(2) σ)) for Δ = 1e-320 (subnormal)
    with mp.workdps(50):
        ref = float(mp.erf(mp.mpf(1e-320) / (2 * mp.sqrt(2))))
    out = acc.analytic_gaussian_delta(0, 1.0, 1e-320)
    assert out == pytest.approx(ref, rel=1e-3, abs=0)  # a subnormal has about 3 significant digits
    assert 2 * ref != pytest.approx(ref, rel=1e-3, abs=0)  # negative control


# ---- One Posterior Sample ----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, "0.1", 0.1 + 0j, True, np.timedelta64(1, "s")], ids=repr)
@pytest.mark.parametrize("family", ["beta_bernoulli", "dirichlet_categorical"])
def test_ops_truncation_refuses_non_numbers(family, bad):
    """``truncation=None`` raised an unnamed ``float()`` TypeError and ``"0.1"`` was accepted."""
    with pytest.raises(TypeError, match="truncation"):
        if family == "beta_bernoulli":
            OnePosteriorSample.beta_bernoulli(1.0, bad)
        else:
            OnePosteriorSample.dirichlet_categorical(1.0, bad, 3)


@pytest.mark.parametrize(
    ("k", "exc"),
    [
        (np.timedelta64(3, "s"), TypeError),
        (True, TypeError),
        (2.0, TypeError),
        (1, ValueError),
        (2**21, ValueError),
        (2**70, ValueError),
    ],
    ids=repr,
)
def test_ops_n_categories(k, exc):
    with pytest.raises(exc, match="n_categories"):
        OnePosteriorSample.dirichlet_categorical(1.0, 1e-30, k)


def test_ops_huge_log_likelihood_range():
    """A temperature ``2C/epsilon`` beyond the doubles gave "cannot convert Infinity to integer
    ratio" in ``guarantee()``."""
    with pytest.raises(ValueError, match="log_likelihood_range"):
        OnePosteriorSample(1e-300, 1e300)
    ops = OnePosteriorSample(1e-300, 1e-10)  # a large but finite temperature still works
    assert 0 < ops.guarantee().epsilon <= 1e-300


@pytest.mark.parametrize(
    ("prior", "exc"),
    [
        ((1.0,), ValueError),
        ((1.0, 2.0, 3.0), ValueError),
        ("ab", TypeError),
        (2.0, TypeError),
        ((True, 1.0), TypeError),
        (("1", "2"), TypeError),
        ((1.0, None), TypeError),
        ((1.0, -1.0), ValueError),
        ((1.0, math.nan), ValueError),
    ],
    ids=repr,
)
def test_ops_beta_prior(prior, exc):
    """``prior=(1.0,)`` raised ``IndexError`` and ``"ab"`` "could not convert string to float"."""
    ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
    with pytest.raises(exc, match="prior"):
        ops.sample([0, 1, 1], prior=prior, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("prior", "exc"),
    [
        ("abc", TypeError),
        ([1.0, 1.0], ValueError),
        ([True, 1.0, 1.0], TypeError),
        (["1", "1", "1"], TypeError),
    ],
    ids=repr,
)
def test_ops_dirichlet_prior(prior, exc):
    ops = OnePosteriorSample.dirichlet_categorical(epsilon=1.0, truncation=0.01, n_categories=3)
    with pytest.raises(exc, match="prior"):
        ops.sample([0, 1, 2], prior=prior, rng=np.random.default_rng(0))


def test_ops_prior_sequences_still_work():
    ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
    for prior in [(2.0, 3.0), [2, 3], np.array([2.0, 3.0]), (np.float32(2.0), np.int64(3))]:
        theta = ops.sample([0, 1, 1], prior=prior, rng=np.random.default_rng(0), resolution=8)
        assert 0.1 <= theta <= 0.9


def test_ops_refuses_duration_records():
    """``timedelta64`` records reached numpy arithmetic (a DeprecationWarning)."""
    ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
    with pytest.raises(ValueError, match="data"):
        ops.sample(np.array([0, 1], dtype="timedelta64[s]"), rng=np.random.default_rng(0))


# ---- sufficient statistics and HMM counts ------------------------------------------------------
def _geometric():
    return functools.partial(pmdp.Geometric, epsilon=1.0)


@pytest.mark.parametrize("k", [10**20, np.uint64(2**64 - 1), 2**21, 1e20], ids=repr)
def test_categorical_huge_k_refused(k):
    """``bounds=K`` beyond 2**20 categories: a hang (a count vector of K entries) or an
    ``OverflowError`` for uint64; now a ValueError naming bounds, at once."""
    with pytest.raises(ValueError, match="bounds"):
        release_sufficient_statistics(
            np.array([0, 1]), "categorical", bounds=k, mechanism=_geometric(), rng=1
        )


@pytest.mark.parametrize("u", [np.uint64(2**64 - 1), 2**63], ids=repr)
def test_poisson_huge_bound_refused(u):
    with pytest.raises(ValueError, match="bounds"):
        release_sufficient_statistics(
            np.array([0, 1]), "poisson", bounds=u, mechanism=_geometric(), rng=1
        )


def test_poisson_huge_float_records_clamped():
    """A record of 1e215 (a whole number) gave "invalid value encountered in cast"; it is
    clamped to U like any record above U. The statistic is exact: 0 + min(1e215, 5) = 5."""
    rel = release_sufficient_statistics(
        np.array([0.0, 1e215]),
        "poisson",
        bounds=5,
        mechanism=_geometric(),
        rng=np.random.default_rng(0),
    )
    # geometric noise of scale 5 (epsilon 1, sensitivity 5): within 60 scales of 5 with
    # probability above 1 - 1e-25 (false-alarm rate); a wrapped or lost record is far outside
    assert abs(int(rel.value[0]) - 5) <= 300
    with pytest.raises(ValueError, match="data"):  # a huge negative record is still refused
        release_sufficient_statistics(
            np.array([-1e215]), "poisson", bounds=5, mechanism=_geometric(), rng=1
        )


def test_categorical_huge_float_records_refused():
    with pytest.raises(ValueError, match="data"):
        release_sufficient_statistics(
            np.array([0.0, 1e215]), "categorical", bounds=3, mechanism=_geometric(), rng=1
        )


@pytest.mark.parametrize("bounds", [(0, 5e-301), (0, 1e-320)], ids=repr)
def test_normal_tiny_bounds_name_bounds(bounds):
    """``bounds=(0, 5e-301)`` hung in ``_sqrt_up`` (stepping up from 0.0 one subnormal ulp at a
    time), then raised an error naming only the mechanism's sensitivity."""
    mech = functools.partial(pmdp.Laplace, epsilon=1.0)
    with pytest.raises(ValueError, match="bounds"):
        release_sufficient_statistics(
            np.array([0.0, 1e-301]),
            "normal",
            bounds=bounds,
            mechanism=mech,
            allow_float=True,
            rng=np.random.default_rng(0),
        )
    with pytest.raises(ValueError, match="bounds"):  # snapped to one grid point
        release_sufficient_statistics(
            np.array([0.0]),
            "normal",
            bounds=bounds,
            mechanism=_geometric(),
            grid=2.0**-6,
            rng=1,
        )


def test_sqrt_up_exact():
    """``_sqrt_up(q)``: the smallest double whose square is ``>= q``, at every scale."""
    for q in [Fraction(2), Fraction(1, 3), Fraction(5e-301) ** 2, Fraction(5e-324) ** 2]:
        r = _sqrt_up(q)
        assert Fraction(r) ** 2 >= q and Fraction(math.nextafter(r, 0.0)) ** 2 < q
    assert _sqrt_up(Fraction(5e-301) ** 2) == 5e-301
    with pytest.raises(OverflowError):
        _sqrt_up(Fraction(10) ** 700)


@pytest.mark.parametrize("n_values", [np.uint64(2**64 - 1), [2, 2**40], np.timedelta64(2, "s")])
def test_hmm_n_values_refused(n_values):
    """uint64 ``n_values`` raised "too large to convert to C long"."""
    entries = (np.array([0, 0]), np.array([0, 1]), np.array([[0], [1]]))
    with pytest.raises(ValueError, match="n_values"):
        release_hmm_counts(
            entries, shape=(1, 2), n_values=n_values, epsilon=1.0, rng=np.random.default_rng(0)
        )


def test_duration_records_refused():
    with pytest.raises(TypeError, match="data"):
        release_sufficient_statistics(
            np.array([1, 2], dtype="timedelta64[s]"),
            "poisson",
            bounds=5,
            mechanism=_geometric(),
            rng=1,
        )


# ---- private MAP at an extreme prior -----------------------------------------------------------
_NET = DiscreteBayesNet({"a": 2, "b": 3}, {"b": ["a"]})
_CANDS = [
    {"a": [0.2, 0.8], "b": [[0.3, 0.6, 0.1], [0.1, 0.3, 0.6]]},
    {"a": [0.5, 0.5], "b": [[0.6, 0.3, 0.1], [0.1, 0.6, 0.3]]},
    {"a": [0.8, 0.2], "b": [[0.3, 0.6, 0.1], [0.1, 0.3, 0.6]]},
]


def _map_log_probs_reference(records, prior, epsilon):
    """Brute force: ``u_c = Σ_rows (α - 1) Σ log θ + Σ_records log p(record | θ_c)``, selected
    with probability ∝ ``exp(ε u / (2 Δu))``, in 50-digit mpmath. The Dirichlet normalizer is
    the same for every candidate and is left out."""
    du = map_utility_sensitivity(_NET, _CANDS)
    with mp.workdps(50):
        us = []
        for c in _CANDS:
            logs = [mp.log(x) for x in c["a"]] + [mp.log(x) for row in c["b"] for x in row]
            u = (mp.mpf(prior) - 1) * mp.fsum(logs)
            for a, b in records:
                u += mp.log(c["a"][a]) + mp.log(c["b"][a][b])
            us.append(mp.mpf(epsilon) / (2 * mp.mpf(du)) * u)
        top = max(us)
        z = mp.fsum(mp.exp(u - top) for u in us)
        return np.array([float(u - top - mp.log(z)) for u in us])


@pytest.mark.parametrize("prior", [1e-320, 5e-324, 1.0])
def test_private_map_extreme_prior(prior):
    """``prior = 1e-320`` gave "invalid value encountered in subtract": the Dirichlet normalizer
    ``log Γ(kα) - k log Γ(α)`` was ``inf - inf``; it cancels in the selection law."""
    records = [(0, 1), (1, 2), (1, 2), (0, 0)]
    data = np.array(records)
    ref = _map_log_probs_reference(records, prior, 1.0)
    for allow_float in (False, True):
        out = map_selection_log_probabilities(
            data, _NET, epsilon=1.0, candidates=_CANDS, prior=prior, allow_float=allow_float
        )
        # the exact law has its utilities on a grid of 2**-24 nats: a bias of a few grid steps
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-6)
    # negative control: the law with the prior's concentration off by one is rejected
    wrong = _map_log_probs_reference(records, prior + 1.0, 1.0)
    assert np.max(np.abs(wrong - ref)) > 1e-3
    res = private_map(
        data, _NET, epsilon=1.0, candidates=_CANDS, prior=prior, rng=np.random.default_rng(0)
    )
    assert res.guarantee().epsilon <= 1.0


def test_private_map_huge_prior_refused():
    with pytest.raises(ValueError, match="prior"):
        private_map(
            np.array([[0, 1]]),
            _NET,
            epsilon=1.0,
            candidates=_CANDS,
            prior=1e306,
            rng=np.random.default_rng(0),
        )
