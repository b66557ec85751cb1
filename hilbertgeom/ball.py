"""Minimum enclosing ball of the rows, and Jung's constant (identity I7).

The covering radius ``rad(S)`` is the radius of the smallest Euclidean ball
containing every row.  It brackets the diameter:
``D(S) / 2 <= rad(S) <= J_k D(S)`` with ``J_k = sqrt(k / (2 (k + 1)))`` when the
rows span an affine space of dimension ``k`` (Jung's theorem, sharp for the
regular simplex).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from . import _fp
from . import _validate as _v
from ._fp import scale_to_unit
from .exceptions import (
    STATUS_DEGENERATE,
    STATUS_ITERATION_LIMIT,
    STATUS_OPTIMAL,
    SolverError,
)
from .tolerances import tolerance

STATUS_OPTIMAL_DUAL_QP = "optimal (dual QP after a degenerate walk)"

__all__ = ["EnclosingBall", "covering_radius", "jung_radius", "minimum_enclosing_ball"]


@dataclass(frozen=True)
class EnclosingBall:
    """The smallest ball enclosing a point cloud, with its certificate.

    Attributes
    ----------
    radius : float
        ``max_i ||s_i - center||`` computed in float64 in mean-centred
        coordinates: every row lies in the ball of this radius around
        ``center`` (to the rounding of ``center`` itself).
    center : (d,) ndarray
        The centre, a convex combination of the support rows.
    support : (m,) ndarray of int
        Rows on the boundary that carry the centre (``m <= d + 1``).
    weights : (m,) ndarray
        Nonnegative barycentric weights, summing to one:
        ``center ~ sum_k weights[k] * S[support[k]]``.
    lower : float
        A certified lower bound on the minimum radius,
        ``sqrt(sum_k w_k ||s_k - c_w||^2)`` with ``c_w = sum_k w_k s_k`` (for any
        centre ``c``, ``max_i ||s_i - c||^2 >= sum_k w_k ||s_k - c||^2 >= lower^2``).
    gap : float
        ``radius - lower``: the true minimum radius lies in ``[lower, radius]``.
    status : str
        ``"optimal"`` when the active-set walk ended with the centre in the
        convex hull of its support; ``"optimal (dual QP after a degenerate
        walk)"`` when cospherical points made the walk cycle and the dual
        quadratic program finished the job (its weights are then polished on
        the support, where the centre is the support's circumcentre, so the
        certificate is again accurate to rounding).
    iterations : int
    """

    radius: float
    center: np.ndarray
    support: np.ndarray
    weights: np.ndarray
    lower: float
    gap: float
    status: str
    iterations: int


def jung_radius(k: int, /) -> float:
    r"""Jung's constant ``J_k = sqrt(k / (2 (k + 1)))``.

    Any set of diameter ``D`` in a ``k``-dimensional Euclidean space lies in a
    ball of radius ``J_k D``; the regular ``k``-simplex attains it.

    Parameters
    ----------
    k : int
        Dimension, ``>= 0`` (``J_0 = 0``: a single point).

    References
    ----------
    H. Jung, "Ueber die kleinste Kugel, die eine raeumliche Figur einschliesst",
    J. reine angew. Math. 123 (1901).  Identity I7.

    Examples
    --------
    >>> jung_radius(1)
    0.5
    >>> round(jung_radius(2), 15)   # 1 / sqrt(3)
    0.577350269189626
    """
    kk = _v.integer(k, "k", minimum=0)
    # int / int is correctly rounded for integers of any size (no float(k) overflow)
    return math.sqrt((kk / (kk + 1)) / 2.0)


def _circumcenter(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre of the sphere through the rows of ``Q`` within their affine hull,
    and its barycentric coordinates."""
    m = Q.shape[0]
    if m == 1:
        return Q[0].copy(), np.ones(1)
    q0 = Q[0]
    A = Q[1:] - q0
    G = A @ A.T
    alpha = np.linalg.lstsq(G, 0.5 * np.diag(G), rcond=None)[0]
    c = q0 + A.T @ alpha
    lam = np.concatenate([[1.0 - alpha.sum()], alpha])
    return c, lam


