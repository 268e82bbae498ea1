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
from pymc_dp.mechanisms.discretized import snap

__all__ = ["FAMILIES", "family_of"]


def _sqrt_up(q) -> float:
    """The smallest double ``>= sqrt(q)`` for a rational ``q >= 0`` (checked exactly)."""
    q = Fraction(q)
    if q <= 0:
        return 0.0
    # sqrt(q) = 2**-k sqrt(q 4**k) with q 4**k near 1: float() of it neither underflows nor
    # overflows, so the start is within an ulp or two (a subnormal start of 0.0 would take
    # ~1e300 steps); OverflowError when sqrt(q) is beyond the double range
    k = (q.denominator.bit_length() - q.numerator.bit_length()) // 2
    scaled = q * Fraction(4) ** k
    r = math.ldexp(math.sqrt(float(scaled)), -k)
    if r == math.inf:
        raise OverflowError("square root beyond the double range")
    while r > 0.0 and Fraction(math.nextafter(r, 0.0)) ** 2 >= q:
        r = math.nextafter(r, 0.0)
    while Fraction(r) ** 2 < q:
        r = math.nextafter(r, math.inf)
    return r


def _as_records(data, name: str = "data") -> np.ndarray:
    """A 1-D (or 2-D for ``X``) numeric array of finite values; refuses masks, bools mixed in
    object arrays, NaN and infinities with a ``ValueError``/``TypeError`` naming ``name``."""
    if isinstance(data, np.ma.MaskedArray):
        raise ValueError(f"{name} must not be a masked array: drop or impute masked records")
    arr = np.asarray(data)
    if arr.dtype.kind not in "biufc":  # object, strings, dates and durations
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


#: the largest integer bound or count taken (int64 arithmetic on it cannot overflow)
INT_BOUND_MAX = 2**62
#: the largest number of categories (or values of a feature): a count per category is built
MAX_CATEGORIES = 2**20


def _as_int_bound(name: str, value, minimum: int, maximum: int = INT_BOUND_MAX) -> int:
    if isinstance(value, bool | np.bool_ | np.timedelta64) or not isinstance(
        value, numbers.Integral
    ):
        raise ValueError(
            f"{name} must be an integer >= {minimum}, got {value!r} of type {type(value).__name__}"
        )
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if v > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value!r}")
    return v


