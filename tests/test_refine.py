"""min_tension(method="refine"): cluster refinement on head-gradient-shaped rows.

References: the cvxpy reference program (an independent interior-point solve of
the flow form), the ALM (a different algorithm on the same problem), closed forms
(rows in one direction: ``T = ||u|| sum |a_i| / 2``), and brute-force checks of
each certificate (pairwise distances of the potential, the flow's divergence
recomputed row by row)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import U64, brute_pairs, kernel_rtol

import hilbertgeom as hg
from hilbertgeom import gradients as gr
from hilbertgeom.exceptions import SolverError
from hilbertgeom.tension import dual as du
from hilbertgeom.tension import refine as rf
from hilbertgeom.tolerances import tolerance

SOLVER = tolerance("solver")
TOL = 1e-6  # the target gap the solves are asked for (issue 11), not a comparison tolerance


def head(V, d, batch, seed=0, scale=0.1):
    """A real-shaped gradient: a few large target rows and many small, nearly parallel ones."""
    return gr.synthetic_head_gradient(V, d, batch=batch, seed=seed, logit_scale=scale).G


def solver_head():
    """``head(400, 8, 32)`` as the refinement receives it: centred, divided by its largest
    entry, centred again."""
    G = head(400, 8, 32)
    G = G - G.mean(axis=0)
    X = G / np.abs(G).max()
    return X - X.mean(axis=0)


def check_certificate(r, G):
    """The potential is feasible (brute-force diameter), the flow plus its residual
    balances G (divergence recomputed row by row), and the cost covers the flow."""
    V, d = G.shape
    dist, _, _ = brute_pairs(r.potential)
    assert dist.max() <= 1.0 + 8 * U64  # the exact kernel's diameter divided out: one division's rounding
    assert float(np.sum(G * r.potential)) >= r.value * (1.0 - kernel_rtol(G.size))
    div = np.zeros((V, d))
    for (i, j), y in zip(r.flow.pairs, r.flow.vectors, strict=True):
        div[i] += y
        div[j] -= y
    scale = np.abs(r.flow.vectors).sum() + np.abs(G).sum()
    assert np.abs(div + r.flow.residual - G).max() <= kernel_rtol(V + len(r.flow.pairs)) * scale
    assert r.flow.cost >= np.linalg.norm(r.flow.vectors, axis=1).sum()
    assert r.gap >= r.flow.cost - r.value


def test_refine_agrees_with_the_cvxpy_reference():
    """On a small real-shaped gradient the refined certificate meets tol and its bracket
    overlaps the interior-point reference's (an independent solver)."""
    G = head(40, 3, 8)
    r = hg.min_tension(G, method="refine", tol=TOL)
    ref = hg.min_tension(G, method="cvxpy-flow")
    assert r.status == "optimal" and r.method == "refine" and r.relative_gap <= TOL
    assert r.value <= ref.value + ref.gap and ref.value <= r.value + r.gap
    check_certificate(r, G)


def test_refine_agrees_with_the_alm_on_the_suite():
    """Every ``gradient_suite`` case: refine meets tol and its bracket overlaps the ALM's."""
    for name, G in hg.gradient_suite(24, 4, seed=3).items():
        r = hg.min_tension(G, method="refine", tol=TOL)
        a = hg.min_tension(G, method="alm", tol=TOL)
        assert r.relative_gap <= TOL, name
        assert r.value <= a.value + a.gap and a.value <= r.value + r.gap, name
        check_certificate(r, G)


def test_refine_on_one_direction_is_the_closed_form():
    """Rows ``a_i u``: ``T = ||u|| sum |a_i| / 2`` (one-dimensional transport)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal(30)
    a -= a.mean()
    u = np.array([3.0, -4.0, 0.0])
    G = np.outer(a, u)
    T = 5.0 * np.abs(a).sum() / 2.0
    r = hg.min_tension(G, method="refine", tol=TOL)
    assert r.value <= T * (1.0 + kernel_rtol(G.size)) and T <= (r.value + r.gap) * (1.0 + kernel_rtol(G.size))
    assert r.relative_gap <= TOL


def test_auto_refines_large_head_gradients_and_groups_the_tail():
    """Above 2048 distinct rows ``auto`` is refine and the certificate meets tol; its
    distinct points (the tail rows each placed on their own, tension/place.py) hold
    every pair's distance."""
    G = head(2100, 4, 16)
    tol = 1e-4  # a solver parameter: a few rounds here (1e-6 takes about a minute; the docs report it)
    r = hg.min_tension(G, tol=tol, verbose=False)
    assert r.method == "refine" and r.status == "optimal" and r.relative_gap <= tol
    dist, _, _ = brute_pairs(r.potential[np.unique(r.potential, axis=0, return_index=True)[1]])
    assert dist.max() <= 1.0 + 8 * U64  # distinct points hold every pair's distance


def test_auto_refines_head_gradients_of_a_few_hundred_rows_at_rank_32_and_up():
    """At most 2048 distinct rows, ``auto`` takes refine for a head gradient (median row norm
    at most 0.1 of the largest) of more than 256 rows with rank at least 32 or more than 1024
    rows, where the ALM stalls on real gradients (``_HEAD_SPREAD`` in tension/solver.py); else
    the ALM.  The shapes are judged from their definitions (norms, rank) and the refined
    certificate is checked by brute force."""
    from hilbertgeom.tension import solver as sv

    G = head(400, 40, 32)  # rank 32 (the batch), median norm about 0.01 of the largest
    assert np.linalg.matrix_rank(G) >= 32
    r = hg.min_tension(G, tol=TOL)
    assert r.method == "refine" and r.status == "optimal"
    check_certificate(r, G)
    assert sv._head_shaped(head(1100, 8, 32))  # more than 1024 rows: any rank
    assert not sv._head_shaped(head(400, 8, 32))  # rank 8: the ALM (faster at low rank, few rows)
    assert not sv._head_shaped(head(250, 40, 32))  # 256 rows or fewer
    Z = np.random.default_rng(0).standard_normal((400, 40))
    assert not sv._head_shaped(Z - Z.mean(axis=0))  # Gaussian rows: median norm about 0.7 of the largest
    assert hg.min_tension(Z - Z.mean(axis=0), tol=1e-6).method == "alm"


def test_refine_narrows_the_bracket():
    """On real-shaped rows the refined certificate is far tighter than tension_bounds
    and than tension_bracket's, and inside both."""
    G = head(400, 8, 32)
    r = hg.min_tension(G, method="refine", tol=TOL)
    b = hg.tension_bounds(G)
    br = hg.tension_bracket(G, rows=128, steps=60)
    for lo, hi in ((b.lower, b.upper), (br.lower, br.upper)):
        assert lo <= r.value + r.gap and r.value <= hi
    assert r.gap <= 1e-3 * (br.upper - br.lower)  # not a tolerance: the measured ratio is about 1e-3 to 1e-4


