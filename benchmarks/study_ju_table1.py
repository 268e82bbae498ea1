"""Ju et al. (2022) Table 1: coverage of 90% intervals for p_i = P(Y = i), 100 replicates.

Setting (slides, "Coverage: Naive Bayes"): N = 100 records, I = 5 classes, the fixed truth
p = (.097, .148, .145, .446, .163) (normalised: the printed values sum to 0.999), prior
Dirichlet(2, ..., 2), epsilon in {0.1, 0.3, 1, 3, 10}, 100 replicates per epsilon. Each
replicate: a fresh data set, a fresh release, a default ``pm.sample()`` of the noise-aware
model, and the central 90% interval of each p_i from the draws.

Release: the class counts with Laplace noise calibrated to their replace-one L1 sensitivity 2
(``release_sufficient_statistics(y, "categorical", ...)``), scale 2 / epsilon. The slides
release the K = 5 class-by-feature tables with scale 2K / epsilon and read the class counts
from their row sums; fitting that model (``pymc_dp.examples.log_linear``, data augmentation)
costs about 5-10 s per replicate on this machine, 40+ CPU-minutes for the table, beyond this
study's budget, so the class-count release (the part of the model that carries p) is used.
The coverage of the class margin therefore need not match Table 1 cell by cell; the trend
against epsilon is the comparison. ``--release tables`` runs the slides' own release instead
(K = 5 tables, J = 3 levels, feature laws drawn from the Dirichlet(2) prior per replicate,
``pymc_dp.examples.log_linear``, DataAugmentation + ConjugateGibbs, one chain of ``--draws``
draws; the naive analysis takes the mean of the clipped row sums of the tables as the class
counts); its results go to ``ju_table1_tables.json`` / ``ju_table1_tables.png`` when those
paths are given.

Sampler: the default ``pm.sample()`` of ``release.model(prior)``, which assigns
``CollapsedRecords`` (exact draws of the counts given the release) and conjugate Gibbs for p;
one chain of 400 draws after 200 tuning steps per replicate (fewer than PyMC's default
1000 / 1000, to fit the budget: the draws are nearly independent, so the 5% and 95% quantiles
carry a Monte Carlo error of about 0.01 in probability each). The naive analysis
(Dirichlet(2 + max(z, 0))) is computed on the same releases (paired).

Coverage is reported with its binomial standard error sqrt(c (1 - c) / 100).

Writes ``benchmarks/results/ju_table1.json`` and ``docs/figures/ju_table1.png``.
Usage: ``.venv/bin/python benchmarks/study_ju_table1.py [--replicates 100] [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from pathlib import Path

import numpy as np
from _ju_common import (
    ALPHA,
    EPSILONS,
    NCLS,
    P_TRUE,
    PAPER_T1,
    ROOT,
    N,
    finish,
    laplace_tables,
    naive_bayes_data,
    sample,
)
from scipy import stats

import pymc_dp as pmdp


def _coverage(idata, naive_counts) -> dict:
    """Whether the central 90% interval of each p_i covers the truth: from the draws, and
    from the naive posterior Dirichlet(ALPHA + naive_counts) (its Beta marginals)."""
    d = idata.posterior["p"].values.reshape(-1, NCLS)
    lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
    a = ALPHA + naive_counts
    nlo = stats.beta.ppf(0.05, a, a.sum() - a)
    nhi = stats.beta.ppf(0.95, a, a.sum() - a)
    return {
        "aware": ((lo <= P_TRUE) & (P_TRUE <= hi)).tolist(),
        "naive": ((nlo <= P_TRUE) & (P_TRUE <= nhi)).tolist(),
        "width": (hi - lo).tolist(),
    }


def one_replicate_tables(eps: float, rng: np.random.Generator, draws: int, tune: int) -> dict:
    """The slides' release: K = 5 class-by-feature tables (J = 3) at scale 2K / epsilon, the
    naive-Bayes model of :mod:`pymc_dp.examples.log_linear` (DataAugmentation + ConjugateGibbs);
    feature laws drawn from the Dirichlet(2) prior for each replicate."""
    y, x, _ = naive_bayes_data(rng)
    rel = laplace_tables(y, x, eps, rng)
    idata = sample(rel.model(ALPHA), draws, tune, 1, "p", rng)
    # naive: the noisy tables taken as counts, class counts the mean of their clipped row sums
    return _coverage(
        idata, np.clip(np.asarray(rel.tables, dtype=float), 0.0, None).sum(axis=2).mean(axis=0)
    )


def one_replicate(eps: float, rng: np.random.Generator, draws: int, tune: int) -> dict:
    """The class counts at scale 2 / epsilon, the default model of the release."""
    y = rng.choice(NCLS, size=N, p=P_TRUE)
    rel = pmdp.release_sufficient_statistics(
        y,
        "categorical",
        bounds=NCLS,
        mechanism=functools.partial(pmdp.Laplace, epsilon=eps),
        rng=rng,
        allow_float=True,  # the slides' floating-point Laplace noise (a simulation)
    )
    idata = sample(rel.model(np.full(NCLS, ALPHA)), draws, tune, 1, "p", rng)
    return _coverage(idata, np.clip(np.asarray(rel.value, dtype=float), 0.0, None))


def run(
    replicates: int,
    seed: int,
    draws: int,
    tune: int,
    out_path: Path | None = None,
    release: str = "counts",
    epsilons=EPSILONS,
) -> dict:
    rng = np.random.default_rng(seed)
    out = {"replicates": replicates, "draws": draws, "tune": tune, "seed": seed, "rows": {}}
    out["release"] = release
    one = one_replicate_tables if release == "tables" else one_replicate
    for eps in epsilons:
        t0 = time.perf_counter()
        reps = [one(eps, rng, draws, tune) for _ in range(replicates)]
        aware = np.mean([r["aware"] for r in reps], axis=0)
        naive = np.mean([r["naive"] for r in reps], axis=0)
        out["rows"][str(eps)] = {
            "aware": aware.tolist(),
            "naive": naive.tolist(),
            "width": np.mean([r["width"] for r in reps], axis=0).tolist(),
            "seconds": time.perf_counter() - t0,
        }
        print(eps, np.round(aware, 2), np.round(naive, 2), f"{time.perf_counter() - t0:.0f} s")
        if out_path is not None:  # partial results after each epsilon
            out_path.write_text(json.dumps(out, indent=1))
    return out


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(res["rows"], key=float)  # the run order may differ
    eps = np.array([float(e) for e in keys])
    n = res["replicates"]
    fig, axes = plt.subplots(1, NCLS, figsize=(14, 3), sharey=True)
    for i, ax in enumerate(axes):
        for key, style, label in [
            ("aware", "o-", "noise-aware (pm.sample)"),
            ("naive", "s--", "naive"),
        ]:
            c = np.array([res["rows"][e][key][i] for e in keys])
            se = np.sqrt(np.clip(c * (1 - c), 0.25 / n, None) / n)
            ax.errorbar(eps, c, yerr=se, fmt=style, capsize=2, label=label)
        ax.plot(eps, [PAPER_T1[e][i] for e in eps], "k^:", label="slides' Table 1")
        ax.axhline(0.9, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"p{i + 1} = {P_TRUE[i]:.3f}")
        ax.set_xlabel("epsilon")
    axes[0].set_ylabel(f"coverage of 90% intervals\n({n} replicates, ±1 binomial s.e.)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--tune", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2022)
    ap.add_argument("--quick", action="store_true", help="3 replicates, for a smoke test")
    ap.add_argument(
        "--release",
        choices=("counts", "tables"),
        default="counts",
        help="counts: the class counts at scale 2/eps; tables: the slides' K = 5 tables",
    )
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/ju_table1.json"))
    ap.add_argument("--fig", default=str(ROOT / "docs/figures/ju_table1.png"))
    args = ap.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    reps = 3 if args.quick else args.replicates
    t0 = time.perf_counter()
    eps = tuple(float(e) for e in args.epsilons.split(","))
    res = run(reps, args.seed, args.draws, args.tune, Path(args.out), args.release, eps)
    finish(res, t0, args.out, args.fig, plot)


if __name__ == "__main__":
    main()
