r"""The conjugate pairs :class:`~pymc_dp.step_methods.conjugate.ConjugateGibbs` knows, as data.

Each supported prior is one :class:`ConjugatePair` (one row of :data:`PAIRS`) that holds
everything the step needs about it: the prior's op type, its hyperparameter names and their
check, the forward map of its default transform, and for every child family it is conjugate to
a :class:`ChildLink` (how the parameter enters the child, the child's support check and its
sufficient statistics), the posterior parameters and the draw. The graph analysis and the step
(:mod:`pymc_dp.step_methods.conjugate`) dispatch on this table only; the closed forms are in
:mod:`pymc_dp.kernels.conjugate`.

=====================  ======================================  ====================================
prior (family)         children: how the parameter enters      posterior, statistics per cell
=====================  ======================================  ====================================
``Beta`` (beta)        ``Bernoulli(p)``, ``Binomial(n, p)``    ``Beta(a + s, b + t - s)``
``Gamma`` (gamma)      ``Poisson(mu)``, ``Exponential(lam)``   ``Gamma(alpha + s_P + m_E,
                       (PyTensor: ``scale = 1 / lam``)         beta + m_P + s_E)`` (rate)
``Dirichlet``          ``Categorical(p)``                      ``Dirichlet(alpha + counts)``
``Normal`` (normal)    ``Normal(mu, sigma)``, sigma free of mu ``Normal``: precision-weighted
``InverseGamma``       ``Normal(m, c * sqrt(v))``, ``m`` and   ``InverseGamma(a + n / 2,
(invgamma)             ``c`` free of ``v``                     b + sum((x - m) / c)**2 / 2)``
``Normal`` mu and      mu ~ ``Normal(m0, c0 * sqrt(v))``,      joint ``(mu, v)``: ``v`` from its
``InverseGamma`` v     children ``Normal(mu, c * sqrt(v))``    marginal, then ``mu | v`` (block)
(normal_invgamma)
=====================  ======================================  ====================================

How a variance ``v`` may enter a child's ``sigma`` (:func:`sqrt_access`): ``sigma`` must be
``c * sqrt(v)`` with ``c`` free of ``v``, written with ``sqrt``, ``**`` by a constant, products,
quotients, ``abs`` and ``sign`` of such terms, sums of terms of the same degree, casts to a float
type and broadcasting by leading axes -- so ``sigma=pt.sqrt(v)``, ``sigma=v**0.5``,
``sigma=pt.sqrt(v / k)``, ``sigma=c * pt.sqrt(v)`` and ``tau=1 / v`` (PyMC writes
``sigma = |tau|**-0.5 * sign(tau)``) are recognised; ``sigma=v``, ``sigma=pt.sqrt(v + 1)``,
``sigma=pt.exp(v)`` are not (:class:`NotConjugateError`). ``v`` itself or ``v[idx]`` (an integer
index of its leading axis free of ``v``) is its only occurrence. The factor ``c`` is evaluated
as ``sigma`` with ``v`` replaced by ones.

Examples
--------
>>> [p.family for p in PAIRS]
['beta', 'gamma', 'dirichlet', 'normal', 'invgamma', 'normal_invgamma']
>>> from pytensor.tensor.random.basic import ExponentialRV, GammaRV
>>> pair_for(GammaRV).link(ExponentialRV).label
'Exponential'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.logprob.transforms import LogOddsTransform, LogTransform, SimplexTransform
from pytensor.graph.basic import Constant, equal_computations
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    DirichletRV,
    ExponentialRV,
    GammaRV,
    InvGammaRV,
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
    draw_invgamma,
    draw_normal,
    draw_normal_invgamma,
    gamma_poisson_posterior,
    invgamma_normal_posterior,
    normal_invgamma_posterior,
    normal_normal_posterior,
    sum_to_shape,
)

__all__ = ["PAIRS", "Cells", "ChildLink", "ConjugatePair", "NotConjugateError", "pair_for"]


class NotConjugateError(ValueError):
    """The parameter's prior and children do not form a supported conjugate pair."""


