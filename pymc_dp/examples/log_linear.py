r"""Naive Bayes, a log-linear model of a contingency table, from noisy class-by-feature tables.

Ju, Awan, Gong & Rao (2022), "Application: Naive Bayes". Each of ``n`` records has a class
``y`` in ``0 .. I-1`` and ``K`` features ``x_k`` in ``0 .. J-1``; the records are the cells of
an ``I x J^K`` contingency table. The naive Bayes model is the log-linear model
``[Y X_1][Y X_2] ... [Y X_K]`` of that table (the features independent given the class):

.. math::

    \log P(y = i, x = (j_1, \ldots, j_K)) = \log p_i + \sum_k \log q^{(k)}_{i j_k},

with ``p`` the class probabilities and ``q^{(k)}_{i .}`` the distribution of feature ``k`` in
class ``i`` (every row a point of the simplex). The slides' prior is ``Dirichlet(2, ..., 2)``
for ``p`` and for every row of every ``q^{(k)}``.

The release (the slides' ``Z_dp``): the ``K`` class-by-feature count tables
``n^{(k)}_{ij} = #{records with y = i and x_k = j}``, all ``K I J`` cells at once, plus noise.
Replacing one record moves, in each table, one cell down by 1 and one cell up by 1 (or
nothing), so the exact replace-one sensitivity of the ``K`` tables together is ``2K`` in L1
(the slides' Laplace scale ``2K / epsilon``) and ``sqrt(2K)`` in L2; both are attained by a
record whose class changes. The class counts are not released on their own: they are the row
sums of every table.

:func:`release_tables` computes and releases the tables (Laplace as in the slides with
``allow_float=True``, or the exact ``pmdp.Geometric``); :func:`log_linear_model` writes the
noise-aware PyMC model: ``p`` and ``q_<k>`` Dirichlet, the latent records ``y`` and
``x_<k>`` (``Categorical(q_<k>[y])``), and one :class:`~pymc_dp.Release` of the ``K`` tables
computed from the records. A plain ``pm.sample()`` assigns the slides' sampler to it: the
data-augmentation step (each record ``(y_i, x_i)`` proposed from the model and accepted with
the ratio of the noise densities, at least ``exp(-epsilon)``) and conjugate Gibbs steps for
``p`` and the ``q_<k>``. :func:`enumerate_posterior_means` computes the exact posterior means
by enumerating every record set (for tiny cases: the reference of the tests);
:func:`naive_posterior_means` the naive analysis that takes the noisy tables as true counts.

Examples
--------
>>> import functools, numpy as np, pymc_dp as pmdp
>>> from pymc_dp.examples import log_linear as ll
>>> y, x = ll.simulate(50, [0.3, 0.7], [[[0.8, 0.2], [0.4, 0.6]]], rng=np.random.default_rng(0))
>>> rel = ll.release_tables(y, x, n_classes=2, n_levels=2,
...     mechanism=functools.partial(pmdp.Geometric, epsilon=1.0), rng=np.random.default_rng(1))
>>> rel.tables.shape, rel.sensitivity, rel.guarantee().epsilon
((1, 2, 2), (2.0, 1.4142135623730951), 1.0)
>>> sorted(v.name for v in ll.log_linear_model(rel).free_RVs)
['p', 'q_0', 'x_0', 'y']
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._cache import lazy_module
from pymc_dp._validation import as_positive_finite
from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.distributions.release import Release
from pymc_dp.kernels.collapsed_bn import compositions
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.releases._families import _as_int_bound, _as_records, _integers, _sqrt_up
from pymc_dp.releases.sufficient import _calibrate, _readonly, release_values

__all__ = [
    "MAX_ENUMERATION",
    "LogLinearRelease",
    "enumerate_posterior_means",
    "log_linear_model",
    "naive_posterior_means",
    "release_tables",
    "simulate",
    "tables",
]

special = lazy_module("scipy.special")

#: the largest enumeration :func:`enumerate_posterior_means` makes: multisets of records times
#: joint cells, the entries of its count table (8 bytes each: 160 MB at this size; the integer
#: table it is built from stays cached in :func:`pymc_dp.kernels.collapsed_bn.compositions`)
MAX_ENUMERATION = 20_000_000


def _records(y, x, n_classes: int, n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """``(y (n,), x (n, K))`` int64, validated against the numbers of classes and levels."""
    ya = _integers(_as_records(y, "y"), "y")
    xa = _integers(_as_records(x, "x"), "x")
    if ya.ndim != 1:
        raise ValueError(f"y must be 1-D (one class per record), got shape {ya.shape}")
    if xa.ndim == 1:
        xa = xa[:, None]
    if xa.ndim != 2 or xa.shape[0] != ya.shape[0]:
        raise ValueError(
            f"x must have shape (n, K) with n = {ya.shape[0]} (the length of y), got {xa.shape}"
        )
    if np.any((ya < 0) | (ya >= n_classes)):
        raise ValueError(f"y must lie in 0 .. n_classes - 1 = {n_classes - 1}")
    if np.any((xa < 0) | (xa >= n_levels)):
        raise ValueError(f"x must lie in 0 .. n_levels - 1 = {n_levels - 1}")
    return ya, xa


def tables(y, x, *, n_classes: int, n_levels: int) -> np.ndarray:
    """The ``K`` class-by-feature count tables of the records.

    Parameters
    ----------
    y : array_like of int, shape (n,)
        Classes in ``0 .. n_classes - 1``.
    x : array_like of int, shape (n, K) or (n,)
        Features in ``0 .. n_levels - 1`` (a 1-D ``x`` is one feature).
    n_classes, n_levels : int
        ``I >= 2`` and ``J >= 2``.

    Returns
    -------
    numpy.ndarray of int64, shape (K, n_classes, n_levels)
        ``t[k, i, j]``: the number of records with class ``i`` and feature ``k`` at level ``j``.

    Examples
    --------
    >>> tables([0, 1, 1], [[0, 1], [1, 1], [1, 0]], n_classes=2, n_levels=2).tolist()
    [[[1, 0], [0, 2]], [[0, 1], [1, 1]]]
    """
    n_classes = _as_int_bound("n_classes", n_classes, 2)
    n_levels = _as_int_bound("n_levels", n_levels, 2)
    ya, xa = _records(y, x, n_classes, n_levels)
    k = xa.shape[1]
    flat = (np.arange(k)[None, :] * n_classes + ya[:, None]) * n_levels + xa  # (n, K) cells
    size = k * n_classes * n_levels
    return np.bincount(flat.ravel(), minlength=size).reshape(k, n_classes, n_levels)


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class LogLinearRelease:
    """Noisy class-by-feature tables of naive Bayes records (Ju et al. 2022).

    Attributes
    ----------
    tables : numpy.ndarray, shape (K, n_classes, n_levels)
        The released (noisy) tables, read-only.
    mechanism : Mechanism
        The mechanism that added the noise (one release of all ``K I J`` cells).
    n : int
        Number of records (public under replace-one neighbours).
    n_classes, n_levels : int
    sensitivity : tuple of float
        ``(2K, sqrt(2K))``: the exact L1 and L2 replace-one sensitivity of the tables.

    Examples
    --------
    >>> import numpy as np, pymc_dp as pmdp
    >>> rel = release_tables([0, 1, 1], [[0, 1], [1, 1], [1, 0]], n_classes=2, n_levels=2,
    ...     mechanism=pmdp.Geometric(epsilon=0.5, sensitivity=4), rng=np.random.default_rng(0))
    >>> rel.n, rel.sensitivity, rel.guarantee().epsilon
    (3, (4.0, 2.0), 0.5)
    """

    tables: np.ndarray
    mechanism: Mechanism
    n: int
    n_classes: int
    n_levels: int
    sensitivity: tuple[float, float]

    def __post_init__(self):
        t = np.asarray(self.tables)
        if not isinstance(self.mechanism, Mechanism):
            raise TypeError(f"mechanism must be a pymc_dp Mechanism, got {self.mechanism!r}")
        n_i = _as_int_bound("n_classes", self.n_classes, 2)
        n_j = _as_int_bound("n_levels", self.n_levels, 2)
        _as_int_bound("n", self.n, 1)
        if t.ndim != 3 or t.shape[1:] != (n_i, n_j) or t.shape[0] < 1:
            raise ValueError(
                f"tables must have shape (K, n_classes, n_levels) = (K, {n_i}, {n_j}), "
                f"got {t.shape}"
            )
        if t.dtype.kind not in "iuf" or not np.all(np.isfinite(t)):
            raise ValueError("tables must hold finite real numbers")

    @property
    def n_features(self) -> int:
        """``K``, the number of features (tables)."""
        return int(self.tables.shape[0])

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee per individual: ``mechanism.guarantee()`` at its declared
        sensitivity, at least the tables' (checked when the release was made)."""
        return self.mechanism.guarantee()

    def model(self, prior=2.0, *, name: str = "release") -> pm.Model:
        """:func:`log_linear_model` of this release."""
        return log_linear_model(self, prior, name=name)


