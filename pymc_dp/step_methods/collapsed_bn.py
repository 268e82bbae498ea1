r"""Exact independent draws for the noise-aware model of a naive-Bayes-network count release.

:meth:`pymc_dp.releases.bayes_net.BayesNetCountsRelease.model` builds, for a network whose
nodes are one root ``y`` and leaves whose only parent is ``y`` (Zhang et al.'s naive Bayes),
Dirichlet CPTs ``theta_<v>``, latent records ``x_<v>`` and one :class:`~pymc_dp.Release` of all
the count tables. It registers such a model here (:func:`register_naive_bayes`, with a
:class:`NaiveBayesPlan`: names, variables, the release, its mechanism and censoring bounds);
:class:`CollapsedNaiveBayes` then claims all its free variables and draws them **jointly and
independently each iteration** from the exact posterior: the class counts from their marginal
posterior (records and CPTs integrated out, a finite sum), ``theta_y`` and every leaf table and
row given them, then records with those tables (:mod:`pymc_dp.kernels.collapsed_bn` has the
derivation). Every cell's log-likelihood is the one the model's Release uses: the noise
log-density, or for a projected (clipped) release the tail probability of a cell at a bound
(:func:`cell_loglik`).

Where the default data augmentation (records one by one) and conjugate Gibbs (CPTs given the
records) mix slowly because the release barely informs the records (Zhang's setting: ESS
15-55 per 1000 draws at epsilon 1), these draws are independent: ESS about the number of draws.

Refused (``competence`` INCOMPATIBLE, so the model keeps DataAugmentation and ConjugateGibbs;
``ValueError`` when given explicitly): a model that was not registered (any network that is not
naive Bayes: a node with two parents, a chain of depth two), a registered model that was changed
afterwards (other free or observed variables, a Potential), a censored release whose mechanism
lacks tail probabilities, and enumerations above :data:`MAX_ROOT_COMPOSITIONS` class-count
vectors or :data:`MAX_LEAF_COMPOSITIONS` leaf tables (:func:`~pymc_dp.kernels.collapsed_bn.
enumeration_sizes`; binary nodes need ``n + 1`` and ``2 (n + 1)(n + 2) / 2`` per leaf).

Sampler statistic: ``cnb_frac_changed``, the fraction of record entries whose value changed.

Examples
--------
>>> import functools, numpy as np, pymc as pm, pymc_dp as pmdp
>>> from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
>>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
>>> rel = release_bayes_net_counts(np.array([[0, 1], [1, 1], [1, 0]]), net,
...     mechanism=functools.partial(pmdp.Laplace, epsilon=1.0), rng=np.random.default_rng(1),
...     allow_float=True)
>>> model = rel.model()
>>> step = CollapsedNaiveBayes(model.free_RVs, model=model, rng=1)
>>> point, [stats] = step.step(model.initial_point())
>>> sorted(point), point["x_y"].shape
(['theta_x_simplex__', 'theta_y_simplex__', 'x_x', 'x_y'], (3,))
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.kernels.collapsed_bn import NaiveBayesPosterior, arrange_records, enumeration_sizes
from pymc_dp.step_methods.conjugate_pairs import FORWARD

__all__ = [
    "MAX_LEAF_COMPOSITIONS",
    "MAX_ROOT_COMPOSITIONS",
    "CollapsedNaiveBayes",
    "NaiveBayesPlan",
    "cell_loglik",
    "naive_bayes_plan",
    "register_naive_bayes",
]

#: most class-count vectors (compositions of ``n`` into ``K_y`` parts) enumerated
MAX_ROOT_COMPOSITIONS = 2_000_000
#: most leaf tables (all compositions of every ``c <= n``, summed over leaves and rows)
MAX_LEAF_COMPOSITIONS = 20_000_000

# model -> NaiveBayesPlan (weak keys: the registry never keeps a model alive)
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class NaiveBayesPlan:
    """What :class:`CollapsedNaiveBayes` needs of a naive-Bayes release model.

    Attributes
    ----------
    root : str
        The root node ``y``.
    leaves : tuple of str
        The other nodes, each with ``root`` as its only parent.
    states : dict of str to int
        Number of states of every node.
    nodes : tuple of str
        Node order of the release's concatenated tables.
    theta, records : dict of str to TensorVariable
        ``theta_<v>`` (root ``(K_y,)``, leaf ``(K_y, K_v)``) and ``x_<v>`` (``(n,)``) RVs.
    alpha : dict of str to numpy.ndarray
        Dirichlet concentrations, shaped like ``theta``.
    release : TensorVariable
        The observed Release of all tables (flattened, concatenated in ``nodes`` order).
    observed : numpy.ndarray
        Its observed values.
    mechanism : Mechanism
    n : int
        Number of records.

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
    >>> net = DiscreteBayesNet({"y": 2, "x": 3}, {"x": ["y"]})
    >>> rel = release_bayes_net_counts(np.array([[0, 1], [1, 2]]), net,
    ...     mechanism=functools.partial(pmdp.Laplace, epsilon=1.0),
    ...     rng=np.random.default_rng(1), allow_float=True)
    >>> plan = naive_bayes_plan(rel.model()["theta_x"])[1]
    >>> plan.root, plan.leaves, plan.alpha["x"].shape
    ('y', ('x',), (2, 3))
    """

    root: str
    leaves: tuple
    states: dict
    nodes: tuple
    theta: dict
    records: dict
    alpha: dict
    release: object
    observed: np.ndarray
    mechanism: object
    n: int

    @property
    def variables(self) -> list:
        """The free RVs of the model: every ``theta_<v>`` and ``x_<v>``."""
        return [*self.theta.values(), *self.records.values()]

    def table(self, values, node: str) -> np.ndarray:
        """``node``'s cells of an array whose first axis is the release's concatenated layout,
        table-shaped (trailing axes kept)."""
        start = 0
        for v in self.nodes:
            size = self._size(v)
            if v == node:
                values = np.asarray(values)
                shape = (self.states[v],) if v == self.root else (self.states[self.root], -1)
                return values[start : start + size].reshape(shape + values.shape[1:])
            start += size
        raise KeyError(node)

    def _size(self, v) -> int:
        return self.states[v] * (1 if v == self.root else self.states[self.root])


def register_naive_bayes(model, plan: NaiveBayesPlan) -> None:
    """Record that ``model`` is the naive-Bayes release model described by ``plan``.

    Called by :func:`pymc_dp.releases._bn_model.build_bn_model` for naive-Bayes networks only.

    Examples
    --------
    ``BayesNetCountsRelease.model()`` registers its model; registering the plan under a copy of
    the model's graph would not make the copy claimable unless its variables are the plan's.

    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
    >>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    >>> rel = release_bayes_net_counts(np.array([[0, 1], [1, 0]]), net,
    ...     mechanism=functools.partial(pmdp.Laplace, epsilon=1.0),
    ...     rng=np.random.default_rng(1), allow_float=True)
    >>> model = rel.model()
    >>> found, plan = naive_bayes_plan(model["x_y"])
    >>> found is model, plan.root
    (True, 'y')
    >>> register_naive_bayes(model, plan)  # idempotent
    >>> naive_bayes_plan(model["theta_x"])[0] is model
    True
    """
    _PLANS[model] = plan


def _intact(model, plan: NaiveBayesPlan) -> bool:
    """The model still is the registered one: the same free and observed variables, no
    Potential (anything added could read the records or the CPTs)."""
    free = model.free_RVs
    ours = plan.variables
    return (
        len(free) == len(ours)
        and all(any(v is w for w in ours) for v in free)
        and len(model.observed_RVs) == 1
        and model.observed_RVs[0] is plan.release
        and not model.potentials
    )


def naive_bayes_plan(var):
    """``(model, plan)`` of a registered, unchanged naive-Bayes release model that has the RV
    ``var`` among its free variables, else None.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model():
    ...     p = pm.Beta("p", 1.0, 1.0)
    >>> naive_bayes_plan(p) is None
    True
    """
    for model, plan in list(_PLANS.items()):
        if any(var is v for v in plan.variables) and _intact(model, plan):
            return model, plan
    return None


def _refusal(plan: NaiveBayesPlan) -> str | None:
    """Why the step cannot sample ``plan`` (None when it can)."""
    leaves = [plan.states[v] for v in plan.leaves]
    root, tables = enumeration_sizes(plan.n, plan.states[plan.root], leaves)
    if root > MAX_ROOT_COMPOSITIONS:
        return f"{root} class-count vectors exceed MAX_ROOT_COMPOSITIONS={MAX_ROOT_COMPOSITIONS}"
    if tables > MAX_LEAF_COMPOSITIONS:
        return f"{tables} leaf tables exceed MAX_LEAF_COMPOSITIONS={MAX_LEAF_COMPOSITIONS}"
    lower, upper = _bounds(plan)
    if lower is not None or upper is not None:
        try:
            plan.mechanism.check_tails(plan.release.name)
        except NotImplementedError as err:
            return str(err)
    return None


def _bounds(plan: NaiveBayesPlan):
    op = plan.release.owner.op
    size = plan.observed.size
    return tuple(None if b is None else np.broadcast_to(b, (size,)) for b in (op.lower, op.upper))


def cell_loglik(mechanism, observed, n: int, lower=None, upper=None) -> np.ndarray:
    """Log-likelihood of every released cell at every true count ``t = 0..n``.

    As the model's Release: ``mechanism.logpdf(z - t)``; where ``z == lower``,
    ``log P(noise <= lower - t)``; where ``z == upper``, ``log P(noise >= upper - t)``; ``-inf``
    outside ``[lower, upper]``.

    Returns
    -------
    numpy.ndarray
        Shape ``(cells, n + 1)``.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> lp = cell_loglik(Laplace(scale=1.0), np.array([0.0, 1.5]), 2, lower=0.0)
    >>> bool(np.allclose(lp[1], -np.abs(1.5 - np.arange(3)) - np.log(2.0)))
    True
    >>> bool(np.allclose(lp[0], Laplace(scale=1.0).logcdf(-np.arange(3.0))))
    True
    """
    z = np.asarray(observed, dtype=np.float64).ravel()
    resid = z[:, None] - np.arange(int(n) + 1, dtype=np.float64)[None, :]
    lp = np.asarray(mechanism.logpdf(resid), dtype=np.float64)
    if lower is not None:
        lo = np.broadcast_to(np.asarray(lower, np.float64), z.shape)[:, None]
        at = np.broadcast_to(z[:, None] == lo, lp.shape)
        if at.any():
            lp = np.where(at, np.asarray(mechanism.logcdf(resid), np.float64), lp)
        lp = np.where(z[:, None] < lo, -np.inf, lp)
    if upper is not None:
        hi = np.broadcast_to(np.asarray(upper, np.float64), z.shape)[:, None]
        at = np.broadcast_to(z[:, None] == hi, lp.shape)
        if at.any():
            lp = np.where(at, np.asarray(mechanism.logsf(resid), np.float64), lp)
        lp = np.where(z[:, None] > hi, -np.inf, lp)
    return lp


def _posterior(plan: NaiveBayesPlan) -> NaiveBayesPosterior:
    """The kernel of ``plan``: priors and every cell's log-likelihood table."""
    lower, upper = _bounds(plan)
    eta = cell_loglik(plan.mechanism, plan.observed, plan.n, lower, upper)
    ky = plan.states[plan.root]
    return NaiveBayesPosterior(
        plan.n,
        plan.alpha[plan.root],
        plan.table(eta, plan.root),
        [plan.alpha[v] for v in plan.leaves],
        [plan.table(eta, v).reshape(ky, plan.states[v], plan.n + 1) for v in plan.leaves],
    )


