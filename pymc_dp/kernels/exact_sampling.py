r"""Exact samplers of the discrete Laplace and discrete Gaussian laws in integer arithmetic.

These are the algorithms of Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
Differential Privacy" (CKS):

* Algorithm 1 -- a Bernoulli(:math:`e^{-\gamma}`) draw for a rational :math:`\gamma = n/d \ge 0`;
* Algorithm 2 -- a discrete Laplace draw with pmf :math:`\propto e^{-|y|\,s/t}` for integers
  ``s, t >= 1`` (so :math:`\alpha = e^{-s/t}`);
* Algorithm 3 -- a discrete Gaussian draw with pmf :math:`\propto e^{-y^2/(2\sigma^2)}` for
  rational :math:`\sigma^2`, by rejection from a discrete Laplace proposal.

No floating-point number is involved in a draw: the only inputs are uniform random 64-bit words,
of which the top bit is dropped (63-bit words), and every decision is an exact comparison of
integers, so the output follows the stated law exactly (no float-rounding leak, Mironov 2012).

Random words and reproducibility
--------------------------------
The numba kernels consume a buffer of random words and are deterministic functions of that word
stream. A Python driver (:func:`sample_discrete_laplace`, :func:`sample_discrete_gaussian`) fills
the buffer from ``os.urandom`` when ``rng is None`` (the secure default for real releases) or from
``rng.bit_generator.random_raw`` when a numpy ``Generator`` is given (reproducible simulations). If
the buffer runs out in the middle of a draw, the kernel stops *before committing* that draw and
reports where the draw started; the driver appends fresh words after the unread ones and the kernel
re-runs the draw from the same position. Because a draw is a deterministic function of the word
stream, the re-run reproduces the words already read and continues with new ones: no word is ever
discarded and no draw is conditioned on the buffer length. The Python loop runs once per buffer
(about a million words), never once per draw.

Integer-overflow safety
-----------------------
All arithmetic is in int64. The drivers check the ranges that keep it exact: ``1 <= s, t <= 2**61``
and ``t / s <= 2**50`` for the discrete Laplace (a draw is about ``(t / s) V`` with ``V``
geometric, ``P(V >= v) = e^{-v}``, so it could leave int64 only if ``V >= 2**12``, with
probability below ``e^{-4096}``; larger scales, where about 1% of draws wrapped, are refused),
and for the discrete Gaussian the constraints listed in
:func:`gaussian_rational`. Uniform integers below ``n`` come from rejection on 63-bit words, and a
Bernoulli(``n / (d k)``) whose denominator would overflow is drawn as the product of independent
Bernoulli(``n / d``) and Bernoulli(``1 / k``) draws, which is the same law.

The discrete Gaussian sampler never returns :math:`|y| >` ``ymax`` with
``ymax >= sigma**2 / t + 40 sigma``; under the target law that event has probability below
:math:`e^{-800} < 10^{-340}` (it is proposed again instead), which is far below anything a float
could represent. This is the only departure from the exact law, and it keeps ``(d|y| - m)^2``
inside int64.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.exact_sampling import sample_discrete_laplace
>>> y = sample_discrete_laplace(1, 1, 5, rng=np.random.default_rng(0))  # alpha = exp(-1)
>>> y.dtype, y.shape
(dtype('int64'), (5,))
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numba
import numpy as np

__all__ = [
    "MAX_INT",
    "MAX_LAPLACE_SCALE",
    "best_rational",
    "gaussian_rational",
    "random_words",
    "sample_bernoulli_exp",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
]

#: largest numerator / denominator accepted by the integer kernels
MAX_INT = 2**61
#: largest scale t / s of the discrete Laplace sampler (see "Integer-overflow safety")
MAX_LAPLACE_SCALE = 2**50

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
def _bernoulli_exp(num, den, words, st):
    """Bernoulli(``exp(-num/den)``) for rational ``num/den >= 0`` (CKS Algorithm 1).

    ``exp(-gamma) = exp(-1)**floor(gamma) * exp(-(gamma - floor(gamma)))``: a product of
    independent Bernoulli draws, stopped at the first failure.
    """
    q = num // den
    r = num - q * den
    for _ in range(q):
        if not _bernoulli_exp_unit(1, 1, words, st):
            return False
        if st[1]:
            return False
    return _bernoulli_exp_unit(r, den, words, st)


@numba.njit(cache=True)
def _discrete_laplace_one(s, t, words, st):
    """One draw with pmf proportional to ``exp(-|y| s / t)`` (CKS Algorithm 2)."""
    while True:
        if st[1]:
            return np.int64(0)
        # U uniform on {0..t-1} kept with prob exp(-U/t): P(U = u) propto exp(-u/t)
        u = _uniform_below(t, words, st)
        if not _bernoulli_exp_unit(u, t, words, st):
            continue
        # V geometric: P(V = v) propto exp(-v)
        v = np.int64(0)
        while _bernoulli_exp_unit(1, 1, words, st):
            if st[1]:
                return np.int64(0)
            v += 1
        if st[1]:
            return np.int64(0)
        # X = U + t V has P(X = x) propto exp(-x/t); Y = floor(X / s) has P(Y = y) propto
        # exp(-y s/t). floor((U + t V)/s) is accumulated V times so nothing overflows.
        y = u // s
        rem = u - y * s
        for _ in range(v):
            rem += t
            qq = rem // s
            y += qq
            rem -= qq * s
        # random sign; reject (negative zero) so that 0 is not counted twice
        b = _uniform_below(2, words, st)
        if st[1]:
            return np.int64(0)
        if b == 1 and y == 0:
            continue
        return -y if b == 1 else y


@numba.njit(cache=True)
def _fill_discrete_laplace(out, start, words, pos, s, t):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    i = start
    while i < out.size:
        p = st[0]
        y = _discrete_laplace_one(s, t, words, st)
        if st[1]:
            return i, p
        out[i] = y
        i += 1
    return i, st[0]


@numba.njit(cache=True)
def _discrete_gaussian_one(t, m, d, ymax, words, st):
    """One draw with pmf proportional to ``exp(-y^2 / (2 sigma^2))``, ``sigma^2 = t m / d``.

    CKS Algorithm 3: propose ``Y`` from the discrete Laplace with scale ``t`` (``s = 1``) and accept
    with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``. With ``sigma^2 / t = m / d`` the
    exponent is the rational ``(d|Y| - m)^2 / (2 d t m)``.
    """
    den = 2 * d * t * m
    while True:
        y = _discrete_laplace_one(1, t, words, st)
        if st[1]:
            return np.int64(0)
        ay = abs(y)
        if ay > ymax:
            continue
        a = d * ay - m
        if _bernoulli_exp(a * a, den, words, st):
            if st[1]:
                return np.int64(0)
            return y
        if st[1]:
            return np.int64(0)


@numba.njit(cache=True)
def _fill_discrete_gaussian(out, start, words, pos, t, m, d, ymax):
    st = np.zeros(2, dtype=np.int64)
    st[0] = pos
    i = start
    while i < out.size:
        p = st[0]
        y = _discrete_gaussian_one(t, m, d, ymax, words, st)
        if st[1]:
            return i, p
        out[i] = y
        i += 1
    return i, st[0]


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
def random_words(n: int, rng=None) -> np.ndarray:
    """``n`` uniform random 64-bit words as int64.

    ``rng=None`` reads the operating system's secure source (``os.urandom``); a numpy
    ``Generator`` gives reproducible words from its bit generator.
    """
    if rng is None:
        return np.frombuffer(os.urandom(8 * n), dtype=np.int64).copy()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator or None, got {rng!r}")
    return rng.bit_generator.random_raw(n).view(np.int64)


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


def sample_discrete_laplace(s: int, t: int, size, rng=None) -> np.ndarray:
    """Exact draws with pmf ``(1 - alpha)/(1 + alpha) alpha**|y|``, ``alpha = exp(-s/t)``.

    CKS Algorithm 2 for integers ``1 <= s, t <= 2**61`` with ``t / s <= 2**50``; see the module
    docstring for the random source (``rng=None`` is secure, a ``Generator`` is reproducible).
    """
    s = _check_int("s", s)
    t = _check_int("t", t)
    if t > s * MAX_LAPLACE_SCALE:
        raise ValueError(
            f"the scale t / s = {t}/{s} exceeds 2**50: draws could overflow int64 "
            "(use s / t >= 2**-50, i.e. epsilon / sensitivity >= 8.9e-16)"
        )
    return _drive(_fill_discrete_laplace, size, (np.int64(s), np.int64(t)), rng, 12.0)


# Largest |d y - m| kept in int64 when squared: floor(sqrt(2**63 - 1)).
_A_MAX = math.isqrt(_MAX63)


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


def gaussian_rational(sigma2: Fraction):
    """Integer parameters ``(t, m, d, ymax)`` of the exact discrete Gaussian sampler.

    The sampled variance is ``t m / d >= sigma2`` (rounded towards more noise), with
    ``t = floor(sigma) + 1`` (CKS's choice of proposal scale) and ``m / d`` the best rational
    approximation from above of ``sigma2 / t`` whose terms keep every product in int64:
    ``d * ymax + m <= floor(sqrt(2**63 - 1))`` and ``2 d t m <= 2**62``.
    Exact binary rationals with small denominators (``sigma = 2.0``, ``0.5`` ...) are kept exactly.

    Examples
    --------
    >>> from fractions import Fraction
    >>> t, m, d, ymax = gaussian_rational(Fraction(4))
    >>> (t, m, d), Fraction(t * m, d)
    ((3, 4, 3), Fraction(4, 1))
    """
    if not sigma2 > 0:
        raise ValueError(f"sigma**2 must be > 0, got {sigma2}")
    sigma = math.sqrt(float(sigma2))
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1  # floor(sigma) + 1
    c = sigma2 / t  # c < sigma + 1
    ceil_c = math.ceil(c)  # exact on a Fraction
    ymax = ceil_c + math.ceil(40.0 * sigma) + 2
    # d * ymax + m <= A_MAX with m <= c d + 1 and 2 d t m <= 2**62:
    dmax = (_A_MAX - 1) // (ymax + ceil_c + 1)
    dmax = min(dmax, math.isqrt((2**61) // (t * (ceil_c + 1))))
    if dmax < 1:
        raise ValueError(f"sigma={sigma!r} is too large for the exact int64 sampler")
    approx = best_rational(c, dmax, "above", pbound=_A_MAX)
    m, d = approx.numerator, approx.denominator
    if d > dmax or d * ymax + m > _A_MAX or 2 * d * t * m > 2**62:  # pragma: no cover - guard
        raise ValueError(f"sigma={sigma!r} is out of range for the exact int64 sampler")
    return t, m, d, ymax


def sample_discrete_gaussian(t: int, m: int, d: int, ymax: int, size, rng=None) -> np.ndarray:
    """Exact discrete Gaussian draws with ``sigma**2 = t m / d`` (CKS Algorithm 3).

    Get the parameters from :func:`gaussian_rational`.

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> y = sample_discrete_gaussian(*gaussian_rational(Fraction(4)), 20_000,
    ...                              rng=np.random.default_rng(2))
    >>> bool(abs(y.var() / 4 - 1) < 0.05)
    True
    """
    t, m, d, ymax = (_check_int(n, v) for n, v in zip("tmdy", (t, m, d, ymax), strict=True))
    if d * ymax + m > _A_MAX or 2 * d * t * m > 2**62:
        raise ValueError("discrete Gaussian parameters overflow int64; use gaussian_rational")
    params = (np.int64(t), np.int64(m), np.int64(d), np.int64(ymax))
    return _drive(_fill_discrete_gaussian, size, params, rng, 24.0)
