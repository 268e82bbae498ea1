"""Import time of ``pymc_dp`` beside ``pymc``, and where the deferred work is paid (issue 14).

Two measurements, each process a fresh interpreter:

1. **Import.** Whole-process wall time of ``python -c "import pymc"`` and of
   ``python -c "import pymc_dp"``: median of ``--repeat`` (5) runs each, alternated so both see the
   same load, after one unmeasured run of each (warm caches: bytecode, numba's cache next to the
   modules, PyTensor's compile directory). One *cold* run of each is added, with an empty bytecode
   prefix (``PYTHONPYCACHEPREFIX``: every module of every package is recompiled to bytecode), an
   empty numba cache directory and an empty PyTensor compile directory.
2. **First use.** The README's record model (``N_RECORDS`` Bernoulli records, a Laplace release of
   their sum, ``pm.sample`` with ``DataAugmentation`` and ``ConjugateGibbs``, one chain), timed in
   phases inside the process: ``import pymc_dp``; building the model; ``pm.sample``; and the
   whole process. Warm: median of ``--repeat-use`` (3) runs after one unmeasured run; cold: one
   run on empty numba and PyTensor cache directories.

By default the package of the working tree is measured; each ``--rev REV`` measures instead the
package as it is at git revision ``REV`` (extracted with ``git archive`` into a temporary
directory), e.g. before and after a change, so the work moved out of the import can be seen where
it went.

The tables go to ``benchmarks/results/import_time.md`` (and stdout).

Run: ``.venv/bin/python benchmarks/bench_import.py [--repeat 5] [--repeat-use 3] [--rev REV]...``.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "import_time.md"
N_RECORDS = 200
DRAWS = 300


def _child() -> dict:
    """First use, inside the measured process: phases of the README's record model."""
    t0 = time.perf_counter()
    import numpy as np
    import pymc as pm

    import pymc_dp as pmdp

    t1 = time.perf_counter()
    z = np.float64(N_RECORDS * 0.3 + 1.7)
    with pm.Model() as model:
        p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
        x = pm.Bernoulli("x", p=p, shape=N_RECORDS)
        pmdp.Release(
            "z", statistic=x.sum(), mechanism=pmdp.Laplace(epsilon=0.5, sensitivity=1.0), observed=z
        )
    t2 = time.perf_counter()
    with model:
        pm.sample(
            draws=DRAWS,
            tune=DRAWS,
            chains=1,
            cores=1,
            var_names=["p"],
            progressbar=False,
            compute_convergence_checks=False,
            random_seed=1,
        )
    t3 = time.perf_counter()
    return {
        "file": pmdp.__file__,
        "import": t1 - t0,
        "build": t2 - t1,
        "sample": t3 - t2,
        "in_process": t3 - t0,
    }


