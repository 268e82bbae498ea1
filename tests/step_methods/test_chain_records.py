"""Records that form a chain are refused with a message that points to the hidden Markov model
(issue 10 item 6); models whose records are not a chain keep their own messages."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp as pmdp
from pymc_dp.step_methods import DataAugmentation

LAP = pmdp.Laplace(epsilon=1.0, sensitivity=6.0)


def _refusal(build) -> str:
    with pm.Model():
        x = build()
        with pytest.raises(ValueError) as err:
            DataAugmentation(x if isinstance(x, list) else [x])
    return str(err.value)


def _grw():
    x = pm.GaussianRandomWalk("x", sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=9)
    pmdp.Release("z", pt.clip(x, -3, 3).sum(), LAP, observed=2.0)
    return x


def _ar():
    x = pm.AR("x", rho=[0.5], sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=9)
    pmdp.Release("z", pt.clip(x, -3, 3).sum(), LAP, observed=2.0)
    return x


def _markov_chain():
    s = pmdp.MarkovChain("s", np.full(2, 0.5), np.array([[0.9, 0.1], [0.2, 0.8]]), shape=(12,))
    pmdp.Release("z", pt.eq(s, 1).sum(), pmdp.Laplace(epsilon=1.0), observed=5.0)
    return s


@pytest.mark.parametrize(
    "build, kind",
    [
        (_grw, "a random walk"),
        (_ar, "an autoregressive process"),
        (_markov_chain, "a Markov chain"),
    ],
)
def test_chain_records_point_to_the_hmm(build, kind):
    msg = _refusal(build)
    assert "form a chain" in msg and kind in msg
    assert "pymc_dp.MarkovChain" in msg and "FFBS" in msg and "release_hmm_counts" in msg
    assert "record axis" not in msg


def test_hand_written_chain_points_to_the_hmm():
    """A record's law reads the previous record of another record variable of the block
    (y[:-1])."""

    def build():
        y = pm.Bernoulli("y", p=0.5, shape=6)
        prev = pt.concatenate([pt.zeros((1,), "int64"), y[:-1]])
        x = pm.Bernoulli("x", p=pt.switch(pt.eq(prev, 1), 0.9, 0.1), shape=6)
        pmdp.Release("z", (x + y).sum(), pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=4.0)
        return [x, y]

    msg = _refusal(build)
    assert "If the records form a chain" in msg and "pymc_dp.MarkovChain" in msg


def test_joint_law_that_is_not_a_chain_keeps_its_message():
    """Control: an MvNormal over the records is not a chain; no HMM advice."""

    def build():
        x = pm.MvNormal("x", mu=np.zeros(5), cov=np.eye(5) + 0.5)
        pmdp.Release("z", pt.clip(x, -3, 3).sum(), LAP, observed=2.0)
        return x

    msg = _refusal(build)
    assert "form a chain" not in msg and "one joint term" in msg


def test_chains_as_records_are_accepted():
    """Control: one whole chain per record (shape (records, steps)) is a valid record block."""
    with pm.Model():
        s = pmdp.MarkovChain("s", np.full(2, 0.5), np.array([[0.9, 0.1], [0.2, 0.8]]), shape=(5, 4))
        pmdp.Release("z", pt.eq(s, 1).sum(), pmdp.Laplace(epsilon=1.0, sensitivity=4.0),
                     observed=9.0)  # fmt: skip
        DataAugmentation([s])