def release_tables(
    y, x, *, n_classes, n_levels, mechanism, rng=None, allow_float: bool = False
) -> LogLinearRelease:
    """Release the ``K`` class-by-feature count tables once (Ju et al. 2022, naive Bayes).

    Parameters
    ----------
    y, x, n_classes, n_levels
        The records, as for :func:`tables`.
    mechanism : Mechanism or callable
        A mechanism whose declared sensitivity is at least the tables' (``2K`` in L1 for
        Laplace and Geometric, ``sqrt(2K)`` in L2 for the Gaussians), or a callable
        ``sensitivity -> Mechanism`` such as ``functools.partial(pmdp.Laplace, epsilon=1.0)``
        (the slides' Laplace, scale ``2K / epsilon``), calibrated here to the exact value.
    rng : numpy.random.Generator, optional
        For simulations; ``None`` draws the noise from the operating system's secure source.
    allow_float : bool, default False
        Opt in to a floating-point mechanism (the slides' Laplace): without it such a
        mechanism raises ``ValueError`` (Mironov 2012); the exact default is
        ``functools.partial(pmdp.Geometric, epsilon=...)``.

    Returns
    -------
    LogLinearRelease

    Raises
    ------
    ValueError
        Invalid records, or a mechanism whose declared sensitivity is below the tables'.

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> rel = release_tables([0, 1, 1], [1, 1, 0], n_classes=2, n_levels=2,
    ...     mechanism=functools.partial(pmdp.Laplace, epsilon=1.0),
    ...     rng=np.random.default_rng(0), allow_float=True)
    >>> rel.mechanism, rel.tables.shape
    (Laplace(epsilon=1, sensitivity=2.0), (1, 2, 2))
    """
    true = tables(y, x, n_classes=n_classes, n_levels=n_levels)
    k = true.shape[0]
    sens = (float(2 * k), _sqrt_up(2 * k))
    mech = _calibrate(mechanism, sens, integer_stat=True)
    noisy = release_values(mech, true.ravel(), rng, allow_float, "release_tables")
    return LogLinearRelease(
        tables=_readonly(np.asarray(noisy).reshape(true.shape)),
        mechanism=mech,
        n=int(true[0].sum()),
        n_classes=int(true.shape[1]),
        n_levels=int(true.shape[2]),
        sensitivity=sens,
    )


