"""PyMC step methods over the pure kernels in :mod:`pymc_dp.kernels`.

``import pymc_dp`` calls :func:`register_step_methods` once, so that ``pm.sample`` picks these steps
by itself. Their ``competence`` follows one rule, :mod:`pymc_dp.step_methods.claims`: only the
records of an observed ``Release`` and conjugate parameters of those records are claimed, so
registering them never changes how a model without a Release is sampled. The exceptions are
:class:`~pymc_dp.step_methods.ffbs.FFBS`, which claims only variables of pymc_dp's own
:class:`~pymc_dp.distributions.MarkovChain` distribution (forward filtering, backward sampling),
and :class:`~pymc_dp.step_methods.noisy_size.NoisySizeGibbs`, which claims only the ``size``
variable that :meth:`pymc_dp.releases.NoisySizeRelease.model` marks (the latent number of
records).

``import pymc_dp`` also installs the :class:`~pymc_dp.step_methods.interweave.Interweave` hook:
PyMC has no registry for an extra move over variables that other steps own, so the move is
appended to the steps PyMC chose, for Normal records under DataAugmentation only
(``pm.sample(interweave=False)`` turns it off).
"""

from __future__ import annotations

from pymc.step_methods import STEP_METHODS

from pymc_dp.step_methods.collapsed import CollapsedRecords
from pymc_dp.step_methods.collapsed_bn import CollapsedNaiveBayes
from pymc_dp.step_methods.conjugate import CONJUGATE_STEPS, ConjugateGibbs
from pymc_dp.step_methods.count_augmentation import CountAugmentation
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.step_methods.ffbs import FFBS
from pymc_dp.step_methods.interweave import Interweave
from pymc_dp.step_methods.noisy_size import NoisySizeGibbs
from pymc_dp.step_methods.nuisance import nuisance_records  # noqa: F401  (registers the hook)
from pymc_dp.step_methods.poisson_factor import PoissonFactorGibbs

__all__ = [
    "CONJUGATE_STEPS",
    "FFBS",
    "CollapsedNaiveBayes",
    "CollapsedRecords",
    "ConjugateGibbs",
    "CountAugmentation",
    "DataAugmentation",
    "Interweave",
    "NoisySizeGibbs",
    "PoissonFactorGibbs",
    "register_step_methods",
]


def register_step_methods() -> None:
    """Put pymc_dp's steps at the front of ``pymc.step_methods.STEP_METHODS`` (idempotent).

    PyMC breaks competence ties in list order, so the steps go first: ``CollapsedNaiveBayes``
    must win over every other step for the records and tables of a naive-Bayes-network
    release it draws exactly, ``CollapsedRecords``
    must win over DataAugmentation and ConjugateGibbs for the records and parameters it
    collapses (it claims only those, and all others fall back to them), the data-augmentation step
    must win over PyMC's discrete Gibbs steps for the record variables it claims, and
    ``CountAugmentation`` over ``Metropolis`` for the Privatized true counts it claims,
    ``PoissonFactorGibbs`` over NUTS for the Gamma factors of their rates,
    ``FFBS`` over PyMC's discrete steps for MarkovChain states, and ``NoisySizeGibbs`` over
    Metropolis for the latent size of a ``NoisySizeRelease`` model.

    Examples
    --------
    ``import pymc_dp`` already calls it; a second call changes nothing.

    >>> import pymc as pm
    >>> from pymc_dp.step_methods import register_step_methods
    >>> register_step_methods()
    >>> [c.__name__ for c in pm.step_methods.STEP_METHODS[:4]]
    ['CollapsedNaiveBayes', 'CollapsedRecords', 'DataAugmentation', 'CountAugmentation']
    >>> n = len(pm.step_methods.STEP_METHODS)
    >>> register_step_methods()
    >>> len(pm.step_methods.STEP_METHODS) == n
    True
    """
    ours = [
        CollapsedNaiveBayes,
        CollapsedRecords,
        DataAugmentation,
        CountAugmentation,
        FFBS,
        PoissonFactorGibbs,
        NoisySizeGibbs,
        *CONJUGATE_STEPS,
    ]
    if STEP_METHODS[: len(ours)] == ours:
        return
    for cls in ours:  # moved to the front in this order, whatever moved them meanwhile
        while cls in STEP_METHODS:
            STEP_METHODS.remove(cls)
    STEP_METHODS[0:0] = ours
