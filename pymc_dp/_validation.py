"""Eager, plain-Python validation of privacy parameters.

Privacy-critical checks never go through ``check_parameters`` (users can switch that off with
``check_bounds=False``). Each check is one *positive* predicate, so that NaN fails it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "as_positive_finite",
    "as_positive_int",
    "as_unit_open",
    "exactly_one",
]


def _as_real(name: str, value) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}"
        )
    return float(value)


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
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
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
