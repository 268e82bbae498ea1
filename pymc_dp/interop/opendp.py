r"""Read a release made with OpenDP as a pymc_dp mechanism and observed value.

OpenDP (https://opendp.org, version 0.16) is how a data holder makes a release today: a
``Measurement`` such as ``dp.t.make_count(...) >> dp.m.then_laplace(scale=2.0)``, invoked on the
data. :func:`from_opendp` takes that measurement and the released value and returns the pmdp
mechanism whose noise law is the one OpenDP drew from, with the sensitivity OpenDP's own
stability map gives, and the released value as observed data:

.. code-block:: python

    mech, z = pmdp.interop.from_opendp(meas, meas(data))
    with pm.Model():
        ...
        pmdp.Release("z", statistic, mech, observed=z)

What is read, and from where. A ``Measurement`` does not expose its noise scale as an
attribute; OpenDP records every constructor call with its arguments (``__opendp_dict__``, the
data behind ``dp.serialize``), and the adapter reads the scale there. A chain
``transformation >> measurement`` (``make_chain_mt``, also what the Context API's
``query.resolve()`` builds) is followed to the noise measurement, and the sensitivity of the
statistic it noises is the transformations' stability map at ``d_in`` (the privacy unit: by
default one record added or removed).

Noise laws (OpenDP 0.16, integer carrier types):

* ``make_laplace`` on integers adds discrete Laplace noise, :math:`P(Y = k) \propto
  e^{-|k|/b}`: pmdp's :class:`~pymc_dp.mechanisms.geometric.Geometric` with
  :math:`\ln(1/\alpha) = 1/b`, ε-DP with :math:`\epsilon = \Delta_1 / b`;
* ``make_gaussian`` on integers adds discrete Gaussian noise with :math:`\sigma = b` (CKS 2020):
  pmdp's :class:`~pymc_dp.mechanisms.discrete_gaussian.DiscreteGaussian`, ρ-zCDP with
  :math:`\rho = \Delta_2^2 / (2 b^2)`.

Floats (``T=float``) with an explicit grid ``k``. OpenDP rounds the input to the grid
:math:`g = 2^k` (to nearest, ties up: exactly pmdp's :func:`~pymc_dp.mechanisms.discretized.snap`,
checked on thousands of inputs in the tests) and adds discrete Laplace or Gaussian noise of scale
:math:`b / g` grid steps: pmdp's :class:`~pymc_dp.mechanisms.discretized.Discretized` with that
grid. The observed value is then returned in grid units (int64,
:meth:`~pymc_dp.mechanisms.discretized.Discretized.to_units`), and a model conditions on it with
``pmdp.Release(name, mech.snap_pt(statistic), mech.base, observed=units)``.

The check. The adapter evaluates OpenDP's privacy map ``measurement.map(d_in)`` and pmdp's
guarantee of the mechanism it built (``epsilon`` for ``MaxDivergence``, ``rho`` for
``ZeroConcentratedDivergence``). For integers they must agree to :data:`OPENDP_RTOL` relative,
else ``ValueError``. Both libraries round up; the tolerance covers pmdp's rational
representation of the law it samples (a discrete Gaussian's :math:`\sigma^2` is the nearest
rational from above that the exact int64 sampler takes, relative excess below 2e-8). For floats
the two libraries account for the rounding differently: OpenDP's map charges the sensitivity plus
one grid step (:math:`d + g`), pmdp's guarantee :math:`\lceil d/g \rceil` grid steps (the exact
worst case, see :mod:`pymc_dp.mechanisms.discretized`). The adapter keeps pmdp's guarantee and
checks that OpenDP's map lies between it and pmdp's map one grid step further (equal to the
latter when ``d`` is a multiple of ``g``). A mechanism the user built (``mechanism=``) is
checked the same way: same family, same noise law (and grid), and (if it states one) the same
guarantee, else ``ValueError`` naming ``mechanism``.

What is refused, and why (each with a ``ValueError`` naming the argument):

* OpenDP's floating-point mechanisms without an explicit ``k`` (their default grid is far finer
  than anything pmdp models), on ``f32``, or on float vectors (not read yet); noise scales
  outside what pmdp's exact samplers take.
* Unsigned carrier types (``T="u32"``): OpenDP's addition saturates at 0, so a count near 0
  is released censored, not with additive noise; use a signed type (``T="i32"``/``"i64"``).
* A released value at the minimum or maximum of a signed carrier type (e.g. ``2**31 - 1`` for
  ``i32``): it may have been clamped by the same saturating addition.
* Post-processing after the noise (``make_chain_pm``), compositions and other measurements: the
  release is then not ``statistic + noise``.

Examples
--------
>>> import numpy as np
>>> import opendp.prelude as dp
>>> from pymc_dp.interop import from_opendp
>>> dp.enable_features("contrib")
>>> meas = dp.t.make_count(dp.vector_domain(dp.atom_domain(T=bool)), dp.symmetric_distance()) \
...     >> dp.m.then_laplace(scale=2.0)
>>> mech, z = from_opendp(meas, meas([True, False, True]))
>>> mech
Geometric(epsilon=0.5, sensitivity=1)
>>> z.dtype, z.shape
(dtype('int64'), ())
"""

