r"""Exact direct draw of Poisson true counts given their two-sided geometric release.

Schein, Wu, Schofield, Zhou & Wallach (2019), "Locally Private Bayesian Inference for Count
Models": a true count :math:`y \sim \mathrm{Pois}(\mu)` is released as :math:`z = y + \tau`
(eq. 10) with :math:`\tau \sim \mathrm{2Geo}(\alpha)`, the pmf of eq. 6,
:math:`\frac{1-\alpha}{1+\alpha}\alpha^{|\tau|}` (Theorem 1: with :math:`\alpha =
e^{-\epsilon/N}`, eq. 8, the release is :math:`(N, \epsilon)`-private; the sign is corrected in
``docs/theory.md``, "Errata of the papers").
Their Theorems 2-3 (eqs. 9-16) reach the conditional of :math:`y` through auxiliary rates
:math:`\lambda^\pm` (:mod:`pymc_dp.kernels.count_augmentation`); here it is drawn directly,
without auxiliaries, as the errata note is possible:

.. math::

    P(y \mid z, \mu) \propto f(y) = \frac{\mu^y}{y!}\,\alpha^{|y - z|}, \qquad y \ge 0.

**Shape.** With :math:`x_1 = \mu\alpha`, :math:`x_2 = \mu/\alpha`, the successive ratios are
:math:`f(y+1)/f(y) = x_1/(y+1)` for :math:`y \ge z` and :math:`x_2/(y+1)` for :math:`y < z`
(a Poisson(:math:`x_1`) piece truncated to :math:`y \ge \max(z, 0)` and a Poisson(:math:`x_2`)
piece truncated to :math:`y < z`, the two pieces whose weights are the sums :math:`S_1, S_2` of
:mod:`pymc_dp.math.poisson_noise`). They decrease strictly in :math:`y` (:math:`x_1 \le x_2`),
so :math:`\log f` is strictly concave and its mode is
:math:`M = \lfloor \min(\max(z, x_1), x_2) \rfloor` (the first :math:`y` whose ratio is
:math:`\le 1`). Everything below works with :math:`f(y)/f(M) \le 1`, so nothing overflows
whatever :math:`\mu`, :math:`z` or :math:`\alpha`.

**Small mode** (:math:`M \le` ``SMALL_MODE`` = 50), or a narrow law (both ratios next to the
mode at most ``NARROW_RATIO`` = 0.9, e.g. a mode at the kink :math:`z`): inversion started at
the mode. The terms
:math:`f(y)/f(M)` are products of the ratios above, summed outwards from :math:`M` on each side
until the bound on the rest of that side, :math:`t\,r/(1-r)` (current term :math:`t`, last
ratio :math:`r`, which bounds every later ratio by log-concavity), is below :math:`2^{-60}` of
the sum: the neglected mass is below :math:`2^{-59}` of the total. The terms are kept in a
scratch buffer of 512 per side (for :math:`M \le 50`: at most :math:`M` on the left, and on
the right the ratios are below :math:`51/(y+1)`; for a narrow law the terms fall at least as
:math:`0.9^n` and :math:`9 \cdot 0.9^{415} < 2^{-60}`). A uniform :math:`u` is walked down
them in the order :math:`M, M+1, M-1, M+2, \dots`; the total :math:`T` is refined only as far
as the decision needs: the answer is the first value whose cumulative sum exceeds :math:`u`
times every total still possible (partial sums plus the tail bounds), so the result is the
exact inversion of the (truncated) law. A walk that runs past the last term (rounding) is
redrawn. The width of such a law is :math:`O(\sqrt{M + 1})` or :math:`O(1/(1 - 0.9))`, so
this costs :math:`O(1)`.

**Large mode**: rejection from an envelope built from log-concavity (exact: the envelope
dominates :math:`f` everywhere, and a draw :math:`y` from the envelope :math:`e` is kept with
probability :math:`f(y)/e(y)`). With :math:`D(y) = \log f(y) - \log f(M)`:

* on :math:`L < y < R` (containing :math:`M`), :math:`e = 1` (:math:`D \le 0` at the mode);
* for :math:`y \ge R > M`: :math:`D(y) \le D(R) + (y - R)\,s_R`, :math:`s_R = D(R + 1) - D(R)
  < 0`, because the increments of a concave sequence do not increase; a geometric tail;
* for :math:`y \le L < M`: the mirror image with :math:`s_L = D(L - 1) - D(L)` (draws below 0
  are rejected; no left tail when :math:`L \le 0`).

:math:`R - M` is where a drop of about 1 is expected, :math:`k = 2/(g + \sqrt{g^2 + 2/M})`
with :math:`g = -D(M+1)` (slope at the mode plus the curvature :math:`1/M` of
:math:`-\log y!`); when the kink :math:`z` lies between :math:`M` and that point, :math:`R = z`
is used instead if it gives a smaller envelope. The tail slopes are the closed-form ratios
above, :math:`s_R = \log(f(R+1)/f(R))`. The chord from :math:`(M, 0)` to :math:`(R, D(R))`
(or :math:`(L, D(L))`) lies below :math:`D` by concavity and serves as a squeeze: a flat-part
draw under it is kept without evaluating :math:`D`. The expected number of trials is the
envelope mass over the true mass: at most 1.4 over the tests' grid (mu up to 1e6, alpha from
1e-12 to 1 - 1e-9; asserted <= 1.6), :math:`O(1)` for any :math:`\mu`. :math:`D` is formed
without large cancellations,
:math:`D(y) = [\log\mathrm{Pois}(y; M) - \log\mathrm{Pois}(M; M)] + (y - M)\log(\mu/M)
- a(|y - z| - |M - z|)`, :math:`a = -\log\alpha`, with Loader's form of the Poisson log-pmf
(:func:`pymc_dp.math.poisson.log_poisson_scalar`: relative accuracy near 1e-15 where the
lgamma difference would lose 1e-9 at :math:`M = 10^6`).

The geometric tail draws invert :math:`P(G \ge g) = e^{s g}` exactly (up to the uniform's
53 bits); draws beyond :math:`2^{52}` (mass below :math:`e^{-10^{8}}` of the envelope for
:math:`\mu \le 10^{15}`) are rejected. Everything runs in one numba loop over the counts
(:func:`draw_true_counts`).

Examples
--------
>>> import numpy as np
>>> y = draw_true_counts(np.array([3, -2, 0, 12]), 4.0, 0.5, rng=1)
>>> y.shape, y.dtype, bool((y >= 0).all())
((4,), dtype('int64'), True)
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.np.random.generator_core import next_double

from pymc_dp.math.poisson import log_poisson_scalar

__all__ = [
    "MAX_ABS_Z",
    "MAX_MU",
    "NARROW_RATIO",
    "SMALL_MODE",
    "draw_true_counts",
    "posterior_mode",
]

#: modes up to this are drawn by inversion from the mode, larger ones by rejection unless
#: both ratios next to the mode are at most NARROW_RATIO (a narrow law: inversion too)
SMALL_MODE = 50
NARROW_RATIO = 0.9
#: largest rate accepted (the counts must stay exact in float64 and int64)
MAX_MU = 1e15
#: largest |z| accepted
MAX_ABS_Z = 2**50
_TAIL_EPS = 2.0**-60
_MAX_GEOM = 2.0**52
_MAX_TRIALS = 100_000
_BUF = 512
_INV = np.array([0.0] + [1.0 / j for j in range(1, SMALL_MODE + _BUF + 2)])


@numba.njit(cache=True)
def posterior_mode(z, mu, alpha):
    """Mode ``floor(min(max(z, mu alpha), mu / alpha))`` of :math:`P(y \\mid z, \\mu)`.

    Examples
    --------
    >>> int(posterior_mode(10, 4.0, 0.5)), int(posterior_mode(-3, 4.0, 0.5))
    (8, 2)
    """
    return np.int64(math.floor(min(max(float(z), mu * alpha), mu / alpha)))


@numba.njit(cache=True)
def _up(y, z, x1, x2):
    """``f(y + 1) / f(y)``."""
    return (x1 if y >= z else x2) / (y + 1.0)


@numba.njit(cache=True)
def _down(y, z, x1, x2):
    """``f(y - 1) / f(y)`` for ``y >= 1``."""
    return y / (x1 if y > z else x2)


@numba.njit(cache=True)
def _extend(k, m, law, buf, side, other_sum):
    """Append the next term ``f(y) / f(m)`` of side ``k`` (0: ``y > m``, 1: ``y < m``) to
    ``buf[k]``. ``side = (count, last term, sum, bound on the rest)``; the bound ``t r/(1-r)``
    uses the last ratio ``r``, which bounds every later one (log-concavity), and a side whose
    bound falls below ``2^-60`` of the running total is closed (bound 0)."""
    n, t, s, _ = side
    z, x1, x2 = law
    if k == 0:
        y = m + n
        inv = _INV[y + 1] if y + 1 < _INV.size else 1.0 / (y + 1.0)  # narrow laws: any y
        r = (x1 if y >= z else x2) * inv
    else:
        y = m - n
        r = y / (x1 if y > z else x2)
    t *= r
    buf[k, n] = t
    s += t
    b = t * r / (1.0 - r) if r < 1.0 else np.inf
    if b < _TAIL_EPS * (1.0 + s + other_sum) or n + 1 == _BUF or (k == 1 and y == 1):
        b = 0.0
    return n + 1, t, s, b


@numba.njit(cache=True)
def _draw_small(bitgen, m, law, buf):
    """Inversion from the mode ``m`` in the order m, m+1, m-1, m+2, ..., with the total
    refined only as far as each decision needs (small modes); ``buf`` is (2, 512) scratch."""
    right = (0, 1.0, 0.0, np.inf)
    left = (0, 1.0, 0.0, np.inf if m > 0 else 0.0)
    for _ in range(_MAX_TRIALS):
        u = next_double(bitgen)
        cum, y, pr, pl = 1.0, m, 0, 0
        while True:
            lo = 1.0 + right[2] + left[2]
            if cum > u * (lo + right[3] + left[3]):
                return y  # cum > u T for every total T still possible
            if cum > u * lo:  # undecided: tighten the side with the larger bound
                if right[3] >= left[3]:
                    right = _extend(0, m, law, buf, right, left[2])
                else:
                    left = _extend(1, m, law, buf, left, right[2])
                continue
            right_ok = pr < right[0] or right[3] > 0.0
            left_ok = pl < left[0] or left[3] > 0.0
            if right_ok and (pr <= pl or not left_ok):
                if pr == right[0]:
                    right = _extend(0, m, law, buf, right, left[2])
                    continue
                cum += buf[0, pr]
                pr += 1
                y = m + pr
            elif left_ok:
                if pl == left[0]:
                    left = _extend(1, m, law, buf, left, right[2])
                    continue
                cum += buf[1, pl]
                pl += 1
                y = m - pl
            else:
                break  # past the last term (rounding): draw again
    return -1


@numba.njit(cache=True)
def _rel_logf(y, c):
    """``D(y) = log f(y) - log f(m)`` for the constants ``c = (m, z, a, lpm, lmr, x1, x2)``."""
    m, z, a, lpm, lmr = c[0], c[1], c[2], c[3], c[4]
    return (log_poisson_scalar(y, m) - lpm) + (y - m) * lmr - a * (abs(y - z) - abs(m - z))


@numba.njit(cache=True)
def _log_ratio(c, y, d):
    """``log f(y + d) - log f(y)`` for ``d = +-1``, from the closed-form ratios."""
    if d > 0.0:
        return math.log(_up(y, c[1], c[5], c[6]))
    return math.log(_down(y, c[1], c[5], c[6]))


@numba.njit(cache=True)
def _tail(c, t, d):
    """Envelope side starting at ``t`` (direction ``d``): ``(t, D(t), slope, tail mass)``."""
    if d < 0.0 and t <= 0.0:
        return -1.0, -np.inf, -1.0, 0.0  # no left tail: the flat part reaches 0
    dt = _rel_logf(t, c)
    slope = _log_ratio(c, t, d)
    if not slope < 0.0:  # cannot happen beyond the mode (strict concavity); guard only
        return t, dt, slope, np.inf
    return t, dt, slope, math.exp(dt) / -math.expm1(slope)


@numba.njit(cache=True)
def _side(c, d):
    """One side of the envelope: the tail start, chosen as in the module docstring."""
    m, z = c[0], c[1]
    g = -_log_ratio(c, m, d)
    k = max(1.0, math.floor(2.0 / (g + math.sqrt(g * g + 2.0 / m))))
    best = _tail(c, m + d * k, d)
    if (z - m) * d > 0.0 and (m + d * k - z) * d > 0.0:  # the kink lies between
        alt = _tail(c, z, d)
        if abs(alt[0] - m) - 1.0 + alt[3] < abs(best[0] - m) - 1.0 + best[3]:
            best = alt
    return best


@numba.njit(cache=True)
def _geometric(bitgen, slope):
    """``G >= 0`` with ``P(G >= g) = exp(slope g)``; -1 beyond ``2^52``."""
    g = math.floor(math.log1p(-next_double(bitgen)) / slope)
    return g if g <= _MAX_GEOM else -1.0


@numba.njit(cache=True)
def _envelope(z, mu, alpha):
    """``(c, right side, left side)`` of the rejection envelope (large modes), for the tests:
    each side is ``(t, D(t), slope, tail mass)`` as :func:`_tail` returns it."""
    mf = float(posterior_mode(z, mu, alpha))
    lpm = log_poisson_scalar(mf, mf)
    c = (mf, float(z), -math.log(alpha), lpm, math.log(mu / mf), mu * alpha, mu / alpha)
    return c, _side(c, 1.0), _side(c, -1.0)


@numba.njit(cache=True)
def _propose(bitgen, m, right, left, width, total):
    """One draw ``y`` from the envelope with ``log e(y)`` and a lower bound on ``D(y)`` (the
    chord from the mode to the tail start, by concavity); ``y = -1`` for a draw to reject."""
    tr, dr, sr, mr = right
    tl, dl, sl, _ = left
    u = next_double(bitgen) * total
    if u < width:
        y = tl + 1.0 + math.floor(u)
        if y > m:
            return y, 0.0, dr * ((y - m) / (tr - m))
        if y < m and tl >= 0.0:
            return y, 0.0, dl * ((m - y) / (m - tl))
        return y, 0.0, 0.0 if y == m else -np.inf
    if u < width + mr:
        g = _geometric(bitgen, sr)
        return (tr + g if g >= 0.0 else -1.0), dr + (g * sr if g > 0.0 else 0.0), -np.inf
    g = _geometric(bitgen, sl)
    return (tl - g if g >= 0.0 else -1.0), dl + (g * sl if g > 0.0 else 0.0), -np.inf


@numba.njit(cache=True)
def _draw_large(bitgen, z, mu, alpha):
    """Rejection from the log-concave envelope (large modes), with the chord as squeeze."""
    c, right, left = _envelope(z, mu, alpha)
    width = right[0] - left[0] - 1.0
    total = width + right[3] + left[3]
    for _ in range(_MAX_TRIALS):
        y, log_env, lower = _propose(bitgen, c[0], right, left, width, total)
        if y < 0.0:
            continue
        log_v = math.log1p(-next_double(bitgen)) + log_env
        if log_v <= lower or log_v <= _rel_logf(y, c):
            return np.int64(y)
    return np.int64(-1)


@numba.njit(cache=True)
def _narrow(m, law):
    """Both ratios next to the mode are at most ``NARROW_RATIO``: the terms then fall at least
    geometrically by it, so each side closes within the 512-term buffer."""
    z, x1, x2 = law
    right = (x1 if m >= z else x2) / (m + 1.0)
    left = m / (x1 if m > z else x2)
    return right <= NARROW_RATIO and left <= NARROW_RATIO


@numba.njit(cache=True)
def _draw_one(bitgen, z, mu, alpha, buf):
    if mu == 0.0:
        return np.int64(0)
    m = posterior_mode(z, mu, alpha)
    law = (float(z), mu * alpha, mu / alpha)
    if m <= SMALL_MODE or _narrow(m, law):
        return np.int64(_draw_small(bitgen, m, law, buf))
    return _draw_large(bitgen, z, mu, alpha)


@numba.njit(cache=True)
def _draw_all(rng, z, mu, alpha, out):
    """One loop over the counts; ``mu`` and ``alpha`` of size 1 stand for every count. The
    draws read the Generator's bit generator directly (numba's ``next_double``): passing the
    Generator object down nested calls costs reference counting per call."""
    sm = 1 if mu.size > 1 else 0
    sa = 1 if alpha.size > 1 else 0
    bitgen = rng.bit_generator
    buf = np.empty((2, _BUF))
    for i in range(z.size):
        out[i] = _draw_one(bitgen, z[i], mu[i * sm], alpha[i * sa], buf)


def _validated(z, mu, alpha):
    """Flat int64/float64 arrays of ``z``'s size (``ValueError`` names the argument)."""
    z = np.asarray(z)
    if z.dtype.kind == "f":
        if not (np.all(np.isfinite(z)) and np.all(z == np.round(z))):
            raise ValueError("z must hold finite integers")
    elif z.dtype.kind not in "iu":
        raise ValueError(f"z must hold integers, got dtype {z.dtype}")
    if z.size and not np.all(np.abs(z) <= MAX_ABS_Z):
        raise ValueError(f"z must hold integers of magnitude <= 2**50, got {z.max()}")
    out = [np.ascontiguousarray(z, dtype=np.int64).ravel()]
    for name, v in (("mu", mu), ("alpha", alpha)):
        try:
            v = np.asarray(v, dtype=np.float64)
            if v.size != 1 or v.ndim > z.ndim:  # a scalar is passed as one value, no copy
                v = np.broadcast_to(v, z.shape)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{name} must be numbers broadcastable to z's shape") from err
        out.append(np.ascontiguousarray(v).ravel())
    if not np.all((out[1] >= 0.0) & (out[1] <= MAX_MU)):
        raise ValueError("mu must be finite and in [0, 1e15]")
    if not np.all((out[2] > 0.0) & (out[2] < 1.0)):
        raise ValueError("alpha must lie in (0, 1)")
    return out


