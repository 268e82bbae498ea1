"""The Foulds et al. Fig. 2 study script runs end to end at a tiny size (``--quick``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "study_foulds_fig2.py"


def test_study_quick(tmp_path):
    spec = importlib.util.spec_from_file_location("study_foulds_fig2", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, fig = tmp_path / "t.md", tmp_path / "f.png"
    mod.main(["--quick", "--out", str(out), "--fig", str(fig)])
    text = out.read_text()
    assert "| 10 |" in text and "| 100 |" in text and fig.stat().st_size > 0
    table, repeats, _ = mod.read_table(out)
    assert repeats == 20 and set(table) == {10, 100}
    assert all(0.0 <= v[0] <= 1.0 for row in table.values() for v in row.values())
