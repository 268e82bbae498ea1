"""Privacy accounting: pure functions of the privacy parameters, apart from any noise draw.

This module is the one home of every privacy formula of pymc_dp: the mechanisms in
:mod:`pymc_dp.mechanisms` and the report in :mod:`pymc_dp.privacy` call it and hold none.

* :class:`PrivacyGuarantee` — what a release guarantees: ``(epsilon, delta)`` and zCDP ``rho``.
* :func:`as_distance`, :func:`round_up` — the privacy maps' input check and their rounding:
  every value computed from exact rationals is the smallest double at or above it, so floating
  point never under-counts.
* :func:`linear_epsilon` — pure DP scales linearly: a mechanism that is ``ε``-DP for changes of
  size ``Δ`` is ``ε d/Δ``-DP for changes of size ``d`` (Laplace: ``ε(d) = d/b``; two-sided
  geometric: ``ε(d) = d ln(1/α)``).
* :func:`quadratic_rho` — (discrete) Gaussian zCDP scales quadratically:
  ``ρ(d) = d²/(2σ²)`` (Bun & Steinke 2016, Prop. 1.6; Canonne, Kamath & Steinke 2020, Thm. 4).
* :func:`laplace_scale`, :func:`geometric_rate`, :func:`gaussian_sigma_from_rho`,
  :func:`discrete_gaussian_sigma2_from_rho` — calibration from a stated guarantee, rounded to
  more noise so that the stated guarantee holds exactly for the law sampled.
* :func:`laplace_epsilon` — the Laplace mechanism is ``Δ/b``-DP.
* :func:`gaussian_rho`, :func:`gaussian_sigma_from_rho` — the Gaussian mechanism is
  ``Δ²/(2σ²)``-zCDP (Bun & Steinke 2016, Prop. 1.6).
* :func:`analytic_gaussian_delta`, :func:`analytic_gaussian_epsilon`,
  :func:`analytic_gaussian_sigma` — the exact (ε, δ) curve of the Gaussian mechanism
  (Balle & Wang 2018, Thm. 8) and its inverses.
* :func:`discrete_gaussian_delta`, :func:`discrete_gaussian_epsilon`,
  :func:`discrete_gaussian_sigma` — the exact (ε, δ) curve of the discrete Gaussian mechanism
  (CKS 2020, Thm. 7) and its inverses.
* :func:`compose` — basic sequential composition; :func:`compose_repeated` — ``k`` releases of
  one mechanism; :func:`implied_rho` — pure ``ε``-DP is ``ε²/2``-zCDP.
* :func:`zcdp_to_approx_dp` — zCDP to (ε, δ)-DP (Bun & Steinke 2016, Prop. 1.3, or the tighter
  Canonne, Kamath & Steinke 2020, Cor. 13).

Every input is validated eagerly in plain Python: NaN, infinities where they make no sense,
negative values and wrong types raise ``ValueError`` / ``TypeError`` naming the argument, so
that NaN can never turn into a finite ε. Results that are computed numerically (root finding)
are rounded towards the *conservative* side: more noise, a larger ε, a larger δ.

Derivation of the analytic Gaussian curve
-----------------------------------------
For ``M(x) = x + N(0, σ²)`` and neighbours ``|x - x'| = Δ``, the privacy loss
``L = log(p_x(Y)/p_{x'}(Y))`` with ``Y ~ M(x)`` is ``N(η, 2η)`` with ``η = Δ²/(2σ²)``, and the
tight ``δ`` for a given ``ε`` is ``E[(1 - e^{ε - L})_+]`` (Balle & Wang 2018, Sec. 3), which
evaluates to (their Thm. 8)

.. math::

    δ(ε) = Φ\\left(\\frac{Δ}{2σ} - \\frac{εσ}{Δ}\\right)
           - e^{ε} Φ\\left(-\\frac{Δ}{2σ} - \\frac{εσ}{Δ}\\right).

Write ``a = Δ/(2σ) - εσ/Δ`` and ``b = -Δ/(2σ) - εσ/Δ``. Then ``a² - b² = (a-b)(a+b) = -2ε``, so
``e^{ε} e^{-b²/2} = e^{-a²/2}``. With ``Φ(t) = ½ erfcx(-t/√2) e^{-t²/2}`` this gives the
cancellation-free form used when ``a <= 0``:

.. math::

    δ(ε) = ½ e^{-a²/2} \\left[\\operatorname{erfcx}(-a/\\sqrt2)
           - \\operatorname{erfcx}(-b/\\sqrt2)\\right],

(``erfcx`` is decreasing, the bracket is positive; when it is small it is computed as the
integral of ``-erfcx'`` by Gauss–Legendre quadrature). When ``a > 0`` we use
``δ = [Φ(a) - Φ(b)] - (e^{ε} - 1) Φ(b)`` with ``Φ(a) - Φ(b) = ½[erf(a/√2) + erf(-b/√2)]`` (since
``b < 0 < a`` nothing cancels) and, by the same identity,
``(e^{ε} - 1) Φ(b) = ½ erfcx(-b/√2) e^{-a²/2} (1 - e^{-ε})``, which avoids ``e^{ε}`` overflowing.
The computed ``a`` carries a rounding error of about ``u (Δ/(2σ) + εσ/Δ)``; where that error could
move δ (only for absurd parameters: ε beyond about 1e13, or σ/Δ so small that the ε for a
given δ is beyond about 1e13), the functions raise ``ValueError`` rather than return an
untrustworthy value.
``δ(ε)`` decreases in ``ε`` and in ``σ``, which makes both inverses one-dimensional root finds;
we solve them in log space (``log δ``, ``log σ``) with Brent's method and then step towards
more privacy cost until a certified upper bound on ``δ`` (the computed value plus a margin for
rounding errors) is at most the target.


The discrete Gaussian curve
---------------------------
For integer sensitivity :math:`\\Delta`, the privacy loss of :math:`M(x) = x + Y`,
:math:`Y \\sim \\mathcal{N}_{\\mathbb{Z}}(0, \\sigma^2)`, at output :math:`y` between neighbours
0 and :math:`\\Delta` is :math:`\\log p(y)/p(y-\\Delta) = (\\Delta^2 - 2y\\Delta)/(2\\sigma^2)`, so
the tight :math:`\\delta(\\epsilon) = \\sum_y [p(y) - e^\\epsilon p(y - \\Delta)]_+` is
(CKS 2020, Theorem 7)

.. math:: \\delta(\\epsilon) = P[Y > a] - e^{\\epsilon} P[Y > a + \\Delta],
          \\qquad a = \\frac{\\epsilon\\sigma^2}{\\Delta} - \\frac{\\Delta}{2},

and, shifting the second sum by :math:`\\Delta`, the same value is the sum of *positive* terms

.. math:: \\delta(\\epsilon) = \\frac{1}{Z}\\sum_{y > a} e^{-y^2/(2\\sigma^2)}
          \\Bigl(-\\operatorname{expm1}\\bigl(\\epsilon - \\tfrac{2y\\Delta + \\Delta^2}{2\\sigma^2}
          \\bigr)\\Bigr),

which :func:`discrete_gaussian_delta` sums directly (no cancellation) whenever at most 100 000
terms carry mass above :math:`e^{-40}` relative to the first (terms with :math:`y < -40\\sigma`,
each below :math:`e^{-800}`, are dropped). Beyond that (very large ``sigma`` or
``sensitivity``) it evaluates the two tails by the Euler-Maclaurin formula with three
Bernoulli corrections,
:math:`\\sum_{y \\ge k} f(y) = \\sigma\\sqrt{\\pi/2}\\operatorname{erfc}(u/\\sqrt2) + f(k)
[\\tfrac12 + \\tfrac{1}{12}\\sigma^{-1}He_1(u) - \\tfrac{1}{720}\\sigma^{-3}He_3(u) +
\\tfrac{1}{30240}\\sigma^{-5}He_5(u)]` with :math:`u = k/\\sigma` (relative truncation error below
1e-16 there, since then :math:`\\sigma > 10^4`), in log space (for :math:`u \\ge 0` with the
factor :math:`e^{-u^2/2}` taken out through ``erfcx``), and forms
:math:`e^\\epsilon P[Y > a + \\Delta]` as one exponential, so that neither :math:`e^\\epsilon`
overflows nor the deep second tail underflows when :math:`\\epsilon` is large (beyond 700);
the difference of the tails then has
relative error about :math:`10^{-16}\\,P[Y > a]/\\delta`. The normaliser :math:`Z` comes from
:mod:`pymc_dp.kernels.discrete_gaussian`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp._validation import (
    _as_real,
    _is_date_or_duration,
    as_positive_finite,
    as_positive_int,
    as_unit_open,
)
from pymc_dp.kernels.discrete_gaussian import log_normalizer as _dg_log_normalizer
from pymc_dp.kernels.exact_sampling import MAX_INT, best_rational

__all__ = [
    "PrivacyGuarantee",
    "analytic_gaussian_delta",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "as_distance",
    "compose",
    "compose_repeated",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "discrete_gaussian_sigma",
    "discrete_gaussian_sigma2_from_rho",
    "gaussian_delta_for_distance",
    "gaussian_rho",
    "gaussian_sigma_from_rho",
    "geometric_rate",
    "implied_rho",
    "laplace_epsilon",
    "laplace_scale",
    "linear_epsilon",
    "quadratic_rho",
    "round_up",
    "zcdp_to_approx_dp",
]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a release by a mechanism guarantees.

    Attributes
    ----------
    epsilon : float or None
        The epsilon of (epsilon, delta)-DP (``inf`` when no finite epsilon holds); ``None``
        when no privacy claim is made (:meth:`no_claim`).
    delta : float or None
        The delta of (epsilon, delta)-DP; 0 for pure DP; ``None`` without a claim.
    rho : float or None
        The rho of rho-zCDP (Bun & Steinke 2016), where the mechanism has one.

    Notes
    -----
    ``PrivacyGuarantee.no_claim()`` (all three ``None``, :attr:`claimed` False) is what a
    mechanism given only by its noise scale states: without a declared sensitivity there is no
    epsilon or rho to state. Composing it with anything gives no claim again (:func:`compose`).

    Examples
    --------
    >>> PrivacyGuarantee(0.5)
    PrivacyGuarantee(epsilon=0.5, delta=0.0, rho=None)
    >>> PrivacyGuarantee.no_claim(), PrivacyGuarantee.no_claim().claimed
    (PrivacyGuarantee(epsilon=None, delta=None, rho=None), False)
    """

    epsilon: float | None
    delta: float | None = 0.0
    rho: float | None = None

    @classmethod
    def no_claim(cls) -> PrivacyGuarantee:
        """The guarantee of a mechanism that makes no privacy claim (all fields ``None``)."""
        return cls(epsilon=None, delta=None, rho=None)

    @property
    def claimed(self) -> bool:
        """Whether a privacy claim is stated (``False`` for :meth:`no_claim`)."""
        return self.epsilon is not None


