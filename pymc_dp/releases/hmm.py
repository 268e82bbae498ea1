r"""Private hidden Markov models from released per-step feature counts (Foulds et al. 2016, Sec. 5).

Data. Each entry (a log entry in Foulds et al.'s war-log case study) has a region ``r`` in
``0..R-1``, a month ``t`` in ``0..T-1`` and ``F`` categorical features, feature ``f`` taking
values ``0..V_f-1``. The model is an HMM with one chain per region and one step per month;
given the step's latent state ``k``, the features of each entry are independent categorical
draws with probabilities ``phi[f, k]`` (naive Bayes). The likelihood of the entries depends on
them only through the count table ``c[r, t, f, v]`` (entries of step ``(r, t)`` with feature
``f`` equal to ``v``), which is what :func:`release_hmm_counts` releases, once.

Released cells. A binary feature (``V_f = 2``) is released as its count of ones only, since
its count of zeros is ``N[r, t]`` minus it; a feature with ``V_f > 2`` as its full row of
``V_f`` counts. The cells are laid out flat along the last axis (``HMMCountsRelease.cells``).

Neighbouring datasets and sensitivity. The numbers of entries per step, ``N[r, t]``, are
public (released without noise, like ``n`` in the rest of pymc_dp): neighbouring datasets
differ in the feature values of one entry, whose region and month are kept. Replacing one
entry's features changes, for each binary feature, its count of ones by at most 1, and for
each categorical feature two cells of the row by 1 (one down, one up). So the exact L1
sensitivity of the whole table is ``F_bin + 2 F_cat`` (``F`` when all features are binary as in
Foulds et al.; ``2F`` when all are categorical) and the L2 sensitivity ``sqrt(F_bin +
2 F_cat)``; both are attained by an entry whose every feature changes. (If the region or month
of an entry were private as well, the count of ones of a binary feature could move in two
steps at once and the L1 sensitivity of binary features would double; that setting is not
what this release covers.)

Inference. :meth:`HMMCountsRelease.plugin_gibbs` is Foulds et al.'s plug-in sampler (noisy
counts projected to ``[0, N]`` and used as the sufficient statistics;
:mod:`pymc_dp.kernels.hmm_plugin`). :meth:`HMMCountsRelease.model` is the noise-aware
PyMC model in which the true counts are integrated out exactly: for binary features the count
of ones of step ``(r, t)`` is ``Binomial(N[r, t], phi[f, s[r, t]])`` given the state, observed
through the mechanism (:class:`pymc_dp.distributions.privatized.Privatized`); for a feature
with ``V_f > 2`` values the row of ``V_f`` counts is ``Multinomial(N[r, t], phi_f[s[r, t]])``
with independent noise on each cell, and its exact marginal (a sum over all compositions of
``N``) is computed as a convolution over the running total in ``O(V_f N^2)``
(:mod:`pymc_dp.math.multinomial_noise`); the state chains are a
:class:`pymc_dp.distributions.markov_chain.MarkovChain`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.kernels.hmm_plugin import PluginPrior, plugin_gibbs_chain
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.releases._families import (
    MAX_CATEGORIES,
    _as_int_bound,
    _as_records,
    _integers,
    _sqrt_up,
)
from pymc_dp.releases.sufficient import _calibrate, _readonly, release_values

__all__ = [
    "HMMCountsRelease",
    "HMMPrior",
    "PluginGibbsResult",
    "hmm_count_sensitivity",
    "hmm_count_table",
    "release_hmm_counts",
]


def _n_values(n_values, n_features: int | None = None) -> tuple[int, ...]:
    """Validated ``V_f`` per feature (an int is repeated ``n_features`` times)."""
    if isinstance(n_values, Sequence | np.ndarray):
        vals = tuple(
            _as_int_bound(f"n_values[{f}]", v, 2, MAX_CATEGORIES) for f, v in enumerate(n_values)
        )
        if len(vals) == 0:
            raise ValueError("n_values must name at least one feature")
        if n_features is not None and len(vals) != n_features:
            raise ValueError(
                f"n_values gives {len(vals)} features but the entries have {n_features}"
            )
        return vals
    v = _as_int_bound("n_values", n_values, 2, MAX_CATEGORIES)
    if n_features is None:
        raise ValueError("n_values must be a sequence (one number of values per feature)")
    return (v,) * n_features


def _cell_layout(n_values: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """``(feature, value)`` of each released cell: ones for binary, every value otherwise."""
    cells = []
    for f, v in enumerate(n_values):
        cells.extend([(f, 1)] if v == 2 else [(f, j) for j in range(v)])
    return tuple(cells)


def hmm_count_sensitivity(n_values) -> tuple[float, float]:
    """Exact replace-one L1 and L2 sensitivity of the released HMM count table.

    Parameters
    ----------
    n_values : sequence of int
        ``V_f`` (at least 2) per feature.

    Returns
    -------
    tuple of float
        ``(F_bin + 2 F_cat, sqrt(F_bin + 2 F_cat))`` (the root rounded up), ``F_bin`` the
        number of binary features (released as counts of ones) and ``F_cat`` the others.

    Examples
    --------
    >>> hmm_count_sensitivity([2, 2, 2, 2, 2])
    (5.0, 2.23606797749979)
    >>> hmm_count_sensitivity([2, 4])[0]
    3.0
    """
    vals = _n_values(n_values)
    m = sum(1 if v == 2 else 2 for v in vals)
    return float(m), _sqrt_up(m)


def _entries(entries, shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated ``(region, month, features)`` int64 arrays."""
    if isinstance(entries, Mapping):
        missing = {"region", "month", "features"} - set(entries)
        if missing:
            raise ValueError(
                f"entries must have keys 'region', 'month', 'features'; missing {sorted(missing)}"
            )
        parts = (entries["region"], entries["month"], entries["features"])
    elif isinstance(entries, tuple) and len(entries) == 3:
        parts = entries
    else:
        raise ValueError(
            "entries must be a mapping {'region': (n,), 'month': (n,), 'features': (n, F)} or "
            f"a tuple (region, month, features), got {type(entries).__name__}"
        )
    names = ("entries['region']", "entries['month']", "entries['features']")
    region, month, feats = (
        _integers(_as_records(p, nm), nm) for p, nm in zip(parts, names, strict=True)
    )
    if feats.ndim == 1:
        feats = feats[:, None]
    if region.ndim != 1 or month.ndim != 1 or feats.ndim != 2:
        raise ValueError("entries: region and month must be 1-D, features (n, F)")
    if not region.shape[0] == month.shape[0] == feats.shape[0]:
        raise ValueError("entries: region, month and features must have the same length n")
    for arr, lim, nm in ((region, shape[0], names[0]), (month, shape[1], names[1])):
        if np.any((arr < 0) | (arr >= lim)):
            raise ValueError(f"{nm} must lie in 0..{lim - 1} (shape={shape})")
    return region, month, feats


