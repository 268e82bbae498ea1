"""Issue 12 benchmark: pymc_dp against Bernstein & Sheldon's CLT Gibbs sampler, on their own case.

Case (Bernstein & Sheldon 2018, ``Bounded_Suff_Stats/driver.py`` of their public code
``github.com/gbernstein6/private_bayesian_expfam``): ``p ~ Beta(10, 10)``, ``N`` Bernoulli(p)
records, their sum released with Laplace noise at epsilon = 0.1 (sensitivity 1, scale 10). One data
set per ``N``: a true ``p`` drawn from the prior, the count ``S ~ Binomial(N, p)``, and
``z = S + Laplace(10)`` drawn by pymc_dp's own :class:`~pymc_dp.mechanisms.laplace.Laplace`
mechanism; both samplers get the same ``z``.

* pymc_dp: ``p ~ Beta(10, 10); x ~ Bernoulli(p, shape=N); Release("z", x.sum(), Laplace(epsilon=0.1))``
  sampled by plain ``pm.sample(draws, tune, chains=1, cores=1, var_names=["p"])``, so whatever
  step methods ``pm.sample`` assigns are measured; their classes and variables (PyMC's own step
  summary, captured from its log) are reported. Sampling time is PyMC's ``sampling_time`` (tuning
  and draws); "setup" is model build plus the rest of the ``pm.sample`` call (step assignment,
  compilation, initial point, packaging the trace). A short warm-up run of each sampler precedes
  the timed runs, so numba's first-call JIT of the step kernels (which happens inside the first
  sampling loop) is not charged to sampling.
* B&S: their module ``Bounded_Suff_Stats/Gibbs.py`` with their ``Beta_Binomial`` pair, loaded at
  run time from ``--bs-code`` (or the ``PYMC_DP_BS_CODE`` environment variable): a directory
  holding ``Gibbs.py`` and ``distributions.py``, a checkout of their repository, or a bare git
  directory (the two files are exported with ``git show HEAD:...`` into a temporary directory).
  None of their code is part of this repository. Their ``calculate_Gibbs_posterior`` fixes 500
  burn-in + 1000 kept iterations in its body; to run ``tune`` burn-in + ``draws`` kept iterations
  like pymc_dp, the harness calls their four step functions (``initialize_Gibbs``,
  ``sample_sufficient_statistics``, ``sample_noise_covariance``, ``sample_model_parameters``) in
  the same order as that function. It checks once per run that this reproduces
  ``calculate_Gibbs_posterior`` draw for draw (same global numpy seed, their 500 + 1000 setting).
  No other adaptation was needed (their code runs under Python 3.12, numpy 2 and scipy with
  warnings as errors). Their timing covers burn-in and kept iterations, as pymc_dp's does.
* ESS of p: ``arviz.ess`` (bulk) of the kept draws of one chain; ESS/s = ESS / sampling seconds.
  Figures are medians over ``--reps`` runs (different sampler seeds, same data); all sizes and both
  samplers run in one process, so ratios are measured under the same load.
* Posterior check at N = 10^3 (report, not assert): the exact posterior of ``p`` is the mixture
  over ``S = 0..N`` of ``Beta(10 + S, 10 + N - S)`` with weights proportional to
  ``BetaBinomial(S; N, 10, 10) * exp(-|z - S| / 10)``, i.e. the grid-over-p, sum-over-S posterior
  with ``p`` integrated in closed form; beside it the noise-ignoring ``Beta(10 + z, 10 + N - z)``.

Goals: issue 12 (at N = 10^6 within 3x of B&S's ESS/s; pymc_dp's sampling time at 10^6 at most
3x that at 10^3) and issue 23 (at least B&S's ESS/s at every N from 10^3 to 10^7).

Usage::

    python benchmarks/bench_bs_collapse.py --sizes 1e3,1e4,1e5,1e6,1e7 --reps 3 \\
        --out benchmarks/results/bs_collapse.md
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import logging
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import arviz as az
import numpy as np
import pymc as pm
from scipy import stats

import pymc_dp  # noqa: F401  (registers pymc_dp's step methods with PyMC, as for any user)
from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.laplace import Laplace

__all__ = [
    "BS_ENV",
    "Settings",
    "bs_chain",
    "bs_driver_matches",
    "exact_posterior",
    "load_bs",
    "main",
    "make_data",
    "run_pymc_dp",
]

PRIOR = (10.0, 10.0)
EPS = 0.1
LAPLACE_SCALE = 1.0 / EPS  # sensitivity 1
BS_ENV = "PYMC_DP_BS_CODE"
BS_DEFAULT = "/work/.mirror/gbernstein6+private_bayesian_expfam/repo"
BS_SUBDIR = "Bounded_Suff_Stats"
BS_FILES = ("Gibbs.py", "distributions.py")
BS_OWN_BURNIN, BS_OWN_KEPT = 500, 1000  # fixed inside their calculate_Gibbs_posterior
REPO = Path(__file__).resolve().parents[1]
_STEP_LINE = re.compile(r"^>*\s*([A-Za-z_][\w\[\]]*): \[(.*)\]$")


@dataclass(frozen=True)
class Settings:
    """What one benchmark run measures (sizes, repetitions, iterations, seed)."""

    sizes: tuple[int, ...]
    reps: int = 3
    draws: int = 1500
    tune: int = 500
    seed: int = 0


@dataclass(frozen=True)
class Data:
    """One simulated release: true ``p``, true count ``s`` and the released ``z``."""

    n: int
    p_true: float
    s_true: int
    z: float


@dataclass
class Run:
    """One sampler run: kept draws of ``p``, sampling seconds, setup seconds, step summary, and
    the process's CPU seconds per wall second over the run (below 1: other jobs took the CPU)."""

    draws: np.ndarray
    seconds: float
    setup: float = float("nan")
    steps: str = ""
    cpu_share: float = float("nan")
    ess: float = field(init=False)

    def __post_init__(self):
        self.ess = float(az.ess(np.asarray(self.draws, dtype=np.float64)[None, :]))


