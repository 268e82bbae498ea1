r"""Exact marginal log-likelihoods of privatized observations, and their registry.

:class:`~pymc_dp.distributions.privatized.Privatized` observes ``z = y + noise`` with
``y ~ dist`` and looks up the marginal :math:`\log p(z) = \log \sum_y p(y)\,\eta(z - y)` (an
integral for continuous ``y``) in a registry keyed by ``(base distribution, mechanism family)``.

A marginal is a function ``f(value, base_rv, mechanism) -> logp`` that returns the elementwise
log-likelihood (same shape as ``value`` broadcast with ``base_rv``). ``base_rv`` is the base
random variable; its parameters are ``base_rv.owner.op.dist_params(base_rv.owner)`` and
``pm.logp(base_rv, k)`` gives its log pmf. Register new pairs with :func:`register_marginal`:

>>> import pymc as pm, pytensor.tensor as pt
>>> from pymc_dp.distributions.marginals import register_marginal
>>> @register_marginal(pm.Exponential, "my_noise_family", overwrite=True)
... def exponential_my_noise(value, base_rv, mechanism):
...     ...  # return a PyTensor graph of log p(value)

Registered pairs (``*`` = every mechanism):

============================================  ======================  ===========================
base                                          mechanism               method
============================================  ======================  ===========================
Poisson                                       geometric, laplace      closed form (incomplete
                                                                      gamma, log space)
Normal                                        laplace                 closed form (erfcx)
Normal                                        gaussian                wider Normal
Bernoulli, Binomial                           geometric, laplace      sum from each count's mode,
                                                                      asserted tail (ratios)
Bernoulli, Binomial, Categorical,             ``*``                   finite logsumexp
DiscreteUniform, BetaBinomial
Poisson                                       discrete_gaussian       truncated sum, tail bound
NegativeBinomial                              geometric,              truncated sum, tail bound
                                              discrete_gaussian
NegativeBinomial                              laplace                 truncated sum, tail bound
DiracDelta (``marginalize=False``)            ``*``                   noise density
============================================  ======================  ===========================

Truncated sums and their tail bound
-----------------------------------
For a base ``p`` on the non-negative integers (Poisson, NegativeBinomial) and a noise law
``eta`` that is symmetric and non-increasing in ``|t|`` (geometric, Laplace, discrete Gaussian),
each observation ``z`` sums ``y`` over a window ``[lo, hi]``, the shorter of (see
:func:`truncated_sum_window`) the *noise window*, from ``W`` points below ``min(c, m)`` to
``W`` points above ``max(c, m)``, where ``c = max(round(z), 0)`` (``floor`` for the Laplace
mechanism), ``m`` is the base's mean and ``W`` makes
``eta(W + 1) <= eta(0) e^{-TAIL_NATS}`` (``TAIL_NATS = 70``) -- or, where that is longer than
the cap below (a far observation), the longest allowed window centred on the mode of
``h(y) = log p(y) + log eta(z - y)``, found by bisection on ``h(y + 1) - h(y)`` (the mode lies
between ``c`` and ``m``; it is where the mass of ``y`` given ``z`` is: near ``z`` when the noise
is lighter-tailed than the base, near ``m`` when it is heavier); and the *base window*, the
base's mean plus or minus a half-width holding its bulk (for observations within 25 nats of
noise of the mean), whose length does not grow with the noise scale. The common window length
is capped at ``MAX_GRID_CELLS // records``, so the grid never holds more than
``max(MAX_GRID_CELLS, records)`` cells. Since ``eta`` is non-increasing in the distance, for
any window

.. math::

    \sum_{y > hi} p(y)\,\eta(z - y) \le \eta(\max(hi + 1 - z, 0))\, P(Y > hi), \qquad
    \sum_{y < lo} p(y)\,\eta(z - y) \le \eta(\max(z - lo + 1, 0))\, P(Y < lo).

The tail probabilities are bounded from above in log space (the smaller of the regularized
incomplete gamma/beta function, floored at 1e-300, and the geometric-series bound
``P(Y > k) <= p(k + 1) / (1 - rho)`` with ``rho`` a bound on ``p(j + 1)/p(j)``, ``j > k``).
When ``h`` is concave (Poisson, NegativeBinomial with ``n >= 1``; every built-in noise is
log-concave), each side also has the bound of a geometric series of ``h`` itself: beyond
``hi`` the increments of ``h`` are at most ``s = h(hi + 1) - h(hi) < 0``, so the neglected
sum is at most ``e^{h(hi + 1)} / (1 - e^{s})`` (and the mirror image below ``lo``); the
smaller bound is used. At run time the sum ``B`` of the two bounds is checked against the
computed partial sum ``S``: ``log1p(B / S) <= 1e-12 max(1, |log S|)``, so the error of
``log p(z)`` is at most 1e-12, relative where ``|log p(z)| > 1`` (float64 holds ``log p`` to
about 1e-16 of itself: at ``log p = -6e15`` the absolute error cannot be 1e-12). The grid
stays within ``[0, 2**53]``, where float64 holds every integer. Where the check fails, the
log-likelihood is ``-inf``: never a
silently wrong number (``tests/distributions/test_marginals.py`` forces failures with a
narrow window).

Under JAX (``pm.sample(nuts_sampler="numpyro" | "blackjax")``), which needs static shapes,
the window is marked (:class:`StaticWindow`) and a JAX-only rewrite
(:mod:`pymc_dp.jax.static_window`) replaces it by a window of static length ``2W + 1`` from
``max(mode - W, 0)``, which certifies the sum at every parameter value when ``h`` is
strongly concave (a log-concave base with discrete-Gaussian noise; the proof is in that
module); the other pairs (NegativeBinomial with geometric or Laplace noise, or with ``n``
not a constant ``>= 1``) are refused under JAX with a message naming the pair. The other
backends drop the marker: their graphs are unchanged.

Parameter checks
----------------
Every built-in marginal applies the base distribution's own parameter conditions (those of
its PyMC logp, e.g. ``0 <= p <= 1``, ``sigma > 0``, ``mu >= 0``) to the raw parameters with
``check_parameters``: ``pm.logp`` raises ``ParameterValueError`` and a model's logp is
``-inf`` on invalid parameters, as for PyMC's own distributions. Invalid parameters are
replaced by a valid placeholder inside the closed forms, so the discarded branch (and the
gradient) stays finite.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Distribution
from pytensor.compile import optdb
from pytensor.gradient import disconnected_type, zero_grad
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter
from pytensor.graph.traversal import graph_inputs

from pymc_dp._cache import numba_registration
from pymc_dp.distributions import marginal_normal, marginal_poisson
from pymc_dp.math import binomial_noise, count_mode
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

__all__ = [
    "MAX_GRID_CELLS",
    "TAIL_NATS",
    "TAIL_TOL",
    "StaticWindow",
    "binomial_two_sided_exp",
    "censored_finite_support_marginal",
    "check_censored_marginal",
    "finite_support_marginal",
    "get_marginal",
    "register_marginal",
    "registered_marginals",
    "safe_logsumexp",
    "truncated_sum_marginal",
    "truncated_sum_window",
]

#: half-width of truncation windows: ``eta(W + 1) <= eta(0) * exp(-TAIL_NATS)``
TAIL_NATS = 70.0
#: asserted bound on the relative neglected tail of a truncated sum
TAIL_TOL = 1e-12
#: largest grid (records x window points) a truncated sum may build
MAX_GRID_CELLS = 2**24

_FAMILIES = ("laplace", "geometric", "gaussian", "discrete_gaussian")
_REGISTRY: dict[tuple[type, str], Callable] = {}


def _base_key(base) -> type:
    if isinstance(base, type) and issubclass(base, Distribution):
        return base.rv_type
    if isinstance(base, type) and issubclass(base, Op):
        return base
    if isinstance(base, Op):
        return type(base)
    raise TypeError(
        f"base must be a PyMC Distribution class (e.g. pm.Poisson) or a RandomVariable Op "
        f"class, got {base!r}"
    )


def _family_key(mechanism) -> str:
    if isinstance(mechanism, str):
        return mechanism
    if isinstance(mechanism, Mechanism) or (
        isinstance(mechanism, type) and issubclass(mechanism, Mechanism)
    ):
        return mechanism.family
    raise TypeError(
        f"mechanism must be a family name (e.g. 'laplace', or '*' for all), a Mechanism class "
        f"or instance, got {mechanism!r}"
    )


def register_marginal(base, mechanism, func: Callable | None = None, *, overwrite: bool = False):
    """Register the exact marginal log-likelihood of ``base`` observed through ``mechanism``.

    Usable as a decorator or as a plain function call.

    Parameters
    ----------
    base : Distribution class or RandomVariable Op (class)
        The distribution of the true values, e.g. ``pm.Poisson``. Subclasses of its
        RandomVariable Op match too.
    mechanism : str, Mechanism class or instance
        The mechanism family (``"laplace"``, ``"geometric"``, ``"gaussian"``,
        ``"discrete_gaussian"``, or a user family name); ``"*"`` matches every mechanism
        (looked up after the specific family).
    func : callable, optional
        ``func(value, base_rv, mechanism) -> logp``, elementwise, a PyTensor graph. It must be
        exact (or carry an asserted error bound) and keep finite gradients.
    overwrite : bool
        Replace an existing entry (otherwise registering a pair twice raises ``ValueError``).

    Returns
    -------
    The decorator (if ``func`` is None) or ``func``.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_dp.distributions.marginals import get_marginal, register_marginal
    >>> def my_marginal(value, base_rv, mechanism):
    ...     raise NotImplementedError
    >>> _ = register_marginal(pm.Geometric, "my_family", my_marginal)
    >>> get_marginal(pm.Geometric.dist(0.5).owner.op, "my_family") is my_marginal
    True
    """

    def decorator(f):
        key = (_base_key(base), _family_key(mechanism))
        if key in _REGISTRY and not overwrite and _REGISTRY[key] is not f:
            raise ValueError(
                f"a marginal for {key[0].__name__} with {key[1]!r} noise is already "
                "registered; pass overwrite=True to replace it"
            )
        _REGISTRY[key] = f
        return f

    if func is None:
        return decorator
    return decorator(func)


def registered_marginals() -> dict[tuple[str, str], str]:
    """The registered pairs, as ``{(base Op name, family): function name}``.

    Examples
    --------
    >>> ("PoissonRV", "geometric") in registered_marginals()
    True
    """
    return {(k[0].__name__, k[1]): f.__name__ for k, f in _REGISTRY.items()}


def _op_name(op_type: type) -> str:
    name = op_type.__name__
    return name[:-2] if name.endswith("RV") else name


def get_marginal(base_op, mechanism) -> Callable:
    """The registered marginal for a base RandomVariable Op and a mechanism (or family).

    Raises
    ------
    NotImplementedError
        When no exact marginal is registered; the message names the pair and the alternatives.

    Examples
    --------
    >>> import pymc as pm
    >>> get_marginal(pm.Poisson.dist(1.0).owner.op, "laplace").__name__
    'poisson_laplace'
    >>> get_marginal(pm.Gamma.dist(1.0, 1.0).owner.op, "laplace")
    Traceback (most recent call last):
    ...
    NotImplementedError: no exact marginal is registered for Gamma with laplace noise...
    """
    family = _family_key(mechanism)
    op_type = base_op if isinstance(base_op, type) else type(base_op)
    for cls in op_type.__mro__:
        for fam in (family, "*"):
            f = _REGISTRY.get((cls, fam))
            if f is not None:
                return f
    raise NotImplementedError(
        f"no exact marginal is registered for {_op_name(op_type)} with {family} noise. "
        "Alternatives: Privatized(..., marginalize=False) keeps the true values as latent "
        "variables (sampled by a Gibbs/Metropolis step); pymc_dp.Release models the true "
        "records as latent variables and the release as a noisy statistic of them; or register "
        "an exact marginal with pymc_dp.distributions.marginals.register_marginal."
    )


# ---------------------------------------------------------------------------------------------
# helpers


def _as_float64(x):
    x = pt.as_tensor_variable(x)
    return x.astype("float64") if x.dtype.startswith("float") else x


def _params(base_rv):
    """The base's parameters, floating ones in float64.

    PyTensor turns a Python float literal that float32 represents exactly (``0.5``, ``3.0``)
    into a float32 constant, so ``pm.Binomial.dist(n=10, p=0.5)`` would compute in float32
    (errors of 1e-8); the cast is exact and restores float64 arithmetic.
    """
    return [_as_float64(q) for q in base_rv.owner.op.dist_params(base_rv.owner)]


def _float64_base(base_rv):
    """``base_rv`` rebuilt with float64 floating parameters (see :func:`_params`)."""
    node = base_rv.owner
    params = node.op.dist_params(node)
    if not any(pt.as_tensor_variable(q).dtype in ("float16", "float32") for q in params):
        return base_rv
    rng, size = node.op.rng_param(node), node.op.size_param(node)
    new = node.op.make_node(rng, size, *_params(base_rv))
    return new.outputs[node.outputs.index(base_rv)]


def safe_logsumexp(x, axis=0):
    """``log sum exp(x)`` along ``axis`` with a finite (zero) gradient when all terms are -inf.

    The shift is ``floor(max(x))``, not ``max(x)``: ``floor`` has a zero derivative in every
    backend, so no backend differentiates the maximum. JAX does when it differentiates the
    compiled graph itself (``pm.sample(nuts_sampler="numpyro")``; PyTensor's ``zero_grad`` is
    rewritten away before that), and its derivative of a maximum divides by the number of
    entries equal to it: inside ``jax.jit`` XLA may recompute the entries with other rounding
    than the maximum, that number is 0 and the gradient NaN (the Binomial + Geometric NaN of
    issue 9). The value is unchanged (``x - floor(max(x)) <= 1``: no overflow).

    Examples
    --------
    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> x = pt.dvector("x")
    >>> f = pytensor.function([x], [safe_logsumexp(x), pytensor.grad(safe_logsumexp(x), x)])
    >>> [v.tolist() for v in f(np.array([-np.inf, -np.inf]))]
    [-inf, [0.0, 0.0]]
    """
    m = pt.max(x, axis=axis, keepdims=True)
    m = pt.switch(pt.isfinite(m), m, np.float64(0.0))
    m = zero_grad(pt.floor(m))
    s = pt.sum(pt.exp(x - m), axis=axis)
    ok = s > 0
    return pt.switch(ok, pt.squeeze(m, axis=axis) + pt.log(pt.switch(ok, s, 1.0)), -np.inf)


def _grid_axis(k, ndim):
    return k.reshape((-1,) + (1,) * ndim)


# Per-family details of the base distributions, dispatched on the RandomVariable Op's type
# (subclasses included). A base without an entry has no extra checks, no finite support, no
# probability clipping and no tail bounds.


@functools.singledispatch
def _conditions(op, params):
    """``(conditions, msg)`` on the raw parameters for a base Op (none by default)."""
    return [], ""


def _register_base(detail, *bases):
    """Register ``detail``'s implementation for the RandomVariable Ops of ``bases``."""

    def decorator(f):
        for base in bases:
            detail.register(base.rv_type, f)
        return f

    return decorator


