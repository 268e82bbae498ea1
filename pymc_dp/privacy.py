"""The privacy cost of the releases a model conditions on, and its record on sampling results.

Every ``pmdp.Privatized`` and ``pmdp.Release`` node keeps its mechanism. :func:`privacy_report`
collects them and composes their guarantees; :func:`attach_privacy` writes the report onto an
ArviZ ``DataTree`` (a JSON attribute and a ``privacy`` group), so that a saved result says which
releases it was computed from and at what privacy cost.

Accounting conventions (stated, not hidden):

* ``contributions`` (an argument of :func:`privacy_report`, default 1) is the largest number of
  values (records) one individual contributes to a node; it is part of the claim and the report
  states it;
* a ``Privatized`` node releases each of its values through its own draw of noise; an individual
  with ``k`` values pays ``k`` releases of the mechanism (basic composition,
  :func:`pymc_dp.accounting.compose_repeated`: ``k epsilon``, ``k delta``, ``k rho``); with
  ``k = 1`` (each value from a different individual, local DP) every individual pays the
  mechanism's guarantee once, whatever the number of values (parallel composition);
* a ``Release`` node releases one statistic, vector or scalar, whose sensitivity ``Δ`` the
  mechanism declares for the change one record can make; an individual with ``k`` records
  changes it by at most ``k Δ`` and pays the mechanism's privacy map there,
  ``mechanism.map(k Δ)``: ``k epsilon`` for pure DP, but ``k**2 rho`` for the Gaussians' zCDP;
* different nodes are composed sequentially (``pymc_dp.accounting.compose``), which is an upper
  bound whenever the nodes concern the same individuals;
* only *observed* nodes are releases: an unobserved ``Privatized``/``Release`` variable is a
  simulation, not data, and costs nothing;
* ``Privatized.dist``/``Release.dist`` nodes nested in another observed variable (components of
  ``pm.Mixture``, the graph of a ``pm.CustomDist``, ...) are found by walking the variable's
  graph, inner graphs included, and each is counted in full (an upper bound: a mixture's value
  comes from one component). The report never under-counts the nodes in a model's graph; a
  likelihood written by hand (``pm.Potential`` of a log-density) holds no node and is not seen;
* the total is stated in every form that applies: ``epsilon`` and ``delta`` (basic composition;
  ``epsilon`` is infinite when a node has no finite epsilon, e.g. a Gaussian given by ``rho``),
  and ``rho`` when every node has a zCDP guarantee, where a pure ``epsilon``-DP node counts as
  ``epsilon**2 / 2``-zCDP (Bun & Steinke 2016, Prop. 1.4). All values are Python floats.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from pytensor.graph.op import HasInnerGraph

from pymc_dp.accounting import PrivacyGuarantee, compose, compose_repeated, implied_rho
from pymc_dp.distributions.privatized import PrivatizedRV
from pymc_dp.distributions.release import ReleaseRV
from pymc_dp.mechanisms.base import Mechanism

__all__ = ["PrivacyReport", "ReleaseEntry", "attach_privacy", "privacy_report"]


def _plain(g: PrivacyGuarantee) -> PrivacyGuarantee:
    """The guarantee with plain Python floats and ``rho`` filled in where it is implied."""
    return PrivacyGuarantee(epsilon=float(g.epsilon), delta=float(g.delta), rho=implied_rho(g))


@dataclass(frozen=True)
class ReleaseEntry:
    """One privatized node of a model: its name, kind, mechanism and number of released values.

    ``name`` is the observed variable's name; a node nested in another observed variable
    (e.g. a ``pm.Mixture`` component) is named ``"<variable>[<k>]"``. ``contributions`` is the
    largest number of values one individual contributes to the node.
    """

    name: str
    kind: str
    mechanism: Mechanism
    size: int
    contributions: int = 1

    @property
    def d_in(self) -> float:
        """The largest change of a ``Release`` statistic one individual can make:
        ``contributions * sensitivity`` (for a ``Privatized`` node, the change of each value)."""
        if self.kind == "release":
            return float(self.contributions * self.mechanism.sensitivity)
        return float(self.mechanism.sensitivity)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """What one individual pays for this node (see the module docstring), as plain floats,
        with ``rho = epsilon**2 / 2`` for a pure-DP mechanism: ``mechanism.map(k Δ)`` for a
        ``Release``, ``k`` releases of the mechanism for a ``Privatized`` node
        (``k = contributions``)."""
        k, m = self.contributions, self.mechanism
        if k == 1:
            return _plain(m.guarantee())
        if self.kind == "release":
            return _plain(m.map(Fraction(k) * Fraction(m.sensitivity)))
        # compose with rho filled in: k (epsilon^2/2), tighter than (k epsilon)^2/2
        return _plain(compose_repeated(_plain(m.guarantee()), k))


#: how the report states the cost of k values per individual (plain words, no API names)
_COST_OF_K = (
    "the cost for a person with k values is: for a Release, the mechanism's guarantee when one "
    "person can change the released statistic by k times the sensitivity (k epsilon for the "
    "Laplace and geometric mechanisms, k^2 rho for the Gaussian ones); for a Privatized node, "
    "k separate releases (k epsilon, k delta, k rho)"
)


@dataclass(frozen=True)
class PrivacyReport:
    """The releases of a model and their sequential composition (``total``).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    ...     z = pmdp.Privatized("z", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.25),
    ...                         observed=np.array([4]))
    >>> report = pmdp.privacy_report(m)
    >>> [(e.name, e.mechanism.epsilon) for e in report.entries], report.total.epsilon
    ([('y', 0.5), ('z', 0.25)], 0.75)
    >>> report.to_dict()["total"]
    {'epsilon': 0.75, 'delta': 0.0, 'rho': 0.15625}
    """

    entries: tuple[ReleaseEntry, ...]
    total: PrivacyGuarantee

    def to_dict(self) -> dict:
        """A JSON-serialisable description (infinite values as the string ``"inf"``)."""

        def num(x):
            return None if x is None else (float(x) if math.isfinite(x) else "inf")

        def guar(g):
            return {"epsilon": num(g.epsilon), "delta": num(g.delta), "rho": num(g.rho)}

        return {
            "composition": (
                "sequential across nodes; an individual contributes at most `contributions` "
                "values to a node: a Release costs the mechanism's guarantee for a change of "
                "its statistic by `contributions` times the sensitivity, a Privatized node "
                "`contributions` sequential releases (parallel across individuals); rho of a "
                "pure epsilon-DP node is epsilon^2/2 (Bun & Steinke 2016, Prop. 1.4)"
            ),
            "total": guar(self.total),
            "releases": [
                {
                    "name": e.name,
                    "kind": e.kind,
                    "mechanism": type(e.mechanism).__name__,
                    "family": e.mechanism.family,
                    "sensitivity": float(e.mechanism.sensitivity),
                    "size": e.size,
                    "contributions": e.contributions,
                    "d_in": e.d_in,
                    **guar(e.guarantee),
                }
                for e in self.entries
            ],
        }

    def __str__(self) -> str:
        lines = [f"{'node':<16} {'kind':<11} {'mechanism':<40} {'values':>8}"]
        for e in self.entries:
            lines.append(f"{e.name:<16} {e.kind:<11} {e.mechanism!r:<40} {e.size:>8}")
        t = self.total
        lines.append(
            f"total (sequential composition): epsilon={t.epsilon:.6g}, delta={t.delta:.3g}"
        )
        if t.rho is not None:
            lines[-1] += f", rho={t.rho:.6g} (zCDP; pure epsilon-DP counts as epsilon^2/2)"
        ks = sorted({e.contributions for e in self.entries})
        if ks:
            lines.append(
                f"assumes an individual contributes at most {', '.join(map(str, ks))} value(s) to "
                "a node (privacy_report(contributions=...)); " + _COST_OF_K
            )
        return "\n".join(lines)


def _total(entries) -> PrivacyGuarantee:
    """Basic composition in every form that applies (``rho`` when every node has one, pure DP
    counting as ``epsilon**2 / 2``), as plain floats."""
    t = compose(e.guarantee for e in entries)
    rho = None if t.rho is None else float(t.rho)
    return PrivacyGuarantee(epsilon=float(t.epsilon), delta=float(t.delta), rho=rho)


def _as_count(name: str, k) -> int:
    if isinstance(k, bool | np.bool_) or not isinstance(k, numbers.Integral) or not k >= 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def _contributions(contributions, names) -> dict[str, int]:
    """Per-entry number of values one individual contributes (validated)."""
    if not isinstance(contributions, Mapping):
        k = _as_count("contributions", contributions)
        return dict.fromkeys(names, k)
    unknown = sorted(set(contributions) - set(names))
    if unknown:
        raise ValueError(
            f"contributions names releases the model does not have: {unknown}; its releases "
            f"are {list(names)}"
        )
    return {n: _as_count(f"contributions[{n!r}]", contributions.get(n, 1)) for n in names}


def _nested_nodes(root, model_rvs):
    """Privatized/Release nodes in the graph of ``root`` (not its own node), inner graphs
    included, without walking past other model variables."""
    found, seen_nodes, seen_vars = [], set(), set()
    stack = list(root.owner.inputs) if root.owner is not None else []
    if root.owner is not None and isinstance(root.owner.op, HasInnerGraph):
        stack.extend(root.owner.op.inner_outputs)
    while stack:
        var = stack.pop()
        if var in seen_vars or var in model_rvs:
            continue
        seen_vars.add(var)
        node = var.owner
        if node is None or node in seen_nodes:
            continue
        seen_nodes.add(node)
        if isinstance(node.op, PrivatizedRV | ReleaseRV):
            found.append(node)
        if isinstance(node.op, HasInnerGraph):
            stack.extend(node.op.inner_outputs)
        stack.extend(node.inputs)
    return found


def _kind(op) -> str | None:
    if isinstance(op, PrivatizedRV):
        return "privatized"
    if isinstance(op, ReleaseRV):
        return "release"
    return None


def _collect(model) -> list[tuple[str, str, Mechanism, int]]:
    """``(name, kind, mechanism, size)`` of every observed node, nested ones included."""
    model_rvs = set(model.basic_RVs)
    found = []
    for rv in model.observed_RVs:
        data = model.rvs_to_values.get(rv)
        try:
            size = int(np.prod(data.shape.eval())) if data is not None else 1
        except Exception:  # a size that cannot be evaluated is reported as 1
            size = 1
        kind = _kind(rv.owner.op) if rv.owner is not None else None
        if kind is not None:
            found.append((rv.name, kind, rv.owner.op.mechanism, size))
        for k, node in enumerate(_nested_nodes(rv, model_rvs - {rv})):
            found.append((f"{rv.name}[{k}]", _kind(node.op), node.op.mechanism, size))
    return found


def privacy_report(model=None, *, contributions=1) -> PrivacyReport:
    """Collect the observed privatized nodes of ``model`` (default: the model in context) and
    compose them.

    Every observed variable's graph is walked (inner graphs included), so nodes nested in a
    ``pm.Mixture`` or ``pm.CustomDist`` are counted; unobserved nodes are not releases.

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    contributions : int or mapping of str to int, default 1
        The largest number of values (records) one individual contributes to a node: one
        positive integer for every node, or a mapping from node names (as in
        ``report.entries``) to positive integers (nodes not named: 1). An individual with
        ``k`` records in a ``Release`` changes its statistic by at most ``k * sensitivity`` and
        pays ``mechanism.map(k * sensitivity)``; with ``k`` values of a ``Privatized`` node it
        pays ``k`` releases of the mechanism (module docstring).

    Raises
    ------
    ValueError
        If a contribution count is not a positive integer, or the mapping names a node the
        model does not have.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    >>> report = pmdp.privacy_report(m)
    >>> report.total.epsilon, report.total.rho
    (0.5, 0.125)
    >>> [(e.name, e.kind, e.size) for e in report.entries]
    [('y', 'privatized', 3)]
    >>> pmdp.privacy_report(m, contributions=3).total.epsilon  # 3 values of one individual
    1.5
    """
    import pymc as pm

    found = _collect(pm.modelcontext(model))
    ks = _contributions(contributions, [f[0] for f in found])
    entries = tuple(
        ReleaseEntry(name=n, kind=kind, mechanism=mech, size=size, contributions=ks[n])
        for n, kind, mech, size in found
    )
    return PrivacyReport(entries=entries, total=_total(entries))


def attach_privacy(idata, model=None, *, contributions=1):
    """Record :func:`privacy_report` on a sampling result (an ArviZ ``DataTree``); returns it.

    Adds ``idata.attrs["pymc_dp_privacy"]`` (a JSON string, which survives netCDF round trips)
    and a ``privacy`` group with one entry per release (epsilon, delta, rho, sensitivity,
    contributions; rho is NaN where a node has no zCDP guarantee) and the totals as attributes
    (``total_rho`` only when every node has one). ``contributions`` is passed to
    :func:`privacy_report`.

    Examples
    --------
    >>> import json, numpy as np, pymc as pm, arviz as az, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    >>> idata = az.from_dict({"posterior": {"lam": np.ones((1, 5))}})  # stands in for pm.sample
    >>> idata = pmdp.attach_privacy(idata, m)
    >>> json.loads(idata.attrs["pymc_dp_privacy"])["total"]
    {'epsilon': 0.5, 'delta': 0.0, 'rho': 0.125}
    >>> idata["privacy"]["epsilon"].values.tolist(), idata["privacy"].attrs["total_rho"]
    ([0.5], 0.125)
    """
    import xarray as xr

    report = privacy_report(model, contributions=contributions)
    d = report.to_dict()
    idata.attrs["pymc_dp_privacy"] = json.dumps(d)
    names = [e.name for e in report.entries]
    gs = [e.guarantee for e in report.entries]
    attrs = {
        "total_epsilon": report.total.epsilon,
        "total_delta": report.total.delta,
        "composition": d["composition"],
    }
    if report.total.rho is not None:
        attrs["total_rho"] = report.total.rho
    ds = xr.Dataset(
        {
            "epsilon": ("release", np.array([g.epsilon for g in gs], dtype=np.float64)),
            "delta": ("release", np.array([g.delta for g in gs], dtype=np.float64)),
            "rho": (
                "release",
                np.array([math.nan if g.rho is None else g.rho for g in gs], dtype=np.float64),
            ),
            "sensitivity": (
                "release",
                np.array([float(e.mechanism.sensitivity) for e in report.entries], np.float64),
            ),
            "contributions": (
                "release",
                np.array([e.contributions for e in report.entries], dtype=np.int64),
            ),
        },
        coords={"release": names},
        attrs=attrs,
    )
    idata["privacy"] = xr.DataTree(ds)
    return idata
