"""Quasi-Newton on the scalar-weight dual over every pair: the groups' problem of
the cluster refinement at high rank.

.. math::

    T(S) = \\min_{\\lambda \\ge 0}\\ f(\\lambda), \\qquad
    f(\\lambda) = \\tfrac12 \\sum_{a<b} \\lambda_{ab} + \\tfrac12 \\operatorname{tr}(S^\\top L_\\lambda^+ S),

``Phi = L_lambda^+ S``, ``df/dlambda_ab = (1 - ||phi_a - phi_b||^2) / 2`` (the
same function as :mod:`hilbertgeom.tension.newton`, there on a support, here on
all ``m (m - 1) / 2`` pairs of ``m`` rows).  One evaluation is one dense
``m x m`` Cholesky factorisation and two ``m x m x d`` products, so a quasi-Newton
method with the bound ``lambda >= 0`` takes thousands of evaluations in the time a
Newton step on a support of 10^4 pairs takes one, and it needs no support: the
pairs that carry flow at the optimum are the ones whose bound is not active.

The quasi-Newton method is the projected L-BFGS of :mod:`hilbertgeom.tension.lbfgs` with
its initial Hessian scaled by each weight (the curvature of ``f`` in ``lambda_ab`` is at
most ``||phi_a - phi_b||^2 / lambda_ab``, as for the weights of the refinement's flows).
SciPy's L-BFGS-B did this before: on the first groups of the shipped MiniLM gradient at full
vocabulary (256 groups, to 1e-8) it took 2,980 evaluations and 37.8 s to the bracket where
Newton-CG takes over, and the whole solve 170.1 s; the projected L-BFGS reached it in 4.1 s
and the solve took 89.1 s (to 1.7e-10), and on the 284 groups of round 2 (from round 1's
weights, to 3.2e-7) 84.5 s against 111.6 s; without the scaling 203.0 s on the first
(2026-12-07, ``docs/theory/tension.md``).

Each iterate is a certificate: the flow ``y_ab = lambda_ab (phi_a - phi_b)``
balances ``S`` (up to the solve's rounding, which the certificate carries), and
``Phi`` brought to diameter 1 by :func:`~hilbertgeom.tension.bracket._repair` is
a feasible potential.  Measured on the 382 groups of the full MiniLM vocabulary's
second round (rank 381): a relative gap of 3.9e-7 in 154 s where the ALM took
15 minutes to reach 4e-7 (``docs/theory/tension.md``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ._results import TensionResult, Weighted, _certify
from .bracket import _repair
from .lbfgs import projected_lbfgs

__all__: list[str] = []  # reached through min_tension(method="refine")

#: evaluations between two checks of the bracket (a check costs about 20 evaluations)
_CHECK = 100
#: L-BFGS history (10 of 5, 10, 17, 30 was fastest to 1e-6 on the 382 groups, with SciPy's L-BFGS-B)
_HISTORY = 10
#: the bracket at which Newton on the support takes over (where the support is small)
_NEWTON_FROM = 1e-3
#: Newton starts on the pairs whose weight is above this share of the largest: on the 194
#: groups of the shipped MiniLM top 4096 at d = 384, the 171 pairs below 1e-8 of it (of 1600)
#: kept Newton at 4.7e-8; from 1e-8 to 1e-4 it reached 1e-10 in 20 s (docs/theory/tension.md)
_FLOOR = 1e-6
#: Newton on the support's dense Hessian (tension/newton.py) where the support has at most this many
#: pairs, Newton-CG over every pair (tension/newton_cg.py) where it has more: on the 291 groups of
#: the shipped MiniLM full vocabulary's round 2 (support 11,323 pairs), asked for 3.5e-7, the dense
#: Newton took 456 s to 2.7e-7 and Newton-CG 119 s to 1.6e-7; on the 194 groups of its top 4096
#: at d = 384 (1,600 pairs) the dense Newton reaches 1e-10 in 20 s.  The cut between is not measured
_DENSE_SUPPORT = 4000


@dataclass
class _Best:
    """The best of the iterates so far: the feasible potential ``P`` of value
    ``lower``, the weights ``x`` of flow cost ``upper`` with their ``Phi = L^+ S``,
    and the evaluations made."""

    x: np.ndarray
    lower: float = -math.inf
    upper: float = math.inf
    P: np.ndarray | None = None
    Phi: np.ndarray | None = None
    evals: int = 0


class _StopSolveError(Exception):
    """Raised inside the objective to leave the L-BFGS: ``tol`` met or the deadline passed."""


def _flat_pairs(iu, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The flat positions in an ``m x m`` matrix of the pairs ``iu`` (``a < b``) and of their
    transposes ``(b, a)``."""
    return iu[0] * m + iu[1], iu[1] * m + iu[0]


