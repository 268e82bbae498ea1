"""Sufficient-statistic releases of conjugate exponential families (Foulds et al. 2016, Sec. 3.2).

A data holder clamps the records to declared bounds, computes the family's sufficient
statistics, adds noise calibrated to their sensitivity and publishes the result once.
:func:`release_sufficient_statistics` does all of it and returns a frozen
:class:`SufficientStatisticsRelease`, from which an analyst gets

* :meth:`~SufficientStatisticsRelease.plugin_posterior`: the papers' plug-in posterior, the
  noisy statistics projected to the valid region (Foulds et al. eq. 16: counts clipped to
  ``[0, n]``) and used in the conjugate update as if they were exact;
* :meth:`~SufficientStatisticsRelease.model`: the noise-aware PyMC model (latent records, the
  clamping of the records, and a :class:`pymc_dp.Release` of their statistic), whose posterior
  accounts for the noise; ``pm.sample`` picks the data-augmentation step for the records;
* for Bernoulli records, :meth:`~SufficientStatisticsRelease.sample_noise_aware_posterior`:
  exact draws from that same noise-aware posterior by enumerating the success count;
* :meth:`~SufficientStatisticsRelease.guarantee`: the privacy cost (the mechanism's
  guarantee from :mod:`pymc_dp.accounting`), which :func:`pymc_dp.privacy_report` also reports
  for the model built by ``model()``.

Neighbouring datasets are replace-one (``n`` public), as everywhere in pymc_dp; the
sensitivities are in :mod:`pymc_dp.releases._families`.

The mechanism is given either as a :class:`pymc_dp.Mechanism` whose declared ``sensitivity``
is at least the statistic's (in the mechanism's norm: L1 for Laplace and Geometric, L2 for the
Gaussians), or as a callable ``sensitivity -> Mechanism`` such as
``functools.partial(pmdp.Geometric, epsilon=0.1)`` that this module calibrates with the exact
sensitivity (rounded up to an integer for the integer mechanisms). A declared sensitivity below
the statistic's is a ``ValueError``: the stated guarantee would be false.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from pymc_dp._cache import lazy_module
from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.mechanisms._float_release import check_allow_float
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.discretized import as_grid
from pymc_dp.releases._families import LinearRegression, NormalGrid, RegressionGrid, family_of

__all__ = [
    "NormalInverseGamma",
    "SufficientStatisticsRelease",
    "release_sufficient_statistics",
    "sufficient_statistic_sensitivity",
]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
special = lazy_module("scipy.special")
stats = lazy_module("scipy.stats")

_L2_FAMILIES = ("gaussian", "discrete_gaussian")


def _norm_of(mechanism) -> str:
    return "l2" if getattr(mechanism, "family", "") in _L2_FAMILIES else "l1"


def sufficient_statistic_sensitivity(family, bounds=None, *, norm="l1", dimension=1) -> float:
    """The replace-one sensitivity of a family's sufficient statistic.

    Parameters
    ----------
    family : str or PyMC distribution class
        ``"bernoulli"``, ``"categorical"``, ``"poisson"``, ``"normal"`` or
        ``"linear_regression"`` (or ``pm.Bernoulli``, ``pm.Categorical``, ``pm.Poisson``,
        ``pm.Normal``).
    bounds : optional
        As for :func:`release_sufficient_statistics`.
    norm : {"l1", "l2"}
        L1 for Laplace/Geometric, L2 for Gaussian/DiscreteGaussian.
    dimension : int, default 1
        Number of predictors ``d`` (linear regression only).

    Returns
    -------
    float
        Exact for the first four families (the smallest double at or above the exact value), an
        upper bound for linear regression (see :mod:`pymc_dp.releases._families`).

    Examples
    --------
    >>> sufficient_statistic_sensitivity("bernoulli")
    2.0
    >>> sufficient_statistic_sensitivity("poisson", 10)
    10.0
    >>> round(sufficient_statistic_sensitivity("normal", (-1.0, 1.0)), 12)
    2.25
    """
    fam = family_of(family)
    b = fam.bounds(bounds)
    if norm not in ("l1", "l2"):
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
    if isinstance(fam, LinearRegression):
        l1, l2 = fam.sensitivity(b, int(dimension))
    else:
        l1, l2 = fam.sensitivity(b)
    return l1 if norm == "l1" else l2


def _calibrate(
    mechanism, sens: tuple[float, float], integer_stat: bool, source: str | None = None
) -> Mechanism:
    """The mechanism to release with: checked (instance) or built (callable); see module doc.

    ``source`` names the arguments the sensitivity comes from (e.g. ``"bounds=(0, 1)"``): a
    factory's refusal of that sensitivity is re-raised naming them."""
    if isinstance(mechanism, Mechanism):
        mech = mechanism
    elif callable(mechanism):
        try:
            mech = _build(mechanism, sens)
        except ValueError as err:
            if source is None:
                raise
            raise ValueError(
                f"{source} give the statistic the sensitivity {sens[0]!r} (L1) / {sens[1]!r} "
                f"(L2), which the mechanism refuses ({err}): change the bounds"
            ) from None
    else:
        raise TypeError(
            "mechanism must be a pymc_dp Mechanism or a callable sensitivity -> Mechanism "
            f"(e.g. functools.partial(pmdp.Geometric, epsilon=0.5)), got {mechanism!r}"
        )
    if mech.integer and not integer_stat:
        raise ValueError(
            f"{type(mech).__name__} releases integers but this family's statistics are real: "
            "pass grid=2**-k (a power of two) to snap the records to that grid and release "
            "their integer statistic exactly (or use pmdp.Laplace / pmdp.Gaussian with "
            "allow_float=True, for simulations)"
        )
    need = sens[0] if _norm_of(mech) == "l1" else sens[1]
    if Fraction(mech.sensitivity) < Fraction(need):
        raise ValueError(
            f"mechanism.sensitivity={mech.sensitivity!r} is below the {_norm_of(mech).upper()} "
            f"sensitivity {need!r} of the statistic (replace-one neighbours): the stated "
            f"guarantee would be false; build the mechanism with sensitivity={need!r} or pass "
            "a callable sensitivity -> Mechanism"
        )
    return mech


