"""Worked examples built on pymc_dp (importable and tested, like :mod:`pymc_dp.demo`)."""
