"""Issue 8 benchmark: cost of one data-augmentation sweep against drawing its proposals.

Model (as in ``bench_da_bernoulli.py``): ``p ~ Beta(1, 1)``, ``x_i ~ Bernoulli(p)``,
``i = 1..n``, released ``z = sum(x) + Laplace(1/eps)`` with eps = 1, p held at 0.3.

Measured in one run, at n = 10^3, 10^5, 10^6, 10^7 (medians of repeats after a warm-up call;
compile time excluded):

* ``step``: one ``DataAugmentation.step(point)`` (proposals, their contributions, the
  listing, the sensitivity check, the uniforms, the accept/reject kernel, restoring rejected
  records), as the adapter in the checkout does it;
* ``kernel``: the same sweep through the explicit-state kernel, what an adapter built on
  :func:`pymc_dp.kernels.da_sweep.da_step` does: draw the proposals with numpy
  (``rng.random(n) < p``), their contributions as float64, ``da_step(..., inplace=True)`` with
  the uniforms drawn inside the sweep, restore the rejected records;
* ``numpy``: drawing the n proposals with numpy, ``rng.random(n) < p``: the ratios' unit.

Memory: bytes per record of one step, as the peak of memory traced by ``tracemalloc`` during
the step above what was traced before it (numpy reports its buffers to tracemalloc), divided by
n, at every n (constant in n: memory linear in n); and at n = 10^7 the growth of the process's
peak resident set (``ru_maxrss``) from before building the model to after the timed sweeps
(model, step construction, point and sweeps), divided by n.

Usage: ``.venv/bin/python benchmarks/bench_da_sweep.py [--out results.md]``.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
import tracemalloc

import numpy as np
import pymc as pm

from pymc_dp.distributions.release import Release
from pymc_dp.kernels.da_sweep import DANoise, da_init, da_step
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.data_augmentation import DataAugmentation

EPS = 1.0
P_TRUE = 0.3
SIZES = [(10**3, 500), (10**5, 60), (10**6, 25), (10**7, 7)]  # (n, repeats)


def model(n, seed=0):
    rng = np.random.default_rng(seed)
    z = float((rng.random(n) < P_TRUE).sum() + rng.laplace(0.0, 1.0 / EPS))
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        Release("z", x.sum(), Laplace(epsilon=EPS), observed=np.float64(z))
    return m, z


def timed(fn):
    """(wall seconds, CPU seconds of this process) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def traced_peak(fn):
    """Peak bytes traced during ``fn()`` above those traced before it."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def step_sweeper(n):
    """One ``DataAugmentation.step`` of the n-record model, as a closure."""
    m, z = model(n)
    with m:
        da = DataAugmentation([m["x"]], rng=1)
    point = m.initial_point()
    point["p_logodds__"] = np.asarray(np.log(P_TRUE / (1 - P_TRUE)))
    box = {"pt": point}

    def sweep():
        box["pt"], _ = da.step(box["pt"])

    return sweep, z


def kernel_sweeper(n, z):
    """One sweep through :func:`da_step` (numpy proposals, uniforms drawn in the sweep)."""
    rng = np.random.default_rng(2)
    mech = Laplace(epsilon=EPS)
    noise = DANoise(np.array([z]), mech.numba_logpdf, mech.numba_params[None, :],
                    sens=np.array([1.0]))  # fmt: skip
    box = {"x": rng.random(n) < P_TRUE}
    box["st"] = da_init(box["x"].astype(np.float64), 0.0)

    def sweep():
        x_prop = rng.random(n) < P_TRUE
        t_prop = x_prop.astype(np.float64).reshape(n, 1)
        box["st"], info = da_step(box["st"], t_prop, rng, noise, inplace=True)
        x_prop[info.rejected] = box["x"][info.rejected]
        box["x"] = x_prop

    return sweep


def measure(n, repeats):
    """Paired timings (numpy, step, kernel in turn, so that load hits all three alike):
    medians of wall times and of the per-repeat ratios to numpy (wall and CPU)."""
    step, z = step_sweeper(n)
    kernel = kernel_sweeper(n, z)
    rng = np.random.default_rng(3)

    def numpy_props():
        return rng.random(n) < P_TRUE

    for f in (numpy_props, step, kernel):
        f()  # warm-up
    t = np.array([[timed(f) for f in (numpy_props, step, kernel)] for _ in range(repeats)])
    # t[r, j, 0]: wall, t[r, j, 1]: CPU; j = numpy, step, kernel
    wall = np.median(t[:, :, 0], axis=0)
    ratio_wall = np.median(t[:, 1:, 0] / t[:, :1, 0], axis=0)
    ratio_cpu = np.median(t[:, 1:, 1] / np.maximum(t[:, :1, 1], 1e-9), axis=0)
    return wall, ratio_wall, ratio_cpu, traced_peak(step) / n, traced_peak(kernel) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-n", type=float, default=1e7, help="largest n (quick checks)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    measure(10**3, 3)  # compile everything once
    rows = []
    rss = None
    for n, reps in [(n, r) for n, r in SIZES if n <= args.max_n]:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rows.append((n, *measure(n, reps)))
        if n == 10**7:
            rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before) / n
        print(rows[-1], flush=True)
    lines = [
        f"`benchmarks/bench_da_sweep.py` (issue 8): Bernoulli records, Laplace count, eps = {EPS:g},"
        f" p = {P_TRUE}. Machine: {platform.machine()}, 2 cores shared with other jobs. One run,"
        f" {time.perf_counter() - t0:.0f} s. Medians over paired repeats (numpy, step, kernel in"
        " turn); ratios are medians of the per-repeat ratios to the numpy proposal draw, by"
        " wall time and by CPU time of the process; compile excluded.",
        "",
        "| n | repeats | numpy proposals | step | step / numpy (wall, CPU) "
        "| kernel (da_step) | kernel / numpy (wall, CPU) | bytes/record traced (step, kernel) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    reps_of = dict(SIZES)
    for n, wall, r_wall, r_cpu, b_step, b_ker in rows:
        lines.append(
            f"| 10^{round(np.log10(n))} | {reps_of[n]} | {wall[0] * 1e3:.3f} ms "
            f"| {wall[1] * 1e3:.3f} ms | {r_wall[0]:.2f}, {r_cpu[0]:.2f} "
            f"| {wall[2] * 1e3:.3f} ms | {r_wall[1]:.2f}, {r_cpu[1]:.2f} "
            f"| {b_step:.0f}, {b_ker:.0f} |"
        )
    if rss is not None:
        lines += [
            "",
            f"n = 10^7: {rows[-1][1][1]:.3f} s per sweep (step), {rows[-1][1][2]:.3f} s "
            "(kernel); peak resident set growth from before building the model to after the "
            f"sweeps: {rss:.0f} bytes per record (model, step construction, point, sweeps). "
            "Traced bytes: peak of tracemalloc during one sweep above what was traced before "
            "it, per record (the sweep's transient arrays).",
        ]
    md = "\n".join(lines)
    print(md)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(md + "\n")


if __name__ == "__main__":
    main()