def minimum_enclosing_ball(S: ArrayLike, /, *, max_iter: int | None = None) -> EnclosingBall:
    r"""The smallest Euclidean ball containing the rows of ``S``, certified.

    An active-set walk (Fischer, Gaertner and Kutz, "Fast smallest-enclosing-ball
    computation in high dimensions", ESA 2003): keep a ball through an
    affinely independent support set that contains every row, move its centre
    towards the circumcentre of the support, add a row when it reaches the
    boundary, drop a support row whose barycentric weight turns negative, and
    stop when the centre lies in the convex hull of the support (the KKT
    conditions).  CPU only (NumPy).

    Parameters
    ----------
    S : (V, d) array_like
        Finite real rows, ``V >= 1``.
    max_iter : int, optional
        Iteration cap (default ``10 (V + d) + 100``).

    Returns
    -------
    EnclosingBall
        Radius, centre, support, weights and the certificate ``lower``/``gap``.

    Raises
    ------
    SolverError
        If the walk does not terminate within ``max_iter`` steps.
    ValueError
        If the radius or the centre exceeds the float64 range.

    Notes
    -----
    The walk and the certificate run on the mean-centred rows scaled by a
    power of two to unit size (and, where the column sums could overflow or
    the rows are below ``2^-400``, the rows are scaled before centring):
    ``rad(2^k S) = 2^k rad(S)`` bit for bit, with the same support and
    weights, from subnormal rows to rows near ``1.8e308``.

    Examples
    --------
    >>> b = minimum_enclosing_ball([[0.0, 0.0], [2.0, 0.0], [1.0, 0.1]])
    >>> round(b.radius, 12), b.center.round(12).tolist()
    (1.0, [1.0, 0.0])
    """
    X = _v.matrix(S, "S")
    V, d = X.shape
    if max_iter is None:
        max_iter = 10 * (V + d) + 100
    max_iter = _v.integer(max_iter, "max_iter", minimum=1)
    # Rows whose column sums could overflow, or so small that squared distances
    # underflow, are brought to unit size first (a power of two: exact).
    top = _fp.max_abs(X)
    s = 0 if top == 0.0 or 2.0**-_fp.SAFE <= top < 2.0**1018 / V else -math.frexp(top)[1]
    X = _fp.ldexp(X, s)
    mean = X.mean(axis=0)
    Y = X - mean
    amax = _fp.max_abs(Y)
    if amax == 0.0:
        return _certify(Y, 0, mean, s, np.array([0]), np.ones(1), 0, STATUS_OPTIMAL)
    Z, k1 = scale_to_unit(Y, amax)  # exact: a power of two
    del Y
    c = Z[0].copy()
    T = [int(np.argmax(((Z - c) ** 2).sum(axis=1)))]
    it = 0
    status = STATUS_ITERATION_LIMIT
    seen: set[tuple[int, ...]] = set()
    while it < max_iter:
        it += 1
        if len(T) > d + 1:  # rounding broke affine independence: cospherical degeneracy
            status = STATUS_DEGENERATE
            break
        Q = Z[T]
        caff, lam = _circumcenter(Q)
        v = caff - c
        r2 = float(((Q[0] - c) ** 2).sum())
        if float(v @ v) <= (1e-13) ** 2 * max(r2, 1e-300):
            if lam.min() >= -1e-12:
                status = STATUS_OPTIMAL
                c = caff
                break
            key = tuple(sorted(T))
            if key in seen:  # the walk cycles (degenerate, cospherical points)
                status = STATUS_DEGENERATE
                break
            seen.add(key)
            del T[int(np.argmin(lam))]
            continue
        # Walk from c towards caff until a row reaches the boundary.
        dist2 = ((Z - c) ** 2).sum(axis=1)
        vq = float(v @ (Q[0] - c))
        denom = 2.0 * (vq - (Z - c) @ v)
        numer = np.maximum(r2 - dist2, 0.0)
        scale = math.sqrt(float(v @ v)) * math.sqrt(max(r2, 1e-300))
        ok = denom > 1e-12 * scale
        ok[T] = False
        t = np.full(V, np.inf)
        t[ok] = numer[ok] / denom[ok]
        k = int(np.argmin(t))
        if t[k] < 1.0:
            c = c + t[k] * v
            T.append(k)
        else:
            c = caff
    if status == STATUS_DEGENERATE:
        T, lam, extra = _dual_column_generation(Z, T)
        return _certify(Z, k1, mean, s, np.asarray(T), lam, it + extra, STATUS_OPTIMAL_DUAL_QP)
    if status != STATUS_OPTIMAL:
        raise SolverError(
            f"minimum_enclosing_ball: the active-set walk did not terminate in {max_iter} "
            f"iterations (status {STATUS_ITERATION_LIMIT!r}); raise max_iter",
            status=STATUS_ITERATION_LIMIT,
        )
    _, lam = _circumcenter(Z[T])
    return _certify(Z, k1, mean, s, np.asarray(T), lam, it, status)


