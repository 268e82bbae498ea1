r"""Exact conjugate Gibbs updates for parameters whose children are (latent) records.

The data-augmentation sampler of Ju, Awan, Gong & Rao (2022) alternates two blocks (slides, "A
traditional Gibbs sampler"): (1) draw the parameters ``theta`` from the *non-private* posterior
``pi(theta | X)`` given the current records ``X``, (2) update the records given ``theta`` and the
release (:class:`pymc_dp.step_methods.data_augmentation.DataAugmentation`). Where the prior is
conjugate to the records' likelihood, block (1) is an exact, independent draw: this module does it
as an ordinary PyMC step, :class:`ConjugateGibbs`.

Supported (prior of the parameter -> family of *every* child):

=====================  ==========================================  ==============================
prior                  children (parameter enters as)              full conditional
=====================  ==========================================  ==============================
``Beta(a, b)``         ``Bernoulli(p)``, ``Binomial(n, p)``        ``Beta(a + s, b + t - s)``
``Gamma(alpha, beta)`` ``Poisson(mu)``                             ``Gamma(alpha + s, beta + m)``
``Dirichlet(alpha)``   ``Categorical(p)``                          ``Dirichlet(alpha + counts)``
``Normal(m0, s0)``     ``Normal(mu, sigma)``, sigma not the param  Normal, see the kernels module
=====================  ==========================================  ==============================

Derivations are in :mod:`pymc_dp.kernels.conjugate`. The parameter may be a scalar or an array
(for a Dirichlet, a stack of simplices along the last axis); in a child it must enter as the
conjugate parameter *itself*, possibly broadcast (``ExpandDims``) and possibly indexed along its
leading axis by an integer vector that does not depend on it (``theta[y]``: per-class parameters
selected by a class variable, as in naive Bayes). Hyperparameters and the children's other
parameters (Binomial ``n``, Normal ``sigma``) may be constants or any expression of *other*
variables (their current values are used). Anything else -- a transform of the parameter in a
child (``p**2``), a child of another family, a ``pm.Potential`` or a parameter-dependent index --
is refused: :meth:`ConjugateGibbs.competence` returns ``INCOMPATIBLE`` and the constructor raises
``ValueError`` naming the reason.

Automatic assignment
--------------------
``competence`` is ``IDEAL`` (so it beats NUTS) only when, in addition, at least one child is a
latent (free) variable that feeds a pymc_dp node (a :class:`~pymc_dp.distributions.release.Release`)
directly. An ordinary PyMC model is therefore never sampled differently because pymc_dp steps were
registered. ``competence`` finds the model through the model context
(``pm.Model.get_context``); ``pm.sample(model=m)`` called *outside* ``with m:`` gives no context,
and the step is then not auto-assigned (the model is still sampled correctly, by PyMC's default
steps). Explicit use, ``pm.sample(step=[ConjugateGibbs([p])])``, needs only the conjugate
structure, not a release.

Values are written to the point on the *transformed* scale of the parameter's value variable
(log-odds for Beta, log for Gamma, simplex coordinates for Dirichlet).

Examples
--------
>>> import pymc as pm
>>> with pm.Model() as model:
...     p = pm.Beta("p", 2.0, 2.0)
...     x = pm.Bernoulli("x", p=p, observed=np.array([1, 0, 1, 1]))
...     step = ConjugateGibbs([p], rng=1)
>>> point, _ = step.step(model.initial_point())
>>> sorted(point)
['p_logodds__']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.logprob.transforms import LogOddsTransform, LogTransform, SimplexTransform
from pymc.model import Model, modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors, graph_inputs
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    DirichletRV,
    GammaRV,
    NormalRV,
    PoissonRV,
)
from pytensor.tensor.subtensor import AdvancedSubtensor

from pymc_dp.kernels.conjugate import (
    beta_binomial_posterior,
    dirichlet_categorical_posterior,
    draw_beta,
    draw_dirichlet,
    draw_gamma,
    draw_normal,
    gamma_poisson_posterior,
    normal_normal_posterior,
    sum_to_shape,
)

__all__ = ["CONJUGATE_STEPS", "ConjugateGibbs", "conjugate_family"]


class NotConjugateError(ValueError):
    """The parameter's prior and children do not form a supported conjugate pair."""


