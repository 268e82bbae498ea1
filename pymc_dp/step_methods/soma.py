r"""SOMA sweep of a record block (single offer, multiple attempts; Xiong & Ju 2025).

An alternative to the data-augmentation sweep of Ju, Awan, Gong & Rao (2022) for one block of
records of :class:`~pymc_dp.step_methods.data_augmentation.DataAugmentation`, for releases so
noisy that DA, which proposes each record at its own position, mixes slowly. With the
parameters fixed, one sweep makes ``n`` attempts (Xiong & Ju 2025, Algorithm 1; the compiled
loop and the derivation of its acceptance ratio are in :mod:`pymc_dp.kernels.soma`):

1. the ``n`` offers are the ``n`` proposals the DA proposer draws at once: independent draws
   from the record law ``f(. | theta)`` (the same law at every position, see below);
2. their contributions ``t(x*)`` to the statistic are evaluated vectorized by the block's
   compiled ``t`` function, as in DA; those of the current records are cached between sweeps;
3. attempt ``a`` weights every position ``j`` by the release density with ``x_j`` replaced by
   offer ``a``, ``w_j = eta(z | T - t(x_j) + t(x*_a))``, picks ``j`` with probability
   ``w_j / W`` and accepts with probability ``min(1, W / (W + w_cur - w_j))``;
4. the new record arrays take, at each position, the last offer accepted there.

Discrete records (few distinct contribution rows ``K``: Bernoulli, categorical, small counts)
take the grouped kernel, in which positions with equal rows share one weight: O(K m) per
attempt instead of O(n m), the same law.

Requirements (:func:`check_exchangeable`, at construction): the statistic is a sum over records
(``T = C + sum_i t(x_i)``: not the generic path), the records have no observed per-record
children (the acceptance ratio would need their likelihood at every position), and the records
are exchangeable: the same law ``f`` at every position and the same ``t``. The last is decided
numerically: permuting the records must permute their per-record log-prior terms and their
contributions ``t``, at the given point and at random values of the other variables.

Cost: O(n m) per attempt, O(n^2 m) per sweep (``m`` released components), against O(n m) for DA;
SOMA pays off where DA's chain moves slowly through the records (small epsilon).

Uninformative releases: :func:`missing_information_fraction` estimates, per released
component, the fraction of the variance of the statistic that the release leaves unresolved and
warns when it exceeds 0.99 (the posterior is then essentially the prior).

References
----------
Xiong, Y. & Ju, N. (2025). Single offer, multiple attempts (SOMA) sampler for Bayesian inference
from privatized data. Reference code: github.com/Yifei-Xiong/SOMA-Sampler.

Ju, N., Awan, J., Gong, R. & Rao, V. (2022). Data augmentation MCMC for Bayesian inference from
privatized data. NeurIPS.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytensor.tensor as pt
from pymc.pytensorf import compile, extract_obs_data

from pymc_dp.kernels.da_sweep import sensitivity_excess
from pymc_dp.kernels.soma import (
    NoiseRows,
    SomaState,
    group_state,
    records_from_replacements,
    specialized_soma_kernels,
)
from pymc_dp.step_methods.da_blocks import CHECK_MODE, rows

__all__ = [
    "check_exchangeable",
    "missing_information_fraction",
    "noise_variance",
    "release_noise_variances",
    "soma_sweep",
    "warn_if_uninformative",
]

#: relative tolerance of the numerical exchangeability check
_RTOL = 1e-9
#: missing-information fraction above which a release is reported as uninformative
MIF_WARN = 0.99


# --------------------------------------------------------------------------- the sweep
def _record_positions(spec, n_args: int) -> list[int]:
    """Positions of the block's record variables in ``args`` (the model's value variables).

    Read from ``spec.pos`` (or ``positions``) when the spec has it, else from the input names
    of the compiled ``t`` function, whose inputs are the model's value variables followed by the
    records.
    """
    for attr in ("pos", "positions", "record_pos"):
        pos = getattr(spec, attr, None)
        if pos is not None:
            return [int(p) for p in pos]
    names = [inp.variable.name for inp in spec.fn.maker.inputs[:n_args]]
    return [names.index(nm) for nm in spec.names]


def _current_contributions(spec, scratch, args, cur) -> np.ndarray:
    """``t(x_i)`` of the current records: the cache when they are the arrays last returned."""
    last = getattr(scratch, "last", None)
    cached = getattr(scratch, "t_cur", None)
    if (
        getattr(spec, "free_T", False)
        or last is None
        or cached is None
        or len(last) != len(cur)
        or any(a is not c for a, c in zip(last, cur, strict=True))
    ):
        return np.array(spec.fn(*args, *cur)[0], dtype=np.float64, order="C")
    return cached


def _check_sensitivity(spec, t_off, t_cur) -> None:
    """Raise when an offer moves a release by more than its declared sensitivity.

    Offer ``i`` is compared with the current record at position ``i`` (the pairs DA checks);
    the norm is L1, or L2 where ``spec.l2`` says so.
    """
    sens = getattr(spec, "sens", None)
    if sens is None or not np.isfinite(sens).any():
        return
    n = min(t_off.shape[0], t_cur.shape[0])
    idx = np.arange(n, dtype=np.int64)
    i, r, ch = sensitivity_excess(t_off[:n], t_cur[:n], idx, n, spec.comp_release, sens, spec.l2)
    if i >= 0:
        names = getattr(spec, "release_names", None) or ["?"] * len(sens)
        raise ValueError(
            f"Release {names[r]!r}: replacing record {i} of [{', '.join(spec.names)}] by another "
            f"value the model gives it moves the statistic by {ch:.6g}, more than the declared "
            f"sensitivity {sens[r]:.6g} of its mechanism, so the declared privacy guarantee "
            "(epsilon) does not hold for this statistic. Declare the sensitivity the statistic "
            "has or bound each record's contribution (pt.clip)."
        )


def _attempts(noise, logpdf, rows, rng):
    """Run the attempts; ``rows = (stat, t_cur, t_off)``, ``t_cur`` updated in place.

    The grouped kernel (positions with equal contribution rows share a weight, O(K m) per
    attempt) when the current and offered rows have at most ``n / 2`` distinct values (discrete
    records), else the kernel over positions (O(n m) per attempt). The same law.
    """
    stat, t_cur, t_off = rows
    replaced = np.empty(t_off.shape[0], dtype=np.int64)
    plain, grouped = specialized_soma_kernels(logpdf)
    gs, g_off = group_state(stat, t_cur, t_off)
    if 2 * gs.rows.shape[0] <= t_cur.shape[0]:
        u = rng.random((t_off.shape[0], 3))
        out = grouped(gs, g_off, noise, u, replaced)
        t_cur[...] = gs.rows[gs.gid]
    else:
        u = rng.random((t_off.shape[0], 2))
        out = plain(SomaState(stat, t_cur), t_off, noise, u, replaced)
    return replaced, out


def soma_sweep(spec, scratch, args, rng):
    """One SOMA sweep (``n`` attempts) of one record block; see the module docstring.

    The same contract as the data-augmentation additive block sweep: the records are read from
    ``args``, new arrays are returned (``args`` is not modified), and the cache of the current
    records' contributions is kept on ``scratch``.

    Parameters
    ----------
    spec : block specification
        Read: ``names``, ``n``, ``z``, ``params``, ``logpdf``, ``fn``, ``proposer``, ``const``,
        ``free_T`` and, when present, ``pos`` (positions of the records in ``args``), ``sens``,
        ``comp_release``, ``l2``, ``release_names``. Works with a
        ``DataAugmentation`` block, passed as both ``spec`` and ``scratch``.
    scratch : mutable per-block cache
        ``t_cur`` (contributions of the records last returned) and ``last`` (those arrays);
        both are set here.
    args : list of ndarray
        The current values of the model's value variables, in model order.
    rng : numpy.random.Generator

    Returns
    -------
    records : list of ndarray
        New record arrays, one per name in ``spec.names``.
    stats : tuple
        ``(n_accepted, min_prob, mean_prob)``: accepted attempts, minimum and mean over the
        ``n`` attempts of the acceptance probability.

    Examples
    --------
    A stand-in block: 10 Bernoulli(0.3) records (the only value variable), their count
    released with Laplace noise of scale 10:

    >>> from types import SimpleNamespace
    >>> import numpy as np
    >>> from pymc_dp.mechanisms.laplace import Laplace
    >>> mech = Laplace(scale=10.0)
    >>> class Offers:
    ...     def draw(self, args, rng):
    ...         return [(rng.random(10) < 0.3).astype(np.int64)]
    >>> spec = SimpleNamespace(
    ...     names=["x"], n=10, pos=[0], z=np.array([4.2]), params=mech.numba_params[None, :],
    ...     logpdf=mech.numba_logpdf, fn=lambda x, recs: [recs[:, None].astype(float)],
    ...     proposer=Offers(), const=np.zeros(1), free_T=False)
    >>> scratch = SimpleNamespace(t_cur=None, last=None)
    >>> args = [np.zeros(10, np.int64)]
    >>> (x_new,), (acc, min_prob, mean_prob) = soma_sweep(spec, scratch, args,
    ...                                                  np.random.default_rng(2))
    >>> x_new.shape, x_new is not args[0], bool(min_prob >= np.exp(-0.1))
    ((10,), True, True)
    >>> scratch.t_cur.ravel().tolist() == x_new.tolist(), scratch.last[0] is x_new
    (True, True)
    """
    pos = _record_positions(spec, len(args))
    cur = [args[p] for p in pos]
    t_cur = _current_contributions(spec, scratch, args, cur)
    offers = spec.proposer.draw(args, rng)
    res = spec.fn(*args, *offers)
    t_off = np.ascontiguousarray(res[0], dtype=np.float64)
    _check_sensitivity(spec, t_off, t_cur)
    if getattr(spec, "free_T", False):
        stat = np.array(res[-1], dtype=np.float64).reshape(-1)
    else:
        stat = np.asarray(spec.const, dtype=np.float64) + t_cur.sum(0)
    noise = NoiseRows(np.ascontiguousarray(spec.z, dtype=np.float64), spec.params)
    rows = (stat, t_cur, t_off)
    replaced, (n_acc, min_prob, mean_prob) = _attempts(noise, spec.logpdf, rows, rng)
    records = records_from_replacements(cur, offers, replaced)
    scratch.t_cur = t_cur
    scratch.last = records
    return records, (int(n_acc), float(min_prob), float(mean_prob))


# --------------------------------------------------------------------------- exchangeability
def _block_rvs(model, names):
    by_name = {v.name: v for v in model.value_vars}
    return [model.values_to_rvs[by_name[nm]] for nm in names]


def _log_prior_rows(model, rvs, n):
    """Compiled function of the model's value variables: per-record log-prior terms (k, n)
    (run only by the construction-time check: the checks' mode, no C compilation)."""
    terms = [rows(term, n) for term in model.logp(vars=rvs, sum=False)]
    if any(t is None for t in terms):
        raise ValueError("a record variable has a scalar log-density (no record axis)")
    return compile(model.value_vars, pt.stack(terms), on_unused_input="ignore", mode=CHECK_MODE)


def _points(model, point, rng, pos, k=2):
    """The point as ``args``, then ``k`` copies with every float variable but the records moved
    by standard normal noise (a coupling that vanishes at the point cannot hide)."""
    base = [np.asarray(point[v.name]) for v in model.value_vars]
    out = [base]
    for _ in range(k):
        args = list(base)
        for i, a in enumerate(args):
            if i not in pos and np.issubdtype(a.dtype, np.floating):
                args[i] = np.asarray(a + rng.normal(size=a.shape), dtype=a.dtype)
        out.append(args)
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all((a == b) | (np.abs(a - b) <= _RTOL * (1.0 + np.abs(b)))))