def _check_release(release) -> LogLinearRelease:
    if not isinstance(release, LogLinearRelease):
        raise TypeError(f"release must be a LogLinearRelease (release_tables), got {release!r}")
    return release


def log_linear_model(release, prior=2.0, *, name: str = "release") -> pm.Model:
    """The noise-aware PyMC model of a :class:`LogLinearRelease`.

    Variables: ``p ~ Dirichlet(prior)`` (``I`` classes); ``q_<k>``, shape ``(I, J)``, a
    ``Dirichlet(prior)`` per row (class); the latent records ``y ~ Categorical(p)`` (``n``)
    and ``x_<k> ~ Categorical(q_<k>[y])``; and one ``pmdp.Release(name, T, mechanism,
    observed=release.tables)`` of the ``K`` tables computed from the records (one-hot sums,
    flattened in the release's order) with the release's own mechanism, so
    :func:`pymc_dp.privacy_report` gives :meth:`LogLinearRelease.guarantee`.

    Parameters
    ----------
    release : LogLinearRelease
    prior : float, default 2.0
        The Dirichlet concentration of every parameter vector (the slides' 2).
    name : str, default "release"
        Name of the Release variable.

    Returns
    -------
    pymc.Model
        ``pm.sample()`` assigns DataAugmentation to the records and ConjugateGibbs to ``p``
        and the ``q_<k>`` (Ju et al.'s sampler).

    Examples
    --------
    >>> import numpy as np, pymc_dp as pmdp
    >>> rel = release_tables([0, 1, 1], [1, 1, 0], n_classes=2, n_levels=2,
    ...     mechanism=pmdp.Geometric(epsilon=1.0, sensitivity=2), rng=np.random.default_rng(0))
    >>> m = log_linear_model(rel)
    >>> sorted(v.name for v in m.free_RVs), pmdp.privacy_report(m).total.epsilon
    (['p', 'q_0', 'x_0', 'y'], 1.0)
    """
    rel = _check_release(release)
    a = np.float64(as_positive_finite("prior", prior))
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    n_i, n_j, n_k = rel.n_classes, rel.n_levels, rel.n_features
    if name in {"p", "y"} | {f"{v}_{k}" for k in range(n_k) for v in "qx"}:
        raise ValueError(f"name {name!r} clashes with a model variable; pick another")
    observed = np.asarray(rel.tables).ravel()
    observed = observed.astype(np.int64 if rel.mechanism.integer else np.float64)
    cells = pt.arange(n_i * n_j)[None, :]
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=np.full(n_i, a))
        y = pm.Categorical("y", p=p, shape=rel.n)
        counts = []
        for k in range(n_k):
            q = pm.Dirichlet(f"q_{k}", a=np.full((n_i, n_j), a))
            x = pm.Categorical(f"x_{k}", p=q[y], shape=rel.n)
            cell = y * np.int64(n_j) + x
            counts.append(pt.eq(cell[:, None], cells).astype("int64").sum(axis=0))
        Release(name, pt.concatenate(counts), rel.mechanism, observed=observed)
    return model


