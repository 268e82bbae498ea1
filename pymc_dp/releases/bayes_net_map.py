"""Private MAP of a discrete Bayesian network: exponential mechanism (Zhang et al. 2016, Alg. 3).

Candidate set. Alg. 3 samples ``theta`` with density proportional to
``exp(epsilon * u(D, theta) / (2 Delta))`` times a base measure. Here the response space is a
finite, public set of candidate parameter tables (a grid, or any list the analyst fixes before
seeing the data), and the base measure is uniform on it (McSherry & Talwar 2007 for finite
outcome spaces; Zhang et al. below Alg. 3). Each candidate gives, per node ``v``, a table
``theta[v][j1, ..., jk, s] = P(v = s | parents = j)`` with every entry ``> 0``.

Utility. ``u(D, theta) = log xi(theta) + sum_k log p_theta(x_k)``: the log posterior density
up to its normaliser, which does not depend on ``theta`` and so leaves the selection law
unchanged. ``xi`` is a Dirichlet(``prior``) density on each row of each table (uniform when
``prior = 1``). The log-likelihood is ``sum_v sum_{j, s} N[v][j, s] log theta[v][j, s]`` with
``N`` the count tables of :func:`~pymc_dp.releases.bayes_net.bayes_net_count_tables`.

Sensitivity (the ``Delta = L r`` of Alg. 3 step 3, with ``r = 1`` record replaced and ``L`` the
Lipschitz constant of the log-likelihood in the Hamming pseudo-metric). The prior term does
not depend on ``D``. Replacing one record ``x`` by ``y`` changes ``u`` by
``log p_theta(y) - log p_theta(x)``, and ``log p_theta(x) = sum_v log theta[v][x_parents, x_v]``
so ``|u(D, theta) - u(D', theta)| <= sum_v (max log theta[v] - min log theta[v])``. ``Delta`` is
the maximum of that sum over the candidates: a bound, attained e.g. when nodes have no parents.

Privacy. The exponential mechanism with a utility of sensitivity ``Delta`` is ``(epsilon, 0)``-DP
(McSherry & Talwar 2007, Thm. 6; Zhang et al. Corollary 4): the log ratio of selection
probabilities is at most ``epsilon / (2 Delta)`` times ``2 Delta`` (``Delta`` from the
utility, ``Delta`` from the normaliser), a linear loss computed by
:func:`pymc_dp.accounting.linear_epsilon`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp.accounting import PrivacyGuarantee, linear_epsilon
from pymc_dp.releases.bayes_net import DiscreteBayesNet, bayes_net_count_tables

__all__ = [
    "PrivateMAP",
    "map_selection_log_probabilities",
    "map_utility_sensitivity",
    "private_map",
]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
special = lazy_module("scipy.special")


def _positive(name: str, value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not (np.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return x


def _stacked(network: DiscreteBayesNet, candidates) -> dict[str, np.ndarray]:
    """Per node, the candidates' tables stacked to shape ``(C, *table_shape)`` (float64)."""
    if not isinstance(network, DiscreteBayesNet):
        raise ValueError(f"network must be a DiscreteBayesNet, got {network!r}")
    if isinstance(candidates, Mapping | str) or not isinstance(candidates, Sequence):
        raise ValueError("candidates must be a non-empty list of mappings node -> table")
    if len(candidates) == 0 or not all(isinstance(c, Mapping) for c in candidates):
        raise ValueError("candidates must be a non-empty list of mappings node -> table")
    out = {}
    for v in network.nodes:
        if not all(v in c and len(c) == len(network.nodes) for c in candidates):
            raise ValueError(f"candidates must each give a table for exactly {network.nodes}")
        t = np.asarray([np.asarray(c[v], dtype=np.float64) for c in candidates])
        if t.shape[1:] != network.table_shape(v):
            raise ValueError(f"candidates[...][{v!r}] must have shape {network.table_shape(v)}")
        if not np.all(np.isfinite(t) & (t > 0)):
            raise ValueError(f"candidates[...][{v!r}] must hold finite probabilities > 0")
        if not np.all(np.abs(t.sum(axis=-1) - 1.0) <= 1e-9):
            raise ValueError(f"candidates[...][{v!r}] rows (last axis) must sum to 1")
        out[v] = t
    return out


