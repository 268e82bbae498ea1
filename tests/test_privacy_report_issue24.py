"""Issue 24 (part C): an honest privacy report, attached by ``pm.sample``.

* a mechanism given by its noise scale only makes no privacy claim (no epsilon, no rho), in
  ``guarantee()``, in the report and on the sampling result;
* a model with ``OnePosteriorSample.tempered_likelihood`` is counted (it reported 0 before);
* parallel composition where releases read disjoint records (proven from constant row indices,
  or declared), so per-group releases cost their maximum; overlapping groups add up where they
  overlap (the control);
* a mixture's release is counted once (the maximum of its components), not once per component;
* ``pm.sample`` attaches the report to its result.

No assertion here is statistical (accounting is exact): references are exact rationals and a
brute-force maximum over records of the epsilons of the releases reading each record. Each
test has a negative control that the same comparison rejects (the sequential sum, the old
double count, a hand-written potential that holds no mechanism).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp import privacy
from pymc_dp.accounting import PrivacyGuarantee, round_up
from pymc_dp.releases.ops import OnePosteriorSample


# ---- no privacy claim without a sensitivity ---------------------------------------------------
@pytest.mark.parametrize(
    "mech",
    [
        pmdp.Gaussian(sigma=42.0),
        pmdp.Laplace(scale=2.0),
        pmdp.Geometric(alpha=0.5),
        pmdp.DiscreteGaussian(sigma=3.0),
    ],
    ids=repr,
)
def test_scale_only_mechanism_makes_no_claim(mech):
    g = mech.guarantee()
    assert g == PrivacyGuarantee.no_claim() and not g.claimed
    assert mech.epsilon is None and mech.delta is None and not mech.has_privacy_claim
    assert "no privacy claim" in repr(mech)
    assert mech.map(mech.sensitivity).claimed  # the privacy map needs no declared sensitivity


def test_declared_sensitivity_states_the_exact_claim():
    """Control: the same noise with ``sensitivity`` given claims rho = 1 / (2 * 42^2)."""
    g = pmdp.Gaussian(sigma=42.0, sensitivity=1.0).guarantee()
    assert g.claimed and g.rho == round_up(Fraction(1, 2 * 42**2))
    assert pmdp.Laplace(scale=2.0, sensitivity=1.0).guarantee().epsilon == 0.5


def _release_model(mech):
    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.5, shape=8)
        pmdp.Release("s", x.sum(), mech, observed=4.0)
        pmdp.Release("t", x[:4].sum(), pmdp.Laplace(epsilon=0.5), observed=2.0)
    return m


def test_report_and_attached_result_state_no_claim():
    m = _release_model(pmdp.Gaussian(sigma=42.0))
    report = pmdp.privacy_report(m)
    assert not report.total.claimed and report.no_claim == ("s",)
    assert report.total == PrivacyGuarantee.no_claim()
    d = report.to_dict()
    assert d["claimed"] is False and d["total"] == {"epsilon": None, "delta": None, "rho": None}
    assert [r["claimed"] for r in d["releases"]] == [False, True]
    assert "no privacy claim" in str(report) and "'s'" not in str(report)
    idata = pmdp.attach_privacy(az.from_dict({"posterior": {"a": np.ones((1, 2))}}), m)
    grp = idata["privacy"]
    assert grp.attrs["claimed"] == 0 and grp.attrs["no_claim"] == "s"
    assert "total_epsilon" not in grp.attrs and "total_rho" not in grp.attrs
    assert math.isnan(grp["rho"].values[0]) and not grp["claimed"].values[0]
    assert json.loads(idata.attrs["pymc_dp_privacy"])["no_claim"] == ["s"]
    # control: the same model with a declared sensitivity has a total
    claimed = pmdp.privacy_report(_release_model(pmdp.Gaussian(sigma=42.0, sensitivity=1.0)))
    assert claimed.total.claimed and claimed.total.epsilon == math.inf


# ---- One Posterior Sample -------------------------------------------------------------------
def _ops_model(hand_written: bool = False):
    ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
    data = np.array([1, 0, 1, 1, 0])
    with pm.Model() as m:
        p = pm.Truncated("p", pm.Beta.dist(1.0, 1.0), lower=0.1, upper=0.9)
        if hand_written:  # the same potential, not made by tempered_likelihood
            lp = pm.logp(pm.Bernoulli.dist(p=p), data).sum()
            pm.Potential("loglik", lp * np.float64(1.0 / ops.temperature))
        else:
            ops.tempered_likelihood("loglik", pm.Bernoulli.dist(p=p), data)
    return m, ops


def test_tempered_likelihood_is_counted():
    m, ops = _ops_model()
    report = pmdp.privacy_report(m)
    eps = ops.guarantee().epsilon
    assert [(e.name, e.kind) for e in report.entries] == [("loglik", "ops")]
    assert report.total.epsilon == eps and 0.0 < eps <= 1.0
    assert report.total.rho == round_up(Fraction(eps) ** 2 / 2)
    three = pmdp.privacy_report(m, released_draws=3).total.epsilon
    assert three == round_up(3 * Fraction(eps))
    assert any("converged chain" in n for n in report.notes)
    with pytest.raises(ValueError, match="released_draws"):
        pmdp.privacy_report(m, released_draws=0)
    # with a release in the same model both count (sequentially)
    with m:
        x = pm.Bernoulli("x", 0.5, shape=3)
        pmdp.Release("s", x.sum(), pmdp.Laplace(epsilon=0.5), observed=1.0)
    assert pmdp.privacy_report(m).total.epsilon == round_up(Fraction(eps) + Fraction(1, 2))


def test_hand_written_potential_is_not_counted_but_named():
    """Control: a potential without the tag holds no mechanism; the report says so."""
    m, _ = _ops_model(hand_written=True)
    report = pmdp.privacy_report(m)
    assert report.entries == () and report.total.epsilon == 0.0
    assert any("'loglik'" in n and "not counted" in n for n in report.notes)


# ---- parallel composition ---------------------------------------------------------------------
def _brute_epsilon(n: int, reads: list, eps: list) -> float:
    """max over records of the sum of the epsilons of the releases that read the record."""
    return max(sum(e for r, e in zip(reads, eps, strict=True) if i in r) for i in range(n))


def _group_model(index_sets, eps=1.0, n=12, data_index=False):
    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.5, shape=n)
        for g, idx in enumerate(index_sets):
            if data_index:
                idx = pm.Data(f"i{g}", np.asarray(idx))
            pmdp.Release(f"s{g}", x[idx].sum(), pmdp.Laplace(epsilon=eps), observed=1.0)
    return m


def test_disjoint_slices_cost_their_maximum():
    m = _group_model([slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 12)])
    report = pmdp.privacy_report(m)
    assert report.total.epsilon == 1.0  # not 4.0
    [g] = report.groups
    assert g.reason == "proven" and g.names == ("s0", "s1", "s2", "s3")
    # the same as one vector release of the four group sums (L1 sensitivity 1)
    with pm.Model() as one:
        x = pm.Bernoulli("x", 0.5, shape=12)
        pmdp.Release("v", x.reshape((4, 3)).sum(1), pmdp.Laplace(epsilon=1.0), observed=np.ones(4))
    assert pmdp.privacy_report(one).total.epsilon == report.total.epsilon


@pytest.mark.parametrize(
    "index_sets",
    [
        [np.array([0, 2, 4]), np.array([1, 3, 5]), np.array([-1, -2])],  # index arrays
        [np.arange(12) % 2 == 0, np.arange(12) % 2 == 1],  # boolean masks
        [slice(0, 6), slice(4, 10)],  # overlapping: records 4, 5 in both (the control)
        [slice(0, 6), slice(4, 10), slice(8, 12), slice(5, 9)],  # a chain: up to 3 overlap
        [slice(None), slice(0, 1)],
    ],
)
def test_proven_groups_match_brute_force(index_sets):
    eps = [0.5, 0.25, 1.0, 0.125][: len(index_sets)]
    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.5, shape=12)
        for g, (idx, e) in enumerate(zip(index_sets, eps, strict=False)):
            pmdp.Release(f"s{g}", x[idx].sum(), pmdp.Laplace(epsilon=e), observed=1.0)
    reads = [set(np.arange(12)[idx].tolist()) for idx in index_sets]
    ref = _brute_epsilon(12, reads, eps)
    got = pmdp.privacy_report(m).total.epsilon
    assert got == ref
    if any(a & b for i, a in enumerate(reads) for b in reads[i + 1 :]):
        assert got > max(eps)  # overlapping releases add up where they overlap
    else:
        assert got == max(eps) < sum(eps)


def test_no_proof_without_constant_rows_or_with_several_records_per_person():
    """Controls: ``pm.Data`` indices (changeable) and contributions > 1 fall back to the sum."""
    sets = [slice(0, 6), slice(6, 12)]
    m = _group_model([np.arange(12)[s] for s in sets], data_index=True)
    assert pmdp.privacy_report(m).total.epsilon == 2.0
    m = _group_model(sets)
    assert pmdp.privacy_report(m).total.epsilon == 1.0
    assert pmdp.privacy_report(m, contributions=2).total.epsilon == 4.0  # 2 eps, twice


def test_gaussian_groups_take_the_largest_rho():
    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.5, shape=6)
        pmdp.Release("a", x[:3].sum(), pmdp.Gaussian(rho=0.5), observed=1.0)
        pmdp.Release("b", x[3:].sum(), pmdp.Gaussian(rho=0.125), observed=1.0)
    t = pmdp.privacy_report(m).total
    assert t.rho == 0.5 and t.epsilon == math.inf


def test_declared_disjoint_groups():
    with pm.Model() as m:
        for g in range(3):
            x = pm.Bernoulli(f"x{g}", 0.5, shape=5)
            pmdp.Release(f"s{g}", x.sum(), pmdp.Laplace(epsilon=0.5 + g), observed=1.0)
    assert pmdp.privacy_report(m).total.epsilon == 4.5  # three record variables: sequential
    r = pmdp.privacy_report(m, disjoint=[["s0", "s1", "s2"]])
    assert r.total.epsilon == 2.5 and r.groups[0].reason == "declared"
    assert pmdp.privacy_report(m, disjoint=[["s0", "s1"]]).total.epsilon == 1.5 + 2.5
    with pytest.raises(ValueError, match="not a release of the model"):
        pmdp.privacy_report(m, disjoint=[["s0", "nope"]])
    with pytest.raises(ValueError, match="in two groups"):
        pmdp.privacy_report(m, disjoint=[["s0", "s1"], ["s1", "s2"]])
    with pytest.raises(ValueError, match="at least two"):
        pmdp.privacy_report(m, disjoint=[["s0"]])
    with pytest.raises(TypeError, match="list of groups"):
        pmdp.privacy_report(m, disjoint="s0")


# ---- a mixture's release is counted once --------------------------------------------------------
def test_mixture_counts_its_worst_component_once():
    with pm.Model() as m:
        w = pm.Dirichlet("w", np.ones(2))
        comps = [
            pmdp.Privatized.dist(pm.Normal.dist(0.0), pmdp.Laplace(epsilon=0.5)),
            pmdp.Privatized.dist(pm.Normal.dist(1.0), pmdp.Laplace(epsilon=0.25)),
        ]
        pm.Mixture("mix", w, comps, observed=np.array([0.1, 2.0]))
    report = pmdp.privacy_report(m)
    assert report.total.epsilon == 0.5  # each value was released by one component
    # control: both components are counted (the old count, once per component, is their sum
    # 0.75), so the total is their maximum, not one component dropped
    assert sorted(e.guarantee.epsilon for e in report.entries) == [0.25, 0.5]
    assert [(g.reason, g.names) for g in report.groups] == [("mixture", ("mix[0]", "mix[1]"))]


def test_nodes_summed_in_a_custom_dist_still_add_up():
    """Control: two noisy releases inside one observed value (not alternatives) compose."""

    def dist(stat, size):
        return pmdp.Release.dist(stat, pmdp.Geometric(epsilon=0.5)) + pmdp.Release.dist(
            stat, pmdp.Geometric(epsilon=0.25)
        )

    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.3, shape=4)
        pm.CustomDist("c", x.sum(), dist=dist, observed=2, dtype="int64")
    report = pmdp.privacy_report(m)
    assert report.total.epsilon == 0.75 and report.groups == ()


# ---- pm.sample attaches the report --------------------------------------------------------------
def test_pm_sample_attaches_the_report():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pmdp.Privatized(
            "y", pm.Normal.dist(mu, 1.0), pmdp.Laplace(epsilon=0.5), observed=np.array([0.3, 1.0])
        )
        idata = pm.sample(
            draws=10,
            tune=10,
            chains=1,
            cores=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    d = json.loads(idata.attrs["pymc_dp_privacy"])
    assert d["total"] == {"epsilon": 0.5, "delta": 0.0, "rho": 0.125}
    assert idata["privacy"]["epsilon"].values.tolist() == [0.5]
    # the report equals attach_privacy's on the same model
    again = pmdp.attach_privacy(az.from_dict({"posterior": {"a": np.ones((1, 2))}}), m)
    assert again.attrs["pymc_dp_privacy"] == idata.attrs["pymc_dp_privacy"]


def test_hook_leaves_models_without_releases_and_keeps_runs_when_the_report_fails(monkeypatch):
    with pm.Model() as plain:
        pm.Normal("y", 0.0, 1.0, observed=np.array([0.1]))
    idata = az.from_dict({"posterior": {"a": np.ones((1, 2))}})
    out = privacy._with_report(idata, plain)
    assert "pymc_dp_privacy" not in out.attrs and "privacy" not in out.children
    m = _release_model(pmdp.Laplace(epsilon=1.0))
    assert "privacy" in privacy._with_report(idata.copy(), m).children  # control

    def broken(model):
        raise RuntimeError("boom")

    monkeypatch.setattr(privacy, "privacy_report", broken)
    fresh = az.from_dict({"posterior": {"a": np.ones((1, 2))}})
    with pytest.warns(UserWarning, match="could not attach the privacy report.*boom"):
        kept = privacy._with_report(fresh, m)
    assert kept is fresh and "privacy" not in kept.children
    assert privacy._with_report("a MultiTrace", m) == "a MultiTrace"


def test_report_says_where_the_sensitivity_is_not_proven():
    """Issue 24: "where no bound can be proven, say so in the report". Unclipped Normal records
    (no finite bound) and a loose bound above an exact declaration (the normal family's
    ``[sum x, sum x^2]`` on [-1, 2]: proven 7, exact 6.25) each get a note; the control, a
    clipped sum declared at its exact sensitivity 2, gets none."""
    import warnings

    import pytensor.tensor as pt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pmdp.SensitivityProofWarning)
        with pm.Model() as m:
            x = pm.Normal("x", 0.0, 1.0, shape=5)
            pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=0.5)
            c = pt.clip(x, -1.0, 2.0)
            pmdp.Release(
                "n", pt.stack([c.sum(), (c * c).sum()]),
                pmdp.Laplace(epsilon=1.0, sensitivity=6.25), observed=[0.5, 3.0],
            )  # fmt: skip
            pmdp.Release(
                "ok", pt.clip(x, -1.0, 1.0).sum(),
                pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=0.5,
            )  # fmt: skip
    notes = pmdp.privacy_report(m).notes
    assert any("'z'" in n and "not proven" in n for n in notes), notes
    assert any("'n'" in n and "exceeds the declared" in n for n in notes), notes
    assert not any("'ok'" in n for n in notes), notes


def test_report_reuses_the_proof_until_the_data_change(monkeypatch):
    """``pm.sample`` reports on every run: the proof of a release's statistic is made once (when
    the release is built) and reused by the reports while the data it reads are unchanged, and
    made again after ``pm.set_data``. Weights
    ``w = (1, 4, 2)`` of Bernoulli records prove L1 4 (the declaration: no note); after
    ``pm.set_data`` to ``(1, 9, 2)`` the proof is 9 and the note appears. Control: a proof kept
    across the change (the stale cache) would give no note, which the last assertion rejects."""
    import pymc_dp.distributions.sensitivity as sens

    calls = []
    real = sens.prove_sensitivity

    def counted(stat):
        calls.append(stat)
        return real(stat)

    monkeypatch.setattr(sens, "prove_sensitivity", counted)
    with pm.Model() as m:
        w = pm.Data("w", np.array([1.0, 4.0, 2.0]))
        x = pm.Bernoulli("x", p=0.5, shape=3)
        pmdp.Release("z", (w * x).sum(), pmdp.Laplace(epsilon=1.0, sensitivity=4), observed=2.0)
    assert len(calls) == 1  # the check when the release was built
    assert not pmdp.privacy_report(m).notes
    assert not pmdp.privacy_report(m).notes
    assert len(calls) == 1  # the reports reuse it
    with m:
        pm.set_data({"w": np.array([1.0, 9.0, 2.0])})
    notes = pmdp.privacy_report(m).notes
    assert len(calls) == 2
    assert any("'z'" in n and "bound 9 exceeds the declared sensitivity 4" in n for n in notes)
