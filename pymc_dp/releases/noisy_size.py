r"""Releases whose number of records is itself private: a noisy count and a noisy statistic.

When who is in the data is private (add/remove-one neighbours: one person's presence or
absence), the number of records ``N`` cannot be published as it is. The data holder releases

.. math::

    \tilde N = N + \eta_N, \qquad \tilde S = S + \eta_S, \qquad S = \sum_{i=1}^{N} x_i,

with ``x_i`` Bernoulli records, ``\eta_N`` and ``\eta_S`` independent noise of two mechanisms
(Geometric or DiscreteGaussian by default: integer noise from the secure source, as
:meth:`pymc_dp.Mechanism.release` draws it). Adding or removing one record changes ``N`` by 1
and ``S`` by at most 1, so with each mechanism calibrated to sensitivity 1 the pair is
``(ε_N + ε_S)``-DP by sequential composition (:meth:`NoisySizeRelease.guarantee`).

The analyst's model (:meth:`NoisySizeRelease.model`) has ``N`` as a latent integer with a prior
on the non-negative integers (``Poisson(size_rate)`` with a Gamma prior on ``size_rate``, or a
prior the user gives), the success probability ``p``, and both releases:

.. math::

    p(\tilde N, \tilde S \mid N, p) = \eta_N(\tilde N - N)
        \sum_{s=0}^{N} \binom{N}{s} p^s (1 - p)^{N - s}\, \eta_S(\tilde S - s).

The records are exchangeable, so given ``N`` their sum is ``Binomial(N, p)`` and the records
of random length never need to be represented one by one: the second factor is
:class:`~pymc_dp.distributions.privatized.Privatized` with a ``Binomial(N, p)`` base, whose
marginal sums ``s`` out exactly (:mod:`pymc_dp.distributions.marginals`, ``N`` may be a
variable); the first is ``Privatized`` of ``DiracDelta(N)``, the noise density at
``Ñ - N``. ``pm.sample`` then draws ``p`` (and ``size_rate``) with NUTS and ``N`` with
:class:`~pymc_dp.step_methods.NoisySizeGibbs`, an exact draw from its full conditional over a
window whose neglected mass is bounded and checked (below 1e-12; PyMC's Metropolis step is
exact too but gives about half the effective draws of ``N`` per second on the test case).
The posterior over ``N`` is in the trace as ``"size"``.

Ignoring the noise of the count (fixing ``N = Ñ``) is not a small error: in the test case
(``Ñ = S̃ = 3``, ε_N = 0.3, ε_S = 1, a prior of mean 20 on ``N``) the posterior mean of ``p``
is 0.36 (sd 0.21) and ``P(N = 3)`` is 0.016, while the fixed-``N`` model gives 0.70
(``tests/releases/test_noisy_size.py``, where it is the negative control of the check against
enumeration).

Of the reference implementations, only the DA-MCMC baseline in ``psanghi04/DP-PF`` (R,
reversible-jump steps over the records) handles an unknown size; here the records are summed
out instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pymc as pm
from pymc.util import check_dist_not_registered
from pytensor.tensor import TensorVariable

from pymc_dp._validation import _as_real
from pymc_dp.accounting import PrivacyGuarantee, compose
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.distributions.release import announce_model
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.releases.sufficient import release_values
from pymc_dp.step_methods.noisy_size import TAG as SIZE_TAG

__all__ = ["NoisySizeRelease", "release_with_noisy_size"]

#: bases accepted as a prior of the number of records: supported on the non-negative integers
_SIZE_PRIORS = tuple(
    d.rv_type for d in (pm.Poisson, pm.NegativeBinomial, pm.Binomial, pm.BetaBinomial, pm.Geometric)
)
#: released values are kept exactly in float64 (the likelihood's dtype)
_NOISY_RANGE = 2**53


def _check_mechanism(name: str, mechanism) -> Mechanism:
    if not isinstance(mechanism, Mechanism):
        raise TypeError(
            f"{name} must be a pymc_dp Mechanism (e.g. pmdp.Geometric(epsilon=0.5)), "
            f"got {mechanism!r}"
        )
    if Fraction(mechanism.sensitivity) < 1:
        raise ValueError(
            f"{name}.sensitivity={mechanism.sensitivity!r} is below 1, the change of the "
            "released count when one record is added or removed: the stated guarantee would "
            f"be false; build {name} with sensitivity=1"
        )
    return mechanism


def _check_noisy(name: str, value, mechanism: Mechanism):
    x = _as_real(name, value)
    if not (math.isfinite(x) and abs(x) <= _NOISY_RANGE):
        raise ValueError(f"{name} must be finite and within [-2**53, 2**53], got {value!r}")
    if mechanism.integer:
        if x != math.floor(x):
            raise ValueError(
                f"{name} must be an integer (released by the integer mechanism "
                f"{type(mechanism).__name__}), got {value!r}"
            )
        return np.int64(x)
    return np.float64(x)


@dataclass(frozen=True)
class NoisySizeRelease:
    r"""A noisy number of Bernoulli records and a noisy number of successes among them.

    Built by :func:`release_with_noisy_size` from the records, or directly from published
    numbers by an analyst.

    Parameters
    ----------
    noisy_size : int or float
        ``Ñ = N + noise``: the released number of records (an integer for an integer
        mechanism; it may be negative or below ``noisy_statistic``: the noise is unbounded).
    noisy_statistic : int or float
        ``S̃ = S + noise``: the released number of successes.
    size_mechanism, statistic_mechanism : pymc_dp.Mechanism
        The mechanisms that added the two noises, each with ``sensitivity >= 1`` (adding or
        removing one record changes each count by at most 1).

    Raises
    ------
    TypeError, ValueError
        For a non-mechanism, a mechanism of sensitivity below 1, or a released value that is
        not a finite real within ``2**53`` (an integer for an integer mechanism); the message
        names the argument.

    Examples
    --------
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.releases import NoisySizeRelease
    >>> rel = NoisySizeRelease(3, 8, pmdp.Geometric(epsilon=0.5), pmdp.Geometric(epsilon=0.5))
    >>> rel.guarantee()
    PrivacyGuarantee(epsilon=1.0, delta=0.0, rho=None)
    >>> NoisySizeRelease(3.5, 8, pmdp.Geometric(epsilon=0.5), pmdp.Geometric(epsilon=0.5))
    Traceback (most recent call last):
    ...
    ValueError: noisy_size must be an integer (released by the integer mechanism Geometric), got 3.5
    """

    noisy_size: int | float
    noisy_statistic: int | float
    size_mechanism: Mechanism
    statistic_mechanism: Mechanism

    def __post_init__(self):
        _check_mechanism("size_mechanism", self.size_mechanism)
        _check_mechanism("statistic_mechanism", self.statistic_mechanism)
        size = _check_noisy("noisy_size", self.noisy_size, self.size_mechanism)
        stat = _check_noisy("noisy_statistic", self.noisy_statistic, self.statistic_mechanism)
        object.__setattr__(self, "noisy_size", size)
        object.__setattr__(self, "noisy_statistic", stat)

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy cost of the two releases together, for add/remove-one neighbours.

        One record added or removed changes the size by 1 and the number of successes by 0
        or 1: each mechanism's privacy map at 1, composed sequentially
        (:func:`pymc_dp.accounting.compose`: the ε's add, the ρ's add).

        Returns
        -------
        PrivacyGuarantee

        Examples
        --------
        >>> import pymc_dp as pmdp
        >>> rel = NoisySizeRelease(10, 4, pmdp.Geometric(epsilon=0.3),
        ...                        pmdp.Geometric(epsilon=0.7))
        >>> rel.guarantee().epsilon
        1.0
        """
        return compose([self.size_mechanism.map(1), self.statistic_mechanism.map(1)])

    def model(
        self,
        *,
        size_prior=None,
        size_rate_prior=(1.0, 0.001),
        p_prior=(1.0, 1.0),
    ) -> pm.Model:
        r"""The noise-aware PyMC model of the two releases, with the number of records latent.

        Variables: ``size`` (the number of records ``N``, latent), ``size_rate`` (only without
        ``size_prior``: ``N ~ Poisson(size_rate)``, ``size_rate ~ Gamma(*size_rate_prior)``),
        ``p`` (``Beta(*p_prior)``), and the observed ``noisy_size`` and ``noisy_statistic``
        (:class:`~pymc_dp.distributions.privatized.Privatized` of ``DiracDelta(size)`` and of
        ``Binomial(size, p)``: the number of successes summed out exactly).

        Parameters
        ----------
        size_prior : unnamed distribution, optional
            A fixed prior of ``N`` on the non-negative integers, ``pm.X.dist(...)`` of
            Poisson, NegativeBinomial, Binomial, BetaBinomial or Geometric. Default: Poisson
            with the Gamma rate below.
        size_rate_prior : (float, float), default (1.0, 0.001)
            Shape and rate of the Gamma prior of ``size_rate`` (the default is an exponential
            of mean 1000); not allowed with ``size_prior``.
        p_prior : (float, float), default (1.0, 1.0)
            The two parameters of the Beta prior of ``p``.

        Returns
        -------
        pymc.Model

        Raises
        ------
        TypeError, ValueError
            For a ``size_prior`` that is not an unnamed distribution of the list above, or
            prior parameters that are not finite and positive; the message names the argument.

        Examples
        --------
        >>> import numpy as np, pymc as pm, pymc_dp as pmdp
        >>> rel = NoisySizeRelease(3, 8, pmdp.Geometric(epsilon=0.5),
        ...                        pmdp.Geometric(epsilon=0.5))
        >>> m = rel.model(size_rate_prior=(4.0, 0.5))
        >>> sorted(v.name for v in m.free_RVs)
        ['p', 'size', 'size_rate']
        >>> m2 = rel.model(size_prior=pm.Poisson.dist(np.float64(8.0)))
        >>> sorted(v.name for v in m2.free_RVs)
        ['p', 'size']
        """
        a, b = _positive_pair("p_prior", p_prior)
        if size_prior is not None:
            if size_rate_prior != (1.0, 0.001):
                raise ValueError(
                    "size_rate_prior is the prior of the Poisson rate of the default size "
                    "prior: pass it or size_prior, not both"
                )
            _check_size_prior(size_prior)
        else:
            shape, rate = _positive_pair("size_rate_prior", size_rate_prior)
        with pm.Model() as model:
            if size_prior is None:
                size_rate = pm.Gamma("size_rate", alpha=shape, beta=rate)
                size = pm.Poisson("size", size_rate)
            else:
                size = model.register_rv(size_prior.owner.clone().default_output(), "size")
            p = pm.Beta("p", alpha=a, beta=b)
            noisy_size = Privatized(
                "noisy_size",
                pm.DiracDelta.dist(size),
                self.size_mechanism,
                observed=self.noisy_size,
            )
            noisy_statistic = Privatized(
                "noisy_statistic",
                pm.Binomial.dist(size, p),
                self.statistic_mechanism,
                observed=self.noisy_statistic,
            )
        # the mark by which pm.sample gives `size` its exact Gibbs step (NoisySizeGibbs)
        setattr(size.tag, SIZE_TAG, (noisy_size, noisy_statistic))
        announce_model(model)  # so that step assignment finds it outside `with model:`
        return model


