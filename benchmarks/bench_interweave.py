"""Issue 23: plain ``pm.sample()`` with and without the interweaving move, against stock NUTS.

Models (``n = 100`` records):

(a) ``regression``: Ju, Awan, Gong & Rao (2022) private linear regression as pymc_dp builds it,
    ``release_sufficient_statistics((X, y), "linear_regression", ...).model(prior)``, ``d = 2``
    predictors without intercept, both private. Data: ``X ~ N(0, 0.5^2)``, ``y = X (0.8, -0.5)'
    + N(0, 0.3^2)``, clamped to ``X in [-1, 1]``, ``y in [-1, 1]``; released vector
    (upper triangle of ``X'X``, ``X'y``, ``y'y``) with Laplace noise calibrated to its L1
    sensitivity at ``epsilon``; prior ``(mu, precision, alpha, beta) = (0, I, 2, 1)`` and the
    default covariate model (``X_v ~ InvGamma(2, 1)``, ``X_mu ~ N(0, sqrt(X_v))``).
(b) ``normal``: ``release_sufficient_statistics(x, "normal", bounds=(-2, 2), ...)``, records
    ``x ~ N(0.5, 0.8^2)``, released ``[sum clip(x), sum clip(x)^2]`` with the analytic
    Gaussian mechanism at ``(epsilon, delta = 1e-5)`` calibrated to its L2 sensitivity; prior
    ``(mu, kappa, alpha, beta) = (0, 1, 2, 1)``.

Variants per model and ``epsilon``:

* ``pymc_dp+iw``: plain ``pm.sample()`` on the pymc_dp model after
  :func:`pymc_dp.step_methods.interweave.install_interweave_hook` (DataAugmentation for the
  records, ConjugateGibbs for the parameters, the interweaving move appended);
* ``pymc_dp+iw-hmc``: the same with ``interweave={"method": "hmc", "n_steps": 4,
  "leapfrog": 6}`` (4 HMC transitions of 6 leapfrog steps per iteration, one joint block);
* ``pymc_dp``: the same with ``interweave=False`` (the centred scan alone);
* ``stock NUTS``: the same model written without pymc_dp (records as ``pm.Normal`` latent
  variables, the clamped statistic, ``pm.Laplace`` / ``pm.Normal`` observed at the release),
  plain ``pm.sample()`` (NUTS on everything).

Every run: PyMC's default lengths (``tune=1000, draws=1000, chains=2``), ``cores=1``,
``random_seed=1``, one fresh process per run (compile caches warm after the first). Reported:
min over the parameters of the bulk ESS (regression: ``beta``, ``v``, ``X_mu``, ``X_v``;
normal: ``mu``, ``v``), max R-hat over them, ``sampling_time`` of the posterior attrs (the
sampling loop), the wall time of the whole ``pm.sample`` call, and min ESS per second of
sampling time. Coefficient columns (``beta``) are given separately for the regression.

Run: ``.venv/bin/python benchmarks/bench_interweave.py --out benchmarks/results/interweave.md``
(one row: ``--one regression 1.0 pymc_dp+iw``; a variant ``'iw:{"n_steps": 20}'`` runs the move
with those options).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

N, D = 100, 2
EPSILONS = (0.1, 1.0, 10.0)
VARIANTS = ("pymc_dp+iw", "pymc_dp+iw-hmc", "pymc_dp", "stock NUTS")
#: Interweave options of each pymc_dp variant (``pm.sample(interweave=...)``)
IW_OPTIONS = {
    "pymc_dp+iw": {},
    "pymc_dp+iw-hmc": {"method": "hmc", "n_steps": 4, "leapfrog": 6},
    "pymc_dp": False,
}
REG_BOUNDS = ((-1.0, 1.0), (-1.0, 1.0))
REG_PRIOR = (np.zeros(D), np.eye(D), 2.0, 1.0)
NORMAL_BOUNDS = (-2.0, 2.0)
NORMAL_PRIOR = (0.0, 1.0, 2.0, 1.0)
DELTA = 1e-5


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def regression_release(eps: float, seed: int = 1):
    import pymc_dp as pmdp
    from pymc_dp.releases import release_sufficient_statistics

    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 0.5, size=(N, D))
    y = X @ np.array([0.8, -0.5]) + rng.normal(0.0, 0.3, size=N)
    return release_sufficient_statistics(
        (X, y),
        "linear_regression",
        bounds=REG_BOUNDS,
        mechanism=functools.partial(pmdp.Laplace, epsilon=eps),
        rng=rng,
        allow_float=True,  # a simulation: floating-point noise is fine here
    )


def normal_release(eps: float, seed: int = 1):
    import pymc_dp as pmdp
    from pymc_dp.releases import release_sufficient_statistics

    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 0.8, size=N)
    return release_sufficient_statistics(
        x,
        "normal",
        bounds=NORMAL_BOUNDS,
        mechanism=functools.partial(pmdp.Gaussian, epsilon=eps, delta=DELTA),
        rng=rng,
        allow_float=True,  # a simulation: floating-point noise is fine here
    )


def stock_regression(rel):
    """The model of ``rel.model(REG_PRIOR)`` written in plain PyMC (no pymc_dp)."""
    import pymc as pm
    import pytensor.tensor as pt

    (xl, xh), (yl, yh) = rel.bounds
    c, h = 0.5 * (xl + xh), 0.5 * (xh - xl)
    mu, lam, a0, b0 = REG_PRIOR
    root = np.linalg.inv(np.linalg.cholesky(lam)).T  # L^-T
    with pm.Model() as m:
        xv = pm.InverseGamma("X_v", alpha=_f64(2.0), beta=_f64(h * h), shape=D)
        xm = pm.Normal("X_mu", mu=_f64(np.full(D, c)), sigma=pt.sqrt(xv), shape=D)
        X = pm.Normal("X", mu=xm, sigma=pt.sqrt(xv), shape=(N, D))
        v = pm.InverseGamma("v", alpha=_f64(a0), beta=_f64(b0))
        white = pm.Normal("beta_white", mu=_f64(0.0), sigma=pt.sqrt(v), shape=D)
        beta = pm.Deterministic("beta", _f64(mu) + pt.dot(_f64(root), white))
        y = pm.Normal("y", mu=pt.dot(X, beta), sigma=pt.sqrt(v), shape=N)
        xc, yc = pt.clip(X, _f64(xl), _f64(xh)), pt.clip(y, _f64(yl), _f64(yh))
        iu = np.triu_indices(D)
        stat = pt.concatenate([pt.dot(xc.T, xc)[iu], pt.dot(xc.T, yc), pt.dot(yc, yc)[None]])
        pm.Laplace("release", mu=stat, b=_f64(rel.mechanism.scale), observed=_f64(rel.value))
    return m


def stock_normal(rel):
    """The model of ``rel.model(NORMAL_PRIOR)`` written in plain PyMC (no pymc_dp)."""
    import pymc as pm
    import pytensor.tensor as pt

    mu0, k0, a0, b0 = NORMAL_PRIOR
    lo, hi = rel.bounds
    with pm.Model() as m:
        v = pm.InverseGamma("v", alpha=_f64(a0), beta=_f64(b0))
        mu = pm.Normal("mu", mu=_f64(mu0), sigma=pt.sqrt(v / _f64(k0)))
        x = pm.Normal("x", mu=mu, sigma=pt.sqrt(v), shape=N)
        xc = pt.clip(x, _f64(lo), _f64(hi))
        stat = pt.stack([xc, xc * xc], axis=1).sum(axis=0)
        pm.Normal("release", mu=stat, sigma=_f64(rel.mechanism.sigma), observed=_f64(rel.value))
    return m


PARAMS = {"regression": ["beta", "v", "X_mu", "X_v"], "normal": ["mu", "v"]}


def _mean_accept(acc):
    """Mean acceptance of the kept draws; None when the move had stopped (all NaN)."""
    vals = np.asarray(acc, dtype=np.float64)
    return float(np.nanmean(vals)) if np.isfinite(vals).any() else None


def run_one(model_name: str, eps: float, variant: str, seed: int = 1) -> dict:
    import arviz as az
    import pymc as pm

    import pymc_dp  # noqa: F401  (registers pymc_dp's steps)
    from pymc_dp.step_methods.interweave import install_interweave_hook

    install_interweave_hook()
    warnings.simplefilter("ignore")
    rel = regression_release(eps) if model_name == "regression" else normal_release(eps)
    prior = REG_PRIOR if model_name == "regression" else NORMAL_PRIOR
    if variant == "stock NUTS":
        model = stock_regression(rel) if model_name == "regression" else stock_normal(rel)
        kw = {}
    else:
        model = rel.model(prior)
        # "iw:{json}": the move with these options (the n_steps study)
        opts = json.loads(variant[3:]) if variant.startswith("iw:") else IW_OPTIONS[variant]
        kw = {"interweave": opts}
    with model:
        t0 = time.perf_counter()
        idata = pm.sample(
            cores=1, random_seed=seed, progressbar=False, compute_convergence_checks=False, **kw
        )
        wall = time.perf_counter() - t0
    names = PARAMS[model_name]
    summ = az.summary(idata, var_names=names)
    st = float(idata.posterior.attrs["sampling_time"])
    out = {
        "model": model_name,
        "eps": eps,
        "variant": variant,
        "ess_min": float(summ["ess_bulk"].min()),
        "rhat_max": float(summ["r_hat"].max()),
        "sampling_time": st,
        "wall": wall,
        "ess_per_s": float(summ["ess_bulk"].min()) / st,
        "iw_accept": (
            _mean_accept(idata.sample_stats["iw_accept"])
            if "iw_accept" in idata.sample_stats
            else None
        ),
        "steps": type(model).__name__,
    }
    if model_name == "regression":
        coef = az.summary(idata, var_names=["beta"])
        out["coef_ess_min"] = float(coef["ess_bulk"].min())
        out["coef_rhat_max"] = float(coef["r_hat"].max())
        out["divergences"] = (
            int(idata.sample_stats["diverging"].sum())
            if "diverging" in idata.sample_stats
            else None
        )
    elif "diverging" in idata.sample_stats:
        out["divergences"] = int(idata.sample_stats["diverging"].sum())
    return out


def _row(r: dict) -> str:
    coef = f"{r['coef_ess_min']:.0f} | {r['coef_rhat_max']:.3f}" if "coef_ess_min" in r else "– | –"
    acc = "–" if r.get("iw_accept") is None else f"{r['iw_accept']:.2f}"
    div = r.get("divergences")
    return (
        f"| {r['model']} | {r['eps']:g} | {r['variant']} | {r['ess_min']:.0f} | "
        f"{r['rhat_max']:.3f} | {coef} | {r['sampling_time']:.1f} | {r['wall']:.1f} | "
        f"{r['ess_per_s']:.1f} | {acc} | {'–' if div is None else div} |"
    )


HEADER = (
    "| model | epsilon | variant | min bulk ESS | max R-hat | coef. min ESS | coef. max R-hat "
    "| sampling (s) | pm.sample wall (s) | min ESS/s | iw_accept | divergences |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "EPS", "VARIANT"))
    ap.add_argument("--models", default="regression,normal")
    ap.add_argument("--eps", default=",".join(str(e) for e in EPSILONS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seed", type=int, default=1, help="pm.sample's random_seed")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.one:
        res = run_one(args.one[0], float(args.one[1]), args.one[2], args.seed)
        print(json.dumps(res))
        return
    rows = []
    for model_name in args.models.split(","):
        for eps in (float(e) for e in args.eps.split(",")):
            for variant in args.variants.split(","):
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--one",
                        model_name,
                        str(eps),
                        variant,
                        "--seed",
                        str(args.seed),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append(res)
                print(_row(res), flush=True)
    if args.out:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        load = os.getloadavg()
        with open(args.out, "a") as fh:
            fh.write(
                f"\n## Run of {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
                f"commit {commit}, load average after the run {load[0]:.2f} / {load[1]:.2f} / "
                f"{load[2]:.2f}\n\n{HEADER}\n"
            )
            fh.write("\n".join(_row(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
