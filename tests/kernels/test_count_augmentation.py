"""The Skellam-Bessel augmentation (Schein et al. 2019, eqs. 13-16, corrected) against
the exact conditional P(y | z, mu) by brute force (corrections: docs/theory.md, "Errata of
the papers").

Each chi-square assertion has a false-alarm rate of 1e-6 (p-value threshold). Draws are the
final states of independent chains (one per count of a vectorised sweep) after ``BURN`` sweeps
started from the prior of the auxiliary rates; the integrated autocorrelation time of y is
1-5.5 sweeps in these settings (the errata), so the distance to stationarity after 60 sweeps
(order exp(-60/5.5) ~ 2e-5 in total variation) is far below what N = 10^5 draws can detect
(about 1e-2). Negative controls (the printed eq. 16 and the printed Bessel argument of eq. 12)
must be rejected at the same threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pymc_dp.kernels.bessel_sampling import INVERSION_MODE_MAX, sample_bessel
from pymc_dp.kernels.count_augmentation import (
    AuxRates,
    augment_true_counts,
    count_augmentation_sweep,
    init_aux_rates,
    redraw_aux_rates,
)

RATE = 1e-6
N = 100_000
BURN = 60
CASES = [(1, 3.0, 0.8), (-3, 5.0, 0.8), (9, 2.0, 0.6), (4, 10.0, 0.5)]


def exact_conditional(z, mu, alpha, y_max=400):
    """P(y | z, mu) on y = 0..y_max by brute force; the neglected tail is asserted < 1e-12."""
    y = np.arange(y_max + 1)
    logp = stats.poisson.logpmf(y, mu) + np.abs(z - y) * np.log(alpha)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    assert p[-50:].sum() < 1e-12
    return p


def chi2_pvalue(draws, p):
    """Chi-square GoF p-value of integer draws against pmf ``p``; bins with expected < 5 are
    pooled into one."""
    obs = np.bincount(draws, minlength=p.size)[: p.size].astype(float)
    assert obs.sum() == draws.size  # no draw beyond the support table
    exp = p * draws.size
    keep = exp >= 5.0
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(exp[keep], exp[~keep].sum())
    if e[-1] == 0.0:
        o, e = o[:-1], e[:-1]
    return stats.chisquare(o, e).pvalue


def run_chains(z, mu, alpha, sweep, seed):
    rng = np.random.default_rng(seed)
    zz = np.full(N, z)
    state = init_aux_rates(alpha, (N,), rng)
    for _ in range(BURN):
        y = sweep(zz, mu, alpha, state, rng)
    return y


def library_sweep(z, mu, alpha, state, rng):
    return count_augmentation_sweep(z, mu, alpha, state, rng)


def composed_sweep(z, mu, alpha, state, rng, *, gamma_rate=None, bessel_factor=1.0):
    """The same sweep written with numpy from its pieces; ``gamma_rate`` / ``bessel_factor``
    put the paper's misprints back (controls)."""
    if bessel_factor == 1.0:
        y, gp, gm = augment_true_counts(z, mu, state, rng)
    else:
        a = 2.0 * np.sqrt(bessel_factor * (state.lam_plus + mu) * state.lam_minus)
        m = sample_bessel(np.abs(z).astype(float), a, rng)
        y_plus = np.where(z <= 0, m, m + z)
        gm = np.where(z <= 0, m - z, m)
        y = rng.binomial(y_plus, mu / (mu + state.lam_plus))
        gp = y_plus - y
    if gamma_rate is None:
        new = redraw_aux_rates(gp, gm, alpha, rng)
    else:
        new = AuxRates(rng.gamma(1.0 + gp, 1.0 / gamma_rate), rng.gamma(1.0 + gm, 1.0 / gamma_rate))
    state.lam_plus, state.lam_minus = new.lam_plus, new.lam_minus
    return y


# factorization-like counts: rates far below 1, weak and strong noise (eps 0.5 and 2.5)
SPARSE_CASES = [(-1, 0.05, float(np.exp(-2.5))), (2, 0.3, float(np.exp(-0.5))), (0, 0.02, 0.6)]


