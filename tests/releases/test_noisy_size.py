"""A release whose number of records is itself noisy (:mod:`pymc_dp.releases.noisy_size`).

The reference posterior is a brute-force enumeration written here with SciPy only: with
``N ~ Poisson(lam)``, ``lam ~ Gamma(a0, b0)`` and ``p ~ Beta(a, b)`` both parameters integrate
out in closed form (``N`` is NegativeBinomial, the number of successes given ``N``
BetaBinomial), so the joint posterior of ``(N, S)`` is a finite table up to a tail whose mass is
bounded and asserted below 1e-12 of the total; the posterior means of ``p`` and ``lam`` are sums
over that table of their conjugate means.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.distributions.privatized import Privatized
from pymc_dp.releases import NoisySizeRelease, release_with_noisy_size
from pymc_dp.step_methods import NoisySizeGibbs
from pymc_dp.testing import FALSE_ALARM, assert_gof, assert_rejects, chisquare_gof, mcse_check

EPS_N, EPS_S = 0.3, 1.0
A0, B0 = 20.0, 1.0  # Gamma(shape, rate) prior of the Poisson rate of N (prior mean 20)
PA, PB = 1.0, 1.0  # Beta prior of p
N_TILDE, S_TILDE = 3, 3  # a small noisy size: the posterior of N is near 10 (prior and noise)


def _log_geometric(k, eps):
    """Two-sided geometric noise pmf, written from its definition (independent of the library)."""
    a = math.exp(-eps)
    return math.log((1.0 - a) / (1.0 + a)) - eps * np.abs(k)


def _reference(n_tilde, s_tilde, n_max=600):
    """Exact posterior: P(N = n), E[p], E[lam], by enumeration of (N, S) with an asserted tail."""
    n = np.arange(n_max + 1)
    log_prior_n = stats.nbinom.logpmf(n, A0, B0 / (B0 + 1.0))
    s = np.arange(n_max + 1)
    log_bb = stats.betabinom.logpmf(s[None, :], n[:, None], PA, PB)  # -inf for s > n
    log_w = (
        log_prior_n[:, None]
        + _log_geometric(n_tilde - n, EPS_N)[:, None]
        + log_bb
        + _log_geometric(s_tilde - s, EPS_S)[None, :]
    )
    log_z = special.logsumexp(log_w)
    w = np.exp(log_w - log_z)
    # neglected N > n_max: each term is at most eta_N(n_tilde - N) (every other factor <= 1,
    # the sum over S of BetaBinomial times a pmf <= 1), a geometric series; with the factor
    # (a0 + N)/(b0 + 1) of E[lam] bounded by a sum over a long range
    tail_n = np.arange(n_max + 1, n_max + 200_001)
    log_tail = special.logsumexp(
        _log_geometric(n_tilde - tail_n, EPS_N) + np.log((A0 + tail_n) / (B0 + 1.0))
    )
    assert log_tail - log_z < math.log(1e-12)
    post_n = w.sum(axis=1)
    mean_p = float(np.sum(w * (PA + s[None, :]) / (PA + PB + n[:, None])))
    mean_lam = float(np.sum(post_n * (A0 + n) / (B0 + 1.0)))
    return post_n, mean_p, mean_lam


def _sample(model, rng, draws=1000, tune=500, step=None):
    with model:
        idata = pm.sample(
            step=None if step is None else step(model),
            draws=draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=rng,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata.posterior


def _failures(post, ref_n, ref_p, ref_lam, alpha):
    """The checks of the posterior draws against the enumeration that fail (names)."""
    n = np.asarray(post["size"], dtype=np.float64)
    checks = {"E[p]": (np.asarray(post["p"]), ref_p)}
    if np.ptp(n) == 0:  # a constant N (the fixed-N control) is a point mass: compare exactly
        return ["N is constant", *_names(checks, alpha)] if ref_n.max() < 1 - 1e-12 else []
    grid = np.arange(ref_n.size)
    checks["E[N]"] = (n, float(np.sum(grid * ref_n)))
    if "size_rate" in post:
        checks["E[lam]"] = (np.asarray(post["size_rate"]), ref_lam)
    cdf = np.cumsum(ref_n)
    for q in (0.25, 0.5, 0.75):  # P(N <= k) at the reference quartiles: the N marginal
        k = int(np.searchsorted(cdf, q))
        checks[f"P(N<={k})"] = ((n <= k).astype(np.float64), float(cdf[k]))
    return _names(checks, alpha)


def _names(checks, alpha):
    return [name for name, (x, ref) in checks.items() if not mcse_check(x, ref, alpha=alpha).passed]


STEPS = {
    "default": None,  # NUTS for (lam, p), NoisySizeGibbs for N
    "metropolis": lambda m: [pm.Metropolis([m["size"]])],  # PyMC's own step for N
}


@pytest.mark.slow
@pytest.mark.parametrize("step", sorted(STEPS))
def test_posterior_matches_enumeration_and_fixed_n_fails(rng, step):
    """Posterior of (N, lam, p) from ``pm.sample`` against the enumeration: the steps it
    picks (NUTS and the exact NoisySizeGibbs step for N), and PyMC's Metropolis for N.

    Six assertions (E[N], E[lam], E[p], three values of the N marginal's CDF), each at the
    two-sided normal rate FALSE_ALARM/6 of a mean within k MCSE: false-alarm rate 1e-6 for the
    test. Negative control: the model with N fixed at the noisy count (the noise on the size
    ignored) fails the same checks (E[p] = 0.70 exactly for it, 0.36 for the enumeration).
    """
    ref_n, ref_p, ref_lam = _reference(N_TILDE, S_TILDE)
    rel = NoisySizeRelease(
        N_TILDE, S_TILDE, pmdp.Geometric(epsilon=EPS_N), pmdp.Geometric(epsilon=EPS_S)
    )
    model = rel.model(size_rate_prior=(A0, B0), p_prior=(PA, PB))
    post = _sample(model, rng, 4000, 1000, STEPS[step])
    alpha = FALSE_ALARM / 6
    assert _failures(post, ref_n, ref_p, ref_lam, alpha) == []

    with pm.Model() as fixed:
        p = pm.Beta("p", np.float64(PA), np.float64(PB))
        pm.Deterministic("size", pm.math.constant(N_TILDE, dtype="int64"))
        Privatized(
            "noisy_statistic",
            pm.Binomial.dist(N_TILDE, p),
            pmdp.Geometric(epsilon=EPS_S),
            observed=S_TILDE,
        )
    bad = _failures(_sample(fixed, rng, 1000, 500), ref_n, ref_p, ref_lam, alpha)
    assert "N is constant" in bad and "E[p]" in bad


def _log_discrete_gaussian(k, sigma2):
    """Discrete Gaussian pmf from its definition, normaliser summed over |j| <= 2000."""
    j = np.arange(-2000, 2001)
    return -(np.asarray(k, np.float64) ** 2) / (2 * sigma2) - special.logsumexp(
        -(j**2) / (2 * sigma2)
    )


MECHS = {
    "geometric": (pmdp.Geometric(epsilon=0.7), lambda k: _log_geometric(k, 0.7)),
    "discrete_gaussian": (
        pmdp.DiscreteGaussian(sigma=2.0),
        lambda k: _log_discrete_gaussian(k, 4.0),
    ),
}


@pytest.mark.parametrize("noise", sorted(MECHS))
def test_model_density_is_the_joint_law(noise):
    """The model's log density (no Jacobian) at fixed points equals the joint law written with
    SciPy: Gamma(lam) Poisson(N; lam) Beta(p) eta_N(Ñ - N) sum_S Binomial(S; N, p) eta_S(S̃ - S).
    Deterministic (relative error 1e-10). Negative control: the same density with the size's
    noise term left out differs by far more than the tolerance."""
    mech, log_eta = MECHS[noise]
    rel = NoisySizeRelease(-2, 5, mech, mech)
    model = rel.model(size_rate_prior=(A0, B0), p_prior=(2.0, 3.0))
    logp = model.compile_logp(jacobian=False, mode="FAST_COMPILE")
    for n, lam, p in [(0, 0.3, 0.5), (4, 6.0, 0.2), (11, 9.5, 0.93), (40, 30.0, 0.61)]:
        s = np.arange(n + 1)
        stat = special.logsumexp(stats.binom.logpmf(s, n, p) + log_eta(5 - s))
        ref = (
            stats.gamma.logpdf(lam, A0, scale=1.0 / B0)
            + stats.poisson.logpmf(n, lam)
            + stats.beta.logpdf(p, 2.0, 3.0)
            + log_eta(-2 - n)
            + stat
        )
        got = logp({"size": n, "size_rate_log__": math.log(lam), "p_logodds__": special.logit(p)})
        assert got == pytest.approx(ref, rel=1e-10, abs=1e-10)
        assert abs(got - (ref - log_eta(-2 - n))) > 1e-3  # negative control


def _joint_logpmf(rel, n, s, out_n, out_s):
    return rel.size_mechanism.logpdf(out_n[:, None] - n) + rel.statistic_mechanism.logpdf(
        out_s[None, :] - s
    )


@pytest.mark.parametrize(("eps_n", "eps_s"), [(0.5, 0.5), (0.3, 1.1)])
def test_privacy_loss_equals_the_guarantee(eps_n, eps_s):
    """The privacy loss of the pair of releases, computed exactly from their joint pmf on a
    grid of outputs, maximised over small neighbouring datasets (one record added or removed,
    a 0 or a 1), equals the stated guarantee eps_N + eps_S to 1e-12 (sequential composition is
    tight here). Negative control: the size's noise alone (eps_N) is below the loss."""
    rel = NoisySizeRelease(0, 0, pmdp.Geometric(epsilon=eps_n), pmdp.Geometric(epsilon=eps_s))
    out = np.arange(-60, 61)
    worst = -np.inf
    for n in range(4):
        for s in range(n + 1):
            for x in (0, 1):  # the added record's value
                a = _joint_logpmf(rel, n, s, out, out)
                b = _joint_logpmf(rel, n + 1, s + x, out, out)
                worst = max(worst, np.max(np.abs(a - b)))
    stated = rel.guarantee().epsilon
    assert stated == pytest.approx(eps_n + eps_s, rel=1e-12)
    assert worst == pytest.approx(stated, rel=1e-12, abs=1e-12)
    assert worst > eps_n + 0.1  # negative control: counting the size's release alone fails


def test_release_draws_follow_the_law(rng):
    """``release_with_noisy_size`` publishes len(records) + noise and sum(records) + noise:
    chi-square of 3000 releases of each against the geometric pmf (rate FALSE_ALARM per
    assertion), and the law centred one off (an off-by-one in the size) is rejected."""
    records = np.array([1, 0, 1, 1, 0, 1])
    mech = pmdp.Geometric(epsilon=0.8)
    rels = [
        release_with_noisy_size(records, size_mechanism=mech, statistic_mechanism=mech, rng=rng)
        for _ in range(3000)
    ]
    sizes = np.array([r.noisy_size for r in rels])
    stats_ = np.array([r.noisy_statistic for r in rels])
    assert_gof(chisquare_gof(sizes, lambda k: _log_geometric(k - 6, 0.8)), what="size")
    assert_gof(chisquare_gof(stats_, lambda k: _log_geometric(k - 4, 0.8)), what="statistic")
    assert_rejects(chisquare_gof(sizes, lambda k: _log_geometric(k - 7, 0.8)), what="size - 1")


def test_secure_source_by_default():
    """Without ``rng`` the noise comes from the mechanism's secure source (integers)."""
    rel = release_with_noisy_size(
        np.zeros(0, dtype=np.int64),
        size_mechanism=pmdp.DiscreteGaussian(sigma=1.0),
        statistic_mechanism=pmdp.Geometric(epsilon=1.0),
    )
    assert isinstance(rel.noisy_size, np.int64) and isinstance(rel.noisy_statistic, np.int64)


GEO = pmdp.Geometric(epsilon=0.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"records": [0, 2]}, ValueError, "records"),
        ({"records": [[0, 1]]}, ValueError, "records"),
        ({"records": ["a"]}, TypeError, "records"),
        ({"records": np.ma.array([0, 1], mask=[0, 1])}, ValueError, "records"),
        ({"records": [0, float("nan")]}, ValueError, "records"),
        ({"size_mechanism": 0.5}, TypeError, "size_mechanism"),
        ({"statistic_mechanism": "geometric"}, TypeError, "statistic_mechanism"),
        (
            {"size_mechanism": pmdp.Laplace(epsilon=1.0, sensitivity=0.5)},
            ValueError,
            "size_mechanism",
        ),
        ({"statistic_mechanism": pmdp.Laplace(epsilon=1.0)}, ValueError, "allow_float"),
    ],
)
def test_release_refusals(kwargs, error, name):
    args = {"records": [0, 1, 1], "size_mechanism": GEO, "statistic_mechanism": GEO} | kwargs
    with pytest.raises(error, match=name):
        release_with_noisy_size(args.pop("records"), rng=np.random.default_rng(0), **args)


