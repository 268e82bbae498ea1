"""A Release statistic that selects records by a boolean mask or an integer index.

Regression test for the newcomer trial (benchmarks/results/newcomer_quickstart.md, friction 1):
``pt.stack([y[group == g].sum() for g in range(3)])`` made the additive decomposition's
one-record graph fail (numpy broadcast / index error) while the sampler was being set up. The
candidate decomposition is now refused and the block takes the exact generic path.

Statistical assertions use :func:`pymc_dp.testing.mcse_check` with its default false-alarm rate
1e-6 per assertion (|mean - exact| <= 4.89 MCSE); the negative control (the exact posterior of
the release read with twice the noise scale) must be rejected by the same check.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods import STEP_METHODS
from scipy.special import betaln, comb

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.testing import mcse_check

GROUP = np.array([0, 1, 2, 0, 1, 2, 1, 2, 2, 0, 1, 2])
N, K = GROUP.size, 3
Z = np.array([3.0, 0.5, 4.5])
EPS = 1.0  # Laplace scale 1: each record is in one group, L1 sensitivity 1


def _statistic(y, form):
    if form == "mask":
        return pt.stack([y[GROUP == g].sum() for g in range(K)])
    if form == "index":
        return pt.stack([y[np.flatnonzero(GROUP == g)].sum() for g in range(K)])
    return pt.dot(y, np.eye(K)[GROUP])  # the one-hot form


def _model(form):
    with pm.Model() as model:
        p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
        y = pm.Bernoulli("y", p=p, shape=N)
        Release("z", _statistic(y, form), Laplace(epsilon=EPS, sensitivity=1.0), observed=Z)
    return model


def _exact_group_means(scale):
    """E[S_g | z] by enumeration of the group counts S (p ~ Beta(1, 1) integrated out)."""
    ng = np.bincount(GROUP)
    s = np.array(list(itertools.product(*[range(k + 1) for k in ng])), dtype=np.float64)
    tot = s.sum(1)
    logw = np.log(comb(ng, s)).sum(1) + betaln(1 + tot, 1 + N - tot)
    logw -= np.abs(Z - s).sum(1) / scale
    w = np.exp(logw - logw.max())
    w /= w.sum()
    return (w[:, None] * s).sum(0)


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Register DataAugmentation the way pymc_dp.step_methods.register_step_methods does."""
    added = DataAugmentation not in STEP_METHODS
    if added:
        STEP_METHODS.insert(0, DataAugmentation)
    yield
    if added:
        STEP_METHODS.remove(DataAugmentation)


@pytest.mark.parametrize("form", ["mask", "index"])
def test_selected_records_build_the_step(form):
    """The step builds (it used to raise a broadcast / index error) and the model's log
    density equals the one-hot statistic's at random points."""
    model, onehot = _model(form), _model("onehot")
    with model:
        step = DataAugmentation([model["y"]], rng=1)
    assert len(step._blocks) == 1
    rng = np.random.default_rng(3)
    f, f_ref = model.compile_logp(), onehot.compile_logp()
    for _ in range(5):
        pt_ = {"p_logodds__": rng.normal(), "y": rng.integers(0, 2, size=N)}
        np.testing.assert_allclose(f(pt_), f_ref(pt_), rtol=1e-13)


@pytest.mark.parametrize("form", ["mask", "index"])
def test_selected_records_exact_posterior(form):
    """E[S_g | z] for each group matches enumeration; the one-hot form is the same model."""
    model = _model(form)
    with model:
        idata = pm.sample(
            2000,
            tune=500,
            chains=2,
            cores=1,
            random_seed=20261126,
            progressbar=False,
            var_names=[v.name for v in model.free_RVs],  # records too
            compute_convergence_checks=False,
        )
    y = idata.posterior["y"].values
    counts = np.stack([y[..., GROUP == g].sum(-1) for g in range(K)], axis=-1)
    exact = _exact_group_means(1.0 / EPS)
    for g in range(K):
        res = mcse_check(counts[..., g], float(exact[g]))
        print(f"{form} group {g}: mean={res.mean:.4f} exact={exact[g]:.4f} z={res.z:.2f}")
        assert res.passed, g
    # negative control: the posterior of the release read with twice the noise scale
    wrong = _exact_group_means(2.0 / EPS)
    assert not mcse_check(counts[..., 2], float(wrong[2])).passed
