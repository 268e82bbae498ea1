"""Private HMM on synthetic data shaped like Foulds et al.'s war-log case study (Sec. 5).

Data (synthetic; the war logs are not used). ``R`` regions x ``T`` months, ``K`` latent states,
``F`` binary features per entry. Entries per step ``N[r, t]`` log-uniform in
``[N_LO, N_HI]`` (tens to hundreds, the median of Foulds et al.'s Afghanistan data was 58).
States follow a regime change like the 2007 surge: with ``K = 2`` every region is in the "bad"
state 1 until a region-specific change month ``c_r`` (uniform over months 36..54) and in the
"good" state 0 after it; with ``K = 3`` regions move 2 -> 1 -> 0 (change months uniform over
16..34 and 40..58). On top, each step's state is replaced by a uniformly drawn one with
probability 0.03 (short excursions). Emission probabilities ``P(feature = 1 | state)`` are the
fixed table ``PHI`` below (differences 0.1-0.3 between states, like Figs. 4-5).

Release. :func:`pymc_dp.releases.hmm.release_hmm_counts` with Laplace noise, the whole
``(R, T, F)`` table epsilon-DP (L1 sensitivity F, scale F / epsilon; Foulds et al.'s epsilon / F
per feature), epsilon in {0.1, 1, 10}.

Methods (the same release for both private methods):

* non-private: the collapsed Gibbs sampler of :mod:`pymc_dp.kernels.hmm_plugin` on the true
  counts (then it is the exact Gibbs sampler of the non-private posterior);
* plug-in (Foulds et al.): ``rel.plugin_gibbs`` (noisy counts clipped to ``[0, N]``);
* noise-aware: ``rel.model(K)`` sampled by ``pm.sample`` (FFBS for the states, NUTS for the
  rest), the true counts integrated out.

Gibbs: 100 tune + 100 kept sweeps (Foulds et al.: 200 iterations, 100 burn-in), uniform random
initial states. PyMC: ``--tune``/``--draws`` (default 50/50), one chain, on the first
``--na-repeats`` data sets (default 5) and for ``K`` in ``--na-states`` (default 2 and 3). A
fit's time includes building the model, the FFBS step's dependency probes and any numba
compilation: the compiled functions do not depend on the release (it enters as ``pm.Data``),
so they are compiled once per (K, epsilon, shape) and served from numba's on-disk cache after
that; with fresh caches (a new pymc_dp version) the first fit of each K and epsilon also pays
about half a minute to a minute of compilation. Priors: Dirichlet(1)
initial states, transition rows Dirichlet with 1 off the diagonal and ``STICKY`` on it,
emissions Beta(1, 1); the same for all methods.

Scores, per method: state-recovery accuracy of the per-site posterior mode of the states
(best label permutation against the truth), and the mean absolute error of the posterior mean
emission table ``(F, K)`` under that permutation. Means over ``--repeats`` datasets with their
standard errors; wall time per fit (the shared 2-core machine's load is recorded).

Writes ``benchmarks/results/private_hmm.md``.
Usage: ``.venv/bin/python benchmarks/study_private_hmm.py [--repeats 5] [--states 2 3]``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from pymc_dp.kernels.hmm_plugin import PluginPrior, plugin_gibbs_chain
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.releases.hmm import HMMPrior, hmm_count_table, release_hmm_counts

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.1, 1.0, 10.0)
METHODS = ("non-private", "plug-in", "noise-aware")
N_LO, N_HI = 20, 300
STICKY = 5.0
#: P(feature = 1 | state), rows features, columns states 0 (good), 1 (bad), 2 (worst)
PHI = np.array(
    [
        [0.30, 0.55, 0.70],
        [0.20, 0.45, 0.55],
        [0.10, 0.25, 0.40],
        [0.60, 0.40, 0.30],
        [0.10, 0.20, 0.35],
    ]
)


def simulate(rng, shape, n_states, n_range=(N_LO, N_HI)):
    """``(entries, states (R, T), phi (F, K))`` of one synthetic data set, ``N[r, t]``
    log-uniform in ``n_range``."""
    n_regions, n_months = shape
    phi = PHI[:, :n_states]
    months = np.arange(n_months)
    if n_states == 2:
        c = rng.integers(36, 55, size=(n_regions, 1))
        states = np.where(months < c, 1, 0)
    else:
        c1 = rng.integers(16, 35, size=(n_regions, 1))
        c2 = rng.integers(40, 59, size=(n_regions, 1))
        states = np.where(months < c1, 2, np.where(months < c2, 1, 0))
    flip = rng.random(shape) < 0.03
    states = np.where(flip, rng.integers(0, n_states, size=shape), states)
    n = np.exp(rng.uniform(*np.log(n_range), size=shape)).round().astype(np.int64)
    step = np.repeat(np.arange(n_regions * n_months), n.ravel())
    p = phi[:, states.ravel()[step]].T  # (entries, F)
    entries = {
        "region": step // n_months,
        "month": step % n_months,
        "features": (rng.random(p.shape) < p).astype(np.int64),
    }
    return entries, states, phi


def state_mode(state_draws, n_states):
    """The per-site posterior mode of the states (draws on the first axis; ties: lowest)."""
    return np.stack([(state_draws == k).sum(axis=0) for k in range(n_states)]).argmax(axis=0)


def best_permutation(mode, states, n_states):
    """``(accuracy, perm)``: the first relabelling ``perm[mode]`` that best fits ``states``."""
    best = (-1.0, None)
    for perm in itertools.permutations(range(n_states)):
        acc = float(np.mean(np.asarray(perm)[mode] == states))
        if acc > best[0]:
            best = (acc, perm)
    return best


def score(state_draws, phi_draws, states, phi):
    """``(accuracy, emission MAE)`` under the best label permutation of the states."""
    n_states = phi.shape[1]
    acc, perm = best_permutation(state_mode(state_draws, n_states), states, n_states)
    phi_mean = phi_draws.mean(axis=0)  # (F, K)
    return acc, float(np.mean(np.abs(phi_mean[:, np.argsort(perm)] - phi)))


def binary_table(ones, n):
    """``(table (R, T, 2F), offsets)``: counts of ones ``(R, T, F)`` widened to the plug-in
    kernel's layout, each feature's zeros (``N`` minus ones) then ones."""
    f = ones.shape[-1]
    full = np.stack([n[..., None] - ones, ones], axis=-1).reshape(*n.shape, 2 * f)
    return full, np.arange(0, 2 * f + 1, 2)


def gibbs(stats_ones, n, n_states, prior, rng):
    """Run the kernel on ones-counts ``(R, T, F)`` with ``N``; ``(states, phi (draws, F, K))``."""
    a, b, e = prior.resolve(n_states)
    full, offsets = binary_table(np.clip(stats_ones, 0.0, n[..., None]), n)
    z0 = rng.integers(0, n_states, size=n.shape)
    kernel_prior = PluginPrior(a, b, np.full(offsets[-1], e))
    out = plugin_gibbs_chain(full, offsets, z0, kernel_prior, (100, 100), rng)
    return out.states, np.transpose(out.emissions[:, :, 1::2], (0, 2, 1))


def sample_posterior(model, args, seed):
    """``pm.sample`` of ``model``: one chain, ``args.tune`` + ``args.draws``, quiet; the
    posterior."""
    import pymc as pm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with model:
            idata = pm.sample(
                draws=args.draws,
                tune=args.tune,
                chains=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
    return idata.posterior


def _noise_aware(rel, n_states, prior, args, seed):
    post = sample_posterior(rel.model(n_states, prior=prior), args, seed)
    states = np.asarray(post["states"]).reshape(-1, *rel.shape)
    phi = np.asarray(post["emission"]).reshape(-1, *post["emission"].shape[-2:])
    return states, phi


def one_dataset(rng, shape, n_states, args, noise_aware) -> dict:
    """Scores and wall times of every method at every epsilon on one synthetic data set."""
    entries, states, phi = simulate(rng, shape, n_states)
    prior = HMMPrior(transition=np.where(np.eye(n_states, dtype=bool), STICKY, 1.0))
    out = {}
    t0 = time.perf_counter()
    true, n = hmm_count_table(entries, shape=shape)
    sd, pd = gibbs(true.astype(np.float64), n, n_states, prior, rng)
    out["non-private"] = (*score(sd, pd, states, phi), time.perf_counter() - t0)
    for eps in EPSILONS:
        rel = release_hmm_counts(  # the paper's Laplace noise (a simulation: float opt-in)
            entries,
            shape=shape,
            mechanism=functools.partial(Laplace, epsilon=eps),
            rng=rng,
            allow_float=True,
        )
        t0 = time.perf_counter()
        res = rel.plugin_gibbs(n_states, draws=100, tune=100, prior=prior, rng=rng)
        pd = np.stack([e[..., 1] for e in res.emissions], axis=1)
        out[("plug-in", eps)] = (*score(res.states, pd, states, phi), time.perf_counter() - t0)
        if noise_aware:
            t0 = time.perf_counter()
            sd, pd = _noise_aware(rel, n_states, prior, args, int(rng.integers(2**31)))
            out[("noise-aware", eps)] = (*score(sd, pd, states, phi), time.perf_counter() - t0)
    return out


def run(args) -> dict:
    """``{(K, method, eps): list of (accuracy, MAE, seconds)}`` over the repeats."""
    rng = np.random.default_rng(args.seed)
    results: dict = {}
    for n_states in args.states:
        for rep in range(args.repeats):
            t0 = time.perf_counter()
            na = "noise-aware" in args.methods and rep < args.na_repeats
            na = na and n_states in args.na_states
            out = one_dataset(rng, tuple(args.shape), n_states, args, na)
            for key, val in out.items():
                method, eps = key if isinstance(key, tuple) else (key, None)
                results.setdefault((n_states, method, eps), []).append(val)
            print(
                f"K={n_states} repeat {rep + 1}/{args.repeats}: {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    return results


def mean_se(x):
    """``(mean, standard error)`` of ``x`` (NaN error for one value)."""
    x = np.asarray(x, dtype=np.float64)
    se = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    return float(x.mean()), float(se)


def _fmt(vals, j, digits):
    m, se = mean_se([v[j] for v in vals])
    return f"{m:.{digits}f} ± {se:.{digits}f}"


def write_table(results, args, seconds, load) -> None:
    lines = [
        "# Private HMM: plug-in (Foulds et al. 2016) vs noise-aware vs non-private",
        "",
        "Written by `benchmarks/study_private_hmm.py` (its docstring states the data, the",
        "release, the methods and the scores). "
        f"{args.shape[0]} regions x {args.shape[1]} months, 5 binary features, "
        f"N[r, t] log-uniform in [{N_LO}, {N_HI}], {args.repeats} data sets per K "
        f"(noise-aware on the first {args.na_repeats}, K in {args.na_states}; mean ± standard "
        "error over data sets), Laplace release of the whole table (scale 5 / epsilon).",
        f"Gibbs: 100 tune + 100 kept sweeps; noise-aware: pm.sample, 1 chain, "
        f"{args.tune} tune + {args.draws} draws. Seed {args.seed}.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared "
        f"with other engineers; load average at start/end {load[0]:.1f}/{load[1]:.1f}. "
        f"Total wall time {seconds / 60:.1f} min. Times are per fit (one data set, one epsilon).",
        "",
        "| K | epsilon | method | data sets | state accuracy | emission MAE | seconds per fit "
        "| slowest fit (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (n_states, method, eps), vals in sorted(
        results.items(), key=lambda kv: (kv[0][0], kv[0][2] or 0.0, METHODS.index(kv[0][1]))
    ):
        e = "-" if eps is None else f"{eps:g}"
        lines.append(
            f"| {n_states} | {e} | {method} | {len(vals)} | {_fmt(vals, 0, 3)} | {_fmt(vals, 1, 4)} | "
            f"{_fmt(vals, 2, 1)} | {max(v[2] for v in vals):.1f} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--states", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--shape", type=int, nargs=2, default=[10, 72])
    ap.add_argument("--tune", type=int, default=50)
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--na-repeats", type=int, default=5, help="noise-aware on the first ones")
    ap.add_argument("--na-states", type=int, nargs="+", default=[2, 3], help="K with noise-aware")
    ap.add_argument("--seed", type=int, default=20160601)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/private_hmm.md"))
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    results = run(args)
    write_table(results, args, time.perf_counter() - t0, (load0, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
