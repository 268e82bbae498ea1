"""The Zhang et al. Fig. 1 study at a tiny size (one setting, 30 paired repeats at two budgets,
no noise-aware fit): it runs, writes its outputs, shows the trend.

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

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
Z = 4.89


def _study(name: str = "study_zhang_fig1"):
    """Load ``benchmarks/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trend_z(table, method) -> float:
    (lo, se_lo, _), (hi, se_hi, _) = table["fixed"][0.1][method], table["fixed"][10.0][method]
    return (hi - lo) / math.hypot(se_lo, se_hi)


def test_study_tiny_shows_the_trend(tmp_path):
    mod = _study()
    out, fig = tmp_path / "t.md", tmp_path / "f.png"
    table, diffs = mod.main(
        ["--repeats", "30", "--skip-noise-aware", "--epsilons", "0.1", "10", "--settings", "fixed",
         "--out", str(out), "--fig", str(fig)]
    )  # fmt: skip
    text = out.read_text()
    assert "| 0.1 |" in text and "| 10 |" in text and fig.stat().st_size > 0
    rows = table["fixed"].values()
    assert all(0.0 <= v[0] <= 1.0 for row in rows for v in row.values())
    assert all(v[2] == 30 for row in rows for v in row.values())  # paired: same repeats
    assert set(diffs["fixed"][10.0]) == set(mod.METHODS[2:-1])  # noise-aware skipped
    assert _trend_z(table, "Laplace (Alg. 1)") > Z
    assert _trend_z(table, "sampler") > Z
    assert not _trend_z(table, "non-private") > Z  # negative control: no trend


@pytest.mark.slow  # the model's exactness is tested in test_bn_noise_aware.py
def test_one_repeat_and_sampler_budget():
    """One repeat returns every method's accuracy; the sampler spends epsilon."""
    mod = _study()
    acc = mod.one_repeat(10.0, np.random.default_rng(3))
    assert set(mod.METHODS) <= set(acc) and all(0.0 <= a <= 1.0 for a in acc.values())
    from pymc_dp.releases.bayes_net import bayes_net_count_tables

    tables = bayes_net_count_tables(mod.synthesize(np.random.default_rng(0))[:50],
                                    mod.naive_bayes_network())  # fmt: skip
    for eps in (0.1, 1.0, 10.0):
        py, q, spent = mod.sampler_cpts(tables, eps, np.random.default_rng(0))
        p0 = 1.0 / (1.0 + math.exp(eps / 34.0))
        assert eps * (1 - 1e-12) <= spent <= eps  # temperature 1 up to rounding
        assert np.all((q >= p0) & (q <= 1 - p0)) and p0 <= py[0, 1] <= 1 - p0


def test_noise_aware_predictive_is_exact_against_enumeration(monkeypatch):
    """The study's exact noise-aware predictive (a mixture over class counts) equals the
    brute-force one: all 8^3 datasets of three records with two features, each weighted by its
    prior predictive probability times the Laplace likelihood of the release, averaging the
    conjugate predictive. Exact (no statistics): agreement to 1e-12. Negative control: the
    plug-in predictive of the same release differs by more than 0.01."""
    import itertools

    from scipy import special

    from pymc_dp.mechanisms.laplace import Laplace
    from pymc_dp.releases.bayes_net import bayes_net_count_tables, release_bayes_net_counts

    mod = _study()
    monkeypatch.setattr(mod, "D", 2)
    net, n = mod.naive_bayes_network(2), 3
    train = np.array([[0, 1, 0], [1, 1, 1], [1, 0, 1]])
    rel = release_bayes_net_counts(train, net, mechanism=Laplace(scale=1.5, sensitivity=6.0),
                                   rng=np.random.default_rng(2), allow_float=True)  # fmt: skip
    py, q, w = mod.noise_aware_cpts(rel)
    cells = list(itertools.product((0, 1), repeat=3))  # (y, x0, x1)

    def predictive(tabs):
        out = np.empty(8)
        for k, (y, x0, x1) in enumerate(cells):
            p = (1 + tabs["y"][y]) / (2 + n)
            for i, xv in enumerate((x0, x1)):
                m1 = (1 + tabs[f"x{i}"][y, 1]) / (2 + tabs[f"x{i}"][y].sum())
                p *= m1 if xv else 1 - m1
            out[k] = p
        return out

    ref, total = np.zeros(8), 0.0
    for ds in itertools.product(cells, repeat=n):
        t = bayes_net_count_tables(np.array(ds), net)
        log_w = special.betaln(1 + t["y"][1], 1 + t["y"][0])
        log_w += sum(special.betaln(1 + t[f"x{i}"][j, 1], 1 + t[f"x{i}"][j, 0])
                     for i in range(2) for j in range(2))  # fmt: skip
        log_w += sum(rel.mechanism.logpdf(np.asarray(rel.tables[v], float) - t[v]).sum()
                     for v in t)  # fmt: skip
        total += math.exp(log_w)
        ref += math.exp(log_w) * predictive(t)
    ref /= total
    got = np.array([w @ (py[:, y] * np.prod(np.where(np.array([x0, x1]) == 1, q[:, :, y],
                                                      1 - q[:, :, y]), axis=1))
                    for y, x0, x1 in cells])  # fmt: skip
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    plug = predictive(rel.projected())  # the plug-in: clipped noisy counts taken as true
    assert np.abs(plug - ref).max() > 0.01  # negative control


@pytest.mark.slow  # about 40 s: 400 Gibbs draws
def test_fig2_truncated_gaussian_gibbs_matches_rejection(rng):
    """The Fig. 2 study's Gibbs draw of a correlated 14-dimensional Gaussian restricted to a ball
    that keeps about 20% of its mass (the rejection shortcut is then skipped) against exact
    rejection draws: two-sample KS on the norm and on the projection onto the mean, each at
    5e-7 (1e-6 for the pair). Negative control: the unrestricted Gaussian is rejected."""
    from scipy import stats

    mod = _study("study_zhang_fig2")
    idx = np.arange(mod.P)
    factor = 0.1 * np.linalg.cholesky(0.5 ** np.abs(idx[:, None] - idx[None, :]))
    mean = np.zeros(mod.P)
    mean[0], mean[3] = 0.8, 0.6  # norm 1
    radius = 0.97
    props = mean + rng.standard_normal((200_000, mod.P)) @ factor.T
    inside = props[np.linalg.norm(props, axis=1) <= radius]
    assert 0.05 < len(inside) / len(props) < 0.5  # the Gibbs path is the one tested
    gibbs = np.stack([mod.truncated_gaussian_draw(mean, factor, radius, rng, sweeps=8)
                      for _ in range(400)])  # fmt: skip
    free = mean + rng.standard_normal((400, mod.P)) @ factor.T

    def pvalues(w):
        return [stats.ks_2samp(f(w), f(inside)).pvalue
                for f in (lambda v: np.linalg.norm(v, axis=1), lambda v: v @ mean)]  # fmt: skip

    assert min(pvalues(gibbs)) > 5e-7
    assert min(pvalues(free)) < 5e-7  # negative control
