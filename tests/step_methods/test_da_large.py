"""Large blocks keep no per-record cache between sweeps (issue 14, memory): same chain."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

import pymc_dp as pmdp
from pymc_dp.step_methods import da_additive, da_chunks, data_augmentation
from pymc_dp.step_methods.data_augmentation import DataAugmentation


def _chain(monkeypatch, large_from, n=400, sweeps=6, seed=11, chunk=1 << 30):
    monkeypatch.setattr(da_chunks, "LARGE_BLOCK", large_from)
    monkeypatch.setattr(da_chunks, "CHUNK", chunk)
    cov = np.linspace(-1.0, 1.0, n)
    with pm.Model() as model:
        x = pm.Bernoulli("x", logit_p=0.3 - 0.8 * cov, shape=n)
        stat = pt.stack([x.sum(), (cov * x).sum()])
        pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=[150.0, 9.0])
        step = DataAugmentation([x], rng=seed)
    point = model.initial_point()
    out = []
    for _ in range(sweeps):
        point, _ = step.step(point)
        out.append(point["x"].copy())
    _spec, scratch = step._blocks[0]
    return np.array(out), scratch, step


def test_large_block_recomputes_instead_of_caching(monkeypatch):
    """With the large-block threshold below n, the sweep recomputes t of the current records
    instead of caching it; t is a deterministic function of the records, so the chain is the
    same draw for draw. Negative control: a different seed gives a different chain."""
    small, scratch_small, _ = _chain(monkeypatch, 1 << 30)
    large, scratch_large, step = _chain(monkeypatch, 100, chunk=64)
    assert step._blocks[0][0].chunk_fn is not None
    assert (large.std(axis=0) > 0).any()  # the chain moves
    assert scratch_small.t_cur is not None and scratch_large.t_cur is None
    assert scratch_large.last is None
    np.testing.assert_array_equal(small, large)
    # the large block's functions free their intermediates (C VM with garbage collection)
    if pytensor.config.cxx:
        assert step._blocks[0][0].fn.maker.mode.linker.allow_gc is True
    other, _, _ = _chain(monkeypatch, 100, seed=12, chunk=64)
    assert not np.array_equal(other, large)


def test_default_mode_switches_to_gc_for_large_blocks():
    if not pytensor.config.cxx:
        assert data_augmentation._default_mode(10**7) is None
        return
    assert data_augmentation._default_mode(10).linker.allow_gc is False
    assert data_augmentation._default_mode(10**7).linker.allow_gc is True


def test_large_block_checks_compute_what_the_small_ones_do(monkeypatch):
    """The construction checks of a large block (fused C VM) evaluate the same statistic sums
    and per-record terms as the Python-linker ones, at the current and at changed records;
    negative control: changed records give different values (the comparison can fail)."""
    from pymc_dp.step_methods.da_blocks import BuildOptions, block_graph

    cov = np.linspace(-1.0, 1.0, 300)
    with pm.Model() as model:
        x = pm.Bernoulli("x", logit_p=0.3 - 0.8 * cov, shape=300)
        stat = pt.stack([x.sum(), (cov * x).sum()])
        pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=[150.0, 9.0])
    ip = model.initial_point()
    opts = BuildOptions(model=model, ip=ip, input_names=[v.name for v in model.value_vars],
                        ck={"mode": data_augmentation._default_mode()}, direct=True)  # fmt: skip
    g = block_graph(opts, [model["x"]])
    t_flat = da_additive.per_record(g, True)
    outs = {}
    for large_from in (1 << 30, 10):
        monkeypatch.setattr(da_chunks, "LARGE_BLOCK", large_from)
        chk = da_additive._Checker(g, t_flat)
        recs = [np.asarray(ip["x"])]
        flipped = [1 - recs[0]]
        outs[large_from] = [*chk.at(recs)[:2], chk.rows_at(recs), *chk.at(flipped)[:2]]
    for a, b in zip(outs[1 << 30], outs[10], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    assert not np.allclose(outs[10][1], outs[10][4])
