"""Floating-point helpers shared by the kernels."""

from __future__ import annotations

import math

__all__: list[str] = []  # private module


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
