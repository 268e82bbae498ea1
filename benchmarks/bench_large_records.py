"""Large record models end to end: build, step set-up and 200 iterations of ``pm.sample`` (issue 14).

Two models that the collapse of exchangeable records does not apply to (records with
per-record covariates), so ``pm.sample`` assigns ``DataAugmentation`` to the records:

* ``logistic``: ``n`` Bernoulli records ``x_i ~ Bernoulli(invlogit(a + b c_i))`` with a public
  covariate ``c_i`` in [-1, 1] (a ``pm.Data`` container), ``a, b ~ Normal(0, 2)``; released:
  ``(sum x_i, sum c_i x_i)`` with Laplace noise, epsilon 1, L1 sensitivity 2. NUTS on (a, b).
* ``regression``: ``n`` records ``y_i ~ Normal(X_i beta, 1)`` with 10 public covariates
  ``X_i`` in [-1, 1] (``pm.Data``), ``beta ~ Normal(0, 1)`` (10 coefficients); released: the
  clamped moments ``(X' clip(y, -B, B), sum clip(y, -B, B)^2)`` (11 components, B = 4) with
  Laplace noise, epsilon 1, L1 sensitivity ``2 (10 B) + B^2`` (replacing one record moves each
  ``X_ij clip(y_i)`` by up to ``2 B |X_ij|`` and ``clip(y_i)^2`` by up to ``B^2``). The
  covariates are public, so ``X'X`` needs no release. ``ConjugateGibbs`` on beta.

Phases, each timed and with its own peak resident memory (``VmHWM``, reset through
``/proc/self/clear_refs`` before the phase): ``data`` (generating the arrays), ``build`` (the
``pm.Model`` block), ``setup`` (``assign_step_methods`` + ``instantiate_steppers``: compiling
and checking every step) and ``sample`` (``pm.sample(100, tune=100, chains=1, step=...)``,
200 iterations, the records not stored). Bytes per record are the phase's peak above the
resident memory after ``data`` (the covariates are counted in the data, not in the phases;
``pm.Data``'s copy of them is counted in ``build`` and after). The sample phase also reports
the resident memory held between iterations (read by a ``pm.sample`` callback after each
iteration): its largest value and its value after the last iteration.

Run: ``python benchmarks/bench_large_records.py logistic --n 1e8`` (one model per process).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def _mem():
    """(current, peak) resident bytes of this process (Linux)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(line.split()[1]) * 1024
    return out["VmRSS"], out["VmHWM"]


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class Phases:
    """Wall time and peak memory per phase."""

    def __init__(self, n):
        self.n, self.rows, self.base = n, [], None

    def run(self, name, fn):
        _reset_peak()
        t0 = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
        cur, peak = _mem()
        if self.base is None:
            self.base = cur
        self.rows.append(
            {
                "phase": name,
                "wall_s": round(wall, 2),
                "peak_gb": round(peak / 1e9, 3),
                "peak_B_per_record": round((peak - self.base) / self.n, 1),
                "after_B_per_record": round((cur - self.base) / self.n, 1),
            }
        )
        print(json.dumps(self.rows[-1]), flush=True)
        return out


TRUTH = {"logistic": {"a": -0.5, "b": 1.0}, "regression": {"beta": np.linspace(-1.0, 1.0, 10)}}


def logistic_data(n, rng):
    c = rng.uniform(-1.0, 1.0, size=n)
    x = rng.random(n) < 1.0 / (1.0 + np.exp(-(-0.5 + 1.0 * c)))
    z = np.array([x.sum(), (c * x).sum()], dtype=np.float64) + rng.laplace(size=2) * 2.0
    return c, z


def logistic_model(c, z):
    import pymc as pm
    import pytensor.tensor as pt

    import pymc_dp as pmdp

    with pm.Model() as model:
        cov = pm.Data("c", c)
        a = pm.Normal("a", 0.0, 2.0)
        b = pm.Normal("b", 0.0, 2.0)
        x = pm.Bernoulli("x", logit_p=a + b * cov, shape=len(c))
        stat = pt.stack([x.sum(), (cov * x).sum()])
        pmdp.Release("z", stat, pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=z)
    return model, ["a", "b"]


B = 4.0
K = 10


