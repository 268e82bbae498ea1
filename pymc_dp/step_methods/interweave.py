r"""Non-centred interweaving move for Normal records behind a ``Release`` (issue 23).

Yu & Meng (2011), "To Center or Not to Center: That Is Not the Question -- An
Ancillarity-Sufficiency Interweaving Strategy (ASIS) for Boosting MCMC Efficiency", Journal of
Computational and Graphical Statistics 20(3), 531-570: componentwise interweaving of a
*centred* (sufficient) and a *non-centred* (ancillary) parameterization of the latent data.

Why
---
pymc_dp's default steps are a centred Gibbs scan: records given parameters
(:class:`~pymc_dp.step_methods.DataAugmentation`), then parameters given records
(:class:`~pymc_dp.step_methods.ConjugateGibbs`). When the release is noisy the records hold
almost all the information about the parameters that the chain "sees" (fraction of missing
information near 1) and the scan moves the parameters by about their *complete-data* posterior
standard deviation per iteration, far less than their posterior spread.

The move
--------
Normal records ``x = loc(theta) + scale(theta) * e`` with ``e`` iid standard normal a priori
(``loc`` may read earlier records: in a regression ``y``'s location reads the record ``X``,
so ``X(theta, e_X)`` is formed first and then ``y(theta, X(theta, e_X), e_y)``). In the
coordinates ``(theta, e)`` the joint density is

.. math::

    p(\theta, x(\theta, e)) \prod_i \mathrm{scale}_i(\theta),

the product running over every record element (the Jacobian of ``e -> x``). One call of the
step

1. computes ``e = (x - loc(theta)) / scale(theta)`` at the current point;
2. runs ``n_steps`` Metropolis-Hastings steps on ``theta`` (in PyMC's unconstrained value
   space) targeting ``log p_model(theta, x(theta, e)) + sum log scale(theta)`` with ``e``
   fixed: every model term is in the target (priors, the Release's density of the statistic
   of ``x(theta, e)``, other likelihood terms, Potentials), compiled from ``model.logp()`` by
   substituting the records by ``loc + scale * e``;
3. writes ``theta'`` and ``x = loc(theta') + scale(theta') e`` into the point.

This is an exact Metropolis-Hastings update of ``theta`` given ``e`` (and every other
variable), i.e. of a reparameterized state, so it leaves the posterior invariant; appended to
the centred steps it gives Yu & Meng's interweaving. The proposal is a Gaussian random walk
(:class:`pymc_dp.kernels.interweave.AdaptiveRWM`) whose covariance and scale adapt during
tuning only: after tuning the kernel is fixed.

Which models
------------
The records are those of :func:`pymc_dp.step_methods.claims.release_records` (what
DataAugmentation claims) that are untransformed continuous ``pm.Normal`` variables whose
location or scale reads a continuous free parameter (directly, or through another such record).
The parameters moved are the continuous free variables those locations and scales read. Other
records (Bernoulli, Poisson, ...) are left alone; a model without such Normal records, or
without an observed Release, gets no move (:func:`interweave_plan` returns None).

How ``pm.sample`` adds it
-------------------------
:func:`install_interweave_hook` wraps PyMC's ``instantiate_steppers`` (PyMC has no registry for
extra moves): after PyMC built the steps it selected itself, the move is appended to the
compound step when :func:`interweave_plan` finds Normal records, at least one of them is updated
by a :class:`~pymc_dp.step_methods.DataAugmentation` step (records that
:class:`~pymc_dp.step_methods.CollapsedRecords` integrates out need no such move), and the user
did not pass an ``Interweave`` step. It goes last, except before a last step that reports the
model log density (NUTS: ``CompoundStep`` keeps only the last step's, PyMC's ``lp``). Steps
passed explicitly with ``pm.sample(step=[...])`` covering every variable are left as they are
(add ``Interweave(model=m)`` to that list to get the move).

Turning it off: ``pm.sample(interweave=False)``. Options: ``pm.sample(interweave={"n_steps":
20})`` or ``pm.sample(interweave={"method": "hmc"})`` (keyword arguments of
:class:`Interweave`, PyMC's ``step_kwargs`` convention).

Measured (``benchmarks/results/interweave.md``, plain ``pm.sample()`` at PyMC's default lengths,
n = 100): on the Ju et al. (2022) regression at epsilon 0.1 / 1 / 10 the coefficients' bulk
ESS goes from 11 / 53 / 307 without the move to 1344 / 1525 / 1085 with it, 5 to 100 times
stock NUTS on the same model in ESS per second. Where the centred scan already mixes (Normal
records with epsilon 10) the move buys little for its cost, and with the default ``n_steps`` it
stops itself in the middle of tuning (see :class:`Interweave`'s ``n_steps``).

Sampler statistics: ``iw_accept`` (mean acceptance probability of the call's Metropolis-Hastings
steps; NaN once the move has stopped) and ``iw_scale`` (the first block's current proposal
scale factor ``s``; with ``method="hmc"`` the leapfrog step size).

Examples
--------
>>> import numpy as np, pymc as pm, pymc_dp as pmdp
>>> from pymc_dp.step_methods.interweave import Interweave, interweave_plan
>>> with pm.Model() as m:
...     mu = pm.Normal("mu", np.float64(0.0), np.float64(1.0))
...     x = pm.Normal("x", mu, np.float64(1.0), shape=4)
...     _ = pmdp.Release("z", x.sum(), pmdp.Gaussian(sigma=2.0), observed=np.float64(1.5))
>>> plan = interweave_plan(m)
>>> [v.name for v in plan.records], [v.name for v in plan.parameters]
(['x'], ['mu'])
>>> step = Interweave(model=m, rng=1)
>>> point, stats = step.step(m.initial_point())
>>> sorted(point), 0.0 <= stats[0]["iw_accept"] <= 1.0
(['mu', 'x'], True)
"""

