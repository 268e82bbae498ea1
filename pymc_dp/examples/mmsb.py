r"""Mixed-membership stochastic block model from a locally private network, fitted four ways.

The model (Schein et al. 2019, sec. 5.2): ``V`` actors, ``C`` communities,

.. math::

    \theta_{ic} \sim \mathrm{Gamma}(a_0, b_0), \quad \pi_{cd} \sim \mathrm{Gamma}(a_0, b_0),
    \quad y_{ij} \sim \mathrm{Poisson}\Big(\mu_{ij} = \sum_{c,d}\theta_{ic}\theta_{jd}\pi_{cd}
    \Big), \quad i \ne j,

(``a_0 = 0.1``, ``b_0 = 1``, the paper's prior), every count released as :math:`\tilde y_{ij}
= y_{ij} + \tau_{ij}`, :math:`\tau_{ij} \sim \mathrm{2Geo}(\alpha)`, :math:`\alpha =
\exp(-\epsilon/N)`, ``N`` the mean true count. **No self-loops**: the diagonal is neither
released nor modelled (an actor does not email itself; with self-loops :math:`\mu_{ii}` holds
:math:`\theta_{ic}\theta_{id}` and the Gamma full conditional of :math:`\theta_i` fails).
Held-out entries (``mask``) are left out of the likelihood: the model is built on the observed
entries only, a 1-D vector (a masked array would make PyMC impute them as free variables).

:func:`build_model` writes it four ways, as :mod:`~pymc_dp.examples.poisson_factorization`:
``"nonprivate"`` (true counts), ``"naive"`` (noisy counts clipped at 0), ``"augmented"``
(``Privatized(..., marginalize=False)``: latent true counts ``"y_true"``) and ``"marginal"``
(``Privatized(..., marginalize=True)``, sampled by NUTS). :func:`fit` samples the first three
with :class:`MMSBGibbs` (Schein et al.'s all-Gibbs scan: exact true counts given the release,
allocation to community pairs, Gamma rows of ``theta`` one after the other, Gamma ``pi``;
:mod:`pymc_dp.kernels.mmsb`), the fourth with NUTS.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.examples import mmsb
>>> truth = mmsb.simulate(8, 2, rng=np.random.default_rng(0))
>>> noisy, mech = mmsb.privatize(truth["counts"], 1.0, rng=np.random.default_rng(1))
>>> model = mmsb.build_model(noisy, 2, how="augmented", mechanism=mech)
>>> sorted(v.name for v in model.free_RVs), model.initial_point()["y_true"].shape
(['pi', 'theta', 'y_true'], (56,))
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.distributions.privatized import Privatized
from pymc_dp.examples import _common
from pymc_dp.examples._common import (
    AllGibbs,
    block_factor,
    check_how,
    generator,
    geometric_release,
    integer_counts,
    positive_float,
    positive_int,
    posterior_mean,
)
from pymc_dp.kernels.mmsb import mmsb_scan, observed_pairs

__all__ = [
    "HOWS",
    "MMSBGibbs",
    "build_model",
    "fit",
    "mae",
    "posterior_mean_rates",
    "privatize",
    "simulate",
    "top_actor_mask",
]

#: the four ways :func:`build_model` writes the model
HOWS = _common.HOWS

# Block-structured truth of simulate(): in-community memberships Gamma(shape 4, mean 1),
# within-community interaction Gamma(shape 4, mean 4), sparse additions elsewhere.
_IN_SHAPE, _IN_MEAN = 4.0, 1.0
_PI_SHAPE, _PI_MEAN = 4.0, 10.0
_SPARSE_PROB, _SPARSE_MEAN = 0.1, 0.3  # off-community membership additions
_PI_SPARSE_PROB, _PI_SPARSE_MEAN = 0.2, 0.5  # between-community interaction additions
_SCHEIN_SHAPE, _SCHEIN_RATE = 0.01, 0.5  # the paper's stated truth (block=False)

# build_model -> what the Gibbs step needs (the observed entries and their data)
_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Spec(NamedTuple):
    how: str
    rows: np.ndarray
    cols: np.ndarray
    data: np.ndarray  # true counts (nonprivate), clipped (naive) or released (augmented)
    alpha: float | None
    prior_shape: float
    prior_rate: float


def _square_counts(name: str, values, *, nonnegative: bool) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValueError(f"{name} must be a square V x V matrix with V >= 2, got {arr.shape}")
    y = integer_counts(name, arr, bits=50, nonnegative=False)
    if nonnegative and np.any(y[~np.eye(y.shape[0], dtype=bool)] < 0):
        raise ValueError(f"{name} must be non-negative (true counts) off the diagonal")
    return y


def simulate(n_actors, n_communities, *, rng=None, block=True) -> dict:
    r"""Draw a true MMSB and its count matrix (zero diagonal: no self-loops).

    Parameters
    ----------
    n_actors, n_communities : int
        ``V`` (at least 2) and ``C``, positive.
    rng : numpy.random.Generator or seed, optional
    block : bool, default True
        ``True``: actors cut into ``C`` contiguous communities (actor ``i`` in ``i C // V``);
        membership in its own community ``Gamma(shape 4, mean 1)``, elsewhere 0 except with
        probability 0.1 an ``Exponential(mean 0.3)`` addition; ``pi`` has
        ``Gamma(shape 4, mean 10)`` on the diagonal and, with probability 0.2, an
        ``Exponential(mean 0.5)`` off it. In-block rates have mean about 10, the rest are
        sparse. ``False``: Schein et al.'s stated truth, every entry ``Gamma(0.01, rate
        0.5)``, which gives an almost empty matrix (errata in ``docs/theory.md``).

    Returns
    -------
    dict
        ``"theta"`` ``(V, C)``, ``"pi"`` ``(C, C)``, ``"rates"`` ``theta pi theta^T`` with a
        zero diagonal, ``"counts"`` ``Poisson(rates)`` (int64, zero diagonal).

    Examples
    --------
    >>> import numpy as np
    >>> t = simulate(6, 2, rng=np.random.default_rng(0))
    >>> t["counts"].shape, int(np.trace(t["counts"])), t["pi"].shape
    ((6, 6), 0, (2, 2))
    """
    v = positive_int("n_actors", n_actors)
    if v < 2:
        raise ValueError(f"n_actors must be at least 2 (no self-loops), got {v}")
    c = positive_int("n_communities", n_communities)
    gen = generator(rng)
    if block:
        theta = block_factor(gen, v, c, _IN_SHAPE, _IN_MEAN, _SPARSE_PROB, _SPARSE_MEAN)
        # C x C with C blocks: the diagonal
        pi = block_factor(gen, c, c, _PI_SHAPE, _PI_MEAN, _PI_SPARSE_PROB, _PI_SPARSE_MEAN)
    else:
        theta = gen.gamma(_SCHEIN_SHAPE, 1.0 / _SCHEIN_RATE, size=(v, c))
        pi = gen.gamma(_SCHEIN_SHAPE, 1.0 / _SCHEIN_RATE, size=(c, c))
    rates = theta @ pi @ theta.T
    np.fill_diagonal(rates, 0.0)
    counts = gen.poisson(rates).astype(np.int64)
    return {"theta": theta, "pi": pi, "rates": rates, "counts": counts}


def top_actor_mask(counts, n_top) -> np.ndarray:
    """Held-out entries of Schein et al.'s link prediction: every entry sent by one of the
    ``n_top`` largest senders or received by one of the ``n_top`` largest receivers.

    Parameters
    ----------
    counts : array_like of int, shape (V, V)
        The counts that rank the actors (row sums: sent; column sums: received); ties go to
        the lower index.
    n_top : int
        Positive, below ``V``.

    Returns
    -------
    numpy.ndarray of bool, shape (V, V)
        ``True`` = held out.

    Examples
    --------
    >>> top_actor_mask([[0, 5, 0], [1, 0, 0], [0, 2, 0]], 1).astype(int).tolist()
    [[1, 1, 1], [0, 1, 0], [0, 1, 0]]
    """
    y = _square_counts("counts", counts, nonnegative=True)
    v = y.shape[0]
    k = positive_int("n_top", n_top)
    if k >= v:
        raise ValueError(f"n_top must be below the number of actors {v}, got {k}")
    off = np.where(np.eye(v, dtype=bool), 0, y)
    senders = np.argsort(-off.sum(axis=1), kind="stable")[:k]
    receivers = np.argsort(-off.sum(axis=0), kind="stable")[:k]
    mask = np.zeros((v, v), dtype=bool)
    mask[senders, :] = True
    mask[:, receivers] = True
    return mask


def privatize(counts, epsilon, *, rng=None, relative_to_mean=True):
    r"""Release every off-diagonal count through the two-sided geometric mechanism.

    Parameters
    ----------
    counts : array_like of int, shape (V, V)
        True counts, non-negative off the diagonal (the diagonal is ignored).
    epsilon : float
        Finite and > 0.
    rng : numpy.random.Generator or seed, optional
        ``None``: the mechanism's secure source.
    relative_to_mean : bool, default True
        ``alpha = exp(-epsilon / N)``, ``N`` the mean off-diagonal count (Schein et al.'s
        ``(N, epsilon)``-limited-precision local privacy); ``False``: ``alpha =
        exp(-epsilon)``.

    Returns
    -------
    noisy : numpy.ndarray of int64, shape (V, V)
        Released counts, zero on the (unreleased) diagonal.
    mechanism : pymc_dp.Geometric

    Examples
    --------
    >>> import numpy as np
    >>> z, mech = privatize([[0, 3], [1, 0]], 1.0, rng=np.random.default_rng(0))
    >>> z.shape, int(z[0, 0]), round(mech.alpha, 6) == round(float(np.exp(-0.5)), 6)
    ((2, 2), 0, True)
    """
    y = _square_counts("counts", counts, nonnegative=True)
    off = ~np.eye(y.shape[0], dtype=bool)
    noisy = np.zeros_like(y)
    noisy[off], mechanism = geometric_release(y[off], epsilon, rng, relative_to_mean)
    return noisy, mechanism


def build_model(
    counts, n_communities, *, how, mechanism=None, mask=None, prior_shape=0.1, prior_rate=1.0
):
    r"""The MMSB of a ``V x V`` count matrix on its observed off-diagonal entries.

    Parameters
    ----------
    counts : array_like of int, shape (V, V)
        True counts for ``"nonprivate"``, released counts otherwise; the diagonal is ignored.
    n_communities : int
        ``C``.
    how : {"nonprivate", "naive", "augmented", "marginal"}
    mechanism : pymc_dp.Geometric, optional
        The release's mechanism; required by ``"augmented"`` and ``"marginal"``.
    mask : array_like of bool, shape (V, V), optional
        ``True`` = held out: left out of the likelihood (:func:`top_actor_mask`).
    prior_shape, prior_rate : float, default 0.1 and 1.0
        The Gamma prior of every entry of ``theta`` and ``pi``.

    Returns
    -------
    pymc.Model
        Free ``"theta"`` ``(V, C)``, ``"pi"`` ``(C, C)`` (and ``"y_true"`` ``(E,)`` for
        ``"augmented"``), observed ``"y"`` ``(E,)`` over the ``E`` observed entries in
        row-major order (:func:`pymc_dp.kernels.mmsb.observed_pairs`).

    Raises
    ------
    ValueError
        Naming ``how``, ``mechanism``, ``counts``, ``mask``, ``n_communities``,
        ``prior_shape`` or ``prior_rate``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0, 2, -1], [4, 0, 0], [1, 3, 0]])
    >>> m = build_model(z, 2, how="naive", mask=[[0, 0, 1], [0, 0, 0], [0, 0, 0]])
    >>> m.rvs_to_values[m["y"]].data.shape, m["theta"].type.shape
    ((5,), (3, 2))
    >>> build_model(z, 2, how="nonprivate")
    Traceback (most recent call last):
    ...
    ValueError: counts must be non-negative (true counts) off the diagonal
    """
    check_how(how, mechanism)
    y = _square_counts("counts", counts, nonnegative=how == "nonprivate")
    c = positive_int("n_communities", n_communities)
    a0 = positive_float("prior_shape", prior_shape)
    b0 = positive_float("prior_rate", prior_rate)
    v = y.shape[0]
    rows, cols = observed_pairs(v, mask)
    if rows.size == 0:
        raise ValueError("mask holds out every entry: nothing is observed")
    obs = y[rows, cols]
    data = np.clip(obs, 0, None) if how == "naive" else obs
    coords = {
        "actor": range(v),
        "community": range(c),
        "community_to": range(c),
        "entry": range(rows.size),
    }
    with pm.Model(coords=coords) as model:
        shape, rate = np.float64(a0), np.float64(b0)
        theta = pm.Gamma("theta", shape, rate, shape=(v, c), dims=("actor", "community"))
        pi = pm.Gamma("pi", shape, rate, shape=(c, c), dims=("community", "community_to"))
        rates = pt.sum(theta[rows] * (theta[cols] @ pi.T), axis=1)  # theta_i^T pi theta_j
        if how in ("nonprivate", "naive"):
            pm.Poisson("y", rates, observed=data, dims="entry")
        else:
            Privatized(
                "y",
                pm.Poisson.dist(rates),
                mechanism,
                marginalize=how == "marginal",
                observed=data,
                dims="entry",
            )
    alpha = float(mechanism.alpha) if how == "augmented" else None
    _SPECS[model] = _Spec(how, rows, cols, data, alpha, a0, b0)
    return model


class MMSBGibbs(AllGibbs):
    """All-Gibbs step for a model of :func:`build_model` (``how`` not ``"marginal"``).

    One scan: the true counts given the release and the current rates (exact,
    :func:`pymc_dp.kernels.count_posterior.draw_true_counts`; ``"augmented"`` only), then
    :func:`pymc_dp.kernels.mmsb.mmsb_scan` (allocation to community pairs, the rows of
    ``theta`` one after the other, ``pi``). Every draw is from a full conditional, so the step
    is exact.

    Parameters
    ----------
    model : pymc.Model
        Built by :func:`build_model` (default: the model in context).
    n_scans : int, default 1
        Whole scans per ``pm.sample`` iteration.
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample``.

    Examples
    --------
    >>> import numpy as np
    >>> m = build_model(np.array([[0, 2, 1], [0, 0, 3], [1, 0, 0]]), 1, how="nonprivate")
    >>> step = MMSBGibbs(m)
    >>> sorted(v.name for v in step.vars)
    ['pi_log__', 'theta_log__']
    """

    name = "mmsb_gibbs"
    _FACTOR_NAMES = ("theta", "pi")
    _SPEC_OF = _SPECS
    _BUILDER = "pymc_dp.examples.mmsb.build_model"

    def _scan(self, counts, logs, n_scans, alpha):
        s = self._spec
        prior = (s.prior_shape, s.prior_rate, s.prior_shape, s.prior_rate)
        out = mmsb_scan(counts, s.rows, s.cols, *logs, *prior, self.rng, n_scans=n_scans,
                        alpha=alpha)  # fmt: skip
        return list(out[:2]), (out[2] if alpha is not None else None)


def fit(model, *, draws=1000, tune=1000, chains=2, random_seed=None, n_scans=1, **sample_kwargs):
    """Sample ``model`` with ``pm.sample``: :class:`MMSBGibbs` unless ``how="marginal"`` (NUTS).

    Parameters
    ----------
    model : pymc.Model
        From :func:`build_model`.
    draws, tune, chains, random_seed
        As for ``pm.sample``.
    n_scans : int, default 1
        Scans of :class:`MMSBGibbs` per iteration.
    **sample_kwargs
        Passed on to ``pm.sample``; ``progressbar`` defaults to ``False``.

    Returns
    -------
    xarray.DataTree

    Examples
    --------
    >>> import numpy as np
    >>> m = build_model(np.array([[0, 2, 1], [0, 0, 3], [1, 0, 0]]), 1, how="nonprivate")
    >>> idata = fit(m, draws=20, tune=10, chains=1, random_seed=1,
    ...             compute_convergence_checks=False)
    >>> posterior_mean_rates(idata).shape
    (3, 3)
    """
    return MMSBGibbs._fit(model, n_scans, draws=draws, tune=tune, chains=chains,
                          random_seed=random_seed, **sample_kwargs)  # fmt: skip


def posterior_mean_rates(idata) -> np.ndarray:
    r"""Posterior mean of :math:`\mu_{ij} = \theta_i^\top \pi \theta_j` over all draws, every
    entry (held-out ones included), zero diagonal.

    Parameters
    ----------
    idata : xarray.DataTree
        With ``posterior["theta"]`` ``(chain, draw, V, C)`` and ``posterior["pi"]``
        ``(chain, draw, C, C)``.

    Returns
    -------
    numpy.ndarray, shape (V, V)

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> th = np.ones((1, 2, 2, 1)); p = np.array([1.0, 3.0]).reshape(1, 2, 1, 1)
    >>> post = xr.Dataset({"theta": (("chain", "draw", "a", "c"), th),
    ...                    "pi": (("chain", "draw", "c", "d"), p)})
    >>> posterior_mean_rates(xr.DataTree.from_dict({"posterior": post}))
    array([[0., 2.],
           [2., 0.]])
    """
    out = posterior_mean(idata, ("theta", "pi", "theta"), "sic,scd,sjd->ij")
    np.fill_diagonal(out, 0.0)
    return out


def mae(rates, counts, mask=None) -> float:
    """Mean absolute error of rates against true counts over the off-diagonal entries, or over
    the off-diagonal entries where ``mask`` is True (held-out MAE).

    Parameters
    ----------
    rates, counts : array_like, shape (V, V)
    mask : array_like of bool, shape (V, V), optional

    Returns
    -------
    float

    Examples
    --------
    >>> mae([[9, 1.5], [2.0, 9]], [[0, 1], [3, 0]])
    0.75
    >>> mae([[9, 1.5], [2.0, 9]], [[0, 1], [3, 0]], mask=[[0, 1], [0, 0]])
    0.5
    """
    r = np.asarray(rates, dtype=np.float64)
    y = np.asarray(counts, dtype=np.float64)
    if r.shape != y.shape or r.ndim != 2 or r.shape[0] != r.shape[1]:
        raise ValueError(
            f"rates and counts must be the same square shape, got {r.shape}, {y.shape}"
        )
    keep = ~np.eye(r.shape[0], dtype=bool)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != r.shape:
            raise ValueError(f"mask must have shape {r.shape}, got {m.shape}")
        keep &= m.astype(bool)
    if not keep.any():
        raise ValueError("mask selects no off-diagonal entry")
    return float(np.mean(np.abs(r[keep] - y[keep])))