# ---- graph helpers ------------------------------------------------------------------------------
def depends_on(graphs, var, blockers) -> bool:
    """Whether ``var`` is an ancestor of ``graphs`` (not looking through ``blockers``)."""
    return var in set(ancestors(list(graphs), blockers=blockers))


def strip_expand_dims(expr):
    """Peel ``DimShuffle`` nodes that only insert broadcastable axes; return (core, orders)."""
    orders = []
    while expr.owner is not None and isinstance(expr.owner.op, DimShuffle):
        order = tuple(expr.owner.op.new_order)
        if tuple(o for o in order if o != "x") != tuple(range(expr.owner.inputs[0].ndim)):
            break  # a transpose or a dropped axis: not a pure broadcast
        orders.append(order)
        expr = expr.owner.inputs[0]
    return expr, orders[::-1]  # innermost first


def leading_index(expr):
    """If ``expr`` is ``base[idx]`` (one integer index on the leading axis) return (base, idx)."""
    node = expr.owner
    if node is None or len(node.inputs) != 2:
        return None
    if isinstance(node.op, AdvancedSubtensor) and tuple(node.op.idx_list) == (0,):
        base, idx = node.inputs
        if idx.dtype.startswith(("int", "uint")):
            return base, idx
    return None


def enters_itself(param, theta, blockers):
    """The parameter enters the slot as itself (broadcast, indexed): return (core, orders)."""
    return strip_expand_dims(param)


def enters_reciprocal(param, theta, blockers):
    """The slot holds ``1 / theta`` (Exponential's ``scale`` for a rate ``lam``)."""
    outer, orders_out = strip_expand_dims(param)
    node = outer.owner
    sop = getattr(getattr(node, "op", None), "scalar_op", None)
    inner = None
    if isinstance(sop, ps.Reciprocal):
        inner = node.inputs[0]
    elif isinstance(sop, ps.TrueDiv) and _is_one(node.inputs[0]):
        inner = node.inputs[1]
    if inner is None:
        raise NotConjugateError(
            f"{theta.name} does not enter as the rate (scale = 1 / {theta.name}): not conjugate"
        )
    core, orders_in = strip_expand_dims(inner)
    return core, orders_in + orders_out


def _is_one(var) -> bool:
    core, _ = strip_expand_dims(var)
    return isinstance(core, Constant) and np.all(np.asarray(core.data) == 1)


def _left_pad(op, ndim_in) -> bool:
    order = tuple(op.new_order)
    k = len(order) - ndim_in
    return k >= 0 and order == ("x",) * k + tuple(range(ndim_in))


_SAME_DEGREE = (ps.Abs, ps.Neg, ps.Cast, ps.Identity)


def _degree(expr, theta, blockers, accesses) -> Fraction:
    """``d`` such that ``expr = c * theta**d`` with ``c`` free of ``theta``; NotConjugateError
    for any other form. The occurrences of ``theta`` (itself or ``theta[idx]``) are collected
    in ``accesses``."""
    if expr is theta:
        accesses.add(expr)
        return Fraction(1)
    if not depends_on([expr], theta, blockers):
        return Fraction(0)
    indexed = leading_index(expr)
    if indexed is not None and indexed[0] is theta:
        if depends_on([indexed[1]], theta, blockers):
            raise NotConjugateError(f"the index into {theta.name} depends on {theta.name}")
        accesses.add(expr)
        return Fraction(1)
    node = expr.owner
    if isinstance(node.op, DimShuffle) and _left_pad(node.op, node.inputs[0].ndim):
        return _degree(node.inputs[0], theta, blockers, accesses)
    if not isinstance(node.op, Elemwise):
        raise NotConjugateError(f"{theta.name} enters through {node.op}")
    sop = node.op.scalar_op
    if isinstance(sop, ps.Pow):
        base, ex = node.inputs
        core = strip_expand_dims(ex)[0]
        if not isinstance(core, Constant) or np.size(core.data) != 1:
            raise NotConjugateError(f"{theta.name} is raised to a non-constant power")
        power = Fraction(float(np.asarray(core.data).item()))
        return _degree(base, theta, blockers, accesses) * power
    degs = [_degree(x, theta, blockers, accesses) for x in node.inputs]
    if isinstance(sop, ps.Mul):
        return sum(degs, Fraction(0))
    if isinstance(sop, ps.TrueDiv):
        return degs[0] - degs[1]
    if isinstance(sop, ps.Reciprocal):
        return -degs[0]
    if isinstance(sop, ps.Sqrt):
        return degs[0] / 2
    if isinstance(sop, ps.Sign):
        return Fraction(0)
    if isinstance(sop, ps.Cast) and not expr.dtype.startswith("float"):
        raise NotConjugateError(f"{theta.name} is cast to {expr.dtype} in sigma")
    if isinstance(sop, _SAME_DEGREE) or (isinstance(sop, ps.Add | ps.Sub) and len(set(degs)) == 1):
        return degs[0]
    raise NotConjugateError(f"{theta.name} enters through {sop}, not as c * sqrt({theta.name})")