_EXACT_HINT = (
    "an integer mechanism such as functools.partial(pmdp.Geometric, epsilon=...) or "
    "functools.partial(pmdp.DiscreteGaussian, rho=...) (with grid=2**-k for the normal and "
    "linear_regression families: the records are snapped to the grid)"
)


def release_values(mech: Mechanism, values, rng, allow_float, owner: str) -> np.ndarray:
    """``mech.release(values)``: integer mechanisms as they are, floating-point ones only with
    ``allow_float=True`` (Mironov 2012; the message names ``allow_float`` and the exact
    alternative)."""
    if not mech.integer:  # refused here, naming the helper that was called
        check_allow_float(allow_float, f"{owner} with {type(mech).__name__}", _EXACT_HINT)
    return mech.release(values, rng=rng, allow_float=allow_float)


def _build(factory: Callable, sens: tuple[float, float]) -> Mechanism:
    """Call ``factory`` with the L1 sensitivity, then (if it is an L2 mechanism) the L2 one;
    integer mechanisms get the value rounded up to an integer."""

    def call(d: float):
        arg = int(d) if float(d).is_integer() else d
        try:
            return factory(sensitivity=arg)
        except TypeError:  # integer mechanisms refuse fractional sensitivities
            return factory(sensitivity=math.ceil(d))

    mech = call(sens[0])
    if not isinstance(mech, Mechanism):
        raise TypeError(f"the mechanism factory returned {mech!r}, not a pymc_dp Mechanism")
    if _norm_of(mech) == "l2":
        mech = call(sens[1])
    return mech


def _readonly(a) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


class NormalInverseGamma(NamedTuple):
    """Parameters of a Normal-Inverse-Gamma law: ``σ² ~ InvGamma(alpha, beta)`` and
    ``mean | σ² ~ Normal(mu, σ² precision^{-1})`` (``precision`` is ``kappa`` for a scalar
    mean, a matrix for regression coefficients).

    Examples
    --------
    The plug-in posterior of a Normal release, here with negligible noise, against the
    conjugate update by hand: ``n = 3``, ``Σx = 1.2``, ``Σ(x - x̄)² = 0.08`` and the prior
    ``(mu, kappa, alpha, beta) = (0, 1, 2, 2)`` give ``mu = 1.2 / 4``, ``precision = 1 + 3``,
    ``alpha = 2 + 3/2`` and ``beta = 2 + 0.08/2 + 3 * 0.4**2 / (2 * 4)``.

    >>> import numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import NormalInverseGamma, release_sufficient_statistics
    >>> rel = release_sufficient_statistics(np.array([0.2, 0.4, 0.6]), "normal",
    ...     bounds=(-1.0, 1.0), mechanism=pmdp.Laplace(scale=1e-9, sensitivity=3.0),
    ...     rng=np.random.default_rng(0), allow_float=True)
    >>> post = rel.plugin_posterior((0.0, 1.0, 2.0, 2.0))
    >>> isinstance(post, NormalInverseGamma), [round(float(v), 6) for v in post]
    (True, [0.3, 4.0, 3.5, 2.1])
    """

    mu: np.ndarray | float
    precision: np.ndarray | float
    alpha: float
    beta: float


