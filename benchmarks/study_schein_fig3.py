"""Schein et al. (2019) Fig. 3: topic model (LDA as Poisson factorization) from a private corpus.

Fig. 3 of the paper: a document-by-term count matrix (Enron emails, D = V = 10,000, K = 50)
released with two-sided geometric noise at ``epsilon / N in {3, 2, 1}`` (``alpha =
exp(-epsilon / N)``, errata in ``docs/theory.md``), fitted by Poisson factorization ``y_dv ~
Poisson(sum_k theta_dk phi_kv)``, ``Gamma(0.1, 1)`` priors, three ways: non-private (true
counts), naive (release clipped at 0) and noise-aware. Metrics: MAE of the posterior-mean
rates against the true counts; NPMI (Lau et al. 2014) and coherence (Mimno et al. 2011) of
the top 10 words of each sampled topic ``phi_k``, with the true data as the reference corpus,
averaged over samples and topics.

This study: the Enron matrix is not available offline, so the corpus is **generated** with the
same shape at a small size: an LDA corpus of ``D`` documents over ``V`` word types from
``K_true`` topics (topics ``Dirichlet(0.05)`` over the vocabulary, document proportions
``Dirichlet(0.2)``, lengths ``50 + Poisson(30)`` tokens: the paper kept emails with at least 50
tokens). Models: :mod:`pymc_dp.examples.poisson_factorization` (``"nonprivate"``,
``"naive"``, ``"augmented"``), all sampled by the library's exact all-Gibbs steps
(:class:`~pymc_dp.PoissonFactorGibbs`, with :class:`~pymc_dp.CountAugmentation`'s draw of the
true counts inside it for the noise-aware fit). Every method sees the same corpus and, per
(repeat, privacy level), the same release (paired).

Run: ``.venv/bin/python benchmarks/study_schein_fig3.py`` (writes
``benchmarks/results/schein_fig3.md`` and ``docs/figures/schein_fig3.png``); ``--help``.
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

from pymc_dp.examples import poisson_factorization as pf

__all__ = [
    "Config",
    "coherence",
    "generate_corpus",
    "main",
    "npmi",
    "plot",
    "report",
    "run_study",
    "topic_scores",
]

HERE = Path(__file__).resolve().parent
REPORT = HERE / "results" / "schein_fig3.md"
FIGURE = HERE.parent / "docs" / "figures" / "schein_fig3.png"


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes, sampler settings and seed (defaults: the recorded run).

    Examples
    --------
    >>> Config().levels
    (3.0, 2.0, 1.0)
    """

    n_docs: int = 150
    n_words: int = 200
    true_topics: int = 8
    n_topics: int = 8
    levels: tuple = (3.0, 2.0, 1.0)  # epsilon / N
    repeats: int = 5
    tune: int = 100
    draws: int = 100
    n_scans: int = 5
    top: int = 10
    samples: int = 20  # thinned posterior samples scored for NPMI / coherence
    seed: int = 20261128


def generate_corpus(config: Config, rng) -> np.ndarray:
    """An LDA corpus, ``(n_docs, n_words)`` int64 counts (module docstring).

    Examples
    --------
    >>> y = generate_corpus(Config(n_docs=5, n_words=30), np.random.default_rng(0))
    >>> y.shape, bool((y.sum(axis=1) >= 50).all())
    ((5, 30), True)
    """
    topics = rng.dirichlet(np.full(config.n_words, 0.05), size=config.true_topics)
    props = rng.dirichlet(np.full(config.true_topics, 0.2), size=config.n_docs)
    lengths = 50 + rng.poisson(30, size=config.n_docs)
    word_probs = props @ topics
    word_probs /= word_probs.sum(axis=1, keepdims=True)
    return np.stack([rng.multinomial(n, p) for n, p in zip(lengths, word_probs, strict=True)])


def _doc_freq(reference):
    present = (np.asarray(reference) > 0).astype(np.float64)
    return present.sum(axis=0), present.T @ present, present.shape[0]


