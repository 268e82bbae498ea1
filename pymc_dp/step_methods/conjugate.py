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
``Normal`` (vector) /  ``Normal(a + X @ beta, sigma)``: a linear    ``N(P^-1 h, P^-1)``, kernels
``MvNormal(m0, S0)``   predictor, sigma not depending on beta      module (regression)
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

Regression coefficients (family ``"regression"``): a Normal parameter that does not enter its
children as their mean itself, or any ``MvNormal`` parameter (scalar or vector), is tried as the
coefficient vector of a linear model. Each child must be ``Normal(mu, sigma)`` with ``mu`` affine
in the parameter, written with: the parameter itself, indexing / slicing (``beta[0]``,
``beta[1:]``, ``beta[idx]`` with an index free of it), broadcasting and transposes, ``+``, ``-``,
products and quotients by expressions free of it, sums over axes (``(X * beta).sum(-1)``) and
2-D ``dot`` / ``@`` with an operand free of it (``X @ beta``, ``beta[0] + X @ beta[1:]``,
``pt.concatenate([ones, X], 1) @ beta``). The design ``X``, the offset and ``sigma`` (a scalar or a
per-record vector: weights) may be data or the current values of other variables (latent records,
a free noise scale), which are read from the point at each step; ``sigma`` must not depend on the
parameter. The statistic ``P = Sigma0^-1 + X'WX``, ``h = Sigma0^-1 mu0 + X'W(y - a)`` is one
compiled PyTensor function of the point, the draw a compiled Cholesky
(:func:`pymc_dp.kernels.conjugate.draw_mvnormal_precision`).

Automatic assignment
--------------------
``competence`` is ``IDEAL`` (so it beats NUTS) only when, in addition, the shared claim rule of
:mod:`pymc_dp.step_methods.claims` allows it: the model holds an observed
:class:`~pymc_dp.distributions.release.Release` and at least one child of the parameter is one of
its records (a latent variable in a Release's statistic, or a per-record latent part of one). Using
pymc_dp distributions (``Skellam``, ``Privatized``, ...) without a Release never makes a variable
claimed, so an ordinary PyMC model is never sampled differently because pymc_dp steps were
registered. ``competence`` finds the model through the model context, or, when
``pm.sample(model=m)`` runs outside ``with m:``, through the registry of models holding a Release.
Explicit use, ``pm.sample(step=[ConjugateGibbs([p])])``, needs only the conjugate structure, not
a release.

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
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.logprob.transforms import LogOddsTransform, LogTransform, SimplexTransform
from pymc.model import Model, modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors, graph_inputs
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    DirichletRV,
    GammaRV,
    MvNormalRV,
    NormalRV,
    PoissonRV,
)
from pytensor.tensor.subtensor import AdvancedSubtensor, Subtensor

from pymc_dp.kernels.conjugate import (
    _precision_draw,
    beta_binomial_posterior,
    dirichlet_categorical_posterior,
    draw_beta,
    draw_dirichlet,
    draw_gamma,
    draw_mvnormal_precision,
    draw_normal,
    gamma_poisson_posterior,
    normal_normal_posterior,
    sum_to_shape,
)
from pymc_dp.step_methods.claims import claim_model, parameter_claimable

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

_PRIOR_OPS = (*_FAMILIES, MvNormalRV)

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
    offset: object | None = None  # regression: mean = offset + jac @ beta (graphs)
    jac: object | None = None


@dataclass
class _Plan:
    rv: object
    family: str
    children: list[_ChildPlan] = field(default_factory=list)


def _analyze(rv, model: Model) -> _Plan:
    """The update plan of ``rv``; raise NotConjugateError if its structure is not supported.

    A Normal parameter whose children take it as their mean itself gets the elementwise Normal
    update; failing that (and always for an MvNormal prior) its children's means are tried as
    linear predictors (:func:`_analyze_regression`).
    """
    op = getattr(getattr(rv, "owner", None), "op", None)
    if isinstance(op, MvNormalRV):
        return _analyze_regression(rv, model)
    try:
        return _analyze_direct(rv, model)
    except NotConjugateError as err:
        if not isinstance(op, NormalRV) or rv not in model.free_RVs:
            raise
        try:
            return _analyze_regression(rv, model)
        except NotConjugateError as err_reg:
            raise NotConjugateError(f"{err}; as a regression coefficient: {err_reg}") from None


