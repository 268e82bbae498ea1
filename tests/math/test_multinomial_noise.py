"""The noisy multinomial row's exact marginal (``pymc_dp.math.multinomial_noise``).

References are independent of the recursion: the sum over every composition of ``N`` into
``V`` parts (``itertools.product``), with scipy's multinomial log-pmf and the noise laws
written out with scipy (Laplace, normal) or in closed form (two-sided geometric; discrete
Gaussian normalised by a direct sum); mpmath at 50 digits for the extreme cases. The gradient
is checked against its own enumeration (``E[c_j | z] / p_j``), against central finite
differences, and through PyTensor's ``verify_grad`` for the Op. All checks are deterministic
(no sampling, no false-alarm rate); each family has a negative control that the same
comparison must reject.
"""

import functools
import itertools
import math

import mpmath
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.kernels.noise_logpdf import logpdf_kind
from pymc_dp.math.multinomial_noise import (
    MultinomialNoiseLogp,
    multinomial_noise_logp,
    multinomial_noise_numpy,
)

MECHS = {
    "laplace": pmdp.Laplace(scale=1.3),
    "gaussian": pmdp.Gaussian(sigma=0.9),
    "geometric": pmdp.Geometric(epsilon=0.7),
    "discrete_gaussian": pmdp.DiscreteGaussian(sigma=1.1),
}


def _noise_logpdf(name, x, scale_factor=1.0):
    """Independent noise log-densities (scipy / closed forms), vectorised."""
    m = MECHS[name]
    x = np.asarray(x, np.float64)
    if name == "laplace":
        return stats.laplace.logpdf(x, scale=m.scale * scale_factor)
    if name == "gaussian":
        return stats.norm.logpdf(x, scale=m.sigma * scale_factor)
    if name == "geometric":
        a = -m.log_alpha / scale_factor
        return np.log(np.tanh(a / 2)) - a * np.abs(x)
    s = m.sigma * scale_factor
    k = np.arange(-200, 201)
    return -(x**2) / (2 * s * s) - special.logsumexp(-(k**2) / (2 * s * s))


def _brute(z, n, p, noise):
    """log p(z) and its gradient E[c_j | z] / p_j by enumerating every composition."""
    v = len(p)
    rows = np.array([c for c in itertools.product(range(n + 1), repeat=v) if sum(c) == n])
    lw = stats.multinomial.logpmf(rows, n, p) + noise(np.asarray(z)[None, :] - rows).sum(1)
    lp = special.logsumexp(lw)
    w = np.exp(lw - lp)
    return lp, (w[:, None] * rows).sum(0) / p


def _kernel(name, z, n, p):
    m = MECHS[name]
    lp, g = multinomial_noise_numpy(z, n, p, logpdf_kind(m.numba_logpdf), m.numba_params)
    return float(lp), g


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize("v", [3, 4])
def test_against_enumeration(name, v, rng):
    """Value and gradient equal the enumeration over compositions (rtol 1e-11), for every
    N in 0..8 and random rows (integer rows for the integer laws); negative control: the
    enumeration with the noise scale x 1.05 differs by far more than the tolerance."""
    noise = lambda x: _noise_logpdf(name, x)  # noqa: E731
    wrong = lambda x: _noise_logpdf(name, x, 1.05)  # noqa: E731
    integer = MECHS[name].integer
    worst, control = 0.0, np.inf
    for n in range(9):
        p = rng.dirichlet(np.ones(v))
        c = rng.multinomial(n, p)
        z = c + (rng.integers(-3, 4, v) if integer else rng.normal(0, 1.5, v))
        lp, g = _kernel(name, z, n, p)
        ref, gref = _brute(z, n, p, noise)
        worst = max(worst, abs(lp - ref) / max(1, abs(ref)))
        np.testing.assert_allclose(g, gref, rtol=1e-10, atol=1e-12)
        bad, _ = _brute(z, n, p, wrong)
        control = min(control, abs(lp - bad) / max(1, abs(bad)))
    assert worst < 1e-11
    assert control > 1e-4


def _mp_brute(z, n, p, logeta):
    """50-digit enumeration (mpmath)."""
    mpmath.mp.dps = 50
    v = len(p)
    total = mpmath.mpf(0)
    for c in itertools.product(range(n + 1), repeat=v):
        if sum(c) != n:
            continue
        term = mpmath.factorial(n)
        for j in range(v):
            term *= mpmath.power(mpmath.mpf(p[j]), c[j]) / mpmath.factorial(c[j])
            term *= mpmath.exp(logeta(mpmath.mpf(z[j]) - c[j]))
        total += term
    return float(mpmath.log(total))


