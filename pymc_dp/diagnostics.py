"""Convergence diagnostics for latent records: the trace of each release's statistic.

Latent records are nuisance variables (:mod:`pymc_dp.step_methods.nuisance`): by default they
are not stored. When the user stores them (``pm.sample(var_names=["p", "x"])``), PyMC would
compute a rank-normalised R-hat and an ESS for every record and warn when any of thousands of
them crosses 1.01 by chance; a single record's trace says little about the chain anyway (a
record and its relabelling are equally good draws). What the release reads, and what the
parameters depend on through it, is the released statistic ``T(x)``.

:func:`statistic_trace` computes ``T`` at every stored draw (from the stored records and
parameters). :func:`install_convergence_hook` (called by ``import pymc_dp``) makes PyMC's
post-sampling checks (``compute_convergence_checks=True``, the default) leave stored records out
of the per-variable R-hat/ESS checks and check each observed release's statistic instead, with
PyMC's thresholds (R-hat above 1.01, ESS per chain below 100) and warning type. Models without an
observed Release, and runs that did not store records, are checked by PyMC's function unchanged.

See :func:`statistic_trace` for an example.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from pymc.model import modelcontext

__all__ = ["install_convergence_hook", "plot_release_ppc", "statistic_trace"]

#: PyMC's thresholds (``pymc.stats.convergence.run_convergence_checks``)
RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100
#: stored values evaluated per call of the compiled statistic (draws x record values)
_BATCH_VALUES = 1 << 22

_PYMC_RUN_CHECKS = None


def _statistic_function(model, release):
    """Compiled ``T`` of ``release`` as a function of the free variables it reads (by name),
    batched over a leading draw axis; the names it reads."""
    import pytensor
    from pytensor.graph.replace import graph_replace, vectorize_graph
    from pytensor.graph.traversal import ancestors

    from pymc_dp.step_methods.claims import direct_rv_parents

    stat = release.owner.inputs[0]
    free, observed = set(model.free_RVs), set(model.observed_RVs)
    # the free variables T reads without passing through another random variable: their stored
    # values fix T (a record's parameters do not enter once the record is given); observed
    # variables it reads are their data
    parents = direct_rv_parents(stat, free | observed)
    read = [v for v in parents if v in free]
    data = {v: model.rvs_to_values[v] for v in parents if v in observed}
    read = sorted(read, key=lambda v: v.name)
    holders = [rv.type(name=rv.name) for rv in read]
    core = graph_replace(stat, {**dict(zip(read, holders, strict=True)), **data}, strict=False)
    if any(a in free or a in observed for a in ancestors([core])):  # pragma: no cover
        raise ValueError(f"release {release.name!r}: its statistic reads an unreplaced variable")
    batched = [pytensor.tensor.tensor(dtype=h.dtype, shape=(None, *h.type.shape)) for h in holders]
    out = vectorize_graph(core, replace=dict(zip(holders, batched, strict=True)))
    fn = pytensor.function(batched, pytensor.tensor.cast(out, "float64"), on_unused_input="ignore")
    return fn, [rv.name for rv in read], [rv.dtype for rv in read]


def statistic_trace(idata, model=None, group: str = "posterior") -> xr.Dataset:
    """The released statistic ``T`` of every observed Release at every stored draw.

    Parameters
    ----------
    idata : xarray.DataTree
        A ``pm.sample`` result that stored the records the statistics read (name them in
        ``var_names``) and any other variable the statistics read.
    model : pm.Model, optional
        The model (default: the one in context).
    group : str, default "posterior"

    Returns
    -------
    xarray.Dataset
        One variable per observed Release, named like it, of shape ``(chain, draw, *T.shape)``,
        float64.

    Raises
    ------
    ValueError
        When a variable a statistic reads is not in ``idata[group]`` (the message names it).

    Examples
    --------
    Two stored draws of five records behind a release of their count:

    >>> import numpy as np, pymc as pm, pymc_dp as pmdp, xarray as xr
    >>> with pm.Model() as m:
    ...     p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
    ...     x = pm.Bernoulli("x", p, shape=5)
    ...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=np.float64(2.0))
    >>> recs = np.array([[[1, 0, 0, 1, 1], [0, 0, 0, 0, 1]]], dtype=np.int8)
    >>> post = xr.Dataset({"p": (("chain", "draw"), np.full((1, 2), 0.4)),
    ...                    "x": (("chain", "draw", "x_dim_0"), recs)})
    >>> idata = xr.DataTree.from_dict({"posterior": post})
    >>> pmdp.statistic_trace(idata, model=m)["z"].values.tolist()
    [[3.0, 1.0]]
    """
    model = modelcontext(model)
    from pymc_dp.step_methods.claims import observed_releases

    post = idata[group].to_dataset()
    out = {}
    for rel in observed_releases(model):
        fn, names, dtypes = _statistic_function(model, rel)
        missing = [n for n in names if n not in post]
        if missing:
            raise ValueError(
                f"statistic_trace: release {rel.name!r} reads {missing}, which {group!r} does "
                f"not hold; sample with var_names including {missing} to compute its trace"
            )
        arrays = [post[n].values for n in names]
        chains, draws = post.sizes["chain"], post.sizes["draw"]
        per_draw = max(1, sum(int(np.prod(a.shape[2:], dtype=np.int64)) for a in arrays))
        step = max(1, _BATCH_VALUES // per_draw)
        rows = []
        for c in range(chains):
            parts = [
                fn(*[a[c, s : s + step].astype(dt) for a, dt in zip(arrays, dtypes, strict=True)])
                for s in range(0, draws, step)
            ]
            rows.append(np.concatenate(parts, axis=0))
        vals = np.stack(rows)
        dims = ["chain", "draw", *(f"{rel.name}_dim_{k}" for k in range(vals.ndim - 2))]
        out[rel.name] = xr.DataArray(
            vals, dims=dims, coords={"chain": post["chain"], "draw": post["draw"]}
        )
    return xr.Dataset(out)


def _statistic_warnings(idata, model) -> list:
    """PyMC's R-hat and ESS checks, on the statistics' traces instead of the records."""
    import arviz_stats
    from pymc.stats.convergence import SamplerWarning, WarningType

    post = idata["posterior"]
    if post.sizes["draw"] < 100 or post.sizes["chain"] < 2:
        return []  # PyMC's own checks already said why nothing is checked
    try:
        trace = statistic_trace(idata, model=model)
    except ValueError as err:
        msg = f"Convergence of the stored records was not checked: {err}"
        return [SamplerWarning(WarningType.BAD_PARAMS, msg, "info")]
    if not trace.data_vars:
        return []
    warns = []
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        # a chain whose statistic never moves has zero within-chain variance: NaN below
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = arviz_stats.rhat(trace)
        ess = arviz_stats.ess(trace)
    for name in trace.data_vars:
        moves = (trace[name].std(("chain", "draw")) > 0).values
        # NaN where a chain is stuck: not converged, unless the statistic is the same at
        # every draw of every chain (then it says nothing either way)
        rhat[name] = rhat[name].fillna(np.inf).where(moves, 1.0)
        ess[name] = ess[name].fillna(0.0).where(moves, np.inf)
    rhat_max = max(float(np.nanmax(v.values, initial=1.0)) for v in rhat.values())
    if rhat_max > RHAT_MAX:
        msg = (
            f"The rhat statistic of a released statistic, computed from the stored records "
            f"({', '.join(trace.data_vars)}), is larger than {RHAT_MAX}: the records have not "
            "mixed. See https://arxiv.org/abs/1903.08008 for details"
        )
        warns.append(SamplerWarning(WarningType.CONVERGENCE, msg, "info", extra=rhat))
    ess_min = min(float(np.nanmin(v.values, initial=np.inf)) for v in ess.values())
    if ess_min / post.sizes["chain"] < ESS_PER_CHAIN_MIN:
        msg = (
            "The effective sample size per chain of a released statistic, computed from the "
            f"stored records ({', '.join(trace.data_vars)}), is smaller than "
            f"{ESS_PER_CHAIN_MIN}. See https://arxiv.org/abs/1903.08008 for details"
        )
        warns.append(SamplerWarning(WarningType.CONVERGENCE, msg, "error", extra=ess))
    return warns


def _run_convergence_checks(idata, model):
    """PyMC's ``run_convergence_checks``, with stored records replaced by their statistics."""
    from pymc_dp.step_methods.nuisance import nuisance_records

    post = idata["posterior"] if "posterior" in idata.children else None
    stored = [] if post is None else [n for n in sorted(nuisance_records(model)) if n in post]
    if not stored:
        return _PYMC_RUN_CHECKS(idata, model)
    reduced = idata.copy()
    reduced["posterior"] = xr.DataTree(dataset=post.to_dataset().drop_vars(stored))
    return list(_PYMC_RUN_CHECKS(reduced, model)) + _statistic_warnings(idata, model)


