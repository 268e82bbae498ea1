r"""Replace-one sensitivity of a release's statistic, proven from its PyTensor graph.

A :class:`~pymc_dp.distributions.release.Release` states the sensitivity of its statistic
``T`` through its mechanism. This module bounds the true replace-one sensitivity from the
graph of ``T`` alone, without sampling record configurations:

.. math::

    \Delta_p(T) = \max_{x \simeq x'} \lVert T(x) - T(x') \rVert_p, \qquad p \in \{1, 2\},

where ``x`` and ``x'`` differ in one record (one row of the record variables, replaced by any
value of its support). The records are the random variables the statistic reads directly
(:func:`~pymc_dp.distributions.release.record_parents`); variables with the same leading
length form one record set (a record is row ``i`` of each of them), a scalar variable is a
record by itself. The support of a record comes from its distribution (Bernoulli ``{0, 1}``,
Categorical ``{0..K-1}``, Binomial ``{0..n}``, Uniform and Beta intervals, ``[0, inf)`` for
counts and positive laws, the whole line otherwise); data (``pm.Data``) are read at their
current value.

Method (abstract interpretation, one pass over the graph). Every node gets

* an interval ``[lo, hi]`` per element over all record values;
* for each record set, a bound ``d`` per element on how far the element moves when one record
  changes, and bounds on the L1 and L2 norms of the whole change: per row while the node is
  *row-local* (row ``i`` reads only record ``i``), for the whole node once rows are mixed
  (a sum over records moves by at most the largest row change);
* when a record's support is finite and small, the exact row values for every value of the
  record (an enumeration): indicators, one-hot counts, lookups and comparisons of records are
  then exact, e.g. a one-hot count vector has L1 sensitivity 2, not ``K``.

Sums and differences add the bounds, products with bounded factors scale them, ``abs``,
``clip``, ``minimum``/``maximum`` do not increase them, a comparison may flip (0 to 1), a
``switch`` whose condition depends on the records may jump between its branches: the jump is
bounded with the branches' intervals refined by the condition (``switch(eq(s, 50), 1000, s)``
with ``s`` a count of 50 Bernoulli records jumps from 1000 to at least 49: 951). Every bound
is an upper bound (sound); it is exact for linear statistics of records with box supports
(sums, weighted sums, ``X'y``) and for everything computed row by row from enumerated records
before the sum over records.

An operation without a rule (or a bound that is infinite, e.g. a sum of unclipped Normal
records) gives no proof: :class:`SensitivityProof` says why, and
:func:`check_declared_sensitivity` warns (:class:`SensitivityProofWarning`); the sampled check
of :class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation` stays as a second line.

Examples
--------
>>> import pymc as pm, pytensor.tensor as pt
>>> with pm.Model():
...     x = pm.Bernoulli("x", p=0.5, shape=50)
>>> prove_sensitivity(pt.switch(pt.eq(x.sum(), 50), 1000, x.sum())).l1
951.0
>>> with pm.Model():
...     c = pm.Categorical("c", p=[0.2, 0.3, 0.5], shape=10)
>>> p = prove_sensitivity(pt.eq(c[:, None], pt.arange(3)).sum(0))
>>> float(p.l1), round(float(p.l2), 6)
(2.0, 1.414214)
"""

from __future__ import annotations

import contextlib
import itertools
import math
import warnings
import weakref
from dataclasses import dataclass, field, replace

import numpy as np
import pytensor.scalar.basic as ps
import pytensor.scalar.math as psm
from pytensor.compile.ops import DeepCopyOp, ViewOp
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.basic import (
    Alloc,
    ARange,
    Join,
    MakeVector,
    ScalarFromTensor,
    TensorFromScalar,
)
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    Subtensor,
    indices_from_subtensor,
)

__all__ = [
    "SensitivityProof",
    "SensitivityProofWarning",
    "check_declared_sensitivity",
    "prove_sensitivity",
    "sensitivity_norm",
    "witness_change",
]

#: largest joint support of one record that is enumerated
MAX_ENUM = 1024
#: largest enumeration array (values) kept for a node
MAX_ENUM_SIZE = 4_000_000
#: relative slack for float rounding of the proof when comparing with a declared sensitivity
RTOL = 1e-9
#: mechanism families whose sensitivity is an L2 bound (the others: L1)
L2_FAMILIES = frozenset({"gaussian", "discrete_gaussian"})


_SKIP_BUILD_CHECK = [False]


@contextlib.contextmanager
def _unchecked():
    """Tests of the second line (``DataAugmentation``'s sampled check) build models whose
    declared sensitivity is wrong on purpose: inside this block ``Release`` does not check it."""
    _SKIP_BUILD_CHECK[0] = True
    try:
        yield
    finally:
        _SKIP_BUILD_CHECK[0] = False


class SensitivityProofWarning(UserWarning):
    """No sensitivity bound could be proven from a release's statistic (see the message).

    Examples
    --------
    Unclipped Normal records have no bounded sum, so the declared sensitivity is not proven
    (the sampled check of the records' steps stays):

    >>> import warnings
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model():
    ...     x = pm.Normal("x", np.float64(0.0), np.float64(1.0), shape=5)
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=0.5)
    >>> any(issubclass(w.category, pmdp.SensitivityProofWarning) for w in caught)
    True
    """


@dataclass(frozen=True)
class SensitivityProof:
    """What :func:`prove_sensitivity` proved about a statistic.

    Attributes
    ----------
    l1, l2 : float
        Upper bounds on the replace-one L1 and L2 sensitivity (``inf`` when none is proven).
    proven : bool
        Whether both bounds are finite.
    reason : str or None
        Why no finite bound was proven (an operation without a rule, an unbounded record).
    records : tuple of str
        Names of the record variables the statistic reads.

    Examples
    --------
    >>> SensitivityProof(l1=2.0, l2=1.5, proven=True, reason=None, records=("x",)).bound("l2")
    1.5
    """

    l1: float
    l2: float
    proven: bool
    reason: str | None
    records: tuple = ()

    def bound(self, norm: str) -> float:
        """The bound in ``norm`` (``"l1"`` or ``"l2"``)."""
        if norm not in ("l1", "l2"):
            raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
        return self.l1 if norm == "l1" else self.l2


class _Unprovable(Exception):
    """No rule: the message says which operation or input."""


# ---- abstract values ----------------------------------------------------------------------


@dataclass
class _Ch:
    """Change bounds of a node for one record set.

    ``axis``: the record axis while the node is row-local (None: rows mixed). ``d``: per element
    (node shape). ``l1``, ``l2``: per row (shape (n,)) when row-local, else scalars (shape ()).
    ``enum``: exact values, shape ``(S, *node shape)`` (the record axis may be 1: the same for
    every row), ``S`` the joint support of one record, or None.
    """

    axis: int | None
    d: np.ndarray
    l1: np.ndarray
    l2: np.ndarray
    enum: np.ndarray | None = None


@dataclass
class _AV:
    lo: np.ndarray
    hi: np.ndarray
    integer: bool
    ch: dict = field(default_factory=dict)
    value: np.ndarray | None = None

    @property
    def shape(self):
        return self.lo.shape


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _smul(a, b):
    """Product with 0 * inf = 0 (a zero change times an unbounded factor is no change)."""
    a, b = np.broadcast_arrays(_f(a), _f(b))
    with np.errstate(invalid="ignore", over="ignore"):
        out = a * b
    return np.where((a == 0) | (b == 0), 0.0, out)


def _exact(value, integer=None) -> _AV:
    v = _f(value)
    if integer is None:
        integer = bool(np.all(np.isfinite(v)) and np.all(v == np.round(v)))
    return _AV(lo=v, hi=v, integer=integer, value=v)


def _width(lo, hi):
    with np.errstate(invalid="ignore"):
        w = hi - lo
    return np.where(np.isnan(w), np.inf, w)


def _clean(lo, hi):
    lo = np.where(np.isnan(lo), -np.inf, lo)
    hi = np.where(np.isnan(hi), np.inf, hi)
    return lo, hi


def _amax(a, axis=None):
    a = _f(a)
    if a.size == 0:
        return np.zeros(()) if axis is None else np.zeros(np.delete(a.shape, axis))
    return np.max(a, axis=axis)


def _row_reduce(arr, axis, fn):
    """``fn`` over every axis but ``axis`` (per row), shape (n,)."""
    arr = _f(arr)
    other = tuple(i for i in range(arr.ndim) if i != axis)
    return fn(arr, axis=other) if other else arr.copy()


def _finish(ch: _Ch, lo, hi) -> _Ch:
    """Clamp ``d`` by the node's width and the norms by ``d`` (every bound stays sound)."""
    d = np.minimum(_f(ch.d), _width(lo, hi))
    d = np.where(np.isnan(d), np.inf, d)
    if ch.axis is None:
        l1 = np.minimum(_f(ch.l1), np.sum(d))
        l2 = np.minimum(np.minimum(_f(ch.l2), np.sqrt(np.sum(d * d))), l1)
    else:
        l1 = np.minimum(_f(ch.l1), _row_reduce(d, ch.axis, np.sum))
        l2 = np.minimum(np.minimum(_f(ch.l2), np.sqrt(_row_reduce(d * d, ch.axis, np.sum))), l1)
    return _Ch(ch.axis, d, l1, l2, ch.enum)


def _from_enum(axis, enum, shape) -> _Ch:
    """Exact change bounds of a row-local node from its enumeration."""
    # the range over the support on the enumeration as stored (its record axis may be 1), then
    # broadcast: reducing the broadcast view would visit S * n * ... values for the same numbers
    d = np.broadcast_to(np.max(enum, axis=0) - np.min(enum, axis=0), shape)
    if np.all(d == 0):
        z = np.zeros(shape[axis]) if len(shape) else np.zeros(())
        return _Ch(axis, d, z, z.copy(), enum)
    s = enum.shape[0]
    row = int(np.prod(shape)) // max(shape[axis], 1)
    eff = enum.shape[1 + axis] if enum.ndim > 1 + axis else 1
    if row == 1:
        l1 = _row_reduce(d, axis, np.sum)
        l2 = l1.copy()
    elif s * s * row * eff <= 20_000_000:
        diff = np.abs(enum[:, None] - enum[None, :])  # (S, S, *shape with eff rows)
        red = tuple(2 + i for i in range(len(shape)) if i != axis)
        l1 = np.max(np.sum(diff, axis=red), axis=(0, 1)) if red else np.max(diff, axis=(0, 1))
        l2 = np.sqrt(np.max(np.sum(diff * diff, axis=red), axis=(0, 1)))
        l1 = np.broadcast_to(l1, (shape[axis],)).copy()
        l2 = np.broadcast_to(l2, (shape[axis],)).copy()
    else:
        l1 = _row_reduce(d, axis, np.sum)
        l2 = np.sqrt(_row_reduce(d * d, axis, np.sum))
    return _Ch(axis, d, l1, l2, enum)


