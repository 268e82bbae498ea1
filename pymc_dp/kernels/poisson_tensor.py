r"""Exact Gibbs scan for Gamma-Poisson CP (canonical polyadic) tensor factorization.

The model (Schein et al. 2019, sec. 3: the multi-index :math:`\mathbf{i} = (i_1, \dots, i_M)`;
Schein et al. 2015): an ``I_1 x ... x I_M`` count tensor with

.. math::

    y_{\mathbf{i}} \sim \mathrm{Poisson}\Big(\sum_{c=1}^C \prod_{m=1}^M
    \theta^{(m)}_{i_m c}\Big), \quad \theta^{(m)}_{rc} \sim \mathrm{Gamma}(a, b).

Allocation: :math:`y_{\mathbf{i}} = \sum_c y_{\mathbf{i}c}`, given the total
:math:`\mathrm{Multinomial}(y_{\mathbf{i}}, \prod_m \theta^{(m)}_{i_m c} / \mu_{\mathbf{i}})`;
only the per-mode sums :math:`n^{(m)}_{rc} = \sum_{\mathbf{i}: i_m = r} y_{\mathbf{i}c}` are
kept. Given the allocation and the other modes, the rows of mode ``m`` are independent and

.. math::

    \theta^{(m)}_{rc} \mid \cdot \sim \mathrm{Gamma}\Big(a + n^{(m)}_{rc},\;
    b + \prod_{m' \ne m} \sum_{r'} \theta^{(m')}_{r'c}\Big)

(every cell observed). :func:`cp_scan` draws the allocation, then the modes in order, each
given the current others; every draw is from a full conditional of the augmented posterior,
so the scan is exact. Factors are kept on the log scale (shape ``< 1`` drawn as
:math:`\log G_{a+1} + \log(U)/a`). ``M = 2`` is Poisson matrix factorization
(:mod:`pymc_dp.kernels.poisson_factor`, with ``phi`` transposed).

Examples
--------
>>> import numpy as np
>>> y = np.arange(8).reshape(2, 2, 2)
>>> factors = cp_scan(y, [np.zeros((2, 3))] * 3, 0.1, 1.0, np.random.default_rng(0))
>>> [f.shape for f in factors]
[(2, 3), (2, 3), (2, 3)]
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.kernels.poisson_factor import _cumulative, _log_gamma1, _take, _unit

__all__ = ["cp_scan"]

# einsum letters of the modes (``c`` is the component)
_MODE_LETTERS = "ijkmnopqrstuvwxyzabdefgh"


@numba.njit(cache=True)
def _allocate(y, index, offsets, lf, bitgen, sums):  # pragma: no cover - compiled
    """``y`` (E,), ``index`` (E, M) row of each mode, ``lf`` the stacked log factors
    (sum_m I_m, C), ``offsets`` (M,); adds the per-mode sums into ``sums`` (same layout).
    The draws of :mod:`pymc_dp.kernels.poisson_factor`'s allocation."""
    n_modes = index.shape[1]
    k = lf.shape[1]
    w = np.empty(k)
    cum = np.empty(k)
    for e in range(y.shape[0]):
        n = y[e]
        if n <= 0:
            continue
        top = -np.inf
        for c in range(k):
            x = 0.0
            for m in range(n_modes):
                x += lf[offsets[m] + index[e, m], c]
            w[c] = x
            if x > top:
                top = x
        if top == -np.inf:
            return e
        total = _cumulative(w, top, cum)
        if n <= 2 * k:
            for _ in range(n):
                c = _unit(cum, total, bitgen)
                for m in range(n_modes):
                    sums[offsets[m] + index[e, m], c] += 1
        else:
            left = n
            rest = total
            for c in range(k):
                pc = math.exp(w[c] - top)
                got = left if c == k - 1 else _take(left, pc, rest, bitgen)
                if got > 0:
                    for m in range(n_modes):
                        sums[offsets[m] + index[e, m], c] += got
                left -= got
                rest -= pc
                if left == 0:
                    break
    return -1


@numba.njit(cache=True)
def _modes(lf, offsets, sizes, sums, a, b, bitgen):  # pragma: no cover - compiled
    n_modes = sizes.shape[0]
    k = lf.shape[1]
    col = np.zeros((n_modes, k))
    for m in range(n_modes):
        for r in range(sizes[m]):
            for c in range(k):
                col[m, c] += math.exp(lf[offsets[m] + r, c])
    for m in range(n_modes):
        for c in range(k):
            prod = 1.0
            for q in range(n_modes):
                if q != m:
                    prod *= col[q, c]
            new = 0.0
            for r in range(sizes[m]):
                row = offsets[m] + r
                lf[row, c] = _log_gamma1(a + sums[row, c], b + prod, bitgen)
                new += math.exp(lf[row, c])
            col[m, c] = new


