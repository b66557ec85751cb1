"""Row placement (``tension/place.py``): each tail row moved to its best point given
all the others, the cluster refinement's lower bound.

References: the cvxpy program of one row's best point (an independent
interior-point solve), the cvxpy reference of ``T`` (the placed value may not pass
it), and brute-force pairwise distances for feasibility.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import U64, brute_pairs, kernel_rtol
from test_refine import head, solver_head, stalled_head

import hilbertgeom as hg
from hilbertgeom.tension import place as pl
from hilbertgeom.tension import refine as rf
from hilbertgeom.tension._results import _rownorms
from hilbertgeom.tolerances import tolerance

SOLVER = tolerance("solver")


def test_one_rows_best_point_agrees_with_cvxpy():
    """The step of :func:`_best_point` reaches the interior-point optimum of
    ``max <x, d>`` over the balls ``||d - q_b|| <= 1`` and the trust ball, and stays
    in every ball."""
    import cvxpy as cp

    rng = np.random.default_rng(3)
    for trial in range(4):
        pts = rng.standard_normal((9, 5))
        pts *= 0.9 / brute_pairs(pts)[0].max()  # diameter 0.9: the centroid is within 0.9 of each
        Q = pts - pts.mean(axis=0)
        rho = 0.3 if trial % 2 else 0.05
        Qb = np.vstack([Q, np.zeros((1, 5))])
        r2 = np.append(np.ones(9), rho * rho)
        x = rng.standard_normal(5)
        x /= np.linalg.norm(x)
        step, _ = pl._best_point(x, Qb, r2, np.ones(10))
        d = cp.Variable(5)
        prob = cp.Problem(cp.Maximize(x @ d), [cp.norm(d - Qb[b]) <= np.sqrt(r2[b]) for b in range(10)])
        prob.solve(solver=cp.CLARABEL)
        assert prob.status == "optimal"
        assert SOLVER.close(float(x @ step), prob.value, scale=1.0)
        assert np.all(np.linalg.norm(step - Qb, axis=1) <= np.sqrt(r2) * (1 + kernel_rtol(5)))



@pytest.mark.parametrize("warm", [False, True])
def test_dual_newton_alone_reaches_the_cvxpy_optimum(warm):
    """Projected Newton on the row's dual, without the L-BFGS-B fallback: it finishes,
    and its point ``(x + Q^T mu) / M`` is in every ball and has the value of the
    interior-point optimum of the same program, on the shape of a MiniLM tail row
    (many balls about a point far from most of them, fewer than ``d``; with more
    binding balls than ``d`` Newton stops unfinished and L-BFGS-B finishes, the case
    of :func:`test_one_rows_best_point_agrees_with_cvxpy`).  ``warm``: from
    multipliers at the bound but a few, as a previous row's warm start leaves them."""
    import cvxpy as cp

    rng = np.random.default_rng(11)
    d, nb = 120, 60  # fewer balls than d, as on the MiniLM tail (165 balls at d = 384)
    for _ in range(3):
        pts = rng.standard_normal((nb, d))
        pts /= np.linalg.norm(pts, axis=1)[:, None]
        Q = np.vstack([0.97 * pts, np.zeros((1, d))])  # rows at 0.97 and the trust ball
        r2 = np.append(np.ones(nb), 0.2**2)
        x = rng.standard_normal(d)
        x /= np.linalg.norm(x)
        mu0 = np.ones(nb + 1)
        if warm:
            mu0[:] = pl._MU_MIN
            mu0[rng.choice(nb, 5, replace=False)] = 1.0
            mu0[-1] = 1.0
        mu, finished = pl._dual_newton(x, Q, r2, np.einsum("ij,ij->i", Q, Q), mu0)
        assert finished
        phi = (x + Q.T @ mu) / float(mu.sum())
        v = cp.Variable(d)
        prob = cp.Problem(cp.Maximize(x @ v), [cp.norm(v - Q[b]) <= np.sqrt(r2[b]) for b in range(nb + 1)])
        prob.solve(solver=cp.CLARABEL)
        assert prob.status == "optimal"
        assert SOLVER.close(float(x @ phi), prob.value, scale=1.0)
        assert np.all(np.linalg.norm(phi - Q, axis=1) <= np.sqrt(r2) + SOLVER.bound(1.0))  # in every ball

def grouped(Phi, n, groups):
    """``Phi`` with the rows below the median norm put on ``groups`` of their points
    (a subset of feasible points: feasible), as the refinement's groups put the tail."""
    tail = np.flatnonzero(n < np.median(n))
    rep = tail[np.linspace(0, tail.size - 1, groups).astype(int)]
    P = Phi.copy()
    near = np.argmax(Phi[tail] @ Phi[rep].T, axis=1)
    P[tail] = Phi[rep[near]]
    return P


def grouped_case():
    """A small real-shaped head, its reference optimum (scaled to diameter 1) and that
    optimum with the small rows on 4 shared points, and the reference: ``(G, n, Phi, P, ref)``."""
    G = head(90, 4, 8)
    G = G - G.mean(axis=0)
    ref = hg.min_tension(G, method="cvxpy-flow")
    n = np.linalg.norm(G, axis=1)
    Phi = ref.potential / brute_pairs(ref.potential)[0].max()
    return G, n, Phi, grouped(Phi, n, 4), ref


