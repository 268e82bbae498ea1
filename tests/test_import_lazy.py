"""``import pymc_dp`` compiles nothing and imports no slow optional module (issue 14).

Structural checks, each in a fresh interpreter (a subprocess: this pytest process has long since
imported and compiled everything), no timing thresholds:

* after ``import pymc_dp``: no numba ``numba:compile`` event, no numba dispatcher of the package
  with a compiled or cache-loaded signature, no numba ufunc built; neither jax nor PyTensor's
  numba backend nor SciPy's ``special`` / ``stats`` / ``optimize`` / ``linalg`` imported;
* negative controls: the same detectors report a kernel called once (dispatcher and ufunc) and
  a slow module once imported, so they can fail;
* the numba lowerings deferred to the import of PyTensor's numba backend are all registered once
  it is imported, whichever of the two is imported first, and a graph with pymc_dp Ops compiles
  natively (no object-mode fallback warning).

No statistics here: every assertion is deterministic (false-alarm rate 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: modules that ``import pymc`` does not import and ``import pymc_dp`` must not either
SLOW_MODULES = [
    "jax",
    "pytensor.link.jax.dispatch",
    "pytensor.link.numba.dispatch",
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "scipy.linalg",
]

_DETECTORS = """
import json, sys
import numba
from numba.core import event as ev
from numba.core.dispatcher import Dispatcher

def package_objects():
    from pymc_dp._cache import _LazyUFunc
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "pymc_dp" or name.startswith("pymc_dp."):
            for attr, value in list(vars(module).items()):
                if isinstance(value, (Dispatcher, _LazyUFunc)):
                    found[f"{name}.{attr}"] = value
    return found

def compiled():
    from pymc_dp._cache import _LazyUFunc
    out = []
    for key, obj in package_objects().items():
        if isinstance(obj, _LazyUFunc):
            if obj.built():
                out.append(key)
        elif obj.signatures or sum(obj._cache_hits.values()):
            out.append(key)
    return sorted(out)

def slow_imported(names):
    return [m for m in names if m in sys.modules]

IMPORTED_BY = {}  # slow module -> the pymc_dp line whose import brought it in (for messages)

class _Witness:
    watched = ()

    def find_spec(self, fullname, path, target=None):
        if fullname in self.watched and fullname not in IMPORTED_BY:
            import traceback
            lines = [f"{f.filename.rsplit('pymc_dp', 1)[-1]}:{f.lineno}"
                     for f in traceback.extract_stack() if "/pymc_dp/" in f.filename]
            IMPORTED_BY[fullname] = lines[-1] if lines else "?"
        return None

def watch(names):
    witness = _Witness()
    witness.watched = tuple(names)
    sys.meta_path.insert(0, witness)
"""


def _run(body: str) -> dict:
    """Run ``body`` (after the detectors) in a fresh interpreter; its last stdout line is JSON."""
    code = _DETECTORS + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_compiles_nothing_and_imports_no_slow_module():
    """After ``import pymc_dp``: nothing compiled, nothing slow imported; controls: both fire."""
    out = _run(
        f"""
        import pymc  # the baseline: what pymc itself imports is not pymc_dp's cost
        slow = {SLOW_MODULES!r}
        before = slow_imported(slow)
        watch(slow)
        with ev.install_recorder("numba:compile") as rec:
            import pymc_dp
        report = {{
            "pymc_imports": before,
            "compile_events": len(rec.buffer),
            "n_kernels": len(package_objects()),
            "compiled": compiled(),
            "slow": slow_imported(slow),
            "imported_by": dict(IMPORTED_BY),
        }}
        # negative controls: one njit kernel and one lazy ufunc used once, one slow module
        from pymc_dp.math import bessel, poisson
        poisson.log_poisson_scalar(3.0, 2.5)
        bessel.log_iv(1.0, 2.0)
        import scipy.special
        report["compiled_after_use"] = compiled()
        report["slow_after_use"] = slow_imported(slow)
        print(json.dumps(report))
        """
    )
    assert out["pymc_imports"] == [], "pymc itself imports one of SLOW_MODULES: update the list"
    assert out["n_kernels"] > 50  # the detector sees the package's kernels
    assert out["compile_events"] == 0
    assert out["compiled"] == []
    assert out["slow"] == [], f"imported by pymc_dp/...: {out['imported_by']}"
    # the same detectors report use (so the checks above can fail)
    assert "pymc_dp.math.poisson.log_poisson_scalar" in out["compiled_after_use"]
    assert "pymc_dp.math.bessel._log_iv_ufunc" in out["compiled_after_use"]
    assert "scipy.special" in out["slow_after_use"]


_REGISTRIES = """
def registered():
    from pytensor.link.numba.dispatch.basic import numba_funcify
    from pytensor.link.numba.dispatch.random import numba_core_rv_funcify
    names = set()
    for registry in (numba_funcify.registry, numba_core_rv_funcify.registry):
        names |= {f"{t.__module__}.{t.__qualname__}" for t in registry
                  if t.__module__.startswith("pymc_dp.")}
    return sorted(names)
