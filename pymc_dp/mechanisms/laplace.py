"""The Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006), on floating-point numbers.

``M(x) = x + Z`` with ``Z ~ Laplace(0, b)``, density

.. math::

    \\eta(z) = \\frac{1}{2b} \\exp\\left(-\\frac{|z|}{b}\\right).

Privacy (derivation). For neighbours with ``|x - x'| <= Δ`` and any output ``y``,
``log η(y - x) - log η(y - x') = (|y - x'| - |y - x|) / b <= |x - x'| / b <= Δ / b`` by the
triangle inequality, so the mechanism is ``ε``-DP with ``ε = Δ / b``; the bound is attained
for ``y >= max(x, x')``, so ``ε = Δ / b`` is exact. All parameterizations reduce to the scale ``b``.

.. warning::

    Floating-point Laplace noise is **not** a safe release mechanism: the set of doubles that
    ``x + Z`` can produce depends on ``x``, so the low-order bits of a release leak the input
    (Mironov 2012, "On significance of the least significant bits for differential privacy",
    CCS). Use :class:`pymc_dp.Geometric` (integer-valued, exact sampling) or
    :class:`pymc_dp.DiscreteGaussian` for real releases; this class exists to *model* releases
    made with a Laplace mechanism, and for simulation.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np
import pytensor.tensor as pt

from pymc_dp._validation import as_positive_finite, exactly_one
from pymc_dp.accounting import laplace_epsilon, laplace_scale, linear_epsilon
from pymc_dp.kernels import exact_sampling as _es
from pymc_dp.kernels import noise_logpdf as _noise_logpdf
from pymc_dp.mechanisms import _tails
from pymc_dp.mechanisms._float_release import secure_signed_uniforms
from pymc_dp.mechanisms.base import Mechanism, PrivacyGuarantee

__all__ = ["Laplace"]


def _secure_laplace(b: float, size) -> np.ndarray:
    """Laplace(0, b) draws from the secure source: a random sign times ``b`` times Exp(1).

    Two 64-bit words per draw (:func:`~pymc_dp.mechanisms._float_release.secure_signed_uniforms`):
    a sign and ``u`` uniform on ``(0, 1)`` at 52 significant bits down to ``u ≈ 2^-65``, so
    ``E = -log(u)`` is Exp(1) up to ``E ≈ 65 ln 2 ≈ 45.1``: the largest ``|Z|`` is about
    ``45.1 b`` and the neglected tail has mass ``2^-64`` (pure ε-DP fails with at most that
    probability, on top of the floating-point leak of every float mechanism; a one-word draw
    ``-log((m + 1/2) 2^-53)`` stopped at ``E ≈ 36.7``, a failure of probability ``1e-16``).
    """
    sign, u, shape = secure_signed_uniforms(size)
    return (sign * (b * -np.log(u))).reshape(shape)


#: allowed range of the noise scale: noise draws stay finite (|Z| <= about 745 b) and every
#: log density is finite at 0
SCALE_MIN, SCALE_MAX = 1e-300, 1e300


#: the density lives in the kernels (its kind is known there: kernels cache on disk)
_laplace_logpdf = _noise_logpdf.laplace_logpdf


@numba.njit(cache=True)
def _laplace_censored(x, row):  # pragma: no cover - compiled
    # row = [side, *numba_params]: side 0 interior, -1 at the lower bound, +1 at the upper
    side = row[0]
    params = row[1:]
    if side == 0.0:
        return _laplace_logpdf(x, params)
    if side < 0.0:
        return _tails.laplace_logcdf(x, params)
    return _tails.laplace_logsf(x, params)


class Laplace(Mechanism):
    """Laplace mechanism ``M(x) = x + Laplace(0, b)``; ``ε = Δ / b`` (pure ε-DP).

    .. warning::

        Floating-point noise leaks through the least significant bits of the release
        (Mironov 2012, "On significance of the least significant bits for differential
        privacy"). For real releases use :class:`pymc_dp.Geometric` or
        :class:`pymc_dp.DiscreteGaussian`; use this class to model Laplace releases.

    Parameters
    ----------
    scale : float, optional
        The noise scale ``b > 0`` (the core parameter).
    epsilon : float, optional
        Privacy parameter; gives ``b = sensitivity / epsilon``. Exactly one of ``scale`` and
        ``epsilon`` must be given.
    sensitivity : float, default 1.0
        The L1 sensitivity ``Δ > 0`` of the released statistic.

    Raises
    ------
    TypeError
        If a parameter is not a real number (bools and strings are refused).
    ValueError
        If a parameter is NaN, infinite, zero or negative, if not exactly one of ``scale``
        and ``epsilon`` is given, or if the scale (given, or ``sensitivity / epsilon``) lies
        outside ``[1e-300, 1e300]`` (beyond it noise draws or the density overflow).

    Notes
    -----
    ``ε = Δ / b`` is exact (see the module docstring for the derivation), rounded up; with
    ``epsilon`` given, ``b`` is ``Δ / ε`` raised by at most a few ulps so that ``Δ / b <= ε``
    holds exactly. The privacy map is ``map(d) = d / b``. The noise law as a PyMC distribution
    (:meth:`noise_dist`) is ``pm.Laplace.dist(0, b)``. The release with
    ``rng=None`` uses ``os.urandom`` (the operating system's CSPRNG), one 64-bit word per draw,
    transformed by the inverse CDF. With a ``numpy.random.Generator`` the draw is reproducible
    and meant for simulation only.

    Examples
    --------
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> m = Laplace(epsilon=0.5, sensitivity=2.0)
    >>> m.scale
    4.0
    >>> m.guarantee()
    PrivacyGuarantee(epsilon=0.5, delta=0.0, rho=None)
    >>> bool(m.logpdf(0.0) == -np.log(8.0))
    True
    >>> Laplace(scale=2.0, sensitivity=1.0).epsilon  # Laplace(scale=2.0) alone claims nothing
    0.5
    """

    family = "laplace"
    exact_alternative = (
        "pmdp.Geometric(epsilon=...) for integer statistics or pmdp.Discretized(grid=..., "
        "epsilon=...) for real ones"
    )
    keyword_forms = ("epsilon=...", "scale=...")
    integer = False

    def __init__(self, *, scale=None, epsilon=None, sensitivity=1.0):
        self.sensitivity = as_positive_finite("sensitivity", sensitivity)
        which = exactly_one("Laplace", scale=scale, epsilon=epsilon)
        if which == "scale":
            self.scale = as_positive_finite("scale", scale)
        else:
            eps = as_positive_finite("epsilon", epsilon)
            # Δ/ε, raised by ulps until Δ/b <= ε exactly (the stated ε then holds)
            self.scale = laplace_scale(eps, self.sensitivity)
        if not SCALE_MIN <= self.scale <= SCALE_MAX:
            raise ValueError(
                f"Laplace: the noise scale must lie in [1e-300, 1e300], got scale={self.scale!r}"
                + ("" if which == "scale" else f" from epsilon={epsilon!r}")
                + f" and sensitivity={sensitivity!r}"
            )
        try:  # accounting: sensitivity / scale must be a positive double
            laplace_epsilon(self.scale, self.sensitivity)
        except ValueError:
            raise ValueError(
                f"Laplace parameters out of range: scale={self.scale!r}, "
                f"sensitivity={self.sensitivity!r} give an epsilon beyond the double range"
            ) from None
        self._freeze()

    def _law_key(self) -> tuple:
        return (self.scale,)

    # ---- privacy accounting -----------------------------------------------------------------
    def _map(self, d) -> PrivacyGuarantee:
        """Pure ``ε``-DP with ``ε(d) = d / b`` (exact, rounded up).

        ``rho`` is left ``None``: the Laplace mechanism's native guarantee is pure DP. If you
        need to compose it with zCDP mechanisms, ε-DP implies ``(ε²/2)``-zCDP (Bun & Steinke
        2016, Prop. 1.4).
        """
        return PrivacyGuarantee(epsilon=linear_epsilon(1 / Fraction(self.scale), d), delta=0.0)

    # ---- noise law ----------------------------------------------------------------------------
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Draw Laplace(0, b) noise of shape ``size``.

        ``rng=None`` draws from ``os.urandom``; a ``numpy.random.Generator`` gives reproducible
        simulation draws.
        """
        if rng is None:
            return _secure_laplace(self.scale, size)
        _es.check_rng(rng)
        return rng.laplace(0.0, self.scale, size=size)

    def logpdf(self, x) -> np.ndarray:
        """``log η(x) = -|x| / b - log(2b)``."""
        x = np.asarray(x).astype(np.float64)  # |x| in float64: no integer wrap
        with np.errstate(over="ignore", under="ignore"):
            return -np.abs(x) / self.scale - (math.log(2.0) + math.log(self.scale))

    def logpdf_pt(self, x):
        """The log density as a float64 PyTensor graph."""
        x = pt.as_tensor_variable(x).astype("float64")  # |x| in float64: no integer wrap
        b = pt.as_tensor_variable(np.float64(self.scale))
        log2b = pt.as_tensor_variable(np.float64(math.log(2.0) + math.log(self.scale)))
        return -pt.abs(x) / b - log2b

    def logcdf(self, x) -> np.ndarray:
        """``log P(Y <= x)``: ``x/b - log 2`` for ``x < 0``, ``log1p(-exp(-x/b)/2)`` above.

        Examples
        --------
        >>> from pymc_dp.mechanisms.laplace import Laplace
        >>> bool(float(Laplace(scale=2.0).logcdf(-4.0)) == -2.0 - np.log(2.0))
        True
        """
        return _tails.vectorized(_tails.laplace_logcdf, x, self.numba_params)

    def logsf(self, x) -> np.ndarray:
        """``log P(Y >= x) = logcdf(-x)`` (symmetric law)."""
        return _tails.vectorized(_tails.laplace_logcdf, x, self.numba_params, survival=True)

    def logcdf_pt(self, x):
        """``log P(Y <= x)`` as a float64 PyTensor graph (both branches finite)."""
        x = pt.as_tensor_variable(x).astype("float64")
        b = pt.as_tensor_variable(np.float64(self.scale))
        zero = np.float64(0.0)
        # each branch on its own side of 0 (finite values and gradients, d/dx = 1/b at 0)
        below = pt.minimum(x, zero) / b - np.float64(math.log(2.0))
        above = pt.log1p(np.float64(-0.5) * pt.exp(-pt.maximum(x, zero) / b))
        return pt.switch(pt.lt(x, zero), below, above)

    def logsf_pt(self, x):
        """``log P(Y >= x)`` as a float64 PyTensor graph."""
        return self.logcdf_pt(-pt.as_tensor_variable(x).astype("float64"))

    @property
    def numba_logcdf(self):
        """``f(x, params) = log P(Y <= x)`` (numba njit, ``params = [b]``)."""
        return _tails.laplace_logcdf

    @property
    def numba_logsf(self):
        """``f(x, params) = log P(Y >= x)`` (numba njit, ``params = [b]``)."""
        return _tails.laplace_logsf

    @property
    def numba_censored_logpdf(self):
        """The censored kernel ``f(x, [side, *numba_params])`` (numba njit, module level);
        ``None`` for a subclass that changed the numba density, tails or parameters."""
        return self._kernel_if_own(Laplace, _laplace_censored)

    @property
    def noise_variance(self) -> float:
        """``2 b^2``."""
        return 2.0 * float(self.scale) ** 2

    @property
    def numba_logpdf(self):
        """``f(x, params) = -|x| / params[0] - log(2 params[0])`` (numba njit)."""
        return _laplace_logpdf

    @property
    def numba_params(self) -> np.ndarray:
        """``[b]`` as float64."""
        return np.array([self.scale], dtype=np.float64)
