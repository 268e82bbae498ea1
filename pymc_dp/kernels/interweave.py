"""Adaptive random-walk Metropolis for the interweaving move (pure numpy, no PyMC).

:class:`AdaptiveRWM` holds the proposal of the non-centred parameter update of
:class:`pymc_dp.step_methods.interweave.Interweave`: a Gaussian random walk
``theta' = theta + s L z`` in the unconstrained value space of the parameters, ``z`` standard
normal. While tuning, ``L`` follows the empirical covariance of the visited states (Haario,
Saksman & Tamminen 2001, with the ``2.38 / sqrt(d)`` factor of Roberts, Gelman & Gilks 1997),
re-estimated in doubling windows so that early transients are forgotten, and ``log s`` follows
a Robbins-Monro recursion towards the target acceptance probability. After tuning nothing
changes: the kernel is then a fixed Metropolis-Hastings kernel, so the chain is exact.

Examples
--------
>>> import numpy as np
>>> from pymc_dp.kernels.interweave import AdaptiveRWM
>>> rng = np.random.default_rng(0)
>>> kern = AdaptiveRWM(2)
>>> theta, lp = np.zeros(2), 0.0
>>> for _ in range(2000):  # a N(0, diag(1, 100)) target, adapting throughout
...     prop = kern.propose(theta, rng)
...     lp_prop = -0.5 * (prop[0] ** 2 + prop[1] ** 2 / 100.0)
...     acc = min(1.0, float(np.exp(lp_prop - lp)))
...     if rng.uniform() < acc:
...         theta, lp = prop, lp_prop
...     kern.adapt(theta, acc)
>>> bool(5.0 < kern.chol[1, 1] / kern.chol[0, 0] < 20.0)  # learnt the scales' ratio (10)
True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AdaptiveRWM", "hmc_transition"]


class AdaptiveRWM:
    """Gaussian random-walk proposal whose covariance and scale adapt while tuning.

    Parameters
    ----------
    dim : int
        Dimension of the (flattened, unconstrained) parameter vector.
    init_sd : float, default 0.1
        Proposal standard deviation of every coordinate before the first covariance estimate.
    target_accept : float, optional
        Target acceptance probability of the scale recursion; 0.44 for ``dim == 1``, 0.234
        otherwise (Roberts & Rosenthal 2001).
    first_window : int, default 50
        Length of the first covariance window (in calls of :meth:`adapt`); the windows double.

    Attributes
    ----------
    chol : ndarray
        The current proposal factor ``s L`` (lower triangular, ``dim x dim``).
    """

    def __init__(
        self,
        dim: int,
        *,
        init_sd: float = 0.1,
        target_accept: float | None = None,
        first_window: int = 50,
    ):
        self.dim = int(dim)
        if self.dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.init_sd = float(init_sd)
        self.target_accept = (
            (0.44 if self.dim == 1 else 0.234) if target_accept is None else float(target_accept)
        )
        self.first_window = int(first_window)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget everything learnt (called at the start of every chain)."""
        d = self.dim
        self.log_scale = 0.0
        self.factor = np.eye(d) * self.init_sd  # L (without s)
        self.n_adapt = 0
        self.window_len = self.first_window
        self.window_end = self.first_window
        self.learnt = False
        self._count = 0
        self._mean = np.zeros(d)
        self._m2 = np.zeros((d, d))

    def get_state(self) -> dict:
        """Copies of the adaptation state (for ``sampling_state``)."""
        return {
            "log_scale": float(self.log_scale),
            "factor": self.factor.copy(),
            "n_adapt": int(self.n_adapt),
            "window_len": int(self.window_len),
            "window_end": int(self.window_end),
            "learnt": bool(self.learnt),
            "count": int(self._count),
            "mean": self._mean.copy(),
            "m2": self._m2.copy(),
        }

    def set_state(self, state: dict) -> None:
        """Restore a state from :meth:`get_state`."""
        self.log_scale = float(state["log_scale"])
        self.factor = np.array(state["factor"], dtype=np.float64)
        self.n_adapt = int(state["n_adapt"])
        self.window_len = int(state["window_len"])
        self.window_end = int(state["window_end"])
        self.learnt = bool(state["learnt"])
        self._count = int(state["count"])
        self._mean = np.array(state["mean"], dtype=np.float64)
        self._m2 = np.array(state["m2"], dtype=np.float64)

    @property
    def chol(self) -> np.ndarray:
        return math.exp(self.log_scale) * self.factor

    # ------------------------------------------------------------------ kernel
    def propose(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A proposal around ``theta`` (symmetric: the Hastings ratio is 1)."""
        return theta + self.chol @ rng.standard_normal(self.dim)

    def adapt(self, theta: np.ndarray, accept_prob: float) -> None:
        """One tuning update from the state after a Metropolis-Hastings step and that step's
        acceptance probability ``min(1, r)``."""
        self.n_adapt += 1
        gain = self.n_adapt**-0.6
        a = accept_prob if math.isfinite(accept_prob) else 0.0
        self.log_scale = min(max(self.log_scale + gain * (a - self.target_accept), -30.0), 30.0)
        # Welford update of the window's mean and scatter
        self._count += 1
        delta = theta - self._mean
        self._mean = self._mean + delta / self._count
        self._m2 = self._m2 + np.outer(delta, theta - self._mean)
        if self.n_adapt >= self.window_end:
            self._end_window()

    def _end_window(self) -> None:
        n, d = self._count, self.dim
        cov = self._m2 / max(n - 1, 1)
        # a window where the chain never moved says nothing about the shape: keep the factor
        if n > d + 1 and np.all(np.diag(cov) > 1e-300):
            # shrink towards the diagonal a little (few states in the first windows)
            w = n / (n + 10.0)
            cov = w * cov + (1.0 - w) * np.diag(np.diag(cov))
            cov = cov + np.eye(d) * (1e-10 + 1e-8 * float(np.mean(np.diag(cov))))
            try:
                factor = np.linalg.cholesky(cov) * (2.38 / math.sqrt(d))
            except np.linalg.LinAlgError:
                factor = None
            if factor is not None and np.all(np.isfinite(factor)):
                self.factor = factor
                if not self.learnt:  # the scale learnt for the initial guess means nothing now
                    self.log_scale = 0.0
                self.learnt = True
        self._count = 0
        self._mean = np.zeros(d)
        self._m2 = np.zeros((d, d))
        self.window_len *= 2
        self.window_end = self.n_adapt + self.window_len


def hmc_transition(theta, lp, grad, extra, fn, factor, step_size, n_leapfrog, rng):
    """One Hamiltonian Monte Carlo transition with a fixed linear preconditioner.

    Leapfrog integration of ``n_leapfrog`` steps of size ``step_size`` in the coordinates
    ``u`` with ``theta = theta0 + factor u`` (identity mass in ``u``), then a Metropolis
    accept/reject (Duane et al. 1987; Neal 2011). ``fn(theta) -> (lp, grad, extra)`` gives the
    log target, its gradient in ``theta`` and anything the caller wants back for the accepted
    state. Non-finite energies are rejected.

    Returns
    -------
    (theta, lp, grad, extra, accept_prob, accepted)

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda th: (-0.5 * float(th @ th), -th, None)
    >>> rng = np.random.default_rng(1)
    >>> from pymc_dp.kernels.interweave import hmc_transition
    >>> th, lp, g, _ = np.ones(2), -1.0, -np.ones(2), None
    >>> draws = []
    >>> for _ in range(4000):
    ...     th, lp, g, _, a, acc = hmc_transition(th, lp, g, None, fn, np.eye(2), 0.4, 5, rng)
    ...     draws.append(th)
    >>> bool(abs(np.var(np.array(draws)[:, 0]) - 1.0) < 0.15)
    True
    """
    p0 = rng.standard_normal(theta.shape[0])
    ft = factor.T
    p = p0 + 0.5 * step_size * (ft @ grad)
    th = theta
    lp1, g1, ex1 = lp, grad, extra
    ok = True
    for i in range(n_leapfrog):
        th = th + step_size * (factor @ p)
        lp1, g1, ex1 = fn(th)
        if not (math.isfinite(lp1) and np.all(np.isfinite(g1))):
            ok = False
            break
        if i < n_leapfrog - 1:
            p = p + step_size * (ft @ g1)
    if not ok:
        return theta, lp, grad, extra, 0.0, False
    p = p + 0.5 * step_size * (ft @ g1)
    log_r = (lp1 - 0.5 * float(p @ p)) - (lp - 0.5 * float(p0 @ p0))
    a = 1.0 if log_r >= 0.0 else (math.exp(log_r) if math.isfinite(log_r) else 0.0)
    if rng.uniform() < a:
        return th, lp1, g1, ex1, a, True
    return theta, lp, grad, extra, a, False