def _with_records(args, pos, recs):
    out = list(args)
    for p_, r in zip(pos, recs, strict=True):
        out[p_] = r
    return out


def _permutation_failure(spec, rows_fn, args, recs, perms):
    """What permuting the records breaks (``"prior"``, ``"statistic"``) or None."""
    pos = _record_positions(spec, len(args))
    rows = np.asarray(rows_fn(*_with_records(args, pos, recs)))
    t = np.asarray(spec.fn(*args, *recs)[0])
    for perm in perms:
        p_recs = [np.ascontiguousarray(r[perm]) for r in recs]
        if not _same(rows_fn(*_with_records(args, pos, p_recs)), rows[:, perm]):
            return "prior"
        if not _same(spec.fn(*args, *p_recs)[0], t[perm]):
            return "statistic"
    return None


_WHY = {
    "prior": "permuting the records changes their log-prior terms (their law differs between "
    "positions)",
    "statistic": "permuting the records changes their contributions to the statistic (t differs "
    "between positions, e.g. public data entering it row by row)",
}


def _refuse(spec, why: str):
    label = ", ".join(spec.names)
    return ValueError(
        f"DataAugmentation(method='soma'): records [{label}] cannot be sampled by SOMA: {why}. "
        "SOMA moves an offer drawn from the record law to any position, which is exact only "
        "for exchangeable records (the same law at every position) with a statistic that is a "
        "sum of the same function of each record; use method='da' (the default)."
    )


