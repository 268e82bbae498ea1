"""Structural test that per-record log-density terms read only their own record.

DataAugmentation proposes one record at a time, which is exact only when the records are
conditionally independent given the other variables: row ``i`` of every per-record log-density
term (the records' priors, their observed children) may read row ``i`` of the record variables
and anything that is not a record, nothing else. A numerical test (change record ``j``, check
that the other rows stay put) is fooled by couplings that vanish at the points tried (a
coefficient that is 0 at the initial point, a uniform transition matrix), so this module decides
it from the graph instead.

Each variable of the graph gets a state:

* ``FREE``: does not depend on the values of the records (shapes do not count);
* ``ROW``: has a leading record axis, and its row ``i`` depends on the records only through
  their row ``i``;
* ``IDENT``: free, and equal to ``arange`` along its leading axis (the identity index of
  ``take_along_axis``-style indexing);
* :class:`Coupled`: reads several records (the op and the reason are kept for the message);
* :class:`Unknown`: an op this module has no rule for.

Rules cover elementwise ops, dimshuffles keeping axis 0 first, reductions and joins along other
axes, basic and advanced indexing that leaves the record axis alone (or indexes a free table
with per-record indices), ``Alloc`` / ``Reshape`` keeping the leading axis, ``Blockwise`` ops
batched over the record axis, ``dot`` with a free right operand and ``OpFromGraph`` bodies.
Parameter checks (``CheckParameterValue``) are transparent: their conditions only guard the
value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymc.logprob.utils import CheckParameterValue
from pytensor.compile.builders import OpFromGraph
from pytensor.graph.basic import Variable
from pytensor.graph.traversal import io_toposort
from pytensor.tensor.basic import (
    Alloc,
    ARange,
    Join,
    MakeVector,
    ScalarFromTensor,
    TensorFromScalar,
    get_underlying_scalar_constant_value,
)
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.extra_ops import CumOp
from pytensor.tensor.math import Argmax, Dot
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.sort import ArgSortOp, SortOp
from pytensor.tensor.special import LogSoftmax, LogSumExp, Softmax
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
)
from pytensor.tensor.variable import TensorConstant

__all__ = ["FREE", "IDENT", "ROW", "Coupled", "Unknown", "row_states"]

FREE = "free"
ROW = "row"
IDENT = "ident"


@dataclass(frozen=True)
class Coupled:
    """The op at ``node`` makes one row read other records; ``reason`` says how."""

    node: object
    reason: str


@dataclass(frozen=True)
class Unknown:
    """No rule for the op at ``node`` (a numerical check has to decide)."""

    node: object


_AXIS_OPS = (CAReduce, CumOp, Softmax, LogSoftmax, LogSumExp, Argmax, SortOp, ArgSortOp)
# ops that turn tensors into scalars or scalars into a vector: the record axis is lost
_SCALAR_OPS = (ScalarFromTensor, TensorFromScalar, MakeVector)


def _is_free(s) -> bool:
    return s == FREE or s == IDENT


def _bad(s) -> bool:
    return isinstance(s, Coupled | Unknown)


def _const(v):
    try:
        return int(get_underlying_scalar_constant_value(v))
    except Exception:
        return None


def _axes(op, ndim):
    axis = getattr(op, "axis", None)
    if axis is None:
        return None
    if isinstance(axis, int | np.integer):
        axis = (int(axis),)
    return {int(a) % max(ndim, 1) for a in axis}


def _column_of(node, n) -> bool:
    """``Reshape`` of a vector to ``(n, 1, ..., 1)`` (or ``(-1, 1, ..., 1)``), constant shape.

    PyMC's ``take_along_axis``-style gathers (the Categorical log-density with per-record
    probabilities) index with ``arange(n).reshape(-1, 1)``: still the identity index along
    the leading axis.
    """
    shape = node.inputs[1]
    if node.inputs[0].type.ndim != 1 or not isinstance(shape, TensorConstant):
        return False
    dims = np.asarray(shape.data).reshape(-1).tolist()
    return len(dims) >= 1 and dims[0] in (-1, n) and all(d == 1 for d in dims[1:])


def _node_states(node, ins, n):
    """States of ``node``'s outputs given its inputs' states ``ins``."""
    op = node.op
    out = node.outputs
    dep = [not _is_free(s) for s in ins]
    if isinstance(op, Shape | Shape_i):
        return [FREE] * len(out)
    if isinstance(op, ARange):
        if not any(dep) and _const(node.inputs[0]) == 0 and _const(node.inputs[2]) == 1:
            return [IDENT]
        if not any(dep):
            return [FREE]
        return [Coupled(node, "builds a range from record values")]
    if isinstance(op, CheckParameterValue):
        # the conditions only guard the value (a failed check raises): its state is the value's,
        # whatever the conditions read (e.g. ``all(p >= 0)`` over every record's probabilities)
        return [ins[0]] * len(out)
    for s in ins:
        if _bad(s):
            return [s] * len(out)
    if not any(dep):
        if isinstance(op, DimShuffle) and ins[0] == IDENT:
            return [IDENT if op.new_order and op.new_order[0] == 0 else FREE]
        if isinstance(op, Reshape) and ins[0] == IDENT and _column_of(node, n):
            return [IDENT]
        return [FREE] * len(out)
    return _dependent_states(node, ins, dep, n)


def _dependent_states(node, ins, dep, n):
    """States of the outputs of a node reading the records (``dep``: which inputs do)."""
    op = node.op
    out = node.outputs
    if isinstance(op, SpecifyShape):
        return [ins[0]] * len(out)
    if isinstance(op, Elemwise):
        for v, s in zip(node.inputs, ins, strict=True):
            if s == ROW and v.type.shape[0] == 1 and n != 1:
                return [Coupled(node, "broadcasts one record over all records")] * len(out)
        return [ROW] * len(out)
    if isinstance(op, DimShuffle):
        if op.new_order and op.new_order[0] == 0:
            return [ROW]
        return [Coupled(node, "moves or drops the record axis (a transpose)")]
    if isinstance(op, _AXIS_OPS):
        nd = node.inputs[0].type.ndim
        axes = _axes(op, nd)
        if any(dep[1:]):
            return [Unknown(node)] * len(out)
        if axes is None or 0 in axes:
            return [Coupled(node, "combines values across the record axis")] * len(out)
        return [ROW] * len(out)
    if isinstance(op, Join):
        axis = getattr(op, "axis", None)
        if axis is None:
            axis = _const(node.inputs[0])
            if dep[0]:
                return [Coupled(node, "joins along a record-dependent axis")]
        if axis is None:
            return [Unknown(node)]
        if axis % out[0].type.ndim == 0:
            return [Coupled(node, "concatenates along the record axis")]
        return [ROW]
    if isinstance(op, Alloc):
        if dep[0] and node.inputs[0].type.ndim == out[0].type.ndim:
            return [ROW]
        return [Coupled(node, "broadcasts record values along a new leading axis")]
    if isinstance(op, Reshape):
        if dep[1]:
            return [Unknown(node)]
        if out[0].type.ndim >= 1 and out[0].type.shape[0] == n == node.inputs[0].type.shape[0]:
            return [ROW]
        return [Unknown(node)]
    return _indexing_states(node, ins, dep, n)


def _indexing_states(node, ins, dep, n):
    """:func:`_dependent_states` for indexing, contractions and composite ops."""
    op = node.op
    out = node.outputs
    if isinstance(op, Subtensor):
        if any(dep[1:]):
            return [Coupled(node, "uses a record value as an index")]
        idx = op.idx_list
        if not idx or idx[0] == slice(None, None, None):
            return [ROW]
        return [Coupled(node, "indexes or slices the record axis (e.g. x[::-1], x[1:], x[0])")]
    if isinstance(op, AdvancedSubtensor):
        return [_advanced(node, ins, n)]
    if isinstance(op, IncSubtensor | AdvancedIncSubtensor):
        return [Unknown(node)]
    if isinstance(op, Dot):
        if ins[0] == ROW and _is_free(ins[1]) and node.inputs[0].type.ndim >= 2:
            return [ROW]
        return [Coupled(node, "contracts over the record axis (a dot product)")]
    if isinstance(op, Blockwise):
        return [_blockwise(node, ins)] * len(out)
    if isinstance(op, OpFromGraph):
        inner = row_states(op.inner_outputs, dict(zip(op.inner_inputs, ins, strict=True)), n)
        return [inner[o] for o in op.inner_outputs]
    if isinstance(op, _SCALAR_OPS):
        return [Coupled(node, "turns record values into scalars")] * len(out)
    return [Unknown(node)] * len(out)


def _advanced(node, ins, n):
    op = node.op
    idx = list(op.idx_list)
    base = ins[0]
    index_states = ins[1:]
    index_vars = node.inputs[1:]
    adv = [k for k, e in enumerate(idx) if not isinstance(e, slice)]
    slice_inputs = [e for e in idx if isinstance(e, slice)]
    # indices referenced by slices must be free
    for sl in slice_inputs:
        for part in (sl.start, sl.stop, sl.step):
            if part is not None and not _is_free(index_states[part]):
                return Coupled(node, "slices with a record value")
    contiguous = adv == list(range(adv[0], adv[0] + len(adv))) if adv else True
    bnd = max((index_vars[idx[k]].type.ndim for k in adv), default=0)
    if base == ROW:
        if idx and idx[0] == slice(None, None, None):
            if all(_is_free(index_states[idx[k]]) for k in adv) and contiguous:
                return ROW
            return Coupled(node, "indexes the records with a record-dependent index")
        if adv and adv[0] == 0 and contiguous and index_states[idx[0]] == IDENT:
            first = index_vars[idx[0]]
            if first.type.ndim == bnd and all(
                _is_free(index_states[idx[k]]) or index_vars[idx[k]].type.ndim == bnd
                for k in adv[1:]
            ):
                return ROW
        return Coupled(node, "indexes or reorders the record axis with an index array")
    # base free: per-record indices into a free table
    if adv and adv[0] == 0 and contiguous:
        ok = all(
            _is_free(index_states[idx[k]])
            or (index_states[idx[k]] == ROW and index_vars[idx[k]].type.ndim == bnd)
            for k in adv
        )
        lead = any(index_states[idx[k]] == ROW and index_vars[idx[k]].type.ndim == bnd for k in adv)
        if ok and lead:
            return ROW
    return Coupled(node, "indexes a table with record values not aligned with the records")


def _blockwise(node, ins):
    op = node.op
    out = node.outputs[0]
    if (
        isinstance(op.core_op, Dot)
        and node.inputs[0].type.ndim == 2
        and ins[0] == ROW
        and _is_free(ins[1])
    ):
        # ``X @ B`` (matmul) with the records as the rows of X: row i is X[i] @ B
        return ROW
    out_batch = out.type.ndim - len(op.outputs_sig[0])
    if out_batch < 1:
        return Coupled(node, "takes the record axis as a core dimension")
    for v, s, sig in zip(node.inputs, ins, op.inputs_sig, strict=True):
        if _is_free(s):
            continue
        if v.type.ndim - len(sig) != out_batch:
            return Coupled(node, "takes the record axis as a core dimension")
    return ROW


def row_states(outputs, leaves, n) -> dict:
    """States (module docstring) of every variable between ``leaves`` and ``outputs``.

    Parameters
    ----------
    outputs : list of Variable
    leaves : dict
        Variable -> state for the inputs to start from (the record value variables as
        ``ROW``); every other input is ``FREE``.
    n : int
        Number of records.

    Returns
    -------
    dict
        Variable -> state, for every variable computed from ``outputs``' inputs.

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> x, rho = pt.vector("x"), pt.scalar("rho")
    >>> y = pt.vector("y")
    >>> good = -((y - rho * x) ** 2)
    >>> bad = -((y - rho * x[::-1]) ** 2)
    >>> st = row_states([good, bad], {x: ROW, y: ROW}, 5)
    >>> st[good], type(st[bad]).__name__
    ('row', 'Coupled')
    """
    states: dict = dict(leaves)
    for node in io_toposort(list(leaves), list(outputs)):
        ins = []
        for v in node.inputs:
            if v not in states:
                states[v] = FREE
            ins.append(states[v])
        for o, s in zip(node.outputs, _node_states(node, ins, n), strict=True):
            states[o] = s
    for o in outputs:
        if isinstance(o, Variable) and o not in states:
            states[o] = FREE
    return states
