"""The JAX backend: pymc_dp's Ops in JAX (pymc_dp.jax) and PyMC's JAX samplers.

* Values: each JAX function against the numba kernel it mirrors, over grids with extreme
  parameters (orders to 1e8, arguments from 1e-300 to inf, rates 1e-8 to 1e8, observations to
  1e300): relative error <= 1e-13 where |value| >= 1, absolute elsewhere, and the same
  non-finite entries.
* Derivatives: ``jax.grad`` of the JAX-compiled graph (the route of PyMC's JAX samplers)
  against PyTensor's gradient compiled with numba, and PyTensor's gradient graphs (whose
  gradient Ops ``IvRatio``, ``DLogIv`` need JAX functions too) compiled with ``mode="JAX"``.
* The NaN gradient of issue 9 (Binomial + Geometric under ``jax.jit``): reproduced with the
  former logsumexp shift, finite and equal to numba's with the present one.
* Exact posteriors under ``nuts_sampler="numpyro"`` and ``"blackjax"`` against grid
  posteriors: the mean within k = 4.89 MCSE and the grid CDF at the sample 0.1/0.5/0.9
  quantiles within 4.89 standard errors ``sqrt(q (1 - q) / ESS)`` (false-alarm rate 1e-6
  each, 4e-6 per model), zero divergences; negative control (asserted): the same draws fail
  against the posterior of the model that ignores the noise.

Skipped cleanly where jax, numpyro or blackjax is not installed.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from scipy import special, stats  # noqa: E402

import pymc_dp.jax as pdj  # noqa: E402
from pymc_dp.distributions import marginals  # noqa: E402
from pymc_dp.distributions.bessel import bessel_logpmf_pt  # noqa: E402
from pymc_dp.distributions.marginal_poisson import (  # noqa: E402
    poisson_two_sided_exp_logp,
    poisson_two_sided_exp_logp_numpy,
)
from pymc_dp.distributions.privatized import Privatized  # noqa: E402
from pymc_dp.distributions.skellam import skellam_logpmf, skellam_logpmf_pt  # noqa: E402
from pymc_dp.kernels.bessel_sampling import bessel_logpmf  # noqa: E402
from pymc_dp.math import bessel as nb  # noqa: E402
from pymc_dp.math.count_mode import count_mode_pt  # noqa: E402
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian  # noqa: E402
from pymc_dp.mechanisms.gaussian import Gaussian  # noqa: E402
from pymc_dp.mechanisms.geometric import Geometric  # noqa: E402
from pymc_dp.mechanisms.laplace import Laplace  # noqa: E402
from pymc_dp.testing import grid_posterior_check  # noqa: E402

pdj.install()
from pymc.sampling.jax import get_jaxified_graph  # noqa: E402  (imports the JAX dispatch)

from pymc_dp.jax import poisson_noise  # noqa: E402
from pymc_dp.jax import special as js  # noqa: E402

TOL = 1e-13


def _max_err(got, ref):
    """Largest error (relative where |ref| >= 1) and the number of non-finite mismatches."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)
    err[same] = 0.0
    bad = int(np.sum(~np.isfinite(err)))
    return float(np.max(np.where(np.isfinite(err), err, 0.0))), bad


def _assert_close(got, ref, tol=TOL):
    err, bad = _max_err(got, ref)
    assert bad == 0, f"{bad} entries differ in being finite"
    assert err <= tol, err


# ----------------------------------------------------------------------------------------
# values

_NU = np.array([0, 0.5, 1, 2, 5, 19, 19.5, 20, 20.5, 21, 50, 300, 1e3, 1e5, 1e8])
_X = np.array(
    [0, 1e-300, 1e-120, 1e-100, 1e-50, 1e-5, 0.5, 1, 2, 2 + 1e-7, 3, 10, 100, 1e3, 1e4, 1e6]
)
_X = np.append(_X, [1e10, 1e200, np.inf])


@pytest.mark.parametrize(
    ("jax_fn", "numba_fn"),
    [
        (js.log_iv, nb.log_iv),
        (js.log_ive, nb.log_ive),
        (js.iv_ratio, nb.iv_ratio),
        (js.dlog_iv, nb.dlog_iv),
    ],
    ids=["log_iv", "log_ive", "iv_ratio", "dlog_iv"],
)
def test_bessel_family_values(jax_fn, numba_fn, rng):
    nu = np.concatenate([_NU, rng.uniform(0.0, 40.0, 30)])
    x = np.concatenate([_X, 10.0 ** rng.uniform(-5.0, 6.0, 30)])
    nu, x = np.meshgrid(nu, x)
    _assert_close(jax.jit(jax_fn)(nu, x), numba_fn(nu, x))


