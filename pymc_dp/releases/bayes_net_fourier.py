r"""Laplace noise in the Fourier domain: consistent count tables of a binary Bayesian network.

Zhang et al. (2016), Alg. 2, after Barak et al. (2007). A network of ``d = |I|`` binary nodes
and ``n`` records has the contingency table ``h`` on ``{0, 1}^d``. The posterior update of node
``i`` is the marginal table of its family ``F_i = parents(i) + (i,)``. Every marginal on a set
``S`` is determined by the Fourier (Walsh-Hadamard) coefficients of ``h`` on the subsets of
``S`` (their Theorem 2). With the unnormalised coefficients

.. math::

    \hat h(\alpha) = \sum_{x} (-1)^{\langle \alpha, x\rangle} h(x)
                   = \sum_{r=1}^{n} (-1)^{|\alpha \cap x_r|},
    \qquad \alpha \subseteq I,

(the paper's ``<f^alpha, h> = 2^{-d/2} hat h(alpha)``), the marginal on ``S`` is

.. math::

    C_S(h)(\beta) = 2^{-|S|} \sum_{\alpha \subseteq S} \hat h(\alpha) (-1)^{\langle\alpha,
    \beta\rangle}, \qquad \beta \in \{0, 1\}^S .

So releasing ``hat h`` on the *downward closure* ``N_I`` (all subsets of all families, step 3)
gives every family's table, and the tables are **consistent**: two families that share nodes
give the same table on the shared nodes, because both come from the same coefficients (the
point of Alg. 2: "stealth" against an observer who would notice inconsistent noisy tables).

What is released (a reparametrisation of the paper's step 5, same information). Under
replace-one neighbours ``n`` is public, so ``hat h(empty) = n`` is not released. For
``alpha != empty`` the coefficient is ``n - 2 s_alpha`` with the *parity count*
``s_alpha = #{r : |alpha ∩ x_r| odd}``, an integer in ``[0, n]``. The release is the vector of
parity counts plus noise of one mechanism, so an integer mechanism (``pmdp.Geometric``, exact
discrete Laplace, the default the project asks for) releases it exactly; ``pmdp.Laplace`` (the
paper's floating-point noise) needs ``allow_float=True``. Laplace noise of scale ``b`` on
``s_alpha`` is Laplace noise of scale ``2 b 2^{-d/2}`` on the paper's ``<f^alpha, h>``.

Sensitivity (exact, :func:`fourier_sensitivity`). Replacing record ``x`` by ``x'`` changes
``s_alpha`` by ``±1`` exactly when ``|alpha ∩ (x xor x')|`` is odd, else not at all, and ``x xor
x'`` can be any non-zero ``delta``. So the L1 sensitivity is
``max_{delta != 0} #{alpha in N_I \ {empty} : |alpha ∩ delta| odd}`` and the L2 sensitivity its
square root; both attained. It is computed by one Walsh-Hadamard transform of the indicator of
``N_I`` (``#odd(delta) = (|N_I| - W(delta)) / 2``), exact for networks of up to
``MAX_EXACT_NODES = 20`` nodes; above that the bound ``|N_I| - 1`` (each released count moves by
at most 1) is used (valid, possibly loose). Zhang et al.'s Corollary 2 calibrates to ``2|N_I|``
in units of ``hat h``, i.e. ``|N_I|`` parity counts: an upper bound on the exact value (for
their naive Bayes with ``d`` features, ``|N_I| = 2d + 2`` against the exact ``2d``).

Non-negativity (steps 7 and the remark after Corollary 3). The reconstructed cells can be
negative. ``shift_t=t`` adds the paper's increment ``4 t |N_I|^2 / (epsilon 2^{d/2})`` to the
normalised coefficient of ``f^0`` (``4 t |N_I|^2 / epsilon`` to ``hat h(empty)``, so every cell
of a marginal on ``S`` grows by ``4 t |N_I|^2 / (epsilon 2^{|S|})``); Corollary 3 says the whole
table is then non-negative with probability at least ``1 - e^{-t}``. The alternative the paper
names, truncation (:meth:`BayesNetFourierRelease.projected`), keeps privacy and loses
consistency. Both are post-processing: the guarantee is the mechanism's.

Only binary networks (every node with two states), as in the paper.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from pymc_dp._validation import as_bool, as_positive_finite
from pymc_dp.accounting import PrivacyGuarantee
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.releases.bayes_net import DiscreteBayesNet, bayes_net_count_tables
from pymc_dp.releases.sufficient import _calibrate, _readonly, release_values

__all__ = [
    "BayesNetFourierRelease",
    "bayes_net_fourier_coefficients",
    "fourier_closure",
    "fourier_sensitivity",
    "release_bayes_net_fourier",
]

#: networks with at most this many nodes get the exact sensitivity (a transform of 2**d values)
MAX_EXACT_NODES = 20


def _binary(network) -> DiscreteBayesNet:
    if not isinstance(network, DiscreteBayesNet):
        raise TypeError(f"network must be a DiscreteBayesNet, got {network!r}")
    if any(k != 2 for k in network.cardinalities):
        raise ValueError(
            "network must have binary nodes only (Zhang et al.'s Alg. 2 works on {0, 1}^|I|), "
            f"got states {dict(zip(network.nodes, network.cardinalities, strict=True))}: use "
            "release_bayes_net_counts for nodes with more states"
        )
    if len(network.nodes) > 62:
        raise ValueError(f"network has {len(network.nodes)} nodes; at most 62 are supported")
    return network


def _structure(network) -> tuple:
    """A hashable key of the graph (nodes and parent lists), for the caches below."""
    return network.nodes, tuple(network.parents[v] for v in network.nodes)


def _subset_masks(fam: tuple[int, ...]) -> np.ndarray:
    """Node bitmask of every subset of a family, in the C order of its table's flat index.

    Subset ``a`` (``0 <= a < 2**k``) holds axis ``t`` of the table (node ``fam[t]``) when bit
    ``k - 1 - t`` of ``a`` is set: axis 0 is the top bit, as in ``table.ravel()``.
    """
    masks = np.zeros(1, dtype=np.int64)
    for j in reversed(fam):  # each node added becomes the top bit so far
        masks = np.concatenate([masks, masks | (1 << j)])
    return masks


@functools.lru_cache(maxsize=64)
def _layout_of(structure) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The closure's bitmasks (sorted by size, then value; 0 first) and, per node, the
    position in them of every subset of its family (in table order, :func:`_subset_masks`)."""
    nodes, parents = structure
    col = {v: j for j, v in enumerate(nodes)}
    fams = {
        v: _subset_masks((*(col[p] for p in ps), col[v]))
        for v, ps in zip(nodes, parents, strict=True)
    }
    masks = np.unique(np.concatenate(list(fams.values())))
    masks = masks[np.lexsort((masks, np.bitwise_count(masks)))]
    order = np.argsort(masks)
    positions = {v: order[np.searchsorted(masks, m, sorter=order)] for v, m in fams.items()}
    masks.setflags(write=False)
    for a in positions.values():
        a.setflags(write=False)
    return masks, positions


