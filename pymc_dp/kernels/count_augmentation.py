r"""Skellam-Bessel augmentation of latent true counts under two-sided geometric noise.

Schein, Wu, Schofield, Zhou & Wallach (2019), "Locally Private Bayesian Inference for Count
Models", Section 4, eqs. 9-16, with the corrections of ``papers/ERRATA.md``. A true count
:math:`y \sim \mathrm{Pois}(\mu)` is released as :math:`z = y + \tau`,
:math:`\tau \sim \mathrm{2Geo}(\alpha)` (pmf :math:`\frac{1-\alpha}{1+\alpha}\alpha^{|\tau|}`).

Augmentation (eq. 9, Theorem 2): :math:`\tau = g^+ - g^-`, :math:`g^\pm \sim
\mathrm{Pois}(\lambda^\pm)`, :math:`\lambda^\pm \sim \mathrm{Exp}` with *mean*
:math:`\alpha/(1-\alpha)` (rate :math:`(1-\alpha)/\alpha`; then each :math:`g^\pm` is geometric,
:math:`P(g = k) = (1-\alpha)\alpha^k`). With :math:`\tilde y^+ = y + g^+ \sim
\mathrm{Pois}(\mu + \lambda^+)`, :math:`z = \tilde y^+ - g^-` is Skellam (eq. 11). One sweep:

1. eq. 13 (Theorem 3 with the ERRATA's argument): :math:`m \sim \mathrm{Bes}(|z|,
   2\sqrt{(\lambda^+ + \mu)\lambda^-})`, the minimum of :math:`\tilde y^+` and :math:`g^-`;
2. eq. 14: if :math:`z \le 0`, :math:`\tilde y^+ = m`, :math:`g^- = m - z`; else
   :math:`g^- = m`, :math:`\tilde y^+ = m + z`;
3. eq. 15: :math:`y \sim \mathrm{Binom}(\tilde y^+, \mu / (\mu + \lambda^+))`,
   :math:`g^+ = \tilde y^+ - y`;
4. eq. 16 *corrected* (ERRATA): :math:`\lambda^\pm \sim \mathrm{Gamma}(1 + g^\pm,
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

Everything runs in one numba loop over the counts (:func:`count_augmentation_sweep`); the
Bessel draw is :func:`pymc_dp.kernels.bessel_sampling.bessel_draw` (exact rejection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from pymc_dp.kernels.bessel_sampling import bessel_draw

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


def _as_inputs(z, mu, alpha):
    """Flat float64/int64 arrays of a common size, validated (ValueError names the input)."""
    z = np.asarray(z)
    if z.dtype.kind not in "iu":
        if not (np.all(np.isfinite(z)) and np.all(z == np.round(z))):
            raise ValueError("z must hold finite integers")
    z = z.astype(np.int64)
    mu = np.asarray(mu, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    shape = z.shape
    mu = np.ascontiguousarray(np.broadcast_to(mu, shape)).ravel()
    alpha = np.ascontiguousarray(np.broadcast_to(alpha, shape)).ravel()
    if not np.all(np.isfinite(mu) & (mu >= 0.0)):
        raise ValueError("mu must be finite and >= 0")
    if not np.all((alpha > 0.0) & (alpha < 1.0)):
        raise ValueError("alpha must lie in (0, 1)")
    return np.ascontiguousarray(z).ravel(), mu, alpha, shape


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


@numba.njit(cache=True)
def _augment_one(rng, z, mu, lp, lm):
    """Eqs. 13-15 for one count: ``(y, g_plus, g_minus)`` given the auxiliary rates."""
    m = bessel_draw(rng, abs(z), 2.0 * math.sqrt((lp + mu) * lm))
    if z <= 0:
        y_plus = m
        g_minus = m - z
    else:
        g_minus = m
        y_plus = m + z
    if mu == 0.0:
        y = 0
    elif lp == 0.0:
        y = y_plus
    else:
        y = rng.binomial(y_plus, mu / (mu + lp))
    return y, y_plus - y, g_minus


@numba.njit(cache=True)
def _sweep(rng, z, mu, alpha, lam_plus, lam_minus, y_out):
    for i in range(z.size):
        y, gp, gm = _augment_one(rng, z[i], mu[i], lam_plus[i], lam_minus[i])
        y_out[i] = y
        # eq. 16 corrected: Gamma(1 + g, rate 1 / alpha), i.e. scale alpha
        lam_plus[i] = rng.gamma(1.0 + gp, alpha[i])
        lam_minus[i] = rng.gamma(1.0 + gm, alpha[i])


@numba.njit(cache=True)
def _augment_all(rng, z, mu, lam_plus, lam_minus, y, gp, gm):
    for i in range(z.size):
        y[i], gp[i], gm[i] = _augment_one(rng, z[i], mu[i], lam_plus[i], lam_minus[i])


@numba.njit(cache=True)
def _redraw_all(rng, g_plus, g_minus, alpha, lam_plus, lam_minus):
    for i in range(g_plus.size):
        lam_plus[i] = rng.gamma(1.0 + g_plus[i], alpha[i])
        lam_minus[i] = rng.gamma(1.0 + g_minus[i], alpha[i])


def _flat_state(state: AuxRates, n: int):
    lp = np.ascontiguousarray(state.lam_plus, dtype=np.float64).ravel()
    lm = np.ascontiguousarray(state.lam_minus, dtype=np.float64).ravel()
    if lp.size != n or lm.size != n:
        raise ValueError(f"the auxiliary rates must hold {n} values each")
    if not np.all((lp >= 0.0) & (lm >= 0.0) & np.isfinite(lp) & np.isfinite(lm)):
        raise ValueError("the auxiliary rates must be finite and >= 0")
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
    z_f, mu_f, _, shape = _as_inputs(z, mu, 0.5)
    lp, lm = _flat_state(state, z_f.size)
    out = [np.empty(z_f.size, dtype=np.int64) for _ in range(3)]
    _augment_all(rng, z_f, mu_f, lp, lm, *out)
    return tuple(o.reshape(shape) for o in out)


def redraw_aux_rates(g_plus, g_minus, alpha, rng=None) -> AuxRates:
    """Eq. 16 (corrected, ERRATA): ``lambda ~ Gamma(1 + g, rate 1/alpha)`` for both parts.

    Examples
    --------
    >>> s = redraw_aux_rates([0, 5], [2, 0], 0.8, rng=1)
    >>> s.lam_plus.shape
    (2,)
    """
    rng = np.random.default_rng(rng)
    g_plus = np.asarray(g_plus, dtype=np.float64)
    g_minus = np.asarray(g_minus, dtype=np.float64)
    shape = g_plus.shape
    a = np.ascontiguousarray(np.broadcast_to(np.asarray(alpha, dtype=np.float64), shape)).ravel()
    if not np.all((a > 0.0) & (a < 1.0)):
        raise ValueError("alpha must lie in (0, 1)")
    lp, lm = np.empty(a.size), np.empty(a.size)
    gp = np.ascontiguousarray(g_plus).ravel()
    gm = np.ascontiguousarray(np.broadcast_to(g_minus, shape)).ravel()
    _redraw_all(rng, gp, gm, a, lp, lm)
    return AuxRates(lp.reshape(shape), lm.reshape(shape))
