"""Benchmark: Poisson factorization of a privatized matrix, augmentation vs exact marginal.

The model and data are :mod:`pymc_dp.examples.poisson_factorization`: a block-structured
truth (``simulate``, ``K = 3``), every count released through the two-sided geometric
mechanism at ``epsilon = 1`` with ``alpha = exp(-epsilon / N)`` (``privatize``), and the
noise-aware model fitted two ways by plain ``pm.sample``:

* ``augmented``: ``CountAugmentation`` for the true counts and ``PoissonFactorGibbs`` for
  ``theta, phi`` (allocation of the counts, Gamma full conditionals): an all-Gibbs scan, what
  ``pm.sample`` assigns since issue 23;
* ``augmented-nuts``: the same model with NUTS for ``theta, phi`` (the assignment before
  issue 23), for comparison;
* ``marginal``: the true counts summed out exactly, NUTS for ``theta, phi`` alone.

Both get the same chains, tuning steps, draws and seed, sequential chains (``cores=1``).

ESS of what: the factors are not identified (label switching, scale), the rates are, so the
figure is the bulk ESS (ArviZ) of 50 fixed rate entries ``mu_dv = sum_k theta_dk phi_kv``
(drawn once, uniformly among the cells, seed 0); the table gives their minimum and median.
Time: the wall time of the kept draws only (from the end of the last tuning iteration to the
last draw, summed over the chains, timed by a ``pm.sample`` callback), so compilation and
tuning are excluded; PyMC's ``sampling_time`` (tuning and draws) is shown beside it.

Run: ``.venv/bin/python benchmarks/bench_factorization.py [--out FILE] [--quick] [--hows
augmented,marginal] [--method direct|augmentation]`` (``--method``: CountAugmentation's
``method``, Schein's auxiliary-variable sweep or the direct draw; by default ``pm.sample``
assigns the step with its default method). The defaults keep the whole run near 4-5 minutes
on a quiet 2-core machine (over 30 on a heavily loaded one): the large size gets one chain of
20 tuning steps and 30 draws, far too few to tune or mix, so its ESS figures are no ranking
(see ``benchmarks/results/factorization_ess.md``).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import arviz as az
import numpy as np
import pymc as pm

from pymc_dp import CountAugmentation
from pymc_dp.examples import poisson_factorization as pf

K, EPSILON, N_ENTRIES = 3, 1.0, 50


@dataclass(frozen=True)
class Size:
    """One benchmark size and the sampler budget it gets (same for both methods)."""

    rows: int
    cols: int
    chains: int
    tune: int
    draws: int


SIZES = (Size(50, 40, chains=2, tune=300, draws=300), Size(500, 400, chains=1, tune=20, draws=30))
QUICK = (Size(20, 16, chains=1, tune=20, draws=20),)  # smoke run of the script (--quick)


def parse_size(text: str) -> Size:
    """``"ROWSxCOLS:CHAINS:TUNE:DRAWS"`` -> :class:`Size` (``--size``).

    >>> parse_size("150x120:2:200:200")
    Size(rows=150, cols=120, chains=2, tune=200, draws=200)
    """
    try:
        shape, chains, tune, draws = text.split(":")
        rows, cols = shape.lower().split("x")
        return Size(int(rows), int(cols), int(chains), int(tune), int(draws))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--size must look like ROWSxCOLS:CHAINS:TUNE:DRAWS, got {text!r}"
        ) from None


class DrawClock:
    """``pm.sample`` callback: the wall time of the kept (non-tuning) draws of each chain."""

    def __init__(self, label: str = ""):
        self.label = label
        self.start = self.shown = time.perf_counter()
        self.last_tune: dict[int, float] = {}
        self.last_draw: dict[int, float] = {}

    def __call__(self, trace, draw):
        now = time.perf_counter()
        (self.last_tune if draw.tuning else self.last_draw)[draw.chain] = now
        if now - self.shown > 30.0:  # progress, so a stopped run still says how far it got
            self.shown = now
            print(
                f"  {self.label} chain {draw.chain} iteration {draw.draw_idx + 1} "
                f"at {now - self.start:.0f} s",
                flush=True,
            )

    def seconds(self) -> float:
        return sum(t - self.last_tune[c] for c, t in self.last_draw.items())


def rate_entry_draws(idata, cells) -> np.ndarray:
    """``(chain, draw, n)`` draws of the rates at the cells ``(d, v)``."""
    d, v = cells
    theta = idata["posterior"]["theta"].values[:, :, d, :]  # (c, s, n, K)
    phi = idata["posterior"]["phi"].values[:, :, :, v]  # (c, s, K, n)
    return np.einsum("csnk,cskn->csn", theta, phi)


def _steps(model, how, method):
    """``CountAugmentation(method=...)`` for the true counts and / or NUTS for the factors
    (``augmented-nuts``), or ``pm.sample``'s own choice."""
    steps = []
    with model:
        if how.startswith("augmented") and method is not None:
            steps.append(CountAugmentation([model["y_true"]], method=method))
        if how == "augmented-nuts":
            steps.append(pm.NUTS([model["theta"], model["phi"]]))
    return {"step": steps} if steps else {}


