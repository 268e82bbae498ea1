"""The noise-aware PyMC model of a Bayesian-network count release (Zhang et al. 2016, Alg. 1).

Built by :meth:`pymc_dp.releases.bayes_net.BayesNetCountsRelease.model`. For every node ``v``
(in a topological order, parents first):

* ``theta_<v>``: a ``Dirichlet`` per parent configuration, shape ``(J_v, K_v)`` with ``J_v``
  the number of parent configurations (row ``j`` is the configuration whose index is
  ``numpy.ravel_multi_index`` of the parents' states, the order of the count table's leading
  axes) or shape ``(K_v,)`` for a root;
* ``x_<v>``: the latent states of ``v`` in the ``n`` records, ``Categorical(theta_<v>[j_i])``
  with ``j_i`` the configuration of record ``i``'s parents (an index into the rows, as in a
  naive Bayes model's ``theta[y]``).

The statistic is computed from the records exactly as :func:`bayes_net_count_tables` computes
the tables, one-hot summed so that each record's contribution is its own row: for node ``v`` the
cell index ``j_i K_v + x_i`` (the C-order flat index of the table) compared with
``arange(J_v K_v)`` and summed over records. The tables are released together, by one call of one
mechanism (Alg. 1, step 3), so the model holds **one** ``Release`` of all the flattened tables
concatenated in node order, with the release's own mechanism: :func:`pymc_dp.privacy_report` of
the model is then the release's guarantee. (One ``Release`` per table with the same mechanism
would be counted ``|I|`` times.)

The model conditions on the tables as published: the raw noisy tables, or for a release
published projected (``release_bayes_net_counts(..., project=True)``, what Alg. 1 outputs: the
tables clipped to ``[0, n]``, step 4) a censored release (``Release(..., lower=0, upper=n)``):
a cell at 0 contributes ``log P(noise <= -T)``, a cell at ``n`` ``log P(noise >= n - T)``, the
others the noise density. For Laplace noise and counts ``T`` in ``[0, n]`` both give the same
posterior (the Laplace tail beyond the clip point is proportional to the density at it, with a
factor free of ``T``), so clipping loses nothing; for Gaussian and discrete mechanisms they
differ.

A naive-Bayes network (one root, every other node with the root as its only parent:
:func:`naive_bayes_root`) has its model registered with
:func:`pymc_dp.step_methods.collapsed_bn.register_naive_bayes`, so that
:class:`~pymc_dp.step_methods.collapsed_bn.CollapsedNaiveBayes` claims all its free variables
(exact independent posterior draws); other networks keep data augmentation and conjugate Gibbs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.distributions.release import Release
from pymc_dp.step_methods.collapsed_bn import NaiveBayesPlan, register_naive_bayes

__all__ = ["build_bn_model", "naive_bayes_root", "topological_order"]


def topological_order(network) -> tuple[str, ...]:
    """The nodes of ``network`` with every parent before its children (ties in node order).

    Examples
    --------
    >>> from pymc_dp.releases.bayes_net import DiscreteBayesNet
    >>> topological_order(DiscreteBayesNet({"b": 2, "a": 2}, {"b": ["a"]}))
    ('a', 'b')
    """
    done: list[str] = []
    todo = list(network.nodes)
    while todo:  # the graph was checked acyclic: every pass places at least one node
        ready = [v for v in todo if all(p in done for p in network.parents[v])]
        done.extend(ready)
        todo = [v for v in todo if v not in ready]
    return tuple(done)


def naive_bayes_root(network) -> str | None:
    """The root of a naive-Bayes network (one root, every other node with the root as its
    only parent), else None.

    Examples
    --------
    >>> from pymc_dp.releases.bayes_net import DiscreteBayesNet
    >>> naive_bayes_root(DiscreteBayesNet({"y": 2, "a": 2, "b": 3}, {"a": ["y"], "b": ["y"]}))
    'y'
    >>> naive_bayes_root(DiscreteBayesNet({"a": 2, "b": 2, "c": 2}, {"b": ["a"], "c": ["b"]}))
    """
    roots = [v for v in network.nodes if not network.parents[v]]
    if len(roots) != 1:
        return None
    root = roots[0]
    if all(network.parents[v] == (root,) for v in network.nodes if v != root):
        return root
    return None


def _register_naive_bayes(model, rel, alpha, observed, release) -> None:
    """Register ``model`` for :class:`~pymc_dp.step_methods.collapsed_bn.CollapsedNaiveBayes`
    when the network is naive Bayes (the step then samples it exactly)."""
    net = rel.network
    root = naive_bayes_root(net)
    if root is None:
        return
    states = dict(zip(net.nodes, net.cardinalities, strict=True))
    plan = NaiveBayesPlan(
        root=root,
        leaves=tuple(v for v in net.nodes if v != root),
        states=states,
        nodes=tuple(net.nodes),
        theta={v: model[f"theta_{v}"] for v in net.nodes},
        records={v: model[f"x_{v}"] for v in net.nodes},
        alpha={v: alpha[v].reshape(states[v]) if v == root else alpha[v] for v in net.nodes},
        release=release,
        observed=observed.copy(),
        mechanism=rel.mechanism,
        n=int(rel.n),
    )
    register_naive_bayes(model, plan)


def _priors(rel, prior) -> dict[str, np.ndarray]:
    """Dirichlet concentrations per node, of the table's shape (validated as in
    :meth:`BayesNetCountsRelease.plugin_posterior`)."""
    rel.plugin_posterior(prior)  # raises ValueError naming prior when it is invalid
    net = rel.network
    if not isinstance(prior, Mapping):
        prior = dict.fromkeys(net.nodes, prior)
    return {
        v: np.broadcast_to(np.asarray(prior[v], dtype=np.float64), net.table_shape(v)).copy()
        for v in net.nodes
    }


def _config_index(network, v, records):
    """Flat parent-configuration index of every record (an int64 vector), or None for a root."""
    card = dict(zip(network.nodes, network.cardinalities, strict=True))
    idx = None
    for p in network.parents[v]:
        idx = records[p] if idx is None else idx * np.int64(card[p]) + records[p]
    return idx


def _node(network, v, alpha, records, n):
    """Add ``theta_<v>`` and ``x_<v>`` to the model in context; return ``v``'s one-hot counts."""
    k = network.cardinalities[network.nodes.index(v)]
    j = _config_index(network, v, records)
    if j is None:
        theta = pm.Dirichlet(f"theta_{v}", a=alpha)
        records[v] = pm.Categorical(f"x_{v}", p=theta, shape=n)
        cell = records[v]
        size = k
    else:
        rows = alpha.reshape(-1, k)
        theta = pm.Dirichlet(f"theta_{v}", a=rows)
        records[v] = pm.Categorical(f"x_{v}", p=theta[j], shape=n)
        cell = j * np.int64(k) + records[v]
        size = rows.size
    return pt.eq(cell[:, None], pt.arange(size)[None, :]).astype("int64").sum(axis=0)


def build_bn_model(rel, prior=1.0, name: str = "release") -> pm.Model:
    """The model of :meth:`BayesNetCountsRelease.model` (see the module docstring)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    alpha = _priors(rel, prior)
    net = rel.network
    taken = {f"theta_{v}" for v in net.nodes} | {f"x_{v}" for v in net.nodes}
    if name in taken:
        raise ValueError(f"name {name!r} clashes with a model variable; pick another")
    observed = np.concatenate([np.asarray(rel.tables[v]).ravel() for v in net.nodes])
    observed = observed.astype(np.int64 if rel.mechanism.integer else np.float64)
    proj = rel.projection
    bounds = {} if proj is None else {"lower": proj[0], "upper": proj[1]}
    with pm.Model() as model:
        records: dict = {}
        counts = {v: _node(net, v, alpha[v], records, rel.n) for v in topological_order(net)}
        stat = pt.concatenate([counts[v] for v in net.nodes])
        release = Release(name, stat, rel.mechanism, observed=observed, **bounds)
    _register_naive_bayes(model, rel, alpha, observed, release)
    return model