# ---- exact rationals to doubles, and the privacy maps' input ----------------------------------
def round_up(x) -> float:
    """The smallest double ``>= x`` for a rational ``x >= 0`` (``inf`` beyond the double range).

    Examples
    --------
    >>> from fractions import Fraction
    >>> round_up(Fraction(1, 2)), round_up(Fraction(1, 3)) > 1 / 3
    (0.5, True)
    """
    given = x
    x = _exact("x", x)
    if not isinstance(x, Fraction):
        if math.isnan(x):
            raise ValueError(f"x must be a number, got {given!r}")
        return x  # the smallest double >= ±inf is itself
    try:
        f = float(x)
    except OverflowError:
        return math.inf
    if f != math.inf and Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def _is_integer(value) -> bool:
    """A plain integer: not a bool and not a ``timedelta64`` (which numpy makes an integer)."""
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool | np.bool_)
        and not _is_date_or_duration(value)
    )


def _exact(name: str, value) -> Fraction | float:
    """``value`` as an exact ``Fraction`` (a ``Fraction`` as it is, integers exactly, floats
    exactly), or the float itself when it is not finite; ``TypeError`` naming ``name`` for
    bools, strings, complex numbers and durations."""
    if isinstance(value, Fraction):
        return value
    if _is_integer(value):
        return Fraction(int(value))
    f = _as_real(name, value)
    return Fraction(f) if math.isfinite(f) else f


