"""The interface every additive-noise mechanism keeps.

A mechanism releases ``values + noise`` with noise drawn from a fixed law ``eta`` that depends
on the privacy parameters and the sensitivity. Every parameterization of a family reduces to one
core (a scale for Laplace, ``alpha`` for the geometric, ``sigma`` for the Gaussians). The noise
log-density is available in three forms that later code needs:

* :meth:`Mechanism.logpdf` (numpy), for tests and release-side code;
* :meth:`Mechanism.logpdf_pt` (a PyTensor graph), for model log-probabilities;
* :attr:`Mechanism.numba_logpdf` with :attr:`Mechanism.numba_params`, a numba-compiled scalar
  kernel ``f(x, params) -> float`` for compiled samplers (the data-augmentation step).

Privacy accounting is a pure function of the parameters, kept apart from the noise draw, and
its formulas live in :mod:`pymc_dp.accounting`. :meth:`Mechanism.map` is the mechanism's
*privacy map*: ``map(d_in)`` is the guarantee for an individual who can change the released
statistic by ``d_in`` (in the mechanism's sensitivity norm: L1 for Laplace and the two-sided
geometric, L2 for the Gaussians), and :meth:`Mechanism.guarantee` is ``map(sensitivity)``.
So an individual with ``k`` records in a sum with per-record sensitivity ``Δ`` pays
``map(k Δ)``: ``k ε`` for pure DP, but ``k² ρ`` for zCDP.

The noise law as a PyMC distribution (:meth:`Mechanism.noise_dist`) is looked up in a registry
filled by :func:`register_noise_dist`; :mod:`pymc_dp.distributions.mechanism_noise` registers the
built-in mechanisms when ``pymc_dp`` is imported, so mechanisms never import distributions.

Mechanisms are immutable values: attributes cannot be set or deleted once built
(``AttributeError``), so the likelihood, the sampler and the guarantee can never drift apart.
Two mechanisms are equal (with equal hashes) when they are of the same class, have the same
noise law and sensitivity, and state the same guarantee, e.g.
``Laplace(epsilon=1.0) == Laplace(scale=1.0)``. They pickle and ``copy.deepcopy``.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import numpy as np

from pymc_dp._validation import INT_RANGE, as_bool, as_positive_int, as_release_values
from pymc_dp.accounting import PrivacyGuarantee, as_distance
from pymc_dp.mechanisms._float_release import check_allow_float

__all__ = [
    "Mechanism",
    "PrivacyGuarantee",
    "as_integer_sensitivity",
    "register_noise_dist",
    "registered_noise_dists",
]

#: mechanism class -> factory(mechanism, **kwargs) of its noise law as a PyMC ``.dist()``
_NOISE_DISTS: dict[type, Callable] = {}


def register_noise_dist(mech_type: type, factory: Callable, *, overwrite: bool = False):
    """Register ``factory(mechanism, **kwargs)`` as the PyMC noise law of ``mech_type``.

    :meth:`Mechanism.noise_dist` of an instance of exactly ``mech_type`` then returns
    ``factory(mechanism, **kwargs)`` (``kwargs`` such as ``size`` and ``rng`` go to ``.dist``).
    Registering a different factory for a type that has one needs ``overwrite=True``.

    Returns
    -------
    callable
        ``factory`` (so this can be used as a decorator body).

    Raises
    ------
    TypeError
        If ``mech_type`` is not a subclass of :class:`Mechanism` or ``factory`` is not callable.
    ValueError
        If ``mech_type`` already has another factory and ``overwrite`` is False.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> class MyLaplace(Laplace):
    ...     pass
    >>> _ = register_noise_dist(
    ...     MyLaplace, lambda m, **kw: pm.Laplace.dist(np.float64(0.0), np.float64(m.scale), **kw))
    >>> float(pm.logp(MyLaplace(scale=2.0).noise_dist(), 0.0).eval()) == float(np.log(0.25))
    True
    >>> del _NOISE_DISTS[MyLaplace]
    """
    if not (isinstance(mech_type, type) and issubclass(mech_type, Mechanism)):
        raise TypeError(f"mech_type must be a Mechanism subclass, got {mech_type!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {factory!r}")
    old = _NOISE_DISTS.get(mech_type)
    if old is not None and old is not factory and not overwrite:
        raise ValueError(
            f"a noise distribution is already registered for {mech_type.__name__}; pass "
            "overwrite=True to replace it"
        )
    _NOISE_DISTS[mech_type] = factory
    return factory


def as_integer_sensitivity(value) -> int:
    """The sensitivity of an integer mechanism as an ``int`` in ``[1, 2**62]``.

    Integers (Python or numpy, not bools) and floats that hold a whole number (``1.0``,
    ``np.float64(2)``) are accepted; anything else raises with a message naming
    ``sensitivity``.

    Raises
    ------
    TypeError
        If ``value`` is not a real number holding a whole number (``1.5``, NaN, infinity, a
        string), or is a bool (as before whole-number floats were accepted: callers that
        round a fractional sensitivity up on ``TypeError`` keep working).
    ValueError
        If ``value`` is below 1 or above ``2**62``.

    Examples
    --------
    >>> from pymc_dp.mechanisms.base import as_integer_sensitivity
    >>> as_integer_sensitivity(1.0), as_integer_sensitivity(3)
    (1, 3)
    >>> as_integer_sensitivity(1.5)
    Traceback (most recent call last):
    ...
    TypeError: sensitivity must be a positive integer (a whole number such as 1 or 2.0), got 1.5
    """
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral | np.bool_):
        try:
            x = float(value)
        except (OverflowError, ValueError):  # e.g. a huge Fraction
            x = math.nan
        if not (math.isfinite(x) and x.is_integer() and x == value):  # exact: no rounding
            raise TypeError(
                "sensitivity must be a positive integer (a whole number such as 1 or 2.0), "
                f"got {value!r}"
            )
        value = int(x)
    v = as_positive_int("sensitivity", value)
    if v > INT_RANGE:
        raise ValueError(f"sensitivity must be at most 2**62, got {value!r}")
    return v


def _positional_message(cls) -> str:
    name = cls.__name__
    forms = [f"{name}({kw})" for kw in cls.keyword_forms]
    listed = ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms)
    return (
        f"{name} takes keyword arguments only: {listed} (a bare number is ambiguous: it "
        "could be read as epsilon or as the noise scale)"
    )


def registered_noise_dists() -> dict[type, Callable]:
    """A copy of the registry: mechanism class -> noise-distribution factory."""
    return dict(_NOISE_DISTS)


class Mechanism(ABC):
    """Additive noise mechanism ``M(x) = x + noise``; see the module docstring.

    Examples
    --------
    The concrete mechanisms (:class:`~pymc_dp.mechanisms.laplace.Laplace`,
    :class:`~pymc_dp.mechanisms.geometric.Geometric`, ...) share this interface; the base class
    itself is abstract.

    >>> import numpy as np
    >>> from pymc_dp.mechanisms.base import Mechanism
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> m = Laplace(epsilon=0.5, sensitivity=1.0)
    >>> isinstance(m, Mechanism), m.integer, m.epsilon, m.noise_variance  # 2 * scale**2
    (True, False, 0.5, 8.0)
    >>> m.release(np.array([1.0, 2.0]), rng=np.random.default_rng(0), allow_float=True).shape
    (2,)
    >>> Mechanism()
    Traceback (most recent call last):
    ...
    TypeError: Can't instantiate abstract class Mechanism ...
    """

    #: short family name, e.g. ``"laplace"``; keys the marginal registry of ``Privatized``
    family: ClassVar[str]
    #: True when the noise (and so every release) is integer-valued
    integer: ClassVar[bool]

    sensitivity: float | int
    #: keyword-only construction: a positional call raises ``TypeError`` suggesting these
    #: calls, e.g. ``("epsilon=...", "scale=...")`` (every built-in mechanism sets them; empty,
    #: the default, leaves the signature to the subclass's ``__init__``)
    keyword_forms: ClassVar[tuple[str, ...]] = ()
    #: for a floating-point mechanism, the exact mechanisms its ``release`` refusal points to
    exact_alternative: ClassVar[str] = (
        "pmdp.Geometric(...) or pmdp.DiscreteGaussian(...) for integer statistics, "
        "pmdp.Discretized(grid=..., ...) for real ones"
    )

    def __new__(cls, *args, **kwargs):
        if args and cls.keyword_forms:  # no silent "first positional = the noise scale"
            raise TypeError(_positional_message(cls))
        obj = super().__new__(cls)
        # whether a privacy claim was stated (epsilon, delta, rho or sensitivity given), not only
        # the noise scale: DataAugmentation then checks each record's change of the statistic
        # against ``sensitivity`` (read with getattr: absent on objects unpickled from before)
        declared = bool({"epsilon", "delta", "rho", "sensitivity"} & kwargs.keys())
        object.__setattr__(obj, "privacy_declared", declared)
        return obj

    # ---- immutable value semantics ------------------------------------------------------------
    def _freeze(self) -> None:
        """Called at the end of ``__init__``: caches the guarantee, then attributes are
        read-only."""
        object.__setattr__(self, "_guarantee", self._map(Fraction(self.sensitivity)))
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
    @property
    def has_privacy_claim(self) -> bool:
        """Whether the mechanism states a privacy guarantee: ``epsilon``, ``delta``, ``rho`` or
        ``sensitivity`` was given when it was built. A mechanism given by its noise scale only
        (``Laplace(scale=2.0)``, ``Gaussian(sigma=42.0)``, ``Geometric(alpha=0.5)``) describes
        a noise law, not a release of a statistic of known sensitivity: it makes no claim."""
        return bool(self.__dict__.get("privacy_declared", False))

    def _at_sensitivity(self) -> PrivacyGuarantee:
        """:meth:`map` at the (declared or default) sensitivity (cached)."""
        g = self.__dict__.get("_guarantee")
        if g is None:  # objects unpickled from before the cache existed
            g = self._map(Fraction(self.sensitivity))
        return g

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee of one release: :meth:`map` at the sensitivity (cached).

        A mechanism without a privacy claim (:attr:`has_privacy_claim` False: built from its
        noise scale only, no ``sensitivity``) returns :meth:`PrivacyGuarantee.no_claim`: a
        guarantee computed with the default sensitivity 1 would be a claim nobody made. Its
        privacy map at a stated change, :meth:`map`, is still defined.

        Examples
        --------
        >>> from pymc_dp.mechanisms.gaussian import Gaussian
        >>> Gaussian(sigma=42.0).guarantee()
        PrivacyGuarantee(epsilon=None, delta=None, rho=None)
        >>> round(Gaussian(sigma=42.0, sensitivity=1.0).guarantee().rho, 9)
        0.000283447
        """
        if not self.has_privacy_claim:
            return PrivacyGuarantee.no_claim()
        return self._at_sensitivity()

    def map(self, d_in) -> PrivacyGuarantee:
        """Privacy map: the guarantee for an individual who changes the statistic by ``d_in``.

        ``d_in`` is measured in the mechanism's sensitivity norm (L1 for Laplace and
        Geometric, L2 for Gaussian and DiscreteGaussian); integer mechanisms take integers.
        ``map(sensitivity) == guarantee()`` when the mechanism makes a privacy claim (the map
        needs no sensitivity: it is defined for a mechanism given by its noise scale only,
        whose ``guarantee()`` is no claim); ``map(0)`` is zero (no change, no cost); the map is
        non-decreasing in ``d_in``. Every value is rounded up: floating point never under-counts.
        The formulas are in :mod:`pymc_dp.accounting`.

        Parameters
        ----------
        d_in : int or float
            Finite and ``>= 0`` (an integer for integer mechanisms).

        Raises
        ------
        TypeError, ValueError
            If ``d_in`` is not a finite real ``>= 0`` (or not an integer for an integer
            mechanism); the message names ``d_in``.

        Examples
        --------
        >>> from pymc_dp.mechanisms.laplace import Laplace
        >>> m = Laplace(epsilon=0.5)
        >>> m.map(3).epsilon, m.map(1.0) == m.guarantee()
        (1.5, True)
        """
        d = as_distance(d_in, integer=self.integer)
        if d == 0:
            rho = None if self._at_sensitivity().rho is None else 0.0
            return PrivacyGuarantee(epsilon=0.0, delta=0.0, rho=rho)
        if d == Fraction(self.sensitivity):
            return self._at_sensitivity()
        return self._map(d)

    @abstractmethod
    def _map(self, d: Fraction) -> PrivacyGuarantee:
        """The guarantee for a change of exact size ``d > 0`` (validated by :meth:`map`)."""

    @property
    def epsilon(self) -> float | None:
        """epsilon of the guarantee (``None`` without a privacy claim)."""
        return self.guarantee().epsilon

    @property
    def delta(self) -> float | None:
        """delta of the guarantee (0 for pure DP; ``None`` without a privacy claim)."""
        return self.guarantee().delta

    # ---- noise law ------------------------------------------------------------------------
    @property
    def noise_variance(self) -> float:
        """Variance of the noise. The built-in mechanisms give it in closed form; this default
        (for other subclasses) is the sample variance of ``10^6`` draws with a fixed seed."""
        draws = np.asarray(self.sample_noise(10**6, rng=np.random.default_rng(0)), np.float64)
        return float(draws.var())

    @abstractmethod
    def sample_noise(self, size, rng=None) -> np.ndarray:
        """Draw noise of shape ``size``. ``rng=None`` uses a secure source (OS entropy)."""

    def release(self, values, rng=None, *, allow_float=False) -> np.ndarray:
        """Return ``values + noise``: integers (int64) for integer mechanisms, else float64.

        A floating-point mechanism (``integer`` False: Laplace, Gaussian) releases only with
        ``allow_float=True``: floating-point noise leaks the input through the low-order bits
        of the release (Mironov 2012), so without the opt-in this raises ``ValueError`` naming
        ``allow_float`` and the exact mechanisms to use instead (:attr:`exact_alternative`).

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
        allow_float : bool, default False
            The opt-in of floating-point mechanisms (for simulations); integer mechanisms
            accept either value.

        Raises
        ------
        TypeError, ValueError
            As described under ``values``; ``ValueError`` for a floating-point mechanism
            without ``allow_float=True``; ``TypeError`` if ``allow_float`` is not a bool.

        Examples
        --------
        >>> import numpy as np
        >>> from pymc_dp.mechanisms.geometric import Geometric
        >>> from pymc_dp.mechanisms.laplace import Laplace
        >>> Geometric(epsilon=1.0).release(np.array([3, 4]), rng=np.random.default_rng(0)).dtype
        dtype('int64')
        >>> Laplace(epsilon=1.0).release(np.zeros(2), rng=np.random.default_rng(0),
        ...                              allow_float=True).shape
        (2,)
        >>> Laplace(epsilon=1.0).release(np.zeros(2))
        Traceback (most recent call last):
        ...
        ValueError: Laplace.release adds floating-point noise, ...
        """
        if self.integer:
            as_bool("allow_float", allow_float)
        else:
            check_allow_float(allow_float, f"{type(self).__name__}.release", self.exact_alternative)
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

    # ---- tail probabilities (censored releases) ------------------------------------------
    def _no_tails(self, what: str):
        raise NotImplementedError(
            f"{type(self).__name__} does not define {what}: a censored release "
            "(Release(..., lower=..., upper=...), a clipped/projected release) needs the noise "
            "tail probabilities log P(noise <= x) and log P(noise >= x). Implement logcdf, "
            "logsf, logcdf_pt, logsf_pt, numba_logcdf and numba_logsf on the mechanism, or "
            "release without bounds"
        )

    def logcdf(self, x) -> np.ndarray:
        """``log P(noise <= x)`` (numpy). Built-in mechanisms define it; a subclass without it
        raises ``NotImplementedError`` when a censored release needs it."""
        self._no_tails("logcdf")

    def logsf(self, x) -> np.ndarray:
        """``log P(noise >= x)`` (numpy; note ``>=``, which matters for integer noise)."""
        self._no_tails("logsf")

    def logcdf_pt(self, x):
        """``log P(noise <= x)`` as a float64 PyTensor graph."""
        self._no_tails("logcdf_pt")

    def logsf_pt(self, x):
        """``log P(noise >= x)`` as a float64 PyTensor graph."""
        self._no_tails("logsf_pt")

    @property
    def numba_logcdf(self):
        """A numba function ``f(x, params) = log P(noise <= x)`` (``params``:
        :attr:`numba_params`)."""
        self._no_tails("numba_logcdf")

    @property
    def numba_logsf(self):
        """A numba function ``f(x, params) = log P(noise >= x)``."""
        self._no_tails("numba_logsf")

    def check_tails(self, release: str = "the release") -> None:
        """Raise ``NotImplementedError`` naming ``release`` unless the mechanism defines all
        six tail methods (needed by a censored release).

        Examples
        --------
        >>> from pymc_dp.mechanisms.laplace import Laplace
        >>> Laplace(scale=1.0).check_tails("z")
        """
        names = ("logcdf", "logsf", "logcdf_pt", "logsf_pt", "numba_logcdf", "numba_logsf")
        missing = [n for n in names if getattr(type(self), n) is getattr(Mechanism, n)]
        if missing:
            raise NotImplementedError(
                f"{release} is censored (lower/upper given) but its mechanism "
                f"{type(self).__name__} does not define {', '.join(missing)}: the censored "
                "likelihood needs log P(noise <= x) and log P(noise >= x); implement them on "
                "the mechanism, or release without bounds"
            )

    @property
    def numba_censored_logpdf(self):
        """The numba kernel ``f(x, row)`` of the censored noise law, ``row = [side, *params]``
        (``side`` 0: :attr:`numba_logpdf`, -1: :attr:`numba_logcdf` (at the lower bound),
        +1: :attr:`numba_logsf` (at the upper bound)), or ``None``.

        The built-in mechanisms return a module-level ``njit`` function. This default returns
        ``None``: the data-augmentation step then runs censored releases of the mechanism
        through its exact generic path (the PyTensor ``logcdf_pt``/``logsf_pt``). A subclass
        may return its own module-level kernel (not a closure: numba's on-disk cache of the
        compiled sweeps must be able to find it again by name).
        """
        return None

    def _kernel_if_own(self, cls: type, kernel):
        """``kernel`` when ``type(self)`` uses ``cls``'s numba density, tails and parameters,
        else ``None`` (a subclass that changed any of them must not get ``cls``'s censored
        kernel)."""
        names = ("numba_logpdf", "numba_logcdf", "numba_logsf", "numba_params")
        if all(getattr(type(self), n) is getattr(cls, n) for n in names):
            return kernel
        return None

    def noise_dist(self, **kwargs):
        """A PyMC ``.dist()`` variable of the noise law (``kwargs`` go to ``.dist``: size, rng).

        Looked up in the registry of :func:`register_noise_dist` by ``type(self)``.

        Raises
        ------
        NotImplementedError
            If no factory is registered for ``type(self)``.
        """
        factory = _NOISE_DISTS.get(type(self))
        if factory is None:
            raise NotImplementedError(
                f"no noise distribution is registered for {type(self).__name__}: register one "
                "with pymc_dp.mechanisms.base.register_noise_dist (importing pymc_dp registers "
                "those of the built-in mechanisms)"
            )
        return factory(self, **kwargs)

    def __repr__(self) -> str:
        g = self.guarantee()
        if not g.claimed:
            law = [
                f"{k}={float(getattr(self, k)):.6g}"
                for k in ("scale", "sigma", "alpha")
                if isinstance(getattr(type(self), k, None), property) or k in self.__dict__
            ][:1]
            return f"{type(self).__name__}({', '.join([*law, 'no privacy claim'])})"
        parts = [f"epsilon={g.epsilon:.6g}"]
        if g.delta:
            parts.append(f"delta={g.delta:.3g}")
        if g.rho is not None:
            parts.append(f"rho={g.rho:.6g}")
        return f"{type(self).__name__}({', '.join(parts)}, sensitivity={self.sensitivity})"
