"""Conjugate exponential families: clamping, sufficient statistics, exact sensitivities.

Neighbouring datasets are **replace-one** (bounded DP): ``D`` and ``D'`` have the same number
``n`` of records and differ in the value of one record. This is the convention of the rest of
pymc_dp, where a mechanism's ``sensitivity`` is "the change one record can make" to the
released statistic (:mod:`pymc_dp.distributions.release`; the data-augmentation step checks
every record change against it), and it is the one under which Foulds et al. (2016, Sec. 3.2)
give the Beta-Bernoulli pair the L1 sensitivity 2. ``n`` is public.

Sensitivities (``Δ1`` in L1, ``Δ2`` in L2; derivations beside each class):

===================  ==================================  ========================  ============
family               statistic                           ``Δ1``                    ``Δ2``
===================  ==================================  ========================  ============
bernoulli            (successes, failures)               2                         sqrt(2)
categorical (K)      counts of the K categories          2                         sqrt(2)
poisson (U)          sum of ``min(x, U)``                U                         U
normal [a, b]        (sum, sum of squares) of clamped x  sup of ``|u|(1 + |v|)``   see class
linear_regression    upper triangle of X'X, X'y, y'y     sum of per-entry ranges   (upper bound)
===================  ==================================  ========================  ============

The first four are exact (attained by a pair of records); the regression values are upper
bounds (each entry's range is attained, but not all by one pair of records).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

from pymc_dp.accounting import round_up

__all__ = ["FAMILIES", "family_of"]


def _sqrt_up(q) -> float:
    """The smallest double ``>= sqrt(q)`` for a rational ``q >= 0`` (checked exactly)."""
    q = Fraction(q)
    r = math.sqrt(float(q))
    while Fraction(r) ** 2 < q:
        r = math.nextafter(r, math.inf)
    return r


def _as_records(data, name: str = "data") -> np.ndarray:
    """A 1-D (or 2-D for ``X``) numeric array of finite values; refuses masks, bools mixed in
    object arrays, NaN and infinities with a ``ValueError``/``TypeError`` naming ``name``."""
    if isinstance(data, np.ma.MaskedArray):
        raise ValueError(f"{name} must not be a masked array: drop or impute masked records")
    arr = np.asarray(data)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one record")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def _as_interval(name: str, bounds) -> tuple[float, float]:
    """``(lo, hi)`` finite floats with ``lo < hi``."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a pair (lo, hi) of finite numbers, got {bounds!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name} must be finite with lo < hi, got {bounds!r}")
    return lo, hi


def _as_int_bound(name: str, value, minimum: int) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _integers(arr: np.ndarray, name: str) -> np.ndarray:
    if np.issubdtype(arr.dtype, np.floating) and not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers")
    return arr.astype(np.int64)


class _Family:
    """One conjugate family; subclasses set the class attributes and the methods."""

    name: str = ""
    integer: bool = False  # integer statistics (integer mechanisms allowed)
    stat_names: tuple[str, ...] = ()

    def bounds(self, bounds):
        """Validated bounds (family-specific)."""
        return None

    def records(self, data, bounds):
        """Validated, clamped records."""
        raise NotImplementedError

    def n(self, records) -> int:
        return int(np.shape(records)[0])

    def statistic(self, records, bounds) -> np.ndarray:
        raise NotImplementedError

    def sensitivity(self, bounds) -> tuple[float, float]:
        """``(Δ1, Δ2)`` under replace-one neighbours."""
        raise NotImplementedError

    def names(self, bounds) -> tuple[str, ...]:
        return self.stat_names

    def box(self, bounds, n: int):
        """``(lower, upper)`` of the valid region when it is a box (every statistic clipped
        to one interval), else ``None`` (the region couples the statistics)."""
        return None


