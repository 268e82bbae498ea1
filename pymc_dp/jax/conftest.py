"""Doctest collection of :mod:`pymc_dp.jax` where jax is not installed: skipped, not errors.

The jax extra (``pip install pymc_dp[jax]``, part of ``dev``) is optional; without it these
modules cannot be imported, so ``pytest --doctest-modules`` leaves them out.
"""

from __future__ import annotations

import importlib.util


def _have_jax() -> bool:
    try:
        return importlib.util.find_spec("jax") is not None
    except (ImportError, ValueError):
        return False


collect_ignore = (
    [] if _have_jax() else ["__init__.py", "dispatch.py", "poisson_noise.py", "special.py"]
)
