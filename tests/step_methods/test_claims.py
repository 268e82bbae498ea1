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