def make_data(n: int, seed: int = 0) -> Data:
    """Draw ``p`` from the Beta(10, 10) prior, ``S ~ Binomial(n, p)``, release ``S`` (eps 0.1).

    Examples
    --------
    >>> d = make_data(100, seed=1)
    >>> d.n, 0 <= d.s_true <= 100, 0.0 < d.p_true < 1.0
    (100, True, True)
    """
    rng = np.random.default_rng([seed, n])
    p_true = float(rng.beta(*PRIOR))
    s_true = int(rng.binomial(n, p_true))
    z = float(
        Laplace(epsilon=np.float64(EPS)).release(np.float64(s_true), rng=rng, allow_float=True)
    )
    return Data(n=n, p_true=p_true, s_true=s_true, z=z)


def exact_posterior(n: int, z: float) -> tuple[float, float]:
    """Exact posterior mean and sd of ``p`` given the Laplace-noised count ``z`` of ``n`` records.

    The posterior is a mixture over the true count ``S = 0..n`` (every term summed, nothing
    truncated) of ``Beta(10 + S, 10 + n - S)``, weighted by
    ``BetaBinomial(S; n, 10, 10) * exp(-|z - S| / b)`` with ``b = 1 / 0.1``.

    Examples
    --------
    >>> m, s = exact_posterior(1000, 480.0)
    >>> bool(0.45 < m < 0.5), bool(0.0 < s < 0.03)
    (True, True)
    """
    a, b = PRIOR
    s = np.arange(n + 1, dtype=np.float64)
    logw = stats.betabinom.logpmf(s, n, a, b) - np.abs(z - s) / LAPLACE_SCALE
    w = np.exp(logw - logw.max())
    w /= w.sum()
    a_post, total = a + s, a + b + n
    mean = float(w @ (a_post / total))
    second = float(w @ (a_post * (a_post + 1.0) / (total * (total + 1.0))))
    return mean, float(np.sqrt(max(second - mean * mean, 0.0)))