def regression_data(n, rng):
    X = rng.uniform(-1.0, 1.0, size=(n, K))
    beta = np.linspace(-1.0, 1.0, K)
    y = X @ beta + rng.normal(size=n)
    yc = np.clip(y, -B, B)
    z = np.concatenate([X.T @ yc, [yc @ yc]]) + rng.laplace(size=K + 1) * (2 * K * B + B * B)
    return X, z


def regression_model(X, z):
    import pymc as pm
    import pytensor.tensor as pt

    import pymc_dp as pmdp

    with pm.Model() as model:
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0.0, 1.0, shape=K)
        y = pm.Normal("y", pt.dot(Xd, beta), 1.0, shape=X.shape[0])
        yc = pt.clip(y, -B, B)
        stat = pt.concatenate([pt.dot(Xd.T, yc), (yc**2).sum()[None]])
        mech = pmdp.Laplace(epsilon=1.0, sensitivity=2 * K * B + B * B)
        pmdp.Release("z", stat, mech, observed=z)
    return model, ["beta"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["logistic", "regression"])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--tune", type=int, default=100)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--out", default=None, help="append a JSON line with every figure here")
    ap.add_argument("--setup-only", action="store_true", help="stop after the set-up phase")
    ap.add_argument(
        "--start-at-truth",
        action="store_true",
        help="start the parameters at the data-generating values (initvals) instead of the "
        "model's initial point",
    )
    a = ap.parse_args()
    n = int(a.n)

    import pymc as pm
    from pymc.sampling.mcmc import assign_step_methods, instantiate_steppers

    import pymc_dp  # noqa: F401  (registers the steps)

    rng = np.random.default_rng(2026)
    ph = Phases(n)
    make_data, make_model = {
        "logistic": (logistic_data, logistic_model),
        "regression": (regression_data, regression_model),
    }[a.model]
    data, z = ph.run("data", lambda: make_data(n, rng))
    model, params = ph.run("build", lambda: make_model(data, z))

    def setup():
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            steps, selected = assign_step_methods(model, None)
            return instantiate_steppers(model, steps, selected)

    step = ph.run("setup", setup)
    if a.setup_only:
        result = {"model": a.model, "n": n, "setup_only": True, "phases": ph.rows}
        print(json.dumps(result))
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(result) + "\n")
        return

    between = []  # resident memory after each iteration (between two iterations)

    def after_draw(trace, draw):
        between.append(_mem()[0])

    def sample():
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            init = TRUTH[a.model] if a.start_at_truth else None
            return pm.sample(
                a.draws, tune=a.tune, chains=1, cores=1, step=step, progressbar=False,
                random_seed=7, discard_tuned_samples=False, initvals=init, callback=after_draw,
            )  # fmt: skip

    idata = ph.run("sample", sample)
    # held between iterations: the largest resident memory seen between two iterations, above
    # the data (freed memory that the allocator has not returned to the system counts too)
    ph.rows[-1]["between_iterations_B_per_record"] = round((max(between) - ph.base) / n, 1)
    ph.rows[-1]["between_iterations_last_B_per_record"] = round((between[-1] - ph.base) / n, 1)
    steps = [type(s).__name__ for s in (step if isinstance(step, list) else [step])]
    stats = {}
    for group in ("warmup_sample_stats", "sample_stats"):
        st = idata[group]
        key = "tune" if group.startswith("warmup") else "draws"
        if "n_steps" in st:  # NUTS: gradient evaluations and tree depths
            stats[f"nuts_grad_evals_{key}"] = int(st["n_steps"].sum())
            stats[f"nuts_tree_depth_max_{key}"] = int(st["tree_depth"].max())
        if "da_accept_rate" in st:
            stats[f"da_accept_rate_{key}"] = round(float(st["da_accept_rate"].mean()), 3)
    post = {p: np.asarray(idata.posterior[p].mean(("chain", "draw"))).round(4).tolist()
            for p in params}  # fmt: skip
    result = {"model": a.model, "n": n, "iterations": a.tune + a.draws, "steps": steps,
              "stored": sorted(idata.posterior.data_vars), "posterior_mean": post,
              "start_at_truth": a.start_at_truth, "stats": stats,
              "phases": ph.rows}  # fmt: skip
    print(json.dumps(result))
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
