"""Issue 9 benchmark: one Skellam-Bessel augmentation sweep against a numpy binomial draw.

The sweep is :func:`pymc_dp.kernels.count_augmentation.count_augmentation_sweep` (Schein et
al. 2019, eqs. 13-16; the public call, input validation included), one Gibbs sweep over all
counts of a chain that has run ``BURN`` sweeps from the prior of the auxiliary rates.

**Reference** (the ratio's unit): ``rng.binomial(n, p)`` with numpy on arrays of the same size,
where ``n_i`` is the sweep's own binomial size :math:`\\tilde y^+_i` (drawn by eqs. 13-14 from the
same pre-sweep state, :func:`augment_true_counts`) and ``p_i = mu_i / (mu_i + lambda^+_i)`` its
own binomial probability. The ratio of a setting is the median over repeats of the per-repeat
ratio (sweep and reference timed in turn within each repeat).

Settings (alpha = exp(-epsilon), epsilon in {0.5, 1, 2.5}):

* ``dense``: rates ``mu = 6 exp(0.5 N(0, 1))``;
* ``sparse``: factorization-like rates ``mu = theta @ phi`` with ``theta`` (n/1000 x 10) and
  ``phi`` (10 x 1000) Gamma(0.2, 1): mean 0.4, most rates far below 1;

true counts ``y ~ Pois(mu)``, released ``z = y + 2Geo(alpha)``.

Pieces (``--pieces``, at one size): per-count time of the Bessel draw alone (on the sweep's own
``(|z|, (lambda^+ + mu) lambda^-)``), of the binomial alone (on ``(n_i, p_i)``) and of the two
Gamma redraws alone (on the sweep's own ``g^+, g^-``), each in a numba loop, for the library's
samplers and for numba's built-ins (numpy's algorithms: ``Generator.binomial``,
``Generator.gamma``); "loop" is the same loop with no draw (memory traffic and call overhead).

Usage: ``.venv/bin/python benchmarks/bench_count_augmentation.py [--out FILE] [--max-n 1e7]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np

from pymc_dp.kernels import bessel_sampling as bs
from pymc_dp.kernels import count_augmentation as ca
from pymc_dp.mechanisms.geometric import Geometric

__all__ = ["main", "measure", "pieces", "setting"]

EPSILONS = (0.5, 1.0, 2.5)
KINDS = ("dense", "sparse")
SIZES = ((10**4, 41), (10**5, 15), (10**6, 7), (10**7, 3))  # (n, repeats)
BURN = 6


def rates(kind, n, rng):
    """Poisson rates of ``n`` counts: ``dense`` (6 e^{0.5 N(0,1)}), ``large`` (1000 e^{0.5
    N(0,1)}) or ``sparse`` (theta @ phi with Gamma(0.2, 1) factors, K = 10)."""
    if kind in ("dense", "large"):
        return (6.0 if kind == "dense" else 1000.0) * np.exp(0.5 * rng.standard_normal(n))
    theta = rng.gamma(0.2, 1.0, (n // 1000, 10))
    phi = rng.gamma(0.2, 1.0, (10, 1000))
    return (theta @ phi).ravel()


def release(mu, alpha, rng):
    """Poisson true counts at ``mu`` released by the library's geometric mechanism."""
    return Geometric(alpha=alpha).release(rng.poisson(mu), rng=rng)


def setting(kind, n, eps, seed=0):
    """``(z, mu, alpha, state)`` of a chain after ``BURN`` sweeps."""
    rng = np.random.default_rng(seed)
    alpha = float(np.exp(-eps))
    mu = rates(kind, n, rng)
    z = release(mu, alpha, rng)
    state = ca.init_aux_rates(alpha, (n,), rng)
    for _ in range(BURN):
        ca.count_augmentation_sweep(z, mu, alpha, state, rng)
    return z, mu, alpha, state


def reference_inputs(z, mu, state, rng):
    """The sweep's own binomial sizes and probabilities (and its g+, g-) from ``state``."""
    y, gp, gm = ca.augment_true_counts(z, mu, state, rng)
    return y + gp, mu / (mu + state.lam_plus), gp, gm


def _timed(fn):
    """Wall seconds of one call (``_timed_both`` adds this thread's CPU seconds)."""
    return _timed_both(fn)[0]


def _timed_both(fn):
    w, c = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - w, time.thread_time() - c


def measure(kind, n, eps, repeats):
    """Median wall times of sweep and reference, the medians of the per-repeat ratios by wall
    and by thread CPU time, and the reference's n_i, p_i."""
    z, mu, alpha, state = setting(kind, n, eps)
    rng = np.random.default_rng(1)
    n_i, p_i, _, _ = reference_inputs(z, mu, state, rng)
    sweep = lambda: ca.count_augmentation_sweep(z, mu, alpha, state, rng)  # noqa: E731
    ref = lambda: rng.binomial(n_i, p_i)  # noqa: E731
    t = np.array([[_timed_both(sweep), _timed_both(ref)] for _ in range(repeats)])
    # t[r, j, k]: repeat r, j = sweep / reference, k = wall / CPU
    ratio = np.median(t[:, 0, :] / np.maximum(t[:, 1, :], 1e-9), axis=0)
    return np.median(t[:, 0, 0]), np.median(t[:, 1, 0]), ratio, n_i, p_i


@numba.njit
def _loop_only(rng, nu, x, out):
    for i in range(nu.size):
        out[i] = nu[i] + (x[i] > 1.0)


@numba.njit
def _bessel_lib(rng, nu, x, out):
    bitgen = rng.bit_generator
    for i in range(nu.size):
        out[i] = bs.bessel_draw_bitgen(bitgen, nu[i], x[i])


