r"""``Privatized``: noisy observations of a base distribution, the true value integrated out.

The observed value is ``z = y + noise`` with ``y ~ dist`` (any ``pm.X.dist(...)``, whose
parameters may depend on other model variables) and the noise drawn from a
:class:`~pymc_dp.mechanisms.base.Mechanism`. Like ``pm.Censored``, the wrapper is a symbolic
random variable whose input is the base distribution, so forward draws (``pm.draw``, prior and
posterior predictive) give a base draw plus mechanism noise, and its log-probability is the
exact marginal

.. math::  \log p(z) = \log \sum_y p(y)\, \eta(z - y)

(an integral for continuous ``y``), looked up in the registry of
:mod:`pymc_dp.distributions.marginals`. With ``marginalize=False`` the true values stay in the
model as a latent variable ``f"{name}_true"`` and the observation is the noise density at
``z - y``.

The mechanism is kept on the Op (``PrivatizedRV.mechanism``) so that accounting can collect
every release of a model with :func:`privatized_mechanisms`.
"""

from __future__ import annotations

import functools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.distribution import Distribution, SymbolicRandomVariable, support_point
from pymc.distributions.shape_utils import (
    _change_dist_size,
    change_dist_size,
    implicit_size_from_params,
    rv_size_is_none,
)
from pymc.logprob.abstract import _logprob
from pymc.pytensorf import collect_default_updates, normalize_rng_param
from pymc.util import check_dist_not_registered
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor import TensorVariable
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.utils import normalize_size_param

from pymc_dp.distributions._observed import (
    check_integer_source,
    declared_shape,
    prepare_observed,
)
from pymc_dp.distributions.marginals import (
    _parameter_conditions,
    censored_finite_support_marginal,
    check_censored_marginal,
    get_marginal,
)
from pymc_dp.distributions.release import (
    MechanismRV,
    announce_model,
    censoring_bounds,
    check_within_bounds,
    clip_to_bounds,
)
from pymc_dp.mechanisms.base import Mechanism

__all__ = ["Privatized", "PrivatizedRV", "privatized_mechanisms"]


class PrivatizedRV(MechanismRV):
    """Symbolic RV ``base + noise``; inputs ``(base_rv, noise_rng)``, outputs ``(next_rng, z)``.

    ``mechanism`` (an Op attribute) is the mechanism that produced the noise; ``lower`` and
    ``upper`` the censoring bounds of a clipped observation.
    """

    extended_signature = "(),[rng],()->[rng],()"
    _print_name = ("Privatized", "\\operatorname{Privatized}")

    @classmethod
    def rv_op(cls, dist, *, mechanism: Mechanism, lower=None, upper=None, size=None, rng=None):
        rng = normalize_rng_param(rng)
        size = normalize_size_param(size)
        if rv_size_is_none(size):
            size = implicit_size_from_params(dist, ndims_params=[0])
        dist = change_dist_size(dist, size)

        dist_, rng_ = dist.type(), rng.type()
        ok = _draw_parameters_ok(dist)
        ok_ = ok.type()
        noise_ = mechanism.noise_dist(size=dist_.shape, rng=rng_)
        next_rng_ = collect_default_updates([noise_], inputs=[rng_], must_be_shared=False)[rng_]
        # a draw at invalid base parameters (NaN or negative rate: PyMC's draw returns a
        # number) or beyond int64 (wrapped extremes) is refused, naming dist
        z_ = CheckAndRaise(ValueError, _DRAW_REFUSAL)(dist_ + noise_, ok_)
        z_ = clip_to_bounds(z_, lower, upper, z_.dtype)
        op = cls(
            inputs=[dist_, rng_, ok_],
            outputs=[next_rng_, z_],
            mechanism=mechanism,
            lower=lower,
            upper=upper,
        )
        return op(dist, rng, ok)


_DRAW_REFUSAL = (
    "Privatized draw: the parameters of dist are invalid (NaN, negative, infinite) or give "
    "draws beyond int64 (a Poisson rate above 2**62); check the base distribution's parameters"
)
#: largest Poisson rate drawn (numpy refuses rates near 9.2e18; the noise must fit on top)
_POISSON_DRAW_MAX = np.float64(2.0**62)


def _draw_parameters_ok(dist):
    """Scalar bool graph: the base's parameters are valid for a draw (its own conditions, as
    in the marginals, and, for Poisson, a rate whose draws fit int64)."""
    conditions, _ = _parameter_conditions(dist)
    if isinstance(dist.owner.op, pm.Poisson.rv_type):
        (mu,) = dist.owner.op.dist_params(dist.owner)
        conditions = [*conditions, pt.le(mu, _POISSON_DRAW_MAX)]
    return functools.reduce(pt.and_, map(pt.all, conditions), pt.as_tensor_variable(np.True_))


