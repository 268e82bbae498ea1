"""``sampling_state`` of ConjugateGibbs (PyMC's ``WithSamplingState`` / ``StepMethodState``).

The state holds the step's variables (frozen) and its generator: restoring it replays the same
draws, and it survives deepcopy and pickle. Deterministic: no statistical assertion.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.state import equal_dataclass_values

from pymc_dp.step_methods.conjugate import ConjugateGibbs, ConjugateGibbsState

K = 5


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        p = pm.Beta("p", 2.0, 2.0)
        pm.Bernoulli("x", p, observed=np.array([1, 0, 1, 1]))
        lam = pm.Gamma("lam", 2.0, 1.0)
        pm.Exponential("e", lam=lam, observed=np.array([0.5, 1.5]))
        v = pm.InverseGamma("v", 3.0, 2.0)
        mu = pm.Normal("mu", 0.0, sigma=pt.sqrt(v))
        pm.Normal("y", mu, sigma=pt.sqrt(v), observed=np.array([0.2, 1.1]))
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Normal("r", b[0] + np.arange(3.0) * b[1], 1.0, observed=np.zeros(3))
    return m


def _run(step, point, k=K):
    out = []
    for _ in range(k):
        point, _ = step.step(point)
        out.append(np.concatenate([np.ravel(point[v.name]) for v in step.vars]))
    return np.array(out)


def _step(model):
    names = ["p", "lam", "mu", "v", "b"]
    return ConjugateGibbs([model[n] for n in names], model=model, rng=11)


def test_state_class_and_fields(model):
    step = _step(model)
    state = step.sampling_state
    assert isinstance(state, ConjugateGibbsState) and isinstance(state, StepMethodState)
    assert state.var_names == [v.name for v in step.vars]
    assert set(step.families.values()) == {"beta", "gamma", "normal_invgamma", "regression"}


def test_round_trip_replays_the_draws(model):
    """get state, step k times, restore, step k times again: identical draws."""
    step = _step(model)
    point = model.initial_point()
    state = step.sampling_state
    first = _run(step, point)
    after = step.sampling_state
    assert not equal_dataclass_values(state, after)  # the generator moved (control)
    step.sampling_state = state
    np.testing.assert_array_equal(_run(step, point), first)
    assert len(np.unique(first[:, 0])) == K  # the draws are not all the same


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda s: pickle.loads(pickle.dumps(s))])
def test_state_copies(model, clone):
    """deepcopy / pickle of the state restore the same stream; a fresh step from another seed
    given the copied state also replays it."""
    step = _step(model)
    point = model.initial_point()
    state = clone(step.sampling_state)
    assert equal_dataclass_values(state, step.sampling_state)
    first = _run(step, point)
    other = ConjugateGibbs(step.vars, model=model, rng=999)
    assert not np.array_equal(_run(other, point), first)  # another seed differs (control)
    other.sampling_state = state
    np.testing.assert_array_equal(_run(other, point), first)


def test_state_of_other_variables_refused(model):
    step = _step(model)
    small = ConjugateGibbs([model["p"]], model=model, rng=1)
    with pytest.raises(ValueError, match="frozen fields"):
        small.sampling_state = step.sampling_state


def test_step_cloudpickles_with_its_state(model):
    """PyMC pickles steps with cloudpickle (spawn / forkserver): the clone, given the state,
    replays the draws; the pair rows travel as references to the PAIRS table."""
    import cloudpickle

    from pymc_dp.step_methods.conjugate_pairs import PAIRS

    for pair in PAIRS:
        assert pickle.loads(pickle.dumps(pair)) is pair
        assert all(pickle.loads(pickle.dumps(c)) is c for c in pair.children)
    step = _step(model)
    point = model.initial_point()
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    clone.sampling_state = step.sampling_state
    np.testing.assert_array_equal(_run(clone, point), _run(step, point))


def test_step_method_tester_sequence(model):
    """The sequence of PyMC's ``StepMethodTester.step_continuous`` (from PyMC's test suite):
    deepcopy of the step, state restored before a second step gives the same value and state,
    ``pm.sample`` moves the state, the copy accepts the moved state."""
    step = _step(model)
    orig_step = copy.deepcopy(step)
    orig_state = step.sampling_state
    ip = model.initial_point()
    value1, _ = step.step(ip)
    final_state = step.sampling_state
    step.sampling_state = orig_state
    value2, _ = step.step(ip)
    assert equal_dataclass_values(step.sampling_state, final_state)
    assert equal_dataclass_values(value1, value2)
    step.sampling_state = orig_state
    with model:
        pm.sample(
            draws=20,
            tune=10,
            chains=1,
            step=[step],
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    curr_state = step.sampling_state
    assert not equal_dataclass_values(orig_state, curr_state)  # control: sampling moved it
    orig_step.sampling_state = curr_state
    assert equal_dataclass_values(orig_step.sampling_state, curr_state)
    assert orig_step.sampling_state is not curr_state
