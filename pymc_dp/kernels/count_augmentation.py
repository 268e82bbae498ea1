r"""Skellam-Bessel augmentation of latent true counts under two-sided geometric noise.

Schein, Wu, Schofield, Zhou & Wallach (2019), "Locally Private Bayesian Inference for Count
Models", Section 4, eqs. 9-16, with the corrections of ``docs/theory.md`` ("Errata of the
papers"). A true count
:math:`y \sim \mathrm{Pois}(\mu)` is released as :math:`z = y + \tau`,
:math:`\tau \sim \mathrm{2Geo}(\alpha)` (pmf :math:`\frac{1-\alpha}{1+\alpha}\alpha^{|\tau|}`).

Augmentation (eq. 9, Theorem 2): :math:`\tau = g^+ - g^-`, :math:`g^\pm \sim
\mathrm{Pois}(\lambda^\pm)`, :math:`\lambda^\pm \sim \mathrm{Exp}` with *mean*
:math:`\alpha/(1-\alpha)` (rate :math:`(1-\alpha)/\alpha`; then each :math:`g^\pm` is geometric,
:math:`P(g = k) = (1-\alpha)\alpha^k`). With :math:`\tilde y^+ = y + g^+ \sim
\mathrm{Pois}(\mu + \lambda^+)`, :math:`z = \tilde y^+ - g^-` is Skellam (eq. 11). One sweep:

1. eq. 13 (Theorem 3 with the errata's argument): :math:`m \sim \mathrm{Bes}(|z|,
   2\sqrt{(\lambda^+ + \mu)\lambda^-})`, the minimum of :math:`\tilde y^+` and :math:`g^-`;
2. eq. 14: if :math:`z \le 0`, :math:`\tilde y^+ = m`, :math:`g^- = m - z`; else
   :math:`g^- = m`, :math:`\tilde y^+ = m + z`;
3. eq. 15: :math:`y \sim \mathrm{Binom}(\tilde y^+, \mu / (\mu + \lambda^+))`,
   :math:`g^+ = \tilde y^+ - y`;
4. eq. 16 *corrected* (errata): :math:`\lambda^\pm \sim \mathrm{Gamma}(1 + g^\pm,
   \text{rate } 1/\alpha)` (prior rate :math:`(1-\alpha)/\alpha` plus 1 from the Poisson
   likelihood). The printed rate :math:`\alpha/(1-\alpha) + 1` is wrong unless
   :math:`\alpha = 1/2`.

Steps 1-3 draw :math:`(y, g^+, g^-)` exactly from their joint conditional given
:math:`(z, \mu, \lambda^\pm)`; step 4 draws :math:`\lambda^\pm` exactly given
:math:`g^\pm`. Alternating them is a Gibbs chain whose stationary law of :math:`y` is
:math:`P(y \mid z, \mu) \propto \mathrm{Pois}(y; \mu)\,\mathrm{2Geo}(z - y; \alpha)`. Given
:math:`y`, the auxiliaries are independent of :math:`\mu`, so a sampler that updates
:math:`\mu` from :math:`y` alone and keeps :math:`\lambda^\pm` between sweeps stays exact. The
state carried between sweeps is :math:`\lambda^\pm` only (:class:`AuxRates`).

Edge cases: :math:`\mu = 0` gives :math:`y = 0`; a :math:`\lambda^+` that underflowed to 0
(:math:`\alpha` near ``1e-300``) gives :math:`y = \tilde y^+`.

Everything runs in one numba loop over the counts (:func:`count_augmentation_sweep`), after one
validation pass (so that a bad input raises before any rate is updated); no temporaries beyond
the output. Each draw is exact:

* the Bessel draw is :func:`pymc_dp.kernels.bessel_sampling.bessel_draw_bitgen` with
  :math:`x = a^2/4 = (\lambda^+ + \mu)\lambda^-` (no square root): inversion from 0 with the
  normaliser bracketed for modes up to ``INVERSION_MODE_MAX``, mode-centred rejection beyond;
* the binomial (eq. 15) with :math:`p' = \min(p, q)` (the other side by :math:`n - k`): for
  :math:`n \le 64`, inversion from 0 with :math:`P(0) = q'^n` by
  repeated squaring (relative error at most :math:`n` ulp) and the ratio recurrence
  :math:`P(k) = P(k-1)\,(p'/q')(n-k+1)/k`; otherwise numba's implementation of numpy's
  algorithms (inversion, BTPE);
* :math:`\mathrm{Gamma}(1 + g)` (eq. 16) for :math:`g \le 2` as the sum of :math:`1 + g`
  standard exponentials (ziggurat; exact: a sum of i.i.d. Exp(1) is Gamma), otherwise numba's
  Marsaglia-Tsang.

Draws use the Generator's bit generator directly (``rng.bit_generator`` inside numba, with
numba's own ``next_double`` and ziggurat exponential): passing the Generator object through
nested numba calls costs reference counting on every call (measured: about 11 ns per count,
a third of a sparse sweep). Cost per count and the comparison with a numpy binomial draw:
``benchmarks/bench_count_augmentation.py``, ``benchmarks/results/count_augmentation_sweep.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.np.random.distributions import (
    random_binomial,
    random_standard_exponential,
    random_standard_gamma,
)
from numba.np.random.generator_core import next_double

from pymc_dp.kernels.bessel_sampling import A_MAX, NU_MAX, bessel_draw_bitgen

__all__ = [
    "AuxRates",
    "augment_true_counts",
    "count_augmentation_sweep",
    "init_aux_rates",
    "redraw_aux_rates",
]


@dataclass
class AuxRates:
    """The auxiliary rates :math:`\\lambda^+, \\lambda^-` of every count (float64 arrays)."""

    lam_plus: np.ndarray
    lam_minus: np.ndarray


def _flat(x, shape):
    """``x`` (float64) broadcast to ``shape`` and flattened, without copying a scalar: a
    one-element array for a scalar (the kernels read element ``i * step`` with ``step = 0``)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 1:
        return np.ascontiguousarray(x).reshape(1)
    return np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1)