def run_one(how, size, data, seed, method=None):
    """Fit one noise-aware model; its ESS, times and diagnostics."""
    truth, noisy, mech, cells = data
    model = pf.build_model(
        noisy, K, how="augmented" if how == "augmented-nuts" else how, mechanism=mech
    )
    label = how if not how.startswith("augmented") or method is None else f"{how} ({method})"
    clock = DrawClock(f"{label} {size.rows} x {size.cols}")
    idata = pf.fit(
        model,
        **_steps(model, how, method),
        draws=size.draws,
        tune=size.tune,
        chains=size.chains,
        random_seed=seed,
        cores=1,
        callback=clock,
        compute_convergence_checks=False,
    )
    mu = rate_entry_draws(idata, cells)
    ess = np.array([float(az.ess(mu[:, :, j], method="bulk")) for j in range(mu.shape[-1])])
    rhat = (
        max(float(az.rhat(mu[:, :, j])) for j in range(mu.shape[-1])) if size.chains > 1 else None
    )
    stats = idata["sample_stats"]
    secs = clock.seconds()
    return {
        "how": label,
        "size": f"{size.rows} x {size.cols}",
        "budget": f"{size.chains} x ({size.tune} + {size.draws})",
        "draw_s": secs,
        "pymc_s": float(stats.attrs["sampling_time"]),
        "ess_min": float(ess.min()),
        "ess_med": float(np.median(ess)),
        "rhat": rhat,
        "depth": float(stats["tree_depth"].mean()) if "tree_depth" in stats else None,
        "div": int(stats["diverging"].sum()) if "diverging" in stats else 0,
        "mae": pf.mae(pf.posterior_mean_rates(idata), truth["counts"]),
    }


def make_data(size, seed):
    """Truth, release, mechanism and the fixed rate cells of one size."""
    rng = np.random.default_rng(seed)
    truth = pf.simulate(size.rows, size.cols, K, rng=rng)
    noisy, mech = pf.privatize(truth["counts"], EPSILON, rng=rng)
    flat = np.random.default_rng(0).choice(size.rows * size.cols, N_ENTRIES, replace=False)
    cells = np.unravel_index(flat, (size.rows, size.cols))
    return truth, noisy, mech, cells


HEADER = (
    "| size | how | chains x (tune + draws) | draws time s | PyMC sampling_time s "
    "| bulk ESS min / median | max R-hat | ESS/s min / median | mean tree depth | divergences "
    "| MAE vs true counts |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def row(r) -> str:
    per_s = (r["ess_min"] / r["draw_s"], r["ess_med"] / r["draw_s"])
    return (
        f"| {r['size']} | {r['how']} | {r['budget']} | {r['draw_s']:.1f} | {r['pymc_s']:.1f} "
        f"| {r['ess_min']:.1f} / {r['ess_med']:.1f} "
        f"| {'-' if r['rhat'] is None else format(r['rhat'], '.3f')} "
        f"| {per_s[0]:.3g} / {per_s[1]:.3g} "
        f"| {'-' if r['depth'] is None else format(r['depth'], '.2f')} | {r['div']} "
        f"| {r['mae']:.4f} |"
    )


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="one tiny size (smoke run)")
    parser.add_argument("--hows", default="augmented,augmented-nuts,marginal", help="models to fit")
    parser.add_argument(
        "--method",
        choices=("direct", "augmentation"),
        help="CountAugmentation's method (default: pm.sample's own step, i.e. its default)",
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        action="append",
        help="ROWSxCOLS:CHAINS:TUNE:DRAWS instead of the default sizes (repeatable)",
    )
    args = parser.parse_args(argv)
    load0, t0 = os.getloadavg(), time.perf_counter()
    lines = [HEADER]
    for size in QUICK if args.quick else (args.size or SIZES):
        data = make_data(size, args.seed)
        n_mean = float(data[0]["counts"].mean())
        print(f"{size}: N = {n_mean:.3f}, alpha = {data[2].alpha:.4f}", flush=True)
        for how in args.hows.split(","):
            lines.append(row(run_one(how, size, data, args.seed, args.method)))
            print(lines[-1], flush=True)
    load1, total = os.getloadavg(), time.perf_counter() - t0
    lines.append(
        f"\nWhole script {total:.0f} s wall; load average (1, 5, 15 min) at start "
        f"{tuple(round(x, 2) for x in load0)}, at end {tuple(round(x, 2) for x in load1)}."
    )
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(table + "\n")
    return table


if __name__ == "__main__":
    main()
