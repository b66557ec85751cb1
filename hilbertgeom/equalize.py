"""Equalization (version 1 of the paper): how equal can the row distances be?

The first version of arXiv 2608.22253 proposed to make all pairwise row
distances of the update as equal as geometry allows: maximise the smallest
separation under the diameter bound.  Exact equidistance is impossible once
``n > d + 1`` (I19); :func:`equidistant_limit` says how close one can get
(I20) and :func:`max_min_separation` finds configurations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _validate as _v
from .rows import closest_pair, row_diameter

__all__ = [
    "EqualizationRun",
    "EqualizedResult",
    "EquidistantLimit",
    "SeparationResult",
    "equalization_frontier",
    "equalize_rows",
    "equalized_descent",
    "equidistant_limit",
    "max_min_separation",
    "max_separation_at_decrease",
    "regular_simplex",
]


@dataclass(frozen=True)
class EquidistantLimit:
    """Whether ``n`` points of ``R^d`` can be pairwise equidistant, and the best
    proven bound on the achievable ratio ``min distance / max distance``.

    Attributes
    ----------
    possible : bool
        ``n <= d + 1`` (the regular simplex).
    upper : float
        ``delta*(n, d) <= upper``; 1 when ``possible``.
    source : str
        The bound: "regular simplex (I19)", "equal spacing (d = 1)",
        "Jung + sum of squared distances (I20)" or "isodiametric packing",
        whichever is smallest.
    """

    possible: bool
    upper: float
    source: str


def _check_nd(n, d):
    n = _v.integer(n, "n", minimum=2)
    d = _v.integer(d, "d", minimum=1)
    return n, d


_U64 = 2.0**-53


def _packing_bound(n: int, d: int) -> float:
    """The isodiametric packing bound ``1 / (n^(1/d) - 1)``, rounded up.

    Balls of radius ``delta/2`` around the points are disjoint and lie in a set
    of diameter ``1 + delta``, whose volume is at most that of the ball of
    diameter ``1 + delta`` (isodiametric inequality), so
    ``n delta^d <= (1 + delta)^d``.  The float is then certified: it is
    stepped up until ``n c^d >= (1 + c)^d`` holds in exact rational
    arithmetic, i.e. ``c`` is at least the real bound.
    """
    from fractions import Fraction

    c = 1.0 / math.expm1(math.log(n) / d)
    N = Fraction(n)
    while N * Fraction(c) ** d < (1 + Fraction(c)) ** d:
        c = math.nextafter(c, math.inf)
    return c


def _i20_bound(n: int, d: int) -> float:
    """``sqrt(n d' / ((n - 1)(d' + 1)))``, ``d' = min(d, n - 1)``, rounded up
    (certified in exact rational arithmetic like :func:`_packing_bound`)."""
    from fractions import Fraction

    dp = min(d, n - 1)
    q = Fraction(n * dp, (n - 1) * (dp + 1))
    c = math.sqrt(float(q))
    while Fraction(c) ** 2 < q:
        c = math.nextafter(c, math.inf)
    return c


def equidistant_limit(n: int, d: int, /) -> EquidistantLimit:
    r"""Can ``n`` points in ``R^d`` be pairwise equidistant?  If not, how close?

    At most ``d + 1`` points of ``R^d`` are pairwise equidistant (I19).  For
    ``n > d + 1`` the best ratio ``delta*(n, d)`` of smallest to largest
    distance satisfies (I20), with ``d' = min(d, n - 1)``,

    .. math:: \delta^*(n, d)^2 \le \frac{n\, d'}{(n - 1)(d' + 1)},

    and the isodiametric packing bound (disjoint balls of radius
    ``delta/2`` inside a set of diameter ``1 + delta``),

    .. math:: \delta^*(n, d) \le \frac{1}{n^{1/d} - 1},

    which is the smaller one once ``n`` is large (from about ``1.27 * 2^d``:
    it decays like ``n^{-1/d}`` while I20 stays above ``sqrt(d/(d+1))``).
    The smaller bound is reported, rounded up (certified in exact rational
    arithmetic).  On a line (``d = 1``) exactly ``delta* = 1 / (n - 1)``.

    Parameters
    ----------
    n : int
        Number of points, ``>= 2``.
    d : int
        Dimension, ``>= 1``.

    Returns
    -------
    EquidistantLimit

    Examples
    --------
    >>> equidistant_limit(3, 2)
    EquidistantLimit(possible=True, upper=1.0, source='regular simplex (I19)')
    >>> round(equidistant_limit(4, 2).upper, 12)       # sqrt(4 * 2 / (3 * 3))
    0.942809041582
    >>> lim = equidistant_limit(7, 2)                   # 1 / (sqrt(7) - 1)
    >>> round(lim.upper, 6), lim.source
    (0.607625, 'isodiametric packing')
    """
    n, d = _check_nd(n, d)
    if n <= d + 1:
        return EquidistantLimit(True, 1.0, "regular simplex (I19)")
    if d == 1:
        return EquidistantLimit(False, 1.0 / (n - 1), "equal spacing (d = 1)")
    jung = _i20_bound(n, d)
    if (n - 1).bit_length() <= d:
        # n <= 2^d: the packing bound 1/(n^(1/d) - 1) is >= 1 > I20 and is not computed
        # (its exact certification raises a float to the d-th power: O(d) big-integer work)
        return EquidistantLimit(False, jung, "Jung + sum of squared distances (I20)")
    pack = _packing_bound(n, d)
    if pack < jung:
        return EquidistantLimit(False, pack, "isodiametric packing")
    return EquidistantLimit(False, jung, "Jung + sum of squared distances (I20)")


def regular_simplex(n: int, d: int, /) -> np.ndarray:
    r"""``n <= d + 1`` pairwise equidistant points of ``R^d`` with unit distance.

    The vertices of a regular ``(n-1)``-simplex, centred at the origin, in the
    first ``n - 1`` coordinates (the others are zero).

    Parameters
    ----------
    n : int
        Number of points, ``2 <= n <= d + 1`` (I19).
    d : int
        Dimension, ``>= 1``.

    Returns
    -------
    (n, d) float64 ndarray
        Every pairwise distance is 1 up to rounding; the rows sum to zero.

    Raises
    ------
    ValueError
        ``n < 2``, ``d < 1``, or ``n > d + 1`` (no equidistant set exists).

    Examples
    --------
    >>> P = regular_simplex(3, 2)
    >>> round(row_diameter(P), 12), round(closest_pair(P).distance, 12)
    (1.0, 1.0)
    """
    n, d = _check_nd(n, d)
    if n > d + 1:
        raise ValueError(f"n = {n} points cannot be equidistant in R^{d} (at most d + 1 = {d + 1}; I19)")
    E = (np.eye(n) - 1.0 / n) / math.sqrt(2.0)  # unit edges, centred, in R^n
    U, _, _ = np.linalg.svd(E)
    coords = E @ U[:, : n - 1]  # the same points in R^(n-1)
    out = np.zeros((n, d))
    out[:, : n - 1] = coords
    return out


@dataclass(frozen=True)
class SeparationResult:
    """Points of diameter at most 1 with a large smallest separation.

    Attributes
    ----------
    lower : float
        The smallest pairwise distance of ``points`` (exact, re-checkable with
        :func:`~hilbertgeom.closest_pair`): ``delta*(n, d) >= lower``.
    upper : float
        A proven upper bound on ``delta*(n, d)``.
    points : (n, d) ndarray
        Diameter ``<= 1`` (exactly 1 up to rounding).
    upper_source : str
        Where ``upper`` comes from (see :class:`EquidistantLimit`).
    exact : bool
        ``lower == upper`` up to rounding: the optimum is certified.
    restarts : int
        Local searches run.
    """

    lower: float
    upper: float
    points: np.ndarray
    upper_source: str
    exact: bool
    restarts: int


def _pair_squares(n: int, d: int, extra: int = 0):
    """``sq(x)``: squared distances of all pairs of the ``n x d`` points in the first
    ``n d`` entries of ``x``; ``jac(x)``: their Jacobian (``extra`` trailing columns zero)."""
    iu, ju = np.triu_indices(n, 1)
    rows = np.arange(len(iu))

    def sq(x):
        D = x[: n * d].reshape(n, d)
        D = D[iu] - D[ju]
        return np.einsum("ij,ij->i", D, D)

    def jac(x):
        D = x[: n * d].reshape(n, d)
        D = D[iu] - D[ju]
        J = np.zeros((len(iu), n * d + extra))
        for c in range(d):
            J[rows, iu * d + c] = 2 * D[:, c]
            J[rows, ju * d + c] = -2 * D[:, c]
        return J

    return sq, jac


def _local_search(x0: np.ndarray, n: int, d: int):
    """Maximise ``t`` s.t. ``t <= ||x_i - x_j||^2 <= 1`` from ``x0`` (SLSQP)."""
    from scipy.optimize import minimize

    sq, jac_sq = _pair_squares(n, d, extra=1)

    def cons_low(z):
        return sq(z) - z[-1]

    def jac_low(z):
        Jm = jac_sq(z)
        Jm[:, -1] = -1.0
        return Jm

    def cons_high(z):
        return 1.0 - sq(z)

    def jac_high(z):
        return -jac_sq(z)

    X0 = x0 / max(row_diameter(x0), 1e-300)
    t0 = float(sq(np.r_[X0.ravel(), 0.0]).min())
    res = minimize(lambda z: -z[-1], np.r_[X0.ravel(), t0],
                   jac=lambda z: np.r_[np.zeros(n * d), -1.0], method="SLSQP",
                   constraints=[{"type": "ineq", "fun": cons_low, "jac": jac_low},
                                {"type": "ineq", "fun": cons_high, "jac": jac_high}],
                   options={"maxiter": 500, "ftol": 1e-15})
    X = res.x[:-1].reshape(n, d)
    D = row_diameter(X)
    if not np.isfinite(D) or D == 0:
        return None
    X = X / D
    return X, closest_pair(X).distance


def max_min_separation(n: int, d: int, /, *, restarts: int | None = None, seed: int = 0) -> SeparationResult:
    r"""``n`` points of ``R^d`` with diameter ``<= 1`` and the largest smallest
    separation found, with a proven upper bound.

    For ``n <= d + 1`` the regular simplex is optimal (``lower == upper == 1``);
    on a line, equal spacing is optimal (``1/(n-1)``).  Otherwise a seeded
    multi-start local search (SLSQP on ``max t`` s.t.
    ``t <= ||x_i - x_j||^2 <= 1``) gives ``lower`` and the smaller of I20 and
    the isodiametric packing bound (:func:`equidistant_limit`) gives
    ``upper``; the gap between them is reported, not hidden.

    Parameters
    ----------
    n : int
        Points, ``>= 2``.
    d : int
        Dimension, ``>= 1``.
    restarts : int, optional
        Local searches: a regular polygon (in the first two coordinates),
        then random starts, alternately uniform on the sphere (the best known
        configurations have most points on a shell) and uniform in the ball
        (interior points, as the centre of the hexagon for ``n = 7``).
        Default ``max(20, 5 n)``: with seed 0 it reaches the proven optima in
        the plane (``n <= 8``) and the best known values in three dimensions
        (``n = 5..12``, Friedman's table; tested).
    seed : int
        Seed of the starts; the result is deterministic for a given seed.

    Returns
    -------
    SeparationResult

    Examples
    --------
    >>> r = max_min_separation(4, 2, restarts=5)
    >>> r.lower >= 0.7071067, r.upper_source                # the unit-diagonal square
    (True, 'Jung + sum of squared distances (I20)')
    """
    n, d = _check_nd(n, d)
    restarts = max(20, 5 * n) if restarts is None else _v.integer(restarts, "restarts", minimum=1)
    lim = equidistant_limit(n, d)
    if lim.possible:
        P = regular_simplex(n, d)
        return SeparationResult(closest_pair(P).distance, 1.0, P, lim.source, True, 0)
    if d == 1:
        P = (np.arange(n, dtype=float) / (n - 1))[:, None]
        return SeparationResult(closest_pair(P).distance, lim.upper, P, lim.source, True, 0)
    rng = np.random.default_rng(seed)
    starts = []
    t = 2 * np.pi * np.arange(n) / n
    polygon = np.zeros((n, d))
    polygon[:, 0], polygon[:, 1] = np.cos(t), np.sin(t)
    starts.append(polygon)
    while len(starts) < restarts:
        Z = rng.standard_normal((n, d))
        Z /= np.linalg.norm(Z, axis=1, keepdims=True)
        if len(starts) % 2 == 0:  # uniform in the ball; odd positions stay on the sphere
            Z *= rng.random((n, 1)) ** (1.0 / d)
        starts.append(Z)
    best = None
    for x0 in starts:
        out = _local_search(x0, n, d)
        if out is not None and (best is None or out[1] > best[1]):
            best = out
    if best is None:
        from .exceptions import STATUS_NO_FEASIBLE_UPDATE, SolverError

        raise SolverError(f"max_min_separation: none of the {len(starts)} local searches (SLSQP) returned a "
                          "configuration of positive diameter; try more restarts or another seed",
                          status=STATUS_NO_FEASIBLE_UPDATE)
    X, low = best
    return SeparationResult(low, lim.upper, X, lim.source, bool(abs(lim.upper - low) <= 1e-12), len(starts))


# --------------------------------------------------------------------------- I21
@dataclass(frozen=True)
class EqualizedResult:
    """Gradient-aligned equalization: a feasible update and a certified bracket.

    Attributes
    ----------
    lower : float
        ``-<G, update>``, the decrease of a feasible update (``-inf`` if none
        is known).
    upper : float
        A proven upper bound on the best decrease (the Shor SDP relaxation, or
        ``eta T(G)`` at ``delta = 0``; ``-inf`` when ``delta`` is proven
        infeasible).
    update : (V, d) ndarray or None
        Centred, ``D(update) <= eta``, smallest separation ``>= delta eta``
        (both checked with the exact kernels).
    separation : float
        The update's smallest row distance (exact).
    gap : float
        ``upper - lower``.
    status : str
        ``"optimal"`` (gap within tolerance), ``"feasible"`` (gap reported),
        ``"infeasible"`` (``delta`` above the proven bound of
        :func:`equidistant_limit` for ``V`` points in ``R^d``), or ``"no feasible update found"``.
    delta, eta : float
    upper_source : str
    """

    lower: float
    upper: float
    update: np.ndarray | None
    separation: float
    gap: float
    status: str
    delta: float
    eta: float
    upper_source: str


# Memory model of the Shor SDP in cvxpy + Clarabel, fitted to the peak resident memory
# measured on V = 10..80, d = 3..64 (benchmarks/bench_equalizer.py --memory): the PSD cone
# of side V + r enters the conic solver as t = (V + r)(V + r + 1)/2 rows whose scaling
# block is dense (t x t), held in the cone, the KKT matrix and its factor (52-57 bytes
# per entry measured, 60 used); each of the V(V-1)/2 pair constraints costs about 25 kB
# more (canonicalization and KKT rows).  The 142 GB allocation that aborted the
# interpreter at V = 500, d = 16 is 8 t^2 bytes, one copy of the dense block.
_SDP_BYTES_PER_BLOCK_ENTRY = 60
_SDP_BYTES_PER_PAIR = 25_000
_SDP_BYTES_BASE = 4 * 2**20


def _shor_memory(V: int, r: int) -> int:
    """Estimated peak memory (bytes) of the Shor SDP for ``V`` rows of rank ``r``."""
    t = (V + r) * (V + r + 1) // 2
    return _SDP_BYTES_PER_BLOCK_ENTRY * t * t + _SDP_BYTES_PER_PAIR * (V * (V - 1) // 2) + _SDP_BYTES_BASE


def _ccp_memory(V: int, d: int) -> int:
    """Estimated peak memory (bytes) of one convex subproblem of the local search: a
    sparse KKT system with ``V d + V(V-1)/2`` variables, ``V(V-1)/2`` cones of
    size ``d + 1`` and separation rows, whose factor is at worst dense in ``S``."""
    m = V * (V - 1) // 2
    nnz = m * (4 * d + 4) + V * d
    return 16 * (V * d) ** 2 + 48 * nnz + 64 * (V * d + m * (d + 4))


def _physical_memory() -> int | None:
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return None


def _memory_limit(max_memory) -> tuple[int, str]:
    if max_memory is not None:
        return _v.integer(max_memory, "max_memory", minimum=1), "max_memory"
    phys = _physical_memory()
    if phys:
        return phys // 2, "half of this machine's memory; raise it with max_memory="
    return 8 * 2**30, "8 GiB (this machine's memory is unknown); raise it with max_memory="


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000.0
    return f"{n:.3g} PB"  # pragma: no cover


def _size_guard(V: int, d: int, r: int, max_memory, caller: str) -> int:
    """Raise ``ValueError`` before any solve when the Shor SDP (or the local search)
    would need more memory than allowed; return the estimate."""
    limit, why = _memory_limit(max_memory)
    dl = min(d, r + V - 1)
    need = max(_shor_memory(V, r), _ccp_memory(V, dl))
    if need > limit:
        t = (V + r) * (V + r + 1) // 2
        raise ValueError(
            f"{caller}: G with V = {V} rows (rank {r}) is too large for the Shor SDP: its "
            f"{V + r}-square PSD block ({t} cone rows, a dense {t} x {t} block in the conic "
            f"solver's KKT system) and {V * (V - 1) // 2} pair constraints need about "
            f"{_bytes(need)}, above the limit of {_bytes(limit)} ({why}).  Use "
            f"equalize_rows(G, keep=...) for large V (tiled, no V x V array); the SDP "
            f"also takes time growing like (V + r)^6 (about a CPU minute at V + r = 96)"
        )
    return need


def _pow2_exponent(x: float) -> int:
    """``e`` with ``2^(e-1) <= |x| < 2^e`` (0 for 0): dividing by ``2^e`` is exact."""
    return math.frexp(x)[1] if x != 0 and math.isfinite(x) else 0


def _ldexp(x: float, e: int) -> float:
    """``x 2^e`` without an OverflowError (``+-inf`` only if the value is not representable)."""
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def _prepare(G, center: bool):
    """Validate ``G`` and scale it by an exact power of two (the problems are
    homogeneous in ``G``): returns ``(X, e)`` with ``G_centred = 2^e X`` and
    ``max |X| < 1``, so that no overflow or underflow decides the answer."""
    A = _v.matrix(G, "G", min_rows=2)
    e = _pow2_exponent(float(np.max(np.abs(A)))) if A.size else 0
    X, _ = _v.zero_sum_matrix(np.ldexp(A, -e), center)
    return X, e


def _rank_basis(X: np.ndarray):
    """Rank ``r`` of ``X`` (at least 1) and ``d' = min(d, r + V - 1)`` orthonormal
    columns ``B`` (``d x d'``) whose first ``r`` span the row space of ``X``.

    Centred updates of ``V`` rows span at most ``V - 1`` directions; rotating
    the part orthogonal to the row space (which leaves ``<G, S>`` and every
    distance unchanged) puts any update into the span of ``B``."""
    V, d = X.shape
    _, s, Wt = np.linalg.svd(X, full_matrices=False)
    r = int(np.sum(s > s[0] * max(V, d) * _U64)) if s.size and s[0] > 0 else 0
    r = max(r, 1)
    k = min(d, r + V - 1)
    # complete the row-space basis (Householder QR: orthonormal columns whatever the rank)
    B, _ = np.linalg.qr(np.c_[Wt[:r].T, np.eye(d, k)])
    return r, B[:, :k]


def _shor_sdp(G: np.ndarray, delta: float, eta: float):
    """Shor relaxation: ``[[I, S^T], [S, X]] >= 0``, ``delta^2 eta^2 <= X_ii + X_jj - 2 X_ij <= eta^2``.

    Solved in the row space of ``G`` (rank ``r``): columns of ``S`` orthogonal
    to it do not change the objective and only tighten ``X >= S S^T``, so the
    value is the same with a PSD block of side ``V + r`` instead of ``V + d``.
    Returns the (widened) value and ``S`` in the original coordinates.
    """
    import warnings

    import cvxpy as cp

    from .exceptions import SolverError

    V = G.shape[0]
    r, B = _rank_basis(G)
    Gr = G @ B[:, :r]
    iu, ju = np.triu_indices(V, 1)
    S = cp.Variable((V, r))
    X = cp.Variable((V, V), symmetric=True)
    M = cp.bmat([[np.eye(r), S.T], [S, X]])
    dist = cp.diag(X)[iu] + cp.diag(X)[ju] - 2 * X[iu, ju]
    cons = [M >> 0, cp.sum(S, axis=0) == 0, X @ np.ones(V) == 0, dist <= eta**2]
    if delta > 0:
        cons.append(dist >= (delta * eta) ** 2)
    prob = cp.Problem(cp.Maximize(-cp.sum(cp.multiply(Gr, S))), cons)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        try:
            prob.solve(solver=cp.CLARABEL)
        except cp.error.SolverError as exc:
            raise SolverError(f"Shor SDP: cvxpy/CLARABEL failed ({exc}); try a smaller V",
                              status="solver_error") from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"Shor SDP: cvxpy/CLARABEL returned status {prob.status!r}", status=str(prob.status))
    # the interior-point value is accurate to its gap tolerance; widen the bound by it
    value = float(prob.value)
    return value + 1e-7 * abs(value), np.asarray(S.value) @ B[:, :r].T


def _ccp(G: np.ndarray, S0: np.ndarray, delta: float, upper: float, *, max_iter: int = 40,
         rtol: float = 1e-6):
    r"""Feasible updates by the convex-concave procedure, from ``S0``.

    Maximise ``-<G, S>`` s.t. ``||s_i - s_j|| <= 1``, ``||s_i - s_j|| >= delta``,
    ``1^T S = 0``.  The separation floor is the only non-convex constraint; at
    the current point it is replaced by its supporting half-space
    ``<u_ij, s_i - s_j> >= delta`` (``u_ij`` the unit direction of the pair),
    which implies it.  Each step is a second-order cone program (Clarabel);
    from a feasible point the steps stay feasible and the decrease never
    falls.  Infeasible starts get slacks with an exact penalty that is raised
    until they vanish.  Stops when the bracket with ``upper`` is closed to
    ``rtol``, when a step gains less than ``rtol`` (relative) or a hundredth
    of the remaining gap, or after ``max_iter`` steps.  Returns ``(S, decrease)`` of the best
    feasible point (checked in float64; the caller re-checks with the exact
    kernels) or ``None``.
    """
    import clarabel
    import scipy.sparse as sp

    V, d = G.shape
    iu, ju = np.triu_indices(V, 1)
    m = iu.size
    nS = V * d
    n = nS + m
    target = delta * (1 + 1e-6)
    p = np.repeat(np.arange(m), d)
    c = np.tile(np.arange(d), m)
    ci, cj = iu[p] * d + c, ju[p] * d + c
    slack = nS + np.arange(m)
    A_zero = sp.csr_matrix((np.ones(nS), (np.tile(np.arange(d), V), np.arange(nS))), shape=(d, n))
    A_slack = sp.csr_matrix((-np.ones(m), (np.arange(m), slack)), shape=(m, n))
    r_soc = p * (d + 1) + 1 + c
    A_soc = sp.csr_matrix((np.r_[-np.ones(m * d), np.ones(m * d)], (np.r_[r_soc, r_soc], np.r_[ci, cj])),
                          shape=(m * (d + 1), n))
    b_soc = np.zeros(m * (d + 1))
    b_soc[:: d + 1] = 1.0
    b = np.r_[np.zeros(d), -target * np.ones(m), np.zeros(m), b_soc]
    cones = [clarabel.ZeroConeT(d), clarabel.NonnegativeConeT(2 * m)] + [clarabel.SecondOrderConeT(d + 1)] * m
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.direct_solve_method = "qdldl"  # faster than the threaded default on these sparse systems
    P = sp.csc_matrix((n, n))
    gmax = float(np.max(np.linalg.norm(G, axis=1))) or 1.0
    tau = 10.0 * gmax
    fallback = _fixed_directions((m, d), np.float64, np)
    fallback /= np.linalg.norm(fallback, axis=1, keepdims=True)
    S = S0 - S0.mean(axis=0)
    best, prev = None, None
    for _ in range(max_iter):
        D = S[iu] - S[ju]
        nd = np.linalg.norm(D, axis=1)
        U = np.where((nd > 0)[:, None], D / np.where(nd > 0, nd, 1.0)[:, None], fallback)
        A_sep = sp.csr_matrix((np.r_[-U.ravel(), U.ravel(), -np.ones(m)],
                               (np.r_[p, p, np.arange(m)], np.r_[ci, cj, slack])), shape=(m, n))
        A = sp.vstack([A_zero, A_sep, A_slack, A_soc]).tocsc()
        q = np.r_[G.ravel(), np.full(m, tau)]
        sol = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
        if str(sol.status) not in ("Solved", "AlmostSolved"):
            break
        S = np.asarray(sol.x[:nS]).reshape(V, d)
        S = S - S.mean(axis=0)
        dist = np.linalg.norm(S[iu] - S[ju], axis=1)
        diam = float(dist.max())
        if diam > 1.0:
            S, dist = S / diam, dist / diam
        value = -float(np.sum(G * S))
        feasible = float(dist.min()) >= delta
        if not feasible:
            tau = min(10.0 * tau, 1e8 * gmax)
            continue
        if best is None or value > best[1]:
            best = (S, value)
        if upper - best[1] <= rtol * abs(upper):
            break
        if prev is not None and value - prev <= max(1e-2 * (upper - value), rtol * abs(value)):
            break  # stalled: the step gains less than the tolerance or a hundredth of the gap
        prev = value
    return best


def _kernel_rtol(d: int) -> float:
    from .tolerances import tolerance

    return tolerance("kernel", d=d).rtol


def _fit_diameter(S: np.ndarray, eta: float) -> np.ndarray:
    """Centre ``S`` and shrink it until its diameter is ``<= eta`` for the exact real
    distances of the float64 rows, not only after rounding: the exact kernel's
    distance must be below ``eta (1 - 4 (d + 2) u)``, its error bound."""
    S = S - S.mean(axis=0)
    target = eta * (1.0 - _kernel_rtol(S.shape[1]))
    for _ in range(8):
        D = row_diameter(S)
        if D <= target:
            return S
        S = S * (target / D) * (1.0 - 2.0**-52)
    return S


def _certified(S: np.ndarray, eta: float, delta: float):
    """The exact kernels' diameter and separation of ``S``, and whether they prove
    ``D(S) <= eta`` and ``min ||s_i - s_j|| >= delta eta`` for the exact distances."""
    rt = _kernel_rtol(S.shape[1])
    D = row_diameter(S)
    sep = closest_pair(S).distance if S.shape[0] > 1 else 0.0
    return D, sep, D <= eta * (1.0 - rt) and sep * (1.0 - rt) >= delta * eta


def _progress(verbose: bool, name: str):
    import sys
    import time

    t0 = time.perf_counter()

    def log(msg: str) -> None:
        if verbose:
            print(f"{name}: {msg}  [{time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)

    return log


def equalized_descent(G: ArrayLike, /, *, delta: float, eta: float = 1.0, center: bool = False, restarts: int = 0,
                      seed: int = 0, max_memory: int | None = None, verbose: bool | None = None) -> EqualizedResult:
    r"""Gradient-aligned equalization (identity I21).

    .. math::

        \max_S\ -\langle G, S\rangle \quad\text{s.t.}\quad D(S) \le \eta,\quad
        \min_{i<j}\|s_i - s_j\| \ge \delta\eta,\quad 1^\top S = 0 .

    The problem is non-convex for ``delta > 0``.  ``upper`` is the value of
    the Shor semidefinite relaxation (lift ``X ~ S S^T`` with
    ``[[I, S^T], [S, X]] >= 0`` and ``X 1 = 0``; the diameter constraint stays
    exact, only the separation floor is relaxed), solved in the row space of
    ``G`` (rank ``r``: a PSD block of side ``V + r``).  ``lower`` is the
    decrease of a feasible update found by the convex-concave procedure (a
    sequence of second-order cone programs, see the theory page) from the
    relaxation's ``S``, then from projected RowNorm and ``restarts`` random
    starts while the bracket is not closed; the update is re-checked with the
    exact kernels.  At ``delta = 0`` the problem is the steepest descent of
    I10 and is solved exactly by :func:`~hilbertgeom.min_tension`.  CPU only
    (cvxpy, Clarabel).  ``G`` is scaled by an exact power of two first (the
    problem is homogeneous), so any finite magnitude gives the same answer.

    Size: the relaxation's memory grows like ``(V + r)^4`` and its time like
    ``(V + r)^6``.  Before any solve the memory need is estimated
    (``60 t^2 + 25 kB * V(V-1)/2`` bytes, ``t = (V+r)(V+r+1)/2``, fitted to
    measured peaks) and a ``ValueError`` is raised above ``max_memory``.
    Measured on a 2-core x86_64 with 24 GB shared with other jobs
    (2026-12-03), Gaussian ``G``, ``d = 16``, ``delta = 0.3``, wall time
    (CPU time): ``V = 20`` 3.2 s (0.4 s), ``V = 40`` 18 s (6 s), ``V = 60`` 77 s
    (17 s), ``V = 80`` 390 s (62 s) and 1.3 GB, ``V = 100`` (the largest
    tried) 894 s (149 s) and 2.6 GB, all with a certified relative gap
    below ``1e-7``.  ``V = 500`` (the README's ``G``) would need
    about 1 TB and is refused.  For large ``V`` use :func:`equalize_rows`.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    delta : float
        Separation floor as a fraction of ``eta``, in ``[0, 1]``.
    eta : float
        Diameter budget, ``> 0``.
    center : bool
        Project ``G`` onto zero column sums first instead of raising.
    restarts : int
        Random starts of the local search, tried (after the relaxation's
        ``S`` and RowNorm) only while the bracket is not closed.
    seed : int
        Seed of the random starts.
    max_memory : int, optional
        Memory limit in bytes for the size guard (default: half of the
        machine's physical memory).
    verbose : bool, optional
        Progress lines on stderr, one per stage and start (default: on when
        ``V + r > 48``, where the relaxation takes more than a few seconds).

    Returns
    -------
    EqualizedResult

    Raises
    ------
    ValueError
        Bad arguments, or a problem too large for ``max_memory`` (the message
        gives the estimate and the limit).
    SolverError
        The conic solver failed on the relaxation.

    Examples
    --------
    >>> G = [[1.0, 0.0], [-1.0, 0.0]]
    >>> r = equalized_descent(G, delta=0.0)
    >>> round(r.lower, 9), round(r.upper, 9), r.status
    (1.0, 1.0, 'optimal')
    >>> import numpy as np
    >>> G = np.random.default_rng(1).standard_normal((500, 16)); G -= G.mean(axis=0)
    >>> equalized_descent(G, delta=0.3)                  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: equalized_descent: G with V = 500 rows (rank 16) is too large for the Shor SDP: ...
    """
    X, e = _prepare(G, center)
    V, d = X.shape
    delta = _v.scalar(delta, "delta", minimum=0.0)
    if delta > 1.0:
        raise ValueError(f"delta must be in [0, 1] (a fraction of the diameter); got {delta:g}")
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    restarts = _v.integer(restarts, "restarts", minimum=0)
    _memory_limit(max_memory)  # validates max_memory
    seed = _v.integer(seed, "seed")
    r, Q = _rank_basis(X)
    if delta > 0.0 and delta <= equidistant_limit(V, d).upper:
        _size_guard(V, d, r, max_memory, "equalized_descent")
    if verbose is None:
        verbose = V + r > 48
    return _equalized(X, e, delta, eta, r, Q, restarts, seed, bool(verbose))


def _equalized(X, e, delta, eta, r, Q, restarts, seed, verbose) -> EqualizedResult:
    """:func:`equalized_descent` on validated input ``G = 2^e X``."""
    from .tension import min_tension, projected_rownorm
    from .tolerances import tolerance

    V, d = X.shape
    em, ek = math.frexp(eta)  # eta = em 2^ek: solve at diameter em, scale back exactly

    def back(value: float) -> float:  # a decrease of X at diameter em -> of G at diameter eta
        return _ldexp(value, e + ek)

    def at_eta(S: np.ndarray, sep: float):
        return np.ldexp(S, ek), _ldexp(sep, ek)

    if delta == 0.0:
        ten = min_tension(X, verbose=verbose)
        S = _fit_diameter(-em * ten.potential, em)
        dec = -float(np.sum(X * S))
        upper = em * ten.flow.cost
        S, sep = at_eta(S, _certified(S, em, 0.0)[1])
        return EqualizedResult(lower=back(dec), upper=back(upper), update=S, separation=sep,
                               gap=back(max(upper - dec, 0.0)), status=ten.status, delta=0.0, eta=eta,
                               upper_source="min_tension flow certificate (I10)")
    lim = equidistant_limit(V, d)
    if delta > lim.upper:
        return EqualizedResult(lower=-math.inf, upper=-math.inf, update=None, separation=0.0, gap=0.0,
                               status="infeasible", delta=delta, eta=eta,
                               upper_source=f"delta > {lim.upper:.6g}: {lim.source}")
    log = _progress(verbose, "equalized_descent")
    t = (V + r) * (V + r + 1) // 2
    log(f"V = {V}, d = {d}, rank {r}, delta = {delta:g}: Shor SDP with a {V + r}-square PSD block, "
        f"{V * (V - 1) // 2} pairs (about {_bytes(_shor_memory(V, r))}; {t} cone rows)")
    upper1, S_sdp = _shor_sdp(X, delta, 1.0)  # at unit diameter
    upper = em * upper1
    log(f"Shor SDP done: upper {back(upper):.10g}")
    rtol = tolerance("solver").rtol
    # the local search runs in d' = min(d, r + V - 1) coordinates: the row space of X and
    # at most V - 1 directions orthogonal to it (V centred rows span at most V - 1)
    B = Q
    dl = B.shape[1]
    Xl = X @ B
    rng = np.random.default_rng(seed)
    starts = [("relaxation", lambda: S_sdp @ B), ("RowNorm", lambda: projected_rownorm(X, eta=1.0) @ B)]
    for i in range(restarts):
        starts.append((f"random {i + 1}", lambda: rng.standard_normal((V, dl))))
    best = None
    for k, (name, make) in enumerate(starts, 1):
        out = _ccp(Xl, make(), delta, upper1, rtol=rtol)
        if out is None:
            log(f"start {k}/{len(starts)} ({name}): no feasible update")
            continue
        S = _fit_diameter(em * (out[0] @ B.T), em)
        _, sep, ok = _certified(S, em, delta)
        if not ok:
            log(f"start {k}/{len(starts)} ({name}): update fails the exact re-check")
            continue
        dec = -float(np.sum(X * S))
        if best is None or dec > best[0]:
            best = (dec, S, sep)
        log(f"start {k}/{len(starts)} ({name}): lower {back(dec):.10g}, best {back(best[0]):.10g}, "
            f"relative gap {max(upper - best[0], 0.0) / abs(upper):.2e}")
        if upper - best[0] <= rtol * abs(upper):
            break  # the bracket is closed: no further start can improve it beyond tolerance
    if best is None:
        return EqualizedResult(lower=-math.inf, upper=back(upper), update=None, separation=0.0, gap=math.inf,
                               status="no feasible update found", delta=delta, eta=eta,
                               upper_source="Shor SDP relaxation (I21)")
    dec, S, sep = best
    gap = max(upper - dec, 0.0)
    status = "optimal" if gap <= rtol * abs(upper) else "feasible"
    S, sep = at_eta(S, sep)
    return EqualizedResult(lower=back(dec), upper=back(upper), update=S, separation=sep, gap=back(gap),
                           status=status, delta=delta, eta=eta, upper_source="Shor SDP relaxation (I21)")


def equalization_frontier(G: ArrayLike, deltas: Iterable[float], /, *, eta: float = 1.0, center: bool = False,
                          restarts: int = 0, seed: int = 0, max_memory: int | None = None,
                          verbose: bool | None = None) -> list[EqualizedResult]:
    r"""The trade-off curve ``delta -> (lower, upper)`` of :func:`equalized_descent`.

    The size guard of :func:`equalized_descent` is applied once, before any
    solve.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    deltas : sequence of float in [0, 1]
        Separation floors, as fractions of ``eta``.
    eta : float
        Diameter budget, ``> 0``.
    center : bool
        Project ``G`` onto zero column sums first instead of raising.
    restarts, seed, max_memory, verbose
        As in :func:`equalized_descent`.

    Returns
    -------
    list of EqualizedResult, one per delta

    Examples
    --------
    >>> res = equalization_frontier([[1.0, 0.0], [-1.0, 0.0]], [0.0, 0.5])
    >>> [(r.delta, round(r.lower, 6), r.status) for r in res]
    [(0.0, 1.0, 'optimal'), (0.5, 1.0, 'optimal')]
    """
    X, e = _prepare(G, center)
    V, d = X.shape
    ds = [_v.scalar(x, "deltas[i]", minimum=0.0) for x in deltas]
    for x in ds:
        if x > 1.0:
            raise ValueError(f"deltas must be in [0, 1] (fractions of the diameter); got {x:g}")
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    restarts = _v.integer(restarts, "restarts", minimum=0)
    seed = _v.integer(seed, "seed")
    _memory_limit(max_memory)
    r, Q = _rank_basis(X)
    lim = equidistant_limit(V, d).upper
    if any(0.0 < x <= lim for x in ds):
        _size_guard(V, d, r, max_memory, "equalization_frontier")
    if verbose is None:
        verbose = V + r > 48
    return [_equalized(X, e, x, eta, r, Q, restarts, seed, bool(verbose)) for x in ds]


def max_separation_at_decrease(G: ArrayLike, /, *, eps: float, eta: float = 1.0, center: bool = False,
                               seed: int = 0, iters: int = 12, restarts: int = 0, max_memory: int | None = None,
                               verbose: bool | None = None) -> tuple[EqualizedResult, float]:
    r"""Largest separation floor keeping at least ``(1 - eps)`` of the optimal decrease.

    Bisection on ``delta``: a ``delta`` whose feasible update keeps
    ``-<G, S> >= (1 - eps) eta T(G)`` is certified reachable; a ``delta``
    whose SDP upper bound is below ``(1 - eps) eta T(G)`` (or which is
    infeasible) is certified unreachable.  The size guard of
    :func:`equalized_descent` is applied once, before any solve.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    eps : float
        Allowed loss of decrease, in ``[0, 1]``.
    eta : float
        Diameter budget, ``> 0``.
    center : bool
        Project ``G`` onto zero column sums first instead of raising.
    seed : int
        Seed of the random starts.
    iters : int
        Bisection steps.
    restarts, max_memory, verbose
        As in :func:`equalized_descent`.

    Returns
    -------
    (reachable, unreachable) : (EqualizedResult, float)
        The best certified-reachable result and the smallest ``delta``
        certified unreachable (``inf`` if none was found).

    Examples
    --------
    >>> good, bad = max_separation_at_decrease([[1.0, 0.0], [-1.0, 0.0]], eps=0.1, iters=3)
    >>> good.delta, bad                       # two rows: any floor keeps the whole decrease
    (0.875, inf)
    """
    X, e = _prepare(G, center)
    V, d = X.shape
    eps = _v.scalar(eps, "eps", minimum=0.0)
    if eps > 1.0:
        raise ValueError(f"eps must be in [0, 1]; got {eps:g}")
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    iters = _v.integer(iters, "iters", minimum=1)
    restarts = _v.integer(restarts, "restarts", minimum=0)
    seed = _v.integer(seed, "seed")
    _memory_limit(max_memory)
    r, Q = _rank_basis(X)
    _size_guard(V, d, r, max_memory, "max_separation_at_decrease")
    if verbose is None:
        verbose = V + r > 48
    verbose = bool(verbose)
    good = _equalized(X, e, 0.0, eta, r, Q, restarts, seed, verbose)
    need = (1.0 - eps) * good.upper  # eta times the certified upper value of T: conservative
    lo, hi, bad = 0.0, 1.0, math.inf
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        res = _equalized(X, e, mid, eta, r, Q, restarts, seed, verbose)
        if res.update is not None and res.lower >= need:
            lo, good = mid, res
        else:
            hi = mid
            if res.upper < need:
                bad = min(bad, mid)
    return good, bad


# --------------------------------------------------------------------------- scalable equalizer
@dataclass(frozen=True)
class EqualizationRun:
    """One run of the scalable equalizer :func:`equalize_rows`: its update and how the
    iterations went (a heuristic; :class:`EqualizedResult` is the certified bracket).

    Attributes
    ----------
    update : (V, d) array
        Centred, ``D(update) <= eta`` (exact kernel), same namespace as ``G``.
    separation_ratio : float
        Smallest / largest row distance of ``update`` (exact kernels).
    start_separation_ratio : float
        The same for projected RowNorm, the starting point.
    decrease : float
        ``-<G, update>``.
    diameter : float
        ``D(update)`` (``eta`` up to rounding).
    rownorm_decrease, rownorm_diameter : float
        The same for projected RowNorm at ``eta`` (whose diameter is usually
        below ``eta``).
    relative_efficiency : float
        ``(decrease / diameter) / (rownorm_decrease / rownorm_diameter)``:
        decrease per unit of head norm, relative to RowNorm (``>= keep``).
    iterations : int
    stop : str
        Which stop ended the iterations: ``"keep"`` (the next step would have
        fallen below ``keep``), ``"stagnation"`` (the best separation ratio
        did not improve for ``patience`` iterations), ``"iterations"`` (the
        ``iters`` budget), or ``"degenerate"`` (all rows coincide).
    """

    update: object
    separation_ratio: float
    start_separation_ratio: float
    decrease: float
    diameter: float
    rownorm_decrease: float
    rownorm_diameter: float
    relative_efficiency: float
    iterations: int
    stop: str = "iterations"


def _nearest(S, xp, tile: int):
    """Nearest-neighbour distance and index of every row, in tiles (no V x V array)."""
    V = S.shape[0]
    n = xp.sum(S * S, axis=1)
    dist = xp.full((V,), math.inf, dtype=S.dtype)
    idx = xp.zeros((V,), dtype=xp.int64)
    for a in range(0, V, tile):
        a1 = min(a + tile, V)
        best_d = xp.full((a1 - a,), math.inf, dtype=S.dtype)
        best_i = xp.zeros((a1 - a,), dtype=xp.int64)
        for b in range(0, V, tile):
            b1 = min(b + tile, V)
            G2 = S[a:a1, :] @ xp.matrix_transpose(S[b:b1, :])
            D2 = xp.reshape(n[a:a1], (-1, 1)) + xp.reshape(n[b:b1], (1, -1)) - 2.0 * G2
            D2 = xp.where(D2 > 0, D2, xp.zeros_like(D2))
            if a == b:
                eye = xp.reshape(xp.arange(a1 - a), (-1, 1)) == xp.reshape(xp.arange(b1 - b), (1, -1))
                D2 = xp.where(eye, xp.full_like(D2, math.inf), D2)
            j = xp.argmin(D2, axis=1)
            dj = xp.min(D2, axis=1)
            better = dj < best_d
            best_d = xp.where(better, dj, best_d)
            best_i = xp.where(better, xp.astype(j, xp.int64) + b, best_i)
        dist[a:a1] = xp.sqrt(best_d)
        idx[a:a1] = best_i
    return dist, idx


def _fixed_directions(shape, dtype, xp):
    """Deterministic, row-distinct pseudo-random directions, made in ``xp`` itself
    (no host array is built or copied to a device)."""
    i = xp.reshape(xp.arange(shape[0], dtype=dtype), (-1, 1))
    k = xp.reshape(xp.arange(shape[1], dtype=dtype), (1, -1))
    return xp.sin(i * 12.9898 + k * 78.233 + 1.0)


def _namespace(xp):
    """``xp`` as an array namespace: a module with the array API's functions, or the
    string ``"numpy"``; anything else is a ``ValueError`` naming ``xp``."""
    if isinstance(xp, str):
        if xp.strip().lower() in ("numpy", "np"):
            return np
        raise ValueError(f"xp must be an array namespace (the module itself, e.g. numpy or "
                         f"array_api_strict) or None; got the string {xp!r}")
    need = ("asarray", "sum", "sqrt", "where", "matrix_transpose", "take", "sort", "mean")
    missing = [f for f in need if not hasattr(xp, f)]
    if missing:
        raise ValueError(f"xp must be an array namespace (a module such as numpy or array_api_strict) or None; "
                         f"got {type(xp).__name__} {xp!r:.60}, which lacks {', '.join(missing)}")
    return xp


def _pow2(e: int) -> float:
    """``2^e`` as a float for ``|e| <= 1023``."""
    return math.ldexp(1.0, e)


def _scale2(A, e: int):
    """``A 2^e`` in any namespace, exactly (two steps: 2^e alone may not be a float)."""
    h = e // 2
    return (A * _pow2(h)) * _pow2(e - h)


def equalize_rows(G: ArrayLike, /, *, eta: float = 1.0, keep: float = 0.95, iters: int = 200, step: float = 0.5,
                  tile: int = 2048, xp: Any = None, patience: int = 20,
                  verbose: bool | None = None) -> EqualizationRun:
    r"""Scalable equalizer: raise the smallest row separation of projected
    RowNorm while keeping ``D(S) <= eta`` and at least ``keep`` of its decrease.

    Each iteration finds every row's nearest neighbour (tiled GEMM screening,
    never a ``V x V`` array), pushes the rows whose nearest-neighbour distance
    is below the current median apart from that neighbour by ``step`` times
    the deficit, re-centres, and rescales to diameter ``eta`` with the exact
    kernel.  It stops when the decrease per unit diameter would fall below
    ``keep`` times RowNorm's, when the best separation ratio has not improved
    by more than ``1e-9`` (relative) for ``patience`` iterations, or after ``iters`` iterations; ``stop`` in
    the result says which.  ``G`` and ``eta`` are scaled by exact powers of
    two first (the update does not depend on the scale of ``G`` and is
    proportional to ``eta``), so any finite magnitude gives the same answer.
    Written against the array API (``xp``) so that ``hilbertgeom.gpu`` can
    run it on a device; the separations reported are computed with the exact
    kernels.

    Parameters
    ----------
    G : (V, d) array
        Zero column sums.
    eta : float
        Diameter budget.
    keep : float
        Fraction of projected RowNorm's decrease per unit diameter to keep,
        in ``(0, 1]``.
    iters : int
        Iteration budget.
    step : float
        Push strength in ``(0, 1]``.
    tile : int
        Rows per tile of the nearest-neighbour search.
    xp : array namespace, optional
        Defaults to the namespace of ``G`` (NumPy for array_like input); the
        string ``"numpy"`` is accepted for NumPy.
    patience : int
        Iterations without a better separation ratio (by ``1e-9``,
        relative) before stopping.
    verbose : bool, optional
        One line per iteration on stderr (its separation ratio, the best so
        far, the decrease per unit diameter relative to RowNorm's, the
        time).  Default: on above 2048 rows (at the full MiniLM vocabulary,
        30522 rows of length 384, an iteration takes about 30 s on 2 cores).

    Returns
    -------
    EqualizationRun

    Examples
    --------
    >>> import numpy as np
    >>> G = np.random.default_rng(0).standard_normal((64, 4)); G -= G.mean(axis=0)
    >>> r = equalize_rows(G, iters=20)
    >>> r.separation_ratio >= r.start_separation_ratio, r.relative_efficiency >= 0.95, r.stop
    (True, True, 'iterations')
    """
    from ._pairs import extreme_pair_l2
    from .tension.bounds import _projected_rownorm

    if xp is not None:
        xp = _namespace(xp)
    if xp is None or xp is np:
        X, e = _prepare(G, False)
        xp = np
    else:
        _v.matrix_shape(G, "G", 2)
        amax = float(xp.max(xp.abs(G)))
        if not math.isfinite(amax):
            raise ValueError("G must be finite; found NaN/inf entries")
        e = _pow2_exponent(amax)
        X = _scale2(G, -e)
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    keep = _v.scalar(keep, "keep", minimum=0.0, strict=True)
    if keep > 1.0:
        raise ValueError(f"keep must be in (0, 1]; got {keep:g}")
    step = _v.scalar(step, "step", minimum=0.0, strict=True)
    iters = _v.integer(iters, "iters", minimum=0)
    tile = _v.integer(tile, "tile", minimum=1)
    patience = _v.integer(patience, "patience", minimum=1)
    log = _progress(X.shape[0] > 2048 if verbose is None else bool(verbose), "equalize_rows")
    em, ek = math.frexp(eta)  # run at diameter em in [0.5, 1), scale by 2^ek at the end
    S = _projected_rownorm(X, xp, False, em, 0.0, False)  # projected_rownorm's kernel, in any namespace
    dec0 = -float(xp.sum(X * S))

    def ratio(T):
        lo = extreme_pair_l2(T, mode="min", xp=xp, tile=tile).distance
        hi = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        return (lo / hi) if hi > 0 else 1.0, hi

    r0, D0 = ratio(S)
    eff0 = dec0 / D0 if D0 > 0 else 0.0
    log(f"{X.shape[0]} rows: projected RowNorm's separation ratio {r0:.6g}")
    jitter = None
    best, best_r, best_D, it = S, r0, D0, 0
    stop, since, anchor = "iterations", 0, r0
    for it in range(1, iters + 1):
        dist, idx = _nearest(S, xp, tile)
        med = float(xp.sort(dist)[dist.shape[0] // 2])
        deficit = xp.where(dist < med, med - dist, xp.zeros_like(dist))
        diff = S - xp.take(S, idx, axis=0)
        nd = xp.sqrt(xp.sum(diff * diff, axis=1))
        # duplicates have no direction to separate along: use a fixed pseudo-random one
        if bool(xp.any(nd == 0)):
            if jitter is None:
                jitter = _fixed_directions(S.shape, S.dtype, xp)
            diff = xp.where(xp.reshape(nd > 0, (-1, 1)), diff, jitter)
        nd = xp.sqrt(xp.sum(diff * diff, axis=1))
        unit = diff / xp.reshape(xp.where(nd > 0, nd, xp.ones_like(nd)), (-1, 1))
        T = S + step * 0.5 * xp.reshape(deficit, (-1, 1)) * unit
        T = T - xp.mean(T, axis=0)
        rt, D = ratio(T)
        if D > 0:
            T = T * (em / D)
        Dt = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        while Dt > em:  # rounding: shrink by an ulp until D <= eta holds in float64
            T = T * (1.0 - 2.0**-52)
            Dt = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        if Dt == 0:
            stop = "degenerate"
            break
        eff_t = -float(xp.sum(X * T)) / Dt
        rel = eff_t / eff0 if eff0 > 0 else 1.0  # as relative_efficiency in the result
        if eff_t < keep * eff0:
            stop = "keep"
            log(f"iteration {it}: efficiency {rel:.6f} would fall below keep = {keep:g}; stop")
            break
        S = T
        if rt > best_r:
            best, best_r, best_D = T, rt, Dt
        log(f"iteration {it}/{iters}: separation ratio {rt:.6g} (best {best_r:.6g}), efficiency {rel:.6f}")
        if rt > anchor * (1.0 + 1e-9):  # a real improvement on the ratio `patience` steps ago
            anchor, since = rt, 0
        else:
            since += 1
            if since >= patience:
                stop = "stagnation"
                log(f"no gain in the separation ratio for {patience} iterations; stop")
                break
    dec = -float(xp.sum(X * best))
    eff = (dec / best_D) / eff0 if best_D > 0 and eff0 > 0 else 1.0
    return EqualizationRun(update=_scale2(best, ek), separation_ratio=best_r, start_separation_ratio=r0,
                           decrease=_ldexp(dec, e + ek), diameter=_ldexp(best_D, ek),
                           rownorm_decrease=_ldexp(dec0, e + ek), rownorm_diameter=_ldexp(D0, ek),
                           relative_efficiency=eff, iterations=it, stop=stop)
