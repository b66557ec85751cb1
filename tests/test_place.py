"""Row placement (``tension/place.py``): each tail row moved to its best point given
all the others, the cluster refinement's lower bound.

References: the cvxpy program of one row's best point (an independent
interior-point solve), the cvxpy reference of ``T`` (the placed value may not pass
it), and brute-force pairwise distances for feasibility.
"""

from __future__ import annotations

import numpy as np
from helpers import brute_pairs, kernel_rtol
from test_refine import head

import hilbertgeom as hg
from hilbertgeom.tension import place as pl
from hilbertgeom.tension import refine as rf
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


def grouped(Phi, n, groups):
    """``Phi`` with the rows below the median norm put on ``groups`` of their points
    (a subset of feasible points: feasible), as the refinement's groups put the tail."""
    tail = np.flatnonzero(n < np.median(n))
    rep = tail[np.linspace(0, tail.size - 1, groups).astype(int)]
    P = Phi.copy()
    near = np.argmax(Phi[tail] @ Phi[rep].T, axis=1)
    P[tail] = Phi[rep[near]]
    return P


def test_placement_gains_most_of_what_grouping_lost():
    """From the reference optimum with its small rows on 4 shared points: placement
    keeps the potential feasible (brute force), never lowers its value, does not pass
    the reference's upper bound, and wins back at least half of what grouping lost."""
    G = head(90, 4, 8)
    G = G - G.mean(axis=0)
    ref = hg.min_tension(G, method="cvxpy-flow")
    n = np.linalg.norm(G, axis=1)
    Phi = ref.potential / brute_pairs(ref.potential)[0].max()
    P = grouped(Phi, n, 4)
    v0, vstar = float(np.sum(G * P)), float(np.sum(G * Phi))
    assert vstar - v0 > 1e-6 * vstar  # not a tolerance: the grouping must lose something to win back
    tail = np.flatnonzero(n < np.median(n))
    Pp, gained = pl.place_rows(G, P, tail[np.argsort(-n[tail])])
    assert brute_pairs(Pp)[0].max() <= 1.0 + kernel_rtol(G.shape[1])
    v = float(np.sum(G * Pp))
    assert v >= v0 and abs((v - v0) - gained) <= kernel_rtol(G.size) * vstar
    assert v <= (ref.value + ref.gap) * (1 + kernel_rtol(G.size))
    assert v - v0 >= 0.5 * (vstar - v0)


def test_refine_places_the_tail(monkeypatch):
    """One round of refinement on a real-shaped head: the placement is called on the
    small rows only, and its potential is kept only where it is no worse."""
    G = head(400, 8, 32)
    G = G - G.mean(axis=0)
    X = G / np.abs(G).max()
    X -= X.mean(axis=0)
    seen = []
    real = pl.place_rows

    def spy(X_, P, rows, **kw):
        seen.append(rows.copy())
        return real(X_, P, rows, **kw)

    monkeypatch.setattr(rf, "place_rows", spy)
    P1 = rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=False)[0]
    monkeypatch.setattr(rf, "place_rows", lambda X_, P, rows, **kw: (P, 0.0))
    P0 = rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=False)[0]
    assert seen and seen[0].size > 0
    n = np.linalg.norm(X, axis=1)
    assert n[seen[0]].max() < n.max()  # the largest rows are not placed
    assert float(np.sum(X * P1)) >= float(np.sum(X * P0)) * (1 - kernel_rtol(X.size))