def check_exchangeable(model, spec, point=None, rng=None) -> None:
    """Raise ``ValueError`` unless the records of ``spec`` may be sampled by SOMA.

    Refused: a statistic that is not a sum over records (``spec.generic``), observed
    per-record children (``spec.has_extra``), and records that are not exchangeable. The last
    is decided numerically: with records drawn by the block's proposer (so that they differ),
    permuting them (reversal, a cyclic shift, a random permutation) must permute the
    per-record log-prior terms and the contributions ``t(x_i)``, at ``point`` and at two random
    values of the other float variables. Public data entering the prior or the statistic row by
    row (a per-record predictor), or a parameter that differs between positions, fail it.

    Parameters
    ----------
    model : pm.Model
    spec : block specification (``names``, ``n``, ``fn``, ``proposer``, ``generic``,
        ``has_extra``)
    point : dict, optional
        Values of the model's value variables (default: the model's initial point).
    rng : numpy.random.Generator, optional

    Raises
    ------
    ValueError
        Naming ``method='soma'``, the records and the reason.

    Examples
    --------
    Normal records whose mean differs between positions are not exchangeable:

    >>> from types import SimpleNamespace
    >>> import pymc as pm
    >>> with pm.Model() as model:
    ...     x = pm.Normal("x", mu=np.arange(5.0), sigma=1.0)
    >>> class Offers:
    ...     def draw(self, args, rng):
    ...         return [rng.normal(np.arange(5.0))]
    >>> spec = SimpleNamespace(names=["x"], n=5, pos=[0], fn=lambda x, recs: [recs[:, None]],
    ...                        proposer=Offers(), generic=False, has_extra=False)
    >>> check_exchangeable(model, spec)
    Traceback (most recent call last):
    ...
    ValueError: DataAugmentation(method='soma'): records [x] cannot be sampled by SOMA: ...
    """
    if getattr(spec, "generic", False):
        raise _refuse(spec, "the statistic is not a sum over records (generic path)")
    if getattr(spec, "has_extra", False):
        raise _refuse(spec, "they have observed per-record children")
    rng = np.random.default_rng(20261125) if rng is None else rng
    point = model.initial_point() if point is None else point
    n = int(spec.n)
    rows_fn = _log_prior_rows(model, _block_rvs(model, spec.names), n)
    pos = _record_positions(spec, len(model.value_vars))
    perms = [np.arange(n)[::-1], np.roll(np.arange(n), 1), rng.permutation(n)]
    checked = 0
    for k, args in enumerate(_points(model, point, rng, pos)):
        try:
            recs = [np.array(r) for r in spec.proposer.draw(args, rng)]
        except Exception:
            if k == 0:
                raise
            continue
        what = _permutation_failure(spec, rows_fn, args, recs, perms)
        if what is not None:
            raise _refuse(spec, _WHY[what])
        checked += 1
    assert checked >= 1