def test_bessel_family_invalid_inputs_are_nan():
    got = jax.jit(js.log_iv)(np.array([-1.0, 1.0, np.nan]), np.array([1.0, -1.0, 1.0]))
    assert np.all(np.isnan(got))


def test_skellam_values():
    k = np.array([0, 1, -1, 2, -5, 10, -10, 19, 20, 21, -21, 100, 999, -999, 1e5, -1e5, 0.5])
    mu = np.array([1e-8, 1e-6, 1e-3, 0.1, 1, 3, 10, 100, 1e4, 1e6, 1e8])
    k, m1, m2 = np.meshgrid(k, mu, mu, indexing="ij")
    with np.errstate(all="ignore"):
        ref = skellam_logpmf(k, m1, m2)
    _assert_close(jax.jit(js.skellam_logpmf)(k, m1, m2), ref)


def test_bessel_logpmf_values():
    n = np.array([0, 1, 2, 5, 10, 100, 1e4, -1, 2.5])
    nu = np.array([0, 0.5, 1, 3, 19, 20, 50, 1e3, 1e5])
    a = np.array([0, 1e-200, 1e-10, 0.1, 1, 5, 20, 100, 1e4, 1e6])
    n, nu, a = np.meshgrid(n, nu, a, indexing="ij")
    with np.errstate(all="ignore"):
        ref = bessel_logpmf(n, nu, a)
    _assert_close(jax.jit(js.bessel_logpmf)(n, nu, a), ref)


def test_count_mode_values_equal(rng):
    """The bisection is exact arithmetic on integers: equal, not close."""
    z = np.concatenate([rng.integers(-50, 500, 40).astype(float), [1e6, -1e6, 0.0]])
    z, mu = np.meshgrid(z, [0.3, 4.0, 1e3])
    upper = np.maximum(z, mu) + 1.0
    args = [z, upper, 0.0, mu, 0.0, 0.0, 0.7]
    for base, noise, q, b2 in [(0.0, 0.0, 0.7, 0.0), (1.0, 1.0, 40.0, 0.3), (0.0, 1.0, 2.0, 0)]:
        args = [z, upper, base, mu, b2, noise, q]
        ref = count_mode_pt(*[pt.as_tensor(np.float64(v)) for v in args]).eval()
        np.testing.assert_array_equal(np.asarray(jax.jit(js.count_mode)(*args)), ref)


_MARGINAL_CASES = [
    (1.0, math.log(math.tanh(0.5))),  # geometric, epsilon 1
    (0.01, math.log(math.tanh(0.005))),  # geometric, heavy noise
    (3.0, math.log(math.tanh(1.5))),
    (20.0, math.log(math.tanh(10.0))),  # almost no noise
    (1.0 / 3.0, -math.log(6.0)),  # Laplace, b = 3
]


@pytest.mark.parametrize(("a", "logc"), _MARGINAL_CASES)
def test_poisson_marginal_values_and_derivative(a, logc):
    z = np.concatenate(
        [
            np.arange(-60.0, 400.0),
            [-1e4, 1e4, 1e6, 2.0**53, -(2.0**53), 1e300, -1e300],
            [0.5, -0.5, 3.7, 120.25],
        ]
    )
    mu = np.array([1e-8, 1e-3, 0.5, 4.0, 30.0, 300.0, 1e4, 1e6])
    z, mu = (v.ravel() for v in np.meshgrid(z, mu))
    # invalid means, then z = +-inf (log p = -inf: no noise reaches it)
    z = np.append(z, [1.0, 1.0, np.inf, -np.inf])
    mu = np.append(mu, [-1.0, np.nan, 1.0, 1.0])
    lp, d = jax.jit(poisson_noise.logp_dmu, static_argnums=(2, 3))(z, mu, a, logc)
    ref_lp, ref_d = poisson_two_sided_exp_logp_numpy(z, mu, a, logc)
    assert np.all(np.isnan(ref_lp[-4:-2])) and np.all(ref_lp[-2:] == -np.inf)
    _assert_close(lp, ref_lp)
    # the derivative's own rounding (marginal_poisson docstring): a few ulps of e^a (analytic
    # form) or of |log p| (neighbour form, used when e^a is the larger), relative to 1 + d
    _, bad = _max_err(d, ref_d)
    assert bad == 0
    scale = np.minimum(np.maximum(np.abs(ref_lp), 1.0), math.exp(a))
    bound = 1e-13 + 32.0 * np.finfo(np.float64).eps * scale
    ok = np.isnan(ref_d) | (np.abs(np.asarray(d) - ref_d) <= bound * np.maximum(np.abs(ref_d), 1.0))
    assert np.all(ok), np.max(np.abs(np.asarray(d) - ref_d) / np.maximum(np.abs(ref_d), 1.0))


# ----------------------------------------------------------------------------------------
# derivatives: jax.grad of the JAX graph (PyMC's route) and PyTensor gradients in JAX mode


