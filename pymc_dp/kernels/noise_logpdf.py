"""Numba log-densities of the built-in noise families, and a dispatch on them that caches.

numba cannot cache on disk a function that receives another jitted function as an argument
(the argument's type names one object of one process), so a kernel written against any
``logpdf(x, params)`` is compiled again in every process: seconds per kernel, paid inside
``pm.sample`` at the first iteration. The built-in mechanisms' densities are a small, fixed
set; a kernel that receives the family's **kind** (an integer) instead calls
:func:`call_logpdf`, which branches to the family's density, and compiles once for all
processes (``cache=True``). A user-defined mechanism keeps the function-argument route.

``call_logpdf(f, x, params)`` accepts either: an integer kind (the built-in families below)
or a numba function (called directly), so one kernel source serves both routes.

Kinds: :data:`LAPLACE` (continuous Laplace), :data:`GAUSSIAN` (continuous Gaussian),
:data:`GEOMETRIC` (two-sided geometric / discrete Laplace),
:data:`DISCRETE_GAUSSIAN`.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from pymc_dp.kernels import discrete_gaussian as _dg
from pymc_dp.kernels import discrete_laplace as _dl

__all__ = [
    "DISCRETE_GAUSSIAN",
    "GAUSSIAN",
    "GEOMETRIC",
    "LAPLACE",
    "call_logpdf",
    "gaussian_logpdf",
    "laplace_logpdf",
    "logpdf_kind",
    "njit_for",
    "specialised",
]

LAPLACE, GAUSSIAN, GEOMETRIC, DISCRETE_GAUSSIAN = 0, 1, 2, 3


@numba.njit(cache=True)
def laplace_logpdf(x, params):  # pragma: no cover - compiled
    """``log eta(x) = -|x| / b - log(2 b)`` with ``params = [b]`` (numba; ``|x|`` in float64,
    so an integer argument cannot wrap).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.noise_logpdf import laplace_logpdf
    >>> bool(laplace_logpdf(-2.0, np.array([2.0])) == -1.0 - np.log(4.0))
    True
    """
    b = params[0]
    return -abs(np.float64(x)) / b - 0.6931471805599453 - math.log(b)


@numba.njit(cache=True)
def gaussian_logpdf(x, params):  # pragma: no cover - compiled
    """``log phi_sigma(x) = -(x / sigma)^2 / 2 - log sigma - log(2 pi) / 2`` with
    ``params = [sigma]`` (numba).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from pymc_dp.kernels.noise_logpdf import gaussian_logpdf
    >>> bool(np.isclose(gaussian_logpdf(1.5, np.array([2.0])), stats.norm(0, 2).logpdf(1.5)))
    True
    """
    s = params[0]
    z = np.float64(x) / s
    return -0.5 * z * z - math.log(s) - 0.9189385332046728


def logpdf_kind(logpdf) -> int | None:
    """The kind of a built-in noise density, or None for any other function.

    Parameters
    ----------
    logpdf : numba function
        A mechanism's ``numba_logpdf``.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from pymc_dp.kernels.noise_logpdf import GAUSSIAN, gaussian_logpdf, logpdf_kind
    >>> logpdf_kind(gaussian_logpdf) == GAUSSIAN, logpdf_kind(print)
    (True, None)
    """
    for kind, f in enumerate(_KNOWN):
        if logpdf is f:
            return kind
    return None


_KNOWN = (laplace_logpdf, gaussian_logpdf, _dl.numba_logpmf, _dg.numba_logpmf)


def specialised(cache: dict, build, logpdf, *flags):
    """``build(f, *flags)``, a numba kernel with the density fixed, built once per process and
    ``(logpdf, *flags)`` and kept in ``cache``.

    ``f`` is the density's kind (:func:`logpdf_kind`) for a built-in family, else ``logpdf``
    itself; ``build`` decorates its kernel with :func:`njit_for` ``(f)``, so the built-in
    families' kernels hold only ints (and ``flags``) and are cached on disk, compiled once per
    machine, while a user-defined density's kernel is compiled once per process (numba cannot
    cache a function that holds another jitted function).

    Examples
    --------
    ``build`` gets the kind of a built-in density, and is called once per key:

    >>> from pymc_dp.kernels.noise_logpdf import LAPLACE, laplace_logpdf, specialised
    >>> seen, cache = [], {}
    >>> def build(f, flag):
    ...     seen.append((f, flag))
    ...     return len(seen)
    >>> k = specialised(cache, build, laplace_logpdf, True)
    >>> seen == [(LAPLACE, True)], k == specialised(cache, build, laplace_logpdf, True)
    (True, True)
    """
    key = (logpdf, *flags)
    fn = cache.get(key)
    if fn is None:
        kind = logpdf_kind(logpdf)
        fn = cache[key] = build(logpdf if kind is None else kind, *flags)
    return fn


def njit_for(f):
    """``numba.njit``, cached on disk when ``f`` is a built-in kind (an int); see
    :func:`specialised`.

    Examples
    --------
    A user-defined density's kernel (``cache=False``; a kind, an int, gives ``cache=True``):

    >>> from pymc_dp.kernels.noise_logpdf import laplace_logpdf, njit_for
    >>> njit_for(laplace_logpdf)(lambda x: 2 * x)(3)
    6
    """
    return numba.njit(cache=isinstance(f, int))


def call_logpdf(f, x, params):
    """``f(x, params)`` for a numba function ``f``, or the built-in density of kind ``f``.

    Only callable from numba code (the branch is chosen at compile time by the type of ``f``).

    Examples
    --------
    >>> import numba, numpy as np
    >>> from pymc_dp.kernels.noise_logpdf import LAPLACE, call_logpdf, laplace_logpdf
    >>> @numba.njit
    ... def both(x, p):
    ...     return call_logpdf(LAPLACE, x, p), call_logpdf(laplace_logpdf, x, p)
    >>> a, b = both(1.0, np.array([1.0]))
    >>> bool(a == b == -1.0 - np.log(2.0))
    True
    """
    raise TypeError("call_logpdf is only callable from numba-compiled code")


@overload(call_logpdf)
def _call_logpdf_overload(f, x, params):
    if isinstance(f, types.Integer):

        def by_kind(f, x, params):  # pragma: no cover - compiled
            if f == 0:
                return laplace_logpdf(x, params)
            if f == 1:
                return gaussian_logpdf(x, params)
            if f == 2:
                return _dl.numba_logpmf(x, params)
            return _dg.numba_logpmf(x, params)

        return by_kind

    def direct(f, x, params):  # pragma: no cover - compiled
        return f(x, params)

    return direct
