"""Latent records are not stored, nor checked for convergence, unless asked for (issue 14)."""

from __future__ import annotations

import logging
import warnings

import cloudpickle
import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp.step_methods.nuisance import ReleaseModel, nuisance_records

f64 = np.float64


def _readme_model(n=300, z=95.0):
    with pm.Model() as m:
        p = pm.Beta("p", f64(1.0), f64(1.0))
        x = pm.Bernoulli("x", p, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(z))
    return m


def _logistic_records_model(n=300):
    """Records with covariates (not collapsible: DataAugmentation)."""
    cov = np.linspace(-2, 2, n)
    with pm.Model() as m:
        b = pm.Normal("b", f64(0.0), f64(1.0))
        x = pm.Bernoulli("x", pm.math.invlogit(b * cov), shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(n / 2))
    return m


def _run(model, caplog, **kw):
    kw = {"progressbar": False, "chains": 2, "cores": 1, **kw}
    caplog.clear()
    with model, warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="pymc"):
        warnings.simplefilter("ignore")
        idata = pm.sample(**kw)
    return idata, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_model_declares_records_as_nuisance():
    m = _readme_model(20)
    assert isinstance(m, ReleaseModel) and isinstance(m, pm.Model)
    assert nuisance_records(m) == {"x"}
    assert [v.name for v in m.unobserved_value_vars] == ["p_logodds__", "p"]
    with pm.Model() as plain:
        pm.Normal("a")
    assert type(plain) is pm.Model  # models without a Release are untouched
    clone = cloudpickle.loads(cloudpickle.dumps(m))
    assert isinstance(clone, ReleaseModel)


def test_plain_sample_has_no_record_warning_and_a_stuck_parameter_still_warns(caplog):
    """Records are not in the posterior, so PyMC checks only the parameters. ``p`` gets exact
    independent draws here (the collapsed step integrates it out), so its R-hat over 4 x 1000
    draws exceeds 1.01 with negligible probability (its sd is about 1e-3 for independent
    draws: 1.01 is about ten sd away). Negative control: a parameter that a tiny-step Metropolis
    leaves near two far-apart starting values must still raise PyMC's R-hat warning."""
    m = _readme_model()
    idata, msgs = _run(m, caplog, chains=4, draws=1000, tune=200)
    assert list(idata.posterior.data_vars) == ["p"]
    assert not [s for s in msgs if "rhat" in s.lower() or "effective" in s.lower()], msgs
    with m:
        q = pm.Normal("q", f64(0.0), f64(1.0))
        stuck = pm.Metropolis([q], S=np.array([1e-5]), tune=False)
    idata, msgs = _run(
        m, caplog, chains=2, draws=200, tune=0, step=[stuck], initvals=[{"q": -3.0}, {"q": 3.0}]
    )
    assert "q" in idata.posterior and "x" not in idata.posterior
    assert any("rhat" in s.lower() for s in msgs), msgs


def test_records_with_covariates_are_not_stored_unless_named(caplog):
    m = _logistic_records_model()
    idata, _ = _run(m, caplog, draws=100, tune=50, compute_convergence_checks=False)
    assert list(idata.posterior.data_vars) == ["b"]
    idata, _ = _run(
        m, caplog, draws=50, tune=20, var_names=["b", "x"], compute_convergence_checks=False
    )
    assert idata.posterior["x"].shape == (2, 50, 300)
    assert idata.posterior["x"].dtype == np.int8  # the smallest dtype of Bernoulli records
    assert set(np.unique(idata.posterior["x"].values)) <= {0, 1}


def test_storage_dtypes():
    from pymc_dp.step_methods.nuisance import storage_dtype

    assert storage_dtype(pm.Bernoulli.dist(0.5, shape=3)) == "int8"
    assert storage_dtype(pm.Categorical.dist(np.ones(200) / 200, shape=3)) == "int16"
    assert storage_dtype(pm.Poisson.dist(2.0, shape=3)) == "int64"  # unbounded support
    assert storage_dtype(pm.Normal.dist(shape=3)) == "float64"


def test_posterior_predictive_draws_fresh_records():
    m = _readme_model(50, 15.0)
    with m, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(50, tune=20, chains=1, progressbar=False)
        pp = pm.sample_posterior_predictive(idata, progressbar=False)
    assert pp.posterior_predictive["z"].shape == (1, 50)
