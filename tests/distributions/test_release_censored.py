"""Release(..., lower=, upper=): the censored likelihood of a projected (clipped) release.

The reference is a brute-force numpy evaluation that does not use the mechanisms' tail code:
scipy's ``norm``/``laplace`` CDFs for the continuous mechanisms, and an explicit log-sum-exp of
the mechanism's pmf over the integers (truncated where the neglected mass is below 1e-300) for
the integer ones. Statistics are scalars, vectors and 2-D / 3-D tables. Deterministic except the
forward-draw check, whose false-alarm rate is stated there.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace

MECHS = {
    "laplace": Laplace(scale=1.3),
    "gaussian": Gaussian(sigma=2.0),
    "geometric": Geometric(epsilon=0.5),
    "discrete_gaussian": DiscreteGaussian(sigma=2.5),
}


def _brute_cdf(mech, x):
    """log P(noise <= x), independent of the mechanisms' logcdf code."""
    if isinstance(mech, Gaussian):
        return stats.norm.logcdf(x, scale=mech.sigma)
    if isinstance(mech, Laplace):
        return stats.laplace.logcdf(x, scale=mech.scale)
    y = np.arange(-3000, 3001, dtype=np.float64)  # pmf below exp(-700) beyond
    lp = mech.logpdf(y)
    return np.array([logsumexp(lp[y <= v]) for v in np.ravel(x)]).reshape(np.shape(x))


def _brute_sf(mech, x):
    """log P(noise >= x) (>=: matters for the integer laws)."""
    if isinstance(mech, Gaussian | Laplace):
        return _brute_cdf(mech, -np.asarray(x))
    y = np.arange(-3000, 3001, dtype=np.float64)
    lp = mech.logpdf(y)
    return np.array([logsumexp(lp[y >= v]) for v in np.ravel(x)]).reshape(np.shape(x))


def _brute_logp(mech, z, T, lower, upper):
    z, T = np.broadcast_arrays(np.asarray(z, float), np.asarray(T, float))
    lo = np.broadcast_to(-np.inf if lower is None else np.asarray(lower, float), z.shape)
    hi = np.broadcast_to(np.inf if upper is None else np.asarray(upper, float), z.shape)
    out = np.array(mech.logpdf(z - T), dtype=float)
    at_lo, at_hi = z == lo, z == hi
    out[at_lo] = _brute_cdf(mech, (z - T)[at_lo])
    out[at_hi] = _brute_sf(mech, (z - T)[at_hi])
    return out


def _case(kind, shape):
    """Released values with cells on each bound, and bounds of the given kind."""
    rng = np.random.default_rng(7)
    T = rng.integers(0, 9, size=shape).astype(np.float64)
    lower = 0.0 if kind in ("lower", "both") else None
    upper = 8.0 if kind in ("upper", "both") else None
    z = rng.integers(0, 9, size=shape).astype(np.float64)
    flat = z.reshape(-1)
    if lower is None:
        flat[flat == 0] = 1.0
    if upper is None:
        flat[flat == 8] = 7.0
    if lower is not None:
        flat[0] = lower
    if upper is not None:
        flat[-1] = upper
    return T, z, lower, upper


@pytest.mark.parametrize("name", list(MECHS))
@pytest.mark.parametrize(
    ("kind", "shape"), [("lower", ()), ("upper", (5,)), ("both", (3, 4)), ("both", (2, 3, 2))]
)
def test_censored_logp_matches_brute_force(name, kind, shape):
    mech = MECHS[name]
    T, z, lower, upper = _case(kind, shape)
    dtype = "int64" if mech.integer else "float64"
    stat = pt.tensor("T", shape=shape, dtype=dtype)
    rv = Release.dist(stat, mech, lower=lower, upper=upper)
    got = pm.logp(rv, z.astype(dtype)).eval({stat: T.astype(dtype)})
    want = _brute_logp(mech, z, T, lower, upper)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)
    assert np.shape(got) == shape
    # negative control: the uncensored density differs at the bound cells
    plain = pm.logp(Release.dist(stat, mech), z.astype(dtype)).eval({stat: T.astype(dtype)})
    assert not np.allclose(plain, want, rtol=1e-6)


