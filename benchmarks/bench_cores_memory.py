"""Memory and time of ``pm.sample(chains=4, cores=k)`` for k = 1, 2, 4 (issue 14).

Records with a public covariate (not collapsible: DataAugmentation for the records, NUTS for the
coefficient), a Laplace release of their sum. Each k runs in a fresh process; a thread sums the
resident memory of that process and all its children (``/proc``) every 20 ms, and the peak of
that sum is reported with the wall time of the ``pm.sample`` call (4 chains x 500 draws after 500
tuning steps, compile caches warm).

Run: ``python benchmarks/bench_cores_memory.py --n 100000 --out benchmarks/results/cores_memory.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

CHILD = r"""
import json, sys, time, warnings
import numpy as np, pymc as pm, pymc_dp as pmdp
n, cores, iters = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cov = np.linspace(-1.0, 1.0, n)
with pm.Model() as model:
    b = pm.Normal("b", 0.0, 1.0)
    x = pm.Bernoulli("x", p=pm.math.invlogit(b * cov - 0.8), shape=n)
    pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=0.5), observed=float(0.3 * n))
with model, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    pm.sample(iters, tune=iters, chains=4, cores=cores, progressbar=False, random_seed=1,
              compute_convergence_checks=False)
    print(json.dumps({"wall": time.perf_counter() - t0}))
"""


def _pss(pid: int) -> int:
    """Proportional set size of ``pid`` in bytes: each shared page counted 1/k in each of
    the k processes sharing it (``/proc/<pid>/smaps_rollup``)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def _tree_rss(pid: int) -> tuple[int, int]:
    """(resident, proportional) bytes of ``pid`` and its descendants, summed (Linux /proc).

    The summed resident size counts a page shared by k processes k times (forked chain workers
    share the parent's model data and compiled code copy-on-write); the summed proportional
    size counts it once.
    """
    total, pss, stack = 0, 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * page
            pss += _pss(p)
            with open(f"/proc/{p}/task/{p}/children") as f:
                stack.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return total, pss


def run(n: int, cores: int, iters: int = 500) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(n), str(cores), str(iters)],
        stdout=subprocess.PIPE,
        text=True,
    )
    peak = [0, 0]

    def watch():
        while proc.poll() is None:
            rss, pss = _tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.02)

    t = threading.Thread(target=watch)
    t.start()
    out, _ = proc.communicate()
    t.join()
    res = json.loads(out.strip().splitlines()[-1])
    res["peak"], res["peak_pss"] = peak
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--iters", type=int, default=500, help="draws (and as many tuning steps)")
    args = ap.parse_args(argv)
    run(1000, 1)  # warm the compile caches
    rows = [(k, run(args.n, k, args.iters)) for k in (1, 2, 4)]
    base = rows[0][1]
    lines = [
        "# Memory of `pm.sample(chains=4, cores=k)` (issue 14)",
        "",
        f"`python benchmarks/bench_cores_memory.py --n {args.n} --iters {args.iters}`, "
        f"{time.strftime('%Y-%m-%d')}; "
        f"{args.n:,} Bernoulli records with a public covariate (DataAugmentation + NUTS), Laplace "
        f"release of their sum, 4 chains x {args.iters} draws + {args.iters} tuning; peaks of "
        "the summed resident "
        "and proportional memory of the process tree (sampled every 20 ms), on a 2-core "
        "machine; PyMC's default start method here (Python 3.12 on Linux: fork).",
        "",
        "| cores | wall (s) | summed RSS peak (GB) | / cores=1 | summed PSS peak (GB) | / cores=1 |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in rows:
        lines.append(
            f"| {k} | {r['wall']:.1f} | {r['peak'] / 1e9:.2f} | {r['peak'] / base['peak']:.2f} "
            f"| {r['peak_pss'] / 1e9:.2f} | {r['peak_pss'] / base['peak_pss']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
