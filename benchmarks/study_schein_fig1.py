"""Schein et al. (2019) Fig. 1 and the held-out link prediction of Fig. 4, on synthetic networks.

Fig. 1 of the paper: a synthetic ``V = 20`` actor network with ``C = 5`` communities, fitted
with the mixed-membership stochastic block model (MMSB, ``mu_ij = sum_cd theta_ic theta_jd
pi_cd``), released through the two-sided geometric mechanism with ``alpha = exp(-epsilon /
N)`` at ``epsilon in {2.5, 1, 0.75}`` (``N`` the mean true count), shown as heat maps of the
noisy data, the naive and the noise-aware posterior-mean rates. Fig. 4 (Enron) adds held-out
link prediction: entries of the top senders / receivers are masked and the held-out MAE is
compared.

This study (``pymc_dp.examples.mmsb``):

* truth: :func:`~pymc_dp.examples.mmsb.simulate` with ``block=True`` (contiguous communities
  with sparse additions; the paper's ``Gamma(0.01, 0.5)`` truth gives an almost empty matrix,
  errata in ``docs/theory.md``); no self-loops;
* fits: ``nonprivate`` (true counts), ``naive`` (release clipped at 0) and ``aware``
  (``how="augmented"``: true counts latent), all by the exact all-Gibbs step
  :class:`~pymc_dp.examples.mmsb.MMSBGibbs` under ``pm.sample``, prior ``Gamma(0.1, 1)``;
* reconstruction: every off-diagonal entry observed, MAE of the posterior-mean rates against
  the true counts over all off-diagonal entries;
* link prediction: the entries sent by the top ``n_top`` senders or received by the top
  ``n_top`` receivers (ranked on the true counts, the same mask for every method) are held
  out; MAE over the held-out entries only;
* every method sees the same truth and, at each epsilon, the same release (paired); the
  differences are reported per repeat with their standard error over repeats.

Run: ``.venv/bin/python benchmarks/study_schein_fig1.py`` (writes
``benchmarks/results/schein_fig1.md`` and ``docs/figures/schein_fig1.png``); ``--help`` for
the sizes. The default (10 repeats) takes about 8 minutes on the shared 2-core machine.
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

from pymc_dp.examples import mmsb
from pymc_dp.mechanisms.geometric import Geometric

__all__ = ["Config", "fit_rates", "main", "plot_fig1", "report", "run_repeat", "run_study"]

HERE = Path(__file__).resolve().parent
REPORT = HERE / "results" / "schein_fig1.md"
FIGURE = HERE.parent / "docs" / "figures" / "schein_fig1.png"


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes, sampler settings and seed (defaults: the recorded run).

    Examples
    --------
    >>> Config().n_actors, Config().n_communities, Config().epsilons
    (20, 5, (2.5, 1.0, 0.75))
    """

    n_actors: int = 20
    n_communities: int = 5
    epsilons: tuple = (2.5, 1.0, 0.75)
    n_top: int = 3
    repeats: int = 10
    tune: int = 300
    draws: int = 300
    chains: int = 1
    n_scans: int = 10
    restarts: int = 3  # seeds of the chain-spread check (nonprivate, aware at min epsilon)
    seed: int = 20261128


def fit_rates(counts, how: str, mechanism, config: Config, seed: int, mask=None) -> np.ndarray:
    """Posterior-mean rates of one MMSB fit (``how`` in ``METHODS``; ``aware`` is
    ``"augmented"``).

    Examples
    --------
    >>> import numpy as np
    >>> cfg = Config(n_actors=4, n_communities=1, tune=10, draws=10, chains=1)
    >>> y = np.array([[0, 1, 0, 2], [1, 0, 0, 0], [0, 3, 0, 1], [1, 0, 0, 0]])
    >>> fit_rates(y, "nonprivate", None, cfg, 1).shape
    (4, 4)
    """
    model = mmsb.build_model(
        counts,
        config.n_communities,
        how="augmented" if how == "aware" else how,
        mechanism=mechanism,
        mask=mask,
    )
    idata = mmsb.fit(
        model,
        draws=config.draws,
        tune=config.tune,
        chains=config.chains,
        cores=1,
        random_seed=seed,
        n_scans=config.n_scans,
        compute_convergence_checks=False,
    )
    return mmsb.posterior_mean_rates(idata)


