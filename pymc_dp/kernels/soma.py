r"""Compiled attempts of the SOMA record sampler (single offer, multiple attempts).

Xiong & Ju (2025), "Single Offer, Multiple Attempts" (reference implementation: the public
repository ``Yifei-Xiong/SOMA-Sampler``), a Metropolis-Hastings update of the latent records
behind a differentially private release that mixes where the data-augmentation sampler of Ju,
Awan, Gong & Rao (2022) does not (an uninformative release: every record's own proposal is
accepted, but the chain moves through the states one record at a time).

Setting. With the parameters ``theta`` fixed, the target of the records ``x = (x_1, ..., x_n)``
is

.. math::

    \pi(x) \propto \prod_{i=1}^n f(x_i \mid \theta)\; \eta\bigl(z \mid T(x)\bigr),
    \qquad T(x) = C + \sum_i t(x_i),

with ``eta`` the density of the released values ``z`` given the statistic (the product over
released components ``k`` of ``logpdf(z_k - T_k, params_k)``), and the *same* record law ``f`` at
every position (exchangeable records).

One attempt (Xiong & Ju 2025, Algorithm 1):

1. draw one offer ``x* ~ f(. | theta)``;
2. for every position ``j``, weight the state with ``x_j`` replaced by ``x*``:
   ``w_j = eta(z | T - t(x_j) + t(x*))`` (per-record deltas: O(n m) for all ``j``);
3. pick ``j`` with probability ``w_j / W``, ``W = sum_j w_j``;
4. accept ``x_j <- x*`` with probability ``min(1, W / (W + w_cur - w_j))``,
   ``w_cur = eta(z | T)``.

Why it is exact (the Metropolis-Hastings ratio). From ``x`` to ``x'`` (``x`` with ``x_j = x*``)
the proposal density is ``f(x*) w_j / W``. The reverse move offers ``x_j`` from ``x'``; its
weight at position ``j`` is ``w_cur`` (it restores ``x``), and at any other position ``k`` the
state ``x'`` with ``x_k`` replaced by ``x_j`` is a permutation of ``x`` with ``x_k`` replaced by
``x*``: by exchangeability and the additive statistic it has the same ``T``, so its weight is
``w_k``. The reverse total is ``W' = W - w_j + w_cur``, and

.. math::

    \frac{\pi(x') f(x_j) w_{cur} / W'}{\pi(x) f(x^*) w_j / W}
    = \frac{f(x^*) w_j\, f(x_j)\, w_{cur}\, W}{f(x_j) w_{cur}\, f(x^*)\, w_j\, W'}
    = \frac{W}{W - w_j + w_{cur}} .

Since ``W >= w_j``, the probability is 1 when ``w_j >= w_cur``. For an ``epsilon``-DP release
it is at least ``min(1, w_j / w_cur) >= exp(-epsilon)``, the bound of the DA sampler.

Numerics. The weights are computed in log space; ``W``, ``w_j`` and ``w_cur`` are scaled by
``exp(-max_j log w_j)`` (log-sum-exp with the maximum subtracted), so ``W >= 1``; ``w_cur`` may
overflow to ``inf`` after scaling (then the probability is 0, correctly up to ``1e-300``). When
every weight is zero (or NaN) no position can be picked and the attempt is rejected: no NaN is
ever produced. A NaN log-weight counts as ``-inf``. A released component that a swap leaves
unchanged (``t(x*)_k = t(x_j)_k``: most cells of a one-hot table) contributes its current term
without a new density evaluation; ``log w_cur`` and those terms are recomputed from the
statistic after each accepted attempt.

A sweep is ``n`` attempts (:func:`soma_sweep_kernel`), each O(n m), so O(n^2 m) per sweep: SOMA
is for small and moderate ``n`` (hundreds to a few thousands of records). Positions whose
contribution rows are equal have equal weights: :func:`soma_sweep_grouped_kernel` keeps the
positions grouped by row (``K`` distinct rows) and picks a group with probability
``count_g w_g / W``, then a position of it uniformly, the same law in O(K m) per attempt (plus
O(K) to move an accepted position between groups): discrete records scale to large ``n``.

Which offer lands where is returned as a list of positions, and
:func:`records_from_replacements` builds the new record arrays from it (vectorized: the last
offer to land on a position wins).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from pymc_dp.kernels.noise_logpdf import call_logpdf, njit_for, specialised

__all__ = [
    "GroupState",
    "NoiseRows",
    "SomaState",
    "group_state",
    "records_from_replacements",
    "soma_sweep_grouped_kernel",
    "soma_sweep_kernel",
    "specialized_soma_kernels",
]


class SomaState(NamedTuple):
    """The state the attempts update in place.

    Attributes
    ----------
    stat : float64[::1], shape (m,)
        The running statistic ``T = C + sum_i t(x_i)``.
    t_cur : float64[:, ::1], shape (n, m)
        ``t(x_i)`` of the current records; row ``j`` becomes the offer's row when an offer
        lands on position ``j``.
    """

    stat: np.ndarray
    t_cur: np.ndarray


class NoiseRows(NamedTuple):
    """The released values and the noise parameters, one row per released component.

    Attributes
    ----------
    z : float64[::1], shape (m,)
    params : float64[:, ::1], shape (m, P)
        Row ``k`` is passed to the noise log-density for component ``k``
        (``Mechanism.numba_params``).
    """

    z: np.ndarray
    params: np.ndarray


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _log_eta(stat, noise, logpdf, lp):  # pragma: no cover - compiled
    """``log eta(z | stat)``, the sum over components; ``lp[k]`` gets component ``k``'s term."""
    z, params = noise
    out = 0.0
    for k in range(z.shape[0]):
        lp[k] = call_logpdf(logpdf, z[k] - stat[k], params[k])
        out += lp[k]
    return out


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _log_weights(state, t_off, noise, logpdf, buf):  # pragma: no cover - compiled
    """Step 2: ``log w_j`` for every position ``j`` into ``buf[0]``; returns its maximum.

    The statistic after the swap is ``stat + (t(x*) - t(x_j))`` (the same expression the
    update uses). A component the swap leaves unchanged contributes its current term
    ``buf[3][k]`` (no evaluation: one-hot tables change two components of many). NaN counts
    as -inf.
    """
    stat, t_cur = state
    z, params = noise
    logw, lp = buf[0], buf[3]
    n, m = t_cur.shape
    top = -np.inf
    for j in range(n):
        lw = 0.0
        for k in range(m):
            d = t_off[k] - t_cur[j, k]
            if d != 0.0:
                lw += call_logpdf(logpdf, z[k] - (stat[k] + d), params[k])
            else:
                lw += lp[k]
        if lw != lw:
            lw = -np.inf
        logw[j] = lw
        if lw > top:
            top = lw
    return top