@numba.njit
def _bessel_lib_old(rng, nu, x, out):  # a checkout before bessel_draw_bitgen existed
    for i in range(nu.size):
        out[i] = bs.bessel_draw(rng, nu[i], 2.0 * np.sqrt(x[i]))


@numba.njit
def _binom_builtin(rng, n, p, out):
    for i in range(n.size):
        out[i] = rng.binomial(n[i], p[i])


@numba.njit
def _gamma_builtin(rng, gp, gm, alpha, out):
    for i in range(gp.size):
        out[i] = rng.gamma(1.0 + gp[i], alpha) + rng.gamma(1.0 + gm[i], alpha)


@numba.njit
def _binom_lib(rng, n, p, out):
    bitgen = rng.bit_generator
    for i in range(n.size):
        out[i] = ca._binomial_draw(bitgen, n[i], p[i], 1.0 - p[i])


@numba.njit
def _gamma_lib(rng, gp, gm, alpha, out):
    bitgen = rng.bit_generator
    for i in range(gp.size):
        out[i] = ca._gamma_int_draw(bitgen, gp[i], alpha) + ca._gamma_int_draw(bitgen, gm[i], alpha)


def _piece_fns():
    """Named piece timers ``f(rng, inputs) -> None``: the library's samplers (when the kernel
    module has them) and numba's built-ins."""
    fns = {
        "loop": lambda r, d: _loop_only(r, d["nu"], d["x"], d["oi"]),
        "bessel (library)": lambda r, d: (
            _bessel_lib if hasattr(bs, "bessel_draw_bitgen") else _bessel_lib_old
        )(r, d["nu"], d["x"], d["oi"]),
        "binomial (numba built-in)": lambda r, d: _binom_builtin(r, d["n"], d["p"], d["oi"]),
        "2 gamma (numba built-in)": lambda r, d: _gamma_builtin(
            r, d["gp"], d["gm"], d["alpha"], d["of"]
        ),
    }
    if hasattr(ca, "_binomial_draw"):
        fns["binomial (library)"] = lambda r, d: _binom_lib(r, d["n"], d["p"], d["oi"])
        fns["2 gamma (library)"] = lambda r, d: _gamma_lib(r, d["gp"], d["gm"], d["alpha"], d["of"])
    return fns


def pieces(kind, n, eps, repeats=5):
    """Per-count nanoseconds (median over repeats) of each piece on the sweep's own inputs."""
    z, mu, alpha, state = setting(kind, n, eps)
    rng = np.random.default_rng(2)
    n_i, p_i, gp, gm = reference_inputs(z, mu, state, rng)
    d = {
        "nu": np.abs(z).astype(np.float64),
        "x": (state.lam_plus + mu) * state.lam_minus,
        "n": n_i,
        "p": p_i,
        "gp": gp,
        "gm": gm,
        "alpha": alpha,
        "oi": np.empty(n, dtype=np.int64),
        "of": np.empty(n),
    }
    out = {}
    cpu = lambda f: _timed_both(f)[1]  # noqa: E731
    for name, f in _piece_fns().items():
        f(rng, d)  # compile / warm
        out[name] = np.median([cpu(lambda f=f: f(rng, d)) for _ in range(repeats)]) / n * 1e9
    ref = np.median([cpu(lambda: rng.binomial(n_i, p_i)) for _ in range(repeats)]) / n * 1e9
    out["numpy rng.binomial(n_i, p_i) (reference)"] = ref
    return out


def _header(t0):
    return [
        f"`benchmarks/bench_count_augmentation.py`: one augmentation sweep "
        "(`count_augmentation_sweep`, public call) against numpy `rng.binomial(n_i, p_i)` on the "
        "sweep's own binomial sizes n_i (y+ by eqs. 13-14 from the pre-sweep state) and "
        "probabilities p_i = mu_i / (mu_i + lambda+_i). Ratio: median of per-repeat ratios, by "
        "wall time and by this thread's CPU time (less sensitive to other jobs). "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared; load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end; one run, "
        f"{time.perf_counter() - t0:.0f} s; compile excluded.",
        "",
        "| setting | eps | n | repeats | mean n_i | mean p_i | sweep | numpy binomial "
        "| sweep / binomial (wall) | (CPU) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-n", type=float, default=1e7)
    ap.add_argument("--pieces-n", type=float, default=1e6)
    args = ap.parse_args()
    t0 = time.perf_counter()
    measure("dense", 10**4, 1.0, 2)  # compile
    rows = []
    for n, reps in [s for s in SIZES if s[0] <= args.max_n]:
        for kind in KINDS:
            for eps in EPSILONS:
                ts, tr, ratio, n_i, p_i = measure(kind, n, eps, reps)
                rows.append(
                    f"| {kind} | {eps:g} | 10^{round(np.log10(n))} | {reps} | {n_i.mean():.2f} "
                    f"| {p_i.mean():.3f} | {ts * 1e3:.2f} ms | {tr * 1e3:.2f} ms "
                    f"| {ratio[0]:.2f} | {ratio[1]:.2f} |"
                )
                print(rows[-1], flush=True)
    piece_rows = [
        "",
        f"Pieces, ns of thread CPU time per count at n = {args.pieces_n:.0e} (median of 5):",
        "",
    ]
    for kind in KINDS:
        for eps in EPSILONS:
            got = pieces(kind, int(args.pieces_n), eps)
            piece_rows.append(
                f"- {kind}, eps {eps:g}: " + "; ".join(f"{k} {v:.1f}" for k, v in got.items())
            )
            print(piece_rows[-1], flush=True)
    md = "\n".join(_header(t0) + rows + piece_rows)
    print(md)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(md + "\n")


if __name__ == "__main__":
    main()