def _as_positive_rational(name: str, value) -> Fraction:
    """``value`` as an exact ``Fraction`` if it is a finite real number > 0, else raise naming
    ``name`` (``TypeError`` for bools, strings, complex numbers and durations)."""
    x = _exact(name, value)
    if isinstance(x, Fraction) and x > 0:
        return x
    raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def as_distance(d_in, *, integer: bool = False) -> Fraction:
    """Validate the input of a privacy map: a finite ``d_in >= 0`` (an integer if ``integer``).

    ``d_in`` is the size of the change of the released statistic (in the mechanism's
    sensitivity norm) that one individual can cause. Integer mechanisms release integer
    statistics, whose changes are integers. Returns the exact value as a ``Fraction``.

    Raises
    ------
    TypeError
        If ``d_in`` is not a real number (bools and strings are refused).
    ValueError
        If ``d_in`` is NaN, infinite, negative, or (``integer``) not an integer; the message
        names ``d_in``.

    Examples
    --------
    >>> as_distance(3), as_distance(0.5)
    (Fraction(3, 1), Fraction(1, 2))
    """
    d = _exact("d_in", d_in)  # a Fraction (e.g. k * sensitivity) stays exact, never rounded
    if not (isinstance(d, Fraction) and d >= 0):
        raise ValueError(f"d_in must be finite and >= 0, got {d_in!r}")
    if integer and d.denominator != 1:
        raise ValueError(
            f"d_in must be an integer for an integer mechanism (its statistic changes by whole "
            f"numbers), got {d_in!r}"
        )
    return d


# ---- privacy maps: how a guarantee scales with the size of the change --------------------------
def linear_epsilon(rate, d_in) -> float:
    """Pure ``ε`` of a change of size ``d_in`` for a mechanism with loss ``rate`` per unit.

    For Laplace noise of scale ``b`` the privacy loss between outputs for inputs ``d`` apart is at
    most ``d/b`` (triangle inequality), attained; for the two-sided geometric law it is
    ``d ln(1/α)``. So ``ε(d) = d * rate`` with ``rate = 1/b`` or ``ln(1/α)``, computed exactly and
    rounded up.

    Examples
    --------
    >>> from fractions import Fraction
    >>> linear_epsilon(Fraction(1, 4), 2)
    0.5
    """
    return round_up(Fraction(rate) * Fraction(d_in))


def quadratic_rho(sigma2, d_in) -> float:
    """zCDP ``ρ = d²/(2σ²)`` of a change of size ``d_in`` under (discrete) Gaussian noise.

    Continuous Gaussian: Bun & Steinke 2016, Prop. 1.6 (any real ``d``); discrete Gaussian:
    Canonne, Kamath & Steinke 2020, Thm. 4 (integer ``d``). Exact, rounded up.

    Examples
    --------
    >>> quadratic_rho(4, 2)
    0.5
    """
    d = Fraction(d_in)
    return round_up(d * d / (2 * Fraction(sigma2)))


def laplace_scale(epsilon, sensitivity=1.0) -> float:
    """The Laplace scale for ``ε``-DP: ``b = Δ/ε``, raised by ulps until ``Δ/b <= ε`` exactly.

    Examples
    --------
    >>> laplace_scale(0.5, 2.0)
    4.0
    >>> Fraction(1.0) / Fraction(laplace_scale(0.3)) <= Fraction(0.3)
    True
    """
    eps = as_positive_finite("epsilon", epsilon)
    d = as_positive_finite("sensitivity", sensitivity)
    b = d / eps
    target = Fraction(eps)
    for _ in range(8):
        if not (math.isfinite(b) and b > 0.0) or Fraction(d) / Fraction(b) <= target:
            break
        b = math.nextafter(b, math.inf)
    return b


def geometric_rate(rate, sensitivity=1) -> Fraction:
    """The rational ``ln(1/α) = s/t`` sampled for a requested rate (``ε/Δ``), never above it.

    The best rational from below with ``s, t <= 2**61`` (the exact sampler's range). If
    ``Δ s/t`` then falls strictly between two doubles, the rate is lowered to the best rational
    below ``ε_f/Δ`` with ``ε_f`` the double nearest ``Δ s/t``, so that the reported
    ``ε = round_up(Δ s/t)`` is, in the usual case, that same nearest double.

    Examples
    --------
    >>> geometric_rate(Fraction(1, 2))
    Fraction(1, 2)
    """
    requested = _as_positive_rational("rate", rate)
    sensitivity = _as_positive_rational("sensitivity", sensitivity)
    if requested < Fraction(1, MAX_INT):  # no rational s/t with s, t <= MAX_INT below it
        raise ValueError(
            f"rate must be at least 2**-61 (the exact sampler's range), got {requested}: raise "
            "epsilon or lower the sensitivity"
        )
    rate = best_rational(requested, MAX_INT, "below")
    exact = sensitivity * rate
    try:
        nearest = Fraction(float(exact))
    except OverflowError:
        raise ValueError(
            f"sensitivity * rate must lie within the double range, got sensitivity="
            f"{sensitivity}, rate={requested}"
        ) from None
    if 0 < nearest < exact:  # (an epsilon below the smallest double keeps the rate)
        lower = best_rational(nearest / sensitivity, MAX_INT, "below")
        if lower > 0:
            rate = lower
    return rate


_SQRT2 = math.sqrt(2.0)
_LOG2 = math.log(2.0)


def _as_nonnegative(name: str, value, *, allow_inf: bool = False) -> float:
    x = _as_real(name, value)
    if (math.isfinite(x) or (allow_inf and x == math.inf)) and x >= 0.0:
        return x
    extra = " (inf allowed)" if allow_inf else " and finite"
    raise ValueError(f"{name} must be >= 0{extra}, got {value!r}")


# ---- Laplace and zCDP closed forms -----------------------------------------------------------
def laplace_epsilon(scale, sensitivity=1.0) -> float:
    """ε of the Laplace mechanism: ``ε = Δ / b`` (exact, rounded up; pure DP).

    ``ValueError`` when ``Δ / b`` lies beyond the double range (overflows or underflows).

    Parameters
    ----------
    scale : float
        Noise scale ``b > 0``.
    sensitivity : float, default 1.0
        L1 sensitivity ``Δ > 0``.

    Examples
    --------
    >>> laplace_epsilon(4.0, sensitivity=2.0)
    0.5
    """
    b = as_positive_finite("scale", scale)
    d = as_positive_finite("sensitivity", sensitivity)
    e = d / b
    if not (math.isfinite(e) and e > 0.0):
        raise ValueError(
            f"epsilon = sensitivity / scale is out of range for scale={scale!r}, "
            f"sensitivity={sensitivity!r}"
        )
    return linear_epsilon(1 / Fraction(b), Fraction(d))


def gaussian_rho(sigma, sensitivity=1.0) -> float:
    """zCDP ρ of the Gaussian mechanism: ``ρ = Δ² / (2σ²)`` (Bun & Steinke 2016, Prop. 1.6).

    Exact, rounded up; ``ValueError`` when it lies beyond the double range.

    Examples
    --------
    >>> gaussian_rho(2.0, sensitivity=2.0)
    0.5
    """
    s = as_positive_finite("sigma", sigma)
    d = as_positive_finite("sensitivity", sensitivity)
    r = d / s
    rho = 0.5 * r * r
    if not (math.isfinite(rho) and rho > 0.0):
        raise ValueError(
            f"rho = sensitivity²/(2 sigma²) is out of range for sigma={sigma!r}, "
            f"sensitivity={sensitivity!r}"
        )
    return quadratic_rho(Fraction(s) ** 2, Fraction(d))


