"""Row-local terms that issue 7's structural check refused: per-record Categorical
probabilities (``theta[y]``, the naive Bayes model) and ``X @ beta`` (the regression model).

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


def test_matmul_with_records_as_rows_is_row_local():
    X, Y = pt.matrix("X"), pt.matrix("Y")
    beta = pt.vector("beta")
    good = X @ beta + 1.0
    bad = (X @ Y.T).sum(-1)  # control: row i reads every record of Y
    st = row_states([good, bad], {X: ROW, Y: ROW}, 5)
    assert st[good] == ROW
    assert isinstance(st[bad], Coupled)


def test_regression_records_get_data_augmentation():
    """Ju et al.'s regression: ``y ~ N(beta0 + X @ beta[1:], 1)`` with private (X, y)."""
    n = 8
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 2.0, shape=3)
        X = pm.Normal("X", 0.0, 1.0, shape=(n, 2))
        y = pm.Normal("y", beta[0] + X @ beta[1:], 1.0, shape=n)
        stat = pt.concatenate([(X * y[:, None]).sum(0), (y * y).sum()[None]])
        Release("z", pt.clip(stat, -50.0, 50.0), Laplace(scale=1.0), observed=np.zeros(3))
        step = DataAugmentation([X, y])
        new, _ = step.step(model.initial_point())
    assert new["X"].shape == (n, 2)
