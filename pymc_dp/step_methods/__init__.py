"""PyMC step methods over the pure kernels in :mod:`pymc_dp.kernels`."""
