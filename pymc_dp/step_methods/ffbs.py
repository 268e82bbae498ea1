r"""Forward-filtering backward-sampling step for :class:`~pymc_dp.distributions.MarkovChain` states.

The step draws the whole latent path of every chain of a ``MarkovChain`` variable ``s`` at once,
exactly from

.. math::

    p(s \mid \text{rest}) \propto \text{MarkovChain}(s \mid \pi, P)
    \prod_{\text{children } y} p(y \mid s, \text{rest}),

given the current values of every other variable (a Gibbs block). ``pi`` and ``P`` are the
chain's parameters evaluated at the current point (constants or random variables). The
emission log-likelihood ``E[c, t, k]`` is the sum of the children's elementwise log-density
terms that depend on ``s[c, t]``, evaluated with ``s[c, t] = k``: the step evaluates the
children's terms with ``s`` set to ``k`` everywhere (``K`` compiled evaluations) and adds each
term element into the state element it depends on. The path is then drawn by
:func:`pymc_dp.kernels.ffbs.ffbs_sample`.

Which state element each child term element depends on is established once, when the step is
built (and when ``pm.sample`` asks for its competence), numerically, at two random state paths:
one with the model's other continuous variables jittered away from the initial point and one
with every other free variable drawn from the prior (so that couplings that vanish at the
initial point, such as equal emission rates or a discrete coefficient at 0, still show). At each,
the states whose flat index has bit ``b`` set are changed together, then those with it unset,
for every bit: a term element that depends on one state moves in exactly one half of every bit,
which spells the index of its state; one that moves in both halves of a bit depends on two
states. The attribution is then checked on 8 random subsets of states (each must move exactly
the term elements it owns); if anything disagrees, each state element is changed in turn
instead (``N`` evaluations for ``N`` states) to find the offending pair. Cost: about
``2 (2 log2 N + 8)`` evaluations of the children's terms. A term element moved by two
different state elements (an observed child reading ``s[t]`` and ``s[t+1]``) makes the step
refuse the variable with a ``ValueError`` saying which child and which elements; so does a free
child whose transform depends on ``s``.

``pm.sample`` picks this step by itself (competence ``IDEAL``) for a ``MarkovChain`` free variable
whose children pass that check; for one that fails it, ``competence`` warns with the reason and
returns ``INCOMPATIBLE`` (PyMC's own steps then sample it). Like PyMC's Gibbs steps, it records
no sampler statistics.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> from pymc_dp.distributions.markov_chain import MarkovChain
>>> with pm.Model() as model:
...     rates = pm.Gamma("rates", np.float64(2.0), np.float64(0.5), shape=2)
...     s = MarkovChain("s", np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.2, 0.8]]), shape=6)
...     _ = pm.Poisson("y", rates[s], observed=np.array([1, 0, 2, 9, 8, 11]))
...     step = FFBS([s], rng=1)
>>> point, stats = step.step(model.initial_point())
>>> point["s"].shape, stats
((6,), [{}])
"""

from __future__ import annotations

import warnings
import weakref
from typing import ClassVar, NamedTuple

import numpy as np
import pytensor.tensor as pt
from pymc.initial_point import make_initial_point_fn
from pymc.model import Model, modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.graph.traversal import graph_inputs

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.distributions.markov_chain import MarkovChainRV, models_with_markov_chains
from pymc_dp.kernels.ffbs import ffbs_sample
from pymc_dp.step_methods.claims import direct_rv_parents

__all__ = ["FFBS", "FFBSPlan", "emission_loglik", "ffbs_plan", "log_chain_params"]

_JITTER_SD = 0.5
_PROBE_SEED = 20261125


class FFBSPlan(NamedTuple):
    """What the step needs for one MarkovChain variable, found once from the model.

    ``owners[j]`` gives, for each element of child term ``j`` (flattened), the flat index
    ``c * T + t`` of the state element it depends on (-1: none).
    """

    name: str
    shape: tuple
    n_states: int
    s_index: int
    params_fn: object
    terms_fn: object
    owners: tuple
    inputs: tuple


def _model_of(var):
    """The model in context if ``var`` is one of its free variables, else a model that holds a
    MarkovChain with ``var`` among its free variables, else None."""
    model = Model.get_context(error_if_none=False)
    if model is not None and var in model.free_RVs:
        return model
    for candidate in models_with_markov_chains():
        if var in candidate.free_RVs:
            return candidate
    return None