def _positive_pair(name: str, value) -> tuple[np.float64, np.float64]:
    try:
        first, second = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of positive numbers, got {value!r}") from None
    out = []
    for x in (first, second):
        v = _as_real(name, x)
        if not (math.isfinite(v) and v > 0.0):
            raise ValueError(f"{name} must hold two finite numbers > 0, got {value!r}")
        out.append(np.float64(v))  # float64 constants (PyTensor makes 2.0 a float32)
    return out[0], out[1]


def _check_size_prior(size_prior) -> None:
    op = getattr(getattr(size_prior, "owner", None), "op", None)
    if not (isinstance(size_prior, TensorVariable) and isinstance(op, _SIZE_PRIORS)):
        raise TypeError(
            "size_prior must be an unnamed distribution on the non-negative integers, "
            "pm.Poisson.dist(...), pm.NegativeBinomial.dist(...), pm.Binomial.dist(...), "
            f"pm.BetaBinomial.dist(...) or pm.Geometric.dist(...), got {size_prior!r}"
        )
    check_dist_not_registered(size_prior)
    if size_prior.ndim != 0:
        raise ValueError(f"size_prior must be a scalar distribution, got ndim={size_prior.ndim}")


def release_with_noisy_size(
    records,
    *,
    size_mechanism: Mechanism,
    statistic_mechanism: Mechanism,
    rng: np.random.Generator | None = None,
    allow_float: bool = False,
) -> NoisySizeRelease:
    r"""Release the number of Bernoulli records and their number of successes, both with noise.

    The data holder's side of :class:`NoisySizeRelease`: ``Ñ = len(records) + noise`` and
    ``S̃ = sum(records) + noise``, each noise drawn once by its mechanism (from the secure
    source unless ``rng`` is given). The pair is ``(ε_N + ε_S)``-DP for add/remove-one
    neighbours (:meth:`NoisySizeRelease.guarantee`).

    Parameters
    ----------
    records : array_like
        One-dimensional 0/1 records (integers, integral floats or booleans); may be empty.
    size_mechanism, statistic_mechanism : pymc_dp.Mechanism
        Mechanisms of sensitivity ``>= 1``: integer ones (Geometric, DiscreteGaussian) release
        exactly; floating-point ones (Laplace, Gaussian) only with ``allow_float=True``.
    rng : numpy.random.Generator, optional
        For simulations only; ``None`` (the default) draws the noise from a secure source.
    allow_float : bool, default False
        The opt-in of floating-point mechanisms (their low-order bits leak, Mironov 2012).

    Returns
    -------
    NoisySizeRelease

    Raises
    ------
    TypeError, ValueError
        For records that are not a 1-D array of 0/1 values, or mechanisms refused as in
        :class:`NoisySizeRelease`; the message names the argument.

    Examples
    --------
    >>> import numpy as np, pymc_dp as pmdp
    >>> rel = release_with_noisy_size(
    ...     np.array([1, 0, 1, 1]),
    ...     size_mechanism=pmdp.Geometric(epsilon=0.5),
    ...     statistic_mechanism=pmdp.Geometric(epsilon=0.5),
    ...     rng=np.random.default_rng(0),
    ... )
    >>> type(rel.noisy_size), rel.guarantee().epsilon
    (<class 'numpy.int64'>, 1.0)
    """
    _check_mechanism("size_mechanism", size_mechanism)
    _check_mechanism("statistic_mechanism", statistic_mechanism)
    x = _bernoulli_records(records)
    owner = "release_with_noisy_size"
    noisy = [
        release_values(mech, np.int64(value), rng, allow_float, owner)[()]
        for mech, value in ((size_mechanism, x.size), (statistic_mechanism, x.sum()))
    ]
    return NoisySizeRelease(noisy[0], noisy[1], size_mechanism, statistic_mechanism)


def _bernoulli_records(records) -> np.ndarray:
    if np.ma.isMaskedArray(records) and np.any(np.ma.getmaskarray(records)):
        raise ValueError("records has masked entries: drop them or fill them with true values")
    arr = np.asarray(np.ma.getdata(records) if np.ma.isMaskedArray(records) else records)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"records must be 0/1 numbers, got an array of dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"records must be one-dimensional, got shape {arr.shape}")
    bad = ~((arr == 0) | (arr == 1))
    if np.any(bad):
        raise ValueError(f"records must be Bernoulli records (0 or 1), got {arr[bad].flat[0]!r}")
    return arr.astype(np.int64)
