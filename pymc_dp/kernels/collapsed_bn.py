r"""Exact independent posterior draws for a naive Bayes network's noisy count tables.

The network: a root ``y`` with ``K_y`` states and leaves ``x_1..x_L`` whose only parent is
``y`` (leaf ``i`` has ``K_i`` states), Dirichlet priors on ``P(y)`` (``alpha_y``) and on every
row ``P(x_i | y = j)`` (``alpha_ij``), ``n`` exchangeable records. The release holds the class
counts ``c_j`` and the tables ``a_ij = (a_ij0, ..., a_ijK)`` (records with ``y = j`` and
``x_i = k``), each cell with independent noise whose log-likelihood, as a function of the true
count ``t = 0..n`` of that cell, is given (``eta``: the noise log-density at ``z - t``, or a
censored cell's tail probability).

Records enter only through ``(c, a)``: integrating the records with the same tables and the
Dirichlet rows analytically,

.. math::

    p(c, a \mid z) \propto \mathrm{DM}(c; n, \alpha_y) \prod_j \eta_{yj}(c_j)
    \prod_{i, j} \mathrm{DM}(a_{ij}; c_j, \alpha_{ij}) \prod_k \eta_{ijk}(a_{ijk}),

with ``DM`` the Dirichlet-multinomial pmf. Summing out the tables given the class counts,
``p(c | z) ∝ DM(c; n, alpha_y) prod_j eta_yj(c_j) prod_{i,j} M_ij(c_j)`` with
``M_ij(c) = sum_{|a| = c} DM(a; c, alpha_ij) prod_k eta_ijk(a_k)``, a finite sum over the
compositions of ``c`` into ``K_i`` parts. So the posterior is drawn **exactly and
independently** each time (:class:`NaiveBayesPosterior`):

1. ``c`` from ``p(c | z)``, a fixed law over the compositions of ``n`` into ``K_y`` parts
   (computed once, inverse CDF);
2. ``theta_y | c ~ Dirichlet(alpha_y + c)``;
3. for every ``(i, j)``: the table ``a_ij`` from ``p(a | c_j, z) ∝ DM(a; c_j, alpha_ij)
   prod_k eta_ijk(a_k)`` (Gumbel-max over the compositions of ``c_j``), then
   ``theta_ij | a_ij ~ Dirichlet(alpha_ij + a_ij)``;
4. records given ``(c, a)`` (:func:`arrange_records`): a uniformly random arrangement of the
   class labels with counts ``c`` and, per leaf and class, of the leaf's values with counts
   ``a_ij``, which is the law of the records given their tables (every arrangement has the
   same probability ``prod theta^counts``).

The two-block Gibbs scan ``theta | c, z``; ``c | theta, z`` is exact too, but the draws above
need no chain at all: every draw is independent of the last. The enumeration sizes are
``C(n + K_y - 1, K_y - 1)`` class-count vectors (once) and ``J C(n + K_i, K_i)`` leaf tables per
leaf (once, in the precomputation of ``M_ij``); :func:`enumeration_sizes` gives them so that a
caller can refuse what it cannot afford.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from pymc_dp._cache import lazy_module

# imported on first use: SciPy's special is a slow import (pymc_dp._cache)
special = lazy_module("scipy.special")

__all__ = [
    "NaiveBayesDraw",
    "NaiveBayesPosterior",
    "arrange_records",
    "compositions",
    "enumeration_sizes",
]


@functools.lru_cache(maxsize=4096)
def _compositions(total: int, parts: int) -> np.ndarray:
    if parts == 1:
        out = np.array([[total]], dtype=np.int64)
    else:
        blocks = []
        for first in range(total + 1):
            rest = _compositions(total - first, parts - 1)
            blocks.append(np.column_stack([np.full(len(rest), first, np.int64), rest]))
        out = np.concatenate(blocks)
    out.setflags(write=False)
    return out


def compositions(total: int, parts: int) -> np.ndarray:
    """All ways of writing ``total`` as an ordered sum of ``parts`` non-negative integers.

    Parameters
    ----------
    total : int
        Non-negative.
    parts : int
        Positive.

    Returns
    -------
    numpy.ndarray
        Read-only int64 array of shape ``(C(total + parts - 1, parts - 1), parts)``, rows in
        lexicographic order.

    Examples
    --------
    >>> compositions(2, 2).tolist()
    [[0, 2], [1, 1], [2, 0]]
    >>> compositions(3, 3).shape
    (10, 3)
    """
    total, parts = int(total), int(parts)
    if total < 0 or parts < 1:
        raise ValueError(f"need total >= 0 and parts >= 1, got {total}, {parts}")
    return _compositions(total, parts)


def enumeration_sizes(n: int, root_states: int, leaf_states, root_rows: int | None = None):
    """``(class-count vectors, leaf tables)`` enumerated by :class:`NaiveBayesPosterior`.

    The first is ``C(n + K_y - 1, K_y - 1)``; the second ``sum_i J C(n + K_i, K_i)`` with
    ``J = K_y`` rows per leaf (all compositions of every ``c <= n``, once).

    Examples
    --------
    >>> enumeration_sizes(50, 2, [2] * 16)
    (51, 42432)
    """
    j = int(root_states if root_rows is None else root_rows)
    root = math.comb(int(n) + int(root_states) - 1, int(root_states) - 1)
    leaves = sum(j * math.comb(int(n) + int(k), int(k)) for k in leaf_states)
    return root, leaves


def _dirichlet(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Dirichlet draws along the last axis (Gamma normalisation; a component that underflows
    to 0 is set to the smallest normal float, so the simplex transform stays finite)."""
    g = rng.standard_gamma(alpha)
    theta = g / g.sum(axis=-1, keepdims=True)
    tiny = np.finfo(np.float64).tiny
    if np.any(theta < tiny):
        theta = np.maximum(theta, tiny)
        theta /= theta.sum(axis=-1, keepdims=True)
    return theta