def coherence(top_words, reference) -> float:
    """Mimno et al. (2011) coherence of one topic's ordered top words against a reference
    corpus (documents x words counts): ``sum_{m >= 2} sum_{l < m} log((D(w_m, w_l) + 1) /
    D(w_l))`` with ``D`` document frequencies (a word absent from the reference has ``D =
    0``: that term uses ``D = 1``, so the score stays finite).

    Examples
    --------
    >>> ref = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]])
    >>> round(coherence([0, 1], ref), 6) == round(float(np.log((1 + 1) / 2)), 6)
    True
    """
    single, joint, _ = _doc_freq(reference)
    w = list(top_words)
    total = 0.0
    for m in range(1, len(w)):
        for el in range(m):
            total += np.log((joint[w[m], w[el]] + 1.0) / max(single[w[el]], 1.0))
    return float(total)


def npmi(top_words, reference) -> float:
    """Mean normalised PMI (Lau et al. 2014) over the pairs of top words, document
    co-occurrence in the reference corpus: ``log(P(a, b) / (P(a) P(b))) / -log P(a, b)``,
    ``-1`` for a pair that never co-occurs.

    Examples
    --------
    >>> ref = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 1]])
    >>> npmi([0, 1], ref)  # always together
    1.0
    """
    single, joint, n = _doc_freq(reference)
    w = list(top_words)
    vals = []
    for a in range(len(w)):
        for b in range(a + 1, len(w)):
            pab = joint[w[a], w[b]] / n
            if pab <= 0:
                vals.append(-1.0)
                continue
            pa, pb = single[w[a]] / n, single[w[b]] / n
            vals.append(1.0 if pab >= 1.0 else np.log(pab / (pa * pb)) / -np.log(pab))
    return float(np.mean(vals))


def topic_scores(phi_samples, reference, top=10) -> tuple[float, float]:
    """Mean NPMI and mean coherence over samples and topics of ``phi_samples`` ``(S, K, V)``.

    Examples
    --------
    >>> ref = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1]])
    >>> topic_scores(np.array([[[3.0, 2.0, 0.0]]]), ref, top=2)[0]
    1.0
    """
    phi = np.asarray(phi_samples)
    tops = np.argsort(-phi, axis=-1, kind="stable")[..., :top]
    n_vals, c_vals = [], []
    for sample in tops:
        for words in sample:
            n_vals.append(npmi(words, reference))
            c_vals.append(coherence(words, reference))
    return float(np.mean(n_vals)), float(np.mean(c_vals))


def _fit(counts, how, mechanism, config, seed, reference) -> dict:
    import pymc as pm

    from pymc_dp import PoissonFactorGibbs

    model = pf.build_model(counts, config.n_topics, how=how, mechanism=mechanism)
    names = ["theta", "phi"] + (["y_true"] if how == "augmented" else [])
    t0 = time.perf_counter()
    with model:
        step = PoissonFactorGibbs([model[v] for v in names], n_scans=config.n_scans)
        idata = pm.sample(
            draws=config.draws,
            tune=config.tune,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            step=[step],
        )
    seconds = time.perf_counter() - t0
    rates = pf.posterior_mean_rates(idata)
    phi = np.asarray(idata.posterior["phi"].values).reshape(-1, config.n_topics, counts.shape[1])
    keep = np.linspace(0, phi.shape[0] - 1, config.samples).round().astype(int)
    n, c = topic_scores(phi[keep], reference, config.top)
    return {"mae": pf.mae(rates, reference), "npmi": n, "coherence": c, "seconds": seconds}