def _prior(prior, names: tuple[str, ...], default=None) -> tuple:
    """A conjugate prior given as a mapping by name or as a tuple in ``names`` order."""
    if prior is None:
        if default is None:
            raise ValueError(f"this family needs prior= with {names}")
        return default
    if isinstance(prior, Mapping):
        missing = [n for n in names if n not in prior]
        extra = sorted(set(prior) - set(names))
        if missing or extra:
            raise ValueError(f"prior must name exactly {names}, got {sorted(prior)}")
        return tuple(prior[n] for n in names)
    vals = tuple(prior) if isinstance(prior, tuple | list) else (prior,)
    if len(vals) != len(names):
        raise ValueError(f"prior must give {names}, got {prior!r}")
    return vals


def _positive_prior(prior, names: tuple[str, ...], default=None) -> tuple[float, ...]:
    """Scalar positive prior parameters, by name or position."""
    vals = _prior(prior, names, default)
    return tuple(float(_positive(k, v)) for k, v in zip(names, vals, strict=True))


def _positive(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(a > 0)):
        raise ValueError(f"prior {name} must be finite and > 0, got {x!r}")
    return a


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class SufficientStatisticsRelease:
    """A released vector of noisy sufficient statistics (see the module docstring).

    Attributes
    ----------
    family : str
    value : numpy.ndarray
        The released (noisy) statistics, read-only; names in :attr:`names`.
    mechanism : Mechanism
        The mechanism that added the noise.
    n : int
        Number of records (public under replace-one neighbours).
    bounds : object
        The validated bounds (``None`` for Bernoulli, ``K`` for categorical, ``U`` for
        Poisson, ``(a, b)`` for Normal, ``((xl, xh), (yl, yh))`` for regression).
    sensitivity : tuple of float
        ``(L1, L2)`` sensitivity of the statistic under replace-one neighbours.
    names : tuple of str
    projection : tuple or None
        ``(lower, upper)`` when the data holder published the noisy statistics projected
        (clipped) to the valid region (``project=True``), else ``None``. :meth:`model`
        then conditions on the clipped value exactly (a censored :class:`pymc_dp.Release`).
    grid : float or tuple or None
        For an exact release of a real family (``grid=`` given): the grid the records were
        snapped to (``g`` for normal, ``(gx, gy)`` for regression), else ``None``.
    grid_value : numpy.ndarray or None
        With ``grid``: the released integers (the snapped statistic plus integer noise, in
        grid units); :attr:`value` is ``grid_value`` times each statistic's unit, and
        :attr:`sensitivity` is that of the integer statistic. :meth:`model` conditions on
        ``grid_value`` exactly.

    Examples
    --------
    Poisson counts bounded by ``U = 5``: the sum is released once with sensitivity ``U``.

    >>> import numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import SufficientStatisticsRelease, release_sufficient_statistics
    >>> rel = release_sufficient_statistics(np.array([2, 0, 3, 5]), "poisson", bounds=5,
    ...     mechanism=pmdp.Geometric(epsilon=0.5, sensitivity=5), rng=np.random.default_rng(0))
    >>> isinstance(rel, SufficientStatisticsRelease), rel.family, rel.n, rel.bounds
    (True, 'poisson', 4, 5)
    >>> rel.names, rel.sensitivity, rel.value.shape, rel.projection
    (('sum',), (5.0, 5.0), (1,), None)
    """

    family: str
    value: np.ndarray
    mechanism: Mechanism
    n: int
    bounds: object
    sensitivity: tuple[float, float]
    names: tuple[str, ...]
    dimension: int = field(default=1)
    projection: tuple | None = field(default=None)
    grid: object = field(default=None)
    grid_value: np.ndarray | None = field(default=None)

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee of the release (per individual with one record):
        ``mechanism.guarantee()``, at the mechanism's declared sensitivity, which is at least
        the statistic's, so the cost is never under-counted."""
        return self.mechanism.guarantee()

    def projected(self) -> np.ndarray:
        """The noisy statistics projected to the valid region (Foulds et al. eq. 16).

        Bernoulli and categorical counts are clipped to ``[0, n]``; the Poisson sum to
        ``[0, nU]``; Normal: the sum to ``[na, nb]``, then the sum of squares to
        ``[sum²/n, n max(a², b²)]`` (Cauchy-Schwarz); regression: ``X'X`` to the nearest
        positive semi-definite matrix (negative eigenvalues set to 0) and ``y'y`` to
        ``[0, n max(yl², yh²)]``. A release published projected (``project=True``) is already
        in the region and is returned as it is.
        """
        v = np.asarray(self.value, dtype=np.float64)
        n = float(self.n)
        if self.family in ("bernoulli", "categorical"):
            return np.clip(v, 0.0, n)
        if self.family == "poisson":
            return np.clip(v, 0.0, n * self.bounds)
        if self.family == "normal":
            a, b = self.bounds
            s1 = float(np.clip(v[0], n * a, n * b))
            s2 = float(np.clip(v[1], s1 * s1 / n, n * max(a * a, b * b)))
            return np.array([s1, s2])
        return _project_regression(v, self.n, self.bounds, self.dimension)

    def plugin_posterior(self, prior=None):
        """The plug-in posterior: the conjugate update with the projected noisy statistics.

        Parameters
        ----------
        prior : mapping or tuple
            Bernoulli: ``(alpha, beta)`` of a Beta prior (default ``(1, 1)``); categorical:
            ``alpha``, the Dirichlet concentration vector (default ones); Poisson:
            ``(alpha, beta)``, shape and rate of a Gamma prior; Normal: ``(mu, kappa, alpha,
            beta)`` of a Normal-Inverse-Gamma prior; regression: ``(mu, precision, alpha,
            beta)``, the coefficients' prior mean vector and precision matrix and the
            Inverse-Gamma prior of the noise variance.

        Returns
        -------
        scipy.stats frozen distribution or NormalInverseGamma
            ``beta(alpha + s, beta + f)``, ``dirichlet(alpha + counts)``,
            ``gamma(alpha + sum, scale=1 / (beta + n))``, or the Normal-Inverse-Gamma
            posterior's parameters.

        Examples
        --------
        >>> import numpy as np, pymc_dp as pmdp
        >>> from pymc_dp.releases import release_sufficient_statistics
        >>> rel = release_sufficient_statistics(
        ...     np.array([1, 0, 1, 1]), "bernoulli", mechanism=pmdp.Laplace(scale=1e-9,
        ...     sensitivity=2.0), rng=np.random.default_rng(0), allow_float=True)
        >>> [round(float(a), 6) for a in rel.plugin_posterior((1, 1)).args]
        [4.0, 2.0]
        """
        t = self.projected()
        fam = self.family
        if fam == "bernoulli":
            a, b = _positive_prior(prior, ("alpha", "beta"), (1, 1))
            return stats.beta(a + t[0], b + t[1])
        if fam == "categorical":
            (alpha,) = _prior(prior, ("alpha",), (np.ones(self.bounds),))
            alpha = _positive("alpha", alpha)
            if alpha.shape != t.shape:
                raise ValueError(f"prior alpha must have {t.size} entries, got {alpha.shape}")
            return stats.dirichlet(alpha + t)
        if fam == "poisson":
            a, b = _positive_prior(prior, ("alpha", "beta"))
            return stats.gamma(a + t[0], scale=1.0 / (b + self.n))
        if fam == "normal":
            return _normal_update(t, self.n, _prior(prior, ("mu", "kappa", "alpha", "beta")))
        return _regression_update(
            t, self.n, self.dimension, _prior(prior, ("mu", "precision", "alpha", "beta"))
        )

    def model(self, prior=None, *, name: str = "release", covariates=None):
        """The noise-aware PyMC model of this release (every family).

        Latent records ``x`` (``n`` of them) from the family with a conjugate prior on its
        parameters (``p``; ``p``; ``lam``; ``mu`` and ``v``, the Normal mean and variance), and
        ``pmdp.Release(name, T(x), mechanism, observed=value)`` where ``T`` is the statistic
        computed from the *clamped* records (``min(x, U)`` for Poisson, ``clip(x, a, b)`` for
        Normal). ``pm.sample`` then picks the data-augmentation step for ``x`` and a conjugate
        Gibbs step for the parameters; :func:`pymc_dp.privacy_report` reports the release.
        ``prior`` as in :meth:`plugin_posterior`.

        Linear regression: latent predictors ``X`` (``n x d``) and responses ``y`` (``n``),
        both private; ``y | X ~ Normal(X beta, sqrt(v))`` with the Normal-Inverse-Gamma prior
        of :meth:`plugin_posterior` (``prior = (mu, precision, alpha, beta)``: ``v ~
        InvGamma(alpha, beta)``, ``beta | v ~ Normal(mu, v precision^-1)``; no default). The
        released vector is computed from ``clip(X, xl, xh)`` and ``clip(y, yl, yh)`` in the
        release's layout (upper triangle of ``X'X`` row by row, ``X'y``, ``y'y``); no
        intercept column is added, as in the release (an intercept is a column of ``X``, see
        ``covariates``). The coefficients are sampled as ``beta_white ~ Normal(0, sqrt(v))``
        (``d``) with ``beta = mu + L^-T beta_white``, ``L L' = precision`` (the same prior),
        reported as the deterministic ``beta``; ``pm.sample`` assigns conjugate Gibbs steps to
        ``v`` and ``beta_white`` and the data-augmentation step to the records ``(X, y)``.

        Parameters
        ----------
        prior : mapping or tuple, optional
            As in :meth:`plugin_posterior` (required for Poisson, Normal and regression).
        name : str, default "release"
            Name of the :class:`pymc_dp.Release` variable.
        covariates : callable, optional
            Linear regression only: ``covariates(n, d) -> X``, called inside the model, returns
            the predictors, a PyMC random variable of shape ``(n, d)`` registered in the model
            (or a tensor built from such variables, e.g. a column of ones joined to one). Public
            predictors may be given as data (``pm.Data``, an observed variable or a constant
            tensor): then only ``y`` is latent.
            Default: independent Normal predictors with weakly informative hyperpriors centred
            in the declared box ``[xl, xh]`` (centre ``c``, half-width ``h``), per column
            ``j``: ``X_v[j] ~ InvGamma(2, h²)``, ``X_mu[j] ~ Normal(c, sqrt(X_v[j]))``,
            ``X[i, j] ~ Normal(X_mu[j], sqrt(X_v[j]))`` (conjugate Gibbs for ``X_mu, X_v``).

        Raises
        ------
        ValueError
            For an invalid ``prior`` (naming the parameter: e.g. a precision matrix that is
            not symmetric positive definite), ``covariates`` returning a tensor that is not
            2-D of shape ``(n, d)`` or reads random variables outside the model, or
            ``covariates`` given for a family without predictors.
        TypeError
            When ``covariates`` is not callable or does not return a PyTensor tensor.

        Examples
        --------
        >>> import numpy as np, pymc as pm, pymc_dp as pmdp
        >>> import pytensor.tensor as pt
        >>> from pymc_dp.releases import release_sufficient_statistics
        >>> rel = release_sufficient_statistics(np.array([1, 0, 1]), "bernoulli",
        ...     mechanism=pmdp.Geometric(epsilon=1.0, sensitivity=2),
        ...     rng=np.random.default_rng(1))
        >>> m = rel.model()
        >>> sorted(v.name for v in m.free_RVs), pmdp.privacy_report(m).total.epsilon
        (['p', 'x'], 1.0)
        >>> X = np.column_stack([np.ones(4), [0.1, 0.5, 0.9, 0.3]])
        >>> reg = release_sufficient_statistics((X, np.array([0.2, 0.4, 1.1, 0.3])),
        ...     "linear_regression", bounds=((0.0, 1.0), (-2.0, 2.0)),
        ...     mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=15.0),
        ...     rng=np.random.default_rng(2), allow_float=True)
        >>> def with_intercept(n, d):
        ...     x = pm.Uniform("x", 0.0, 1.0, shape=(n, d - 1))
        ...     return pt.concatenate([pt.ones((n, 1)), x], axis=1)
        >>> m = reg.model((np.zeros(2), np.eye(2), 2.0, 1.0), covariates=with_intercept)
        >>> sorted(v.name for v in m.free_RVs)
        ['beta_white', 'v', 'x', 'y']
        """
        from pymc_dp.releases._models import build_model

        return build_model(self, prior, name, covariates)

    def noise_aware_count_posterior(self, prior=None) -> np.ndarray:
        """``P(s | z)`` for ``s = 0..n``: the success count given a Bernoulli release.

        ``P(s | z) ∝ BetaBinomial(s; n, alpha, beta) η(z_1 - s) η(z_2 - (n - s))`` with ``η``
        the mechanism's noise density and ``(alpha, beta)`` the Beta prior (default
        ``(1, 1)``); given ``s``, ``p ~ Beta(alpha + s, beta + n - s)``. So the noise-aware
        posterior mean of ``p`` is ``Σ_s P(s | z) (alpha + s) / (alpha + beta + n)``.
        Cost ``O(n)``.

        Examples
        --------
        >>> import numpy as np, pymc_dp as pmdp
        >>> from pymc_dp.releases import release_sufficient_statistics
        >>> rel = release_sufficient_statistics(np.array([1, 1, 0]), "bernoulli",
        ...     mechanism=pmdp.Laplace(scale=1e-6, sensitivity=2.0),
        ...     rng=np.random.default_rng(0), allow_float=True)
        >>> np.round(rel.noise_aware_count_posterior(), 6)
        array([0., 0., 1., 0.])
        """
        if self.family != "bernoulli":
            raise ValueError(
                "the noise-aware posterior by enumeration is for bernoulli releases; use "
                "model() and pm.sample for the other families"
            )
        a, b = _positive_prior(prior, ("alpha", "beta"), (1, 1))
        s = np.arange(self.n + 1, dtype=np.float64)
        z = np.asarray(self.value, dtype=np.float64)
        logw = _log_beta_binomial(s, self.n, a, b)
        logw = logw + self._log_eta(z[0], s) + self._log_eta(z[1], self.n - s)
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def _log_eta(self, z: float, t: np.ndarray) -> np.ndarray:
        """Log-likelihood of one released value ``z`` given true values ``t``: the noise
        density, or for a projected release at a bound its log CDF / log survival."""
        mech = self.mechanism
        if self.projection is not None and z == self.projection[0]:
            return mech.logcdf(z - t)
        if self.projection is not None and z == self.projection[1]:
            return mech.logsf(z - t)
        return mech.logpdf(z - t)

    def sample_noise_aware_posterior(self, prior=None, size: int = 1, rng=None) -> np.ndarray:
        """Exact draws of ``p`` from the noise-aware posterior of a Bernoulli release.

        ``s`` from :meth:`noise_aware_count_posterior`, then
        ``p | s ~ Beta(alpha + s, beta + n - s)``. Cost ``O(n)`` per call (whatever ``size``);
        this is the posterior of :meth:`model` without Markov chains.

        Examples
        --------
        >>> import numpy as np, pymc_dp as pmdp
        >>> from pymc_dp.releases import release_sufficient_statistics
        >>> rel = release_sufficient_statistics(np.ones(50, dtype=int), "bernoulli",
        ...     mechanism=pmdp.Laplace(epsilon=1.0, sensitivity=2.0),
        ...     rng=np.random.default_rng(2), allow_float=True)
        >>> d = rel.sample_noise_aware_posterior(size=1000, rng=np.random.default_rng(3))
        >>> bool(d.mean() > 0.85)
        True
        """
        w = self.noise_aware_count_posterior(prior)
        a, b = _positive_prior(prior, ("alpha", "beta"), (1, 1))
        rng = np.random.default_rng(rng)
        draws_s = rng.choice(self.n + 1, size=int(size), p=w)
        return rng.beta(a + draws_s, b + self.n - draws_s)