def sqrt_access(sigma, theta, blockers):
    """``sigma = c * sqrt(theta)`` (module docstring): return (the access of theta, []).

    Raises NotConjugateError for any other form.

    Examples
    --------
    >>> v = pt.dscalar("v")
    >>> sqrt_access(3.0 * pt.sqrt(v / 2.0), v, [])[0] is v
    True
    >>> sqrt_access(pt.exp(v), v, [])
    Traceback (most recent call last):
    ...
    pymc_dp.step_methods.conjugate_pairs.NotConjugateError: v enters through exp, not as c * sqrt(v)
    """
    accesses: set = set()
    deg = _degree(sigma, theta, blockers, accesses)
    if deg != Fraction(1, 2):
        raise NotConjugateError(
            f"sigma is {theta.name}**{deg} times a factor, not c * sqrt({theta.name})"
        )
    first, *rest = accesses
    if any(not equal_computations([first], [a]) for a in rest):
        raise NotConjugateError(f"{theta.name} occurs in sigma through several expressions")
    return first, []


def at_unit(expr, theta, blockers):
    """``expr`` with ``theta`` replaced by ones (the factor ``c`` of ``c * sqrt(theta)``).

    Only the nodes between ``theta`` and ``expr`` are rebuilt: every other variable, and every
    random variable in ``blockers`` (other model variables, read at their current values), is
    kept as it is -- a cloned random variable would be a fresh random draw.

    Examples
    --------
    >>> v, s = pt.dscalar("v"), pt.dscalar("s")
    >>> float(at_unit(s * pt.sqrt(v), v, []).eval({s: 3.0}))
    3.0
    """
    ones = pt.as_tensor(np.ones(theta.type.shape, dtype=theta.dtype))
    memo = {theta: pt.specify_broadcastable(ones, *_bcast_axes(theta))}
    keep = set(blockers) - {theta}

    def rebuild(var):
        if var not in memo:
            node = var.owner
            if node is None or var in keep or not depends_on([var], theta, list(keep)):
                memo[var] = var
            else:
                new = node.clone_with_new_inputs([rebuild(i) for i in node.inputs], strict=False)
                memo.update(zip(node.outputs, new.outputs, strict=True))
        return memo[var]

    return rebuild(expr)


def _bcast_axes(var):
    return [i for i, s in enumerate(var.type.shape) if s == 1]


# ---- value checks -----------------------------------------------------------------------------
def first_bad(values, ok):
    """The first entry of ``values`` where the boolean array ``ok`` is False (for messages)."""
    values = np.broadcast_to(np.asarray(values), np.shape(ok))
    return values.ravel()[np.flatnonzero(~np.ravel(ok))[0]].item()


