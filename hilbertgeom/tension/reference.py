"""The reference conic programs (cvxpy / CLARABEL) over all pairs, in the
potential form and in the flow form.  CPU only, small ``V`` only: they build
``V (V - 1) / 2`` second-order cones."""

from __future__ import annotations

import numpy as np

from ..exceptions import SolverError
from ._results import _rownorms

__all__: list[str] = []


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
        Phi = np.asarray(P.value, dtype=float)
        Yv = -np.asarray(cons[1].dual_value[1], dtype=float).reshape(m, d)
        return Phi, iu, ju, Yv, its
    Yv = np.asarray(Y.value, dtype=float)
    Phi = np.asarray(cons[0].dual_value, dtype=float)
    if np.sum(G * Phi) < 0:
        Phi = -Phi
    return Phi, iu, ju, Yv, its