def build_model(data: Data) -> pm.Model:
    """The user's model: Bernoulli records, their sum released through Laplace(eps = 0.1)."""
    with pm.Model() as model:
        p = pm.Beta("p", np.float64(PRIOR[0]), np.float64(PRIOR[1]))
        x = pm.Bernoulli("x", p=p, shape=data.n)
        Release("z", x.sum(), Laplace(epsilon=np.float64(EPS)), observed=np.float64(data.z))
    return model


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _captured_pymc_log():
    """Collect PyMC's INFO messages (its step summary) for the duration of the block."""
    logger = logging.getLogger("pymc")
    handler, level = _ListHandler(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _step_summary(messages: list[str]) -> str:
    """``"ConjugateGibbs: [p]; DataAugmentation: [x]"`` from PyMC's step-hierarchy lines."""
    found = [m.group(0).lstrip("> ") for m in map(_STEP_LINE.match, messages) if m]
    return "; ".join(found) if found else "(no step summary logged)"


def run_pymc_dp(data: Data, draws: int, tune: int, seed: int) -> Run:
    """Time plain ``pm.sample`` on the model of ``data`` (1 chain); see the module docstring.

    Examples
    --------
    >>> r = run_pymc_dp(make_data(20, seed=1), draws=10, tune=5, seed=1)  # doctest: +SKIP
    >>> r.draws.shape  # doctest: +SKIP
    (10,)
    """
    t0 = time.perf_counter()
    model = build_model(data)
    t_build = time.perf_counter() - t0
    with _captured_pymc_log() as messages, model:
        t1, c1 = time.perf_counter(), time.process_time()
        idata = pm.sample(
            draws=draws, tune=tune, chains=1, cores=1, var_names=["p"],
            compute_convergence_checks=False, progressbar=False, random_seed=seed,
        )  # fmt: skip
        t_call, c_call = time.perf_counter() - t1, time.process_time() - c1
    seconds = float(idata.posterior.attrs["sampling_time"])
    return Run(
        draws=np.asarray(idata.posterior["p"].values, dtype=np.float64).reshape(-1),
        seconds=seconds,
        setup=t_build + t_call - seconds,
        steps=_step_summary(messages),
        cpu_share=c_call / t_call,  # over the whole pm.sample call
    )


def _import_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True
    ).stdout


def _load_from(directory: Path, origin: str) -> SimpleNamespace:
    gibbs = _import_file("bs_private_expfam_gibbs", directory / BS_FILES[0])
    dists = _import_file("bs_private_expfam_distributions", directory / BS_FILES[1])
    pair = dists.Beta_Binomial()
    if pair.sensitivity != 1 or not np.array_equal(np.ravel(pair.prior_parameters), PRIOR):
        raise ValueError(f"their Beta_Binomial is not Beta(10, 10) / sensitivity 1: {origin}")
    return SimpleNamespace(gibbs=gibbs, dists=dists, origin=origin)


