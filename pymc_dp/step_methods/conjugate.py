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
``Gamma(alpha, beta)`` ``Exponential(lam)`` (scale ``1 / lam``)    ``Gamma(alpha + m, beta + s)``
``Dirichlet(alpha)``   ``Categorical(p)``                          ``Dirichlet(alpha + counts)``
``Normal(m0, s0)``     ``Normal(mu, sigma)``, sigma not the param  Normal, see the kernels module
``Normal`` (vector) /  ``Normal(a + X @ beta, sigma)``: a linear    ``N(P^-1 h, P^-1)``, kernels
``MvNormal(m0, S0)``   predictor, sigma not depending on beta      module (regression)
``InverseGamma(a, b)`` ``Normal(m, c * sqrt(v))``, m, c free of v  ``InvGamma(a + n/2, b + q/2)``
``Normal`` mu and      ``Normal(mu, c * sqrt(v))`` with            joint Normal-InverseGamma
``InverseGamma`` v     mu ~ ``Normal(m0, c0 * sqrt(v))``           (block), kernels module
=====================  ==========================================  ==============================

Each prior is one row of :data:`pymc_dp.step_methods.conjugate_pairs.PAIRS` (its children,
hyperparameters, checks, statistics, posterior and draw); this module only analyses the graph
against that table and applies it. A Gamma parameter may have Poisson and Exponential children
together. Which ``sigma`` expressions count as ``c * sqrt(v)`` (``pt.sqrt(v)``, ``v**0.5``,
``pt.sqrt(v / k)``, ``tau=1 / v``, ...) is listed in that module; anything else is refused.

Normal-InverseGamma block. When ``ConjugateGibbs`` is given (or assigned) both a Normal mean
``mu`` and an InverseGamma variance ``v`` with: ``mu ~ Normal(m0, c0 * sqrt(v))`` (``m0`` and
``c0`` free of ``v``), ``mu`` and ``v`` of the same shape, and every child of ``mu`` -- which
must also be every child of ``v`` besides ``mu`` -- a ``Normal(mu, c * sqrt(v))`` whose mean
is ``mu`` itself and whose ``sigma`` reads ``v`` itself (both broadcast by leading axes only,
no indexing), it draws ``(mu, v)`` jointly: ``v`` from its marginal posterior, then ``mu``
given ``v``. Given one of them alone, the other is held fixed: ``mu`` is a Normal-Normal update
with the current ``v``, ``v`` an InverseGamma update whose children are ``mu`` and the ``x``.
:func:`conjugate_family` names the single-variable family ("normal", "invgamma").

Derivations are in :mod:`pymc_dp.kernels.conjugate`. The parameter may be a scalar or an array
(for a Dirichlet, a stack of simplices along the last axis); in a child it must enter as the
conjugate parameter *itself* (an Exponential's rate as ``scale = 1 / lam``, a variance as
``sigma = c * sqrt(v)``), possibly broadcast (``ExpandDims``) and possibly indexed along its
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
(log-odds for Beta, log for Gamma and InverseGamma, simplex coordinates for Dirichlet).

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
from pymc.model import Model, modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.random.basic import InvGammaRV, MvNormalRV, NormalRV
from pytensor.tensor.subtensor import AdvancedSubtensor, Subtensor

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.kernels.conjugate import _precision_draw, draw_mvnormal_precision
from pymc_dp.step_methods.claims import claim_model, parameter_claimable
from pymc_dp.step_methods.conjugate_pairs import (
    FORWARD,
    PAIRS,
    Cells,
    NotConjugateError,
    at_unit,
    check_positive,
    check_support,
    depends_on,
    leading_index,
    pair_for,
    sqrt_access,
    strip_expand_dims,
)

__all__ = [
    "CONJUGATE_STEPS",
    "ConjugateGibbs",
    "ConjugateGibbsState",
    "NotConjugateError",
    "conjugate_family",
]

_PRIOR_OPS = (*{pair.prior for pair in PAIRS}, MvNormalRV)
_FORWARD = FORWARD  # numpy forward maps of the parameters' transforms (kept for the tests)
_check_support = check_support
_check_positive = check_positive
_PY_MODE = Mode(linker="py", optimizer="fast_compile")


