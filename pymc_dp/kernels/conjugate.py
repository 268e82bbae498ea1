r"""Closed-form conjugate posterior updates and exact draws from them (pure numpy).

These are the "sample theta from the non-private posterior ``pi(theta | X)``" half of the data
augmentation sampler of Ju, Awan, Gong & Rao (2022, slide "A traditional Gibbs sampler", step 1):
given the current latent records ``X`` the parameter's full conditional does not involve the DP
release, so where the prior is conjugate it is drawn exactly. The step method
:class:`pymc_dp.step_methods.conjugate.ConjugateGibbs` reduces a PyMC model to the summed
sufficient statistics below and calls these functions.

Derivations (all elementwise over the parameter's entries)
----------------------------------------------------------
Beta--Bernoulli / Binomial. Prior ``p ~ Beta(a, b)``, children ``x_i ~ Binomial(n_i, p)``
(Bernoulli: ``n_i = 1``). The likelihood is ``prod_i p^{x_i} (1-p)^{n_i - x_i}``, so with
``s = sum x_i`` and ``t = sum n_i`` the posterior kernel is ``p^{a+s-1} (1-p)^{b+t-s-1}``:

.. math:: p \mid x \sim \mathrm{Beta}(a + s,\; b + t - s).

Gamma--Poisson (rate parameterization, PyMC's ``Gamma(alpha, beta)`` with density
``beta^alpha lam^{alpha-1} e^{-beta lam} / Gamma(alpha)``). Children ``x_i ~ Poisson(lam)``:
the likelihood is ``prod_i lam^{x_i} e^{-lam}``, so with ``s = sum x_i`` and ``m`` children

.. math:: \lambda \mid x \sim \mathrm{Gamma}(\alpha + s,\; \beta + m) \quad\text{(rate)}.

Dirichlet--Categorical. Prior ``theta ~ Dirichlet(alpha)``, children ``x_i ~ Categorical(theta)``:
the likelihood is ``prod_j theta_j^{c_j}`` with counts ``c_j = #{i: x_i = j}``, so

.. math:: \theta \mid x \sim \mathrm{Dirichlet}(\alpha + c).

Normal--Normal, known variances. Prior ``mu ~ Normal(m0, s0)``, children
``x_i ~ Normal(mu, sigma_i)``: completing the square in ``mu`` of
``-(mu-m0)^2/(2 s0^2) - sum_i (x_i-mu)^2/(2 sigma_i^2)`` gives precision
``tau = 1/s0^2 + sum_i 1/sigma_i^2`` and

.. math:: \mu \mid x \sim \mathrm{Normal}\big((m_0/s_0^2 + \textstyle\sum_i x_i/\sigma_i^2)/\tau,\;
    \tau^{-1/2}\big).

Normal linear regression, known variances (Bayesian linear model). Prior
``beta ~ Normal(mu0, Sigma0)`` (``p``-vector; independent Normal priors give a diagonal
``Sigma0``), children ``y_i ~ Normal(a_i + x_i' beta, sigma_i)`` with known offsets ``a_i``,
design rows ``x_i`` and standard deviations ``sigma_i``. With weights ``w_i = 1 / sigma_i^2``,
``W = diag(w)`` and residuals ``r = y - a``, the log posterior in ``beta`` is, up to a constant,
``-(beta - mu0)' Sigma0^{-1} (beta - mu0) / 2 - (r - X beta)' W (r - X beta) / 2``, a quadratic
with precision ``P`` and linear coefficient ``h``:

.. math:: \beta \mid y \sim \mathrm{Normal}(P^{-1} h,\; P^{-1}),\quad
    P = \Sigma_0^{-1} + X^\top W X,\quad h = \Sigma_0^{-1}\mu_0 + X^\top W r.

With the Cholesky factor ``P = L L'`` an exact draw is ``P^{-1} h + L^{-T} e``, ``e ~ N(0, I)``:
``Cov(L^{-T} e) = L^{-T} L^{-1} = (L L')^{-1} = P^{-1}`` (:func:`draw_mvnormal_precision`).

Gamma--Exponential. Prior ``lam ~ Gamma(alpha, beta)`` (rate), children ``x_i ~ Exponential(lam)``
(rate ``lam``, PyMC's ``pm.Exponential(lam=...)``, carried by PyTensor as ``scale = 1 / lam``): the
likelihood is ``prod_i lam e^{-lam x_i} = lam^m e^{-lam s}`` with ``s = sum x_i`` and ``m``
children,

.. math:: \lambda \mid x \sim \mathrm{Gamma}(\alpha + m,\; \beta + s) \quad\text{(rate)}.

Poisson and Exponential children of one Gamma parameter add their increments of the shape
(``sum x_i`` resp. ``m``) and of the rate (``m`` resp. ``sum x_i``).

InverseGamma--Normal variance, known means. Prior ``v ~ InverseGamma(a, b)`` (density
``b^a v^{-a-1} e^{-b/v} / Gamma(a)``), children ``x_i ~ Normal(m_i, sqrt(c_i v))`` with known
means ``m_i`` and known factors ``c_i > 0``: the likelihood is
``prod_i (c_i v)^{-1/2} exp(-(x_i - m_i)^2 / (2 c_i v))``, so with ``q = sum (x_i - m_i)^2 / c_i``

.. math:: v \mid x \sim \mathrm{InverseGamma}(a + n/2,\; b + q/2).

Normal--InverseGamma, mean and variance unknown (joint block). Prior ``v ~ InverseGamma(a, b)``,
``mu | v ~ Normal(m0, sqrt(v / k0))``, children ``x_i ~ Normal(mu, sqrt(c_i v))``. With weights
``w_i = 1 / c_i``, ``W = sum w_i``, ``xbar = sum w_i x_i / W`` and ``S = sum w_i (x_i - xbar)^2``,
completing the square in ``mu`` (Gelman et al., *Bayesian Data Analysis*, 3rd ed., Sec. 3.3,
eq. 3.3-3.4, there with ``c_i = 1``) gives

.. math:: v \mid x \sim \mathrm{InverseGamma}\big(a + n/2,\;
    b + S/2 + \tfrac{k_0 W}{2 (k_0 + W)} (\bar x - m_0)^2\big),\qquad
    \mu \mid v, x \sim \mathrm{Normal}\big(\tfrac{k_0 m_0 + W \bar x}{k_0 + W},\;
    \sqrt{v / (k_0 + W)}\big).

An exact joint draw is ``v`` from its marginal, then ``mu`` given that ``v``.

Each family has a ``*_posterior`` function (hyperparameters + summed statistics -> posterior
hyperparameters) and a ``draw_*`` function (posterior hyperparameters -> one exact draw).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "beta_binomial_posterior",
    "dirichlet_categorical_posterior",
    "draw_beta",
    "draw_dirichlet",
    "draw_gamma",
    "draw_invgamma",
    "draw_mvnormal_precision",
    "draw_normal",
    "draw_normal_invgamma",
    "gamma_exponential_posterior",
    "gamma_poisson_posterior",
    "invgamma_normal_posterior",
    "normal_invgamma_posterior",
    "normal_normal_posterior",
    "sum_to_shape",
]

_TINY = np.finfo(np.float64).tiny
_ONE_MINUS = np.nextafter(1.0, 0.0)
_HUGE = np.finfo(np.float64).max


def sum_to_shape(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``values`` over the axes that broadcasting from ``shape`` would have created.

    The inverse of ``np.broadcast_to(a, values.shape)`` for sums: the result has ``shape``.

    Examples
    --------
    >>> sum_to_shape(np.ones((4, 3)), (1, 3)).tolist()
    [[4.0, 4.0, 4.0]]
    >>> sum_to_shape(np.arange(6).reshape(2, 3), ()).item()
    15
    """
    values = np.asarray(values)
    shape = tuple(int(s) for s in shape)
    lead = values.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"cannot sum shape {values.shape} to the larger shape {shape}")
    if lead:
        values = values.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and values.shape[i] != 1)
    if axes:
        values = values.sum(axis=axes, keepdims=True)
    if values.shape != shape:
        raise ValueError(f"cannot sum shape {values.shape} to shape {shape}")
    return values


