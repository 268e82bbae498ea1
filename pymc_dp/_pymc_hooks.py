"""Wrapping a PyMC module function where PyMC has no registry for what pymc_dp adds.

Used by :func:`pymc_dp.log_likelihood.install_pymc_hook` and
:func:`pymc_dp.diagnostics.install_convergence_hook`.
"""

from __future__ import annotations

__all__ = ["wrap_module_function"]


def wrap_module_function(modules, name, wrapper):
    """Replace function ``name`` by ``wrapper`` in each of ``modules`` (the defining module first,
    then modules that imported it by name), once.

    Returns the function it replaced, or None when ``wrapper``'s kind is already installed
    (idempotent: a second call leaves everything as it is).

    Examples
    --------
    >>> import types
    >>> mod = types.SimpleNamespace(f=lambda: "pymc")
    >>> def wrapped():
    ...     return "pymc_dp after " + original()
    >>> original = wrap_module_function([mod], "f", wrapped)
    >>> mod.f(), wrap_module_function([mod], "f", wrapped)
    ('pymc_dp after pymc', None)
    """
    current = getattr(modules[0], name)
    if getattr(current, "_pymc_dp_hook", False):
        return None
    wrapper._pymc_dp_hook = True
    for module in modules:
        setattr(module, name, wrapper)
    return current