@_register_base(_conditions, pm.Bernoulli)
def _(op, params):
    (p,) = params
    return [p >= 0, p <= 1], "0 <= p <= 1"


@_register_base(_conditions, pm.Binomial)
def _(op, params):
    n, p = params
    return [n >= 0, p >= 0, p <= 1], "n >= 0, 0 <= p <= 1"


@_register_base(_conditions, pm.Categorical)
def _(op, params):
    (p,) = params
    return [p >= 0, p <= 1, pt.isclose(pt.sum(p, axis=-1), 1)], "0 <= p <= 1, sum(p) = 1"


@_register_base(_conditions, pm.DiscreteUniform)
def _(op, params):
    lower, upper = params
    return [lower <= upper], "lower <= upper"


@_register_base(_conditions, pm.BetaBinomial)
def _(op, params):
    n, alpha, beta = params
    return [n >= 0, alpha > 0, beta > 0], "n >= 0, alpha > 0, beta > 0"


@_register_base(_conditions, pm.Poisson)
def _(op, params):
    (mu,) = params
    return [mu >= 0, pt.isfinite(mu)], "mu >= 0, finite"


@_register_base(_conditions, pm.NegativeBinomial)
def _(op, params):
    n, p = params
    return [n > 0, p >= 0, p <= 1], "0 <= p <= 1, n > 0"


