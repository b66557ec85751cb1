"""The device kernels, written once against the array API.

Each function takes already validated arrays of one namespace ``xp`` (CuPy on
a GPU; NumPy or array-api-strict in the CPU tests) and never moves them to
another device: only Python scalars and indices leave.  The formulas and the
error analysis are the core's (:mod:`hilbertgeom.rows`,
:mod:`hilbertgeom.metric`, :mod:`hilbertgeom.tension`); the exact Euclidean
pair search is the core's own array-API kernel
(:func:`hilbertgeom._pairs.extreme_pair_l2`).
"""

from __future__ import annotations

import math

import numpy as np

from hilbertgeom._pairs import Pair, _sorted_groups, extreme_pair_l2, pair_distance
from hilbertgeom._validate import ZERO_SUM_RTOL
from hilbertgeom.ball import jung_radius

from . import _backend as _b

__all__: list[str] = []  # private module

_U64 = 2.0**-53
# TF32 keeps 10 mantissa bits of each operand; truncated or rounded, the relative error is < 2^-10
TF32_OPERAND_U = 2.0**-10
_BRUTE_CHUNK = 64  # columns per step of the O(V^2 d) l1 / l_inf searches


def _quiet():
    """Silence NumPy's overflow/underflow warnings of ``p / q`` (harmless elsewhere).

    Only the ratio may overflow (it is then replaced by ``log p - log q``);
    division by zero and invalid operations stay visible: inputs are finite
    and the divisors positive, so neither can occur.
    """
    return np.errstate(over="ignore", under="ignore")


def scalar_or_array(a, xp):
    """0-d results come back as Python floats, others as float64 device arrays."""
    return float(a) if a.ndim == 0 else xp.astype(a, xp.float64)


