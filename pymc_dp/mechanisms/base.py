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

Mechanisms are immutable values: attributes cannot be set or deleted once built
(``AttributeError``), so the likelihood, the sampler and the guarantee can never drift apart.
Two mechanisms are equal (with equal hashes) when they are of the same class, have the same
noise law and sensitivity, and state the same guarantee, e.g.
``Laplace(epsilon=1.0) == Laplace(scale=1.0)``. They pickle and ``copy.deepcopy``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pymc_dp._validation import as_release_values

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

    def __new__(cls, *args, **kwargs):
        obj = super().__new__(cls)
        # whether a privacy claim was stated (epsilon, delta, rho or sensitivity given), not only
        # the noise scale: DataAugmentation then checks each record's change of the statistic
        # against ``sensitivity`` (read with getattr: absent on objects unpickled from before)
        declared = bool({"epsilon", "delta", "rho", "sensitivity"} & kwargs.keys())
        object.__setattr__(obj, "privacy_declared", declared)
        return obj

    # ---- immutable value semantics ------------------------------------------------------------
    def _freeze(self) -> None:
        """Called at the end of ``__init__``: from here on attributes are read-only."""
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen", False):
            raise AttributeError(
                f"{type(self).__name__} is immutable: cannot set {name!r}; build a new "
                "mechanism with the parameters you want"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self.__dict__.get("_frozen", False):
            raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")
        object.__delattr__(self, name)

    @abstractmethod
    def _law_key(self) -> tuple:
        """The exact parameters of the noise law (hashable); equal laws give equal keys."""

    def _key(self) -> tuple:
        return (type(self).__name__, self._law_key(), self.sensitivity, self.guarantee())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mechanism):
            return NotImplemented
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

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
        """Return ``values + noise``: integers (int64) for integer mechanisms, else float64.

        Parameters
        ----------
        values : array_like
            The true values: real numbers of an integer or float dtype. Integer mechanisms
            take integers (or integral floats) in ``[-2**62, 2**62]``; with the noise scales the
            mechanisms allow, the noise exceeds ``2**62`` in magnitude with probability below
            ``exp(-4000)`` (and is checked), so ``values + noise`` never wraps int64. Float
            mechanisms take finite values in ``[-1e300, 1e300]`` that float64 represents
            exactly (integers up to ``2**53``). Booleans, complex numbers, strings, dates,
            durations and object arrays are refused (``TypeError``), as are masked entries,
            NaN, infinities, fractional values for integer mechanisms and values out of range
            (``ValueError``); the message names ``values`` and the offending value.
        rng : numpy.random.Generator, optional
            For reproducible simulations. ``None`` (the default) draws from a secure source.

        Raises
        ------
        TypeError, ValueError
            As described under ``values``.
        """
        values = as_release_values(values, integer=self.integer)
        noise = self.sample_noise(values.shape, rng)
        if self.integer:
            limit = np.int64(2**62)
            if np.any((noise >= limit) | (noise <= -limit)):  # pragma: no cover - p < e^-4000
                raise RuntimeError(f"{type(self).__name__}: a noise draw left the int64 range")
            return values + noise
        return values + noise

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
