"""Special functions in log space (numpy, PyTensor and numba forms)."""