# ---- graph analysis --------------------------------------------------------------------------
@dataclass
class _ChildPlan:
    rv: object
    link: object  # the ChildLink of the pair (None for a regression child)
    orders: list  # expand-dims new_orders, innermost first
    index: object | None  # integer index graph (theta[index]) or None
    extras: tuple = ()  # graphs the statistics read (Binomial n, Normal sigma, ...)
    offset: object | None = None  # regression: mean = offset + jac @ beta (graphs)
    jac: object | None = None

    @property
    def extra(self):
        """The one extra graph (regression children: their sigma)."""
        return self.extras[0] if self.extras else None


@dataclass
class _Plan:
    rv: object
    family: str
    children: list[_ChildPlan] = field(default_factory=list)
    pair: object | None = None  # the ConjugatePair row (None for a regression)
    partner: object | None = None  # block pair: the Normal mean updated with rv
    partner_hyper: tuple = ()  # block pair: (m0, sigma of the mean at variance 1) graphs


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


def _check_parameter(rv, model: Model) -> None:
    """A free variable with a static shape, a known transform and no Potential on it."""
    if rv not in model.free_RVs:
        raise NotConjugateError(f"{rv.name} is not a free variable of the model")
    if any(s is None for s in rv.type.shape):
        raise NotConjugateError(f"{rv.name} has no static shape")
    transform = model.rvs_to_transforms.get(rv)
    if transform is not None and type(transform) not in FORWARD:
        raise NotConjugateError(f"{rv.name} has an unsupported transform {transform}")
    for pot in model.potentials:
        if depends_on([pot], rv, list(model.basic_RVs)):
            raise NotConjugateError(f"Potential {pot.name} depends on {rv.name}")


def _children(rv, model: Model) -> list:
    all_rvs = list(model.basic_RVs)
    return [c for c in all_rvs if c is not rv and depends_on(c.owner.inputs, rv, all_rvs)]


def _analyze_direct(rv, model: Model) -> _Plan:
    """The plan of a parameter whose prior is a row of ``PAIRS``; NotConjugateError if not."""
    node = getattr(rv, "owner", None)
    pair = None if node is None else pair_for(type(node.op))
    if pair is None:
        raise NotConjugateError(
            f"the prior of {rv} is not Beta, Gamma, Dirichlet, Normal or InverseGamma"
        )
    _check_parameter(rv, model)
    plan = _Plan(rv=rv, family=pair.family, pair=pair)
    blockers = list(model.basic_RVs)
    plan.children = [_child_plan(pair, rv, c, blockers) for c in _children(rv, model)]
    if not plan.children:
        raise NotConjugateError(f"{rv.name} has no children")
    return plan


def _child_plan(pair, rv, child, blockers) -> _ChildPlan:
    """How ``rv`` enters ``child`` under ``pair``; NotConjugateError naming the child if not."""
    cop = child.owner.op
    link = pair.link(type(cop))
    if link is None:
        raise NotConjugateError(
            f"child {child.name} of {rv.name} is {type(cop).__name__}, not conjugate to "
            f"a {pair.family} prior"
        )
    params = list(cop.dist_params(child.owner))
    others = [p for i, p in enumerate(params) if i != link.slot] + [cop.size_param(child.owner)]
    if depends_on(others, rv, blockers):
        raise NotConjugateError(
            f"{rv.name} enters another parameter (or the size) of child {child.name}"
        )
    try:
        core, orders = link.enters(params[link.slot], rv, blockers)
    except NotConjugateError as err:
        raise NotConjugateError(f"child {child.name} of {rv.name}: {err}") from None
    index = None
    if core is not rv:
        indexed = leading_index(core)
        min_ndim = 2 if pair.category_axis else 1
        if indexed is None or indexed[0] is not rv or rv.ndim < min_ndim:
            raise NotConjugateError(
                f"{rv.name} does not enter child {child.name} as its conjugate parameter "
                "(only broadcasting and indexing of the leading axis are supported)"
            )
        index = indexed[1]
        if depends_on([index], rv, blockers):
            raise NotConjugateError(f"the index into {rv.name} depends on {rv.name}")
    if pair.category_axis and orders and any(o[-1] == "x" for o in orders):
        raise NotConjugateError(f"the category axis of {rv.name} is broadcast in {child.name}")
    return _ChildPlan(child, link, orders, index, tuple(link.extras(params, rv, blockers)))


