"""Benchmark: logp + gradient of a Privatized Poisson-Geometric model vs a plain Poisson model.

Both models have one parameter (``lam ~ Gamma``) and ``N = 10^5`` records; the plain model
observes the true counts, the Privatized one the geometric-noised releases of the same counts.
Reports the median time of one logp+gradient evaluation (the cost of a NUTS leapfrog step)
and the ratio. Goal: ratio <= 3.

Run: ``.venv/bin/python benchmarks/bench_privatized.py [N] [--per-count]`` (``--per-count``:
only the different-rate-per-count comparison; issue 9 goal <= 5x).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pymc as pm

from pymc_dp.distributions.privatized import Privatized
from pymc_dp.mechanisms.geometric import Geometric


def _timer(fn, x, repeats=30):
    fn(x)  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(n: int = 100_000, epsilon: float = 1.0, lam_true: float = 6.0) -> dict:
    rng = np.random.default_rng(2026)
    y = rng.poisson(lam_true, size=n)
    mech = Geometric(epsilon=epsilon)
    z = mech.release(y, rng=rng)

    with pm.Model() as plain:
        lam = pm.Gamma("lam", 2.0, 0.5)
        pm.Poisson("y", lam, observed=y)
    # constant observed counts let PyTensor fold the Poisson logp into sufficient statistics
    # (O(1) per evaluation); with pm.Data it is the usual O(N) elementwise evaluation
    with pm.Model() as plain_data:
        lam = pm.Gamma("lam", 2.0, 0.5)
        pm.Poisson("y", lam, observed=pm.Data("y_obs", y))
    with pm.Model() as private:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("z", pm.Poisson.dist(lam), mech, observed=z)

    out = {}
    # pm.Data releases: no per-distinct-value shortcut, one kernel evaluation per record
    with pm.Model() as private_data:
        lam = pm.Gamma("lam", 2.0, 0.5)
        Privatized("z", pm.Poisson.dist(lam), mech, observed=pm.Data("z_obs", z))
    models = (
        ("plain_folded", plain),
        ("plain", plain_data),
        ("privatized", private),
        ("privatized_data", private_data),
    )
    for name, model in models:
        t0 = time.perf_counter()
        f = model.logp_dlogp_function(ravel_inputs=True)
        f.set_extra_values({})
        x = np.array([np.log(lam_true)])
        f(x)
        compile_s = time.perf_counter() - t0
        logp, grad = f(x)
        assert np.isfinite(logp) and np.all(np.isfinite(grad))
        out[name] = _timer(f, x)
        out[name + "_compile_s"] = compile_s
    out["ratio"] = out["privatized"] / out["plain"]
    out.update(per_count(n, epsilon, lam_true))
    return out


def per_count(n: int = 100_000, epsilon: float = 1.0, lam_true: float = 6.0) -> dict:
    """A different rate per count (regression / factorization): no shared-rate table.

    Same counts and releases as :func:`main` (same seed); rates ``lam_true e^{0.1 N(0,1)}``.
    """
    rng = np.random.default_rng(2026)
    y = rng.poisson(lam_true, size=n)
    mech = Geometric(epsilon=epsilon)
    z = mech.release(y, rng=rng)
    mu_i = lam_true * np.exp(0.1 * rng.standard_normal(n))
    with pm.Model() as private_rec:
        b = pm.Normal("b", 0.0, 1.0)
        Privatized("z", pm.Poisson.dist(mu_i * pm.math.exp(b)), mech, observed=z)
    with pm.Model() as plain_rec:
        b = pm.Normal("b", 0.0, 1.0)
        pm.Poisson("y", mu_i * pm.math.exp(b), observed=y)
    out = {}
    for name, model in (("privatized_records", private_rec), ("plain_records", plain_rec)):
        f = model.logp_dlogp_function(ravel_inputs=True)
        f.set_extra_values({})
        out[name] = _timer(f, np.array([0.0]))
    return out


def _print_per_count(res: dict) -> None:
    print(
        f"per-count rates: plain {res['plain_records'] * 1e3:8.3f} ms, "
        f"Privatized {res['privatized_records'] * 1e3:8.3f} ms, "
        f"ratio {res['privatized_records'] / res['plain_records']:.1f}"
    )


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--per-count"]
    n = int(args[0]) if args else 100_000
    print(f"N = {n}")
    if "--per-count" in sys.argv[1:]:
        _print_per_count(per_count(n))
        sys.exit(0)
    res = main(n)
    print(f"plain Poisson, constant data (folded): {res['plain_folded'] * 1e3:8.3f} ms")
    print(f"plain Poisson, pm.Data (elementwise):  {res['plain'] * 1e3:8.3f} ms")
    print(f"Privatized Poisson + geometric:        {res['privatized'] * 1e3:8.3f} ms")
    print(f"Privatized, pm.Data releases:          {res['privatized_data'] * 1e3:8.3f} ms")
    _print_per_count(res)
    print(f"ratio Privatized / plain (pm.Data): {res['ratio']:.2f}")
    print(f"ratio both pm.Data:                 {res['privatized_data'] / res['plain']:.2f}")
    print(f"ratio Privatized / plain (folded):  {res['privatized'] / res['plain_folded']:.1f}")