def test_time_limit_returns_a_rigorous_bracket_and_max_iter_raises():
    G = head(300, 6, 32)
    ref = hg.min_tension(G, method="refine", tol=TOL)
    r = hg.min_tension(G, method="refine", tol=1e-15, time_limit=1e-9)
    assert r.status == "time_limit" and r.iterations == 1
    assert r.value <= ref.value + ref.gap and ref.value <= r.value + r.gap
    with pytest.raises(SolverError, match=r"refine.*iteration_limit") as err:
        hg.min_tension(G, method="refine", tol=1e-15, max_iter=1)
    res = err.value.result
    assert res.method == "refine" and res.value <= ref.value + ref.gap and ref.value <= res.value + res.gap
    check_certificate(res, G)


def test_progress_lines(capsys):
    hg.min_tension(head(60, 3, 8), method="refine", tol=TOL, verbose=True)
    err = capsys.readouterr().err
    assert "min_tension refine round   1:" in err and "T in [" in err and "groups" in err


def test_refine_scales_exactly():
    """``2^a G`` has ``2^a`` times the certificate (the exact scaling at entry)."""
    G = head(60, 3, 8)
    r = hg.min_tension(G, method="refine", tol=TOL)
    for a in (-600, 600):
        s = hg.min_tension(np.ldexp(G, a), method="refine", tol=TOL)
        assert s.value == np.ldexp(r.value, a) and s.flow.cost == np.ldexp(r.flow.cost, a)


# ---------------------------------------------------------------- the pieces


def test_northwest_coupling_keeps_both_marginals():
    rng = np.random.default_rng(1)
    a = rng.random(7)
    b = rng.random(4)
    b *= a.sum() / b.sum()
    ia, ib, mass = rf._northwest(a, b)
    assert len(mass) <= len(a) + len(b) - 1 and (mass > 0).all()
    np.testing.assert_allclose(np.bincount(ia, mass, len(a)), a, rtol=kernel_rtol(11), atol=0)
    np.testing.assert_allclose(np.bincount(ib, mass, len(b)), b, rtol=kernel_rtol(11), atol=0)
    # unequal totals: the smaller side is matched in full, the larger up to that total
    ia, ib, mass = rf._northwest(a, 0.5 * b)
    np.testing.assert_allclose(np.bincount(ib, mass, len(b)), 0.5 * b, rtol=kernel_rtol(11), atol=0)
    assert (np.bincount(ia, mass, len(a)) <= a * (1.0 + kernel_rtol(11))).all()


@pytest.mark.parametrize("case", ["independent", "ill-conditioned", "rank-deficient"])
def test_nnls_rows_solve_the_full_problem(monkeypatch, case):
    """The reduced non-negative least squares (on the SVD of the directions) reaches the
    optimum of SciPy's ``nnls`` on the full ``d``-row problem, row by row: the same residual
    norm, to rounding, including rows that are exact non-negative combinations (residual 0),
    directions with a repeated row (rank 11 of 12) and two nearly equal directions (condition
    about 1e7).  The last two go to Lawson-Hanson without the Newton solve, the first to it."""
    from scipy.optimize import nnls

    calls = []
    real = rf._nnls_newton
    monkeypatch.setattr(rf, "_nnls_newton", lambda A, B: calls.append(1) or real(A, B))
    rng = np.random.default_rng(21)
    nb, d = 12, 30
    D = rng.standard_normal((nb, d))
    if case == "rank-deficient":
        D[5] = D[2]
    elif case == "ill-conditioned":
        D[7] = D[3] + 1e-7 * rng.standard_normal(d)
    G = rng.standard_normal((8, d))
    G[:3] = rng.random((3, nb)) @ D  # in the cone of the directions
    M = rf._nnls_rows(D, G)
    assert M.shape == (8, nb) and (M >= 0).all() and np.isfinite(M).all()
    assert bool(calls) == (case == "independent")
    cond = np.linalg.cond(D[:11] if case == "rank-deficient" else D)
    for g, mu in zip(G, M, strict=True):
        ref = np.linalg.norm(D.T @ nnls(D.T, g)[0] - g)
        got = np.linalg.norm(D.T @ mu - g)
        assert abs(got - ref) <= kernel_rtol(nb * d) * np.linalg.norm(g) * cond


@pytest.mark.parametrize("workers", [1, 2])
def test_nnls_newton_solves_every_row_as_lawson_hanson(workers, monkeypatch):
    """Projected Newton over all rows at once (:func:`_nnls_newton`, the couplings' shares)
    solves every row itself, none left to the fallback, and reaches the optimum of SciPy's
    Lawson-Hanson ``nnls`` row by row: the same residual norm to rounding, and the
    optimality conditions (a non-negative gradient on the bound, zero off it), on 400 rows
    with many different active sets (rows made from sparse non-negative combinations of the
    columns, plus noise, some of them outside the cone); its blocks of rows (two of them) in
    turn and in two threads (hilbertgeom/_threads.py)."""
    from scipy.optimize import nnls

    from hilbertgeom import _threads as th

    monkeypatch.setattr(th, "_workers", lambda: workers)

    rng = np.random.default_rng(8)
    r = nb = 40
    A = rng.standard_normal((r, nb))
    mu = rng.random((400, nb)) * (rng.random((400, nb)) < 0.6)
    B = mu @ A.T + 0.3 * rng.standard_normal((400, r))
    M, left = rf._nnls_newton(A, B)
    assert left.size == 0 and (M >= 0).all()
    assert len({row.tobytes() for row in M > 0}) > 300  # not a tolerance: many active sets
    cond = np.linalg.cond(A)
    top = np.linalg.norm(A, 2)
    for b, m in zip(B, M, strict=True):
        ref = np.linalg.norm(A @ nnls(A, b)[0] - b)
        assert abs(np.linalg.norm(A @ m - b) - ref) <= kernel_rtol(nb * r) * np.linalg.norm(b) * cond
        g = A.T @ (A @ m - b)
        off = m > 0
        allow = kernel_rtol(nb * r) * top * (top * np.linalg.norm(m) + np.linalg.norm(b)) * cond
        assert np.abs(g[off]).max(initial=0.0) <= allow and g[~off].min(initial=0.0) >= -allow


