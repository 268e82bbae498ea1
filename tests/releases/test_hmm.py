"""The private-HMM count release (pymc_dp.releases.hmm): table, sensitivity, calibration,
plug-in plumbing, the noise-aware model's likelihood, and validation."""

import functools
import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.kernels.hmm_plugin import PluginPrior, plugin_gibbs_chain
from pymc_dp.releases.hmm import (
    HMMCountsRelease,
    HMMPrior,
    hmm_count_sensitivity,
    hmm_count_table,
    release_hmm_counts,
)


def _entries(rng, n, shape, n_values):
    return {
        "region": rng.integers(0, shape[0], n),
        "month": rng.integers(0, shape[1], n),
        "features": np.stack([rng.integers(0, v, n) for v in n_values], axis=1),
    }


def _loop_table(entries, shape, n_values):
    """Reference: one Python pass over the entries and cells."""
    cells = []
    for f, v in enumerate(n_values):
        cells += [(f, 1)] if v == 2 else [(f, j) for j in range(v)]
    out = np.zeros((*shape, len(cells)), dtype=np.int64)
    n = np.zeros(shape, dtype=np.int64)
    for r, t, x in zip(entries["region"], entries["month"], entries["features"], strict=True):
        n[r, t] += 1
        for i, (f, v) in enumerate(cells):
            out[r, t, i] += int(x[f] == v)
    return out, n


@pytest.mark.parametrize("n_values", [(2, 2, 2, 2, 2), (2, 3, 2, 4), (5,)])
def test_count_table_against_loop(n_values):
    rng = np.random.default_rng(1)
    entries = _entries(rng, 400, (3, 7), n_values)
    counts, n = hmm_count_table(entries, shape=(3, 7), n_values=list(n_values))
    ref, ref_n = _loop_table(entries, (3, 7), n_values)
    assert counts.dtype == np.int64 and counts.tolist() == ref.tolist()
    assert n.tolist() == ref_n.tolist()
    # the tuple form gives the same table
    tup = (entries["region"], entries["month"], entries["features"])
    assert hmm_count_table(tup, shape=(3, 7), n_values=list(n_values))[0].tolist() == ref.tolist()


def _neighbour_changes(entries, shape, n_values, move_step=False):
    """Max L1 and squared-L2 change of the table over every replace-one neighbour."""
    base, _ = hmm_count_table(entries, shape=shape, n_values=n_values)
    steps = list(itertools.product(range(shape[0]), range(shape[1])))
    best1 = best2 = 0
    for i in range(len(entries["region"])):
        options = steps if move_step else [(entries["region"][i], entries["month"][i])]
        for (r, t), x in itertools.product(options, itertools.product(*map(range, n_values))):
            e = {k: np.array(v, copy=True) for k, v in entries.items()}
            e["region"][i], e["month"][i], e["features"][i] = r, t, x
            d = hmm_count_table(e, shape=shape, n_values=n_values)[0] - base
            best1, best2 = max(best1, np.abs(d).sum()), max(best2, (d**2).sum())
    return best1, best2


@pytest.mark.parametrize("n_values", [(2,), (2, 2, 2), (3,), (2, 3), (4, 2, 3)])
def test_sensitivity_brute_force(n_values):
    """Exact: the maximum over all replace-one neighbours (features of one entry replaced,
    its step kept: N public) of the L1 change is F_bin + 2 F_cat, the squared L2 the same."""
    rng = np.random.default_rng(2)
    entries = _entries(rng, 4, (2, 2), n_values)
    l1, l2sq = _neighbour_changes(entries, (2, 2), n_values)
    m = sum(1 if v == 2 else 2 for v in n_values)
    assert (l1, l2sq) == (m, m)
    sens = hmm_count_sensitivity(n_values)
    assert sens[0] == m and sens[1] ** 2 >= m and np.nextafter(sens[1], 0) ** 2 < m


