"""The data-augmentation kernel without a model (Ju et al. 2022): DAState transitions.

* Exact: the kernels (``changed_records``, ``sensitivity_excess``, ``da_sweep_cached``, its
  specialisation, and ``da_step`` with an array or a Generator of uniforms) equal a plain-Python
  implementation of the one-sweep law bit for bit, over random inputs: integer and real
  statistics, one or several components, shared and per-component noise parameters, observed-
  child terms, unchanged records, statistics far from the release (the threshold table is
  re-centred) and beyond 2**53 (no table).
* Exact: given ``u``, a record is accepted iff ``u < min(1, ratio)``.
* Statistical: the accept/reject pattern of one sweep over 3 records against its exact law
  (a product of sequential ``min(1, ratio)`` terms), chi-square with false-alarm rate 1e-6 per
  assertion; negative controls that must be rejected (and are, with probability at least
  1 - 1e-6 by the noncentral chi-square power computed in the test): the law with ratios
  evaluated at the initial statistic (a kernel that forgets to update it) and the law with the
  noise scale x 1.25.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.da_sweep import (
    DANoise,
    DAState,
    SensitivityExceeded,
    changed_records,
    da_init,
    da_step,
    da_sweep_cached,
    sensitivity_excess,
    specialized_da_sweep_cached,
)
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import FALSE_ALARM, assert_gof, assert_rejects, chisquare_gof

# ---- plain-Python reference of one sweep -------------------------------------------------------


def ref_sweep(t_cur, t_prop, const, extra, u, noise):
    """One sweep, written from the law. Returns ``(t_cur', stat', rejected, n_accepted,
    min_prob, mean_prob, listed)``; ``u`` is consumed one value per listed record (a record
    is listed unless its proposal changes no component and it has no child term)."""
    z, logpdf, params = noise.z, noise.logpdf, noise.params
    n, m = t_cur.shape
    t = t_cur.copy()
    stat = [float(const[k]) for k in range(m)]
    for k in range(m):
        for i in range(n):  # in record order
            stat[k] += float(t[i, k])
    lp_cur = [logpdf(z[k] - stat[k], params[k]) for k in range(m)]
    rejected, listed = [], []
    min_prob, sum_prob = 1.0, 0.0
    for i in range(n):
        e = float(extra[i]) if len(extra) else 0.0
        d = [float(t_prop[i, k] - t[i, k]) for k in range(m)]
        if e == 0.0 and all(dk == 0.0 for dk in d):
            continue  # ratio 1: accepted, nothing changes
        log_ratio = e
        lp_new = list(lp_cur)
        for k in range(m):
            if d[k] != 0.0:
                lp_new[k] = logpdf(z[k] - (stat[k] + d[k]), params[k])
                log_ratio += lp_new[k] - lp_cur[k]
        prob = 1.0 if log_ratio >= 0.0 else math.exp(log_ratio)
        accept = log_ratio >= 0.0 or u[len(listed)] < prob
        listed.append(i)
        min_prob = min(min_prob, prob)
        sum_prob += prob
        if accept:
            for k in range(m):
                if d[k] != 0.0:
                    stat[k] += d[k]
                    lp_cur[k] = lp_new[k]
            t[i] = t_prop[i]
        else:
            rejected.append(i)
    sum_prob += n - len(listed)
    mean = sum_prob / max(n, 1)
    return t, np.array(stat), rejected, n - len(rejected), min_prob, mean, listed


# ---- random inputs ------------------------------------------------------------------------------


def _records(rng, n, m, kind):
    """(t_cur, t_prop): proposals differ from the current values in about half the rows."""
    if kind == "real":
        t_cur = rng.normal(size=(n, m))
        new = rng.normal(size=(n, m))
    elif kind == "wide":  # integer changes beyond the table's |d| <= 4
        t_cur = rng.integers(0, 12, size=(n, m)).astype(float)
        new = rng.integers(0, 12, size=(n, m)).astype(float)
    elif kind == "mixed":  # integers, a few real-valued proposals
        t_cur = rng.integers(0, 3, size=(n, m)).astype(float)
        new = rng.integers(0, 3, size=(n, m)).astype(float)
        new[rng.random((n, m)) < 0.05] += 0.5
    else:
        t_cur = (rng.random((n, m)) < 0.4).astype(float)
        new = (rng.random((n, m)) < 0.4).astype(float)
    t_prop = np.where(rng.random((n, 1)) < 0.5, new, t_cur)
    return np.ascontiguousarray(t_cur), np.ascontiguousarray(t_prop)


CASES = {
    # name: (n, m, kind, extra fraction, z offset from the statistic, shared params, const)
    "count near z": (600, 1, "count", 0.0, 0.3, True, 0.0),
    "count, z far (table re-centred)": (3000, 1, "count", 0.0, -700.0, True, 0.0),
    "count with observed children": (600, 1, "count", 0.3, 1.7, True, 2.0),
    "wide integer changes": (800, 1, "wide", 0.0, 4.5, True, 0.0),
    "integers with real changes": (800, 1, "mixed", 0.0, 0.5, True, 0.0),
    "real statistic": (500, 1, "real", 0.2, 0.1, True, 0.0),
    "statistic beyond 2**53": (400, 1, "count", 0.0, 3.0, True, 2.0**53 + 8.0),
    "vector, shared": (400, 3, "count", 0.0, 1.2, True, 0.0),
    "vector, per-component params, children": (400, 3, "real", 0.3, -0.4, False, 1.0),
}


def _case(rng, name, mech):
    n, m, kind, extra_frac, z_off, shared, const = CASES[name]
    t_cur, t_prop = _records(rng, n, m, kind)
    extra = np.where(rng.random(n) < extra_frac, rng.normal(size=n), 0.0)
    const = np.full(m, const)
    z = const + t_cur.sum(0) + z_off + rng.normal(size=m)
    params = np.repeat(mech.numba_params[None, :], m, axis=0)
    if not shared:
        params = params * rng.uniform(0.5, 2.0, size=(m, 1))
    return t_cur, t_prop, extra, const, DANoise(z, mech.numba_logpdf, params)


MECHS = {"laplace": Laplace(scale=1.3), "gaussian": Gaussian(sigma=2.0)}


@pytest.mark.parametrize("mech", sorted(MECHS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_equal_reference_bit_for_bit(rng, name, mech):
    t_cur, t_prop, extra, const, noise = _case(rng, name, MECHS[mech])
    n, m = t_cur.shape
    u = rng.random(n)
    t_ref, stat_ref, rej_ref, acc_ref, min_ref, mean_ref, listed = ref_sweep(
        t_cur, t_prop, const, extra, u, noise
    )
    if "2**53" not in name:  # (there, +-1 changes round away: the case checks the fallback)
        assert 0 < len(rej_ref) < len(listed)  # the case exercises both decisions

    # buffer-level kernels, as the adapter calls them
    shared = bool(np.all(noise.params == noise.params[:1]))
    for sweep_fn in ("generic", "specialized"):
        tc, idx, stat = t_cur.copy(), np.empty(n, np.int64), np.empty(m)
        count = changed_records(t_prop, tc, extra, const, stat, idx)
        assert idx[:count].tolist() == listed
        rej = np.empty(n, np.int64)
        args = (stat, noise.z, t_prop, tc, extra, idx, count, u[:count])
        if sweep_fn == "generic":
            out = da_sweep_cached(*args, noise.logpdf, noise.params, shared, rej)
        else:
            out = specialized_da_sweep_cached(noise.logpdf, shared)(*args, noise.params, rej)
        assert np.array_equal(tc, t_ref) and np.array_equal(stat, stat_ref)
        assert rej[: out[3]].tolist() == rej_ref
        assert (out[0], out[1], out[2]) == (acc_ref, min_ref, mean_ref)

    # the explicit-state transition, with the array and with a Generator of the same numbers
    state = da_init(t_cur, const)
    for uu in (u, np.random.default_rng(7)):
        if not isinstance(uu, np.ndarray):
            u2 = np.random.default_rng(7).random(len(listed))
            t_ref, stat_ref, rej_ref, acc_ref, min_ref, mean_ref, _ = ref_sweep(
                t_cur, t_prop, const, extra, u2, noise
            )
        new, info = da_step(state, t_prop, uu, noise, extra=extra)
        assert np.array_equal(new.t_cur, t_ref) and np.array_equal(new.stat, stat_ref)
        assert info.rejected.tolist() == rej_ref and info.n_changed == len(listed)
        assert (info.n_accepted, info.min_prob, info.mean_prob) == (acc_ref, min_ref, mean_ref)
        assert np.array_equal(state.t_cur, t_cur)  # pure: the input state is unchanged


def test_generator_drawn_inside_the_sweep_gives_the_array_path(rng):
    """Above 2**15 changed records, da_step draws from the Generator inside the kernel: the
    same numbers as ``random(count)``, so the same transition and the same generator state."""
    n = 200_000
    t_cur, t_prop = _records(rng, n, 1, "count")
    mech = Laplace(scale=1.0)
    noise = DANoise(t_cur.sum(0) + 0.4, mech.numba_logpdf, mech.numba_params[None, :])
    state = da_init(t_cur, np.zeros(1))
    g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
    new1, info1 = da_step(state, t_prop, g1, noise)
    assert info1.n_changed >= 2**15
    new2, info2 = da_step(state, t_prop, g2.random(info1.n_changed), noise)
    assert np.array_equal(new1.t_cur, new2.t_cur) and np.array_equal(new1.stat, new2.stat)
    assert np.array_equal(info1.rejected, info2.rejected) and info1[:3] == info2[:3]
    assert g1.random() == g2.random()


def test_empty_extra_equals_zero_extra_and_vector_statistic_in_record_order(rng):
    t_cur, t_prop = _records(rng, 500, 3, "real")
    const = rng.normal(size=3)
    idx0, idx1 = np.empty(500, np.int64), np.empty(500, np.int64)
    s0, s1 = np.empty(3), np.empty(3)
    c0 = changed_records(t_prop, t_cur, np.zeros(500), const, s0, idx0)
    c1 = changed_records(t_prop, t_cur, np.zeros(0), const, s1, idx1)
    assert c0 == c1 and np.array_equal(idx0[:c0], idx1[:c1])
    expect = [float(c) for c in const]
    for k in range(3):
        for i in range(500):
            expect[k] += float(t_cur[i, k])
    assert s0.tolist() == expect and s1.tolist() == expect


def test_inplace_step_updates_the_state_arrays(rng):
    t_cur, t_prop, _, const, noise = _case(rng, "count near z", MECHS["laplace"])
    u = rng.random(t_cur.shape[0])
    pure, info_p = da_step(da_init(t_cur, const), t_prop, u, noise)
    state = da_init(t_cur, const)
    new, info = da_step(state, t_prop, u, noise, inplace=True)
    assert new.t_cur is state.t_cur and new.stat is state.stat
    assert np.array_equal(state.t_cur, pure.t_cur) and np.array_equal(state.stat, pure.stat)
    assert info.rejected.tolist() == info_p.rejected.tolist()
    assert info[:3] == info_p[:3] and info.n_changed == info_p.n_changed


# ---- the decision rule ---------------------------------------------------------------------


@pytest.mark.parametrize("z, d", [(0.3, 1.0), (5.0, -1.0), (2.5, 3.0), (0.0, 0.25)])
def test_decision_is_u_below_min_one_ratio(z, d):
    mech = Laplace(scale=0.9)
    noise = DANoise(np.array([z]), mech.numba_logpdf, mech.numba_params[None, :])
    state = da_init(np.array([1.0, 1.0]), 0.0)  # statistic 2
    t_prop = np.array([1.0 + d, 1.0])
    ratio = math.exp(mech.numba_logpdf(z - (2.0 + d), mech.numba_params))
    ratio /= math.exp(mech.numba_logpdf(z - 2.0, mech.numba_params))
    # the kernel's threshold is exp(log-ratio), not this quotient: use it where they differ
    log_r = mech.numba_logpdf(z - (2.0 + d), mech.numba_params) - mech.numba_logpdf(
        z - 2.0, mech.numba_params
    )
    thr = 1.0 if log_r >= 0.0 else math.exp(log_r)
    assert thr == pytest.approx(min(1.0, ratio), rel=1e-12)
    below = np.nextafter(thr, 0.0)
    _, info = da_step(state, t_prop, np.array([below]), noise)
    assert info.rejected.tolist() == [] and info.min_prob == thr
    _, info = da_step(state, t_prop, np.array([thr]), noise)
    assert info.rejected.tolist() == ([] if log_r >= 0.0 else [0])


# ---- declared sensitivities ----------------------------------------------------------------


def ref_excess(t_prop, t_cur, listed, comp, sens, l2):
    for i in listed:
        for r in range(len(sens)):
            ds = [float(t_prop[i, k] - t_cur[i, k]) for k in range(len(comp)) if comp[k] == r]
            ch = math.sqrt(sum(d * d for d in ds)) if l2[r] else sum(abs(d) for d in ds)
            if ch > sens[r] * (1.0 + 1e-9):
                return i, r, ch
    return -1, -1, 0.0


@pytest.mark.parametrize("l2", [False, True])
@pytest.mark.parametrize("m", [1, 3])
def test_sensitivity_excess_equals_reference(rng, m, l2):
    for trial in range(20):
        n = 300
        t_cur = rng.integers(0, 2, size=(n, m)).astype(float)
        t_prop = np.where(rng.random((n, 1)) < 0.5, rng.integers(0, 2, size=(n, m)), t_cur)
        big = rng.random(n) < (0.01 if trial % 2 else 0.0)
        t_prop[big, 0] += 1.5
        comp = np.array([0, 1, 1][:m], np.int64)
        sens = np.array([1.0, 2.0])[: comp.max() + 1]
        l2s = np.full(sens.shape, l2)
        idx = np.empty(n, np.int64)
        count = changed_records(t_prop, t_cur, np.zeros(0), np.zeros(m), np.empty(m), idx)
        listed = idx[:count].tolist()
        want = ref_excess(t_prop, t_cur, listed, comp, sens, l2s)
        assert sensitivity_excess(t_prop, t_cur, idx, count, comp, sens, l2s) == want
        mech = Laplace(scale=1.0)
        noise = DANoise(
            np.zeros(m), mech.numba_logpdf, np.repeat(mech.numba_params[None], m, 0),
            sens=sens, comp_release=comp, l2=l2s,
        )  # fmt: skip
        state = da_init(t_cur, np.zeros(m))
        if want[0] < 0:
            da_step(state, t_prop, rng.random(n), noise, inplace=True)
            continue
        stat_before = state.stat.copy()
        with pytest.raises(SensitivityExceeded) as err:
            da_step(state, t_prop, rng.random(n), noise, inplace=True)
        assert (err.value.record, err.value.release, err.value.change) == want
        assert np.array_equal(state.t_cur, t_cur) and np.array_equal(state.stat, stat_before)


# ---- the exact law of one sweep --------------------------------------------------------------


def pattern_law(t_cur, t_prop, extra, noise, stale=False):
    """Probability of each accept pattern (itertools.product order, 1 = accepted) of one sweep:
    the product over records of min(1, ratio) or 1 - min(1, ratio), the ratio evaluated at the
    running statistic (``stale``: at the initial statistic, a wrong kernel)."""
    n, m = t_cur.shape
    z, lp, params = noise.z, noise.logpdf, noise.params
    law = []
    for pat in itertools.product((0, 1), repeat=n):
        stat = t_cur.sum(0)
        s0 = stat.copy()
        p = 1.0
        for i in range(n):
            ref = s0 if stale else stat
            d = t_prop[i] - t_cur[i]
            log_r = extra[i] + sum(
                lp(z[k] - (ref[k] + d[k]), params[k]) - lp(z[k] - ref[k], params[k])
                for k in range(m)
                if d[k] != 0.0
            )
            a = min(1.0, math.exp(log_r))
            p *= a if pat[i] else 1.0 - a
            if pat[i]:
                stat = stat + d
        law.append(p)
    return np.array(law)


LAW_CASES = {
    # scalar count (the memoised-threshold path): ratios depend on the running statistic
    "count": (
        np.array([[1.0], [0.0], [1.0]]),
        np.array([[0.0], [1.0], [0.0]]),
        np.zeros(3),
        np.array([2.0]),
        np.array([[1.0]]),
    ),
    # two components, per-component scales, observed-child terms (the vector path)
    "vector": (
        np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]),
        np.array([0.3, 0.0, -0.2]),
        np.array([1.4, 1.6]),
        np.array([[1.0], [0.7]]),
    ),
}


def _power(law, control, draws, alpha=FALSE_ALARM):
    """Probability that the chi-square test at level alpha rejects ``control`` when the
    draws follow ``law`` (noncentral chi-square approximation)."""
    keep = law > 0.0
    lam = draws * float(np.sum((law[keep] - control[keep]) ** 2 / control[keep]))
    df = int(keep.sum()) - 1
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam))


@pytest.mark.parametrize("case", sorted(LAW_CASES))
def test_one_sweep_pattern_law_exact(rng, case):
    t_cur, t_prop, extra, z, scales = LAW_CASES[case]
    mech = Laplace(scale=1.0)
    noise = DANoise(z, mech.numba_logpdf, scales)
    law = pattern_law(t_cur, t_prop, extra, noise)
    stale = pattern_law(t_cur, t_prop, extra, noise, stale=True)
    wrong = pattern_law(t_cur, t_prop, extra, noise._replace(params=scales * 1.25))
    assert math.isclose(law.sum(), 1.0, rel_tol=1e-12) and (law > 0).sum() >= 4
    draws = 20_000
    # design: each control is rejected with probability >= 1 - 1e-6
    assert _power(law, stale, draws) > 1 - 1e-6 and _power(law, wrong, draws) > 1 - 1e-6

    state = da_init(t_cur, np.zeros(t_cur.shape[1]))
    n = t_cur.shape[0]
    weights = 2 ** np.arange(n - 1, -1, -1)
    pats = np.empty(draws, np.int64)
    for s in range(draws):
        new, info = da_step(state, t_prop, rng, noise, extra=extra)
        acc = np.ones(n, np.int64)
        acc[info.rejected] = 0
        pats[s] = acc @ weights
        # the transition itself: accepted rows take the proposal, the statistic follows
        if s < 50:
            assert np.array_equal(new.t_cur, np.where(acc[:, None] == 1, t_prop, t_cur))
            assert np.array_equal(new.stat, new.t_cur.sum(0))

    def logpmf(law_):
        with np.errstate(divide="ignore"):
            log_law = np.log(law_)
        return lambda k: log_law[k]

    assert_gof(chisquare_gof(pats, logpmf(law)), what=f"{case}: exact one-sweep law")
    assert_rejects(chisquare_gof(pats, logpmf(stale)), what=f"{case}: stale statistic")
    assert_rejects(chisquare_gof(pats, logpmf(wrong)), what=f"{case}: noise scale x 1.25")


def test_state_is_a_namedtuple_of_arrays():
    st = da_init(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([0.5, -1.0]))
    assert isinstance(st, DAState) and st.stat.tolist() == [1.5, 1.0]
    with pytest.raises(ValueError, match="components"):
        da_init(np.ones((2, 2)), np.zeros(3))
