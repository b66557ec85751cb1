"""The scalable minimum-tension solver and the public entry points
:func:`min_tension` and :func:`steepest_descent`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _fp
from .. import _validate as _v
from .._fp import mul_pow2, unit_scale
from .._pairs import equal_row_classes
from .._threads import numpy_blas_threads
from ..exceptions import SolverError
from ..rows import row_diameter
from ._results import (
    _U64,
    Flow,
    TensionResult,
    Weighted,
    _certify,
    _divergence,
    _incidence,
    _laplacian,
    _rownorms,
    _violated_pairs,
)
from .bounds import rownorm
from .bracket import _irls_weights, _progress
from .reference import _cvxpy_solve
from .refine import _refine_solve

__all__ = ["min_tension", "steepest_descent"]


@dataclass
class _ALMState:
    G: np.ndarray
    mu: float
    I: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    J: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    L: np.ndarray | None = None  # multipliers (flows) on (I, J)
    screens: int = 0

    def edges(self, P):
        """Support edges plus every other pair with ||z|| > 1."""
        k = P.shape[1]
        vi, vj = _violated_pairs(P, self.I, self.J)
        self.screens += 1
        L = self.L if self.L is not None else np.zeros((0, k))
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


def _preconditioner(Ia, Ja, V, vh, wa, mu, ridge):
    """Block-Jacobi on the generalised Hessian: each token's ``k x k`` diagonal
    block ``sum_e ((1 - w_e) I + w_e vh_e vh_e^T) / mu + ridge I`` over the active
    pairs ``(Ia, Ja)`` that touch it, when the ``V`` blocks fit in ``_BLOCK_BUDGET``
    entries; otherwise Jacobi on its exact diagonal, a ``(V, k)`` array.  A token's
    rank-one terms are one small GEMM ``Z^T Z`` of its incident pairs' rows
    ``sqrt(w_e / mu) vh_e`` (never ``pairs x k x k``, nor the pairs' outer products
    in chunks, which cost eight times as long at ``V = 2000``, ``k = 32``).  (The
    scalar-weighted Laplacian of the active pairs, factorised once per Newton step
    and shared by all columns, was measured as well: as many CG iterations as the
    diagonal on cross-entropy gradients, at several times the cost per step; see
    ``docs/theory/tension.md``.)"""
    k = vh.shape[1]
    tok = np.concatenate([Ia, Ja])
    inc = np.concatenate([np.arange(Ia.size), np.arange(Ia.size)])
    if V * k * k > _BLOCK_BUDGET:
        T = (((1.0 - wa) + wa * vh * vh) / mu)[inc]
        diag = np.stack([np.bincount(tok, T[:, j], V) for j in range(k)], axis=1) + ridge
        return lambda R: R / diag
    o = np.argsort(tok, kind="stable")
    tok, inc = tok[o], inc[o]
    Z = vh[inc] * np.sqrt(wa[inc] / mu)
    starts = np.searchsorted(tok, np.arange(V + 1))
    blocks = np.empty((V, k, k))
    for i in range(V):
        Zi = Z[starts[i] : starts[i + 1]]
        np.matmul(Zi.T, Zi, out=blocks[i])
    iso = np.bincount(tok, weights=(1.0 - wa[inc, 0]) / mu, minlength=V) + ridge
    blocks[:, np.arange(k), np.arange(k)] += iso[:, None]
    inv = np.linalg.inv(blocks)
    return lambda R: np.einsum("vij,vj->vi", inv, R)


_BLOCK_BUDGET = 1 << 24  # entries of the V k x k blocks (128 MiB)


def _newton_inner(st: _ALMState, P: np.ndarray, *, max_steps: int, gtol: float, deadline: float = math.inf):
    """Semismooth Newton-CG on the ALM subproblem (a piecewise-quadratic, C^1
    convex function): generalised Hessian ``sum_e B_e^T M_e B_e`` over the
    active pairs, ``M_e = ((1 - w_e) I + w_e vh_e vh_e^T) / mu``, applied
    matrix-free; preconditioned by per-token blocks or its exact diagonal
    (:func:`_preconditioner`; memory ``O(V k^2)`` within a budget, else
    ``O(V k)``).  Armijo backtracking on the function while it is informative,
    then on the gradient norm, whose decrease can still be measured once
    function values stop resolving the progress.  Returns the point and
    whether the gradient norm went down."""
    from scipy.sparse.linalg import LinearOperator, cg

    V, k = P.shape
    I, J, Lm = st.edges(P)
    f, g, _, v, nv = st.evaluate(P, I, J, Lm)
    g0 = float(np.linalg.norm(g))
    ridge = 1e-10 / st.mu
    for _ in range(max_steps):
        gn = float(np.linalg.norm(g))
        if gn <= gtol or time.perf_counter() > deadline:
            break
        act = nv > 1.0
        Ia, Ja, va, nva = I[act], J[act], v[act], nv[act]
        vh = va / nva[:, None]
        wa = (1.0 / nva)[:, None]
        Bm = _incidence(Ia, Ja, V)
        Bt = Bm.T.tocsr()

        def hv(x, Bm=Bm, Bt=Bt, vh=vh, wa=wa, ridge=ridge):
            X = x.reshape(V, k)
            z = Bt @ X
            proj = np.einsum("ij,ij->i", z, vh)[:, None] * vh
            w = (z - wa * (z - proj)) / st.mu
            return (Bm @ w + ridge * X).ravel()

        H = LinearOperator((V * k, V * k), matvec=hv, dtype=float)
        solve = _preconditioner(Ia, Ja, V, vh, wa, st.mu, ridge)
        Mpre = LinearOperator((V * k, V * k), dtype=float, matvec=lambda x, s=solve: s(x.reshape(V, k)).ravel())
        step, _ = cg(H, -g.ravel(), rtol=min(0.1, math.sqrt(gn)), atol=0.0, maxiter=200, M=Mpre)
        step = step.reshape(V, k)
        slope = float(np.sum(g * step))
        if slope >= 0:  # not a descent direction (CG breakdown): fall back to the gradient
            step, slope = -g, -gn * gn
        t = 1.0
        for _ in range(30):
            if time.perf_counter() > deadline:
                return P, True
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


def _keep_best(best, top_P, top_flow, cert, flow, Cs, outer, tol):
    """The best potential and the best flow, kept apart and combined into one
    certificate: ``cert`` (on the pairs and vectors ``flow = (I, J, Y)``) replaces
    what it beats."""
    if cert.value >= best.value and cert.flow.cost <= best.flow.cost:
        return cert, cert.potential, (*flow, cert.flow.cost)
    if cert.value > best.value or cert.flow.cost < best.flow.cost:
        if cert.value > best.value:
            top_P = cert.potential
        if cert.flow.cost < top_flow[3]:
            top_flow = (*flow, cert.flow.cost)
        best = _certify(Cs, top_P, *top_flow[:3], method="alm", centered=False, iterations=outer, tol=tol)
    return best, top_P, top_flow


def _potential_from_flow(I, J, Y, V):
    """The potential an optimal flow determines: ``y_ij = lambda_ij (phi_i - phi_j)`` with
    ``||phi_i - phi_j|| = 1`` where ``y_ij != 0`` (complementary slackness), so
    ``phi_i - phi_j = y_ij / ||y_ij||`` on the flow's support.  Solved in the least-squares
    sense weighted by ``||y_ij||``: ``L_w Phi = B Y`` with the Laplacian ``L_w = B W B^T``
    of the weights ``w = ||y||`` (a tiny ridge fixes each connected component's
    translation; ``B Y`` sums to zero on each), then centred and scaled to diameter 1 by
    the exact kernel.  The ALM's potential converges linearly where its flow is already
    optimal; this one is as accurate as the flow.  ``None`` when there is no flow."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import spsolve

    if len(I) == 0:
        return None
    w = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    on = w > 0
    if not on.any():
        return None
    L = _laplacian(I[on], J[on], w[on], V).tocsc()
    L = L + sp.identity(V, format="csc") * (1e-12 * float(w.max()))
    rhs = _divergence(I[on], J[on], Y[on], V)
    P = np.asarray(spsolve(L, rhs)).reshape(V, -1)
    if not np.isfinite(P).all():  # a candidate only: the certificate keeps the ALM's potential
        return None
    P = P - P.mean(axis=0)
    Dn = row_diameter(P)
    return P / Dn if Dn > 0 else None


