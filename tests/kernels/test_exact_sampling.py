"""Exact integer samplers (CKS 2020 Algorithms 1-3): laws, word-stream handling, ranges, speed.

Every statistical assertion has false-alarm rate <= 1e-6 and a negative control asserted to fail.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import pymc_dp.kernels.exact_sampling as es
from pymc_dp.kernels import discrete_gaussian as dg
from pymc_dp.kernels import discrete_laplace as dl
from pymc_dp.testing import (
    assert_gof,
    assert_rejects,
    chisquare_gof,
    clopper_pearson,
)

# ---- rational approximations ------------------------------------------------------------------


def _brute_best(x: Fraction, bound: int, direction: str) -> Fraction:
    cands = [Fraction(p, q) for q in range(1, bound + 1) for p in range(1, bound + 1)]
    if direction == "below":
        return max(c for c in cands if c <= x)
    return min(c for c in cands if c >= x)


def test_best_rational_matches_brute_force(rng):
    for _ in range(60):
        x = Fraction(int(rng.integers(1, 10**6)), int(rng.integers(1, 10**6)))
        if not Fraction(1, 40) <= x <= 40:
            continue
        for direction in ("below", "above"):
            got = es.best_rational(x, 40, direction)
            assert got == _brute_best(x, 40, direction), (x, direction)


def test_best_rational_keeps_exact_values_and_refuses_impossible():
    assert es.best_rational(Fraction(7, 3), 10, "below") == Fraction(7, 3)
    assert es.best_rational(Fraction(7, 3), 10, "above") == Fraction(7, 3)
    x = Fraction(1.25)
    assert es.best_rational(x, es.MAX_INT, "below") == x
    with pytest.raises(ValueError, match="no positive rational"):
        es.best_rational(Fraction(1, 10**30), es.MAX_INT, "below")
    with pytest.raises(ValueError):
        es.best_rational(Fraction(0), 10, "below")


@pytest.mark.parametrize("sigma", [1e-3, 0.05, 0.1, 0.5, 1.0, 2.0, 3.7, 13.7, 1e3, 1e6, 1e7])
def test_gaussian_rational_rounds_up_and_fits_int64(sigma):
    s2 = Fraction(sigma) ** 2
    t, m, d, ymax = dg.gaussian_rational(s2)
    got = Fraction(t * m, d)
    assert got >= s2  # more noise, never less
    assert float(got / s2 - 1) <= 2e-8
    assert t == math.floor(sigma) + 1
    assert d * ymax + m <= math.isqrt(2**63 - 1)
    assert 2 * d * t * m <= 2**62
    assert ymax >= float(s2 / t) + 40 * sigma


def test_gaussian_rational_exact_for_short_binary_values():
    for s in (0.5, 2.0, 3.0, 1.25):
        t, m, d, _ = dg.gaussian_rational(Fraction(s) ** 2)
        assert Fraction(t * m, d) == Fraction(s) ** 2


# ---- Bernoulli(exp(-gamma)) -------------------------------------------------------------------


@pytest.mark.parametrize(("num", "den"), [(1, 3), (3, 2), (0, 1), (7, 1), (5, 2**60)])
def test_bernoulli_exp_law(num, den, rng):
    n = 200_000
    b = es.sample_bernoulli_exp(num, den, n, rng=rng)
    assert set(np.unique(b)) <= {0, 1}
    p = math.exp(-num / den)
    k = int(b.sum())
    pval = stats.binomtest(k, n, p).pvalue
    assert_gof(pval, what=f"Bernoulli(exp(-{num}/{den}))")
    if 0.01 < p < 0.99:  # negative control: gamma x 1.05
        assert_rejects(stats.binomtest(k, n, math.exp(-1.05 * num / den)).pvalue)


# ---- discrete Laplace (CKS Algorithm 2) -------------------------------------------------------


@pytest.mark.parametrize(("s", "t"), [(1, 1), (1, 3), (3, 1), (7, 2), (1, 20)])
def test_discrete_laplace_gof_with_negative_control(s, t, rng):
    y = dl.sample_discrete_laplace(s, t, 200_000, rng=rng)
    assert y.dtype == np.int64
    rate = s / t
    assert_gof(chisquare_gof(y, lambda k: dl.logpmf(k, -rate)), what=f"DLap s={s} t={t}")
    assert_rejects(chisquare_gof(y, lambda k: dl.logpmf(k, -rate / 1.05)))


@pytest.mark.parametrize(("s", "t"), [(1, 10**9), (2**61, 3), (5, 5 * 2**50)])
def test_discrete_laplace_extreme_scales(s, t, rng):
    """Tail probabilities P(|Y| >= k) = 2 alpha^k / (1 + alpha) at its quartiles."""
    n = 100_000
    y = dl.sample_discrete_laplace(s, t, n, rng=rng)
    a = s / t
    alpha = math.exp(-a)
    if a > 40:  # alpha underflows: the noise is 0 except with probability < 1e-17
        assert np.all(y == 0)
        return
    for q in (0.75, 0.5, 0.25):
        # k with 2 alpha^k/(1+alpha) ~ q
        k = max(1, math.ceil(math.log(q * (1 + alpha) / 2) / -a))
        p = 2.0 * math.exp(-k * a) / (1.0 + alpha)
        lo, hi = clopper_pearson(int(np.sum(np.abs(y) >= k)), n)
        assert lo <= p <= hi


# ---- discrete Gaussian (CKS Algorithm 3) ------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.0, 13.7])
def test_discrete_gaussian_gof_with_negative_control(sigma, rng):
    params = dg.gaussian_rational(Fraction(sigma) ** 2)
    s_eff = math.sqrt(params[0] * params[1] / params[2])
    y = dg.sample_discrete_gaussian(*params, 200_000, rng=rng)
    assert_gof(chisquare_gof(y, lambda k: dg.logpmf(k, s_eff)), what=f"DG sigma={sigma}")
    assert_rejects(chisquare_gof(y, lambda k: dg.logpmf(k, 1.05 * s_eff)))


def test_discrete_gaussian_large_sigma_quantiles(rng):
    sigma = 1e5
    params = dg.gaussian_rational(Fraction(sigma) ** 2)
    s_eff = math.sqrt(params[0] * params[1] / params[2])
    n = 100_000
    y = dg.sample_discrete_gaussian(*params, n, rng=rng)
    for k in (0, 50_000, 150_000):
        kk = np.arange(-k, k + 1, dtype=np.float64)
        p_in = math.fsum(np.exp(dg.logpmf(kk, s_eff)).tolist())  # P(|Y| <= k), exact sum
        lo, hi = clopper_pearson(int(np.sum(np.abs(y) <= k)), n)
        assert lo <= p_in <= hi
        # negative control: the law with sigma x 1.05
        kk_bad = math.fsum(np.exp(dg.logpmf(kk, 1.05 * s_eff)).tolist())
        if k > 0:
            assert not lo <= kk_bad <= hi


# ---- word stream: reproducible, nothing discarded at buffer boundaries, secure source ---------


def test_chunk_boundaries_do_not_change_the_draws(monkeypatch):
    """A draw interrupted by the end of a buffer is re-run on the same words plus new ones."""
    ref_l = dl.sample_discrete_laplace(1, 3, 3000, rng=np.random.default_rng(5))
    ref_g = dg.sample_discrete_gaussian(
        *dg.gaussian_rational(Fraction(7, 2)), 3000, rng=np.random.default_rng(6)
    )
    monkeypatch.setattr(es, "_MAX_CHUNK", 5)
    small_l = dl.sample_discrete_laplace(1, 3, 3000, rng=np.random.default_rng(5))
    small_g = dg.sample_discrete_gaussian(
        *dg.gaussian_rational(Fraction(7, 2)), 3000, rng=np.random.default_rng(6)
    )
    np.testing.assert_array_equal(ref_l, small_l)
    np.testing.assert_array_equal(ref_g, small_g)


def test_secure_source_and_shapes():
    y = dl.sample_discrete_laplace(1, 1, (3, 4))
    assert y.shape == (3, 4) and y.dtype == np.int64
    assert dg.sample_discrete_gaussian(*dg.gaussian_rational(Fraction(4)), 0).shape == (0,)
    w = es.random_words(1000)
    assert w.dtype == np.int64 and np.unique(w).size > 990
    with pytest.raises(TypeError):
        es.random_words(3, rng=np.random.RandomState(0))


@pytest.mark.parametrize(
    ("s", "t", "err"),
    [(0, 1, ValueError), (1, 2**61 + 1, ValueError), (True, 1, TypeError), (1.0, 1, TypeError)],
)
def test_sampler_ranges_refused(s, t, err):
    with pytest.raises(err):
        dl.sample_discrete_laplace(s, t, 3)


def test_million_draws_in_one_call(rng):
    """10^6 draws in one vectorised call, from a generator and from os.urandom (no timing
    threshold: their speed is a benchmark, not a test)."""
    params = dg.gaussian_rational(Fraction(9))
    for y in (
        dl.sample_discrete_laplace(1, 1, 1_000_000, rng=rng),
        dg.sample_discrete_gaussian(*params, 1_000_000, rng=rng),
        dl.sample_discrete_laplace(1, 1, 1_000_000),  # os.urandom
    ):
        assert y.shape == (1_000_000,) and y.dtype == np.int64
        assert np.unique(y).size > 10  # not a constant fill


@pytest.mark.slow
@pytest.mark.parametrize("which", ["laplace", "gaussian"])
def test_million_draws_gof_fine_negative_control(which, rng):
    """10^6 draws: the law passes, and a 1% wrong scale is rejected (power at large N)."""
    n = 1_000_000
    if which == "laplace":
        y = dl.sample_discrete_laplace(2, 3, n, rng=rng)
        assert_gof(chisquare_gof(y, lambda k: dl.logpmf(k, -2 / 3)))
        assert_rejects(chisquare_gof(y, lambda k: dl.logpmf(k, -2 / 3 / 1.01)))
    else:
        params = dg.gaussian_rational(Fraction(5.5) ** 2)
        y = dg.sample_discrete_gaussian(*params, n, rng=rng)
        assert_gof(chisquare_gof(y, lambda k: dg.logpmf(k, 5.5)))
        assert_rejects(chisquare_gof(y, lambda k: dg.logpmf(k, 5.5 * 1.01)))


def test_one_source_for_every_release_draw(monkeypatch):
    """Every secure draw (exact samplers and float mechanisms) reads es.random_words: with the
    source replaced by a counter, each sampler consumes it (negative control: a sampler that
    bypassed it would leave the count at 0)."""
    import pymc_dp as pmdp

    calls = []
    real = es.random_words

    def counting(n, rng=None):
        calls.append(n)
        return real(n, rng)

    monkeypatch.setattr(es, "random_words", counting)
    for m in (pmdp.Laplace(scale=1.0), pmdp.Gaussian(sigma=1.0), pmdp.Geometric(epsilon=1.0)):
        calls.clear()
        kw = {} if isinstance(m, pmdp.Geometric) else {"allow_float": True}
        m.release(np.zeros(5), **kw)
        assert sum(calls) >= 5, type(m).__name__
    calls.clear()
    pmdp.DiscreteGaussian(sigma=2.0).release(np.zeros(5, dtype=np.int64))
    assert sum(calls) >= 5
    calls.clear()
    np.random.default_rng(0).random(5)  # control: other randomness does not touch the source
    assert calls == []


def test_secure_uniform_and_check_rng():
    u = es.secure_uniform((1000,))
    assert u.shape == (1000,) and ((u > 0) & (u < 1)).all() and np.unique(u).size == 1000
    r1 = es.secure_uniform(4, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(r1, es.secure_uniform(4, rng=np.random.default_rng(3)))
    assert es.secure_uniform(()).shape == ()
    es.check_rng(None)
    es.check_rng(np.random.default_rng(0))
    for bad in (0, np.random.RandomState(0), "seed"):
        with pytest.raises(TypeError, match="rng"):
            es.check_rng(bad)


def test_moved_samplers_still_importable_from_exact_sampling():
    assert es.sample_discrete_laplace is dl.sample_discrete_laplace
    assert es.sample_discrete_gaussian is dg.sample_discrete_gaussian
    assert es.gaussian_rational is dg.gaussian_rational
    assert es.MAX_LAPLACE_SCALE == dl.MAX_LAPLACE_SCALE == 2**50
    with pytest.raises(AttributeError):
        es.no_such_name
