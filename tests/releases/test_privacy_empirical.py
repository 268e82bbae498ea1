"""Empirical privacy of the Bernoulli sufficient-statistic release and of One Posterior Sample.

Two kinds of check on neighbouring datasets (replace-one):

* exact: the output densities are known in closed form (Laplace / geometric noise on the pair;
  the tempered truncated Beta for OPS in ``test_ops.py``), so the largest privacy loss over all
  neighbours of small data and a grid of outputs is computed without sampling: it equals the
  claimed epsilon (attained), and a mechanism with half the noise exceeds it;
* from draws: many releases (draws) on two neighbours, the analytically optimal event ``S``
  (computed from the exact law, never from the draws), and the Clopper-Pearson lower
  confidence bound on ``log(P[M(D') in S] / P[M(D) in S])``
  (:func:`pymc_dp.testing.empirical_epsilon_lower_bound`): it must stay ``<= epsilon``
  (false-alarm rate 1e-6 per assertion) and the negative control (half the noise; OPS at a
  quarter of the temperature in the fast tier, half in the slow tier) must exceed epsilon.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.releases import OnePosteriorSample, release_sufficient_statistics, truncated_beta_rvs
from pymc_dp.releases._families import FAMILIES
from pymc_dp.testing import empirical_epsilon_lower_bound

EPS = 1.0


def _exact_worst_loss(mech, n: int) -> float:
    """max over all datasets of size n, their replace-one neighbours and a grid of outputs z of
    |log p(z | D) - log p(z | D')| for the pair (s, f) released through ``mech``."""
    fam = FAMILIES["bernoulli"]
    step = 1.0 if mech.integer else 0.25
    grid = np.arange(-12.0, n + 13.0, step)
    z1, z2 = np.meshgrid(grid, grid, indexing="ij")
    worst = 0.0
    for data in itertools.product([0, 1], repeat=n):
        t = fam.statistic(np.array(data), None)
        for i in range(n):
            other = list(data)
            other[i] = 1 - other[i]
            u = fam.statistic(np.array(other), None)
            lp = mech.logpdf(z1 - t[0]) + mech.logpdf(z2 - t[1])
            lq = mech.logpdf(z1 - u[0]) + mech.logpdf(z2 - u[1])
            worst = max(worst, float(np.abs(lp - lq).max()))
    return worst


@pytest.mark.parametrize("factory", [pmdp.Laplace, pmdp.Geometric])
def test_exact_loss_of_the_bernoulli_release_is_epsilon(factory):
    rel = release_sufficient_statistics(
        np.array([0, 1, 1]), "bernoulli", mechanism=functools.partial(factory, epsilon=EPS),
        rng=np.random.default_rng(0), allow_float=True
    )  # fmt: skip
    worst = _exact_worst_loss(rel.mechanism, 3)
    assert worst == pytest.approx(EPS, rel=1e-12) and worst <= rel.guarantee().epsilon * (1 + 1e-12)
    # negative control: the sensitivity of one count (1) instead of the pair's (2)
    assert _exact_worst_loss(factory(epsilon=EPS, sensitivity=1), 3) == pytest.approx(2 * EPS)


def test_bernoulli_release_from_draws(rng):
    d, d_prime = np.array([1, 1, 0, 0]), np.array([1, 1, 1, 0])  # s = 2 vs 3
    mech = functools.partial(pmdp.Laplace, epsilon=EPS)
    m = 50_000

    def draws(data):  # the library's release, called m times
        return np.array(
            [release_sufficient_statistics(data, "bernoulli", mechanism=mech, rng=rng,
                                           allow_float=True).value
             for _ in range(m)]
        )  # fmt: skip

    # optimal event for (2, 2) -> (3, 1): z1 > 3 and z2 < 1, where the loss is exactly 2/b
    def event(z):
        return (z[:, 0] > 3.0) & (z[:, 1] < 1.0)

    # the event is evaluated per release; the helper then counts the hits
    lb = empirical_epsilon_lower_bound(event(draws(d_prime)), event(draws(d)), _hit)
    assert 0.75 < lb <= EPS
    # negative control: half the noise (the sensitivity of one count, 1, in place of 2)
    half = pmdp.Laplace(epsilon=EPS, sensitivity=1.0)
    z_d = half.release(np.tile([2.0, 2.0], (m, 1)), rng=rng, allow_float=True)
    z_dp = half.release(np.tile([3.0, 1.0], (m, 1)), rng=rng, allow_float=True)
    assert empirical_epsilon_lower_bound(event(z_dp), event(z_d), _hit) > EPS


def _hit(h):
    return h


# ---- OPS from draws -----------------------------------------------------------------------
def _ops_event(temperature, p0, n=5):
    """The event {θ > t} maximising the exact loss between D = n zeros and D' = one 1 and n-1
    zeros, among events with probability >= 0.02 under D (so that counts are informative)."""
    a, b, a2, b2 = 1.0, 1 + n / temperature, 1 + 1 / temperature, 1 + (n - 1) / temperature
    ts = np.linspace(p0, 1 - p0, 801)[1:-1]

    def tail(aa, bb):
        return (stats.beta.sf(ts, aa, bb) - stats.beta.sf(1 - p0, aa, bb)) / (
            stats.beta.sf(p0, aa, bb) - stats.beta.sf(1 - p0, aa, bb)
        )

    pd, pdp = tail(a, b), tail(a2, b2)
    loss = np.where(pd >= 0.02, np.log(pdp / pd), -np.inf)
    i = int(np.argmax(loss))
    return ts[i], float(loss[i]), (a, b, a2, b2)


def _ops_lower_bound(temperature, p0, m, rng):
    t, _, (a, b, a2, b2) = _ops_event(temperature, p0)
    x_d = truncated_beta_rvs(np.full(m, a), b, p0, 1 - p0, rng=rng)
    x_dp = truncated_beta_rvs(np.full(m, a2), b2, p0, 1 - p0, rng=rng)
    return empirical_epsilon_lower_bound(x_dp, x_d, lambda x: x > t)


def test_ops_from_draws(rng):
    # the draws of OPS follow the tempered truncated Beta (test_ops.py); here its privacy loss
    ops = OnePosteriorSample.beta_bernoulli(EPS, 0.25)
    assert _ops_lower_bound(ops.temperature, 0.25, 100_000, rng) <= ops.guarantee().epsilon
    # negative control: a quarter of the temperature (claimed eps, true 4 eps) is caught
    assert _ops_event(ops.temperature / 4, 0.25)[1] > 1.5  # exact loss of that event
    assert _ops_lower_bound(ops.temperature / 4, 0.25, 100_000, rng) > EPS


@pytest.mark.slow
def test_ops_from_draws_half_temperature_is_caught(rng):
    ops = OnePosteriorSample.beta_bernoulli(EPS, 0.25)
    assert _ops_event(ops.temperature / 2, 0.25)[1] > 1.08
    assert _ops_lower_bound(ops.temperature, 0.25, 1_000_000, rng) <= EPS
    assert _ops_lower_bound(ops.temperature / 2, 0.25, 1_000_000, rng) > EPS
