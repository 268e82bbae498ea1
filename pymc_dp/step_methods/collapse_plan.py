r"""When the records behind a ``Release`` can be collapsed into their statistic (issue 12).

Records ``x_1, ..., x_N`` that are exchangeable given their parameters, and whose released
statistic is an affine function of their sum (or of their category counts), never need to be
visited one by one: the sum has an exact law given the parameters,

=====================  ==============================  ========================================
records                sum / counts                    records given the sum (free of theta)
=====================  ==============================  ========================================
``Bernoulli(p)``       ``S ~ Binomial(N, p)``          uniform over 0/1 vectors with sum ``S``
``Categorical(p)``     ``c ~ Multinomial(N, p)``       uniform over arrangements with counts ``c``
``Poisson(mu)``        ``S ~ Poisson(N mu)``           ``Multinomial(S, uniform)``
``Normal(mu, sigma)``  ``S ~ N(N mu, N sigma^2)``      ``N(S/N, sigma^2 (I - 11'/N))``
=====================  ==============================  ========================================

and the release ``z = C + M c + noise`` (``c`` the counts; ``a + b S`` for a sum) confines the
conditional of the statistic to a narrow window. :class:`CollapsePlan` is what a step needs to use
that: the records' family and size, the compiled graphs of their parameters, and the affine map
from the counts to the released statistic, found numerically on the statistic's own graph.

Conditions (all checked; any failure means "not collapsible", and the records are sampled by
:class:`~pymc_dp.step_methods.DataAugmentation` instead):

* the records are one free 1-D variable of one of the four families above, untransformed, with
  parameters that broadcast along the record axis (a scalar ``p``, a ``(K,)`` probability
  vector), a Normal ``sigma`` that depends on no free variable;
* no free variable, ``pm.Potential`` or observed variable other than a ``Release`` reads them
  (Deterministics may: the records stay a valid draw, see the step);
* every Release reading them reads only such record variables (several of them are the cells of
  a table: each cell is drawn given the others), and its statistic is ``C + sum_j M_j c_j``
  over the cells' counts (categorical records) or sums (Poisson, Normal) **exactly**: checked
  at records that differ in one place and at random records (a weighted sum, a clamped Poisson
  sum, a maximum all fail and fall back);
* the releases share one noise family (one numba log-density); Normal records need an
  uncensored Gaussian release, or a single uncensored Laplace component.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> with pm.Model() as m:
...     p = pm.Beta("p", 2.0, 2.0)
...     x = pm.Bernoulli("x", p, shape=50)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=20.0)
>>> plan = collapse_plan(m, x)
>>> plan.family, plan.n, plan.k
('categorical', 50, 2)
>>> C, M = plan.affine()
>>> C.tolist(), M.tolist()
([0.0], [[0.0, 1.0]])
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors, graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV, NormalRV, PoissonRV

from pymc_dp.distributions.release import is_release, record_parents
from pymc_dp.step_methods.claims import claim_model, direct_rv_parents, release_records
from pymc_dp.step_methods.da_spec import release_arrays
from pymc_dp.step_methods.data_augmentation import _default_mode

__all__ = ["CollapsePlan", "claimable_records", "collapse_plan"]

_FAMILIES = {BernoulliRV: "bernoulli", CategoricalRV: "categorical", PoissonRV: "poisson"}
_FAMILIES[NormalRV] = "normal"
_RTOL = 1e-9
# compiled statistic functions, per model and record variable (weak on the model)
_STAT_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class CollapsePlan:
    """A collapsible record variable (see the module docstring).

    Attributes
    ----------
    rv, value : TensorVariable
        The record variable and its value variable.
    family : {"categorical", "poisson", "normal"}
        Bernoulli records are categorical with ``k = 2`` (values 0 and 1).
    n : int
        Number of records.
    k : int
        Number of categories (categorical), else 0.
    params : list of TensorVariable
        Graphs of the records' parameters in value variables: ``[p]`` (Bernoulli: the
        probability of 1; Categorical: the ``(k,)`` vector), ``[mu]`` (Poisson) or
        ``[mu, sigma]`` (Normal).
    releases : list
        The observed Release variables that read the records.
    stat_fn : callable
        ``stat_fn(*xs) -> T`` (flattened float64 statistic of every release, in order), one
        argument per member of :attr:`members`.
    members : tuple of CollapsePlan
        The record variables that share these releases (the cells of a table), as plans
        without releases of their own, in model order; empty: the records alone.
    index : int
        The position of these records among :attr:`members`.
    """

    rv: object
    value: object
    family: str
    n: int
    k: int
    params: list
    releases: list
    stat_fn: object
    bernoulli: bool = False
    members: tuple = ()
    index: int = 0

    @property
    def name(self) -> str:
        """The records' value-variable name."""
        return self.value.name

    def _group(self) -> tuple:
        return self.members or (self,)

    def _t_all(self, xs) -> np.ndarray:
        return np.asarray(self.stat_fn(*xs), dtype=np.float64).ravel()

    def _zeros(self):
        return np.zeros(self.n, dtype=self.value.dtype)

    def affine_of(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(C, M_j)``: ``T = C + sum_j M_j @ c_j`` over the members (categorical ``c_j`` the
        counts with ``M_j[:, 0] = 0``; Poisson, Normal ``c_j = [sum]``), from member ``j``'s
        record 0 made to differ with every member at zero; :meth:`verify` checks the sum."""
        base = [m._zeros() for m in self._group()]
        C = self._t_all(base)
        member = self._group()[j]

        def changed(v):
            xs = list(base)
            xs[j] = base[j].copy()
            xs[j][0] = v
            return self._t_all(xs) - C

        if member.family == "categorical":
            cols = [np.zeros_like(C)] + [changed(v) for v in range(1, member.k)]
            return C, np.stack(cols, axis=1)
        return C, changed(1)[:, None]

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(C, M)`` of these records (:meth:`affine_of` at :attr:`index`)."""
        return self.affine_of(self.index)

    def verify(self, rng) -> bool:
        """Whether ``T`` equals the affine map of :meth:`affine_of` at records made to differ
        (each member in turn) and at random records of all members (three draws; an exact
        identity in exact arithmetic, checked to ``1e-9`` relative)."""
        group = self._group()
        maps = [self.affine_of(j) for j in range(len(group))]
        C = maps[0][0]
        base = [m._zeros() for m in group]
        tries = []
        for j, m in enumerate(group):
            xs = list(base)
            xs[j] = m._single_changes()
            tries.append(xs)
        for _ in range(3):
            tries.append([m._random_records(rng) for m in group])
        for xs in tries:
            t = self._t_all(xs)
            pred = C + sum(M @ m.counts(x) for (_, M), m, x in zip(maps, group, xs, strict=True))
            scale = 1.0 + np.abs(t).max(initial=0.0) + np.abs(pred).max(initial=0.0)
            if not np.all(np.abs(t - pred) <= _RTOL * scale):
                return False
        return True

    def counts(self, x) -> np.ndarray:
        """The statistic of records ``x`` the affine map reads: counts or ``[sum]``."""
        if self.family == "categorical":
            return np.bincount(np.asarray(x, dtype=np.int64), minlength=self.k).astype(float)
        return np.array([np.sum(x, dtype=np.float64)])

    def _single_changes(self):
        x = self._zeros()
        if self.family == "categorical":
            x[-1] = self.k - 1
        elif self.family == "poisson":
            x[-1] = 7
        else:
            x[-1] = -2.5
        return x

    def _random_records(self, rng):
        if self.family == "categorical":
            w = rng.dirichlet(np.ones(self.k))
            return rng.choice(self.k, size=self.n, p=w).astype(self.value.dtype)
        if self.family == "poisson":
            return rng.poisson(rng.uniform(0.5, 20.0), size=self.n).astype(self.value.dtype)
        return rng.normal(rng.normal(0, 10), 3.0, size=self.n).astype(self.value.dtype)


# ---------------------------------------------------------------- structural conditions


def _broadcasts_along_records(param, family) -> bool:
    """The parameter is the same for every record (static broadcasting)."""
    shape = param.type.shape
    if family == "categorical":
        return param.type.ndim == 1 or (param.type.ndim == 2 and shape[0] == 1)
    return param.type.ndim == 0 or (param.type.ndim == 1 and shape[0] == 1)


def _record_params(rv, family):
    """The records' parameter graphs (RV space), or None when not exchangeable."""
    params = list(rv.owner.op.dist_params(rv.owner))
    if not all(_broadcasts_along_records(p, family) for p in params):
        return None
    return params[:2] if family == "normal" else [params[0]]  # (mu, sigma) or p / mu


def _readers(model, rv) -> list:
    """Model terms (random variables, potentials) whose graph reads ``rv`` directly."""
    rv_set = set(model.basic_RVs)
    out = [t for t in model.basic_RVs if t is not rv and rv in direct_rv_parents(t, rv_set)]
    out += [p for p in model.potentials if rv in direct_rv_parents(p, rv_set)]
    return out


def _structural(model, rv) -> tuple | None:
    """``(family, params, releases)`` when the structural conditions hold, else None."""
    op = getattr(rv.owner, "op", None)
    family = _FAMILIES.get(type(op))
    if family is None or rv.type.ndim != 1 or model.rvs_to_transforms.get(rv) is not None:
        return None
    params = _record_params(rv, family)
    if params is None:
        return None
    free = set(model.free_RVs)
    if family == "normal" and free & set(ancestors([params[1]])):
        return None
    readers = _readers(model, rv)
    if not readers or not all(r in model.observed_RVs and is_release(r) for r in readers):
        return None
    return family, params, readers


def _stat_fn(model, rvs, releases):
    """Compiled ``(*xs) -> T`` (float64, flattened, all releases; one argument per record
    variable of ``rvs``), or None when a statistic reads another value variable."""
    cache = _STAT_FNS.setdefault(model, {})
    key = (tuple(rvs), tuple(releases))
    if key in cache:
        return cache[key]
    values = [model.rvs_to_values[rv] for rv in rvs]
    stats = model.replace_rvs_by_values([r.owner.inputs[0] for r in releases])
    flat = pt.concatenate([pt.cast(s, "float64").ravel() for s in stats])
    others = set(model.value_vars) - set(values)
    fn = None
    if not others & set(graph_inputs([flat])):
        fn = pytensor.function(values, flat, mode=_default_mode(), on_unused_input="ignore")
    cache[key] = fn
    return fn


def _n_records(model, rv) -> int | None:
    n = rv.type.shape[0]
    if n is not None:
        return int(n)
    try:
        return int(pytensor.function([], rv.shape[0], mode=_default_mode())())
    except Exception:
        return None


def _noise_ok(model, family, releases) -> bool:
    try:
        rel = release_arrays(model, releases)
    except ValueError:
        return False
    if not rel.one_family or rel.logpdf is None:
        return False
    if family != "normal":
        return True
    fams = {m.family for m in rel.mechs}
    if rel.sides is not None or len(fams) != 1:
        return False
    (fam,) = fams
    return fam == "gaussian" or (fam == "laplace" and len(rel.z) == 1)


def collapse_plan(model, rv, rng=None) -> CollapsePlan | None:
    """The :class:`CollapsePlan` of record variable ``rv`` in ``model``, or None when the
    records cannot be collapsed (module docstring).

    Parameters
    ----------
    model : pm.Model
    rv : TensorVariable
        A free variable of ``model``.
    rng : numpy Generator, optional
        For the random records of the affine check (default: a fixed-seed generator, so that
        step assignment is reproducible; the check is an identity, not a statistical test).
    """
    group = _group(model, rv)
    if group is None:
        return None
    members, releases = group
    if not all(_noise_ok(model, m.family, releases) for m in members):
        return None
    fn = _stat_fn(model, [m.rv for m in members], releases)
    if fn is None:
        return None
    index = [m.rv for m in members].index(rv)
    me = members[index]
    plan = CollapsePlan(
        rv=rv,
        value=me.value,
        family=me.family,
        n=me.n,
        k=me.k,
        params=me.params,
        releases=releases,
        stat_fn=fn,
        bernoulli=me.bernoulli,
        members=tuple(members) if len(members) > 1 else (),
        index=index if len(members) > 1 else 0,
    )
    rng = np.random.default_rng(20261126) if rng is None else rng
    if not plan.verify(rng):
        return None
    return plan


def _member(model, rv) -> CollapsePlan | None:
    """``rv`` as a member of a collapsible group (its releases and statistic not yet
    attached), or None when its own conditions fail."""
    found = _structural(model, rv)
    if found is None:
        return None
    family, params, readers = found
    n = _n_records(model, rv)
    if n is None or n < 1:
        return None
    if family == "bernoulli":
        k = 2
    elif family == "categorical":
        k = params[0].type.shape[-1]
        if k is None:
            k = int(pytensor.function([], params[0].shape[-1], mode=_default_mode())())
    else:
        k = 0
    return CollapsePlan(
        rv=rv,
        value=model.rvs_to_values[rv],
        family="categorical" if family == "bernoulli" else family,
        n=n,
        k=int(k),
        params=model.replace_rvs_by_values(params),
        releases=readers,
        stat_fn=None,
        bernoulli=family == "bernoulli",
    )


def _group(model, rv):
    """``(members, releases)``: the record variables linked to ``rv`` through shared
    releases (each collapsible on its own) and all their releases, in model order; None when a
    linked variable is not collapsible."""
    members, releases, todo = {}, [], [rv]
    while todo:
        v = todo.pop()
        if v in members:
            continue
        m = _member(model, v)
        if m is None:
            return None
        members[v] = m
        for r in m.releases:
            if r not in releases:
                releases.append(r)
                todo.extend(record_parents(r.owner.inputs[0]))
    order = {v: i for i, v in enumerate(model.free_RVs)}
    if any(v not in order for v in members):
        return None
    obs = {r: i for i, r in enumerate(model.observed_RVs)}
    return (
        sorted(members.values(), key=lambda m: order[m.rv]),
        sorted(releases, key=lambda r: obs[r]),
    )


def claimable_records(var) -> CollapsePlan | None:
    """The plan of ``var`` when pymc_dp's claim rule allows it and it is collapsible."""
    model = claim_model(var)
    if model is None or var not in release_records(model):
        return None
    return collapse_plan(model, var)