# prior op type -> (family name, {child op type: index of the conjugate parameter})
_FAMILIES: dict[type, tuple[str, dict[type, int]]] = {
    BetaRV: ("beta", {BernoulliRV: 0, BinomialRV: 1}),
    GammaRV: ("gamma", {PoissonRV: 0}),
    DirichletRV: ("dirichlet", {CategoricalRV: 0}),
    NormalRV: ("normal", {NormalRV: 0}),
}

_PY_MODE = Mode(linker="py", optimizer="fast_compile")


# ---- graph analysis --------------------------------------------------------------------------
def _depends_on(graphs, var, blockers) -> bool:
    return var in set(ancestors(list(graphs), blockers=blockers))


def _strip_expand_dims(expr):
    """Peel ``DimShuffle`` nodes that only insert broadcastable axes; return (core, orders)."""
    orders = []
    while expr.owner is not None and isinstance(expr.owner.op, DimShuffle):
        order = tuple(expr.owner.op.new_order)
        if tuple(o for o in order if o != "x") != tuple(range(expr.owner.inputs[0].ndim)):
            break  # a transpose or a dropped axis: not a pure broadcast
        orders.append(order)
        expr = expr.owner.inputs[0]
    return expr, orders[::-1]  # innermost first


def _leading_index(expr):
    """If ``expr`` is ``base[idx]`` (one integer index on the leading axis) return (base, idx)."""
    node = expr.owner
    if node is None or len(node.inputs) != 2:
        return None
    if isinstance(node.op, AdvancedSubtensor) and tuple(node.op.idx_list) == (0,):
        base, idx = node.inputs
        if idx.dtype.startswith(("int", "uint")):
            return base, idx
    return None


@dataclass
class _ChildPlan:
    rv: object
    kind: type  # op type of the child
    orders: list  # expand-dims new_orders, innermost first
    index: object | None  # integer index graph (theta[index]) or None
    extra: object | None  # Binomial n or Normal sigma graph


@dataclass
class _Plan:
    rv: object
    family: str
    children: list[_ChildPlan] = field(default_factory=list)


def _analyze(rv, model: Model) -> _Plan:
    """Check conditions (a) and (b) of the module docstring; raise NotConjugateError if not."""
    node = getattr(rv, "owner", None)
    if node is None or type(node.op) not in _FAMILIES:
        raise NotConjugateError(f"the prior of {rv} is not Beta, Gamma, Dirichlet or Normal")
    family, child_types = _FAMILIES[type(node.op)]
    if rv not in model.free_RVs:
        raise NotConjugateError(f"{rv.name} is not a free variable of the model")
    if any(s is None for s in rv.type.shape):
        raise NotConjugateError(f"{rv.name} has no static shape")
    transform = model.rvs_to_transforms.get(rv)
    if transform is not None and type(transform) not in _FORWARD:
        raise NotConjugateError(f"{rv.name} has an unsupported transform {transform}")
    all_rvs = list(model.basic_RVs)
    for pot in model.potentials:
        if _depends_on([pot], rv, all_rvs):
            raise NotConjugateError(f"Potential {pot.name} depends on {rv.name}")
    plan = _Plan(rv=rv, family=family)
    for child in all_rvs:
        if child is rv or not _depends_on(child.owner.inputs, rv, all_rvs):
            continue
        cop = child.owner.op
        if type(cop) not in child_types:
            raise NotConjugateError(
                f"child {child.name} of {rv.name} is {type(cop).__name__}, not conjugate to "
                f"a {family} prior"
            )
        params = list(cop.dist_params(child.owner))
        j = child_types[type(cop)]
        others = [p for i, p in enumerate(params) if i != j] + [cop.size_param(child.owner)]
        if _depends_on(others, rv, all_rvs):
            raise NotConjugateError(
                f"{rv.name} enters another parameter (or the size) of child {child.name}"
            )
        core, orders = _strip_expand_dims(params[j])
        index = None
        if core is not rv:
            indexed = _leading_index(core)
            min_ndim = 2 if family == "dirichlet" else 1
            if indexed is None or indexed[0] is not rv or rv.ndim < min_ndim:
                raise NotConjugateError(
                    f"{rv.name} does not enter child {child.name} as its conjugate parameter "
                    "(only broadcasting and indexing of the leading axis are supported)"
                )
            index = indexed[1]
            if _depends_on([index], rv, all_rvs):
                raise NotConjugateError(f"the index into {rv.name} depends on {rv.name}")
        if family == "dirichlet" and orders and any(o[-1] == "x" for o in orders):
            raise NotConjugateError(f"the category axis of {rv.name} is broadcast in {child.name}")
        extra = None
        if type(cop) is BinomialRV:
            extra = params[0]
        elif type(cop) is NormalRV:
            extra = params[1]
        plan.children.append(_ChildPlan(child, type(cop), orders, index, extra))
    if not plan.children:
        raise NotConjugateError(f"{rv.name} has no children")
    return plan