def _closure_masks(network) -> np.ndarray:
    """Bitmasks (bit j = node j) of the downward closure, sorted by (size, value); 0 first."""
    return _layout_of(_structure(network))[0]


def _family_positions(network) -> dict[str, np.ndarray]:
    """Per node, the closure positions of its family's subsets, in the table's flat order."""
    return _layout_of(_structure(network))[1]


def _walsh_hadamard(x: np.ndarray) -> np.ndarray:
    """Unnormalised Walsh-Hadamard transform of a 1-D array of ``2**k`` values.

    ``out[a] = sum_b (-1)^{popcount(a & b)} x[b]`` (natural order, in ``O(k 2**k)``); it is its
    own inverse up to the factor ``2**k``. Integers stay exact.
    """
    h = 1
    while h < x.size:
        x = x.reshape(-1, 2, h)
        x = np.stack([x[:, 0] + x[:, 1], x[:, 0] - x[:, 1]], axis=1).reshape(-1)
        h *= 2
    return x


def fourier_closure(network: DiscreteBayesNet) -> tuple[tuple[str, ...], ...]:
    """The downward closure ``N_I`` of the families: the coefficients Alg. 2 needs.

    Parameters
    ----------
    network : DiscreteBayesNet
        All nodes binary.

    Returns
    -------
    tuple of tuple of str
        Every subset of every family ``parents(v) + (v,)``, each in node order, sorted by size
        (the empty set first) and then by the bitmask of node positions.

    Examples
    --------
    >>> from pymc_dp.releases import DiscreteBayesNet
    >>> fourier_closure(DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]}))
    ((), ('y',), ('x',), ('y', 'x'))
    """
    net = _binary(network)
    return tuple(
        tuple(v for j, v in enumerate(net.nodes) if int(m) >> j & 1) for m in _closure_masks(net)
    )


