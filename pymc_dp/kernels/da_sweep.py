"""Compiled accept/reject sweep of the data-augmentation sampler (Ju, Awan, Gong & Rao 2022).

With the parameters fixed, record ``i`` is proposed from its own model conditional
``x_i' ~ f(x | theta)`` and accepted with probability (Ju et al. 2022, "Tailoring the Sampler
for DP")::

    min(1, eta(z | x_1, ..., x_i', ..., x_n) / eta(z | x_1, ..., x_i, ..., x_n))

When the released statistic is a sum over records, ``T(x) = C + sum_i t(x_i)``, the statistic
after the swap is ``T - t(x_i) + t(x_i')``, so one record costs O(size of T) instead of O(n)
(Ju et al. 2022, "Evaluating the Acceptance Threshold"). The noise log-density of each
component ``k`` of the released vector is ``logpdf(z_k - T_k, params_k)``; the release density
is the product over components. Only this accept/reject loop is sequential; the proposals and
the per-record contributions ``t(x_i)``, ``t(x_i')`` are computed vectorized beforehand.

Two layers:

* the explicit-state API: :class:`DAState` (contributions of the current records and the
  statistic), :class:`DANoise` (released values, noise log-density, declared sensitivities),
  :func:`da_init` and the pure transition :func:`da_step` ``(state, t_prop, u, noise) ->
  (new_state, DAInfo)``, testable without a model;
* the buffer-level kernels the step adapter calls: :func:`changed_records`,
  :func:`sensitivity_excess`, :func:`da_sweep_cached` and :func:`specialized_da_sweep_cached`.
  :func:`da_step` is these kernels, fused where it pays, with the same law bit for bit given the
  same uniforms.

Cost of a sweep. Records whose proposal changes neither the statistic nor the observed-child
likelihood have ratio exactly 1: they are accepted without a uniform or a density evaluation
(:func:`changed_records` lists the others). A uniform ``u`` is compared with ``min(1, ratio)``
(the event ``log u < log ratio``) so no logarithm is taken. For a scalar statistic
(``m = 1``) without observed-child terms, the threshold ``min(1, ratio)`` depends only on the
current statistic ``s`` and the change ``d = t(x_i') - t(x_i)``; when both are integers (counts)
the thresholds are memoised in a table indexed by ``(s - s_c, d)`` for ``|s - s_c| <= 64``,
``|d| <= 4`` (``s_c`` the statistic where the table was last re-centred), filled on first use,
so the noise density and the exponential are evaluated a handful of times per sweep instead of
once per record. The memoised value is the very float that the direct evaluation returns (the
same expression of the same inputs), so decisions are identical. The accept/reject update is
written with selects rather than branches.

An optional per-record term ``extra_i`` is added to the log acceptance ratio: it is
``log p(y_i | x_i') - log p(y_i | x_i)`` for observed per-record children ``y_i`` of the record
(public parts that depend on the private part), which makes the independence proposal from the
prior exact for the target ``prior x likelihood x eta``.

References
----------
Ju, N., Awan, J. A., Gong, R. and Rao, V. A. (2022). Data augmentation MCMC for Bayesian
inference from privatized data. *Advances in Neural Information Processing Systems 35*.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.extending import overload

from pymc_dp.kernels.noise_logpdf import call_logpdf, njit_for, specialised

__all__ = [
    "DAInfo",
    "DANoise",
    "DAState",
    "SensitivityExceeded",
    "changed_records",
    "da_init",
    "da_step",
    "da_sweep_cached",
    "sensitivity_excess",
    "specialized_da_sweep_cached",
]

# threshold table of the scalar sweep: rows s - s_c in [-_W, _W], columns d in [-_D, _D]
_W = 64
_D = 4
_NW = 2 * _W + 1
_ND = 2 * _D + 1
# index of the d = 0 column of the middle row (s = s_c), and the range of that index over rows
_CENTRE = _W * _ND + _D
_BASE_MAX = (_NW - 1) * _ND + _D
# integers up to this magnitude are exact in float64, and so are sums of two of them
_EXACT = 2.0**52
# da_step draws the uniforms inside the sweep from a Generator when at least this many are
# needed (numba's dispatch on a Generator costs tens of microseconds; below, numpy draws them)
_GENERATOR_IN_SWEEP = 2**15
# relative allowance of the sensitivity check (rounding of the statistic)
_SENS_RTOL = 1e-9


def _uniform(u, j):  # pragma: no cover - replaced by the overload in compiled code
    """The ``j``-th uniform: ``u[j]`` for an array, the next ``u.random()`` for a Generator."""
    return u[j] if isinstance(u, np.ndarray) else u.random()


@overload(_uniform)
def _uniform_impl(u, j):  # pragma: no cover - compiled
    if isinstance(u, types.Array):
        return lambda u, j: u[j]
    return lambda u, j: u.random()


@numba.njit(cache=True)
def _small_int(x):  # pragma: no cover - compiled
    """``(int(x), True)`` when ``x`` is an integer of magnitude <= 2**52, else ``(0, False)``."""
    if abs(x) <= _EXACT:
        k = int(x)
        return k, k == x
    return 0, False


# ---------------------------------------------------------------- listing and the statistic


@numba.njit(cache=True)
def changed_records(t_prop, t_cur, extra, const, stat, idx):  # pragma: no cover - compiled
    """The statistic of the current records, and the records whose ratio is not identically 1.

    Record ``i`` is listed when ``t(x_i') != t(x_i)`` in some component or ``extra_i != 0``.
    Any other record has ratio exactly 1: it is accepted with probability 1 and its
    contribution to the statistic is unchanged.

    Parameters
    ----------
    t_prop, t_cur : float64[:, ::1], shape (n, m)
    extra : float64[::1], shape (n,) or (0,)
        Per-record log-ratio terms; an empty array means none (all zero).
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
    has_extra = extra.shape[0] > 0
    count = 0
    if m == 1:
        # one pass: the sum (in record order, a local accumulator) and the listing
        acc = const[0]
        for i in range(n):
            c = t_cur[i, 0]
            acc += c
            idx[count] = i
            count += (t_prop[i, 0] != c) | (has_extra and extra[i] != 0.0)
        stat[0] = acc
        return count
    stat[:] = const
    for i in range(n):
        ch = has_extra and extra[i] != 0.0
        for k in range(m):
            stat[k] += t_cur[i, k]
            ch |= t_prop[i, k] != t_cur[i, k]
        idx[count] = i
        count += ch
    return count


# ---------------------------------------------------------------- declared sensitivities


@numba.njit(cache=True)
def _change_norm(t_prop, t_cur, i, comp_release, l2, acc):  # pragma: no cover - compiled
    """``acc[r]``: the norm (L1, or L2 where ``l2[r]``) of record ``i``'s change of release
    ``r``."""
    acc[:] = 0.0
    for k in range(t_prop.shape[1]):
        d = t_prop[i, k] - t_cur[i, k]
        r = comp_release[k]
        if l2[r]:
            acc[r] += d * d
        else:
            acc[r] += abs(d)
    for r in range(acc.shape[0]):
        if l2[r]:
            acc[r] = math.sqrt(acc[r])


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
    thr = sens * (1.0 + _SENS_RTOL)
    if t_prop.shape[1] == 1:
        # one component, one release: the change is |d| (sqrt(d * d) in L2), and the largest
        # change is found first without an exit branch (sqrt is monotone; NaN never exceeds)
        r = comp_release[0]
        worst = 0.0
        for j in range(count):
            i = idx[j]
            d = t_prop[i, 0] - t_cur[i, 0]
            ch = d * d if l2[r] else abs(d)
            worst = ch if ch > worst else worst
        if not (math.sqrt(worst) if l2[r] else worst) > thr[r]:
            return -1, -1, 0.0
        for j in range(count):
            i = idx[j]
            d = t_prop[i, 0] - t_cur[i, 0]
            ch = math.sqrt(d * d) if l2[r] else abs(d)
            if ch > thr[r]:
                return i, r, ch
        return -1, -1, 0.0
    acc = np.empty(sens.shape[0])
    for j in range(count):
        i = idx[j]
        _change_norm(t_prop, t_cur, i, comp_release, l2, acc)
        for r in range(acc.shape[0]):
            if acc[r] > thr[r]:
                return i, r, acc[r]
    return -1, -1, 0.0


# ---------------------------------------------------------------- the sequential sweep


@numba.njit(cache=True)
def _threshold(log_ratio):  # pragma: no cover - compiled
    """``q`` with ``accept = u < q`` and ``min(1, ratio) = min(1, q)``: ``inf`` when
    ``log_ratio >= 0`` (accepted whatever ``u``), else ``exp(log_ratio)`` (NaN stays NaN:
    rejected)."""
    return np.inf if log_ratio >= 0.0 else math.exp(log_ratio)


@numba.njit(cache=True)
def _table_slot(exact, base, di, d_int, e):  # pragma: no cover - compiled
    """Index of the memoised threshold of change ``di`` in the row whose ``d = 0`` column is
    at ``base`` (row ``r``: ``base = r * _ND + _D``), or -1 when there is no such entry."""
    if exact and d_int and e == 0.0 and -_D <= di <= _D and _D <= base <= _BASE_MAX:
        return base + di
    return -1


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _sweep_scalar(stat, noise, recs, sel, logpdf):  # pragma: no cover - compiled
    """:func:`da_sweep_cached` for one component (``m = 1``), thresholds memoised for
    integer statistics. ``noise = (z, p0)``, ``recs = (t_prop, t_cur, extra)``,
    ``sel = (idx, count, u, rejected)``."""
    z, p0 = noise
    t_prop, t_cur, extra = recs
    idx, count, u, rejected = sel
    has_extra = extra.shape[0] > 0
    # 1-d views, and unsigned indices (numba adds no negative-index wraparound for them)
    tp = t_prop.reshape(t_prop.shape[0])
    tc = t_cur.reshape(t_cur.shape[0])
    table = np.full(_NW * _ND, np.nan)
    s = stat[0]
    exact = _small_int(s)[1]  # s is an exact integer; then s = s_c + (base - _CENTRE) / _ND
    base, last_reset = _CENTRE, 0
    lp_cur, lp_ok = 0.0, False  # log eta(z - s), evaluated when first needed
    n_rej, min_prob, sum_prob = 0, 1.0, 0.0
    for j in range(count):
        i = np.uintp(idx[np.uintp(j)])
        a, c = tp[i], tc[i]
        d = a - c
        e = extra[i] if has_extra else 0.0
        di, d_int = _small_int(d)
        if exact and not _D <= base <= _BASE_MAX and j - last_reset >= table.size:
            table[:] = np.nan  # re-centre on the current statistic (amortised O(1))
            base, last_reset = _CENTRE, j
        slot = _table_slot(exact, base, di, d_int, e)
        q = table[np.uintp(slot)] if slot >= 0 else np.nan
        if q != q:
            if not lp_ok:
                lp_cur, lp_ok = call_logpdf(logpdf, z - s, p0), True
            log_ratio = e
            if d != 0.0:
                log_ratio += call_logpdf(logpdf, z - (s + d), p0) - lp_cur
            q = _threshold(log_ratio)
            if slot >= 0:
                table[slot] = q
        acc = _uniform(u, np.uintp(j)) < q
        prob = 1.0 if q > 1.0 else q
        min_prob = prob if prob < min_prob else min_prob
        sum_prob += prob
        moved = acc & (d != 0.0)
        s_new = s + d
        exact &= (not moved) | (d_int & (abs(s_new) <= _EXACT))
        s = s_new if moved else s
        base = base + di * _ND if moved else base
        lp_ok &= not moved
        tc[i] = a if acc else c
        rejected[np.uintp(n_rej)] = i
        n_rej += not acc
    stat[0] = s
    return n_rej, min_prob, sum_prob


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _vector_log_ratio(state, noise, recs, i, shared, logpdf):  # pragma: no cover - compiled
    """Log ratio of record ``i`` (``lp_new`` filled for the components it changes).
    ``state = (stat, lp_cur, lp_new)``, ``noise = (z, params)``."""
    stat, lp_cur, lp_new = state
    z, params = noise
    t_prop, t_cur, extra = recs
    log_ratio = extra[i] if extra.shape[0] > 0 else 0.0
    for k in range(stat.shape[0]):
        d = t_prop[i, k] - t_cur[i, k]
        if d != 0.0:
            lp_new[k] = call_logpdf(
                logpdf, z[k] - (stat[k] + d), params[0] if shared else params[k]
            )
            log_ratio += lp_new[k] - lp_cur[k]
    return log_ratio


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _sweep_vector(stat, noise, recs, sel, logpdf, shared):  # pragma: no cover - compiled
    """:func:`da_sweep_cached` for any number of components. ``noise = (z, params)``."""
    z, params = noise
    t_prop, t_cur, _ = recs
    idx, count, u, rejected = sel
    m = stat.shape[0]
    lp_cur = np.empty(m)
    lp_new = np.empty(m)
    for k in range(m):
        lp_cur[k] = call_logpdf(logpdf, z[k] - stat[k], params[0] if shared else params[k])
    n_rej, min_prob, sum_prob = 0, 1.0, 0.0
    for j in range(count):
        i = idx[j]
        q = _threshold(_vector_log_ratio((stat, lp_cur, lp_new), noise, recs, i, shared, logpdf))
        acc = _uniform(u, j) < q
        prob = 1.0 if q > 1.0 else q
        min_prob = prob if prob < min_prob else min_prob
        sum_prob += prob
        if acc:
            for k in range(m):
                d = t_prop[i, k] - t_cur[i, k]
                if d != 0.0:
                    stat[k] += d
                    lp_cur[k] = lp_new[k]
                t_cur[i, k] = t_prop[i, k]
        else:
            rejected[n_rej] = i
            n_rej += 1
    return n_rej, min_prob, sum_prob


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def _sweep(stat, noise, recs, sel, logpdf, shared):  # pragma: no cover - compiled
    """The sweep on the scalar or the vector path; returns the four outputs of
    :func:`da_sweep_cached`."""
    n = recs[0].shape[0]
    count = sel[1]
    if stat.shape[0] == 1:
        n_rej, min_prob, sum_prob = _sweep_scalar(
            stat, (noise[0][0], noise[1][0]), recs, sel, logpdf
        )
    else:
        n_rej, min_prob, sum_prob = _sweep_vector(stat, noise, recs, sel, logpdf, shared)
    # unlisted records: probability 1, accepted (their t is unchanged)
    sum_prob += n - count
    return n - n_rej, min_prob, sum_prob / max(n, 1), n_rej


@numba.njit  # takes a function: numba cannot cache it on disk (a per-process key)
def da_sweep_cached(
    stat, z, t_prop, t_cur, extra, idx, count, u, logpdf, params, shared, rejected
):  # pragma: no cover - compiled
    """Sequential accept/reject over the listed records, with ``t(x_i)`` kept in place.

    Only the records ``idx[:count]`` (from :func:`changed_records`) are visited; every other
    record has acceptance ratio 1 and is accepted. Listed record ``j`` is accepted when
    ``log_ratio >= 0`` or ``u[j] < exp(log_ratio)``, that is with probability
    ``min(1, ratio)`` (Ju et al. 2022).

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
    extra : float64[::1], shape (n,) or (0,)
        Additional log acceptance ratio per record (observed children); empty or zeros if none.
    idx : int64[::1] and count : int
        The listed records ``idx[:count]``.
    u : float64[::1], shape (>= count,), or numpy.random.Generator
        Independent Uniform[0, 1) draws, one per listed record (``u[j]`` for ``idx[j]``, read
        whether or not the ratio is below 1). A Generator is drawn from with ``u.random()``
        once per listed record in order: the same numbers as ``u.random(count)``.
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
    sel = (idx, count, u, rejected)
    return _sweep(stat, (z, params), (t_prop, t_cur, extra), sel, logpdf, shared)


_SPECIALIZED_CACHED: dict = {}


def specialized_da_sweep_cached(logpdf, shared):
    """:func:`da_sweep_cached` with ``logpdf`` and ``shared`` fixed at compile time.

    Cached per process (:func:`pymc_dp.kernels.noise_logpdf.specialised`: on disk too, once
    per machine, for the built-in noise families). The returned function takes the arguments
    of :func:`da_sweep_cached` without ``logpdf`` and ``shared``.

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
    return specialised(_SPECIALIZED_CACHED, _build_sweep, logpdf, bool(shared))


def _build_sweep(logpdf, flag):
    """The sweep with ``logpdf`` (a density or a built-in kind) and ``shared`` fixed."""

    @njit_for(logpdf)
    def sweep(stat, z, t_prop, t_cur, extra, idx, count, u, params, rejected):  # pragma: no cover
        sel = (idx, count, u, rejected)
        return _sweep(stat, (z, params), (t_prop, t_cur, extra), sel, logpdf, flag)

    return sweep


# ---------------------------------------------------------------- explicit-state API


class DAState(NamedTuple):
    """State of the record block between sweeps (Ju et al. 2022, additive statistic).

    Attributes
    ----------
    t_cur : float64[:, ::1], shape (n, m)
        ``t(x_i)``, the contributions of the current records.
    const : float64[::1], shape (m,)
        ``C`` in ``T(x) = C + sum_i t(x_i)`` (replace it when it depends on other variables).
    stat : float64[::1], shape (m,)
        The statistic ``T(x)`` of the current records, as the last sweep left it (the running
        sum). :func:`da_step` re-sums it from ``t_cur`` and ``const`` at the start of each sweep
        (in record order), so rounding does not accumulate over sweeps.
    """

    t_cur: np.ndarray
    const: np.ndarray
    stat: np.ndarray


class DANoise(NamedTuple):
    """The released values and their noise law, per component of the statistic.

    Attributes
    ----------
    z : float64[::1], shape (m,)
        Released values.
    logpdf : numba function ``f(x: float64, params: float64[::1]) -> float64``
        Noise log-density (a mechanism's ``numba_logpdf``).
    params : float64[:, ::1], shape (m, P)
        Parameter row of each component (a mechanism's ``numba_params``).
    sens : float64[::1], shape (R,), optional
        Declared sensitivity of each release (``inf``: not checked); None: no check.
    comp_release : int64[::1], shape (m,), optional
        Release of each component (default: all components in release 0).
    l2 : bool[::1], shape (R,), optional
        Whether release ``r``'s sensitivity is an L2 bound (default: L1).
    """

    z: np.ndarray
    logpdf: object
    params: np.ndarray
    sens: np.ndarray | None = None
    comp_release: np.ndarray | None = None
    l2: np.ndarray | None = None


class DAInfo(NamedTuple):
    """What one sweep did.

    Attributes
    ----------
    n_accepted : int
        Records whose proposal was accepted (unchanged records count as accepted).
    min_prob, mean_prob : float
        Minimum and mean over all ``n`` records of ``min(1, ratio_i)``.
    rejected : int64[::1]
        The records whose proposal was rejected, in increasing order (restore their values).
    n_changed : int
        Records whose ratio was not identically 1 (those visited, one uniform each).
    """

    n_accepted: int
    min_prob: float
    mean_prob: float
    rejected: np.ndarray
    n_changed: int


class SensitivityExceeded(ValueError):
    """A proposed record changes a release by more than its declared sensitivity.

    Attributes ``record``, ``release`` and ``change`` say which and by how much.
    """

    def __init__(self, record: int, release: int, change: float):
        super().__init__(
            f"replacing record {record} moves release {release} by {change:.6g}, more than "
            "its declared sensitivity"
        )
        self.record, self.release, self.change = record, release, change


def da_init(t_cur, const) -> DAState:
    """The state of records with contributions ``t_cur`` and constant ``const``.

    Parameters
    ----------
    t_cur : array_like, shape (n, m) or (n,)
        ``t(x_i)`` of the current records (converted to C-contiguous float64).
    const : array_like, shape (m,) or scalar
        ``C`` in ``T(x) = C + sum_i t(x_i)``.

    Returns
    -------
    DAState

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.da_sweep import da_init
    >>> st = da_init(np.array([1.0, 0.0, 1.0]), 0.5)
    >>> st.t_cur.shape, st.stat.tolist()
    ((3, 1), [2.5])
    """
    t = np.asarray(t_cur, dtype=np.float64)
    t = np.ascontiguousarray(t.reshape(t.shape[0], -1))
    c = np.ascontiguousarray(np.asarray(const, dtype=np.float64).reshape(-1))
    if c.shape[0] != t.shape[1]:
        raise ValueError(f"const has {c.shape[0]} components, t_cur has {t.shape[1]}")
    stat = np.empty_like(c)
    changed_records(t, t, np.zeros(0), c, stat, np.empty(t.shape[0], np.int64))
    return DAState(t, c, stat)


def _check_arrays(noise):
    """``(comp_release, thr, l2)`` of the sensitivity check, or None when nothing is checked."""
    if noise.sens is None:
        return None
    sens = np.ascontiguousarray(noise.sens, dtype=np.float64).reshape(-1)
    if not np.isfinite(sens).any():
        return None
    m = np.shape(noise.z)[0]
    comp = noise.comp_release
    comp = np.zeros(m, np.int64) if comp is None else np.ascontiguousarray(comp, np.int64)
    l2 = noise.l2
    l2 = np.zeros(sens.shape[0], np.bool_) if l2 is None else np.ascontiguousarray(l2, np.bool_)
    return comp, sens, l2


@numba.njit(cache=True)
def _list_scalar_checked(recs, const, stat, idx, thr, l2):  # pragma: no cover - compiled
    """:func:`changed_records` for ``m = 1`` fused with the sensitivity check (threshold
    ``thr``): returns ``(count, first record that exceeds or -1, its change)``."""
    t_prop, t_cur, extra = recs
    has_extra = extra.shape[0] > 0
    acc = const[0]
    count = 0
    worst = 0.0
    for i in range(t_prop.shape[0]):
        c = t_cur[i, 0]
        d = t_prop[i, 0] - c
        acc += c
        idx[count] = i
        count += (d != 0.0) | (has_extra and extra[i] != 0.0)
        ch = d * d if l2 else abs(d)
        worst = ch if ch > worst else worst
    stat[0] = acc
    if (math.sqrt(worst) if l2 else worst) > thr:
        for i in range(t_prop.shape[0]):
            d = t_prop[i, 0] - t_cur[i, 0]
            ch = math.sqrt(d * d) if l2 else abs(d)
            if ch > thr:
                return count, i, ch
    return count, -1, 0.0


def _list_and_check(state, t_prop, extra, noise, idx):
    """Listing (and the statistic into ``state.stat``), then the declared-sensitivity check:
    raises :class:`SensitivityExceeded` before anything else changes."""
    check = _check_arrays(noise)
    t_cur, const, stat = state
    if check is not None and t_prop.shape[1] == 1:
        comp, sens, l2 = check
        r = int(comp[0])
        thr = float(sens[r] * (1.0 + _SENS_RTOL))
        count, i, ch = _list_scalar_checked((t_prop, t_cur, extra), const, stat, idx, thr, l2[r])
        if i >= 0:
            raise SensitivityExceeded(int(i), r, float(ch))
        return count
    count = changed_records(t_prop, t_cur, extra, const, stat, idx)
    if check is not None:
        i, r, ch = sensitivity_excess(t_prop, t_cur, idx, count, *check)
        if i >= 0:
            raise SensitivityExceeded(int(i), int(r), float(ch))
    return count


def da_step(state, t_prop, u, noise, extra=None, inplace=False):
    """One data-augmentation sweep as a pure transition ``state -> (new_state, info)``.

    Every record ``i`` is offered its proposal in record order and accepted with probability
    ``min(1, eta(z - T') / eta(z - T) * exp(extra_i))``, where ``T`` is the running statistic
    and ``T' = T - t(x_i) + t(x_i')`` (Ju et al. 2022). This is :func:`changed_records`,
    :func:`sensitivity_excess` and :func:`da_sweep_cached` in one call (the first two fused
    into one pass for a scalar statistic), with the same decisions bit for bit given the same
    uniforms.

    Parameters
    ----------
    state : DAState
    t_prop : array_like, shape (n, m) or (n,)
        ``t(x_i')`` of the proposed records.
    u : array_like or numpy.random.Generator
        The uniforms of the decisions: one per record whose ratio is not identically 1
        (``info.n_changed`` of them; an array of length ``n`` always suffices), ``u[j]`` for
        the ``j``-th such record. A Generator is drawn from inside the sweep, one
        ``random()`` per such record in order (the numbers of ``u.random(n_changed)``).
    noise : DANoise
    extra : array_like, shape (n,), optional
        Per-record log-ratio terms (observed children); None: none.
    inplace : bool
        Update ``state.t_cur`` and ``state.stat`` in place (no copy; the returned state holds
        the same arrays). Default False: ``state`` is left unchanged.

    Returns
    -------
    new_state : DAState
    info : DAInfo

    Raises
    ------
    SensitivityExceeded
        When a proposal changes a release by more than ``noise.sens`` (checked before any
        change; the state is left as it was).

    Examples
    --------
    Three Bernoulli records behind a Laplace-noised count ``z = 2.4``, ``b = 1``: record 0
    (count 2 -> 3) has ratio ``exp(-0.2) = 0.82 < u = 0.9``: rejected; record 1 is unchanged;
    record 2 (count 2 -> 1) has ratio ``exp(-1) = 0.37 > u = 0.2``: accepted.

    >>> import numpy as np
    >>> from pymc_dp.kernels.da_sweep import DANoise, da_init, da_step
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(epsilon=1.0)
    >>> noise = DANoise(np.array([2.4]), mech.numba_logpdf, mech.numba_params[None, :])
    >>> state = da_init(np.array([0.0, 1.0, 1.0]), 0.0)
    >>> new, info = da_step(state, np.array([1.0, 1.0, 0.0]), np.array([0.9, 0.2]), noise)
    >>> new.t_cur.ravel().tolist(), new.stat.tolist(), info.rejected.tolist()
    ([0.0, 1.0, 0.0], [1.0], [0])
    >>> round(info.mean_prob, 5), state.t_cur.ravel().tolist()
    (0.72887, [0.0, 1.0, 1.0])
    """
    t_cur, const, stat_in = state
    if not inplace:
        t_cur = t_cur.copy()
    stat = np.empty_like(const)  # re-summed from t_cur; state.stat is kept until the end
    t_prop = np.ascontiguousarray(np.asarray(t_prop, dtype=np.float64).reshape(t_cur.shape))
    extra = np.zeros(0) if extra is None else np.ascontiguousarray(extra, dtype=np.float64)
    n = t_cur.shape[0]
    idx = np.empty(n, np.int64)
    count = _list_and_check(DAState(t_cur, const, stat), t_prop, extra, noise, idx)
    if isinstance(u, np.random.Generator):
        if count < _GENERATOR_IN_SWEEP:
            u = u.random(count)  # the same numbers; cheaper to hand to numba than a Generator
    else:
        u = np.ascontiguousarray(u, dtype=np.float64)
        if u.shape[0] < count:
            raise ValueError(f"{count} uniforms needed, got {u.shape[0]}")
    params = np.ascontiguousarray(noise.params, dtype=np.float64)
    sweep = specialized_da_sweep_cached(noise.logpdf, bool(np.all(params == params[:1])))
    rejected = np.empty(count, np.int64)
    z = np.ascontiguousarray(noise.z, dtype=np.float64)
    n_acc, mn, mean, n_rej = sweep(stat, z, t_prop, t_cur, extra, idx, count, u, params, rejected)
    info = DAInfo(int(n_acc), float(mn), float(mean), rejected[:n_rej].copy(), int(count))
    if inplace:
        stat_in[:] = stat
        stat = stat_in
    return DAState(t_cur, const, stat), info
