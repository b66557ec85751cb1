"""Steepest descent under the row diameter: the minimum-tension problem (I10--I17).

.. math::

    \\min_{S}\\ \\langle G, S\\rangle \\ \\text{s.t.}\\ D(S) \\le \\eta,\\ 1^\\top S = 0
    \\quad = \\quad -\\eta\\, T(G),

    T(G) = \\max_{1^\\top\\Phi = 0,\\ D(\\Phi) \\le 1} \\langle G, \\Phi\\rangle
         = \\min_{y \\text{ antisymmetric},\\ \\sum_{j} y_{ij} = g_i}\\ \\sum_{i<j} \\|y_{ij}\\|_2 .

Every solve returns a *certificate*: a centred potential ``Phi`` with
``D(Phi) <= 1`` (checked with the exact :func:`~hilbertgeom.row_diameter`),
whose value ``<G, Phi>`` is a lower bound on ``T(G)``, and a flow that balances
``G`` exactly, whose cost is an upper bound.  ``gap`` is their difference.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import _validate as _v
from .ball import jung_radius
from .exceptions import SolverError
from .rows import row_diameter

__all__ = [
    "Flow",
    "TensionBounds",
    "TensionResult",
    "min_tension",
    "projected_rownorm",
    "rownorm",
    "steepest_descent",
    "tension_bounds",
]

_U64 = float(np.finfo(np.float64).eps) / 2.0


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Flow:
    """A flow on the complete graph of tokens that balances ``G`` exactly.

    The explicit part carries ``vectors[e]`` from ``pairs[e, 0]`` to
    ``pairs[e, 1]`` (``y_ij`` with ``i < j``, ``y_ji = -y_ij``).  What it leaves
    unbalanced, ``residual = G - div(y)`` (zero column sums, tiny at
    convergence), is carried by the balanced flow ``(r_i - r_j) / V`` on every
    pair (identity I11), whose cost is at most ``(V - 1)/V * sum_i ||r_i||``.

    Attributes
    ----------
    pairs : (m, 2) int ndarray
    vectors : (m, d) float64 ndarray
    residual : (V, d) float64 ndarray
    cost : float
        ``sum_e ||vectors[e]|| + (V-1)/V sum_i ||residual_i||``, rounded up:
        an upper bound on ``T(G)``.
    """

    pairs: np.ndarray
    vectors: np.ndarray
    residual: np.ndarray
    cost: float

    def divergence(self, V: int) -> np.ndarray:
        """``sum_j y_ij`` of the explicit part, a ``(V, d)`` array."""
        return _divergence(self.pairs[:, 0], self.pairs[:, 1], self.vectors, V)


@dataclass(frozen=True)
class TensionResult:
    """Certified solution of the minimum-tension problem.

    Attributes
    ----------
    value : float
        ``<G, potential>``: the certified lower bound, reported as ``T(G)``.
    potential : (V, d) ndarray
        Centred, ``D(potential) <= 1`` (to rounding), ``<G, potential> = value``.
    flow : Flow
        Balances ``G`` exactly; ``flow.cost`` is the certified upper bound.
    gap : float
        ``flow.cost - value >= 0``; ``T(G)`` lies in ``[value, value + gap]``.
    status : str
        ``"optimal"`` (relative gap within ``tol``; ``max(tol, 1e-6)`` for the
        cvxpy reference), ``"inaccurate"`` (reference only), or ``"zero"``
        for ``G = 0``.
    method : str
        ``"alm"``, ``"cvxpy-potential"`` or ``"cvxpy-flow"``.
    centered : bool
        True when ``center=True`` projected ``G`` with ``P`` first.
    iterations : int
        Outer iterations (ALM) or solver iterations (cvxpy).
    diameter : float
        Exact ``D(potential)``.
    """

    value: float
    potential: np.ndarray
    flow: Flow
    gap: float
    status: str
    method: str
    centered: bool
    iterations: int
    diameter: float

    @property
    def relative_gap(self) -> float:
        return self.gap / max(self.value, np.finfo(float).tiny)


@dataclass(frozen=True)
class TensionBounds:
    """Cheap certified bounds ``lower <= T(G) <= upper`` with their sources."""

    lower: float
    upper: float
    lower_source: str
    upper_source: str


# --------------------------------------------------------------------------- helpers
def _incidence(I, J, V):
    """Sparse ``V x m`` incidence matrix: column ``e`` is ``e_I[e] - e_J[e]``."""
    import scipy.sparse as sp

    m = len(I)
    rows = np.concatenate([I, J])
    cols = np.concatenate([np.arange(m), np.arange(m)])
    data = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csr_matrix((data, (rows, cols)), shape=(V, m))


def _divergence(I, J, Y, V):
    """``sum_j y_ij`` for the flow ``Y`` on pairs ``(I, J)``: ``B Y``."""
    if len(I) == 0:
        return np.zeros((V, Y.shape[1]))
    return np.asarray(_incidence(I, J, V) @ Y)


def _certify(G: np.ndarray, Phi: np.ndarray, I, J, Y, *, method, centered, iterations, tol) -> TensionResult:
    """Build the certificate from any potential and any explicit flow."""
    V = G.shape[0]
    Pc = Phi - Phi.mean(axis=0)
    D = row_diameter(Pc) if V > 1 else 0.0
    if D > 0:
        Pc = Pc / D
        D = row_diameter(Pc)
    value = float(np.sum(G * Pc))
    if value < 0:  # only possible for a useless potential; the zero potential is better
        Pc = np.zeros_like(Pc)
        value, D = 0.0, 0.0
    I = np.asarray(I, dtype=np.intp)
    J = np.asarray(J, dtype=np.intp)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(I), G.shape[1])
    r = G - _divergence(I, J, Y, V)
    norms = _rownorms(Y) if len(I) else np.zeros(0)  # scaled: no under/overflow of squares
    raw = float(norms.sum()) + (V - 1) / V * float(_rownorms(r).sum())
    cost = raw * (1.0 + 4.0 * (len(I) + V + G.shape[1]) * _U64)  # rounding of the sums
    keep = norms > 0
    flow = Flow(pairs=np.stack([I[keep], J[keep]], axis=1), vectors=Y[keep], residual=r, cost=cost)
    # the value <G, potential> is itself rounded (V d products): widen the gap by that
    gap = max(cost - value, 0.0) + 4.0 * (G.size + 2) * _U64 * abs(value)
    status = "optimal" if gap <= tol * max(value, 1e-300) else "inaccurate"
    return TensionResult(value=value, potential=Pc, flow=flow, gap=gap, status=status, method=method,
                         centered=centered, iterations=iterations, diameter=D)


# --------------------------------------------------------------------------- cheap pieces
def rownorm(G, /, *, eps=0.0):
    r"""Row normalisation ``RN(G)``: ``g_i / ||g_i||`` for ``||g_i|| > eps``, else 0.

    Rows that are exactly zero stay zero.  (:func:`projected_rownorm` also
    treats rows that are zero up to the rounding of the centring as zero.)

    Parameters
    ----------
    G : (V, d) array_like
    eps : float
        Rows with ``||g_i|| <= eps`` count as zero.

    Returns
    -------
    (V, d) float64 ndarray

    Examples
    --------
    >>> rownorm([[3.0, 4.0], [0.0, 0.0]])
    array([[0.6, 0.8],
           [0. , 0. ]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eps, "eps", minimum=0.0)
    n = _rownorms(X)
    return _normalize(X, n, n > e)


def _normalize(X, n, nz):
    out = np.zeros_like(X)
    out[nz] = X[nz] / n[nz, None]
    return out


def centring_noise(G0: np.ndarray) -> float:
    """A bound on what the centring ``P G`` leaves in a row that is zero up to rounding.

    The computed column mean of ``G`` differs from the exact one by at most
    ``gamma_V`` times the mean absolute column entry, and the column sums of
    an accepted zero-sum ``G`` are themselves rounding of that size; so a
    row of ``P G`` with norm at most ``4 u ||sum_i |g_i| ||_2`` (column
    absolute sums) cannot be told apart from a zero row moved by the centring.
    """
    return 4.0 * _U64 * float(np.linalg.norm(np.abs(G0).sum(axis=0)))


def _nonzero_rows(G0: np.ndarray, X: np.ndarray, n: np.ndarray, eps: float, centered: bool) -> np.ndarray:
    """Rows of the centred ``X`` (row norms ``n``) that count as non-zero: above ``eps``
    and above the centring noise; without ``center``, rows that are exactly zero in
    the input ``G0`` stay zero whatever the centring left in them."""
    nz = (n > eps) & (n > centring_noise(G0))
    if not centered:
        nz &= np.any(G0 != 0, axis=1)
    return nz


def _rownorms(X):
    m = np.abs(X).max(axis=1)
    ms = np.where(m > 0, m, 1.0)
    return m * np.linalg.norm(X / ms[:, None], axis=1)


def projected_rownorm(G, /, *, eta=1.0, eps=0.0, center=False, return_decrease=False):
    r"""Projected RowNorm update ``S_RN = -(eta/2) P RN(P G)`` (identity I15).

    It minimises ``<G, S>`` over centred ``S`` with covering radius
    ``rad(S) <= eta/2``, with decrease ``-<G, S_RN> = (eta/2) sum_i ||g_i||``;
    since ``D(S) <= 2 rad(S)`` it is feasible for the diameter problem and
    achieves at least ``sqrt((k+1)/(2k))`` of its optimal decrease (I16).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    eta : float
        Step size ``>= 0``.
    eps : float
        Rows with ``||g_i|| <= eps`` count as zero.  Rows that are zero up to
        the rounding of the centring (norm at most ``4 u ||sum_i |g_i| ||``)
        and, without ``center``, rows that are exactly zero in ``G`` always
        count as zero: RowNorm would otherwise scale rounding noise to unit
        length.
    center : bool
        Project ``G`` with ``P`` first instead of requiring zero column sums.
    return_decrease : bool
        Also return the decrease ``-<G, S_RN> = (eta/2) sum ||g_i||`` over the
        rows that count as non-zero.

    Returns
    -------
    (V, d) float64 ndarray, or (S, decrease)

    Examples
    --------
    >>> S = projected_rownorm([[1.0, 0.0], [-1.0, 0.0]], eta=2.0)
    >>> S
    array([[-1.,  0.],
           [ 1.,  0.]])
    """
    G0 = _v.matrix(G, "G", min_rows=2)
    X, centered = _v.zero_sum_matrix(G0, center)
    e = _v.scalar(eta, "eta", minimum=0.0)
    eps = _v.scalar(eps, "eps", minimum=0.0)
    n = _rownorms(X)
    nz = _nonzero_rows(G0, X, n, eps, centered)
    N = _normalize(X, n, nz)
    S = -(e / 2.0) * (N - N.mean(axis=0)) + 0.0  # + 0.0 folds -0.0 into 0.0
    if return_decrease:
        return S, e / 2.0 * float(n[nz].sum())
    return S


def tension_bounds(G, /, *, center=False, tile=2048):
    r"""Certified bounds on ``T(G)`` without solving (identities I11, I17).

    * lower: ``<G, Phi_RN> / D(Phi_RN)`` with ``Phi_RN = P RN(G)`` (the RowNorm
      potential, its diameter computed exactly), which is at least
      ``sum_i ||g_i|| / 2``;
    * upper: the smaller of Jung's ``J_k sum_i ||g_i||`` (``k = rank G``) and the
      balanced-flow cost ``(1/V) sum_{i<j} ||g_i - g_j||`` (computed in tiles,
      each distance rounded up by its error bound).

    Parameters
    ----------
    G : (V, d) array_like
    center : bool
    tile : int
        Rows per tile of the balanced-flow sum (memory ``tile^2``).

    Returns
    -------
    TensionBounds

    Examples
    --------
    >>> b = tension_bounds([[1.0, 0.0], [-1.0, 0.0]])
    >>> round(b.lower, 12), round(b.upper, 12)
    (1.0, 1.0)
    """
    G0 = _v.matrix(G, "G", min_rows=2)
    X, centered = _v.zero_sum_matrix(G0, center)
    tile = _v.integer(tile, "tile", minimum=1)
    V, d = X.shape
    n = _rownorms(X)
    total = float(n.sum())
    if total == 0.0:
        return TensionBounds(0.0, 0.0, "G = 0", "G = 0")
    N = _normalize(X, n, _nonzero_rows(G0, X, n, 0.0, centered))
    Pn = N - N.mean(axis=0)
    Dn = row_diameter(Pn)
    # Dn == 0 only when all rows of G are equal, i.e. G = 0 up to rounding: T = 0 then
    lower = max(float(np.sum(X * Pn)) / Dn, 0.0) if Dn > 0 else 0.0
    # Jung on the numerical row space (dimension k) plus Jung in full dimension on
    # what the truncation leaves out: <G, Phi> = <G W W^T, Phi> + <G (I - W W^T), Phi>
    _, sv, Wt = np.linalg.svd(X, full_matrices=False)
    k = int(np.sum(sv > sv[0] * max(V, d) * _U64))
    W = Wt[:k].T
    C = X @ W
    E = X - C @ W.T
    kfull = min(V - 1, d)
    jung = (jung_radius(k) * float(_rownorms(C).sum()) + jung_radius(kfull) * float(_rownorms(E).sum()))
    jung *= 1.0 + 8.0 * (V + d) * _U64
    bal = _balanced_flow_cost(X, tile)
    if jung <= bal:
        return TensionBounds(lower, jung, "RowNorm potential (I17)", f"Jung J_{k} sum ||g_i|| (I17)")
    return TensionBounds(lower, bal, "RowNorm potential (I17)", "balanced flow (I11)")


def _balanced_flow_cost(X: np.ndarray, tile: int) -> float:
    """``(1/V) sum_{i<j} ||x_i - x_j||`` rounded up, in tiles (no V x V array).

    Squared distances come from a GEMM with the error bound ``eps`` of
    :mod:`hilbertgeom._pairs`; each distance is rounded up to
    ``sqrt(D2 + eps)``, except near-coincident pairs (``D2 < 1e6 eps``, where
    that would be loose), which are recomputed directly.
    """
    V, d = X.shape
    C = X - X.mean(axis=0)
    m = float(np.abs(C).max())
    if m == 0.0:
        return 0.0
    f = math.ldexp(1.0, -math.frexp(m)[1])  # exact rescaling: no under/overflow of squares
    C = C * f
    n = (C * C).sum(axis=1)
    N = float(n.max())
    eps = 2.0 * (4 * (d + 2) * _U64) * N + np.finfo(float).tiny
    total = 0.0
    for a in range(0, V, tile):
        A = C[a : a + tile]
        for b in range(a, V, tile):
            Bm = C[b : b + tile]
            D2 = n[a : a + tile, None] + n[None, b : b + tile] - 2.0 * (A @ Bm.T)
            Dt = np.sqrt(np.maximum(D2, 0.0) + eps)
            near = D2 < 1e6 * eps
            if a == b:
                upper = np.triu(np.ones(D2.shape, dtype=bool), 1)
                Dt = np.where(upper, Dt, 0.0)
                near &= upper
            ii, jj = np.nonzero(near)
            if ii.size:
                exact = np.linalg.norm(A[ii] - Bm[jj], axis=1) * (1.0 + 4 * (d + 2) * _U64)
                Dt[ii, jj] = exact
            total += float(Dt.sum())
    return total / V / f * (1.0 + 4 * V * _U64)


# --------------------------------------------------------------------------- cvxpy reference
def _cvxpy_solve(G: np.ndarray, form: str):
    """The reference conic programs over all pairs, at unit mean row norm (the
    interior-point tolerances are absolute: unscaled data of size 1e-50 would
    look infeasible)."""
    scale = float(_rownorms(G).sum()) / G.shape[0]
    Phi, iu, ju, Yv, its = _cvxpy_solve_scaled(G / scale, form)
    return Phi, iu, ju, Yv * scale, its


def _cvxpy_solve_scaled(G: np.ndarray, form: str):
    import cvxpy as cp

    V, d = G.shape
    iu, ju = np.triu_indices(V, 1)
    m = len(iu)
    if m * d > 2_000_000:
        raise ValueError(f"the cvxpy reference builds all {m} pairs x {d} columns; use method='alm' for V = {V}")
    if form == "potential":
        P = cp.Variable((V, d))
        # explicit second-order cones: their dual vectors are the flow (with a minus sign)
        cons = [cp.sum(P, axis=0) == 0, cp.SOC(np.ones(m), P[iu] - P[ju], axis=1)]
        prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(G, P))), cons)
    else:
        import scipy.sparse as sp

        B = sp.csr_matrix((np.r_[np.ones(m), -np.ones(m)], (np.r_[iu, ju], np.r_[np.arange(m), np.arange(m)])),
                          shape=(V, m))
        Y = cp.Variable((m, d))
        cons = [B @ Y == G]
        prob = cp.Problem(cp.Minimize(cp.sum(cp.norm(Y, 2, axis=1))), cons)
    import warnings

    try:
        with warnings.catch_warnings():
            # "Solution may be inaccurate": the certificate below measures the accuracy itself
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/CLARABEL failed ({exc}); try method='alm'", status="solver_error") from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"cvxpy/CLARABEL returned status {prob.status!r} for the {form} form; try method='alm'",
                          status=str(prob.status))
    its = int(getattr(prob.solver_stats, "num_iters", 0) or 0)
    if form == "potential":
        Phi = P.value
        Yv = -np.asarray(cons[1].dual_value[1], dtype=float).reshape(m, d)
        return Phi, iu, ju, Yv, its
    Yv = Y.value
    Phi = np.asarray(cons[0].dual_value, dtype=float)
    if np.sum(G * Phi) < 0:
        Phi = -Phi
    return Phi, iu, ju, Yv, its


