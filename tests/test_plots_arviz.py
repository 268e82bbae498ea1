"""ArviZ 1.x plots of releases of every shape (issue 26).

``az.plot_ppc_dist`` reduces each predictive draw over its observation dimensions, so a release
that is one number (a noisy count) has nothing to reduce and ArviZ raises ``TypeError: n_dims
must be one or higher``. :func:`pymc_dp.diagnostics.plot_release_ppc` draws one-number releases
with ``az.plot_ppc_tstat`` (the predictive distribution of the release over the draws, the
observed value marked) and releases with dimensions with ``az.plot_ppc_dist``.

The groups come from a real model (``pm.sample_prior_predictive`` of Privatized releases of shape
``()``, ``(4,)`` and ``(2, 3)`` and a one-number ``Release`` of latent records, the README's
form): the same forward graph ``pm.sample_posterior_predictive`` draws from, without compiling
NUTS, so the test stays within a few seconds. The checks are exact (matplotlib Agg backend): the
number of panels, the observed marker at the observed value, and each plotted ECDF equal to the
empirical CDF of the values it claims to show, computed independently with numpy; no statistics,
false-alarm rate 0. Negative controls: ``az.plot_ppc_dist`` itself fails on the one-number
release, and the same ECDF check rejects the ECDF of shifted values.
"""

import matplotlib

matplotlib.use("Agg")

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_dp as pmdp
from pymc_dp.diagnostics import plot_release_ppc

OBS = {
    "a": np.int64(5),
    "b": np.array([3, 6, 4, 2]),
    "c": np.array([[3, 6, 4], [1, 2, 7]]),
    "r": np.float64(10.7),
}


@pytest.fixture
def idata(rng):
    """``posterior``, ``posterior_predictive`` and ``observed_data`` as PyMC lays them out."""
    mech = pmdp.Geometric(epsilon=1.0)
    with pm.Model():
        lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.5))
        for name in "abc":
            pmdp.Privatized(name, pm.Poisson.dist(mu=lam), mechanism=mech, observed=OBS[name])
        p = pm.Beta("p", np.float64(1.0), np.float64(1.0))
        x = pm.Bernoulli("x", p=p, shape=30)
        pmdp.Release("r", x.sum(), pmdp.Laplace(epsilon=0.5), observed=OBS["r"])
        prior = pm.sample_prior_predictive(draws=120, random_seed=rng)
    out = xr.DataTree.from_dict(
        {
            "posterior": prior["prior"].to_dataset(),
            "posterior_predictive": prior["prior_predictive"].to_dataset(),
            "observed_data": prior["observed_data"].to_dataset(),
        }
    )
    yield out
    plt.close("all")


def _ecdf_matches(line, values):
    """The line's y equals the empirical CDF of ``values`` at the line's x (numpy reference)."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    ref = np.searchsorted(np.sort(np.ravel(values)), x, side="right") / np.size(values)
    return x.size > 0 and np.allclose(y, ref, rtol=0, atol=1e-12)


def test_layout_is_pymcs(idata):
    assert idata["observed_data"]["a"].ndim == 0 and idata["observed_data"]["r"].ndim == 0
    assert idata["posterior_predictive"]["c"].dims[:2] == ("chain", "draw")


def test_plot_ppc_dist_fails_on_one_number_release(idata):
    """Negative control: the failure of the issue, which plot_release_ppc avoids."""
    with pytest.raises(TypeError, match="n_dims must be one or higher"):
        az.plot_ppc_dist(idata, var_names=["a"], kind="ecdf")


def test_one_number_releases(idata):
    pc = plot_release_ppc(idata, var_names=["a", "r"], kind="ecdf")
    assert len(pc.viz["figure"].item().axes) == 2
    for name in ("a", "r"):
        marker = pc.viz["observed_tstat"][name].item()
        assert marker.get_offsets()[0][0] == pytest.approx(float(OBS[name]), abs=0)
        draws = idata["posterior_predictive"][name].values
        line = pc.viz["dist"][name].item()
        assert _ecdf_matches(line, draws)
        assert not _ecdf_matches(line, draws + 1)  # the check can fail


def test_releases_with_dimensions(idata):
    pc = plot_release_ppc(idata, var_names=["b", "c"], kind="ecdf", num_samples=20)
    assert len(pc.viz["figure"].item().axes) == 2
    for name in ("b", "c"):
        assert pc.viz["predictive_dist"][name].size == 20
        observed = pc.viz["observed_dist"][name].item()
        assert _ecdf_matches(observed, OBS[name])
        assert not _ecdf_matches(observed, OBS[name] + 1)
        # each predictive line is the ECDF of one draw's values
        pred = pc.viz["predictive_dist"][name]
        chain, draw = int(pred["chain"][0]), int(pred["draw"][0])
        one_draw = idata["posterior_predictive"][name].sel(chain=chain, draw=draw).values
        assert _ecdf_matches(pred.values[0], one_draw)


def test_default_selection_and_posterior_plot(idata):
    with pytest.raises(ValueError, match=r"var_names=\['a', 'r'\].*var_names=\['b', 'c'\]"):
        plot_release_ppc(idata)
    only_shaped = idata.copy()
    only_shaped["observed_data"] = idata["observed_data"].to_dataset()[["b", "c"]]
    pc = plot_release_ppc(only_shaped)  # counts: ECDFs, without ArviZ's warning on discrete KDEs
    assert set(pc.viz["observed_dist"].data_vars) == {"b", "c"}
    assert _ecdf_matches(pc.viz["observed_dist"]["b"].item(), OBS["b"])
    # the posterior of the parameters: ArviZ 1.x's plot_dist (successor of plot_posterior)
    pc = az.plot_dist(idata, var_names=["lam", "p"])
    assert len(pc.viz["figure"].item().axes) == 2


def test_errors_name_the_fix(idata):
    no_pp = xr.DataTree.from_dict({"observed_data": idata["observed_data"].to_dataset()})
    with pytest.raises(ValueError, match="sample_posterior_predictive"):
        plot_release_ppc(no_pp)
    with pytest.raises(ValueError, match=r"\['zz'\].*choose among"):
        plot_release_ppc(idata, var_names=["a", "zz"])
    with pytest.raises(ValueError, match="group="):
        plot_release_ppc(idata, group="posterior")
    with pytest.raises(TypeError, match="var_names"):
        plot_release_ppc(idata, var_names=[1])
