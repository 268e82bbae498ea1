r"""Gibbs step for the Gamma factors of a Poisson factorization (allocation of the counts).

A Poisson count matrix whose rate is ``theta @ phi`` with Gamma factors,

.. code-block:: python

    theta = pm.Gamma("theta", a, b, shape=(D, K))
    phi = pm.Gamma("phi", a, b, shape=(K, V))
    pmdp.Privatized("y", pm.Poisson.dist(theta @ phi), pmdp.Geometric(epsilon=1.0),
                    marginalize=False, observed=z)

is sampled by an all-Gibbs scan (Schein et al. 2019, sec. 5): :class:`CountAugmentation` draws
the true counts ``y_true`` given the release and the rates, and this step allocates every
count to its ``K`` components (multinomial given the rates) and draws ``theta`` and ``phi`` from
their Gamma full conditionals (:mod:`pymc_dp.kernels.poisson_factor`). No gradient-based step
touches the factors, so there is no funnel and no divergence, whatever the Gamma prior's shape
(NUTS on the factors given imputed counts meets a funnel under Gamma(0.1, 1) priors:
``benchmarks/results/factorization_ess.md``).

``pm.sample`` picks this step by itself for exactly the factors of rule 5 of
:mod:`pymc_dp.step_methods.claims` (:func:`~pymc_dp.step_methods.claims.poisson_factorizations`):
``theta`` and ``phi`` of a Privatized true count distributed as ``Poisson(theta @ phi)``, free
Gamma variables (log-transformed or untransformed) with fixed prior parameters, read by
nothing but that count. It is exact for non-private Gamma-Poisson factorization too (an observed
count matrix): there it is used only when given explicitly,
``pm.sample(step=[PoissonFactorGibbs([theta, phi])])``, since pymc_dp never changes how a model
without a release is sampled.

The factors are drawn on the log scale and written to the point in their value variable's
space (``theta_log__`` for PyMC's default log transform), so small prior shapes never give
``log 0``.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.step_methods import PoissonFactorGibbs
>>> with pm.Model() as model:
...     theta = pm.Gamma("theta", np.float64(0.1), np.float64(1.0), shape=(4, 2))
...     phi = pm.Gamma("phi", np.float64(0.1), np.float64(1.0), shape=(2, 3))
...     _ = pmdp.Privatized("y", pm.Poisson.dist(theta @ phi), pmdp.Geometric(epsilon=1.0),
...                         marginalize=False, observed=np.arange(12).reshape(4, 3) - 2)
>>> from pymc.sampling.mcmc import assign_step_methods
>>> _, steps = assign_step_methods(model)
>>> sorted((cls.__name__, sorted(v.name for v in vs)) for cls, vs in steps.items())
[('PoissonFactorGibbs', ['phi_log__', 'theta_log__', 'y_true'])]
"""

from __future__ import annotations

import numbers
from typing import ClassVar, NamedTuple

import numpy as np
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.kernels.poisson_factor import factor_scan
from pymc_dp.step_methods.claims import (
    factorization_of,
    model_of,
    poisson_factorizations,
    privatized_true_counts,
)

__all__ = ["PoissonFactorGibbs", "default_n_scans"]


class _Block(NamedTuple):
    """One factorization: the value names of the variables the step updates (None when not
    updated), the names it reads, whether each factor is log-transformed, the compiled
    ``point -> (counts, a_theta, rate_theta, a_phi, rate_phi, release)`` and the geometric
    noise parameter of a Privatized count (None for observed counts)."""

    counts: str | None
    theta: str | None
    phi: str | None
    theta_name: str
    phi_name: str
    theta_log: bool
    phi_log: bool
    fn: object
    alpha: float | None
    cells: int
    k: int
    what: str


def _factorization(model, rv):
    """The factorization that ``rv`` (a factor or the counts) belongs to."""
    for counts in [*model.free_RVs, *model.observed_RVs]:
        fac = factorization_of(counts, model)
        if fac is not None and rv in fac:
            return fac
    raise ValueError(
        f"PoissonFactorGibbs cannot sample {rv.name!r}: it is not a Gamma factor theta (D, K) "
        "or phi (K, V) of a Poisson count matrix with rate theta @ phi (nor such a count "
        "matrix), with fixed prior parameters and read by nothing else "
        "(pymc_dp.step_methods.claims.factorization_of)"
    )


