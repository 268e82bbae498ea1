"""Headline check of notebooks/schein2019_poisson_factorization.md (tests/test_notebooks.py).

Statistical assertions have a false-alarm rate of about 1e-6 each: a mean of independent draws
within 4.89 standard errors of its exact value (two-sided normal tail 1e-6, central limit theorem
over 20000 draws), a chi-square goodness-of-fit p-value above 1e-6 (asymptotic rate 1e-6). The
others are exact (deterministic identities to 1e-9).

The MMSB section's Geweke test: each of its 3 statistics is a batch-means t statistic with 50
batches (t_49 under exactness; the batches hold 100 or more scans against integrated
autocorrelation times of at most about 20 scans), bounded at the two-sided 1e-6 quantile of t_49
(5.59): 3e-6 for the three together. Control: the naive scan (clipped release taken as the
truth) must exceed that bound (it gives about 8-9 in fast mode). The held-out check is exact:
the log-density does not move when a held-out release changes, and moves when an observed one
does (the control).
"""

import math

from nbrun import within
from scipy import stats

__all__ = ["check"]

RATE = 1e-6


def _check_cell(h: dict, method: str) -> None:
    """``method``'s true-count draws match the exact conditional; the wrong laws are rejected."""
    r = h["cell"][method]
    se = h["cell_exact_sd"] / math.sqrt(h["n_cells"])
    assert within(r["mean"], h["cell_exact_mean"], se), (method, r)
    assert r["p_exact"] > RATE, (method, r)
    # negative controls: the conditional of a less noisy mechanism, and the naive max(release, 0)
    assert r["p_wrong_alpha"] < RATE, (method, r)
    assert not within(0.0, h["cell_exact_mean"], se)


def check(h: dict) -> None:
    """CountAugmentation (both methods) draws P(y | release, mu) exactly; the marginal
    likelihood equals its enumeration (and the naive Poisson likelihood does not); the privacy
    level printed is the accounting's ``epsilon`` per unit of count.
    """
    _check_cell(h, "direct")
    _check_cell(h, "augmentation")
    assert math.isclose(h["loglik_model"], h["loglik_enumerated"], rel_tol=1e-9, abs_tol=1e-9)
    assert abs(h["loglik_naive"] - h["loglik_enumerated"]) > 1.0
    assert math.isclose(h["per_cell_epsilon"], h["epsilon"], rel_tol=1e-12)
    _check_mmsb(h)


def _check_mmsb(h: dict) -> None:
    """The MMSB scan passes its Geweke test and the naive scan fails it; held-out entries are
    out of the likelihood; the link-prediction numbers are finite."""
    bound = float(stats.t.isf(RATE / 2, h["geweke_batches"] - 1))
    aware = h["geweke_z"]["noise-aware scan"]
    naive = h["geweke_z"]["naive scan (control)"]
    assert all(abs(z) < bound for z in aware), (aware, bound)
    assert max(abs(z) for z in naive) > bound, (naive, bound)  # negative control
    held = h["held_check"]
    assert held["held_changed"] == held["base"], held
    assert abs(held["observed_changed"] - held["base"]) > 1e-6, held  # control
    for row in h["net_mae"].values():
        assert all(math.isfinite(v) and v >= 0 for v in row.values()), row
