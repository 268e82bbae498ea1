"""The harness shared by the property-based fuzz files (``tests/test_fuzz.py``,
``tests/test_fuzz_release.py``): hypothesis settings, the time-bounded call and the strategy of
hostile scalars.

The examples are derandomized (a fixed hypothesis seed), so CI and ``make test`` see the same
inputs every run; ``make fuzz`` sets ``PYMC_DP_FUZZ_RANDOM=1``: new inputs every run, ten times
as many (:func:`n_examples`). The test files import this module with their own folder on
``sys.path`` (under ``--import-mode=importlib`` test modules cannot import each other).

Examples
--------
>>> n_examples(300) == (3000 if RANDOM else 300)
True
>>> call(int, "7", names=("x",), time_bound=5.0)
(7, None)
>>> _, exc = call(int, "seven", names=("literal",), time_bound=5.0)
>>> type(exc).__name__
'ValueError'
>>> real(np.float32(0.5)), real("0.5"), real(True), positive(np.asarray(2.0)), positive([2.0])
(0.5, None, None, True, False)
"""

from __future__ import annotations

import contextlib
import math
import os
import signal

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

__all__ = ["FUZZ", "RANDOM", "any_scalar", "bounded", "call", "n_examples", "positive", "real"]

#: ``make fuzz`` sets this: random exploration (new inputs every run) instead of the fixed cases
RANDOM = bool(os.environ.get("PYMC_DP_FUZZ_RANDOM"))


def n_examples(examples: int) -> int:
    """Examples per test: the fixed count, or ten times more under ``make fuzz``."""
    return 10 * examples if RANDOM else examples


FUZZ = settings(
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    # no shrinking: a failure is reported as found, in bounded time
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@contextlib.contextmanager
def bounded(seconds: float, hang: type[BaseException] = TimeoutError):
    """Raise ``hang`` if the block runs longer than ``seconds`` (a hang is a failure)."""

    def _alarm(signum, frame):
        raise hang(f"hang: no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call(fn, *args, names, time_bound: float, hang=TimeoutError, **kwargs):
    """``fn(*args, **kwargs)`` within ``time_bound`` seconds (else ``hang`` is raised); a
    ValueError/TypeError must name one of ``names``. Returns ``(result, None)`` or
    ``(None, exception)``."""
    try:
        with bounded(time_bound, hang):
            return fn(*args, **kwargs), None
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert any(n in msg for n in names), (
            f"{type(exc).__name__} does not name any of {names}: {msg!r}"
        )
        return None, exc


def any_scalar(strings, numpy_scalars, *more):
    """Anything a user or a broken pipeline might pass as a number: floats (NaN, infinities,
    subnormals), huge and small integers, booleans, None, the given ``strings``, complex
    numbers, the given ``numpy_scalars``, then the strategies ``more``.

    (Each fuzz file keeps its own lists: the derandomized examples follow the strategy's
    structure, so a change here changes every fixed case.)
    """
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(min_value=1e-320, max_value=1e-300),
        st.floats(min_value=1e-3, max_value=1e3),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.integers(min_value=1, max_value=10),
        st.booleans(),
        st.none(),
        st.sampled_from(strings),
        st.complex_numbers(max_magnitude=10),
        st.sampled_from(numpy_scalars),
        *more,
    )


def real(v) -> float | None:
    """``float(v)`` for a plain real number (not a bool, string, complex, None, duration, list);
    else None."""
    if isinstance(v, bool | np.bool_ | str | complex | type(None) | np.timedelta64):
        return None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def positive(v) -> bool:
    """``v`` is a plain positive finite real (:func:`real`)."""
    f = real(v)
    return f is not None and math.isfinite(f) and f > 0
