"""Zhang et al. (2016) Fig. 1: Bayesian naive Bayes accuracy against the privacy budget, paired.

Setting (Zhang et al., "Bayesian Discrete Naive Bayes"): a binary class ``y`` and 16 binary
features ``x_i`` whose only parent is ``y`` (``|I| = 17`` nodes), uniform Beta (Dirichlet(1, 1))
priors, 1000 synthetic examples per repeat of which 50 train and the other 950 test; the
classifier thresholds the predictive ``P(y = 1 | x)`` at 1/2; accuracy is averaged over
repeats (each with a fresh dataset, split and mechanism noise).

Data (ours; Zhang et al. do not state theirs), two settings:

* ``fixed``: ``y ~ Bernoulli(1/2)``; feature ``i`` has ``P(x_i = 1 | y) = 1/2 + s_i d_i (2y - 1)``
  with ``d_i`` evenly spaced from 0.05 to 0.30 and ``s_i = +1, -1, +1, ...``;
* ``prior``: per repeat, ``P(y = 1)`` and every ``P(x_i = 1 | y = j)`` drawn from the model's
  own uniform prior (so the noise-aware posterior is the exact Bayes rule on average).

Methods. **Paired**: in a repeat every method sees the same dataset and split, and the
noise-aware posterior uses the very release the Laplace plug-in uses; every method has the same
number of repeats. All private methods are epsilon-DP for the training set (replace-one):

* non-private: Dirichlet posterior ``1 + counts``, predictive from the posterior means;
* Laplace (Alg. 1): ``release_bayes_net_counts`` with ``Laplace(epsilon)`` at L1 sensitivity
  ``2|I| = 34`` (Lemma 1), clipped to ``[0, n]``, plug-in posterior means;
* Fourier (Alg. 2): ``release_bayes_net_fourier`` with ``Laplace(epsilon)`` (the paper's noise;
  ``allow_float=True`` for this simulation) at the exact sensitivity ``2d = 32`` parity counts
  (Corollary 2's calibration ``|N_I| = 34`` is an upper bound), the consistent tables truncated
  to ``[0, n]``, plug-in posterior means;
* Fourier + shift: the same Fourier release with Corollary 3's increment at ``t = ln 10``
  (non-negative with probability >= 0.9, the paper's "stealth 90% of the time"): every cell of
  a feature table grows by ``t |N_I|^2 / epsilon = 2662 / epsilon`` (against counts <= 50);
* sampler (Thm. 4 part 1, record-level calibration): one draw of the posterior with every
  conditional probability trimmed to ``[p0, 1 - p0]``, ``p0 = 1 / (1 + exp(epsilon / (2|I|)))``,
  so one draw is epsilon-DP at temperature 1 (``OnePosteriorSample``; see the errata);
* noise-aware (pymc_dp): the exact posterior predictive of ``BayesNetCountsRelease.model()``
  given the Laplace release, from the enumeration of the kernel ``CollapsedNaiveBayes`` runs
  (``NaiveBayesPosterior`` on the cells' Laplace log-likelihoods): a finite mixture over the
  class counts of products of exact Dirichlet means, so no Monte Carlo error (an earlier
  version averaged 100 posterior draws: at epsilon <= 0.3 the draws' spread swamped the
  predictive's small departures from 1/2 and cost up to 0.05 of accuracy). The step
  ``pm.sample`` assigns to that model is reported with ``--check-step``.

Writes ``benchmarks/results/zhang_fig1.md`` and ``docs/figures/zhang_fig1.png``.
Usage: ``.venv/bin/python benchmarks/study_zhang_fig1.py [--repeats 200] [--check-step]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import platform
import time
from pathlib import Path

import numpy as np

from pymc_dp.kernels.collapsed_bn import NaiveBayesPosterior
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases.bayes_net import (
    DiscreteBayesNet,
    bayes_net_count_tables,
    release_bayes_net_counts,
)
from pymc_dp.releases.bayes_net_fourier import release_bayes_net_fourier
from pymc_dp.releases.ops import (
    OnePosteriorSample,
    beta_bernoulli_log_likelihood_range,
    truncated_beta_rvs,
)
from pymc_dp.step_methods.collapsed_bn import cell_loglik

__all__ = [
    "EPSILONS",
    "METHODS",
    "SETTINGS",
    "accuracy",
    "feature_probabilities",
    "main",
    "naive_bayes_network",
    "noise_aware_cpts",
    "one_repeat",
    "run",
    "sampler_cpts",
    "synthesize",
]

D = 16
N_TOTAL, N_TRAIN = 1000, 50
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
METHODS = (
    "non-private",
    "Laplace (Alg. 1)",
    "Fourier (Alg. 2)",
    "Fourier + shift",
    "sampler",
    "noise-aware",
)
SETTINGS = ("fixed", "prior")
SHIFT_T = math.log(10.0)
ROOT = Path(__file__).resolve().parents[1]


def naive_bayes_network(d: int = D) -> DiscreteBayesNet:
    """``y -> x0, ..., x{d-1}``, all binary; column 0 of the records is ``y``."""
    feats = [f"x{i}" for i in range(d)]
    return DiscreteBayesNet({"y": 2, **dict.fromkeys(feats, 2)}, dict.fromkeys(feats, ("y",)))


def feature_probabilities(d: int = D) -> np.ndarray:
    """``q[i, y] = P(x_i = 1 | y)`` of the ``fixed`` setting (module docstring)."""
    dev = np.linspace(0.05, 0.30, d) * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    return np.stack([0.5 - dev, 0.5 + dev], axis=1)


def synthesize(rng, n: int = N_TOTAL, d: int = D, setting: str = "fixed") -> np.ndarray:
    """``(n, 1 + d)`` records ``[y, x0, ..., x{d-1}]`` from the naive Bayes model."""
    if setting == "fixed":
        py, q = 0.5, feature_probabilities(d)
    elif setting == "prior":
        py, q = rng.random(), rng.random((d, 2))
    else:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    y = (rng.random(n) < py).astype(np.int64)
    x = (rng.random((n, d)) < q[:, y].T).astype(np.int64)
    return np.column_stack([y, x])


def accuracy(prior_y, q, test, weights=None) -> float:
    """Test accuracy of the classifier from CPTs (``S`` draws, 1 for a point estimate).

    ``prior_y`` of shape ``(S, 2)`` (``P(y)``), ``q`` of shape ``(S, d, 2)`` (``P(x_i = 1 |
    y)``): ``P(y | x)`` is the (``weights``-weighted, default equal) average over draws of the
    joint, normalised, thresholded at 1/2 (ties count as class 0).
    """
    y, x = test[:, 0], test[:, 1:].astype(np.float64)
    lq, l1q = np.log(q), np.log1p(-q)  # (S, d, 2)
    s, d = q.shape[0], q.shape[1]
    lin = (x @ np.moveaxis(lq - l1q, 1, 0).reshape(d, 2 * s)).reshape(-1, s, 2)  # (n, S, 2)
    logj = np.moveaxis(lin, 1, 0) + (np.log(prior_y) + l1q.sum(axis=1))[:, None, :]  # (S, n, 2)
    m = logj.max(axis=(0, 2), keepdims=True)
    w = np.full(s, 1.0 / s) if weights is None else np.asarray(weights, dtype=np.float64)
    joint = np.tensordot(w, np.exp(logj - m), axes=1)  # (n, 2), common factor per test point
    return float(np.mean((joint[:, 1] > joint[:, 0]) == (y == 1)))


def _means(alpha) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means of ``P(y)`` and ``P(x_i = 1 | y)`` from Dirichlet parameters."""
    py = alpha["y"] / alpha["y"].sum()
    q = np.stack([alpha[f"x{i}"][:, 1] / alpha[f"x{i}"].sum(axis=1) for i in range(D)])
    return py[None, :], q[None, :, :]


