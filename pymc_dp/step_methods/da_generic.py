"""The exact generic path of the data-augmentation step, for any statistic.

Statistics that are not sums over records (``max``, medians, centred sums ...) and blocks whose
releases use mechanisms of different families take this path: one compiled ``scan`` over the
records swaps record ``i`` in, recomputes the whole statistic (O(n) per record, O(n^2) per
sweep) and accepts with the PyTensor noise log-densities (``Mechanism.logpdf_pt``). The scan
also outputs, per record, each release's change relative to its declared sensitivity.

:func:`build_generic` checks the records (forward-samplable, conditionally independent) and
compiles the scan; :func:`generic_sweep` runs one sweep with the contract of
:func:`~pymc_dp.step_methods.da_additive.additive_sweep`.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.step_methods.data_augmentation import DataAugmentation
>>> with pm.Model() as model:
...     x = pm.Normal("x", 0.0, 1.0, shape=5)
...     _ = pmdp.Release("z", x.max(), pmdp.Laplace(scale=1.0), observed=1.0)
...     step = DataAugmentation([x], rng=1)
>>> (spec, scratch), point = step._blocks[0], model.initial_point()
>>> spec.generic
True
>>> args = [point[name] for name in step._input_names]
>>> res = generic_sweep(spec, scratch, args, np.random.default_rng(0))
>>> res.records[0].shape, res.n_accepted <= 5
((5,), True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from pymc_dp.step_methods.da_additive import SweepResult
from pymc_dp.step_methods.da_blocks import is_zeros
from pymc_dp.step_methods.da_checks import (
    check_rows,
    differing_records,
    forward_error,
    sensitivity_message,
)
from pymc_dp.step_methods.da_proposals import reseed

__all__ = ["GenericRelease", "build_generic", "generic_sweep"]


@dataclass(frozen=True)
class GenericRelease:
    """The releases of a block as the scan needs them: released values ``z`` (flattened),
    mechanisms, component counts, declared sensitivities (inf: not checked) and whether each
    sensitivity is an L2 bound."""

    z: np.ndarray
    mechs: list
    sizes: list
    sens: np.ndarray
    l2: np.ndarray
    #: per component: 0 interior, -1 at the lower bound, +1 at the upper bound (None: no
    #: censored release in the block)
    sides: np.ndarray | None = None

    def log_eta(self, T):
        """Log release density of the statistic ``T`` (flattened) given ``z``: the noise
        log-density per component, or its log CDF / log survival where a censored release
        sits at its lower / upper bound."""
        z_c = pt.as_tensor(np.asarray(self.z, dtype=np.float64))
        out, k = pt.as_tensor(np.float64(0.0)), 0
        for mech, size in zip(self.mechs, self.sizes, strict=True):
            resid = z_c[k : k + size] - T[k : k + size]
            lp = mech.logpdf_pt(resid)
            side = None if self.sides is None else self.sides[k : k + size]
            if side is not None and np.any(side < 0):
                lp = pt.switch(pt.as_tensor(side < 0), mech.logcdf_pt(resid), lp)
            if side is not None and np.any(side > 0):
                lp = pt.switch(pt.as_tensor(side > 0), mech.logsf_pt(resid), lp)
            out = out + lp.sum()
            k += size
        return out

    def excess(self, dT):
        """Per release: the norm of the change ``dT`` over the declared sensitivity."""
        sens_c = pt.as_tensor(
            np.asarray(np.where(np.isfinite(self.sens), self.sens, 1.0), np.float64)
        )
        ratios, k0 = [], 0
        for r, size in enumerate(self.sizes):
            part = dT[k0 : k0 + size]
            k0 += size
            if not np.isfinite(self.sens[r]):
                ratios.append(pt.as_tensor(np.float64(0.0)))
                continue
            norm = pt.sqrt(pt.sum(part**2)) if self.l2[r] else pt.sum(pt.abs(part))
            ratios.append(norm / sens_c[r])
        return pt.stack(ratios)


def _check_records(g) -> None:
    """Forward-samplable and conditionally independent (numerically, at the initial point)."""
    args = g.args
    pos = g.pos
    prop_fn = g.compile_check(g.prop_vals)
    rows_fn = g.compile_check(pt.stack(g.row_terms))
    reseed(prop_fn, np.random.default_rng(12345))
    cur = [args[p_] for p_ in pos]
    try:
        alt, changed = differing_records(lambda: [np.array(r) for r in prop_fn(*args)], cur, g.n)
    except Exception as err:
        raise forward_error(g.label, err) from err

    def rows_at(recs):
        a = list(args)
        for p_, r in zip(pos, recs, strict=True):
            a[p_] = r
        return np.asarray(rows_fn(*a), dtype=np.float64)

    check_rows(rows_at, cur, alt, changed, g.n, g.label)


def _scan_body(g, rel: GenericRelease):
    """The scan step: swap record i in, recompute T, accept or not."""
    k = len(g.values)
    values = g.values

    def body(i, lu, ex, lp_cur, T_cur, *rest):
        cur, props_in = rest[:k], rest[k:]
        swapped = [pt.set_subtensor(c[i], p_[i]) for c, p_ in zip(cur, props_in, strict=True)]
        T_new = graph_replace(g.T_flat, dict(zip(values, swapped, strict=True)), strict=False)
        lp_new = rel.log_eta(T_new)
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
            rel.excess(T_new - T_cur),
        ]

    return body


def build_generic(g, rel: GenericRelease):
    """Exact path for a statistic that is not a sum over records: recompute T per record.

    One compiled function of ``(*value_vars, log_u)`` runs the whole sweep of block graph ``g``
    as a ``scan`` over records: record ``i`` is swapped into the current records, the
    statistic recomputed (O(n) per record, O(n^2) per sweep) and the swap accepted with the
    release density ratio (mechanism ``logpdf_pt``). Returns the function and whether the
    block has observed per-record children.
    """
    _check_records(g)
    has_extra = not is_zeros(g.lw_cur)
    value_to_prop = dict(zip(g.values, g.prop_vals, strict=True))
    extra = (
        graph_replace(g.lw_cur, value_to_prop, strict=False) - g.lw_cur
        if has_extra
        else pt.zeros((g.n,), "float64")
    )
    log_u = pt.vector("log_u", dtype="float64")
    outs = pytensor.scan(
        _scan_body(g, rel),
        sequences=[pt.arange(g.n), log_u, extra],
        outputs_info=[rel.log_eta(g.T_flat), g.T_flat, *g.values, None, None, None],
        non_sequences=list(g.prop_vals),
        return_updates=False,
    )
    final = [o[-1] for o in outs[2 : 2 + len(g.values)]]
    acc_seq, prob_seq, exc_seq = outs[-3], outs[-2], outs[-1]
    fn = g.compile([*final, acc_seq.sum(), prob_seq.min(), prob_seq.mean(), exc_seq], [log_u])
    return fn, has_extra


def generic_sweep(spec, scratch, args, rng) -> SweepResult:
    """One sweep of a generic block (``spec.generic``): the compiled scan of
    :func:`build_generic`, with log-uniforms drawn from ``rng``; raises ``ValueError`` when a
    record change exceeds a declared sensitivity. ``scratch`` is not used."""
    res = spec.fn(*args, np.log(rng.random(spec.n)))
    k = len(spec.names)
    records = [np.array(val, dtype=args[p].dtype) for p, val in zip(spec.pos, res[:k], strict=True)]
    exc = np.asarray(res[k + 3])  # (n, R): change / declared sensitivity
    if exc.size and exc.max() > 1.0 + 1e-9:
        i, r = np.unravel_index(int(np.argmax(exc)), exc.shape)
        raise ValueError(sensitivity_message(spec, int(i), int(r), float(exc[i, r] * spec.sens[r])))
    return SweepResult(records, int(res[k]), float(res[k + 1]), float(res[k + 2]))
