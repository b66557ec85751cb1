"""The device kernels, written once against the array API.

Each function takes already validated arrays of one namespace ``xp`` (CuPy on
a GPU; NumPy or array-api-strict in the CPU tests) and never moves them to
another device: only Python scalars and indices leave.  The formulas and the
error analysis are the core's (:mod:`hilbertgeom.rows`,
:mod:`hilbertgeom.metric`, :mod:`hilbertgeom.tension`); the exact Euclidean
pair search is the core's own array-API kernel
(:func:`hilbertgeom._pairs.extreme_pair_l2`).  Centring, the head norm and the
worst-case hidden state are not here: :mod:`hilbertgeom.gpu` calls the core's
array-API kernels (``rows._center``, ``rows._extreme_pair``,
``head._head_norm``, ``head._worst_case_hidden``) with :func:`extreme` as
their pair search, which adds only the tile budget.
"""

from __future__ import annotations

import math

from hilbertgeom import _validate as _v
from hilbertgeom._fp import scale_to_unit
from hilbertgeom._pairs import (
    Pair,
    brute_pair,
    distance_sum_upper,
    extreme_pair_l2,
    linf_diameter,
    on_distinct_rows,
)
from hilbertgeom._validate import ZERO_SUM_RTOL
from hilbertgeom.ball import jung_radius
from hilbertgeom.metric import _hilbert

from . import _backend as _b

__all__: list[str] = []  # private module

_U64 = 2.0**-53
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
    # max and min are entries of x: promoting them afterwards equals the core's float64 subtraction
    top = xp.astype(xp.max(x, axis=ax), xp.float64)
    bot = xp.astype(xp.min(x, axis=ax), xp.float64)
    return scalar_or_array(top - bot, xp)


def softmax_hilbert_distance(z, z2, xp, axis):
    a, b = _broadcast(xp.astype(z, xp.float64), xp.astype(z2, xp.float64), xp, "z,z2")
    return variation_norm(a - b, xp, axis)


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
def zero_sum(G, xp, center: bool):
    """``P G`` in float64 after the core's zero-sum rule
    (:func:`hilbertgeom._validate.zero_sum_matrix`), on the device."""
    V, d = G.shape
    return xp.astype(G, xp.float64) - xp.reshape(column_mean(G, xp, center, _row_chunk(V, d)), (1, d)), center


def rownorms(X, xp):
    """Row norms, each row scaled by its largest entry first (no under/overflow)."""
    m = xp.max(xp.abs(X), axis=1)
    ms = xp.where(m > 0, m, xp.ones_like(m))
    Y = X / xp.reshape(ms, (-1, 1))
    return m * xp.sqrt(xp.sum(Y * Y, axis=1))


def rownormalize(X, xp, n, eps: float):
    nz = n > eps
    div = xp.where(nz, n, xp.ones_like(n))
    N = X / xp.reshape(div, (-1, 1))
    return xp.where(xp.reshape(nz, (-1, 1)), N, xp.zeros_like(N))