def sampler_cpts(tables, epsilon: float, rng) -> tuple[np.ndarray, np.ndarray, float]:
    """One draw of the trimmed posterior (Zhang et al.'s sampler): ``(P(y), q, epsilon spent)``.

    ``tables`` are the true count tables (``bayes_net_count_tables``) of the training set.
    """
    nodes = 1 + D
    p0 = 1.0 / (1.0 + np.exp(epsilon / (2.0 * nodes)))
    # one record: one Bernoulli term per node, each ranging over log((1 - p0)/p0) (eq. 15)
    c_net = float(np.nextafter(nodes * beta_bernoulli_log_likelihood_range(p0), np.inf))
    c = OnePosteriorSample(epsilon, log_likelihood_range=c_net)
    rows = np.vstack([tables["y"][None, :], *(tables[f"x{i}"] for i in range(D))])
    t = c.temperature
    p1 = truncated_beta_rvs(1.0 + rows[:, 1] / t, 1.0 + rows[:, 0] / t, p0, 1.0 - p0, rng=rng)
    py = np.array([1.0 - p1[0], p1[0]])
    return py[None, :], p1[1:].reshape(D, 2)[None, :, :], c.guarantee().epsilon


def noise_aware_cpts(rel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact noise-aware posterior predictive of ``rel.model(1.0)`` as a finite mixture.

    The model's posterior (the law ``CollapsedNaiveBayes``, the step ``pm.sample`` assigns to
    it, draws from) given the class counts ``c`` has independent Dirichlet rows, so the joint
    predictive ``P(y, x | release)`` is ``sum_c p(c | release) E[P(y) | c] prod_i E[P(x_i |
    y) | c_y]``, every factor a finite sum over the tables the kernel enumerates
    (``NaiveBayesPosterior``, its class-count law and its leaf-table weights). Returns
    ``(P(y) (C, 2), q (C, D, 2), weights (C,))`` for :func:`accuracy`: no Monte Carlo error.
    """
    n, mech = rel.n, rel.mechanism
    eta = {v: cell_loglik(mech, t, n).reshape(*t.shape, n + 1) for v, t in rel.tables.items()}
    post = NaiveBayesPosterior(
        n, np.ones(2), eta["y"], [np.ones((2, 2))] * D, [eta[f"x{i}"] for i in range(D)]
    )
    (grp,) = post.groups  # all leaves binary: one group, leaves in order
    mean1 = np.empty((D, 2, n + 1))  # E[P(x_i = 1 | y = j) | c_j = c, release]
    for j in range(2):
        for c in range(n + 1):
            comps, lw = grp.table_logw(j, c)  # (M, 2) tables, (D, M) log weights
            w = np.exp(lw - lw.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            mean1[:, j, c] = w @ ((1.0 + comps[:, 1]) / (2.0 + c))
    cc = post.class_counts  # (C, 2)
    py = (1.0 + cc) / (2.0 + n)
    q = np.stack([mean1[:, 0, cc[:, 0]], mean1[:, 1, cc[:, 1]]], axis=-1)  # (D, C, 2)
    return py, np.moveaxis(q, 1, 0), np.exp(post.log_prob)


def one_repeat(epsilon, rng, *, setting="fixed", noise_aware=True) -> dict:
    """One dataset, split and set of releases at ``epsilon``: ``{method: test accuracy}`` plus
    ``"fourier nonnegative"`` (whether the unshifted Fourier tables had no negative cell)."""
    data = synthesize(rng, setting=setting)
    train, test = data[:N_TRAIN], data[N_TRAIN:]
    net = naive_bayes_network()
    lap = functools.partial(Laplace, epsilon=epsilon)
    # allow_float: the paper's floating-point Laplace noise (a simulation, not a real release)
    rel = release_bayes_net_counts(train, net, mechanism=lap, rng=rng, allow_float=True)
    four_shift = release_bayes_net_fourier(
        train, net, mechanism=lap, rng=rng, allow_float=True, shift_t=SHIFT_T
    )  # Corollary 3's increment; the same release without it (post-processing):
    four = dataclasses.replace(four_shift, shift=0.0)
    tables = bayes_net_count_tables(train, net)
    nonpriv = {v: 1.0 + t.astype(np.float64) for v, t in tables.items()}
    out = {
        "non-private": accuracy(*_means(nonpriv), test),
        "Laplace (Alg. 1)": accuracy(*_means(rel.plugin_posterior(1.0)), test),
        "Fourier (Alg. 2)": accuracy(*_means(four.plugin_posterior(1.0)), test),
        "Fourier + shift": accuracy(*_means(four_shift.plugin_posterior(1.0)), test),
    }
    py, q, spent = sampler_cpts(tables, epsilon, rng)
    if not spent <= epsilon:
        raise AssertionError(f"sampler spends {spent} > epsilon {epsilon}")
    out["sampler"] = accuracy(py, q, test)
    if noise_aware:  # False skips it (quick runs)
        py_na, q_na, w_na = noise_aware_cpts(rel)
        out["noise-aware"] = accuracy(py_na, q_na, test, w_na)
    out["fourier nonnegative"] = float(four.is_nonnegative())
    return out


def _summary(v) -> tuple[float, float, int]:
    v = np.asarray(v, dtype=np.float64)
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(np.mean(v)), se, int(v.size)


def run(epsilons, repeats: int, seed: int, settings=SETTINGS, noise_aware: bool = True) -> dict:
    """``{setting: {epsilon: {method: per-repeat accuracies}}}`` (paired across methods)."""
    out = {}
    for s_idx, setting in enumerate(settings):
        out[setting] = {}
        for k, eps in enumerate(epsilons):
            acc: dict[str, list] = {}
            for r in range(repeats):
                rng = np.random.default_rng([seed, s_idx, k, r])
                for m, a in one_repeat(eps, rng, setting=setting, noise_aware=noise_aware).items():
                    acc.setdefault(m, []).append(a)
            out[setting][eps] = {m: np.asarray(v) for m, v in acc.items()}
    return out


def summarize(raw) -> dict:
    """``{setting: {epsilon: {method: (mean, se, n)}}}`` and paired differences against
    Laplace (Alg. 1): ``{setting: {epsilon: {method: (mean diff, se, z)}}}``."""
    table, diffs = {}, {}
    for setting, by_eps in raw.items():
        table[setting], diffs[setting] = {}, {}
        for eps, acc in by_eps.items():
            table[setting][eps] = {m: _summary(v) for m, v in acc.items()}
            diffs[setting][eps] = {}
            for m in (m for m in METHODS[2:] if m in acc):
                mean, se, _ = _summary(acc[m] - acc["Laplace (Alg. 1)"])
                diffs[setting][eps][m] = (mean, se, mean / se if se > 0 else float("nan"))
    return table, diffs


def check_step(seed: int) -> str:
    """The steps ``pm.sample`` assigns to the noise-aware model (fixed setting, epsilon 1)."""
    rng = np.random.default_rng(seed)
    train = synthesize(rng)[:N_TRAIN]
    rel = release_bayes_net_counts(
        train, naive_bayes_network(), mechanism=functools.partial(Laplace, epsilon=1.0),
        rng=rng, allow_float=True,
    )  # fmt: skip
    from pymc.sampling.mcmc import assign_step_methods

    with rel.model(1.0) as model:
        _, selected = assign_step_methods(model)
    return "; ".join(f"{t.__name__}: {len(v)} variables" for t, v in selected.items() if len(v))


def write_table(table, diffs, path: Path, args, seconds: float, step: str | None) -> None:
    lines = [
        "# Zhang et al. (2016) Fig. 1: Bayesian naive Bayes accuracy against epsilon (paired)",
        "",
        "Produced by `benchmarks/study_zhang_fig1.py` (setting, data and method definitions in",
        "its docstring): 16 binary features, 50 training and 950 test examples per repeat,",
        "uniform priors. Every method runs on the same datasets and splits, the noise-aware",
        "posterior on the very release the Laplace row uses, with the same number of repeats.",
        "Noise-aware: the exact posterior predictive (a finite mixture over the class counts,",
        "computed from the enumeration of `CollapsedNaiveBayes`'s kernel; no Monte Carlo error).",
        "",
    ]
    if step is not None:
        lines += [f"Step `pm.sample` assigns to `BayesNetCountsRelease.model()`: {step}", ""]
    for setting in table:
        methods = [m for m in METHODS if m in next(iter(table[setting].values()))]
        lines += [
            f"## Setting `{setting}`",
            "",
            "Mean test accuracy +- standard error over repeats (n = repeats).",
            "",
            "| epsilon | " + " | ".join(methods) + " | Fourier tables >= 0 |",
            "|---|" + "---|" * (len(methods) + 1),
        ]
        for eps, row in table[setting].items():
            cells = [f"{row[m][0]:.3f} +- {row[m][1]:.3f} (n={row[m][2]})" for m in methods]
            nonneg = row["fourier nonnegative"][0]
            lines.append(f"| {eps:g} | " + " | ".join(cells) + f" | {nonneg:.2f} |")
        lines += [
            "",
            "Paired difference against Laplace (Alg. 1), same repeats: mean +- standard error",
            "(z = mean / se; |z| > 2 marked *).",
            "",
            "| epsilon | " + " | ".join(methods[2:]) + " |",
            "|---|" + "---|" * len(methods[2:]),
        ]
        for eps, row in diffs[setting].items():
            cells = [
                f"{row[m][0]:+.4f} +- {row[m][1]:.4f} (z={row[m][2]:+.1f}){'*' * (abs(row[m][2]) > 2)}"
                for m in methods[2:]
            ]
            lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        f"Whole run {seconds:.0f} s on {platform.machine()} ({platform.python_version()}), "
        f"seed {args.seed}, {args.repeats} repeats per epsilon and setting.",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


STYLES = {
    "non-private": "k-o",
    "Laplace (Alg. 1)": "C0-s",
    "Fourier (Alg. 2)": "C4-v",
    "Fourier + shift": "C5:x",
    "sampler": "C1-^",
    "noise-aware": "C2-D",
}


def plot(table, diffs, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(table)
    fig, axes = plt.subplots(2, len(settings), figsize=(6 * len(settings), 7.5), squeeze=False)
    for c, setting in enumerate(settings):
        eps = np.array(list(table[setting]))
        ax = axes[0, c]
        methods = [m for m in METHODS if m in table[setting][eps[0]]]
        for m in methods:
            rows = [table[setting][e][m] for e in eps]
            ax.errorbar(eps, [r[0] for r in rows], yerr=[r[1] for r in rows], fmt=STYLES[m],
                        capsize=3, label=m)  # fmt: skip
        n = table[setting][eps[0]]["non-private"][2]
        ax.set_xscale("log")
        ax.set_ylim(0.3, 1.0)
        ax.set_ylabel("test accuracy")
        ax.set_title(f"parameters {setting}: {n} paired repeats (bars: 1 s.e.)", fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        ax = axes[1, c]
        ax.axhline(0.0, color="C0", lw=1)
        for m in methods[2:]:
            rows = [diffs[setting][e][m] for e in eps]
            mean, se = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
            sig = np.abs(mean) > 2 * se
            ax.errorbar(eps, mean, yerr=2 * se, fmt=STYLES[m], capsize=3, label=m, alpha=0.9)
            ax.plot(eps[~sig], mean[~sig], "o", mfc="none", mec="grey", ms=11)
        ax.set_xscale("log")
        ax.set_xlabel("privacy budget epsilon (log scale)")
        ax.set_ylabel("paired difference vs Laplace (Alg. 1)")
        ax.set_title("bars: 2 s.e.; grey ring: |difference| < 2 s.e. (not resolved)", fontsize=9)
        ax.legend(loc="lower left", fontsize=8)
    fig.suptitle("Bayesian naive Bayes, 16 features, 50 training examples (Zhang et al. Fig. 1)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    """Run the study and write the table and figure; return ``(table, diffs)``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--skip-noise-aware", action="store_true")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    ap.add_argument("--check-step", action="store_true")
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/zhang_fig1.md")
    ap.add_argument("--fig", type=Path, default=ROOT / "docs/figures/zhang_fig1.png")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    step = check_step(args.seed) if args.check_step else None
    raw = run(args.epsilons, args.repeats, args.seed, args.settings, not args.skip_noise_aware)
    table, diffs = summarize(raw)
    write_table(table, diffs, args.out, args, time.perf_counter() - t0, step)
    plot(table, diffs, args.fig)
    return table, diffs


if __name__ == "__main__":
    main()
