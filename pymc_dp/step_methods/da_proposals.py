"""Proposals of the data-augmentation step: forward (ancestral) draws of a record block.

All ``n`` proposals of a sweep are drawn at once given the current values of everything else
(records are conditionally independent given the parameters). Two proposers draw them with the
same law:

* :class:`DirectProposer`, for record variables that are plain PyTensor ``RandomVariable`` s
  without a transform: only the distribution parameters are compiled, the draw is the op's own
  ``rng_fn`` with the step's numpy generator;
* :class:`CompiledProposer`: one compiled PyTensor graph of the record variables (any
  forward-samplable distribution), whose random generators are reseeded from the step's.

:func:`make_proposer` picks one for a block (see
:class:`~pymc_dp.step_methods.da_blocks.BlockGraph`). A proposer's ``draw(args, rng)`` returns a
list of fresh, writeable, C-contiguous arrays, one per record variable of the block.

Examples
--------
>>> import numpy as np
>>> from pytensor.tensor.random.basic import bernoulli
>>> prop = DirectProposer([[0, np.dtype("int64"), bernoulli, None, [np.full(4, 0.5)], None,
...                         "bernoulli"]])
>>> [x.shape for x in prop.draw([np.zeros(4, dtype="int64")], np.random.default_rng(0))]
[(4,)]
"""

from __future__ import annotations

import copy

import numpy as np
from pymc.pytensorf import compile
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomGeneratorType
from pytensor.tensor.type_other import NoneTypeT

from pymc_dp.step_methods.da_checks import forward_error

__all__ = [
    "CompiledProposer",
    "DirectProposer",
    "draw_kind",
    "generator_states",
    "make_proposer",
    "reseed",
    "set_generator_states",
]


def _draw_one(op, dist, size, kind, checked, rng):
    """One record variable's proposals: ``op``'s law with parameters ``dist``."""
    if kind == "bernoulli":
        (p,) = dist
        return np.less(rng.random(np.shape(p) if size is None else size), p)
    if kind == "normal":
        loc, scale = dist
        if checked and (scale < 0).any():
            raise ValueError(f"negative scale of a Normal record: {scale}")
        if size is None:
            size = np.broadcast_shapes(loc.shape, scale.shape)
        # Generator.normal(loc, scale) is loc + scale * standard_normal, elementwise
        x = rng.standard_normal(size)
        x *= scale
        x += loc
        return x
    return op.rng_fn(rng, *dist, size)


class DirectProposer:
    """Proposals drawn with numpy from the record distributions' own ``rng_fn``.

    For record variables that are plain PyTensor ``RandomVariable`` s without a transform, only
    the distribution *parameters* (and ``size``) are compiled, as functions of the model's value
    variables; the draw is ``op.rng_fn(rng, *params, size)``, the very call that
    ``RandomVariable.perform`` makes in a compiled graph, so the law is the same. Variables of a
    block are drawn in model (topological) order, later ones with the earlier proposals in place
    of the current records (ancestral sampling). ``BernoulliRV`` (whose ``rng_fn`` goes through
    scipy's binomial sampler) is drawn as ``u < p`` with ``u ~ Uniform[0, 1)``, the same law
    up to the 2^-53 resolution of the uniform draws; ``NormalRV`` is drawn as
    ``loc + scale * standard_normal`` (what ``Generator.normal`` computes, without its
    per-call broadcasting overhead).

    Parameters
    ----------
    specs : list
        Per record variable: (position in args, dtype, op, compiled parameter function or
        None, constant parameters or None, size: a fixed tuple, None, or "fn" (last output of
        the function), kind: "bernoulli", "normal" or None).
    """

    def __init__(self, specs):
        self.specs = specs

    def draw(self, args, rng):
        """Fresh proposals of every record variable, drawn with ``rng``."""
        args = list(args)
        out = []
        for pos, dtype, op, fn, const, size, kind in self.specs:
            dist = const if fn is None else fn(*args)
            if size == "fn":
                *dist, size = dist
                size = tuple(size.tolist())
            x = _draw_one(op, dist, size, kind, fn is not None, rng)
            if x.dtype != dtype:
                x = x.astype(dtype)
            if not (x.flags.owndata and x.flags.writeable and x.flags.c_contiguous):
                x = np.array(x, dtype=dtype, order="C")
            args[pos] = x
            out.append(x)
        return out

    def functions(self) -> list:
        """Compiled functions holding random generators: none (draws use the step's)."""
        return []

    def reseed(self, rng):
        """Nothing to do: the draws come from the step's generator."""


