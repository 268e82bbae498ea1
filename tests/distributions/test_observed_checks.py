"""Releases that cannot have come from the declared mechanism are refused when the model is built.

PyMC would otherwise cast a fractional value observed on an integer variable (3.5 -> 3) and turn a
NaN into a missing value to impute; an integer mechanism on a continuous statistic would reject
every proposal of the data-augmentation step and leave the chain stuck. Each case must raise an
error naming the argument, and the valid neighbouring cases must still build.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp


def test_release_integer_mechanism_needs_integer_statistic():
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0, shape=10)
        with pytest.raises(TypeError, match="statistic has dtype float64"):
            pmdp.Release("z", x.sum(), pmdp.Geometric(epsilon=1.0), observed=7)
        pmdp.Release("z_ok", x.sum(), pmdp.Laplace(epsilon=1.0), observed=7.5)


@pytest.mark.parametrize("bad", [3.5, -0.5, 3.99])
def test_release_integer_mechanism_needs_integer_observed(bad):
    with pm.Model():
        x = pm.Bernoulli("x", 0.3, shape=10)
        with pytest.raises(ValueError, match="observed must hold integers"):
            pmdp.Release("z", x.sum(), pmdp.Geometric(epsilon=1.0), observed=bad)
        pmdp.Release("z_ok", x.sum(), pmdp.Geometric(epsilon=1.0), observed=3.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, [1.0, np.nan]])
def test_release_refuses_missing_values(bad):
    with pm.Model():
        x = pm.Normal("x", 0.0, 1.0, shape=(10, 2))
        with pytest.raises(ValueError, match="NaN or infinite"):
            stat = x.sum(0) if np.ndim(bad) else x.sum()
            pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0), observed=bad)


def test_privatized_integer_mechanism_needs_integer_base():
    with pm.Model():
        mu = pm.Normal("mu")
        for marginalize in (True, False):
            with pytest.raises(TypeError, match="dist has dtype float64"):
                pmdp.Privatized(
                    f"y{marginalize}",
                    pm.Normal.dist(mu, 1.0),
                    pmdp.Geometric(epsilon=1.0),
                    observed=[1, 2],
                    marginalize=marginalize,
                )


def test_privatized_integer_release_needs_integer_observed():
    with pm.Model():
        with pytest.raises(ValueError, match="observed must hold integers"):
            pmdp.Privatized(
                "y", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=1.0), observed=[1.5, 2]
            )
        data = pm.Data("d", np.array([1.5, 2.0]))
        with pytest.raises(ValueError, match="observed must hold integers"):
            pmdp.Privatized(
                "y_data", pm.Poisson.dist(2.0), pmdp.Geometric(epsilon=1.0), observed=data
            )
        with pytest.raises(ValueError, match="NaN or infinite"):
            pmdp.Privatized(
                "y_nan", pm.Poisson.dist(2.0), pmdp.Laplace(epsilon=1.0), observed=[1.5, np.nan]
            )
        # a continuous mechanism on counts releases real numbers
        pmdp.Privatized(
            "y_ok", pm.Poisson.dist(2.0), pmdp.Laplace(epsilon=1.0), observed=[1.5, 2.2]
        )
