r"""JAX implementations of pymc_dp's Ops, for PyTensor's JAX backend and PyMC's JAX samplers.

With them every Privatized model (and the Skellam and Bessel distributions) samples under
``pm.sample(nuts_sampler="numpyro")`` and ``nuts_sampler="blackjax"``, which compile the
model's log-density with JAX (on CPU, or on a GPU where jax has one). The functions are in
:mod:`pymc_dp.jax.special` and :mod:`pymc_dp.jax.poisson_noise`; their registration with
PyTensor's ``jax_funcify``, with the Ops' analytic derivatives, in :mod:`pymc_dp.jax.dispatch`.

Importing this package does not import jax (a slow import): it calls :func:`install`, which
registers the JAX functions at once if PyTensor's JAX dispatch is already imported, and
otherwise as soon as it is (an import hook on ``pytensor.link.jax.dispatch``, which PyMC's
JAX samplers and ``mode="JAX"`` import), so nothing is paid by users of the default backend.

JAX must run in float64 (``jax_enable_x64``): PyTensor's JAX dispatch turns it on when
``floatX`` is float64 (the default); in float32 mode the pymc_dp Ops refuse to be compiled by JAX
(``RuntimeError``) rather than lose their accuracy.

Examples
--------
>>> import sys
>>> install()  # done on import (idempotent); registers now or when JAX is first used
>>> import pytensor.link.jax.dispatch  # e.g. by pm.sample(nuts_sampler="numpyro")
>>> is_registered()
True
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

__all__ = ["install", "is_registered", "register_now"]

_TARGET = "pytensor.link.jax.dispatch"
_state = {"registered": False}


def register_now() -> None:
    """Import jax and register the JAX functions with PyTensor (idempotent)."""
    if _state["registered"]:
        return
    # a plain import: when pymc_dp.jax.dispatch itself is what imports PyTensor's JAX
    # dispatch (and so fires the hook), it is still initialising here, and registers at
    # its own end
    import pymc_dp.jax.dispatch  # noqa: F401  (registers on import)


def is_registered() -> bool:
    """Whether the JAX functions are registered with PyTensor's ``jax_funcify``."""
    return _state["registered"]


class _Loader(importlib.abc.Loader):
    """Runs the real loader of PyTensor's JAX dispatch package, then registers."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        register_now()


class _Finder(importlib.abc.MetaPathFinder):
    """Meta-path finder that only wraps the loader of ``pytensor.link.jax.dispatch``."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)  # once; also keeps find_spec below from recursing
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Register the JAX functions now if PyTensor's JAX dispatch is imported, else on import.

    Idempotent. Called by ``import pymc_dp``; it imports neither jax nor PyTensor's JAX
    dispatch. It registers at once the JAX-only graph rewrite of the truncated sums'
    windows (:mod:`pymc_dp.jax.static_window`, no jax import), which must be in place
    before a graph is rewritten for JAX, i.e. before the JAX dispatch is imported.
    """
    import pymc_dp.jax.static_window  # noqa: F401  (registers the rewrite on import)

    if _state["registered"]:
        return
    if _TARGET in sys.modules:
        register_now()
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
