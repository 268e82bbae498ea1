"""Checks of released values and of what a mechanism can have released, made eagerly.

PyMC casts observed data to the variable's dtype: a fractional value observed on an integer
variable would be truncated silently (3.5 -> 3), and a NaN would become a missing value to impute.
Neither is a meaningful release, so both are refused before the variable is built.
"""

from __future__ import annotations

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable

from pymc_dp.mechanisms.base import Mechanism

__all__ = ["check_integer_source", "check_released_values"]


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
        return np.asarray(observed.get_value())
    if isinstance(observed, Constant):
        return np.asarray(observed.data)
    if isinstance(observed, Variable):
        return None  # symbolic: cannot be checked here
    return np.asarray(observed)


def check_released_values(observed, *, integer: bool) -> None:
    """Released values must be finite numbers, and integers when the release is integer-valued."""
    values = _values(observed)
    if values is None:
        return
    if values.dtype == object or not np.issubdtype(values.dtype, np.number):
        raise TypeError(f"observed must hold numbers, got dtype {values.dtype}")
    if not np.all(np.isfinite(values)):
        raise ValueError(
            "observed holds NaN or infinite values; a release has no missing values (drop them, "
            "or model those entries separately)"
        )
    if integer and np.issubdtype(values.dtype, np.floating) and np.any(values != np.round(values)):
        bad = values[values != np.round(values)].ravel()[:3]
        raise ValueError(
            f"observed must hold integers for an integer-valued release, got e.g. {bad.tolist()}"
        )
