"""Transport and refresh moves of latent records (pymc_dp.kernels.allocation): exact laws.

References are computed independently of the kernels, by enumeration: the arrangements of
categorical records with given counts (law: uniform), the Multinomial(S, uniform) pmf of Poisson
records (scipy), and for Normal records the law N(S/N, sigma^2 (I - 11'/N)) in an orthonormal
basis of the sum-zero plane, where it is N(0, I_{N-1}).

Statistical assertions and their false-alarm rates (each at most ``FALSE_ALARM = 1e-6``):

* Pearson chi-square of many independent end states against the exact pmf
  (:func:`pymc_dp.testing.chisquare_gof`; every cell expects hundreds of draws, so the
  chi-square approximation holds at the 1e-6 tail);
* Normal records: with ``Y`` the (M, N-1) standardised coordinates, ``M |mean(Y)|^2`` is
  chi-square with N-1 degrees of freedom (exact for Gaussian draws), and the likelihood-ratio
  statistic of ``cov = I`` with known mean, ``M (tr C - log det C - p)``, is asymptotically
  chi-square with p(p+1)/2 degrees of freedom (M = 20000, p = 4: Bartlett's correction changes
  it by under 0.1%).

Every statistical assertion has a negative control that the same check must reject: a biased
chooser (the first member of a category, a uniform non-empty record instead of a uniform unit,
the most loaded record), a non-invariant refresh (swaps that only sort, moves from a uniform
non-empty record), a chain stopped too early from a corner, a shift put on one record, and a
pair conditional with sigma x 1.05.

Autocorrelation: every chain is independent (one object per chain) and only its end state is
kept. The irreducibility tests start every chain at one corner and run a fixed number of moves,
chosen from the exact transition matrix (or the exact moment recursion for Normal records) so
that the law after them is within 1e-9 of the target; the end states are then independent
draws from a law that differs negligibly from the target.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.allocation import (
    CategoricalAllocation,
    NormalAllocation,
    PoissonAllocation,
    RngWords,
    _index_dtype,
)
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof

M = 20_000  # independent chains per statistical check
TV_TARGET = 1e-9  # exact distance to the target after a corner chain's fixed length


# --------------------------------------------------------------------------- references


class Space:
    """An enumerated finite state space of integer vectors with a lookup from vector to rank."""

    def __init__(self, states, base):
        self.states = np.asarray(states, dtype=np.int64)
        self.base = base
        self.weights = base ** np.arange(self.states.shape[1], dtype=np.int64)
        self.lut = np.full(base ** self.states.shape[1], -1, dtype=np.int64)
        self.lut[self.states @ self.weights] = np.arange(len(self.states))

    def ranks(self, xs):
        r = self.lut[np.asarray(xs, dtype=np.int64) @ self.weights]
        assert np.all(r >= 0), "an end state outside the state space"
        return r


def arrangements(counts):
    """All arrangements of ``counts`` (categories 0..k-1) as a Space (uniform law)."""
    base = np.repeat(np.arange(len(counts)), counts)
    return Space(sorted(set(itertools.permutations(base))), len(counts))


def compositions(n, total):
    """All count vectors of length n with the given total as a Space, with multinomial pmf."""
    states = [c for c in itertools.product(range(total + 1), repeat=n) if sum(c) == total]
    space = Space(states, total + 1)
    space.pmf = stats.multinomial(total, np.full(n, 1.0 / n)).pmf(space.states)
    return space


def gof(xs, space, pmf=None):
    """Chi-square p-value of end states ``xs`` against ``pmf`` (default uniform) on ``space``."""
    pmf = np.full(len(space.states), 1.0 / len(space.states)) if pmf is None else pmf
    return chisquare_gof(space.ranks(xs), lambda r: np.log(pmf[r]))


def exact_starts(space, pmf, rng, size=M):
    """``size`` independent exact draws from ``pmf`` on ``space``."""
    return space.states[rng.choice(len(space.states), size=size, p=pmf)]


def corner_length(space, step_matrix, corner, target):
    """Smallest number of moves after which the law from ``corner`` is within TV_TARGET."""
    law = np.zeros(len(space.states))
    law[space.ranks(np.asarray(corner)[None])[0]] = 1.0
    for length in range(1, 2000):
        law = law @ step_matrix
        if 0.5 * np.abs(law - target).sum() < TV_TARGET:
            return length
    raise AssertionError("the exact chain does not reach the target: not irreducible")


# --------------------------------------------------------------------------- categorical

CAT_START = (2, 2, 1)  # N = 5, k = 3: 30 arrangements


def run_categorical(starts, k, action):
    out = np.empty_like(starts)
    for m, row in enumerate(starts):
        alloc = CategoricalAllocation(row, k)
        action(alloc)
        out[m] = alloc.x
    return out


def first_member_relabel(xs, moves):
    """Negative control: relabel the lowest-index member of category j as k (biased chooser)."""
    xs = xs.copy()
    rows = np.arange(len(xs))
    for j, k in moves:
        first = np.argmax(xs == j, axis=1)
        xs[rows, first] = k
    return xs


@pytest.mark.parametrize(
    ("counts", "target", "moves"),
    [
        (CAT_START, (1, 1, 3), [(0, 2), (1, 2)]),
        (CAT_START, (0, 3, 2), [(0, 1), (0, 2)]),
        ((1, 2, 2), (3, 1, 1), [(1, 0), (2, 0)]),  # relabelling downwards
        ((4, 2), (2, 4), [(0, 1), (0, 1)]),  # Bernoulli, N = 6, S = 2 -> 4
    ],
)
def test_categorical_transport_is_exact(rng, counts, target, moves):
    """Uniform on arrangements with ``counts`` -> one move_to -> uniform with ``target``.

    False-alarm rate 1e-6 (chi-square over the arrangements); the first-member chooser applied
    to the same starts is rejected by the same check.
    """
    space = arrangements(counts)
    uniform = np.full(len(space.states), 1.0 / len(space.states))
    starts = exact_starts(space, uniform, rng)
    ends = run_categorical(starts, len(counts), lambda a: a.move_to(np.array(target), rng))
    dest = arrangements(target)
    assert_gof(gof(ends, dest), what="transport")
    # exactly sum(max(delta, 0)) records change, never more
    moved = sum(max(t - c, 0) for c, t in zip(counts, target, strict=True))
    assert np.all((ends != starts).sum(axis=1) == moved)
    assert_rejects(gof(first_member_relabel(starts, moves), dest), what="first-member chooser")


@pytest.mark.parametrize(
    ("counts", "target", "moves"),
    [
        ((4, 2), (2, 4), [(0, 1), (0, 1)]),  # Bernoulli, N = 6, S = 2 -> 4
        ((2, 5), (5, 2), [(1, 0)] * 3),  # N = 7, 3 of the 5 ones become zeros
        ((3, 1, 2), (1, 3, 2), [(0, 1), (0, 1)]),  # one donor, one receiver among 3
    ],
)
def test_categorical_bulk_transport_is_exact(rng, counts, target, moves):
    """The one-pass transport of large moves (bulk_min = 0 here) maps the uniform law on
    arrangements with ``counts`` to the uniform law with ``target``; exactly the moved records
    change. False-alarm rate 1e-6 (chi-square); the first-member chooser is rejected."""
    space = arrangements(counts)
    uniform = np.full(len(space.states), 1.0 / len(space.states))
    starts = exact_starts(space, uniform, rng)
    k = len(counts)
    before = []

    def bulk(alloc):
        alloc.bulk_min = 0
        alloc.refresh(3, rng)  # the grouping's order permuted (the law kept)
        before.append(alloc.x.copy())
        alloc.move_to(np.array(target), rng)

    ends = run_categorical(starts, k, bulk)
    dest = arrangements(target)
    assert_gof(gof(ends, dest), what="bulk transport")
    moved = sum(max(t - c, 0) for c, t in zip(counts, target, strict=True))
    assert np.all((ends != np.array(before)).sum(axis=1) == moved)
    assert_rejects(gof(first_member_relabel(starts, moves), dest), what="first-member chooser")


def test_bulk_transport_is_used_only_for_large_one_way_moves():
    """The one-pass path draws other words than the one-at-a-time path: with bulk_min =
    2**16, moves below it (or below a quarter of N, or between several categories) draw the
    same words as with bulk off; a large one-way move does not (deterministic)."""

    def words_after(x, k, target, bulk_min):
        alloc = CategoricalAllocation(x, k)
        alloc.bulk_min = bulk_min
        rng = np.random.default_rng(3)
        alloc.move_to(np.array(target), rng)
        assert alloc.counts.tolist() == list(target)
        return rng.integers(2**62, size=4).tolist(), alloc.x

    n = 300_000
    ones = np.ones(n, dtype=np.int8)
    off = 2**62
    # large one-way move (180000 of 300000): bulk by default
    big = [n - 120_000, 120_000]
    w_bulk, x_bulk = words_after(ones, 2, big, 2**16)
    assert w_bulk != words_after(ones, 2, big, off)[0]
    assert int((x_bulk != ones).sum()) == n - 120_000 and w_bulk == words_after(ones, 2, big, 0)[0]
    # below a quarter of N, below bulk_min, or two receivers: the one-at-a-time path
    small = [70_000, n - 70_000]
    assert words_after(ones, 2, small, 2**16)[0] == words_after(ones, 2, small, off)[0]
    x3 = np.repeat(np.array([0, 1, 2], dtype=np.int8), [n - 2, 1, 1])
    two = [100_000, 100_000, 100_000]
    assert words_after(x3, 3, two, 2**16)[0] == words_after(x3, 3, two, off)[0]
    few = [1000, n - 1000]
    assert words_after(ones, 2, few, 2**16)[0] == words_after(ones, 2, few, off)[0]


def sorting_swaps(xs, n_swaps, rng):
    """Negative control: swap two uniform records only when that sorts them (not invariant)."""
    xs = xs.copy()
    rows = np.arange(len(xs))
    for _ in range(n_swaps):
        i = rng.integers(0, xs.shape[1], len(xs))
        j = rng.integers(0, xs.shape[1], len(xs))
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        a, b = xs[rows, lo], xs[rows, hi]
        swap = a > b
        xs[rows[swap], lo[swap]] = b[swap]
        xs[rows[swap], hi[swap]] = a[swap]
    return xs


def test_categorical_refresh_keeps_the_law(rng):
    """Exact uniform starts, one swap each: still uniform (chi-square, false-alarm rate 1e-6).

    Negative control: the sorting swap from the same starts is rejected.
    """
    space = arrangements(CAT_START)
    uniform = np.full(len(space.states), 1.0 / len(space.states))
    starts = exact_starts(space, uniform, rng)
    ends = run_categorical(starts, 3, lambda a: a.refresh(1, rng))
    assert_gof(gof(ends, space), what="one swap")
    assert_rejects(gof(sorting_swaps(starts, 1, rng), space), what="sorting swap")


def swap_matrix(space):
    """Exact transition matrix of one swap of two uniform records (i = j allowed)."""
    n = space.states.shape[1]
    p = np.zeros((len(space.states),) * 2)
    for s, x in enumerate(space.states):
        for i, j in itertools.product(range(n), repeat=2):
            y = x.copy()
            y[i], y[j] = x[j], x[i]
            p[s, space.ranks(y[None])[0]] += 1.0 / n**2
    return p


def test_categorical_refresh_is_irreducible(rng):
    """From the sorted corner, chains of fixed length end uniform (false-alarm rate 1e-6).

    The length is the smallest after which the exact law is within 1e-9 (total variation) of
    uniform. Negative control: chains of 2 swaps, rejected by the same check.
    """
    space = arrangements(CAT_START)
    uniform = np.full(len(space.states), 1.0 / len(space.states))
    corner = np.repeat(np.arange(3), CAT_START)
    length = corner_length(space, swap_matrix(space), corner, uniform)
    starts = np.tile(corner, (M, 1))
    assert_gof(gof(run_categorical(starts, 3, lambda a: a.refresh(length, rng)), space))
    short = run_categorical(starts, 3, lambda a: a.refresh(2, rng))
    assert_rejects(gof(short, space), what="2 swaps from the corner")


# --------------------------------------------------------------------------- Poisson

POIS_N, POIS_S = 3, 4


def run_poisson(starts, action):
    out = np.empty_like(starts)
    for m, row in enumerate(starts):
        alloc = PoissonAllocation(row)
        action(alloc)
        assert alloc.total == int(alloc.x.sum())
        out[m] = alloc.x
    return out


def from_nonempty_record(xs, rng, to_uniform_record):
    """Negative control: take a unit from a uniform non-empty record (not a uniform unit)."""
    xs = xs.copy()
    rows = np.arange(len(xs))
    keys = np.where(xs > 0, rng.random(xs.shape), -1.0)
    xs[rows, np.argmax(keys, axis=1)] -= 1
    if to_uniform_record:
        xs[rows, rng.integers(0, xs.shape[1], len(xs))] += 1
    return xs


@pytest.mark.parametrize("total_new", [2, 6])
def test_poisson_transport_is_exact(rng, total_new):
    """Multinomial(4, uniform) on 3 records -> move_to -> Multinomial(total_new, uniform).

    False-alarm rate 1e-6 (chi-square); negative controls rejected by the same check: removal
    from a uniform non-empty record (down), additions to the most loaded record (up).
    """
    space = compositions(POIS_N, POIS_S)
    starts = exact_starts(space, space.pmf, rng)
    ends = run_poisson(starts, lambda a: a.move_to(total_new, rng))
    dest = compositions(POIS_N, total_new)
    assert_gof(gof(ends, dest, dest.pmf), what="transport")
    bad = starts.copy()
    for _ in range(abs(total_new - POIS_S)):
        if total_new < POIS_S:
            bad = from_nonempty_record(bad, rng, to_uniform_record=False)
        else:
            bad[np.arange(len(bad)), np.argmax(bad, axis=1)] += 1
    assert_rejects(gof(bad, dest, dest.pmf), what="biased unit choice")


def test_poisson_refresh_keeps_the_law(rng):
    """Exact starts, one unit move each: still Multinomial (false-alarm rate 1e-6).

    Negative control: a unit moved from a uniform non-empty record, rejected.
    """
    space = compositions(POIS_N, POIS_S)
    starts = exact_starts(space, space.pmf, rng)
    ends = run_poisson(starts, lambda a: a.refresh(1, rng))
    assert_gof(gof(ends, space, space.pmf), what="one move")
    bad = from_nonempty_record(starts, rng, to_uniform_record=True)
    assert_rejects(gof(bad, space, space.pmf), what="move from a non-empty record")


def unit_move_matrix(space):
    """Exact transition matrix of one move of a uniform unit to a uniform record."""
    n, total = space.states.shape[1], int(space.states[0].sum())
    p = np.zeros((len(space.states),) * 2)
    for s, x in enumerate(space.states):
        for r, r2 in itertools.product(range(n), repeat=2):
            y = x.copy()
            y[r] -= 1
            y[r2] += 1
            if x[r] > 0:
                p[s, space.ranks(y[None])[0]] += x[r] / total / n
    return p


def test_poisson_refresh_is_irreducible(rng):
    """All 4 units on record 0: chains of fixed length end Multinomial (false-alarm rate 1e-6).

    Length from the exact transition matrix (within 1e-9 in total variation). Negative
    control: chains of one move, rejected.
    """
    space = compositions(POIS_N, POIS_S)
    corner = np.array([POIS_S, 0, 0])
    length = corner_length(space, unit_move_matrix(space), corner, space.pmf)
    starts = np.tile(corner, (M, 1))
    ends = run_poisson(starts, lambda a: a.refresh(length, rng))
    assert_gof(gof(ends, space, space.pmf))
    short = run_poisson(starts, lambda a: a.refresh(1, rng))
    assert_rejects(gof(short, space, space.pmf), what="one move from the corner")


# --------------------------------------------------------------------------- Normal

NORM_N, SIGMA, NORM_S = 5, 1.3, 2.0


def sum_zero_basis(n):
    """An orthonormal basis (n, n-1) of the plane orthogonal to the ones vector."""
    q, _ = np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, : n - 1]]))
    return q[:, 1:]


def normal_pvalues(xs, total, sigma):
    """p-values of the mean and of the covariance of ``xs`` under N(total/N, sigma^2 (I-11'/N)).

    ``Y`` = standardised sum-zero coordinates, N(0, I_p) under the law. Mean: ``M |mean Y|^2``
    ~ chi2(p). Covariance: likelihood ratio of cov = I (known mean), ~ chi2(p(p+1)/2).
    """
    m, n = xs.shape
    y = (xs - total / n) @ sum_zero_basis(n) / sigma
    p = n - 1
    mean_stat = m * float(np.sum(y.mean(axis=0) ** 2))
    c = y.T @ y / m
    lr = m * (np.trace(c) - np.linalg.slogdet(c)[1] - p)
    return stats.chi2.sf(mean_stat, p), stats.chi2.sf(lr, p * (p + 1) // 2)


def exact_normal(total, rng, size=M):
    """Exact draws of N(total/N, sigma^2 (I - 11'/N)): centred i.i.d. normals, shifted."""
    z = rng.standard_normal((size, NORM_N))
    return total / NORM_N + SIGMA * (z - z.mean(axis=1, keepdims=True))


def run_normal(starts, action, sigma=SIGMA):
    out = np.empty_like(starts)
    for m, row in enumerate(starts):
        alloc = NormalAllocation(row, sigma)
        action(alloc)
        scale = np.abs(alloc.x).sum()
        assert abs(alloc.x.sum() - alloc.total) <= 1e-9 * scale, "sum off by > 1e-9 relative"
        out[m] = alloc.x
    return out


def assert_normal_law(xs, total, what=""):
    p_mean, p_cov = normal_pvalues(xs, total, SIGMA)
    assert_gof(p_mean, what=f"mean {what}")
    assert_gof(p_cov, what=f"covariance {what}")


def test_normal_transport_is_exact(rng):
    """x | S = 2 -> move_to(-3.5) -> x | S' (mean and covariance, each false-alarm rate 1e-6).

    Also: the records' sum equals the statistic to 1e-9 relative (to sum |x_i|). Negative
    control: the whole change put on record 0 (right sum, wrong law), rejected by the mean test.
    """
    total_new = -3.5
    starts = exact_normal(NORM_S, rng)
    assert_normal_law(run_normal(starts, lambda a: a.move_to(total_new)), total_new)
    bad = starts.copy()
    bad[:, 0] += total_new - NORM_S
    assert_rejects(normal_pvalues(bad, total_new, SIGMA)[0], what="shift on one record")


def test_normal_refresh_keeps_the_law(rng):
    """Exact starts, two pair updates each: law unchanged (mean, covariance: rate 1e-6 each).

    Negative control: pair updates with sigma x 1.05, rejected by the covariance test.
    """
    starts = exact_normal(NORM_S, rng)
    assert_normal_law(run_normal(starts, lambda a: a.refresh(2, rng)), NORM_S)
    wide = run_normal(starts, lambda a: a.refresh(20, rng), sigma=1.05 * SIGMA)
    assert_rejects(normal_pvalues(wide, NORM_S, SIGMA)[1], what="sigma x 1.05")


def pair_moments(x0, length):
    """Exact mean and second moment after ``length`` uniform pair updates from ``x0``."""
    n = x0.size
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    mean, second = x0.astype(float), np.outer(x0, x0)
    for _ in range(length):
        new_mean, new_second = np.zeros(n), np.zeros((n, n))
        for i, j in pairs:
            d = np.zeros(n)
            d[i], d[j] = 1.0, -1.0
            a = np.eye(n) - 0.5 * np.outer(d, d)
            new_mean += a @ mean / len(pairs)
            new_second += (a @ second @ a.T + 0.5 * SIGMA**2 * np.outer(d, d)) / len(pairs)
        mean, second = new_mean, new_second
    return mean, second


def test_normal_refresh_is_irreducible(rng):
    """From a far corner, chains of fixed length end at x | S (rate 1e-6 per check).

    The length makes the exact first two moments (moment recursion of the pair update) agree
    with the target's to 1e-9. Negative control: one pair update from the corner, rejected.
    """
    corner = np.array([NORM_S + 20.0, -5.0, -5.0, -5.0, -5.0])
    length = 120
    mean, second = pair_moments(corner, length)
    target_cov = SIGMA**2 * (np.eye(NORM_N) - 1.0 / NORM_N)
    assert np.max(np.abs(mean - NORM_S / NORM_N)) < TV_TARGET
    assert np.max(np.abs(second - np.outer(mean, mean) - target_cov)) < TV_TARGET
    starts = np.tile(corner, (M, 1))
    assert_normal_law(run_normal(starts, lambda a: a.refresh(length, rng)), NORM_S)
    short = run_normal(starts, lambda a: a.refresh(1, rng))
    assert_rejects(normal_pvalues(short, NORM_S, SIGMA)[0], what="one update from the corner")


def test_normal_resync_removes_drift():
    """resync spreads a sum discrepancy evenly and reports it (exact arithmetic on dyadics)."""
    alloc = NormalAllocation(np.array([1.0, 2.0, 3.0, 4.0]), 1.0)
    alloc.x[0] += 0.5  # a drift of the records' sum away from the statistic
    assert alloc.resync() == -0.5
    np.testing.assert_array_equal(alloc.x, [1.375, 1.875, 2.875, 3.875])
    assert alloc.x.sum() == alloc.total == 10.0


# --------------------------------------------------------------------------- cost and storage


def test_move_to_touches_only_the_moved_records(rng):
    """N = 1e6: move_to changes |delta| = 10 records, in place (counts, not timings)."""
    x = rng.integers(0, 3, 1_000_000).astype(np.int8)
    cat = CategoricalAllocation(x, 3)
    before, address = cat.x.copy(), cat.x.ctypes.data
    delta = np.array([-10, 4, 6])
    cat.move_to(cat.counts + delta, rng)
    assert cat.x.ctypes.data == address and cat.x.dtype == np.int8
    assert int((cat.x != before).sum()) == 10
    np.testing.assert_array_equal(np.bincount(cat.x, minlength=3), cat.counts)
    np.testing.assert_array_equal(
        cat.counts, np.bincount(before, minlength=3) + np.array([-10, 4, 6])
    )

    pois = PoissonAllocation(rng.poisson(2.0, 1_000_000).astype(np.int32))
    for delta in (10, -10):
        before, address = pois.x.copy(), pois.x.ctypes.data
        pois.move_to(pois.total + delta, rng)
        diff = pois.x.astype(np.int64) - before
        assert pois.x.ctypes.data == address
        assert int(diff.sum()) == delta and int(np.abs(diff).sum()) == 10
        assert pois.total == int(pois.x.sum(dtype=np.int64))


def test_normal_shift_is_in_place():
    """The Normal transport is one in-place add of (S' - S)/N to every record."""
    x = np.arange(8, dtype=np.float32)
    alloc = NormalAllocation(x, 2.0, copy=False)
    alloc.move_to(alloc.total + 4.0)
    assert alloc.x is x and x.dtype == np.float32
    np.testing.assert_array_equal(x, np.arange(8) + 0.5)


def test_storage_semantics():
    """copy=True keeps a private copy (dtype kept); copy=False adopts the array; refusals."""
    x = np.array([0, 1, 1, 2], dtype=np.int16)
    kept = CategoricalAllocation(x, 3)
    assert kept.x is not x and kept.x.dtype == np.int16
    adopted = CategoricalAllocation(x, 3, copy=False)
    adopted.move_to([0, 2, 2], np.random.default_rng(0))
    assert adopted.x is x and np.bincount(x, minlength=3).tolist() == [0, 2, 2]
    assert CategoricalAllocation([0, 1, 1], 2).x.dtype == np.int64
    with pytest.raises(ValueError, match="copy=False"):
        CategoricalAllocation(np.array([0, 1], dtype=np.uint64), 2, copy=False)
    with pytest.raises(ValueError, match=r"not in 0 \.\. 2"):
        CategoricalAllocation(np.array([0, 3]), 3)
    with pytest.raises(ValueError, match="do not fit"):
        CategoricalAllocation(np.array([0, 1], dtype=np.int8), 200)
    with pytest.raises(ValueError, match="sum to N"):
        kept.move_to([1, 1, 1], np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-negative"):
        PoissonAllocation([1, -1])
    assert NormalAllocation(np.zeros(3, dtype=np.float16), 1.0).x.dtype == np.float64
    with pytest.raises(ValueError, match="float32/64"):
        NormalAllocation(np.zeros(3, dtype=np.float16), 1.0, copy=False)
    with pytest.raises(ValueError, match="sigma"):
        NormalAllocation([0.0, 1.0], float("nan"))
    with pytest.raises(TypeError, match="Generator"):
        kept.refresh(1, 0)
    assert _index_dtype(2**31 - 1) == np.int32 and _index_dtype(2**31) == np.int64


def test_durations_are_refused_naming_the_argument():
    """``np.timedelta64`` is an integer for numpy (and ``numbers``): it was taken as a count
    (then ``int()`` of it raised an error naming nothing); now refused like a bool."""
    dt = np.timedelta64(3, "s")
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="k must be"):
        CategoricalAllocation(np.array([0, 1, 2]), dt)
    with pytest.raises(TypeError, match="n_swaps"):
        CategoricalAllocation(np.array([0, 1, 2]), 3).refresh(dt, rng)
    with pytest.raises(ValueError, match="sigma"):
        NormalAllocation([0.0, 1.0], dt)
    with pytest.raises(TypeError, match="total_new"):
        NormalAllocation([0.0, 1.0], 1.0).move_to(dt, rng)
    with pytest.raises(TypeError, match="total_new"):
        PoissonAllocation([1, 2]).move_to(dt, rng)
    # the same arguments as plain numbers are taken
    CategoricalAllocation(np.array([0, 1, 2]), np.int64(3)).refresh(np.int64(3), rng)
    NormalAllocation([0.0, 1.0], np.float64(1.0)).move_to(np.int64(3), rng)


def test_poisson_overflow_leaves_the_state_unchanged():
    """A record that would pass its dtype's maximum raises; move_to rolls back."""
    alloc = PoissonAllocation(np.array([120], dtype=np.int8))
    with pytest.raises(OverflowError, match="state unchanged"):
        alloc.move_to(130, np.random.default_rng(0))
    assert alloc.total == 120 and alloc.x.tolist() == [120]
    alloc.move_to(127, np.random.default_rng(0))  # up to the maximum is fine
    assert alloc.x.tolist() == [127]
    # both records at the maximum: any unit move to the other record would overflow it
    full = PoissonAllocation(np.array([127, 127], dtype=np.int8))
    with pytest.raises(OverflowError, match="after 0 moves"):
        full.refresh(200, np.random.default_rng(1))  # all 200 stay put: probability 2**-200
    assert full.total == 254 and full.x.tolist() == [127, 127]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.int32, np.int64])
def test_index_structures_stay_consistent(rng, dtype):
    """After mixed moves the grouping (order/start) and the units array describe ``.x`` exactly."""
    cat = CategoricalAllocation(rng.integers(0, 4, 500).astype(dtype), 4)
    pois = PoissonAllocation(rng.poisson(1.5, 300).astype(dtype))
    for _ in range(50):
        cat.move_to(rng.multinomial(500, [0.1, 0.2, 0.3, 0.4]), rng)
        cat.refresh(int(rng.integers(0, 200)), rng)
        pois.move_to(int(rng.integers(0, 900)), rng)
        pois.refresh(int(rng.integers(0, 200)), rng)
    assert cat.x.dtype == pois.x.dtype == dtype
    np.testing.assert_array_equal(np.sort(cat._order), np.arange(500))
    for j in range(4):
        assert np.all(cat.x[cat._order[cat._start[j] : cat._start[j + 1]]] == j)
    np.testing.assert_array_equal(cat.counts, np.bincount(cat.x, minlength=4))
    units = pois._units[: pois.total]
    np.testing.assert_array_equal(np.bincount(units, minlength=300), pois.x)


# --------------------------------------------------------------------------- advance (hot path)


def _twins(make):
    """Two equal allocations and two generators in the same state (deterministic checks)."""
    return make(), make(), np.random.default_rng(123), np.random.default_rng(123)


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.Philox, np.random.MT19937])
def test_advance_is_move_to_then_refresh_word_for_word(bit_generator):
    """advance(target, n, RngWords(rng)) gives the records, index structures and generator
    stream of move_to(target, rng) then refresh(n, rng), for every allocation class and bit
    generator (deterministic: false-alarm rate 0). Negative control: the same calls with the
    refresh before the move end elsewhere."""
    plan = np.random.default_rng(9)
    cats = plan.multinomial(2000, [0.2, 0.3, 0.5], size=30).astype(np.int64)
    totals = plan.integers(0, 5000, 30)
    sums = plan.normal(0.0, 50.0, 30)
    swaps = plan.integers(0, 40, 30)
    start_x = plan.integers(0, 3, 2000)
    for kind in ("categorical", "poisson", "normal"):
        if kind == "categorical":
            a, b = CategoricalAllocation(start_x, 3), CategoricalAllocation(start_x, 3)
            targets = cats
        elif kind == "poisson":
            a, b = PoissonAllocation(start_x), PoissonAllocation(start_x)
            targets = [int(t) for t in totals]
        else:
            a, b = NormalAllocation(start_x, 1.5), NormalAllocation(start_x, 1.5)
            targets = [float(t) for t in sums]
        r1, r2 = np.random.Generator(bit_generator(5)), np.random.Generator(bit_generator(5))
        words = RngWords(r2)
        for target, n in zip(targets, swaps, strict=True):
            a.move_to(target, r1)
            a.refresh(int(n), r1)
            b.advance(target, int(n), RngWords.of(r2, words))
        np.testing.assert_array_equal(a.x, b.x)
        assert r1.integers(2**62, size=8).tolist() == r2.integers(2**62, size=8).tolist()
        if kind == "categorical":
            np.testing.assert_array_equal(a._order, b._order)
            np.testing.assert_array_equal(a._start, b._start)
        if kind == "poisson":
            assert a.total == b.total
            np.testing.assert_array_equal(a._units[: a.total], b._units[: b.total])
        # negative control: refresh first, then move (other words for the same moves)
        c = type(a)(start_x, 3) if kind == "categorical" else None
        if c is not None:
            r3 = np.random.Generator(bit_generator(5))
            for target, n in zip(targets, swaps, strict=True):
                c.refresh(int(n), r3)
                c.move_to(target, r3)
            assert not np.array_equal(c.x, b.x)