# ---- Beta -- Bernoulli / Binomial -------------------------------------------------------------
def beta_binomial_posterior(a, b, successes, trials):
    """Posterior ``Beta(a + s, b + t - s)`` of a Beta prior given binomial counts (see module).

    Parameters
    ----------
    a, b : array_like
        Prior Beta parameters (> 0).
    successes, trials : array_like
        Summed successes ``s`` and summed trials ``t`` (``0 <= s <= t``).

    Examples
    --------
    >>> beta_binomial_posterior(1.0, 1.0, 3, 10)
    (4.0, 8.0)
    """
    a_post = np.add(a, successes, dtype=np.float64)
    b_post = np.add(b, np.subtract(trials, successes), dtype=np.float64)
    if a_post.ndim == 0:
        return float(a_post), float(b_post)
    return a_post, b_post


def draw_beta(rng: np.random.Generator, a, b, shape=None) -> np.ndarray:
    """One exact draw from ``Beta(a, b)``, kept inside the open unit interval.

    The draw is clipped to ``[tiny, 1 - 2**-53]`` so that its log-odds is finite (a float Beta
    draw can round to exactly 0 or 1 when a parameter is tiny); the clip moves no more than the
    float64 resolution at the ends.

    Examples
    --------
    >>> p = draw_beta(np.random.default_rng(0), np.array([2.0, 50.0]), np.array([5.0, 1.0]))
    >>> bool(np.all((p > 0) & (p < 1)))
    True
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if shape is None:
        shape = np.broadcast_shapes(a.shape, b.shape)
    return np.clip(rng.beta(a, b, size=shape), _TINY, _ONE_MINUS)


# ---- Gamma -- Poisson -------------------------------------------------------------------------
def gamma_poisson_posterior(alpha, beta, total, count):
    """Posterior ``Gamma(alpha + total, beta + count)`` (rate ``beta``) given Poisson data.

    Parameters
    ----------
    alpha, beta : array_like
        Prior shape and *rate* (PyMC's ``pm.Gamma(alpha, beta)``).
    total, count : array_like
        Sum of the Poisson observations and their number.

    Examples
    --------
    >>> gamma_poisson_posterior(2.0, 0.5, 30, 10)
    (32.0, 10.5)
    """
    a_post = np.add(alpha, total, dtype=np.float64)
    b_post = np.add(beta, count, dtype=np.float64)
    if a_post.ndim == 0:
        return float(a_post), float(b_post)
    return a_post, b_post


def draw_gamma(rng: np.random.Generator, alpha, beta, shape=None) -> np.ndarray:
    """One exact draw from ``Gamma(alpha, rate=beta)``, kept >= the smallest normal float.

    Examples
    --------
    >>> float(draw_gamma(np.random.default_rng(0), 1e6, 1e6).round(2))
    1.0
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if shape is None:
        shape = np.broadcast_shapes(alpha.shape, beta.shape)
    return np.maximum(rng.standard_gamma(alpha, size=shape) / beta, _TINY)


def gamma_exponential_posterior(alpha, beta, total, count):
    """Posterior ``Gamma(alpha + count, beta + total)`` (rate) given Exponential data.

    Parameters
    ----------
    alpha, beta : array_like
        Prior shape and *rate* (PyMC's ``pm.Gamma(alpha, beta)``).
    total, count : array_like
        Sum of the Exponential observations and their number.

    Examples
    --------
    >>> gamma_exponential_posterior(2.0, 0.5, 7.5, 10)
    (12.0, 8.0)
    """
    return gamma_poisson_posterior(alpha, beta, count, total)


# ---- InverseGamma -- Normal variance (known means) -----------------------------------------
def invgamma_normal_posterior(a, b, count, sq_sum):
    """Posterior ``InverseGamma(a + count / 2, b + sq_sum / 2)`` of a Normal variance.

    Parameters
    ----------
    a, b : array_like
        Prior shape and scale (PyMC's ``pm.InverseGamma(alpha, beta)``).
    count : array_like
        Number of Normal children ``n``.
    sq_sum : array_like
        ``q = sum_i (x_i - m_i)**2 / c_i`` (children ``Normal(m_i, sqrt(c_i v))``).

    Examples
    --------
    >>> invgamma_normal_posterior(2.0, 1.0, 4, 3.0)
    (4.0, 2.5)
    """
    a_post = np.add(a, np.multiply(count, 0.5), dtype=np.float64)
    b_post = np.add(b, np.multiply(sq_sum, 0.5), dtype=np.float64)
    if a_post.ndim == 0 and b_post.ndim == 0:
        return float(a_post), float(b_post)
    return a_post, b_post


def draw_invgamma(rng: np.random.Generator, a, b, shape=None) -> np.ndarray:
    """One exact draw from ``InverseGamma(a, b)`` (``b / Gamma(a, 1)``), kept finite and > 0.

    The gamma variate is kept >= the smallest normal float, the result <= the largest float
    and >= the smallest normal float (so its logarithm is finite).

    Examples
    --------
    >>> v = draw_invgamma(np.random.default_rng(0), np.full(20000, 3.0), 4.0)
    >>> bool(abs(v.mean() - 2.0) < 0.05)   # mean b / (a - 1)
    True
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if shape is None:
        shape = np.broadcast_shapes(a.shape, b.shape)
    g = np.maximum(rng.standard_gamma(a, size=shape), _TINY)
    return np.clip(b / g, _TINY, _HUGE)


# ---- Normal -- InverseGamma (mean and variance unknown) ------------------------------------
def normal_invgamma_posterior(prior, weight, weighted_mean, spread):
    """Posterior ``(m, k, a, b)`` of the Normal--InverseGamma block (module docstring).

    Parameters
    ----------
    prior : tuple of array_like
        ``(m0, k0, a, b)``: ``mu | v ~ Normal(m0, sqrt(v / k0))``, ``v ~ InverseGamma(a, b)``.
    weight : array_like
        ``W = sum_i 1 / c_i`` (children ``Normal(mu, sqrt(c_i v))``; ``n`` when ``c_i = 1``).
    weighted_mean : array_like
        ``xbar = sum_i x_i / c_i / W`` (any finite value where ``W = 0``).
    spread : tuple of array_like
        ``(S, n)``: ``S = sum_i (x_i - xbar)**2 / c_i`` and the number of children ``n``.

    Returns
    -------
    tuple
        ``(m, k, a, b)``: ``v ~ InverseGamma(a, b)``, ``mu | v ~ Normal(m, sqrt(v / k))``.

    Examples
    --------
    >>> m, k, a, b = normal_invgamma_posterior((0.0, 1.0, 2.0, 1.0), 4.0, 1.0, (2.0, 4))
    >>> float(m), float(k), float(a), float(b)
    (0.8, 5.0, 4.0, 2.4)
    """
    m0, k0, a, b = (np.asarray(q, dtype=np.float64) for q in prior)
    w = np.asarray(weight, dtype=np.float64)
    xbar = np.asarray(weighted_mean, dtype=np.float64)
    s, n = (np.asarray(q, dtype=np.float64) for q in spread)
    k = k0 + w
    m = (k0 * m0 + w * xbar) / k
    b_post = b + 0.5 * s + 0.5 * (k0 * w / k) * np.square(xbar - m0)
    return m, k, a + 0.5 * n, b_post


def draw_normal_invgamma(rng: np.random.Generator, m, k, a, b, shape=None):
    """One exact joint draw ``(mu, v)``: ``v ~ InverseGamma(a, b)``, ``mu ~ N(m, sqrt(v / k))``.

    Examples
    --------
    >>> mu, v = draw_normal_invgamma(np.random.default_rng(0), 0.0, 1.0, 3.0, 2.0)
    >>> mu.shape, bool(v > 0)
    ((), True)
    """
    arrays = [np.asarray(q, dtype=np.float64) for q in (m, k, a, b)]
    if shape is None:
        shape = np.broadcast_shapes(*(q.shape for q in arrays))
    m, k, a, b = arrays
    v = draw_invgamma(rng, a, b, shape)
    return draw_normal(rng, m, np.sqrt(v / k), shape), v


# ---- Dirichlet -- Categorical -----------------------------------------------------------------
def dirichlet_categorical_posterior(alpha, counts):
    """Posterior ``Dirichlet(alpha + counts)``; ``counts`` has the category axis last.

    Examples
    --------
    >>> dirichlet_categorical_posterior([2.0, 2.0, 2.0], np.bincount([0, 0, 2], minlength=3))
    array([4., 2., 3.])
    """
    return np.add(alpha, counts, dtype=np.float64)


def draw_dirichlet(rng: np.random.Generator, alpha) -> np.ndarray:
    """Exact draws from ``Dirichlet(alpha)`` for every row of ``alpha`` (category axis last).

    Independent ``Gamma(alpha_j, 1)`` draws normalised to sum 1. Entries are kept >= the smallest
    normal float (then renormalised) so that the simplex transform's logarithm stays finite; a
    row whose gamma draws all underflow (possible only for tiny ``alpha``) is redrawn with
    numpy's stick-breaking ``Generator.dirichlet``.

    Examples
    --------
    >>> th = draw_dirichlet(np.random.default_rng(0), np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]))
    >>> th.shape, np.allclose(th.sum(-1), 1.0)
    ((2, 3), True)
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    g = rng.standard_gamma(alpha)
    total = g.sum(axis=-1, keepdims=True)
    bad = (total[..., 0] <= 0.0) | ~np.isfinite(total[..., 0])
    if np.any(bad):
        flat_alpha = alpha.reshape(-1, alpha.shape[-1])
        flat_g = g.reshape(-1, alpha.shape[-1])
        for row in np.flatnonzero(bad.ravel()):  # rare fallback, not a per-record loop
            flat_g[row] = rng.dirichlet(flat_alpha[row])
        g = flat_g.reshape(alpha.shape)
        total = g.sum(axis=-1, keepdims=True)
    theta = np.maximum(g / total, _TINY)
    return theta / theta.sum(axis=-1, keepdims=True)