def test_sensitivity_needs_public_steps():
    """Control of the neighbour relation: if an entry could also move to another step, binary
    features would change by 2F (so entries_per_step must be public, as documented)."""
    entries = {"region": np.array([0, 1]), "month": np.array([0, 0]), "features": np.ones((2, 3))}
    l1, _ = _neighbour_changes(entries, (2, 1), (2, 2, 2), move_step=True)
    assert l1 == 6 > hmm_count_sensitivity((2, 2, 2))[0]


def test_release_calibration_and_noise():
    rng = np.random.default_rng(3)
    entries = _entries(rng, 300, (2, 5), (2,) * 5)
    true, n = hmm_count_table(entries, shape=(2, 5))
    # the default epsilon= path is exact (two-sided geometric at the table's L1 sensitivity)
    default = release_hmm_counts(entries, shape=(2, 5), epsilon=0.5, rng=rng)
    assert default.mechanism == pmdp.Geometric(epsilon=0.5, sensitivity=5)
    assert default.counts.dtype == np.int64 and default.guarantee().epsilon <= 0.5
    # the paper's Laplace noise, behind the floating-point opt-in
    rel = release_hmm_counts(
        entries,
        shape=(2, 5),
        mechanism=functools.partial(pmdp.Laplace, epsilon=0.5),
        rng=np.random.default_rng(9),
        allow_float=True,
    )
    assert isinstance(rel, HMMCountsRelease)
    assert rel.mechanism == pmdp.Laplace(epsilon=0.5, sensitivity=5.0)
    assert rel.mechanism.scale == 10.0 and rel.guarantee().epsilon == 0.5
    noise = pmdp.Laplace(scale=10.0).sample_noise(true.size, np.random.default_rng(9))
    np.testing.assert_array_equal(rel.counts, true + noise.reshape(true.shape))
    np.testing.assert_array_equal(rel.entries_per_step, n)
    assert rel.cells == tuple((f, 1) for f in range(5)) and rel.binary
    assert not rel.counts.flags.writeable
    geo = release_hmm_counts(
        entries, shape=(2, 5), mechanism=functools.partial(pmdp.Geometric, epsilon=1.0), rng=rng
    )
    assert geo.mechanism.sensitivity == 5 and geo.counts.dtype == np.int64
    gau = release_hmm_counts(
        entries,
        shape=(2, 5),
        mechanism=functools.partial(pmdp.Gaussian, rho=0.5),
        rng=rng,
        allow_float=True,
    )
    assert gau.mechanism.sensitivity == hmm_count_sensitivity((2,) * 5)[1]
    with pytest.raises(ValueError, match="below"):
        release_hmm_counts(
            entries, shape=(2, 5), mechanism=pmdp.Laplace(epsilon=1.0), rng=rng, allow_float=True
        )


def test_plugin_statistics_by_hand():
    entries = {"region": [0, 0, 0], "month": [0, 0, 1], "features": [[1, 2], [0, 0], [1, 1]]}
    rel = release_hmm_counts(
        entries,
        shape=(1, 2),
        n_values=[2, 3],
        mechanism=pmdp.Laplace(scale=1e-9, sensitivity=3.0),
        rng=np.random.default_rng(0),
        allow_float=True,
    )
    s, off = rel.plugin_statistics()
    assert off.tolist() == [0, 2, 5]
    np.testing.assert_allclose(s[0], [[1, 1, 1, 0, 1], [0, 1, 0, 1, 0]], atol=1e-6)
    # projection to [0, N]: a negative release and one above N
    fake = HMMCountsRelease(
        np.array([[[-3.0, 7.5, 0.2, 1.0]]]), np.array([[2]]), (2, 3), rel.mechanism, (3.0, 2.0)
    )
    s, _ = fake.plugin_statistics()
    np.testing.assert_allclose(s[0, 0], [2.0, 0.0, 2.0, 0.2, 1.0])