def run_repeat(config: Config, repeat: int, log=print) -> dict:
    """One truth; at each epsilon one release; every method on the full and the masked matrix.

    Examples
    --------
    >>> cfg = Config(n_actors=5, n_communities=1, epsilons=(1.0,), n_top=1, tune=10,
    ...              draws=10, chains=1)
    >>> out = run_repeat(cfg, 0, log=lambda line: None)
    >>> sorted(out["mae"][1.0]), sorted(out["heldout"][1.0])
    (['aware', 'naive', 'nonprivate'], ['aware', 'naive', 'nonprivate'])
    """
    t0 = time.perf_counter()
    truth = mmsb.simulate(
        config.n_actors,
        config.n_communities,
        rng=np.random.default_rng(_seed(config, repeat, "truth")),
    )
    y = truth["counts"]
    mask = mmsb.top_actor_mask(y, config.n_top)
    out = {"truth": truth, "mask": mask, "mae": {}, "heldout": {}, "rates": {}, "noisy": {}}
    full_np = fit_rates(y, "nonprivate", None, config, _seed(config, repeat, "np full"))
    held_np = fit_rates(y, "nonprivate", None, config, _seed(config, repeat, "np held"), mask)
    out["rates"]["nonprivate"] = full_np
    for eps in config.epsilons:
        rng = np.random.default_rng(_seed(config, repeat, f"noise {eps}"))
        noisy, mech = mmsb.privatize(y, eps, rng=rng)
        out["noisy"][eps] = (noisy, mech.alpha)
        full = {"nonprivate": full_np}
        held = {"nonprivate": held_np}
        for how in ("naive", "aware"):
            full[how] = fit_rates(noisy, how, mech, config, _seed(config, repeat, f"{how} {eps}"))
            held[how] = fit_rates(
                noisy, how, mech, config, _seed(config, repeat, f"{how} {eps} held"), mask
            )
            out["rates"][(how, eps)] = full[how]
        out["mae"][eps] = {h: mmsb.mae(full[h], y) for h in METHODS}
        out["heldout"][eps] = {h: mmsb.mae(held[h], y, mask=mask) for h in METHODS}
    spread = {"nonprivate": [out["mae"][config.epsilons[0]]["nonprivate"]]}
    e_min = min(config.epsilons)
    spread["aware"] = [out["mae"][e_min]["aware"]]
    noisy, alpha = out["noisy"][e_min]
    mech_min = Geometric(alpha=alpha)
    for k in range(1, config.restarts):
        spread["nonprivate"].append(
            mmsb.mae(fit_rates(y, "nonprivate", None, config, _seed(config, repeat, f"np {k}")), y)
        )
        spread["aware"].append(
            mmsb.mae(
                fit_rates(noisy, "aware", mech_min, config, _seed(config, repeat, f"aw {k}")), y
            )
        )
    out["spread"] = spread
    out["oracle"] = mmsb.mae(truth["rates"], y)
    out["oracle_heldout"] = mmsb.mae(truth["rates"], y, mask=mask)
    out["seconds"] = time.perf_counter() - t0
    line = "; ".join(
        f"eps {e}: " + " ".join(f"{h} {out['mae'][e][h]:.3f}/{out['heldout'][e][h]:.3f}" for h in METHODS)
        for e in config.epsilons
    )  # fmt: skip
    log(f"repeat {repeat} ({out['seconds']:.0f} s): {line}")
    return out


def run_study(config: Config, log=print) -> list[dict]:
    """All repeats.

    Examples
    --------
    >>> cfg = Config(n_actors=4, n_communities=1, epsilons=(1.0,), n_top=1, repeats=1,
    ...              tune=5, draws=5, chains=1)
    >>> len(run_study(cfg, log=lambda line: None))
    1
    """
    return [run_repeat(config, r, log=log) for r in range(config.repeats)]


def _table(results, config, key, oracle_key) -> list[str]:
    lines = [
        "| epsilon | alpha (mean) | oracle | nonprivate | naive | aware | aware − naive | "
        "aware − nonprivate | aware wins vs naive | aware wins vs nonprivate |",
        "|---" * 10 + "|",
    ]
    n = len(results)
    oracle = np.array([r[oracle_key] for r in results])
    for eps in config.epsilons:
        m = {h: np.array([r[key][eps][h] for r in results]) for h in METHODS}
        alpha = np.mean([r["noisy"][eps][1] for r in results])
        d1 = m["aware"] - m["naive"]
        d2 = m["aware"] - m["nonprivate"]

        def cell(x):
            return f"{x.mean():.3f} ± {se(x):.3f}"

        lines.append(
            f"| {eps} | {alpha:.3f} | {cell(oracle)} | {cell(m['nonprivate'])} | "
            f"{cell(m['naive'])} | {cell(m['aware'])} | {d1.mean():+.3f} ± {se(d1):.3f} | "
            f"{d2.mean():+.3f} ± {se(d2):.3f} | {int((d1 < 0).sum())}/{n} | "
            f"{int((d2 < 0).sum())}/{n} |"
        )
    return lines


