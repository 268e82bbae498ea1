"""DataAugmentation on censored (projected) releases: exact posteriors by enumeration.

Model: ``p ~ Beta(1, 1)``, ``x_i ~ Bernoulli(p)`` for ``n = 8`` records, and the count
``S = sum x`` released as ``z = clip(S + noise, 0, n)`` hitting a bound. The exact posterior is
a mixture over the true count: ``P(s | z) ∝ C(n, s) B(1 + s, 1 + n - s) L(z | s)`` with the
censored likelihood ``L`` (log CDF at the lower bound, log survival at the upper bound), and
``p | s ~ Beta(1 + s, 1 + n - s)``. Every path of the step runs: the additive numba kernel,
SOMA, and the generic scan (two releases of different families), plus a 2-D count table.

Statistical assertions: :func:`pymc_dp.testing.mcse_check` (|mean - exact| <= 4.89 MCSE, a
false-alarm rate of 1e-6 per assertion) on the count and on ``p``. Negative control in every
test: the same draws against the posterior that treats the clipped value as unclipped (plain
density) must be rejected by the same check (for Gaussian and discrete Gaussian noise the two
posteriors differ by 0.3-0.4 in the mean count, about 8-15 MCSE at the run lengths used; for
Laplace and geometric noise they coincide whenever the count is inside the bounds, so those
mechanisms are not used here).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods import STEP_METHODS
from scipy.special import betaln, comb, logsumexp

from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.gaussian import Gaussian
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.step_methods.data_augmentation import DataAugmentation
from pymc_dp.testing import mcse_check

SEED = 20261125
N = 8


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Register DataAugmentation the way pymc_dp.step_methods.register_step_methods does."""
    added = DataAugmentation not in STEP_METHODS
    if added:
        STEP_METHODS.insert(0, DataAugmentation)
    yield
    if added:
        STEP_METHODS.remove(DataAugmentation)


def _sample(model, draws=2500, **kw):
    with model:
        return pm.sample(
            draws,
            tune=500,
            chains=2,
            cores=1,
            random_seed=SEED,
            progressbar=False,
            compute_convergence_checks=False,
            **{"var_names": [v.name for v in model.free_RVs], **kw},  # records too
        )


def _weights(loglik):
    """P(s | z) over s = 0..N for Beta(1, 1) records and the given log-likelihood of s."""
    s = np.arange(N + 1)
    logw = np.log(comb(N, s)) + betaln(1 + s, 1 + N - s) + loglik
    return np.exp(logw - logsumexp(logw))


def _assert_exact(idata, w_cens, w_plain):
    s = np.arange(N + 1)
    s_draws = idata.posterior["x"].values.sum(-1)
    p_draws = idata.posterior["p"].values
    res_s = mcse_check(s_draws, float(np.sum(w_cens * s)))
    res_p = mcse_check(p_draws, float(np.sum(w_cens * (1 + s) / (N + 2))))
    print(f"count z={res_s.z:.2f} ess={res_s.ess:.0f}; p z={res_p.z:.2f}")
    assert res_s.passed and res_p.passed
    control = mcse_check(s_draws, float(np.sum(w_plain * s)))
    print(f"control (unclipped density) z={control.z:.2f}")
    assert not control.passed


def _model(mech, z, **release_kw):
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N)
        Release("z", x.sum(), mech, observed=z, lower=0, upper=N, **release_kw)
    return model, x


@pytest.mark.parametrize(
    ("mech", "z"),
    [(Gaussian(sigma=2.0), 0.0), (DiscreteGaussian(sigma=2.0), N)],
    ids=["gauss", "dgauss"],
)
def test_additive_path_exact_posterior(mech, z):
    model, x = _model(mech, z)
    with model:
        step = DataAugmentation([x])
    spec = step._blocks[0]
    assert not spec.generic
    side = -1.0 if z == 0 else 1.0
    assert spec.params[0, 0] == side  # row [side, *mechanism params]
    assert spec.logpdf is mech.numba_censored_logpdf
    s = np.arange(N + 1)
    tail = mech.logcdf(z - s) if z == 0 else mech.logsf(z - s)
    _assert_exact(_sample(model), _weights(tail), _weights(mech.logpdf(z - s)))


def test_soma_path_exact_posterior():
    mech = Gaussian(sigma=2.0)
    model, x = _model(mech, 0.0)
    with model:
        step = DataAugmentation([x], method="soma")
    s = np.arange(N + 1)
    idata = _sample(model, step=[step])
    _assert_exact(idata, _weights(mech.logcdf(-s)), _weights(mech.logpdf(-s)))