class CollapsedNaiveBayes(ForgetsInitialPoint, BlockedStep):
    """Exact independent posterior draws of a naive-Bayes-network release model (all its CPTs
    and latent records at once).

    Parameters
    ----------
    vars : list of model variables
        All the free variables of a model built by
        :meth:`~pymc_dp.releases.bayes_net.BayesNetCountsRelease.model` for a naive-Bayes
        network (every ``theta_<v>`` and ``x_<v>``).
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    initial_point, compile_kwargs, blocked
        Accepted for PyMC's step assignment (not used).

    Raises
    ------
    ValueError
        If the model is not a registered, unchanged naive-Bayes release model, if ``vars`` is
        not all its free variables, or if the enumeration is refused (module docstring).

    Examples
    --------
    >>> import functools, numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
    >>> net = DiscreteBayesNet({"y": 2, "a": 2, "b": 3}, {"a": ["y"], "b": ["y"]})
    >>> data = np.array([[0, 1, 2], [1, 1, 0], [1, 0, 1], [0, 0, 0]])
    >>> rel = release_bayes_net_counts(data, net,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=2.0), rng=np.random.default_rng(3))
    >>> with rel.model() as model:
    ...     idata = pm.sample(draws=50, tune=10, chains=1, random_seed=1, progressbar=False,
    ...                       step=[CollapsedNaiveBayes(model.free_RVs)],
    ...                       compute_convergence_checks=False)
    >>> idata.posterior["theta_b"].shape, sorted(idata.posterior.data_vars)
    ((1, 50, 2, 3), ['theta_a', 'theta_b', 'theta_y'])
    """

    name = "collapsed_naive_bayes"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {"cnb_frac_changed": (np.float64, [])}

    def __init__(
        self, vars, *, model=None, blocked=True, rng=None, initial_point=None, compile_kwargs=None
    ):
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        plan = _PLANS.get(model)
        if plan is None or not _intact(model, plan):
            raise ValueError(
                "CollapsedNaiveBayes samples only the model of a naive-Bayes network's count "
                "release as BayesNetCountsRelease.model() builds it (one root, every other node "
                "with the root as its only parent), unchanged after it was built"
            )
        reason = _refusal(plan)
        if reason is not None:
            raise ValueError(f"CollapsedNaiveBayes refuses this model: {reason}")
        want = {model.rvs_to_values[v].name for v in plan.variables}
        got = {v.name for v in self.vars}
        if got != want:
            raise ValueError(
                f"CollapsedNaiveBayes draws all of {sorted(want)} jointly; got {sorted(got)} "
                "(a subset would not be conditioned on the others)"
            )
        self._plan = plan
        self._kernel = _posterior(plan)
        self._names = {v: model.rvs_to_values[rv].name for v, rv in plan.records.items()}
        self._theta = {}
        for v, rv in plan.theta.items():
            tf = model.rvs_to_transforms.get(rv)
            fwd = None if tf is None else FORWARD[type(tf)]
            self._theta[v] = (model.rvs_to_values[rv].name, fwd)

    def step(self, point):
        """One independent exact draw of every CPT and record; the incoming point's arrays
        are not written to."""
        plan = self._plan
        d = self._kernel.draw(self.rng)
        y, xs = arrange_records(d.counts, d.tables, self.rng)
        records = {plan.root: y, **dict(zip(plan.leaves, xs, strict=True))}
        thetas = {plan.root: d.theta_root, **dict(zip(plan.leaves, d.thetas, strict=True))}
        new_point = dict(point)
        changed = total = 0
        for v, name in self._names.items():
            old = np.asarray(point[name])
            changed += int(np.count_nonzero(records[v] != old))
            total += old.size
            new_point[name] = records[v].astype(old.dtype, copy=False)
        for v, (name, fwd) in self._theta.items():
            value = thetas[v] if fwd is None else fwd(thetas[v])
            new_point[name] = np.asarray(value, dtype=np.asarray(point[name]).dtype)
        return new_point, [{"cnb_frac_changed": float(changed / max(total, 1))}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for the free variables of a registered, unchanged naive-Bayes release model
        that the step can enumerate (module docstring), else INCOMPATIBLE."""
        found = naive_bayes_plan(var)
        if found is None or _refusal(found[1]) is not None:
            return Competence.INCOMPATIBLE
        return Competence.IDEAL
