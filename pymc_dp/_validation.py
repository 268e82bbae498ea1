"""Eager, plain-Python validation of privacy parameters.

Privacy-critical checks never go through ``check_parameters`` (users can switch that off with
``check_bounds=False``). Each check is one *positive* predicate, so that NaN fails it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "INT_RANGE",
    "REAL_RANGE",
    "as_positive_finite",
    "as_positive_int",
    "as_release_values",
    "as_unit_open",
    "exactly_one",
]

#: integer mechanisms release values in [-INT_RANGE, INT_RANGE] (with noise below INT_RANGE in
#: magnitude the release stays inside int64, so nothing can wrap)
INT_RANGE = 2**62
#: float mechanisms release values in [-REAL_RANGE, REAL_RANGE] (with scales <= 1e300 the noise
#: stays below about 7.5e302 in magnitude, so the release is finite)
REAL_RANGE = 1e300


def _is_date_or_duration(value) -> bool:
    # np.timedelta64 subclasses np.signedinteger, so it passes isinstance(., numbers.Real)
    return isinstance(value, np.timedelta64 | np.datetime64)


def _as_real(name: str, value) -> float:
    if (
        isinstance(value, bool | np.bool_)
        or _is_date_or_duration(value)
        or not isinstance(value, numbers.Real)
    ):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} must be finite, got {value!r} (too large for a float)") from None


def as_bool(name: str, value) -> bool:
    """Return ``value`` as a bool if it is ``True`` or ``False`` (numpy's too), else raise
    ``TypeError`` naming ``name`` (``1``, ``"yes"`` or ``None`` are not taken as flags)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def as_positive_finite(name: str, value) -> float:
    """Return ``value`` as a float if it is finite and > 0, else raise naming ``name``."""
    x = _as_real(name, value)
    if math.isfinite(x) and x > 0.0:
        return x
    raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def as_unit_open(name: str, value) -> float:
    """Return ``value`` as a float if it lies in the open interval (0, 1), else raise."""
    x = _as_real(name, value)
    if math.isfinite(x) and 0.0 < x < 1.0:
        return x
    raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}")


def as_positive_int(name: str, value) -> int:
    """Return ``value`` as an int if it is an integer >= 1 (integral floats are refused)."""
    if (
        isinstance(value, bool | np.bool_)
        or _is_date_or_duration(value)
        or not isinstance(value, numbers.Integral)
    ):
        raise TypeError(
            f"{name} must be a positive integer, got {value!r} of type {type(value).__name__}"
        )
    v = int(value)
    if v >= 1:
        return v
    raise ValueError(f"{name} must be a positive integer, got {value!r}")


def exactly_one(owner: str, **given) -> str:
    """Return the name of the single argument that is not None; raise if zero or several are set."""
    set_ = [k for k, v in given.items() if v is not None]
    if len(set_) != 1:
        names = ", ".join(given)
        got = ", ".join(set_) if set_ else "none"
        raise ValueError(f"{owner} takes exactly one of ({names}); got {got}")
    return set_[0]


def _describe(x) -> str:
    return repr(x.item() if isinstance(x, np.generic) else x)


def as_release_values(values, *, integer: bool) -> np.ndarray:
    """Check the true values given to ``Mechanism.release`` and return them as int64 / float64.

    Accepted: arrays (or nested sequences, scalars) of real numbers with a numeric dtype:
    signed or unsigned integers, or floats. Integer mechanisms take integer dtypes or floats
    that are integers, within ``[-INT_RANGE, INT_RANGE]`` (``2**62``). Float mechanisms take
    finite values within ``[-REAL_RANGE, REAL_RANGE]`` (``1e300``) that float64 represents
    exactly (integers up to ``2**53`` in magnitude, any float64, narrower floats).

    Refused with ``TypeError`` naming ``values``: booleans (cast them with ``.astype(int)`` if a
    0/1 count is meant), complex numbers, strings and bytes, dates and durations
    (``datetime64``, ``timedelta64``), and object arrays (``None``, ``pandas.NA``, Python ints
    beyond int64). Refused with ``ValueError`` naming ``values`` and the offending value: masked
    entries of a masked array (a placeholder such as ``-999`` would be released as data), NaN,
    infinities, fractional values for integer mechanisms, and values outside the range.
    """
    if np.ma.isMaskedArray(values):
        if np.any(np.ma.getmaskarray(values)):
            raise ValueError(
                "values has masked entries; a mechanism releases every entry, so drop the "
                "missing ones (or fill them with a true value) before release"
            )
        values = np.ma.getdata(values)
    if isinstance(values, str | bytes):
        raise TypeError(f"values must be real numbers, got {type(values).__name__} {values!r}")
    try:
        arr = np.asarray(values)
    except (OverflowError, ValueError, TypeError) as err:
        raise TypeError(f"values must be an array of real numbers: {err}") from None
    kind = arr.dtype.kind
    if kind not in "iuf":
        what = {
            "b": "booleans (cast with .astype(int) if 0/1 counts are meant)",
            "c": "complex numbers (the imaginary part would be dropped)",
            "U": "strings",
            "S": "bytes",
            "M": "datetime64 values",
            "m": "timedelta64 values",
            "O": "Python objects (None, NA, integers beyond int64, ...)",
        }.get(kind, f"dtype {arr.dtype}")
        raise TypeError(f"values must be real numbers (int or float dtype), got {what}")
    if integer:
        if kind == "f":
            bad = ~np.isfinite(arr) | (arr != np.round(arr))
            if np.any(bad):
                raise ValueError(
                    "values must be integers for an integer mechanism, got "
                    f"{_describe(arr[bad].flat[0])}"
                )
            bad = np.abs(arr) > INT_RANGE
        elif kind == "u":
            bad = arr > np.uint64(INT_RANGE)
        else:
            bad = (arr > INT_RANGE) | (arr < -INT_RANGE)
        if np.any(bad):
            raise ValueError(
                f"values must lie in [-2**62, 2**62] (the range an int64 release can hold with "
                f"its noise), got {_describe(arr[bad].flat[0])}"
            )
        return arr.astype(np.int64)
    if kind in "iu":
        bad = arr > 2**53 if kind == "u" else (arr > 2**53) | (arr < -(2**53))
        if np.any(bad):
            raise ValueError(
                "values must be exactly representable as float64 (integers up to 2**53 in "
                f"magnitude), got {_describe(arr[bad].flat[0])}"
            )
        return arr.astype(np.float64)
    out = arr.astype(np.float64)
    bad = ~(np.abs(out) <= REAL_RANGE)  # NaN fails
    if arr.dtype.itemsize > 8:  # long double: refuse what float64 would round
        bad |= out != arr
    if np.any(bad):
        raise ValueError(
            f"values must be finite and within [-1e300, 1e300], exactly representable as "
            f"float64, got {_describe(arr[bad].flat[0])}"
        )
    return out