def _children(model, s_rv):
    """Random variables and Potentials that read ``s_rv`` directly (not through another RV)."""
    rv_set = set(model.basic_RVs)
    rvs = [rv for rv in model.basic_RVs if rv is not s_rv and s_rv in direct_rv_parents(rv, rv_set)]
    pots = [p for p in model.potentials if s_rv in direct_rv_parents(p, rv_set)]
    return rvs, pots


def _check_transforms(model, s_rv, rvs):
    """Refuse free children whose transform depends on the states."""
    s_value = model.rvs_to_values[s_rv]
    for rv in rvs:
        if rv in model.free_RVs and model.rvs_to_transforms.get(rv) is not None:
            (orig,) = model.replace_rvs_by_values([rv])
            if s_value in set(graph_inputs([orig])):
                raise ValueError(
                    f"FFBS cannot sample {s_rv.name!r}: the transform of its child {rv.name!r} "
                    "depends on the states, so the child's value would move with them; give "
                    f"{rv.name!r} transform=None or sample {s_rv.name!r} with another step."
                )


def _compile(model, s_rv, rvs, pots, compile_kwargs):
    """Compiled ``params_fn`` (init, transition) and ``terms_fn`` (children's terms)."""
    init, trans, _ = s_rv.owner.op.dist_params(s_rv.owner)
    params = model.replace_rvs_by_values([pt.cast(init, "float64"), pt.cast(trans, "float64")])
    terms = list(model.logp(vars=rvs, sum=False, jacobian=False)) if rvs else []
    terms += list(model.replace_rvs_by_values(pots))
    ck = {"on_unused_input": "ignore", **compile_kwargs}
    params_fn = model.compile_fn(params, inputs=model.value_vars, point_fn=False, **ck)
    terms_fn = model.compile_fn(terms, inputs=model.value_vars, point_fn=False, **ck)
    return params_fn, terms_fn, [rv.name for rv in rvs] + [f"Potential {p.name}" for p in pots]


def _jittered(model, point, s_name, rng):
    """The point with continuous free variables jittered (couplings must not vanish)."""
    out = {}
    for v in model.value_vars:
        val = np.asarray(point[v.name])
        if v.name != s_name and val.dtype.kind == "f":
            val = val + rng.normal(0.0, _JITTER_SD, size=val.shape)
        out[v.name] = val
    return out


def _probe_points(model, point, s_name, rng):
    """Points at which locality is probed: the jittered point, and a draw from the prior (so
    that discrete variables leave their support point too; a second jittered point if the
    model cannot be forward-sampled)."""
    points = [_jittered(model, point, s_name, rng)]
    try:
        fn = make_initial_point_fn(model=model, default_strategy="prior", return_transformed=True)
        prior = fn(int(rng.integers(2**31)))
        points.append({n: np.asarray(prior.get(n, point[n])) for n in point})
    except Exception:  # any failure to forward-sample: jitter instead
        points.append(_jittered(model, point, s_name, rng))
    return points


def _moved(a, b):
    """Elements that differ (NaN equal to NaN)."""
    a, b = np.ravel(a), np.ravel(b)
    return ~((a == b) | (np.isnan(a) & np.isnan(b)))


def _coupling_error(s_name, shape, child, element, first, second):
    idx = lambda i: "[" + ", ".join(str(int(j)) for j in np.unravel_index(i, shape)) + "]"  # noqa: E731
    return ValueError(
        f"FFBS cannot sample {s_name!r}: the log-density term of {child} at flat element "
        f"{element} depends on several state elements ({s_name}{idx(first)} and "
        f"{s_name}{idx(second)}). FFBS needs every term of the states' children to depend on a "
        "single state element (emissions conditionally independent given the states); "
        "marginalise the coupled term, or sample the states with another step."
    )


class _Prober:
    """Terms at one random path, and which term elements move when a set of states changes.

    Each state element ``i`` is changed, when it is in the set, to ``(s[i] + shift[i]) % K``
    with ``shift[i]`` in ``1..K-1`` fixed for this path.
    """

    def __init__(self, terms_fn, args, s_index, k, shape, rng):
        self.terms_fn, self.args, self.s_index = terms_fn, list(args), s_index
        self.base_s = rng.integers(0, k, size=shape)
        self.changed_s = (self.base_s + rng.integers(1, k, size=shape)) % k
        self.base = self._terms(self.base_s)

    def _terms(self, states):
        self.args[self.s_index] = states
        return [np.asarray(t) for t in self.terms_fn(*self.args)]

    def moved(self, in_set):
        """Per term, a boolean array: which elements move when the states in ``in_set`` (a
        boolean array over the flat state elements) change."""
        states = np.where(in_set.reshape(self.base_s.shape), self.changed_s, self.base_s)
        return [_moved(t, b) for t, b in zip(self._terms(states), self.base, strict=True)]


