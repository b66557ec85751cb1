"""Cluster refinement: ``min_tension(G, method="refine")`` for head gradients.

A real head gradient has a few hundred large rows and thousands of small,
nearly parallel ones; at the optimum most of the small rows share a handful of
points.  The rows are grouped by the point they would take, the groups are
solved exactly as one row each (their sums), and both halves of the certificate
are built on ``G`` itself from that small solve:

* lower bound: every row takes the group point that serves it best (the points
  have diameter at most 1, so this is a feasible potential of ``G``);
* upper bound: the group flow, spread over the member pairs of adjacent groups
  as scalar weights, then one weighted-Laplacian solve on ``G`` (``Phi =
  L_w^+ G``, ``y_e = w_e (phi_i - phi_j)``), a flow that balances ``G``.  Its
  cost exceeds the lower bound only by the part of each flow vector that is not
  parallel to its pair's difference, which is second order in how far the rows
  are from their group's share.  In a round that is placed, the weights are then
  descended by projected L-BFGS on the dual over those pairs (:func:`_descend_weights`),
  unless the cheapest flow's own descent has already stalled short of ``tol`` (``_FINISH``):
  then the round only places its rows, for the lower bound.

The groups that carry most of that excess are split (along the principal
direction of their members' unit rows) and the small problem is solved again,
until the certified gap meets ``tol``.  See ``docs/theory/tension.md``,
"Cluster refinement".
"""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np

from .._threads import blocks_in_threads
from ..exceptions import SolverError
from ._results import (
    _U64,
    TensionResult,
    Weighted,
    _certify,
    _chunk_slices,
    _feasible_value,
    _laplacian,
    _pair_vectors,
    _rownorms,
    _violated_pairs,
)
from .bracket import _POWER, _best_match, _group_sums, _irls_weights, _progress, _reduction, _repair
from .dual import weight_dual
from .hubs import Hubs
from .hubs import _work as _work_array
from .lbfgs import new_memory, projected_lbfgs, resize_memory
from .place import Multipliers, place_pass

__all__: list[str] = []  # reached through min_tension(method="refine")

#: the couplings' non-negative least squares (:func:`_nnls_newton`): projected Newton steps at most
#: (17-20 solved every member of the shipped MiniLM round 1's largest groups), rows per block
_NNLS_STEPS = 50
_NNLS_BLOCK = 256
#: directions more ill-conditioned than this (largest over smallest singular value) go to Lawson-Hanson
#: directly: the Newton steps work on ``K = A^T A``, whose condition is the square (833 on the
#: largest group above, so ``K``'s 7e5)
_NNLS_COND = 1e6
#: rows of the reduced problem that gives the first groups (the bracket's reduction)
_INIT_ROWS = 2048
#: reweighting steps for the first groups (a heuristic start: any grouping is certified)
_INIT_STEPS = 40
#: at most this many first groups: the groups' problem at rank 384 takes Newton about 40 s
#: with 199 groups and did not finish in 10 minutes with 836 (the full MiniLM vocabulary);
#: splitting adds groups where the excess is
_INIT_GROUPS = 256
#: share of the excess whose groups are split in a round, and the pieces per split group
_SPLIT_SHARE = 0.9
_SPLIT_PARTS = 8
#: rounds without a 10% narrower gap before giving up (status "iteration_limit")
_STALL = 4
#: reweighting steps on the member pairs after each round's coupling (kept while they lower the cost)
_REWEIGHT = 3
#: how far apart the next round's start puts groups that share an old point
_NUDGE = 0.05
#: product coupling of two groups' members while it has at most this many pairs per member
_PRODUCT_FANOUT = 64
#: the coupling leaves out the groups' pairs whose weight is below this share of the largest: the
#: interior-point groups' solve (tension/newton_cg.py) puts a weight on every pair, and spreading
#: all of them over member pairs ran the full MiniLM vocabulary's round 2 (291 groups, 42,195
#: pairs) out of memory in the Laplacian solve.  On that problem 9,274 pairs are above 1e-8 of the
#: largest weight and those below carry 5.8e-8 of the flow's cost (the solve balances G without them)
_COUPLE_FLOOR = 1e-8
#: where splitting stalls short of ``tol`` on at most this many rows, the dual over every pair
#: finishes from the refinement's flow (400 rows at rank 8: from 1.25e-6 to 3e-10 in 14 s)
_POLISH_ROWS = 1024
#: the weights of a placed round's flow are descended (:func:`_descend_weights`) until ten
#: evaluations lower the cost by less than this share of ``tol`` (relative), or after
#: ``_DESCENT_EVALS`` evaluations (the trained MiniLM full vocabulary's round 2, by SciPy's
#: L-BFGS-B then: the gap from 4.68e-6 to 3.09e-6 in 37 evaluations of 3.7 s, 4e-8 in the last
#: ten; 3.06e-6 after 60)
_DESCENT_STALL = 0.05
_DESCENT_EVALS = 150
#: the weights' L-BFGS keeps this many pairs.  Its two-loop product is pairs-long vector work,
#: ``4 _MAXCOR`` passes: on round 2's flow of the shipped MiniLM gradient at full vocabulary (5,580,211
#: pairs; 2026-12-07, alone) an evaluation took 0.76 s with 5 pairs against 0.98 s with 10, and round
#: 2's two descents (150 evaluations, then 255 more from its memory) ended at 53.9415261345 (solver
#: units) in 313.4 s with 5 against 53.9415258644 in 359.0 s with 10 (5e-9 of T, 0.005 of ``tol``, apart);
#: at equal times 5 was lower (114 s: 53.9415654258 against 53.9415820044)
_MAXCOR = 5
#: in the last round (the last allowed, or at its end no room for another by ``_GROWTH``), the time
#: left after the placement goes to the cheapest flow's weights: at most ``_LAST_EVALS`` evaluations,
#: until ``_LAST_WINDOW`` of them lower the cost by less than ``_LAST_STALL`` of ``tol``, or until the
#: gap meets ``tol``.  On the shipped MiniLM gradient at full vocabulary (round 1's flow, descended
#: and priced) 300 more evaluations lowered the upper bound by 1.3e-6 of itself, more than ``tol``.
#: The window is long because a restarted L-BFGS has no memory: from that flow after 461
#: evaluations, a restart lowered ``F`` by 4.8e-7 (solver units) in its first 11 evaluations and by
#: 6.1e-6 in the next 64; with a window of ten at 0.01 ``tol`` the hour's last round (2026-12-05
#: 20:28 UTC) stopped after 11
_LAST_EVALS = 1000
_LAST_STALL = 0.05
_LAST_WINDOW = 50
#: a placed round that ends within ``_FINISH`` times ``tol`` gives the cheapest flow's weights that
#: last round's descent (at most ``_FINISH_EVALS`` evaluations) before another round is split: on
#: the shipped MiniLM gradient at full vocabulary round 2 ended at 1.63e-6 and 1.68e-6 (two runs),
#: and the third round's flow was costlier than round 2's and its placement left the lower bound
#: where it was; the gap was met by the last round's descent of round 2's flow (168 and 179
#: evaluations), after about 950 s spent on round 3.  Where the lower bound is what is short, the
#: descent stalls and the rounds go on: the trained MiniLM gradient's round 2 (1.08e-6) lost 51
#: evaluations, 69 s, to it; the shipped one's, on another path (1.59e-6 after the placement), stalled
#: at 1.23e-6 after 199 evaluations, and its flow was the upper bound of round 3's certificate
#: (2026-12-06, ``docs/theory/tension.md``, *Cheaper evaluations, a finishing descent*).  Once that
#: descent has stalled short of ``tol``, the later rounds' own flows are not descended (nor priced):
#: only their placements run, for the lower bound.  On both MiniLM gradients at full vocabulary
#: (2026-12-06) round 3's descents ended above round 2's descended flow (shipped: 261 evaluations
#: and two pricings, 407 s, 5.5e-7 above it; trained: 95 evaluations, 117 s, 2.8e-8 above) and
#: round 3's placement met ``tol`` against round 2's upper bound; on the shipped gradient on two
#: earlier days too, round 3's flow was costlier than round 2's (*Rounds after a stalled finish*)
_FINISH = 2.0
_FINISH_EVALS = 300
#: a finishing descent at ``_FINISH_EVALS`` goes on, up to this many more evaluations, while the
#: best cost's fall over its last ``_LAST_WINDOW`` evaluations, kept at that rate, would reach the
#: target within the evaluations left (judged again at each one): on the shipped MiniLM gradient
#: at full vocabulary (2026-12-06 14:20 UTC) round 3's finishing descent stopped at its 300th
#: evaluation 3.3e-7 above its target (gap 1.05e-6; T about 6.74), still falling, and a fourth round followed
_FINISH_REACH = 200
#: a round after that stalled descent (placement only) asks its groups' dual for this share of
#: the gap so far, not 1/100 of it: the placement needs only the hubs' points, and those of a
#: looser iterate served it as well or better.  On round 3's groups' problem of the shipped MiniLM
#: gradient at full vocabulary (424 groups; the gap so far 1.24e-6), solved alone to 1.0e-9 in
#: 261.0 s, round 3's placement from the iterates at gaps 3.5e-7, 3.5e-6 and 2.6e-8 reached
#: 53.94147466, 53.94147623 and 53.94147360 (solver units; 53.94147262 needed; the full run, from
#: the last, 53.94147358), and from the one at 8.4e-6, 53.94146105, short (2026-12-07,
#: docs/theory/tension.md, *What round 3 is for*).  Asked for the gap so far, the dual stops at
#: half of it: there, the iterate at 3.5e-7
_SPENT_GTOL = 1.0
#: every descended weight stays above this share of the mean start weight (the pairs keep the
#: start's connected components); pairs added by :func:`_price_and_descend` start there
_WEIGHT_FLOOR = 1e-12
#: after the descent, the pairs that its Laplacian potential puts farther apart than 1 and the
#: flow does not have join it at the floor weight and the descent goes on (column generation:
#: a pair beyond 1 is one whose weight, raised, lowers ``F``), at most this many times and
#: while each lowers the cost by ``_DESCENT_STALL`` of ``tol`` (the MiniLM full vocabulary's
#: round 2: 291533 pairs added, the gap from 3.09e-6 to 1.47e-6 in 50 evaluations; the next two
#: added 28914 and 25470 and gained 1e-8 of it)
_PRICE_ROUNDS = 4
#: a round is taken to last this many times the one before when deciding whether it fits before
#: the deadline (the MiniLM full vocabulary at d = 384: rounds 2-5 took 308, 408, 817 and 1924 s,
#: the groups' dual growing with the groups, 382 to 1270); a round cut by the deadline is lost,
#: so where the next would not fit, this round's placement runs to the deadline instead
_GROWTH = 2.0
#: a round's rows are placed one by one (tension/place.py) only once rounds stop halving the gap
#: (or at the last round, or when another round would not fit before the deadline): the placement
#: cost about 15 ms a tail row with L-BFGS-B row duals, 60 s on the MiniLM top 4096, where a round
#: at d = 32 takes 20-40 s
_PLACE_WHEN = 0.5