def test_placement_gains_most_of_what_grouping_lost():
    """From the reference optimum with its small rows on 4 shared points: placement
    keeps the potential feasible (brute force), never lowers its value, does not pass
    the reference's upper bound, and wins back at least half of what grouping lost."""
    G, n, Phi, P, ref = grouped_case()
    v0, vstar = float(np.sum(G * P)), float(np.sum(G * Phi))
    assert vstar - v0 > 1e-6 * vstar  # not a tolerance: the grouping must lose something to win back
    tail = np.flatnonzero(n < np.median(n))
    Pp, gained = pl.place_rows(G, P, tail[np.argsort(-n[tail])])
    assert brute_pairs(Pp)[0].max() <= 1.0 + kernel_rtol(G.shape[1])
    v = float(np.sum(G * Pp))
    assert v >= v0 and abs((v - v0) - gained) <= kernel_rtol(G.size) * vstar
    assert v <= (ref.value + ref.gap) * (1 + kernel_rtol(G.size))
    assert v - v0 >= 0.5 * (vstar - v0)


def test_every_gaining_step_is_kept(monkeypatch):
    """A row's step ends on the sphere of its binding ball, and the check after it (each
    screened row's distance from the new point, formed again) may find that distance a
    rounding above 1: the step is then shortened a little, not dropped.  Every row whose
    best step gains moves (on the MiniLM full vocabulary's tail 45% of the steps were dropped
    so), and the potential stays feasible (brute force)."""
    G, n, _, P, _ = grouped_case()
    gains = {}
    best = pl._best_point

    def spy(x, Q, r2, mu0):
        step, mu = best(x, Q, r2, mu0)
        gains[len(gains)] = float(x @ step)
        return step, mu

    monkeypatch.setattr(pl, "_best_point", spy)
    rows = np.argsort(-n)[10:]
    rows = rows[n[rows] > 0]
    Pp, _ = pl.place_rows(G, P, rows)
    gained = np.array([gains[k] for k in range(len(rows))]) > 0
    assert gained.sum() >= len(rows) // 2  # not a tolerance: most rows have a step to keep
    moved = np.any(Pp[rows] != P[rows], axis=1)
    assert np.array_equal(moved, gained)
    assert brute_pairs(Pp)[0].max() <= 1.0 + kernel_rtol(G.shape[1])


def test_a_short_step_straight_into_its_ball_is_shortened_not_dropped():
    """A row ``1e-10`` inside the ball of a screened row takes a step of ``1e-10 + 3e-16`` straight
    toward its sphere: formed again it ends a few roundings beyond 1, and shortening it by
    ``1e-9`` or ``1e-6`` of itself (a step ending on the sphere) takes back only ``1e-19`` and
    ``1e-16`` of distance.  ``_shortened`` gives up a thousandth of it instead of all of it, and
    the row is then within 1 of every screened row (a second row, far inside, too).  The
    numbers are sums of two terms, the same on every machine."""
    a, b = 1.0 - 1e-10, 1e-10 + 3e-16  # not tolerances: the distance inside the ball, the step
    Q = np.array([[a, 0.0, 0.0], [0.3, 0.4, 0.0]])
    step = np.array([-b, 0.0, 0.0])  # away from the screened row's point: its distance grows by b
    assert float(np.sum((Q[0] - step) ** 2)) > 1.0  # the whole step ends beyond the sphere
    for f in pl._SHORTEN[:3]:
        assert float(np.sum((Q[0] - f * step) ** 2)) > 1.0  # shortened as for a step ending on it
    kept = pl._shortened(Q, step)
    assert kept is not None
    f, sq = kept
    assert f >= 0.999 and sq.max() <= 1.0
    np.testing.assert_array_equal(sq, np.einsum("ij,ij->i", Q - f * step, Q - f * step))


def test_a_row_with_more_balls_than_the_cap_stays(monkeypatch):
    """A row with more than ``_MAX_BALLS`` rows beyond ``1 - radius`` is not moved (its dual's
    Gram matrix is balls x balls: 7 GB for a large row at full vocabulary).  With the cap at
    0 no row moves and nothing is gained; with the cap at the default the same rows move."""
    G, n, _, P, _ = grouped_case()
    rows = np.argsort(-n)[10:]
    moved, gained = pl.place_rows(G, P, rows)
    assert gained > 0 and np.any(moved != P)
    monkeypatch.setattr(pl, "_MAX_BALLS", 0)
    kept, none = pl.place_rows(G, P, rows)
    assert none == 0.0 and np.array_equal(kept, P)


def test_refine_places_the_tail(monkeypatch):
    """One round of refinement on a real-shaped head: the placement is called on the
    small rows only, and its potential is kept only where it is no worse."""
    X = solver_head()
    seen = []
    real = pl.place_pass

    def spy(X_, P, rows, **kw):
        seen.append(rows.copy())
        return real(X_, P, rows, **kw)

    monkeypatch.setattr(rf, "place_pass", spy)
    P1 = rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=False)[0]
    monkeypatch.setattr(rf, "place_pass", lambda X_, P, rows, **kw: (P, 0.0, rows))
    P0 = rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=False)[0]
    assert seen and seen[0].size > 0
    n = np.linalg.norm(X, axis=1)
    assert n[seen[0]].max() < n.max()  # the largest rows are not placed
    assert float(np.sum(X * P1)) >= float(np.sum(X * P0)) * (1 - kernel_rtol(X.size))


