"""Checks of released values and of what a mechanism can have released.

PyMC casts observed data to the variable's dtype: a fractional value observed on an integer
variable would be truncated silently (3.5 -> 3), a NaN would become a missing value to impute,
and integer data are stored as int32, so counts beyond ``2**31`` wrapped (3e9 became
-1,294,967,296). None of these is a meaningful release, so:

* concrete observed data (arrays, numbers, constants) are checked when the variable is built
  (:func:`prepare_observed`) and handed to PyMC as float64, which holds every allowed value
  exactly; PyMC then casts them to the variable's own dtype (int64 for integer releases);
* symbolic observed data (``pm.Data`` containers and expressions of them) are checked *in the
  graph* (:func:`checked_observed`): every evaluation of the log-likelihood (``pm.sample``,
  ``compile_logp``, the data-augmentation step reading the release) validates the current value,
  so a later ``pm.set_data`` gets the same refusal as the build, as a ``ValueError`` naming the
  data and the release;
* :func:`install_exact_integer_data` makes PyMC keep integer data that do not fit int32 in
  their own (wider) dtype instead of wrapping them (``pm.Data``, ``observed=``,
  ``pm.set_data``). Data that fit int32 are stored as before, so models whose data were right
  are unchanged.

Representable range (documented bounds):

* integer releases: ``|z| <= 2**53`` (:data:`INTEGER_RELEASE_BOUND`), every such integer is
  exact in float64, in which the likelihoods and the data-augmentation kernels compute;
* float releases: ``|z| <= 1e300`` (:data:`FLOAT_RELEASE_BOUND`), as for
  :meth:`~pymc_dp.mechanisms.base.Mechanism.release`.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.raise_op import CheckAndRaise

from pymc_dp.mechanisms.base import Mechanism

__all__ = [
    "FLOAT_RELEASE_BOUND",
    "INTEGER_RELEASE_BOUND",
    "check_integer_source",
    "check_observed_shape",
    "check_released_values",
    "checked_observed",
    "declared_shape",
    "install_exact_integer_data",
    "install_set_data_checks",
    "prepare_observed",
]

#: largest magnitude of an integer release (every integer up to it is exact in float64)
INTEGER_RELEASE_BOUND = 2**53
#: largest magnitude of a float release
FLOAT_RELEASE_BOUND = 1e300


def _bound(integer: bool):
    return INTEGER_RELEASE_BOUND if integer else FLOAT_RELEASE_BOUND


def _bound_text(integer: bool) -> str:
    return "2**53" if integer else "1e+300"


def _is_integer_dtype(dtype) -> bool:
    return str(dtype).startswith(("int", "uint")) or str(dtype) == "bool"


def check_integer_source(mechanism: Mechanism, dtype, argument: str) -> None:
    """An integer mechanism releases integer values: refuse a non-integer ``argument``."""
    if mechanism.integer and not _is_integer_dtype(dtype):
        raise TypeError(
            f"{argument} has dtype {dtype}, but the {type(mechanism).__name__} mechanism adds "
            f"integer noise to integer values; use an integer-valued {argument}, or a continuous "
            "mechanism (pmdp.Laplace, pmdp.Gaussian)"
        )


def _values(observed):
    if observed is None:
        return None
    if isinstance(observed, SharedVariable):
        return observed.get_value()
    if isinstance(observed, Constant):
        return observed.data
    if isinstance(observed, Variable):
        return None  # symbolic: checked in the graph
    return observed


def _check_array(values, *, integer: bool, where: str = "") -> np.ndarray:
    """Validate concrete released values; return them as float64 (exact within the bounds).

    Messages start with ``observed`` and end with ``where`` (e.g. which ``pm.Data``).
    """
    what = "observed"
    if np.ma.isMaskedArray(values) and np.ma.getmaskarray(values).any():
        raise ValueError(
            f"{what} is a masked array with masked entries; a release has no missing values "
            "(drop those entries, or model them separately)" + where
        )
    if hasattr(values, "to_numpy") and hasattr(values, "isnull"):  # pandas
        values = values.to_numpy()
    values = np.asarray(np.ma.getdata(values))
    # by kind: timedelta64 ("m") is a subtype of np.integer
    if values.dtype.kind not in "iuf":
        raise TypeError(
            f"{what} must hold real numbers (integers or floats), got dtype {values.dtype}" + where
        )
    bound = _bound(integer)
    if np.issubdtype(values.dtype, np.integer):
        if values.size and (
            int(values.max()) > INTEGER_RELEASE_BOUND or int(values.min()) < -INTEGER_RELEASE_BOUND
        ):
            raise ValueError(
                f"{what} holds integers of magnitude beyond 2**53, which float64 does not hold "
                "exactly; a release must lie within [-2**53, 2**53]" + where
            )
        return values.astype(np.float64)
    values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"{what} holds NaN or infinite values; a release has no missing values (drop them, "
            "or model those entries separately)" + where
        )
    if integer and np.any(values != np.round(values)):
        bad = values[values != np.round(values)].ravel()[:3]
        raise ValueError(
            f"{what} must hold integers for an integer-valued release, got e.g. {bad.tolist()}"
            + where
        )
    if np.any(np.abs(values) > bound):
        raise ValueError(
            f"{what} holds values of magnitude beyond {_bound_text(integer)}; a "
            f"{'integer' if integer else 'float'} release must lie within "
            f"[-{_bound_text(integer)}, {_bound_text(integer)}]" + where
        )
    return values


def check_released_values(observed, *, integer: bool) -> None:
    """Released values must be finite numbers within range, integers for integer releases.

    Symbolic values (other than shared variables and constants) are not checked here; see
    :func:`checked_observed`.
    """
    values = _values(observed)
    if values is not None:
        _check_array(values, integer=integer)


def _data_name(var) -> str:
    names = [v.name for v in _leaf_inputs(var) if v.name]
    return ", ".join(repr(n) for n in names) if names else "observed"


def _leaf_inputs(var):
    from pytensor.graph.traversal import graph_inputs

    return [v for v in graph_inputs([var]) if isinstance(v, SharedVariable)]


def checked_observed(observed: Variable, *, integer: bool, release: str, shape=None):
    """``observed`` as float64, validated whenever it is evaluated.

    Parameters
    ----------
    observed : Variable
        Symbolic observed data (a ``pm.Data`` container or an expression of containers).
    integer : bool
        Whether the release is integer-valued.
    release : str
        Name of the release variable (for the error message).
    shape : tuple of int, optional
        The variable's declared shape; the data must keep it.

    Returns
    -------
    TensorVariable
        float64 values; evaluating it raises ``ValueError`` naming the data and the release
        when a value is NaN, infinite, out of range, or fractional for an integer release.
    """
    x = pt.cast(pt.as_tensor_variable(observed), "float64")
    bound = np.float64(_bound(integer))
    conds = [pt.all(pt.isfinite(x)), pt.all(pt.le(pt.abs(x), bound))]
    kind = "finite values"
    if integer:
        conds.append(pt.all(pt.eq(pt.floor(x), x)))
        kind = "finite integers"
    shape_text = ""
    if shape is not None:
        if len(shape) != x.type.ndim:
            raise ValueError(
                f"observed data of release {release!r} has ndim {x.type.ndim}, but the variable "
                f"has shape {tuple(shape)}"
            )
        conds.extend(pt.eq(x.shape[i], int(s)) for i, s in enumerate(shape))
        shape_text = f" and keep the shape {tuple(int(s) for s in shape)}"
    msg = (
        f"observed data {_data_name(observed)} of release {release!r} must hold {kind} of "
        f"magnitude at most {_bound_text(integer)}{shape_text} (a release has no missing, "
        "fractional or out-of-range values); pm.set_data gave a value outside that: set the "
        "released values"
    )
    return CheckAndRaise(ValueError, msg)(x, *conds)


def prepare_observed(observed, *, integer: bool, release: str, shape=None, fixed: bool = False):
    """Checked observed data to hand to PyMC (an explicit ``None`` is refused).

    Concrete data are validated now and returned as a float64 array (exact within the bounds;
    PyMC casts it to the variable's dtype, int64 for integer releases, without loss). Symbolic
    data are validated now at their current value and wrapped by :func:`checked_observed`.

    Parameters
    ----------
    observed : array_like, Variable or None
        The ``observed=`` argument.
    integer : bool
        Whether the release is integer-valued.
    release : str
        Name of the release variable (for messages).
    shape : tuple of int, optional
        The declared shape (:func:`declared_shape`); the data must have it.
    fixed : bool
        Whether ``shape`` also binds later values of symbolic data (``shape=``/``size=``).
    """
    if observed is None:
        raise ValueError(
            f"observed=None given to release {release!r}: a release conditions on its released "
            "values; pass them, or omit observed to declare an unobserved (simulated) release"
        )
    if isinstance(observed, Variable) and not isinstance(observed, Constant):
        values = _values(observed)
        if values is not None:
            _check_array(
                values, integer=integer, where=f" (data {_data_name(observed)} of {release!r})"
            )
            if shape is not None:
                check_observed_shape(np.shape(values), shape, release)
        if isinstance(observed, SharedVariable):
            _RELEASE_DATA.setdefault(observed, []).append((release, integer))
        return checked_observed(
            observed, integer=integer, release=release, shape=shape if fixed else None
        )
    values = _check_array(_values(observed), integer=integer)
    if shape is not None:
        check_observed_shape(values.shape, shape, release)
    return values


def check_observed_shape(observed_shape, shape, release: str) -> None:
    """Refuse observed data whose shape differs from the variable's declared ``shape``."""
    observed_shape = tuple(int(s) for s in observed_shape)
    shape = tuple(int(s) for s in shape)
    if observed_shape != shape:
        raise ValueError(
            f"observed data of {release!r} has shape {observed_shape}, but the variable has "
            f"shape {shape} (from shape=, size= or dims=); pass one released value per entry"
        )


def declared_shape(kwargs, model=None):
    """The concrete shape declared by ``shape=``, ``size=`` or ``dims=``, and whether it is fixed.

    Returns ``(shape, fixed)``: ``shape`` is a tuple of ints or None (nothing declared, or not
    concrete); ``fixed`` is True for ``shape=``/``size=`` (a ``pm.Data`` release must keep it),
    False for ``dims=`` (``pm.set_data`` may resize a dimension together with its data).
    """
    shape = kwargs.get("shape")
    if shape is None:
        shape = kwargs.get("size")
    if shape is not None:
        if isinstance(shape, int | np.integer):
            shape = (shape,)
        try:
            return tuple(int(s) for s in shape), True
        except (TypeError, ValueError):
            return None, False
    dims = kwargs.get("dims")
    if dims is None:
        return None, False
    import pymc as pm

    dims = (dims,) if isinstance(dims, str) else tuple(dims)
    try:
        model = pm.modelcontext(model)
        return tuple(int(model.dim_lengths[d].eval()) for d in dims), False
    except (KeyError, TypeError, ValueError):
        return None, False


# ---- PyMC's integer narrowing ---------------------------------------------------------------

_INT32 = np.iinfo(np.int32)


def install_exact_integer_data() -> None:
    """Make PyMC keep integer data that do not fit int32 exactly (idempotent).

    ``pymc.pytensorf.convert_data`` (used by ``observed=``, ``pm.Data`` and ``pm.set_data``)
    casts every integer array to int32, wrapping values beyond ``2**31`` silently. After this
    call, integer arrays that fit int32 are still cast to int32 (unchanged behaviour), and those
    that do not keep their own dtype; symbolic int64 data are no longer narrowed in the graph.
    """
    import pymc.pytensorf as pf

    original = pf.smarttypeX
    if getattr(original, "_pymc_dp_exact", False):
        return

    def smarttypeX(x):
        dtype = str(getattr(x, "dtype", ""))
        if dtype.startswith(("int", "uint")):
            if isinstance(x, Variable):
                return x if np.dtype(dtype).itemsize > 4 else original(x)
            arr = np.ma.getdata(x)
            if np.size(arr) and (int(np.max(arr)) > _INT32.max or int(np.min(arr)) < _INT32.min):
                return x
        return original(x)

    smarttypeX._pymc_dp_exact = True
    pf.smarttypeX = smarttypeX


# pm.Data containers that are the observed data of a release -> [(release name, integer)]
_RELEASE_DATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_new_data(shared, values) -> None:
    """The build-time refusals for a value about to be set on a release's ``pm.Data``."""
    for release, integer in _RELEASE_DATA.get(shared, ()):
        where = f" (pm.set_data of data {shared.name!r}, observed by release {release!r})"
        arr = _check_array(values, integer=integer, where=where)
        dtype = np.dtype(shared.type.dtype)
        if np.issubdtype(dtype, np.integer) and arr.size:
            info = np.iinfo(dtype)
            if arr.max() > info.max or arr.min() < info.min:
                raise ValueError(
                    f"observed data {shared.name!r} of release {release!r} is stored as {dtype} "
                    f"(pm.Data stores integers that fit int32 as int32), which cannot hold "
                    f"{arr[(arr > info.max) | (arr < info.min)][:3].tolist()}; create it from "
                    "float64 values, pm.Data(name, np.asarray(values, dtype='float64')), which "
                    "hold every integer up to 2**53 exactly"
                )


def install_set_data_checks() -> None:
    """Make ``Model.set_data`` apply the build-time refusals to a release's data (idempotent).

    PyMC converts the new values before storing them (NaN entries become a masked array,
    integers beyond int32 wrap); the values are checked before that conversion, and a refusal
    is a ``ValueError`` naming the data and the release. Data of other variables are set
    exactly as before. The release's graph also checks the stored value at every evaluation
    (:func:`checked_observed`), which covers ``SharedVariable.set_value`` too.
    """
    from pymc.model.core import Model

    original = Model.set_data
    if getattr(original, "_pymc_dp_checked", False):
        return

    def set_data(self, name, values, coords=None):
        shared = self.named_vars.get(name) if isinstance(name, str) else None
        if shared is not None and shared in _RELEASE_DATA:
            _check_new_data(shared, values)
        return original(self, name, values, coords)

    set_data.__doc__ = original.__doc__
    set_data._pymc_dp_checked = True
    Model.set_data = set_data


install_exact_integer_data()
install_set_data_checks()
