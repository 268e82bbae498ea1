"""Time to first draw: the naive Bayes model of Ju et al. (2022) on a cold and a warm cache.

Model (slides, "Application: Naive Bayes"): N = 100 records, 5 classes, 5 questions with 3 answers,
Dirichlet(2) priors; the release is the 5 class-by-answer tables (75 cells) + Laplace(2K/eps),
eps = 1. ``pm.sample`` assigns DataAugmentation to the records and ConjugateGibbs to the
Dirichlet parameters.

Each measurement runs in a fresh Python process (``python benchmarks/bench_first_draw.py --child``)
and reports the phases: ``import pymc_dp``; building the model; step assignment and construction
(``pm.sample`` compiles the steps there); the first draw. "Cold" gives the process an empty
PyTensor compile directory and an empty numba cache directory; "warm" runs again on those same
directories (the caches the cold run filled).

Run: ``.venv/bin/python benchmarks/bench_first_draw.py [--repeat 1] [--profile]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

N, I, K, J = 100, 5, 5, 3  # noqa: E741 - the slides' notation


def _child(profile: bool) -> dict:
    t0 = time.perf_counter()
    import numpy as np
    import pymc as pm
    import pytensor.tensor as pt

    import pymc_dp
    from pymc_dp import Laplace, Release

    t1 = time.perf_counter()
    rng = np.random.default_rng(0)
    z = rng.integers(0, 20, size=K * I * J).astype(float)
    with pm.Model() as model:
        pi = pm.Dirichlet("pi", a=np.full(I, 2.0))
        y = pm.Categorical("y", p=pi, shape=N)
        one_y = pt.eq(y[:, None], np.arange(I)[None, :]).astype("float64")
        parts = []
        for k in range(K):
            theta = pm.Dirichlet(f"theta{k}", a=np.full((I, J), 2.0))
            x = pm.Categorical(f"x{k}", p=theta[y], shape=N)
            one_x = pt.eq(x[:, None], np.arange(J)[None, :]).astype("float64")
            parts.append((one_y[:, :, None] * one_x[:, None, :]).sum(0).ravel())
        Release("z", pt.concatenate(parts), Laplace(epsilon=1.0, sensitivity=2 * K), observed=z)
    t2 = time.perf_counter()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with model:
        from pymc.sampling.mcmc import assign_step_methods, instantiate_steppers

        provided, selected = assign_step_methods(model, None)
        steps = instantiate_steppers(model, provided, selected)
        step = pm.CompoundStep(steps) if isinstance(steps, list) else steps
    t3 = time.perf_counter()
    point = model.initial_point()
    step.step(point)
    t4 = time.perf_counter()
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    del pymc_dp
    return {
        "import": t1 - t0,
        "model": t2 - t1,
        "steps": t3 - t2,
        "first_step": t4 - t3,
        "total": t4 - t0,
    }


def _run(env: dict, profile: bool) -> dict:
    cmd = [sys.executable, __file__, "--child"] + (["--profile"] if profile else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit(f"the measured process failed:\n{out.stderr[-3000:]}")
    if profile:
        sys.stderr.write(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.profile)))
        return
    rows = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ)
            env["PYTENSOR_FLAGS"] = f"compiledir={tmp}/pt"
            env["NUMBA_CACHE_DIR"] = f"{tmp}/nb"
            rows.append(("cold", _run(env, args.profile)))
            rows.append(("warm", _run(env, False)))
    print("| cache | import (s) | model (s) | step construction (s) | first step (s) | total (s) |")
    print("|---|---|---|---|---|---|")
    for kind, r in rows:
        print(
            f"| {kind} | {r['import']:.1f} | {r['model']:.1f} | {r['steps']:.1f} | "
            f"{r['first_step']:.2f} | {r['total']:.1f} |"
        )


if __name__ == "__main__":
    main()