def _decode(prober, n):
    """Owners from ``2 ceil(log2 n)`` group probes (bit ``b`` of the owner's index set / not
    set), or None when some element moves in both halves of a bit (it depends on two states)
    or in neither half of only some bits (not a clean single dependence)."""
    idx = np.arange(n)
    owners, seen = [0 for _ in prober.base], [None for _ in prober.base]
    for b in range(max(1, int(np.ceil(np.log2(max(n, 2)))))):
        bit = (idx >> b) & 1 == 1
        for j, (m1, m0) in enumerate(zip(prober.moved(bit), prober.moved(~bit), strict=True)):
            if np.any(m1 & m0):
                return None
            owners[j] = owners[j] + (m1.astype(np.int64) << b)
            hit = m1 | m0
            if seen[j] is not None and np.any(seen[j] != hit):
                return None
            seen[j] = hit
    out = [np.where(h, o, -1) for o, h in zip(owners, seen, strict=True)]
    return out if all(np.all(o < n) for o in out) else None


def _verify(prober, owners, n, rng, n_checks=8):
    """Random subsets of states change exactly the term elements they own."""
    for _ in range(n_checks):
        in_set = rng.random(n) < 0.5
        for o, m in zip(owners, prober.moved(in_set), strict=True):
            if np.any(m != ((o >= 0) & in_set[np.maximum(o, 0)])):
                return False
    return True


def _probe_each(prober, owners, labels, s_name):
    """Change each state element in turn (``N`` evaluations); fill ``owners`` in place and
    raise on the first term element moved by two different state elements."""
    n = prober.base_s.size
    for i in range(n):
        in_set = np.zeros(n, dtype=bool)
        in_set[i] = True
        for j, m in enumerate(prober.moved(in_set)):
            moved = np.flatnonzero(m)
            clash = moved[(owners[j][moved] >= 0) & (owners[j][moved] != i)]
            if clash.size:
                e = int(clash[0])
                raise _coupling_error(s_name, prober.base_s.shape, labels[j], e, owners[j][e], i)
            owners[j][moved] = i


def _merge(total, owners, s_name, shape, labels):
    """Union of the owners found at two points; a term element owned by different states at
    different points depends on both."""
    if total is None:
        return owners
    for j, (a, b) in enumerate(zip(total, owners, strict=True)):
        both = np.flatnonzero((a >= 0) & (b >= 0) & (a != b))
        if both.size:
            e = int(both[0])
            raise _coupling_error(s_name, shape, labels[j], e, a[e], b[e])
    return [np.where(a >= 0, a, b) for a, b in zip(total, owners, strict=True)]


def _find_owners(plan_parts, point, rng):
    """Owner (state element) of every child term element, by perturbation probes: group
    probes decoded bit by bit and checked on random subsets, else one probe per element."""
    model, s_rv, terms_fn, labels = plan_parts
    shape, k = tuple(point[s_rv.name].shape), _n_states(model, s_rv, point)
    names = [v.name for v in model.value_vars]
    s_index = names.index(s_rv.name)
    n = int(np.prod(shape))
    if k == 1:  # one state: nothing to attribute, the path is fixed
        args = [point[nm] for nm in names]
        args[s_index] = np.zeros(shape, dtype=np.int64)
        return tuple(np.full(np.size(t), -1, dtype=np.int64) for t in terms_fn(*args)), s_index
    total = None
    for probe_point in _probe_points(model, point, s_rv.name, rng):
        prober = _Prober(terms_fn, [probe_point[nm] for nm in names], s_index, k, shape, rng)
        owners = _decode(prober, n)
        if owners is None or not _verify(prober, owners, n, rng):
            owners = [np.full(b.size, -1, dtype=np.int64) for b in prober.base]
            _probe_each(prober, owners, labels, s_rv.name)
        total = _merge(total, owners, s_rv.name, shape, labels)
    return tuple(total), s_index


def _n_states(model, s_rv, point):
    """K, from the initial-probability parameter's last axis at ``point``."""
    init = s_rv.owner.op.dist_params(s_rv.owner)[0]
    (init_v,) = model.replace_rvs_by_values([init.shape[-1]])
    fn = model.compile_fn(init_v, inputs=model.value_vars, point_fn=True, on_unused_input="ignore")
    return int(fn(point))


