"""A discrete-state Markov chain: the latent states of a hidden Markov model.

``MarkovChain(name, init_probs, transition, shape=(..., T))`` is a vector of integer states in
``{0, ..., K-1}`` along its last axis; leading axes are independent chains (regions, say), each
with its own initial distribution and transition matrix after broadcasting. Its log-probability
is

.. math::

    \\log p(s) = \\log \\pi_{s_0} + \\sum_{t=1}^{T-1} \\log P_{s_{t-1}, s_t},

exact, and ``-inf`` outside the support. Forward draws are exact (ancestral sampling, one
categorical draw per step). In a model, :class:`pymc_dp.step_methods.ffbs.FFBS` samples it by
forward filtering, backward sampling.
"""

from __future__ import annotations

import weakref

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions.distribution import Discrete
from pymc.model import Model
from pytensor.graph.basic import Constant
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorVariable

from pymc_dp._cache import numba_registration

__all__ = ["MarkovChain", "MarkovChainRV", "markov_chain", "models_with_markov_chains"]

_ROW_SUM_TOL = 1e-8
# PyTensor caches the compiled draw under this key: bump it whenever the numba draw changes.
_NUMBA_CACHE_VERSION = 1

# Models holding a MarkovChain variable (weakly referenced), so that a step finds the model of a
# chain when ``pm.sample(model=m)`` runs outside ``with m:``.
_MODELS: weakref.WeakSet = weakref.WeakSet()


def models_with_markov_chains() -> list:
    """The live models in which a :class:`MarkovChain` variable was created."""
    return list(_MODELS)


class MarkovChainRV(RandomVariable):
    """Random variable op of :class:`MarkovChain`: parameters ``(init_probs, transition, steps)``.

    ``steps`` (the length ``T`` of the last axis) is a scalar integer parameter, so that it may be
    symbolic (a mutable coordinate length).
    """

    name = "markov_chain"
    signature = "(k),(k,k),()->(t)"
    dtype = "int64"
    _print_name = ("MarkovChain", "\\operatorname{MarkovChain}")

    def _supp_shape_from_params(self, dist_params, param_shapes=None):
        steps = dist_params[2]
        if steps.type.ndim > 0:
            steps = steps[(0,) * steps.type.ndim]
        return (steps,)

    @classmethod
    def rng_fn(cls, rng, init_probs, transition, steps, size):
        """Numpy ancestral draws, vectorised over the chains (a loop over the steps only)."""
        steps = int(np.ravel(steps)[0])
        batch = np.broadcast_shapes(init_probs.shape[:-1], transition.shape[:-2])
        if size is not None:
            batch = tuple(size)
        k = init_probs.shape[-1]
        init = np.broadcast_to(init_probs, (*batch, k))
        trans = np.broadcast_to(transition, (*batch, k, k))
        out = np.empty((*batch, steps), dtype=np.int64)
        if steps == 0:
            return out
        out[..., 0] = _categorical(rng, init)
        for t in range(1, steps):
            prev = out[..., t - 1][..., None, None]
            rows = np.take_along_axis(trans, prev, axis=-2)[..., 0, :]
            out[..., t] = _categorical(rng, rows)
        return out


def _categorical(rng, probs):
    """One categorical draw per row of ``probs`` (last axis), by inversion."""
    cum = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cum[..., -1:]
    return np.minimum((u >= cum).sum(axis=-1), probs.shape[-1] - 1)


markov_chain = MarkovChainRV()


@numba.njit(cache=True)
def _draw_one(rng, probs):
    u = rng.random() * probs.sum()
    acc = 0.0
    for j in range(probs.shape[0]):
        acc += probs[j]
        if u < acc:
            return j
    return probs.shape[0] - 1


def _markov_chain_numba_core(op, node):
    from pytensor.link.numba.dispatch.basic import numba_njit

    @numba_njit
    def random_fn(rng, init_probs, transition, steps, out=None):
        n = out.shape[0] if out is not None else int(steps)
        if out is None:
            out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        out[0] = _draw_one(rng, init_probs)
        for t in range(1, n):
            out[t] = _draw_one(rng, transition[out[t - 1]])
        return out

    random_fn.handles_out = True
    return random_fn, _NUMBA_CACHE_VERSION


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

    numba_core_rv_funcify.register(MarkovChainRV)(_markov_chain_numba_core)


def _constant_value(var):
    """The numpy value of a constant graph, else None."""
    if isinstance(var, Constant):
        return np.asarray(var.data)
    return None


def _check_probabilities(value, name):
    """ValueError naming ``name`` unless ``value`` holds finite, non-negative rows summing to 1."""
    if not np.all(np.isfinite(value)) or not np.all(value >= 0):
        raise ValueError(f"MarkovChain: {name} must hold finite, non-negative probabilities.")
    sums = value.sum(axis=-1)
    if not np.all(np.abs(sums - 1.0) <= _ROW_SUM_TOL):
        worst = float(np.max(np.abs(sums - 1.0)))
        raise ValueError(
            f"MarkovChain: the rows of {name} must sum to 1 within {_ROW_SUM_TOL:g} "
            f"(largest deviation {worst:.3g})."
        )


def _validate(init_probs, transition):
    """Eager checks of shapes and, for constant parameters, of the probabilities."""
    if init_probs.type.ndim < 1:
        raise ValueError("MarkovChain: init_probs must have at least 1 dimension (..., K).")
    if transition.type.ndim < 2:
        raise ValueError("MarkovChain: transition must have at least 2 dimensions (..., K, K).")
    ks = {init_probs.type.shape[-1], *transition.type.shape[-2:]} - {None}
    if len(ks) > 1:
        raise ValueError(
            "MarkovChain: the number of states K disagrees: init_probs has shape "
            f"{init_probs.type.shape}, transition {transition.type.shape} (need (..., K) and "
            "(..., K, K))."
        )
    for var, name in ((init_probs, "init_probs"), (transition, "transition")):
        value = _constant_value(var)
        if value is not None:
            _check_probabilities(value, name)


