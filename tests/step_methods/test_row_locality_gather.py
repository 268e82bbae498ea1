"""Per-record Categorical probabilities (``theta[y]``) are row-local: the naive Bayes model.

PyMC's Categorical log-density gathers ``p[arange(n).reshape(-1, 1), x[:, None]]``; the
reshaped ``arange`` is still the identity index of the record axis. Issue 7's structural check
refused it, so the naive Bayes model of Ju et al. (2022) could not be sampled at all.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_dp import DataAugmentation, Laplace, Release
from pymc_dp.step_methods.row_locality import ROW, Coupled, row_states

N, I, J = 6, 3, 2  # noqa: E741 - the slides' notation


def _model(reverse=False):
    with pm.Model() as model:
        pi = pm.Dirichlet("pi", a=np.full(I, 2.0))
        y = pm.Categorical("y", p=pi, shape=N)
        theta = pm.Dirichlet("theta", a=np.full((I, J), 2.0))
        idx = y[::-1] if reverse else y
        x = pm.Categorical("x", p=theta[idx], shape=N)
        one_y = pt.eq(y[:, None], np.arange(I)[None, :]).astype("float64")
        one_x = pt.eq(x[:, None], np.arange(J)[None, :]).astype("float64")
        table = (one_y[:, :, None] * one_x[:, None, :]).sum(0).ravel()
        Release("z", table, Laplace(epsilon=1.0, sensitivity=2), observed=np.ones(I * J))
    return model, y, x


def test_categorical_with_per_record_probabilities_is_row_local():
    model, y, x = _model()
    lp = model.logp(vars=[x], sum=False)[0]
    start = {model.rvs_to_values[y]: ROW, model.rvs_to_values[x]: ROW}
    assert row_states([lp], start, N)[lp] == ROW


def test_naive_bayes_records_get_data_augmentation():
    model, y, x = _model()
    with model:
        step = DataAugmentation([y, x])
        point = model.initial_point()
        new, _ = step.step(point)
    assert new["x"].shape == (N,)


def test_reordered_index_still_refused():
    """Control: ``theta[y[::-1]]`` couples record i with record n - 1 - i."""
    model, y, x = _model(reverse=True)
    lp = model.logp(vars=[x], sum=False)[0]
    start = {model.rvs_to_values[y]: ROW, model.rvs_to_values[x]: ROW}
    assert isinstance(row_states([lp], start, N)[lp], Coupled)
    with model, pytest.raises(ValueError, match="not conditionally independent"):
        DataAugmentation([y, x])