# ---- Normal -- Normal (known sigma) -----------------------------------------------------------
def normal_normal_posterior(mu0, sigma0, weighted_sum, precision_sum):
    """Posterior ``(mean, sd)`` of a Normal mean given children with known variances.

    Parameters
    ----------
    mu0, sigma0 : array_like
        Prior mean and standard deviation.
    weighted_sum : array_like
        ``sum_i x_i / sigma_i**2``.
    precision_sum : array_like
        ``sum_i 1 / sigma_i**2``.

    Examples
    --------
    >>> mean, sd = normal_normal_posterior(0.0, 1.0, 4.0, 4.0)   # 4 unit-variance draws, sum 4
    >>> round(float(mean), 12), round(float(sd) ** 2, 12)
    (0.8, 0.2)
    """
    prior_prec = 1.0 / np.square(np.asarray(sigma0, dtype=np.float64))
    tau = prior_prec + np.asarray(precision_sum, dtype=np.float64)
    mean = (np.asarray(mu0, dtype=np.float64) * prior_prec + weighted_sum) / tau
    return mean, 1.0 / np.sqrt(tau)


def draw_normal(rng: np.random.Generator, mean, sd, shape=None) -> np.ndarray:
    """One exact draw from ``Normal(mean, sd)``.

    Examples
    --------
    >>> draw_normal(np.random.default_rng(0), np.zeros(3), 1.0).shape
    (3,)
    """
    mean = np.asarray(mean, dtype=np.float64)
    sd = np.asarray(sd, dtype=np.float64)
    if shape is None:
        shape = np.broadcast_shapes(mean.shape, sd.shape)
    return mean + sd * rng.standard_normal(size=shape)