def _wall(code: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(code, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode:
        sys.exit(f"the measured process failed:\n{out.stderr[-3000:]}")
    return wall, out.stdout


def _cold_env(base: dict, tmp: str, bytecode: bool) -> dict:
    env = dict(base)
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = f"{tmp}/pyc"
    env["NUMBA_CACHE_DIR"] = f"{tmp}/nb"
    env["PYTENSOR_FLAGS"] = f"compiledir={tmp}/pt"
    return env


def _tree_env(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def measure_import(trees: dict[str, Path], repeat: int) -> dict:
    """Whole-process wall times of ``import pymc`` and of ``import pymc_dp`` from each tree."""
    cmds = {"pymc": ([sys.executable, "-c", "import pymc"], ROOT)}
    for label, tree in trees.items():
        cmds[label] = ([sys.executable, "-c", "import pymc_dp"], tree)
    for cmd, tree in cmds.values():
        _wall(cmd, _tree_env(tree), tree)  # warm-up (bytecode, numba cache)
    runs = {m: [] for m in cmds}
    for _ in range(repeat):  # alternated, so that every command sees the same load
        for m, (cmd, tree) in cmds.items():
            runs[m].append(_wall(cmd, _tree_env(tree), tree)[0])
    cold = {}
    for m, (cmd, tree) in cmds.items():
        with tempfile.TemporaryDirectory() as tmp:
            cold[m] = _wall(cmd, _cold_env(_tree_env(tree), tmp, bytecode=True), tree)[0]
    return {
        "runs": runs,
        "median": {m: statistics.median(r) for m, r in runs.items()},
        "cold": cold,
    }


def _use_once(env: dict, cwd: Path) -> dict:
    wall, stdout = _wall([sys.executable, str(Path(__file__).resolve()), "--child"], env, cwd)
    row = json.loads(stdout.strip().splitlines()[-1])
    row["process"] = wall
    return row


def measure_use(tree: Path, repeat: int) -> dict:
    """First-use phases for the package found at ``tree`` (warm median, and one cold run)."""
    env = _tree_env(tree)
    with tempfile.TemporaryDirectory() as tmp:
        cold = _use_once(_cold_env(env, tmp, bytecode=False), tree)
    _use_once(env, tree)  # warm-up: fills the numba cache next to the modules
    warm = [_use_once(env, tree) for _ in range(repeat)]
    keys = ("import", "build", "sample", "in_process", "process")
    return {
        "file": warm[0]["file"],
        "cold": cold,
        "warm": {k: statistics.median(r[k] for r in warm) for k in keys},
    }


def _extract(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "pymc_dp"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _import_table(imp: dict, repeat: int) -> list[str]:
    med, cold = imp["median"], imp["cold"]
    lines = [
        f"## Import: whole-process wall time, median of {repeat} runs (warm caches)",
        "",
        "| command | median (s) | runs (s) | cold: empty bytecode, numba and PyTensor caches (s) |",
        "|---|---|---|---|",
    ]
    for m, runs in imp["runs"].items():
        what = "`import pymc`" if m == "pymc" else f"`import pymc_dp`, {m}"
        shown = ", ".join(f"{v:.2f}" for v in runs)
        lines.append(f"| {what} | {med[m]:.2f} | {shown} | {cold[m]:.2f} |")
    lines.append("")
    for m in imp["runs"]:
        if m != "pymc":
            lines.append(
                f"- {m}: `import pymc_dp` {med[m] - med['pymc']:+.2f} s beside `import pymc` "
                "(issue 14 asks for at most +0.5 s)."
            )
    return lines


def _use_table(uses: dict[str, dict]) -> list[str]:
    lines = [
        f"## First use: the README's record model ({N_RECORDS} records, 1 chain, "
        f"{DRAWS} tuning + {DRAWS} draws)",
        "",
        "Phases inside the process; *process* is the whole-process wall time (interpreter start "
        "and exit included). Warm: median of the measured runs after one unmeasured run; cold: "
        "one run on empty numba and PyTensor cache directories (bytecode warm).",
        "",
        "| package | caches | import (s) | build model (s) | pm.sample (s) | process (s) |",
        "|---|---|---|---|---|---|",
    ]
    for label, use in uses.items():
        for kind in ("warm", "cold"):
            r = use[kind]
            lines.append(
                f"| {label} | {kind} | {r['import']:.2f} | {r['build']:.2f} | "
                f"{r['sample']:.2f} | {r['process']:.2f} |"
            )
    return lines


def _report(imp: dict, uses: dict[str, dict], repeat: int) -> str:
    with open("/proc/loadavg") if os.path.exists("/proc/loadavg") else open(os.devnull) as fh:
        load = fh.read().split()[:3]
    lines = [
        "# `import pymc_dp` beside `import pymc` (issue 14)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other work; load "
        f"average at the end {' '.join(load) or 'n/a'}), Python {platform.python_version()}. "
        "Script: `benchmarks/bench_import.py` (one run).",
        "",
        *_import_table(imp, repeat),
        "",
        *_use_table(uses),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--repeat-use", type=int, default=3)
    ap.add_argument(
        "--rev",
        action="append",
        help="measure the package at this git revision (repeatable; default: the working tree)",
    )
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for rev in args.rev or [None]:
            if rev is None:
                trees["working tree"] = ROOT
            else:
                trees[f"`{rev}`"] = _extract(rev, Path(tmp) / rev.replace("/", "_"))
        imp = measure_import(trees, args.repeat)
        uses = {label: measure_use(tree, args.repeat_use) for label, tree in trees.items()}
    for label, use in uses.items():
        print(f"{label}: pymc_dp from {use['file']}", file=sys.stderr)
    text = _report(imp, uses, args.repeat)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