@numba.njit(cache=True)
def _pick(logw, top, u, w):  # pragma: no cover - compiled
    """Step 3: scaled weights ``w_j = exp(log w_j - top)`` into ``w``; returns ``(j, W)``.

    ``j`` is the first position whose cumulative scaled weight exceeds ``u W``; rounding in the
    cumulative sum can leave none, then the last position of positive weight is taken.
    """
    n = logw.shape[0]
    total = 0.0
    for j in range(n):
        w[j] = math.exp(logw[j] - top)
        total += w[j]
    target = u * total
    acc = 0.0
    last = -1
    for j in range(n):
        if w[j] > 0.0:
            last = j
            acc += w[j]
            if acc > target:
                return j, total
    return last, total


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _attempt(state, t_off, noise, logpdf, u2, buf):  # pragma: no cover - compiled
    """One attempt with the offer's row ``t_off``; returns ``(position or -1, probability)``.

    ``u2 = (u_pick, u_accept)``, ``buf = (logw, w, lw_cur, lp)`` scratch: ``lw_cur`` a
    1-vector holding the current ``log w_cur``, ``lp`` its per-component terms (both
    recomputed from the statistic on acceptance).
    """
    stat, t_cur = state
    logw, w, lw_cur, lp = buf
    top = _log_weights(state, t_off, noise, logpdf, buf)
    if not top > -np.inf:
        return -1, 0.0  # every weight is zero: nothing can be picked
    j, total = _pick(logw, top, u2[0], w)
    if logw[j] >= lw_cur[0]:
        prob = 1.0
    else:
        # W / (W + (w_cur - w_j)) with w_cur > w_j: no cancellation; w_cur may be inf
        prob = total / (total + (math.exp(lw_cur[0] - top) - w[j]))
    if not u2[1] < prob:
        return -1, prob
    for k in range(stat.shape[0]):
        stat[k] += t_off[k] - t_cur[j, k]
        t_cur[j, k] = t_off[k]
    lw_cur[0] = _log_eta(stat, noise, logpdf, lp)
    return j, prob


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def soma_sweep_kernel(state, t_offer, noise, logpdf, u, replaced):  # pragma: no cover - compiled
    """Sequential SOMA attempts, one per offer (Xiong & Ju 2025, Algorithm 1).

    Attempt ``a`` uses the offer whose contribution is ``t_offer[a]`` (the offers are drawn
    from the record law beforehand: they do not depend on the state). ``state`` is updated in
    place.

    Parameters
    ----------
    state : SomaState
        ``(stat (m,), t_cur (n, m))``, float64, C-contiguous; updated in place.
    t_offer : float64[:, ::1], shape (A, m)
        ``t(x*_a)`` of the ``A`` offers (a sweep: ``A = n``).
    noise : NoiseRows
        ``(z (m,), params (m, P))``.
    logpdf : numba function ``f(x: float64, params: float64[::1]) -> float64``
        The noise log-density (``Mechanism.numba_logpdf``).
    u : float64[:, ::1], shape (A, 2)
        Independent Uniform(0, 1) draws: column 0 picks the position, column 1 decides.
    replaced : int64[::1], shape (A,)
        Output: the position offer ``a`` replaced, or -1 when the attempt was rejected.

    Returns
    -------
    n_accepted : int
    min_prob : float
        Minimum over attempts of the acceptance probability (0 for an attempt where every
        weight was zero).
    mean_prob : float
        Mean over attempts of the acceptance probability.

    Examples
    --------
    Two records, a count released with Laplace noise; the offer is a 1 and is accepted:

    >>> import numpy as np
    >>> from pymc_dp.kernels.soma import NoiseRows, SomaState, soma_sweep_kernel
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=1.0)
    >>> state = SomaState(np.array([0.0]), np.zeros((2, 1)))
    >>> noise = NoiseRows(np.array([2.0]), mech.numba_params[None, :])
    >>> rep = np.empty(1, np.int64)
    >>> out = soma_sweep_kernel(state, np.ones((1, 1)), noise, mech.numba_logpdf,
    ...                         np.array([[0.3, 0.5]]), rep)
    >>> int(out[0]), rep.tolist(), state.stat.tolist(), state.t_cur.ravel().tolist()
    (1, [0], [1.0], [1.0, 0.0])
    """
    stat, t_cur = state
    n = t_cur.shape[0]
    n_att = t_offer.shape[0]
    buf = (np.empty(n), np.empty(n), np.empty(1), np.empty(stat.shape[0]))
    buf[2][0] = _log_eta(stat, noise, logpdf, buf[3])
    n_acc = 0
    min_prob = 1.0
    sum_prob = 0.0
    for a in range(n_att):
        j, prob = _attempt(state, t_offer[a], noise, logpdf, u[a], buf)
        replaced[a] = j
        n_acc += j >= 0
        sum_prob += prob
        if prob < min_prob:
            min_prob = prob
    return n_acc, min_prob, sum_prob / max(n_att, 1)


