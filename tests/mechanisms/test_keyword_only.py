"""Mechanisms are built from keywords only; integer mechanisms take whole-number floats.

The sensitivity of ``Geometric`` and ``DiscreteGaussian`` may be a float holding a whole number.

Regression tests for the newcomer trial (benchmarks/results/newcomer_quickstart.md, frictions 3
and 4): ``Laplace(0.1)`` used to mean scale 0.1 (epsilon 10), not epsilon 0.1, and
``Geometric(epsilon=0.5, sensitivity=1.0)`` was refused.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

POSITIONAL = [
    (Laplace, (0.1,), {}, "Laplace(epsilon=...) or Laplace(scale=...)"),
    (Laplace, (2.0,), {"sensitivity": 1.0}, "Laplace(epsilon=...) or Laplace(scale=...)"),
    (Geometric, (0.5,), {}, "Geometric(epsilon=...) or Geometric(alpha=...)"),
    (Gaussian, (2.0,), {}, "Gaussian(epsilon=..., delta=...), Gaussian(rho=...) or Gaussian(sigma"),
    (DiscreteGaussian, (2.0,), {}, "DiscreteGaussian(rho=...) or DiscreteGaussian(sigma=...)"),
]


@pytest.mark.parametrize(("cls", "args", "kwargs", "names"), POSITIONAL)
def test_positional_call_is_refused_naming_the_keywords(cls, args, kwargs, names):
    with pytest.raises(TypeError, match="takes keyword arguments only") as err:
        cls(*args, **kwargs)
    assert names in str(err.value)


def test_subclass_is_keyword_only_too():
    class MyLaplace(Laplace):
        pass

    with pytest.raises(TypeError, match=r"MyLaplace\(epsilon=\.\.\.\) or MyLaplace\(scale="):
        MyLaplace(1.0)
    assert MyLaplace(scale=1.0).scale == 1.0


@pytest.mark.parametrize(
    ("m", "core"),
    [
        (Laplace(scale=0.1), ("scale", 0.1)),
        (Laplace(epsilon=0.1), ("scale", 10.0)),
        (Geometric(alpha=0.5), ("alpha", 0.5)),
        (Gaussian(sigma=2.0), ("sigma", 2.0)),
        (DiscreteGaussian(sigma=2.0), ("sigma", 2.0)),
    ],
)
def test_keyword_calls_build_and_copy(m, core):
    """The keyword forms still build; pickling and deepcopy (``__new__`` without arguments)
    still work and keep the ``privacy_declared`` flag."""
    assert abs(getattr(m, core[0]) / core[1] - 1.0) <= 1e-12  # alpha is rounded to a rational
    for clone in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert clone == m
        assert clone.privacy_declared == m.privacy_declared


@pytest.mark.parametrize("sens", [1.0, 2.0, np.float64(3.0), np.float32(4.0)])
def test_integer_mechanisms_take_whole_number_floats(sens):
    g = Geometric(epsilon=0.5, sensitivity=sens)
    assert g == Geometric(epsilon=0.5, sensitivity=int(sens))
    assert type(g.sensitivity) is int and g.sensitivity == int(sens)
    d = DiscreteGaussian(sigma=2.0, sensitivity=sens)
    assert d == DiscreteGaussian(sigma=2.0, sensitivity=int(sens))
    assert type(d.sensitivity) is int


@pytest.mark.parametrize(
    ("sens", "error"),
    [
        (1.5, TypeError),
        (2.0000000001, TypeError),
        (np.nan, TypeError),
        (np.inf, TypeError),
        (0.0, ValueError),
        (-1.0, ValueError),
    ],
)
def test_integer_mechanisms_refuse_other_floats(sens, error):
    """TypeError for a fractional value (as before: a caller may round it up on TypeError),
    ValueError for a whole number below 1."""
    for build in (
        lambda: Geometric(epsilon=0.5, sensitivity=sens),
        lambda: DiscreteGaussian(sigma=2.0, sensitivity=sens),
    ):
        with pytest.raises(error, match="sensitivity"):
            build()


def test_integer_mechanisms_refuse_non_numbers_and_bools():
    for sens in ("1", True, np.bool_(True), None, [1]):
        with pytest.raises(TypeError, match="sensitivity"):
            Geometric(epsilon=0.5, sensitivity=sens)


def test_own_mechanism_keeps_its_signature():
    """A direct subclass of Mechanism that does not set ``keyword_forms`` is not forced to
    keywords (its ``__init__`` defines its signature)."""

    class Scaled(Laplace):
        keyword_forms = ()

        def __init__(self, b):
            super().__init__(scale=b)

    assert Scaled(2.0).scale == 2.0
    assert Mechanism.keyword_forms == ()
