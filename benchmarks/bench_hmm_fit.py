"""Seconds per noise-aware private-HMM fit, each in a new process, on cold and warm caches.

The setting of ``benchmarks/study_private_hmm.py`` (10 regions x 72 months, 5 binary features,
``N[r, t]`` log-uniform in [20, 300], Laplace release of the whole table at ``--epsilon``) and its
noise-aware fit: ``rel.model(K)`` sampled by a plain ``pm.sample`` (FFBS for the states, NUTS
for the rest), one chain, 50 tuning + 50 kept draws, as in the study. A fit's time is from
building the model to the returned ``InferenceData`` (it includes every compilation and the
FFBS step's construction); ``import`` is timed separately.

Each measurement is a fresh Python process (``--child``). "cold" gives it an empty PyTensor
compile directory and an empty numba cache directory (``PYTENSOR_FLAGS=compiledir=...``,
``NUMBA_CACHE_DIR``): the first fit after installing a new pymc_dp version; "warm" runs again on
the directories the cold run filled (every later fit on the machine; the compiled functions do
not depend on the release, which enters as ``pm.Data``).

Issue 23's goal: a fit in <= 30 s at ``K = 2``.

Run: ``.venv/bin/python benchmarks/bench_hmm_fit.py [--repeat 3] [--states 2] [--epsilon 1]``;
writes ``benchmarks/results/hmm_fit_time.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child(n_states: int, epsilon: float, seed: int) -> dict:
    t0 = time.perf_counter()
    import functools
    import types

    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import study_private_hmm as study

    t1 = time.perf_counter()
    rng = np.random.default_rng(seed)
    entries, states, phi = study.simulate(rng, (10, 72), n_states)
    prior = study.HMMPrior(transition=np.where(np.eye(n_states, dtype=bool), study.STICKY, 1.0))
    rel = study.release_hmm_counts(  # a simulation: the paper's float Laplace, by opt-in
        entries,
        shape=(10, 72),
        mechanism=functools.partial(study.Laplace, epsilon=epsilon),
        rng=rng,
        allow_float=True,
    )
    t2 = time.perf_counter()
    args = types.SimpleNamespace(draws=50, tune=50)
    sd, pd = study._noise_aware(rel, n_states, prior, args, int(rng.integers(2**31)))
    t3 = time.perf_counter()
    accuracy, mae = study.score(sd, pd, states, phi)
    return {"import": t1 - t0, "fit": t3 - t2, "accuracy": accuracy, "mae": mae}


def _run(env: dict, args) -> dict:
    cmd = [sys.executable, __file__, "--child", "--states", str(args.states)]
    cmd += ["--epsilon", str(args.epsilon), "--seed", str(args.seed)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit(f"the measured process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--states", type=int, default=2)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=20160601)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/hmm_fit_time.md"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.states, args.epsilon, args.seed)))
        return
    load0 = os.getloadavg()[0]
    fits: dict[str, list[dict]] = {"cold": [], "warm": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ)
            env["PYTENSOR_FLAGS"] = f"compiledir={tmp}/pt"
            env["NUMBA_CACHE_DIR"] = f"{tmp}/nb"
            fits["cold"].append(_run(env, args))
            fits["warm"].append(_run(env, args))
    load1 = os.getloadavg()[0]
    lines = [
        "# Seconds per noise-aware private-HMM fit, new process, cold and warm caches",
        "",
        "Written by `benchmarks/bench_hmm_fit.py` (its docstring states the setting). "
        f"K = {args.states}, epsilon = {args.epsilon:g}, 10 x 72, one chain, 50 + 50 draws, "
        f"seed {args.seed}; {args.repeat} cold/warm pairs, each fit in its own process.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other engineers; "
        f"load average at start/end {load0:.1f}/{load1:.1f}.",
        "",
        "| caches | fits | fit (s) min / median / max | import (s) median | state accuracy |",
        "|---|---|---|---|---|",
    ]
    for kind, rows in fits.items():
        t = [r["fit"] for r in rows]
        lines.append(
            f"| {kind} | {len(rows)} | {min(t):.1f} / {statistics.median(t):.1f} / {max(t):.1f} "
            f"| {statistics.median(r['import'] for r in rows):.1f} | "
            f"{statistics.median(r['accuracy'] for r in rows):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
