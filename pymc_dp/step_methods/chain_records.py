"""Records that form a chain: the error that points to the supported way (a hidden Markov model).

:class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation` imputes records that are
conditionally independent given the other variables. Records drawn from a process (a Markov chain,
a random walk, an autoregression) are not: each record's law reads the previous one. Such models
are refused, and the message says how to write them so that pymc_dp can sample them:

* discrete states that evolve as a chain: a hidden Markov model, the latent chain as
  :class:`~pymc_dp.distributions.markov_chain.MarkovChain` (``pm.sample`` gives it the
  forward-filtering backward-sampling step :class:`~pymc_dp.step_methods.ffbs.FFBS`) and the
  released records or counts of each step depending on that step's state only (Foulds et al. 2016,
  Sec. 5; :func:`pymc_dp.releases.hmm.release_hmm_counts` builds it for released counts);
* a continuous process: its independent innovations as the records, the statistic in terms of them.

Examples
--------
>>> import pymc as pm
>>> x = pm.GaussianRandomWalk.dist(sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=4)
>>> chain_kind(x)
'a random walk'
>>> chain_kind(pm.Normal.dist(0, 1, shape=5)) is None
True
"""

from __future__ import annotations

__all__ = ["CHAIN_ADVICE", "chain_kind", "chain_message", "is_shift_coupling"]

# op class names of PyMC's (and pymc-extras', and pymc_dp's) time-series laws
_CHAIN_OPS = {
    "RandomWalkRV": "a random walk",
    "AutoRegressiveRV": "an autoregressive process",
    "GARCH11RV": "a GARCH(1, 1) process",
    "EulerMaruyamaRV": "an Euler-Maruyama diffusion",
    "DiscreteMarkovChainRV": "a Markov chain",
    "MarkovChainRV": "a Markov chain",
}

# reasons of the structural analysis (row_locality) that a record's term reads a shifted record
_SHIFT_REASONS = ("slices the record axis", "concatenates along the record axis")

CHAIN_ADVICE = (
    "Records of a chain are not conditionally independent, so DataAugmentation cannot impute "
    "them one at a time. Restate the model as a hidden Markov model: put the chain in latent "
    "states, pymc_dp.MarkovChain(name, init_probs, transition, shape=(chains, steps)) (pm.sample "
    "samples each chain's states jointly with the FFBS step), and let each released record, or "
    "each step's released counts, depend on its own step's state only (Foulds et al. 2016, "
    "Sec. 5; pymc_dp.releases.hmm.release_hmm_counts(...).model(...) builds such a model for "
    "released per-step counts). For a continuous process (random walk, autoregression), make its "
    "independent innovations the records and write the released statistic in terms of them."
)


def chain_kind(rv) -> str | None:
    """What process ``rv`` is drawn from (``'a random walk'``, ``'a Markov chain'``, ...), or
    None when its law is not one of the known time-series laws."""
    owner = getattr(rv, "owner", None)
    if owner is None:
        return None
    return _CHAIN_OPS.get(type(owner.op).__name__)


def is_shift_coupling(reason: str) -> bool:
    """Whether a coupling ``reason`` of the structural analysis is a shift of the record axis
    (``x[1:]``, ``x[:-1]``, a concatenation): the pattern of a chain written by hand.

    Examples
    --------
    >>> is_shift_coupling("indexes or slices the record axis (e.g. x[::-1], x[1:], x[0])")
    True
    >>> is_shift_coupling("contracts over the record axis (a dot product)")
    False
    """
    return any(s in reason for s in _SHIFT_REASONS)


def chain_message(label: str, what: str) -> str:
    """The refusal for records [``label``] that form a chain; ``what`` says how they do.

    Examples
    --------
    >>> msg = chain_message("x", "'x' is drawn from a random walk")
    >>> msg.startswith("records [x] form a chain: 'x' is drawn from a random walk")
    True
    >>> "pymc_dp.MarkovChain" in msg
    True
    """
    return f"records [{label}] form a chain: {what}. " + CHAIN_ADVICE