def _dual_column_generation(Z: np.ndarray, T0: list[int], rounds: int = 50):
    """Fallback for degenerate (cospherical) inputs: solve the dual QP
    ``min_w ||sum w_i z_i||^2 - sum w_i ||z_i||^2`` over the simplex on a small
    candidate set (SLSQP), add the farthest row while one lies outside, repeat."""
    from scipy.optimize import minimize, nnls

    cand = sorted(set(T0))
    lam = np.full(len(cand), 1.0 / len(cand))
    for r in range(1, rounds + 1):  # noqa: B007 - the number of rounds taken is returned
        P = Z[cand]
        b = (P * P).sum(axis=1)
        K = P @ P.T
        res = minimize(lambda w, K=K, b=b: float(w @ K @ w - b @ w), lam, jac=lambda w, K=K, b=b: 2 * K @ w - b,
                       method="SLSQP",
                       bounds=[(0.0, 1.0)] * len(cand),
                       constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones_like(w)}],
                       options={"maxiter": 500, "ftol": 1e-16})
        lam = np.clip(res.x, 0.0, None)
        lam /= lam.sum()
        c = lam @ P
        dist2 = ((Z - c) ** 2).sum(axis=1)
        r2 = float((lam * ((P - c) ** 2).sum(axis=1)).sum())
        far = int(np.argmax(dist2))
        if dist2[far] <= r2 * (1 + 1e-12) or far in cand:
            break
        cand.append(far)
        lam = np.append(lam, 0.0)
    keep = lam > 1e-14
    T = [cand[i] for i in np.flatnonzero(keep)]
    w = lam[keep] / lam[keep].sum()
    # polish on the support: the KKT system 2 K w - b + mu 1 = 0, 1^T w = 1 (least squares)
    P = Z[T]
    K = P @ P.T
    m = len(T)
    A = np.zeros((m + 1, m + 1))
    A[:m, :m] = 2 * K
    A[:m, m] = 1.0
    A[m, :m] = 1.0
    rhs = np.concatenate([(P * P).sum(axis=1), [1.0]])
    sol = np.linalg.lstsq(A, rhs, rcond=None)[0][:m]

    def radius(ww):
        return math.sqrt(float(((Z - ww @ P) ** 2).sum(axis=1).max()))

    def gap(ww):
        return radius(ww) - math.sqrt(float(ww @ ((P - ww @ P) ** 2).sum(axis=1)))

    if sol.min() >= 0 and gap(sol / sol.sum()) <= gap(w):
        w = sol / sol.sum()
    # More than d + 1 cospherical support rows make that KKT system singular, and its
    # least-squares weights may be negative.  The centre is still unique (the
    # circumcentre of the support within its affine hull), and basic nonnegative weights
    # that carry it (at most d + 1 rows) solve a nonnegative least-squares problem, the
    # row of ones weighted to hold sum w = 1.  They are taken when their certificate is as
    # tight to rounding (the policy's ``exact`` tolerance).
    c_aff, _ = _circumcenter(P)
    wt = 1.0 + float(np.abs(P).max())
    nn, _ = nnls(np.vstack([P.T, np.full((1, m), wt)]), np.concatenate([c_aff, [wt]]))
    if nn.sum() > 0 and gap(nn / nn.sum()) <= max(gap(w), tolerance("exact").rtol * radius(w)):
        w = nn / nn.sum()
    on = w > 0  # the support: rows that carry the centre
    return [t for t, o in zip(T, on, strict=True) if o], w[on] / w[on].sum(), r


def _certify(Z: np.ndarray, k1: int, mean: np.ndarray, s: int, T: np.ndarray, lam: np.ndarray,
             it: int, status: str) -> EnclosingBall:
    """Certificate in the scaled, mean-centred coordinates ``Z`` where the rows are
    ``(Z 2^-k1 + mean) 2^-s`` (no cancellation against a large common offset, no
    underflow of squared distances); radius and centre are mapped back."""
    w = np.clip(lam, 0.0, None)
    w = w / w.sum()
    order = np.argsort(T)
    T, w = T[order], w[order]
    P = Z[T]
    cz = w @ P
    rz = float(np.sqrt(((Z - cz) ** 2).sum(axis=1).max()))
    lz = min(float(np.sqrt(w @ ((P - cz) ** 2).sum(axis=1))), rz)
    what, names = "the covering radius of S", "S"
    radius = _fp.product(rz, shift=-(k1 + s), what=what, names=names)
    lower = _fp.product(lz, shift=-(k1 + s), what=what, names=names)
    with np.errstate(over="ignore"):
        center = _fp.ldexp(_fp.ldexp(cz, -k1) + mean, -s)
    if not np.isfinite(center).all():
        raise ValueError("the centre of the enclosing ball of S exceeds the float64 range; rescale S")
    return EnclosingBall(radius=radius, center=center, support=T, weights=w, lower=lower,
                         gap=radius - lower, status=status, iterations=it)


def covering_radius(S: ArrayLike, /) -> tuple[float, np.ndarray]:
    r"""Covering radius ``rad(S)`` and the centre of the minimum enclosing ball.

    See :func:`minimum_enclosing_ball` for the method and the certificate.

    Parameters
    ----------
    S : (V, d) array_like
        Finite real rows, ``V >= 1`` (a ``numpy.matrix`` is read as a 2-D array).

    Returns
    -------
    (radius, center) : (float, (d,) ndarray)

    Examples
    --------
    >>> r, c = covering_radius([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [4.0, 4.0]])
    >>> round(r, 12), c.round(12).tolist()
    (2.828427124746, [2.0, 2.0])
    """
    b = minimum_enclosing_ball(S)
    return b.radius, b.center
