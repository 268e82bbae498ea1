"""Schein et al. (2019) synthetic experiment: block recovery from a locally private count matrix.

The paper's appendix ("Synthetic data experiments", their Fig. 1): a ``V x V`` count matrix
with block structure, every count released through the two-sided geometric mechanism with
``alpha = exp(-epsilon / N)`` (``N`` the empirical mean count; errata in ``docs/theory.md``: the printed
``-exp(epsilon / N)`` is a misprint) at ``epsilon in {2.5, 1, 0.75}``, and a Poisson
factorization fitted to the noisy matrix naively (noisy counts clipped at 0, as if true) and
noise-aware. Reconstruction error is the MAE of the posterior-mean rates against the *true*
counts (the metric of their Fig. 3, the topic model, and Fig. 4, the network; their
Fig. 1 shows this experiment as heat maps, fitted there with the mixed-membership block model
that ``benchmarks/study_schein_fig1.py`` reproduces).

What differs from the paper (stated in the report this script writes):

* the truth is :func:`pymc_dp.examples.poisson_factorization.simulate` with ``block=True``
  (diagonal blocks plus sparse off-block additions): the paper's Gamma(0.01, 0.5) draws give
  an almost empty matrix (errata in ``docs/theory.md``);
* the model is the API's ``theta @ phi`` factorization (``D x K`` times ``K x V``), not the
  mixed-membership block model ``theta Pi theta^T`` of their network study;
* samplers are whatever ``pm.sample`` assigns: in the recorded run NUTS for the factors, with
  the ``CountAugmentation`` Gibbs step for the true counts ("augmented"; Schein's
  Skellam-Bessel augmentation then, the direct exact draw by default since commit 7379765),
  or NUTS on the exact Poisson-geometric marginal ("marginal"), instead of their all-Gibbs
  sampler (8,500 sweeps, every 25th after 1,000). Since commit 32187a0 (rule 5 of
  ``pymc_dp.step_methods.claims``) ``pm.sample`` gives the augmented model to the exact
  all-Gibbs step ``PoissonFactorGibbs`` (factors and true counts, no NUTS: no divergences to
  count), so a re-run measures that sampler for "augmented" and the control.

Each repeat draws a fresh truth; each (repeat, epsilon) a fresh release of that truth; every
stream comes from ``numpy.random.SeedSequence([seed, repeat, *key.encode()])`` (``key`` naming
the stream), so one repeat can be re-run alone.

Run: ``.venv/bin/python benchmarks/study_schein_synthetic.py`` (writes
``benchmarks/results/schein_synthetic.md`` and ``docs/figures/schein_synthetic_blocks.png``);
``--help`` for the sizes. The default (20 x 20, K = 4, 6 repeats, 500 tune + 500 draws, 2
chains, all four fits) takes about 20 min on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
import warnings
from pathlib import Path

import numpy as np
from _schein_common import seed as _seed

from pymc_dp.examples import poisson_factorization as pf
from pymc_dp.mechanisms.geometric import Geometric

__all__ = [
    "Config",
    "fit_rates",
    "fits_at",
    "main",
    "paired_differences",
    "plot_blocks",
    "report",
    "run_repeat",
    "run_study",
]

HERE = Path(__file__).resolve().parent
REPORT = HERE / "results" / "schein_synthetic.md"
FIGURE = HERE.parent / "docs" / "figures" / "schein_synthetic_blocks.png"
PRIVATE = ("naive", "augmented", "marginal")
AWARE = ("augmented", "marginal")


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes, sampler settings and seed of one study (defaults: the recorded run).

    Examples
    --------
    >>> Config().epsilons, Config().methods
    ((2.5, 1.0, 0.75), ('naive', 'augmented', 'marginal'))
    """

    n_rows: int = 20
    n_cols: int = 20
    n_components: int = 4
    epsilons: tuple = (2.5, 1.0, 0.75)
    repeats: int = 6
    draws: int = 500
    tune: int = 500
    chains: int = 2
    methods: tuple = PRIVATE
    seed: int = 20260925
    control_epsilons: tuple = (0.75,)
    control_factor: int = 10