def test_plugin_gibbs_is_the_kernel():
    """The wrapper hands the kernel the projected statistics, the prior and the rng stream
    (identical draws), and turns transition counts into E[A | states] by hand."""
    rng = np.random.default_rng(4)
    entries = _entries(rng, 200, (2, 6), (2, 3))
    rel = release_hmm_counts(entries, shape=(2, 6), n_values=[2, 3], epsilon=2.0, rng=rng)
    prior = HMMPrior(init=[1.0, 2.0], transition=[[3.0, 1.0], [1.0, 3.0]], emission=0.5)
    res = rel.plugin_gibbs(2, draws=7, tune=3, prior=prior, rng=11)
    s, off = rel.plugin_statistics()
    g = np.random.default_rng(11)
    z0 = g.integers(0, 2, size=(2, 6))
    kp = PluginPrior(np.array([1.0, 2.0]), np.array([[3.0, 1.0], [1.0, 3.0]]), np.full(5, 0.5))
    ref = plugin_gibbs_chain(s, off, z0, kp, (3, 7), g)
    np.testing.assert_array_equal(res.states, ref.states)
    np.testing.assert_array_equal(res.emissions[1], ref.emissions[:, :, 2:5])
    n = ref.transition_counts[-1]
    a = np.array([[3.0, 1.0], [1.0, 3.0]]) + n
    np.testing.assert_allclose(res.transition[-1], a / a.sum(axis=1, keepdims=True), rtol=1e-15)
    assert res.init.shape == (7, 2) and np.allclose(res.init.sum(axis=1), 1.0)


def test_model_likelihood_is_the_exact_marginal():
    """The model's release term equals, to 1e-10, the hand sum over true counts
    log sum_y Binomial(y; N, phi[f, s]) Laplace(z - y; b), at an arbitrary point."""
    rng = np.random.default_rng(5)
    entries = _entries(rng, 60, (2, 3), (2, 2))
    rel = release_hmm_counts(
        entries,
        shape=(2, 3),
        mechanism=functools.partial(pmdp.Laplace, epsilon=1.0),
        rng=rng,
        allow_float=True,
    )
    model = rel.model(2, prior=HMMPrior(transition=[[4.0, 1.0], [1.0, 4.0]]))
    phi = np.array([[0.2, 0.7], [0.9, 0.4]])
    z = np.array([[0, 1, 1], [1, 0, 0]])
    point = model.initial_point()
    point["emission_logodds__"] = np.log(phi / (1 - phi))
    point["states"] = z
    lp = model.compile_logp(vars=[model["counts"]], sum=True)(point)
    ref = 0.0
    b = rel.mechanism.scale
    for r, t, f in itertools.product(range(2), range(3), range(2)):
        n = rel.entries_per_step[r, t]
        y = np.arange(n + 1)
        terms = stats.binom.logpmf(y, n, phi[f, z[r, t]]) + stats.laplace.logpdf(
            rel.counts[r, t, f] - y, scale=b
        )
        ref += np.logaddexp.reduce(terms)
    np.testing.assert_allclose(lp, ref, rtol=1e-10)
    # the states are one MarkovChain per region with the shared init and transition
    point["transition_simplex__"] = np.array([[0.8], [-0.3]])
    point["init_probs_simplex__"] = np.array([0.4])
    outs = model.replace_rvs_by_values([model["init_probs"], model["transition"]])
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore")
    pi, a = fn(point)
    lps = model.compile_logp(vars=[model["states"]], sum=True)(point)
    ref = sum(np.log(pi[zr[0]]) + np.log(a[zr[:-1], zr[1:]]).sum() for zr in z)
    np.testing.assert_allclose(lps, ref, rtol=1e-12)


