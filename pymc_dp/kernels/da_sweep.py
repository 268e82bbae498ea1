"""Compiled accept/reject sweep of the data-augmentation sampler (Ju, Awan, Gong & Rao 2022).

With the parameters fixed, record ``i`` is proposed from its own model conditional
``x_i' ~ f(x | theta)`` and accepted with probability (Ju et al., "Tailoring the Sampler for DP")::

    min(1, eta(z | x_1, ..., x_i', ..., x_n) / eta(z | x_1, ..., x_i, ..., x_n))

When the released statistic is a sum over records, ``T(x) = C + sum_i t(x_i)``, the statistic
after the swap is ``T - t(x_i) + t(x_i')``, so one record costs O(size of T) instead of O(n)
(Ju et al., "Evaluating the Acceptance Threshold"). The noise log-density of each component
``k`` of the released vector is ``logpdf(z_k - T_k, params_k)``; the release density is the
product over components. Only this accept/reject loop is sequential; the proposals and the
per-record contributions ``t(x_i)``, ``t(x_i')`` are computed vectorized beforehand.

:func:`da_sweep_cached` is the kernel the step uses: it takes the contributions of the
proposed records ``t(x_i')`` and of the current records ``t(x_i)`` separately, the latter kept
by the step from one sweep to the next (after a sweep the current contributions are those of the
accepted proposals, which the kernel copies in place), so a sweep evaluates ``t`` only on the
``n`` proposals. Records whose proposal changes neither the statistic nor the observed-child
likelihood have ratio 1 and are accepted without a uniform draw or a density evaluation
(:func:`changed_records` lists the others), and a uniform draw is compared with
``min(1, ratio)`` instead of its logarithm with the log-ratio (the same event), so no logarithm
is taken.

An optional per-record term ``extra_i`` is added to the log acceptance ratio: it is
``log p(y_i | x_i') - log p(y_i | x_i)`` for observed per-record children ``y_i`` of the record
(public parts that depend on the private part), which makes the independence proposal from the
prior exact for the target ``prior x likelihood x eta``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = [
    "changed_records",
    "da_sweep_cached",
    "sensitivity_excess",
    "specialized_da_sweep_cached",
]


@numba.njit(cache=True)
def changed_records(t_prop, t_cur, extra, const, stat, idx):  # pragma: no cover - compiled
    """The statistic of the current records, and the records whose ratio is not identically 1.

    Record ``i`` is listed when ``t(x_i') != t(x_i)`` in some component or ``extra_i != 0``.
    Any other record has ratio exactly 1: it is accepted with probability 1 and its
    contribution to the statistic is unchanged.

    Parameters
    ----------
    t_prop, t_cur : float64[:, ::1], shape (n, m)
    extra : float64[::1], shape (n,)
    const : float64[::1], shape (m,)
        ``C`` in ``T = C + sum_i t(x_i)``.
    stat : float64[::1], shape (m,)
        Output: ``C + sum_i t(x_i)`` (summed in record order).
    idx : int64[::1], shape (n,)
        Output buffer; its first ``count`` entries are the listed records, in order.

    Returns
    -------
    count : int

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.da_sweep import changed_records
    >>> idx = np.empty(3, dtype=np.int64)
    >>> t_cur = np.array([[0.0], [1.0], [1.0]]); t_prop = np.array([[1.0], [1.0], [1.0]])
    >>> stat = np.empty(1)
    >>> c = changed_records(t_prop, t_cur, np.array([0.0, 0.0, 0.5]), np.array([0.5]), stat, idx)
    >>> idx[:c].tolist(), stat.tolist()
    ([0, 2], [2.5])
    """
    n = t_prop.shape[0]
    m = t_prop.shape[1]
    for k in range(m):
        acc = const[k]  # a local accumulator: no store/load through ``stat`` per record
        for i in range(n):
            acc += t_cur[i, k]
        stat[k] = acc
    count = 0
    for i in range(n):
        ch = extra[i] != 0.0
        for k in range(m):
            ch = ch | (t_prop[i, k] != t_cur[i, k])
        idx[count] = i
        count += ch
    return count


@numba.njit(cache=True)
def da_sweep_cached(
    stat, z, t_prop, t_cur, extra, idx, count, u, logpdf, params, shared, rejected
):  # pragma: no cover - compiled
    """Sequential accept/reject over the listed records, with ``t(x_i)`` kept in place.

    Only the records ``idx[:count]`` (from :func:`changed_records`) are visited; every other
    record has acceptance ratio 1 and is accepted. Listed record ``j`` is accepted when
    ``log_ratio >= 0`` or ``u[j] < exp(log_ratio)``, that is with probability
    ``min(1, ratio)``.

    Parameters
    ----------
    stat : float64[::1], shape (m,)
        The current statistic ``T(x)``; updated in place to that of the returned records.
    z : float64[::1], shape (m,)
        The released values.
    t_prop : float64[:, ::1], shape (n, m)
        ``t(x_i')``, contributions of the proposed records.
    t_cur : float64[:, ::1], shape (n, m)
        ``t(x_i)``, contributions of the current records. Row ``i`` is overwritten by
        ``t_prop[i]`` when record ``i`` is accepted, so on return it holds the contributions of
        the returned records.
    extra : float64[::1], shape (n,)
        Additional log acceptance ratio per record (observed children; zeros if none).
    idx : int64[::1] and count : int
        The listed records ``idx[:count]``.
    u : float64[::1], shape (>= count,)
        Independent Uniform(0, 1) draws, one per listed record.
    logpdf : numba function ``f(x: float64, params: float64[::1]) -> float64``
    params : float64[:, ::1], shape (m, P)
        Parameter row of each component.
    shared : bool
        All rows of ``params`` are equal: ``params[0]`` is used for every component (the same
        result; it lets the compiler hoist work that depends on the parameters only).
    rejected : int64[::1], shape (>= count,)
        Output: its first ``n_rejected`` entries are the records whose proposal was rejected.

    Returns
    -------
    n_accepted : int
    min_prob : float
        Minimum over all ``n`` records of ``min(1, ratio_i)``.
    mean_prob : float
        Mean over all ``n`` records of ``min(1, ratio_i)``.
    n_rejected : int

    Examples
    --------
    Record 0 raises the count towards z, record 1 lowers it,
    plus a third record whose proposal changes nothing:

    >>> import numpy as np
    >>> from pymc_dp.kernels.da_sweep import changed_records, da_sweep_cached
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=1.0)
    >>> stat = np.array([3.0]); idx = np.empty(3, np.int64); rej = np.empty(3, np.int64)
    >>> t_cur = np.array([[0.0], [1.0], [1.0]]); t_prop = np.array([[1.0], [0.0], [1.0]])
    >>> c = changed_records(t_prop, t_cur, np.zeros(3), np.zeros(1), np.empty(1), idx)
    >>> out = da_sweep_cached(stat, np.array([10.0]), t_prop, t_cur, np.zeros(3), idx, c,
    ...                       np.array([0.99, 0.5]), mech.numba_logpdf,
    ...                       mech.numba_params[None, :], True, rej)
    >>> int(out[0]), round(float(out[1]), 6), rej[: out[3]].tolist(), stat.tolist()
    (2, 0.367879, [1], [4.0])
    >>> t_cur.ravel().tolist()
    [1.0, 1.0, 1.0]
    """
    n = t_prop.shape[0]
    m = t_prop.shape[1]
    p0 = params[0]
    lp_cur = np.empty(m)
    lp_new = np.empty(m)
    for k in range(m):
        lp_cur[k] = logpdf(z[k] - stat[k], p0 if shared else params[k])
    n_rej = 0
    min_prob = 1.0
    sum_prob = 0.0
    for j in range(count):
        i = idx[j]
        log_ratio = extra[i]
        for k in range(m):
            d = t_prop[i, k] - t_cur[i, k]
            if d != 0.0:
                if shared:
                    lp_new[k] = logpdf(z[k] - (stat[k] + d), p0)
                else:
                    lp_new[k] = logpdf(z[k] - (stat[k] + d), params[k])
                log_ratio += lp_new[k] - lp_cur[k]
        if log_ratio >= 0.0:
            prob = 1.0
            accept = True
        else:
            prob = math.exp(log_ratio)
            accept = u[j] < prob
        if prob < min_prob:
            min_prob = prob
        sum_prob += prob
        if accept:
            for k in range(m):
                d = t_prop[i, k] - t_cur[i, k]
                if d != 0.0:
                    stat[k] += d
                    lp_cur[k] = lp_new[k]
                t_cur[i, k] = t_prop[i, k]
        else:
            rejected[n_rej] = i
            n_rej += 1
    # unlisted records: probability 1, accepted (their t is unchanged)
    sum_prob += n - count
    return n - n_rej, min_prob, sum_prob / max(n, 1), n_rej


@numba.njit(cache=True)
def sensitivity_excess(t_prop, t_cur, idx, count, comp_release, sens, l2):  # pragma: no cover
    """The first listed record whose change of a release exceeds that release's sensitivity.

    The change of release ``r`` when record ``i`` is replaced by its proposal is the norm of
    ``t_prop[i, k] - t_cur[i, k]`` over the components ``k`` of ``r``: L1, or L2 where
    ``l2[r]``. It exceeds the sensitivity when larger than ``sens[r] * (1 + 1e-9)`` (a relative
    allowance for rounding; ``sens[r] = inf`` disables the check for ``r``).

    Parameters
    ----------
    t_prop, t_cur : float64[:, ::1], shape (n, m)
    idx : int64[::1] and count : int
        The records to check, ``idx[:count]`` (those whose contribution changes).
    comp_release : int64[::1], shape (m,)
        Release index of each component.
    sens : float64[::1], shape (R,)
    l2 : bool[::1], shape (R,)

    Returns
    -------
    record : int
        The record, or -1 when none exceeds.
    release : int
    change : float

    Examples
    --------
    >>> import numpy as np
    >>> t_cur = np.zeros((3, 1)); t_prop = np.array([[0.0], [2.0], [1.0]])
    >>> idx = np.array([1, 2]); rel = np.zeros(1, np.int64)
    >>> sensitivity_excess(t_prop, t_cur, idx, 2, rel, np.array([1.0]), np.array([False]))
    (1, 0, 2.0)
    """
    n_rel = sens.shape[0]
    m = t_prop.shape[1]
    acc = np.zeros(n_rel)
    for j in range(count):
        i = idx[j]
        acc[:] = 0.0
        for k in range(m):
            d = t_prop[i, k] - t_cur[i, k]
            r = comp_release[k]
            if l2[r]:
                acc[r] += d * d
            else:
                acc[r] += abs(d)
        for r in range(n_rel):
            ch = math.sqrt(acc[r]) if l2[r] else acc[r]
            if ch > sens[r] * (1.0 + 1e-9):
                return i, r, ch
    return -1, -1, 0.0


_SPECIALIZED_CACHED: dict = {}


def specialized_da_sweep_cached(logpdf, shared):
    """:func:`da_sweep_cached` with ``logpdf`` and ``shared`` fixed at compile time.

    Cached per process. The returned function takes the arguments of :func:`da_sweep_cached`
    without ``logpdf`` and ``shared``.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=1.0)
    >>> sweep = specialized_da_sweep_cached(mech.numba_logpdf, True)
    >>> sweep is specialized_da_sweep_cached(mech.numba_logpdf, True)
    True
    >>> rej = np.empty(1, np.int64)
    >>> out = sweep(np.array([3.0]), np.array([10.0]), np.array([[0.0]]), np.array([[1.0]]),
    ...             np.zeros(1), np.zeros(1, np.int64), 1, np.array([0.5]),
    ...             mech.numba_params[None, :], rej)
    >>> rej[: out[3]].tolist(), round(float(out[1]), 6)
    ([0], 0.367879)
    """
    key = (logpdf, bool(shared))
    try:
        return _SPECIALIZED_CACHED[key]
    except KeyError:
        pass

    if shared:

        @numba.njit
        def sweep(
            stat, z, t_prop, t_cur, extra, idx, count, u, params, rejected
        ):  # pragma: no cover
            return da_sweep_cached(
                stat, z, t_prop, t_cur, extra, idx, count, u, logpdf, params, True, rejected
            )

    else:

        @numba.njit
        def sweep(
            stat, z, t_prop, t_cur, extra, idx, count, u, params, rejected
        ):  # pragma: no cover
            return da_sweep_cached(
                stat, z, t_prop, t_cur, extra, idx, count, u, logpdf, params, False, rejected
            )

    _SPECIALIZED_CACHED[key] = sweep
    return sweep