def fits_at(config: Config, eps: float) -> tuple:
    """Names of the private fits at ``eps``: ``config.methods``, then ``"control"`` if run.

    ``"control"`` is the negative control: the augmented model given the wrong mechanism,
    ``alpha ** control_factor`` in place of the ``alpha`` applied (``control_factor`` times
    ``epsilon``: far less noise than there is), so it cannot remove the noise it is not told
    about and should do no better than naive.

    Examples
    --------
    >>> fits_at(Config(), 0.75), fits_at(Config(), 2.5)
    (('naive', 'augmented', 'marginal', 'control'), ('naive', 'augmented', 'marginal'))
    """
    return config.methods + (("control",) if eps in config.control_epsilons else ())


def fit_rates(counts, how: str, mechanism, config: Config, seed: int) -> dict:
    """Fit one model; its posterior-mean rates, divergences and wall time.

    Examples
    --------
    >>> import numpy as np
    >>> cfg = Config(n_rows=4, n_cols=3, n_components=1, draws=20, tune=20, chains=1)
    >>> out = fit_rates(np.array([[1, 0, 2]] * 4), "nonprivate", None, cfg, 1)
    >>> out["rates"].shape, sorted(out)
    ((4, 3), ['divergences', 'rates', 'seconds'])
    """
    t0 = time.perf_counter()
    model = pf.build_model(counts, config.n_components, how=how, mechanism=mechanism)
    idata = pf.fit(
        model,
        draws=config.draws,
        tune=config.tune,
        chains=config.chains,
        random_seed=seed,
        compute_convergence_checks=False,
    )
    stats = idata["sample_stats"]
    # no NUTS, no divergences: pm.sample gives the augmented model to PoissonFactorGibbs
    divergences = int(stats["diverging"].values.sum()) if "diverging" in stats else 0
    rates = pf.posterior_mean_rates(idata)
    return {"rates": rates, "divergences": divergences, "seconds": time.perf_counter() - t0}


def run_repeat(config: Config, repeat: int, log=print) -> dict:
    """One truth, its non-private fit, and at each epsilon a release and the private fits.

    Returns a dict: ``"truth"`` (from ``simulate``), ``"nonprivate"`` (a :func:`fit_rates`
    result with ``"mae"``), and ``"eps"``: for each epsilon ``{"noisy", "alpha", "N", how:
    result}``.

    Examples
    --------
    >>> cfg = Config(n_rows=4, n_cols=4, n_components=1, epsilons=(1.0,), repeats=2,
    ...              draws=20, tune=20, chains=1, control_epsilons=())
    >>> res = run_repeat(cfg, 0, log=lambda line: None)
    >>> sorted(res), sorted(res["eps"][1.0])
    (['eps', 'nonprivate', 'truth'], ['N', 'alpha', 'augmented', 'marginal', 'naive', 'noisy'])
    """
    truth = pf.simulate(
        config.n_rows,
        config.n_cols,
        config.n_components,
        rng=np.random.default_rng(_seed(config, repeat, "truth")),
    )
    y = truth["counts"]
    out = {"truth": truth, "eps": {}}
    out["nonprivate"] = fit_rates(
        y, "nonprivate", None, config, _seed(config, repeat, "nonprivate")
    )
    for eps in config.epsilons:
        rng = np.random.default_rng(_seed(config, repeat, f"noise {eps}"))
        noisy, mech = pf.privatize(y, eps, rng=rng)
        row = {"noisy": noisy, "alpha": mech.alpha, "N": float(y.mean())}
        wrong = Geometric(alpha=mech.alpha**config.control_factor)
        for name in fits_at(config, eps):
            how, used = ("augmented", wrong) if name == "control" else (name, mech)
            seed = _seed(config, repeat, f"{name} {eps}")
            row[name] = fit_rates(noisy, how, used, config, seed)
            row[name]["mae"] = pf.mae(row[name]["rates"], y)
        out["eps"][eps] = row
    out["nonprivate"]["mae"] = pf.mae(out["nonprivate"]["rates"], y)
    log(_repeat_line(config, repeat, out))
    return out


