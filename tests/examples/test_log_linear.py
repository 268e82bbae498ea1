"""pymc_dp.examples.log_linear: naive Bayes (a log-linear model) from noisy class-by-feature tables.

References are independent of the module: a brute-force enumeration of every ordered record set
(itertools.product) with the parameters integrated out by hand (scipy's gammaln) and scipy's
Laplace density; the conjugate Dirichlet posterior of a known table; the privacy loss by
enumerating every pair of neighbouring data sets.

False-alarm rates: the exact-reference comparisons are deterministic (relative 1e-10); the
sampler check compares 5 posterior means with the exact ones at 4.89 MCSE each (two-sided 1e-6
each, 5e-6 in all); the chi-square check of :func:`simulate` is at 1e-6. Negative controls: the
naive analysis (noisy tables taken as counts) is rejected by the same MCSE check; the
chi-square check rejects records drawn with the two classes' feature laws swapped; a mechanism
calibrated to a sensitivity below ``2K`` has an exact loss above its claim; the enumeration with
more records than cells matches the conjugate posterior of the true table when the noise is
negligible and not at the slides' noise scale.
"""

import functools
import itertools

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.examples import log_linear as ll

Z6 = 4.891638  # two-sided normal quantile at 1e-6

# tiny case: n = 3 records, NI = 2 classes, K = 2 features with J = 2 levels (8^3 record sets)
N, NI, K, J = 3, 2, 2, 2
# a fixed release at epsilon = 1 (Laplace scale 2K / epsilon = 4), chosen far from what the
# records can give so that the noise matters: the naive analysis reads -1.3 as 0 and 3.4 as 3.4
TABLES = np.array([[[2.6, -1.3], [0.4, 1.9]], [[0.2, 3.4], [-0.8, 0.7]]])
MECH = pmdp.Laplace(epsilon=1.0, sensitivity=4.0)


def _release():
    return ll.LogLinearRelease(
        tables=TABLES, mechanism=MECH, n=N, n_classes=NI, n_levels=J, sensitivity=(4.0, 2.0)
    )


def _brute_force_means(tables, scale, a):
    """Posterior means of p and q by summing over all (NI J^K)^n ordered record sets."""
    cells = list(itertools.product(range(NI), *[range(J)] * K))
    num_p, num_q, total = np.zeros(NI), np.zeros((K, NI, J)), 0.0
    for recs in itertools.product(cells, repeat=N):
        ny = np.zeros(NI)
        tab = np.zeros((K, NI, J))
        for rec in recs:
            ny[rec[0]] += 1
            for k in range(K):
                tab[k, rec[0], rec[1 + k]] += 1
        # log P(records | prior): Dirichlet-multinomial of each parameter vector (ordered)
        lp = special.gammaln(NI * a) - special.gammaln(NI * a + N)
        lp += np.sum(special.gammaln(a + ny) - special.gammaln(a))
        for k in range(K):
            for i in range(NI):
                lp += special.gammaln(J * a) - special.gammaln(J * a + tab[k, i].sum())
                lp += np.sum(special.gammaln(a + tab[k, i]) - special.gammaln(a))
        lp += stats.laplace.logpdf(tables - tab, scale=scale).sum()
        w = np.exp(lp)
        total += w
        num_p += w * (a + ny) / (NI * a + N)
        num_q += w * (a + tab) / (J * a + tab.sum(axis=2, keepdims=True))
    return num_p / total, num_q / total


def test_enumeration_matches_brute_force():
    exact = ll.enumerate_posterior_means(_release(), 2.0)
    p, q = _brute_force_means(TABLES, 4.0, 2.0)
    np.testing.assert_allclose(exact["p"], p, rtol=1e-10)
    np.testing.assert_allclose(exact["q"], q, rtol=1e-10)
    # the release matters: the exact posterior is not the naive one (control of the reference)
    naive = ll.naive_posterior_means(_release(), 2.0)
    assert np.max(np.abs(naive["q"] - q)) > 0.05


def test_enumeration_with_more_records_than_cells(rng):
    """n = 40 records over 4 joint cells (the enumeration's count table, not a table of
    records, is what MAX_ENUMERATION bounds): with almost no noise the tables pin the records'
    counts, so the exact posterior is the conjugate one of the true table (deterministic);
    control: at the slides' scale 2K / epsilon = 2 it is not."""
    y, x = ll.simulate(40, [0.4, 0.6], [[[0.7, 0.3], [0.2, 0.8]]], rng=rng)
    t = ll.tables(y, x, n_classes=2, n_levels=2)[0]
    p = (2.0 + t.sum(axis=1)) / (4.0 + 40)
    q = (2.0 + t) / (4.0 + t.sum(axis=1, keepdims=True))
    err = {}
    for scale in (1e-3, 2.0):
        rel = ll.release_tables(
            y,
            x,
            n_classes=2,
            n_levels=2,
            mechanism=pmdp.Laplace(scale=scale, sensitivity=2),
            rng=rng,
            allow_float=True,
        )
        got = ll.enumerate_posterior_means(rel, 2.0)
        err[scale] = max(np.max(np.abs(got["p"] / p - 1)), np.max(np.abs(got["q"][0] / q - 1)))
    assert err[1e-3] <= 1e-10, err
    assert err[2.0] > 1e-3, err  # control


