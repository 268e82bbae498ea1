"""The teaching notebooks (docs/notebooks/*.md, MyST via jupytext) run and say what they claim.

Each notebook is executed once per test session in its fast mode (``PYMC_DP_FAST=1``); a cell
that raises fails ``test_notebook_executes``. Each notebook ends with a ``HEADLINE`` dict of the
numbers its prose states, and the tests below assert them at fast sizes. Statistical assertions
have a false-alarm rate of about 1e-6 each: 4.89 Monte Carlo standard errors (normal two-sided
tail 1e-6, under the MCMC central limit theorem with ArviZ's MCSE estimate), or the exact
two-sided 1e-6 binomial acceptance region; each has a negative control (the naive analysis) that
the same check must reject. The stored ``.ipynb`` (outputs for readers) must hold the same code as
its ``.md`` source, with every code cell executed and no error.
"""

import importlib.util
from pathlib import Path

import nbformat
import pytest
from scipy import stats

_spec = importlib.util.spec_from_file_location(
    "nbrun", Path(__file__).resolve().parent / "notebooks" / "nbrun.py"
)
nbrun = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbrun)

NOTEBOOKS = sorted(nbrun.NOTEBOOK_DIR.glob("*.md"))
Z = 4.89  # two-sided normal tail probability 1e-6
_CACHE: dict[str, dict] = {}


def headline(stem: str) -> dict:
    """The fast-mode HEADLINE of ``docs/notebooks/<stem>.md`` (executed once per session)."""
    if stem not in _CACHE:
        _CACHE[stem] = nbrun.headline(nbrun.NOTEBOOK_DIR / f"{stem}.md", fast=True)
    return _CACHE[stem]


def within(value: float, reference: float, se: float) -> bool:
    """``value`` lies within 4.89 standard errors of ``reference``."""
    return abs(value - reference) <= Z * se


def binomial_band(n: int, p: float, rate: float = 1e-6) -> tuple[float, float]:
    """Acceptance region for a Binomial(n, p) share with two-sided false-alarm rate <= rate."""
    lo = stats.binom.ppf(rate / 2, n, p)
    hi = stats.binom.isf(rate / 2, n, p)
    return lo / n, hi / n


def test_there_are_notebooks():
    stems = {p.stem for p in NOTEBOOKS}
    assert {"quickstart", "why_dp_noise_matters"} <= stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    h = headline(path.stem)
    assert isinstance(h, dict) and h


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_match_source(path):
    """The paired .ipynb has the .md's code, every code cell executed, and no error output."""
    stored = path.with_suffix(".ipynb")
    assert stored.exists(), f"run: .venv/bin/python tests/notebooks/nbrun.py {path}"
    nb = nbformat.read(stored, as_version=4)
    assert nbrun.code_sources(nb) == nbrun.code_sources(nbrun.read_source(path)), (
        f"{stored.name} is stale: rerun tests/notebooks/nbrun.py {path}"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code)
    assert not [o for c in code for o in c.outputs if o.get("output_type") == "error"]


def test_band_and_within_reject():
    """The checks themselves can fail: a 4.89-sigma miss and a coverage of 0.8 are rejected."""
    assert within(1.0, 1.0 + 4.8, 1.0) and not within(1.0, 1.0 + 4.9, 1.0)
    lo, hi = binomial_band(1000, 0.9)
    assert lo < 0.9 < hi and not lo <= 0.8 <= hi


def test_quickstart_headline():
    """Privacy cost from the accounting; MCMC mean and sd of p match the exact posterior's.

    Negative control: the naive posterior's sd fails the same sd check.
    """
    h = headline("quickstart")
    assert h["epsilon_spent"] == 0.1
    assert within(h["aware_mean"], h["exact_mean"], h["mcse_mean"])
    assert within(h["aware_sd"], h["exact_sd"], h["mcse_sd"])
    assert not within(h["naive_sd"], h["exact_sd"], h["mcse_sd"])


def test_why_noise_matters_headline():
    """Noise-aware 90% intervals cover 90% (binomial band, 1e-6); the naive ones do not.

    Also: NUTS on each model matches that model's exact posterior mean (4.89 MCSE), and the naive
    sampler's mean is rejected against the noise-aware exact mean (negative control).
    """
    h = headline("why_dp_noise_matters")
    lo, hi = binomial_band(h["replicates"], 0.9)
    assert lo <= h["coverage_aware"] <= hi
    assert not lo <= h["coverage_naive"] <= hi
    assert within(h["aware_mcmc_mean"], h["exact_aware_mean"], h["aware_mcse_mean"])
    assert within(h["naive_mcmc_mean"], h["exact_naive_mean"], h["naive_mcse_mean"])
    assert not within(h["naive_mcmc_mean"], h["exact_aware_mean"], h["naive_mcse_mean"])
    assert h["epsilon_total_section3"] == 0.1
