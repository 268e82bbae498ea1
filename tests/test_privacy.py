"""The privacy report of a model: which releases it conditions on, and their composition."""

import json
import math

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        lam = pm.Gamma("lam", 2.0, 0.5)
        pmdp.Privatized(
            "y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5), observed=np.array([1, 2, -1])
        )
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p, shape=5)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=0.25), observed=2.3)
        pmdp.Release("s", x.sum(), pmdp.Gaussian(rho=0.125), observed=1.7)
    return m


def test_report_lists_every_release_with_its_mechanism(model):
    report = pmdp.privacy_report(model)
    assert [(e.name, e.kind, e.size) for e in report.entries] == [
        ("y", "privatized", 3),
        ("z", "release", 1),
        ("s", "release", 1),
    ]
    assert [e.mechanism.family for e in report.entries] == ["geometric", "laplace", "gaussian"]


def test_total_is_sequential_composition(model):
    report = pmdp.privacy_report(model)
    # a Gaussian given by rho has no finite epsilon of its own: the total epsilon is infinite;
    # pure epsilon-DP is (epsilon^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), so rho adds up
    assert math.isinf(report.total.epsilon)
    assert report.total.delta == 0.0
    assert report.total.rho == pytest.approx(0.5**2 / 2 + 0.25**2 / 2 + 0.125, rel=1e-15)
    pure = pmdp.compose(e.mechanism for e in report.entries if e.mechanism.family != "gaussian")
    assert pure.epsilon == pytest.approx(0.75, abs=1e-12)


def test_model_without_releases_costs_nothing():
    with pm.Model() as m:
        pm.Normal("mu", 0.0, 1.0)
    report = pmdp.privacy_report(m)
    assert report.entries == ()
    assert report.total.epsilon == 0.0 and report.total.delta == 0.0


def test_attach_privacy_writes_json_and_group(model):
    import xarray as xr

    idata = xr.DataTree()
    pmdp.attach_privacy(idata, model)
    d = json.loads(idata.attrs["pymc_dp_privacy"])
    assert d["total"]["epsilon"] == "inf"
    assert [r["name"] for r in d["releases"]] == ["y", "z", "s"]
    assert d["releases"][1]["epsilon"] == pytest.approx(0.25, abs=1e-12)
    group = idata["privacy"].to_dataset()
    np.testing.assert_allclose(group["epsilon"].values[:2], [0.5, 0.25], rtol=0, atol=1e-12)
    assert list(group["release"].values) == ["y", "z", "s"]


def test_str_names_every_release(model):
    text = str(pmdp.privacy_report(model))
    for name in ("Geometric", "Laplace", "Gaussian", "total"):
        assert name in text


# ---- the cost of k contributions (privacy maps) -------------------------------------------------
def test_contributions_cost_is_computed_per_kind(model):
    """k records of one individual: Release pays map(k Δ) (k eps, k^2 rho), Privatized k releases
    (k eps, k rho). Exact values; the negative control (k^2 for the Gaussian read as k) fails."""
    one = {e.name: e.guarantee for e in pmdp.privacy_report(model).entries}
    rep = pmdp.privacy_report(model, contributions=3)
    got = {e.name: e.guarantee for e in rep.entries}
    assert [e.contributions for e in rep.entries] == [3, 3, 3]
    assert got["y"].epsilon == 1.5 and got["y"].rho == 3 * one["y"].rho  # 3 Geometric releases
    assert got["z"].epsilon == 0.75 and got["z"].rho == 0.75**2 / 2  # Laplace map(3): 3 eps
    assert got["s"].rho == 9 * 0.125 and math.isinf(got["s"].epsilon)  # Gaussian map(3): 9 rho
    assert got["s"].rho != 3 * one["s"].rho  # negative control: linear scaling is wrong here
    assert rep.total.rho == pytest.approx(3 * 0.125 + 0.75**2 / 2 + 9 * 0.125, rel=1e-15)
    e = rep.entries[2]
    assert e.d_in == 3.0 and rep.entries[0].d_in == 1.0


def test_contributions_per_node_and_default(model):
    rep = pmdp.privacy_report(model, contributions={"z": 4})
    assert [e.contributions for e in rep.entries] == [1, 4, 1]
    assert rep.entries[1].guarantee.epsilon == 1.0
    assert rep.entries[0].guarantee == pmdp.privacy_report(model).entries[0].guarantee
    # contributions=1 is the default and reproduces the single-release report exactly
    assert pmdp.privacy_report(model, contributions=1) == pmdp.privacy_report(model)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (0, "contributions"),
        (-2, "contributions"),
        (1.5, "contributions"),
        (True, "contributions"),
        ({"nope": 2}, "nope"),
        ({"z": 0}, "contributions"),
    ],
)
def test_contributions_validated(model, bad, match):
    with pytest.raises(ValueError, match=match):
        pmdp.privacy_report(model, contributions=bad)


def test_contributions_recorded_on_results_and_in_text(model):
    import xarray as xr

    idata = pmdp.attach_privacy(xr.DataTree(), model, contributions=2)
    d = json.loads(idata.attrs["pymc_dp_privacy"])
    assert [r["contributions"] for r in d["releases"]] == [2, 2, 2]
    assert [r["d_in"] for r in d["releases"]] == [1.0, 2.0, 2.0]
    assert d["releases"][1]["epsilon"] == 0.5
    assert list(idata["privacy"].to_dataset()["contributions"].values) == [2, 2, 2]
    text = str(pmdp.privacy_report(model, contributions=2))
    assert "at most 2 value(s)" in text and "k times the sensitivity" in text