def fourier_sensitivity(network: DiscreteBayesNet) -> tuple[float, float]:
    """Exact L1 and L2 replace-one sensitivity of the released parity counts.

    Parameters
    ----------
    network : DiscreteBayesNet
        All nodes binary.

    Returns
    -------
    tuple of float
        ``(Delta, sqrt(Delta))`` with ``Delta = max over delta != 0 of #{alpha in N_I, alpha !=
        empty : |alpha ∩ delta| odd}`` (module docstring), exact up to ``MAX_EXACT_NODES``
        nodes; above, the bound ``|N_I| - 1``. The square root is rounded up.

    Examples
    --------
    Naive Bayes with ``d`` features: ``N_I`` holds ``y``, every ``x_i`` and every ``(y, x_i)``;
    flipping all features of a record changes the ``2d`` counts that hold one feature.

    >>> from pymc_dp.releases import DiscreteBayesNet
    >>> feats = [f"x{i}" for i in range(3)]
    >>> net = DiscreteBayesNet({"y": 2, **dict.fromkeys(feats, 2)}, dict.fromkeys(feats, ["y"]))
    >>> fourier_sensitivity(net)[0], len(fourier_closure(net)) - 1
    (6.0, 7)
    """
    return _sensitivity_of(_structure(_binary(network)))


@functools.lru_cache(maxsize=64)
def _sensitivity_of(structure) -> tuple[float, float]:
    masks = _layout_of(structure)[0]
    d = len(structure[0])
    if d > MAX_EXACT_NODES:
        delta = float(len(masks) - 1)
    else:  # #odd(delta) = (|N_I| - W(delta)) / 2, W the transform of N_I's indicator
        w = np.zeros(1 << d, dtype=np.int64)
        w[masks] = 1
        odd = (len(masks) - _walsh_hadamard(w)[1:]) // 2
        delta = float(odd.max())
    root = math.sqrt(delta)
    return delta, root if root * root >= delta else math.nextafter(root, math.inf)


def _coefficients_from_tables(tables, network) -> np.ndarray:
    """``hat h`` on the closure from the family count tables (one transform per family; a
    subset shared by several families gets the same value from each)."""
    out = np.zeros(len(_closure_masks(network)), dtype=np.int64)
    for v, pos in _family_positions(network).items():
        out[pos] = _walsh_hadamard(np.asarray(tables[v], dtype=np.int64).ravel())
    return out


def bayes_net_fourier_coefficients(data, network: DiscreteBayesNet) -> np.ndarray:
    r"""The unnormalised Fourier coefficients ``hat h(alpha)`` of the data on ``N_I``.

    Parameters
    ----------
    data : array_like of shape (n, n_nodes) or mapping of node name to 1-D array
        Binary records, as for :func:`~pymc_dp.releases.bayes_net_count_tables`.
    network : DiscreteBayesNet
        All nodes binary.

    Returns
    -------
    numpy.ndarray
        int64, ``hat h(alpha) = sum_r (-1)^{|alpha ∩ x_r|}`` in the order of
        :func:`fourier_closure` (the first entry is ``n``). Zhang et al.'s coefficient
        ``<f^alpha, h>`` is ``2^{-|I|/2}`` times it.

    Examples
    --------
    >>> from pymc_dp.releases import DiscreteBayesNet
    >>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    >>> bayes_net_fourier_coefficients([[0, 1], [0, 1], [1, 0]], net).tolist()
    [3, 1, -1, -3]
    """
    net = _binary(network)
    return _coefficients_from_tables(bayes_net_count_tables(data, net), net)


