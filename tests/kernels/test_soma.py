"""SOMA kernel (pymc_dp.kernels.soma) without a model: exact laws by enumeration.

Both kernels are tested: position by position (:func:`soma_sweep_kernel`) and over groups of
equal rows (:func:`soma_sweep_grouped_kernel`, the same law). References are computed
independently of the kernels: the exact one-attempt transition matrix of
Xiong & Ju's (2025) algorithm on every state of a few small records (4 Bernoulli records with a
Laplace-noised count; 3 three-valued categorical records with a geometric-noised count vector),
and the exact conditional posterior of the records by enumeration.

Statistical assertions are Pearson chi-square tests (:func:`pymc_dp.testing.chisquare_gof`) at
the false-alarm rate ``FALSE_ALARM = 1e-6`` each. Every one has a negative control that must be
rejected at the same rate: the kernel run with its accept uniforms set to 0 (so every picked
position is accepted: SOMA *without* the ``w_cur - w_j`` correction), or the observed outcomes
compared with the law without that correction. The power of each control is computed from the
exact laws (noncentral chi-square) and asserted to exceed ``1 - 1e-6`` before sampling.

Autocorrelation: the stationary tests run independent chains from independent uniformly random
starts and keep each chain's last state; the number of attempts per chain is chosen so that the
exact law after it is within 1e-7 in total variation of the target from *every* start (computed
from the exact transition matrix), so the kept states are independent draws from a law that
differs negligibly from the target.
"""

from __future__ import annotations

import itertools
import math

import numba
import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.soma import (
    GroupState,
    NoiseRows,
    SomaState,
    group_state,
    records_from_replacements,
    soma_sweep_grouped_kernel,
    soma_sweep_kernel,
)
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.testing import FALSE_ALARM, chisquare_gof

SEED = 20261125


# --------------------------------------------------------------------------- exact references
class Case:
    """Small exchangeable records: support values, their prior law, t(.), the release."""

    def __init__(self, n, probs, onehot, mech, z):
        self.n = n
        self.probs = np.asarray(probs, dtype=np.float64)
        self.k = len(probs)
        self.onehot = onehot  # t(x) = one-hot(x) without category 0, else t(x) = x
        self.mech = mech
        self.z = np.atleast_1d(np.asarray(z, dtype=np.float64))
        self.states = np.array(list(itertools.product(range(self.k), repeat=n)), dtype=np.int64)

    def t(self, x):
        x = np.asarray(x)
        if self.onehot:
            return (x[..., None] == np.arange(1, self.k)).astype(np.float64)
        return x[..., None].astype(np.float64)

    def index(self, x):
        """Index of each state (rows of x) in ``self.states``."""
        return (np.asarray(x) * self.k ** np.arange(self.n)[::-1]).sum(-1)

    def log_eta(self, stat):
        return self.mech.logpdf(self.z - stat).sum(-1)

    def posterior(self, mech=None):
        mech = self.mech if mech is None else mech
        logp = np.log(self.probs)[self.states].sum(1)
        logp = logp + mech.logpdf(self.z - self.t(self.states).sum(1)).sum(-1)
        w = np.exp(logp - logp.max())
        return w / w.sum()

    def noise(self, mech=None):
        mech = self.mech if mech is None else mech
        m = self.z.size
        params = np.ascontiguousarray(np.repeat(mech.numba_params[None, :], m, axis=0))
        return NoiseRows(self.z.copy(), params), mech.numba_logpdf