def _mp_logeta(name, mech, x, f=1.0):
    """50-digit noise log-density at ``x``, the scale multiplied by ``f``."""
    if name == "laplace":
        b = mech.scale * f
        return -abs(x) / b - mpmath.log(2 * b)
    if name == "gaussian":
        s = mech.sigma * f
        return -(x**2) / (2 * s**2) - mpmath.log(mpmath.sqrt(2 * mpmath.pi) * s)
    if name == "geometric":
        a = mpmath.mpf(-mech.log_alpha) / f
        return mpmath.log(mpmath.tanh(a / 2)) - a * abs(x)
    s = mech.sigma * f
    norm = mpmath.log(mpmath.nsum(lambda k: mpmath.exp(-(k**2) / (2 * s * s)), [-50, 50]))
    return -(x**2) / (2 * s * s) - norm


@pytest.mark.parametrize(
    ("name", "mech", "z", "n", "p"),
    [
        # narrow noise far from the truth: terms differ by thousands of nats
        ("laplace", pmdp.Laplace(scale=1e-3), [8.0, 8.0, 8.0], 8, [0.2, 0.3, 0.5]),
        ("laplace", pmdp.Laplace(scale=1.0), [1e6, -1e6, 3.0, 2.0], 5, [0.1, 0.2, 0.3, 0.4]),
        ("laplace", pmdp.Laplace(scale=1e5), [2.0, -7.0, 1.0], 6, [0.6, 0.3, 0.1]),
        ("gaussian", pmdp.Gaussian(sigma=1e-2), [0.0, 8.0, 0.0], 8, [0.7, 0.1, 0.2]),
        ("gaussian", pmdp.Gaussian(sigma=1e4), [3.0, -2e4, 1.0], 7, [0.5, 0.25, 0.25]),
        ("geometric", pmdp.Geometric(epsilon=30.0), [8, 8, 8, 8], 8, [0.25] * 4),
        ("geometric", pmdp.Geometric(epsilon=0.01), [100, -50, 3], 4, [0.98, 0.01, 0.01]),
        ("discrete_gaussian", pmdp.DiscreteGaussian(sigma=0.05), [1, 0, 7], 7, [0.5, 0.4, 0.1]),
        # a probability exactly 0 and one tiny
        ("laplace", pmdp.Laplace(scale=0.5), [2.0, 1.0, 3.0], 6, [0.0, 1e-280, 1.0 - 1e-280]),
    ],
)
def test_extreme_against_mpmath(name, mech, z, n, p):
    """Finite and equal to a 50-digit enumeration (rtol 1e-10) at extreme noise scales and
    observations; the gradient finite. Negative control: the same mpmath sum at the noise
    scale x 1.05 differs."""
    lp, g = multinomial_noise_numpy(
        np.asarray(z, float), n, np.asarray(p), logpdf_kind(mech.numba_logpdf), mech.numba_params
    )
    logeta = functools.partial(_mp_logeta, name, mech)
    ref = _mp_brute(z, n, p, logeta)
    assert math.isfinite(float(lp)) and np.all(np.isfinite(g))
    assert abs(float(lp) - ref) <= 1e-10 * max(1.0, abs(ref))
    bad = _mp_brute(z, n, p, lambda x: logeta(x, 1.05))
    assert abs(float(lp) - bad) > 1e-6 * max(1.0, abs(bad))


def test_gradient_against_finite_differences(rng):
    """d log p / d p_j against central differences (step 1e-6, tolerance 1e-6 relative) on a
    Gaussian row; negative control: the gradient of the noise-ignoring multinomial log-pmf at
    the rounded cells differs from the finite differences."""
    m = MECHS["gaussian"]
    kind, par = logpdf_kind(m.numba_logpdf), m.numba_params
    p = np.array([0.15, 0.25, 0.35, 0.25])
    z = np.array([1.4, 2.2, 2.7, 0.3])
    n = 7
    _, g = multinomial_noise_numpy(z, n, p, kind, par)
    h = 1e-6
    fd = np.empty(4)
    for j in range(4):
        e = np.zeros(4)
        e[j] = h
        # the extension off the simplex is the same formula: evaluate it with the raw kernel
        from pymc_dp.math.multinomial_noise import _rows

        out = np.empty(2)
        gr = np.empty((2, 4))
        _rows(
            np.stack([z, z]), np.array([n, n], float), np.stack([p + e, p - e]), kind, par, out, gr
        )
        fd[j] = (out[0] - out[1]) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    plug = np.round(z) * 1.0 / p  # d/dp of the multinomial log-pmf at rounded cells
    assert np.max(np.abs(plug - fd) / np.abs(fd)) > 0.05


