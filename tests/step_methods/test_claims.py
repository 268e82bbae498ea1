"""The claim rule of pymc_dp's steps (issue 7, item 16): only variables that feed an observed
Release are claimed; a model using pymc_dp distributions without a Release samples as in PyMC.

These are deterministic assertions (no false-alarm rate); the control (the same variables with
a Release) is claimed.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods.compound import Competence

import pymc_dp as pmdp
from pymc_dp.step_methods import CONJUGATE_STEPS, DataAugmentation, register_step_methods
from pymc_dp.step_methods.claims import claim_model, parameter_claimable, release_records
from pymc_dp.step_methods.conjugate import ConjugateGibbs

F = np.float64
STEPS = (DataAugmentation, *CONJUGATE_STEPS)


def _noise_dist(name):
    """Each public pymc_dp noise distribution, as a .dist of integer/float values."""
    return {
        "Skellam": lambda mu: pmdp.Skellam.dist(mu + F(1.0), F(1.0)),
        "DiscreteLaplace": lambda mu: pmdp.DiscreteLaplace.dist(pm.math.sigmoid(mu) * F(0.5)),
        "DiscreteNormal": lambda mu: pmdp.DiscreteNormal.dist(mu + F(1.0)),
        "Bessel": lambda mu: pmdp.Bessel.dist(F(1.0), mu + F(1.0)),
    }[name]


PUBLIC_DISTS = ["Skellam", "DiscreteLaplace", "DiscreteNormal", "Bessel"]


def _assert_nothing_claimed(model):
    with model:
        for rv in model.free_RVs:
            for cls in STEPS:
                assert cls.competence(rv) == Competence.INCOMPATIBLE, (cls.__name__, rv.name)
        register_step_methods()
        _, selected = assign_step_methods(model)
    assert not any(cls in selected for cls in STEPS), selected
    # outside the model context too (the registry of release models is consulted)
    for rv in model.free_RVs:
        for cls in STEPS:
            assert cls.competence(rv) == Competence.INCOMPATIBLE, (cls.__name__, rv.name)
    assert release_records(model) == set()


def test_reported_case_skellam_child_of_poisson_records():
    """lam ~ Gamma, x ~ Poisson(lam, 5), obs ~ Skellam(x + 1, 1), no Release: ConjugateGibbs
    used to be IDEAL for lam (it decided by the module of the child's op)."""
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(1.0))
        x = pm.Poisson("x", lam, shape=5)
        pmdp.Skellam("obs", x + 1, 1, observed=np.array([1, 0, 2, -1, 3]))
    _assert_nothing_claimed(model)
    with model:
        assert ConjugateGibbs.competence(lam) == Competence.INCOMPATIBLE


@pytest.mark.parametrize("name", PUBLIC_DISTS)
def test_public_distribution_as_observed_child_claims_nothing(name):
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(1.0))
        x = pm.Poisson("x", lam, shape=4)
        mu = pm.Normal("mu", F(0.0), F(1.0))
        dist = _noise_dist(name)(pm.math.abs(mu) + x)
        model.register_rv(dist, "obs", observed=np.array([1, 0, 2, 1]))
    _assert_nothing_claimed(model)


@pytest.mark.parametrize("name", PUBLIC_DISTS)
def test_public_distribution_as_prior_claims_nothing(name):
    with pm.Model() as model:
        mu = pm.Normal("mu", F(0.0), F(1.0))
        k = model.register_rv(_noise_dist(name)(pm.math.abs(mu)), "k")
        pm.Normal("y", k, F(1.0), observed=np.array([0.5, 1.5]))
    _assert_nothing_claimed(model)


@pytest.mark.parametrize("marginalize", [True, False])
def test_privatized_without_release_claims_nothing(marginalize):
    mech = pmdp.Geometric(epsilon=1.0)
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(0.5))
        pmdp.Privatized(
            "y", pm.Poisson.dist(lam, shape=4), mech, observed=np.array([3, 1, 0, 5]),
            marginalize=marginalize,
        )  # fmt: skip
    _assert_nothing_claimed(model)


