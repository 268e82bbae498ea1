r"""A multinomial count row seen through independent additive noise on each cell, exactly.

A categorical feature with ``V`` values gives, for ``N`` entries, the true count row
``c = (c_1, ..., c_V) ~ Multinomial(N, p)``; each cell is released with independent noise of
density ``eta`` (a mechanism's noise law), ``z_j = c_j + noise_j``. The marginal of the
released row is a sum over all compositions of ``N`` into ``V`` parts,

.. math::

    p(z) = \sum_{c_1 + \dots + c_V = N} \frac{N!}{\prod_j c_j!} \prod_j p_j^{c_j}\,
        \eta(z_j - c_j)
      = N!\, \big(a_1 * a_2 * \dots * a_V\big)(N),
    \qquad a_j(c) = \frac{p_j^c}{c!}\, \eta(z_j - c),\ c = 0..N,

a convolution of ``V`` sequences evaluated at ``N`` (the multinomial written as a product of
independent per-cell terms constrained to sum to ``N``; equivalently the chain of sequential
binomials ``c_j | c_1..c_{j-1} ~ Binomial(N - c_1 - ... - c_{j-1}, p_j / (1 - p_1 - ... -
p_{j-1}))`` run forward over the running total). Its cost is ``O(V N^2)`` instead of the
``O(N^{V-1})`` compositions.

Forward and backward
--------------------
``F_j = a_1 * ... * a_j`` and ``B_j = a_j * ... * a_V`` (truncated to ``0..N``), all in log
space: each output ``log (x * y)(s) = log sum_u exp(x(u) + y(s - u))`` subtracts its own
largest term, so nothing under- or overflows whatever the noise scale, the observation's
distance from the truth or ``p`` (a narrow noise makes terms differ by thousands of nats).
Terms below ``e^{-50}`` times an output's largest term are not exponentiated (at most
``N + 1`` of them: a relative error below ``(N + 1) e^{-50}`` per output, about ``2 V`` times
that for the row); far from the mode of the composition that skips most of the work. Then
``log p(z) = log N! + log F_V(N)``.

Gradient
--------
``p(z)`` is a homogeneous polynomial of degree ``N`` in ``p``; its derivative (the extension
off the simplex, which a simplex-valued ``p``'s chain rule uses) is

.. math::

    \partial_{p_j} p(z) = N! \sum_{c=1}^{N} \frac{p_j^{c-1}}{(c-1)!}\, \eta(z_j - c)\,
        G_j(N - c), \qquad G_j = F_{j-1} * B_{j+1},

so ``\partial_{p_j} \log p(z) = E[c_j \mid z] / p_j``, written without the division so that it
is finite at ``p_j = 0`` (only ``c = 1`` contributes there). One forward pass gives the value,
a backward pass and one more convolution per cell the gradient: about ``1.5 V N^2``
exponentials per row.

The noise log-density is one of the built-in families, chosen by its kind
(:func:`pymc_dp.kernels.noise_logpdf.call_logpdf`: Laplace, Gaussian, two-sided geometric,
discrete Gaussian) with the mechanism's ``numba_params``; an integer noise law gives
``-inf`` at a non-integer observation.

:func:`multinomial_noise_numpy` evaluates arrays; :class:`MultinomialNoiseLogp` is the
PyTensor Op (value and gradient in one pass; numba lowering) and
:func:`multinomial_noise_logp` its graph helper.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_dp._cache import SOURCE_INT, numba_registration
from pymc_dp.kernels.noise_logpdf import call_logpdf

__all__ = [
    "DROP",
    "MAX_TRIALS",
    "MultinomialNoiseLogp",
    "multinomial_noise_kernel",
    "multinomial_noise_logp",
    "multinomial_noise_numpy",
]

#: largest ``N`` per row: the work is ``O(V N^2)`` per row and the workspace ``4 V (N + 1)``
#: floats, so larger rows are refused (:func:`multinomial_noise_numpy` and
#: ``HMMCountsRelease.model`` raise ``ValueError``; the Op gives NaN for such a row)
MAX_TRIALS = 100_000
#: terms of a convolution below ``e^{-DROP}`` times its largest are not exponentiated: the
#: relative error of each output is below ``(N + 1) e^{-DROP}`` (``2 \cdot 10^{-17}`` at
#: ``N = MAX_TRIALS``), and of the whole row below ``2 V`` times that
DROP = 50.0
# bump for a change of the compiled code that the source hash cannot see
_VERSION = 1


@numba.njit(cache=True)
def _lse_conv(x, y, n, out):  # pragma: no cover - compiled
    """``out[s] = log sum_{u=0..s} exp(x[u] + y[s - u])`` for ``s = 0..n``.

    Terms below ``e^{-DROP}`` times the largest are skipped (no ``exp``): at most ``s + 1``
    of them, so each output's relative error is below ``(n + 1) e^{-DROP}``.
    """
    for s in range(n + 1):
        m = -np.inf
        for u in range(s + 1):
            v = x[u] + y[s - u]
            if v > m:
                m = v
        if m == -np.inf:
            out[s] = -np.inf
            continue
        lo = m - DROP
        acc = 0.0
        for u in range(s + 1):
            v = x[u] + y[s - u]
            if v > lo:
                acc += math.exp(v - m)
        out[s] = m + math.log(acc)


@numba.njit(cache=True)
def _row(z, n, p, kind, params, la, nz, fw, bw, g, grad):  # pragma: no cover - compiled
    """One row: ``log p(z)``, gradient written into ``grad`` (workspace arrays given)."""
    nv = z.shape[0]
    for j in range(nv):
        grad[j] = 0.0
    for j in range(nv):
        if z[j] != z[j]:
            return np.nan
        if not (p[j] >= 0.0 and p[j] <= 1.0):
            return -np.inf
    for j in range(nv):
        if math.isinf(z[j]):
            return -np.inf
    # terms log a_j(c) = c log p_j - log c! + log eta(z_j - c); the noise part kept apart
    for j in range(nv):
        logp = math.log(p[j]) if p[j] > 0.0 else -np.inf
        for c in range(n + 1):
            e = call_logpdf(kind, z[j] - c, params)
            nz[j, c] = e
            base = 0.0 if c == 0 else c * logp
            la[j, c] = base - math.lgamma(c + 1.0) + e
    for c in range(n + 1):
        fw[0, c] = la[0, c]
    for j in range(1, nv):
        _lse_conv(fw[j - 1], la[j], n, fw[j])
    total = fw[nv - 1, n]
    if total == -np.inf:
        return -np.inf
    lp = math.lgamma(n + 1.0) + total
    if n == 0:
        return lp  # every derivative term has c >= 1
    for c in range(n + 1):
        bw[nv - 1, c] = la[nv - 1, c]
    for j in range(nv - 2, 0, -1):
        _lse_conv(la[j], bw[j + 1], n, bw[j])
    for j in range(nv):
        # G_j = F_{j-1} * B_{j+1}: every cell but j
        if nv == 1:
            g[0] = 0.0
            for s in range(1, n + 1):
                g[s] = -np.inf
        elif j == 0:
            for s in range(n + 1):
                g[s] = bw[1, s]
        elif j == nv - 1:
            for s in range(n + 1):
                g[s] = fw[nv - 2, s]
        else:
            _lse_conv(fw[j - 1], bw[j + 1], n, g)
        logp = math.log(p[j]) if p[j] > 0.0 else -np.inf
        acc = 0.0
        for c in range(1, n + 1):
            base = 0.0 if c == 1 else (c - 1.0) * logp
            t = base - math.lgamma(c) + nz[j, c] + g[n - c] - total
            if t > -np.inf:
                acc += math.exp(t)
        grad[j] = acc
    return lp


@numba.njit(cache=True)
def _rows(z, n, p, kind, params, out, grad):  # pragma: no cover - compiled
    """Every row of ``z`` (M, V), ``n`` (M,), ``p`` (M, V) into ``out`` (M,), ``grad`` (M, V)."""
    m, nv = z.shape
    nmax = 0
    for i in range(m):
        ni = n[i]
        if ni == ni and ni > nmax:
            nmax = int(min(math.floor(ni), MAX_TRIALS))
    la = np.empty((nv, nmax + 1))
    nz = np.empty((nv, nmax + 1))
    fw = np.empty((nv, nmax + 1))
    bw = np.empty((nv, nmax + 1))
    g = np.empty(nmax + 1)
    for i in range(m):
        ni = n[i]
        if not (ni == ni and ni >= 0.0 and ni <= MAX_TRIALS and ni == math.floor(ni)):
            out[i] = np.nan
            for j in range(nv):
                grad[i, j] = 0.0
            continue
        out[i] = _row(z[i], int(ni), p[i], kind, params, la, nz, fw, bw, g, grad[i])


def multinomial_noise_kernel(z, n, p, kind, params):
    """``(log p(z), d log p / d p)`` for one row (numpy wrapper of the compiled row kernel).

    Parameters
    ----------
    z : array_like of shape (V,)
        The released (noisy) cells.
    n : int
        The number of trials ``N`` (the row's true total).
    p : array_like of shape (V,)
        The category probabilities.
    kind : int
        The noise family (:mod:`pymc_dp.kernels.noise_logpdf`: ``LAPLACE``, ``GAUSSIAN``,
        ``GEOMETRIC``, ``DISCRETE_GAUSSIAN``).
    params : array_like
        The family's parameter vector (a mechanism's ``numba_params``).

    Returns
    -------
    logp : float
    grad : numpy.ndarray of shape (V,)

    Examples
    --------
    With ``N = 1`` the row is one category: ``p(z) = sum_j p_j eta(z_j - 1) prod_{i != j}
    eta(z_i)``.

    >>> import numpy as np
    >>> from scipy import stats
    >>> from pymc_dp.kernels.noise_logpdf import LAPLACE
    >>> z, p = np.array([0.3, 1.2, -0.4]), np.array([0.2, 0.5, 0.3])
    >>> lp, grad = multinomial_noise_kernel(z, 1, p, LAPLACE, [1.0])
    >>> eta = lambda x: stats.laplace.pdf(x)
    >>> ref = sum(p[j] * eta(z[j] - 1) * np.prod([eta(z[i]) for i in range(3) if i != j])
    ...           for j in range(3))
    >>> bool(np.isclose(lp, np.log(ref), rtol=1e-13))
    True
    """
    out, grad = multinomial_noise_numpy(
        np.asarray(z, np.float64)[None, :], np.asarray([n]), np.asarray(p)[None, :], kind, params
    )
    return float(out[0]), grad[0]


def _check_numpy_inputs(z, n, p):
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"z must have the categories on its last axis, got shape {z.shape}")
    if p.shape[-1] != z.shape[-1]:
        raise ValueError(f"p has {p.shape[-1]} categories but z has {z.shape[-1]}")
    if not np.all(np.isfinite(z)):
        raise ValueError("z (the released cells) must be finite")
    if not np.all((n >= 0) & (n <= MAX_TRIALS) & (n == np.floor(n))):
        raise ValueError(f"n must hold whole numbers in 0..{MAX_TRIALS} (the row totals)")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p must hold probabilities in [0, 1] (NaN refused)")
    if not np.allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-9):
        raise ValueError("p must sum to 1 along its last axis (within 1e-9)")


def multinomial_noise_numpy(z, n, p, kind, params):
    """``(log p(z), d log p / d p)`` on numpy arrays, rows on the leading axes.

    Parameters
    ----------
    z : array_like of shape (..., V)
        Released rows.
    n : array_like of shape (...)
        Row totals (whole numbers ``0..MAX_TRIALS``).
    p : array_like of shape (..., V)
        Category probabilities (each row sums to 1); broadcast against ``z``.
    kind : int
        Noise family (:mod:`pymc_dp.kernels.noise_logpdf`).
    params : array_like
        Its parameter vector (a mechanism's ``numba_params``).

    Returns
    -------
    logp : numpy.ndarray of shape (...)
    grad : numpy.ndarray of shape (..., V)

    Raises
    ------
    ValueError
        For non-finite ``z``, totals that are not whole numbers in ``0..MAX_TRIALS``,
        probabilities outside ``[0, 1]`` or rows that do not sum to 1, or an unknown
        ``kind`` (each message names the argument).

    Examples
    --------
    Two rows of three categories through two-sided geometric noise, against the sum over
    every composition:

    >>> import itertools, numpy as np
    >>> from scipy import stats
    >>> from pymc_dp.mechanisms.geometric import Geometric
    >>> from pymc_dp.kernels.noise_logpdf import GEOMETRIC
    >>> mech = Geometric(epsilon=1.0)
    >>> z, n, p = np.array([[2, 0, 3], [-1, 4, 1]]), np.array([4, 3]), np.array([0.2, 0.3, 0.5])
    >>> lp, _ = multinomial_noise_numpy(z, n, p, GEOMETRIC, mech.numba_params)
    >>> def brute(zr, nr):
    ...     rows = [c for c in itertools.product(range(nr + 1), repeat=3) if sum(c) == nr]
    ...     return np.logaddexp.reduce([stats.multinomial.logpmf(c, nr, p)
    ...                                 + mech.logpdf(zr - np.array(c)).sum() for c in rows])
    >>> bool(np.allclose(lp, [brute(z[0], 4), brute(z[1], 3)], rtol=1e-12))
    True
    """
    if not (isinstance(kind, int | np.integer) and 0 <= int(kind) <= 3):
        raise ValueError(f"kind must be a built-in noise kind 0..3, got {kind!r}")
    z = np.asarray(z, np.float64)
    n = np.asarray(n, np.float64)
    p = np.asarray(p, np.float64)
    shape = np.broadcast_shapes(z.shape[:-1], n.shape, p.shape[:-1])
    _check_numpy_inputs(z, n, p)
    nv = z.shape[-1]
    z = np.ascontiguousarray(np.broadcast_to(z, (*shape, nv))).reshape(-1, nv)
    p = np.ascontiguousarray(np.broadcast_to(p, (*shape, nv))).reshape(-1, nv)
    n = np.ascontiguousarray(np.broadcast_to(n, shape)).reshape(-1)
    out = np.empty(z.shape[0])
    grad = np.empty_like(z)
    params = np.ascontiguousarray(params, dtype=np.float64).reshape(-1)
    _rows(z, n, p, int(kind), params, out, grad)
    return out.reshape(shape), grad.reshape(*shape, nv)


class MultinomialNoiseLogp(Op):
    """Row-wise ``(log p(z), d log p / d p)``: ``z`` (M, V), ``n`` (M,), ``p`` (M, V), float64.

    ``kind`` and ``params`` (the noise law, :mod:`pymc_dp.kernels.noise_logpdf`) are Op
    properties. The gradient output is used by :meth:`pullback` and is not itself
    differentiable; ``n`` (a count) has no gradient, nor has ``z`` (the release is data).
    A row whose total is not a whole number in ``0..MAX_TRIALS`` gives NaN, one whose ``p``
    leaves ``[0, 1]`` gives ``-inf`` (zero gradient).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.noise_logpdf import LAPLACE
    >>> op = MultinomialNoiseLogp(LAPLACE, np.array([1.0]))
    >>> lp, grad = op(np.array([[1.0, 0.5]]), np.array([1.0]), np.array([[0.4, 0.6]]))
    >>> op.params, lp.ndim, grad.ndim
    ((1.0,), 1, 2)
    """

    __props__ = ("kind", "params")

    def __init__(self, kind: int, params):
        kind = int(kind)
        if not 0 <= kind <= 3:
            raise ValueError(f"kind must be a built-in noise kind 0..3, got {kind!r}")
        self.kind = kind
        self.params = tuple(float(v) for v in np.ravel(params))
        super().__init__()

    def make_node(self, z, n, p):
        z, n, p = (pt.as_tensor_variable(v).astype("float64") for v in (z, n, p))
        if z.ndim != 2 or n.ndim != 1 or p.ndim != 2:
            raise TypeError("MultinomialNoiseLogp takes z (M, V), n (M,), p (M, V)")
        return Apply(self, [z, n, p], [n.type(), p.type()])

    def perform(self, node, inputs, output_storage):
        z, n, p = (np.ascontiguousarray(v) for v in inputs)
        out = np.empty(z.shape[0])
        grad = np.empty(z.shape)
        _rows(z, n, p, self.kind, np.asarray(self.params), out, grad)
        output_storage[0][0] = out
        output_storage[1][0] = grad

    def infer_shape(self, node, input_shapes):
        return [input_shapes[1], input_shapes[2]]

    def pullback(self, inputs, outputs, cotangents):
        z, n, _p = inputs
        g_lp, g_grad = cotangents
        if not isinstance(g_grad.type, DisconnectedType):
            raise NotImplementedError("the gradient output of MultinomialNoiseLogp is final")
        if isinstance(g_lp.type, DisconnectedType):
            return [DisconnectedType()() for _ in range(3)]
        g_z = grad_undefined(self, 0, z, "the released cells are data")
        return [g_z, pt.zeros_like(n), g_lp[:, None] * outputs[1]]


def _numba_funcify_multinomial_noise(op, node, **kwargs):
    kind = op.kind
    params = np.asarray(op.params, dtype=np.float64)

    @numba.njit
    def impl(z, n, p):
        out = np.empty(z.shape[0])
        grad = np.empty(z.shape)
        _rows(
            np.ascontiguousarray(z),
            np.ascontiguousarray(n),
            np.ascontiguousarray(p),
            kind,
            params,
            out,
            grad,
        )
        return out, grad

    return impl, (_VERSION << 64) | SOURCE_INT


@numba_registration
def _register_numba():
    # when PyTensor's numba backend is imported (before its linker compiles anything)
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    register_funcify_default_op_cache_key(MultinomialNoiseLogp)(_numba_funcify_multinomial_noise)


def multinomial_noise_logp(value, n, p, kind: int, params):
    """PyTensor graph of the exact marginal of noisy multinomial rows.

    Parameters
    ----------
    value : tensor of shape (..., V)
        Released rows.
    n : tensor of shape (...)
        Row totals.
    p : tensor of shape (..., V)
        Category probabilities (broadcast against ``value``).
    kind : int
        Noise family (:mod:`pymc_dp.kernels.noise_logpdf`).
    params : sequence of float
        Its parameters (a mechanism's ``numba_params``).

    Returns
    -------
    tensor of shape (...)

    Examples
    --------
    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> from pymc_dp.kernels.noise_logpdf import GEOMETRIC
    >>> from pymc_dp.mechanisms.geometric import Geometric
    >>> p = pt.dvector("p")
    >>> lp = multinomial_noise_logp(np.array([[2, 0, 1]]), np.array([3]), p, GEOMETRIC,
    ...                             Geometric(epsilon=1.0).numba_params).sum()
    >>> f = pytensor.function([p], [lp, pytensor.grad(lp, p)], mode="FAST_COMPILE")
    >>> v, g = f(np.array([0.5, 0.2, 0.3]))
    >>> bool(np.isfinite(v) and g.shape == (3,))
    True

    (``mode="FAST_COMPILE"`` only to keep this example quick; the default numba mode runs the
    Op's numba lowering.)
    """
    value = pt.as_tensor_variable(value).astype("float64")
    n = pt.as_tensor_variable(n).astype("float64")
    p = pt.as_tensor_variable(p).astype("float64")
    z_b, n_b, p_b = pt.broadcast_arrays(value, n[..., None], p)
    nv = z_b.shape[-1]
    batch = z_b.shape[:-1]
    lp, _ = MultinomialNoiseLogp(kind, params)(
        z_b.reshape((-1, nv)), n_b[..., 0].reshape((-1,)), p_b.reshape((-1, nv))
    )
    return lp.reshape(batch)