class _LeafGroup:
    """Leaves with the same number of states ``K``, stacked: ``alpha (G, J, K)``,
    ``eta (G, J, K, n + 1)`` (log-likelihood of cell ``(j, k)`` at true count ``t``)."""

    def __init__(self, index, alpha, eta):
        self.index = list(index)
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.eta = np.asarray(eta, dtype=np.float64)
        self.k = self.alpha.shape[-1]
        self._lg_alpha = special.gammaln(self.alpha).sum(axis=-1)  # (G, J)
        self._alpha_sum = self.alpha.sum(axis=-1)  # (G, J)

    def table_logw(self, j: int, c: int):
        """Compositions of ``c`` into K parts and ``log DM(a; c, alpha_gj) + sum_k eta`` up to
        a constant in ``a``: shapes ``(M, K)`` and ``(G, M)``."""
        comps = compositions(c, self.k)
        alpha = self.alpha[:, j, :]  # (G, K)
        kk = np.arange(self.k)
        lw = (
            special.gammaln(alpha[:, None, :] + comps[None, :, :])
            - special.gammaln(comps + 1.0)[None]
        )
        lw = lw + self.eta[:, j, kk[None, :], comps]  # eta[g, j, k, a_mk] -> (G, M, K)
        return comps, lw.sum(axis=-1)

    def log_marginal(self, n: int) -> np.ndarray:
        """``log M_gj(c)`` for ``c = 0..n``: shape ``(G, J, n + 1)``."""
        g, jn = self.alpha.shape[:2]
        out = np.empty((g, jn, n + 1))
        for j in range(jn):
            for c in range(n + 1):
                _, lw = self.table_logw(j, c)
                out[:, j, c] = special.logsumexp(lw, axis=-1)
            const = special.gammaln(np.arange(n + 1) + 1.0)[None, :] - special.gammaln(
                self._alpha_sum[:, j, None] + np.arange(n + 1)[None, :]
            )
            out[:, j, :] += (
                const + (special.gammaln(self._alpha_sum[:, j]) - self._lg_alpha[:, j])[:, None]
            )
        return out

    def draw(self, c: np.ndarray, rng: np.random.Generator):
        """Tables ``(G, J, K)`` given the class counts and rows ``theta (G, J, K)``."""
        g, jn = self.alpha.shape[:2]
        tables = np.empty((g, jn, self.k), dtype=np.int64)
        for j in range(jn):
            comps, lw = self.table_logw(j, int(c[j]))
            pick = np.argmax(lw + rng.gumbel(size=lw.shape), axis=-1)
            tables[:, j, :] = comps[pick]
        return tables, _dirichlet(self.alpha + tables, rng)