def test_generic_path_exact_posterior():
    """A clipped Gaussian count and a Laplace count of the first half (two families: the
    generic scan). Enumerate (s1, s2), the counts of the two halves."""
    gauss, lap, b_obs = Gaussian(sigma=2.0), Laplace(scale=1.0), 1.0
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        x = pm.Bernoulli("x", p=p, shape=N)
        Release("z", x.sum(), gauss, observed=0.0, lower=0, upper=N)
        Release("b", x[:4].sum(), lap, observed=b_obs)
        step = DataAugmentation([x])
    assert step._blocks[0].generic
    s1, s2 = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    s = s1 + s2
    base = np.log(comb(4, s1)) + np.log(comb(4, s2)) + betaln(1 + s, 1 + N - s)
    base = base + lap.logpdf(b_obs - s1)

    def mean_s(loglik):
        w = np.exp(base + loglik - logsumexp(base + loglik))
        return float(np.sum(w * s)), float(np.sum(w * (1 + s) / (N + 2)))

    idata = _sample(model, step=[step])
    s_draws = idata.posterior["x"].values.sum(-1)
    ms, mp = mean_s(gauss.logcdf(0.0 - s))
    assert mcse_check(s_draws, ms).passed
    assert mcse_check(idata.posterior["p"].values, mp).passed
    assert not mcse_check(s_draws, mean_s(gauss.logpdf(0.0 - s))[0]).passed


def _tables(n):
    """All 2x2 count tables of n records (c00, c01, c10, c11) and their multinomial log
    coefficients."""
    out = [
        (a, b, c, n - a - b - c)
        for a in range(n + 1)
        for b in range(n + 1 - a)
        for c in range(n + 1 - a - b)
    ]
    t = np.array(out)
    from scipy.special import gammaln

    return t, gammaln(n + 1) - gammaln(t + 1).sum(1)


def test_table_statistic_exact_posterior():
    """Two binary features per record, p_a, p_b ~ Beta(1, 1); the 2x2 table of counts is
    released with discrete Gaussian noise and projected to [0, n] per cell. Enumerate the
    tables: P(t | z) ∝ multinomial(t) B(1 + Sa, 1 + n - Sa) B(1 + Sb, 1 + n - Sb) L(z | t)."""
    n = 6
    mech = DiscreteGaussian(sigma=1.5)
    z = np.array([[0, 0], [2, 6]])
    with pm.Model() as model:
        pa = pm.Beta("pa", 1.0, 1.0)
        pb = pm.Beta("pb", 1.0, 1.0)
        a = pm.Bernoulli("a", p=pa, shape=n)
        b = pm.Bernoulli("b", p=pb, shape=n)
        onehot = pt.eq(a[:, None, None], pt.arange(2)[:, None]) * pt.eq(
            b[:, None, None], pt.arange(2)[None, :]
        )
        Release("tab", onehot.sum(0), mech, observed=z, lower=0, upper=n)
        step = DataAugmentation([a, b])
    assert not step._blocks[0].generic
    t, logm = _tables(n)
    sa, sb = t[:, 2] + t[:, 3], t[:, 1] + t[:, 3]
    base = logm + betaln(1 + sa, 1 + n - sa) + betaln(1 + sb, 1 + n - sb)
    zf = z.ravel()
    cens = np.where(
        zf == 0, mech.logcdf(zf - t), np.where(zf == n, mech.logsf(zf - t), mech.logpdf(zf - t))
    ).sum(1)
    plain = mech.logpdf(zf - t).sum(1)

    def mean_c00(loglik):
        w = np.exp(base + loglik - logsumexp(base + loglik))
        return float(np.sum(w * t[:, 0])), float(np.sum(w * (1 + sa) / (n + 2)))

    idata = _sample(model, step=[step])
    post = idata.posterior
    c00 = ((post["a"].values == 0) & (post["b"].values == 0)).sum(-1)
    m00, mpa = mean_c00(cens)
    assert mcse_check(c00, m00).passed
    assert mcse_check(post["pa"].values, mpa).passed
    assert not mcse_check(c00, mean_c00(plain)[0]).passed


