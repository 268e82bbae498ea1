"""OPS of the private HMM (pymc_dp.releases.hmm_ops): exact law and exact privacy loss.

References are independent of the sampler: the tempered posterior of the states of a tiny HMM is
enumerated over every state path, with the emissions integrated out in closed form (scipy's
regularized incomplete Beta: the truncated Beta normalizer) and the transitions by the
Dirichlet-multinomial formula (scipy's gammaln); the adversarial normalizers are checked against
mpmath quadrature at 30 digits.

Statistical assertions have a false-alarm rate of 1e-6 each (chi-square and KS p-value
thresholds), with draws from independent chains started at the exact law (so the chains' output
law is exactly the target: the test of invariance has its stated rate). Negative controls: the
untempered sampler is rejected by the same chi-square; the untempered posterior's privacy loss
exceeds the stated epsilon.
"""

import itertools
import math

import mpmath
import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.releases.hmm import HMMPrior
from pymc_dp.releases.hmm_ops import (
    hmm_one_posterior_sample,
    hmm_ops_log_likelihood_range,
    mcmc_sample_guarantee,
    tempered_hmm_gibbs,
)
from pymc_dp.releases.ops import OnePosteriorSample

P_ALARM = 1e-6


def log_trunc_beta(a, b, a0):
    """log of int_{a0}^{1-a0} x^(a-1) (1-x)^(b-1) dx (scipy; a, b arrays)."""
    mass = special.betainc(a, b, 1.0 - a0) - special.betainc(a, b, a0)
    return special.betaln(a, b) + np.log(mass)


def log_markov(z, init, trans):
    """log p(z) of one region's path with pi ~ Dir(init) and rows ~ Dir(trans) integrated out."""
    k = len(init)
    n0 = np.bincount([z[0]], minlength=k)
    out = special.gammaln(init.sum()) - special.gammaln(init.sum() + 1)
    out += np.sum(special.gammaln(init + n0) - special.gammaln(init))
    n = np.zeros((k, k))
    for s, t in itertools.pairwise(z):
        n[s, t] += 1
    for j in range(k):
        out += special.gammaln(trans[j].sum()) - special.gammaln(trans[j].sum() + n[j].sum())
        out += np.sum(special.gammaln(trans[j] + n[j]) - special.gammaln(trans[j]))
    return float(out)


def state_law(ones, n, k, temperature, a0, e=1.0):
    """Every path z of one region (K^T of them) and log q(z) of the tempered posterior
    (one binary feature, emissions truncated to [a0, 1 - a0]), and log Z of the data."""
    ones, n = np.asarray(ones, float), np.asarray(n, float)
    init, trans = np.ones(k), np.ones((k, k))
    paths = np.array(list(itertools.product(range(k), repeat=len(n))))
    logw = np.empty(len(paths))
    for i, z in enumerate(paths):
        c1 = np.array([ones[z == j].sum() for j in range(k)]) / temperature
        c0 = np.array([(n - ones)[z == j].sum() for j in range(k)]) / temperature
        emis = log_trunc_beta(e + c1, e + c0, a0) - log_trunc_beta(e, e, a0)
        logw[i] = log_markov(z, init, trans) + emis.sum()
    log_z = special.logsumexp(logw)
    return paths, logw - log_z, log_z


def full_stats(ones, n):
    ones, n = np.asarray(ones, float), np.asarray(n, float)
    return np.stack([n - ones, ones], axis=-1)[None]  # (1, T, 2)


# ---- the sampler against enumeration -----------------------------------------------------------
ONES, N = (25, 5, 27), (30, 30, 30)
A0, EPS = 0.05, 2.0


def _run_from_exact(rng, temperature_run, n_chains=20_000, sweeps=2):
    """Chains started at the exact tempered law of the states; their last draws."""
    ops = OnePosteriorSample(EPS, math.log(0.95 / 0.05))
    paths, logq, _ = state_law(ONES, N, 2, ops.temperature, A0)
    start = paths[rng.choice(len(paths), size=n_chains, p=np.exp(logq))]
    prior = (np.ones(2), np.ones((2, 2)), np.ones(2))
    z, phi = tempered_hmm_gibbs(full_stats(ONES, N), [0, 2], start[:, None, :], prior, [A0],
                                temperature_run, (sweeps - 1, 1), rng)  # fmt: skip
    return paths, logq, z[0, :, 0], phi[0], ops.temperature


