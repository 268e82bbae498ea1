"""The sensitivity prover (:mod:`pymc_dp.distributions.sensitivity`) against brute force.

Reference: the replace-one sensitivity computed by enumerating every data set of a few records
(all values of each record's support, or a grid of values for continuous records) and every
neighbour (one row replaced by any value), with the statistic evaluated by PyTensor's own
Python implementations of the ops (no rewrites), independent of the prover's rules.

Property: the proven L1 and L2 bounds are >= the brute-force sensitivity for random statistics
built from every supported op (hypothesis, derandomized: the same cases every run), with the
records enumerated by the prover and with its enumeration switched off (its interval rules
alone). No randomness beyond that fixed search, so the false-alarm rate is 0: a failure is a
bug. Tightness: the bound equals the brute force on linear statistics. Negative controls: the
reference itself exceeds the sampled-looking bound of the issue's switch example, and declared
sensitivities below the proof are refused.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytensor.compile.mode import Mode
from pytensor.graph.replace import graph_replace

import pymc_dp as pmdp
import pymc_dp.distributions.sensitivity as sens
from pymc_dp.distributions.sensitivity import (
    SensitivityProofWarning,
    check_declared_sensitivity,
    prove_sensitivity,
)

PY = Mode(linker="py", optimizer=None)
N = 3  # records per data set in the brute force
RTOL = 1e-12  # float rounding of the prover's sums


def brute_force(stat, records):
    """Largest L1 and L2 change of ``stat`` over all replace-one neighbours.

    ``records``: list of (variable, values of one element); every variable has N rows of
    scalars, and one record is row i of all of them (they share the record axis).
    """
    ins = [pt.tensor(dtype=v.dtype, shape=v.type.shape) for v, _ in records]
    out = graph_replace(stat, dict(zip([v for v, _ in records], ins, strict=True)), strict=False)
    fn = pytensor.function(ins, out, mode=PY, on_unused_input="ignore")
    row_values = list(itertools.product(*[vals for _, vals in records]))  # one record's values
    datasets = list(itertools.product(range(len(row_values)), repeat=N))
    index = {d: k for k, d in enumerate(datasets)}
    values = []
    for d in datasets:
        cols = [
            np.array([row_values[r][j] for r in d], dtype=v.dtype)
            for j, (v, _) in enumerate(records)
        ]
        values.append(np.asarray(fn(*cols), dtype=np.float64).ravel())
    values = np.array(values)
    best1 = best2 = 0.0
    for k, d in enumerate(datasets):
        for i in range(N):
            for r in range(len(row_values)):
                if r == d[i]:
                    continue
                other = index[(*d[:i], r, *d[i + 1 :])]
                diff = values[other] - values[k]
                best1 = max(best1, float(np.abs(diff).sum()))
                best2 = max(best2, float(np.sqrt((diff * diff).sum())))
    return best1, best2


def _records(kind):
    """Record variables (N rows) and the values brute force tries for one element."""
    if kind == "bernoulli":
        return pm.Bernoulli.dist(p=0.5, shape=N), [0, 1]
    if kind == "categorical":
        return pm.Categorical.dist(p=[0.2, 0.3, 0.5], shape=N), [0, 1, 2]
    if kind == "uniform_int":
        return pm.DiscreteUniform.dist(lower=-2, upper=1, shape=N), [-2, -1, 0, 1]
    if kind == "binomial":
        return pm.Binomial.dist(n=2, p=0.5, shape=N), [0, 1, 2]
    if kind == "uniform":  # continuous: a grid (brute force is then a lower bound of the truth)
        return pm.Uniform.dist(lower=-1.0, upper=2.0, shape=N), [-1.0, -0.25, 0.5, 2.0]
    raise ValueError(kind)


def _check(stat, records):
    """The property, with the prover's enumeration on and off."""
    ref1, ref2 = brute_force(stat, records)
    for max_enum in (sens.MAX_ENUM, 0):
        old = sens.MAX_ENUM
        sens.MAX_ENUM = max_enum
        try:
            proof = prove_sensitivity(stat)
        finally:
            sens.MAX_ENUM = old
        assert proof.proven, proof.reason
        assert proof.l1 >= ref1 * (1 - RTOL), (max_enum, proof, ref1)
        assert proof.l2 >= ref2 * (1 - RTOL), (max_enum, proof, ref2)
    return ref1, ref2, proof


