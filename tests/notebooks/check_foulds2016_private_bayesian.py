"""Headline check of notebooks/foulds2016_private_bayesian.md (see tests/test_notebooks.py).

Each statistical assertion has a false-alarm rate of about 1e-6 (4.89 standard errors, see
tests/test_notebooks.py). Figure 2's mean errors are averages over ``repeats`` independent data
sets, so their standard error is the sample standard deviation over sqrt(repeats) (normal
approximation at 600 repeats in fast mode); the MCMC checks use ArviZ's MCSE.
"""

from nbrun import within

__all__ = ["check"]

#: column order of ``mean_err`` / ``se_err`` in the notebook
NONPRIVATE, PLUGIN, OPS, AWARE = 0, 1, 2, 3


def _check_figure2(h: dict) -> None:
    """Non-private and OPS mean L1 errors match their exact expectations at every N.

    Negative controls: OPS is rejected against the non-private reference at N >= 100 and the
    Laplace plug-in at N = 10 (the paper's ordering), by the same 4.89-SE check.
    """
    for n in map(str, h["grid"]):
        err, se = h["mean_err"][n], h["se_err"][n]
        assert within(err[NONPRIVATE], h["exact_nonprivate"][n], se[NONPRIVATE]), n
        assert within(err[OPS], h["exact_ops"][n], se[OPS]), n
        if int(n) >= 100:
            assert not within(err[OPS], h["exact_nonprivate"][n], se[OPS]), n
    err, se = h["mean_err"]["10"], h["se_err"]["10"]
    assert not within(err[PLUGIN], h["exact_nonprivate"]["10"], se[PLUGIN])


def check(h: dict) -> None:
    """Privacy costs from the accounting; Figure 2 against exact references; NUTS/DA vs exact.

    Negative control of the MCMC check: the plug-in posterior's sd fails the same sd check.
    The HMM accuracies are shown, not asserted (no exact reference; see the notebook).
    """
    assert h["epsilon_laplace"] == h["epsilon_ops"] == h["epsilon_report"] == 0.1
    assert h["epsilon_hmm"] == 0.1
    _check_figure2(h)
    assert within(h["aware_mean"], h["exact_mean"], h["mcse_mean"])
    assert within(h["aware_sd"], h["exact_sd"], h["mcse_sd"])
    assert not within(h["plugin_sd"], h["exact_sd"], h["mcse_sd"])