@dataclass(frozen=True, eq=False)  # identity equality: it holds arrays
class BayesNetFourierRelease:
    """Noisy Fourier coefficients of a binary Bayesian network (Zhang et al. 2016, Alg. 2).

    Attributes
    ----------
    network : DiscreteBayesNet
    closure : tuple of tuple of str
        ``N_I`` (:func:`fourier_closure`); entry 0 is the empty set (not released: ``n``).
    parity_counts : numpy.ndarray
        The released noisy parity counts ``s_alpha + noise`` for ``closure[1:]`` (read-only).
    mechanism : Mechanism
        The mechanism that added the noise (one release of all counts together).
    n : int
        Number of records (public under replace-one neighbours).
    sensitivity : tuple of float
        Exact L1 and L2 sensitivity of the parity counts (:func:`fourier_sensitivity`).
    shift : float
        The increment added to ``hat h(empty)`` (Alg. 2 step 7; 0 without ``shift_t``).

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import DiscreteBayesNet, release_bayes_net_fourier
    >>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    >>> rel = release_bayes_net_fourier([[0, 1], [0, 1], [1, 0]], net,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=1.0), rng=np.random.default_rng(0))
    >>> rel.sensitivity, rel.guarantee().epsilon, rel.parity_counts.dtype
    ((2.0, 1.4142135623730951), 1.0, dtype('int64'))
    >>> t = rel.tables()  # consistent: the y-marginal of x's table is y's table
    >>> bool(np.allclose(t["x"].sum(axis=1), t["y"]))
    True
    """

    network: DiscreteBayesNet
    closure: tuple
    parity_counts: np.ndarray
    mechanism: Mechanism
    n: int
    sensitivity: tuple[float, float]
    shift: float = 0.0

    def guarantee(self) -> PrivacyGuarantee:
        """The privacy guarantee per individual with one record: ``mechanism.guarantee()``
        (reconstruction, shift and truncation are post-processing)."""
        return self.mechanism.guarantee()

    def coefficients(self, normalized: bool = False) -> np.ndarray:
        """Noisy coefficients on :attr:`closure` (float64): ``n + shift`` then ``n - 2 s``.

        ``normalized=True`` gives Zhang et al.'s ``z_gamma`` (times ``2^{-|I|/2}``).
        """
        normalized = as_bool("normalized", normalized)
        out = np.empty(len(self.closure), dtype=np.float64)
        out[0] = self.n + self.shift
        out[1:] = self.n - 2.0 * np.asarray(self.parity_counts, dtype=np.float64)
        return out * 2.0 ** (-len(self.network.nodes) / 2) if normalized else out

    def tables(self) -> dict[str, np.ndarray]:
        """Consistent marginal tables of every family (Alg. 2 step 9), float64.

        Layout as :func:`~pymc_dp.releases.bayes_net_count_tables`; cells may be negative
        (see :meth:`projected` and ``shift_t``).
        """
        net, coef = self.network, self.coefficients()
        return {
            v: (_walsh_hadamard(coef[pos]) / float(pos.size)).reshape(net.table_shape(v))
            for v, pos in _family_positions(net).items()
        }

    def is_nonnegative(self) -> bool:
        """Whether every reconstructed cell is ``>= 0`` (the stealth event of Corollary 3)."""
        return all(bool(np.all(t >= 0.0)) for t in self.tables().values())

    def projected(self) -> dict[str, np.ndarray]:
        """The tables truncated to ``[0, n]`` (validity without stealth; post-processing)."""
        n = float(self.n)
        return {v: np.clip(t, 0.0, n) for v, t in self.tables().items()}

    def plugin_posterior(self, prior=1.0) -> dict[str, np.ndarray]:
        """Beta (Dirichlet) parameters per node and parent configuration: prior + projected.

        Parameters
        ----------
        prior : float, default 1.0
            One positive concentration for every cell (Alg. 2 step 11's ``alpha, beta``).

        Returns
        -------
        dict of str to numpy.ndarray
            As :meth:`~pymc_dp.releases.BayesNetCountsRelease.plugin_posterior`.

        Examples
        --------
        >>> import numpy as np, pymc_dp as pmdp
        >>> from pymc_dp.releases import DiscreteBayesNet, release_bayes_net_fourier
        >>> net = DiscreteBayesNet({"a": 2, "b": 2}, {"b": ["a"]})
        >>> rel = release_bayes_net_fourier([[0, 1], [0, 1], [1, 0]], net,
        ...     mechanism=pmdp.Laplace(scale=1e-9, sensitivity=2.0), rng=np.random.default_rng(0),
        ...     allow_float=True)
        >>> np.round(rel.plugin_posterior(0.5)["b"], 6).tolist()
        [[0.5, 2.5], [1.5, 0.5]]
        """
        a = as_positive_finite("prior", prior)
        return {v: a + t for v, t in self.projected().items()}


