"""Execute the MyST-Markdown notebooks of notebooks/ and read their headline numbers.

The ``.md`` files are the single source. Each is paired by jupytext with an ``.ipynb`` that holds
the outputs of a full-size run for readers (the docs render it without executing). Refresh the
stored outputs after editing a notebook (a few minutes, at full size)::

    .venv/bin/python tests/notebooks/nbrun.py notebooks/quickstart.md

The tests (tests/test_notebooks.py) execute every ``.md`` with ``PYMC_DP_FAST=1`` and read the
notebook's ``HEADLINE`` dict by appending one cell that prints it as JSON.
"""

import json
import os
import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from scipy import stats

__all__ = [
    "NOTEBOOK_DIR",
    "Z",
    "binomial_band",
    "cell_sources",
    "execute",
    "headline",
    "read_source",
    "store",
    "within",
]

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
_MARKER = "__HEADLINE_JSON__"
Z = 4.89  # two-sided normal tail probability 1e-6


def read_source(path: Path) -> nbformat.NotebookNode:
    """Read a MyST-Markdown notebook into an nbformat notebook (no outputs)."""
    return jupytext.read(path)


def cell_sources(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """Every cell's type and stripped source, in order (to compare a pair .md / .ipynb)."""
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def execute(nb: nbformat.NotebookNode, cwd: Path, *, fast: bool, timeout: int = 1200):
    """Execute ``nb`` in place in a fresh python3 kernel; ``fast`` sets ``PYMC_DP_FAST=1``.

    Raises nbclient's ``CellExecutionError`` on the first failing cell.
    """
    old = os.environ.get("PYMC_DP_FAST")
    os.environ["PYMC_DP_FAST"] = "1" if fast else "0"
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(cwd)}},
        ).execute()
    finally:
        if old is None:
            os.environ.pop("PYMC_DP_FAST", None)
        else:
            os.environ["PYMC_DP_FAST"] = old
    return nb


def headline(path: Path, *, fast: bool = True) -> dict:
    """Execute the notebook at ``path`` and return its ``HEADLINE`` dict."""
    nb = read_source(path)
    probe = f"import json as _json\nprint({_MARKER!r}, _json.dumps(HEADLINE))"
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    execute(nb, path.parent, fast=fast)
    for out in nb.cells[-1].get("outputs", []):
        if out.get("output_type") == "stream" and _MARKER in out.get("text", ""):
            return json.loads(out["text"].split(_MARKER, 1)[1])
    raise AssertionError(f"{path.name} printed no HEADLINE")


def store(path: Path) -> Path:
    """Execute the ``.md`` notebook at full size and write the paired ``.ipynb`` with outputs."""
    nb = execute(read_source(path), path.parent, fast=False)
    nb.metadata.pop("widgets", None)
    out = path.with_suffix(".ipynb")
    jupytext.write(nb, out, fmt="ipynb")
    return out


def within(value: float, reference: float, se: float) -> bool:
    """``value`` lies within 4.89 standard errors of ``reference`` (two-sided rate 1e-6).

    Examples
    --------
    >>> within(1.0, 5.8, 1.0), within(1.0, 5.9, 1.0)
    (True, False)
    """
    return abs(value - reference) <= Z * se


def binomial_band(n: int, p: float, rate: float = 1e-6) -> tuple[float, float]:
    """Acceptance region for a Binomial(n, p) share with two-sided false-alarm rate <= rate.

    ``P(X/n < lo) <= rate/2`` and ``P(X/n > hi) <= rate/2`` exactly (binomial quantiles).

    Examples
    --------
    >>> lo, hi = binomial_band(1000, 0.9)
    >>> bool(lo <= 0.9 <= hi), bool(lo <= 0.8 <= hi)
    (True, False)
    """
    lo = stats.binom.ppf(rate / 2, n, p)
    hi = stats.binom.isf(rate / 2, n, p)
    return lo / n, hi / n


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("wrote", store(Path(arg).resolve()))
