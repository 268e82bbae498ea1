"""A plain ``pm.sample()`` against ``pm.sample(var_names=["p"])`` on the README's record model.

Issue 14: users call ``pm.sample()`` without ``var_names``. The README's model (``p ~ Beta(1, 1)``,
``N`` Bernoulli records, their sum released with ``Laplace(epsilon=0.5)``) is run at each ``N`` in
a fresh process per call (so peak memory is that call's), 2 chains x 1000 draws after 1000 tuning
steps, ``cores=1``; wall time of the whole ``pm.sample`` call (step assignment and compilation
included) and the process's peak resident memory.

Run: ``python benchmarks/bench_plain_sample.py --sizes 1e4,1e5,1e6 --out
benchmarks/results/plain_sample.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, pymc as pm, pymc_dp as pmdp
n, plain, kind = int(sys.argv[1]), sys.argv[2] == "plain", sys.argv[3]
rng = np.random.default_rng(1)
mech = pmdp.Laplace(epsilon=0.5, sensitivity=1.0)
z = float(mech.release(float(rng.binomial(n, 0.3)), rng=rng, allow_float=True))
with pm.Model() as model:
    if kind == "readme":
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=n)
    else:  # records with a public covariate: not collapsible (DataAugmentation, NUTS on b)
        cov = np.linspace(-1.0, 1.0, n)
        p = pm.Normal("p", 0.0, 1.0)
        x = pm.Bernoulli("x", p=pm.math.invlogit(p * cov - 0.8), shape=n)
    pmdp.Release("z", statistic=x.sum(), mechanism=mech, observed=z)
kw = {} if plain else {"var_names": ["p"]}
with model, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    idata = pm.sample(chains=2, cores=1, progressbar=False, random_seed=3, **kw)
    wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "rss": rss, "vars": sorted(idata.posterior.data_vars),
                  "mean": float(idata.posterior["p"].mean())}))
"""


def run(n: int, mode: str, kind: str = "readme") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), mode, kind],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e4,1e5,1e6")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--kind",
        default="readme",
        choices=["readme", "covariates"],
        help="the README model (collapsed) or records with a public covariate (DA + NUTS)",
    )
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    run(1000, "plain", args.kind)  # warm the compile caches once
    rows = []
    for n in sizes:
        a, b = run(n, "plain", args.kind), run(n, "params", args.kind)
        rows.append((n, a, b))
        print(n, a, b, flush=True)
    lines = [
        '# Plain `pm.sample()` against `pm.sample(var_names=["p"])` (issue 14)',
        "",
        f"`python benchmarks/bench_plain_sample.py --sizes {args.sizes} "
        f"--kind {args.kind}`, {time.strftime('%Y-%m-%d')}; "
        + (
            "README record model (Bernoulli records, Laplace epsilon 0.5 release of their sum: "
            "CollapsedRecords)"
            if args.kind == "readme"
            else "Bernoulli records with a public covariate, p(x_i) = invlogit(p c_i - 0.8), "
            "Laplace epsilon 0.5 release of their sum (DataAugmentation + NUTS)"
        )
        + ", 2 chains x 1000 draws + 1000 tuning, cores=1, one "
        "fresh process per call (peak RSS of that process), compile caches warm.",
        "",
        "| records | plain: time (s) | plain: peak (GB) | var_names: time (s) | var_names: peak "
        "(GB) | time ratio | memory ratio | stored (plain) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, a, b in rows:
        lines.append(
            f"| {n:,} | {a['wall']:.1f} | {a['rss'] / 1e9:.2f} | {b['wall']:.1f} | "
            f"{b['rss'] / 1e9:.2f} | {a['wall'] / b['wall']:.2f} | {a['rss'] / b['rss']:.2f} | "
            f"{', '.join(a['vars'])} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
