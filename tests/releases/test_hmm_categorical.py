"""The noise-aware private HMM with categorical (multi-valued) features (Foulds et al. 2016,
Sec. 5): ``HMMCountsRelease.model`` with ``V_f > 2``.

References are independent of the library's recursion: sums over every composition of the
true counts (``itertools``) with scipy's multinomial, binomial, Dirichlet and Beta densities
and the noise laws written with scipy; the state posterior by enumeration over all paths.
Deterministic checks state their tolerance; the one sampling test in the default run states its
false-alarm rate and has a negative control (the plug-in likelihood, Foulds et al.'s projected
noisy counts used as true counts) that the same test must reject.
"""

import functools
import itertools

import numpy as np
import pymc as pm
import pytensor
import pytest
from pytensor.compile.mode import Mode
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.releases.hmm import HMMCountsRelease, HMMPrior, hmm_count_sensitivity
from pymc_dp.testing import assert_gof, assert_rejects, chisquare_gof, mcse_check

#: the Python linker (each Op's perform): numba's compilation of these small one-off
#: functions would dominate the file's time; the numba lowering of the row marginal is checked
#: in tests/math/test_multinomial_noise.py
PY = Mode(linker="py", optimizer="fast_compile")


def _release(counts, n, n_values, mech):
    return HMMCountsRelease(
        counts=np.asarray(counts),
        entries_per_step=np.asarray(n, dtype=np.int64),
        n_values=tuple(n_values),
        mechanism=mech,
        sensitivity=hmm_count_sensitivity(n_values),
    )


def _geometric_lpmf(mech, x):
    a = -mech.log_alpha
    return np.log(np.tanh(a / 2)) - a * np.abs(np.asarray(x, np.float64))


def _row_loglik(z, n, p, noise):
    """log sum over compositions c of N: Multinomial(c; N, p) prod_j eta(z_j - c_j)."""
    rows = np.array([c for c in itertools.product(range(n + 1), repeat=len(p)) if sum(c) == n])
    terms = stats.multinomial.logpmf(rows, n, p) + noise(np.asarray(z)[None, :] - rows).sum(1)
    return special.logsumexp(terms)


def _plugin_row_loglik(z, n, p, noise=None):
    """Foulds et al.'s plug-in: the projected noisy counts as sufficient statistics."""
    return float((np.clip(z, 0, n) * np.log(p)).sum())


def _binary_model_reference(rel, k):
    """The binary model as built before categorical features were supported (the recipe of
    the previous ``HMMCountsRelease.model``), to check that the binary path is unchanged."""
    import pytensor.tensor as pt

    from pymc_dp.distributions.markov_chain import MarkovChain
    from pymc_dp.distributions.privatized import Privatized

    a, b, e = HMMPrior().resolve(k)
    (r, t), f = rel.shape, len(rel.n_values)
    coords = {"region": range(r), "month": range(t), "feature": range(f)}
    coords |= {"state": range(k), "next_state": range(k)}
    with pm.Model(coords=coords) as model:
        n_data = pm.Data(
            "entries_per_step", np.asarray(rel.entries_per_step, np.int64), dims=("region", "month")
        )
        released = pm.Data(
            "released_counts",
            np.asarray(rel.counts, np.float64),
            dims=("region", "month", "feature"),
        )
        init = pm.Dirichlet("init_probs", a=a, dims="state")
        trans = pm.Dirichlet("transition", a=b, dims=("state", "next_state"))
        e64 = np.float64(e)
        phi = pm.Beta("emission", alpha=e64, beta=e64, dims=("feature", "state"))
        states = MarkovChain("states", init, trans, dims=("region", "month"))
        n = pt.broadcast_to(n_data[..., None], (r, t, f))
        Privatized(
            "counts",
            pm.Binomial.dist(n=n, p=phi.T[states]),
            rel.mechanism,
            observed=released,
            dims=("region", "month", "feature"),
        )
    return model


