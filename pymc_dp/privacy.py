"""The privacy cost of the releases a model conditions on, and its record on sampling results.

Every ``pmdp.Privatized`` and ``pmdp.Release`` node keeps its mechanism. :func:`privacy_report`
collects them and composes their guarantees; :func:`attach_privacy` writes the report onto an
ArviZ ``DataTree`` (a JSON attribute and a ``privacy`` group), so that a saved result says which
releases it was computed from and at what privacy cost.

Accounting conventions (stated, not hidden):

* a ``Privatized`` node releases each of its values through its own draw of noise; when each value
  belongs to a different individual (local DP), every individual pays the mechanism's guarantee
  once, whatever the number of values (parallel composition);
* a ``Release`` node releases one statistic, vector or scalar, whose sensitivity the mechanism
  declares for the whole statistic; it costs the mechanism's guarantee once;
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
from dataclasses import dataclass

import numpy as np

from pymc_dp.accounting import compose
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee

__all__ = ["PrivacyReport", "ReleaseEntry", "attach_privacy", "privacy_report"]


def _implied_rho(g: PrivacyGuarantee) -> float | None:
    """rho of a guarantee: its own, or ``epsilon**2 / 2`` for pure DP (Bun & Steinke 2016,
    Prop. 1.4); None when neither applies."""
    if g.rho is not None:
        return float(g.rho)
    if float(g.delta) == 0.0 and math.isfinite(g.epsilon):
        try:
            return float(g.epsilon) ** 2 / 2.0
        except OverflowError:
            return math.inf
    return None


def _plain(g: PrivacyGuarantee) -> PrivacyGuarantee:
    """The guarantee with plain Python floats and ``rho`` filled in where it is implied."""
    return PrivacyGuarantee(epsilon=float(g.epsilon), delta=float(g.delta), rho=_implied_rho(g))


@dataclass(frozen=True)
class ReleaseEntry:
    """One privatized node of a model: its name, kind, mechanism and number of released values.

    ``name`` is the observed variable's name; a node nested in another observed variable
    (e.g. a ``pm.Mixture`` component) is named ``"<variable>[<k>]"``.
    """

    name: str
    kind: str
    mechanism: Mechanism
    size: int

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """The mechanism's guarantee (paid once per individual, see the module docstring), as
        plain floats, with ``rho = epsilon**2 / 2`` for a pure-DP mechanism."""
        return _plain(self.mechanism.guarantee())


@dataclass(frozen=True)
class PrivacyReport:
    """The releases of a model and their sequential composition (``total``)."""

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
                "sequential across nodes; parallel across the values of a Privatized node "
                "(each value from a different individual); rho of a pure epsilon-DP node is "
                "epsilon^2/2 (Bun & Steinke 2016, Prop. 1.4)"
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
        if any(e.kind == "privatized" for e in self.entries):
            lines.append(
                "assumes each value of a Privatized node belongs to a different individual; "
                "an individual with k values pays k times its epsilon"
            )
        return "\n".join(lines)


def _sum(xs) -> float:
    try:
        return math.fsum(xs)
    except OverflowError:
        return math.inf


def _total(entries) -> PrivacyGuarantee:
    """Basic composition in every form that applies, as plain floats."""
    basic = compose(e.mechanism for e in entries)
    rhos = [e.guarantee.rho for e in entries]
    rho = None if any(r is None for r in rhos) else float(_sum(rhos))
    return PrivacyGuarantee(epsilon=float(basic.epsilon), delta=float(basic.delta), rho=rho)


def _nested_nodes(root, model_rvs):
    """Privatized/Release nodes in the graph of ``root`` (not its own node), inner graphs
    included, without walking past other model variables."""
    from pytensor.graph.op import HasInnerGraph

    from pymc_dp.distributions.privatized import PrivatizedRV
    from pymc_dp.distributions.release import ReleaseRV

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
    from pymc_dp.distributions.privatized import PrivatizedRV
    from pymc_dp.distributions.release import ReleaseRV

    if isinstance(op, PrivatizedRV):
        return "privatized"
    if isinstance(op, ReleaseRV):
        return "release"
    return None


def privacy_report(model=None) -> PrivacyReport:
    """Collect the observed privatized nodes of ``model`` (default: the model in context) and
    compose them.

    Every observed variable's graph is walked (inner graphs included), so nodes nested in a
    ``pm.Mixture`` or ``pm.CustomDist`` are counted; unobserved nodes are not releases.

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
    """
    import pymc as pm

    model = pm.modelcontext(model)
    model_rvs = set(model.basic_RVs)
    entries = []
    for rv in model.observed_RVs:
        data = model.rvs_to_values.get(rv)
        try:
            size = int(np.prod(data.shape.eval())) if data is not None else 1
        except Exception:  # a size that cannot be evaluated is reported as 1
            size = 1
        kind = _kind(rv.owner.op) if rv.owner is not None else None
        if kind is not None:
            entries.append(
                ReleaseEntry(name=rv.name, kind=kind, mechanism=rv.owner.op.mechanism, size=size)
            )
        for k, node in enumerate(_nested_nodes(rv, model_rvs - {rv})):
            entries.append(
                ReleaseEntry(
                    name=f"{rv.name}[{k}]",
                    kind=_kind(node.op),
                    mechanism=node.op.mechanism,
                    size=size,
                )
            )
    return PrivacyReport(entries=tuple(entries), total=_total(entries))


def attach_privacy(idata, model=None):
    """Record :func:`privacy_report` on a sampling result (an ArviZ ``DataTree``); returns it.

    Adds ``idata.attrs["pymc_dp_privacy"]`` (a JSON string, which survives netCDF round trips)
    and a ``privacy`` group with one entry per release (epsilon, delta, rho, sensitivity; rho is
    NaN where a node has no zCDP guarantee) and the totals as attributes (``total_rho`` only
    when every node has one).
    """
    import xarray as xr

    report = privacy_report(model)
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
        },
        coords={"release": names},
        attrs=attrs,
    )
    idata["privacy"] = xr.DataTree(ds)
    return idata