@pytest.mark.parametrize("mode", ["w", "nnls", "M"])
def test_shares_are_distributions(mode):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((9, 5)) + 4.0
    mem = np.arange(9)
    D = rng.standard_normal((3, 5))
    lam = rng.random(3)
    M = rf._shares(X, mem, X.sum(axis=0), lam, D, mode)
    assert M.shape == (9, 3) and (M >= 0).all()
    np.testing.assert_allclose(M.sum(axis=0), 1.0, rtol=kernel_rtol(9), atol=0)


@pytest.mark.parametrize("hubs", [True, False])
def test_laplacian_flow_balances_G_on_each_component(hubs):
    """Two components, each summing to zero: the flow ``w_e (phi_i - phi_j)`` of the
    Laplacian potential has divergence G, by hub elimination (rows 0, 1, 2, 4 the hubs) and
    by sparse LU."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((6, 3))
    X[:3] -= X[:3].mean(axis=0)
    X[3:] -= X[3:].mean(axis=0)
    I = np.array([0, 0, 1, 3, 4])
    J = np.array([1, 2, 2, 4, 5])
    w = np.ones(5)  # each component's Laplacian exactly singular: one row of each must be grounded
    Y = rf._pair_vectors(I, J, w, rf._laplacian_potential(X, I, J, w, hubs))
    div = np.zeros_like(X)
    np.add.at(div, I, Y)
    np.add.at(div, J, -Y)
    # the LU solve of a diagonally dominant SPD matrix is backward stable with growth at most 2
    # (as is Cholesky of its Schur complement), and each divergence is a sum of at most 5 flow
    # terms: both within 4 (n + 2) u of sum |y|
    np.testing.assert_allclose(div, X, rtol=0, atol=2 * kernel_rtol(6) * np.abs(Y).sum())


def test_split_partitions_the_rows():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((40, 4))
    n = np.linalg.norm(X, axis=1)
    labels = np.repeat(np.arange(4), 10)
    members = rf._members(labels, 4)
    lab, split = rf._split(X, n, labels, members, np.array([0.0, 5.0, 0.1, 0.0]), 4, 0.9)
    assert split == 1 and lab.max() + 1 > 4
    assert (lab[labels == 0] == 0).all() and (lab[labels == 3] == 3).all()  # no excess: untouched
    assert (lab[labels == 2] == 2).all()  # 90% of the excess is in group 1 alone
    assert len(np.unique(lab[labels == 1])) > 1  # the group with the most excess is split
    new = lab >= 4
    assert set(labels[new]) <= {1, 2}  # new groups only from split groups, each within one old group
    for g in np.unique(lab[new]):
        assert len(set(labels[lab == g])) == 1


@pytest.mark.parametrize("G", [
    np.array([[1.0, 2.0], [-1.0, -2.0]]),  # V = 2: T = ||g_1||
    np.vstack([np.zeros((20, 3)), [[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]]]),  # zero rows
    np.vstack([np.tile([1.0, 2.0], (10, 1)), np.tile([-1.0, -2.0], (10, 1))]),  # two classes of equal rows
], ids=["V2", "zero-rows", "equal-rows"])
def test_refine_small_and_degenerate_inputs(G):
    """Opposite rows ``+-g`` in classes of ``m``: ``T = m ||g||`` (the 1-D closed form)."""
    T = np.linalg.norm(G, axis=1).sum() / 2.0
    r = hg.min_tension(G, method="refine", tol=TOL)
    assert r.value <= T * (1.0 + kernel_rtol(G.size)) and T <= (r.value + r.gap) * (1.0 + kernel_rtol(G.size))
    assert r.relative_gap <= TOL
    check_certificate(r, G)


def test_next_start_moves_the_flow_and_separates_shared_points():
    """Groups sharing an old point start apart (from one point the ALM would keep them
    together); the old flow moves to the largest group on each point, and a pair whose
    ends land on one group is dropped."""
    from hilbertgeom.tension._results import Flow, TensionResult

    P_old = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    # new groups: 0 and 1 on old point 0 (1 the larger), 2 on old point 1, none on old point 2
    S = np.array([[1.0, 0.2], [3.0, -0.3], [-2.0, 0.1]])
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    Y = np.array([[1.0, 0.0], [0.5, -0.5], [0.0, 2.0]])
    flow = Flow(pairs=pairs, vectors=Y, residual=np.zeros((3, 2)), cost=0.0)
    res = TensionResult(value=0.0, potential=P_old, flow=flow, gap=0.0, status="optimal", method="alm",
                        centered=False, iterations=1, diameter=2.0)
    P, I, J, Yn = rf._next_start(S, res, P_old)
    assert P.shape == (3, 2) and not np.array_equal(P[0], P[1])
    np.testing.assert_array_equal(P[2], P_old[1])  # alone on its point: not moved
    # old pair (0, 1) -> new (1, 2); old pairs with old point 2 have no group and are dropped
    np.testing.assert_array_equal(np.stack([I, J], axis=1), [[1, 2]])
    np.testing.assert_array_equal(Yn, [[1.0, 0.0]])


def test_alm_warm_start_from_an_optimal_certificate_certifies_at_once():
    """Started from a certified optimum (in G's coordinates), the ALM maps the potential
    onto its row space and the flow onto its scale and certifies in its first outer
    step; the bracket matches the cold solve's."""
    from hilbertgeom.tension.solver import _alm_solve

    G = head(60, 4, 8)
    G = G - G.mean(axis=0)
    cold = hg.min_tension(G, method="alm", tol=1e-9)
    start = (cold.potential, cold.flow.pairs[:, 0], cold.flow.pairs[:, 1], cold.flow.vectors)
    best, _, scale, _, why = _alm_solve(G, tol=1e-9, max_outer=1, verbose=False, start=start)
    assert why == "optimal" and best.status == "optimal"
    lo, hi = scale * best.value, scale * best.flow.cost
    assert lo <= cold.value + cold.gap and cold.value <= hi


def test_refine_flow_is_scalar_weighted_and_lifts_over_equal_rows(capsys):
    """``refine`` returns its flow in the scalar-weighted form (never ``pairs x d``
    vectors); over classes of equal rows it is lifted with weights ``w / (m_a m_b)``,
    and that lift keeps the merged solve's gap (no second solve of the rows as given).
    The certificate is checked by brute force on the rows as given."""
    G = head(60, 3, 8)
    G2 = np.concatenate([G, np.repeat(G[[3, 7]], [4, 2], axis=0)])  # rows 3 and 7 five and three times
    r = hg.min_tension(G2, method="refine", center=True, tol=TOL, verbose=True)
    err = capsys.readouterr().err
    assert "66 rows, 60 distinct (equal rows merged)" in err and "solving without merging" not in err
    assert r.status == "optimal" and not r.flow.explicit
    assert r.flow.weights.shape == (r.flow.pairs.shape[0],) and r.flow.base.shape == G2.shape
    check_certificate(r, G2 - G2.mean(axis=0))
    r1 = hg.min_tension(G, method="refine", tol=TOL)
    assert not r1.flow.explicit
    check_certificate(r1, G)


def test_first_groups_are_capped_at_the_points_carrying_most_of_the_value(monkeypatch):
    """With more used points than ``_INIT_GROUPS``, the kept points are those with the
    largest share of ``<X, P[labels]>`` (recomputed here from the uncapped labels) and
    every row takes its best kept point; refine still certifies from that start."""
    G = head(400, 8, 32)
    X = G / np.abs(G).max()
    n = np.linalg.norm(X, axis=1)
    full_lab, full_P = rf._initial_labels(X, n, np.inf)
    used = np.unique(full_lab)
    assert used.size > 4
    share = {c: sum(float(X[i] @ full_P[c]) for i in np.flatnonzero(full_lab == c)) for c in used}
    top = sorted(used, key=lambda c: -share[c])[:4]
    monkeypatch.setattr(rf, "_INIT_GROUPS", 4)
    lab, P = rf._initial_labels(X, n, np.inf)
    assert P.shape[0] == 4 and np.array_equal(P, full_P[top])
    assert np.array_equal(lab, np.argmax(X @ P.T, axis=1))  # each row on its best kept point
    r = hg.min_tension(G, method="refine", tol=TOL)
    assert r.status == "optimal"
    check_certificate(r, G)


def test_later_groups_at_high_rank_are_solved_to_a_hundredth_of_the_gap(monkeypatch, capsys):
    """At high rank (here forced by lowering the rank threshold) a later round's groups'
    tolerance is 1/100 of the smallest gap of the rounds before (read off the progress
    lines), never below the first round's ``min(tol/10, 1e-8)``."""
    from hilbertgeom.tension import solver as sv

    monkeypatch.setattr(sv, "_NEWTON_MIN_RANK", 1)
    monkeypatch.setattr(sv, "_NEWTON_RANK", 0.0)
    seen = []
    solve = rf.weight_dual  # the groups' solve at high rank

    starts = []

    def spy(S, *, tol, **kw):
        if S.shape[0] < G.shape[0]:  # a groups' solve (the stall's polish is over the rows)
            seen.append(tol)
            starts.append(kw.get("lam0"))
        return solve(S, tol=tol, **kw)

    monkeypatch.setattr(rf, "weight_dual", spy)
    G = head(400, 8, 32)
    try:  # forced to the high-rank path on a rank-8 head, it may stall above tol
        r = hg.min_tension(G, method="refine", tol=TOL, verbose=True)
    except SolverError as err:
        r = err.result
    gaps = [float(line.split("rel gap ")[1].split()[0]) for line in capsys.readouterr().err.splitlines()
            if "refine round" in line and "rel gap " in line]
    assert len(seen) >= 2
    check_certificate(r, G)
    assert starts[0] is None  # the first groups from equal weights, the later ones from the last round's
    assert all(lam is not None and np.count_nonzero(lam) > 0 for lam in starts[1:])
    assert seen[0] == 1e-8  # not a tolerance: min(tol / 10, 1e-8)
    for k in range(1, len(seen)):  # the progress lines print the gaps to 3 digits: compare so
        g = min(gaps[:k])
        assert f"{100 * seen[k]:.2e}" == f"{g:.2e}" if 0.01 * g > 1e-8 else seen[k] == 1e-8


def test_placement_only_rounds_ask_their_groups_for_the_gap_so_far(monkeypatch, capsys):
    """Once the cheapest flow's finishing descent has stalled, a round is placement only (its
    groups' flow is not coupled) and its groups' tolerance is ``_SPENT_GTOL`` times the smallest
    gap of the rounds before, not 1/100 of it; the rounds before it keep 1/100.  At high rank
    (forced as above), every round placed, ``tol`` out of reach so that the descent stalls;
    the gaps are read off the progress lines (3 digits) and the placement-only rounds off
    their own line."""
    from hilbertgeom.tension import solver as sv

    monkeypatch.setattr(sv, "_NEWTON_MIN_RANK", 1)
    monkeypatch.setattr(sv, "_NEWTON_RANK", 0.0)
    monkeypatch.setattr(rf, "_PLACE_WHEN", 0.0)
    monkeypatch.setattr(rf, "_FINISH", math.inf)
    X = solver_head()
    seen = []
    solve = rf.weight_dual

    def spy(S, *, tol, **kw):
        seen.append(tol)
        return solve(S, tol=tol, **kw)

    monkeypatch.setattr(rf, "weight_dual", spy)
    rf._refine_solve(X, tol=1e-12, max_rounds=4, verbose=True)
    rounds = [line for line in capsys.readouterr().err.splitlines() if "refine round" in line]
    gaps = [float(line.split("rel gap ")[1].split()[0]) for line in rounds if "rel gap " in line]
    only = {int(line.split("round")[1].split(":")[0]) for line in rounds if "placement only" in line}
    assert len(seen) == len(gaps) == 4  # not a tolerance: four rounds, each a groups' solve
    assert only and 1 not in only and 2 not in only  # the descent stalls in round 2 at the earliest
    assert seen[0] == 1e-12  # not a tolerance: mtol = max(min(tol / 10, 1e-8), 1e-12)
    for k in range(1, 4):
        g = min(gaps[:k])
        share = rf._SPENT_GTOL if k + 1 in only else 0.01
        if share * g > 1e-12:  # not a tolerance: above mtol
            assert f"{seen[k] / share:.2e}" == f"{g:.2e}"
        else:
            assert seen[k] == 1e-12  # not a tolerance: mtol


def test_the_next_groups_dual_starts_from_the_last_rounds_weights_shared_by_size():
    """``_warm_weights``: the last round's weights ``lam_pq = ||y_pq|| / ||p_p - p_q||``
    (made here from the flow's vectors) shared among the new groups' pairs.  Each new
    group's parent is the old point with the largest ``<s_a, p>`` (computed here
    directly); over the children of two parents the start sums to ``lam_pq``, the
    children's own weights are in proportion to the product of their sizes, and
    siblings start at 0."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((48, 5))
    X -= X.mean(axis=0)
    old = np.arange(48) % 6  # six old groups, each later cut in two
    S_old = np.array([X[old == c].sum(axis=0) for c in range(6)])
    S_old -= S_old.mean(axis=0)
    res = rf.weight_dual(S_old, tol=1e-8)
    new = 2 * old + (np.arange(48) // 6) % 2
    S = np.array([X[new == c].sum(axis=0) for c in range(12)])
    S -= S.mean(axis=0)
    lam0 = rf._warm_weights(S, res)
    P, pairs, Y = res.potential, res.flow.pairs, res.flow.vectors
    lam = np.zeros((6, 6))
    for (p, q), y in zip(pairs, Y, strict=True):
        lam[p, q] = lam[q, p] = np.linalg.norm(y) / np.linalg.norm(P[p] - P[q])
    parent = np.argmax(S @ P.T, axis=1)
    size = np.linalg.norm(S, axis=1)
    assert np.array_equal(lam0, lam0.T) and np.all(lam0 >= 0)
    rtol = kernel_rtol(S.size)
    for p in range(6):
        for q in range(6):
            a, b = np.flatnonzero(parent == p), np.flatnonzero(parent == q)
            if a.size == 0 or b.size == 0:
                continue
            block = lam0[np.ix_(a, b)]
            if p == q:
                assert np.all(block[~np.eye(a.size, dtype=bool)] == 0.0)  # not a tolerance: siblings at 0
                continue
            assert abs(block.sum() - lam[p, q]) <= rtol * lam[p, q]
            want = lam[p, q] * np.outer(size[a], size[b]) / (size[a].sum() * size[b].sum())
            assert np.abs(block - want).max() <= rtol * max(lam[p, q], 1e-300)
    assert np.count_nonzero(lam0) > 0


def test_coupling_leaves_out_group_pairs_below_the_floor():
    """A groups' flow with weight on every pair, one pair's weight at 1e-10 of the largest
    (as an interior-point solve leaves its inactive pairs): no member pair joins those two
    groups, and every other pair of groups is joined (counted member pair by member pair)."""
    from hilbertgeom.tension._results import _certify

    rng = np.random.default_rng(4)
    X = rng.standard_normal((40, 4))
    X -= X.mean(axis=0)
    labels = np.arange(40) % 5
    members = rf._members(labels, 5)
    P = rng.standard_normal((5, 4))
    iu = np.triu_indices(5, 1)
    lam = rng.uniform(1.0, 2.0, iu[0].size)
    lam[3] = 1e-10 * lam.max()  # not a tolerance: the planted negligible weight, below _COUPLE_FLOOR
    Y = lam[:, None] * (P[iu[0]] - P[iu[1]])
    S = np.zeros((5, 4))  # the groups' rows that this flow balances exactly (no residual flow)
    np.add.at(S, iu[0], Y)
    np.add.at(S, iu[1], -Y)
    res = _certify(S, P / 10.0, iu[0], iu[1], Y, method="test", centered=False, iterations=0, tol=1e-6)
    I, J, _ = rf._coupling(X, members, res, S, "w")
    joined = {(min(a, b), max(a, b)) for a, b in zip(labels[I].tolist(), labels[J].tolist(), strict=True)}
    cut = (int(iu[0][3]), int(iu[1][3]))
    assert cut not in joined
    assert joined == {(int(a), int(b)) for a, b in zip(iu[0], iu[1], strict=True)} - {cut}


def stalled_head(monkeypatch):
    """A rank-6 head of 120 rows whose refinement stalls after one round: four first
    groups, and nothing is ever split."""
    monkeypatch.setattr(rf, "_split", lambda X, n, labels, *a: (labels, 0))
    monkeypatch.setattr(rf, "_INIT_GROUPS", 4)
    return head(120, 6, 16)


@pytest.mark.parametrize("newton_cg", [False, True])
def test_a_stalled_refinement_on_few_rows_is_finished_by_the_dual_over_every_pair(newton_cg, monkeypatch, capsys):
    """Where splitting stops narrowing the gap (forced here: nothing is ever split) on at
    most ``_POLISH_ROWS`` rows, the dual over every pair goes on from the refinement's
    flow weights and certifies ``tol`` (brute-force check); above that size, or with the
    polish removed, the stall is reported as ``SolverError``.  With Newton-CG forced in the
    dual (``newton_cg``: every pair gets a weight), the flow is returned scalar-weighted,
    never as ``pairs x d`` vectors."""
    if newton_cg:
        monkeypatch.setattr(du, "_DENSE_SUPPORT", 0)
    G = stalled_head(monkeypatch)
    starts = []
    solve = rf.weight_dual

    def spy(S, *, tol, **kw):
        if kw.get("lam0") is not None:
            starts.append((S.shape, kw["lam0"]))
        return solve(S, tol=tol, **kw)

    monkeypatch.setattr(rf, "weight_dual", spy)
    r = hg.min_tension(G, method="refine", tol=TOL, verbose=True)
    err = capsys.readouterr().err
    assert "splitting stalled" in err and "refine round   2" not in err  # one round, then the polish
    assert r.status == "optimal"
    check_certificate(r, G)
    if newton_cg:  # the polish's flow over every pair stays scalar-weighted
        assert not r.flow.explicit
    (shape, lam0), = starts
    assert shape == G.shape and np.array_equal(lam0, lam0.T) and np.count_nonzero(lam0) > 0
    monkeypatch.setattr(rf, "_POLISH_ROWS", G.shape[0] - 1)
    with pytest.raises(SolverError, match="iteration_limit"):
        hg.min_tension(G, method="refine", tol=TOL)
    assert len(starts) == 1


@pytest.mark.parametrize("hubs", [True, False])
def test_descended_weights_approach_the_reference_and_balance_g(hubs, monkeypatch):
    """The weights on every pair of a small problem, descended from equal weights by
    ``_descend_weights``, give a flow ``y_e = w_e (phi_i - phi_j)``, ``L_w Phi = X``, whose
    cost reaches T of the cvxpy reference (an independent interior-point solve) from
    above, to the solver tolerance (1.4e-10 of T here).  The flow is rebuilt here with a
    dense pseudo-inverse (not the solve it used: hub elimination, or with ``hubs=False``
    the sparse LU and gathered differences) and balances X; its cost, summed here, is the
    returned one up to the two solves' rounding."""
    if not hubs:
        monkeypatch.setattr(rf.Hubs, "of", classmethod(lambda cls, I, J, V: None))
    X = head(30, 3, 6, seed=2)
    X = X - X.mean(axis=0)
    V = X.shape[0]
    I, J = np.triu_indices(V, 1)
    w0 = np.ones(I.size)
    T = hg.min_tension(X, method="cvxpy-flow").value
    start = rf._lean_flow(X, I, J, w0, rf._laplacian_potential(X, I, J, w0))[0]
    cost, w, _ = rf._descend_weights(X, I, J, w0, 1e-12, np.inf)  # tol 1e-12: never stalls, all evaluations
    assert cost >= T * (1.0 - SOLVER.rtol)  # an upper bound of T
    assert cost - T <= SOLVER.rtol * T, (start, cost, T)
    L = np.zeros((V, V))
    np.add.at(L, (I, J), -w)
    L = L + L.T
    L[np.diag_indices(V)] = -L.sum(axis=1)
    P = np.linalg.pinv(L) @ X
    Y = w[:, None] * (P[I] - P[J])
    div = np.zeros_like(X)
    np.add.at(div, I, Y)
    np.add.at(div, J, -Y)
    assert np.abs(div - X).max() <= kernel_rtol(V * V) * np.abs(X).sum()
    direct = float(np.linalg.norm(Y, axis=1).sum())
    assert abs(cost - direct) <= SOLVER.rtol * direct  # one flow, two linear solves of L_w


def test_violated_pairs_are_the_new_pairs_beyond_one():
    """``_violated_pairs`` against brute force: every pair of rows farther apart than 1
    (distances by ``np.linalg.norm`` of each difference), less the pairs the flow already has,
    given in either order."""
    rng = np.random.default_rng(3)
    Phi = rng.standard_normal((80, 5)) * 0.3
    V = Phi.shape[0]
    a, b = np.triu_indices(V, 1)
    far = np.linalg.norm(Phi[a] - Phi[b], axis=1) > 1.0
    assert 50 < far.sum() < a.size  # some pairs beyond 1, not all
    have = rng.choice(a.size, 400, replace=False)
    I, J = a[have].copy(), b[have].copy()
    swap = rng.random(I.size) < 0.5  # a flow's pairs come in either order
    I[swap], J[swap] = b[have][swap], a[have][swap]
    got_i, got_j = rf._violated_pairs(Phi, I, J)
    expect = set(zip(a[far].tolist(), b[far].tolist(), strict=True)) - set(zip(a[have].tolist(), b[have].tolist(),
                                                                                strict=True))
    assert set(zip(got_i.tolist(), got_j.tolist(), strict=True)) == expect
    assert got_i.size == len(expect)  # each once
    ni, nj = rf._violated_pairs(Phi, np.zeros(0, np.intp), np.zeros(0, np.intp))
    assert set(zip(ni.tolist(), nj.tolist(), strict=True)) == set(zip(a[far].tolist(), b[far].tolist(), strict=True))


def test_pricing_reaches_the_reference_from_a_sparse_pair_set():
    """The weights descended on a star and 60 random pairs reach only the optimum over those
    pairs (measured: 56% above T); adding the pairs that the potential puts beyond 1 and
    descending again (``_price_and_descend``) reaches T of the cvxpy reference (an independent
    interior-point solve of the flow form) within 1e-6 (measured: 1.4e-10), from above."""
    X = head(30, 3, 6, seed=2)
    X = X - X.mean(axis=0)
    V = X.shape[0]
    rng = np.random.default_rng(0)
    a, b = np.triu_indices(V, 1)
    pick = rng.choice(a.size, 60, replace=False)
    I = np.concatenate([np.arange(1, V), b[pick]])
    J = np.concatenate([np.zeros(V - 1, np.intp), a[pick]])
    keep = np.unique(np.minimum(I, J) * V + np.maximum(I, J), return_index=True)[1]
    I, J = I[keep], J[keep]
    T = hg.min_tension(X, method="cvxpy-flow").value
    cost, w, Phi = rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf)
    assert cost > 1.1 * T  # not a tolerance: the pairs given miss the optimal flow's
    I2, J2, w2, Phi2, cost2 = rf._price_and_descend(X, I, J, w, Phi, cost, 1e-12, np.inf)
    assert np.array_equal(I2[: I.size], I) and np.array_equal(J2[: J.size], J)  # the pairs given, then new ones
    assert cost2 >= T * (1.0 - SOLVER.rtol)  # an upper bound of T
    assert cost2 - T <= TOL * T, (cost, cost2, T)
    assert cost2 == rf._lean_flow(X, I2, J2, w2, Phi2)[0]  # the cost of the flow returned


