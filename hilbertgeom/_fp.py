"""Floating-point helpers shared by the kernels: exact power-of-two scaling.

Multiplying by a power of two is exact unless the result leaves the normal
range, so a function that is homogeneous in its input can scale the input to
unit size, compute, and scale the answer back with one rounding: no overflow
or underflow then decides the answer, and ``f(2^k X) == 2^k f(X)`` holds bit
for bit wherever the answer is a normal number.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

import array_api_compat
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


def max_abs(X, xp=None) -> float:
    """``max |X|`` without forming ``|X|`` (no copy of a large array); any array namespace."""
    if xp is None:
        xp = array_api_compat.array_namespace(X)
    return max(float(xp.max(X)), -float(xp.min(X))) if math.prod(X.shape) else 0.0


# ----------------------------------------------------------------------- array API (any namespace)
def pow2(k, xp):
    """``2.0**k`` as a float64 array of ``xp`` for integer-valued ``k`` in ``[-1074, 1023]``
    (exact: a power of two in that range is a float64)."""
    return xp.pow(xp.asarray(2.0, dtype=xp.float64), xp.astype(k, xp.float64))


def exponent(x, xp):
    """Integer-valued float64 ``e`` with ``x`` in ``[2^(e-1), 2^e)`` (``frexp``'s exponent)
    for ``x > 0``; 0 where ``x == 0``.

    ``log2`` gives the exponent to within one (it may round up just below a
    power of two); comparing with the exact powers of two fixes it.
    """
    pos = x > 0
    xs = xp.where(pos, xp.astype(x, xp.float64), xp.ones_like(x, dtype=xp.float64))
    with np.errstate(over="ignore", under="ignore"):  # NumPy-backed namespaces: 2^1024 is inf, as wanted
        e = xp.floor(xp.log2(xs)) + 1.0
        e = xp.where(xs < pow2(e - 1.0, xp), e - 1.0, e)
        up = xp.logical_and(e <= 1023.0, xs >= pow2(xp.minimum(e, 1023.0), xp))  # x < 2^1024 always
        e = xp.where(up, e + 1.0, e)
    return xp.where(pos, e, xp.zeros_like(e))


def scale_pow2(X, k, xp):
    """``X 2^k`` rounded once (what ``np.ldexp`` returns), for ``k`` an integer-valued
    array broadcasting against ``X`` (one power per column, say) with entries in
    ``[-1074, 2046]``.

    A power of two in ``[2^-1074, 2^1023]`` is one float64, and one multiplication
    by it rounds once; larger powers scale up in two exact steps (a result beyond
    float64 is ``inf`` either way).
    """
    a = xp.minimum(k, xp.asarray(1023.0, dtype=xp.float64))
    Y = X * pow2(a, xp)
    if bool(xp.any(k > 1023.0)):
        Y = Y * pow2(k - a, xp)
    return Y


def mul_pow2(X, k: int):
    """``X 2^k`` for a Python integer ``k >= -1074``, rounded once (any array namespace;
    ``X`` itself when ``k == 0``)."""
    if k == 0:
        return X
    if k <= 1023:
        return X * math.ldexp(1.0, k)
    return X * math.ldexp(1.0, 1023) * math.ldexp(1.0, k - 1023)  # scaling up: both steps exact


# ----------------------------------------------------------------------- unit size at entry
def unit_scale(X, xp=None, top: float | None = None) -> int:
    """``k`` with ``max |X| 2^k`` in ``[1/2, 1)`` where ``X 2^k`` is exact, else 0 (0 for ``X = 0``).

    A function of degree 0 or 1 in ``X`` that computes on ``X 2^k`` does the very
    same arithmetic for ``X`` and for ``2^a X``: its answer is the same bits
    (degree 0), or ``2^a`` times them rounded once (degree 1), at every magnitude,
    and no column sum or row norm of ``X`` over- or underflows on the way.  Scaling
    down is inexact only where an entry lands below the normal range of ``X``'s
    dtype with bits to lose (``X`` spans more than about ``2^1022`` in float64); ``k``
    is 0 then.  Any array namespace (``xp``, default ``X``'s): only Python scalars
    reach the host (:mod:`hilbertgeom.gpu` runs it on device arrays).  ``top``: ``max |X|``
    when the caller has it already.
    """
    if xp is None:
        xp = array_api_compat.array_namespace(X)
    if top is None:
        top = max_abs(X, xp)
    if top == 0.0:
        return 0
    k = -math.frexp(top)[1]
    if k >= 0:  # scaling up is exact: the largest entry stays below 1
        return k
    inf = xp.asarray(math.inf, dtype=X.dtype)
    small = float(xp.min(xp.where(X != 0, xp.abs(X), inf)))
    if math.ldexp(small, k) >= float(xp.finfo(X.dtype).smallest_normal):  # every entry stays normal
        return k
    return k if bool(xp.all(mul_pow2(mul_pow2(X, k), -k) == X)) else 0


@contextlib.contextmanager
def zero_sum_named(G0, center: bool, k: int, xp=None, rows: int | None = None):
    """Around a computation on ``G0 2^k``: a ``ValueError`` raised there is raised again
    with ``G0``'s own column sums when ``G0`` breaks the zero-sum rule (the message
    names the input as given, not its scaled copy).  ``xp`` (a namespace other than
    NumPy's, e.g. :mod:`hilbertgeom.gpu`'s) and ``rows`` (its row chunk) run the rule
    with :func:`hilbertgeom._validate.zero_sum_mean` in that namespace."""
    try:
        yield
    except ValueError:
        if k != 0:
            from . import _validate as _v

            with np.errstate(over="ignore", invalid="ignore"):
                if xp is None:
                    _v.zero_sum_matrix(G0, center)
                else:
                    _v.zero_sum_mean(G0, xp, center, rows)
        raise


T_OVERFLOW = "T(G) exceeds the float64 range (its certified bracket overflows); scale G down"

SPAN = ("G spans more than the float64 range allows (entries near 1e308 next to subnormal ones); "
        "scale or truncate it")


def zero_sum_at_unit(G0: np.ndarray, center: bool):
    """``(G0 2^k, P G0 2^k, centered, k)`` with ``k = unit_scale(G0)``: the zero-sum rule
    and the centring of ``_validate.zero_sum_matrix`` at unit size, where no column sum
    overflows (entries near ``1e308``) and no mean rounds in the subnormal range.

    A zero-sum error names ``G0``'s own column sums; where ``G0`` spans too much for an
    exact scaling and its centring overflows, a ``ValueError`` says so.
    """
    from . import _validate as _v

    k = unit_scale(G0)
    Gs = mul_pow2(G0, k)
    with zero_sum_named(G0, center, k), np.errstate(over="ignore", invalid="ignore"):
        X, centered = _v.zero_sum_matrix(Gs, center)
    if k == 0 and not np.isfinite(X).all():
        raise ValueError(SPAN)
    return Gs, X, centered, k


def scaled_certificate(ten, k: int):
    """The certificate of :func:`~hilbertgeom.min_tension` for ``G 2^k`` from the one for
    ``G`` (a ``TensionResult``): value, gap and flow times ``2^k``, each rounded once
    (value down, gap and cost up where they land below the normal range);
    the potential is scale-free.  ``ValueError`` where the bracket leaves float64, as
    ``min_tension`` raises."""
    if k == 0:
        return ten
    cost = ldexp_up(ten.flow.cost, k)
    if math.isinf(cost):
        raise ValueError(T_OVERFLOW)
    with np.errstate(over="ignore"):
        flow = replace(ten.flow.scaled(k), cost=cost)
    value = ldexp_down(ten.value, k)  # outward where the bracket lands below the normal range
    gap = max(ldexp_up(ten.gap, k), cost - value)  # a difference of subnormals is exact
    return replace(ten, value=value, gap=gap, flow=flow)


def ldexp(X: np.ndarray, k: int) -> np.ndarray:
    """``X 2^k`` (exact, rounding once where the result is subnormal); ``X`` itself if ``k == 0``."""
    return X if k == 0 else np.ldexp(X, k)


def ldexp_inf(x: float, k: int) -> float:
    """``x 2^k`` correctly rounded, ``+-inf`` where that overflows."""
    try:
        return math.ldexp(x, k)
    except OverflowError:
        return math.copysign(math.inf, x)


def ldexp_down(x: float, k: int) -> float:
    """The largest float ``<= x 2^k``: ``x 2^k`` itself in the normal range (where scaling
    by a power of two is exact), rounded down where the result is subnormal and ``ldexp``
    would round to nearest; ``-inf`` past the range.  For lower bounds."""
    y = ldexp_inf(x, k)
    if abs(y) < _TINY and math.ldexp(y, -k) > x:  # scaling a subnormal back up is exact
        y = float(np.nextafter(y, -math.inf))
    return y


def ldexp_up(x: float, k: int) -> float:
    """The smallest float ``>= x 2^k`` (see :func:`ldexp_down`).  For upper bounds."""
    y = ldexp_inf(x, k)
    if abs(y) < _TINY and math.ldexp(y, -k) < x:
        y = float(np.nextafter(y, math.inf))
    return y


_TINY = float(np.finfo(np.float64).tiny)


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
