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

Exact sampling (the default). The utility above is irrational (logarithms of the tables), and a
softmax computed in floating point and drawn with a floating-point uniform only approximates its
law (and numpy's generator is not a secure source). :func:`private_map` therefore runs the
exponential mechanism of a utility on an integer grid: every ``log theta[v]`` entry is rounded
to the nearest multiple of ``g = UTILITY_GRID = 2**-24`` (public integers ``L[v]``, fixed before
the data are seen), and the log prior to the nearest multiple of ``g`` (data-independent), so
``u~(D, c) = sum_v sum_{j, s} N[v][j, s] L_c[v][j, s] + P_c``
is an integer for every candidate, computed exactly. Its replace-one sensitivity is the integer
``Delta~ = max_c sum_v (max L_c[v] - min L_c[v])`` (the argument above, exact in integers), and
the rate ``epsilon / (2 Delta~)`` is rounded down to a rational ``s/t`` (``t <= 2**60``), so the
mechanism samples ``P(c) proportional to exp(s u~(D, c) / t)`` exactly: rejection from the
uniform proposal with Canonne-Kamath-Steinke Bernoulli(``exp(-gamma)``) acceptance on words from
the secure source (:mod:`pymc_dp.kernels.exponential_mechanism`). Its privacy loss is
``2 Delta~ s / t <= epsilon`` with no rounding left. ``u~`` is within ``g/2`` per table entry of
``u / g`` (``|g u~ - u| <= (n |V| + |prior cells|) g / 2``), so the selection law is that of
Zhang et al.'s mechanism up to a factor of about ``exp(epsilon (n |V| + |cells|) g / (2 Delta))``
(``|cells|``: the number of table rows in the prior).
``allow_float=True`` opts in to the floating-point softmax drawn from a numpy ``Generator`` (the
law of :func:`map_selection_log_probabilities` with ``allow_float=True``), for simulations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp._validation import INT_RANGE, as_bool
from pymc_dp.accounting import PrivacyGuarantee, linear_epsilon
from pymc_dp.kernels.exact_sampling import check_rng
from pymc_dp.kernels.exponential_mechanism import (
    _utility_rate,
    exact_log_probabilities,
    log_weights_to_gammas,
    sample_exponential_mechanism,
)
from pymc_dp.releases.bayes_net import DiscreteBayesNet, bayes_net_count_tables

__all__ = [
    "UTILITY_GRID",
    "PrivateMAP",
    "map_selection_log_probabilities",
    "map_utility_sensitivity",
    "private_map",
]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
special = lazy_module("scipy.special")

#: the exact mechanism's utility grid ``g`` (nats per integer unit; module docstring)
UTILITY_GRID = 2.0**-24


def _positive(name: str, value) -> float:
    if isinstance(value, str | bytes | bool | np.bool_):  # float("1") and float(True) work
        raise TypeError(f"{name} must be a positive finite number, got {value!r}")
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
    spans = [np.ptp(np.log(t).reshape(t.shape[0], -1), axis=1) for t in tables.values()]
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
    u = _log_prior(tables, prior)
    for v, t in tables.items():
        u = u + np.log(t).reshape(t.shape[0], -1) @ counts[v].reshape(-1).astype(np.float64)
    return u


def _log_prior(tables, prior: float) -> np.ndarray:
    """Dirichlet(``prior``) log density of every row of every table, per candidate, up to the
    normalizer ``n_rows (log Γ(kα) - k log Γ(α))``: it is the same for every candidate, so it
    cancels in the selection law (and at an extreme ``prior`` such as 1e-320 or 1e306 it is
    ``inf - inf``)."""
    n_cand = next(iter(tables.values())).shape[0]
    out = np.zeros(n_cand)
    for t in tables.values():
        out += (prior - 1.0) * np.log(t).reshape(n_cand, -1).sum(1)
    return out


def _exact_law(data, network, epsilon, candidates, prior):
    """``(q, r, d, tables, Delta~ g)``: the exact mechanism's gammas (module docstring)."""
    eps = _positive("epsilon", epsilon)
    prior = _positive("prior", prior)
    tables = _stacked(network, candidates)
    counts = bayes_net_count_tables(data, network)
    n_cand = next(iter(tables.values())).shape[0]
    units = np.zeros(n_cand, dtype=np.int64)
    delta = np.zeros(n_cand, dtype=np.int64)
    bound = 0
    for v, t in tables.items():
        lq = np.rint(np.log(t).reshape(n_cand, -1) / UTILITY_GRID).astype(np.int64)
        delta += lq.max(1) - lq.min(1)
        c = np.asarray(counts[v], dtype=np.int64).reshape(-1)
        bound += int(c.sum()) * int(np.abs(lq).max())
        if bound >= INT_RANGE:
            raise ValueError(
                "data: too many records for the exact mechanism's integer utility (the "
                "candidates' log tables times the counts exceed 2**62 grid units); use fewer "
                "records or allow_float=True"
            )
        units += lq @ c
    lp = _log_prior(tables, prior)
    if not np.all(np.abs(lp) < INT_RANGE * UTILITY_GRID / 4):
        raise ValueError("prior: the candidates' log prior is too large for the utility grid")
    units += np.rint(lp / UTILITY_GRID).astype(np.int64)
    delta_units = int(delta.max())
    rate = _utility_rate(eps, delta_units)  # 0: no candidate depends on the data (uniform)
    q, r, d = log_weights_to_gammas([rate.numerator * int(u) for u in units], rate.denominator)
    return q, r, d, tables, delta_units * UTILITY_GRID


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


def map_selection_log_probabilities(
    data, network, *, epsilon, candidates, prior=1.0, allow_float=False
):
    """Log probability that :func:`private_map` selects each candidate.

    The default is the law of the exact mechanism (utility on the integer grid, rational rate:
    module docstring), rounded to float64 only at the end. With ``allow_float=True``, the law
    of the floating-point opt-in: ``log softmax(epsilon * u(D, theta_c) / (2 Delta))``.

    Parameters
    ----------
    data, network, epsilon, candidates, prior, allow_float
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
    as_bool("allow_float", allow_float)
    if allow_float:
        return _log_probs(data, network, epsilon, candidates, prior)[0]
    q, r, d = _exact_law(data, network, epsilon, candidates, prior)[:3]
    return exact_log_probabilities(q, r, d)


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


def private_map(
    data, network, *, epsilon, candidates, prior=1.0, rng=None, allow_float=False
) -> PrivateMAP:
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
    rng : numpy.random.Generator, optional
        ``None`` (the default): words from the operating system's secure source, for real
        releases. A ``Generator``: reproducible words from its bit generator (simulations; the
        law is the same exact one). With ``allow_float=True`` also an int seed.
    allow_float : bool, default False
        ``False``: the exact mechanism (module docstring): the utility on the integer grid
        ``UTILITY_GRID``, a rational rate, exact rejection sampling from random words; its
        ``(epsilon, 0)`` guarantee holds with no rounding. ``True``: opt in to the
        floating-point softmax drawn with ``numpy``'s ``Generator.choice`` (Zhang et al.'s
        mechanism as usually implemented; for simulations and reproducing the paper): its
        probabilities are rounded and its generator is not a secure source, so the guarantee
        is not exact.

    Returns
    -------
    PrivateMAP

    Raises
    ------
    ValueError
        Naming ``epsilon``, ``prior``, ``network``, ``candidates`` or ``data``.
    TypeError
        Naming ``rng`` (exact path: only ``None`` or a ``Generator``) or ``allow_float``.

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
    as_bool("allow_float", allow_float)
    if allow_float:
        logp, tables, delta_u = _log_probs(data, network, epsilon, candidates, prior)
        c = int(_select(logp, np.random.default_rng(rng)))
    else:
        check_rng(rng)
        q, r, d, tables, delta_u = _exact_law(data, network, epsilon, candidates, prior)
        c = int(sample_exponential_mechanism(q, r, d, size=1, rng=rng)[0])
    est = {v: t[c].copy() for v, t in tables.items()}
    for t in est.values():
        t.setflags(write=False)
    return PrivateMAP(network, MappingProxyType(est), c, float(epsilon), delta_u)