def test_censored_in_model_with_table_statistic_and_array_bounds():
    """A 2-D count table of categorical records with per-column upper bounds (the records'
    count n) and a lower bound of 0, in a model; logp via the model against brute force."""
    n, r, c = 9, 2, 3
    mech = Geometric(epsilon=1.0, sensitivity=2)  # a count table: a record moves two cells
    z = np.array([[0, 3, 9], [2, 0, 4]])
    upper = np.array([9, 9, 9])
    with pm.Model() as model:
        a = pm.Categorical("a", p=np.ones(r) / r, shape=n)
        b = pm.Categorical("b", p=np.ones(c) / c, shape=n)
        table = pt.eq(a[:, None, None], pt.arange(r)[:, None]) * pt.eq(
            b[:, None, None], pt.arange(c)[None, :]
        )
        tab = Release("tab", table.sum(0), mech, observed=z, lower=0, upper=upper)
    av = np.array([0, 1, 0, 1, 0, 0, 1, 1, 0])
    bv = np.array([0, 1, 2, 2, 1, 0, 0, 2, 2])
    T = np.zeros((r, c))
    np.add.at(T, (av, bv), 1)
    got = model.compile_logp(vars=[tab], sum=False)({"a": av, "b": bv})[0]
    np.testing.assert_allclose(got, _brute_logp(mech, z, T, 0, upper), rtol=1e-11)
    assert tab.ndim == 2


def test_laplace_boundary_term_is_density_only_inside():
    """Laplace: log P(Y <= lower - T) - log p(lower - T) = log b exactly while T >= lower,
    not for T below the bound; Gaussian: never a constant offset."""
    b = 1.3
    lap = Laplace(scale=b)
    T = np.array([0.0, 2.0, 5.0, -1.0, -4.0])
    d = lap.logcdf(0.0 - T) - lap.logpdf(0.0 - T)
    np.testing.assert_allclose(d[:3], np.log(b), rtol=1e-14)
    assert np.all(np.abs(d[3:] - np.log(b)) > 1e-3)
    g = Gaussian(sigma=2.0)
    dg = g.logcdf(0.0 - T[:3]) - g.logpdf(0.0 - T[:3])
    assert np.ptp(dg) > 0.1


def test_forward_draws_are_clipped():
    """Draws lie in [lower, upper] and hit each bound with its probability.

    The frequency of ``z == lower`` among N = 20000 draws (T = 1, lower = 0, Gaussian sigma 2)
    is within 4.89 binomial SE of P(noise <= -1) (false-alarm rate 1e-6); the unclipped
    release would never produce exactly 0 (control)."""
    mech = Gaussian(sigma=2.0)
    T = pt.as_tensor(np.ones(20000))
    draws = pm.draw(Release.dist(T, mech, lower=0.0, upper=4.0), random_seed=3)
    assert draws.min() >= 0.0 and draws.max() <= 4.0
    p = stats.norm.cdf(-1.0, scale=2.0)
    freq = np.mean(draws == 0.0)
    assert abs(freq - p) <= 4.89 * np.sqrt(p * (1 - p) / draws.size)
    plain = pm.draw(Release.dist(T, mech), random_seed=3)
    assert np.mean(plain == 0.0) == 0.0
    ints = pm.draw(
        Release.dist(
            pt.as_tensor(np.zeros(50, "int64")), Geometric(epsilon=0.3), lower=-2, upper=2
        ),
        random_seed=4,
    )
    assert ints.dtype == np.int64 and ints.min() == -2 and ints.max() == 2