def test_float_mechanism_opt_in(rng):
    rel = release_with_noisy_size(
        [1, 1, 0],
        size_mechanism=pmdp.Laplace(epsilon=1.0),
        statistic_mechanism=pmdp.Laplace(epsilon=1.0),
        rng=rng,
        allow_float=True,
    )
    assert isinstance(rel.noisy_size, np.float64)
    model = rel.model()
    assert np.isfinite(model.compile_logp(mode="FAST_COMPILE")(model.initial_point()))


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ((3.5, 1), ValueError, "noisy_size"),
        ((3, float("inf")), ValueError, "noisy_statistic"),
        ((True, 1), TypeError, "noisy_size"),
        ((3, 2**60), ValueError, "noisy_statistic"),
        ((3, "1"), TypeError, "noisy_statistic"),
    ],
)
def test_release_value_refusals(args, error, name):
    with pytest.raises(error, match=name):
        NoisySizeRelease(*args, GEO, GEO)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"size_prior": pm.Normal.dist()}, TypeError, "size_prior"),
        ({"size_prior": 5}, TypeError, "size_prior"),
        ({"size_prior": pm.Poisson.dist(np.float64(3.0), shape=2)}, ValueError, "size_prior"),
        (
            {"size_prior": pm.Poisson.dist(np.float64(3.0)), "size_rate_prior": (2.0, 1.0)},
            ValueError,
            "size_rate_prior",
        ),
        ({"size_rate_prior": (1.0, -1.0)}, ValueError, "size_rate_prior"),
        ({"size_rate_prior": 3.0}, TypeError, "size_rate_prior"),
        ({"p_prior": (float("nan"), 1.0)}, ValueError, "p_prior"),
    ],
)
def test_model_refusals(kwargs, error, name):
    with pytest.raises(error, match=name):
        NoisySizeRelease(3, 1, GEO, GEO).model(**kwargs)


