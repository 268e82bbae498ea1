"""Shared pieces of the Ju, Awan, Gong & Rao (2022) studies and benchmark.

The slides' settings (the epsilon grid; the naive Bayes truth, prior and Table 1; the linear
regression's truth, prior and clamping bounds), the data and releases the studies draw, the
one ``pm.sample()`` call they all make, and the command line of the per-chain studies.
Used by ``study_ju_acceptance.py``, ``study_ju_table1.py``, ``study_ju_regression.py``,
``study_ju_report.py`` and ``bench_da_regression.py`` (import it from ``benchmarks/``).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp as pmdp
from pymc_dp.examples import log_linear as ll

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)

# naive Bayes (slides, "Application: Naive Bayes", "Coverage: Naive Bayes"): N records,
# NCLS classes, K features with J levels, Dirichlet(ALPHA) priors
N, NCLS, K, J, ALPHA = 100, 5, 5, 3, 2.0
P_TRUE = np.array([0.097, 0.148, 0.145, 0.446, 0.163])
P_TRUE = P_TRUE / P_TRUE.sum()  # the printed values sum to 0.999
PAPER_T1 = {  # slides' Table 1: coverage of 90% intervals of p_1..p_5
    0.1: (1, 1, 1, 0.36, 1),
    0.3: (0.97, 1, 1, 0.59, 1),
    1.0: (0.94, 0.99, 0.97, 0.83, 0.98),
    3.0: (0.95, 0.91, 0.97, 0.89, 0.93),
    10.0: (0.92, 0.88, 0.94, 0.92, 0.9),
}

# linear regression (slides, "Application: Linear Regression"; beta and the clamping bounds
# are ours, the slides give none)
SIGMA2, TAU2 = 2.0, 2.0
BETA = np.array([-1.79, -2.89, -0.66])
M = np.array([0.9, -1.17])
X_LO, X_HI, Y_LO, Y_HI = M - 4.0, M + 4.0, -15.0, 8.0


def naive_bayes_data(rng: np.random.Generator):
    """``(y, x, q)``: feature laws ``q`` drawn from the Dirichlet(ALPHA) prior, then N records."""
    q = rng.dirichlet(np.full(J, ALPHA), size=(K, NCLS))
    y, x = ll.simulate(N, P_TRUE, q, rng=rng)
    return y, x, q


def laplace_tables(y, x, eps: float, rng: np.random.Generator):
    """The slides' release: the K class-by-feature tables, Laplace noise of scale 2K / eps."""
    return ll.release_tables(
        y,
        x,
        n_classes=NCLS,
        n_levels=J,
        mechanism=functools.partial(pmdp.Laplace, epsilon=eps),
        rng=rng,
        allow_float=True,  # the slides' floating-point Laplace noise (a simulation)
    )


def to_unit(v, lo, hi):
    """The slides' clamping and normalisation to [-1, 1] (numpy or PyTensor)."""
    mod = pt if isinstance(v, pt.TensorVariable) else np
    return 2.0 * (mod.clip(v, lo, hi) - lo) / (hi - lo) - 1.0


def regression_data(rng: np.random.Generator):
    """``(x, y)``: N records, ``x ~ N(M, I)``, ``y | x ~ N(beta_0 + x' beta_{1:2}, SIGMA2)``."""
    x = rng.normal(M, 1.0, size=(N, 2))
    y = BETA[0] + x @ BETA[1:] + rng.normal(0.0, np.sqrt(SIGMA2), size=N)
    return x, y


def sample(model: pm.Model, draws: int, tune: int, chains: int, var: str, rng):
    """A default ``pm.sample()`` of ``model`` keeping ``var``: one core, no progress bar, no
    convergence checks (the studies summarise the chains themselves)."""
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=chains,
            cores=1,
            progressbar=False,
            var_names=[var],
            random_seed=rng,
            compute_convergence_checks=False,
        )


def finish(res: dict, t0: float, out: str, fig: str, plot) -> None:
    """Record the run time, write the JSON to ``out`` and the figure to ``fig``."""
    res["seconds"] = time.perf_counter() - t0
    Path(out).write_text(json.dumps(res, indent=1))
    plot(res, Path(fig))
    print(f"wrote {out} and {fig} in {res['seconds']:.0f} s")


def chain_study_main(doc: str, run, plot, *, name: str, chains: int, tune: int) -> None:
    """Command line of a per-chain study: ``run(chains, draws, tune, seed, out_path)`` at the
    defaults given (``--quick``: 2 chains x 50 draws after 20 tuning), results in
    ``benchmarks/results/<name>.json`` and ``docs/figures/<name>.png``; ``--replot`` redraws
    the figure from the JSON."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--chains", type=int, default=chains)
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--tune", type=int, default=tune)
    ap.add_argument("--seed", type=int, default=2022)
    ap.add_argument("--quick", action="store_true", help="2 chains x 50 draws, a smoke test")
    ap.add_argument("--out", default=str(ROOT / f"benchmarks/results/{name}.json"))
    ap.add_argument("--fig", default=str(ROOT / f"docs/figures/{name}.png"))
    ap.add_argument("--replot", action="store_true", help="redraw from the JSON in --out")
    args = ap.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    if args.replot:
        plot(json.loads(Path(args.out).read_text()), Path(args.fig))
        return
    chains, draws, tune = (2, 50, 20) if args.quick else (args.chains, args.draws, args.tune)
    t0 = time.perf_counter()
    res = run(chains, draws, tune, args.seed, Path(args.out))
    finish(res, t0, args.out, args.fig, plot)