def _is_pymc_dp_node(var) -> bool:
    """True for a model variable produced by a pymc_dp op (a Release or other pymc_dp node)."""
    node = getattr(var, "owner", None)
    if node is None:
        return False
    op = node.op
    return bool(getattr(op, "_pymc_dp_node", False)) or type(op).__module__.startswith("pymc_dp.")


def _feeds_pymc_dp_node(var, model: Model) -> bool:
    """True if a pymc_dp node (e.g. a ``Release``) of ``model`` depends directly on ``var``.

    "Directly" means through a graph that passes through no other model random variable.
    """
    all_rvs = list(model.basic_RVs)
    for node_var in [*all_rvs, *model.potentials]:
        if node_var is var or not _is_pymc_dp_node(node_var):
            continue
        inputs = node_var.owner.inputs
        if _depends_on(inputs, var, all_rvs):
            return True
    return False


def conjugate_family(rv, model: Model | None = None) -> str | None:
    """The conjugate family ("beta", "gamma", "dirichlet", "normal") :class:`ConjugateGibbs`
    would use for ``rv``, or None when the prior/children structure is not supported.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 1.0)
    ...     y = pm.Poisson("y", mu=lam, observed=np.array([3, 1]))
    ...     q = pm.Beta("q", 1.0, 1.0)
    ...     z = pm.Bernoulli("z", p=q**2, observed=np.array([1]))
    >>> conjugate_family(lam, m), conjugate_family(q, m)
    ('gamma', None)
    """
    model = modelcontext(model)
    try:
        return _analyze(rv, model).family
    except NotConjugateError:
        return None


# ---- numeric side ----------------------------------------------------------------------------
def _logodds(p):
    return np.log(p) - np.log1p(-p)


def _simplex(theta):
    log_theta = np.log(theta)
    return log_theta[..., :-1] - log_theta.mean(axis=-1, keepdims=True)


# numpy forward transforms, cross-checked against PyMC's Transform.forward in the tests
_FORWARD = {LogOddsTransform: _logodds, LogTransform: np.log, SimplexTransform: _simplex}


def _expanded_shape(shape, orders):
    for order in orders:
        shape = tuple(1 if o == "x" else shape[o] for o in order)
    return shape


class _Quantity:
    """A numeric input of the update: a point entry, a constant, a shared value or compiled."""

    __slots__ = ("kind", "ref")

    def __init__(self, kind, ref):
        self.kind = kind
        self.ref = ref

    def get(self, point, compiled):
        if self.kind == "point":
            return point[self.ref]
        if self.kind == "const":
            return self.ref
        if self.kind == "shared":
            return self.ref.get_value(borrow=True)
        return compiled[self.ref]