# --------------------------------------------------------------------------- specialised ALM
def _violating_pairs(P: np.ndarray, thr: float, tile: int = 2048):
    """All pairs i < j with ||p_i - p_j|| > thr (screened by GEMM, confirmed directly)."""
    V, k = P.shape
    n = (P * P).sum(axis=1)
    N = float(n.max()) if V else 0.0
    slack = 2.0 * (4 * (k + 2) * _U64) * max(N, 1.0) + 1e-12
    out_i, out_j = [], []
    for a in range(0, V, tile):
        A = P[a : a + tile]
        for b in range(a, V, tile):
            D2 = n[a : a + tile, None] + n[None, b : b + tile] - 2.0 * (A @ P[b : b + tile].T)
            if a == b:
                D2 = np.triu(D2, 1)
            ii, jj = np.nonzero(D2 > thr * thr - slack)
            if ii.size:
                ii = ii + a
                jj = jj + b
                z = P[ii] - P[jj]
                ok = np.einsum("ij,ij->i", z, z) > thr * thr
                out_i.append(ii[ok])
                out_j.append(jj[ok])
    if not out_i:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    return np.concatenate(out_i), np.concatenate(out_j)


@dataclass
class _ALMState:
    G: np.ndarray
    mu: float
    I: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    J: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    L: np.ndarray | None = None  # multipliers (flows) on (I, J)

    def edges(self, P):
        """Support edges plus every other pair with ||z|| > 1."""
        V, k = P.shape
        vi, vj = _violating_pairs(P, 1.0)
        L = self.L if self.L is not None else np.zeros((0, k))
        if self.I.size:
            key = vi.astype(np.int64) * V + vj
            skey = self.I.astype(np.int64) * V + self.J
            extra = ~np.isin(key, skey)
            vi, vj = vi[extra], vj[extra]
        I = np.concatenate([self.I, vi])
        J = np.concatenate([self.J, vj])
        Lm = np.concatenate([L, np.zeros((vi.size, k))])
        return I, J, Lm

    def evaluate(self, P, I, J, Lm):
        V = P.shape[0]
        v = P[I] - P[J] + self.mu * Lm
        nv = np.sqrt(np.einsum("ij,ij->i", v, v))
        ex = np.maximum(nv - 1.0, 0.0)
        Y = (ex / np.where(nv > 0, nv, 1.0) / self.mu)[:, None] * v
        grad = -self.G + _divergence(I, J, Y, V)
        f = -float(np.sum(self.G * P)) + 0.5 / self.mu * float(ex @ ex) - 0.5 * self.mu * float(np.sum(Lm * Lm))
        return f, grad, Y, v, nv


