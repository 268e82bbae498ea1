"""Laplace-perturbed posterior updates of a discrete Bayesian network (Zhang et al. 2016, Alg. 1).

A discrete Bayesian network (:class:`DiscreteBayesNet`) has nodes with finitely many states
and a parent list per node (a directed acyclic graph). With a Dirichlet prior on each node's
conditional distribution given each configuration of its parents, the posterior update from
``n`` records is the count table of every node: ``counts[i][j, k]``, the number of records
with parents of node ``i`` in configuration ``j`` and node ``i`` in state ``k`` (Zhang et al.,
Example 1 and Alg. 1 step 2, written for any number of states).

:func:`release_bayes_net_counts` computes all the tables, releases them once through a
mechanism calibrated to their sensitivity (Alg. 1 step 3), and returns a frozen
:class:`BayesNetCountsRelease` with :meth:`~BayesNetCountsRelease.projected` (step 4: clip to
``[0, n]``) and :meth:`~BayesNetCountsRelease.plugin_posterior` (Dirichlet parameters
``prior + projected counts``, the posterior Zhang et al. release).

Sensitivity (Zhang et al. Lemma 1). Neighbouring datasets are replace-one (``n`` public), as
everywhere in pymc_dp. Replacing one record changes, in each node's table, at most one cell
down by 1 and one cell up by 1 (the cell of the old record and the cell of the new one). So the
L1 change of all tables together is at most ``2|I|`` for ``|I|`` nodes, and the L2 change at
most ``sqrt(2|I|)``. Both are attained: every node has at least two states, so a record can be
replaced by one that differs at every node, which moves a unit in every table. The values are
exact, not bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.releases._families import _as_int_bound, _as_records, _integers, _sqrt_up
from pymc_dp.releases.sufficient import _calibrate, _readonly, release_values

__all__ = [
    "BayesNetCountsRelease",
    "DiscreteBayesNet",
    "bayes_net_count_tables",
    "release_bayes_net_counts",
]


def _check_acyclic(parents: dict[str, tuple[str, ...]]) -> None:
    """Kahn's algorithm; ``ValueError`` naming ``parents`` and the nodes on a cycle."""
    indegree = {v: len(p) for v, p in parents.items()}
    children: dict[str, list[str]] = {v: [] for v in parents}
    for v, ps in parents.items():
        for p in ps:
            children[p].append(v)
    ready = [v for v, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for c in children[v]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if seen != len(parents):
        cyc = sorted(v for v, d in indegree.items() if d > 0)
        raise ValueError(f"parents must describe an acyclic graph; a cycle runs through {cyc}")


#: largest total number of count-table cells a network may have (int64 tables of 0.8 GB)
MAX_CELLS = 10**8


class DiscreteBayesNet:
    """A discrete Bayesian network: nodes with finite numbers of states and parent lists.

    Parameters
    ----------
    states : mapping of str to int
        Number of states (an integer ``>= 2``) of each node, in node order (the order of the
        data's columns).
    parents : mapping of str to sequence of str, optional
        Parents of each node (missing nodes have none). Must name known nodes, without
        repeats or self-loops, and form an acyclic graph.

    Attributes
    ----------
    nodes : tuple of str
    cardinalities : tuple of int
    parents : dict of str to tuple of str

    Raises
    ------
    ValueError
        Naming ``states`` or ``parents``, when a node has fewer than two states, a parent is
        unknown or repeated, the graph has a cycle, or the count tables would hold more than
        ``MAX_CELLS = 10**8`` cells in all.

    Examples
    --------
    >>> net = DiscreteBayesNet({"y": 2, "x1": 3, "x2": 2}, {"x1": ["y"], "x2": ["y"]})
    >>> net.table_shape("x1"), net.sensitivity()[0]
    ((2, 3), 6.0)
    """

    def __init__(self, states: Mapping[str, int], parents: Mapping | None = None):
        if not isinstance(states, Mapping) or len(states) == 0:
            raise ValueError(
                f"states must be a non-empty mapping node -> number of states, got {states!r}"
            )
        self.nodes = tuple(str(v) for v in states)
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("states must name each node once")
        self.cardinalities = tuple(
            _as_int_bound(f"states[{v!r}]", k, 2)
            for v, k in zip(self.nodes, states.values(), strict=True)
        )
        self.parents = self._validated_parents({} if parents is None else parents)
        _check_acyclic(self.parents)
        cells = sum(math.prod(self.table_shape(v)) for v in self.nodes)  # exact (Python ints)
        if cells > MAX_CELLS:
            raise ValueError(
                f"states and parents give count tables of {cells:.3g} cells in all, more than "
                f"{MAX_CELLS:.0e} (the tables would not fit in memory): use fewer parents per "
                "node or fewer states"
            )

    def _validated_parents(self, parents) -> dict[str, tuple[str, ...]]:
        if not isinstance(parents, Mapping):
            raise ValueError(f"parents must be a mapping node -> list of parents, got {parents!r}")
        unknown = sorted(str(v) for v in parents if v not in self.nodes)
        if unknown:
            raise ValueError(f"parents names nodes not in states: {unknown}")
        out = {}
        for v in self.nodes:
            ps = parents.get(v, ())
            if isinstance(ps, str) or not isinstance(ps, Sequence):
                raise ValueError(f"parents[{v!r}] must be a list of node names, got {ps!r}")
            ps = tuple(ps)
            bad = [p for p in ps if p not in self.nodes]
            if bad:
                raise ValueError(f"parents[{v!r}] names unknown nodes {bad}")
            if len(set(ps)) != len(ps) or v in ps:
                raise ValueError(f"parents[{v!r}] must not repeat a parent or name {v!r} itself")
            out[v] = ps
        return out

    def table_shape(self, node: str) -> tuple[int, ...]:
        """``(*parent cardinalities, node cardinality)``, the shape of ``node``'s count table."""
        card = dict(zip(self.nodes, self.cardinalities, strict=True))
        return (*(card[p] for p in self.parents[node]), card[node])

    def sensitivity(self) -> tuple[float, float]:
        """``(2|I|, sqrt(2|I|))``: exact L1 and L2 replace-one sensitivity of all count tables
        together (Zhang et al. Lemma 1; the square root rounded up)."""
        m = 2 * len(self.nodes)
        return float(m), _sqrt_up(m)

    def __repr__(self) -> str:
        states = dict(zip(self.nodes, self.cardinalities, strict=True))
        parents = {v: list(p) for v, p in self.parents.items() if p}
        return f"DiscreteBayesNet({states!r}, {parents!r})"


def _records(data, network: DiscreteBayesNet) -> np.ndarray:
    """``(n, |I|)`` int64 records in node order, validated against the cardinalities."""
    if isinstance(data, Mapping):
        missing = [v for v in network.nodes if v not in data]
        if missing or len(data) != len(network.nodes):
            raise ValueError(f"data must give a column for exactly the nodes {network.nodes}")
        cols = [_as_records(data[v], f"data[{v!r}]") for v in network.nodes]
        if any(c.ndim != 1 for c in cols) or len({c.shape[0] for c in cols}) != 1:
            raise ValueError("data columns must be 1-D and of equal length")
        data = np.stack(cols, axis=1)
    arr = _as_records(data)
    if arr.ndim != 2 or arr.shape[1] != len(network.nodes):
        raise ValueError(
            f"data must have shape (n, {len(network.nodes)}) (one column per node), got {arr.shape}"
        )
    arr = _integers(arr, "data")
    card = np.asarray(network.cardinalities, dtype=np.int64)
    if np.any((arr < 0) | (arr >= card)):
        raise ValueError(
            f"data column j must lie in 0..states_j - 1, states {network.cardinalities}"
        )
    return arr


def bayes_net_count_tables(data, network: DiscreteBayesNet) -> dict[str, np.ndarray]:
    """The count table of every node given each configuration of its parents.

    Parameters
    ----------
    data : array_like of shape (n, n_nodes) or mapping of node name to 1-D array
        Integer records, column ``j`` (or ``data[node]``) in ``0 .. states - 1``.
    network : DiscreteBayesNet

    Returns
    -------
    dict of str to numpy.ndarray
        ``tables[v][j1, ..., jk, s]``: the number of records with ``v``'s parents in states
        ``j1, ..., jk`` (in ``network.parents[v]`` order) and ``v`` in state ``s`` (int64).

    Examples
    --------
    >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
    >>> t = bayes_net_count_tables([[0, 1], [0, 1], [1, 0]], net)
    >>> t["a"].tolist(), t["b"].tolist()
    ([2, 1], [[0, 2], [1, 0]])
    """
    if not isinstance(network, DiscreteBayesNet):
        raise TypeError(f"network must be a DiscreteBayesNet, got {network!r}")
    x = _records(data, network)
    col = {v: j for j, v in enumerate(network.nodes)}
    tables = {}
    for v in network.nodes:  # one vectorised bincount per node
        shape = network.table_shape(v)
        idx = np.ravel_multi_index(tuple(x[:, col[u]] for u in (*network.parents[v], v)), shape)
        tables[v] = np.bincount(idx, minlength=int(np.prod(shape))).reshape(shape)
    return tables


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class BayesNetCountsRelease:
    """Noisy count tables of a discrete Bayesian network (Zhang et al. 2016, Alg. 1).

    Attributes
    ----------
    network : DiscreteBayesNet
    tables : mapping of str to numpy.ndarray
        The released (noisy) tables (a read-only mapping of read-only arrays), shapes
        ``network.table_shape(v)``.
    mechanism : Mechanism
        The mechanism that added the noise (one release of all tables together).
    n : int
        Number of records (public under replace-one neighbours).
    sensitivity : tuple of float
        ``(2|I|, sqrt(2|I|))``, L1 and L2 (Lemma 1).
    projection : tuple or None
        ``(0, n)`` when the data holder published the noisy tables clipped to ``[0, n]``
        (Alg. 1 step 4, ``project=True``), else ``None``. :meth:`model` then conditions on
        the clipped tables exactly (a censored :class:`pymc_dp.Release`).

    Examples
    --------
    Two binary nodes (``|I| = 2``), so the sensitivity is ``(4, 2)``; the geometric mechanism is
    calibrated to it, and ``project=True`` clips the noisy tables to ``[0, n]``.

    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import (BayesNetCountsRelease, DiscreteBayesNet,
    ...     release_bayes_net_counts)
    >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
    >>> rel = release_bayes_net_counts([[0, 1], [0, 1], [1, 0]], net,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=1.0),
    ...     rng=np.random.default_rng(0), project=True)
    >>> isinstance(rel, BayesNetCountsRelease), rel.n, rel.sensitivity, rel.projection
    (True, 3, (4.0, 2.0), (0, 3))
    >>> rel.mechanism, rel.tables["b"].shape
    (Geometric(epsilon=1, sensitivity=4), (2, 2))
    >>> bool(all(((t >= 0) & (t <= 3)).all() for t in rel.tables.values()))
    True
    >>> sorted(v.name for v in rel.model().free_RVs)
    ['theta_a', 'theta_b', 'x_a', 'x_b']
    """

    network: DiscreteBayesNet
    tables: Mapping
    mechanism: Mechanism
    n: int
    sensitivity: tuple[float, float]
    projection: tuple | None = field(default=None)

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee per individual with one record: ``mechanism.guarantee()`` at
        its declared sensitivity, at least the tables', so never under-counted."""
        return self.mechanism.guarantee()

    def projected(self) -> dict[str, np.ndarray]:
        """The noisy tables clipped to ``[0, n]`` (Zhang et al. Alg. 1, step 4), as float64."""
        n = float(self.n)
        return {v: np.clip(np.asarray(t, dtype=np.float64), 0.0, n) for v, t in self.tables.items()}

    def plugin_posterior(self, prior=1.0) -> dict[str, np.ndarray]:
        """Dirichlet parameters per node and parent configuration: prior + projected counts.

        Parameters
        ----------
        prior : float or mapping of str to array_like, default 1.0
            Dirichlet concentrations: one positive number for every cell, or per node an
            array broadcastable to ``network.table_shape(node)`` (all nodes named).

        Returns
        -------
        dict of str to numpy.ndarray
            ``alpha[v][j1, ..., jk, :]``: the Dirichlet parameters of ``P(v | parents = j)``.
            For two-state nodes these are Zhang et al.'s Beta parameters ``(alpha + Z1,
            beta + Z2)``.

        Examples
        --------
        >>> import numpy as np, pymc_dp as pmdp
        >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
        >>> rel = release_bayes_net_counts([[0, 1], [0, 1], [1, 0]], net,
        ...     mechanism=pmdp.Laplace(scale=1e-9, sensitivity=4.0), rng=np.random.default_rng(0),
        ...     allow_float=True)
        >>> np.round(rel.plugin_posterior(0.5)["b"], 6).tolist()
        [[0.5, 2.5], [1.5, 0.5]]
        """
        proj = self.projected()
        if not isinstance(prior, Mapping):
            prior = dict.fromkeys(self.network.nodes, prior)
        elif set(prior) != set(self.network.nodes):
            raise ValueError(f"prior must name exactly the nodes {self.network.nodes}")
        out = {}
        for v, t in proj.items():
            a = np.asarray(prior[v], dtype=np.float64)
            if not (np.all(np.isfinite(a)) and np.all(a > 0)):
                raise ValueError(f"prior for {v!r} must be finite and > 0, got {prior[v]!r}")
            try:
                out[v] = np.broadcast_to(a, t.shape) + t
            except ValueError:
                raise ValueError(f"prior for {v!r} must broadcast to shape {t.shape}") from None
        return out

    def model(self, prior=1.0, *, name: str = "release"):
        """The noise-aware PyMC model of this release: CPTs, latent records and the release.

        For every node ``v``: ``theta_<v>``, a Dirichlet per parent configuration (shape
        ``(J_v, K_v)``, rows in the C order of the table's parent axes; ``(K_v,)`` for a root);
        ``x_<v>``, the ``n`` latent states of ``v``, ``Categorical(theta_<v>[j])`` with ``j``
        each record's parent configuration. Then one ``pmdp.Release(name, T(x), mechanism,
        observed=...)`` of all count tables, flattened and concatenated in node order, with
        ``T`` computed from the records as :func:`bayes_net_count_tables` does and the
        release's own mechanism (so :func:`pymc_dp.privacy_report` gives :meth:`guarantee`).

        Which step samples it. For a naive-Bayes network (one root, every other node with the
        root as its only parent, as in Zhang et al.'s classifier) the model is registered with
        :class:`~pymc_dp.step_methods.collapsed_bn.CollapsedNaiveBayes`, which ``pm.sample``
        assigns all CPTs and records: every iteration is an exact, independent draw from the
        posterior (the class counts from their marginal posterior, a finite sum, then the
        tables, CPTs and records given them), so ESS is about the number of draws. For any other
        network, or a naive-Bayes model changed after it was built, ``pm.sample`` picks the
        data-augmentation step for the records (one block: each record is redrawn whole) and
        conjugate Gibbs for the ``theta``; these mix slowly when the release barely informs the
        records (check ``az.summary``).

        The model conditions on :attr:`tables` as published: the raw noisy tables, or for a
        release published projected (:attr:`projection` ``(0, n)``, Alg. 1 step 4) the
        clipped tables, as a censored release (``Release(..., lower=0, upper=n)``: a clipped
        cell contributes the noise's tail probability beyond the clip point). For Laplace
        noise both give the same posterior; for Gaussian and discrete noise they differ.

        Parameters
        ----------
        prior : float or mapping of str to array_like, default 1.0
            Dirichlet concentrations, as in :meth:`plugin_posterior`.
        name : str, default "release"
            Name of the Release variable.

        Returns
        -------
        pymc.Model

        Examples
        --------
        >>> import functools, numpy as np, pymc_dp as pmdp
        >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
        >>> rel = release_bayes_net_counts([[0, 1], [0, 1], [1, 0]], net,
        ...     mechanism=functools.partial(pmdp.Laplace, epsilon=1.0),
        ...     rng=np.random.default_rng(0), allow_float=True)
        >>> m = rel.model()
        >>> sorted(v.name for v in m.free_RVs)
        ['theta_a', 'theta_b', 'x_a', 'x_b']
        >>> pmdp.privacy_report(m).total.epsilon
        1.0
        """
        from pymc_dp.releases._bn_model import build_bn_model

        return build_bn_model(self, prior, name)


def release_bayes_net_counts(
    data, network, *, mechanism, rng=None, project: bool = False, allow_float: bool = False
) -> BayesNetCountsRelease:
    """Release the count tables of a discrete Bayesian network once (Zhang et al. 2016, Alg. 1).

    Parameters
    ----------
    data : array_like of shape (n, n_nodes) or mapping of node name to 1-D array
        Integer records as for :func:`bayes_net_count_tables`.
    network : DiscreteBayesNet
    mechanism : Mechanism or callable
        A mechanism whose declared sensitivity is at least the tables' (``2|I|`` in L1 for
        Laplace and Geometric, ``sqrt(2|I|)`` in L2 for the Gaussians), or a callable
        ``sensitivity -> Mechanism`` such as ``functools.partial(pmdp.Laplace, epsilon=1.0)``,
        calibrated here with the exact sensitivity. Zhang et al. use Laplace.
    rng : numpy.random.Generator, optional
        For simulations; ``None`` draws the noise from the operating system's secure source.
    project : bool, default False
        Publish the noisy tables clipped to ``[0, n]`` (Alg. 1 step 4, what Zhang et al.
        output) instead of the raw noisy tables. Post-processing: the privacy guarantee is
        unchanged. The release remembers it (:attr:`~BayesNetCountsRelease.projection`), and
        ``model()`` conditions on the clipped tables exactly (censored likelihood).

    allow_float : bool, default False
        Opt in to a floating-point mechanism (Laplace, as Zhang et al.; Gaussian): its
        low-order bits leak the data (Mironov 2012), so without the opt-in it raises
        ``ValueError``. The exact default: ``functools.partial(pmdp.Geometric, epsilon=...)``.

    Returns
    -------
    BayesNetCountsRelease

    Raises
    ------
    ValueError
        Invalid data, or a mechanism whose declared sensitivity is below the tables'.

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    >>> rel = release_bayes_net_counts(
    ...     np.array([[0, 1], [1, 1], [1, 0]]), net,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=0.5), rng=np.random.default_rng(1))
    >>> rel.mechanism.sensitivity, rel.guarantee().epsilon, rel.tables["x"].dtype
    (4, 0.5, dtype('int64'))
    """
    if not isinstance(project, bool):
        raise ValueError(f"project must be True or False, got {project!r}")
    true = bayes_net_count_tables(data, network)
    sens = network.sensitivity()
    mech = _calibrate(mechanism, sens, integer_stat=True)
    flat = np.concatenate([t.ravel() for t in true.values()])
    noisy = release_values(mech, flat, rng, allow_float, "release_bayes_net_counts")
    n = int(next(iter(true.values())).sum())
    if project:  # clip in the released dtype (integers stay integers)
        noisy = np.clip(noisy, 0, n)
    tables, start = {}, 0
    for v, t in true.items():
        tables[v] = _readonly(noisy[start : start + t.size].reshape(t.shape))
        start += t.size
    return BayesNetCountsRelease(
        network=network,
        tables=MappingProxyType(tables),
        mechanism=mech,
        n=n,
        sensitivity=sens,
        projection=(0, n) if project else None,
    )