from __future__ import annotations

import math
import warnings
from typing import ClassVar, NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.pytensorf import compile as pm_compile
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import NormalRV

from pymc_dp._pymc_hooks import ForgetsInitialPoint, wrap_module_function
from pymc_dp.kernels.interweave import AdaptiveRWM, hmc_transition
from pymc_dp.step_methods.claims import direct_rv_parents, observed_releases, release_records

__all__ = [
    "Interweave",
    "InterweavePlan",
    "InterweaveState",
    "hook_installed",
    "install_interweave_hook",
    "interweave_plan",
    "uninstall_interweave_hook",
]

#: PyMC's ``instantiate_steppers`` before the hook wrapped it
_PYMC_INSTANTIATE = None


class InterweavePlan(NamedTuple):
    """What the move transforms and moves (:func:`interweave_plan`)."""

    records: list
    """Normal record variables, in the model's (topological) order."""
    parameters: list
    """Continuous free parameters their locations and scales read."""
    blocks: list
    """The parameters grouped by the records they are direct parents of (lists of
    parameters, in ``parameters`` order): the blocks of the componentwise move."""


def _is_continuous(var) -> bool:
    return var.dtype.startswith("float")


def interweave_plan(model=None, parameters=None) -> InterweavePlan | None:
    """The records and parameters of the interweaving move in ``model``, or None.

    Parameters
    ----------
    model : pm.Model, optional
        Default: the model in context.
    parameters : list of random variables, optional
        Restrict the moved parameters to these (default: every eligible one).

    Returns
    -------
    InterweavePlan or None
        None when the model holds no observed Release, no untransformed continuous Normal
        record, or no record location/scale that reads a continuous free parameter.

    Examples
    --------
    Bernoulli records get no move:

    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
    ...     x = pm.Bernoulli("x", p, shape=5)
    ...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=np.float64(2.0))
    >>> interweave_plan(m) is None
    True
    """
    model = modelcontext(model)
    if not observed_releases(model):
        return None
    records = release_records(model)
    if not records:
        return None
    free = list(model.free_RVs)
    free_set, basic = set(free), set(model.basic_RVs)
    allowed = None if parameters is None else set(parameters)
    normal = [
        rv
        for rv in free
        if rv in records
        and isinstance(getattr(rv.owner, "op", None), NormalRV)
        and model.rvs_to_transforms.get(rv) is None
        and _is_continuous(rv)
    ]
    params, moved, parents_of = [], [], {}
    for rv in normal:  # free_RVs are in creation order: parents come first
        parents = direct_rv_parents(rv, basic)
        own = [
            p
            for p in parents
            if p in free_set
            and p not in records
            and _is_continuous(p)
            and (allowed is None or p in allowed)
        ]
        if own or any(p in moved for p in parents):
            moved.append(rv)
            params.extend(p for p in own if p not in params)
            for p in own:
                parents_of.setdefault(p, set()).add(rv)
    if not params:
        return None
    order = {rv: i for i, rv in enumerate(free)}
    params = sorted(params, key=order.__getitem__)
    groups: dict = {}
    for p in params:
        groups.setdefault(frozenset(parents_of[p]), []).append(p)
    return InterweavePlan(records=moved, parameters=params, blocks=list(groups.values()))