def _initial_labels(X: np.ndarray, n: np.ndarray, deadline: float, seed: int = 0):
    """Each row's point in a short reweighted solve of the reduced problem (the
    bracket's reduction, repair and best-point lift): labels into the rows of the
    returned points ``P`` (diameter at most 1), or ``None`` for one group."""
    _, m, R = _reduction(X, n, _INIT_ROWS, _INIT_ROWS // 4, seed)
    if m < 2:
        return np.zeros(X.shape[0], np.intp), None
    S = R - R.mean(axis=0)
    _, Phi, _ = _irls_weights(S, _INIT_STEPS, deadline, power=_POWER)
    P = _repair(Phi, S)
    labels = _best_match(X, P)
    used = np.unique(labels)
    if used.size > _INIT_GROUPS:  # keep the points that carry most of <X, P[labels]>, re-match the rest
        share = np.bincount(labels, np.einsum("ij,ij->i", X, P[labels]), P.shape[0])[used]
        P = P[used[np.argsort(-share, kind="stable")[:_INIT_GROUPS]]]
        labels = _best_match(X, P)
    return labels, P


def _tail_rows(n: np.ndarray, labels: np.ndarray, m: int) -> np.ndarray:
    """The rows to place one by one: those no larger than the largest row of a group
    with more than one member (the near-duplicate tail; the large rows are single
    groups, already on their best points, and each has thousands of rows that can bound its
    move: at full vocabulary nearly all of them),
    largest first.  Empty where every group is a single row."""
    multi = np.bincount(labels, minlength=m)[labels] > 1
    if not multi.any():
        return np.zeros(0, np.intp)
    rows = np.flatnonzero(n <= n[multi].max())
    return rows[np.argsort(-n[rows], kind="stable")]


def _compact(labels: np.ndarray) -> tuple[np.ndarray, int]:
    _, lab = np.unique(labels, return_inverse=True)
    lab = lab.ravel()
    return lab, int(lab.max()) + 1


def _members(labels: np.ndarray, m: int) -> list[np.ndarray]:
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(m + 1))
    return [order[starts[c] : starts[c + 1]] for c in range(m)]


def _merged_solve(S: np.ndarray, tol: float, deadline: float, start=None) -> TensionResult:
    """The groups' problem, solved by the ALM (its best certificate when it stops
    short), from ``start = (Phi, I, J, Y)`` when given (the previous round's)."""
    from .solver import _alm_solve, min_tension

    left = deadline - time.perf_counter()
    if start is None or not np.any(S):
        try:
            return min_tension(S, center=True, method="alm", tol=tol, verbose=False,
                               time_limit=max(left, 1.0) if math.isfinite(left) else None)
        except SolverError as err:
            return err.result
    best, W, scale, _, _ = _alm_solve(S, tol=tol, max_outer=200, verbose=False,
                                      deadline=max(deadline, time.perf_counter() + 1.0), start=start)
    return _certify(S, best.potential @ W.T, best.flow.pairs[:, 0], best.flow.pairs[:, 1],
                    scale * (best.flow.vectors @ W.T), method="alm", centered=False, iterations=best.iterations,
                    tol=tol)


def _high_rank(S: np.ndarray) -> bool:
    """The groups' problem has the rank at which the ALM is slow and the dual over
    every pair (:func:`~hilbertgeom.tension.dual.weight_dual`) solves it (measured at
    d = 384; at d = 32 and below the ALM is fast and its flows serve the coupling
    better)."""
    from .solver import _high_rank as high
    from .solver import _rank

    return high(_rank(np.linalg.svd(S, compute_uv=False), S.shape), S.shape[0])


def _next_start(S: np.ndarray, res: TensionResult, P_old: np.ndarray):
    """The start of the next groups' solve: each new group near the old point that
    serves its sum best (groups sharing one point moved apart along their own
    directions by ``_NUDGE``: from one point the solve would keep them there), and
    the old flow moved to the largest group on each old point (pairs whose ends
    land on one group are dropped)."""
    parent = _best_match(S, P_old)
    size = _rownorms(S)
    U = S / np.where(size > 0, size, 1.0)[:, None]
    cnt = np.bincount(parent, minlength=P_old.shape[0])
    mean_u = _group_sums(U, parent, P_old.shape[0]) / np.maximum(cnt, 1)[:, None]
    P = P_old[parent] + _NUDGE * np.where((cnt[parent] > 1)[:, None], U - mean_u[parent], 0.0)
    child = np.full(P_old.shape[0], -1, np.intp)
    order = np.argsort(size, kind="stable")  # the largest child written last
    child[parent[order]] = order
    pairs, Y = res.flow.pairs, res.flow.vectors
    if pairs.size == 0:
        z = np.zeros(0, np.intp)
        return P, z, z, np.zeros((0, S.shape[1]))
    a, b = child[pairs[:, 0]], child[pairs[:, 1]]
    ok = (a >= 0) & (b >= 0) & (a != b)
    a, b, Y = a[ok], b[ok], Y[ok]
    swap = a > b
    Y = np.where(swap[:, None], -Y, Y)
    return P, np.minimum(a, b), np.maximum(a, b), Y


