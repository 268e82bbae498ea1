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
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile, extract_obs_data
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomGeneratorType, RandomType
from pytensor.tensor.type_other import NoneTypeT

from pymc_dp.distributions.release import _is_rv, is_release, record_parents
from pymc_dp.kernels.da_sweep import (
    changed_records,
    sensitivity_excess,
    specialized_da_sweep_cached,
)
from pymc_dp.step_methods.claims import claim_model, release_records
from pymc_dp.step_methods.row_locality import ROW, Coupled, Unknown, row_states

__all__ = ["DataAugmentation"]

# relative tolerance of the numerical checks (additivity, row independence)
_RTOL = 1e-9


@dataclass
class _Block:
    """One block of record variables sharing the record axis, with its compiled sweep."""

    names: list[str]  # value-variable names of the records
    n: int
    release_names: list[str]
    z: np.ndarray  # (m,) released values, flattened
    params: np.ndarray  # (m, P) numba parameters per component
    logpdf: object  # numba function
    fn: object  # additive path: t function (see _compile_and_check); generic: the whole sweep
    has_extra: bool  # whether fn also returns per-record observed-child log-ratios
    generic: bool = False  # True: fn runs the whole sweep (non-additive statistic)
    proposer: object = (
        None  # additive path: draws the proposals (_DirectProposer/_CompiledProposer)
    )
    const: np.ndarray | None = None  # C in T = C + sum_i t(x_i)
    free_T: bool = False  # T involves other variables: fn also returns T, t is not cached
    # declared sensitivities, per release (inf: not declared, no check), the release of each
    # flattened component, and whether a release's sensitivity is an L2 (else L1) bound
    sens: np.ndarray | None = None
    comp_release: np.ndarray | None = None
    l2: np.ndarray | None = None
    families: list | None = None

    def __post_init__(self):
        self.zeros = np.zeros(self.n)
        self.idx = np.empty(self.n, dtype=np.int64)  # records whose ratio is not 1
        self.rejected = np.empty(self.n, dtype=np.int64)  # records whose proposal is rejected
        self.u = np.empty(self.n)  # uniforms of the accept/reject decisions
        # one parameter row for every released component (lets the kernel hoist its work)
        self.shared = bool(np.all(self.params == self.params[:1]))
        self.clear_cache()

    def clear_cache(self):
        """Forget the cached contributions ``t(x_i)`` of the current records."""
        self.t_cur = None  # (n, m) float64, t of the records in self.last
        self.last = None  # the record arrays returned by the last sweep

    def __getstate__(self):
        state = dict(self.__dict__)
        state["t_cur"] = state["last"] = None  # a cache, possibly large: not pickled
        return state


class _DirectProposer:
    """Proposals drawn with numpy from the record distributions' own ``rng_fn``.

    For record variables that are plain PyTensor ``RandomVariable`` s without a transform, only
    the distribution *parameters* (and ``size``) are compiled, as functions of the model's value
    variables; the draw is ``op.rng_fn(rng, *params, size)``, the very call that
    ``RandomVariable.perform`` makes in a compiled graph, so the law is the same. Variables of a
    block are drawn in model (topological) order, later ones with the earlier proposals in place
    of the current records (ancestral sampling). ``BernoulliRV`` (whose ``rng_fn`` goes through
    scipy's binomial sampler) is drawn as ``u < p`` with ``u ~ Uniform[0, 1)``, the same law
    up to the 2^-53 resolution of the uniform draws; ``NormalRV`` is drawn as
    ``loc + scale * standard_normal`` (what ``Generator.normal`` computes, without its
    per-call broadcasting overhead).
    """

    def __init__(self, specs):
        # specs: (position in args, dtype, op, compiled parameter function or None, constant
        #   parameters or None, size: a fixed tuple, None, or "fn" (last output of the function),
        #   kind: "bernoulli", "normal" or None)
        self.specs = specs

    def draw(self, args, rng):
        args = list(args)
        out = []
        for pos, dtype, op, fn, const, size, kind in self.specs:
            dist = const if fn is None else fn(*args)
            if size == "fn":
                *dist, size = dist
                size = tuple(size.tolist())
            if kind == "bernoulli":
                (p,) = dist
                x = np.less(rng.random(np.shape(p) if size is None else size), p)
            elif kind == "normal":
                loc, scale = dist
                if fn is not None and (scale < 0).any():
                    raise ValueError(f"negative scale of a Normal record: {scale}")
                if size is None:
                    size = np.broadcast_shapes(loc.shape, scale.shape)
                # Generator.normal(loc, scale) is loc + scale * standard_normal, elementwise
                x = rng.standard_normal(size)
                x *= scale
                x += loc
            else:
                x = op.rng_fn(rng, *dist, size)
            if x.dtype != dtype:
                x = x.astype(dtype)
            if not (x.flags.owndata and x.flags.writeable and x.flags.c_contiguous):
                x = np.array(x, dtype=dtype, order="C")
            args[pos] = x
            out.append(x)
        return out

    def reseed(self, rng):
        """Nothing to do: the draws come from the step's generator."""


class _CompiledProposer:
    """Proposals from one compiled PyTensor graph of the record variables (any forward-samplable
    distribution: SymbolicRandomVariables, CustomDist, transformed variables ...)."""

    def __init__(self, fn):
        self.fn = fn

    def draw(self, args, rng):
        return [np.array(x) for x in self.fn(*args)]

    def reseed(self, rng):
        _reseed(self.fn, rng)


def _draw_kind(op):
    """Which shortcut :class:`_DirectProposer` uses for ``op`` (None: the op's ``rng_fn``)."""
    if type(op) is BernoulliRV:
        return "bernoulli"
    if type(op) is NormalRV:
        return "normal"
    return None