# ---- random statistics ----------------------------------------------------------------------

CONSTS = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 1.0, 1.5, 3.0])
ROW_OPS = [
    "add",
    "sub",
    "mul",
    "neg",
    "abs",
    "clip",
    "maximum",
    "minimum",
    "switch_row",
    "cmp",
    "cast_int",
    "weights",
    "sqr",
    "and",
]
AGG_OPS = [
    "sum",
    "mean",
    "max",
    "min",
    "dot",
    "onehot",
    "bincount",
    "lookup",
    "switch_agg",
    "stack",
    "index",
    "slice_sum",
    "clip_agg",
    "mul_agg",
    "outer",
    "any",
]


@st.composite
def row_expr(draw, leaves, depth, force=None):
    """A vector (N,) expression, row i reading record i only."""
    if depth <= 0 and force is None:
        return draw(st.sampled_from(leaves))
    op = force or draw(st.sampled_from(["leaf", *ROW_OPS]))
    sub = row_expr(leaves, depth - 1)
    if op == "leaf":
        return draw(st.sampled_from(leaves))
    a = draw(sub)
    c = np.float64(draw(CONSTS))
    if op == "add":
        return a + (draw(sub) if draw(st.booleans()) else c)
    if op == "sub":
        return a - draw(sub)
    if op == "mul":
        return a * (draw(sub) if draw(st.booleans()) else c)
    if op == "neg":
        return -a
    if op == "abs":
        return pt.abs(a)
    if op == "clip":
        lo = draw(CONSTS)
        return pt.clip(a, np.float64(lo), np.float64(lo + draw(st.sampled_from([0.5, 1.0, 2.0]))))
    if op == "maximum":
        return pt.maximum(a, draw(sub) if draw(st.booleans()) else c)
    if op == "minimum":
        return pt.minimum(a, c)
    if op == "switch_row":
        cmp = draw(st.sampled_from([pt.lt, pt.gt, pt.eq, pt.le, pt.ge]))
        return pt.switch(cmp(a, c), draw(sub), draw(sub) if draw(st.booleans()) else c)
    if op == "cmp":
        cmp = draw(st.sampled_from([pt.lt, pt.gt, pt.eq, pt.neq, pt.le, pt.ge]))
        return pt.cast(cmp(a, c), "int64")
    if op == "cast_int":
        return pt.cast(a * np.float64(0.7), "int64")
    if op == "weights":
        w = np.array(draw(st.lists(CONSTS, min_size=N, max_size=N)))
        return a * w
    if op == "sqr":
        return pt.sqr(a)
    if op == "and":
        return pt.cast(pt.and_(pt.gt(a, c), pt.lt(draw(sub), np.float64(1.0))), "float64")
    raise AssertionError(op)


@st.composite
def agg_expr(draw, leaves, cat, depth, force=None):
    """A scalar or vector expression mixing the records (a reduction over them)."""
    op = force or draw(st.sampled_from(AGG_OPS))
    row = draw(row_expr(leaves, depth))
    if op == "sum":
        return row.sum()
    if op == "mean":
        return row.mean()
    if op == "max":
        return row.max()
    if op == "min":
        return row.min()
    if op == "dot":
        w = np.array(draw(st.lists(CONSTS, min_size=2 * N, max_size=2 * N))).reshape(2, N)
        return pt.dot(w, row)
    if op == "onehot":
        return pt.eq(cat[:, None], pt.arange(3)).sum(0) * np.float64(draw(CONSTS))
    if op == "bincount":
        return pt.bincount(cat, minlength=3)
    if op == "lookup":
        table = np.array(draw(st.lists(CONSTS, min_size=3, max_size=3)))
        return pt.as_tensor(table)[cat].sum()
    if op == "switch_agg":
        s = row.sum()
        c = np.float64(draw(CONSTS))
        cmp = draw(st.sampled_from([pt.lt, pt.gt, pt.eq, pt.le, pt.ge]))
        other = draw(agg_expr(leaves, cat, 0, force="sum")) if draw(st.booleans()) else c * 5
        return pt.switch(cmp(s, c), other, s)
    if op == "stack":
        return pt.stack([row.sum(), draw(agg_expr(leaves, cat, 0, force="max"))])
    if op == "index":
        return row[draw(st.integers(0, N - 1))] + row[1:].sum()
    if op == "slice_sum":
        return row[: draw(st.integers(1, N))].sum()
    if op == "clip_agg":
        return pt.clip(row.sum(), np.float64(-1.0), np.float64(draw(CONSTS) + 2.0))
    if op == "mul_agg":
        return row.sum() * np.float64(draw(CONSTS)) + pt.abs(row.sum())
    if op == "outer":  # X'X-style moments of two row expressions
        other = draw(row_expr(leaves, 0))
        return pt.dot(pt.stack([row, other]), pt.stack([row, other]).T)
    if op == "any":
        return pt.cast(pt.any(pt.gt(row, np.float64(draw(CONSTS)))), "int64")
    raise AssertionError(op)


