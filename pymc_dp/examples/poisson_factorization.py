r"""Poisson matrix factorization from a locally private count matrix, fitted four ways.

The model (Schein et al. 2019, sec. 5): a ``D x V`` count matrix with

.. math::

    \theta_{dk} \sim \mathrm{Gamma}(a_0, b_0), \quad \phi_{kv} \sim \mathrm{Gamma}(a_0, b_0),
    \quad y_{dv} \sim \mathrm{Poisson}\Big(\mu_{dv} = \sum_k \theta_{dk}\phi_{kv}\Big),

(``a_0 = 0.1``, ``b_0 = 1`` by default, the paper's prior) where every count was released
locally as :math:`\tilde y_{dv} = y_{dv} + \tau_{dv}` with two-sided geometric noise
:math:`\tau_{dv} \sim \mathrm{2Geo}(\alpha)`, :math:`\alpha = \exp(-\epsilon / N)` and
:math:`N` the empirical mean of the true counts (sec. 5; the ``-exp`` printed there is a
misprint, see ``docs/theory.md``, "Errata of the
papers"). :func:`build_model` writes the model four ways:

``"nonprivate"``
    ``pm.Poisson`` observed at the true counts (the reference nobody outside the data holder has).
``"naive"``
    ``pm.Poisson`` observed at the noisy counts clipped at 0, as if they were true.
``"augmented"``
    ``pmdp.Privatized(..., marginalize=False)``: the true counts are a latent variable
    ``"y_true"`` that ``pm.sample`` gives to :class:`~pymc_dp.CountAugmentation` (an exact draw
    of each true count), and ``theta``, ``phi`` to :class:`~pymc_dp.PoissonFactorGibbs`
    (allocation of the counts to the components, Gamma full conditionals): Schein et al.'s
    all-Gibbs scan, no NUTS.
``"marginal"``
    ``pmdp.Privatized(..., marginalize=True)``: the true counts are summed out exactly (the
    Poisson-geometric marginal) and NUTS samples ``theta`` and ``phi`` alone.

The factors are not identified (permuting the components, or scaling ``theta[:, k]`` by ``c``
and ``phi[k]`` by ``1/c``, leaves the rates unchanged), so compare fits through the rates
:math:`\mu_{dv}` (:func:`posterior_mean_rates`) and the mean absolute error against the true
counts (:func:`mae`), as Schein et al. do.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.examples import poisson_factorization as pf
>>> truth = pf.simulate(12, 10, 2, rng=np.random.default_rng(0))
>>> noisy, mech = pf.privatize(truth["counts"], 1.0, rng=np.random.default_rng(1))
>>> model = pf.build_model(noisy, 2, how="marginal", mechanism=mech)
>>> sorted(v.name for v in model.free_RVs)
['phi', 'theta']
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_dp.distributions.privatized import Privatized
from pymc_dp.examples import _common
from pymc_dp.examples._common import (
    block_factor,
    generator,
    geometric_release,
    integer_counts,
    positive_float,
    positive_int,
    sample,
)
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.geometric import Geometric

__all__ = [
    "HOWS",
    "build_model",
    "fit",
    "mae",
    "posterior_mean_rates",
    "privatize",
    "simulate",
]

#: the four ways :func:`build_model` writes the model
HOWS = _common.HOWS

# The block-structured truth of :func:`simulate` (see its docstring).
_BLOCK_SHAPE = 4.0  # Gamma shape of the in-block factors
_BLOCK_MEAN = 2.0  # their mean: in-block rates have mean 4
_SPARSE_PROB = 0.1  # probability of a small off-block addition to a factor
_SPARSE_MEAN = 0.5  # its mean (exponential)
# Schein et al.'s stated truth, Gamma(shape 0.01, rate 0.5), for ``block=False``
_SCHEIN_SHAPE, _SCHEIN_RATE = 0.01, 0.5


def simulate(n_rows, n_cols, n_components, *, rng=None, block=True) -> dict:
    r"""Draw a true factorization and its Poisson count matrix.

    Parameters
    ----------
    n_rows, n_cols, n_components : int
        ``D``, ``V`` and ``K``, positive.
    rng : numpy.random.Generator or seed, optional
        Source of the draws (``None``: fresh entropy).
    block : bool, default True
        ``True``: a block-structured truth. Rows and columns are cut into ``K`` contiguous
        blocks of near-equal size (row ``d`` is in block ``d K // D``); the factor of a row
        (column) in its own block is ``Gamma(shape 4, mean 2)``, so diagonal-block rates have
        mean 4; every other factor entry is 0, except with probability 0.1 an
        ``Exponential(mean 0.5)`` addition, so off-block rates are sparse and small (mean
        about 0.2). ``False``: Schein et al.'s stated truth, every factor entry
        ``Gamma(shape 0.01, rate 0.5)``; it gives an almost empty matrix (errata in
        ``docs/theory.md``: 0.39 non-zero cells of 400 on average in 1000 draws of a
        20 x 20, K = 5 truth), so it reproduces nothing of their
        Figure 1 and is kept only to show that.

    Returns
    -------
    dict
        ``"theta"`` ``(n_rows, K)``, ``"phi"`` ``(K, n_cols)``, ``"rates"`` ``theta @ phi``
        (float64) and ``"counts"`` the true counts ``Poisson(rates)`` (int64).

    Examples
    --------
    >>> import numpy as np
    >>> truth = simulate(6, 4, 2, rng=np.random.default_rng(0))
    >>> truth["counts"].shape, truth["counts"].dtype, truth["theta"].shape
    ((6, 4), dtype('int64'), (6, 2))
    >>> bool(np.allclose(truth["rates"], truth["theta"] @ truth["phi"]))
    True
    """
    d = positive_int("n_rows", n_rows)
    v = positive_int("n_cols", n_cols)
    k = positive_int("n_components", n_components)
    gen = generator(rng)
    if block:
        blocks = (_BLOCK_SHAPE, _BLOCK_MEAN, _SPARSE_PROB, _SPARSE_MEAN)
        theta = block_factor(gen, d, k, *blocks)
        phi = block_factor(gen, v, k, *blocks).T
    else:
        theta = gen.gamma(_SCHEIN_SHAPE, 1.0 / _SCHEIN_RATE, size=(d, k))
        phi = gen.gamma(_SCHEIN_SHAPE, 1.0 / _SCHEIN_RATE, size=(k, v))
    rates = theta @ phi
    counts = gen.poisson(rates).astype(np.int64)
    return {"theta": theta, "phi": phi, "rates": rates, "counts": counts}


def _count_matrix(name: str, values, *, nonnegative: bool) -> np.ndarray:
    """A 2-D int64 matrix of integers (refuses fractions, NaN, infinities, negatives)."""
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 2-D matrix, got shape {arr.shape}")
    return integer_counts(name, arr, bits=53, nonnegative=nonnegative)


def privatize(counts, epsilon, *, rng=None, relative_to_mean=True):
    r"""Release every count through the two-sided geometric mechanism (Schein's setting).

    Parameters
    ----------
    counts : array_like of int, shape (D, V)
        True counts, non-negative.
    epsilon : float
        Privacy level, finite and > 0.
    rng : numpy.random.Generator or seed, optional
        For reproducible simulations; ``None`` draws the noise from the secure source of
        :meth:`~pymc_dp.mechanisms.base.Mechanism.release`.
    relative_to_mean : bool, default True
        ``True``: ``alpha = exp(-epsilon / N)`` with ``N`` the empirical mean of ``counts``
        (Schein et al. sec. 5: ``(N, epsilon)``-limited-precision local privacy, i.e.
        ``epsilon / N``-DP for a change of one in one count). ``False``: ``alpha =
        exp(-epsilon)`` (``epsilon``-DP per unit change of a count).

    Returns
    -------
    noisy : numpy.ndarray of int64, shape (D, V)
        ``counts + noise``.
    mechanism : pymc_dp.Geometric
        The mechanism that made the release (its ``alpha`` is the law actually sampled).

    Raises
    ------
    ValueError
        ``counts`` not a non-negative integer matrix, or all zero with ``relative_to_mean``
        (``N = 0``); ``epsilon`` not finite and > 0, or ``epsilon / N`` outside the range
        :class:`~pymc_dp.Geometric` allows.

    Examples
    --------
    >>> import numpy as np
    >>> noisy, mech = privatize(np.array([[1, 3], [0, 4]]), 1.0, rng=np.random.default_rng(0))
    >>> noisy.shape, noisy.dtype, round(mech.alpha, 6) == round(float(np.exp(-1.0 / 2.0)), 6)
    ((2, 2), dtype('int64'), True)
    """
    y = _count_matrix("counts", counts, nonnegative=True)
    return geometric_release(y, epsilon, rng, relative_to_mean)


def _check_how(how, mechanism, counts):
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    if how in ("augmented", "marginal") and not isinstance(mechanism, Mechanism):
        raise ValueError(f"how={how!r} needs the release's mechanism, got mechanism={mechanism!r}")
    if how == "augmented" and not isinstance(mechanism, Geometric):
        raise ValueError(
            f"how='augmented' needs a Geometric mechanism (CountAugmentation), got {mechanism!r}"
        )
    return _count_matrix("counts", counts, nonnegative=how == "nonprivate")


def build_model(counts, n_components, *, how, mechanism=None, prior_shape=0.1, prior_rate=1.0):
    r"""The Poisson factorization of a count matrix, written one of four ways.

    Parameters
    ----------
    counts : array_like of int, shape (D, V)
        The true counts for ``how="nonprivate"`` (non-negative); the released (noisy) counts
        otherwise.
    n_components : int
        ``K``.
    how : {"nonprivate", "naive", "augmented", "marginal"}
        See the module docstring. ``"naive"`` fits ``pm.Poisson`` to ``max(counts, 0)``.
    mechanism : pymc_dp.mechanisms.base.Mechanism, optional
        The mechanism of the release: required by ``"augmented"`` (a
        :class:`~pymc_dp.Geometric`) and ``"marginal"`` (any mechanism with a Poisson marginal);
        ignored by ``"nonprivate"`` and ``"naive"`` (the naive model ignores it by design).
    prior_shape, prior_rate : float, default 0.1 and 1.0
        The Gamma prior of every entry of ``theta`` and ``phi`` (Schein et al.'s ``a_0, b_0``).

    Returns
    -------
    pymc.Model
        Free variables ``"theta"`` ``(D, K)`` and ``"phi"`` ``(K, V)`` (dims ``("row",
        "component")`` and ``("component", "col")``), plus ``"y_true"`` ``(D, V)`` for
        ``"augmented"``; the observed variable is ``"y"``.

    Raises
    ------
    ValueError
        Naming ``how`` (unknown), ``mechanism`` (missing, or not Geometric for
        ``"augmented"``), ``counts`` (not a 2-D integer matrix; negative for
        ``"nonprivate"``), ``n_components``, ``prior_shape`` or ``prior_rate``.

    Examples
    --------
    >>> import numpy as np
    >>> import pymc_dp as pmdp
    >>> z = np.array([[3, -1, 0], [5, 2, 7]])
    >>> m = build_model(z, 2, how="augmented", mechanism=pmdp.Geometric(epsilon=1.0))
    >>> sorted(v.name for v in m.free_RVs), m["theta"].type.shape, m["phi"].type.shape
    (['phi', 'theta', 'y_true'], (2, 2), (2, 3))
    >>> build_model(z, 2, how="nonprivate")
    Traceback (most recent call last):
    ...
    ValueError: counts must be non-negative (true counts), got a minimum of -1
    """
    y = _check_how(how, mechanism, counts)
    k = positive_int("n_components", n_components)
    a0 = np.float64(positive_float("prior_shape", prior_shape))
    b0 = np.float64(positive_float("prior_rate", prior_rate))
    coords = {"row": range(y.shape[0]), "component": range(k), "col": range(y.shape[1])}
    with pm.Model(coords=coords) as model:
        theta = pm.Gamma("theta", a0, b0, shape=(y.shape[0], k), dims=("row", "component"))
        phi = pm.Gamma("phi", a0, b0, shape=(k, y.shape[1]), dims=("component", "col"))
        rates = theta @ phi
        if how == "nonprivate":
            pm.Poisson("y", rates, observed=y, dims=("row", "col"))
        elif how == "naive":
            pm.Poisson("y", rates, observed=np.clip(y, 0, None), dims=("row", "col"))
        else:
            Privatized(
                "y",
                pm.Poisson.dist(rates),
                mechanism,
                marginalize=how == "marginal",
                observed=y,
                dims=("row", "col"),
            )
    return model


def fit(model, *, draws=1000, tune=1000, chains=2, random_seed=None, **sample_kwargs):
    """Sample ``model`` with plain ``pm.sample`` (PyMC's own step assignment).

    Parameters
    ----------
    model : pymc.Model
        From :func:`build_model`.
    draws, tune, chains : int
        As for ``pm.sample``.
    random_seed : int, optional
        As for ``pm.sample``.
    **sample_kwargs
        Passed on to ``pm.sample`` (``cores``, ``target_accept``, ...); ``progressbar``
        defaults to ``False``.

    Returns
    -------
    xarray.DataTree
        What ``pm.sample`` returns in PyMC 6 (the successor of ``arviz.InferenceData``).

    Examples
    --------
    >>> import numpy as np
    >>> m = build_model(np.array([[2, 0], [1, 3]]), 1, how="nonprivate")
    >>> idata = fit(m, draws=20, tune=20, chains=1, random_seed=1, compute_convergence_checks=False)
    >>> posterior_mean_rates(idata).shape
    (2, 2)
    """
    return sample(model, draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                  **sample_kwargs)  # fmt: skip


def posterior_mean_rates(idata) -> np.ndarray:
    r"""Posterior mean of the rates :math:`\mu = \theta\phi` over all chains and draws.

    The rates are invariant to relabelling the components, unlike ``theta`` and ``phi``, so
    the mean is meaningful across chains that settled on different labellings.

    Parameters
    ----------
    idata : xarray.DataTree or arviz.InferenceData
        With ``posterior["theta"]`` ``(chain, draw, D, K)`` and ``posterior["phi"]``
        ``(chain, draw, K, V)``.

    Returns
    -------
    numpy.ndarray, shape (D, V)
        :math:`\frac{1}{S}\sum_s \theta^{(s)}\phi^{(s)}`.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> theta = np.array([1.0, 3.0]).reshape(1, 2, 1, 1)  # chain, draw, D=1, K=1
    >>> phi = np.array([2.0, 2.0]).reshape(1, 2, 1, 1)
    >>> post = xr.Dataset(
    ...     {"theta": (("chain", "draw", "row", "k"), theta),
    ...      "phi": (("chain", "draw", "k", "col"), phi)})
    >>> posterior_mean_rates(xr.DataTree.from_dict({"posterior": post}))
    array([[4.]])
    """
    post = idata["posterior"]
    theta = np.asarray(post["theta"].values, dtype=np.float64)
    phi = np.asarray(post["phi"].values, dtype=np.float64)
    c, s, d, k = theta.shape
    v = phi.shape[-1]
    # sum over (chain, draw, component) as one contraction: (D, C S K) @ (C S K, V)
    left = theta.transpose(2, 0, 1, 3).reshape(d, c * s * k)
    right = phi.reshape(c * s * k, v)
    return (left @ right) / (c * s)


def mae(rates, counts) -> float:
    """Mean absolute error of estimated rates against (true) counts, as in Schein et al.

    Parameters
    ----------
    rates : array_like, shape (D, V)
        Estimated rates (e.g. :func:`posterior_mean_rates`).
    counts : array_like, shape (D, V)
        The true counts.

    Returns
    -------
    float
        ``mean(|rates - counts|)``.

    Examples
    --------
    >>> mae([[1.5, 2.0]], [[1, 3]])
    0.75
    """
    r = np.asarray(rates, dtype=np.float64)
    y = np.asarray(counts, dtype=np.float64)
    if r.shape != y.shape:
        raise ValueError(f"rates and counts must have the same shape, got {r.shape} and {y.shape}")
    return float(np.mean(np.abs(r - y)))
