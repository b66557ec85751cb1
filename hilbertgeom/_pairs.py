"""Exact extremal pairs of a point cloud, in tiles (array-API kernels).

The Euclidean kernel screens all pairs with one augmented GEMM per tile in the
input's precision, keeps every pair whose screened squared distance lies
within a proven error bound of the extreme, and re-checks those candidates
with direct float64 differences of the original rows (:func:`pair_distance`).
The answer is the float64 distance of the extremal pair (ties: smallest ``(i, j)``), and memory
beyond a few ``V x d`` copies is one ``tile x tile`` block.

Error bound (screening units).  Rows are scaled by exact powers of two and
centred in float64: ``x_i`` with ``N = max_i ||x_i||^2``.  The screened value
``f_ij = fl([x_i, n_i, 1] . [-2 x_j, 1, n_j])`` in a dtype of unit roundoff ``u``
with ``m = d + 2`` terms satisfies ``|f_ij - ||x_i - x_j||^2| <= eps`` with

    eps = 2 (4 gamma_m + 10.2 u + 8.2 u64) N,   gamma_m = m u / (1 - m u):

``4 gamma_m N`` bounds the dot-product error (``sum |terms| <= 4N`` for any
summation order, Higham, *Accuracy and Stability*, Thm 3.1 / Lemma 3.4);
``2uN`` the rounding of the two norms; ``8.2uN`` the rounding of the rows to
the screening dtype (``||x^ - x|| <= u ||x||``); ``8.2 u64 N`` the float64
centring; the factor 2 is a safety margin.  A pair outside the window
``f >= f_best - 2 eps - eps64`` cannot be (or tie with) the extremal pair,
where ``eps64`` covers the rounding of the float64 re-check itself.

Rows are visited in order of their centred norm ``r_i``, and a whole tile pair
is skipped when ``|r_i - r_j| <= ||x_i - x_j|| <= r_i + r_j`` (with a rounding
margin, :class:`_NormBound`) shows that none of its pairs can reach the best
re-checked distance: on a head gradient, whose diameter joins a few large rows
and whose closest pair joins tail rows of nearly equal norm, most tiles.  The
kernels here take and return arrays of one namespace ``xp`` and never move
them between devices; only scalars and indices leave.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._fp import scale_to_unit

__all__: list[str] = []  # private module


class Pair(NamedTuple):
    """A distance and the pair ``i < j`` that attains it."""

    distance: float
    i: int
    j: int


def _finfo(xp, dtype):
    fi = xp.finfo(dtype)
    return float(fi.eps) / 2.0, float(fi.smallest_normal)


def row_keys(X, xp):
    """A float64 key per row: ``sum_k w_k x_k`` accumulated column by column.

    The weights are fixed pseudo-random numbers times ``2^-(bit_length(d))``
    (no overflow for finite input).  The sum runs as one elementwise
    multiply-add per column, in column order, so every row goes through the
    same IEEE operations: equal rows get bit-identical keys on any device.
    Distinct rows may collide (equal keys); callers check for that.
    """
    V, d = X.shape
    scale = math.ldexp(1.0, -d.bit_length())
    key = xp.zeros((V,), dtype=xp.float64)
    for k in range(d):
        w = math.sin(k * 12.9898 + 78.233) * 43758.5453
        w = (w - math.floor(w) - 0.5) * scale
        key = key + xp.astype(X[:, k], xp.float64, copy=False) * w
    return key


def _sorted_runs(X, xp):
    """``(order, same)``: an ordering of the rows in which exactly equal rows are
    contiguous and in increasing index order, and for each position ``p >= 1``
    whether row ``order[p]`` equals row ``order[p-1]``.

    The rows are sorted (stably) by :func:`row_keys`, which equal rows share
    (``O(V d + V log V)``), and neighbours with equal keys are compared
    exactly.  If two distinct rows share a key next to each other (a
    collision: the runs are then not trusted), a stable lexicographic sort of
    the rows (least significant column first, ``O(d V log V)``) decides
    instead.
    """
    V, d = X.shape
    key = row_keys(X, xp)
    order = xp.argsort(key, stable=True)
    ks = xp.take(key, order)
    cand = xp.nonzero(ks[1:] == ks[:-1])[0]
    same = xp.zeros((V - 1,), dtype=xp.bool)
    if cand.shape[0] == 0:
        return order, same
    rows = max(1, (1 << 22) // max(d, 1))
    parts = []
    for c0 in range(0, cand.shape[0], rows):
        c = cand[c0 : min(c0 + rows, cand.shape[0])]
        eq = xp.all(xp.take(X, xp.take(order, c), axis=0) == xp.take(X, xp.take(order, c + 1), axis=0), axis=1)
        if not bool(xp.all(eq)):  # a key collision between distinct rows
            order = xp.arange(V)
            for k in range(d - 1, -1, -1):
                col = xp.take(X[:, k], order)
                order = xp.take(order, xp.argsort(col, stable=True))
            Xs = xp.take(X, order, axis=0)
            return order, xp.all(Xs[1:, :] == Xs[:-1, :], axis=1)
        parts.append(c)
    # positions p >= 1 (as p - 1 = c) whose row equals its predecessor
    c = xp.concat(parts) if len(parts) > 1 else parts[0]
    hit = xp.astype(xp.searchsorted(c, xp.arange(V - 1, dtype=c.dtype)), xp.int64)
    hit = xp.clip(hit, 0, c.shape[0] - 1)
    same = xp.take(c, hit) == xp.arange(V - 1, dtype=c.dtype)
    return order, same


def equal_row_classes(X, xp):
    """Classes of exactly equal rows: ``(representatives, inverse, counts)``.

    The one duplicate-row kernel of the library (written against the array API,
    so :mod:`hilbertgeom.gpu` runs it on the device).  Rows compare by value
    (``-0.0 == 0.0``); ``X`` is a finite ``(V, d)`` array of namespace ``xp``,
    ``V >= 1``.  Returns int64 arrays of ``xp``:

    * ``representatives``: the first occurrence of each class, ascending;
    * ``inverse``: the class of every row, ``X[i] == X[representatives[inverse[i]]]``;
    * ``counts``: the size of each class.

    ``representatives.shape[0] == V`` exactly when no two rows are equal.
    NumPy: one pass keyed on the bytes of each row (``-0.0`` folded into
    ``0.0``), ``O(V d)``.  Other namespaces (devices): the runs of
    :func:`_sorted_runs`, exact whatever the keys, ``O(V d + V log V)``.
    """
    V = X.shape[0]
    if isinstance(X, np.ndarray):
        Xn = np.ascontiguousarray(X + 0.0)  # -0.0 + 0.0 == +0.0: equal values, equal bytes
        seen: dict[bytes, int] = {}
        inverse = np.fromiter((seen.setdefault(Xn[i].tobytes(), len(seen)) for i in range(V)),
                              dtype=np.int64, count=V)
        _, first = np.unique(inverse, return_index=True)  # classes are numbered in order of first occurrence
        return first.astype(np.int64), inverse, np.bincount(inverse).astype(np.int64)
    if V == 1:
        z = xp.zeros((1,), dtype=xp.int64)
        return z, z, xp.ones((1,), dtype=xp.int64)
    order, same = _sorted_runs(X, xp)
    order = xp.astype(order, xp.int64)
    fresh = xp.concat([xp.ones((1,), dtype=xp.bool), xp.logical_not(same)])  # a run starts here
    starts = xp.astype(xp.nonzero(fresh)[0], xp.int64)
    run = xp.cumulative_sum(xp.astype(fresh, xp.int64)) - 1  # run of each sorted position
    lengths = xp.concat([starts[1:], xp.full((1,), V, dtype=xp.int64)]) - starts
    first = xp.take(order, starts)  # runs keep index order: the first member is the smallest
    by_first = xp.argsort(first, stable=True)
    rank = xp.argsort(by_first, stable=True)  # run -> class
    inverse = xp.take(xp.take(rank, run), xp.argsort(order, stable=True))
    return xp.take(first, by_first), xp.astype(inverse, xp.int64), xp.take(lengths, by_first)


def first_duplicate_pair(X, xp):
    """Smallest ``(i, j)``, ``i < j``, with ``X[i] == X[j]`` exactly, or ``None``
    (from :func:`equal_row_classes`: the first class with two members, in order
    of first occurrence, and its first two members)."""
    reps, inverse, counts = equal_row_classes(X, xp)
    dup = xp.nonzero(counts > 1)[0]
    if dup.shape[0] == 0:
        return None
    c = int(dup[0])
    members = xp.nonzero(inverse == c)[0]
    return int(reps[c]), int(members[1])


def on_distinct_rows(X, xp, search):
    """``search(Y)`` on the distinct rows ``Y`` of ``X`` (first occurrences, in order),
    its pair mapped back to rows of ``X``; ``search(X)`` when all rows differ.

    For the farthest pair: exact duplicates do not change the diameter, but they
    multiply its ties (a rank-one update has ``V^2/4`` farthest pairs), and the
    smallest pair among first occurrences is the smallest pair of ``X``.
    """
    reps, _, _ = equal_row_classes(X, xp)
    if reps.shape[0] == X.shape[0]:
        return search(X)
    if reps.shape[0] == 1:
        return Pair(0.0, 0, 1)
    p = search(xp.take(X, reps, axis=0))
    return Pair(p.distance, int(reps[p.i]), int(reps[p.j]))


def pair_distance(diff, xp):
    """Euclidean norms of the rows of ``diff``, scaled against under/overflow.

    Each row is multiplied by a power of two ``2^-e`` near ``1 / max |diff|``
    (exact), so ``sqrt(sum(y**2)) * 2^e`` equals the direct float64 formula
    ``sqrt(sum(diff**2))`` bit for bit whenever that formula neither
    underflows nor overflows, and stays accurate when it would: the float64
    distance that every kernel reports.  Distinct rows get a positive value.
    """
    m = xp.max(xp.abs(diff), axis=1)
    e = xp.clip(xp.floor(xp.log2(xp.where(m > 0, m, xp.ones_like(m)))), -1022.0, 1022.0)
    f = xp.pow(xp.asarray(2.0, dtype=diff.dtype), -e)
    y = diff * xp.reshape(f, (-1, 1))
    return xp.sqrt(xp.sum(y * y, axis=1)) / f


def extreme_pair_l2(S, *, mode: str, xp, tile: int = 2048, operand_u: float = 0.0, _matmul=None) -> Pair:
    """Farthest (``mode='max'``) or closest (``'min'``) pair in float64 distance.

    "Exact" means: the pair whose float64 distance (:func:`pair_distance`) is
    extreme, ties to the smallest ``(i, j)`` -- what an all-pairs float64
    brute force returns.  (Two pairs whose real distances differ by less than
    the float64 rounding may be ordered differently in real arithmetic.)

    ``S`` is a finite float32 or float64 ``(V, d)`` array of namespace ``xp``
    with ``V >= 2``.  float32 input is screened in float32 (after float64
    centring), anything else in float64.  ``operand_u`` is the unit roundoff
    with which the GEMM itself rounds its operands before multiplying
    (``2^-10`` when float32 products run on TF32 tensor cores, which keep 10
    mantissa bits of each operand, truncated or rounded, but accumulate in
    float32).  Each product
    ``L_k R_k`` then carries a relative error ``2 u_op + u_op^2`` on top of the
    float32 accumulation, and ``sum |L_k R_k| <= 4N``, so the window widens by
    ``4 (2 u_op + u_op^2)(1 + gamma_m) N``; the answer stays exact.  When
    ``m u >= 0.1`` (``d`` beyond about 1.6 million in float32) the screening
    runs in float64 instead.  ``_matmul`` replaces the tile product (tests
    emulate TF32 with it).
    """
    V, d = S.shape
    f64 = xp.float64
    screen = xp.float32 if S.dtype == xp.float32 else f64
    X0 = xp.astype(S, f64)
    amax = float(xp.max(xp.abs(X0)))
    if amax == 0.0:
        return Pair(0.0, 0, 1)
    # Differences of rows near the top of the range overflow; only then (entries
    # >= 2^1019) scale down by 2^-4.  In that extreme case subnormal entries of
    # the same input lose bits; in every other case the input is used as is.
    f0 = 1.0 if amax < 2.0**1019 else 2.0**-4
    if f0 != 1.0:
        X0 = X0 * f0
    if mode == "min":
        dup = first_duplicate_pair(X0, xp)
        if dup is not None:
            return Pair(0.0, dup[0], dup[1])
    Xc = X0 - xp.mean(X0, axis=0)
    cmax = float(xp.max(xp.abs(Xc)))
    if cmax == 0.0:  # fl(x - c) == 0 for every row means every row equals c
        return Pair(0.0, 0, 1)
    Xc, k1 = scale_to_unit(Xc, cmax)  # centred rows times 2^k1, largest entry in [0.5, 1)
    n = xp.sum(Xc * Xc, axis=1)
    N = float(xp.max(n))
    # The rows are visited in order of their centred norm r_i, and whole tiles are skipped by
    # the triangle inequality: | r_i - r_j | <= ||x_i - x_j|| <= r_i + r_j (see _NormBound).
    order = xp.argsort(n, stable=True)
    Xc = xp.take(Xc, order, axis=0)
    n = xp.take(n, order)
    rs = xp.sqrt(n)  # ascending: a tile's bounds are read off its first and last rows (scalars only)
    nb = _NormBound(d)
    u, tiny = _finfo(xp, screen)
    m = d + 2
    if m * u >= 0.1 and screen != f64:  # the float32 bound would be vacuous
        screen, operand_u = f64, 0.0
        u, tiny = _finfo(xp, screen)
    u64, _ = _finfo(xp, f64)
    gamma = m * u / (1.0 - m * u)
    uo = float(operand_u)
    # the screening's error per unit of N: the GEMM (and TF32 operands), the rows' and norms'
    # rounding, the float64 centring (see docs/kernels.md)
    K = 4.0 * gamma + 10.2 * u + 8.2 * u64 + 4.0 * (2.0 * uo + uo * uo) * (1.0 + gamma)
    eps = 2.0 * K * N + 8.0 * m * tiny
    eps64 = 2.0 * (2 * d + 8) * u64 * N

    is_max = mode == "max"
    if not is_max:
        # The closest pair screens each pair against its own window: every term of the bound
        # above is a multiple of N that is, pair by pair, the same multiple of (n_i + n_j)/2
        # (Sum |terms| <= 2 (n_i + n_j)), so f_ij and the re-check are within E_i + E_j of
        # ||x_i - x_j||^2 with E_i below.  Screening n_i - E_i in place of n_i makes every
        # screened value a lower bound of its pair's re-checked value: no window around the
        # best, whose width 2 eps ~ N (the largest row) would take in every pair of a cloud of
        # small rows (a head gradient's tail) beside a few large ones.
        n = n - ((K + (2 * d + 8) * u64) * n + 4.0 * m * tiny)
    Xh = xp.astype(Xc, screen)
    del Xc
    nh = xp.reshape(xp.astype(n, screen), (V, 1))
    ones = xp.ones((V, 1), dtype=screen)
    L = xp.concat([Xh, nh, ones], axis=1)
    R = xp.concat([-2.0 * Xh, ones, nh], axis=1)
    del Xh, nh, ones

    B = min(max(1, int(tile)), V)
    ar = xp.arange(B)
    lower = xp.reshape(ar, (B, 1)) >= xp.reshape(ar, (1, B))  # i >= j inside a diagonal tile
    fill = xp.asarray(-math.inf if is_max else math.inf, dtype=screen)
    best_scr = -math.inf if is_max else math.inf
    best_d2: float | None = None
    best_key: int | None = None
    chunk = max(1, (1 << 22) // max(d, 1))

    def scaled_best() -> float | None:
        return None if best_d2 is None else math.ldexp(best_d2, k1)

    for bi, bj, j1 in _tile_pairs(V, B, is_max, lambda k: float(rs[k]), nb, scaled_best):
        Li = L[bi : min(bi + B, V), :]
        Rj = xp.matrix_transpose(R[bj:j1, :])
        T = Li @ Rj if _matmul is None else _matmul(Li, Rj)
        if bi == bj:
            h = T.shape[0]
            if h == 1:
                continue  # a 1 x 1 diagonal tile holds no pair
            T = xp.where(lower[:h, :h], fill, T)
        if is_max:
            tm = float(xp.max(T))
            best_scr = max(best_scr, tm)
            thr = best_scr - 2.0 * eps - eps64
            if best_d2 is not None:
                thr = max(thr, math.ldexp(best_d2, k1) ** 2 - eps - eps64)
            if tm < thr:
                continue
            ii, jj = xp.nonzero(T >= thr)
        else:  # every T_ij is at most pair (i, j)'s re-checked squared distance (see above)
            tm = float(xp.min(T))
            if best_d2 is not None and tm > _above(math.ldexp(best_d2, k1) ** 2, u, tiny):
                continue
            w = T.shape[1]
            a = int(xp.argmin(xp.reshape(T, (-1,))))  # the tile's most promising pair first
            oi, oj = int(order[bi + a // w]), int(order[bj + a % w])
            ai = xp.asarray([oi])
            aj = xp.asarray([oj])
            v = float(pair_distance(xp.take(X0, ai, axis=0) - xp.take(X0, aj, axis=0), xp)[0])
            key = min(oi, oj) * V + max(oi, oj)
            if best_d2 is None or best_key is None or v < best_d2 or (v == best_d2 and key < best_key):
                best_d2, best_key = v, key
            ii, jj = xp.nonzero(T <= _above(math.ldexp(best_d2, k1) ** 2, u, tiny))
        gi = xp.take(order, ii + bi)  # back to the rows of S
        gj = xp.take(order, jj + bj)
        nc = gi.shape[0]
        for c0 in range(0, nc, chunk):
            ci, cj = gi[c0 : min(c0 + chunk, nc)], gj[c0 : min(c0 + chunk, nc)]
            d2 = pair_distance(xp.take(X0, ci, axis=0) - xp.take(X0, cj, axis=0), xp)
            v = float(xp.max(d2)) if is_max else float(xp.min(d2))
            if best_d2 is not None and (v < best_d2 if is_max else v > best_d2):
                continue
            ci, cj = xp.astype(ci, xp.int64), xp.astype(cj, xp.int64)
            keys = xp.minimum(ci, cj) * V + xp.maximum(ci, cj)
            big = xp.asarray(V * V, dtype=xp.int64)
            key = int(xp.min(xp.where(d2 == v, keys, big)))
            # best_d2 and best_key are set together: None for one is None for both
            if best_d2 is None or best_key is None or v != best_d2 or key < best_key:
                best_d2, best_key = v, key
    if best_d2 is None or best_key is None:  # no candidate pair: the preconditions were broken
        raise ValueError(f"extreme_pair_l2 needs a finite (V, d) array with V >= 2 rows; got shape {(V, d)}")
    i, j = divmod(best_key, V)
    return Pair(best_d2 / f0, int(i), int(j))


class _NormBound:
    """Rigorous tile bounds from the centred norms (all in the scaled units of the screening).

    With ``x_i`` the scaled centred rows in exact arithmetic and ``r_i`` the float64
    ``sqrt(fl(sum fl(x^_i^2)))`` of their rounded copies, ``|r_i - ||x_i||| <= a(r_i)`` where
    ``a(r) = (d + 6) u64 r + 2 sqrt(d tiny64)``: the centring and scaling round each entry by
    at most ``u64 |x| + 2^-1074``, the sum of squares by ``gamma_d`` plus ``d 2^-1074`` of
    underflow, and ``|sqrt(a) - sqrt(b)| <= sqrt(|a - b|)``.  A pair's real distance
    ``delta`` obeys ``|r_i - r_j| - a_i - a_j <= delta <= r_i + r_j + a_i + a_j``, and its
    float64 re-check lies within a factor ``1 +- eta``, ``eta = 2 (d + 8) u64``, of ``delta``
    (the differences, squares, sum and root of :func:`pair_distance`, with room for the
    rounding of the bound itself).  ``a`` grows with ``r``, so over a tile it is largest at
    the tile's largest row."""

    def __init__(self, d: int):
        fi = np.finfo(np.float64)
        u64, tiny = float(fi.eps) / 2.0, float(fi.smallest_normal)
        self.rel = (d + 6) * u64
        self.abs = 2.0 * math.sqrt(d * tiny)
        self.eta = 2.0 * (d + 8) * u64

    def a(self, r: float) -> float:
        return self.rel * r + self.abs

    def far_apart(self, r_i: float, r_j: float, r_top: float, best: float) -> bool:
        """Every pair of a row of norm at most ``r_i`` and one of norm at least ``r_j``, both
        at most ``r_top``, re-checks strictly above ``best``."""
        return (r_j - r_i - 2.0 * self.a(r_top)) * (1.0 - self.eta) > best

    def too_close(self, r_a: float, r_b: float, best: float) -> bool:
        """Every pair with norms at most ``r_a`` and ``r_b`` re-checks strictly below ``best``."""
        return (r_a + r_b + self.a(r_a) + self.a(r_b)) * (1.0 + self.eta) < best


