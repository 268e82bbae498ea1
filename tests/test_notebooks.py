"""The teaching notebooks (notebooks/*.md, MyST via jupytext) run and say what they claim.

Each notebook is executed once in its fast mode (``PYMC_DP_FAST=1``); a cell
that raises fails ``test_notebook``. Each notebook ends with a ``HEADLINE`` dict of the
numbers its prose states, asserted at fast sizes by ``check(h)`` in
tests/notebooks/check_<notebook>.py (a new notebook adds its own file there). Statistical assertions
have a false-alarm rate of about 1e-6 each: 4.89 Monte Carlo standard errors (normal two-sided
tail 1e-6, under the MCMC central limit theorem with ArviZ's MCSE estimate), or the exact
two-sided 1e-6 binomial acceptance region; each has a negative control (the naive analysis) that
the same check must reject. The stored ``.ipynb`` (outputs for readers) must hold the same cells as
its ``.md`` source, with every code cell executed and no error.
"""

import importlib
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "notebooks"))
import nbrun

NOTEBOOKS = sorted(nbrun.NOTEBOOK_DIR.glob("*.md"))
within, binomial_band = nbrun.within, nbrun.binomial_band


def test_there_are_notebooks():
    stems = {p.stem for p in NOTEBOOKS}
    assert {"quickstart", "why_dp_noise_matters"} <= stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_match_source(path):
    """The paired .ipynb has the .md's cells, every code cell executed, and no error output."""
    stored = path.with_suffix(".ipynb")
    assert stored.exists(), f"run: .venv/bin/python tests/notebooks/nbrun.py {path}"
    nb = nbformat.read(stored, as_version=4)
    assert nbrun.cell_sources(nb) == nbrun.cell_sources(nbrun.read_source(path)), (
        f"{stored.name} is stale: rerun tests/notebooks/nbrun.py {path}"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code)
    assert not [o for c in code for o in c.outputs if o.get("output_type") == "error"]


_DEPRECATION = ("DeprecationWarning", "FutureWarning", "MigrationWarning")


def deprecation_outputs(nb) -> list[str]:
    """Output texts of ``nb``'s code cells that show a deprecation warning (first 200 chars)."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = out.get("text", "") or str(out.get("data", {}).get("text/plain", ""))
            if any(w in text for w in _DEPRECATION):
                found.append(text[:200])
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_show_no_deprecation(path):
    """The notebooks use current PyMC / ArviZ names (issue 26): no deprecation in their outputs.

    The stored outputs are a full-size run; Python shows every ``FutureWarning`` and a
    ``DeprecationWarning`` raised by the notebook's own code (``__main__``) by default, so a
    deprecated name in a cell leaves its warning there. Exact check, no false-alarm rate.
    """
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    assert not deprecation_outputs(nb), f"{path.name}: {deprecation_outputs(nb)}"


def test_deprecation_in_outputs_is_found():
    """Negative control: a stream output holding a FutureWarning is reported."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("pm.sample(idata_kwargs={'log_likelihood': True})")
    warning = "FutureWarning: Passing `log_likelihood` via `idata_kwargs` is deprecated"
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=warning)]
    nb.cells.append(cell)
    assert deprecation_outputs(nb) == [warning]
    cell.outputs[0].text = "Sampling 2 chains"
    assert deprecation_outputs(nb) == []


def test_band_and_within_reject():
    """The checks themselves can fail: a 4.89-sigma miss and a coverage of 0.8 are rejected."""
    assert within(1.0, 1.0 + 4.8, 1.0) and not within(1.0, 1.0 + 4.9, 1.0)
    lo, hi = binomial_band(1000, 0.9)
    assert lo < 0.9 < hi and not lo <= 0.8 <= hi


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(path):
    """Execute the notebook in fast mode (any failing cell fails) and check its HEADLINE.

    One execution per notebook, so that pytest-xdist never runs a notebook twice.
    """
    checker = Path(nbrun.__file__).parent / f"check_{path.stem}.py"
    assert checker.exists(), f"{path.name} has no headline check tests/notebooks/{checker.name}"
    importlib.import_module(checker.stem).check(nbrun.headline(path, fast=True))


def _tiny_notebook(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "tiny.md"
    source = (nbrun.NOTEBOOK_DIR / "quickstart.md").read_text()
    header = source[: source.index("\n---\n", 4) + 5]  # the real notebooks' jupytext header
    path.write_text(header + "\n# Tiny\n\n```{code-cell} ipython3\n" + code + "\n```\n")
    return path


def test_headline_reader_sees_fast_mode_and_fails_on_errors(tmp_path):
    """The runner sets PYMC_DP_FAST=1, returns HEADLINE, and raises on a failing cell."""
    ok = _tiny_notebook(tmp_path, 'import os\nHEADLINE = {"fast": os.environ["PYMC_DP_FAST"]}')
    assert nbrun.headline(ok, fast=True) == {"fast": "1"}
    bad = _tiny_notebook(tmp_path, "HEADLINE = {}\nraise ValueError('broken cell')")
    with pytest.raises(Exception, match="broken cell"):
        nbrun.headline(bad, fast=True)
