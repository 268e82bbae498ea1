r"""Data-augmentation step for the latent records behind a ``Release``.

Ju, Awan, Gong & Rao (2022), "Data Augmentation MCMC for Bayesian Inference from Privatized Data"
(slides: "A General Gibbs Sampler", "Tailoring the Sampler for DP"). With the parameters
``theta`` fixed, every record ``x_i`` is proposed from the model's own conditional
``f(x_i | theta)`` and accepted with probability

.. math::

    \min\left(1, \frac{\eta(z \mid x_1, \ldots, x_i', \ldots, x_n)}
                      {\eta(z \mid x_1, \ldots, x_i, \ldots, x_n)}\right),

``eta`` being the density of all releases that depend on the records. For an
``epsilon``-DP release this is at least ``exp(-epsilon)`` (slides, same page); the minimum over
records of a sweep is reported as the ``da_accept_min`` sampler statistic.

How a sweep is computed
-----------------------
1. All ``n`` proposals are drawn at once by ancestral sampling of the record variables given
   the current values of everything else (records are conditionally independent given the
   parameters, so the proposals of a sweep do not depend on each other). A record made of
   several variables (a regression record ``(x_i, y_i)``) is proposed jointly.
   For record variables that are plain PyTensor ``RandomVariable`` s without a transform
   (Bernoulli, Categorical, Normal, Poisson, Binomial, ...), only the distribution
   *parameters* are compiled; the draw is the op's own ``rng_fn(rng, *params, size)`` with the
   step's numpy generator (the call ``RandomVariable.perform`` makes), with two shortcuts of
   the same law: Bernoulli as ``u < p`` and Normal as ``loc + scale * standard_normal``.
   Anything else (``SymbolicRandomVariable`` s, ``CustomDist`` graphs, transformed records)
   is drawn by one compiled PyTensor graph of the records (``direct_proposals=False`` forces
   this path everywhere).
2. A compiled function evaluates, vectorized, the per-record contributions ``t(x_i')`` of the
   proposals. ``t`` is obtained from the graph of the statistic itself: the statistic is
   evaluated on one-record data sets, ``t(x_i) = T([x_i])``, vectorized over ``i`` with
   :func:`pytensor.graph.replace.vectorize_graph`. At construction the step checks
   numerically, on the initial point and two forward draws, that ``T(x) = C + sum_i t(x_i)``
   with the same ``C`` (counts, sums, sums of squares, ``X'y``, ``X'X``, one-hot tables,
   clamped values ... all pass; ``max``, medians, centred sums do not and take the generic path
   below). The contributions ``t(x_i)`` of the current records are not recomputed: after a
   sweep they are those of the accepted proposals (the kernel keeps them in place), and they
   are reused when the next sweep receives the very record arrays the step returned
   (otherwise, and when ``T`` involves other variables, they are evaluated).
3. The sequential accept/reject over records runs in a numba loop
   (:func:`pymc_dp.kernels.da_sweep.da_sweep_cached`) that keeps the running statistic: one
   record costs O(size of T), a sweep O(n size(T)) plus the vectorized work. Records whose
   proposal changes neither ``t`` nor an observed child's likelihood have ratio 1 and are
   accepted without a uniform draw.

Validity checks (at step construction, i.e. at step assignment in ``pm.sample``)
---------------------------------------------------------------------------------
* Record variables have a leading record axis (axis 0) of common length ``n`` within a record
  block. Variables of one record are blocked together: they share a Release statistic or are
  parent and child.
* Every child of a record variable is a record variable of the same block, a ``Release``, or an
  observed variable whose log-likelihood is a sum of per-record terms (e.g. a public response
  ``y_i ~ N(beta x_i, 1)`` of a private ``x_i``); its per-record log-likelihood ratio is added to
  the acceptance ratio, which keeps the proposal-from-the-prior scheme exact. Free variables that
  are not records, and ``pm.Potential`` terms, depending on records are refused.
* Conditional independence, decided from the graph
  (:mod:`pymc_dp.step_methods.row_locality`): row ``i`` of every per-record log-prior and
  observed-child term may read only row ``i`` of the record variables. A term that indexes,
  slices, reverses, reduces or contracts over the record axis (``x[::-1]``, ``s[:-1]``,
  ``x.mean()``, a random walk, an MvNormal over the records ...) is refused whatever the
  parameter values, so a coupling that vanishes at the initial point cannot hide. An operation
  the analysis has no rule for is checked numerically at random values of the other variables
  (never only at the initial point), and refused when that check cannot be made. A numerical
  check (changing one record leaves the other rows' terms unchanged) also runs on every block.
* The records must be forward-samplable (the proposal function is compiled and run).
* Declared sensitivity: for a release whose mechanism states a privacy claim (``epsilon``,
  ``delta``, ``rho`` or ``sensitivity`` given), every proposed record change of the statistic
  is compared with the mechanism's ``sensitivity`` in its norm (L1 for Laplace and Geometric,
  L2 for Gaussian and DiscreteGaussian): at construction on the records tried there, then in
  every sweep (a compiled pass over the changed records on the additive path, one more output
  of the scan on the generic path). A larger change proves the declared epsilon wrong and is a
  ``ValueError`` naming the release, the record and the change. Mechanisms given only by their
  noise scale (``Laplace(scale=b)``) state no claim and are not checked.

A model failing any check gets a ``ValueError`` naming the variable and the reason, never a wrong
posterior. Public record parts that are *parents* of the private part (public predictors,
private response) need nothing special: they are data in the proposal. Public data that enter
the statistic row by row (a numpy array, ``pm.Data`` or observed variable whose leading length is
``n``, as ``x`` in ``(x * y).sum()``) are split into records together with the private part; the
numerical additivity check decides whether that split is right (if a data array merely happens
to have length ``n``, the split fails the check and is not used).

Conditional independence is decided structurally (above). The additivity of the statistic is
checked numerically, at the current records, forward draws and records made to differ; a
statistic that fails it takes the exact generic path. The released values are read once, when
the step is built.

Compilation: the compiled functions (parameters, contributions, proposals of the general
path) run on PyTensor's C virtual machine (``cvm_nogc``) when a C compiler is configured, since
passing random generators through the numba backend costs about 0.1 ms per call; the
accept/reject loop is numba (``pymc_dp.kernels.da_sweep``). Pass ``compile_kwargs={"mode": ...}``
to override.

Statistics that are not sums over records (``max``, medians, centred sums ...) and record blocks
whose releases use mechanisms of different families take an exact but slower generic path: one
compiled ``scan`` over the records that swaps record ``i`` in, recomputes the whole statistic
(O(n) per record, O(n^2) per sweep) and accepts with the PyTensor noise log-densities
(``Mechanism.logpdf_pt``). Scalar record variables are refused (no record axis).

Sampler statistics: ``da_accept_rate`` (fraction of records whose proposal was accepted in the
sweep), ``da_accept_mean`` (mean over records of the acceptance probability ``min(1, r_i)``) and
``da_accept_min`` (minimum over records of ``min(1, r_i)``: the quantity bounded below by
``exp(-epsilon)``, epsilon summed over the releases of the block). The first and last are shown on
PyMC's progress bar ("DA acc", "DA min").

Layout
------
This module is the PyMC adapter only (construction, ``setup_chain``, ``step``, competence,
progress bar, sampling state). The work is in small modules of this package, in data-flow order:

* :mod:`~pymc_dp.step_methods.da_blocks`: record blocks (``partition``) and one frozen
  ``BlockGraph`` per block (releases, observed children, per-record terms, forward graph);
* :mod:`~pymc_dp.step_methods.da_proposals`: the direct and compiled proposers;
* :mod:`~pymc_dp.step_methods.da_checks`: the numerical checks and the refusal messages;
* :mod:`~pymc_dp.step_methods.da_additive`: ``t``, its checks and the additive block sweep
  ``additive_sweep(spec, scratch, args, rng) -> SweepResult``;
* :mod:`~pymc_dp.step_methods.da_generic`: the O(n^2) scan and its sweep (same contract);
* :mod:`~pymc_dp.step_methods.da_spec`: the frozen ``BlockSpec`` of a block, its mutable
  ``BlockScratch`` (buffers, cached contributions) and ``build_spec``;
* :mod:`~pymc_dp.step_methods.claims`: which variables the step claims.

``method="soma"`` sweeps additive blocks with :func:`pymc_dp.step_methods.soma.soma_sweep`
(same contract). ``step.sampling_state`` (:class:`DataAugmentationState`) holds the step's
generator and those of its compiled functions, so a chain restored from it continues with the
same draws.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.distributions.release import Release
>>> from pymc_dp.step_methods.data_augmentation import DataAugmentation
>>> with pm.Model() as model:
...     p = pm.Beta("p", 1.0, 1.0)
...     x = pm.Bernoulli("x", p=p, shape=30)
...     _ = Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=12.4)
...     step = DataAugmentation([x], rng=1)
>>> point, [stats] = step.step(model.initial_point())
>>> point["x"].shape, sorted(stats)
((30,), ['da_accept_mean', 'da_accept_min', 'da_accept_rate'])
>>> stats["da_accept_min"] >= float(np.exp(-1.0))
True
"""