def _tile_pairs(V: int, B: int, is_max: bool, r, nb: _NormBound, best):
    """The tile pairs ``(bi, bj, j1)`` (rows ``bi:bi+B`` against ``bj:j1``, ``bj >= bi``) of rows
    sorted by norm (``r(k)``: the norm of sorted row ``k``) that can still hold the extreme pair,
    ``best()`` being the best re-checked distance so far (scaled; ``None`` before the first).

    Closest pair: each row tile from its own diagonal outwards, until the norm gap to the next
    tile exceeds the best distance; the last tile is cut where that gap starts.  Diameter: from
    the largest rows down, each row tile against the tiles above it, largest first, while the
    norms can add up to the best distance; once a row tile cannot reach it with the largest
    tile, no smaller row tile can.  On a head gradient (a few hundred large rows, a tail of
    small ones) this skips most tiles; on clouds of similar norms (Gaussian rows) none."""
    starts = list(range(0, V, B))
    if not is_max:
        for bi in starts:
            top = r(min(bi + B, V) - 1)  # the largest norm of the row tile
            for bj in range(bi, V, B):
                j1 = min(bj + B, V)
                b = best()
                if b is not None and bj > bi:
                    rtop = r(j1 - 1)
                    if nb.far_apart(top, r(bj), rtop, b):
                        break
                    lo, hi = bj, j1  # the first row k of the tile with every pair far apart: cut there
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        lo, hi = (lo, mid) if nb.far_apart(top, r(mid), rtop, b) else (mid, hi)
                    j1 = hi
                yield bi, bj, j1
        return
    for k in reversed(range(len(starts))):
        bi = starts[k]
        top = r(min(bi + B, V) - 1)
        for bj in reversed(starts[k:]):
            j1 = min(bj + B, V)
            b = best()
            if b is not None and nb.too_close(top, r(j1 - 1), b):
                if bj == starts[-1]:
                    return  # this row tile cannot reach the best with the largest rows: nor can any below
                break
            yield bi, bj, j1


