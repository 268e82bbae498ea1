"""Zhang et al. (2016) Fig. 1: Bayesian naive Bayes accuracy against the privacy budget.

Setting (Zhang et al., "Bayesian Discrete Naive Bayes"): a binary class ``y`` and 16 binary
features ``x_i`` whose only parent is ``y`` (``|I| = 17`` nodes), uniform Beta (Dirichlet(1, 1))
priors, 1000 synthetic examples per repeat of which 50 train and the other 950 test; the
classifier thresholds the predictive ``P(y = 1 | x)`` at 1/2; accuracy is averaged over
repeats (each with a fresh dataset, split and mechanism noise).

Data (ours; Zhang et al. do not state theirs): ``y ~ Bernoulli(1/2)``; feature ``i = 0..15``
has ``P(x_i = 1 | y) = 1/2 + s_i d_i (2y - 1)`` with ``d_i`` evenly spaced from 0.05 to 0.30 and
``s_i = +1, -1, +1, ...`` (so half the features are more often 1 in class 0).

Methods, each epsilon-DP for the training set (replace-one neighbours) except the first:

* non-private: Dirichlet posterior ``1 + counts``, predictive from the posterior means;
* Laplace (Alg. 1): ``release_bayes_net_counts`` with ``Laplace(epsilon=epsilon)`` at the L1
  sensitivity ``2|I| = 34`` (Lemma 1), clipped to ``[0, n]``, plug-in Dirichlet posterior,
  predictive from its means;
* sampler (Zhang et al.'s posterior sampler, Thm. 4 part 1): one draw of the posterior with
  every conditional probability trimmed to ``[p0, 1 - p0]``. One record's log-likelihood then
  ranges over ``C = |I| log((1 - p0)/p0)``, and one posterior draw is ``2C``-DP (Dimitrakakis et
  al.; the exponential mechanism at temperature 1). Zhang et al. choose the trim from epsilon:
  ``p0 = 1 / (1 + exp(epsilon / (2|I|)))``, so that ``2C = epsilon``. The library's
  ``OnePosteriorSample(epsilon, log_likelihood_range=C)`` gives the temperature (1, or a hair
  above from rounding ``C`` up) and the guarantee; the draw is exact (independent truncated
  Betas, ``truncated_beta_rvs``); the classifier uses the drawn parameters;
* noise-aware (pymc_dp): ``BayesNetCountsRelease.model()`` on the *same* Laplace release,
  ``pm.sample`` (since issue 23 ``CollapsedNaiveBayes``: exact independent draws of the tables'
  Dirichlets and the 50 latent records; the figures in ``results/zhang_fig1.md`` were made
  before it, with conjugate Gibbs for the tables and data augmentation for the records),
  predictive ``P(y | x)`` averaged over the posterior draws. Fewer repeats (slow).

Writes ``benchmarks/results/zhang_fig1.md`` and ``docs/figures/zhang_fig1.png``.
Usage: ``.venv/bin/python benchmarks/study_zhang_fig1.py [--repeats 100] [--na-repeats 10]``.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time
from pathlib import Path

import numpy as np

from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases.bayes_net import DiscreteBayesNet, release_bayes_net_counts
from pymc_dp.releases.ops import (
    OnePosteriorSample,
    beta_bernoulli_log_likelihood_range,
    truncated_beta_rvs,
)

__all__ = [
    "EPSILONS",
    "METHODS",
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
METHODS = ("non-private", "Laplace (Alg. 1)", "sampler", "noise-aware")
ROOT = Path(__file__).resolve().parents[1]


def naive_bayes_network(d: int = D) -> DiscreteBayesNet:
    """``y -> x0, ..., x{d-1}``, all binary; column 0 of the records is ``y``."""
    feats = [f"x{i}" for i in range(d)]
    return DiscreteBayesNet({"y": 2, **dict.fromkeys(feats, 2)}, dict.fromkeys(feats, ("y",)))


def feature_probabilities(d: int = D) -> np.ndarray:
    """``q[i, y] = P(x_i = 1 | y)`` of the synthetic data (module docstring)."""
    dev = np.linspace(0.05, 0.30, d) * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    return np.stack([0.5 - dev, 0.5 + dev], axis=1)


def synthesize(rng: np.random.Generator, n: int = N_TOTAL, d: int = D) -> np.ndarray:
    """``(n, 1 + d)`` records ``[y, x0, ..., x{d-1}]`` from the naive Bayes model."""
    y = (rng.random(n) < 0.5).astype(np.int64)
    x = (rng.random((n, d)) < feature_probabilities(d)[:, y].T).astype(np.int64)
    return np.column_stack([y, x])


def accuracy(prior_y, q, test) -> float:
    """Test accuracy of the classifier from CPT draws.

    ``prior_y`` of shape ``(S, 2)`` (``P(y)``), ``q`` of shape ``(S, d, 2)`` (``P(x_i = 1 |
    y)``), ``S`` posterior draws (1 for a point estimate): ``P(y | x)`` is the average over draws
    of the joint ``P(y) prod_i P(x_i | y)``, normalised, thresholded at 1/2.
    """
    y, x = test[:, 0], test[:, 1:].astype(np.float64)
    lq, l1q = np.log(q), np.log1p(-q)  # (S, d, 2)
    logj = np.log(prior_y)[:, None, :] + np.einsum("nd,sdy->sny", x, lq - l1q)
    logj = logj + l1q.sum(axis=1)[:, None, :]  # (S, n, 2)
    m = logj.max(axis=(0, 2), keepdims=True)
    joint = np.exp(logj - m).mean(axis=0)  # (n, 2), common factor per test point
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
    # counts of every Bernoulli row: (y) then (x_i | y = 0), (x_i | y = 1)
    rows = np.vstack([tables["y"][None, :], *(tables[f"x{i}"] for i in range(D))])
    t = c.temperature
    p1 = truncated_beta_rvs(1.0 + rows[:, 1] / t, 1.0 + rows[:, 0] / t, p0, 1.0 - p0, rng=rng)
    py = np.array([1.0 - p1[0], p1[0]])
    return py[None, :], p1[1:].reshape(D, 2)[None, :, :], c.guarantee().epsilon


def noise_aware_cpts(rel, draws: int, tune: int, seed: int):
    """Posterior draws of ``P(y)`` and ``q`` from ``rel.model()`` and ``pm.sample``."""
    import pymc as pm

    with rel.model(1.0):
        idata = pm.sample(
            draws=draws, tune=tune, chains=2, cores=1, random_seed=seed, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    post = idata.posterior
    py = post["theta_y"].values.reshape(-1, 2)
    q = np.stack([post[f"theta_x{i}"].values[..., 1].reshape(-1, 2) for i in range(D)], axis=1)
    return py, q


def one_repeat(epsilon, rng, *, noise_aware=None) -> dict[str, float]:
    """One dataset, split and release at ``epsilon``: ``{method: test accuracy}``.

    ``noise_aware``: ``None`` (skip) or ``(draws, tune, seed)`` for :func:`noise_aware_cpts`.
    """
    from pymc_dp.releases.bayes_net import bayes_net_count_tables

    data = synthesize(rng)
    train, test = data[:N_TRAIN], data[N_TRAIN:]
    net = naive_bayes_network()
    rel = release_bayes_net_counts(
        train,
        net,
        mechanism=functools.partial(Laplace, epsilon=epsilon),
        rng=rng,
        allow_float=True,  # the paper's floating-point Laplace noise (a simulation)
    )
    tables = bayes_net_count_tables(train, net)
    nonpriv = {v: 1.0 + t.astype(np.float64) for v, t in tables.items()}
    out = {
        "non-private": accuracy(*_means(nonpriv), test),
        "Laplace (Alg. 1)": accuracy(*_means(rel.plugin_posterior(1.0)), test),
    }
    py, q, spent = sampler_cpts(tables, epsilon, rng)
    if not spent <= epsilon:
        raise AssertionError(f"sampler spends {spent} > epsilon {epsilon}")
    out["sampler"] = accuracy(py, q, test)
    if noise_aware is not None:
        out["noise-aware"] = accuracy(*noise_aware_cpts(rel, *noise_aware), test)
    return out


def _summary(v) -> tuple[float, float, int]:
    se = float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
    return float(np.mean(v)), se, len(v)


def run(epsilons, repeats: int, na_repeats: int, seed: int, na_size=(500, 300)) -> dict:
    """``{epsilon: {method: (mean accuracy, standard error, repeats)}}`` and noise-aware seconds.

    The first ``na_repeats`` repeats of each epsilon also fit the noise-aware model.
    """
    table, na_seconds = {}, []
    for k, eps in enumerate(epsilons):
        acc: dict[str, list] = {m: [] for m in METHODS}
        for r in range(repeats):
            rng = np.random.default_rng([seed, k, r])
            na = (*na_size, seed * 1000 + r) if r < na_repeats else None
            t0 = time.perf_counter()
            for m, a in one_repeat(eps, rng, noise_aware=na).items():
                acc[m].append(a)
            if na is not None:
                na_seconds.append(time.perf_counter() - t0)
        table[eps] = {m: _summary(v) for m, v in acc.items() if v}
    return table, na_seconds


def write_table(table, path: Path, na_seconds, args, seconds: float) -> None:
    lines = [
        "# Zhang et al. (2016) Fig. 1: Bayesian naive Bayes accuracy against epsilon",
        "",
        "Produced by `benchmarks/study_zhang_fig1.py` (setting and method definitions in its",
        "docstring): 16 binary features, 50 training and 950 test examples per repeat, uniform",
        "priors, Laplace at L1 sensitivity 2|I| = 34; the sampler trims to",
        "p0 = 1/(1 + exp(eps/34)) (so one draw is eps-DP at temperature 1); the noise-aware",
        "posterior fits `BayesNetCountsRelease.model()` to the same release as the Laplace row,",
        f"with `pm.sample` ({args.na_draws} draws + {args.na_tune} tune, 2 chains).",
        "",
        "Entries: mean test accuracy +- standard error over repeats (n = repeats).",
        "",
        "| epsilon | " + " | ".join(METHODS) + " |",
        "|---|" + "---|" * len(METHODS),
    ]
    for eps, row in table.items():
        cells = [
            f"{row[m][0]:.3f} +- {row[m][1]:.3f} (n={row[m][2]})" if m in row else "-"
            for m in METHODS
        ]
        lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    na = np.asarray(na_seconds)
    cost = f"{na.mean():.1f} s per fit (min {na.min():.1f}, max {na.max():.1f})" if na.size else "-"
    lines += [
        "",
        f"Noise-aware cost: {cost}, {na.size} fits. Whole run {seconds:.0f} s on "
        f"{platform.machine()} ({platform.python_version()}), seed {args.seed}.",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def plot(table, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = np.array(list(table))
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, style in zip(METHODS, ("k-o", "C0-s", "C1-^", "C2-D"), strict=True):
        rows = [table[e].get(m) for e in eps]
        if any(r is None for r in rows):
            continue
        mean = np.array([r[0] for r in rows])
        se = np.array([r[1] for r in rows])
        ax.errorbar(eps, mean, yerr=se, fmt=style, capsize=3, label=m)
    ax.set_xscale("log")
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("privacy budget epsilon (log scale)")
    ax.set_ylabel("test accuracy")
    ax.set_title("Bayesian naive Bayes, 16 features, 50 training examples")
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    """Run the study and write the table and figure; return the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--na-repeats", type=int, default=10)
    ap.add_argument("--na-draws", type=int, default=500)
    ap.add_argument("--na-tune", type=int, default=300)
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/zhang_fig1.md")
    ap.add_argument("--fig", type=Path, default=ROOT / "docs/figures/zhang_fig1.png")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table, na_seconds = run(
        args.epsilons, args.repeats, args.na_repeats, args.seed, (args.na_draws, args.na_tune)
    )
    write_table(table, args.out, na_seconds, args, time.perf_counter() - t0)
    plot(table, args.fig)
    return table


if __name__ == "__main__":
    main()
