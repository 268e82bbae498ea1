"""One collapsed record block, and conjugate updates that read its statistic.

The adapter layer of :class:`~pymc_dp.step_methods.collapsed.CollapsedRecords`:
:class:`CollapsedBlock` draws the statistic of one record variable
(:mod:`pymc_dp.kernels.collapsed_stat`) and keeps the records a draw given it
(:mod:`pymc_dp.kernels.allocation`); :func:`collapsed_updater` builds the conjugate update of a
parameter whose collapsed children contribute their sufficient statistics in ``O(K)``.
"""

from __future__ import annotations

import numpy as np
from pytensor.tensor.random.basic import BernoulliRV

from pymc_dp.kernels.allocation import (
    CategoricalAllocation,
    NormalAllocation,
    PoissonAllocation,
    RngWords,
)
from pymc_dp.kernels.collapsed_stat import (
    counts_gibbs_sampler,
    marginal_count_sampler,
    marginal_counts_gibbs_sampler,
    sample_normal_sum,
)
from pymc_dp.kernels.conjugate import _ONE_MINUS, _TINY
from pymc_dp.step_methods.conjugate import _PRIOR_OPS, _analyze, _expanded_shape, _Updater
from pymc_dp.step_methods.conjugate_pairs import Cells, NotConjugateError
from pymc_dp.step_methods.da_checks import PRIVATIZED_HINT
from pymc_dp.step_methods.da_spec import release_arrays
from pymc_dp.step_methods.data_augmentation import _default_mode

__all__ = ["CollapsedBlock", "collapsed_updater", "simple_plan"]

_SIMPLE_FAMILIES = ("beta", "gamma", "dirichlet", "normal")
_BINOMIAL, _POISSON, _BETA_BINOMIAL, _NEG_BINOMIAL = 0, 1, 2, 3
# the conjugate family whose parameter integrates out of each record family
_JOINT = {"categorical": ("beta", "dirichlet"), "poisson": ("gamma",), "normal": ("normal",)}


def _check_sensitivity(plan, rel, M) -> None:
    """Declared sensitivities must bound the change one record can make (``ValueError``)."""
    for r, release in enumerate(plan.releases):
        sens = rel.sens[r]
        if not np.isfinite(sens):
            continue
        rows = M[rel.comp_release == r]
        if plan.family != "categorical":
            if np.any(rows != 0):
                raise ValueError(
                    f"release {release.name!r} declares sensitivity {sens:g}, but one "
                    f"{plan.family.capitalize()} record of {plan.rv.name!r} can move its "
                    "statistic without bound; clamp the records in the statistic, or describe "
                    "the mechanism by its noise scale (no privacy claim). " + PRIVATIZED_HINT
                )
            continue
        diffs = rows[:, :, None] - rows[:, None, :]
        norm = (np.sqrt(np.square(diffs).sum(0)) if rel.l2[r] else np.abs(diffs).sum(0)).max(
            initial=0.0
        )
        if norm > sens * (1 + 1e-9):
            raise ValueError(
                f"release {release.name!r} declares sensitivity {sens:g}, but replacing one "
                f"record of {plan.rv.name!r} moves its statistic by {norm:g}. " + PRIVATIZED_HINT
            )


def _normal_noise(rel):
    """The noise description :func:`sample_normal_sum` takes, for the block's releases."""
    mech = rel.mechs[0]
    if mech.family == "laplace":
        return ("laplace", float(mech.scale))
    sd = np.concatenate(
        [np.full(s, float(m.sigma)) for m, s in zip(rel.mechs, rel.sizes, strict=True)]
    )
    return ("gaussian", sd)