def gaussian_sigma_from_rho(rho, sensitivity=1.0) -> float:
    """The σ giving ρ-zCDP: ``σ = Δ / sqrt(2ρ)`` (inverse of :func:`gaussian_rho`).

    Examples
    --------
    >>> gaussian_sigma_from_rho(0.5, sensitivity=2.0)
    2.0
    """
    r = as_positive_finite("rho", rho)
    d = as_positive_finite("sensitivity", sensitivity)
    s = d / math.sqrt(2.0 * r)
    # more noise by ulps until d**2 / (2 s**2) <= rho exactly (the stated rho then holds)
    for _ in range(8):
        if not (math.isfinite(s) and s > 0.0):
            break
        if Fraction(d) ** 2 / (2 * Fraction(s) ** 2) <= Fraction(r):
            break
        s = math.nextafter(s, math.inf)
    return s


# ---- analytic Gaussian (Balle & Wang 2018) -----------------------------------------------------
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)
# asymptotic coefficients (-1)^(k+1) (2k-1)!! of -erfcx'(t) = (2/√π) Σ_k c_k / (2t²)^k
_ASYM = np.array([(-1) ** (k + 1) * math.prod(range(1, 2 * k, 2)) for k in range(1, 13)], float)


def _neg_erfcx_prime(t: np.ndarray) -> np.ndarray:
    """``-erfcx'(t) = 2/√π - 2t erfcx(t) > 0`` for ``t >= 0``.

    Direct below ``t = 12`` (loses at most ``log10(2t²) < 2.5`` digits); above, the asymptotic
    series of ``erfcx`` (12 terms; truncation error below 1e-16 relative for ``t >= 12``).
    """
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    small = t < 12.0
    ts = t[small]
    out[small] = _TWO_OVER_SQRTPI - 2.0 * ts * special.erfcx(ts)
    tl = t[~small]
    x = (0.5 / tl) / tl  # 1/(2t²) without overflow
    out[~small] = _TWO_OVER_SQRTPI * x * np.polynomial.polynomial.polyval(x, _ASYM)
    return out


def _log_erfcx_diff(u: float, h: float) -> float:
    """``log(erfcx(u) - erfcx(u + h))`` for ``u >= 0``, ``h > 0``, without cancellation.

    When ``h`` is small against ``max(1, u)`` the difference is the integral of
    ``-erfcx'`` over ``[u, u + h]`` by 24-point Gauss–Legendre (the integrand is smooth and
    varies on the scale ``max(1, u)``, so the rule is exact to rounding); otherwise the two
    values differ by a large factor and are subtracted directly.
    """
    if u > 1e150:
        # erfcx(t) = (1/(t sqrt(pi))) (1 - 1/(2t^2) + ...): the difference is
        # h / (sqrt(pi) u (u + h)) to relative 1e-300 (the quadrature below would underflow)
        return math.log(h) - math.log(u) - math.log(u + h) - 0.5 * math.log(math.pi)
    if h >= max(1.0, u):
        return math.log(special.erfcx(u) - special.erfcx(u + h))
    t = u + 0.5 * h * (_GL_NODES + 1.0)
    integral = float(np.dot(_GL_WEIGHTS, _neg_erfcx_prime(t)))
    # log(h) - log 2, not log(0.5 h): half of a subnormal h can round to 0
    return math.log(h) - _LOG2 + math.log(integral)


def _log_delta(eps: float, ratio: float, *, upper: bool = False) -> float:
    """``log δ(ε)`` for ``ratio = Δ/σ`` (see the module docstring for the two forms).

    With ``upper=True`` a certified margin is added, giving an upper bound on the exact
    ``log δ``: ``(|a| + |b| + 2) e_a + 1e-12``, where ``e_a`` bounds the rounding error of
    ``a`` and ``b`` (``|d log δ / da| <= |a| + |b| + 2``), and ``1e-12`` covers the evaluation
    of the special functions (measured error against 50-digit mpmath: below 1e-13 relative).

    Raises ``ValueError`` when ``a = Δ/(2σ) - εσ/Δ`` cannot be computed accurately enough in
    double precision for δ to be trusted (only for absurd ε, about 1e14 and above, or
    σ/Δ beyond about 1e15 at moderate δ).
    """
    if ratio == 0.0:  # sigma / sensitivity beyond the double range: no privacy loss
        return -math.inf
    half = 0.5 * ratio
    q = eps / ratio
    a = half - q
    b = -half - q
    err = 4.5e-16 * (half + q)  # bound on the rounding error of a (and b)
    if err > 1e-9 and -40.0 - err < a < 9.0 + err:
        raise ValueError(
            f"analytic Gaussian delta is not reliable in double precision for "
            f"epsilon={eps!r}, sensitivity/sigma={ratio!r}"
        )
    margin = (abs(a) + abs(b) + 2.0) * err + 1e-12 if upper else 0.0
    if a <= 0.0:
        # δ = ½ e^{-a²/2} [erfcx(-a/√2) - erfcx(-b/√2)], with -b/√2 = -a/√2 + ratio/√2
        val = -0.5 * a * a - _LOG2 + _log_erfcx_diff(-a / _SQRT2, ratio / _SQRT2)
    else:
        # δ = [Φ(a) - Φ(b)] - (e^ε - 1) Φ(b), (e^ε - 1) Φ(b) = ½ erfcx(-b/√2) e^{-a²/2} (1 - e^{-ε})
        d = 0.5 * (special.erf(a / _SQRT2) + special.erf(-b / _SQRT2))
        d -= 0.5 * special.erfcx(-b / _SQRT2) * math.exp(-0.5 * a * a) * -math.expm1(-eps)
        val = math.log(d) if d > 0.0 else -math.inf
    # -inf: δ below e^{-700} by a wide margin (|a| > 37 + err); an infinite margin must not
    # turn it into NaN
    return val if val == -math.inf else val + margin