def _newton_inner(st: _ALMState, P: np.ndarray, *, max_steps: int, gtol: float):
    """Semismooth Newton-CG on the ALM subproblem (a piecewise-quadratic, C^1
    convex function): generalised Hessian ``sum_e B_e^T M_e B_e`` over the
    active pairs, applied matrix-free; Armijo backtracking on the function
    while it is informative, then on the gradient norm, whose decrease can
    still be measured once function values stop resolving the progress.
    Returns the point and whether the gradient norm went down."""
    from scipy.sparse.linalg import LinearOperator, cg

    V, k = P.shape
    I, J, Lm = st.edges(P)
    f, g, _, v, nv = st.evaluate(P, I, J, Lm)
    g0 = float(np.linalg.norm(g))
    for _ in range(max_steps):
        gn = float(np.linalg.norm(g))
        if gn <= gtol:
            break
        act = nv > 1.0
        Ia, Ja, va, nva = I[act], J[act], v[act], nv[act]
        vh = va / nva[:, None]
        wa = (1.0 / nva)[:, None]
        Bm = _incidence(Ia, Ja, V)
        Bt = Bm.T.tocsr()
        ridge = 1e-10 / st.mu

        def hv(x, Bm=Bm, Bt=Bt, vh=vh, wa=wa):
            X = x.reshape(V, k)
            z = Bt @ X
            proj = np.einsum("ij,ij->i", z, vh)[:, None] * vh
            w = (z - wa * (z - proj)) / st.mu
            return (Bm @ w + ridge * X).ravel()

        H = LinearOperator((V * k, V * k), matvec=hv, dtype=float)
        # block-Jacobi preconditioner: the k x k diagonal block of each token
        Me = ((1.0 - wa[:, 0])[:, None, None] * np.eye(k) + wa[:, :, None] * vh[:, :, None] * vh[:, None, :]) / st.mu
        absB = abs(Bm)
        blocks = np.asarray(absB @ Me.reshape(len(Ia), k * k)).reshape(V, k, k) + ridge * np.eye(k)
        inv = np.linalg.inv(blocks)
        Mpre = LinearOperator((V * k, V * k), dtype=float,
                              matvec=lambda x, inv=inv: np.einsum("vij,vj->vi", inv, x.reshape(V, k)).ravel())
        step, _ = cg(H, -g.ravel(), rtol=min(0.1, math.sqrt(gn)), atol=0.0, maxiter=200, M=Mpre)
        step = step.reshape(V, k)
        slope = float(np.sum(g * step))
        if slope >= 0:  # not a descent direction (CG breakdown): fall back to the gradient
            step, slope = -g, -gn * gn
        t = 1.0
        for _ in range(30):
            Pn = P + t * step
            In, Jn, Ln = st.edges(Pn)
            fn_, gn_, _, vn, nvn = st.evaluate(Pn, In, Jn, Ln)
            if fn_ <= f + 1e-4 * t * slope or (abs(fn_ - f) <= 1e-13 * (1 + abs(f)) and np.linalg.norm(gn_) < gn):
                break
            t *= 0.5
        else:
            break  # no progress measurable at this precision
        P, I, J, Lm, f, g, v, nv = Pn, In, Jn, Ln, fn_, gn_, vn, nvn
    return P, float(np.linalg.norm(g)) < g0 or g0 <= gtol  # did it make (or need no) progress