@pytest.mark.parametrize("censored", [False, True], ids=["plain", "censored"])
def test_three_way_table_exact_posterior(censored):
    """Three binary features per record, a 2x2x2 count table of n = 4 records released with
    discrete Gaussian noise, plain or projected to [0, n]. Reference: enumeration of all
    8^4 record vectors, weight B(1+S_j, 1+n-S_j) per feature times the release likelihood.
    Control: the table with its first and last axes swapped (a wrong flattening order), about
    19-25 MCSE away (the censored-versus-plain control is in the tests above)."""
    n = 4
    mech = DiscreteGaussian(sigma=0.8)
    z = np.array([[[0, 0], [3, 0]], [[1, 0], [0, 0]]]) if censored else None
    if not censored:
        z = np.array([[[1, 0], [2, -1]], [[1, 0], [0, 0]]])
    bounds = {"lower": 0, "upper": n} if censored else {}
    with pm.Model() as model:
        ps = pm.Beta("ps", 1.0, 1.0, shape=3)
        f = pm.Bernoulli("f", p=ps, shape=(n, 3))
        onehot = (
            pt.eq(f[:, 0, None, None, None], pt.arange(2)[:, None, None])
            * pt.eq(f[:, 1, None, None, None], pt.arange(2)[None, :, None])
            * pt.eq(f[:, 2, None, None, None], pt.arange(2)[None, None, :])
        )
        Release("tab", onehot.sum(0), mech, observed=z, **bounds)
        step = DataAugmentation([f])
    assert not step._blocks[0].generic
    # enumeration: cell index of each record = 4 f0 + 2 f1 + f2
    cells = np.array(np.meshgrid(*[np.arange(8)] * n, indexing="ij")).reshape(n, -1).T
    bits = (cells[..., None] >> np.array([2, 1, 0])) & 1  # (M, n, 3)
    tables = np.stack([(cells == c).sum(1) for c in range(8)], axis=1)  # (M, 8) C order
    sj = bits.sum(1)
    base = betaln(1 + sj, 1 + n - sj).sum(1)
    zf = z.ravel()

    def lik(tab, cens):
        r = zf - tab
        if not cens:
            return mech.logpdf(r).sum(1)
        return np.where(
            zf == 0, mech.logcdf(r), np.where(zf == n, mech.logsf(r), mech.logpdf(r))
        ).sum(1)

    def mean_cell(loglik, cell):
        w = np.exp(base + loglik - logsumexp(base + loglik))
        return float(np.sum(w * tables[:, cell]))

    idata = _sample(model, step=[step])
    fd = idata.posterior["f"].values
    cell_d = 4 * fd[..., 0] + 2 * fd[..., 1] + fd[..., 2]
    c100 = (cell_d == 4).sum(-1)  # table[1, 0, 0]
    exact = mean_cell(lik(tables, censored), 4)
    res = mcse_check(c100, exact)
    swapped = tables.reshape(-1, 2, 2, 2).transpose(0, 3, 2, 1).reshape(-1, 8)
    wrong = mcse_check(c100, mean_cell(lik(swapped, censored), 4))
    print(f"3-way table: z={res.z:.2f} ess={res.ess:.0f}; swapped-axes control z={wrong.z:.2f}")
    assert res.passed
    assert not wrong.passed


def test_uncensored_blocks_unchanged_and_user_mechanism_takes_generic_path():
    """A block without a censored release keeps the mechanism's own kernel and parameter
    rows (no side column); a censored release of a user subclass whose numba density differs
    from the built-in's gets no built-in censored kernel and runs through the generic path."""
    from pymc_dp.mechanisms.base import _NOISE_DISTS, register_noise_dist

    mech = Gaussian(sigma=2.0)
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=N)
        Release("z", x.sum(), mech, observed=1.5)
        spec = DataAugmentation([x])._blocks[0]
    assert spec.logpdf is mech.numba_logpdf
    np.testing.assert_array_equal(spec.params, mech.numba_params[None, :])

    class MyGaussian(Gaussian):
        @property
        def numba_logpdf(self):  # same law, another kernel object
            return Gaussian(sigma=1.0).numba_logpdf

    register_noise_dist(MyGaussian, _NOISE_DISTS[Gaussian])
    try:
        with pm.Model():
            x = pm.Bernoulli("x", p=0.5, shape=N)
            Release("z", x.sum(), MyGaussian(sigma=2.0), observed=0.0, lower=0, upper=N)
            step = DataAugmentation([x])
        assert step._blocks[0].generic
    finally:
        del _NOISE_DISTS[MyGaussian]