def test_user_size_prior_and_report():
    """A fixed NegativeBinomial prior of N is used as given (its log pmf at N in the model),
    and the privacy report of the model counts both releases (eps 0.5 + 0.5)."""
    prior = pm.NegativeBinomial.dist(mu=np.float64(6.0), alpha=np.float64(2.0))
    model = NoisySizeRelease(3, 1, GEO, GEO).model(size_prior=prior)
    logp = model.compile_logp(jacobian=False, mode="FAST_COMPILE")
    s = np.arange(5)
    ref = (
        stats.nbinom.logpmf(4, 2.0, 2.0 / 8.0)  # mean 6 = alpha (1 - q) / q with q = 1/4
        + _log_geometric(3 - 4, 0.5)
        + special.logsumexp(stats.binom.logpmf(s, 4, 0.5) + _log_geometric(1 - s, 0.5))
    )  # the Beta(1, 1) prior of p has log density 0
    assert logp({"size": 4, "p_logodds__": 0.0}) == pytest.approx(ref, rel=1e-12)
    assert pmdp.privacy_report(model).total.epsilon == pytest.approx(1.0, rel=1e-12)


def _exact_conditional(n_tilde, s_tilde, eps_n, eps_s, log_prior, p, n_max):
    """P(N | lam, p, releases) by enumeration over 0..n_max (tail asserted below 1e-12)."""
    n = np.arange(n_max + 1)
    stat = np.array(
        [
            special.logsumexp(
                stats.binom.logpmf(np.arange(k + 1), k, p)
                + _log_geometric(s_tilde - np.arange(k + 1), eps_s)
            )
            for k in n
        ]
    )
    logw = log_prior(n) + _log_geometric(n_tilde - n, eps_n) + stat
    log_z = special.logsumexp(logw)
    # beyond n_max: prior <= 1 and the statistic's factor <= 1, a geometric series of eta_N
    tail = _log_geometric(n_max + 1 - n_tilde, eps_n) - math.log1p(-math.exp(-eps_n))
    assert n_max > n_tilde and tail - log_z < math.log(1e-12)
    full = logw - log_z
    no_stat = logw - stat
    return full, no_stat - special.logsumexp(no_stat)