class NaiveBayesPosterior:
    """Exact independent draws of ``(c, theta_y, tables, theta_leaves)`` (module docstring).

    Parameters
    ----------
    n : int
        Number of records.
    alpha_root : array_like, shape (K_y,)
        Dirichlet concentrations of ``P(y)``.
    eta_root : array_like, shape (K_y, n + 1)
        ``eta_root[j, t]``: log-likelihood of the released class-count cell ``j`` when the true
        count is ``t``.
    alpha_leaves : sequence of array_like, each (K_y, K_i)
        Dirichlet concentrations of ``P(x_i | y = j)``, row ``j``.
    eta_leaves : sequence of array_like, each (K_y, K_i, n + 1)
        ``eta_leaves[i][j, k, t]``: log-likelihood of cell ``(j, k)`` of leaf ``i``'s released
        table at true count ``t``.

    Raises
    ------
    ValueError
        On inconsistent shapes, or when the release has probability zero (or NaN) under every
        class-count vector.

    Examples
    --------
    One binary leaf, two records, noise-free cells (log-likelihood 0 at the true count and
    ``-inf`` elsewhere): the counts are recovered exactly.

    >>> import numpy as np
    >>> def exact(t, n=2):
    ...     return np.where(np.arange(n + 1) == t, 0.0, -np.inf)
    >>> post = NaiveBayesPosterior(2, [1.0, 1.0], np.stack([exact(1), exact(1)]),
    ...     [np.ones((2, 2))], [np.stack([np.stack([exact(0), exact(1)]),
    ...                                   np.stack([exact(1), exact(0)])])])
    >>> d = post.draw(np.random.default_rng(0))
    >>> d.counts.tolist(), d.tables[0].tolist()
    ([1, 1], [[0, 1], [1, 0]])
    """

    def __init__(self, n, alpha_root, eta_root, alpha_leaves, eta_leaves):
        self.n = int(n)
        self.alpha_root = np.asarray(alpha_root, dtype=np.float64)
        eta_root = np.asarray(eta_root, dtype=np.float64)
        ky = self.alpha_root.shape[0]
        if self.alpha_root.shape != (ky,) or eta_root.shape != (ky, self.n + 1):
            raise ValueError("alpha_root must have shape (K_y,) and eta_root (K_y, n + 1)")
        if len(alpha_leaves) != len(eta_leaves):
            raise ValueError("alpha_leaves and eta_leaves must have the same length")
        by_k: dict[int, list[int]] = {}
        for i, (a, e) in enumerate(zip(alpha_leaves, eta_leaves, strict=True)):
            a, e = np.shape(a), np.shape(e)
            if len(a) != 2 or a[0] != ky or e != (ky, a[1], self.n + 1):
                raise ValueError(f"leaf {i}: alpha must be (K_y, K_i) and eta (K_y, K_i, n + 1)")
            by_k.setdefault(a[1], []).append(i)
        self.n_leaves = len(alpha_leaves)
        self.groups = [
            _LeafGroup(idx, [alpha_leaves[i] for i in idx], [eta_leaves[i] for i in idx])
            for idx in by_k.values()
        ]
        self._root_law(eta_root)

    def _root_law(self, eta_root):
        """``p(c | z)`` over the compositions of ``n`` into ``K_y`` parts, as a CDF."""
        ky = self.alpha_root.shape[0]
        self.class_counts = compositions(self.n, ky)
        cc = self.class_counts
        logp = (special.gammaln(self.alpha_root + cc) - special.gammaln(cc + 1.0)).sum(axis=1)
        rows = np.arange(ky)
        logp = logp + eta_root[rows[None, :], cc].sum(axis=1)
        for grp in self.groups:
            lm = grp.log_marginal(self.n).sum(axis=0)  # (J, n + 1), summed over leaves
            logp = logp + lm[rows[None, :], cc].sum(axis=1)
        top = np.max(logp)
        if not np.isfinite(top):
            raise ValueError(
                "the release has probability zero (or NaN) under every table of n records"
            )
        self.log_prob = logp - (top + np.log(np.sum(np.exp(logp - top))))
        self._cdf = np.cumsum(np.exp(self.log_prob))

    def draw(self, rng: np.random.Generator) -> NaiveBayesDraw:
        """One exact independent draw: class counts, ``theta_y``, tables, leaf rows."""
        m = int(np.searchsorted(self._cdf, rng.random() * self._cdf[-1], side="right"))
        c = self.class_counts[min(m, len(self._cdf) - 1)]
        theta_root = _dirichlet(self.alpha_root + c, rng)
        tables = [None] * self.n_leaves
        thetas = [None] * self.n_leaves
        for grp in self.groups:
            tab, th = grp.draw(c, rng)
            for g, i in enumerate(grp.index):
                tables[i], thetas[i] = tab[g], th[g]
        return NaiveBayesDraw(c.copy(), theta_root, tables, thetas)