def _setup(kinds):
    recs = [_records(k) for k in kinds]
    cat = pm.Categorical.dist(p=[0.2, 0.3, 0.5], shape=N)
    return recs, cat


SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
KINDS = st.sampled_from(["bernoulli", "uniform_int", "binomial", "uniform"])


@pytest.mark.parametrize("op", ROW_OPS + AGG_OPS)
@settings(SETTINGS, max_examples=4)
@given(data=st.data())
def test_bound_at_least_brute_force_per_op(op, data):
    """Every supported op, as the outermost op of a random statistic of one record variable
    (and a categorical one for counts/lookups), enumeration on and off."""
    kind = data.draw(KINDS)
    (rec, vals), cat = _records(kind), None
    if op in AGG_OPS:
        cat = pm.Categorical.dist(p=[0.2, 0.3, 0.5], shape=N)
        stat = data.draw(agg_expr([rec], cat, 1, force=op))
    else:
        stat = data.draw(row_expr([rec], 1, force=op)).sum()
    records = [(rec, vals)] + ([(cat, [0, 1, 2])] if cat is not None and _reads(stat, cat) else [])
    if len(records) == 2 and kind == "uniform":
        records[0] = (rec, vals[::3])  # keep the grid small
    _check(stat, records)


def _reads(stat, var):
    from pytensor.graph.traversal import ancestors

    return var in set(ancestors([stat]))


@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_bound_at_least_brute_force_random_statistics(data):
    """Deeper random statistics of two record variables sharing the record axis."""
    k1, k2 = data.draw(KINDS), data.draw(st.sampled_from(["bernoulli", "categorical"]))
    (r1, v1), (r2, v2) = _records(k1), _records(k2)
    if k1 == "uniform":
        v1 = v1[::3]
    stat = data.draw(agg_expr([r1, r2], r2, 2))
    records = [(r, v) for r, v in ((r1, v1), (r2, v2)) if _reads(stat, r)]
    if records:
        _check(stat, records)


@pytest.mark.slow
@settings(SETTINGS, max_examples=400)
@given(data=st.data())
def test_bound_at_least_brute_force_random_statistics_long(data):
    """The same property over many more statistics (slow tier)."""
    test_bound_at_least_brute_force_random_statistics.hypothesis.inner_test(data=data)


# ---- tightness and negative controls --------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda x: x.sum(),
        lambda x: (np.array([1.0, -2.0, 0.5]) * x).sum(),
        lambda x: pt.dot(np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]]), x),
        lambda x: pt.stack([x.sum(), (2.0 * x).sum()]),
        lambda x: x.mean(),
        lambda x: (x[:, None] * np.array([[1.0, -1.0, 2.0]])).sum(0),
        lambda x: pt.clip(x, np.float64(0.0), np.float64(1.0)).sum(),
    ],
)
@pytest.mark.parametrize("kind", ["uniform_int", "binomial", "uniform"])
def test_tight_on_linear_statistics(build, kind):
    """Linear statistics (and a clip, linear on a box): the bound equals the brute force."""
    rec, vals = _records(kind)
    stat = build(rec)
    ref1, ref2, proof = _check(stat, [(rec, vals)])
    # the grid holds both ends of the support, where linear statistics attain their sensitivity
    assert proof.l1 == pytest.approx(ref1, rel=1e-12)
    assert proof.l2 == pytest.approx(ref2, rel=1e-12)