def _chi2_p(paths, logq, z):
    idx = (z * 2 ** np.arange(z.shape[1])[::-1]).sum(axis=1)  # path index in product order
    observed = np.bincount(idx, minlength=len(paths))
    expected = np.exp(logq) * len(z)
    return stats.chisquare(observed, expected).pvalue


def test_states_follow_the_tempered_posterior(rng):
    """20,000 chains from the exact law, two sweeps: the state paths pass a chi-square test
    against the enumerated law (p > 1e-6), and the emission of month 0's state given the most
    frequent path passes a KS test against its exact truncated Beta (p > 1e-6)."""
    temp = OnePosteriorSample(EPS, math.log(19.0)).temperature
    paths, logq, z, phi, _ = _run_from_exact(rng, temp)
    assert _chi2_p(paths, logq, z) > P_ALARM
    best = paths[np.argmax(logq)]
    sel = np.all(z == best, axis=1)
    k = best[0]
    ones, n = np.asarray(ONES, float), np.asarray(N, float)
    a = 1.0 + ones[best == k].sum() / temp
    b = 1.0 + (n - ones)[best == k].sum() / temp
    lo, hi = stats.beta.cdf([A0, 1 - A0], a, b)

    def cdf(x):
        return (stats.beta.cdf(x, a, b) - lo) / (hi - lo)

    assert sel.sum() > 1000
    assert stats.kstest(phi[sel, k, 1], cdf).pvalue > P_ALARM


def test_untempered_sampler_is_rejected(rng):
    """Negative control: the same chains run at T = 1 (a plain posterior draw) fail the test."""
    paths, logq, z, _, _ = _run_from_exact(rng, 1.0)
    assert _chi2_p(paths, logq, z) < P_ALARM


# ---- the privacy loss, exactly ----------------------------------------------------------------
def _max_loss(temperature, a0, n_cells, k):
    """Largest privacy loss over every pair of neighbouring data sets (one binary feature, one
    region, n_cells[t] entries in month t) and every output (z, phi)."""
    c = math.log((1 - a0) / a0)
    log_z = {}
    for ones in itertools.product(*(range(m + 1) for m in n_cells)):
        log_z[ones] = state_law(ones, n_cells, k, temperature, a0)[2]
    worst = 0.0
    for ones, lz in log_z.items():
        for t in range(len(n_cells)):
            if ones[t] < n_cells[t]:  # neighbour: one entry of month t changed from 0 to 1
                other = list(ones)
                other[t] += 1
                gap = abs(lz - log_z[tuple(other)])
                # the record's log-likelihood ratio log(phi/(1-phi)) spans [-c, c] on the
                # truncated space; every path z reaches both ends, so the sup is c/T + gap
                worst = max(worst, c / temperature + gap)
    return worst


def test_privacy_loss_by_enumeration_is_within_epsilon():
    """1 region x 2 months, K = 2, one binary feature, 2 + 1 entries: every neighbouring pair
    and every output. The exact loss is <= the stated epsilon (and above half of it: the
    record's own likelihood ratio alone reaches C/T = epsilon/2)."""
    ops = OnePosteriorSample(1.0, math.log(0.95 / 0.05))
    loss = _max_loss(ops.temperature, 0.05, (2, 1), 2)
    assert ops.epsilon / 2 < loss <= ops.guarantee().epsilon