def test_descent_stops_at_its_target():
    """With a target the descent stops at the first flow whose cost (residual included) is
    at most the target: here 1e-3 above T of the cvxpy reference, which the descent
    without a target passes (to 1.4e-10 of T)."""
    X = head(30, 3, 6, seed=2)
    X = X - X.mean(axis=0)
    I, J = np.triu_indices(X.shape[0], 1)
    T = hg.min_tension(X, method="cvxpy-flow").value
    target = T * (1.0 + 1e-3)
    cost, w, Phi = rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf, target=target)
    full, _, _ = rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf)
    assert T * (1.0 - SOLVER.rtol) <= cost <= target
    assert cost == rf._lean_flow(X, I, J, w, Phi)[0]
    assert full < T * (1.0 + 1e-6) < cost  # not a tolerance: the target stopped it early


def count_evaluations(monkeypatch) -> list:
    """A list that gains one entry per evaluation of the weights' descent (its L-BFGS
    objective), from now on; clear it to count afresh."""
    count: list = []
    real = rf.projected_lbfgs

    def counting(fg, x0, lower, **kw):
        def fg2(x):
            count.append(1)
            return fg(x)
        return real(fg2, x0, lower, **kw)

    monkeypatch.setattr(rf, "projected_lbfgs", counting)
    return count