def run_study(config: Config, log=print) -> dict:
    """One corpus; per repeat a non-private fit and, per level, one release fitted naively
    and noise-aware.

    Examples
    --------
    >>> cfg = Config(n_docs=6, n_words=12, true_topics=2, n_topics=2, levels=(1.0,),
    ...              repeats=1, tune=5, draws=5, n_scans=1, samples=2, top=3)
    >>> out = run_study(cfg, log=lambda line: None)
    >>> sorted(out["fits"][0][1.0])
    ['aware', 'naive', 'nonprivate']
    """
    y = generate_corpus(config, np.random.default_rng(_seed(config, 0, "corpus")))
    fits, alphas = [], {}
    for r in range(config.repeats):
        t0 = time.perf_counter()
        np_fit = _fit(y, "nonprivate", None, config, _seed(config, r, "nonprivate"), y)
        row = {}
        for level in config.levels:
            rng = np.random.default_rng(_seed(config, r, f"noise {level}"))
            noisy, mech = pf.privatize(y, level, rng=rng, relative_to_mean=False)
            alphas[level] = mech.alpha
            row[level] = {"nonprivate": np_fit}
            for how, name in (("naive", "naive"), ("augmented", "aware")):
                seed = _seed(config, r, f"{name} {level}")
                row[level][name] = _fit(noisy, how, mech, config, seed, y)
        fits.append(row)
        log(
            f"repeat {r} ({time.perf_counter() - t0:.0f} s): "
            + "; ".join(
                f"{lv}: " + " ".join(f"{h} {row[lv][h]['mae']:.3f}" for h in METHODS)
                for lv in config.levels
            )
        )
    return {"corpus": y, "fits": fits, "alphas": alphas}


def _arr(out, level, how, metric):
    return np.array([row[level][how][metric] for row in out["fits"]])


def _table(out, config, metric) -> list[str]:
    head = (
        "| epsilon / N | alpha | nonprivate | naive | aware | aware − naive | aware − nonprivate |"
    )
    lines = [head, "|---" * 7 + "|"]
    for lv in config.levels:
        m = {h: _arr(out, lv, h, metric) for h in METHODS}

        def cell(x):
            return f"{x.mean():.4f} ± {se(x):.4f}"

        d1, d2 = m["aware"] - m["naive"], m["aware"] - m["nonprivate"]
        lines.append(
            f"| {lv} | {out['alphas'][lv]:.3f} | {cell(m['nonprivate'])} | {cell(m['naive'])} | "
            f"{cell(m['aware'])} | {cell(d1)} | {cell(d2)} |"
        )
    return lines


def _verdict(out, level, metric) -> int:
    """+1 if the paired 95% t interval of aware − naive lies on the better side of 0, -1 on the
    worse side, 0 if it holds 0."""
    d = _arr(out, level, "aware", metric) - _arr(out, level, "naive", metric)
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    if abs(d.mean()) <= half:
        return 0
    better = d.mean() < 0 if metric == "mae" else d.mean() > 0
    return 1 if better else -1


