r"""Static windows for the truncated-sum marginals under JAX (a rewrite for JAX graphs only).

The truncated sums of :mod:`pymc_dp.distributions.marginals` (Poisson + discrete Gaussian,
NegativeBinomial + geometric / Laplace / discrete Gaussian) sum each record over a window
whose length depends on the parameters; JAX needs static shapes. Their window is marked by
:class:`~pymc_dp.distributions.marginals.StaticWindow`, and the rewrite here, registered in
PyTensor's ``optdb`` with the ``"jax"`` tag only (so it runs in ``mode="JAX"`` and in PyMC's
JAX route, ``pymc.sampling.jax.get_jaxified_graph``, and nowhere else), replaces it:

* where a window of static length certifies the sum at every parameter value, by that
  window: ``[max(mode - W, 0), max(mode - W, 0) + 2W]`` with ``mode`` the mode of
  :math:`h(y) = \log p(y) + \log\eta(z - y)` and ``W`` the noise's half-width at
  ``TAIL_NATS`` (a constant of the mechanism), behind a :class:`GridGuard` that refuses a
  grid of more than ``MAX_GRID_CELLS`` cells when the number of records is known (when
  JAX traces the function);
* elsewhere, by a :class:`JaxRefusal` on the length, whose JAX function raises
  ``NotImplementedError`` naming the pair and the remedy (PyMC's default sampler or
  ``nuts_sampler="nutpie"``) when the graph is converted to JAX, ahead of PyTensor's own
  message about ``jnp.arange``.

Why the static window certifies
-------------------------------
With a log-concave base (Poisson; NegativeBinomial with ``n >= 1``) and discrete-Gaussian
noise of scale :math:`\sigma`, :math:`\log\eta(t) = -t^2/(2\sigma^2) + c`, so the increments
:math:`d(y) = h(y+1) - h(y)` fall by at least :math:`1/\sigma^2` per step. At the mode
:math:`y^*` (the smallest :math:`y` with :math:`d(y) \le 0`), :math:`d(y^* + j) \le
-j/\sigma^2` and :math:`d(y^* - j) \ge (j - 1)/\sigma^2`, hence for every :math:`k \ge 0`

.. math::

    h(y^* \pm k) \le h(y^*) - \frac{k(k-1)}{2\sigma^2}.

With :math:`W = \lceil \sigma\sqrt{2\,T} \rceil + 1` (:math:`T` = ``TAIL_NATS`` = 70) the
first neglected term on either side is below :math:`e^{-T} e^{h(y^*)}` and the neglected
terms fall geometrically with ratio at most :math:`e^{-W/\sigma^2}`, so the neglected mass
relative to the sum is at most :math:`2e^{-70}/(1 - e^{-W/\sigma^2}) \approx 2e^{-70}
\sigma/11.8` (below ``TAIL_TOL`` = 1e-12 for every :math:`\sigma < 10^{18}`), whatever the
parameters and the observation: the window never cuts off posterior mass. The marginal's
own run-time bound check (the geometric series of ``h`` beyond each end) still certifies
every value. For exponential-tailed noise the curvature comes from the base alone and the
needed window follows the base's spread; for a base that is not log-concave the mode does
not bound the mass: those pairs are refused.

Examples
--------
>>> import warnings, numpy as np, pymc as pm, pytensor
>>> from pymc_dp.distributions.marginals import truncated_sum_marginal
>>> from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
>>> mu = pytensor.tensor.dscalar("mu")
>>> lp = truncated_sum_marginal(np.array([0.0, 5.0]), pm.Poisson.dist(mu),
...                             DiscreteGaussian(sigma=2.0))
>>> with warnings.catch_warnings():  # JAX drops the check of mu >= 0 (PyTensor warns)
...     warnings.simplefilter("ignore", UserWarning)
...     f = pytensor.function([mu], lp, mode="JAX")  # static window: 2 x 51 cells
>>> bool(np.allclose(f(4.0), pytensor.function([mu], lp)(4.0), rtol=1e-13, atol=0))
True
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter

from pymc_dp.distributions.marginals import MAX_GRID_CELLS

__all__ = ["GridGuard", "JaxRefusal", "static_window_for_jax"]


class GridGuard(Op):
    """Identity on the windows' starts; under JAX, refuses a grid beyond ``MAX_GRID_CELLS``.

    ``records x length`` cells are summed; its JAX function checks that number once the
    records' count is known (at conversion if the start's static shape is, else when the
    function is traced) and raises ``NotImplementedError`` beyond ``max_cells``. Not
    constant-folded, so a constant start keeps its check.
    """

    __props__ = ("length", "max_cells", "pair")
    view_map = {0: [0]}  # noqa: RUF012 (PyTensor's Op attribute)

    def __init__(self, length: int, max_cells: int, pair: str):
        self.length = int(length)
        self.max_cells = int(max_cells)
        self.pair = pair

    def make_node(self, start):
        start = pt.as_tensor_variable(start)
        return Apply(self, [start], [start.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def do_constant_folding(self, fgraph, node):
        return False

    def pullback(self, inputs, outputs, output_grads):
        return [output_grads[0]]

    def check(self, shape) -> None:
        """Raise ``NotImplementedError`` if ``prod(shape) x length`` exceeds ``max_cells``."""
        cells = math.prod(int(s) for s in shape) * self.length
        if cells > self.max_cells:
            raise NotImplementedError(
                f"Privatized({self.pair}) under JAX: the static window of {self.length} "
                f"points per record needs {cells} grid cells, more than MAX_GRID_CELLS = "
                f"{self.max_cells} (fewer records or less noise fit). Sample this model with "
                "pm.sample's default sampler or nuts_sampler='nutpie' (both compile it with "
                "numba; their windows adapt to the parameters)."
            )


class JaxRefusal(Op):
    """Identity on a truncated sum's window length; its JAX function raises ``message``.

    It only appears in JAX graphs (put there by :func:`static_window_for_jax` for a pair
    without a certified static window). Constant-folded like any identity: a length that is
    a constant needs no static window.
    """

    __props__ = ("message",)
    view_map = {0: [0]}  # noqa: RUF012 (PyTensor's Op attribute)

    def __init__(self, message: str):
        self.message = message

    def make_node(self, length):
        length = pt.as_tensor_variable(length)
        return Apply(self, [length], [length.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def connection_pattern(self, node):
        return [[False]]

    def pullback(self, inputs, outputs, output_grads):
        return [disconnected_type()]


@node_rewriter(None)
def static_window_for_jax(fgraph, node):
    """JAX graphs only: the static window, or the refusal (module docstring).

    Matches :class:`~pymc_dp.distributions.marginals.StaticWindow` by its marker attribute,
    not its class (a module executed twice, as by pytest's doctest collection, makes two).
    """
    if not getattr(node.op, "is_static_window_marker", False):
        return None
    start, length, mode = node.inputs
    op = node.op
    if op.refusal is not None:
        return [start, JaxRefusal(op.refusal)(length)]
    size = 2 * op.halfwidth + 1
    new_start = pt.maximum(mode - np.float64(op.halfwidth), np.float64(0.0))
    if new_start.type.broadcastable != start.type.broadcastable:
        new_start = pt.broadcast_to(new_start, start.shape)
    new_start = GridGuard(size, MAX_GRID_CELLS, op.pair)(new_start.astype(start.dtype))
    return [start.type.filter_variable(new_start), pt.constant(np.int64(size), dtype=length.dtype)]


if "pymc_dp_static_window_jax" not in optdb:
    # before the marker is dropped for the other backends (position 0.2, fast_run)
    optdb.register(
        "pymc_dp_static_window_jax",
        dfs_rewriter(static_window_for_jax),
        "jax",
        position=0.1,
    )
