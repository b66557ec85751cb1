"""Row placement: each row moved, one at a time, to its best point within 1 of
every other row, the lower bound of the cluster refinement.

The refinement's lower bound puts every row on one of a few hundred group
points.  On a real head gradient most rows are a near-duplicate tail (on the
MiniLM top 4096 at d = 384: 3912 rows of norm 3.5e-4, their deviations 2% of
that, 98% of their spread in 20 directions), and the loss of sharing points is
second order in each row's distance from its group's direction, summed over
thousands of rows: it is most of the refinement's gap.  Given the other rows'
points ``q_b``, a row's best point is a small convex problem,

.. math::

    \\max_\\phi\\ \\langle x, \\phi\\rangle \\quad\\text{s.t.}\\quad
    \\|\\phi - q_b\\| \\le r_b,

(the balls of the rows farther than ``1 - rho`` and a trust ball of radius
``rho`` about its own point), solved through its dual in the multipliers
``mu >= 0``:

.. math::

    g(\\mu) = \\frac{\\|x + Q^\\top \\mu\\|^2}{2 M} - \\tfrac12 \\sum_b \\mu_b (\\|q_b\\|^2 - r_b^2),
    \\qquad M = \\textstyle\\sum_b \\mu_b,

whose minimiser gives ``phi = (x + Q^T mu) / M``, whose gradient is
``(r_b^2 - ||phi - q_b||^2) / 2`` and whose Hessian is ``A A^T / M`` with rows
``a_b = q_b - phi``.  All three need only the Gram matrix ``Q Q^T`` and ``Q x``
(one product per row, then work in the number of balls, not in ``d``): a
projected Newton method (Newton on the multipliers off the bound, an Armijo
search along the projected path) takes 5-11 steps where L-BFGS-B took about
a hundred; L-BFGS-B finishes where Newton does not (degenerate duals: more
binding balls than the rank of the rows).  The move is then shortened to the largest
step that keeps every ball (a quadratic per ball) and checked against every
screened row (a row not screened is within ``1 - rho``, and the move is at most
``rho``), so each accepted move keeps the potential feasible: the rows can be
stopped at any time (a deadline) and the result is a feasible potential whose
value never decreased.  This is block coordinate ascent: it stops where no
single row can gain, not necessarily at the optimum; the certificate's gap
says how far that is.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._results import _U64, _rownorms

__all__: list[str] = []  # reached through min_tension(method="refine")

#: the trust radius: a row moves at most this far in one step (a ball like the others),
#: so only the rows farther than ``1 - _RADIUS`` from it can bound the step.  On the MiniLM
#: full vocabulary (trained, d = 384) the tail rows' best points are 0.04-0.08 away: at 0.05
#: nearly every step stopped at the trust ball and three passes gained what one pass at 0.2
#: gains (300 rows: 2.2345e-6 in 13.2 s against 2.2392e-6 in 5 s), with 166 balls a row, not 119
_RADIUS = 0.2
#: L-BFGS-B iterations per row where Newton does not finish (about 130 from equal multipliers on the MiniLM tail)
_ITERS = 500
#: projected Newton steps per row (then L-BFGS-B): on 300 rows of the MiniLM full vocabulary
#: (trained, d = 384, 165 balls a row, 31 multipliers off the bound) 299 finished in 5-11 steps,
#: 2.6 ms a row against 11.3 ms for L-BFGS-B on the same rows, never below its value (up to 6.5e-8
#: of |x| above); on the shipped gradient's tail (185 balls a row) 20 steps left 18% of the rows
#: to L-BFGS-B (up to 500 iterations each), 50 left 1%: 400 rows in 4.8 s instead of 11.0 s,
#: the same gain to 3e-4 of it
_NEWTON_ITERS = 50
#: the multipliers' lower bound (``M = sum mu > 0``) and the projected gradient at which a
#: row's dual is solved (the gradient is a half difference of squared distances of order 1)
_MU_MIN = 1e-12
_GTOL = 1e-12
#: or where the dual value ``g(mu)`` (an upper bound on the row's gain) is within this of the
#: gain of the point it gives, shortened into every ball: the rows lose at most 1e-9 of
#: ``sum |x_i|`` in all (about 2e-9 of ``T`` on the MiniLM tail); where the row cannot move, its
#: degenerate dual (more binding balls than the rows' rank) is proved so in a few steps
_GAP = 1e-9
#: a move that loses at most this share of |x_i| is kept: a row that gives up 2e-11 of its value
#: (a singleton tail row of the MiniLM top 4096) unblocked rows that then gained 1e-5 in all
_GIVE = 1e-7
#: a step whose check finds a screened row (formed again) farther than 1 is shortened by these
#: factors in turn: a step ends on its binding ball's sphere and the check's rounding put 45% of
#: the steps of the MiniLM full vocabulary's tail (shipped, d = 384) 1e-15 beyond it, and they
#: were dropped (1 - 1e-9 loses a billionth of the step's gain)
_SHORTEN = (1.0, 1.0 - 1e-9, 1.0 - 1e-6)
#: rows screened by one GEMM: at V = 30522, d = 384 forming every row's differences took
#: 55 of the 73 ms a row; a block of 128 costs about 1 ms a row and keeps (V, block) small
_BLOCK = 128
#: a row with more screened rows than this stays where it is: its dual's Gram matrix is
#: ``balls x balls`` and each Newton step solves a system of that size (the 184 large rows of the
#: MiniLM full vocabulary each have about 30,000 rows beyond ``1 - radius``: 7 GB a row, where a
#: tail row has about 170)
_MAX_BALLS = 4096
#: a ball within this share of its radius from a row's new point counts as touching it
#: (:func:`place_pass`'s open rows); a row solved to ``_GAP`` may stand a little inside the
#: spheres that bind it, and a ball counted in needlessly only costs a row placed again
_TOUCH = 1e-3


def _into_balls(qd: np.ndarray, dd: float, c0: np.ndarray) -> float:
    """The largest ``t`` with ``||t d - q_b||^2 <= r2_b`` for every ball, from ``Q d``,
    ``||d||^2 > 0`` and ``c0 = ||q_b||^2 - r2_b`` (``t = 0`` is inside all), at most 1."""
    b = -2.0 * qd
    disc = b * b - 4.0 * dd * c0
    return min(1.0, float(((-b + np.sqrt(np.maximum(disc, 0.0))) / (2.0 * dd)).min()))


def _dual_newton(x: np.ndarray, Q: np.ndarray, r2: np.ndarray, qq: np.ndarray,
                 mu0: np.ndarray) -> tuple[np.ndarray, bool]:
    """Projected Newton on the dual ``g`` from ``mu0``, in the Gram form: the
    multipliers, and whether it finished: the projected gradient within ``_GTOL``,
    or the dual value within ``_GAP`` of the value of the point it gives.  It
    stops unfinished at the step limit, on a singular system, or where no point
    of the projected path lowers ``g``.  ``qq``: the squared norms of the rows of ``Q``."""
    c0 = qq - r2
    K = Q @ Q.T
    qx = Q @ x
    xx = float(x @ x)

    def state(mu):
        M = float(mu.sum())
        Km = K @ mu
        zz = xx + 2.0 * float(mu @ qx) + float(mu @ Km)  # ||x + Q^T mu||^2
        qphi = (qx + Km) / M  # Q phi
        pp = zz / (M * M)  # ||phi||^2
        return zz / (2.0 * M) - 0.5 * float(mu @ c0), 0.5 * (r2 - (pp - 2.0 * qphi + qq)), M, qphi, pp

    def primal(mu, M, qphi, pp):
        """``<x, t phi>`` for the largest ``t <= 1`` keeping every ball: a feasible point's value."""
        if not pp > 0:
            return 0.0
        return max(_into_balls(qphi, pp, c0), 0.0) * (xx + float(mu @ qx)) / M

    mu = np.maximum(np.asarray(mu0, float), _MU_MIN)
    f, g, M, qphi, pp = state(mu)
    for _ in range(_NEWTON_ITERS):
        free = ~((mu <= _MU_MIN) & (g > 0))  # at the bound and pushing out: held there
        if float(np.abs(g[free]).max(initial=0.0)) <= _GTOL or f - primal(mu, M, qphi, pp) <= _GAP:
            return mu, True
        F = np.flatnonzero(free)
        qf = qphi[F]
        H = K[np.ix_(F, F)] - qf[:, None] - qf[None, :] + pp  # A_F A_F^T, a_b = q_b - phi
        H /= M
        H[np.diag_indices_from(H)] += 1e-13 * float(np.trace(H)) / F.size + 1e-300  # not a tolerance: a ridge
        try:
            p = -np.linalg.solve(H, g[F])
        except np.linalg.LinAlgError:
            return mu, False
        t = 1.0
        for _ in range(20):
            mt = mu.copy()
            mt[F] = np.maximum(mu[F] + t * p, _MU_MIN)
            ft, gt, Mt, qt, pt = state(mt)
            if ft < f and ft <= f + 1e-4 * float(g @ (mt - mu)):
                break
            t *= 0.5
        else:
            # no point of the path lowers g: more binding balls than the rank of the rows (the
            # dual is flat along a split of the multipliers), left to L-BFGS-B
            return mu, False
        mu, f, g, M, qphi, pp = mt, ft, gt, Mt, qt, pt
    return mu, False