def ffbs_plan(model, s_rv, *, compile_kwargs=None, point=None) -> FFBSPlan:
    """Check and compile what :class:`FFBS` needs for the MarkovChain variable ``s_rv``.

    Parameters
    ----------
    model : pm.Model
    s_rv : TensorVariable
        A free :class:`~pymc_dp.distributions.MarkovChain` variable of ``model``.
    compile_kwargs : dict, optional
    point : dict, optional
        Point at which to probe (default: the model's initial point).

    Returns
    -------
    FFBSPlan

    Raises
    ------
    ValueError
        If ``s_rv`` is not a free MarkovChain of ``model``, or a child's term depends on more
        than one state element, or a free child's transform depends on the states.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import pytensor.tensor as pt
    >>> from pymc_dp.distributions.markov_chain import MarkovChain
    >>> with pm.Model() as model:
    ...     s = MarkovChain("s", np.array([0.5, 0.5]), np.eye(2), shape=3)
    ...     mu = pt.as_tensor(np.array([1.0, 5.0]))
    ...     _ = pm.Poisson("y", mu[s[1:]] + mu[s[:-1]], observed=np.array([2, 6]))
    >>> ffbs_plan(model, s)
    Traceback (most recent call last):
    ...
    ValueError: FFBS cannot sample 's': ... depends on several state elements (s[0] and s[1])...
    """
    if s_rv not in model.free_RVs or not isinstance(s_rv.owner.op, MarkovChainRV):
        raise ValueError(f"FFBS samples free MarkovChain variables; {s_rv.name!r} is not one.")
    rvs, pots = _children(model, s_rv)
    _check_transforms(model, s_rv, rvs)
    params_fn, terms_fn, labels = _compile(model, s_rv, rvs, pots, dict(compile_kwargs or {}))
    point = model.initial_point() if point is None else point
    rng = np.random.default_rng(_PROBE_SEED)
    owners, s_index = _find_owners((model, s_rv, terms_fn, labels), point, rng)
    return FFBSPlan(
        name=s_rv.name,
        shape=tuple(np.shape(point[s_rv.name])),
        n_states=_n_states(model, s_rv, point),
        s_index=s_index,
        params_fn=params_fn,
        terms_fn=terms_fn,
        owners=owners,
        inputs=tuple(v.name for v in model.value_vars),
    )


# Plans found by ``competence`` (default compile options), reused by ``__init__``.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cached_plan(model, s_rv):
    key = (s_rv.name, len(model.basic_RVs), len(model.potentials))
    plans = _PLANS.setdefault(model, {})
    if key not in plans:
        plans[key] = ffbs_plan(model, s_rv)
    return plans[key]


def emission_loglik(plan: FFBSPlan, args) -> np.ndarray:
    """``E[c, t, k]``: children's terms summed into their state element, for each state ``k``.

    Parameters
    ----------
    plan : FFBSPlan
        From :func:`ffbs_plan`.
    args : list of ndarray
        Values of the value variables in ``plan.inputs`` order (the states' entry is ignored).

    Returns
    -------
    ndarray, shape (C, T, K)
        ``C`` chains (the leading axes of the states, flattened), ``T`` steps, ``K`` states.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import pytensor.tensor as pt
    >>> from pymc_dp.distributions.markov_chain import MarkovChain
    >>> with pm.Model() as model:
    ...     s = MarkovChain("s", np.array([0.5, 0.5]), np.eye(2), shape=3)
    ...     _ = pm.Normal("y", pt.as_tensor(np.array([0.0, 1.0]))[s], 1.0, observed=np.zeros(3))
    >>> plan = ffbs_plan(model, s)
    >>> e = emission_loglik(plan, [model.initial_point()[n] for n in plan.inputs])
    >>> e.shape, bool(np.allclose(e[0, :, 0] - e[0, :, 1], 0.5))
    ((1, 3, 2), True)
    """
    shape = plan.shape
    n = int(np.prod(shape))
    out = np.zeros((n, plan.n_states))
    sel = [(np.flatnonzero(o >= 0), o[o >= 0]) for o in plan.owners]
    args = list(args)
    for k in range(plan.n_states):
        args[plan.s_index] = np.full(shape, k, dtype=np.int64)
        for (idx, tgt), term, owner in zip(sel, plan.terms_fn(*args), plan.owners, strict=True):
            if np.size(term) != owner.size:
                raise ValueError(
                    f"FFBS: a child term of {plan.name!r} changed size since the step was built "
                    "(pm.set_data?); build the step again."
                )
            out[:, k] += np.bincount(tgt, weights=np.ravel(term)[idx], minlength=n)
    if np.any(np.isnan(out)):
        raise ValueError(f"FFBS: the emission log-likelihood of {plan.name!r} is NaN.")
    return out.reshape(-1, shape[-1], plan.n_states)


