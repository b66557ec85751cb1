"""Floating-point helpers shared by the kernels: exact power-of-two scaling.

Multiplying by a power of two is exact unless the result leaves the normal
range, so a function that is homogeneous in its input can scale the input to
unit size, compute, and scale the answer back with one rounding: no overflow
or underflow then decides the answer, and ``f(2^k X) == 2^k f(X)`` holds bit
for bit wherever the answer is a normal number.
"""

from __future__ import annotations

import math

import numpy as np

__all__: list[str] = []  # private module

# Entries of largest magnitude in [2^-SAFE, 2^SAFE] are used as they are; products
# of two such quantities and sums of a few million of them stay normal and finite.
SAFE = 400


def scale_to_unit(X, m: float):
    """``(X * 2**k, k)`` with ``k`` chosen so that ``m * 2**k`` lies in ``[0.5, 1)``.

    ``m > 0`` is the largest magnitude in ``X``.  The power of two is applied
    in two exact steps, since ``2**k`` alone overflows when ``m`` is subnormal.
    Works for any array namespace (only ``*`` with a Python float is used).
    """
    k = -math.frexp(m)[1]
    for step in (k // 2, k - k // 2):
        X = X * math.ldexp(1.0, step)
    return X, k


def unit_shift(m: float, safe: int = SAFE) -> int:
    """``k`` such that ``m 2^k`` lies in ``[1/2, 1)``, or 0 when ``m`` is 0 or already
    in ``[2^-safe, 2^safe]`` (no copy is needed there)."""
    if m == 0.0:
        return 0
    e = math.frexp(m)[1]
    return 0 if -safe <= e <= safe else -e


def max_abs(X: np.ndarray) -> float:
    """``max |X|`` without forming ``|X|`` (no copy of a large array)."""
    return max(float(X.max()), -float(X.min())) if X.size else 0.0


def ldexp(X: np.ndarray, k: int) -> np.ndarray:
    """``X 2^k`` (exact, rounding once where the result is subnormal); ``X`` itself if ``k == 0``."""
    return X if k == 0 else np.ldexp(X, k)


def ldexp_inf(x: float, k: int) -> float:
    """``x 2^k`` correctly rounded, ``+-inf`` where that overflows."""
    try:
        return math.ldexp(x, k)
    except OverflowError:
        return math.copysign(math.inf, x)


def product(*factors: float, shift: int = 0, what: str = "the answer", names: str = "the input") -> float:
    """``prod(factors) 2^shift`` for finite factors, without overflow or underflow in between.

    The mantissas are multiplied (one rounding each, as a direct product would
    round in the normal range) and the exponents added; the final scaling
    rounds once.  A result beyond float64 raises a ``ValueError`` that names
    ``what`` and the arguments ``names``.
    """
    m, e = 1.0, int(shift)
    for f in factors:
        fm, fe = math.frexp(float(f))
        m, k = math.frexp(m * fm)
        e += fe + k
    try:
        return math.ldexp(m, e)
    except OverflowError:
        raise ValueError(f"{what} exceeds the float64 range (> {np.finfo(np.float64).max:.4g}); "
                         f"rescale {names}") from None