def _repeat_line(config: Config, repeat: int, out: dict) -> str:
    parts = [f"repeat {repeat}: N = {out['truth']['counts'].mean():.3f}"]
    parts.append(f"nonprivate {out['nonprivate']['mae']:.4f}")
    for eps, row in out["eps"].items():
        maes = " ".join(f"{how} {row[how]['mae']:.4f}" for how in fits_at(config, eps))
        parts.append(f"eps {eps}: {maes}")
    return "; ".join(parts)


def run_study(config: Config, log=print) -> list[dict]:
    """All repeats of :func:`run_repeat`, in order.

    Examples
    --------
    >>> cfg = Config(n_rows=4, n_cols=4, n_components=1, epsilons=(1.0,), repeats=2,
    ...              draws=20, tune=20, chains=1, control_epsilons=())
    >>> len(run_study(cfg, log=lambda line: None))
    2
    """
    return [run_repeat(config, r, log=log) for r in range(config.repeats)]


def _mae_array(results: list[dict], eps: float, how: str) -> np.ndarray:
    if how == "nonprivate":
        return np.array([res["nonprivate"]["mae"] for res in results])
    if how == "oracle":  # the true rates themselves: the floor no estimate can beat on average
        return np.array([pf.mae(res["truth"]["rates"], res["truth"]["counts"]) for res in results])
    return np.array([res["eps"][eps][how]["mae"] for res in results])


def paired_differences(results: list[dict], eps: float, how: str = "augmented") -> np.ndarray:
    """Per-repeat MAE of ``how`` minus MAE of the naive fit (negative: noise-aware wins).

    Examples
    --------
    >>> res = [{"eps": {1.0: {"naive": {"mae": 1.0}, "augmented": {"mae": 0.75}}}}]
    >>> paired_differences(res, 1.0)
    array([-0.25])
    """
    return _mae_array(results, eps, how) - _mae_array(results, eps, "naive")


def _all_fits(config: Config) -> list[str]:
    names = dict.fromkeys(n for eps in config.epsilons for n in fits_at(config, eps))
    return list(names)


def _summary_table(results: list[dict], config: Config) -> list[str]:
    hows = ["oracle", "nonprivate", *_all_fits(config)]
    lines = [
        "| epsilon | alpha (mean over repeats) | " + " | ".join(hows) + " |",
        "|---" * (len(hows) + 2) + "|",
    ]
    for eps in config.epsilons:
        alpha = np.mean([res["eps"][eps]["alpha"] for res in results])
        cells = []
        for how in hows:
            if how in ("oracle", "nonprivate") or how in fits_at(config, eps):
                m = _mae_array(results, eps, how)
                cells.append(f"{m.mean():.4f} ± {m.std(ddof=1):.4f}")
            else:
                cells.append("—")
        lines.append(f"| {eps} | {alpha:.3f} | " + " | ".join(cells) + " |")
    return lines


def _difference_table(results: list[dict], config: Config) -> list[str]:
    reps = " | ".join(f"r{r}" for r in range(len(results)))
    lines = [
        f"| epsilon | fit | {reps} | mean ± sd | mean / sd | wins | MAE ratio to naive |",
        "|---" * (len(results) + 6) + "|",
    ]
    for eps in config.epsilons:
        for how in (h for h in fits_at(config, eps) if h != "naive"):
            d = paired_differences(results, eps, how)
            ratio = _mae_array(results, eps, how) / _mae_array(results, eps, "naive")
            per = " | ".join(f"{x:+.4f}" for x in d)
            lines.append(
                f"| {eps} | {how} − naive | {per} | {d.mean():+.4f} ± {d.std(ddof=1):.4f} "
                f"| {d.mean() / d.std(ddof=1):+.2f} | {int((d < 0).sum())}/{d.size} "
                f"| {ratio.mean():.3f} ± {ratio.std(ddof=1):.3f} (max {ratio.max():.3f}) |"
            )
    return lines