def log_chain_params(plan: FFBSPlan, args):
    """Log initial probabilities and log transition matrices at a point, one per chain.

    Parameters
    ----------
    plan : FFBSPlan
        From :func:`ffbs_plan`.
    args : list of ndarray
        Values of the value variables in ``plan.inputs`` order.

    Returns
    -------
    log_init : ndarray, shape (C, K)
    log_trans : ndarray, shape (C, K, K)

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> from pymc_dp.distributions.markov_chain import MarkovChain
    >>> with pm.Model() as model:
    ...     s = MarkovChain("s", np.array([0.5, 0.5]), np.eye(2), shape=(4, 3))
    >>> plan = ffbs_plan(model, s)
    >>> li, lt = log_chain_params(plan, [model.initial_point()[n] for n in plan.inputs])
    >>> li.shape, lt.shape
    ((4, 2), (4, 2, 2))
    """
    init, trans = plan.params_fn(*args)
    batch, k = plan.shape[:-1], plan.n_states
    init = np.broadcast_to(init, (*batch, k)).reshape(-1, k)
    trans = np.broadcast_to(trans, (*batch, k, k)).reshape(-1, k, k)
    with np.errstate(divide="ignore"):
        return np.log(init), np.log(trans)


class FFBS(ForgetsInitialPoint, BlockedStep):
    """Gibbs block for the states of a MarkovChain: forward filtering, backward sampling.

    Parameters
    ----------
    vars : list of model variables
        Free :class:`~pymc_dp.distributions.MarkovChain` variables (one plan each).
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    initial_point : dict, optional
        Point at which the children's locality is probed (default: the initial point).
    compile_kwargs : dict, optional
        Passed to the compilation of the parameters and of the children's terms.

    Raises
    ------
    ValueError
        If a variable is not a free MarkovChain, or its children's terms are not each a
        function of a single state element (see the module docstring).

    Examples
    --------
    Two states with emission means 0 and 10 (unit noise): the observations leave no doubt
    (each misassignment costs a likelihood factor below ``exp(-40)``), so one draw of the whole
    chain is the obvious labelling.

    >>> import numpy as np, pymc as pm, pytensor.tensor as pt
    >>> from pymc_dp.distributions import MarkovChain
    >>> from pymc_dp.step_methods import FFBS
    >>> y = np.array([0.1, -0.3, 9.8, 10.4, 9.9, 0.2])
    >>> with pm.Model() as model:
    ...     s = MarkovChain("s", np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.1, 0.9]]),
    ...                     shape=6)
    ...     _ = pm.Normal("y", pt.as_tensor(np.array([0.0, 10.0]))[s], np.float64(1.0),
    ...                   observed=y)
    ...     step = FFBS([s], rng=1)
    >>> point, _ = step.step(model.initial_point())
    >>> point["s"].tolist()
    [0, 0, 1, 1, 1, 0]
    """

    name = "ffbs"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {}

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
    ):
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        self._plans = []
        for value_var in self.vars:
            rv = model.values_to_rvs[value_var]
            plan = None if compile_kwargs else _cached_plan(model, rv)
            point_shape = None if initial_point is None else np.shape(initial_point[rv.name])
            if plan is None or (point_shape is not None and point_shape != plan.shape):
                plan = ffbs_plan(model, rv, compile_kwargs=compile_kwargs, point=initial_point)
            self._plans.append(plan)

    def step(self, point):
        """Draw every chain's path of every variable, each from its full conditional."""
        new_point = dict(point)
        for plan in self._plans:
            args = [new_point[n] for n in plan.inputs]
            log_emis = emission_loglik(plan, args)
            log_init, log_trans = log_chain_params(plan, args)
            states, _ = ffbs_sample(log_init, log_trans, log_emis, self.rng)
            old = point[plan.name]
            if old.shape != plan.shape:
                raise ValueError(
                    f"FFBS: {plan.name!r} changed shape since the step was built; build it again."
                )
            new_point[plan.name] = states.reshape(plan.shape).astype(old.dtype, copy=False)
        return new_point, [{}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a free MarkovChain whose children pass the locality check, else
        INCOMPATIBLE (with a warning giving the reason when a MarkovChain is refused)."""
        if var.owner is None or not isinstance(var.owner.op, MarkovChainRV):
            return Competence.INCOMPATIBLE
        model = _model_of(var)
        if model is None:
            return Competence.INCOMPATIBLE
        try:
            _cached_plan(model, var)
        except ValueError as err:
            warnings.warn(
                f"{err} (pm.sample falls back to PyMC's steps)", UserWarning, stacklevel=2
            )
            return Competence.INCOMPATIBLE
        return Competence.IDEAL