def test_binary_model_unchanged(rng):
    """All-binary releases build the same model as before (same variables in the same order,
    same coords, the same logp and random-variable graphs as printed by PyTensor, the same
    prior draws for one seed). Exact comparisons; negative control: a model with one
    categorical feature prints a different graph."""
    ent = {
        "region": rng.integers(0, 2, 40),
        "month": rng.integers(0, 3, 40),
        "features": rng.integers(0, 2, (40, 3)),
    }
    rel = pmdp.releases.release_hmm_counts(ent, shape=(2, 3), epsilon=1.0, rng=rng)
    new, ref = rel.model(2), _binary_model_reference(rel, 2)
    assert list(new.named_vars) == list(ref.named_vars)
    assert new.coords == ref.coords
    assert pytensor.dprint(new.logp(), file="str") == pytensor.dprint(ref.logp(), file="str")
    assert pytensor.dprint(new.basic_RVs, file="str") == pytensor.dprint(ref.basic_RVs, file="str")
    d_new = pm.draw(new.basic_RVs, draws=3, random_seed=11, mode=PY)
    d_ref = pm.draw(ref.basic_RVs, draws=3, random_seed=11, mode=PY)
    assert all(np.array_equal(a, b) for a, b in zip(d_new, d_ref, strict=True))
    # control: a 3-valued feature changes the graph
    ent3 = dict(ent, features=np.column_stack([ent["features"][:, :2], rng.integers(0, 3, 40)]))
    rel3 = pmdp.releases.release_hmm_counts(
        ent3, shape=(2, 3), n_values=[2, 2, 3], epsilon=1.0, rng=rng
    )
    assert pytensor.dprint(rel3.model(2).logp(), file="str") != pytensor.dprint(
        ref.logp(), file="str"
    )


def test_model_density_is_the_exact_joint(rng):
    """The whole model's log density (no Jacobian) at random points equals the joint written
    out by hand, to 1e-10: Dirichlet and Beta priors, the Markov chain, each binary cell's
    sum over its true count, and each categorical row's sum over every composition of N
    (features with 2, 3 and 4 values, Laplace noise). Negative control: the same joint with
    the categorical rows' plug-in likelihood differs by more than 1."""
    mech = pmdp.Laplace(scale=1.7, sensitivity=5.0)
    n_values = (2, 3, 4)
    n = np.array([[4, 0, 6]])
    counts = np.round(rng.normal(2.0, 2.5, size=(1, 3, 8)), 1)
    rel = _release(counts, n, n_values, mech)
    model = rel.model(2, prior=HMMPrior(init=[2.0, 1.0], transition=[[3.0, 1.0], [1.0, 2.0]]))
    names = ["init_probs", "transition", "emission", "emission_1", "emission_2", "states"]
    values = model.compile_fn(
        model.replace_rvs_by_values([model[nm] for nm in names]),
        inputs=model.value_vars,
        on_unused_input="ignore",
        mode=PY,
    )
    logp = model.compile_logp(jacobian=False, mode=PY)
    noise = functools.partial(stats.laplace.logpdf, scale=mech.scale)
    for _ in range(3):
        point = {
            k: (v + rng.normal(0, 0.7, np.shape(v)) if v.dtype.kind == "f" else v)
            for k, v in model.initial_point().items()
        }
        point["states"] = rng.integers(0, 2, (1, 3))
        pi, a, phi, phi1, phi2, s = values(point)
        base = stats.dirichlet.logpdf(pi, [2.0, 1.0])
        base += stats.dirichlet.logpdf(a[0], [3.0, 1.0]) + stats.dirichlet.logpdf(a[1], [1.0, 2.0])
        base += stats.beta.logpdf(phi, 1.0, 1.0).sum()
        base += sum(stats.dirichlet.logpdf(row, np.ones(3)) for row in phi1)
        base += sum(stats.dirichlet.logpdf(row, np.ones(4)) for row in phi2)
        st = s[0]
        base += np.log(pi[st[0]]) + np.log(a[st[:-1], st[1:]]).sum()
        exact, plug = base, base
        for t in range(3):
            y = np.arange(n[0, t] + 1)
            cell = special.logsumexp(
                stats.binom.logpmf(y, n[0, t], phi[0, st[t]]) + noise(counts[0, t, 0] - y)
            )
            exact, plug = exact + cell, plug + cell
            for p, cols in ((phi1, slice(1, 4)), (phi2, slice(4, 8))):
                z = counts[0, t, cols]
                exact += _row_loglik(z, n[0, t], p[st[t]], noise)
                plug += _plugin_row_loglik(z, n[0, t], p[st[t]])
        got = logp(point)
        assert abs(got - exact) <= 1e-10 * max(1.0, abs(exact))
        assert abs(got - plug) > 1.0


