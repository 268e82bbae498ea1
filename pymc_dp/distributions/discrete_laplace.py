r"""The discrete Laplace (two-sided geometric) distribution as a PyMC distribution.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
>>> x = DiscreteLaplace.dist(alpha=np.float64(0.5))
>>> round(float(pm.logp(x, 0).eval()), 12)  # log(1/3)
-1.098612288668
>>> pm.draw(DiscreteLaplace.dist(alpha=np.float64(0.5), size=3), random_seed=1).dtype
dtype('int64')
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Discrete
from pymc.distributions.shape_utils import rv_size_is_none
from pytensor.graph.basic import Variable
from pytensor.tensor.random.op import RandomVariable

from pymc_dp._cache import numba_registration
from pymc_dp.kernels.discrete_laplace import logcdf_pt, logpmf_pt

__all__ = ["DiscreteLaplace", "DiscreteLaplaceRV", "discrete_laplace"]

_ZERO, _ONE = np.float64(0.0), np.float64(1.0)


class DiscreteLaplaceRV(RandomVariable):
    """Random variable op of the two-sided geometric law (difference of two geometric draws)."""

    name = "discrete_laplace"
    signature = "()->()"
    dtype = "int64"
    _print_name = ("DiscreteLaplace", "\\operatorname{DiscreteLaplace}")

    @staticmethod
    def _success(alpha):
        """``1 - alpha``, the geometric draws' success probability, after the range check."""
        if not np.all((alpha > 0.0) & (alpha < 1.0)):
            raise ValueError(f"DiscreteLaplace: alpha must lie in (0, 1), got {alpha!r}")
        return 1.0 - alpha

    @classmethod
    def rng_fn(cls, rng, param, size):
        # X = G1 - G2 with G_i iid geometric on {0, 1, ...}, P(G = g) = (1 - alpha) alpha^g:
        # P(X = k) = (1-alpha)^2 alpha^|k| sum_j alpha^{2j} = (1-alpha)/(1+alpha) alpha^|k|.
        p = cls._success(np.asarray(param, dtype=np.float64))
        return rng.geometric(p, size=size) - rng.geometric(p, size=size)


class DiscreteLaplaceLogRV(DiscreteLaplaceRV):
    """The two-sided geometric law given ``log_alpha = log(alpha) < 0`` (not ``alpha``).

    ``alpha`` close to 1 (a small rate ``-log alpha``, e.g. the geometric mechanism at epsilon
    1e-15) is not representable to full relative precision of ``1 - alpha`` as a double, so
    the law of a rounded ``alpha`` differs from the intended one (by 1% at rate 1e-15); with
    ``log_alpha`` the success probability ``1 - alpha = -expm1(log_alpha)`` of the two
    geometric draws and the log pmf are exact to a few ulps.
    """

    name = "discrete_laplace_log"

    @staticmethod
    def _success(log_alpha):
        if not np.all(np.isfinite(log_alpha) & (log_alpha < 0.0)):
            raise ValueError(
                f"DiscreteLaplace: log_alpha must be finite and < 0, got {log_alpha!r}"
            )
        return -np.expm1(log_alpha)


discrete_laplace = DiscreteLaplaceRV()
discrete_laplace_log = DiscreteLaplaceLogRV()


def _discrete_laplace_numba_core(op, node):
    from pytensor.link.numba.dispatch.basic import numba_njit

    if isinstance(op, DiscreteLaplaceLogRV):

        @numba_njit
        def success(log_alpha):
            if not (log_alpha < 0.0 and log_alpha > -np.inf):
                raise ValueError("DiscreteLaplace: log_alpha must be finite and < 0")
            return -np.expm1(log_alpha)

    else:

        @numba_njit
        def success(alpha):
            if not (alpha > 0.0 and alpha < 1.0):
                raise ValueError("DiscreteLaplace: alpha must lie in (0, 1)")
            return 1.0 - alpha

    @numba_njit
    def random(rng, param):
        p = success(param)
        return rng.geometric(p) - rng.geometric(p)

    return random


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify

    for rv in (DiscreteLaplaceRV, DiscreteLaplaceLogRV):
        numba_core_rv_funcify.register(rv)(_discrete_laplace_numba_core)


def _checked(fn, value, ok, param, placeholder, msg, key):
    """``fn(value, key=param)`` with ``param`` replaced by ``placeholder`` where ``ok`` fails
    (so the unused branch stays finite), checked by ``check_parameters``."""
    safe = pt.switch(ok, param, np.float64(placeholder))
    return check_parameters(fn(value, **{key: safe}), ok, msg=msg)