def _as_inputs(z, mu, alpha):
    """Flat int64 ``z``, float64 ``mu`` and ``alpha`` (size 1 or ``z.size``), and the shape."""
    z = np.asarray(z)
    if z.dtype.kind not in "iu":
        if not (np.all(np.isfinite(z)) and np.all(z == np.round(z))):
            raise ValueError("z must hold finite integers")
    shape = z.shape
    z = np.ascontiguousarray(z.astype(np.int64, copy=False)).reshape(-1)
    return z, _flat(mu, shape), _flat(alpha, shape), shape


def init_aux_rates(alpha, shape, rng=None) -> AuxRates:
    """Auxiliary rates drawn from their prior, Exp with mean ``alpha / (1 - alpha)`` (eq. 9).

    Examples
    --------
    >>> s = init_aux_rates(0.5, (3,), rng=1)
    >>> s.lam_plus.shape, bool((s.lam_minus > 0).all())
    ((3,), True)
    """
    rng = np.random.default_rng(rng)
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), shape)
    if not np.all((a > 0.0) & (a < 1.0)):
        raise ValueError("alpha must lie in (0, 1)")
    mean = a / (1.0 - a)
    return AuxRates(rng.standard_exponential(shape) * mean, rng.standard_exponential(shape) * mean)


#: binomial sizes drawn by inversion (q^n by repeated squaring: relative error <= n ulp; at
#: most n/2 steps). Measured (ns per draw, thread CPU time): n = 64, p = 0.5: 56 against 82 for
#: numba's numpy algorithm; n = 8, p = 0.2: 20 against 38; beyond n = 64 numba's algorithm
_BINV_N_MAX = 64
#: Gamma(1 + g) as a sum of 1 + g standard exponentials up to this g, else Marsaglia-Tsang
#: (measured: 7 / 10 / 13 / 15 ns for g = 1 / 2 / 3 / 4 against 12 ns for Marsaglia-Tsang)
_GAMMA_SUM_MAX = 2
#: largest (lambda+ + mu) lambda- = a^2 / 4 (the Bessel sampler's A_MAX)
_X_MAX = 0.25 * A_MAX * A_MAX


@numba.njit(cache=True)
def _binomial_inversion(bitgen, n, p, q):
    """Binom(n, p) by inversion from 0, for ``p <= q = 1 - p`` and small ``n``: ``P(0) = q^n``
    by repeated squaring, then ``P(k) = P(k - 1) (p / q) (n - k + 1) / k``."""
    qn = 1.0
    b = q
    e = n
    while e > 0:
        if e & 1:
            qn *= b
        b *= b
        e >>= 1
    u = next_double(bitgen)
    if u < qn:
        return 0
    ratio = p / q
    k = 0
    px = qn
    while u >= px:
        u -= px
        k += 1
        if k == n:  # the rest of the mass (P(n) up to rounding)
            return n
        px *= ratio * (n - k + 1) / k
    return k