def test_refine_places_only_once_rounds_stop_halving_the_gap(monkeypatch):
    """The placement costs ~15 ms a tail row, a minute on the MiniLM top 4096, where a
    round at d = 32 takes 20-40 s: it waits until rounds stop halving the gap (or the
    last round, or a deadline that leaves no room for another round).  Each call is
    checked against the gap the round reported before it, and the rounds' gaps are
    read off the progress lines."""
    X = solver_head()
    calls, gaps = [], []
    real = pl.place_pass

    def spy(X_, P, rows, **kw):
        calls.append(len(gaps))  # the number of rounds reported so far
        return real(X_, P, rows, **kw)

    placed_lines = []

    descended = []

    def progress(msg):
        if "rel gap " in msg:
            gaps.append(float(msg.split("rel gap ")[1].split()[0]))
        elif "descended" in msg:  # "round r: weights of N pairs descended, upper bound a -> b ..."
            descended.append(len(gaps))
        else:  # one line per pass: "round r: N tail rows placed, lower bound a -> b (goal g)  t s"
            before, after = msg.split("lower bound ")[1].split(" (goal")[0].split(" -> ")
            placed_lines.append((len(gaps), float(before), float(after)))

    monkeypatch.setattr(rf, "place_pass", spy)
    monkeypatch.setattr(rf, "_progress", progress)
    # the schedule alone: the weights' descent (next test) closes this head's gap in round 2
    monkeypatch.setattr(rf, "_descend_weights", lambda *a, **k: None)
    monkeypatch.setattr(rf, "_price_and_descend", lambda X_, I, J, w, Phi, cost, *a, **k: (I, J, w, Phi, cost))
    rf._refine_solve(X, tol=1e-12, max_rounds=6, verbose=True)
    assert len(gaps) == 6
    assert [r for r, _, _ in placed_lines] == calls  # one progress line per pass, before its round's line
    assert all(b >= a for _, a, b in placed_lines)
    placed = set(calls)
    for r in (1, 2, 3, 4):  # a round not placed reports the gap it was judged on: it must have halved
        halved = gaps[r] <= 0.5 * min(gaps[:r])
        assert (r in placed) or halved, (r, gaps, calls)
        assert halved or (r in placed), (r, gaps, calls)  # a round that did not halve is placed
    assert 0 not in placed  # the first round never (nothing to compare with, time left)
    assert 5 in placed  # the last round always
    # on this head a middle round halves and is not placed (which one depends on rounding in
    # the groups' solves: round 2 with the ALM's former preconditioner, round 4 with today's)
    assert {1, 2, 3, 4} - placed, (gaps, calls)
    assert not descended


def test_refine_descends_the_weights_in_placed_rounds(monkeypatch):
    """The same head with the weights' descent: it runs in placed rounds only, and round 2's
    descent takes the flow's cost from 7e-6 above the certified lower bound (a feasible
    potential's value) to within 1e-8 of it (measured: 7.1e-10); the rounds after report
    the same certified gap."""
    X = solver_head()
    lines = []
    placed = []
    real = pl.place_pass

    def spy(X_, P, rows, **kw):
        placed.append(sum("rel gap " in m for m in lines))
        return real(X_, P, rows, **kw)

    monkeypatch.setattr(rf, "place_pass", spy)
    monkeypatch.setattr(rf, "_progress", lines.append)
    rf._refine_solve(X, tol=1e-12, max_rounds=3, verbose=True)
    gaps = [float(m.split("rel gap ")[1].split()[0]) for m in lines if "rel gap " in m]
    descents = [(sum("rel gap " in m for m in lines[:k]), m) for k, m in enumerate(lines) if "descended" in m]
    assert descents and {r for r, _ in descents} <= set(placed), (descents, placed)
    r, m = descents[0]
    before, after = (float(v) for v in m.split("upper bound ")[1].split("  (")[0].split(" -> "))
    assert after < before
    assert gaps[0] > 1e-6 and gaps[r] <= 1e-8, gaps  # not tolerances: the gaps the rounds certify


@pytest.mark.parametrize("shrink, until_deadline, passes", [
    (0.9, False, 1),      # a pass that closes a tenth of what is left: no second pass while rounds remain
    (0.5, False, None),   # half of what is left each time: passes go on (to the deadline here)
    (0.9, True, None),    # no time for another round: passes go on while they gain
    (0.0, False, 1),      # the first pass reaches the goal: done
])
def test_place_tail_passes(monkeypatch, shrink, until_deadline, passes):
    """Passes of the placement go on while each closes a fifth of what is left to the
    goal (the value meeting tol), or, with no time left for another round, while they
    gain at all; never past the goal or the deadline."""
    import time

    count = []

    def fake_place(X_, P, rows, deadline, duals=None):
        count.append(1)
        return P + 1.0, 1.0, rows  # every row left open

    goal = 10.0
    monkeypatch.setattr(rf, "place_pass", fake_place)
    # after k passes the value is goal - 8 shrink^k: a pass closes (1 - shrink) of what is left
    monkeypatch.setattr(rf, "_feasible_value", lambda X_, P: (goal - 8.0 * shrink ** float(P[0, 0]), P, None))
    P0 = np.zeros((1, 1))
    _, v = rf._place_tail(np.zeros((1, 1)), P0, goal - 8.0, np.arange(1), time.perf_counter() + 0.2, goal,
                          until_deadline)
    if passes is not None:
        assert len(count) == passes
    else:
        assert len(count) > 5  # stopped by the deadline, not by the rule
    assert v <= goal