class Bernoulli(_Family):
    """Records in {0, 1}; statistic ``(s, f) = (Σx, n - Σx)``.

    Replacing one record moves one unit from ``s`` to ``f`` or back: ``Δ1 = 2``, ``Δ2 = √2``
    (Foulds et al. 2016, Sec. 3.2; ERRATA).
    """

    name = "bernoulli"
    integer = True
    stat_names = ("successes", "failures")

    def records(self, data, bounds):
        arr = _as_records(data)
        if arr.ndim != 1:
            raise ValueError(f"data must be 1-D (one record per entry), got shape {arr.shape}")
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError("bernoulli data must hold only 0 and 1 (or booleans)")
        return arr.astype(np.int64)

    def statistic(self, records, bounds):
        s = int(records.sum())
        return np.array([s, records.size - s], dtype=np.int64)

    def sensitivity(self, bounds):
        return 2.0, _sqrt_up(2)

    def box(self, bounds, n):
        """Counts lie in ``[0, n]``."""
        return 0, int(n)


class Categorical(_Family):
    """Records in ``{0, ..., K-1}`` (``bounds = K``); statistic: the K counts.

    Replacing one record lowers one count by 1 and raises another by 1: ``Δ1 = 2``,
    ``Δ2 = √2``.
    """

    name = "categorical"
    integer = True

    def bounds(self, bounds):
        if bounds is None:
            raise ValueError("categorical needs bounds=K, the number of categories (>= 2)")
        return _as_int_bound("bounds (the number of categories K)", bounds, 2)

    def records(self, data, bounds):
        arr = _as_records(data)
        if arr.ndim != 1:
            raise ValueError(f"data must be 1-D (one record per entry), got shape {arr.shape}")
        arr = _integers(arr, "categorical data")
        if np.any((arr < 0) | (arr >= bounds)):
            raise ValueError(f"categorical data must lie in 0..{bounds - 1} (bounds=K={bounds})")
        return arr

    def statistic(self, records, bounds):
        return np.bincount(records, minlength=bounds).astype(np.int64)

    def sensitivity(self, bounds):
        return 2.0, _sqrt_up(2)

    def box(self, bounds, n):
        """Counts lie in ``[0, n]``."""
        return 0, int(n)

    def names(self, bounds):
        return tuple(f"count_{k}" for k in range(bounds))


class Poisson(_Family):
    """Non-negative integer records clamped to ``[0, U]`` (``bounds = U``); statistic
    ``Σ min(x, U)``.

    One record moves the sum by at most ``U`` (``0 <-> U``): ``Δ1 = Δ2 = U``.
    """

    name = "poisson"
    integer = True
    stat_names = ("sum",)

    def bounds(self, bounds):
        if bounds is None:
            raise ValueError("poisson needs bounds=U, the upper bound records are clamped to")
        if isinstance(bounds, tuple | list):
            if len(bounds) != 2 or bounds[0] != 0:
                raise ValueError(f"poisson bounds must be U or (0, U), got {bounds!r}")
            bounds = bounds[1]
        return _as_int_bound("bounds (the clamping bound U)", bounds, 1)

    def records(self, data, bounds):
        arr = _as_records(data)
        if arr.ndim != 1:
            raise ValueError(f"data must be 1-D (one record per entry), got shape {arr.shape}")
        arr = _integers(arr, "poisson data")
        if np.any(arr < 0):
            raise ValueError("poisson data must be non-negative")
        return np.minimum(arr, bounds)

    def statistic(self, records, bounds):
        return np.array([int(records.sum())], dtype=np.int64)

    def sensitivity(self, bounds):
        return float(bounds), float(bounds)

    def box(self, bounds, n):
        """The clamped sum lies in ``[0, n U]``."""
        return 0, int(n) * int(bounds)


