r"""Shared pieces of the exact samplers, and the package's one source of secure randomness.

This module holds what the exact samplers of the noise laws share; each law's own sampler lives
with the rest of its math (one home per law):

* :func:`random_words` -- **the** random source of pymc_dp: uniform 64-bit words from the
  operating system's CSPRNG (``os.urandom``) when ``rng is None`` (the secure default for real
  releases), or from a numpy ``Generator``'s bit generator (reproducible simulations). Every
  release draw of every mechanism reads its randomness through it; :func:`secure_uniform` maps
  its words to doubles for the float mechanisms;
* Bernoulli(:math:`e^{-\gamma}`) for a rational :math:`\gamma = n/d \ge 0` (Canonne, Kamath &
  Steinke 2020, "The Discrete Gaussian for Differential Privacy" (CKS), Algorithm 1), on the
  word stream, with the uniform-integer draw it needs (:func:`sample_bernoulli_exp`);
* the driver that runs a numba kernel over a buffer of words (``_drive``) and
  :func:`best_rational`, the rational approximations the samplers need.

The discrete Laplace sampler (CKS Algorithm 2) is in :mod:`pymc_dp.kernels.discrete_laplace`,
the discrete Gaussian one (CKS Algorithm 3, with :func:`gaussian_rational`) in
:mod:`pymc_dp.kernels.discrete_gaussian`; their names are still importable from here.

No floating-point number is involved in an exact draw: the only inputs are uniform random 64-bit
words, of which the top bit is dropped (63-bit words), and every decision is an exact comparison
of integers, so the output follows the stated law exactly (no float-rounding leak, Mironov 2012).

Random words and reproducibility
--------------------------------
The numba kernels consume a buffer of random words and are deterministic functions of that word
stream. A Python driver fills the buffer from :func:`random_words`. If the buffer runs out in the
middle of a draw, the kernel stops *before committing* that draw and reports where the draw
started; the driver appends fresh words after the unread ones and the kernel re-runs the draw
from the same position. Because a draw is a deterministic function of the word stream, the re-run
reproduces the words already read and continues with new ones: no word is ever discarded and no
draw is conditioned on the buffer length. The Python loop runs once per buffer (about a million
words), never once per draw.

Integer-overflow safety
-----------------------
All arithmetic is in int64. Uniform integers below ``n`` come from rejection on 63-bit words, and
a Bernoulli(``n / (d k)``) whose denominator would overflow is drawn as the product of independent
Bernoulli(``n / d``) and Bernoulli(``1 / k``) draws, which is the same law. The ranges each
law's sampler needs are checked by its driver (see the two law modules).

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.exact_sampling import random_words, sample_bernoulli_exp
>>> random_words(3, rng=np.random.default_rng(0)).dtype
dtype('int64')
>>> sample_bernoulli_exp(1, 2, 4, rng=np.random.default_rng(0)).shape
(4,)
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numba
import numpy as np

__all__ = [
    "MAX_INT",
    "best_rational",
    "check_rng",
    "random_words",
    "sample_bernoulli_exp",
    "secure_uniform",
]

#: largest numerator / denominator accepted by the integer kernels
MAX_INT = 2**61

_MASK63 = np.int64(0x7FFFFFFFFFFFFFFF)
_MAX63 = 0x7FFFFFFFFFFFFFFF

# Words kept per buffer: bounds memory (8 MB) while keeping the Python loop per buffer negligible.
_MAX_CHUNK = 1 << 20


# ---- random word source (state: st[0] = read position, st[1] = 1 once exhausted) --------------
@numba.njit(cache=True)
def _next_word(words, st):
    pos = st[0]
    if pos >= words.size:
        st[1] = 1
        return np.int64(0)
    st[0] = pos + 1
    return words[pos] & 0x7FFFFFFFFFFFFFFF


@numba.njit(cache=True)
def _uniform_below(n, words, st):
    """Uniform integer in ``[0, n)`` for ``1 <= n <= 2**62``, by rejection on 63-bit words."""
    if n == 1:
        return np.int64(0)
    # r = 2**63 mod n; the words w <= 2**63 - 1 - r come in n-sized complete blocks
    r = (_MAX63 % n + 1) % n
    while True:
        w = _next_word(words, st)
        if st[1]:
            return np.int64(0)
        if r == 0 or w <= _MAX63 - r:
            return w % n


@numba.njit(cache=True)
def _bernoulli_frac(num, den, k, words, st):
    """Bernoulli(``num / (den * k)``) for ``0 <= num <= den``, ``k >= 1``."""
    if den <= (_MAX63 >> 1) // k:
        return _uniform_below(den * k, words, st) < num
    # den * k would overflow: the product of independent Bernoulli(num/den) and Bernoulli(1/k)
    if _uniform_below(den, words, st) >= num:
        return False
    return _uniform_below(k, words, st) == 0


@numba.njit(cache=True)
def _bernoulli_exp_unit(num, den, words, st):
    """Bernoulli(``exp(-num/den)``) for ``0 <= num <= den`` (CKS Algorithm 1, gamma in [0, 1]).

    Draw ``A_k ~ Bernoulli(gamma / k)`` for ``k = 1, 2, ...`` until the first ``A_K = 0`` and
    return ``K odd``; P(K odd) = sum_j (-gamma)^j / j! = exp(-gamma).
    """
    k = np.int64(1)
    while True:
        if st[1]:
            return False
        if not _bernoulli_frac(num, den, k, words, st):
            break
        k += 1
    return (k % 2) == 1


@numba.njit(cache=True)
def _bernoulli_exp_parts(q, r, den, words, st):
    """Bernoulli(``exp(-(q + r/den))``) for ``q >= 0`` and ``0 <= r < den`` (CKS Algorithm 1).

    ``exp(-gamma) = exp(-1)**q * exp(-r/den)``: a product of independent Bernoulli draws,
    stopped at the first failure. ``q`` and ``r/den`` come apart, so ``q den + r`` need not
    fit in an int64 (the exponential mechanism's gammas).
    """
    for _ in range(q):
        if not _bernoulli_exp_unit(1, 1, words, st):
            return False
        if st[1]:
            return False
    return _bernoulli_exp_unit(r, den, words, st)


@numba.njit(cache=True)
def _bernoulli_exp(num, den, words, st):
    """Bernoulli(``exp(-num/den)``) for rational ``num/den >= 0`` (CKS Algorithm 1)."""
    q = num // den
    return _bernoulli_exp_parts(q, num - q * den, den, words, st)


@numba.njit(cache=True)
def _fill_bernoulli_exp(out, start, words, pos, num, den):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    i = start
    while i < out.size:
        p = st[0]
        b = _bernoulli_exp(num, den, words, st)
        if st[1]:
            return i, p
        out[i] = 1 if b else 0
        i += 1
    return i, st[0]


# ---- Python drivers -----------------------------------------------------------------------------
def check_rng(rng) -> None:
    """Refuse anything but ``None`` or a ``numpy.random.Generator`` (ints, RandomState, ...)."""
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (for simulations) or None (secure source), "
            f"got {type(rng).__name__}"
        )


def random_words(n: int, rng=None) -> np.ndarray:
    """``n`` uniform random 64-bit words as int64: the one random source of pymc_dp.

    ``rng=None`` reads the operating system's secure source (``os.urandom``); a numpy
    ``Generator`` gives reproducible words from its bit generator (simulations only).

    Examples
    --------
    >>> import numpy as np
    >>> w = random_words(1000)  # os.urandom
    >>> w.dtype, w.shape
    (dtype('int64'), (1000,))
    """
    check_rng(rng)
    if rng is None:
        return np.frombuffer(os.urandom(8 * n), dtype=np.int64).copy()
    return rng.bit_generator.random_raw(n).view(np.int64)


_TWO_M53 = np.float64(2.0**-53)


def secure_uniform(size, rng=None) -> np.ndarray:
    """Uniform doubles on the open interval (0, 1) from :func:`random_words`.

    Each value is ``(m + 1/2) 2^-53`` with ``m`` the top 53 bits of a word: a uniform grid of
    ``2^53`` points strictly inside (0, 1). With ``rng=None`` this is a secure *source*;
    transforming it to floating-point noise still leaks through the float grid (Mironov 2012).

    Examples
    --------
    >>> u = secure_uniform((2, 3))
    >>> u.shape, bool(((u > 0) & (u < 1)).all())
    ((2, 3), True)
    """
    size = tuple(np.atleast_1d(np.asarray(size, dtype=np.int64))) if size is not None else ()
    w = random_words(math.prod(size), rng).view(np.uint64)
    return (((w >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_M53).reshape(size)


def _drive(fill, size, params, rng, words_per_draw):
    shape = (size,) if np.ndim(size) == 0 and size is not None else tuple(size or ())
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out.reshape(shape)
    words = random_words(min(_MAX_CHUNK, int(n * words_per_draw) + 64), rng)
    i, pos = 0, 0
    while True:
        i, pos = fill(out, i, words, pos, *params)
        if i >= n:
            break
        left = words[pos:]
        need = min(_MAX_CHUNK, int((n - i) * words_per_draw) + 64)
        need = max(need, left.size + 64)  # grows geometrically if one draw needs many words
        words = np.concatenate([left, random_words(need, rng)])
        pos = 0
    return out.reshape(shape)


def _check_int(name, v, lo=1, hi=MAX_INT):
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {v!r}")
    return int(v)


def sample_bernoulli_exp(num: int, den: int, size, rng=None) -> np.ndarray:
    """Exact Bernoulli(``exp(-num/den)``) draws (CKS Algorithm 1), as int64 0/1.

    Examples
    --------
    >>> import numpy as np
    >>> b = sample_bernoulli_exp(1, 2, 10_000, rng=np.random.default_rng(1))
    >>> bool(abs(b.mean() - np.exp(-0.5)) < 0.02)
    True
    """
    num = _check_int("num", num, lo=0)
    den = _check_int("den", den)
    return _drive(_fill_bernoulli_exp, size, (np.int64(num), np.int64(den)), rng, 4.0)


def best_rational(x: Fraction, bound: int, direction: str, pbound: int | None = None) -> Fraction:
    """Best rational ``p/q`` approximating ``x > 0`` from below or above, ``q <= bound``.

    The numerator is bounded by ``pbound`` (default: ``bound``).

    Walks the Stern-Brocot tree keeping the Farey neighbours ``lo <= x < hi``; once their mediant
    exceeds the bound no fraction with numerator and denominator ``<= bound`` lies strictly
    between them, so ``lo`` (``direction="below"``) or ``hi`` (``"above"``) is the best one.
    Exact rationals that fit are returned unchanged.

    Examples
    --------
    >>> from fractions import Fraction
    >>> best_rational(Fraction(22, 7), 100, "below")
    Fraction(22, 7)
    >>> best_rational(Fraction(314159, 100000), 1000, "below"), best_rational(
    ...     Fraction(314159, 100000), 1000, "above")
    (Fraction(688, 219), Fraction(355, 113))
    """
    if x <= 0:
        raise ValueError(f"x must be > 0, got {x}")
    pbound = bound if pbound is None else pbound
    xn, xd = x.numerator, x.denominator
    lp, lq, hp, hq = 0, 1, 1, 0  # lo = lp/lq <= x < hi = hp/hq
    while True:
        mp, mq = lp + hp, lq + hq
        if mp > pbound or mq > bound:
            break
        if mp * xd <= xn * mq:  # mediant <= x: move lo towards x as far as possible
            # largest j with (lp + j hp) / (lq + j hq) <= x
            j = (xn * lq - xd * lp) // (xd * hp - xn * hq)
            jb = (pbound - lp) // hp
            if hq:
                jb = min(jb, (bound - lq) // hq)
            j = min(j, jb)
            lp, lq = lp + j * hp, lq + j * hq
            if lp * xd == xn * lq:
                hp, hq = lp, lq  # exact
                break
        else:  # mediant > x: move hi down; largest j with (hp + j lp)/(hq + j lq) > x
            num = xd * hp - xn * hq  # > 0
            dd = xn * lq - xd * lp  # > 0 (lo < x strictly here)
            j = (num - 1) // dd
            jb = (bound - hq) // lq
            if lp:
                jb = min(jb, (pbound - hp) // lp)
            j = max(1, min(j, jb))
            hp, hq = hp + j * lp, hq + j * lq
    if direction == "below":
        if lp == 0:
            raise ValueError(f"no positive rational below {float(x)!r} with terms <= {bound}")
        return Fraction(lp, lq)
    if direction == "above":
        if hq == 0:
            raise ValueError(f"no rational above {float(x)!r} with terms <= {bound}")
        return Fraction(hp, hq)
    raise ValueError(f"direction must be 'below' or 'above', got {direction!r}")


# Each law's sampler lives with its law; these names stay importable from here.
_MOVED = {
    "MAX_LAPLACE_SCALE": "pymc_dp.kernels.discrete_laplace",
    "sample_discrete_laplace": "pymc_dp.kernels.discrete_laplace",
    "gaussian_rational": "pymc_dp.kernels.discrete_gaussian",
    "sample_discrete_gaussian": "pymc_dp.kernels.discrete_gaussian",
}


def __getattr__(name):
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
