"""Where pymc_dp meets PyMC internals that have no public extension point.

:func:`wrap_module_function` wraps a PyMC module function where PyMC has no registry for what
pymc_dp adds (used by :func:`pymc_dp.log_likelihood.install_pymc_hook` and
:func:`pymc_dp.diagnostics.install_convergence_hook`). :func:`forget_initial_point` keeps a
step from holding the initial point it was built from.
"""

from __future__ import annotations

__all__ = ["ForgetsInitialPoint", "forget_initial_point", "wrap_module_function"]


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


def forget_initial_point(step) -> None:
    """Drop the ``initial_point`` that PyMC's ``BlockedStep.__new__`` keeps with a step.

    PyMC stores every step's constructor arguments (for ``__getnewargs_ex__``, so that a pickled
    step is re-created by ``__new__``, which reads only the variables and ``blocked``). The
    initial point among them holds every value variable, records included: 8 bytes per int64
    record for as long as the step lives, and pickled with the step for every worker. pymc_dp's
    steps read it only while they are built.

    Examples
    --------
    >>> import types
    >>> step = types.SimpleNamespace(_BlockedStep__newargs=((["x"],), {"initial_point": {"x": 1}}))
    >>> forget_initial_point(step)
    >>> step._BlockedStep__newargs
    ((['x'],), {'initial_point': None})
    """
    newargs = getattr(step, "_BlockedStep__newargs", None)
    if not (isinstance(newargs, tuple) and len(newargs) == 2 and isinstance(newargs[1], dict)):
        return
    args, kwargs = newargs
    if kwargs.get("initial_point") is not None:
        step._BlockedStep__newargs = (args, {**kwargs, "initial_point": None})


class ForgetsInitialPoint:
    """Mixin for pymc_dp's step classes (before ``BlockedStep`` in the bases): the step, or
    each step of the ``CompoundStep`` that ``BlockedStep.__new__`` may return, does not keep
    the initial point (:func:`forget_initial_point`). ``__init__`` still receives it."""

    def __new__(cls, *args, **kwargs):
        step = super().__new__(cls, *args, **kwargs)
        for s in getattr(step, "methods", [step]):
            forget_initial_point(s)
        return step