from __future__ import annotations

import warnings
from dataclasses import field
from typing import ClassVar, NamedTuple

import numpy as np
import pytensor
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.step_methods import da_chunks
from pymc_dp.step_methods.claims import claim_model, release_records
from pymc_dp.step_methods.da_additive import SweepResult, additive_sweep
from pymc_dp.step_methods.da_blocks import BuildOptions, block_graph, partition
from pymc_dp.step_methods.da_generic import generic_sweep
from pymc_dp.step_methods.da_proposals import generator_states, reseed, set_generator_states
from pymc_dp.step_methods.da_spec import BlockScratch, BlockSpec, build_spec

__all__ = ["METHODS", "DataAugmentation", "DataAugmentationState"]

# record steps offered by ``DataAugmentation(method=...)``
METHODS = ("da", "soma")


@dataclass_state
class DataAugmentationState(StepMethodState):
    """Sampling state of :class:`DataAugmentation` (``step.sampling_state``).

    ``rng`` (inherited) is the step's generator; ``proposal_rngs`` are the generators held by
    compiled functions of the blocks (the generic path's scan, the compiled proposals), in
    block order. The frozen fields (variables, method, blocks) must match the step a state is
    restored into: ``block_names`` the record names of each block, ``block_paths`` whether
    each block is swept on the ``"additive"`` or the ``"generic"`` path.
    """

    # frozen fields first: the setter checks them before it sets the generators
    method: str = field(metadata={"frozen": True})
    block_names: list = field(metadata={"frozen": True})
    block_paths: list = field(metadata={"frozen": True})
    proposal_rngs: list


