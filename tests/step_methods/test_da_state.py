"""``DataAugmentation.sampling_state``: every generator the step draws from round-trips.

The state (:class:`~pymc_dp.step_methods.data_augmentation.DataAugmentationState`) holds the
step's generator and the generators of its compiled functions (compiled proposals, the generic
path's scan). Restoring a state taken before ``k`` sweeps and sweeping ``k`` times again gives
the same draws bit for bit, in the same step or a freshly built one; the checks of PyMC's
``StepMethodTester`` (deepcopy of the step, restore, ``pm.sample``, restore into the copy) pass.
These are deterministic equalities (no false-alarm rate); each has a negative control showing
that without the restored state the draws differ.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import fields

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.state import DataClassState, equal_dataclass_values

import pymc_dp as pmdp
from pymc_dp.step_methods.data_augmentation import DataAugmentation, DataAugmentationState

K = 4  # sweeps between taking and restoring a state


def equal_states(a, b) -> bool:
    """Field-by-field equality of two sampling states (PyMC's tests' helper, restated)."""
    if type(a) is not type(b):
        return False
    names = {f.name for f in fields(a)}
    return names == {f.name for f in fields(b)} and all(
        equal_dataclass_values(getattr(a, n), getattr(b, n)) for n in names
    )


def _model(kind):
    with pm.Model() as model:
        if kind == "generic":
            x = pm.Normal("x", 0.0, 1.0, shape=6)
            pmdp.Release("z", x.max(), pmdp.Laplace(scale=1.0), observed=1.0)
        else:
            p = pm.Beta("p", 1.0, 1.0)
            x = pm.Bernoulli("x", p=p, shape=12)
            pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=5.3)
    return model


def _step(model, kind, rng):
    with model:
        return DataAugmentation([model["x"]], rng=rng, direct_proposals=kind != "compiled")


def _run(step, point, k=K):
    out = []
    for _ in range(k):
        point, [stats] = step.step(point)
        out.append((point["x"].copy(), stats))
    return out, point


def _same(a, b) -> bool:
    return all(np.array_equal(xa, xb) and sa == sb for (xa, sa), (xb, sb) in zip(a, b, strict=True))


KINDS = ["direct", "compiled", "generic"]


@pytest.mark.parametrize("kind", KINDS)
def test_restore_same_step_same_draws(kind):
    model = _model(kind)
    step = _step(model, kind, 1)
    point = model.initial_point()
    state = step.sampling_state
    first, end = _run(step, point)
    step.sampling_state = state
    again, _ = _run(step, point)
    assert _same(first, again)
    # negative control: carrying on from the end state gives other draws
    later, _ = _run(step, end)
    assert not _same(first, later)


@pytest.mark.parametrize("kind", KINDS)
def test_restore_into_fresh_step_same_draws(kind):
    model = _model(kind)
    step = _step(model, kind, 1)
    point = model.initial_point()
    _run(step, point)  # the state is not the construction state
    state = step.sampling_state
    first, _ = _run(step, point)
    fresh = _step(model, kind, 99)
    # negative control: the fresh step's own generators give other draws
    assert not _same(first, _run(_step(model, kind, 99), point)[0])
    fresh.sampling_state = state
    assert _same(first, _run(fresh, point)[0])


def test_proposal_generators_are_part_of_the_state():
    """Restoring only the step's own generator is not enough on the compiled paths: the
    state also carries the compiled functions' generators."""
    model = _model("compiled")
    step = _step(model, "compiled", 1)
    point = model.initial_point()
    state = step.sampling_state
    assert len(state.proposal_rngs) >= 1
    first, _ = _run(step, point)
    partial = copy.deepcopy(state)
    partial.proposal_rngs = step.sampling_state.proposal_rngs  # the advanced ones
    step.sampling_state = partial
    assert not _same(first, _run(step, point)[0])
    step.sampling_state = state
    assert _same(first, _run(step, point)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_state_pickles_and_deepcopies(kind):
    model = _model(kind)
    step = _step(model, kind, 3)
    point = model.initial_point()
    _run(step, point, 2)
    state = step.sampling_state
    assert isinstance(state, DataAugmentationState)
    for clone in (pickle.loads(pickle.dumps(state)), copy.deepcopy(state)):
        assert equal_states(clone, state) and clone is not state
        first, _ = _run(step, point)
        step.sampling_state = clone
        assert _same(first, _run(step, point)[0])
        step.sampling_state = state
    # the state is a copy: sweeping does not change it, and it differs from the later state
    snapshot = copy.deepcopy(state)
    _run(step, point, 1)
    assert equal_states(state, snapshot)
    assert not equal_states(state, step.sampling_state)


def test_step_method_tester_checks():
    """What PyMC's ``StepMethodTester.step_continuous`` checks, on a DA step."""
    model = _model("compiled")
    with model:
        step = DataAugmentation([model["x"]], rng=5, direct_proposals=False)
        orig_step = copy.deepcopy(step)
        orig_state = step.sampling_state
        assert equal_states(step.sampling_state, orig_state)
        ip = model.initial_point()
        value1, _ = step.step(ip)
        final_state = step.sampling_state
        step.sampling_state = orig_state
        value2, _ = step.step(ip)
        assert equal_states(step.sampling_state, final_state)
        assert equal_dataclass_values(value1, value2)
        step.sampling_state = orig_state
        pm.sample(
            draws=20, tune=10, chains=1, step=[step], random_seed=1, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    curr_state = step.sampling_state
    assert not equal_states(orig_state, curr_state)
    orig_step.sampling_state = curr_state
    assert equal_states(orig_step.sampling_state, curr_state)
    assert orig_step.sampling_state is not curr_state


def test_restored_step_pickled_with_cloudpickle_continues_identically():
    """A pickled step continues with the same draws as the original (the cache is dropped)."""
    model = _model("direct")
    step = _step(model, "direct", 7)
    point = model.initial_point()
    _, point = _run(step, point, 2)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert _same(_run(step, point)[0], _run(clone, point)[0])


def test_frozen_fields_and_class_are_checked():
    model = _model("direct")
    step = _step(model, "direct", 1)
    other_model = _model("generic")
    other = _step(other_model, "generic", 1)
    with pytest.raises(ValueError, match="frozen fields"):
        step.sampling_state = other.sampling_state
    wrong = copy.deepcopy(step.sampling_state)
    wrong.method = "soma"
    with pytest.raises(ValueError, match="Field 'method'"):
        step.sampling_state = wrong
    with pytest.raises(AssertionError, match="invalid state class"):
        step.sampling_state = DataClassState()