def plot(out, config, path: Path = FIGURE) -> Path:
    """Three panels as the paper's Fig. 3 (MAE, NPMI, coherence against the privacy level),
    mean ± SE over repeats.

    Examples
    --------
    >>> callable(plot)
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    n = len(out["fits"])
    x = np.arange(len(config.levels))
    for ax, metric, better in zip(
        axes, ("mae", "npmi", "coherence"), ("lower", "higher", "higher"), strict=True
    ):
        for k, how in enumerate(METHODS):
            vals = [_arr(out, lv, how, metric) for lv in config.levels]
            mean = [v.mean() for v in vals]
            se = [v.std(ddof=1) / np.sqrt(n) for v in vals]
            ax.errorbar(x + (k - 1) * 0.08, mean, yerr=se, marker="o", capsize=3, label=how)
        ax.set_xticks(x, [f"eps/N = {lv:g}" for lv in config.levels])
        v = [_verdict(out, lv, metric) for lv in config.levels]
        ax.set_title(
            f"{metric.upper() if metric != 'coherence' else 'coherence'} ({better} is better)\n"
            f"aware vs naive, paired 95%, of {len(v)} levels:\n"
            f"better at {v.count(1)}, worse at {v.count(-1)}, unresolved at {v.count(0)}",
            fontsize=9,
        )
    axes[0].legend()
    fig.suptitle(
        f"Generated LDA corpus {config.n_docs} x {config.n_words}, K = {config.n_topics}; "
        f"mean ± SE over {n} paired releases (differences and their intervals: "
        "benchmarks/results/schein_fig3.md)",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _verdicts(out, config) -> list[str]:
    lines = []
    n = len(out["fits"])
    for metric, sign in (("mae", -1), ("npmi", 1), ("coherence", 1)):
        for lv in config.levels:
            for other in ("naive", "nonprivate"):
                d = _arr(out, lv, "aware", metric) - _arr(out, lv, other, metric)
                _, lo, hi = paired_interval(d)
                if lo * hi > 0:  # the interval excludes 0
                    word = "aware better" if sign * d.mean() > 0 else "aware WORSE"
                else:
                    word = "no difference resolved (the interval holds 0)"
                lines.append(
                    f"- {metric}, epsilon/N = {lv}, aware − {other}: {d.mean():+.4f}, 95% "
                    f"interval [{lo:+.4f}, {hi:+.4f}] (t_{n - 1}, paired): {word}."
                )
    return lines


def report(out, config, seconds) -> str:
    """The results file's text.

    Examples
    --------
    >>> callable(report)
    True
    """
    c = config
    y = out["corpus"]
    secs = np.median([f[h]["seconds"] for row in out["fits"] for f in row.values() for h in f])
    return "\n".join(
        [
            "# Schein et al. (2019) Fig. 3: topics from a locally private corpus",
            "",
            "Written by `benchmarks/study_schein_fig3.py` (one run); figure: "
            "`docs/figures/schein_fig3.png`.",
            "",
            "## Setting",
            "",
            f"- Corpus: **generated** (the Enron matrix is not available offline): LDA with "
            f"{c.true_topics} topics, Dirichlet(0.05) topics over {c.n_words} word types, "
            f"Dirichlet(0.2) document proportions, {c.n_docs} documents of 50 + Poisson(30) "
            f"tokens ({int(y.sum())} tokens, {np.mean(y > 0):.1%} non-zero cells, mean count "
            f"{y.mean():.3f}). The paper: 10,000 Enron emails x 10,000 word types, K = 50.",
            f"- Model: Poisson factorization with K = {c.n_topics}, Gamma(0.1, 1) priors "
            "(`pf.build_model`), nonprivate / naive (release clipped at 0) / aware (`how="
            "'augmented'`).",
            "- Release: two-sided geometric noise on every cell, alpha = exp(-epsilon / N) at "
            f"epsilon / N in {{{', '.join(f'{lv:g}' for lv in c.levels)}}} (the paper's "
            "levels; `pf.privatize(..., relative_to_mean=False)` with epsilon / N as the "
            "per-unit level); a fresh release per (repeat, level), the same one for naive and "
            "aware; the non-private fit is repeated with a fresh seed per repeat (as the paper "
            "fits it five times).",
            f"- Sampler: `PoissonFactorGibbs` (exact all-Gibbs; for aware it also draws the true "
            f"counts exactly) under `pm.sample`, 1 chain, {c.tune} tune + {c.draws} draws, "
            f"{c.n_scans} scans per draw (the paper: 7,500 iterations, every 100th after "
            f"2,500); median {secs:.1f} s per fit; wall time {seconds / 60:.1f} min.",
            f"- Metrics: MAE of the posterior-mean rates against the true counts (all cells); "
            f"NPMI and Mimno coherence of the top {c.top} words of each topic of {c.samples} "
            "evenly spaced posterior samples of phi, the true corpus as the reference "
            "(document co-occurrence), averaged over samples and topics.",
            f"- Repeats: {len(out['fits'])}; cells are mean ± standard error over repeats; "
            "differences are paired (same release).",
            "",
            "## MAE against the true counts (lower is better)",
            "",
            *_table(out, c, "mae"),
            "",
            "## NPMI of the top words (higher is better)",
            "",
            *_table(out, c, "npmi"),
            "",
            "## Coherence (Mimno et al. 2011) of the top words (higher is better)",
            "",
            *_table(out, c, "coherence"),
            "",
            "## Verdicts (paired 95% t intervals over repeats)",
            "",
            *_verdicts(out, c),
            "",
        ]
    )


def main(argv=None) -> None:
    """Command line entry point (``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Config()
    parser.add_argument("--repeats", type=int, default=d.repeats)
    parser.add_argument("--tune", type=int, default=d.tune)
    parser.add_argument("--draws", type=int, default=d.draws)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    config = dataclasses.replace(d, repeats=args.repeats, tune=args.tune, draws=args.draws)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    out = run_study(config)
    text = report(out, config, time.perf_counter() - t0)
    print(text)
    if not args.no_write:
        REPORT.write_text(text)
        plot(out, config)


if __name__ == "__main__":
    main()