# ---- Normal-InverseGamma block: a Normal mean and an InverseGamma variance drawn jointly ------
def _analyze_block(mu, v, model: Model) -> _Plan:
    """The joint plan of ``(mu, v)`` (module docstring, "Normal-InverseGamma block")."""
    pair = pair_for(InvGammaRV, block=True)
    if (
        type(getattr(v.owner, "op", None)) is not pair.prior
        or type(mu.owner.op) is not pair.partner
    ):
        raise NotConjugateError(f"{mu.name}, {v.name} are not a Normal mean and an InverseGamma")
    for rv in (mu, v):
        _check_parameter(rv, model)
    if mu.type.shape != v.type.shape or model.rvs_to_transforms.get(mu) is not None:
        raise NotConjugateError(
            f"{mu.name} and {v.name} differ in shape (or {mu.name} is transformed)"
        )
    blockers = list(model.basic_RVs)
    m0, s0 = mu.owner.op.dist_params(mu.owner)
    if depends_on([m0, mu.owner.op.size_param(mu.owner)], v, blockers):
        raise NotConjugateError(f"the prior mean of {mu.name} depends on {v.name}")
    if sqrt_access(s0, v, blockers)[0] is not v:
        raise NotConjugateError(f"the prior sigma of {mu.name} is not c * sqrt({v.name})")
    kids = _children(mu, model)
    if {c for c in _children(v, model) if c is not mu} != set(kids) or not kids:
        raise NotConjugateError(
            f"the children of {mu.name} and of {v.name} (besides {mu.name}) differ"
        )
    c0 = at_unit(s0, v, blockers)
    plan = _Plan(v, pair.family, pair=pair, partner=mu, partner_hyper=(m0, c0))
    plan.children = [_block_child(pair, mu, v, c, blockers) for c in kids]
    return plan


def _block_child(pair, mu, v, child, blockers) -> _ChildPlan:
    """A child ``Normal(mu, c * sqrt(v))``, both broadcast by leading axes only."""
    link = pair.link(type(child.owner.op))
    if link is None:
        raise NotConjugateError(f"child {child.name} of {mu.name} is not Normal")
    params = list(child.owner.op.dist_params(child.owner))
    core, orders = strip_expand_dims(params[0])
    size = child.owner.op.size_param(child.owner)
    left = all(o[: o.count("x")] == ("x",) * o.count("x") for o in orders)
    if core is not mu or not left or depends_on([params[1], size], mu, blockers):
        raise NotConjugateError(f"{mu.name} is not the mean of child {child.name} itself")
    if (
        depends_on([params[0], size], v, blockers)
        or sqrt_access(params[1], v, blockers)[0] is not v
    ):
        raise NotConjugateError(f"the sigma of child {child.name} is not c * sqrt({v.name})")
    return _ChildPlan(child, link, [], None, tuple(link.extras(params, v, blockers)))


