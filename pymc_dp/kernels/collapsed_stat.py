r"""Exact draws of a collapsed released statistic (issue 12, kernel half).

Exchangeable records ``x_1..x_N ~ f(theta)`` enter a release only through their sum ``S``
(a count, a count vector, a real sum); the release is ``z_k = a_k + b_k S + noise_k``. Given
``theta`` the sum has an exact law ``f_S`` (Binomial, Poisson, Multinomial, Normal), so the N
records collapse into one latent ``S`` whose conditional given the release is

.. math::

    \pi(S) \propto f_S(S \mid \theta) \prod_k \eta_k(z_k - a_k - b_k S).

This is the data augmentation of Ju, Awan, Gong & Rao (2022) with the records replaced by their
sufficient statistic (issue 12: collapse exchangeable records into their statistic). Three
kernels draw from ``pi`` exactly:

* :func:`count_sampler`: ``S`` Binomial or Poisson, any log-concave noise, by inverse CDF over a
  window certified to hold all but ``1e-14`` (relative) of the mass;
* :func:`counts_gibbs_sampler`: a Multinomial count vector, by exact Gibbs pair moves that reuse
  the 1-D window sampler;
* :func:`sample_normal_sum`: a Normal sum with Gaussian (any number of components) or Laplace
  (one component) noise, in closed form.

With a conjugate prior on ``theta`` the parameter can be integrated out instead: ``S`` then
follows its marginal law (beta-binomial, negative binomial, Dirichlet-multinomial) and
:func:`marginal_count_sampler` / :func:`marginal_counts_gibbs_sampler` draw it by the same
window (log-concave when the prior's shape parameters are ``>= 1``), after which ``theta | S``
is conjugate: an independent joint draw where the alternation ``S | theta``, ``theta | S``
mixes slowly (noise wide relative to the spread of ``S`` given ``theta``).

Window and its certificate (:func:`count_sampler`). ``log f_S`` is concave in ``S`` (Binomial
and Poisson pmfs are log-concave, the marginal laws when their shape parameters are ``>= 1``:
:func:`marginal_count_sampler`) and so is each ``log eta_k`` of an affine function of ``S``
(Laplace, Gaussian, two-sided geometric and discrete Gaussian noise, and their censored log CDF /
log SF), so ``L(S) = log pi(S)`` is concave on the integers. Hence:

1. the mode ``M`` is the first ``S`` whose forward difference ``L(S+1) - L(S)`` is ``<= 0``:
   integer bisection, ``O(log n)`` evaluations (unbounded laws: the bracket is doubled first);
2. the ratios ``r_j = pi(j+1)/pi(j)`` are non-increasing, so beyond a point ``h > M`` the
   right tail is at most ``pi(h) r_h / (1 - r_h)`` with ``r_h = pi(h)/pi(h-1) < 1`` (a geometric
   series; the left tail likewise). The window is grown from ``M`` until ``L`` is 36 below
   ``L(M)`` and this bound is at most ``5e-15`` times the window mass on each side (or the
   support ends): the neglected mass is at most ``1e-14`` of the window mass, by proof;
3. ``S`` is the inverse CDF of the window at ``u`` (``u`` times the window mass, walked from
   the mode into the side that holds it, re-using the very weights of step 2).

Weights are relative to the mode and ``log f_S`` is accumulated from the mode by its exact
log ratio (``log((n-S) p / ((S+1)(1-p)))``, ``log(mu/(S+1))``), so nothing large cancels
(``n`` up to ``1e12``, ``p`` down to ``1e-300`` or up to ``1 - 1e-16``). The cost is
``O(log n + window)``: the window is set by the narrower of the sum's law and the noise, not by
``n``.

References
----------
Ju, N., Awan, J. A., Gong, R. and Rao, V. A. (2022). Data augmentation MCMC for Bayesian
inference from privatized data. *Advances in Neural Information Processing Systems 35*.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp.kernels.noise_logpdf import call_logpdf, njit_for, specialised

special = lazy_module("scipy.special")

__all__ = [
    "BETA_BINOMIAL",
    "BINOMIAL",
    "NEG_BINOMIAL",
    "POISSON",
    "count_log_marginal",
    "count_sampler",
    "counts_gibbs_sampler",
    "marginal_count_sampler",
    "marginal_counts_gibbs_sampler",
    "sample_normal_sum",
]

#: family codes of the sum's law (first argument of the samplers)
BINOMIAL = 0
POISSON = 1
BETA_BINOMIAL = 2
NEG_BINOMIAL = 3
#: return value of :func:`count_sampler` when the release is impossible (zero likelihood)
IMPOSSIBLE = -1
#: return value for invalid parameters, or a window wider than ``2 * _MAX_SIDE`` counts
INVALID = -2

_DROP = -36.0  # log-density below the mode that the window must reach on each open side
_SIDE_TOL = 5e-15  # certified neglected mass per side, relative to the window mass
_MAX_SIDE = 2**31  # window half-width cap (a call is always bounded)
_COUNT_MAX = 2**53  # largest count considered: float(S) is exact below it (noise arguments)
_ODDS_LO = 1e-250  # odds in (_ODDS_LO, 1/_ODDS_LO): log of a product, else sum of logs
_EXPAND, _AT_LEAST, _ABOVE = 0, 1, 2  # walk modes
# _DISK_CACHE_NOTE: numba's on-disk cache keys a function taking a dispatcher argument by the
# dispatcher's identity in the process, so such an entry is never found again and every process
# would add a new file; the functions that take ``logpdf`` are therefore compiled per process
# (once per kernel, like the closures of :func:`count_sampler`), the others are cached on disk.
# A built-in noise family reaches them as its integer kind instead
# (:func:`pymc_dp.kernels.noise_logpdf.specialised`): those closures hold an int, and are
# cached on disk.


# ---------------------------------------------------------------- the 1-D window sampler


@numba.njit(cache=True)
def _family(family, n, t1, t2):  # pragma: no cover - compiled
    """``(family, n, t1, t2, degenerate S or -1, valid)`` of the sum's law.

    Stored parameters: Binomial ``(odds, log odds)``, Poisson ``(mu, log mu)``, beta-binomial
    ``(alpha, beta)``, negative binomial ``(r, log(1 - q))``.
    """
    if family == BINOMIAL or family == POISSON:
        return _family_theta(family, n, t1)
    if family == BETA_BINOMIAL:
        ok = n >= 0 and n <= _COUNT_MAX and t1 >= 1.0 and t1 < math.inf
        ok = ok and t2 >= 1.0 and t2 < math.inf
        return (family, n, t1, t2, 0 if ok and n == 0 else -1, ok)
    ok = family == NEG_BINOMIAL and t1 >= 1.0 and t1 < math.inf and t2 > 0.0 and t2 <= 1.0
    if not ok:
        return (family, n, 1.0, 0.0, -1, False)
    if t2 == 1.0:
        return (family, n, t1, 0.0, 0, True)
    return (family, n, t1, math.log1p(-t2), -1, True)


@numba.njit(cache=True)
def _family_theta(family, n, theta):  # pragma: no cover - compiled
    """:func:`_family` of a Binomial(n, theta) or Poisson(theta) sum."""
    if family == BINOMIAL:
        ok = n >= 0 and n <= _COUNT_MAX and theta >= 0.0 and theta <= 1.0
        if not ok:
            return (family, n, 1.0, 0.0, -1, False)
        if n == 0 or theta == 0.0:
            return (family, n, 1.0, 0.0, 0, True)
        if theta == 1.0:
            return (family, n, 1.0, 0.0, n, True)
        odds = theta / (1.0 - theta)
        return (family, n, odds, math.log(theta) - math.log1p(-theta), -1, True)
    ok = theta >= 0.0 and theta < math.inf
    if not ok:
        return (family, n, 1.0, 0.0, -1, False)
    if theta == 0.0:
        return (family, n, 1.0, 0.0, 0, True)
    return (family, n, theta, math.log(theta), -1, True)


@numba.njit(cache=True)
def _log_step(fam, s):  # pragma: no cover - compiled
    """``log f_S(s+1) - log f_S(s)`` (bounded families: ``s < n``)."""
    family, n, t1, t2 = fam[0], fam[1], fam[2], fam[3]
    if family == BETA_BINOMIAL:  # (n - s)(s + alpha) / ((s + 1)(n - s - 1 + beta))
        return math.log(((n - s) / (s + 1.0)) * ((s + t1) / ((n - s - 1) + t2)))
    if family == NEG_BINOMIAL:  # (s + r)/(s + 1) (1 - q)
        return math.log((s + t1) / (s + 1.0)) + t2
    plain = t1 > _ODDS_LO and t1 < 1.0 / _ODDS_LO
    if family == BINOMIAL:
        ratio = (n - s) / (s + 1.0)
        if plain:
            return math.log(ratio * t1)
        return math.log(ratio) + t2
    if plain:
        return math.log(t1 / (s + 1.0))
    return t2 - math.log(s + 1.0)


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _noise(logpdf, nz, s):  # pragma: no cover - compiled
    """``sum_k logpdf((z_k - a_k) - b_k s, params_k)`` over the first ``m`` components."""
    a, b, z, params, m = nz
    x = float(s)
    acc = 0.0
    for k in range(m):
        acc += call_logpdf(logpdf, (z[k] - a[k]) - b[k] * x, params[k])
    return acc


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _forward(logpdf, fam, nz, s):  # pragma: no cover - compiled
    """``L(s+1) - L(s)``; NaN (both ``-inf``) counts as not increasing."""
    return _log_step(fam, s) + (_noise(logpdf, nz, s + 1) - _noise(logpdf, nz, s))


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _mode(logpdf, fam, nz):  # pragma: no cover - compiled
    """First ``s`` with ``L(s+1) - L(s) <= 0`` (the mode of a concave ``L``), or INVALID."""
    lo = 0
    if fam[0] == BINOMIAL or fam[0] == BETA_BINOMIAL:
        hi = fam[1]
    else:
        if not _forward(logpdf, fam, nz, 0) > 0.0:
            return 0
        lo, hi = 1, 2
        while _forward(logpdf, fam, nz, hi) > 0.0:
            if hi >= _COUNT_MAX:
                return INVALID
            lo, hi = hi + 1, 2 * hi
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if _forward(logpdf, fam, nz, mid) > 0.0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _walk(logpdf, fam, nz, path, goal):  # pragma: no cover - compiled
    """Walk from the mode, summing weights ``pi(s)/pi(M)`` of ``s = M+step, M+2 step, ..``.

    ``path = (mode, step, limit, g_mode)``: direction ``step = +-1``, last index ``limit``.
    ``goal = (kind, value)``: ``_EXPAND`` stops once ``L`` is 36 below the mode and the
    geometric tail bound is ``<= _SIDE_TOL * (value + sum)`` (``value`` = window mass known
    so far); ``_AT_LEAST`` / ``_ABOVE`` stop at the first ``s`` whose running sum is ``>=`` /
    ``>`` ``value``. Returns ``(sum, last s)``; ``sum = -1`` if the half-width cap is hit.
    """
    mode, step, limit, g_mode = path
    kind, value = goal
    s, lf, prev, total = mode, 0.0, 0.0, 0.0
    while s != limit:
        if step > 0:
            lf += _log_step(fam, s)
            s += 1
        else:
            s -= 1
            lf -= _log_step(fam, s)
        log_w = lf + (_noise(logpdf, nz, s) - g_mode)
        if not log_w > -math.inf:  # -inf (or NaN) here: -inf beyond, by concavity
            return total, s - step
        w = math.exp(log_w)
        total += w
        if kind == _AT_LEAST and total >= value:
            return total, s
        if kind == _ABOVE and total > value:
            return total, s
        if kind == _EXPAND and log_w <= _DROP and log_w < prev:
            d = log_w - prev
            if w * math.exp(d) / -math.expm1(d) <= _SIDE_TOL * (value + total):
                return total, s
        if kind == _EXPAND and abs(s - mode) >= _MAX_SIDE:
            return -1.0, s
        prev = log_w
    return total, s


@numba.njit(cache=True)
def _noise_args(a, b, z, params):  # pragma: no cover - compiled
    """``(a, b, z, params, m_used)``: ``m_used = 0`` when every ``b_k = 0`` (flat noise)."""
    m = z.shape[0]
    for k in range(m):
        if b[k] != 0.0:
            return (a, b, z, params, m)
    return (a, b, z, params, 0)


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _count_core(logpdf, fam, nz, u):  # pragma: no cover - compiled
    """:func:`count_sampler` with the law ``fam`` (from ``_family``) and ``nz``."""
    a, b, z, params, m_used = nz
    full = (a, b, z, params, z.shape[0])
    if not fam[5]:
        return INVALID, 0
    if fam[4] >= 0 or m_used == 0:
        if not _noise(logpdf, full, 0 if fam[4] < 0 else fam[4]) > -math.inf:
            return IMPOSSIBLE, 0  # flat noise: the release is impossible for every S
        if fam[4] >= 0:
            return fam[4], 1
    mode = _mode(logpdf, fam, nz)
    if mode < 0:
        return INVALID, 0
    g_mode = _noise(logpdf, nz, mode)
    if not g_mode > -math.inf:
        return IMPOSSIBLE, 0
    bounded = fam[0] == BINOMIAL or fam[0] == BETA_BINOMIAL
    upper = fam[1] if bounded else _COUNT_MAX
    right, hi = _walk(logpdf, fam, nz, (mode, 1, upper, g_mode), (_EXPAND, 1.0))
    left, lo = _walk(logpdf, fam, nz, (mode, -1, 0, g_mode), (_EXPAND, 1.0 + right))
    if right < 0.0 or left < 0.0:
        return INVALID, 0
    width = hi - lo + 1
    t = u * (left + 1.0 + right)
    if t <= left:
        return _walk(logpdf, fam, nz, (mode, -1, lo, g_mode), (_ABOVE, left - t))[1], width
    if t - left <= 1.0:
        return mode, width
    goal = (_AT_LEAST, (t - left) - 1.0)
    return _walk(logpdf, fam, nz, (mode, 1, hi, g_mode), goal)[1], width


_COUNT_CACHED: dict = {}


def count_sampler(logpdf):
    r"""Exact sampler of a Binomial or Poisson sum given an affine noisy release of it.

    Returns a numba function ``f(family, n, theta, a, b, z, params, u) -> (S, width)``
    (cached per ``logpdf`` in this process) that draws ``S`` from

    .. math::

        \pi(S) \propto f_S(S) \prod_{k<m} \exp \mathrm{logpdf}(z_k - a_k - b_k S,
        \mathrm{params}_k)

    by inverse CDF at ``u`` over a window that holds all but at most ``1e-14`` of the mass
    (relative to the window mass), by the geometric bound of a log-concave sequence (module
    docstring; Ju et al. 2022 with the records collapsed into their sum, issue 12).

    Parameters
    ----------
    logpdf : numba njit function
        ``logpdf(x: float64, params: float64[::1]) -> float64`` of the noise, log-concave in
        ``x`` (a mechanism's ``numba_logpdf``, or its censored kernel with rows
        ``[side, *params]``). For the integer mechanisms ``z_k - a_k - b_k S`` must be an
        integer for every ``S`` (integer ``b_k`` and ``z_k - a_k``); otherwise the target is
        not log-concave and the draw is not exact.

    Returns
    -------
    f : numba function
        ``f(family, n, theta, a, b, z, params, u)`` with ``family`` 0 (Binomial(n, theta),
        ``S`` in ``0..n``, ``n`` up to ``2**53``) or 1 (Poisson with mean ``theta``, ``n``
        ignored, ``S`` up to ``2**53``); ``a, b, z`` float64[::1] of length ``m``; ``params``
        float64[:, ::1] of shape ``(m, P)``; ``u`` a uniform in ``(0, 1)``. It returns
        ``(S, width)``: the draw (int64) and the window width (int64; 1 for a degenerate law, 0
        on failure). ``S`` is ``-1`` when the release is impossible (its likelihood is 0 for
        every ``S`` of the support; the caller raises ``ValueError``) and ``-2`` when the
        parameters are invalid (``theta`` NaN or outside ``[0, 1]`` / ``[0, inf)``, ``n < 0``
        or ``n > 2**53``, unknown ``family``), the window would exceed ``2**31`` counts on a
        side, or the mode lies beyond ``2**53`` (where ``float(S)``, the noise's argument, is
        no longer exact). ``theta`` 0 or 1 gives ``S = 0``
        or ``S = n``; ``b = 0`` gives ``S ~ f_S`` (windowed in the same way).

    Notes
    -----
    Work is ``O(log n + width)`` calls of ``logpdf`` times ``m``; numba cannot raise a
    formatted message cheaply, hence the negative return codes.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.geometric import Geometric
    >>> mech = Geometric(epsilon=1.0)
    >>> f = count_sampler(mech.numba_logpdf)
    >>> f is count_sampler(mech.numba_logpdf)
    True
    >>> one = np.ones(1)
    >>> s, width = f(0, 1000, 0.3, np.zeros(1), one, np.array([310.0]),
    ...              mech.numba_params[None, :], 0.5)
    >>> 290 < s < 320, width < 200
    (True, True)
    """

    def build(logpdf):
        @njit_for(logpdf)
        def sample(family, n, theta, a, b, z, params, u):  # pragma: no cover - compiled
            fam = _family(family if family <= POISSON else -1, n, theta, 0.0)
            return _count_core(logpdf, fam, _noise_args(a, b, z, params), u)

        return sample

    return specialised(_COUNT_CACHED, build, logpdf)


_MARGINAL_CACHED: dict = {}


def marginal_count_sampler(logpdf):
    r"""Exact sampler of a count sum given an affine noisy release, its parameter integrated out.

    The conjugate parameter of the records is integrated out, so ``S`` follows its prior
    predictive (marginal) law ``f_S`` and the sampler draws ``S`` from

    .. math::

        \pi(S) \propto f_S(S) \prod_{k<m} \exp \mathrm{logpdf}(z_k - a_k - b_k S,
        \mathrm{params}_k);

    the caller then draws the parameter given ``S`` from its conjugate posterior: an
    independent joint draw of ``(S, theta)`` given the release (issue 12). Same window,
    ``1e-14`` certificate, return codes and cost as :func:`count_sampler`, whose two families
    this factory also serves.

    Marginal laws (``family``, ``t1``, ``t2``):

    * 0, Binomial(n, theta): ``t1 = theta``, ``t2`` ignored (as :func:`count_sampler`);
    * 1, Poisson(theta): ``t1 = theta``, ``n`` and ``t2`` ignored;
    * 2, beta-binomial ``BetaBinomial(n, alpha, beta)`` (``Beta(alpha, beta)`` prior,
      Bernoulli records): ``t1 = alpha``, ``t2 = beta``, ``S`` in ``0..n``,
      ``f(s+1)/f(s) = (n - s)(s + alpha) / ((s + 1)(n - s - 1 + beta))``;
    * 3, negative binomial ``NB(r, q)`` (``Gamma(alpha, rate beta)`` prior, Poisson records:
      ``r = alpha``, ``q = beta/(beta + n)``): ``t1 = r``, ``t2 = q`` the success
      probability, ``n`` ignored, ``S`` in ``0, 1, ..``, ``f(s+1)/f(s) = (s + r)(1 - q)/(s + 1)``.

    Log-concavity, which the window certificate needs: the ratio ``f(s+1)/f(s)`` must be
    non-increasing in ``s``. Beta-binomial: it is the product of ``(s + alpha)/(s + 1)`` and
    ``(n - s)/(n - s - 1 + beta)``, both positive, the first non-increasing iff ``alpha >= 1``
    and the second (``(m + 1)/(m + beta)`` with ``m = n - s - 1`` falling) non-increasing iff
    ``beta >= 1``; negative binomial: ``(s + r)/(s + 1)`` is non-increasing iff ``r >= 1``.
    With ``alpha < 1``, ``beta < 1`` or ``r < 1`` the law is not log-concave in general (e.g.
    ``BetaBinomial(n, 1/2, 1/2)`` is U-shaped), the window proof fails and the sampler returns
    ``-2``: the caller must then not use the marginal path (use the conditional
    :func:`count_sampler` step instead).

    Parameters
    ----------
    logpdf : numba njit function
        The noise log-density, log-concave in ``x``, as for :func:`count_sampler`.

    Returns
    -------
    f : numba function
        ``f(family, n, t1, t2, a, b, z, params, u) -> (S, width)`` (cached per ``logpdf`` in
        this process), arguments and results as :func:`count_sampler` (``n`` int64 up to
        ``2**53``; ``a, b, z`` float64[::1] of length ``m``, ``params`` float64[:, ::1],
        ``u`` in ``(0, 1)``). ``S = -1``: the release is impossible. ``S = -2``: invalid
        parameters: unknown ``family``; ``n < 0``; Binomial / Poisson ``theta`` as for
        :func:`count_sampler`; ``alpha``, ``beta`` or ``r`` below 1, NaN or infinite; ``q``
        outside ``(0, 1]``; a window beyond ``2**31`` counts on a side, or a mode beyond
        ``2**53`` (e.g. ``b = 0`` with ``r (1 - q)/q`` above it). ``n = 0``
        (beta-binomial) and ``q = 1`` give ``S = 0`` (width 1).

    Notes
    -----
    ``log f_S`` is accumulated from the mode by the log of the ratios above, computed as one
    logarithm of a product of two ratios (beta-binomial) or ``log((s + r)/(s + 1)) +
    log1p(-q)`` (negative binomial, exact for ``q`` down to ``1e-300`` and up to
    ``1 - 2**-53``), so nothing large cancels for ``n`` up to ``1e12`` and ``alpha, beta, r``
    up to ``1e8`` or more. It shares its compiled core with :func:`count_sampler` for the same
    ``logpdf``. Cost is ``O(log n + width)`` as there; a law that stays nearly flat for
    ``2**31`` counts from its mode (e.g. ``r = 1``, ``q = 1e-300`` and ``b = 0``) costs those
    ``2**31`` steps (about 20 s) before returning ``-2``.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=2.0)
    >>> f = marginal_count_sampler(mech.numba_logpdf)
    >>> one = np.ones(1)
    >>> params = mech.numba_params[None, :]
    >>> s, width = f(BETA_BINOMIAL, 1000, 1.0, 1.0, np.zeros(1), one, np.array([310.0]),
    ...              params, 0.5)
    >>> 290 < s < 330, width < 300
    (True, True)
    >>> int(f(BETA_BINOMIAL, 1000, 0.5, 1.0, np.zeros(1), one, np.array([310.0]), params,
    ...       0.5)[0])
    -2
    """

    def build(logpdf):
        @njit_for(logpdf)
        def sample(family, n, t1, t2, a, b, z, params, u):  # pragma: no cover - compiled
            fam = _family(family, n, t1, t2)
            return _count_core(logpdf, fam, _noise_args(a, b, z, params), u)

        return sample

    return specialised(_MARGINAL_CACHED, build, logpdf)


# ---------------------------------------------------------------- Multinomial counts


@numba.njit(cache=True)
def _pair_noise(counts, release, pair, ab):  # pragma: no cover - compiled
    """Fill ``ab = (a, b)`` so that ``T = a + b c_j`` on ``{c_j + c_k = s}``."""
    C, M = release
    j, k, s = pair
    a, b = ab
    for r in range(C.shape[0]):
        acc = C[r]
        for cell in range(counts.shape[0]):
            if cell != j and cell != k:
                acc += M[r, cell] * counts[cell]
        a[r] = acc + M[r, k] * s
        b[r] = M[r, j] - M[r, k]


@numba.njit(cache=True)
def _pair_law(law, pair):  # pragma: no cover - compiled
    """:func:`_family` of ``c_j`` given ``c_j + c_k = s``: ``law = (family, weights)`` with
    ``family`` BINOMIAL (weights ``p``) or BETA_BINOMIAL (weights ``alpha``)."""
    family, w = law
    j, k, s = pair
    if family == BETA_BINOMIAL:
        return _family(BETA_BINOMIAL, s, w[j], w[k])
    tot = w[j] + w[k]
    return _family(BINOMIAL, s, w[j] / tot if tot > 0.0 else 0.0, 0.0)


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _gibbs_core(logpdf, counts, law, release, noise, u):  # pragma: no cover - compiled
    """One pair-move sweep; ``law`` as :func:`_pair_law`, ``release = (C, M)``,
    ``noise = (z, params)``."""
    z, params = noise
    n_cells = counts.shape[0]
    if n_cells < 2:
        return 0
    a = np.empty(z.shape[0])
    b = np.empty(z.shape[0])
    total = 0
    for j in range(n_cells):
        k = (j + 1 + min(int(u[2 * j] * (n_cells - 1)), n_cells - 2)) % n_cells
        s = counts[j] + counts[k]
        _pair_noise(counts, release, (j, k, s), (a, b))
        fam = _pair_law(law, (j, k, s))
        cj, width = _count_core(logpdf, fam, _noise_args(a, b, z, params), u[2 * j + 1])
        if cj < 0:
            return cj
        counts[j] = cj
        counts[k] = s - cj
        total += width
    return total


_GIBBS_CACHED: dict = {}


def counts_gibbs_sampler(logpdf):
    r"""One exact Gibbs sweep over Multinomial counts given a noisy affine release of them.

    Returns a numba function ``g(counts, p, C, M, z, params, u) -> int64`` (cached per
    ``logpdf`` in this process). The target is

    .. math::

        \pi(c) \propto \mathrm{Mult}(c \mid N, p) \prod_{r<m}
        \exp \mathrm{logpdf}(z_r - C_r - (M c)_r, \mathrm{params}_r),
        \quad \textstyle\sum_j c_j = N.

    Schedule: for ``j = 0, .., K-1`` in turn, a partner ``k != j`` is drawn uniformly from the
    other ``K - 1`` cells (uniform ``u[2j]``), and ``c_j`` is redrawn from its conditional given
    ``c_j + c_k = s`` and the other cells (uniform ``u[2j+1]``, ``c_k = s - c_j``). That
    conditional is ``Binomial(s, p_j/(p_j+p_k))`` times the noise at ``z - a - b c_j`` with
    ``a = C + sum_{l != j,k} M_l c_l + M_k s`` and ``b = M_j - M_k``: the 1-D window sampler of
    :func:`count_sampler` draws it exactly (Ju et al. 2022, records collapsed into counts,
    issue 12).

    Why it is exact: each pair move is a Gibbs update of ``(c_j, c_k)`` from its exact
    conditional given the rest, so it leaves ``pi`` invariant; the partner is chosen
    independently of the state, so the move is a mixture of invariant kernels, and the sweep
    (a composition) is invariant. Irreducible on ``{sum = N}`` wherever ``pi > 0``: any two
    count vectors with the same sum are joined by at most ``K - 1`` pair transfers, every
    pair ``(j, k)`` is chosen with probability ``1/(K-1)`` in each sweep, and each pair move
    puts positive mass on every feasible split (the noise densities are positive everywhere,
    cells with ``p_j = 0`` stay at 0 as ``pi`` requires). It is aperiodic since a move keeps
    the current split with positive probability.

    Parameters
    ----------
    logpdf : numba njit function
        The noise log-density, as for :func:`count_sampler` (log-concave; integer mechanisms
        need integer ``M`` and ``z - C``).

    Returns
    -------
    g : numba function
        ``g(counts, p, C, M, z, params, u)``: ``counts`` int64[K], updated in place (its sum
        is kept); ``p`` float64[K] (cell probabilities, any positive scale); ``C`` float64[m];
        ``M`` float64[m, K]; ``z`` float64[m]; ``params`` float64[m, P]; ``u`` float64[::1]
        holding at least ``2 K`` uniforms in ``(0, 1)`` (none used when ``K = 1``). Returns the
        summed window width of the ``K`` pair moves, or ``-1`` / ``-2`` as
        :func:`count_sampler` (impossible release / invalid input), in which case the sweep
        stopped at that move with ``counts`` consistent (sum kept).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=2.0)
    >>> g = counts_gibbs_sampler(mech.numba_logpdf)
    >>> counts = np.array([2, 2, 2])
    >>> M = np.eye(3)
    >>> params = np.repeat(mech.numba_params[None, :], 3, axis=0)
    >>> u = np.random.default_rng(0).random(6)
    >>> width = g(counts, np.full(3, 1 / 3), np.zeros(3), M, np.array([5.0, 1.0, 0.0]),
    ...           params, u)
    >>> int(counts.sum()), width > 0
    (6, True)
    """

    def build(logpdf):
        @njit_for(logpdf)
        def sweep(counts, p, C, M, z, params, u):  # pragma: no cover - compiled
            return _gibbs_core(logpdf, counts, (BINOMIAL, p), (C, M), (z, params), u)

        return sweep

    return specialised(_GIBBS_CACHED, build, logpdf)


@numba.njit(cache=True)
def _dirichlet_ok(counts, alpha):  # pragma: no cover - compiled
    """``alpha`` has one entry per cell, each finite and ``>= 1``."""
    if alpha.shape[0] != counts.shape[0]:
        return False
    for j in range(alpha.shape[0]):
        if not (alpha[j] >= 1.0 and alpha[j] < math.inf):
            return False
    return True


_MARGINAL_GIBBS_CACHED: dict = {}


def marginal_counts_gibbs_sampler(logpdf):
    r"""One exact Gibbs sweep over Dirichlet-multinomial counts given a noisy affine release.

    The cell probabilities (prior ``Dirichlet(alpha)``, Categorical records) are integrated
    out, so the counts follow ``DirichletMultinomial(N, alpha)`` and the target is

    .. math::

        \pi(c) \propto \prod_j \frac{\Gamma(c_j + \alpha_j)}{c_j!} \prod_{r<m}
        \exp \mathrm{logpdf}(z_r - C_r - (M c)_r, \mathrm{params}_r),
        \quad \textstyle\sum_j c_j = N;

    the caller then draws ``p | c ~ Dirichlet(alpha + c)``: the pair ``(c, p)`` is a draw of a
    chain on ``c`` alone, with no ``p`` in its conditionals (issue 12).

    Schedule and uniforms exactly as :func:`counts_gibbs_sampler`; the pair conditional of
    ``c_j`` given ``c_j + c_k = s`` and the other cells is ``Gamma(c_j + alpha_j)
    Gamma(s - c_j + alpha_k) / (c_j! (s - c_j)!)``, i.e. ``BetaBinomial(s, alpha_j,
    alpha_k)``, times the noise, drawn exactly by the window sampler of
    :func:`marginal_count_sampler`. Invariance, irreducibility and aperiodicity follow as for
    :func:`counts_gibbs_sampler` (every split of ``s`` has positive beta-binomial mass).
    The window needs every ``alpha_j >= 1`` (log-concave pair laws, see
    :func:`marginal_count_sampler`).

    Parameters
    ----------
    logpdf : numba njit function
        The noise log-density, as for :func:`count_sampler`.

    Returns
    -------
    g : numba function
        ``g(counts, alpha, C, M, z, params, u) -> int64`` (cached per ``logpdf`` in this
        process): ``counts`` int64[K], updated in place (sum kept); ``alpha`` float64[K], each
        finite and ``>= 1``; ``C, M, z, params, u`` as :func:`counts_gibbs_sampler` (at least
        ``2 K`` uniforms). Returns the summed window width of the ``K`` pair moves (0 when
        ``K = 1``), ``-1`` (impossible release; the sweep stopped at that move, sum kept) or
        ``-2``: ``alpha`` of another length than ``counts``, an entry below 1, NaN or
        infinite (checked before any move: ``counts`` untouched; the caller must then not use
        the marginal path), or a window beyond ``2**31`` counts on a side.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=2.0)
    >>> g = marginal_counts_gibbs_sampler(mech.numba_logpdf)
    >>> counts = np.array([2, 2, 2])
    >>> M = np.eye(3)
    >>> params = np.repeat(mech.numba_params[None, :], 3, axis=0)
    >>> u = np.random.default_rng(0).random(6)
    >>> width = g(counts, np.full(3, 1.0), np.zeros(3), M, np.array([5.0, 1.0, 0.0]),
    ...           params, u)
    >>> int(counts.sum()), width > 0
    (6, True)
    >>> int(g(counts, np.array([1.0, 0.5, 1.0]), np.zeros(3), M, np.zeros(3), params, u))
    -2
    """

    def build(logpdf):
        @njit_for(logpdf)
        def sweep(counts, alpha, C, M, z, params, u):  # pragma: no cover - compiled
            if not _dirichlet_ok(counts, alpha):
                return INVALID
            law = (BETA_BINOMIAL, alpha)
            return _gibbs_core(logpdf, counts, law, (C, M), (z, params), u)

        return sweep

    return specialised(_MARGINAL_GIBBS_CACHED, build, logpdf)


# ---------------------------------------------------------------- Normal sums


def _components(a, b, z):
    arrs = [np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (a, b, z)]
    m = max(x.size for x in arrs)
    out = []
    for name, x in zip(("a", "b", "z"), arrs, strict=True):
        if x.ndim != 1 or x.size not in (1, m) or not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must be finite, scalar or of length m = {m}, got {x!r}")
        out.append(np.broadcast_to(x, (m,)))
    return out


def _noise_spec(noise, m):
    ok = isinstance(noise, tuple) and len(noise) == 2 and noise[0] in ("gaussian", "laplace")
    if not ok:
        raise ValueError(f"noise must be ('gaussian', sd) or ('laplace', scale), got {noise!r}")
    scale = np.atleast_1d(np.asarray(noise[1], dtype=np.float64))
    if scale.ndim != 1 or scale.size not in (1, m) or not np.all(np.isfinite(scale) & (scale > 0)):
        raise ValueError(f"noise scale must be positive finite, scalar or length {m}: {noise!r}")
    if noise[0] == "laplace" and m != 1:
        raise ValueError(f"noise ('laplace', ...) needs one component (m = 1), got m = {m}")
    return noise[0], np.broadcast_to(scale, (m,))


def _laplace_pieces(mean, sd, kink, lam):
    """Means and log weights of the two truncated-normal pieces (left/right of ``kink``)."""
    mu_l, mu_r = mean + sd * sd * lam, mean - sd * sd * lam
    log_wl = lam * (mean - kink) + special.log_ndtr((kink - mu_l) / sd)
    log_wr = -lam * (mean - kink) + special.log_ndtr((mu_r - kink) / sd)
    norm = np.logaddexp(log_wl, log_wr)
    return (mu_l, mu_r), (log_wl - norm, log_wr - norm)


def _trunc_quantile(c, log_v, log_1mv):
    """Quantile of N(0, 1) truncated to ``(-inf, c)`` at CDF ``v`` (given as ``log v`` and
    ``log(1 - v)``): ``Phi(y) = v Phi(c)`` in the lower half, ``1 - Phi(y) = Phi(-c) +
    (1 - v) Phi(c)`` in the upper half, so both tails keep full relative precision."""
    low = log_v + special.log_ndtr(c)
    high = np.logaddexp(special.log_ndtr(-c), log_1mv + special.log_ndtr(c))
    return np.where(
        low <= -math.log(2.0),
        special.ndtri_exp(np.minimum(low, 0.0)),
        -special.ndtri_exp(np.minimum(high, 0.0)),
    )


def _laplace_draw(mean, sd, release, u):
    """Inverse CDF of ``N(mean, sd^2) x exp(-|z - a - b S|/scale)``, ``release = (a, b, z, sc)``.

    Left piece ``N(mu_l, sd^2)`` on ``(-inf, kink)`` at piece CDF ``u / p_l``; right piece
    ``N(mu_r, sd^2)`` on ``(kink, inf)``, reflected (``-(S - mu_r)/sd`` is a standard normal
    truncated to ``(-inf, (mu_r - kink)/sd)``) at piece CDF ``(1 - u)/p_r``.
    """
    a, b, z, scale = release
    if b == 0.0:
        return mean + sd * special.ndtri(u)
    kink, lam = (z - a) / b, abs(b) / scale
    (mu_l, mu_r), (log_pl, log_pr) = _laplace_pieces(mean, sd, kink, lam)
    p_l = np.exp(log_pl)
    with np.errstate(divide="ignore", invalid="ignore"):
        y_l = _trunc_quantile(
            (kink - mu_l) / sd, np.log(u) - log_pl, np.log(np.maximum(p_l - u, 0.0)) - log_pl
        )
        y_r = _trunc_quantile(
            (mu_r - kink) / sd, np.log1p(-u) - log_pr, np.log(np.maximum(u - p_l, 0.0)) - log_pr
        )
    x_l, x_r = mu_l + sd * y_l, mu_r - sd * y_r
    return np.where(u < p_l, np.minimum(x_l, kink), np.maximum(x_r, kink))


def sample_normal_sum(mean, var, a, b, z, noise, u):
    r"""Exact draw of a Normal sum ``S ~ N(mean, var)`` given ``z = a + b S + noise``.

    The records' sum is collapsed into ``S`` (issue 12; Ju et al. 2022 with the records
    replaced by their statistic) and drawn by inverse CDF of its conditional.

    * ``noise = ("gaussian", sd)`` (``sd`` scalar or one per component, any ``m``): the
      conditional is Gaussian with precision ``1/var + sum_k b_k^2/sd_k^2`` and mean
      ``(mean/var + sum_k b_k (z_k - a_k)/sd_k^2) / precision``.
    * ``noise = ("laplace", scale)`` (``m = 1``): with ``lam = |b|/scale`` and kink
      ``S0 = (z - a)/b`` the density is ``phi((S - mean)/sd) exp(-lam |S - S0|)``, a mixture of
      ``N(mean + var lam, var)`` truncated to ``S < S0`` and ``N(mean - var lam, var)``
      truncated to ``S > S0`` with log weights ``lam (mean - S0) + log Phi((S0 - mean)/sd -
      sd lam)`` and ``-lam (mean - S0) + log Phi((mean - S0)/sd - sd lam)`` (``log_ndtr``);
      each piece is inverted in log space (``ndtri_exp``), so a release ``1e6`` sd away still
      gives a finite, exact draw.

    Parameters
    ----------
    mean, var : float
        Law of ``S`` (``var > 0`` finite; ``var = 0`` returns ``mean``).
    a, b, z : float or 1-D array
        The release ``z_k = a_k + b_k S + noise_k`` (scalars broadcast to ``m``).
    noise : tuple
        ``("gaussian", sd)`` or ``("laplace", scale)`` as above; scales positive and finite.
    u : float or array
        Uniform(s) in ``(0, 1)``; one draw per uniform (array in, array out).

    Returns
    -------
    float or numpy.ndarray

    Raises
    ------
    ValueError
        Naming the argument: non-finite ``mean``, negative or non-finite ``var``, ``a, b, z``
        of inconsistent length, an unknown ``noise`` or non-positive scale, Laplace with
        ``m != 1``, ``u`` outside ``(0, 1)``.

    Examples
    --------
    >>> round(sample_normal_sum(0.0, 1.0, 0.0, 1.0, 2.0, ("gaussian", 1.0), 0.5), 12)
    1.0
    >>> s = sample_normal_sum(0.0, 1.0, 0.0, 1.0, 1e6, ("laplace", 1.0), 0.5)
    >>> bool(abs(s - 1.0) < 1e-9)
    True
    """
    mean, var = float(mean), float(var)
    if not math.isfinite(mean):
        raise ValueError(f"mean must be finite, got {mean!r}")
    if not (math.isfinite(var) and var >= 0.0):
        raise ValueError(f"var must be finite and >= 0, got {var!r}")
    uu = np.asarray(u, dtype=np.float64)
    if not np.all((uu > 0.0) & (uu < 1.0)):
        raise ValueError("u must lie in (0, 1)")
    a, b, z = _components(a, b, z)
    kind, scale = _noise_spec(noise, z.size)
    if var == 0.0:
        out = np.full(uu.shape, mean)
    elif kind == "gaussian":
        prec = 1.0 / var + np.sum(b * b / scale**2)
        post = (mean / var + np.sum(b * (z - a) / scale**2)) / prec
        out = post + special.ndtri(uu) / math.sqrt(prec)
    else:
        out = _laplace_draw(mean, math.sqrt(var), (a[0], b[0], z[0], scale[0]), uu)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------- log of the total mass


_HALF_LOG_2PI = 0.9189385332046728  # log(sqrt(2 pi))
_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp splitting of a double)
# stirlerr(n) = log(n!) - log(sqrt(2 pi n) (n/e)^n): Stirling series coefficients
_S0, _S1, _S2 = 1.0 / 12.0, 1.0 / 360.0, 1.0 / 1260.0
_S3, _S4 = 1.0 / 1680.0, 1.0 / 1188.0


@numba.njit(cache=True)
def _two_prod(x, y):  # pragma: no cover - compiled
    """``(hi, lo)`` with ``hi + lo = x * y`` exactly (Dekker 1971)."""
    hi = x * y
    cx = _SPLIT * x
    xh = cx - (cx - x)
    xl = x - xh
    cy = _SPLIT * y
    yh = cy - (cy - y)
    yl = y - yh
    lo = ((xh * yh - hi) + xh * yl + xl * yh) + xl * yl
    return hi, lo


@numba.njit(cache=True)
def _stirlerr(n):  # pragma: no cover - compiled
    """``log(n!) - (n + 1/2) log n + n - log sqrt(2 pi)`` for an integer ``n >= 1`` (Loader
    2000): the Stirling series above 15 (next term below 1e-16), log-gamma below."""
    if n <= 15.0:
        return math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _HALF_LOG_2PI
    nn = n * n
    if n > 500.0:
        return (_S0 - _S1 / nn) / n
    if n > 80.0:
        return (_S0 - (_S1 - _S2 / nn) / nn) / n
    if n > 35.0:
        return (_S0 - (_S1 - (_S2 - _S3 / nn) / nn) / nn) / n
    return (_S0 - (_S1 - (_S2 - (_S3 - _S4 / nn) / nn) / nn) / nn) / n


@numba.njit(cache=True)
def _bd0(x, m_hi, m_lo):  # pragma: no cover - compiled
    """Deviance ``x log(x / m) + m - x`` for ``m = m_hi + m_lo`` (Loader 2000): the series in
    ``v = (x - m)/(x + m)`` when ``|x - m| < (x + m)/10``, ``x - m`` formed exactly."""
    m = m_hi + m_lo
    d = (x - m_hi) - m_lo
    if abs(d) < 0.1 * (x + m):
        v = d / (x + m)
        s = d * v
        ej = 2.0 * x * v
        v2 = v * v
        j = 1
        while j < 1000:
            ej *= v2
            s1 = s + ej / (2 * j + 1)
            if s1 == s:
                return s1
            s = s1
            j += 1
        return s
    return x * math.log(x / m) - d


@numba.njit(cache=True)
def _log_pmf(family, n, theta, s):  # pragma: no cover - compiled
    """``log f_S(s)`` of Binomial(n, theta) (``0 < theta < 1``) or Poisson(theta)
    (``theta > 0``), saddle-point form of Loader (2000): no large terms cancel."""
    x = float(s)
    if family == POISSON:
        if s == 0:
            return -theta
        return -_stirlerr(x) - _bd0(x, theta, 0.0) - _HALF_LOG_2PI - 0.5 * math.log(x)
    nf = float(n)
    if s == 0:
        return nf * math.log1p(-theta)
    if s == n:
        return nf * math.log(theta)
    q = 1.0 - theta
    mp_hi, mp_lo = _two_prod(nf, theta)
    mq_hi, mq_lo = _two_prod(nf, q)
    y = nf - x
    lc = _stirlerr(nf) - _stirlerr(x) - _stirlerr(y) - _bd0(x, mp_hi, mp_lo) - _bd0(y, mq_hi, mq_lo)
    return lc - _HALF_LOG_2PI - 0.5 * (math.log(x) + math.log1p(-x / nf))


@numba.njit  # takes logpdf: not cached on disk (see _DISK_CACHE_NOTE)
def _log_mass_core(logpdf, fam, nz, theta):  # pragma: no cover - compiled
    """``log sum_S f_S(S) prod_k eta_k(..)`` over the certified window (see
    :func:`count_log_marginal`); NaN for invalid input."""
    a, b, z, params, m_used = nz
    full = (a, b, z, params, z.shape[0])
    if not fam[5]:
        return math.nan
    if fam[4] >= 0:
        return _noise(logpdf, full, fam[4])
    mode = _mode(logpdf, fam, nz)
    if mode < 0:
        return math.nan
    g_mode = _noise(logpdf, nz, mode)
    const = _noise(logpdf, full, mode) if m_used == 0 else g_mode
    if not (g_mode > -math.inf and const > -math.inf):
        return -math.inf
    bounded = fam[0] == BINOMIAL
    upper = fam[1] if bounded else _COUNT_MAX
    right = _walk(logpdf, fam, nz, (mode, 1, upper, g_mode), (_EXPAND, 1.0))[0]
    left = _walk(logpdf, fam, nz, (mode, -1, 0, g_mode), (_EXPAND, 1.0 + right))[0]
    if right < 0.0 or left < 0.0:
        return math.nan
    return _log_pmf(fam[0], fam[1], theta, mode) + const + math.log1p(left + right)


_LOG_MARGINAL_CACHED: dict = {}


def count_log_marginal(logpdf):
    r"""Log-density of a noisy affine release of a Binomial or Poisson sum, the sum summed out.

    Returns a numba function ``f(family, n, t1, t2, a, b, z, params) -> float64`` (cached
    per ``logpdf`` in this process) computing

    .. math::

        \log \sum_S f_S(S \mid \theta) \prod_{k<m} \exp \mathrm{logpdf}(z_k - a_k - b_k S,
        \mathrm{params}_k),

    the exact log-likelihood of the release ``z`` given the records' parameter with the
    records (exchangeable, collapsed into their sum ``S``) integrated out (issue 14; the
    marginal likelihood of Ju et al. 2022 with the records replaced by their sum).

    The sum runs over the window of :func:`count_sampler`: the mode of the concave
    ``L(S) = log f_S(S) + log-noise`` by integer bisection, then weights ``pi(S)/pi(M)``
    accumulated from the mode by the exact log-ratios of ``f_S`` until the geometric bound on
    each tail is at most ``5e-15`` of the window mass. The returned value is the log of the
    **window** mass (the tails' bound is stated, not added): the true value lies in
    ``[f, f + 1e-14]``. ``log f_S`` at the mode is Loader's (2000) saddle-point form
    (``stirlerr`` and the deviance ``bd0``, ``n p`` formed exactly), so it holds full
    precision at ``n = 1e12`` where ``lgamma`` differences lose ``1e-3``.

    Parameters
    ----------
    logpdf : numba njit function
        The noise log-density, log-concave in ``x``, as for :func:`count_sampler`.

    Returns
    -------
    f : numba function
        ``f(family, n, t1, t2, a, b, z, params)``: ``family`` 0 (Binomial(n, t1)) or 1
        (Poisson with mean ``t1``; ``n`` ignored), ``t2`` ignored (kept for the signature of
        :func:`marginal_count_sampler`); ``a, b, z`` float64[::1] of length ``m``, ``params``
        float64[:, ::1] of shape ``(m, P)``. Returns the log mass (float64); ``-inf`` when the
        release is impossible (zero likelihood for every ``S``); NaN for invalid input (as the
        ``-2`` code of :func:`count_sampler`: ``t1`` outside its range or NaN, ``n`` outside
        ``0..2**53``, another family, a window beyond ``2**31`` counts on a side).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=2.0)
    >>> f = count_log_marginal(mech.numba_logpdf)
    >>> one = np.ones(1)
    >>> params = mech.numba_params[None, :]
    >>> v = f(0, 10, 0.5, 0.0, np.zeros(1), one, np.array([4.0]), params)
    >>> from scipy import stats
    >>> s = np.arange(11)
    >>> ref = np.log(np.sum(stats.binom.pmf(s, 10, 0.5) * np.exp(mech.logpdf(4.0 - s))))
    >>> bool(abs(v - ref) < 1e-12)
    True
    """

    def build(logpdf):
        @njit_for(logpdf)
        def log_mass(family, n, t1, t2, a, b, z, params):  # pragma: no cover - compiled
            fam = _family(family if family <= POISSON else -1, n, t1, 0.0)
            return _log_mass_core(logpdf, fam, _noise_args(a, b, z, params), t1)

        return log_mass

    return specialised(_LOG_MARGINAL_CACHED, build, logpdf)