def _positive(name, value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return x


def cp_scan(y, log_factors, a, b, rng, *, n_scans=1, alpha=None):
    """``n_scans`` Gibbs scans of a CP factorization of the count tensor ``y``.

    Parameters
    ----------
    y : array_like of int, shape (I_1, ..., I_M)
        Non-negative counts, ``M >= 2`` (the release if ``alpha`` is given).
    log_factors : sequence of array_like
        ``M`` arrays, the ``m``-th ``(I_m, C)``: the current factors on the log scale.
    a, b : float
        Shape and rate of the Gamma prior of every factor entry.
    rng : numpy.random.Generator
    n_scans : int, default 1
    alpha : float, optional
        Parameter of the two-sided geometric noise of the release ``y``: each scan then
        starts with an exact draw of the true counts given ``y`` and the current rates
        (:func:`pymc_dp.kernels.count_posterior.draw_true_counts`).

    Returns
    -------
    list of ndarray
        The new log factors.
    y_true : ndarray of int64, shaped like ``y``
        With ``alpha`` only (then the output is ``(log_factors, y_true)``): the true counts
        of the last scan.

    Raises
    ------
    ValueError
        Naming ``y``, ``log_factors``, ``a``, ``b`` or ``n_scans``.

    Examples
    --------
    With ``C = 1`` and the other modes fixed at 1, a row of mode 0 is ``Gamma(a + its total,
    b + I_1 I_2)``:

    >>> rng = np.random.default_rng(0)
    >>> y = np.array([[[2, 0], [1, 1]]])  # 1 x 2 x 2
    >>> z = np.zeros
    >>> draws = [cp_scan(y, [z((1, 1)), z((2, 1)), z((2, 1))], 1.0, 1.0, rng)[0][0, 0]
    ...          for _ in range(4000)]
    >>> round(float(np.mean(np.exp(draws))), 1)  # (1 + 4) / (1 + 4)
    1.0
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    y = np.asarray(y)
    if y.ndim < 2 or y.dtype.kind not in "iu" or (alpha is None and y.size and y.min() < 0):
        raise ValueError("y must be a tensor (ndim >= 2) of non-negative integer counts")
    lfs = [np.asarray(f, dtype=np.float64) for f in log_factors]
    if len(lfs) != y.ndim or any(
        f.ndim != 2 or f.shape != (y.shape[m], lfs[0].shape[1]) for m, f in enumerate(lfs)
    ):
        raise ValueError(
            f"log_factors must be {y.ndim} arrays (I_m, C) matching y's shape {y.shape}"
        )
    if any(np.isnan(f).any() or np.isposinf(f).any() for f in lfs):
        raise ValueError("log_factors must be finite or -inf (a zero factor)")
    a = _positive("a", a)
    b = _positive("b", b)
    if isinstance(n_scans, bool) or not isinstance(n_scans, (int, np.integer)) or n_scans < 1:
        raise ValueError(f"n_scans must be a positive integer, got {n_scans!r}")
    sizes = np.array(y.shape, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    lf = np.ascontiguousarray(np.concatenate(lfs, axis=0))
    flat = np.ascontiguousarray(y.reshape(-1), dtype=np.int64)
    index = np.ascontiguousarray(np.stack(np.unravel_index(np.arange(flat.size), y.shape), axis=1))
    modes = [slice(o, o + s) for o, s in zip(offsets, sizes, strict=True)]
    rates = ",".join(f"{m}c" for m in _MODE_LETTERS[: y.ndim]) + "->" + _MODE_LETTERS[: y.ndim]
    release = y
    for _ in range(int(n_scans)):
        if alpha is not None:
            mu = np.einsum(rates, *[np.exp(lf[m]) for m in modes])
            y = draw_true_counts(release, mu, alpha, rng)
            flat = y.reshape(-1)
        sums = np.zeros(lf.shape)
        bad = _allocate(flat, index, offsets, lf, rng.bit_generator, sums)
        if bad >= 0:
            raise ValueError(
                f"cell {tuple(int(i) for i in index[bad])} has a positive count but every "
                "component's rate is 0: the counts are impossible under these factors"
            )
        _modes(lf, offsets, sizes, sums, a, b, rng.bit_generator)
    factors = [lf[m].copy() for m in modes]
    return factors if alpha is None else (factors, y)