# --------------------------------------------------------------------------- uninformative
def noise_variance(mechanism) -> float:
    """Variance of a mechanism's noise: :attr:`Mechanism.noise_variance
    <pymc_dp.mechanisms.base.Mechanism.noise_variance>`.

    Examples
    --------
    >>> import pymc_dp as pmdp
    >>> noise_variance(pmdp.Laplace(scale=2.0))
    8.0
    >>> round(noise_variance(pmdp.Geometric(alpha=0.5)), 12)
    4.0
    """
    return float(mechanism.noise_variance)


def release_noise_variances(model, spec) -> np.ndarray:
    """Noise variance of each released component of a block, in the order of ``spec.z``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.distributions.release import Release
    >>> with pm.Model() as model:
    ...     x = pm.Bernoulli("x", p=0.3, shape=10)
    ...     _ = Release("z", x.sum(), pmdp.Laplace(scale=2.0), observed=4.2)
    >>> release_noise_variances(model, SimpleNamespace(release_names=["z"])).tolist()
    [8.0]
    """
    parts = []
    for name in spec.release_names:
        rel = model[name]
        size = int(np.size(extract_obs_data(model.rvs_to_values[rel])))
        parts.append(np.full(size, noise_variance(rel.owner.op.mechanism)))
    return np.concatenate(parts)