def _normal_l1(a: float, b: float) -> float:
    """``sup |x - x'| + |x² - x'²|`` over ``x, x'`` in ``[a, b]`` (exact, rounded up).

    With ``u = x - x'`` and ``v = x + x'`` the objective is ``|u|(1 + |v|)``, increasing in
    ``|u|`` at fixed ``v``, so the supremum lies on the boundary of the box: by symmetry
    ``x in {a, b}``. For fixed ``x`` it is piecewise quadratic in ``x'`` with pieces split at
    ``x' = ±x`` and stationary points ``x' = ±1/2``; the maximum is at one of these or at
    ``a``, ``b``. All candidates are rationals: evaluated exactly, then rounded up.
    """
    a, b = Fraction(a), Fraction(b)
    half = Fraction(1, 2)
    best = Fraction(0)
    for x in (a, b):
        for y in (a, b, -x, half, -half):
            if a <= y <= b:
                best = max(best, abs(x - y) + abs(x * x - y * y))
    return round_up(best)


def _normal_l2(a: float, b: float) -> float:
    """``sup sqrt((x - x')² + (x² - x'²)²)`` over ``[a, b]²`` (rounded up).

    ``h = u²(1 + v²)`` is increasing in ``|u|`` at fixed ``v``: boundary, ``x in {a, b}``.
    ``dh/dx' = 2(x - x')[x² - x'² - 1 - (x + x')²]`` vanishes at ``x' = x`` or at the roots of
    ``2x'² + 2x x' + 1 = 0``, ``x' = (-x ± sqrt(x² - 2))/2`` (real when ``|x| >= √2``).
    ``h`` is evaluated exactly at the rational candidates and at the doubles nearest the
    irrational roots (a stationary point: the error is second order, about 1e-32 relative),
    and the square root is rounded up, one more ulp when an irrational root wins.
    """
    fa, fb = Fraction(a), Fraction(b)
    best, irrational = Fraction(0), False
    for x in (fa, fb):
        cands = [(fa, False), (fb, False)]
        if x * x >= 2:
            r = math.sqrt(float(x * x - 2))
            cands += [
                (Fraction((-float(x) + r) / 2.0), True),
                (Fraction((-float(x) - r) / 2.0), True),
            ]
        for y, irr in cands:
            if fa <= y <= fb:
                h = (x - y) ** 2 * (1 + (x + y) ** 2)
                if h > best:
                    best, irrational = h, irr
    out = _sqrt_up(best)
    return math.nextafter(out, math.inf) if irrational else out


class Normal(_Family):
    """Real records clamped to ``[a, b]`` (``bounds = (a, b)``); statistic
    ``(Σx, Σx²)``.

    ``Δ1 = sup |x - x'| + |x² - x'²|`` and ``Δ2 = sup ||(x - x', x² - x'²)||₂`` over
    ``x, x' in [a, b]`` (closed forms in :func:`_normal_l1`, :func:`_normal_l2`); e.g.
    ``[0, B]``: ``Δ1 = B + B²``, ``Δ2 = B sqrt(1 + B²)``; ``[-1, 1]``: ``Δ1 = 9/4``
    (``x = 1, x' = -1/2``), ``Δ2 = 2``.
    """

    name = "normal"
    stat_names = ("sum", "sum_of_squares")

    def bounds(self, bounds):
        if bounds is None:
            raise ValueError("normal needs bounds=(a, b): records are clamped to [a, b]")
        return _as_interval("bounds", bounds)

    def records(self, data, bounds):
        arr = _as_records(data)
        if arr.ndim != 1:
            raise ValueError(f"data must be 1-D (one record per entry), got shape {arr.shape}")
        return np.clip(arr.astype(np.float64), *bounds)

    def statistic(self, records, bounds):
        return np.array([records.sum(), (records * records).sum()], dtype=np.float64)

    def sensitivity(self, bounds):
        return _normal_l1(*bounds), _normal_l2(*bounds)


def _square_range(lo: float, hi: float) -> Fraction:
    lo, hi = Fraction(lo), Fraction(hi)
    top = max(lo * lo, hi * hi)
    bottom = Fraction(0) if lo <= 0 <= hi else min(lo * lo, hi * hi)
    return top - bottom