def _shape(shape) -> tuple[int, int]:
    if not isinstance(shape, Sequence) or len(shape) != 2:
        raise ValueError(f"shape must be (regions, months), got {shape!r}")
    return (_as_int_bound("shape[0]", shape[0], 1), _as_int_bound("shape[1]", shape[1], 1))


def _table(entries, shape, n_values):
    """``(counts, entries per step, n_values)``, validated (see :func:`hmm_count_table`)."""
    shape = _shape(shape)
    region, month, feats = _entries(entries, shape)
    vals = _n_values(n_values, feats.shape[1])
    if np.any((feats < 0) | (feats >= np.asarray(vals))):
        raise ValueError(f"entries['features'] column f must lie in 0..n_values[f]-1 ({vals})")
    step = region * shape[1] + month
    n_steps = shape[0] * shape[1]
    cols = []
    for f, v in enumerate(vals):  # one bincount per feature, vectorised over entries
        tab = np.bincount(step * v + feats[:, f], minlength=n_steps * v).reshape(n_steps, v)
        cols.append(tab[:, 1:] if v == 2 else tab)
    counts = np.concatenate(cols, axis=1).reshape(*shape, -1)
    return counts, np.bincount(step, minlength=n_steps).reshape(shape), vals


def hmm_count_table(entries, *, shape, n_values=2) -> tuple[np.ndarray, np.ndarray]:
    """The true count table of the released cells and the entries per step.

    Parameters
    ----------
    entries : mapping or tuple
        ``{"region": (n,), "month": (n,), "features": (n, F)}`` or ``(region, month,
        features)``; integers, region in ``0..R-1``, month in ``0..T-1``, feature ``f`` in
        ``0..V_f-1``.
    shape : tuple of int
        ``(R, T)``: regions and months (public).
    n_values : int or sequence of int, default 2
        ``V_f`` per feature (an int: the same for every feature).

    Returns
    -------
    counts : numpy.ndarray of shape (R, T, C), int64
        ``counts[r, t, i]``: entries of step ``(r, t)`` with feature ``cells[i][0]`` equal to
        ``cells[i][1]``; binary features give one cell (their ones), others ``V_f`` cells.
    entries_per_step : numpy.ndarray of shape (R, T), int64

    Examples
    --------
    >>> c, n = hmm_count_table({"region": [0, 0, 1], "month": [1, 1, 0],
    ...                         "features": [[1, 0], [1, 1], [0, 1]]}, shape=(2, 2))
    >>> c[0, 1].tolist(), c[1, 0].tolist(), n.tolist()
    ([2, 1], [0, 1], [[0, 2], [1, 0]])
    """
    counts, n, _ = _table(entries, shape, n_values)
    return counts, n