from __future__ import annotations

import importlib
import math
import numbers
import re
from fractions import Fraction

import numpy as np

from pymc_dp._validation import as_release_values
from pymc_dp.mechanisms.base import Mechanism, as_integer_sensitivity
from pymc_dp.mechanisms.discrete_gaussian import DiscreteGaussian
from pymc_dp.mechanisms.discretized import Discretized, _integer_sensitivity, as_grid
from pymc_dp.mechanisms.geometric import Geometric

__all__ = ["OPENDP_RTOL", "from_opendp"]

#: relative tolerance of the comparisons with OpenDP (noise law and privacy map): covers the
#: rational representation of the sampled law (discrete Gaussian sigma^2: excess below 2e-8)
OPENDP_RTOL = 1e-7

#: OpenDP noise constructor -> (pmdp mechanism class, OpenDP output measure, guarantee field)
_CORES = {
    "make_laplace": (Geometric, "MaxDivergence", "epsilon"),
    "make_gaussian": (DiscreteGaussian, "ZeroConcentratedDivergence", "rho"),
}
_SIGNED = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "i128": 128, "isize": 64}


def _opendp():
    """``opendp.mod``, imported on first use, or ``ImportError`` naming the extra."""
    try:
        return importlib.import_module("opendp.mod")
    except ImportError as err:  # pragma: no cover - the dev extra installs opendp
        raise ImportError(
            'from_opendp needs OpenDP: pip install "pymc_dp[opendp]" (opendp>=0.16,<0.17)'
        ) from err


def _spec(obj) -> dict:
    spec = getattr(obj, "__opendp_dict__", None)
    if not isinstance(spec, dict) or "__function__" not in spec:
        raise ValueError(
            f"measurement: cannot read how this OpenDP object was built ({obj!r}); build it "
            "with OpenDP's constructors (dp.m.make_laplace, dp.m.make_gaussian, or a chain "
            "transformation >> dp.m.then_laplace(...))"
        )
    return spec


def _as_d_in(d_in):
    if isinstance(d_in, bool | np.bool_) or not isinstance(d_in, numbers.Real):
        raise TypeError(f"d_in must be a positive number (the privacy unit), got {d_in!r}")
    if isinstance(d_in, numbers.Integral):
        if not d_in >= 1:
            raise ValueError(f"d_in must be >= 1 (the privacy unit), got {d_in!r}")
        return int(d_in)
    x = float(d_in)
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(f"d_in must be finite and > 0 (the privacy unit), got {d_in!r}")
    return x


def _follow_chain(od, meas, d_in):
    """The noise measurement at the end of ``meas`` and the distance ``d`` at its input."""
    d = d_in
    spec = _spec(meas)
    while spec["__function__"] == "make_chain_mt":
        d = _opendp_map(od, spec["__kwargs__"]["transformation0"], d, d_in)
        meas = spec["__kwargs__"]["measurement1"]
        spec = _spec(meas)
    return meas, spec, d


def _opendp_map(od, obj, d, d_in):
    """``obj.map(d)``, with OpenDP's refusal of ``d`` re-raised naming ``d_in``."""
    try:
        return obj.map(d)
    except (od.OpenDPException, TypeError) as err:
        raise ValueError(
            f"d_in={d_in!r}: OpenDP's map of {type(obj).__name__} {obj.input_metric!s} refused "
            f"it ({str(err).strip().splitlines()[0]}); pass d_in in the input metric of the "
            "measurement (an int for symmetric_distance and integer metrics)"
        ) from err