#: the move stops (from the middle of tuning on) when its mean squared jump is below this
#: fraction of the rest of the scan's in every unconstrained coordinate (see ``n_steps``)
THIN_BELOW = 0.25


class _Jumps:
    """Mean squared jumps per unconstrained coordinate during the second quarter of tuning: of
    the move (``theta`` after the call minus before) and of the rest of the scan (``theta``
    before this call minus after the previous one)."""

    def __init__(self, dim: int):
        self.move = np.zeros(dim)
        self.scan = np.zeros(dim)
        self.count = 0
        self.calls = 0
        self.last = None

    def record(self, before: np.ndarray, after: np.ndarray, tune_len: int) -> bool:
        """Record one call; True at the call that ends the window (the middle of tuning)."""
        self.calls += 1
        if self.last is not None and 4 * self.calls > tune_len and 2 * self.calls <= tune_len:
            self.move += (after - before) ** 2
            self.scan += (before - self.last) ** 2
            self.count += 1
        self.last = after
        return 2 * self.calls == tune_len

    def thin(self) -> bool:
        """Whether the move moved less than :data:`THIN_BELOW` of the scan everywhere
        (at least 50 recorded calls; a coordinate the scan never moved keeps the move)."""
        if self.count < 50 or not np.all(self.scan > 0.0):
            return False
        return bool(np.all(self.move < THIN_BELOW * self.scan))

    def get_state(self) -> dict:
        last = None if self.last is None else self.last.copy()
        return {"move": self.move.copy(), "scan": self.scan.copy(), "count": self.count,
                "calls": self.calls, "last": last}  # fmt: skip

    def set_state(self, state: dict) -> None:
        self.move = np.array(state["move"], dtype=np.float64)
        self.scan = np.array(state["scan"], dtype=np.float64)
        self.count, self.calls = int(state["count"]), int(state["calls"])
        self.last = None if state["last"] is None else np.array(state["last"], np.float64)


@dataclass_state
class InterweaveState(StepMethodState):
    """Sampling state of :class:`Interweave`: the generator (``rng``), whether it tunes, and the
    proposal's adaptation (:meth:`pymc_dp.kernels.interweave.AdaptiveRWM.get_state`)."""

    tune: bool
    adaptation: list
    jumps: list