def release_bayes_net_fourier(
    data,
    network: DiscreteBayesNet,
    *,
    mechanism,
    rng=None,
    shift_t: float | None = None,
    allow_float: bool = False,
) -> BayesNetFourierRelease:
    """Release a binary network's Fourier coefficients once (Zhang et al. 2016, Alg. 2).

    Parameters
    ----------
    data : array_like of shape (n, n_nodes) or mapping of node name to 1-D array
        Binary records as for :func:`~pymc_dp.releases.bayes_net_count_tables`.
    network : DiscreteBayesNet
        All nodes binary.
    mechanism : Mechanism or callable
        A mechanism whose declared sensitivity is at least :func:`fourier_sensitivity`'s, or a
        callable ``sensitivity -> Mechanism`` (``functools.partial(pmdp.Geometric,
        epsilon=...)``: exact, the default choice; ``pmdp.Laplace`` as in the paper needs
        ``allow_float=True``).
    rng : numpy.random.Generator, optional
        For simulations; ``None`` draws the noise from the operating system's secure source.
    shift_t : float, optional
        ``t > 0`` of Alg. 2 step 7 / Corollary 3: add ``4 t |N_I|^2 / epsilon`` to ``hat
        h(empty)`` (a pure-epsilon mechanism is needed). ``None``: no shift.
    allow_float : bool, default False
        Opt in to a floating-point mechanism (its low-order bits leak; Mironov 2012).

    Returns
    -------
    BayesNetFourierRelease

    Raises
    ------
    ValueError
        A non-binary network, invalid data, a mechanism below the sensitivity, a float
        mechanism without ``allow_float``, or a ``shift_t`` that is not finite and ``> 0``.
    TypeError
        A ``network`` that is not a :class:`~pymc_dp.releases.DiscreteBayesNet`, or a
        ``shift_t`` that is not a real number.

    Examples
    --------
    >>> import functools, numpy as np, pymc_dp as pmdp
    >>> from pymc_dp.releases import DiscreteBayesNet, release_bayes_net_fourier
    >>> net = DiscreteBayesNet({"y": 2, "x": 2}, {"x": ["y"]})
    >>> rel = release_bayes_net_fourier(np.array([[0, 1], [1, 1], [1, 0]]), net,
    ...     mechanism=functools.partial(pmdp.Geometric, epsilon=0.5), rng=np.random.default_rng(1),
    ...     shift_t=1.0)
    >>> rel.mechanism, rel.shift  # 4 t |N_I|^2 / epsilon with |N_I| = 4
    (Geometric(epsilon=0.5, sensitivity=2), 128.0)
    """
    net = _binary(network)
    if shift_t is not None:
        shift_t = as_positive_finite("shift_t", shift_t)
    coef = _coefficients_from_tables(bayes_net_count_tables(data, net), net)
    n = int(coef[0])
    parity = (n - coef[1:]) // 2  # s_alpha, integers in [0, n]
    sens = fourier_sensitivity(net)
    mech = _calibrate(mechanism, sens, integer_stat=True)
    shift = 0.0
    if shift_t is not None:
        g = mech.guarantee()
        if not (g.delta == 0.0 and g.epsilon is not None and math.isfinite(g.epsilon)):
            raise ValueError(
                f"shift_t needs a pure-epsilon mechanism (Corollary 3 is stated for Laplace "
                f"noise), got {mech!r} with guarantee {g}"
            )
        shift = 4.0 * float(shift_t) * coef.size**2 / g.epsilon
    noisy = release_values(mech, parity, rng, allow_float, "release_bayes_net_fourier")
    return BayesNetFourierRelease(
        network=net,
        closure=fourier_closure(net),
        parity_counts=_readonly(noisy),
        mechanism=mech,
        n=n,
        sensitivity=sens,
        shift=shift,
    )