def _integers(arr: np.ndarray, name: str, *, saturate: bool = False) -> np.ndarray:
    """Whole-number records as int64. Values beyond ``±2**62`` are refused, or (``saturate``:
    records clamped from above afterwards anyway) set to ``±2**62``."""
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold whole numbers")
        big = np.abs(arr) > INT_BOUND_MAX
    elif arr.dtype.kind == "u":
        big = arr > np.uint64(INT_BOUND_MAX)
    else:
        return arr.astype(np.int64)
    if np.any(big):
        if not saturate:
            raise ValueError(f"{name} must lie within [-2**62, 2**62]")
        if arr.dtype.kind == "u":
            arr = np.minimum(arr, np.uint64(INT_BOUND_MAX))
        else:
            arr = np.clip(arr, -float(INT_BOUND_MAX), float(INT_BOUND_MAX))
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
    (Foulds et al. 2016, Sec. 3.2; ``docs/theory.md``, "Errata of the papers").
    """

    name = "bernoulli"
    integer = True
    stat_names = ("successes", "failures")

    def bounds(self, bounds):
        if bounds is not None:
            raise ValueError(
                f"bernoulli takes no bounds (its records are 0 or 1), got bounds={bounds!r}: "
                "leave bounds out"
            )
        return None

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
        return _as_int_bound("bounds (the number of categories K)", bounds, 2, MAX_CATEGORIES)

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
        arr = _integers(arr, "poisson data", saturate=True)  # clamped to U <= 2**62 below
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
        try:
            return _normal_l1(*bounds), _normal_l2(*bounds)
        except OverflowError:
            raise ValueError(
                f"bounds={bounds!r} give a sensitivity beyond the double range (the sum of "
                "squares moves by up to max(a², b²)): use narrower bounds"
            ) from None


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
        try:
            return round_up(sum(r, Fraction(0))), _sqrt_up(sum((x * x for x in r), Fraction(0)))
        except OverflowError:
            raise ValueError(
                f"bounds={bounds!r} give a sensitivity beyond the double range: use narrower bounds"
            ) from None

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


# ---- exact (discretized) releases of the real families: records snapped to a grid ---------------
def _int_sqrt_up(q: int) -> int:
    """The smallest integer ``>= sqrt(q)`` for an integer ``q >= 0``."""
    s = math.isqrt(q)
    return s if s * s == q else s + 1


def _normal_grid_sup(ka: int, kb: int, w: int) -> tuple[int, int]:
    """``(max L1, max squared L2)`` of ``(w (k - k'), k² - k'²)`` over integers in ``[ka, kb]``.

    ``|k - k'|(w + |k + k'|)`` and ``(k - k')²(w² + (k + k')²)`` grow with ``|k - k'|`` at
    fixed ``k + k'``, and the lattice step ``(k + 1, k' - 1)`` keeps ``k + k'``: the maximum has
    ``k`` in ``{ka, kb}`` (by symmetry). For fixed ``k`` the L1 objective is piecewise
    quadratic in ``k'`` (pieces split at ``k' = ±k``), concave only with vertices ``k' = ∓w/2``;
    the squared L2 one is a quartic whose stationary points are ``k' = k`` and the roots of
    ``2k'² + 2k k' + w² = 0``. The integer maximum is at a piece end, the endpoints, or an
    integer next to a vertex or root: all candidates are evaluated exactly (Python integers);
    the brute-force enumeration in the tests checks it.
    """
    best1 = best2 = 0
    for k in (ka, kb):
        cands = {ka, kb, k, -k, -k - 1, -k + 1}
        for c in (w / 2.0, -w / 2.0):
            cands |= {math.floor(c), math.ceil(c)}
        disc = k * k - 2 * w * w
        if disc >= 0:
            r = math.sqrt(disc)
            for c in ((-k + r) / 2.0, (-k - r) / 2.0):
                cands |= {math.floor(c) - 1, math.floor(c), math.ceil(c), math.ceil(c) + 1}
        for c in cands:
            if ka <= c <= kb:
                u, v = k - c, k + c
                best1 = max(best1, abs(u) * (w + abs(v)))
                best2 = max(best2, u * u * (w * w + v * v))
    return best1, best2


def snap_bounds(bounds: tuple[float, float], grid: float) -> tuple[int, int]:
    """The integer range ``[r(a / g), r(b / g)]`` of records clamped to ``[a, b]`` and snapped."""
    ka, kb = (int(v) for v in snap(np.array(bounds, dtype=np.float64), grid))
    return ka, kb


def _check_int_range(n: int, top: int, name: str) -> None:
    if n * top > 2**62:
        raise ValueError(
            f"grid: n * (largest statistic entry per record) = {n} * {top} exceeds 2**62 (the "
            f"integer release would overflow): use a coarser {name}"
        )


class NormalGrid:
    """Normal records snapped to the grid ``g``: ``k_i = r(clip(x_i, a, b) / g)`` and the
    integer statistic ``(w Σk, Σk²)`` with ``w = max(|ka|, |kb|, 1)``.

    The weight ``w`` balances the two coordinates (one noise scale for both, as in the float
    release): their noise in the data's units is then ``g/w`` and ``g²`` times the integer
    noise, i.e. about ``2 B / ε`` and ``2 B² / ε`` for ``[0, B]`` and geometric noise.
    """

    def __init__(self, bounds, grid: float):
        self.grid = grid
        self.ka, self.kb = snap_bounds(bounds, grid)
        if self.ka == self.kb:
            raise ValueError(
                f"bounds={bounds!r} snap to the single grid point {self.ka} * grid with "
                f"grid={grid!r}: every record would give the same statistic; use a finer grid "
                "or wider bounds"
            )
        self.w = max(abs(self.ka), abs(self.kb), 1)

    def statistic(self, records) -> np.ndarray:
        _check_int_range(len(records), self.w * self.w, "grid")  # w^2 = max(w|k|, k^2)
        k = snap(records, self.grid)
        return np.array([self.w * int(k.sum()), int((k * k).sum())], dtype=np.int64)

    def sensitivity(self) -> tuple[int, int]:
        l1, l2sq = _normal_grid_sup(self.ka, self.kb, self.w)
        return l1, _int_sqrt_up(l2sq)

    def units(self) -> np.ndarray:
        return np.array([self.grid / self.w, self.grid * self.grid])


class RegressionGrid:
    """Regression records snapped: ``X`` to the grid ``gx``, ``y`` to ``gy``; the integer
    statistic is the release layout of ``kx'kx``, ``kx'ky``, ``ky'ky``. Per-entry integer
    ranges (exact, as for the float release) summed for L1, root of the sum of squares rounded
    up for L2 (upper bounds)."""

    def __init__(self, bounds, grid):
        gx, gy = grid
        self.gx, self.gy = gx, gy
        self.kx = snap_bounds(bounds[0], gx)
        self.ky = snap_bounds(bounds[1], gy)

    def statistic(self, records) -> np.ndarray:
        mx, my = max(map(abs, self.kx)), max(map(abs, self.ky))
        X, y = records
        d = X.shape[1]
        _check_int_range(X.shape[0], max(mx * mx * d, mx * my * d, my * my, 1), "grid")
        kx, ky = snap(X, self.gx), snap(y, self.gy)
        iu = np.triu_indices(d)
        return np.concatenate([(kx.T @ kx)[iu], kx.T @ ky, [ky @ ky]]).astype(np.int64)

    def ranges(self, d: int) -> list[int]:
        sq, cross = _square_range(*self.kx), _product_range(self.kx, self.kx)
        iu = np.triu_indices(d)
        xx = [sq if j == k else cross for j, k in zip(*iu, strict=True)]
        return [int(r) for r in (*xx, *([_product_range(self.kx, self.ky)] * d),
                                 _square_range(*self.ky))]  # fmt: skip

    def sensitivity(self, d: int) -> tuple[int, int]:
        r = self.ranges(d)
        return max(sum(r), 1), max(_int_sqrt_up(sum(x * x for x in r)), 1)

    def units(self, d: int) -> np.ndarray:
        m = d * (d + 1) // 2
        return np.array([self.gx * self.gx] * m + [self.gx * self.gy] * d + [self.gy * self.gy])