def _above(x: float, u: float, tiny: float) -> float:
    """A float at least ``x >= 0`` that stays at least ``x`` once rounded to the screening
    precision (unit roundoff ``u``, smallest normal ``tiny``): the float64 rounding of
    ``x`` and the cast each lose at most a relative ``u``, a subnormal result ``tiny``."""
    return x * (1.0 + 4.0 * u) + 2.0 * tiny


def _cummin(a, xp):
    """Inclusive running minimum (Hillis-Steele doubling scan, array API only)."""
    n, s = a.shape[0], 1
    while s < n:
        a = xp.concat([a[:s], xp.minimum(a[s:], a[: n - s])])
        s *= 2
    return a


def linf_diameter(X, xp) -> Pair:
    """``max_{i,j} ||x_i - x_j||_inf`` as the largest column range, ``O(V d)``.

    The value is ``max_k fl(max_i x_ik - min_i x_ik)``.  Ties are resolved on
    the float64 differences themselves, so pairs whose difference *rounds* to
    the maximum (e.g. ``-2^53 - 0`` and ``-2^53 - 1``) count as ties: in an
    attaining column, a row ``i`` pairs with exactly the rows ``j`` whose value
    is at most some threshold (rounding is monotone), so a vectorised bisection
    over the rows sorted by value finds, for each ``i``, its partner of
    smallest index.
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
    if win is None:  # no column attains the largest range: a NaN entry
        raise ValueError("linf_diameter needs finite entries (no column attains the largest range)")
    return Pair(best, int(win[0]), int(win[1]))


def brute_pair(X, xp, metric: str, mode: str, tile: int, chunk: int) -> Pair:
    """Tiled all-pairs ``l_1`` (``"cityblock"``) / ``l_inf`` (``"chebyshev"``) search
    in float64, ``O(V^2 d)``, ties to the smallest ``(i, j)``.

    Each ``tile x tile`` block is accumulated over ``chunk`` columns at a time
    (``chunk >= d``: one sum per pair, NumPy's pairwise summation -- the same
    value as a direct float64 evaluation).
    """
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
            for c in range(0, d, chunk):
                c1 = min(c + chunk, d)
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


# --------------------------------------------------------------------------- shared tiled distances
class TileBlock(NamedTuple):
    """One block of :func:`sq_distance_tiles`: rows ``rows_a`` against ``rows_b``.

    ``D2[p, q]`` is the GEMM-computed squared distance of rows ``rows_a[p]``
    and ``rows_b[q]`` of ``X``; ``E[p, q]`` bounds its error,
    ``|D2 - ||x_a - x_b||^2| <= E`` in real arithmetic on the float64 rows;
    ``keep`` is ``None`` or, on a diagonal block, the mask of the pairs
    ``p < q`` (each unordered pair is visited once).
    """

    rows_a: object
    rows_b: object
    D2: object
    E: object
    keep: object


def _tile_error(d: int, xp):
    """``(gamma_d, kappa, floor, up)`` of the per-pair error bound of :func:`sq_distance_tiles`:
    ``E = kappa (r_i + r_j)^2 + floor`` for rows of length ``d`` centred in float64,
    ``r`` a centred norm times ``up`` (rounded up past the exact one)."""
    u, tiny = _finfo(xp, xp.float64)
    gamma = d * u / (1.0 - d * u)
    return gamma, 2.0 * (gamma + 4.0 * u), 8.0 * (d + 2) * tiny, 1.0 + 2.0 * (d + 2) * u


def cross_distance_upper(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Upper bounds on ``||p_i - q_j||`` for all pairs of rows of two float64 NumPy
    arrays, a ``(len(P), len(Q))`` array: both centred on the mean of ``Q``, the GEMM
    value raised by the error bound of :func:`sq_distance_tiles` (derived there)."""
    _, kappa, floor, up = _tile_error(P.shape[1], np)
    c = Q.mean(axis=0)
    Pc, Qc = P - c, Q - c
    npp, nq = np.einsum("ij,ij->i", Pc, Pc), np.einsum("ij,ij->i", Qc, Qc)
    F = Pc @ Qc.T
    F *= -2.0
    F += npp[:, None]
    F += nq[None, :]
    np.maximum(F, 0.0, out=F)
    E = np.add(np.sqrt(npp)[:, None] * up, np.sqrt(nq)[None, :] * up)
    np.square(E, out=E)
    F += kappa * E + floor
    return np.sqrt(F, out=F)


