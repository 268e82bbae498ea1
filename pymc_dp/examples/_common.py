"""What the Schein et al. examples share: argument checks, the block-structured truth, the
geometric release, ``pm.sample`` with the examples' defaults, posterior-mean rates, and the
all-Gibbs step adapter of :mod:`~pymc_dp.examples.mmsb` and
:mod:`~pymc_dp.examples.poisson_tensor`.

Private: the public names are those of the example modules
(:mod:`~pymc_dp.examples.poisson_factorization`, :mod:`~pymc_dp.examples.mmsb`,
:mod:`~pymc_dp.examples.poisson_tensor`).
"""

from __future__ import annotations

import math
import numbers
from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.mechanisms.geometric import Geometric

#: the four ways each example's ``build_model`` writes its model
HOWS = ("nonprivate", "naive", "augmented", "marginal")


def generator(rng) -> np.random.Generator:
    """``rng`` itself if a Generator, else ``numpy.random.default_rng(rng)``."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def positive_int(name: str, value) -> int:
    """``value`` as an int if an integer >= 1 (not a bool), else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def positive_float(name: str, value) -> float:
    """``value`` as a float if finite and > 0 (not a bool), else ``ValueError`` naming
    ``name``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return x


def check_how(how, mechanism) -> None:
    """``how`` one of :data:`HOWS`, and a Geometric ``mechanism`` for ``"augmented"`` and
    ``"marginal"`` (the all-Gibbs examples' models), else ``ValueError`` naming them."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    if how in ("augmented", "marginal") and not isinstance(mechanism, Geometric):
        raise ValueError(
            f"how={how!r} needs the release's Geometric mechanism, got mechanism={mechanism!r}"
        )


def integer_counts(name: str, arr: np.ndarray, *, bits: int, nonnegative: bool) -> np.ndarray:
    """``arr`` (shape already checked by the caller) as int64 if it holds integers within
    ``+-2**bits`` (and ``>= 0`` if ``nonnegative``), else ``ValueError`` naming ``name``."""
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{name} must hold finite integers")
    if np.any(arr > 2**bits) or np.any(arr < -(2**bits)):
        raise ValueError(f"{name} must lie within +-2**{bits}")
    if nonnegative and np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative (true counts), got a minimum of {arr.min()}")
    return arr.astype(np.int64)


def block_factor(rng, n: int, k: int, shape: float, mean: float, sparse_prob: float,
                 sparse_mean: float) -> np.ndarray:  # fmt: skip
    """``(n, k)`` block-structured factor: row ``i`` in block ``i k // n`` (contiguous blocks
    of near-equal size) holds a ``Gamma(shape, mean / shape)`` draw there; every other entry
    is 0 except, with probability ``sparse_prob``, an ``Exponential(sparse_mean)`` addition.
    Draws: the Gamma ``(n, k)``, the exponentials ``(n, k)``, the uniforms ``(n, k)``."""
    block = np.zeros((n, k))
    block[np.arange(n), np.arange(n) * k // n] = 1.0
    main = rng.gamma(shape, mean / shape, size=(n, k))
    extra = rng.exponential(sparse_mean, size=(n, k)) * (rng.random((n, k)) < sparse_prob)
    return block * main + (1.0 - block) * extra


def geometric_release(counts: np.ndarray, epsilon, rng, relative_to_mean: bool):
    """Release ``counts`` (checked non-negative int64) through two-sided geometric noise:
    ``alpha = exp(-epsilon / N)``, ``N`` their mean, or ``alpha = exp(-epsilon)`` if not
    ``relative_to_mean``. Returns ``(noisy, mechanism)``; ``rng=None``: the mechanism's
    secure source."""
    eps = positive_float("epsilon", epsilon)
    if relative_to_mean:
        n = float(counts.mean())
        if not n > 0.0:
            raise ValueError("counts are all zero: relative_to_mean needs a mean N > 0")
        mechanism = Geometric(alpha=math.exp(-eps / n))
    else:
        mechanism = Geometric(epsilon=eps)
    return mechanism.release(counts, rng=None if rng is None else generator(rng)), mechanism


def sample(model, *, draws, tune, chains, random_seed, default_step=None, **sample_kwargs):
    """``pm.sample`` with ``progressbar=False`` by default and, unless the caller passes
    ``step``, the step ``default_step()`` (``None``: PyMC's own assignment)."""
    sample_kwargs.setdefault("progressbar", False)
    if default_step is not None and "step" not in sample_kwargs:
        with model:
            sample_kwargs["step"] = [default_step()]
    return pm.sample(
        draws=draws, tune=tune, chains=chains, random_seed=random_seed, model=model,
        **sample_kwargs,
    )  # fmt: skip


def posterior_mean(idata, names, subscripts: str) -> np.ndarray:
    """Mean over all chains and draws of ``einsum(subscripts, *factors)``, ``factors`` the
    posterior arrays ``names`` with (chain, draw) flattened into the leading ``s``."""
    post = idata["posterior"]
    f = [np.asarray(post[n].values, dtype=np.float64) for n in names]
    f = [x.reshape(-1, *x.shape[2:]) for x in f]
    return np.einsum(subscripts, *f, optimize=True) / f[0].shape[0]


class AllGibbs(ForgetsInitialPoint, BlockedStep):
    """All-Gibbs step of an example model: ``n_scans`` scans of the example's kernel in one
    call, each starting, for ``"augmented"``, with the exact draw of the true counts given the
    release and the current rates (the kernel's ``alpha`` argument).

    A subclass sets ``name``, ``_FACTOR_NAMES`` (the factors' variable names, in the kernel's
    order), ``_SPEC_OF`` (its ``build_model``'s registry: model to a spec with ``how``, ``data``,
    ``alpha``, ``prior_shape``, ``prior_rate``), ``_BUILDER`` (the ``build_model`` it names in
    errors), and the method ``_scan``.
    """

    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {}
    _FACTOR_NAMES: ClassVar[tuple] = ()
    _SPEC_OF: ClassVar = None
    _BUILDER: ClassVar[str] = ""

    def __new__(cls, model=None, **kwargs):
        # PyMC's BlockedStep.__new__ reads the model from the keyword (or the context) and
        # would take a positional argument for the variables
        if model is not None and not isinstance(model, pm.Model):
            raise ValueError(f"model must be a pymc.Model from build_model, got {model!r}")
        return super().__new__(cls, model=model, **kwargs)

    def __init__(self, model=None, *, n_scans=1, rng=None, **kw):
        kw.pop("initial_point", None)
        kw.pop("blocked", None)
        if kw:
            raise TypeError(f"unexpected keyword arguments {sorted(kw)}")
        model = modelcontext(model)
        spec = self._SPEC_OF.get(model) if isinstance(model, pm.Model) else None
        if spec is None or spec.how == "marginal":
            raise ValueError(
                f"model must come from {self._BUILDER} with how 'nonprivate', 'naive' or "
                "'augmented'"
            )
        self._spec = spec
        self.n_scans = positive_int("n_scans", n_scans)
        self._names = [model.rvs_to_values[model[n]].name for n in self._FACTOR_NAMES]
        augmented = spec.alpha is not None
        rvs = [model[n] for n in self._FACTOR_NAMES] + ([model["y_true"]] if augmented else [])
        self.vars = [model.rvs_to_values[rv] for rv in rvs]
        self.blocked = True
        self.rng = get_random_generator(rng)

    def _scan(self, counts, logs, n_scans, alpha):  # pragma: no cover - abstract
        """The kernel's ``n_scans`` scans of the log factors ``logs`` given ``counts`` (the
        release if ``alpha`` is not None): ``(logs, true counts or None)``."""
        raise NotImplementedError

    def step(self, point):
        """``n_scans`` scans (class docstring)."""
        s = self._spec
        new = dict(point)
        logs = [np.asarray(point[n], dtype=np.float64) for n in self._names]
        logs, y = self._scan(s.data, logs, self.n_scans, s.alpha)
        if s.alpha is not None:
            new["y_true"] = y.astype(np.asarray(point["y_true"]).dtype, copy=False)
        new.update(zip(self._names, logs, strict=True))
        return new, []

    @staticmethod
    def competence(var, has_grad=None):
        """Never chosen by ``pm.sample`` on its own: pass it in ``step=`` (``fit``)."""
        return Competence.INCOMPATIBLE

    @classmethod
    def _fit(cls, model, n_scans, **kw):
        """``sample`` with this step (NUTS, PyMC's choice, for ``how="marginal"``)."""
        spec = cls._SPEC_OF.get(model) if isinstance(model, pm.Model) else None
        if spec is None:
            raise ValueError(f"model must come from {cls._BUILDER}")
        default = None if spec.how == "marginal" else (lambda: cls(model=model, n_scans=n_scans))
        return sample(model, default_step=default, **kw)