def test_one_hot_counts_exact():
    """One-hot count vectors: L1 2 and L2 sqrt(2), as enumeration (not K) gives."""
    with pm.Model():
        c = pm.Categorical("c", p=np.full(5, 0.2), shape=40)
    for stat in (pt.eq(c[:, None], pt.arange(5)).sum(0), pt.bincount(c, minlength=5)):
        proof = prove_sensitivity(stat)
        assert proof.l1 == 2.0
        assert proof.l2 == pytest.approx(math.sqrt(2.0), rel=1e-15)


def _issue_switch(n):
    x = pm.Bernoulli.dist(p=0.5, shape=n)
    return pt.switch(pt.eq(x.sum(), n), 1000, x.sum()), x


def test_issue_switch_bound_is_951_and_brute_force_agrees_on_small_n():
    stat, _ = _issue_switch(50)
    proof = prove_sensitivity(stat)
    assert proof.l1 == 951.0 and proof.l2 == 951.0  # |1000 - 49|, exact
    # the same construction at N records: brute force gives 1000 - (N - 1), the prover too
    small, x = _issue_switch(N)
    ref1, _, _ = _check(small, [(x, [0, 1])])
    assert ref1 == 1000 - (N - 1)
    assert prove_sensitivity(small).l1 == ref1
    # control: the reference has power: the bound of a branch alone (x.sum(): 1), what the
    # changes of the branches give without the jump, is far below it
    assert prove_sensitivity(x.sum()).l1 == 1.0 < ref1


def test_issue_switch_release_refused_with_both_numbers():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=50)
        with pytest.raises(ValueError, match=r"sensitivity of release 'z' is 1 .* up to 951 "):
            pmdp.Release(
                "z",
                pt.switch(pt.eq(x.sum(), 50), 1000, x.sum()),
                pmdp.Geometric(epsilon=1.0),
                observed=20,
            )
        # declared at the proven bound: accepted
        pmdp.Release(
            "z",
            pt.switch(pt.eq(x.sum(), 50), 1000, x.sum()),
            pmdp.Geometric(epsilon=1.0, sensitivity=951),
            observed=20,
        )


@pytest.mark.parametrize(
    ("mechanism", "exact"),
    [
        (lambda s: pmdp.Laplace(epsilon=1.0, sensitivity=s), 7.0),
        (lambda s: pmdp.Geometric(epsilon=1.0, sensitivity=s), 7),
    ],
)
def test_declared_one_below_exact_refused_exact_accepted(mechanism, exact):
    """Weighted count sum(w x) with w = (3, 7, 1, ...): exact L1 sensitivity 7."""
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=6)
        stat = (np.array([3, 7, 1, 2, 0, 5]) * x).sum()
        with pytest.raises(ValueError, match=r"sensitivity.* is 6 .* up to 7 "):
            pmdp.Release("z", stat, mechanism(exact - 1), observed=3)
        pmdp.Release("z", stat, mechanism(exact), observed=3)


def test_gaussian_checks_l2():
    """Gaussian mechanisms declare an L2 sensitivity: sqrt(2) for one-hot counts, not 2."""
    with pm.Model():
        c = pm.Categorical("c", p=np.full(4, 0.25), shape=20)
        counts = pt.eq(c[:, None], pt.arange(4)).sum(0)
        pmdp.Release(
            "ok", counts, pmdp.Gaussian(rho=0.5, sensitivity=math.sqrt(2)), observed=np.zeros(4)
        )
        with pytest.raises(ValueError, match=r"L2 norm"):
            pmdp.Release(
                "bad", counts, pmdp.Gaussian(rho=0.5, sensitivity=1.4), observed=np.zeros(4)
            )


