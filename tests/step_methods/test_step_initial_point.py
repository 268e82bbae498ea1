"""pymc_dp's steps do not keep the initial point they were built from (issue 14, memory).

PyMC's ``BlockedStep.__new__`` stores each step's constructor arguments, the initial point
included (every value variable: the records too, 8 bytes per int64 record for the step's life).
"""

from __future__ import annotations

import gc
import weakref

import cloudpickle
import numpy as np
import pymc as pm
from pymc.step_methods.compound import BlockedStep

import pymc_dp as pmdp
from pymc_dp.step_methods import ConjugateGibbs, da_chunks
from pymc_dp.step_methods.data_augmentation import DataAugmentation


def _model(n=50):
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 2.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=20.0)
    return model


class _PlainStep(BlockedStep):
    """A step without pymc_dp's mixin (the negative control)."""

    def __init__(self, vars, model=None, initial_point=None):
        self.vars = [model.rvs_to_values[v] for v in vars]

    def step(self, point):
        return point, []


def _held(make):
    model = _model()
    with model:
        ip = model.initial_point()
        ref = weakref.ref(ip["x"])
        step = make(model, ip)
    del ip
    gc.collect()
    return ref() is not None, step, model


def test_steps_drop_the_initial_point_and_still_pickle(monkeypatch):
    # a large block (small blocks' compiled functions keep their last inputs until the first
    # sweep, which replaces them)
    monkeypatch.setattr(da_chunks, "LARGE_BLOCK", 16)
    held, step, model = _held(lambda m, ip: DataAugmentation([m["x"]], initial_point=ip, rng=1))
    assert not held
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point = model.initial_point()
    a, _ = step.step(point)
    b, _ = clone.step(point)
    np.testing.assert_array_equal(a["x"], b["x"])
    held, step, model = _held(lambda m, ip: ConjugateGibbs([m["p"]], initial_point=ip))
    assert not held
    cloudpickle.loads(cloudpickle.dumps(step)).step(model.initial_point())


def test_control_a_plain_pymc_step_keeps_it():
    held, _, _ = _held(lambda m, ip: _PlainStep([m["x"]], model=m, initial_point=ip))
    assert held