class CompiledProposer:
    """Proposals from one compiled PyTensor graph of the record variables (any forward-samplable
    distribution: SymbolicRandomVariables, CustomDist, transformed variables ...)."""

    def __init__(self, fn):
        self.fn = fn

    def draw(self, args, rng):
        """Fresh proposals (the graph's own generators; ``rng`` is not used)."""
        return [np.array(x) for x in self.fn(*args)]

    def functions(self) -> list:
        """The compiled function, whose shared generators are part of the step's state."""
        return [self.fn]

    def reseed(self, rng):
        """Fresh generator states drawn from ``rng``."""
        reseed(self.fn, rng)


def reseed(fn, rng) -> None:
    """Give the random generators of compiled function ``fn`` fresh states drawn from ``rng``."""
    for var in fn.get_shared():
        if isinstance(var.type, RandomGeneratorType):
            var.set_value(np.random.default_rng(rng.integers(2**63)), borrow=True)


def generator_states(fns) -> list:
    """The generators held by the compiled functions ``fns`` (copies, in a fixed order)."""
    return [
        _copy_generator(var.get_value(borrow=True))
        for fn in fns
        for var in fn.get_shared()
        if isinstance(var.type, RandomGeneratorType)
    ]


def set_generator_states(fns, gens) -> None:
    """Put copies of generators ``gens`` (from :func:`generator_states`) into ``fns``."""
    shared = [
        var for fn in fns for var in fn.get_shared() if isinstance(var.type, RandomGeneratorType)
    ]
    if len(shared) != len(gens):
        raise ValueError(f"expected {len(shared)} generator states, got {len(gens)}")
    for var, g in zip(shared, gens, strict=True):
        var.set_value(_copy_generator(g), borrow=True)


def _copy_generator(g):
    return copy.deepcopy(g)


def draw_kind(op):
    """Which shortcut :class:`DirectProposer` uses for ``op`` (None: the op's ``rng_fn``)."""
    if type(op) is BernoulliRV:
        return "bernoulli"
    if type(op) is NormalRV:
        return "normal"
    return None


def _fixed(outs) -> bool:
    return all(isinstance(i, Constant) for i in graph_inputs(outs))


# a constant size is evaluated once: no C/numba compilation for it
_CONST_MODE = Mode(linker="py", optimizer="fast_compile")


def _direct_spec(g, rv, value):
    """The :class:`DirectProposer` spec of record ``rv`` of block graph ``g``, or None."""
    model, ck = g.model, g.ck
    op = rv.owner.op
    if not isinstance(op, RandomVariable) or model.rvs_to_transforms.get(rv) is not None:
        return None
    size = op.size_param(rv.owner)
    outs = list(model.replace_rvs_by_values(list(op.dist_params(rv.owner))))
    size_spec = None
    if not isinstance(size.type, NoneTypeT):
        if _fixed([size]):
            size_spec = tuple(int(i) for i in compile([], size, mode=_CONST_MODE)())
        else:
            outs.append(model.replace_rvs_by_values([size])[0])
            size_spec = "fn"
    try:
        fn = compile(model.value_vars, outs, on_unused_input="ignore", **ck)
    except Exception:
        return None
    fn.trust_input = True
    kind = draw_kind(op)
    const = None
    if _fixed(outs):
        # parameters fixed by the model: evaluated (and checked) once
        const = [np.asarray(o) for o in fn(*g.args)]
        fn = None
        if kind == "normal" and (const[1] < 0).any():
            kind = None  # rng_fn raises numpy's own error
    pos = g.input_names.index(value.name)
    return [pos, np.dtype(value.dtype), op, fn, const, size_spec, kind]


def make_proposer(g):
    """A :class:`DirectProposer` when every record variable of block graph ``g`` allows it
    (and ``g.direct``), else a :class:`CompiledProposer` of the forward graph."""
    if g.direct:
        specs = []
        for rv, v in zip(g.block_rvs, g.values, strict=True):
            spec = _direct_spec(g, rv, v)
            if spec is None:
                break
            specs.append(spec)
        else:
            return DirectProposer(specs)
    try:
        fn = compile(g.model.value_vars, g.prop_vals, on_unused_input="ignore", **g.ck)
    except Exception as err:
        raise forward_error(g.label, err) from err
    fn.trust_input = True
    return CompiledProposer(fn)
