"""Benchmark (b): Ju, Awan, Gong & Rao (2022) private linear regression, data augmentation.

Setup (slides, "Application: Linear Regression" and "Simulation Setup"): n = 100 records
``(x_i, y_i)``, p = 2 predictors ``x_i ~ N((0.9, -1.17), I)``, ``y_i | x_i ~ N(x~_i' beta, 2)``
with ``beta = (-1.79, -2.89, -0.66)`` (intercept first), prior ``beta_j ~ N(0, 2)``. Predictors
and response are clamped and normalised to [-1, 1] and the released vector is
``(X~'y~, y~'y~, X~'X~) + Laplace``, X~ = [1, x~]; both predictors and response are private, so
each record ``(x_i, y_i)`` is latent and proposed jointly by the DataAugmentation step.

Choices the slides leave open (stated here): clamping bounds ``x_j in [m_j - 4, m_j + 4]``,
``y in [-15, 8]``; the released components are the 9 non-constant entries
``X~'y~`` (3), ``y~'y~`` (1) and the upper triangle of ``X~'X~`` without its constant ``n``
(``sum x1, sum x2, sum x1^2, sum x1 x2, sum x2^2``); one Laplace mechanism with the L1
sensitivity of that vector, 6 + 1 + 8 = 15, and epsilon = 1 unless ``--eps`` is given.

Steps: the ones ``pm.sample`` assigns by itself after ``import pymc_dp`` (printed):
``DataAugmentation`` for the records (X, y) and ``ConjugateGibbs`` for beta (the exact Normal
full conditional of Bayesian linear regression with known variance). ``--nuts`` also times NUTS
on beta, passed explicitly, for comparison.

Timing: ``sampling_time`` from the posterior attrs of ``pm.sample`` (the sampling loop, without
compilation), 10,000 iterations, one chain, ``cores=1``, median (and minimum) over ``--repeat``
runs; plus the time per call of each step alone.

Run: ``.venv/bin/python benchmarks/bench_da_regression.py [--eps 1.0] [--iters 10000]``
"""

from __future__ import annotations

import argparse
import os
import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from _ju_common import SIGMA2, TAU2, X_HI, X_LO, Y_HI, Y_LO, M, N, regression_data, to_unit
from pymc.sampling.mcmc import assign_step_methods

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.conjugate import ConjugateGibbs
from pymc_dp.step_methods.data_augmentation import DataAugmentation

SENSITIVITY = 15.0


def released_stat(Xt, yt, lib):
    """The 9 released components from normalised predictors Xt (n, 2) and response yt (n,)."""
    one = lib.ones_like(yt)
    Xf = lib.stack([one, Xt[:, 0], Xt[:, 1]], axis=1)
    xy = (Xf * yt[:, None]).sum(0)
    yy = (yt * yt).sum()[None] if lib is pt else np.atleast_1d((yt * yt).sum())
    xx = lib.stack(
        [
            Xt[:, 0].sum(),
            Xt[:, 1].sum(),
            (Xt[:, 0] ** 2).sum(),
            (Xt[:, 0] * Xt[:, 1]).sum(),
            (Xt[:, 1] ** 2).sum(),
        ]
    )
    return lib.concatenate([xy, yy, xx])


def build(eps, seed):
    rng = np.random.default_rng(seed)
    X, y = regression_data(rng)
    stat = released_stat(to_unit(X, X_LO, X_HI), to_unit(y, Y_LO, Y_HI), np)
    mech = Laplace(epsilon=eps, sensitivity=SENSITIVITY)
    z = mech.release(stat, rng=rng, allow_float=True)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, np.sqrt(TAU2), shape=3)
        Xr = pm.Normal("X", M, 1.0, shape=(N, 2))
        yr = pm.Normal("y", beta[0] + Xr @ beta[1:], np.sqrt(SIGMA2), shape=N)
        Release("z", released_stat(to_unit(Xr, X_LO, X_HI), to_unit(yr, Y_LO, Y_HI), pt), mech,
                observed=z)  # fmt: skip
    return model, (X, y, z)


def per_call(step, point, k=2000):
    for _ in range(20):
        point, _ = step.step(point)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(k):
        point, _ = step.step(point)
    wall = (time.perf_counter() - t0) / k * 1e6
    cpu = (time.process_time() - c0) / k * 1e6
    return wall, cpu, point


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--iters", type=int, default=10_000)
    ap.add_argument("--nuts", action="store_true", help="also time NUTS on beta")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model, _ = build(args.eps, seed=2022)
    with model:
        t0 = time.perf_counter()
        da = DataAugmentation([model["X"], model["y"]], rng=1)
        t_build = time.perf_counter() - t0
        _, assigned = assign_step_methods(model)
        cg = ConjugateGibbs([model["beta"]], rng=2)
    print("pm.sample assigns:", {c.__name__: [v.name for v in vs] for c, vs in assigned.items()})
    us_da, cpu_da, pt_ = per_call(da, model.initial_point())
    us_cg, cpu_cg, _ = per_call(cg, pt_)
    print(f"load average: {os.getloadavg()}")
    print(f"DataAugmentation build (graph analysis + compile): {t_build:.2f} s")
    print(
        f"per call (wall / CPU): DA sweep {us_da:.1f} / {cpu_da:.1f} us, "
        f"conjugate beta {us_cg:.1f} / {cpu_cg:.1f} us"
    )
    times = []
    for rep in range(args.repeat):
        with model:
            c0 = time.process_time()
            idata = pm.sample(
                args.iters, tune=0, chains=1, cores=1, step=[da, cg], random_seed=3 + rep,
                progressbar=False, compute_convergence_checks=False, var_names=["beta"],
            )  # fmt: skip
            cpu_all = time.process_time() - c0
        times.append(idata.posterior.attrs["sampling_time"])
    st = idata.sample_stats
    t_s = float(np.median(times))
    print(
        f"sampling_time of {args.repeat} repetitions: {np.round(times, 3)} "
        f"(median {t_s:.3f} s, min {min(times):.3f} s)"
    )
    print(f"CPU time of the whole pm.sample call (incl. setup): {cpu_all:.3f} s")
    print(
        f"eps={args.eps}: {args.iters} iterations DA + conjugate beta: median sampling_time "
        f"{t_s:.3f} s"
        f" ({t_s / args.iters * 1e6:.1f} us/iter)"
    )
    print(
        "acceptance: mean rate {:.3f}, mean of per-sweep min {:.3f}, overall min {:.3f}".format(
            float(st["da_accept_rate"].mean()),
            float(st["da_accept_min"].mean()),
            float(st["da_accept_min"].min()),
        )
    )
    b = idata.posterior["beta"].values[0]
    print("posterior mean beta (after 1000 burn-in):", np.round(b[1000:].mean(0), 3))
    ess = [float(az.ess(b[None, 1000:, j], method="mean")) for j in range(3)]
    print("ESS of beta (9000 draws):", np.round(ess, 0))
    if args.nuts:
        with model:
            idata2 = pm.sample(
                args.iters, tune=1000, chains=1, cores=1, random_seed=3,
                step=[da, pm.NUTS([model["beta"]])],
                progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
        t2 = idata2.posterior.attrs["sampling_time"]
        print(
            f"eps={args.eps}: {args.iters}+1000 tune iterations DA + NUTS(beta): "
            f"sampling_time {t2:.3f} s"
        )
        print(
            "posterior mean beta (NUTS):", np.round(idata2.posterior["beta"].values[0].mean(0), 3)
        )


if __name__ == "__main__":
    main()
