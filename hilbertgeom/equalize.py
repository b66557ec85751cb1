"""Equalization (version 1 of the paper): how equal can the row distances be?

The first version of arXiv 2608.22253 proposed to make all pairwise row
distances of the update as equal as geometry allows: maximise the smallest
separation under the diameter bound.  Exact equidistance is impossible once
``n > d + 1`` (I19); :func:`equidistant_limit` says how close one can get
(I20) and :func:`max_min_separation` finds configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _validate as _v
from .rows import closest_pair, row_diameter

__all__ = [
    "EqualizedResult",
    "EqualizerResult",
    "EquidistantLimit",
    "SeparationResult",
    "equalization_frontier",
    "equalized_descent",
    "equalize_rows",
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


def equidistant_limit(n, d, /):
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
    pack = _packing_bound(n, d)
    if pack < jung:
        return EquidistantLimit(False, pack, "isodiametric packing")
    return EquidistantLimit(False, jung, "Jung + sum of squared distances (I20)")


def regular_simplex(n, d, /):
    r"""``n <= d + 1`` pairwise equidistant points of ``R^d`` with unit distance.

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


def max_min_separation(n, d, /, *, restarts=20, seed=0):
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
    restarts : int
        Local searches (random starts, plus a regular polygon in the plane).
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
    restarts = _v.integer(restarts, "restarts", minimum=1)
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
        Z *= (rng.random((n, 1)) ** (1.0 / d)) / np.linalg.norm(Z, axis=1, keepdims=True)
        starts.append(Z)
    best = None
    for x0 in starts:
        out = _local_search(x0, n, d)
        if out is not None and (best is None or out[1] > best[1]):
            best = out
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


def _shor_sdp(G: np.ndarray, delta: float, eta: float):
    """Shor relaxation: ``[[I, S^T], [S, X]] >= 0``, ``delta^2 eta^2 <= X_ii + X_jj - 2 X_ij <= eta^2``."""
    import warnings

    import cvxpy as cp

    from .exceptions import SolverError

    V, d = G.shape
    iu, ju = np.triu_indices(V, 1)
    S = cp.Variable((V, d))
    X = cp.Variable((V, V), symmetric=True)
    M = cp.bmat([[np.eye(d), S.T], [S, X]])
    dist = cp.diag(X)[iu] + cp.diag(X)[ju] - 2 * X[iu, ju]
    cons = [M >> 0, cp.sum(S, axis=0) == 0, X @ np.ones(V) == 0, dist <= eta**2]
    if delta > 0:
        cons.append(dist >= (delta * eta) ** 2)
    prob = cp.Problem(cp.Maximize(-cp.sum(cp.multiply(G, S))), cons)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        try:
            prob.solve(solver=cp.CLARABEL)
        except cp.error.SolverError as exc:
            raise SolverError(f"Shor SDP: cvxpy/CLARABEL failed ({exc}); try a smaller V", status="solver_error") from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"Shor SDP: cvxpy/CLARABEL returned status {prob.status!r}", status=str(prob.status))
    # the interior-point value is accurate to its gap tolerance; widen the bound by it
    value = float(prob.value)
    return value + 1e-7 * abs(value), np.asarray(S.value)


def _repair(G: np.ndarray, S0: np.ndarray, delta: float, eta: float):
    """Local search (SLSQP) for a feasible update near ``S0``; exact re-checks."""
    from scipy.optimize import minimize

    V, d = G.shape
    target = delta * (1 + 1e-6)
    sq, jac_sq = _pair_squares(V, d)

    cons = [
        {"type": "ineq", "fun": lambda x: eta**2 - sq(x), "jac": lambda x: -jac_sq(x)},
        {"type": "eq", "fun": lambda x: x.reshape(V, d).sum(axis=0),
         "jac": lambda x: np.tile(np.eye(d), (1, V))},
    ]
    if delta > 0:
        cons.append({"type": "ineq", "fun": lambda x: sq(x) - (target * eta) ** 2, "jac": jac_sq})
    res = minimize(lambda x: float(np.sum(G.ravel() * x)), S0.ravel(), jac=lambda x: G.ravel(),
                   method="SLSQP", constraints=cons, options={"maxiter": 500, "ftol": 1e-14})
    S = res.x.reshape(V, d)
    S = S - S.mean(axis=0)
    D = row_diameter(S)
    if D > eta:
        S = S * (eta / D)
    sep = closest_pair(S).distance
    if row_diameter(S) <= eta and sep >= delta * eta:
        return S, sep
    return None