class NaiveBayesDraw(NamedTuple):
    """One draw of :class:`NaiveBayesPosterior`.

    Attributes
    ----------
    counts : numpy.ndarray
        Class counts ``(K_y,)``.
    theta_root : numpy.ndarray
        ``P(y)``, ``(K_y,)``.
    tables, thetas : list of numpy.ndarray
        Per leaf, the table and the rows ``P(x_i | y = j)``, each ``(K_y, K_i)``.

    Examples
    --------
    >>> import numpy as np
    >>> NaiveBayesDraw(np.array([1, 1]), np.array([0.5, 0.5]), [], []).counts.tolist()
    [1, 1]
    """

    counts: np.ndarray
    theta_root: np.ndarray
    tables: list
    thetas: list


def arrange_records(counts, tables, rng: np.random.Generator):
    """Records with the given class counts and leaf tables, uniformly among all such records.

    Parameters
    ----------
    counts : array_like of int, shape (K_y,)
        Class counts (summing to ``n``).
    tables : sequence of array_like of int, each (K_y, K_i)
        Leaf tables: ``tables[i][j].sum() == counts[j]``.
    rng : numpy.random.Generator

    Returns
    -------
    (numpy.ndarray, list of numpy.ndarray)
        The root's ``n`` states and every leaf's ``n`` states (int64).

    Examples
    --------
    >>> import numpy as np
    >>> y, (x,) = arrange_records([2, 1], [np.array([[1, 1], [0, 1]])], np.random.default_rng(0))
    >>> np.bincount(y).tolist(), np.bincount(x[y == 0], minlength=2).tolist(), int(x[y == 1][0])
    ([2, 1], [1, 1], 1)
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    y = rng.permutation(np.repeat(np.arange(counts.size), counts))
    order = np.argsort(y, kind="stable")  # the records of class 0, then 1, ...
    block = np.repeat(np.arange(counts.size), counts)  # class of each sorted position
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    local = np.arange(n) - start[block]  # position within its class block
    if not len(tables):
        return y.astype(np.int64), []
    kmax = max(np.shape(t)[1] for t in tables)
    tab = np.zeros((len(tables), counts.size, kmax), dtype=np.int64)  # zero-padded states
    for i, t in enumerate(tables):
        tab[i, :, : np.shape(t)[1]] = t
    cum = np.cumsum(tab, axis=2)[:, :, :-1]  # (L, K_y, K - 1) thresholds
    vals = (local[None, :, None] >= cum[:, block, :]).sum(axis=2)  # sorted in each block
    shuffle = np.argsort(block[None, :] + rng.random((len(tables), n)), axis=1, kind="stable")
    x = np.empty((len(tables), n), dtype=np.int64)
    x[:, order] = np.take_along_axis(vals, shuffle, axis=1)  # random within blocks
    leaves = list(x)
    return y.astype(np.int64), leaves
