"""Issue 23 benchmark: pymc_dp against Bernstein & Sheldon's private-regression Gibbs sampler.

Their setting (Bernstein & Sheldon 2019, the ``driver.py`` of their public code
``github.com/gbernstein6/private_bayesian_regression``): ``N = 1000`` individuals, one covariate
plus a bias column, ``epsilon = 0.01``. Their ``generate_data.setup_data(1, N)`` draws the truth
from the priors (covariate ``x ~ N(mu_x, Tau)`` with a Normal-Inverse-Wishart prior ``mu_0 = 0,
lambda_0 = 1, psi_0 = 1, nu_0 = 50``; ``y ~ N(theta_0 x + theta_1, sigma^2)`` with a
Normal-Inverse-Gamma prior ``mu = 0, Lambda = diag(lambda_0), a_0 = 20, b_0 = 0.5``,
``lambda_0 = b_0 / (a_0 - 1)``), and their ``privatize_suff_stats`` adds Laplace noise of scale
``sensitivity / epsilon`` to the sufficient statistics ``X'X`` (upper triangle, the bias column
included), ``X'y`` and ``y'y``, with the sensitivity computed from the data's ranges (their code
says this is not private; it is their setting).

* B&S: their ``Gibbs(..., 'gibbs-update')`` (the method of their paper: sufficient statistics
  drawn from their CLT-normal law, Laplace noise as a scale mixture of normals), 2000 burn-in +
  5000 kept iterations as in their ``run_methods.py``, two chains (two seeds, the same data).
  Their code runs unmodified in its own virtual environment (Python 3.11, numpy < 1.24, scipy <
  1.11, matplotlib < 3.8, autograd; ``--make-venv`` creates it, default
  ``~/.cache/pymc_dp/bs_regression_venv``), loaded at run time from ``--bs-code`` (a checkout or
  a git directory of their repository; default the mirror path below). None of their code is
  part of this repository. Data, release and draws come back through an ``.npz`` file.
* pymc_dp: the same model written in PyMC (records ``x``, ``y`` latent, the statistic computed
  from them, ``Release`` with their Laplace noise scale at their released values), by a plain
  ``pm.sample()`` with PyMC's default lengths (2 chains, 1000 tuning + 1000 draws,
  ``cores=1``). Their sensitivity is the data's range, not a bound on a record's change, and
  pymc_dp refuses a statistic whose change can exceed the declared sensitivity; so the
  statistic clips the records to ``|x| <= 3``, ``|y| <= 5`` (about 20 prior standard deviations
  of ``x``; the true data lie far inside, and the clip is almost never active at plausible
  parameters, so the likelihood is theirs to within the clip's rare effect), and the mechanism
  declares the sensitivity of that clipped statistic (L1: 9 + 6 + 30 + 10 + 25 = 80): the
  same noise scale as theirs, with the privacy claim those bounds support. The released
  ``(X'X)[1, 1] = N + noise`` says nothing about any parameter and is left out of the model.
* ESS: ArviZ bulk ESS of ``theta_0``, ``theta_1`` and ``sigma^2``; ESS/s = the minimum over the
  three / sampling seconds (pymc_dp: PyMC's ``sampling_time``, tuning and draws; B&S: their
  ``Gibbs`` call, burn-in and kept draws, summed over the chains).
* Exactness: a long pymc_dp run (``--ref-draws`` per chain, 2 chains) is the exact reference;
  both samplers' posterior means and standard deviations are compared with it in units of their
  Monte Carlo standard error (reported, not asserted).

Usage::

    python benchmarks/bench_bs_regression.py --make-venv --out benchmarks/results/bs_regression.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp as pmdp

BS_CODE = "/work/.mirror/gbernstein6+private_bayesian_regression/repo"
BS_VENV = Path.home() / ".cache" / "pymc_dp" / "bs_regression_venv"
BS_FILES = (
    "Gibbs.py",
    "Gibbs_suff_stat_update.py",
    "NIG.py",
    "NIW.py",
    "generate_data.py",
    "util.py",
)
N, EPSILON, DATA_DIM = 1000, 0.01, 1
PARAMS = ("theta_0", "theta_1", "sigma_squared")
X_BOUND, Y_BOUND = 3.0, 5.0
# L1 replace-one sensitivity of (sum x^2, sum x, sum x y, sum y, sum y^2) under the clips
SENSITIVITY = X_BOUND**2 + 2 * X_BOUND + 2 * X_BOUND * Y_BOUND + 2 * Y_BOUND + Y_BOUND**2

# their run, in their environment: data and release (seed_data), then Gibbs (seed_chain)
_DRIVER = textwrap.dedent(
    """
    import sys, time, warnings
    import numpy as np
    code, out, seed_data, seed_chain, n, eps, burn, iters = sys.argv[1:9]
    sys.path.insert(0, code)
    warnings.simplefilter("ignore")
    from generate_data import setup_data, privatize_suff_stats
    from Gibbs import Gibbs
    np.random.seed(int(seed_data))
    dpp, mpp, X, y, sx, sy, truth = setup_data(1, int(n))
    S = {"XX": X.T.dot(X), "Xy": X.T.dot(y), "yy": y.T.dot(y)[0, 0]}
    Z, sens = privatize_suff_stats(S, sx, sy, float(eps))
    np.random.seed(int(seed_chain))
    t0 = time.perf_counter()
    theta, s2 = Gibbs(dpp, mpp, int(n), float(eps), Z, sens, int(burn), int(iters), "gibbs-update")
    secs = time.perf_counter() - t0
    np.savez(out, X=X, y=y, Z_XX=Z["XX"], Z_Xy=Z["Xy"], Z_yy=Z["yy"], sens=sens,
             theta=theta, s2=s2, seconds=secs, true_theta=truth["theta"],
             true_s2=truth["sigma_squared"], mu0=dpp[0], lam_x=dpp[1], psi=dpp[2], nu=dpp[3],
             m_mu=mpp[0], m_lam=mpp[1], a0=mpp[2], b0=mpp[3])
    """
)


def make_venv(venv: Path) -> None:
    """Their environment: Python 3.11 with the package versions their code runs on."""
    if (venv / "bin" / "python").exists():
        return
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    pins = ["numpy<1.24", "scipy<1.11", "matplotlib<3.8", "autograd"]
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pins], check=True)


def export_code(source: str, into: Path) -> str:
    """Their modules in ``into`` (from a checkout, or ``git show`` of a git directory)."""
    src = Path(source)
    git_dir = src if (src / "HEAD").exists() else src / ".git"
    if all((src / f).exists() for f in BS_FILES):
        return str(src)
    for name in BS_FILES:
        text = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"HEAD:{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (into / name).write_text(text)
    commit = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--short=12", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{into} (exported from {git_dir}, commit {commit})"


def run_bs(venv: Path, code: str, seed_data: int, seed_chain: int, burn: int, iters: int):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bs.npz"
        args = [str(venv / "bin" / "python"), "-c", _DRIVER, code, str(out), str(seed_data)]
        args += [str(seed_chain), str(N), str(EPSILON), str(burn), str(iters)]
        subprocess.run(args, check=True)
        with np.load(out) as f:
            return {k: f[k] for k in f.files}


def build_model(run: dict) -> pm.Model:
    """The release as a PyMC model of the true records (module docstring)."""
    x_obs, y_obs = run["X"][:, 0], run["y"][:, 0]
    f64 = np.float64
    lam_x, psi, nu = f64(run["lam_x"]), f64(np.ravel(run["psi"])[0]), f64(run["nu"])
    lam0 = np.diag(run["m_lam"]).astype(np.float64)
    a0, b0 = f64(run["a0"]), f64(run["b0"])
    xb, yb = f64(X_BOUND), f64(Y_BOUND)
    if np.abs(x_obs).max() > xb or np.abs(y_obs).max() > yb:
        raise ValueError("the data exceed the clip bounds: the model would not be their release")
    z = np.array(
        [run["Z_XX"][0, 0], run["Z_XX"][0, 1], run["Z_Xy"][0, 0], run["Z_Xy"][1, 0], run["Z_yy"]],
        dtype=np.float64,
    )
    with pm.Model() as model:
        tau = pm.InverseGamma("tau", alpha=nu / 2.0, beta=psi / 2.0)  # IW(nu, psi), d = 1
        mu_x = pm.Normal("mu_x", f64(np.ravel(run["mu0"])[0]), pt.sqrt(tau / lam_x))
        x = pm.Normal("x", mu_x, pt.sqrt(tau), shape=N)
        s2 = pm.InverseGamma("sigma_squared", alpha=a0, beta=b0)
        t0 = pm.Normal("theta_0", f64(0.0), pt.sqrt(s2 / lam0[0]))
        t1 = pm.Normal("theta_1", f64(0.0), pt.sqrt(s2 / lam0[1]))
        y = pm.Normal("y", t0 * x + t1, pt.sqrt(s2), shape=N)
        xc, yc = pt.clip(x, -xb, xb), pt.clip(y, -yb, yb)
        stat = pt.stack([(xc * xc).sum(), xc.sum(), (xc * yc).sum(), yc.sum(), (yc * yc).sum()])
        mech = pmdp.Laplace(scale=float(run["sens"]) / EPSILON, sensitivity=SENSITIVITY)
        pmdp.Release("z", stat, mech, observed=z)
    return model


def sample(model, draws, tune, seed):
    with model:
        return pm.sample(
            draws=draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


def _ess(draws_by_param: dict) -> dict:
    return {k: float(az.ess(np.asarray(v), method="bulk")) for k, v in draws_by_param.items()}


def _rhat(draws_by_param: dict) -> float:
    return max(float(az.rhat(np.asarray(v))) for v in draws_by_param.values())


def pymc_dp_draws(idata) -> dict:
    post = idata.posterior
    return {k: post[k].values for k in PARAMS}


def bs_draws(runs) -> dict:
    return {
        "theta_0": np.stack([r["theta"][:, 0] for r in runs]),
        "theta_1": np.stack([r["theta"][:, 1] for r in runs]),
        "sigma_squared": np.stack([r["s2"] for r in runs]),
    }


def z_scores(draws: dict, ref: dict) -> dict:
    """``(mean - ref mean) / MCSE`` and the same for the sd, per parameter."""
    out = {}
    for k, v in draws.items():
        v = np.asarray(v)
        r = np.asarray(ref[k])
        mc_mean = float(az.mcse(v, method="mean"))
        mc_sd = float(az.mcse(v, method="sd"))
        mean_ref, sd_ref = float(r.mean()), float(r.std(ddof=1))
        mcr_mean = float(az.mcse(r, method="mean"))
        mcr_sd = float(az.mcse(r, method="sd"))
        out[k] = (
            float(v.mean()),
            float(v.std(ddof=1)),
            (float(v.mean()) - mean_ref) / np.hypot(mc_mean, mcr_mean),
            (float(v.std(ddof=1)) - sd_ref) / np.hypot(mc_sd, mcr_sd),
        )
    return out


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bs-code", default=os.environ.get("PYMC_DP_BS_REG_CODE", BS_CODE))
    parser.add_argument("--venv", type=Path, default=BS_VENV)
    parser.add_argument("--make-venv", action="store_true", help="create their environment")
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--ref-draws", type=int, default=20_000)
    parser.add_argument("--out", help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    if args.make_venv:
        make_venv(args.venv)
    load0, start = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        code = export_code(args.bs_code, Path(tmp))
        code_dir = code.split(" (")[0]
        bs = [run_bs(args.venv, code_dir, args.seed, args.seed + 1 + c, 2000, 5000) for c in (0, 1)]
    model = build_model(bs[0])
    idata = sample(model, 1000, 1000, args.seed)
    ref = sample(build_model(bs[0]), args.ref_draws, 2000, args.seed + 7)
    secs = float(idata.sample_stats.attrs["sampling_time"])
    bs_secs = float(sum(r["seconds"] for r in bs))
    ours, theirs, exact = pymc_dp_draws(idata), bs_draws(bs), pymc_dp_draws(ref)
    ess_o, ess_t = _ess(ours), _ess(theirs)
    per_o, per_t = min(ess_o.values()) / secs, min(ess_t.values()) / bs_secs
    lines = [
        "# pymc_dp against Bernstein & Sheldon's private-regression Gibbs sampler (issue 23)",
        "",
        f"`python benchmarks/bench_bs_regression.py` (method in its docstring); seed {args.seed}; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; whole run "
        f"{time.perf_counter() - start:.0f} s; load average at start "
        f"{tuple(round(x, 2) for x in load0)}, at end "
        f"{tuple(round(x, 2) for x in os.getloadavg())}.",
        f"Their code: {code}; their environment: {args.venv}.",
        f"Data: N = {N}, epsilon = {EPSILON}, sensitivity {float(bs[0]['sens']):.4g} (Laplace "
        f"scale {float(bs[0]['sens']) / EPSILON:.4g}); truth theta = "
        f"{np.round(bs[0]['true_theta'].ravel(), 4).tolist()}, sigma^2 = "
        f"{float(bs[0]['true_s2']):.4g}.",
        "",
        "| sampler | iterations | seconds | bulk ESS theta_0 / theta_1 / sigma^2 | max R-hat "
        "| min ESS/s |",
        "|---|---|---|---|---|---|",
        f"| pymc_dp, plain `pm.sample()` | 2 x (1000 + 1000) | {secs:.1f} | "
        + " / ".join(f"{ess_o[k]:.0f}" for k in PARAMS)
        + f" | {_rhat(ours):.3f} | {per_o:.3g} |",
        f"| B&S gibbs-update | 2 x (2000 + 5000) | {bs_secs:.1f} | "
        + " / ".join(f"{ess_t[k]:.0f}" for k in PARAMS)
        + f" | {_rhat(theirs):.3f} | {per_t:.3g} |",
        "",
        f"Ratio of min ESS/s, pymc_dp / B&S: **{per_o / per_t:.3g}**; per parameter: "
        + ", ".join(f"{k} {(ess_o[k] / secs) / (ess_t[k] / bs_secs):.3g}" for k in PARAMS)
        + ".",
        "",
        f"Exact reference: pymc_dp, 2 x (2000 + {args.ref_draws}) iterations (max R-hat "
        f"{_rhat(exact):.4f}, min bulk ESS {min(_ess(exact).values()):.0f}). z = difference "
        "from the reference in units of the combined Monte Carlo standard error.",
        "",
        "| parameter | reference mean (sd) | pymc_dp mean (sd) | z mean, z sd | B&S mean (sd) "
        "| z mean, z sd |",
        "|---|---|---|---|---|---|",
    ]
    zo, zt = z_scores(ours, exact), z_scores(theirs, exact)
    for k in PARAMS:
        r = np.asarray(exact[k])
        lines.append(
            f"| {k} | {r.mean():.5f} ({r.std(ddof=1):.5f}) | {zo[k][0]:.5f} ({zo[k][1]:.5f}) | "
            f"{zo[k][2]:+.1f}, {zo[k][3]:+.1f} | {zt[k][0]:.5f} ({zt[k][1]:.5f}) | "
            f"{zt[k][2]:+.1f}, {zt[k][3]:+.1f} |"
        )
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