def _product_range(i1: tuple[float, float], i2: tuple[float, float]) -> Fraction:
    corners = [Fraction(p) * Fraction(q) for p in i1 for q in i2]
    return max(corners) - min(corners)


class LinearRegression(_Family):
    """Records ``(x_i, y_i)``, ``x_i`` in ``R^d``; entries of ``X`` clamped to ``[xl, xh]`` and
    ``y`` to ``[yl, yh]`` (``bounds = ((xl, xh), (yl, yh))``). Statistic: the upper triangle
    of ``X'X`` (row by row, ``d(d+1)/2`` entries), ``X'y`` (``d``) and ``y'y``.

    Per record each entry is a monomial whose range over the box is exact: ``x_j²`` and ``y²``
    ``max(lo², hi²) - (0 if lo <= 0 <= hi else min(lo², hi²))``; ``x_j x_k`` (``j != k``) and
    ``x_j y``: the corner products' max minus min. ``Δ1`` is the sum of these ranges and ``Δ2``
    the root of the sum of their squares: upper bounds (not all ranges are attained by one
    pair of records), never under-counted.
    """

    name = "linear_regression"

    def bounds(self, bounds):
        try:
            xb, yb = bounds
        except (TypeError, ValueError):
            raise ValueError(
                f"linear_regression needs bounds=((x_lo, x_hi), (y_lo, y_hi)), got {bounds!r}"
            ) from None
        return _as_interval("bounds[0] (x)", xb), _as_interval("bounds[1] (y)", yb)

    def records(self, data, bounds):
        try:
            X, y = data
        except (TypeError, ValueError):
            raise ValueError("linear_regression data must be a pair (X, y)") from None
        X = _as_records(X, "X").astype(np.float64)
        y = _as_records(y, "y").astype(np.float64)
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(
                f"need X of shape (n, d) and y of shape (n,), got {X.shape}, {y.shape}"
            )
        return np.clip(X, *bounds[0]), np.clip(y, *bounds[1])

    def n(self, records):
        return int(records[0].shape[0])

    def statistic(self, records, bounds):
        X, y = records
        iu = np.triu_indices(X.shape[1])
        return np.concatenate([(X.T @ X)[iu], X.T @ y, [y @ y]]).astype(np.float64)

    def ranges(self, bounds, d: int) -> list[Fraction]:
        """Exact per-entry ranges of the statistic (same order as the statistic)."""
        xb, yb = bounds
        iu = np.triu_indices(d)
        sq, cross = _square_range(*xb), _product_range(xb, xb)
        xx = [sq if j == k else cross for j, k in zip(*iu, strict=True)]
        return [*xx, *([_product_range(xb, yb)] * d), _square_range(*yb)]

    def sensitivity(self, bounds, d: int = 1):
        r = self.ranges(bounds, d)
        return round_up(sum(r, Fraction(0))), _sqrt_up(sum((x * x for x in r), Fraction(0)))

    def names(self, bounds, d: int = 1):
        iu = np.triu_indices(d)
        xx = [f"XtX_{j}{k}" for j, k in zip(*iu, strict=True)]
        return (*xx, *(f"Xty_{j}" for j in range(d)), "yty")


FAMILIES: dict[str, _Family] = {
    f.name: f for f in (Bernoulli(), Categorical(), Poisson(), Normal(), LinearRegression())
}


def family_of(family) -> _Family:
    """The family for a name (``"bernoulli"``, ...) or a PyMC distribution class
    (``pm.Bernoulli``, ``pm.Categorical``, ``pm.Poisson``, ``pm.Normal``)."""
    key = family
    if isinstance(family, type):
        key = family.__name__.lower()
    if isinstance(key, str) and key.lower() in FAMILIES:
        return FAMILIES[key.lower()]
    raise ValueError(
        f"family must be one of {sorted(FAMILIES)} (or pm.Bernoulli, pm.Categorical, "
        f"pm.Poisson, pm.Normal), got {family!r}"
    )
