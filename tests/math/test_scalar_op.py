"""The scalar-Op factory (pymc_dp.math.scalar_op) and every Op built with it."""

from __future__ import annotations

import math
import pickle

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError
from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key
from pytensor.link.numba.dispatch.scalar import scalar_op_cache_key
from pytensor.scalar import basic as ps

from pymc_dp._cache import SOURCE_KEY
from pymc_dp.distributions.bessel import BesselLogPMF, bessel_logpmf_pt
from pymc_dp.distributions.skellam import SkellamLogPMF, skellam_logpmf_pt
from pymc_dp.math.bessel import DLogIv, IvRatio, LogIv, LogIve, log_iv_pt
from pymc_dp.math.count_mode import CountMode
from pymc_dp.math.scalar_op import KernelScalarOp, no_gradient, scalar_elemwise


@numba.njit(cache=False)
def _cube_kernel(x, y):
    return x * x * x + y


class _Cube(KernelScalarOp):
    nin = 2
    kernel = staticmethod(_cube_kernel)

    def pullback(self, inputs, outputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        three = ps.constant(np.float64(3.0))
        return [gz * three * x * x, no_gradient(self, 1, y, "no gradient in y (test)")]


_cube_scalar, _cube = scalar_elemwise(_Cube, "cube")

BUILT = [
    (LogIv, (2.0, 3.0)),
    (LogIve, (2.0, 3.0)),
    (IvRatio, (2.0, 3.0)),
    (DLogIv, (2.0, 3.0)),
    (SkellamLogPMF, (3.0, 4.0, 1.5)),
    (BesselLogPMF, (2.0, 3.0, 5.0)),
    (CountMode, (1e6, 1e6 + 1.0, 0.0, 30.0, 0.0, 1.0, 40.0)),
    (_Cube, (1.5, 2.0)),
]


@pytest.mark.parametrize(("op_type", "args"), BUILT, ids=lambda v: getattr(v, "__name__", ""))
def test_numba_lowering_is_the_kernel_and_keyed_by_source(op_type, args):
    op = op_type(ps.upgrade_to_float64, name="t")
    ins = [ps.float64() for _ in args]
    node = op.make_node(*ins)
    _func, key = numba_funcify_and_cache_key(op, node=node)
    assert key is not None
    # the key follows the source hash: same op, another source -> another key
    assert key == scalar_op_cache_key(op, cache_version=(op_type.cache_version, SOURCE_KEY))
    assert key != scalar_op_cache_key(op, cache_version=(op_type.cache_version, "0" * 16))
    # Python impl (FAST_COMPILE / C backend fallback) and the kernel agree exactly
    assert op.impl(*args) == op_type.kernel(*args)
    assert isinstance(op.impl(*args), np.float64)


def test_elemwise_compiles_natively_and_matches_python_mode():
    # warnings are errors (pyproject): an object-mode fallback would fail here
    x = pt.dvector("x")
    y = pt.dvector("y")
    out = _cube(x, y)
    g = pytensor.grad(out.sum(), x)
    xv, yv = np.array([0.5, -2.0, 3.0]), np.array([1.0, 2.0, -1.0])
    numba_res = pytensor.function([x, y], [out, g])(xv, yv)
    py_res = pytensor.function([x, y], [out, g], mode="FAST_COMPILE")(xv, yv)
    np.testing.assert_array_equal(numba_res[0], xv**3 + yv)
    np.testing.assert_array_equal(numba_res[1], 3 * xv**2)
    for a, b in zip(numba_res, py_res, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(NullTypeGradError):
        pytensor.grad(out.sum(), y)


def test_output_is_float64_for_integer_inputs():
    k = pt.lvector("k")
    out = skellam_logpmf_pt(k, np.float64(3.0), np.float64(2.0))
    assert out.dtype == "float64"
    assert bessel_logpmf_pt(k, np.float64(2.0), np.float64(3.0)).dtype == "float64"
    # the integer input has a zero gradient, not an undefined one
    n = pt.lscalar("n")
    a = pt.dscalar("a")
    ga = pytensor.grad(bessel_logpmf_pt(n, np.float64(2.0), a), a)
    assert math.isfinite(float(ga.eval({n: 3, a: 5.0})))


def test_ops_pickle_by_reference():
    for elem in (log_iv_pt, skellam_logpmf_pt, bessel_logpmf_pt):
        back = pickle.loads(pickle.dumps(elem))
        assert type(back.scalar_op) is type(elem.scalar_op)
        assert back == elem


def test_factory_refuses_what_it_cannot_build():
    with pytest.raises(TypeError, match="KernelScalarOp subclass"):
        scalar_elemwise(ps.Add, "add")

    class _NoKernel(KernelScalarOp):
        nin = 1

    with pytest.raises(TypeError, match="has no kernel"):
        scalar_elemwise(_NoKernel, "nothing")
