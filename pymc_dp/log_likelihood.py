r"""Pointwise log-likelihood for model comparison on releases (issue 14).

PyMC's log-likelihood of a :class:`~pymc_dp.distributions.release.Release` is
``log eta(z | T(x))``: the noise density of the release given the statistic of the *imputed*
records of each draw. That is a conditional quantity, not a predictive density of the release,
and ``az.loo`` on it is meaningless. :func:`compute_log_likelihood` writes instead, per
posterior draw, the density of the release given the parameters with the records integrated
out,

.. math::

    \log p(z \mid \theta) = \log \sum_S f_N(S \mid \theta) \prod_k
    \eta(z_k - C_k - M_k S),

where the records are exchangeable and the statistic is affine in their sum or counts (the
conditions of :func:`~pymc_dp.step_methods.collapse_plan.collapse_plan`, issue 12):

==============================  ===============================================================
records                         ``log p(z | theta)``
==============================  ===============================================================
Bernoulli(p), Categorical, k=2  ``S ~ Binomial(N, p)``, summed over the certified window of
                                :func:`~pymc_dp.kernels.collapsed_stat.count_log_marginal`
Poisson(mu)                     ``S ~ Poisson(N mu)``, likewise
Normal(mu, sigma), Gaussian     ``z ~ N(C + b N mu, N sigma^2 b b' + diag(sd^2))`` (matrix
noise                           determinant lemma and Sherman-Morrison)
Normal(mu, sigma), Laplace      the normal-Laplace convolution: with ``Y = C + b S ~ N(m,
noise (one component)           s^2)``, ``d = z - m``, ``lam = 1/scale``: ``log(lam/2) +
                                lam^2 s^2/2 + logaddexp(-lam d + log Phi(d/s - lam s),
                                lam d + log Phi(-d/s - lam s))``
==============================  ===============================================================

A Release is one observation (its components are jointly distributed): one value per draw.
Several Releases (one per group) are several observations; :func:`stack_log_likelihood`
puts them in one variable so that ``az.loo`` and ``az.compare`` see them as pointwise values.

**Per-group vector releases** (issue 26). A vector Release of per-group counts of one record
variable, ``T_k = C_k + b_k sum_{i in G_k} x_i`` over disjoint groups ``G_k`` (e.g.
``pt.stack([x[g == k].sum() for k in range(K)])`` or a one-hot table sum), with Bernoulli
records of parameter ``q`` or ``q[g]`` (``g`` a fixed index, constant inside each group) or
Poisson records likewise, has independent components given the parameters: component ``k``
gets its own exact value ``log sum_S f(S | n_k, theta_k) eta(z_k - C_k - b_k S)``
(``Binomial(n_k, q_k)`` or ``Poisson(n_k mu_k)``), dims ``(chain, draw, *release shape)``,
so ``az.loo`` treats the groups as the observations. Components read by the same records
(with one coefficient vector, e.g. the cells of a row of a one-hot (group x value) table of 0/1
records) form one group, one observation, with the joint exact value ``log sum_S f(S) prod_c
eta(z_c - C_c - b_c S)``: dims ``(chain, draw, first release dim)`` when the groups are the
rows of a 2-D release, else ``(chain, draw, <name>_group)`` labelled by their components.
The linear map is found numerically (the statistic at each record set to 1, evaluated for
many records per call; up to 20 000 records) and checked exactly at all-maximal, large and
random records; groups that overlap (a record read by components another record reads only
in part) are refused, naming the record.

**Monte Carlo** (issue 26). A Release with no closed form (a clamped or weighted sum, records
with covariates, a non-linear statistic) gets, when ``n_simulations`` is given, the estimator
``log (1/S) sum_s eta(z | T(x_s))`` with ``x_s`` drawn from the records' law given the
parameters of each draw (unbiased for ``p(z | theta)``; its log is biased by about
``-MCSE^2 / 2``), and its delta-method standard error ``sd(w) / (mean(w) sqrt(S))`` per draw.
It requires that no variable other than the Release read the records.

Otherwise a Release whose density given the parameters has no closed form here (several
record variables, several releases of the same records, more than two categories, or any of
the above without ``n_simulations``) is refused with ``ValueError``: never a silent
conditional value. Every other observed variable (``Privatized``, plain observations) goes through
:func:`pymc.compute_log_likelihood`; when latent records are absent from the posterior (not
stored) and the variable's log-density does not read them, its log-density is compiled on
the value variables it reads only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numba
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import xarray as xr
from pymc.backends.arviz import apply_function_over_dataset, coords_and_dims_for_inferencedata
from pymc.distributions.shape_utils import change_dist_size
from pymc.model import modelcontext
from pymc.model.transform.conditioning import remove_value_transforms
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import extract_obs_data
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.traversal import ancestors, graph_inputs
from pytensor.tensor.random.basic import BernoulliRV, PoissonRV
from pytensor.tensor.subtensor import AdvancedSubtensor
from pytensor.tensor.variable import TensorConstant

from pymc_dp._cache import lazy_module
from pymc_dp.distributions.release import is_release, record_parents
from pymc_dp.kernels.collapsed_stat import BINOMIAL, POISSON, count_log_marginal
from pymc_dp.step_methods.collapse_plan import (
    _RTOL,
    _broadcasts_along_records,
    _n_records,
    _noise_ok,
    _readers,
    _stat_fn,
    collapse_plan,
)
from pymc_dp.step_methods.da_spec import release_arrays
from pymc_dp.step_methods.data_augmentation import _default_mode

special = lazy_module("scipy.special")

__all__ = ["compute_log_likelihood", "stack_log_likelihood"]

_INSTEAD = (
    "Use pmdp.Privatized (the noise integrated out exactly) where each released number is one "
    "true value plus its own noise, or compare the models by the release's held-out "
    "predictive by other means. PyMC's value for a Release, log p(release | statistic of the "
    "imputed records), is a conditional density that az.loo / az.compare cannot use."
)


# ---------------------------------------------------------------- which releases, and how


def _refuse(name, why):
    raise ValueError(
        f"cannot compute the pointwise log-likelihood of Release {name!r}: its density given "
        f"the parameters, with the records integrated out, has no closed form here ({why}). "
        + _INSTEAD
    )


def _release_plan(model, rel, n_simulations=None):
    """How the pointwise values of Release ``rel`` are computed: a collapse plan (one exact
    value), a :class:`_GroupPlan` (one exact value per component), a :class:`_MCPlan` (Monte
    Carlo, only with ``n_simulations``), None when its statistic reads no free variable (then
    PyMC's value is already ``log p(z | theta)``); else ``ValueError``."""
    free = set(model.free_RVs)
    recs = [v for v in record_parents(rel.owner.inputs[0]) if v in free]
    if not recs:
        return None
    names = [v.name for v in recs]
    if len(recs) > 1:
        _refuse(rel.name, f"the statistic reads several record variables {names}")
    plan = collapse_plan(model, recs[0])
    if plan is None:
        gp = _group_plan(model, rel, recs[0])
        if isinstance(gp, _GroupPlan):
            return gp
        if n_simulations is not None:
            return _mc_plan(model, rel, recs[0], n_simulations)
        if isinstance(gp, _Shared):
            _refuse(rel.name, gp)
        _refuse(
            rel.name,
            f"the records {names[0]!r} are not exchangeable given the parameters or the "
            "statistic is not an affine function of their sum or counts: records with "
            "covariates, a clamped or weighted sum, records read by other variables, or a "
            f"noise the collapse does not take; here: {gp}. A Monte Carlo estimate with its "
            "standard error is available: pass n_simulations= (e.g. 4000) to "
            "pmdp.compute_log_likelihood",
        )
    if len(plan.releases) > 1:
        others = [r.name for r in plan.releases]
        _refuse(
            rel.name,
            f"the releases {others} read the same records {names[0]!r}: they are jointly one "
            "observation and their density does not factor per release",
        )
    if plan.family == "categorical" and plan.k > 2:
        _refuse(
            rel.name,
            f"the records {names[0]!r} have {plan.k} categories; the exact sum over their "
            "count vectors is implemented for two categories only",
        )
    return plan


# ---------------------------------------------------------------- per-group vector releases


_GROUP_FAMILIES = {"bernoulli": BINOMIAL, "poisson": POISSON}
_MAX_GROUP_RECORDS = 20_000  # the map has one column per record: O(N^2) to find and check
_MAP_BATCH_VALUES = 2**18  # unit records' values per evaluation while finding it (in cache)


@dataclass(frozen=True, eq=False)
class _GroupPlan:
    """A vector Release of per-group sums of independent records (one value per group).

    Components are partitioned into blocks: block ``j`` holds components ``comps[j]`` and
    records ``{i : group[i] == j}``, and ``T[comps[j]] = C[comps[j]] + coefs[j] * S_j`` with
    ``S_j`` the sum of the block's records; no record is read by two blocks, records are
    exchangeable within a block. A block is one observation (usually one component; the
    cells of a one-hot table row of 0/1 records are one block).
    """

    rv: object
    family: str
    release: object
    C: np.ndarray
    comps: list  # component indices (flattened release) of each block
    coefs: list  # their coefficients on the block's sum
    group: np.ndarray  # block of each record, -1 when no component reads it
    n: np.ndarray  # records per block
    first: np.ndarray  # first record of each block, -1 for a block without records


class _Shared(str):
    """Reason: components of a vector release share records (refused unless Monte Carlo)."""


def _group_plan(model, rel, rec):
    """The :class:`_GroupPlan` of ``rel``, or a string saying why there is none."""
    op = getattr(rec.owner, "op", None)
    family = {BernoulliRV: "bernoulli", PoissonRV: "poisson"}.get(type(op))
    if family is None or rec.type.ndim != 1 or model.rvs_to_transforms.get(rec) is not None:
        return "the records are not one 1-D Bernoulli or Poisson variable"
    if not _group_exchangeable(rec, family):
        return (
            "the records are not exchangeable given the parameters within a component: "
            "records with covariates (a parameter neither shared nor indexed by a fixed group)"
        )
    readers = _readers(model, rec)
    if readers != [rel]:
        return f"the records are also read by {[r.name for r in readers if r is not rel]}"
    if not _noise_ok(model, family, [rel]):
        return "a noise the exact per-component sum does not take"
    fn = _stat_fn(model, [rec], [rel])
    n_rec = _n_records(model, rec)
    if fn is None or n_rec is None:
        return "the statistic reads other variables or the number of records is not fixed"
    if n_rec > _MAX_GROUP_RECORDS:
        return (
            f"{n_rec} records, more than the {_MAX_GROUP_RECORDS} for which the per-group map "
            "is checked; one record variable and one Release per group is exact at any size"
        )
    value = model.rvs_to_values[rec]
    C = np.asarray(fn(np.zeros(n_rec, dtype=value.dtype)), dtype=np.float64)
    K = len(C)
    keys = {}  # nonzero pattern of a record's column (packed bits) -> its block
    owner = np.full(K, -1)  # block of each component
    group = np.full(n_rec, -1, dtype=np.int64)
    comps, coefs, first = [], [], []
    thr = _RTOL * (1.0 + np.abs(C))
    for start, cols in _unit_columns(model, rec, rel, fn, C, n_rec):  # the map's columns
        mask = np.abs(cols) > thr
        read = np.flatnonzero(mask.any(axis=1))  # records (of this batch) a component reads
        if len(read) == 0:
            continue
        pats, at, inv = np.unique(
            np.packbits(mask[read], axis=1), axis=0, return_index=True, return_inverse=True
        )
        inv = inv.reshape(-1)
        blk_of = np.empty(len(pats), dtype=np.int64)
        stop, shared = len(read), None  # records before the first that shares components
        for u in np.argsort(at, kind="stable"):  # patterns in the order of their first record
            key = pats[u].tobytes()
            if key not in keys:
                r = read[at[u]]
                nz = np.flatnonzero(mask[r])
                taken = nz[owner[nz] >= 0]
                if len(taken):
                    stop = at[u]
                    shared = _Shared(
                        f"record {start + r} of {rec.name!r} is read by components "
                        f"{nz.tolist()} of the statistic (flattened) and another record by "
                        f"components {comps[owner[taken[0]]].tolist()}: groups that share "
                        "records are not independent given the parameters, so the release has "
                        "no per-group pointwise values. Release each group's statistic over "
                        "disjoint records, or pass n_simulations= for one Monte Carlo value for "
                        "the whole release"
                    )
                    break
                owner[nz] = keys[key] = len(comps)
                comps.append(nz)
                coefs.append(cols[r, nz])
                first.append(start + r)
            blk_of[u] = keys[key]
        # every record of a block with its first record's coefficients (np.allclose per record)
        rows, blk = read[:stop], blk_of[inv[:stop]]
        for j in np.unique(blk):
            a = cols[rows[blk == j]][:, comps[j]]
            if not np.isclose(a, coefs[j], rtol=_RTOL, atol=0.0).all():
                return "a weighted sum (records of one group enter with different weights)"
        if shared is not None:
            return shared
        group[start + rows] = blk
    for k in np.flatnonzero(owner < 0):  # constant components: blocks without records
        owner[k] = len(comps)
        comps.append(np.array([k]))
        coefs.append(np.zeros(1))
        first.append(-1)
    n_blocks, first = len(comps), np.array(first)
    # fixed test points of an exact identity (not a margin): all records at their largest
    # (Bernoulli) or large (Poisson) value, where a clamp on a group's total bites, and
    # random records
    rng = np.random.default_rng(0)
    top = 1 if family == "bernoulli" else 1000
    points = [np.full(n_rec, top), np.full(n_rec, 7 * (family != "bernoulli") + 1)]
    for _ in range(3):
        if family == "bernoulli":
            points.append(rng.integers(0, 2, size=n_rec))
        else:
            points.append(rng.poisson(rng.uniform(0.5, 20.0), size=n_rec))
    used = group >= 0
    for xr_ in points:
        sums = np.bincount(group[used], weights=xr_[used], minlength=n_blocks)
        want = C.copy()
        for j in range(n_blocks):
            want[comps[j]] += coefs[j] * sums[j]
        got = np.asarray(fn(xr_.astype(value.dtype)), dtype=np.float64)
        if not np.allclose(got, want, rtol=_RTOL, atol=_RTOL):
            return "the statistic is not a sum per group (a clamped or non-linear statistic)"
    g = _group_index(rec)
    if g is not None:
        if np.any(g[used] != g[first[group[used]]]):
            return (
                "the records are not exchangeable given the parameters within a component: "
                "records of one component have parameters of different groups"
            )
    n = np.bincount(group[used], minlength=n_blocks)
    return _GroupPlan(rec, family, rel, C, comps, coefs, group, n, first)


def _unit_columns(model, rec, rel, fn, C, n_rec):
    """``(start, cols)``: ``cols[j] = T(e_i) - C`` for the records ``i = start + j`` of a
    batch, all records in order (``e_i``: record ``i`` at 1, the others at 0; ``fn`` the
    statistic, :func:`~pymc_dp.step_methods.collapse_plan._stat_fn`, and ``C`` its value at
    0). The statistic's graph vectorized over a batch of unit records evaluates many columns
    per call (:data:`_MAP_BATCH_VALUES` inputs and outputs at once); a statistic that does not
    vectorize is evaluated once per record (batches of one)."""
    value = model.rvs_to_values[rec]
    step = max(1, _MAP_BATCH_VALUES // (n_rec + len(C)))
    try:
        (stat,) = model.replace_rvs_by_values([rel.owner.inputs[0]])
        units = pt.matrix(dtype=value.dtype, shape=(None, n_rec))
        out = vectorize_graph(pt.cast(stat, "float64").reshape((-1,)), replace={value: units})
        out = out.reshape((units.shape[0], -1))
        batched = pytensor.function([units], out, mode=_default_mode())
        batched(np.zeros((1, n_rec), dtype=value.dtype))
    except Exception:  # not vectorizable over records: one evaluation per record
        batched = None
    if batched is None:
        x = np.zeros(n_rec, dtype=value.dtype)
        for i in range(n_rec):
            x[i] = 1
            yield i, np.asarray(fn(x), dtype=np.float64)[None, :] - C
            x[i] = 0
        return
    for start in range(0, n_rec, step):
        rows = np.arange(min(step, n_rec - start))
        units_ = np.zeros((len(rows), n_rec), dtype=value.dtype)
        units_[rows, start + rows] = 1
        yield start, np.asarray(batched(units_), dtype=np.float64) - C


def _group_index(rec):
    """The fixed per-record group index ``g`` of a parameter ``q[g]``, or None."""
    param = rec.owner.op.dist_params(rec.owner)[0]
    node = param.owner
    if node is None or not isinstance(node.op, AdvancedSubtensor):
        return None
    if len(node.inputs) != 2 or node.inputs[0].type.ndim != 1:
        return None
    idx = node.inputs[1]
    if isinstance(idx, TensorConstant):
        g = np.asarray(idx.data)
    elif isinstance(idx, SharedVariable):
        g = np.asarray(idx.get_value())
    else:
        return None
    # an integer index, one entry per record (a boolean mask selects, it does not group)
    return g if g.dtype.kind in "iu" and g.ndim == 1 else None


def _group_exchangeable(rec, family) -> bool:
    param = rec.owner.op.dist_params(rec.owner)[0]
    return _broadcasts_along_records(param, family) or _group_index(rec) is not None


def _group_values(gp, model, posterior):
    """``log p(z_k | theta)`` per draw and component, shape (chain, draw, *release shape)."""
    rec, rel = gp.rv, gp.release
    has = gp.first >= 0
    # the records' parameter is the same within a block (_group_plan): that of its first record
    param = rec.owner.op.dist_params(rec.owner)[0]
    (per_block,) = _draws_of(
        [pt.broadcast_to(param, (len(gp.group),))[gp.first[has]]], model, posterior
    )
    t = np.zeros((len(per_block), len(gp.comps)))
    t[:, has] = per_block
    if gp.family == "poisson":
        t = t * gp.n[None, :]
    rarr = release_arrays(model, [rel])
    run = _batched(rarr.logpdf)  # the compiled loop over draws, once per group
    family = _GROUP_FAMILIES[gp.family]
    vals = np.empty_like(t)
    for j, comps in enumerate(gp.comps):
        vals[:, j] = run(
            family,
            int(gp.n[j]),
            np.ascontiguousarray(t[:, j]),
            np.ascontiguousarray(gp.C[comps]),
            np.ascontiguousarray(gp.coefs[j], dtype=np.float64),
            np.ascontiguousarray(rarr.z[comps]),
            np.ascontiguousarray(rarr.params[comps]),
        )
    if np.any(np.isnan(vals)):
        d = int(np.flatnonzero(np.isnan(vals).any(axis=1))[0])
        raise ValueError(
            f"Release {rel.name!r}: invalid parameters of records {gp.rv.name!r} at draw {d} "
            f"(flattened over chains): {t[d].tolist()}"
        )
    chain_draw = (posterior.sizes["chain"], posterior.sizes["draw"])
    zshape = np.shape(extract_obs_data(model.rvs_to_values[rel]))
    order = [int(c[0]) for c in gp.comps]
    if all(len(c) == 1 for c in gp.comps):  # one group per component: the release's shape
        out = np.empty_like(vals)
        out[:, order] = vals
        return out.reshape(*chain_draw, *zshape), None
    rows = [np.unravel_index(c, zshape)[0] for c in gp.comps] if len(zshape) == 2 else None
    if rows is not None and all(np.all(r == r[0]) and len(r) == zshape[1] for r in rows):
        out = np.empty_like(vals)  # one group per row of a table
        out[:, [int(r[0]) for r in rows]] = vals
        return out.reshape(*chain_draw, zshape[0]), "rows"
    labels = [",".join(str(int(k)) for k in c) for c in gp.comps]
    return vals.reshape(*chain_draw, len(labels)), labels


# ---------------------------------------------------------------- Monte Carlo marginal


_MIN_WEIGHT_ESS = 100.0
_MC_CHUNK_VALUES = 4_000_000  # simulated record values held at once


def _stacked_shape(model, rv):
    """The static or current shape of ``rv`` (its records)."""
    shape = rv.type.shape
    if all(s is not None for s in shape):
        return shape
    return tuple(pytensor.function([], rv.shape)())


@dataclass(frozen=True, eq=False)
class _MCPlan:
    """A Release whose marginal given the parameters is estimated by simulation."""

    rv: object
    release: object
    n_simulations: int


def _mc_plan(model, rel, rec, n_simulations):
    readers = _readers(model, rec)
    if readers != [rel]:
        others = [r.name for r in readers if r is not rel]
        _refuse(
            rel.name,
            f"the records {rec.name!r} are also read by {others}: the release's density "
            "given the parameters does not factor from theirs, so neither a closed form nor "
            "the Monte Carlo estimator (which draws the records from their prior given the "
            "parameters) applies",
        )
    return _MCPlan(rec, rel, n_simulations)


def _mc_values(mp, model, posterior, seed):
    """Monte Carlo ``log p(z | theta)`` and its standard error, each (chain, draw)."""
    umodel = remove_value_transforms(model)
    rec, rel = umodel[mp.rv.name], umodel[mp.release.name]
    S = mp.n_simulations
    n_rec = max(1, int(np.prod(_stacked_shape(umodel, rec))))
    chunk = max(1, min(S, _MC_CHUNK_VALUES // n_rec))  # simulated record sets per call
    logp = pt.sum(umodel.logp(vars=[rel], sum=False)[0])
    sim = change_dist_size(rec, new_size=(chunk,), expand=True)
    (sim,) = umodel.replace_rvs_by_values([sim])
    logp_s = vectorize_graph(logp, replace={umodel.rvs_to_values[rec]: sim})
    needed = [v for v in umodel.value_vars if v in set(graph_inputs([logp_s]))]
    fn = compile_pymc(needed, logp_s, random_seed=seed)
    cols = [_stacked(posterior, v.name, v.dtype) for v in needed]
    n_draws = posterior.sizes["chain"] * posterior.sizes["draw"]
    est, se, ess = np.empty(n_draws), np.empty(n_draws), np.empty(n_draws)
    for d in range(n_draws):  # one vectorized batch of S simulated record sets per draw
        args = [c[d] for c in cols]
        lw = np.concatenate(
            [np.asarray(fn(*args), dtype=np.float64) for _ in range(-(-S // chunk))]
        )[:S]
        if np.any(np.isnan(lw)):
            raise ValueError(
                f"Release {rel.name!r}: the noise log-density of a simulated statistic is NaN "
                f"at draw {d} (flattened over chains): invalid parameters"
            )
        top = np.max(lw)
        if not np.isfinite(top):
            raise ValueError(
                f"Release {rel.name!r}: none of the n_simulations={S} simulated statistics "
                f"at draw {d} (flattened over chains) can produce the released value (zero "
                "noise density): increase n_simulations, or check that the release is "
                "possible under the model"
            )
        w = np.exp(lw - top)
        mean = w.mean()
        ess[d] = mean * mean * S / np.mean(w * w)
        est[d] = top + math.log(mean)
        # delta method: sd(log mean w) = sd(w) / (mean(w) sqrt(S))
        se[d] = w.std(ddof=1) / (mean * math.sqrt(S)) if S > 1 else np.inf
    if np.min(ess) < _MIN_WEIGHT_ESS:
        d = int(np.argmin(ess))
        warnings.warn(
            f"Release {rel.name!r}: at draw {d} the simulated noise densities have an effective "
            f"sample size of {ess[d]:.0f} out of n_simulations={S}; its Monte Carlo standard "
            "error is itself unreliable: increase n_simulations",
            UserWarning,
            stacklevel=3,
        )
    shape = (posterior.sizes["chain"], posterior.sizes["draw"])
    return est.reshape(shape), se.reshape(shape)


# ---------------------------------------------------------------- parameters per draw


def _stacked(posterior, name, dtype):
    """Draws of ``name`` as an array ``(chain * draw, *shape)``."""
    if name not in posterior:
        raise ValueError(
            f"the posterior holds no draws of {name!r}, which the records' parameters read"
        )
    arr = np.asarray(posterior[name].transpose("chain", "draw", ...).values)
    return arr.reshape((-1, *arr.shape[2:])).astype(dtype, copy=False)


def _param_draws(plan, model, posterior):
    """The records' parameters (RV space) at every draw: arrays ``(B, size)``."""
    params = list(plan.rv.owner.op.dist_params(plan.rv.owner))
    return _draws_of(params[:2] if plan.family == "normal" else params[:1], model, posterior)


def _draws_of(params, model, posterior):
    """Graphs ``params`` of the free variables at every draw: float64 arrays ``(B, size)``."""
    free = list(model.free_RVs)
    inputs = [v for v in ancestors(params, blockers=free) if v in set(free)]
    n_draws = posterior.sizes["chain"] * posterior.sizes["draw"]
    if not inputs:
        vals = pytensor.function([], params)()
        return [np.broadcast_to(np.ravel(v), (n_draws, np.size(v))) for v in vals]
    batched = {v: pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape)) for v in inputs}
    outs = vectorize_graph(params, replace=batched)
    fn = pytensor.function(list(batched.values()), outs, on_unused_input="ignore")
    vals = fn(*[_stacked(posterior, v.name, v.dtype) for v in inputs])
    out = []
    for v, p in zip(vals, params, strict=True):
        v = np.asarray(v, dtype=np.float64)
        if v.ndim == p.type.ndim:  # did not depend on the draws
            v = np.broadcast_to(v, (n_draws, *v.shape))
        out.append(v.reshape(n_draws, -1))
    return out


# ---------------------------------------------------------------- the exact marginals


_BATCHED: dict = {}


def _batched(logpdf):
    """A compiled loop over draws of :func:`count_log_marginal` (cached per ``logpdf``)."""
    try:
        return _BATCHED[logpdf]
    except KeyError:
        pass
    kernel = count_log_marginal(logpdf)

    @numba.njit
    def run(family, n, thetas, a, b, z, params):  # pragma: no cover - compiled
        out = np.empty(thetas.shape[0])
        for i in range(thetas.shape[0]):
            out[i] = kernel(family, n, thetas[i], 0.0, a, b, z, params)
        return out

    _BATCHED[logpdf] = run
    return run


def _count_marginal(plan, theta, rel, affine):
    """``log p(z | theta)`` per draw of Binomial (k = 2) or Poisson records."""
    C, M = affine
    if plan.family == "poisson":
        family, t = POISSON, plan.n * theta[0][:, 0]
        b = M[:, 0]
    else:
        p = theta[0]
        t = p[:, 0] if p.shape[1] == 1 else p[:, 1] / (p[:, 0] + p[:, 1])
        family, b = BINOMIAL, M[:, 1]
    run = _batched(rel.logpdf)
    args = [np.ascontiguousarray(v, dtype=np.float64) for v in (t, C, b, rel.z)]
    return run(family, plan.n, *args, np.ascontiguousarray(rel.params))


def _normal_gaussian(mean, var, b, r0, sd):
    """``log N(z; C + b S, diag(sd^2))`` with ``S ~ N(mean, var)``: ``r0 = z - C``."""
    d2 = sd * sd
    r = r0[None, :] - mean[:, None] * b[None, :]
    q = np.sum(b * b / d2)
    u = r @ (b / d2)
    logdet = np.sum(np.log(2.0 * math.pi * d2)) + np.log1p(var * q)
    quad = np.sum(r * r / d2, axis=1) - var * u * u / (1.0 + var * q)
    return -0.5 * (logdet + quad)


def _normal_laplace(mean, var, b, r0, scale):
    """The normal-Laplace convolution at ``z`` (one component, module docstring)."""
    lam = 1.0 / scale
    d = r0 - b * mean
    s = abs(b) * np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        left = -lam * d + special.log_ndtr(d / s - lam * s)
        right = lam * d + special.log_ndtr(-d / s - lam * s)
        conv = math.log(lam / 2.0) + 0.5 * (lam * s) ** 2 + np.logaddexp(left, right)
    flat = math.log(lam / 2.0) - lam * np.abs(d)
    return np.where(s > 0.0, conv, flat)


def _normal_marginal(plan, theta, rel, affine):
    """``log p(z | mu, sigma)`` per draw of Normal records."""
    C, M = affine
    mean = plan.n * theta[0][:, 0]
    var = plan.n * theta[1][:, 0] ** 2
    b, r0 = M[:, 0], rel.z - C
    mech = rel.mechs[0]
    if mech.family == "laplace":
        return _normal_laplace(mean, var, b[0], r0[0], float(mech.scale))
    return _normal_gaussian(mean, var, b, r0, np.full(r0.shape, float(mech.sigma)))


def _release_values(plan, model, posterior):
    """``log p(z | theta)`` of the plan's one release at every draw, shape (chain, draw)."""
    theta = _param_draws(plan, model, posterior)
    rel = release_arrays(model, plan.releases)
    affine = plan.affine()
    if plan.family == "normal":
        out = _normal_marginal(plan, theta, rel, affine)
    else:
        out = _count_marginal(plan, theta, rel, affine)
    if np.any(np.isnan(out)):
        bad = int(np.flatnonzero(np.isnan(out))[0])
        raise ValueError(
            f"Release {plan.releases[0].name!r}: invalid parameters of records "
            f"{plan.rv.name!r} at draw {bad} (flattened over chains): "
            f"{[t[bad].tolist() for t in theta]}"
        )
    return out.reshape(posterior.sizes["chain"], posterior.sizes["draw"])


# ---------------------------------------------------------------- other observed variables


def _other_values(idata, model, names, progressbar):
    """PyMC's pointwise log-likelihood of ``names``, also when unread records are absent."""
    posterior = idata["posterior"]
    missing = {rv.name for rv in model.free_RVs if rv.name not in posterior}
    if not missing:
        return pm.compute_log_likelihood(
            idata,
            var_names=names,
            model=model,
            extend_inferencedata=False,
            progressbar=progressbar,
        )
    umodel = remove_value_transforms(model)
    outs = umodel.logp(vars=[umodel[n] for n in names], sum=False)
    needed = []
    for name, out in zip(names, outs, strict=True):
        reads = [v for v in umodel.value_vars if v in set(graph_inputs([out]))]
        absent = sorted(v.name for v in reads if v.name in missing)
        if absent:
            raise ValueError(
                f"the log-density of {name!r} reads {absent}, which the posterior does not "
                "hold (records not stored): sample again with them stored, or leave "
                f"{name!r} out of var_names"
            )
        needed += [v for v in reads if v not in needed]
    fn = umodel.compile_fn(inputs=needed, outs=outs, on_unused_input="ignore")
    data = posterior.to_dataset() if hasattr(posterior, "to_dataset") else posterior
    data = data[[v.name for v in needed]].astype({v.name: v.dtype for v in needed})
    coords, dims = coords_and_dims_for_inferencedata(umodel)
    return apply_function_over_dataset(
        fn, data, output_var_names=names, coords=coords, dims=dims, progressbar=progressbar
    )


# ---------------------------------------------------------------- entry points


def _group(idata, group: str, fix: str):
    """Group ``group`` of ``idata`` as a Dataset, or an error naming ``idata`` and ``fix``."""
    children = getattr(idata, "children", None)
    if children is None or not hasattr(idata, "attrs"):
        raise TypeError(
            f"idata must be an xarray.DataTree (the result of pm.sample), got "
            f"{type(idata).__name__}"
        )
    if group not in children:
        raise ValueError(f"idata has no {group!r} group (its groups: {sorted(children)}); {fix}")
    data = idata[group]
    return data.to_dataset() if hasattr(data, "to_dataset") else data


def _targets(model, var_names):
    observed = {rv.name: rv for rv in model.observed_RVs}
    names = list(observed) if var_names is None else list(var_names)
    unknown = [n for n in names if n not in observed]
    if unknown:
        raise ValueError(f"var_names must name observed variables of the model, got {unknown}")
    return names, observed


def compute_log_likelihood(
    idata,
    *,
    model=None,
    var_names=None,
    extend_inferencedata=True,
    progressbar=False,
    n_simulations=None,
    random_seed=None,
):
    r"""Pointwise log-likelihood in which each ``Release`` has its records integrated out.

    For an observed :class:`~pymc_dp.distributions.release.Release` whose records are
    collapsible (module docstring) the value per draw is the exact ``log p(z | theta)``, one
    value per Release (dims ``chain, draw``); other observed variables get PyMC's pointwise
    value. Every Release is checked before anything is computed.

    Parameters
    ----------
    idata : xarray.DataTree
        With a ``posterior`` group holding the variables the log-densities read (latent
        records that a variable's log-density does not read need not be stored).
    model : pm.Model, optional
        Default: the model in context.
    var_names : sequence of str, optional
        Observed variables; default all.
    extend_inferencedata : bool, default True
        Write the ``log_likelihood`` group into ``idata`` and return it; else return the
        group as an ``xarray.Dataset``.
    progressbar : bool, default False
        Passed to PyMC for the non-Release variables.
    n_simulations : int, optional
        Simulated record sets per draw for the Monte Carlo estimate of Releases without a
        closed form (module docstring); default None: such Releases are refused. Each
        estimate's standard error is written to the group ``log_likelihood_mcse`` (dims
        ``chain, draw``; with ``extend_inferencedata=False``, to the Dataset's
        ``attrs["mcse"]``), and the variable's attrs hold ``n_simulations`` and ``mcse_max``.
        A ``UserWarning`` says when the simulated weights' effective sample size falls
        below 100 at some draw (the standard error is then itself unreliable).
    random_seed : int, optional
        Seed of the simulations.

    Returns
    -------
    xarray.DataTree or xarray.Dataset
        Per-group vector Releases have dims ``(chain, draw, *release dims)``, one value per
        component; other Releases ``(chain, draw)``.

    Raises
    ------
    ValueError
        A Release whose density given the parameters has no closed form here (naming it, why,
        and what to use instead); a variable whose log-density reads records absent from the
        posterior; names that are not observed variables; ``idata`` without a ``posterior``
        group (e.g. one of its groups, ``idata.sample_stats``, passed instead of the whole
        result).
    TypeError
        ``idata`` that is not an ``xarray.DataTree``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc as pm
    >>> import xarray as xr
    >>> import pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     p = pm.Beta("p", 2.0, 2.0)
    ...     x = pm.Bernoulli("x", p, shape=20)
    ...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(scale=2.0), observed=8.0)
    >>> post = xr.Dataset({"p": (("chain", "draw"), [[0.3, 0.5]])})
    >>> idata = xr.DataTree.from_dict({"posterior": post})
    >>> ll = compute_log_likelihood(idata, model=m, extend_inferencedata=False)
    >>> from scipy import stats
    >>> s = np.arange(21)
    >>> ref = np.log(np.sum(stats.binom.pmf(s, 20, 0.3) * np.exp(-np.abs(8 - s) / 2) / 4))
    >>> bool(abs(float(ll["z"][0, 0]) - ref) < 1e-12)
    True

    Per-group counts give one value per group; a clamped count a Monte Carlo value with its
    standard error:

    >>> import pytensor.tensor as pt
    >>> g = np.array([0, 0, 1, 1, 1])
    >>> with pm.Model() as m2:
    ...     p = pm.Beta("p", 2.0, 2.0)
    ...     x = pm.Bernoulli("x", p, shape=5)
    ...     stat = pt.stack([x[g == 0].sum(), x[g == 1].sum()])
    ...     _ = pmdp.Release("zg", stat, pmdp.Laplace(scale=1.0), observed=[1.0, 2.0])
    >>> compute_log_likelihood(idata, model=m2, extend_inferencedata=False)["zg"].shape
    (1, 2, 2)
    >>> with pm.Model() as m3:
    ...     p = pm.Beta("p", 2.0, 2.0)
    ...     x = pm.Bernoulli("x", p, shape=20)
    ...     _ = pmdp.Release("zc", pt.minimum(x.sum(), 5), pmdp.Laplace(scale=1.0), observed=4.0)
    >>> out = compute_log_likelihood(idata, model=m3, n_simulations=2000, random_seed=1)
    >>> out["log_likelihood_mcse"]["zc"].shape
    (1, 2)
    """
    posterior = _group(
        idata, "posterior", "pass the whole result of pm.sample (not one of its groups)"
    )
    model = modelcontext(model)
    names, observed = _targets(model, var_names)
    n_simulations = _check_n_simulations(n_simulations)
    plans = {
        n: _release_plan(model, observed[n], n_simulations)
        for n in names
        if is_release(observed[n])
    }
    return _compute(
        idata, posterior, model, names, plans, extend_inferencedata, progressbar, n_simulations,
        random_seed,
    )  # fmt: skip


def _compute(
    idata, posterior, model, names, plans, extend_inferencedata, progressbar=False,
    n_simulations=None, random_seed=None,
):  # fmt: skip
    """:func:`compute_log_likelihood` of the observed variables ``names`` given the
    :func:`_release_plan` of each of their Releases (``plans``)."""
    others = [n for n in names if plans.get(n) is None]
    parts, mcse = [], {}
    if others:
        ds = _other_values(idata, model, others, progressbar)
        parts.append(ds.to_dataset() if hasattr(ds, "to_dataset") else ds)
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    seeds = np.random.SeedSequence(random_seed).spawn(len(plans))
    for (name, plan), seed in zip(plans.items(), seeds, strict=True):
        if plan is None:
            continue
        if isinstance(plan, _GroupPlan):
            vals, kind = _group_values(plan, model, posterior)
            cds = dict(coords)
            if isinstance(kind, list):  # blocks of components: labelled by their components
                dims = (f"{name}_group",)
                cds[dims[0]] = kind
            else:
                full = _release_dims(model, name, len(model[name].type.shape))
                dims = full[:1] if kind == "rows" else full
            cds.update({d: model.coords[d] for d in dims if model.coords.get(d) is not None})
            parts.append(xr.Dataset({name: (("chain", "draw", *dims), vals)}, coords=cds))
        elif isinstance(plan, _MCPlan):
            vals, se = _mc_values(plan, model, posterior, int(seed.generate_state(1)[0]))
            parts.append(xr.Dataset({name: (("chain", "draw"), vals)}, coords=coords))
            mcse[name] = xr.DataArray(se, dims=("chain", "draw"), coords=coords)
        else:
            vals = _release_values(plan, model, posterior)
            parts.append(xr.Dataset({name: (("chain", "draw"), vals)}, coords=coords))
    result = xr.merge(parts, compat="override", join="outer") if parts else xr.Dataset()
    result = result[names]
    for name, se in mcse.items():
        result[name].attrs["n_simulations"] = n_simulations
        result[name].attrs["mcse_max"] = float(np.max(se.values))
    if extend_inferencedata:
        idata["log_likelihood"] = result
        if mcse:
            idata["log_likelihood_mcse"] = xr.Dataset(mcse)
        return idata
    if mcse:
        result.attrs["mcse"] = xr.Dataset(mcse)
    return result


def _check_n_simulations(n):
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 2 <= n <= 10**7:
        raise ValueError(
            f"n_simulations must be an integer from 2 to 10**7 (simulated record sets per "
            f"draw, e.g. 4000), got {n!r}"
        )
    return int(n)


def _release_dims(model, name, ndim):
    dims = model.named_vars_to_dims.get(name)
    if dims is not None and len(dims) == ndim:
        return tuple(dims)
    return tuple(f"{name}_dim_{i}" for i in range(ndim))


def stack_log_likelihood(idata, var_names, *, name="releases", dim="release"):
    """A copy of ``idata`` whose ``log_likelihood`` holds ``var_names`` as one variable.

    ``az.loo`` and ``az.compare`` read one log-likelihood variable, whose entries beyond
    ``chain, draw`` are the observations. Several Releases (one per group) are several
    observations of one value each: this stacks them along ``dim`` (each variable's own
    entries flattened), so that ``az.loo(stack_log_likelihood(idata, names))`` works.

    Parameters
    ----------
    idata : xarray.DataTree
        With a ``log_likelihood`` group (:func:`compute_log_likelihood`).
    var_names : sequence of str
        The variables to stack, in order.
    name, dim : str
        The stacked variable's name and its observation dimension (coordinates: for a
        variable with one value per draw its name, else ``"var[i]"``).

    Returns
    -------
    xarray.DataTree

    Raises
    ------
    ValueError
        ``idata`` without a ``log_likelihood`` group, or ``var_names`` empty or naming
        variables that group does not hold.
    TypeError
        ``idata`` that is not an ``xarray.DataTree``, or ``var_names`` given as one string.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> ll = xr.Dataset({k: (("chain", "draw"), np.zeros((1, 3))) for k in ("a", "b")})
    >>> idata = xr.DataTree.from_dict({"log_likelihood": ll})
    >>> out = stack_log_likelihood(idata, ["a", "b"])
    >>> out["log_likelihood"]["releases"].dims, out["log_likelihood"]["release"].values.tolist()
    (('chain', 'draw', 'release'), ['a', 'b'])
    """
    ll = _group(
        idata,
        "log_likelihood",
        "compute it first with pmdp.compute_log_likelihood(idata, model=...)",
    )
    if isinstance(var_names, str):
        raise TypeError(f"var_names must be a sequence of names, got the string {var_names!r}")
    var_names = list(var_names)
    unknown = [v for v in var_names if v not in ll.data_vars]
    if unknown or not var_names:
        raise ValueError(
            f"var_names must name variables of the log_likelihood group {sorted(ll.data_vars)}, "
            f"got {var_names}"
        )
    cols, labels = [], []
    for var in var_names:
        arr = ll[var].transpose("chain", "draw", ...)
        flat = np.asarray(arr.values).reshape(arr.shape[0], arr.shape[1], -1)
        cols.append(flat)
        k = flat.shape[2]
        labels += [var] if k == 1 else [f"{var}[{i}]" for i in range(k)]
    data = np.concatenate(cols, axis=2)
    coords = {"chain": ll["chain"].values, "draw": ll["draw"].values, dim: labels}
    out = idata.copy()
    out["log_likelihood"] = xr.Dataset({name: (("chain", "draw", dim), data)}, coords=coords)
    return out


# ---------------------------------------------------------------- PyMC's own entry points

_PYMC_COMPUTE_LOG_DENSITY = None


def _release_names(model, var_names) -> list:
    names = [rv.name for rv in model.observed_RVs] if var_names is None else list(var_names)
    return [n for n in names if n in model.named_vars and is_release(model[n])]


def _pymc_log_density(idata, *, var_names=None, model=None, kind="likelihood", **kwargs):
    """PyMC's ``compute_log_density`` with Releases given their exact log-likelihood.

    ``pm.compute_log_likelihood`` and ``pm.sample(idata_kwargs={"log_likelihood": True})`` both
    end here. For a model holding observed Releases, the Releases' values are
    :func:`compute_log_likelihood`'s (records integrated out) instead of the density of the
    release given the imputed records; a Release without a closed form is left out with a
    ``UserWarning`` saying why, so that a finished run is never lost to it. Everything else is
    PyMC's own computation.
    """
    original = _PYMC_COMPUTE_LOG_DENSITY
    m = modelcontext(model)
    releases = _release_names(m, var_names) if kind == "likelihood" else []
    if not releases or tuple(kwargs.get("sample_dims", ("chain", "draw"))) != ("chain", "draw"):
        return original(idata, var_names=var_names, model=model, kind=kind, **kwargs)
    names = [rv.name for rv in m.observed_RVs] if var_names is None else list(var_names)
    kept, plans = [], {}
    for n in names:
        if n in releases:
            try:
                plans[n] = _release_plan(m, m[n])
            except ValueError as err:
                warnings.warn(f"log_likelihood of {n!r} left out: {err}", UserWarning, stacklevel=3)
                continue
        kept.append(n)
    extend = kwargs.get("extend_inferencedata", True)
    if not kept:
        return idata if extend else xr.Dataset()
    posterior = _group(
        idata, "posterior", "pass the whole result of pm.sample (not one of its groups)"
    )
    _targets(m, kept)
    return _compute(idata, posterior, m, kept, plans, extend)  # the plans above, not again


def install_pymc_hook() -> None:
    """Route PyMC's pointwise log-likelihood of Releases through :func:`compute_log_likelihood`
    (idempotent; ``import pymc_dp`` calls it). PyMC has no registry for this, so the module
    function ``pymc.stats.log_density.compute_log_density``, through which both
    ``pm.compute_log_likelihood`` and ``idata_kwargs={"log_likelihood": True}`` pass, is wrapped;
    models without an observed Release are computed by PyMC's function unchanged."""
    global _PYMC_COMPUTE_LOG_DENSITY
    from pymc.stats import log_density

    from pymc_dp._pymc_hooks import wrap_module_function

    original = wrap_module_function([log_density], "compute_log_density", _pymc_log_density)
    if original is not None:
        _PYMC_COMPUTE_LOG_DENSITY = original
