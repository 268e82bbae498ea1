"""PyMC's own log-likelihood entry points give Releases their exact values (issue 14).

``pm.compute_log_likelihood`` and ``pm.sample(idata_kwargs={"log_likelihood": True})`` pass
through ``pymc.stats.log_density.compute_log_density``, which ``import pymc_dp`` wraps: Releases
get ``pmdp.compute_log_likelihood``'s values (records integrated out); a Release without a closed
form is left out with a warning, and the finished run is returned.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp

f64 = np.float64


def _groups_model():
    with pm.Model() as m:
        p = pm.Beta("p", f64(2.0), f64(2.0))
        for g in range(3):
            x = pm.Bernoulli(f"x{g}", p, shape=60)
            pmdp.Release(f"z{g}", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(20 + 5 * g))
    return m


def _sample(model, **kw):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # PyMC: idata_kwargs log_likelihood
        return pm.sample(60, tune=30, chains=2, progressbar=False, **kw)


def test_pm_sample_log_likelihood_is_the_exact_marginal():
    m = _groups_model()
    idata = _sample(m, idata_kwargs={"log_likelihood": True})
    assert "x0" not in idata.posterior  # records not stored: PyMC's path would need them
    ref = pmdp.compute_log_likelihood(idata.copy(), model=m, extend_inferencedata=False)
    for g in range(3):
        np.testing.assert_allclose(idata.log_likelihood[f"z{g}"], ref[f"z{g}"], rtol=1e-12)
    # negative control: the conditional density of the release given imputed records differs
    idata_x = _sample(m, var_names=["p", "x0", "x1", "x2"])
    from pymc_dp.log_likelihood import _PYMC_COMPUTE_LOG_DENSITY as pymc_original

    cond = pymc_original(idata_x, model=m, extend_inferencedata=False, progressbar=False)
    exact = pmdp.compute_log_likelihood(idata_x, model=m, extend_inferencedata=False)
    assert float(np.abs(cond["z0"] - exact["z0"]).max()) > 0.1


def test_release_without_closed_form_is_left_out_and_the_run_kept():
    cov = np.linspace(-1, 1, 40)
    with pm.Model() as m:
        b = pm.Normal("b", f64(0.0), f64(1.0))
        x = pm.Bernoulli("x", pm.math.invlogit(b * cov), shape=40)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=f64(20))
    with pytest.warns(UserWarning, match="log_likelihood of 'z' left out"):
        idata = _sample(m, idata_kwargs={"log_likelihood": True})
    assert "b" in idata.posterior


def test_models_without_a_release_are_pymcs():
    with pm.Model() as m:
        mu = pm.Normal("mu", f64(0.0), f64(1.0))
        pm.Normal("y", mu, f64(1.0), observed=np.array([0.1, -0.3]))
    idata = _sample(m)
    ll = pm.compute_log_likelihood(idata, model=m, extend_inferencedata=False, progressbar=False)
    mu_d = idata.posterior["mu"].values[..., None]
    ref = -0.5 * (np.array([0.1, -0.3]) - mu_d) ** 2 - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(ll["y"].values, ref, rtol=1e-12)