class MarkovChain(Discrete):
    r"""Discrete-state Markov chain along the last axis, independent chains on leading axes.

    Parameters
    ----------
    init_probs : tensor_like of float
        Initial-state probabilities, shape ``(..., K)``.
    transition : tensor_like of float
        Transition matrices, shape ``(..., K, K)``; row ``i`` is ``P(s_t = . | s_{t-1} = i)``.
    steps : int or scalar tensor, optional
        Length ``T`` of the chain; taken from the last entry of ``shape`` (or ``dims``) when not
        given.

    Notes
    -----
    The batch dimensions of ``init_probs`` and ``transition`` broadcast against ``shape[:-1]``.
    Constant probabilities are checked when the distribution is built: negative or non-finite
    entries, or rows not summing to 1 within 1e-8, raise ``ValueError`` naming the argument, as
    does a disagreement on ``K``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> init = np.array([0.5, 0.5])
    >>> trans = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> s = MarkovChain.dist(init, trans, shape=(3, 5))
    >>> pm.draw(s, random_seed=1).shape
    (3, 5)
    >>> value = np.array([0, 0, 1, 1, 0])
    >>> lp = pm.logp(MarkovChain.dist(init, trans, shape=5), value).eval()
    >>> bool(np.isclose(lp, np.log(0.5 * 0.9 * 0.1 * 0.8 * 0.2)))
    True
    """

    rv_op = markov_chain
    rv_type = MarkovChainRV

    def __new__(cls, name, *args, **kwargs):
        rv = super().__new__(cls, name, *args, **kwargs)
        model = Model.get_context(error_if_none=False)
        if model is not None:
            _MODELS.add(model)
        return rv

    @classmethod
    def dist(cls, init_probs, transition, *, steps=None, **kwargs):
        init_probs = pt.as_tensor_variable(_as_float64(init_probs))
        transition = pt.as_tensor_variable(_as_float64(transition))
        _validate(init_probs, transition)
        steps = _resolve_steps(steps, kwargs.get("shape"))
        return super().dist([init_probs, transition, steps], **kwargs)

    def support_point(rv, size, init_probs, transition, steps):
        """A path of positive probability: the most likely start, then the most likely moves."""
        batch = tuple(rv.shape)[:-1]
        k = init_probs.shape[-1]
        init = pt.broadcast_to(init_probs, (*batch, k))
        trans = pt.broadcast_to(transition, (*batch, k, k))
        first = pt.argmax(init, axis=-1)

        def _next(prev, trans):
            row = pt.take_along_axis(trans, prev[..., None, None], axis=-2)[..., 0, :]
            # the recurrent state keeps the static shape of ``first`` (a batch axis of length 1
            # is static there, unknown after take_along_axis: scan refused shape=(1, T))
            return pt.specify_shape(pt.argmax(row, axis=-1), prev.type.shape)

        rest = pytensor.scan(
            _next,
            outputs_info=[first],
            non_sequences=[trans],
            n_steps=rv.shape[-1] - 1,
            return_updates=False,
        )
        path = pt.concatenate([first[None], rest], axis=0).astype("int64")  # (T, *batch)
        # time axis last by a gather into a new C-ordered array: a transpose is a
        # Fortran-ordered view, which made numba compile the NUTS logp a second time
        flat = path.reshape((path.shape[0], -1))
        steps_idx = pt.arange(flat.shape[0])[None, :]
        batch_idx = pt.arange(flat.shape[1])[:, None]
        return flat[steps_idx, batch_idx].reshape((*batch, path.shape[0]))

    def logp(value, init_probs, transition, steps):
        """Exact log-probability of paths; ``-inf`` for states outside ``{0..K-1}``."""
        k = init_probs.shape[-1]
        batch = tuple(value.shape)[:-1]
        init = pt.broadcast_to(init_probs, (*batch, k))
        trans = pt.broadcast_to(transition, (*batch, k, k))
        inside = pt.all((value >= 0) & (value < k), axis=-1)
        safe = pt.clip(value, 0, k - 1)
        first = pt.take_along_axis(init, safe[..., :1], axis=-1)[..., 0]
        rows = pt.take_along_axis(trans, safe[..., :-1, None], axis=-2)
        moves = pt.take_along_axis(rows, safe[..., 1:, None], axis=-1)[..., 0]
        lp = pt.log(first) + pt.sum(pt.log(moves), axis=-1)
        return pt.switch(inside, lp, -np.inf)


def _as_float64(x):
    """Python / numpy numbers as float64 (not float32 constants); graphs pass through."""
    if isinstance(x, TensorVariable):
        return x
    return np.asarray(x, dtype=np.float64)


def _resolve_steps(steps, shape):
    """The chain length: ``steps`` if given, else the last entry of ``shape``."""
    if steps is None:
        if shape is None:
            raise ValueError("MarkovChain: give shape=(..., T) (or dims) or steps=T.")
        if isinstance(shape, int | np.integer):
            shape = (shape,)
        elif not isinstance(shape, TensorVariable):
            shape = tuple(shape)
        if len(shape) == 0:
            raise ValueError("MarkovChain: shape must have at least one axis (..., T).")
        steps = shape[-1]
    steps = pt.as_tensor_variable(steps)
    if steps.type.ndim != 0 or not steps.type.dtype.startswith(("int", "uint")):
        raise ValueError("MarkovChain: steps must be a scalar integer.")
    return steps.astype("int64")
