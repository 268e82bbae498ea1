"""Foulds et al. (2016) Figs. 6 and 7: held-out log-likelihood against epsilon, Laplace vs OPS.

Data (synthetic; the war logs are not used): panels from ``study_private_hmm.simulate`` (imported,
not copied): ``R x T`` region-months, 5 binary features, the regime-change states of that study.
Two HMM panels, as the paper's two data sets: "Afghanistan-like" (3 true states, entries per
region-month log-uniform in [20, 300], median about 77; the paper's median was 58) and
"Iraq-like" (2 true states, entries log-uniform in [200, 3000], median about 775; the paper's
972). Naive Bayes (Fig. 6 left) is the paper's: "equivalent to a 1-state HMM" (each entry's
features independent, corpus-wide counts), fitted to the Afghanistan-like panel.

Splits (Sec. 5): a uniform random 10% of the region-months held out, ``--splits`` splits (the
paper: 10) of one panel; every method sees the same split (paired). Training entries are the
other cells' entries (held-out cells keep their state in the chains, with no entries).

Methods, each at total epsilon per entry (replace-one neighbours, region and month public):

* non-private HMM / naive Bayes: the plug-in Gibbs kernel on the true counts (exact Gibbs of the
  non-private posterior), 100 + 100 sweeps;
* Laplace (plug-in): ``release_hmm_counts`` with Laplace noise on the whole table (scale 5/eps:
  the paper's eps/5 per feature), ``plugin_gibbs`` 100 + 100 sweeps (naive Bayes: the counts of
  all training entries in one cell, then the clipped conjugate Beta posterior, 100 draws);
* noise-aware (naive Bayes only): the exact posterior given the *same* Laplace release (each
  feature's count of ones enumerated over 0..N, then Beta); for the HMM see
  ``benchmarks/results/private_hmm.md`` (6-16 s per fit, too slow for this grid);
* OPS: ``hmm_one_posterior_sample`` (``tempered_hmm_gibbs``): the posterior tempered at
  T = 2C/eps, emissions truncated at a0 = 1/(m V_f) with the paper's multipliers m = 100 and
  m = 10, 200 Gibbs sweeps, the last draw released. Its eps holds only if the chain has
  converged (without that, 400 eps by composition: Sec. 4.1). Naive Bayes (K = 1): the draw is
  exact.

All HMMs are given ``--states`` (default 10, as the paper) latent states and the Dirichlet(1)
priors of ``HMMPrior()``.

Score (Sec. 5): held-out log-likelihood per held-out entry. For each held-out region-month the
likelihood of its entries given a draw is the mixture over its state given the neighbouring
states of that draw (``E[A | z]`` transitions, ``E[pi | z]`` at t = 0), averaged over the kept
draws (Laplace, non-private: 100 draws) or taken at the one released draw (OPS); summed over
held-out cells and divided by their number of entries. Reported: mean over splits with its
standard error, and the paired difference OPS - Laplace with its standard error.

Fig. 7 (``--fig7``): OPS on the Afghanistan-like panel with 3 states at eps = 5 (the paper's
visualisation budget), m = 100: the mode of the last 100 of 200 sweeps (what the paper's top
panel shows; it is *not* an eps-DP release: 100 draws of the chain) against the last draw alone
(the release), and the Laplace plug-in at the same eps; state accuracy under the best label
permutation and state switches per region, over ``--fig7-repeats`` panels.

Writes ``benchmarks/results/foulds_fig6.md``, ``docs/figures/foulds_fig6.png`` and
``docs/figures/foulds_fig7.png``.
Usage: ``.venv/bin/python benchmarks/study_foulds_fig6.py [--splits 10] [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
import study_private_hmm as sph

from pymc_dp.kernels.hmm_plugin import transition_counts
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases import (
    HMMPrior,
    hmm_count_table,
    hmm_ops_log_likelihood_range,
    release_hmm_counts,
    tempered_hmm_gibbs,
)
from pymc_dp.releases.ops import OnePosteriorSample, truncated_beta_rvs

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
MULTIPLIERS = (100.0, 10.0)
PANELS = {"naive Bayes (Afghanistan-like)": (3, 20, 300, True),
          "HMM, Afghanistan-like": (3, 20, 300, False),
          "HMM, Iraq-like": (2, 200, 3000, False)}  # fmt: skip
N_FEATURES = 5


def _subset(entries, keep):
    return {k: np.asarray(v)[keep] for k, v in entries.items()}


def _ones_and_n(entries, shape):
    ones, n = hmm_count_table(entries, shape=shape)
    return ones.astype(np.float64), n.astype(np.float64)


# ---- held-out log-likelihood --------------------------------------------------------------------
def _cell_loglik(ones, n, phi1):
    """``(cells, K)``: log-likelihood of each cell's entries under each state.

    ones (cells, F), n (cells,), phi1 (K, F) = P(feature = 1 | state)."""
    return ones @ np.log(phi1).T + (n[:, None] - ones) @ np.log1p(-phi1).T


def hmm_heldout(draws, test_cells, test_ones, test_n):
    """Held-out log-likelihood (total) of ``draws``: list of (states (R, T), phi1 (K, F),
    transition (K, K), init (K,)); the likelihood averaged over draws, per held-out cell."""
    r_idx, t_idx = test_cells
    per_draw = []
    for z, phi1, trans, init in draws:
        n_steps = z.shape[1]
        logp = np.where(
            (t_idx == 0)[:, None],
            np.log(init)[None, :],
            np.log(trans[z[r_idx, np.maximum(t_idx - 1, 0)]]),
        )
        nxt = t_idx + 1 < n_steps
        logp = logp + np.where(
            nxt[:, None], np.log(trans[:, z[r_idx, np.minimum(t_idx + 1, n_steps - 1)]]).T, 0.0
        )
        logp -= special.logsumexp(logp, axis=1, keepdims=True)
        per_draw.append(special.logsumexp(logp + _cell_loglik(test_ones, test_n, phi1), axis=1))
    per_draw = np.array(per_draw)  # (draws, cells)
    return float(np.sum(special.logsumexp(per_draw, axis=0) - np.log(len(per_draw))))


def nb_heldout(phi_draws, test_ones, test_n):
    """Naive Bayes: ``phi_draws (draws, F)``; the likelihood averaged over draws, per cell."""
    ll = _cell_loglik(test_ones, test_n, phi_draws)  # (cells, draws)
    return float(np.sum(special.logsumexp(ll, axis=1) - np.log(ll.shape[1])))


# ---- fits -----------------------------------------------------------------------------------------
def _post_mean_markov(z, k, prior):
    a, b, _ = prior.resolve(k)
    n0, n = transition_counts(z, k)
    return (n + b) / (n + b).sum(1, keepdims=True), (n0 + a) / (n0 + a).sum()


def _gibbs_draws(ones, n, k, prior, rng):
    """Non-private plug-in kernel on the true counts: list of draws for hmm_heldout."""
    states, phi = sph.gibbs(ones, n, k, prior, rng)  # phi (draws, F, K)
    return [(z, p.T, *_post_mean_markov(z, k, prior)) for z, p in zip(states, phi, strict=True)]


def _ops_chain(ones, n, k, eps, m, prior, rng, schedule=(199, 1)):
    """OPS chains (one chain): the kept draws as (states, phi1, transition, init)."""
    c, a0 = hmm_ops_log_likelihood_range([2] * N_FEATURES, m)
    temp = OnePosteriorSample(eps, c).temperature
    a, b, e = prior.resolve(k)
    full, offsets = sph.binary_table(ones, n)
    z0 = rng.integers(0, k, size=(1, *n.shape))
    zs, phis = tempered_hmm_gibbs(full, offsets, z0, (a, b, np.full(offsets[-1], e)), a0, temp,
                                  schedule, rng)  # fmt: skip
    return [(z[0], phi[0][:, 1::2], *_post_mean_markov(z[0], k, prior))
            for z, phi in zip(zs, phis, strict=True)]  # fmt: skip


def one_split(panel, split_rng, args) -> dict:
    """Held-out log-likelihood per entry of every method and epsilon on one split."""
    entries, shape, nb = panel
    rng = split_rng
    cells = shape[0] * shape[1]
    test = rng.permutation(cells)[: max(1, cells // 10)]
    is_test = np.zeros(cells, dtype=bool)
    is_test[test] = True
    step = np.asarray(entries["region"]) * shape[1] + np.asarray(entries["month"])
    train, held = _subset(entries, ~is_test[step]), _subset(entries, is_test[step])
    ones, n = _ones_and_n(train, shape)
    h_ones, h_n = _ones_and_n(held, shape)
    test_cells = np.unravel_index(test, shape)
    t_ones, t_n = h_ones[test_cells], h_n[test_cells]
    n_test = float(t_n.sum())
    prior = HMMPrior()
    out = {}
    if nb:
        tot1, tot = ones.sum(axis=(0, 1)), float(n.sum())
        out["non-private"] = nb_heldout(rng.beta(1 + tot1, 1 + tot - tot1, size=(100, 5)),
                                        t_ones, t_n) / n_test  # fmt: skip
    else:
        draws = _gibbs_draws(ones, n, args.states, prior, rng)
        out["non-private"] = hmm_heldout(draws, test_cells, t_ones, t_n) / n_test
    for eps in EPSILONS:
        mech = functools.partial(Laplace, epsilon=eps)
        if nb:
            one_cell = {"region": np.zeros_like(train["region"]),
                        "month": np.zeros_like(train["month"]), "features": train["features"]}  # fmt: skip
            rel = release_hmm_counts(one_cell, shape=(1, 1), mechanism=mech, rng=rng,
                                     allow_float=True)  # fmt: skip
            y = np.asarray(rel.counts, dtype=np.float64)[0, 0]
            tot = int(rel.entries_per_step[0, 0])
            s = np.clip(y, 0, tot)
            phi = rng.beta(1 + s, 1 + tot - s, size=(100, 5))
            out[("Laplace (plug-in)", eps)] = nb_heldout(phi, t_ones, t_n) / n_test
            scale = rel.mechanism.scale
            grid = np.arange(tot + 1)
            logw = -np.abs(y[:, None] - grid[None, :]) / scale  # Beta(1,1) prior: uniform count
            w = np.exp(logw - logw.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            s_draw = np.array([rng.choice(tot + 1, size=100, p=wf) for wf in w]).T  # (100, F)
            phi = rng.beta(1 + s_draw, 1 + tot - s_draw)
            out[("noise-aware", eps)] = nb_heldout(phi, t_ones, t_n) / n_test
            for m in MULTIPLIERS:
                c, a0 = hmm_ops_log_likelihood_range([2] * N_FEATURES, m)
                temp = OnePosteriorSample(eps, c).temperature
                tot1 = ones.sum(axis=(0, 1))
                phi = truncated_beta_rvs(1 + tot1 / temp, 1 + (tot - tot1) / temp, a0[0],
                                         1 - a0[0], rng=rng)  # fmt: skip
                out[(f"OPS m={m:g}", eps)] = nb_heldout(phi[None, :], t_ones, t_n) / n_test
            continue
        rel = release_hmm_counts(train, shape=shape, mechanism=mech, rng=rng, allow_float=True)
        res = rel.plugin_gibbs(args.states, draws=100, tune=100, prior=prior, rng=rng)
        phi1 = np.stack([em[..., 1] for em in res.emissions], axis=-1)  # (draws, K, F)
        draws = list(zip(res.states, phi1, res.transition, res.init, strict=True))
        out[("Laplace (plug-in)", eps)] = hmm_heldout(draws, test_cells, t_ones, t_n) / n_test
        for m in MULTIPLIERS:
            draws = _ops_chain(ones, n, args.states, eps, m, prior, rng)
            out[(f"OPS m={m:g}", eps)] = hmm_heldout(draws, test_cells, t_ones, t_n) / n_test
    return out


def run_fig6(args) -> dict:
    """``{panel: {method or (method, eps): array over splits}}``."""
    seeds = np.random.SeedSequence(args.seed).spawn(len(PANELS))
    results = {}
    for (name, (k_true, lo, hi, nb)), seed in zip(PANELS.items(), seeds, strict=True):
        rng = np.random.default_rng(seed)
        entries, _, _ = sph.simulate(rng, tuple(args.shape), k_true, (lo, hi))
        panel = (entries, tuple(args.shape), nb)
        rows = []
        t0 = time.perf_counter()
        for split_seed in seed.spawn(args.splits):
            rows.append(one_split(panel, np.random.default_rng(split_seed), args))
        results[name] = {key: np.array([r[key] for r in rows]) for key in rows[0]}
        results[name]["entries"] = len(entries["month"])
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return results


# ---- Fig. 7 ---------------------------------------------------------------------------------------
def run_fig7(args):
    """Accuracy and switches of OPS (mode of 100 / last draw) and Laplace at eps = 5, K = 3."""
    eps, k, m = 5.0, 3, 100.0
    rng = np.random.default_rng(np.random.SeedSequence([args.seed, 7]))
    prior = HMMPrior()
    rows, example = [], None
    for rep in range(args.fig7_repeats):
        entries, states, _ = sph.simulate(rng, tuple(args.shape), k, (20, 300))
        ones, n = _ones_and_n(entries, tuple(args.shape))
        draws = _ops_chain(ones, n, k, eps, m, prior, rng, schedule=(100, 100))
        z = np.stack([d[0] for d in draws])
        rel = release_hmm_counts(entries, shape=tuple(args.shape), rng=rng, allow_float=True,
                                 mechanism=functools.partial(Laplace, epsilon=eps))  # fmt: skip
        lap = rel.plugin_gibbs(k, draws=100, tune=100, prior=prior, rng=rng).states
        est = {"OPS, mode of last 100 draws": sph.state_mode(z, k),
               "OPS, last draw (the release)": z[-1],
               "Laplace plug-in, mode of 100 draws": sph.state_mode(lap, k)}  # fmt: skip
        best = {name: sph.best_permutation(e, states, k) for name, e in est.items()}
        rows.append({name: (best[name][0], float(np.mean(np.sum(np.diff(e, axis=1) != 0, axis=1))))
                     for name, e in est.items()})  # fmt: skip
        rows[-1]["truth"] = (1.0, float(np.mean(np.sum(np.diff(states, axis=1) != 0, axis=1))))
        if rep == 0:  # the figure shows each estimate relabelled to fit the truth best
            example = (states, {n: np.asarray(best[n][1])[e] for n, e in est.items()})
    return rows, example


# ---- output ---------------------------------------------------------------------------------------
_mse = sph.mean_se  # (mean, standard error) over splits or panels


def write(results, fig7, args, seconds, path: Path) -> None:
    c100 = hmm_ops_log_likelihood_range([2] * 5, 100)[0]
    c10 = hmm_ops_log_likelihood_range([2] * 5, 10)[0]
    lines = [
        "# Foulds et al. (2016) Figs. 6 and 7, reproduced on synthetic panels",
        "",
        "Written by `benchmarks/study_foulds_fig6.py` (its docstring states the data, the splits, "
        f"the methods and the score). {args.shape[0]} regions x {args.shape[1]} months, 5 binary "
        f"features, {args.splits} splits (10% of region-months held out), {args.states} latent "
        "states for every HMM, Laplace on the whole table (scale 5/epsilon). OPS: T = 2C/epsilon "
        f"with C = {c100:.3f} (m = 100, a0 = 0.005) and {c10:.3f} (m = 10, a0 = 0.05); one draw "
        "after 200 Gibbs sweeps, epsilon-DP only if converged (else 400 epsilon, Sec. 4.1). "
        "Held-out log-likelihood per held-out entry, mean ± standard error over splits; "
        "'OPS - Laplace' is the paired difference (same split) with its standard error, "
        "'beyond 2 SE' says whether it is. "
        f"Seed {args.seed}; {seconds / 60:.1f} min on {platform.machine()} ({os.cpu_count()} "
        "cores shared with other jobs).",
        "",
    ]
    for name, res in results.items():
        methods = sorted({k[0] for k in res if isinstance(k, tuple)},
                         key=["Laplace (plug-in)", "noise-aware", "OPS m=100", "OPS m=10"].index)  # fmt: skip
        np_mean, np_se = _mse(res["non-private"])
        lines += [f"## {name} ({res['entries']} entries)", "",
                  f"Non-private: {np_mean:.4f} ± {np_se:.4f}.", "",
                  "| epsilon | " + " | ".join(methods) + " | OPS m=100 - Laplace | beyond 2 SE |",
                  "|---:|" + "---:|" * len(methods) + "---:|:---:|"]  # fmt: skip
        for eps in EPSILONS:
            cells = [
                f"{_mse(res[(mt, eps)])[0]:.4f} ± {_mse(res[(mt, eps)])[1]:.4f}" for mt in methods
            ]
            d_mean, d_se = _mse(res[("OPS m=100", eps)] - res[("Laplace (plug-in)", eps)])
            beyond = "yes" if abs(d_mean) > 2 * d_se else "no"
            lines.append(
                f"| {eps:g} | " + " | ".join(cells) + f" | {d_mean:+.4f} ± {d_se:.4f} | {beyond} |"
            )
        lines.append("")
    rows, _ = fig7
    lines += ["## Fig. 7: OPS state assignments (Afghanistan-like, 3 states, epsilon = 5, m = 100)",
              "", f"{len(rows)} panels; mean ± standard error. The mode of the last 100 draws is "
              "not an epsilon-DP release (100 draws of the chain).", "",
              "| estimate | state accuracy | state switches per region |", "|---|---:|---:|"]  # fmt: skip
    for name in rows[0]:
        acc, sw = _mse([r[name][0] for r in rows]), _mse([r[name][1] for r in rows])
        lines.append(f"| {name} | {acc[0]:.3f} ± {acc[1]:.3f} | {sw[0]:.1f} ± {sw[1]:.1f} |")
    last, mode = "OPS, last draw (the release)", "OPS, mode of last 100 draws"
    d_acc = _mse([r[last][0] - r[mode][0] for r in rows])
    d_sw = _mse([r[last][1] - r[mode][1] for r in rows])
    lines.append(f"| last draw - mode of 100 (paired) | {d_acc[0]:+.3f} ± {d_acc[1]:.3f} | "
                 f"{d_sw[0]:+.1f} ± {d_sw[1]:.1f} |")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def plot(results, fig7, fig6_path: Path, fig7_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"Laplace (plug-in)": "C0-o", "noise-aware": "C2-.d", "OPS m=100": "C3-s",
              "OPS m=10": "C1--^"}  # fmt: skip
    fig, axes = plt.subplots(2, len(results), figsize=(5.0 * len(results), 7.6), sharex=True)
    for j, (name, res) in enumerate(results.items()):
        ax, dx = axes[0, j], axes[1, j]
        mean, _ = _mse(res["non-private"])
        ax.axhline(mean, color="k", label="non-private")
        dx.axhline(0.0, color="C0", label="Laplace (plug-in)")
        for m, st in styles.items():
            if (m, EPSILONS[0]) not in res:
                continue
            y = np.array([_mse(res[(m, e)]) for e in EPSILONS])
            ax.errorbar(EPSILONS, y[:, 0], yerr=2 * y[:, 1], fmt=st, label=m, ms=4, capsize=2)
            if m != "Laplace (plug-in)":
                d = np.array([_mse(res[(m, e)] - res[("Laplace (plug-in)", e)]) for e in EPSILONS])
                dx.errorbar(EPSILONS, d[:, 0], yerr=2 * d[:, 1], fmt=st, label=m, ms=4, capsize=2)
        ax.set(xscale="log", title=name)
        dx.set(xscale="log", xlabel="epsilon (total)")
        for a in (ax, dx):
            a.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel("held-out log-lik. per entry\n(±2 SE: spread over splits)")
    axes[1, 0].set_ylabel("minus Laplace's, same split\n(±2 paired SE)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig6_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(fig6_path, dpi=110)
    plot_fig7(fig7, fig7_path)


def plot_fig7(fig7, fig7_path: Path) -> None:
    """The example panel of :func:`run_fig7`: truth and the three estimates (region x month)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    states, est = fig7[1]
    fig, axes = plt.subplots(len(est) + 1, 1, figsize=(8, 1.6 * (len(est) + 1) + 0.5), sharex=True)
    for ax, (name, s) in zip(axes, [("truth", states), *est.items()], strict=True):
        ax.imshow(s, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=2)
        ax.set(title=name, ylabel="region")
    axes[-1].set_xlabel("month")
    fig.tight_layout()
    fig.savefig(fig7_path, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--shape", type=int, nargs=2, default=[10, 72])
    ap.add_argument("--fig7-repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20160606)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/foulds_fig6.md"))
    ap.add_argument("--fig", default=str(ROOT / "docs/figures/foulds_fig6.png"))
    ap.add_argument("--fig7", default=str(ROOT / "docs/figures/foulds_fig7.png"))
    args = ap.parse_args(argv)
    if args.quick:
        args.splits, args.states, args.shape, args.fig7_repeats = 2, 3, [3, 60], 2
    t0 = time.perf_counter()
    results = run_fig6(args)
    fig7 = run_fig7(args)
    seconds = time.perf_counter() - t0
    write(results, fig7, args, seconds, Path(args.out))
    plot(results, fig7, Path(args.fig), Path(args.fig7))
    print(f"done in {seconds:.0f} s: {args.out}")


if __name__ == "__main__":
    main()
