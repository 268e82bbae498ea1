"""Privacy accounting: pure functions of the privacy parameters, apart from any noise draw.

* :func:`laplace_epsilon` — the Laplace mechanism is ``Δ/b``-DP.
* :func:`gaussian_rho`, :func:`gaussian_sigma_from_rho` — the Gaussian mechanism is
  ``Δ²/(2σ²)``-zCDP (Bun & Steinke 2016, Prop. 1.6).
* :func:`analytic_gaussian_delta`, :func:`analytic_gaussian_epsilon`,
  :func:`analytic_gaussian_sigma` — the exact (ε, δ) curve of the Gaussian mechanism
  (Balle & Wang 2018, Thm. 8) and its inverses.
* :func:`compose` — basic sequential composition.
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
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy import optimize, special

from pymc_dp._validation import _as_real, as_positive_finite, as_unit_open
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "compose",
    "gaussian_rho",
    "gaussian_sigma_from_rho",
    "laplace_epsilon",
    "zcdp_to_approx_dp",
]

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
    """ε of the Laplace mechanism: ``ε = Δ / b`` (exact; pure DP).

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
    return d / b


def gaussian_rho(sigma, sensitivity=1.0) -> float:
    """zCDP ρ of the Gaussian mechanism: ``ρ = Δ² / (2σ²)`` (Bun & Steinke 2016, Prop. 1.6).

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
    return rho


def gaussian_sigma_from_rho(rho, sensitivity=1.0) -> float:
    """The σ giving ρ-zCDP: ``σ = Δ / sqrt(2ρ)`` (inverse of :func:`gaussian_rho`).

    Examples
    --------
    >>> gaussian_sigma_from_rho(0.5, sensitivity=2.0)
    2.0
    """
    r = as_positive_finite("rho", rho)
    d = as_positive_finite("sensitivity", sensitivity)
    return d / math.sqrt(2.0 * r)


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
    return math.log(0.5 * h) + math.log(integral)


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
    if isinstance(g, Mechanism):
        g = g.guarantee()
    if not isinstance(g, PrivacyGuarantee):
        raise TypeError(
            f"guarantees[{i}] must be a PrivacyGuarantee or a Mechanism, got {type(g).__name__}"
        )
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
        ``PrivacyGuarantee(0.0, 0.0, 0.0)`` (releasing nothing costs nothing).

    Returns
    -------
    PrivacyGuarantee

    Raises
    ------
    TypeError, ValueError
        For a non-guarantee, a NaN or negative ε / ρ, or δ outside [0, 1].

    Examples
    --------
    >>> from pymc_dp.mechanisms.base import PrivacyGuarantee
    >>> compose([PrivacyGuarantee(0.5), PrivacyGuarantee(0.25, 1e-6)])
    PrivacyGuarantee(epsilon=0.75, delta=1e-06, rho=None)
    >>> compose([PrivacyGuarantee(math.inf, 0.0, 0.125), PrivacyGuarantee(math.inf, 0.0, 0.375)])
    PrivacyGuarantee(epsilon=inf, delta=0.0, rho=0.5)
    """
    gs = [_check_guarantee(i, g) for i, g in enumerate(guarantees)]
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

    def eps_of(alpha: float) -> float:
        return (
            alpha * r + (log_inv_delta - math.log(alpha)) / (alpha - 1.0) + math.log1p(-1.0 / alpha)
        )

    def deriv(alpha: float) -> float:
        return r * (alpha - 1.0) ** 2 - (log_inv_delta - math.log(alpha))

    lo = 1.0 + 1e-12
    hi = 1.0 + math.sqrt(log_inv_delta / r) + 1.0
    if deriv(lo) >= 0.0:  # pragma: no cover - only for astronomically large rho
        return bs
    alpha = optimize.brentq(deriv, lo, hi, xtol=1e-15, maxiter=500)
    # a negative bound (large δ, tiny ρ) means (0, δ)-DP already holds
    return max(0.0, min(bs, eps_of(alpha)))