class CollapsedBlock:
    """The statistic and records of one collapsible record variable (``plan``).

    Hot path (one call of :meth:`draw` per iteration): everything that does not change between
    iterations is computed once: the contiguous columns of ``M``, the compiled kernels, the
    derived parameters of a constant conjugate prior (:meth:`_marginal_law`), the bit
    generator's pointers (:class:`~pymc_dp.kernels.allocation.RngWords`); the records move and
    refresh in one compiled call (``alloc.advance``), checked inside the kernel. The draws are
    the same, word for word of the generator, as with the allocation's public ``move_to`` and
    ``refresh``.
    """

    def __init__(self, plan, model, input_names, ck, refresh):
        self.plan = plan
        rel = release_arrays(model, plan.releases)
        self.C_own, self.M = plan.affine()
        self.C_own = np.ascontiguousarray(self.C_own, dtype=np.float64)
        self.C = self.C_own  # plus the other cells' share, set before each draw
        self._b_first = np.ascontiguousarray(self.M[:, 0], dtype=np.float64)
        self._b_last = np.ascontiguousarray(self.M[:, -1], dtype=np.float64)
        self._input_names = list(input_names)
        self._kernels = {}  # compiled samplers of this block's noise (rebuilt after pickling)
        self._words = None  # RngWords of the chain's generator (rebuilt after pickling)
        self._law_key = self._law = None  # a constant prior and its derived law
        # cells of a table: other record variables read by the same releases
        self._peer_maps = [
            (m.rv, plan.affine_of(j)[1]) for j, m in enumerate(plan.members) if j != plan.index
        ]
        self.peers = []
        _check_sensitivity(plan, rel, self.M)
        self.z, self.params, self.logpdf = rel.z, rel.params, rel.logpdf
        self.noise = _normal_noise(rel) if plan.family == "normal" else None
        self.release_names = [r.name for r in plan.releases]
        self.refresh = refresh
        self._param_fn = model.compile_fn(
            plan.params,
            inputs=model.value_vars,
            point_fn=False,
            on_unused_input="ignore",
            mode=ck["mode"] if ck.get("mode") is not None else _default_mode(),
        )
        self.alloc = None

    def link(self, by_rv) -> None:
        """Find the blocks of the other cells of these records' releases (``by_rv``: record
        variable -> block of the same step); ``ValueError`` if one is not in the step."""
        self.peers = []
        for rv, M in self._peer_maps:
            if rv not in by_rv:
                raise ValueError(
                    f"records {self.plan.rv.name!r} share the release(s) "
                    f"{self.release_names} with {rv.name!r}: give CollapsedRecords both"
                )
            self.peers.append((by_rv[rv], M))

    def prepare(self, point, x) -> None:
        """Index the current records ``x`` (before any block of the step draws, so that the
        other cells' counts are known)."""
        if self.plan.family == "normal":
            self._sigma = float(np.ravel(self._theta(point)[1])[0])
        self._sync(x)

    def stat_vector(self) -> np.ndarray:
        """The current counts (categorical) or ``[sum]`` that the affine map reads."""
        if self.plan.family == "categorical":
            return self.counts().astype(np.float64)
        return np.array([self.total()])

    # ---------------------------------------------------------------- state
    def forget(self) -> None:
        """Drop the records' index structure (rebuilt from the next point)."""
        self.alloc = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["alloc"] = None  # an index over the records, rebuilt from the next point
        state["_kernels"] = {}  # compiled closures, rebuilt on first use
        state["_words"] = None  # pointers into this process's generator
        return state

    def _sync(self, x):
        # Keep the index when the incoming records are the ones it holds, by identity (PyMC's
        # sequential sampler passes back the array the step returned) or by value (its
        # parallel sampler passes a copy in shared memory). A rebuilt index orders the records
        # differently, so rebuilding it on a copy made cores=2 place them differently from
        # cores=1 with the same random_seed (issue 26).
        a = self.alloc
        if a is not None and (x is a.x or np.array_equal(x, a.x)):
            return
        plan = self.plan
        if np.shape(x) != (plan.n,):
            raise ValueError(
                f"records {plan.rv.name!r} have shape {np.shape(x)}, but the step was built "
                f"for {plan.n} records; rebuild the step (call pm.sample again) after "
                "pm.set_data changes their number"
            )
        if plan.family == "categorical":
            self.alloc = CategoricalAllocation(x, plan.k)
        elif plan.family == "poisson":
            self.alloc = PoissonAllocation(x)
        else:
            self.alloc = NormalAllocation(x, float(self._sigma))

    def counts(self) -> np.ndarray:
        """Current category counts (categorical records)."""
        return np.asarray(self.alloc.counts)

    def total(self) -> float:
        """Current sum of the records (Poisson, Normal)."""
        return float(self.alloc.total)

    # ---------------------------------------------------------------- draw
    def _theta(self, point):
        args = [point[name] for name in self._input_names]
        vals = [np.asarray(v, dtype=np.float64) for v in self._param_fn(*args)]
        bad = [v for v in vals if not np.all(np.isfinite(v))]
        if bad:
            raise ValueError(
                f"the parameters of records {self.plan.rv.name!r} are not finite: {vals}"
            )
        return vals

    def draw(self, point, x, rng, prior=None):
        """``(records, window width)``: a new statistic and the records moved to a draw given
        it (``x`` is never written to). With ``prior`` (the hyperparameters of the records'
        sole conjugate parameter, :func:`joint_prior`) the statistic is drawn from its law with
        that parameter integrated out (an exact draw of the statistic and, by the parameter's
        own update after it, of both jointly); otherwise given the parameters at ``point``."""
        plan = self.plan
        theta = None
        if prior is None or plan.family == "normal":
            theta = self._theta(point)
        if plan.family == "normal":
            self._sigma = float(np.ravel(theta[1])[0])
        self._sync(x)
        if self.peers:
            self.C = self.C_own
            for peer, M in self.peers:
                self.C = self.C + M @ peer.stat_vector()
        drawn = None
        if prior is not None:
            drawn = self._draw_marginal(prior, rng)
        if drawn is None:
            theta = self._theta(point) if theta is None else theta
            drawn = self._draw_given(theta, rng)
        target, width = drawn
        self._words = RngWords.of(rng, self._words)
        self.alloc.advance(target, self.refresh, self._words)
        return self.alloc.x, width

    def _kernel(self, factory):
        """``factory(self.logpdf)``, looked up once per block."""
        fn = self._kernels.get(factory)
        if fn is None:
            fn = self._kernels[factory] = factory(self.logpdf)
        return fn

    def _draw_given(self, theta, rng):
        plan = self.plan
        if plan.family == "categorical":
            return self._draw_counts(np.ravel(theta[0]), rng)
        if plan.family == "poisson":
            mean = plan.n * float(np.ravel(theta[0])[0])
            return self._draw_count(_POISSON, mean, 0.0, rng)
        return self._draw_normal(plan.n * float(np.ravel(theta[0])[0]), 0.0, rng)

    def _marginal_law(self, prior):
        """What :meth:`_draw_marginal` draws for ``prior``: ``("normal", mean, var)``,
        ``("count", family, t1, t2)``, ``("counts", alpha)`` or None (not log-concave).
        Cached for the last ``prior`` object (a constant prior is the same object each
        iteration: :meth:`_CollapsedUpdater.prior`)."""
        if prior is self._law_key:
            return self._law
        plan = self.plan
        family, hyper = prior
        if family == "normal":
            m0, s0 = (float(np.ravel(h)[0]) for h in hyper)
            law = ("normal", plan.n * m0, (plan.n * s0) ** 2)
        elif family == "gamma":
            a, scale = (float(np.ravel(h)[0]) for h in hyper)  # PyTensor's gamma: scale = 1/rate
            b = 1.0 / scale
            law = None if a < 1.0 else ("count", _NEG_BINOMIAL, a, b / (b + plan.n))
        else:
            if family == "beta":
                alpha = np.array([float(np.ravel(hyper[1])[0]), float(np.ravel(hyper[0])[0])])
            else:
                alpha = np.asarray(hyper[0], dtype=np.float64).ravel()
            if np.any(alpha < 1.0):
                law = None
            elif plan.k == 2:
                law = ("count", _BETA_BINOMIAL, float(alpha[1]), float(alpha[0]))
            else:
                law = ("counts", np.ascontiguousarray(alpha))
        self._law_key, self._law = prior, law
        return law

    def _draw_marginal(self, prior, rng):
        """``(target, width)``: the statistic with the conjugate parameter integrated out, or
        None where the marginal is not log-concave (shape parameters below 1: the caller then
        draws given the parameter)."""
        law = self._marginal_law(prior)
        if law is None:
            return None
        if law[0] == "normal":
            return self._draw_normal(law[1], law[2], rng)
        if law[0] == "count":
            return self._draw_count(law[1], law[2], law[3], rng)
        return self._draw_counts_with(marginal_counts_gibbs_sampler, law[1], rng)

    def _impossible(self):
        raise ValueError(
            f"release(s) {self.release_names} have zero density at every possible value of "
            f"the statistic of {self.plan.rv.name!r} given its parameters"
        )

    def _check_code(self, code, theta):
        """Turn the kernels' negative return codes into errors."""
        if code == -1:
            self._impossible()
        if code < 0:
            raise ValueError(
                f"invalid parameters of records {self.plan.rv.name!r} for the statistic's "
                f"law: {theta!r}"
            )

    def _draw_count(self, family, t1, t2, rng):
        """``(target, width)``: a count drawn by the window sampler (target: the two
        category counts, or the Poisson total)."""
        plan = self.plan
        b = self._b_first if family in (_POISSON, _NEG_BINOMIAL) else self._b_last
        sampler = self._kernel(marginal_count_sampler)
        s, width = sampler(family, plan.n, t1, t2, self.C, b, self.z, self.params, rng.random())
        self._check_code(s, (t1, t2))
        if family in (_BINOMIAL, _BETA_BINOMIAL):
            return np.array([plan.n - s, s], dtype=np.int64), int(width)
        return int(s), int(width)

    def _draw_counts(self, p, rng):
        plan = self.plan
        if p.size == 1 and plan.k == 2:  # Bernoulli: the probability of 1
            p = np.array([1.0 - p[0], p[0]])
        if np.any(p < 0) or np.any(p > 1) or abs(p.sum() - 1.0) > 1e-6:
            raise ValueError(f"probabilities of records {plan.rv.name!r} are invalid: {p}")
        if plan.k == 2:
            return self._draw_count(_BINOMIAL, float(p[1]), 0.0, rng)
        return self._draw_counts_with(counts_gibbs_sampler, p, rng)

    def _draw_counts_with(self, factory, weights, rng):
        """One pair-move sweep over the counts (cell probabilities, or Dirichlet weights)."""
        counts = np.array(self.counts(), dtype=np.int64)
        sweep = self._kernel(factory)
        u = rng.random(4 * self.plan.k)
        width = sweep(counts, np.ascontiguousarray(weights), self.C, self.M, self.z, self.params, u)
        self._check_code(width, weights)
        return counts, int(width)

    def _draw_normal(self, mean, extra_var, rng):
        """The Normal sum given its mean (and ``extra_var``: the variance the integrated
        prior mean adds)."""
        n = self.plan.n
        s = sample_normal_sum(
            mean,
            n * self._sigma**2 + extra_var,
            self.C,
            self._b_first,
            self.z,
            self.noise,
            rng.random(),
        )
        if not np.isfinite(s):
            raise ValueError(f"the sum of records {self.plan.rv.name!r} drew {s!r}")
        return float(s), 1


