"""DataAugmentation hardening (issue 7, items 2, 12, 17): refusals that must not be fooled.

* Item 2: records that are not conditionally independent are refused at step assignment even
  when the coupling vanishes at the initial point (a coefficient ``rho = 0``, a uniform
  transition matrix): the check is structural (which record rows each record's terms read).
* Item 12: errors name the right variable and say why (a record variable used as the statistic
  itself; random-walk / AR / correlated MvNormal records are not conditionally independent).
* Item 17: a record whose change of the statistic exceeds the declared sensitivity (in the
  mechanism's norm) is an error naming the release, the record and the change.

These tests assert refusals or exact values, not sampled statistics, so they have no false-alarm
rate; each refusal has a control that is accepted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp as pmdp
from pymc_dp.distributions.release import Release
from pymc_dp.distributions.sensitivity import _unchecked
from pymc_dp.step_methods.data_augmentation import DataAugmentation

SEED = 20261123
F = np.float64


# ---------------------------------------------------------------------------- item 2
def _reversed_coupling_model(reverse=True):
    """mu, rho ~ N(0, 1), x ~ N(mu, 1) (n = 15), y ~ N(rho * x[::-1], 0.5), Gaussian release
    of (sum x, sum y, sum x y). At the initial point rho = 0 hides the coupling."""
    with pm.Model() as model:
        mu = pm.Normal("mu", F(0.0), F(1.0))
        rho = pm.Normal("rho", F(0.0), F(1.0))
        x = pm.Normal("x", mu, F(1.0), shape=15)
        y = pm.Normal("y", rho * (x[::-1] if reverse else x), F(0.5), shape=15)
        Release(
            "z",
            pt.stack([x.sum(), y.sum(), (x * y).sum()]),
            pmdp.Gaussian(sigma=F(1.0)),
            observed=np.array([3.0, 2.5, 10.0]),
        )
    return model


def test_reversed_coupling_refused_at_construction():
    model = _reversed_coupling_model()
    with model, pytest.raises(ValueError, match=r"not conditionally independent") as err:
        DataAugmentation([model["x"], model["y"]])
    msg = str(err.value)
    assert "'y'" in msg and "x" in msg
    assert "restate" in msg.lower()


def test_reversed_coupling_refused_by_pm_sample():
    model = _reversed_coupling_model()
    with model, pytest.raises(ValueError, match=r"not conditionally independent"):
        pm.sample(draws=5, tune=0, chains=1, progressbar=False, random_seed=SEED)


def test_row_aligned_coupling_control_is_accepted():
    """The same model with y ~ N(rho * x_i, 0.5): records (x_i, y_i) are independent."""
    model = _reversed_coupling_model(reverse=False)
    with model:
        step = DataAugmentation([model["x"], model["y"]], rng=SEED)
        point, _ = step.step(model.initial_point())
    assert point["x"].shape == (15,)


T_HMM, K_HMM = 12, 2


def _hmm_logp(value, template, pi0, P):
    """[log pi0[s_0], log P[s_0, s_1], ..., log P[s_{T-2}, s_{T-1}]] (one term per state)."""
    first = pt.log(pi0)[value[0]]
    trans = pt.log(P)[value[:-1], value[1:]]
    return pt.concatenate([first[None], trans])


def _hmm_random(template, pi0, P, rng=None, size=None):
    s = np.empty(T_HMM, dtype=np.int64)
    s[0] = rng.choice(K_HMM, p=pi0)
    for t in range(1, T_HMM):
        s[t] = rng.choice(K_HMM, p=P[s[t - 1]])
    return s


def _hmm_model(alpha):
    """HMM written as a CustomDist over the state path, states and emissions as records,
    transition and emission count tables released with Laplace noise."""
    with pm.Model() as model:
        rows = [pm.Dirichlet(f"P{k}", a=np.asarray(a, dtype=F)) for k, a in enumerate(alpha)]
        P = pt.stack(rows)
        pi0 = np.full(K_HMM, 0.5)
        s = pm.CustomDist(
            "s",
            np.zeros(T_HMM),  # fixes the length of the path (core dimension t)
            pi0,
            P,
            logp=_hmm_logp,
            random=_hmm_random,
            signature="(t),(k),(k,k)->(t)",
            dtype="int64",
            shape=(T_HMM,),
        )
        E = np.array([[0.8, 0.2], [0.3, 0.7]])
        o = pm.Categorical("o", p=pt.as_tensor(E)[s], shape=(T_HMM,))
        trans = (pt.eq(s[:-1, None, None], np.arange(K_HMM)[:, None])
                 * pt.eq(s[1:, None, None], np.arange(K_HMM)[None, :])).sum(0)  # fmt: skip
        emis = (pt.eq(s[:, None, None], np.arange(K_HMM)[:, None])
                * pt.eq(o[:, None, None], np.arange(2)[None, :])).sum(0)  # fmt: skip
        Release("zt", trans.ravel(), pmdp.Laplace(epsilon=1.0, sensitivity=4.0),
                observed=np.array([3.2, 2.1, 2.4, 3.6]))  # fmt: skip
        Release("ze", emis.ravel(), pmdp.Laplace(epsilon=1.0, sensitivity=2.0),
                observed=np.array([4.7, 1.2, 1.9, 4.1]))  # fmt: skip
    return model


@pytest.mark.parametrize("alpha", [[[1, 1], [1, 1]], [[2, 1], [1, 2]]], ids=["sym", "asym"])
def test_hmm_custom_dist_refused(alpha):
    """Uniform P at the initial point made log P[s_{t-1}, s_t] constant: still refused."""
    model = _hmm_model(alpha)
    with model, pytest.raises(ValueError, match=r"not conditionally independent") as err:
        DataAugmentation([model["s"], model["o"]])
    assert "'s'" in str(err.value)


def test_hmm_custom_dist_refused_by_pm_sample():
    model = _hmm_model([[1, 1], [1, 1]])
    with model, pytest.raises(ValueError, match=r"not conditionally independent"):
        pm.sample(draws=5, tune=0, chains=1, progressbar=False, random_seed=SEED)


# ---------------------------------------------------------------------------- item 12
def test_statistic_is_the_record_variable_scalar_parent():
    """Release of x itself: x is the record; its scalar parent p is not."""
    with pm.Model() as model:
        p = pm.Beta("p", F(1.0), F(1.0))
        x = pm.Bernoulli("x", p=p, shape=6)
        Release("z", x, pmdp.Laplace(epsilon=1.0), observed=np.array([1.0, 0, 0, 1, 1, 0]))
        assert DataAugmentation.competence(x) == pm.step_methods.compound.Competence.IDEAL
        assert DataAugmentation.competence(p) == pm.step_methods.compound.Competence.INCOMPATIBLE
        step = DataAugmentation([x], rng=SEED)
        point, _ = step.step(model.initial_point())
        assert point["x"].shape == (6,)
        with pytest.raises(ValueError, match=r"'p'") as err:
            DataAugmentation([p])
        assert "'x'" not in str(err.value) or "scalar" in str(err.value)


def test_statistic_is_the_record_variable_vector_parent_not_taken_over():
    with pm.Model() as model:
        mu = pm.Normal("mu", F(0.0), F(1.0), shape=6)
        x = pm.Normal("x", mu, F(1.0), shape=6)
        Release("z", x, pmdp.Laplace(scale=1.0), observed=np.zeros(6))
        assert DataAugmentation.competence(x) == pm.step_methods.compound.Competence.IDEAL
        assert DataAugmentation.competence(mu) == pm.step_methods.compound.Competence.INCOMPATIBLE
        _, sel = pm.sampling.mcmc.assign_step_methods(model)
    da = [v.name for cls, vs in sel.items() if cls is DataAugmentation for v in vs]
    assert da == ["x"]


def _joint_record_model(kind):
    n = 20
    with pm.Model() as model:
        if kind == "random_walk":
            x = pm.GaussianRandomWalk(
                "x", sigma=F(1.0), init_dist=pm.Normal.dist(F(0.0), F(1.0)), steps=n - 1
            )
        elif kind == "ar":
            x = pm.AR(
                "x", rho=np.array([0.5]), sigma=F(1.0), init_dist=pm.Normal.dist(), steps=n - 1
            )
        else:
            cov = 0.5 * np.eye(n) + 0.5
            x = pm.MvNormal("x", mu=np.zeros(n), cov=cov)
        Release("z", x.sum(), pmdp.Laplace(scale=5.0), observed=F(1.0))
    return model


@pytest.mark.parametrize("kind", ["random_walk", "ar", "mvnormal"])
def test_joint_law_records_refused_as_not_independent(kind):
    model = _joint_record_model(kind)
    with model, pytest.raises(ValueError, match=r"not conditionally independent") as err:
        DataAugmentation([model["x"]])
    msg = str(err.value)
    assert "'x'" in msg
    assert "no record axis" not in msg
    assert "restate" in msg.lower()


# ---------------------------------------------------------------------------- item 17
def _sensitivity_model(factor, generic=False, n=8):
    with pm.Model() as model:
        p = pm.Beta("p", F(1.0), F(1.0))
        x = pm.Bernoulli("x", p=p, shape=n)
        stat = factor * (x.sum() if not generic else pt.minimum(x.sum(), n // 2 + 1))
        with _unchecked():  # the sampled check (second line) is under test, not Release's proof
            Release("z", stat, pmdp.Laplace(epsilon=0.5, sensitivity=1.0), observed=F(3.0))
    return model


def test_sensitivity_contradicted_by_the_records_is_an_error():
    """2 * sum(x) moves by 2 when one Bernoulli record changes: sensitivity 1 is wrong."""
    model = _sensitivity_model(2.0)
    with model, pytest.raises(ValueError, match=r"sensitivity") as err:
        step = DataAugmentation([model["x"]], rng=SEED)
        point = model.initial_point()
        for _ in range(20):
            point, _ = step.step(point)
    msg = str(err.value)
    assert "'z'" in msg and "record" in msg and "2" in msg


def test_sensitivity_contradicted_in_the_sweep():
    """The per-sweep check (not only the construction-time one) raises, naming the record."""
    model = _sensitivity_model(1.0)
    with model:
        step = DataAugmentation([model["x"]], rng=SEED)
    (block,) = step._blocks
    # as if declared 0.5: the next changed record violates it
    step._blocks[0] = block._replace(spec=replace(block.spec, sens=block.spec.sens * 0.5))
    point = model.initial_point()
    with pytest.raises(ValueError, match=r"Release 'z'.*record \d+.*by 1 \(L1 norm\)"):
        for _ in range(20):
            point, _ = step.step(point)


def test_sensitivity_respected_is_fine():
    model = _sensitivity_model(1.0)
    with model:
        step = DataAugmentation([model["x"]], rng=SEED)
        point = model.initial_point()
        mins = []
        for _ in range(50):
            point, [st] = step.step(point)
            mins.append(st["da_accept_min"])
    assert min(mins) >= np.exp(-0.5) * (1 - 1e-12)


def test_sensitivity_generic_path():
    """A non-additive statistic (a sum capped at n/2 + 1) takes the generic path: a change of
    2 per record with sensitivity 1 declared is an error there too; factor 1 is fine."""
    bad = _sensitivity_model(2.0, generic=True)
    with bad, pytest.raises(ValueError, match=r"sensitivity"):
        step = DataAugmentation([bad["x"]], rng=SEED)
        point = bad.initial_point()
        for _ in range(20):
            point, _ = step.step(point)
    good = _sensitivity_model(1.0, generic=True)
    with good:
        step = DataAugmentation([good["x"]], rng=SEED)
        assert step._blocks[0].generic
        point = good.initial_point()
        for _ in range(20):
            point, _ = step.step(point)


def test_sensitivity_l2_for_gaussian():
    """A one-hot count vector moves by sqrt(2) in L2 (2 in L1): Gaussian sensitivity 1.5 is
    fine, Laplace sensitivity 1.5 (L1) is not."""
    for mech, ok in (
        (pmdp.Gaussian(sigma=F(1.0), sensitivity=1.5), True),
        (pmdp.Laplace(epsilon=1.0, sensitivity=1.5), False),
    ):
        with pm.Model() as model:
            w = pm.Dirichlet("w", a=np.ones(3))
            c = pm.Categorical("c", p=w, shape=10)
            with _unchecked():  # the sampled check is under test (Release's proof refuses 1.5)
                Release("z", pt.eq(c[:, None], np.arange(3)).sum(0), mech, observed=np.ones(3))
            if ok:
                step = DataAugmentation([c], rng=SEED)
                point = model.initial_point()
                for _ in range(20):
                    point, _ = step.step(point)
            else:
                with pytest.raises(ValueError, match=r"sensitivity"):
                    step = DataAugmentation([c], rng=SEED)
                    point = model.initial_point()
                    for _ in range(20):
                        point, _ = step.step(point)


def test_statistic_coupling_vanishing_at_initial_point_takes_generic_path():
    """T = sum x + rho * sum x_i x_{n-1-i} is additive only at rho = 0 (the initial point): the
    additivity check also runs at random values of rho, so the exact generic path is used."""
    with pm.Model():
        rho = pm.Normal("rho", F(0.0), F(1.0))
        x = pm.Normal("x", F(0.0), F(1.0), shape=6)
        Release("z", x.sum() + rho * (x * x[::-1]).sum(), pmdp.Laplace(scale=2.0), observed=F(1.0))
        step = DataAugmentation([x], rng=SEED)
    assert step._blocks[0].generic
    with pm.Model():
        rho = pm.Normal("rho", F(0.0), F(1.0))
        x = pm.Normal("x", F(0.0), F(1.0), shape=6)
        Release("z", x.sum() + rho * (x * x).sum(), pmdp.Laplace(scale=2.0), observed=F(1.0))
        step = DataAugmentation([x], rng=SEED)
    assert not step._blocks[0].generic