def test_scale_only_mechanism_not_checked():
    """A mechanism given by its noise scale states no privacy: nothing to check."""
    stat, _ = _issue_switch(50)
    assert check_declared_sensitivity(stat, pmdp.Geometric(alpha=0.5), "z") is None


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda x, y: y.sum(), "infinite"),  # unclipped Normal records
        (lambda x, y: x.prod(), "Prod"),  # an op without a rule
    ],
)
def test_unprovable_warns_and_says_why(build, reason):
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=5)
        y = pm.Normal("y", shape=5)
        stat = build(x, y)
        proof = prove_sensitivity(stat)
        assert not proof.proven and reason in proof.reason and math.isinf(proof.l1)
        with pytest.warns(SensitivityProofWarning, match=reason):
            pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0), observed=1.0)


def test_record_sets_of_different_lengths_do_not_add():
    """Two populations (lengths 4 and 6): one record is in one of them, so L1 is 1, not 2."""
    a = pm.Bernoulli.dist(p=0.5, shape=4)
    b = pm.Bernoulli.dist(p=0.5, shape=6)
    assert prove_sensitivity(pt.stack([a.sum(), b.sum()])).l1 == 1.0
    assert prove_sensitivity(a.sum() + b.sum()).l1 == 1.0


def test_data_weights_read_at_current_value():
    with pm.Model():
        weights = pm.Data("w", np.array([1.0, 4.0, 2.0]))
        x = pm.Bernoulli("x", p=0.5, shape=3)
        assert prove_sensitivity((weights * x).sum()).l1 == 4.0


# ---- residue of issue 24 ----------------------------------------------------------------------


def test_release_over_zero_records_refused_clearly():
    """Before: built, then pm.sample failed with a numpy reshape error."""
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=0)
        with pytest.raises(ValueError, match=r"record variable 'x' of shape \(0,\).* no records"):
            pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=0.0)


@pytest.mark.parametrize("value", [1 + 2j, "3", True, [1.0, 2 + 0j]])
def test_data_release_from_complex_or_string_refused(value):
    """Before: PyMC stored these as floats (1+2j -> 1.0, "3" -> 3.0) and the release took them."""
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=(np.size(value), 2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            d = pm.Data("d", value)
        stat = x.sum(axis=1) if np.ndim(value) else x.sum()
        with pytest.raises(TypeError, match=r"observed must hold real numbers.*pm.Data 'd'"):
            pmdp.Release("z", stat, pmdp.Laplace(scale=1.0), observed=d)


def test_data_release_from_numbers_still_accepted_after_set_data():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=3)
        d = pm.Data("d", "3")
        pm.set_data({"d": 2.0})  # replaced by a number: accepted
        pmdp.Release("z", x.sum(), pmdp.Laplace(scale=1.0), observed=d)
        d2 = pm.Data("d2", 2.0)
        pmdp.Release("z2", x.sum(), pmdp.Laplace(scale=1.0), observed=d2)


def test_property_harness_rejects_a_wrong_prover(monkeypatch):
    """Control: the same check fails for a prover that under-states by a half, and for one
    that forgets the switch's jump between branches (1 instead of N at N records)."""
    stat, x = _issue_switch(N)
    real = prove_sensitivity

    def halved(s):
        p = real(s)
        return sens.SensitivityProof(p.l1 / 2, p.l2 / 2, True, None, p.records)

    monkeypatch.setattr(f"{__name__}.prove_sensitivity", halved)
    with pytest.raises(AssertionError):
        _check(stat, [(x, [0, 1])])
    monkeypatch.undo()
    # a bound from the branches' own changes only (what sampling configurations tends to see)
    monkeypatch.setattr(sens, "_refinements", lambda *a: {})  # still sound: 1000
    assert prove_sensitivity(stat).l1 == 1000.0
    naive = max(real(x.sum()).l1, 0.0)  # the change of either branch alone
    with pytest.raises(AssertionError):
        assert naive >= brute_force(stat, [(x, [0, 1])])[0]


# ---- the matrix-product forms of the interval and change bounds ------------------------------


def _dense_corner_sums(alo, ahi, blo, bhi):
    """Reference: every term's four corner products (0 * inf = 0), min and max, summed."""

    def smul(x, y):
        with np.errstate(invalid="ignore"):
            out = x * y
        return np.where((x == 0) | (y == 0), 0.0, out)

    corners = [smul(x[:, :, None], y[None, :, :]) for x in (alo, ahi) for y in (blo, bhi)]
    with np.errstate(invalid="ignore"):
        return (
            np.sum(np.minimum.reduce(corners), axis=1),
            np.sum(np.maximum.reduce(corners), axis=1),
        )