def _best_point(x: np.ndarray, Q: np.ndarray, r2: np.ndarray, mu0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step ``t d`` toward the best point of ``<x, .>`` in the balls
    ``||d - q_b||^2 <= r2_b`` (``0`` inside every ball), shortened to stay in
    all of them, and the multipliers.  ``x`` has unit norm.  Projected Newton on
    the dual; L-BFGS-B from its multipliers where Newton does not finish."""
    from scipy.optimize import Bounds, minimize

    qq = np.einsum("ij,ij->i", Q, Q)
    c0 = qq - r2
    mu, solved = _dual_newton(x, Q, r2, qq, mu0)
    if not solved:

        def fg(mu):
            M = float(mu.sum())
            z = x + Q.T @ mu
            phi = z / M
            return (float(z @ z) / (2.0 * M) - 0.5 * float(mu @ c0),
                    0.5 * (r2 - (qq - 2.0 * (Q @ phi) + float(phi @ phi))))

        r = minimize(fg, mu, jac=True, method="L-BFGS-B", bounds=Bounds(_MU_MIN, np.inf),
                     options={"maxiter": _ITERS, "ftol": 1e-15, "gtol": _GTOL})
        mu = r.x
    d = (x + Q.T @ mu) / float(mu.sum())
    a = float(d @ d)
    if not a > 0 or not np.isfinite(a):
        return np.zeros_like(x), mu
    t = _into_balls(Q @ d, a, c0) * (1.0 - 1e-12)  # not a tolerance: just inside the nearest sphere
    return (t * d if t > 0 else np.zeros_like(d)), mu


def place_rows(X: np.ndarray, Phi: np.ndarray, rows: np.ndarray, *, deadline: float = math.inf,
               radius: float = _RADIUS) -> tuple[np.ndarray, float]:
    """:func:`place_pass` without the rows left open: ``(potential, value gained)``."""
    Phi, gain, _ = place_pass(X, Phi, rows, deadline=deadline, radius=radius)
    return Phi, gain


def place_pass(X: np.ndarray, Phi: np.ndarray, rows: np.ndarray, *, deadline: float = math.inf,
               radius: float = _RADIUS) -> tuple[np.ndarray, float, np.ndarray]:
    """Each of ``rows`` in turn moved to its best point given all the others
    (Gauss-Seidel: a later row sees the earlier ones' new points).  ``Phi`` must
    be feasible (diameter at most 1); the result is, up to the rounding of one
    distance per pair (the certificate divides by the exact diameter).  A move
    is kept only where it raises ``<x_i, phi_i>`` and no row is farther than 1
    from the new point.  A row with more than ``_MAX_BALLS`` rows that can bound its
    move is not moved.  Returns the new potential, the value gained and the rows
    left open (below).

    The rows that can bound a move (farther than ``1 - radius``) are screened
    ``_BLOCK`` rows at a time, by one GEMM ``Phi Phi_B^T`` and the squared norms,
    with a margin that covers the GEMM's rounding: a row it leaves out is within
    ``1 - radius`` of the row, and a move (at most ``radius``) keeps it within 1.
    Each screened row's difference is formed exactly and checked after the move.
    Within a block, a moved row's distances to the rows still to come are made
    again, so the screening is that of the current points.

    The rows left open, in the order of ``rows``, are those a later pass could still
    move.  A row placed on its best point stays there while the balls it touches
    stay where they are (its multipliers still hold, and a ball it does not touch has
    none); so a row is left open where its trust ball or a row it touches (within
    ``_TOUCH`` of distance 1) moved after it, where its step was not kept, or where
    the deadline came first.  A row with more than ``_MAX_BALLS`` screened rows is
    never open (it is never moved)."""
    Phi = np.array(Phi, dtype=np.float64, copy=True)
    d = Phi.shape[1]
    n = _rownorms(X)
    gain = 0.0
    nn = np.einsum("ij,ij->i", Phi, Phi)
    far2 = (1.0 - radius) ** 2
    slack = 4.0 * (d + 2) * _U64  # |fl(a + b - 2 <p, q>) - ||p - q||^2| <= slack (a + b)
    prev_idx, prev_mu = np.zeros(0, np.intp), np.zeros(0)
    rows = np.asarray(rows, np.intp)
    rows = rows[n[rows] > 0]
    # when each row was placed and last moved (its position in the pass), the rows each
    # placed row touches, and the rows that are open whatever moves later
    placed_at = np.full(Phi.shape[0], -1, np.intp)
    moved_at = np.full(Phi.shape[0], -1, np.intp)
    touched: dict[int, np.ndarray] = {}
    stuck: list[int] = []
    reached = 0  # rows[:reached] were looked at before the deadline
    touch2 = (1.0 - _TOUCH) ** 2
    for start in range(0, rows.size, _BLOCK):
        if time.perf_counter() > deadline:
            break
        blk = rows[start : start + _BLOCK]
        D2 = Phi @ Phi[blk].T  # becomes the squared distances, (V, block)
        D2 *= -2.0
        D2 += nn[:, None]
        D2 += nn[blk][None, :]
        for k, i in enumerate(blk):
            if time.perf_counter() > deadline:
                break
            col = D2[:, k]
            sel = np.flatnonzero(col > far2 - slack * (nn + nn[i]))
            sel = sel[sel != i]
            at = start + k
            reached = at + 1
            if sel.size > _MAX_BALLS:
                continue
            placed_at[i] = at
            Q = np.vstack([Phi[sel] - Phi[i], np.zeros((1, d))])
            r2 = np.append(np.ones(sel.size), radius * radius)
            # warm start: the previous row's multipliers on the rows both screened (rows of one
            # group come in turn and share their neighbours), else equal multipliers
            mu0 = np.ones(Q.shape[0])
            if prev_idx.size:
                pos = np.searchsorted(prev_idx, sel)
                pos = np.minimum(pos, prev_idx.size - 1)
                hit = prev_idx[pos] == sel
                if hit.any():
                    mu0[:-1] = np.where(hit, prev_mu[pos], 1e-12)  # not a tolerance: at the bound
                    mu0[-1] = prev_mu[-1]
            step, mu = _best_point(X[i] / n[i], Q, r2, mu0)
            prev_idx, prev_mu = sel, mu
            g = float(X[i] @ step)
            if not g >= -_GIVE * n[i] or not np.any(step):
                touched[i] = sel[np.einsum("ij,ij->i", Q[:-1], Q[:-1]) >= touch2]
                continue
            # the screened rows' differences from the new point: the step ends on a binding ball's
            # sphere, and formed again a distance may be a rounding above 1; then shortened a little
            for shorten in _SHORTEN:
                Qs = Q[:-1] - shorten * step
                sq = np.einsum("ij,ij->i", Qs, Qs)
                if float(sq.max(initial=0.0)) <= 1.0:
                    break
            else:
                stuck.append(i)
                continue
            step = shorten * step
            touched[i] = sel[sq >= touch2]
            if float(step @ step) >= (radius * (1.0 - _TOUCH)) ** 2:
                stuck.append(i)  # stopped by its trust ball: it may go on
            g = float(X[i] @ step)
            moved_at[i] = at
            Phi[i] += step
            nn[i] = float(Phi[i] @ Phi[i])
            gain += g
            later = blk[k + 1 :]
            D2[i, k + 1 :] = nn[i] + nn[later] - 2.0 * (Phi[later] @ Phi[i])
    open_ = np.zeros(Phi.shape[0], bool)
    open_[stuck] = True
    open_[rows[reached:]] = True  # not reached before the deadline
    for i, nb in touched.items():
        if nb.size and int(moved_at[nb].max()) > placed_at[i]:
            open_[i] = True
    return Phi, gain, rows[open_[rows]]
