r"""The two-sided geometric (discrete Laplace) mechanism.

``M(x) = x + Y`` for integer ``x``, with :math:`P(Y = k) = \frac{1-\alpha}{1+\alpha}\alpha^{|k|}`
(Ghosh et al. 2012; Schein et al. 2019, eq. 6).

Privacy accounting (kept apart from the draw). For integer inputs at L1 distance at most
:math:`\Delta`, the pmf ratio is :math:`\alpha^{|k - x|}/\alpha^{|k - x'|} \le \alpha^{-\Delta}`,
so the mechanism is :math:`\epsilon`-DP with :math:`\epsilon = \Delta\ln(1/\alpha)`, tight at
the events :math:`\{Y \le x\}` (and their mirror images). Schein et al. (2019, Theorem 1): for any
precision :math:`N` it is :math:`(N, N\ln(1/\alpha))`-limited-precision locally private
(:meth:`Geometric.limited_precision`).

Exact sampling and rationals. The noise is drawn exactly in integer arithmetic
(:func:`pymc_dp.kernels.discrete_laplace.sample_discrete_laplace`, CKS 2020 Algorithm 2), which
needs
:math:`\ln(1/\alpha) = s/t` rational. The mechanism therefore samples
:math:`\alpha^* = e^{-s/t}` where ``s/t`` is the best rational approximation *from below* (less
privacy loss, more noise) of the requested rate with ``s, t <= 2**61``:

* ``epsilon`` given: the rate is ``Fraction(epsilon) / sensitivity`` (the float's exact binary
  value); it is used exactly whenever its numerator and denominator fit, which covers every
  epsilon that is a short binary fraction (0.5, 1.0, 1.25 ...); otherwise the best lower rational
  differs by far less than 1e-12 relative.
* ``alpha`` given: ``ln(1/alpha)`` is irrational; the rate is the best lower rational of the float
  ``-log(alpha)`` lowered by 2 ulps (so it is below the true value whatever the rounding of
  ``log``). The sampled ``alpha*`` is at most a few ulps above ``alpha``.

If ``sensitivity * s/t`` falls strictly between two doubles, the rate is lowered further to the
best rational below ``epsilon_f / sensitivity``, with ``epsilon_f`` the double nearest
``sensitivity * s/t`` (:func:`pymc_dp.accounting.geometric_rate`): the reported epsilon then
bounds the exact one from above.

Everything reported (``guarantee()``, ``alpha``, ``log_alpha``, the log pmf and ``noise_dist``)
describes the law actually sampled, i.e. the rational rate ``s/t``; :attr:`Geometric.rate` gives
it exactly. The privacy map is ``map(d) = d s/t`` (rounded up) for integer ``d``; the noise
law as a PyMC distribution (:meth:`Geometric.noise_dist`) is
``DiscreteLaplace.dist(log_alpha=-rate)`` (the exact rate, not the rounded ``alpha``).

Allowed range. The rate ``ln(1/alpha) = epsilon / sensitivity`` must lie in
``[2**-50, 700]`` (``epsilon / sensitivity`` from about ``8.9e-16`` to 700; ``alpha`` from
``exp(-700) = 9.9e-305`` to ``exp(-2**-50) = 1 - 8.9e-16``); outside it ``ValueError`` names
``epsilon`` (or ``alpha``) and the range. Below the range ``alpha`` rounds to 1 in float64 and
noise draws could overflow int64 (:mod:`pymc_dp.kernels.discrete_laplace`); above it ``alpha``
underflows and the noise is 0 except with probability below ``1e-304``. Inside it the exact
sampler, the log pmf and ``noise_dist`` forward draws all work, and the noise exceeds ``2**62``
in magnitude with probability below ``exp(-4000)``, so ``release`` never wraps int64.
The sensitivity is at most ``2**62``.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.mechanisms.geometric import Geometric
>>> m = Geometric(epsilon=1.0)
>>> m.guarantee()
PrivacyGuarantee(epsilon=1.0, delta=0.0, rho=None)
>>> m.rate, round(m.alpha, 12)
(Fraction(1, 1), 0.367879441171)
>>> m.release([3, 10], rng=np.random.default_rng(0)).dtype
dtype('int64')
>>> Geometric(epsilon=2.0, sensitivity=4).limited_precision(3)
(3, 1.5)
>>> Geometric(epsilon=0.5) == Geometric(alpha=0.5 ** 0.5) == Geometric(epsilon=1.0)
False
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np
import pytensor.tensor as pt

from pymc_dp._validation import (
    as_positive_finite,
    as_positive_int,
    as_unit_open,
    exactly_one,
)
from pymc_dp.accounting import geometric_rate, linear_epsilon
from pymc_dp.kernels import discrete_laplace as _dl
from pymc_dp.mechanisms import _tails
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee, as_integer_sensitivity

__all__ = ["Geometric"]


@numba.njit(cache=True)
def _geometric_censored(x, row):  # pragma: no cover - compiled
    # row = [side, *numba_params]: side 0 interior, -1 at the lower bound, +1 at the upper
    side = row[0]
    params = row[1:]
    if side == 0.0:
        return _dl.numba_logpmf(x, params)
    if side < 0.0:
        return _tails.geometric_logcdf(x, params)
    return _tails.geometric_logsf(x, params)


class Geometric(Mechanism):
    r"""Two-sided geometric mechanism, ``alpha = exp(-epsilon / sensitivity)``.

    Parameters
    ----------
    alpha : float, optional
        Noise parameter in ``(0, 1)``; give exactly one of ``alpha`` and ``epsilon``.
    epsilon : float, optional
        Privacy parameter, finite and > 0.
    sensitivity : int, default 1
        L1 sensitivity of the released integer statistic: a positive integer at most ``2**62``.
        A float holding a whole number (``1.0``) is taken as that integer; ``1.5`` is refused
        with ``TypeError`` (the mechanism is defined on the integers).

    ``epsilon / sensitivity`` (or ``ln(1/alpha)``) must lie in ``[2**-50, 700]`` (module
    docstring); the class attributes ``RATE_MIN`` and ``RATE_MAX`` hold the bounds.

    Attributes
    ----------
    rate : fractions.Fraction
        The exact rational ``s/t = ln(1/alpha*)`` of the law sampled (see the module docstring).
    alpha, log_alpha : float
        ``exp(-rate)`` and ``-rate`` as floats.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.geometric import Geometric
    >>> m = Geometric(epsilon=np.log(2.0))
    >>> m.alpha, m.guarantee().epsilon
    (0.5, 0.6931471805599453)
    >>> bool(np.isclose(m.logpdf(0), np.log(1 / 3)))  # (1 - alpha) / (1 + alpha)
    True
    >>> Geometric(epsilon=1.0, sensitivity=4).log_alpha
    -0.25
    >>> m.release(np.array([3, 5, 7]), rng=np.random.default_rng(0)).dtype
    dtype('int64')
    """

    family = "geometric"
    keyword_forms = ("epsilon=...", "alpha=...")
    integer = True

    #: smallest allowed rate ``ln(1/alpha)`` (``epsilon / sensitivity``): 2**-50
    RATE_MIN = 2.0**-50
    #: largest allowed rate: 700 (``alpha = exp(-700)`` is still a normal double)
    RATE_MAX = 700.0

    def __init__(self, *, alpha=None, epsilon=None, sensitivity=1):
        which = exactly_one("Geometric", alpha=alpha, epsilon=epsilon)
        self.sensitivity = as_integer_sensitivity(sensitivity)  # 2.0 -> 2; 1.5 refused
        lo, hi = Fraction(self.RATE_MIN), Fraction(self.RATE_MAX)
        if which == "alpha":
            a = as_unit_open("alpha", alpha)
            rate = -math.log1p(a - 1.0) if a > 0.5 else -math.log(a)
            # 2 ulps down: below ln(1/alpha) whatever the rounding of log
            rate = math.nextafter(math.nextafter(rate, 0.0), 0.0)
            exact = Fraction(rate) if rate > 0.0 else Fraction(0)
            if not lo <= exact <= hi:
                raise ValueError(
                    f"alpha must lie in [exp(-700), exp(-2**-50)] = [9.86e-305, 1 - 8.9e-16] "
                    f"(noise draws and the log pmf need it), got alpha={alpha!r}"
                )
        else:
            eps = as_positive_finite("epsilon", epsilon)
            exact = Fraction(eps) / self.sensitivity
            if not lo <= exact <= hi:
                raise ValueError(
                    f"epsilon / sensitivity must lie in [2**-50, 700] = [8.9e-16, 700] (alpha = "
                    f"exp(-epsilon/sensitivity) must be a double strictly inside (0, 1) and the "
                    f"noise must fit in int64), got epsilon={epsilon!r}, "
                    f"sensitivity={self.sensitivity}"
                )
        # best rational from below (>= RATE_MIN, a candidate), whose epsilon is a double
        self._rate = geometric_rate(exact, self.sensitivity)
        self.log_alpha = -float(self._rate)
        self.alpha = math.exp(self.log_alpha)
        self._freeze()

    def _law_key(self) -> tuple:
        return (self._rate,)

    # ---- accounting ---------------------------------------------------------------------------
    @property
    def rate(self) -> Fraction:
        """Exact ``ln(1/alpha)`` of the sampled law, ``s/t``."""
        return self._rate

    def _map(self, d) -> PrivacyGuarantee:
        """Pure ``epsilon(d) = d ln(1/alpha)``-DP (exact rational, rounded up)."""
        return PrivacyGuarantee(epsilon=linear_epsilon(self._rate, d), delta=0.0)

    def limited_precision(self, N) -> tuple[int, float]:
        """``(N, N ln(1/alpha))``-limited-precision local privacy (Schein et al. 2019, Thm 1)."""
        N = as_positive_int("N", N)
        eps = linear_epsilon(self._rate, N)
        if eps == math.inf:
            raise ValueError(f"N={N!r} is too large: N ln(1/alpha) overflows a float")
        return N, eps

    # ---- noise law ----------------------------------------------------------------------------
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Exact integer noise draws (CKS 2020 Algorithm 2); ``rng=None`` is the secure source."""
        return _dl.sample_discrete_laplace(
            self._rate.numerator, self._rate.denominator, size, rng=rng
        )

    def logpdf(self, x) -> np.ndarray:
        """Log pmf of the noise at ``x`` (``-inf`` off the integers)."""
        return _dl.logpmf(x, self.log_alpha)

    def logpdf_pt(self, x):
        """Log pmf of the noise as a PyTensor graph (float64)."""
        return _dl.logpmf_pt(x, log_alpha=np.float64(self.log_alpha))

    def logcdf(self, x) -> np.ndarray:
        """``log P(Y <= x)``: ``|k| log alpha - log(1 + alpha)`` for ``k = floor(x) < 0``,
        ``log(1 - alpha^{k+1}/(1 + alpha))`` for ``k >= 0``.

        Examples
        --------
        >>> from pymc_dp.mechanisms.geometric import Geometric
        >>> m = Geometric(epsilon=1.0)
        >>> bool(np.isclose(m.logcdf(-3), -3.0 - np.log1p(np.exp(-1.0)), rtol=1e-15))
        True
        """
        return _tails.vectorized(_tails.geometric_logcdf, x, self.numba_params)

    def logsf(self, x) -> np.ndarray:
        """``log P(Y >= x) = logcdf(-x)`` (symmetric law, any real ``x``)."""
        return _tails.vectorized(_tails.geometric_logcdf, x, self.numba_params, survival=True)

    def logcdf_pt(self, x):
        """``log P(Y <= x)`` as a float64 PyTensor graph (``x`` floored)."""
        return _dl.logcdf_pt(x, log_alpha=np.float64(self.log_alpha))

    def logsf_pt(self, x):
        """``log P(Y >= x) = log P(Y <= -x)`` as a float64 PyTensor graph."""
        return self.logcdf_pt(-pt.as_tensor_variable(x).astype("float64"))

    @property
    def numba_logcdf(self):
        """``f(x, params) = log P(Y <= x)`` with ``params`` from :attr:`numba_params`."""
        return _tails.geometric_logcdf

    @property
    def numba_logsf(self):
        """``f(x, params) = log P(Y >= x)``."""
        return _tails.geometric_logsf

    @property
    def numba_censored_logpdf(self):
        """The censored kernel ``f(x, [side, *numba_params])`` (numba njit, module level);
        ``None`` for a subclass that changed the numba density, tails or parameters."""
        return self._kernel_if_own(Geometric, _geometric_censored)

    @property
    def noise_variance(self) -> float:
        """``2 alpha / (1 - alpha)^2 = 1 / (2 sinh^2(r / 2))`` with ``r = ln(1/alpha)``."""
        return 1.0 / (2.0 * math.sinh(-float(self.log_alpha) / 2.0) ** 2)

    @property
    def numba_logpdf(self):
        """``f(x, params)`` with ``params`` from :attr:`numba_params`."""
        return _dl.numba_logpmf

    @property
    def numba_params(self) -> np.ndarray:
        """``np.array([log_alpha, log((1 - alpha)/(1 + alpha))])`` (normaliser precomputed)."""
        norm = float(_dl.log_normalizer(-self.log_alpha))
        return np.array([self.log_alpha, norm], dtype=np.float64)