# a tiny HMM whose exact and plug-in state posteriors differ (total variation 0.80): one
# 3-valued feature, N = (5, 5, 6), geometric noise at epsilon = 1 (sensitivity 2)
_Z = np.array([[8, -2, 1], [2, 2, 5], [8, 4, 0]])
_N = np.array([5, 5, 6])
_PHI = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
_INIT = np.array([0.5, 0.5])
_TRANS = np.array([[0.8, 0.2], [0.2, 0.8]])


def _path_posterior(row_loglik, mech):
    """Exact posterior over the 8 state paths given init, transition and emissions."""
    noise = functools.partial(_geometric_lpmf, mech)
    lik = np.array([[row_loglik(_Z[t], _N[t], _PHI[k], noise) for k in range(2)] for t in range(3)])
    paths = list(itertools.product(range(2), repeat=3))
    lp = np.array(
        [
            np.log(_INIT[s[0]])
            + np.log(_TRANS[s[:-1], s[1:]]).sum()
            + lik[np.arange(3), list(s)].sum()
            for s in paths
        ]
    )
    return paths, np.exp(lp - special.logsumexp(lp))


def _category_gof(codes, probs):
    """Chi-square p-value of integer ``codes`` against the category probabilities ``probs``
    (:func:`pymc_dp.testing.chisquare_gof`; categories of probability 0 pooled with others)."""
    logp = np.log(probs, out=np.full(len(probs), -np.inf), where=probs > 0)
    return chisquare_gof(codes, lambda k: logp[k])


def test_ffbs_draws_match_the_exact_state_posterior(rng):
    """With init, transition and emissions fixed (``pm.do``), the FFBS step of the model
    draws the state paths exactly: 2000 regions with the same release are 2000 independent
    draws of one tiny HMM's path (R = 1, T = 3, K = 2, one 3-valued feature), whose 8
    frequencies pass a chi-square test against the posterior enumerated over paths and true
    counts (false-alarm rate 1e-6, :func:`pymc_dp.testing.assert_gof`). Negative control: the
    same draws against the plug-in posterior (projected noisy counts as true counts) are
    rejected."""
    from pymc_dp.step_methods.ffbs import FFBS

    reps = 2000
    mech = pmdp.Geometric(epsilon=1.0, sensitivity=2)
    rel = _release(np.tile(_Z[None], (reps, 1, 1)), np.tile(_N, (reps, 1)), (3,), mech)
    model = rel.model(2)
    fixed = pm.do(model, {"init_probs": _INIT, "transition": _TRANS, "emission_0": _PHI})
    step = FFBS([fixed["states"]], model=fixed, rng=rng, compile_kwargs={"mode": PY})
    point, _ = step.step(fixed.initial_point())
    paths, exact = _path_posterior(_row_loglik, mech)
    codes = point["states"] @ np.array([4, 2, 1])  # a path's index in itertools.product order
    assert [4 * s[0] + 2 * s[1] + s[2] for s in paths] == list(range(8))
    assert_gof(_category_gof(codes, exact), what="FFBS paths vs the exact posterior")
    _, plug = _path_posterior(_plugin_row_loglik, mech)
    assert_rejects(_category_gof(codes, plug), what="FFBS paths vs the plug-in posterior")