def _analyze_direct(rv, model: Model) -> _Plan:
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


# ---- regression: the parameter enters its children's means linearly ---------------------------
_LINEAR_ELEMWISE = (ps.Add, ps.Sub, ps.Neg, ps.Mul, ps.TrueDiv)


def _pad(c):
    """``c[..., None]``: a coefficient that multiplies a Jacobian (extra trailing axis)."""
    return pt.shape_padright(c)


def _matmul(a, b, a_jac: bool):
    """``a @ b`` (both 2-D) without a Dot op (no BLAS in the compiled statistic): with
    ``a_jac`` the left operand carries a trailing Jacobian axis ``(n, k, p)``, else the right
    one ``(k, m, p)``; the result is ``(n, m, p)``."""
    if a_jac:
        return (a[:, :, None, :] * b[None, :, :, None]).sum(axis=1)
    return (a[:, :, None, None] * b[None, :, :, :]).sum(axis=1)


def _linearize(expr, rv, p, blockers):
    """Write ``expr`` as ``offset + jac . vec(rv)``; return ``(offset, jac)`` graphs.

    ``jac`` has shape ``expr.shape + (p,)`` and ``offset`` the shape of ``expr``; either is None
    when zero (``jac`` None: ``expr`` does not depend on ``rv``). Neither graph depends on
    ``rv``. Supported: ``rv`` itself, broadcasting / transposes / squeezes (``DimShuffle``),
    ``+``, ``-``, negation, products and quotients by expressions free of ``rv``, casts to a
    float type, sums over axes,
    ``dot`` / ``@`` of 2-D operands one of which is free of ``rv``, and basic or integer-array
    indexing by indices free of ``rv``. Anything else raises NotConjugateError.
    """
    if expr is rv:
        eye = np.eye(p, dtype=np.float64).reshape((*rv.type.shape, p))
        return None, pt.as_tensor(eye)
    if not _depends_on([expr], rv, blockers):
        return expr, None
    node = expr.owner
    op = None if node is None else node.op
    what = type(op).__name__ if op is not None else str(expr)
    if isinstance(op, DimShuffle):
        off, jac = _linearize(node.inputs[0], rv, p, blockers)
        order = tuple(op.new_order)
        return (
            None if off is None else off.dimshuffle(*order),
            jac.dimshuffle(*order, node.inputs[0].ndim),
        )
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, ps.Cast):
        if not expr.dtype.startswith("float"):
            raise NotConjugateError(f"{rv.name} is cast to {expr.dtype} in a child's mean")
        return _linearize(node.inputs[0], rv, p, blockers)  # the statistic is float64 anyway
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, _LINEAR_ELEMWISE):
        parts = [_linearize(x, rv, p, blockers) for x in node.inputs]
        sop = op.scalar_op
        if isinstance(sop, (ps.Add, ps.Sub, ps.Neg)):
            sign = [1.0] * len(parts)
            if isinstance(sop, ps.Sub):
                sign = [1.0, -1.0]
            elif isinstance(sop, ps.Neg):
                sign = [-1.0]
            off = jac = None
            for sg, (o, j) in zip(sign, parts, strict=True):
                if o is not None:
                    o = o if sg > 0 else -o
                    off = o if off is None else off + o
                if j is not None:
                    j = j if sg > 0 else -j
                    jac = j if jac is None else jac + j
            return off, jac
        linear = [i for i, (_, j) in enumerate(parts) if j is not None]
        if len(linear) != 1 or (isinstance(sop, ps.TrueDiv) and linear != [0]):
            raise NotConjugateError(
                f"{rv.name} enters a product or quotient with itself or as a divisor"
            )
        (i,) = linear
        o, j = parts[i]
        consts = [x for k, x in enumerate(node.inputs) if k != i]
        if isinstance(sop, ps.Mul):
            c = consts[0]
            for x in consts[1:]:
                c = c * x
            return (None if o is None else o * c), j * _pad(c)
        c = consts[0]  # TrueDiv: (o + j beta) / c
        return (None if o is None else o / c), j / _pad(c)
    if isinstance(op, CAReduce) and isinstance(op.scalar_op, ps.Add):
        x = node.inputs[0]
        axis = tuple(range(x.ndim)) if op.axis is None else tuple(op.axis)
        off, jac = _linearize(x, rv, p, blockers)
        return (None if off is None else off.sum(axis=axis)), jac.sum(axis=axis)
    if isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot)):
        a, b = node.inputs
        if a.ndim != 2 or b.ndim != 2:
            raise NotConjugateError(f"{rv.name} enters a dot product of operands that are not 2-D")
        oa, ja = _linearize(a, rv, p, blockers)
        ob, jb = _linearize(b, rv, p, blockers)
        if ja is not None and jb is not None:
            raise NotConjugateError(f"{rv.name} enters both operands of a dot product")
        if ja is not None:
            off = None if oa is None else (oa[:, :, None] * b[None, :, :]).sum(axis=1)
            return off, _matmul(ja, b, True)
        off = None if ob is None else (a[:, :, None] * ob[None, :, :]).sum(axis=1)
        return off, _matmul(a, jb, False)
    if isinstance(op, Subtensor | AdvancedSubtensor):
        if _depends_on(node.inputs[1:], rv, blockers):
            raise NotConjugateError(f"an index depends on {rv.name}")
        off, jac = _linearize(node.inputs[0], rv, p, blockers)
        idx = node.inputs[1:]
        if isinstance(op, AdvancedSubtensor) and tuple(op.idx_list) != (0,):
            raise NotConjugateError(f"unsupported advanced indexing of {rv.name}")
        return (None if off is None else op(off, *idx)), op(jac, *idx)
    raise NotConjugateError(
        f"{rv.name} enters a child's mean through {what}, not as a linear predictor"
    )


