"""Issue 24 (A): every release path is exact by default; the floating-point one is an opt-in.

Support test (Mironov 2012). For neighbouring inputs 0 and 1 and the event "z is a value that
``release(0)`` can output" (the support of the release at 0), pure ε-DP needs
``P_0(event) <= e^ε P_1(event)``. With ``>= 10^4`` releases under each input, the
Clopper-Pearson lower bound on ``log(P_0 / P_1)`` (:func:`pymc_dp.testing.
empirical_epsilon_lower_bound`, false-alarm rate 1e-6 per assertion) must not exceed ε for the
exact paths (their support is every grid point, so the ratio is 1), and must exceed ε for the
floating-point opt-in, the negative control (its support at 0 is a set of doubles that the
release at 1 mostly misses: ratio about 3 at ε = 0.1). For an exact path that event says
nothing beyond "every release is on the grid" (asserted), so its loss is bounded on the tail
event with the largest ratio instead (:func:`pymc_dp.testing.neighbour_tail_event`; its power
against a miscalibrated mechanism is shown in ``test_support_paths.py``).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.mechanisms.discretized import Discretized
from pymc_dp.releases import (
    DiscreteBayesNet,
    OnePosteriorSample,
    release_hmm_counts,
    release_sufficient_statistics,
    sufficient_statistic_sensitivity,
)
from pymc_dp.releases._families import NormalGrid, RegressionGrid
from pymc_dp.testing import empirical_epsilon_lower_bound, neighbour_tail_event

N = 10_000
EPS = 0.1


def _laplace_support_at_zero(b: float):
    """Membership in the set of doubles ``Laplace(scale=b).release(0)`` can output (the secure
    sampler: ``±b * -log(u)``, ``u = (2^52 + 2m + 1) 2^-(53+N)``), by inverting the sampler
    and checking the neighbouring grid points exactly."""

    def member(z):
        a = np.abs(np.asarray(z, dtype=np.float64))
        u0 = np.exp(-a / b)
        n0 = np.floor(-np.log2(u0)).astype(np.int64) - 1
        hit = np.zeros(a.shape, dtype=bool)
        for dn in (-1, 0, 1, 2):
            n = np.clip(n0 + dn, 0, 64)
            mant = np.ldexp(u0, (53 + n).astype(np.int64))
            m0 = np.round((mant - 2.0**52 - 1.0) / 2.0)
            for dm in range(-3, 4):
                m = np.clip(m0 + dm, 0, 2.0**51 - 1)
                u = np.ldexp(2.0**52 + 2.0 * m + 1.0, -(53 + n))
                hit |= b * -np.log(u) == a
        return hit

    return member


def _on_grid(g: float):
    """Each released coordinate is a multiple of ``g`` (the support of every exact release)."""
    return lambda z: np.asarray(z) / g == np.round(np.asarray(z) / g)


def _exact_bound(z0, z1, g, t0, t1) -> float:
    """Support check (every release on the grid ``g``, so reachable from both inputs: a
    floating-point release fails it), then the lower bound on the privacy loss of the
    neighbours' tail event (:func:`pymc_dp.testing.neighbour_tail_event`; ``t0``, ``t1`` the
    exact statistics), the event with the largest ratio: within ε for an exact path."""
    assert _on_grid(g)(z0).all() and _on_grid(g)(z1).all()
    return empirical_epsilon_lower_bound(z0, z1, neighbour_tail_event(t0, t1))


def test_float_laplace_fails_the_support_test_negative_control():
    m = pmdp.Laplace(epsilon=EPS)
    z0 = m.release(np.zeros(N), allow_float=True)
    z1 = m.release(np.ones(N), allow_float=True)
    member = _laplace_support_at_zero(m.scale)
    assert member(z0).all()  # the membership test is right: every release(0) is in it
    lb = empirical_epsilon_lower_bound(z0, z1, member)
    assert lb > EPS  # the float release leaks: the support ratio far exceeds e^ε
    with pytest.raises(ValueError, match="allow_float=True"):
        m.release(np.zeros(3))


def test_discretized_passes_the_support_test():
    d = Discretized(grid=2.0**-3, epsilon=EPS, sensitivity=1.0)
    z0, z1 = d.release(np.zeros(N)), d.release(np.ones(N))
    assert _exact_bound(z0, z1, 2.0**-3, [0.0], [1.0]) <= EPS


def _entries(region_first: int):
    return {"region": [region_first, 1, 0], "month": [0, 0, 1], "features": [[1], [0], [1]]}


def test_release_hmm_counts_default_is_exact_and_passes_the_support_test():
    rel = release_hmm_counts(_entries(0), shape=(2, 2), epsilon=EPS)
    assert isinstance(rel.mechanism, pmdp.Geometric) and rel.counts.dtype == np.int64
    mech = rel.mechanism
    # 10^3 releases by the helper, the rest by its mechanism on the true table (1, 0, 1, 0) of
    # the entries; the neighbour changes one entry's feature (cell 2: 1 -> 2)
    helper = [
        release_hmm_counts(_entries(0), shape=(2, 2), epsilon=EPS).counts.ravel()
        for _ in range(N // 10)
    ]
    rest = mech.release(np.tile([[1, 0, 1, 0]], (N - N // 10, 1)))
    z0 = np.concatenate([np.stack(helper), rest])
    z1 = mech.release(np.tile([[1, 0, 2, 0]], (N, 1)))
    assert _exact_bound(z0, z1, 1.0, [1, 0, 1, 0], [1, 0, 2, 0]) <= EPS
    with pytest.raises(ValueError, match="allow_float"):
        release_hmm_counts(
            _entries(0), shape=(2, 2), mechanism=functools.partial(pmdp.Laplace, epsilon=EPS)
        )


def test_sufficient_statistics_normal_grid_passes_the_support_test(rng):
    mech = functools.partial(pmdp.Geometric, epsilon=EPS)
    x0, x1 = np.zeros(5), np.array([0.0, 0, 0, 0, 1.0])
    g = 2.0**-4

    def draws(x):  # 10^3 calls of the helper, the rest its mechanism on its integer statistic
        calls = [
            release_sufficient_statistics(x, "normal", bounds=(-1.0, 1.0), grid=g, mechanism=mech)
            for _ in range(N // 10)
        ]
        rel = calls[0]
        stat = NormalGrid(rel.bounds, g).statistic(x)
        rest = rel.mechanism.release(np.tile(stat, (N - N // 10, 1))) * np.array([g / 16, g * g])
        return np.concatenate([np.stack([c.value for c in calls]), rest])  # fmt: skip

    z0, z1 = draws(x0), draws(x1)
    units = np.array([g / 16, g * g])
    t0, t1 = (NormalGrid((-1.0, 1.0), g).statistic(x) * units for x in (x0, x1))
    assert _exact_bound(z0, z1, g * g / 16, t0, t1) <= EPS
    with pytest.raises(ValueError, match="grid="):
        release_sufficient_statistics(x0, "normal", bounds=(-1.0, 1.0), mechanism=mech)
    with pytest.raises(ValueError, match="allow_float"):
        release_sufficient_statistics(
            x0, "normal", bounds=(-1.0, 1.0), mechanism=functools.partial(pmdp.Laplace, epsilon=1)
        )


# ---- the integer sensitivities of the snapped statistics, by enumeration ------------------------
@pytest.mark.parametrize(
    ("bounds", "g"), [((-1.0, 1.0), 0.25), ((0.0, 2.0), 0.5), ((-3.0, 0.5), 0.5)]
)
def test_normal_grid_sensitivity_by_enumeration(bounds, g):
    ng = NormalGrid(bounds, g)
    k = np.arange(ng.ka, ng.kb + 1)
    a, b = np.meshgrid(k, k)
    u, v = ng.w * (a - b), a * a - b * b
    l1 = int((np.abs(u) + np.abs(v)).max())
    l2 = int(np.ceil(np.sqrt((u * u + v * v).max())))
    assert ng.sensitivity() == (l1, l2)
    # negative control: the sum coordinate without its weight is a different (smaller) bound
    assert int((np.abs(a - b) + np.abs(v)).max()) < l1


def test_regression_grid_sensitivity_bounds_every_pair():
    rg = RegressionGrid(((0.0, 1.0), (-1.0, 1.0)), (0.5, 0.5))
    kx, ky = np.arange(rg.kx[0], rg.kx[1] + 1), np.arange(rg.ky[0], rg.ky[1] + 1)
    recs = np.array([(a, b, c) for a in kx for b in kx for c in ky])  # d = 2

    def stat(r):
        x, y = r[:2], r[2]
        return np.array([x[0] * x[0], x[0] * x[1], x[1] * x[1], x[0] * y, x[1] * y, y * y])

    s = np.array([stat(r) for r in recs])
    diff = np.abs(s[:, None, :] - s[None, :, :])
    l1, l2 = rg.sensitivity(2)
    assert diff.sum(-1).max() <= l1 and np.sqrt((diff**2).sum(-1)).max() <= l2


# ---- residue: clear errors naming the argument -------------------------------------------------
def test_residue_huge_normal_bounds_name_bounds():
    with pytest.raises(ValueError, match="bounds"):
        sufficient_statistic_sensitivity("normal", (-1e200, 1e200))


def test_residue_ops_log_likelihood_range_must_be_real():
    with pytest.raises(TypeError, match="log_likelihood_range"):
        OnePosteriorSample(1.0, True)
    with pytest.raises(TypeError, match="log_likelihood_range"):
        OnePosteriorSample(1.0, "abc")
    assert OnePosteriorSample(1.0, 2).log_likelihood_range == 2.0


def test_residue_bernoulli_bounds_are_refused():
    with pytest.raises(ValueError, match="bounds"):
        release_sufficient_statistics(
            np.array([0, 1]), "bernoulli", bounds=5, mechanism=functools.partial(
                pmdp.Geometric, epsilon=1.0)
        )  # fmt: skip


def test_residue_huge_bayes_net_is_refused_early():
    states = {f"v{i}": 10 for i in range(13)}
    parents = {"v12": [f"v{i}" for i in range(12)]}  # a 10^13-cell table
    with pytest.raises(ValueError, match="cells"):
        DiscreteBayesNet(states, parents)