def _fit_diameter(S: np.ndarray, eta: float) -> np.ndarray:
    """Centre ``S`` and shrink it until ``D(S) <= eta`` holds in float64 (exact kernel)."""
    S = S - S.mean(axis=0)
    for _ in range(8):
        D = row_diameter(S)
        if D <= eta:
            return S
        S = S * (eta / D) * (1.0 - 2.0**-52)
    return S


def equalized_descent(G, /, *, delta, eta=1.0, center=False, restarts=4, seed=0):
    r"""Gradient-aligned equalization (identity I21).

    .. math::

        \max_S\ -\langle G, S\rangle \quad\text{s.t.}\quad D(S) \le \eta,\quad
        \min_{i<j}\|s_i - s_j\| \ge \delta\eta,\quad 1^\top S = 0 .

    The problem is non-convex for ``delta > 0``.  ``upper`` is the value of
    the Shor semidefinite relaxation (lift ``X ~ S S^T`` with
    ``[[I, S^T], [S, X]] >= 0`` and ``X 1 = 0``; the diameter constraint stays
    exact, only the separation floor is relaxed), ``lower`` the decrease of a
    feasible update found by local search from the relaxation's ``S`` and from
    scaled RowNorm and random starts, both re-checked with the exact kernels.
    At ``delta = 0`` the problem is the steepest descent of I10 and is solved
    exactly by :func:`~hilbertgeom.min_tension`.  CPU only (cvxpy).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``); small ``V``
        (the relaxation has a ``(V + d)``-square PSD block).
    delta : float
        Separation floor as a fraction of ``eta``, in ``[0, 1]``.
    eta : float
        Diameter budget, ``> 0``.
    restarts : int
        Random starts of the local search (besides the relaxation and RowNorm).
    seed : int

    Returns
    -------
    EqualizedResult

    Examples
    --------
    >>> G = [[1.0, 0.0], [-1.0, 0.0]]
    >>> r = equalized_descent(G, delta=0.0)
    >>> round(r.lower, 9), round(r.upper, 9), r.status
    (1.0, 1.0, 'optimal')
    """
    from .tension import min_tension, projected_rownorm

    X, _ = _v.zero_sum_matrix(G, center)
    V, d = X.shape
    delta = _v.scalar(delta, "delta", minimum=0.0)
    if delta > 1.0:
        raise ValueError(f"delta must be in [0, 1] (a fraction of the diameter); got {delta:g}")
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    restarts = _v.integer(restarts, "restarts", minimum=0)
    if delta == 0.0:
        ten = min_tension(X)
        S = _fit_diameter(-eta * ten.potential, eta)
        return EqualizedResult(lower=-float(np.sum(X * S)), upper=eta * ten.flow.cost, update=S,
                               separation=closest_pair(S).distance if V > 1 else 0.0,
                               gap=max(eta * ten.flow.cost + float(np.sum(X * S)), 0.0), status=ten.status,
                               delta=0.0, eta=eta, upper_source="min_tension flow certificate (I10)")
    lim = equidistant_limit(V, d)
    if delta > lim.upper:
        return EqualizedResult(lower=-math.inf, upper=-math.inf, update=None, separation=0.0, gap=0.0,
                               status="infeasible", delta=delta, eta=eta,
                               upper_source=f"delta > {lim.upper:.6g}: {lim.source}")
    # the problem is homogeneous: solve at unit mean row norm and eta = 1, then scale back
    gscale = float(np.linalg.norm(X, axis=1).mean())
    if gscale == 0.0:
        gscale = 1.0
    Xs = X / gscale
    upper_s, S_sdp = _shor_sdp(Xs, delta, 1.0)
    upper = upper_s * gscale * eta
    rng = np.random.default_rng(seed)
    starts = [S_sdp, projected_rownorm(Xs, eta=1.0)]
    for _ in range(restarts):
        R = rng.standard_normal((V, d))
        starts.append((R - R.mean(axis=0)) / max(row_diameter(R), 1e-300))
    best = None
    for S0 in starts:
        out = _repair(Xs, S0, delta, 1.0)
        if out is not None:
            S = _fit_diameter(eta * out[0], eta)
            sep = closest_pair(S).distance
            if sep < delta * eta:
                continue
            dec = -float(np.sum(X * S))
            if best is None or dec > best[0]:
                best = (dec, S, sep)
    if best is None:
        return EqualizedResult(lower=-math.inf, upper=upper, update=None, separation=0.0, gap=math.inf,
                               status="no feasible update found", delta=delta, eta=eta,
                               upper_source="Shor SDP relaxation (I21)")
    dec, S, sep = best
    gap = max(upper - dec, 0.0)
    status = "optimal" if gap <= 1e-6 * abs(upper) else "feasible"
    return EqualizedResult(lower=dec, upper=upper, update=S, separation=sep, gap=gap, status=status,
                           delta=delta, eta=eta, upper_source="Shor SDP relaxation (I21)")