def _warm_weights(S: np.ndarray, res: TensionResult) -> np.ndarray:
    """The start of the next groups' dual (:func:`~hilbertgeom.tension.dual.weight_dual`)
    from the previous round's flow: each new group's parent is the old point that serves
    its sum best (as in :func:`_next_start`), and the weight ``lam_pq`` between two old
    groups is shared among their children's pairs in proportion to the product of the
    children's shares of their parent's size, ``lam_ab = lam_pq w_a w_b`` (so the
    children's pairs of two parents carry ``lam_pq`` in all; siblings start at 0).
    On the 382 groups of the MiniLM full vocabulary's second round (d = 384), the dual
    took 83 s and 2600 evaluations to 2.4e-7 from it, against 164 s and 4900 from
    equal weights (``docs/theory/tension.md``)."""
    m_old = res.potential.shape[0]
    lam = np.zeros((m_old, m_old))
    pairs = res.flow.pairs
    if pairs.size:
        P = res.potential
        dist = _rownorms(P[pairs[:, 0]] - P[pairs[:, 1]])
        ok = dist > 0
        np.add.at(lam, (pairs[ok, 0], pairs[ok, 1]), res.flow.norms()[ok] / dist[ok])
        lam += lam.T
    parent = _best_match(S, res.potential)
    size = _rownorms(S)
    total = np.bincount(parent, size, m_old)[parent]
    w = np.where(total > 0, size / np.where(total > 0, total, 1.0), 0.0)
    lam0 = lam[np.ix_(parent, parent)] * np.outer(w, w)
    np.fill_diagonal(lam0, 0.0)
    return lam0


def _nnls_newton(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``argmin_{mu >= 0} ||A mu - b||`` for every row ``b`` of ``B`` at once, ``A`` of full column
    rank: projected Newton on ``1/2 mu^T K mu - c^T mu`` (``K = A^T A``, ``c = A^T b``), from the
    clipped least squares.  A step holds the bounds that are active and pushing out and solves
    ``K_FF d_F = -g_F`` on the others through ``K^-1`` and a system on the held ones only
    (``K_FF^-1 = P_FF - P_FH P_HH^-1 P_HF``, ``P = K^-1``), the rows in blocks of ``_NNLS_BLOCK``
    sorted by how many they hold, the blocks in one thread per core
    (:func:`~hilbertgeom._threads.blocks_in_threads`); an Armijo search along the projected path.  A row is solved
    when its projected gradient is at most ``10 max(r, nb) u ||A||_1 ||b||``.  Returns the
    solutions and the rows not solved within ``_NNLS_STEPS`` steps (left to Lawson-Hanson)."""
    K = A.T @ A
    C = B @ A
    n, nb = C.shape
    P = np.linalg.inv(K)
    slack = 10.0 * max(A.shape) * _U64 * float(np.abs(A).sum(axis=0).max()) * np.linalg.norm(B, axis=1)

    def value(Mr, Cr):
        return 0.5 * np.einsum("ij,ij->i", Mr @ K, Mr) - np.einsum("ij,ij->i", Cr, Mr)

    M = np.maximum(C @ P, 0.0)
    todo = np.arange(n)
    for step in range(_NNLS_STEPS + 1):
        Mt, Ct = M[todo], C[todo]
        G = Mt @ K - Ct
        pg = np.where(Mt > 0, G, np.minimum(G, 0.0))
        open_ = ~(np.abs(pg).max(axis=1, initial=0.0) <= slack[todo])  # a non-finite row stays open
        todo, Mt, Ct, G = todo[open_], Mt[open_], Ct[open_], G[open_]
        if not todo.size or step == _NNLS_STEPS:
            break
        held = (Mt <= 0) & (G > 0)
        U = np.where(held, 0.0, G) @ P
        d = -U
        nh = held.sum(axis=1)
        order = np.argsort(nh, kind="stable")

        def solve(rows: np.ndarray, held=held, nh=nh, U=U, d=d) -> None:
            k = int(nh[rows].max())
            if k == 0:
                return
            h = held[rows]
            idx = np.argsort(~h, axis=1, kind="stable")[:, :k]  # each row's held entries first
            valid = np.arange(k)[None, :] < nh[rows][:, None]
            PHH = np.where(valid[:, :, None] & valid[:, None, :], P[idx[:, :, None], idx[:, None, :]], 0.0)
            PHH[:, np.arange(k), np.arange(k)] += ~valid  # padding: identity
            y = np.linalg.solve(PHH, (np.take_along_axis(U[rows], idx, 1) * valid)[:, :, None])[:, :, 0] * valid
            Y = np.zeros((rows.size, nb))
            np.put_along_axis(Y, idx, y, 1)
            Y[~h] = 0.0
            d[rows] += Y @ P

        blocks_in_threads(solve, (order[b0 : b0 + _NNLS_BLOCK] for b0 in range(0, order.size, _NNLS_BLOCK)))
        d[held] = 0.0
        f0 = value(Mt, Ct)
        t = np.ones(todo.size)
        new = Mt.copy()
        wait = np.ones(todo.size, bool)
        for _ in range(30):
            w = np.flatnonzero(wait)
            Q = np.maximum(Mt[w] + t[w, None] * d[w], 0.0)
            fq = value(Q, Ct[w])
            ok = fq <= f0[w] + 1e-4 * np.einsum("ij,ij->i", G[w], Q - Mt[w])
            new[w[ok]] = Q[ok]
            wait[w[ok]] = False
            if not wait.any():
                break
            t[wait] *= 0.5
        M[todo] = new
    return M, todo


def _nnls_rows(D: np.ndarray, Gm: np.ndarray) -> np.ndarray:
    """``argmin_{mu >= 0} ||D^T mu - g||`` for each row ``g`` of ``Gm``, ``(len(Gm), len(D))``.

    Solved on the equivalent problem with ``rank D`` rows instead of ``d``: with the thin SVD
    ``D = U S W^T``, ``||D^T mu - g||^2 = ||S U^T mu - W^T g||^2 + ||g - W W^T g||^2``, and the
    last term does not depend on ``mu``.  On that ``r x nb`` matrix every member at once by
    :func:`_nnls_newton` where the directions are independent (``r = nb``) and their condition
    is at most ``_NNLS_COND``, Lawson-Hanson (SciPy's ``nnls``) for the rows it leaves and
    where they are not.  On the first 2000
    members of the three largest groups of the shipped MiniLM gradient's round 1 at full
    vocabulary (182, 128 and 164 neighbour groups), 0.7, 0.6 and 1.1 s where Lawson-Hanson row by
    row took 8.2, 2.9 and 5.6 s, the residuals equal to ``2e-17`` of ``|g|`` and the shares to
    ``2e-11`` of the largest (2026-12-06).  Singular values below ``max(nb, d) u`` of the
    largest are dropped (directions ``D`` cannot resolve)."""
    from scipy.optimize import nnls

    U, sv, Wt = np.linalg.svd(D, full_matrices=False)
    keep = sv > sv[0] * max(D.shape) * _U64
    A = sv[keep, None] * U[:, keep].T
    B = Gm @ Wt[keep].T
    if A.shape[0] < A.shape[1] or sv[keep][-1] < sv[0] / _NNLS_COND:
        left = np.arange(len(B))
        M = np.zeros((len(B), A.shape[1]))
    else:
        M, left = _nnls_newton(A, B)
    for i in left:
        M[i] = nnls(A, B[i])[0]
    return M


def _shares(X, mem, s_c, lam, D, mode: str) -> np.ndarray:
    """Each member's share of the flow from its group to each neighbour group,
    ``(members, neighbours)``, columns summing to 1.

    ``"w"``: one share per member, ``w_i ∝ max(<g_i, s_c>, 0)`` (the bracket's
    shares).  ``"nnls"``: each member's row as a non-negative combination of
    the directions to the neighbour groups, ``g_i ~ sum_b mu_ib (p_c - p_b)``,
    normalised per neighbour.  ``"M"``: those shares corrected so that each member's own row is
    reproduced as well as the neighbour directions allow, ``M = w lam^T + R
    (D^T Lam D)^+ D^T Lam`` with ``R`` the members' rows less their shares of
    the group sum (the correction keeps every column sum: ``sum R = 0``), then
    clipped at 0."""
    Gm = X[mem]
    s = np.maximum(Gm @ s_c, 0.0)
    w = s / s.sum() if s.sum() > 0 else np.full(len(mem), 1.0 / len(mem))
    if mode == "w" or len(mem) == 1:
        return np.repeat(w[:, None], len(lam), axis=1)
    if mode == "nnls":
        M = _nnls_rows(D, Gm)
        M += 1e-12 * float(M.max(initial=0.0)) + 1e-300  # every member keeps a share of every neighbour
        return M / M.sum(axis=0)
    R = Gm - w[:, None] * s_c[None, :]
    K = (D.T * lam) @ D
    M = w[:, None] * lam[None, :] + R @ np.linalg.pinv(K, rcond=1e-12, hermitian=True) @ (D.T * lam)
    np.maximum(M, 0.0, out=M)
    tot = M.sum(axis=0)
    bad = tot <= 0
    M[:, bad] = w[:, None]
    tot[bad] = 1.0
    return M / tot


def _northwest(a: np.ndarray, b: np.ndarray):
    """North-west corner coupling of two mass vectors with equal totals: at most
    ``len(a) + len(b) - 1`` pairs ``(ia, ib, mass)``."""
    ca = np.concatenate([[0.0], np.cumsum(a)])
    cb = np.concatenate([[0.0], np.cumsum(b)])
    tot = min(ca[-1], cb[-1])
    ca = np.minimum(ca, tot)
    cb = np.minimum(cb, tot)
    br = np.unique(np.concatenate([ca, cb]))
    mass = np.diff(br)
    mid = 0.5 * (br[:-1] + br[1:])
    ia = np.minimum(np.searchsorted(ca, mid) - 1, len(a) - 1)
    ib = np.minimum(np.searchsorted(cb, mid) - 1, len(b) - 1)
    ok = mass > 0
    return ia[ok], ib[ok], mass[ok]


def _group_flow(res: TensionResult, S: np.ndarray):
    """The groups' flow with its residual's balanced flow ``(r_a - r_b) / m`` made
    explicit on the pairs of the groups whose residual is not at rounding level (a
    certificate may leave part of its flow, or all of it, in the residual)."""
    pairs, Yv, R = res.flow.pairs, res.flow.vectors, res.flow.residual
    m = S.shape[0]
    rn = _rownorms(R)
    big = np.flatnonzero(rn > 1e-9 * float(_rownorms(S).max(initial=0.0)))
    if big.size == 0:
        return pairs, Yv
    a = np.repeat(big, m)
    b = np.tile(np.arange(m), big.size)
    keep = (a != b) & ~(np.isin(b, big) & (b < a))  # each pair once
    a, b = a[keep], b[keep]
    extra = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)
    ye = (R[extra[:, 0]] - R[extra[:, 1]]) / m
    return np.concatenate([pairs, extra]), np.concatenate([Yv, ye])


def _coupling(X, members, res: TensionResult, S: np.ndarray, mode: str):
    """Scalar weights on member pairs of adjacent groups: the group flow ``lam_ab``
    spread by the members' shares (product coupling, or north-west corner when
    the product would have too many pairs), the group pairs below ``_COUPLE_FLOOR``
    of the largest ``lam`` left out.  Returns ``(I, J, w)``."""
    P = res.potential
    pairs, Yv = _group_flow(res, S)
    diff = P[pairs[:, 0]] - P[pairs[:, 1]]
    dist = _rownorms(diff)
    ok = dist > 0
    pairs, Yv, diff, dist = pairs[ok], Yv[ok], diff[ok], dist[ok]
    lam = _rownorms(Yv) / dist
    big = lam > _COUPLE_FLOOR * float(lam.max(initial=0.0))
    pairs, Yv, diff, dist, lam = pairs[big], Yv[big], diff[big], dist[big], lam[big]
    m = len(members)
    inc: list[list[int]] = [[] for _ in range(m)]
    for e, (a, b) in enumerate(pairs):
        inc[a].append(e)
        inc[b].append(e)
    share: dict[tuple[int, int], np.ndarray] = {}
    for c in range(m):
        es = np.asarray(inc[c], np.intp)
        if es.size == 0:
            continue
        other = np.where(pairs[es, 0] == c, pairs[es, 1], pairs[es, 0])
        M = _shares(X, members[c], S[c], lam[es], P[c] - P[other], mode)
        for q, e in enumerate(es):
            share[(c, int(e))] = M[:, q]
    I, J, W = [], [], []
    for e, (a, b) in enumerate(pairs):
        sa, sb = share[(int(a), e)], share[(int(b), e)]
        na, nb = sa.size, sb.size
        if na * nb <= _PRODUCT_FANOUT * (na + nb):
            w = lam[e] * np.outer(sa, sb)
            ia, ib = np.nonzero(w > 0)
            w = w[ia, ib]
        else:
            ia, ib, w = _northwest(sa, sb)
            w = lam[e] * w
        I.append(members[a][ia])
        J.append(members[b][ib])
        W.append(w)
    if not I:
        z = np.zeros(0, np.intp)
        return z, z, np.zeros(0)
    return np.concatenate(I), np.concatenate(J), np.concatenate(W)


def _laplacian_potential(X: np.ndarray, I, J, w, hubs: Hubs | bool | None = True) -> np.ndarray:
    """``Phi`` solving ``L_w Phi = X``, one row grounded per connected component: the
    flow ``y_e = w_e (phi_i - phi_j)`` balances ``X`` up to the solve's rounding (the
    certificate repairs what is left).  Where the pairs all touch a few hub rows
    (tension/hubs.py; ``hubs=True`` looks for them, or pass their :class:`Hubs`), by
    elimination of the tail rows and the first hub of each component grounded; otherwise
    (or ``hubs`` False or ``None``: none found) by sparse LU with the first row of each
    component grounded."""
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import splu

    V, d = X.shape
    Phi = np.zeros((V, d))
    if I.size == 0:
        return Phi
    hub = Hubs.of(I, J, V) if hubs is True else hubs or None
    if hub is not None:
        out = hub.potential(X, np.asarray(w, dtype=np.float64))
        if out is not None:
            return out
    L = _laplacian(I, J, w, V)
    _, comp = connected_components(L, directed=False)
    ground = np.zeros(V, bool)
    ground[np.unique(comp, return_index=True)[1]] = True  # one row of each component at 0
    free = np.flatnonzero(~ground)
    if free.size:
        Phi[free] = splu(L[free][:, free].tocsc()).solve(X[free])
    return Phi


def _pair_sq(I, J, Phi, hubs: Hubs | None = None) -> np.ndarray:
    """``||phi_i - phi_j||^2`` for every pair: by :meth:`Hubs.sq_distances` where ``hubs``
    is given, else from the differences chunk by chunk."""
    if hubs is not None:
        return hubs.sq_distances(Phi)
    return np.concatenate([np.einsum("ij,ij->i", D, D) for D in
                           (Phi[I[sl]] - Phi[J[sl]] for sl in _chunk_slices(I.size, Phi.shape[1]))] or [np.zeros(0)])


def _pair_norms(I, J, w, Phi, hubs: Hubs | None = None) -> np.ndarray:
    """``||y_e|| = w_e ||phi_i - phi_j||`` for every pair (``w >= 0``), the distances by
    :func:`_pair_sq`."""
    return w * np.sqrt(_pair_sq(I, J, Phi, hubs))


def _lean_flow(X: np.ndarray, I, J, w, Phi, Pn=None, hubs: Hubs | bool | None = True):
    """A flow kept as ``(I, J, w, Phi)`` (``O(pairs + V d)`` memory; its ``pairs x d``
    vectors are made chunk by chunk, never at once): ``(cost, row excess)``.

    ``cost`` is its cost with the residual ``X - L_w Phi`` carried by the balanced
    flow, bounded by ``(V-1)/V sum ||r_i||``, with the rounding factors of
    :func:`~hilbertgeom.tension._results._flow_of`: it guides the rounds; the
    certificate is made once, by ``_flow_of``, on the flow kept at the end.  Where the
    pairs have hubs (tension/hubs.py; ``hubs`` as in :func:`_laplacian_potential`), the
    residual and the pairs' norms come from the hub blocks.  With a potential ``Pn``,
    each row's excess ``sum_e ||y_e|| - <y_e, pn_i - pn_j>`` over its pairs plus its
    residual norm (else ``None``): from the differences, or where the pairs have hubs from the
    GEMM forms of :meth:`Hubs.sq_distances` and :meth:`Hubs.pair_products` (the excess only
    chooses the groups to split; on the shipped MiniLM gradient at full vocabulary, 5.5 million
    pairs, the differences took 42.0-46.4 s a round, the hub blocks 2.9 s)."""
    V, d = X.shape
    hub = (Hubs.of(I, J, V) if hubs is True else hubs or None) if I.size else None
    if hub is not None:
        r = X - hub.apply(np.asarray(w, dtype=np.float64), Phi)
    else:
        r = X - _laplacian(I, J, w, V) @ Phi if I.size else X.copy()
    rowex: np.ndarray | None = None
    if Pn is None:
        total = float(_pair_norms(I, J, w, Phi, hub).sum()) if I.size else 0.0
    elif hub is not None:
        nrm = _pair_norms(I, J, w, Phi, hub)
        total = float(nrm.sum())
        ex = nrm - w * hub.pair_products(Phi, Pn)
        rowex = np.bincount(I, ex, V) + np.bincount(J, ex, V)
    else:
        total, acc = 0.0, np.zeros(V)
        for sl in _chunk_slices(I.size, d):
            Y = _pair_vectors(I, J, w, Phi, sl)
            nrm = _rownorms(Y)
            total += float(nrm.sum())
            ex = nrm - np.einsum("ij,ij->i", Y, Pn[I[sl]] - Pn[J[sl]])
            acc += np.bincount(I[sl], ex, V) + np.bincount(J[sl], ex, V)
        rowex = acc
    rn = _rownorms(r)
    if rowex is not None:
        rowex += rn
    res_cost = (V - 1) / V * float(rn.sum()) * (1.0 + 4.0 * V * _U64)
    cost = (total * (1.0 + 4.0 * (I.size + d) * _U64) + res_cost) * (1.0 + 4.0 * _U64)
    return cost, rowex


class _DescentStopError(Exception):
    """Raised inside the objective to leave the descent (stalled, out of evaluations or of time)."""


def _descend_weights(X: np.ndarray, I, J, w: np.ndarray, tol: float, deadline: float,
                     report: tuple[str, float] | None = None, start: float | None = None,
                     evals: int = _DESCENT_EVALS, stall: float = _DESCENT_STALL, target: float = -math.inf,
                     window: int = 10, memory: deque | None = None, reach: int = 0):
    """The flow's scalar weights on its pairs, descended by projected L-BFGS (tension/lbfgs.py)
    on the dual over those pairs, ``F(w) = 1/2 <X, L_w^+ X> + 1/2 sum w`` (convex; gradient
    ``(1 - ||phi_i - phi_j||^2) / 2`` with ``Phi = L_w^+ X``; at its minimum each pair with weight
    is at distance 1): the reweighting (``w_e <- ||y_e||``) lowers the cost by about 1% of the gap
    a step, L-BFGS by a third of it in 40 evaluations (``docs/theory/tension.md``, *Weights
    descended*).  The start is first scaled to the least ``F`` along its ray (the same flow).
    Every weight stays above ``_WEIGHT_FLOOR`` of the mean scaled start weight, so the pairs
    keep the start's connected components.  The L-BFGS is scaled by the weights (tension/lbfgs.py,
    ``_SCALE_FLOOR``).  Stops when ``window`` evaluations lower the cost by less
    than ``stall * tol`` of itself (a gain that no longer counts against ``tol``), after
    ``evals`` evaluations (or, with ``reach``, up to ``reach`` more while the descent is on
    course for ``target``: :func:`_on_course`), at ``deadline``, or once its cost (residual
    included) is at most ``target``.  Returns ``(cost, w, Phi)`` of the
    cheapest flow seen, its cost by :func:`_lean_flow` (residual included), or ``None``
    where no evaluation was cheaper than the start; ``start`` is that start's
    :func:`_lean_flow` cost where the caller has it.  ``memory`` (``_MAXCOR`` pairs over these
    pairs' weights, :func:`~hilbertgeom.tension.lbfgs.new_memory`) is the L-BFGS memory to start
    from and to leave the last one in: a descent that goes on from an earlier one's weights on the
    same pairs then starts where it stopped, not from steepest descent (with a non-empty
    memory the start is not scaled along its ray: the memory's pairs were taken unscaled).
    Where the pairs have hubs (tension/hubs.py) the descent runs on them in the dense block's
    order (:meth:`~hilbertgeom.tension.hubs.Hubs.block_order`; the weights and the memory are
    given back in the caller's), with ``X``'s hub and tail rows gathered once and each
    potential kept in those two parts (:meth:`~hilbertgeom.tension.hubs.Hubs.solve`) until
    the cheapest is returned."""
    if I.size == 0 or not np.any(w > 0):
        return None
    V = X.shape[0]
    hub = Hubs.of(I, J, V)  # the pairs are fixed: their hubs are found once
    # the start potential and its cost, once, in the caller's order
    Phi0 = _laplacian_potential(X, I, J, w, hub)
    if start is None:
        start = float(_lean_flow(X, I, J, w, Phi0, hubs=hub)[0])
    perm = hub.block_order() if hub is not None else None
    if hub is None or perm is None:
        out = _descend(X, I, J, w, hub, Phi0, start, tol, deadline, evals, stall, target, window, memory, reach)
    else:
        # the pairs (their weights, the memory's vectors) in the dense block's order while the
        # descent runs (Hubs.block_order), the caller's order again on leaving; the block order's
        # structure has the same hubs (one pair set), so they are not looked for again
        Ip, Jp = I[perm], J[perm]
        if memory:
            _reorder_memory(memory, perm)
        try:
            out = _descend(X, Ip, Jp, w[perm], Hubs(Ip, Jp, V, hub.hubs, hub.kd), Phi0, start, tol, deadline,
                           evals, stall, target, window, memory, reach)
        finally:
            if memory:
                _reorder_memory(memory, perm, back=True)
        if out is not None:
            wb = np.empty_like(out[0])
            wb[perm] = out[0]
            out = (wb, *out[1:])
    if out is None:
        return None
    wb, Phi, n, t0 = out
    cost = _lean_flow(X, I, J, wb, Phi, hubs=hub)[0]  # once, in the caller's order: its sums, its numbers
    if report is not None:
        label, f = report
        _progress(f"{label}: weights of {I.size} pairs descended, upper bound {start * f:.12g} -> "
                  f"{min(cost, start) * f:.12g}  ({n} evaluations, {time.perf_counter() - t0:.1f} s)")
    return (cost, wb, Phi) if cost < start else None


def _reorder_memory(memory: deque, perm: np.ndarray, back: bool = False) -> None:
    """The L-BFGS memory's vectors taken to the order ``perm`` of the pairs (``v[perm]``), or
    with ``back`` from it (``v`` such that ``v[perm]`` is the vector held), in place."""
    for _ in range(len(memory)):
        s, y, rho = memory.popleft()
        if back:
            s2, y2 = np.empty_like(s), np.empty_like(y)
            s2[perm], y2[perm] = s, y
        else:
            s2, y2 = s[perm], y[perm]
        memory.append((s2, y2, rho))


def _descend(X, I, J, w, hub, Phi0, start, tol, deadline, evals, stall, target, window, memory, reach):
    """:func:`_descend_weights` on pairs whose :class:`Hubs` (or ``None``) is ``hub``, from the
    weights ``w`` whose Laplacian potential is ``Phi0`` and whose cost is ``start``.  Returns
    ``(w, Phi, evaluations, t0)``, the cheapest weights seen, their potential, the evaluations
    made and the time the descent began (its caller costs and reports it), or ``None`` where no
    evaluation was cheaper than ``start``."""
    XH, XT = (X[hub.hubs], X[hub.tail]) if hub is not None else (X, X)  # gathered once
    # the hub blocks' work arrays, kept from one evaluation to the next, and two arrays for the tail
    # rows' potential, each evaluation writing into the one that is not the cheapest seen so far;
    # the cheapest weights are copied into one array kept for them (see hubs._work: at full
    # vocabulary each array made afresh costs its page faults)
    work: dict = {}
    tails = [np.empty_like(XT), np.empty_like(XT)] if hub is not None else []
    kept_w = np.empty_like(w)

    def potential(x):
        """``(Phi, sq, <X, Phi>)``: the Laplacian potential of the weights ``x`` (as its hub and
        tail rows, :meth:`Hubs.solve`, where the pairs have hubs), its pairs' squared distances."""
        parts = None
        if hub is not None:
            kept = best[2][1] if isinstance(best[2], tuple) else None
            parts = hub.solve(XH, XT, x, work=work, out=tails[1] if kept is tails[0] else tails[0])
        if parts is not None:
            return (parts, hub.sq_of_parts(*parts, work=work),
                    float(np.vdot(XH, parts[0])) + float(np.vdot(XT, parts[1])))
        Phi = _laplacian_potential(X, I, J, x, False)
        return Phi, _pair_sq(I, J, Phi, hub), float(np.vdot(X, Phi))

    def whole(P) -> np.ndarray:
        return hub.assemble(*P) if isinstance(P, tuple) else P

    # c w is the same flow for every c > 0 (Phi / c); F(c w) = A / c + c B is least at c = sqrt(A / B)
    A, B = float(np.sum(X * Phi0)), float(w.sum())
    if not memory:
        w = w * (math.sqrt(A / B) if A > 0 and B > 0 else 1.0)
    floor = _WEIGHT_FLOOR * float(w.mean())
    best: list = [start, None, None]  # cost, weights, their Laplacian potential (or its parts)
    costs: list[float] = []
    t0 = time.perf_counter()

    def fg(x):
        P, sq, xphi = potential(x)
        t = np.sqrt(sq, out=_work_array(work, "root", sq.shape))
        t *= x
        cost = float(np.sum(t))
        costs.append(cost)
        if cost < best[0]:
            np.copyto(kept_w, x)
            best[:] = cost, kept_w, P
            if cost <= target and _lean_flow(X, I, J, x, whole(P), hubs=hub)[0] <= target:
                raise _DescentStopError
        k = len(costs)
        stalled = k > window and costs[-window - 1] - min(costs) < stall * tol * min(costs)
        over = k >= evals and not (k < evals + reach and _on_course(costs, window, target, evals + reach - k))
        if stalled or over or time.perf_counter() > deadline:
            raise _DescentStopError
        sq *= -0.5  # the gradient 0.5 - 0.5 sq, in sq's own array (the same numbers)
        sq += 0.5
        return 0.5 * xphi + 0.5 * float(x.sum()), sq

    try:
        projected_lbfgs(fg, w, floor, maxcor=_MAXCOR, max_evals=evals + reach, scaled=True, memory=memory)
    except _DescentStopError:
        pass
    _, wb, P = best
    return None if wb is None else (wb, whole(P), len(costs), t0)


def _on_course(costs: list[float], window: int, target: float, left: int) -> bool:
    """Whether the best of ``costs`` (one per evaluation), falling at the rate it fell over
    the last ``window`` evaluations, reaches ``target`` within ``left`` more evaluations.
    The rate is the drop of the best cost seen from ``window`` evaluations ago to now, over
    ``window``: an L-BFGS slows as it goes, so this is optimistic, and it is judged again at
    each evaluation."""
    if not math.isfinite(target) or len(costs) <= window:
        return False
    best, before = min(costs), min(costs[:-window])
    rate = (before - best) / window
    return rate > 0 and best - target <= rate * left


def _price_and_descend(X: np.ndarray, I, J, w, Phi, cost: float, tol: float, deadline: float,
                       report: tuple[str, float] | None = None, memory: deque | None = None):
    """Column generation on the flow ``(I, J, w)`` whose Laplacian potential is ``Phi`` and
    whose cost is ``cost``: the pairs that ``Phi`` puts farther apart than 1 and the flow
    lacks (:func:`_violated_pairs`) join it at the floor weight of :func:`_descend_weights`,
    which then goes on; repeated ``_PRICE_ROUNDS`` times at most, while a repetition lowers
    the cost by ``_DESCENT_STALL`` of ``tol`` (relative) and until ``deadline``.  ``memory`` is
    the L-BFGS memory of the descent that gave ``w`` (or ``None``): it goes on over the new
    pairs, which it knows nothing of (:func:`~hilbertgeom.tension.lbfgs.resize_memory`), and is
    left holding the memory of the flow returned.  Returns ``(I, J, w, Phi, cost)``: the
    cheapest flow, with its pairs."""
    if memory is None:
        memory = new_memory(_MAXCOR)
    for _ in range(_PRICE_ROUNDS):
        if time.perf_counter() > deadline:
            break
        t0 = time.perf_counter()
        a, b = _violated_pairs(Phi, I, J)
        if report is not None:
            label, _ = report
            _progress(f"{label}: {a.size} pairs farther apart than 1 added to the flow's {I.size}  "
                      f"{time.perf_counter() - t0:.1f} s")
        if a.size == 0:
            break
        I2, J2 = np.concatenate([I, a]), np.concatenate([J, b])
        w2 = np.concatenate([w, np.full(a.size, _WEIGHT_FLOOR * float(w.mean()))])
        resize_memory(memory, I2.size)
        down = _descend_weights(X, I2, J2, w2, tol, deadline, report, memory=memory)
        if down is None:
            resize_memory(memory, I.size)  # the flow keeps its pairs
            break
        gained = cost - down[0]
        I, J = I2, J2
        cost, w, Phi = down
        if gained < _DESCENT_STALL * tol * cost:
            break
    return I, J, w, Phi, cost


def _split(X, n, labels, members, excess, parts: int, share: float) -> tuple[np.ndarray, int]:
    """Split the groups with the most excess (together ``share`` of it) into up to
    ``parts`` pieces each, by repeated halving along the principal direction of
    the members' unit rows.  Returns the new labels and the number of groups split."""
    m = len(members)
    sizes = np.array([mem.size for mem in members])
    cand = np.argsort(-excess, kind="stable")
    cand = cand[(sizes[cand] > 1) & (excess[cand] > 0)]
    if cand.size == 0:
        return labels, 0
    acc = np.cumsum(excess[cand])
    pick = cand[: int(np.searchsorted(acc, share * acc[-1])) + 1]
    pick = pick[: max(2, m // (2 * (parts - 1)))]  # the groups' problem grows by at most half a round
    lab = labels.copy()
    nxt = m
    split = 0
    for c in pick:
        pieces = [members[c]]
        while len(pieces) < parts:
            pieces.sort(key=len)
            mem = pieces.pop()
            U = X[mem] / np.where(n[mem] > 0, n[mem], 1.0)[:, None]
            U = U - U.mean(axis=0)
            if mem.size < 2 or not np.any(U):
                pieces.append(mem)
                break
            _, _, vt = np.linalg.svd(U, full_matrices=False)
            side = U @ vt[0] > 0
            if side.all() or not side.any():
                pieces.append(mem)
                break
            pieces += [mem[side], mem[~side]]
        for piece in pieces[1:]:
            lab[piece] = nxt
            nxt += 1
        split += len(pieces) > 1
    return lab, split


def _place_tail(X: np.ndarray, Pn: np.ndarray, value: float, tail: np.ndarray, deadline: float, goal: float,
                until_deadline: bool, report: tuple[str, float] | None = None, duals: Multipliers | None = None):
    """``(potential, value)``: passes of tension/place.py over the tail rows (each on its own
    best point given all the others; most of the gap on real gradients is the tail sharing a
    few hundred points), while each pass raises the value by at least a fifth of what is
    left to ``goal`` (the value at which the gap meets ``tol``) -- or, with
    ``until_deadline`` (no time left for another round), while it raises it at all.  A pass
    after the first places only the rows the last one left open (:func:`~hilbertgeom.tension.
    place.place_pass`: on the MiniLM full vocabulary every tail row is held by large rows
    alone, which no pass moves, and a second pass over all 30,338 tail rows took 248 s to gain
    5e-10); none open ends the passes.
    With ``report = (label, scale)``, one progress line per pass: the lower bound before and
    after (times ``scale``), its goal and the time."""
    while time.perf_counter() < deadline and value < goal and tail.size:
        t_pass = time.perf_counter()
        Pp, gained, left = place_pass(X, Pn, tail, deadline=deadline, duals=duals)
        vp, Pp, _ = _feasible_value(X, Pp) if gained > 0 else (value, Pp, None)
        if report is not None:
            label, f = report
            _progress(f"{label}: {tail.size} tail rows placed, lower bound {value * f:.12g} -> "
                      f"{max(vp, value) * f:.12g} (goal {goal * f:.12g}), {left.size} left open  "
                      f"{time.perf_counter() - t_pass:.1f} s")
        tail = left
        if not vp > value:
            break
        step, Pn, value = vp - value, Pp, vp
        if not until_deadline and step < 0.2 * (goal - value):
            break
    return Pn, value


def _refine_gap(X: np.ndarray, value: float, cost: float) -> float:
    """The relative gap of a value and a cost, widened as :func:`_certify` will widen it (the
    rounding of ``<X, P>``), so that "optimal" here is optimal there."""
    return (cost - value + _widening(X) * value) / value if value > 0 else math.inf


def _refine_goal(X: np.ndarray, cost: float, tol: float) -> float:
    """The value at which :func:`_refine_gap` against ``cost`` is ``tol``."""
    return cost / (1.0 + tol - _widening(X))


def _widening(X: np.ndarray) -> float:
    """The relative rounding of ``<X, P>`` that :func:`_certify` adds to the gap."""
    return 4.0 * (X.size + 2) * _U64


def _refine_solve(X: np.ndarray, *, tol: float, max_rounds: int, verbose: bool, deadline: float = math.inf,
                  report_scale: float = 1.0):
    """Cluster refinement on the centred ``X`` (unit size).  Returns ``(potential,
    I, J, Weighted(w, Phi), rounds, why)``: the best potential and the cheapest flow
    found (scalar-weighted: ``y_e = w_e (phi_i - phi_j)``, never made explicit here),
    ``why`` one of ``"optimal"``, ``"iteration_limit"``, ``"time_limit"``."""
    V = X.shape[0]
    t0 = time.perf_counter()
    n = _rownorms(X)
    labels, P_init = _initial_labels(X, n, deadline)
    if P_init is not None:
        P_init = P_init[np.unique(labels)]  # group c's own point, in the order _compact numbers them
    start = None
    mtol = max(min(tol / 10.0, 1e-8), 1e-12)  # the groups' solve well inside tol: its gap carries over
    top_gap, stalled = math.inf, 0
    best_val, best_P = -math.inf, None
    z = np.zeros(0, np.intp)
    best_cost, best_flow = math.inf, (z, z, np.zeros(0), np.zeros_like(X))
    best_mem = None  # the L-BFGS memory of the best flow's weights, where they were descended
    why = "iteration_limit"
    rounds = 0
    stuck = False  # splitting stopped narrowing the gap (not a limit of time or rounds)
    spent = False  # a finishing descent stalled short of tol: later rounds raise the lower bound only
    res_prev, warm_ok = None, False
    duals = Multipliers()  # the tail rows' multipliers from one placement, the next one's start
    for rounds in range(1, max_rounds + 1):
        t_round = time.perf_counter()
        labels, m = _compact(labels)
        if m < 2:  # one group has no problem to solve: every row its own group
            labels, m = np.arange(V), V
            P_init = start = res_prev = None
        S = _group_sums(X, labels, m)
        S -= S.mean(axis=0)
        high = _high_rank(S)
        if high:
            # L-BFGS-B on the scalar-weight dual over every pair, polished by Newton where its
            # support is small (tension/dual.py; on 382 groups at rank 381, 154 s to 3.9e-7 where the
            # ALM took 15 minutes).  A later round's groups are solved to 1/100 of the gap so far,
            # no tighter: the groups' gap adds to the round's; they start from the last round's
            # weights, shared among the new groups by size (_warm_weights).  The first round's are
            # solved to mtol: at tol/10 (1e-7) the shipped MiniLM gradient's first groups took 40 s
            # less, but the trained one's second round, started from those weights, ended 2% short of
            # tol and needed a third (368.2 s against 290.5 s in two; docs/theory/tension.md).  A
            # placement-only round's groups serve the placement alone (their flow is not coupled), so
            # their gap does not add to the round's: they are asked for _SPENT_GTOL of the gap so far
            share = _SPENT_GTOL if spent else 0.01
            gtol = max(mtol, share * top_gap) if math.isfinite(top_gap) else mtol
            lam0: np.ndarray | None = _warm_weights(S, res_prev) if res_prev is not None else None
            res = weight_dual(S, tol=gtol, deadline=max(deadline, time.perf_counter() + 1.0), lam0=lam0)
        else:
            if rounds == 1 and P_init is not None:  # the first groups start on their own points
                z = np.zeros(0, np.intp)
                start = (P_init, z, z, np.zeros((0, X.shape[1])))
            elif res_prev is not None and warm_ok:
                # from the previous round's solution while rounds halve the gap; otherwise from
                # scratch (the ALM's own start spreads its flow over more pairs, which the
                # coupling needs: measured on synthetic heads, warm starts there stall)
                start = _next_start(S, res_prev, res_prev.potential)
            else:
                start = None
            res = _merged_solve(S, mtol, deadline, start)
        if rounds > 1 and time.perf_counter() > deadline:
            why = "time_limit"  # this round's groups' solve was cut short: the best so far stands
            break
        res_prev = res
        P = res.potential
        near = _best_match(X, P)  # each row on its best point: a feasible potential of G
        members = _members(labels, m)
        # the cheapest of the three couplings, then reweighting on its member pairs while it
        # lowers the cost: w_e <- ||y_e|| (the IRLS step).  Flows are kept as (I, J, w, Phi).
        if spent:
            # the cheapest flow's descent has stalled short of tol: this round raises the lower
            # bound only, and its own flow is not made (no coupling of its groups has come below
            # the descended flow: _FINISH; at full vocabulary the couplings and their reweighting
            # took about 90 s of round 3).  The cheapest flow stands in for it (the excess below)
            cost, (I, J, w, Phi) = best_cost, best_flow
        else:
            candidates = []
            for mode in ("w", "nnls", "M"):
                if rounds > 1 and time.perf_counter() > deadline:
                    break  # each coupling costs a Laplacian solve and a flow over all member pairs
                Ic, Jc, w = _coupling(X, members, res, S, mode)
                hub = Hubs.of(Ic, Jc, V)
                Phi = _laplacian_potential(X, Ic, Jc, w, hub)
                candidates.append((_lean_flow(X, Ic, Jc, w, Phi, hubs=hub)[0], Ic, Jc, w, Phi, hub))
            if rounds > 1 and time.perf_counter() > deadline:
                # the round's couplings ran past the deadline (at full vocabulary about 40 s each, after
                # a groups' solve that ended just before it): the best certificate so far stands
                why = "time_limit"
                break
            cost, I, J, w, Phi, hub = min(candidates, key=lambda c: c[0])
            del candidates
            for _ in range(_REWEIGHT):
                wr = _pair_norms(I, J, w, Phi, hub)
                if not np.any(wr > 0):
                    break
                Phr = _laplacian_potential(X, I, J, wr, hub)
                cr = _lean_flow(X, I, J, wr, Phr, hubs=hub)[0]
                if cr >= cost:
                    break
                cost, w, Phi = cr, wr, Phr
        value, Pn, _ = _feasible_value(X, P[near])
        if value > best_val:
            best_val, best_P = value, Pn
        if cost < best_cost:
            best_cost, best_flow, best_mem = cost, (I, J, w, Phi), None
        gap = _refine_gap(X, best_val, best_cost)
        tail = _tail_rows(n, labels, m)
        now = time.perf_counter()
        # another round would not fit before the deadline: the next round is taken to last
        # _GROWTH times this one (its groups' problem is larger)
        no_room = deadline - now < _GROWTH * (now - t_round)
        placed = rounds == max_rounds or no_room or (math.isfinite(top_gap) and gap > _PLACE_WHEN * top_gap)
        goal = _refine_goal(X, best_cost, tol)
        report = (f"  min_tension refine round {rounds:3d}", report_scale) if verbose else None
        if placed and gap > tol and spent and report is not None:
            _progress(f"{report[0]}: no flow of its own (the cheapest flow's descent stalled), placement only")
        if placed and gap > tol and not spent and time.perf_counter() < deadline:
            # first the flow's weights (a third of the gap in a few dozen evaluations at full
            # vocabulary), then the rows' placement, which may run to the deadline
            mem = new_memory(_MAXCOR)
            down = _descend_weights(X, I, J, w, tol, deadline, report, start=cost, memory=mem)
            if down is not None:
                cost, w, Phi = down
            if _refine_gap(X, best_val, min(cost, best_cost)) > tol:
                # then the pairs its potential puts beyond 1 (the coupling's pairs are those of
                # adjacent groups; the optimal flow's are not all among them)
                I, J, w, Phi, cost = _price_and_descend(X, I, J, w, Phi, cost, tol, deadline, report, memory=mem)
            if cost < best_cost:
                best_cost, best_flow = cost, (I, J, w, Phi)
                gap = _refine_gap(X, best_val, best_cost)
                goal = _refine_goal(X, best_cost, tol)
            if best_flow[0] is I:  # the memory is that of the best flow's pairs, for the last round
                best_mem = mem
            del mem  # otherwise not kept: at full vocabulary 0.45 GB (_MAXCOR pairs) through the placement
        if placed and tail.size and gap > tol:
            Pn, value = _place_tail(X, Pn, value, tail, deadline, goal, no_room, report, duals)
            if value > best_val:
                best_val, best_P = value, Pn
                gap = _refine_gap(X, best_val, best_cost)
        now = time.perf_counter()
        last = rounds == max_rounds or deadline - now < _GROWTH * (now - t_round)
        if placed and gap > tol and now < deadline and (last or gap <= _FINISH * tol):
            # the last round (the next would not fit, _GROWTH): the time its placement left goes
            # on to the cheapest flow's weights, until the gap meets tol (a round cut by the
            # deadline is lost); the same, with _FINISH_EVALS, where the gap is within _FINISH tol
            Ib, Jb, wb, _ = best_flow
            down = _descend_weights(X, Ib, Jb, wb, tol, deadline, report, start=best_cost,
                                    evals=_LAST_EVALS if last else _FINISH_EVALS,
                                    stall=_LAST_STALL, target=best_val * (1.0 + tol - _widening(X)),
                                    window=_LAST_WINDOW, memory=best_mem, reach=0 if last else _FINISH_REACH)
            if down is not None:
                best_cost, best_flow = down[0], (Ib, Jb, down[1], down[2])
                gap = _refine_gap(X, best_val, best_cost)
            # the cheapest flow descended until it stalled: a later round's flow, descended, has not
            # come below it (_FINISH_EVALS above), so the later rounds go straight to their placements
            spent = gap > tol
        if verbose:
            f = report_scale
            _progress(f"  min_tension refine round {rounds:3d}: {m} groups, T in [{best_val * f:.12g}, "
                      f"{best_cost * f:.12g}]  rel gap {gap:.2e}  pairs {best_flow[0].size}  (groups' gap "
                      f"{res.relative_gap:.1e})  {time.perf_counter() - t0:.1f} s")
        if gap <= tol:
            why = "optimal"
            break
        if time.perf_counter() > deadline:
            why = "time_limit"
            break
        warm_ok = gap <= 0.5 * top_gap
        stalled = stalled + 1 if gap > 0.9 * top_gap else 0
        top_gap = min(top_gap, gap)
        if stalled >= _STALL:  # splitting no longer narrows the gap
            stuck = True
            break
        # the excess of each flow vector over its pair's difference, per row, per group
        rowex = _lean_flow(X, I, J, w, Phi, Pn)[1]
        labels, split = _split(X, n, labels, members, np.bincount(labels, rowex, m), _SPLIT_PARTS, _SPLIT_SHARE)
        if split == 0:  # every group with excess is a single row: nothing left to refine
            stuck = True
            if not placed and tail.size and gap > tol:
                # the last placement: until the deadline where there is one; without one, by the
                # rule of the rounds (passes that gain less than a fifth of what is left end it: on a
                # rank-6 head of 120 rows, 41 more passes gained 6e-5 of the 0.31 left)
                Pn, value = _place_tail(X, Pn, value, tail, deadline, goal, math.isfinite(deadline), report, duals)
                if value > best_val:
                    best_val, best_P = value, Pn
            break
        # the other rows move to their best point
        labels = np.where(labels >= m, labels, near)
    I, J, w, Phi = best_flow
    if stuck and V <= _POLISH_ROWS and time.perf_counter() < deadline:
        return (*_polish(X, best_P, best_val, best_cost, best_flow, tol=tol, deadline=deadline, verbose=verbose,
                         t0=t0, report_scale=report_scale), rounds, why)
    return best_P, I, J, Weighted(w, Phi), rounds, why


def _polish(X, P, value, cost, flow, *, tol, deadline, verbose, t0, report_scale):
    """Where splitting stalls on a few hundred rows: the dual over every pair of rows
    (:func:`~hilbertgeom.tension.dual.weight_dual`) from the refinement's flow
    weights.  Returns ``(potential, I, J, flow)``: the better potential and the
    cheaper flow of the two (each certified by the caller as usual)."""
    V = X.shape[0]
    I, J, w, Phi = flow
    lam = np.zeros((V, V))
    np.add.at(lam, (I, J), w)
    lam += lam.T
    if verbose:
        _progress(f"  min_tension refine: splitting stalled; the dual over all {V * (V - 1) // 2} pairs "
                  f"of the {V} rows goes on from the refinement's flow")
    res = weight_dual(X, tol=tol, deadline=deadline, lam0=lam)
    if verbose:
        f = report_scale
        _progress(f"  min_tension refine polish: T in [{res.value * f:.12g}, {res.flow.cost * f:.12g}]  "
                  f"rel gap {res.relative_gap:.2e}  ({res.iterations} evaluations)  "
                  f"{time.perf_counter() - t0:.1f} s")
    if res.value > value:
        P = res.potential
    if res.flow.cost < cost:
        f = res.flow
        Y = Weighted(f.weights, f.base) if f.weights is not None and f.base is not None else f.vectors
        return P, f.pairs[:, 0], f.pairs[:, 1], Y
    return P, I, J, Weighted(w, Phi)
