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
  bound whenever the nodes concern the same individuals.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from pymc_dp.accounting import compose
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee

__all__ = ["PrivacyReport", "ReleaseEntry", "attach_privacy", "privacy_report"]


@dataclass(frozen=True)
class ReleaseEntry:
    """One privatized node of a model: its name, kind, mechanism and number of released values."""

    name: str
    kind: str
    mechanism: Mechanism
    size: int

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """The mechanism's guarantee (paid once per individual, see the module docstring)."""
        return self.mechanism.guarantee()


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
                "(each value from a different individual)"
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
            lines[-1] += f", rho={t.rho:.6g}"
        if any(e.kind == "privatized" for e in self.entries):
            lines.append(
                "assumes each value of a Privatized node belongs to a different individual; "
                "an individual with k values pays k times its epsilon"
            )
        return "\n".join(lines)


def privacy_report(model=None) -> PrivacyReport:
    """Collect the privatized nodes of ``model`` (default: the model in context) and compose them.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> with pm.Model() as m:
    ...     lam = pm.Gamma("lam", 2.0, 0.5)
    ...     y = pmdp.Privatized("y", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=0.5),
    ...                         observed=np.array([3, 5, -1]))
    >>> report = pmdp.privacy_report(m)
    >>> report.total.epsilon
    0.5
    >>> [(e.name, e.kind, e.size) for e in report.entries]
    [('y', 'privatized', 3)]
    """
    import pymc as pm

    from pymc_dp.distributions.privatized import privatized_mechanisms
    from pymc_dp.distributions.release import released_mechanisms

    model = pm.modelcontext(model)
    entries = []
    for kind, found in (
        ("privatized", privatized_mechanisms(model)),
        ("release", released_mechanisms(model)),
    ):
        for name, mech in found.items():
            size = int(np.prod(model[name].shape.eval())) if name in model.named_vars else 1
            entries.append(ReleaseEntry(name=name, kind=kind, mechanism=mech, size=size))
    total = compose(e.mechanism for e in entries)
    return PrivacyReport(entries=tuple(entries), total=total)


def attach_privacy(idata, model=None):
    """Record :func:`privacy_report` on a sampling result (an ArviZ ``DataTree``); returns it.

    Adds ``idata.attrs["pymc_dp_privacy"]`` (a JSON string, which survives netCDF round trips)
    and a ``privacy`` group with one entry per release (epsilon, delta, sensitivity).
    """
    import xarray as xr

    report = privacy_report(model)
    d = report.to_dict()
    idata.attrs["pymc_dp_privacy"] = json.dumps(d)
    names = [e.name for e in report.entries]
    ds = xr.Dataset(
        {
            "epsilon": ("release", [e.guarantee.epsilon for e in report.entries]),
            "delta": ("release", [e.guarantee.delta for e in report.entries]),
            "sensitivity": ("release", [float(e.mechanism.sensitivity) for e in report.entries]),
        },
        coords={"release": names},
        attrs={
            "total_epsilon": report.total.epsilon,
            "total_delta": report.total.delta,
            "composition": d["composition"],
        },
    )
    idata["privacy"] = xr.DataTree(ds)
    return idata