def test_refusals_name_the_cause():
    """A user-defined noise law (its own numba density) is refused for categorical features
    with NotImplementedError naming the remedy (the built-in Laplace builds); a step with
    more entries than the row marginal takes is refused naming entries_per_step, and NaN
    released cells naming counts (pm.Data would take them as missing data)."""
    from pymc_dp.kernels.noise_logpdf import laplace_logpdf
    from pymc_dp.math.multinomial_noise import MAX_TRIALS

    class MyLaplace(pmdp.Laplace):
        @property
        def numba_logpdf(self):
            return _my_logpdf

    import numba

    @numba.njit
    def _my_logpdf(x, params):  # pragma: no cover - compiled
        return laplace_logpdf(x, params)

    mech = MyLaplace(scale=1.0, sensitivity=2.0)
    rel = _release(np.zeros((1, 2, 3)), [[2, 3]], (3,), mech)
    with pytest.raises(NotImplementedError, match=r"built-in family.*[Bb]inarize"):
        rel.model(2)
    # control: the same release with the built-in Laplace builds
    assert isinstance(
        _release(np.zeros((1, 2, 3)), [[2, 3]], (3,), pmdp.Laplace(scale=1.0)).model(2), pm.Model
    )
    big = _release(np.zeros((1, 1, 3)), [[MAX_TRIALS + 1]], (3,), pmdp.Laplace(scale=2.0))
    with pytest.raises(ValueError, match="entries_per_step"):
        big.model(2)
    neg = _release(np.zeros((1, 1, 3)), [[-1]], (3,), pmdp.Laplace(scale=2.0))
    with pytest.raises(ValueError, match="entries_per_step"):
        neg.model(2)
    # control: at the bound the model builds
    ok = _release(np.zeros((1, 1, 3)), [[MAX_TRIALS]], (3,), pmdp.Laplace(scale=2.0))
    assert isinstance(ok.model(2), pm.Model)
    with pytest.raises(ValueError, match=r"counts \(the released rows of feature 0\).*NaN"):
        _release(np.full((1, 1, 3), np.nan), [[2]], (3,), pmdp.Laplace(scale=2.0)).model(2)


@pytest.mark.slow
def test_pm_sample_matches_the_exact_posterior(rng):
    """pm.sample (FFBS + NUTS) on the tiny HMM with the emissions and transition fixed and
    the initial distribution free (1-d): the posterior mean of init_probs[0] and the state
    marginals P(s_t = 0) agree with the enumeration over paths and a 2000-point quadrature
    of pi within 4.89 Monte Carlo standard errors each (:func:`pymc_dp.testing.mcse_check`, 4
    assertions at 1e-6 each under the normal approximation of the MCSE: false-alarm rate
    about 4e-6). Negative control: the plug-in posterior is rejected by the same test (some
    quantity beyond 4.89 MCSE). Also:
    pm.sample assigns FFBS to the states and NUTS to every continuous variable of the full
    model."""
    from pymc.sampling.mcmc import assign_step_methods

    from pymc_dp.step_methods.ffbs import FFBS

    mech = pmdp.Geometric(epsilon=1.0, sensitivity=2)
    rel = _release(_Z[None], _N[None], (3,), mech)
    full = rel.model(2)
    with full:
        _, selected = assign_step_methods(full)
    kinds = {method: {v.name for v in vs} for method, vs in selected.items()}
    assert kinds == {
        FFBS: {"states"},
        pm.NUTS: {"init_probs_simplex__", "transition_simplex__", "emission_0_simplex__"},
    }
    model = pm.do(full, {"transition": _TRANS, "emission_0": _PHI})
    with model:
        idata = pm.sample(
            draws=3000,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=rng,
            progressbar=False,
            compute_convergence_checks=False,
        )
    pi0 = np.asarray(idata.posterior["init_probs"])[..., 0]
    s = np.asarray(idata.posterior["states"])[..., 0, :]
    draws = {"pi0": pi0} | {f"s{t}": (s[..., t] == 0).astype(float) for t in range(3)}

    def exact_summary(row_loglik):
        paths, _ = _path_posterior(row_loglik, mech)
        grid = (np.arange(2000) + 0.5) / 2000  # pi0 ~ Dirichlet(1, 1): uniform
        noise = functools.partial(_geometric_lpmf, mech)
        lik = np.array(
            [[row_loglik(_Z[t], _N[t], _PHI[k], noise) for k in range(2)] for t in range(3)]
        )
        w = np.zeros((len(grid), len(paths)))
        for i, path in enumerate(paths):
            rest = np.log(_TRANS[path[:-1], path[1:]]).sum() + lik[np.arange(3), list(path)].sum()
            w[:, i] = np.log(np.where(path[0] == 0, grid, 1 - grid)) + rest
        w = np.exp(w - special.logsumexp(w))
        out = {"pi0": (w.sum(1) * grid).sum()}
        for t in range(3):
            out[f"s{t}"] = w[:, [p[t] == 0 for p in paths]].sum()
        return out

    def checks(ref):
        return {key: mcse_check(x, ref[key]) for key, x in draws.items()}

    exact = checks(exact_summary(_row_loglik))
    assert all(c.passed for c in exact.values()), exact
    assert not all(c.passed for c in checks(exact_summary(_plugin_row_loglik)).values())