def load_bs(source: str | os.PathLike | None = None) -> tuple[SimpleNamespace | None, str]:
    """Load B&S's bounded-statistics Gibbs module; ``(None, reason)`` if it is not there.

    ``source``: a directory with ``Gibbs.py`` and ``distributions.py``, a checkout of their
    repository, or a bare git directory of it; default ``$PYMC_DP_BS_CODE``, then the mirror path.

    Examples
    --------
    >>> load_bs("/nonexistent/path")[0] is None
    True
    """
    path = Path(source or os.environ.get(BS_ENV) or BS_DEFAULT)
    try:
        if (path / BS_SUBDIR / BS_FILES[0]).is_file():
            return _load_from(path / BS_SUBDIR, str(path / BS_SUBDIR)), "loaded"
        if (path / BS_FILES[0]).is_file():
            return _load_from(path, str(path)), "loaded"
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            commit = _git(path, "rev-parse", "HEAD").strip()
            with tempfile.TemporaryDirectory() as tmp:
                for name in BS_FILES:
                    text = _git(path, "show", f"{commit}:{BS_SUBDIR}/{name}")
                    Path(tmp, name).write_text(text)
                origin = f"{path} (git, commit {commit[:12]}, exported with git show)"
                return _load_from(Path(tmp), origin), "loaded"
    except Exception as exc:  # their code or git missing or broken: skip their column, say why
        return None, f"B&S code at {path} could not be loaded: {type(exc).__name__}: {exc}"
    return None, f"B&S code not found at {path} (set --bs-code or ${BS_ENV})"


@contextlib.contextmanager
def _numpy_global_seed(seed: int):
    """Their code draws from numpy's global RandomState (also through scipy's ``rvs``)."""
    saved = np.random.get_state()  # noqa: NPY002 (their code uses the legacy global state)
    np.random.seed(seed)  # noqa: NPY002
    try:
        yield
    finally:
        np.random.set_state(saved)  # noqa: NPY002


def bs_chain(bs: SimpleNamespace, data: Data, draws: int, burnin: int, seed: int) -> Run:
    """Run B&S's CLT Gibbs sampler: ``burnin`` + ``draws`` iterations of their step functions.

    Their sampler is a Python loop over iterations by design; the harness only calls it.
    """
    g, pair = bs.gibbs, bs.dists.Beta_Binomial()
    z, n = np.array([[data.z]]), float(data.n)
    out = np.empty(draws)
    with _numpy_global_seed(seed):
        t0, c0 = time.perf_counter(), time.process_time()
        theta, noise_cov = g.initialize_Gibbs(pair, EPS)
        for it in range(burnin + draws):
            s = g.sample_sufficient_statistics(theta, z, noise_cov, pair, n)
            noise_cov = g.sample_noise_covariance(s, z, pair, EPS)
            theta, _ = g.sample_model_parameters(s, pair, n)
            if it >= burnin:
                out[it - burnin] = np.ravel(theta)[0]
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return Run(draws=out, seconds=seconds, cpu_share=cpu / seconds)


def bs_driver_matches(bs: SimpleNamespace, data: Data, seed: int) -> bool:
    """Whether :func:`bs_chain` reproduces their ``calculate_Gibbs_posterior`` draw for draw.

    Both are compared after one warm-up iteration: scipy's ``truncnorm.rvs`` takes more words
    from numpy's global state on its first call in a process than on later calls (same value),
    so the first chain of a process is not reproducible from its seed.
    """
    bs_chain(bs, data, draws=1, burnin=0, seed=seed)
    pair = bs.dists.Beta_Binomial()
    with _numpy_global_seed(seed):
        ref = bs.gibbs.calculate_Gibbs_posterior(np.array([[data.z]]), pair, float(data.n), EPS)
    mine = bs_chain(bs, data, BS_OWN_KEPT, BS_OWN_BURNIN, seed)
    return bool(np.array_equal(np.ravel(ref), mine.draws))


@dataclass
class SizeResult:
    """All runs at one ``N``: the data, pymc_dp's runs and B&S's runs (empty if skipped)."""

    data: Data
    dp: list[Run] = field(default_factory=list)
    bs: list[Run] = field(default_factory=list)


def _median(values) -> float:
    return float(np.median(np.asarray(list(values), dtype=np.float64)))


def _ess_per_s(runs: list[Run]) -> list[float]:
    return [r.ess / r.seconds for r in runs]