@pytest.mark.parametrize("exact_side", ["left", "right", "neither"])
def test_interval_matmul_equals_the_corner_sums(rng, exact_side):
    """``_interval_matmul`` (matrix products when one side is exact) against the dense corner
    sums, with zeros and +-inf in the interval operand (0 * inf = 0, +inf meeting -inf is nan),
    and both against a sum worked by hand. Integer-valued entries, so every sum is exact and
    the comparison is exact: false-alarm rate 0. Control: the naive product of the ends
    (``a @ b.lo``, ``a @ b.hi``) is rejected by the hand-worked case."""
    k, j, m = 4, 7, 3
    vals = np.array([-np.inf, -3.0, -1.0, 0.0, 0.0, 2.0, 5.0, np.inf])

    def interval(shape):
        ends = np.sort(rng.choice(vals, size=(2, *shape)), axis=0)
        return ends[0], ends[1]

    def exact(shape):
        v = rng.integers(-3, 4, size=shape).astype(np.float64)
        return v, v

    shapes = ((k, j), (j, m))
    if exact_side == "left":
        (alo, ahi), (blo, bhi) = exact(shapes[0]), interval(shapes[1])
    elif exact_side == "right":
        (alo, ahi), (blo, bhi) = interval(shapes[0]), exact(shapes[1])
    else:
        (alo, ahi), (blo, bhi) = interval(shapes[0]), interval(shapes[1])
    lo, hi = sens._interval_matmul(
        sens._AV(lo=alo, hi=ahi, integer=True), sens._AV(lo=blo, hi=bhi, integer=True)
    )
    ref_lo, ref_hi = _dense_corner_sums(alo, ahi, blo, bhi)
    np.testing.assert_array_equal(lo, ref_lo)
    np.testing.assert_array_equal(hi, ref_hi)
    # by hand: 2 * [-1, 3] + (-1) * [0, inf] + 0 * [-inf, inf] = [-2, 6] + [-inf, 0] + 0
    a = np.array([[2.0, -1.0, 0.0]])
    blo, bhi = np.array([[-1.0], [0.0], [-np.inf]]), np.array([[3.0], [np.inf], [np.inf]])
    hand = (np.array([[-np.inf]]), np.array([[6.0]]))
    got = sens._interval_matmul(sens._AV(a, a, True), sens._AV(blo, bhi, True))
    for ours, ref in zip((got, _dense_corner_sums(a, a, blo, bhi)), (hand, hand), strict=True):
        np.testing.assert_array_equal(ours[0], ref[0])
        np.testing.assert_array_equal(ours[1], ref[1])
    with np.errstate(invalid="ignore"), pytest.raises(AssertionError):
        np.testing.assert_array_equal((a @ blo, a @ bhi), hand)


def test_change_bound_products_equal_the_dense_forms(rng):
    """``_smul_mat`` and ``_max_prod`` (blocked) against the dense ``sum_j`` / ``max_j`` of
    ``d_ij m_jk`` with 0 * inf = 0, nonnegative bounds with zeros and infinities, including
    more columns than one block holds. Exact comparison: false-alarm rate 0."""
    d = rng.choice([0.0, 0.5, 1.0, 3.0, np.inf], size=(3, 50))
    m = rng.choice([0.0, 1.0, 2.0, np.inf], size=(50, 4))
    with np.errstate(invalid="ignore"):
        prod = np.where((d[:, :, None] == 0) | (m[None] == 0), 0.0, d[:, :, None] * m[None])
    np.testing.assert_array_equal(sens._smul_mat(d, m), prod.sum(axis=1))
    old = sens.MAX_ENUM_SIZE
    try:
        sens.MAX_ENUM_SIZE = 12 * 7  # blocks of 7 of the 50 columns
        np.testing.assert_array_equal(sens._max_prod(d, m), prod.max(axis=1))
    finally:
        sens.MAX_ENUM_SIZE = old
    # control: the plain product (0 * inf = nan) differs from the reference
    with np.errstate(invalid="ignore"):
        assert np.isnan(d @ m).any() and not np.isnan(prod.sum(axis=1)).any()
