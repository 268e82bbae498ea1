"""Headline check of notebooks/quickstart.md (called by tests/test_notebooks.py).

Each assertion has a false-alarm rate of about 1e-6 (see tests/test_notebooks.py).
"""

from nbrun import within

__all__ = ["check"]


def check(h: dict) -> None:
    """Privacy cost from the accounting; MCMC mean and sd of p match the exact posterior's.

    Negative control: the naive posterior's sd fails the same sd check.
    """
    assert h["epsilon_spent"] == 0.1
    assert within(h["aware_mean"], h["exact_mean"], h["mcse_mean"])
    assert within(h["aware_sd"], h["exact_sd"], h["mcse_sd"])
    assert not within(h["naive_sd"], h["exact_sd"], h["mcse_sd"])
