"""Independent reference computations shared by the tests."""

from __future__ import annotations

import os

import numpy as np


def full() -> bool:
    """True when the exhaustive form of slow tests is requested (HILBERTGEOM_FULL=1)."""
    return os.environ.get("HILBERTGEOM_FULL", "") == "1"


def brute_pairs(X: np.ndarray, norm=2):
    """All-pairs float64 distances in row-major (i < j) order, computed directly.

    Independent of the library's tiled kernels; uses the documented float64
    formula ``sqrt(sum((x_i - x_j)**2))`` (with an exact power-of-two
    rescaling against under/overflow), so results can be compared exactly.
    """
    X = np.asarray(X, dtype=np.float64)
    V = X.shape[0]
    iu, ju = np.triu_indices(V, 1)
    diff = X[iu] - X[ju]
    if norm == 2:
        # The documented float64 formula: scale each difference by a power of
        # two (exact) so squares neither underflow (1e-300 ** 2 == 0) nor overflow.
        m = np.abs(diff).max(axis=1)
        e = np.clip(np.frexp(np.where(m > 0, m, 1.0))[1], -1021, 1023)
        f = np.ldexp(1.0, -e)
        d = np.sqrt(np.sum((diff * f[:, None]) ** 2, axis=1)) / f
    elif norm == 1:
        d = np.abs(diff).sum(axis=1)
    else:
        d = np.abs(diff).max(axis=1)
    return d, iu, ju


def brute_extreme(X, mode, norm=2):
    """(value, i, j): extreme float64 distance, ties to the smallest (i, j)."""
    d, iu, ju = brute_pairs(X, norm)
    k = int(np.argmax(d) if mode == "max" else np.argmin(d))  # first = smallest pair
    return float(d[k]), int(iu[k]), int(ju[k])