class DiscreteLaplace(Discrete):
    r"""Discrete Laplace (two-sided geometric) distribution on the integers.

    .. math:: p(k \mid \alpha) = \frac{1 - \alpha}{1 + \alpha}\,\alpha^{|k|},
              \qquad k \in \mathbb{Z},\ 0 < \alpha < 1

    (Schein et al. 2019, eq. 6). This is the noise law of the geometric mechanism
    (:class:`pymc_dp.mechanisms.geometric.Geometric`) with ``alpha = exp(-epsilon/sensitivity)``.
    The log normaliser is evaluated as ``log(-expm1(log alpha)) - log1p(alpha)``, accurate for
    alpha close to 0 and to 1 (see :mod:`pymc_dp.kernels.discrete_laplace`).

    ========  ==========================================
    Support   :math:`k \in \mathbb{Z}`
    Mean      0
    Variance  :math:`2\alpha / (1 - \alpha)^2`
    ========  ==========================================

    Parameters
    ----------
    alpha : tensor_like of float
        Decay parameter, ``0 < alpha < 1``.

    Notes
    -----
    Forward draws (``pm.draw``, predictive sampling) are the difference of two geometric draws
    from the PyMC random generator: exact in law up to float rounding, meant for simulation.
    For real releases use the mechanism's exact integer sampler.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.distributions.discrete_laplace import DiscreteLaplace
    >>> alpha = 0.5
    >>> p0 = float(np.exp(pm.logp(DiscreteLaplace.dist(alpha), 0).eval()))
    >>> bool(np.isclose(p0, (1 - alpha) / (1 + alpha)))
    True
    >>> d = pm.draw(DiscreteLaplace.dist(alpha), draws=5, random_seed=1)
    >>> d.dtype.kind, d.shape
    ('i', (5,))
    """

    rv_op = discrete_laplace

    @classmethod
    def dist(cls, alpha=None, *, log_alpha=None, **kwargs):
        if log_alpha is not None:
            if alpha is not None:
                raise ValueError("DiscreteLaplace: give alpha or log_alpha, not both")
            return _DiscreteLaplaceLog.dist(log_alpha, **kwargs)
        if alpha is None:
            raise TypeError("DiscreteLaplace.dist needs alpha (or log_alpha=)")
        if not isinstance(alpha, Variable):  # numbers: float64, never float32 constants
            alpha = np.asarray(alpha, dtype=np.float64)
        alpha = pt.as_tensor_variable(alpha)
        return super().dist([alpha], **kwargs)

    def support_point(rv, size, alpha):
        mode = pt.zeros_like(alpha, dtype="int64")
        if not rv_size_is_none(size):
            mode = pt.full(size, mode)
        return mode

    # the unused branch stays finite for alpha outside (0, 1) (a placeholder 0.5 there);
    # inside, alpha is used unchanged, down to the smallest subnormal
    def logp(value, alpha):
        ok = pt.and_(pt.gt(alpha, _ZERO), pt.lt(alpha, _ONE))
        return _checked(logpmf_pt, value, ok, alpha, 0.5, "0 < alpha < 1", "alpha")

    def logcdf(value, alpha):
        ok = pt.and_(pt.gt(alpha, _ZERO), pt.lt(alpha, _ONE))
        return _checked(logcdf_pt, value, ok, alpha, 0.5, "0 < alpha < 1", "alpha")


class _DiscreteLaplaceLog(DiscreteLaplace):
    """The law of :class:`DiscreteLaplace` parameterized by ``log_alpha < 0``
    (``DiscreteLaplace.dist(log_alpha=...)``; :class:`DiscreteLaplaceLogRV`)."""

    rv_op = discrete_laplace_log

    @classmethod
    def dist(cls, log_alpha, **kwargs):
        if not isinstance(log_alpha, Variable):  # numbers: float64, never float32 constants
            log_alpha = np.asarray(log_alpha, dtype=np.float64)
        return super(DiscreteLaplace, cls).dist([pt.as_tensor_variable(log_alpha)], **kwargs)

    def logp(value, log_alpha):
        ok = pt.and_(pt.lt(log_alpha, _ZERO), pt.gt(log_alpha, np.float64(-np.inf)))
        return _checked(
            logpmf_pt, value, ok, log_alpha, -1.0, "log_alpha < 0 and finite", "log_alpha"
        )

    def logcdf(value, log_alpha):
        ok = pt.and_(pt.lt(log_alpha, _ZERO), pt.gt(log_alpha, np.float64(-np.inf)))
        return _checked(
            logcdf_pt, value, ok, log_alpha, -1.0, "log_alpha < 0 and finite", "log_alpha"
        )