def _alm_solve(G: np.ndarray, *, tol: float, max_outer: int, verbose: bool, mu: float = 0.01,
               lbfgs_iter: int = 50):
    """ALM on the potential form, in the row space of ``G`` and at unit mean
    row norm.  Outer: multipliers (the flow) ``y <- y(Phi)``.  Inner: a short
    L-BFGS warm-up, then semismooth Newton-CG to rounding level."""
    from scipy.optimize import minimize

    V, d = G.shape
    # rank reduction: rotate rows into the row space of G (distances are preserved)
    _, s_, Wt = np.linalg.svd(G, full_matrices=False)
    k = int(np.sum(s_ > s_[0] * max(V, d) * _U64)) if s_.size and s_[0] > 0 else 0
    W = Wt[:k].T  # d x k, orthonormal columns
    C = G @ W
    scale = float(_rownorms(C).sum()) / V
    Cs = C / scale
    # start from the RowNorm potential, feasible and within sqrt((k+1)/(2k)) of optimal
    N = rownorm(Cs)
    P = 0.5 * (N - N.mean(axis=0))
    st = _ALMState(G=Cs, mu=mu)
    t0 = time.perf_counter()
    best = None
    def fun(x):
        Px = x.reshape(V, k)
        # the pair set is refreshed at every point: no pair outside it may be violated
        f, g, *_ = st.evaluate(Px, *st.edges(Px))
        return f, g.ravel()

    newton_failed = False
    for outer in range(1, max_outer + 1):
        if outer == 1 or newton_failed:  # warm-up where Newton has no good start
            res = minimize(fun, P.ravel(), jac=True, method="L-BFGS-B",
                           options=dict(maxiter=lbfgs_iter, gtol=1e-10, ftol=1e-15, maxcor=20))
            P = res.x.reshape(V, k)
        P, progressed = _newton_inner(st, P, max_steps=20, gtol=1e-12 * math.sqrt(V * k))
        newton_failed = not progressed
        I, J, Lm = st.edges(P)
        _, g, Y, _, _ = st.evaluate(P, I, J, Lm)
        keep = np.linalg.norm(Y, axis=1) > 0
        st.I, st.J, st.L = I[keep], J[keep], Y[keep]
        cert = _certify(Cs, P, st.I, st.J, st.L, method="alm", centered=False, iterations=outer, tol=tol)
        if best is None or cert.gap < best.gap:
            best = cert
        if verbose:
            print(f"  alm outer {outer:3d}: lower {cert.value * scale:.12g}  upper {cert.flow.cost * scale:.12g}  "
                  f"rel gap {cert.relative_gap:.2e}  edges {st.I.size}  {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr, flush=True)
        if best.status == "optimal":
            break
        if outer % 8 == 0:
            st.mu *= 0.5  # a stiffer penalty when the multipliers converge slowly
    return best, W, scale, k


def min_tension(G, /, *, center=False, method="auto", tol=1e-9, max_iter=200, verbose=None):
    r"""Exact minimum tension ``T(G)`` with a certificate (identities I10--I13).

    .. math::

        T(G) = \max_{1^\top\Phi = 0,\ D(\Phi)\le 1} \langle G, \Phi\rangle
             = \min_{\sum_j y_{ij} = g_i} \sum_{i<j} \|y_{ij}\|_2

    Parameters
    ----------
    G : (V, d) array_like
        Gradient rows, ``V >= 2``, zero column sums (the softmax cross-entropy
        gradient has them).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising; the
        result records it (``centered=True``).
    method : {"auto", "alm", "cvxpy-potential", "cvxpy-flow"}
        ``alm`` (the default for ``auto``): an augmented-Lagrangian method on
        the potential form that only ever touches pairs at distance ``> 1`` or
        carrying flow (found by tiled GEMM screening), with L-BFGS and
        semismooth-Newton inner solves.  ``cvxpy-*``: the reference conic
        programs over all pairs (small ``V`` only).
    tol : float
        Target relative certified gap ``(cost - value) / value``.  The ALM
        stops as soon as it is met; if it is not met within ``max_iter`` outer
        iterations it raises :class:`SolverError` (status ``"inaccurate"``)
        with the best certificate attached as ``.result``.  The cvxpy
        reference reports its certified gap, with status ``"optimal"`` when
        it is within ``max(tol, 1e-6)``.
    max_iter : int
        Outer iterations of the ALM.
    verbose : bool, optional
        Progress lines on stderr (default: on when ``V > 500``).

    Returns
    -------
    TensionResult

    Raises
    ------
    ValueError
        Non-zero column sums (without ``center``), non-finite or malformed
        ``G``, ``V < 2``, unknown ``method``.
    SolverError
        A cvxpy reference solve failed, or the ALM missed ``tol``; the message
        names the status and what to try.

    References
    ----------
    arXiv 2608.22253 (v2), the minimum-tension dual; identities I10--I13.

    Notes
    -----
    ``value`` is the rounded inner product ``<G, potential>``; ``gap`` includes
    a ``4 (V d + 2) u |value|`` allowance for that rounding, so
    ``[value, value + gap]`` brackets ``T(G)`` rigorously.

    Examples
    --------
    >>> r = min_tension([[1.0, 0.0], [-1.0, 0.0]])     # V = 2: T = ||g_1||
    >>> round(r.value, 9), r.status
    (1.0, 'optimal')
    """
    X, centered = _v.zero_sum_matrix(G, center)
    tol = _v.scalar(tol, "tol", minimum=0.0, strict=True)
    max_iter = _v.integer(max_iter, "max_iter", minimum=1)
    methods = ("auto", "alm", "cvxpy-potential", "cvxpy-flow")
    if method not in methods:
        raise ValueError(f"method must be one of {methods}; got {method!r}")
    V, d = X.shape
    if verbose is None:
        verbose = V > 500
    if not np.any(X):
        Z = np.zeros_like(X)
        flow = Flow(np.zeros((0, 2), np.intp), np.zeros((0, d)), Z.copy(), 0.0)
        return TensionResult(0.0, Z, flow, 0.0, "zero", method if method != "auto" else "alm", centered, 0, 0.0)
    if method.startswith("cvxpy"):
        Phi, I, J, Y, its = _cvxpy_solve(X, method.split("-")[1])
        res = _certify(X, Phi, I, J, Y, method=method, centered=centered, iterations=its, tol=tol)
        if res.status != "optimal":
            res = _replace_status(res, "optimal" if res.relative_gap <= 1e-6 else "inaccurate")
        return res
    best, W, scale, k = _alm_solve(X, tol=tol, max_outer=max_iter, verbose=verbose)
    # back to the original coordinates and scale, and certify there
    Phi = best.potential @ W.T
    res = _certify(X, Phi, best.flow.pairs[:, 0], best.flow.pairs[:, 1], scale * (best.flow.vectors @ W.T),
                   method="alm", centered=centered, iterations=best.iterations, tol=tol)
    if res.status != "optimal":
        err = SolverError(
            f"min_tension (alm): certified relative gap {res.relative_gap:.2e} > tol {tol:.1e} after "
            f"{max_iter} outer iterations (status 'inaccurate'); raise max_iter or tol, or try "
            "method='cvxpy-flow' for small V.  The best certificate is attached as .result",
            status="inaccurate",
        )
        err.result = res
        raise err
    return res


def _replace_status(res: TensionResult, status: str) -> TensionResult:
    from dataclasses import replace

    return replace(res, status=status)


def steepest_descent(G, /, *, eta=1.0, center=False, tension=None, method="auto", tol=1e-9, max_iter=200,
                     verbose=None):
    r"""The steepest-descent update under ``D``: ``S = -eta * potential`` (I10).

    ``S`` minimises ``<G, S>`` over centred updates with ``D(S) <= eta``; its
    decrease is ``eta * T(G)``.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    eta : float
        Step size ``>= 0``: the diameter of the update.
    center : bool
        Project ``G`` with ``P`` first instead of raising.
    tension : TensionResult, optional
        A certified solve of :func:`min_tension` for this ``G``, to reuse
        instead of solving again (its shape is checked).
    method, tol, max_iter, verbose
        Passed to :func:`min_tension` when ``tension`` is not given.

    Returns
    -------
    (V, d) float64 ndarray

    Examples
    --------
    >>> steepest_descent([[1.0, 0.0], [-1.0, 0.0]], eta=2.0).round(9) + 0.0
    array([[-1.,  0.],
           [ 1.,  0.]])
    """
    e = _v.scalar(eta, "eta", minimum=0.0)
    if tension is None:
        tension = min_tension(G, center=center, method=method, tol=tol, max_iter=max_iter, verbose=verbose)
    else:
        if not isinstance(tension, TensionResult):
            raise TypeError(f"tension must be a TensionResult from min_tension; got {type(tension).__name__}")
        shape = _v.matrix(G, "G", min_rows=2).shape
        if tension.potential.shape != shape:
            raise ValueError(f"tension was solved for shape {tension.potential.shape}; G has shape {shape}")
    return -e * tension.potential + 0.0