def _verdicts(results, config) -> list[str]:
    out = []
    n = len(results)
    for key, what in (("mae", "reconstruction"), ("heldout", "held-out link prediction")):
        for eps in config.epsilons:
            m = {h: np.array([r[key][eps][h] for r in results]) for h in METHODS}
            for other in ("naive", "nonprivate"):
                d = m["aware"] - m[other]
                _, lo, hi = paired_interval(d)
                if hi < 0:
                    word = "aware lower"
                elif lo > 0:
                    word = "aware HIGHER"
                else:
                    word = "no difference resolved (the interval holds 0)"
                out.append(
                    f"- {what}, epsilon = {eps}, aware − {other}: {d.mean():+.3f}, 95% interval "
                    f"[{lo:+.3f}, {hi:+.3f}] (t_{n - 1}, paired over repeats): {word}."
                )
    return out


def plot_fig1(result: dict, config: Config, path: Path = FIGURE) -> Path:
    """Heat maps in the layout of the paper's Fig. 1 (one repeat): column 0 the truth (true
    counts, true rates, non-private fit); then one column per epsilon: the release (red
    positive, blue negative), the naive and the noise-aware posterior-mean rates.

    Examples
    --------
    >>> callable(plot_fig1)
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = config.epsilons
    fig, axes = plt.subplots(3, len(eps) + 1, figsize=(3.0 * (len(eps) + 1), 8.6))
    truth = result["truth"]
    vmax = float(np.quantile(truth["rates"], 0.99))
    rate_kw = {"cmap": "viridis", "vmin": 0.0, "vmax": vmax}
    panels = [
        (truth["counts"], "true counts y", rate_kw),
        (truth["rates"], "true rates mu*", rate_kw),
        (
            result["rates"]["nonprivate"],
            f"non-private fit, MAE {mmsb.mae(result['rates']['nonprivate'], truth['counts']):.2f}",
            rate_kw,
        ),
    ]
    for ax, (img, title, kw) in zip(axes[:, 0], panels, strict=True):
        ax.imshow(img, **kw)
        ax.set_title(title, fontsize=9)
    for col, e in enumerate(eps, start=1):
        noisy, alpha = result["noisy"][e]
        lim = float(np.abs(noisy).max())
        axes[0, col].imshow(noisy, cmap="bwr", vmin=-lim, vmax=lim)
        axes[0, col].set_title(f"release, eps = {e} (alpha {alpha:.2f})", fontsize=9)
        for row, how in ((1, "naive"), (2, "aware")):
            rates = result["rates"][(how, e)]
            err = mmsb.mae(rates, truth["counts"])
            axes[row, col].imshow(rates, **rate_kw)
            axes[row, col].set_title(f"{how} fit, MAE {err:.2f}", fontsize=9)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(
        f"MMSB, V = {config.n_actors}, C = {config.n_communities}: posterior-mean rates "
        "(same colour scale as the true rates). One repeat, all fits on the same releases; "
        "differences over repeats with their\nstandard errors, and the non-private chains' "
        "seed-to-seed spread, are in benchmarks/results/schein_fig1.md",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(results: list[dict], config: Config, seconds: float) -> str:
    """The results file's text.

    Examples
    --------
    >>> callable(report)
    True
    """
    c = config
    masked = float(np.mean([r["mask"][~np.eye(c.n_actors, dtype=bool)].mean() for r in results]))
    lines = [
        "# Schein et al. (2019) Fig. 1 (MMSB block recovery) and held-out link prediction",
        "",
        "Written by `benchmarks/study_schein_fig1.py` (one run); figure: "
        "`docs/figures/schein_fig1.png` (repeat 0).",
        "",
        "## Setting",
        "",
        f"- Network of V = {c.n_actors} actors, C = {c.n_communities} communities (the paper's "
        "sizes); model `y_ij ~ Poisson(sum_cd theta_ic theta_jd pi_cd)`, i != j (no "
        "self-loops), `theta_ic, pi_cd ~ Gamma(shape 0.1, rate 1)` (`pymc_dp.examples.mmsb`).",
        "- Truth: `mmsb.simulate(..., block=True)`: contiguous communities, membership "
        "Gamma(shape 4, mean 1) in the own community, sparse Exponential(mean 0.3) additions "
        "(probability 0.1) elsewhere; pi with Gamma(shape 4, mean 10) on the diagonal and sparse "
        "Exponential(mean 0.5) additions (probability 0.2) off it. The paper's Gamma(0.01, 0.5) "
        "truth gives an almost empty matrix (docs/theory.md errata), so this block-structured truth "
        "replaces it. Data generated here (the paper's synthetic data is not published).",
        "- Release: `mmsb.privatize`: two-sided geometric noise on every off-diagonal count, "
        "alpha = exp(-epsilon / N), N the mean true off-diagonal count, epsilon in "
        f"{{{', '.join(str(e) for e in c.epsilons)}}}; one release per (repeat, epsilon), "
        "used by every method (paired).",
        "- Fits: nonprivate (true counts), naive (release clipped at 0), aware (`how="
        "'augmented'`, true counts latent); all three by the exact all-Gibbs step "
        f"`mmsb.MMSBGibbs` under `pm.sample`: {c.tune} tune + {c.draws} draws, {c.chains} "
        f"chain(s), {c.n_scans} scans per iteration, i.e. every {c.n_scans}th scan kept (the paper: 8,500 iterations, every 25th "
        "after 1,000).",
        "- Reconstruction: every off-diagonal entry observed; MAE of the posterior-mean rates "
        "against the true counts over the off-diagonal entries (the paper's metric).",
        f"- Link prediction: held out are the entries sent by the top {c.n_top} senders or "
        f"received by the top {c.n_top} receivers (ranked on the true counts; "
        f"{masked:.0%} of the off-diagonal entries), as the paper's 'top 50 senders or "
        "recipients' of 161 actors (which holds out about half the entries; at V = 20 the "
        "same fraction would hide whole communities); MAE over the held-out entries only. "
        "The same mask for every method.",
        f"- Repeats: {len(results)} (a fresh truth each); seeds "
        f"`numpy.random.SeedSequence([{c.seed}, repeat, *key.encode()])`. Wall time "
        f"{seconds / 60:.1f} min on the shared 2-core machine.",
        "- Cells: mean ± standard error over repeats; 'aware − x' is the paired difference "
        "(negative: noise-aware better), with its standard error; 'wins' counts the repeats "
        "where the noise-aware MAE is lower. 'oracle' is the MAE of the true rates.",
        "",
        "## Reconstruction MAE (all off-diagonal entries observed)",
        "",
        *_table(results, c, "mae", "oracle"),
        "",
        "## Held-out link prediction MAE (masked entries only)",
        "",
        *_table(results, c, "heldout", "oracle_heldout"),
        "",
        "## Verdicts (paired 95% t intervals over repeats)",
        "",
        *_verdicts(results, c),
        "",
        "## Chain-to-chain spread (reconstruction MAE, one chain per seed)",
        "",
        f"Per repeat, the full-matrix fit re-run with {c.restarts} seeds (the first is the one "
        "in the tables): non-private, and noise-aware at the smallest epsilon on the same "
        "release. The Gibbs chains of the MMSB under Gamma(0.1, 1) priors can stay in a poor "
        "mode for the whole run; a spread here larger than the differences above means those "
        "differences are partly about which mode a chain found, not about the model.",
        "",
        f"| repeat | nonprivate (per seed) | aware, eps = {min(c.epsilons)} (per seed) | oracle |",
        "|---|---|---|---|",
        *[
            f"| {k} | {' / '.join(f'{x:.3f}' for x in r['spread']['nonprivate'])} | "
            f"{' / '.join(f'{x:.3f}' for x in r['spread']['aware'])} | {r['oracle']:.3f} |"
            for k, r in enumerate(results)
        ],
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    """Command line entry point (``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Config()
    parser.add_argument("--repeats", type=int, default=d.repeats)
    parser.add_argument("--tune", type=int, default=d.tune)
    parser.add_argument("--draws", type=int, default=d.draws)
    parser.add_argument("--chains", type=int, default=d.chains)
    parser.add_argument("--n-scans", type=int, default=d.n_scans)
    parser.add_argument("--n-top", type=int, default=d.n_top)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    config = dataclasses.replace(
        d,
        repeats=args.repeats,
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        n_scans=args.n_scans,
        n_top=args.n_top,
    )
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    results = run_study(config)
    seconds = time.perf_counter() - t0
    text = report(results, config, seconds)
    print(text)
    if not args.no_write:
        REPORT.write_text(text)
        plot_fig1(results[0], config)


if __name__ == "__main__":
    main()
