"""The Zhang et al. Fig. 1 study at a tiny size: it runs, writes its outputs, shows the trend.

Trend (Zhang et al. Fig. 1): the private classifiers' accuracy rises with epsilon. Check: the
difference of mean accuracies between epsilon = 10 and epsilon = 0.1 (30 independent repeats each)
over its standard error, ``z > 4.89``. Measured at this size over four seeds: Laplace 0.48-0.53 ->
0.89-0.90 and sampler 0.49-0.56 -> 0.85-0.87, standard errors 0.02-0.03, so ``z`` = 12.8-16.3
(Laplace) and 11.1-13.6 (sampler); the check fails only if ``z`` falls 6 standard errors below its
expected value (probability far below 1e-6 under the normal approximation of a 30-repeat mean).
Negative control: the non-private classifier does not depend on epsilon, and its two means come
from independent datasets, so the same check finds no trend except with probability 1e-6 (one-sided
normal tail at 4.89 is 5e-7).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "study_zhang_fig1.py"
Z = 4.89


def _study():
    spec = importlib.util.spec_from_file_location("study_zhang_fig1", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trend_z(table, method) -> float:
    (lo, se_lo, _), (hi, se_hi, _) = table[0.1][method], table[10.0][method]
    return (hi - lo) / math.hypot(se_lo, se_hi)


def test_study_tiny_shows_the_trend(tmp_path):
    mod = _study()
    out, fig = tmp_path / "t.md", tmp_path / "f.png"
    table = mod.main(
        ["--repeats", "30", "--na-repeats", "0", "--epsilons", "0.1", "10",
         "--out", str(out), "--fig", str(fig)]
    )  # fmt: skip
    text = out.read_text()
    assert "| 0.1 |" in text and "| 10 |" in text and fig.stat().st_size > 0
    assert all(0.0 <= v[0] <= 1.0 for row in table.values() for v in row.values())
    assert _trend_z(table, "Laplace (Alg. 1)") > Z
    assert _trend_z(table, "sampler") > Z
    assert not _trend_z(table, "non-private") > Z  # negative control: no trend


@pytest.mark.slow  # 20 s cold; the model's exactness is tested in test_bn_noise_aware.py
def test_noise_aware_fit_smoke():
    """One noise-aware fit (tiny chains) returns an accuracy; the sampler spends epsilon."""
    mod = _study()
    acc = mod.one_repeat(10.0, np.random.default_rng(3), noise_aware=(50, 50, 1))
    assert set(acc) == set(mod.METHODS) and all(0.0 <= a <= 1.0 for a in acc.values())
    from pymc_dp.releases.bayes_net import bayes_net_count_tables

    tables = bayes_net_count_tables(mod.synthesize(np.random.default_rng(0))[:50],
                                    mod.naive_bayes_network())  # fmt: skip
    for eps in (0.1, 1.0, 10.0):
        py, q, spent = mod.sampler_cpts(tables, eps, np.random.default_rng(0))
        p0 = 1.0 / (1.0 + math.exp(eps / 34.0))
        assert eps * (1 - 1e-12) <= spent <= eps  # temperature 1 up to rounding
        assert np.all((q >= p0) & (q <= 1 - p0)) and p0 <= py[0, 1] <= 1 - p0
