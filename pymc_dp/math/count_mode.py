r"""Mode of :math:`h(y) = \log p(y) + \log\eta(z - y)` over the integers :math:`y \ge 0`.

``p`` is a count law (Poisson or negative binomial) and ``eta`` a noise law (two-sided
exponential: Laplace, geometric; or Gaussian, discrete Gaussian). The mode is the smallest
``y`` in ``[0, upper]`` with :math:`h(y+1) - h(y) \le 0`, found by bisection (at most 64
halvings of ``[0, upper]``). When ``p`` and ``eta`` are log-concave the increment is
non-increasing and this is the argmax of ``h``; otherwise it is some point of the interval.

Increments (:math:`t = z - y`):

* Poisson(:math:`\mu`): :math:`\log\mu - \log(y+1)`; negative binomial(:math:`n, p`):
  :math:`\log(1-p) + \log(y+n) - \log(y+1)`;
* two-sided exponential of rate :math:`a`: :math:`\log\eta(t-1) - \log\eta(t) =
  a(|t| - |t-1|) = a(t - \tfrac12) / ((|t-1| + |t|)/2)` (no cancellation beyond
  :math:`2^{53}`); Gaussian of scale :math:`s`: :math:`(t - \tfrac12)/s^2`.

The PyTensor form :data:`count_mode_pt` is an Elemwise built by
:mod:`pymc_dp.math.scalar_op` (native numba, no gradient: the mode only places a window).
"""

from __future__ import annotations

import math

import numba

from pymc_dp.math.scalar_op import KernelScalarOp, no_gradient, scalar_elemwise

__all__ = [
    "BASE_NEGBIN",
    "BASE_POISSON",
    "NOISE_EXPONENTIAL",
    "NOISE_GAUSSIAN",
    "CountMode",
    "count_mode_pt",
    "count_mode_scalar",
]

BASE_POISSON = 0
BASE_NEGBIN = 1
NOISE_EXPONENTIAL = 0
NOISE_GAUSSIAN = 1


@numba.njit(cache=True)
def _base_step(kind, b1, b2, y):
    if kind == BASE_POISSON:
        return math.log(b1) - math.log1p(y)
    return math.log1p(-b2) + math.log(y + b1) - math.log1p(y)


@numba.njit(cache=True)
def _noise_step(kind, q, t):
    if kind == NOISE_EXPONENTIAL:
        den = 0.5 * abs(t - 1.0) + 0.5 * abs(t)
        return q * (t - 0.5) / den if den > 0.0 else 0.0
    return ((t - 0.5) / q) / q


@numba.njit(cache=True)
def count_mode_scalar(z, upper, base, b1, b2, noise, q):
    r"""Mode of :math:`h` in ``[0, upper]`` (numba scalar kernel; module docstring).

    ``base``: :data:`BASE_POISSON` (``b1`` the rate) or :data:`BASE_NEGBIN` (``b1 = n``,
    ``b2 = p``); ``noise``: :data:`NOISE_EXPONENTIAL` (``q`` the rate ``a``) or
    :data:`NOISE_GAUSSIAN` (``q`` the scale). NaN parameters give some point of the interval.

    Examples
    --------
    Poisson(30) seen through Gaussian noise of scale 40 at ``z = 1e6``: the mass hugs ``z``,
    about :math:`\sigma^2 \log(z/\mu) = 16640` below it.

    >>> y = count_mode_scalar(1e6, 1e6 + 1.0, BASE_POISSON, 30.0, 0.0, NOISE_GAUSSIAN, 40.0)
    >>> 983_000 < y < 984_000
    True
    """
    lo = 0.0
    hi = max(math.floor(upper), 0.0)
    for _ in range(64):
        if lo >= hi:
            break
        mid = math.floor(0.5 * lo + 0.5 * hi)
        step = _base_step(int(base), b1, b2, mid) + _noise_step(int(noise), q, z - mid)
        if step <= 0.0:
            hi = mid
        else:
            lo = mid + 1.0
    return min(lo, hi)


class CountMode(KernelScalarOp):
    """Scalar Op ``count_mode(z, upper, base, b1, b2, noise, q)``; no gradient."""

    nin = 7
    kernel = staticmethod(count_mode_scalar)

    def pullback(self, inputs, outputs, output_grads):
        return [no_gradient(self, i, v) for i, v in enumerate(inputs)]


count_mode_scalar_op, count_mode_pt = scalar_elemwise(CountMode, "count_mode")