class GroupState(NamedTuple):
    """Records grouped by their contribution row, for :func:`soma_sweep_grouped_kernel`.

    Positions whose rows ``t(x_j)`` are equal have equal weights, so with ``K`` distinct rows
    an attempt costs O(K m) instead of O(n m). Built by :func:`group_state`.

    Attributes
    ----------
    stat : float64[::1], shape (m,)
        The running statistic.
    gid : int64[::1], shape (n,)
        Row (group) of each position.
    rows : float64[:, ::1], shape (K, m)
        The distinct rows (of the current records and of the offers).
    count : int64[::1], shape (K,)
        Positions in each group.
    perm : int64[::1], shape (n,)
        The positions ordered by group: group ``g`` is ``perm[start[g]:start[g + 1]]``.
    where : int64[::1], shape (n,)
        Index of each position in ``perm``.
    start : int64[::1], shape (K + 1,)
    """

    stat: np.ndarray
    gid: np.ndarray
    rows: np.ndarray
    count: np.ndarray
    perm: np.ndarray
    where: np.ndarray
    start: np.ndarray


def _distinct_rows(a):
    """The distinct rows of ``a`` (sorted) and the index of each row among them.

    A lexicographic sort and a comparison of neighbours (``np.unique(axis=0)`` is several times
    slower); rows are equal when every entry compares equal.
    """
    order = np.lexsort(a.T[::-1]) if a.shape[1] > 1 else np.argsort(a[:, 0], kind="stable")
    sa = a[order]
    new = np.empty(a.shape[0], dtype=np.bool_)
    new[:1] = True
    np.any(sa[1:] != sa[:-1], axis=1, out=new[1:])
    inv = np.empty(a.shape[0], dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return sa[new], inv


def group_state(stat, t_cur, t_offer):
    """The :class:`GroupState` of the current rows and the group of each offer.

    Parameters
    ----------
    stat : float64 array, shape (m,)
    t_cur : float64 array, shape (n, m)
    t_offer : float64 array, shape (A, m)

    Returns
    -------
    state : GroupState
    gid_offer : int64 ndarray, shape (A,)

    Examples
    --------
    >>> import numpy as np
    >>> gs, g_off = group_state(np.array([2.0]), np.array([[1.0], [0.0], [1.0]]),
    ...                         np.array([[0.0], [3.0]]))
    >>> gs.rows.ravel().tolist(), gs.gid.tolist(), gs.count.tolist(), g_off.tolist()
    ([0.0, 1.0, 3.0], [1, 0, 1], [1, 2, 0], [0, 2])
    """
    n = t_cur.shape[0]
    rows, inv = _distinct_rows(np.concatenate([t_cur, t_offer], axis=0))
    gid = np.ascontiguousarray(inv[:n])
    count = np.bincount(gid, minlength=rows.shape[0]).astype(np.int64)
    perm = np.argsort(gid, kind="stable").astype(np.int64)
    where = np.empty(n, dtype=np.int64)
    where[perm] = np.arange(n, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
    state = GroupState(
        np.array(stat, dtype=np.float64), gid, np.ascontiguousarray(rows, dtype=np.float64),
        count, perm, where, start,
    )  # fmt: skip
    return state, np.ascontiguousarray(inv[n:])


@numba.njit(cache=True)
def _swap(gs, i1, i2):  # pragma: no cover - compiled
    """Swap entries ``i1`` and ``i2`` of ``perm`` (and their ``where``)."""
    a, b = gs.perm[i1], gs.perm[i2]
    gs.perm[i1], gs.perm[i2] = b, a
    gs.where[a], gs.where[b] = i2, i1


@numba.njit(cache=True)
def _move(gs, j, b):  # pragma: no cover - compiled
    """Move position ``j`` to group ``b`` keeping the groups contiguous in ``perm`` (O(K))."""
    a = gs.gid[j]
    if a < b:
        for g in range(a, b):  # j becomes the first element of group g + 1
            _swap(gs, gs.where[j], gs.start[g + 1] - 1)
            gs.start[g + 1] -= 1
    else:
        for g in range(a, b, -1):  # j becomes the last element of group g - 1
            _swap(gs, gs.where[j], gs.start[g])
            gs.start[g] += 1
    gs.count[a] -= 1
    gs.count[b] += 1
    gs.gid[j] = b


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _group_weights(gs, g_off, noise, logpdf, buf):  # pragma: no cover - compiled
    """``log w_g`` of every group with positions (-inf for empty groups), its maximum."""
    z, params = noise
    logw, lp = buf[0], buf[3]
    top = -np.inf
    for g in range(gs.rows.shape[0]):
        lw = -np.inf
        if gs.count[g] > 0:
            lw = 0.0
            for k in range(z.shape[0]):
                d = gs.rows[g_off, k] - gs.rows[g, k]
                lw += call_logpdf(logpdf, z[k] - (gs.stat[k] + d), params[k]) if d != 0.0 else lp[k]
            if lw != lw:
                lw = -np.inf
        logw[g] = lw
        if lw > top:
            top = lw
    return top


@numba.njit(cache=True)
def _pick_group(gs, logw, top, u, w):  # pragma: no cover - compiled
    """A group with probability ``count_g w_g / W``; returns ``(g, W)`` (scaled weights)."""
    n_groups = gs.count.shape[0]
    total = 0.0
    for g in range(n_groups):
        w[g] = math.exp(logw[g] - top)
        total += gs.count[g] * w[g]
    target = u * total
    acc = 0.0
    last = -1
    for g in range(n_groups):
        if gs.count[g] > 0 and w[g] > 0.0:
            last = g
            acc += gs.count[g] * w[g]
            if acc > target:
                return g, total
    return last, total


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _group_attempt(gs, g_off, noise, logpdf, u3, buf):  # pragma: no cover - compiled
    """One attempt of the grouped kernel: ``(position or -1, probability)``."""
    logw, w, lw_cur = buf[0], buf[1], buf[2]
    top = _group_weights(gs, g_off, noise, logpdf, buf)
    if not top > -np.inf:
        return -1, 0.0
    g, total = _pick_group(gs, logw, top, u3[0], w)
    if logw[g] >= lw_cur[0]:
        prob = 1.0
    else:
        prob = total / (total + (math.exp(lw_cur[0] - top) - w[g]))
    if not u3[1] < prob:
        return -1, prob
    # a uniformly chosen position of group g
    i = min(int(u3[2] * gs.count[g]), gs.count[g] - 1)
    j = gs.perm[gs.start[g] + i]
    for k in range(gs.stat.shape[0]):
        gs.stat[k] += gs.rows[g_off, k] - gs.rows[g, k]
    _move(gs, j, g_off)
    lw_cur[0] = _log_eta(gs.stat, noise, logpdf, buf[3])
    return j, prob


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def soma_sweep_grouped_kernel(gs, gid_offer, noise, logpdf, u, replaced):  # pragma: no cover
    """:func:`soma_sweep_kernel` over groups of equal rows: the same law, O(K m) per attempt.

    Picking a position with probability ``w_j / W`` is done in two stages: a group ``g`` of
    positions with equal rows, with probability ``count_g w_g / W``, then a position of ``g``
    uniformly; the position is drawn only when the attempt is accepted (a rejected attempt
    changes nothing, whichever position of ``g`` was picked).

    Parameters
    ----------
    gs : GroupState
        Updated in place (:func:`group_state`).
    gid_offer : int64[::1], shape (A,)
        Group (row of ``gs.rows``) of each offer.
    noise : NoiseRows
    logpdf : numba function
    u : float64[:, ::1], shape (A, 3)
        Uniforms: the group, the decision, the position within the group.
    replaced : int64[::1], shape (A,)
        Output, as in :func:`soma_sweep_kernel`.

    Returns
    -------
    n_accepted, min_prob, mean_prob

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=1.0)
    >>> gs, g_off = group_state(np.array([0.0]), np.zeros((2, 1)), np.ones((1, 1)))
    >>> noise = NoiseRows(np.array([2.0]), mech.numba_params[None, :])
    >>> rep = np.empty(1, np.int64)
    >>> out = soma_sweep_grouped_kernel(gs, g_off, noise, mech.numba_logpdf,
    ...                                 np.array([[0.3, 0.5, 0.9]]), rep)
    >>> int(out[0]), rep.tolist(), gs.stat.tolist(), gs.rows[gs.gid].ravel().tolist()
    (1, [1], [1.0], [0.0, 1.0])
    """
    K = gs.rows.shape[0]
    buf = (np.empty(K), np.empty(K), np.empty(1), np.empty(gs.stat.shape[0]))
    buf[2][0] = _log_eta(gs.stat, noise, logpdf, buf[3])
    n_acc = 0
    min_prob = 1.0
    sum_prob = 0.0
    for a in range(gid_offer.shape[0]):
        j, prob = _group_attempt(gs, gid_offer[a], noise, logpdf, u[a], buf)
        replaced[a] = j
        n_acc += j >= 0
        sum_prob += prob
        if prob < min_prob:
            min_prob = prob
    return n_acc, min_prob, sum_prob / max(gid_offer.shape[0], 1)


def records_from_replacements(current, offers, replaced):
    """The record arrays after the attempts: the last offer landing on a position wins.

    Parameters
    ----------
    current : list of ndarray
        The records before the attempts, one array per record variable, record axis first
        (length ``n``). Not modified.
    offers : list of ndarray
        The offers, one array per record variable, record axis first (length ``A``): offer
        ``a`` is row ``a`` of every array.
    replaced : int64 ndarray, shape (A,)
        From :func:`soma_sweep_kernel`: the position offer ``a`` replaced, or -1.

    Returns
    -------
    list of ndarray
        New arrays (never the inputs), of the dtypes of ``current``.

    Examples
    --------
    >>> import numpy as np
    >>> cur = [np.array([0, 0, 0])]
    >>> offers = [np.array([7, 8, 9])]
    >>> records_from_replacements(cur, offers, np.array([2, -1, 2]))[0].tolist()
    [0, 0, 9]
    """
    replaced = np.asarray(replaced, dtype=np.int64)
    att = np.flatnonzero(replaced >= 0)
    # last attempt per position: np.unique on the reversed list keeps first occurrences
    pos_rev = replaced[att][::-1]
    pos, first = np.unique(pos_rev, return_index=True)
    src = att[::-1][first]
    out = []
    for c, o in zip(current, offers, strict=True):
        new = np.array(c, copy=True, order="C")
        new[pos] = np.asarray(o)[src]
        out.append(new)
    return out


_SOMA_CACHED: dict = {}


def specialized_soma_kernels(logpdf):
    """``(plain, grouped)``: :func:`soma_sweep_kernel` and :func:`soma_sweep_grouped_kernel`
    with ``logpdf`` fixed (the same arguments without ``logpdf``), built once per process, and
    compiled once per machine for the built-in noise families
    (:func:`pymc_dp.kernels.noise_logpdf.specialised`).

    Examples
    --------
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> pair = specialized_soma_kernels(Laplace(scale=1.0).numba_logpdf)
    >>> pair is specialized_soma_kernels(Laplace(scale=2.0).numba_logpdf), len(pair)
    (True, 2)
    """
    return specialised(_SOMA_CACHED, _build_soma, logpdf)


def _build_soma(f):
    @njit_for(f)
    def plain(state, t_offer, noise, u, replaced):  # pragma: no cover - compiled
        return soma_sweep_kernel(state, t_offer, noise, f, u, replaced)

    @njit_for(f)
    def grouped(gs, gid_offer, noise, u, replaced):  # pragma: no cover - compiled
        return soma_sweep_grouped_kernel(gs, gid_offer, noise, f, u, replaced)

    return plain, grouped