@numba.njit(cache=True)
def _binomial_draw(bitgen, n, p, q):
    """One exact Binom(n, p) draw, ``q = 1 - p`` given separately (both in [0, 1])."""
    if n == 0:
        return 0
    flip = p > q
    if flip:
        p, q = q, p
    if n <= _BINV_N_MAX:
        k = _binomial_inversion(bitgen, n, p, q)
    else:
        k = random_binomial(bitgen, n, p)
    return n - k if flip else k


@numba.njit(cache=True)
def _gamma_int_draw(bitgen, g, scale):
    """``scale`` times a Gamma(1 + g) draw, ``g >= 0`` an integer: a sum of ``1 + g``
    standard exponentials (ziggurat) for small ``g``, else numba's Marsaglia-Tsang."""
    if g > _GAMMA_SUM_MAX:
        return scale * random_standard_gamma(bitgen, 1.0 + g)
    s = random_standard_exponential(bitgen)
    for _ in range(g):
        s += random_standard_exponential(bitgen)
    return s * scale


@numba.njit(cache=True)
def _augment_one(bitgen, z, mu, lp, lm):
    """Eqs. 13-15 for one count: ``(y, g_plus, g_minus)`` given the auxiliary rates."""
    m = bessel_draw_bitgen(bitgen, float(abs(z)), (lp + mu) * lm)
    y_plus = m + max(z, 0)  # eq. 14, without a branch on the sign of z
    g_minus = m + max(-z, 0)
    if y_plus == 0 or mu == 0.0:
        y = 0
    elif lp == 0.0:
        y = y_plus
    else:
        inv = 1.0 / (mu + lp)
        y = _binomial_draw(bitgen, y_plus, mu * inv, lp * inv)
    return y, y_plus - y, g_minus


@numba.njit(cache=True)
def _check(z, mu, alpha, lam_plus, lam_minus):
    """0 if every input is valid, else a code naming the first bad input (``_ERRORS``)."""
    sm = 1 if mu.size > 1 else 0
    sa = 1 if alpha.size > 1 else 0
    for i in range(z.size):
        m = mu[i * sm]
        a = alpha[i * sa]
        lp = lam_plus[i]
        lm = lam_minus[i]
        if not (m >= 0.0 and m < np.inf):
            return 1
        if not (a > 0.0 and a < 1.0):
            return 2
        if not (lp >= 0.0 and lp < np.inf and lm >= 0.0 and lm < np.inf):
            return 3
        if not (z[i] >= -NU_MAX and z[i] <= NU_MAX):
            return 4
        if not ((lp + m) * lm <= _X_MAX):
            return 5
    return 0


_ERRORS = {
    1: "mu must be finite and >= 0",
    2: "alpha must lie in (0, 1)",
    3: "the auxiliary rates must be finite and >= 0",
    4: f"|z| must be at most {NU_MAX:g} (the Bessel sampler's NU_MAX)",
    5: f"(lambda+ + mu) lambda- must be at most {_X_MAX:g} (the Bessel sampler's A_MAX^2 / 4)",
}


def _validate(z, mu, alpha, lp, lm):
    code = _check(z, mu, alpha, lp, lm)
    if code:
        raise ValueError(_ERRORS[code])


@numba.njit(cache=True)
def _sweep(rng, z, mu, alpha, lam_plus, lam_minus, y_out):
    sm = 1 if mu.size > 1 else 0
    sa = 1 if alpha.size > 1 else 0
    bitgen = rng.bit_generator
    for i in range(z.size):
        y, gp, gm = _augment_one(bitgen, z[i], mu[i * sm], lam_plus[i], lam_minus[i])
        y_out[i] = y
        # eq. 16 corrected: Gamma(1 + g, rate 1 / alpha), i.e. scale alpha
        a = alpha[i * sa]
        lam_plus[i] = _gamma_int_draw(bitgen, gp, a)
        lam_minus[i] = _gamma_int_draw(bitgen, gm, a)


@numba.njit(cache=True)
def _augment_all(rng, z, mu, lam_plus, lam_minus, out):
    """Rows of ``out`` (3 x n): y, g+, g-."""
    sm = 1 if mu.size > 1 else 0
    bitgen = rng.bit_generator
    for i in range(z.size):
        out[0, i], out[1, i], out[2, i] = _augment_one(
            bitgen, z[i], mu[i * sm], lam_plus[i], lam_minus[i]
        )


@numba.njit(cache=True)
def _redraw_all(rng, g_plus, g_minus, alpha, lam_plus, lam_minus):
    sa = 1 if alpha.size > 1 else 0
    bitgen = rng.bit_generator
    for i in range(g_plus.size):
        lam_plus[i] = _gamma_int_draw(bitgen, g_plus[i], alpha[i * sa])
        lam_minus[i] = _gamma_int_draw(bitgen, g_minus[i], alpha[i * sa])