@dataclass(frozen=True)
class HMMPrior:
    """Dirichlet concentrations of the private HMM (shared by the plug-in and the model).

    Attributes
    ----------
    init : float or array_like of shape (K,), default 1.0
        Initial-state distribution (shared by the regions).
    transition : float or array_like of shape (K, K), default 1.0
        Row ``j``: the transition row from state ``j`` (e.g. a larger diagonal for sticky
        states).
    emission : float, default 1.0
        Each feature's emission distribution per state: ``Dirichlet(emission, ...)``, i.e.
        ``Beta(emission, emission)`` for binary features.

    Examples
    --------
    A sticky prior on the transitions reaches the model's ``transition ~ Dirichlet``:

    >>> import numpy as np
    >>> from pymc_dp.releases import HMMPrior, release_hmm_counts
    >>> HMMPrior()
    HMMPrior(init=1.0, transition=1.0, emission=1.0)
    >>> rel = release_hmm_counts(
    ...     {"region": [0, 0, 1, 1], "month": [0, 1, 0, 1], "features": [[1], [0], [1], [1]]},
    ...     shape=(2, 2), epsilon=1.0, rng=np.random.default_rng(0))
    >>> sticky = HMMPrior(transition=np.array([[9.0, 1.0], [1.0, 9.0]]))
    >>> m = rel.model(2, prior=sticky)
    >>> m["transition"].owner.inputs[-1].eval().tolist()  # the Dirichlet's concentrations
    [[9.0, 1.0], [1.0, 9.0]]
    """

    init: float | np.ndarray = 1.0
    transition: float | np.ndarray = 1.0
    emission: float = 1.0

    def resolve(self, n_states: int) -> tuple[np.ndarray, np.ndarray, float]:
        """``(init (K,), transition (K, K), emission)`` as float64, validated."""
        out = []
        for name, value, shp in (
            ("init", self.init, (n_states,)),
            ("transition", self.transition, (n_states, n_states)),
        ):
            a = np.asarray(value, dtype=np.float64)
            try:
                a = np.broadcast_to(a, shp).copy()
            except ValueError:
                raise ValueError(f"prior.{name} must broadcast to {shp}") from None
            if not (np.all(np.isfinite(a)) and np.all(a > 0)):
                raise ValueError(f"prior.{name} must be finite and > 0, got {value!r}")
            out.append(a)
        e = float(self.emission)
        if not (np.isfinite(e) and e > 0):
            raise ValueError(f"prior.emission must be finite and > 0, got {self.emission!r}")
        return out[0], out[1], e


