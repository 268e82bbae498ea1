"""The Schein et al. study scripts: topic-quality metrics against brute force, and smoke runs.

Default tier (deterministic, well under a second): ``npmi`` and ``coherence`` of
``benchmarks/study_schein_fig3.py`` against a brute-force count over the documents written
independently here (every pair of words, every document), on a random reference corpus;
control: the same brute force with a pair's co-occurrence count off by one gives a different
value. No statistics, so no false-alarm rate.

Slow tier: each study (Fig. 1 MMSB with held-out links, Fig. 3 topics, the tensor) runs end to
end at a tiny size and writes its report's tables.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    if str(BENCH) not in sys.path:  # the studies import benchmarks/_schein_common.py
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _brute(words, docs, shift=0):
    """NPMI and Mimno coherence by direct counting over the documents."""
    n = len(docs)

    def df(*ws):
        return sum(all(d[w] > 0 for w in ws) for d in docs)

    vals = []
    for a, b in itertools.combinations(words, 2):
        joint = df(a, b) + shift
        if joint == 0:
            vals.append(-1.0)
        elif joint == n:
            vals.append(1.0)
        else:
            p = joint / n
            vals.append(math.log(p / (df(a) / n * df(b) / n)) / -math.log(p))
    coh = sum(
        math.log((df(words[m], words[el]) + shift + 1) / max(df(words[el]), 1))
        for m in range(1, len(words))
        for el in range(m)
    )
    return float(np.mean(vals)), coh


def test_topic_metrics_match_brute_force(rng):
    fig3 = _load("study_schein_fig3")
    docs = rng.poisson(0.4, size=(40, 12))
    words = [int(w) for w in rng.permutation(12)[:6]]
    ref_npmi, ref_coh = _brute(words, docs)
    assert fig3.npmi(words, docs) == pytest.approx(ref_npmi, rel=1e-12, abs=1e-12)
    assert fig3.coherence(words, docs) == pytest.approx(ref_coh, rel=1e-12, abs=1e-12)
    # control: one co-occurrence count off by one moves both metrics
    off_npmi, off_coh = _brute(words, docs, shift=1)
    assert off_npmi != pytest.approx(ref_npmi, rel=1e-6)
    assert off_coh != pytest.approx(ref_coh, rel=1e-6)


# (script, Config at a tiny size, what its report must hold)
STUDIES = [
    (
        "study_schein_fig1",
        {"n_actors": 6, "n_communities": 2, "epsilons": (1.0,), "n_top": 1, "repeats": 2,
         "tune": 10, "draws": 10, "n_scans": 1, "restarts": 2},
        ("## Held-out link prediction MAE", "| 1.0 |"),
    ),
    (
        "study_schein_fig3",
        {"n_docs": 8, "n_words": 15, "true_topics": 2, "n_topics": 2, "levels": (1.0,),
         "repeats": 2, "tune": 5, "draws": 5, "n_scans": 1, "samples": 2, "top": 3},
        ("## NPMI", "## Coherence"),
    ),
    (
        "study_schein_tensor",
        {"shape": (3, 3, 2), "n_components": 1, "epsilons": (1.0,), "repeats": 2, "tune": 5,
         "draws": 5, "n_scans": 1},
        ("| 1.0 |",),
    ),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("script", "sizes", "wanted"), STUDIES, ids=[s[0] for s in STUDIES])
def test_study_runs(script, sizes, wanted):
    study = _load(script)
    cfg = study.Config(**sizes)
    text = study.report(study.run_study(cfg, log=lambda line: None), cfg, 1.0)
    assert all(w in text for w in wanted), text
