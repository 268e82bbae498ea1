"""Censored (projected) Privatized observations under the JAX backend: the compiled log-density
and its gradient equal the default (numba) backend's, for every mechanism; the control (the same
data without the bounds) differs, so the comparison sees the censoring."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp

pytest.importorskip("jax")

MECHANISMS = {
    "gaussian": pmdp.Gaussian(sigma=2.0),
    "discrete_gaussian": pmdp.DiscreteGaussian(sigma=2.0),
    "geometric": pmdp.Geometric(epsilon=1.0),
    "laplace": pmdp.Laplace(epsilon=0.5),  # scale 2: censoring moves logp by log 2 per cell
}


def _model(mech, censored: bool) -> pm.Model:
    obs = np.array([0, 3, 5, 5]) if mech.integer else np.array([0.0, 3.2, 5.0, 5.0])
    bounds = {"lower": 0, "upper": 5} if censored else {}
    with pm.Model() as model:
        p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
        pmdp.Privatized("y", pm.Binomial.dist(5, p), mech, observed=obs, **bounds)
    return model


def _values(model, mode=None) -> np.ndarray:
    logp, dlogp = model.compile_logp(mode=mode), model.compile_dlogp(mode=mode)
    points = [{"p_logodds__": np.array(v)} for v in np.linspace(-3.0, 3.0, 7)]
    return np.array([[float(logp(q)), float(dlogp(q)[0])] for q in points])


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_censored_privatized_jax_equals_numba(name):
    mech = MECHANISMS[name]
    model = _model(mech, censored=True)
    ref = _values(model)
    np.testing.assert_allclose(_values(model, mode="JAX"), ref, rtol=1e-12, atol=1e-12)
    # control: without the bounds the values differ (the bound cells are censored above)
    assert np.max(np.abs(_values(_model(mech, censored=False)) - ref)) > 1e-3