def warm_up(bs: SimpleNamespace | None, settings: Settings) -> str:
    """One short run of each sampler (not counted): numba JIT-compiles the step kernels on their
    first call, inside the first sampling loop of the process."""
    data = make_data(min(settings.sizes), settings.seed + 1)
    t0 = time.perf_counter()
    run_pymc_dp(data, draws=20, tune=20, seed=settings.seed + 99)
    text = f"pymc_dp {time.perf_counter() - t0:.1f} s"
    if bs is not None:
        t0 = time.perf_counter()
        bs_chain(bs, data, draws=20, burnin=20, seed=settings.seed + 99)
        text += f", B&S {time.perf_counter() - t0:.2f} s"
    return f"Warm-up runs (N = {data.n}, 20 + 20 iterations, not counted): {text}"


def run_sizes(settings: Settings, bs: SimpleNamespace | None) -> list[SizeResult]:
    """Every size, ``settings.reps`` runs of each sampler on the same data, in one process."""
    results = []
    for n in settings.sizes:
        res = SizeResult(make_data(n, settings.seed))
        for rep in range(settings.reps):
            seed = 1000 * settings.seed + rep + 1
            res.dp.append(run_pymc_dp(res.data, settings.draws, settings.tune, seed))
            if bs is not None:
                res.bs.append(bs_chain(bs, res.data, settings.draws, settings.tune, seed))
            bs_txt = f"{_ess_per_s(res.bs)[-1]:.0f}" if res.bs else "skipped"
            print(
                f"N={n} rep {rep + 1}: pymc_dp {res.dp[-1].ess:.0f} ESS in "
                f"{res.dp[-1].seconds:.2f} s (setup {res.dp[-1].setup:.2f} s); "
                f"B&S ESS/s {bs_txt}",
                flush=True,
            )
        results.append(res)
    return results


def _chain_stats(runs: list[Run], mean: float, sd: float) -> str:
    """Pooled mean and sd of ``p`` over the runs (as chains), each with its z against exact."""
    chains = np.stack([r.draws for r in runs])
    m, s = float(chains.mean()), float(chains.std(ddof=1))
    z_m = (m - mean) / float(az.mcse(chains, method="mean"))
    z_s = (s - sd) / float(az.mcse(chains, method="sd"))
    return f"{m:.5f} | {s:.5f} | {z_m:+.1f} | {z_s:+.1f}"


def posterior_lines(res: SizeResult) -> list[str]:
    """Markdown table: exact, noise-ignoring, pymc_dp and B&S posterior mean and sd of ``p``."""
    d, (a, b) = res.data, PRIOR
    mean, sd = exact_posterior(d.n, d.z)
    zc = min(max(d.z, 0.0), float(d.n))
    naive = stats.beta(a + zc, b + d.n - zc)
    lines = [
        f"Posterior of p at N = {d.n} (true p {d.p_true:.4f}, S {d.s_true}, z {d.z:.2f}); "
        f"pooled over the {len(res.dp)} runs as chains; z = (estimate - exact) / MCSE. "
        "Reported, not asserted (B&S is a CLT approximation).",
        "",
        "| posterior | mean | sd | z (mean) | z (sd) |",
        "|---|---|---|---|---|",
        f"| exact (sum over S = 0..N) | {mean:.5f} | {sd:.5f} | | |",
        f"| noise-ignoring Beta(10 + z, 10 + N - z) | {naive.mean():.5f} | {naive.std():.5f} | | |",
        f"| pymc_dp | {_chain_stats(res.dp, mean, sd)} |",
    ]
    if res.bs:
        lines.append(f"| B&S CLT Gibbs | {_chain_stats(res.bs, mean, sd)} |")
    return lines


