"""The tensor generalisation of Schein et al. (2019): a locally private 3-way count tensor.

The paper states its method for any Poisson factorization with a multi-index, tensors
included, and shows matrices only. This study runs the 3-way CP model of
:mod:`pymc_dp.examples.poisson_tensor` (exact all-Gibbs step ``CPGibbs``) on a generated
block-structured tensor, released with two-sided geometric noise at ``alpha = exp(-epsilon /
N)``, and compares the MAE of the posterior-mean rates against the true counts for the
non-private, naive and noise-aware fits on the same releases (paired).

Run: ``.venv/bin/python benchmarks/study_schein_tensor.py`` (writes
``benchmarks/results/schein_tensor.md``), about 2 CPU-minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
import warnings
from pathlib import Path

import numpy as np
from _schein_common import METHODS, paired_interval, se
from _schein_common import seed as _seed
from scipy import stats

from pymc_dp.examples import poisson_tensor as pt3

__all__ = ["Config", "main", "report", "run_study"]

HERE = Path(__file__).resolve().parent
REPORT = HERE / "results" / "schein_tensor.md"


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and sampler settings (defaults: the recorded run).

    Examples
    --------
    >>> Config().shape
    (12, 10, 6)
    """

    shape: tuple = (12, 10, 6)
    n_components: int = 3
    epsilons: tuple = (2.5, 1.0, 0.75)
    repeats: int = 5
    tune: int = 200
    draws: int = 200
    n_scans: int = 5
    seed: int = 20261128


def _fit(counts, how, mech, config, seed) -> np.ndarray:
    model = pt3.build_model(counts, config.n_components, how=how, mechanism=mech)
    idata = pt3.fit(
        model,
        draws=config.draws,
        tune=config.tune,
        chains=1,
        cores=1,
        random_seed=seed,
        n_scans=config.n_scans,
        compute_convergence_checks=False,
    )
    return pt3.posterior_mean_rates(idata)


def run_study(config: Config, log=print) -> list[dict]:
    """Per repeat: a fresh truth, a non-private fit, and per epsilon one release fitted
    naively and noise-aware.

    Examples
    --------
    >>> cfg = Config(shape=(3, 3, 2), n_components=1, epsilons=(1.0,), repeats=1, tune=5,
    ...              draws=5, n_scans=1)
    >>> sorted(run_study(cfg, log=lambda s: None)[0]["mae"][1.0])
    ['aware', 'naive', 'nonprivate']
    """
    out = []
    for r in range(config.repeats):
        truth = pt3.simulate(
            config.shape, config.n_components, rng=np.random.default_rng(_seed(config, r, "t"))
        )
        y = truth["counts"]
        mae_np = float(
            np.mean(np.abs(_fit(y, "nonprivate", None, config, _seed(config, r, "np")) - y))
        )
        row = {"mae": {}, "alpha": {}, "oracle": float(np.mean(np.abs(truth["rates"] - y)))}
        for eps in config.epsilons:
            noisy, mech = pt3.privatize(
                y, eps, rng=np.random.default_rng(_seed(config, r, f"n{eps}"))
            )
            row["alpha"][eps] = mech.alpha
            row["mae"][eps] = {"nonprivate": mae_np}
            for how, name in (("naive", "naive"), ("augmented", "aware")):
                rates = _fit(noisy, how, mech, config, _seed(config, r, f"{name}{eps}"))
                row["mae"][eps][name] = float(np.mean(np.abs(rates - y)))
        log(f"repeat {r}: " + "; ".join(
            f"{e}: " + " ".join(f"{h} {row['mae'][e][h]:.3f}" for h in METHODS)
            for e in config.epsilons))  # fmt: skip
        out.append(row)
    return out


def report(results, config, seconds) -> str:
    """The results file's text.

    Examples
    --------
    >>> callable(report)
    True
    """
    n = len(results)
    tq = float(stats.t.ppf(0.975, n - 1))
    lines = [
        "# Schein et al. (2019), the tensor generalisation: a locally private 3-way tensor",
        "",
        "Written by `benchmarks/study_schein_tensor.py` (one run).",
        "",
        f"- Tensor {' x '.join(map(str, config.shape))}, C = {config.n_components}; truth "
        "`poisson_tensor.simulate` (each mode cut into C contiguous blocks, own-block factor "
        "Gamma(shape 4, mean 2), sparse Exponential(mean 0.3) additions with probability 0.1); "
        "model `y_ijk ~ Poisson(sum_c theta_ic phi_jc psi_kc)`, Gamma(0.1, 1) priors; release "
        "two-sided geometric, alpha = exp(-epsilon / N), N the mean count.",
        f"- Fits by the exact all-Gibbs step `CPGibbs` under `pm.sample`, 1 chain, "
        f"{config.tune} tune + {config.draws} draws, {config.n_scans} scans per draw; "
        f"{n} repeats (fresh truth each; one release per (repeat, epsilon), used by naive and "
        f"aware); wall time {seconds / 60:.1f} min.",
        f"- Cells: mean ± SE over repeats; the paired differences' 95% interval uses t_{n - 1} "
        f"({tq:.2f} SE).",
        "",
        "| epsilon | alpha (mean) | oracle | nonprivate | naive | aware | aware − naive "
        "(95% CI) | aware − nonprivate (95% CI) |",
        "|---" * 8 + "|",
    ]
    oracle = np.array([r["oracle"] for r in results])
    for eps in config.epsilons:
        m = {h: np.array([r["mae"][eps][h] for r in results]) for h in METHODS}

        def ci(d):
            mean, lo, hi = paired_interval(d)
            return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"

        alpha = np.mean([r["alpha"][eps] for r in results])
        lines.append(
            f"| {eps} | {alpha:.3f} | {oracle.mean():.3f} | "
            + " | ".join(f"{m[h].mean():.3f} ± {se(m[h]):.3f}" for h in METHODS)
            + f" | {ci(m['aware'] - m['naive'])} | {ci(m['aware'] - m['nonprivate'])} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=Config().repeats)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    config = dataclasses.replace(Config(), repeats=args.repeats)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    results = run_study(config)
    text = report(results, config, time.perf_counter() - t0)
    print(text)
    if not args.no_write:
        REPORT.write_text(text)


if __name__ == "__main__":
    main()