def check_positive(values, what):
    """Raise ValueError naming ``what`` unless every entry is finite and > 0 (NaN fails)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:  # the common case: one float comparison
        if not 0.0 < float(v) < np.inf:
            raise ValueError(f"{what} must be finite and > 0, got {float(v)!r}")
        return
    if v.size and not (v.min() > 0.0 and v.max() < np.inf):
        bad = first_bad(v, (v > 0.0) & (v < np.inf))
        raise ValueError(f"{what} must be finite and > 0, got {bad!r}")


def check_finite(values, what):
    """Raise ValueError naming ``what`` unless every entry is finite."""
    v = np.asarray(values, dtype=np.float64)
    if v.size and not np.isfinite(v.sum()):
        raise ValueError(f"{what} must be finite, got {first_bad(v, np.isfinite(v))!r}")


def check_support(kind, x, extra, what):
    """Raise ValueError naming ``what`` unless the child's values ``x`` lie in its support:
    Bernoulli {0, 1}, Binomial 0..n, Poisson 0, 1, ... (Categorical: see its statistics)."""
    if not x.size:
        return
    if x.dtype.kind == "f" and not np.array_equal(x, np.floor(x)):  # NaN also fails
        ok = x == np.floor(x)
        raise ValueError(f"{what} has a non-integer value {first_bad(x, ok)!r}")
    lo = x.min()
    if kind is BernoulliRV:
        if lo < 0 or x.max() > 1:
            bad = first_bad(x, (x == 0) | (x == 1))
            raise ValueError(f"{what} (Bernoulli) must be 0 or 1, got {bad!r}")
    elif kind is BinomialRV:
        n = np.asarray(extra)
        n_min = n.min() if n.size else 0
        if n_min < 0:
            raise ValueError(f"{what} (Binomial) has a negative n = {first_bad(n, n >= 0)!r}")
        if lo < 0 or (x.max() > n_min and np.any(x > n)):  # max <= min(n): no comparison
            ok = (x >= 0) & (x <= n)
            raise ValueError(
                f"{what} (Binomial) must be in 0..n, got {first_bad(x, ok)!r} "
                f"with n = {first_bad(np.broadcast_to(n, ok.shape), ok)!r}"
            )
    elif kind is PoissonRV and lo < 0:
        raise ValueError(f"{what} (Poisson) must be >= 0, got {first_bad(x, x >= 0)!r}")


# ---- statistics -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cells:
    """How a child's values map to the parameter's cells: ``eshape`` is the parameter's shape
    after broadcasting in the child (its values sum to it), ``base_shape`` the result's shape."""

    eshape: tuple
    base_shape: tuple

    def total(self, values) -> np.ndarray:
        """Per-cell sums of ``values`` (any shape broadcasting from ``eshape``).

        Examples
        --------
        >>> Cells((1, 3), (3,)).total(np.ones((4, 3))).tolist()
        [4.0, 4.0, 4.0]
        """
        if int(np.prod(self.eshape)) == 1:  # one parameter cell: a plain (integer-exact) sum
            return np.full(self.base_shape, float(np.sum(values)))
        v = np.asarray(values, dtype=np.float64)
        return sum_to_shape(v, self.eshape).reshape(self.base_shape)

    def count(self, x) -> np.ndarray:
        """Records per cell (uniform under broadcasting)."""
        return np.full(self.base_shape, float(x.size // max(int(np.prod(self.eshape)), 1)))

    def spread(self, x, per_cell) -> np.ndarray:
        """``per_cell`` (cell shape) broadcast back to the records ``x``."""
        return np.broadcast_to(np.reshape(per_cell, self.eshape), x.shape)


def _bernoulli_stats(x, extras, cells, what):
    check_support(BernoulliRV, x, None, what)
    return cells.total(x), cells.count(x)


def _binomial_stats(x, extras, cells, what):
    check_support(BinomialRV, x, extras[0], what)
    n = np.broadcast_to(np.asarray(extras[0], dtype=np.float64), x.shape)
    return cells.total(x), cells.total(n)


def _poisson_stats(x, extras, cells, what):  # (shape increment, rate increment)
    check_support(PoissonRV, x, None, what)
    return cells.total(x), cells.count(x)


def _exponential_stats(x, extras, cells, what):  # (shape increment, rate increment)
    if x.size and not (x.min() >= 0.0 and x.max() < np.inf):  # NaN fails too
        ok = (x >= 0.0) & (x < np.inf)
        raise ValueError(f"{what} (Exponential) must be finite and >= 0, got {first_bad(x, ok)!r}")
    return cells.count(x), cells.total(x)


def _categorical_stats(x, extras, cells, what):
    k = cells.eshape[-1]
    bshape = cells.eshape[:-1]
    if x.size and (x.min() < 0 or x.max() >= k):
        bad = first_bad(x, (x >= 0) & (x < k))
        raise ValueError(f"{what} (Categorical) must be in 0..{k - 1}, got {bad!r}")
    ncell = int(np.prod(bshape))
    if ncell == 1:
        counts = np.bincount(x.ravel(), minlength=k).astype(np.float64)
    else:
        pos = np.broadcast_to(np.arange(ncell).reshape(bshape), x.shape)
        counts = np.bincount((pos * k + x).ravel(), minlength=ncell * k).astype(np.float64)
    return (counts.reshape(cells.base_shape),)


def _normal_mean_stats(x, extras, cells, what):  # (sum x / sigma^2, sum 1 / sigma^2)
    check_positive(extras[0], f"sigma of {what}")
    w = 1.0 / np.square(np.asarray(extras[0], dtype=np.float64))
    if w.size == 1:
        w = w.reshape(())
        return cells.total(x) * w, cells.count(x) * w
    wx = np.broadcast_to(w, x.shape)
    return cells.total(x * wx), cells.total(wx)


def _variance_stats(x, extras, cells, what):  # (count, sum ((x - m) / c)^2)
    mean, c = extras
    check_positive(c, f"sigma of {what} (at variance 1)")
    z = (np.asarray(x, dtype=np.float64) - mean) / np.asarray(c, dtype=np.float64)
    q = cells.total(np.square(np.broadcast_to(z, x.shape)))
    check_finite(q, f"sum of squared residuals of {what}")
    return cells.count(x), q


def _nig_stats(x, extras, cells, what):  # (W, xbar, S, n) per cell, merged by _chan_merge
    (c,) = extras
    check_positive(c, f"sigma of {what} (at variance 1)")
    x = np.asarray(x, dtype=np.float64)
    w = np.broadcast_to(1.0 / np.square(np.asarray(c, dtype=np.float64)), x.shape)
    big_w = cells.total(w)
    xbar = _ratio(cells.total(w * x), big_w)
    s = cells.total(w * np.square(x - cells.spread(x, xbar)))
    check_finite(s, f"values of {what}")
    return big_w, xbar, s, cells.count(x)


def _chan_merge(acc, new):
    """Pooled (W, xbar, S, n) of two groups (Chan, Golub & LeVeque 1983, eq. 2.1b)."""
    w1, m1, s1, n1 = acc
    w2, m2, s2, n2 = new
    w = w1 + w2
    mean = m1 + (m2 - m1) * _ratio(w2, w)
    return w, mean, s1 + s2 + w1 * _ratio(w2, w) * np.square(m2 - m1), n1 + n2


def _ratio(a, b):
    """``a / b``, 0 where ``b == 0`` (a cell without records: its statistics are zero)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return np.divide(a, b, out=np.zeros(b.shape), where=b != 0)


# ---- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChildLink:
    """One child family of a conjugate pair.

    Attributes
    ----------
    op : type
        The child's op type.
    label : str
        Its name in messages (``"Bernoulli"``).
    slot : int
        Index among the child's ``dist_params`` of the parameter the prior enters.
    enters : callable
        ``(slot graph, theta, blockers) -> (access, orders)``: the access of ``theta``
        (``theta`` or ``theta[idx]``) and the broadcasting orders, or NotConjugateError.
    extras : callable
        ``(dist_params, theta, blockers) -> tuple of graphs`` the statistics read (Binomial ``n``,
        Normal ``sigma``, ...); none may depend on ``theta``.
    stats : callable
        ``(values, extras, cells, what) -> tuple`` of per-cell sufficient statistics; checks
        the values (ValueError naming ``what``).
    """

    op: type
    label: str
    slot: int
    enters: Callable
    extras: Callable
    stats: Callable

    def __reduce__(self):  # pickled as a reference to its row of PAIRS (rows hold lambdas)
        for pair in PAIRS:
            if self in pair.children:
                return _link_of, (pair.family, pair.children.index(self))
        raise TypeError(f"{self!r} is not a child link of a row of PAIRS")


@dataclass(frozen=True)
class ConjugatePair:
    """One conjugate prior family: hyperparameters, children, posterior and draw.

    ``check_hyper(hyper, labels)`` raises ValueError naming the variable (``labels``: the
    parameter's name, or the mean's and the variance's for a block) and the hyperparameter.
    ``posterior(hyper, totals, shape)`` maps the prior op's parameters (``hyper``, float64
    arrays) and the summed statistics to the posterior's parameters broadcast to ``shape``;
    ``draw(rng, post)`` makes one exact draw. A block pair (``partner`` set) updates the
    parameter together with a partner variable of prior op ``partner`` (here the Normal mean
    of a Normal--InverseGamma block); its statistics are merged by ``merge`` instead of added.
    """

    family: str
    prior: type
    children: tuple
    hyper_names: tuple
    check_hyper: Callable
    posterior: Callable
    draw: Callable
    transform: type | None = None
    partner: type | None = None
    merge: Callable | None = None
    category_axis: bool = False  # Dirichlet: the last axis is the simplex, never broadcast

    def __reduce__(self):  # pickled as a reference to its row of PAIRS (rows hold lambdas)
        if self not in PAIRS:
            raise TypeError(f"{self.family!r} pair is not a row of PAIRS")
        return _row, (self.family,)

    def link(self, op_type) -> ChildLink | None:
        """The child link for a child of op type ``op_type``, or None."""
        for c in self.children:
            if c.op is op_type:
                return c
        return None

    def combine(self, acc, stats):
        """Accumulate one child's statistics."""
        if acc is None:
            return tuple(stats)
        if self.merge is not None:
            return self.merge(acc, stats)
        return tuple(a + s for a, s in zip(acc, stats, strict=True))


def _positive_hyper(names):
    def check(hyper, labels):
        for value, hname in zip(hyper, names, strict=True):
            check_positive(value, f"prior parameter {hname} of {labels[-1]}")

    return check


def _check_gamma(hyper, labels):
    """alpha > 0; the op carries scale = 1 / beta, reported as beta."""
    name = labels[-1]
    alpha, scale = hyper
    if scale.size and not (scale.min() > 0.0 and scale.max() < np.inf):
        with np.errstate(divide="ignore"):
            rate = 1.0 / scale
        check_positive(rate, f"prior parameter beta of {name}")
        check_positive(scale, f"prior parameter beta of {name}")  # NaN
    check_positive(alpha, f"prior parameter alpha of {name}")


def _check_normal(hyper, labels, suffix=""):
    mu, sigma = hyper
    name = labels[0]
    if mu.size and not np.isfinite(mu.sum()):
        bad = first_bad(mu, np.isfinite(mu))
        raise ValueError(f"prior parameter mu of {name} must be finite, got {bad!r}")
    check_positive(sigma, f"prior parameter sigma of {name}{suffix}")


def _check_nig(hyper, labels):
    """labels = (mean, variance): the mean's (m0, sigma at variance 1), then alpha, beta."""
    m0, c0, a, b = hyper
    _check_normal((m0, c0), labels, f" (at {labels[1]} = 1)")
    _positive_hyper(("alpha", "beta"))((a, b), labels)


def _bcast(shape, *arrays):
    return tuple(np.broadcast_to(a, shape) for a in arrays)


def _beta_post(hyper, totals, shape):
    return _bcast(shape, *beta_binomial_posterior(*hyper, *totals))


def _gamma_post(hyper, totals, shape):
    alpha, scale = hyper  # PyTensor's gamma op carries scale = 1 / rate
    return _bcast(shape, *gamma_poisson_posterior(alpha, 1.0 / scale, *totals))


def _dirichlet_post(hyper, totals, shape):
    return (dirichlet_categorical_posterior(np.broadcast_to(hyper[0], shape), totals[0]),)


def _normal_post(hyper, totals, shape):
    return _bcast(shape, *normal_normal_posterior(*hyper, *totals))


def _invgamma_post(hyper, totals, shape):
    return _bcast(shape, *invgamma_normal_posterior(*hyper, *totals))


def _nig_post(hyper, totals, shape):
    m0, c0, a, b = hyper
    prior = (m0, 1.0 / np.square(c0), a, b)
    w, xbar, s, n = totals
    return _bcast(shape, *normal_invgamma_posterior(prior, w, xbar, (s, n)))


def _draw1(fn):
    return lambda rng, post: fn(rng, *post)


def _param(i):
    return lambda params, theta, blockers: (params[i],)


def _none(params, theta, blockers):
    return ()


def _variance_extras(params, theta, blockers):
    return params[0], at_unit(params[1], theta, blockers)


def _nig_extras(params, theta, blockers):
    return (at_unit(params[1], theta, blockers),)


_NORMAL_VARIANCE = ChildLink(NormalRV, "Normal", 1, sqrt_access, _variance_extras, _variance_stats)

#: The conjugate pairs, one row each; ConjugateGibbs and its graph analysis read only this.
PAIRS: tuple[ConjugatePair, ...] = (
    ConjugatePair(
        "beta",
        BetaRV,
        (
            ChildLink(BernoulliRV, "Bernoulli", 0, enters_itself, _none, _bernoulli_stats),
            ChildLink(BinomialRV, "Binomial", 1, enters_itself, _param(0), _binomial_stats),
        ),
        ("alpha", "beta"),
        _positive_hyper(("alpha", "beta")),
        _beta_post,
        _draw1(draw_beta),
        LogOddsTransform,
    ),
    ConjugatePair(
        "gamma",
        GammaRV,
        (
            ChildLink(PoissonRV, "Poisson", 0, enters_itself, _none, _poisson_stats),
            ChildLink(
                ExponentialRV, "Exponential", 0, enters_reciprocal, _none, _exponential_stats
            ),
        ),
        ("alpha", "beta"),
        _check_gamma,
        _gamma_post,
        _draw1(draw_gamma),
        LogTransform,
    ),
    ConjugatePair(
        "dirichlet",
        DirichletRV,
        (ChildLink(CategoricalRV, "Categorical", 0, enters_itself, _none, _categorical_stats),),
        ("a",),
        _positive_hyper(("a",)),
        _dirichlet_post,
        lambda rng, post: draw_dirichlet(rng, post[0]),
        SimplexTransform,
        category_axis=True,
    ),
    ConjugatePair(
        "normal",
        NormalRV,
        (ChildLink(NormalRV, "Normal", 0, enters_itself, _param(1), _normal_mean_stats),),
        ("mu", "sigma"),
        _check_normal,
        _normal_post,
        _draw1(draw_normal),
    ),
    ConjugatePair(
        "invgamma",
        InvGammaRV,
        (_NORMAL_VARIANCE,),
        ("alpha", "beta"),
        _positive_hyper(("alpha", "beta")),
        _invgamma_post,
        _draw1(draw_invgamma),
        LogTransform,
    ),
    ConjugatePair(
        "normal_invgamma",
        InvGammaRV,
        (ChildLink(NormalRV, "Normal", 1, sqrt_access, _nig_extras, _nig_stats),),
        ("mu", "sigma", "alpha", "beta"),
        _check_nig,
        _nig_post,
        _draw1(draw_normal_invgamma),
        LogTransform,
        partner=NormalRV,
        merge=_chan_merge,
    ),
)


def _row(family):
    return next(p for p in PAIRS if p.family == family)


def _link_of(family, i):
    return _row(family).children[i]


def pair_for(op_type, block: bool = False) -> ConjugatePair | None:
    """The row of :data:`PAIRS` for a prior of op type ``op_type`` (a block row if ``block``).

    Examples
    --------
    >>> from pytensor.tensor.random.basic import InvGammaRV, NormalRV
    >>> pair_for(InvGammaRV).family, pair_for(InvGammaRV, block=True).family
    ('invgamma', 'normal_invgamma')
    >>> pair_for(NormalRV).link(NormalRV).slot  # a Normal mean enters its children's mean
    0
    """
    for pair in PAIRS:
        if pair.prior is op_type and (pair.partner is not None) == block:
            return pair
    return None


def _logodds(p):
    return np.log(p) - np.log1p(-p)


def _simplex(theta):
    log_theta = np.log(theta)
    return log_theta[..., :-1] - log_theta.mean(axis=-1, keepdims=True)


#: numpy forward maps of the transforms the pairs' parameters may carry (cross-checked against
#: PyMC's ``Transform.forward`` in the tests)
FORWARD = {LogOddsTransform: _logodds, LogTransform: np.log, SimplexTransform: _simplex}