def test_forward_draws_follow_the_marginal(rng):
    """The observed rows' forward draws (prior/posterior predictive: Multinomial rows plus the
    mechanism's noise) follow the row marginal the likelihood uses: 30000 rows (N = 2, V = 3,
    two-sided geometric noise, emissions and states fixed by ``pm.do``) pass a chi-square test
    against exp(log-likelihood) over the cells (draws clipped to [-8, 10] per cell, the clipped
    ones pooled into one category; false-alarm rate 1e-6, :func:`pymc_dp.testing.assert_gof`).
    Negative control: the same draws against the marginal at p = (0.3, 0.3, 0.4) instead of
    (0.2, 0.3, 0.5) are rejected."""
    from pymc_dp.kernels.noise_logpdf import logpdf_kind
    from pymc_dp.math.multinomial_noise import multinomial_noise_numpy

    mech = pmdp.Geometric(epsilon=1.5, sensitivity=2)
    reps, n = 200, 2
    rel = _release(np.zeros((reps, 1, 3), np.int64), np.full((reps, 1), n), (3,), mech)
    phi = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    fixed = pm.do(rel.model(2), {"emission_0": phi, "states": np.zeros((reps, 1), np.int64)})
    draws = pm.draw(fixed["counts_0"], draws=150, random_seed=rng, mode=PY).reshape(-1, 3)
    assert draws.dtype.kind == "i"
    lo = -8
    grid = np.stack(np.meshgrid(*[np.arange(lo, n - lo + 1)] * 3, indexing="ij"), -1)
    grid = grid.reshape(-1, 3)
    kind, par = logpdf_kind(mech.numba_logpdf), mech.numba_params
    interior = np.all((grid > lo) & (grid < n - lo), axis=1)
    # a draw's category: its cell on the grid, or len(grid) once clipped on some axis
    index = np.ravel_multi_index((np.clip(draws, lo, n - lo) - lo).T, (n - 2 * lo + 1,) * 3)
    codes = np.where(interior[index], index, len(grid))

    def pvalue(p):
        lp, _ = multinomial_noise_numpy(grid, n, p, kind, par)
        probs = np.where(interior, np.exp(lp), 0.0)
        return _category_gof(codes, np.append(probs, 1.0 - probs.sum()))

    assert_gof(pvalue(phi[0]), what="forward draws vs the row marginal")
    assert_rejects(pvalue(np.array([0.3, 0.3, 0.4])), what="forward draws vs a wrong p")
