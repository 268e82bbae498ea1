"""Issue 23 benchmark: the naive-Bayes-network release model, CollapsedNaiveBayes against the old steps.

Setting: Zhang et al.'s naive Bayes network as in ``benchmarks/study_zhang_fig1.py`` (binary
class ``y``, 16 binary features whose only parent is ``y``, ``|I| = 17`` nodes), uniform
Dirichlet(1, 1) priors, ``n = 50`` training records drawn by that study's ``synthesize`` (one
fixed data set), all count tables released once with ``Laplace(epsilon)`` at the L1 sensitivity
``2|I| = 34`` (scale 34 at epsilon 1), raw (not projected). The same data and release for both
samplers at each epsilon.

* new: a plain ``pm.sample()`` at PyMC's default lengths (2 chains, 1000 tune + 1000 draws),
  ``cores=1``; ``CollapsedNaiveBayes`` is put at the front of ``pymc.step_methods.STEP_METHODS``
  when it is not there yet (as ``register_step_methods`` will put it), so the step assignment is
  ``pm.sample``'s own (reported);
* old: the same call with ``step=[DataAugmentation(records), ConjugateGibbs(CPTs)]`` given
  explicitly (today's assignment).

Reported over the 33 free CPT entries of the 17 ``theta`` (``theta_y[1]`` and
``theta_x[j, 1]``; the other entry of each row is its complement, with the same ESS): min bulk
ESS and max R-hat (``arviz.summary``), sampling seconds (PyMC's ``sampling_time``: tune + draws)
and min ESS per sampling second, whole-call seconds (step assignment, compilation, convergence
checks included), and the agreement of the two samplers: the largest ``|mean_new - mean_old| /
sqrt(mcse_new^2 + mcse_old^2)`` over the CPT entries (a z-score; the old sampler's MCSE is large
where its ESS is small), and each sampler's largest ``|mean - exact| / mcse`` against the exact
posterior means (:func:`exact_means`: the finite sums of
:mod:`pymc_dp.kernels.collapsed_bn`, which ``tests/step_methods/test_collapsed_bn.py`` checks
against brute-force enumeration on small networks). With 33 entries, the largest of 33 roughly
normal z-scores is typically 2-3; MCSE from a few dozen effective draws is itself noisy.

Usage: ``.venv/bin/python benchmarks/bench_bn_collapse.py [--epsilons 0.1 1 10] [--seed 2016]``.
Writes ``benchmarks/results/bn_collapse.md``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

__all__ = ["exact_means", "main", "release", "run_one"]


def release(epsilon: float, seed: int):
    """The fixed data set (50 records) and its Laplace release at ``epsilon``."""
    from study_zhang_fig1 import N_TRAIN, naive_bayes_network, synthesize

    from pymc_dp.mechanisms.laplace import Laplace
    from pymc_dp.releases.bayes_net import release_bayes_net_counts

    data = synthesize(np.random.default_rng(seed))[:N_TRAIN]
    return release_bayes_net_counts(
        data,
        naive_bayes_network(),
        mechanism=functools.partial(Laplace, epsilon=epsilon),
        rng=np.random.default_rng([seed, round(epsilon * 1000)]),
        allow_float=True,  # a simulation: floating-point Laplace noise, as Zhang et al.
    )


def exact_means(rel) -> dict:
    """Exact posterior means of ``P(y = 1)`` and every ``P(x_i = 1 | y = j)`` (binary nodes):
    ``E[theta] = sum_c p(c | z) E[theta | c, z]``, the inner mean a finite mixture over the
    table ``a`` of ``(alpha + a_1) / (2 alpha + c_j)``; keys as in ``arviz.summary``."""
    from scipy.special import softmax

    from pymc_dp.step_methods.collapsed_bn import _posterior, naive_bayes_plan

    model = rel.model(1.0)
    plan = naive_bayes_plan(model[f"theta_{rel.network.nodes[0]}"])[1]
    kern = _posterior(plan)
    pc = np.exp(kern.log_prob)  # over the class-count vectors (c0, c1)
    cc = kern.class_counts
    a_y = plan.alpha[plan.root]
    out = {f"theta_{plan.root}[1]": float(pc @ ((a_y[1] + cc[:, 1]) / (a_y.sum() + plan.n)))}
    for grp in kern.groups:
        for j in range(cc.shape[1]):
            cond = np.empty((len(grp.index), plan.n + 1))  # E[theta_gj1 | c_j]
            for c in range(plan.n + 1):
                comps, lw = grp.table_logw(j, c)
                w = softmax(lw, axis=1)
                alpha = grp.alpha[:, j, :]
                cond[:, c] = (w * (alpha[:, 1:2] + comps[None, :, 1])).sum(1) / (alpha.sum(1) + c)
            mean = cond[:, cc[:, j]] @ pc
            for g, i in enumerate(grp.index):
                out[f"theta_{plan.leaves[i]}[{j}, 1]"] = float(mean[g])
    return out


def _exact_z(res, exact) -> float:
    s = res["summary"]
    return float(max(abs(s.loc[k, "mean"] - m) / s.loc[k, "mcse_mean"] for k, m in exact.items()))


def _cpt_summary(idata, names):
    import arviz as az

    s = az.summary(idata, var_names=names)
    keep = [i for i in s.index if i.endswith("[1]") or i.endswith(", 1]")]
    return s.loc[keep]


def run_one(rel, variant: str, seed: int) -> dict:
    """One default-length ``pm.sample`` of ``rel.model()``: ``variant`` "new" or "old"."""
    import pymc as pm

    from pymc_dp.step_methods import ConjugateGibbs, DataAugmentation
    from pymc_dp.step_methods.collapsed_bn import CollapsedNaiveBayes

    if CollapsedNaiveBayes not in pm.step_methods.STEP_METHODS:
        pm.step_methods.STEP_METHODS.insert(0, CollapsedNaiveBayes)
    model = rel.model(1.0)
    names = [f"theta_{v}" for v in rel.network.nodes]
    kwargs = dict(cores=1, random_seed=seed, progressbar=False)
    if variant == "old":
        kwargs["step"] = [
            DataAugmentation([model[f"x_{v}"] for v in rel.network.nodes], model=model),
            ConjugateGibbs([model[n] for n in names], model=model),
        ]
    t0 = time.perf_counter()
    with model:
        idata = pm.sample(**kwargs)
    wall = time.perf_counter() - t0
    s = _cpt_summary(idata, names)
    secs = float(idata.posterior.attrs["sampling_time"])
    return {
        "summary": s,
        "ess": float(s["ess_bulk"].min()),
        "rhat": float(s["r_hat"].max()),
        "seconds": secs,
        "wall": wall,
        "draws": int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"]),
    }


def _agreement(a, b) -> float:
    d = (a["summary"]["mean"] - b["summary"]["mean"]).abs()
    se = np.sqrt(a["summary"]["mcse_mean"] ** 2 + b["summary"]["mcse_mean"] ** 2)
    return float((d / se).max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/bn_collapse.md")
    args = ap.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    rows = []
    for eps in args.epsilons:
        rel = release(eps, args.seed)
        res = {v: run_one(rel, v, args.seed + 1) for v in ("new", "old")}
        z = _agreement(res["new"], res["old"])
        exact = exact_means(rel)
        for v, label in (
            ("new", "CollapsedNaiveBayes"),
            ("old", "DataAugmentation + ConjugateGibbs"),
        ):
            r = res[v]
            rows.append(
                f"| {eps:g} | {label} | {r['ess']:.0f} | {r['rhat']:.3f} | {r['seconds']:.1f} | "
                f"{r['ess'] / r['seconds']:.0f} | {r['wall']:.1f} | {z:.1f} | "
                f"{_exact_z(r, exact):.1f} |"
            )
            print(rows[-1], flush=True)
    lines = [
        "# Naive-Bayes-network release: CollapsedNaiveBayes against the old steps (issue 23)",
        "",
        "Produced by `benchmarks/bench_bn_collapse.py` (setting in its docstring): Zhang et al.'s",
        "naive Bayes network (binary y, 16 binary features), n = 50, Laplace noise of scale",
        "34/epsilon on every cell, uniform priors; plain `pm.sample()` with PyMC's default",
        "lengths (2 chains x (1000 tune + 1000 draws)), cores=1; the same data and release for",
        "both rows of an epsilon. ESS and R-hat over the 33 free CPT entries (arviz.summary,",
        "bulk ESS of 2000 draws); ESS/s = min bulk ESS / sampling seconds (tune + draws); wall:",
        "the whole pm.sample call (assignment, compilation, convergence checks). z: largest",
        "|mean difference| / combined MCSE of the two samplers over the CPT entries; z exact:",
        "largest |mean - exact posterior mean| / MCSE of the row's sampler (exact means from",
        "the finite sums, `exact_means`).",
        "",
        "| epsilon | steps | min bulk ESS | max R-hat | sampling s | ESS/s | wall s | z | z exact |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"{platform.machine()}, Python {platform.python_version()}, seed {args.seed}, "
        f"{time.strftime('%Y-%m-%d')}.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