def equalization_frontier(G, deltas, /, *, eta=1.0, center=False, seed=0):
    r"""The trade-off curve ``delta -> (lower, upper)`` of :func:`equalized_descent`.

    Parameters
    ----------
    G : (V, d) array_like
    deltas : sequence of float in [0, 1]
    eta : float

    Returns
    -------
    list of EqualizedResult, one per delta
    """
    ds = [_v.scalar(x, "deltas[i]", minimum=0.0) for x in deltas]
    return [equalized_descent(G, delta=x, eta=eta, center=center, seed=seed) for x in ds]


def max_separation_at_decrease(G, /, *, eps, eta=1.0, center=False, seed=0, iters=12):
    r"""Largest separation floor keeping at least ``(1 - eps)`` of the optimal decrease.

    Bisection on ``delta``: a ``delta`` whose feasible update keeps
    ``-<G, S> >= (1 - eps) eta T(G)`` is certified reachable; a ``delta``
    whose SDP upper bound is below ``(1 - eps) eta T(G)`` (or which is
    infeasible) is certified unreachable.

    Parameters
    ----------
    G : (V, d) array_like
    eps : float
        Allowed loss of decrease, in ``[0, 1]``.
    eta : float
    iters : int
        Bisection steps.

    Returns
    -------
    (reachable, unreachable) : (EqualizedResult, float)
        The best certified-reachable result and the smallest ``delta``
        certified unreachable (``inf`` if none was found).
    """
    from .tension import min_tension

    X, _ = _v.zero_sum_matrix(G, center)
    eps = _v.scalar(eps, "eps", minimum=0.0)
    if eps > 1.0:
        raise ValueError(f"eps must be in [0, 1]; got {eps:g}")
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    need = (1.0 - eps) * eta * min_tension(X).flow.cost  # certified upper value of T: conservative
    good = equalized_descent(X, delta=0.0, eta=eta)
    lo, hi, bad = 0.0, 1.0, math.inf
    for _ in range(_v.integer(iters, "iters", minimum=1)):
        mid = 0.5 * (lo + hi)
        r = equalized_descent(X, delta=mid, eta=eta, seed=seed)
        if r.update is not None and r.lower >= need:
            lo, good = mid, r
        else:
            hi = mid
            if r.upper < need:
                bad = min(bad, mid)
    return good, bad


