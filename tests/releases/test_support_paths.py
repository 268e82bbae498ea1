"""Issue 24: privacy of the release paths not covered in ``test_exact_releases.py``, from draws.

Two checks per path, with ``10^4`` releases under each of two neighbouring inputs:

* support (Mironov 2012): every release is an integer (or grid value), all of them reachable
  from both inputs; a floating-point release fails this (its doubles depend on the input), which
  the negative control shows through the same helper with ``allow_float=True``;
* the privacy loss: the Clopper-Pearson lower bound on ``log(P_0(S) / P_1(S))``
  (:func:`pymc_dp.testing.empirical_epsilon_lower_bound`, false-alarm rate 1e-6 per assertion)
  for the event ``S`` with the largest ratio under additive two-sided geometric noise (every
  changed coordinate on the first input's side of the midpoint,
  :func:`pymc_dp.testing.neighbour_tail_event`) must not exceed ε. At ε = 1 the bound is within
  about 0.15 of the true loss; the negative control, a mechanism calibrated at 2ε but claimed
  at ε, gives a bound near 1.8 > 1. (For the discrete Gaussian's ``(ε, δ)`` the event's
  probabilities are about 0.4-0.5, so ``δ = 1e-6`` moves the allowed ratio by 2e-6.)
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.releases import DiscreteBayesNet, release_sufficient_statistics
from pymc_dp.releases._families import RegressionGrid
from pymc_dp.releases.bayes_net import bayes_net_count_tables, release_bayes_net_counts
from pymc_dp.testing import empirical_epsilon_lower_bound, neighbour_tail_event

N = 10_000
EPS = 1.0


def _integers(z):
    z = np.asarray(z, dtype=np.float64)
    return np.isfinite(z) & (z == np.round(z))


def _privacy_loss_bound(z0, z1, t0, t1) -> float:
    """After the support check (every release an integer: a floating-point release fails it),
    the lower bound on the privacy loss of the neighbours' tail event (``t0``, ``t1``: their
    exact statistics)."""
    assert _integers(z0).all() and _integers(z1).all()
    return empirical_epsilon_lower_bound(z0, z1, neighbour_tail_event(t0, t1))


@pytest.mark.parametrize(
    "mech",
    [pmdp.Geometric(epsilon=EPS), pmdp.DiscreteGaussian(epsilon=EPS, delta=1e-6)],
    ids=["geometric", "discrete-gaussian"],
)
def test_integer_mechanisms_pass_the_support_test(mech):
    z0 = mech.release(np.zeros(N, dtype=np.int64))
    z1 = mech.release(np.ones(N, dtype=np.int64))
    assert z0.dtype.kind == "i" and z1.dtype.kind == "i"
    assert _privacy_loss_bound(z0, z1, [0], [1]) <= EPS


def test_negative_control_a_mechanism_noisier_in_its_claim_than_in_its_draws():
    """Noise calibrated at 2ε (Geometric(epsilon=2)) checked against the claim ε = 1: the tail
    event's loss is 2, and its lower bound exceeds 1."""
    mech = pmdp.Geometric(epsilon=2 * EPS)
    z0, z1 = mech.release(np.zeros(N, dtype=np.int64)), mech.release(np.ones(N, dtype=np.int64))
    assert _privacy_loss_bound(z0, z1, [0], [1]) > EPS


def test_bernoulli_sufficient_statistics_pass_the_support_test():
    mech = functools.partial(pmdp.Geometric, epsilon=EPS)
    x0, x1 = np.zeros(6, dtype=np.int64), np.array([0, 0, 0, 0, 0, 1])

    def draws(x):  # 10^3 calls of the helper, the rest its mechanism on the statistic
        calls = [
            release_sufficient_statistics(x, "bernoulli", mechanism=mech) for _ in range(N // 10)
        ]
        rest = calls[0].mechanism.release(np.tile(stat(x), (N - N // 10, 1)))
        return np.concatenate([np.stack([c.value for c in calls]), rest])

    def stat(x):
        return np.array([x.sum(), x.size - x.sum()])

    assert _privacy_loss_bound(draws(x0), draws(x1), stat(x0), stat(x1)) <= EPS
    with pytest.raises(ValueError, match="allow_float"):
        release_sufficient_statistics(
            x0, "bernoulli", mechanism=functools.partial(pmdp.Laplace, epsilon=EPS)
        )


def test_regression_grid_passes_the_support_test():
    mech = functools.partial(pmdp.Geometric, epsilon=EPS)
    bounds, g = ((-1.0, 1.0), (-1.0, 1.0)), 2.0**-2
    X0 = np.array([[0.5], [-0.25], [0.75]])
    y0 = np.array([0.25, -0.5, 1.0])
    X1, y1 = X0.copy(), y0.copy()
    X1[2, 0], y1[2] = -1.0, 0.0  # one record replaced

    def draws(X, y):
        calls = [
            release_sufficient_statistics(
                (X, y), "linear_regression", bounds=bounds, grid=g, mechanism=mech
            )
            for _ in range(N // 10)
        ]
        rest = calls[0].mechanism.release(np.tile(stat(X, y), (N - N // 10, 1)))
        return np.concatenate([np.stack([c.grid_value for c in calls]), rest])

    def stat(X, y):
        return RegressionGrid(bounds, (g, g)).statistic((X, y))

    z0, z1 = draws(X0, y0), draws(X1, y1)
    assert _privacy_loss_bound(z0, z1, stat(X0, y0), stat(X1, y1)) <= EPS
    with pytest.raises(ValueError, match="allow_float"):
        release_sufficient_statistics(
            (X0, y0), "linear_regression", bounds=bounds,
            mechanism=functools.partial(pmdp.Laplace, epsilon=EPS),
        )  # fmt: skip


def test_bayes_net_counts_pass_the_support_test():
    net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    d0 = np.array([[0, 1], [1, 1], [1, 0]])
    d1 = np.array([[0, 1], [1, 1], [0, 0]])  # the last record replaced
    mech = functools.partial(pmdp.Geometric, epsilon=EPS)

    def flat(tables):
        return np.concatenate([np.ravel(tables[v]) for v in net.nodes])

    def draws(data):
        calls = [release_bayes_net_counts(data, net, mechanism=mech) for _ in range(N // 10)]
        true = flat(bayes_net_count_tables(data, net))
        rest = calls[0].mechanism.release(np.tile(true, (N - N // 10, 1)))
        return np.concatenate([np.stack([flat(c.tables) for c in calls]), rest])

    t0, t1 = (flat(bayes_net_count_tables(d, net)) for d in (d0, d1))
    assert _privacy_loss_bound(draws(d0), draws(d1), t0, t1) <= EPS
    with pytest.raises(ValueError, match="allow_float"):
        release_bayes_net_counts(d0, net, mechanism=functools.partial(pmdp.Laplace, epsilon=EPS))


def test_negative_control_the_float_opt_in_fails_the_check():
    """The same helper with the floating-point opt-in: its releases are not the support of an
    exact release (doubles off the integers), so ``_privacy_loss_bound`` refuses them."""
    x = np.zeros(6, dtype=np.int64)
    mech = functools.partial(pmdp.Laplace, epsilon=EPS)
    z = np.stack(
        [
            release_sufficient_statistics(x, "bernoulli", mechanism=mech, allow_float=True).value
            for _ in range(20)
        ]
    )
    with pytest.raises(AssertionError):
        _privacy_loss_bound(z, z, [0, 6], [1, 5])