_IRLS_MAX_V = 2048  # dense V x V weights and Laplacian: 32 MiB each at this size
_IRLS_STEPS = 30
#: the restart keeps the pairs with at least this share of the largest weight; on the 1024 largest
#: MiniLM rows at d = 32 a share of 1e-2 left the ALM's gap after 60 s 4.8 times wider (the truncated
#: flow's residual costs more)
_IRLS_KEEP = 1e-3
#: after the first outer step: restart from IRLS above this gap, on rows whose norms are spread as a
#: head gradient's (``_spread_norms``) only.  On even rows (Gaussian) the ALM goes on alone: five of
#: ten draws of V = 2000, d = 32 leave a gap above it, and took 137-192 s with the restart, 43-51 s
#: without (2026-12-06, docs/theory/tension.md)
_IRLS_GAP = 1e-2
_REFINE_MIN_V = _IRLS_MAX_V  # "auto": cluster refinement above this many (distinct) rows
#: "auto" also takes the cluster refinement for a head gradient of more than _HEAD_MIN_V distinct
#: rows: its median row norm at most _HEAD_SPREAD of the largest (the MiniLM gradients' top 300 to
#: 4096 rows: 7e-5 to 0.036; Gaussian rows: 0.6 to 0.9), and more than 1024 rows or rank at least
#: _HEAD_MIN_RANK (up to _HEAD_ANY_RANK rows).  Measured with benchmarks/bench_refine.py (2026-12-05, `--time-limit 60`,
#: refine against the ALM given the same time): refine certified 1e-6 in 8-58 s on the MiniLM top
#: 300 (d = 384), 512 and 1024 (d = 32 and 384) and 2048 (d = 32), where the ALM was left at
#: 2e-2 to 4.5e-1; on the top 300 at d = 16 the ALM certified in 9.4 s and refine took 26.6 s
#: (trained: 3.8 s and 3.7 s).  On Gaussian rows refine is the slower (V = 500, d = 64: the ALM
#: 10.9 s, refine 4.2e-2 after 60 s)
_HEAD_MIN_V = 256
_HEAD_SPREAD = 0.1
_HEAD_MIN_RANK = 32
_HEAD_ANY_RANK = 1024


