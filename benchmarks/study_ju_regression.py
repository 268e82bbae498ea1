"""Ju et al. (2022) linear regression across the slides' epsilon grid with the slides' prior.

Setting (slides, "Application: Linear Regression" / "Simulation Setup"): N = 100 records,
p = 2 predictors ``x_i ~ N(m, Sigma)`` with ``m = (0.9, -1.17)`` and ``Sigma = I``,
``y_i | x_i ~ N(beta_0 + x_i' beta_{1:2}, sigma^2 = 2)``, epsilon in {0.1, 0.3, 1, 3, 10},
prior ``beta_j ~ N(0, tau^2 = 2)`` independently. The slides do not give beta, the clamping
bounds or priors for m, Sigma, sigma^2; we take beta = (-1.79, -2.89, -0.66) (the notebook's),
clamp each predictor to [m_j - 4, m_j + 4] and the response to [-15, 8], and treat m, Sigma
and sigma^2 as known (the prior line of the slides names only beta).

Release (the slides' ``Z_dp``): the clamped records are mapped to [-1, 1] and
``(X~' y~, y~' y~, X~' X~)`` with ``X~ = [1, x~]`` released with Laplace noise calibrated by
``release_sufficient_statistics(..., "linear_regression")`` to its exact L1 sensitivity.

Model (written here, in the original units, so that the slides' prior applies as stated):
``beta ~ N(0, sqrt 2)`` (3 coefficients), latent ``X ~ N(m, 1)`` and
``y ~ N(beta_0 + X beta_{1:2}, sqrt 2)``, and a ``pmdp.Release`` of the statistic computed from
the latent records with the data holder's clamping and normalisation. A default
``pm.sample()`` assigns DataAugmentation to the records (the sampler statistics recorded,
which name the steps, are in the JSON).

One non-private data set is fixed; at each epsilon one release is fitted by ``--chains``
chains (default 6) of ``--draws`` draws (default 600) after 300 tuning iterations (the slides:
100 chains of 10,000 iterations; ours is sized to a few CPU-minutes). Reported per chain:
posterior mean of beta, min / mean acceptance rate of the record updates; and the
non-private posterior mean (conjugate, known sigma^2, the unclamped records) for reference.

Writes ``benchmarks/results/ju_regression.json`` and ``docs/figures/ju_regression.png``.
Usage: ``.venv/bin/python benchmarks/study_ju_regression.py [--chains 6] [--draws 600]``.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from _ju_common import (
    BETA,
    EPSILONS,
    SIGMA2,
    TAU2,
    X_HI,
    X_LO,
    Y_HI,
    Y_LO,
    M,
    N,
    chain_study_main,
    regression_data,
    sample,
    to_unit,
)

import pymc_dp as pmdp


def nonprivate_mean(x, y) -> np.ndarray:
    """Posterior mean of beta given the records (conjugate Normal, known sigma^2)."""
    xd = np.column_stack([np.ones(len(y)), x])
    prec = np.eye(3) / TAU2 + xd.T @ xd / SIGMA2
    return np.linalg.solve(prec, xd.T @ y / SIGMA2)


def build_model(rel) -> pm.Model:
    f = np.float64
    with pm.Model() as model:
        beta = pm.Normal("beta", f(0.0), f(np.sqrt(TAU2)), shape=3)
        x = pm.Normal("X", mu=M.astype(f), sigma=f(1.0), shape=(N, 2))
        y = pm.Normal("y", mu=beta[0] + pt.dot(x, beta[1:]), sigma=f(np.sqrt(SIGMA2)), shape=N)
        xt = to_unit(x, X_LO.astype(f), X_HI.astype(f))
        yt = to_unit(y, f(Y_LO), f(Y_HI))
        xd = pt.concatenate([pt.ones((N, 1), dtype="float64"), xt], axis=1)
        iu = np.triu_indices(3)
        stat = pt.concatenate([pt.dot(xd.T, xd)[iu], pt.dot(xd.T, yt), pt.dot(yt, yt)[None]])
        pmdp.Release("z", stat, rel.mechanism, observed=np.asarray(rel.value, dtype=f))
    return model


def run(chains: int, draws: int, tune: int, seed: int, out_path: Path | None) -> dict:
    x, y = regression_data(np.random.default_rng(seed))  # the fixed data set
    rng = np.random.default_rng(seed + 1)
    xu = np.column_stack([np.ones(N), to_unit(x, X_LO, X_HI)])
    yu = to_unit(y, Y_LO, Y_HI)
    out = {
        "chains": chains,
        "draws": draws,
        "tune": tune,
        "seed": seed,
        "nonprivate_mean": nonprivate_mean(x, y).tolist(),
        "rows": {},
    }
    for eps in EPSILONS:
        rel = pmdp.release_sufficient_statistics(
            (xu, yu),
            "linear_regression",
            bounds=((-1.0, 1.0), (-1.0, 1.0)),
            mechanism=functools.partial(pmdp.Laplace, epsilon=eps),
            rng=rng,
            allow_float=True,  # the slides' floating-point Laplace noise (a simulation)
        )
        t0 = time.perf_counter()
        idata = sample(build_model(rel), draws, tune, chains, "beta", rng)
        st = idata.sample_stats
        steps = sorted(st.data_vars)  # the samplers' statistics name the steps used
        rate = st["da_accept_rate"].values
        bm = idata.posterior["beta"].mean("draw").values  # (chain, 3)
        within_sd = idata.posterior["beta"].std("draw").values.mean(axis=0)
        out["rows"][str(eps)] = {
            "post_mean_beta": bm.tolist(),
            "within_chain_sd": within_sd.tolist(),
            "min_rate": rate.min(axis=1).tolist(),
            "mean_rate": rate.mean(axis=1).tolist(),
            "min_prob": st["da_accept_min"].values.min(axis=1).tolist(),
            "bound": float(np.exp(-eps)),
            "steps": steps,
            "seconds": time.perf_counter() - t0,
        }
        print(
            f"eps={eps}: beta means over chains {np.round(bm.mean(axis=0), 3)} "
            f"(sd across chains {np.round(bm.std(axis=0, ddof=1), 3)}), "
            f"min prob {rate.min():.3f}, {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        if out_path is not None:
            out_path.write_text(json.dumps(out, indent=1))
    return out


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = [e for e in EPSILONS if str(e) in res["rows"]]
    rows = [res["rows"][str(e)] for e in eps]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for j, ax in enumerate(axes[:3]):
        ax.boxplot([np.array(r["post_mean_beta"])[:, j] for r in rows], widths=0.5)
        centre = [np.mean(np.array(r["post_mean_beta"])[:, j]) for r in rows]
        spread = [r["within_chain_sd"][j] for r in rows]
        pos = np.arange(1, len(eps) + 1) + 0.3
        ax.errorbar(pos, centre, yerr=spread, fmt="none", color="C3", label="± posterior sd")
        ax.axhline(BETA[j], color="k", ls="--", label="truth")
        ax.axhline(res["nonprivate_mean"][j], color="g", ls=":", label="non-private posterior")
        ax.set_xticks(np.arange(1, len(eps) + 1), [str(e) for e in eps])
        ax.set_xlabel("epsilon")
        ax.set_title(f"per-chain posterior mean of beta_{j}")
    axes[0].legend(fontsize=7)
    ax = axes[3]
    for key, mk, col, label in [
        ("min_rate", "v", "C0", "per-chain min acceptance rate"),
        ("mean_rate", "o", "C1", "per-chain mean acceptance rate"),
    ]:
        for k, (e, r) in enumerate(zip(eps, rows, strict=True)):
            xs = np.full(len(r[key]), e)
            ax.plot(xs, r[key], mk, color=col, alpha=0.5, label=label if k == 0 else None)
    ax.plot(eps, np.exp(-np.array(eps)), "k-", label="exp(-epsilon)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_title("record updates")
    ax.legend(fontsize=7)
    fig.suptitle(f"{res['chains']} chains x {res['draws']} draws per epsilon, one data set")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    chain_study_main(__doc__, run, plot, name="ju_regression", chains=6, tune=300)


if __name__ == "__main__":
    main()