@_register_base(_conditions, pm.Normal)
def _(op, params):
    mu, sigma = params
    # finite: a NaN mean made the closed forms NaN, an infinite sigma NaN (inf / inf)
    return [sigma > 0, pt.isfinite(mu), pt.isfinite(sigma)], "sigma > 0, mu and sigma finite"


def _parameter_conditions(base_rv):
    """``(conditions, msg)``: the base distribution's own checks on its raw parameters.

    The same conditions as the base's PyMC logp (plus a finite Poisson rate, where the closed
    form would be NaN), evaluated on the parameters as given, before any clipping below.
    """
    params = [pt.as_tensor_variable(q) for q in _params(base_rv)]
    return _conditions(base_rv.owner.op, params)


def _check_base_parameters(logp, base_rv):
    """``logp`` wrapped in the base's own parameter checks (:func:`_parameter_conditions`).

    As for PyMC's own distributions, ``pm.logp(...).eval()`` raises ``ParameterValueError``
    on invalid base parameters and a model's logp is ``-inf`` there (the check becomes a
    switch on the output, so a finite unused branch keeps the gradient finite).
    """
    conditions, msg = _parameter_conditions(base_rv)
    if not conditions:
        return logp
    return check_parameters(logp, *conditions, msg=msg)


def _valid_or(x, ok, fallback):
    """``x`` where ``ok``, else ``fallback``: keeps an invalid parameter out of a closed form
    (whose value is then discarded by the check) so its gradient stays finite."""
    x = pt.as_tensor_variable(x)
    return pt.switch(ok, x, pt.as_tensor(np.float64(fallback)).astype(x.dtype))


# ---------------------------------------------------------------------------------------------
# closed forms


def _on_unique_values(value, mu, fn):
    """``fn(value, mu)``, evaluated once per distinct observed value when that pays.

    When ``value`` is constant data (observed counts repeat a lot) and ``mu`` is the same for
    every record, the marginal is computed on ``np.unique(value)`` and gathered back, so the
    per-record cost is one gather instead of an incomplete-gamma evaluation. The result is
    identical elementwise.
    """
    mu = pt.as_tensor_variable(mu)
    if isinstance(value, Constant) and all(mu.type.broadcastable) and value.data.size >= 64:
        data = np.asarray(value.data)
        uniq, inv = np.unique(data, return_inverse=True)
        if uniq.size * 4 <= data.size:
            lp_u = fn(pt.as_tensor(uniq.astype(np.float64)), mu.reshape(()))
            return lp_u[pt.as_tensor(inv.reshape(data.shape).astype(np.int64))]
    return fn(value, mu)


def poisson_geometric(value, base_rv, mechanism):
    """Poisson + two-sided geometric noise: closed form, see :mod:`.marginal_poisson`."""
    (mu,) = _params(base_rv)
    mu = _valid_or(mu, (mu >= 0) & pt.isfinite(mu), 1.0)
    a = -float(mechanism.log_alpha)
    logc = math.log(math.tanh(a / 2.0))
    value = pt.as_tensor_variable(value)
    lp = _on_unique_values(
        value, mu, lambda v, m: marginal_poisson.poisson_two_sided_exp_logp(v, m, a, logc)
    )
    if not value.dtype.startswith(("int", "uint")):
        lp = pt.switch(pt.eq(value, pt.floor(value)), lp, -np.inf)
    return _check_base_parameters(lp, base_rv)


def poisson_laplace(value, base_rv, mechanism):
    """Poisson + Laplace noise: closed form, see :mod:`.marginal_poisson`."""
    (mu,) = _params(base_rv)
    mu = _valid_or(mu, (mu >= 0) & pt.isfinite(mu), 1.0)
    b = float(mechanism.scale)
    lp = _on_unique_values(
        pt.as_tensor_variable(value),
        mu,
        lambda v, m: marginal_poisson.poisson_two_sided_exp_logp(v, m, 1.0 / b, -math.log(2.0 * b)),
    )
    return _check_base_parameters(lp, base_rv)


def _normal_params(base_rv):
    """``(mu, sigma)`` of a Normal base, invalid values replaced by ``(0, 1)`` (the check of
    :func:`_check_base_parameters` discards that value; the gradient stays finite)."""
    mu, sigma = _params(base_rv)
    mu = _valid_or(mu, pt.isfinite(mu), 0.0)
    sigma = _valid_or(sigma, (sigma > 0) & pt.isfinite(sigma), 1.0)
    return mu, sigma


def normal_laplace(value, base_rv, mechanism):
    """Normal + Laplace noise: closed form, see :mod:`.marginal_normal`."""
    mu, sigma = _normal_params(base_rv)
    lp = marginal_normal.normal_laplace_logp(value, mu, sigma, np.float64(mechanism.scale))
    return _check_base_parameters(lp, base_rv)


def normal_gaussian(value, base_rv, mechanism):
    """Normal + Gaussian noise: a Normal with variance ``sigma^2 + s^2``."""
    mu, sigma = _normal_params(base_rv)
    lp = marginal_normal.normal_gaussian_logp(value, mu, sigma, np.float64(mechanism.sigma))
    return _check_base_parameters(lp, base_rv)


def dirac_noise(value, base_rv, mechanism):
    """A known true value ``c`` (``marginalize=False``): the noise density at ``value - c``."""
    (c,) = _params(base_rv)
    return mechanism.logpdf_pt(value - c)


# ---------------------------------------------------------------------------------------------
# finite supports


@functools.singledispatch
def _support(op, params):
    """``(lo, hi)`` int64 scalars bounding the support of a bounded discrete base Op."""
    raise NotImplementedError(f"no finite support known for {type(op).__name__}")


def _int64(x):
    return pt.as_tensor_variable(x).astype("int64")


@_register_base(_support, pm.Bernoulli)
def _(op, params):
    return pt.constant(0, dtype="int64"), pt.constant(1, dtype="int64")


@_register_base(_support, pm.Binomial, pm.BetaBinomial)
def _(op, params):
    return pt.constant(0, dtype="int64"), _int64(pt.max(params[0]))