class Interweave(ForgetsInitialPoint, BlockedStep):
    r"""Non-centred interweaving move for Normal records (Yu & Meng 2011).

    See the module docstring for the algorithm; in short, with ``e = (x - loc) / scale`` held
    fixed, adaptive random-walk Metropolis-Hastings steps move the parameters
    ``theta`` under ``log p(theta, x(theta, e)) + sum log scale(theta)``, then the records are
    set to ``loc(theta) + scale(theta) e``.

    Parameters
    ----------
    vars : list, optional
        Parameters to move (random or value variables); default every eligible one
        (:func:`interweave_plan`). The records are found from the model.
    model : pm.Model, optional
    rng : seed or numpy Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    n_steps : int, optional
        Metropolis-Hastings (or HMC) transitions per call and parameter block, ``e`` fixed.
        Default ``max(10, 5 x block size)`` (block size in unconstrained coordinates). More
        steps mix better per iteration and cost more; on the benchmark models this default
        was close to the best bulk ESS per second (``benchmarks/results/interweave.md``).
        With the default, the move also measures during the second quarter of tuning how far
        it moves the parameters against how far the rest of the scan moves them (mean squared
        jump per unconstrained coordinate); where the move's jump is below
        :data:`THIN_BELOW` of the scan's in every coordinate (an informative release: the
        centred steps already mix, and the move's cost per iteration buys little), it stops
        from the middle of tuning on (``n_steps_per_block`` all 0). Fixed during tuning, so
        the chain is an ordinary fixed-kernel MCMC chain after it.
    method : {"rwm", "hmc"}, default "rwm"
        ``"rwm"``: Gaussian random walk with adapted covariance and scale
        (:class:`~pymc_dp.kernels.interweave.AdaptiveRWM`). ``"hmc"``: ``leapfrog`` leapfrog
        steps preconditioned by the same adapted covariance, gradients from PyTensor
        (:func:`~pymc_dp.kernels.interweave.hmc_transition`; one joint block). The random
        walk mixed as well per target evaluation and costs less per evaluation on the
        benchmark models, so it is the default.
    blocks : {"records", "joint"}, default "records"
        ``"records"``: the parameters are grouped by the records they are direct parents of
        (:attr:`InterweavePlan.blocks`) and each group is moved in turn, the componentwise
        interweaving of Yu & Meng (2011, section 4); ``"joint"``: one block.
    leapfrog : int, default 5
        Leapfrog steps per HMC transition (``method="hmc"`` only).
    init_sd : float, default 0.1
        Proposal standard deviation per unconstrained coordinate before the first covariance
        estimate.
    jacobian : bool, default True
        Include ``sum log scale(theta)``. ``False`` gives a *wrong* move, kept only as the
        negative control of the test suite.
    initial_point, compile_kwargs, blocked
        As PyMC passes them. ``compile_kwargs={"mode": ...}`` overrides the compile mode.

    Attributes
    ----------
    vars : list
        The parameters' value variables (what PyMC counts as assigned to this step).
    record_vars : list
        The records' value variables: rewritten by every call, but not assigned to the step,
        so ``pm.sample(step=[Interweave(model=m)])`` lets PyMC assign DataAugmentation to them
        (then the parameters are moved by this step only, which is exact on its own).

    Raises
    ------
    ValueError
        When the model has no eligible records or parameters (see :func:`interweave_plan`).

    Notes
    -----
    ``pm.sample`` appends the move by itself once :func:`install_interweave_hook` ran.
    Adaptation happens only while ``self.tune`` is true (set from ``setup_chain``'s ``tune``
    and cleared by ``stop_tuning``); each chain starts from the same untrained proposal, so
    chains do not depend on each other and ``cores=1`` and ``cores=2`` give the same draws.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.step_methods.interweave import Interweave
    >>> with pm.Model() as m:
    ...     v = pm.InverseGamma("v", np.float64(3.0), np.float64(2.0))
    ...     mu = pm.Normal("mu", np.float64(0.0), pm.math.sqrt(v))
    ...     x = pm.Normal("x", mu, pm.math.sqrt(v), shape=10)
    ...     _ = pmdp.Release("z", pm.math.clip(x, -2.0, 2.0).sum(),
    ...                      pmdp.Laplace(epsilon=1.0, sensitivity=4.0), observed=np.float64(3.0))
    ...     step = Interweave(model=m, n_steps=3, rng=2)
    >>> [v.name for v in step.vars], [v.name for v in step.record_vars]
    (['v_log__', 'mu'], ['x'])
    >>> pt, st = step.step(m.initial_point())
    >>> pt["x"].shape, sorted(st[0])
    ((10,), ['iw_accept', 'iw_scale'])
    """

    name = "interweave"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {
        "iw_accept": (np.float64, []),
        "iw_scale": (np.float64, []),
    }
    _state_class = InterweaveState

    def __init__(
        self,
        vars=None,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        n_steps: int | None = None,
        method: str = "rwm",
        blocks: str = "records",
        leapfrog: int = 5,
        init_sd: float = 0.1,
        jacobian: bool = True,
    ):
        model = modelcontext(model)
        if method not in ("rwm", "hmc"):
            raise ValueError(f"method must be 'rwm' or 'hmc', got {method!r}")
        self.method = method
        self.leapfrog = int(leapfrog)
        if self.leapfrog < 1:
            raise ValueError(f"leapfrog must be >= 1, got {leapfrog!r}")
        if blocks not in ("records", "joint"):
            raise ValueError(f"blocks must be 'records' or 'joint', got {blocks!r}")
        self.blocks = "joint" if method == "hmc" else blocks
        if n_steps is not None and int(n_steps) < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps!r}")
        self.jacobian = bool(jacobian)
        requested = None
        if vars is not None:
            values = get_value_vars_from_user_vars(vars, model)
            requested = [model.values_to_rvs[v] for v in values]
        plan = interweave_plan(model, requested)
        if plan is None:
            raise ValueError(
                "Interweave: the model has no continuous pm.Normal record of an observed "
                "Release whose location or scale reads a continuous free parameter"
                + ("" if requested is None else " among the variables given")
            )
        self.plan_names = (
            [model.rvs_to_values[p].name for p in plan.parameters],
            [model.rvs_to_values[r].name for r in plan.records],
        )
        # ``vars`` are the parameters only: the records move along with them, but are not
        # *assigned* to this step, so that ``pm.sample(step=[Interweave(...)])`` still gets
        # PyMC's own choice (DataAugmentation) for the records and the chain stays ergodic
        self.vars = [model.rvs_to_values[v] for v in plan.parameters]
        self.record_vars = [model.rvs_to_values[v] for v in plan.records]
        self.blocked = True
        self.rng = get_random_generator(rng)
        self.tune = True
        ip = model.initial_point() if initial_point is None else initial_point
        # PyTensor's default (numba) backend: the target is called several times per
        # iteration and numba's call is the cheapest (regression benchmark: 5 us against 20 us
        # for the C VM per evaluation)
        ck = dict(compile_kwargs or {})
        with warnings.catch_warnings():
            # the C backend warns once per process when it finds no BLAS: the move's linear
            # algebra is on small arrays
            warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
            self._build(model, plan, ip, ck)
            self._warm_up(ip)
        if self.blocks == "joint":
            groups = [np.arange(self._dim)]
        else:
            where = {name: np.arange(a, b) for name, a, b, *_ in self._layout}
            groups = [
                np.concatenate([where[model.rvs_to_values[p].name] for p in block])
                for block in plan.blocks
            ]
        self._kernels = [
            (
                idx,
                AdaptiveRWM(
                    idx.size, init_sd=init_sd, target_accept=0.7 if method == "hmc" else None
                ),
                max(10, 5 * idx.size) if n_steps is None else int(n_steps),
            )
            for idx in groups
        ]
        self._n_steps_chosen = [n for *_, n in self._kernels]
        self._auto_steps = n_steps is None
        self._tune_len = 0
        self._jumps = _Jumps(self._dim)

    # ------------------------------------------------------------------ compilation
    def _build(self, model, plan, ip, ck) -> None:
        values = model.rvs_to_values
        p_vals = [values[p] for p in plan.parameters]
        r_vals = [values[r] for r in plan.records]
        dist = []
        for r in plan.records:
            loc, scale = r.owner.op.dist_params(r.owner)
            dist += [loc, scale]
        dist = model.replace_rvs_by_values(dist)
        locs, scales = dist[0::2], dist[1::2]
        noises = [v.type(name=f"{v.name}_noise") for v in r_vals]

        # records as functions of (theta, e): earlier records substituted into later ones
        x_of, xs, jac_terms = {}, [], []
        for v, e, loc, scale in zip(r_vals, noises, locs, scales, strict=True):
            if x_of:
                loc, scale = graph_replace([loc, scale], x_of, strict=False)
            x = pt.cast(loc + scale * e, v.dtype)
            x_of[v] = x
            xs.append(x)
            jac_terms.append((pt.log(scale) * pt.ones_like(e)).sum())
        logp = graph_replace(model.logp(), x_of, strict=False)
        jac = pt.add(*jac_terms) if len(jac_terms) > 1 else jac_terms[0]

        # parameters as slices of one float64 vector
        theta = pt.vector("theta", dtype="float64")
        pieces, layout, off = {}, [], 0
        for v in p_vals:
            shape = tuple(np.shape(ip[v.name]))
            size = int(np.prod(shape, dtype=np.int64))
            pieces[v] = pt.cast(theta[off : off + size].reshape(shape), v.dtype)
            layout.append((v.name, off, off + size, shape, v.dtype))
            off += size
        self._layout = layout
        self._dim = off
        target = logp + jac if self.jacobian else logp
        outs = graph_replace([target, logp, *xs], pieces, strict=False)
        value_set = set(model.value_vars)
        others = [
            v for v in graph_inputs(outs) if v in value_set and v not in pieces and v not in x_of
        ]
        leftover = [v for v in graph_inputs(outs) if v in pieces or v in x_of]
        if leftover:  # pragma: no cover - graph_replace left a variable behind
            raise RuntimeError(f"Interweave: {leftover} not substituted")
        others = sorted(set(others), key=lambda v: v.name)
        self._other_names = [v.name for v in others]
        extra = [pt.cast(pytensor.grad(outs[0], theta), "float64")] if self.method == "hmc" else []
        self._target = pm_compile(
            [theta, *noises, *others],
            [pt.cast(outs[0], "float64"), pt.cast(outs[1], "float64"), *extra, *outs[2:]],
            **ck,
        )
        self._target.trust_input = True

        # e = (x - loc) / scale at the current point
        e_outs = [  # in the record's dtype: the target's noise inputs have the record's type
            pt.cast((v - loc) / scale, v.dtype)
            for v, loc, scale in zip(r_vals, locs, scales, strict=True)
        ]
        e_inputs = sorted({v for v in graph_inputs(e_outs) if v in value_set}, key=lambda v: v.name)
        self._noise_input_names = [v.name for v in e_inputs]
        self._noise = pm_compile(e_inputs, e_outs, **ck)
        self._noise.trust_input = True
        self._record_names = [v.name for v in r_vals]

    def _warm_up(self, ip) -> None:
        """Call the compiled functions once at the initial point: PyTensor's numba backend
        compiles at the first call, which then happens here (as NUTS compiles before sampling)
        and not inside the first iteration. Failures are left to the first real call."""
        try:
            noises = self._noise(*[np.asarray(ip[n]) for n in self._noise_input_names])
            others = [np.asarray(ip[n]) for n in self._other_names]
            self._target(self._theta(ip), *noises, *others)
        except Exception:  # the step's own call reports it, with its context
            pass

    # ------------------------------------------------------------------ sampling
    def setup_chain(self, rng, tune, draws):
        """Per-chain generator; the proposal starts untrained; tune iff ``tune > 0``."""
        super().setup_chain(rng, tune, draws)
        self.tune = bool(tune)
        self._tune_len = int(tune or 0)
        self.reset_tuning()

    def reset_tuning(self):
        """Forget the adaptation (PyMC calls it at the start of a chain)."""
        self._kernels = [
            (idx, kern, n)
            for (idx, kern, _), n in zip(self._kernels, self._n_steps_chosen, strict=True)
        ]
        for _, kern, _ in self._kernels:
            kern.reset()
        self._jumps = _Jumps(self._dim)

    def stop_tuning(self):
        """Freeze the proposal: from here on the kernel is a fixed MH kernel."""
        self.tune = False

    @property
    def jumps(self) -> list:
        """The tuning-time jump sums (part of :class:`InterweaveState`)."""
        return [self._jumps.get_state(), [n for *_, n in self._kernels]]

    @jumps.setter
    def jumps(self, state: list) -> None:
        self._jumps.set_state(state[0])
        self._kernels = [
            (idx, kern, int(n)) for (idx, kern, _), n in zip(self._kernels, state[1], strict=True)
        ]

    @property
    def n_steps_per_block(self) -> list:
        """Metropolis-Hastings steps per call for each parameter block."""
        return [n for _, _, n in self._kernels]

    @property
    def adaptation(self) -> list:
        """The proposals' adaptation states, one per block (part of :class:`InterweaveState`)."""
        return [kern.get_state() for _, kern, _ in self._kernels]

    @adaptation.setter
    def adaptation(self, states: list) -> None:
        for (_, kern, _), state in zip(self._kernels, states, strict=True):
            kern.set_state(state)

    def _theta(self, point) -> np.ndarray:
        return np.concatenate(
            [np.asarray(point[name], dtype=np.float64).ravel() for name, *_ in self._layout]
        )

    def step(self, point):
        """``n_steps`` Metropolis-Hastings steps of the parameters with the standardised
        records held fixed; the records follow the parameters. The incoming arrays are not
        modified."""
        if not any(n for *_, n in self._kernels):  # stopped (see ``n_steps``)
            scale = math.exp(self._kernels[0][1].log_scale)
            return dict(point), [{"iw_accept": math.nan, "iw_scale": scale}]
        noises = self._noise(*[np.asarray(point[n]) for n in self._noise_input_names])
        others = [np.asarray(point[n]) for n in self._other_names]
        target = self._target
        theta = self._theta(point)
        theta_in = theta
        rng = self.rng
        moved, acc_sum, n_tot = False, 0.0, 0
        if self.method == "hmc":

            def fn(th):
                out = target(th, *noises, *others)
                lp = float(out[0])
                return (lp if math.isfinite(lp) else -math.inf), out[2], out

            _, kern, n_steps = self._kernels[0]
            lp, grad, best = fn(theta)
            for _ in range(n_steps):
                theta, lp, grad, best, a, acc = hmc_transition(
                    theta, lp, grad, best, fn, kern.factor, math.exp(kern.log_scale),
                    self.leapfrog, rng,
                )  # fmt: skip
                moved |= acc
                acc_sum += a
                if self.tune:
                    kern.adapt(theta, a)
            n_tot = n_steps
            records = best[3:] if moved else ()
        else:
            best = target(theta, *noises, *others)
            lp = float(best[0])
            if not math.isfinite(lp):
                lp = -math.inf
            for idx, kern, n_steps in self._kernels:
                # the call's random numbers at once; after tuning the proposal is fixed, so
                # its increments too
                z = rng.standard_normal((n_steps, idx.size))
                log_u = np.log(rng.uniform(size=n_steps))
                fixed = None if self.tune else z @ kern.chol.T
                for i in range(n_steps):
                    prop = theta.copy()
                    prop[idx] += kern.chol @ z[i] if fixed is None else fixed[i]
                    out_p = target(prop, *noises, *others)
                    lp_p = float(out_p[0])
                    log_r = lp_p - lp if math.isfinite(lp_p) else -math.inf
                    if log_r > log_u[i]:
                        theta, lp, best, moved = prop, lp_p, out_p, True
                    a = 1.0 if log_r >= 0.0 else math.exp(log_r)
                    acc_sum += a
                    if self.tune:
                        kern.adapt(theta[idx], a)
                n_tot += n_steps
            records = best[2:] if moved else ()
        if self.tune and self._auto_steps:
            if self._jumps.record(theta_in, theta, self._tune_len) and self._jumps.thin():
                self._kernels = [(idx, kern, 0) for idx, kern, _ in self._kernels]
        new_point = dict(point)
        if moved:
            for name, start, stop, shape, dtype in self._layout:
                new_point[name] = theta[start:stop].reshape(shape).astype(dtype)
            for name, x in zip(self._record_names, records, strict=True):
                new_point[name] = np.array(x)
        stats = {
            "iw_accept": acc_sum / n_tot,
            "iw_scale": math.exp(self._kernels[0][1].log_scale),
        }
        return new_point, [stats]

    @staticmethod
    def competence(var, has_grad=None):
        """Never chosen for a variable: the move is added besides the steps PyMC chose
        (:func:`install_interweave_hook`) or passed explicitly."""
        return Competence.INCOMPATIBLE


