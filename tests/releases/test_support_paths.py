"""Issue 24: the support test on the release paths not covered in ``test_exact_releases.py``.

The same test (Mironov 2012) as there: for neighbouring inputs and the event "the released
value is one that the release at the first input can output" (every integer, checked on the draws: a
floating-point release fails that check), pure ε-DP needs
``P_0(event) <= e^ε P_1(event)``; with ``10^4`` releases under each input the Clopper-Pearson
lower bound on ``log(P_0 / P_1)`` (:func:`pymc_dp.testing.empirical_epsilon_lower_bound`,
false-alarm rate 1e-6 per assertion) must not exceed ε. The exact paths release integers (or
multiples of a grid), all reachable from both inputs, so their ratio is 1. The negative control
is the floating-point opt-in in ``test_exact_releases.py`` (``Laplace(epsilon=0.1)``'s
``release(..., allow_float=True)``: lower bound about 1.2 > 0.1 on the same test), and here the
release helpers' refusal of it without the opt-in.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp.releases import DiscreteBayesNet, release_sufficient_statistics
from pymc_dp.releases._families import RegressionGrid
from pymc_dp.releases.bayes_net import bayes_net_count_tables, release_bayes_net_counts
from pymc_dp.testing import empirical_epsilon_lower_bound

N = 10_000
EPS = 0.1


def _integers(z):
    z = np.asarray(z, dtype=np.float64)
    return np.isfinite(z) & (z == np.round(z))


def _support_bound(z0, z1) -> float:
    """The lower bound of the support test, after checking that the event is the support at
    the first input (every release there is an integer: a floating-point release fails here)."""
    assert _integers(z0).all() and _integers(z1).all()
    return empirical_epsilon_lower_bound(z0, z1, _integers)


@pytest.mark.parametrize(
    "mech",
    [pmdp.Geometric(epsilon=EPS), pmdp.DiscreteGaussian(epsilon=EPS, delta=1e-6)],
    ids=["geometric", "discrete-gaussian"],
)
def test_integer_mechanisms_pass_the_support_test(mech):
    z0 = mech.release(np.zeros(N, dtype=np.int64))
    z1 = mech.release(np.ones(N, dtype=np.int64))
    assert z0.dtype.kind == "i" and z1.dtype.kind == "i"
    assert _support_bound(z0, z1) <= EPS


def test_bernoulli_sufficient_statistics_pass_the_support_test():
    mech = functools.partial(pmdp.Geometric, epsilon=EPS)
    x0, x1 = np.zeros(6, dtype=np.int64), np.array([0, 0, 0, 0, 0, 1])

    def draws(x):  # 10^3 calls of the helper, the rest its mechanism on the statistic
        calls = [
            release_sufficient_statistics(x, "bernoulli", mechanism=mech) for _ in range(N // 10)
        ]
        stat = np.array([x.sum(), x.size - x.sum()])
        rest = calls[0].mechanism.release(np.tile(stat, (N - N // 10, 1)))
        return np.concatenate([np.stack([c.value for c in calls]), rest])

    assert _support_bound(draws(x0), draws(x1)) <= EPS
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
        stat = RegressionGrid(calls[0].bounds, (g, g)).statistic((X, y))
        rest = calls[0].mechanism.release(np.tile(stat, (N - N // 10, 1)))
        return np.concatenate([np.stack([c.grid_value for c in calls]), rest])

    assert _support_bound(draws(X0, y0), draws(X1, y1)) <= EPS
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

    assert _support_bound(draws(d0), draws(d1)) <= EPS
    with pytest.raises(ValueError, match="allow_float"):
        release_bayes_net_counts(d0, net, mechanism=functools.partial(pmdp.Laplace, epsilon=EPS))


def test_negative_control_the_float_opt_in_fails_the_check():
    """The same helper with the floating-point opt-in: its releases are not the support of an
    exact release (doubles off the integers), so ``_support_bound`` refuses them."""
    x = np.zeros(6, dtype=np.int64)
    mech = functools.partial(pmdp.Laplace, epsilon=EPS)
    z = np.stack(
        [
            release_sufficient_statistics(x, "bernoulli", mechanism=mech, allow_float=True).value
            for _ in range(20)
        ]
    )
    with pytest.raises(AssertionError):
        _support_bound(z, z)