@_register_base(_support, pm.Categorical)
def _(op, params):
    return pt.constant(0, dtype="int64"), _int64(params[0].shape[-1] - 1)


@_register_base(_support, pm.DiscreteUniform)
def _(op, params):
    return _int64(pt.min(params[0])), _int64(pt.max(params[1]))


def _finite_support(base_rv):
    """``(lo, hi)`` scalars bounding the support of a bounded discrete base."""
    return _support(base_rv.owner.op, _params(base_rv))


_P_LO = np.float64(1e-300)
_P_HI = np.float64(1.0 - 2.0**-53)


@functools.singledispatch
def _clipped(op, params):
    """The base rebuilt with its probabilities clipped into (0, 1), or None (no clipping)."""
    return None


@_register_base(_clipped, pm.Bernoulli)
def _(op, params):
    return pm.Bernoulli.dist(p=pt.clip(params[0], _P_LO, _P_HI))


@_register_base(_clipped, pm.Binomial)
def _(op, params):
    return pm.Binomial.dist(n=params[0], p=pt.clip(params[1], _P_LO, _P_HI))


@_register_base(_clipped, pm.Categorical)
def _(op, params):
    return pm.Categorical.dist(p=pt.clip(params[0], _P_LO, np.float64(1.0)))


def _clip_probabilities(base_rv):
    """Rebuild Bernoulli / Binomial / Categorical with ``p`` clipped into (0, 1).

    ``p`` is exactly 0 or 1 only through rounding (``sigmoid(37) == 1.0``). There a support
    point has log-probability ``-inf`` with an infinite derivative, and ``0 * inf`` turns the
    gradient of the logsumexp into NaN although the marginal is smooth. Clipping to
    ``[1e-300, 1 - 2**-53]`` changes the marginal by a relative ``e^-36`` at most and keeps
    the gradient finite (it is 0 where the clip is active).
    """
    clipped = _clipped(base_rv.owner.op, list(_params(base_rv)))
    return base_rv if clipped is None else clipped


def finite_support_marginal(value, base_rv, mechanism):
    """Any base with finite support, any mechanism: exact logsumexp over the support.

    The support is the union over records (``0..max(n)`` for Binomial with record-wise ``n``);
    values outside a record's own support have base log-probability ``-inf`` and drop out.
    Costs ``len(support)`` evaluations per record.
    """
    value, lo, k, base_lp = _support_grid(value, base_rv)
    lp_ref, rel = _noise_relative_to(mechanism, value - lo.astype("float64"), lo - k)
    lse = safe_logsumexp(base_lp + rel, axis=0)
    return _check_base_parameters(lp_ref + lse, base_rv)


def _support_grid(value, base_rv):
    """The support ``k`` of a finite-support base as a leading axis broadcast against the value,
    and the base's log-probabilities there: ``(value as float64, lo, k, base_lp)``."""
    lo, hi = _finite_support(base_rv)
    # invalid parameters (n < 0, lower > upper) must not ask for a negative-length grid
    hi = pt.maximum(hi, lo)
    base_rv = _clip_probabilities(_float64_base(base_rv))
    # differences in float64: ``value - k`` in int64 wraps at the int64 edges (INT64_MIN - 1)
    value = pt.as_tensor_variable(value).astype("float64")
    k = _grid_axis(pt.arange(lo, hi + 1, dtype="int64"), value.ndim)
    # the value has the variable's full shape (no reference to the RV itself in the graph)
    k = pt.broadcast_to(k, (k.shape[0], *value.shape))
    return value, lo, k, pm.logp(base_rv, k, warn_rvs=False)


def binomial_two_sided_exp(value, base_rv, mechanism):
    """Bernoulli / Binomial + Laplace or two-sided geometric noise: each count's own sum.

    The same marginal as :func:`finite_support_marginal` (the logsumexp over ``0..max(n)``
    for every count), but each count sums only its own terms, outwards from the mode of
    ``p(y) eta(z - y)`` by products of ratios, until the neglected rest is certified below
    ``2^-60`` of the sum (value) and of the gradient's terms; the value and its derivatives in
    ``p`` and ``z`` come from one pass (:mod:`pymc_dp.math.binomial_noise`). About 9 posterior
    standard deviations of ``y`` given ``z`` per count instead of ``max(n) + 1`` log-pmf
    evaluations, and no ``(max(n) + 1) x records`` grid in the graph. ``p`` is clipped into
    ``[1e-300, 1 - 2^-53]`` as in :func:`finite_support_marginal`.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> base = pm.Binomial.dist(n=np.array([12, 300]), p=np.float64(0.3))
    >>> z = np.array([4.5, 80.0])
    >>> fast = binomial_two_sided_exp(z, base, Laplace(scale=2.0)).eval()
    >>> full = finite_support_marginal(z, base, Laplace(scale=2.0)).eval()
    >>> bool(np.allclose(fast, full, rtol=1e-13, atol=0))
    True
    """
    if not isinstance(mechanism, Laplace | Geometric):  # another law registered as the family
        return finite_support_marginal(value, base_rv, mechanism)
    op = base_rv.owner.op
    params = _params(base_rv)
    if isinstance(op, pm.Bernoulli.rv_type):
        n, p = np.float64(1.0), params[0]
    else:
        n, p = params
        n = pt.maximum(n, 0)
    p = pt.clip(p, _P_LO, _P_HI)
    a = _decay_rate(mechanism)
    logc = float(mechanism.logpdf(0.0))  # eta(t) = c e^{-a |t|}: log c = log eta(0)
    lp = binomial_noise.binomial_two_sided_exp_logp(value, n, p, a, logc, bool(mechanism.integer))
    return _check_base_parameters(lp, base_rv)


def _binomial_noise_whole_support(z, n, p, a, logc, integer):
    """The three outputs of :class:`~pymc_dp.math.binomial_noise.BinomialTwoSidedExpLogp` as
    a plain PyTensor graph: sums over the whole support ``0..max(n)`` (static shapes, for
    JAX), the same numbers as :func:`finite_support_marginal` and its gradient."""
    k = pt.arange(pt.maximum(pt.max(n), 0.0).astype("int64") + 1).astype("float64")[:, None]
    q = np.float64(1.0) - p
    inside = pt.le(k, n)
    kk = pt.switch(inside, k, np.float64(0.0))
    base = (
        -pt.gammaln(kk + 1.0)
        - pt.gammaln(n - kk + 1.0)
        + pt.gammaln(n + 1.0)
        + pt.special.xlogy(kk, p)
        + pt.special.xlogy(n - kk, q)
    )
    t = z - k
    noise = np.float64(logc) - np.float64(a) * pt.abs(t)
    if integer:
        noise = pt.switch(pt.eq(z, pt.floor(z)), noise, -np.inf)
    terms = pt.switch(inside, base + noise, -np.inf)
    lse = safe_logsumexp(terms, axis=0)
    w = pt.exp(terms - pt.switch(pt.isfinite(lse), lse, np.float64(0.0)))
    dp = pt.sum(w * (kk / p - (n - kk) / q), axis=0)
    dz = pt.sum(w * (-np.float64(a)) * pt.sign(t), axis=0)
    return [lse, pt.switch(pt.isfinite(lse), dp, 0.0), pt.switch(pt.isfinite(lse), dz, 0.0)]


@node_rewriter(None)
def _binomial_noise_for_jax(fgraph, node):
    """JAX only (no JAX function for the kernel): the whole-support sums of the same law."""
    if isinstance(node.op, binomial_noise.BinomialTwoSidedExpLogp):
        op = node.op
        return _binomial_noise_whole_support(*node.inputs, op.a, op.logc, op.integer)
    return None