def _centred_blocks(X, xp, *, tile: int, reach: float | None, order=None):
    """The block pairs of :func:`sq_distance_tiles`, before their GEMM.

    Yields ``(rows_a, rows_b, diagonal, Ac, na, ra, Bc, nb, rb)``: two blocks of rows of
    ``X`` (their indices), both centred on the mean ``c`` of the first block, their squared
    centred norms ``n`` and the norms rounded up, ``r = sqrt(n) * up`` (:func:`_tile_error`);
    ``diagonal`` marks a block against itself (``Bc is Ac``).  Rows are visited in ``order``
    (default: by decreasing norm, stable, so that blocks hold rows of similar size).  Block
    pairs that cannot hold a pair farther than ``reach`` are left out.
    """
    V = X.shape[0]
    gamma, _, _, up = _tile_error(X.shape[1], xp)
    nrm = xp.sum(X * X, axis=1)
    if order is None:
        order = xp.argsort(-nrm, stable=True)
    Xo = xp.take(X, order, axis=0)
    nrm = xp.take(nrm, order)
    B = min(max(1, int(tile)), V)
    # blocks: at most B rows, and a new block wherever the (sorted) norm drops by more
    # than 4x, so that the few large rows of a head gradient never share a block (and
    # so a centre) with its tail of tiny near-equal rows; at most 64 such extra cuts
    drops = xp.nonzero(nrm[1:] * 16.0 < nrm[:-1])[0]
    cuts = sorted({int(drops[t]) + 1 for t in range(min(64, drops.shape[0]))} | set(range(0, V, B)) | {V})
    blocks = [(cuts[t], cuts[t + 1]) for t in range(len(cuts) - 1)]
    for ta, (a0, a1) in enumerate(blocks):
        c = xp.mean(Xo[a0:a1, :], axis=0)
        Ac = Xo[a0:a1, :] - c
        na = xp.sum(Ac * Ac, axis=1)
        ra = xp.sqrt(na) * up
        ma = float(xp.max(ra))
        for b0, b1 in blocks[ta:]:
            if b0 == a0:
                Bc, nb, rb = Ac, na, ra
            else:
                Bc = Xo[b0:b1, :] - c
                nb = xp.sum(Bc * Bc, axis=1)
                rb = xp.sqrt(nb) * up
            if reach is not None and ma + float(xp.max(rb)) <= reach * (1.0 - 4.0 * gamma):
                continue
            yield order[a0:a1], order[b0:b1], b0 == a0, Ac, na, ra, Bc, nb, rb


