"""The Foulds et al. Figs. 6-7 study script runs end to end at its tiny size (``--quick``).

Slow (about 40 s on a loaded 2-core machine): the default run keeps to the library's tests of
:mod:`pymc_dp.releases.hmm_ops` (tests/releases/test_hmm_ops.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "study_foulds_fig6.py"


@pytest.mark.slow
def test_study_quick(tmp_path):
    spec = importlib.util.spec_from_file_location("study_foulds_fig6", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, f6, f7 = tmp_path / "t.md", tmp_path / "f6.png", tmp_path / "f7.png"
    mod.main(["--quick", "--out", str(out), "--fig", str(f6), "--fig7", str(f7)])
    text = out.read_text()
    assert text.count("| 0.1 |") == 3 and "OPS, last draw (the release)" in text
    assert f6.stat().st_size > 0 and f7.stat().st_size > 0