def attempt_law(case, x, y, correct=True):
    """Exact law of one attempt from state x with offer y: probability of each outcome.

    Returns an array of length n + 1: entry 0 is "rejected", entry j + 1 is "offer lands on j".
    """
    tx = case.t(x)
    stat = tx.sum(0)
    logw = np.array([case.log_eta(stat - tx[j] + case.t(y)) for j in range(case.n)])
    out = np.zeros(case.n + 1)
    if not np.isfinite(logw.max()):
        out[0] = 1.0
        return out
    w = np.exp(logw - logw.max())
    big_w = w.sum()
    w_cur = math.exp(case.log_eta(stat) - logw.max())
    for j in range(case.n):
        acc = min(1.0, big_w / (big_w + w_cur - w[j])) if correct else 1.0
        out[j + 1] = w[j] / big_w * acc
    out[0] = max(0.0, 1.0 - out[1:].sum())
    return out


def transition_matrix(case, correct=True):
    """Exact one-attempt transition matrix over ``case.states`` (offer drawn from the prior)."""
    size = len(case.states)
    P = np.zeros((size, size))
    for s, x in enumerate(case.states):
        for y in range(case.k):
            law = attempt_law(case, x, y, correct)
            P[s, s] += case.probs[y] * law[0]
            for j in range(case.n):
                x2 = x.copy()
                x2[j] = y
                P[s, case.index(x2)] += case.probs[y] * law[j + 1]
    return P


def stationary(P):
    vals, vecs = np.linalg.eig(P.T)
    v = np.real(vecs[:, np.argmin(np.abs(vals - 1.0))])
    return v / v.sum()


def attempts_to_mix(P, pi, tol=1e-7):
    """Smallest power of two L with max over starts of TV(delta_x P^L, pi) <= tol."""
    Q, L = P.copy(), 1
    while 0.5 * np.abs(Q - pi[None, :]).sum(1).max() > tol:
        Q, L = Q @ Q, 2 * L
        assert L <= 2**16
    return L


def chi2_power(n_draws, p_true, p_ref, alpha=FALSE_ALARM):
    """Power of Pearson's chi-square test of p_ref when the draws follow p_true."""
    if np.any((p_ref < 1e-15) & (p_true > 1e-3)):
        # a cell impossible under p_ref: P(no draw lands there) is below (1 - 1e-3)^n_draws
        return 1.0 - (1.0 - 1e-3) ** n_draws
    df = p_ref.size - 1
    lam = n_draws * np.sum((p_true - p_ref) ** 2 / p_ref)
    return float(stats.ncx2.sf(stats.chi2.isf(alpha, df), df, lam))


BERNOULLI = Case(4, [0.7, 0.3], False, Laplace(scale=0.5), 3.0)
CATEGORICAL = Case(3, [0.5, 0.3, 0.2], True, Geometric(alpha=0.4), [0, 2])
CASES = {"bernoulli_laplace": BERNOULLI, "categorical_geometric": CATEGORICAL}


# --------------------------------------------------------------------------- the exact laws
@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_transition_keeps_posterior(name):
    """The algebra: the exact SOMA transition leaves the posterior invariant (to 1e-12), and
    without the ``w_cur - w_j`` correction it does not (negative control)."""
    case = CASES[name]
    pi = case.posterior()
    P = transition_matrix(case)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert np.abs(pi @ P - pi).max() < 1e-12
    P_bad = transition_matrix(case, correct=False)
    assert np.abs(pi @ P_bad - pi).max() > 1e-3


# --------------------------------------------------------------------------- one attempt
@numba.njit
def _repeat_attempt(stat0, t_cur0, t_off, noise, logpdf, u, out):  # pragma: no cover
    """One attempt per row of u, each from a fresh copy of the same state."""
    rep = np.empty(1, np.int64)
    for r in range(u.shape[0]):
        state = (stat0.copy(), t_cur0.copy())
        soma_sweep_kernel(state, t_off, noise, logpdf, u[r : r + 1], rep)
        out[r] = rep[0]


@numba.njit
def _repeat_grouped(gs0, g_off, noise, logpdf, u, out):  # pragma: no cover
    """One grouped attempt per row of u, each from a fresh copy of the same state."""
    rep = np.empty(1, np.int64)
    for r in range(u.shape[0]):
        gs = GroupState(gs0.stat.copy(), gs0.gid.copy(), gs0.rows, gs0.count.copy(),
                        gs0.perm.copy(), gs0.where.copy(), gs0.start.copy())  # fmt: skip
        soma_sweep_grouped_kernel(gs, g_off, noise, logpdf, u[r : r + 1], rep)
        out[r] = rep[0]