def _as_agg(ch: _Ch) -> _Ch:
    """View a row-local change as a change of the whole node (one row moves at a time)."""
    if ch.axis is None:
        return ch
    return _Ch(None, ch.d, _f(_amax(ch.l1)), _f(_amax(ch.l2)))


def _bfactor(in_shape, out_shape) -> float:
    """How many output elements each input element is broadcast to."""
    n_in = int(np.prod(in_shape)) if len(in_shape) else 1
    n_out = int(np.prod(out_shape)) if len(out_shape) else 1
    return n_out / max(n_in, 1)


# ---- record supports ---------------------------------------------------------------------


def _rv_support(rv, an) -> tuple:
    """``(lo, hi, integer, values)`` of every element of random variable ``rv``."""
    import pymc.distributions.censored as pc
    import pymc.distributions.continuous as pcont
    import pymc.distributions.discrete as pd
    import pytensor.tensor.random.basic as rb

    op = rv.owner.op
    integer = rv.dtype.startswith(("int", "uint", "bool"))
    try:
        params = list(op.dist_params(rv.owner))
    except Exception:
        params = []

    def hi_of(v):
        return float(np.max(an.av(v).hi))

    def lo_of(v):
        return float(np.min(an.av(v).lo))

    lo, hi = -np.inf, np.inf
    if rv.dtype == "bool" or isinstance(op, rb.BernoulliRV):
        lo, hi = 0.0, 1.0
    elif isinstance(op, rb.CategoricalRV):
        k = an.av(params[0]).shape[-1]
        lo, hi = 0.0, float(k - 1)
    elif isinstance(op, rb.BinomialRV | rb.BetaBinomialRV):
        lo, hi = 0.0, hi_of(params[0])
    elif isinstance(op, pd.DiscreteUniformRV | rb.UniformRV):
        lo, hi = lo_of(params[0]), hi_of(params[1])
    elif isinstance(op, rb.BetaRV):
        lo, hi = 0.0, 1.0
    elif isinstance(op, pcont.TruncatedNormalRV):
        lo, hi = lo_of(params[2]), hi_of(params[3])
    elif isinstance(op, pc.CensoredRV):
        lo, hi = lo_of(rv.owner.inputs[1]), hi_of(rv.owner.inputs[2])
    elif isinstance(
        op,
        rb.PoissonRV
        | rb.NegBinomialRV
        | rb.GeometricRV
        | rb.HyperGeometricRV
        | rb.ExponentialRV
        | rb.GammaRV
        | rb.HalfNormalRV
        | rb.HalfCauchyRV
        | rb.LogNormalRV
        | rb.InvGammaRV
        | rb.WeibullRV
        | rb.WaldRV
        | rb.ParetoRV,
    ):
        lo = 0.0
    if integer:
        lo, hi = math.ceil(lo) if np.isfinite(lo) else lo, math.floor(hi) if np.isfinite(hi) else hi
    values = None
    if integer and np.isfinite(lo) and np.isfinite(hi) and hi - lo + 1 <= MAX_ENUM:
        values = np.arange(lo, hi + 1, dtype=np.float64)
    return float(lo), float(hi), integer, values


# ---- the analysis ------------------------------------------------------------------------


def _ds(arr, op, lead=0):
    """Apply DimShuffle ``op`` to ``arr`` whose first ``lead`` axes are extra (enumeration)."""
    arr = _f(arr)
    keep = [i for i in range(op.input_ndim)]
    drop = [i for i in keep if i not in op.new_order]
    if drop:
        arr = arr.reshape(
            arr.shape[:lead] + tuple(s for i, s in enumerate(arr.shape[lead:]) if i not in drop)
        )
        remaining = [i for i in keep if i not in drop]
    else:
        remaining = keep
    kept = [o for o in op.new_order if o != "x"]
    arr = np.transpose(arr, [*range(lead), *(lead + remaining.index(o) for o in kept)])
    shape = list(arr.shape[:lead])
    it = iter(arr.shape[lead:])
    for o in op.new_order:
        shape.append(1 if o == "x" else next(it))
    return arr.reshape(shape)


class _Analysis:
    def __init__(self, statistic=None):
        from pymc_dp.distributions.release import is_random_variable, record_parents

        self.is_rv = is_random_variable
        self.records = [] if statistic is None else record_parents(statistic)
        self.memo: dict = {}
        self.groups: dict = {}
        self.supports: dict = {}
        self.keys: dict = {}
        # parameters of the records (support bounds) are read with every random variable free
        self.params = self if statistic is None else _Analysis()
        self._setup_groups()

    # -- record sets ----------------------------------------------------------------------
    def _setup_groups(self):
        by_key: dict = {}
        for rv in self.records:
            shape = self._rv_shape(rv)
            if len(shape) == 0:
                key = ("scalar", id(rv))
            else:
                key = shape[0]
            by_key.setdefault(key, []).append((rv, shape))
        for key, members in by_key.items():
            info = {"members": members, "enum": None}
            supports = [_rv_support(rv, self.params) for rv, _ in members]
            for (rv, _), sup in zip(members, supports, strict=True):
                self.supports[rv] = (key, sup)
            if not isinstance(key, tuple):
                sizes = []
                for (_, shape), sup in zip(members, supports, strict=True):
                    k = int(np.prod(shape[1:])) if len(shape) > 1 else 1
                    sizes.append(None if sup[3] is None else (len(sup[3]), k))
                if all(s is not None for s in sizes):
                    total = 1
                    for m, k in sizes:
                        total *= m**k
                        if total > MAX_ENUM:
                            break
                    if total <= MAX_ENUM:
                        digits = [
                            (vals, k)
                            for (_, _, _, vals), (_, k) in zip(supports, sizes, strict=True)
                        ]
                        info["enum"] = self._joint(digits, members)
            self.groups[key] = info

    @staticmethod
    def _joint(digits, members):
        """Joint enumeration of one record: per member, an array (S, 1, *row shape)."""
        axes = []
        for vals, k in digits:
            axes.extend([vals] * k)
        grids = np.meshgrid(*axes, indexing="ij") if axes else []
        flat = [g.ravel() for g in grids]
        s = flat[0].size if flat else 1
        out = {}
        pos = 0
        for (rv, shape), (_, k) in zip(members, digits, strict=True):
            cols = np.stack(flat[pos : pos + k], axis=1) if k else np.zeros((s, 0))
            pos += k
            out[rv] = cols.reshape((s, 1, *shape[1:]))
        return out

    def _rv_shape(self, rv):
        static = rv.type.shape
        if all(s is not None for s in static):
            return tuple(int(s) for s in static)
        size = rv.owner.inputs[1] if len(rv.owner.inputs) > 1 else None
        try:
            value = self.params.av(size).value if size is not None else None
        except _Unprovable:
            value = None
        if value is None or value.ndim != 1 or len(value) != rv.type.ndim:
            raise _Unprovable(f"the shape of record variable {rv.name!r} is not known")
        return tuple(int(s) for s in value)

    def key(self, var):
        """A structural key: equal for two copies of the same computation (``x.sum()`` written
        twice), so that a condition on one copy refines the other."""
        k = self.keys.get(var)
        if k is None:
            if isinstance(var, Constant):
                data = np.asarray(var.data)
                k = ("const", data.dtype.str, data.shape, data.tobytes())
            elif var.owner is None or self.is_rv(var):
                k = ("var", id(var))
            else:
                node = var.owner
                k = (node.op, tuple(self.key(i) for i in node.inputs), node.outputs.index(var))
            self.keys[var] = k
        return k

    # -- evaluation -----------------------------------------------------------------------
    def av(self, var) -> _AV:
        got = self.memo.get(var)
        if got is None:
            got = self._leaf(var) if var.owner is None or self.is_rv(var) else None
            if got is None:
                outs = self.apply(var.owner, [self.av(i) for i in var.owner.inputs])
                for o, a in zip(var.owner.outputs, outs, strict=False):
                    self.memo[o] = a
                got = self.memo[var]
            self.memo[var] = got
        return got

    def _leaf(self, var):
        if isinstance(var, Constant):
            data = np.asarray(var.data)
            if data.dtype.kind not in "biuf":
                raise _Unprovable(f"constant of dtype {data.dtype}")
            return _exact(data, integer=data.dtype.kind in "biu" or None)
        if isinstance(var, SharedVariable):
            data = np.asarray(var.get_value(borrow=True))
            if data.dtype.kind not in "biuf":
                raise _Unprovable(f"data {var.name!r} of dtype {data.dtype}")
            return _exact(data, integer=data.dtype.kind in "biu" or None)
        if self.is_rv(var):
            if var in self.supports:
                return self._record(var)
            return self._free_rv(var)
        shape = var.type.shape
        if any(s is None for s in shape):
            raise _Unprovable(f"input {var.name or var} has an unknown shape")
        integer = var.dtype.startswith(("int", "uint", "bool"))
        full = np.full(shape, np.inf)
        return _AV(lo=-full, hi=full.copy(), integer=integer)

    def _free_rv(self, var):
        """A random variable that is not a record (never met: every random variable the
        statistic reads is a record); its support, no change."""
        lo, hi, integer, _ = _rv_support(var, self.params)
        shape = self._rv_shape(var)
        return _AV(lo=np.full(shape, lo), hi=np.full(shape, hi), integer=integer)

    def _record(self, rv):
        key, (lo, hi, integer, _) = self.supports[rv]
        shape = self._rv_shape(rv)
        lo_a, hi_a = np.full(shape, lo), np.full(shape, hi)
        d = _width(lo_a, hi_a)
        if isinstance(key, tuple):  # a scalar record
            ch = _Ch(None, d, d.copy(), d.copy())
        else:
            enum_map = self.groups[key]["enum"]
            enum = None if enum_map is None else enum_map[rv]
            if enum is not None:
                ch = _from_enum(0, enum, shape)
            else:
                ch = _finish(
                    _Ch(0, d, np.full(shape[0], np.inf), np.full(shape[0], np.inf)), lo_a, hi_a
                )
        return _AV(lo=lo_a, hi=hi_a, integer=integer, ch={key: ch})

    # -- dispatch -------------------------------------------------------------------------
    def apply(self, node, ins):
        op = node.op
        if isinstance(op, Elemwise):
            return [_elemwise(self, node, ins)]
        if isinstance(op, DimShuffle):
            return [_dimshuffle(op, ins[0])]
        if isinstance(op, CAReduce):
            return [_careduce(op, ins[0], node)]
        if isinstance(op, Subtensor):
            return [_subtensor(self, node, ins)]
        if isinstance(op, AdvancedSubtensor):
            return [_adv_subtensor(self, node, ins)]
        if isinstance(op, AdvancedIncSubtensor):
            return [_adv_inc(self, node, ins)]
        if isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot)):
            a, b = node.inputs
            same = (
                a.owner is not None
                and isinstance(a.owner.op, DimShuffle)
                and tuple(a.owner.op.new_order) == (1, 0)
                and self.key(a.owner.inputs[0]) == self.key(b)
            )
            return [_dot(ins[0], ins[1], same)]
        if isinstance(op, Join):
            return [_join(node, ins)]
        if isinstance(op, MakeVector):
            return [_join_parts([_expand0(a) for a in ins], 0)]
        if isinstance(op, Reshape):
            return [_reshape(ins[0], ins[1])]
        if isinstance(op, Alloc):
            return [_alloc(ins)]
        if isinstance(op, Shape):
            return [_exact(np.array(ins[0].shape, dtype=np.int64), integer=True)]
        if isinstance(op, Shape_i):
            return [_exact(np.array(ins[0].shape[op.i]), integer=True)]
        if isinstance(op, ARange):
            vals = [_exact_value(a, "arange") for a in ins]
            return [_exact(np.arange(*[v.item() for v in vals]))]
        if isinstance(op, SpecifyShape | ViewOp | DeepCopyOp | CheckAndRaise):
            return [ins[0]] + [_exact(np.zeros(())) for _ in node.outputs[1:]]
        if isinstance(op, ScalarFromTensor | TensorFromScalar):
            return [ins[0]]
        raise _Unprovable(f"no rule for the operation {op}")