def test_privacy_loss_sup_is_at_the_corners():
    """The closed-form sup over outputs used above equals a brute-force search: both data sets'
    log-densities log q_D(z, phi) evaluated directly (every path z, a 101 x 101 grid of phi with
    the box's ends) on the pair 'one entry of month 0 changed from 0 to 1'."""
    a0, k, cells = 0.05, 2, np.array([2.0, 1.0])
    temp = OnePosteriorSample(1.0, math.log(19.0)).temperature
    grid = np.linspace(a0, 1 - a0, 101)
    p0, p1 = np.meshgrid(grid, grid, indexing="ij")
    phi = np.stack([p0, p1])  # (K, G, G): P(feature = 1 | state)
    best = 0.0
    pair = [np.array([1.0, 0.0]), np.array([2.0, 0.0])]
    lz = [state_law(ones, cells, k, temp, a0)[2] for ones in pair]
    for z in itertools.product(range(k), repeat=2):
        logq = []
        for ones, log_norm in zip(pair, lz, strict=True):
            ll = sum(ones[t] * np.log(phi[z[t]]) + (cells[t] - ones[t]) * np.log1p(-phi[z[t]])
                     for t in range(2))  # fmt: skip
            logq.append(log_markov(np.array(z), np.ones(k), np.ones((k, k))) + ll / temp - log_norm)
        best = max(best, float(np.max(np.abs(logq[0] - logq[1]))))
    assert best == pytest.approx(math.log(19.0) / temp + abs(lz[0] - lz[1]), rel=1e-12)


def test_adversarial_pair_approaches_epsilon():
    """Tightness (Foulds et al. App. A): K = 1, one month, N entries all ones against N - 1
    ones. The loss at phi = a0 is C/T + log Z_D - log Z_D', which tends to 2C/T = epsilon; at
    N = 10^5 it is above 0.95 epsilon and below epsilon. The normalizers are checked against
    mpmath quadrature (30 digits)."""
    a0, eps, n = 0.005, 1.0, 100_000
    ops = OnePosteriorSample(eps, math.log((1 - a0) / a0))
    t = ops.temperature
    lz = log_trunc_beta(np.array([1 + n / t, n / t]), np.array([1.0, 1 + 1 / t]), a0)
    mpmath.mp.dps = 30

    def ref(a, b):
        f = lambda x: mpmath.exp((a - 1) * mpmath.log(x) + (b - 1) * mpmath.log(1 - x))  # noqa: E731
        top = mpmath.mpf(1) - a0
        return float(mpmath.log(mpmath.quad(f, [a0, top - mpmath.mpf("0.01"), top])))

    assert lz[0] == pytest.approx(ref(1 + n / t, 1.0), rel=1e-9)
    assert lz[1] == pytest.approx(ref(n / t, 1 + 1 / t), rel=1e-9)
    loss = math.log((1 - a0) / a0) / t + lz[0] - lz[1]
    assert 0.95 * eps < loss <= ops.guarantee().epsilon


def test_untempered_posterior_exceeds_epsilon():
    """Negative control: at T = 1 (one plain posterior draw) the same enumeration gives a loss
    above the epsilon that the tempered draw states."""
    ops = OnePosteriorSample(1.0, math.log(19.0))
    assert _max_loss(1.0, 0.05, (2, 1), 2) > ops.guarantee().epsilon


# ---- the release object and its accounting ------------------------------------------------------
ENTRIES = {
    "region": [0] * 6,
    "month": [0, 0, 0, 1, 1, 1],
    "features": [[1], [1], [0], [0], [0], [1]],
}


def test_log_likelihood_range_against_mpmath():
    c, a0 = hmm_ops_log_likelihood_range([2, 5, 2], 10)
    mpmath.mp.dps = 40
    ref = sum(mpmath.log((1 - (v - 1) * mpmath.mpf(1) / (10 * v)) * 10 * v) for v in (2, 5, 2))
    assert a0 == (0.05, 0.02, 0.05)
    assert float(ref) <= c <= float(ref) * (1 + 1e-14)


def test_guarantees(rng):
    """K = 2: pure 2 S eps by composition without convergence; K = 1: the draw is exact."""
    out = hmm_one_posterior_sample(ENTRIES, shape=(1, 2), n_states=2, epsilon=0.5, sweeps=7,
                                   rng=rng, allow_float=True)  # fmt: skip
    assert not out.exact and out.epsilon <= 0.5
    assert 14 * out.epsilon <= out.guarantee().epsilon <= 14 * out.epsilon * (1 + 1e-15)
    assert out.converged_guarantee().epsilon == out.epsilon
    g = out.approximate_guarantee(1e-6)
    assert g.epsilon == out.epsilon and g.delta >= (1 + math.exp(out.epsilon)) * 1e-6
    assert "converged" in out.note
    one = hmm_one_posterior_sample(ENTRIES, shape=(1, 2), n_states=1, epsilon=0.5, sweeps=3,
                                   rng=rng, allow_float=True)  # fmt: skip
    assert one.exact and one.guarantee().epsilon == one.epsilon
    assert np.all(np.concatenate([e.ravel() for e in one.emissions]) >= 0.005)
    assert np.allclose(out.transition.sum(axis=1), 1.0) and np.isclose(out.init.sum(), 1.0)


