"""Convergence checks of stored records read the released statistic (issue 14)."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from pymc.stats.convergence import WarningType

import pymc_dp as pmdp
from pymc_dp import diagnostics

N = 300


def _model(n=N):
    cov = np.linspace(-1.0, 1.0, n)
    with pm.Model() as model:
        p = pm.Normal("p", 0.0, 1.0)
        x = pm.Bernoulli("x", logit_p=p + cov, shape=n)
        stat = pt.stack([x.sum(), (cov * x).sum()])
        pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=[140.0, 30.0])
    return model, cov


def _idata(p, x):
    post = xr.Dataset(
        {"p": (("chain", "draw"), p), "x": (("chain", "draw", "x_dim_0"), x.astype(np.int8))}
    )
    return xr.DataTree.from_dict({"posterior": post})


def test_statistic_trace_is_the_statistic_of_each_stored_draw():
    model, cov = _model()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            30, tune=30, chains=2, var_names=["p", "x"], progressbar=False, random_seed=3,
            compute_convergence_checks=False,
        )  # fmt: skip
    x = idata.posterior["x"].values.astype(np.int64)
    got = pmdp.statistic_trace(idata, model=model)["z"].values
    assert got.shape == (2, 30, 2)
    np.testing.assert_array_equal(got[..., 0], x.sum(-1))
    np.testing.assert_allclose(got[..., 1], x @ cov, rtol=0, atol=1e-12)
    # not computable without the records: a ValueError naming them
    with pytest.raises(ValueError, match=r"\['x'\]"):
        pmdp.statistic_trace(_idata_without_x(idata), model=model)


def _idata_without_x(idata):
    post = idata.posterior.to_dataset().drop_vars("x")
    return xr.DataTree.from_dict({"posterior": post})


def test_pymc_checks_skip_stored_records_and_read_the_statistic(monkeypatch):
    """PyMC's per-variable checks get a posterior without the records; the records are checked
    through the statistic. Records drawn iid (a chain that mixes perfectly): no statistic warning
    (false alarm: 0 of 2000 simulated iid replications of this size had split R-hat above 1.006,
    the bound is 1.01; ESS near 2000). Negative control: chains whose records sit at different
    values (all 0 / all 1) warn on R-hat."""
    model, _ = _model()
    seen = []

    def spy(idata, model):
        seen.append(sorted(idata["posterior"].data_vars))
        return []

    monkeypatch.setattr(diagnostics, "_PYMC_RUN_CHECKS", spy)
    rng = np.random.default_rng()
    p = rng.normal(size=(2, 1000))
    x = rng.random((2, 1000, N)) < 0.4
    warns = pm.sampling.mcmc.run_convergence_checks(_idata(p, x), model)
    assert seen == [["p"]]
    assert warns == []

    stuck = np.zeros((2, 1000, N), dtype=bool)
    stuck[1] = True
    warns = pm.sampling.mcmc.run_convergence_checks(_idata(p, stuck), model)
    kinds = [w.kind for w in warns]
    assert WarningType.CONVERGENCE in kinds
    assert any("released statistic" in w.message and "z" in w.message for w in warns)


def test_unstored_records_and_plain_models_go_to_pymc_unchanged(monkeypatch):
    model, _ = _model()
    seen = []
    monkeypatch.setattr(diagnostics, "_PYMC_RUN_CHECKS", lambda i, m: seen.append(i) or [])
    idata = _idata(np.zeros((2, 200)), np.zeros((2, 200, N), dtype=bool))
    no_x = _idata_without_x(idata)
    pm.sampling.mcmc.run_convergence_checks(no_x, model)
    assert seen[-1] is no_x
    with pm.Model() as plain:
        pm.Normal("p", 0.0, 1.0)
        pm.Bernoulli("x", 0.5, shape=N)
    pm.sampling.mcmc.run_convergence_checks(idata, plain)
    assert seen[-1] is idata


def test_sample_with_stored_records_checks_the_statistic(monkeypatch):
    """End to end: pm.sample stores the records (int8) and its convergence checks run through
    the hook (the statistic trace is computed from them)."""
    model, _ = _model()
    calls = []
    orig = diagnostics._statistic_warnings

    def counting(idata, model):
        calls.append(sorted(idata["posterior"].data_vars))
        return orig(idata, model)

    monkeypatch.setattr(diagnostics, "_statistic_warnings", counting)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            100, tune=100, chains=2, var_names=["p", "x"], progressbar=False, random_seed=5
        )
    assert idata.posterior["x"].dtype == np.int8
    assert calls == [["p", "x"]]
