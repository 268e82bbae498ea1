"""One record block of the data-augmentation step: its frozen spec and its scratch.

:class:`BlockSpec` is everything a sweep of a block needs that does not change while sampling
(names and positions of the record variables, released values, the noise log-density and its
parameters, the compiled contribution function or the generic scan, the proposer, ``C``,
declared sensitivities). :class:`BlockScratch` is the mutable part: buffers of the sweep and the
cached contributions ``t(x_i)`` of the current records. :func:`build_spec` builds the spec of
one block from its :class:`~pymc_dp.step_methods.da_blocks.BlockGraph`: the additive path when
the statistic provably decomposes as ``C + sum_i t(x_i)`` (and the releases share one noise
family), else the exact generic path.

Examples
--------
>>> import pymc as pm
>>> import pymc_dp as pmdp
>>> from pymc_dp.step_methods.da_blocks import BuildOptions, block_graph, partition
>>> with pm.Model() as m:
...     x = pm.Bernoulli("x", p=0.5, shape=6)
...     _ = pmdp.Release("z", x.sum(), pmdp.Laplace(epsilon=1.0), observed=3.0)
>>> ip = m.initial_point()
>>> opts = BuildOptions(m, ip, [v.name for v in m.value_vars], {})
>>> (block,) = partition(m, [x], ip)
>>> spec = build_spec(block_graph(opts, block))
>>> spec.names, spec.n, spec.generic, spec.const.tolist()
(['x'], 6, False, [0.0])
>>> BlockScratch.for_spec(spec).t_cur is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymc.pytensorf import extract_obs_data

from pymc_dp.step_methods.da_additive import compile_additive
from pymc_dp.step_methods.da_checks import check_sensitivity
from pymc_dp.step_methods.da_generic import GenericRelease, build_generic
from pymc_dp.step_methods.da_proposals import make_proposer

__all__ = [
    "BlockScratch",
    "BlockSpec",
    "ReleaseArrays",
    "build_spec",
    "release_arrays",
    "release_sides",
]

_L2_FAMILIES = frozenset({"gaussian", "discrete_gaussian"})


@dataclass(frozen=True, eq=False)
class BlockSpec:
    """The fixed description of one record block (see the module docstring).

    Attributes
    ----------
    names : list of str
        Value-variable names of the records, in model order.
    n : int
        Number of records.
    pos : tuple of int
        Positions of the records among the step's arguments (the model's value variables).
    release_names : list of str
    z : ndarray
        (m,) released values, flattened.
    params : ndarray
        (m, P) numba noise parameters per released component.
    logpdf : numba function
        The noise log-density ``logpdf(x, params)`` of the block's (single) noise family.
    fn : compiled function
        Additive path: ``fn(*args, *records) -> [t (n, m), extra (n,)?, T?]`` (``extra``: the
        observed children's per-record log-ratios, when ``has_extra``; ``T`` when ``free_T``).
        Generic path: the whole sweep (:func:`~pymc_dp.step_methods.da_generic.build_generic`).
    has_extra : bool
    generic : bool
        True: the statistic is not (provably) additive; ``fn`` runs the whole sweep.
    proposer : object or None
        Additive path: ``proposer.draw(args, rng)`` -> list of fresh record arrays.
    const : ndarray or None
        ``C`` in ``T = C + sum_i t(x_i)``.
    free_T : bool
        T involves other variables: ``fn`` also returns ``T``, ``t`` is not cached.
    shared : bool
        One parameter row for every released component.
    sens, comp_release, l2, families
        Declared sensitivity per release (inf: not declared, not checked), the release of each
        flattened component, whether a release's sensitivity is an L2 (else L1) bound, and its
        mechanism family.
    chunk_fn : RecordChunks or None
        Large additive blocks whose ``t`` reads only the records and data: ``t`` over record
        ranges (:mod:`pymc_dp.step_methods.da_chunks`); the sweep then goes chunk by chunk.
    """

    names: list
    n: int
    pos: tuple
    release_names: list
    z: np.ndarray
    params: np.ndarray
    logpdf: object
    fn: object
    has_extra: bool
    generic: bool
    proposer: object
    const: np.ndarray | None
    free_T: bool
    shared: bool
    sens: np.ndarray
    comp_release: np.ndarray
    l2: np.ndarray
    families: list
    chunk_fn: object = None


class BlockScratch:
    """Mutable per-block cache of the current records' contributions.

    ``t_cur`` holds ``t`` of the record arrays in ``last`` (the arrays the previous sweep
    returned); the cache is used only when the next sweep receives those very arrays. The cache
    is not pickled. (The sweep's own buffers are the kernel's: ``kernels.da_sweep.da_step``.)
    """

    def __init__(self, n: int):
        self.n = n
        self.clear_cache()

    @classmethod
    def for_spec(cls, spec: BlockSpec) -> BlockScratch:
        """Fresh scratch for the block ``spec``."""
        return cls(spec.n)

    def clear_cache(self) -> None:
        """Forget the cached contributions ``t(x_i)`` of the current records."""
        self.t_cur = None  # (n, m) float64, t of the records in self.last
        self.last = None  # the record arrays returned by the last sweep
        # chunked blocks: the statistic of the records last returned, and weak references
        # to those arrays (nothing per record is kept)
        self.total = None
        self.last_ref = None

    def __getstate__(self):
        state = dict(self.__dict__)
        # a cache, possibly large (weak references cannot be pickled): not pickled
        state["t_cur"] = state["last"] = state["total"] = state["last_ref"] = None
        return state


@dataclass(frozen=True, eq=False)
class ReleaseArrays:
    """The releases of a block as arrays, one row per flattened released component.

    ``sides`` is ``None`` when no release of the block is censored; otherwise it holds, per
    component, 0 (interior), -1 (released value at its lower bound) or +1 (at its upper
    bound), and every row of ``params`` is ``[side, *mechanism params]`` for the censored
    kernel (:attr:`Mechanism.numba_censored_logpdf
    <pymc_dp.mechanisms.base.Mechanism.numba_censored_logpdf>`).
    """

    z: np.ndarray
    params: np.ndarray
    sizes: list
    mechs: list
    sens: np.ndarray
    l2: np.ndarray
    comp_release: np.ndarray
    sides: np.ndarray | None = None

    @property
    def one_family(self) -> bool:
        """Whether all releases share one numba noise log-density (the kernel takes one)."""
        if self.sides is not None:
            return len({id(m.numba_censored_logpdf) for m in self.mechs}) == 1
        return len({id(m.numba_logpdf) for m in self.mechs}) == 1

    @property
    def logpdf(self):
        """The numba kernel of the block: the noise log-density, or its censored form
        (``None`` when the mechanism has no numba censored kernel: generic path)."""
        if self.sides is None:
            return self.mechs[0].numba_logpdf
        return self.mechs[0].numba_censored_logpdf


def release_sides(z: np.ndarray, op) -> np.ndarray:
    """Per component of a release (flattened): -1 at ``lower``, +1 at ``upper``, else 0."""
    side = np.zeros(z.shape)
    if op.lower is not None:
        side[z == np.broadcast_to(op.lower, z.shape)] = -1.0
    if op.upper is not None:
        side[z == np.broadcast_to(op.upper, z.shape)] = 1.0
    return side.ravel()


def release_arrays(model, releases) -> ReleaseArrays:
    """Released values, mechanism parameters and declared sensitivities of ``releases``."""
    z_parts, param_rows, side_parts = [], [], []
    censored = any(r.owner.op.censored for r in releases)
    for r in releases:
        op = r.owner.op
        z_full = np.asarray(extract_obs_data(model.rvs_to_values[r]), dtype=np.float64)
        z_r = z_full.ravel()
        z_parts.append(z_r)
        row = np.asarray(op.mechanism.numba_params, np.float64)
        if censored:
            op.mechanism.check_tails(f"release {r.name!r}")
            sides = release_sides(z_full, op)
            side_parts.append(sides)
            param_rows.extend(np.concatenate([[s], row]) for s in sides)
        else:
            param_rows.extend([row] * len(z_r))
    mechs = [r.owner.op.mechanism for r in releases]
    sens = np.array(
        [float(m.sensitivity) if getattr(m, "privacy_declared", False) else np.inf for m in mechs]
    )
    width = max(len(p) for p in param_rows)
    params = np.zeros((len(param_rows), width))
    for k, p in enumerate(param_rows):
        params[k, : len(p)] = p
    sizes = [len(zp) for zp in z_parts]
    return ReleaseArrays(
        z=np.ascontiguousarray(np.concatenate(z_parts)),
        params=params,
        sizes=sizes,
        mechs=mechs,
        sens=sens,
        l2=np.array([m.family in _L2_FAMILIES for m in mechs], dtype=np.bool_),
        comp_release=np.ascontiguousarray(np.repeat(np.arange(len(releases)), sizes), np.int64),
        sides=np.concatenate(side_parts) if censored else None,
    )


def _try_additive(g, rel: ReleaseArrays):
    """The first candidate decomposition that compiles and passes the checks, or None."""
    if not rel.one_family or rel.logpdf is None:
        # the compiled kernel takes one noise log-density; releases of several families (or
        # censored releases of a mechanism without a numba censored kernel) go through the
        # exact generic path (PyTensor log-densities of every mechanism)
        return None
    cache = []

    def get_proposer():  # built once per block, on the first candidate that needs it
        if not cache:
            cache.append(make_proposer(g))
        return cache[0]

    for batch_leaves in (True, False):
        fit = compile_additive(g, batch_leaves, get_proposer)
        if fit is not None:
            return fit
    return None


def build_spec(g) -> BlockSpec:
    """The :class:`BlockSpec` of block graph ``g`` (checks included; ``ValueError`` when a
    check refuses the block, e.g. a record change above a declared sensitivity)."""
    rel = release_arrays(g.model, g.releases)
    fit = _try_additive(g, rel)
    if fit is None:
        fn, has_extra = build_generic(
            g,
            GenericRelease(
                z=rel.z, mechs=rel.mechs, sizes=rel.sizes, sens=rel.sens, l2=rel.l2, sides=rel.sides
            ),
        )
    else:
        fn, has_extra = fit.fn, fit.has_extra
    spec = BlockSpec(
        names=g.names,
        n=g.n,
        pos=tuple(g.pos),
        release_names=[r.name for r in g.releases],
        z=rel.z,
        params=rel.params,
        logpdf=rel.logpdf,
        fn=fn,
        has_extra=has_extra,
        generic=fit is None,
        proposer=None if fit is None else fit.proposer,
        const=None if fit is None else fit.const,
        free_T=False if fit is None else fit.free_T,
        shared=bool(np.all(rel.params == rel.params[:1])),
        sens=rel.sens,
        comp_release=rel.comp_release,
        l2=rel.l2,
        families=[m.family for m in rel.mechs],
        chunk_fn=None if fit is None else fit.chunks,
    )
    if fit is not None:
        # the records tried at construction (current ones and records made to differ)
        for start, t_a, t_b in fit.check_pairs():
            idx = np.arange(t_a.shape[0], dtype=np.int64)
            check_sensitivity(spec, t_a, t_b, idx, len(idx), offset=start)
    return spec