if "pymc_dp_binomial_noise_jax" not in optdb:
    optdb.register(
        "pymc_dp_binomial_noise_jax",
        dfs_rewriter(_binomial_noise_for_jax),
        "jax",
        position=0.1,
    )


def check_censored_marginal(base_op) -> None:
    """``NotImplementedError`` unless a clipped observation of ``base_op`` has an exact
    marginal (:func:`censored_finite_support_marginal`: bases with a finite support)."""
    op_type = base_op if isinstance(base_op, type) else type(base_op)
    if _support.dispatch(op_type) is _support.dispatch(object):
        raise NotImplementedError(
            f"a clipped (lower/upper) privatized observation of {_op_name(op_type)} has no "
            "exact marginal here (only bases with a finite support: Bernoulli, Binomial, "
            "BetaBinomial, Categorical, DiscreteUniform). Use pymc_dp.Release(name, "
            "statistic, mechanism, observed=..., lower=..., upper=...) with latent records"
        )


def censored_finite_support_marginal(value, base_rv, mechanism, lower, upper):
    """Clipped observation ``z = clip(y + noise, lower, upper)`` of a finite-support base:
    ``log sum_y p(y) L(z | y)`` over the support, with ``L`` the noise density where
    ``lower < z < upper``, ``P(noise <= lower - y)`` where ``z == lower`` and
    ``P(noise >= upper - y)`` where ``z == upper`` (``-inf`` outside the bounds).
    Costs ``len(support)`` evaluations per record.
    """
    from pymc_dp.distributions.release import censored_logp_pt

    value, _, k, base_lp = _support_grid(value, base_rv)
    noise_lp = censored_logp_pt(mechanism, value, value - k.astype("float64"), lower, upper)
    return _check_base_parameters(safe_logsumexp(base_lp + noise_lp, axis=0), base_rv)


def _noise_relative_to(mechanism, t, delta):
    """``(log eta(t), log eta(t + delta) - log eta(t))`` with the difference accurate.

    For ``|t|`` beyond ``2**53`` (an int64 observation near its edges, or a float one of 1e19)
    ``t + delta`` rounds to ``t`` and the terms of a sum over a small support would all look
    alike: the value keeps its relative accuracy but the gradient in the base's parameters
    is lost. For the built-in families the difference is computed from ``delta`` itself:
    ``-a delta (t + delta/2) / ((|t + delta| + |t|)/2)`` (Laplace, geometric) and
    ``-delta (t + delta/2) / sigma^2`` (Gaussian, discrete Gaussian); nothing cancels.
    ``delta`` (an integer tensor, small) is exact. Other families: the plain density.
    """
    t = pt.as_tensor_variable(t).astype("float64")
    d = pt.as_tensor_variable(delta).astype("float64")
    rel = _log_ratio(mechanism, t, d)
    if rel is None:
        return pt.zeros_like(t), mechanism.logpdf_pt(t + d)
    lp_ref = mechanism.logpdf_pt(t)
    # -inf is right (that term underflows); an intermediate overflow (+inf, inf * 0) is not:
    # there the direct difference is finite, since lp_ref is
    direct = mechanism.logpdf_pt(t + d) - lp_ref
    rel = pt.switch(pt.isnan(rel) | pt.eq(rel, np.inf), direct, rel)
    # an observation whose own density underflows (or is off the integers): -inf, no NaN
    rel = pt.switch(pt.isfinite(lp_ref), rel, np.float64(0.0))
    return lp_ref, rel


# ---------------------------------------------------------------------------------------------
# truncated sums


# Per-family details of the noise laws, dispatched on the mechanism's type (subclasses
# included): the exact log-density ratio used by the finite sums, and the distance at which
# the density has fallen by a given number of nats (the truncated sums' windows).


@functools.singledispatch
def _log_ratio(mechanism, t, d):
    """``log eta(t + d) - log eta(t)`` without cancellation, or None (no closed form)."""
    return None


@_log_ratio.register(Laplace)
@_log_ratio.register(Geometric)
def _(mechanism, t, d):
    # -a d (t + d/2) / ((|t + d| + |t|)/2), a the decay rate of eta(t) ~ exp(-a |t|)
    a = np.float64(_decay_rate(mechanism))
    half = np.float64(0.5)
    den = half * pt.abs(t + d) + half * pt.abs(t)  # halves: no overflow at 1.8e308
    ratio = (t + half * d) / pt.switch(pt.gt(den, 0), den, np.float64(1.0))  # in [-1, 1]
    return -(a * d) * ratio


@_log_ratio.register(Gaussian)
@_log_ratio.register(DiscreteGaussian)
def _(mechanism, t, d):
    s = np.float64(mechanism.sigma)
    return -(d / s) * ((t + np.float64(0.5) * d) / s)


@functools.singledispatch
def _tail_distance(mechanism, nats: float) -> float:
    """Distance beyond which the noise density is below ``eta(0) e^{-nats}``."""
    raise NotImplementedError(f"no truncation window is known for {type(mechanism).__name__} noise")


@_tail_distance.register(Laplace)
@_tail_distance.register(Geometric)
def _(mechanism, nats: float) -> float:
    return nats / _decay_rate(mechanism)


@_tail_distance.register(Gaussian)
@_tail_distance.register(DiscreteGaussian)
def _(mechanism, nats: float) -> float:
    return math.sqrt(2.0 * nats) * mechanism.sigma


@functools.singledispatch
def _decay_rate(mechanism) -> float:
    """``a`` with ``eta(t) ~ exp(-a |t|)`` for the two-sided exponential laws."""
    raise NotImplementedError(type(mechanism).__name__)


@_decay_rate.register(Laplace)
def _(mechanism) -> float:
    return 1.0 / mechanism.scale


@_decay_rate.register(Geometric)
def _(mechanism) -> float:
    return -mechanism.log_alpha


def _window_halfwidth(mechanism, nats: float | None = None) -> int:
    """Distance beyond which the noise density is below ``eta(0) e^{-nats}`` (default
    ``TAIL_NATS``), rounded up, plus one."""
    nats = TAIL_NATS if nats is None else nats
    return math.ceil(_tail_distance(mechanism, nats)) + 1


def _count_tails(base_rv):
    """``(center, width, below(k), above(k))``: the base's mean, a half-width holding its bulk,
    and upper bounds on ``log P(Y <= k - 1)``, ``log P(Y > k)``.

    Each bound is the smaller of two valid upper bounds: the regularized incomplete gamma /
    beta function in the direction that is relatively accurate in the tail (an underflow to 0
    is replaced by 1e-300, still an upper bound), and, where it applies, the geometric-series
    bound ``P(Y > k) <= p(k + 1) / (1 - rho)`` with ``rho`` an upper bound on the ratios
    ``p(j + 1) / p(j)`` for ``j > k`` (and the mirror image below), which stays in log space.
    """
    base64 = _float64_base(base_rv)

    def lpmf(k):
        return pm.logp(base64, pt.maximum(k, 0.0).astype("int64"), warn_rvs=False)

    params = [pt.as_tensor_variable(q).astype("float64") for q in _params(base_rv)]
    return _tails(base_rv.owner.op, params, lpmf)


_TINY = np.float64(1e-300)
_ONE = np.float64(1.0)


