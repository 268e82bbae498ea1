"""A key that changes whenever the package's source changes, for PyTensor's compile cache.

PyTensor keeps compiled numba functions on disk (in ``~/.pytensor``, shared by every checkout
and version of pymc_dp) under the cache key that an Op's numba lowering returns. A key fixed by
hand goes stale when a kernel changes and nobody bumps it: PyTensor then serves the old compiled
code. Every pymc_dp lowering therefore includes :data:`SOURCE_KEY`, a hash of the package's own
source files, so new code is never run as old code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["SOURCE_INT", "SOURCE_KEY"]


def _source_key() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: hash of the package's source files (16 hex digits)
SOURCE_KEY: str = _source_key()
#: the same hash as an integer (random-variable cores need an int key)
SOURCE_INT: int = int(SOURCE_KEY, 16)
