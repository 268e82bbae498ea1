r"""Exact draws of an exponential mechanism over a finite set with rational log-weights.

The law: index ``j`` of ``J`` candidates with probability proportional to :math:`e^{-\gamma_j}`,
where every :math:`\gamma_j = q_j + r_j/d \ge 0` is rational (``q_j`` a non-negative integer,
``0 <= r_j < d``) and ``min_j gamma_j = 0``. Utilities on an integer (grid) scale multiplied by a
rational rate give exactly this form (:func:`log_weights_to_gammas`).

Algorithm (rejection from the uniform proposal, as in Canonne, Kamath & Steinke 2020, Alg. 2-3):
draw ``j`` uniformly (an exact uniform integer from 63-bit words) and accept it with probability
:math:`e^{-\gamma_j}`, drawn exactly as the product of ``q_j`` Bernoulli(:math:`e^{-1}`) draws and
one Bernoulli(:math:`e^{-r_j/d}`) draw (CKS Algorithm 1, stopped at the first failure);
otherwise repeat. The accepted index has law :math:`e^{-\gamma_j}/\sum_k e^{-\gamma_k}` exactly;
the expected number of proposals is :math:`J / \sum_k e^{-\gamma_k} \le J` (the best candidate has
:math:`\gamma = 0`). No floating-point number enters a draw.

``q_j`` is capped at ``2**62`` (int64): a candidate with :math:`\gamma_j \ge 2^{62}` is then
accepted with probability :math:`e^{-2^{62}}` instead of a smaller one; both are below
:math:`2^{-2^{61}}`, so no run can tell them apart.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.exponential_mechanism import sample_exponential_mechanism
>>> j = sample_exponential_mechanism([0, 1], [0, 0], 1, size=1000, rng=np.random.default_rng(0))
>>> bool(0.6 < np.mean(j == 0) < 0.85)  # e / (1 + e) = 0.73
True
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numba
import numpy as np

from pymc_dp.kernels.exact_sampling import (
    _bernoulli_exp_parts,
    _check_int,
    _drive,
    _uniform_below,
    best_rational,
)

__all__ = ["exact_log_probabilities", "log_weights_to_gammas", "sample_exponential_mechanism"]

#: cap on the integer part of a gamma (module docstring)
_Q_CAP = 2**62
#: most candidates accepted by the kernel (uniform integers are drawn below 2**62)
MAX_CANDIDATES = 2**40
#: largest numerator and denominator of the rational rate of :func:`_utility_rate`
_RATE_BOUND = 2**60


def _utility_rate(epsilon: float, sensitivity: int) -> Fraction:
    """The rate ``s/t`` of an exponential mechanism whose integer utility has replace-one
    sensitivity ``sensitivity``: the best rational ``<= epsilon / (2 sensitivity)`` with terms
    ``<= 2**60`` (privacy loss ``2 sensitivity s/t <= epsilon``, no rounding left). ``0`` when
    the utility does not depend on the data (``sensitivity = 0``) or below ``2**-60``: a
    data-independent selection is 0-DP."""
    if sensitivity == 0:
        return Fraction(0)
    x = Fraction(epsilon) / (2 * sensitivity)
    if x < Fraction(1, _RATE_BOUND):
        return Fraction(0)
    return best_rational(x, _RATE_BOUND, "below", pbound=_RATE_BOUND)


@numba.njit(cache=True)
def _fill_choice(out, start, words, pos, q, r, den):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    n_cand = np.int64(q.size)
    i = start
    while i < out.size:
        p = st[0]  # a draw (with all its rejected proposals) restarts here if the words run out
        while True:
            j = _uniform_below(n_cand, words, st)
            if st[1]:
                return i, p
            # accept with probability exp(-(q_j + r_j/den)); r_j = 0 is passed as 0/1, which
            # reads no word
            ok = _bernoulli_exp_parts(q[j], r[j], den if r[j] > 0 else 1, words, st)
            if st[1]:
                return i, p
            if ok:
                out[i] = j
                break
        i += 1
    return i, st[0]


def log_weights_to_gammas(numerators, denominator: int):
    """``gamma_j = (max_k n_k - n_j) / d`` as ``(q, r, d)`` for integer log-weights ``n_j / d``.

    Parameters
    ----------
    numerators : sequence of int
        Exact integer numerators ``n_j`` (Python ints: any size) of the log-weights.
    denominator : int
        ``d``, in ``[1, 2**61]``.

    Returns
    -------
    q, r : numpy.ndarray of int64
        Integer and remainder parts (``q`` capped at ``2**62``, module docstring).
    d : int

    Examples
    --------
    >>> q, r, d = log_weights_to_gammas([7, 2, 9], 4)
    >>> q.tolist(), r.tolist(), d
    ([0, 1, 0], [2, 3, 0], 4)
    """
    d = _check_int("denominator", denominator)
    try:  # exact integers only: int() would truncate a float numerator
        n = [operator.index(v) for v in numerators]
    except TypeError:
        raise TypeError(f"numerators must be integers, got {numerators!r}") from None
    if not n:
        raise ValueError("numerators must hold at least one log-weight")
    top = max(n)
    q = np.empty(len(n), dtype=np.int64)
    r = np.empty(len(n), dtype=np.int64)
    for j, v in enumerate(n):  # exact integer arithmetic (once per candidate, not per draw)
        qj, rj = divmod(top - v, d)
        q[j], r[j] = min(qj, _Q_CAP), rj
    return q, r, d


def _checked_gammas(q, r, den):
    """``(q, r, den)`` as int64 arrays and an int, or ``ValueError`` naming what is wrong."""
    q, r = np.asarray(q), np.asarray(r)
    if q.dtype.kind not in "iu" or r.dtype.kind not in "iu":  # a float would be truncated
        raise TypeError(f"q and r must be integer arrays, got dtypes {q.dtype} and {r.dtype}")
    q = np.ascontiguousarray(q, dtype=np.int64)  # (uint64 above 2**63 wraps: refused below)
    r = np.ascontiguousarray(r, dtype=np.int64)
    den = _check_int("den", den)
    if q.ndim != 1 or q.shape != r.shape or q.size == 0 or q.size > MAX_CANDIDATES:
        raise ValueError("q and r must be 1-D arrays of the same, non-zero length")
    if not (np.all(q >= 0) and np.all((r >= 0) & (r < den)) and np.any((q == 0) & (r == 0))):
        raise ValueError("need q >= 0, 0 <= r < den, and some candidate with gamma = 0")
    return q, r, den


def sample_exponential_mechanism(q, r, den: int, size=None, rng=None) -> np.ndarray:
    """Exact draws of ``j`` with probability proportional to ``exp(-(q_j + r_j/den))``.

    Parameters
    ----------
    q, r : array_like of int
        ``q_j >= 0`` and ``0 <= r_j < den``, with some ``q_j = r_j = 0`` (the best candidate).
    den : int
        In ``[1, 2**61]``.
    size : int or tuple, optional
    rng : numpy.random.Generator, optional
        ``None``: the operating system's secure source; a Generator: reproducible words for
        simulations (:func:`pymc_dp.kernels.exact_sampling.random_words`).

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> import numpy as np
    >>> j = sample_exponential_mechanism([0, 0, 50], [0, 0, 0], 1, size=10_000,
    ...                                  rng=np.random.default_rng(1))
    >>> int(np.sum(j == 2))  # P(j = 2) = e^-50 / (2 + e^-50) per draw
    0
    >>> bool(abs(np.mean(j == 0) - 0.5) < 0.03)  # 6 standard errors
    True
    >>> sample_exponential_mechanism([1, 2], [0, 0], 1, size=1)  # no gamma is 0
    Traceback (most recent call last):
    ...
    ValueError: need q >= 0, 0 <= r < den, and some candidate with gamma = 0
    """
    q, r, den = _checked_gammas(q, r, den)
    with np.errstate(under="ignore"):
        mass = float(np.sum(np.exp(-(q.astype(np.float64) + r / den))))
    # expected words per draw: proposals x (uniform word + about 3 words per acceptance test)
    per_draw = 4.0 * q.size / max(mass, 1.0)
    return _drive(_fill_choice, size, (q, r, np.int64(den)), rng, min(per_draw, 1e6))


def exact_log_probabilities(q, r, den: int) -> np.ndarray:
    """``log P(j)`` of :func:`sample_exponential_mechanism`'s law, rounded to float64.

    Examples
    --------
    >>> exact_log_probabilities([0, 1], [0, 0], 1).round(4).tolist()
    [-0.3133, -1.3133]
    """
    q, r, den = _checked_gammas(q, r, den)
    g = q.astype(np.float64) + r.astype(np.float64) / den
    lse = math.log(float(np.sum(np.exp(-g))))
    return -g - lse
