"""Issue 9 follow-up: the direct exact draw of the true counts against Schein's augmentation.

Two measurements, one run each (the load average is printed with the results):

1. **Sweep time** over ``n = 10^6`` counts: :func:`pymc_dp.kernels.count_posterior.
   draw_true_counts` (``CountAugmentation(method="direct")``) against
   :func:`pymc_dp.kernels.count_augmentation.count_augmentation_sweep` (the default method),
   both through their public calls (input validation included), median of ``REPEATS`` timings
   taken in turn, with a numpy ``rng.binomial(10, 0.3, n)`` draw of the same size as a yardstick.
   Settings, ``alpha = exp(-epsilon)``, ``epsilon = 1``, true counts ``y ~ Pois(mu)``, released
   ``z = y + 2Geo(alpha)``:

   * ``dense``: ``mu = 6 exp(0.5 N(0, 1))``;
   * ``sparse``: factorization-like ``mu = theta @ phi``, ``theta`` (n/1000 x 10) and ``phi``
     (10 x 1000) Gamma(0.2, 1): mean 0.4, most rates far below 1;
   * ``large``: ``mu = 1000 exp(0.5 N(0, 1))`` (modes at the kink ``z``, narrow laws: the
     direct draw inverts from the mode);
   * ``wide``: as ``large`` at ``epsilon = 0.1`` (wide laws with modes above 50: the direct
     draw's rejection path).

2. **Mixing** of a Gamma-Poisson rate through ``pm.sample`` (NUTS for ``lam``, the count step
   for the true counts, 2 chains run one after the other, ``TUNE`` + ``DRAWS`` each): bulk ESS
   of ``lam`` per second of sampling (PyMC's ``sampling_time``, compile excluded), both methods,
   on data where many released counts are far from the shared rate and the noise is small:
   ``lam ~ Gamma(2, 0.04)`` (prior mean 50), ``N_COUNTS`` true counts from
   ``Pois(50 exp(0.5 N(0, 1)))`` (overdispersed, so a shared rate is far from many of them),
   released with ``epsilon = 1`` (noise sd 1.3), and, for contrast, with ``epsilon = 0.25``
   (noise sd 5.6). Also the lag-1 autocorrelation of the true counts (mean over counts).

Usage: ``.venv/bin/python benchmarks/bench_count_posterior.py [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from bench_count_augmentation import rates, release

from pymc_dp.kernels.count_augmentation import count_augmentation_sweep, init_aux_rates
from pymc_dp.kernels.count_posterior import draw_true_counts

__all__ = ["main", "mixing", "setting", "sweep_times"]

N = 10**6
REPEATS = 7
N_COUNTS = 40
TUNE, DRAWS = 1000, 5000


def setting(kind, n=N, seed=0):
    """``(z, mu, alpha)`` of one benchmark setting."""
    rng = np.random.default_rng(seed)
    alpha = float(np.exp(-0.1 if kind == "wide" else -1.0))
    mu = rates("large" if kind == "wide" else kind, n, rng)
    return release(mu, alpha, rng), mu, alpha


def sweep_times(kind):
    """Median seconds of one sweep: ``{"direct", "augmentation", "binomial"}``."""
    z, mu, alpha = setting(kind)
    rng = np.random.default_rng(1)
    state = init_aux_rates(alpha, z.shape, rng)
    draw_true_counts(z[:100], mu[:100], alpha, rng)  # compile (cached) outside the timing
    for _ in range(3):  # a few sweeps so the auxiliary rates are not at their prior
        count_augmentation_sweep(z, mu, alpha, state, rng)
    times = {"direct": [], "augmentation": [], "binomial": []}
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        draw_true_counts(z, mu, alpha, rng)
        t1 = time.perf_counter()
        count_augmentation_sweep(z, mu, alpha, state, rng)
        t2 = time.perf_counter()
        rng.binomial(10, 0.3, z.size)
        t3 = time.perf_counter()
        for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            times[key].append(dt)
    return {k: float(np.median(v)) for k, v in times.items()}


def _mixing_data(eps, seed=3):
    rng = np.random.default_rng(seed)
    alpha = float(np.exp(-eps))
    return release(50.0 * np.exp(0.5 * rng.standard_normal(N_COUNTS)), alpha, rng), alpha


def _lag1(x):
    """Mean over counts of the lag-1 autocorrelation of each count's chain (draw axis 0)."""
    x = x - x.mean(axis=0)
    v = (x * x).mean(axis=0)
    ok = v > 0
    return float(((x[1:] * x[:-1]).mean(axis=0)[ok] / v[ok]).mean())


def mixing(method, eps=1.0):
    """``(ess of lam, sampling seconds, ess per second, posterior mean, lag-1 of y)``."""
    import arviz as az
    import pymc as pm

    import pymc_dp as pmdp
    from pymc_dp import CountAugmentation

    z, alpha = _mixing_data(eps)
    with pm.Model() as model:
        lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.04))
        pmdp.Privatized(
            "z", pm.Poisson.dist(lam), pmdp.Geometric(alpha=alpha), marginalize=False, observed=z
        )
        step = CountAugmentation([model["z_true"]], method=method)
        idata = pm.sample(
            draws=DRAWS, tune=TUNE, chains=2, cores=1, step=[step], progressbar=False,
            random_seed=7,
        )  # fmt: skip
    seconds = float(idata.posterior.attrs["sampling_time"])
    ess = float(az.ess(idata.posterior["lam"].values, method="bulk"))
    yv = idata.posterior["z_true"].values
    lag1 = float(np.mean([_lag1(yv[c].astype(float)) for c in range(yv.shape[0])]))
    return ess, seconds, ess / seconds, float(idata.posterior["lam"].mean()), lag1


def _report():
    lines = ["## Sweep over 10^6 counts (epsilon = 1; wide: 0.1), median of 7", ""]
    lines += ["| setting | direct | augmentation | numpy binomial | augmentation / direct |"]
    lines += ["|---|---|---|---|---|"]
    for kind in ("dense", "sparse", "large", "wide"):
        t = sweep_times(kind)
        lines.append(
            f"| {kind} | {t['direct'] * 1e3:.1f} ms | {t['augmentation'] * 1e3:.1f} ms | "
            f"{t['binomial'] * 1e3:.1f} ms | {t['augmentation'] / t['direct']:.2f} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"## Gamma-Poisson rate, {N_COUNTS} counts, 2 x {DRAWS} draws", ""]
    lines += [
        "| epsilon | method | bulk ESS of lam | sampling s | ESS/s | mean of lam | lag-1 of y |"
    ]
    lines += ["|---|---|---|---|---|---|---|"]
    for eps in (1.0, 0.25):
        for method in ("augmentation", "direct"):
            ess, sec, rate, mean, lag1 = mixing(method, eps)
            lines.append(
                f"| {eps} | {method} | {ess:.0f} | {sec:.2f} | {rate:.0f} | {mean:.3f} | {lag1:.3f} |"
            )
            print(lines[-1], flush=True)
    lines += [
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared; load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end; one run.",
    ]
    return "\n".join(lines)


def main():
    """Run both measurements and print (or write) the markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    text = _report()
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