def test_on_course_extrapolates_the_best_costs_fall_over_its_window():
    """A best cost falling by 1 an evaluation (the last window's rate) reaches a target
    ``r`` below it in ``r`` evaluations: on course with ``r`` left, not with ``r - 1``.
    Trial costs above the best (a line search's) do not count; a flat window, an infinite
    target or too short a history is never on course."""
    costs = [100.0 - k for k in range(20)] + [500.0, 81.0 - 0.5, 700.0]  # best 80.5 at the end
    # last window of 4: best before it 82 (costs[:-4] ends at 82), best now 80.5: rate 1.5 / 4
    rate = (82.0 - 80.5) / 4
    assert rf._on_course(costs, 4, 80.5 - 10 * rate, 10)
    assert not rf._on_course(costs, 4, 80.5 - 10 * rate, 9)
    assert rf._on_course([5.0 - k for k in range(6)], 5, -10.0, 10)  # rate 1, 10 to go
    assert not rf._on_course([5.0 - k for k in range(6)], 5, -10.0, 9)
    assert not rf._on_course([3.0] * 12, 5, 2.0, 10**9)  # flat: never
    assert not rf._on_course([5.0 - k for k in range(6)], 5, -math.inf, 10**9)
    assert not rf._on_course([5.0 - k for k in range(5)], 5, 0.0, 10**9)  # no full window yet