# --------------------------------------------------------------------------- scalable equalizer
@dataclass(frozen=True)
class EqualizerResult:
    """Output of :func:`equalize_rows`.

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
            D2 = xp.reshape(n[a:a1], (-1, 1)) + xp.reshape(n[b:b1], (1, -1)) - 2.0 * (S[a:a1, :] @ xp.matrix_transpose(S[b:b1, :]))
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


def equalize_rows(G, /, *, eta=1.0, keep=0.95, iters=200, step=0.5, tile=2048, xp=None):
    r"""Scalable equalizer: raise the smallest row separation of projected
    RowNorm while keeping ``D(S) <= eta`` and at least ``keep`` of its decrease.

    Each iteration finds every row's nearest neighbour (tiled GEMM screening,
    never a ``V x V`` array), pushes the rows whose nearest-neighbour distance
    is below the current median apart from that neighbour by ``step`` times
    the deficit, re-centres, and rescales to diameter ``eta`` with the exact
    kernel.  It stops when the decrease per unit diameter would fall below
    ``keep`` times RowNorm's, or after ``iters`` iterations.  Written against the array API
    (``xp``) so that ``hilbertgeom.gpu`` can run it on a device; the
    separations reported are computed with the exact kernels.

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
    step : float
        Push strength in ``(0, 1]``.
    tile : int
    xp : array namespace, optional
        Defaults to the namespace of ``G`` (NumPy for array_like input).

    Returns
    -------
    EqualizerResult

    Examples
    --------
    >>> import numpy as np
    >>> G = np.random.default_rng(0).standard_normal((64, 4)); G -= G.mean(axis=0)
    >>> r = equalize_rows(G, iters=20)
    >>> r.separation_ratio >= r.start_separation_ratio, r.relative_efficiency >= 0.95
    (True, True)
    """
    from ._pairs import extreme_pair_l2
    from .tension import projected_rownorm

    if xp is None:
        X, _ = _v.zero_sum_matrix(G, False)
        xp = np
    else:
        X = G
    eta = _v.scalar(eta, "eta", minimum=0.0, strict=True)
    keep = _v.scalar(keep, "keep", minimum=0.0, strict=True)
    if keep > 1.0:
        raise ValueError(f"keep must be in (0, 1]; got {keep:g}")
    step = _v.scalar(step, "step", minimum=0.0, strict=True)
    iters = _v.integer(iters, "iters", minimum=0)
    tile = _v.integer(tile, "tile", minimum=1)
    if xp is np:
        S = projected_rownorm(X, eta=eta)
    else:  # the same formula in the array namespace
        n = xp.sqrt(xp.sum(X * X, axis=1))
        N = X / xp.reshape(xp.where(n > 0, n, xp.ones_like(n)), (-1, 1))
        S = -(eta / 2.0) * (N - xp.mean(N, axis=0))
    dec0 = -float(xp.sum(X * S))

    def ratio(T):
        lo = extreme_pair_l2(T, mode="min", xp=xp, tile=tile).distance
        hi = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        return (lo / hi) if hi > 0 else 1.0, hi

    r0, D0 = ratio(S)
    eff0 = dec0 / D0 if D0 > 0 else 0.0
    jitter = None
    best, best_r, best_D, it = S, r0, D0, 0
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
            T = T * (eta / D)
        Dt = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        while Dt > eta:  # rounding: shrink by an ulp until D <= eta holds in float64
            T = T * (1.0 - 2.0**-52)
            Dt = extreme_pair_l2(T, mode="max", xp=xp, tile=tile).distance
        if Dt == 0 or -float(xp.sum(X * T)) / Dt < keep * eff0:
            break
        S = T
        if rt > best_r:
            best, best_r, best_D = T, rt, Dt
    dec = -float(xp.sum(X * best))
    eff = (dec / best_D) / eff0 if best_D > 0 and eff0 > 0 else 1.0
    return EqualizerResult(update=best, separation_ratio=best_r, start_separation_ratio=r0, decrease=dec,
                           diameter=best_D, rownorm_decrease=dec0, rownorm_diameter=D0,
                           relative_efficiency=eff, iterations=it)
