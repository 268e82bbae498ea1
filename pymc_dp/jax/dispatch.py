r"""``jax_funcify`` registrations of pymc_dp's Ops, with their analytic derivatives.

PyMC's JAX samplers (``pm.sample(nuts_sampler="numpyro" | "blackjax")``) turn the model's
log-density graph into a JAX function and differentiate *that* with ``jax.grad``: the Ops'
PyTensor ``pullback`` is not used there. Each Op's JAX function is therefore a
``jax.custom_jvp`` whose tangent is the same analytic derivative as its ``pullback`` (never
JAX's derivative of the series and loops inside), and its gradient Ops (``IvRatio``,
``DLogIv``) have JAX functions too, for PyTensor gradient graphs compiled with
``mode="JAX"``:

============================  ==============================================================
Op                            tangent
============================  ==============================================================
``LogIv(nu, x)``              :math:`r_\nu(x) + \nu/x` in ``x``
``LogIve(nu, x)``             :math:`r_\nu(x) + \nu/x - 1` in ``x``
``IvRatio(nu, x)``            :math:`1 - (2\nu+1) r/x - r^2` in ``x``
``DLogIv(nu, x)``             :math:`1 - (2\nu+1) r/x - r^2 - \nu/x^2` in ``x``
``SkellamLogPMF(k, m1, m2)``  ``skellam`` module docstring, in ``m1`` and ``m2``
``BesselLogPMF(n, nu, a)``    :math:`2n/a - r_\nu(a)` in ``a``
``CountMode(...)``            none (zero: it only places a window)
``PoissonTwoSidedExpLogp``    the Op's second output, in ``mu``
============================  ==============================================================

As in PyTensor, a count input (``k``, ``n``) has a zero derivative, and differentiating in an
order ``nu``, or in the observation ``z`` of the Poisson marginal, raises
``NotImplementedError`` when the graph is traced (the derivative is undefined). The second
output of ``PoissonTwoSidedExpLogp`` (the derivative itself) has a NaN tangent: second
derivatives of that marginal are not implemented and must not pass for zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from pytensor.link.jax.dispatch.basic import jax_funcify

from pymc_dp.distributions.bessel import BesselLogPMF
from pymc_dp.distributions.marginal_poisson import PoissonTwoSidedExpLogp
from pymc_dp.distributions.skellam import SkellamLogPMF
from pymc_dp.jax import _state, poisson_noise, special
from pymc_dp.jax.static_window import GridGuard, JaxRefusal
from pymc_dp.math.bessel import DLogIv, IvRatio, LogIv, LogIve
from pymc_dp.math.count_mode import CountMode
from pymc_dp.math.scalar_op import KernelScalarOp

__all__ = ["SCALAR_IMPLS", "register"]


def _zero(t) -> bool:
    return isinstance(t, SymbolicZero)


def _refuse(t, what: str) -> None:
    if not _zero(t):
        raise NotImplementedError(f"the derivative {what} is not defined (as in PyTensor)")


def _times(deriv, t):
    """``deriv * t``, or nothing for a symbolic zero tangent."""
    return None if _zero(t) else deriv * t


def _total(y, parts):
    out = jnp.zeros_like(y)
    for p in parts:
        if p is not None:
            out = out + p
    return out


def _order_x_op(value, deriv):
    """``f(nu, x)`` with tangent ``deriv(nu, x, f) * dx``; no derivative in the order."""
    f = jax.custom_jvp(value)

    def jvp(primals, tangents):
        nu, x = primals
        _refuse(tangents[0], "in the order nu")
        y = f(nu, x)
        return y, _total(y, [_times(deriv(nu, x, y), tangents[1])])

    f.defjvp(jvp, symbolic_zeros=True)
    return f


def _d_iv_ratio(nu, x, r):
    return 1.0 - (2.0 * nu + 1.0) * r / x - r * r


def _d_dlog_iv(nu, x, _):
    r = special.iv_ratio(nu, x)
    return _d_iv_ratio(nu, x, r) - nu / (x * x)


log_iv = _order_x_op(special.log_iv, lambda nu, x, _: special.dlog_iv(nu, x))
log_ive = _order_x_op(special.log_ive, lambda nu, x, _: special.dlog_iv(nu, x) - 1.0)
iv_ratio = _order_x_op(special.iv_ratio, _d_iv_ratio)
dlog_iv = _order_x_op(special.dlog_iv, _d_dlog_iv)


@jax.custom_jvp
def skellam_logpmf(k, mu1, mu2):
    """Skellam log-pmf with the ``pullback``'s derivatives in ``mu1``, ``mu2``."""
    return special.skellam_logpmf(k, mu1, mu2)