def test_model_takes_categorical():
    """A 3-valued feature gets its own Dirichlet emissions and noisy-row release (exactness:
    tests/releases/test_hmm_categorical.py); the plug-in sampler takes it too."""
    rng = np.random.default_rng(6)
    entries = _entries(rng, 30, (1, 3), (2, 3))
    rel = release_hmm_counts(entries, shape=(1, 3), n_values=[2, 3], epsilon=1.0, rng=rng)
    model = rel.model(2)
    assert {v.name for v in model.observed_RVs} == {"counts", "counts_1"}
    assert model.named_vars_to_dims["emission_1"] == ("state", "value_1")
    assert rel.plugin_gibbs(2, draws=2, tune=1, rng=0).emissions[1].shape == (2, 2, 3)


def test_validation_errors_name_the_argument():
    rng = np.random.default_rng(7)
    good = _entries(rng, 10, (2, 3), (2, 2))
    release = functools.partial(release_hmm_counts, rng=rng)
    with pytest.raises(ValueError, match="shape"):
        release(good, shape=(2,), epsilon=1.0)
    with pytest.raises(ValueError, match="shape\\[1\\]"):
        release(good, shape=(2, 0), epsilon=1.0)
    with pytest.raises(ValueError, match="region"):
        release(good, shape=(1, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="month"):
        release(good, shape=(2, 2), epsilon=1.0)
    with pytest.raises(ValueError, match="features"):
        release(dict(good, features=good["features"] + 1), shape=(2, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="features"):
        release(dict(good, features=good["features"] + 0.5), shape=(2, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="n_values"):
        release(good, shape=(2, 3), n_values=1, epsilon=1.0)
    with pytest.raises(ValueError, match="n_values"):
        release(good, shape=(2, 3), n_values=[2, 2, 2], epsilon=1.0)
    with pytest.raises(ValueError, match="entries"):
        release({"region": good["region"]}, shape=(2, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="same length"):
        release(dict(good, month=good["month"][:-1]), shape=(2, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        release(good, shape=(2, 3))
    with pytest.raises(ValueError, match="exactly one"):
        release(good, shape=(2, 3), epsilon=1.0, mechanism=pmdp.Laplace(epsilon=1.0))
    with pytest.raises(ValueError, match="epsilon"):
        release(good, shape=(2, 3), epsilon=float("nan"))
    with pytest.raises(ValueError, match=r"NaN|finite"):
        release(dict(good, region=np.array([np.nan] * 10)), shape=(2, 3), epsilon=1.0)
    rel = release(good, shape=(2, 3), epsilon=1.0)
    with pytest.raises(ValueError, match="n_states"):
        rel.plugin_gibbs(0)
    with pytest.raises(ValueError, match=r"prior\.transition"):
        rel.plugin_gibbs(2, prior=HMMPrior(transition=[[1.0, -1.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"prior\.init"):
        rel.model(3, prior=HMMPrior(init=[1.0, 1.0]))
    with pytest.raises(ValueError, match=r"prior\.emission"):
        rel.model(2, prior=HMMPrior(emission=float("nan")))
    with pytest.raises(TypeError, match="prior"):
        rel.plugin_gibbs(2, prior={"init": 1.0})
    with pytest.raises(TypeError, match="prior"):
        rel.model(2, prior={"init": 1.0})
    assert isinstance(rel.model(2), pm.Model)


# slow: a pm.sample run. In the default run the model's likelihood is the exact marginal
# (test_model_likelihood_is_the_exact_marginal); FFBS on Privatized-Binomial emissions, and FFBS
# with NUTS, are checked against exact posteriors in tests/step_methods/test_ffbs.py
@pytest.mark.slow
def test_model_samples_with_ffbs_and_nuts():
    """pm.sample assigns FFBS to the states and NUTS to the rest, and draws valid values."""
    from pymc.sampling.mcmc import assign_step_methods

    from pymc_dp.step_methods.ffbs import FFBS

    rng = np.random.default_rng(8)
    entries = _entries(rng, 40, (2, 4), (2, 2))
    rel = release_hmm_counts(entries, shape=(2, 4), epsilon=2.0, rng=rng)
    model = rel.model(2)
    with model:
        _, selected = assign_step_methods(model)
        kinds = {method: {v.name for v in vs} for method, vs in selected.items()}
        assert kinds == {
            FFBS: {"states"},
            pm.NUTS: {"init_probs_simplex__", "transition_simplex__", "emission_logodds__"},
        }
        idata = pm.sample(
            draws=10,
            tune=10,
            chains=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    s = np.asarray(idata.posterior["states"])
    phi = np.asarray(idata.posterior["emission"])
    assert s.shape == (1, 10, 2, 4) and set(np.unique(s)) <= {0, 1}
    assert phi.shape == (1, 10, 2, 2) and np.all((phi > 0) & (phi < 1))


def test_model_takes_the_release_as_data_and_starts_from_a_c_ordered_modal_path():
    """The release enters as pm.Data (compiled functions do not depend on it: two releases of
    one shape share numba's cache), and the states start from the chain's modal path at the
    priors' means, C-ordered: MarkovChain's own support point (a Fortran-ordered start made
    numba compile the NUTS logp a second time, for the C-ordered states of the FFBS step)."""
    from pytensor.compile.sharedvalue import SharedVariable

    rng = np.random.default_rng(9)
    entries = _entries(rng, 50, (3, 5), (2, 2))
    rel = release_hmm_counts(entries, shape=(3, 5), epsilon=1.0, rng=rng)
    # start in state 1 (init mean 2/3), then 1 -> 0 -> 2 -> 2 ... (row argmax)
    prior = HMMPrior(
        init=[1.0, 2.0, 0.5], transition=[[1.0, 1.0, 3.0], [4.0, 1.0, 1.0], [1.0, 1.0, 2.0]]
    )
    model = rel.model(3, prior=prior)
    assert isinstance(model["released_counts"], SharedVariable)
    assert isinstance(model["entries_per_step"], SharedVariable)
    np.testing.assert_array_equal(model["released_counts"].get_value(), rel.counts)
    np.testing.assert_array_equal(model["entries_per_step"].get_value(), rel.entries_per_step)
    start = model.initial_point()["states"]
    assert start.flags["C_CONTIGUOUS"] and start.dtype == np.int64
    np.testing.assert_array_equal(start, np.tile([1, 0, 2, 2, 2], (3, 1)))
    # negative control: the same start with the default (symmetric) prior is state 0 throughout
    np.testing.assert_array_equal(rel.model(3).initial_point()["states"], np.zeros((3, 5)))


def _study():
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "study_private_hmm.py"
    spec = importlib.util.spec_from_file_location("study_private_hmm", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_study_score_and_tiny_run(tmp_path):
    """The case study's score takes the best label permutation (hand case), and the script runs
    end to end at a tiny size without the PyMC fits."""
    mod = _study()
    truth = np.array([[0, 0, 1, 1]])
    draws = np.array([[[1, 1, 0, 0]], [[1, 1, 0, 1]], [[1, 0, 0, 0]]])  # labels swapped
    phi = np.array([[0.2, 0.8]])
    phi_draws = np.array([[[0.7, 0.3]], [[0.9, 0.1]]])  # mean (0.8, 0.2): swapped
    acc, mae = mod.score(draws, phi_draws, truth, phi)
    assert acc == 1.0 and mae == pytest.approx(0.0, abs=1e-12)
    acc, mae = mod.score(draws, phi_draws[:, :, ::-1], truth, phi)
    assert acc == 1.0 and mae == pytest.approx(0.6)
    out = tmp_path / "hmm.md"
    mod.main(
        [
            "--shape",
            "3",
            "12",
            "--repeats",
            "2",
            "--states",
            "2",
            "--out",
            str(out),
            "--methods",
            "non-private",
            "plug-in",
        ]
    )
    text = out.read_text()
    assert "| 2 | 0.1 | plug-in | 2 |" in text and "noise-aware |" not in text
