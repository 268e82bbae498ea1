"""Pure numpy / numba kernels, testable without a model."""