def test_pm_sample_matches_enumeration(rng):
    """The default pm.sample (Ju et al.'s sampler) against the exact posterior; naive rejected."""
    rel = _release()
    model = ll.log_linear_model(rel, 2.0)
    with model:
        idata = pm.sample(
            600,
            tune=200,
            chains=2,
            cores=1,
            progressbar=False,
            random_seed=rng,
            compute_convergence_checks=False,
        )
    steps = idata.sample_stats
    assert "da_accept_min" in steps  # DataAugmentation sampled the records
    exact = ll.enumerate_posterior_means(rel, 2.0)
    naive = ll.naive_posterior_means(rel, 2.0)
    post = idata.posterior
    got, ref, bad, se = [], [], [], []
    for var, idx in [
        ("p", (0,)),
        ("q_0", (0, 0)),
        ("q_0", (1, 0)),
        ("q_1", (0, 0)),
        ("q_1", (1, 0)),
    ]:
        sel = dict(zip([d for d in post[var].dims if d not in ("chain", "draw")], idx, strict=True))
        draws = post[var].isel(sel)
        got.append(float(draws.mean()))
        se.append(float(az.mcse(draws.to_dataset(name="v"), method="mean")["v"]))
        k = 0 if var == "p" else int(var[-1])
        ref.append(exact["p"][0] if var == "p" else exact["q"][k][idx])
        bad.append(naive["p"][0] if var == "p" else naive["q"][k][idx])
    got, ref, bad, se = map(np.asarray, (got, ref, bad, se))
    assert np.all(np.abs(got - ref) <= Z6 * se), (got, ref, se)
    assert not np.all(np.abs(got - bad) <= Z6 * se), (got, bad, se)  # negative control
    # the exp(-epsilon) bound of the record updates (deterministic)
    assert float(steps["da_accept_min"].min()) >= np.exp(-1.0) - 1e-12


def _all_datasets(n):
    cells = list(itertools.product(range(NI), *[range(J)] * K))
    return [np.array(d) for d in itertools.product(cells, repeat=n)]


def test_privacy_loss_exact_on_small_inputs():
    """Max over neighbouring data sets (n = 2, replace one record) of the L1 and L2 change of the
    tables, so the exact Laplace loss max |T - T'|_1 / b, equals the stated guarantee."""
    l1 = l2 = 0.0
    for d in _all_datasets(2):
        t = ll.tables(d[:, 0], d[:, 1:], n_classes=NI, n_levels=J)
        for rec in itertools.product(range(NI), *[range(J)] * K):
            d2 = d.copy()
            d2[0] = rec
            t2 = ll.tables(d2[:, 0], d2[:, 1:], n_classes=NI, n_levels=J)
            l1 = max(l1, float(np.abs(t - t2).sum()))
            l2 = max(l2, float(np.sqrt(((t - t2) ** 2).sum())))
    rel = ll.release_tables(
        [0, 1],
        [[0, 0], [1, 1]],
        n_classes=NI,
        n_levels=J,
        mechanism=functools.partial(pmdp.Laplace, epsilon=0.7),
        rng=np.random.default_rng(0),
        allow_float=True,
    )
    assert rel.sensitivity == (l1, l2) == (2.0 * K, np.sqrt(2.0 * K))
    loss = l1 / rel.mechanism.scale
    assert loss == pytest.approx(rel.guarantee().epsilon, rel=1e-12)
    assert rel.guarantee().epsilon == 0.7
    # negative control: noise calibrated to the per-table sensitivity 2 claims 0.7 but loses more
    short = pmdp.Laplace(epsilon=0.7, sensitivity=2.0)
    assert l1 / short.scale > short.guarantee().epsilon + 0.5
    with pytest.raises(ValueError, match="sensitivity"):
        ll.release_tables(
            [0, 1],
            [[0, 0], [1, 1]],
            n_classes=NI,
            n_levels=J,
            mechanism=short,
            rng=np.random.default_rng(0),
            allow_float=True,
        )