def _attempt_outcomes(case, x, y, n_rep, rng, grouped=False):
    tx = np.ascontiguousarray(case.t(np.asarray(x)))
    noise, logpdf = case.noise()
    out = np.empty(n_rep, np.int64)
    t_off = np.ascontiguousarray(case.t(np.array([y])))
    if grouped:
        gs, g_off = group_state(tx.sum(0), tx, t_off)
        _repeat_grouped(gs, g_off, noise, logpdf, rng.random((n_rep, 3)), out)
    else:
        _repeat_attempt(tx.sum(0), tx, t_off, noise, logpdf, rng.random((n_rep, 2)), out)
    return out + 1  # 0: rejected, j + 1: landed on j


@pytest.mark.parametrize(
    ("name", "x", "y", "z"),
    [
        ("bernoulli_laplace", [1, 0, 0, 1], 0, None),
        ("bernoulli_laplace", [1, 1, 0, 1], 0, None),
        # z far from every state: linear weights all underflow (e^-1000); log-sum-exp exact
        ("bernoulli_laplace", [0, 1, 0, 1], 0, 500.0),
        ("categorical_geometric", [2, 0, 1], 0, None),
    ],
)
@pytest.mark.parametrize("grouped", [False, True], ids=["positions", "grouped"])
def test_one_attempt_law(name, x, y, z, grouped):
    """The outcome of one attempt (rejected, or the position replaced) against its exact law
    (chi-square, 1e-6); negative control: the law without the correction is rejected."""
    case = CASES[name]
    if z is not None:
        case = Case(case.n, case.probs, case.onehot, case.mech, z)
    exact = attempt_law(case, np.array(x), y)
    wrong = attempt_law(case, np.array(x), y, correct=False)
    n_rep = 100_000
    assert chi2_power(n_rep, exact, wrong) > 1 - 1e-6
    draws = _attempt_outcomes(case, x, y, n_rep, np.random.default_rng(SEED), grouped)
    with np.errstate(divide="ignore"):
        p_good = chisquare_gof(draws, lambda k: np.log(exact[np.clip(k, 0, case.n)]))
        p_bad = chisquare_gof(draws, lambda k: np.log(wrong[np.clip(k, 0, case.n)]))
    print(f"{name} {x} offer {y}: p = {p_good:.3g}, control p = {p_bad:.3g}")
    assert p_good > FALSE_ALARM
    assert p_bad < FALSE_ALARM


# --------------------------------------------------------------------------- stationary law
def _offers(case, shape, rng):
    return rng.choice(case.k, size=shape, p=case.probs)


def _chain(case, start, offers, u, grouped):
    """One chain: the final records and their contribution rows as the kernel keeps them."""
    noise, logpdf = case.noise()
    rep = np.empty(len(offers), np.int64)
    t_cur = np.ascontiguousarray(case.t(start))
    t_off = np.ascontiguousarray(case.t(offers))
    if grouped:
        gs, g_off = group_state(t_cur.sum(0), t_cur, t_off)
        soma_sweep_grouped_kernel(gs, g_off, noise, logpdf, u, rep)
        stat, rows = gs.stat, gs.rows[gs.gid]
    else:
        state = SomaState(t_cur.sum(0), t_cur)
        soma_sweep_kernel(state, t_off, noise, logpdf, np.ascontiguousarray(u[:, :2]), rep)
        stat, rows = state.stat, state.t_cur
    (final,) = records_from_replacements([start], [offers], rep)
    return final, stat, rows