def _compile(model, fac, release, compile_kwargs):
    counts = model.rvs_to_values.get(fac.counts, fac.counts)
    outs = [pt.cast(counts, "int64")]
    for factor in (fac.theta, fac.phi):
        shape, scale = factor.owner.op.dist_params(factor.owner)  # Gamma(shape, scale)
        full = factor.shape
        outs.append(pt.broadcast_to(pt.cast(shape, "float64"), full))
        outs.append(pt.broadcast_to(1.0 / pt.cast(scale, "float64"), full))
    outs.append(pt.cast(model.rvs_to_values[release], "int64") if release is not None else outs[0])
    outs = model.replace_rvs_by_values(outs)
    return model.compile_fn(
        outs,
        inputs=model.value_vars,
        on_unused_input="ignore",
        point_fn=True,
        **compile_kwargs,
    )


def default_n_scans(cells: int, k: int) -> int:
    """Scans per iteration when not given: ``ceil(60000 / (D V K))`` within ``[1, 10]``.

    One scan costs about ``D V K`` operations; small problems get several scans per
    ``pm.sample`` iteration (so a run of PyMC's default length is long enough), large ones
    one. A function of the model's size alone, so the same seed gives the same draws.

    Examples
    --------
    >>> default_n_scans(50 * 40, 3), default_n_scans(150 * 120, 3), default_n_scans(10**6, 5)
    (10, 2, 1)
    """
    return int(min(10, max(1, -(-60_000 // max(1, cells * k)))))


class PoissonFactorGibbs(ForgetsInitialPoint, BlockedStep):
    """Exact Gibbs scan for ``Poisson(theta @ phi)`` counts with Gamma factors.

    Parameters
    ----------
    vars : list of model variables
        Factors ``theta`` ``(D, K)`` and/or ``phi`` ``(K, V)`` of Poisson count matrices with
        rate ``theta @ phi``, and optionally the latent true counts ``f"{name}_true"`` of a
        ``Privatized(name, pm.Poisson.dist(theta @ phi), Geometric(...), marginalize=False)``
        node (rule 5 of :mod:`pymc_dp.step_methods.claims`; observed counts are allowed when
        the step is given explicitly). ``ValueError`` for anything else.
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    n_scans : int, optional
        Whole scans per call (per ``pm.sample`` iteration): each redraws the true counts (when
        claimed), the allocation, ``theta`` and ``phi``. Default :func:`default_n_scans` of
        the largest factorization.
    compile_kwargs : dict, optional
        Passed to the compilation of the counts and prior parameters.

    Notes
    -----
    One scan, per factorization: the true counts given the release and the current rates
    (exactly, :func:`pymc_dp.kernels.count_posterior.draw_true_counts`, as
    :class:`~pymc_dp.CountAugmentation` does); the allocation of every count to the
    components; ``theta`` given the allocation and ``phi``; ``phi`` given the allocation and
    the new ``theta`` (a variable not in ``vars`` is left as it is). Each draw is from a full
    conditional, so the scan is exact (:mod:`pymc_dp.kernels.poisson_factor`). Several scans
    per call are an exact chain thinned inside the step: the ESS per second stays about the
    same, the ESS per stored draw grows.

    Examples
    --------
    Non-private counts, the step given explicitly:

    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as model:
    ...     theta = pm.Gamma("theta", np.float64(1.0), np.float64(1.0), shape=(2, 2))
    ...     phi = pm.Gamma("phi", np.float64(1.0), np.float64(1.0), shape=(2, 3))
    ...     _ = pm.Poisson("y", theta @ phi, observed=np.array([[1, 0, 4], [2, 2, 0]]))
    ...     idata = pm.sample(draws=50, tune=10, chains=1, random_seed=3, progressbar=False,
    ...                       step=[PoissonFactorGibbs([theta, phi])],
    ...                       compute_convergence_checks=False)
    >>> idata.posterior["theta"].shape
    (1, 50, 2, 2)
    """

    name = "poisson_factor_gibbs"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {"pf_frac_changed": (np.float64, [])}

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        n_scans=None,
        compile_kwargs=None,
        **kw,
    ):
        kw.pop("initial_point", None)  # accepted for PyMC's instantiate_steppers; not needed
        if kw:
            raise TypeError(f"unexpected keyword arguments {sorted(kw)}")
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        ck = dict(compile_kwargs or {})
        wanted = {model.values_to_rvs[v] for v in self.vars}
        private = privatized_true_counts(model)
        blocks, seen = [], []
        for rv in [model.values_to_rvs[v] for v in self.vars]:
            fac = _factorization(model, rv)
            if fac not in seen:
                seen.append(fac)
                blocks.append(self._block(model, fac, wanted, private, ck))
        self._blocks = blocks
        if n_scans is None:
            n_scans = max(default_n_scans(b.cells, b.k) for b in blocks) if blocks else 1
        if isinstance(n_scans, bool) or not isinstance(n_scans, numbers.Integral) or n_scans < 1:
            raise ValueError(f"n_scans must be a positive integer, got {n_scans!r}")
        self.n_scans = int(n_scans)

    @staticmethod
    def _block(model, fac, wanted, private, ck):
        factors = {"theta": fac.theta, "phi": fac.phi}
        names = {label: model.rvs_to_values[f].name for label, f in factors.items()}
        logs = {label: model.rvs_to_transforms.get(f) is not None for label, f in factors.items()}
        counts = None
        if fac.counts in wanted:
            if fac.counts not in private:
                raise ValueError(
                    f"PoissonFactorGibbs can draw the counts {fac.counts.name!r} only when "
                    "they are the true counts of an observed Privatized(..., Geometric, "
                    "marginalize=False) node read by nothing else"
                )
            counts = model.rvs_to_values[fac.counts].name
        release = private.get(fac.counts)
        d, k = (int(s) for s in fac.theta.type.shape)
        return _Block(
            counts=counts,
            theta=names["theta"] if fac.theta in wanted else None,
            phi=names["phi"] if fac.phi in wanted else None,
            theta_name=names["theta"],
            phi_name=names["phi"],
            theta_log=logs["theta"],
            phi_log=logs["phi"],
            fn=_compile(model, fac, release if counts is not None else None, ck),
            alpha=None if counts is None else float(release.owner.op.mechanism.alpha),
            cells=d * int(fac.phi.type.shape[1]),
            k=k,
            what=f"Poisson({fac.theta.name} @ {fac.phi.name}) counts {fac.counts.name}",
        )

    @staticmethod
    def _log(value, is_log: bool) -> np.ndarray:
        value = np.asarray(value, dtype=np.float64)
        if is_log:
            return value
        with np.errstate(divide="ignore"):
            return np.log(value)

    def step(self, point):
        """``n_scans`` scans per factorization: true counts, allocation, ``theta``, ``phi``."""
        new_point = dict(point)
        changed = total = 0
        for b in self._blocks:
            y, a_t, r_t, a_p, r_p, z = b.fn(new_point)
            y0 = y
            lt = self._log(new_point[b.theta_name], b.theta_log)
            lp = self._log(new_point[b.phi_name], b.phi_log)
            for _ in range(self.n_scans):
                if b.counts is not None:
                    y = draw_true_counts(z, np.exp(lt) @ np.exp(lp), b.alpha, self.rng)
                elif y.size and y.min() < 0:
                    raise ValueError(f"{b.what}: the counts must be non-negative, got {y.min()}")
                lt, lp = factor_scan(
                    y,
                    lt,
                    lp,
                    a_t,
                    r_t,
                    a_p,
                    r_p,
                    self.rng,
                    theta=b.theta is not None,
                    phi=b.phi is not None,
                )
            if b.counts is not None:
                changed += int(np.count_nonzero(y != y0))
                total += y.size
                new_point[b.counts] = y.astype(np.asarray(point[b.counts]).dtype, copy=False)
            for name, value, is_log in ((b.theta, lt, b.theta_log), (b.phi, lp, b.phi_log)):
                if name is not None:
                    new_point[name] = value if is_log else np.exp(value)
        return new_point, [{"pf_frac_changed": float(changed / max(total, 1))}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a factor of rule 5 of :mod:`pymc_dp.step_methods.claims`, else
        INCOMPATIBLE."""
        model = model_of(var)
        if model is not None and var in poisson_factorizations(model):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE
