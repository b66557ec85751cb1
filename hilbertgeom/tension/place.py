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

A pass over many rows first places at once those no two of which are farther
apart than ``1 - rho`` (:func:`_place_batch`): each moves at most ``rho / 2``, so
they stay within 1 of each other, and each is bounded by the balls of the other
rows farther than ``1 - rho`` from any of them (on the MiniLM tail the large rows
alone).  Their duals are solved together (:class:`_Duals`, :func:`_batch_newton`):
``Q Q^T`` of one row is the common ``C C^T`` less a rank-two term in its own point,
so a step costs one GEMM over all rows and, per row, a system in its free
multipliers, solved in blocks of rows sorted by their number, the blocks in one
thread per core.  On the shipped MiniLM gradient's tail at full vocabulary (round 2,
d = 384: 30,113 of 30,338 rows placed at once, 184 balls, about 130 free multipliers a
row at the end) the pass took 135.5 s with two threads against 186.6 s in one (both
profiled), the gain equal to 4.4e-7 of itself, the lower bound to 6e-12 (2 cores, 2026-12-06).
The rows whose Newton does not finish, and the others, are then placed one at a time.

A later round places the same tail rows again among balls that moved little; given the
multipliers the last placement recorded (:class:`Multipliers`), each row's dual starts from
its own.  On round 3's placement of that gradient they took the batched Newton from 145.3 s
to 33.9 s, the placement from 176.2 s to 71.5 s, the value the same to 5e-10 of itself
(2 cores, 2026-12-07).  A row does not start as well from another row of its group: from one
solved row of each group, 139.7 s.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .._threads import blocks_in_threads
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
#: degenerate dual (more binding balls than the rows' rank) is proved so in a few steps.  In
#: :func:`_batch_newton` a point of the line search finished by this test is taken even where its dual
#: value is not lower: next to the optimum the Newton step's predicted decrease is below the
#: rounding of ``g``, and the order of the sums decides whether it is seen.  On a row of the
#: ``hub_tail`` test shape in a batch (tests/test_place.py), the gap was 1.007e-9 before the last
#: step, whose predicted decrease was 2.4e-17 at ``g = 0.07``; every point of the path came out
#: 1.4e-17 to 6.9e-17 above ``g`` on one machine's BLAS, and the row was left unfinished, where the
#: full step's gap was 1.9e-13 (and the row alone finished there)
_GAP = 1e-9
#: a move that loses at most this share of |x_i| is kept: a row that gives up 2e-11 of its value
#: (a singleton tail row of the MiniLM top 4096) unblocked rows that then gained 1e-5 in all
_GIVE = 1e-7
#: a step whose check finds a screened row (formed again) farther than 1 is shortened by these
#: factors in turn: a step ends on its binding ball's sphere and the check's rounding put 45% of
#: the steps of the MiniLM full vocabulary's tail (shipped, d = 384) 1e-15 beyond it, and they
#: were dropped (1 - 1e-9 loses a billionth of the step's gain).  A short step straight into its
#: ball needs more: the shortening must take back the rounding, a few ``u``, out of the step's
#: own approach to the sphere.  In the grouped test case of tests/test_place.py, with OpenBLAS's
#: kernels for processors without FMA, a row 1.9e-10 inside its ball took a step of 1.1e-10 toward
#: it, and formed again it was 4.4e-16 beyond at 1 - 1e-9 and 2.2e-16 at 1 - 1e-6, inside at
#: 1 - 1e-3 (a thousandth of the step's gain given up, where all of it was)
_SHORTEN = (1.0, 1.0 - 1e-9, 1.0 - 1e-6, 1.0 - 1e-3)
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
#: a pass over at least this many rows first places them all at once (:func:`_place_batch`):
#: the rows no two of which are farther apart than ``1 - radius``, each against the other rows
#: that are (the same screen as one at a time), with half the trust radius
_BATCH_MIN = 256
#: the balls common to the rows placed at once: at most this many rows (else one at a time)
_BATCH_BALLS = 2048
#: rows placed at once per chunk (the duals are ``chunk x balls`` arrays), and the rows whose
#: free-set systems are solved together (sorted by their number of free multipliers)
_BATCH_CHUNK = 2048
_SOLVE_BLOCK = 256
#: and at most this many entries in a block's systems (128 MiB; one block a thread, hilbertgeom/_threads.py)
_SOLVE_ENTRIES = 1 << 24
#: rows stopped by their trust ball are placed at once again, at most this many times a pass
_BATCH_REPEAT = 4