def _exact_value(av: _AV, what: str) -> np.ndarray:
    if av.value is not None:
        return av.value
    if np.all(av.lo == av.hi) and np.all(np.isfinite(av.lo)):
        return av.lo
    raise _Unprovable(f"{what} depends on the records or is not a known constant")


def _expand0(av: _AV) -> _AV:
    """A 0-d value as shape (1,)."""
    ch = {}
    for g, c in av.ch.items():
        c = _as_agg(c)
        ch[g] = _Ch(None, c.d.reshape(1), c.l1, c.l2)
    return _AV(
        lo=av.lo.reshape(1),
        hi=av.hi.reshape(1),
        integer=av.integer,
        ch=ch,
        value=None if av.value is None else av.value.reshape(1),
    )


# ---- elementwise --------------------------------------------------------------------------

_CMP = {
    ps.EQ: np.equal,
    ps.NEQ: np.not_equal,
    ps.LT: np.less,
    ps.GT: np.greater,
    ps.LE: np.less_equal,
    ps.GE: np.greater_equal,
}
_BOOL = {ps.AND: np.logical_and, ps.OR: np.logical_or, ps.XOR: np.logical_xor}
_LINEAR = (ps.Add, ps.Sub, ps.Neg, ps.Identity)
_LIPSCHITZ1 = (ps.Abs, ps.Maximum, ps.Minimum, ps.Clip)
_STEP = (ps.Floor, ps.Ceil, ps.Trunc)


def _np_fn(sop, out_dtype):
    """The numpy function of scalar op ``sop`` (for exact values and enumerations)."""
    t = type(sop)
    table = {
        ps.Add: lambda *a: sum(a[1:], a[0]),
        ps.Sub: np.subtract,
        ps.Neg: np.negative,
        ps.Identity: lambda a: a,
        ps.Mul: lambda *a: np.prod(np.broadcast_arrays(*a), axis=0),
        ps.TrueDiv: np.true_divide,
        ps.Abs: np.abs,
        ps.Maximum: np.maximum,
        ps.Minimum: np.minimum,
        ps.Clip: lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
        ps.Switch: lambda c, a, b: np.where(c != 0, a, b),
        ps.Sqr: np.square,
        ps.Exp: np.exp,
        ps.Log: np.log,
        ps.Sqrt: np.sqrt,
        ps.Floor: np.floor,
        ps.Ceil: np.ceil,
        ps.Trunc: np.trunc,
        ps.Second: lambda a, b: np.broadcast_to(b, np.broadcast_shapes(np.shape(a), np.shape(b))),
        ps.Invert: lambda a: (a == 0).astype(np.float64),
        psm.Sigmoid: lambda a: 1.0 / (1.0 + np.exp(-a)),
        ps.Tanh: np.tanh,
    }
    if t in _CMP:
        return lambda a, b: _CMP[t](a, b).astype(np.float64)
    if t in _BOOL:
        return lambda a, b: _BOOL[t](a != 0, b != 0).astype(np.float64)
    if t is ps.Cast:
        dt = np.dtype(out_dtype)
        if dt.kind == "b":
            return lambda a: (a != 0).astype(np.float64)
        if dt.kind in "iu":
            return np.trunc
        return lambda a: a
    if t is ps.Invert and np.dtype(out_dtype).kind != "b":
        return None
    return table.get(t)


def _interval(sop, ins, out_dtype):
    """``(lo, hi)`` of the output (elementwise, broadcast) from the inputs' intervals."""
    t = type(sop)
    los = [a.lo for a in ins]
    his = [a.hi for a in ins]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if t is ps.Add:
            return sum(los[1:], los[0]), sum(his[1:], his[0])
        if t is ps.Sub:
            return los[0] - his[1], his[0] - los[1]
        if t is ps.Neg:
            return -his[0], -los[0]
        if t is ps.Identity or (t is ps.Cast and np.dtype(out_dtype).kind == "f"):
            return los[0], his[0]
        if t is ps.Mul:
            lo, hi = los[0], his[0]
            for l2, h2 in zip(los[1:], his[1:], strict=True):
                c = [_smul(lo, l2), _smul(lo, h2), _smul(hi, l2), _smul(hi, h2)]
                lo, hi = np.minimum.reduce(c), np.maximum.reduce(c)
            return lo, hi
        if t is ps.TrueDiv:
            rlo, rhi = _recip(los[1], his[1])
            c = [_smul(los[0], rlo), _smul(los[0], rhi), _smul(his[0], rlo), _smul(his[0], rhi)]
            return np.minimum.reduce(c), np.maximum.reduce(c)
        if t is ps.Abs:
            return _abs_interval(los[0], his[0])
        if t is ps.Maximum:
            return np.maximum(los[0], los[1]), np.maximum(his[0], his[1])
        if t is ps.Minimum:
            return np.minimum(los[0], los[1]), np.minimum(his[0], his[1])
        if t is ps.Clip:
            lo = np.minimum(np.maximum(los[0], los[1]), his[2])
            hi = np.minimum(np.maximum(his[0], los[1]), his[2])
            return np.minimum(lo, hi), np.maximum(lo, np.maximum(hi, np.minimum(his[1], his[2])))
        if t is ps.Sqr:
            return _square_interval(los[0], his[0])
        if t in (ps.Exp, ps.Log, ps.Sqrt, ps.Floor, ps.Ceil, ps.Trunc, psm.Sigmoid, ps.Tanh) or (
            t is ps.Cast and np.dtype(out_dtype).kind in "iu"
        ):
            fn = _np_fn(sop, out_dtype)
            lo_in = los[0]
            if t in (ps.Log, ps.Sqrt):
                if np.any(lo_in < 0):
                    raise _Unprovable(f"{t.__name__.lower()} of a value that may be negative")
            return fn(lo_in), fn(his[0])
        if t is ps.Second:
            return np.broadcast_arrays(los[1], los[0])[0], np.broadcast_arrays(his[1], his[0])[0]
    raise _Unprovable(f"no interval rule for {sop}")


def _abs_interval(lo, hi):
    """Range of ``|x|`` for ``x`` in ``[lo, hi]``."""
    return (
        np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(abs(lo), abs(hi))),
        np.maximum(abs(lo), abs(hi)),
    )


def _square_interval(lo, hi):
    """Range of ``x * x`` for ``x`` in ``[lo, hi]``."""
    lo_abs, hi_abs = _abs_interval(lo, hi)
    return lo_abs * lo_abs, hi_abs * hi_abs


def _recip(lo, hi):
    if np.any((lo <= 0) & (hi >= 0)):
        raise _Unprovable("a division by a value whose range contains 0")
    return 1.0 / hi, 1.0 / lo