def _resolve_prior(prior, n_states: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``HMMPrior.resolve`` of ``prior`` (``HMMPrior()`` for None); ``TypeError`` naming
    ``prior`` for anything that is not an :class:`HMMPrior`."""
    prior = HMMPrior() if prior is None else prior
    if not isinstance(prior, HMMPrior):
        raise TypeError(f"prior must be an HMMPrior, got {prior!r}")
    return prior.resolve(n_states)


@dataclass(frozen=True, eq=False)
class PluginGibbsResult:
    """Draws of the plug-in Gibbs sampler (:meth:`HMMCountsRelease.plugin_gibbs`).

    Attributes
    ----------
    states : numpy.ndarray of shape (draws, R, T), int64
    emissions : tuple of numpy.ndarray
        Per feature ``f``, shape ``(draws, K, V_f)``: the emission probabilities drawn in
        each sweep (for a binary feature, ``[..., 1]`` is ``P(feature = 1 | state)``).
    transition : numpy.ndarray of shape (draws, K, K)
        ``E[A | states]`` of each draw (the transitions are collapsed, so this is their
        conditional posterior mean).
    init : numpy.ndarray of shape (draws, K)
        ``E[pi | states]`` of each draw.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.releases import PluginGibbsResult, release_hmm_counts
    >>> rel = release_hmm_counts(
    ...     {"region": [0, 0, 1, 1], "month": [0, 1, 0, 1], "features": [[1], [0], [1], [1]]},
    ...     shape=(2, 2), epsilon=1.0, rng=np.random.default_rng(0))
    >>> res = rel.plugin_gibbs(2, draws=4, tune=2, rng=1)
    >>> isinstance(res, PluginGibbsResult), res.states.shape, res.transition.shape
    (True, (4, 2, 2), (4, 2, 2))
    >>> res.init.shape, [e.shape for e in res.emissions]
    ((4, 2), [(4, 2, 2)])
    >>> bool(np.allclose(res.transition.sum(-1), 1.0) and np.allclose(res.init.sum(-1), 1.0))
    True
    """

    states: np.ndarray
    emissions: tuple[np.ndarray, ...]
    transition: np.ndarray
    init: np.ndarray


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class HMMCountsRelease:
    """Noisy per-step feature counts of a private HMM's entries (one release).

    Attributes
    ----------
    counts : numpy.ndarray of shape (R, T, C)
        The released (noisy) cells, read-only; see ``cells``.
    entries_per_step : numpy.ndarray of shape (R, T), int64
        ``N[r, t]``, public (not noised; neighbouring datasets keep every entry's step).
    n_values : tuple of int
        ``V_f`` per feature.
    mechanism : Mechanism
        The mechanism that released the whole table.
    sensitivity : tuple of float
        Exact ``(L1, L2)`` replace-one sensitivity of the table.

    Examples
    --------
    Two regions, two steps, one binary feature: ``N[r, t]`` stays public and exact, the
    counts of ones are released with exact two-sided geometric noise calibrated to the
    sensitivity ``(1, 1)``.

    >>> import numpy as np
    >>> from pymc_dp.releases import HMMCountsRelease, release_hmm_counts
    >>> rel = release_hmm_counts(
    ...     {"region": [0, 0, 1, 1], "month": [0, 1, 0, 1], "features": [[1], [0], [1], [1]]},
    ...     shape=(2, 2), epsilon=1.0, rng=np.random.default_rng(0))
    >>> isinstance(rel, HMMCountsRelease), rel.counts.shape, rel.entries_per_step.tolist()
    (True, (2, 2, 1), [[1, 1], [1, 1]])
    >>> rel.n_values, rel.sensitivity, rel.guarantee().epsilon
    ((2,), (1.0, 1.0), 1.0)
    """

    counts: np.ndarray
    entries_per_step: np.ndarray
    n_values: tuple[int, ...]
    mechanism: Mechanism
    sensitivity: tuple[float, float]

    @property
    def shape(self) -> tuple[int, int]:
        """``(R, T)``."""
        return tuple(int(s) for s in self.entries_per_step.shape)

    @property
    def cells(self) -> tuple[tuple[int, int], ...]:
        """``(feature, value)`` counted by each cell of the last axis of ``counts``."""
        return _cell_layout(self.n_values)

    @property
    def binary(self) -> bool:
        """Whether every feature is binary (released as counts of ones)."""
        return all(v == 2 for v in self.n_values)

    def guarantee(self) -> PrivacyGuarantee:
        """Per-entry guarantee: ``mechanism.guarantee()`` at its declared sensitivity (at least
        the table's, so never under-counted)."""
        return self.mechanism.guarantee()

    def plugin_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """Noisy counts projected to ``[0, N[r, t]]`` (Foulds eq. 16) as a full table.

        Returns
        -------
        stats : numpy.ndarray of shape (R, T, sum V_f), float64
            Feature ``f`` owns columns ``offsets[f]:offsets[f + 1]`` (one per value); a binary
            feature's zeros are ``N`` minus its projected ones.
        offsets : numpy.ndarray of shape (F + 1,), int64
        """
        n = self.entries_per_step.astype(np.float64)
        proj = np.clip(np.asarray(self.counts, dtype=np.float64), 0.0, n[..., None])
        return _full_table(proj, n, self.n_values)

    def plugin_gibbs(self, n_states, draws=100, *, tune=100, prior=None, rng=None):
        """Foulds et al.'s plug-in Gibbs sampler: the projected noisy counts as statistics.

        Transition probabilities collapsed, naive-Bayes emissions drawn from their Dirichlet
        conditionals, single-site updates of each ``(region, month)`` state (Foulds et al.
        Sec. 5; :mod:`pymc_dp.kernels.hmm_plugin`). It ignores the noise (beyond projecting)
        and costs no further privacy.

        Parameters
        ----------
        n_states : int
            ``K >= 1``.
        draws : int, default 100
            Sweeps kept (one draw each).
        tune : int, default 100
            Sweeps discarded first (Foulds et al. ran 200 iterations, 100 as burn-in).
        prior : HMMPrior, optional
        rng : numpy.random.Generator or int, optional
            Seeds the initial states (uniform) and the sweeps.

        Returns
        -------
        PluginGibbsResult

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> month = np.repeat(np.arange(6), 40)
        >>> feats = (rng.random((240, 2)) < np.where(month[:, None] < 3, 0.9, 0.1)).astype(int)
        >>> rel = release_hmm_counts({"region": np.zeros(240, int), "month": month,
        ...                           "features": feats}, shape=(1, 6), epsilon=5.0, rng=rng)
        >>> res = rel.plugin_gibbs(2, draws=20, tune=20, rng=1)
        >>> s = res.states[-1, 0]
        >>> bool((s[:3] == s[0]).all() and (s[3:] == s[3]).all() and s[0] != s[3])
        True
        """
        k = _as_int_bound("n_states", n_states, 1)
        draws = _as_int_bound("draws", draws, 1)
        tune = _as_int_bound("tune", tune, 0)
        a, b, e = _resolve_prior(prior, k)
        stats, offsets = self.plugin_statistics()
        rng = np.random.default_rng(rng)
        z0 = rng.integers(0, k, size=self.shape)
        kp = PluginPrior(a, b, np.full(int(offsets[-1]), e))
        out = plugin_gibbs_chain(stats, offsets, z0, kp, (tune, draws), rng)
        trans = (out.transition_counts + b) / (out.transition_counts + b).sum(-1, keepdims=True)
        init = (out.init_counts + a) / (out.init_counts + a).sum(-1, keepdims=True)
        emissions = tuple(
            out.emissions[:, :, offsets[f] : offsets[f + 1]] for f in range(len(self.n_values))
        )
        return PluginGibbsResult(out.states, emissions, trans, init)

    def model(self, n_states, *, prior=None):
        """The noise-aware PyMC model: true counts integrated out, sampled by ``pm.sample``.

        Variables: ``init_probs ~ Dirichlet`` (K), ``transition ~ Dirichlet`` (K, K),
        ``states ~ MarkovChain(init_probs, transition)`` of shape (R, T), and per kind of
        feature:

        * binary features: ``emission ~ Beta(e, e)`` of shape (F_bin, K) (``P(feature f = 1
          | state k)``) and the release ``counts = Privatized(Binomial(N[r, t], emission[f,
          states[r, t]]), mechanism)`` observed at the noisy counts of ones (R, T, F_bin);
        * each feature ``f`` with ``V_f > 2`` values: ``emission_{f} ~ Dirichlet(e, ..., e)``
          of shape (K, V_f) and the release ``counts_{f}`` observed at its noisy rows
          (R, T, V_f), whose log-likelihood is the exact marginal of
          ``Multinomial(N[r, t], emission_{f}[states[r, t]])`` with independent noise on each
          cell (:mod:`pymc_dp.math.multinomial_noise`).

        With only binary features (Foulds et al.'s setting) the model is the one it always
        was: ``emission`` of shape (F, K) and ``counts`` of shape (R, T, F), built in the same
        order (same graph, same draws). ``pm.sample()`` updates the states with the FFBS step
        and the rest with NUTS.

        Parameters
        ----------
        n_states : int
            ``K >= 1``.
        prior : HMMPrior, optional

        Returns
        -------
        pymc.Model

        Notes
        -----
        Under the default (symmetric) prior the states are exchangeable: relabelling them
        leaves the posterior unchanged, so different chains can settle on different labels and
        summaries pooled over chains (``az.summary``) then mix the states (R-hat flags it).
        Compare chains after relabelling each by a feature's emission order, or give the
        states distinguishable priors (e.g. ``HMMPrior(init=[...])`` with unequal
        concentrations).

        Categorical features. The marginal of a released row ``z`` given the state is the
        sum over every composition of ``N`` into ``V_f`` cells; it is a convolution of ``V_f``
        per-cell sequences ``p_j^c / c! eta(z_j - c)`` evaluated at ``N`` (the multinomial
        as sequential binomials over the running total), computed exactly in log space in
        ``O(V_f N^2)`` per row and state, with its gradient in the emission probabilities
        from a backward pass (:mod:`pymc_dp.math.multinomial_noise`). Every step's row costs
        this once per NUTS gradient and ``K`` times per FFBS sweep, so steps with thousands
        of entries are slow (about ``1.5 V_f N^2`` exponentials per row); binarizing a
        feature (one-vs-rest, as Foulds et al. did) is the cheaper approximation.

        Raises
        ------
        ValueError
            For invalid ``n_states`` or ``prior`` (the message names it); for a categorical
            feature, when ``entries_per_step`` holds a negative or non-integer number or a
            step has more than :data:`~pymc_dp.math.multinomial_noise.MAX_TRIALS` entries,
            or when its released cells are NaN, infinite or (integer mechanism) fractional.
        TypeError
            For a ``prior`` that is not an :class:`HMMPrior`.
        NotImplementedError
            When a feature has more than two values and the mechanism's noise law is not one
            of the built-in families (Laplace, Gaussian, two-sided geometric, discrete
            Gaussian): the exact row marginal is compiled for those only. Binarize the
            feature, or use :meth:`plugin_gibbs`.

        Examples
        --------
        >>> import numpy as np
        >>> rel = release_hmm_counts(
        ...     {"region": [0, 0, 1, 1], "month": [0, 1, 0, 1], "features": [[1], [0], [1], [1]]},
        ...     shape=(2, 2), epsilon=1.0, rng=np.random.default_rng(0))
        >>> m = rel.model(2)
        >>> sorted(v.name for v in m.free_RVs)
        ['emission', 'init_probs', 'states', 'transition']

        A binary and a 3-valued feature:

        >>> rel = release_hmm_counts(
        ...     {"region": [0, 0, 0], "month": [0, 1, 1], "features": [[1, 2], [0, 0], [1, 1]]},
        ...     shape=(1, 2), n_values=[2, 3], epsilon=1.0, rng=np.random.default_rng(0))
        >>> m = rel.model(2)
        >>> sorted(v.name for v in m.free_RVs), sorted(v.name for v in m.observed_RVs)
        (['emission', 'emission_1', 'init_probs', 'states', 'transition'], ['counts', 'counts_1'])
        >>> m.named_vars_to_dims["emission_1"], m.named_vars_to_dims["counts_1"]
        (('state', 'value_1'), ('region', 'month', 'value_1'))
        """
        import pymc as pm
        import pytensor.tensor as pt

        from pymc_dp.distributions.markov_chain import MarkovChain
        from pymc_dp.distributions.privatized import Privatized

        k = _as_int_bound("n_states", n_states, 1)
        a, b, e = _resolve_prior(prior, k)
        r, t = self.shape
        binary = [j for j, v in enumerate(self.n_values) if v == 2]
        categorical = [j for j, v in enumerate(self.n_values) if v > 2]
        noise = _categorical_noise(self) if categorical else None
        coords = {"region": range(r), "month": range(t)}
        coords |= {"feature": binary}  # every feature when all are binary
        coords |= {"state": range(k), "next_state": range(k)}
        coords |= {f"value_{j}": range(self.n_values[j]) for j in categorical}
        columns = _feature_columns(self.n_values)
        with pm.Model(coords=coords) as model:
            # the release as data (not graph constants): the compiled functions do not depend
            # on it, so numba's on-disk cache serves every release of the same shape
            n_data = pm.Data(
                "entries_per_step",
                np.asarray(self.entries_per_step, dtype=np.int64),
                dims=("region", "month"),
            )
            if binary:
                ones = [columns[j].start for j in binary]
                released = pm.Data(
                    "released_counts",
                    np.asarray(self.counts[..., ones], dtype=np.float64),
                    dims=("region", "month", "feature"),
                )
            init = pm.Dirichlet("init_probs", a=a, dims="state")
            trans = pm.Dirichlet("transition", a=b, dims=("state", "next_state"))
            e64 = np.float64(e)
            if binary:
                phi = pm.Beta("emission", alpha=e64, beta=e64, dims=("feature", "state"))
            phis = {
                j: pm.Dirichlet(
                    f"emission_{j}",
                    a=np.full((k, self.n_values[j]), e64),
                    dims=("state", f"value_{j}"),
                )
                for j in categorical
            }
            states = MarkovChain("states", init, trans, dims=("region", "month"))
            if binary:
                fb = len(binary)
                p = phi.T[states]  # (R, T, F_bin)
                n = pt.broadcast_to(n_data[..., None], (r, t, fb))
                Privatized(
                    "counts",
                    pm.Binomial.dist(n=n, p=p),
                    self.mechanism,
                    observed=released,
                    dims=("region", "month", "feature"),
                )
            for j in categorical:
                _categorical_release(self, j, columns[j], n_data, phis[j][states], noise)
        return model


def _feature_columns(n_values) -> list[slice]:
    """The columns of ``counts`` that each feature owns (one for a binary feature)."""
    out, i = [], 0
    for v in n_values:
        w = 1 if v == 2 else v
        out.append(slice(i, i + w))
        i += w
    return out


def _full_table(counts, n, n_values) -> tuple[np.ndarray, np.ndarray]:
    """``(table, offsets)``: the released layout ``counts`` (R, T, C) widened to one float64
    column per value of every feature, a binary feature's zeros being ``n`` minus its ones;
    feature ``f`` owns columns ``offsets[f]:offsets[f + 1]``."""
    n = np.asarray(n, dtype=np.float64)[..., None]
    counts = np.asarray(counts, dtype=np.float64)
    blocks = []
    for v, cols in zip(n_values, _feature_columns(n_values), strict=True):
        blocks += [n - counts[..., cols], counts[..., cols]] if v == 2 else [counts[..., cols]]
    offsets = np.concatenate([[0], np.cumsum(n_values)]).astype(np.int64)
    return np.concatenate(blocks, axis=-1), offsets


def _categorical_noise(release) -> tuple[int, tuple[float, ...]]:
    """``(kind, params)`` of the mechanism's noise law for the categorical rows' marginal;
    ``NotImplementedError`` for a law that is not a built-in family, ``ValueError`` for a
    step with more entries than the row marginal takes."""
    from pymc_dp.kernels.noise_logpdf import logpdf_kind
    from pymc_dp.math.multinomial_noise import MAX_TRIALS

    mech = release.mechanism
    kind = logpdf_kind(mech.numba_logpdf)
    if kind is None:
        raise NotImplementedError(
            f"the noise-aware HMM model of a feature with {max(release.n_values)} values needs "
            "the mechanism's noise law to be a built-in family (Laplace, Gaussian, Geometric, "
            f"DiscreteGaussian); {type(mech).__name__} has its own numba_logpdf. Binarize the "
            "feature (one-vs-rest indicators) and release those, or use plugin_gibbs()"
        )
    n = np.asarray(release.entries_per_step)
    if not (n.dtype.kind in "iu" and np.all(n >= 0)):
        raise ValueError(
            "entries_per_step must hold non-negative integers (the public numbers of entries "
            f"per step), got dtype {n.dtype} with minimum {n.min()!r}"
        )
    n_max = int(np.max(n))
    if n_max > MAX_TRIALS:
        raise ValueError(
            f"entries_per_step: a step has {n_max} entries, above {MAX_TRIALS}, the most the "
            "exact marginal of a categorical feature's noisy row takes (its cost grows as "
            "N**2); binarize the feature or use plugin_gibbs()"
        )
    return kind, tuple(float(v) for v in mech.numba_params)


def _categorical_release(release, feature, cols, n_data, p, noise):
    """The observed noisy rows ``counts_{feature}`` of one categorical feature, given the
    emission probabilities ``p`` (R, T, V) of each step's state."""
    import pymc as pm

    from pymc_dp.distributions._observed import prepare_observed
    from pymc_dp.math.multinomial_noise import multinomial_noise_logp

    kind, params = noise
    mech = release.mechanism
    name = f"counts_{feature}"
    dims = ("region", "month", f"value_{feature}")
    values = np.asarray(release.counts[..., cols], dtype=np.float64)
    # refused here naming the release (pm.Data itself would take NaN for missing data)
    try:
        prepare_observed(values, integer=mech.integer, release=name, shape=values.shape)
    except ValueError as err:
        raise ValueError(f"counts (the released rows of feature {feature}): {err}") from None
    released = pm.Data(f"released_counts_{feature}", values, dims=dims)
    observed = prepare_observed(
        released, integer=mech.integer, release=name, shape=values.shape, fixed=True
    )

    def dist(n, prob, size):  # forward draws: true rows plus the mechanism's noise
        rows = pm.Multinomial.dist(n=n, p=prob, size=size)
        return rows + mech.noise_dist(size=rows.shape)

    def logp(value, n, prob):
        return multinomial_noise_logp(value, n, prob, kind, params)

    return pm.CustomDist(
        name,
        n_data,
        p,
        dist=dist,
        logp=logp,
        signature="(),(v)->(v)",
        observed=observed,
        dims=dims,
    )


def _mechanism(mechanism, epsilon):
    if (mechanism is None) == (epsilon is None):
        raise ValueError(
            "give exactly one of mechanism= and epsilon= (exact two-sided geometric noise)"
        )
    if epsilon is not None:
        return functools.partial(Geometric, epsilon=epsilon)
    return mechanism


def release_hmm_counts(
    entries,
    *,
    shape,
    n_values=2,
    mechanism=None,
    epsilon=None,
    rng=None,
    allow_float: bool = False,
):
    """Release the per-step feature counts of an HMM's entries once (Foulds et al. 2016, Sec. 5).

    Parameters
    ----------
    entries : mapping or tuple
        ``{"region": (n,), "month": (n,), "features": (n, F)}`` or ``(region, month,
        features)``: integer records, one per entry (see :func:`hmm_count_table`).
    shape : tuple of int
        ``(R, T)``: regions and months (public).
    n_values : int or sequence of int, default 2
        ``V_f`` per feature. Binary features are released as counts of ones.
    mechanism : Mechanism or callable, optional
        A mechanism whose declared sensitivity is at least the table's (L1 ``F_bin + 2 F_cat``
        for Laplace and Geometric, L2 its square root for the Gaussians), or a callable
        ``sensitivity -> Mechanism`` such as ``functools.partial(pmdp.Geometric,
        epsilon=1.0)``, calibrated here with the exact sensitivity.
    epsilon : float, optional
        Instead of ``mechanism``: exact two-sided geometric (discrete Laplace) noise,
        :class:`pymc_dp.Geometric`, calibrated to the exact L1 sensitivity, the whole table
        ``epsilon``-DP (Foulds et al. use continuous Laplace noise of the same scale and split
        ``epsilon`` as ``epsilon / F`` per feature, which is the same noise scale).
    rng : numpy.random.Generator, optional
        For simulations; ``None`` draws the noise from the operating system's secure source.
    allow_float : bool, default False
        Opt in to a floating-point mechanism (``mechanism=functools.partial(pmdp.Laplace,
        epsilon=...)``, as Foulds et al.): its low-order bits leak the data (Mironov 2012), so
        without the opt-in it raises ``ValueError``. For simulations.

    Returns
    -------
    HMMCountsRelease
        With ``entries_per_step`` public (see the module docstring: neighbouring datasets
        keep every entry's region and month).

    Raises
    ------
    ValueError
        For invalid entries, shape or n_values (the message names the argument), both or
        neither of ``mechanism`` and ``epsilon``, or a mechanism whose declared sensitivity is
        below the table's.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> entries = {"region": rng.integers(0, 3, 500), "month": rng.integers(0, 12, 500),
    ...            "features": rng.integers(0, 2, (500, 5))}
    >>> rel = release_hmm_counts(entries, shape=(3, 12), epsilon=1.0, rng=rng)
    >>> rel.counts.shape, rel.sensitivity[0], rel.mechanism, rel.counts.dtype
    ((3, 12, 5), 5.0, Geometric(epsilon=1, sensitivity=5), dtype('int64'))
    """
    true, n, vals = _table(entries, shape, n_values)
    sens = hmm_count_sensitivity(vals)
    mech = _calibrate(_mechanism(mechanism, epsilon), sens, integer_stat=True)
    noisy = release_values(mech, true.ravel(), rng, allow_float, "release_hmm_counts")
    noisy = noisy.reshape(true.shape)
    return HMMCountsRelease(
        counts=_readonly(noisy),
        entries_per_step=_readonly(n),
        n_values=vals,
        mechanism=mech,
        sensitivity=sens,
    )
