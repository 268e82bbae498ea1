"""Latent records are nuisance variables: a model holding a Release does not store them by default.

A model with ``N`` latent records behind a :class:`~pymc_dp.distributions.release.Release` used to
store every record of every draw (int64) and have PyMC compute a rank-normalised R-hat and ESS for
each of them after sampling: at ``2 x 10^4`` records, 58 of the 68 s of a plain ``pm.sample()``
(issue 14). The records are nuisance variables: what an analyst reads is the parameters.

PyMC's trace backends store, when ``pm.sample`` is not given ``var_names``, the model's
``unobserved_value_vars`` (``NDArray``, ``ZarrTrace`` and ``mcbackend`` all read that property, and
only trace backends and ``find_MAP`` do). So a model holding an observed Release declares its
records as nuisance there: when the Release is registered, the model's class becomes a subclass
of its own class whose ``unobserved_value_vars`` leaves out the records
(:func:`~pymc_dp.step_methods.claims.release_records`: the variables the data-augmentation and
collapsed steps claim). Everything else is unchanged: the records are still free variables,
sampled by their steps; PyMC's convergence checks see only what is stored.

Asking for the records is PyMC's own way: ``pm.sample(var_names=["p", "x"])`` stores them (and
PyMC's convergence checks then read each release's statistic computed from them instead of every
record: :mod:`pymc_dp.diagnostics`), in the smallest integer dtype that holds
their support (``int8`` for Bernoulli records and categorical records of up to 127 categories,
instead of PyMC's ``int64``): ``pm.sample`` looks the named variables up in
``model.unobserved_RVs``, where such a model lists ``x`` as ``cast(x, "int8")`` under the same
name. Without them, ``pm.sample_posterior_predictive`` draws fresh records given the parameters
(the predictive of a release of new records).

Examples
--------
>>> import numpy as np, pymc as pm, pymc_dp as pmdp
>>> with pm.Model() as m:
...     p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
...     x = pm.Bernoulli("x", p, shape=20)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=np.float64(7.0))
>>> [v.name for v in m.unobserved_value_vars]
['p_logodds__', 'p']
>>> isinstance(m, pm.Model), sorted(nuisance_records(m))
(True, ['x'])
"""

from __future__ import annotations

import types

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_dp.distributions.release import on_release_registered
from pymc_dp.step_methods.claims import observed_releases, release_records

__all__ = ["ReleaseModel", "nuisance_records", "storage_dtype"]


def nuisance_records(model) -> set:
    """Names of the latent record variables ``model`` does not store by default."""
    if not observed_releases(model):
        return set()
    return {rv.name for rv in release_records(model)}


def storage_dtype(rv) -> str:
    """The smallest integer dtype holding the support of record variable ``rv`` (its own dtype
    when that is not known to be smaller: continuous records, Poisson counts)."""
    op = getattr(rv.owner, "op", None)
    if isinstance(op, BernoulliRV):
        return "int8"
    if isinstance(op, CategoricalRV):
        k = op.dist_params(rv.owner)[0].type.shape[-1]
        if k is not None:
            for dt in ("int8", "int16", "int32"):
                if k - 1 <= np.iinfo(dt).max:
                    return dt
    return rv.dtype


class _NuisanceRecords:
    """Mixin: ``unobserved_value_vars`` without the latent records of observed Releases, and
    the records in ``unobserved_RVs`` in their smallest dtype."""

    @property
    def unobserved_RVs(self):
        listed = super().unobserved_RVs
        hidden = nuisance_records(self)
        out = []
        for v in listed:
            dt = storage_dtype(v) if v.name in hidden else v.dtype
            if dt != v.dtype:
                small = pt.cast(v, dt)
                small.name = v.name
                v = small
            out.append(v)
        return out

    @property
    def unobserved_value_vars(self):
        stored = super().unobserved_value_vars
        hidden = nuisance_records(self)
        if not hidden:
            return stored
        hidden_values = {self.rvs_to_values[self[name]] for name in hidden}
        return [v for v in stored if v not in hidden_values]


class ReleaseModel(_NuisanceRecords, pm.Model):
    """The class a plain ``pm.Model`` takes when a Release is registered in it."""


_SUBCLASSES: dict = {pm.Model: ReleaseModel}


def _subclass_for(cls):
    """The nuisance-declaring subclass of a model class (built once, module-level so that
    models pickle by reference)."""
    if issubclass(cls, _NuisanceRecords):
        return cls
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        name = f"{cls.__name__}WithReleases"
        sub = types.new_class(name, (_NuisanceRecords, cls))
        sub.__module__ = __name__
        sub.__qualname__ = name
        globals()[name] = sub
        _SUBCLASSES[cls] = sub
    return sub


def declare_nuisance(model) -> None:
    """Give ``model`` the nuisance-declaring class (idempotent; called when a Release is
    registered in it)."""
    sub = _subclass_for(type(model))
    if type(model) is not sub:
        model.__class__ = sub


on_release_registered(declare_nuisance)