def _diagnostics_table(results: list[dict], config: Config) -> list[str]:
    lines = ["| fit | median seconds per fit | total divergences |", "|---|---|---|"]
    for how in ["nonprivate", *_all_fits(config)]:
        if how == "nonprivate":
            fits = [res["nonprivate"] for res in results]
        else:
            eps_run = [e for e in config.epsilons if how in fits_at(config, e)]
            fits = [res["eps"][e][how] for res in results for e in eps_run]
        secs = np.median([f["seconds"] for f in fits])
        divs = sum(f["divergences"] for f in fits)
        lines.append(f"| {how} | {secs:.1f} | {divs} (of {len(fits)} fits) |")
    return lines


def _verdict(results: list[dict], config: Config) -> list[str]:
    lines = []
    for eps in config.epsilons:
        for how in (h for h in fits_at(config, eps) if h != "naive"):
            d = paired_differences(results, eps, how)
            below = _mae_array(results, eps, how).mean() < _mae_array(results, eps, "naive").mean()
            lines.append(
                f"- epsilon = {eps}, {how}: mean MAE below naive: {'yes' if below else 'NO'}; "
                f"below naive in {int((d < 0).sum())} of {d.size} repeats."
            )
    return lines


def _setting(config: Config) -> list[str]:
    c = config
    return [
        f"- Matrix {c.n_rows} x {c.n_cols}, K = {c.n_components} components; model "
        "`y_dv ~ Poisson((theta @ phi)_dv)`, `theta_dk, phi_kv ~ Gamma(shape 0.1, rate 1)` "
        "(the paper's a0 = 0.1, b0 = 1; `build_model` defaults).",
        "- Truth: `pf.simulate(..., block=True)`: rows and columns cut into K contiguous "
        "blocks; a factor in its own block is Gamma(shape 4, mean 2) (diagonal-block rates "
        "mean 4); every other factor entry is 0 except, with probability 0.1, an "
        "Exponential(mean 0.5) addition (sparse off-block rates, mean about 0.2). The paper's "
        "Gamma(0.01, 0.5) truth gives an almost empty matrix (docs/theory.md errata), so this "
        "block-structured truth with sparse additions replaces it.",
        f"- Release: `pf.privatize(y, epsilon)`: two-sided geometric noise with alpha = "
        f"exp(-epsilon / N), N the empirical mean of the true counts (docs/theory.md errata), "
        f"epsilon in {{{', '.join(str(e) for e in c.epsilons)}}}; the same truth is released "
        "at every epsilon within a repeat.",
        "- Fits (`pf.fit`, plain `pm.sample`): nonprivate (Poisson on the true counts), naive "
        "(Poisson on the noisy counts clipped at 0), augmented (Privatized, "
        "marginalize=False: the steps pm.sample assigns, PoissonFactorGibbs for theta, phi and "
        "the true counts since commit 32187a0, NUTS + CountAugmentation before), "
        "marginal (Privatized, marginalize=True: NUTS on the exact marginal). Fits run: "
        f"{', '.join(c.methods)} at every epsilon, nonprivate once per repeat, and the "
        f"negative control at epsilon in {{{', '.join(str(e) for e in c.control_epsilons)}}}: "
        f"the augmented model given Geometric(alpha ** {c.control_factor}) (the release's "
        f"epsilon times {c.control_factor}, far less noise than was applied).",
        f"- Sampler: {c.tune} tune + {c.draws} draws, {c.chains} chains, PyMC defaults "
        "otherwise (target_accept 0.8; convergence checks off).",
        "- Estimate: posterior mean of theta @ phi over all draws (`pf.posterior_mean_rates`); "
        "error: MAE against the true counts (`pf.mae`), the metric of the paper's Figs. 3 and 4 "
        "(the synthetic experiment itself is their Fig. 1). 'oracle' is "
        "the MAE of the true rates themselves.",
        f"- Repeats: {c.repeats}; seeds: stream `key` of a repeat (truth, the release at "
        f"each epsilon, each fit) is "
        f"`numpy.random.SeedSequence([{c.seed}, repeat, *key.encode()])`.",
    ]