# -------------------------------------------------------------------- parameters


def simple_plan(var, model):
    """The conjugate plan of ``var`` when it is a Beta / Gamma / Dirichlet / Normal-mean
    parameter drawn alone (no Normal-InverseGamma block, no regression), else None."""
    if getattr(var, "owner", None) is None or type(var.owner.op) not in _PRIOR_OPS:
        return None
    try:
        plan = _analyze(var, model)
    except NotConjugateError:
        return None
    if plan.family not in _SIMPLE_FAMILIES or plan.partner is not None:
        return None
    return plan


class _CollapsedUpdater(_Updater):
    """A conjugate update in which collapsed children contribute through their counts.

    What does not change between iterations is computed once: the checked hyperparameters
    when every one is a constant (:meth:`prior` then returns the same object each time), and
    the statistics of one record of each value (``_one``) when the child's extra inputs are
    constants. A scalar ``Beta`` with constant hyperparameters whose only child is a collapsed
    block of Bernoulli records is drawn from ``Beta(a + S, b + N - S)`` directly, with the same
    floating-point operations and random stream as the general path (the same draw).
    """

    def __init__(self, plan, model, compile_kwargs, by_rv):
        super().__init__(plan, model, compile_kwargs)
        self._blocks = [by_rv.get(c.rv) if c.index is None else None for c in plan.children]
        self._const_hyper = all(q.kind == "const" for q in self.hyper)
        self._prior = None  # (family, hyper), cached when every hyperparameter is constant
        self._one_cache = {}
        sole = self._blocks[0] if len(self._blocks) == 1 else None
        scalar_beta = self.family == "beta" and self.shape == () and self._const_hyper
        bernoulli = sole is not None and self.children[0][0].op is BernoulliRV
        self._beta_block = sole if scalar_beta and bernoulli and sole.plan.k == 2 else None

    @property
    def sole_block(self):
        """The collapsed block when it is this parameter's only child and the parameter
        integrates out of it (:data:`_JOINT`), else None."""
        if len(self._blocks) != 1 or self._blocks[0] is None:
            return None
        block = self._blocks[0]
        if self.family not in _JOINT[block.plan.family]:
            return None
        if self.family == "beta" and not block.plan.bernoulli:
            return None
        return block

    def _checked(self, point, compiled):
        if self._prior is not None:
            return self._prior
        hyper = [np.asarray(q.get(point, compiled), dtype=np.float64) for q in self.hyper]
        self.pair.check_hyper(hyper, self.labels)
        prior = (self.family, hyper)
        if self._const_hyper:
            self._prior = prior
        return prior

    def prior(self, point):
        """``(family, hyperparameters)`` at ``point`` (checked as the update checks them)."""
        if self._prior is not None:
            return self._prior
        compiled = self._fn(point) if self._fn is not None else None
        return self._checked(point, compiled)

    def _posterior(self, point):
        compiled = self._fn(point) if self._fn is not None else None
        hyper = self._checked(point, compiled)[1]
        return self.pair.posterior(hyper, self._totals(point, compiled), self.shape)

    def update(self, point, rng) -> dict:
        """``{value name: new value}``: one exact draw from the full conditional."""
        block = self._beta_block
        if block is None or block.alloc is None:
            return super().update(point, rng)
        a, b = (float(h) for h in self._checked(point, None)[1])
        # the general path's arithmetic: S successes of N trials (both exact in float64),
        # Beta(a + S, b + (N - S)), clipped into the open unit interval (draw_beta)
        s = float(block.alloc.count(1))
        theta = rng.beta(a + s, b + (float(block.plan.n) - s))
        theta = min(max(theta, _TINY), _ONE_MINUS)
        return {self.value_name: self._finish(theta, self.forward)}

    def _one(self, i, v, point, compiled):
        """The statistics of one record of value ``v`` of child ``i`` (float64 arrays)."""
        key = (i, int(v))
        hit = self._one_cache.get(key)
        if hit is not None:
            return hit
        link, _, orders, _, eqs, what = self.children[i]
        extras = tuple(e.get(point, compiled) for e in eqs)
        cells = Cells(_expanded_shape(self.shape, orders), self.shape)
        dtype = self._blocks[i].plan.value.dtype
        stats = [
            np.asarray(s, dtype=np.float64)
            for s in link.stats(np.array([v], dtype=dtype), extras, cells, what)
        ]
        if all(e.kind == "const" for e in eqs):
            self._one_cache[key] = stats
        return stats

    def _block_stats(self, i, block, point, compiled):
        if block.plan.family == "categorical":
            counts = block.counts()
            acc = None
            for v in np.flatnonzero(counts):
                st = [s * float(counts[v]) for s in self._one(i, v, point, compiled)]
                acc = st if acc is None else [a + s for a, s in zip(acc, st, strict=True)]
            return acc
        n, s = float(block.plan.n), block.total()
        zero, one = self._one(i, 0, point, compiled), self._one(i, 1, point, compiled)
        # the statistics are affine in one record's value: n records summing to s
        return [n * a + s * (b - a) for a, b in zip(zero, one, strict=True)]

    def _totals(self, point, compiled):
        acc = None
        for i, (child, block) in enumerate(zip(self.children, self._blocks, strict=True)):
            if block is None or block.alloc is None:
                stats = self._child_stats(child, point, compiled)
            else:
                stats = self._block_stats(i, block, point, compiled)
            acc = self.pair.combine(acc, stats)
        return acc


def collapsed_updater(rv, model, compile_kwargs, by_rv):
    """The update of parameter ``rv``; children in ``by_rv`` (record variable -> block) are
    read through their statistic, other children value by value."""
    plan = simple_plan(rv, model)
    if plan is None:
        raise ValueError(
            f"CollapsedRecords cannot update {rv.name!r}: it is neither collapsible records "
            "nor a Beta / Gamma / Dirichlet / Normal-mean parameter with a conjugate structure"
        )
    return _CollapsedUpdater(plan, model, compile_kwargs, by_rv)