@pytest.mark.parametrize(("z", "mu", "alpha"), CASES + SPARSE_CASES)
def test_sweep_matches_exact_conditional(z, mu, alpha):
    y = run_chains(z, mu, alpha, library_sweep, seed=abs(z) + 17)
    assert chi2_pvalue(y, exact_conditional(z, mu, alpha)) > RATE


def test_composed_pieces_match_exact_conditional():
    """The numpy composition of the pieces (the controls' baseline) is right too."""
    z, mu, alpha = CASES[0]
    y = run_chains(z, mu, alpha, composed_sweep, seed=5)
    assert chi2_pvalue(y, exact_conditional(z, mu, alpha)) > RATE


def test_control_printed_eq16_is_rejected():
    """Eq. 16 as printed: Gamma(1 + g, rate alpha/(1-alpha) + 1), at alpha = 0.8."""
    z, mu, alpha = CASES[0]

    def wrong(zz, m, a, s, r):
        return composed_sweep(zz, m, a, s, r, gamma_rate=a / (1.0 - a) + 1.0)

    y = run_chains(z, mu, alpha, wrong, seed=6)
    assert chi2_pvalue(y, exact_conditional(z, mu, alpha)) < RATE


def test_control_printed_bessel_argument_is_rejected():
    """Eq. 12 as printed: Bes(|tau|, 2 sqrt(2 lambda+ lambda-)), at alpha = 0.8."""
    z, mu, alpha = CASES[1]

    def wrong(zz, m, a, s, r):
        return composed_sweep(zz, m, a, s, r, bessel_factor=2.0)

    y = run_chains(z, mu, alpha, wrong, seed=7)
    assert chi2_pvalue(y, exact_conditional(z, mu, alpha)) < RATE