# ---------------------------------------------------------------------- pm.sample hook
def _flat_steps(steps) -> list:
    out = []
    for s in steps if isinstance(steps, list | tuple) else [steps]:
        out.extend(_flat_steps(s.methods) if hasattr(s, "methods") else [s])
    return out


def _instantiate_steppers(
    model, steps, selected_steps, *, step_kwargs=None, initial_point=None, compile_kwargs=None
):
    """PyMC's ``instantiate_steppers``, then the interweaving move appended (see
    :func:`install_interweave_hook`)."""
    step_kwargs = dict(step_kwargs or {})
    options = step_kwargs.pop(Interweave.name, True)
    provided = _flat_steps(list(steps))
    result = _PYMC_INSTANTIATE(
        model,
        steps,
        selected_steps,
        step_kwargs=step_kwargs,
        initial_point=initial_point,
        compile_kwargs=compile_kwargs,
    )
    if options is False or options is None:
        return result
    if options is True:
        options = {}
    if not isinstance(options, dict):
        raise TypeError(
            f"interweave= must be True, False or a dict of Interweave options, got {options!r}"
        )
    auto = any(vs for vs in selected_steps.values())
    if not auto or any(isinstance(s, Interweave) for s in provided):
        return result
    plan = interweave_plan(model)
    if plan is None:
        return result
    methods = list(result) if isinstance(result, list) else [result]
    # the move is for records updated by the centred data-augmentation scan; records that
    # another step samples otherwise (CollapsedRecords integrates them out) need none of it
    from pymc_dp.step_methods.data_augmentation import DataAugmentation

    augmented = {v.name for s in _flat_steps(methods) if isinstance(s, DataAugmentation)
                 for v in s.vars}  # fmt: skip
    if not any(model.rvs_to_values[r].name in augmented for r in plan.records):
        return result
    move = Interweave(
        model=model, initial_point=initial_point, compile_kwargs=compile_kwargs, **options
    )
    if "model_logp" in getattr(methods[-1], "stats_dtypes_shapes", {}):
        # CompoundStep keeps only the last step's model_logp (PyMC's lp): a last step that
        # reports one (NUTS) stays last, so that lp is the log density of the final point
        return [*methods[:-1], move, methods[-1]]
    return [*methods, move]


