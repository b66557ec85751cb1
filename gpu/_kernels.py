"""The device kernels, written once against the array API.

Each function takes already validated arrays of one namespace ``xp`` (CuPy on
a GPU; NumPy or array-api-strict in the CPU tests) and never moves them to
another device: only Python scalars and indices leave.  The formulas and the
error analysis are the core's (:mod:`hilbertgeom.rows`,
:mod:`hilbertgeom.metric`, :mod:`hilbertgeom.tension`); the exact Euclidean
pair search is the core's own array-API kernel
(:func:`hilbertgeom._pairs.extreme_pair_l2`).  Centring, the head norm, the
worst-case hidden state, the zero-sum rule, projected RowNorm, the tension
bounds and the update report are not here: :mod:`hilbertgeom.gpu` calls the
core's array-API kernels (``rows._center``, ``rows._extreme_pair``,
``head._head_norm``, ``head._worst_case_hidden``, ``_validate.zero_sum_mean``,
``tension.bounds._projected_rownorm``, ``tension.bounds._tension_bounds``,
``updates._update_report``) with :func:`extreme` as their pair search and
:func:`_row_chunk` as their row chunk, which add only the tile budget.
"""

from __future__ import annotations

import math

from hilbertgeom import _validate as _v
from hilbertgeom._pairs import Pair, brute_pair, extreme_pair_l2, linf_diameter, on_distinct_rows
from hilbertgeom.metric import _hilbert, _softmax_variation, _variation

from . import _backend as _b

__all__: list[str] = []  # private module

# TF32 keeps 10 mantissa bits of each operand; truncated or rounded, the relative error is < 2^-10
TF32_OPERAND_U = 2.0**-10
_BRUTE_CHUNK = 64  # columns per step of the O(V^2 d) l1 / l_inf searches


def scalar_or_array(a, xp):
    """0-d results come back as Python floats, others as float64 device arrays."""
    return float(a) if a.ndim == 0 else xp.astype(a, xp.float64)


def _broadcast(a, b, xp, names: str):
    try:
        return xp.broadcast_arrays(a, b)
    except (ValueError, TypeError):
        x, y = names.split(",")
        raise ValueError(f"{x} and {y} must broadcast; got shapes {tuple(a.shape)} and {tuple(b.shape)}") from None


# --------------------------------------------------------------------------- metric (I1, I2)
def hilbert_distance(p, q, xp, axis):
    a = xp.astype(p, xp.float64)
    b = xp.astype(q, xp.float64)
    for arr, name in ((a, "p"), (b, "q")):
        if math.prod(arr.shape) and bool(xp.any(arr < 0)):
            raise ValueError(f"{name} must be nonnegative; smallest entry is {float(xp.min(arr)):.6g}")
    a, b = _broadcast(a, b, xp, "p,q")
    if a.ndim == 0:
        raise ValueError("p and q must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("p and q must have at least one coordinate along axis")
    for arr, name in ((a, "p"), (b, "q")):
        if not bool(xp.all(xp.any(arr > 0, axis=ax))):
            raise ValueError(f"{name} has an all-zero slice along axis {axis}: not a point of the cone")
    return scalar_or_array(_hilbert(a, b, ax, xp), xp)


def variation_norm(x, xp, axis):
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, x.ndim)
    if x.shape[ax] == 0:
        raise ValueError("x must have at least one coordinate along axis")
    return scalar_or_array(_variation(x, ax, xp), xp)  # the core's kernel


def softmax_hilbert_distance(z, z2, xp, axis):
    a, b = _broadcast(xp.astype(z, xp.float64), xp.astype(z2, xp.float64), xp, "z,z2")
    if a.ndim == 0:
        raise ValueError("z and z2 must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("z and z2 must have at least one coordinate along axis")
    return scalar_or_array(_softmax_variation(a, b, ax, xp), xp)  # the core's kernel (halves on overflow)


# --------------------------------------------------------------------------- rows (I6)
def _l2_entry_bytes(X, xp) -> int:
    return 10 if X.dtype == xp.float32 else 18


def extreme(X, xp, nrm: float, mode: str, tile) -> Pair:
    """Extreme pair of a validated device matrix with ``V >= 2`` (core semantics), in
    tiles from the budget (halved on out-of-memory).  The public functions reach it
    through the core's scaling wrapper (:func:`hilbertgeom.rows._extreme_pair`),
    which keeps the sums and distances of rows near ``1e308`` finite."""
    V, d = X.shape
    user = tile is not None
    if nrm == 2.0:
        op_u = TF32_OPERAND_U if (X.dtype == xp.float32 and _b.tf32_enabled(X)) else 0.0
        B = int(tile) if user else _b.tile_rows(_l2_entry_bytes(X, xp), V)

        def search(Y):
            return _b.with_tile_fallback(
                lambda t: extreme_pair_l2(Y, mode=mode, xp=xp, tile=t, operand_u=op_u),
                min(B, Y.shape[0]), what="row_diameter" if mode == "max" else "closest_pair", user_tile=user)

        # the core's rule: the farthest pair among the distinct rows (duplicates multiply the ties)
        return on_distinct_rows(X, xp, search) if mode == "max" else search(X)
    if nrm == math.inf and mode == "max":
        return linf_diameter(X, xp)
    metric = "chebyshev" if nrm == math.inf else "cityblock"
    B = int(tile) if user else max(1, min(V, math.isqrt(_b.tile_budget_bytes() // (8 * 3 * min(d, _BRUTE_CHUNK)))))
    return _b.with_tile_fallback(lambda t: brute_pair(X, xp, metric, mode, t, _BRUTE_CHUNK), B,
                                 what="row_diameter" if mode == "max" else "closest_pair", user_tile=user)


# --------------------------------------------------------------------------- tension (I11, I15-I17)
# The formulas (zero-sum rule, row norms, the zero-row rule, projected RowNorm,
# the bounds) are the core's array-API kernels; here only the row chunk that fits
# the tile budget.
def _row_chunk(V: int, d: int) -> int:
    """Rows per chunk so that a few float64 ``chunk x d`` temporaries fit the tile budget."""
    return max(1, min(V, _b.tile_budget_bytes() // (8 * d * 6)))