def _blocks(rvs, model: Model) -> dict:
    """``{v: mu}`` for the Normal-InverseGamma blocks among ``rvs`` (each variable once)."""
    out, used = {}, set()
    for v in rvs:
        if type(getattr(v.owner, "op", None)) is not InvGammaRV:
            continue
        for mu in rvs:
            if mu in used or mu is v or type(getattr(mu.owner, "op", None)) is not NormalRV:
                continue
            try:
                _analyze_block(mu, v, model)
            except NotConjugateError:
                continue
            out[v] = mu
            used.update((mu, v))
            break
    return out


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
    if not depends_on([expr], rv, blockers):
        return expr, None
    node = expr.owner
    op = None if node is None else node.op
    lin = lambda x: _linearize(x, rv, p, blockers)  # noqa: E731
    if isinstance(op, DimShuffle):
        off, jac = lin(node.inputs[0])
        order = tuple(op.new_order)
        return (
            None if off is None else off.dimshuffle(*order),
            jac.dimshuffle(*order, node.inputs[0].ndim),
        )
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, ps.Cast):
        if not expr.dtype.startswith("float"):
            raise NotConjugateError(f"{rv.name} is cast to {expr.dtype} in a child's mean")
        return lin(node.inputs[0])  # the statistic is float64 anyway
    if isinstance(op, Elemwise) and isinstance(op.scalar_op, _LINEAR_ELEMWISE):
        return _linearize_elemwise(node, rv, [lin(x) for x in node.inputs])
    if isinstance(op, CAReduce) and isinstance(op.scalar_op, ps.Add):
        x = node.inputs[0]
        axis = tuple(range(x.ndim)) if op.axis is None else tuple(op.axis)
        off, jac = lin(x)
        return (None if off is None else off.sum(axis=axis)), jac.sum(axis=axis)
    if isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot)):
        return _linearize_dot(node, rv, lin)
    if isinstance(op, Subtensor | AdvancedSubtensor):
        if depends_on(node.inputs[1:], rv, blockers):
            raise NotConjugateError(f"an index depends on {rv.name}")
        off, jac = lin(node.inputs[0])
        idx = node.inputs[1:]
        if isinstance(op, AdvancedSubtensor) and tuple(op.idx_list) != (0,):
            raise NotConjugateError(f"unsupported advanced indexing of {rv.name}")
        return (None if off is None else op(off, *idx)), op(jac, *idx)
    what = type(op).__name__ if op is not None else str(expr)
    raise NotConjugateError(
        f"{rv.name} enters a child's mean through {what}, not as a linear predictor"
    )


def _linearize_elemwise(node, rv, parts):
    """``+``, ``-``, negation, products and quotients; ``parts`` are the inputs' (off, jac)."""
    sop = node.op.scalar_op
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


def _linearize_dot(node, rv, lin):
    """``a @ b`` of 2-D operands, one of them free of ``rv``."""
    a, b = node.inputs
    if a.ndim != 2 or b.ndim != 2:
        raise NotConjugateError(f"{rv.name} enters a dot product of operands that are not 2-D")
    oa, ja = lin(a)
    ob, jb = lin(b)
    if ja is not None and jb is not None:
        raise NotConjugateError(f"{rv.name} enters both operands of a dot product")
    if ja is not None:
        off = None if oa is None else (oa[:, :, None] * b[None, :, :]).sum(axis=1)
        return off, _matmul(ja, b, True)
    off = None if ob is None else (a[:, :, None] * ob[None, :, :]).sum(axis=1)
    return off, _matmul(a, jb, False)


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
        if depends_on([pot], rv, all_rvs):
            raise NotConjugateError(f"Potential {pot.name} depends on {rv.name}")
    plan = _Plan(rv=rv, family="regression")
    for child in all_rvs:
        if child is rv or not depends_on(child.owner.inputs, rv, all_rvs):
            continue
        cop = child.owner.op
        if type(cop) is not NormalRV:
            raise NotConjugateError(
                f"child {child.name} of {rv.name} is {type(cop).__name__}, not Normal"
            )
        mu, sigma = cop.dist_params(child.owner)
        if depends_on([sigma, cop.size_param(child.owner)], rv, all_rvs):
            raise NotConjugateError(
                f"{rv.name} enters the sigma (or the size) of child {child.name}"
            )
        offset, jac = _linearize(mu, rv, p, all_rvs)
        if any(g is not None and depends_on([g], rv, all_rvs) for g in (offset, jac)):
            raise NotConjugateError(f"could not separate {rv.name} from the mean of {child.name}")
        plan.children.append(_ChildPlan(child, None, [], None, (sigma,), offset, jac))
    if not plan.children:
        raise NotConjugateError(f"{rv.name} has no children")
    return plan