"""

#: the Op types whose numba lowering pymc_dp registers (at least these)
EXPECTED_LOWERINGS = {
    "pymc_dp.distributions.bessel.BesselLogPMF",
    "pymc_dp.distributions.bessel.BesselRV",
    "pymc_dp.distributions.discrete_laplace.DiscreteLaplaceRV",
    "pymc_dp.distributions.discrete_normal.DiscreteNormalRV",
    "pymc_dp.distributions.marginal_poisson.PoissonTwoSidedExpLogp",
    "pymc_dp.distributions.marginals.StaticWindow",
    "pymc_dp.distributions.markov_chain.MarkovChainRV",
    "pymc_dp.distributions.skellam.SkellamLogPMF",
    "pymc_dp.distributions.skellam.SkellamRV",
    "pymc_dp.math.bessel.LogIv",
    "pymc_dp.math.bessel.LogIve",
}


@pytest.mark.parametrize("order", ["pymc_dp_first", "numba_backend_first"])
def test_numba_lowerings_registered_whichever_import_comes_first(order):
    """Every deferred lowering is registered once PyTensor's numba backend is imported."""
    first, second = "pymc_dp", "pytensor.link.numba.dispatch"
    if order == "numba_backend_first":
        first, second = second, first
    out = _run(
        _REGISTRIES
        + f"""
import warnings
import {first}
import {second}
import numpy as np
import pymc as pm
import pymc_dp as pmdp
report = {{"registered": registered()}}
with warnings.catch_warnings():
    warnings.simplefilter("error")  # an object-mode fallback warns
    draws = pm.draw(pmdp.Skellam.dist(mu1=np.float64(3.0), mu2=np.float64(2.0)), draws=5,
                    random_seed=1)
    logp = pm.logp(pmdp.Skellam.dist(mu1=np.float64(3.0), mu2=np.float64(2.0)), 1).eval()
report["draws"] = np.asarray(draws).tolist()
report["logp"] = float(logp)
print(json.dumps(report))
"""
    )
    assert EXPECTED_LOWERINGS <= set(out["registered"]), EXPECTED_LOWERINGS - set(out["registered"])
    assert len(out["draws"]) == 5
    # scipy.stats.skellam.logpmf(1, 3, 2) = -1.6981415689488997
    assert out["logp"] == pytest.approx(-1.6981415689488997, rel=1e-12)


def test_registrations_wait_for_the_numba_backend():
    """Before PyTensor's numba backend is imported the registrations wait (nothing imported for
    them); its import runs every one of them and leaves none waiting."""
    out = _run(
        """
import pymc_dp
from pymc_dp import _cache
waiting = sorted(_cache._waiting)
n_waiting = len(_cache._waiting.get("pytensor.link.numba.dispatch", []))
import pytensor.link.numba.dispatch
print(json.dumps({"waiting": waiting, "n_waiting": n_waiting,
                  "after": sorted(_cache._waiting)}))
"""
    )
    assert out["waiting"] == ["pytensor.link.numba.dispatch"]
    assert out["n_waiting"] >= len(EXPECTED_LOWERINGS)
    assert out["after"] == []


def _lazy_ufuncs():
    import pymc_dp.distributions.skellam
    import pymc_dp.kernels.bessel_sampling
    import pymc_dp.math.bessel
    import pymc_dp.math.poisson
    from pymc_dp._cache import _LazyUFunc

    mods = (
        pymc_dp.distributions.skellam,
        pymc_dp.kernels.bessel_sampling,
        pymc_dp.math.bessel,
        pymc_dp.math.poisson,
    )
    return [v for m in mods for v in vars(m).values() if isinstance(v, _LazyUFunc)]


@pytest.mark.parametrize("ufunc", _lazy_ufuncs(), ids=lambda u: f"{u.__module__}.{u.__name__}")
def test_lazy_ufunc_is_the_vectorized_kernel(ufunc):
    """A lazily built ufunc gives, bit for bit, its scalar function's values; it keeps its
    declared float64 signatures and pickles by reference (as a module-level numba ufunc)."""
    import pickle

    import numpy as np

    rng = np.random.default_rng(14)
    args = [np.abs(rng.standard_cauchy(40)) * 3.0 for _ in range(ufunc.nin)]
    args[0] = np.floor(args[0])  # counts / orders first (integral values, as in the package)
    with np.errstate(all="ignore"):
        got = ufunc(*args)
        want = np.array([ufunc._py_func(*(float(a[i]) for a in args)) for i in range(40)])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    assert all(t.endswith("->d") and t.startswith(("d", "l")) for t in ufunc.types)
    assert pickle.loads(pickle.dumps(ufunc)) is ufunc
