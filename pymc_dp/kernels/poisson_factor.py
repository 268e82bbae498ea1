r"""Exact Gibbs scan for Gamma-Poisson factorization by multinomial allocation of the counts.

The model (Schein et al. 2019, sec. 5; the non-private scan of their Alg. 1):

.. math::

    \theta_{dk} \sim \mathrm{Gamma}(a^\theta_{dk}, b^\theta_{dk}), \quad
    \phi_{kv} \sim \mathrm{Gamma}(a^\phi_{kv}, b^\phi_{kv}), \quad
    y_{dv} \sim \mathrm{Poisson}\Big(\sum_k \theta_{dk}\phi_{kv}\Big)

(rate parameterisation). By the superposition property, :math:`y_{dv} = \sum_k y_{dvk}` with
independent :math:`y_{dvk} \sim \mathrm{Poisson}(\theta_{dk}\phi_{kv})`, and given the total,
:math:`(y_{dv1}, \dots, y_{dvK}) \sim \mathrm{Multinomial}(y_{dv},\, \theta_{dk}\phi_{kv} /
\sum_j \theta_{dj}\phi_{jv})` (Schein et al.'s allocation step). Given the allocation, the
factors are conjugate:

.. math::

    \theta_{dk} \mid \cdot \sim \mathrm{Gamma}\Big(a^\theta_{dk} + \sum_v y_{dvk},\;
    b^\theta_{dk} + \sum_v \phi_{kv}\Big), \quad
    \phi_{kv} \mid \cdot \sim \mathrm{Gamma}\Big(a^\phi_{kv} + \sum_d y_{dvk},\;
    b^\phi_{kv} + \sum_d \theta_{dk}\Big).

:func:`factor_scan` draws the allocation given the current factors, then ``theta`` given the
allocation and ``phi``, then ``phi`` given the allocation and the new ``theta``. Each draw is
from a full conditional of the augmented posterior :math:`p(y_{\cdot\cdot k}, \theta, \phi \mid
y)`, so the scan leaves it invariant, and with it the posterior of :math:`(\theta, \phi)`. The
allocation is drawn afresh every scan and never kept: only its row sums :math:`\sum_v y_{dvk}`
and column sums :math:`\sum_d y_{dvk}` are formed (``O(D K + K V)`` memory).

Factors are handled on the log scale. Gamma draws of small shape underflow (a ``Gamma(0.001)``
draw is below the smallest float with probability about 0.5), so a draw of shape :math:`a < 1`
is made as :math:`\log G_{a+1} + \log(U)/a` (:math:`G_a = G_{a+1} U^{1/a}`, Marsaglia & Tsang
2000, sec. 5), exact in distribution and finite whatever the shape; allocation weights are
:math:`\exp(\log\theta_{dk} + \log\phi_{kv} - \max_j)`, so no product underflows either.

Cost per scan: one pass over the ``D V`` cells with ``K`` weights each, plus one draw per unit
of count for cells with :math:`y_{dv} \le 2K` (inverse CDF) or ``K - 1`` binomials otherwise.
Every random number is read from the ``numpy.random.Generator``'s bit generator inside numba,
so ``rng`` advances deterministically (same seed, same draws).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> y = np.array([[4, 0], [1, 7]])
>>> rows, cols = allocate_counts(y, np.zeros((2, 3)), np.zeros((3, 2)), rng)
>>> rows.sum(axis=1).tolist(), cols.sum(axis=0).tolist()  # every unit allocated once
([4, 8], [5, 7])
>>> lt, lp = factor_scan(y, np.zeros((2, 3)), np.zeros((3, 2)), 0.1, 1.0, 0.1, 1.0, rng)
>>> lt.shape, lp.shape, bool(np.all(np.isfinite(lt)) and np.all(np.isfinite(lp)))
((2, 3), (3, 2), True)
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.np.random.distributions import random_binomial, random_standard_gamma
from numba.np.random.generator_core import next_double

__all__ = ["allocate_counts", "draw_log_gamma", "factor_scan"]


@numba.njit(cache=True, inline="always")
def _cumulative(w, top, cum):  # pragma: no cover - compiled
    """``cum[j] = sum_{i <= j} exp(w[i] - top)`` for ``top = max(w)`` finite; returns
    ``cum[-1]``."""
    total = 0.0
    for j in range(w.shape[0]):
        total += math.exp(w[j] - top)
        cum[j] = total
    return total


@numba.njit(cache=True, inline="always")
def _unit(cum, total, bitgen):  # pragma: no cover - compiled
    """The component of one unit: inverse CDF of the weights ``cum`` (:func:`_cumulative`)."""
    u = next_double(bitgen) * total
    j = 0
    while j < cum.shape[0] - 1 and cum[j] <= u:
        j += 1
    return j


@numba.njit(cache=True, inline="always")
def _take(left, pj, rest, bitgen):  # pragma: no cover - compiled
    """Sequential binomial step: how many of the ``left`` units not yet allocated go to a
    component of weight ``pj``, the weights of it and the components after it summing to
    ``rest`` (the last component takes ``left``: ``pj == rest``)."""
    q = pj / rest if rest > 0.0 else 1.0
    if q >= 1.0:
        return left
    if q <= 0.0:
        return 0
    return random_binomial(bitgen, left, q)


@numba.njit(cache=True)
def _allocate(y, log_theta, log_phi, bitgen, rows, cols):  # pragma: no cover - compiled
    """Allocate every count to the components; add the row / column sums into ``rows``
    ``(D, K)`` and ``cols`` ``(K, V)``. Returns -1, or the flat index of the first cell with a
    positive count whose every component has weight zero (nothing allocated from there on).

    Per cell: unit by unit (:func:`_unit`) when ``y <= 2 K``, else sequential binomials
    (:func:`_take`). :mod:`pymc_dp.kernels.mmsb` and :mod:`pymc_dp.kernels.poisson_tensor`
    allocate with the same three helpers."""
    n_rows, n_cols = y.shape
    k = log_theta.shape[1]
    w = np.empty(k)
    cum = np.empty(k)
    for d in range(n_rows):
        for v in range(n_cols):
            n = y[d, v]
            if n <= 0:
                continue
            top = -np.inf
            for j in range(k):
                w[j] = log_theta[d, j] + log_phi[j, v]
                if w[j] > top:
                    top = w[j]
            if top == -np.inf:
                return d * n_cols + v
            total = _cumulative(w, top, cum)
            if n <= 2 * k:
                for _ in range(n):
                    j = _unit(cum, total, bitgen)
                    rows[d, j] += 1
                    cols[j, v] += 1
            else:
                left = n
                rest = total
                for j in range(k - 1):
                    pj = math.exp(w[j] - top)
                    c = _take(left, pj, rest, bitgen)
                    rows[d, j] += c
                    cols[j, v] += c
                    left -= c
                    rest -= pj
                    if left == 0:
                        break
                if left > 0:
                    rows[d, k - 1] += left
                    cols[k - 1, v] += left
    return -1


@numba.njit(cache=True)
def _log_gamma1(a, rate, bitgen):  # pragma: no cover - compiled
    """``log G``, ``G ~ Gamma(a, rate)``, finite for any shape ``a > 0`` (module docstring)."""
    if a >= 1.0:
        return math.log(random_standard_gamma(bitgen, a)) - math.log(rate)
    g = random_standard_gamma(bitgen, a + 1.0)
    u = next_double(bitgen)
    while u <= 0.0:
        u = next_double(bitgen)
    return math.log(g) + math.log(u) / a - math.log(rate)


@numba.njit(cache=True)
def _log_gamma(shape, rate, bitgen, out):  # pragma: no cover - compiled
    """``out = log G`` for ``G ~ Gamma(shape, rate)`` elementwise (flat arrays)."""
    for i in range(out.size):
        out[i] = _log_gamma1(shape[i], rate[i], bitgen)


def _generator(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _counts(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 2 or y.dtype.kind not in "iu":
        raise ValueError(f"y must be a 2-D integer array of counts, got {y.dtype} {y.shape}")
    if y.size and y.min() < 0:
        raise ValueError(f"y must be non-negative counts, got a minimum of {int(y.min())}")
    return np.ascontiguousarray(y, dtype=np.int64)


def _factors(y, log_theta, log_phi):
    lt = np.ascontiguousarray(log_theta, dtype=np.float64)
    lp = np.ascontiguousarray(log_phi, dtype=np.float64)
    if lt.ndim != 2 or lp.ndim != 2 or lt.shape[1] != lp.shape[0]:
        raise ValueError(
            "log_theta must be (D, K) and log_phi (K, V) with the same K, got "
            f"{lt.shape} and {lp.shape}"
        )
    if y.shape != (lt.shape[0], lp.shape[1]):
        raise ValueError(f"y must have shape {(lt.shape[0], lp.shape[1])}, got {y.shape}")
    if np.isnan(lt).any() or np.isnan(lp).any() or np.isposinf(lt).any() or np.isposinf(lp).any():
        raise ValueError("log_theta and log_phi must be finite or -inf (a zero factor)")
    return lt, lp


def allocate_counts(y, log_theta, log_phi, rng):
    """Row and column sums of one multinomial allocation of every count to the components.

    Parameters
    ----------
    y : array_like of int, shape (D, V)
        Non-negative counts.
    log_theta, log_phi : array_like, shapes (D, K) and (K, V)
        Logs of the factors; component ``k`` of cell ``(d, v)`` has probability proportional
        to ``exp(log_theta[d, k] + log_phi[k, v])``.
    rng : numpy.random.Generator

    Returns
    -------
    rows, cols : ndarray of int64, shapes (D, K) and (K, V)
        ``rows[d, k] = sum_v y_dvk`` and ``cols[k, v] = sum_d y_dvk``.

    Raises
    ------
    ValueError
        Naming ``y`` (not 2-D integer, negative) or ``log_theta``/``log_phi`` (shapes, NaN),
        or a cell with a positive count whose every component has weight zero.

    Examples
    --------
    >>> rows, cols = allocate_counts([[3]], [[0.0, -np.inf]], [[0.0], [0.0]],
    ...                              np.random.default_rng(1))
    >>> rows.tolist(), cols.tolist()
    ([[3, 0]], [[3], [0]])
    """
    rng = _generator(rng)
    y = _counts(y)
    lt, lp = _factors(y, log_theta, log_phi)
    rows = np.zeros(lt.shape, dtype=np.int64)
    cols = np.zeros(lp.shape, dtype=np.int64)
    bad = _allocate(y, lt, lp, rng.bit_generator, rows, cols)
    if bad >= 0:  # checked in the kernel's own pass: no (D, K, V) temporary per scan
        d, v = divmod(int(bad), y.shape[1])
        raise ValueError(
            f"cell ({d}, {v}) has count {int(y[d, v])} but every component's rate is 0 "
            "(log_theta + log_phi is -inf): the counts are impossible under these factors"
        )
    return rows, cols


def draw_log_gamma(shape, rate, rng) -> np.ndarray:
    """Logs of exact ``Gamma(shape, rate)`` draws, finite at any shape > 0.

    A shape ``a < 1`` is drawn as ``log G_{a+1} + log(U) / a`` (no underflow to ``log 0``).

    Parameters
    ----------
    shape, rate : array_like
        Positive and finite; broadcast together.
    rng : numpy.random.Generator

    Examples
    --------
    >>> x = draw_log_gamma(np.full(4, 1e-3), 1.0, np.random.default_rng(0))
    >>> bool(np.all(np.isfinite(x))), bool(np.min(x) < -700)  # exp(x) would underflow
    (True, True)
    """
    rng = _generator(rng)
    a, b = np.broadcast_arrays(np.asarray(shape, np.float64), np.asarray(rate, np.float64))
    for name, arr in (("shape", a), ("rate", b)):
        if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
            raise ValueError(f"{name} must be positive and finite")
    out = np.empty(a.shape, dtype=np.float64)
    _log_gamma(
        np.ascontiguousarray(a).ravel(),
        np.ascontiguousarray(b).ravel(),
        rng.bit_generator,
        out.reshape(-1),
    )
    return out


def factor_scan(
    y, log_theta, log_phi, a_theta, b_theta, a_phi, b_phi, rng, *, theta=True, phi=True
):
    """One Gibbs scan: allocation, then ``theta``, then ``phi`` (module docstring).

    Parameters
    ----------
    y : array_like of int, shape (D, V)
        The (true or imputed) counts.
    log_theta, log_phi : array_like, shapes (D, K) and (K, V)
        Current factors, on the log scale.
    a_theta, b_theta, a_phi, b_phi : array_like
        Gamma shapes and rates of the priors, broadcastable to the factors' shapes.
    rng : numpy.random.Generator
    theta, phi : bool, default True
        Which factors to redraw (a factor not redrawn is returned unchanged).

    Returns
    -------
    log_theta, log_phi : ndarray
        The new factors on the log scale (fresh arrays).

    Examples
    --------
    With ``phi`` fixed at 1 and ``K = 1``, ``theta`` given ``y`` is ``Gamma(a + sum_v y, b + V)``:

    >>> rng = np.random.default_rng(2)
    >>> draws = [np.exp(factor_scan([[3, 5]], [[0.0]], [[0.0, 0.0]], 2.0, 1.0, 1.0, 1.0,
    ...                             rng, phi=False)[0][0, 0]) for _ in range(4000)]
    >>> round(float(np.mean(draws)), 1)  # (2 + 8) / (1 + 2)
    3.3
    """
    rng = _generator(rng)
    y = _counts(y)
    lt, lp = _factors(y, log_theta, log_phi)
    rows, cols = allocate_counts(y, lt, lp, rng)
    if theta:
        rate = np.asarray(b_theta, np.float64) + np.exp(lp).sum(axis=1)[None, :]
        lt = draw_log_gamma(np.asarray(a_theta, np.float64) + rows, rate, rng)
    if phi:
        rate = np.asarray(b_phi, np.float64) + np.exp(lt).sum(axis=0)[:, None]
        lp = draw_log_gamma(np.asarray(a_phi, np.float64) + cols, rate, rng)
    return lt.copy() if lt is log_theta else lt, lp.copy() if lp is log_phi else lp
