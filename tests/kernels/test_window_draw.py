"""The certified-window inversion draw (:mod:`pymc_dp.kernels.window_draw`) against exact laws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.window_draw import draw_in_window
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof


def _poisson_draws(mu, centre, rng, n=4000):
    """Draws of Poisson(mu) with the window started around ``centre`` (it must grow to the
    bulk); the bound is SciPy's exact tail mass outside the window."""

    def bound(lo, hi):
        below = stats.poisson.logcdf(lo - 1, mu) if lo > 0 else -math.inf
        return float(np.logaddexp(below, stats.poisson.logsf(hi, mu)))

    out = [
        draw_in_window(lambda ns: stats.poisson.logpmf(ns, mu), centre, bound, rng)
        for _ in range(n)
    ]
    return np.array([o.value for o in out]), out[-1]


def test_draws_follow_the_law_after_the_window_grows(rng):
    """Poisson(300) drawn with the window started at 0: chi-square of 4000 draws against the
    pmf (false-alarm rate 1e-6); the window had to grow past 300. Negative control: the same
    draws against Poisson(303) are rejected."""
    draws, last = _poisson_draws(300.0, 0.0, rng)
    assert last.window > 300
    assert_gof(chisquare_gof(draws, lambda k: stats.poisson.logpmf(k, 300.0)))
    assert_rejects(chisquare_gof(draws, lambda k: stats.poisson.logpmf(k, 303.0)))


def test_refuses_what_it_cannot_certify(rng):
    """A bound that is never met raises after the cap instead of drawing from a truncation; a
    non-finite centre is refused."""
    with pytest.raises(RuntimeError, match="no window of up to 1000 values"):
        draw_in_window(lambda ns: np.zeros(ns.size), 5.0, lambda lo, hi: 0.0, rng, max_window=1000)
    with pytest.raises(ValueError, match="centre"):
        draw_in_window(lambda ns: np.zeros(ns.size), math.nan, lambda lo, hi: 0.0, rng)