def _jax_and_numba_grads(inputs, out, values):
    """``(jax.grad of sum(out), PyTensor grad compiled with numba)`` w.r.t. ``inputs``."""
    fn = get_jaxified_graph(inputs=inputs, outputs=[out.sum()])
    grads = jax.grad(lambda *v: fn(*v)[0], argnums=tuple(range(len(inputs))))
    got = jax.jit(grads)(*values)
    ref = pytensor.function(inputs, pytensor.grad(out.sum(), inputs))(*values)
    return got, ref


def test_bessel_family_gradients():
    nu = np.array([0.0, 0.5, 3.0, 19.0, 20.0, 150.0, 1e4])
    x = np.array([1e-30, 0.7, 2.5, 40.0, 3.0, 1e3, 1e5])
    xv = pt.dvector("x")
    for fn in (nb.log_iv, nb.log_ive, nb.iv_ratio, nb.dlog_iv):
        (got,), (ref,) = _jax_and_numba_grads([xv], fn(pt.as_tensor(nu), xv), [x])
        _assert_close(got, ref)


def test_distribution_gradients():
    k = np.array([0.0, 3.0, -7.0, 40.0, -1e4, 1.0])
    m1 = np.array([1.0, 2.5, 1e-3, 30.0, 2e4, 1e6])
    m2 = np.array([0.5, 4.0, 8.0, 1e-6, 1e4, 1e6 - 3.0])
    a, b = pt.dvector("m1"), pt.dvector("m2")
    got, ref = _jax_and_numba_grads([a, b], skellam_logpmf_pt(pt.as_tensor(k), a, b), [m1, m2])
    for g, r in zip(got, ref, strict=True):
        _assert_close(g, r)
    n, nu = np.array([0.0, 2.0, 7.0, 100.0]), np.array([0.0, 3.5, 25.0, 1e3])
    (got,), (ref,) = _jax_and_numba_grads(
        [a],
        bessel_logpmf_pt(pt.as_tensor(n), pt.as_tensor(nu), a),
        [np.array([0.1, 4.0, 50.0, 2e3])],
    )
    _assert_close(got, ref)


@pytest.mark.parametrize(
    ("a", "logc"),
    [_MARGINAL_CASES[0], pytest.param(*_MARGINAL_CASES[4], marks=pytest.mark.slow)],
)
def test_poisson_marginal_gradient(a, logc):
    z = np.array([-3.0, 0.0, 2.0, 7.0, 40.0, 400.0, 2.5])
    mu = pt.dvector("mu")
    out = poisson_two_sided_exp_logp(pt.as_tensor(z), mu, a, logc)
    (got,), (ref,) = _jax_and_numba_grads(
        [mu], out, [np.array([3.0, 1e-3, 5.0, 0.7, 30.0, 380.0, 2.0])]
    )
    _assert_close(got, ref)


def test_pytensor_gradient_graphs_in_jax_mode():
    """Gradient Ops (IvRatio, DLogIv) compile with mode="JAX" too."""
    nu, x = pt.dvector("nu"), pt.dvector("x")
    outs = [nb.log_iv(nu, x), nb.iv_ratio(nu, x), nb.dlog_iv(nu, x)]
    graph = outs + [pytensor.grad(o.sum(), x) for o in outs]
    vals = [np.array([0.0, 2.0, 30.0, 1e3]), np.array([0.3, 5.0, 12.0, 2e3])]
    got = pytensor.function([nu, x], graph, mode="JAX")(*vals)
    ref = pytensor.function([nu, x], graph)(*vals)
    for g, r in zip(got, ref, strict=True):
        _assert_close(g, r)


def test_undefined_derivatives_refuse():
    nu = pt.dvector("nu")
    fn = get_jaxified_graph(
        inputs=[nu], outputs=[nb.log_iv(nu, pt.as_tensor(np.array([2.0]))).sum()]
    )
    with pytest.raises(NotImplementedError, match="order"):
        jax.grad(lambda v: fn(v)[0])(np.array([1.0]))
    f = pdj.dispatch._poisson_two_sided(1.0, -0.8)
    with pytest.raises(NotImplementedError, match="observation"):
        jax.grad(lambda z: f(z, np.array([2.0]))[0].sum())(np.array([1.0]))


# ----------------------------------------------------------------------------------------
# every registered marginal through PyMC's JAX route


