r"""One Posterior Sample (OPS) of a private HMM (Foulds et al. 2016, Secs. 2.2, 4.1 and 5).

The model is the private HMM of :mod:`pymc_dp.releases.hmm`: ``R`` regions x ``T`` months, a
latent state ``z[r, t]`` in ``0..K-1`` per step, transitions collapsed (Dirichlet rows),
naive-Bayes emissions ``phi[f, k] ~ Dirichlet(e)`` per feature ``f`` (``V_f`` values) and state
``k``. OPS releases **one draw** ``(z, phi)`` of the tempered posterior

.. math:: q_D(z, \phi) \propto p(z)\, \pi_{a_0}(\phi) \prod_{i \in D} p(x_i \mid z, \phi)^{1/T},

where ``p(z)`` is the Markov prior with the transitions integrated out, ``pi_{a0}`` the emission
prior **truncated** to ``phi[f, k, v] >= a0_f`` and ``a0_f = 1 / (m V_f)`` (Foulds et al.,
Fig. 6 caption: "Dirichlets were truncated at a0 = 1/(100 d) or 1/(10 d), where d is the
feature's dimensionality"; ``m`` is their "truncation multiplier", 100 or 10).

Privacy (Thm. 2.2 and the exponential mechanism, as in :mod:`pymc_dp.releases.ops`). A record
is one entry (a log entry: its features; its region and month are public, as in
:func:`~pymc_dp.releases.hmm.release_hmm_counts`), neighbours replace one entry's features. Its
log-likelihood is ``sum_f log phi[f, z, x_f]``, so on the truncated space its range over two
records is

.. math:: C = \sum_f \log\frac{1 - (V_f - 1) a_{0,f}}{a_{0,f}}

(``log(199)`` per binary feature at ``m = 100``). One exact draw of ``q_D`` with ``T = 2C/ε``
is ``ε``-DP; the per-entry guarantee, not per region-month or per region (a region's sequence
holds many entries: ``n`` of them cost ``n ε`` by group privacy).

The draw is made by MCMC (Foulds et al., Sec. 5: Gibbs with the transitions collapsed, the
emissions not). Sec. 4 of the paper says when such a draw is a valid OPS release:

* **Converged chain** (Wang et al. 2015, Prop. 3, quoted as Foulds et al.'s Prop. 3): if the
  draw's law is within total variation ``δ_TV`` of ``q_D`` for every data set, the release is
  ``(ε, (1 + e^ε) δ_TV)``-DP (:func:`mcmc_sample_guarantee`). No finite run can *verify*
  ``δ_TV`` in general, so this is :meth:`HMMOnePosteriorSample.approximate_guarantee`, a
  function of a ``δ_TV`` the user vouches for.
* **Any number of sweeps** (Sec. 4.1): each Gibbs update is itself an exponential mechanism
  with the same utility restricted to the updated variable, so it costs at most ``ε``. One
  sweep draws every ``phi`` (one update touching every entry) and every state once (an entry
  touches only its own step's update: parallel composition), so it costs ``2ε``, and ``S``
  sweeps ``2Sε`` (the paper's "impractical 400ε" for 200 iterations). That is
  :meth:`HMMOnePosteriorSample.guarantee`: it holds without any convergence assumption, so it
  never under-counts. With ``K = 1`` there are no states: the last sweep's ``phi`` is an exact
  draw of ``q_D``, and ``guarantee()`` is ``ε``.

Both hold for the sampler's law in exact arithmetic: the chain draws in floating point
(gamma, Beta inverse CDF), whose rounding can leak (Mironov 2012). So
:func:`hmm_one_posterior_sample` requires ``allow_float=True`` (simulations, as the library's
floating-point mechanisms do).

Sweep (:func:`tempered_hmm_gibbs`), for the tempered target with statistics ``c/T``:

1. ``phi[f, k] ~ Dirichlet(e + sum_{z[r, t] = k} c[r, t, f, :] / T)`` restricted to
   ``phi >= a0_f``: for a binary feature an exact truncated Beta
   (:func:`~pymc_dp.releases.ops.truncated_beta_rvs`), otherwise exact rejection from the
   untruncated Dirichlet;
2. every state by the collapsed single-site update of :mod:`pymc_dp.kernels.hmm_plugin` with
   emission terms ``sum_v c[r, t, f, v] / T log phi[f, k, v]``.

Both steps are exact conditional draws of ``q_D``, so the sweep leaves it invariant. The
sampler runs ``B`` independent chains at once (vectorised over chains; the states in numba).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numba
import numpy as np

from pymc_dp._validation import _as_real, as_bool, as_positive_finite
from pymc_dp.accounting import PrivacyGuarantee, round_up
from pymc_dp.kernels.hmm_plugin import transition_counts, update_states
from pymc_dp.releases._families import _as_int_bound
from pymc_dp.releases.hmm import _full_table, _n_values, _resolve_prior, _table
from pymc_dp.releases.ops import (
    OnePosteriorSample,
    dirichlet_categorical_log_likelihood_range,
    truncated_beta_rvs,
)

__all__ = [
    "HMMOnePosteriorSample",
    "hmm_one_posterior_sample",
    "hmm_ops_log_likelihood_range",
    "mcmc_sample_guarantee",
    "tempered_hmm_gibbs",
]

_MAX_REJECTION_ROUNDS = 10_000


def _multiplier(truncation_multiplier) -> float:
    m = _as_real("truncation_multiplier", truncation_multiplier)
    if not (math.isfinite(m) and m > 1.0):
        raise ValueError(
            "truncation_multiplier must be a finite number > 1 (the emissions are truncated at "
            f"a0 = 1/(m V_f) < 1/V_f), got {truncation_multiplier!r}"
        )
    return m


def hmm_ops_log_likelihood_range(n_values, truncation_multiplier=100.0):
    """``(C, a0)``: one entry's log-likelihood range and the per-feature truncation points.

    Parameters
    ----------
    n_values : sequence of int
        ``V_f >= 2`` per feature.
    truncation_multiplier : float, default 100.0
        ``m > 1``: emissions truncated at ``a0_f = 1/(m V_f)`` (Foulds et al. used 100 and 10).

    Returns
    -------
    C : float
        ``sum_f log((1 - (V_f - 1) a0_f) / a0_f)``, each term rounded up (never under-counted).
    a0 : tuple of float

    Examples
    --------
    >>> c, a0 = hmm_ops_log_likelihood_range([2, 2, 2, 2, 2])
    >>> a0[0], round(c, 9) == round(5 * math.log(199.0), 9)
    (0.005, True)
    """
    vals = _n_values(n_values)
    m = _multiplier(truncation_multiplier)
    a0 = tuple(1.0 / (m * v) for v in vals)
    terms = [
        dirichlet_categorical_log_likelihood_range(p, v) for p, v in zip(a0, vals, strict=True)
    ]
    return round_up(sum(Fraction(t) for t in terms)), a0


def mcmc_sample_guarantee(epsilon, tv_distance) -> PrivacyGuarantee:
    """``(ε, (1 + e^ε) δ_TV)``: an approximate draw within ``δ_TV`` of an ``ε``-DP sampler's law.

    Wang et al. (2015), Prop. 3 (Foulds et al. 2016, Sec. 4, Prop. 3). If the exact sampler
    ``P_D`` is ``ε``-DP and the approximate one ``P'_D`` satisfies
    ``sup_S |P'_D(S) - P_D(S)| <= δ_TV`` for every data set ``D``, then
    ``P'_D(S) <= P_D(S) + δ_TV <= e^ε P_{D'}(S) + δ_TV <= e^ε P'_{D'}(S) + (1 + e^ε) δ_TV``.

    Parameters
    ----------
    epsilon : float
        The exact sampler's ``ε`` (finite, > 0).
    tv_distance : float
        A bound on the total variation distance, in ``[0, 1]``, holding for *every* data set
        (for an MCMC run: the distance of its final state's law to the target, which the user
        must vouch for; it cannot be estimated from the run).

    Returns
    -------
    PrivacyGuarantee
        ``delta`` rounded up, at most 1.

    Examples
    --------
    >>> g = mcmc_sample_guarantee(1.0, 1e-9)
    >>> g.epsilon, 3.7e-9 < g.delta < 3.72e-9
    (1.0, True)
    >>> mcmc_sample_guarantee(1.0, 0.0).delta
    0.0
    """
    eps = as_positive_finite("epsilon", epsilon)
    tv = _as_real("tv_distance", tv_distance)
    if not (math.isfinite(tv) and 0.0 <= tv <= 1.0):
        raise ValueError(f"tv_distance must be a number in [0, 1], got {tv_distance!r}")
    if tv == 0.0:
        return PrivacyGuarantee(epsilon=eps, delta=0.0)
    # (1 + e^eps) tv in floating point, then raised by a relative 2**-50 (exp and the two
    # products are each within an ulp), so delta is never under-stated
    delta = math.nextafter((1.0 + math.exp(eps)) * tv * (1.0 + 2.0**-50), math.inf)
    return PrivacyGuarantee(epsilon=eps, delta=min(1.0, delta))


@numba.njit(cache=True)
def _update_batch(log_emission, z, init, trans, rng):
    """One collapsed single-site scan of the states of every chain (in place)."""
    n_states = init.shape[0]
    b_row = trans.sum(axis=1)
    for b in range(z.shape[0]):
        zb = z[b]
        n0, n = transition_counts(zb, n_states)
        counts = (n0.astype(np.float64), n.astype(np.float64), n.sum(axis=1).astype(np.float64))
        update_states(log_emission[b], zb, counts, (init, trans, b_row), rng)


def _draw_emissions(alpha, offsets, a0, rng):
    """``phi (B, K, C)``: each feature block ``Dirichlet(alpha)`` restricted to ``>= a0_f``."""
    phi = np.empty_like(alpha)
    sizes = np.diff(offsets)
    binary = np.flatnonzero(sizes == 2)
    if binary.size:  # P(value 1) ~ Beta(alpha_1, alpha_0) on [a0, 1 - a0]: one exact call
        ones, zeros = offsets[binary] + 1, offsets[binary]
        lo = np.asarray(a0, dtype=np.float64)[binary]
        p1 = truncated_beta_rvs(alpha[..., ones], alpha[..., zeros], lo, 1.0 - lo, rng=rng)
        phi[..., ones], phi[..., zeros] = p1, 1.0 - p1
    for f in np.flatnonzero(sizes > 2):  # a loop over categorical features, vectorised inside
        lo, hi = int(offsets[f]), int(offsets[f + 1])
        block = alpha[..., lo:hi]
        flat = block.reshape(-1, hi - lo)
        out = np.empty_like(flat)
        todo = np.arange(flat.shape[0])
        for _ in range(_MAX_REJECTION_ROUNDS):
            g = rng.standard_gamma(flat[todo])
            th = g / g.sum(axis=1, keepdims=True)
            ok = np.all(th >= a0[f], axis=1)
            out[todo[ok]] = th[ok]
            todo = todo[~ok]
            if todo.size == 0:
                break
        else:
            raise ValueError(
                f"tempered_hmm_gibbs: feature {f}'s truncated Dirichlet (entries >= {a0[f]:.3g}) "
                "holds too little mass for rejection sampling; use a larger truncation_multiplier"
            )
        phi[..., lo:hi] = out.reshape(block.shape)
    return phi


def _gibbs_inputs(stats, offsets, z0, prior, truncation):
    """Validated inputs of :func:`tempered_hmm_gibbs` (``ValueError`` naming the argument)."""
    stats = np.array(stats, dtype=np.float64, order="C")
    offsets = np.asarray(offsets)
    z = np.array(z0, order="C")
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.size < 2:
        raise ValueError("offsets must be a 1-D integer array (F + 1,) starting at 0")
    offsets = offsets.astype(np.int64)
    sizes = np.diff(offsets)
    if offsets[0] != 0 or np.any(sizes < 2):
        raise ValueError("offsets must start at 0 and give every feature at least 2 values")
    if stats.ndim != 3 or stats.shape[2] != offsets[-1]:
        raise ValueError(f"stats must have shape (R, T, offsets[-1] = {offsets[-1]})")
    if not (np.all(np.isfinite(stats)) and np.all(stats >= 0)):
        raise ValueError("stats must be finite and >= 0 (the true counts)")
    try:
        init, trans, emission = (np.array(p, dtype=np.float64, order="C") for p in prior)
    except (TypeError, ValueError):
        raise ValueError("prior must be (init (K,), transition (K, K), emission (C,))") from None
    k = init.shape[0] if init.ndim == 1 else 0
    if not (k >= 1 and trans.shape == (k, k) and emission.shape == (stats.shape[2],)):
        raise ValueError("prior must be (init (K,), transition (K, K), emission (C,))")
    if not all(np.all(np.isfinite(p)) and np.all(p > 0) for p in (init, trans, emission)):
        raise ValueError("prior: every concentration must be finite and > 0")
    if z.ndim != 3 or z.shape[1:] != stats.shape[:2] or z.dtype.kind not in "iu":
        raise ValueError(f"z0 must be integer states of shape (B, R, T) = (B, {stats.shape[:2]})")
    if z.size == 0 or not np.all((z >= 0) & (z < k)):
        raise ValueError(f"z0 must hold at least one chain of states in 0..{k - 1}")
    a0 = np.asarray(truncation, dtype=np.float64)
    if a0.shape != sizes.shape or not np.all(np.isfinite(a0) & (a0 > 0) & (a0 * sizes < 1)):
        raise ValueError("truncation must give one a0_f per feature with 0 < a0_f < 1/V_f")
    return stats, offsets, z.astype(np.int64), (init, trans, emission), a0


def tempered_hmm_gibbs(stats, offsets, z0, prior, truncation, temperature, schedule, rng):
    """Gibbs sweeps of the tempered, truncated HMM posterior, for ``B`` chains at once.

    Parameters
    ----------
    stats : array_like of shape (R, T, C)
        The *true* count table, every value of every feature (feature ``f`` owns cells
        ``offsets[f]:offsets[f + 1]``), non-negative.
    offsets : array_like of int, shape (F + 1,)
    z0 : array_like of int, shape (B, R, T)
        Initial states of the ``B`` chains (copied). The first sweep draws ``phi`` given them.
    prior : tuple
        ``(init (K,), transition (K, K), emission (C,))`` Dirichlet concentrations.
    truncation : sequence of float
        ``a0_f`` per feature, ``0 < a0_f < 1/V_f``.
    temperature : float
        ``T >= 1``: the likelihood is raised to ``1/T``.
    schedule : tuple of int
        ``(tune, draws)``: sweeps discarded, then sweeps kept.
    rng : numpy.random.Generator

    Returns
    -------
    states : numpy.ndarray of shape (draws, B, R, T), int64
        The states after each kept sweep.
    emissions : numpy.ndarray of shape (draws, B, K, C)
        The ``phi`` drawn in that sweep (which the states were updated with).

    Examples
    --------
    >>> import numpy as np
    >>> stats = np.zeros((1, 4, 2)); stats[0, :2] = [40.0, 0.0]; stats[0, 2:] = [0.0, 40.0]
    >>> prior = (np.ones(2), np.ones((2, 2)), np.ones(2))
    >>> z, phi = tempered_hmm_gibbs(stats, [0, 2], np.zeros((3, 1, 4), int), prior, [0.05],
    ...                             2.0, (20, 1), np.random.default_rng(0))
    >>> z.shape, phi.shape, bool(np.all(phi >= 0.05))
    ((1, 3, 1, 4), (1, 3, 2, 2), True)
    """
    stats, offsets, z, (init, trans, emission), truncation = _gibbs_inputs(
        stats, offsets, z0, prior, truncation
    )
    temperature = as_positive_finite("temperature", temperature)
    if not (isinstance(schedule, tuple | list) and len(schedule) == 2):
        raise ValueError(f"schedule must be a pair (tune, draws), got {schedule!r}")
    tune = _as_int_bound("schedule[0] (tune)", schedule[0], 0)
    draws = _as_int_bound("schedule[1] (draws)", schedule[1], 1)
    k, (n_chains, n_regions, n_steps) = init.shape[0], z.shape
    flat = stats.reshape(n_regions * n_steps, -1) / temperature  # tempered statistics
    out_z = np.empty((draws, *z.shape), dtype=np.int64)
    out_phi = np.empty((draws, n_chains, k, flat.shape[1]))
    eye = np.eye(k)
    for it in range(tune + draws):  # a loop over sweeps; each is vectorised over chains
        onehot = eye[z.reshape(n_chains, -1)]  # (B, R T, K)
        alpha = emission + np.einsum("bnk,nc->bkc", onehot, flat)
        phi = _draw_emissions(alpha, offsets, truncation, rng)
        log_em = np.einsum("nc,bkc->bnk", flat, np.log(phi)).reshape(
            n_chains, n_regions, n_steps, k
        )
        _update_batch(np.ascontiguousarray(log_em), z, init, trans, rng)
        if it >= tune:
            out_z[it - tune], out_phi[it - tune] = z, phi
    return out_z, out_phi


@dataclass(frozen=True, eq=False)
class HMMOnePosteriorSample:
    """One OPS draw of a private HMM (:func:`hmm_one_posterior_sample`).

    Attributes
    ----------
    states : numpy.ndarray of shape (R, T), int64
    emissions : tuple of numpy.ndarray
        Per feature ``f``, shape ``(K, V_f)``, every entry ``>= a0_f``.
    transition : numpy.ndarray of shape (K, K)
        ``E[A | states]`` under the prior (post-processing of the released states).
    init : numpy.ndarray of shape (K,)
        ``E[pi | states]``.
    epsilon : float
        The ``ε`` of one exact draw of the tempered posterior (``2C/T``, at most the target).
    temperature : float
    log_likelihood_range : float
        ``C``.
    truncation : tuple of float
        ``a0_f`` per feature.
    sweeps : int
        Gibbs sweeps run (the draw is the state after the last one).

    Examples
    --------
    >>> import numpy as np
    >>> entries = {"region": [0] * 6, "month": [0, 0, 0, 1, 1, 1],
    ...            "features": [[1], [1], [0], [0], [0], [1]]}
    >>> ops = hmm_one_posterior_sample(entries, shape=(1, 2), n_states=2, epsilon=1.0,
    ...                                sweeps=5, rng=np.random.default_rng(0), allow_float=True)
    >>> ops.exact, ops.epsilon <= 1.0, ops.guarantee().epsilon >= 2 * 5 * ops.epsilon
    (False, True, True)
    >>> ops.approximate_guarantee(1e-6).delta < 1e-5
    True
    """

    states: np.ndarray
    emissions: tuple[np.ndarray, ...]
    transition: np.ndarray
    init: np.ndarray
    epsilon: float
    temperature: float
    log_likelihood_range: float
    truncation: tuple[float, ...]
    sweeps: int

    @property
    def exact(self) -> bool:
        """Whether the draw is an exact draw of the tempered posterior (only with ``K = 1``)."""
        return self.init.shape[0] == 1

    def converged_guarantee(self) -> PrivacyGuarantee:
        """``ε = 2C/T``: holds for an exact draw (``K = 1``) or a chain at stationarity."""
        return PrivacyGuarantee(epsilon=self.epsilon)

    def approximate_guarantee(self, tv_distance) -> PrivacyGuarantee:
        """``(ε, (1 + e^ε) δ_TV)`` for a chain within ``δ_TV`` of stationarity (Prop. 3)."""
        return mcmc_sample_guarantee(self.epsilon, tv_distance)

    def guarantee(self) -> PrivacyGuarantee:
        """The guarantee without a convergence assumption: ``2 S ε`` for ``S`` sweeps (Sec. 4.1).

        ``ε`` itself when ``K = 1`` (the draw is exact; module docstring).
        """
        if self.exact:
            return self.converged_guarantee()
        return PrivacyGuarantee(epsilon=round_up(2 * self.sweeps * Fraction(self.epsilon)))

    @property
    def note(self) -> str:
        """What the guarantees mean, in words."""
        if self.exact:
            return (
                f"one exact draw of the tempered posterior (K = 1): {self.epsilon:.4g}-DP per "
                "entry (in exact arithmetic; the draw used floating point)"
            )
        return (
            f"one Gibbs draw after {self.sweeps} sweeps: {self.epsilon:.4g}-DP per entry only "
            "if the chain has converged (approximate_guarantee(tv) for a chain within total "
            f"variation tv of it); without that assumption {self.guarantee().epsilon:.4g}-DP "
            "(composition of the Gibbs updates, Foulds et al. Sec. 4.1). In exact arithmetic; "
            "the chain used floating point"
        )


def hmm_one_posterior_sample(
    entries,
    *,
    shape,
    n_states,
    epsilon,
    n_values=2,
    truncation_multiplier=100.0,
    prior=None,
    sweeps=200,
    rng=None,
    allow_float=False,
) -> HMMOnePosteriorSample:
    """One Posterior Sample of a private HMM (Foulds et al. 2016, Secs. 5 and 4.1).

    One draw ``(states, emissions)`` of the HMM posterior tempered at ``T = 2C/ε`` with the
    emissions truncated at ``a0_f = 1/(m V_f)``: ``ε``-DP per entry if the draw is exact
    (module docstring). It is the last state of a Gibbs chain of ``sweeps`` sweeps from
    uniform random states, so its ``guarantee()`` is ``2 * sweeps * ε`` unless ``K = 1``;
    ``converged_guarantee()`` and ``approximate_guarantee(tv)`` state what holds at
    (or within ``tv`` of) convergence.

    Parameters
    ----------
    entries : mapping or tuple
        As for :func:`~pymc_dp.releases.hmm.release_hmm_counts`.
    shape : tuple of int
        ``(R, T)``.
    n_states : int
        ``K >= 1``.
    epsilon : float
        The ``ε`` of one exact draw (finite, > 0): ``T = max(1, 2C/ε)``.
    n_values : int or sequence of int, default 2
    truncation_multiplier : float, default 100.0
        ``m > 1`` (Foulds et al.: 100 or 10).
    prior : HMMPrior, optional
        Dirichlet concentrations (the emission prior is truncated like the posterior).
    sweeps : int, default 200
        Gibbs sweeps (Foulds et al. ran 200 iterations).
    rng : numpy.random.Generator or int, optional
    allow_float : bool, default False
        Must be ``True``: the chain draws in floating point, so the guarantees hold only up to
        its rounding (Mironov 2012); there is no exact route for this model.

    Returns
    -------
    HMMOnePosteriorSample

    Raises
    ------
    ValueError
        Naming the argument (entries, shape, n_values, n_states, epsilon,
        truncation_multiplier, sweeps, allow_float).
    TypeError
        For a ``prior`` that is not an :class:`~pymc_dp.releases.HMMPrior`, or a non-bool
        ``allow_float``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> month = np.repeat(np.arange(6), 60)
    >>> feats = (rng.random((360, 3)) < np.where(month[:, None] < 3, 0.9, 0.1)).astype(int)
    >>> ops = hmm_one_posterior_sample(
    ...     {"region": np.zeros(360, int), "month": month, "features": feats}, shape=(1, 6),
    ...     n_states=2, epsilon=5.0, sweeps=30, rng=rng, allow_float=True)
    >>> s = ops.states[0]
    >>> bool((s[:3] == s[0]).all() and (s[3:] == s[3]).all() and s[0] != s[3])
    True
    >>> round(ops.temperature, 2), [e.shape for e in ops.emissions]
    (6.35, [(2, 2), (2, 2), (2, 2)])
    """
    if not as_bool("allow_float", allow_float):
        raise ValueError(
            "hmm_one_posterior_sample draws by a floating-point Gibbs chain, whose rounding can "
            "leak the data (Mironov 2012), so its guarantees hold only in exact arithmetic: pass "
            "allow_float=True to accept that (simulations). For an exact per-entry guarantee "
            "release the counts with release_hmm_counts (exact geometric noise)"
        )
    counts, n, vals = _table(entries, shape, n_values)
    k = _as_int_bound("n_states", n_states, 1)
    eps = as_positive_finite("epsilon", epsilon)
    sweeps = _as_int_bound("sweeps", sweeps, 1)
    c, a0 = hmm_ops_log_likelihood_range(vals, truncation_multiplier)
    a, b, e = _resolve_prior(prior, k)
    ops = OnePosteriorSample(eps, c)
    stats, offsets = _full_table(counts, n, vals)
    gen = np.random.default_rng(rng)
    z0 = gen.integers(0, k, size=(1, *n.shape))
    z, phi = tempered_hmm_gibbs(
        stats, offsets, z0, (a, b, np.full(int(offsets[-1]), e)), a0, ops.temperature,
        (sweeps - 1, 1), gen,
    )  # fmt: skip
    states, phi = z[0, 0], phi[0, 0]
    n0, nt = transition_counts(states, k)
    return HMMOnePosteriorSample(
        states=states,
        emissions=tuple(phi[:, offsets[f] : offsets[f + 1]] for f in range(len(vals))),
        transition=(nt + b) / (nt + b).sum(axis=1, keepdims=True),
        init=(n0 + a) / (n0 + a).sum(),
        epsilon=ops.guarantee().epsilon,
        temperature=ops.temperature,
        log_likelihood_range=c,
        truncation=a0,
        sweeps=sweeps,
    )