def sq_distance_tiles(X, xp, *, tile: int = 2048, reach: float | None = None, order=None):
    """All pairs of rows of ``X`` as GEMM-screened ``tile x tile`` blocks with a
    per-pair error bound -- the one tiled-distance loop of the library.

    ``X`` is a finite float64 ``(V, d)`` array of namespace ``xp``.  Rows are
    visited in ``order`` (default: by decreasing norm, so that blocks hold rows
    of similar size), and each block pair is *re-centred* on the mean ``c`` of
    its first block before the GEMM: distances do not change, but the
    rounding, which scales with the squared norms, now scales with the local
    spread ``||x - c||``.  Near-coincident rows (the Zipf tail of a head
    gradient) therefore get a tight bound without any direct recomputation.

    Error bound.  With ``r_i`` the (rounded up) norm of the centred row,
    ``f = fl(n_i + n_j - 2 fl(x_i . x_j))`` differs from the squared distance
    of the centred rows by at most ``(gamma_d + 2u)(r_i + r_j)^2`` (Higham,
    Thm 3.1 for the dot products and norms, one rounding per addition), and
    the centring ``fl(x - c)`` moves each row by at most ``u r_i``, which
    changes a squared distance by at most ``2u(r_i + r_j)^2 (1 + u)``.
    ``E = 2 (gamma_d + 4u)(r_i + r_j)^2`` covers both with a factor 2; an
    absolute ``8 (d + 2) tiny`` covers underflow (callers scale ``X`` by a
    power of two to unit size first, so nothing overflows).

    ``reach``: skip block pairs that cannot hold a pair at distance
    ``> reach``, i.e. ``max_a r + max_b r <= reach (1 - 4 gamma_d)`` (the
    triangle inequality about ``c``).

    Yields :class:`TileBlock`; only indices and scalars leave the namespace.
    """
    _, kappa, floor, _ = _tile_error(X.shape[1], xp)
    B = min(max(1, int(tile)), X.shape[0])
    ar = xp.arange(B)
    upper = xp.reshape(ar, (B, 1)) < xp.reshape(ar, (1, B))
    for rows_a, rows_b, diagonal, Ac, na, ra, Bc, nb, rb in _centred_blocks(X, xp, tile=tile, reach=reach,
                                                                            order=order):
        if xp is np:  # the same values, in place (this loop is memory-bound beside the GEMM)
            D2 = Ac @ Bc.T
            D2 *= -2.0
            D2 += na[:, None]
            D2 += nb[None, :]
            E = np.add(ra[:, None], rb[None, :])
            np.square(E, out=E)
            E *= kappa
            E += floor
        else:
            D2 = xp.reshape(na, (-1, 1)) + xp.reshape(nb, (1, -1)) - 2.0 * (Ac @ xp.matrix_transpose(Bc))
            s = xp.reshape(ra, (-1, 1)) + xp.reshape(rb, (1, -1))
            E = kappa * (s * s) + floor
        h, w = D2.shape
        yield TileBlock(rows_a, rows_b, D2, E, upper[:h, :w] if diagonal else None)


