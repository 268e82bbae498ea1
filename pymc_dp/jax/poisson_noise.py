r"""JAX form of the Poisson marginal under two-sided exponential noise, with ``d/dmu``.

The twin of the general kernel of :mod:`pymc_dp.distributions.marginal_poisson` (read the
derivation there): ``p(z) = c e^{-mu} (e^{-az} S_1 + e^{az} S_2)``, each sum evaluated in its
boundary form (a geometric-type series from the boundary term) or its bulk form (one minus the
complementary tail), the same choices, series and stopping rule (a term below ``1e-17`` of the
sum) as the numba kernel. The two series of all records run in one ``lax.while_loop`` until
every one has stopped. The derivative in ``mu`` is the kernel's analytic form, or
``expm1(log p(z - 1) - log p(z))`` where that is the more accurate one (the same rule as
``marginal_poisson._use_neighbour``).

The numba Op also has a short-sum path (``math/poisson_noise.py``) inside a small domain,
an optimisation giving the same numbers to rounding; here the general kernel serves every
point.

Examples
--------
>>> import jax
>>> jax.config.update("jax_enable_x64", True)
>>> import math, numpy as np
>>> from pymc_dp.distributions.marginal_poisson import poisson_two_sided_exp_logp_numpy
>>> z, mu = np.array([-3.0, 0.0, 4.0, 250.0]), np.array([3.0, 1e-6, 4.0, 200.0])
>>> a, logc = 1.0, math.log(math.tanh(0.5))
>>> lp, d = logp_dmu(z, mu, a, logc)
>>> ref_lp, ref_d = poisson_two_sided_exp_logp_numpy(z, mu, a, logc)
>>> bool(np.allclose(lp, ref_lp, rtol=1e-13) and np.allclose(d, ref_d, rtol=1e-12))
True
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from pymc_dp.jax.special import log_poisson

__all__ = ["logp_dmu"]

_TOL = 1e-17


def _log_sums(rev, big_n, lam, active):
    """``log`` of the kernel's series, all records at once.

    ``rev``: ``sum_{j=0}^{N} prod_{i<j} (N - i) / lam`` (``_log_rev_sum``); otherwise
    ``sum_{k>=0} lam^k N! / (N + k)!`` (``_log_fwd_sum``). Inactive entries give 0.
    """
    active = active & ~(rev & (big_n <= 0.0))

    def cond(state):
        return jnp.any(state[3])

    def body(state):
        j, t, s, on = state
        factor = jnp.where(rev, (big_n - j) / lam, lam / (big_n + j + 1.0))
        t_new = t * factor
        s_new = s + t_new
        t = jnp.where(on, t_new, t)
        s = jnp.where(on, s_new, s)
        j = j + 1.0
        on = on & ~(t < s * _TOL) & ~(rev & (j >= big_n))
        return j, t, s, on

    one = jnp.ones_like(lam)
    init = (jnp.zeros_like(lam), one, one, active)
    _, _, s, _ = lax.while_loop(cond, body, init)
    return jnp.log(s)


def _logaddexp(x, y):
    hi = jnp.maximum(x, y)
    lo = jnp.minimum(x, y)
    safe = jnp.where(jnp.isfinite(hi), hi, 0.0)
    return jnp.where(lo == -jnp.inf, hi, safe + jnp.log1p(jnp.exp(lo - safe)))


def _log_pois_all(n, m, mu, lam1, lam2):
    """The six Poisson log-pmfs of the kernel, in one call (one copy of the compiled code)."""
    ys = jnp.concatenate([n + 1.0, n, n, m - 1.0, m, m - 1.0])
    lams = jnp.concatenate([lam1, mu, lam1, lam2, mu, mu])
    return jnp.split(log_poisson(ys, lams), 6)


def _branches(z, mu, a):
    """``(l1, r1, l2, r2, m, log Pois(m - 1; mu))`` of the numba kernel."""
    n = jnp.floor(z)
    lam1 = mu * math.exp(a)
    lam2 = mu * math.exp(-a)
    m = jnp.maximum(n + 1.0, 0.0)
    b1_rev = lam1 >= n + 1.0
    b2_rev = lam2 >= m + 1.0
    # one loop for both series: branch 1 then branch 2
    rev = jnp.concatenate([b1_rev, b2_rev])
    big_n = jnp.concatenate([jnp.where(b1_rev, n, n + 1.0), jnp.where(b2_rev, m - 1.0, m)])
    lam = jnp.concatenate([lam1, lam2])
    on = jnp.concatenate([n >= 0.0, m > 0.0])
    s1, s2 = jnp.split(_log_sums(rev, jnp.where(on, big_n, 1.0), lam, on), 2)
    p_n1_l1, p_n_mu, p_n_l1, p_m1_l2, p_m_mu, p_m1_mu = _log_pois_all(n, m, mu, lam1, lam2)
    em1a, em1ma = math.expm1(a), math.expm1(-a)
    p_tail = jnp.exp(p_n1_l1 + s1)
    l1 = jnp.where(b1_rev, p_n_mu - a * (z - n) + s1, mu * em1a - a * z + jnp.log1p(-p_tail))
    r1 = jnp.where(b1_rev, -s1, p_n_l1 - jnp.log1p(-p_tail))
    l1 = jnp.where(n < 0.0, -jnp.inf, l1)
    r1 = jnp.where(n < 0.0, -jnp.inf, r1)
    q_tail = jnp.exp(p_m1_l2 + s2)
    m_safe = jnp.where(m > 0.0, m, 1.0)
    lam2_safe = jnp.where(lam2 > 0.0, lam2, 1.0)
    r2_fwd = jnp.where(lam2 > 0.0, jnp.log(m_safe) - jnp.log(lam2_safe) - s2, jnp.inf)
    l2 = jnp.where(b2_rev, mu * em1ma + a * z + jnp.log1p(-q_tail), p_m_mu - a * (m - z) + s2)
    r2 = jnp.where(b2_rev, p_m1_l2 - jnp.log1p(-q_tail), r2_fwd)
    l2 = jnp.where(m == 0.0, mu * em1ma + a * z, l2)
    r2 = jnp.where(m == 0.0, -jnp.inf, r2)
    return l1, r1, l2, r2, m, p_m1_mu


def _general(z, mu, a, logc):
    """``(log p(z), d log p / d mu)`` by the general kernel (numba ``_conv_logp_dmu``)."""
    valid = (mu >= 0.0) & jnp.isfinite(z) & jnp.isfinite(mu)
    z = jnp.where(valid, z, 0.0)
    mu = jnp.where(valid, mu, 1.0)
    l1, r1, l2, r2, m, p_m1_mu = _branches(z, mu, a)
    lse = _logaddexp(l1, l2)
    d1 = jnp.exp(l1 - lse) * (math.expm1(a) - jnp.exp(a + r1))
    d = jnp.where(l1 > -jnp.inf, d1, 0.0)
    d = d + jnp.where(l2 > -jnp.inf, jnp.exp(l2 - lse) * math.expm1(-a), 0.0)
    direct = jnp.exp(-a + p_m1_mu + a * (z - (m - 1.0)) - lse)
    boundary = jnp.where((l2 > -jnp.inf) & (r2 < jnp.inf), jnp.exp(l2 - lse - a + r2), direct)
    d = d + jnp.where(m > 0.0, boundary, 0.0)
    return jnp.where(valid, logc + lse, jnp.nan), jnp.where(valid, d, jnp.nan)


def logp_dmu(z, mu, a: float, logc: float):
    """``(log p(z), d log p(z) / d mu)`` for 1-d ``z``, ``mu`` of equal length.

    ``a`` and ``logc`` are Python floats (the noise law ``exp(logc - a |t|)``); under
    ``jax.jit`` pass them as static arguments.

    Examples
    --------
    >>> import jax, math
    >>> f = jax.jit(logp_dmu, static_argnums=(2, 3))
    >>> lp, d = f(jax.numpy.array([0.0, 5.0]), jax.numpy.array([1.0, 1.0]), 1.0, -0.8)
    >>> [round(float(v), 4) for v in lp]
    [-1.4321, -4.1361]
    """
    z = jnp.asarray(z, dtype=jnp.float64)
    mu = jnp.asarray(mu, dtype=jnp.float64)
    n = z.shape[0]
    lp2, d2 = _general(jnp.concatenate([z, z - 1.0]), jnp.concatenate([mu, mu]), a, logc)
    lp, d, lp_prev = lp2[:n], d2[:n], lp2[n:]
    neighbour = (jnp.abs(z) < 2.0**52) & (math.exp(a) > jnp.maximum(jnp.abs(lp), 1.0))
    d = jnp.where(neighbour, jnp.expm1(lp_prev - lp), d)
    # z = +-inf with a valid mean: every term e^{-a |z - y|} is 0 (log p = -inf, d = 0), as
    # the numba marginal gives
    far = jnp.isinf(z) & (mu >= 0.0) & jnp.isfinite(mu)
    return jnp.where(far, -jnp.inf, lp), jnp.where(far, 0.0, d)
