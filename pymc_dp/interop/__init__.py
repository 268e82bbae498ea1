"""Adapters between pymc_dp and other differential-privacy libraries.

:func:`from_opendp` turns a release made with OpenDP (https://opendp.org, the ``opendp``
extra: ``pip install "pymc_dp[opendp]"``) into a pymc_dp mechanism and observed value.
Importing this package does not import OpenDP; the adapter imports it when first called.
"""

from pymc_dp.interop.opendp import OPENDP_RTOL, from_opendp

__all__ = ["OPENDP_RTOL", "from_opendp"]
