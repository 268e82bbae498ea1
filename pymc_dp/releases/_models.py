"""Noise-aware PyMC models of sufficient-statistic releases (latent records + ``Release``).

The statistic in the model is computed from the records exactly as the data holder computed
it, clamping included: ``min(x, U)`` for Poisson records. A release published projected to the
valid region (``project=True``) is conditioned on exactly: ``Release(..., lower=, upper=)``,
the censored likelihood at the clipped cells. Records are one-hot summed
(``Σ_i [x_i, 1 - x_i]``, ``Σ_i onehot(x_i)``) so that each record's contribution is its own row,
which is what the data-augmentation step needs to update one record at a time.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.distributions.release import Release

__all__ = ["build_model"]

_SUPPORTED = ("bernoulli", "categorical", "poisson", "normal")


def _f64(x) -> np.ndarray:
    """Fixed constants as float64 (PyTensor would make exact float literals float32)."""
    return np.asarray(x, dtype=np.float64)


def _observed(rel) -> np.ndarray:
    v = np.asarray(rel.value)
    return v.astype(np.int64) if rel.mechanism.integer else v.astype(np.float64)


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
    xc = pt.clip(x, _f64(lo), _f64(hi))
    Release(
        name, pt.stack([xc, xc * xc], axis=1).sum(axis=0), rel.mechanism, observed=_observed(rel)
    )


_BUILDERS = {
    "bernoulli": _bernoulli,
    "categorical": _categorical,
    "poisson": _poisson,
    "normal": _normal,
}


def build_model(rel, prior, name: str) -> pm.Model:
    """The model of :meth:`SufficientStatisticsRelease.model` (see its docstring)."""
    builder = _BUILDERS.get(rel.family)
    if builder is None:
        raise ValueError(
            f"model() supports the {', '.join(_SUPPORTED)} families, not {rel.family!r}: write "
            "the model with pmdp.Release yourself (latent records, clamped with pt.clip to the "
            f"declared bounds {rel.bounds!r}, and their statistic), or use plugin_posterior()"
        )
    with pm.Model() as model:
        builder(rel, prior, name)
    return model
