"""The explicit opt-in of the floating-point mechanisms' releases (Mironov 2012).

:class:`~pymc_dp.mechanisms.laplace.Laplace` and :class:`~pymc_dp.mechanisms.gaussian.Gaussian`
add floating-point noise: the set of doubles ``x + Z`` can take depends on ``x``, so the
low-order bits of a release leak the input whatever the randomness source (Mironov 2012, "On
significance of the least significant bits for differential privacy", CCS). Their ``release``
therefore refuses unless called with ``allow_float=True``; the exact mechanisms
(:class:`~pymc_dp.mechanisms.geometric.Geometric`,
:class:`~pymc_dp.mechanisms.discrete_gaussian.DiscreteGaussian`, and
:class:`~pymc_dp.mechanisms.discretized.Discretized` for real-valued statistics) need no opt-in.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_dp._validation import as_bool
from pymc_dp.kernels import exact_sampling as _es

__all__ = ["check_allow_float", "secure_signed_uniforms", "uniform_from_two_words"]


def check_allow_float(allow_float, owner: str, exact: str) -> None:
    """Raise unless ``allow_float`` is ``True`` (a bool; the message names ``allow_float``).

    ``owner`` names the caller (``"Laplace.release"``), ``exact`` the exact mechanism to use
    instead.

    Examples
    --------
    >>> check_allow_float(True, "Laplace.release", "pmdp.Geometric")
    >>> check_allow_float(False, "Laplace.release", "pmdp.Geometric")
    Traceback (most recent call last):
    ...
    ValueError: Laplace.release adds floating-point noise, ...
    """
    if not as_bool("allow_float", allow_float):
        raise ValueError(
            f"{owner} adds floating-point noise, which leaks the input through the low-order "
            "bits of the release (Mironov 2012), so its privacy guarantee does not hold for "
            f"real data: release with {exact} instead (exact integer noise from a secure "
            "source), or pass allow_float=True to opt in to the floating-point release (for "
            "simulations)"
        )


def uniform_from_two_words(w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """Uniform doubles on ``(0, 1)`` with 52 significant bits at every binary scale.

    ``u = (2^52 + 2m + 1) 2^-(53 + N)`` with ``m`` the top 51 bits of ``w1`` (bits 13-63; the
    low bits stay free for a sign) and ``N`` the number of trailing zero bits of ``w2``
    (``P(N = n) = 2^-(n+1)`` for ``n <= 63``; ``N = 64`` when ``w2 = 0``): ``u`` lies in
    ``[2^-(N+1), 2^-N)`` with probability ``2^-(N+1)``, uniform there on a grid of ``2^51``
    points. The smallest ``u`` is about ``2^-65``: the mass below it (``2^-65``) is drawn in
    ``[2^-65, 2^-64)`` instead (a total-variation error of ``2^-65``). A one-word uniform
    ``(m + 1/2) 2^-53`` stops at ``2^-54``.

    Examples
    --------
    >>> w = np.array([0, 2**64 - 1], dtype=np.uint64)
    >>> uniform_from_two_words(w, np.array([1, 0], dtype=np.uint64)).tolist() == [
    ...     0.5 + 2.0**-53, (2.0**53 - 1) * 2.0**-117]
    True
    """
    w1, w2 = np.asarray(w1, dtype=np.uint64), np.asarray(w2, dtype=np.uint64)
    m = (w1 >> np.uint64(13)).astype(np.float64)  # 51 bits, exact in float64
    low = w2 & (~w2 + np.uint64(1))  # lowest set bit (0 when w2 == 0)
    with np.errstate(divide="ignore"):
        ntz = np.where(w2 == np.uint64(0), 64.0, np.log2(low.astype(np.float64)))
    mant = 4503599627370496.0 + 2.0 * m + 1.0  # 2^52 + 2m + 1 < 2^53: exact
    return np.ldexp(mant, -(53 + ntz.astype(np.int64)))


def secure_signed_uniforms(size) -> tuple[np.ndarray, np.ndarray, tuple]:
    """``(sign, u, shape)``: a random sign and a :func:`uniform_from_two_words` uniform per
    draw, from two words of the secure source each
    (:func:`pymc_dp.kernels.exact_sampling.random_words`; the sign is bit 0 of the first word,
    which the uniform does not read).

    Examples
    --------
    >>> sign, u, shape = secure_signed_uniforms((2, 3))
    >>> shape, sign.shape, bool(np.all(np.abs(sign) == 1.0) and np.all((u > 0) & (u < 1)))
    ((2, 3), (6,), True)
    """
    shape = () if size is None else tuple(int(v) for v in np.atleast_1d(np.asarray(size, np.int64)))
    n = math.prod(shape)
    w = _es.random_words(2 * n).view(np.uint64)
    w1, w2 = w[:n], w[n:]
    sign = np.where((w1 & np.uint64(1)) == np.uint64(1), 1.0, -1.0)
    return sign, uniform_from_two_words(w1, w2), shape