def _contribution_batches(spec, args, recs):
    """``t`` of the records ``recs``: all at once, or chunk by chunk for a chunked block."""
    chunks = getattr(spec, "chunk_fn", None)
    if chunks is None:
        yield np.asarray(spec.fn(*args, *recs)[0], dtype=np.float64)
        return
    for s, e in chunks.bounds():
        yield chunks.rows(args, recs, s, e)


def missing_information_fraction(spec, args, noise_var, rng, draws=4, advice=None) -> np.ndarray:
    r"""Per released component, the fraction of the statistic's variance the release leaves.

    Definition (a Gaussian approximation): the release is ``z_k = T_k + e_k`` with noise
    variance ``V_e`` and ``T = C + sum_i t(x_i)`` of variance ``V_T = n Var_f(t_k)`` under the
    record law ``f(. | theta)`` at the current parameters. For Gaussian ``T`` and noise the
    posterior variance of ``T_k`` given ``z_k`` is ``V_T V_e / (V_T + V_e)``, so

    .. math::

        \lambda_k = \frac{V_e}{V_e + V_T} = \frac{\operatorname{Var}(T_k \mid z_k)}
                                                 {\operatorname{Var}(T_k)}

    is the fraction of the prior variance of ``T_k`` that the release does not resolve (the
    fraction of missing information about ``T_k``; 0: ``z`` determines ``T``, 1: ``z`` says
    nothing). For a parameter informed through ``T_k`` it is also the fraction of missing
    information of the data-augmentation scheme, ``1 - I_obs / I_complete`` with
    ``I_obs = (n mu')^2 / (V_T + V_e)`` and ``I_complete = (n mu')^2 / V_T``, which governs how
    slowly the record/parameter Gibbs chain mixes. ``Var_f(t_k)`` is the sample variance of
    the contributions of ``draws * n``
    records drawn by the block's proposer at ``args`` (``V_T = 0`` gives ``lambda = 1``). When
    every component that the records can move (``V_T > 0``) has ``lambda_k > 0.99``, a
    ``UserWarning`` quotes the smallest: the release adds little to the prior and the chain
    mixes slowly.

    Parameters
    ----------
    spec : block specification (``names``, ``n``, ``fn``, ``proposer``)
    args : list of ndarray
        The model's value variables, in model order (the current parameters).
    noise_var : array_like, shape (m,)
        Noise variance per released component (:func:`release_noise_variances`).
    rng : numpy.random.Generator
    draws : int, default 4
        Proposal batches of ``n`` records used to estimate ``Var_f(t)``.
    advice : str, optional
        What the user can do, ending the warning (default: the generic list: Privatized,
        collapsible records, longer chains checked with ``az.summary``).

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    100 Bernoulli(0.5) records (variance of the count 25), their count released with Laplace
    noise of scale 100 (variance 20,000):

    >>> import warnings
    >>> from types import SimpleNamespace
    >>> class Offers:
    ...     def draw(self, args, rng):
    ...         return [(rng.random(100) < 0.5).astype(np.int64)]
    >>> spec = SimpleNamespace(names=["x"], n=100, proposer=Offers(),
    ...                        fn=lambda x, recs: [recs[:, None].astype(float)])
    >>> args = [np.zeros(100, np.int64)]
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     lam = missing_information_fraction(spec, args, [2e4], np.random.default_rng(0))
    >>> bool(0.998 < lam[0] < 0.999), "missing information at least 0.99" in str(w[0].message)
    (True, True)
    """
    noise_var = np.asarray(noise_var, dtype=np.float64).reshape(-1)
    # pooled variance over the batches, one batch in memory at a time (Chan et al.'s pairwise
    # combination of per-batch means and sums of squared deviations)
    count, mean, m2 = 0, 0.0, 0.0
    for _ in range(draws):
        for t in _contribution_batches(spec, args, spec.proposer.draw(args, rng)):
            t = t.reshape(t.shape[0], -1)
            k = t.shape[0]
            mean_b = t.mean(axis=0)
            # column by column: one temporary of n values instead of two of (n, m)
            m2_b = np.array(
                [np.dot(d, d) for d in (t[:, j] - mean_b[j] for j in range(t.shape[1]))]
            )
            delta = mean_b - mean
            tot = count + k
            mean = mean + delta * (k / tot)
            m2 = m2 + m2_b + delta**2 * (count * k / tot)
            count = tot
            del t
    v_t = int(spec.n) * m2 / (count - 1)
    total = noise_var + v_t
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(total > 0, noise_var / np.where(total > 0, total, 1.0), 1.0)
    varying = v_t > 0  # a component no record can move says nothing either way
    if np.any(varying) and np.all(lam[varying] > MIF_WARN):
        k = int(np.flatnonzero(varying)[np.argmin(lam[varying])])
        warnings.warn(
            f"records [{', '.join(spec.names)}]: the release is nearly uninformative: fraction "
            f"of missing information at least {lam[k]:.4f} in every released component "
            f"(component {k}: noise variance {noise_var[k]:.4g} against a variance "
            f"{v_t[k]:.4g} of the statistic under the record law at the current parameters). "
            "The release adds little to the prior, and a scan that alternates the records "
            "and their parameters mixes slowly (its autocorrelation is about this fraction). "
            f"What you can do: {advice or _GENERIC_ADVICE}",
            UserWarning,
            stacklevel=2,
        )
    return lam