def _rel_diff(a, b) -> float:
    a, b = Fraction(a), Fraction(b)
    return float(abs(a - b) / abs(b)) if b != 0 else math.inf


def _build(cls, scale: float, sensitivity: int) -> Mechanism:
    try:
        if cls is Geometric:
            eps = float(sensitivity / Fraction(scale))
            return Geometric(epsilon=eps, sensitivity=sensitivity)
        return DiscreteGaussian(sigma=scale, sensitivity=sensitivity)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"measurement: OpenDP's noise scale {scale!r} (sensitivity {sensitivity}) is outside "
            f"what pmdp's {cls.__name__} samples exactly: {err}"
        ) from err


def _law_mismatch(mech: Mechanism, cls, scale: float) -> float:
    """Relative difference between ``mech``'s law and OpenDP's (``inf`` for another family)."""
    if type(mech) is not cls:
        return math.inf
    if cls is Geometric:
        return _rel_diff(mech.rate, 1 / Fraction(scale))
    return _rel_diff(mech.sigma2, Fraction(scale) ** 2)


def _carrier(core, spec) -> tuple[str, bool, int | None]:
    """(element type, is a vector, vector size or None) of the noise measurement's input."""
    carrier = str(core.input_carrier_type)
    vector = carrier.startswith("Vec<")
    elem = carrier[4:-1] if vector else carrier
    size = None
    if vector:
        found = re.search(r"size=(\d+)", str(spec["__kwargs__"].get("input_domain", "")))
        size = int(found.group(1)) if found else None
    return elem, vector, size


def _check_carrier(elem: str, function: str, vector: bool, k) -> None:
    if elem.startswith("f"):
        if elem != "f64" or vector or k is None:
            raise ValueError(
                f"measurement: OpenDP's {function} on floats is read for a single f64 built "
                f"with an explicit grid k (got {'a vector of ' if vector else ''}{elem}, "
                f"k={k!r}): without k OpenDP's grid 2**k is far finer than anything pmdp "
                "models. Pass k= (e.g. k=-10) to OpenDP's constructor, or release an integer "
                "statistic"
            )
        return
    if elem not in _SIGNED:
        raise ValueError(
            f"measurement: OpenDP's {function} on the unsigned type {elem} saturates at 0 (a "
            "count near 0 is released censored, not with additive noise); build the "
            'measurement on a signed type such as T="i32" or T="i64"'
        )


def _observed(released, elem: str, vector: bool, size: int | None) -> np.ndarray:
    z = as_release_values(released, integer=True)
    if vector and (z.ndim != 1 or (size is not None and z.shape[0] != size)):
        want = f"length {size}" if size is not None else "one dimension"
        raise ValueError(f"released must be a 1-D vector of {want}, got shape {z.shape}")
    if not vector and z.ndim != 0:
        raise ValueError(f"released must be a single integer (a scalar measurement), got {z.shape}")
    bits = _SIGNED[elem]
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if lo >= -(2**63) and np.any((z <= lo) | (z >= hi)):
        raise ValueError(
            f"released holds the {elem} bound {lo} or {hi}: OpenDP's saturating addition may "
            "have clamped it (a censored value, not statistic + noise); build the measurement "
            'on a wider type (T="i64")'
        )
    return z


