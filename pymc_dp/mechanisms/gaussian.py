"""The Gaussian mechanism, on floating-point numbers.

``M(x) = x + Z`` with ``Z ~ N(0, σ²)``. All parameterizations reduce to ``σ``:

* ``sigma`` given directly;
* ``(epsilon, delta)``: the smallest ``σ`` with ``δ(ε; σ) <= δ`` for the exact (ε, δ) curve of
  the analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8 and Alg. 1), valid for every
  ``ε > 0`` (the classic ``σ = Δ sqrt(2 ln(1.25/δ))/ε`` is only valid for ``ε < 1`` and is
  looser); see :func:`pymc_dp.accounting.analytic_gaussian_sigma`;
* ``rho``: ρ-zCDP with ``σ = Δ / sqrt(2ρ)`` (Bun & Steinke 2016, Prop. 1.6).

Whatever the parameterization, the mechanism is ``ρ = Δ²/(2σ²)``-zCDP, and (ε, δ(ε))-DP for
every ε ≥ 0 with δ(ε) from :meth:`Gaussian.delta_at`.

.. warning::

    Floating-point Gaussian noise is **not** a safe release mechanism: the doubles that
    ``x + Z`` can produce depend on ``x``, so the low-order bits of a release leak the input
    (Mironov 2012, "On significance of the least significant bits for differential privacy",
    CCS). Use :class:`pymc_dp.DiscreteGaussian` (or :class:`pymc_dp.Geometric`) for real
    releases; this class exists to *model* releases made with a Gaussian mechanism, and for
    simulation.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np
import pytensor.tensor as pt

from pymc_dp._cache import lazy_module
from pymc_dp._validation import as_positive_finite, as_unit_open, exactly_one
from pymc_dp.accounting import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    gaussian_delta_for_distance,
    gaussian_rho,
    gaussian_sigma_from_rho,
    quadratic_rho,
)
from pymc_dp.kernels import noise_logpdf as _noise_logpdf
from pymc_dp.kernels.exact_sampling import check_rng
from pymc_dp.mechanisms import _tails
from pymc_dp.mechanisms._float_release import secure_signed_uniforms
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee

__all__ = ["Gaussian"]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
special = lazy_module("scipy.special")

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: allowed range of sigma: noise draws stay finite (|Z| <= about 40 sigma)
SIGMA_MIN, SIGMA_MAX = 1e-300, 1e300


#: the density lives in the kernels (its kind is known there: kernels cache on disk)
_gaussian_logpdf = _noise_logpdf.gaussian_logpdf


@numba.njit(cache=True)
def _gaussian_censored(x, row):  # pragma: no cover - compiled
    # row = [side, *numba_params]: side 0 interior, -1 at the lower bound, +1 at the upper
    side = row[0]
    params = row[1:]
    if side == 0.0:
        return _gaussian_logpdf(x, params)
    if side < 0.0:
        return _tails.gaussian_logcdf(x, params)
    return _tails.gaussian_logsf(x, params)


class Gaussian(Mechanism):
    """Gaussian mechanism ``M(x) = x + N(0, σ²)``; ``ρ = Δ²/(2σ²)``-zCDP, exact (ε, δ) curve.

    .. warning::

        Floating-point noise leaks through the least significant bits of the release
        (Mironov 2012, "On significance of the least significant bits for differential
        privacy"). For real releases use :class:`pymc_dp.DiscreteGaussian` or
        :class:`pymc_dp.Geometric`; use this class to model Gaussian releases.

    Parameters
    ----------
    sigma : float, optional
        Noise standard deviation ``σ > 0`` (the core parameter).
    epsilon, delta : float, optional
        Calibrate ``σ`` by the analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8): the
        smallest ``σ`` (rounded towards more noise) with ``δ(ε; σ) <= δ``. ``ε > 0`` (any size)
        and ``δ`` in (0, 1); both must be given together.
    rho : float, optional
        zCDP parameter ``ρ > 0``: ``σ = Δ / sqrt(2ρ)`` (Bun & Steinke 2016).
    sensitivity : float, default 1.0
        L2 sensitivity ``Δ > 0``.

    Exactly one parameterization: ``sigma``, ``(epsilon, delta)`` or ``rho``. The resulting
    ``σ`` must lie in ``[1e-300, 1e300]`` (beyond it noise draws overflow) and ``ρ`` must be
    a finite positive double; otherwise ``ValueError`` names the parameter given.

    Notes
    -----
    :meth:`guarantee` returns ``PrivacyGuarantee(epsilon, delta, rho)`` for the
    ``(epsilon, delta)`` parameterization and ``PrivacyGuarantee(inf, 0.0, rho)`` otherwise
    (a Gaussian mechanism has no finite pure ε); use :meth:`delta_at` / :meth:`epsilon_at` for
    points of its exact (ε, δ) curve. The privacy map ``map(d)`` scales ``ρ`` as
    ``(d/Δ)²``. The noise law as a PyMC distribution (:meth:`noise_dist`) is
    ``pm.Normal.dist(0, σ)``. The release with ``rng=None`` draws 53-bit uniforms from
    ``os.urandom`` (the OS CSPRNG) and maps them through the normal quantile function
    (``scipy.special.ndtri``); with a ``numpy.random.Generator`` draws are reproducible and meant
    for simulation only.

    Examples
    --------
    >>> from pymc_dp.mechanisms.gaussian import Gaussian
    >>> m = Gaussian(epsilon=1.0, delta=1e-5)
    >>> round(m.sigma, 6)
    3.730632
    >>> m.delta_at(1.0) <= 1e-5
    True
    >>> Gaussian(rho=0.5, sensitivity=2.0).sigma
    2.0
    >>> Gaussian(sigma=2.0, sensitivity=1.0).guarantee()
    PrivacyGuarantee(epsilon=inf, delta=0.0, rho=0.125)
    >>> Gaussian(sigma=2.0).guarantee().claimed  # a noise scale alone claims nothing
    False
    """

    family = "gaussian"
    exact_alternative = (
        "pmdp.DiscreteGaussian(...) for integer statistics or pmdp.Discretized(grid=..., "
        "rho=...) for real ones"
    )
    keyword_forms = ("epsilon=..., delta=...", "rho=...", "sigma=...")
    integer = False

    def __init__(self, *, sigma=None, epsilon=None, delta=None, rho=None, sensitivity=1.0):
        self.sensitivity = as_positive_finite("sensitivity", sensitivity)
        pair = None if (epsilon is None and delta is None) else (epsilon, delta)
        which = exactly_one("Gaussian", sigma=sigma, epsilon_delta=pair, rho=rho)
        self._epsilon = None
        self._delta = None
        if which == "sigma":
            self.sigma = as_positive_finite("sigma", sigma)
        elif which == "rho":
            r = as_positive_finite("rho", rho)
            # Δ / sqrt(2ρ), raised by ulps until Δ²/(2σ²) <= ρ exactly
            self.sigma = gaussian_sigma_from_rho(r, self.sensitivity)
        else:
            if epsilon is None or delta is None:
                raise ValueError(
                    "Gaussian: epsilon and delta must be given together, "
                    f"got epsilon={epsilon!r}, delta={delta!r}"
                )
            eps = as_positive_finite("epsilon", epsilon)
            dlt = as_unit_open("delta", delta)
            # raises ValueError naming epsilon and delta when no sigma can be calibrated
            self.sigma = analytic_gaussian_sigma(eps, dlt, self.sensitivity)
            self._epsilon, self._delta = eps, dlt
        if not SIGMA_MIN <= self.sigma <= SIGMA_MAX:
            raise ValueError(
                f"Gaussian: sigma must lie in [1e-300, 1e300], got sigma={self.sigma!r} from "
                f"{which}={sigma if which == 'sigma' else rho if which == 'rho' else pair!r}"
            )
        try:  # accounting (rounded up): rho must be a finite positive double
            self._rho = gaussian_rho(self.sigma, self.sensitivity)
        except ValueError:
            raise ValueError(
                f"Gaussian parameters out of range: sigma={self.sigma!r} (from {which}), "
                f"sensitivity={self.sensitivity!r} give a rho that is not a finite positive "
                "double"
            ) from None
        self._freeze()

    def _law_key(self) -> tuple:
        return (self.sigma,)

    # ---- privacy accounting -----------------------------------------------------------------
    @property
    def rho(self) -> float:
        """zCDP parameter ``ρ = Δ²/(2σ²)`` (Bun & Steinke 2016, Prop. 1.6)."""
        return self._rho

    def _map(self, d) -> PrivacyGuarantee:
        """``ρ(d) = d²/(2σ²)``; with the (ε, δ) parameterization also ``(ε, δ(d))``.

        ``δ(d)`` is the stated δ at the sensitivity, and otherwise the exact curve at ``ε``
        for a change of size ``d`` (Balle & Wang 2018, Thm. 8) bounded from above, so that the
        map is monotone (:func:`pymc_dp.accounting.gaussian_delta_for_distance`). Without an
        (ε, δ) statement the result is ``(inf, 0, ρ(d))``.
        """
        rho = quadratic_rho(Fraction(self.sigma) ** 2, d)
        if self._epsilon is None:
            return PrivacyGuarantee(epsilon=math.inf, delta=0.0, rho=rho)
        stated = (self.sensitivity, self._delta)
        delta = gaussian_delta_for_distance(self._epsilon, self.sigma, d, stated)
        return PrivacyGuarantee(epsilon=self._epsilon, delta=delta, rho=rho)

    def delta_at(self, epsilon) -> float:
        """Exact ``δ(ε)`` for this σ (Balle & Wang 2018, Thm. 8).

        See :func:`pymc_dp.accounting.analytic_gaussian_delta`.
        """
        return analytic_gaussian_delta(epsilon, self.sigma, self.sensitivity)

    def epsilon_at(self, delta) -> float:
        """Smallest ``ε`` with ``δ(ε) <= delta`` for this σ (root find, rounded up).

        See :func:`pymc_dp.accounting.analytic_gaussian_epsilon`.
        """
        return analytic_gaussian_epsilon(delta, self.sigma, self.sensitivity)

    # ---- noise law ----------------------------------------------------------------------------
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Draw N(0, σ²) noise of shape ``size``.

        ``rng=None``: two words from ``os.urandom`` per draw: a random sign times
        ``σ isf(u/2)`` (``isf = -ndtri``), ``|Z| = isf(U/2)`` having the law of a standard
        normal's modulus, with ``u`` uniform on ``(0, 1)`` at 52 significant bits down to
        ``2^-65`` (:func:`~pymc_dp.mechanisms._float_release.uniform_from_two_words`): the
        largest ``|Z|`` is about ``9.2σ`` and the tail beyond has mass ``2^-65``, drawn just
        inside it (a one-word ``ndtri(u)`` stopped at ``8.3σ``, tail mass about ``6e-17``).
        Otherwise ``rng.normal``.
        """
        if rng is None:
            sign, u, shape = secure_signed_uniforms(size)
            return (self.sigma * sign * -special.ndtri(0.5 * u)).reshape(shape)
        check_rng(rng)
        return rng.normal(0.0, self.sigma, size=size)

    def logpdf(self, x) -> np.ndarray:
        """``log φ_σ(x) = -x²/(2σ²) - log σ - ½ log 2π``."""
        z = np.asarray(x).astype(np.float64) / self.sigma
        with np.errstate(over="ignore", under="ignore"):
            return -0.5 * z * z - (math.log(self.sigma) + _HALF_LOG_2PI)

    def logpdf_pt(self, x):
        """The log density as a float64 PyTensor graph."""
        x = pt.as_tensor_variable(x).astype("float64")
        s = pt.as_tensor_variable(np.float64(self.sigma))
        c = pt.as_tensor_variable(np.float64(math.log(self.sigma) + _HALF_LOG_2PI))
        z = x / s
        return np.float64(-0.5) * z * z - c

    def logcdf(self, x) -> np.ndarray:
        """``log P(Y <= x) = log Phi(x / sigma)``, stable deep in both tails.

        Examples
        --------
        >>> from pymc_dp.mechanisms.gaussian import Gaussian
        >>> from scipy.special import log_ndtr
        >>> bool(np.isclose(Gaussian(sigma=2.0).logcdf(-80.0), log_ndtr(-40.0), rtol=1e-14))
        True
        """
        return _tails.vectorized(_tails.gaussian_logcdf, x, self.numba_params)

    def logsf(self, x) -> np.ndarray:
        """``log P(Y >= x) = logcdf(-x)`` (symmetric law)."""
        return _tails.vectorized(_tails.gaussian_logcdf, x, self.numba_params, survival=True)

    def logcdf_pt(self, x):
        """``log Phi(x / sigma)`` as a float64 PyTensor graph: ``log1p(-erfc(u/sqrt2)/2)``
        for ``u >= -1``, ``log(erfcx(-u/sqrt2)/2) - u^2/2`` below (branches on clipped
        inputs, so both stay finite)."""
        u = pt.as_tensor_variable(x).astype("float64") / np.float64(self.sigma)
        r2 = np.float64(math.sqrt(2.0))
        lo = pt.minimum(u, np.float64(-1.0))
        hi = pt.maximum(u, np.float64(-1.0))
        below = pt.log(np.float64(0.5) * pt.erfcx(-lo / r2)) - np.float64(0.5) * lo * lo
        above = pt.log1p(np.float64(-0.5) * pt.erfc(hi / r2))
        return pt.switch(pt.lt(u, np.float64(-1.0)), below, above)

    def logsf_pt(self, x):
        """``log P(Y >= x)`` as a float64 PyTensor graph."""
        return self.logcdf_pt(-pt.as_tensor_variable(x).astype("float64"))

    @property
    def numba_logcdf(self):
        """``f(x, params) = log Phi(x / params[0])`` (numba njit)."""
        return _tails.gaussian_logcdf

    @property
    def numba_logsf(self):
        """``f(x, params) = log P(Y >= x)`` (numba njit)."""
        return _tails.gaussian_logsf

    @property
    def numba_censored_logpdf(self):
        """The censored kernel ``f(x, [side, *numba_params])`` (numba njit, module level);
        ``None`` for a subclass that changed the numba density, tails or parameters."""
        return self._kernel_if_own(Gaussian, _gaussian_censored)

    @property
    def noise_variance(self) -> float:
        """``sigma^2``."""
        return float(self.sigma) ** 2

    @property
    def numba_logpdf(self):
        """``f(x, params) = -½ (x/σ)² - log σ - ½ log 2π`` with ``params = [σ]`` (numba njit)."""
        return _gaussian_logpdf

    @property
    def numba_params(self) -> np.ndarray:
        """``[σ]`` as float64."""
        return np.array([self.sigma], dtype=np.float64)

    def __repr__(self) -> str:
        g = self.guarantee()
        if g.epsilon == math.inf:
            return (
                f"Gaussian(sigma={self.sigma:.6g}, rho={g.rho:.6g}, sensitivity={self.sensitivity})"
            )
        return super().__repr__()