class _Block(NamedTuple):
    """A block of the step: its frozen spec and its scratch; attributes of either are read
    through (``block.names``, ``block.t_cur``)."""

    spec: BlockSpec
    scratch: BlockScratch

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        for part in (self.spec, self.scratch):
            try:
                return getattr(part, name)
            except AttributeError:
                pass
        raise AttributeError(f"block has no attribute {name!r}")


def _default_mode(n_records=None):
    """The C virtual machine when a C compiler is configured, else PyTensor's default.

    The sweep function is called once per iteration on small arrays, so call overhead matters:
    with PyTensor's numba backend, passing the random generators into the compiled code costs
    about 130 microseconds per call; the C VM calls numpy's generators directly (~20-30 us).
    Below :data:`~pymc_dp.step_methods.da_chunks.LARGE_BLOCK` record values the VM keeps its
    intermediate arrays between calls (``cvm_nogc``, no reallocation); from there on it frees
    them after each call (``cvm``): kept intermediates cost tens of bytes per record for the
    whole run (measured 96 bytes per Bernoulli record with a covariate), where a reallocation
    per sweep costs little next to a sweep over that many records.
    """
    if pytensor.config.cxx:
        large = n_records is not None and n_records >= da_chunks.LARGE_BLOCK
        return Mode(linker="cvm" if large else "cvm_nogc", optimizer="fast_run")
    return None


def _rng_functions(spec) -> list:
    """Compiled functions of a block that hold random generators of their own."""
    return [spec.fn] if spec.generic else spec.proposer.functions()


def _soma_module():
    """:mod:`pymc_dp.step_methods.soma`, imported when ``method="soma"`` is asked for."""
    try:
        from pymc_dp.step_methods import soma
    except ImportError as err:
        raise NotImplementedError(f"method='soma' is not available: {err}") from err
    return soma


def _soma_block_sweep(spec, scratch, args, rng) -> SweepResult:
    """One SOMA sweep of a block (:func:`pymc_dp.step_methods.soma.soma_sweep`) as a
    :class:`~pymc_dp.step_methods.da_additive.SweepResult`."""
    res = _soma_module().soma_sweep(spec, scratch, args, rng)
    if isinstance(res, SweepResult):
        return res
    records, (n_acc, min_prob, mean_prob) = res
    return SweepResult(list(records), int(n_acc), float(min_prob), float(mean_prob))