def _from_float(od, measurement, function, released, d_in, d_mid, scale, k, mechanism):
    """An f64 scalar measurement with grid ``2**k``: a :class:`Discretized` release."""
    cls, _, field = _CORES[function]
    try:
        grid = as_grid(2.0**k, "k")
        steps = _integer_sensitivity(Fraction(d_mid), grid, 1, "l1")  # (= "l2" in 1-D)
        units = Fraction(scale) / Fraction(grid)  # OpenDP's scale in grid units
        if cls is Geometric:
            mech = Discretized(grid=grid, epsilon=float(steps / units), sensitivity=d_mid)
        else:
            rho = float(Fraction(steps) ** 2 / (2 * units**2))
            mech = Discretized(grid=grid, rho=rho, sensitivity=d_mid)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(
            f"measurement: OpenDP's {function} with scale {scale!r} and k={k!r} is outside "
            f"what pmdp.Discretized samples exactly: {err}"
        ) from err
    if not _law_mismatch(mech.base, cls, float(units)) <= OPENDP_RTOL:  # pragma: no cover
        raise ValueError(f"measurement: pmdp's law {mech!r} is not OpenDP's (scale {scale!r})")
    theirs = float(_opendp_map(od, measurement, d_in, d_in))
    # OpenDP accounts the rounding as one extra grid step (d_in + 2**k); pmdp's as ceil(d / 2**k)
    # grid steps, the exact worst case: OpenDP's map lies between pmdp's guarantee and pmdp's
    # map one grid step further
    lo = getattr(mech.guarantee(), field)
    hi = getattr(mech.base.map(mech.base.sensitivity + 1), field)
    if not (lo <= theirs * (1 + OPENDP_RTOL) and theirs <= hi * (1 + OPENDP_RTOL)):
        raise ValueError(  # pragma: no cover - a defect of the adapter, not of the input
            f"measurement: OpenDP's map({d_in!r})={theirs!r} is not within pmdp's [{lo!r}, {hi!r}]"
        )
    if mechanism is not None:
        same = (
            isinstance(mechanism, Discretized)
            and mechanism.grid == grid
            and _law_mismatch(mechanism.base, cls, float(units)) <= OPENDP_RTOL
        )
        if not same:
            raise ValueError(
                f"mechanism: its noise law differs from OpenDP's (OpenDP: {function} on f64 with "
                f"scale {scale!r} and grid 2**{k}, i.e. {mech!r}; given: {mechanism!r}); drop "
                "mechanism= to use the one read from OpenDP"
            )
        given = getattr(mechanism.guarantee(), field)
        if not (lo * (1 - OPENDP_RTOL) <= given <= hi * (1 + OPENDP_RTOL)):
            raise ValueError(
                f"mechanism: its guarantee {field}={given!r} does not match OpenDP's privacy "
                f"map {theirs!r} at d_in={d_in!r} (sensitivity {d_mid!r}); state "
                f"sensitivity={d_mid!r}"
            )
        mech = mechanism
    z = np.asarray(released)
    if z.ndim != 0:
        raise ValueError(f"released must be a single number (a scalar measurement), got {z.shape}")
    try:
        return mech, mech.to_units(as_release_values(released, integer=False))
    except ValueError as err:
        raise ValueError(f"released: {err}") from err