def test_control_release_is_claimed():
    """The same kind of model with an observed Release: the records and the conjugate
    parameter of the records are claimed, and only they."""
    with pm.Model() as model:
        lam = pm.Gamma("lam", F(2.0), F(1.0))
        x = pm.Poisson("x", lam, shape=5)
        mu = pm.Normal("mu", F(0.0), F(1.0))
        pmdp.Skellam("obs", pm.math.abs(mu) + 1, 1, observed=np.array([1, 0]))
        pmdp.Release("z", x.sum(), pmdp.Geometric(epsilon=1.0), observed=7)
        assert DataAugmentation.competence(x) == Competence.IDEAL
        assert ConjugateGibbs.competence(lam) == Competence.IDEAL
        assert DataAugmentation.competence(lam) == Competence.INCOMPATIBLE
        assert ConjugateGibbs.competence(mu) == Competence.INCOMPATIBLE
    assert claim_model(x) is model
    assert release_records(model) == {x}
    assert parameter_claimable([x], model)
    assert not parameter_claimable([mu], model)


def test_unobserved_release_claims_nothing():
    """A Release that is not observed (prior predictive use) makes no records."""
    with pm.Model() as model:
        p = pm.Beta("p", F(1.0), F(1.0))
        x = pm.Bernoulli("x", p, shape=4)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0))
    _assert_nothing_claimed(model)


# --------------------------------------------------------------------------- the claims module
def _release_model():
    with pm.Model() as model:
        p = pm.Beta("p", F(1.0), F(1.0))
        x = pm.Bernoulli("x", p, shape=4)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=2.0)
    return model


def test_release_module_keeps_no_step_assignment_state():
    """The registry of release models lives in claims; release.py only announces models."""
    import weakref

    from pymc_dp.distributions import release

    assert not [k for k, v in vars(release).items() if isinstance(v, weakref.WeakSet)]
    assert not hasattr(release, "_RECORD_RVS") and not hasattr(release, "model_of")


def test_model_of_outside_the_context_and_weak():
    """A step finds the model of a record outside ``with model:`` (pm.sample(model=m)), and
    the registry does not keep models alive."""
    import gc
    import weakref

    from pymc_dp.step_methods import claims

    model = _release_model()
    x = model["x"]
    assert claims.model_of(x) is model and claim_model(x) is model
    assert DataAugmentation.competence(x) == Competence.IDEAL
    # control: a variable of no registered model
    assert claims.model_of(pm.Normal.dist()) is None
    assert any(m is model for m in claims._RELEASE_MODELS)
    ref = weakref.ref(model)
    del model, x
    gc.collect()
    assert ref() is None  # the registry alone does not keep the model alive


def test_release_recognised_by_op_class_not_name():
    """A symbolic RV whose op merely has Release's names is not a release."""
    from pymc.distributions.distribution import SymbolicRandomVariable

    from pymc_dp.distributions.release import ReleaseRV, is_release

    Fake = type("ReleaseRV", (SymbolicRandomVariable,), {"__module__": ReleaseRV.__module__})
    x = pm.Normal.dist()
    inner = x.type()
    fake = Fake(inputs=[inner], outputs=[inner + 1], extended_signature="()->()")(x)
    assert not is_release(fake)
    model = _release_model()
    assert [is_release(rv) for rv in model.observed_RVs] == [True]


def test_direct_rv_parents_one_walk():
    """The one walk used by the claim rule and the DA blocks: parents through deterministic
    expressions, not through another random variable; a graph (a Potential) from itself."""
    from pymc_dp.step_methods.claims import direct_rv_parents

    with pm.Model() as model:
        a = pm.Normal("a")
        b = pm.Normal("b", pm.math.exp(a) * 2)
        c = pm.Normal("c", b + 1, shape=3)
        pot = pm.Potential("pot", c.sum() * a)
    rv_set = set(model.basic_RVs)
    assert direct_rv_parents(c, rv_set) == {b}
    assert direct_rv_parents(b, rv_set) == {a}
    assert direct_rv_parents(a, rv_set) == set()
    assert direct_rv_parents(pot, rv_set) == {a, c}