def _geometric_bound(inc, lpmf_next, rho):
    """``min(inc, lpmf_next - log(1 - rho))`` where ``rho < 1/2``, else ``inc``."""
    geo = lpmf_next - pt.log1p(-pt.minimum(rho, 0.5))
    return pt.switch(rho < 0.5, pt.minimum(inc, geo), inc)


@functools.singledispatch
def _tails(op, params, lpmf):
    raise NotImplementedError(f"no tail bounds for {type(op).__name__}")


@_register_base(_tails, pm.Poisson)
def _(op, params, lpmf):
    (mu,) = params

    def below(k):  # P(Y <= k - 1) = Q(k, mu), k >= 1; ratios p(j-1)/p(j) = j/mu
        inc = pt.log(pt.maximum(pt.gammaincc(pt.maximum(k, 1.0), mu), _TINY))
        return _geometric_bound(inc, lpmf(k - 1.0), (k - 1.0) / mu)

    def above(k):  # P(Y > k) = P(k + 1, mu); ratios p(j+1)/p(j) = mu/(j+1) <= mu/(k+2)
        inc = pt.log(pt.maximum(pt.gammainc(k + 1.0, mu), _TINY))
        return _geometric_bound(inc, lpmf(k + 1.0), mu / (k + 2.0))

    # Poisson tails are sub-gamma: P(|Y - mu| > sqrt(2 T mu) + T) <= 2 e^{-T}
    width = pt.sqrt(np.float64(2.0 * TAIL_NATS) * mu) + np.float64(TAIL_NATS)
    return mu, width, below, above


@_register_base(_tails, pm.NegativeBinomial)
def _(op, params, lpmf):
    n, p = params

    def below(k):  # P(Y <= k - 1) = I_p(n, k)
        return pt.log(pt.maximum(pt.betainc(n, pt.maximum(k, 1.0), p), _TINY))

    def above(k):  # P(Y > k) = I_{1-p}(k + 1, n); p(j+1)/p(j) = (j + n)/(j + 1) (1 - p)
        inc = pt.log(pt.maximum(pt.betainc(k + 1.0, n, _ONE - p), _TINY))
        rho = (_ONE - p) * pt.maximum((k + 1.0 + n) / (k + 2.0), _ONE)
        return _geometric_bound(inc, lpmf(k + 1.0), rho)

    # a Gaussian part plus the geometric tail of ratio (1 - p): a heuristic width (the
    # bound check certifies the window actually used)
    var = n * (_ONE - p) / (p * p)
    width = pt.sqrt(np.float64(2.0 * TAIL_NATS) * var) + np.float64(TAIL_NATS) / (
        -pt.log1p(-pt.clip(p, _TINY, _ONE))
    )
    return n * (_ONE - p) / p, width, below, above


#: the base window is used for records within this many nats of noise of the base's mean
_NEAR_NATS = 25.0


@functools.singledispatch
def _mode_base(op, params):
    """``(code, b1, b2)`` of a count base for :mod:`pymc_dp.math.count_mode`."""
    raise NotImplementedError(f"no mode search for {type(op).__name__}")


@_register_base(_mode_base, pm.Poisson)
def _(op, params):
    return count_mode.BASE_POISSON, params[0], np.float64(0.0)


@_register_base(_mode_base, pm.NegativeBinomial)
def _(op, params):
    return count_mode.BASE_NEGBIN, params[0], params[1]


@functools.singledispatch
def _mode_noise(mechanism):
    """``(code, q)`` of a noise law for :mod:`pymc_dp.math.count_mode`."""
    raise NotImplementedError(f"no mode search for {type(mechanism).__name__} noise")


@_mode_noise.register(Laplace)
@_mode_noise.register(Geometric)
def _(mechanism):
    return count_mode.NOISE_EXPONENTIAL, _decay_rate(mechanism)


@_mode_noise.register(Gaussian)
@_mode_noise.register(DiscreteGaussian)
def _(mechanism):
    return count_mode.NOISE_GAUSSIAN, mechanism.sigma


def _posterior_mode(value, base_rv, mechanism, upper):
    """The smallest integer ``y`` in ``[0, upper]`` where ``log p(y) + log eta(z - y)`` stops
    increasing: its mode when ``p`` and ``eta`` are log-concave (Poisson, NegativeBinomial
    with ``n >= 1``; every built-in noise), by bisection (:mod:`pymc_dp.math.count_mode`).

    Elsewhere it is some point of ``[0, upper]``; the window built on it is still valid (the
    tail bound decides what it certifies).
    """
    params = [pt.as_tensor_variable(q).astype("float64") for q in _params(base_rv)]
    base, b1, b2 = _mode_base(base_rv.owner.op, params)
    noise, q = _mode_noise(mechanism)
    f64 = np.float64
    return count_mode.count_mode_pt(value, upper, f64(base), b1, b2, f64(noise), f64(q))


def truncated_sum_window(value, base_rv, mechanism):
    """``(start, length)``: the first point of each record's window and the common length.

    Each record sums ``y`` over ``[start, start + length - 1]``, the shorter of

    * the *noise window*, from ``W`` points below ``min(c, m)`` to ``W`` above ``max(c, m)``
      (``c`` the observation, ``m`` the base's mean, ``W`` the noise half-width of
      ``TAIL_NATS``); where that is longer than the cap below, the longest window allowed,
      centred on the mode of ``p(y) eta(z - y)`` (:func:`_posterior_mode`), and
    * the *base window*, ``m`` plus or minus the base's bulk half-width (used for records
      within ``_NEAR_NATS`` nats of noise of ``m``): its length does not grow with the noise
      scale, so a small epsilon no longer makes a records x (140 / epsilon) grid.

    ``length`` is at most ``MAX_GRID_CELLS // records`` (and at least 1), so the grid has at
    most ``max(MAX_GRID_CELLS, records)`` cells whatever the parameters. Any window is valid:
    the tail bound of :func:`truncated_sum_marginal` decides what it certifies.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
    >>> z = np.array([0.0, 3.0, 12.0])
    >>> start, length = truncated_sum_window(z, pm.Poisson.dist(np.float64(4.0)),
    ...                                      DiscreteGaussian(sigma=2.0))
    >>> start.eval().tolist(), int(length.eval())
    ([0.0, 0.0, 0.0], 38)
    """
    start, length, _ = _window_and_mode(value, base_rv, mechanism)
    return start, length


