r"""Poisson CP tensor factorization from a locally private 3-way count tensor.

Schein et al. (2019, sec. 3) state their method for any Poisson factorization with a
multi-index, tensor factorization included; their case studies are matrices. This example is
the 3-way case (e.g. sender x receiver x time counts, Schein et al. 2015):

.. math::

    y_{ijk} \sim \mathrm{Poisson}\Big(\mu_{ijk} = \sum_c \theta_{ic}\phi_{jc}\psi_{kc}\Big),
    \quad \theta, \phi, \psi \sim \mathrm{Gamma}(a_0, b_0),

every cell released with two-sided geometric noise, ``alpha = exp(-epsilon / N)``.
:func:`build_model` writes it ``"nonprivate"``, ``"naive"``, ``"augmented"`` (latent true
counts ``"y_true"``) or ``"marginal"`` (NUTS on the exact marginal); :func:`fit` samples the
first three with :class:`CPGibbs`: the exact true counts given the release
(:func:`pymc_dp.kernels.count_posterior.draw_true_counts`), then the allocation and the Gamma
modes of :func:`pymc_dp.kernels.poisson_tensor.cp_scan`.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.examples import poisson_tensor as pt3
>>> truth = pt3.simulate((4, 3, 2), 2, rng=np.random.default_rng(0))
>>> noisy, mech = pt3.privatize(truth["counts"], 1.0, rng=np.random.default_rng(1))
>>> m = pt3.build_model(noisy, 2, how="augmented", mechanism=mech)
>>> sorted(v.name for v in m.free_RVs)
['phi', 'psi', 'theta', 'y_true']
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
import pymc as pm

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
from pymc_dp.kernels.poisson_tensor import cp_scan

__all__ = [
    "HOWS",
    "CPGibbs",
    "build_model",
    "fit",
    "posterior_mean_rates",
    "privatize",
    "simulate",
]

#: the four ways :func:`build_model` writes the model
HOWS = _common.HOWS
_FACTORS = ("theta", "phi", "psi")
_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Spec(NamedTuple):
    how: str
    data: np.ndarray
    alpha: float | None
    prior_shape: float
    prior_rate: float


def _tensor(name, values, *, nonnegative) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 3 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 3-way tensor, got shape {arr.shape}")
    return integer_counts(name, arr, bits=50, nonnegative=nonnegative)


def simulate(shape, n_components, *, rng=None) -> dict:
    """A block-structured CP truth and its counts: mode ``m``'s rows are cut into ``C``
    contiguous blocks; a row's factor in its own block is ``Gamma(shape 4, mean 2)``, other
    entries 0 except with probability 0.1 an ``Exponential(mean 0.3)`` addition.

    Parameters
    ----------
    shape : tuple of 3 int
    n_components : int
    rng : numpy.random.Generator or seed, optional

    Returns
    -------
    dict
        ``"theta"``, ``"phi"``, ``"psi"`` (``(I_m, C)``), ``"rates"`` and ``"counts"``.

    Examples
    --------
    >>> t = simulate((3, 4, 2), 2, rng=np.random.default_rng(0))
    >>> t["counts"].shape, t["psi"].shape
    ((3, 4, 2), (2, 2))
    """
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else ()
    if len(dims) != 3:
        raise ValueError(f"shape must be a tuple of 3 positive integers, got {shape!r}")
    dims = tuple(positive_int("shape", s) for s in dims)
    c = positive_int("n_components", n_components)
    gen = generator(rng)
    out = {
        name: block_factor(gen, n, c, 4.0, 2.0, 0.1, 0.3)
        for name, n in zip(_FACTORS, dims, strict=True)
    }
    out["rates"] = np.einsum("ic,jc,kc->ijk", out["theta"], out["phi"], out["psi"])
    out["counts"] = gen.poisson(out["rates"]).astype(np.int64)
    return out


def privatize(counts, epsilon, *, rng=None, relative_to_mean=True):
    """Release every cell through the two-sided geometric mechanism (``alpha = exp(-epsilon /
    N)``, ``N`` the mean count; ``relative_to_mean=False``: ``alpha = exp(-epsilon)``).

    Returns
    -------
    noisy : numpy.ndarray of int64
    mechanism : pymc_dp.Geometric

    Examples
    --------
    >>> z, mech = privatize(np.ones((2, 2, 2), int), 1.0, rng=np.random.default_rng(0))
    >>> z.shape, round(mech.alpha, 6) == round(float(np.exp(-1.0)), 6)
    ((2, 2, 2), True)
    """
    return geometric_release(_tensor("counts", counts, nonnegative=True), epsilon, rng,
                             relative_to_mean)  # fmt: skip


def build_model(counts, n_components, *, how, mechanism=None, prior_shape=0.1, prior_rate=1.0):
    """The CP model of a 3-way count tensor, one of four ways (module docstring).

    Parameters
    ----------
    counts : array_like of int, shape (I, J, K)
        True counts (``"nonprivate"``) or the release.
    n_components : int
    how : {"nonprivate", "naive", "augmented", "marginal"}
    mechanism : pymc_dp.Geometric, optional
        Required by ``"augmented"`` and ``"marginal"``.
    prior_shape, prior_rate : float

    Returns
    -------
    pymc.Model
        Free ``"theta"`` ``(I, C)``, ``"phi"`` ``(J, C)``, ``"psi"`` ``(K, C)`` (and
        ``"y_true"``); observed ``"y"``.

    Examples
    --------
    >>> m = build_model(np.ones((2, 3, 2), int), 2, how="nonprivate")
    >>> m["phi"].type.shape
    (3, 2)
    >>> build_model(np.ones((2, 3, 2), int), 2, how="marginal")
    Traceback (most recent call last):
    ...
    ValueError: how='marginal' needs the release's Geometric mechanism, got mechanism=None
    """
    check_how(how, mechanism)
    y = _tensor("counts", counts, nonnegative=how == "nonprivate")
    c = positive_int("n_components", n_components)
    a0 = positive_float("prior_shape", prior_shape)
    b0 = positive_float("prior_rate", prior_rate)
    data = np.clip(y, 0, None) if how == "naive" else y
    with pm.Model() as model:
        f = [
            pm.Gamma(name, np.float64(a0), np.float64(b0), shape=(n, c))
            for name, n in zip(_FACTORS, y.shape, strict=True)
        ]
        rates = (f[0][:, None, None, :] * f[1][None, :, None, :] * f[2][None, None, :, :]).sum(-1)
        if how in ("nonprivate", "naive"):
            pm.Poisson("y", rates, observed=data)
        else:
            Privatized(
                "y", pm.Poisson.dist(rates), mechanism, marginalize=how == "marginal", observed=data
            )
    alpha = float(mechanism.alpha) if how == "augmented" else None
    _SPECS[model] = _Spec(how, data, alpha, a0, b0)
    return model


class CPGibbs(AllGibbs):
    """All-Gibbs step for a model of :func:`build_model` (not ``"marginal"``): true counts
    (``"augmented"``), then :func:`pymc_dp.kernels.poisson_tensor.cp_scan`.

    Parameters
    ----------
    model : pymc.Model
        From :func:`build_model` (default: the model in context).
    n_scans : int, default 1
    rng : seed or Generator, optional

    Examples
    --------
    >>> m = build_model(np.ones((2, 2, 2), int), 1, how="nonprivate")
    >>> sorted(v.name for v in CPGibbs(m).vars)
    ['phi_log__', 'psi_log__', 'theta_log__']
    """

    name = "cp_gibbs"
    _FACTOR_NAMES = _FACTORS
    _SPEC_OF = _SPECS
    _BUILDER = "pymc_dp.examples.poisson_tensor.build_model"

    def _scan(self, counts, logs, n_scans, alpha):
        s = self._spec
        out = cp_scan(counts, logs, s.prior_shape, s.prior_rate, self.rng, n_scans=n_scans,
                      alpha=alpha)  # fmt: skip
        return out if alpha is not None else (out, None)


def fit(model, *, draws=1000, tune=1000, chains=2, random_seed=None, n_scans=1, **sample_kwargs):
    """``pm.sample`` with :class:`CPGibbs` (NUTS for ``"marginal"``).

    Examples
    --------
    >>> m = build_model(np.array([[[1, 0], [2, 1]]]), 1, how="nonprivate")
    >>> idata = fit(m, draws=10, tune=5, chains=1, random_seed=1,
    ...             compute_convergence_checks=False)
    >>> posterior_mean_rates(idata).shape
    (1, 2, 2)
    """
    return CPGibbs._fit(model, n_scans, draws=draws, tune=tune, chains=chains,
                        random_seed=random_seed, **sample_kwargs)  # fmt: skip


def posterior_mean_rates(idata) -> np.ndarray:
    r"""Posterior mean of :math:`\mu_{ijk}` over all chains and draws.

    Examples
    --------
    >>> import xarray as xr
    >>> one = np.ones((1, 2, 1, 1))
    >>> post = xr.Dataset({n: (("chain", "draw", f"{n}_r", "c"), one * (2.0 if n == "psi" else 1.0))
    ...                    for n in ("theta", "phi", "psi")})
    >>> posterior_mean_rates(xr.DataTree.from_dict({"posterior": post}))
    array([[[2.]]])
    """
    return posterior_mean(idata, _FACTORS, "sic,sjc,skc->ijk")
