"""Foulds et al. (2016) Fig. 2: L1 error of one private posterior sample against N.

Setting (Fig. 2; docs/theory.md, "Errata of the papers"): Beta-Bernoulli, prior Beta(1, 1),
true p = 0.3, epsilon = 0.1, N on a log grid from 10 to 10^6; for each N and each repeat, fresh
records ``x ~ Bernoulli(0.3)^N`` and one posterior sample per method; the error is
``|theta - 0.3|`` averaged over the repeats (Foulds et al. used 1000 repeats). Methods, each
epsilon = 0.1 per dataset:

* non-private: ``theta ~ Beta(1 + s, 1 + f)``;
* Laplace (plug-in): ``release_sufficient_statistics(x, "bernoulli", mechanism=Laplace(epsilon=eps))``,
  the pair ``(s, f)`` with L1 sensitivity 2 (scale 20), clipped to ``[0, N]`` (eq. 16), then
  one draw of ``Beta(1 + s~, 1 + f~)``;
* OPS: ``OnePosteriorSample.beta_bernoulli(eps, truncation=p0)``, one exact draw of the
  tempered Beta posterior truncated to ``[p0, 1 - p0]``; the paper's truncation is not legible
  (errata), we show p0 = 0.1 (temperature 2 log 9 / 0.1 = 43.9) and p0 = 0.01 (temperature
  91.9);
* noise-aware (pymc_dp): one exact draw of the posterior of p given the *same* Laplace release
  as the plug-in, ``SufficientStatisticsRelease.sample_noise_aware_posterior`` (the success
  count enumerated over 0..N, O(N) per draw; the record-level model of ``rel.model()`` has the
  same posterior, tested in tests/releases, but at N = 10^6 data augmentation would be slow).

Also tabulated (dotted in the figure): the error of the posterior *mean* of the Laplace plug-in
posterior and of the noise-aware posterior (exact, from the enumerated count posterior), which
a released posterior allows and one OPS draw does not (Foulds et al., Remark 1).

Writes ``benchmarks/results/foulds_fig2.md`` (table) and ``docs/figures/foulds_fig2.png``.
Usage: ``.venv/bin/python benchmarks/study_foulds_fig2.py [--repeats 1000] [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time
from pathlib import Path

import numpy as np

from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases import OnePosteriorSample, release_sufficient_statistics

EPS = 0.1
P_TRUE = 0.3
PRIOR = (1.0, 1.0)
TRUNCATIONS = (0.1, 0.01)
ROOT = Path(__file__).resolve().parents[1]
METHODS = ("non-private", "Laplace (plug-in)", "OPS p0=0.1", "OPS p0=0.01", "noise-aware")
#: posterior means (not samples): what a full released posterior allows (Foulds et al. Remark 1)
MEANS = ("Laplace plug-in mean", "noise-aware mean")
COLUMNS = METHODS + MEANS


def one_repeat(n: int, rng: np.random.Generator, ops: dict) -> dict[str, float]:
    """One dataset of size ``n`` and one posterior draw per method: ``{method: theta}``."""
    x = (rng.random(n) < P_TRUE).astype(np.int64)
    s = int(x.sum())
    rel = release_sufficient_statistics(
        x,
        "bernoulli",
        mechanism=functools.partial(Laplace, epsilon=EPS),
        rng=rng,
        allow_float=True,  # the paper's floating-point Laplace noise (a simulation)
    )
    plugin = rel.plugin_posterior(PRIOR)
    w = rel.noise_aware_count_posterior(PRIOR)
    s_draw = rng.choice(n + 1, p=w)
    out = {
        "non-private": rng.beta(PRIOR[0] + s, PRIOR[1] + n - s),
        "Laplace (plug-in)": plugin.rvs(random_state=rng),
        "noise-aware": rng.beta(PRIOR[0] + s_draw, PRIOR[1] + n - s_draw),
        "Laplace plug-in mean": plugin.mean(),
        "noise-aware mean": float(w @ (PRIOR[0] + np.arange(n + 1)) / (sum(PRIOR) + n)),
    }
    for p0, o in ops.items():
        # the paper's continuous draw (the default is exact on a grid, from a secure source)
        out[f"OPS p0={p0:g}"] = o.sample(x, prior=PRIOR, rng=rng, allow_float=True)
    return out


def run(grid, repeats: int, seed: int) -> dict[int, dict[str, tuple[float, float]]]:
    """``{n: {method: (mean L1 error, its standard error)}}``."""
    rng = np.random.default_rng(seed)
    ops = {p0: OnePosteriorSample.beta_bernoulli(EPS, truncation=p0) for p0 in TRUNCATIONS}
    table = {}
    for n in grid:
        errs = {m: np.empty(repeats) for m in COLUMNS}
        for r in range(repeats):  # independent datasets (not a loop over records or draws)
            for m, theta in one_repeat(int(n), rng, ops).items():
                errs[m][r] = abs(float(theta) - P_TRUE)
        table[int(n)] = {
            m: (float(e.mean()), float(e.std(ddof=1) / np.sqrt(repeats))) for m, e in errs.items()
        }
        print(n, {m: round(v[0], 5) for m, v in table[int(n)].items()}, flush=True)
    return table


def write_table(table, path: Path, repeats: int, seconds: float) -> None:
    ops = {p0: OnePosteriorSample.beta_bernoulli(EPS, truncation=p0) for p0 in TRUNCATIONS}
    temps = ", ".join(f"p0 = {p0:g}: T = {o.temperature:.4g}" for p0, o in ops.items())
    lines = [
        "# Foulds et al. (2016) Fig. 2, reproduced: L1 error of one private posterior sample",
        "",
        f"Beta(1, 1) prior, true p = {P_TRUE}, epsilon = {EPS} per dataset, {repeats} repeats "
        "per N (fresh data, release and draw each time); mean |theta - p| with its standard "
        f"error in parentheses. OPS temperatures: {temps} (truncated to [p0, 1 - p0]). "
        "Laplace: the (successes, failures) pair, L1 sensitivity 2, scale 20, clipped to "
        "[0, N]. Noise-aware: exact posterior given the same release. The last two columns "
        "are the errors of posterior means (not samples), which a released posterior allows "
        "and one OPS draw does not. Produced by "
        f"`benchmarks/study_foulds_fig2.py` in {seconds:.0f} s on {platform.machine()} "
        f"(Python {platform.python_version()}).",
        "",
        "| N | " + " | ".join(COLUMNS) + " |",
        "|---:|" + "---:|" * len(COLUMNS),
    ]
    for n, row in table.items():
        cells = [f"{row[m][0]:.4g} ({row[m][1]:.2g})" for m in COLUMNS]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def plot(table, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = np.array(list(table))
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    styles = {"non-private": "k-", "Laplace (plug-in)": "C0-o", "OPS p0=0.1": "C3-s",
              "OPS p0=0.01": "C1--^", "noise-aware": "C2-.d",
              "Laplace plug-in mean": "C0:", "noise-aware mean": "C2:"}  # fmt: skip
    for m in COLUMNS:
        mean = np.array([table[n][m][0] for n in ns])
        se = np.array([table[n][m][1] for n in ns])
        ax.errorbar(ns, mean, yerr=2 * se, fmt=styles[m], label=m, ms=4, capsize=2)
    ax.set(xscale="log", yscale="log", xlabel="number of observations N",
           ylabel="mean |theta - p| (dotted: posterior mean)",
           title=f"Beta-Bernoulli, p = {P_TRUE}, epsilon = {EPS}")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def read_table(path: Path) -> tuple[dict, int, float]:
    """The table written by :func:`write_table` (for ``--replot``): ``(table, repeats, s)``."""
    text = path.read_text()
    repeats = int(text.split(" repeats per N")[0].rsplit(",", 1)[1])
    seconds = float(text.split("` in ")[1].split(" s on ")[0])
    table = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            vals = [c.replace(")", "").split(" (") for c in cells[1:]]
            table[int(cells[0])] = {
                m: (float(v[0]), float(v[1])) for m, v in zip(COLUMNS, vals, strict=True)
            }
    return table, repeats, seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="tiny grid, for a smoke test")
    ap.add_argument("--seed", type=int, default=20160323)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/foulds_fig2.md"))
    ap.add_argument("--fig", default=str(ROOT / "docs/figures/foulds_fig2.png"))
    ap.add_argument("--replot", action="store_true", help="redraw from the table in --out")
    args = ap.parse_args(argv)
    if args.replot:
        table, repeats, seconds = read_table(Path(args.out))
        write_table(table, Path(args.out), repeats, seconds)
        plot(table, Path(args.fig))
        return
    grid = [10, 100] if args.quick else np.unique(np.round(np.logspace(1, 6, 11)).astype(int))
    repeats = 20 if args.quick else args.repeats
    t0 = time.perf_counter()
    table = run(grid, repeats, args.seed)
    seconds = time.perf_counter() - t0
    write_table(table, Path(args.out), repeats, seconds)
    plot(table, Path(args.fig))
    print(f"done in {seconds:.0f} s: {args.out}, {args.fig}")


if __name__ == "__main__":
    main()