def _window_and_mode(value, base_rv, mechanism):
    """``(start, length, mode)``: :func:`truncated_sum_window` and the mode of ``h``."""
    value = pt.as_tensor_variable(value).astype("float64")
    w = _window_halfwidth(mechanism)
    near = np.float64(_window_halfwidth(mechanism, _NEAR_NATS))
    center, width, _, _ = _count_tails(base_rv)
    # the grid start + arange(length) stays within [0, 2**53], where float64 holds every
    # integer (observations reach 2**53: with a limit of 2**52 the window missed their mass)
    limit = np.float64(2.0**53)
    c = pt.floor(value) if not mechanism.integer else pt.round(value)
    c = pt.clip(c, 0.0, limit)
    cap = pt.maximum(MAX_GRID_CELLS // pt.maximum(value.size, 1), 1)
    # the base's mean (invalid or non-finite parameters in warm-up: the observation)
    m = zero_grad(pt.broadcast_to(pt.round(center), value.shape))
    m = pt.switch(pt.isfinite(m), pt.clip(m, 0.0, limit), c)
    # noise window: from W below the lower to W above the higher of observation and mean;
    # where that exceeds the cap, the longest allowed window centred on the mode of
    # p(y) eta(z - y), which lies between them (the posterior mass of y given z)
    start_a = pt.maximum(pt.minimum(c, m) - w, 0.0)
    end_a = pt.maximum(c, m) + w
    too_long = pt.gt(end_a - start_a + 1.0, cap.astype("float64"))
    half = pt.floor((cap - 1) / 2).astype("float64")
    mode = zero_grad(_posterior_mode(value, base_rv, mechanism, pt.maximum(c, m) + 1.0))
    start_a = pt.switch(too_long, pt.maximum(mode - half, 0.0), start_a)
    end_a = pt.switch(too_long, pt.maximum(mode - half, 0.0) + 2.0 * half, end_a)
    # base window
    wb = zero_grad(pt.broadcast_to(pt.ceil(width), value.shape)) + 1.0
    start_b = pt.maximum(m - wb, 0.0)
    end_b = m + wb
    use_b = pt.lt(end_b - start_b, end_a - start_a) & pt.le(pt.abs(c - m), near)
    start = pt.switch(use_b, start_b, start_a)
    end = pt.switch(use_b, end_b, end_a)
    length = pt.max(end - start).astype("int64") + 1
    length = pt.minimum(pt.maximum(length, 1), cap)
    start = pt.minimum(start, limit - (length - 1).astype("float64"))
    return start, length, mode


@functools.singledispatch
def _log_concave_base(op, params):
    """Whether the base pmf is log-concave (a symbolic or Python bool; False by default)."""
    return False


@_register_base(_log_concave_base, pm.Poisson)
def _(op, params):
    return True


@_register_base(_log_concave_base, pm.NegativeBinomial)
def _(op, params):
    return pt.all(pt.ge(params[0], 1.0))  # (y + n) / (y + 1) non-increasing for n >= 1


def _log_concave(base_rv, mechanism):
    """Whether ``h(y) = log p(y) + log eta(z - y)`` is concave in ``y``.

    The built-in noise laws (those with a :func:`_log_ratio`) are all log-concave.
    """
    if _log_ratio(mechanism, pt.constant(np.float64(1.0)), np.float64(1.0)) is None:
        return False
    params = [pt.as_tensor_variable(q).astype("float64") for q in _params(base_rv)]
    return _log_concave_base(base_rv.owner.op, params)


def _h(base_rv, mechanism, value, y):
    """``log p(y) + log eta(value - y)`` (``-inf`` for ``y < 0``)."""
    lp = pm.logp(_float64_base(base_rv), pt.maximum(y, 0.0).astype("int64"), warn_rvs=False)
    lp = pt.switch(pt.ge(y, 0.0), lp, -np.inf)
    return lp + mechanism.logpdf_pt(value - y)


def _h_step(base_rv, mechanism, value, y):
    """``h(y + 1) - h(y)`` from the closed-form ratios (those of :mod:`.count_mode`), or None
    (no closed form: then the difference of the two values is used).

    The difference of two values of ``h`` loses everything once ``|h|`` is large (about 100
    absolute at ``h = -3e15``); the ratios keep the increment to a few ulps of itself.
    """
    try:
        params = [pt.as_tensor_variable(q).astype("float64") for q in _params(base_rv)]
        base, b1, b2 = _mode_base(base_rv.owner.op, params)
        noise, q = _mode_noise(mechanism)
    except NotImplementedError:
        return None
    y = pt.maximum(y, 0.0)
    if base == count_mode.BASE_POISSON:
        step = pt.log(b1) - pt.log1p(y)
    else:
        step = pt.log1p(-b2) + pt.log(y + b1) - pt.log1p(y)
    t = value - y
    q = np.float64(q)
    if noise == count_mode.NOISE_EXPONENTIAL:
        den = np.float64(0.5) * pt.abs(t - 1.0) + np.float64(0.5) * pt.abs(t)
        ratio = (t - np.float64(0.5)) / pt.switch(pt.gt(den, 0), den, np.float64(1.0))
        return step + q * ratio
    return step + ((t - np.float64(0.5)) / q) / q


def _concave_tail(h_out, h_in, concave, step=None):
    """Bound on ``log sum_{k >= 0} e^{h(y_out + k s)}`` beyond an end of a concave ``h``:
    ``h_out - log(1 - e^{h_out - h_in})`` when ``h`` still falls outwards there, else inf.

    ``step`` is ``h_out - h_in`` from closed-form ratios (:func:`_h_step`) where known."""
    diff = h_out - h_in if step is None else step
    falls = pt.lt(diff, 0.0) & pt.isfinite(h_in) & pt.isfinite(h_out)
    gap = pt.switch(falls, diff, np.float64(-1.0))
    bound = pt.switch(falls, h_out - pt.log1mexp(gap), np.inf)
    return pt.switch(
        pt.as_tensor_variable(np.bool_(concave) if isinstance(concave, bool) else concave),
        bound,
        np.inf,
    )


# Static windows (for backends that need static shapes: JAX)


class StaticWindow(Op):
    """``(start, length)`` of a truncated sum, passed through unchanged and marked for JAX.

    The window's length depends on the parameters, and JAX (PyMC's ``nuts_sampler="numpyro"``
    / ``"blackjax"``) needs static shapes. This identity Op marks the window so that a rewrite
    registered for JAX alone (:mod:`pymc_dp.jax.static_window`) replaces it, in JAX graphs
    only, by the static window ``[max(mode - halfwidth, 0), max(mode - halfwidth, 0) + 2
    halfwidth]`` (``mode`` the third input), or by a refusal naming ``pair`` where
    ``refusal`` (the reason) is set. Every other backend drops the marker before any other
    rewrite (``pymc_dp_drop_static_window``, tags ``fast_run`` and ``fast_compile``), so its
    graph is the one without it; left in place (a graph compiled without rewrites) it is the
    identity in Python and numba.

    Examples
    --------
    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> start, mode, length = pt.dvector("start"), pt.dvector("mode"), pt.lscalar("length")
    >>> s, n = StaticWindow(25, "Poisson with discrete_gaussian noise")(start, length, mode)
    >>> f = pytensor.function([start, length, mode], [s + 1.0, n * 2])
    >>> [np.asarray(v).tolist() for v in f(np.array([3.0]), 40, np.array([9.0]))]
    [[4.0], 80]
    """

    __props__ = ("halfwidth", "pair", "refusal")
    view_map = {0: [0], 1: [1]}  # noqa: RUF012 (PyTensor's Op attribute)
    #: how the rewrites recognise the marker (not by class: pytest's doctest collection
    #: executes this module a second time, which makes a second class)
    is_static_window_marker = True

    def __init__(self, halfwidth: int, pair: str, refusal: str | None = None):
        self.halfwidth = int(halfwidth)
        self.pair = pair
        self.refusal = refusal

    def make_node(self, start, length, mode):
        start, length, mode = (pt.as_tensor_variable(v) for v in (start, length, mode))
        return Apply(self, [start, length, mode], [start.type(), length.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]
        output_storage[1][0] = inputs[1]

    def infer_shape(self, node, shapes):
        return [shapes[0], shapes[1]]

    def connection_pattern(self, node):
        return [[True, False], [False, False], [False, False]]

    def pullback(self, inputs, outputs, output_grads):
        return [output_grads[0], disconnected_type(), disconnected_type()]


def _numba_static_window(op, node, **kwargs):
    from pytensor.link.numba.dispatch.basic import numba_njit

    @numba_njit
    def static_window(start, length, mode):
        return start, length

    return static_window


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    register_funcify_default_op_cache_key(StaticWindow)(_numba_static_window)


@node_rewriter(None)
def _drop_static_window(fgraph, node):
    """Every backend but JAX: the window as computed (the marker removed)."""
    if getattr(node.op, "is_static_window_marker", False):
        return list(node.inputs[:2])
    return None


if "pymc_dp_drop_static_window" not in optdb:
    # before the first canonicalisation, after the JAX-only replacement (position 0.1)
    optdb.register(
        "pymc_dp_drop_static_window",
        dfs_rewriter(_drop_static_window),
        "fast_run",
        "fast_compile",
        position=0.2,
    )


@functools.singledispatch
def _strongly_log_concave_noise(mechanism) -> bool:
    """Whether ``log eta(t)`` has curvature at least ``1 / sigma^2`` with ``W`` (the half-width
    at ``TAIL_NATS``) at least ``sigma sqrt(2 TAIL_NATS)`` (Gaussian families)."""
    return False


@_strongly_log_concave_noise.register(Gaussian)
@_strongly_log_concave_noise.register(DiscreteGaussian)
def _(mechanism) -> bool:
    return True


def _static_bool(cond):
    """A Python bool for ``cond`` if it is one or a graph of constants only, else None."""
    if isinstance(cond, bool | np.bool_):
        return bool(cond)
    if all(isinstance(v, Constant) for v in graph_inputs([cond])):
        return bool(np.all(cond.eval(mode="FAST_COMPILE")))
    return None


_USE_NUMBA = (
    "Sample this model with pm.sample's default sampler or nuts_sampler='nutpie' (both "
    "compile it with numba), not nuts_sampler='numpyro' / 'blackjax'."
)


def _static_window_refusal(base_rv, mechanism, pair: str) -> str | None:
    """None where the static window certifies the sum at every parameter value, else why not.

    It does where ``h(y) = log p(y) + log eta(z - y)`` is strongly concave: a log-concave
    base ``p`` (decided when the graph is built: Poisson; NegativeBinomial with ``n`` a
    constant ``>= 1``) and Gaussian-family noise (curvature ``1 / sigma^2``); see
    :func:`truncated_sum_marginal`.
    """
    why = None
    if not _strongly_log_concave_noise(mechanism):
        why = (
            "with noise of exponential tails, the window that certifies the sum follows the "
            "base's spread, so its length depends on the parameters"
        )
    else:
        params = [pt.as_tensor_variable(q).astype("float64") for q in _params(base_rv)]
        if not _static_bool(_log_concave_base(base_rv.owner.op, params)):
            why = (
                "a window of fixed length certifies the sum only for a log-concave base "
                "(Poisson; NegativeBinomial with n = alpha a constant >= 1), which this "
                "base is not known to be when the graph is built"
            )
    if why is None:
        return None
    return (
        f"Privatized({pair}) cannot be compiled with JAX: its exact marginal is a truncated "
        f"sum and JAX needs static shapes; {why}. {_USE_NUMBA}"
    )


_COUNT_BASES = (pm.Poisson, pm.NegativeBinomial)


def _mark_window(start, length, mode, base_rv, mechanism):
    """``(start, length)`` behind a :class:`StaticWindow` marker (see there)."""
    op = base_rv.owner.op
    name = next((d.__name__ for d in _COUNT_BASES if isinstance(op, d.rv_type)), None)
    pair = f"{name or _op_name(type(op))} with {mechanism.family} noise"
    refusal = _static_window_refusal(base_rv, mechanism, pair)
    w = _window_halfwidth(mechanism) if refusal is None else 0
    start, length = StaticWindow(w, pair, refusal)(start, length, mode)
    return start, length


def truncated_sum_marginal(value, base_rv, mechanism):
    """Poisson / NegativeBinomial base, symmetric unimodal noise: windowed sum, asserted tail.

    The windows are those of :func:`truncated_sum_window`; see the module docstring for the
    bound. Returns ``-inf`` where the bound cannot be certified at ``TAIL_TOL``. Under JAX
    the window is the static one of :mod:`pymc_dp.jax.static_window` (discrete-Gaussian
    noise on a log-concave base), or the graph is refused (:class:`StaticWindow`).
    """
    value = pt.as_tensor_variable(value).astype("float64")
    _, _, log_below, log_above = _count_tails(base_rv)
    start, length = _mark_window(*_window_and_mode(value, base_rv, mechanism), base_rv, mechanism)
    steps = pt.arange(length).astype("float64")
    y = pt.shape_padleft(start) + _grid_axis(steps, start.ndim)
    end = start + (length - 1).astype("float64")
    base_lp = pm.logp(_float64_base(base_rv), y.astype("int64"), warn_rvs=False)
    noise_lp = mechanism.logpdf_pt(value - y)
    terms = base_lp + noise_lp
    lse = safe_logsumexp(terms, axis=0)
    # neglected mass: sup of eta beyond each end times the base tail probability there (the
    # observation may lie beyond an end: then the sup is eta(0))
    zero = np.float64(0.0)
    upper = mechanism.logpdf_pt(pt.maximum(end + 1.0 - value, zero)) + log_above(end)
    lower = mechanism.logpdf_pt(pt.maximum(value - (start - 1.0), zero)) + log_below(start)
    # and, for a log-concave h(y) = log p(y) + log eta(z - y), the geometric series of h
    # beyond each end (its increments there are at most the last one inside)
    concave = _log_concave(base_rv, mechanism)
    h_after = _h(base_rv, mechanism, value, end + 1.0)
    h_before = _h(base_rv, mechanism, value, start - 1.0)
    step_after = _h_step(base_rv, mechanism, value, end)  # h(end + 1) - h(end)
    step_before = _h_step(base_rv, mechanism, value, start - 1.0)  # h(start) - h(start - 1)
    step_before = None if step_before is None else -step_before
    upper = pt.minimum(upper, _concave_tail(h_after, terms[-1], concave, step_after))
    lower = pt.minimum(lower, _concave_tail(h_before, terms[0], concave, step_before))
    lower = pt.switch(start > 0, lower, -np.inf)
    bound = pt.logaddexp(upper, lower)
    # the error of log p is at most log1p(B / S) = softplus(log B - log S): at most TAIL_TOL,
    # or TAIL_TOL |log p| where |log p| > 1 (float64 holds log p to about 1e-16 |log p|:
    # at log p = -6e15 no sum is certified to an absolute 1e-12)
    excess = pt.softplus(zero_grad(bound - lse))
    ok = excess <= np.float64(TAIL_TOL) * pt.maximum(pt.abs(zero_grad(lse)), np.float64(1.0))
    return _check_base_parameters(pt.switch(ok, lse, -np.inf), base_rv)


# ---------------------------------------------------------------------------------------------
# the built-in registry

register_marginal(pm.Poisson, "geometric", poisson_geometric)
register_marginal(pm.Poisson, "laplace", poisson_laplace)
register_marginal(pm.Poisson, "discrete_gaussian", truncated_sum_marginal)
register_marginal(pm.Normal, "laplace", normal_laplace)
register_marginal(pm.Normal, "gaussian", normal_gaussian)
register_marginal(pm.DiracDelta, "*", dirac_noise)
for _fam in ("geometric", "laplace", "discrete_gaussian"):
    register_marginal(pm.NegativeBinomial, _fam, truncated_sum_marginal)
for _base in (pm.Bernoulli, pm.Binomial, pm.Categorical, pm.DiscreteUniform, pm.BetaBinomial):
    register_marginal(_base, "*", finite_support_marginal)
for _base in (pm.Bernoulli, pm.Binomial):
    for _fam in ("geometric", "laplace"):
        register_marginal(_base, _fam, binomial_two_sided_exp)
del _fam, _base