def _spread_norms(G: np.ndarray) -> bool:
    """Whether the row norms of ``G`` are spread as a head gradient's: the median at most
    ``_HEAD_SPREAD`` of the largest."""
    n = _rownorms(G)
    return float(np.median(n)) <= _HEAD_SPREAD * float(n.max())


def _head_shaped(G: np.ndarray) -> bool:
    """Whether "auto" takes the cluster refinement for the (distinct, scaled) rows ``G`` of at
    most ``_REFINE_MIN_V`` rows: a head gradient's shape (see ``_HEAD_SPREAD``)."""
    V = G.shape[0]
    if V <= _HEAD_MIN_V or not _spread_norms(G):
        return False
    if V > _HEAD_ANY_RANK:
        return True
    # the rank by one SVD of at most _HEAD_ANY_RANK rows (well under the solve's time), where it can be high enough
    return min(G.shape) >= _HEAD_MIN_RANK and int(np.linalg.matrix_rank(G - G.mean(axis=0))) >= _HEAD_MIN_RANK


def _irls_flow(Cs: np.ndarray, steps: int, deadline: float):
    """A flow and a potential from the scalar-weight dual, for a restart of the ALM.

    :func:`hilbertgeom.tension.bracket._irls_weights` (reweighted least squares on
    ``min_{lambda >= 0} (1/2) sum_e lambda_e + (1/2) tr(G^T L_lambda^+ G)``, whose
    minimiser is the optimal flow's ``lambda``) moves the weights onto the pairs that
    carry the optimal flow in a few dozen steps where the ALM's own multipliers stay
    near the balanced flow (cross-entropy rows).  Dense in ``V``: used for
    ``V <= _IRLS_MAX_V``.  Returns the potential (diameter 1) and the flow on the pairs
    whose weight is at least ``_IRLS_KEEP`` of the largest."""
    lam, Phi, _ = _irls_weights(Cs, steps, deadline)
    if not float(np.sum(Cs * Phi)) > 0:  # no useful scaling of the dual
        return None
    iu, ju = np.nonzero(np.triu(lam >= _IRLS_KEEP * lam.max(), 1))
    Y = lam[iu, ju][:, None] * (Phi[iu] - Phi[ju])
    P = Phi - Phi.mean(axis=0)
    Dn = row_diameter(P)
    if not Dn > 0:
        return None
    return P / Dn, iu.astype(np.intp), ju.astype(np.intp), Y


_NEWTON_MAX_V = 1024  # dense V x V Laplacian inverse per Newton step (8 MiB at this size)
_NEWTON_RANK = 0.25  # ... only at rank k >= this share of V and above _NEWTON_MIN_RANK: below, the ALM is
_NEWTON_MIN_RANK = 64  # as fast (measured at d = 32) and its flows serve the cluster refinement's coupling better
_NEWTON_GAP = 1e-2  # the ALM's relative gap below which its flow's pairs are taken as the support


def _rank(s: np.ndarray, shape) -> int:
    """Numerical rank from the singular values ``s`` of a matrix of ``shape``."""
    return int(np.sum(s > s[0] * max(shape) * _U64)) if s.size and s[0] > 0 else 0


def _high_rank(k: int, V: int) -> bool:
    """Rank ``k`` of ``V`` rows where the ALM hands over to Newton (and where the
    cluster refinement solves its groups' problem by L-BFGS-B on the dual over
    every pair, :mod:`hilbertgeom.tension.dual`)."""
    return k > _NEWTON_MIN_RANK and k >= _NEWTON_RANK * V


def _newton_polish(Cs, st, P, best, top_P, top_flow, outer, tol, deadline, verbose, f, t0):
    """:func:`hilbertgeom.tension.newton.support_newton` from the ALM's flow (``lambda_e =
    ||y_e|| / ||p_i - p_j||`` on its pairs), every centred iterate certified and kept
    by :func:`_keep_best`.  Returns the updated ``(best, top_P, top_flow)``."""
    from .newton import support_newton

    box = [best, top_P, top_flow]

    def certify(Phi, I, J, Y):
        cert = _certify(Cs, Phi, I, J, Y, method="alm", centered=False, iterations=outer, tol=tol)
        box[:] = _keep_best(box[0], box[1], box[2], cert, (I, J, Y), Cs, outer, tol)
        return box[0].relative_gap

    dist = _rownorms(P[st.I] - P[st.J])
    lam = _rownorms(st.L) / np.where(dist > 0, dist, 1.0)
    try:
        steps = support_newton(Cs, st.I, st.J, lam, P, tol=tol, deadline=deadline, certify=certify,
                               gap=best.relative_gap)
    except (np.linalg.LinAlgError, ValueError) as err:  # a singular or non-finite step: the ALM goes on
        if verbose:
            _progress(f"  min_tension Newton on the flow's support stopped ({err}); the ALM goes on")
        return box[0], box[1], box[2]
    if verbose:
        _progress(f"  min_tension Newton on the flow's support ({steps} steps): T in [{box[0].value * f:.12g}, "
                  f"{box[0].flow.cost * f:.12g}]  rel gap {box[0].relative_gap:.2e}  {time.perf_counter() - t0:.1f} s")
    return box[0], box[1], box[2]