def test_without_a_deadline_the_last_placement_stops_where_passes_stop_paying(monkeypatch):
    """Where splitting stalls and no time limit is set, the last placement follows the
    rule of the rounds (each pass must close a fifth of what is left to the goal), not
    "while it gains at all": on this rank-6 head the passes plateau far below the goal
    and 41 more passes gained 6e-5 of the 0.31 left.  The passes are read off the
    progress lines, "lower bound a -> b (goal g)"."""
    from hilbertgeom.exceptions import SolverError

    G = stalled_head(monkeypatch)
    monkeypatch.setattr(rf, "_POLISH_ROWS", 0)  # the stall is reported, not polished
    lines = []

    def progress(msg):
        if "rows placed" in msg:
            before, after = msg.split("lower bound ")[1].split(" (goal")[0].split(" -> ")
            goal = msg.split("(goal ")[1].split(")")[0]
            lines.append((float(before), float(after), float(goal)))

    monkeypatch.setattr(rf, "_progress", progress)
    with pytest.raises(SolverError, match="iteration_limit"):
        hg.min_tension(G, method="refine", tol=1e-6, verbose=True)
    assert len(lines) >= 2  # not a tolerance: the rule let at least one pass follow the first
    for a, b, g in lines[:-1]:
        assert b - a >= 0.2 * (g - b)  # not a tolerance: each pass that was followed closed a fifth
    a, b, g = lines[-1]
    assert b - a < 0.2 * (g - b) or b >= g  # not a tolerance: the last one did not (or reached the goal)


def explicit_placement(X, Phi, rows, radius):
    """The placement with every row's differences formed explicitly (no GEMM
    screening): the rows farther than ``1 - radius`` by their exact differences,
    the move checked against every row (and shortened by ``_SHORTEN`` as there)."""
    Phi = Phi.copy()
    n = _rownorms(X)  # the placement's own unit rows: an ulp there moves a degenerate row's step
    prev_idx, prev_mu = np.zeros(0, np.intp), np.zeros(0)
    for i in rows:
        C = Phi - Phi[i]
        nn = np.einsum("ij,ij->i", Phi, Phi)  # the screening's margin for the GEMM's rounding, on exact distances
        margin = 4 * (C.shape[1] + 2) * U64 * (nn + nn[i])
        sel = np.flatnonzero(np.einsum("ij,ij->i", C, C) > (1 - radius) ** 2 - margin)
        sel = sel[sel != i]
        Q = np.vstack([C[sel], np.zeros((1, C.shape[1]))])
        mu0 = np.ones(Q.shape[0])
        if prev_idx.size:
            pos = np.minimum(np.searchsorted(prev_idx, sel), prev_idx.size - 1)
            hit = prev_idx[pos] == sel
            if hit.any():
                mu0[:-1] = np.where(hit, prev_mu[pos], 1e-12)  # not a tolerance: at the bound
                mu0[-1] = prev_mu[-1]
        step, mu = pl._best_point(X[i] / n[i], Q, np.append(np.ones(sel.size), radius**2), mu0)
        prev_idx, prev_mu = sel, mu
        if not float(X[i] @ step) >= -pl._GIVE * n[i] or not np.any(step):
            continue
        for shorten in pl._SHORTEN:  # the step shortened a little where a distance is a rounding above 1
            Cs = C - shorten * step
            Cs[i] = 0.0
            if float(np.einsum("ij,ij->i", Cs, Cs).max()) <= 1.0:
                Phi[i] += shorten * step
                break
    return Phi


@pytest.mark.parametrize("block", [1, 4, 1000])
def test_blocked_screening_is_the_explicit_placement(monkeypatch, block):
    """The GEMM screening (``_BLOCK`` rows per product, distances of the rows still to
    come made again after each move) picks the rows an explicit difference picks:
    same moves as the placement that forms every row's differences, with blocks of 1,
    several blocks, and one block.  The large trust radius makes moves cross the
    screening threshold inside a block."""
    G, n, _, P, _ = grouped_case()
    rows = np.argsort(-n)[10:]
    monkeypatch.setattr(pl, "_BLOCK", block)
    want = explicit_placement(G, P, rows, 0.3)
    got, _ = pl.place_rows(G, P, rows, radius=0.3)
    assert np.any(np.abs(want - P).max(axis=1) > 0.01)  # not a tolerance: rows moved
    assert np.abs(got - want).max() <= kernel_rtol(G.size)


