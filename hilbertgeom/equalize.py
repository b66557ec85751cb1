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

__all__ = ["EquidistantLimit", "SeparationResult", "equidistant_limit", "max_min_separation", "regular_simplex"]


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
        The bound: "regular simplex (I19)", "equal spacing (d = 1)" or
        "Jung + sum of squared distances (I20)".
    """

    possible: bool
    upper: float
    source: str


def _check_nd(n, d):
    n = _v.integer(n, "n", minimum=2)
    d = _v.integer(d, "d", minimum=1)
    return n, d


def equidistant_limit(n, d, /):
    r"""Can ``n`` points in ``R^d`` be pairwise equidistant?  If not, how close?

    At most ``d + 1`` points of ``R^d`` are pairwise equidistant (I19).  For
    ``n > d + 1`` the best ratio ``delta*(n, d)`` of smallest to largest
    distance satisfies (I20), with ``d' = min(d, n - 1)``,

    .. math:: \delta^*(n, d)^2 \le \frac{n\, d'}{(n - 1)(d' + 1)},

    and on a line (``d = 1``) exactly ``delta* = 1 / (n - 1)``.

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
    >>> round(equidistant_limit(5, 2).upper, 12)       # sqrt(5 * 2 / (4 * 3))
    0.912870929175
    """
    n, d = _check_nd(n, d)
    if n <= d + 1:
        return EquidistantLimit(True, 1.0, "regular simplex (I19)")
    if d == 1:
        return EquidistantLimit(False, 1.0 / (n - 1), "equal spacing (d = 1)")
    dp = min(d, n - 1)
    return EquidistantLimit(False, math.sqrt(n * dp / ((n - 1) * (dp + 1))),
                            "Jung + sum of squared distances (I20)")


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


def _local_search(x0: np.ndarray, n: int, d: int):
    """Maximise ``t`` s.t. ``t <= ||x_i - x_j||^2 <= 1`` from ``x0`` (SLSQP)."""
    from scipy.optimize import minimize

    iu, ju = np.triu_indices(n, 1)
    m = len(iu)

    def sq(z):
        X = z[:-1].reshape(n, d)
        D = X[iu] - X[ju]
        return D, np.einsum("ij,ij->i", D, D)

    def jac_sq(z):
        D, _ = sq(z)
        Jm = np.zeros((m, n * d + 1))
        rows = np.arange(m)
        for c in range(d):
            Jm[rows, iu * d + c] = 2 * D[:, c]
            Jm[rows, ju * d + c] = -2 * D[:, c]
        return Jm

    def cons_low(z):
        return sq(z)[1] - z[-1]

    def jac_low(z):
        Jm = jac_sq(z)
        Jm[:, -1] = -1.0
        return Jm

    def cons_high(z):
        return 1.0 - sq(z)[1]

    def jac_high(z):
        return -jac_sq(z)

    X0 = x0 / max(row_diameter(x0), 1e-300)
    t0 = float(sq(np.r_[X0.ravel(), 0.0])[1].min())
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
    ``t <= ||x_i - x_j||^2 <= 1``) gives ``lower`` and the bound of I20 gives
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
