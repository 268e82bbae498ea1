r"""Exact Gibbs step for the latent number of records of a noisy-size release.

:meth:`pymc_dp.releases.NoisySizeRelease.model` keeps the number of records ``N`` as a latent
integer ``size`` observed through two releases: ``Ñ = N + η_N`` and ``S̃ = S + η_S`` with
``S | N, p ~ Binomial(N, p)``. Its full conditional is

.. math::

    P(N \mid \ldots) \propto \pi(N)\, \eta_N(\tilde N - N)\, L_S(N), \qquad
    L_S(N) = \sum_{s=0}^{N} \binom{N}{s} p^s (1 - p)^{N - s}\, \eta_S(\tilde S - s),

with ``π`` the prior of ``N`` (given its parameters). This step draws ``N`` from it exactly, by
inversion over a window ``[lo, hi]`` of ``N`` values around ``Ñ`` (``lo = max(0, ⌊Ñ⌋ - W)``,
``hi = max(⌈Ñ⌉, 0) + W``; :mod:`pymc_dp.kernels.window_draw`) whose neglected mass is
bounded and checked at every draw: ``π(N) <= 1`` and ``L_S(N) <= C = max_t η_S(t) = η_S(0)``
(the noise laws are symmetric and non-increasing in ``|t|``), so beyond ``hi``

.. math::

    \sum_{N > hi} \pi(N)\,\eta_N(\tilde N - N)\,L_S(N)
        \le C \sum_{t \ge d} \eta_N(t) \le C\,(\eta_N(d) + P(\eta_N \ge d)),
    \qquad d = hi + 1 - \tilde N > 0,

(the sum over the integers ``t >= d`` of a non-increasing density is at most its first term
plus its integral, i.e. the tail probability), and the same below ``lo`` when ``lo > 0``. When
the bound exceeds ``1e-12`` of the window's mass, ``W`` doubles (up to a window of ``2**22``
values, beyond which the step raises ``RuntimeError`` rather than draw from a truncated law).
So the draw's law differs from the conditional by at most ``1e-12`` in total variation.

``pm.sample`` picks this step by itself for the ``size`` variable of a model built by
:meth:`~pymc_dp.releases.NoisySizeRelease.model` (marked there; nothing else is claimed), in
place of PyMC's Metropolis step; the parameters keep their own steps (NUTS).

Sampler statistic: ``size_window``, the number of ``N`` values the draw enumerated.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator, get_value_vars_from_user_vars
from pytensor.graph.traversal import graph_inputs

from pymc_dp._pymc_hooks import ForgetsInitialPoint
from pymc_dp.distributions.marginals import get_marginal
from pymc_dp.kernels.window_draw import draw_in_window
from pymc_dp.step_methods.claims import _readers, model_of

__all__ = ["NoisySizeGibbs"]

#: tag attribute set by NoisySizeRelease.model on the size variable: (noisy size, statistic)
TAG = "pymc_dp_noisy_size"
_W0 = 32
_MAX_WINDOW = 2**22
#: noise laws symmetric and non-increasing in |t|, with tails (the window's bound needs both)
_FAMILIES = ("geometric", "discrete_gaussian", "laplace", "gaussian")


def _claimable(rv, model=None) -> bool:
    """Whether ``rv`` is a size marked by NoisySizeRelease.model with built-in noise laws, read
    by no random variable or Potential of its model but its two releases (a term added to the
    model after ``model()`` would be missing from the conditional this step draws from)."""
    releases = getattr(rv.tag, TAG, None)
    if releases is None or not all(
        getattr(obs.owner.op.mechanism, "family", None) in _FAMILIES for obs in releases
    ):
        return False
    model = model_of(rv) if model is None else model
    return model is not None and set(_readers(rv, model)) <= set(releases)


def _log_weights_graph(model, rv, ns):
    """Unnormalised log conditional of ``rv`` at the integer vector ``ns`` (value variables of
    the other free variables as inputs)."""
    size_obs, stat_obs = getattr(rv.tag, TAG)
    mech_n = size_obs.owner.op.mechanism
    mech_s = stat_obs.owner.op.mechanism
    n_tilde = pt.cast(model.rvs_to_values[size_obs], "float64")
    s_tilde = pt.cast(model.rvs_to_values[stat_obs], "float64")
    base = stat_obs.owner.inputs[0]
    _, p = base.owner.op.dist_params(base.owner)
    vec = pm.Binomial.dist(ns, p)
    stat = get_marginal(vec.owner.op, mech_s)(pt.broadcast_to(s_tilde, ns.shape), vec, mech_s)
    logw = pm.logp(rv, ns) + mech_n.logpdf_pt(n_tilde - ns) + stat
    return model.replace_rvs_by_values([logw])[0]


class NoisySizeGibbs(ForgetsInitialPoint, BlockedStep):
    """Exact Gibbs draw of the number of records ``N`` of a noisy-size release (see the module
    docstring for the conditional and its asserted window).

    Parameters
    ----------
    vars : list of one model variable
        The ``size`` variable of a model built by
        :meth:`pymc_dp.releases.NoisySizeRelease.model` (``ValueError`` for anything else).
    model : pm.Model, optional
    rng : seed or Generator, optional
        Replaced per chain by ``pm.sample``.
    compile_kwargs : dict, optional
        Passed to the compilation of the conditional.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.releases import NoisySizeRelease
    >>> rel = NoisySizeRelease(5, 2, pmdp.Geometric(epsilon=40.0), pmdp.Geometric(epsilon=1.0))
    >>> model = rel.model()
    >>> step = NoisySizeGibbs([model["size"]], model=model, rng=1)
    >>> point, [stats] = step.step(model.initial_point())
    >>> int(point["size"]), sorted(stats)
    (5, ['size_window'])
    """

    name = "noisy_size_gibbs"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {"size_window": (np.int64, [])}

    def __init__(
        self, vars, *, model=None, blocked=True, rng=None, initial_point=None, compile_kwargs=None
    ):
        model = modelcontext(model)
        self.vars = get_value_vars_from_user_vars(vars, model)
        rvs = [model.values_to_rvs[v] for v in self.vars]
        if len(rvs) != 1 or not _claimable(rvs[0], model):
            raise ValueError(
                "NoisySizeGibbs samples exactly one variable, the 'size' of a model built by "
                "pymc_dp.releases.NoisySizeRelease.model() with Geometric, DiscreteGaussian, "
                "Laplace or Gaussian noise and read by nothing but its two releases (a term "
                "added to the model that reads it needs PyMC's Metropolis step), got "
                f"{[v.name for v in rvs]}"
            )
        self.blocked = True
        self.rng = get_random_generator(rng)
        ns = pt.lvector("ns")
        logw = _log_weights_graph(model, rvs[0], ns)
        used = set(graph_inputs([logw]))
        self._inputs = [v for v in model.value_vars if v in used and v is not self.vars[0]]
        self._fn = compile_pymc(
            [*self._inputs, ns], logw, on_unused_input="ignore", **(compile_kwargs or {})
        )
        size_obs, stat_obs = getattr(rvs[0].tag, TAG)
        # the released noisy size: the constant NoisySizeRelease.model observes (the window's
        # centre, read once here rather than evaluated at every step)
        self._n_tilde = float(model.rvs_to_values[size_obs].data)
        self._mech_n = size_obs.owner.op.mechanism
        self._log_c = float(stat_obs.owner.op.mechanism.logpdf(0.0))
        self._w = _W0
        self._bounds: dict[tuple[int, int], float] = {}  # (lo, hi) -> _tail_bound(lo, hi)

    def _tail_bound(self, lo: int, hi: int) -> float:
        """Log of the bound on the neglected mass outside ``[lo, hi]`` (module docstring).

        A function of the window alone (the centre is fixed), so computed once per window:
        the half-width only grows, so there are at most ``log2(_MAX_WINDOW)`` of them.
        """
        bound = self._bounds.get((lo, hi))
        if bound is None:
            mech, n_tilde = self._mech_n, self._n_tilde
            d_hi = hi + 1 - n_tilde
            parts = [np.logaddexp(mech.logpdf(d_hi), mech.logsf(d_hi))]
            if lo > 0:
                d_lo = n_tilde - lo + 1
                parts.append(np.logaddexp(mech.logpdf(d_lo), mech.logsf(d_lo)))
            bound = self._log_c + float(np.logaddexp.reduce(np.asarray(parts, np.float64)))
            self._bounds[lo, hi] = bound
        return bound

    def step(self, point):
        """One exact draw of ``N`` from its full conditional."""
        args = [point[v.name] for v in self._inputs]
        out = draw_in_window(
            lambda ns: self._fn(*args, ns),
            self._n_tilde,
            self._tail_bound,
            self.rng,
            half_width=self._w,
            max_window=_MAX_WINDOW,
        )
        self._w = out.half_width
        new_point = dict(point)
        old = point[self.vars[0].name]
        new_point[self.vars[0].name] = np.asarray(out.value, dtype=old.dtype)
        return new_point, [{"size_window": np.int64(out.window)}]

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for the size variable marked by ``NoisySizeRelease.model`` (built-in noise
        laws), else INCOMPATIBLE."""
        return Competence.IDEAL if _claimable(var) else Competence.INCOMPATIBLE