class _Updater:
    """Draws one parameter from its full conditional; built from a :class:`_Plan`."""

    def __init__(self, plan: _Plan, model: Model, compile_kwargs):
        rv = plan.rv
        self.family = plan.family
        value_var = model.rvs_to_values[rv]
        self.value_name = value_var.name
        self.shape = tuple(int(s) for s in rv.type.shape)
        transform = model.rvs_to_transforms.get(rv)
        self.forward = None if transform is None else _FORWARD[type(transform)]
        self._outs = []
        value_names = {v: v.name for v in model.value_vars}

        def quantity(expr):
            [rep] = model.replace_rvs_by_values([pt.as_tensor(expr)])
            if rep in value_names:
                return _Quantity("point", value_names[rep])
            if isinstance(rep, SharedVariable):
                return _Quantity("shared", rep)
            inputs = [v for v in graph_inputs([rep]) if not isinstance(v, Constant)]
            if not inputs:
                return _Quantity("const", np.asarray(pytensor.function([], rep, mode=_PY_MODE)()))
            self._outs.append(rep)
            return _Quantity("compiled", len(self._outs) - 1)

        self.hyper = [quantity(p) for p in rv.owner.op.dist_params(rv.owner)]
        self.children = []
        for c in plan.children:
            self.children.append(
                (
                    c.kind,
                    quantity(c.rv),
                    c.orders,
                    None if c.index is None else quantity(c.index),
                    None if c.extra is None else quantity(c.extra),
                )
            )
        self._fn = None
        if self._outs:
            ck = dict(compile_kwargs or {})
            ck.setdefault("on_unused_input", "ignore")
            self._fn = model.compile_fn(self._outs, inputs=model.value_vars, point_fn=True, **ck)

    # sufficient statistics of one child, summed to the shape of the parameter
    def _child_stats(self, kind, x, base_shape, orders, extra):
        eshape = _expanded_shape(base_shape, orders)
        x = np.asarray(x)
        if kind is CategoricalRV:
            k = eshape[-1]
            bshape = eshape[:-1]
            if x.size and (x.min() < 0 or x.max() >= k):
                raise ValueError(f"categorical record outside 0..{k - 1}")
            ncell = int(np.prod(bshape))
            if ncell == 1:
                counts = np.bincount(x.ravel(), minlength=k).astype(np.float64)
            else:
                pos = np.broadcast_to(np.arange(ncell).reshape(bshape), x.shape)
                counts = np.bincount((pos * k + x).ravel(), minlength=ncell * k).astype(np.float64)
            return (counts.reshape(base_shape),)
        if int(np.prod(eshape)) == 1:  # one parameter cell: a plain (integer-exact) sum
            s = np.full(base_shape, float(x.sum()))
        else:
            s = sum_to_shape(x.astype(np.float64, copy=False), eshape).reshape(base_shape)
        m = x.size // max(int(np.prod(eshape)), 1)  # records per parameter cell (uniform)
        if kind is BinomialRV:
            n = np.broadcast_to(np.asarray(extra, dtype=np.float64), x.shape)
            return s, sum_to_shape(n, eshape).reshape(base_shape)
        if kind is NormalRV:
            w = 1.0 / np.square(np.asarray(extra, dtype=np.float64))
            if w.size == 1:
                w = w.reshape(())
                return s * w, np.full(base_shape, m * w)
            wx = np.broadcast_to(w, x.shape)
            return (
                sum_to_shape(x * wx, eshape).reshape(base_shape),
                sum_to_shape(wx, eshape).reshape(base_shape),
            )
        return s, np.full(base_shape, float(m))  # Bernoulli / Poisson: trials = count

    def _scatter(self, stat, idx):
        """Add the rows of ``stat`` (shape idx.shape + shape[1:]) into rows ``idx`` of a zero
        array of the parameter's shape (bincount, no Python loop over records)."""
        n0 = self.shape[0]
        idx = np.asarray(idx).ravel()
        if idx.size and (idx.min() < -n0 or idx.max() >= n0):
            raise IndexError(f"index out of range for a parameter of shape {self.shape}")
        idx = np.where(idx < 0, idx + n0, idx)
        r = int(np.prod(self.shape[1:]))
        flat = (idx[:, None] * r + np.arange(r)).ravel()
        out = np.bincount(flat, weights=np.reshape(stat, -1), minlength=n0 * r)
        return out.reshape(self.shape)

    def draw(self, point, rng):
        compiled = self._fn(point) if self._fn is not None else None
        hyper = [np.asarray(q.get(point, compiled), dtype=np.float64) for q in self.hyper]
        nstat = 1 if self.family == "dirichlet" else 2
        totals = [np.zeros(self.shape) for _ in range(nstat)]
        for kind, xq, orders, iq, eq in self.children:
            x = xq.get(point, compiled)
            extra = None if eq is None else eq.get(point, compiled)
            if iq is None:
                stats = self._child_stats(kind, x, self.shape, orders, extra)
            else:
                idx = np.asarray(iq.get(point, compiled))
                base = idx.shape + self.shape[1:]
                stats = [
                    self._scatter(st, idx) for st in self._child_stats(kind, x, base, orders, extra)
                ]
            for total, st in zip(totals, stats, strict=True):
                total += st
        shape = self.shape
        if self.family == "beta":
            a, b = beta_binomial_posterior(*hyper, *totals)
            theta = draw_beta(rng, np.broadcast_to(a, shape), np.broadcast_to(b, shape))
        elif self.family == "gamma":
            alpha, scale = hyper  # PyTensor's gamma op carries scale = 1 / rate
            a, b = gamma_poisson_posterior(alpha, 1.0 / scale, *totals)
            theta = draw_gamma(rng, np.broadcast_to(a, shape), np.broadcast_to(b, shape))
        elif self.family == "dirichlet":
            alpha = dirichlet_categorical_posterior(np.broadcast_to(hyper[0], shape), totals[0])
            theta = draw_dirichlet(rng, alpha)
        else:
            mean, sd = normal_normal_posterior(*hyper, *totals)
            theta = draw_normal(rng, np.broadcast_to(mean, shape), np.broadcast_to(sd, shape))
        theta = np.asarray(theta, dtype=np.float64).reshape(shape)
        if self.forward is not None:
            theta = self.forward(theta)
        return np.asarray(theta, dtype=np.float64)  # a 0-d array, never a numpy scalar


class ConjugateGibbs(BlockedStep):
    r"""Exact Gibbs draw of Beta / Gamma / Dirichlet / Normal parameters from their full
    conditional given their (latent or observed) children; see the module docstring.

    Parameters
    ----------
    vars : list
        Parameters (model variables or their value variables) to update. Each must have a
        supported conjugate structure (else ``ValueError``); several are updated in turn.
    model : pm.Model, optional
    rng : seed or numpy Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``), so ``random_seed`` decides draws.
    initial_point, compile_kwargs, blocked
        Accepted for PyMC's step assignment; ``compile_kwargs`` is used for the (rare) compiled
        hyperparameter expressions.

    Notes
    -----
    Cost per step: one pass over each child's values (``sum`` / ``bincount``); no compiled
    model logp. The draw is kept off the boundary of its support by float64 resolution so the
    transformed value is finite (see :func:`pymc_dp.kernels.conjugate.draw_beta`).
    """

    name = "conjugate_gibbs"
    stats_dtypes_shapes: ClassVar[dict] = {}

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
    ):
        model = modelcontext(model)
        value_vars = get_value_vars_from_user_vars(vars, model)
        self.vars = value_vars
        self.blocked = blocked
        self.rng = get_random_generator(rng)
        self._updaters = []
        for v in value_vars:
            rv = model.values_to_rvs[v]
            try:
                plan = _analyze(rv, model)
            except NotConjugateError as err:
                raise ValueError(f"ConjugateGibbs cannot update {rv.name}: {err}") from None
            self._updaters.append(_Updater(plan, model, compile_kwargs))

    @property
    def families(self) -> dict[str, str]:
        """Value-variable name -> conjugate family used for it."""
        return {u.value_name: u.family for u in self._updaters}

    def step(self, point):
        new_point = dict(point)  # the incoming arrays are never written to
        for updater in self._updaters:
            new_point[updater.value_name] = updater.draw(new_point, self.rng)
        return new_point, [{}]

    @staticmethod
    def competence(var, has_grad=None):
        """``IDEAL`` iff ``var`` has a supported conjugate structure and a child feeds a
        pymc_dp node (see the module docstring), else ``INCOMPATIBLE``."""
        try:
            model = Model.get_context(error_if_none=False)
        except Exception:  # e.g. BlockModelAccessError inside a distribution's dist()
            return Competence.INCOMPATIBLE
        if model is None or var not in model.free_RVs or type(var.owner.op) not in _FAMILIES:
            return Competence.INCOMPATIBLE
        try:
            plan = _analyze(var, model)
        except NotConjugateError:
            return Competence.INCOMPATIBLE
        if any(c.rv in model.free_RVs and _feeds_pymc_dp_node(c.rv, model) for c in plan.children):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE


#: The step classes of this module, for ``pymc.step_methods.STEP_METHODS``.
CONJUGATE_STEPS = (ConjugateGibbs,)