def simulate(n, p, q, *, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` naive Bayes records: ``y ~ Categorical(p)``, ``x_k | y ~ Categorical(q[k][y])``.

    Parameters
    ----------
    n : int
        Number of records, ``>= 1``.
    p : array_like, shape (I,)
        Class probabilities (finite, >= 0, summing to 1 within 1e-9).
    q : array_like, shape (K, I, J)
        ``q[k, i]``: the distribution of feature ``k`` in class ``i`` (same conditions).
    rng : numpy.random.Generator or seed, optional

    Returns
    -------
    y : numpy.ndarray of int64, shape (n,)
    x : numpy.ndarray of int64, shape (n, K)

    Examples
    --------
    >>> import numpy as np
    >>> y, x = simulate(4, [0.5, 0.5], [[[1.0, 0.0], [0.0, 1.0]]], rng=np.random.default_rng(0))
    >>> bool((x[:, 0] == y).all()), x.shape
    (True, (4, 1))
    """
    n = _as_int_bound("n", n, 1)
    p = _simplex("p", p, 1)
    q = _simplex("q", q, 3)
    if q.shape[1] != p.shape[0]:
        raise ValueError(f"q must have shape (K, {p.shape[0]}, J) (one row per class of p)")
    gen = np.random.default_rng(rng)
    y = gen.choice(p.shape[0], size=n, p=p)
    cdf = np.cumsum(q, axis=-1)[:, y, :]  # (K, n, J)
    u = gen.random((q.shape[0], n, 1))
    x = np.minimum((u > cdf).sum(axis=-1), q.shape[2] - 1).T
    return y.astype(np.int64), np.ascontiguousarray(x, dtype=np.int64)


def _simplex(name: str, v, ndim: int) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float64)
    if arr.ndim != ndim or arr.shape[-1] < 2:
        raise ValueError(f"{name} must be a {ndim}-D array of probability vectors (length >= 2)")
    if not (np.all(np.isfinite(arr)) and np.all(arr >= 0)):
        raise ValueError(f"{name} must be finite and >= 0")
    if not np.allclose(arr.sum(axis=-1), 1.0, rtol=0.0, atol=1e-9):
        raise ValueError(f"{name} must sum to 1 along its last axis")
    return arr


def naive_posterior_means(release, prior=2.0) -> dict[str, np.ndarray]:
    """Posterior means of the naive analysis that takes the noisy tables as the true counts.

    Negative cells are clipped to 0; the class counts are the row sums of the first table.
    ``p ~ Dirichlet(prior + n_i)``, ``q_k[i] ~ Dirichlet(prior + n_kij)``: the wrong answer the
    noise-aware model must differ from.

    Parameters
    ----------
    release : LogLinearRelease
    prior : float, default 2.0

    Returns
    -------
    dict with ``"p"`` (shape (I,)) and ``"q"`` (shape (K, I, J))

    Examples
    --------
    >>> import numpy as np, pymc_dp as pmdp
    >>> rel = release_tables([0, 1], [1, 1], n_classes=2, n_levels=2,
    ...     mechanism=pmdp.Geometric(alpha=1e-12, sensitivity=2), rng=np.random.default_rng(0))
    >>> naive_posterior_means(rel, 1.0)["p"].tolist()
    [0.5, 0.5]
    """
    rel = _check_release(release)
    a = as_positive_finite("prior", prior)
    t = np.clip(np.asarray(rel.tables, dtype=np.float64), 0.0, None)
    ni = t[0].sum(axis=1)
    q = (a + t) / (a * rel.n_levels + t.sum(axis=2, keepdims=True))
    return {"p": (a + ni) / (a * rel.n_classes + ni.sum()), "q": q}


def enumerate_posterior_means(release, prior=2.0) -> dict[str, np.ndarray]:
    """Exact posterior means of ``p`` and the ``q_k`` by enumerating every record set.

    For each of the ``(I J^K)^n`` ordered record sets ``X``: the prior probability of the
    records with the parameters integrated out (a product of Dirichlet-multinomial terms,
    ``B(prior + counts) / B(prior)`` for ``p`` and every row of every ``q_k``) times the noise
    density of the release at its tables; the posterior mean of ``p_i`` is the weighted mean
    of ``(prior + n_i) / (I prior + n)``, that of ``q_k[i, j]`` of
    ``(prior + n_kij) / (J prior + n_i)``. Record sets with the same class-by-feature counts
    of the whole records (the joint cells) share their weight, so the sum runs over the
    multisets of joint cells with their multinomial multiplicities.

    Parameters
    ----------
    release : LogLinearRelease
    prior : float, default 2.0

    Returns
    -------
    dict with ``"p"`` (shape (I,)) and ``"q"`` (shape (K, I, J))

    Raises
    ------
    ValueError
        When the multisets times the joint cells exceed :data:`MAX_ENUMERATION`.

    Examples
    --------
    With almost no noise the posterior is the conjugate one of the true tables:

    >>> import numpy as np, pymc_dp as pmdp
    >>> rel = release_tables([0, 1, 1], [1, 1, 0], n_classes=2, n_levels=2,
    ...     mechanism=pmdp.Laplace(scale=1e-3, sensitivity=2), rng=np.random.default_rng(0),
    ...     allow_float=True)
    >>> np.round(enumerate_posterior_means(rel, 1.0)["p"], 6).tolist()
    [0.4, 0.6]
    """
    rel = _check_release(release)
    a = as_positive_finite("prior", prior)
    n_i, n_j, n_k, n = rel.n_classes, rel.n_levels, rel.n_features, rel.n
    n_cells = n_i * n_j**n_k
    size = math.comb(n + n_cells - 1, n)
    if size * n_cells > MAX_ENUMERATION:
        raise ValueError(
            f"the release has {size} multisets of records over {n_cells} joint cells to "
            f"enumerate, more than MAX_ENUMERATION = {MAX_ENUMERATION} entries: use fewer "
            "records, classes, levels or features"
        )
    # every multiset as its joint-cell counts (cell c <-> (y, x_1..x_K) in C order), built
    # directly: size x n_cells entries, no (size, n) table of records
    counts = compositions(n, n_cells)[::-1].astype(np.float64)  # reversed: the former order
    cube = counts.reshape(-1, n_i, *(n_j,) * n_k)  # (multiset, y, x_1, ..., x_K)
    ny = cube.reshape(counts.shape[0], n_i, -1).sum(axis=2)
    feats = tuple(range(2, 2 + n_k))
    tab = np.stack([cube.sum(axis=feats[:k] + feats[k + 1 :]) for k in range(n_k)], axis=1)
    gl = special.gammaln
    log_mult = gl(n + 1.0) - gl(counts + 1.0).sum(axis=1)  # ordered record sets per multiset
    log_prior = (gl(a + ny).sum(axis=1) - gl(n_i * a + n)) + (
        gl(a + tab).sum(axis=(1, 2, 3)) - gl(n_j * a + tab.sum(axis=3)).sum(axis=(1, 2))
    )
    flat = tab.reshape(tab.shape[0], -1)
    z = np.asarray(rel.tables, dtype=np.float64).ravel()
    log_noise = np.asarray(rel.mechanism.logpdf(z[None, :] - flat)).sum(axis=1)
    lw = log_mult + log_prior + log_noise
    w = np.exp(lw - lw.max())
    w /= w.sum()
    p = w @ ((a + ny) / (n_i * a + n))
    q = np.einsum("m,mkij->kij", w, (a + tab) / (n_j * a + tab.sum(axis=3, keepdims=True)))
    return {"p": p, "q": q}
