"""The privacy report never under-counts, and states its totals in every form that applies.

Issue 7, items 5 and 18: releases nested in another distribution (``pm.Mixture`` components,
``pm.CustomDist`` graphs) were reported at epsilon 0; unobserved nodes were counted; a mix of
pure-DP and zCDP releases had no rho total; the ``privacy`` group had no rho column; delta was
sometimes a numpy float.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp


def test_privatized_in_mixture_is_counted():
    mech = pmdp.Laplace(epsilon=0.5)
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal("mu", shape=2)
        comps = [pmdp.Privatized.dist(pm.Normal.dist(mu[i]), mech) for i in range(2)]
        pm.Mixture("mix", w, comps, observed=np.array([0.1, 2.0, -1.0]))
    report = pmdp.privacy_report(model)
    # two nested nodes, each value released by one of them: counted once (issue 24), the
    # maximum of the components (tests/test_privacy_report_issue24.py has unequal components)
    assert report.total.epsilon == 0.5
    assert [g.reason for g in report.groups] == ["mixture"]
    assert all(e.name.startswith("mix") for e in report.entries)
    assert len(report.entries) == 2


def test_release_in_customdist_is_counted():
    mech = pmdp.Geometric(epsilon=0.25)

    def dist(stat, size):
        return pmdp.Release.dist(stat, mech)

    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pm.CustomDist("c", x.sum(), dist=dist, observed=2, dtype="int64")
    report = pmdp.privacy_report(model)
    assert report.total.epsilon == pytest.approx(0.25, abs=1e-15)
    assert [e.kind for e in report.entries] == ["release"]


def test_unobserved_nodes_are_not_releases():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pmdp.Release("free", x.sum(), pmdp.Laplace(epsilon=3.0))
        pmdp.Privatized("freep", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=2.0), shape=3)
        pmdp.Release("obs", x.sum(), pmdp.Laplace(epsilon=0.5), observed=1.5)
    report = pmdp.privacy_report(model)
    assert [e.name for e in report.entries] == ["obs"]
    assert report.total.epsilon == 0.5


def test_mixed_pure_and_zcdp_total_has_rho_and_plain_floats():
    import xarray as xr

    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pmdp.Release("a", x.sum(), pmdp.Laplace(epsilon=0.5), observed=1.5)
        pmdp.Release("b", x.sum(), pmdp.Gaussian(rho=0.125), observed=1.5)
        pmdp.Release("c", x.sum(), pmdp.Gaussian(epsilon=1.0, delta=1e-6), observed=1.5)
    report = pmdp.privacy_report(model)
    t = report.total
    c_rho = pmdp.Gaussian(epsilon=1.0, delta=1e-6).guarantee().rho
    assert t.rho == pytest.approx(0.5**2 / 2 + 0.125 + c_rho, rel=1e-12)
    assert math.isinf(t.epsilon)  # the rho-parameterized Gaussian has no finite epsilon
    for v in (t.epsilon, t.delta, t.rho):
        assert type(v) is float
    for e in report.entries:
        g = e.guarantee
        assert type(g.epsilon) is float and type(g.delta) is float and type(g.rho) is float
    assert "rho=" in str(report)
    idata = xr.DataTree()
    pmdp.attach_privacy(idata, model)
    group = idata["privacy"].to_dataset()
    np.testing.assert_allclose(group["rho"].values, [0.125, 0.125, c_rho], rtol=1e-12)
    assert group.attrs["total_rho"] == pytest.approx(t.rho, rel=1e-15)
    d = json.loads(idata.attrs["pymc_dp_privacy"])
    assert d["total"]["rho"] == pytest.approx(t.rho, rel=1e-15)


def test_all_pure_total_epsilon_and_rho():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pmdp.Release("a", x.sum(), pmdp.Laplace(epsilon=0.5), observed=1.5)
        pmdp.Release("b", x.sum(), pmdp.Geometric(epsilon=0.25), observed=1)
    t = pmdp.privacy_report(model).total
    assert t.epsilon == 0.75 and t.delta == 0.0
    assert t.rho == pytest.approx(0.5**2 / 2 + 0.25**2 / 2, rel=1e-15)
    assert type(t.delta) is float


def test_all_approx_dp_total_epsilon_delta():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pmdp.Release("a", x.sum(), pmdp.Laplace(epsilon=0.5), observed=1.5)
        pmdp.Release("c", x.sum(), pmdp.Gaussian(epsilon=1.0, delta=1e-6), observed=1.5)
    t = pmdp.privacy_report(model).total
    assert t.epsilon == pytest.approx(1.5, rel=1e-15)
    assert t.delta == pytest.approx(1e-6, rel=1e-6) and type(t.delta) is float