def analytic_gaussian_delta(epsilon, sigma, sensitivity=1.0) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8).

    .. math::

        δ(ε) = Φ(Δ/(2σ) - εσ/Δ) - e^{ε} Φ(-Δ/(2σ) - εσ/Δ)

    evaluated without cancellation (module docstring). The mechanism is (ε, δ)-DP iff
    ``δ >= δ(ε)``.

    Parameters
    ----------
    epsilon : float
        ``ε >= 0`` (``inf`` gives 0).
    sigma : float
        Noise standard deviation ``σ > 0``.
    sensitivity : float, default 1.0
        L2 sensitivity ``Δ > 0``.

    Examples
    --------
    >>> round(analytic_gaussian_delta(1.0, 1.0), 10)
    0.1269367375
    >>> bool(abs(analytic_gaussian_delta(0.0, 1.0) - (2 * special.ndtr(0.5) - 1)) < 1e-15)
    True
    """
    eps = _as_nonnegative("epsilon", epsilon, allow_inf=True)
    s = as_positive_finite("sigma", sigma)
    d = as_positive_finite("sensitivity", sensitivity)
    if eps == math.inf:
        return 0.0
    return min(1.0, math.exp(_log_delta(eps, d / s)))


def _bracket_decreasing(f, x0: float, step: float = 1.0, max_iter: int = 2000):
    """Find ``lo < hi`` with ``f(lo) > 0 >= f(hi)`` for a decreasing ``f``, starting at ``x0``."""
    lo = hi = x0
    for _ in range(max_iter):
        if f(hi) <= 0.0:
            break
        hi += step
    else:  # pragma: no cover - defensive
        raise ValueError("could not bracket the root from above")
    for _ in range(max_iter):
        if f(lo) > 0.0:
            break
        lo -= step
    else:  # pragma: no cover - defensive
        raise ValueError("could not bracket the root from below")
    return lo, hi


def analytic_gaussian_sigma(epsilon, delta, sensitivity=1.0) -> float:
    """The smallest σ for which the Gaussian mechanism is (ε, δ)-DP (Balle & Wang 2018, Alg. 1).

    Solves ``δ(ε; σ) = δ`` (Thm. 8) for ``log σ`` with Brent's method, then rounds up until a
    certified upper bound on ``δ(ε; σ)`` (the computed value plus a rounding-error margin, see
    ``_log_delta``) is at most ``delta``; so ``analytic_gaussian_delta(epsilon, result,
    sensitivity) <= delta`` too.
    Valid for every ``ε > 0`` (the classic ``σ = Δ sqrt(2 ln(1.25/δ))/ε`` needs ``ε < 1``).

    Parameters
    ----------
    epsilon : float
        ``ε > 0``, finite.
    delta : float
        ``δ`` in (0, 1).
    sensitivity : float, default 1.0
        L2 sensitivity ``Δ > 0``.

    Examples
    --------
    >>> s = analytic_gaussian_sigma(1.0, 1e-5)
    >>> round(s, 6)
    3.730632
    >>> analytic_gaussian_delta(1.0, s) <= 1e-5
    True
    """
    eps = as_positive_finite("epsilon", epsilon)
    dlt = as_unit_open("delta", delta)
    d = as_positive_finite("sensitivity", sensitivity)
    log_target = math.log(dlt)

    # work with the scale-free s = σ/Δ; f decreases in log s
    def f(log_s: float) -> float:
        return _log_delta(eps, math.exp(-log_s), upper=True) - log_target

    # start at the classical bound, but never above s = 1/delta, which always suffices:
    # delta(eps; s) <= delta(0; s) = 2 Phi(1/(2s)) - 1 < 1/(s sqrt(2 pi)) (so tiny eps is fine)
    x0 = min(
        math.log(math.sqrt(2.0 * math.log(1.25 / dlt))) - math.log(eps),
        -math.log(dlt),
    )
    try:
        lo, hi = _bracket_decreasing(f, x0)
        root = optimize.brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
        sigma = d * math.exp(max(root, lo))
        if not (math.isfinite(sigma) and sigma > 0.0):
            raise OverflowError("sigma out of range")
        return _round_up(lambda s: _log_delta(eps, d / s, upper=True) <= log_target, sigma)
    except (ArithmeticError, ValueError) as err:
        raise ValueError(
            f"cannot calibrate sigma for epsilon={epsilon!r}, delta={delta!r}, "
            f"sensitivity={sensitivity!r}: the required sigma is out of the double range or "
            f"not computable reliably ({err})"
        ) from None


def analytic_gaussian_epsilon(delta, sigma, sensitivity=1.0) -> float:
    """The smallest ε for which the Gaussian mechanism with this σ is (ε, δ)-DP.

    Inverse of :func:`analytic_gaussian_delta` in ε (Balle & Wang 2018, Thm. 8), rounded up
    until a certified upper bound on ``δ(ε)`` (computed value plus rounding-error margin) is at
    most ``delta``. Returns 0.0 when ``δ(0) = 2Φ(Δ/(2σ)) - 1`` is already at most ``delta``, and
    ``inf`` when no ε below 1e300 suffices.

    Examples
    --------
    >>> e = analytic_gaussian_epsilon(1e-5, 3.730631)
    >>> round(e, 5)
    1.0
    >>> analytic_gaussian_epsilon(0.9, 1.0)
    0.0
    """
    dlt = as_unit_open("delta", delta)
    s = as_positive_finite("sigma", sigma)
    d = as_positive_finite("sensitivity", sensitivity)
    ratio = d / s
    log_target = math.log(dlt)
    if _log_delta(0.0, ratio, upper=True) <= log_target:
        return 0.0

    def g(eps: float) -> float:
        return _log_delta(eps, ratio, upper=True) - log_target

    hi = 1.0
    while g(hi) > 0.0:
        hi *= 2.0
        if hi > 1e300:  # no representable ε: report none (conservative)
            return math.inf
    root = optimize.brentq(g, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return _round_up(lambda e: _log_delta(e, ratio, upper=True) <= log_target, root)


def _round_up(ok, x: float) -> float:
    """The first of ``x, x + s, x + 4s, x + 16s, ...`` (``s`` = one ulp-sized step) where ``ok``.

    Used to move a root-finder's answer to the conservative side (more noise, larger ε).
    """
    step = 2.0**-52 * max(abs(x), 1e-300)
    y = x
    for _ in range(600):
        if ok(y):
            return y
        y = x + step
        step *= 4.0
        if not math.isfinite(y):
            break
    raise ValueError(f"could not round {x!r} to a conservative value")


# ---- composition and conversion -----------------------------------------------------------
def _check_guarantee(i: int, g) -> PrivacyGuarantee:
    if not isinstance(g, PrivacyGuarantee) and callable(getattr(g, "guarantee", None)):
        g = g.guarantee()  # a Mechanism (duck-typed: mechanisms import this module)
    if not isinstance(g, PrivacyGuarantee):
        raise TypeError(
            f"guarantees[{i}] must be a PrivacyGuarantee or a Mechanism, got {type(g).__name__}"
        )
    if g.epsilon is None or g.delta is None:
        if not (g.epsilon is None and g.delta is None and g.rho is None):
            raise ValueError(
                f"guarantees[{i}] states no epsilon or no delta but not no claim at all: use "
                f"PrivacyGuarantee.no_claim() for no claim, got {g!r}"
            )
        return g
    _as_nonnegative(f"guarantees[{i}].epsilon", g.epsilon, allow_inf=True)
    dl = _as_real(f"guarantees[{i}].delta", g.delta)
    if not (0.0 <= dl <= 1.0):
        raise ValueError(f"guarantees[{i}].delta must lie in [0, 1], got {g.delta!r}")
    if g.rho is not None:
        _as_nonnegative(f"guarantees[{i}].rho", g.rho, allow_inf=True)
    return g


def compose(guarantees: Iterable) -> PrivacyGuarantee:
    """Basic sequential composition: ε's add, δ's add (capped at 1), ρ's add.

    The composition of mechanisms that are (ε_i, δ_i)-DP is (Σε_i, Σδ_i)-DP (Dwork & Roth 2014,
    Thm. 3.16), and of ρ_i-zCDP ones is Σρ_i-zCDP (Bun & Steinke 2016, Lemma 1.7). ``rho`` of
    the result is set only when every input has one. For many Gaussian releases, compose in ρ
    and convert once with :func:`zcdp_to_approx_dp`: that is much tighter than adding ε's.

    Parameters
    ----------
    guarantees : iterable of PrivacyGuarantee or Mechanism
        Mechanisms are replaced by their ``guarantee()``. An empty iterable gives
        ``PrivacyGuarantee(0.0, 0.0, 0.0)`` (releasing nothing costs nothing). If any of them
        makes no claim (:meth:`PrivacyGuarantee.no_claim`), neither does the result.

    Returns
    -------
    PrivacyGuarantee

    Raises
    ------
    TypeError, ValueError
        For a non-guarantee, a NaN or negative ε / ρ, or δ outside [0, 1].

    Examples
    --------
    >>> compose([PrivacyGuarantee(0.5), PrivacyGuarantee(0.25, 1e-6)])
    PrivacyGuarantee(epsilon=0.75, delta=1e-06, rho=None)
    >>> compose([PrivacyGuarantee(math.inf, 0.0, 0.125), PrivacyGuarantee(math.inf, 0.0, 0.375)])
    PrivacyGuarantee(epsilon=inf, delta=0.0, rho=0.5)
    """
    gs = [_check_guarantee(i, g) for i, g in enumerate(guarantees)]
    if not all(g.claimed for g in gs):  # one release without a claim: no claim for the whole
        return PrivacyGuarantee.no_claim()
    eps = _sum_up(float(g.epsilon) for g in gs)
    dl = min(1.0, _sum_up(float(g.delta) for g in gs))
    if all(g.rho is not None for g in gs):
        rho = _sum_up(float(g.rho) for g in gs)
    else:
        rho = None
    return PrivacyGuarantee(epsilon=eps, delta=dl, rho=rho)


def _sum_up(xs) -> float:
    """Exact sum of nonnegative floats (``fsum``); ``inf`` when it overflows (conservative)."""
    try:
        return math.fsum(xs)
    except OverflowError:
        return math.inf


def zcdp_to_approx_dp(rho, delta, *, method: str = "bs16") -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP.

    ``method="bs16"`` (default): Bun & Steinke 2016, Prop. 1.3,

    .. math:: ε = ρ + 2 \\sqrt{ρ \\ln(1/δ)}.

    ``method="cks20"``: Canonne, Kamath & Steinke 2020, Cor. 13 (always at least as tight):
    ρ-zCDP is (α, αρ)-RDP for every α > 1, which implies (ε, δ)-DP with

    .. math:: ε(α) = αρ + \\frac{\\ln(1/δ) - \\ln α}{α - 1} + \\ln(1 - 1/α).

    We minimise over α: ``ε'(α) = ρ - (ln(1/δ) - ln α)/(α-1)²`` has one zero in
    ``(1, 1 + sqrt(ln(1/δ)/ρ)]``, found by Brent's method; every α gives a valid bound, so an
    inexact minimiser only costs tightness. The result is the smaller of the CKS and BS bounds,
    floored at 0 (for large δ and tiny ρ the CKS expression can be negative).

    For a single Gaussian mechanism, :func:`analytic_gaussian_epsilon` is exact and tighter.

    Parameters
    ----------
    rho : float
        ``ρ >= 0``, finite.
    delta : float
        ``δ`` in (0, 1).
    method : {"bs16", "cks20"}

    Examples
    --------
    >>> zcdp_to_approx_dp(0.5, math.exp(-2.0))
    2.5
    >>> zcdp_to_approx_dp(0.5, 1e-6, method="cks20") < zcdp_to_approx_dp(0.5, 1e-6)
    True
    """
    r = _as_nonnegative("rho", rho)
    dlt = as_unit_open("delta", delta)
    if not isinstance(method, str) or method not in ("bs16", "cks20"):
        raise ValueError(f"method must be 'bs16' or 'cks20', got {method!r}")
    log_inv_delta = -math.log(dlt)
    bs = r + 2.0 * math.sqrt(r * log_inv_delta)
    if method == "bs16" or r == 0.0:
        return bs

    def terms(alpha: float) -> tuple[float, float, float]:
        middle = (log_inv_delta - math.log(alpha)) / (alpha - 1.0)
        return alpha * r, middle, math.log1p(-1.0 / alpha)

    # eps'(alpha) has the sign of (sqrt(r) (alpha - 1))^2 - (ln(1/δ) - ln α), written with
    # sqrt(r) so that neither r (alpha - 1)^2 nor ln(1/δ)/r overflows for a tiny (subnormal) rho
    sr = math.sqrt(r)

    def deriv(alpha: float) -> float:
        return (sr * (alpha - 1.0)) ** 2 - (log_inv_delta - math.log(alpha))

    lo = 1.0 + 1e-12
    hi = 2.0 + math.sqrt(log_inv_delta) / sr
    if deriv(lo) >= 0.0:  # pragma: no cover - only for astronomically large rho
        return bs
    alpha = optimize.brentq(deriv, lo, hi, xtol=1e-15, maxiter=500)
    # every alpha gives a valid bound; the float sum of the three terms is moved up by a bound
    # on its rounding error (a few ulps of the largest term), so that it never under-counts
    t = terms(alpha)
    cks = math.fsum(t) + 8.0 * 2.0**-52 * max(abs(x) for x in t)
    # a negative bound (large δ, tiny ρ) means (0, δ)-DP already holds
    return max(0.0, min(bs, cks))


