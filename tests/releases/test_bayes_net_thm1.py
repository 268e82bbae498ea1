"""Zhang et al. (2016) Thm. 1 as a check: the KL loss of Alg. 1 stays under the theorem's bound.

Alg. 1 releases the count tables of a Beta-Bernoulli network with ``Lap(2|I|/epsilon)`` noise,
truncated to ``[0, n]``; the private posterior is ``Beta(alpha + Z1, beta + Z2)`` per row. The
utility is ``f(Z) = sum_{i,j} KL(xi_ij(. | D) || xi'_ij(. | D))`` (true posterior first), a sum
of ``m = sum_i 2^{|pi_i|}`` independent terms. Thm. 1 (McDiarmid): with probability at least
``1 - delta``,

    f(Z) <= U + sqrt(ln(1/delta) / 2 * sum_{i,j} c_ij^2),
    c_ij = (2n + 1) ln[(alpha_ij + n + 1)(beta_ij + n + 1)],
    U = sum_{i,j} n ln[(alpha_ij + Delta alpha_ij)(beta_ij + Delta beta_ij)],

our reading of the printed statement (the text conversion lost its layout; the refined bound
for ``n >= 2|I|/epsilon`` is not legible and is not checked). The check: over ``M`` independent
releases of one dataset, the number of releases whose KL exceeds the bound at ``delta`` is at
most the upper 1e-6 quantile of ``Binomial(M, delta)`` (false-alarm rate 1e-6 if the theorem
holds). Negative control: a bound with too small a constant (the McDiarmid term with ``c_ij``
divided by 1000 around the exact mean KL, i.e. essentially the mean) is exceeded far more
often than ``delta`` and the same check rejects it. The closed-form Beta KL is checked against
quadrature first.

Measured (seed 1, for the claims table): bound 1061 (U = 368, McDiarmid term 694) against the
empirical 95% quantile of the KL 29 and its mean 13: the theorem holds with a factor of about 36
to spare at this size (n = 20, epsilon = 1, |I| = 3).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

import pymc_dp as pmdp
from pymc_dp.releases import DiscreteBayesNet, bayes_net_count_tables

N_REC, EPS, DELTA, M = 20, 1.0, 0.05, 20_000
# naive Bayes y -> x0, x1 (|I| = 3); Beta rows: y, (x0 | y = 0, 1), (x1 | y = 0, 1): m = 5
NET = DiscreteBayesNet({"y": 2, "x0": 2, "x1": 2}, {"x0": ["y"], "x1": ["y"]})


def beta_kl(a1, b1, a2, b2):
    """KL(Beta(a1, b1) || Beta(a2, b2)), closed form."""
    return (
        special.betaln(a2, b2)
        - special.betaln(a1, b1)
        + (a1 - a2) * special.digamma(a1)
        + (b1 - b2) * special.digamma(b1)
        + (a2 - a1 + b2 - b1) * special.digamma(a1 + b1)
    )


def _kl_integrand(t, a1, b1, a2, b2):
    lp, lq = stats.beta.logpdf(t, a1, b1), stats.beta.logpdf(t, a2, b2)
    return np.exp(lp) * (lp - lq)


def test_beta_kl_matches_quadrature():
    for a1, b1, a2, b2 in [(3.0, 5.0, 1.5, 7.0), (21.0, 1.0, 4.0, 18.0), (1.0, 1.0, 2.0, 2.0)]:
        ref, err = integrate.quad(
            _kl_integrand, 0, 1, args=(a1, b1, a2, b2), limit=200, epsabs=1e-12, epsrel=1e-10
        )
        assert err < 1e-8
        assert beta_kl(a1, b1, a2, b2) == pytest.approx(ref, rel=1e-7, abs=1e-10)
    assert not beta_kl(3.0, 5.0, 1.5, 7.0) == pytest.approx(beta_kl(3.0, 5.0, 1.5, 7.5))


def _counts(rng):
    """Per Beta row (alpha-count, beta-count) of a naive Bayes dataset with 2 features: the
    rows of ``bayes_net_count_tables``, ones first."""
    y = rng.random(N_REC) < 0.5
    x = rng.random((N_REC, 2)) < np.where(y[:, None], 0.8, 0.3)
    t = bayes_net_count_tables(np.column_stack([y, x]).astype(np.int64), NET)
    rows = np.array([t["y"], *t["x0"], *t["x1"]], dtype=np.float64)  # (count of 0, of 1)
    return rows[:, ::-1]  # (m, 2): Delta alpha, Delta beta


def _kl_losses(counts, rng):
    """f(Z) for M independent Alg. 1 releases (prior Beta(1, 1) everywhere): the library's
    Laplace mechanism at the network's Lemma 1 sensitivity 2|I|, clipped to [0, n]."""
    mech = pmdp.Laplace(epsilon=EPS, sensitivity=NET.sensitivity()[0])
    noisy = mech.release(np.broadcast_to(counts, (M, *counts.shape)), rng=rng, allow_float=True)
    z = np.clip(noisy, 0.0, N_REC)
    a, b = 1.0 + counts[:, 0], 1.0 + counts[:, 1]
    return beta_kl(a, b, 1.0 + z[..., 0], 1.0 + z[..., 1]).sum(axis=1)


def _binomial_upper(m, p, alpha=1e-6):
    return int(stats.binom.ppf(1.0 - alpha, m, p))


def test_alg1_kl_loss_stays_under_theorem_1(rng):
    counts = _counts(rng)
    f = _kl_losses(counts, rng)
    n = N_REC
    c = (2 * n + 1) * np.log((1.0 + n + 1) * (1.0 + n + 1)) * np.ones(len(counts))
    u = float(np.sum(n * np.log((1.0 + counts[:, 0]) * (1.0 + counts[:, 1]))))
    bound = u + math.sqrt(math.log(1 / DELTA) / 2 * float(np.sum(c**2)))
    exceed = int(np.sum(f > bound))
    assert exceed <= _binomial_upper(M, DELTA)
    # c_ij bounds the exact bounded difference of each term over the truncated range
    grid = np.linspace(0.0, n, 41)
    za, zb = np.meshgrid(grid, grid, indexing="ij")
    for (da, db), cij in zip(counts, c, strict=True):
        vals = beta_kl(1 + da, 1 + db, 1 + za, 1 + zb)
        assert vals.max() - vals.min() <= cij
    # negative control: a bound with a too-small constant (c / 1000 around the exact mean)
    small = f.mean() + math.sqrt(math.log(1 / DELTA) / 2 * float(np.sum((c / 1000) ** 2)))
    assert int(np.sum(f > small)) > _binomial_upper(M, DELTA)
