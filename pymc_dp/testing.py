"""Statistical checks shared by the pymc_dp test suite (and usable by downstream projects).

Every check has an explicit false-alarm rate. The suite-wide default is
:data:`FALSE_ALARM` ``= 1e-6`` per assertion (the OpenDP choice): a correct implementation fails
an assertion with probability at most ``1e-6``. Pair every goodness-of-fit assertion with a
*negative control* (a slightly wrong law that :func:`assert_rejects` must reject) so that a test
that cannot fail is caught.

* :func:`chisquare_gof` — integer draws against an exact log-pmf (tail bins pooled).
* :func:`ks_gof` — real draws against an exact CDF (Kolmogorov–Smirnov).
* :func:`assert_gof` / :func:`assert_rejects` — assert a p-value passes / fails.
* :func:`clopper_pearson` — exact binomial confidence bounds.
* :func:`empirical_epsilon_lower_bound`, :func:`empirical_delta_lower_bound` — lower confidence
  bounds on the privacy loss of an event from samples of ``M(x)`` and ``M(x')``;
  :func:`neighbour_tail_event`, the event with the largest ratio for additive noise.
* :func:`mcse_check` — posterior mean within ``k`` Monte Carlo standard errors of a reference.
* :func:`mpmath_log_iv` — an independent high-precision reference for ``log I_nu(x)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "FALSE_ALARM",
    "MCSECheck",
    "assert_gof",
    "assert_rejects",
    "chisquare_gof",
    "clopper_pearson",
    "empirical_delta_lower_bound",
    "empirical_epsilon_lower_bound",
    "grid_posterior_check",
    "ks_gof",
    "mcse_check",
    "mpmath_log_iv",
    "neighbour_tail_event",
]

#: default false-alarm rate of one statistical assertion
FALSE_ALARM = 1e-6


def _as_integer_draws(draws) -> np.ndarray:
    d = np.asarray(draws).ravel()
    if np.issubdtype(d.dtype, np.integer):
        return d.astype(np.int64)
    if np.issubdtype(d.dtype, np.floating) and np.all(np.isfinite(d)) and np.all(d == np.round(d)):
        return d.astype(np.int64)
    raise ValueError("draws must be integers (or integral floats)")


def chisquare_gof(
    draws, logpmf: Callable, *, min_expected: float = 5.0, max_bins: int | None = None
) -> float:
    """Pearson χ² goodness-of-fit p-value of integer ``draws`` against an exact log-pmf.

    The categories are the integers from ``min(draws)`` to ``max(draws)`` plus one category
    "outside that range" holding the remaining mass ``1 - Σ pmf`` (observed count 0). Adjacent
    categories are pooled left to right until each has expected count ``>= min_expected``
    (a leftover at the right end joins the last pooled bin), and the "outside" category, when
    its expected count is below ``min_expected``, joins the pooled bin with the smallest
    expected count. The statistic is referred to χ² with (number of bins - 1) degrees of
    freedom. (The pooling looks at the observed range; with ``min_expected = 5`` and large
    samples the χ² approximation is accurate in the tails that matter here.)

    Parameters
    ----------
    draws : array_like of int
        The sample (any shape; flattened).
    logpmf : callable
        Vectorised ``logpmf(k)`` for an int64 array ``k``; must be normalised over the integers.
    min_expected : float, default 5.0
        Minimum expected count per pooled bin.
    max_bins : int, optional
        Cap on the number of bins, enforced by raising the minimum expected count to
        ``n / max_bins``. Thousands of small bins (a law spread over a wide support) dilute the
        power against smooth alternatives such as a wrong scale; a cap of a few hundred
        (Mann & Wald: about ``2 n^{2/5}``) restores it, at the cost of coarser tails.

    Returns
    -------
    float
        The p-value (1.0 if fewer than two bins remain; 0.0 if a value of probability zero was
        observed).

    Raises
    ------
    ValueError
        If draws are not integers, the log-pmf is NaN, or it sums to more than 1 + 1e-9 over
        the observed range (not normalised).

    Examples
    --------
    >>> from scipy import stats
    >>> rng = np.random.default_rng(0)
    >>> x = rng.poisson(4.0, size=20_000)
    >>> bool(chisquare_gof(x, stats.poisson(4.0).logpmf) > 1e-6)
    True
    >>> bool(chisquare_gof(x, stats.poisson(4.2).logpmf) < 1e-6)  # negative control
    True
    """
    if not (isinstance(min_expected, int | float) and min_expected > 0):
        raise ValueError(f"min_expected must be > 0, got {min_expected!r}")
    d = _as_integer_draws(draws)
    n = d.size
    if n == 0:
        raise ValueError("draws is empty")
    if max_bins is not None:
        if not (isinstance(max_bins, int) and max_bins >= 2):
            raise ValueError(f"max_bins must be an integer >= 2, got {max_bins!r}")
        min_expected = max(min_expected, n / max_bins)
    lo, hi = int(d.min()), int(d.max())
    k = np.arange(lo, hi + 1, dtype=np.int64)
    logp = np.asarray(logpmf(k), dtype=np.float64).reshape(k.shape)
    if np.any(np.isnan(logp)):
        raise ValueError("logpmf returned NaN")
    p = np.exp(logp)
    total = math.fsum(p)
    if total > 1.0 + 1e-9:
        raise ValueError(f"logpmf sums to {total!r} > 1 over the observed range: not normalised")
    observed = np.bincount(d - lo, minlength=k.size).astype(np.float64)
    if np.any((p == 0.0) & (observed > 0.0)):
        return 0.0  # a value of probability zero was observed
    expected = n * p
    outside = n * max(0.0, 1.0 - total)

    # greedy left-to-right pooling: each bin [s, j) closes at the first j where its expected
    # count reaches min_expected (found by searchsorted on the cumulative sum, so the loop runs
    # once per pooled bin, not once per support point); reduceat merges the leftover tail into
    # the last bin
    c0 = np.concatenate(([0.0], np.cumsum(expected)))
    starts = []
    s = 0
    while s < k.size:
        j = int(np.searchsorted(c0, c0[s] + min_expected, side="left"))
        if j > k.size:
            break
        starts.append(s)
        s = j
    starts = starts or [0]
    obs_bins = np.add.reduceat(observed, starts).tolist()
    exp_bins = np.add.reduceat(expected, starts).tolist()
    if outside >= min_expected:
        obs_bins.append(0.0)
        exp_bins.append(outside)
    elif outside > 0.0:
        exp_bins[int(np.argmin(exp_bins))] += outside
    obs_a = np.asarray(obs_bins)
    exp_a = np.asarray(exp_bins)
    if obs_a.size < 2:
        return 1.0
    if np.any(exp_a <= 0.0):  # pragma: no cover - excluded by the zero-probability check
        return 0.0
    stat = float(np.sum((obs_a - exp_a) ** 2 / exp_a))
    return float(stats.chi2.sf(stat, obs_a.size - 1))


def ks_gof(draws, cdf: Callable) -> float:
    """Kolmogorov–Smirnov p-value of real ``draws`` against an exact continuous ``cdf``.

    Parameters
    ----------
    draws : array_like of float
        The sample (flattened).
    cdf : callable
        Vectorised CDF of the hypothesised law.

    Examples
    --------
    >>> from scipy import stats
    >>> x = np.random.default_rng(1).laplace(0.0, 2.0, size=50_000)
    >>> bool(ks_gof(x, stats.laplace(scale=2.0).cdf) > 1e-6)
    True
    >>> bool(ks_gof(x, stats.laplace(scale=2.2).cdf) < 1e-6)  # negative control
    True
    """
    x = np.asarray(draws, dtype=np.float64).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("draws must be a non-empty array of finite numbers")
    return float(stats.kstest(x, cdf).pvalue)


def assert_gof(pvalue: float, *, alpha: float = FALSE_ALARM, what: str = "") -> None:
    """Assert a goodness-of-fit p-value is above ``alpha`` (false alarm rate ``alpha``).

    Examples
    --------
    >>> assert_gof(0.3)
    >>> assert_gof(1e-9)
    Traceback (most recent call last):
    ...
    AssertionError: goodness of fit rejected: p = 1e-09 <= alpha = 1e-06
    """
    if not (pvalue > alpha):
        label = f" ({what})" if what else ""
        raise AssertionError(
            f"goodness of fit rejected{label}: p = {pvalue:.3g} <= alpha = {alpha:.3g}"
        )


def assert_rejects(pvalue: float, *, alpha: float = FALSE_ALARM, what: str = "") -> None:
    """Assert a negative control is rejected: ``pvalue < alpha``.

    A passing negative control shows the test has power against the wrong law it was given.

    Examples
    --------
    >>> assert_rejects(1e-12)
    >>> assert_rejects(0.5)
    Traceback (most recent call last):
    ...
    AssertionError: negative control not rejected: p = 0.5 >= alpha = 1e-06
    """
    if not (pvalue < alpha):
        label = f" ({what})" if what else ""
        raise AssertionError(
            f"negative control not rejected{label}: p = {pvalue:.3g} >= alpha = {alpha:.3g}"
        )


def clopper_pearson(k, n, alpha: float = FALSE_ALARM) -> tuple[float, float]:
    """Exact (Clopper–Pearson) bounds for a binomial proportion.

    Returns ``(lower, upper)``; each one-sided bound fails with probability at most
    ``alpha / 2`` (so the interval has coverage at least ``1 - alpha``).

    .. math::

        p_{lo} = B^{-1}(α/2; k, n-k+1), \\qquad p_{hi} = B^{-1}(1-α/2; k+1, n-k),

    with ``p_lo = 0`` when ``k = 0`` and ``p_hi = 1`` when ``k = n``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(50, 100, alpha=0.05)
    >>> round(lo, 4), round(hi, 4)
    (0.3983, 0.6017)
    """
    k, n = int(k), int(n)
    if not (0 <= k <= n and n >= 1):
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2.0, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.isf(alpha / 2.0, k + 1, n - k))
    return lo, hi


def _event_counts(samples, event) -> tuple[int, int]:
    s = np.asarray(samples)
    hit = np.asarray(event(s), dtype=bool)
    if hit.shape != s.shape and hit.shape != s.shape[:1]:
        raise ValueError(
            "event(samples) must return a boolean array of the samples' shape (one flag per "
            "value), or of their first axis (one flag per release)"
        )
    return int(hit.sum()), int(hit.size)


def neighbour_tail_event(near, far) -> Callable:
    """The event "every released coordinate lies on ``near``'s side of the midpoint between
    ``near`` and ``far``" (coordinates where they are equal are not constrained), one flag per
    release (row of the samples).

    For independent two-sided geometric (or Laplace) noise of rate ``a`` per coordinate, and
    statistics ``near`` and ``far`` of neighbouring data sets, the probability ratio of this
    event under ``near`` and ``far`` is ``exp(a * ||near - far||_1)``: the largest any event
    has, so :func:`empirical_epsilon_lower_bound` on it approaches the privacy loss the
    mechanism actually has, and a mechanism noisier or less noisy than it claims shows.

    Parameters
    ----------
    near, far : array_like, shape (m,)
        The exact statistics of the two neighbouring data sets (integers, or grid values).

    Returns
    -------
    callable
        ``event(samples)``, ``samples`` of shape ``(N, m)`` (or ``(N,)`` for ``m = 1``).

    Examples
    --------
    A geometric mechanism of rate 1, counts 3 and 4: the event ``z <= 3`` has ratio ``e``.

    >>> rng = np.random.default_rng(0)
    >>> noise = rng.geometric(1 - np.exp(-1.0), (2, 200_000)) - 1
    >>> z = noise[0] - noise[1]
    >>> lb = empirical_epsilon_lower_bound(3 + z, 4 + z, neighbour_tail_event([3], [4]))
    >>> bool(0.9 < lb <= 1.0)
    True
    """
    near = np.atleast_1d(np.asarray(near, dtype=np.float64))
    far = np.atleast_1d(np.asarray(far, dtype=np.float64))
    mid, low = 0.5 * (near + far), near < far
    moved = near != far

    def event(samples):
        z = np.asarray(samples, dtype=np.float64).reshape(-1, near.size)
        side = np.where(low, z < mid, z > mid)
        return np.all(side | ~moved, axis=1)

    return event


def empirical_epsilon_lower_bound(
    samples_x, samples_xprime, event: Callable, *, alpha: float = FALSE_ALARM
) -> float:
    """Lower confidence bound on ``log(P[M(x) ∈ S] / P[M(x') ∈ S])`` for the event ``S``.

    With ``p = P[M(x) ∈ S]`` and ``q = P[M(x') ∈ S]``, pure ε-DP requires ``log(p/q) <= ε``.
    From independent samples, the Clopper–Pearson lower bound on ``p`` and upper bound on ``q``
    (each at level ``alpha/2``, see :func:`clopper_pearson`) give
    ``log(p_lo / q_hi) <= log(p/q)`` with probability at least ``1 - alpha``. A correct mechanism
    therefore has ``result <= ε`` except with probability ``alpha``; for the optimal event the
    bound approaches ``ε`` as the samples grow.

    Parameters
    ----------
    samples_x, samples_xprime : array_like
        Independent outputs of ``M(x)`` and ``M(x')``.
    event : callable
        Vectorised indicator: ``event(samples) -> bool array``, one flag per value (the
        samples' shape) or per release (their first axis; e.g. :func:`neighbour_tail_event`).
    alpha : float, default FALSE_ALARM

    Returns
    -------
    float
        The lower bound (``-inf`` if ``S`` was never hit under ``x``).

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> a = rng.laplace(0.0, 1.0, 200_000)
    >>> b = rng.laplace(1.0, 1.0, 200_000)
    >>> lb = empirical_epsilon_lower_bound(b, a, lambda y: y > 1.0)
    >>> bool(0.9 < lb <= 1.0)
    True
    """
    k1, n1 = _event_counts(samples_x, event)
    k2, n2 = _event_counts(samples_xprime, event)
    p_lo, _ = clopper_pearson(k1, n1, alpha)
    _, q_hi = clopper_pearson(k2, n2, alpha)
    if p_lo == 0.0:
        return -math.inf
    return math.log(p_lo) - math.log(q_hi)


def empirical_delta_lower_bound(
    samples_x, samples_xprime, event: Callable, epsilon: float, *, alpha: float = FALSE_ALARM
) -> float:
    """Lower confidence bound on ``P[M(x) ∈ S] - e^ε P[M(x') ∈ S]``.

    (ε, δ)-DP requires this to be at most ``δ`` for every event ``S``. Bounds as in
    :func:`empirical_epsilon_lower_bound`: ``p_lo - e^ε q_hi`` holds with probability at least
    ``1 - alpha``.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> a = rng.normal(0.0, 1.0, 200_000)
    >>> b = rng.normal(1.0, 1.0, 200_000)
    >>> from pymc_dp.accounting import analytic_gaussian_delta
    >>> lb = empirical_delta_lower_bound(b, a, lambda y: y > 1.5, 1.0)  # worst event at ε=1
    >>> bool(0.1 < lb <= analytic_gaussian_delta(1.0, 1.0))
    True
    """
    k1, n1 = _event_counts(samples_x, event)
    k2, n2 = _event_counts(samples_xprime, event)
    p_lo, _ = clopper_pearson(k1, n1, alpha)
    _, q_hi = clopper_pearson(k2, n2, alpha)
    return p_lo - math.exp(float(epsilon)) * q_hi


@dataclass(frozen=True)
class MCSECheck:
    """Result of :func:`mcse_check`.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.testing import MCSECheck, mcse_check
    >>> res = mcse_check(np.random.default_rng(4).normal(1.0, 2.0, size=(2, 1000)), 1.0)
    >>> isinstance(res, MCSECheck), res.passed, bool(abs(res.z) <= res.k)
    (True, True, True)
    >>> bool(np.isclose(res.z, (res.mean - 1.0) / res.mcse))
    True
    """

    mean: float
    mcse: float
    ess: float
    z: float
    k: float
    passed: bool


def mcse_check(
    samples, reference_mean: float, *, alpha: float = FALSE_ALARM, k: float | None = None
) -> MCSECheck:
    """Is the sample mean within ``k`` Monte Carlo standard errors of ``reference_mean``?

    ``mcse = sd / sqrt(ESS)`` with the ESS of the mean from ArviZ (``arviz.ess(...,
    method="mean")``). Under a correct sampler ``z = |mean - reference| / mcse`` is
    approximately standard normal, so ``k = Φ^{-1}(1 - alpha/2)`` (4.89 for ``alpha = 1e-6``)
    gives false-alarm rate ``alpha``; pass ``k`` to override (e.g. ``k=4`` is common, rate
    ``6e-5``).

    Parameters
    ----------
    samples : array_like
        Draws of a scalar: shape ``(chain, draw)`` or ``(draw,)`` (one chain).
    reference_mean : float
        The exact posterior mean.

    Examples
    --------
    >>> x = np.random.default_rng(4).normal(1.0, 2.0, size=(2, 1000))
    >>> res = mcse_check(x, 1.0)
    >>> res.passed, round(res.k, 2)
    (True, 4.89)
    >>> mcse_check(x, 1.5).passed  # negative control
    False
    """
    import arviz as az

    x = np.asarray(samples, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError("samples must have shape (chain, draw) or (draw,)")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples contain non-finite values")
    ess = float(az.ess(x, method="mean"))
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    mcse = sd / math.sqrt(ess) if ess > 0 else math.inf
    kk = float(stats.norm.isf(alpha / 2.0)) if k is None else float(k)
    z = abs(mean - float(reference_mean)) / mcse if mcse > 0 else math.inf
    return MCSECheck(mean=mean, mcse=mcse, ess=ess, z=z, k=kk, passed=bool(z <= kk))


def grid_posterior_check(
    draws, grid, logpost, *, k_mean: float | None = None, k_quantile: float | None = None
) -> tuple[bool, MCSECheck]:
    """Do scalar posterior draws agree with a posterior known on a fine grid?

    The mean within ``k_mean`` MCSE of the grid mean (:func:`mcse_check`) and, at q = 0.1, 0.5,
    0.9, the grid CDF at the draws' q-quantile within ``k_quantile`` binomial standard errors
    ``sqrt(q (1 - q) / ESS)`` of q (ESS of the median). Both ``k`` default to the two-sided
    normal quantile of :data:`FALSE_ALARM` (4.89).

    Parameters
    ----------
    draws : array_like
        Shape ``(chain, draw)`` or ``(draw,)``.
    grid : array_like
        Equally spaced parameter values covering the posterior.
    logpost : array_like
        Unnormalised log posterior at ``grid``.

    Returns
    -------
    (bool, MCSECheck)
        Whether every check passed, and the mean's check.

    Examples
    --------
    >>> grid = np.linspace(-8.0, 8.0, 4001)
    >>> x = np.random.default_rng(5).normal(size=(2, 2000))
    >>> grid_posterior_check(x, grid, -0.5 * grid**2)[0]
    True
    >>> grid_posterior_check(x, grid, -0.5 * (grid - 0.5) ** 2)[0]  # negative control
    False
    """
    import arviz as az
    from scipy import special

    kk = float(stats.norm.isf(FALSE_ALARM / 2.0))
    grid = np.asarray(grid, dtype=np.float64)
    logpost = np.asarray(logpost, dtype=np.float64)
    post = np.exp(logpost - special.logsumexp(logpost))
    post /= post.sum()
    x = np.asarray(draws, dtype=np.float64)
    chk = mcse_check(x, float(np.sum(grid * post)), k=kk if k_mean is None else k_mean)
    ess = float(az.ess(x if x.ndim == 2 else x[None, :], method="quantile", prob=0.5))
    cdf = np.cumsum(post)
    kq = kk if k_quantile is None else float(k_quantile)
    ok = chk.passed
    for q in (0.1, 0.5, 0.9):
        f = np.interp(np.quantile(x.ravel(), q), grid, cdf)
        ok &= bool(abs(f - q) <= kq * math.sqrt(q * (1 - q) / ess))
    return bool(ok), chk


def mpmath_log_iv(nu, x, dps: int = 50):
    """Independent ``dps``-digit reference for ``log I_nu(x)`` (an ``mpmath.mpf``; needs mpmath).

    mpmath's ``besseli`` where its series or asymptotic expansion is quick; elsewhere the Poisson
    integral (DLMF 10.32.2)
    ``I_nu(x) = (x/2)^nu / (sqrt(pi) Gamma(nu+1/2)) * int_{-1}^{1} (1-t^2)^(nu-1/2) e^{xt} dt``
    (a positive integrand, no cancellation), integrated by tanh-sinh quadrature split around the
    peak of the integrand.

    Examples
    --------
    >>> from pymc_dp.testing import mpmath_log_iv
    >>> round(float(mpmath_log_iv(0, 1.0)), 12)  # log I_0(1) = log 1.2660658777520082
    0.235914358507
    """
    import mpmath as mp

    with mp.workdps(dps):
        nu = mp.mpf(nu)
        x = mp.mpf(x)
        if x == 0:
            return mp.mpf(0) if nu == 0 else mp.ninf
        if nu < 0.5 or x < 50 or x * x < 400 * (nu + 1) or x > 30 * nu * nu:
            return +mp.log(mp.besseli(nu, x, maxterms=10**6))
        a = nu - mp.mpf(1) / 2
        ts = x / (a + mp.sqrt(a * a + x * x))  # maximiser of x t + a log(1 - t^2)
        gs = x * ts + a * mp.log1p(-ts * ts)

        def f(t):
            return mp.exp(x * t + a * mp.log1p(-t * t) - gs) if t < 1 else mp.mpf(0)

        w = (1 - ts * ts) / mp.sqrt(2 * a * (1 + ts * ts))
        inner = [p for p in (ts - 40 * w, ts - 8 * w, ts, ts + 8 * w, ts + 40 * w) if -1 < p < 1]
        integral = mp.quad(f, [mp.mpf(-1), *inner, mp.mpf(1)])
        return +(
            nu * mp.log(x / 2)
            - mp.log(mp.pi) / 2
            - mp.loggamma(nu + mp.mpf(1) / 2)
            + gs
            + mp.log(integral)
        )