def _sensitivity(tables: dict[str, np.ndarray]) -> float:
    spans = [
        (np.log(t).reshape(t.shape[0], -1).max(1) - np.log(t).reshape(t.shape[0], -1).min(1))
        for t in tables.values()
    ]
    return float(np.max(np.sum(spans, axis=0)))


def map_utility_sensitivity(network: DiscreteBayesNet, candidates) -> float:
    """Replace-one sensitivity bound ``Delta`` of the log-posterior utility over the candidates.

    Parameters
    ----------
    network : DiscreteBayesNet
    candidates : sequence of mapping of str to array_like
        Candidate parameter tables (see :func:`private_map`).

    Returns
    -------
    float
        ``max over candidates of sum_v (max log theta[v] - min log theta[v])``.

    Examples
    --------
    >>> net = DiscreteBayesNet({"a": 2})
    >>> round(map_utility_sensitivity(net, [{"a": [0.2, 0.8]}, {"a": [0.5, 0.5]}]), 6)
    1.386294
    """
    return _sensitivity(_stacked(network, candidates))


def _utilities(counts, tables, prior: float) -> np.ndarray:
    """``u(D, theta_c)`` for every candidate: Dirichlet log prior plus log-likelihood."""
    u = 0.0
    for v, t in tables.items():
        logt = np.log(t)
        k = t.shape[-1]
        n_rows = logt[0, ..., 0].size
        log_prior = (prior - 1.0) * logt.reshape(t.shape[0], -1).sum(1) + n_rows * (
            special.gammaln(k * prior) - k * special.gammaln(prior)
        )
        loglik = logt.reshape(t.shape[0], -1) @ counts[v].reshape(-1).astype(np.float64)
        u = u + log_prior + loglik
    return np.asarray(u, dtype=np.float64)


def _log_probs(data, network, epsilon, candidates, prior):
    eps = _positive("epsilon", epsilon)
    prior = _positive("prior", prior)
    tables = _stacked(network, candidates)
    delta_u = _sensitivity(tables)
    counts = bayes_net_count_tables(data, network)
    u = _utilities(counts, tables, prior)
    scale = eps / (2.0 * delta_u) if delta_u > 0 else 0.0  # all candidates equal: uniform
    logw = scale * u
    return logw - special.logsumexp(logw), tables, delta_u


def map_selection_log_probabilities(data, network, *, epsilon, candidates, prior=1.0):
    """Log probability that :func:`private_map` selects each candidate (exact, log space).

    ``log softmax(epsilon * u(D, theta_c) / (2 Delta))`` over the candidates ``c``.

    Parameters
    ----------
    data, network, epsilon, candidates, prior
        As for :func:`private_map`.

    Returns
    -------
    numpy.ndarray of shape (len(candidates),)

    Examples
    --------
    >>> net = DiscreteBayesNet({"a": 2})
    >>> cands = [{"a": [0.2, 0.8]}, {"a": [0.8, 0.2]}]
    >>> p = np.exp(map_selection_log_probabilities([[1], [1]], net, epsilon=1.0, candidates=cands))
    >>> p.round(4).tolist()  # Delta = ln 4; utility gap 2 ln 4; softmax of [1, 0]
    [0.7311, 0.2689]
    """
    return _log_probs(data, network, epsilon, candidates, prior)[0]


