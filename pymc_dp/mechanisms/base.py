"""The interface every additive-noise mechanism keeps.

A mechanism releases ``values + noise`` with noise drawn from a fixed law ``eta`` that depends
on the privacy parameters and the sensitivity. Every parameterization of a family reduces to one
core (a scale for Laplace, ``alpha`` for the geometric, ``sigma`` for the Gaussians). The noise
log-density is available in three forms that later code needs:

* :meth:`Mechanism.logpdf` (numpy), for tests and release-side code;
* :meth:`Mechanism.logpdf_pt` (a PyTensor graph), for model log-probabilities;
* :attr:`Mechanism.numba_logpdf` with :attr:`Mechanism.numba_params`, a numba-compiled scalar
  kernel ``f(x, params) -> float`` for compiled samplers (the data-augmentation step).

Privacy accounting (:meth:`Mechanism.guarantee`) is a pure function of the parameters, kept apart
from the noise draw.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

__all__ = ["Mechanism", "PrivacyGuarantee"]


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a single release by a mechanism guarantees.

    Attributes
    ----------
    epsilon : float
        The epsilon of (epsilon, delta)-DP (``inf`` when no finite epsilon holds).
    delta : float
        The delta of (epsilon, delta)-DP; 0 for pure DP.
    rho : float or None
        The rho of rho-zCDP (Bun & Steinke 2016), where the mechanism has one.
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None


class Mechanism(ABC):
    """Additive noise mechanism ``M(x) = x + noise``; see the module docstring."""

    #: short family name, e.g. ``"laplace"``; keys the marginal registry of ``Privatized``
    family: ClassVar[str]
    #: True when the noise (and so every release) is integer-valued
    integer: ClassVar[bool]

    sensitivity: float | int

    # ---- privacy accounting -------------------------------------------------------------
    @abstractmethod
    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee of one release (pure function of the parameters)."""

    @property
    def epsilon(self) -> float:
        """epsilon of the guarantee."""
        return self.guarantee().epsilon

    @property
    def delta(self) -> float:
        """delta of the guarantee (0 for pure DP)."""
        return self.guarantee().delta

    # ---- noise law ------------------------------------------------------------------------
    @abstractmethod
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Draw noise of shape ``size``. ``rng=None`` uses a secure source (OS entropy)."""

    def release(self, values, rng=None) -> np.ndarray:
        """Return ``values + noise``: integers for integer mechanisms.

        Parameters
        ----------
        values : array_like
            The true values (integers for integer mechanisms).
        rng : numpy.random.Generator, optional
            For reproducible simulations. ``None`` (the default) draws from a secure source.
        """
        values = np.asarray(values)
        if self.integer:
            if not np.issubdtype(values.dtype, np.integer):
                if not (
                    np.issubdtype(values.dtype, np.floating)
                    and np.all(np.isfinite(values))
                    and np.all(values == np.round(values))
                ):
                    raise ValueError(f"values must be integers for the {self.family} mechanism")
                values = values.astype(np.int64)
            return values.astype(np.int64) + self.sample_noise(values.shape, rng)
        values = values.astype(np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError("values must be finite")
        return values + self.sample_noise(values.shape, rng)

    @abstractmethod
    def logpdf(self, x) -> np.ndarray:
        """Log density (log pmf for integer mechanisms) of the noise at ``x`` (numpy)."""

    @abstractmethod
    def logpdf_pt(self, x):
        """Log density of the noise at ``x`` as a PyTensor graph (float64)."""

    @property
    @abstractmethod
    def numba_logpdf(self):
        """A numba ``njit`` function ``f(x: float64, params: float64[::1]) -> float64``."""

    @property
    @abstractmethod
    def numba_params(self) -> np.ndarray:
        """The float64 parameter vector to pass to :attr:`numba_logpdf`."""

    @abstractmethod
    def noise_dist(self, **kwargs):
        """A PyMC ``.dist()`` variable of the noise law (``kwargs`` go to ``.dist``: size, rng)."""

    def __repr__(self) -> str:
        g = self.guarantee()
        parts = [f"epsilon={g.epsilon:.6g}"]
        if g.delta:
            parts.append(f"delta={g.delta:.3g}")
        if g.rho is not None:
            parts.append(f"rho={g.rho:.6g}")
        return f"{type(self).__name__}({', '.join(parts)}, sensitivity={self.sensitivity})"