class Privatized(Distribution):
    r"""Observations ``y + noise`` of ``y ~ dist``, with ``y`` integrated out exactly.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    dist : unnamed distribution
        ``pm.X.dist(...)`` of the true values (univariate; any shape or dims; parameters may be
        model variables). It is cloned, as in ``pm.Censored``.
    mechanism : pymc_dp.mechanisms.base.Mechanism
        The mechanism that added the noise (``pmdp.Laplace``, ``pmdp.Geometric``, ...).
    marginalize : bool, default True
        ``True``: the log-likelihood is the exact marginal from the registry
        (:mod:`pymc_dp.distributions.marginals`); an unsupported pair raises
        ``NotImplementedError`` when the model is built. ``False``: the true values become a
        latent variable ``f"{name}_true"`` (same shape and dims) and the observation is
        conditioned on it through the noise density.
    lower, upper : float or array_like, optional
        Bounds of a clipped observation ``z = clip(y + noise, lower, upper)`` (constants
        broadcastable to the variable, ``±inf`` for no bound in a cell; integers for an
        integer mechanism; ``lower < upper``; observed values must lie in between). The
        log-likelihood is then the exact censored marginal
        ``log sum_y p(y) L(z | y)`` with ``L`` the noise density inside, ``P(noise <=
        lower - y)`` at ``lower`` and ``P(noise >= upper - y)`` at ``upper``; it is available
        for bases with a finite support (Bernoulli, Binomial, BetaBinomial, Categorical,
        DiscreteUniform) and ``marginalize=True``; other cases raise
        ``NotImplementedError`` (use :class:`pymc_dp.Release` with ``lower``/``upper`` and
        latent records instead).
    **kwargs
        ``observed``, ``dims``, ``shape``, ... as for any PyMC distribution.

    Notes
    -----
    Draws are ``base draw + mechanism noise`` (the noise from ``mechanism.noise_dist``), so
    prior and posterior predictive samples are simulated releases. The noise is drawn with
    PyMC's simulation RNG, not the secure source of :meth:`Mechanism.release`: do not use
    these draws as real releases. A draw at invalid base parameters (those the marginal
    refuses: NaN, negative or infinite rates, ...) or at a Poisson rate above ``2**62`` (whose
    draws would wrap int64) raises ``ValueError`` naming ``dist``.

    Observed values are refused (``ValueError`` naming ``observed``) when they are masked,
    NaN, infinite, of another shape than ``shape``/``dims``, fractional for an integer
    mechanism, or out of range (``|z| <= 2**53`` for integer mechanisms, ``1e300`` otherwise);
    integer values are kept exactly (int64, no int32 wrap). A ``pm.Data`` release is checked
    whenever the log-likelihood is evaluated, so ``pm.set_data`` gets the same refusals.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.distributions.privatized import Privatized, privatized_mechanisms
    >>> mech = pmdp.Geometric(epsilon=1.0)
    >>> with pm.Model() as model:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = Privatized("y", pm.Poisson.dist(lam), mech, observed=np.array([3, -1, 7]))
    >>> lp = model.compile_logp(vars=[y])({"lam_log__": np.log(4.0)})
    >>> bool(np.isfinite(lp))
    True
    >>> privatized_mechanisms(model)["y"] is mech
    True
    >>> z = pm.draw(Privatized.dist(pm.Poisson.dist(3.0), mech, shape=(4,)), random_seed=1)
    >>> z.shape, z.dtype
    ((4,), dtype('int64'))
    """

    rv_type = PrivatizedRV
    rv_op = PrivatizedRV.rv_op

    def __new__(cls, name, dist, mechanism, *args, marginalize: bool = True, **kwargs):
        _check_inputs(dist, mechanism)
        model = pm.modelcontext(kwargs.get("model"))
        lo, hi = censoring_bounds(
            kwargs.pop("lower", None), kwargs.pop("upper", None), integer=mechanism.integer
        )
        if lo is not None or hi is not None:
            if not marginalize:
                raise NotImplementedError(
                    f"Privatized({name!r}, ..., marginalize=False) with lower/upper is not "
                    "supported: model the clipped release with pymc_dp.Release(name, "
                    "statistic, mechanism, observed=..., lower=..., upper=...) and latent "
                    "records instead"
                )
            kwargs.update(lower=lo, upper=hi)
        # released values: finite, in range, integers for an integer mechanism (whose base
        # ``_check_inputs`` requires to be integer), of the declared shape; pm.Data releases are
        # also checked in the graph, so pm.set_data gets the same refusals
        shape, fixed = declared_shape(kwargs, model)
        if "observed" in kwargs:
            kwargs["observed"] = prepare_observed(
                kwargs["observed"],
                integer=mechanism.integer,
                release=name,
                shape=shape,
                fixed=fixed,
            )
            check_within_bounds(kwargs["observed"], lo, hi, name)
        if marginalize:
            return super().__new__(cls, name, dist, mechanism, *args, **kwargs)
        dims = kwargs.get("dims")
        shape = kwargs.get("shape")
        observed = kwargs.get("observed")
        if shape is None and dims is not None:
            dims = (dims,) if isinstance(dims, str) else tuple(dims)
            shape = tuple(model.dim_lengths[d] for d in dims)
        if shape is None and observed is not None:
            shape = pt.as_tensor_variable(observed).shape
        latent = dist if shape is None else change_dist_size(dist, shape)
        true = model.register_rv(latent, f"{name}_true", dims=dims)
        rv = super().__new__(cls, name, pm.DiracDelta.dist(true), mechanism, *args, **kwargs)
        announce_model(model)  # its true values may be claimed by a pymc_dp step
        return rv

    @classmethod
    def dist(cls, dist, mechanism, *, lower=None, upper=None, **kwargs):
        """The unnamed variable ``dist + noise`` (see the class docstring)."""
        _check_inputs(dist, mechanism)
        lo, hi = censoring_bounds(lower, upper, integer=mechanism.integer)
        if lo is not None or hi is not None:
            mechanism.check_tails("the privatized observation")
            check_censored_marginal(dist.owner.op)
        else:
            # fail at model-building time on unsupported pairs
            get_marginal(dist.owner.op, mechanism)
        return super().dist([dist], mechanism=mechanism, lower=lo, upper=hi, **kwargs)


