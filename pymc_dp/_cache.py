"""Compile-cache keys, and the work that ``import pymc_dp`` defers to first use.

**Source key.** PyTensor keeps compiled numba functions on disk (in ``~/.pytensor``, shared by
every checkout and version of pymc_dp) under the cache key that an Op's numba lowering returns.
A key fixed by hand goes stale when a kernel changes and nobody bumps it: PyTensor then serves
the old compiled code. Every pymc_dp lowering therefore includes :data:`SOURCE_KEY`, a hash of
the package's own source files, so new code is never run as old code. It is computed on first
use (by the first lowering), not at import.

**Deferred work.** ``import pymc`` does not import PyTensor's numba backend
(``pytensor.link.numba.dispatch``, about half a second), nor SciPy's ``special``, ``stats``,
``optimize`` (together about 0.4 s), and compiles nothing. So that ``import pymc_dp`` stays close
to it:

* the numba lowerings of pymc_dp's Ops (``numba_funcify`` / ``numba_core_rv_funcify`` /
  ``register_scalar_funcify`` registrations) are made by functions decorated with
  :func:`numba_registration`; they run as soon as PyTensor's numba dispatch package has been
  imported, which PyTensor's numba linker does before it compiles anything (the first
  ``pytensor.function``, ``pm.sample``, ``pm.draw``...), or at once if it already is;
* a numba ufunc with explicit signatures (``numba.vectorize([...])``) compiles, or loads from
  numba's on-disk cache, every signature when it is built; :func:`lazy_vectorize` builds it on
  its first call instead, with the same signatures, the same ``cache=True`` and therefore the
  same cache files (next to the module, in ``__pycache__``; numba writes them atomically, so
  parallel pytest-xdist workers may build the same ufunc at once);
* SciPy's submodules are bound with :func:`lazy_module`, which imports the submodule on the
  first attribute access.

Plain ``numba.njit(cache=True)`` dispatchers are lazy already: they compile (or load from the
cache) on their first call.

Examples
--------
>>> import sys
>>> calls = []
>>> @numba_registration
... def _register():  # e.g. ``numba_core_rv_funcify.register(MyRV)(...)``
...     calls.append("registered")
>>> import pytensor.link.numba.dispatch  # what PyTensor's numba linker imports to compile
>>> calls
['registered']
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "SOURCE_INT",
    "SOURCE_KEY",
    "after_import",
    "lazy_module",
    "lazy_vectorize",
    "numba_registration",
]


def _source_key() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# computed at import, from the source that is being imported: a key computed later (at the first
# compilation) could pair code loaded before an edit with the hash of the edited files
#: hash of the package's source files (16 hex digits)
SOURCE_KEY: str = _source_key()
#: the same hash as an integer (random-variable cores need an int key)
SOURCE_INT: int = int(SOURCE_KEY, 16)


#: the package that PyTensor's numba linker imports before compiling a graph
NUMBA_DISPATCH = "pytensor.link.numba.dispatch"

_waiting: dict[str, list[Callable[[], None]]] = {}


def _is_loaded(name: str) -> bool:
    module = sys.modules.get(name)
    if module is None:
        return False
    spec = getattr(module, "__spec__", None)
    return not getattr(spec, "_initializing", False)


class _Loader(importlib.abc.Loader):
    """Runs the real loader of a watched module, then the callbacks waiting for it."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        for callback in _waiting.pop(module.__name__, []):
            callback()