# ---- discrete Gaussian (Canonne, Kamath & Steinke 2020) ------------------------------------------
_MAX_TERMS = 100_000


def _log_tail_em(k: float, sigma: float) -> float:
    """``log sum_{y >= k} exp(-y^2/(2 sigma^2))`` for integer ``k`` by Euler-Maclaurin (large
    sigma), in log space: for ``u = k/sigma >= 0`` the common factor ``exp(-u^2/2)`` of both
    terms is taken out (``erfc(x) = erfcx(x) e^{-x^2}``), so deep tails do not underflow (they
    matter when multiplied by ``e^epsilon`` with a large epsilon)."""
    u = k / sigma
    if u <= -40.0:  # all of Z up to exp(-800)
        return float(_dg_log_normalizer(sigma))
    he1 = u
    he3 = u**3 - 3.0 * u
    he5 = u**5 - 10.0 * u**3 + 15.0 * u
    corr = 0.5 + he1 / (12.0 * sigma) - he3 / (720.0 * sigma**3) + he5 / (30240.0 * sigma**5)
    c = sigma * math.sqrt(math.pi / 2.0)
    if u >= 0.0:
        return -0.5 * u * u + math.log(c * float(special.erfcx(u / _SQRT2)) + corr)
    return math.log(c * float(special.erfc(u / _SQRT2)) + math.exp(-0.5 * u * u) * corr)