def _into_balls(qd: np.ndarray, dd: float, c0: np.ndarray) -> float:
    """The largest ``t`` with ``||t d - q_b||^2 <= r2_b`` for every ball, from ``Q d``,
    ``||d||^2 > 0`` and ``c0 = ||q_b||^2 - r2_b`` (``t = 0`` is inside all), at most 1:
    :func:`_into_balls_rows` for one row."""
    return float(_into_balls_rows(qd[None, :], np.array([dd], dtype=np.float64), c0[None, :])[0])


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


def _into_balls_rows(qd: np.ndarray, dd: np.ndarray, c0: np.ndarray) -> np.ndarray:
    """:func:`_into_balls` for many rows at once (``qd``, ``c0``: rows x balls; ``dd``: rows,
    positive)."""
    b = -2.0 * qd
    disc = b * b - 4.0 * dd[:, None] * c0
    return np.minimum(1.0, ((-b + np.sqrt(np.maximum(disc, 0.0))) / (2.0 * dd[:, None])).min(axis=1))


class _Duals:
    """The duals ``g`` of many rows at once over common balls (:func:`_place_batch`): ``kb`` balls
    of radius 1 centred on the rows of ``C`` and a trust ball of radius ``rho`` about each row's
    point ``p`` (the last multiplier).  In coordinates about ``p`` (``q_b = c_b - p``, the trust
    ball's centre 0) the Gram matrix ``K`` is ``C C^T - C p 1^T - 1 p^T C^T + |p|^2`` on the balls
    of rows and 0 on the trust ball's row and column: it is never formed per row, only its
    products ``K mu`` (one GEMM with ``C C^T`` for all rows) and its free-set blocks."""

    def __init__(self, C: np.ndarray, P: np.ndarray, x: np.ndarray, rho: float):
        kb = C.shape[0]
        self.kb, self.m = kb, kb + 1
        self.HH = np.zeros((kb + 2, kb + 2))  # C C^T, then zero rows: the trust ball's and the padding's
        self.HH[:kb, :kb] = C @ C.T
        self.Cp = np.zeros((P.shape[0], kb + 1))
        self.Cp[:, :kb] = P @ C.T
        self.pp = np.einsum("ij,ij->i", P, P)
        self.qx = np.zeros_like(self.Cp)
        self.px = np.einsum("ij,ij->i", P, x)
        self.qx[:, :kb] = x @ C.T - self.px[:, None]
        self.qq = np.zeros_like(self.Cp)
        self.cc = np.diag(self.HH)[:kb].copy()  # the balls' squared norms
        self.qq[:, :kb] = self.cc - 2.0 * self.Cp[:, :kb] + self.pp[:, None]
        self.r2 = np.append(np.ones(kb), rho * rho)
        self.c0 = self.qq - self.r2

    def kmul(self, idx: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """``K mu`` for the rows ``idx``."""
        kb = self.kb
        mh = mu[:, :kb]
        s = mh.sum(axis=1)
        cp = self.Cp[idx, :kb]
        out = np.zeros_like(mu)
        out[:, :kb] = mh @ self.HH[:kb, :kb]
        out[:, :kb] -= cp * s[:, None]
        out[:, :kb] += (self.pp[idx] * s - np.einsum("ij,ij->i", cp, mh))[:, None]
        return out

    def state(self, idx: np.ndarray, mu: np.ndarray):
        """``(g, gradient, M, Q phi, |phi|^2)`` of the rows ``idx`` at ``mu`` (as :func:`_dual_newton`)."""
        M = mu.sum(axis=1)
        Km = self.kmul(idx, mu)
        qx = self.qx[idx]
        zz = 1.0 + 2.0 * np.einsum("ij,ij->i", mu, qx) + np.einsum("ij,ij->i", mu, Km)
        qphi = (qx + Km) / M[:, None]
        pp = zz / (M * M)
        f = zz / (2.0 * M) - 0.5 * np.einsum("ij,ij->i", mu, self.c0[idx])
        g = 0.5 * (self.r2 - (pp[:, None] - 2.0 * qphi + self.qq[idx]))
        return f, g, M, qphi, pp

    def primal(self, idx, mu, M, qphi, pp) -> np.ndarray:
        """``<x, t phi>`` for the largest ``t <= 1`` keeping every ball (0 where ``phi = 0``)."""
        ok = pp > 0
        t = np.zeros(idx.size)
        if ok.any():
            t[ok] = np.maximum(_into_balls_rows(qphi[ok], pp[ok], self.c0[idx[ok]]), 0.0)
        return t * (1.0 + np.einsum("ij,ij->i", mu, self.qx[idx])) / M

    def directions(self, idx, mu, free, g, M, qphi, pp) -> np.ndarray:
        """The Newton directions on each row's free multipliers (0 on the others), the rows
        sorted by their number of free multipliers and solved ``_SOLVE_BLOCK`` at a time, the
        blocks in one thread per core, at most four (:func:`~hilbertgeom._threads.blocks_in_threads`:
        one call solves a batch on one core); a row whose system is singular gets 0 (its line
        search then fails).  The system of a row
        is ``A_F A_F^T p = -M g_F`` (the Hessian times ``M``) with ``(A A^T)_ab = <c_a - z, c_b -
        z>`` for the new point ``z = p + phi``: the gathered ``C C^T`` less ``w_a + w_b``, ``w_a =
        <c_a, z> - |z|^2 / 2``; the trust ball's centre is the row's own point, and its row and
        column are set apart.  Padded places point to a zero row of the gathered matrix, with 1
        on the diagonal; the ``w`` subtracted there are set back to 0."""
        kb, m = self.kb, self.m
        out = np.zeros_like(g)
        count = free.sum(axis=1)
        order = np.argsort(count, kind="stable")
        HH = self.HH
        # <c_a, z> = <c_a, p> + <q_a, phi> + <p, phi> (q_a = c_a - p), |z|^2 = |p|^2 + 2 <p, phi> + |phi|^2,
        # and <p, phi> = (<p, x> + sum_a mu_a <p, c_a - p>) / M
        kb1 = slice(0, kb)
        pp0 = self.pp[idx]
        pphi = (self.px[idx] + np.einsum("ij,ij->i", mu[:, kb1], self.Cp[idx, kb1] - pp0[:, None])) / M  # <p, phi>
        zz = pp0 + 2.0 * pphi + pp  # |z|^2
        w = np.empty((idx.size, m))
        w[:, kb1] = self.Cp[idx, kb1] + qphi[:, kb1] + (pphi - 0.5 * zz)[:, None]  # <c_a, z> - |z|^2 / 2
        w[:, kb] = pp0 + pphi - 0.5 * zz  # <p, z> - |z|^2 / 2
        blocks = []
        s = 0
        while s < order.size:
            f = int(count[order[min(s + _SOLVE_BLOCK, order.size) - 1]])  # the block's largest
            r = order[s : s + max(1, min(_SOLVE_BLOCK, _SOLVE_ENTRIES // max(f * f, 1)))]
            s += r.size
            blocks.append(r)

        def solve(r: np.ndarray) -> None:
            f = int(count[r].max())
            if f == 0:
                return
            pos = np.argsort(~free[r], axis=1, kind="stable")[:, :f]  # the free ones first, in order
            valid = np.arange(f)[None, :] < count[r][:, None]
            pos = np.where(valid, pos, m)  # padding: the zero row
            wf = np.take_along_axis(np.append(w[r], np.zeros((r.size, 1)), axis=1), pos, axis=1)
            H = HH.ravel().take(pos[:, :, None] * (m + 1) + pos[:, None, :])  # twice as fast as 2-d fancy indexing
            H -= wf[:, :, None]
            H -= wf[:, None, :]
            tr = pos == kb  # the trust ball: <p - z, c_b - z> = <p, c_b> - <p, z> - <c_b, z> + |z|^2
            if tr.any():
                k, j = np.nonzero(tr)
                cpk = np.zeros((k.size, m + 1))
                cpk[:, :kb] = self.Cp[idx[r[k]], :kb]
                cpk[:, kb] = self.pp[idx[r[k]]]
                row = np.take_along_axis(cpk, pos[k], axis=1)
                row = np.where(valid[k], row, 0.0)
                H[k, j, :] += row
                H[k, :, j] += row
                H[k, j, j] -= row[np.arange(k.size), j]
            for e, c in enumerate(count[r].tolist()):  # the padded places: the end of each row's system
                H[e, c:, :] = 0.0
                H[e, :, c:] = 0.0
            dg = np.einsum("kii->ki", H)
            ridge = 1e-13 * dg.sum(axis=1) / np.maximum(count[r], 1) + 1e-300  # not a tolerance: a ridge
            dg += np.where(valid, ridge[:, None], 1.0)
            rhs = np.where(valid, -M[r, None] * np.take_along_axis(np.append(g[r], np.zeros((r.size, 1)), axis=1),
                                                                    pos, axis=1), 0.0)
            try:
                sol = np.linalg.solve(H, rhs[:, :, None])[:, :, 0]
            except np.linalg.LinAlgError:
                sol = np.zeros_like(rhs)
                for e in range(r.size):
                    try:
                        sol[e] = np.linalg.solve(H[e], rhs[e])
                    except np.linalg.LinAlgError:
                        sol[e] = 0.0
            sol = np.where(valid & np.isfinite(sol), sol, 0.0)
            blk = np.zeros((r.size, m + 1))
            np.put_along_axis(blk, pos, sol, axis=1)
            out[r] = blk[:, :m]
        blocks_in_threads(solve, blocks)
        return out


class Multipliers:
    """The multipliers of rows placed at once (:func:`_place_batch`), kept from one placement for
    the next: each row's over its balls (named by their rows) and its trust ball.  A later
    round's placement moves the same tail rows among balls that moved little, so its duals
    start near their solution.  Each row keeps its latest multipliers only."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (rows, balls, multipliers)

    def add(self, rows: np.ndarray, balls: np.ndarray, mu: np.ndarray) -> None:
        """Record ``mu`` (``rows x (balls + 1)``, the trust ball's last) for ``rows``."""
        kept = []
        for r, b, m in self.parts:
            old = ~np.isin(r, rows)
            if old.any():
                kept.append((r[old], b, m[old]))
        if rows.size:
            o = np.argsort(rows, kind="stable")  # each part's rows sorted, for _find
            kept.append((np.asarray(rows)[o], np.asarray(balls), np.asarray(mu)[o]))
        self.parts = kept

    def start(self, rows: np.ndarray, balls: np.ndarray, default: np.ndarray) -> np.ndarray:
        """Each of ``rows``' multipliers over the sorted ``balls`` and a trust ball, from its
        record where it has one (:func:`_carried`), else ``default``."""
        mu = np.array(np.broadcast_to(default, (rows.size, balls.size + 1)))
        for r, b, m in self.parts:
            at, hit = _find(r, rows)
            if hit.any():
                mu[hit] = _carried(m[at[hit]], b, balls)[0]
        return mu


def _find(keys: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``x`` is in the sorted ``keys``, and whether it is there."""
    if not keys.size:
        return np.zeros(x.shape, np.intp), np.zeros(x.shape, bool)
    at = np.minimum(np.searchsorted(keys, x), keys.size - 1)
    return at, keys[at] == x


def _carried(mu: np.ndarray, old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, bool]:
    """Multipliers (rows of them) over the sorted balls ``old`` and a trust ball (last), carried to
    the sorted balls ``new``: a ball in both keeps its multiplier, a ball new to them starts at the
    bound ``_MU_MIN``, the trust ball keeps its own.  Returns them and whether any ball was in both."""
    mu = np.atleast_2d(mu)
    at, hit = _find(old, new)
    out = np.full((mu.shape[0], new.size + 1), _MU_MIN)
    out[:, np.flatnonzero(hit)] = mu[:, at[hit]]
    out[:, -1] = mu[:, -1]
    return out, bool(hit.any())


def _batch_newton(du: _Duals, mu0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Projected Newton on every row's dual at once (the steps of :func:`_dual_newton`, each row
    stopping on its own test, an Armijo search per row along its projected path), every row from
    the multipliers ``mu0`` (one row of them, or one for each row).  Returns the multipliers and
    which rows finished; the others (step limit, singular system, no descent on the path) are left
    to :func:`_best_point`."""
    n = du.Cp.shape[0]
    idx = np.arange(n)
    mu = np.array(np.broadcast_to(np.maximum(mu0, _MU_MIN), (n, du.m)))
    f, g, M, qphi, pp = du.state(idx, mu)
    solved = np.zeros(n, bool)
    act = idx
    for _ in range(_NEWTON_ITERS):
        ma, ga = mu[act], g[act]
        free = ~((ma <= _MU_MIN) & (ga > 0))
        gmax = np.where(free, np.abs(ga), 0.0).max(axis=1)
        done = (gmax <= _GTOL) | (f[act] - du.primal(act, ma, M[act], qphi[act], pp[act]) <= _GAP)
        solved[act[done]] = True
        act, free = act[~done], free[~done]
        if not act.size:
            break
        p = du.directions(act, mu[act], free, g[act], M[act], qphi[act], pp[act])
        t = np.ones(act.size)
        left = np.arange(act.size)
        for _ in range(20):
            rows = act[left]
            mt = np.maximum(mu[rows] + t[left, None] * p[left], _MU_MIN)
            mt = np.where(free[left], mt, mu[rows])
            ft, gt, Mt, qt, pt = du.state(rows, mt)
            good = (ft < f[rows]) & (ft <= f[rows] + 1e-4 * np.einsum("ij,ij->i", g[rows], mt - mu[rows]))
            bad = np.flatnonzero(~good)
            if bad.size:  # a point of the path that is finished itself is taken (see _GAP)
                good[bad] = ft[bad] - du.primal(rows[bad], mt[bad], Mt[bad], qt[bad], pt[bad]) <= _GAP
            a = rows[good]
            mu[a], f[a], g[a], M[a], qphi[a], pp[a] = mt[good], ft[good], gt[good], Mt[good], qt[good], pt[good]
            left = left[~good]
            if not left.size:
                break
            t[left] *= 0.5
        if left.size:  # no point of the path lowers g: left to L-BFGS-B
            act = np.setdiff1d(act, act[left], assume_unique=True)
    return mu, solved


def _place_batch(X: np.ndarray, Phi: np.ndarray, rows: np.ndarray, n: np.ndarray, radius: float,
                 deadline: float, duals: Multipliers | None = None):
    """The rows of ``rows`` that can be placed at once, placed (``Phi`` updated in place):
    those no two of which are farther apart than ``1 - radius`` (each row in such a pair, of
    those farther than half that from the rows' centroid, is left to be placed one at a
    time), each moved at most ``radius / 2`` (so two of them stay within 1) to its best point
    in the balls of the other rows farther than ``1 - radius`` from one of them (the same
    screen as one at a time: a row not screened stays within 1); the duals by
    :func:`_batch_newton`, the moves shortened and checked as in :func:`place_pass`.  Returns
    ``(gain, done, touched, stuck)``: the value gained, the rows placed (moved or not) whose
    duals finished, the rows each of those touches, and those that stopped on their trust
    ball; or ``None`` where fewer than ``_BATCH_MIN`` rows can be placed at once or the balls
    are more than ``_BATCH_BALLS``."""
    V, d = Phi.shape
    rho = 0.5 * radius
    far = 1.0 - radius
    mean = Phi.mean(axis=0)
    P0 = Phi - mean  # the distances do not change; the Gram forms' rounding scales with these norms
    nn = np.einsum("ij,ij->i", P0, P0)
    slack = 4.0 * (d + 2) * _U64  # as in place_pass
    # two rows within far / 2 of the rows' centroid are within far of each other: only the others
    # can be in a pair farther apart, and each that is (screened by GEMM tiles with the margin of
    # their rounding, so memory stays rows x 512) is left to be placed in turn
    Pr = P0[rows]
    cen = Pr - Pr.mean(axis=0)
    half2 = (0.5 * far) ** 2 * (1.0 - 1e-9)  # not a tolerance: a margin for the centroid's rounding
    outer = np.flatnonzero(np.einsum("ij,ij->i", cen, cen) > half2)
    keep = np.ones(rows.size, bool)
    for s in range(0, outer.size, 512):
        o = outer[s : s + 512]
        D2 = Pr @ Pr[o].T
        D2 *= -2.0
        D2 += nn[rows][:, None]
        D2 += nn[rows[o]][None, :]
        keep[o[(D2 > far * far - slack * (nn[rows][:, None] + nn[rows[o]][None, :])).any(axis=0)]] = False
    R = rows[keep]
    if R.size < _BATCH_MIN:
        return None
    inR = np.zeros(V, bool)
    inR[R] = True
    N = np.flatnonzero(~inR)
    ball = np.zeros(N.size, bool)
    for s in range(0, R.size, 512):
        r = R[s : s + 512]
        D2 = P0[N] @ P0[r].T
        D2 *= -2.0
        D2 += nn[N][:, None]
        D2 += nn[r][None, :]
        ball |= (D2 > far * far - slack * (nn[N][:, None] + nn[r][None, :])).any(axis=1)
    B = N[ball]
    if B.size > _BATCH_BALLS:
        return None
    C = P0[B]
    gain = 0.0
    done: list[np.ndarray] = []
    stuck: list[np.ndarray] = []
    touched: dict[int, np.ndarray] = {}
    touch2 = (1.0 - _TOUCH) ** 2
    mu0 = None
    for s in range(0, R.size, _BATCH_CHUNK):
        if time.perf_counter() > deadline:
            break
        r = R[s : s + _BATCH_CHUNK]
        x = X[r] / n[r][:, None]
        du = _Duals(C, P0[r], x, rho)
        if mu0 is None:  # every row starts from the first row's multipliers (one at a time)
            Q = np.vstack([C - P0[r[0]], np.zeros((1, d))])
            mu0 = _best_point(x[0], Q, du.r2, np.ones(du.m))[1]
        # or, where an earlier placement recorded a row's, from those
        mu, solved = _batch_newton(du, mu0 if duals is None else duals.start(r, B, mu0))
        if solved.any():
            mu0 = mu[np.flatnonzero(solved)[0]]
            if duals is not None:
                duals.add(r[solved], B, mu[solved])
        r, mu, x = r[solved], mu[solved], x[solved]
        sel = np.flatnonzero(solved)
        kb = B.size
        M = mu.sum(axis=1)
        dv = (x + mu[:, :kb] @ C - P0[r] * mu[:, :kb].sum(axis=1)[:, None]) / M[:, None]
        dd = np.einsum("ij,ij->i", dv, dv)
        qd = np.zeros((r.size, kb + 1))
        qd[:, :kb] = dv @ C.T - np.einsum("ij,ij->i", P0[r], dv)[:, None]
        ok = (dd > 0) & np.isfinite(dd)
        t = np.zeros(r.size)
        t[ok] = np.maximum(_into_balls_rows(qd[ok], dd[ok], du.c0[sel[ok]]), 0.0)
        t *= 1.0 - 1e-12  # not a tolerance: just inside the nearest sphere, as in _best_point
        step = t[:, None] * dv
        g = np.einsum("ij,ij->i", X[r], step)
        move = ok & (t > 0) & (g >= -_GIVE * n[r])
        # the balls each moved row may touch or pass (GEMM distance with a slack), checked formed
        Z = Phi[r] + step
        Zc = Z - mean
        zz = np.einsum("ij,ij->i", Zc, Zc)
        D2 = zz[:, None] + du.cc[None, :] - 2.0 * (Zc @ C.T)
        near = D2 > touch2 - slack * (zz[:, None] + du.cc[None, :])
        near &= move[:, None]
        ri, bi = np.nonzero(near)
        cut = np.searchsorted(ri, np.arange(r.size + 1))
        fine = np.zeros(r.size, bool)
        sq1 = np.zeros(ri.size)
        for k in np.flatnonzero(move).tolist():
            e = slice(cut[k], cut[k + 1])
            nb = Phi[B[bi[e]]]
            for shorten in _SHORTEN:
                diff = nb - (Phi[r[k]] + shorten * step[k])
                sq = np.einsum("ij,ij->i", diff, diff)
                if shorten == 1.0:
                    sq1[e] = sq
                if float(sq.max(initial=0.0)) <= 1.0:
                    step[k] *= shorten
                    fine[k] = True
                    break
        move &= fine
        step[~move] = 0.0
        g = np.where(move, np.einsum("ij,ij->i", X[r], step), 0.0)
        Phi[r] += step
        gain += float(g.sum())
        # the balls each row touches (for the rows left open), from the unshortened check: a
        # ball counted in needlessly only costs a row placed again
        hit = sq1 >= touch2
        for k, i in enumerate(r.tolist()):
            if move[k]:
                e = slice(cut[k], cut[k + 1])
                touched[i] = B[bi[e][hit[e]]]
            else:  # not moved: the balls about its current point that it touches
                touched[i] = B[du.qq[sel[k], :kb] >= touch2]
        done.append(r)
        stuck.append(r[move & (np.einsum("ij,ij->i", step, step) >= (rho * (1.0 - _TOUCH)) ** 2)])
    return gain, np.concatenate(done) if done else np.zeros(0, np.intp), touched, \
        np.concatenate(stuck) if stuck else np.zeros(0, np.intp)


def _shortened(Q: np.ndarray, step: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(factor, sq)``: the first factor of ``_SHORTEN`` at which every row of ``Q`` (the screened
    rows' differences from the row's point) is within 1 of the row's new point, formed again as
    ``q - factor * step`` (``sq`` their squared distances); ``None`` where there is none."""
    for shorten in _SHORTEN:
        Qs = Q - shorten * step
        sq = np.einsum("ij,ij->i", Qs, Qs)
        if float(sq.max(initial=0.0)) <= 1.0:
            return shorten, sq
    return None


def place_rows(X: np.ndarray, Phi: np.ndarray, rows: np.ndarray, *, deadline: float = math.inf,
               radius: float = _RADIUS) -> tuple[np.ndarray, float]:
    """:func:`place_pass` without the rows left open: ``(potential, value gained)``."""
    Phi, gain, _ = place_pass(X, Phi, rows, deadline=deadline, radius=radius)
    return Phi, gain


def place_pass(X: np.ndarray, Phi: np.ndarray, rows: np.ndarray, *, deadline: float = math.inf,
               radius: float = _RADIUS, duals: Multipliers | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """Each of ``rows`` in turn moved to its best point given all the others
    (Gauss-Seidel: a later row sees the earlier ones' new points); where there are at
    least ``_BATCH_MIN`` of them, those that can be are first placed at once
    (:func:`_place_batch`, again for those stopped by their trust ball, up to
    ``_BATCH_REPEAT`` times), and the rest in turn.  ``Phi`` must
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
    never open (it is never moved).  The rows placed at once count as placed before
    every row placed in turn.

    With ``duals``, the rows placed at once start their duals from their multipliers
    recorded there (by an earlier pass), and the pass records theirs in it."""
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
    seq, batch_touched = rows, {}
    if rows.size >= _BATCH_MIN:
        # first the rows that can be placed at once (and again those stopped by their trust
        # ball); the others, and those still stopped, one at a time below
        placed, todo = np.zeros(0, np.intp), rows
        for _ in range(_BATCH_REPEAT):
            out = _place_batch(X, Phi, todo, n, radius, deadline, duals)
            if out is None:
                break
            g, done, tch, todo = out
            gain += g
            batch_touched.update(tch)
            placed = np.union1d(placed, done)
            if not todo.size:
                break
        seq = rows[~np.isin(rows, placed) | np.isin(rows, todo)]
        nn = np.einsum("ij,ij->i", Phi, Phi)
    # when each row was placed and last moved (its position in the pass), the rows each
    # placed row touches, and the rows that are open whatever moves later
    placed_at = np.full(Phi.shape[0], -1, np.intp)
    moved_at = np.full(Phi.shape[0], -1, np.intp)
    touched: dict[int, np.ndarray] = dict(batch_touched)  # placed at once: before every row below
    stuck: list[int] = []
    reached = 0  # rows[:reached] were looked at before the deadline
    touch2 = (1.0 - _TOUCH) ** 2
    for start in range(0, seq.size, _BLOCK):
        if time.perf_counter() > deadline:
            break
        blk = seq[start : start + _BLOCK]
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
                carried, shared = _carried(prev_mu, prev_idx, sel)
                if shared:
                    mu0 = carried[0]
            step, mu = _best_point(X[i] / n[i], Q, r2, mu0)
            prev_idx, prev_mu = sel, mu
            g = float(X[i] @ step)
            if not g >= -_GIVE * n[i] or not np.any(step):
                touched[i] = sel[np.einsum("ij,ij->i", Q[:-1], Q[:-1]) >= touch2]
                continue
            # the screened rows' differences from the new point: the step ends on a binding ball's
            # sphere, and formed again a distance may be a rounding above 1; then shortened a little
            kept = _shortened(Q[:-1], step)
            if kept is None:
                stuck.append(i)
                continue
            shorten, sq = kept
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
    open_[seq[reached:]] = True  # not reached before the deadline
    for i, nb in touched.items():
        if nb.size and int(moved_at[nb].max()) > placed_at[i]:
            open_[i] = True
    return Phi, gain, rows[open_[rows]]