def test_validation():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=6)
        with pytest.raises(ValueError, match=r"observed values of release 'z1'.*outside"):
            Release("z1", x.sum(), Laplace(scale=1.0), observed=7.0, lower=0, upper=6)
        with pytest.raises(ValueError, match=r"observed.*outside"):
            Release("z2", x.sum(), Laplace(scale=1.0), observed=-0.5, lower=0)
        with pytest.raises(ValueError, match="lower must be < upper"):
            Release("z3", x.sum(), Laplace(scale=1.0), observed=1.0, lower=3, upper=3)
        with pytest.raises(ValueError, match="lower must be integers"):
            Release("z4", x.sum(), Geometric(epsilon=1.0), observed=1, lower=0.5)
        with pytest.raises(ValueError, match="upper must not be NaN"):
            Release("z5", x.sum(), Laplace(scale=1.0), observed=1.0, upper=np.nan)
        with pytest.raises(ValueError, match="does not broadcast"):
            Release("z6", x[:3], Laplace(scale=1.0), observed=np.ones(3), upper=np.ones(4))

        class NoTails(Laplace):
            logcdf = Mechanism.logcdf
            logsf = Mechanism.logsf
            logcdf_pt = Mechanism.logcdf_pt
            logsf_pt = Mechanism.logsf_pt
            numba_logcdf = Mechanism.numba_logcdf
            numba_logsf = Mechanism.numba_logsf

        with pytest.raises(NotImplementedError, match=r"censored.*logcdf"):
            Release("z7", x.sum(), NoTails(scale=1.0), observed=0.0, lower=0)
        # infinite bounds mean "no bound" in that cell
        z9 = Release("z9", x[:2], Laplace(scale=1.0), observed=[0.0, 3.0], lower=[0.0, -np.inf])
        assert z9.owner.op.censored


# ------------------------------------------------------------------ Privatized(lower, upper)
@pytest.mark.parametrize("name", list(MECHS))
def test_privatized_censored_binomial_marginal_matches_brute_force(name):
    """Privatized(Binomial(6, p), lower=0, upper=6): log sum_y p(y) L(z | y), L censored."""
    from pymc_dp.distributions.privatized import Privatized

    mech = MECHS[name]
    n, p = 6, 0.35
    z = np.array([0, 2, 6, 6, 0, 5])
    z = (
        z.astype(np.int64)
        if mech.integer
        else z.astype(np.float64) + np.array([0, 0.3, 0, 0, 0, -0.4])
    )
    with pm.Model() as model:
        pp = pm.Beta("pp", 2.0, 2.0)
        obs = Privatized("obs", pm.Binomial.dist(n=n, p=pp), mech, observed=z, lower=0, upper=n)
    got = model.compile_logp(vars=[obs], sum=False)({"pp_logodds__": np.log(p / (1 - p))})[0]
    y = np.arange(n + 1)
    base = stats.binom.logpmf(y, n, p)
    want = np.array([logsumexp(base + _brute_logp(mech, zi, y, 0, n)) for zi in z])
    np.testing.assert_allclose(got, want, rtol=1e-11)
    # control: the plain marginal differs at the clipped cells
    plain = np.array([logsumexp(base + mech.logpdf(zi - y)) for zi in z])
    assert np.all(np.abs(plain - want)[[0, 2, 3, 4]] > 1e-3)


def test_privatized_censored_draws_and_refusals():
    from pymc_dp.distributions.privatized import Privatized

    d = pm.draw(
        Privatized.dist(pm.Bernoulli.dist(0.5), Geometric(epsilon=0.3), lower=0, upper=1,
                        shape=(200,)),
        random_seed=5,
    )  # fmt: skip
    assert d.dtype == np.int64 and set(np.unique(d)) <= {0, 1}
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 1.0)
        with pytest.raises(NotImplementedError, match="finite support"):
            Privatized("a", pm.Poisson.dist(lam), Geometric(epsilon=1.0), observed=[0], lower=0)
        with pytest.raises(NotImplementedError, match="marginalize=False"):
            Privatized(
                "b", pm.Binomial.dist(3, 0.5), Geometric(epsilon=1.0), observed=[0],
                lower=0, marginalize=False,
            )  # fmt: skip
        with pytest.raises(ValueError, match="outside"):
            Privatized("c", pm.Binomial.dist(3, 0.5), Geometric(epsilon=1.0), observed=[4],
                       lower=0, upper=3)  # fmt: skip
