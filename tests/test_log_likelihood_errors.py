"""Issue 24 (part C): wrong inputs to the log-likelihood entry points are clear errors.

``compute_log_likelihood(idata.sample_stats)`` (a group passed for the whole result) and
``stack_log_likelihood`` on a result without a ``log_likelihood`` group raised bare
``KeyError``s; they now raise ``ValueError``/``TypeError`` naming ``idata`` (or ``var_names``)
and what to do. No statistical assertion here; the control is the same call on valid input.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_dp as pmdp
from pymc_dp.log_likelihood import compute_log_likelihood, stack_log_likelihood


@pytest.fixture(scope="module")
def model_and_idata():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.1, -0.3]))
    post = xr.Dataset({"mu": (("chain", "draw"), [[0.0, 0.5, -0.2]])})
    stats = xr.Dataset({"lp": (("chain", "draw"), [[-1.0, -1.2, -1.1]])})
    idata = xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})
    return m, idata


def test_compute_log_likelihood_on_a_group_is_a_clear_error(model_and_idata):
    m, idata = model_and_idata
    with pytest.raises(ValueError, match=r"idata has no 'posterior' group.*whole result"):
        compute_log_likelihood(idata.sample_stats, model=m)
    with pytest.raises(TypeError, match=r"idata must be an xarray\.DataTree"):
        compute_log_likelihood({"posterior": None}, model=m)
    # control: the whole result works
    ll = compute_log_likelihood(idata, model=m, extend_inferencedata=False)
    assert ll["y"].shape == (1, 3, 2)


def test_stack_without_log_likelihood_is_a_clear_error(model_and_idata):
    m, idata = model_and_idata
    with pytest.raises(ValueError, match=r"no 'log_likelihood' group.*compute_log_likelihood"):
        stack_log_likelihood(idata, ["y"])
    full = compute_log_likelihood(idata.copy(), model=m)
    with pytest.raises(ValueError, match=r"var_names must name variables.*\['z'\]"):
        stack_log_likelihood(full, ["z"])
    with pytest.raises(TypeError, match="var_names must be a sequence"):
        stack_log_likelihood(full, "y")
    # control: valid names stack
    out = stack_log_likelihood(full, ["y"])
    assert out["log_likelihood"]["releases"].shape == (1, 3, 2)


def test_pmdp_exports_the_same_functions():
    assert pmdp.compute_log_likelihood is compute_log_likelihood
    assert pmdp.stack_log_likelihood is stack_log_likelihood
