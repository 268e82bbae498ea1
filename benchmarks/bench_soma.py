"""Benchmark: ESS per second of beta, DA against SOMA, on the Ju et al. (2022) regression.

The model and the released statistic are those of ``benchmarks/bench_da_regression.py``
(its ``build``, imported): n = 100 records
``(x_i, y_i)``, p = 2 predictors, both private, 9 released components with Laplace noise of L1
sensitivity 15, ``beta ~ N(0, 2)``, the mean of ``y`` written ``beta[0] + X @ beta[1:]``.

Samplers: the records by ``DataAugmentation(method="da")`` (Ju et al. 2022) or
``DataAugmentation(method="soma")`` (Xiong & Ju 2025), beta by ``ConjugateGibbs`` in both, driven
by the same loop (record sweep, then beta). Timing: wall time of the loop (compilation
excluded, first 20 iterations as warm-up); ESS of each component of beta (``arviz.ess``, mean)
over the draws after a burn-in of 10%; the table gives the minimum over components of ESS and
of ESS per second, and the mean acceptance rate of the record step.

Run: ``.venv/bin/python benchmarks/bench_soma.py [--quick] [--iters N] [--eps 0.1 1 10]``
(``--quick``: 5,000 iterations per run; default 10,000.)
"""

from __future__ import annotations

import argparse
import inspect
import os
import time

import arviz as az
import numpy as np
from bench_da_regression import build as regression_build

from pymc_dp.step_methods.conjugate import ConjugateGibbs
from pymc_dp.step_methods.data_augmentation import DataAugmentation


def build(eps, seed):
    """The regression model of ``bench_da_regression.build`` (see the module docstring)."""
    return regression_build(eps, seed)[0]


def wired() -> bool:
    """Whether ``DataAugmentation`` takes ``method`` (the SOMA option)."""
    return "method" in inspect.signature(DataAugmentation.__init__).parameters


def run(model, method, iters, seed):
    """``iters`` iterations (record sweep, then beta); returns beta draws, seconds, acc rate."""
    with model:
        rec = DataAugmentation([model["X"], model["y"]], rng=seed, method=method)
        cg = ConjugateGibbs([model["beta"]], rng=seed + 1)
    point = model.initial_point()
    for _ in range(20):
        point, _ = rec.step(point)
        point, _ = cg.step(point)
    draws = np.empty((iters, 3))
    acc = 0.0
    t0 = time.perf_counter()
    for it in range(iters):
        point, (st,) = rec.step(point)
        point, _ = cg.step(point)
        draws[it] = point["beta"]
        acc += st["da_accept_rate"]
    return draws, time.perf_counter() - t0, acc / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="5,000 iterations per run")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    args = ap.parse_args()
    iters = args.iters or (5_000 if args.quick else 10_000)
    if not wired():
        raise SystemExit("DataAugmentation has no method= option yet: SOMA is not wired")
    print(f"load average {os.getloadavg()}, {iters} iterations per run, burn-in 10%")
    print("| eps | method | seconds | us/iter | acc rate | min ESS (beta) | min ESS/s |")
    print("|---|---|---|---|---|---|---|")
    for eps in args.eps:
        model = build(eps, seed=2022)
        for method in ("da", "soma"):
            draws, secs, acc = run(model, method, iters, seed=3)
            kept = draws[iters // 10 :]
            ess = np.array([float(az.ess(kept[None, :, j], method="mean")) for j in range(3)])
            print(
                f"| {eps:g} | {method} | {secs:.2f} | {secs / iters * 1e6:.0f} | {acc:.3f} "
                f"| {ess.min():.0f} | {ess.min() / secs:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