def from_opendp(measurement, released, *, d_in=1, mechanism=None):
    """The pmdp mechanism and observed value of a release made with OpenDP.

    Reads the noise scale from the OpenDP measurement and the sensitivity from OpenDP's stability
    map of the transformations before the noise, builds the pmdp mechanism with that exact noise
    law, and checks that its guarantee equals OpenDP's privacy map ``measurement.map(d_in)``
    (module docstring: the supported measurements and what is refused).

    Parameters
    ----------
    measurement : opendp.mod.Measurement or opendp.context.Query
        The measurement that made the release: ``dp.m.make_laplace`` or ``dp.m.make_gaussian``
        on a signed integer scalar or vector, or on one f64 with an explicit grid ``k``, alone
        or after transformations
        (``make_count(...) >> then_laplace(...)``). A Context API query is resolved
        (``query.resolve()``).
    released : int, float or array_like of int
        What ``measurement`` returned: an integer, a vector for a vector measurement, or a float
        on the grid ``2**k``.
    d_in : int or float, default 1
        The privacy unit in the measurement's input metric (e.g. 1: one record added or
        removed, for ``symmetric_distance``).
    mechanism : pymc_dp mechanism or Discretized, optional
        A mechanism you built yourself: it is checked against OpenDP (same noise law and, if it
        states one, the same guarantee) and returned in place of the adapter's.

    Returns
    -------
    (Mechanism or Discretized, numpy.ndarray)
        The mechanism (``Geometric`` or ``DiscreteGaussian``, sensitivity = OpenDP's map of
        ``d_in`` through the transformations) and the release as int64 (0-d or 1-d), ready for
        ``pmdp.Release(name, statistic, mechanism, observed=...)`` or ``pmdp.Privatized``. For
        a float measurement: a ``Discretized`` (grid ``2**k``) and the release in grid units
        (0-d int64), for ``pmdp.Release(name, mech.snap_pt(statistic), mech.base,
        observed=...)``.

    Raises
    ------
    ImportError
        If OpenDP is not installed (``pip install "pymc_dp[opendp]"``).
    TypeError
        If ``measurement`` is not an OpenDP measurement, ``d_in`` not a number or ``mechanism``
        not a pymc_dp mechanism.
    ValueError
        If the measurement is not one whose law pmdp models exactly (module docstring), if
        ``released`` does not fit it, or if the guarantee or ``mechanism`` disagrees with
        OpenDP; each message names the argument.

    Examples
    --------
    >>> import opendp.prelude as dp
    >>> import pymc_dp as pmdp
    >>> from pymc_dp.interop import from_opendp
    >>> dp.enable_features("contrib")
    >>> meas = dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=2.0)
    >>> mech, z = from_opendp(meas, meas(10), d_in=2)
    >>> mech.sigma, mech.sensitivity, mech.guarantee().rho == meas.map(2)
    (2.0, 2, True)
    >>> f = dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
    ...                       scale=1.0, k=-3)
    >>> d, units = from_opendp(f, 0.625)
    >>> d.grid, int(units), d.guarantee().epsilon, f.map(1.0)  # OpenDP: (1 + 2**-3) / 1
    (0.125, 5, 1.0, 1.125)
    >>> from_opendp(meas, 12, mechanism=pmdp.DiscreteGaussian(sigma=2.1, sensitivity=1))
    Traceback (most recent call last):
    ...
    ValueError: mechanism: its noise law differs from OpenDP's ...
    """
    od = _opendp()
    if not isinstance(measurement, od.Measurement) and callable(
        getattr(measurement, "resolve", None)
    ):
        measurement = measurement.resolve()  # a Context API query
    if not isinstance(measurement, od.Measurement):
        raise TypeError(
            f"measurement must be an OpenDP Measurement (or Context query), got {measurement!r}"
        )
    if mechanism is not None and not isinstance(mechanism, Mechanism | Discretized):
        raise TypeError(f"mechanism must be a pymc_dp mechanism or None, got {mechanism!r}")
    d_in = _as_d_in(d_in)
    core, spec, d_mid = _follow_chain(od, measurement, d_in)
    function = spec["__function__"]
    if function not in _CORES:
        raise ValueError(
            f"measurement: its noise step is OpenDP's {function}, which from_opendp does not read "
            "(supported: make_laplace and make_gaussian on signed integers, optionally after "
            "transformations; no post-processing after the noise)"
        )
    cls, measure, field = _CORES[function]
    kwargs = spec["__kwargs__"]
    elem, vector, size = _carrier(core, spec)
    _check_carrier(elem, function, vector, kwargs.get("k"))
    if str(kwargs.get("MO", measure)) != measure or str(measurement.output_measure) != measure:
        raise ValueError(
            f"measurement: {function} with output measure {measurement.output_measure} is not "
            f"read (pmdp's {cls.__name__} is accounted in {measure})"
        )
    scale = kwargs["scale"]
    if not (isinstance(scale, float | int) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"measurement: OpenDP's scale must be finite and > 0, got {scale!r}")
    scale = float(scale)
    if elem == "f64":
        k = kwargs["k"]
        return _from_float(od, measurement, function, released, d_in, d_mid, scale, k, mechanism)
    sens = as_integer_sensitivity(d_mid)
    mech = _build(cls, scale, sens)
    theirs = float(_opendp_map(od, measurement, d_in, d_in))
    ours = getattr(mech.guarantee(), field)
    if not _rel_diff(ours, theirs) <= OPENDP_RTOL:
        raise ValueError(  # pragma: no cover - a defect of the adapter, not of the input
            f"measurement: pmdp's {field}={ours!r} differs from OpenDP's map({d_in!r})={theirs!r}"
        )
    if mechanism is not None:
        if not _law_mismatch(mechanism, cls, scale) <= OPENDP_RTOL:
            raise ValueError(
                f"mechanism: its noise law differs from OpenDP's (OpenDP: {function} with scale "
                f"{scale!r}, i.e. pmdp.{cls.__name__} {mech!r}; given: {mechanism!r}); drop "
                "mechanism= to use the one read from OpenDP"
            )
        if mechanism.has_privacy_claim:
            given = getattr(mechanism.guarantee(), field)
            if given is None or not _rel_diff(given, theirs) <= OPENDP_RTOL:
                raise ValueError(
                    f"mechanism: its guarantee {field}={given!r} differs from OpenDP's privacy "
                    f"map {theirs!r} at d_in={d_in!r} (sensitivity {sens} after the "
                    "transformations); state sensitivity={sens}"
                )
        mech = mechanism
    return mech, _observed(released, elem, vector, size)
