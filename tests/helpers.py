"""Independent reference computations shared by the tests."""

from __future__ import annotations

import os

import numpy as np

from hilbertgeom.tolerances import tolerance, unit_roundoff


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


# --------------------------------------------------------------------------- tolerances
# Every comparison in the tests takes its tolerance from hilbertgeom.tolerances (see
# tests/test_tolerance_policy.py, which rejects literal ones); these are shorthands.
U64 = unit_roundoff(np.float64)  # 2^-53


def kernel_rtol(n: int, dtype=np.float64) -> float:
    """``4 (n + 2) u``: the policy's allowance for one ``n``-term sum or dot product
    (``gamma_n = n u / (1 - n u)`` with a factor of about 4 to spare; see
    ``tolerance("kernel")``)."""
    return tolerance("kernel", dtype, d=n).rtol


def default_of(fn, name: str):
    """The default of keyword ``name`` of ``fn`` (a solver's own ``tol``, say), so that a test
    comparing against what the library was asked for follows the library's default."""
    import inspect

    return inspect.signature(fn).parameters[name].default


def gamma(n: int, dtype=np.float64) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``: the worst-case relative error of an ``n``-term
    sum or dot product in any order (Accuracy and Stability of Numerical Algorithms, 2nd ed.,
    Lemma 3.1 and section 4.2), for a check that must be tighter than the kernel policy's
    ``4 (n + 2) u``."""
    u = unit_roundoff(dtype)
    return n * u / (1 - n * u)
