"""The scalable minimum-tension solver and the public entry points
:func:`min_tension` and :func:`steepest_descent`."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as _v
from ..exceptions import SolverError
from ._results import (
    _U64,
    Flow,
    TensionResult,
    _certify,
    _divergence,
    _incidence,
    _rownorms,
)
from .bounds import rownorm
from .reference import _cvxpy_solve

__all__ = ["min_tension", "steepest_descent"]


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
