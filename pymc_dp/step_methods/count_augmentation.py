r"""Gibbs step for the latent true counts of ``Privatized(Poisson, Geometric, marginalize=False)``.

``Privatized(name, pm.Poisson.dist(mu), pmdp.Geometric(...), marginalize=False, observed=z)``
keeps the true counts as the free variable ``f"{name}_true"``. This step draws them by the
Skellam-Bessel augmentation of Schein et al. (2019, eqs. 13-16 with the corrections in
``docs/theory.md``, "Errata of the papers";
the kernel and its derivation are :mod:`pymc_dp.kernels.count_augmentation`): each sweep draws
every true count exactly given the auxiliary rates :math:`\lambda^\pm` and the current rate
``mu``, then redraws :math:`\lambda^\pm`, which the step keeps between sweeps (its sampling
state). The rate ``mu`` is any expression of the model's variables (``lam``,
``(theta @ phi)``, ...): it is compiled from the graph as a function of the value variables,
together with the released ``z`` (so ``pm.set_data`` releases are read at each sweep).

``pm.sample`` picks this step by itself for exactly the variables of rule 4 of
:mod:`pymc_dp.step_methods.claims` (:func:`~pymc_dp.step_methods.claims.privatized_true_counts`):
the Poisson true counts of an observed Privatized node with a Geometric mechanism that no other
random variable or Potential reads. The other variables (the rate's parameters) get their own
steps (NUTS, ...), which see only the true counts: given them, the auxiliaries are independent
of the rate, so the compound chain is exact.

``pm.sample`` chooses it by itself, with the model in context or passed as ``model=``
(``Privatized(..., marginalize=False)`` announces its model); it can also be given explicitly
(``pm.sample(step=[CountAugmentation([y])])``).

``method="direct"`` (the default) draws every true count exactly from
:math:`P(y \mid z, \mu)` itself (:func:`pymc_dp.kernels.count_posterior.draw_true_counts`:
the conditional is log-concave, so it is drawn without auxiliary rates), so the counts carry no
memory between sweeps and the rate's step sees fresh counts each sweep. ``method="augmentation"``
is Schein's chain above. Both cost about the same per sweep; the direct draw mixes better (lag-1
autocorrelation of a count 0.004 against 0.48 at epsilon 1, ESS/s of a Gamma-Poisson rate 1.2x
at epsilon 1 and 2.3x at epsilon 0.25; ``benchmarks/results/count_posterior_direct.md``), which
is why it is the default.

Sampler statistic: ``ca_frac_changed``, the fraction of true counts whose value changed.

Examples
--------
>>> import numpy as np
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> with pm.Model() as model:
...     lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.5))
...     _ = pmdp.Privatized("z", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=1.0),
...                         marginalize=False, observed=np.array([3, -1, 7]))
...     step = CountAugmentation([model["z_true"]], rng=1)
>>> point, [stats] = step.step(model.initial_point())
>>> point["z_true"].shape, sorted(stats)
((3,), ['ca_frac_changed'])
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.kernels.count_augmentation import AuxRates, count_augmentation_sweep, init_aux_rates
from pymc_dp.kernels.count_posterior import draw_true_counts
from pymc_dp.step_methods.claims import (
    model_of,
    poisson_factorizations,
    privatized_true_counts,
)

__all__ = ["METHODS", "CountAugmentation", "CountAugmentationState"]

#: the ways :class:`CountAugmentation` can draw the true counts
METHODS = ("augmentation", "direct")


@dataclass_state
class CountAugmentationState(StepMethodState):
    """Sampling state of :class:`CountAugmentation`: the step's generator (``rng``) and the
    auxiliary rates :math:`\\lambda^+`, :math:`\\lambda^-` of every claimed variable (lists
    of arrays in variable order; empty lists for ``method="direct"``)."""

    lam_plus: list
    lam_minus: list


class _Target(NamedTuple):
    """One claimed variable: its value name, the compiled ``point -> (mu, z)`` and alpha."""

    name: str
    fn: object
    alpha: float


def _target(model, value_var, compile_kwargs) -> _Target:
    """Compile the rate (broadcast to the counts) and the release of one true-count variable."""
    rv = model.values_to_rvs[value_var]
    claimed = privatized_true_counts(model)
    if rv not in claimed:
        raise ValueError(
            f"CountAugmentation cannot sample {rv.name!r}: it is not the Poisson true count of "
            "an observed Privatized(..., Geometric, marginalize=False) node read by nothing "
            "else (pymc_dp.step_methods.claims.privatized_true_counts)"
        )
    obs = claimed[rv]
    (rate,) = rv.owner.op.dist_params(rv.owner)
    mu = pt.broadcast_to(pt.cast(rate, "float64"), rv.shape)
    outs = model.replace_rvs_by_values([mu, model.rvs_to_values[obs]])
    fn = model.compile_fn(
        outs,
        inputs=model.value_vars,
        on_unused_input="ignore",
        point_fn=True,
        **compile_kwargs,
    )
    return _Target(value_var.name, fn, float(obs.owner.op.mechanism.alpha))


class CountAugmentation(ForgetsInitialPoint, BlockedStep):
    """Gibbs step for Privatized Poisson true counts: a direct exact draw of each count (the
    default) or Schein et al.'s (2019) Skellam-Bessel augmentation.

    Parameters
    ----------
    vars : list of model variables
        True-count variables ``f"{name}_true"`` of ``Privatized(..., pm.Poisson.dist(mu),
        Geometric(...), marginalize=False)`` nodes (``ValueError`` for anything else).
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample`` (``setup_chain``).
    initial_point : dict, optional
        Point giving the shapes of the counts (default: the model's initial point).
    compile_kwargs : dict, optional
        Passed to the compilation of the rates.
    method : {"direct", "augmentation"}, default "direct"
        ``"augmentation"``: Schein et al.'s eqs. 13-16 with auxiliary rates kept between
        sweeps; ``"direct"``: each count drawn exactly from :math:`P(y \\mid z, \\mu)`, no
        auxiliary state (:mod:`pymc_dp.kernels.count_posterior`).

    Notes
    -----
    With ``"augmentation"`` the auxiliary rates start from their prior (eq. 9) at construction
    and at each chain's start; the tuning phase serves as their burn-in. See the module
    docstring.

    Examples
    --------
    With ``epsilon = 30`` the geometric noise is zero except with probability about ``2e-13``,
    so one sweep recovers the released counts as the true counts. ``pm.sample`` assigns this
    step to ``z_true`` by itself; here it is built and called once.

    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.step_methods import CountAugmentation
    >>> with pm.Model() as model:
    ...     lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.5))
    ...     _ = pmdp.Privatized("z", pm.Poisson.dist(lam), pmdp.Geometric(epsilon=30.0),
    ...                         marginalize=False, observed=np.array([3, 0, 7]))
    ...     step = CountAugmentation([model["z_true"]], rng=1)
    >>> point, _ = step.step(model.initial_point())
    >>> point["z_true"].tolist()
    [3, 0, 7]
    """

    name = "count_augmentation"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {"ca_frac_changed": (np.float64, [])}
    _state_class = CountAugmentationState

    def __init__(
        self,
        vars,
        *,
        model=None,
        blocked=True,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        method="direct",
    ):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.method = method
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        self.blocked = True
        self.rng = get_random_generator(rng)
        ck = dict(compile_kwargs or {})
        self._targets = [_target(model, v, ck) for v in self.vars]
        self._init_aux(model.initial_point() if initial_point is None else initial_point)

    def _init_aux(self, point):
        self.lam_plus, self.lam_minus = [], []
        if self.method == "direct":
            return
        for t in self._targets:
            aux = init_aux_rates(t.alpha, np.shape(point[t.name]), self.rng)
            self.lam_plus.append(aux.lam_plus)
            self.lam_minus.append(aux.lam_minus)

    def setup_chain(self, rng, tune, draws):
        """Set the chain's generator and redraw the auxiliary rates from their prior."""
        super().setup_chain(rng, tune, draws)
        for k in range(len(self.lam_plus)):  # none for method="direct"
            aux = init_aux_rates(self._targets[k].alpha, np.shape(self.lam_plus[k]), self.rng)
            self.lam_plus[k], self.lam_minus[k] = aux.lam_plus, aux.lam_minus

    def _augmentation_sweep(self, k, mu, z):
        """Eqs. 13-16 for the ``k``-th variable, its auxiliary rates updated in place."""
        alpha = self._targets[k].alpha
        if np.shape(self.lam_plus[k]) != np.shape(z):  # a pm.set_data release changed shape
            aux = init_aux_rates(alpha, np.shape(z), self.rng)
        else:
            aux = AuxRates(self.lam_plus[k], self.lam_minus[k])
        y = count_augmentation_sweep(z, mu, alpha, aux, self.rng)
        self.lam_plus[k], self.lam_minus[k] = aux.lam_plus, aux.lam_minus
        return y

    def step(self, point):
        """One sweep over every count of every claimed variable."""
        new_point = dict(point)
        changed = total = 0
        for k, t in enumerate(self._targets):
            mu, z = t.fn(point)
            if self.method == "direct":
                y = draw_true_counts(z, mu, t.alpha, self.rng)
            else:
                y = self._augmentation_sweep(k, mu, z)
            old = point[t.name]
            changed += int(np.count_nonzero(y != old))
            total += y.size
            new_point[t.name] = y.astype(old.dtype, copy=False)
        return new_point, [{"ca_frac_changed": float(changed / max(total, 1))}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a true count of rule 4 of :mod:`pymc_dp.step_methods.claims` (COMPATIBLE
        when rule 5 gives it to PoissonFactorGibbs with the factors of its rate), else
        INCOMPATIBLE (the model is the one in context, or one that announced a Release or a
        non-marginalized Privatized node)."""
        model = model_of(var)
        if model is None or var not in privatized_true_counts(model):
            return Competence.INCOMPATIBLE
        if var in poisson_factorizations(model):  # rule 5: PoissonFactorGibbs scans it whole
            return Competence.COMPATIBLE
        return Competence.IDEAL