def _analyze_regression(rv, model: Model) -> _Plan:
    """Normal / MvNormal prior, Normal children whose means are linear in the parameter and whose
    sigma (and size) do not depend on it; raise NotConjugateError otherwise."""
    if rv not in model.free_RVs:
        raise NotConjugateError(f"{rv.name} is not a free variable of the model")
    if any(s is None for s in rv.type.shape):
        raise NotConjugateError(f"{rv.name} has no static shape")
    if rv.ndim > 1 or model.rvs_to_transforms.get(rv) is not None:
        raise NotConjugateError(f"{rv.name} is not an untransformed scalar or vector")
    p = int(np.prod(rv.type.shape))
    all_rvs = list(model.basic_RVs)
    for pot in model.potentials:
        if _depends_on([pot], rv, all_rvs):
            raise NotConjugateError(f"Potential {pot.name} depends on {rv.name}")
    plan = _Plan(rv=rv, family="regression")
    for child in all_rvs:
        if child is rv or not _depends_on(child.owner.inputs, rv, all_rvs):
            continue
        cop = child.owner.op
        if type(cop) is not NormalRV:
            raise NotConjugateError(
                f"child {child.name} of {rv.name} is {type(cop).__name__}, not Normal"
            )
        mu, sigma = cop.dist_params(child.owner)
        if _depends_on([sigma, cop.size_param(child.owner)], rv, all_rvs):
            raise NotConjugateError(
                f"{rv.name} enters the sigma (or the size) of child {child.name}"
            )
        offset, jac = _linearize(mu, rv, p, all_rvs)
        if any(g is not None and _depends_on([g], rv, all_rvs) for g in (offset, jac)):
            raise NotConjugateError(f"could not separate {rv.name} from the mean of {child.name}")
        plan.children.append(_ChildPlan(child, NormalRV, [], None, sigma, offset, jac))
    if not plan.children:
        raise NotConjugateError(f"{rv.name} has no children")
    return plan


def conjugate_family(rv, model: Model | None = None) -> str | None:
    """The conjugate family ("beta", "gamma", "dirichlet", "normal", "regression")
    :class:`ConjugateGibbs` would use for ``rv``, or None when the structure is not supported.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 1.0)
    ...     y = pm.Poisson("y", mu=lam, observed=np.array([3, 1]))
    ...     q = pm.Beta("q", 1.0, 1.0)
    ...     z = pm.Bernoulli("z", p=q**2, observed=np.array([1]))
    ...     b = pm.Normal("b", 0.0, 1.0, shape=2)
    ...     w = pm.Normal("w", b[0] + np.arange(3.0) * b[1], 1.0, observed=np.zeros(3))
    >>> conjugate_family(lam, m), conjugate_family(q, m), conjugate_family(b, m)
    ('gamma', None, 'regression')
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


def _first_bad(values, ok):
    """The first entry of ``values`` where the boolean array ``ok`` is False (for messages)."""
    values = np.broadcast_to(np.asarray(values), np.shape(ok))
    return values.ravel()[np.flatnonzero(~np.ravel(ok))[0]].item()


def _check_positive(values, what):
    """Raise ValueError naming ``what`` unless every entry is finite and > 0 (NaN fails).

    Two reductions (min, max), no Python loop: NaN propagates through both and fails the test.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:  # the common case: one float comparison
        if not 0.0 < float(v) < np.inf:
            raise ValueError(f"{what} must be finite and > 0, got {float(v)!r}")
        return
    if v.size and not (v.min() > 0.0 and v.max() < np.inf):
        bad = _first_bad(v, (v > 0.0) & (v < np.inf))
        raise ValueError(f"{what} must be finite and > 0, got {bad!r}")


def _check_support(kind, x, extra, what):
    """Raise ValueError naming ``what`` unless the child's values ``x`` lie in its support:
    Bernoulli {0, 1}, Binomial 0..n, Poisson 0, 1, ... (Categorical: see ``_child_stats``)."""
    if not x.size:
        return
    if x.dtype.kind == "f" and not np.array_equal(x, np.floor(x)):  # NaN also fails
        ok = x == np.floor(x)
        raise ValueError(f"{what} has a non-integer value {_first_bad(x, ok)!r}")
    lo = x.min()
    if kind is BernoulliRV:
        if lo < 0 or x.max() > 1:
            bad = _first_bad(x, (x == 0) | (x == 1))
            raise ValueError(f"{what} (Bernoulli) must be 0 or 1, got {bad!r}")
    elif kind is BinomialRV:
        n = np.asarray(extra)
        n_min = n.min() if n.size else 0
        if n_min < 0:
            raise ValueError(f"{what} (Binomial) has a negative n = {_first_bad(n, n >= 0)!r}")
        if lo < 0 or (x.max() > n_min and np.any(x > n)):  # max <= min(n): no comparison
            ok = (x >= 0) & (x <= n)
            raise ValueError(
                f"{what} (Binomial) must be in 0..n, got {_first_bad(x, ok)!r} "
                f"with n = {_first_bad(np.broadcast_to(n, ok.shape), ok)!r}"
            )
    elif kind is PoissonRV and lo < 0:
        raise ValueError(f"{what} (Poisson) must be >= 0, got {_first_bad(x, x >= 0)!r}")


# PyMC's names of the prior hyperparameters as PyTensor's op carries them
_HYPER_NAMES = {
    "beta": ("alpha", "beta"),
    "gamma": ("alpha", "beta"),  # checked as scale = 1 / beta: in (0, inf) iff beta is
    "dirichlet": ("a",),
    "normal": ("mu", "sigma"),
}


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
        self.name = rv.name
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
                    f"child {c.rv.name} of {rv.name}",
                )
            )
        self._fn = None
        if self._outs:
            ck = dict(compile_kwargs or {})
            ck.setdefault("on_unused_input", "ignore")
            self._fn = model.compile_fn(self._outs, inputs=model.value_vars, point_fn=True, **ck)

    # sufficient statistics of one child, summed to the shape of the parameter
    def _child_stats(self, kind, x, base_shape, orders, extra, what):
        eshape = _expanded_shape(base_shape, orders)
        x = np.asarray(x)
        if kind is not NormalRV and kind is not CategoricalRV:
            _check_support(kind, x, extra, what)
        if kind is CategoricalRV:
            k = eshape[-1]
            bshape = eshape[:-1]
            if x.size and (x.min() < 0 or x.max() >= k):
                bad = _first_bad(x, (x >= 0) & (x < k))
                raise ValueError(f"{what} (Categorical) must be in 0..{k - 1}, got {bad!r}")
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
            _check_positive(extra, f"sigma of {what}")
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

    def _check_hyper(self, hyper):
        """ValueError naming the prior parameter unless the hyperparameters are valid: Beta,
        Gamma and Dirichlet parameters and the Normal sigma finite and > 0, Normal mu finite."""
        names = _HYPER_NAMES[self.family]
        if self.family == "normal":
            mu = hyper[0]
            if mu.size and not np.isfinite(mu.sum()):
                bad = _first_bad(mu, np.isfinite(mu))
                raise ValueError(f"prior parameter mu of {self.name} must be finite, got {bad!r}")
            hyper = hyper[1:]
            names = names[1:]
        elif self.family == "gamma":  # the op carries scale = 1 / beta; report beta
            scale = hyper[1]
            if scale.size and not (scale.min() > 0.0 and scale.max() < np.inf):
                with np.errstate(divide="ignore"):
                    rate = 1.0 / scale
                _check_positive(rate, f"prior parameter beta of {self.name}")
                _check_positive(scale, f"prior parameter beta of {self.name}")  # NaN
            hyper = hyper[:1]
        for value, name in zip(hyper, names, strict=False):
            _check_positive(value, f"prior parameter {name} of {self.name}")

    def draw(self, point, rng):
        compiled = self._fn(point) if self._fn is not None else None
        hyper = [np.asarray(q.get(point, compiled), dtype=np.float64) for q in self.hyper]
        self._check_hyper(hyper)
        nstat = 1 if self.family == "dirichlet" else 2
        totals = [np.zeros(self.shape) for _ in range(nstat)]
        for kind, xq, orders, iq, eq, what in self.children:
            x = xq.get(point, compiled)
            extra = None if eq is None else eq.get(point, compiled)
            if iq is None:
                stats = self._child_stats(kind, x, self.shape, orders, extra, what)
            else:
                idx = np.asarray(iq.get(point, compiled))
                base = idx.shape + self.shape[1:]
                stats = [
                    self._scatter(st, idx)
                    for st in self._child_stats(kind, x, base, orders, extra, what)
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


class _RegressionUpdater:
    """Draws a regression coefficient vector from its Normal full conditional (kernels module:
    ``P = Sigma0^-1 + X'WX``, ``h = Sigma0^-1 mu0 + X'W (y - a)``).

    ``P`` and ``h`` are one compiled PyTensor function of the current point (design matrices,
    offsets, sigmas and records may be data or current values of other variables), compiled once
    in PyTensor's default mode (numba: about 6 us per call for the benchmark's 100 x 3 design,
    against 12-20 us for the C VM) and called with ``trust_input`` after a cheap dtype check;
    the draw is a compiled Cholesky. The statistic is written with elementwise products and
    sums only (no ``Dot``: no BLAS needed).
    """

    def __init__(self, plan: _Plan, model: Model, compile_kwargs):
        rv = plan.rv
        self.family = plan.family
        self.value_name = model.rvs_to_values[rv].name
        self.shape = tuple(int(s) for s in rv.type.shape)
        p = int(np.prod(self.shape))
        f64 = "float64"
        self._sigmas = []  # (description, graph) of every standard deviation used
        node = rv.owner
        if isinstance(node.op, MvNormalRV):
            mu0, cov0 = node.op.dist_params(node)
            prec0 = pt.linalg.inv(pt.as_tensor(cov0).astype(f64))
            mu0 = pt.broadcast_to(pt.as_tensor(mu0).astype(f64), (p,))
            prec = prec0
            h = (prec0 * mu0[None, :]).sum(axis=1)
        else:
            mu0, sd0 = node.op.dist_params(node)
            mu0 = pt.broadcast_to(pt.as_tensor(mu0).astype(f64), self.shape).reshape((p,))
            sd0 = pt.broadcast_to(pt.as_tensor(sd0).astype(f64), self.shape).reshape((p,))
            tau0 = pt.reciprocal(pt.sqr(sd0))
            prec = pt.diag(tau0)
            h = tau0 * mu0
            self._sigmas.append((f"prior parameter sigma of {rv.name}", sd0))
        for c in plan.children:
            y = pt.as_tensor(c.rv).astype(f64)
            jac = pt.broadcast_to(c.jac.astype(f64), (*y.shape, p)).reshape((-1, p))
            r = y if c.offset is None else y - c.offset.astype(f64)
            r = pt.broadcast_to(r, y.shape).reshape((-1,))
            self._sigmas.append(
                (f"sigma of child {c.rv.name} of {rv.name}", pt.as_tensor(c.extra).astype(f64))
            )
            w = pt.reciprocal(pt.sqr(pt.as_tensor(c.extra).astype(f64)))
            w = pt.broadcast_to(w, y.shape).reshape((-1,))
            jw = jac * w[:, None]
            prec = prec + (jw[:, :, None] * jac[:, None, :]).sum(axis=0)
            h = h + (jw * r[:, None]).sum(axis=0)
        # one output flags, per standard deviation, "all entries finite and > 0"
        flags = pt.stack([pt.all((s > 0) & (s < np.inf)) for _, s in self._sigmas])
        outs = model.replace_rvs_by_values([prec, h, flags, *(g for _, g in self._sigmas)])
        self._sigmas = [(what, g) for (what, _), g in zip(self._sigmas, outs[3:], strict=True)]
        outs = outs[:3]
        self._sigma_fns = {}  # compiled on the first invalid sigma, for the message
        value_vars = set(model.value_vars)
        inputs = [v for v in graph_inputs(outs) if v in value_vars]
        self._names = [v.name for v in inputs]
        self._inputs = inputs
        self._dtypes = [np.dtype(v.dtype) for v in inputs]
        ck = dict(compile_kwargs or {})
        ck.setdefault("on_unused_input", "ignore")
        self._fn = pytensor.function(inputs, outs, **ck)
        self._fn.trust_input = True

    def draw(self, point, rng):
        args = []
        for name, dtype in zip(self._names, self._dtypes, strict=True):
            value = point[name]
            if type(value) is not np.ndarray or value.dtype != dtype:
                value = np.asarray(value, dtype=dtype)
            args.append(value)
        prec, h, flags = self._fn(*args)  # fresh contiguous float64 arrays
        if not flags.all():
            self._raise_bad_sigma(flags, args)
        theta = _precision_draw(prec, h, rng.standard_normal(h.shape[0]))
        if theta.size and not theta[0] == theta[0]:  # the kernel returns NaNs if P is not PD
            draw_mvnormal_precision(rng, prec, h)  # raises ValueError with the reason
        return theta.reshape(self.shape)

    def _raise_bad_sigma(self, flags, args):
        """ValueError naming the first invalid standard deviation and its offending value."""
        i = int(np.flatnonzero(~flags)[0])
        what, graph = self._sigmas[i]
        if i not in self._sigma_fns:
            self._sigma_fns[i] = pytensor.function(
                self._inputs, graph, mode=_PY_MODE, on_unused_input="ignore"
            )
        _check_positive(self._sigma_fns[i](*args), what)
        raise ValueError(f"{what} must be finite and > 0")  # unreachable in practice


class ConjugateGibbs(BlockedStep):
    r"""Exact Gibbs draw of Beta / Gamma / Dirichlet / Normal parameters and of Normal /
    MvNormal regression coefficients from their full conditional given their (latent or
    observed) children; see the module docstring.

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
    transformed value is finite (see :func:`pymc_dp.kernels.conjugate.draw_beta`). A regression
    coefficient costs one call of a small compiled function (about 6 us for 100 records and 3
    coefficients) and a ``p x p`` Cholesky; it is compiled once, when the step is built.

    Every draw first checks, vectorised (a few numpy reductions), the values it is given and
    raises ``ValueError`` naming the offending child or prior parameter: standard deviations
    (children's ``sigma``, the prior's ``sigma``, regression included) and Beta / Gamma /
    Dirichlet hyperparameters must be finite and > 0, a Normal prior mean finite, and the
    children's values in their support (Bernoulli 0 or 1, Binomial ``0..n``, Poisson ``>= 0``,
    Categorical ``0..K-1``).
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
            cls = _RegressionUpdater if plan.family == "regression" else _Updater
            self._updaters.append(cls(plan, model, compile_kwargs))

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
        # the shared claim rule (pymc_dp.step_methods.claims): only models with an observed
        # Release, only parameters with a record among their children
        model = claim_model(var)
        if model is None or type(var.owner.op) not in _PRIOR_OPS:
            return Competence.INCOMPATIBLE
        try:
            plan = _analyze(var, model)
        except NotConjugateError:
            return Competence.INCOMPATIBLE
        if parameter_claimable([c.rv for c in plan.children], model):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE


#: The step classes of this module, for ``pymc.step_methods.STEP_METHODS``.
CONJUGATE_STEPS = (ConjugateGibbs,)