def _check_method(method) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method


class DataAugmentation(ForgetsInitialPoint, BlockedStep):
    """Data-augmentation (Ju et al. 2022) Metropolis-within-Gibbs step for latent records.

    Parameters
    ----------
    vars : list of model variables
        The record variables (latent variables that feed a ``Release``). Several record blocks
        may be given; each is swept in turn.
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    initial_point : dict, optional
        Point used for the construction-time checks (default: the model's initial point).
    compile_kwargs : dict, optional
        Passed to the PyTensor compilation.
    direct_proposals : bool, default True
        Draw the proposals of plain ``RandomVariable`` records with numpy from the compiled
        distribution parameters (see the module docstring). ``False`` always uses the compiled
        graph of the record variables (same law; slower).
    method : {"da", "soma"}, default "da"
        The record step of additive blocks: ``"da"``, one independence proposal per record
        (Ju et al. 2022); ``"soma"``, single offer multiple attempts (Xiong & Ju 2025,
        :mod:`pymc_dp.step_methods.soma`), for exchangeable records with an additive statistic
        and no observed per-record children (checked at construction: ``ValueError``
        otherwise). Any other value is a ``ValueError``. On the Ju et al. regression SOMA
        mixes no better per draw than DA and costs about 20 times more per sweep
        (``benchmarks/RESULTS.md``), so ``"da"`` stays the default.

    Warns
    -----
    UserWarning
        When a release is nearly uninformative about the records: the fraction of missing
        information (:func:`pymc_dp.step_methods.soma.missing_information_fraction`) exceeds
        0.99 in every released component of an additive block, at the initial point. The
        release then adds little to the prior and the chain mixes slowly.

    Notes
    -----
    Sampler statistics (per sweep, over all records of all blocks): ``da_accept_rate`` (fraction
    of proposals accepted), ``da_accept_mean`` (mean acceptance probability ``min(1, r_i)``) and
    ``da_accept_min`` (minimum over records of ``min(1, r_i)``; at least ``exp(-epsilon)`` for
    an ``epsilon``-DP release whose sensitivity bounds the change of one record).
    ``step.sampling_state`` (:class:`DataAugmentationState`) captures every generator the step
    draws from. See the module docstring for the algorithm and the checks.

    Examples
    --------
    Five Bernoulli records whose sum is released with ``epsilon = 1`` (sensitivity 1): one
    sweep, and the bound ``da_accept_min >= exp(-epsilon)`` of the Notes. ``pm.sample`` assigns
    this step to ``x`` by itself; here it is built and called once.

    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.step_methods import DataAugmentation
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
    ...     x = pm.Bernoulli("x", p, shape=5)
    ...     _ = pmdp.Release("t", x.sum(), pmdp.Laplace(epsilon=1.0), observed=3.0)
    ...     step = DataAugmentation([x], rng=1)
    >>> point, stats = step.step(model.initial_point())
    >>> point["x"].shape, bool(np.isin(point["x"], [0, 1]).all())
    ((5,), True)
    >>> bool(stats[0]["da_accept_min"] >= np.exp(-1.0))
    True
    """

    name = "data_augmentation"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {
        "da_accept_rate": (np.float64, []),
        "da_accept_mean": (np.float64, []),
        "da_accept_min": (np.float64, []),
    }
    _state_class = DataAugmentationState

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        direct_proposals=True,
        method="da",
    ):
        self.method = _check_method(method)
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        ip = model.initial_point() if initial_point is None else initial_point
        ck = dict(compile_kwargs or {})
        if ck.get("mode") is None:
            ck["mode"] = _default_mode(sum(int(np.size(ip[v.name])) for v in self.vars))
        self._input_names = [v.name for v in model.value_vars]
        opts = BuildOptions(
            model=model,
            ip=ip,
            input_names=self._input_names,
            ck=ck,
            direct=bool(direct_proposals),
        )
        rvs = [model.values_to_rvs[v] for v in self.vars]
        with warnings.catch_warnings():
            # the C backend warns once per process when it finds no BLAS; the sweep's linear
            # algebra is on tiny arrays, so that does not matter here
            warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
            specs = [build_spec(block_graph(opts, b)) for b in partition(model, rvs, opts.ip)]
        self._blocks = [_Block(s, BlockScratch.for_spec(s)) for s in specs]
        self._sweeps = [self._pick_sweep(s, opts) for s in specs]
        for s in specs:
            if not s.generic:
                _soma_module().warn_if_uninformative(opts.model, s, opts.ip)
        self._reset_rngs()

    # ------------------------------------------------------------------ sweeps
    def _pick_sweep(self, spec, opts):
        """The block sweep ``(spec, scratch, args, rng) -> SweepResult`` for ``spec``."""
        if self.method == "da":
            return generic_sweep if spec.generic else additive_sweep
        _soma_module().check_exchangeable(opts.model, spec, opts.ip)
        return _soma_block_sweep

    def _reset_rngs(self):
        for spec, scratch in self._blocks:
            if spec.generic:
                reseed(spec.fn, self.rng)
            else:
                spec.proposer.reseed(self.rng)
                scratch.clear_cache()

    def setup_chain(self, rng, tune, draws):
        """Set the per-chain generator and re-derive the proposal generators from it."""
        super().setup_chain(rng, tune, draws)
        self._reset_rngs()

    def step(self, point):
        """One sweep over all records of all blocks.

        The incoming point is not modified, except the record arrays of large blocks that
        sweep in chunks (:mod:`~pymc_dp.step_methods.da_chunks`): those are updated in place
        and returned in the new point, so that a run holds one copy of the records.
        """
        new_point = dict(point)
        n_acc = n_tot = 0
        min_prob, sum_prob = 1.0, 0.0
        for (spec, scratch), sweep in zip(self._blocks, self._sweeps, strict=True):
            args = [new_point[name] for name in self._input_names]
            res = sweep(spec, scratch, args, self.rng)
            for name, rec in zip(spec.names, res.records, strict=True):
                new_point[name] = rec
            n_acc += res.n_accepted
            n_tot += spec.n
            min_prob = min(min_prob, res.min_prob)
            sum_prob += res.mean_prob * spec.n
        stats = {
            "da_accept_rate": float(n_acc / n_tot),
            "da_accept_mean": float(sum_prob / n_tot),
            "da_accept_min": float(min_prob),
        }
        return new_point, [stats]

    # ------------------------------------------------------------------ state
    @property
    def proposal_rngs(self) -> list:
        """Copies of the generators held by the blocks' compiled functions (block order)."""
        return generator_states(f for spec, _ in self._blocks for f in _rng_functions(spec))

    @proposal_rngs.setter
    def proposal_rngs(self, gens) -> None:
        set_generator_states([f for spec, _ in self._blocks for f in _rng_functions(spec)], gens)

    @property
    def block_names(self) -> list:
        """The value-variable names of each block."""
        return [list(spec.names) for spec, _ in self._blocks]

    @property
    def block_paths(self) -> list:
        """``"generic"`` or ``"additive"`` for each block."""
        return ["generic" if spec.generic else "additive" for spec, _ in self._blocks]

    @property
    def sampling_state(self) -> DataAugmentationState:
        """The step's generators (:class:`DataAugmentationState`); restoring one also forgets
        the cached contributions (a cache, recomputed on the next sweep)."""
        return BlockedStep.sampling_state.fget(self)

    @sampling_state.setter
    def sampling_state(self, state: DataAugmentationState) -> None:
        BlockedStep.sampling_state.fset(self, state)
        for _, scratch in self._blocks:
            scratch.clear_cache()

    # ------------------------------------------------------------------ assignment
    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a record of an observed pymc_dp Release, else INCOMPATIBLE.

        The rule is :mod:`pymc_dp.step_methods.claims` (shared by every pymc_dp step): the
        model is the one in context, or else a model holding a Release that has ``var`` among
        its free variables.
        """
        model = claim_model(var)
        if model is not None and var in release_records(model):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        from rich.progress import TextColumn
        from rich.table import Column

        columns = [
            TextColumn(
                "{task.fields[da_accept_rate]:0.2f}", table_column=Column("DA acc", ratio=1)
            ),
            TextColumn("{task.fields[da_accept_min]:0.2f}", table_column=Column("DA min", ratio=1)),
        ]
        stats = {"da_accept_rate": [0.0] * n_chains, "da_accept_min": [0.0] * n_chains}
        return columns, stats

    @staticmethod
    def _make_progressbar_update_functions():
        def update_stats(step_stats):
            return {k: step_stats[k] for k in ("da_accept_rate", "da_accept_min")}

        return (update_stats,)
