r"""Exact draw of a non-negative integer from unnormalised log weights, over a certified window.

A law on ``{0, 1, 2, ...}`` known up to a constant, ``w(n)``, is drawn by inversion over a
window ``[lo, hi]`` around a centre ``c`` (``lo = max(0, floor(c) - W)``,
``hi = max(ceil(c), 0) + W``), given a rigorous upper bound ``B(lo, hi)`` on the mass
``sum_{n < lo} w(n) + sum_{n > hi} w(n)`` that the window leaves out. The window is accepted
when ``B <= tail * sum_{lo <= n <= hi} w(n)``, so the draw's law is within ``tail`` of the
target in total variation; otherwise ``W`` doubles, up to a window of ``max_window`` values,
beyond which :func:`draw_in_window` raises ``RuntimeError`` rather than draw from a truncated
law. Used by :class:`pymc_dp.step_methods.noisy_size.NoisySizeGibbs` (the number of records of
a noisy-size release), where ``B`` comes from the noise law of the released size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["WindowDraw", "draw_in_window"]


class WindowDraw(NamedTuple):
    """The value drawn, the number of values the window held, and its half-width ``W``."""

    value: int
    window: int
    half_width: int


def draw_in_window(
    log_weights: Callable[[np.ndarray], np.ndarray],
    centre: float,
    log_tail_bound: Callable[[int, int], float],
    rng: np.random.Generator,
    *,
    half_width: int = 32,
    tail: float = 1e-12,
    max_window: int = 2**22,
) -> WindowDraw:
    """Draw ``n >= 0`` with probability proportional to ``exp(log_weights(n))`` (see module).

    Parameters
    ----------
    log_weights : callable
        ``log_weights(ns)`` for an int64 array ``ns``: the unnormalised log weights.
    centre : float
        Finite; the window is built around it.
    log_tail_bound : callable
        ``log_tail_bound(lo, hi)``: log of an upper bound on the weight outside ``[lo, hi]``.
    rng : numpy.random.Generator
    half_width : int, default 32
        Starting ``W`` (e.g. the last accepted one).
    tail : float, default 1e-12
        Largest accepted ratio of the bound to the window's mass.
    max_window : int, default 2**22

    Returns
    -------
    WindowDraw

    Raises
    ------
    RuntimeError
        When no window up to ``max_window`` values is certified.

    Examples
    --------
    A Poisson(4) law: beyond ``hi`` its mass is at most ``P(n > hi)``, which SciPy bounds.

    >>> from scipy import stats
    >>> out = draw_in_window(
    ...     lambda ns: stats.poisson.logpmf(ns, 4.0), 4.0,
    ...     lambda lo, hi: stats.poisson.logsf(hi, 4.0), np.random.default_rng(1),
    ... )
    >>> out.window, 0 <= out.value <= 37
    (37, True)
    """
    if not math.isfinite(centre):
        raise ValueError(f"centre must be finite, got {centre!r}")
    w = int(half_width)
    log_tail = math.log(tail)
    while True:
        lo = max(0, math.floor(centre) - w)
        hi = max(math.ceil(centre), 0) + w
        ns = np.arange(lo, hi + 1, dtype=np.int64)
        logw = np.asarray(log_weights(ns), dtype=np.float64)
        top = float(np.max(logw))
        if np.isfinite(top):
            kept = top + math.log(float(np.sum(np.exp(logw - top))))
            if log_tail_bound(lo, hi) - kept <= log_tail:
                break
        if ns.size > max_window:
            raise RuntimeError(
                f"no window of up to {max_window} values around {centre!r} holds all but "
                f"{tail:g} of the mass (its bound is not met)"
            )
        w *= 2
    cdf = np.cumsum(np.exp(logw - top))
    k = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return WindowDraw(int(ns[min(k, ns.size - 1)]), int(ns.size), w)
