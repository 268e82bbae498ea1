r"""One factory for elementwise PyTensor Ops computed by a numba scalar kernel.

A special function of pymc_dp (``log I_nu``, the Skellam and Bessel log-pmfs, ...) is written
once, as a ``numba.njit`` scalar kernel. :class:`KernelScalarOp` turns such a kernel into a
PyTensor scalar Op:

* ``impl`` (Python mode, e.g. ``FAST_COMPILE``) calls the kernel on floats and returns a
  float64; the Op has no C implementation (``c_code`` raises, so the C backend uses ``impl``);
* the numba lowering (PyTensor's default backend) is the kernel itself, registered when the
  subclass is defined (or, if PyTensor's numba backend is not imported yet, as soon as it is:
  :func:`pymc_dp._cache.numba_registration`), so graphs compile without object-mode fallbacks;
* its on-disk cache key holds the subclass, its ``cache_version`` and
  :data:`pymc_dp._cache.SOURCE_KEY` (a hash of the package's source), so PyTensor's shared
  compile cache never serves the code of another version of the kernel.

A subclass states ``nin``, the kernel (as ``kernel = staticmethod(f)``) and its ``pullback``;
:func:`scalar_elemwise` then builds the scalar Op instance (float64 output) and its
``Elemwise``. :func:`no_gradient` is the gradient of an input that has none (a count, or
an order whose derivative is not implemented).

Examples
--------
>>> import math, numba, numpy as np, pytensor, pytensor.tensor as pt
>>> from pytensor.scalar import basic as ps
>>> @numba.njit(cache=False)
... def _log1p_exp(x):
...     return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))
>>> class Softplus(KernelScalarOp):
...     nin = 1
...     kernel = staticmethod(_log1p_exp)
...     def pullback(self, inputs, outputs, output_grads):  # scalar graph: sigmoid(x)
...         (x,) = inputs
...         return [output_grads[0] / (ps.constant(np.float64(1.0)) + ps.exp(-x))]
>>> softplus_scalar, softplus = scalar_elemwise(Softplus, "softplus")
>>> x = pt.dvector("x")
>>> f = pytensor.function([x], [softplus(x), pytensor.grad(softplus(x).sum(), x)])
>>> [v.round(6).tolist() for v in f(np.array([-800.0, 0.0, 800.0]))]
[[0.0, 0.693147, 800.0], [0.0, 0.5, 1.0]]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

import numpy as np
from pytensor.gradient import grad_undefined
from pytensor.scalar import basic as ps
from pytensor.tensor.elemwise import Elemwise

from pymc_dp._cache import SOURCE_KEY, numba_registration

__all__ = ["KernelScalarOp", "no_gradient", "scalar_elemwise"]


class KernelScalarOp(ps.ScalarOp):
    """Scalar Op whose value is a numba scalar kernel (see the module docstring).

    Subclasses set ``nin``, ``kernel = staticmethod(f)`` (a ``numba.njit`` function of
    ``nin`` floats returning a float) and ``pullback``; optionally ``cache_version`` (an int to
    bump for a change the source hash cannot see, e.g. in a compiled dependency). Defining a
    subclass with a kernel registers its numba lowering.
    """

    nout = 1
    kernel: ClassVar[Callable | None] = None
    cache_version: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("kernel") is not None:
            _register_numba(cls)

    def impl(self, *inputs):
        return np.float64(type(self).kernel(*(float(v) for v in inputs)))

    def c_code(self, *args, **kwargs):
        raise NotImplementedError()


def _register_numba(op_type: type) -> None:
    # made when PyTensor's numba backend is imported (by its linker, before it compiles), so
    # that importing pymc_dp does not import it
    numba_registration(partial(_register_numba_now, op_type))


def _register_numba_now(op_type: type) -> None:
    from pytensor.link.numba.dispatch.scalar import register_scalar_funcify, scalar_op_cache_key

    kernel = op_type.kernel

    @register_scalar_funcify(op_type)
    def _funcify(op, node, **kwargs):
        key = scalar_op_cache_key(op, cache_version=(op_type.cache_version, SOURCE_KEY))
        return kernel, key


def scalar_elemwise(op_type: type, name: str) -> tuple[ps.ScalarOp, Elemwise]:
    """The scalar Op (float64 output) of a :class:`KernelScalarOp` subclass and its Elemwise.

    Parameters
    ----------
    op_type : subclass of KernelScalarOp
        The Op class, with its kernel and pullback.
    name : str
        Name of both Ops in printed graphs (e.g. ``"log_iv"``).

    Returns
    -------
    (scalar_op, elemwise)

    Examples
    --------
    >>> from pymc_dp.math.bessel import LogIv
    >>> scalar, elem = scalar_elemwise(LogIv, "log_iv")
    >>> float(elem(0.0, 1e4).eval())  # log I_0(1e4), where iv overflows
    9994.4759...
    """
    if not (isinstance(op_type, type) and issubclass(op_type, KernelScalarOp)):
        raise TypeError(f"op_type must be a KernelScalarOp subclass, got {op_type!r}")
    if op_type.kernel is None:
        raise TypeError(f"{op_type.__name__} has no kernel")
    scalar = op_type(ps.upgrade_to_float64, name=name)
    return scalar, Elemwise(scalar, name=name)


def no_gradient(op: ps.ScalarOp, index: int, var, reason: str | None = None):
    """Gradient of input ``index`` that has none.

    Zero for a discrete (integer) input, and for a float input when ``reason`` is None (the
    input is a count, constant in the model); otherwise ``grad_undefined`` with ``reason``,
    so that differentiating through it raises.

    Examples
    --------
    >>> import pytensor.scalar as ps
    >>> no_gradient(None, 0, ps.int64("k")).dtype
    'float64'
    """
    if var.type in ps.discrete_types or reason is None:
        return var.zeros_like(dtype="float64")
    return grad_undefined(op, index, var, reason)