def test_mcmc_sample_guarantee_closed_form():
    """(1 + e^eps) tv, never below it; tv = 0 gives pure DP."""
    for eps, tv in ((0.1, 1e-3), (3.0, 0.01), (1.0, 1e-12)):
        g = mcmc_sample_guarantee(eps, tv)
        exact = mpmath.mpf(tv) * (1 + mpmath.exp(eps))
        assert g.epsilon == eps and float(exact) <= g.delta <= float(exact) * (1 + 1e-14)
    assert mcmc_sample_guarantee(1.0, 0.0).delta == 0.0
    assert mcmc_sample_guarantee(5.0, 0.9).delta == 1.0


@pytest.mark.parametrize(
    ("kwargs", "err", "name"),
    [
        ({"allow_float": False}, ValueError, "allow_float"),
        ({"allow_float": "yes"}, TypeError, "allow_float"),
        ({"n_states": 0}, ValueError, "n_states"),
        ({"n_states": 2.0}, ValueError, "n_states"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"truncation_multiplier": 1.0}, ValueError, "truncation_multiplier"),
        ({"truncation_multiplier": float("inf")}, ValueError, "truncation_multiplier"),
        ({"truncation_multiplier": "100"}, TypeError, "truncation_multiplier"),
        ({"sweeps": 0}, ValueError, "sweeps"),
        ({"prior": {"emission": 1.0}}, TypeError, "prior"),
        ({"prior": HMMPrior(emission=-1.0)}, ValueError, "prior.emission"),
        ({"shape": (1,)}, ValueError, "shape"),
        ({"n_values": [2, 2]}, ValueError, "n_values"),
    ],
)
def test_arguments_are_validated(kwargs, err, name):
    args = {"shape": (1, 2), "n_states": 2, "epsilon": 1.0, "rng": 0, "allow_float": True}
    with pytest.raises(err, match=name):
        hmm_one_posterior_sample(ENTRIES, **(args | kwargs))


@pytest.mark.parametrize("tv", [-0.1, 1.5, float("nan"), float("inf")])
def test_tv_distance_is_validated(tv):
    with pytest.raises(ValueError, match="tv_distance"):
        mcmc_sample_guarantee(1.0, tv)


def _gibbs_args():
    stats = np.ones((1, 3, 2))
    prior = (np.ones(2), np.ones((2, 2)), np.ones(2))
    return [stats, [0, 2], np.zeros((2, 1, 3), int), prior, [0.05], 2.0, (0, 1), None]


@pytest.mark.parametrize(
    ("index", "value", "name"),
    [
        (0, -np.ones((1, 3, 2)), "stats"),
        (0, np.full((1, 3, 2), np.nan), "stats"),
        (0, np.ones((1, 3, 3)), "stats"),
        (1, [0, 1, 2], "offsets"),
        (1, [0.0, 2.0], "offsets"),
        (2, np.full((2, 1, 3), 2), "z0"),
        (2, np.zeros((2, 3)), "z0"),
        (3, (np.ones(2), np.ones((3, 3)), np.ones(2)), "prior"),
        (3, (np.ones(2), np.ones((2, 2)), np.zeros(2)), "prior"),
        (4, [0.5], "truncation"),
        (4, [0.0], "truncation"),
        (5, float("nan"), "temperature"),
        (5, 0.0, "temperature"),
        (6, (0, 0), "draws"),
        (6, (-1, 1), "tune"),
        (6, 3, "schedule"),
    ],
)
def test_gibbs_arguments_are_validated(index, value, name):
    args = _gibbs_args()
    args[index] = value
    args[-1] = np.random.default_rng(0)
    with pytest.raises(ValueError, match=name):
        tempered_hmm_gibbs(*args)