def _flat_state(state: AuxRates, n: int):
    lp = np.ascontiguousarray(state.lam_plus, dtype=np.float64).reshape(-1)
    lm = np.ascontiguousarray(state.lam_minus, dtype=np.float64).reshape(-1)
    if lp.size != n or lm.size != n:
        raise ValueError(f"the auxiliary rates must hold {n} values each")
    return lp, lm


def count_augmentation_sweep(z, mu, alpha, state: AuxRates, rng=None) -> np.ndarray:
    """One Gibbs sweep (eqs. 13-16): new true counts; ``state`` is updated in place.

    Parameters
    ----------
    z : array_like of int
        Released (noisy) counts.
    mu : array_like of float
        Poisson rates of the true counts (broadcast to ``z``), finite and >= 0.
    alpha : float or array_like
        Geometric noise parameter(s) in (0, 1), per count or scalar.
    state : AuxRates
        The auxiliary rates (same size as ``z``), replaced by their new draws.
    rng : numpy.random.Generator or seed

    Returns
    -------
    numpy.ndarray of int64
        The true counts, shaped like ``z``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([3, -2, 0, 12])
    >>> state = init_aux_rates(0.5, z.shape, rng=0)
    >>> y = count_augmentation_sweep(z, 4.0, 0.5, state, rng=1)
    >>> y.shape, y.dtype, bool((y >= 0).all())
    ((4,), dtype('int64'), True)
    """
    rng = np.random.default_rng(rng)
    z_f, mu_f, a_f, shape = _as_inputs(z, mu, alpha)
    lp, lm = _flat_state(state, z_f.size)
    _validate(z_f, mu_f, a_f, lp, lm)
    y = np.empty(z_f.size, dtype=np.int64)
    _sweep(rng, z_f, mu_f, a_f, lp, lm, y)
    state.lam_plus = lp.reshape(shape)
    state.lam_minus = lm.reshape(shape)
    return y.reshape(shape)


def augment_true_counts(z, mu, state: AuxRates, rng=None):
    """Eqs. 13-15 only: exact draws of ``(y, g_plus, g_minus)`` given the auxiliary rates.

    Examples
    --------
    >>> s = init_aux_rates(0.5, (2,), rng=0)
    >>> y, gp, gm = augment_true_counts([4, -1], 2.0, s, rng=1)
    >>> bool(((y + gp - gm) == [4, -1]).all())
    True
    """
    rng = np.random.default_rng(rng)
    z_f, mu_f, a_f, shape = _as_inputs(z, mu, 0.5)
    lp, lm = _flat_state(state, z_f.size)
    _validate(z_f, mu_f, a_f, lp, lm)
    out = np.empty((3, z_f.size), dtype=np.int64)
    _augment_all(rng, z_f, mu_f, lp, lm, out)
    return tuple(o.reshape(shape) for o in out)


def redraw_aux_rates(g_plus, g_minus, alpha, rng=None) -> AuxRates:
    """Eq. 16 (corrected, theory.md errata): ``lambda ~ Gamma(1 + g, rate 1/alpha)``, both parts.

    Examples
    --------
    >>> s = redraw_aux_rates([0, 5], [2, 0], 0.8, rng=1)
    >>> s.lam_plus.shape
    (2,)
    """
    rng = np.random.default_rng(rng)
    g_plus, g_minus = _counts(g_plus), _counts(g_minus)
    shape = np.broadcast_shapes(g_plus.shape, g_minus.shape)
    a = _flat(alpha, shape)
    if not np.all((a > 0.0) & (a < 1.0)):
        raise ValueError("alpha must lie in (0, 1)")
    gp = np.ascontiguousarray(np.broadcast_to(g_plus, shape)).reshape(-1)
    gm = np.ascontiguousarray(np.broadcast_to(g_minus, shape)).reshape(-1)
    lp, lm = np.empty(gp.size), np.empty(gp.size)
    _redraw_all(rng, gp, gm, a, lp, lm)
    return AuxRates(lp.reshape(shape), lm.reshape(shape))


def _counts(g):
    """``g`` as int64, refusing anything but non-negative integers."""
    g = np.asarray(g)
    if g.dtype.kind not in "iu" and not np.all(np.isfinite(g) & (g == np.round(g))):
        raise ValueError("g_plus and g_minus must hold non-negative integers")
    g = g.astype(np.int64)
    if not np.all(g >= 0):
        raise ValueError("g_plus and g_minus must hold non-negative integers")
    return g