# ---- Normal linear regression (known sigma) ---------------------------------------------------
@numba.njit(cache=True)
def _precision_draw(prec, h, e):  # pragma: no cover - compiled
    """Cholesky ``P = L L'`` (in place on a copy), then ``P^{-1} h + L^{-T} e``; NaNs if the
    matrix is not positive definite."""
    p = prec.shape[0]
    lo = np.zeros((p, p))
    for j in range(p):
        d = prec[j, j]
        for k in range(j):
            d -= lo[j, k] * lo[j, k]
        if not d > 0.0:
            return np.full(p, np.nan)
        lo[j, j] = np.sqrt(d)
        for i in range(j + 1, p):
            t = prec[i, j]
            for k in range(j):
                t -= lo[i, k] * lo[j, k]
            lo[i, j] = t / lo[j, j]
    # forward: L u = h; then backward: L' x = u + e  (x = L^{-T} (L^{-1} h + e))
    u = np.empty(p)
    for i in range(p):
        t = h[i]
        for k in range(i):
            t -= lo[i, k] * u[k]
        u[i] = t / lo[i, i]
    x = np.empty(p)
    for i in range(p - 1, -1, -1):
        t = u[i] + e[i]
        for k in range(i + 1, p):
            t -= lo[k, i] * x[k]
        x[i] = t / lo[i, i]
    return x


