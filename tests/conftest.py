import numpy as np
import pytest

# Fixed seeds: every stochastic test derives its generator from this root.
ROOT_SEED = 20261122


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id (stable across runs and orderings)."""
    seed = np.random.SeedSequence([ROOT_SEED, *request.node.nodeid.encode()])
    return np.random.default_rng(seed)
