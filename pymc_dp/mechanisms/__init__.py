"""Privacy mechanisms: Laplace, two-sided geometric, Gaussian, discrete Gaussian."""