def _pair_cases():
    g, lap = Geometric(epsilon=0.5), Laplace(scale=2.0)
    dg = DiscreteGaussian(sigma=2.0)
    two = np.float64(2.0)
    return [
        pytest.param(
            lambda t: pm.Poisson.dist(t),
            g,
            "poisson",
            id="poisson-geometric",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.Poisson.dist(t),
            lap,
            "poisson",
            id="poisson-laplace",
            marks=pytest.mark.slow,
        ),
        pytest.param(lambda t: pm.Normal.dist(t, 1.0), lap, "normal", id="normal-laplace"),
        pytest.param(
            lambda t: pm.Normal.dist(t, 1.0),
            Gaussian(sigma=2.0),
            "normal",
            id="normal-gaussian",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.Bernoulli.dist(t / (1 + t)), lap, "binary", id="bernoulli-laplace"
        ),
        pytest.param(
            lambda t: pm.Binomial.dist(10, t / (1 + t)),
            dg,
            "ten",
            id="binomial-dgauss",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.BetaBinomial.dist(10, t, two),
            g,
            "ten",
            id="betabinomial-geometric",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.Categorical.dist(pt.stack([1 / (1 + t), t / (1 + t)])),
            g,
            "binary",
            id="categorical-geometric",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.Poisson.dist(t),
            dg,
            "poisson",
            id="poisson-dgauss",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            lambda t: pm.NegativeBinomial.dist(mu=t, alpha=two),
            dg,
            "poisson",
            id="negbin-dgauss",
            marks=pytest.mark.slow,
        ),
    ]


_DATA = {
    "poisson": lambda rng: rng.poisson(4.0, 20),
    "normal": lambda rng: rng.normal(1.0, 1.0, 20),
    "binary": lambda rng: rng.binomial(1, 0.3, 20),
    "ten": lambda rng: rng.binomial(10, 0.3, 20),
}


@pytest.mark.parametrize(("base", "mech", "data"), _pair_cases())
def test_registered_marginals_jax_logp_and_gradient(base, mech, data, rng):
    """logp and jax.grad (jitted) of each Privatized pair equal PyTensor's numba ones."""
    from pymc.sampling.jax import get_jaxified_logp

    z = mech.release(_DATA[data](rng), rng=rng, **({} if mech.integer else {"allow_float": True}))
    with pm.Model() as model:
        t = pm.Gamma("t", 2.0, 0.5)
        Privatized("z", base(t), mech, observed=z)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        neg = get_jaxified_logp(model, negative_logp=False)
    fn = jax.jit(jax.value_and_grad(lambda v: -neg([v])))
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    for v in (-1.5, 0.3, 2.0):
        got = fn(np.float64(v))
        point = {"t_log__": np.array(v)}
        _assert_close([got[0], got[1]], [logp(point), dlogp(point)[0]], tol=1e-12)


# ----------------------------------------------------------------------------------------
# truncated sums under JAX: the static window (pymc_dp.jax.static_window) or a refusal


def _jax_and_numba_values(inputs, out, values):
    """``(jitted JAX values, numba values)`` of the elementwise ``out``."""
    fn = get_jaxified_graph(inputs=inputs, outputs=[out])
    got = jax.jit(lambda *v: fn(*v)[0])(*values)
    return np.asarray(got), pytensor.function(inputs, out)(*values)


def _static_window_graph(base, mechs, z):
    """One graph: the elementwise marginal of records ``z`` under each mechanism in turn, with
    its own rate per record and mechanism (input ``mu`` of size ``len(mechs) * z.size``)."""
    m = pt.dvector("mu")
    n = z.size
    outs = [
        marginals.truncated_sum_marginal(pt.as_tensor(z), base(m[i * n : (i + 1) * n]), mech)
        for i, mech in enumerate(mechs)
    ]
    return m, pt.concatenate(outs)


def _assert_gradient_close(got, ref, lp):
    """Each term ``log p(y) + log eta(z - y)`` carries a rounding of a few ulps of its
    magnitude, about ``|log p(z)|`` near the mode (5e5 at z = 1e6, sigma = 1e3); the
    gradient, a weighted mean over the terms, inherits it in either backend (against 40-digit
    mpmath there: JAX 8.6e-11, numba 6.1e-12 relative). Tolerance: 1e-12 plus 16 ulps of
    ``|log p(z)|``, relative to ``2 + |d|``; 1e-12 wherever ``|log p(z)| < 28``."""
    _, bad = _max_err(got, ref)
    assert bad == 0
    err = np.abs(np.asarray(got) - ref) / (2.0 + np.abs(ref))
    bound = 1e-12 + 16.0 * np.finfo(np.float64).eps * np.maximum(np.abs(lp), 1.0)
    assert np.all(err <= bound), np.max(err / bound)


def _static_window_grid(base, mechs, z, mu):
    """JAX against numba, value and gradient, elementwise over records ``(z, mu)`` repeated
    for each mechanism; every JAX value certified (finite)."""
    m, out = _static_window_graph(base, mechs, z)
    mu = np.asarray(mu, dtype=np.float64)
    got, ref = _jax_and_numba_values([m], out, [mu])
    assert np.all(np.isfinite(got)), np.flatnonzero(~np.isfinite(got))
    _assert_close(got, ref, tol=1e-12)
    (dgot,), (dref,) = _jax_and_numba_grads([m], out, [mu])
    _assert_gradient_close(np.asarray(dgot), dref, ref)