def _weights_matrix(x: np.ndarray, iu, m: int) -> np.ndarray:
    """The symmetric ``m x m`` matrix of the weights ``x`` of the pairs ``iu``, written at their
    flat positions: at ``m = 256`` (32,640 pairs) 0.4 ms where indexing by the pair of index
    arrays and adding the transpose took 2 ms, the same matrix bit for bit (2026-12-07); every
    Hessian product of Newton-CG makes one (:mod:`hilbertgeom.tension.newton_cg`)."""
    up, lo = _flat_pairs(iu, m)
    lam = np.zeros(m * m)
    lam[up] = x
    lam[lo] = x
    return lam.reshape(m, m)


def _potential(lam: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``Phi = L_lambda^+ S`` for centred ``S``: ``(L + 11^T/m)^{-1} S`` (nonsingular
    on a connected graph; a ridge at rounding level where weights at the bound
    disconnect it)."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    m = lam.shape[0]
    L = -lam
    L[np.diag_indices(m)] = lam.sum(axis=1)
    L += 1.0 / m
    try:
        return cho_solve(cho_factor(L, check_finite=False), S, check_finite=False)
    except LinAlgError:
        L[np.diag_indices(m)] += 1e-12 * float(np.abs(L).max()) + 1e-300
        return cho_solve(cho_factor(L, check_finite=False), S, check_finite=False)


def weight_dual(S: np.ndarray, *, tol: float, deadline: float = math.inf, lam0: np.ndarray | None = None,
                method: str = "dual", max_evals: int = 100_000) -> TensionResult:
    """The certified minimum tension of the centred rows ``S`` (``m x d``, ``m`` at
    most a few thousand) by projected L-BFGS on ``f``, polished by Newton on the support.

    The L-BFGS runs until the checked bracket is within ``max(tol, 1e-3)``; then, where
    its support (the pairs whose weight is above ``_FLOOR`` of the largest) has at
    most ``_DENSE_SUPPORT`` pairs, Newton on that
    support (:func:`~hilbertgeom.tension.newton.support_newton`) takes it to ``tol``
    in a few dozen steps; where it has more (a dense Newton step costs the cube of the
    support), primal-dual Newton-CG over every pair
    (:func:`~hilbertgeom.tension.newton_cg.newton_cg`, Hessian products by ``m x m x m``
    GEMMs) does.  Where the Newton method does not narrow the bracket, the L-BFGS goes on.

    ``lam0``: an ``m x m`` symmetric non-negative start, else
    all weights equal; either is first scaled to its best multiple (``f(c lam)``
    is least at ``c^2 = tr(S^T L_lam^+ S) / sum lam``).  Stops when the bracket is
    within ``tol``, at ``deadline``, after ``max_evals`` evaluations, or when
    the L-BFGS makes no more progress (its objective no lower after a run).
    Returns the certificate of the best potential and the cheapest flow
    (``method`` is its label, an internal one by default: the caller reports
    its own)."""
    from .newton import _MAX_SUPPORT, support_newton
    from .newton_cg import newton_cg

    m = S.shape[0]
    iu = np.triu_indices(m, 1)
    up = _flat_pairs(iu, m)[0]
    if lam0 is None:
        x = np.full(iu[0].size, 1.0)
    else:
        x = np.maximum(np.asarray(lam0, float)[iu], 0.0)
        x += 1e-9 * float(x.mean())  # every pair starts off the bound: the graph is connected
    Phi = _potential(_weights_matrix(x, iu, m), S)
    c = math.sqrt(max(float(np.sum(S * Phi)), 0.0) / float(x.sum())) if x.sum() > 0 else 1.0
    x *= c if c > 0 else 1.0
    st = _Best(x.copy())

    def gap() -> float:
        lo = st.lower
        return (st.upper - lo) / lo if lo > 0 else math.inf

    def evaluate(x):
        """``Phi = L^+ S`` and the squared distances of its pairs (in ``iu`` order)."""
        Phi = _potential(_weights_matrix(x, iu, m), S)
        sq = np.einsum("ij,ij->i", Phi, Phi)
        d2 = sq[iu[0]] + sq[iu[1]]
        d2 -= 2.0 * (Phi @ Phi.T).take(up)  # at the pairs' flat positions (see _weights_matrix)
        return Phi, np.maximum(d2, 0.0, out=d2)

    def check(x, Phi, d2, target):
        Q = _repair(Phi, S)
        lower = float(np.sum(S * Q))
        upper = float(np.sum(x * np.sqrt(d2)))
        if lower > st.lower:
            st.lower, st.P = lower, Q
        if upper < st.upper:
            st.upper, st.x, st.Phi = upper, x.copy(), Phi
        return gap() <= 0.5 * target  # half: the certificate widens it

    def stop(target) -> bool:
        return gap() <= 0.5 * target or time.perf_counter() > deadline or st.evals >= max_evals

    def lbfgs(x, target):
        def fg(x):
            st.evals += 1
            Phi, d2 = evaluate(x)
            f = 0.5 * float(x.sum()) + 0.5 * float(np.sum(S * Phi))
            if st.evals % _CHECK == 0 and (check(x, Phi, d2, target) or stop(target)):
                raise _StopSolveError
            return f, 0.5 - 0.5 * d2

        f_prev = math.inf
        while True:
            try:
                x, fun, _ = projected_lbfgs(fg, x, 0.0, maxcor=_HISTORY, max_evals=max(max_evals - st.evals, 1),
                                            scaled=True)
            except _StopSolveError:
                return
            Phi, d2 = evaluate(x)
            if check(x, Phi, d2, target) or stop(target) or not fun < f_prev:  # no progress: rounding level
                return
            f_prev = fun

    def support(floor=0.0):
        """The pairs of the best weights above ``floor`` of the largest, and those weights."""
        on = st.x > floor * float(st.x.max(initial=0.0))
        return iu[0][on].astype(np.intp), iu[1][on].astype(np.intp), st.x[on]

    def best_phi() -> np.ndarray:
        return st.Phi if st.Phi is not None else evaluate(st.x)[0]

    def certificate():
        # scalar-weighted (its vectors made chunk by chunk, never all at once): after Newton-CG
        # every pair has a weight, m (m - 1) / 2 x d floats as vectors (1.6 GB at m = 1024, d = 384)
        I, J, w = support()
        Phi = best_phi()
        return _certify(S, st.P if st.P is not None else Phi, I, J, Weighted(w, Phi),
                        method=method, centered=False, iterations=st.evals, tol=tol)

    lbfgs(x, max(tol, _NEWTON_FROM))
    best = certificate()
    if best.relative_gap > tol and time.perf_counter() < deadline and st.evals < max_evals:
        start_gap = best.relative_gap
        I, J, w = support(_FLOOR)
        if 0 < I.size <= min(_DENSE_SUPPORT, _MAX_SUPPORT):
            box = [best]

            def certify(P, Ic, Jc, Yc):
                # the iterate's potential repaired, as the L-BFGS's are: a Newton iterate's pairs
                # outside the support lie beyond 1, and dividing by its diameter alone lost
                # up to 5e-3 of the lower bound on the shipped MiniLM's 291 groups (repaired: 5e-7 in 437 s)
                c = _certify(S, _repair(P, S), Ic, Jc, Yc, method=method, centered=False, iterations=st.evals,
                             tol=tol)
                if c.relative_gap < box[0].relative_gap:
                    box[0] = c
                return box[0].relative_gap

            try:
                support_newton(S, I, J, w, best_phi(), tol=tol, deadline=deadline, certify=certify,
                               gap=best.relative_gap)
            except (np.linalg.LinAlgError, ValueError):  # a singular or non-finite step: the L-BFGS goes on
                pass
            best = box[0]
        elif I.size > 0:
            # a support too large for the dense Hessian: Newton-CG over every pair, its Hessian
            # products by m x m x m GEMMs (tension/newton_cg.py; on the 428 groups of the shipped
            # MiniLM full vocabulary's third round, support 36,238 pairs, 7.0e-9 in 281 s where
            # SciPy's L-BFGS-B alone had 2.9e-7 after 1500 s)
            st.evals += newton_cg(S, st.x, gap=best.relative_gap, deadline=deadline,
                                  max_evals=max_evals - st.evals,
                                  check=lambda lam, Phi, d2: check(lam, Phi, d2, tol) or stop(tol))
            c = certificate()
            best = c if c.relative_gap < best.relative_gap else best
        # the L-BFGS goes on where Newton did not run or did not narrow the bracket (where it did
        # and stopped short, SciPy's L-BFGS-B from its own iterate trailed it: 100 s without catching
        # up from 3.8e-4 to Newton's 4.7e-8 on the 194 shipped groups)
        if best.relative_gap > tol and best.relative_gap >= start_gap and time.perf_counter() < deadline:
            lbfgs(st.x, tol)
            c = certificate()
            best = c if c.relative_gap < best.relative_gap else best
    return best
