"""Observed data of releases, at model build and through ``pm.set_data`` (issue 7).

Each test reproduces one way a release used to be silently wrong: integer data beyond int32
wrapping (item 3), ``pm.set_data`` bypassing the build-time refusals (item 4), masked
releases (item 5), releases outside the exactly representable range (item 6), and observed
data of a different shape than the variable (item 8). Every input must either give the right
log-likelihood or raise an error naming the data.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp as pmdp
from pymc_dp.distributions._observed import FLOAT_RELEASE_BOUND, INTEGER_RELEASE_BOUND
from pymc_dp.distributions.privatized import PrivatizedRV
from pymc_dp.distributions.release import ReleaseRV

BIG = 3_000_000_000  # beyond int32: PyMC stored it as -1,294,967,296


def _poisson_geometric_far(z, lam, mech):
    """Exact ``log sum_y Poisson(y; lam) eta(z - y)`` for ``z`` far above every relevant ``y``.

    With ``eta(k) = c alpha^|k|`` and ``y <= z``: ``sum_y p(y) c alpha^(z - y) =
    c alpha^z E[alpha^-y] = c alpha^z exp(lam (1/alpha - 1))``; the terms with ``y > z`` are
    below ``exp(-1e9)`` for ``z = 3e9`` and ``lam = 4``.
    """
    a = mech.alpha
    return z * math.log(a) + lam * (1.0 / a - 1.0) + math.log((1.0 - a) / (1.0 + a))


# ---- item 3: integer data beyond int32 stay exact ---------------------------------------------


def test_privatized_large_counts_exact_array_and_pm_data():
    mech = pmdp.Geometric(epsilon=1.0)
    want = _poisson_geometric_far(BIG, 4.0, mech)
    for use_data in (False, True):
        with pm.Model() as model:
            lam = pm.Gamma("lam", 2.0, 0.5)
            obs = np.array([BIG], dtype=np.int64)
            if use_data:
                obs = pm.Data("d", obs)
            y = pmdp.Privatized("y", pm.Poisson.dist(lam), mech, observed=obs)
        if not use_data:
            held = np.asarray(model.rvs_to_values[y].data)
            assert held.dtype == np.int64 and held.tolist() == [BIG]
        lp = model.compile_logp(vars=[y])({"lam_log__": np.log(4.0)})
        np.testing.assert_allclose(lp, want, rtol=1e-12)


def test_release_large_counts_exact_array_and_pm_data():
    mech = pmdp.Geometric(epsilon=1e-3)
    xs = np.array([1, 0, 1, 1], dtype=np.int64)
    for obs in (BIG, np.int64(BIG), np.array(BIG), "data"):
        with pm.Model() as model:
            x = pm.Bernoulli("x", p=0.3, shape=4)
            observed = pm.Data("d", np.array(BIG, dtype=np.int64)) if obs == "data" else obs
            z = pmdp.Release("z", x.sum(), mech, observed=observed)
        lp = model.compile_logp(vars=[z])({"x": xs})
        np.testing.assert_allclose(lp, mech.logpdf(np.float64(BIG - 3)), rtol=1e-13)


def test_set_data_large_counts_exact_or_refused():
    """A float64 container keeps 3e9 exactly; an int32 one refuses it (no wrap)."""
    mech = pmdp.Geometric(epsilon=1.0)
    want = _poisson_geometric_far(BIG, 4.0, mech)
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        d = pm.Data("d", np.array([3.0]))
        y = pmdp.Privatized("y", pm.Poisson.dist(lam), mech, observed=d)
        di = pm.Data("di", np.array([3], dtype=np.int64))
        yi = pmdp.Privatized("yi", pm.Poisson.dist(lam), mech, observed=di)
    logp = model.compile_logp(vars=[y])
    pm.set_data({"d": np.array([BIG], dtype=np.int64)}, model=model)
    np.testing.assert_allclose(logp({"lam_log__": np.log(4.0)}), want, rtol=1e-12)
    logp_i = model.compile_logp(vars=[yi])
    with pytest.raises((TypeError, ValueError)):
        pm.set_data({"di": np.array([BIG], dtype=np.int64)}, model=model)
        logp_i({"lam_log__": np.log(4.0)})


# ---- item 4: pm.set_data gets the build-time refusals ----------------------------------------


@pytest.mark.parametrize("bad", [7.5, np.nan, np.inf, -np.inf, float(2**60)])
def test_release_set_data_refused_in_graph(bad):
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        d = pm.Data("zd", np.float64(2.0))
        z = pmdp.Release("z", x.sum(), pmdp.Geometric(epsilon=1.0), observed=d)
    logp = model.compile_logp(vars=[z])
    point = {"x": np.array([1, 0, 1, 1])}
    assert np.isfinite(logp(point))
    with pytest.raises(ValueError, match=r"'zd'.*'z'"):
        pm.set_data({"zd": bad}, model=model)
    # set directly on the container (no pm.set_data): the graph checks the stored value
    d.set_value(np.float64(bad))
    with pytest.raises(ValueError, match=r"'zd'.*'z'"):
        logp(point)
    # the same refusal for the whole model's logp and when a step reads the data
    with pytest.raises(ValueError, match=r"'zd'.*'z'"):
        model.compile_logp()({"x": point["x"]})
    with pytest.raises(ValueError, match=r"'zd'.*'z'"):
        with model:
            pmdp.DataAugmentation([x])
    pm.set_data({"zd": 3.0}, model=model)
    np.testing.assert_allclose(
        logp(point), pmdp.Geometric(epsilon=1.0).logpdf(np.float64(0.0)), rtol=1e-14
    )


@pytest.mark.parametrize("bad", [[1.7, 2.2], [np.nan, 1.0], [1.0, np.inf]])
def test_privatized_set_data_refused_in_graph(bad):
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        d = pm.Data("zd", np.array([1.0, 2.0]))
        y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=1.0), observed=d)
    logp = model.compile_logp(vars=[y])
    dlogp = model.compile_dlogp(vars=[lam])
    point = {"lam_log__": np.log(3.0)}
    assert np.isfinite(logp(point))
    with pytest.raises(ValueError, match=r"'zd'.*'y'"):
        pm.set_data({"zd": np.array(bad)}, model=model)
    np.testing.assert_array_equal(d.get_value(), [1.0, 2.0])  # nothing was stored
    d.set_value(np.array(bad))
    with pytest.raises(ValueError, match=r"'zd'.*'y'"):
        logp(point)
    with pytest.raises(ValueError, match=r"'zd'.*'y'"):
        dlogp(point)


def test_float_release_set_data_nonfinite_refused():
    with pm.Model() as model:
        mu = pm.Normal("mu")
        d = pm.Data("zd", np.array([0.5, 1.5]))
        y = pmdp.Privatized("y", pm.Normal.dist(mu), pmdp.Laplace(epsilon=1.0), observed=d)
    logp = model.compile_logp(vars=[y])
    pm.set_data({"zd": np.array([0.25, 1.75])}, model=model)  # fractions are fine here
    assert np.isfinite(logp({"mu": 0.0}))
    with pytest.raises(ValueError, match=r"'zd'.*'y'"):
        pm.set_data({"zd": np.array([0.25, np.nan])}, model=model)
    d.set_value(np.array([0.25, np.nan]))
    with pytest.raises(ValueError, match=r"'zd'.*'y'"):
        logp({"mu": 0.0})


# ---- item 5: masked releases -------------------------------------------------------------


def test_masked_release_refused():
    masked = np.ma.masked_array([1, 2, 3], mask=[False, True, False])
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        with pytest.raises(ValueError, match=r"observed.*masked"):
            pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=1.0), observed=masked)
        x = pm.Bernoulli("x", p=0.3, shape=(4, 3))
        with pytest.raises(ValueError, match=r"observed.*masked"):
            pmdp.Release("z", x.sum(0), pmdp.Geometric(epsilon=1.0), observed=masked)
    assert model.free_RVs == [lam, x]  # nothing imputed


# ---- item 6: representable range ------------------------------------------------------------


@pytest.mark.parametrize("value", [INTEGER_RELEASE_BOUND + 1, -(2**62), 2**63 - 1])
def test_integer_release_beyond_bound_refused(value):
    with pm.Model():
        x = pm.Bernoulli("x", p=0.3, shape=4)
        with pytest.raises(ValueError, match=r"observed.*2\*\*53"):
            pmdp.Release("z", x.sum(), pmdp.Geometric(epsilon=1.0), observed=value)
        with pytest.raises(ValueError, match=r"observed.*2\*\*53"):
            pmdp.Privatized(
                "y", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=1.0), observed=[value]
            )


def test_integer_release_at_bound_exact():
    mech = pmdp.Geometric(epsilon=1e-6)
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        z = pmdp.Release("z", x.sum(), mech, observed=INTEGER_RELEASE_BOUND)
    lp = model.compile_logp(vars=[z])({"x": np.array([1, 1, 1, 0])})
    np.testing.assert_allclose(lp, mech.logpdf(np.float64(INTEGER_RELEASE_BOUND - 3)), rtol=1e-14)


def test_float_release_range():
    mech = pmdp.Laplace(scale=2.0)
    with pm.Model() as model:
        x = pm.Normal("x", shape=3)
        z = pmdp.Release("z", x.sum(), mech, observed=-FLOAT_RELEASE_BOUND)
        with pytest.raises(ValueError, match=r"observed.*1e\+300"):
            pmdp.Release("z2", x.sum(), mech, observed=1e301)
    lp = model.compile_logp(vars=[z])({"x": np.zeros(3)})
    # the correct very negative number, not -inf
    np.testing.assert_allclose(lp, -1e300 / 2.0 - math.log(4.0), rtol=1e-15)


# ---- item 8: shapes ---------------------------------------------------------------------------


def test_privatized_shape_mismatch_refused():
    mech = pmdp.Geometric(epsilon=1.0)
    with pm.Model(coords={"i": range(4)}):
        with pytest.raises(ValueError, match=r"observed.*shape"):
            pmdp.Privatized("y", pm.Poisson.dist(2.0), mech, shape=(4,), observed=np.arange(5))
        with pytest.raises(ValueError, match=r"observed.*shape"):
            pmdp.Privatized("y2", pm.Poisson.dist(2.0), mech, dims="i", observed=np.arange(5))
        with pytest.raises(ValueError, match=r"observed.*shape"):
            pmdp.Privatized(
                "y3", pm.Poisson.dist(2.0), mech, shape=(4,), observed=pm.Data("d", np.arange(5))
            )
        pmdp.Privatized("ok", pm.Poisson.dist(2.0), mech, dims="i", observed=np.arange(4))


def test_release_shape_mismatch_refused():
    mech = pmdp.Laplace(epsilon=1.0)
    with pm.Model(coords={"k": range(3)}):
        x = pm.Normal("x", shape=(5, 3))
        with pytest.raises(ValueError, match=r"observed.*shape"):
            pmdp.Release("z", x.sum(0), mech, dims="k", observed=np.zeros(4))
        with pytest.raises(ValueError, match="shape"):
            pmdp.Release("z2", x.sum(0), mech, observed=np.zeros(4))
        with pytest.raises(ValueError, match=r"observed.*shape"):
            pmdp.Release("z3", x.sum(0), mech, shape=(3,), observed=np.zeros(4))
        pmdp.Release("ok", x.sum(0), mech, dims="k", observed=np.zeros(3))


# ---- item 15: Op equality by the mechanism's value ---------------------------------------------


def test_ops_compare_mechanisms_by_value():
    base = pm.Poisson.dist(2.0)
    a = pmdp.Privatized.dist(base, pmdp.Geometric(epsilon=1.0)).owner.op
    b = pmdp.Privatized.dist(base, pmdp.Geometric(epsilon=1.0)).owner.op
    c = pmdp.Privatized.dist(base, pmdp.Geometric(epsilon=0.5)).owner.op
    assert isinstance(a, PrivatizedRV)
    assert a.mechanism is not b.mechanism
    assert a == b and hash(a) == hash(b)
    assert a != c
    stat = pt.as_tensor(np.float64(1.0))
    r1 = pmdp.Release.dist(stat, pmdp.Laplace(epsilon=1.0)).owner.op
    r2 = pmdp.Release.dist(stat, pmdp.Laplace(epsilon=2.0)).owner.op
    assert isinstance(r1, ReleaseRV)
    assert r1 != r2


def test_explicit_observed_none_refused():
    """``observed=None`` (e.g. a failed load) must not silently make the release a free variable;
    omitting ``observed`` still declares an unobserved (simulated) release."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        with pytest.raises(ValueError, match="observed=None"):
            pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=None)
        with pytest.raises(ValueError, match="observed=None"):
            pmdp.Privatized("y", pm.Poisson.dist(2.0), pmdp.Laplace(epsilon=1.0), observed=None)
        pmdp.Release("sim", x.sum(), pmdp.Laplace(epsilon=1.0))
    assert [v.name for v in model.free_RVs] == ["x", "sim"]