CONDITIONALS = {
    # (noisy size, noisy statistic, eps_N, eps_S, size prior, log prior, p, n_max)
    "near": (3, 3, 0.3, 1.0, None, None, 0.38, 400),
    # the prior (mean 100) far from the noisy size 3: the window grows to cover the mode
    "far": (3, 20, 0.3, 1.0, 100.0, lambda n: stats.poisson.logpmf(n, 100.0), 0.5, 600),
}


@pytest.mark.parametrize(
    "case",
    ["near", pytest.param("far", marks=pytest.mark.slow)],  # far: about 10 s
)
def test_gibbs_step_draws_the_exact_conditional(case, rng):
    """Given (lam, p), each NoisySizeGibbs draw of N is an independent draw of its full
    conditional: chi-square of 3000 draws against the enumeration (rate FALSE_ALARM). Negative
    control: the same draws against the conditional without the statistic's factor (the noisy
    number of successes ignored) are rejected."""
    n_tilde, s_tilde, eps_n, eps_s, prior_mu, log_prior, p, n_max = CONDITIONALS[case]
    rel = NoisySizeRelease(
        n_tilde, s_tilde, pmdp.Geometric(epsilon=eps_n), pmdp.Geometric(epsilon=eps_s)
    )
    lam = 15.0
    if prior_mu is None:
        model = rel.model(size_rate_prior=(A0, B0))
        log_prior = lambda n: stats.poisson.logpmf(n, lam)  # noqa: E731
    else:
        model = rel.model(size_prior=pm.Poisson.dist(np.float64(prior_mu)))
    step = NoisySizeGibbs([model["size"]], model=model, rng=rng)
    point = model.initial_point()
    point["p_logodds__"] = np.float64(special.logit(p))
    if "size_rate_log__" in point:
        point["size_rate_log__"] = np.float64(math.log(lam))
    draws = []
    for _ in range(3000):
        point, _ = step.step(point)
        draws.append(int(point["size"]))
    full, no_stat = _exact_conditional(n_tilde, s_tilde, eps_n, eps_s, log_prior, p, n_max)

    def lookup(table):
        def logpmf(k):
            return np.where((k >= 0) & (k <= n_max), table[np.clip(k, 0, n_max)], -np.inf)

        return logpmf

    assert_gof(chisquare_gof(np.array(draws), lookup(full)), what=case)
    assert_rejects(chisquare_gof(np.array(draws), lookup(no_stat)), what=f"{case}, no S")


