"""Noise-aware PyMC models of sufficient-statistic releases (latent records + ``Release``).

The statistic in the model is computed from the records exactly as the data holder computed
it, clamping included: ``min(x, U)`` for Poisson records, ``clip`` to the box for Normal and
regression records (the regression statistic in the release's layout: upper triangle of
``X'X`` row by row, ``X'y``, ``y'y``, no intercept column added). A release published
projected to the valid region (``project=True``) is conditioned on exactly:
``Release(..., lower=, upper=)``, the censored likelihood at the clipped cells. Records are
one-hot summed (``Σ_i [x_i, 1 - x_i]``, ``Σ_i onehot(x_i)``) so that each record's
contribution is its own row, which is what the data-augmentation step needs to update one
record at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from pytensor.tensor.variable import TensorVariable

from pymc_dp._cache import lazy_module
from pymc_dp.distributions.release import Release, is_random_variable
from pymc_dp.mechanisms.discretized import snap_pt
from pymc_dp.releases._families import NormalGrid

__all__ = ["build_model"]

# imported on first use: SciPy's submodules are a slow import (pymc_dp._cache)
linalg = lazy_module("scipy.linalg")


def _f64(x) -> np.ndarray:
    """Fixed constants as float64 (PyTensor would make exact float literals float32)."""
    return np.asarray(x, dtype=np.float64)


def _observed(rel) -> np.ndarray:
    grid_value = getattr(rel, "grid_value", None)
    if grid_value is not None:  # an exact release of snapped records: the integers released
        return np.asarray(grid_value, dtype=np.int64)
    v = np.asarray(rel.value)
    return v.astype(np.int64) if rel.mechanism.integer else v.astype(np.float64)


def _snapped(x, lo, hi, grid):
    """``r(clip(x, lo, hi) / grid)`` (int64), as the data holder snapped the records."""
    return snap_pt(pt.clip(x, _f64(lo), _f64(hi)), grid)


def _release(name, stat, rel) -> None:
    """``Release`` of ``stat``, censored at the projection bounds when the data holder
    published the projected (clipped) value."""
    box = getattr(rel, "projection", None)
    bounds = {} if box is None else {"lower": box[0], "upper": box[1]}
    Release(name, stat, rel.mechanism, observed=_observed(rel), **bounds)


def _bernoulli(rel, prior, name):
    from pymc_dp.releases.sufficient import _positive_prior

    a, b = _positive_prior(prior, ("alpha", "beta"), (1, 1))
    p = pm.Beta("p", _f64(a), _f64(b))
    x = pm.Bernoulli("x", p=p, shape=rel.n)
    stat = pt.stack([x, 1 - x], axis=1).sum(axis=0)
    _release(name, stat, rel)


def _categorical(rel, prior, name):
    from pymc_dp.releases.sufficient import _positive, _prior

    (alpha,) = _prior(prior, ("alpha",), (np.ones(rel.bounds),))
    alpha = _positive("alpha", alpha)
    if alpha.shape != (rel.bounds,):
        raise ValueError(f"prior alpha must have {rel.bounds} entries, got shape {alpha.shape}")
    p = pm.Dirichlet("p", a=_f64(alpha))
    x = pm.Categorical("x", p=p, shape=rel.n)
    stat = pt.eq(x[:, None], pt.arange(rel.bounds)[None, :]).astype("int64").sum(axis=0)
    _release(name, stat, rel)


def _poisson(rel, prior, name):
    from pymc_dp.releases.sufficient import _positive_prior

    a, b = _positive_prior(prior, ("alpha", "beta"))
    lam = pm.Gamma("lam", alpha=_f64(a), beta=_f64(b))
    x = pm.Poisson("x", mu=lam, shape=rel.n)
    stat = pt.minimum(x, np.int64(rel.bounds)).sum(keepdims=True)
    _release(name, stat, rel)


def _normal(rel, prior, name):
    """Normal-Inverse-Gamma prior: ``v ~ InvGamma(alpha, beta)``, ``mu ~ Normal(mu0,
    sqrt(v / kappa))``, records ``x ~ Normal(mu, sqrt(v))`` clamped to ``[a, b]``."""
    from pymc_dp.releases.sufficient import _positive_prior, _prior

    mu0 = float(np.asarray(_prior(prior, ("mu", "kappa", "alpha", "beta"))[0], np.float64))
    if not np.isfinite(mu0):
        raise ValueError(f"prior mu must be finite, got {mu0!r}")
    k0, a0, b0 = _positive_prior(
        _prior(prior, ("mu", "kappa", "alpha", "beta"))[1:], ("kappa", "alpha", "beta")
    )
    v = pm.InverseGamma("v", alpha=_f64(a0), beta=_f64(b0))
    mu = pm.Normal("mu", mu=_f64(mu0), sigma=pt.sqrt(v / _f64(k0)))
    x = pm.Normal("x", mu=mu, sigma=pt.sqrt(v), shape=rel.n)
    lo, hi = rel.bounds
    if getattr(rel, "grid", None) is not None:  # exact release: records snapped to the grid
        k = _snapped(x, lo, hi, rel.grid)
        w = np.int64(NormalGrid(rel.bounds, rel.grid).w)  # the data holder's weight
        stat = pt.stack([w * k, k * k], axis=1).sum(axis=0)
        Release(name, stat, rel.mechanism, observed=_observed(rel))
        return
    xc = pt.clip(x, _f64(lo), _f64(hi))
    Release(
        name, pt.stack([xc, xc * xc], axis=1).sum(axis=0), rel.mechanism, observed=_observed(rel)
    )


def _regression_prior(prior, d: int):
    """``(mu (d,), precision (d, d), alpha, beta)`` of the Normal-Inverse-Gamma prior, as
    :meth:`SufficientStatisticsRelease.plugin_posterior` takes it, validated: ``mu`` finite
    and broadcastable to ``(d,)``, ``precision`` finite, symmetric, positive definite."""
    from pymc_dp.releases.sufficient import _positive_prior, _prior

    names = ("mu", "precision", "alpha", "beta")
    mu, lam, a0, b0 = _prior(prior, names)
    mu = np.asarray(mu, dtype=np.float64)
    if mu.ndim > 1 or mu.size not in (1, d) or not np.all(np.isfinite(mu)):
        raise ValueError(f"prior mu must be a finite scalar or {d}-vector, got {mu!r}")
    lam = np.asarray(lam, dtype=np.float64)
    if lam.shape != (d, d) or not np.all(np.isfinite(lam)):
        raise ValueError(f"prior precision must be a finite {d}x{d} matrix, got {lam!r}")
    if not np.allclose(lam, lam.T, rtol=1e-12, atol=0.0):
        raise ValueError(f"prior precision must be symmetric, got {lam!r}")
    try:
        chol = np.linalg.cholesky(0.5 * (lam + lam.T))
    except np.linalg.LinAlgError:
        raise ValueError(f"prior precision must be positive definite, got {lam!r}") from None
    a0, b0 = _positive_prior((a0, b0), ("alpha", "beta"))
    return np.broadcast_to(mu, (d,)).copy(), chol, a0, b0


def _default_covariates(rel) -> Callable:
    """Independent Normal predictors with a Normal-Inverse-Gamma hyperprior centred in the box:
    ``X_v[j] ~ InvGamma(2, h²)``, ``X_mu[j] ~ Normal(c, sqrt(X_v[j]))``, ``X[i, j] ~
    Normal(X_mu[j], sqrt(X_v[j]))`` with ``c``, ``h`` the centre and half-width of ``[xl, xh]``."""
    xl, xh = rel.bounds[0]
    c, h = 0.5 * (xl + xh), 0.5 * (xh - xl)

    def covariates(n: int, d: int):
        xv = pm.InverseGamma("X_v", alpha=_f64(2.0), beta=_f64(h * h), shape=d)
        xm = pm.Normal("X_mu", mu=_f64(np.full(d, c)), sigma=pt.sqrt(xv), shape=d)
        return pm.Normal("X", mu=xm, sigma=pt.sqrt(xv), shape=(n, d))

    return covariates


def _check_covariates(X, model, n: int, d: int):
    """The predictors a ``covariates`` callable returned: a real tensor of shape ``(n, d)``
    built in ``model`` (every random variable it reads registered there)."""
    if not isinstance(X, TensorVariable):
        raise TypeError(
            "covariates(n, d) must return a PyMC random variable of shape "
            f"({n}, {d}) built inside the model (or a tensor built from such variables, or "
            f"public data: pm.Data), got {type(X).__name__}"
        )
    if X.ndim != 2 or X.dtype.startswith(("complex", "bool")):
        raise ValueError(
            f"covariates(n, d) must return a real 2-D tensor, got {X.ndim}-D of dtype {X.dtype}"
        )
    try:
        shape = tuple(int(s) for s in X.shape.eval())
    except Exception as err:  # any failure to evaluate the shape: refuse, naming it
        raise ValueError(
            f"covariates(n, d) returned a tensor whose shape is unknown: {err}"
        ) from err
    if shape != (n, d):
        raise ValueError(f"covariates(n, d) must return shape ({n}, {d}), got {shape}")
    known = set(model.basic_RVs)
    stray = [v for v in ancestors([X]) if is_random_variable(v) and v not in known]
    if stray:
        raise ValueError(
            "covariates(n, d) must build its random variables inside the model (pm.Normal("
            f"'X', ...), not pm.Normal.dist): {stray[0]} is not a variable of the model"
        )
    return X


def _linear_regression(rel, prior, name, covariates=None):
    """Records ``X`` (``covariates``) and ``y | X ~ Normal(X beta, sqrt(v))``; ``(beta, v)``
    Normal-Inverse-Gamma, written ``beta = mu + L^-T beta_white`` with ``L L' = precision``
    and ``beta_white ~ Normal(0, sqrt(v))`` so that both get exact conjugate Gibbs steps."""
    n, d = rel.n, rel.dimension
    mu, chol, a0, b0 = _regression_prior(prior, d)
    make = _default_covariates(rel) if covariates is None else covariates
    if not callable(make):
        raise TypeError(f"covariates must be a callable (n, d) -> X, got {covariates!r}")
    X = _check_covariates(make(n, d), pm.modelcontext(None), n, d)
    v = pm.InverseGamma("v", alpha=_f64(a0), beta=_f64(b0))
    white = pm.Normal("beta_white", mu=_f64(0.0), sigma=pt.sqrt(v), shape=d)
    root = linalg.solve_triangular(chol, np.eye(d), lower=True).T  # L^-T
    beta = _f64(mu) + pt.dot(_f64(root), white)  # no Deterministic inside: ConjugateGibbs
    pm.Deterministic("beta", beta)  # reads the linear predictor through plain ops
    y = pm.Normal("y", mu=pt.dot(X, beta), sigma=pt.sqrt(v), shape=n)
    (xl, xh), (yl, yh) = rel.bounds
    if getattr(rel, "grid", None) is not None:  # exact release: records snapped to the grids
        xc, yc = _snapped(X, xl, xh, rel.grid[0]), _snapped(y, yl, yh, rel.grid[1])
    else:
        xc, yc = pt.clip(X, _f64(xl), _f64(xh)), pt.clip(y, _f64(yl), _f64(yh))
    iu = np.triu_indices(d)
    stat = pt.concatenate([pt.dot(xc.T, xc)[iu], pt.dot(xc.T, yc), pt.dot(yc, yc)[None]])
    _release(name, stat, rel)


_BUILDERS = {
    "bernoulli": _bernoulli,
    "categorical": _categorical,
    "poisson": _poisson,
    "normal": _normal,
    "linear_regression": _linear_regression,
}


def build_model(rel, prior, name: str, covariates=None) -> pm.Model:
    """The model of :meth:`SufficientStatisticsRelease.model` (see its docstring)."""
    builder = _BUILDERS[rel.family]
    if covariates is not None and rel.family != "linear_regression":
        raise ValueError(
            f"covariates= is for linear_regression releases, not {rel.family!r} (its records "
            "have no predictors)"
        )
    with pm.Model() as model:
        if rel.family == "linear_regression":
            builder(rel, prior, name, covariates)
        else:
            builder(rel, prior, name)
    return model