def install_interweave_hook() -> None:
    """Make ``pm.sample`` append :class:`Interweave` to the steps it builds (idempotent).

    PyMC has no registry for extra moves, so ``pymc.sampling.mcmc.instantiate_steppers`` is
    wrapped (:func:`pymc_dp._pymc_hooks.wrap_module_function`). The move is added when PyMC
    selected a step for at least one variable itself, no ``Interweave`` was passed,
    :func:`interweave_plan` finds Normal records and a DataAugmentation step updates one of
    them (see the module docstring for where it goes); ``pm.sample(interweave=False)`` turns
    it off, ``pm.sample(interweave={...})`` passes options to :class:`Interweave`.

    Examples
    --------
    >>> from pymc.sampling import mcmc
    >>> from pymc_dp.step_methods import interweave
    >>> was_installed = interweave.hook_installed()
    >>> interweave.install_interweave_hook()
    >>> interweave.install_interweave_hook()  # a second call changes nothing
    >>> mcmc.instantiate_steppers.__name__, interweave.hook_installed()
    ('_instantiate_steppers', True)
    >>> if not was_installed:  # leave PyMC as this example found it
    ...     interweave.uninstall_interweave_hook()
    """
    global _PYMC_INSTANTIATE
    from pymc.sampling import mcmc

    original = wrap_module_function([mcmc], "instantiate_steppers", _instantiate_steppers)
    if original is not None:
        _PYMC_INSTANTIATE = original


def hook_installed() -> bool:
    """Whether :func:`install_interweave_hook` is in effect."""
    from pymc.sampling import mcmc

    return mcmc.instantiate_steppers is _instantiate_steppers


def uninstall_interweave_hook() -> None:
    """Give PyMC back its own ``instantiate_steppers`` (no-op when the hook is not installed).

    For tests that must leave the process as they found it; users turn the move off per call
    with ``pm.sample(interweave=False)``.
    """
    from pymc.sampling import mcmc

    if hook_installed() and _PYMC_INSTANTIATE is not None:
        mcmc.instantiate_steppers = _PYMC_INSTANTIATE