def test_advance_checks_the_target_in_the_kernel():
    """A target of the wrong sum, sign, length or dtype raises before any move."""
    alloc = CategoricalAllocation(np.array([0, 1, 1, 2, 2, 2]), 3)
    words = RngWords(np.random.default_rng(0))
    x0, order0 = alloc.x.copy(), alloc._order.copy()
    bad = [
        np.array([1, 1, 1]),  # sum 3, not 6
        np.array([7, -1, 0]),  # a negative count
        np.array([3, 3]),  # k = 2 entries for 3 categories
        np.array([1.0, 2.0, 3.0]),  # float counts
        [1, 2, 3],  # not an array
    ]
    for target in bad:
        with pytest.raises(ValueError, match="int64 counts"):
            alloc.advance(target, 4, words)
        np.testing.assert_array_equal(alloc.x, x0)
        np.testing.assert_array_equal(alloc._order, order0)
    alloc.advance(np.array([1, 2, 3]), 4, words)  # the control: a valid target moves
    assert alloc.counts.tolist() == [1, 2, 3]
    with pytest.raises(OverflowError, match="state unchanged"):
        PoissonAllocation(np.array([120], dtype=np.int8)).advance(130, 0, words)


def test_rng_words_follow_the_generator():
    """RngWords.of keeps its words for the same Generator and renews them for another."""
    r1, r2 = np.random.default_rng(1), np.random.default_rng(1)
    w1 = RngWords(r1)
    assert RngWords.of(r1, w1) is w1
    w2 = RngWords.of(r2, w1)
    assert w2.rng is r2 and not np.array_equal(w1.words[:1], w2.words[:1])
    with pytest.raises(TypeError, match="Generator"):
        RngWords(np.random.RandomState(0))