def test_op_gradient_verify_grad_and_graph(rng):
    """The Op inside a PyTensor graph: value equals the numpy path, and ``verify_grad`` holds
    (PyTensor's own random-projection check) with p = softmax(x); the numba lowering gives the
    same value and gradient as the numpy path."""
    m = MECHS["laplace"]
    kind, par = logpdf_kind(m.numba_logpdf), tuple(m.numba_params)
    z = np.array([[1.0, 2.5, -0.5], [0.2, 0.0, 4.0]])
    n = np.array([3.0, 4.0])

    def f(x):
        return MultinomialNoiseLogp(kind, par)(z, n, pt.special.softmax(x, axis=-1))[0]

    # the Python linker (the Op's perform): verify_grad compiles several small functions
    py = pytensor.compile.mode.Mode(linker="py", optimizer="fast_compile")
    pytensor.gradient.verify_grad(
        f, [rng.normal(size=(2, 3))], rng=rng, abs_tol=1e-7, rel_tol=1e-6, mode=py
    )
    x = pt.dmatrix("x")
    p = pt.special.softmax(x, axis=-1)
    lp = multinomial_noise_logp(z, n, p, kind, par)
    fn = pytensor.function([x], [lp, pytensor.grad(lp.sum(), x)])
    xv = rng.normal(size=(2, 3))
    pv = special.softmax(xv, axis=-1)
    val, gx = fn(xv)
    ref, gp = multinomial_noise_numpy(z, n, pv, kind, par)
    np.testing.assert_allclose(val, ref, rtol=1e-13)
    # chain rule through the softmax: dx = p * (gp - sum(p * gp))
    gref = pv * (gp - (pv * gp).sum(-1, keepdims=True))
    np.testing.assert_allclose(gx, gref, rtol=1e-10, atol=1e-13)


def test_edges_and_refusals():
    """N = 0 is the noise at z; a non-integer observation under integer noise is -inf; the
    numpy entry point refuses invalid inputs naming the argument; the Op gives -inf (not NaN)
    for p outside [0, 1] and NaN only for an invalid total."""
    m = MECHS["geometric"]
    kind, par = logpdf_kind(m.numba_logpdf), m.numba_params
    z = np.array([1.0, -2.0, 0.0])
    lp, g = multinomial_noise_numpy(z, 0, [0.2, 0.3, 0.5], kind, par)
    assert np.isclose(lp, _noise_logpdf("geometric", z).sum(), rtol=1e-14)
    assert np.all(g == 0)
    lp, _ = multinomial_noise_numpy([0.5, 1.0, 0.0], 1, [0.2, 0.3, 0.5], kind, par)
    assert lp == -np.inf
    for bad, match in [
        (dict(z=[np.nan, 0, 0]), "z"),
        (dict(n=2.5), "n must"),
        (dict(n=-1), "n must"),
        (dict(p=[0.5, 0.6, -0.1]), "p must"),
        (dict(p=[0.5, 0.6, 0.1]), "sum to 1"),
        (dict(p=[0.5, 0.5]), "categories"),
        (dict(kind=7), "kind"),
    ]:
        args = dict(z=[1, 0, 0], n=1, p=[0.2, 0.3, 0.5], kind=kind, params=par) | bad
        with pytest.raises(ValueError, match=match):
            multinomial_noise_numpy(**args)
    from pymc_dp.math.multinomial_noise import _rows

    out, gr = np.empty(3), np.empty((3, 3))
    zz = np.zeros((3, 3))
    pp = np.array([[0.2, 0.3, 0.5], [np.nan, 0.5, 0.5], [1.2, -0.1, -0.1]])
    _rows(zz, np.array([2.0, 2.0, 2.0]), pp, kind, par, out, gr)
    assert np.isfinite(out[0]) and out[1] == -np.inf and out[2] == -np.inf
    assert np.all(gr[1:] == 0)
    _rows(zz[:1], np.array([1.5]), pp[:1], kind, par, out[:1], gr[:1])
    assert np.isnan(out[0])


def test_larger_n_with_skipped_terms(rng):
    """N = 150, V = 3 (11476 compositions) with wide and narrow noise, where the convolution
    skips terms below e^-DROP of its largest: value and gradient still equal the enumeration
    (rtol 1e-11 and 1e-9). Negative control: the enumeration at p moved by 1% differs."""
    for mech in (pmdp.Laplace(scale=30.0), pmdp.Geometric(epsilon=3.0)):
        kind, par = logpdf_kind(mech.numba_logpdf), mech.numba_params
        p = np.array([0.15, 0.5, 0.35])
        z = rng.multinomial(150, p) + np.array([7, -11, 3])
        lp, g = multinomial_noise_numpy(z, 150, p, kind, par)
        ref, gref = _brute(z, 150, p, mech.logpdf)
        assert abs(lp - ref) <= 1e-11 * abs(ref)
        np.testing.assert_allclose(g, gref, rtol=1e-9)
        q = np.array([0.16, 0.49, 0.35])
        bad, _ = _brute(z, 150, q, mech.logpdf)
        assert abs(lp - bad) > 1e-6 * abs(bad)