_GENERIC_ADVICE = (
    "(1) where each value was released with its own noise, model it with pmdp.Privatized, "
    "which integrates the true values out exactly (NUTS then never sees the records); "
    "(2) where the release reads exchangeable records only through their sum or category "
    "counts (one record variable, parameters broadcast, no clamp or weights), pm.sample "
    "collapses them (CollapsedRecords) at a cost free of their number; "
    "(3) otherwise run longer chains, e.g. pm.sample(draws=10_000, tune=2_000), until "
    "az.summary(idata) gives r_hat <= 1.01 and ess_bulk >= 400 for every parameter. A "
    "posterior close to the prior is then the right answer, not a failure."
)


def _advice(model, spec) -> str | None:
    """What the user can do about an uninformative release of these records, or None (the
    generic list)."""
    from pymc_dp.step_methods.interweave import interweave_plan

    try:
        plan = interweave_plan(model)
    except Exception:  # the advice must never break the step's construction
        plan = None
    if plan is None or not set(spec.names) & {rv.name for rv in plan.records}:
        return None
    names = ", ".join(p.name for p in plan.parameters)
    return (
        "these Normal records get pymc_dp's interweaving move (Yu & Meng 2011), which "
        f"pm.sample adds by itself: it moves {names} with the records' standardized noise held "
        "fixed, so the parameters travel far per iteration however noisy the release. Keep it "
        "(pm.sample(interweave=False) turns it off) and check that az.summary(idata) gives "
        "r_hat <= 1.01 and ess_bulk >= 400 for every parameter; if not, run longer chains "
        "(pm.sample(draws=..., tune=...))."
    )


def warn_if_uninformative(model, spec, point=None, rng=None) -> np.ndarray:
    """:func:`missing_information_fraction` of a block at ``point`` (default: the model's initial
    point), with the noise variances of its releases (:func:`release_noise_variances`).

    For the step's construction: warns (``UserWarning``) when a released component's fraction
    of missing information exceeds 0.99, and returns the fractions.

    Examples
    --------
    >>> import warnings
    >>> from types import SimpleNamespace
    >>> import pymc as pm
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.distributions.release import Release
    >>> with pm.Model() as model:
    ...     x = pm.Bernoulli("x", p=0.5, shape=100)
    ...     _ = Release("z", x.sum(), pmdp.Laplace(scale=2.0), observed=40.0)
    >>> class Offers:
    ...     def draw(self, args, rng):
    ...         return [(rng.random(100) < 0.5).astype(np.int64)]
    >>> spec = SimpleNamespace(names=["x"], n=100, proposer=Offers(), release_names=["z"],
    ...                        fn=lambda x, recs: [recs[:, None].astype(float)])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")  # 8 / (8 + 25): no warning
    ...     lam = warn_if_uninformative(model, spec)
    >>> bool(0.2 < lam[0] < 0.3)
    True
    """
    rng = np.random.default_rng(20261125) if rng is None else rng
    point = model.initial_point() if point is None else point
    args = [np.asarray(point[v.name]) for v in model.value_vars]
    return missing_information_fraction(
        spec, args, release_noise_variances(model, spec), rng, advice=_advice(model, spec)
    )
