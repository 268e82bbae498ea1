"""The sensitivity refusal points to ``Privatized`` when the "records" are released aggregates.

Regression test for the newcomer trial (benchmarks/results/newcomer_quickstart.md, friction 2):
Poisson counts per region, each released with its own geometric noise, written as a ``Release``
of the latent counts. A region count is not one person's record, so a change of one count
exceeds the declared sensitivity; the message used to advise only a larger sensitivity or
clipping, which would lead to a wrong model.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_dp.distributions.release import Release
from pymc_dp.distributions.sensitivity import _unchecked
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.data_augmentation import DataAugmentation

POP = np.array([2000, 5000, 12000, 30000, 50000])
Z = np.array([5, 9, 26, 58, 101])


def _run(model, var, sweeps=20):
    with model:
        step = DataAugmentation([model[var]], rng=7)
        point = model.initial_point()
        for _ in range(sweeps):
            point, _ = step.step(point)


def test_region_counts_as_records_suggest_privatized():
    with pm.Model() as model:
        rate = pm.Gamma("rate", np.float64(2.0), np.float64(1000.0))
        counts = pm.Poisson("counts", mu=rate * POP, shape=POP.size)
        Release("z", counts, Geometric(epsilon=0.5), observed=Z)
    with pytest.raises(ValueError, match="declared sensitivity") as err:
        _run(model, "counts")
    msg = str(err.value)
    assert "use pmdp.Privatized instead of Release" in msg
    assert "one true value plus its own noise" in msg
    assert "pt.clip" in msg  # the earlier advice is kept


def test_generic_path_message_has_the_hint_too():
    """A capped sum (not additive: the generic path) with 2 per record against sensitivity 1."""
    with pm.Model() as model:
        p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
        x = pm.Bernoulli("x", p=p, shape=8)
        with _unchecked():  # the sampled check is under test (Release's proof refuses it)
            Release(
                "z",
                2.0 * pt.minimum(x.sum(), 5),
                Laplace(epsilon=0.5, sensitivity=1.0),
                observed=3.0,
            )
    with pytest.raises(ValueError, match="declared sensitivity") as err:
        _run(model, "x")
    assert "pmdp.Privatized" in str(err.value)
