"""Numerical checks of the data-augmentation step and the messages of its refusals.

The checks run at step construction (see :mod:`pymc_dp.step_methods.data_augmentation`):

* additivity of the statistic, ``T(x) = C + sum_i t(x_i)`` with the same ``C`` at every record
  configuration tried (:func:`additive_consts`);
* row independence: changing record ``j`` changes only row ``j`` of the per-record
  log-density terms (:func:`check_rows`, and :func:`check_rows_randomized` for terms the
  structural analysis of :mod:`pymc_dp.step_methods.row_locality` cannot decide);
* declared sensitivity: a record change may move a release by at most the mechanism's declared
  sensitivity (:func:`check_sensitivity` at construction; in every additive sweep the
  kernel's ``da_step`` makes the same check).

Record configurations that differ from the current records are built by
:func:`differing_records` and :func:`mixtures`. Every refusal is a ``ValueError`` naming the
variables and saying how to restate the model.

Examples
--------
>>> import numpy as np
>>> cur = [np.zeros(3, dtype="int64")]
>>> alt, changed = differing_records(lambda: [np.array([1, 0, 2])], cur, 3)
>>> alt[0].tolist(), changed.tolist()
([1, 1, 2], [True, True, True])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_dp.kernels.da_sweep import sensitivity_excess

__all__ = [
    "PRIVATIZED_HINT",
    "RESTATE",
    "RTOL",
    "RowCheck",
    "additive_consts",
    "check_rows",
    "check_rows_randomized",
    "check_sensitivity",
    "coupled_message",
    "differing_records",
    "forward_error",
    "joint_message",
    "mixtures",
    "record_differs",
    "sensitivity_message",
]

# relative tolerance of the numerical checks (additivity, row independence)
RTOL = 1e-9

RESTATE = (
    "Restate the model so that the terms of record i read only row i of the record "
    "variables (align the rows of coupled variables, e.g. reorder data instead of writing "
    "x[::-1] or x[1:]; a random walk or an autoregression can be written with its independent "
    "innovations as the records and the statistic in terms of them, and records driven by a "
    "discrete Markov chain as a hidden Markov model with pymc_dp.MarkovChain latent states), put "
    "values that belong together in one record (a record variable of shape (n, k)), or sample "
    "the model without DataAugmentation (pass step=[...] to pm.sample, e.g. NUTS on a "
    "differentiable model)."
)


#: the end of every sensitivity refusal: the model may need Privatized, not Release
PRIVATIZED_HINT = (
    "If each released number is one true value plus its own noise (e.g. a count per region, "
    "not a statistic of individual people's records), use pmdp.Privatized instead of Release: "
    "pmdp.Privatized(name, pm.Poisson.dist(mu=...), mechanism, observed=z), with the "
    "distribution of the true values."
)


def additive_consts(at, args, configs):
    """``T - sum_i t(x_i)`` if it is the same (finite) at every record configuration, else None.

    ``at(recs, args)`` returns ``[T, sum_i t(x_i), rows]`` with the records ``recs`` put into
    the point ``args``.

    Examples
    --------
    >>> import numpy as np
    >>> def at(recs, args):
    ...     x = recs[0]
    ...     return [np.array([x.sum() + 2.0]), np.array([x.sum()]), None]
    >>> additive_consts(at, None, [[np.zeros(2)], [np.ones(2)]]).tolist()
    [2.0]
    """
    consts = []
    for recs in configs:
        T, tsum, _ = at(recs, args)
        if T.shape != tsum.shape:
            return None
        consts.append((T - tsum, np.abs(T).max(initial=0.0) + np.abs(tsum).max(initial=0.0)))
    scale = 1.0 + max(s for _, s in consts)
    if not all(
        np.all(np.isfinite(c)) and np.abs(c - consts[0][0]).max(initial=0.0) <= RTOL * scale
        for c, _ in consts
    ):
        return None
    return consts[0][0]


def record_differs(a, b, n) -> np.ndarray:
    """Boolean (n,): whether record i (row i of every array) differs between ``a`` and ``b``.

    Examples
    --------
    >>> import numpy as np
    >>> record_differs([np.array([0, 1])], [np.array([0, 2])], 2).tolist()
    [False, True]
    """
    out = np.zeros(n, dtype=bool)
    for x, y in zip(a, b, strict=True):
        out |= np.reshape(x != y, (n, -1)).any(axis=1)
    return out


def differing_records(draw, cur, n, tries=8):
    """Records that differ from the current ones ``cur`` in as many records as possible.

    Starts from a draw of ``draw()`` (a list of arrays, one per record variable); a record equal
    to its current value is replaced, jointly across the variables, by its value in the first of
    up to ``tries - 1`` further draws where it differs. Discrete records that are still equal
    (sparse supports: Bernoulli(0.01) draws are nearly all 0) move to a neighbouring value
    (``v - 1`` for ``v >= 1``, else ``v + 1``; booleans are negated). Returns the records and
    the boolean (n,) mask of records that differ; continuous records that never change (a
    degenerate distribution) stay unchanged and are reported as such.

    Examples
    --------
    >>> import numpy as np
    >>> alt, changed = differing_records(lambda: [np.zeros(2)], [np.zeros(2)], 2)
    >>> changed.tolist()
    [False, False]
    """
    alt = [np.array(a, copy=True) for a in draw()]
    changed = record_differs(alt, cur, n)
    for _ in range(tries - 1):
        if changed.all():
            break
        d = draw()
        new = record_differs(d, cur, n) & ~changed
        for a, x in zip(alt, d, strict=True):
            a[new] = x[new]
        changed |= new
    if not changed.all():
        keep = ~changed
        for a, c in zip(alt, cur, strict=True):
            if a.dtype == np.bool_:
                a[keep] = ~c[keep]
            elif np.issubdtype(a.dtype, np.integer):
                v = c[keep]
                a[keep] = np.where(v >= 1, v - 1, v + 1)
        changed = record_differs(alt, cur, n)
    return alt, changed


def _swap_one(cur, alt, j):
    """``cur`` with record ``j`` taken from ``alt`` (new arrays)."""
    out = []
    for c, a in zip(cur, alt, strict=True):
        r = c.copy()
        r[j] = a[j]
        out.append(r)
    return out


def mixtures(cur, alt, n, rng, singles=16, halves=4):
    """Configurations mixing ``cur`` and ``alt`` record-wise, generated one at a time.

    All of ``alt``; ``cur`` with one record from ``alt`` (every record when ``n <= singles``,
    else ``singles`` random ones including the first and the last); ``halves`` random halves of
    the records from ``alt``. A generator: each configuration is a full copy of the records,
    so holding them all at once would cost ``singles + halves`` copies (about 160 bytes per
    int64 record at construction).

    Examples
    --------
    >>> import numpy as np
    >>> out = list(mixtures([np.zeros(2)], [np.ones(2)], 2, np.random.default_rng(0), halves=0))
    >>> [c[0].tolist() for c in out]
    [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    """
    yield alt
    if n <= singles:
        js = np.arange(n)
    else:
        js = np.unique(np.r_[0, n - 1, rng.choice(n, singles - 2, replace=False)])
    for j in js:
        yield _swap_one(cur, alt, j)
    for _ in range(halves):
        mask = rng.random(n) < 0.5
        yield [np.where(np.reshape(mask, (n,) + (1,) * (c.ndim - 1)), a, c)
               for c, a in zip(cur, alt, strict=True)]  # fmt: skip


def check_rows(rows_at, cur, alt, changed, n, label) -> None:
    """Raise unless changing one record changes only that record's log-density terms.

    Records ``j`` of the current records ``cur`` are swapped one at a time for their values in
    ``alt`` (records flagged in ``changed`` differ); the other records' rows must stay the same.
    With no record that can be changed the check cannot be made, which is an error too.

    Examples
    --------
    >>> import numpy as np
    >>> rows_at = lambda recs: np.stack([recs[0] ** 2])  # row i reads record i only
    >>> check_rows(rows_at, [np.zeros(3)], [np.ones(3)], np.ones(3, bool), 3, "x")
    """
    differ = np.flatnonzero(changed)
    if len(differ) == 0:
        raise ValueError(
            f"records [{label}]: no record could be changed by forward draws, so "
            "DataAugmentation cannot check that they are conditionally independent given the "
            "other variables (is the record distribution degenerate?)"
        )
    base = rows_at(cur)
    picks = np.unique(np.linspace(0, len(differ) - 1, min(4, len(differ))).astype(int))
    for j in differ[picks]:
        new = rows_at(_swap_one(cur, alt, j))
        # row j may change; compared in place (no copies of the other rows)
        new[:, j] = base[:, j]
        # |new - base| <= RTOL (1 + |base|), with two temporaries of the rows' size
        diff = np.subtract(new, base)
        np.abs(diff, out=diff)
        tol = np.abs(base)
        tol += 1.0
        tol *= RTOL
        same = (diff <= tol) | (new == base)
        del new, diff, tol
        if not np.all(same):
            raise ValueError(
                f"records [{label}] are not conditionally independent given the other "
                f"variables: changing record {j} changes the log-density terms of other "
                "records (a record's prior depends on another record, or an observed child "
                "couples records); DataAugmentation cannot sample them. " + RESTATE
            )


@dataclass(frozen=True)
class RowCheck:
    """What :func:`check_rows_randomized` needs: compiled functions of the point ``base``.

    ``rows_fn(*args)`` gives the stacked per-record terms, ``prop_fn(*args)`` forward draws of
    the records; ``pos`` are the positions of the record variables in ``args``.
    """

    rows_fn: object
    prop_fn: object
    base: list
    pos: list
    n: int
    label: str


def _perturbed(base, pos, rng) -> list:
    """``base`` with unit-scale normal noise added to every float input that is not a record."""
    args = list(base)
    for i, a in enumerate(args):
        if i not in pos and np.issubdtype(a.dtype, np.floating):
            args[i] = np.asarray(a + rng.normal(size=a.shape), dtype=a.dtype)
    return args


def _one_random_check(rc: RowCheck, args) -> bool:
    """One row check at ``args`` with records drawn there; False when it cannot be made."""
    try:
        cur = [np.array(r) for r in rc.prop_fn(*args)]
        alt, changed = differing_records(
            lambda: [np.array(r) for r in rc.prop_fn(*args)], cur, rc.n
        )
    except Exception:
        return False

    def rows_at(recs):
        a = list(args)
        for p_, r in zip(rc.pos, recs, strict=True):
            a[p_] = r
        return np.asarray(rc.rows_fn(*a), dtype=np.float64)

    if not np.all(np.isfinite(rows_at(cur))) or not changed.any():
        return False
    check_rows(rows_at, cur, alt, changed, rc.n, rc.label)
    return True


def check_rows_randomized(rc: RowCheck, what: str, rng) -> None:
    """Numerical independence check for terms the structural analysis cannot decide.

    Made at random values of the other (float) variables, around the point ``rc.base`` with
    unit-scale perturbations on the transformed scale, with random current records drawn
    there (never only at the initial point, where a coupling coefficient may vanish).
    At least three such points must give finite terms, else the model is refused; ``what``
    names the undecided terms in that message.
    """
    made = 0
    for _ in range(8):
        if _one_random_check(rc, _perturbed(rc.base, rc.pos, rng)):
            made += 1
            if made == 3:
                return
    raise ValueError(
        f"records [{rc.label}]: DataAugmentation cannot decide whether the records are "
        f"conditionally independent given the other variables: the log-density of {what} "
        "uses an operation whose effect on the record axis pymc_dp cannot analyse, and a "
        "numerical check at random values of the other variables could not be made. " + RESTATE
    )


def check_sensitivity(spec, t_new, t_old, idx, count, offset=0) -> None:
    """Raise when replacing a listed record moves a release by more than its declared
    sensitivity (additive path; ``t_new``/``t_old``: (n, m) contributions of records
    ``offset, offset + 1, ...``; ``spec`` a :class:`~pymc_dp.step_methods.da_spec.BlockSpec`)."""
    if spec.sens is None or not np.isfinite(spec.sens).any():
        return
    i, r, ch = sensitivity_excess(t_new, t_old, idx, count, spec.comp_release, spec.sens, spec.l2)
    if i >= 0:
        raise ValueError(sensitivity_message(spec, offset + int(i), int(r), float(ch)))


def sensitivity_message(spec, i, r, change) -> str:
    """Message for record ``i`` moving release ``r`` of ``spec`` by ``change``."""
    norm = "L2" if spec.l2[r] else "L1"
    return (
        f"Release {spec.release_names[r]!r}: replacing record {i} of [{', '.join(spec.names)}] "
        f"by another value the model gives it moves the statistic by {change:.6g} ({norm} "
        f"norm), more than the declared sensitivity {spec.sens[r]:.6g} of its "
        f"{spec.families[r]} mechanism, so the declared privacy guarantee (epsilon) does not "
        "hold for this statistic. Declare the sensitivity the statistic has (the largest change "
        "one record can make, e.g. 2 for 2 * x.sum() of 0/1 records, 2 for a one-hot count "
        "vector in L1) or bound each record's contribution in the statistic (pt.clip). "
        + PRIVATIZED_HINT
    )


def forward_error(label, err) -> ValueError:
    """The error for records that cannot be forward-sampled (``err`` the cause)."""
    return ValueError(
        f"record variable(s) [{label}] cannot be forward-sampled given their parents, "
        f"so DataAugmentation cannot propose them: {type(err).__name__}: {err}"
    )


def joint_message(rv, label, n, observed) -> str:
    """Message for a log-density with no record axis of length n (a joint law of the rows)."""
    if observed:
        what = (
            f"the log-likelihood of the observed variable {rv.name!r} is not a sum of "
            f"per-record terms (it has no record axis of length {n}): it reads all records "
            "at once"
        )
    else:
        what = (
            f"the log-density of {rv.name!r} is one joint term over its {n} rows (a random "
            "walk, an autoregressive process, a multivariate law over the record axis such as "
            f"an MvNormal of shape ({n},), ...), not a sum of per-record terms"
        )
    return (
        f"records [{label}] are not conditionally independent given the other variables: "
        f"{what}, so DataAugmentation cannot propose one record at a time. " + RESTATE
    )


def coupled_message(rv, label, state, observed) -> str:
    """Message for a per-record term that the structural analysis found coupled."""
    kind = "log-likelihood of the observed variable" if observed else "log-density of"
    return (
        f"records [{label}] are not conditionally independent given the other variables: the "
        f"{kind} {rv.name!r} {state.reason} (operation {state.node.op}), so the term of one "
        "record reads other records; this holds whatever the current parameter values (a "
        "coupling coefficient that is 0 at the initial point does not make it go away). " + RESTATE
    )