_STRIP = 256  # rows of a block screened at a time by pairs_beyond (the strip's GEMM output stays in cache)


def _beyond_candidates(X, thr: float, *, tile: int):
    """NumPy screen of :func:`pairs_beyond`: the blocks of :func:`sq_distance_tiles`, each
    cut into strips of ``_STRIP`` rows, and in a diagonal block only the columns from the
    strip's first row on (the pairs ``p < q``).  Yields candidate index pairs (rows of ``X``).

    A strip never forms ``D2`` or ``E``.  ``D2 + E > t^2`` is tested as
    ``p_ij - n_j / 2 < (n_i - t^2) / 2 + E_s`` with ``p`` the GEMM's dot products and
    ``E_s = kappa (max_strip r + max_cols r)^2 + floor``, at least every ``E_ij`` of the
    strip: a pair with real distance above ``t`` has ``t^2 < (r_i + r_j)^2``, so the
    subtraction, halving and the threshold's own roundings add at most
    ``4u (r_i + r_j)^2`` in squared-distance units, which the slack ``2 E_s`` (twice the
    per-pair bound, and ``E >= 10u (r_i + r_j)^2``) covers.  The test is therefore passed by
    every pair that passes ``D2 + E > t^2`` (and by a few more, which the float64 check of
    :func:`pairs_beyond` drops)."""
    gamma, kappa, floor, _ = _tile_error(X.shape[1], np)
    t2 = thr * thr
    lim = thr * (1.0 - 4.0 * gamma)
    for rows_a, rows_b, diagonal, Ac, na, ra, Bc, nb, rb in _centred_blocks(X, np, tile=tile, reach=thr):
        half = 0.5 * nb
        for s0 in range(0, Ac.shape[0], _STRIP):
            s1 = min(Ac.shape[0], s0 + _STRIP)
            c0 = s0 if diagonal else 0
            ms, mb = float(ra[s0:s1].max()), float(rb[c0:].max())
            if ms + mb <= lim:
                continue
            M = Ac[s0:s1] @ Bc[c0:].T
            M -= half[None, c0:]
            rhs = 0.5 * (na[s0:s1] - t2) + (kappa * (ms + mb) ** 2 + floor)
            ii, jj = np.nonzero(M < rhs[:, None])
            if diagonal:
                ok = jj + c0 > ii + s0
                ii, jj = ii[ok], jj[ok]
            if ii.size:
                yield rows_a[s0 + ii], rows_b[c0 + jj]