class _Finder(importlib.abc.MetaPathFinder):
    """Meta-path finder that wraps the loader of the watched modules only."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _Loader):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_FINDER = _Finder()


def after_import(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once module ``name`` has been imported: now if it already is.

    The module is not imported here: an import hook (a ``sys.meta_path`` finder that wraps
    only that module's loader) runs the callback right after the module's first import.

    Parameters
    ----------
    name : str
        Full name of the module (e.g. ``"pytensor.link.numba.dispatch"``).
    callback : callable
        Called without arguments, once.

    Examples
    --------
    >>> seen = []
    >>> after_import("json", lambda: seen.append("json"))  # json is imported by now
    >>> seen
    ['json']
    """
    if _is_loaded(name):
        callback()
        return
    _waiting.setdefault(name, []).append(callback)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def numba_registration(register: Callable[[], None]) -> Callable[[], None]:
    """Decorator: run ``register()`` once PyTensor's numba dispatch is imported (now if it is).

    ``register`` imports what it needs from ``pytensor.link.numba.dispatch`` inside its body
    and registers numba lowerings there; it is returned unchanged.

    Examples
    --------
    >>> done = []
    >>> @numba_registration
    ... def _register():
    ...     from pytensor.link.numba.dispatch.basic import numba_funcify  # noqa: F401
    ...     done.append(True)
    >>> import pytensor.link.numba.dispatch
    >>> done
    [True]
    """
    after_import(NUMBA_DISPATCH, register)
    return register


class _LazyModule:
    """Stands for module ``name``, imported on the first attribute access."""

    def __init__(self, name: str):
        self.__name = name
        self.__module = None

    def __getattr__(self, attr):
        module = self.__module
        if module is None:
            module = self.__module = importlib.import_module(self.__name)
        return getattr(module, attr)

    def __repr__(self):
        state = "imported" if self.__module is not None else "not imported yet"
        return f"<lazy module {self.__name!r} ({state})>"


def lazy_module(name: str):
    """A stand-in for module ``name`` that imports it on the first attribute access.

    Used for module-level names such as ``special = lazy_module("scipy.special")``, so that
    ``special.gammaln(...)`` inside a function imports SciPy's submodule when first called.
    Nothing is put in ``sys.modules``: ``import scipy.special`` elsewhere is unaffected.

    Parameters
    ----------
    name : str
        Full name of the module.

    Returns
    -------
    object
        Forwards every attribute access to the (then imported) module.

    Examples
    --------
    >>> special = lazy_module("scipy.special")
    >>> float(special.gammaln(5.0))  # log(4!)
    3.178053830347...
    """
    return _LazyModule(name)


class _LazyUFunc:
    """A ``numba.vectorize(signatures, **options)(py_func)`` ufunc built on its first use."""

    def __init__(self, py_func, signatures, options):
        self._py_func = py_func
        self._signatures = list(signatures)
        self._options = dict(options)
        self._ufunc = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__module__ = py_func.__module__

    def built(self) -> bool:
        """Whether the ufunc has been built (its signatures compiled or loaded)."""
        return self._ufunc is not None

    def ufunc(self):
        """The numba ufunc, built now if it is not yet."""
        if self._ufunc is None:
            import numba

            self._ufunc = numba.vectorize(self._signatures, **self._options)(self._py_func)
        return self._ufunc

    def __call__(self, *args, **kwargs):
        return self.ufunc()(*args, **kwargs)

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.ufunc(), attr)

    def __reduce__(self):
        # pickled by reference, as a module-level numba ufunc is
        return self.__qualname__

    def __repr__(self):
        state = "built" if self.built() else "not built yet"
        return f"<lazy numba ufunc {self.__qualname__} ({state})>"


def lazy_vectorize(signatures, **options):
    """Like ``numba.vectorize(signatures, **options)``, but compiled on the first call.

    Parameters
    ----------
    signatures : list of str
        The ufunc's signatures, as for ``numba.vectorize``.
    **options
        Passed to ``numba.vectorize`` (e.g. ``cache=True``).

    Returns
    -------
    decorator
        Turns a scalar Python function into a callable that builds the ufunc on first use
        and then behaves as it (``ufunc.types``, ``ufunc.nin``... are forwarded).

    Examples
    --------
    >>> import numpy as np
    >>> @lazy_vectorize(["float64(float64, float64)"])
    ... def _hypot(x, y):
    ...     return (x * x + y * y) ** 0.5
    >>> _hypot.built()
    False
    >>> _hypot(np.array([3.0, 5.0]), np.array([4.0, 12.0])).tolist()
    [5.0, 13.0]
    >>> _hypot.built(), _hypot.types
    (True, ['dd->d'])
    """

    def decorate(py_func):
        return _LazyUFunc(py_func, signatures, options)

    return decorate