def _direct_rv_parents(var, rv_set) -> set:
    """RVs in ``rv_set`` that ``var`` (an RV, Potential or any graph) depends on directly."""
    start = list(var.owner.inputs) if (var.owner is not None and _is_rv(var)) else [var]
    out = set()
    stack = list(start)
    seen = set()
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


def _rows(term, n):
    """Sum a per-element log-density term over all but the leading (record) axis."""
    if term.type.ndim == 0:
        return None
    return term.sum(axis=tuple(range(1, term.type.ndim))) if term.type.ndim > 1 else term


class DataAugmentation(BlockedStep):
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

    Notes
    -----
    Sampler statistics (per sweep, over all records of all blocks): ``da_accept_rate`` (fraction
    of proposals accepted), ``da_accept_mean`` (mean acceptance probability ``min(1, r_i)``) and
    ``da_accept_min`` (minimum over records of ``min(1, r_i)``; at least ``exp(-epsilon)`` for
    an ``epsilon``-DP release whose sensitivity bounds the change of one record).
    See the module docstring for the algorithm and the checks.
    """

    name = "data_augmentation"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {
        "da_accept_rate": (np.float64, []),
        "da_accept_mean": (np.float64, []),
        "da_accept_min": (np.float64, []),
    }

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
    ):
        model = modelcontext(model)
        self._direct_proposals = bool(direct_proposals)
        value_vars = get_value_vars_from_user_vars(vars, model)
        self.vars = value_vars
        self.blocked = True
        self.rng = get_random_generator(rng)
        ip = model.initial_point() if initial_point is None else initial_point
        compile_kwargs = dict(compile_kwargs or {})
        if compile_kwargs.get("mode") is None:
            compile_kwargs["mode"] = _default_mode()
        self._input_names = [v.name for v in model.value_vars]
        rvs = [model.values_to_rvs[v] for v in value_vars]
        with warnings.catch_warnings():
            # the C backend warns once per process when it finds no BLAS; the sweep's linear
            # algebra is on tiny arrays, so that does not matter here
            warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
            self._blocks = [
                self._build_block(model, block, ip, compile_kwargs)
                for block in _partition(model, rvs, ip)
            ]
        self.__dict__.pop("_proposer", None)
        self._reset_rngs()

    # ------------------------------------------------------------------ construction
    def _build_block(self, model, block_rvs, ip, compile_kwargs) -> _Block:
        rv_set = set(model.basic_RVs)
        block_set = set(block_rvs)
        names = [model.rvs_to_values[rv].name for rv in block_rvs]
        n = int(np.shape(ip[names[0]])[0])
        label = ", ".join(rv.name for rv in block_rvs)

        releases, observed_children = [], []
        for rv in model.basic_RVs:
            if rv in block_set:
                continue
            parents = _direct_rv_parents(rv, rv_set)
            if not parents & block_set:
                continue
            if is_release(rv):
                if rv not in model.observed_RVs:
                    raise ValueError(f"Release {rv.name!r} of records [{label}] is not observed")
                releases.append(rv)
            elif rv in model.observed_RVs:
                observed_children.append(rv)
            else:
                raise ValueError(
                    f"record variable(s) [{label}] have the free child {rv.name!r}, which is "
                    "neither a record of the same block nor a Release: given the other "
                    "variables the records are not conditionally independent of it. If "
                    f"{rv.name!r} is a per-record latent part, pass it to DataAugmentation "
                    "together with the records (it is then proposed jointly)"
                )
        for pot in model.potentials:
            if _direct_rv_parents(pot, rv_set) & block_set:
                raise ValueError(
                    f"pm.Potential {pot.name!r} depends on record variable(s) [{label}]; "
                    "DataAugmentation does not support potentials on records"
                )
        if not releases:
            raise ValueError(f"record variable(s) [{label}] feed no observed Release")

        # the compiled kernel takes one noise log-density; releases of several families go
        # through the exact generic path (PyTensor log-densities of every mechanism)
        one_family = len({id(r.owner.op.mechanism.numba_logpdf) for r in releases}) == 1
        logpdf = releases[0].owner.op.mechanism.numba_logpdf

        # released values and mechanism parameters, one row per flattened component
        z_parts, param_rows = [], []
        for r in releases:
            z_r = np.asarray(extract_obs_data(model.rvs_to_values[r]), dtype=np.float64).ravel()
            z_parts.append(z_r)
            param_rows.extend(
                [np.asarray(r.owner.op.mechanism.numba_params, np.float64)] * len(z_r)
            )
        z = np.ascontiguousarray(np.concatenate(z_parts))
        mechs = [r.owner.op.mechanism for r in releases]
        sens = np.array(
            [
                float(m.sensitivity) if getattr(m, "privacy_declared", False) else np.inf
                for m in mechs
            ]
        )
        l2 = np.array([m.family in _L2_FAMILIES for m in mechs], dtype=np.bool_)
        comp_release = np.repeat(np.arange(len(releases)), [len(zp) for zp in z_parts])
        width = max(len(p) for p in param_rows)
        params = np.zeros((len(param_rows), width))
        for k, p in enumerate(param_rows):
            params[k, : len(p)] = p

        values = [model.rvs_to_values[rv] for rv in block_rvs]
        # statistic(s) and per-record terms in terms of value variables
        stats = model.replace_rvs_by_values([r.owner.inputs[0] for r in releases])
        T_flat = pt.concatenate([pt.cast(s, "float64").ravel() for s in stats])
        prior_terms = model.logp(vars=block_rvs, sum=False)
        child_terms = model.logp(vars=observed_children, sum=False) if observed_children else []
        row_terms = []
        undecided = []
        leaves = dict.fromkeys(values, ROW)
        for rv, term in zip(
            [*block_rvs, *observed_children], [*prior_terms, *child_terms], strict=True
        ):
            observed = rv not in block_set
            if term.type.ndim == 0 or term.type.shape[0] not in (None, n):
                raise ValueError(_joint_message(rv, label, n, observed))
            state = row_states([term], leaves, n)[term]
            if isinstance(state, Coupled):
                raise ValueError(_coupled_message(rv, label, state, observed))
            if isinstance(state, Unknown):
                undecided.append((rv, state))
            row_terms.append(_rows(term, n))
        if child_terms:
            lw_cur = sum(_rows(t, n) for t in child_terms)
        else:
            lw_cur = pt.zeros((n,), "float64")
            lw_cur.tag.pymc_dp_zeros = True

        # forward (ancestral) proposal of the block given everything else
        others = {rv: val for rv, val in model.rvs_to_values.items() if rv not in block_set}
        transforms = {
            rv: tr
            for rv, tr in model.rvs_to_transforms.items()
            if rv not in block_set and tr is not None
        }
        prop_rvs = replace_rvs_by_values(
            list(block_rvs), rvs_to_values=others, rvs_to_transforms=transforms
        )
        prop_vals = []
        for rv, prv in zip(block_rvs, prop_rvs, strict=True):
            tr = model.rvs_to_transforms.get(rv)
            prop_vals.append(tr.forward(prv, *prv.owner.inputs) if tr is not None else prv)
        prop_vals = [pt.cast(p, v.dtype) for p, v in zip(prop_vals, values, strict=True)]
        if undecided:
            self._check_rows_randomized(
                model, ip, values, prop_vals, row_terms, n, label, undecided, compile_kwargs
            )

        t_flat = None
        extras = {}
        self._proposer = None  # built once per block, on the first additive candidate
        for batch_leaves in (True, False) if one_family else ():
            cand = self._per_record(T_flat, stats, values, n, batch_leaves)
            if cand is None:
                continue
            ok, compiled = self._compile_and_check(
                model, ip, label, block_rvs, values, prop_vals, T_flat, cand, lw_cur, row_terms,
                n, compile_kwargs, stats, batch_leaves,
            )  # fmt: skip
            if ok:
                t_flat = cand
                fn, has_extra, extras = compiled
                break
        generic = t_flat is None
        check_t = extras.pop("check_t", None)
        if generic:
            fn, has_extra = self._build_generic(
                model, ip, label, releases, values, prop_vals, T_flat, z, lw_cur, row_terms, n,
                compile_kwargs, sens, l2,
            )  # fmt: skip
        block = _Block(
            names=names,
            n=n,
            release_names=[r.name for r in releases],
            z=z,
            params=params,
            logpdf=logpdf,
            fn=fn,
            has_extra=has_extra,
            generic=generic,
            sens=sens,
            comp_release=np.ascontiguousarray(comp_release, dtype=np.int64),
            l2=l2,
            families=[m.family for m in mechs],
            **extras,
        )
        if check_t is not None:
            # the records tried at construction (current ones and records made to differ)
            t_a, t_b = check_t
            _check_sensitivity(block, t_a, t_b, np.arange(n, dtype=np.int64), n, label)
        return block

    def _check_rows_randomized(
        self, model, ip, values, prop_vals, row_terms, n, label, undecided, ck
    ) -> None:
        """Numerical independence check for terms the structural analysis cannot decide.

        Made at random values of the other (float) variables, around the initial point with
        unit-scale perturbations on the transformed scale, with random current records drawn
        there (never only at the initial point, where a coupling coefficient may vanish).
        At least three such points must give finite terms, else the model is refused.
        """
        rows_fn = compile(model.value_vars, pt.stack(row_terms), on_unused_input="ignore", **ck)
        prop_fn = compile(model.value_vars, prop_vals, on_unused_input="ignore", **ck)
        rng = np.random.default_rng(20261123)
        _reseed(prop_fn, rng)
        pos = [self._input_names.index(v.name) for v in values]
        base = [np.asarray(ip[nm]) for nm in self._input_names]
        what = ", ".join(
            f"{rv.name!r} (operation {type(u.node.op).__name__})" for rv, u in undecided
        )
        made = 0
        for _ in range(8):
            args = list(base)
            for i, a in enumerate(args):
                if i not in pos and np.issubdtype(a.dtype, np.floating):
                    args[i] = np.asarray(a + rng.normal(size=a.shape), dtype=a.dtype)
            try:
                cur = [np.array(r) for r in prop_fn(*args)]
                alt, changed = _differing_records(
                    lambda a=args: [np.array(r) for r in prop_fn(*a)], cur, n
                )
            except Exception:
                continue

            def rows_at(recs, a=args):
                a = list(a)
                for p_, r in zip(pos, recs, strict=True):
                    a[p_] = r
                return np.asarray(rows_fn(*a), dtype=np.float64)

            if not np.all(np.isfinite(rows_at(cur))) or not changed.any():
                continue
            _check_rows(rows_at, cur, alt, changed, n, label)
            made += 1
            if made == 3:
                return
        raise ValueError(
            f"records [{label}]: DataAugmentation cannot decide whether the records are "
            f"conditionally independent given the other variables: the log-density of {what} "
            "uses an operation whose effect on the record axis pymc_dp cannot analyse, and a "
            "numerical check at random values of the other variables could not be made. " + _RESTATE
        )

    def _build_generic(
        self, model, ip, label, releases, values, prop_vals, T_flat, z, lw_cur, row_terms, n, ck,
        sens, l2,
    ):  # fmt: skip
        """Exact path for a statistic that is not a sum over records: recompute T per record.

        One compiled function runs the whole sweep as a ``scan`` over records: record ``i`` is
        swapped into the current records, the statistic recomputed (O(n) per record, O(n^2) per
        sweep) and the swap accepted with the release density ratio (mechanism ``logpdf_pt``).
        """
        names = [v.name for v in values]
        pos = [self._input_names.index(nm) for nm in names]
        args = [np.asarray(ip[name]) for name in self._input_names]
        prop_fn = compile(model.value_vars, prop_vals, on_unused_input="ignore", **ck)
        rows_fn = compile(model.value_vars, pt.stack(row_terms), on_unused_input="ignore", **ck)
        _reseed(prop_fn, np.random.default_rng(12345))
        cur = [args[p_] for p_ in pos]
        try:
            alt, changed = _differing_records(lambda: [np.array(r) for r in prop_fn(*args)], cur, n)
        except Exception as err:
            raise ValueError(
                f"record variable(s) [{label}] cannot be forward-sampled given their parents, "
                f"so DataAugmentation cannot propose them: {type(err).__name__}: {err}"
            ) from err

        def rows_at(recs):
            a = list(args)
            for p_, r in zip(pos, recs, strict=True):
                a[p_] = r
            return np.asarray(rows_fn(*a), dtype=np.float64)

        _check_rows(rows_at, cur, alt, changed, n, label)

        mechs = [r.owner.op.mechanism for r in releases]
        sizes = [int(np.prod(np.shape(extract_obs_data(model.rvs_to_values[r])))) for r in releases]
        z_c = pt.as_tensor(np.asarray(z, dtype=np.float64))

        def log_eta(T):
            out, k = pt.as_tensor(np.float64(0.0)), 0
            for mech, size in zip(mechs, sizes, strict=True):
                out = out + mech.logpdf_pt(z_c[k : k + size] - T[k : k + size]).sum()
                k += size
            return out

        has_extra = not _is_zeros(lw_cur)
        value_to_prop = dict(zip(values, prop_vals, strict=True))
        extra = (
            graph_replace(lw_cur, value_to_prop, strict=False) - lw_cur
            if has_extra
            else pt.zeros((n,), "float64")
        )
        log_u = pt.vector("log_u", dtype="float64")
        props = list(prop_vals)
        cur_T = T_flat

        k = len(values)
        # per-release change of the statistic, relative to the declared sensitivity
        sens_c = pt.as_tensor(np.asarray(np.where(np.isfinite(sens), sens, 1.0), np.float64))
        checked = [bool(np.isfinite(s_)) for s_ in sens]

        def excess(dT):
            ratios, k0 = [], 0
            for r, size in enumerate(sizes):
                part = dT[k0 : k0 + size]
                k0 += size
                if not checked[r]:
                    ratios.append(pt.as_tensor(np.float64(0.0)))
                    continue
                norm = pt.sqrt(pt.sum(part**2)) if l2[r] else pt.sum(pt.abs(part))
                ratios.append(norm / sens_c[r])
            return pt.stack(ratios)

        def body(i, lu, ex, lp_cur, T_cur, *rest):
            cur, props_in = rest[:k], rest[k:]
            swapped = [pt.set_subtensor(c[i], p_[i]) for c, p_ in zip(cur, props_in, strict=True)]
            T_new = graph_replace(cur_T, dict(zip(values, swapped, strict=True)), strict=False)
            lp_new = log_eta(T_new)
            log_r = lp_new - lp_cur + ex
            acc = pt.lt(lu, log_r)
            prob = pt.exp(pt.minimum(log_r, 0.0))
            new = [pt.switch(acc, s_, c) for s_, c in zip(swapped, cur, strict=True)]
            return [
                pt.switch(acc, lp_new, lp_cur),
                pt.switch(acc, T_new, T_cur),
                *new,
                pt.cast(acc, "float64"),
                prob,
                excess(T_new - T_cur),
            ]

        lp0 = log_eta(T_flat)
        outs = pytensor.scan(
            body,
            sequences=[pt.arange(n), log_u, extra],
            outputs_info=[lp0, T_flat, *values, None, None, None],
            non_sequences=props,
            return_updates=False,
        )
        final = [o[-1] for o in outs[2 : 2 + len(values)]]
        acc_seq, prob_seq, exc_seq = outs[-3], outs[-2], outs[-1]
        fn = compile(
            [*model.value_vars, log_u],
            [*final, acc_seq.sum(), prob_seq.min(), prob_seq.mean(), exc_seq],
            on_unused_input="ignore",
            **ck,
        )
        return fn, has_extra

    @staticmethod
    def _per_record(T_flat, stats, values, n, batch_leaves, recs=None):
        """Graph of t(x_i) for all i, shape (n, m): the statistic on one-record data sets.

        With ``recs`` (value var -> replacement), t is evaluated at the replacement records
        (e.g. the proposals) instead of the value variables.
        """

        def rows(v):
            return v if recs is None else recs.get(v, v)

        replace = {v: pt.expand_dims(rows(v), 1) for v in values}
        if batch_leaves:
            for leaf in graph_inputs(stats):
                if leaf in replace or isinstance(leaf.type, RandomType):
                    continue
                if isinstance(leaf, Constant):
                    shape = np.shape(leaf.data)
                elif isinstance(leaf, SharedVariable):
                    shape = np.shape(leaf.get_value(borrow=True))
                else:
                    continue
                if len(shape) >= 1 and shape[0] == n:
                    replace[leaf] = pt.expand_dims(rows(leaf), 1)
        try:
            t = vectorize_graph(T_flat, replace=replace)
        except Exception:
            return None
        if t.type.ndim != 2:
            return None
        return t

    def _make_proposer(self, model, ip, block_rvs, values, prop_vals, label, ck):
        """A :class:`_DirectProposer` when every record variable allows it, else compiled."""
        specs = [] if self._direct_proposals else None
        ip_args = [np.asarray(ip[nm]) for nm in self._input_names]

        def fixed(outs):
            return all(isinstance(i, Constant) for i in graph_inputs(outs))

        for rv, v in zip(block_rvs, values, strict=True):
            if specs is None:
                break
            op = rv.owner.op
            if not isinstance(op, RandomVariable) or model.rvs_to_transforms.get(rv) is not None:
                specs = None
                break
            size = op.size_param(rv.owner)
            dist = model.replace_rvs_by_values(list(op.dist_params(rv.owner)))
            outs = list(dist)
            size_spec = None
            if not isinstance(size.type, NoneTypeT):
                if fixed([size]):
                    size_spec = tuple(int(i) for i in compile([], size, **ck)())
                else:
                    outs.append(model.replace_rvs_by_values([size])[0])
                    size_spec = "fn"
            try:
                fn = compile(model.value_vars, outs, on_unused_input="ignore", **ck)
            except Exception:
                specs = None
                break
            fn.trust_input = True
            kind = _draw_kind(op)
            const = None
            if fixed(outs):
                # parameters fixed by the model: evaluated (and checked) once
                const = [np.asarray(o) for o in fn(*ip_args)]
                fn = None
                if kind == "normal" and (const[1] < 0).any():
                    kind = None  # rng_fn raises numpy's own error
            specs.append(
                [self._input_names.index(v.name), np.dtype(v.dtype), op, fn, const, size_spec,
                 kind]
            )  # fmt: skip
        if specs is not None:
            return _DirectProposer(specs)
        try:
            fn = compile(model.value_vars, prop_vals, on_unused_input="ignore", **ck)
        except Exception as err:
            raise ValueError(
                f"record variable(s) [{label}] cannot be forward-sampled given their parents, "
                f"so DataAugmentation cannot propose them: {type(err).__name__}: {err}"
            ) from err
        fn.trust_input = True
        return _CompiledProposer(fn)

    def _compile_and_check(
        self,
        model,
        ip,
        label,
        block_rvs,
        values,
        prop_vals,
        T_flat,
        t_flat,
        lw_cur,
        row_terms,
        n,
        ck,
        stats,
        batch_leaves,
    ):
        # t at given records (the proposals, or the current records when the cache is empty)
        recs_in = [v.type(name=f"{v.name}_records") for v in values]
        value_to_recs = dict(zip(values, recs_in, strict=True))
        t_recs = self._per_record(T_flat, stats, values, n, batch_leaves, value_to_recs)
        if t_recs is None:
            return False, None
        block_set = set(values)
        free_inputs = [
            i
            for i in graph_inputs([T_flat])
            if not isinstance(i, Constant | SharedVariable) and i not in block_set
        ]
        # T = C + sum_i t(x_i); C is a constant (checked below) unless T involves other
        # variables, in which case T is evaluated directly
        outputs = [pt.cast(t_recs, "float64")]
        has_extra = bool(lw_cur.owner is not None and not _is_zeros(lw_cur))
        if has_extra:
            outputs.append(graph_replace(lw_cur, value_to_recs, strict=False) - lw_cur)
        if free_inputs:
            outputs.append(T_flat)
        fn = compile([*model.value_vars, *recs_in], outputs, on_unused_input="ignore", **ck)
        fn.trust_input = True
        if self._proposer is None:
            self._proposer = self._make_proposer(model, ip, block_rvs, values, prop_vals, label, ck)
        proposer = self._proposer
        check = compile(
            model.value_vars,
            [T_flat, t_flat.sum(0), pt.stack(row_terms)],
            on_unused_input="ignore",
            **ck,
        )
        args = [np.asarray(ip[name]) for name in self._input_names]
        names = [v.name for v in values]
        pos = [self._input_names.index(nm) for nm in names]
        check_rng = np.random.default_rng(12345)
        proposer.reseed(check_rng)
        draws = []
        try:
            for _ in range(2):
                draws.append(proposer.draw(args, check_rng))
        except Exception as err:
            raise ValueError(
                f"record variable(s) [{label}] cannot be forward-sampled given their parents, "
                f"so DataAugmentation cannot propose them: {type(err).__name__}: {err}"
            ) from err
        for d, a in zip(draws[0], [args[p] for p in pos], strict=True):
            if d.shape != np.shape(a):
                return False, None

        def at(recs, base=args):
            a = list(base)
            for p, r in zip(pos, recs, strict=True):
                a[p] = r
            return [np.asarray(o, dtype=np.float64) for o in check(*a)]

        # 1. additivity: D(x) = T(x) - sum_i t(x_i) is the same constant at the current records,
        # at two draws, and at configurations built from records that (really) differ from the
        # current ones: all records changed, each of up to 16 records changed alone, and random
        # halves changed. Sparse records (Bernoulli(0.01)) rarely change in a draw, so the
        # changed records are searched for (further draws, then a neighbouring discrete value);
        # a record that cannot be changed makes the check inconclusive: generic path.
        cur = [args[p] for p in pos]
        alt, changed = _differing_records(lambda: proposer.draw(args, check_rng), cur, n)
        if not changed.all():
            return False, None
        consts = _additive_consts(at, args, [cur, *draws, *_mixtures(cur, alt, n, check_rng)])
        if consts is None:
            return False, None
        const = np.ascontiguousarray(np.asarray(consts, dtype=np.float64).reshape(-1))
        if free_inputs:
            # T involves other variables: the decomposition must also hold at other values of
            # them (a coupling term whose coefficient is 0 at the initial point passes above),
            # checked at two random points with random records; else the exact generic path
            for _ in range(2):
                r_args = list(args)
                for i_, a_ in enumerate(r_args):
                    if i_ not in pos and np.issubdtype(np.asarray(a_).dtype, np.floating):
                        # an ndarray of the same dtype (the compiled functions trust input)
                        r_args[i_] = np.asarray(
                            a_ + check_rng.normal(size=np.shape(a_)), dtype=np.asarray(a_).dtype
                        )
                try:
                    r_cur = [np.array(r) for r in proposer.draw(r_args, check_rng)]
                    r_alt, _ = _differing_records(
                        lambda a=r_args: proposer.draw(a, check_rng), r_cur, n
                    )
                except Exception:
                    return False, None
                configs = [r_cur, *_mixtures(r_cur, r_alt, n, check_rng)]
                if _additive_consts(at, r_args, configs) is None:
                    return False, None

        # 2. conditional independence: changing record j changes only row j of the terms
        _check_rows(lambda recs: at(recs)[2], cur, alt, changed, n, label)
        t_cur_chk = np.ascontiguousarray(fn(*args, *cur)[0], dtype=np.float64)
        t_alt_chk = np.ascontiguousarray(fn(*args, *alt)[0], dtype=np.float64)
        extras = {
            "proposer": proposer,
            "const": const,
            "free_T": bool(free_inputs),
            "check_t": (t_alt_chk, t_cur_chk),
        }
        return True, (fn, has_extra, extras)

    # ------------------------------------------------------------------ sampling
    def _reset_rngs(self):
        for b in self._blocks:
            if b.generic:
                _reseed(b.fn, self.rng)
            else:
                b.proposer.reseed(self.rng)
                b.clear_cache()

    def setup_chain(self, rng, tune, draws):
        """Set the per-chain generator and re-derive the proposal generators from it."""
        super().setup_chain(rng, tune, draws)
        self._reset_rngs()

    def step(self, point):
        """One sweep over all records of all blocks (the incoming point is not modified)."""
        new_point = dict(point)
        n_acc = 0
        n_tot = 0
        min_prob = 1.0
        sum_prob = 0.0
        for b in self._blocks:
            args = [new_point[name] for name in self._input_names]
            if b.generic:
                res = b.fn(*args, np.log(self.rng.random(b.n)))
                k = len(b.names)
                for name, val in zip(b.names, res[:k], strict=True):
                    new_point[name] = np.array(val, dtype=new_point[name].dtype)
                exc = np.asarray(res[k + 3])  # (n, R): change / declared sensitivity
                if exc.size and exc.max() > 1.0 + 1e-9:
                    i, r = np.unravel_index(int(np.argmax(exc)), exc.shape)
                    raise ValueError(
                        _sensitivity_message(b, int(i), int(r), float(exc[i, r] * b.sens[r]))
                    )
                n_acc += int(res[k])
                n_tot += b.n
                min_prob = min(min_prob, float(res[k + 1]))
                sum_prob += float(res[k + 2]) * b.n
                continue
            acc, mn, mean = self._sweep_additive(b, args, new_point)
            n_acc += acc
            n_tot += b.n
            min_prob = min(min_prob, mn)
            sum_prob += mean * b.n
        stats = {
            "da_accept_rate": float(n_acc / n_tot),
            "da_accept_mean": float(sum_prob / n_tot),
            "da_accept_min": float(min_prob),
        }
        return new_point, [stats]

    def _sweep_additive(self, b, args, new_point):
        """One sweep of a block whose statistic is ``C + sum_i t(x_i)`` (updates new_point)."""
        cur = [new_point[name] for name in b.names]
        # t of the current records: cached from the previous sweep when these are the very
        # arrays it returned (and T involves no other variable), else evaluated (first, so that
        # nothing computed below can share memory with an output of this extra call)
        last = b.last
        if (
            b.free_T
            or last is None
            or len(last) != len(cur)
            or any(a is not c for a, c in zip(last, cur, strict=True))
        ):
            t_cur = np.array(b.fn(*args, *cur)[0], dtype=np.float64, order="C")
        else:
            t_cur = b.t_cur
        props = b.proposer.draw(args, self.rng)
        res = b.fn(*args, *props)
        t_prop = res[0]
        if not t_prop.flags.c_contiguous:
            t_prop = np.ascontiguousarray(t_prop)
        extra = np.ascontiguousarray(res[1], dtype=np.float64) if b.has_extra else b.zeros
        stat = np.empty_like(b.const)
        count = changed_records(t_prop, t_cur, extra, b.const, stat, b.idx)
        _check_sensitivity(b, t_prop, t_cur, b.idx, count, None)
        if b.free_T:
            stat = np.array(res[-1], dtype=np.float64).reshape(-1)
        u = self.rng.random(out=b.u[:count])
        sweep = specialized_da_sweep_cached(b.logpdf, b.shared)
        acc, mn, mean, n_rej = sweep(
            stat, b.z, t_prop, t_cur, extra, b.idx, count, u, b.params, b.rejected
        )
        # the proposal arrays are fresh: they become the new records, with the rejected rows
        # restored from the current ones
        rej = b.rejected[:n_rej]
        for name, prop, c in zip(b.names, props, cur, strict=True):
            prop[rej] = c[rej]
            new_point[name] = prop
        b.t_cur = t_cur
        b.last = props
        return acc, mn, mean

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


def _additive_consts(at, args, configs):
    """``T - sum_i t(x_i)`` if it is the same (finite) at every record configuration, else None.

    ``at(recs, args)`` returns ``[T, sum_i t(x_i), rows]`` with the records ``recs`` put into
    the point ``args``.
    """
    consts = []
    for recs in configs:
        T, tsum, _ = at(recs, args)
        if T.shape != tsum.shape:
            return None
        consts.append((T - tsum, np.abs(T).max(initial=0.0) + np.abs(tsum).max(initial=0.0)))
    scale = 1.0 + max(s for _, s in consts)
    if not all(
        np.all(np.isfinite(c)) and np.abs(c - consts[0][0]).max(initial=0.0) <= _RTOL * scale
        for c, _ in consts
    ):
        return None
    return consts[0][0]


def _record_differs(a, b, n) -> np.ndarray:
    """Boolean (n,): whether record i (row i of every array) differs between ``a`` and ``b``."""
    out = np.zeros(n, dtype=bool)
    for x, y in zip(a, b, strict=True):
        out |= np.reshape(x != y, (n, -1)).any(axis=1)
    return out


def _differing_records(draw, cur, n, tries=8):
    """Records that differ from the current ones ``cur`` in as many records as possible.

    Starts from a draw of ``draw()`` (a list of arrays, one per record variable); a record equal
    to its current value is replaced, jointly across the variables, by its value in the first of
    up to ``tries - 1`` further draws where it differs. Discrete records that are still equal
    (sparse supports: Bernoulli(0.01) draws are nearly all 0) move to a neighbouring value
    (``v - 1`` for ``v >= 1``, else ``v + 1``; booleans are negated). Returns the records and
    the boolean (n,) mask of records that differ; continuous records that never change (a
    degenerate distribution) stay unchanged and are reported as such.
    """
    alt = [np.array(a, copy=True) for a in draw()]
    changed = _record_differs(alt, cur, n)
    for _ in range(tries - 1):
        if changed.all():
            break
        d = draw()
        new = _record_differs(d, cur, n) & ~changed
        for a, x in zip(alt, d, strict=True):
            a[new] = x[new]
        changed |= new
    if not changed.all():
        keep = ~changed
        for a, c in zip(alt, cur, strict=True):
            if a.dtype == np.bool_:
                a[keep] = ~c[keep]
            elif np.issubdtype(a.dtype, np.integer):
                v = c[keep]
                a[keep] = np.where(v >= 1, v - 1, v + 1)
        changed = _record_differs(alt, cur, n)
    return alt, changed


def _mixtures(cur, alt, n, rng, singles=16, halves=4):
    """Configurations mixing ``cur`` and ``alt`` record-wise: all of ``alt``; ``cur`` with one
    record from ``alt`` (every record when ``n <= singles``, else ``singles`` random ones
    including the first and the last); ``halves`` random halves of the records from ``alt``."""
    out = [alt]
    if n <= singles:
        js = np.arange(n)
    else:
        js = np.unique(np.r_[0, n - 1, rng.choice(n, singles - 2, replace=False)])
    for j in js:
        rec = []
        for c, a in zip(cur, alt, strict=True):
            r = c.copy()
            r[j] = a[j]
            rec.append(r)
        out.append(rec)
    for _ in range(halves):
        mask = rng.random(n) < 0.5
        out.append([np.where(np.reshape(mask, (n,) + (1,) * (c.ndim - 1)), a, c)
                    for c, a in zip(cur, alt, strict=True)])  # fmt: skip
    return out


def _check_rows(rows_at, cur, alt, changed, n, label) -> None:
    """Raise unless changing one record changes only that record's log-density terms.

    Records ``j`` of the current records ``cur`` are swapped one at a time for their values in
    ``alt`` (records flagged in ``changed`` differ); the other records' rows must stay the same.
    With no record that can be changed the check cannot be made, which is an error too.
    """
    differ = np.flatnonzero(changed)
    if len(differ) == 0:
        raise ValueError(
            f"records [{label}]: no record could be changed by forward draws, so "
            "DataAugmentation cannot check that they are conditionally independent given the "
            "other variables (is the record distribution degenerate?)"
        )
    base = rows_at(cur)
    picks = np.unique(np.linspace(0, len(differ) - 1, min(4, len(differ))).astype(int))
    for j in differ[picks]:
        recs = []
        for c, a in zip(cur, alt, strict=True):
            r = c.copy()
            r[j] = a[j]
            recs.append(r)
        rows = rows_at(recs)
        others = np.ones(n, dtype=bool)
        others[j] = False
        new, old = rows[:, others], base[:, others]
        same = (new == old) | (np.abs(new - old) <= _RTOL * (1.0 + np.abs(old)))
        if not np.all(same):
            raise ValueError(
                f"records [{label}] are not conditionally independent given the other "
                f"variables: changing record {j} changes the log-density terms of other "
                "records (a record's prior depends on another record, or an observed child "
                "couples records); DataAugmentation cannot sample them. " + _RESTATE
            )


_L2_FAMILIES = frozenset({"gaussian", "discrete_gaussian"})


def _check_sensitivity(b, t_new, t_old, idx, count, label) -> None:
    """Raise when replacing a listed record moves a release by more than its declared
    sensitivity (additive path; ``t_new``/``t_old``: (n, m) contributions)."""
    if b.sens is None or not np.isfinite(b.sens).any():
        return
    i, r, ch = sensitivity_excess(t_new, t_old, idx, count, b.comp_release, b.sens, b.l2)
    if i >= 0:
        raise ValueError(_sensitivity_message(b, int(i), int(r), float(ch)))


def _sensitivity_message(b, i, r, change) -> str:
    norm = "L2" if b.l2[r] else "L1"
    return (
        f"Release {b.release_names[r]!r}: replacing record {i} of [{', '.join(b.names)}] by "
        f"another value the model gives it moves the statistic by {change:.6g} ({norm} norm), "
        f"more than the declared sensitivity {b.sens[r]:.6g} of its {b.families[r]} mechanism, "
        "so the declared privacy guarantee (epsilon) does not hold for this statistic. Declare "
        "the sensitivity the statistic has (the largest change one record can make, e.g. 2 for "
        "2 * x.sum() of 0/1 records, 2 for a one-hot count vector in L1) or bound each record's "
        "contribution in the statistic (pt.clip)."
    )


_RESTATE = (
    "Restate the model so that the terms of record i read only row i of the record "
    "variables (align the rows of coupled variables, e.g. reorder data instead of writing "
    "x[::-1] or x[1:]; a process such as a random walk or a Markov chain can be written with "
    "its independent innovations as the records and the statistic in terms of them), put "
    "values that belong together in one record (a record variable of shape (n, k)), or sample "
    "the model without DataAugmentation (pass step=[...] to pm.sample, e.g. NUTS on a "
    "differentiable model)."
)


def _joint_message(rv, label, n, observed) -> str:
    """Message for a log-density with no record axis of length n (a joint law of the rows)."""
    if observed:
        what = (
            f"the log-likelihood of the observed variable {rv.name!r} is not a sum of "
            f"per-record terms (it has no record axis of length {n}): it reads all records "
            "at once"
        )
    else:
        what = (
            f"the log-density of {rv.name!r} is one joint term over its {n} rows (a random "
            "walk, an autoregressive process, a multivariate law over the record axis such as "
            f"an MvNormal of shape ({n},), ...), not a sum of per-record terms"
        )
    return (
        f"records [{label}] are not conditionally independent given the other variables: "
        f"{what}, so DataAugmentation cannot propose one record at a time. " + _RESTATE
    )


def _coupled_message(rv, label, state, observed) -> str:
    """Message for a per-record term that the structural analysis found coupled."""
    kind = "log-likelihood of the observed variable" if observed else "log-density of"
    return (
        f"records [{label}] are not conditionally independent given the other variables: the "
        f"{kind} {rv.name!r} {state.reason} (operation {state.node.op}), so the term of one "
        "record reads other records; this holds whatever the current parameter values (a "
        "coupling coefficient that is 0 at the initial point does not make it go away). " + _RESTATE
    )


def _is_zeros(var) -> bool:
    """Whether ``var`` is the literal zeros placeholder (no observed children)."""
    return getattr(var.tag, "pymc_dp_zeros", False)


def _default_mode():
    """The C virtual machine when a C compiler is configured, else PyTensor's default.

    The sweep function is called once per iteration on small arrays, so call overhead matters:
    with PyTensor's numba backend, passing the random generators into the compiled code costs
    about 130 microseconds per call; the C VM calls numpy's generators directly (~20-30 us).
    """
    if pytensor.config.cxx:
        return Mode(linker="cvm_nogc", optimizer="fast_run")
    return None


def _reseed(fn, rng) -> None:
    """Give the random generators of compiled function ``fn`` fresh states drawn from ``rng``."""
    for var in fn.get_shared():
        if isinstance(var.type, RandomGeneratorType):
            var.set_value(np.random.default_rng(rng.integers(2**63)), borrow=True)


def _partition(model, rvs, ip) -> list[list]:
    """Group record variables into blocks: same record axis length and linked.

    Two record variables are linked when one is a direct parent of the other, or when they
    appear together in the statistic of a Release.
    """
    rv_set = set(model.basic_RVs)
    free = set(model.free_RVs)
    lengths = {}
    for rv in rvs:
        if rv not in free:
            raise ValueError(f"{rv.name!r} is not a free variable of the model")
        shape = np.shape(ip[model.rvs_to_values[rv].name])
        if len(shape) == 0:
            raise ValueError(
                f"record variable {rv.name!r} is a scalar; DataAugmentation needs record "
                "variables with a leading record axis (shape (n, ...))"
            )
        lengths[rv] = shape[0]
    parent = {rv: rv for rv in rvs}

    def find(a):
        while parent[a] is not a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a, b):
        if lengths[a] != lengths[b]:
            return
        ra, rb = find(a), find(b)
        if ra is not rb:
            parent[rb] = ra

    rv_list = list(rvs)
    in_block = set(rv_list)
    for rv in rv_list:
        for p in _direct_rv_parents(rv, rv_set) & in_block:
            if lengths[p] != lengths[rv]:
                raise ValueError(
                    f"record variables {p.name!r} (n={lengths[p]}) and {rv.name!r} "
                    f"(n={lengths[rv]}) are parent and child with different record axes"
                )
            union(p, rv)
    for rel in model.observed_RVs:
        if is_release(rel):
            members = [v for v in record_parents(rel.owner.inputs[0]) if v in in_block]
            for a in members[1:]:
                union(members[0], a)
    groups: dict = {}
    for rv in rv_list:
        groups.setdefault(find(rv), []).append(rv)
    # model order inside and across blocks
    order = {rv: i for i, rv in enumerate(model.free_RVs)}
    blocks = [sorted(g, key=order.__getitem__) for g in groups.values()]
    return sorted(blocks, key=lambda g: order[g[0]])