def draw_true_counts(z, mu, alpha, rng=None) -> np.ndarray:
    r"""Exact draws of :math:`y_i \sim P(y \mid z_i, \mu_i, \alpha_i) \propto
    \mathrm{Pois}(y; \mu_i)\,\alpha_i^{|y - z_i|}` (method in the module docstring).

    Parameters
    ----------
    z : array_like of int
        Released (noisy) counts, ``|z| <= 2**50``.
    mu : float or array_like
        Poisson rates of the true counts, broadcast to ``z``; finite, in ``[0, 1e15]``
        (``mu = 0`` gives ``y = 0``).
    alpha : float or array_like
        Geometric noise parameters in (0, 1) (:math:`\alpha = e^{-\epsilon/N}`), broadcast to
        ``z``.
    rng : numpy.random.Generator or seed, optional

    Returns
    -------
    numpy.ndarray of int64
        The true counts, shaped like ``z``.

    Raises
    ------
    ValueError
        For non-integer or too large ``z``, ``mu`` outside ``[0, 1e15]`` or NaN, ``alpha``
        outside (0, 1), or shapes that do not broadcast; the message names the argument.

    Examples
    --------
    >>> import numpy as np
    >>> y = draw_true_counts(np.full(20_000, 7), 3.0, 0.5, rng=0)
    >>> p = np.array([3.0**k / math.factorial(k) * 0.5 ** abs(k - 7) for k in range(60)])
    >>> bool(abs(y.mean() - (np.arange(60) * p).sum() / p.sum()) < 0.05)
    True
    >>> draw_true_counts([1, 2], -1.0, 0.5)
    Traceback (most recent call last):
    ...
    ValueError: mu must be finite and in [0, 1e15]
    """
    rng = np.random.default_rng(rng)
    shape = np.shape(z)
    zf, muf, af = _validated(z, mu, alpha)
    y = np.empty(zf.size, dtype=np.int64)
    _draw_all(rng, zf, muf, af, y)
    if y.size and y.min() < 0:  # a trial cap was reached: cannot happen for valid inputs
        raise RuntimeError("draw_true_counts: no draw accepted within the trial cap")
    return y.reshape(shape)
