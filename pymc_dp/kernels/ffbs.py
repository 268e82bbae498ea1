r"""Forward filtering, backward sampling (FFBS) for batches of discrete-state chains.

For each chain :math:`c` with initial law :math:`\pi`, transition matrix :math:`P` and emission
log-likelihoods :math:`E_{t,k} = \log p(\text{data}_t \mid s_t = k)`, the joint conditional of the
path is

.. math::

    p(s \mid \text{data}) \propto \pi_{s_0} e^{E_{0,s_0}} \prod_{t \ge 1} P_{s_{t-1}, s_t}
    e^{E_{t,s_t}}.

*Forward filtering* (Rabiner 1989, the scaled forward recursion, here in log space):
:math:`\log\alpha_0 = \log\pi + E_0 - c_0` and
:math:`\log\alpha_t(k) = \operatorname{lse}_j(\log\alpha_{t-1}(j) + \log P_{jk}) + E_{t,k} - c_t`
(lse: log-sum-exp),
where :math:`c_t` normalises :math:`\alpha_t = p(s_t \mid \text{data}_{0:t})` and
:math:`\sum_t c_t = \log p(\text{data})`.

*Backward sampling* (Carter & Kohn 1994; Frühwirth-Schnatter 1994): draw
:math:`s_{T-1} \sim \alpha_{T-1}`, then for :math:`t = T-2, \dots, 0`,
:math:`p(s_t = k \mid s_{t+1}, \text{data}) \propto \alpha_t(k) P_{k, s_{t+1}}`. The draw is exact
from the joint conditional. Cost :math:`O(C T K^2)`; everything is in log space, so zero
probabilities (``-inf``) are handled exactly.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["backward_sample", "ffbs_sample", "forward_filter"]


@numba.njit(cache=True)
def _logsumexp(x):
    m = -np.inf
    for v in x:
        if v > m:
            m = v
    if m == -np.inf:
        return -np.inf
    acc = 0.0
    for v in x:
        acc += np.exp(v - m)
    return m + np.log(acc)


@numba.njit(cache=True)
def _forward_one(log_init, log_trans, log_emis, log_alpha):
    """Filtered log-probabilities of one chain into ``log_alpha``; returns log p(data)."""
    n_steps, k = log_emis.shape
    work = np.empty(k)
    for j in range(k):
        work[j] = log_init[j] + log_emis[0, j]
    total = 0.0
    for t in range(n_steps):
        if t > 0:
            for j in range(k):
                col = log_alpha[t - 1] + log_trans[:, j]
                work[j] = _logsumexp(col) + log_emis[t, j]
        c = _logsumexp(work)
        total += c
        if c == -np.inf or np.isnan(c):
            log_alpha[t:] = np.nan
            return -np.inf if c == -np.inf else np.nan
        log_alpha[t] = work - c
    return total


@numba.njit(cache=True)
def forward_filter(log_init, log_trans, log_emis):
    """Forward pass for a batch of chains.

    Parameters
    ----------
    log_init : ndarray, shape (C, K)
    log_trans : ndarray, shape (C, K, K)
    log_emis : ndarray, shape (C, T, K)

    Returns
    -------
    log_alpha : ndarray, shape (C, T, K)
        ``log p(s_t = k | data_{0:t})`` per chain (NaN after a step of zero likelihood).
    log_marginal : ndarray, shape (C,)
        ``log p(data)`` per chain (``-inf`` when no path is possible).
    """
    n_chains, n_steps, k = log_emis.shape
    log_alpha = np.empty((n_chains, n_steps, k))
    log_marginal = np.empty(n_chains)
    for c in range(n_chains):
        log_marginal[c] = _forward_one(log_init[c], log_trans[c], log_emis[c], log_alpha[c])
    return log_alpha, log_marginal


@numba.njit(cache=True)
def _draw_log(logw, u):
    """Index drawn with probabilities proportional to ``exp(logw)``, by inversion of ``u``."""
    m = logw.max()
    w = np.exp(logw - m)
    target = u * w.sum()
    acc = 0.0
    last = 0
    for j in range(w.shape[0]):
        if w[j] > 0.0:
            last = j
            acc += w[j]
            if target < acc:
                return j
    return last


@numba.njit(cache=True)
def backward_sample(log_alpha, log_trans, u):
    """Backward pass: one path per chain from filtered probabilities and uniforms ``u``.

    Parameters
    ----------
    log_alpha : ndarray, shape (C, T, K)
        Output of :func:`forward_filter` (all finite-normalised).
    log_trans : ndarray, shape (C, K, K)
    u : ndarray, shape (C, T)
        Independent Uniform(0, 1) numbers.

    Returns
    -------
    ndarray of int64, shape (C, T)
    """
    n_chains, n_steps, k = log_alpha.shape
    out = np.empty((n_chains, n_steps), dtype=np.int64)
    logw = np.empty(k)
    for c in range(n_chains):
        out[c, n_steps - 1] = _draw_log(log_alpha[c, n_steps - 1], u[c, n_steps - 1])
        for t in range(n_steps - 2, -1, -1):
            nxt = out[c, t + 1]
            for j in range(k):
                logw[j] = log_alpha[c, t, j] + log_trans[c, j, nxt]
            out[c, t] = _draw_log(logw, u[c, t])
    return out


def ffbs_sample(log_init, log_trans, log_emis, rng):
    """Draw one path per chain exactly from ``p(s | data)`` by forward filtering, backward sampling.

    Parameters
    ----------
    log_init : array_like, shape (C, K)
        Log initial-state probabilities.
    log_trans : array_like, shape (C, K, K)
        Log transition matrices (row = previous state).
    log_emis : array_like, shape (C, T, K)
        Emission log-likelihoods ``log p(data_t | s_t = k)`` (up to a constant per ``(c, t)``).
    rng : numpy.random.Generator

    Returns
    -------
    states : ndarray of int64, shape (C, T)
    log_marginal : ndarray, shape (C,)
        ``log p(data)`` per chain under the emissions given.

    Raises
    ------
    ValueError
        On inconsistent shapes, or if a chain has no path of positive probability (or NaN).

    Examples
    --------
    >>> import numpy as np
    >>> log_init = np.log([[0.5, 0.5]])
    >>> log_trans = np.log([[[0.9, 0.1], [0.1, 0.9]]])
    >>> log_emis = np.array([[[0.0, -np.inf], [0.0, 0.0], [-np.inf, 0.0]]])  # s_0=0, s_2=1 forced
    >>> states, lm = ffbs_sample(log_init, log_trans, log_emis, np.random.default_rng(0))
    >>> states[0, 0], states[0, 2]
    (np.int64(0), np.int64(1))
    >>> bool(np.isclose(lm[0], np.log(0.5 * (0.9 * 0.1 + 0.1 * 0.9))))
    True
    """
    log_init = np.ascontiguousarray(log_init, dtype=np.float64)
    log_trans = np.ascontiguousarray(log_trans, dtype=np.float64)
    log_emis = np.ascontiguousarray(log_emis, dtype=np.float64)
    n_chains, n_steps, k = log_emis.shape
    if log_init.shape != (n_chains, k) or log_trans.shape != (n_chains, k, k):
        raise ValueError(
            f"ffbs_sample: shapes disagree: log_init {log_init.shape}, log_trans "
            f"{log_trans.shape}, log_emis {log_emis.shape} (need (C, K), (C, K, K), (C, T, K))."
        )
    if n_steps == 0:
        return np.empty((n_chains, 0), dtype=np.int64), np.zeros(n_chains)
    log_alpha, log_marginal = forward_filter(log_init, log_trans, log_emis)
    bad = ~np.isfinite(log_marginal)
    if np.any(bad):
        raise ValueError(
            "ffbs_sample: no state path has positive probability (or the log-likelihood is "
            f"NaN) for chain(s) {np.flatnonzero(bad).tolist()}."
        )
    states = backward_sample(log_alpha, log_trans, rng.random((n_chains, n_steps)))
    return states, log_marginal
