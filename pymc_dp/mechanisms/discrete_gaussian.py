r"""The discrete Gaussian mechanism (Canonne, Kamath & Steinke 2020).

``M(x) = x + Y`` for integer ``x``, with :math:`Y \sim \mathcal{N}_{\mathbb{Z}}(0, \sigma^2)`,
:math:`P(Y = k) \propto e^{-k^2/(2\sigma^2)}`.

Privacy accounting (kept apart from the draw):

* zCDP: :math:`\rho = \Delta^2/(2\sigma^2)` (CKS 2020, Theorem 4), for integer sensitivity
  :math:`\Delta`; calibration from ``rho`` is the closed form :math:`\sigma^2 = \Delta^2/(2\rho)`,
  evaluated as an exact rational.
* (epsilon, delta): the exact curve of CKS 2020, Theorem 7,
  :math:`\delta(\epsilon) = P[Y > \epsilon\sigma^2/\Delta - \Delta/2] - e^\epsilon
  P[Y > \epsilon\sigma^2/\Delta + \Delta/2]`, summed stably over the integers
  (:func:`pymc_dp.accounting.discrete_gaussian_delta`). Calibration from ``(epsilon, delta)``
  finds the smallest sigma with :math:`\delta(\epsilon;\sigma) \le 0.999999999\,\delta` by
  bisection on :math:`\log\sigma` to a relative tolerance of 1e-12, returning the upper end of
  the bracket (the margin 1e-9 covers the float error of the sum), then checks the requested
  guarantee at the sampled sigma and raises sigma further if it were ever violated.

Exact sampling and rationals. The noise is drawn exactly in integer arithmetic
(:mod:`pymc_dp.kernels.discrete_gaussian`, CKS 2020 Algorithm 3), which needs
:math:`\sigma^2` rational. The mechanism samples :math:`\sigma_*^2 = t m / d \ge \sigma^2`, the
best rational from above that keeps the sampler inside int64
(:func:`~pymc_dp.kernels.discrete_gaussian.gaussian_rational`): more noise, never less.

* Exact binary values with small denominators (``sigma=2.0``, ``rho=0.125``, ``0.5`` ...) are
  kept exactly.
* Otherwise, for ``sigma >= 1e-3``, the relative excess of :math:`\sigma_*^2` is below 2e-8: near
  that bound when ``sigma**2 / t`` lies within an ulp of a fraction with a small denominator
  (``rho=0.3``, ``sigma=1e6``), typically about ``2e-16 * sigma`` otherwise (the denominator
  ``d`` must stay below ``3e9 / (42 sigma)``).
* Below ``sigma = 1e-3`` (the noise is then 0 except with probability below
  :math:`e^{-500000}`) the excess can be larger.
* Sigma above ``1e7`` is refused (``ValueError``): the int64 sampler cannot represent it.
  Sigma below ``1e-6`` (whatever the parameterization) is refused too: the noise is then 0
  except with probability below :math:`e^{-10^{11}}`, and ``rho`` would overflow a double.
* The sensitivity is at most ``2**62``. Calibration from ``(epsilon, delta)`` runs a bounded
  number of steps: it returns the smallest sigma in ``[1e-6, 1e7]`` meeting the target, or
  raises ``ValueError`` naming ``epsilon`` and ``delta`` when even ``sigma = 1e7`` does not.

Every reported quantity (``sigma``, ``sigma2``, ``rho``, the ``delta`` of ``guarantee()``,
``delta_at``, ``epsilon_at``, the log pmf and ``noise_dist``) describes the law actually
sampled, :math:`\sigma_*`. The privacy map ``map(d)`` (integer ``d``) scales ``rho`` as
``(d / sensitivity)**2`` and evaluates the exact delta curve for sensitivity ``d``; all
formulas are in :mod:`pymc_dp.accounting`. The noise law as a PyMC distribution
(:meth:`DiscreteGaussian.noise_dist`) is ``DiscreteNormal.dist(sigma)``.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
>>> m = DiscreteGaussian(sigma=2.0, sensitivity=1)
>>> m.guarantee()
PrivacyGuarantee(epsilon=inf, delta=0.0, rho=0.125)
>>> DiscreteGaussian(sigma=2.0).guarantee().claimed  # no sensitivity declared: no claim
False
>>> DiscreteGaussian(rho=0.5, sensitivity=2).sigma2
Fraction(4, 1)
>>> m2 = DiscreteGaussian(epsilon=1.0, delta=1e-6)
>>> g = m2.guarantee()
>>> g.epsilon, bool(0.999e-6 < g.delta <= 1e-6)
(1.0, True)
>>> m2.release([3, 10], rng=np.random.default_rng(0)).dtype
dtype('int64')
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numba
import numpy as np
import pytensor.tensor as pt

from pymc_dp._validation import (
    _as_real,
    as_positive_finite,
    as_unit_open,
    exactly_one,
)
from pymc_dp.accounting import (
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_sigma,
    discrete_gaussian_sigma2_from_rho,
    quadratic_rho,
)
from pymc_dp.kernels import discrete_gaussian as _dg
from pymc_dp.mechanisms import _tails
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee, as_integer_sensitivity

__all__ = ["DiscreteGaussian"]

#: largest sigma the exact int64 sampler supports
SIGMA_MAX = 1e7
#: smallest sigma accepted (below it the noise is 0 except with probability < exp(-1e11))
SIGMA_MIN = 1e-6


def _as_epsilon_arg(epsilon) -> float:
    if isinstance(epsilon, numbers.Integral) and not isinstance(epsilon, bool | np.bool_):
        if epsilon > 2**1023:
            return math.inf  # larger than any double: delta(epsilon) = 0
    e = _as_real("epsilon", epsilon)
    if not e >= 0.0:  # NaN fails
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return e


@numba.njit(cache=True)
def _dg_censored(x, row):  # pragma: no cover - compiled
    # row = [side, *numba_params]: side 0 interior, -1 at the lower bound, +1 at the upper
    side = row[0]
    params = row[1:]
    if side == 0.0:
        return _dg.numba_logpmf(x, params)
    if side < 0.0:
        return _tails.dg_logcdf(x, params)
    return _tails.dg_logsf(x, params)


class DiscreteGaussian(Mechanism):
    r"""Discrete Gaussian mechanism; give ``sigma``, ``(epsilon, delta)`` or ``rho``.

    Parameters
    ----------
    sigma : float, optional
        Scale of the discrete Gaussian, in ``[1e-6, 1e7]``.
    epsilon, delta : float, optional
        Target (epsilon, delta)-DP, given together; ``epsilon > 0`` finite, ``0 < delta < 1``.
    rho : float, optional
        Target rho-zCDP, finite and > 0.
    sensitivity : int, default 1
        L2 (= L1 in one dimension) sensitivity: a positive integer at most ``2**62``. A float
        holding a whole number (``2.0``) is taken as that integer; ``1.5`` is refused with
        ``TypeError`` (the guarantees of CKS 2020 assume integer sensitivity).

    Attributes
    ----------
    sigma2 : fractions.Fraction
        The exact variance parameter of the sampled law (``>=`` the requested one).
    sigma : float
        ``sqrt(sigma2)`` as a float.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
    >>> m = DiscreteGaussian(sigma=3.0, sensitivity=2)
    >>> m.sigma2, m.sigma
    (Fraction(9, 1), 3.0)
    >>> round(m.guarantee().rho, 12)  # sensitivity**2 / (2 sigma**2)
    0.222222222222
    >>> m.release(np.array([10, 20]), rng=np.random.default_rng(0)).dtype
    dtype('int64')
    """

    family = "discrete_gaussian"
    keyword_forms = ("epsilon=..., delta=...", "rho=...", "sigma=...")
    integer = True

    def __init__(self, *, sigma=None, epsilon=None, delta=None, rho=None, sensitivity=1):
        self.sensitivity = as_integer_sensitivity(sensitivity)  # 2.0 -> 2; 1.5 refused
        pair = None if (epsilon is None and delta is None) else (epsilon, delta)
        which = exactly_one("DiscreteGaussian", sigma=sigma, epsilon_delta=pair, rho=rho)
        self._epsilon = None
        sens = self.sensitivity
        if which == "sigma":
            s = as_positive_finite("sigma", sigma)
            if not SIGMA_MIN <= s <= SIGMA_MAX:
                raise ValueError(f"sigma must lie in [1e-06, {SIGMA_MAX:g}], got {sigma!r}")
            req = Fraction(s) ** 2
        elif which == "rho":
            req = discrete_gaussian_sigma2_from_rho(rho, sens)
            if not Fraction(SIGMA_MIN) ** 2 <= req <= Fraction(SIGMA_MAX) ** 2:
                raise ValueError(
                    f"rho={rho!r} with sensitivity={sens} gives sigma = sensitivity / "
                    f"sqrt(2 rho) outside [1e-06, {SIGMA_MAX:g}]"
                )
        else:
            if epsilon is None or delta is None:
                raise ValueError(
                    "DiscreteGaussian: epsilon and delta must be given together, "
                    f"got epsilon={epsilon!r}, delta={delta!r}"
                )
            eps = as_positive_finite("epsilon", epsilon)
            dlt = as_unit_open("delta", delta)
            sigma_range = (SIGMA_MIN, SIGMA_MAX)
            req = Fraction(discrete_gaussian_sigma(eps, dlt, sens, sigma_range=sigma_range)) ** 2
        self._set_sigma2(req)
        if which == "epsilon_delta":
            # the sampled sigma is >= the calibrated one; make sure the guarantee holds there
            while not discrete_gaussian_delta(eps, self.sigma, sens) <= dlt:  # pragma: no cover
                self._set_sigma2(self._sigma2 * Fraction(1 + 2**-30))
            self._epsilon = eps
        self._freeze()

    def _law_key(self) -> tuple:
        return (self._sigma2,)

    def _set_sigma2(self, req: Fraction) -> None:
        t, m, d, ymax = _dg.gaussian_rational(req)
        self._params = (t, m, d, ymax)
        self._sigma2 = Fraction(t * m, d)
        self.sigma = math.sqrt(float(self._sigma2))
        self._rho = quadratic_rho(self._sigma2, self.sensitivity)

    # ---- privacy accounting -------------------------------------------------------------------
    @property
    def sigma2(self) -> Fraction:
        """Exact ``sigma**2`` of the sampled law."""
        return self._sigma2

    @property
    def rho(self) -> float:
        """``rho = sensitivity**2 / (2 sigma**2)`` (CKS 2020, Theorem 4)."""
        return self._rho

    def _map(self, d) -> PrivacyGuarantee:
        """``rho(d) = d**2 / (2 sigma**2)`` (CKS 2020, Theorem 4, integer ``d``); with the
        (epsilon, delta) parameterization also ``delta(epsilon)`` of the exact curve for
        sensitivity ``d`` (CKS 2020, Theorem 7) at the sampled sigma (``<=`` the target at the
        sensitivity), else ``(inf, 0, rho)``.
        """
        rho = quadratic_rho(self._sigma2, d)
        if self._epsilon is None:
            return PrivacyGuarantee(epsilon=math.inf, delta=0.0, rho=rho)
        delta = discrete_gaussian_delta(self._epsilon, self.sigma, int(d))
        return PrivacyGuarantee(epsilon=self._epsilon, delta=delta, rho=rho)

    def delta_at(self, epsilon) -> float:
        """Exact ``delta(epsilon)`` (CKS 2020, Theorem 7) for ``epsilon >= 0``."""
        e = _as_epsilon_arg(epsilon)
        if e == math.inf:
            return 0.0
        return discrete_gaussian_delta(e, self.sigma, self.sensitivity)

    def epsilon_at(self, delta) -> float:
        """Smallest ``epsilon`` with ``delta(epsilon) <= delta``, rounded up (rtol 1e-12).

        See :func:`pymc_dp.accounting.discrete_gaussian_epsilon`.
        """
        return discrete_gaussian_epsilon(delta, self.sigma, self.sensitivity)

    # ---- noise law ----------------------------------------------------------------------------
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Exact integer noise draws (CKS 2020 Algorithm 3); ``rng=None`` is the secure source."""
        return _dg.sample_discrete_gaussian(*self._params, size, rng=rng)

    def logpdf(self, x) -> np.ndarray:
        """Log pmf of the noise at ``x`` (``-inf`` off the integers)."""
        return _dg.logpmf(x, self.sigma)

    def logpdf_pt(self, x):
        """Log pmf of the noise as a float64 PyTensor graph."""
        return _dg.logpmf_pt(x, np.float64(self.sigma))

    def logcdf(self, x) -> np.ndarray:
        """``log P(Y <= x)``: an exact partial sum of the tail with a certified geometric
        bound on what is left out (below 1e-17 relative), or Euler-Maclaurin for
        ``sigma >= 10`` near the centre; see :mod:`pymc_dp.mechanisms._tails`.

        Examples
        --------
        >>> from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
        >>> m = DiscreteGaussian(sigma=1.0)
        >>> k = np.arange(-40, 1)
        >>> p = np.exp(m.logpdf(k))
        >>> bool(np.isclose(m.logcdf(0), np.log(p.sum()), rtol=1e-14))
        True
        """
        return _tails.vectorized(_tails.dg_logcdf, x, self.numba_params)

    def logsf(self, x) -> np.ndarray:
        """``log P(Y >= x) = logcdf(-x)`` (symmetric law, any real ``x``)."""
        return _tails.vectorized(_tails.dg_logcdf, x, self.numba_params, survival=True)

    def logcdf_pt(self, x):
        """``log P(Y <= x)`` as a float64 PyTensor graph
        (:func:`pymc_dp.kernels.discrete_gaussian.logcdf_pt`; ``x`` floored)."""
        return _dg.logcdf_pt(pt.as_tensor_variable(x).astype("float64"), np.float64(self.sigma))

    def logsf_pt(self, x):
        """``log P(Y >= x) = log P(Y <= -x)`` as a float64 PyTensor graph."""
        return self.logcdf_pt(-pt.as_tensor_variable(x).astype("float64"))

    @property
    def numba_logcdf(self):
        """``f(x, params) = log P(Y <= x)`` with ``params`` from :attr:`numba_params`."""
        return _tails.dg_logcdf

    @property
    def numba_logsf(self):
        """``f(x, params) = log P(Y >= x)``."""
        return _tails.dg_logsf

    @property
    def numba_censored_logpdf(self):
        """The censored kernel ``f(x, [side, *numba_params])`` (numba njit, module level);
        ``None`` for a subclass that changed the numba density, tails or parameters."""
        return self._kernel_if_own(DiscreteGaussian, _dg_censored)

    @property
    def noise_variance(self) -> float:
        """The discrete Gaussian's variance (:func:`pymc_dp.kernels.discrete_gaussian.variance`)."""
        return _dg.variance(self.sigma)

    @property
    def numba_logpdf(self):
        """``f(x, params)`` with ``params`` from :attr:`numba_params`."""
        return _dg.numba_logpmf

    @property
    def numba_params(self) -> np.ndarray:
        """``np.array([sigma, log Z(sigma)])`` (normaliser precomputed)."""
        return np.array([self.sigma, float(_dg.log_normalizer(self.sigma))], dtype=np.float64)

    def __repr__(self) -> str:
        g = self.guarantee()
        if g.epsilon == math.inf:
            return (
                f"DiscreteGaussian(sigma={self.sigma:.6g}, rho={g.rho:.6g}, "
                f"sensitivity={self.sensitivity})"
            )
        return super().__repr__()