def _axis(axis, ndim: int, name: str = "axis") -> int:
    import numbers

    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(axis).__name__}")
    ax = int(axis)
    if not -ndim <= ax < ndim:
        raise ValueError(f"{name}={ax} is out of range for an array with {ndim} dimension(s)")
    return ax % ndim


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
    ax = _axis(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("p and q must have at least one coordinate along axis")
    for arr, name in ((a, "p"), (b, "q")):
        if not bool(xp.all(xp.any(arr > 0, axis=ax))):
            raise ValueError(f"{name} has an all-zero slice along axis {axis}: not a point of the cone")
    pa, qa = a > 0, b > 0
    both = xp.logical_and(pa, qa)
    same = xp.all(pa == qa, axis=ax)
    one = xp.ones_like(a)
    ps = xp.where(both, a, one)
    qs = xp.where(both, b, one)
    flip = ps < qs
    hi = xp.where(flip, qs, ps)
    lo = xp.where(flip, ps, qs)
    with _quiet():
        ratio = hi / lo  # >= 1; overflows to inf only for extreme ratios
        ok = xp.isfinite(ratio)
        mag = xp.where(ok, xp.log(xp.where(ok, ratio, one)), xp.log(hi) - xp.log(lo))
        lr = xp.where(flip, -mag, mag)
        inf = xp.full_like(lr, math.inf)
        top = xp.max(xp.where(both, lr, -inf), axis=ax)
        bot = xp.min(xp.where(both, lr, inf), axis=ax)
        d = top - bot
    return scalar_or_array(xp.where(same, d, xp.full_like(d, math.inf)), xp)


def variation_norm(x, xp, axis):
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (the coordinates)")
    ax = _axis(axis, x.ndim)
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
def center_rows(S, xp):
    X = xp.astype(S, xp.float64)
    return X - xp.mean(X, axis=0)


def distinct_rows(X, xp):
    """Ascending indices of the rows to keep when exact duplicates are dropped.

    The first occurrence of every distinct row is kept (so a farthest pair
    among kept rows maps to the smallest original pair); ``None`` when there
    is no duplicate, or when two distinct rows share a key (then nothing is
    dropped: duplicates only cost time, never correctness).  Grouping as in
    :func:`hilbertgeom._pairs.first_duplicate_pair`.
    """
    grouped = _sorted_groups(X, xp)
    if grouped is None:
        return None
    order, same = grouped
    if not bool(xp.any(same)):
        return None
    firsts = xp.concat([order[:1], order[1:][xp.logical_not(same)]])
    return xp.sort(firsts)


def _cummin(a, xp):
    """Inclusive running minimum (Hillis-Steele doubling scan, array API only)."""
    n, s = a.shape[0], 1
    while s < n:
        a = xp.concat([a[:s], xp.minimum(a[s:], a[: n - s])])
        s *= 2
    return a


def linf_diameter(X, xp) -> Pair:
    """``max_{i,j} ||x_i - x_j||_inf`` as the largest column range, ``O(V d)``.

    The ties of :func:`hilbertgeom.rows._linf_diameter` (pairs whose float64
    difference rounds to the maximum), found the same way: per attaining
    column, a vectorised bisection over the bottom rows sorted by value.
    """
    X = xp.astype(X, xp.float64)
    V = X.shape[0]
    hi = xp.max(X, axis=0)
    lo = xp.min(X, axis=0)
    rng = hi - lo
    best = float(xp.max(rng))
    if best == 0.0:
        return Pair(0.0, 0, 1)
    cols = xp.nonzero(rng == best)[0]
    win = None
    for t in range(cols.shape[0]):
        k = int(cols[t])
        a = X[:, k]
        A = xp.nonzero(a - lo[k] == best)[0]
        Bi = xp.nonzero(hi[k] - a == best)[0]
        if win is not None and min(int(xp.min(A)), int(xp.min(Bi))) > win[0]:
            continue  # every pair of this column starts after the best one found
        aB = xp.take(a, Bi)
        order = xp.argsort(aB, stable=True)
        vb = xp.take(aB, order)
        prefmin = _cummin(xp.take(Bi, order), xp)
        aA = xp.take(a, A)
        left = xp.zeros(A.shape, dtype=xp.int64)
        right = xp.full(A.shape, vb.shape[0] - 1, dtype=xp.int64)
        while bool(xp.any(left < right)):
            mid = (left + right + 1) // 2
            ok = (aA - xp.take(vb, mid)) == best
            left = xp.where(ok, mid, left)
            right = xp.where(ok, right, mid - 1)
        partner = xp.astype(xp.take(prefmin, left), xp.int64)
        A64 = xp.astype(A, xp.int64)
        first = xp.minimum(A64, partner)
        second = xp.maximum(A64, partner)
        key = int(xp.min(first * V + second))
        pair = divmod(key, V)
        if win is None or pair < win:
            win = pair
    return Pair(best, int(win[0]), int(win[1]))


def brute_pair(X, xp, metric: str, mode: str, tile: int) -> Pair:
    """Tiled all-pairs ``l_1`` / ``l_inf`` search in float64 (``O(V^2 d)``)."""
    X = xp.astype(X, xp.float64)
    V, d = X.shape
    is_max = mode == "max"
    B = min(max(1, int(tile)), V)
    ar = xp.arange(B)
    lower = xp.reshape(ar, (B, 1)) >= xp.reshape(ar, (1, B))
    best, best_key = (-math.inf if is_max else math.inf), None
    for bi in range(0, V, B):
        Xi = X[bi : min(bi + B, V), :]
        h = Xi.shape[0]
        for bj in range(bi, V, B):
            Xj = X[bj : min(bj + B, V), :]
            acc = xp.zeros((h, Xj.shape[0]), dtype=xp.float64)
            for c in range(0, d, _BRUTE_CHUNK):
                c1 = min(c + _BRUTE_CHUNK, d)
                diff = xp.abs(xp.reshape(Xi[:, c:c1], (h, 1, -1)) - xp.reshape(Xj[:, c:c1], (1, Xj.shape[0], -1)))
                if metric == "cityblock":
                    acc = acc + xp.sum(diff, axis=2)
                else:
                    acc = xp.maximum(acc, xp.max(diff, axis=2))
            if bi == bj:
                if h == 1:
                    continue
                acc = xp.where(lower[:h, :h], xp.full_like(acc, -math.inf if is_max else math.inf), acc)
            v = float(xp.max(acc) if is_max else xp.min(acc))
            if (v > best if is_max else v < best) or v == best:
                flat = int(xp.argmax(xp.astype(xp.reshape(acc == v, (-1,)), xp.int8)))
                a, b = divmod(flat, acc.shape[1])
                key = (bi + a) * V + (bj + b)
                if v != best or best_key is None or key < best_key:
                    best, best_key = v, key
    i, j = divmod(best_key, V)
    return Pair(best, int(i), int(j))


def _l2_entry_bytes(X, xp) -> int:
    return 10 if X.dtype == xp.float32 else 18


def extreme(X, xp, nrm: float, mode: str, tile) -> Pair:
    """Extreme pair of a validated device matrix with ``V >= 2`` (core semantics)."""
    V, d = X.shape
    user = tile is not None
    if nrm == 2.0:
        op_u = TF32_OPERAND_U if (X.dtype == xp.float32 and _b.tf32_enabled(X)) else 0.0
        B = int(tile) if user else _b.tile_rows(_l2_entry_bytes(X, xp), V)
        if mode == "max":
            keep = distinct_rows(X, xp)
            if keep is not None:
                if keep.shape[0] == 1:
                    return Pair(0.0, 0, 1)
                Xk = xp.take(X, keep, axis=0)
                p = _b.with_tile_fallback(
                    lambda t: extreme_pair_l2(Xk, mode=mode, xp=xp, tile=t, operand_u=op_u),
                    min(B, Xk.shape[0]), what="row_diameter", user_tile=user)
                return Pair(p.distance, int(keep[p.i]), int(keep[p.j]))
        return _b.with_tile_fallback(
            lambda t: extreme_pair_l2(X, mode=mode, xp=xp, tile=t, operand_u=op_u),
            B, what="row_diameter" if mode == "max" else "closest_pair", user_tile=user)
    if nrm == math.inf and mode == "max":
        return linf_diameter(X, xp)
    metric = "chebyshev" if nrm == math.inf else "cityblock"
    B = int(tile) if user else max(1, min(V, math.isqrt(_b.tile_budget_bytes() // (8 * 3 * min(d, _BRUTE_CHUNK)))))
    return _b.with_tile_fallback(lambda t: brute_pair(X, xp, metric, mode, t), B,
                                 what="row_diameter" if mode == "max" else "closest_pair", user_tile=user)


# --------------------------------------------------------------------------- head (I6)
_DUAL = {2.0: 2.0, math.inf: 1.0, 1.0: math.inf}


def worst_case_hidden(X, xp, hn: float, R: float):
    V, d = X.shape
    X = xp.astype(X, xp.float64)
    h = xp.zeros((d,), dtype=xp.float64)
    if V < 2:
        h[0] = R
        return h
    dist, i, j = extreme(X, xp, _DUAL[hn], "max", None)
    if dist == 0.0:
        h[0] = R
        return h
    diff = X[i, :] - X[j, :]
    diff = diff / xp.max(xp.abs(diff))  # scaled first: the norm of 1e-200 entries underflows
    if hn == 2.0:
        return R * diff / xp.sqrt(xp.sum(diff * diff))
    if hn == math.inf:
        return R * xp.where(diff >= 0, xp.ones_like(diff), -xp.ones_like(diff))
    k = int(xp.argmax(xp.abs(diff)))
    h[k] = R * math.copysign(1.0, float(diff[k]))
    return h


# --------------------------------------------------------------------------- tension (I11, I15-I17)
def zero_sum(G, xp, center: bool):
    """The core's zero-sum rule (:func:`hilbertgeom._validate.zero_sum_matrix`) on the device."""
    X = xp.astype(G, xp.float64)
    V = X.shape[0]
    col = xp.sum(X, axis=0)
    if center:
        return X - xp.mean(X, axis=0), True
    scale = xp.sum(xp.abs(X), axis=0)
    excess = xp.abs(col) - ZERO_SUM_RTOL * scale - V * 2.0**-1074
    if float(xp.max(excess)) > 0:
        k = int(xp.argmax(xp.abs(col)))
        raise ValueError(
            f"G must have zero column sums (max |1^T G| = {abs(float(col[k])):.2e} in column {k}); "
            "pass center=True to project it with P = I - 11^T/V (advisable for cross-entropy "
            "gradients of very confident predictions, whose p_c - 1 loses digits)"
        )
    return X - xp.mean(X, axis=0), False


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
            raise ValueError(
                f"G must have zero column sums (max |1^T G| = {abs(float(col[k])):.2e} in column {k}); "
                "pass center=True to project it with P = I - 11^T/V (advisable for cross-entropy "
                "gradients of very confident predictions, whose p_c - 1 loses digits)"
            )
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
    norms = []
    sumN = xp.zeros((d,), dtype=xp.float64)
    for a in range(0, V, rows):
        X = xp.astype(G[a : min(a + rows, V), :], xp.float64) - m
        n = rownorms(X, xp)
        norms.append(n)
        sumN = sumN + xp.sum(rownormalize(X, xp, n, eps), axis=0)
    mN = xp.reshape(sumN / V, (1, d))
    S = xp.empty((V, d), dtype=xp.float64)
    for t, a in enumerate(range(0, V, rows)):
        b = min(a + rows, V)
        X = xp.astype(G[a:b, :], xp.float64) - m
        S[a:b, :] = -(eta / 2.0) * (rownormalize(X, xp, norms[t], eps) - mN) + 0.0  # + 0.0 folds -0.0
    if return_decrease:
        n = xp.concat(norms) if len(norms) > 1 else norms[0]
        return S, eta / 2.0 * float(xp.sum(xp.where(n > eps, n, xp.zeros_like(n))))
    return S


def balanced_flow_cost(X, xp, tile: int) -> float:
    """``(1/V) sum_{i<j} ||x_i - x_j||`` rounded up, in tiles (as the core)."""
    V, d = X.shape
    C = X - xp.mean(X, axis=0)
    m = float(xp.max(xp.abs(C)))
    if m == 0.0:
        return 0.0
    C = C * math.ldexp(1.0, -math.frexp(m)[1])  # exact rescaling: no under/overflow of squares
    n = xp.sum(C * C, axis=1)
    N = float(xp.max(n))
    eps = 2.0 * (4 * (d + 2) * _U64) * N + float(np.finfo(np.float64).tiny)
    total = 0.0
    for a in range(0, V, tile):
        A = C[a : min(a + tile, V), :]
        na = xp.reshape(n[a : min(a + tile, V)], (-1, 1))
        for b in range(a, V, tile):
            Bm = C[b : min(b + tile, V), :]
            D2 = na + xp.reshape(n[b : min(b + tile, V)], (1, -1)) - 2.0 * (A @ xp.matrix_transpose(Bm))
            Dt = xp.sqrt(xp.where(D2 > 0, D2, xp.zeros_like(D2)) + eps)
            near = D2 < 1e6 * eps
            if a == b:
                h = D2.shape[0]
                ar = xp.arange(h)
                upper = xp.reshape(ar, (-1, 1)) < xp.reshape(ar, (1, -1))
                Dt = xp.where(upper, Dt, xp.zeros_like(Dt))
                near = xp.logical_and(near, upper)
            total += float(xp.sum(Dt))
            ii, jj = xp.nonzero(near)
            if ii.shape[0]:
                exact = pair_distance(xp.take(A, ii, axis=0) - xp.take(Bm, jj, axis=0), xp)
                exact = exact * (1.0 + 4 * (d + 2) * _U64)
                total += float(xp.sum(exact)) - float(xp.sum(Dt[ii, jj]))
    return total * (1.0 + 2.0 * math.log2(max(V, 2)) * _U64) / math.ldexp(1.0, -math.frexp(m)[1]) / V


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