def _check_inputs(dist, mechanism):
    if not (
        isinstance(dist, TensorVariable)
        and dist.owner is not None
        and isinstance(dist.owner.op, RandomVariable | SymbolicRandomVariable)
    ):
        raise ValueError(
            f"dist must be a distribution created with the `.dist()` API, got {dist!r}"
        )
    if dist.owner.op.ndim_supp > 0:
        raise NotImplementedError("Privatized supports univariate base distributions only")
    check_dist_not_registered(dist)
    if not isinstance(mechanism, Mechanism):
        raise TypeError(
            f"mechanism must be a pymc_dp Mechanism (e.g. pmdp.Laplace(epsilon=1.0)), "
            f"got {mechanism!r}"
        )
    check_integer_source(mechanism, dist.dtype, "dist")


@_logprob.register(PrivatizedRV)
def privatized_logprob(op, values, base_rv, rng, *_ok, **kwargs):
    (value,) = values
    if getattr(op, "censored", False):
        return censored_finite_support_marginal(value, base_rv, op.mechanism, op.lower, op.upper)
    marginal = get_marginal(base_rv.owner.op, op.mechanism)
    return marginal(value, base_rv, op.mechanism)


@_change_dist_size.register(PrivatizedRV)
def change_privatized_size(op, rv, new_size, expand=False):
    base = rv.owner.inputs[0]
    if expand:
        new_size = tuple(new_size) + tuple(base.shape)
    bounds = {"lower": getattr(op, "lower", None), "upper": getattr(op, "upper", None)}
    return PrivatizedRV.rv_op(base, mechanism=op.mechanism, size=new_size, **bounds)


@pm.distributions.distribution._support_point.register(PrivatizedRV)
def privatized_support_point(op, rv, base, rng, *_ok):
    return support_point(base)


def privatized_mechanisms(model=None) -> dict[str, Mechanism]:
    """The mechanism of every ``Privatized`` variable of ``model``, keyed by variable name.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu")
    ...     _ = Privatized("z", pm.Normal.dist(mu), pmdp.Laplace(epsilon=0.5), observed=[0.3])
    >>> privatized_mechanisms(m)
    {'z': Laplace(epsilon=0.5, sensitivity=1.0)}
    """
    model = pm.modelcontext(model)
    return {
        rv.name: rv.owner.op.mechanism
        for rv in model.basic_RVs
        if isinstance(rv.owner.op, PrivatizedRV)
    }