def report(results: list[dict], config: Config, seconds: float) -> str:
    """The markdown report of a study (setting, tables, verdict); ``seconds``: its wall time.

    Examples
    --------
    >>> cfg = Config(n_rows=4, n_cols=4, n_components=1, epsilons=(1.0,), repeats=2,
    ...              draws=20, tune=20, chains=1, control_epsilons=())
    >>> text = report(run_study(cfg, log=lambda line: None), cfg, 60.0)
    >>> text.splitlines()[0]
    '# Schein et al. (2019) synthetic experiment, reproduced'
    """
    lines = [
        "# Schein et al. (2019) synthetic experiment, reproduced",
        "",
        "Written by `benchmarks/study_schein_synthetic.py` (one run); figure: "
        "`docs/figures/schein_synthetic_blocks.png` (repeat 0).",
        "",
        "## Setting",
        "",
        *_setting(config),
        f"- Wall time of the whole study: {seconds / 60:.1f} min on the shared 2-core machine.",
        "",
        "## MAE against the true counts (mean ± sd over repeats)",
        "",
        *_summary_table(results, config),
        "",
        "## Paired differences, noise-aware minus naive, per repeat (negative: noise-aware wins)",
        "",
        *_difference_table(results, config),
        "",
        "## Verdict",
        "",
        *_verdict(results, config),
        "",
        "## Sampler diagnostics",
        "",
        *_diagnostics_table(results, config),
        "",
    ]
    return "\n".join(lines)


def _panel(ax, values, title: str, **imshow):
    im = ax.imshow(values, interpolation="nearest", **imshow)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return im


