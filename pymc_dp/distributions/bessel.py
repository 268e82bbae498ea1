r"""Bessel distribution :math:`\mathrm{Bes}(\nu, a)` (Yuan & Kalbfleisch 2000).

.. math:: P(N = n) = \frac{(a/2)^{2n+\nu}}{I_\nu(a)\, n!\, \Gamma(n+\nu+1)}, \qquad n = 0, 1, \dots

(Schein et al. 2019, eqs. 12-13: the conditional law of :math:`\min(Y_1, Y_2)` given
:math:`Y_1 - Y_2` for independent Poissons). The log-pmf uses the stable
:func:`pymc_dp.math.bessel.log_iv` machinery in a cancellation-free arrangement (see
:mod:`pymc_dp.kernels.bessel_sampling`; relative error below :math:`10^{-14}` for
:math:`\nu \le 10^5`, :math:`a \le 10^6`); the gradient in ``a`` is

.. math:: \partial_a \log P(n) = \frac{2n + \nu}{a} - \partial_a \log I_\nu(a)
          = \frac{2n}{a} - \frac{I_{\nu+1}(a)}{I_\nu(a)},

and the gradient in ``nu`` is not implemented (undefined, as for ``pytensor.tensor.iv``), so
``nu`` must be data or sampled by a gradient-free step. Random draws use the exact numba
sampler of :mod:`pymc_dp.kernels.bessel_sampling` (inversion from 0 for modes up to 40,
mode-centred rejection beyond).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.scalar import basic as ps
from pytensor.tensor.random.op import RandomVariable

from pymc_dp._cache import SOURCE_INT, numba_registration
from pymc_dp.kernels.bessel_sampling import (
    A_MAX,
    NU_MAX,
    bessel_draw,
    bessel_logpmf_scalar,
    sample_bessel,
)
from pymc_dp.math.bessel import iv_ratio_scalar_op
from pymc_dp.math.scalar_op import KernelScalarOp, no_gradient, scalar_elemwise

__all__ = ["Bessel", "BesselLogPMF", "BesselRV", "bessel"]


class BesselLogPMF(KernelScalarOp):
    """Scalar Op ``bessel_logpmf(n, nu, a)``; gradient in ``a`` only."""

    nin = 3
    kernel = staticmethod(bessel_logpmf_scalar)
    cache_version = 4

    def pullback(self, inputs, outputs, output_grads):
        n, nu, a = inputs
        (gz,) = output_grads
        nf = ps.cast(n, "float64")
        da = ps.constant(np.float64(2.0)) * nf / a - iv_ratio_scalar_op(nu, a)
        gnu = no_gradient(self, 1, nu, "derivative in the order nu is not implemented")
        return [no_gradient(self, 0, n), gnu, gz * da]


bessel_logpmf_scalar_op, bessel_logpmf_pt = scalar_elemwise(BesselLogPMF, "bessel_logpmf")

_DRAW_CACHE_VERSION = 2


class BesselRV(RandomVariable):
    """Bessel random variable (exact sampler, native numba: inversion or rejection)."""

    name = "bessel"
    signature = "(),()->()"
    dtype = "int64"
    _print_name = ("Bessel", "\\operatorname{Bessel}")

    @classmethod
    def rng_fn(cls, rng, nu, a, size):
        nu_ = np.asarray(nu, dtype=np.float64)
        a_ = np.asarray(a, dtype=np.float64)
        if not np.all((nu_ >= 0.0) & (nu_ <= NU_MAX)):
            raise ValueError(f"Bessel draw: nu must be >= 0 and <= {NU_MAX:g}, got {nu!r}")
        if not np.all((a_ > 0.0) & (a_ <= A_MAX)):
            raise ValueError(f"Bessel draw: a must be > 0 and <= {A_MAX:g}, got {a!r}")
        return sample_bessel(nu, a, rng=rng, size=size)


bessel = BesselRV()


def _bessel_numba_core(op, node):
    from pytensor.link.numba.dispatch.basic import numba_njit

    @numba_njit
    def random(rng, nu, a):
        if not a > 0.0:  # the distribution's a > 0 (as its logp); bessel_draw checks the rest
            raise ValueError("Bessel draw: a must be > 0 (as in the log-pmf); got a <= 0 or NaN")
        return bessel_draw(rng, nu, a)

    # the key makes PyTensor's on-disk cache follow this code (SOURCE_KEY: any source change)
    return random, (_DRAW_CACHE_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

    numba_core_rv_funcify.register(BesselRV)(_bessel_numba_core)


class Bessel(pm.Discrete):
    r"""Bessel distribution on :math:`\{0, 1, 2, \dots\}`.

    .. math:: P(N = n) = \frac{(a/2)^{2n+\nu}}{I_\nu(a)\, n!\, \Gamma(n+\nu+1)}

    Parameters
    ----------
    nu : tensor_like of float
        Order, finite and >= 0 (real). No gradient. Random draws need ``nu <= NU_MAX = 1e9``.
    a : tensor_like of float
        Argument, finite and > 0. Random draws need ``a <= A_MAX = 2e9``.

    Notes
    -----
    Invalid parameters (NaN, infinite, negative, ``a = 0``) make the log-pmf raise
    ``ParameterValueError`` and the draws raise ``ValueError`` naming the parameter; draws
    beyond the sampler's exact range (:data:`pymc_dp.kernels.bessel_sampling.NU_MAX`,
    :data:`~pymc_dp.kernels.bessel_sampling.A_MAX`) are refused the same way.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> x = Bessel.dist(nu=np.float64(2.0), a=np.float64(5.0))
    >>> float(np.exp(pm.logp(x, np.arange(60)).eval()).sum())
    1.0000000000...
    >>> pm.draw(x, draws=3, random_seed=1).dtype
    dtype('int64')
    """

    rv_op = bessel

    @classmethod
    def dist(cls, nu, a, **kwargs):
        nu = pt.as_tensor_variable(nu)
        a = pt.as_tensor_variable(a)
        return super().dist([nu, a], **kwargs)

    def support_point(rv, size, nu, a):
        # mode floor(q*), q* = a^2 / (2 (sqrt(nu^2 + a^2) + nu))
        mode = pt.floor(a * a / (np.float64(2.0) * (pt.sqrt(nu * nu + a * a) + nu)))
        mode = mode.astype("int64")
        if not rv_size_is_none(size):
            mode = pt.full(size, mode)
        return mode

    def logp(value, nu, a):
        res = bessel_logpmf_pt(value, nu, a)
        res = pt.switch(pt.ge(value, 0), res, -np.inf)
        return check_parameters(
            res,
            nu >= 0,
            a > 0,
            pt.isfinite(nu),
            pt.isfinite(a),
            msg="nu >= 0, a > 0, nu and a finite",
        )