def install_convergence_hook() -> None:
    """Make PyMC's post-sampling convergence checks treat stored records as nuisance variables
    (idempotent; ``import pymc_dp`` calls it). PyMC has no registry for this, so
    ``run_convergence_checks`` is wrapped in ``pymc.stats.convergence`` and in
    ``pymc.sampling.mcmc`` (which imported it by name)."""
    global _PYMC_RUN_CHECKS
    from pymc.sampling import mcmc
    from pymc.stats import convergence

    from pymc_dp._pymc_hooks import wrap_module_function

    original = wrap_module_function(
        [convergence, mcmc], "run_convergence_checks", _run_convergence_checks
    )
    if original is not None:
        _PYMC_RUN_CHECKS = original


#: what makes each group plot_release_ppc reads (named in its error)
_PPC_MAKES = {
    "posterior_predictive": "pm.sample_posterior_predictive(idata, extend_inferencedata=True)",
    "prior_predictive": "pm.sample_prior_predictive() inside the model",
    "observed_data": "pm.sample inside a model with observed releases",
}


def plot_release_ppc(idata, var_names=None, group: str = "posterior_predictive", **kwargs):
    """Posterior (or prior) predictive check of releases with ArviZ 1.x, whatever their shape.

    ``az.plot_ppc_dist`` draws, for each of ``num_samples`` predictive draws, the distribution of
    the values *within* that draw, so it needs at least one dimension besides ``chain`` and
    ``draw`` and fails (``TypeError: n_dims must be one or higher``) on a release that is one
    number (a count, a sum). A single released number has no within-draw distribution; its check
    is the predictive distribution of the release over the draws with the observed release
    marked on it, which is what ``az.plot_ppc_tstat`` draws when its statistic reduces over no
    dimension. This function sends one-number releases there and releases of one or more
    dimensions (vectors of per-group counts, tables) to ``az.plot_ppc_dist``.

    Parameters
    ----------
    idata : xarray.DataTree
        A ``pm.sample`` result extended by ``pm.sample_posterior_predictive(idata,
        extend_inferencedata=True)`` (or ``pm.sample_prior_predictive``), holding ``group`` and
        ``observed_data``.
    var_names : str or list of str, optional
        The releases (observed variables) to plot. Default: every variable of
        ``observed_data`` that ``idata[group]`` holds. All must be one-number releases, or all
        have dimensions (they are drawn by different ArviZ functions): plot the two kinds with
        two calls.
    group : {"posterior_predictive", "prior_predictive"}
    **kwargs
        Passed to ``az.plot_ppc_tstat`` (one-number releases) or ``az.plot_ppc_dist``. Without
        ``kind``, integer releases (counts) are drawn as ECDFs (``kind="ecdf"``), ArviZ's
        advice for discrete data; others as ArviZ chooses.

    Returns
    -------
    arviz_plots.PlotCollection
        One panel per one-number release (its predictive density and the observed value), or
        the panels of ``az.plot_ppc_dist``.

    Raises
    ------
    ValueError
        When ``idata`` lacks ``group`` or ``observed_data``, a name is not in both, or the
        selection mixes one-number and dimensioned releases (the message names both lists).
    TypeError
        When ``var_names`` is not a name or a list of names.

    Examples
    --------
    A one-number release (a noisy count) and its predictive draws:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, xarray as xr
    >>> from pymc_dp.diagnostics import plot_release_ppc
    >>> draws = np.random.default_rng(0).normal(20.0, 3.0, size=(2, 100))
    >>> idata = xr.DataTree.from_dict({
    ...     "posterior_predictive": xr.Dataset({"z": (("chain", "draw"), draws)}),
    ...     "observed_data": xr.Dataset({"z": ((), 21.5)}),
    ... })
    >>> pc = plot_release_ppc(idata)
    >>> {"dist", "observed_tstat"} <= set(pc.viz.children)  # the density and the observed value
    True
    """
    import arviz as az

    if group not in ("posterior_predictive", "prior_predictive"):
        raise ValueError(
            f"plot_release_ppc: group={group!r}; use 'posterior_predictive' or 'prior_predictive'"
        )
    for needed in (group, "observed_data"):
        if needed not in idata.children:
            raise ValueError(
                f"plot_release_ppc: idata has no {needed!r} group; run {_PPC_MAKES[needed]} first"
            )
    pred, obs = idata[group], idata["observed_data"]
    if var_names is None:
        names = [n for n in obs.data_vars if n in pred.data_vars]
        if not names:
            raise ValueError(
                f"plot_release_ppc: no variable of observed_data is in {group!r}; pass var_names"
            )
    else:
        names = [var_names] if isinstance(var_names, str) else list(var_names)
        if not names or not all(isinstance(n, str) for n in names):
            raise TypeError("plot_release_ppc: var_names must be a name or a list of names")
        missing = [n for n in names if n not in obs.data_vars or n not in pred.data_vars]
        if missing:
            raise ValueError(
                f"plot_release_ppc: var_names {missing} are not in both observed_data and "
                f"{group!r}; choose among {[n for n in obs.data_vars if n in pred.data_vars]}"
            )
    scalar = [n for n in names if obs[n].ndim == 0]
    shaped = [n for n in names if obs[n].ndim > 0]
    if scalar and shaped:
        raise ValueError(
            f"plot_release_ppc: one-number releases {scalar} and releases with dimensions "
            f"{shaped} are drawn by different ArviZ plots; call plot_release_ppc once with "
            f"var_names={scalar} and once with var_names={shaped}"
        )
    if "kind" not in kwargs and all(np.issubdtype(obs[n].dtype, np.integer) for n in names):
        # counts: ArviZ warns that a density of integers misleads and suggests ECDFs
        kwargs["kind"] = "ecdf"
    if scalar:
        # the median over no dimension is the value itself: the density of the release's draws
        kwargs.setdefault("t_stat", "median")
        return az.plot_ppc_tstat(idata, var_names=scalar, group=group, **kwargs)
    return az.plot_ppc_dist(idata, var_names=shaped, group=group, **kwargs)