def pairs_beyond(X, xp, thr: float, *, tile: int = 2048, skip=None):
    """All pairs ``i < j`` with float64 ``||x_i - x_j|| > thr`` (screened with the blocks of
    :func:`sq_distance_tiles`, pruned by norms, confirmed with :func:`pair_distance`).
    Returns two int64 index arrays of ``xp``.  With NumPy the blocks are screened in strips
    (:func:`_beyond_candidates`), about four times faster at ``V = 2000``.

    ``skip``: the pairs left out, as sorted int64 keys ``i V + j`` (``i < j``; repeats allowed)
    of ``xp``; a screened pair among them is not confirmed.  Where the rows are a flow's
    potential, its own pairs sit at distance 1 within rounding, and confirming them is most of
    the time: on the shipped MiniLM gradient's round-2 flow at full vocabulary (5,580,211
    pairs), all 2,100,930 screened pairs were the flow's, screened in 6.7 s and confirmed in
    about 30 s (2 cores)."""
    out_i, out_j = [], []
    V = X.shape[0]
    cands = _beyond_candidates(X, thr, tile=tile) if xp is np else _tile_candidates(X, xp, thr, tile)
    for gi, gj in cands:
        gi, gj = xp.astype(gi, xp.int64), xp.astype(gj, xp.int64)
        if skip is not None and skip.shape[0]:
            key = xp.minimum(gi, gj) * V + xp.maximum(gi, gj)
            at = xp.minimum(xp.searchsorted(skip, key), skip.shape[0] - 1)
            new = xp.take(skip, at) != key
            gi, gj = gi[new], gj[new]
        dist = pair_distance(xp.take(X, gi, axis=0) - xp.take(X, gj, axis=0), xp)
        ok = dist > thr
        gi, gj = gi[ok], gj[ok]
        out_i.append(xp.minimum(gi, gj))
        out_j.append(xp.maximum(gi, gj))
    if not out_i:
        z = xp.zeros((0,), dtype=xp.int64)
        return z, z
    return xp.concat(out_i), xp.concat(out_j)