def _alm_solve(G: np.ndarray, *, tol: float, max_outer: int, verbose: bool, deadline: float = math.inf,
               mu: float = 0.01, lbfgs_iter: int = 50, report_scale: float = 1.0, start=None):
    """ALM on the potential form, in the row space of ``G`` and at unit mean
    row norm.  Outer: multipliers (the flow) ``y <- y(Phi)``.  Inner: a short
    L-BFGS warm-up, then semismooth Newton-CG to rounding level.  ``start``:
    ``(Phi, I, J, Y)``, a potential and a flow of ``G`` to start from (the
    cluster refinement's previous round) instead of RowNorm and no flow.
    Returns ``(best certificate in the reduced coordinates, W, scale, k, why)``
    with ``why`` one of ``"optimal"``, ``"iteration_limit"``, ``"time_limit"``."""
    from scipy.optimize import minimize

    V = G.shape[0]
    # rank reduction: rotate rows into the row space of G (distances are preserved)
    _, s_, Wt = np.linalg.svd(G, full_matrices=False)
    k = _rank(s_, G.shape)
    W = Wt[:k].T  # d x k, orthonormal columns
    C = G @ W
    scale = float(_rownorms(C).sum()) / V
    Cs = C / scale
    # start from the RowNorm potential, feasible and within sqrt((k+1)/(2k)) of optimal
    N = rownorm(Cs)
    P = N - N.mean(axis=0)
    Dn = row_diameter(P)
    P = P / Dn if Dn > 0 else 0.5 * P  # diameter 1: the RowNorm lower bound of tension_bounds
    st = _ALMState(G=Cs, mu=mu)
    t0 = time.perf_counter()
    # the best potential and the best flow are kept apart and combined: the first
    # certificate (RowNorm potential, empty flow: the balanced flow) is the floor
    z = np.zeros(0, np.intp)
    best = _certify(Cs, P, z, z, np.zeros((0, k)), method="alm", centered=False, iterations=0, tol=tol)
    top_P, top_flow = best.potential, (z, z, np.zeros((0, k)), best.flow.cost)
    if start is not None:  # projected on the row space: no distance grows
        P0, I0, J0, Y0 = start
        P0 = P0 @ W
        st.I, st.J, st.L = np.asarray(I0, np.intp), np.asarray(J0, np.intp), (Y0 @ W) / scale
        cert = _certify(Cs, P0, st.I, st.J, st.L, method="alm", centered=False, iterations=0, tol=tol)
        best, top_P, top_flow = _keep_best(best, top_P, top_flow, cert, (st.I, st.J, st.L), Cs, 0, tol)
        P = cert.potential
    why = "iteration_limit"

    def fun(x):
        Px = x.reshape(V, k)
        # the pair set is refreshed at every point: no pair outside it may be violated
        f, g, *_ = st.evaluate(Px, *st.edges(Px))
        return f, g.ravel()

    def stop_at_deadline(intermediate_result):
        if time.perf_counter() > deadline:
            raise StopIteration  # L-BFGS-B returns its current point

    newton_failed = False
    newton_gap = _NEWTON_GAP
    for outer in range(1, max_outer + 1):
        if outer == 1 or newton_failed:  # warm-up where Newton has no good start
            res = minimize(fun, P.ravel(), jac=True, method="L-BFGS-B", callback=stop_at_deadline,
                           options={"maxiter": lbfgs_iter, "gtol": 1e-10, "ftol": 1e-15, "maxcor": 20})
            P = res.x.reshape(V, k)
        P, progressed = _newton_inner(st, P, max_steps=20, gtol=1e-12 * math.sqrt(V * k), deadline=deadline)
        newton_failed = not progressed
        I, J, Lm = st.edges(P)
        _, _, Y, _, _ = st.evaluate(P, I, J, Lm)
        keep = np.linalg.norm(Y, axis=1) > 0
        st.I, st.J, st.L = I[keep], J[keep], Y[keep]
        cert = _certify(Cs, P, st.I, st.J, st.L, method="alm", centered=False, iterations=outer, tol=tol)
        P_rec = _potential_from_flow(st.I, st.J, st.L, V)
        if P_rec is not None:  # a second potential, read off the flow
            rec = _certify(Cs, P_rec, st.I, st.J, st.L, method="alm", centered=False, iterations=outer, tol=tol)
            if rec.value > cert.value:
                cert = rec
        best, top_P, top_flow = _keep_best(best, top_P, top_flow, cert, (st.I, st.J, st.L), Cs, outer, tol)
        if verbose:
            f = scale * report_scale
            _progress(f"  min_tension outer {outer:3d}: T in [{best.value * f:.12g}, {best.flow.cost * f:.12g}]  "
                      f"rel gap {best.relative_gap:.2e}  pairs {st.I.size}  screens {st.screens}  "
                      f"{time.perf_counter() - t0:.1f} s")
        if best.status == "optimal":
            why = "optimal"
            break
        if time.perf_counter() > deadline:
            why = "time_limit"
            break
        if V <= _NEWTON_MAX_V and _high_rank(k, V) and st.I.size and best.relative_gap <= newton_gap:
            # the ALM's flow marks the support: Newton on the scalar-weight dual there, for
            # at most as long as the ALM has run (again once the ALM's gap is 10x narrower)
            newton_gap = best.relative_gap / 10.0
            spent = time.perf_counter() - t0
            best, top_P, top_flow = _newton_polish(Cs, st, P, best, top_P, top_flow, outer, tol,
                                                   min(deadline, time.perf_counter() + max(spent, 5.0)),
                                                   verbose, scale * report_scale, t0)
            if best.status == "optimal":
                why = "optimal"
                break
        if (outer == 1 and start is None and best.relative_gap > _IRLS_GAP and V <= _IRLS_MAX_V
                and _spread_norms(Cs)):
            # the ALM's flow has not left the balanced flow's neighbourhood (cross-entropy
            # rows): restart from the scalar-weight dual's flow and potential
            start = _irls_flow(Cs, _IRLS_STEPS, deadline)
            if start is not None:
                P, st.I, st.J, st.L = start
                newton_failed = True  # an L-BFGS warm-up from the new point
                cert = _certify(Cs, P, st.I, st.J, st.L, method="alm", centered=False, iterations=outer, tol=tol)
                best, top_P, top_flow = _keep_best(best, top_P, top_flow, cert, (st.I, st.J, st.L), Cs, outer, tol)
                if verbose:
                    _progress(f"  min_tension restart from the scalar-weight dual (IRLS, {_IRLS_STEPS} steps): "
                              f"rel gap {best.relative_gap:.2e}, pairs {st.I.size}")
        if outer % 8 == 0:
            st.mu *= 0.5  # a stiffer penalty when the multipliers converge slowly
    return best, W, scale, k, why


