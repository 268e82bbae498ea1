"""``Release``: a differentially private release of a statistic of latent records.

The analyst holds ``z = T(x) + noise``, where ``x`` are the (latent) records of the model, ``T``
is any PyTensor expression of them (a count, a sum, a contingency table, regression moments
``X'y``, ``y'y``, ``X'X`` of clamped values, ...) and the noise comes from a
:class:`~pymc_dp.mechanisms.base.Mechanism`. This is the second framework of Ju, Awan, Gong &
Rao (2022): ``X_i | theta ~ f(x | theta)`` i.i.d., ``Z_dp | X ~ eta(z_dp | X)``.

The log-density of the release given the records is the noise log-density of ``z - T(x)``,
summed over the components of the statistic::

    log eta(z | x) = sum_k log p_noise(z_k - T_k(x))

Its marginal likelihood ``int eta(z | x) f^n(x | theta) dx`` (Ju et al., "The marginal
likelihood") is not available in closed form in general, so the records stay latent and
:class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation` samples them.

Forward draws are ``T(x) + noise``, so prior and posterior predictive sampling work.
The mechanism is kept on the variable for privacy accounting (:func:`released_mechanisms`).
The mechanism's ``sensitivity`` is the user's statement about ``T`` (e.g. 1 for a count, 2 for
a count vector of one-hot records); it enters the accounting, not the likelihood. When it was
declared (``epsilon``, ``delta``, ``rho`` or ``sensitivity`` given to the mechanism),
:class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation` checks every record change it
proposes against it (L1 for Laplace/Geometric, L2 for Gaussian/DiscreteGaussian) and raises an
error naming the release, the record and the change when the data contradict it.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.distribution import Distribution, SymbolicRandomVariable, _support_point
from pymc.logprob.abstract import _logprob
from pymc.model import modelcontext
from pymc.pytensorf import collect_default_updates
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.distributions._observed import (
    check_integer_source,
    declared_shape,
    prepare_observed,
)
from pymc_dp.distributions.sensitivity import check_declared_sensitivity
from pymc_dp.mechanisms.base import Mechanism

__all__ = [
    "MechanismRV",
    "Release",
    "ReleaseRV",
    "announce_model",
    "censored_logp_pt",
    "censoring_bounds",
    "check_within_bounds",
    "clip_to_bounds",
    "is_random_variable",
    "is_release",
    "on_release_registered",
    "record_parents",
    "released_mechanisms",
]

# Callbacks run with the model each time a Release is registered in one. The step methods' claim
# rule (:mod:`pymc_dp.step_methods.claims`) adds the one that remembers such models (for
# ``pm.sample(model=m)`` outside ``with m:``); this layer keeps no step-assignment state and does
# not import the step methods.
_ON_REGISTER: list = []


def announce_model(model) -> None:
    """Run the :func:`on_release_registered` callbacks with ``model``: called when a
    :class:`Release`, or a ``Privatized(..., marginalize=False)`` node (whose latent true values
    a pymc_dp step may claim), is registered in ``model``."""
    for callback in list(_ON_REGISTER):
        callback(model)


def on_release_registered(callback) -> None:
    """Call ``callback(model)`` whenever a :class:`Release` is registered in a model.

    Adding the same callback twice has no effect.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> seen = []
    >>> on_release_registered(seen.append)
    >>> with pm.Model() as m:
    ...     x = pm.Bernoulli("x", p=0.5, shape=3)
    ...     _ = Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=1.0)
    >>> seen == [m]
    True
    >>> _ON_REGISTER.remove(seen.append)
    """
    if callback not in _ON_REGISTER:
        _ON_REGISTER.append(callback)


def is_random_variable(var) -> bool:
    """Whether ``var`` is the output of a random variable op (plain or symbolic)."""
    return var.owner is not None and isinstance(
        var.owner.op, RandomVariable | SymbolicRandomVariable
    )


def record_parents(statistic) -> list[Variable]:
    """Random variables that a statistic depends on directly (not through another RV).

    Parameters
    ----------
    statistic : TensorVariable
        A PyTensor expression.

    Returns
    -------
    list of TensorVariable
        The random variables met when walking up the graph of ``statistic``, without
        walking past any random variable (so the parents of the records are not included).
    """
    found = []
    stack = [statistic]
    seen = set()
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        if is_random_variable(var):  # the statistic itself may be the record variable (statistic=x)
            found.append(var)
            continue
        if var.owner is not None:
            stack.extend(var.owner.inputs)
    # keep a deterministic order (graph order)
    order = {v: i for i, v in enumerate(ancestors([statistic]))}
    return sorted(set(found), key=lambda v: order.get(v, 0))


class MechanismRV(SymbolicRandomVariable):
    """A symbolic RV whose value went through a mechanism, possibly clipped to bounds.

    Shared by :class:`ReleaseRV` and :class:`~pymc_dp.distributions.privatized.PrivatizedRV`:
    the mechanism (``op.mechanism``) and the censoring bounds (``op.lower``, ``op.upper``:
    float64 arrays broadcastable to the value, or None) are part of the Op's identity, so Ops
    with different noise laws or bounds are never merged.
    """

    inline_logprob = False

    def __init__(self, *args, mechanism: Mechanism, lower=None, upper=None, **kwargs):
        self.mechanism = mechanism
        self.lower = lower
        self.upper = upper
        super().__init__(*args, **kwargs)

    @property
    def censored(self) -> bool:
        """Whether the value was projected (clipped) to bounds."""
        return self.lower is not None or self.upper is not None

    def _bounds_key(self):
        return tuple(
            None if b is None else (b.shape, b.tobytes()) for b in (self.lower, self.upper)
        )

    def __eq__(self, other):
        return (
            super().__eq__(other)
            and self.mechanism == other.mechanism
            and self._bounds_key() == other._bounds_key()
        )

    def __hash__(self):
        return hash((super().__hash__(), self.mechanism, self._bounds_key()))


class ReleaseRV(MechanismRV):
    """Symbolic RV of ``statistic + noise``; the mechanism is kept as ``op.mechanism``."""

    _print_name = ("Release", "\\operatorname{Release}")

    @classmethod
    def rv_op(cls, statistic, *, mechanism: Mechanism, lower=None, upper=None, size=None, rng=None):
        if rng is not None:
            raise ValueError("Release draws its noise from the mechanism; rng= is not supported")
        statistic = pt.as_tensor_variable(statistic)
        # inner graph: dummy statistic input; the noise RV carries its own rng
        stat_ = statistic.type()
        noise = mechanism.noise_dist(size=stat_.shape)
        value_ = stat_ + noise
        if mechanism.integer:
            value_ = clip_to_bounds(value_.astype("int64"), lower, upper, "int64")
        else:
            value_ = clip_to_bounds(value_.astype("float64"), lower, upper, "float64")
        updates = collect_default_updates(inputs=[stat_], outputs=[value_])
        rngs = list(updates.keys())
        next_rngs = [updates[r] for r in rngs]
        sig_rngs = "".join(",[rng]" for _ in rngs)
        op = cls(
            inputs=[stat_, *rngs],
            outputs=[value_, *next_rngs],
            extended_signature=f"(){sig_rngs}->(){sig_rngs}",
            mechanism=mechanism,
            lower=lower,
            upper=upper,
        )
        return op(statistic, *rngs)


class Release(Distribution):
    r"""A released statistic of latent records: ``observed = statistic + noise``.

    Parameters
    ----------
    name : str
        Name of the model variable.
    statistic : TensorVariable
        Any PyTensor expression (scalar, vector or table of any shape) of latent record
        variables of the model,
        e.g. ``x.sum()``, ``pt.eq(x[:, None], pt.arange(K)).sum(0)``,
        ``(pt.clip(X, -1, 1) * y[:, None]).sum(0)``. Records are the rows (axis 0) of the
        record variables.
    mechanism : Mechanism
        The mechanism that produced the release (``pymc_dp.Laplace(...)`` etc.). Its noise law
        gives the likelihood; it is kept on the variable for privacy accounting.
    observed : array_like
        The released value(s), of the statistic's shape.
    lower, upper : float or array_like, optional
        Bounds of a projected (clipped) release, ``z = clip(T + noise, lower, upper)`` (Foulds
        et al. 2016, eq. 16): constants broadcastable to the statistic, ``±inf`` where a cell
        has no bound (names as in ``pm.Censored``). Integers for an integer mechanism;
        ``lower < upper`` in every cell; observed values must lie in ``[lower, upper]``
        (``ValueError`` naming ``observed`` otherwise). The mechanism must define its tail
        probabilities (``logcdf``/``logsf``; the built-in ones do, others get
        ``NotImplementedError``).

    Notes
    -----
    The log-likelihood is :math:`\sum_k \log \eta(z_k - T_k(x))` (Ju et al. 2022, the
    release density ``eta(z_dp | X)``). A censored (clipped) release contributes, per cell,
    the noise log-density where ``lower < z < upper``, ``log P(noise <= lower - T)`` where
    ``z == lower`` and ``log P(noise >= upper - T)`` where ``z == upper`` (the exact likelihood
    of the clipped value; for Laplace the boundary term equals the density at the clip point
    only while ``T`` is inside the bounds, for the other mechanisms never). Forward draws are
    clipped. ``pm.sample`` assigns
    :class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation` to the record variables
    once the step methods are registered (``pymc_dp.step_methods.register_step_methods()``).

    Observed values are refused (``ValueError`` naming ``observed``) when they are masked,
    ``None``, NaN, infinite, of another shape than the statistic or ``shape``/``dims``,
    fractional for an integer mechanism, or out of range (``|z| <= 2**53`` for integer
    mechanisms, ``1e300`` otherwise); integer values are kept exactly (int64, no int32 wrap).
    A ``pm.Data`` release is checked at ``pm.set_data`` and whenever the log-likelihood is
    evaluated.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.distributions.release import Release, released_mechanisms
    >>> with pm.Model() as m:
    ...     p = pm.Beta("p", 1.0, 1.0)
    ...     x = pm.Bernoulli("x", p=p, shape=20)
    ...     z = Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=7.3)
    >>> released_mechanisms(m)
    {'z': Laplace(epsilon=1, sensitivity=1.0)}
    >>> float(pm.logp(z, 7.3).eval({x: np.ones(20, dtype="int64")}))  # Laplace(b=1) at 7.3 - 20
    -13.393147...

    A count released through a Gaussian mechanism and clipped to ``[0, 20]``:

    >>> from scipy.special import log_ndtr
    >>> with pm.Model() as m2:
    ...     x = pm.Bernoulli("x", p=0.5, shape=20)
    ...     zc = Release("zc", x.sum(), pmdp.Gaussian(sigma=2.0), observed=0.0, lower=0, upper=20)
    >>> lp = float(pm.logp(zc, 0.0).eval({x: np.ones(20, dtype="int64")}))
    >>> bool(np.isclose(lp, log_ndtr((0.0 - 20) / 2.0), rtol=1e-14))
    True
    """

    rv_type = ReleaseRV
    rv_op = ReleaseRV.rv_op

    def __new__(cls, name, statistic, mechanism, *, lower=None, upper=None, **kwargs):
        # released values: finite, in range, integers for an integer mechanism (whose statistic
        # is checked in ``dist``), of the declared shape; pm.Data releases are also checked in
        # the graph, so pm.set_data gets the same refusals
        integer = getattr(mechanism, "integer", False)
        lo, hi = censoring_bounds(lower, upper, integer=integer)
        if "observed" in kwargs:
            _refuse_converted_data(kwargs["observed"], name)
            shape, fixed = declared_shape(kwargs, kwargs.get("model"))
            kwargs["observed"] = prepare_observed(
                kwargs["observed"], integer=integer, release=name, shape=shape, fixed=fixed
            )
            check_within_bounds(kwargs["observed"], lo, hi, name)
        kwargs.update(mechanism=mechanism, lower=lo, upper=hi, _release_name=name)
        rv = super().__new__(cls, name, statistic, **kwargs)
        # only releases registered in a model are announced (Release.dist is not)
        announce_model(modelcontext(None))
        return rv

    @classmethod
    def dist(cls, statistic, mechanism, *, lower=None, upper=None, _release_name=None, **kwargs):
        """Unregistered release variable (see the class docstring)."""
        if not isinstance(mechanism, Mechanism):
            raise TypeError(
                f"mechanism must be a pymc_dp Mechanism, got {mechanism!r} of type "
                f"{type(mechanism).__name__}"
            )
        statistic = pt.as_tensor_variable(statistic)
        check_integer_source(mechanism, statistic.dtype, "statistic")
        label = "the release" if _release_name is None else f"release {_release_name!r}"
        _refuse_zero_records(statistic, label)
        check_declared_sensitivity(statistic, mechanism, label)
        lo, hi = censoring_bounds(lower, upper, integer=mechanism.integer)
        if lo is not None or hi is not None:
            mechanism.check_tails("the release")
            _check_bound_shapes(lo, hi, statistic.type.shape)
        # The shape is the statistic's; PyMC passes the observed shape as ``shape``.
        shape = kwargs.pop("shape", None)
        kwargs.pop("size", None)
        if isinstance(shape, tuple | list):
            static = statistic.type.shape
            known = [_as_int(o) for o in shape]
            if len(shape) != len(static) or any(
                k is not None and s is not None and k != s
                for k, s in zip(known, static, strict=True)
            ):
                raise ValueError(
                    f"the observed release has shape {tuple(shape)} but the statistic has "
                    f"shape {static}"
                )
        return super().dist([statistic], mechanism=mechanism, lower=lo, upper=hi, **kwargs)


def _refuse_zero_records(statistic, label: str) -> None:
    """``ValueError`` naming the statistic when it reads a record variable with no records."""
    for rv in record_parents(statistic):
        n = rv.type.shape[0] if rv.type.ndim else None
        if n == 0:
            raise ValueError(
                f"the statistic of {label} reads the record variable {rv.name!r} of shape "
                f"{tuple(rv.type.shape)}, which holds no records: a release of an empty data set "
                "carries no information about them; give the records at least one row, or "
                "leave the release out of the model"
            )


# pm.Data containers whose value PyMC converted from something that is not a real number
# (a complex number loses its imaginary part, a string such as "3" becomes 3.0, True becomes
# 1.0): container -> (original dtype, the converted array PyMC stored)
_CONVERTED_DATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _lossy_kind(value):
    """The numpy dtype of ``value`` when it has no dtype of its own and is not real numbers."""
    if hasattr(value, "dtype") or isinstance(value, Variable):
        return None
    try:
        arr = np.asarray(value)
    except Exception:  # e.g. ragged nested lists: PyMC refuses them itself
        return None
    return arr.dtype if arr.dtype.kind not in "iuf" else None


def _data_hook(original):
    def Data(name, value, *args, **kwargs):
        shared = original(name, value, *args, **kwargs)
        dtype = _lossy_kind(value)
        if dtype is not None:
            _CONVERTED_DATA[shared] = (dtype, shared.get_value(borrow=True))
        return shared

    Data.__doc__ = original.__doc__
    Data.__wrapped__ = original
    return Data


def _install_data_hook() -> None:
    """Make ``pm.Data`` remember containers built from complex, string or boolean values."""
    import pymc
    import pymc.data

    from pymc_dp._pymc_hooks import wrap_module_function

    if getattr(pymc.data.Data, "_pymc_dp_hook", False):
        return
    wrap_module_function([pymc.data, pymc], "Data", _data_hook(pymc.data.Data))


def _refuse_converted_data(observed, release: str) -> None:
    """``TypeError`` naming ``observed`` when the release's ``pm.Data`` was built from complex
    numbers, strings or booleans (PyMC stored them as floats: ``1+2j`` as 1.0, ``"3"`` as 3.0)."""
    if not isinstance(observed, Variable):
        return
    for var in ancestors([observed]):
        entry = _CONVERTED_DATA.get(var) if isinstance(var, SharedVariable) else None
        if entry is not None and var.get_value(borrow=True) is entry[1]:
            raise TypeError(
                f"observed must hold real numbers (integers or floats), but the pm.Data "
                f"{var.name!r} observed by release {release!r} was built from values of dtype "
                f"{entry[0]} (PyMC stored them as {var.dtype}, e.g. a complex number loses its "
                "imaginary part and the string '3' becomes 3.0); pass the released numbers, "
                "e.g. pm.Data(name, np.asarray(values, dtype='float64'))"
            )


_install_data_hook()


def _as_bound(name: str, value, integer: bool):
    """A censoring bound as a float64 array (``None`` stays ``None``); ``±inf`` = no bound."""
    if value is None:
        return None
    if isinstance(value, Variable):
        raise TypeError(f"{name} must be a constant (number or array), got a PyTensor variable")
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers, got dtype {arr.dtype} ({value!r})")
    arr = arr.astype(np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    fin = np.isfinite(arr)
    if integer and np.any(arr[fin] != np.round(arr[fin])):
        raise ValueError(
            f"{name} must be integers for an integer mechanism (its releases are integers), "
            f"got {value!r}"
        )
    if np.any(np.abs(arr[fin]) > 2.0**53):
        raise ValueError(f"{name} must lie in [-2**53, 2**53] (or be ±inf), got {value!r}")
    return arr


def censoring_bounds(lower, upper, *, integer: bool):
    """Validated ``(lower, upper)`` of a censored release (float64 arrays or ``None``).

    Raises
    ------
    TypeError, ValueError
        Naming ``lower``/``upper``: not real numbers, NaN, fractional for an integer mechanism,
        or ``lower >= upper`` somewhere.

    Examples
    --------
    >>> censoring_bounds(0, [3, 5], integer=True)
    (array(0.), array([3., 5.]))
    >>> censoring_bounds(2.0, 1.0, integer=False)
    Traceback (most recent call last):
    ...
    ValueError: lower must be < upper in every cell, got lower=2.0, upper=1.0
    """
    lo = _as_bound("lower", lower, integer)
    hi = _as_bound("upper", upper, integer)
    if lo is not None and hi is not None:
        try:
            bad = np.any(lo >= hi)
        except ValueError:
            raise ValueError(
                f"lower (shape {lo.shape}) and upper (shape {hi.shape}) do not broadcast"
            ) from None
        if bad:
            raise ValueError(
                f"lower must be < upper in every cell, got lower={lower!r}, upper={upper!r}"
            )
    return lo, hi


def _check_bound_shapes(lo, hi, static) -> None:
    """Bounds must broadcast to the statistic without enlarging it."""
    for name, b in (("lower", lo), ("upper", hi)):
        if b is None:
            continue
        ok = b.ndim <= len(static) and all(
            d == 1 or s is None or d == s for d, s in zip(b.shape[::-1], static[::-1], strict=False)
        )
        if not ok:
            raise ValueError(
                f"{name} of shape {b.shape} does not broadcast to the statistic's shape {static}"
            )


def check_within_bounds(observed, lo, hi, release: str) -> None:
    """``ValueError`` naming ``observed`` when a concrete released value lies outside
    ``[lower, upper]`` (a clipped release never does)."""
    values = observed
    if isinstance(values, Variable):
        values = values.data if isinstance(values, Constant) else None
        if values is None and hasattr(observed, "get_value"):
            values = observed.get_value()
    if values is None:
        return
    values = np.asarray(values, dtype=np.float64)
    for name, b, out in (("lower", lo, np.less), ("upper", hi, np.greater)):
        if b is not None:
            try:
                bad = out(values, b)
            except ValueError:
                raise ValueError(
                    f"{name} of shape {b.shape} does not broadcast to the observed release "
                    f"{release!r} of shape {values.shape}"
                ) from None
            if np.any(bad):
                raise ValueError(
                    f"observed values of release {release!r} lie outside [lower, upper] (e.g. "
                    f"{values[np.nonzero(bad)][0] if values.ndim else values!r} beyond "
                    f"{name}); a projected release is always within its bounds"
                )


def clip_to_bounds(value, lower, upper, dtype: str):
    """``value`` (PyTensor) clipped to the constant bounds (``None``: no bound; ``±inf``: no
    bound in that cell), kept in ``dtype``.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> clip_to_bounds(pt.as_tensor(np.array([-2, 5, 9])), np.array(0.0), None, "int64").eval()
    array([0, 5, 9])
    """
    if lower is None and upper is None:
        return value
    big = np.float64(2.0**62) if str(dtype).startswith("int") else np.inf
    lo = -big if lower is None else np.where(np.isinf(lower), -big, lower)
    hi = big if upper is None else np.where(np.isinf(upper), big, upper)
    lo_c = pt.as_tensor_variable(np.asarray(lo).astype(dtype))
    hi_c = pt.as_tensor_variable(np.asarray(hi).astype(dtype))
    return pt.minimum(pt.maximum(value, lo_c), hi_c).astype(dtype)


def _as_int(value):
    """``value`` as an int if it is a concrete integer, else None (symbolic dims)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def censored_logp_pt(mechanism, value, resid, lower=None, upper=None):
    """Per-cell log-likelihood of released ``value`` with residual ``resid = value - T``
    (PyTensor, float64): the noise log-density, ``log P(noise <= resid)`` where ``value ==
    lower``, ``log P(noise >= resid)`` where ``value == upper``, and ``-inf`` outside
    ``[lower, upper]``. ``lower``/``upper`` are constant arrays or ``None``.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> v = pt.as_tensor(np.array([0.0, 1.0, 3.0]))
    >>> lp = censored_logp_pt(Laplace(scale=1.0), v, v - 1.0, np.array(0.0), np.array(3.0)).eval()
    >>> bool(np.allclose(lp, [np.log(0.5) - 1.0, -np.log(2.0), np.log(0.5) - 2.0]))
    True
    """
    lp = mechanism.logpdf_pt(resid)
    if lower is not None:  # at the lower bound: log P(noise <= lower - T)
        lo = pt.as_tensor_variable(np.asarray(lower, np.float64))
        lp = pt.switch(pt.eq(value, lo), mechanism.logcdf_pt(resid), lp)
        lp = pt.switch(pt.lt(value, lo), -np.inf, lp)
    if upper is not None:  # at the upper bound: log P(noise >= upper - T)
        hi = pt.as_tensor_variable(np.asarray(upper, np.float64))
        lp = pt.switch(pt.eq(value, hi), mechanism.logsf_pt(resid), lp)
        lp = pt.switch(pt.gt(value, hi), -np.inf, lp)
    return lp


@_logprob.register(ReleaseRV)
def _release_logp(op, values, statistic, *rngs, **kwargs):
    [value] = values
    # the residual in float64: an int64 difference could wrap, and every allowed release
    # (|z| <= 2**53 for integer mechanisms) is exact in float64
    v = pt.cast(value, "float64")
    resid = v - pt.cast(statistic, "float64")
    return censored_logp_pt(op.mechanism, v, resid, op.lower, op.upper)


@_support_point.register(ReleaseRV)
def _release_support_point(op, rv, statistic, *rngs):
    return pt.cast(statistic, rv.dtype)


def is_release(var) -> bool:
    """Whether ``var`` is a :class:`Release` variable."""
    return var.owner is not None and isinstance(var.owner.op, ReleaseRV)


def released_mechanisms(model) -> dict[str, Mechanism]:
    """The mechanisms of the releases in ``model``, by variable name (for privacy accounting).

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.distributions.release import Release, released_mechanisms
    >>> with pm.Model() as m:
    ...     x = pm.Bernoulli("x", p=0.3, shape=5)
    ...     _ = Release("s", x.sum(), pmdp.Laplace(epsilon=0.5), observed=2.0)
    >>> released_mechanisms(m)["s"].epsilon
    0.5
    """
    out = {}
    for rv in [*model.observed_RVs, *model.free_RVs]:
        if is_release(rv):
            out[rv.name] = rv.owner.op.mechanism
    return out
