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

import numpy as np

__all__ = ["check_allow_float"]


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
    if not isinstance(allow_float, bool | np.bool_):
        raise TypeError(f"allow_float must be True or False, got {allow_float!r}")
    if not allow_float:
        raise ValueError(
            f"{owner} adds floating-point noise, which leaks the input through the low-order "
            "bits of the release (Mironov 2012), so its privacy guarantee does not hold for "
            f"real data: release with {exact} instead (exact integer noise from a secure "
            "source), or pass allow_float=True to opt in to the floating-point release (for "
            "simulations)"
        )
