"""End-to-end demonstration: ``python -m pymc_dp.demo`` (what ``make demo`` runs).

Two privatized releases of synthetic data, each fitted twice: once by a model that accounts for
the privacy noise (pymc_dp) and once by a naive model that treats the release as the true data.
The truth is printed beside both posteriors, and a plot is saved to ``demo_output/demo.png``.

1. **Noisy counts** (local DP): 300 Poisson counts, each released through the two-sided
   geometric mechanism at epsilon = 0.5. ``pmdp.Privatized`` integrates the true counts out exactly,
   so NUTS samples a one-parameter model.
2. **A noisy statistic of latent records** (central DP): 2,000 yes/no answers whose total was
   released with Laplace noise at epsilon = 0.02. ``pmdp.Release`` conditions the model of the
   records on the released total; ``pm.sample`` picks the data-augmentation step for the records.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]


def _summary(draws: np.ndarray) -> tuple[float, float, float, float]:
    lo, hi = np.quantile(draws, [0.05, 0.95])
    return float(draws.mean()), float(draws.std()), float(lo), float(hi)


def _row(label: str, truth: float, draws: np.ndarray) -> str:
    mean, sd, lo, hi = _summary(draws)
    covered = "yes" if lo <= truth <= hi else "NO"
    return f"  {label:<28} {mean:9.4f} {sd:8.4f}   [{lo:8.4f}, {hi:8.4f}]   {covered}"


def _header(truth_name: str, truth: float) -> str:
    return (
        f"  truth: {truth_name} = {truth:.4f}\n"
        f"  {'model':<28} {'mean':>9} {'sd':>8}   {'90% interval':^22}   covers truth"
    )


def counts_example(rng, draws, tune, seed):
    """Poisson counts released through the geometric mechanism."""
    import pymc as pm

    import pymc_dp as pmdp

    lam_true, n, epsilon = 4.0, 300, 0.5
    y = rng.poisson(lam_true, size=n)
    mech = pmdp.Geometric(epsilon=epsilon)
    y_noisy = mech.release(y, rng=rng)

    with pm.Model():
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        pmdp.Privatized("y", pm.Poisson.dist(mu=lam), mechanism=mech, observed=y_noisy)
        aware = pm.sample(draws, tune=tune, chains=2, cores=1, random_seed=seed, progressbar=False)
    with pm.Model():
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        # the naive analyst clips negative releases to zero and treats them as true counts
        pm.Poisson("y", mu=lam, observed=np.clip(y_noisy, 0, None))
        naive = pm.sample(draws, tune=tune, chains=2, cores=1, random_seed=seed, progressbar=False)

    post_aware = aware.posterior["lam"].values.ravel()
    post_naive = naive.posterior["lam"].values.ravel()
    print(f"\n1. {n} Poisson counts, each released with {mech!r}")
    print(f"   mean of true counts {y.mean():.3f}; mean of released counts {y_noisy.mean():.3f}")
    print(_header("lam", lam_true))
    print(_row("pmdp.Privatized (aware)", lam_true, post_aware))
    print(_row("naive (clipped releases)", lam_true, post_naive))
    return lam_true, post_aware, post_naive


def records_example(rng, draws, tune, seed):
    """Yes/no records whose total was released with Laplace noise."""
    import pymc as pm

    import pymc_dp as pmdp

    p_true, n, epsilon = 0.3, 2000, 0.02
    x = rng.binomial(1, p_true, size=n)
    mech = pmdp.Laplace(epsilon=epsilon, sensitivity=1.0)
    z = float(mech.release(x.sum(), rng=rng, allow_float=True))

    with pm.Model() as model:
        p = pm.Beta("p", alpha=1.0, beta=1.0)
        x_latent = pm.Bernoulli("x", p=p, shape=n)
        pmdp.Release("z", statistic=x_latent.sum(), mechanism=mech, observed=z)
        t0 = time.perf_counter()
        aware = pm.sample(
            draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            var_names=["p"],
            compute_convergence_checks=False,
        )
        elapsed = time.perf_counter() - t0
        steps = _step_names(model)

    post_aware = aware.posterior["p"].values.ravel()
    # the naive analyst treats the noisy total as the true number of yes answers
    k = int(np.clip(round(z), 0, n))
    post_naive = rng.beta(1.0 + k, 1.0 + n - k, size=post_aware.size)
    print(f"\n2. {n} yes/no records; their total released with {mech!r}")
    print(f"   true total {x.sum()} (proportion {x.mean():.4f}), released total {z:.1f}")
    print(f"   steps chosen by pm.sample: {steps}")
    print(f"   sampling with pm.sample took {elapsed:.1f} s (including compilation)")
    print(_header("p", p_true))
    print(_row("pmdp.Release (aware)", p_true, post_aware))
    print(_row("naive (noisy total as true)", p_true, post_naive))
    return p_true, post_aware, post_naive


def _step_names(model) -> str:
    from pymc.sampling.mcmc import assign_step_methods

    _, selected = assign_step_methods(model)
    return ", ".join(
        f"{cls.__name__} [{', '.join(v.name for v in vs)}]" for cls, vs in selected.items()
    )


def _plot(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.5))
    for ax, (title, truth, aware, naive) in zip(np.atleast_1d(axes), results, strict=True):
        bins = np.linspace(min(aware.min(), naive.min()), max(aware.max(), naive.max()), 60)
        ax.hist(aware, bins=bins, density=True, alpha=0.6, label="accounts for DP noise")
        ax.hist(naive, bins=bins, density=True, alpha=0.6, label="ignores DP noise")
        ax.axvline(truth, color="k", lw=2, label="truth")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    """Run the demonstration; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("demo_output/demo.png"))
    args = parser.parse_args(argv)

    logging.getLogger("pymc").setLevel(logging.WARNING)  # the demo prints its own summary
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    print("pymc_dp demo: posteriors that account for privacy noise, beside the truth")
    lam = counts_example(rng, args.draws, args.tune, args.seed)
    prop = records_example(rng, args.draws, args.tune, args.seed)
    _plot(
        [
            ("Poisson rate from geometric-noised counts", *lam),
            ("Bernoulli p from a Laplace-noised total", *prop),
        ],
        args.out,
    )
    print(f"\nplot saved to {args.out}; total time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