def test_descent_past_its_budget_while_on_course_for_its_target(monkeypatch):
    """With ``reach`` a descent at its evaluation budget goes on while it is on course for its
    target (:func:`_on_course`, over a window of 10), and here stops at the target (1e-3
    above T of the cvxpy reference) after more evaluations than its budget of 24; without
    ``reach`` it stops at the budget, 3.7e-3 above T (with the L-BFGS's 5 pairs, ``_MAXCOR``).
    With a budget of 12 and 3 more (4.4% above T; the last ten evaluations' fall, kept up, does
    not cover that in 3 more, though it would in 5) it stops at the budget."""
    X = head(30, 3, 6, seed=2)
    X = X - X.mean(axis=0)
    I, J = np.triu_indices(X.shape[0], 1)
    T = hg.min_tension(X, method="cvxpy-flow").value
    target = T * (1.0 + 1e-3)
    count = count_evaluations(monkeypatch)

    def run(evals, **kw):
        count.clear()
        out = rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf, evals=evals, window=10, target=target,
                                  **kw)
        return out[0], len(count)

    short, n_short = run(24)
    assert n_short == 24 and short > target  # not a tolerance: the budget alone stops short of the target
    cost, n = run(24, reach=500)
    assert T * (1.0 - SOLVER.rtol) <= cost <= target
    assert 24 < n < 524  # not a tolerance: past the budget, stopped by the target
    off, n_off = run(12, reach=3)
    assert n_off == 12 and off > target  # not a tolerance: not on course, the budget stops it


