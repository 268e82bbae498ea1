r"""Exact Gibbs scan for the Gamma-Poisson mixed-membership stochastic block model.

The model (Schein et al. 2019, sec. 5.2; Ball et al. 2011; Zhou 2015): ``V`` actors, ``C``
communities,

.. math::

    \theta_{ic} \sim \mathrm{Gamma}(a_\theta, b_\theta), \quad
    \pi_{cd} \sim \mathrm{Gamma}(a_\pi, b_\pi), \quad
    y_{ij} \sim \mathrm{Poisson}\Big(\mu_{ij} = \sum_{c,d} \theta_{ic}\theta_{jd}\pi_{cd}\Big)

for the observed ordered pairs :math:`(i, j)`, :math:`i \ne j` (rate parameterisation).
**Self-loops are excluded**: :math:`\mu_{ii}` holds :math:`\theta_{ic}\theta_{id}`, so
:math:`\theta_i`'s likelihood would hold :math:`\theta_{ic}^2` and products of its own
entries, and the Gamma full conditional below would not hold. The paper's networks (emails
from an actor to another) have no self-loops either. Held-out entries are simply left out of
the observed set.

Allocation (superposition, as in Poisson factorization): :math:`y_{ij} = \sum_{c,d}
y_{ijcd}` with independent :math:`y_{ijcd} \sim \mathrm{Poisson}(\theta_{ic}\theta_{jd}
\pi_{cd})`; given the total, the :math:`C^2` parts are
:math:`\mathrm{Multinomial}(y_{ij}, \theta_{ic}\theta_{jd}\pi_{cd} / \mu_{ij})`. Only their
sums are kept: the sender counts :math:`s_{ic} = \sum_{j,d} y_{ijcd}`, the receiver counts
:math:`r_{jd} = \sum_{i,c} y_{ijcd}` and the pair counts :math:`n_{cd} = \sum_{ij} y_{ijcd}`.

Actor ``i`` appears twice in the model, as a sender (in :math:`\mu_{ij}`) and as a receiver
(in :math:`\mu_{ji}`). Given the allocation and the other actors' rows, both roles are
linear in :math:`\theta_{ic}` (no self-loop), so

.. math::

    \theta_{ic} \mid \cdot \sim \mathrm{Gamma}\Big(a_\theta + s_{ic} + r_{ic},\;
    b_\theta + \sum_{j:(i,j)\,\mathrm{obs}} \sum_d \pi_{cd}\theta_{jd}
    + \sum_{j:(j,i)\,\mathrm{obs}} \sum_d \pi_{dc}\theta_{jd}\Big),

independently over ``c`` but **not** over ``i`` (the rate of row ``i`` holds the other
rows), so the rows are drawn one after the other, each given the current others (a
systematic-scan Gibbs sweep over the actors). Then

.. math::

    \pi_{cd} \mid \cdot \sim \mathrm{Gamma}\Big(a_\pi + n_{cd},\;
    b_\pi + \sum_{(i,j)\,\mathrm{obs}} \theta_{ic}\theta_{jd}\Big).

:func:`mmsb_scan` draws the allocation, the rows of ``theta`` in order, then ``pi``; each draw
is from a full conditional of the augmented posterior, so the scan leaves the posterior of
:math:`(\theta, \pi)` invariant. Factors are kept on the log scale; a Gamma draw of shape
:math:`a < 1` is made as :math:`\log G_{a+1} + \log(U)/a` (as in
:mod:`pymc_dp.kernels.poisson_factor`), finite whatever the shape.

Cost per scan: ``O(E C^2)`` for the ``E`` observed entries plus ``O(V^2 C)`` for the rows.

Examples
--------
>>> import numpy as np
>>> rows, cols = np.array([0, 1, 2]), np.array([1, 2, 0])
>>> send, recv, pairs = allocate_pairs([3, 0, 2], rows, cols, np.zeros((3, 2)),
...                                    np.zeros((2, 2)), np.random.default_rng(0))
>>> int(send.sum()), int(recv.sum()), int(pairs.sum())  # every unit allocated once
(5, 5, 5)
>>> lt, lp = mmsb_scan([3, 0, 2], rows, cols, np.zeros((3, 2)), np.zeros((2, 2)),
...                    0.1, 1.0, 0.1, 1.0, np.random.default_rng(1))
>>> lt.shape, lp.shape, bool(np.isfinite(lt).all() and np.isfinite(lp).all())
((3, 2), (2, 2), True)
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.kernels.poisson_factor import (
    _cumulative,
    _generator,
    _log_gamma1,
    _take,
    _unit,
)

__all__ = ["allocate_pairs", "mmsb_scan", "observed_pairs"]


@numba.njit(cache=True)
def _allocate(y, rows, cols, lt, lp, bitgen, send, recv, pairs):  # pragma: no cover - compiled
    """Allocate every count to the ``C x C`` community pairs (the draws of
    :mod:`pymc_dp.kernels.poisson_factor`'s allocation); returns -1, or the index of the
    first entry with a positive count whose every pair has weight zero."""
    c_n = lt.shape[1]
    k = c_n * c_n
    w = np.empty(k)
    cum = np.empty(k)
    for e in range(y.shape[0]):
        n = y[e]
        if n <= 0:
            continue
        i = rows[e]
        j = cols[e]
        top = -np.inf
        for c in range(c_n):
            for d in range(c_n):
                x = lt[i, c] + lt[j, d] + lp[c, d]
                w[c * c_n + d] = x
                if x > top:
                    top = x
        if top == -np.inf:
            return e
        total = _cumulative(w, top, cum)
        if n <= 2 * k:  # unit by unit
            for _ in range(n):
                q = _unit(cum, total, bitgen)
                c = q // c_n
                d = q - c * c_n
                send[i, c] += 1
                recv[j, d] += 1
                pairs[c, d] += 1
        else:  # sequential binomials
            left = n
            rest = total
            for q in range(k):
                pq = math.exp(w[q] - top)
                m = left if q == k - 1 else _take(left, pq, rest, bitgen)
                if m > 0:
                    c = q // c_n
                    d = q - c * c_n
                    send[i, c] += m
                    recv[j, d] += m
                    pairs[c, d] += m
                left -= m
                rest -= pq
                if left == 0:
                    break
    return -1


@numba.njit(cache=True)
def _theta_rows(lt, lp, observed, shape, a, b, bitgen):  # pragma: no cover - compiled
    """Redraw the rows of ``theta`` one after the other (module docstring), in place on
    ``lt``; ``observed`` is the ``V x V`` 0/1 matrix of observed entries (zero diagonal)."""
    n_v, c_n = lt.shape
    theta = np.exp(lt)
    pi = np.exp(lp)
    # exposure of row i as a sender (sum over its observed receivers of theta_j) and as a
    # receiver (sum over its observed senders), kept up to date as the rows change
    e_out = observed @ theta
    e_in = observed.T @ theta
    new = np.empty(c_n)
    for i in range(n_v):
        for c in range(c_n):
            rate = b[i, c]
            for d in range(c_n):
                rate += pi[c, d] * e_out[i, d] + pi[d, c] * e_in[i, d]
            lt[i, c] = _log_gamma1(a[i, c] + shape[i, c], rate, bitgen)
            new[c] = math.exp(lt[i, c])
        for k in range(n_v):
            o_ki = observed[k, i]
            o_ik = observed[i, k]
            if o_ki != 0.0 or o_ik != 0.0:
                for c in range(c_n):
                    delta = new[c] - theta[i, c]
                    e_out[k, c] += o_ki * delta
                    e_in[k, c] += o_ik * delta
        for c in range(c_n):
            theta[i, c] = new[c]


@numba.njit(cache=True)
def _pi_draw(lp, a, rate, shape, bitgen):  # pragma: no cover - compiled
    c_n = lp.shape[0]
    for c in range(c_n):
        for d in range(c_n):
            lp[c, d] = _log_gamma1(a[c, d] + shape[c, d], rate[c, d], bitgen)


def observed_pairs(n_actors, mask=None):
    """The observed ordered pairs ``(i, j)``, ``i != j``, not held out, row-major.

    Parameters
    ----------
    n_actors : int
        ``V``, positive.
    mask : array_like of bool, shape (V, V), optional
        ``True`` marks a held-out (unobserved) entry. The diagonal is never observed.

    Returns
    -------
    rows, cols : ndarray of int64
        Sender and receiver of each observed entry.

    Examples
    --------
    >>> rows, cols = observed_pairs(3, mask=[[0, 1, 0], [0, 0, 0], [0, 0, 0]])
    >>> list(zip(rows.tolist(), cols.tolist()))
    [(0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    """
    if isinstance(n_actors, bool) or not isinstance(n_actors, (int, np.integer)) or n_actors < 1:
        raise ValueError(f"n_actors must be a positive integer, got {n_actors!r}")
    v = int(n_actors)
    keep = ~np.eye(v, dtype=bool)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != (v, v) or m.dtype.kind not in "biu" or not np.isin(m, (0, 1)).all():
            raise ValueError(f"mask must be a ({v}, {v}) boolean matrix (True = held out)")
        keep &= ~m.astype(bool)
    rows, cols = np.nonzero(keep)
    return rows.astype(np.int64), cols.astype(np.int64)


def _check(y, rows, cols, log_theta, log_pi, *, release=False):
    y = np.asarray(y)
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(f"y must be a 1-D integer array of counts, got {y.dtype} {y.shape}")
    if not release and y.size and y.min() < 0:
        raise ValueError(f"y must be non-negative counts, got a minimum of {int(y.min())}")
    lt = np.ascontiguousarray(log_theta, dtype=np.float64)
    lp = np.ascontiguousarray(log_pi, dtype=np.float64)
    if lt.ndim != 2 or lp.shape != (lt.shape[1], lt.shape[1]):
        raise ValueError(
            f"log_theta must be (V, C) and log_pi (C, C), got {lt.shape} and {lp.shape}"
        )
    for name, arr in (("log_theta", lt), ("log_pi", lp)):
        if np.isnan(arr).any() or np.isposinf(arr).any():
            raise ValueError(f"{name} must be finite or -inf (a zero factor)")
    r = np.asarray(rows)
    c = np.asarray(cols)
    v = lt.shape[0]
    if (
        r.shape != y.shape
        or c.shape != y.shape
        or r.dtype.kind not in "iu"
        or c.dtype.kind not in "iu"
        or (r.size and (min(r.min(), c.min()) < 0 or max(r.max(), c.max()) >= v))
    ):
        raise ValueError(f"rows and cols must be integer indices in [0, {v}) shaped like y")
    if np.any(r == c):
        raise ValueError("rows and cols must not share an entry: self-loops (i, i) are excluded")
    return (
        np.ascontiguousarray(y, dtype=np.int64),
        np.ascontiguousarray(r, dtype=np.int64),
        np.ascontiguousarray(c, dtype=np.int64),
        lt,
        lp,
    )


def allocate_pairs(y, rows, cols, log_theta, log_pi, rng):
    """Sender, receiver and pair sums of one allocation of every count to community pairs.

    Parameters
    ----------
    y : array_like of int, shape (E,)
        Non-negative counts of the observed entries ``(rows[e], cols[e])``.
    rows, cols : array_like of int, shape (E,)
        Sender and receiver of each entry (:func:`observed_pairs`); ``rows != cols``.
    log_theta, log_pi : array_like, shapes (V, C) and (C, C)
    rng : numpy.random.Generator

    Returns
    -------
    send, recv : ndarray of int64, shape (V, C)
        ``send[i, c] = sum_{j,d} y_ijcd``, ``recv[j, d] = sum_{i,c} y_ijcd``.
    pairs : ndarray of int64, shape (C, C)
        ``pairs[c, d] = sum_{ij} y_ijcd``.

    Examples
    --------
    >>> s, r, p = allocate_pairs([4], [0], [1], [[0.0, -np.inf], [-np.inf, 0.0]],
    ...                          np.zeros((2, 2)), np.random.default_rng(0))
    >>> s.tolist(), r.tolist(), p.tolist()
    ([[4, 0], [0, 0]], [[0, 0], [0, 4]], [[0, 4], [0, 0]])
    """
    rng = _generator(rng)
    y, r, c, lt, lp = _check(y, rows, cols, log_theta, log_pi)
    send = np.zeros(lt.shape, dtype=np.int64)
    recv = np.zeros(lt.shape, dtype=np.int64)
    pairs = np.zeros(lp.shape, dtype=np.int64)
    bad = _allocate(y, r, c, lt, lp, rng.bit_generator, send, recv, pairs)
    if bad >= 0:
        raise ValueError(
            f"entry ({int(r[bad])}, {int(c[bad])}) has count {int(y[bad])} but every "
            "community pair's rate is 0: the counts are impossible under these factors"
        )
    return send, recv, pairs


def _prior(name, value, shape):
    arr = np.asarray(value, dtype=np.float64)
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ValueError(f"{name} must be positive and finite")
    return np.ascontiguousarray(np.broadcast_to(arr, shape), dtype=np.float64)


@numba.njit(cache=True)
def _scan(
    y, rows, cols, observed, lt, lp, a_t, b_t, a_p, b_p, bitgen, theta, pi
):  # pragma: no cover
    """One scan in place on ``lt``, ``lp``; returns -1 or the index of an impossible entry."""
    v, c_n = lt.shape
    send = np.zeros((v, c_n), dtype=np.int64)
    recv = np.zeros((v, c_n), dtype=np.int64)
    pairs = np.zeros((c_n, c_n), dtype=np.int64)
    bad = _allocate(y, rows, cols, lt, lp, bitgen, send, recv, pairs)
    if bad >= 0:
        return bad
    if theta:
        _theta_rows(lt, lp, observed, (send + recv).astype(np.float64), a_t, b_t, bitgen)
    if pi:
        th = np.exp(lt)
        rate = b_p.copy()
        for e in range(y.shape[0]):  # sum over observed (i, j) of theta_i theta_j^T
            i = rows[e]
            j = cols[e]
            for c in range(c_n):
                for d in range(c_n):
                    rate[c, d] += th[i, c] * th[j, d]
        _pi_draw(lp, a_p, rate, pairs.astype(np.float64), bitgen)
    return -1


def mmsb_scan(
    y,
    rows,
    cols,
    log_theta,
    log_pi,
    a_theta,
    b_theta,
    a_pi,
    b_pi,
    rng,
    *,
    theta=True,
    pi=True,
    n_scans=1,
    alpha=None,
):
    """``n_scans`` Gibbs scans: allocation, the rows of ``theta`` in order, then ``pi``; with
    ``alpha``, each scan first redraws the true counts given the release ``y``.

    Parameters
    ----------
    y, rows, cols : array_like of int, shape (E,)
        Counts of the observed off-diagonal entries (the release if ``alpha`` is given) and
        their senders / receivers.
    log_theta, log_pi : array_like, shapes (V, C) and (C, C)
        Current factors on the log scale.
    a_theta, b_theta, a_pi, b_pi : array_like
        Gamma shapes and rates of the priors, broadcastable to the factors' shapes.
    rng : numpy.random.Generator
    theta, pi : bool, default True
        Which factors to redraw.
    n_scans : int, default 1
        Scans in a row (the inputs are checked once).
    alpha : float, optional
        Parameter of the two-sided geometric noise of the release ``y``: each scan then
        starts with an exact draw of the true counts given ``y`` and the current rates
        (:func:`pymc_dp.kernels.count_posterior.draw_true_counts`).

    Returns
    -------
    log_theta, log_pi : ndarray
        New factors on the log scale (fresh arrays).
    y_true : ndarray of int64, shape (E,)
        With ``alpha`` only: the true counts of the last scan.

    Examples
    --------
    With ``C = 1`` and ``pi`` fixed, two actors and one entry each way, row 0 is drawn first
    from ``Gamma(a + y_01 + y_10, b + 2 pi theta_1)``:

    >>> rng = np.random.default_rng(3)
    >>> lt = [mmsb_scan([2, 1], [0, 1], [1, 0], [[0.0], [0.0]], [[0.0]], 1.0, 1.0, 1.0,
    ...                 1.0, rng, pi=False)[0][0, 0] for _ in range(4000)]
    >>> round(float(np.mean(np.exp(lt))), 1)  # (1 + 3) / (1 + 2)
    1.3
    """
    rng = _generator(rng)
    y, r, c, lt, lp = _check(y, rows, cols, log_theta, log_pi, release=alpha is not None)
    if isinstance(n_scans, bool) or not isinstance(n_scans, (int, np.integer)) or n_scans < 1:
        raise ValueError(f"n_scans must be a positive integer, got {n_scans!r}")
    lt = lt.copy()
    lp = lp.copy()
    v = lt.shape[0]
    observed = np.zeros((v, v))
    observed[r, c] = 1.0
    a_t = _prior("a_theta", a_theta, lt.shape)
    b_t = _prior("b_theta", b_theta, lt.shape)
    a_p = _prior("a_pi", a_pi, lp.shape)
    b_p = _prior("b_pi", b_pi, lp.shape)
    release = y
    for _ in range(int(n_scans)):
        if alpha is not None:
            th = np.exp(lt)
            y = draw_true_counts(release, np.einsum("ec,cd,ed->e", th[r], np.exp(lp), th[c]),
                                 alpha, rng)  # fmt: skip
        bad = _scan(y, r, c, observed, lt, lp, a_t, b_t, a_p, b_p, rng.bit_generator, theta, pi)
        if bad >= 0:
            raise ValueError(
                f"entry ({int(r[bad])}, {int(c[bad])}) has count {int(y[bad])} but every "
                "community pair's rate is 0: the counts are impossible under these factors"
            )
    return (lt, lp) if alpha is None else (lt, lp, y)
