"""Shared pieces of the Schein et al. (2019) studies: seed streams and paired summaries.

Used by ``study_schein_fig1.py``, ``study_schein_fig3.py``, ``study_schein_tensor.py`` and
``study_schein_synthetic.py`` (import it from ``benchmarks/``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: the three fits every study compares ("aware": the noise-aware, augmented model)
METHODS = ("nonprivate", "naive", "aware")


def seed(config, repeat: int, key: str) -> int:
    """The integer seed of one stream (``key``: "truth", "noise 0.75", ...) of a repeat:
    ``SeedSequence([config.seed, repeat, *key.encode()])``, so a stream does not move when
    other streams are added or dropped.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(seed=1)
    >>> seed(cfg, 0, "truth") == seed(cfg, 0, "truth") != seed(cfg, 1, "truth")
    True
    """
    return int(np.random.SeedSequence([config.seed, repeat, *key.encode()]).generate_state(1)[0])


def se(x) -> float:
    """Standard error of the mean of ``x`` over repeats (``sd(ddof=1) / sqrt(n)``).

    Examples
    --------
    >>> float(se(np.array([1.0, 3.0])))
    1.0
    """
    return x.std(ddof=1) / np.sqrt(x.size)


def paired_interval(d) -> tuple[float, float, float]:
    """Mean of the paired differences ``d`` over repeats and its two-sided 95% t interval
    (``t_{n-1}`` quantile times :func:`se`).

    Examples
    --------
    >>> mean, lo, hi = paired_interval(np.array([-1.0, -3.0]))
    >>> float(mean), bool(lo < mean < hi)
    (-2.0, True)
    """
    tq = float(stats.t.ppf(0.975, d.size - 1))
    m, s = d.mean(), se(d)
    return m, m - tq * s, m + tq * s