def conjugate_family(rv, model: Model | None = None) -> str | None:
    """The conjugate family ("beta", "gamma", "dirichlet", "normal", "invgamma", "regression")
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


# ---- numeric side ----------------------------------------------------------------------------
def _expanded_shape(shape, orders):
    for order in orders:
        shape = tuple(1 if o == "x" else shape[o] for o in order)
    return shape


def _quantity(expr, model: Model, outs: list) -> _Quantity:
    """How the update reads ``expr``: a point entry, a constant, a shared value, or an output
    (appended to ``outs``) of the one compiled function of the point."""
    [rep] = model.replace_rvs_by_values([pt.as_tensor(expr)])
    if rep in set(model.value_vars):
        return _Quantity("point", rep.name)
    if isinstance(rep, SharedVariable):
        return _Quantity("shared", rep)
    inputs = [v for v in graph_inputs([rep]) if not isinstance(v, Constant)]
    if not inputs:
        return _Quantity("const", np.asarray(pytensor.function([], rep, mode=_PY_MODE)()))
    outs.append(rep)
    return _Quantity("compiled", len(outs) - 1)


class _Updater:
    """Draws one parameter from its full conditional; built from a :class:`_Plan`."""

    def __init__(self, plan: _Plan, model: Model, compile_kwargs):
        rv = plan.rv
        self.pair = plan.pair
        self.family = plan.family
        self.labels = tuple(v.name for v in (plan.partner, rv) if v is not None)  # messages
        self.value_name = model.rvs_to_values[rv].name
        self.shape = tuple(int(s) for s in rv.type.shape)
        transform = model.rvs_to_transforms.get(rv)
        self.forward = None if transform is None else FORWARD[type(transform)]
        outs = []

        def q(expr):
            return _quantity(expr, model, outs)

        hyper = [*plan.partner_hyper, *rv.owner.op.dist_params(rv.owner)]  # block: (m0, c0) first
        self.hyper = [q(p) for p in hyper]
        self.children = [
            (
                c.link,
                q(c.rv),
                c.orders,
                None if c.index is None else q(c.index),
                tuple(q(e) for e in c.extras),
                f"child {c.rv.name} of {rv.name}",
            )
            for c in plan.children
        ]
        self._fn = None
        if outs:
            ck = dict(compile_kwargs or {})
            ck.setdefault("on_unused_input", "ignore")
            self._fn = model.compile_fn(outs, inputs=model.value_vars, point_fn=True, **ck)

    def families(self) -> dict[str, str]:
        return {self.value_name: self.family}

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

    def _child_stats(self, child, point, compiled):
        """The pair's statistics of one child (an entry of ``self.children``): one pass over
        its values."""
        link, xq, orders, iq, eqs, what = child
        x = np.asarray(xq.get(point, compiled))
        extras = tuple(e.get(point, compiled) for e in eqs)
        if iq is None:
            cells = Cells(_expanded_shape(self.shape, orders), self.shape)
            return link.stats(x, extras, cells, what)
        idx = np.asarray(iq.get(point, compiled))
        base = idx.shape + self.shape[1:]
        cells = Cells(_expanded_shape(base, orders), base)
        return [self._scatter(st, idx) for st in link.stats(x, extras, cells, what)]

    def _totals(self, point, compiled):
        """The pair's statistics of every child, accumulated (one pass over each child)."""
        acc = None
        for child in self.children:
            acc = self.pair.combine(acc, self._child_stats(child, point, compiled))
        return acc

    def _posterior(self, point):
        compiled = self._fn(point) if self._fn is not None else None
        hyper = [np.asarray(q.get(point, compiled), dtype=np.float64) for q in self.hyper]
        self.pair.check_hyper(hyper, self.labels)
        return self.pair.posterior(hyper, self._totals(point, compiled), self.shape)

    def _finish(self, theta, forward):
        theta = np.asarray(theta, dtype=np.float64).reshape(self.shape)
        if forward is not None:
            theta = forward(theta)
        return np.asarray(theta, dtype=np.float64)  # a 0-d array, never a numpy scalar

    def update(self, point, rng) -> dict:
        """``{value name: new value}``: one exact draw from the full conditional."""
        theta = self.pair.draw(rng, self._posterior(point))
        return {self.value_name: self._finish(theta, self.forward)}