def _skellam_jvp(primals, tangents):
    k, mu1, mu2 = primals
    y = skellam_logpmf(k, mu1, mu2)
    kf = jnp.asarray(k, dtype=jnp.float64)
    r1 = jnp.sqrt(mu1)
    r2 = jnp.sqrt(mu2)
    r = special.iv_ratio(jnp.abs(kf), 2.0 * r1 * r2)
    d1 = -1.0 + jnp.maximum(kf, 0.0) / mu1 + (r2 / r1) * r
    d2 = -1.0 + jnp.maximum(-kf, 0.0) / mu2 + (r1 / r2) * r
    return y, _total(y, [_times(d1, tangents[1]), _times(d2, tangents[2])])


skellam_logpmf.defjvp(_skellam_jvp, symbolic_zeros=True)


@jax.custom_jvp
def bessel_logpmf(n, nu, a):
    """Bessel log-pmf with the ``pullback``'s derivative in ``a``."""
    return special.bessel_logpmf(n, nu, a)


def _bessel_jvp(primals, tangents):
    n, nu, a = primals
    _refuse(tangents[1], "in the order nu of the Bessel log-pmf")
    y = bessel_logpmf(n, nu, a)
    da = 2.0 * jnp.asarray(n, dtype=jnp.float64) / a - special.iv_ratio(nu, a)
    return y, _total(y, [_times(da, tangents[2])])


bessel_logpmf.defjvp(_bessel_jvp, symbolic_zeros=True)


def count_mode(*args):
    """The count mode; no derivative (``stop_gradient``, as the Op's zero pullback)."""
    return jax.lax.stop_gradient(special.count_mode(*args))


#: JAX function of each KernelScalarOp subclass (elementwise, broadcasting)
SCALAR_IMPLS = {
    LogIv: log_iv,
    LogIve: log_ive,
    IvRatio: iv_ratio,
    DLogIv: dlog_iv,
    SkellamLogPMF: skellam_logpmf,
    BesselLogPMF: bessel_logpmf,
    CountMode: count_mode,
}


def _need_x64() -> None:
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "pymc_dp's JAX functions need float64: jax_enable_x64 is off (PyTensor turns it "
            "on when floatX is float64)"
        )


def _funcify_kernel_scalar_op(op, node=None, **kwargs):
    _need_x64()
    for cls in type(op).__mro__:
        impl = SCALAR_IMPLS.get(cls)
        if impl is not None:
            return impl
    raise NotImplementedError(f"No JAX implementation for the pymc_dp Op {type(op).__name__}")


def _poisson_two_sided(a: float, logc: float):
    @jax.custom_jvp
    def f(z, mu):
        return poisson_noise.logp_dmu(z, mu, a, logc)

    def jvp(primals, tangents):
        z, mu = primals
        _refuse(tangents[0], "of the Poisson marginal in the observation z")
        lp, d = f(z, mu)
        if _zero(tangents[1]):
            return (lp, d), (jnp.zeros_like(lp), jnp.zeros_like(d))
        t = tangents[1]
        return (lp, d), (d * t, jnp.nan * t)

    f.defjvp(jvp, symbolic_zeros=True)
    return f


def _funcify_poisson_two_sided(op, node=None, **kwargs):
    _need_x64()
    return _poisson_two_sided(op.a, op.logc)


def _funcify_grid_guard(op, node=None, **kwargs):
    shape = None if node is None else node.inputs[0].type.shape
    if shape is not None and None not in shape:
        op.check(shape)  # known now: refuse at conversion

    def grid_guard(start):
        op.check(start.shape)  # static when JAX traces
        return start

    return grid_guard


def _funcify_jax_refusal(op, node=None, **kwargs):
    raise NotImplementedError(op.message)


def register() -> None:
    """Register the JAX functions with PyTensor's ``jax_funcify`` (idempotent; done when
    this module is imported).

    Examples
    --------
    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> from pymc_dp.math.bessel import log_iv_pt
    >>> register()
    >>> x = pt.dvector("x")
    >>> f = pytensor.function([x], log_iv_pt(np.float64(0.0), x), mode="JAX")
    >>> float(f(np.array([1e4]))[0])  # log I_0(1e4), where iv overflows
    9994.4759...
    """
    jax_funcify.register(KernelScalarOp, _funcify_kernel_scalar_op)
    jax_funcify.register(PoissonTwoSidedExpLogp, _funcify_poisson_two_sided)
    jax_funcify.register(GridGuard, _funcify_grid_guard)
    jax_funcify.register(JaxRefusal, _funcify_jax_refusal)
    _state["registered"] = True


register()
