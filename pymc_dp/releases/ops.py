r"""One Posterior Sample (OPS): one draw of a tempered posterior is epsilon-DP.

Privacy (Foulds et al. 2016, Sec. 2.2, Thm. 2.2; Wang et al. 2015; Dimitrakakis et al. 2014).
Let ``C = sup_{x, x', θ} |log p(x | θ) - log p(x' | θ)|`` be the range of one record's
log-likelihood (replace-one neighbours, as in the rest of pymc_dp). Drawing ``θ`` from

.. math:: q_D(θ) \propto π(θ) \prod_{i} p(x_i | θ)^{1/T}

is the exponential mechanism with base measure ``π`` and utility ``Σ_i log p(x_i | θ)``, whose
sensitivity is ``C``; so one draw is ``ε = 2C/T``-DP. (Derivation: for neighbours ``D, D'``
differing in record ``x -> x'``, ``q_D(θ)/q_{D'}(θ) = e^{(ℓ(x, θ) - ℓ(x', θ))/T} Z_{D'}/Z_D``;
each factor is at most ``e^{C/T}``.) At ``T = 1`` this is Thm. 2.2: a posterior draw is
``2C``-DP. For a target ``ε`` we take ``T = 2C/ε`` (rounded up so that ``2C/T <= ε`` holds
exactly), capped below at ``T = 1``: a colder posterior than the true one is never used
(Foulds et al., Sec. 2.2), and then the draw is ``2C``-DP, ``2C <= ε``.

We temper the likelihood only; Foulds et al.'s eq. 14 tempers the whole joint (the prior as
well). Both are ``2C/T``-DP (the prior does not depend on the data); tempering only the
likelihood keeps the prior the user chose.

``C`` in closed form (Foulds et al. eqs. 13, 15):

* **Beta-Bernoulli truncated to** ``[p0, 1 - p0]``: ``log p(x | θ)`` is ``log θ`` or
  ``log(1 - θ)``, so ``C = sup |log θ - log(1 - θ)| = log((1 - p0)/p0)`` (eq. 15).
* **Dirichlet-categorical truncated to** ``{θ_k >= p0 for all k}`` (``K`` categories,
  ``p0 < 1/K``): ``C = sup |log θ_j - log θ_k| = log((1 - (K - 1) p0)/p0)``, attained with
  ``θ_j = 1 - (K - 1) p0`` and the others at ``p0``; ``K = 2`` gives eq. 15.

With ``p0 = 0`` no finite bound exists (some dataset has zero likelihood at some ``θ``), and
these functions refuse it. The tempered conjugate posteriors are a truncated
``Beta(α + s/T, β + f/T)`` and a truncated ``Dirichlet(α + c/T)``; for
other models :meth:`OnePosteriorSample.tempered_likelihood` writes the tempered likelihood into
a PyMC model and the user supplies ``C`` (the privacy of an MCMC draw then holds only once the
chain has converged, Foulds et al. Sec. 4.1).

Exact draws (the default of :meth:`OnePosteriorSample.sample`). The argument above needs the
draw to follow the tempered posterior *exactly*: a draw through floating-point inverse CDFs
from numpy's generator follows it only up to rounding, and the set of doubles it can output
depends on the data (Mironov 2012), so its guarantee does not hold as stated. ``sample`` draws
instead from the tempered posterior on a public grid of the truncated parameter space, as an
exponential mechanism sampled exactly:

* the grid: ``θ = p0 + (1 - K p0) m / M`` for every composition ``m`` of ``M`` into ``K``
  non-negative parts (``M = resolution``; for Bernoulli records ``K = 2``, ``θ`` is the
  second coordinate), a subset of the truncated region fixed before the data are seen;
* the utility on an integer scale: ``L[j, k] = round(log θ_jk / g)`` with ``g = OPS_GRID =
  2**-24`` (public integers), ``u~_j = Σ_k c_k L[j, k]`` for the category counts ``c`` (exact
  int64); its replace-one sensitivity is the integer ``Δ~ = max_j (max_k L[j, k] - min_k
  L[j, k])``, and ``g Δ~ <= C + g``;
* the rate ``ε_T / (2 Δ~)`` per integer unit, with ``ε_T = guarantee().epsilon = 2C/T``,
  rounded down to a rational ``s/t`` (``t <= 2**60``); the base measure is the prior's density
  at the grid points, ``log π_j = Σ_k (α_k - 1) log θ_jk`` rounded to a multiple of ``1/t``
  (data-independent, so its rounding does not touch privacy);
* ``P(j) ∝ exp((s u~_j + round(t log π_j)) / t)`` is sampled exactly by
  :mod:`pymc_dp.kernels.exponential_mechanism` (uniform proposals, Canonne-Kamath-Steinke
  Bernoulli(``exp(-γ)``) acceptance) on random words from the secure source.

Its privacy loss is ``2 Δ~ s/t <= guarantee().epsilon`` with no rounding left. Its law is the
tempered posterior (temperature ``g t/s``, within a relative ``g/C`` of ``T``) restricted to
the grid, up to a factor ``exp(n g / (2T))`` from the rounding of the utility. With
``allow_float=True`` :meth:`OnePosteriorSample.sample` draws the continuous posterior in floating
point instead (inverse CDF or rejection from a numpy ``Generator``), for simulations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp._validation import INT_RANGE, _as_real, as_bool, as_positive_finite, as_positive_int
from pymc_dp.accounting import PrivacyGuarantee, laplace_scale, linear_epsilon
from pymc_dp.kernels.exact_sampling import check_rng
from pymc_dp.kernels.exponential_mechanism import (
    _utility_rate,
    log_weights_to_gammas,
    sample_exponential_mechanism,
)

__all__ = [
    "OPS_GRID",
    "OnePosteriorSample",
    "beta_bernoulli_log_likelihood_range",
    "dirichlet_categorical_log_likelihood_range",
    "truncated_beta_rvs",
]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
stats = lazy_module("scipy.stats")

#: the exact OPS draw's log-likelihood grid ``g`` (nats per integer unit; module docstring)
OPS_GRID = 2.0**-24

_MAX_GRID_POINTS = 2**20  # largest exact-sampling grid
_MAX_CATEGORIES = _MAX_GRID_POINTS  # K categories need a grid of at least K points
_DEFAULT_POINTS = 2**17  # the default resolution keeps the grid at most this large


def _n_compositions(m: int, k: int) -> int:
    return math.comb(m + k - 1, k - 1)


def _default_resolution(k: int) -> int:
    m = 2**12
    while m > 1 and _n_compositions(m, k) > _DEFAULT_POINTS:
        m //= 2
    return m


def _compositions(m: int, k: int) -> np.ndarray:
    """Every ``(m_1, ..., m_k)`` of non-negative integers summing to ``m``, shape ``(J, k)``."""
    rows = np.zeros((1, 0), dtype=np.int64)
    left = np.array([m], dtype=np.int64)
    for _ in range(k - 1):
        reps = left + 1
        first = np.concatenate([np.arange(r) for r in reps])
        rows = np.concatenate([np.repeat(rows, reps, axis=0), first[:, None]], axis=1)
        left = np.repeat(left, reps) - first
    return np.concatenate([rows, left[:, None]], axis=1)


def _up(x: float, ulps: int = 4) -> float:
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


def beta_bernoulli_log_likelihood_range(truncation) -> float:
    """``C = log((1 - p0)/p0)`` for Bernoulli records and ``θ`` in ``[p0, 1 - p0]`` (eq. 15).

    Computed as ``log1p(-p0) - log(p0)`` plus a bound on the two logs' rounding errors
    (never under-counted).

    Raises
    ------
    ValueError
        Unless ``0 < p0 < 1/2`` (``p0 = 0``: no finite bound; ``p0 >= 1/2``: empty interval).

    Examples
    --------
    >>> round(beta_bernoulli_log_likelihood_range(0.1), 12) == round(math.log(9.0), 12)
    True
    """
    return dirichlet_categorical_log_likelihood_range(truncation, 2)


def dirichlet_categorical_log_likelihood_range(truncation, n_categories) -> float:
    """``C = log((1 - (K-1) p0)/p0)`` for ``K`` categories and every ``θ_k >= p0``.

    Raises
    ------
    ValueError
        Unless ``2 <= K <= 2**20`` and ``0 < p0 < 1/K`` (``p0 = 0``: no finite bound exists).
    TypeError
        If ``K`` is not an integer or ``p0`` not a real number (bools, strings, durations).

    Examples
    --------
    >>> round(dirichlet_categorical_log_likelihood_range(0.01, 4), 12) == round(
    ...     math.log(0.97 / 0.01), 12)
    True
    """
    k = as_positive_int("n_categories", n_categories)  # TypeError for bools, floats, durations
    if not 2 <= k <= _MAX_CATEGORIES:
        raise ValueError(
            f"n_categories must be an integer in [2, 2**20] (the largest exact grid has 2**20 "
            f"points), got {n_categories!r}"
        )
    # TypeError naming truncation for None, strings, bools, complex numbers, durations
    p0 = _as_real("truncation", truncation)
    if not (math.isfinite(p0) and 0.0 < p0 < 1.0 / int(k)):
        raise ValueError(
            f"truncation p0 must lie in (0, 1/K) = (0, {1.0 / int(k):.6g}), got {truncation!r}"
            + (
                ": with p0 = 0 the log-likelihood is unbounded and no temperature makes one "
                "posterior draw private"
                if p0 == 0.0
                else ""
            )
        )
    top, bottom = math.log1p(-(int(k) - 1) * p0), math.log(p0)
    # each log is within an ulp or two of the truth: add their error bound (the difference can
    # cancel when p0 is near 1/K), then round up
    return _up(top - bottom + 4.0 * (math.ulp(top) + math.ulp(bottom)), 1)


def _prior_values(prior, k: int) -> np.ndarray:
    """``prior`` as ``k`` finite positive floats; ``TypeError``/``ValueError`` naming ``prior``
    otherwise."""
    if isinstance(prior, str | bytes) or not hasattr(prior, "__len__"):
        raise TypeError(f"prior must be a sequence of {k} positive numbers, got {prior!r}")
    if len(prior) != k:
        raise ValueError(f"prior must be {k} finite positive numbers, got {prior!r}")
    alpha = np.array([_as_real("prior", v) for v in prior])
    if not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError(f"prior must be {k} finite positive numbers, got {prior!r}")
    return alpha


# ---- exact truncated Beta draws ---------------------------------------------------------------
def _log_beta_kernel(x, a, b):
    return (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x)


def _rejection_tail(a, b, lo, hi, rng, max_rounds: int = 10_000) -> np.ndarray:
    """Truncated Beta draws when nearly all the mass lies outside ``[lo, hi]`` (``a, b >= 1``).

    The log-density is concave, so its tangent at the end nearest the mode bounds it from
    above: propose from that (truncated) exponential and accept with the ratio (exact).
    """
    out = np.empty(a.shape)
    todo = np.ones(a.shape, dtype=bool)
    for _ in range(max_rounds):
        i = np.flatnonzero(todo)
        if i.size == 0:
            return out
        ai, bi, li, hi_ = a[i], b[i], lo[i], hi[i]
        slope_lo = (ai - 1.0) / li - (bi - 1.0) / (1.0 - li)
        left = slope_lo <= 0.0  # decreasing on the interval: tangent at lo, else at hi
        x0 = np.where(left, li, hi_)
        rate = np.abs(np.where(left, slope_lo, (ai - 1.0) / hi_ - (bi - 1.0) / (1.0 - hi_)))
        w = hi_ - li
        u = rng.random(i.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            e = np.where(rate * w > 1e-12, -np.log1p(-u * -np.expm1(-rate * w)) / rate, u * w)
        x = np.clip(np.where(left, li + e, hi_ - e), li, hi_)
        logr = _log_beta_kernel(x, ai, bi) - _log_beta_kernel(x0, ai, bi) + rate * np.abs(x - x0)
        ok = np.log(rng.random(i.size)) <= np.minimum(logr, 0.0)
        out[i[ok]] = x[ok]
        todo[i[ok]] = False
    raise RuntimeError("truncated Beta rejection sampler did not finish")  # pragma: no cover


def truncated_beta_rvs(a, b, lo, hi, *, rng=None) -> np.ndarray:
    """Exact draws of ``Beta(a, b)`` truncated to ``[lo, hi]`` (broadcast over the arguments).

    Inverse CDF with scipy's ``beta.ppf`` on the side of the distribution where the interval's
    probability is computed without cancellation (``cdf`` when ``F(lo) <= 1/2``, else
    ``sf``/``isf``). When that probability is below ``1e-6`` of the tail it is taken from
    (or underflows), and ``a, b >= 1``, a rejection sampler with an exponential envelope is
    used instead (exact, by log-concavity); with ``a < 1`` or ``b < 1`` there it raises.

    Examples
    --------
    >>> x = truncated_beta_rvs(2.0, 5.0, 0.1, 0.9, rng=np.random.default_rng(0))
    >>> bool(0.1 <= x <= 0.9)
    True
    >>> x = truncated_beta_rvs(1e6, 1.0, 0.1, 0.9, rng=np.random.default_rng(0))  # far tail
    >>> bool(0.8999 < x <= 0.9)
    True
    """
    rng = np.random.default_rng(rng)
    a, b, lo, hi = (np.asarray(v, dtype=np.float64) for v in (a, b, lo, hi))
    shape = np.broadcast_shapes(a.shape, b.shape, lo.shape, hi.shape)
    a, b, lo, hi = (np.broadcast_to(v, shape).ravel() for v in (a, b, lo, hi))
    if not (np.all(a > 0) and np.all(b > 0) and np.all((0 <= lo) & (lo < hi) & (hi <= 1))):
        raise ValueError("need a, b > 0 and 0 <= lo < hi <= 1")
    fl, fh = stats.beta.cdf(lo, a, b), stats.beta.cdf(hi, a, b)
    sl, sh = stats.beta.sf(lo, a, b), stats.beta.sf(hi, a, b)
    upper = fl > 0.5
    mass = np.where(upper, sl - sh, fh - fl)
    base = np.where(upper, sl, fh)
    u = rng.random(a.shape)
    with np.errstate(invalid="ignore"):
        x_cdf = stats.beta.ppf(fl + u * (fh - fl), a, b)
        x_sf = stats.beta.isf(sh + u * (sl - sh), a, b)
    x = np.clip(np.where(upper, x_sf, x_cdf), lo, hi)
    bad = ~((mass > 1e-300) & (mass >= 1e-6 * base))
    if np.any(bad):
        if not (np.all(a[bad] >= 1.0) and np.all(b[bad] >= 1.0)):
            raise ValueError(
                "truncated_beta_rvs: the interval holds too little mass for the inverse CDF "
                "and a < 1 or b < 1 (no log-concave envelope)"
            )
        x[bad] = _rejection_tail(a[bad], b[bad], lo[bad], hi[bad], rng)
    return x.reshape(shape)[()]


def _dirichlet_rejection(alpha, p0, rng, max_draws: int = 1_000_000) -> np.ndarray:
    """One draw of ``Dirichlet(alpha)`` restricted to ``{θ_k >= p0}`` (exact rejection)."""
    drawn, batch = 0, 256
    while drawn < max_draws:
        th = rng.dirichlet(alpha, size=batch)
        ok = np.flatnonzero(np.all(th >= p0, axis=1))
        if ok.size:
            return th[ok[0]]
        drawn += batch
        batch = min(batch * 4, 65_536)
    raise RuntimeError(
        f"OnePosteriorSample: no draw of Dirichlet(alpha) met theta_k >= {p0} in {max_draws} "
        "proposals (the truncated region holds almost no mass): use tempered_likelihood in a "
        "PyMC model with a truncated prior instead"
    )


@dataclass(frozen=True)
class OnePosteriorSample:
    """One Posterior Sample at the temperature that makes one draw ``epsilon``-DP.

    Parameters
    ----------
    epsilon : float
        The target privacy cost of one draw (finite, > 0).
    log_likelihood_range : float
        ``C = sup |log p(x | θ) - log p(x' | θ)|`` over records ``x, x'`` and parameters
        ``θ`` in the (truncated) parameter space: finite and ``>= 0``.
    family : {None, "beta_bernoulli", "dirichlet_categorical"}
        Set by the constructors :meth:`beta_bernoulli` and :meth:`dirichlet_categorical`,
        which compute ``C`` and allow the exact :meth:`sample`.
    truncation : float, optional
        ``p0`` of those families.
    n_categories : int, optional
        ``K`` of the Dirichlet-categorical family.

    Notes
    -----
    ``temperature = max(1, 2C/ε)`` and ``guarantee() = 2C/temperature <= ε`` (module
    docstring). The guarantee holds for one draw; ``k`` draws cost ``k`` times as much.
    :meth:`sample` draws exactly (a point of a public grid of the truncated parameter space,
    from the secure source) so that the guarantee holds as stated; its floating-point
    continuous draw is an opt-in (``allow_float=True``) for simulations. The PyMC route
    (:meth:`tempered_likelihood`) cannot be exact: its guarantee holds for a converged chain
    and up to floating point.

    Examples
    --------
    >>> import numpy as np
    >>> ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
    >>> round(ops.temperature, 6), ops.guarantee().epsilon <= 1.0
    (4.394449, True)
    >>> x = np.array([1, 0, 0, 1, 1])
    >>> theta = ops.sample(x, prior=(1.0, 1.0), rng=np.random.default_rng(0))
    >>> bool(0.1 <= theta <= 0.9)
    True
    """

    epsilon: float
    log_likelihood_range: float
    family: str | None = None
    truncation: float | None = None
    n_categories: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", as_positive_finite("epsilon", self.epsilon))
        raw = self.log_likelihood_range
        # TypeError for bools, strings, durations; ValueError beyond the double range
        c = _as_real("log_likelihood_range", raw)
        if not (math.isfinite(c) and c >= 0.0):
            raise ValueError(
                f"log_likelihood_range must be finite and >= 0, got {self.log_likelihood_range!r}"
                ": without a finite bound one posterior draw has no finite privacy guarantee "
                "(truncate the parameter space or bound the data)"
            )
        object.__setattr__(self, "log_likelihood_range", c)
        if not math.isfinite(self.temperature):
            raise ValueError(
                f"log_likelihood_range / epsilon is too large: the temperature 2C/epsilon for "
                f"log_likelihood_range={raw!r}, epsilon={self.epsilon!r} is beyond the double "
                "range"
            )

    @classmethod
    def beta_bernoulli(cls, epsilon, truncation) -> OnePosteriorSample:
        """Bernoulli records, Beta prior truncated to ``[p0, 1 - p0]`` (Foulds et al. eq. 15)."""
        c = beta_bernoulli_log_likelihood_range(truncation)
        return cls(epsilon, c, "beta_bernoulli", float(truncation), 2)

    @classmethod
    def dirichlet_categorical(cls, epsilon, truncation, n_categories) -> OnePosteriorSample:
        """Categorical records, Dirichlet prior truncated to ``{θ_k >= p0}``."""
        c = dirichlet_categorical_log_likelihood_range(truncation, n_categories)
        return cls(epsilon, c, "dirichlet_categorical", float(truncation), int(n_categories))

    @property
    def temperature(self) -> float:
        """``T = max(1, 2C/ε)``, rounded up so that ``2C/T <= ε`` exactly."""
        if self.log_likelihood_range == 0.0:
            return 1.0
        return max(1.0, laplace_scale(self.epsilon, 2.0 * self.log_likelihood_range))

    def guarantee(self) -> PrivacyGuarantee:
        """Pure DP of one draw: ``ε = 2C/T`` (exact, rounded up; ``<= epsilon``)."""
        two_c = 2 * Fraction(self.log_likelihood_range)
        return PrivacyGuarantee(epsilon=linear_epsilon(1 / Fraction(self.temperature), two_c))

    def sample(self, data, prior=None, rng=None, *, resolution=None, allow_float=False):
        """One draw of the tempered, truncated conjugate posterior (exact on a grid by default).

        Parameters
        ----------
        data : array_like
            The records: 0/1 (beta_bernoulli) or integers ``0..K-1`` (dirichlet_categorical).
        prior : tuple or array, optional
            ``(alpha, beta)`` of the Beta prior (default ``(1, 1)``), or the Dirichlet
            concentration (default ones). The prior is truncated like the posterior.
        rng : numpy.random.Generator, optional
            ``None`` (the default): random words from the operating system's secure source,
            for real releases. A ``Generator``: reproducible words (simulations; the same
            exact law). With ``allow_float=True`` also an int seed, and ``None`` is then a
            generator seeded from OS entropy.
        resolution : int, optional
            ``M`` of the grid ``θ = p0 + (1 - K p0) m / M`` (module docstring): the draw is a
            grid point, ``(1 - K p0) / M`` apart. Default: ``4096`` for ``K = 2``, halved
            until the grid has at most ``2**17`` points for larger ``K``; at most ``2**20``
            points.
        allow_float : bool, default False
            ``False``: the exact draw on the grid (module docstring): its ``guarantee()``
            holds with no rounding. ``True``: opt in to the continuous posterior drawn in
            floating point from a numpy ``Generator`` (inverse CDF or rejection), for
            simulations: its low-order bits and its rounded law leak (Mironov 2012), so the
            guarantee is not exact.

        Returns
        -------
        float or numpy.ndarray
            ``θ`` (a float in ``[p0, 1 - p0]``, or a probability vector with entries
            ``>= p0``).

        Raises
        ------
        ValueError
            Naming ``data``, ``prior`` or ``resolution``.
        TypeError
            Naming ``rng`` or ``allow_float``.

        Examples
        --------
        >>> import numpy as np
        >>> ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
        >>> theta = ops.sample(np.array([1, 0, 1, 1]), resolution=8)  # secure source
        >>> theta in {0.1 + 0.8 * m / 8 for m in range(9)}
        True
        """
        as_bool("allow_float", allow_float)
        counts = self._counts(data)
        alpha = self._alpha(prior)
        if allow_float:
            return self._sample_float(counts, alpha, np.random.default_rng(rng))
        check_rng(rng)
        points, q, r, d = self._grid_law(counts, alpha, resolution)
        j = int(sample_exponential_mechanism(q, r, d, size=1, rng=rng)[0])
        if self.family == "beta_bernoulli":
            return float(points[j, 1])
        return points[j].copy()

    def _alpha(self, prior) -> np.ndarray:
        """The concentration per category (``(beta, alpha)`` for Bernoulli records)."""
        if prior is None:
            return np.ones(self.n_categories)
        alpha = _prior_values(prior, self.n_categories)
        # the Beta prior (alpha, beta) weighs successes, category 1: reversed
        return alpha[::-1].copy() if self.family == "beta_bernoulli" else alpha

    def _sample_float(self, counts, alpha, rng):
        t = self.temperature
        if self.family == "beta_bernoulli":
            p0 = self.truncation
            return float(
                truncated_beta_rvs(
                    alpha[1] + counts[1] / t, alpha[0] + counts[0] / t, p0, 1 - p0, rng=rng
                )
            )
        return _dirichlet_rejection(alpha + counts / t, self.truncation, rng)

    def _grid_law(self, counts, alpha, resolution):
        """``(points, q, r, d)``: the grid and the exact law's gammas (module docstring)."""
        k, p0 = self.n_categories, self.truncation
        if resolution is None:
            resolution = _default_resolution(k)
        if isinstance(resolution, bool | np.bool_) or not isinstance(resolution, int | np.integer):
            raise ValueError(f"resolution must be a positive integer, got {resolution!r}")
        m = int(resolution)
        if m < 1 or _n_compositions(m, k) > _MAX_GRID_POINTS:
            raise ValueError(
                f"resolution must be >= 1 with at most {_MAX_GRID_POINTS} grid points "
                f"(C(M + K - 1, K - 1) for K = {k}), got {resolution!r}"
            )
        points = p0 + (1.0 - k * p0) * (_compositions(m, k) / m)
        logt = np.log(points)
        lq = np.rint(logt / OPS_GRID).astype(np.int64)
        c = counts.astype(np.int64)
        if int(c.sum()) * int(np.abs(lq).max()) >= INT_RANGE:
            raise ValueError("data: too many records for the exact draw's integer utility")
        units = lq @ c
        delta_units = int((lq.max(1) - lq.min(1)).max())
        log_prior = logt @ (alpha - 1.0)
        rate = _utility_rate(self.guarantee().epsilon, delta_units)
        # rate 0 (a data-independent draw): the prior on the grid, rounded to 2**-24
        s, t = (0, 2**24) if rate == 0 else (rate.numerator, rate.denominator)
        if not np.all(np.abs(log_prior) < 1e300 / t):
            raise ValueError("prior: the prior's log density on the grid is too large")
        num = [s * int(u) + round(float(lp) * t) for u, lp in zip(units, log_prior, strict=True)]
        q, r, d = log_weights_to_gammas(num, t)
        return points, q, r, d

    def _counts(self, data) -> np.ndarray:
        if self.family is None:
            raise ValueError(
                "sample() draws exactly for the beta_bernoulli and dirichlet_categorical "
                "families only; for another model use tempered_likelihood in a PyMC model"
            )
        x = np.asarray(data)
        if isinstance(data, np.ma.MaskedArray) or x.ndim != 1 or x.size == 0:
            raise ValueError("data must be a non-empty 1-D array of records")
        k = self.n_categories
        if x.dtype.kind not in "biuf" or not np.all((x == np.round(x)) & (x >= 0) & (x < k)):
            raise ValueError(f"data must hold integers in 0..{k - 1}")
        return np.bincount(x.astype(np.int64), minlength=k).astype(np.float64)

    def tempered_likelihood(self, name: str, dist, observed):
        """Add ``Σ_i log p(x_i | θ) / T`` to the model in context as ``pm.Potential(name)``.

        ``dist`` is the records' law as a ``.dist()`` of the model's parameters (e.g.
        ``pm.Bernoulli.dist(p=p)``) and ``observed`` the records. The parameters' priors must
        live on the parameter space on which ``log_likelihood_range`` was computed (e.g.
        ``pm.Truncated(pm.Beta.dist(1, 1), lower=p0, upper=1 - p0)``). The potential is
        tagged, so :func:`pymc_dp.privacy_report` counts it: the cost of one released draw is
        :meth:`guarantee`, and holds only for a converged chain.

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> ops = OnePosteriorSample.beta_bernoulli(epsilon=1.0, truncation=0.1)
        >>> with pm.Model() as m:
        ...     p = pm.Truncated("p", pm.Beta.dist(1.0, 1.0), lower=0.1, upper=0.9)
        ...     pot = ops.tempered_likelihood("loglik", pm.Bernoulli.dist(p=p), np.array([1, 0]))
        >>> float(m.compile_logp(vars=[pot], jacobian=False)({"p_interval__": 0.0})) == float(
        ...     2 * np.log(0.5) / ops.temperature)
        True
        """
        import pymc as pm

        logp = pm.logp(dist, np.asarray(observed)).sum()
        pot = pm.Potential(name, logp * np.float64(1.0 / self.temperature))
        pot.tag.pymc_dp_ops = self  # pymc_dp.privacy_report counts the potential by this tag
        return pot