def _select(log_probs: np.ndarray, gen: np.random.Generator, size=None):
    """Indices drawn exactly from ``exp(log_probs)`` (inverse CDF of one uniform each)."""
    p = np.exp(log_probs)
    return gen.choice(p.size, size=size, p=p / p.sum())


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class PrivateMAP:
    """A private MAP estimate of a discrete Bayesian network (Zhang et al. 2016, Alg. 3).

    Attributes
    ----------
    network : DiscreteBayesNet
    estimate : mapping of str to numpy.ndarray
        The selected candidate's tables (read-only).
    index : int
        Its position in ``candidates``.
    epsilon : float
    sensitivity : float
        ``Delta``, the utility's replace-one sensitivity bound used.

    Examples
    --------
    200 records with ``a = 1, b = 1``: among four candidates the one with ``P(a = 1) = 0.8``
    and ``P(b = 1 | a = 1) = 0.8`` (index 1) has a log-posterior utility ahead of the others by
    277 nats or more, so the exponential mechanism picks it with probability
    ``1 - 2 exp(-250)`` (:func:`map_selection_log_probabilities`).

    >>> import numpy as np
    >>> from pymc_dp.releases import DiscreteBayesNet, PrivateMAP, private_map
    >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
    >>> grid = [{"a": [p, 1 - p], "b": [[q, 1 - q], [1 - q, q]]}
    ...         for p in (0.2, 0.8) for q in (0.2, 0.8)]
    >>> res = private_map([[1, 1]] * 200, net, epsilon=5.0, candidates=grid,
    ...                   rng=np.random.default_rng(0))
    >>> isinstance(res, PrivateMAP), res.index, res.epsilon
    (True, 1, 5.0)
    >>> res.estimate["a"].tolist(), res.estimate["b"].tolist()
    ([0.2, 0.8], [[0.8, 0.2], [0.2, 0.8]])
    """

    network: DiscreteBayesNet
    estimate: Mapping
    index: int
    epsilon: float
    sensitivity: float

    def guarantee(self) -> PrivacyGuarantee:
        """``(epsilon, 0)``-DP: loss ``epsilon / (2 Delta)`` per unit over ``2 Delta`` units."""
        if self.sensitivity == 0:
            return PrivacyGuarantee(epsilon=0.0)
        rate = Fraction(self.epsilon) / (2 * Fraction(self.sensitivity))
        return PrivacyGuarantee(epsilon=linear_epsilon(rate, 2 * Fraction(self.sensitivity)))


def private_map(data, network, *, epsilon, candidates, prior=1.0, rng=None) -> PrivateMAP:
    """Select a MAP estimate privately with the exponential mechanism (Zhang et al. Alg. 3).

    Parameters
    ----------
    data : array_like of shape (n, n_nodes) or mapping of node name to 1-D array
        Integer records (as for :func:`~pymc_dp.releases.bayes_net.bayes_net_count_tables`).
    network : DiscreteBayesNet
    epsilon : float
        Privacy parameter (``> 0``); the release is ``(epsilon, 0)``-DP, replace-one.
    candidates : sequence of mapping of str to array_like
        Public, data-independent candidate parameters: per candidate, per node ``v`` a table of
        shape ``network.table_shape(v)`` whose last axis is a probability vector (entries > 0).
    prior : float, default 1.0
        Dirichlet concentration of every cell (``> 0``), giving the log-prior in the utility.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    PrivateMAP

    Raises
    ------
    ValueError
        Naming ``epsilon``, ``prior``, ``network``, ``candidates`` or ``data``.

    Examples
    --------
    >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
    >>> grid = [{"a": [p, 1 - p], "b": [[q, 1 - q], [1 - q, q]]}
    ...         for p in (0.2, 0.5, 0.8) for q in (0.2, 0.8)]
    >>> res = private_map([[0, 0]] * 20, net, epsilon=1.0, candidates=grid,
    ...                   rng=np.random.default_rng(0))
    >>> res.guarantee()
    PrivacyGuarantee(epsilon=1.0, delta=0.0, rho=None)
    """
    logp, tables, delta_u = _log_probs(data, network, epsilon, candidates, prior)
    c = int(_select(logp, np.random.default_rng(rng)))
    est = {v: t[c].copy() for v, t in tables.items()}
    for t in est.values():
        t.setflags(write=False)
    return PrivateMAP(network, MappingProxyType(est), c, float(epsilon), delta_u)
