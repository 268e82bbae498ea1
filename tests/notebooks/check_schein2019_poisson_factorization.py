"""Headline check of notebooks/schein2019_poisson_factorization.md (tests/test_notebooks.py).

Statistical assertions have a false-alarm rate of about 1e-6 each: a mean of independent draws
within 4.89 standard errors of its exact value (two-sided normal tail 1e-6, central limit theorem
over 20000 draws), a chi-square goodness-of-fit p-value above 1e-6 (asymptotic rate 1e-6). The
others are exact (deterministic identities to 1e-9).
"""

import math

from nbrun import within

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
