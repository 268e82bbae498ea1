"""Exactness of Foulds et al.'s plug-in Gibbs sweep (pymc_dp.kernels.hmm_plugin).

The plug-in target ``p(z | c~)`` of the states given fixed (projected) noisy counts, with the
initial-state distribution, the transition rows and the emissions integrated out, is a product
of Dirichlet-multinomial terms (written here independently of the kernel). On tiny problems
every configuration of ``z`` is enumerated.
"""

import itertools

import numpy as np
import pytest
from scipy import special, stats

from pymc_dp.kernels.hmm_plugin import (
    PluginPrior,
    draw_emissions,
    plugin_gibbs_chain,
    transition_counts,
)

ALPHA = 1e-6  # false-alarm rate of each chi-square assertion


def _log_dirmult(counts, conc):
    """log of the probability of one sequence with these counts under a Dirichlet-categorical."""
    counts = np.asarray(counts, dtype=float)
    conc = np.asarray(conc, dtype=float)
    return (
        special.gammaln(conc.sum())
        - special.gammaln(conc.sum() + counts.sum())
        + np.sum(special.gammaln(conc + counts) - special.gammaln(conc))
    )


def _log_beta(a):
    return np.sum(special.gammaln(a)) - special.gammaln(np.sum(a))


def _log_target(z, stats_, offsets, prior, markov=True):
    n_states = len(prior.init)
    lp = 0.0
    if markov:
        n0 = np.bincount(z[:, 0], minlength=n_states)
        lp += _log_dirmult(n0, prior.init)
        n = np.zeros((n_states, n_states))
        for r in range(z.shape[0]):
            for t in range(1, z.shape[1]):
                n[z[r, t - 1], z[r, t]] += 1
        for j in range(n_states):
            lp += _log_dirmult(n[j], prior.transition[j])
    for k in range(n_states):
        c = stats_[z == k].sum(axis=0)
        for f in range(len(offsets) - 1):
            g = prior.emission[offsets[f] : offsets[f + 1]]
            lp += _log_beta(g + c[offsets[f] : offsets[f + 1]]) - _log_beta(g)
    return lp


def _enumerate(shape, n_states, stats_, offsets, prior, markov=True):
    configs = np.array(list(itertools.product(range(n_states), repeat=int(np.prod(shape)))))
    configs = configs.reshape(-1, *shape)
    lp = np.array([_log_target(z, stats_, offsets, prior, markov) for z in configs])
    return configs, np.exp(lp - special.logsumexp(lp))


def _chi2(observed, probs):
    """Pearson statistic with cells of expected count < 5 pooled; (statistic, threshold)."""
    expected = probs * observed.sum()
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    stat = float(np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep]))
    return stat, float(stats.chi2.isf(ALPHA, keep.sum() - 1))


CASES = {
    # (R, T, K): two regions x three steps, two states; one region x four steps, three states
    "R2T3K2": (
        (2, 3),
        PluginPrior(np.array([1.0, 0.7]), np.array([[2.0, 0.5], [0.4, 1.5]]), None),
    ),
    "R1T4K3": (
        (1, 4),
        PluginPrior(
            np.array([0.8, 1.0, 1.3]),
            np.array([[2.0, 0.5, 0.3], [0.4, 1.5, 0.6], [0.5, 0.5, 3.0]]),
            None,
        ),
    ),
}


def _case(name):
    shape, prior = CASES[name]
    rng = np.random.default_rng(11)
    offsets = np.array([0, 2, 5])  # a binary and a three-valued feature
    stats_ = rng.uniform(0.0, 3.0, size=(*shape, 5))
    stats_[..., 2] = 0.0  # projected counts can be exactly zero
    prior = prior._replace(emission=np.array([1.0, 0.5, 0.7, 1.2, 0.9]))
    return shape, stats_, offsets, prior


@pytest.mark.parametrize("name", sorted(CASES))
def test_sweep_leaves_plugin_target_invariant(name):
    """Start 30000 independent chains at exact draws of the enumerated plug-in target p(z | c~),
    run two sweeps each, and compare the final states with the target by a Pearson chi-square
    (false-alarm rate 1e-6, cells with expected count < 5 pooled). Because a sweep that leaves
    the target invariant maps exact draws to exact draws, this is an exact test of the kernel.
    Negative control: the same draws against the target without the collapsed Markov prior
    (the states independent a priori) are rejected by the same check.
    """
    shape, stats_, offsets, prior = _case(name)
    n_states = len(prior.init)
    configs, probs = _enumerate(shape, n_states, stats_, offsets, prior)
    rng = np.random.default_rng(2024)
    m = 30000
    start = rng.choice(len(configs), size=m, p=probs)
    index = {c.tobytes(): i for i, c in enumerate(configs.astype(np.int64))}
    hits = np.zeros(len(configs))
    for i in start:
        out = plugin_gibbs_chain(stats_, offsets, configs[i], prior, (1, 1), rng)
        hits[index[out.states[-1].astype(np.int64).tobytes()]] += 1
    stat, threshold = _chi2(hits, probs)
    assert stat < threshold, (stat, threshold)
    _, wrong = _enumerate(shape, n_states, stats_, offsets, prior, markov=False)
    stat_c, threshold_c = _chi2(hits, wrong)
    assert stat_c > threshold_c, (stat_c, threshold_c)


def test_transition_counts_against_loop():
    rng = np.random.default_rng(3)
    z = rng.integers(0, 3, size=(4, 7))
    n0, n = transition_counts(z, 3)
    ref = np.zeros((3, 3), dtype=int)
    for r in range(4):
        for t in range(1, 7):
            ref[z[r, t - 1], z[r, t]] += 1
    assert n0.tolist() == np.bincount(z[:, 0], minlength=3).tolist()
    assert n.tolist() == ref.tolist()


def test_draw_emissions_matches_dirichlet_mean():
    """The mean of 20000 emission draws of one feature/state lies within 4.89 standard errors
    of the Dirichlet mean (prior + counts of the steps in that state), per cell (rate about
    1e-6 per cell); control: the mean of the prior alone is rejected."""
    stats_ = np.array([[[3.0, 1.0, 0.0], [2.5, 0.5, 4.0]]])
    z = np.array([[1, 1]])
    g = np.array([[1.0, 1.0, 1.0], [0.5, 1.0, 2.0]])
    rng = np.random.default_rng(5)
    draws = np.array([draw_emissions(stats_, np.array([0, 3]), z, g, rng)[1] for _ in range(20000)])
    alpha = g[1] + stats_[0].sum(axis=0)
    mean = alpha / alpha.sum()
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4.89 * se)
    control = g[1] / g[1].sum()
    assert np.any(np.abs(draws.mean(axis=0) - control) > 4.89 * se)
