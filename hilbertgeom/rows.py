"""The row cloud of an update: diameter, closest pair, centring.

``D(S) = max_{i<j} ||s_i - s_j||`` is the head norm of identity I6 (for the
Euclidean hidden-state ball); the row norm dual to the hidden-state norm gives
the ``l_1`` and ``l_inf`` variants.  All kernels are exact: the returned value
is the float64 distance of the extremal pair, and the pair is the smallest
``(i, j)`` (lexicographically, ``i < j``) among pairs attaining it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, overload

import array_api_compat
import numpy as np
from numpy.typing import ArrayLike

from . import _fp
from . import _validate as _v
from ._pairs import Pair, brute_pair, extreme_pair_l2, linf_diameter, on_distinct_rows
from ._validate import NormLike

__all__ = ["Pair", "center_rows", "closest_pair", "row_diameter"]

_DEFAULT_TILE = 2048
_BRUTE_ELEMENTS = 1 << 22  # working block of the O(V^2 d) searches, in float64 entries


def _tile(tile, default: int) -> int:
    return default if tile is None else _v.integer(tile, "tile", minimum=1)


def center_rows(S: ArrayLike, /) -> np.ndarray:
    r"""Subtract the mean row: ``P S`` with ``P = I - 11^T / V``.

    The result is float64 whatever the input precision (float32 rows are
    centred after promotion, so a large common offset does not cancel
    significant digits).

    Parameters
    ----------
    S : (V, d) array_like
        Finite real rows (any magnitude).

    Returns
    -------
    (V, d) float64 ndarray with zero column sums (to rounding).

    Raises
    ------
    ValueError
        If a centred entry exceeds the float64 range (rows near ``+-1.8e308``
        of both signs).

    Notes
    -----
    Where a column sum overflows or a column mean would be subnormal, columns
    whose largest entry lies outside ``[2^-960, 2^(1022 - bits(V))]`` are
    centred after an exact power-of-two scaling to unit size and scaled back
    (one rounding), so the column sums never overflow and
    ``center_rows(2^k S) == 2^k center_rows(S)`` bit for bit wherever the
    result is a normal number.

    Examples
    --------
    >>> center_rows([[1.0, 2.0], [3.0, 6.0]])
    array([[-1., -2.],
           [ 1.,  2.]])
    """
    return _center(_v.matrix(S, "S"))


def _traps_overflow(xp) -> bool:
    """True when ``np.errstate(over="raise")`` reaches the namespace's arithmetic
    (NumPy itself, and array-api-strict, which computes with NumPy)."""
    return array_api_compat.is_numpy_namespace(xp) or array_api_compat.is_array_api_strict_namespace(xp)


def _center(X):
    """``P X`` in float64 for a validated finite ``(V, d)`` array of any array-API
    namespace, returned in that namespace (the kernel of :func:`center_rows`,
    also run by :func:`hilbertgeom.gpu.center_rows` on device arrays)."""
    xp = array_api_compat.array_namespace(X)
    X = xp.astype(X, xp.float64, copy=False)
    V = X.shape[0]
    # Fast path (every realistic input): X - mean(X) as is, when nothing overflows
    # and every column mean is 0 or a normal number; the answer is then exact
    # under power-of-two scaling (sums of normal numbers are equivariant; a
    # subnormal partial sum is exact).  NumPy-backed namespaces trap the overflow
    # (no extra pass); elsewhere the result is checked for finiteness.
    trapped = _traps_overflow(xp)
    try:
        with np.errstate(over="raise" if trapped else "ignore"):
            s = xp.sum(X, axis=0)
            m = s / V  # == mean(X)
            if bool(xp.all(xp.logical_or(s == 0, xp.abs(m) >= xp.finfo(xp.float64).smallest_normal))):
                out = X - m
                if trapped or bool(xp.all(xp.isfinite(out))):
                    return out
    except FloatingPointError:
        pass
    top = xp.maximum(xp.max(X, axis=0), -xp.min(X, axis=0))  # largest |entry| per column, no copy of X
    e = _fp.exponent(top, xp)  # top in [2^(e-1), 2^e)
    # Safe columns: V entries below 2^(1022 - bits(V)) sum without overflow, and
    # above 2^-960 the mean is a normal number.  Other columns are brought to
    # [1/2, 1) first (a power of two per column: exact) and scaled back, rounding once.
    safe = xp.logical_or(top == 0, xp.logical_and(e >= -960.0, e <= float(1022 - V.bit_length())))
    k = xp.where(safe, xp.zeros_like(e), -e)
    with np.errstate(over="ignore"):
        Y = _fp.scale_pow2(X, k, xp)
        Y = Y - xp.mean(Y, axis=0)
        out = _fp.scale_pow2(Y, -k, xp)
    bad = xp.logical_not(xp.all(xp.isfinite(out), axis=0))
    if bool(xp.any(bad)):
        col = int(xp.argmax(xp.astype(bad, xp.int8)))
        raise ValueError(f"the centred rows P S exceed the float64 range (column {col} of S); rescale S")
    return out


def _search(X: np.ndarray, nrm: float, mode: str, tile) -> Pair:
    """The core's extreme-pair search: a validated NumPy float32/float64 matrix, ``V >= 2``,
    a norm from :func:`hilbertgeom._validate.norm_choice`."""
    if nrm == 2.0:
        xp = array_api_compat.array_namespace(X)
        B = _tile(tile, _DEFAULT_TILE)
        if mode == "max":  # the distinct rows only: duplicates multiply the ties
            return on_distinct_rows(X, xp, lambda Y: extreme_pair_l2(Y, mode=mode, xp=xp, tile=B))
        return extreme_pair_l2(X, mode=mode, xp=xp, tile=B)
    X = X.astype(np.float64, copy=False)  # the O(V^2 d) searches work in float64
    if nrm == math.inf and mode == "max":
        return linf_diameter(X, np)
    d = X.shape[1]
    B = _tile(tile, 1) if tile is not None else max(8, int(math.sqrt(_BRUTE_ELEMENTS / d)))
    return brute_pair(X, np, "chebyshev" if nrm == math.inf else "cityblock", mode, B, d)


Search = Callable[[Any, float, str, Any], Pair]
"""An extreme-pair search ``search(X, norm, mode, tile)`` on an already scaled matrix:
the core's :func:`_search` (NumPy), or the device's with its tile budget (:mod:`hilbertgeom.gpu`)."""


def _extreme_scaled(X, norm, mode: str, tile, *, up: bool = False,
                    search: Search | None = None) -> tuple[Pair, int]:
    """``(pair, t)``: the extreme pair of ``X`` with its distance given as
    ``pair.distance * 2^t`` (``t = 0`` unless ``X`` is near the top of the range).

    ``X`` is a validated float32/float64 matrix of any array-API namespace with
    ``V >= 2``; the scaling is written against the array API and ``search``
    (default: the core's) finds the pair of the scaled rows.
    Near the top (largest entry ``>= 2^1018 / max(V, 2d)``) the kernels' column
    sums or the distances themselves could overflow; there the rows are scaled
    by ``2^-t`` first (exact, except that entries below ``2^(t-1022)`` lose low
    bits -- in an input that also holds entries near ``1e308``).  With ``up``,
    rows whose largest entry is below ``2^-400`` are scaled up to unit size
    (exact), so that the distance keeps all its digits for a product that
    follows (a subnormal distance has fewer).
    """
    xp = array_api_compat.array_namespace(X)
    nrm = _v.norm_choice(norm)
    t = 0
    if X.dtype == xp.float64:
        V, d = X.shape
        n = max(V, 2 * d)
        amax = _fp.max_abs(X, xp)
        if amax >= 2.0**1018 / n:
            t = n.bit_length() + 2
        elif up and 0.0 < amax < 2.0**-_fp.SAFE:
            t = math.frexp(amax)[1]
        X = _fp.mul_pow2(X, -t)
    return (search or _search)(X, nrm, mode, tile), t


def _unscaled(p: Pair, t: int, what: str) -> Pair:
    """``p`` with its distance times ``2^t``; a ValueError if that is beyond float64."""
    if t == 0:
        return p
    try:
        return Pair(math.ldexp(p.distance, t), p.i, p.j)
    except OverflowError:
        raise ValueError(f"the {what} of S exceeds the float64 range "
                         f"(> {np.finfo(np.float64).max:.4g}); rescale S") from None


def _extreme_pair(X, norm, mode: str, tile, *, search: Search | None = None) -> Pair:
    """The extreme pair of a validated matrix (``V >= 2``, any namespace), its distance
    scaled back: the one code path of :func:`row_diameter`, :func:`closest_pair` and
    their :mod:`hilbertgeom.gpu` counterparts."""
    what = "row diameter" if mode == "max" else "closest-pair distance"
    return _unscaled(*_extreme_scaled(X, norm, mode, tile, search=search), what)


@overload
def row_diameter(S: ArrayLike, /, *, norm: NormLike = ..., return_pair: Literal[False] = ...,
                 tile: int | None = ...) -> float: ...
@overload
def row_diameter(S: ArrayLike, /, *, norm: NormLike = ..., return_pair: Literal[True],
                 tile: int | None = ...) -> Pair: ...
@overload
def row_diameter(S: ArrayLike, /, *, norm: NormLike = ..., return_pair: bool = ...,
                 tile: int | None = ...) -> float | Pair: ...


def row_diameter(S: ArrayLike, /, *, norm: NormLike = 2, return_pair: bool = False,
                 tile: int | None = None) -> float | Pair:
    r"""Exact diameter of the rows of ``S``: ``D(S) = max_{i<j} ||s_i - s_j||``.

    ``norm`` is the row norm, dual to the hidden-state norm: 2 for the
    Euclidean hidden ball, 1 for an ``l_inf`` ball, ``inf`` for an ``l_1`` ball.

    Parameters
    ----------
    S : (V, d) array_like
        Finite real rows; any CPU array-API array (NumPy, torch CPU, ...).
        float32 input is screened in float32 and re-checked in float64.
    norm : {2, 1, inf}
        Row norm.
    return_pair : bool
        Also return the attaining pair.
    tile : int, optional
        Rows per tile; the working block is ``tile x tile`` (default 2048) for
        ``norm=2`` and ``tile x tile x d`` for the ``O(V^2 d)`` searches
        (default: about 4 million entries).

    Returns
    -------
    float, or Pair(distance, i, j) if ``return_pair``
        The float64 distance of the farthest pair; ties go to the smallest
        ``(i, j)``.  A single row has diameter 0 (and no pair: asking for it
        raises ``ValueError``).

    Notes
    -----
    Rows near the top of the float64 range (largest entry at least
    ``2^1018 / max(V, 2d)``) are scaled by a power of two before the search and
    the distance scaled back; a distance beyond float64 raises ``ValueError``.
    The value is homogeneous, ``D(2^k S) = 2^k D(S)``, at every magnitude.

    ``norm=2`` costs at most half of one ``V x V x (d+2)`` GEMM (rows are
    visited in order of their centred norm, and tiles whose norms cannot
    reach the extreme are skipped: most of them on a head gradient) plus the
    re-check of the candidate pairs (a handful unless many pairs tie to within the
    screening error, as in highly symmetric clouds); memory beyond a few
    copies of ``S`` is one tile.  ``norm=inf`` is ``O(V d)`` (largest column
    range); ``norm=1`` is an exact tiled ``O(V^2 d)`` search.

    References
    ----------
    Identity I6 (row-diameter head norm).

    Examples
    --------
    >>> row_diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    5.0
    >>> row_diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]], return_pair=True)
    Pair(distance=5.0, i=0, j=1)
    >>> row_diameter([[0.0, 0.0], [3.0, 4.0]], norm=1)
    7.0
    """
    X = _v.matrix(S, "S", keep_float32=True)
    if X.shape[0] == 1:
        _v.norm_choice(norm)
        if return_pair:
            raise ValueError("S has a single row: its diameter is 0 but there is no pair to return")
        return 0.0
    p = _extreme_pair(X, norm, "max", tile)
    return p if return_pair else p.distance


def closest_pair(S: ArrayLike, /, *, norm: NormLike = 2, tile: int | None = None) -> Pair:
    r"""Exact closest pair of rows: ``min_{i<j} ||s_i - s_j||`` and its pair.

    Parameters
    ----------
    S : (V, d) array_like
        At least two finite real rows.
    norm : {2, 1, inf}
        Row norm.
    tile : int, optional
        Rows per tile (defaults as in :func:`row_diameter`).

    Returns
    -------
    Pair(distance, i, j)
        Exact duplicates give distance 0 and the smallest duplicated pair.

    Examples
    --------
    >>> closest_pair([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    Pair(distance=1.4142135623730951, i=0, j=2)
    """
    X = _v.matrix(S, "S", keep_float32=True, min_rows=2)
    return _extreme_pair(X, norm, "min", tile)
