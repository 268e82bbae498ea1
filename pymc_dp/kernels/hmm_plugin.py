r"""Foulds et al.'s plug-in Gibbs sampler for a private HMM (Foulds et al. 2016, Secs. 4.2 and 5).

Model. ``R`` independent chains (regions) of ``T`` steps (months) share an initial-state
distribution ``pi ~ Dirichlet(a)``, transition rows ``A[j] ~ Dirichlet(b[j])`` and, for each
state ``k`` and feature ``f``, a categorical emission ``phi[f, k] ~ Dirichlet(g_f)`` (naive
Bayes over the features of an entry). The emissions of step ``(r, t)`` enter the likelihood
only through the per-(step, feature, value) count table ``c[r, t, f, v]``:

.. math:: p(c \mid z, \phi) \propto \prod_{r,t} \prod_{f,v} \phi_{f, z_{rt}, v}^{c_{rtfv}}.

Plug-in target. The released counts are noisy; the plug-in sampler projects them to the valid
region (``[0, N[r, t]]``, Foulds eq. 16) and treats the projected, real-valued table ``c~`` as
if it were the true sufficient statistic (Sec. 4.2). The target is then the well-defined
distribution

.. math:: p(z, \phi \mid \tilde c) \propto p(z)\, p(\phi)
          \prod_{r,t,f,v} \phi_{f, z_{rt}, v}^{\tilde c_{rtfv}},

where ``p(z)`` is the Markov prior with ``pi`` and ``A`` integrated out (a product of
Dirichlet-multinomial terms of the initial-state and transition counts).

Sweep (Sec. 5: "transition probabilities collapsed out, following Goldwater and Griffiths
(2007). We did not collapse out the naive Bayes parameters"):

1. ``phi[f, k] ~ Dirichlet(g_f + sum_{(r,t): z_rt = k} c~[r, t, f, :])`` for every ``f, k``;
2. for each region and each step in order, ``z_rt`` from its conditional given the other states
   and ``phi``: the emission term ``sum_{f,v} c~_rtfv log phi[f, k, v]`` plus the collapsed
   Markov term, the predictive probability of the transitions into and out of ``(r, t)``
   added one after the other (so that a self-transition ``j -> k -> l`` with ``j = k = l``
   sees the count of the first when the second is added):

   .. math:: \frac{n_{jk} + b_{jk}}{n_{j\cdot} + \sum_l b_{jl}}\;
             \frac{n_{kl} + [j = k = l] + b_{kl}}{n_{k\cdot} + [j = k] + \sum_m b_{km}},

   with ``n`` the transition counts of all other steps of all regions, ``j = z_{r,t-1}`` and
   ``l = z_{r,t+1}``; at ``t = 0`` the first factor is the initial-state predictive
   ``(n0_k + a_k) / (n0_. + sum a)``.

Step 1 is an exact conditional draw and step 2 a sequence of exact single-site conditionals
of the collapsed target, so the sweep leaves ``p(z, phi | c~)`` invariant. The emission terms
are computed once per sweep as a matrix product; the site loop and the whole sweep schedule
run in numba.

The table's cells are laid out flat: feature ``f`` owns cells ``offsets[f]:offsets[f + 1]``
(one per value), so ``stats`` has shape ``(R, T, C)`` with ``C = offsets[-1]``.

References
----------
Foulds, J., Geumlek, J., Welling, M. and Chaudhuri, K. (2016). On the theory and practice of
privacy-preserving Bayesian data analysis. *UAI*.
Goldwater, S. and Griffiths, T. (2007). A fully Bayesian approach to unsupervised
part-of-speech tagging. *ACL*.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

__all__ = [
    "PluginDraws",
    "PluginPrior",
    "draw_emissions",
    "plugin_gibbs_chain",
    "transition_counts",
    "update_states",
]


class PluginPrior(NamedTuple):
    """Dirichlet concentrations of the plug-in HMM.

    Attributes
    ----------
    init : numpy.ndarray of shape (K,)
        Initial-state distribution (shared by all regions).
    transition : numpy.ndarray of shape (K, K)
        Row ``j``: the Dirichlet of the transition row from state ``j``.
    emission : numpy.ndarray of shape (C,)
        Per cell (feature value) of the flat table: the Dirichlet of each feature's emission,
        the same for every state.
    """

    init: np.ndarray
    transition: np.ndarray
    emission: np.ndarray


class PluginDraws(NamedTuple):
    """Kept draws of :func:`plugin_gibbs_chain`.

    Attributes
    ----------
    states : numpy.ndarray of shape (draws, R, T), int64
    emissions : numpy.ndarray of shape (draws, K, C)
        ``phi`` laid out like the table's cells (each feature's block sums to 1).
    init_counts : numpy.ndarray of shape (draws, K), int64
        Initial states of the regions, per state.
    transition_counts : numpy.ndarray of shape (draws, K, K), int64
        ``n[j, k]``: transitions ``j -> k`` over all regions and steps.
    """

    states: np.ndarray
    emissions: np.ndarray
    init_counts: np.ndarray
    transition_counts: np.ndarray


@numba.njit(cache=True)
def transition_counts(z, n_states):
    """Initial-state counts ``(K,)`` and transition counts ``(K, K)`` of states ``z (R, T)``.

    Examples
    --------
    >>> import numpy as np
    >>> n0, n = transition_counts(np.array([[0, 1, 1], [1, 1, 0]]), 2)
    >>> n0.tolist(), n.tolist()
    ([1, 1], [[0, 1], [1, 2]])
    """
    n0 = np.zeros(n_states, dtype=np.int64)
    n = np.zeros((n_states, n_states), dtype=np.int64)
    for r in range(z.shape[0]):
        n0[z[r, 0]] += 1
        for t in range(1, z.shape[1]):
            n[z[r, t - 1], z[r, t]] += 1
    return n0, n


@numba.njit(cache=True)
def draw_emissions(stats, offsets, z, emission_prior, rng):
    """Step 1: ``phi[k, cells of f] ~ Dirichlet(g_f + counts of the steps in state k)``.

    Parameters
    ----------
    stats : numpy.ndarray of shape (R, T, C), float64
        Projected (non-negative) counts.
    offsets : numpy.ndarray of shape (F + 1,), int64
    z : numpy.ndarray of shape (R, T), int64
    emission_prior : numpy.ndarray of shape (K, C)
        Concentrations; only the shape's ``K`` and the values are used.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of shape (K, C)
        Entries at least ``1e-300`` (so their logarithms are finite). If every gamma draw of
        a block underflows to 0 (concentrations far below 1e-3), that block is set uniform.

    Examples
    --------
    >>> import numpy as np
    >>> phi = draw_emissions(np.ones((1, 2, 2)), np.array([0, 2]), np.array([[0, 0]]),
    ...                      np.ones((2, 2)), np.random.default_rng(0))
    >>> np.allclose(phi.sum(axis=1), 1.0)
    True
    """
    n_states, n_cells = emission_prior.shape
    alpha = emission_prior.copy()
    for r in range(stats.shape[0]):
        for t in range(stats.shape[1]):
            k = z[r, t]
            for c in range(n_cells):
                alpha[k, c] += stats[r, t, c]
    phi = np.empty((n_states, n_cells))
    for k in range(n_states):
        for f in range(offsets.shape[0] - 1):
            total = 0.0
            for c in range(offsets[f], offsets[f + 1]):
                phi[k, c] = rng.standard_gamma(alpha[k, c])
                total += phi[k, c]
            if not total > 0.0:  # every gamma draw underflowed (all concentrations tiny)
                for c in range(offsets[f], offsets[f + 1]):
                    phi[k, c] = 1.0
                total = float(offsets[f + 1] - offsets[f])
            for c in range(offsets[f], offsets[f + 1]):
                phi[k, c] = max(phi[k, c] / total, 1e-300)
    return phi


@numba.njit(cache=True)
def _log_pred(n, row, b, b_row, j, k):
    """``log((n[j, k] + b[j, k]) / (row[j] + b_row[j]))``: one collapsed transition."""
    return math.log(n[j, k] + b[j, k]) - math.log(row[j] + b_row[j])


@numba.njit(cache=True)
def _site_log_markov(z, r, t, counts, prior, k):
    """Collapsed Markov term of ``z[r, t] = k`` (its own transitions removed from counts)."""
    n0, n, row = counts
    a, b, b_row = prior
    n_steps = z.shape[1]
    if t == 0:
        lp = math.log(n0[k] + a[k]) - math.log(n0.sum() + a.sum())
        added = False
    else:
        j = z[r, t - 1]
        lp = _log_pred(n, row, b, b_row, j, k)
        added = j == k
    if t + 1 < n_steps:
        l_ = z[r, t + 1]
        extra_kl = 1.0 if (added and k == l_) else 0.0
        extra_k = 1.0 if added else 0.0
        lp += math.log(n[k, l_] + extra_kl + b[k, l_]) - math.log(row[k] + extra_k + b_row[k])
    return lp


@numba.njit(cache=True)
def _move(z, r, t, counts, sign):
    """Add (``sign = 1``) or remove (``-1``) the transitions into and out of ``(r, t)``."""
    n0, n, row = counts
    k = z[r, t]
    if t == 0:
        n0[k] += sign
    else:
        n[z[r, t - 1], k] += sign
        row[z[r, t - 1]] += sign
    if t + 1 < z.shape[1]:
        n[k, z[r, t + 1]] += sign
        row[k] += sign


@numba.njit(cache=True)
def update_states(log_emission, z, counts, prior, rng):
    """Step 2: one systematic scan of single-site collapsed Gibbs updates, in place.

    Parameters
    ----------
    log_emission : numpy.ndarray of shape (R, T, K)
        ``sum_{f,v} c~[r, t, f, v] log phi[f, k, v]``.
    z : numpy.ndarray of shape (R, T), int64
        Current states, updated in place.
    counts : tuple
        ``(n0, n, row)``: float64 initial-state counts ``(K,)``, transition counts ``(K, K)``
        and their row sums ``(K,)`` of ``z``, kept in step with it.
    prior : tuple
        ``(a, b, b_row)``: init concentrations ``(K,)``, transition concentrations ``(K, K)``
        and their row sums.
    rng : numpy.random.Generator

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros((1, 3), dtype=np.int64)
    >>> n0, n = transition_counts(z, 2)
    >>> counts = (n0.astype(float), n.astype(float), n.sum(axis=1).astype(float))
    >>> b = np.ones((2, 2))
    >>> le = np.zeros((1, 3, 2)); le[..., 1] = 50.0  # state 1 fits far better
    >>> update_states(le, z, counts, (np.ones(2), b, b.sum(axis=1)), np.random.default_rng(0))
    >>> z.tolist()
    [[1, 1, 1]]
    """
    n_states = log_emission.shape[2]
    lp = np.empty(n_states)
    for r in range(z.shape[0]):
        for t in range(z.shape[1]):
            _move(z, r, t, counts, -1.0)
            top = -np.inf
            for k in range(n_states):
                lp[k] = log_emission[r, t, k] + _site_log_markov(z, r, t, counts, prior, k)
                top = max(top, lp[k])
            total = 0.0
            for k in range(n_states):
                lp[k] = math.exp(lp[k] - top)
                total += lp[k]
            u = rng.random() * total
            k_new = n_states - 1
            acc = 0.0
            for k in range(n_states):
                acc += lp[k]
                if u < acc:
                    k_new = k
                    break
            z[r, t] = k_new
            _move(z, r, t, counts, 1.0)


@numba.njit(cache=True)
def _chain(stats, offsets, z, prior, schedule, rng):
    a, b, g = prior
    tune, draws = schedule
    n_states = a.shape[0]
    n_regions, n_steps, n_cells = stats.shape
    n0, n = transition_counts(z, n_states)
    counts = (n0.astype(np.float64), n.astype(np.float64), n.sum(axis=1).astype(np.float64))
    mprior = (a, b, b.sum(axis=1))
    g_k = np.empty((n_states, n_cells))
    for k in range(n_states):
        g_k[k] = g
    flat = stats.reshape(n_regions * n_steps, n_cells)
    out_z = np.empty((draws, n_regions, n_steps), dtype=np.int64)
    out_phi = np.empty((draws, n_states, n_cells))
    out_n0 = np.empty((draws, n_states), dtype=np.int64)
    out_n = np.empty((draws, n_states, n_states), dtype=np.int64)
    for it in range(tune + draws):
        phi = draw_emissions(stats, offsets, z, g_k, rng)
        log_em = (flat @ np.log(phi).T).reshape(n_regions, n_steps, n_states)
        update_states(log_em, z, counts, mprior, rng)
        if it >= tune:
            d = it - tune
            out_z[d] = z
            out_phi[d] = phi
            out_n0[d], out_n[d] = transition_counts(z, n_states)
    return out_z, out_phi, out_n0, out_n


def plugin_gibbs_chain(stats, offsets, z0, prior: PluginPrior, schedule, rng) -> PluginDraws:
    """Run the plug-in Gibbs sampler (the module's sweep) from states ``z0``.

    Parameters
    ----------
    stats : array_like of shape (R, T, C)
        Non-negative (projected) counts, float64.
    offsets : array_like of shape (F + 1,)
        Feature ``f`` owns cells ``offsets[f]:offsets[f + 1]``; ``offsets[-1] == C``.
    z0 : array_like of shape (R, T)
        Initial states in ``0..K-1`` (copied).
    prior : PluginPrior
    schedule : tuple of int
        ``(tune, draws)``: sweeps discarded, then sweeps kept (one draw per sweep).
    rng : numpy.random.Generator

    Returns
    -------
    PluginDraws
        States after each kept sweep, and the emissions ``phi`` drawn in that sweep (the
        draw that the states were updated with).

    Examples
    --------
    >>> import numpy as np
    >>> stats = np.zeros((2, 4, 2)); stats[:, :2] = [30.0, 0.0]; stats[:, 2:] = [0.0, 30.0]
    >>> prior = PluginPrior(np.ones(2), np.ones((2, 2)), np.ones(2))
    >>> out = plugin_gibbs_chain(stats, [0, 2], np.zeros((2, 4), int), prior, (20, 5),
    ...                          np.random.default_rng(0))
    >>> out.states.shape, bool((out.states[:, :, 0] != out.states[:, :, 3]).all())
    ((5, 2, 4), True)
    """
    stats = np.ascontiguousarray(stats, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    z = np.array(z0, dtype=np.int64, copy=True)
    p = (
        np.ascontiguousarray(prior.init, dtype=np.float64),
        np.ascontiguousarray(prior.transition, dtype=np.float64),
        np.ascontiguousarray(prior.emission, dtype=np.float64),
    )
    tune, draws = (int(s) for s in schedule)
    return PluginDraws(*_chain(stats, offsets, z, p, (tune, draws), rng))