def _cmp_interval(t, a: _AV, b: _AV):
    """Output interval of a comparison: 1 where surely true, 0 where surely false."""
    fn = _CMP[t]
    # the comparison is constant where every pair of values gives the same answer
    corners = [fn(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    always = np.logical_and.reduce(corners)
    never = ~np.logical_or.reduce(corners)
    if t is ps.EQ:
        always = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
        never = (a.hi < b.lo) | (b.hi < a.lo)
    elif t is ps.NEQ:
        never = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
        always = (a.hi < b.lo) | (b.hi < a.lo)
    elif t in (ps.LT, ps.LE):
        always = fn(a.hi, b.lo)
        never = ~fn(a.lo, b.hi)
    else:
        always = fn(a.lo, b.hi)
        never = ~fn(a.hi, b.lo)
    return np.where(always, 1.0, 0.0), np.where(never, 0.0, 1.0)


def _elemwise(an, node, ins):
    sop = node.op.scalar_op
    t = type(sop)
    out = node.outputs[0]
    if t is ps.Mul and len(ins) == 2 and an.key(node.inputs[0]) == an.key(node.inputs[1]):
        sop, t, ins = ps.sqr, ps.Sqr, ins[:1]  # x * x is a square: range and change of x**2
    shape = tuple(np.broadcast_shapes(*[a.shape for a in ins]))
    bins = [_broadcast_av(a, shape) for a in ins]
    fn = _np_fn(sop, out.dtype)
    integer = out.dtype.startswith(("int", "uint", "bool"))
    if all(a.value is not None for a in bins):
        if fn is None:
            raise _Unprovable(f"no rule for the operation {node.op}")
        with np.errstate(all="ignore"):
            v = _f(fn(*[a.value for a in bins]))
        if not np.all(np.isfinite(v)):
            raise _Unprovable(f"{node.op} of constants is not finite")
        return _exact(v, integer=integer or None)
    if t in _CMP:
        lo, hi = _cmp_interval(t, bins[0], bins[1])
    elif t in _BOOL or t is ps.Invert or (t is ps.Cast and out.dtype == "bool"):
        lo, hi = np.zeros(shape), np.ones(shape)
    elif t is ps.Switch:
        lo = hi = None  # below, with the condition's refinement
    else:
        lo, hi = _interval(sop, bins, out.dtype)
    groups = set().union(*[a.ch.keys() for a in bins])
    if t is ps.Switch:
        return _switch(an, node, ins, bins, shape, groups, integer, fn)
    lo, hi = _clean(_f(np.broadcast_to(lo, shape)), _f(np.broadcast_to(hi, shape)))
    ch = {}
    for g in groups:
        ch[g] = _finish(_elem_change(sop, bins, ins, g, shape, fn, out.dtype), lo, hi)
    return _AV(lo=lo, hi=hi, integer=integer, ch=ch)


def _broadcast_av(a: _AV, shape) -> _AV:
    if a.shape == shape:
        return a
    lo = np.broadcast_to(a.lo, shape)
    hi = np.broadcast_to(a.hi, shape)
    value = None if a.value is None else np.broadcast_to(a.value, shape)
    return _AV(lo=lo, hi=hi, integer=a.integer, ch=a.ch, value=value)


def _row_mode(bins, ins, g, shape):
    """The common record axis when every input that changes in ``g`` is row-local on it and
    not broadcast along it; else None."""
    axes = {a.ch[g].axis for a in bins if g in a.ch}
    if len(axes) != 1 or None in axes:
        return None
    (axis,) = axes
    for a, raw in zip(bins, ins, strict=True):
        if g in a.ch and raw.shape[axis] != shape[axis]:
            return None
    return axis


def _enum_inputs(bins, g):
    """Per input, its enumeration (S, ...) or exact value (1, ...), or None if one has neither."""
    out = []
    for a in bins:
        if g in a.ch:
            if a.ch[g].enum is None:
                return None
            out.append(a.ch[g].enum)
        elif a.value is not None:
            out.append(a.value[None])
        else:
            return None
    return out


def _parts(bins, ins, g, axis, shape):
    """Per input: (d, l1, l2, broadcast factor) in the mode of ``axis`` (zeros if unchanged)."""
    res = []
    zero_rows = np.zeros(shape[axis]) if axis is not None else np.zeros(())
    for a, raw in zip(bins, ins, strict=True):
        f = _bfactor(raw.shape, shape)
        if g in a.ch:
            c = a.ch[g] if axis is not None else _as_agg(a.ch[g])
            res.append((np.broadcast_to(c.d, shape), c.l1, c.l2, f))
        else:
            res.append((np.zeros(shape), zero_rows, zero_rows, f))
    return res


def _mag(a: _AV, axis, shape):
    """Largest |value|: per element, and per row (axis) or overall."""
    m = np.maximum(np.abs(a.lo), np.abs(a.hi))
    m = np.broadcast_to(m, shape)
    per = _row_reduce(m, axis, _amax) if axis is not None else _f(_amax(m))
    return m, per


def _elem_change(sop, bins, ins, g, shape, fn, out_dtype) -> _Ch:
    t = type(sop)
    axis = _row_mode(bins, ins, g, shape)
    if axis is not None and fn is not None:
        enums = _enum_inputs(ins, g)
        if enums is not None:
            with np.errstate(all="ignore"):
                e = _f(fn(*enums))
            if np.all(np.isfinite(e)) and e.size <= MAX_ENUM_SIZE:
                return _from_enum(axis, e, shape)
    parts = _parts(bins, ins, g, axis, shape)
    sq = math.sqrt
    if t in _LINEAR or (t is ps.Cast and np.dtype(out_dtype).kind == "f"):
        d = sum(p[0] for p in parts)
        l1 = sum(p[1] * p[3] for p in parts)
        l2 = sum(p[2] * sq(p[3]) for p in parts)
        return _Ch(axis, d, l1, l2)
    if t in _LIPSCHITZ1:
        d = np.maximum.reduce([p[0] for p in parts])
        l1 = sum(p[1] * p[3] for p in parts)
        l2 = sum(p[2] * sq(p[3]) for p in parts)
        return _Ch(axis, d, l1, l2)
    if t is ps.Second:
        p = parts[1]
        return _Ch(axis, p[0], p[1] * p[3], p[2] * sq(p[3]))
    if t is ps.Mul or t is ps.TrueDiv:
        facs = []
        for k, (a, p) in enumerate(zip(bins, parts, strict=True)):
            m, per = _mag(a, axis, shape)
            dk, l1k, l2k = p[0], p[1] * p[3], p[2] * sq(p[3])
            if t is ps.TrueDiv and k == 1:  # 1/b: |1/b - 1/b'| <= |b - b'| / min b^2
                rlo, rhi = _recip(a.lo, a.hi)
                m = np.broadcast_to(np.maximum(abs(rlo), abs(rhi)), shape)
                per = _row_reduce(m, axis, _amax) if axis is not None else _f(_amax(m))
                mins = np.broadcast_to(np.minimum(abs(a.lo), abs(a.hi)), shape)
                lip = 1.0 / (mins * mins)
                lip_per = _row_reduce(lip, axis, _amax) if axis is not None else _f(_amax(lip))
                dk, l1k, l2k = _smul(dk, lip), _smul(l1k, lip_per), _smul(l2k, lip_per)
            facs.append((dk, l1k, l2k, m, per))
        # product rule: Δ(ab) = Δa b' + a Δb, folded over the factors
        d, l1, l2, m, per = facs[0]
        for dk, l1k, l2k, mk, perk in facs[1:]:
            d = _smul(d, mk) + _smul(m, dk)
            l1 = _smul(l1, perk) + _smul(per, l1k)
            l2 = _smul(l2, perk) + _smul(per, l2k)
            m = _smul(m, mk)
            per = _smul(per, perk)
        return _Ch(axis, d, l1, l2)
    if t in (ps.Sqr, ps.Exp, ps.Log, ps.Sqrt, psm.Sigmoid, ps.Tanh):
        a = bins[0]
        p = parts[0]
        if t is ps.Sqr:
            lip = 2 * np.broadcast_to(np.maximum(abs(a.lo), abs(a.hi)), shape)
        elif t is ps.Exp:
            lip = np.broadcast_to(np.exp(a.hi), shape)
        elif t is ps.Log:
            with np.errstate(divide="ignore"):
                lip = np.broadcast_to(1.0 / a.lo, shape)
        elif t is ps.Sqrt:
            with np.errstate(divide="ignore"):
                lip = np.broadcast_to(0.5 / np.sqrt(a.lo), shape)
        elif t is psm.Sigmoid:
            lip = np.full(shape, 0.25)
        else:
            lip = np.ones(shape)
        lip_per = _row_reduce(lip, axis, _amax) if axis is not None else _f(_amax(lip))
        d = _smul(p[0], lip)
        if t is ps.Sqrt:  # |sqrt a - sqrt b| <= sqrt |a - b|
            d = np.minimum(d, np.sqrt(p[0]))
        return _Ch(axis, d, _smul(p[1] * p[3], lip_per), _smul(p[2] * sq(p[3]), lip_per))
    if t in _STEP or t is ps.Cast:  # integer steps: |floor a - floor b| <= ceil |a - b|
        p = parts[0]
        d = np.ceil(p[0])
        inf = np.full(np.shape(p[1]), np.inf)
        return _Ch(axis, d, inf, inf.copy())
    if t in _CMP or t in _BOOL or t is ps.Invert:
        moving = sum(p[0] for p in parts) > 0
        d = np.where(moving, 1.0, 0.0)
        inf = np.full(np.shape(parts[0][1]), np.inf)
        return _Ch(axis, d, inf, inf.copy())
    raise _Unprovable(f"no rule for the operation {sop} on values that depend on the records")


# ---- switch with refinement by its condition ---------------------------------------------


def _refinements(an, cond, truth):
    """``{var: (lo, hi)}``: intervals of the variables ``cond`` constrains when it is ``truth``."""
    node = cond.owner
    if node is None or not isinstance(node.op, Elemwise):
        return {}
    t = type(node.op.scalar_op)
    if t is ps.Invert and cond.dtype == "bool":
        return _refinements(an, node.inputs[0], not truth)
    if (t is ps.AND and truth) or (t is ps.OR and not truth):
        out = {}
        for inp in node.inputs:
            for v, (lo, hi) in _refinements(an, inp, truth).items():
                if v in out:
                    lo, hi = np.maximum(lo, out[v][0]), np.minimum(hi, out[v][1])
                out[v] = (lo, hi)
        return out
    if t not in _CMP:
        return {}
    u, c = node.inputs
    if not truth:
        t = {ps.EQ: ps.NEQ, ps.NEQ: ps.EQ, ps.LT: ps.GE, ps.GE: ps.LT, ps.GT: ps.LE, ps.LE: ps.GT}[
            t
        ]
    au, ac = an.av(u), an.av(c)
    if au.value is not None and ac.value is None:  # constant on the left: mirror
        u, c, au, ac = c, u, ac, au
        t = {ps.LT: ps.GT, ps.GT: ps.LT, ps.LE: ps.GE, ps.GE: ps.LE}.get(t, t)
    if ac.value is None or (au.shape != cond.type.shape and au.lo.size != 1):
        return {}
    if au.shape != tuple(cond.type.shape) and ac.value.size != 1:
        return {}
    cv = np.broadcast_to(ac.value, au.shape) if ac.value.size == 1 else ac.value
    if cv.shape != au.shape:
        return {}
    lo, hi = au.lo.copy(), au.hi.copy()
    step = 1.0 if au.integer else 0.0
    if t is ps.EQ:
        lo, hi = np.maximum(lo, cv), np.minimum(hi, cv)
    elif t is ps.NEQ and au.integer:
        lo = np.where(lo == cv, lo + 1, lo)
        hi = np.where(hi == cv, hi - 1, hi)
    elif t is ps.LT:
        hi = np.minimum(hi, cv - step)
    elif t is ps.LE:
        hi = np.minimum(hi, cv)
    elif t is ps.GT:
        lo = np.maximum(lo, cv + step)
    elif t is ps.GE:
        lo = np.maximum(lo, cv)
    return {an.key(u): (lo, hi)}


def _reeval(an, var, over, cache):
    """Interval of ``var`` with the intervals of ``over``'s variables replaced."""
    if var in cache:
        return cache[var]
    base = an.av(var)
    k = an.key(var)
    if k in over:
        lo, hi = over[k]
        res = _AV(lo=np.maximum(base.lo, lo), hi=np.minimum(base.hi, hi), integer=base.integer)
    elif (
        var.owner is None
        or an.is_rv(var)
        or not (set(over) & {an.key(v) for v in ancestors([var])})
    ):
        res = base
    else:
        ins = [_reeval(an, i, over, cache) for i in var.owner.inputs]
        if any(np.any(i.lo > i.hi) for i in ins):
            # the condition is impossible somewhere: keep the unrefined interval there
            ins = [
                replace(
                    i, lo=np.where(i.lo > i.hi, b.lo, i.lo), hi=np.where(i.lo > i.hi, b.hi, i.hi)
                )
                for i, b in zip(ins, [an.av(v) for v in var.owner.inputs], strict=True)
            ]
        ins = [replace(i, ch={}, value=i.value if np.all(i.lo == i.hi) else None) for i in ins]
        try:
            outs = an.apply(var.owner, ins)
            res = outs[var.owner.outputs.index(var)]
        except _Unprovable:
            res = base
        res = _AV(
            lo=np.maximum(res.lo, base.lo), hi=np.minimum(res.hi, base.hi), integer=base.integer
        )
    cache[var] = res
    return res


def _switch(an, node, ins, bins, shape, groups, integer, fn):
    c, a, b = node.inputs
    ac, aa, ab = bins
    refined = {}
    for truth in (True, False):
        over = _refinements(an, c, truth)
        cache: dict = {}
        empty = np.zeros(shape, dtype=bool)
        for lo, hi in over.values():
            if np.shape(lo) == shape or np.size(lo) == 1:
                empty |= np.broadcast_to(lo > hi, shape)
        ra = _broadcast_av(_reeval(an, a, over, cache) if over else aa, shape)
        rb = _broadcast_av(_reeval(an, b, over, cache) if over else ab, shape)
        refined[truth] = (ra, rb, empty)
    a_t, _, empty_t = refined[True]
    _, b_f, empty_f = refined[False]
    can_true = (ac.hi > 0) & ~empty_t
    can_false = (ac.lo == 0) & ~empty_f
    inf = np.inf
    lo = np.minimum(np.where(can_true, a_t.lo, inf), np.where(can_false, b_f.lo, inf))
    hi = np.maximum(np.where(can_true, a_t.hi, -inf), np.where(can_false, b_f.hi, -inf))
    lo, hi = np.where(lo > hi, 0.0, lo), np.where(lo > hi, 0.0, hi)
    lo, hi = _clean(_f(lo), _f(hi))
    ch = {}
    for g in groups:
        axis = _row_mode(bins, ins, g, shape)
        enums = _enum_inputs(ins, g) if axis is not None else None
        if enums is not None:
            e = _f(fn(*enums))
            if e.size <= MAX_ENUM_SIZE:
                ch[g] = _finish(_from_enum(axis, e, shape), lo, hi)
                continue
        parts = _parts(bins, ins, g, axis, shape)
        d_c, d_a, d_b = parts[0][0], parts[1][0], parts[2][0]
        flips = (d_c > 0) & can_true & can_false
        # a jump between branches: a at x (condition true), b at a neighbour x' (false)
        a_f, b_t = refined[False][0], refined[True][1]
        a1_lo = np.maximum(a_t.lo, a_f.lo - d_a)
        a1_hi = np.minimum(a_t.hi, a_f.hi + d_a)
        b1_lo = np.maximum(b_f.lo, b_t.lo - d_b)
        b1_hi = np.minimum(b_f.hi, b_t.hi + d_b)
        ok = flips & (a1_lo <= a1_hi) & (b1_lo <= b1_hi)
        with np.errstate(invalid="ignore"):
            jump = np.maximum(a1_hi - b1_lo, b1_hi - a1_lo)
        jump = np.where(ok, np.where(np.isnan(jump), inf, jump), 0.0)
        d = np.maximum(np.maximum(d_a, d_b), jump)
        if np.any(flips):
            rows = (shape[axis],) if axis is not None else ()
            l1 = np.full(rows, inf)
            l2 = np.full(rows, inf)
        else:
            l1 = parts[1][1] * parts[1][3] + parts[2][1] * parts[2][3]
            l2 = parts[1][2] * math.sqrt(parts[1][3]) + parts[2][2] * math.sqrt(parts[2][3])
        ch[g] = _finish(_Ch(axis, d, l1, l2), lo, hi)
    return _AV(lo=lo, hi=hi, integer=integer, ch=ch)


# ---- structure ----------------------------------------------------------------------------


def _dimshuffle(op, a: _AV) -> _AV:
    ch = {}
    for g, c in a.ch.items():
        axis = c.axis
        if axis is not None and axis not in op.new_order:
            c = _as_agg(c)
            axis = None
        new_axis = None if axis is None else list(op.new_order).index(axis)
        enum = None if c.enum is None or new_axis is None else _ds(c.enum, op, lead=1)
        ch[g] = _Ch(new_axis, _ds(c.d, op), c.l1, c.l2, enum)
    return _AV(
        lo=_ds(a.lo, op),
        hi=_ds(a.hi, op),
        integer=a.integer,
        ch=ch,
        value=None if a.value is None else _ds(a.value, op),
    )


def _careduce(op, a: _AV, node) -> _AV:
    sop = type(op.scalar_op)
    nd = len(a.shape)
    axes = tuple(range(nd)) if op.axis is None else tuple(int(x) % max(nd, 1) for x in op.axis)
    integer = node.outputs[0].dtype.startswith(("int", "uint", "bool"))
    if a.value is not None:
        fn = {ps.Add: np.sum, ps.Maximum: np.max, ps.Minimum: np.min, ps.Mul: np.prod}.get(sop)
        if fn is None and sop in (ps.AND, ps.OR):
            fn = np.all if sop is ps.AND else np.any
        if fn is None:
            raise _Unprovable(f"no rule for the reduction {op}")
        return _exact(_f(fn(a.value, axis=axes)), integer=integer or None)
    if sop is ps.Add:
        lo, hi = np.sum(a.lo, axis=axes), np.sum(a.hi, axis=axes)
    elif sop in (ps.Maximum, ps.Minimum):
        fn = np.max if sop is ps.Maximum else np.min
        if any(a.shape[i] == 0 for i in axes):
            raise _Unprovable("a maximum or minimum over no elements")
        lo, hi = fn(a.lo, axis=axes), fn(a.hi, axis=axes)
    elif sop in (ps.AND, ps.OR):
        lo, hi = np.zeros(np.delete(a.shape, axes)), np.ones(np.delete(a.shape, axes))
    else:
        raise _Unprovable(f"no rule for the reduction {op} of values that depend on the records")
    lo, hi = _clean(_f(lo), _f(hi))
    m = int(np.prod([a.shape[i] for i in axes])) if axes else 1
    ch = {}
    for g, c in a.ch.items():
        ch[g] = _finish(_reduce_change(sop, c, axes, m), lo, hi)
    return _AV(lo=lo, hi=hi, integer=integer, ch=ch)


def _reduce_change(sop, c: _Ch, axes, m) -> _Ch:
    rec = c.axis
    if rec is not None:
        other = tuple(i for i in axes if i != rec)
        # first the reduction within each row (exact on enumerations), then over the rows
        if c.enum is not None and sop in (ps.Add, ps.Maximum, ps.Minimum):
            fn = {ps.Add: np.sum, ps.Maximum: np.max, ps.Minimum: np.min}[sop]
            e = fn(c.enum, axis=tuple(1 + i for i in other)) if other else c.enum
            new_rec = rec - sum(1 for i in other if i < rec)
            row_shape = tuple(
                s for i, s in enumerate(np.broadcast_shapes(c.d.shape)) if i not in other
            )
            inner = _from_enum(new_rec, e, row_shape)
        else:
            new_rec = rec - sum(1 for i in other if i < rec)
            if sop is ps.Add:
                d = np.sum(c.d, axis=other) if other else c.d
                k = int(np.prod([c.d.shape[i] for i in other])) if other else 1
                l2 = np.minimum(c.l1, math.sqrt(k) * c.l2)
                inner = _Ch(new_rec, d, c.l1, l2)
            elif sop in (ps.Maximum, ps.Minimum):
                d = np.max(c.d, axis=other) if other else c.d
                inner = _Ch(new_rec, d, c.l1, c.l2)
            else:
                inner = _Ch(
                    new_rec,
                    np.where(np.any(c.d > 0, axis=other) if other else c.d > 0, 1.0, 0.0),
                    np.full(c.l1.shape, np.inf),
                    np.full(c.l1.shape, np.inf),
                )
        if rec not in axes:
            return inner
        # over the records: one row moves at a time
        if sop in (ps.AND, ps.OR):
            d = np.where(np.any(inner.d > 0, axis=new_rec), 1.0, 0.0)
            return _Ch(None, d, np.array(np.inf), np.array(np.inf))
        d = _amax(inner.d, axis=new_rec)
        return _Ch(None, _f(d), _f(_amax(inner.l1)), _f(_amax(inner.l2)))
    if sop is ps.Add:
        d = np.sum(c.d, axis=axes)
        return _Ch(None, d, c.l1, np.minimum(c.l1, math.sqrt(m) * c.l2))
    if sop in (ps.Maximum, ps.Minimum):
        return _Ch(None, _amax(c.d, axis=axes) if axes else c.d, c.l1, c.l2)
    d = np.where(np.any(c.d > 0, axis=axes), 1.0, 0.0)
    return _Ch(None, d, np.array(np.inf), np.array(np.inf))


def _index_values(an, node, start):
    idx = indices_from_subtensor(node.inputs[start:], node.op.idx_list)
    out = []
    for i in idx:
        if isinstance(i, slice):
            out.append(
                slice(
                    *[
                        None
                        if p is None or (isinstance(p, Constant) and p.data is None)
                        else int(_scalar(an, p))
                        for p in (i.start, i.stop, i.step)
                    ]
                )
            )
        else:
            out.append(i)
    return out


def _scalar(an, var):
    if isinstance(var, Constant):
        return np.asarray(var.data).item()
    return _exact_value(an.av(var), "an index").item()


def _subtensor(an, node, ins) -> _AV:
    a = ins[0]
    idx = [i if isinstance(i, slice) else int(_scalar(an, i)) for i in _index_values(an, node, 1)]
    idx = tuple(idx) + (slice(None),) * (len(a.shape) - len(idx))
    lo, hi = a.lo[idx], a.hi[idx]
    value = None if a.value is None else a.value[idx]
    kept = [k for k, i in enumerate(idx) if isinstance(i, slice)]
    ch = {}
    for g, c in a.ch.items():
        d = c.d[idx]
        if c.axis is not None and isinstance(idx[c.axis], slice):
            new_axis = kept.index(c.axis)
            l1, l2 = c.l1[idx[c.axis]], c.l2[idx[c.axis]]
            enum = None
            if c.enum is not None:
                eidx = list(idx)
                if c.enum.shape[1 + c.axis] == 1:
                    eidx[c.axis] = slice(None)
                enum = c.enum[(slice(None), *eidx)]
                enum = enum if enum.shape[1 + new_axis] in (1, d.shape[new_axis]) else None
            new = _Ch(new_axis, d, l1, l2, enum)
        elif c.axis is not None:  # one record's row
            row = idx[c.axis] % a.shape[c.axis]
            new = _Ch(None, d, _f(c.l1[row]), _f(c.l2[row]))
        else:
            new = _Ch(None, d, c.l1, c.l2)
        ch[g] = _finish(new, lo, hi)
    return _AV(lo=_f(lo), hi=_f(hi), integer=a.integer, ch=ch, value=value)


def _lookup(table: np.ndarray, av_idx: _AV, what: str):
    """Rows ``table[j]`` the index may take: ``(allowed sorted indices)``."""
    k = table.shape[0]
    lo = max(float(np.min(av_idx.lo)), -k)
    hi = min(float(np.max(av_idx.hi)), k - 1)
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise _Unprovable(f"{what}: the index may fall outside the table")
    if float(np.min(av_idx.lo)) < -k or float(np.max(av_idx.hi)) > k - 1:
        raise _Unprovable(f"{what}: the index may fall outside the table of length {k}")
    return np.arange(math.ceil(lo), math.floor(hi) + 1)


def _adv_subtensor(an, node, ins) -> _AV:
    base = ins[0]
    idx_vars = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
    if len(idx_vars) != 1 or isinstance(idx_vars[0], slice):
        raise _Unprovable(f"no rule for the indexing {node.op}")
    ai = an.av(idx_vars[0])
    if ai.value is not None:  # constant indices: a gather
        ix = ai.value.astype(np.int64)
        lo, hi = base.lo[ix], base.hi[ix]
        ch = {}
        for g, c in base.ch.items():
            c = _as_agg(c)
            ch[g] = _finish(_Ch(None, c.d[ix], np.array(np.inf), np.array(np.inf)), lo, hi)
        value = None if base.value is None else base.value[ix]
        return _AV(lo=_f(lo), hi=_f(hi), integer=base.integer, ch=ch, value=value)
    if base.ch:
        raise _Unprovable("indexing a value that depends on the records with record values")
    table = base.value if base.value is not None else None
    rows = _lookup(base.lo, ai, "a lookup table[records]")
    tlo = base.lo if table is None else table
    thi = base.hi if table is None else table
    sub_lo, sub_hi = tlo[rows], thi[rows]
    out_shape = ai.shape + base.shape[1:]
    lo = np.broadcast_to(np.min(sub_lo, axis=0), out_shape).astype(np.float64)
    hi = np.broadcast_to(np.max(sub_hi, axis=0), out_shape).astype(np.float64)
    ch = {}
    for g, c in ai.ch.items():
        if c.axis is not None and c.enum is not None and table is not None:
            e = table[c.enum.astype(np.int64)]
            ch[g] = _finish(_from_enum(c.axis, _f(e), out_shape), lo, hi)
            continue
        moving = np.broadcast_to(
            c.d.reshape(c.d.shape + (1,) * (len(out_shape) - c.d.ndim)) > 0, out_shape
        )
        d = np.where(moving, _width(lo, hi), 0.0)
        rows_n = (out_shape[c.axis],) if c.axis is not None else ()
        ch[g] = _finish(_Ch(c.axis, d, np.full(rows_n, np.inf), np.full(rows_n, np.inf)), lo, hi)
    return _AV(lo=lo.copy(), hi=hi.copy(), integer=base.integer, ch=ch)


def _adv_inc(an, node, ins) -> _AV:
    """``x[idx] += y`` with record-valued ``idx`` (``bincount``, one-hot counts)."""
    x, y = ins[0], ins[1]
    idx_vars = indices_from_subtensor(node.inputs[2:], node.op.idx_list)
    if node.op.set_instead_of_inc or len(idx_vars) != 1 or x.ch or len(x.shape) != 1:
        raise _Unprovable(f"no rule for {node.op}")
    ai = an.av(idx_vars[0])
    k = x.shape[0]
    if ai.value is not None:
        raise _Unprovable(f"no rule for {node.op} with constant indices")
    if len(ai.shape) != 1 or len(ai.ch) != 1:
        raise _Unprovable(f"no rule for {node.op} with these indices")
    _lookup(np.zeros(k), ai, "x[records] += y")
    ((g, c),) = ai.ch.items()
    if c.axis != 0 or (y.ch and set(y.ch) != {g}):
        raise _Unprovable(f"no rule for {node.op} with these indices")
    n = ai.shape[0]
    yb = _broadcast_av(y, (n,))
    # each record adds y_i to one cell: as a row-local one-hot table summed over records
    onehot_enum = None
    yc = yb.ch.get(g)
    if c.enum is not None and (yb.value is not None or (yc is not None and yc.enum is not None)):
        ye = yb.value[None] if yb.value is not None else yc.enum
        idx_e = np.mod(c.enum.astype(np.int64), k)
        eye = np.eye(k)[idx_e]  # (S, n|1, k)
        onehot_enum = eye * _f(ye)[..., None]
    ylo, yhi = np.broadcast_to(yb.lo, (n,)), np.broadcast_to(yb.hi, (n,))
    row_lo = np.broadcast_to(np.minimum(0.0, ylo)[:, None], (n, k))
    row_hi = np.broadcast_to(np.maximum(0.0, yhi)[:, None], (n, k))
    if onehot_enum is not None and onehot_enum.size <= MAX_ENUM_SIZE:
        row_lo = np.broadcast_to(np.min(onehot_enum, axis=0), (n, k))
        row_hi = np.broadcast_to(np.max(onehot_enum, axis=0), (n, k))
        row = _from_enum(0, onehot_enum, (n, k))
    else:
        m = np.maximum(abs(ylo), abs(yhi))
        moving = np.broadcast_to(c.d, (n,)) > 0
        dy = (
            np.zeros(n)
            if yc is None
            else np.broadcast_to(_as_agg(yc).d if yc.axis is None else yc.d, (n,))
        )
        l1 = np.where(moving, 2 * m, dy)
        l2 = np.where(moving, math.sqrt(2) * m, dy)
        d = np.broadcast_to(np.where(moving, m, dy)[:, None], (n, k))
        row = _Ch(0, d, l1, l2)
    row = _finish(row, row_lo, row_hi)
    lo = x.lo + np.sum(row_lo, axis=0)
    hi = x.hi + np.sum(row_hi, axis=0)
    d = _amax(row.d, axis=0)
    ch = {g: _finish(_Ch(None, _f(d), _f(_amax(row.l1)), _f(_amax(row.l2))), lo, hi)}
    return _AV(lo=_f(lo), hi=_f(hi), integer=x.integer and y.integer, ch=ch)


def _dot(a: _AV, b: _AV, same: bool = False) -> _AV:
    """``a @ b``; ``same``: ``a`` is the transpose of ``b`` (``X'X``: squares on the diagonal)."""
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise _Unprovable("a dot product of other than two matrices")
    if a.value is not None and b.value is not None:
        return _exact(a.value @ b.value)
    ma = np.maximum(abs(a.lo), abs(a.hi))
    mb = np.maximum(abs(b.lo), abs(b.hi))
    # interval product: sum_j [a_kj b_jl]
    lo, hi = _clean(*_interval_matmul(a, b))
    ch = {}
    for g in set(a.ch) | set(b.ch):
        ca, cb = a.ch.get(g), b.ch.get(g)
        if ca is not None and cb is not None:
            ch[g] = _finish(_dot_both(a, b, ca, cb, ma, mb, same), lo, hi)
        elif ca is not None:
            ch[g] = _finish(_dot_left(ca, b, mb), lo, hi)
        else:
            t = _dot_left(_transpose_ch(cb), _transpose_av(a), ma.T)
            ch[g] = _finish(_transpose_ch(t), lo, hi)
    return _AV(lo=lo, hi=hi, integer=a.integer and b.integer, ch=ch)


def _transpose_ch(c: _Ch) -> _Ch:
    axis = None if c.axis is None else 1 - c.axis
    enum = None if c.enum is None else np.swapaxes(c.enum, 1, 2)
    return _Ch(axis, c.d.T, c.l1, c.l2, enum)


def _transpose_av(a: _AV) -> _AV:
    return _AV(
        lo=a.lo.T, hi=a.hi.T, integer=a.integer, value=None if a.value is None else a.value.T
    )


def _dot_left(ca: _Ch, b: _AV, mb) -> _Ch:
    """Change of ``A @ B`` when only ``A`` changes (``B`` fixed, ``|B| <= mb``)."""
    d = _smul_mat(ca.d, mb)
    row_l1 = np.sum(mb, axis=1)  # ||B[j, :]||_1
    row_l2 = np.sqrt(np.sum(mb * mb, axis=1))
    if ca.axis == 0:  # rows of A are records: the output row i reads record i
        enum = None
        if ca.enum is not None and b.value is not None:
            enum = ca.enum @ b.value
        if enum is not None and enum.size <= MAX_ENUM_SIZE:
            return _from_enum(0, _f(enum), d.shape)
        spec = np.linalg.norm(mb, 2) if mb.size else 0.0
        return _Ch(0, d, _smul(ca.l1, _amax(row_l1)), _smul(ca.l2, spec))
    if ca.axis == 1:  # the contracted axis: record j adds A[:, j] (x) B[j, :]
        l1 = _amax(_smul(ca.l1, row_l1))
        l2 = _amax(_smul(ca.l2, row_l2))
        dd = _max_prod(ca.d, mb) if ca.d.size else d
        return _Ch(None, dd, _f(l1), _f(l2))
    spec = np.linalg.norm(mb, 2) if mb.size else 0.0
    return _Ch(None, d, _smul(ca.l1, _amax(row_l1)), _smul(ca.l2, spec))


def _smul_mat(d, m):
    """``d @ m`` for nonnegative bounds with 0 * inf = 0."""
    return _smatmul(_f(d), _f(m))


def _max_prod(d, m):
    """``max_j d_ij m_jk`` with 0 * inf = 0, over blocks of ``j`` (memory bounded by
    ``MAX_ENUM_SIZE`` values rather than ``i j k``)."""
    d, m = _f(d), _f(m)
    step = max(1, MAX_ENUM_SIZE // max(d.shape[0] * m.shape[1], 1))
    out = np.zeros((d.shape[0], m.shape[1]))
    for j in range(0, d.shape[1], step):
        block = _smul(d[:, j : j + step, None], m[None, j : j + step, :])
        out = np.maximum(out, np.max(block, axis=1))
    return out


def _smatmul(x, y):
    """``sum_j x_ij y_jk`` with 0 * inf = 0 (:func:`_smul`), as a matrix product: the finite
    part by BLAS, the infinite terms counted separately (``nan`` where both ``+inf`` and
    ``-inf`` terms meet, as the sum of the products would give)."""
    xinf, yinf = np.isinf(x), np.isinf(y)
    out = np.where(xinf, 0.0, x) @ np.where(yinf, 0.0, y)
    if not (xinf.any() or yinf.any()):
        return out

    def hits(p, q):  # some j with p_ij and q_jk (counts of 0/1 terms: exact in float)
        return (p.astype(np.float64) @ q.astype(np.float64)) > 0

    xp, xn, yp, yn = x > 0, x < 0, y > 0, y < 0
    xpi, xni, ypi, yni = x == np.inf, x == -np.inf, y == np.inf, y == -np.inf
    up = hits(xpi, yp) | hits(xni, yn) | hits(xp, ypi) | hits(xn, yni)
    down = hits(xpi, yn) | hits(xni, yp) | hits(xp, yni) | hits(xn, ypi)
    out = np.where(up, np.inf, out)
    out = np.where(down, -np.inf, out)
    return np.where(up & down, np.nan, out)


def _interval_matmul(a: _AV, b: _AV):
    """``(lo, hi)`` of ``sum_j [a_kj b_jl]`` over the intervals of ``a`` and ``b``: the smallest
    and largest of the four corner products per term, summed. When one operand is exact (the
    usual constant or data matrix), the corner taken depends on its sign only, so the sums are
    matrix products; else the terms are formed (memory ``k j l``)."""
    if np.array_equal(a.lo, a.hi):
        pos, neg = np.maximum(a.lo, 0.0), np.minimum(a.lo, 0.0)
        return _smatmul(pos, b.lo) + _smatmul(neg, b.hi), _smatmul(pos, b.hi) + _smatmul(neg, b.lo)
    if np.array_equal(b.lo, b.hi):
        pos, neg = np.maximum(b.lo, 0.0), np.minimum(b.lo, 0.0)
        return _smatmul(a.lo, pos) + _smatmul(a.hi, neg), _smatmul(a.hi, pos) + _smatmul(a.lo, neg)
    corners = [_smul(x[:, :, None], y[None, :, :]) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    with np.errstate(invalid="ignore"):  # +inf meeting -inf: nan, made -inf/+inf by _clean
        return np.sum(np.minimum.reduce(corners), axis=1), np.sum(np.maximum.reduce(corners), 1)


def _dot_both(a, b, ca: _Ch, cb: _Ch, ma, mb, same=False) -> _Ch:
    """Both operands change: ``X'Y`` over the records (contracted axis) row by row, else the
    product rule."""
    if ca.axis == 1 and cb.axis == 0:
        # per record j: A[:, j] (x) B[j, :], then summed over j
        if ca.enum is not None and cb.enum is not None:
            ea = np.swapaxes(ca.enum, 1, 2)  # (S, n|1, p)
            prod = ea[..., :, None] * cb.enum[..., None, :]
            if prod.size <= MAX_ENUM_SIZE:
                n = a.shape[1]
                row = _from_enum(0, _f(prod), (n, a.shape[0], b.shape[1]))
                return _Ch(None, _amax(row.d, axis=0), _f(_amax(row.l1)), _f(_amax(row.l2)))
        al, ah = a.lo.T[:, :, None], a.hi.T[:, :, None]
        bl, bh = b.lo[:, None, :], b.hi[:, None, :]
        da, db = ca.d.T[:, :, None], cb.d[:, None, :]
        m_a, m_b = ma.T[:, :, None], mb[:, None, :]
        corners = [_smul(x, y) for x in (al, ah) for y in (bl, bh)]
        width = _width(np.minimum.reduce(corners), np.maximum.reduce(corners))
        d_rows = np.minimum(_smul(da, m_b) + _smul(m_a, db), width)  # (n, p, q)
        if same and d_rows.shape[1] == d_rows.shape[2]:  # x_k x_k = x_k^2 on the diagonal
            sq_lo, sq_hi = _square_interval(b.lo, b.hi)  # (n, p)
            k = np.arange(d_rows.shape[1])
            d_rows[:, k, k] = np.minimum(d_rows[:, k, k], _width(sq_lo, sq_hi))
        l1 = np.sum(d_rows, axis=(1, 2))
        l2 = np.sqrt(np.sum(d_rows * d_rows, axis=(1, 2)))
        return _Ch(None, _amax(d_rows, axis=0), _f(_amax(l1)), _f(_amax(l2)))
    ca, cb = _as_agg(ca), _as_agg(cb)
    d = _smul_mat(ca.d, mb) + _smul_mat(ma, cb.d)
    inf = np.array(np.inf)
    return _Ch(None, d, inf, inf.copy())


def _join_parts(parts, axis) -> _AV:
    lo = np.concatenate([p.lo for p in parts], axis=axis)
    hi = np.concatenate([p.hi for p in parts], axis=axis)
    integer = all(p.integer for p in parts)
    if all(p.value is not None for p in parts):
        return _exact(np.concatenate([p.value for p in parts], axis=axis), integer=integer or None)
    ch = {}
    for g in set().union(*[p.ch.keys() for p in parts]):
        axes = {p.ch[g].axis for p in parts if g in p.ch}
        row = len(axes) == 1 and None not in axes and axis not in axes
        ds, l1, l2, enums = [], 0.0, 0.0, []
        for p in parts:
            c = p.ch.get(g)
            if c is None:
                ds.append(np.zeros(p.shape))
                enums.append(None if p.value is None else p.value[None])
                continue
            c = c if row else _as_agg(c)
            ds.append(c.d)
            l1 = l1 + c.l1
            l2 = l2 + c.l2 * c.l2
            enums.append(c.enum)
        rec = next(iter(axes)) if row else None
        if row and all(e is not None for e in enums):
            # the record axis stays 1 when it is 1 in every part (the same values in every row)
            r = 1 if all(e.shape[1 + rec] == 1 for e in enums) else lo.shape[rec]
            full = [
                np.broadcast_to(e, (e.shape[0], *p.shape[:rec], r, *p.shape[rec + 1 :]))
                for e, p in zip(enums, parts, strict=True)
            ]
            s = max(e.shape[0] for e in full)
            full = [np.broadcast_to(e, (s, *e.shape[1:])) for e in full]
            e = np.concatenate(full, axis=1 + axis)
            ch[g] = _finish(_from_enum(rec, _f(e), lo.shape), lo, hi)
            continue
        ch[g] = _finish(_Ch(rec, np.concatenate(ds, axis=axis), _f(l1), np.sqrt(_f(l2))), lo, hi)
    return _AV(lo=lo, hi=hi, integer=integer, ch=ch)


def _join(node, ins) -> _AV:
    if isinstance(getattr(node.op, "axis", None), int | np.integer):
        axis, parts = int(node.op.axis), ins
    else:
        axis, parts = int(_exact_value(ins[0], "the axis of a join").item()), ins[1:]
    axis %= max(len(parts[0].shape), 1)
    return _join_parts(parts, axis)


def _reshape(a: _AV, shape_av: _AV) -> _AV:
    new = tuple(int(s) for s in _exact_value(shape_av, "the shape of a reshape"))
    lo = a.lo.reshape(new)
    hi = a.hi.reshape(new)
    ch = {}
    for g, c in a.ch.items():
        if c.axis == 0 and len(new) and new[0] == a.shape[0]:
            enum = None
            if c.enum is not None:
                rec = c.enum.shape[1]
                enum = c.enum.reshape((c.enum.shape[0], rec, *new[1:]))
            ch[g] = _Ch(0, c.d.reshape(new), c.l1, c.l2, enum)
        else:
            c = _as_agg(c)
            ch[g] = _Ch(None, c.d.reshape(new), c.l1, c.l2)
    return _AV(
        lo=lo,
        hi=hi,
        integer=a.integer,
        ch=ch,
        value=None if a.value is None else a.value.reshape(new),
    )


def _alloc(ins) -> _AV:
    v = ins[0]
    shape = tuple(int(_exact_value(s, "the shape of an alloc").item()) for s in ins[1:])
    lo = np.broadcast_to(v.lo, shape).copy()
    hi = np.broadcast_to(v.hi, shape).copy()
    if v.value is not None:
        return _exact(np.broadcast_to(v.value, shape).copy(), integer=v.integer or None)
    f = _bfactor(v.shape, shape)
    ch = {}
    for g, c in v.ch.items():
        c = _as_agg(c)
        ch[g] = _finish(
            _Ch(None, np.broadcast_to(c.d, shape).copy(), c.l1 * f, c.l2 * math.sqrt(f)), lo, hi
        )
    return _AV(lo=lo, hi=hi, integer=v.integer, ch=ch)


# ---- entry points -------------------------------------------------------------------------


def prove_sensitivity(statistic) -> SensitivityProof:
    """Upper bounds on the replace-one L1 and L2 sensitivity of ``statistic``.

    Parameters
    ----------
    statistic : TensorVariable
        A PyTensor expression of record variables (random variables of a model, or ``.dist()``
        variables); see the module docstring for the records and their supports.

    Returns
    -------
    SensitivityProof
        ``proven`` False (with ``reason``) when an operation has no rule or a bound is
        infinite; never raises for an unsupported graph.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pytensor.tensor as pt
    >>> with pm.Model():
    ...     y = pm.Normal("y", shape=8)
    >>> prove_sensitivity(pt.clip(y, -1.0, 2.0).sum()).l1
    3.0
    >>> p = prove_sensitivity(y.sum())
    >>> p.proven, p.reason
    (False, 'the bound is infinite (records without bounds, e.g. unclipped; clip them)')
    """
    try:
        an = _Analysis(statistic)
    except _Unprovable as e:
        return SensitivityProof(np.inf, np.inf, False, str(e))
    names = tuple(str(r.name) for r in an.records)
    try:
        av = an.av(statistic)
    except _Unprovable as e:
        return SensitivityProof(np.inf, np.inf, False, str(e), names)
    except (ValueError, IndexError, TypeError) as e:  # a shape this analysis did not foresee
        return SensitivityProof(np.inf, np.inf, False, f"analysis failed: {e}", names)
    l1 = l2 = 0.0
    for c in av.ch.values():
        c = _as_agg(c)
        l1 = max(l1, float(min(float(c.l1), float(np.sum(c.d)))))
        l2 = max(l2, float(min(float(c.l2), math.sqrt(float(np.sum(c.d * c.d))))))
    l2 = min(l2, l1)
    if not (math.isfinite(l1) and math.isfinite(l2)):
        reason = "the bound is infinite (records without bounds, e.g. unclipped; clip them)"
        return SensitivityProof(np.inf, np.inf, False, reason, names)
    return SensitivityProof(l1, l2, True, None, names)


#: statistic -> (the data values it read, its proof); see :func:`_proof_of`
_PROOFS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _proof_of(statistic) -> SensitivityProof:
    """:func:`prove_sensitivity` of ``statistic``, made once and reused while every data
    container (``pm.Data``) its graph reads holds the same value object.

    The check when a release is built and the privacy report (which ``pm.sample`` writes on
    every run) prove the same statistic; ``pm.set_data`` stores a new value object, so the
    proof is made again after it.

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model():
    ...     w = pm.Data("w", [1.0, 4.0])
    ...     x = pm.Bernoulli("x", p=0.5, shape=2)
    ...     stat = (w * x).sum()
    ...     first = _proof_of(stat)
    ...     again = _proof_of(stat)
    ...     pm.set_data({"w": [1.0, 9.0]})
    ...     after = _proof_of(stat)
    >>> first is again, first.l1, after.l1
    (True, 4.0, 9.0)
    """
    data = [
        v.get_value(borrow=True) for v in ancestors([statistic]) if isinstance(v, SharedVariable)
    ]
    data = [a for a in data if isinstance(a, np.ndarray)]  # pm.Data values (not generators)
    hit = _PROOFS.get(statistic)
    if hit is not None and len(hit[0]) == len(data):
        if all(ref() is a for ref, a in zip(hit[0], data, strict=True)):
            return hit[1]
    proof = prove_sensitivity(statistic)
    # weak references: a replaced value is not kept alive, and a dead one matches nothing
    _PROOFS[statistic] = (tuple(weakref.ref(a) for a in data), proof)
    return proof


def sensitivity_norm(mechanism) -> str:
    """``"l2"`` for the Gaussian mechanisms, else ``"l1"``: the norm of ``sensitivity``.

    Examples
    --------
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> sensitivity_norm(Laplace(epsilon=1.0))
    'l1'
    """
    return "l2" if getattr(mechanism, "family", "") in L2_FAMILIES else "l1"


def _candidates(support) -> list | None:
    """Values of one record element a witness search tries (None: unbounded support)."""
    lo, hi, integer, values = support
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    if values is not None and len(values) <= 12:
        return [float(v) for v in values]
    pts = {lo, hi, 0.5 * (lo + hi), 0.0, 0.5, -0.5, 0.25 * (3 * lo + hi), 0.25 * (lo + 3 * hi)}
    pts = sorted(p for p in pts if lo <= p <= hi)
    return [float(np.round(p)) if integer else p for p in pts]


def witness_change(statistic, max_evals: int = 2000) -> tuple[float, float]:
    """The largest L1 and L2 change of ``statistic`` found on concrete neighbouring data sets.

    A lower bound on the sensitivity (each change is realized by two data sets that differ in
    one record): every record set takes a candidate value in every row (support ends, middle,
    0, ``±1/2``, or all values of a small discrete support), and one row (all rows when there
    are at most 8, else 8 spread rows) is replaced by another candidate. Records with an
    unbounded support give ``(0, 0)`` (nothing tried).

    Examples
    --------
    >>> import pymc as pm, pytensor.tensor as pt
    >>> x = pm.Bernoulli.dist(p=0.5, shape=50)
    >>> witness_change(pt.switch(pt.eq(x.sum(), 50), 1000, x.sum()))
    (951.0, 951.0)
    """
    import pytensor
    from pytensor.compile.mode import Mode
    from pytensor.graph.replace import graph_replace

    try:
        an = _Analysis(statistic)
    except _Unprovable:
        return 0.0, 0.0
    recs = list(an.records)
    if not recs:
        return 0.0, 0.0
    cands = {rv: _candidates(an.supports[rv][1]) for rv in recs}
    if any(c is None for c in cands.values()):
        return 0.0, 0.0
    shapes = {rv: an._rv_shape(rv) for rv in recs}
    ins = [_pt_tensor(rv) for rv in recs]
    out = graph_replace(statistic, dict(zip(recs, ins, strict=True)), strict=False)
    fn = pytensor.function(
        ins, out, mode=Mode(linker="py", optimizer=None), on_unused_input="ignore"
    )
    best1 = best2 = 0.0
    evals = 0
    for key, info in an.groups.items():
        members = [rv for rv, _ in info["members"]]
        joint = list(itertools.islice(itertools.product(*[cands[rv] for rv in members]), 24))
        n = 1 if isinstance(key, tuple) else key
        rows = range(n) if n <= 8 else sorted({int(r) for r in np.linspace(0, n - 1, 8)})
        for base in joint:
            data = {rv: np.full(shapes[rv], cands[rv][0]) for rv in recs}
            for rv, v in zip(members, base, strict=True):
                data[rv] = np.full(shapes[rv], v)
            try:
                t0 = _f(fn(*[data[rv].astype(rv.dtype) for rv in recs])).ravel()
            except Exception:
                continue
            for r in rows:
                for other in joint:
                    if other == base or evals >= max_evals:
                        continue
                    evals += 1
                    nb = dict(data)
                    for rv, v in zip(members, other, strict=True):
                        arr = data[rv].copy()
                        if arr.ndim:
                            arr[r] = v
                        else:
                            arr = np.array(v)
                        nb[rv] = arr
                    try:
                        t1 = _f(fn(*[nb[rv].astype(rv.dtype) for rv in recs])).ravel()
                    except Exception:
                        continue
                    diff = t1 - t0
                    if np.all(np.isfinite(diff)):
                        best1 = max(best1, float(np.abs(diff).sum()))
                        best2 = max(best2, float(np.sqrt((diff * diff).sum())))
    return best1, best2


def _pt_tensor(rv):
    """A fresh input variable of the type of ``rv``."""
    import pytensor.tensor as pt

    return pt.tensor(dtype=rv.dtype, shape=rv.type.shape)


def check_declared_sensitivity(statistic, mechanism, release: str = "the release"):
    """Refuse a declared sensitivity that the statistic provably exceeds; warn when it cannot
    be confirmed.

    Mechanisms built from a noise scale only (no ``epsilon``, ``delta``, ``rho`` or
    ``sensitivity`` given) state no privacy and are not checked. Otherwise, with ``B`` the
    bound of :func:`prove_sensitivity` in the mechanism's norm (L2 for the Gaussians, else L1)
    and ``D`` the declared sensitivity:

    * ``D >= B`` (within a relative ``1e-9``, float rounding of the proof): accepted;
    * ``D < B`` and two concrete neighbouring data sets change the statistic by more than ``D``
      (:func:`witness_change`): ``ValueError`` naming ``sensitivity`` with ``B`` and ``D``
      (the bound is then attained or nearly: exact for linear statistics and enumerated
      records);
    * ``D < B`` but no such pair is found (the proof may be loose, e.g. ``sum x`` and
      ``sum x**2`` moved together), or no finite bound is proven: a
      :class:`SensitivityProofWarning` that says so (``DataAugmentation`` still checks the
      record changes it proposes).

    Returns
    -------
    SensitivityProof or None
        The proof, or None when nothing was declared.

    Raises
    ------
    ValueError
        Naming ``sensitivity``, with the proven bound and the declared value.

    Examples
    --------
    >>> import pymc as pm, pytensor.tensor as pt
    >>> from pymc_dp.mechanisms.geometric import Geometric
    >>> with pm.Model():
    ...     x = pm.Bernoulli("x", p=0.5, shape=50)
    >>> check_declared_sensitivity(
    ...     pt.switch(pt.eq(x.sum(), 50), 1000, x.sum()), Geometric(epsilon=1.0), "z")
    Traceback (most recent call last):
    ...
    ValueError: the declared sensitivity of z is 1 but its statistic can change by up to 951 ...
    """
    if not getattr(mechanism, "privacy_declared", False) or _SKIP_BUILD_CHECK[0]:
        return None
    proof = _proof_of(statistic)
    norm = sensitivity_norm(mechanism)
    declared = float(mechanism.sensitivity)
    if not proof.proven:
        warnings.warn(
            f"no bound on the sensitivity of {release}'s statistic can be proven from its graph "
            f"({proof.reason}); the declared {norm.upper()} sensitivity {declared:g} is not "
            "checked here (DataAugmentation still checks the record changes it proposes)",
            SensitivityProofWarning,
            stacklevel=3,
        )
        return proof
    bound = proof.bound(norm)
    if bound <= declared * (1 + RTOL):
        return proof
    w1, w2 = witness_change(statistic)
    seen = w2 if norm == "l2" else w1
    if seen > declared * (1 + RTOL):
        raise ValueError(
            f"the declared sensitivity of {release} is {declared:g} but its statistic can change "
            f"by up to {bound:.12g} ({norm.upper()} norm) when one record is replaced (a bound "
            f"proven from the statistic's graph; two neighbouring data sets differ by "
            f"{seen:.12g}). Declare sensitivity >= the largest change "
            f"(e.g. sensitivity={_round_up(bound)}), or clip the records so that the statistic "
            "changes less"
        )
    warnings.warn(
        f"the declared {norm.upper()} sensitivity {declared:g} of {release} could not be "
        f"confirmed: the bound proven from its statistic's graph is {bound:.12g}, but no pair of "
        f"neighbouring data sets tried changes it by more than {seen:.12g} (the proof may be "
        "loose for this statistic); DataAugmentation still checks the record changes it proposes",
        SensitivityProofWarning,
        stacklevel=3,
    )
    return proof


def _round_up(x: float):
    r = float(np.format_float_positional(x, precision=6, unique=True))
    if r < x:
        r = float(np.nextafter(x, np.inf))
    return int(r) if r == int(r) else r