def test_simulate_law(rng):
    """Chi-square of the joint cells of simulate() against p_i q_0[i, j] (rate 1e-6); control:
    the two classes' feature laws swapped is rejected."""
    p = np.array([0.3, 0.7])
    q = np.array([[[0.8, 0.1, 0.1], [0.2, 0.3, 0.5]]])
    n = 20000
    y, x = ll.simulate(n, p, q, rng=rng)
    obs = np.bincount(y * 3 + x[:, 0], minlength=6)
    for qq, ok in [(q, True), (q[:, ::-1], False)]:
        expected = n * (p[:, None] * qq[0]).ravel()
        pval = stats.chisquare(obs, expected).pvalue
        assert (pval > 1e-6) == ok, (pval, ok)


def test_tables_and_release_shapes():
    t = ll.tables([0, 1, 1], [[0, 1], [1, 1], [1, 0]], n_classes=2, n_levels=3)
    assert t.shape == (2, 2, 3) and t.sum() == 6
    assert t[0].sum(axis=1).tolist() == [1, 2] == t[1].sum(axis=1).tolist()
    rel = ll.release_tables(
        [0, 1, 1],
        [1, 1, 0],
        n_classes=2,
        n_levels=2,
        mechanism=functools.partial(pmdp.Geometric, epsilon=1.0),
        rng=np.random.default_rng(0),
    )
    assert rel.tables.dtype == np.int64 and not rel.tables.flags.writeable
    assert rel.mechanism.sensitivity == 2 and rel.n_features == 1
    m = rel.model()
    assert pmdp.privacy_report(m).total.epsilon == 1.0


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: ll.tables([0, 2], [0, 1], n_classes=2, n_levels=2), ValueError, "y must lie"),
        (lambda: ll.tables([0, 1], [0, 5], n_classes=2, n_levels=2), ValueError, "x must lie"),
        (lambda: ll.tables([[0, 1]], [0, 1], n_classes=2, n_levels=2), ValueError, "y must be 1-D"),
        (lambda: ll.tables([0, 1], [0, 1, 1], n_classes=2, n_levels=2), ValueError, "x must have"),
        (lambda: ll.tables([0, 1], [0, 1], n_classes=1, n_levels=2), ValueError, "n_classes"),
        (lambda: ll.tables([0, 1], [0, 1], n_classes=2, n_levels=True), ValueError, "n_levels"),
        (lambda: ll.tables([0, np.nan], [0, 1], n_classes=2, n_levels=2), ValueError, "y must"),
        (lambda: ll.tables([0, 0.5], [0, 1], n_classes=2, n_levels=2), ValueError, "y must"),
        (lambda: ll.log_linear_model("x"), TypeError, "release must be"),
        (lambda: ll.log_linear_model(_release(), -1.0), ValueError, "prior"),
        (lambda: ll.log_linear_model(_release(), float("nan")), ValueError, "prior"),
        (lambda: ll.log_linear_model(_release(), "a"), TypeError, "prior"),
        (lambda: ll.log_linear_model(_release(), name="p"), ValueError, "name"),
        (lambda: ll.log_linear_model(_release(), name=""), ValueError, "name"),
        (lambda: ll.simulate(0, [0.5, 0.5], [[[1, 0], [0, 1]]]), ValueError, "n must"),
        (lambda: ll.simulate(3, [0.5, 0.6], [[[1, 0], [0, 1]]]), ValueError, "p must"),
        (lambda: ll.simulate(3, [0.5, 0.5], [[[1, 0]]]), ValueError, "q must"),
        (lambda: ll.simulate(3, [0.5, 0.5], [[1, 0], [0, 1]]), ValueError, "q must"),
        (
            lambda: ll.LogLinearRelease(np.zeros((1, 3, 2)), MECH, 3, 2, 2, (2.0, 1.5)),
            ValueError,
            "tables must have shape",
        ),
        (
            lambda: ll.LogLinearRelease(np.full((1, 2, 2), np.inf), MECH, 3, 2, 2, (2.0, 1.5)),
            ValueError,
            "finite",
        ),
        (
            lambda: ll.LogLinearRelease(np.zeros((1, 2, 2)), "laplace", 3, 2, 2, (2.0, 1.5)),
            TypeError,
            "mechanism",
        ),
        (
            lambda: ll.enumerate_posterior_means(
                ll.LogLinearRelease(np.zeros((3, 2, 2)), MECH, 40, 2, 2, (6.0, 2.5))
            ),
            ValueError,
            "MAX_ENUMERATION",
        ),
        (
            lambda: ll.release_tables(
                [0, 1], [0, 1], n_classes=2, n_levels=2, mechanism=MECH, rng=np.random.default_rng()
            ),
            ValueError,
            "allow_float",
        ),
    ],
)
def test_arguments_are_checked(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