def _log_beta_binomial(s: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    """``log BetaBinomial(s; n, a, b)`` (vectorised, ``gammaln`` form)."""
    g = special.gammaln
    return (
        g(n + 1.0)
        - g(s + 1.0)
        - g(n - s + 1.0)
        + special.betaln(s + a, n - s + b)
        - special.betaln(a, b)
    )


def _normal_update(t: np.ndarray, n: int, prior: tuple) -> NormalInverseGamma:
    """Normal-Inverse-Gamma update from ``(Σx, Σx²)``."""
    mu0 = float(np.asarray(prior[0], dtype=np.float64))
    k0, a0, b0 = _positive_prior(prior[1:], ("kappa", "alpha", "beta"))
    s1, s2 = float(t[0]), float(t[1])
    xbar = s1 / n
    ss = max(0.0, s2 - s1 * xbar)
    kn = k0 + n
    mun = (k0 * mu0 + s1) / kn
    bn = b0 + 0.5 * ss + 0.5 * k0 * n * (xbar - mu0) ** 2 / kn
    return NormalInverseGamma(mu=mun, precision=kn, alpha=a0 + 0.5 * n, beta=bn)


def _unpack_regression(t: np.ndarray, d: int):
    iu = np.triu_indices(d)
    m = len(iu[0])
    xtx = np.zeros((d, d))
    xtx[iu] = t[:m]
    xtx = xtx + np.triu(xtx, 1).T
    return xtx, t[m : m + d], float(t[m + d])


def _project_regression(v: np.ndarray, n: int, bounds, d: int) -> np.ndarray:
    xtx, xty, yty = _unpack_regression(v, d)
    w, q = np.linalg.eigh(xtx)
    xtx = (q * np.maximum(w, 0.0)) @ q.T
    yl, yh = bounds[1]
    yty = float(np.clip(yty, 0.0, n * max(yl * yl, yh * yh)))
    iu = np.triu_indices(d)
    return np.concatenate([xtx[iu], xty, [yty]])


def _regression_update(t: np.ndarray, n: int, d: int, prior: tuple) -> NormalInverseGamma:
    """Conjugate Normal-Inverse-Gamma update of ``(beta, σ²)`` from ``(X'X, X'y, y'y)``."""
    m0 = np.broadcast_to(np.asarray(prior[0], dtype=np.float64), (d,))
    lam0 = np.asarray(prior[1], dtype=np.float64)
    if lam0.shape != (d, d) or not np.all(np.isfinite(lam0)):
        raise ValueError(f"prior precision must be a finite {d}x{d} matrix")
    a0, b0 = _positive_prior(prior[2:], ("alpha", "beta"))
    xtx, xty, yty = _unpack_regression(t, d)
    lamn = xtx + lam0
    mn = np.linalg.solve(lamn, lam0 @ m0 + xty)
    quad = yty + m0 @ lam0 @ m0 - mn @ lamn @ mn
    bn = b0 + 0.5 * max(quad, 0.0)
    return NormalInverseGamma(mu=mn, precision=lamn, alpha=a0 + 0.5 * n, beta=bn)


def release_sufficient_statistics(
    data,
    family,
    *,
    mechanism,
    bounds=None,
    rng=None,
    project: bool = False,
    grid=None,
    allow_float: bool = False,
):
    """Clamp, compute the sufficient statistics, calibrate and release them once.

    Parameters
    ----------
    data : array_like
        The records: 0/1 (bernoulli), integers ``0..K-1`` (categorical), non-negative
        integers (poisson), reals (normal), or a pair ``(X, y)`` (linear_regression).
    family : str or PyMC distribution class
        ``"bernoulli"``, ``"categorical"``, ``"poisson"``, ``"normal"``,
        ``"linear_regression"`` (or ``pm.Bernoulli``, ``pm.Categorical``, ``pm.Poisson``,
        ``pm.Normal``).
    mechanism : Mechanism or callable
        A mechanism whose declared sensitivity is at least the statistic's, or a callable
        ``sensitivity -> Mechanism`` (e.g. ``functools.partial(pmdp.Geometric, epsilon=0.1)``)
        calibrated here with the exact sensitivity. Integer mechanisms (Geometric,
        DiscreteGaussian) are exact: the count families as they are, the real families with
        ``grid``. Floating-point ones (Laplace, Gaussian) need ``allow_float=True``.
    bounds : optional
        ``K`` (categorical), ``U`` (poisson: records clamped to ``[0, U]``), ``(a, b)``
        (normal: records clamped), ``((xl, xh), (yl, yh))`` (regression: every entry of ``X``
        and ``y`` clamped); none for bernoulli.
    rng : numpy.random.Generator, optional
        For simulations; ``None`` draws the noise from the operating system's secure source.
    project : bool, default False
        Publish the noisy statistics projected (clipped) to the valid region instead of the
        raw noisy values (Foulds et al. 2016, eq. 16; Zhang et al. 2016, step 4): counts
        (bernoulli, categorical) to ``[0, n]``, the Poisson sum to ``[0, n U]``. Only for
        these families, whose valid region is a box; ``ValueError`` for normal and
        linear_regression (their region couples the statistics). Post-processing: the
        privacy guarantee is unchanged. The release remembers it (:attr:`projection`), and
        ``model()`` conditions on the clipped value exactly (censored likelihood).
    grid : float or pair of float, optional
        Normal and linear_regression with an integer mechanism (the exact release): the
        records, clamped to ``bounds``, are snapped to multiples of ``grid`` (a power of two,
        e.g. ``2**-8``; a pair ``(gx, gy)`` for the regression's ``X`` and ``y``), the
        statistic of the snapped records is computed in integers (normal: ``(w Σk, Σk²)`` with
        ``k = r(x / g)`` and the weight ``w = max|k|``; regression: ``kx'kx``, ``kx'ky``,
        ``ky'ky``) and released with the integer mechanism at the integer statistic's exact
        sensitivity (:attr:`SufficientStatisticsRelease.grid_value`); :attr:`value` is in the
        data's units. The guarantee covers the snapping (it is part of the statistic).
    allow_float : bool, default False
        Opt in to a floating-point mechanism (Laplace, Gaussian) for the release: its low-order
        bits leak the data (Mironov 2012), so without the opt-in a float mechanism raises
        ``ValueError``. For simulations.

    Returns
    -------
    SufficientStatisticsRelease

    Raises
    ------
    ValueError
        For invalid data or bounds, an unknown family, an integer mechanism on real
        statistics without ``grid``, a floating-point mechanism without ``allow_float=True``,
        a mechanism whose declared sensitivity is below the statistic's, or
        ``project=True`` for a family whose valid region is not a box.

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import release_sufficient_statistics
    >>> x = np.random.default_rng(0).binomial(1, 0.3, size=1000)
    >>> rel = release_sufficient_statistics(
    ...     x, "bernoulli", mechanism=functools.partial(pmdp.Geometric, epsilon=0.1),
    ...     rng=np.random.default_rng(1))
    >>> rel.mechanism.sensitivity, rel.guarantee().epsilon, rel.names
    (2, 0.1, ('successes', 'failures'))
    >>> y = np.random.default_rng(2).normal(0.3, 0.2, size=500)
    >>> exact = release_sufficient_statistics(
    ...     y, "normal", bounds=(-1.0, 1.0), grid=2**-6,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=1.0),
    ...     rng=np.random.default_rng(3))
    >>> exact.grid, exact.grid_value.dtype, exact.guarantee().epsilon
    (0.015625, dtype('int64'), 1.0)
    >>> small = release_sufficient_statistics(
    ...     np.ones(3, dtype=int), "bernoulli", mechanism=pmdp.Geometric(epsilon=0.2,
    ...     sensitivity=2), rng=np.random.default_rng(4), project=True)
    >>> small.projection, bool(np.all((small.value >= 0) & (small.value <= 3)))
    ((0, 3), True)
    """
    fam = family_of(family)
    b = fam.bounds(bounds)
    records = fam.records(data, b)
    n = fam.n(records)
    box = fam.box(b, n) if project else None
    if project and box is None:
        raise ValueError(
            f"project=True needs a valid region that is a box (each statistic clipped to one "
            f"interval), which the {fam.name} family does not have (its region couples the "
            "statistics, e.g. the sum of squares is bounded below by sum^2/n); release "
            "without projecting and use plugin_posterior(), which projects"
        )
    regression = isinstance(fam, LinearRegression)
    d = int(records[0].shape[1]) if regression else 1
    names = fam.names(b, d) if regression else fam.names(b)
    grid_value = None
    if grid is not None:
        if fam.integer:
            raise ValueError(
                f"grid= is for the real families (normal, linear_regression); the {fam.name} "
                "statistics are integers already: leave grid out"
            )
        grid, gridder = _gridder(fam, b, grid)
        l1, l2 = gridder.sensitivity(d) if regression else gridder.sensitivity()
        sens = (float(l1), float(l2))
        source = f"bounds={bounds!r} and grid={grid!r}"
        mech = _calibrate(mechanism, sens, integer_stat=True, source=source)
        if not mech.integer:
            raise ValueError(
                f"grid= releases the snapped records' integer statistic with an integer "
                f"mechanism, not {type(mech).__name__}: use {_EXACT_HINT}"
            )
        stat = gridder.statistic(records)
        grid_value = mech.release(stat, rng=rng)
        units = gridder.units(d) if regression else gridder.units()
        value = grid_value.astype(np.float64) * units
    else:
        sens = fam.sensitivity(b, d) if regression else fam.sensitivity(b)
        mech = _calibrate(mechanism, sens, fam.integer, source=f"bounds={bounds!r}")
        owner = "release_sufficient_statistics"
        value = release_values(mech, fam.statistic(records, b), rng, allow_float, owner)
    if box is not None:
        value = np.clip(value, box[0], box[1]).astype(value.dtype)
    return SufficientStatisticsRelease(
        family=fam.name,
        value=_readonly(value),
        mechanism=mech,
        n=n,
        bounds=b,
        sensitivity=sens,
        names=names,
        dimension=d,
        projection=box,
        grid=grid,
        grid_value=None if grid_value is None else _readonly(grid_value),
    )


def _gridder(fam, bounds, grid):
    """The validated grid and the snapping helper of a real family."""
    if isinstance(fam, LinearRegression):
        if isinstance(grid, tuple | list):
            if len(grid) != 2:
                raise ValueError(f"grid must be g or a pair (gx, gy), got {grid!r}")
            g = (as_grid(grid[0], "grid[0] (x)"), as_grid(grid[1], "grid[1] (y)"))
        else:
            g = (as_grid(grid),) * 2
        return g, RegressionGrid(bounds, g)
    g = as_grid(grid)
    return g, NormalGrid(bounds, g)