def _range(values: list[float], fmt: str) -> str:
    return f"{_median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def table_lines(results: list[SizeResult]) -> list[str]:
    """Markdown table of ESS/s, ratios and times per ``N`` (median (min-max) over the runs)."""
    lines = [
        "| N | pymc_dp ESS/s | B&S ESS/s | ratio pymc_dp / B&S | pymc_dp ESS | B&S ESS "
        "| pymc_dp sampling s | pymc_dp setup s | B&S s | CPU share pymc_dp / B&S |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        dp_rate = _ess_per_s(res.dp)
        row = [f"10^{np.log10(res.data.n):.0f}", _range(dp_rate, ",.0f")]
        if res.bs:
            bs_rate = _ess_per_s(res.bs)
            row += [_range(bs_rate, ",.0f"), f"{_median(dp_rate) / _median(bs_rate):.3g}"]
        else:
            row += ["skipped", "-"]
        row += [_range([r.ess for r in res.dp], ".0f")]
        row += [_range([r.ess for r in res.bs], ".0f") if res.bs else "-"]
        row += [_range([r.seconds for r in res.dp], ".3g")]
        row += [_range([r.setup for r in res.dp], ".3g")]
        row += [_range([r.seconds for r in res.bs], ".3g") if res.bs else "-"]
        share = f"{_median(r.cpu_share for r in res.dp):.2f}"
        row += [share + (f" / {_median(r.cpu_share for r in res.bs):.2f}" if res.bs else "")]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def acceptance_lines(results: list[SizeResult]) -> list[str]:
    """Issue 12's two figures: ESS/s ratio at the largest N, sampling-time ratio largest/smallest."""
    big, small = results[-1], results[0]
    t_ratio = _median(r.seconds for r in big.dp) / _median(r.seconds for r in small.dp)
    lines = [
        f"- pymc_dp sampling time, N = {big.data.n} / N = {small.data.n}: {t_ratio:.3g}x "
        "(issue 12 goal, at 10^6 / 10^3: <= 3x).",
    ]
    if big.bs:
        ratio = _median(_ess_per_s(big.dp)) / _median(_ess_per_s(big.bs))
        lines.append(
            f"- ESS/s of p, pymc_dp / B&S at N = {big.data.n}: {ratio:.3g} "
            "(issue 12 goal, at 10^6: within 3x, i.e. >= 0.333)."
        )
    ratios = [
        (_median(_ess_per_s(r.dp)) / _median(_ess_per_s(r.bs)), r.data.n) for r in results if r.bs
    ]
    if ratios:
        low, at = min(ratios)
        met = "met" if low >= 1.0 else "not met"
        lines.append(
            f"- Smallest ESS/s ratio pymc_dp / B&S over the sizes: {low:.3g} at N = {at} "
            f"(issue 23 goal: >= 1 at every N from 10^3 to 10^7; {met} at the sizes run)."
        )
    return lines


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _pymc_dp_version() -> str:
    try:
        head = _git(REPO / ".git", "rev-parse", "--short", "HEAD").strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "pymc_dp"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return f"commit {head}" + (" + uncommitted changes in pymc_dp/" if dirty else "")


def machine_lines(load_before: tuple[float, ...]) -> list[str]:
    """Date, machine, load and versions, for the results file."""
    import numba
    import pytensor
    import scipy

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_after = os.getloadavg()
    return [
        f"- Date: {now}. pymc_dp {_pymc_dp_version()}.",
        f"- Machine: {_cpu_model()}, {os.cpu_count()} logical CPUs, {platform.platform()}; "
        f"shared with other jobs: load average (1/5/15 min) {load_before[0]:.2f}/"
        f"{load_before[1]:.2f}/{load_before[2]:.2f} at start, {load_after[0]:.2f}/"
        f"{load_after[1]:.2f}/{load_after[2]:.2f} at end.",
        f"- Python {platform.python_version()}, pymc {pm.__version__}, pytensor "
        f"{pytensor.__version__}, numba {numba.__version__}, numpy {np.__version__}, scipy "
        f"{scipy.__version__}, arviz {az.__version__}.",
    ]


def steps_lines(results: list[SizeResult]) -> list[str]:
    """The step methods ``pm.sample`` assigned, per N (as PyMC logs them)."""
    lines = []
    for res in results:
        summaries = sorted({r.steps for r in res.dp})
        lines.append(f"- N = {res.data.n}: " + " / ".join(f"`{s}`" for s in summaries))
    return lines


def render(settings: Settings, results: list[SizeResult], notes: dict[str, str]) -> str:
    """The results file: settings, machine facts, step summary, tables, posterior check."""
    lines = [
        "# Issue 12: pymc_dp vs Bernstein & Sheldon's CLT Gibbs, Beta(10, 10)-Bernoulli, "
        "Laplace-noised count",
        "",
        f"`{notes['command']}` (`benchmarks/bench_bs_collapse.py`; method in its docstring). "
        f"Total {notes['total']}.",
        "",
        f"- Case: p ~ Beta(10, 10), N Bernoulli(p) records, sum released + Laplace(scale 10) "
        f"(epsilon 0.1, sensitivity 1); one data set per N (true p from the prior). "
        f"{settings.draws} kept draws after {settings.tune} tuning / burn-in iterations, 1 chain, "
        f"for both samplers; medians over {settings.reps} runs (different seeds, same data).",
        "- ESS: `arviz.ess` (bulk) of p; ESS/s = ESS / sampling seconds (tuning + draws, compile "
        "excluded). Setup = model build + step assignment + compilation (the part of `pm.sample` "
        "outside its sampling loop). CPU share: the process's CPU seconds per wall second over "
        "pymc_dp's `pm.sample` call and over B&S's chain (below 1 when other jobs took the CPU).",
        f"- B&S code: {notes['bs']}. {notes['driver']}",
        f"- {notes['warmup']}",
        *machine_lines(notes["load"]),
        "",
        "Step methods assigned by `pm.sample` (PyMC's step summary):",
        "",
        *steps_lines(results),
        "",
        "ESS/s of p, median (min-max) over the runs:",
        "",
        *table_lines(results),
        "",
        *acceptance_lines(results),
    ]
    check = [r for r in results if r.data.n == 1000] or results[:1]
    lines += ["", *posterior_lines(check[0])]
    return "\n".join(lines) + "\n"


def _parse(argv) -> tuple[argparse.Namespace, Settings]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="1e3,1e4,1e5,1e6,1e7", help="comma-separated N, e.g. 1e3,1e6"
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--draws", type=int, default=1500)
    ap.add_argument("--tune", type=int, default=500, help="pymc_dp tuning = B&S burn-in")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bs-code", default=None, help=f"B&S code (default ${BS_ENV}, then mirror)")
    ap.add_argument("--out", default=None, help="markdown file to write")
    args = ap.parse_args(argv)
    sizes = tuple(sorted(int(float(s)) for s in args.sizes.split(",")))
    return args, Settings(sizes, args.reps, args.draws, args.tune, args.seed)


def main(argv=None) -> int:
    """Run the benchmark; print the markdown and write it to ``--out``. Returns 0."""
    args, settings = _parse(argv)
    t0, c0, load = time.perf_counter(), time.process_time(), os.getloadavg()
    bs, why = load_bs(args.bs_code)
    notes = {"load": load, "bs": bs.origin if bs else f"SKIPPED: {why}", "driver": ""}
    if bs is None:
        print(f"B&S column skipped: {why}", flush=True)
    else:
        ok = bs_driver_matches(bs, make_data(1000, settings.seed), settings.seed + 7)
        notes["driver"] = (
            "The harness's call sequence of their step functions reproduces their "
            f"`calculate_Gibbs_posterior` draw for draw (500 + 1000, N = 1000): {ok}."
        )
    notes["warmup"] = warm_up(bs, settings)
    results = run_sizes(settings, bs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    notes["total"] = f"{wall:.0f} s wall, {cpu:.0f} s CPU of this process"
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    notes["command"] = f"python benchmarks/bench_bs_collapse.py {argv_text}".strip()
    md = render(settings, results, notes)
    print(md)
    if args.out:
        Path(args.out).write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