@pytest.mark.parametrize("block", [1, 1000])
def test_a_moved_row_bounds_the_next_in_its_block(monkeypatch, block):
    """Closed form: two rows on one point ``c = -0.12 e1`` pulling in opposite
    directions, trust radius 0.6.  The first moves to ``c + 0.6 e1``; the second is
    then 0.6 from it, beyond ``1 - 0.6``, so the first row's ball stops it at
    ``c - 0.4 e1`` (screening by the distances before the first move would let it
    reach ``c - 0.6 e1``, 1.2 apart).  The offset ``c`` makes the Gram form's cross
    term and the moved row's new squared norm decide the screening."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    monkeypatch.setattr(pl, "_BLOCK", block)
    got, gained = pl.place_rows(X, np.full((2, 2), [-0.12, 0.0]), np.arange(2), radius=0.6)
    assert SOLVER.close(got[0, 0], 0.48, scale=1.0) and SOLVER.close(got[1, 0], -0.52, scale=1.0)
    assert np.abs(got[:, 1]).max() <= SOLVER.bound(1.0)
    assert SOLVER.close(gained, 1.0, scale=1.0)


def test_open_rows_closed_form():
    """Closed form, three rows on a line (radius 0.6): ``A`` and ``B`` pull toward ``+e1``
    from 0 and -0.5, ``C`` (no pull) stays at 0.  ``A`` goes first, to 0.5, where ``B``'s
    ball holds it; ``B`` then moves 0.6 to 0.1 and stops at its trust ball.  Both are
    left open: ``B`` by its trust ball, ``A`` because ``B``, which it touches, moved after
    it.  Passes over the open rows alone then reach the optimum ``A = B = 1`` (``C``'s ball),
    where none is open."""
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    P = np.array([[0.0, 0.0], [-0.5, 0.0], [0.0, 0.0]])
    got, gained, left = pl.place_pass(X, P, np.arange(2), radius=0.6)
    assert SOLVER.close(got[0, 0], 0.5, scale=1.0) and SOLVER.close(got[1, 0], 0.1, scale=1.0)
    assert left.tolist() == [0, 1]
    passes = 1
    while left.size:
        got, more, left = pl.place_pass(X, got, left, radius=0.6)
        gained += more
        passes += 1
        assert passes <= 4  # not a tolerance: 1.0 and 0.7, then 1.0 for B
    assert SOLVER.close(got[0, 0], 1.0, scale=1.0) and SOLVER.close(got[1, 0], 1.0, scale=1.0)
    assert SOLVER.close(gained, 2.5, scale=1.0)
    assert np.array_equal(got[2], P[2])


def test_rows_not_left_open_gain_nothing_in_another_pass():
    """On the grouped case with a small trust radius (most moves stop at it): a second
    pass over every row gains, on each row the first pass did not leave open, no more than
    the row's solve is accurate to (``_GAP`` of ``|x_i|``, the dual gap at which a row's
    solve stops), and a second pass over the open rows alone gains what the full one
    gains, less those rows' crumbs."""
    G, n, _, P, _ = grouped_case()
    rows = np.argsort(-n)[10:]
    rows = rows[n[rows] > 0]
    P1, _, left = pl.place_pass(G, P, rows, radius=0.01)
    assert 0 < left.size < rows.size  # not a tolerance: some rows stopped at their trust ball, not all
    P2, full, _ = pl.place_pass(G, P1, rows, radius=0.01)
    per_row = np.einsum("ij,ij->i", G, P2 - P1)
    closed = np.setdiff1d(rows, left)
    crumbs = pl._GAP * n[closed]
    assert np.all(per_row[closed] <= crumbs + kernel_rtol(G.shape[1]) * n[closed])
    _, reduced, _ = pl.place_pass(G, P1, left, radius=0.01)
    assert full > 0 and reduced >= full - float(crumbs.sum())


def test_place_tail_ends_where_no_row_is_open(monkeypatch):
    """A pass that leaves no row open ends the placement, even with no time for another
    round (where passes otherwise go on while they gain); a pass places only the rows the
    one before left open."""
    import time

    seen = []

    def fake_place(X_, P, rows, deadline, duals=None):
        seen.append(rows.tolist())
        return P + 1.0, 1.0, rows[:1] if len(seen) == 1 else rows[:0]

    monkeypatch.setattr(rf, "place_pass", fake_place)
    monkeypatch.setattr(rf, "_feasible_value", lambda X_, P: (float(P[0, 0]), P, None))
    _, v = rf._place_tail(np.zeros((3, 1)), np.zeros((3, 1)), 0.0, np.arange(3), time.perf_counter() + 5.0, 10.0,
                          True)
    assert seen == [[0, 1, 2], [0]]
    assert v == 2.0  # not a tolerance: two passes of the fake, one each


