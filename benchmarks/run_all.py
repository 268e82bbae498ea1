"""Run every benchmark script in this folder, one after the other (``make bench``).

Each script prints its own table; copy the figures of one run into ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS = [
    ["bench_privatized.py"],
    ["bench_da_bernoulli.py"],
    ["bench_da_regression.py", "--eps", "1"],
    ["bench_da_sweep.py"],
    ["bench_soma.py", "--quick"],
    ["bench_first_draw.py"],
    ["bench_count_augmentation.py"],
    ["bench_count_posterior.py"],
    ["bench_factorization.py"],
]


def main() -> int:
    status = 0
    for script, *args in SCRIPTS:
        print(f"\n=== {script} {' '.join(args)}", flush=True)
        status |= subprocess.call([sys.executable, str(HERE / script), *args])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