def spy_descents(monkeypatch, mark=False):
    """``(lines, kwargs)``: the progress lines of ``_refine_solve`` and the keyword arguments of
    each ``_descend_weights`` call (with ``mark``, each call also puts ``"spy"`` in ``lines``)."""
    lines: list[str] = []
    kwargs: list[dict] = []
    real = rf._descend_weights

    def spy(*a, **k):
        kwargs.append(k)
        if mark:
            lines.append("spy")
        return real(*a, **k)

    monkeypatch.setattr(rf, "_progress", lines.append)
    monkeypatch.setattr(rf, "_descend_weights", spy)
    return lines, kwargs


def test_last_round_descends_after_its_placement(monkeypatch):
    """In the last round the time its placement left goes on to the cheapest flow's
    weights, with the last round's budget and stall window: a descent line follows the
    round's last placement line, and the upper bound the round reports is where that
    descent ended (progress lines, 12 digits)."""
    X = solver_head()
    lines, kwargs = spy_descents(monkeypatch)
    rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=True)
    last = kwargs[-1]  # the last round's: its own budget, stall share and window
    assert (last["evals"], last["stall"], last["window"]) == (rf._LAST_EVALS, rf._LAST_STALL, rf._LAST_WINDOW)
    assert last["reach"] == 0  # not a tolerance: the last round's budget is not extended
    placed = [k for k, m in enumerate(lines) if "rows placed" in m]
    round_line = next(k for k, m in enumerate(lines) if "rel gap " in m)
    assert placed and placed[-1] < round_line
    after = [m for m in lines[placed[-1]:round_line] if "descended" in m]
    assert len(after) == 1, lines
    ended = after[0].split(" -> ")[1].split()[0]
    assert lines[round_line].split("T in [")[1].split("]")[0].split(", ")[1] == ended


def test_couplings_stop_at_the_deadline(monkeypatch):
    """A later round's couplings (a Laplacian solve and a flow over all member pairs each,
    about 40 s at full vocabulary) stop once the deadline has passed: the clock is made to
    jump past it inside round 2's first coupling, and no second coupling follows; the
    refinement returns round 1's certificate with ``time_limit``."""
    import time as _time

    X = solver_head()
    calls = []
    jump = [0.0]
    real = rf._coupling

    class Clock:
        @staticmethod
        def perf_counter():
            return _time.perf_counter() + jump[0]

    def coupling(*a, **k):
        calls.append(1)
        if len(calls) == 4:  # round 1 tries three couplings
            jump[0] = 1e7
        return real(*a, **k)

    monkeypatch.setattr(rf, "time", Clock)
    monkeypatch.setattr(rf, "_coupling", coupling)
    *_, rounds, why = rf._refine_solve(X, tol=1e-12, max_rounds=3, verbose=False,
                                       deadline=_time.perf_counter() + 1e6)
    assert len(calls) == 4 and rounds == 2 and why == "time_limit"


@pytest.mark.parametrize("window", [10, 50])
def test_descent_judges_a_stall_over_its_window(monkeypatch, window):
    """The stall rule compares the cost with the cost ``window`` evaluations before: with a
    stall share no gain can meet, the descent stops at evaluation ``window + 1``, not
    earlier (a restarted L-BFGS gains little in its first evaluations)."""
    X = head(30, 3, 6, seed=2)
    X = X - X.mean(axis=0)
    I, J = np.triu_indices(X.shape[0], 1)
    count = count_evaluations(monkeypatch)
    rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf, stall=1e15, window=window)
    assert len(count) == window + 1


def test_descents_on_the_same_pairs_go_on_with_their_memory(monkeypatch):
    """A placed round's descents share one L-BFGS memory: the descent after pricing starts
    from the first descent's memory, widened to its new pairs, and the last round's descent
    from that of the best flow (a restarted L-BFGS begins again from steepest descent and
    gains little in its first evaluations).  Checked on the memory each descent is given: not
    empty, the same deque, its vectors as long as the descent's pairs."""
    X = solver_head()
    seen = []
    real = rf._descend_weights

    def spy(X_, I, J, w, *a, **k):
        mem = k.get("memory")
        seen.append((I.size, id(mem), None if mem is None else [s.size for s, _, _ in mem]))
        return real(X_, I, J, w, *a, **k)

    monkeypatch.setattr(rf, "_descend_weights", spy)
    rf._refine_solve(X, tol=1e-12, max_rounds=1, verbose=False)
    assert len(seen) >= 3, seen  # the round's descent, at least one after pricing, the last round's
    first, *rest = seen
    assert first[2] == []  # the round's first descent starts a new memory
    for size, ident, lengths in rest:
        assert ident == first[1]
        assert lengths and all(n == size for n in lengths)
    assert seen[-1][0] > first[0]  # the last round's flow has the priced pairs


