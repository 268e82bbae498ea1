"""Ju et al. (2022) naive Bayes: per-chain acceptance rates and posterior means across epsilon.

Setting (slides, "Application: Naive Bayes" / "Simulation Setup"): N = 100 records, I = 5
classes, K = 5 features with J = 3 levels, prior Dirichlet(2, ..., 2) for every parameter
vector, epsilon in {0.1, 0.3, 1, 3, 10}; the release is every cell of the K class-by-feature
tables plus Laplace noise of scale 2K / epsilon
(:func:`pymc_dp.examples.log_linear.release_tables`). One non-private data set is fixed
(class probabilities the slides' Table 1 truth, feature laws drawn once from the prior); at
each epsilon one release of it is fitted by many chains of a default ``pm.sample()`` of
:func:`~pymc_dp.examples.log_linear.log_linear_model` (DataAugmentation for the records,
ConjugateGibbs for p and the q_k: the slides' sampler).

Per chain (after tuning): the smallest and the mean over sweeps of the fraction of record
proposals accepted (``da_accept_rate``), the smallest per-record acceptance probability
(``da_accept_min``, bounded below by exp(-epsilon)) and the mean one (``da_accept_mean``);
and the chain's posterior mean of p. The slides run 100 chains of 10,000 iterations per
epsilon; to keep the study to a few CPU-minutes it runs ``--chains`` (default 8) chains of
``--draws`` (default 600) draws after 200 tuning iterations (state the numbers used).

Writes ``benchmarks/results/ju_acceptance.json`` and ``docs/figures/ju_acceptance.png``.
Usage: ``.venv/bin/python benchmarks/study_ju_acceptance.py [--chains 8] [--draws 600]``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from _ju_common import (
    ALPHA,
    EPSILONS,
    NCLS,
    P_TRUE,
    N,
    chain_study_main,
    laplace_tables,
    naive_bayes_data,
    sample,
)

from pymc_dp.examples import log_linear as ll


def run(chains: int, draws: int, tune: int, seed: int, out_path: Path | None = None) -> dict:
    y, x, _ = naive_bayes_data(np.random.default_rng(seed))  # the fixed data set
    rng = np.random.default_rng(seed + 1)
    out = {"chains": chains, "draws": draws, "tune": tune, "seed": seed, "rows": {}}
    out["class_counts"] = np.bincount(y, minlength=NCLS).tolist()
    for eps in EPSILONS:
        rel = laplace_tables(y, x, eps, rng)
        t0 = time.perf_counter()
        idata = sample(rel.model(ALPHA), draws, tune, chains, "p", rng)
        st = idata.sample_stats
        rate = st["da_accept_rate"].values  # (chain, draw)
        row = {
            "min_rate": rate.min(axis=1).tolist(),
            "mean_rate": rate.mean(axis=1).tolist(),
            "min_prob": st["da_accept_min"].values.min(axis=1).tolist(),
            "mean_prob": st["da_accept_mean"].values.mean(axis=1).tolist(),
            "post_mean_p": idata.posterior["p"].mean("draw").values.tolist(),  # (chain, NCLS)
            "bound": float(np.exp(-eps)),
            "naive_p": ll.naive_posterior_means(rel, ALPHA)["p"].tolist(),
            "seconds": time.perf_counter() - t0,
            "sampling_seconds": float(idata.posterior.attrs.get("sampling_time", np.nan)),
        }
        out["rows"][str(eps)] = row
        print(
            f"eps={eps}: min prob {min(row['min_prob']):.4f} (bound {row['bound']:.4f}), "
            f"mean rate {np.mean(row['mean_rate']):.3f}, {row['seconds']:.0f} s",
            flush=True,
        )
        if out_path is not None:  # partial results after each epsilon
            out_path.write_text(json.dumps(out, indent=1))
    return out


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = np.array(EPSILONS)
    rows = [res["rows"][str(e)] for e in EPSILONS]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    ax = axes[0]
    for key, label, mk, col in [
        ("min_rate", "per-chain min of the sweep's acceptance rate", "v", "C0"),
        ("mean_rate", "per-chain mean acceptance rate", "o", "C1"),
        ("min_prob", "per-chain min record acceptance probability", "x", "C2"),
    ]:
        for j, r in enumerate(rows):
            xs = np.full(len(r[key]), eps[j])
            ax.plot(xs, r[key], mk, color=col, alpha=0.5, label=label if j == 0 else None)
    ax.plot(eps, np.exp(-eps), "k-", label="bound exp(-epsilon)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("acceptance")
    ax.set_title(f"record updates, {res['chains']} chains x {res['draws']} draws")
    ax.legend(fontsize=7)
    for ax, cls in [(axes[1], 3), (axes[2], 0)]:
        data_ = [np.array(r["post_mean_p"])[:, cls] for r in rows]
        ax.boxplot(data_, positions=np.arange(len(eps)), widths=0.5)
        ax.plot(np.arange(len(eps)), [r["naive_p"][cls] for r in rows], "rs", label="naive")
        ax.axhline(P_TRUE[cls], color="k", ls="--", label="truth")
        frac = res["class_counts"][cls] / N
        ax.axhline(frac, color="g", ls=":", label="sample share")
        ax.set_xticks(np.arange(len(eps)), [str(e) for e in EPSILONS])
        ax.set_xlabel("epsilon")
        ax.set_title(f"per-chain posterior mean of p{cls + 1}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    chain_study_main(__doc__, run, plot, name="ju_acceptance", chains=8, tune=200)


if __name__ == "__main__":
    main()
