"""The issue 12 benchmark (``benchmarks/bench_bs_collapse.py``) runs at toy size and its references
are right: the exact posterior against an independent grid, the B&S call sequence against their own
``calculate_Gibbs_posterior``. All checks here are deterministic (false-alarm rate 0)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import special, stats

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_bs_collapse.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_bs_collapse", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def bs(bench):
    module, why = bench.load_bs(None)
    if module is None:
        pytest.skip(why)
    return module


def _grid_posterior(n, z):
    """Mean and sd of p on a midpoint grid: Beta(10, 10) prior times the sum over S = 0..n of
    Binomial(S; n, p) * Laplace(z - S; scale 10); independent of the mixture form."""
    p = (np.arange(40_000) + 0.5) / 40_000
    s = np.arange(n + 1)
    loglik = special.logsumexp(
        stats.binom.logpmf(s[None, :], n, p[:, None]) - np.abs(z - s)[None, :] / 10.0, axis=1
    )
    logpost = stats.beta.logpdf(p, 10.0, 10.0) + loglik
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    mean = float(w @ p)
    return mean, float(np.sqrt(w @ (p - mean) ** 2))


@pytest.mark.parametrize("z", [37.5, -12.0, 131.25])
def test_exact_posterior_matches_grid_and_rejects_controls(bench, z, monkeypatch):
    n = 100
    mean, sd = bench.exact_posterior(n, z)
    g_mean, g_sd = _grid_posterior(n, z)
    assert abs(mean - g_mean) < 1e-9 and abs(sd - g_sd) < 1e-9  # measured: below 1e-15
    # negative control: the noise scale x 1.05 moves the mean by 1.8e-3 to 4.8e-3
    monkeypatch.setattr(bench, "LAPLACE_SCALE", 10.5)
    w_mean, w_sd = bench.exact_posterior(n, z)
    assert abs(w_mean - g_mean) > 1e-4 or abs(w_sd - g_sd) > 1e-4
    # negative control: the noise-ignoring posterior Beta(10 + z, 10 + n - z) (z clipped to
    # [0, n]) is rejected by the same tolerance
    zc = min(max(z, 0.0), n)
    naive = stats.beta(10.0 + zc, 10.0 + n - zc)
    assert abs(naive.mean() - g_mean) > 1e-4 or abs(naive.std() - g_sd) > 1e-4


def test_bs_call_sequence_reproduces_their_sampler(bench, bs):
    data = bench.make_data(100, seed=3)
    assert bench.bs_driver_matches(bs, data, seed=11)
    # negative control: the harness's sequence with one step changed (noise variances x 1.05)
    # no longer reproduces their (unchanged) calculate_Gibbs_posterior
    g = bs.gibbs

    def scaled_noise_covariance(*args):
        return 1.05 * g.sample_noise_covariance(*args)

    wrong = SimpleNamespace(**vars(g))
    wrong.sample_noise_covariance = scaled_noise_covariance
    assert not bench.bs_driver_matches(SimpleNamespace(gibbs=wrong, dists=bs.dists), data, 11)


def _toy_run(bench, tmp_path, *extra):
    out = tmp_path / "bs.md"
    args = ["--sizes", "100", "--reps", "1", "--draws", "50", "--tune", "10", "--out", str(out)]
    assert bench.main([*args, *extra]) == 0
    return out.read_text()


def _table_row(text):
    rows = [line for line in text.splitlines() if line.startswith("| 10^2 |")]
    assert len(rows) == 1
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_toy_run_with_bs(bench, bs, tmp_path):
    text = _toy_run(bench, tmp_path)
    cells = _table_row(text)
    assert cells[2] != "skipped" and float(cells[3]) > 0.0  # B&S ESS/s and the ratio
    assert "draw for draw (500 + 1000, N = 1000): True" in text
    assert "| B&S CLT Gibbs |" in text


def test_toy_run_without_bs_skips_its_column(bench, tmp_path):
    text = _toy_run(bench, tmp_path, "--bs-code", str(tmp_path / "absent"))
    cells = _table_row(text)
    assert float(cells[1].split()[0].replace(",", "")) > 0.0  # pymc_dp ESS/s
    assert cells[2] == "skipped" and "B&S code: SKIPPED: B&S code not found" in text
    # the step summary names the step that pm.sample gave p, whatever it is
    summary = [line for line in text.splitlines() if line.startswith("- N = 100: `")]
    assert len(summary) == 1 and "[p" in summary[0]
    assert "| exact (sum over S = 0..N) |" in text and "| pymc_dp |" in text
    assert "| B&S CLT Gibbs |" not in text
