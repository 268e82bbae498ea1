r"""Exact Gibbs step that collapses exchangeable records into their released statistic.

When ``N`` records are exchangeable given their parameters and the release is an affine function
of their sum or category counts (:mod:`pymc_dp.step_methods.collapse_plan` says exactly when),
the records never need to be visited one by one. Each iteration of :class:`CollapsedRecords`:

1. draws the statistic from its exact full conditional given the parameters and the release,
   ``pi(S) ∝ f_N(S | theta) * eta(z - C - M S)`` with ``f_N`` the sum's law (Binomial,
   Multinomial, Poisson, Normal). The conditional is log-concave, so a window around its mode
   holds all but a proven ``1e-14`` of its mass and is sampled by inverse CDF
   (:func:`pymc_dp.kernels.collapsed_stat.count_sampler`); Multinomial counts take exact pair
   moves (:func:`~pymc_dp.kernels.collapsed_stat.counts_gibbs_sampler`), Normal sums a closed
   form (:func:`~pymc_dp.kernels.collapsed_stat.sample_normal_sum`). Cost: ``O(log N + window)``.
2. moves the records to a draw of ``x | S`` (a law free of the parameters) by changing only as
   many records as the statistic changed, plus a few random exchanges that keep the records'
   chain ergodic (:mod:`pymc_dp.kernels.allocation`); Normal records are shifted, ``O(N)``
   vectorised. The records in the point are therefore always a valid draw: other steps and
   Deterministics that read them stay exact.
3. draws every claimed conjugate parameter (``Beta``, ``Dirichlet``, ``Gamma``, ``Normal`` mean)
   from its full conditional given the statistic: the sufficient statistics of ``N`` records are
   those of the counts, computed in ``O(K)`` with the same pair table as
   :class:`~pymc_dp.step_methods.ConjugateGibbs`.

This is the data-augmentation sampler of Ju, Awan, Gong & Rao (2022) with the records integrated
into their statistic, which is exact here because the statistic is sufficient for the records'
contribution to the release. Parameters that are not conjugate (a logit-linked ``p``) keep their
own step (NUTS), which reads the records in the point (valid draws, ``O(N)`` per evaluation).

``pm.sample`` assigns this step by itself (``competence``), before
:class:`~pymc_dp.step_methods.DataAugmentation`, and only to records for which
:func:`~pymc_dp.step_methods.collapse_plan.collapse_plan` holds and to conjugate parents of such
records; everything else falls back to DataAugmentation and ConjugateGibbs.

Sampler statistic: ``collapsed_window``, the summed window width of the statistic draws.

Examples
--------
>>> import numpy as np, pymc as pm, pymc_dp as pmdp
>>> from pymc_dp.step_methods.collapsed import CollapsedRecords
>>> with pm.Model() as model:
...     p = pm.Beta("p", np.float64(10.0), np.float64(10.0))
...     x = pm.Bernoulli("x", p, shape=100_000)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=0.1), observed=31_000.0)
...     step = CollapsedRecords([x, p], rng=1)
>>> point, [stats] = step.step(model.initial_point())
>>> abs(int(point["x"].sum()) - 31_000) < 200, stats["collapsed_window"] > 0
(True, True)
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.step_methods.claims import claim_model, release_records
from pymc_dp.step_methods.collapse_plan import claimable_records, collapse_plan
from pymc_dp.step_methods.collapsed_block import CollapsedBlock, collapsed_updater, simple_plan

__all__ = ["CollapsedRecords"]


class CollapsedRecords(ForgetsInitialPoint, BlockedStep):
    """Gibbs step over the statistic of exchangeable records and their conjugate parameters.

    Parameters
    ----------
    vars : list
        Collapsible record variables (:func:`~pymc_dp.step_methods.collapse_plan.collapse_plan`)
        and, optionally, conjugate parameters of records (``Beta`` / ``Dirichlet`` / ``Gamma`` /
        ``Normal`` priors, as :class:`~pymc_dp.step_methods.ConjugateGibbs` takes them). A
        variable that is neither is a ``ValueError`` naming it.
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample``.
    initial_point, compile_kwargs, blocked
        Accepted for PyMC's step assignment; ``compile_kwargs`` is passed to the compiled
        parameter functions.
    refresh : int, default 16
        Random exchanges of records per iteration (they keep ``x | S`` and make the records'
        own chain ergodic when the statistic rarely changes).

    Raises
    ------
    ValueError
        For a record variable that cannot be collapsed, a parameter without a conjugate
        structure, or a release that declares a sensitivity smaller than one record's change.

    Examples
    --------
    Categorical records, a Dirichlet on their weights, the table of counts released with
    two-sided geometric noise:

    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.step_methods.collapsed import CollapsedRecords
    >>> with pm.Model() as model:
    ...     w = pm.Dirichlet("w", np.ones(3))
    ...     x = pm.Categorical("x", w, shape=600)
    ...     table = pm.math.stack([pm.math.eq(x, k).sum() for k in range(3)])
    ...     _ = pmdp.Release("t", table, pmdp.Geometric(epsilon=1.0, sensitivity=2),
    ...                      observed=np.array([300, 200, 100]))
    ...     step = CollapsedRecords([x, w], rng=2)
    >>> point, _ = step.step(model.initial_point())
    >>> int(np.bincount(point["x"], minlength=3).sum())
    600
    """

    name = "collapsed_records"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {"collapsed_window": (np.int64, [])}

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        refresh=16,
    ):
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        if int(refresh) < 0:
            raise ValueError(f"refresh must be a non-negative integer, got {refresh!r}")
        ck = dict(compile_kwargs or {})
        input_names = [v.name for v in model.value_vars]
        rvs = [model.values_to_rvs[v] for v in self.vars]
        self._blocks, params = [], []
        for rv in rvs:
            plan = collapse_plan(model, rv)
            if plan is not None:
                self._blocks.append(CollapsedBlock(plan, model, input_names, ck, int(refresh)))
            else:
                params.append(rv)
        by_rv = {b.plan.rv: b for b in self._blocks}
        for b in self._blocks:
            b.link(by_rv)
        self._updaters = [collapsed_updater(rv, model, ck, by_rv) for rv in params]
        # blocks whose only conjugate parameter integrates out: joint draws
        joint = {id(u.sole_block): u for u in self._updaters if u.sole_block is not None}
        self._joint = [joint.get(id(b)) for b in self._blocks]
        self._input_names = input_names

    def setup_chain(self, rng, tune, draws):
        """Set the per-chain generator; the records' index structures are rebuilt from the
        chain's first point."""
        super().setup_chain(rng, tune, draws)
        for b in self._blocks:
            b.forget()

    def step(self, point):
        """Statistics (and records) of every block given the parameters, then the claimed
        parameters given the statistics; the incoming point's arrays are not written to."""
        new_point = dict(point)
        width = 0
        # the parameters' inputs are read from ``point``: the records a block redraws are
        # read by no parameter
        for b in self._blocks:
            b.prepare(point, new_point[b.plan.name])
        for b, joint in zip(self._blocks, self._joint, strict=True):
            prior = None if joint is None else joint.prior(new_point)
            new_point[b.plan.name], w = b.draw(point, new_point[b.plan.name], self.rng, prior)
            width += w
        for u in self._updaters:
            new_point.update(u.update(new_point, self.rng))
        return new_point, [{"collapsed_window": int(width)}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for collapsible records of an observed Release and for conjugate parameters
        with such records among their children (pymc_dp's claim rule), else INCOMPATIBLE."""
        if claimable_records(var) is not None:
            return Competence.IDEAL
        model = claim_model(var)
        if model is None:
            return Competence.INCOMPATIBLE
        plan = simple_plan(var, model)
        if plan is None:
            return Competence.INCOMPATIBLE
        records = release_records(model)
        for c in plan.children:
            if c.index is None and c.rv in records and collapse_plan(model, c.rv) is not None:
                return Competence.IDEAL
        return Competence.INCOMPATIBLE
