"""Issue 4 benchmark (a): Bernoulli records behind a Laplace-noised count.

Model: ``p ~ Beta(1, 1)``, ``x_i ~ Bernoulli(p)`` (i = 1..n), released ``z = sum(x) + Laplace(1/eps)``
with eps = 1 (sensitivity 1).

Measured in one run (so that machine load affects all figures alike):

1. Time of one DataAugmentation sweep over the n records, as a ratio to drawing the n
   Bernoulli proposals with numpy (``rng.random(n) < p``), at n = 10^3, 10^5, 10^6 (median of
   repeats, after a warm-up call; compile time excluded).
2. ESS per second of p (``arviz.ess`` bulk / ``sampling_time`` of ``pm.sample``, compile excluded)
   for pymc_dp (DataAugmentation on x + ConjugateGibbs on p, both auto-assigned by ``pm.sample``
   after inserting them in ``STEP_METHODS``) against stock PyMC (``pm.Laplace`` observed on
   ``x.sum()``, default steps: NUTS on p + BinaryGibbsMetropolis on x, pymc_dp steps NOT
   registered), at n = 10^3 and 10^5. At n = 10^5 stock PyMC is too slow to run to convergence:
   a few real iterations are timed and the ESS per iteration measured at n = 10^3 is assumed
   (stock PyMC mixes no better at larger n), so its ESS/s there is an extrapolation.

Usage: ``.venv/bin/python benchmarks/bench_da_bernoulli.py [--out results.md] [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import time

import arviz as az
import numpy as np
import pymc as pm
from pymc.step_methods import STEP_METHODS

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.conjugate import CONJUGATE_STEPS, ConjugateGibbs
from pymc_dp.step_methods.data_augmentation import DataAugmentation

EPS = 1.0
P_TRUE = 0.3


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random(n) < P_TRUE
    return float(x.sum() + rng.laplace(0.0, 1.0 / EPS))


def dp_model(n, z):
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        Release("z", x.sum(), Laplace(epsilon=EPS), observed=np.float64(z))
    return m


def stock_model(n, z):
    with pm.Model() as m:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
        pm.Laplace("z", mu=x.sum(), b=np.float64(1.0 / EPS), observed=np.float64(z))
    return m


PYMC_DP_STEPS = (DataAugmentation, *CONJUGATE_STEPS)


@contextlib.contextmanager
def step_methods(with_pymc_dp):
    """Temporarily set whether pymc_dp's steps are in STEP_METHODS (``import pymc_dp``
    registers them; the stock-PyMC runs must not see them)."""
    saved = list(STEP_METHODS)
    STEP_METHODS[:] = [c for c in saved if c not in PYMC_DP_STEPS]
    if with_pymc_dp:
        STEP_METHODS[:0] = PYMC_DP_STEPS
    try:
        yield
    finally:
        STEP_METHODS[:] = saved


def median_time(fn, repeats):
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def sweep_ratio(n, repeats):
    m = dp_model(n, data(n))
    with m:
        da = DataAugmentation([m["x"]], rng=1)
        cg = ConjugateGibbs([m["p"]], rng=2)
    point = m.initial_point()
    point["p_logodds__"] = np.asarray(np.log(P_TRUE / (1 - P_TRUE)))
    state = {"pt": point}

    def sweep():
        state["pt"], _ = da.step(state["pt"])

    def conj():
        cg.step(state["pt"])

    rng = np.random.default_rng(3)
    t_da = median_time(sweep, repeats)
    t_np = median_time(lambda: rng.random(n) < P_TRUE, max(repeats, 20))
    t_cg = median_time(conj, repeats)
    return t_da, t_np, t_cg


def ess_per_s(idata):
    ess = float(az.ess(idata, var_names=["p"])["p"].values)
    secs = float(idata.posterior.attrs["sampling_time"])
    return ess, secs


def run_dp(n, draws, tune):
    m = dp_model(n, data(n))
    with step_methods(True), m:
        idata = pm.sample(
            draws=draws, tune=tune, chains=1, cores=1, progressbar=False, random_seed=5,
            var_names=["p"], compute_convergence_checks=False,
        )  # fmt: skip
    ess, secs = ess_per_s(idata)
    return ess, secs, draws + tune


def run_stock(n, draws, tune):
    m = stock_model(n, data(n))
    with step_methods(False), m:
        idata = pm.sample(
            draws=draws, tune=tune, chains=1, cores=1, progressbar=False, random_seed=5,
            var_names=["p"], compute_convergence_checks=False,
        )  # fmt: skip
    ess, secs = ess_per_s(idata)
    return ess, secs, draws + tune


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t_start = time.perf_counter()
    lines = []

    # 1. DA sweep vs numpy proposals
    sweep_rows = []
    for n, reps in [(10**3, 200), (10**5, 20), (10**6, 5)]:
        t_da, t_np, t_cg = sweep_ratio(n, reps)
        sweep_rows.append((n, t_da, t_np, t_cg))
        print(
            f"sweep n={n}: DA {t_da * 1e3:.3f} ms, numpy {t_np * 1e3:.3f} ms, "
            f"ratio {t_da / t_np:.2f}; conjugate step {t_cg * 1e3:.3f} ms",
            flush=True,
        )

    # 2. ESS/s, pymc_dp vs stock
    dp_draws = 1000 if args.quick else 3000
    ess_rows = []
    dp3 = run_dp(10**3, dp_draws, 500)
    print("dp n=1e3", dp3, flush=True)
    st3 = run_stock(10**3, 300 if args.quick else 1000, 200)
    print("stock n=1e3", st3, flush=True)
    dp5 = run_dp(10**5, dp_draws, 500)
    print("dp n=1e5", dp5, flush=True)
    stock_iters5 = 2 if args.quick else 5
    st5 = run_stock(10**5, stock_iters5, 0)  # timing only; NUTS untuned, ESS not used
    print("stock n=1e5 (timing only)", st5, flush=True)
    ess_per_it3 = st3[0] / st3[2]
    sec_per_it5 = st5[1] / st5[2]
    st5_extrap = ess_per_it3 / sec_per_it5
    for n, dp, st, stock_ess_s, note in [
        (10**3, dp3, st3, st3[0] / st3[1], "measured"),
        (
            10**5,
            dp5,
            st5,
            st5_extrap,
            f"extrapolated: {st5[2]} timed iterations, ESS/iteration of n=10^3",
        ),
    ]:
        dp_ess_s = dp[0] / dp[1]
        ess_rows.append((n, dp, st, dp_ess_s, stock_ess_s, note))

    total = time.perf_counter() - t_start
    lines.append(
        f"Benchmark (a), `benchmarks/bench_da_bernoulli.py`: Bernoulli records, Laplace count, "
        f"eps = {EPS:g}, p = {P_TRUE}. Machine: {platform.machine()}, 2 cores shared with other "
        f"jobs (timings noisy; ratios measured in one run). Total {total:.0f} s."
    )
    lines += [
        "",
        "DA sweep (one accept/reject pass over all n records) vs drawing the n proposals "
        "with numpy (`rng.random(n) < p`); medians, compile excluded. Goal: ratio <= 3.",
        "",
        "| n | DA sweep | numpy proposals | ratio | ConjugateGibbs step (p) |",
        "|---|---|---|---|---|",
    ]
    for n, t_da, t_np, t_cg in sweep_rows:
        lines.append(
            f"| 10^{round(np.log10(n))} | {t_da * 1e3:.3f} ms | {t_np * 1e3:.3f} ms | "
            f"{t_da / t_np:.2f} | {t_cg * 1e3:.3f} ms |"
        )
    lines += [
        "",
        "ESS/s of p (bulk ESS / sampling time, 1 chain, compile excluded). pymc_dp: "
        "DataAugmentation + ConjugateGibbs, auto-assigned by `pm.sample`; stock: NUTS + "
        "BinaryGibbsMetropolis on `pm.Laplace(mu=x.sum())`. Goal: >= 100x at 10^3, >= 1000x at 10^5.",
        "",
        "| n | pymc_dp ESS / s (iterations) | stock ESS / s (iterations) | speed-up | stock s/iteration | note |",
        "|---|---|---|---|---|---|",
    ]
    for n, dp, st, dp_ess_s, stock_ess_s, note in ess_rows:
        lines.append(
            f"| 10^{round(np.log10(n))} | {dp_ess_s:.1f} ({dp[0]:.0f} ESS in {dp[1]:.1f} s, {dp[2]} it) "
            f"| {stock_ess_s:.3g} ({st[2]} it in {st[1]:.1f} s) | {dp_ess_s / stock_ess_s:.0f}x "
            f"| {st[1] / st[2]:.3g} | {note} |"
        )
    md = "\n".join(lines)
    print(md)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(md + "\n")


if __name__ == "__main__":
    main()