def hub_tail(k=30, t=400, d=48, seed=5):
    """A potential of the MiniLM tail's shape (fewer large rows than dimensions: 184 at d = 384
    there): ``k`` large rows on the half of a sphere of
    radius 1/2 about ``+e_1`` (diameter at most 1) and ``t`` tail rows in a cloud of radius
    0.005 about ``-0.48 e_1`` (0.87-0.99 from each large row: every large row is a ball for
    every tail row, and no two tail rows ever are), the tail's gradient rows pointing away
    from the large rows.  Returns ``(X, Phi, tail)``."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((k, d))
    U[:, 0] = np.abs(U[:, 0]) + 1.5 * np.linalg.norm(U[:, 1:], axis=1)  # cos(angle to e_1) > 0.83
    U /= np.linalg.norm(U, axis=1)[:, None]
    e1 = np.eye(d)[0]
    T = -0.48 * e1 + 0.005 * rng.uniform(-1, 1, (t, d)) / np.sqrt(d)
    Phi = np.vstack([0.5 * U, T])
    Xt = -e1 + 0.3 * rng.standard_normal((t, d)) / np.sqrt(d)
    Xt *= rng.uniform(1e-4, 2e-4, t)[:, None]  # the small rows
    X = np.vstack([U, Xt])
    return X, Phi, np.arange(k, k + t)


def test_rows_placed_at_once_reach_their_best_points(monkeypatch):
    """Where no tail row can bound another (``hub_tail``), each tail row's best point is that
    of its own program given the large rows.  The rows placed at once (:func:`_place_batch`,
    one batched projected Newton on all their duals) whose duals finished reach the value
    of that program (CLARABEL, an independent interior-point solve, on every tenth of them, to
    its tolerance; :func:`test_batch_newton_finishes_every_row_of_the_tail_shape` checks
    ``_GAP`` against Newton one row at a time); the passes go on until no row is left open.
    Both potentials, at once and one at a time, are feasible (brute force), and the gain is at
    least that of one row at a time, less ``2 _GAP sum |x_i|``."""
    import cvxpy as cp

    X, Phi, tail = hub_tail()
    assert brute_pairs(Phi)[0].max() <= 1.0
    placed = []
    real = pl._place_batch

    def spy(*a, **kw):
        out = real(*a, **kw)
        placed.append(None if out is None else out[1])
        return out

    def passes(rows):  # until no row is left open (a row stopped by its trust ball goes on)
        P, gain = Phi, 0.0
        for _ in range(20):
            P, g, rows = pl.place_pass(X, P, rows)
            gain += g
            if not rows.size:
                return P, gain
        raise AssertionError("rows still open after 20 passes")

    monkeypatch.setattr(pl, "_place_batch", spy)
    Pb, gb = passes(tail)
    assert placed and placed[0] is not None and placed[0].size >= 0.9 * tail.size
    assert brute_pairs(Pb)[0].max() <= 1.0 + kernel_rtol(X.shape[1])
    n = np.linalg.norm(X, axis=1)
    for i in np.sort(placed[0])[::10]:
        z = cp.Variable(X.shape[1])
        balls = [cp.norm(z - Phi[a]) <= 1 for a in range(tail[0])]  # the large rows'
        prob = cp.Problem(cp.Maximize(X[i] / n[i] @ z), balls)
        prob.solve(solver=cp.CLARABEL)
        assert prob.status == "optimal"
        assert SOLVER.close(float(X[i] @ Pb[i]) / n[i], prob.value, scale=1.0)
    monkeypatch.setattr(pl, "_BATCH_MIN", tail.size + 1)
    placed.clear()
    Ps, gs = passes(tail)
    assert not placed  # one at a time
    assert brute_pairs(Ps)[0].max() <= 1.0 + kernel_rtol(X.shape[1])
    assert gb >= gs - 2 * pl._GAP * float(n.sum())


def test_rows_placed_at_once_stay_within_one_of_each_other():
    """Two tail clusters 0.79 apart (just inside ``1 - radius``), their gradient rows pushing
    them apart and nothing else in the way: placed at once, each moves at most half the
    trust radius, so after the first batch they are at most 0.99 apart; then they are
    farther than ``1 - radius`` and only one cluster is placed at once, against the other's
    balls.  The potential stays feasible (brute force) and the clusters end at distance 1."""
    rng = np.random.default_rng(2)
    d, t = 6, 300
    e2 = np.eye(d)[1]
    side = np.repeat([1.0, -1.0], t // 2)
    Phi = 0.395 * side[:, None] * e2 + 1e-4 * rng.uniform(-1, 1, (t, d))
    X = side[:, None] * e2 * rng.uniform(1.0, 2.0, t)[:, None]
    assert brute_pairs(Phi)[0].max() < 0.8
    P, gained, _ = pl.place_pass(X, Phi, np.arange(t))
    D = brute_pairs(P)[0]
    assert gained > 0 and D.max() <= 1.0 + kernel_rtol(d)
    assert D.max() >= 1.0 - 1e-6  # not a tolerance: the clusters are pushed to the unit distance


def tail_duals():
    """The duals of the 64 tail rows of ``hub_tail`` at once (radius 0.1): ``(C, P, x, du)``, the
    large rows' points, the tail rows' points, their unit rows and the :class:`_Duals`."""
    X, Phi, tail = hub_tail(t=64)
    k = tail[0]
    C, P = Phi[:k], Phi[tail]
    x = X[tail] / np.linalg.norm(X[tail], axis=1)[:, None]
    return C, P, x, pl._Duals(C, P, x, 0.1)


def first_row_multipliers(C, P, x, du):
    """The first tail row's multipliers solved one at a time (the batched Newton's start)."""
    Q0 = np.vstack([C - P[0], np.zeros((1, C.shape[1]))])
    return pl._best_point(x[0], Q0, du.r2, np.ones(du.m))[1]


def test_batch_newton_finishes_every_row_of_the_tail_shape():
    """:func:`_batch_newton` from the first row's multipliers finishes every row of
    ``hub_tail`` (Newton alone, no L-BFGS-B), and each row's point ``(x + Q^T mu) / M``, shortened
    into every ball as it is placed, has the value of that of the row's own :func:`_dual_newton`
    to ``2 _GAP`` (each within ``_GAP`` of the optimum), on the rows (most) where that one
    finishes from the same start."""
    C, P, x, du = tail_duals()
    mu0 = first_row_multipliers(C, P, x, du)
    mu, solved = pl._batch_newton(du, mu0)
    assert solved.all()
    compared = 0
    for i in range(P.shape[0]):
        Q = np.vstack([C - P[i], np.zeros((1, C.shape[1]))])
        ref, finished = pl._dual_newton(x[i], Q, du.r2, np.einsum("ij,ij->i", Q, Q), mu0)
        if not finished:  # one at a time, that row would go on to L-BFGS-B: no reference to _GAP
            continue
        compared += 1
        c0 = np.einsum("ij,ij->i", Q, Q) - du.r2
        vals = []
        for m in (mu[i], ref):
            phi = (x[i] + Q.T @ m) / m.sum()
            t = pl._into_balls(Q @ phi, float(phi @ phi), c0)  # shortened into every ball, as placed
            assert np.all(np.einsum("ij,ij->i", t * phi - Q, t * phi - Q) <= du.r2 * (1 + kernel_rtol(Q.shape[1])))
            vals.append(float(x[i] @ (t * phi)))
        assert abs(vals[0] - vals[1]) <= 2 * pl._GAP
    assert compared >= 0.75 * P.shape[0]


def test_batch_newton_finishes_rows_whose_last_decrease_is_below_rounding(monkeypatch):
    """Next to a row's optimum the Newton step's decrease of the dual value is below its
    rounding, and the order of the sums decides whether it is seen.  Here every value comes out
    ``8 u |g|`` higher than the one before (``u`` the unit roundoff), so no decrease that small is
    seen on any machine: every row of ``hub_tail`` still finishes, on a point of the path that is
    finished itself (``place._GAP``), each within ``_GAP`` of its own dual value."""
    C, P, x, du = tail_duals()
    state = du.state
    calls = [0]

    def rounded_up(idx, mu):
        f, *rest = state(idx, mu)
        calls[0] += 1
        return (f + calls[0] * 8 * U64 * np.abs(f), *rest)

    monkeypatch.setattr(du, "state", rounded_up)
    mu0 = first_row_multipliers(C, P, x, du)
    mu, solved = pl._batch_newton(du, mu0)
    assert solved.all()
    idx = np.arange(P.shape[0])
    f, _, M, qphi, pp = state(idx, mu)
    assert np.all(f - du.primal(idx, mu, M, qphi, pp) <= pl._GAP)


def test_rows_placed_at_once_are_reopened_by_a_ball_that_moves_after_them(monkeypatch):
    """A large row passed with the tail (``hub_tail``) is farther than ``1 - radius`` from the
    tail, so it is placed in turn after the rows placed at once; it moves, and every row placed
    at once that touches it (its multipliers no longer hold) is left open for the next pass."""
    X, Phi, tail = hub_tail()
    seen = {}
    real = pl._place_batch

    def spy(*a, **kw):
        out = real(*a, **kw)
        if out is not None and not seen:
            seen["done"], seen["touched"] = out[1], out[2]
        return out

    monkeypatch.setattr(pl, "_place_batch", spy)
    h = 0
    P, _, left = pl.place_pass(X, Phi, np.append(tail, h))
    assert h not in seen["done"] and not np.array_equal(P[h], Phi[h])  # placed in turn, and moved
    touching = [i for i, nb in seen["touched"].items() if h in nb]
    assert touching and np.all(np.isin(touching, left))
    assert brute_pairs(P)[0].max() <= 1.0 + kernel_rtol(X.shape[1])


def test_directions_solved_in_threads_are_those_solved_in_turn(monkeypatch):
    """The batched Newton directions (:meth:`_Duals.directions`), their blocks of systems solved
    in two threads (hilbertgeom/_threads.py, :func:`blocks_in_threads`), are those solved one
    block after another, to the rounding of the solves, on every row and multiplier: the rows
    of ``hub_tail`` at multipliers drawn at random (a third at the bound), in blocks of 8
    rows (several blocks, of several sizes of free set).  Reference: each row's system solved
    alone, in float64, from its own free set (``(A_F A_F^T) p_F = -M g_F``, formed from the
    points, not from the Gram form), to ``cond(H)`` times the rounding of the ``d``-term inner
    products that the Gram form gathers (the solution's perturbation bound)."""
    from hilbertgeom import _threads as th

    C, P, x, du = tail_duals()
    n = P.shape[0]
    idx = np.arange(n)
    rng = np.random.default_rng(3)
    mu = np.where(rng.random((n, du.m)) < 0.3, pl._MU_MIN, rng.uniform(0.5, 2.0, (n, du.m)))
    _, g, M, qphi, pp = du.state(idx, mu)
    free = ~((mu <= pl._MU_MIN) & (g > 0))
    monkeypatch.setattr(pl, "_SOLVE_BLOCK", 8)
    out = {}
    for workers in (1, 2):
        monkeypatch.setattr(th, "_workers", lambda w=workers: w)
        out[workers] = du.directions(idx, mu, free, g, M, qphi, pp)
    assert np.count_nonzero(out[2]) > 0.5 * free.sum()
    k = C.shape[0]
    for i in range(n):  # each row alone: the Hessian from the points themselves
        z = P[i] + (x[i] + (C - P[i]).T @ mu[i, :k]) / M[i]  # the row's new point
        A = np.vstack([C, P[i]]) - z  # the balls' centres (the trust ball's is the row's point)
        F = np.flatnonzero(free[i])
        H = A[F] @ A[F].T
        ref = np.zeros(du.m)
        ref[F] = np.linalg.solve(H, -M[i] * g[i, F])
        allowed = np.linalg.cond(H) * kernel_rtol(C.shape[1]) * float(np.linalg.norm(ref))
        for w in (1, 2):
            assert np.all(out[w][i, ~free[i]] == 0.0)  # not a tolerance: held multipliers do not move
            assert np.linalg.norm(out[w][i] - ref) <= allowed
    # threads against turns: the same systems, so equal to the solves' rounding
    assert np.abs(out[2] - out[1]).max() <= kernel_rtol(du.m) * float(np.abs(out[1]).max())


def test_recorded_multipliers_follow_their_balls_by_row():
    """:class:`Multipliers` by hand: a row's recorded multipliers go to the places of the same
    ball rows in the new (sorted) ball list, a ball it had no multiplier for starts at the
    bound ``_MU_MIN``, the trust ball's stays last, a row without a record gets the default,
    and a row recorded again keeps only its latest."""
    duals = pl.Multipliers()
    duals.add(np.array([7, 2]), np.array([3, 5, 9]), np.array([[1.0, 2.0, 3.0, 0.5], [4.0, 5.0, 6.0, 0.0]]))
    got = duals.start(np.array([2, 4, 7]), np.array([5, 8, 9]), np.array([-1.0, -2.0, -3.0, -4.0]))
    lo = pl._MU_MIN
    want = np.array([[5.0, lo, 6.0, 0.0],        # row 2: balls 5 and 9 kept, 8 new
                     [-1.0, -2.0, -3.0, -4.0],   # row 4: no record
                     [2.0, lo, 3.0, 0.5]])       # row 7
    assert np.array_equal(got, want)
    duals.add(np.array([7]), np.array([8]), np.array([[9.0, 1.0]]))
    assert [r.tolist() for r, _, _ in duals.parts] == [[2], [7]]
    got = duals.start(np.array([7]), np.array([5, 8, 9]), np.zeros(4))
    assert np.array_equal(got, [[lo, 9.0, lo, 1.0]])


def test_rows_placed_again_start_from_their_recorded_multipliers(monkeypatch):
    """A placement given the multipliers an earlier one recorded (``duals``: a later round's
    placement of the same tail) starts each row's dual there.  On ``hub_tail`` with a trust
    radius of 0.3 (``radius`` 0.6), which no row's best point reaches, one batch places every row
    on its best point; placed again from the same potential, each row's dual then starts at its
    solution: the Newton steps (rows times steps, counted in :meth:`_Duals.directions`) fall to a
    twentieth of those from the first row's multipliers at most (measured: 27 against 3,798).  The
    gain is that of the first pass to ``2 _GAP sum |x_i|`` (each row's value within ``_GAP`` of its
    optimum; measured 2e-13 apart), and the potential stays feasible (brute force)."""
    X, Phi, tail = hub_tail()
    steps = []
    real = pl._Duals.directions

    def count(self, idx, *a):
        steps.append(idx.size)
        return real(self, idx, *a)

    monkeypatch.setattr(pl._Duals, "directions", count)
    duals = pl.Multipliers()
    _, cold, left = pl.place_pass(X, Phi, tail, duals=duals, radius=0.6)
    first = sum(steps)
    assert not left.size and sum(r.size for r, _, _ in duals.parts) >= 0.9 * tail.size
    steps.clear()
    P, warm, _ = pl.place_pass(X, Phi, tail, duals=duals, radius=0.6)
    assert first > 0 and sum(steps) <= 0.05 * first, (sum(steps), first)
    n = np.linalg.norm(X, axis=1)
    assert abs(warm - cold) <= 2 * pl._GAP * float(n[tail].sum())
    assert brute_pairs(P)[0].max() <= 1.0 + kernel_rtol(X.shape[1])


def test_refine_hands_each_placement_the_multipliers_of_the_last(monkeypatch):
    """The refinement keeps one :class:`Multipliers` through its rounds: every placement gets
    the same one, the first empty and a later round's holding the tail rows placed before."""
    monkeypatch.setattr(rf, "_PLACE_WHEN", 0.0)  # every round placed
    X = solver_head()
    seen = []
    real = pl.place_pass

    def spy(X_, P, rows, **kw):
        d = kw["duals"]
        seen.append((d, sum(r.size for r, _, _ in d.parts)))
        return real(X_, P, rows, **kw)

    monkeypatch.setattr(rf, "place_pass", spy)
    rf._refine_solve(X, tol=1e-12, max_rounds=3, verbose=False)
    assert len(seen) >= 2 and all(d is seen[0][0] for d, _ in seen)
    assert seen[0][1] == 0 and seen[-1][1] > 0