def test_per_count_rates_and_alphas_in_one_sweep():
    """Different (z, mu, alpha) per count in the same vectorised sweep: each matches."""
    rng = np.random.default_rng(11)
    zz = np.repeat([c[0] for c in CASES], N // 4)
    mu = np.repeat([c[1] for c in CASES], N // 4)
    al = np.repeat([c[2] for c in CASES], N // 4)
    state = init_aux_rates(al, zz.shape, rng)
    for _ in range(BURN):
        y = count_augmentation_sweep(zz, mu, al, state, rng)
    for k, (z, m, a) in enumerate(CASES):
        part = y[k * (N // 4) : (k + 1) * (N // 4)]
        assert chi2_pvalue(part, exact_conditional(z, m, a)) > RATE


def test_identities_and_edges():
    """Deterministic: z = y + g+ - g-, mu = 0 gives y = 0, bad inputs raise."""
    rng = np.random.default_rng(0)
    z = np.array([5, -4, 0, 30, -30])
    s = init_aux_rates(0.7, z.shape, rng)
    y, gp, gm = augment_true_counts(z, 2.0, s, rng)
    np.testing.assert_array_equal(y + gp - gm, z)
    assert (y >= 0).all() and (gp >= 0).all() and (gm >= 0).all()
    y0 = count_augmentation_sweep(z, 0.0, 0.7, s, rng)
    np.testing.assert_array_equal(y0, 0)
    for bad in (dict(mu=np.nan), dict(mu=-1.0), dict(alpha=1.0), dict(alpha=np.nan)):
        kw = {"mu": 1.0, "alpha": 0.5, **bad}
        with pytest.raises(ValueError):
            count_augmentation_sweep(z, kw["mu"], kw["alpha"], s, rng)
    with pytest.raises(ValueError):
        count_augmentation_sweep(z, 1.0, 0.5, init_aux_rates(0.5, (2,), rng), rng)


def test_validation_happens_before_any_update():
    """Out-of-range inputs raise ValueError naming the input, with the state untouched."""
    rng = np.random.default_rng(3)
    z = np.array([1, 2, 3])
    s = init_aux_rates(0.5, z.shape, rng)
    before = (s.lam_plus.copy(), s.lam_minus.copy())
    bad = [
        (np.array([1, 2, 2_000_000_000]), 1.0, s, "NU_MAX"),
        (z, np.array([1.0, 1.0, 1e19]), s, "A_MAX"),
        (z, 1.0, AuxRates(s.lam_plus, np.array([0.1, np.nan, 0.2])), "auxiliary"),
    ]
    for zz, mu, st, msg in bad:
        with pytest.raises(ValueError, match=msg):
            count_augmentation_sweep(zz, mu, 0.5, st, rng)
        np.testing.assert_array_equal(s.lam_plus, before[0])
        np.testing.assert_array_equal(s.lam_minus[[0, 2]], before[1][[0, 2]])
    for g in ([1, -1], [0.5, 1]):
        with pytest.raises(ValueError, match="non-negative integers"):
            redraw_aux_rates(g, [0, 0], 0.5, rng)


# ---- eqs. 13-15 given the auxiliary rates -----------------------------------------------------
# One step draws (y, g+, g-) exactly from P(. | z, mu, lambda+, lambda-): y has the law
# Pois(y; mu) Skellam(z - y; lambda+, lambda-) and g- the law Pois(g-; lambda-) Pois(z + g-;
# mu + lambda+), both normalised by brute force. The cases cover the Bessel draw's inversion
# and rejection regimes and the binomial's inversion (plain and flipped) and numba fallback.
# Controls: the same laws at both rates x c, c the smallest listed factor for which the
# expected chi-square noncentrality of y or of g- is >= 300; each marginal with that power must
# be rejected (in the sparse cases y is 0 almost surely under both, so g- carries the control).
GIVEN_RATES = [
    # (z, mu, lambda+, lambda-)
    (6, 6.0, 1.2, 1.5),  # dense-like: Bessel mode ~1
    (0, 0.05, 0.08, 0.09),  # sparse: mostly the exits at 0
    (-2, 0.3, 0.1, 0.2),  # negative z
    (0, 30.0, 5.0, 80.0),  # (lambda+ + mu) lambda- = 2800: Bessel mode 52, rejection
    (80, 60.0, 3.0, 0.5),  # y+ >= 80 > 64: numba's binomial
    (20, 40.0, 2.0, 1.0),  # p = 40/42: flipped binomial inversion
]


def test_given_rate_cases_cover_both_bessel_regimes():
    m1 = INVERSION_MODE_MAX + 1.0
    inv = [abs(z) for z, mu, lp, lm in GIVEN_RATES if (lp + mu) * lm < m1 * (m1 + abs(z))]
    assert 0 < len(inv) < len(GIVEN_RATES)


def exact_given_rates(z, mu, lp, lm, size=600):
    """(P(y), P(g-)) on 0..size-1 given the auxiliary rates; neglected tails < 1e-12."""
    k = np.arange(size)
    # P(g-) prop. to Pois(g-; lm) Pois(z + g-; mu + lp)
    log_g = stats.poisson.logpmf(k, lm) + stats.poisson.logpmf(z + k, mu + lp)
    p_g = np.exp(log_g - log_g.max())
    p_g /= p_g.sum()
    # P(y) prop. to Pois(y; mu) sum_g Pois(z - y + g; lp) Pois(g; lm)
    skel = np.exp(stats.poisson.logpmf(z - k[:, None] + k[None, :], lp)) @ np.exp(
        stats.poisson.logpmf(k, lm)
    )
    p_y = stats.poisson.pmf(k, mu) * skel
    p_y /= p_y.sum()
    assert p_y[-100:].sum() < 1e-12 and p_g[-100:].sum() < 1e-12
    return p_y, p_g


def _noncentrality(p, q, n=N):
    keep = n * q >= 5.0
    return n * float(np.sum((p[keep] - q[keep]) ** 2 / q[keep]))


@pytest.mark.parametrize(("z", "mu", "lp", "lm"), GIVEN_RATES)
def test_one_step_matches_exact_law_given_rates(z, mu, lp, lm):
    rng = np.random.default_rng(abs(z) * 31 + int(10 * lm))
    state = AuxRates(np.full(N, lp), np.full(N, lm))
    y, gp, gm = augment_true_counts(np.full(N, z), mu, state, rng)
    np.testing.assert_array_equal(y + gp - gm, z)
    p_y, p_g = exact_given_rates(z, mu, lp, lm)
    assert chi2_pvalue(y, p_y) > RATE
    assert chi2_pvalue(gm, p_g) > RATE
    # control: both rates x c, c the smallest listed factor giving one marginal power
    for c in (1.05, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0):
        q_y, q_g = exact_given_rates(z, mu, c * lp, c * lm)
        pairs = ((y, p_y, q_y), (gm, p_g, q_g))
        powered = [(d, q) for d, p, q in pairs if _noncentrality(p, q) >= 300]
        if powered:
            break
    assert powered
    for d, q in powered:
        assert chi2_pvalue(d, q) < RATE


# ---- Geweke joint-distribution test -----------------------------------------------------------
# Model: lam ~ Gamma(A, rate B), y ~ Pois(lam), lambda+- ~ Exp(mean alpha/(1-alpha)),
# g+- ~ Pois(lambda+-), z = y + g+ - g-. Each chain starts from an exact joint prior draw and
# alternates exact conditional updates of the joint (lam | y; (g+-, z) | y, lambda; the sweep:
# (y, g) | z, lam, lambda then lambda | g), so every iterate is a joint prior draw when the
# sweep is right: no burn-in. The final lam of N independent chains is KS-tested against its
# Gamma prior and the final z chi-square-tested against its prior predictive (rate 1e-6 each).
GEWEKE_A, GEWEKE_B, GEWEKE_ALPHA, GEWEKE_ITERS = 3.0, 0.5, 0.8, 25


def _geweke_final(sweep, seed, n=N):
    rng = np.random.default_rng(seed)
    a = GEWEKE_ALPHA
    lam = rng.gamma(GEWEKE_A, 1.0 / GEWEKE_B, n)
    y = rng.poisson(lam)
    state = init_aux_rates(a, (n,), rng)
    z = y
    for _ in range(GEWEKE_ITERS):
        lam = rng.gamma(GEWEKE_A + y, 1.0 / (GEWEKE_B + 1.0))
        z = y + rng.poisson(state.lam_plus) - rng.poisson(state.lam_minus)
        y = sweep(z, lam, a, state, rng)
    return lam, z


def _z_prior_predictive(z_min=-150, z_max=250):
    """P(z) = sum_y NegBin(y; A, B/(B+1)) 2Geo(z - y; alpha) by brute force."""
    ys = np.arange(0, 400)
    py = stats.nbinom.pmf(ys, GEWEKE_A, GEWEKE_B / (GEWEKE_B + 1.0))
    assert 1.0 - py.sum() < 1e-12
    zs = np.arange(z_min, z_max + 1)
    a = GEWEKE_ALPHA
    noise = (1 - a) / (1 + a) * a ** np.abs(zs[:, None] - ys[None, :])
    pz = noise @ py
    assert 1.0 - pz.sum() < 1e-10
    return zs, pz


def _geweke_pvalues(lam, z):
    p_lam = stats.kstest(lam, stats.gamma(GEWEKE_A, scale=1.0 / GEWEKE_B).cdf).pvalue
    zs, pz = _z_prior_predictive()
    assert z.min() >= zs[0] and z.max() <= zs[-1]
    p_z = chi2_pvalue(z - zs[0], pz)
    return p_lam, p_z


def test_geweke_joint_distribution():
    p_lam, p_z = _geweke_pvalues(*_geweke_final(library_sweep, seed=21))
    assert p_lam > RATE and p_z > RATE, (p_lam, p_z)


def test_geweke_control_printed_eq16_is_rejected():
    def wrong(zz, m, a, s, r):
        return composed_sweep(zz, m, a, s, r, gamma_rate=a / (1.0 - a) + 1.0)

    p_lam, p_z = _geweke_pvalues(*_geweke_final(wrong, seed=22))
    assert min(p_lam, p_z) < RATE, (p_lam, p_z)