#: the discrete Gaussian curve is evaluated for sigma up to this (its normalizer and tail
#: expansion overflow beyond about 1e61)
_DG_CURVE_SIGMA_MAX = 1e60
#: below this sigma the discrete Gaussian is a point mass at 0 to far below double precision
_DG_POINT_MASS_SIGMA = 1e-3


def discrete_gaussian_delta(epsilon: float, sigma: float, sensitivity: int) -> float:
    """Tight ``delta(epsilon)`` of the discrete Gaussian mechanism (CKS 2020, Theorem 7).

    See "The discrete Gaussian curve" in the module docstring for the derivation and the
    evaluation method. ``epsilon >= 0``, ``sigma > 0`` and ``sensitivity`` a positive integer
    are taken as given (the mechanism validates them).

    Examples
    --------
    >>> round(discrete_gaussian_delta(1.0, 2.0, 1), 10)
    0.0072487768
    """
    eps = float(epsilon)
    s = float(sigma)
    d = int(sensitivity)
    try:
        a = eps * s * s / d - d / 2.0
    except OverflowError:  # d beyond the double range: the neighbours' laws do not overlap
        return 1.0
    if not a < 40.0 * s:  # delta <= P[Y > 40 s] < exp(-800): 0 in float64
        return 0.0
    if s < _DG_POINT_MASS_SIGMA:
        # the law is a point mass at 0 up to exp(-1/(2 s^2)) < exp(-500000) (terms below
        # exp(-800) are dropped, as below): delta = max(0, 1 - e^(eps - d^2/(2 s^2))); the
        # general sum would square y / s, which overflows (or s * s underflows) for tiny s
        q = d / s
        loss = 0.5 * q * q  # inf when beyond the double range: then delta = 1
        return -math.expm1(eps - loss) if eps < loss else 0.0
    k1 = math.floor(a) + 1  # first integer y > a (the term at y == a is 0 anyway)
    log_z = float(_dg_log_normalizer(s))
    # the summand decays at least like exp(-(y^2 - k1^2)/(2 s^2)) beyond y >= max(k1, 0), and
    # is at most p(y) < exp(-800) for y < -40 s - 2: those terms are dropped
    start0 = max(k1, 0)
    first = max(k1, -math.ceil(40.0 * s) - 2)
    width = math.sqrt(start0 * start0 + 80.0 * s * s) - start0 + 2.0
    n_terms = (start0 - first) + width
    if n_terms <= _MAX_TERMS:
        y = np.arange(first, start0 + math.ceil(width) + 1, dtype=np.float64)
        z = y / s
        arg = eps - (2.0 * y * d + d * d) / (2.0 * s * s)
        with np.errstate(divide="ignore"):  # log 0 = -inf: a term that is exactly 0
            log_terms = -0.5 * z * z + np.log(-np.expm1(np.minimum(arg, 0.0))) - log_z
        return float(math.fsum(np.exp(log_terms).tolist()))
    z_ = math.exp(log_z)
    # e^eps * tail(k1 + d) <= tail(k1) in exact arithmetic, but e^eps alone can overflow
    # (eps > 709) and the tail underflow: the product is formed in log space
    t1 = math.exp(_log_tail_em(k1, s))
    shifted = math.exp(min(eps + _log_tail_em(k1 + d, s), 709.0))
    res = (t1 - shifted) / z_
    return min(max(res, 0.0), 1.0)


def discrete_gaussian_sigma2_from_rho(rho, sensitivity: int = 1) -> Fraction:
    """The exact ``σ² = Δ²/(2ρ)`` giving ``ρ``-zCDP (CKS 2020, Thm. 4), as a ``Fraction``.

    Examples
    --------
    >>> discrete_gaussian_sigma2_from_rho(0.125)
    Fraction(4, 1)
    """
    r = as_positive_finite("rho", rho)
    sensitivity = as_positive_int("sensitivity", sensitivity)
    return Fraction(sensitivity * sensitivity) / (2 * Fraction(r))


#: relative tolerance of the discrete Gaussian sigma and epsilon root finds
DG_RTOL = 1e-12
#: calibration aims at delta * (1 - _DG_MARGIN) to absorb the float error of the curve
_DG_MARGIN = 1e-9