def run_chains(case, n_chains, n_att, rng, accept_all=False, grouped=False):
    """Independent chains from uniform random starts; the state index after n_att attempts.

    Also checks the kernel's bookkeeping: the returned ``t_cur`` and ``stat`` are those of the
    records rebuilt by :func:`records_from_replacements`.
    """
    starts = rng.integers(case.k, size=(n_chains, case.n))
    offers = _offers(case, (n_chains, n_att), rng)
    u = rng.random((n_chains, n_att, 3))
    if accept_all:
        u[..., 1] = 0.0
    final = np.empty((n_chains, case.n), np.int64)
    for c in range(n_chains):
        final[c], stat, rows = _chain(case, starts[c], offers[c], u[c], grouped)
        if c < 50:
            np.testing.assert_array_equal(rows, case.t(final[c]))
            np.testing.assert_allclose(stat, case.t(final[c]).sum(0), atol=1e-12)
    return case.index(final)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    "grouped",
    # the grouped kernel's one-attempt law is tested in the fast tier; its chains here are slow
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["positions", "grouped"],
)
def test_stationary_law_exact(name, grouped):
    """Last states of 20,000 independent chains against the exact posterior (chi-square over
    all states, 1e-6). Negative control: the kernel accepting every picked position."""
    case = CASES[name]
    pi = case.posterior()
    P = transition_matrix(case)
    n_att = attempts_to_mix(P, pi)
    pi_bad = stationary(transition_matrix(case, correct=False))
    n_chains = 20_000
    assert chi2_power(n_chains, pi_bad, pi) > 1 - 1e-6
    rng = np.random.default_rng(SEED)
    good = run_chains(case, n_chains, n_att, rng, grouped=grouped)
    bad = run_chains(case, n_chains, n_att, rng, accept_all=True, grouped=grouped)

    def logpmf(k):
        inside = (k >= 0) & (k < pi.size)
        return np.where(inside, np.log(pi[np.clip(k, 0, pi.size - 1)]), -np.inf)

    p_good = chisquare_gof(good, logpmf)
    p_bad = chisquare_gof(bad, logpmf)
    print(f"{name}: {n_att} attempts/chain, p = {p_good:.3g}, control p = {p_bad:.3g}")
    assert p_good > FALSE_ALARM
    assert p_bad < FALSE_ALARM


def test_wrong_noise_scale_rejected():
    """Negative control on the inputs: weights of a noise scale 1.5x too large give the
    posterior of that scale, which the chi-square test tells from the right one."""
    case = BERNOULLI
    wide = Laplace(scale=case.mech.scale * 1.5)
    pi = case.posterior()
    pi_wide = case.posterior(wide)
    n_chains = 20_000
    assert chi2_power(n_chains, pi_wide, pi) > 1 - 1e-6
    wrong = Case(case.n, case.probs, case.onehot, wide, case.z)
    n_att = attempts_to_mix(transition_matrix(wrong), pi_wide)
    draws = run_chains(wrong, n_chains, n_att, np.random.default_rng(SEED + 1))
    assert chisquare_gof(draws, lambda k: np.log(pi_wide[np.clip(k, 0, pi.size - 1)])) > FALSE_ALARM
    assert chisquare_gof(draws, lambda k: np.log(pi[np.clip(k, 0, pi.size - 1)])) < FALSE_ALARM


# --------------------------------------------------------------------------- edge cases
def test_all_weights_zero_no_nan():
    """Every weight -inf (Laplace density overflowing to 0): every attempt rejected, no NaN;
    a current state of density 0 with a positive weight somewhere: accepted (probability 1)."""
    mech = Laplace(scale=1e-300)
    noise = NoiseRows(np.array([1e10]), mech.numba_params[None, :].copy())
    state = SomaState(np.array([0.0]), np.zeros((3, 1)))
    rep = np.empty(3, np.int64)
    out = soma_sweep_kernel(state, np.ones((3, 1)), noise, mech.numba_logpdf,
                            np.full((3, 2), 0.5), rep)  # fmt: skip
    assert rep.tolist() == [-1, -1, -1]
    assert out == (0, 0.0, 0.0)
    assert state.stat.tolist() == [0.0]
    # current state impossible (w_cur = 0), the offer makes it possible: accepted
    noise = NoiseRows(np.array([1.0]), mech.numba_params[None, :].copy())
    out = soma_sweep_kernel(state, np.ones((1, 1)), noise, mech.numba_logpdf,
                            np.array([[0.5, 0.999]]), rep)  # fmt: skip
    assert out[0] == 1 and out[1] == 1.0
    assert state.stat.tolist() == [1.0]