def draw_mvnormal_precision(rng: np.random.Generator, precision, h) -> np.ndarray:
    """One exact draw from ``Normal(P^{-1} h, P^{-1})`` given the precision ``P`` and ``h``.

    This is the regression full conditional of the module docstring. With ``P = L L'``,
    ``x = L^{-T} (L^{-1} h + e)`` equals ``P^{-1} h + L^{-T} e`` (mean ``P^{-1} h``, covariance
    ``P^{-1}``); computed by a small compiled Cholesky and two triangular solves.

    Parameters
    ----------
    rng : numpy Generator
    precision : (p, p) array_like
        Symmetric positive-definite posterior precision ``P``.
    h : (p,) array_like
        ``Sigma0^{-1} mu0 + X' W r``.

    Examples
    --------
    >>> P = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> x = np.array([draw_mvnormal_precision(np.random.default_rng(i), P, [1.0, 2.0])
    ...               for i in range(20000)])
    >>> bool(np.allclose(x.mean(0), np.linalg.solve(P, [1.0, 2.0]), atol=0.02))
    True
    >>> bool(np.allclose(np.cov(x.T), np.linalg.inv(P), atol=0.01))
    True
    """
    prec = np.ascontiguousarray(precision, dtype=np.float64)
    h = np.ascontiguousarray(h, dtype=np.float64)
    out = _precision_draw(prec, h, rng.standard_normal(h.shape[0]))
    if not np.isfinite(out.sum()):
        raise ValueError("the posterior precision is not positive definite (or not finite)")
    return out