@pytest.mark.parametrize("finish", [0.0, math.inf])
def test_round_near_tol_descends_before_splitting(monkeypatch, finish):
    """A placed round that is not the last but ends within ``_FINISH`` times ``tol`` gives the
    cheapest flow's weights the last round's descent, capped at ``_FINISH_EVALS`` evaluations,
    after its placement and before the round's line; with ``_FINISH = 0`` no round does.
    Once that descent has stalled short of ``tol`` (here, in round 2), the later rounds' own
    flows are not made (no coupling), nor descended, nor priced: their only descents are the
    finishing one and the last round's, and their progress says so; with ``_FINISH = 0`` every
    round couples its groups and descends its own flow.  Every round after the first is placed
    here (``_PLACE_WHEN = 0``) and none is the last."""
    X = solver_head()
    lines, kwargs = spy_descents(monkeypatch, mark=True)
    real_coupling = rf._coupling

    def coupling(*a, **k):
        lines.append("coupling")
        return real_coupling(*a, **k)

    monkeypatch.setattr(rf, "_coupling", coupling)
    monkeypatch.setattr(rf, "_PLACE_WHEN", 0.0)
    monkeypatch.setattr(rf, "_FINISH", finish)
    rf._refine_solve(X, tol=1e-12, max_rounds=4, verbose=True)
    ends = [k for k, m in enumerate(lines) if "rel gap " in m]
    assert len(ends) == 4  # not a tolerance: four rounds ran
    spy_at = [k for k, m in enumerate(lines) if m == "spy"]  # the q-th mark is kwargs[q]'s call
    for r in (2, 3):  # rounds 3 and 4
        seg = lines[ends[r - 1] : ends[r]]
        calls = [kwargs[q] for q, k in enumerate(spy_at) if ends[r - 1] < k < ends[r]]
        own = [c for c in calls if c.get("evals") not in (rf._FINISH_EVALS, rf._LAST_EVALS)]
        only = [m for m in seg if "placement only" in m]
        coupled = seg.count("coupling")
        if finish == 0.0:
            assert own and not only and coupled == 3  # not a tolerance: the three couplings
        else:
            assert calls and not own and len(only) == 1 and coupled == 0, seg
            assert not any("farther apart than 1" in m for m in seg)
    finishing = [k for k in kwargs if k.get("evals") == rf._FINISH_EVALS]
    if finish == 0.0:
        assert not finishing
        return
    assert len(finishing) == 2  # rounds 2 and 3: placed, not the last
    assert all((k["stall"], k["window"]) == (rf._LAST_STALL, rf._LAST_WINDOW) for k in finishing)
    assert all(k["reach"] == rf._FINISH_REACH for k in finishing)  # on course: past _FINISH_EVALS
    r2 = lines[ends[0]:ends[1]]
    placed = [k for k, m in enumerate(r2) if "rows placed" in m]
    calls = [k for k, m in enumerate(r2) if m == "spy"]
    assert placed and calls[-1] > placed[-1]


def test_descent_in_the_block_order_finds_the_hubs_and_solves_the_start_once(monkeypatch):
    """The descent in the dense block's order looks for the pairs' hubs once (the block order's
    structure has the same hubs) and solves the start weights' potential once, where its caller
    gives no start cost: at full vocabulary each of the two, done twice, cost about half a
    second a descent.  Counted by spies on ``Hubs.of`` and ``_laplacian_potential``."""
    from hilbertgeom.tension.hubs import Hubs

    X = solver_head()
    V = X.shape[0]
    order = np.argsort(-np.linalg.norm(X, axis=1))
    hubs, tail = order[:12], order[12:]
    I, J = np.repeat(hubs, tail.size), np.tile(tail, hubs.size)
    shuffle = np.random.default_rng(5).permutation(I.size)
    I, J = I[shuffle], J[shuffle]
    assert Hubs.of(I, J, V).block_order() is not None
    calls = {"of": 0, "potential": 0}
    of, potential = Hubs.of.__func__, rf._laplacian_potential

    def of_spy(cls, *a, **k):
        calls["of"] += 1
        return of(cls, *a, **k)

    def potential_spy(*a, **k):
        calls["potential"] += 1
        return potential(*a, **k)

    monkeypatch.setattr(Hubs, "of", classmethod(of_spy))
    monkeypatch.setattr(rf, "_laplacian_potential", potential_spy)
    out = rf._descend_weights(X, I, J, np.ones(I.size), 1e-12, np.inf, evals=4, stall=0.0)
    assert out is not None
    assert calls == {"of": 1, "potential": 1}


def test_descent_in_the_block_order_is_the_descent_in_the_callers_order(monkeypatch):
    """Where the pairs have hubs, the weights' descent runs on them in the dense block's order
    and gives back its weights and its L-BFGS memory in the caller's: against the same descents
    run in the caller's order (``block_order`` made to say the pairs are in order), twice, the
    second going on from the first's memory.  The two differ in the order of their sums only:
    the same costs, weights and memory to a few roundings (``solver`` tolerance: the L-BFGS's
    dot products over five thousand pairs, through twelve evaluations each)."""
    from hilbertgeom.tension.hubs import Hubs

    X = solver_head()
    V = X.shape[0]
    n = np.linalg.norm(X, axis=1)
    hubs, tail = np.argsort(-n)[:12], np.argsort(-n)[12:]
    I, J = np.repeat(hubs, tail.size), np.tile(tail, hubs.size)  # every tail row to every hub
    rng = np.random.default_rng(3)
    shuffle = rng.permutation(I.size)
    I, J = I[shuffle], J[shuffle]
    w = rng.uniform(0.5, 1.5, I.size)
    assert Hubs.of(I, J, V).block_order() is not None
    real = Hubs.block_order
    runs = []
    for ordered in (True, False):
        if not ordered:
            monkeypatch.setattr(Hubs, "block_order", lambda self: None)
        mem = rf.new_memory(rf._MAXCOR)
        first = rf._descend_weights(X, I, J, w, 1e-12, np.inf, evals=12, stall=0.0, memory=mem)
        second = rf._descend_weights(X, I, J, first[1], 1e-12, np.inf, evals=12, stall=0.0, memory=mem)
        runs.append((first, second, [(s, y) for s, y, _ in mem]))
    monkeypatch.setattr(Hubs, "block_order", real)
    rtol = tolerance("solver").rtol
    for a, b in zip(runs[0][:2], runs[1][:2], strict=True):
        assert a[0] == pytest.approx(b[0], rel=rtol, abs=0)
        np.testing.assert_allclose(a[1], b[1], rtol=rtol, atol=0)
        np.testing.assert_allclose(a[2], b[2], rtol=0, atol=rtol * np.abs(b[2]).max())
    assert len(runs[0][2]) == len(runs[1][2]) > 0
    for (s1, y1), (s2, y2) in zip(runs[0][2], runs[1][2], strict=True):
        np.testing.assert_allclose(s1, s2, rtol=0, atol=rtol * np.abs(s2).max())
        np.testing.assert_allclose(y1, y2, rtol=0, atol=rtol * np.abs(y2).max())
