r"""Exact releases of real-valued statistics: snap to a power-of-two grid, add integer noise.

A floating-point Laplace or Gaussian release leaks its input through the low-order bits of the
result (Mironov 2012). For a real-valued statistic ``T`` the exact alternative (as in OpenDP)
is to *snap* ``T`` to a declared grid ``g = 2^j`` and add exact integer noise on that grid:

.. math::

    M(T) = g\,\bigl(r(T / g) + Y\bigr), \qquad r(u) = \lfloor u + 1/2 \rfloor,

with ``Y`` two-sided geometric (:class:`~pymc_dp.mechanisms.geometric.Geometric`, pure
ε-DP) or discrete Gaussian (:class:`~pymc_dp.mechanisms.discrete_gaussian.DiscreteGaussian`,
ρ-zCDP or (ε, δ)), drawn exactly from the secure source. The output is a function of the
integer ``r(T/g) + Y`` only, so the release is exact: no floating-point noise is involved.

Exactness of the snap. ``g`` is a power of two, so ``T / g`` is an exact double (no
rounding) for every ``|T / g| <= 2^52`` (checked), and ``r`` is computed exactly as
``floor(u) + [u - floor(u) >= 1/2]`` (``u - floor(u)`` is exact; the shortcut
``floor(u + 0.5)`` is not: it rounds ``0.49999999999999994`` up).

Guarantee, rounding included (derivation). ``r`` is non-decreasing and
``r(u) - r(v) = \lfloor u + 1/2\rfloor - \lfloor v + 1/2\rfloor < u - v + 1``, so
``|r(u) - r(v)| <= \lceil |u - v| \rceil`` for one coordinate. For ``d`` coordinates and
neighbours with ``\|T - T'\|_1 <= Δ``, the integer statistics differ by at most
``Σ_i \lceil t_i \rceil <= \lceil Δ/g \rceil + d - 1`` in L1 (``t_i = |T_i - T'_i|/g``, each
ceiling adds less than 1; attained: ``d`` coordinates that each cross a rounding boundary), and
for ``\|T - T'\|_2 <= Δ`` by at most ``\lceil Δ/g \rceil`` (``d = 1``) or
``\lceil Δ/g \rceil + \lceil \sqrt d \rceil`` (``\|\lceil t\rceil\|_2 < \|t\|_2 + \sqrt d``) in
L2. The integer mechanism is calibrated to that integer sensitivity, so the stated guarantee
(:meth:`Discretized.guarantee`, the integer mechanism's) covers the rounding; for ``d = 1``
it is exactly the worst-case privacy loss (attained by ``T = g/2``, ``T' = g/2 - Δ``, shown by
enumeration in the tests).

Conditioning a model on the release. ``z / g - r(T/g)`` is the integer noise, so the exact
likelihood of a released ``z`` is ``P(Y = z/g - r(T/g))``: in a PyMC model write
``pmdp.Release(name, d.snap_pt(T), d.base, observed=d.to_units(z))`` (the rounding is in the
model; the data-augmentation step updates the records whatever the graph between them and the
release). :func:`pymc_dp.releases.release_sufficient_statistics` snaps the *records* instead
(``grid=``), so its statistics are integers and its models need no rounding of the statistic.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.mechanisms.discretized import Discretized
>>> d = Discretized(grid=2.0**-4, epsilon=1.0, sensitivity=0.5)
>>> d.base.sensitivity, d.guarantee().epsilon  # 0.5 / 2^-4 = 8 grid steps
(8, 1.0)
>>> z = d.release(np.array([0.3, 1.7]), rng=np.random.default_rng(0))
>>> bool(np.all(z * 16 == np.round(z * 16)))  # on the grid
True
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytensor.tensor as pt

from pymc_dp._validation import INT_RANGE, as_positive_finite, as_positive_int, as_release_values
from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.geometric import Geometric

__all__ = ["Discretized", "as_grid", "snap", "snap_pt"]

#: largest ``|T / g|`` snapped: doubles are exact integers up to 2^53 and ``u - floor(u)`` is
#: exact below 2^52
SNAP_MAX = 2.0**52


def as_grid(grid, name: str = "grid") -> float:
    """``grid`` as a float if it is a power of two ``2^j`` (``-1000 <= j <= 1000``), else raise.

    A power of two makes ``x / grid`` and ``k * grid`` exact in floating point, so the snap is
    an exact function of the input.

    Examples
    --------
    >>> as_grid(0.25), as_grid(2**-10)
    (0.25, 0.0009765625)
    >>> as_grid(0.1)
    Traceback (most recent call last):
    ...
    ValueError: grid must be a power of two such as 2**-10 (x / grid is then exact), got 0.1
    """
    g = as_positive_finite(name, grid)
    m, e = math.frexp(g)
    if m != 0.5 or not -1000 <= e - 1 <= 1000:
        raise ValueError(
            f"{name} must be a power of two such as 2**-10 (x / grid is then exact), got {grid!r}"
        )
    return g


def snap(values, grid) -> np.ndarray:
    """``r(values / grid)`` as int64, ``r(u) = floor(u + 1/2)`` computed exactly.

    Raises ``ValueError`` naming ``values`` if ``|values / grid| > 2^52`` (not exact) or a value
    is not finite; ``grid`` must be a power of two (:func:`as_grid`).

    Examples
    --------
    >>> snap([0.49999999999999994, 0.5, -0.5, 1.25], 1.0)
    array([0, 1, 0, 1])
    """
    g = as_grid(grid)
    v = as_release_values(values, integer=False)
    with np.errstate(over="ignore"):  # exact (g is a power of two) unless out of range
        u = v / g
    if not np.all(np.abs(u) <= SNAP_MAX):
        bad = v.ravel()[np.argmax(~(np.abs(u.ravel()) <= SNAP_MAX))]
        raise ValueError(
            f"values must satisfy |values / grid| <= 2**52 for an exact snap, got {bad!r} with "
            f"grid={g!r}: use a coarser grid"
        )
    f = np.floor(u)
    return (f + (u - f >= 0.5)).astype(np.int64)


def snap_pt(x, grid):
    """:func:`snap` as a PyTensor graph (int64): ``floor(u) + [u - floor(u) >= 1/2]``.

    Examples
    --------
    >>> import numpy as np
    >>> snap_pt(np.array([0.49999999999999994, 0.5, -0.5, 1.25]), 1.0).eval()
    array([0, 1, 0, 1])
    """
    g = np.float64(as_grid(grid))
    u = pt.as_tensor_variable(x).astype("float64") / g
    f = pt.floor(u)
    return (f + pt.ge(u - f, np.float64(0.5))).astype("int64")


def _integer_sensitivity(sens: Fraction, grid: float, dimension: int, norm: str) -> int:
    """The integer sensitivity of the snapped statistic (module docstring)."""
    steps = math.ceil(sens / Fraction(grid))
    if norm == "l1":
        return steps + dimension - 1
    return steps if dimension == 1 else steps + math.isqrt(dimension - 1) + 1


class Discretized:
    r"""Snap a real statistic to the grid ``g = 2^j``, add exact integer noise (module docstring).

    Parameters
    ----------
    grid : float
        The grid ``g``: a power of two (``2**-10``, ``0.25``, ``1.0`` ...).
    epsilon : float, optional
        Alone: pure ε-DP with two-sided geometric noise (L1 sensitivity).
    delta : float, optional
        With ``epsilon``: (ε, δ)-DP with discrete Gaussian noise (L2 sensitivity).
    rho : float, optional
        ρ-zCDP with discrete Gaussian noise (L2 sensitivity).
    sensitivity : float, default 1.0
        Sensitivity ``Δ > 0`` of the *real* statistic (L1 for ``epsilon`` alone, L2 otherwise).
    dimension : int, default 1
        Number of coordinates ``d`` of the statistic (each may cross a rounding boundary).

    Attributes
    ----------
    base : Geometric or DiscreteGaussian
        The integer mechanism, calibrated to the integer sensitivity of the snapped statistic
        (``ceil(Δ/g) + d - 1`` in L1; ``ceil(Δ/g)``, or ``ceil(Δ/g) + ceil(sqrt(d))`` for
        ``d > 1``, in L2).

    Raises
    ------
    ValueError, TypeError
        For a grid that is not a power of two, not exactly one of ``epsilon`` alone,
        ``(epsilon, delta)`` and ``rho``, or parameters the integer mechanism refuses (the
        message names the argument).

    Notes
    -----
    Not an additive-noise :class:`pymc_dp.Mechanism`: the release minus the input is not
    independent of the input (the rounding). Model a release with :attr:`base` on the snapped
    statistic (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.discretized import Discretized
    >>> d = Discretized(grid=0.25, rho=0.5, sensitivity=1.0, dimension=2)
    >>> d.base.sensitivity  # ceil(1 / 0.25) + ceil(sqrt(2))
    6
    >>> d.guarantee().rho
    0.5
    >>> d.to_units(d.release([1.0, 2.5], rng=np.random.default_rng(1))).dtype
    dtype('int64')
    """

    def __init__(self, *, grid, epsilon=None, delta=None, rho=None, sensitivity=1.0, dimension=1):
        self.grid = as_grid(grid)
        self.sensitivity = as_positive_finite("sensitivity", sensitivity)
        self.dimension = as_positive_int("dimension", dimension)
        if rho is not None and (epsilon is not None or delta is not None):
            raise ValueError("Discretized: give epsilon (and delta) or rho, not both")
        if rho is None and epsilon is None:
            raise ValueError(
                "Discretized needs epsilon= (geometric noise), epsilon= and delta= or rho= "
                "(discrete Gaussian noise)"
            )
        norm = "l1" if (rho is None and delta is None) else "l2"
        sens = _integer_sensitivity(Fraction(self.sensitivity), self.grid, self.dimension, norm)
        if sens > INT_RANGE:
            raise ValueError(
                f"sensitivity / grid = {self.sensitivity!r} / {self.grid!r} is too many grid "
                "steps (more than 2**62): use a coarser grid"
            )
        if norm == "l1":
            self.base = Geometric(epsilon=epsilon, sensitivity=sens)
        elif rho is not None:
            self.base = DiscreteGaussian(rho=rho, sensitivity=sens)
        else:
            self.base = DiscreteGaussian(epsilon=epsilon, delta=delta, sensitivity=sens)

    def guarantee(self) -> PrivacyGuarantee:
        """The guarantee of one release, rounding included: the integer mechanism's at the
        integer sensitivity of the snapped statistic."""
        return self.base.guarantee()

    @property
    def epsilon(self) -> float:
        """epsilon of the guarantee."""
        return self.guarantee().epsilon

    def snap(self, values) -> np.ndarray:
        """The snapped statistic ``r(values / grid)`` (int64), see :func:`snap`."""
        return snap(values, self.grid)

    def snap_pt(self, x):
        """The snapped statistic as a PyTensor graph (for models), see :func:`snap_pt`."""
        return snap_pt(x, self.grid)

    def release_units(self, values, rng=None) -> np.ndarray:
        """``r(values / grid) + Y`` (int64): the release in grid units."""
        return self.base.release(self.snap(values), rng=rng)

    def release(self, values, rng=None) -> np.ndarray:
        """``grid * (r(values / grid) + Y)`` (float64, exact multiples of the grid).

        ``rng=None`` draws ``Y`` from the secure source; a ``numpy.random.Generator`` is for
        simulations.
        """
        k = self.release_units(values, rng)
        if np.any(np.abs(k) > 2**53):  # pragma: no cover - needs |T / g| near 2^52
            raise ValueError("the release left the range where grid multiples are exact")
        return k.astype(np.float64) * self.grid

    def to_units(self, released) -> np.ndarray:
        """A released value in grid units (int64), checked to lie on the grid."""
        with np.errstate(over="ignore"):  # beyond the double range: inf, refused below
            z = np.asarray(released, dtype=np.float64) / self.grid
        # |z| <= 2**53 (as release() guarantees): beyond, z is no release and int64 can wrap
        if not np.all((np.abs(z) <= 2.0**53) & (z == np.round(z))):
            raise ValueError(
                f"released must be multiples of the grid {self.grid!r} within 2**53 grid steps "
                "(a release of this mechanism)"
            )
        return z.astype(np.int64)

    def __repr__(self) -> str:
        return f"Discretized(grid={self.grid!r}, base={self.base!r})"