def min_tension(G: np.typing.ArrayLike, /, *, center: bool = False, method: str = "auto", tol: float = 1e-9,
                max_iter: int = 200, time_limit: float | None = None, verbose: bool | None = None) -> TensionResult:
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
    method : {"auto", "alm", "refine", "cvxpy-potential", "cvxpy-flow"}
        ``auto``: ``refine`` above 2048 distinct rows, and for a head
        gradient above 256 (median row norm at most 0.1 of the largest, and
        more than 1024 rows or rank at least 32: on real gradients there it
        certifies in under a minute where the ALM stalls), else ``alm``.
        ``refine`` (cluster refinement, for head gradients): the rows are
        grouped by the point they take in a short reduced solve, the groups'
        problem (one row per group, its sum) is solved by ``alm`` (at high
        rank: L-BFGS-B on the scalar-weight dual over every pair, then Newton
        on its support), each row
        takes its best group point (the lower bound) and the group flow,
        spread over member pairs as scalar weights, is made to balance ``G``
        by one sparse weighted-Laplacian solve (the upper bound); the groups
        with the most excess are split and the round repeats (``max_iter``
        rounds at most; it stops after 4 rounds that do not narrow the gap
        by 10%).  Memory ``O(V d + pairs)`` (flows kept as pairs, weights and
        a potential), pairs being the member pairs of adjacent groups; the
        returned :class:`Flow` keeps that scalar-weighted form
        (``flow.weights``, ``flow.base``; ``flow.vectors``, ``pairs x d``, is
        made on access).  See ``docs/theory/tension.md``, *Cluster
        refinement*.
        ``alm``: an augmented-Lagrangian method on
        the potential form that only ever touches pairs at distance ``> 1`` or
        carrying flow (found by tiled GEMM screening, pruned by row norms),
        with L-BFGS and semismooth-Newton inner solves preconditioned by
        per-token ``k x k`` blocks within a budget, else by the Hessian's
        diagonal (memory ``O(V k + pairs k)``); after each outer step a second
        potential is read off the flow (``phi_i - phi_j = y_ij / ||y_ij||`` on
        its support, one weighted-Laplacian solve shared by all columns).
        When the first outer step leaves a gap above ``1e-2`` (cross-entropy
        rows) and ``V <= 2048``, the ALM restarts from 30 reweighted
        least-squares steps on the scalar-weight dual (dense, ``O(V^2)``
        memory).  At high rank (``k > 64``, ``k >= V/4``, ``V <= 1024``) the
        ALM hands over to log-barrier Newton on that dual restricted to its
        flow's support once its gap is below ``1e-2`` (a dense ``|A| x |A|``
        Hessian, ``|A|`` the support's pairs, at most 6000).  Exactly equal
        rows are merged first (see Notes).
        ``cvxpy-*``: the reference conic programs over all pairs (small ``V``
        only, CPU only).
    tol : float
        Target relative certified gap ``(cost - value) / value``.  The ALM
        stops as soon as it is met; if it is not met within ``max_iter`` outer
        iterations it raises :class:`SolverError` (status
        ``"iteration_limit"``) with the best certificate attached as
        ``.result``.  The cvxpy
        reference reports its certified gap, with status ``"optimal"`` when
        it is within ``max(tol, 1e-6)``.
    max_iter : int
        Outer iterations of the ALM, or rounds of ``refine``.
    time_limit : float, optional
        Wall-clock budget in seconds for the ALM or ``refine``.  When it runs out before
        ``tol`` is met, the best certificate so far is *returned* (not
        raised) with status ``"time_limit"``: ``[value, value + gap]`` still
        brackets ``T(G)`` rigorously.  (The budget is checked between Newton
        steps, so a solve may overrun it by one step.)
    verbose : bool, optional
        One progress line per outer iteration on stderr, with the certified
        bracket (default: on when ``V > 500``).

    Returns
    -------
    TensionResult

    Raises
    ------
    ValueError
        Non-zero column sums (without ``center``), non-finite or malformed
        ``G``, ``V < 2``, unknown ``method``, or ``T(G)`` beyond the float64
        range.
    SolverError
        A cvxpy reference solve failed, or the ALM missed ``tol`` within
        ``max_iter`` (status ``"iteration_limit"``); the message names the
        status and what to try, ``.result`` holds the best certificate.

    References
    ----------
    arXiv 2608.22253 (v2), the minimum-tension dual; identities I10--I13.

    Notes
    -----
    ``value`` is the rounded inner product ``<G, potential>``; ``gap`` includes
    a ``4 (V d + 2) u |value|`` allowance for that rounding, so
    ``[value, value + gap]`` brackets ``T(G)`` rigorously.

    ``G`` is first scaled by an exact power of two (largest entry in
    ``[1/2, 1)``): gradients of any magnitude, ``1e-300`` to ``1.5e308``,
    are solved at unit size.  When that scaling is exact (no entry falls
    below the normal range) the certificate is computed on the scaled ``G``
    and scaled back (exactly in the normal range; rounded outward -- value
    down, gap and cost up -- where they land below it); otherwise on ``G``
    itself.

    On real head gradients with thousands of rows the ALM does not reach a
    tight certificate within minutes; ``refine`` certifies ``tol=1e-6`` on the
    4096 largest rows of the MiniLM gradient projected to ``d = 32`` in
    31--45 s on 2 cores, at ``d = 384`` in 1--3 minutes, and at full
    vocabulary (``V = 30522``, ``d = 384``) in 11.5--13.5 minutes (trained) and 46--52 minutes
    (shipped), 5.4 GiB peak
    (``docs/theory/tension.md``, *Measured*).  There
    :func:`~hilbertgeom.tension_bracket` brackets ``T`` to ``5e-4``--``1e-3`` in
    1--2 minutes, with the same rigour.

    Merging equal rows.  If ``g_i = g_j``, some optimal potential has
    ``phi_i = phi_j``: the feasible set ``{D(Phi) <= 1}`` is convex and
    invariant under swapping rows ``i`` and ``j``, and so is the objective
    ``<G, Phi>`` (the two rows carry the same gradient), so the average of an
    optimal ``Phi`` and its swap is feasible, optimal, and has
    ``phi_i = phi_j``.  Each class of ``m`` equal rows is therefore solved as
    one row ``m g``; a flow ``y`` between two classes of sizes ``m_a, m_b``
    is spread as ``y / (m_a m_b)`` over their ``m_a m_b`` member pairs (same
    divergence per member, same cost).

    Examples
    --------
    >>> r = min_tension([[1.0, 0.0], [-1.0, 0.0]])     # V = 2: T = ||g_1||
    >>> round(r.value, 9), r.status
    (1.0, 'optimal')
    """
    X0 = _v.matrix(G, "G", min_rows=2)
    # exact power-of-two scaling to unit size (largest entry in [1/2, 1)) before anything
    # is summed: sums of entries near 1e308 would overflow
    amax = float(np.abs(X0).max())
    e2 = math.frexp(amax)[1] if amax > 0 else 0
    Xs0 = np.ldexp(X0, -e2)
    exact = bool(np.array_equal(np.ldexp(Xs0, e2), X0))
    if exact:
        try:
            Xs, centered = _v.zero_sum_matrix(Xs0, center)
        except ValueError:  # the message names G's own column sum, not the scaled one
            with np.errstate(over="ignore", invalid="ignore"):
                _v.zero_sum_matrix(X0, center)
            raise
        X = None  # not needed: the certificate is made on Xs and scaled back
    else:  # entries below the normal range after scaling: work on G itself
        with np.errstate(over="raise", invalid="raise"):
            try:
                X, centered = _v.zero_sum_matrix(X0, center)
            except FloatingPointError:
                raise ValueError("G spans more than the float64 range allows (entries near 1e308 next to "
                                 "subnormal ones); scale or truncate it") from None
        Xs = np.ldexp(X, -e2)
    tol = _v.scalar(tol, "tol", minimum=0.0, strict=True)
    max_iter = _v.integer(max_iter, "max_iter", minimum=1)
    if time_limit is not None:
        time_limit = _v.scalar(time_limit, "time_limit", minimum=0.0, strict=True)
    methods = ("auto", "alm", "refine", "cvxpy-potential", "cvxpy-flow")
    if method not in methods:
        raise ValueError(f"method must be one of {methods}; got {method!r}")
    V, d = Xs.shape
    if verbose is None:
        verbose = V > 500
    if not np.any(Xs) and (X is None or not np.any(X)):
        Z = np.zeros_like(Xs)
        flow = Flow(np.zeros((0, 2), np.intp), np.zeros((0, d)), Z.copy(), 0.0)
        return TensionResult(0.0, Z, flow, 0.0, "zero", method if method != "auto" else "alm", centered, 0, 0.0)
    if method.startswith("cvxpy"):
        Phi, I, J, Y, its = _cvxpy_solve(Xs, method.split("-")[1])
        res = _certify_scaled(X, Xs, e2, exact, Phi, I, J, Y, method=method, centered=centered, iterations=its,
                              tol=tol)
        if res.status != "optimal":
            res = _replace_status(res, "optimal" if res.relative_gap <= 1e-6 else "inaccurate")
        return res
    t0 = time.perf_counter()
    deadline = t0 + time_limit if time_limit is not None else math.inf
    # merge exactly equal rows (classes of the original rows)
    Xm = Xs if X is None else X  # equal rows of the problem as given (Xs may have underflowed)
    reps, inv, counts = equal_row_classes(Xm, np)
    uniq = Xm[reps] + 0.0
    merged = uniq.shape[0] < V
    if merged:
        Gm = (uniq if X is None else np.ldexp(uniq, -e2)) * counts[:, None]
        if verbose:
            _progress(f"  min_tension: {V} rows, {uniq.shape[0]} distinct (equal rows merged)")
    else:
        Gm = Xs
    if Gm.shape[0] == 1:  # every row equal: G = 0 up to rounding, handled above
        Gm = Xs
        merged = False
    auto_refine = method == "auto" and (Gm.shape[0] > _REFINE_MIN_V or _head_shaped(Gm))
    alg = "refine" if method == "refine" or auto_refine else "alm"
    res, best, why = _solve_and_lift(Gm, X, Xs, e2, exact, merged, inv, counts, tol=tol, max_iter=max_iter,
                                     verbose=verbose, deadline=deadline, centered=centered, method=alg)
    if merged and res.status != "optimal" and best.status == "optimal" and time.perf_counter() <= deadline:
        # The merged problem was solved to tol, but its residual, balanced over the classes,
        # costs more once spread over the rows (the rows' balanced flow of r_a / m_a is not
        # the classes' balanced flow of r_a): solve the rows as given.
        if verbose:
            _progress("  min_tension: the merged certificate loses its gap on the rows; solving without merging")
        res, best, why = _solve_and_lift(Xs, X, Xs, e2, exact, False, inv, counts, tol=tol, max_iter=max_iter,
                                         verbose=verbose, deadline=deadline, centered=centered, method=alg)
    if res.status == "optimal":
        return res
    if why == "time_limit" or time.perf_counter() > deadline:
        return _replace_status(res, "time_limit")
    err = SolverError(
        f"min_tension ({alg}): certified relative gap {res.relative_gap:.2e} > tol {tol:.1e}: still inaccurate "
        f"after {best.iterations} {'rounds' if alg == 'refine' else 'outer iterations'} (status "
        "'iteration_limit'); raise max_iter or tol, set a "
        "time_limit to get the best bracket returned, or try method='cvxpy-flow' for small V.  "
        "The best certificate is attached as .result",
        status="iteration_limit",
    )
    err.result = res
    raise err


@numpy_blas_threads  # SciPy's L-BFGS-B around NumPy's products: one BLAS pool at a time (_threads.py)
def _solve_and_lift(Gm, X, Xs, e2, exact, merged, inv, counts, *, tol, max_iter, verbose, deadline, centered,
                    method="alm"):
    """ALM or ``refine`` on ``Gm`` (the classes of equal rows when ``merged``), then the
    potential and the flow back in the original coordinates, rows and scale, certified
    there.  Returns ``(certificate, the solver's own certificate on Gm, why it stopped)``."""
    if method == "refine":
        Pm, Im, Jm, Ym, its, why = _refine_solve(Gm, tol=tol, max_rounds=max_iter, verbose=verbose,
                                                 deadline=deadline, report_scale=_fp.ldexp_inf(1.0, e2))
    else:
        best, W, scale, _, why = _alm_solve(Gm, tol=tol, max_outer=max_iter, verbose=verbose, deadline=deadline,
                                            report_scale=_fp.ldexp_inf(1.0, e2))
        Pm = best.potential @ W.T
        Ym = scale * (best.flow.vectors @ W.T)
        Im, Jm = best.flow.pairs[:, 0], best.flow.pairs[:, 1]
        its = best.iterations
    if merged:
        Phi = Pm[inv]
        I, J, Y = _spread_flow(Im, Jm, Ym, inv, counts)
    else:
        Phi, I, J, Y = Pm, Im, Jm, Ym
    res = _certify_scaled(X, Xs, e2, exact, Phi, I, J, Y, method=method, centered=centered,
                          iterations=its, tol=tol)
    if method == "refine":  # its own certificate on Gm is res itself unless classes were merged
        best = _certify(Gm, Pm, Im, Jm, Ym, method=method, centered=False, iterations=its, tol=tol) if merged else res
    return res, best, why


def _spread_flow(Im, Jm, Ym, inv, counts):
    """Lift a flow between classes of equal rows to the rows: ``y / (m_a m_b)``
    on each of the ``m_a m_b`` member pairs (same divergence per member, same
    cost).  A :class:`Weighted` flow stays one: weights ``w / (m_a m_b)`` on the
    class's base, lifted to its rows."""
    members = np.argsort(inv, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ma, mb = counts[Im], counts[Jm]
    reps = ma * mb
    e = np.repeat(np.arange(Im.size), reps)
    pos = np.arange(e.size) - np.repeat(np.cumsum(reps) - reps, reps)
    i = members[start[Im][e] + pos // mb[e]]
    j = members[start[Jm][e] + pos % mb[e]]
    if isinstance(Ym, Weighted):  # y_ji = w (b_j - b_i) = -y_ij: the order of a pair is free
        return np.minimum(i, j), np.maximum(i, j), Weighted(Ym.weights[e] / reps[e], Ym.base[inv])
    Y = Ym[e] / reps[e, None].astype(float)
    swap = i > j
    Y[swap] = -Y[swap]
    return np.minimum(i, j), np.maximum(i, j), Y


def _certify_scaled(X, Xs, e2, exact, Phi, I, J, Y, **kw):
    """The certificate for ``X`` from a solve of ``Xs = 2^-e2 X``: on ``Xs`` and
    scaled back by ``2^e2`` when the scaling was exact, else on ``X`` itself."""
    from dataclasses import replace

    if not exact:
        Yx = Weighted(Y.weights, np.ldexp(Y.base, e2)) if isinstance(Y, Weighted) else np.ldexp(Y, e2)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow shows as a non-finite bracket
            res = _certify(X, Phi, I, J, Yx, **kw)
    else:
        r = _certify(Xs, Phi, I, J, Y, **kw)
        with np.errstate(over="ignore"):
            flow = replace(r.flow.scaled(e2), cost=_fp.ldexp_up(r.flow.cost, e2))
        value = _fp.ldexp_down(r.value, e2)  # outward where the bracket lands below the normal range
        res = replace(r, value=value, gap=max(_fp.ldexp_up(r.gap, e2), flow.cost - value), flow=flow)
    if not (math.isfinite(res.value) and math.isfinite(res.flow.cost)):
        raise ValueError(_fp.T_OVERFLOW)
    return res


def _replace_status(res: TensionResult, status: str) -> TensionResult:
    from dataclasses import replace

    return replace(res, status=status)


def steepest_descent(G: np.typing.ArrayLike, /, *, eta: float = 1.0, center: bool = False,
                     tension: TensionResult | None = None, method: str = "auto", tol: float = 1e-9,
                     max_iter: int = 200, time_limit: float | None = None,
                     verbose: bool | None = None) -> np.ndarray:
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
    method, tol, max_iter, time_limit, verbose
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
        # Phi does not depend on the scale of G: solve at unit size (an exact power of two),
        # so an update is returned also where T(G) itself is beyond the float64 range
        X = _v.matrix(G, "G", min_rows=2)
        try:
            tension = min_tension(mul_pow2(X, unit_scale(X)), center=center, method=method, tol=tol,
                                  max_iter=max_iter, time_limit=time_limit, verbose=verbose)
        except ValueError as err:
            if not center and str(err).startswith("G must have zero column sums"):
                with np.errstate(over="ignore", invalid="ignore"):  # the message names G's own sums
                    _v.zero_sum_matrix(X, False)
            raise
    else:
        if not isinstance(tension, TensionResult):
            raise TypeError(f"tension must be a TensionResult from min_tension; got {type(tension).__name__}")
        shape = _v.matrix(G, "G", min_rows=2).shape
        if tension.potential.shape != shape:
            raise ValueError(f"tension was solved for shape {tension.potential.shape}; G has shape {shape}")
    return -e * tension.potential + 0.0