class _BlockUpdater(_Updater):
    """Draws a Normal mean and its InverseGamma variance jointly (Normal-InverseGamma block):
    the hyperparameters are ``(m0, sigma of the mean at variance 1, alpha, beta)``."""

    def __init__(self, plan: _Plan, model: Model, compile_kwargs):
        super().__init__(plan, model, compile_kwargs)
        self.partner_name = model.rvs_to_values[plan.partner].name

    def families(self) -> dict[str, str]:
        return {self.partner_name: self.family, self.value_name: self.family}

    def update(self, point, rng) -> dict:
        mu, v = self.pair.draw(rng, self._posterior(point))
        return {
            self.partner_name: self._finish(mu, None),
            self.value_name: self._finish(v, self.forward),
        }


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

    def update(self, point, rng) -> dict:
        """``{value name: new value}``: one exact draw from the full conditional."""
        return {self.value_name: self.draw(point, rng)}

    def families(self) -> dict[str, str]:
        return {self.value_name: self.family}

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


@dataclass_state
class ConjugateGibbsState(StepMethodState):
    """Sampling state of :class:`ConjugateGibbs`: its variables and its generator (the draws
    are exact and independent of the previous value, so nothing else carries over)."""


class ConjugateGibbs(ForgetsInitialPoint, BlockedStep):
    r"""Exact Gibbs draw of parameters from their full conditional given their (latent or
    observed) children, for every conjugate pair of
    :data:`~pymc_dp.step_methods.conjugate_pairs.PAIRS` and for Normal / MvNormal regression
    coefficients; see the module docstring.

    Parameters
    ----------
    vars : list
        Parameters (model variables or their value variables) to update. Each must have a
        supported conjugate structure (else ``ValueError``); several are updated in turn. A
        Normal mean and an InverseGamma variance that form a Normal-InverseGamma block (module
        docstring) are drawn jointly when both are given.
    model : pm.Model, optional
    rng : seed or numpy Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``), so ``random_seed`` decides draws.
        ``sampling_state`` holds it (:class:`ConjugateGibbsState`).
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
    Dirichlet / InverseGamma hyperparameters must be finite and > 0, a Normal prior mean
    finite, and the children's values in their support (Bernoulli 0 or 1, Binomial ``0..n``,
    Poisson ``>= 0``, Exponential finite and ``>= 0``, Categorical ``0..K-1``).

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as model:
    ...     v = pm.InverseGamma("v", 3.0, 2.0)
    ...     mu = pm.Normal("mu", 0.0, sigma=pm.math.sqrt(v))
    ...     x = pm.Normal("x", mu, sigma=pm.math.sqrt(v), observed=np.array([0.5, 1.5]))
    ...     step = ConjugateGibbs([mu, v], rng=1)
    >>> step.families
    {'mu': 'normal_invgamma', 'v_log__': 'normal_invgamma'}
    """

    name = "conjugate_gibbs"
    stats_dtypes_shapes: ClassVar[dict] = {}
    _state_class = ConjugateGibbsState

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
        rvs = [model.values_to_rvs[v] for v in value_vars]
        blocks = _blocks(rvs, model)
        partners = set(blocks.values())
        self._updaters = []
        for rv in rvs:
            if rv in partners:
                continue  # drawn with its variance
            try:
                plan = (
                    _analyze_block(blocks[rv], rv, model) if rv in blocks else _analyze(rv, model)
                )
            except NotConjugateError as err:
                raise ValueError(f"ConjugateGibbs cannot update {rv.name}: {err}") from None
            self._updaters.append(_updater_class(plan)(plan, model, compile_kwargs))

    @property
    def families(self) -> dict[str, str]:
        """Value-variable name -> conjugate family used for it."""
        out = {}
        for u in self._updaters:
            out.update(u.families())
        return out

    def step(self, point):
        new_point = dict(point)  # the incoming arrays are never written to
        for updater in self._updaters:
            new_point.update(updater.update(new_point, self.rng))
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


def _updater_class(plan: _Plan):
    if plan.family == "regression":
        return _RegressionUpdater
    return _BlockUpdater if plan.partner is not None else _Updater


#: The step classes of this module, for ``pymc.step_methods.STEP_METHODS``.
CONJUGATE_STEPS = (ConjugateGibbs,)
