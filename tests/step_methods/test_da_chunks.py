"""Large additive blocks sweep a chunk of records at a time (issue 14, memory).

The chunked sweep offers every record its proposal against the running statistic of all the
records, with the same uniforms as the whole-block sweep, so its chain is the whole-block chain:
bit for bit when the contributions sum exactly (integer weights), and with the same accept /
reject decisions when they do not (a decision could differ only when a uniform falls within a
rounding error, about 1e-13 relative, of its acceptance ratio: at most a few hundred thousand
decisions per test, a chance below 1e-7 per run).
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp as pmdp
from pymc_dp.distributions.sensitivity import _unchecked
from pymc_dp.step_methods import da_chunks
from pymc_dp.step_methods.data_augmentation import DataAugmentation


@pytest.fixture
def chunked(monkeypatch):
    """Blocks of >= 100 records are large and go 64 records at a time."""
    monkeypatch.setattr(da_chunks, "LARGE_BLOCK", 100)
    monkeypatch.setattr(da_chunks, "CHUNK", 64)


def _whole(monkeypatch):
    monkeypatch.setattr(da_chunks, "LARGE_BLOCK", 1 << 30)


def _counts_model(weights, sensitivity, observed):
    n = len(weights)
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 2.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        stat = pt.stack([x.sum(), (weights * x).sum()])
        mech = pmdp.Laplace(epsilon=1.0, sensitivity=sensitivity)
        pmdp.Release("z", stat, mech, observed=observed)
    return model


def _regression_model(n=300, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3))
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0.0, 1.0, shape=3)
        y = pm.Normal("y", pt.dot(Xd, beta), 1.0, shape=n)
        yc = pt.clip(y, -2.0, 2.0)
        stat = pt.concatenate([pt.dot(Xd.T, yc), (yc**2).sum()[None]])
        mech = pmdp.Laplace(epsilon=1.0, sensitivity=2 * 3 * 2.0 + 4.0)
        pmdp.Release("z", stat, mech, observed=[5.0, -3.0, 2.0, 300.0])
    return model


def _run(model, names, sweeps=5, seed=7, copy_between=False):
    with model:
        step = DataAugmentation([model[nm] for nm in names], rng=seed)
    point = model.initial_point()
    out = []
    for _ in range(sweeps):
        if copy_between:  # fresh arrays: the chunked sweep cannot reuse its statistic
            point = {k: np.array(v) for k, v in point.items()}
        point, _ = step.step(point)
        out.append(np.concatenate([np.ravel(point[nm]) for nm in names]))
    return np.array(out), step


def test_exact_sums_give_the_whole_block_chain_bit_for_bit(monkeypatch, chunked):
    weights = np.tile([1.0, 2.0, 3.0], 100)  # 300 records: chunks of 64, 64, 64, 64, 44
    model = _counts_model(weights, 6.0, [140.0, 290.0])
    chunk_chain, step = _run(model, ["x"])
    spec, scratch = step._blocks[0]
    assert not spec.generic and spec.chunk_fn is not None
    assert spec.chunk_fn.bounds()[-1] == (256, 300) and len(spec.chunk_fn.bounds()) == 5
    assert scratch.t_cur is None and scratch.total is not None
    _whole(monkeypatch)
    whole_chain, step_w = _run(model, ["x"])
    assert step_w._blocks[0][0].chunk_fn is None
    assert (whole_chain.std(axis=0) > 0).any()
    np.testing.assert_array_equal(chunk_chain, whole_chain)
    # negative control: another seed, another chain (the comparison can fail)
    other, _ = _run(model, ["x"], seed=8)
    assert not np.array_equal(other, chunk_chain)


def test_regression_records_chunked_like_whole(monkeypatch, chunked):
    """Continuous records, a (n, 3) data matrix sliced with the records, clamped moments."""
    model = _regression_model()
    chunk_chain, step = _run(model, ["y"], sweeps=4)
    spec, _ = step._blocks[0]
    assert spec.chunk_fn is not None
    # the chunk function gives rows start:stop of the whole-block contributions
    point = model.initial_point()
    args = [point[k] for k in step._input_names]
    recs = [np.random.default_rng(1).normal(size=300)]
    whole = np.asarray(spec.fn(*args, *recs)[0])
    bounds = spec.chunk_fn.bounds()
    parts = np.concatenate([spec.chunk_fn.rows(args, recs, s, e) for s, e in bounds])
    np.testing.assert_allclose(parts, whole, rtol=1e-14, atol=1e-14)
    _whole(monkeypatch)
    whole_chain, _ = _run(model, ["y"], sweeps=4)
    accepted = chunk_chain[1:] != chunk_chain[:-1]
    assert accepted.any() and not accepted.all()  # some proposals rejected, some accepted
    np.testing.assert_array_equal(chunk_chain, whole_chain)


def test_reused_statistic_equals_a_fresh_sum(chunked):
    """Between sweeps only the statistic is kept (m numbers, weak references to the records);
    fresh arrays make the sweep re-sum it, with the same chain. Negative control: a wrong kept
    statistic changes the chain."""
    weights = np.linspace(-1.0, 1.0, 300)
    model = _counts_model(weights, 2.0, [150.0, 4.0])
    kept, _ = _run(model, ["x"], sweeps=6)
    fresh, _ = _run(model, ["x"], sweeps=6, copy_between=True)
    np.testing.assert_array_equal(kept, fresh)
    with model:
        step = DataAugmentation([model["x"]], rng=7)
    point = model.initial_point()
    point, _ = step.step(point)
    step._blocks[0][1].total = step._blocks[0][1].total + 40.0
    wrong, _ = step.step(point)
    with model:
        step2 = DataAugmentation([model["x"]], rng=7)
    point2, _ = step2.step(model.initial_point())
    right, _ = step2.step(point2)
    assert not np.array_equal(wrong["x"], right["x"])


def test_sensitivity_refusal_names_the_record_in_a_later_chunk(monkeypatch, chunked):
    """Records 200 on contribute 5 to a release declared with sensitivity 2: the construction
    check refuses, naming record 200 (in the fourth chunk), as the whole-block check does."""
    weights = np.where(np.arange(300) < 200, 1.0, 5.0)
    with _unchecked():  # the step's check is under test (Release's proof refuses 2)
        model = _counts_model(weights, 2.0, [150.0, 300.0])
    for whole in (False, True):
        if whole:
            _whole(monkeypatch)
        with model, pytest.raises(ValueError, match="replacing record 200 of"):
            DataAugmentation([model["x"]], rng=1)
    # control: the same weights with their true L1 sensitivity (1 + 5) are accepted
    ok = _counts_model(weights, 6.0, [150.0, 300.0])
    with ok:
        DataAugmentation([ok["x"]], rng=1)


def test_blocks_whose_t_reads_other_variables_are_not_chunked(chunked):
    """Observed children (per-record log-ratios) or a statistic that reads a parameter: the
    whole-block sweep, which is what those need."""
    n = 200
    with pm.Model():
        x = pm.Bernoulli("x", p=0.4, shape=n)
        pm.Normal("w", x, 1.0, observed=np.zeros(n))
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=80.0)
        step = DataAugmentation([x], rng=1)
    assert step._blocks[0][0].chunk_fn is None and not step._blocks[0][0].generic
    with pm.Model() as param:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pm.Bernoulli("x", p=0.4, shape=n)
        pmdp.Release("z", (x * mu).sum(), pmdp.Laplace(epsilon=1.0), observed=3.0)
        step = DataAugmentation([x], rng=1)
    assert step._blocks[0][0].chunk_fn is None
    point, _ = step.step(param.initial_point())
    assert point["x"].shape == (n,)


def test_chunked_step_pickles_and_continues_the_same_chain(chunked):
    model = _counts_model(np.linspace(-1.0, 1.0, 300), 2.0, [150.0, 4.0])
    with model:
        step = DataAugmentation([model["x"]], rng=5)
    point, _ = step.step(model.initial_point())
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone._blocks[0][1].total is None  # the kept statistic is not pickled
    a, _ = step.step(point)
    b, _ = clone.step(point)
    np.testing.assert_array_equal(a["x"], b["x"])


def test_pm_sample_with_chunked_records(chunked):
    """End to end: pm.sample assigns the step; the chunked sweep runs inside it."""
    model = _counts_model(np.tile([1.0, 2.0], 150), 4.0, [150.0, 220.0])
    with model:
        idata = pm.sample(20, tune=20, chains=1, random_seed=3, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    assert idata.posterior["p"].shape == (1, 20)
    assert 0.0 < float(idata.sample_stats["da_accept_rate"].mean()) <= 1.0


def test_chunked_records_are_updated_in_place(monkeypatch, chunked):
    """A chunked block writes the accepted proposals into the incoming record array and returns
    it (one copy of the records per run); read-only arrays are copied first. Control: a whole
    block returns a fresh array and leaves the incoming one as it was."""
    model = _counts_model(np.linspace(-1.0, 1.0, 300), 2.0, [150.0, 4.0])
    with model:
        step = DataAugmentation([model["x"]], rng=2)
    point = model.initial_point()
    before = point["x"].copy()
    new, _ = step.step(point)
    assert new["x"] is point["x"] and not np.array_equal(new["x"], before)
    frozen = dict(new)
    frozen["x"] = np.array(new["x"])
    frozen["x"].flags.writeable = False
    kept = frozen["x"].copy()
    newer, _ = step.step(frozen)
    assert newer["x"] is not frozen["x"] and np.array_equal(frozen["x"], kept)
    _whole(monkeypatch)
    with model:
        whole = DataAugmentation([model["x"]], rng=2)
    point = model.initial_point()
    before = point["x"].copy()
    new, _ = whole.step(point)
    assert new["x"] is not point["x"] and np.array_equal(point["x"], before)


def test_missing_information_estimate_chunk_by_chunk(monkeypatch, chunked):
    """The fraction of missing information pools the contributions' variance over chunks: the
    same number as over whole batches (the same draws)."""
    from pymc_dp.step_methods.soma import missing_information_fraction

    model = _regression_model()
    with model:
        step = DataAugmentation([model["y"]], rng=4)
    spec, _ = step._blocks[0]
    point = model.initial_point()
    args = [point[k] for k in step._input_names]
    noise_var = np.full(4, 2.0 * 16.0**2)
    lam_chunks = missing_information_fraction(spec, args, noise_var, np.random.default_rng(9))
    whole_spec = type("Whole", (), {"fn": spec.fn, "proposer": spec.proposer, "n": spec.n,
                                    "names": spec.names, "chunk_fn": None})()  # fmt: skip
    lam_whole = missing_information_fraction(whole_spec, args, noise_var, np.random.default_rng(9))
    np.testing.assert_allclose(lam_chunks, lam_whole, rtol=1e-10)
    assert (lam_whole > 0).all() and (lam_whole < 1).all()


def test_chunked_records_in_parallel_chains_match_sequential(chunked):
    """With ``cores=2`` each worker updates its own records in place: the draws are those of the
    same seed with ``cores=1``."""
    model = _counts_model(np.tile([1.0, 2.0], 150), 4.0, [150.0, 220.0])
    kw = dict(draws=15, tune=15, chains=2, random_seed=5, progressbar=False,
              compute_convergence_checks=False)  # fmt: skip
    with model:
        seq = pm.sample(cores=1, **kw)
        par = pm.sample(cores=2, **kw)
    np.testing.assert_array_equal(seq.posterior["p"].values, par.posterior["p"].values)
    assert np.unique(seq.posterior["p"].values).size > 10  # the chains move


def test_two_column_and_categorical_records_chunked_like_whole(monkeypatch, chunked):
    """Records of shape (n, 2) (rows sliced with their columns) and categorical records counted
    per category."""
    n = 260
    with pm.Model() as two_col:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        x = pm.Normal("x", mu, 1.0, shape=(n, 2))
        pmdp.Release("z", pt.clip(x, -1.0, 1.0).sum(0), pmdp.Laplace(epsilon=1.0, sensitivity=4.0),
                     observed=[30.0, -12.0])  # fmt: skip
    with pm.Model() as cat:
        w = pm.Dirichlet("w", np.ones(3))
        c = pm.Categorical("c", p=w, shape=n)
        counts = pt.stack([pt.eq(c, k).sum() for k in range(3)])
        pmdp.Release("z", counts, pmdp.Laplace(epsilon=1.0, sensitivity=2.0),
                     observed=[100.0, 90.0, 70.0])  # fmt: skip
    chains = {}
    for whole in (False, True):
        if whole:
            _whole(monkeypatch)
        for model, name in ((two_col, "x"), (cat, "c")):
            chain, step = _run(model, [name], sweeps=4)
            assert (step._blocks[0][0].chunk_fn is None) == whole
            chains[(name, whole)] = chain
    for name in ("x", "c"):
        assert (chains[(name, True)][1:] != chains[(name, True)][:-1]).any()
        np.testing.assert_array_equal(chains[(name, False)], chains[(name, True)])
