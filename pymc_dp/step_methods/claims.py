"""The one rule by which pymc_dp's steps claim variables in ``pm.sample``'s step assignment.

Importing pymc_dp registers :class:`~pymc_dp.step_methods.DataAugmentation` and
:class:`~pymc_dp.step_methods.ConjugateGibbs` with PyMC. Their ``competence`` must never change
how a model without a release is sampled, whatever pymc_dp distributions it uses (``Skellam``,
``Privatized``, ...). The rule, used by every pymc_dp step:

1. Only a model holding an **observed** :class:`~pymc_dp.distributions.release.Release` is
   concerned; in any other model no pymc_dp step claims anything.
2. The *records* of such a model (:func:`release_records`) are the free variables that appear
   in the statistic of an observed Release (directly, not through another random variable),
   and, transitively, their free children with the same leading record length (latent parts
   of a record that do not enter the statistic). ``DataAugmentation`` claims exactly these.
3. A free *parameter* may be claimed (by ``ConjugateGibbs``, when its structure is conjugate)
   only if one of its children is a record (:func:`parameter_claimable`).
4. Separately, :class:`~pymc_dp.step_methods.count_augmentation.CountAugmentation` claims the
   latent true counts of ``Privatized(name, pm.Poisson.dist(mu), Geometric(...),
   marginalize=False)`` (:func:`privatized_true_counts`): the free Poisson variable
   ``f"{name}_true"`` read directly by the observed Privatized node, with a Geometric mechanism,
   and read by no other random variable or Potential of the model (so that its conditional is
   exactly ``P(y | z, mu)``). Nothing else is claimed by that step.
5. :class:`~pymc_dp.step_methods.poisson_factor.PoissonFactorGibbs` claims such a true count
   together with the Gamma factors ``theta`` ``(D, K)`` and ``phi`` ``(K, V)`` of its rate when
   that rate is exactly ``theta @ phi`` (:func:`poisson_factorizations`): both factors free
   Gamma variables with fixed (data or constant) prior parameters, read by no random variable
   or Potential but the true count, so that their conditional given the counts is the
   Gamma-Poisson factorization's. (CountAugmentation then leaves that count to it.)
   An observed (non-private) Poisson count matrix qualifies for the step when it is given
   explicitly, never by step assignment (rule 1).
6. :class:`~pymc_dp.step_methods.noisy_size.NoisySizeGibbs` claims the latent number of
   records ``size`` of a model built by :meth:`pymc_dp.releases.NoisySizeRelease.model` (marked
   there), when both releases use a built-in noise family and nothing but those two releases
   reads ``size`` (so that its conditional is exactly the one the step draws from).

Being a pymc_dp distribution, or feeding one, is not a reason to claim a variable: only a
Release is, recognised by its Op class (:class:`~pymc_dp.distributions.release.ReleaseRV`),
never by a module or class name.

This module also holds the step-assignment state: the models that hold a Release (weakly
referenced), so that a step finds the model of a variable when ``pm.sample(model=m)`` runs
outside ``with m:`` (:func:`model_of`). :class:`~pymc_dp.distributions.release.Release`
announces its model through :func:`~pymc_dp.distributions.release.on_release_registered`.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> with pm.Model() as plain:
...     lam = pm.Gamma("lam", 2.0, 1.0)
...     x = pm.Poisson("x", lam, shape=5)
...     _ = pmdp.Skellam("obs", x + 1, 1, observed=np.zeros(5, dtype="int64"))
>>> release_records(plain)
set()
>>> with pm.Model() as released:
...     p = pm.Beta("p", 1.0, 1.0)
...     y = pm.Bernoulli("y", p, shape=5)
...     _ = pmdp.Release("z", y.sum(), pmdp.Laplace(epsilon=1.0), observed=2.0)
>>> [v.name for v in release_records(released)], parameter_claimable([y], released)
(['y'], True)
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import pymc as pm
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.math import Dot
from pytensor.tensor.random.basic import GammaRV, PoissonRV
from pytensor.tensor.sharedvar import TensorSharedVariable

from pymc_dp.distributions.privatized import PrivatizedRV
from pymc_dp.distributions.release import (
    is_random_variable,
    is_release,
    on_release_registered,
    record_parents,
)
from pymc_dp.mechanisms.geometric import Geometric

__all__ = [
    "Factorization",
    "claim_model",
    "direct_rv_parents",
    "factorization_of",
    "model_of",
    "observed_releases",
    "parameter_claimable",
    "poisson_factorizations",
    "privatized_true_counts",
    "release_records",
]

# Models announced by a Release or a non-marginalized Privatized node (weak references: the
# registry never keeps a model alive).
_RELEASE_MODELS: weakref.WeakSet = weakref.WeakSet()
on_release_registered(_RELEASE_MODELS.add)


def model_of(var):
    """The model in context if ``var`` is one of its free variables, else an announced model
    (holding a Release or a non-marginalized Privatized node) that has ``var`` among its free
    variables, else None."""
    try:
        model = pm.Model.get_context(error_if_none=False)
    except Exception:  # e.g. BlockModelAccessError inside a distribution's dist()
        model = None
    if model is not None and var in model.free_RVs:
        return model
    for candidate in list(_RELEASE_MODELS):
        if var in candidate.free_RVs:
            return candidate
    return None


def observed_releases(model) -> list:
    """The observed :class:`Release` variables of ``model``."""
    return [rv for rv in model.observed_RVs if is_release(rv)]


def direct_rv_parents(var, rv_set) -> set:
    """Random variables in ``rv_set`` that ``var`` depends on without passing through another.

    ``var`` is a random variable (its parents are searched from its inputs) or any graph (a
    Potential, a statistic: searched from ``var`` itself).

    Examples
    --------
    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     a = pm.Normal("a")
    ...     b = pm.Normal("b", a)
    ...     c = pm.Normal("c", 2 * b)
    >>> [v.name for v in direct_rv_parents(c, set(m.basic_RVs))]
    ['b']
    """
    start = list(var.owner.inputs) if is_random_variable(var) else [var]
    out, stack, seen = set(), start, set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in rv_set:
            out.add(v)
            continue
        if v.owner is not None:
            stack.extend(v.owner.inputs)
    return out


def release_records(model) -> set:
    """The records of ``model`` (rule 2 of the module docstring): what DataAugmentation claims.

    Parameters
    ----------
    model : pm.Model

    Returns
    -------
    set of TensorVariable
        Free random variables; empty when the model holds no observed Release.
    """
    free = set(model.free_RVs)
    records = set()
    for rel in observed_releases(model):
        records.update(v for v in record_parents(rel.owner.inputs[0]) if v in free)
    if not records:
        return records
    rv_set = set(model.basic_RVs)
    lengths = {rv: rv.type.shape[0] if rv.type.ndim else None for rv in free}
    changed = True
    while changed:
        changed = False
        for rv in free - records:
            parents = direct_rv_parents(rv, rv_set) & records
            if any(lengths[rv] is not None and lengths[rv] == lengths[p] for p in parents):
                records.add(rv)
                changed = True
    return records


def parameter_claimable(children, model) -> bool:
    """Rule 3: whether a parameter with these children may be claimed (a child is a record)."""
    records = release_records(model)
    return any(c in records for c in children)


def claim_model(var):
    """The model a pymc_dp step should judge ``var`` in (rule 1), or None.

    The model in context if ``var`` is one of its free variables, else a model holding a
    Release that has ``var`` among its free variables; None when that model holds no observed
    Release (then no pymc_dp step claims ``var``).
    """
    model = model_of(var)
    if model is None or not observed_releases(model):
        return None
    return model


def _poisson_true_count(obs):
    """The free Poisson true count ``y`` of an observed ``Privatized(DiracDelta(y), Geometric)``
    node, else None."""
    op = obs.owner.op if obs.owner is not None else None
    if not (isinstance(op, PrivatizedRV) and isinstance(op.mechanism, Geometric)):
        return None
    base = obs.owner.inputs[0]
    if base.owner is None or not isinstance(base.owner.op, pm.DiracDelta.rv_type):
        return None
    true = base.owner.inputs[-1]
    if true.owner is None or not isinstance(true.owner.op, PoissonRV):
        return None
    return true


def privatized_true_counts(model) -> dict:
    """Rule 4: the latent true counts that ``CountAugmentation`` claims, with their node.

    Parameters
    ----------
    model : pm.Model

    Returns
    -------
    dict
        ``{true-count free variable: observed Privatized variable}``; a true count read by any
        other random variable or Potential of the model (a second likelihood term) is left out.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.5))
    ...     _ = pmdp.Privatized("z", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=1.0),
    ...                         marginalize=False, observed=np.array([3, -1]))
    >>> [(k.name, v.name) for k, v in privatized_true_counts(m).items()]
    [('z_true', 'z')]
    """
    free = set(model.free_RVs)
    found = {}
    for obs in model.observed_RVs:
        true = _poisson_true_count(obs)
        if true is not None and true in free:
            found[true] = obs
    if not found:
        return found
    for term in [*model.basic_RVs, *model.potentials]:
        read = set(ancestors(term.owner.inputs if term.owner is not None else [term]))
        for true in [t for t in found if t is not term and t in read]:
            if found[true] is not term:
                del found[true]
    return found


class Factorization(NamedTuple):
    """A Poisson count matrix ``counts ~ Poisson(theta @ phi)`` with Gamma factors (rule 5)."""

    counts: object
    theta: object
    phi: object


def _matmul_operands(rate):
    """``(a, b)`` when ``rate`` is ``a @ b`` (``pt.matmul``, ``@`` or ``pt.dot``), else None."""
    node = rate.owner
    if node is None:
        return None
    op = node.op
    if isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot)):
        a, b = node.inputs
        return a, b
    return None


def _fixed(expr) -> bool:
    """Whether ``expr`` reads only constants and data (no random or value variable)."""
    graph = list(ancestors([expr]))
    roots_ok = all(
        v.owner is not None or isinstance(v, Constant | TensorSharedVariable) for v in graph
    )
    return roots_ok and not any(is_random_variable(v) for v in graph)


def _gamma_factor(var, model) -> bool:
    if var not in model.free_RVs or var.owner is None or not isinstance(var.owner.op, GammaRV):
        return False
    if var.type.ndim != 2 or any(s is None for s in var.type.shape):
        return False
    transform = model.rvs_to_transforms.get(var)
    if transform is not None and type(transform).__name__ != "LogTransform":
        return False
    return all(_fixed(p) for p in var.owner.op.dist_params(var.owner))


def _readers(var, model) -> list:
    """The random variables and Potentials of ``model`` that read ``var`` directly."""
    rv_set = set(model.basic_RVs)
    out = [t for t in model.basic_RVs if t is not var and var in direct_rv_parents(t, rv_set)]
    out += [p for p in model.potentials if var in ancestors([p])]
    return out


def factorization_of(counts, model):
    """The :class:`Factorization` of a Poisson variable of ``model`` (free or observed) whose rate
    is ``theta @ phi`` with Gamma factors read by nothing else, else None (rule 5)."""
    if counts.owner is None or not isinstance(counts.owner.op, PoissonRV):
        return None
    (rate,) = counts.owner.op.dist_params(counts.owner)
    operands = _matmul_operands(rate)
    if operands is None:
        return None
    theta, phi = operands
    if theta is phi or counts.type.ndim != 2:
        return None
    if not (_gamma_factor(theta, model) and _gamma_factor(phi, model)):
        return None
    d, k = theta.type.shape
    k2, v = phi.type.shape
    if k != k2 or tuple(counts.type.shape) not in ((d, v), (None, None), (d, None), (None, v)):
        return None
    for factor in (theta, phi):
        if _readers(factor, model) != [counts]:
            return None
    return Factorization(counts, theta, phi)


def poisson_factorizations(model) -> dict:
    """Rule 5: the Gamma factors that ``PoissonFactorGibbs`` claims, with their factorization.

    Parameters
    ----------
    model : pm.Model

    Returns
    -------
    dict
        ``{free variable: Factorization}`` for every rule-4 true count
        (:func:`privatized_true_counts`) distributed as ``Poisson(theta @ phi)`` and for its
        factors ``theta``, ``phi``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     theta = pm.Gamma("theta", np.float64(0.1), np.float64(1.0), shape=(3, 2))
    ...     phi = pm.Gamma("phi", np.float64(0.1), np.float64(1.0), shape=(2, 4))
    ...     _ = pmdp.Privatized("z", pm.Poisson.dist(theta @ phi), pmdp.Geometric(epsilon=1.0),
    ...                         marginalize=False, observed=np.zeros((3, 4), dtype=int))
    >>> sorted(v.name for v in poisson_factorizations(m))
    ['phi', 'theta', 'z_true']
    """
    found = {}
    for true in privatized_true_counts(model):
        fac = factorization_of(true, model)
        if fac is not None:
            found[fac.counts] = fac
            found[fac.theta] = fac
            found[fac.phi] = fac
    return found