def _row_chunk(V: int, d: int) -> int:
    """Rows per chunk so that a few float64 ``chunk x d`` temporaries fit the tile budget."""
    return max(1, min(V, _b.tile_budget_bytes() // (8 * d * 6)))


def column_mean(G, xp, center: bool, rows: int):
    """Column means of ``G`` in float64, read in row chunks; the zero-sum rule of
    :func:`zero_sum` unless ``center`` (no ``V x d`` float64 copy is made)."""
    V, d = G.shape
    col = xp.zeros((d,), dtype=xp.float64)
    scale = xp.zeros((d,), dtype=xp.float64)
    for a in range(0, V, rows):
        C = xp.astype(G[a : min(a + rows, V), :], xp.float64)
        col = col + xp.sum(C, axis=0)
        if not center:
            scale = scale + xp.sum(xp.abs(C), axis=0)
    if not center:
        excess = xp.abs(col) - ZERO_SUM_RTOL * scale - V * 2.0**-1074
        if float(xp.max(excess)) > 0:
            k = int(xp.argmax(xp.abs(col)))
            raise _v.not_zero_sum(float(col[k]), k)
    return col / V


def projected_rownorm(G, xp, center: bool, eta: float, eps: float, return_decrease: bool):
    """``-(eta/2) P RN(P G)`` in row chunks: memory is ``G``, the float64 result and
    a few ``chunk x d`` temporaries within the tile budget.

    Three passes read ``G`` in its own precision: column means (and the
    zero-sum check), row norms with the column sums of ``RN``, and the output.
    """
    V, d = G.shape
    rows = _row_chunk(V, d)
    m = xp.reshape(column_mean(G, xp, center, rows), (1, d))
    # the core's zero-row rule (hilbertgeom.tension.centring_noise): rows at most the
    # centring's rounding noise, and (without center) rows exactly zero in G, are zero
    absum = xp.zeros((d,), dtype=xp.float64)
    for a in range(0, V, rows):
        absum = absum + xp.sum(xp.abs(xp.astype(G[a : min(a + rows, V), :], xp.float64)), axis=0)
    noise = 4.0 * _U64 * float(xp.sqrt(xp.sum(absum * absum)))
    cut = max(eps, noise)
    norms = []
    sumN = xp.zeros((d,), dtype=xp.float64)

    def chunk(a, b):
        raw = xp.astype(G[a:b, :], xp.float64)
        X = raw - m
        n = rownorms(X, xp)
        if not center:  # an exactly zero row of G has norm 0 here, whatever the centring left
            n = xp.where(xp.any(raw != 0, axis=1), n, xp.zeros_like(n))
        return X, n

    for a in range(0, V, rows):
        X, n = chunk(a, min(a + rows, V))
        norms.append(n)
        sumN = sumN + xp.sum(rownormalize(X, xp, n, cut), axis=0)
    mN = xp.reshape(sumN / V, (1, d))
    S = xp.empty((V, d), dtype=xp.float64)
    for t, a in enumerate(range(0, V, rows)):
        X, _ = chunk(a, min(a + rows, V))
        S[a : min(a + rows, V), :] = -(eta / 2.0) * (rownormalize(X, xp, norms[t], cut) - mN) + 0.0  # folds -0.0
    if return_decrease:
        n = xp.concat(norms) if len(norms) > 1 else norms[0]
        return S, eta / 2.0 * float(xp.sum(xp.where(n > cut, n, xp.zeros_like(n))))
    return S


def balanced_flow_cost(X, xp, tile: int) -> float:
    """``(1/V) sum_{i<j} ||x_i - x_j||`` rounded up, in tiles: the core's shared
    array-API primitive (:func:`hilbertgeom._pairs.distance_sum_upper`, rows
    re-centred per block, a per-pair error bound, no direct recomputation).
    Unlike the core, exact duplicates are not merged first (each adds only
    its block's ``sqrt(E)``)."""
    V = X.shape[0]
    C = X - xp.mean(X, axis=0)
    m = float(xp.max(xp.abs(C)))
    if m == 0.0:
        return 0.0
    C, k = scale_to_unit(C, m)  # exact rescaling: no under/overflow of squares
    return math.ldexp(distance_sum_upper(C, xp, tile=tile), -k) / V * (1.0 + 2.0 * _U64)


def tension_bounds(X, xp, tile: int):
    from hilbertgeom.tension import TensionBounds

    V, d = X.shape
    n = rownorms(X, xp)
    total = float(xp.sum(n))
    if total == 0.0:
        return TensionBounds(0.0, 0.0, "G = 0", "G = 0")
    N = rownormalize(X, xp, n, 0.0)
    Pn = N - xp.mean(N, axis=0)
    Dn = extreme(Pn, xp, 2.0, "max", None).distance
    lower = max(float(xp.sum(X * Pn)) / Dn, 0.0) if Dn > 0 else 0.0
    # the row space: singular values and right vectors of X (through R of a QR when V > d)
    Rm = xp.linalg.qr(X)[1] if V > d else X
    _, sv, Wt = xp.linalg.svd(Rm, full_matrices=False)
    s0 = float(sv[0])
    k = int(xp.sum(xp.astype(sv > s0 * max(V, d) * _U64, xp.int64)))
    W = xp.matrix_transpose(Wt[:k, :])
    C = X @ W
    E = X - C @ xp.matrix_transpose(W)
    kfull = min(V - 1, d)
    jung = jung_radius(k) * float(xp.sum(rownorms(C, xp))) + jung_radius(kfull) * float(xp.sum(rownorms(E, xp)))
    jung *= 1.0 + 8.0 * (V + d) * _U64
    bal = balanced_flow_cost(X, xp, tile)
    if jung <= bal:
        return TensionBounds(lower, jung, "RowNorm potential (I17)", f"Jung J_{k} sum ||g_i|| (I17)")
    return TensionBounds(lower, bal, "RowNorm potential (I17)", "balanced flow (I11)")