def _tile_candidates(X, xp, thr, tile):
    """The array-API screen of :func:`pairs_beyond`: ``D2 + E > t^2`` on whole tiles."""
    for blk in sq_distance_tiles(X, xp, tile=tile, reach=thr):
        cand = blk.D2 + blk.E > thr * thr
        if blk.keep is not None:
            cand = xp.logical_and(cand, blk.keep)
        ii, jj = xp.nonzero(cand)
        if ii.shape[0]:
            yield xp.take(blk.rows_a, ii), xp.take(blk.rows_b, jj)


def distance_sum_upper(X, xp, *, tile: int = 2048, weights=None) -> float:
    """An upper bound on ``sum_{i<j} w_i w_j ||x_i - x_j||`` (real distances of
    the float64 rows; ``w = 1`` by default), from :func:`sq_distance_tiles`
    alone: each pair contributes ``sqrt(max(D2, 0) + E)``; no pair is
    recomputed directly.  (Exactly equal rows would each add ``sqrt(E)``:
    callers merge them first and pass their multiplicities as ``weights``.)

    Rounding of the square roots and of the summation (pairwise within a
    block, sequential across blocks) is covered by the factor
    ``1 + (2 log2(tile^2) + nblocks + 8) u``, applied at the end.
    """
    V = X.shape[0]
    if V < 2:
        return 0.0
    u, _ = _finfo(xp, xp.float64)
    total, nblocks = 0.0, 0
    for blk in sq_distance_tiles(X, xp, tile=tile):
        D2 = blk.D2
        if xp is np:  # in place: max(D2, 0) + E, then the square root
            np.maximum(D2, 0.0, out=D2)
            D2 += blk.E
            Dt = np.sqrt(D2, out=D2)
        else:
            Dt = xp.sqrt(xp.where(D2 > 0, D2, xp.zeros_like(D2)) + blk.E)
        if blk.keep is not None:
            Dt = xp.where(blk.keep, Dt, xp.zeros_like(Dt))
        if weights is not None:  # integer multiplicities: exact in float64 up to 2^53
            wa = xp.reshape(xp.take(weights, blk.rows_a), (-1, 1))
            Dt = wa * Dt * xp.reshape(xp.take(weights, blk.rows_b), (1, -1))
        total += float(xp.sum(Dt))
        nblocks += 1
    B = min(max(1, int(tile)), V)
    return total * (1.0 + (2.0 * math.log2(max(B * B, 2)) + nblocks + 8.0) * u)
