"""Noise distributions and the wrappers that condition a model on privatized data."""