def plot_blocks(result: dict, config: Config, path: Path) -> None:
    """Their Fig. 1 for one repeat: rows = epsilon; columns = noisy data, naive, noise-aware
    (augmented, and marginal if run), non-private and the true rates, estimates titled with
    their MAE. Rates share one square-root colour scale (so sparse off-block rates show); the
    noisy counts' diverging scale is clipped at the 99th percentile of their magnitude.

    Examples
    --------
    >>> import tempfile
    >>> cfg = Config(n_rows=4, n_cols=4, n_components=1, epsilons=(1.0,), repeats=2,
    ...              draws=20, tune=20, chains=1, control_epsilons=())
    >>> path = Path(tempfile.mkdtemp()) / "blocks.png"
    >>> plot_blocks(run_repeat(cfg, 0, log=lambda line: None), cfg, path)
    >>> path.stat().st_size > 0
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import PowerNorm

    truth, nonp = result["truth"], result["nonprivate"]
    # noisy-count colours clipped at the 99th percentile of |noisy| (a few cells are far out)
    noisy = np.stack([r["noisy"] for r in result["eps"].values()])
    nmax = float(np.percentile(np.abs(noisy), 99))
    rate_kw = {"cmap": "viridis", "norm": PowerNorm(0.5, 0.0, float(np.max(truth["rates"])))}
    shown = [("naive", "naive"), ("augmented", "noise-aware (augmented)")]
    shown += [("marginal", "noise-aware (marginal)")] if "marginal" in config.methods else []
    n, m = len(config.epsilons), len(shown) + 3
    fig, axes = plt.subplots(n, m, figsize=(2.3 * m + 1.0, 2.6 * n + 0.6), layout="constrained")
    axes = np.atleast_2d(axes)
    for ax, eps in zip(axes, config.epsilons, strict=True):
        row = result["eps"][eps]
        im_n = _panel(ax[0], row["noisy"], "noisy data", cmap="RdBu_r", vmin=-nmax, vmax=nmax)
        ax[0].set_ylabel(f"ε = {eps}, α = {row['alpha']:.2f}", fontsize=10)
        for a, (how, name) in zip(ax[1:], shown, strict=False):
            _panel(a, row[how]["rates"], f"{name}\nMAE {row[how]['mae']:.3f}", **rate_kw)
        _panel(ax[-2], nonp["rates"], f"non-private\nMAE {nonp['mae']:.3f}", **rate_kw)
        im_r = _panel(ax[-1], truth["rates"], "true rates", **rate_kw)
    fig.colorbar(
        im_n, ax=axes[:, 0], location="left", shrink=0.7, extend="both", label="noisy count"
    )
    fig.colorbar(im_r, ax=axes[:, 1:], shrink=0.7, label="rate (square-root scale)")
    fig.suptitle(
        f"Block recovery from geometric-noised counts ({config.n_rows} x {config.n_cols}, "
        f"K = {config.n_components}, repeat 0); MAE of the posterior-mean rates against the "
        "true counts",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parse(argv) -> tuple[Config, argparse.Namespace]:
    d = Config()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, nargs=2, default=(d.n_rows, d.n_cols))
    p.add_argument("--components", type=int, default=d.n_components)
    p.add_argument("--repeats", type=int, default=d.repeats)
    p.add_argument("--draws", type=int, default=d.draws)
    p.add_argument("--tune", type=int, default=d.tune)
    p.add_argument("--epsilons", type=float, nargs="+", default=d.epsilons)
    p.add_argument("--methods", nargs="+", default=d.methods, choices=PRIVATE)
    p.add_argument("--control-epsilons", type=float, nargs="*", default=d.control_epsilons)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--report", type=Path, default=REPORT)
    p.add_argument("--figure", type=Path, default=FIGURE)
    p.add_argument(
        "--figure-only",
        action="store_true",
        help="run repeat 0 only (same seeds) and redraw the figure; the report is not written",
    )
    a = p.parse_args(argv)
    config = Config(
        n_rows=a.size[0],
        n_cols=a.size[1],
        n_components=a.components,
        epsilons=tuple(a.epsilons),
        repeats=a.repeats,
        draws=a.draws,
        tune=a.tune,
        methods=tuple(dict.fromkeys(["naive", "augmented", *a.methods])),
        seed=a.seed,
        control_epsilons=()
        if a.figure_only
        else tuple(e for e in a.control_epsilons if e in a.epsilons),
    )
    return config, a


def main(argv=None) -> list[dict]:
    """Run the study, print the tables, write the report and the figure (of repeat 0).

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> argv = ["--size", "4", "4", "--components", "1", "--repeats", "2", "--draws", "20",
    ...         "--tune", "20", "--epsilons", "1.0", "--control-epsilons",
    ...         "--report", str(out / "r.md"), "--figure", str(out / "f.png")]
    >>> _ = main(argv)  # doctest: +ELLIPSIS
    repeat 0: ...
    >>> sorted(f.name for f in out.iterdir())
    ['f.png', 'r.md']
    """
    config, args = _parse(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyMC's sampling notes (short chains, divergences)
        if args.figure_only:
            results = [run_repeat(config, 0, log=lambda s: print(s, flush=True))]
        else:
            results = run_study(config, log=lambda s: print(s, flush=True))
    if not args.figure_only:
        text = report(results, config, time.perf_counter() - t0)
        print(text)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text)
    plot_blocks(results[0], config, args.figure)
    return results


if __name__ == "__main__":
    main()