def _records(z, mu):
    z, mu = np.meshgrid(np.asarray(z, dtype=np.float64), np.asarray(mu, dtype=np.float64))
    return z.ravel(), mu.ravel()


_FAR_Z = [-50.0, 0.0, 3.0, 12.0, 100.0, 1e4, 1e6]  # far below, at and far above the mean
_RATES = [1e-3, 0.5, 4.0, 60.0, 3e3, 1e5]


@pytest.mark.parametrize(
    "sigmas",
    # sigma 1e3 (a window of thousands of points per record) costs 30-50 s: slow tier
    [
        (2.0,),
        pytest.param((1e3,), marks=pytest.mark.slow),
        pytest.param((0.3, 40.0), marks=pytest.mark.slow),
    ],
    ids=["2", "1000", "0.3-40"],
)
def test_static_window_poisson_dgauss_equals_numba(sigmas):
    """Certified (finite) at every record, equal to numba (1e-12; gradient: plus the terms'
    rounding), value and gradient: sigma 0.3 to 1e3, rates 1e-3 to 1e5, observations from far
    below to far above the rate."""
    z, mu = _records(_FAR_Z, _RATES)
    mechs = [DiscreteGaussian(sigma=s) for s in sigmas]
    _static_window_grid(lambda m: pm.Poisson.dist(m), mechs, z, np.tile(mu, len(mechs)))


@pytest.mark.slow
@pytest.mark.parametrize("n", [1.0, 4.5])
def test_static_window_negbin_dgauss_equals_numba(n):
    """NegativeBinomial with a constant n >= 1 (log-concave): the same comparison."""
    z, mu = _records(_FAR_Z[:6], _RATES[:5])
    mechs = [DiscreteGaussian(sigma=s) for s in (0.5, 3.0, 30.0)]
    base = lambda m: pm.NegativeBinomial.dist(mu=m, alpha=np.float64(n))  # noqa: E731
    _static_window_grid(base, mechs, z, np.tile(mu, len(mechs)))


def test_static_window_too_short_is_not_certified(monkeypatch):
    """Negative control of the comparisons above: a static window of +-3 points instead of
    +-W (W = 25 at sigma = 2) is caught by the run-time bound check (-inf, not a wrong
    number) at every record whose mass is not within it."""
    short = lambda start, length, mode, base_rv, mech: marginals.StaticWindow(  # noqa: E731
        3, "short", None
    )(start, length, mode)
    monkeypatch.setattr(marginals, "_mark_window", short)
    z, mu = _records([0.0, 12.0, 100.0], [0.5, 4.0, 60.0])
    m, out = _static_window_graph(lambda m: pm.Poisson.dist(m), [DiscreteGaussian(sigma=2.0)], z)
    got, ref = _jax_and_numba_values([m], out, [mu])
    assert np.all(np.isfinite(ref))
    assert np.sum(~np.isfinite(got)) >= 6, got


@pytest.mark.slow  # 17 rates x logp + gradient under jit; the default run compares JAX and numba
# static-window values in test_static_window_poisson_dgauss_equals_numba
def test_static_window_over_the_posterior_of_the_test_model():
    """The exact-posterior model below: model logp and gradient under JAX equal numba's at
    rates spanning its grid posterior from quantile 1e-9 to 1 - 1e-9 and beyond."""
    from pymc.sampling.jax import get_jaxified_logp

    model, grid, logpost, _ = _poisson_case(DiscreteGaussian(sigma=2.0), 103)
    cdf = np.cumsum(np.exp(logpost - special.logsumexp(logpost)))
    lo, hi = np.interp([1e-9, 1.0 - 1e-9], cdf, grid)
    rates = np.concatenate([np.linspace(lo, hi, 13), [1e-3, 0.2, 40.0, 500.0]])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        neg = get_jaxified_logp(model, negative_logp=False)
    fn = jax.jit(jax.value_and_grad(lambda v: -neg([v])))
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    for v in np.log(rates):
        got = fn(np.float64(v))
        point = {"lam_log__": np.array(v)}
        _assert_close([got[0], got[1]], [logp(point), dlogp(point)[0]], tol=1e-12)


def _negbin_model(mech, random_alpha=False):
    z = np.array([0, 2, 5, 9, 30], dtype=np.int64)
    with pm.Model() as model:
        t = pm.Gamma("t", 2.0, 0.5)
        if random_alpha:
            base = pm.NegativeBinomial.dist(mu=np.float64(4.0), alpha=t)
        else:
            base = pm.NegativeBinomial.dist(mu=t, alpha=np.float64(2.0))
        Privatized("z", base, mech, observed=z)
    return model