def test_pm_sample_assigns_the_gibbs_step():
    """``pm.sample``'s assignment gives N to NoisySizeGibbs and the parameters to NUTS; a
    plain model with a latent Poisson count keeps PyMC's Metropolis (nothing else claimed)."""
    from pymc.sampling.mcmc import assign_step_methods

    model = NoisySizeRelease(3, 3, GEO, GEO).model()
    _, selected = assign_step_methods(model)
    names = {
        cls.__name__: sorted(model.values_to_rvs[v].name for v in vs)
        for cls, vs in selected.items()
    }
    assert names == {"NoisySizeGibbs": ["size"], "NUTS": ["p", "size_rate"]}
    with pm.Model() as plain:
        lam = pm.Gamma("lam", np.float64(2.0), np.float64(1.0))
        pm.Poisson("n", lam)
    _, selected = assign_step_methods(plain)
    assert {cls.__name__ for cls in selected} == {"NUTS", "Metropolis"}
    with pytest.raises(ValueError, match="NoisySizeGibbs"):
        NoisySizeGibbs([plain["n"]], model=plain)


def test_zcdp_of_discrete_gaussian_pair_equals_the_guarantee():
    """With DiscreteGaussian noise the guarantee is rho-zCDP, rho = rho_N + rho_S: the Rényi
    divergence of order a between the joint laws of neighbouring datasets (a record added, a 0
    or a 1), computed exactly on a grid of outputs, divided by a, is at most rho for every a
    and equals it for the neighbour whose record is a 1 (the discrete Gaussian's divergence at
    an integer shift is exactly a shift^2 / (2 sigma^2)), to 1e-12. Negative control: the
    size's release alone (rho_N) is below it."""
    rel = NoisySizeRelease(0, 0, pmdp.DiscreteGaussian(sigma=2.0), pmdp.DiscreteGaussian(sigma=1.5))
    rho = rel.guarantee().rho
    assert rho == pytest.approx(1 / 8 + 1 / 4.5, rel=1e-12)
    out = np.arange(-80, 81)
    worst = 0.0
    for a in (1.5, 2.0, 3.0, 7.0):
        for x in (0, 1):
            for p_, q_ in (((3, 1), (4, 1 + x)), ((4, 1 + x), (3, 1))):  # add, remove
                lp = _joint_logpmf(rel, *p_, out, out)
                lq = _joint_logpmf(rel, *q_, out, out)
                div = special.logsumexp(a * lp + (1 - a) * lq) / (a - 1)
                worst = max(worst, div / a)
    assert worst == pytest.approx(rho, rel=1e-12)
    assert worst > 1 / 8 + 0.1  # negative control: the size's release alone