def _bisect_log(ok, lo: float, hi: float) -> float:
    """Bisection on ``log x`` to relative ``DG_RTOL``: upper end (``ok(hi)``)."""
    for _ in range(200):
        if hi / lo - 1.0 <= DG_RTOL:
            break
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def discrete_gaussian_sigma(epsilon, delta, sensitivity: int = 1, *, sigma_range=(1e-6, 1e7)):
    """Smallest sigma (rounded up, relative tolerance 1e-12) with ``δ(ε; σ) <= 0.999999999 δ``.

    Bisection on ``log σ`` of the exact curve :func:`discrete_gaussian_delta`, which decreases
    in ``σ``; the margin 1e-9 covers the float error of the sum. Every loop is bounded: the
    doubling search stops within ``log2(σ_max/σ_min) < 45`` steps and the bisection within about
    45 more. Returns a value in ``sigma_range``, or raises ``ValueError`` naming ``epsilon`` and
    ``delta`` when even the largest sigma does not meet the target.

    Examples
    --------
    >>> s = discrete_gaussian_sigma(1.0, 1e-6)
    >>> bool(discrete_gaussian_delta(1.0, s, 1) <= 1e-6)
    True
    """
    eps = as_positive_finite("epsilon", epsilon)
    dlt = as_unit_open("delta", delta)
    smin, smax = sigma_range
    target = dlt * (1.0 - _DG_MARGIN)

    def ok(s: float) -> bool:
        return discrete_gaussian_delta(eps, s, sensitivity) <= target

    if not ok(smax):
        raise ValueError(
            f"epsilon={epsilon!r}, delta={delta!r}, sensitivity={sensitivity} need sigma > "
            f"{smax:g}, which the exact int64 sampler cannot represent: raise epsilon or delta"
        )
    try:  # classical bound as a start, clipped to the allowed range
        hi = sensitivity * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    except (ArithmeticError, ValueError):
        hi = smax
    hi = min(max(hi, 1e-3), smax) if math.isfinite(hi) else smax
    for _ in range(64):
        if ok(hi):
            break
        hi = min(hi * 2.0, smax)
    lo = hi / 2.0
    for _ in range(64):
        if not ok(lo):
            break
        hi = lo
        lo /= 2.0
        if lo < smin:
            return max(hi, smin)
    return _bisect_log(ok, lo, hi)


def discrete_gaussian_epsilon(delta, sigma: float, sensitivity: int = 1) -> float:
    """Smallest ``ε`` with ``δ(ε) <= delta`` for the discrete Gaussian, rounded up (rtol 1e-12).

    Examples
    --------
    >>> e = discrete_gaussian_epsilon(1e-6, 4.0)
    >>> bool(discrete_gaussian_delta(e, 4.0, 1) <= 1e-6)
    True
    """
    dlt = as_unit_open("delta", delta)
    sigma = as_positive_finite("sigma", sigma)  # a NaN sigma gave epsilon 0.0
    sensitivity = as_positive_int("sensitivity", sensitivity)
    if sigma > _DG_CURVE_SIGMA_MAX:
        raise ValueError(
            f"sigma must be at most {_DG_CURVE_SIGMA_MAX:g} (the discrete Gaussian curve is "
            f"not evaluated beyond), got {sigma!r}"
        )

    def ok(e):
        return discrete_gaussian_delta(e, sigma, sensitivity) <= dlt

    if ok(0.0):
        return 0.0
    hi = 1.0
    # delta(epsilon) is exactly 0 once epsilon sigma**2 / sens - sens / 2 >= 40 sigma: the
    # doubling stops after at most about 1100 steps (a bound that is never reached)
    for _ in range(1100):
        if ok(hi):
            break
        hi *= 2.0
    lo = hi / 2.0 if hi > 1.0 else 0.0
    for _ in range(200):
        if hi - lo <= DG_RTOL * hi:
            break
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ---- the (epsilon, delta) curve of the Gaussian at another distance ----------------------------
def gaussian_delta_for_distance(epsilon, sigma, d_in, stated: tuple) -> float:
    """δ at ``ε`` of the Gaussian mechanism for a change of size ``d_in``, never under-counted.

    ``stated = (sensitivity, delta)``: the sensitivity and the δ the mechanism states for it
    (at least the curve's value there). Below the sensitivity the result is the smaller of the
    stated δ and a certified upper bound on the exact curve ``δ(ε; σ, d_in)`` (Balle & Wang 2018,
    Thm. 8; see ``_log_delta``); above it, the larger. So the map is monotone in ``d_in`` and
    returns the stated δ at the sensitivity. Where the curve cannot be evaluated reliably it is
    bounded by 1.

    Examples
    --------
    >>> gaussian_delta_for_distance(1.0, 3.73, 1.0, (1.0, 1e-5))
    1e-05
    >>> gaussian_delta_for_distance(1.0, 3.73, 0.5, (1.0, 1e-5)) < 1e-5
    True
    """
    sens, stated_delta = stated
    try:
        d = float(d_in)
    except OverflowError:  # beyond the double range: delta 1 (no guarantee) bounds it
        return 1.0
    if d == 0.0:
        return 0.0
    if d == sens:
        return stated_delta
    try:
        curve = min(1.0, math.exp(_log_delta(float(epsilon), d / sigma, upper=True)))
    except (ArithmeticError, ValueError):
        curve = 1.0
    return min(stated_delta, curve) if d < sens else max(stated_delta, curve)


# ---- repeated releases and zCDP of pure DP ----------------------------------------------------
def implied_rho(g: PrivacyGuarantee) -> float | None:
    """``ρ`` of a guarantee: its own, or ``ε²/2`` for pure ``ε``-DP (Bun & Steinke 2016,
    Prop. 1.4), rounded up; ``None`` when neither applies.

    Examples
    --------
    >>> implied_rho(PrivacyGuarantee(0.5)), implied_rho(PrivacyGuarantee(1.0, 1e-6))
    (0.125, None)
    """
    if g.rho is not None:
        return float(g.rho)
    if not g.claimed:
        return None
    if float(g.delta) == 0.0 and math.isfinite(g.epsilon):
        e = Fraction(float(g.epsilon))
        return round_up(e * e / 2)
    return None


def compose_repeated(g, k: int) -> PrivacyGuarantee:
    """``k`` releases with guarantee ``g`` (basic composition): ``kε``, ``min(1, kδ)``, ``kρ``.

    Each product is exact and rounded up (Dwork & Roth 2014, Thm. 3.16; Bun & Steinke 2016,
    Lemma 1.7). ``g`` may be a mechanism (its ``guarantee()``); ``k`` is a positive integer.

    Examples
    --------
    >>> compose_repeated(PrivacyGuarantee(0.5, 1e-6, 0.125), 3)
    PrivacyGuarantee(epsilon=1.5, delta=3e-06, rho=0.375)
    """
    g = _check_guarantee(0, g)
    if isinstance(k, bool | np.bool_) or not isinstance(k, numbers.Integral) or not k >= 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not g.claimed:
        return g
    k = Fraction(int(k))

    def times(x):
        x = float(x)
        return math.inf if x == math.inf else round_up(k * Fraction(x))

    rho = None if g.rho is None else times(g.rho)
    return PrivacyGuarantee(epsilon=times(g.epsilon), delta=min(1.0, times(g.delta)), rho=rho)