def test_acceptance_at_least_exp_minus_epsilon():
    """Every acceptance probability is >= exp(-epsilon) for an epsilon-DP release (Laplace
    with sensitivity 1 on a count): min over 2,000 attempts from random states."""
    eps = 0.7
    mech = Laplace(epsilon=eps)
    rng = np.random.default_rng(SEED)
    n = 30
    x = (rng.random(n) < 0.4).astype(np.float64)[:, None]
    noise = NoiseRows(np.array([25.0]), mech.numba_params[None, :].copy())
    state = SomaState(x.sum(0), np.ascontiguousarray(x))
    rep = np.empty(2000, np.int64)
    offers = (rng.random((2000, 1)) < 0.4).astype(np.float64)
    _, min_prob, mean_prob = soma_sweep_kernel(state, offers, noise, mech.numba_logpdf,
                                               rng.random((2000, 2)), rep)  # fmt: skip
    assert min_prob >= math.exp(-eps) * (1 - 1e-12)
    assert min_prob <= mean_prob <= 1.0


def test_records_from_replacements_last_offer_wins():
    """Against a plain loop over attempts, with two record variables of different shapes."""
    rng = np.random.default_rng(SEED)
    n, a = 7, 40
    cur = [rng.normal(size=(n, 2)), rng.integers(5, size=n)]
    offers = [rng.normal(size=(a, 2)), rng.integers(5, size=a)]
    rep = np.where(rng.random(a) < 0.4, -1, rng.integers(n, size=a))
    ref = [c.copy() for c in cur]
    for k, j in enumerate(rep):
        if j >= 0:
            for r, o in zip(ref, offers, strict=True):
                r[j] = o[k]
    out = records_from_replacements(cur, offers, rep)
    for o, r, c in zip(out, ref, cur, strict=True):
        np.testing.assert_array_equal(o, r)
        assert o is not c and o.dtype == c.dtype
    # nothing replaced: copies of the current records
    same = records_from_replacements(cur, offers, np.full(a, -1))
    assert all(np.array_equal(s, c) and s is not c for s, c in zip(same, cur, strict=True))


def test_group_state_against_numpy_unique():
    """Groups of equal rows: the distinct rows, each position's group, the counts and the
    contiguous layout, against ``np.unique(axis=0)`` (rows of 3 columns with many ties)."""
    rng = np.random.default_rng(SEED)
    t_cur = rng.integers(0, 2, size=(40, 3)).astype(np.float64)
    t_off = rng.integers(0, 3, size=(25, 3)).astype(np.float64)
    gs, g_off = group_state(np.zeros(3), t_cur, t_off)
    rows, inv = np.unique(np.concatenate([t_cur, t_off]), axis=0, return_inverse=True)
    np.testing.assert_array_equal(gs.rows, rows)
    np.testing.assert_array_equal(gs.gid, inv.ravel()[:40])
    np.testing.assert_array_equal(g_off, inv.ravel()[40:])
    np.testing.assert_array_equal(gs.count, np.bincount(gs.gid, minlength=len(rows)))
    for g in range(len(rows)):
        members = gs.perm[gs.start[g] : gs.start[g + 1]]
        assert np.all(gs.gid[members] == g)
    np.testing.assert_array_equal(gs.perm[gs.where], np.arange(40))