def test_gibbs_step_refuses_a_window_it_cannot_certify(monkeypatch):
    """When no window up to the cap holds all but 1e-12 of the conditional, the step raises
    instead of drawing from a truncated law (cap lowered to 64 values here; the near case
    needs 257). Control: with the real cap the same draw succeeds."""
    import pymc_dp.step_methods.noisy_size as ns

    model = NoisySizeRelease(3, 3, pmdp.Geometric(epsilon=0.3), pmdp.Geometric(epsilon=1.0)).model(
        size_rate_prior=(A0, B0)
    )
    monkeypatch.setattr(ns, "_MAX_WINDOW", 64)
    step = NoisySizeGibbs([model["size"]], model=model, rng=np.random.default_rng(0))
    point = model.initial_point()
    point["size_rate_log__"] = np.float64(math.log(15.0))
    with pytest.raises(RuntimeError, match="1e-12"):
        step.step(point)
    monkeypatch.undo()
    _, [stats_] = step.step(point)
    assert stats_["size_window"] > 64


def test_gibbs_step_not_assigned_when_size_has_another_reader():
    """A term added after ``model()`` that reads the size (here a second observation of it) is
    not in the step's conditional: the step must not claim the size (PyMC's Metropolis, exact,
    takes it) and refuses when given it explicitly. Control: the unmodified model is claimed."""
    from pymc.sampling.mcmc import assign_step_methods

    model = NoisySizeRelease(3, 3, GEO, GEO).model()
    _, selected = assign_step_methods(model)
    assert "NoisySizeGibbs" in {cls.__name__ for cls in selected}
    with model:
        pm.Poisson("second_look", model["size"] + np.float64(0.5), observed=4)
    _, selected = assign_step_methods(model)
    names = {
        cls.__name__: sorted(model.values_to_rvs[v].name for v in vs)
        for cls, vs in selected.items()
    }
    assert "NoisySizeGibbs" not in names and names["Metropolis"] == ["size"]
    with pytest.raises(ValueError, match="read by nothing but its two releases"):
        NoisySizeGibbs([model["size"]], model=model)