@pytest.mark.parametrize(
    ("mech", "random_alpha", "pair", "why"),
    [
        (Geometric(epsilon=0.5), False, "NegativeBinomial with geometric noise", "exponential"),
        pytest.param(
            Laplace(scale=2.0),
            False,
            "NegativeBinomial with laplace noise",
            "exponential",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            DiscreteGaussian(sigma=2.0),
            True,
            "NegativeBinomial with discrete_gaussian",
            "log-conc",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["negbin-geometric", "negbin-laplace", "negbin-dgauss-random-alpha"],
)
def test_truncated_sum_without_static_window_refuses_under_jax(mech, random_alpha, pair, why):
    """A clear NotImplementedError when the graph is converted to JAX (PyMC's JAX route),
    naming the pair, the reason and the remedy; PyTensor's arange message does not surface.
    The default backend still compiles the same model (finite logp)."""
    from pymc.sampling.jax import get_jaxified_logp

    model = _negbin_model(mech, random_alpha)
    with pytest.raises(NotImplementedError) as info:
        get_jaxified_logp(model)
    msg = str(info.value)
    assert f"Privatized({pair}" in msg, msg
    for part in ("cannot be compiled with JAX", "static shapes", why, "nutpie", "default"):
        assert part in msg, (part, msg)
    assert "arange" not in msg
    assert np.isfinite(model.compile_logp()(model.initial_point()))


def test_static_window_grid_guard():
    """A static window beyond MAX_GRID_CELLS (sigma 1e4: 236 649 points per record) is
    refused at conversion for 100 records; 10 records (2.4e6 cells) convert."""
    from pymc.sampling.jax import get_jaxified_logp

    def model(records):
        with pm.Model() as m:
            t = pm.Gamma("t", 2.0, 0.5)
            Privatized(
                "z", pm.Poisson.dist(t), DiscreteGaussian(sigma=1e4), observed=np.arange(records)
            )
        return m

    with pytest.raises(NotImplementedError, match=r"MAX_GRID_CELLS = 16777216.*nutpie"):
        get_jaxified_logp(model(100))
    get_jaxified_logp(model(10))


# the default backend: the marker (StaticWindow) leaves its graph and numbers as they were

#: logp and dlogp at t_log__ = -1.5, 0.3, 2.0, 5.0, computed at commit 12d2c6b (before the
#: marker existed) with numba 0.68 / PyTensor 3.3.7 on x86-64
_BEFORE = {
    "poisson-dgauss": [
        -1943.1716050374741,
        300.0579818964477,
        -1387.7103215677619,
        315.66637715362384,
        -860.1539726475991,
        289.73950118954025,
        -1112.2352356682534,
        -1103.1258845502452,
    ],
    "negbin-geometric": [
        -208.09880262419222,
        2.844417728232201,
        -200.1185393133434,
        7.631600226901802,
        -104.46064496367707,
        62.84927650796223,
        -137.59954707320813,
        -86.73645615622787,
    ],
}


def _before_model(name):
    z = np.array([-3, 0, 1, 2, 4, 7, 9, 15, 40, 300], dtype=np.int64)
    with pm.Model() as model:
        t = pm.Gamma("t", 2.0, 0.5)
        if name == "poisson-dgauss":
            Privatized("z", pm.Poisson.dist(t), DiscreteGaussian(sigma=2.0), observed=z)
        else:
            base = pm.NegativeBinomial.dist(mu=t, alpha=np.float64(2.0))
            Privatized("z", base, Geometric(epsilon=0.5), observed=z)
    return model


def _compiled(model):
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    vals = []
    for v in (-1.5, 0.3, 2.0, 5.0):
        point = {"t_log__": np.array(v)}
        vals += [float(logp(point)), float(dlogp(point)[0])]
    return [logp.f.maker.fgraph, dlogp.f.maker.fgraph], np.array(vals)


@pytest.mark.parametrize(
    "name", ["poisson-dgauss", pytest.param("negbin-geometric", marks=pytest.mark.slow)]
)
def test_default_backend_graph_unchanged(name, monkeypatch):
    """The numba logp and gradient graphs with the marker are the graphs without it (same
    nodes, same computation: same cost), their numbers equal bit for bit, and equal the
    numbers recorded before the marker existed (0 ulp on the machine that recorded them;
    1e-14 relative allows another libm's last bits)."""
    from pytensor.graph.basic import equal_computations

    graphs, vals = _compiled(_before_model(name))
    monkeypatch.setattr(marginals, "_mark_window", lambda start, length, *_: (start, length))
    graphs0, vals0 = _compiled(_before_model(name))
    for g, g0 in zip(graphs, graphs0, strict=True):
        assert len(g.apply_nodes) == len(g0.apply_nodes)
        assert equal_computations(g.outputs, g0.outputs, g.inputs, g0.inputs)
        assert not any(getattr(n.op, "is_static_window_marker", False) for n in g.apply_nodes)
    np.testing.assert_array_equal(vals, vals0)
    np.testing.assert_allclose(vals, _BEFORE[name], rtol=1e-14, atol=0)


def test_static_window_marker_without_rewrites_is_the_identity():
    """Left in a graph compiled without rewrites, the marker is the identity (numba, Python)."""
    start, mode = pt.dvector("start"), pt.dvector("mode")
    length = pt.lscalar("length")
    outs = marginals.StaticWindow(5, "test pair")(start, length, mode)
    vals = [np.array([0.0, 4.0]), np.int64(9), np.array([7.0, 8.0])]
    for linker in ("numba", "py"):
        mode_ = pytensor.compile.mode.Mode(linker=linker, optimizer=None)
        got = pytensor.function([start, length, mode], outs, mode=mode_)(*vals)
        np.testing.assert_array_equal(got[0], vals[0])
        assert int(got[1]) == 9


# ----------------------------------------------------------------------------------------
# the NaN gradient of issue 9


def _binomial_geometric_model():
    rng = np.random.default_rng(303)
    mech = Geometric(epsilon=0.5)
    z = mech.release(rng.binomial(10, 0.3, size=30), rng=rng)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        Privatized("z", pm.Binomial.dist(10, p), mech, observed=z)
    return model, mech, z


def _jit_gradient_on_grid(model):
    from pymc.sampling.jax import get_jaxified_logp

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        logp = get_jaxified_logp(model, negative_logp=False)  # minus the log-density
    grad = jax.jit(jax.grad(lambda v: -logp([v])))
    xs = np.linspace(-4.0, 4.0, 401)
    return xs, np.array([float(grad(np.float64(v))) for v in xs])


def test_binomial_geometric_jit_gradient_is_finite_and_exact():
    model, _, _ = _binomial_geometric_model()
    xs, got = _jit_gradient_on_grid(model)
    dlogp = model.compile_dlogp()
    ref = np.array([dlogp({"p_logodds__": np.array(v)})[0] for v in xs])
    assert np.all(np.isfinite(got))
    _assert_close(got, ref, tol=1e-12)  # the logsumexp's sum is ordered differently


def _max_shift_logsumexp(x, axis=0):
    """The former safe_logsumexp: shift by max(x) under zero_grad (removed before JAX)."""
    from pytensor.gradient import zero_grad

    m = pt.max(x, axis=axis, keepdims=True)
    m = zero_grad(pt.switch(pt.isfinite(m), m, 0.0))
    s = pt.sum(pt.exp(x - m), axis=axis)
    ok = s > 0
    return pt.switch(ok, pt.squeeze(m, axis=axis) + pt.log(pt.switch(ok, s, 1.0)), -np.inf)


def test_binomial_geometric_nan_reproduced_with_max_shift(monkeypatch):
    """Control: the shift by max(x) gives NaN gradients under jax.jit (issue 9). Skipped if
    this XLA build computes the maximum and its arguments with the same rounding."""
    monkeypatch.setattr(marginals, "safe_logsumexp", _max_shift_logsumexp)
    model, _, _ = _binomial_geometric_model()
    _, got = _jit_gradient_on_grid(model)
    if np.all(np.isfinite(got)):
        pytest.skip("this XLA build shows no NaN with the max shift")
    assert np.isnan(got).sum() > 0


# ----------------------------------------------------------------------------------------
# lazy registration


def test_import_does_not_import_jax_and_registers_on_first_use():
    code = (
        "import sys, pymc_dp, pymc_dp.jax as j; j.install(); "
        "assert 'jax' not in sys.modules and not j.is_registered(); "
        "import pytensor.link.jax.dispatch; assert j.is_registered(); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_registration_when_the_dispatch_module_is_imported_first():
    """pymc_dp.jax.dispatch imports PyTensor's JAX dispatch, which fires the hook while the
    module is still initialising: no circular-import error, registered at the end."""
    code = (
        "import pymc_dp.jax.dispatch, pymc_dp.jax as j, pytensor.link.jax.dispatch as d; "
        "from pymc_dp.math.bessel import LogIv; "
        "assert j.is_registered() and d.jax_funcify.dispatch(LogIv).__module__ == "
        "'pymc_dp.jax.dispatch'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


# ----------------------------------------------------------------------------------------
# exact posteriors under the JAX samplers

K = 4.89  # two-sided normal quantile of 1e-6


def _passes(draws, grid, logpost):
    return grid_posterior_check(draws, grid, logpost, k_mean=K, k_quantile=K)


def _sample(model, sampler, seed):
    pytest.importorskip(sampler)
    with model, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Skipping Check", UserWarning)
        warnings.filterwarnings("ignore", "We recommend running at least", UserWarning)
        return pm.sample(
            draws=1000,
            tune=1000,
            chains=2,
            progressbar=False,
            nuts_sampler=sampler,
            random_seed=seed,
        )


def _check(idata, var, grid, logpost, naive_logpost):
    draws = idata.posterior[var].values
    assert int(idata.sample_stats["diverging"].sum()) == 0
    ok, info = _passes(draws, grid, logpost)
    assert ok, info
    bad, info_bad = _passes(draws, grid, naive_logpost)
    assert not bad, ("negative control passed", info_bad)


def _poisson_case(mech, seed):
    rng = np.random.default_rng(seed)
    z = mech.release(
        rng.poisson(4.0, size=40), rng=rng, **({} if mech.integer else {"allow_float": True})
    )
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("z", pm.Poisson.dist(lam), mech, observed=z)
    grid = np.linspace(1e-3, 15.0, 3000)
    ys = np.arange(0, 200)
    noise = mech.logpdf(z[:, None] - ys[None, :])
    loglik = np.array(
        [special.logsumexp(stats.poisson.logpmf(ys, g) + noise, axis=1).sum() for g in grid]
    )
    logprior = stats.gamma.logpdf(grid, 2.0, scale=2.0)
    clipped = np.maximum(np.round(z), 0)
    naive = stats.poisson.logpmf(clipped[:, None], grid[None, :]).sum(0)
    return model, grid, logprior + loglik, logprior + naive


def _binomial_case():
    model, mech, z = _binomial_geometric_model()
    grid = np.linspace(1e-4, 1 - 1e-4, 4000)
    ks = np.arange(11)
    noise = mech.logpdf(z[:, None] - ks[None, :])
    loglik = np.array(
        [special.logsumexp(stats.binom.logpmf(ks, 10, g) + noise, axis=1).sum() for g in grid]
    )
    naive = stats.binom.logpmf(np.clip(z, 0, 10)[:, None], 10, grid[None, :]).sum(0)
    return model, grid, loglik, naive


def _run(case, sampler, var, seed):
    model, grid, logpost, naive = case
    _check(_sample(model, sampler, seed), var, grid, logpost, naive)


def test_numpyro_poisson_geometric():
    _run(_poisson_case(Geometric(epsilon=0.5), 101), "numpyro", "lam", 1)


@pytest.mark.slow  # numpyro's posterior in the default run: test_numpyro_poisson_geometric
def test_numpyro_poisson_dgauss():
    """Poisson + discrete Gaussian (a truncated sum, static window under JAX) under numpyro."""
    _run(_poisson_case(DiscreteGaussian(sigma=2.0), 103), "numpyro", "lam", 9)


def test_blackjax_binomial_geometric():
    _run(_binomial_case(), "blackjax", "p", 2)


@pytest.mark.slow
def test_numpyro_binomial_geometric_slow():
    _run(_binomial_case(), "numpyro", "p", 3)


@pytest.mark.slow
def test_numpyro_poisson_laplace_slow():
    _run(_poisson_case(Laplace(scale=2.0), 102), "numpyro", "lam", 4)


@pytest.mark.slow
def test_blackjax_poisson_geometric_slow():
    _run(_poisson_case(Geometric(epsilon=0.5), 101), "blackjax", "lam", 5)


@pytest.mark.slow
def test_blackjax_poisson_laplace_slow():
    _run(_poisson_case(Laplace(scale=2.0), 102), "blackjax", "lam", 6)


@pytest.mark.slow
def test_numpyro_skellam_rates_slow():
    """The Skellam Op under numpyro: the posterior mean of mu1 against a 2-d grid posterior
    (scipy's Skellam law); control: the grid posterior of the data shifted by +1."""
    from pymc_dp.distributions.skellam import Skellam

    rng = np.random.default_rng(707)
    k = rng.poisson(5.0, 60) - rng.poisson(2.0, 60)
    with pm.Model() as model:
        m1 = pm.Gamma("m1", 2.0, 0.5)
        m2 = pm.Gamma("m2", 2.0, 0.5)
        Skellam("k", m1, m2, observed=k)
    g1, g2 = np.linspace(0.5, 14.0, 400), np.linspace(0.05, 10.0, 400)
    prior = (
        stats.gamma.logpdf(g1, 2.0, scale=2.0)[:, None]
        + stats.gamma.logpdf(g2, 2.0, scale=2.0)[None, :]
    )

    def marginal_of_mu1(data):
        vals, counts = np.unique(data, return_counts=True)
        ll = sum(
            c * stats.skellam.logpmf(v, g1[:, None], g2[None, :])
            for v, c in zip(vals, counts, strict=True)
        )
        return special.logsumexp(prior + ll, axis=1)

    _check(_sample(model, "numpyro", 8), "m1", g1, marginal_of_mu1(k), marginal_of_mu1(k + 1))
