"""Minimum tension / steepest descent under D (I10-I17): certificates, closed
forms, the cvxpy reference in both forms, projected RowNorm."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg
from hilbertgeom.tolerances import tolerance

SOLVER = tolerance("solver")


def centered(rng, V, d):
    G = rng.standard_normal((V, d))
    return G - G.mean(axis=0)


def simplex_rows(k: int, d: int) -> np.ndarray:
    """Centred regular k-simplex (V = k + 1 rows) in R^d, d >= k, randomly rotated."""
    Q, _ = np.linalg.qr(np.random.default_rng(k).standard_normal((d, d)))
    return math.sqrt(2.0) * hg.regular_simplex(k + 1, d) @ Q.T  # edge sqrt(2)


def brute_diameter(P: np.ndarray) -> float:
    """D(P) by brute force over all pairs (independent of the library's kernel)."""
    iu, ju = np.triu_indices(P.shape[0], 1)
    return float(np.linalg.norm(P[iu] - P[ju], axis=1).max()) if iu.size else 0.0


def check_certificate(G, res, tol=1e-6):
    """Everything a certificate promises, checked independently: D(potential) by
    brute force over pairs, the flow's divergence by explicit accumulation, its
    cost by an explicit sum."""
    V = G.shape[0]
    P = res.potential
    # potential: centred, D <= 1, value = <G, P>
    assert np.abs(P.sum(axis=0)).max() <= 1e-12 * max(1.0, np.abs(P).sum())
    assert brute_diameter(P) <= 1.0 + 4 * np.finfo(float).eps
    assert res.value == pytest.approx(float(np.sum(G * P)), rel=1e-14, abs=1e-14 * np.abs(G).max())
    # I13: centred feasible potentials have ||phi_i|| <= 1
    assert np.linalg.norm(P, axis=1).max() <= 1.0 + 1e-12
    # flow: explicit part + residual balances G exactly
    I, J = res.flow.pairs.T
    Y = res.flow.vectors
    assert np.all(I < J)
    div = np.zeros_like(G)
    np.add.at(div, I, Y)
    np.add.at(div, J, -Y)
    np.testing.assert_allclose(div + res.flow.residual, G, rtol=0, atol=1e-12 * np.abs(G).max())
    r = res.flow.residual
    # the residual rides on the balanced flow (r_i - r_j)/V (I11): its cost, or the bound (V-1)/V sum ||r_i||
    iu, ju = np.triu_indices(V, 1)
    r_cost = min(np.linalg.norm(r[iu] - r[ju], axis=1).sum() / V, (V - 1) / V * np.linalg.norm(r, axis=1).sum())
    cost = np.linalg.norm(Y, axis=1).sum() + r_cost
    assert res.flow.cost >= cost
    # weak duality and the reported gap
    assert res.flow.cost >= res.value
    assert res.gap == pytest.approx(res.flow.cost - res.value, abs=1e-12 * res.flow.cost)
    assert res.relative_gap <= tol


# ---------------------------------------------------------------- closed forms (I14)
@dataclass(frozen=True)
class ClosedForm:
    name: str
    G: np.ndarray
    expected: float
    source: str


def closed_forms():
    rng = np.random.default_rng(7)
    g = rng.standard_normal(9)
    g -= g.mean()
    h = rng.standard_normal(4)
    g1 = rng.standard_normal(3)
    out = [
        ClosedForm("rank one", np.outer(g, h), np.abs(g).sum() * np.linalg.norm(h) / 2, "I14: ||g||_1 ||h||_2 / 2"),
        ClosedForm("d = 1", g[:, None], np.abs(g).sum() / 2, "I14: ||g||_1 / 2"),
        ClosedForm("V = 2", np.stack([g1, -g1]), np.linalg.norm(g1), "I14: ||g_1||"),
    ]
    for k in (2, 3, 5):
        S = simplex_rows(k, k + 2) * 1.7
        out.append(ClosedForm(f"regular {k}-simplex", S, hg.jung_radius(k) * np.linalg.norm(S, axis=1).sum(),
                              "I14: J_k sum ||g_i||"))
    return out


@pytest.mark.parametrize("case", closed_forms(), ids=lambda c: c.name)
@pytest.mark.parametrize("method", ["alm", "cvxpy-flow"])
def test_closed_forms(case, method):
    res = hg.min_tension(case.G, method=method, tol=1e-9 if method == "alm" else 1e-6)
    check_certificate(case.G, res, tol=1e-9 if method == "alm" else 1e-6)
    assert res.value <= case.expected * (1 + 1e-12) + 1e-12
    assert res.flow.cost >= case.expected * (1 - 1e-12)
    assert res.value == pytest.approx(case.expected, rel=1e-6)


# ---------------------------------------------------------------- the two cvxpy forms and ALM agree (I10)
@pytest.mark.parametrize("V,d", [(5, 2), (12, 3), (25, 6)])
def test_reference_forms_and_alm_agree(V, d, rng):
    G = centered(rng, V, d)
    pot = hg.min_tension(G, method="cvxpy-potential")
    flo = hg.min_tension(G, method="cvxpy-flow")
    alm = hg.min_tension(G, method="alm", tol=1e-10)
    for r in (pot, flo):
        check_certificate(G, r, tol=1e-6)
    check_certificate(G, alm, tol=1e-10)
    # strong duality: each lower bound below every upper bound, all within the gaps
    for a in (pot, flo, alm):
        for b in (pot, flo, alm):
            assert a.value <= b.flow.cost * (1 + 1e-12)
    assert abs(pot.value - alm.value) <= 2e-6 * alm.value
    assert abs(flo.value - alm.value) <= 2e-6 * alm.value


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 9), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_alm_certificates_property(V, d, seed):
    G = centered(np.random.default_rng(seed), V, d)
    res = hg.min_tension(G, tol=1e-9)
    check_certificate(G, res, tol=1e-9)
    b = hg.tension_bounds(G)
    assert b.lower <= res.flow.cost * (1 + 1e-12)
    assert res.value <= b.upper * (1 + 1e-12)


def test_active_edges_i12(rng):
    """Flow on a pair forces phi_i - phi_j = y_ij / ||y_ij|| (the pair at full diameter)."""
    G = centered(rng, 30, 4)
    res = hg.min_tension(G, tol=1e-10)
    P = res.potential
    I, J = res.flow.pairs.T
    Y = res.flow.vectors
    n = np.linalg.norm(Y, axis=1)
    big = n > 1e-6 * n.max()
    Z = P[I[big]] - P[J[big]]
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, atol=1e-6)
    cos = np.einsum("ij,ij->i", Z, Y[big]) / (np.linalg.norm(Z, axis=1) * n[big])
    assert cos.min() >= 1 - 1e-6


def test_steepest_descent_is_eta_times_potential(rng):
    G = centered(rng, 15, 3)
    eta = 0.37
    S = hg.steepest_descent(G, eta=eta, tol=1e-10)
    res = hg.min_tension(G, tol=1e-10)
    assert hg.row_diameter(S) <= eta * (1 + 1e-12)
    assert np.abs(S.sum(axis=0)).max() <= 1e-12
    assert -np.sum(G * S) == pytest.approx(eta * res.value, rel=1e-9)


# ---------------------------------------------------------------- bounds (I11, I17)
@given(hnp.arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(1, 4)), elements=st.floats(-10, 10)))
def test_tension_bounds_bracket(G):
    b = hg.tension_bounds(G, center=True)
    G0, G = G, G - G.mean(axis=0)
    assume(np.abs(G).max() > 1e-9 * (1 + np.abs(G0).max()))  # not a constant G (T = 0 up to rounding)
    total = np.linalg.norm(G, axis=1).sum()
    assert b.lower >= total / 2 * (1 - 1e-12)
    assert b.lower <= b.upper * (1 + 1e-12)
    V, d = G.shape
    iu, ju = np.triu_indices(V, 1)
    dist = np.linalg.norm(G[iu] - G[ju], axis=1)
    balanced = dist.sum() / V
    # the documented excess of the tiled sum: sqrt(E_ij) per distinct pair, E_ij <= kappa (r_i + r_j)^2
    # with r the norm about a block mean, r <= 2 max ||g_i|| (hilbertgeom._pairs.sq_distance_tiles)
    u = tolerance("exact").rtol / 256
    kappa = 2 * (d * u / (1 - d * u) + 4 * u)
    excess = math.sqrt(kappa) * 4 * np.linalg.norm(G, axis=1).max() * np.count_nonzero(dist) / V
    k = np.linalg.matrix_rank(G)
    assert b.upper <= min(balanced + excess, hg.jung_radius(k) * total) * (1 + 1e-9) + 1e-12


def test_balanced_flow_is_a_flow(rng):
    """I11: y_ij = (g_i - g_j)/V balances G."""
    G = centered(rng, 7, 3)
    V = 7
    iu, ju = np.triu_indices(V, 1)
    Y = (G[iu] - G[ju]) / V
    div = np.zeros_like(G)
    np.add.at(div, iu, Y)
    np.add.at(div, ju, -Y)
    np.testing.assert_allclose(div, G, atol=1e-14)


def test_bounds_tiles_do_not_matter(rng):
    G = centered(rng, 50, 3)
    a, b = hg.tension_bounds(G, tile=7), hg.tension_bounds(G)
    assert a.lower == b.lower and a.upper == pytest.approx(b.upper, rel=1e-12)


# ---------------------------------------------------------------- projected RowNorm (I15, I16)
def test_projected_rownorm_solves_radius_problem(rng):
    """I15: S_RN minimises <G, S> over centred S with rad(S) <= eta/2 (cvxpy reference)."""
    import cvxpy as cp

    G = centered(rng, 8, 3)
    eta = 1.3
    S_rn = hg.projected_rownorm(G, eta=eta)
    S = cp.Variable(G.shape)
    c = cp.Variable(G.shape[1])
    centre = np.ones((8, 1)) @ cp.reshape(c, (1, 3), order="C")
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(G, S))),
                      [cp.sum(S, axis=0) == 0, cp.norm(S - centre, 2, axis=1) <= eta / 2])
    prob.solve(solver=cp.CLARABEL)
    decrease = -np.sum(G * S_rn)
    assert decrease == pytest.approx(eta / 2 * np.linalg.norm(G, axis=1).sum(), rel=1e-12)
    assert decrease == pytest.approx(-prob.value, rel=1e-6)
    assert hg.covering_radius(S_rn)[0] <= eta / 2 * (1 + 1e-12)


@settings(max_examples=12, deadline=None)
@given(st.integers(3, 9), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_rownorm_ratio_bound_i16(V, d, seed):
    G = centered(np.random.default_rng(seed), V, d)
    k = np.linalg.matrix_rank(G)
    res = hg.min_tension(G, tol=1e-9)
    ratio_low = (0.5 * np.linalg.norm(G, axis=1).sum()) / res.flow.cost  # certified: T <= cost
    ratio_high = (0.5 * np.linalg.norm(G, axis=1).sum()) / res.value
    assert ratio_low >= math.sqrt((k + 1) / (2 * k)) * (1 - 1e-9)
    assert ratio_high <= 1 + 1e-9


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_rownorm_ratio_sharp_on_simplex_with_zero_rows(k):
    """I16 sharpness: the centred regular k-simplex plus zero rows."""
    S = simplex_rows(k, k + 1)
    G = np.vstack([S, np.zeros((3, k + 1))])
    res = hg.min_tension(G, tol=1e-10)
    ratio = 0.5 * np.linalg.norm(G, axis=1).sum() / res.value
    assert ratio == pytest.approx(math.sqrt((k + 1) / (2 * k)), rel=1e-8)


def test_rownorm_eps_and_zero_rows():
    G = np.array([[1.0, 0.0], [-1.0, 1e-20], [0.0, -1e-20]])
    N = hg.rownorm(G, eps=1e-10)
    assert N[1].tolist() == [-1.0, 0.0] or np.allclose(N[1], [-1.0, 0.0])
    assert N[2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("k, zeros", [(1, 3), (4, 95), (7, 40)])
def test_projected_rownorm_keeps_zero_rows_zero(k, zeros):
    """Closed form: for the centred regular k-simplex (unit rows u_i, sum u_i = 0) plus
    zero rows, P RN(P G) has rows u_i and 0, so S = -(eta/2) [u_i; 0] exactly up to
    rounding -- the centring's rounding noise in the zero rows must not be scaled up.
    With it scaled up (the former behaviour) the zero rows had norm about 0.026
    for k = 4, 95 zero rows."""
    U = simplex_rows(k, k + 1)
    U = U / np.linalg.norm(U, axis=1, keepdims=True)
    G = np.vstack([U, np.zeros((zeros, k + 1))])
    eta = 2.0
    tol = tolerance("exact")
    for center in (False, True):
        S, dec = hg.projected_rownorm(G, eta=eta, center=center, return_decrease=True)
        assert np.abs(S[k + 1 :]).max() <= tol.atol
        assert np.abs(S[: k + 1] + eta / 2 * U).max() <= tol.bound(1.0)
        assert dec == pytest.approx(eta / 2 * (k + 1), rel=tol.rtol)
        # the worst case of I16 is attained by the update itself: D(S) = eta * D(U) / 2
        D_want = eta / 2 * math.sqrt(2 * (k + 1) / k)  # the regular simplex with unit circumradius
        assert hg.row_diameter(S) == pytest.approx(D_want, rel=tol.rtol)


def test_projected_rownorm_exact_zero_rows_of_an_uncentred_gradient_move_with_center():
    """With center=True a zero row of G is the row -mean(G) of P G, not zero."""
    G = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    S = hg.projected_rownorm(G, eta=2.0, center=True)
    # P G = [[4/3, 0], [-2/3, 0], [-2/3, 0]]: every row non-zero, RN = [[1,0],[-1,0],[-1,0]]
    want = -(np.array([[1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]]) - np.array([-1 / 3, 0.0]))
    assert np.allclose(S, want, rtol=0, atol=tolerance("exact").atol)


# ---------------------------------------------------------------- bad input
def test_bad_input():
    with pytest.raises(ValueError, match=r"G must have zero column sums \(max \|1\^T G\| = 1.00e\+00"):
        hg.min_tension([[1.0, 0.0], [0.0, 0.0]])
    r = hg.min_tension([[1.0, 0.0], [0.0, 0.0]], center=True)
    assert r.centered and r.value == pytest.approx(0.5, rel=1e-9)
    with pytest.raises(ValueError, match="at least 2 rows"):
        hg.min_tension([[0.0, 0.0]])
    with pytest.raises(ValueError, match="must be finite"):
        hg.min_tension([[np.nan, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="method must be one of"):
        hg.min_tension([[1.0], [-1.0]], method="newton")
    with pytest.raises(ValueError, match="eta must be >= 0"):
        hg.steepest_descent([[1.0], [-1.0]], eta=-1.0)
    with pytest.raises(ValueError, match="eta must be >= 0"):
        hg.projected_rownorm([[1.0], [-1.0]], eta=-2.0)
    with pytest.raises(ValueError, match="tol must be > 0"):
        hg.min_tension([[1.0], [-1.0]], tol=0.0)


def test_alm_missing_tol_raises_with_the_certificate(rng):
    G = centered(rng, 40, 5)
    with pytest.raises(hg.SolverError, match=r"certified relative gap .* > tol .*raise max_iter") as info:
        hg.min_tension(G, tol=1e-14, max_iter=1)
    assert info.value.status == "iteration_limit"
    res = info.value.result
    check_certificate(G, res, tol=1.0)


def test_projected_rownorm_decrease(rng):
    G = centered(rng, 6, 2)
    S, dec = hg.projected_rownorm(G, eta=0.5, return_decrease=True)
    assert dec == pytest.approx(-np.sum(G * S), rel=1e-13)


def test_zero_gradient():
    r = hg.min_tension(np.zeros((4, 3)))
    assert r.value == 0.0 and r.gap == 0.0 and r.status == "zero"
    assert hg.row_diameter(r.potential) <= 1.0
    assert hg.tension_bounds(np.zeros((4, 3))) == hg.TensionBounds(0.0, 0.0, "G = 0", "G = 0")


def test_solver_error_names_status(monkeypatch):
    import cvxpy as cp

    def fail(self, *a, **k):
        raise cp.error.SolverError("boom")

    monkeypatch.setattr(cp.Problem, "solve", fail)
    with pytest.raises(hg.SolverError, match="cvxpy/CLARABEL failed") as info:
        hg.min_tension(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]), method="cvxpy-flow")
    assert info.value.status == "solver_error"


# ---------------------------------------------------------------- the scalable solver on gradient shapes
def structures(V: int, d: int, seed: int) -> dict[str, np.ndarray]:
    """Small gradients with the structures the solver must handle."""
    from hilbertgeom.gradients import synthetic_head_gradient

    rng = np.random.default_rng(seed)
    low = rng.standard_normal((V, 2)) @ rng.standard_normal((2, d))
    base = rng.standard_normal((V // 3, d))
    dup = base[rng.integers(0, V // 3, V)]
    zero = np.vstack([rng.standard_normal((V // 4, d)), np.zeros((V - V // 4, d))])
    ce = synthetic_head_gradient(V, d, batch=24, seed=seed).G
    out = {"gaussian": rng.standard_normal((V, d)), "low rank (2)": low, "duplicates": dup,
           "zero rows": zero, "cross-entropy, near-equal tail": ce}
    return {k: v - v.mean(axis=0) for k, v in out.items()}


@pytest.mark.parametrize("name", ["gaussian", "low rank (2)", "duplicates", "zero rows",
                                  "cross-entropy, near-equal tail"])
def test_alm_against_the_cvxpy_reference_on_structures(name):
    G = structures(36, 4, 3)[name]
    ref = hg.min_tension(G, method="cvxpy-flow")
    res = hg.min_tension(G, tol=1e-8)
    check_certificate(G, res, tol=1e-8)
    check_certificate(G, ref, tol=SOLVER.rtol)
    # each certified lower bound below the other's certified upper bound, values within the gaps
    assert res.value <= ref.flow.cost * (1 + 1e-12) and ref.value <= res.flow.cost * (1 + 1e-12)
    assert abs(res.value - ref.value) <= SOLVER.rtol * ref.value


def test_duplicate_merge_matches_the_unmerged_solve(rng, monkeypatch):
    """Equal rows are merged with multiplicities; the same G solved without the merge
    (np.unique made to see every row as distinct) gives the same certified T, and the
    merged potential gives equal rows one point."""
    from hilbertgeom.tension import solver

    base = rng.standard_normal((7, 3))
    G = base[np.r_[0, 1, 1, 2, 3, 3, 3, 4, 5, 6, 6, 0, 2]]
    G = G - G.mean(axis=0)
    merged = hg.min_tension(G, tol=1e-10)
    check_certificate(G, merged, tol=1e-10)
    for a, b in [(1, 2), (4, 5), (4, 6), (9, 10), (0, 11)]:
        assert np.array_equal(merged.potential[a], merged.potential[b])

    real_unique = np.unique

    def no_merge(a, **kw):
        out = real_unique(a, **kw)
        if kw.get("axis") == 0 and kw.get("return_inverse"):
            n = a.shape[0]
            return a, np.arange(n), np.ones(n, dtype=np.intp)
        return out

    monkeypatch.setattr(solver.np, "unique", no_merge)
    plain = hg.min_tension(G, tol=1e-10)
    monkeypatch.undo()
    check_certificate(G, plain, tol=1e-10)
    assert merged.value == pytest.approx(plain.value, rel=2e-10)
    assert merged.value <= plain.flow.cost and plain.value <= merged.flow.cost


def test_time_limit_returns_the_best_certified_bracket(rng):
    G = centered(rng, 40, 5)
    ref = hg.min_tension(G, tol=1e-10)
    res = hg.min_tension(G, tol=1e-14, time_limit=1e-9)
    assert res.status == "time_limit"
    check_certificate(G, res, tol=1.0)
    assert res.value <= ref.flow.cost and ref.value <= res.flow.cost  # a true bracket
    with pytest.raises(ValueError, match="time_limit must be > 0"):
        hg.min_tension(G, time_limit=0.0)


def test_progress_lines_on_stderr(rng, capsys):
    G = centered(rng, 12, 3)
    hg.min_tension(G, tol=1e-9, verbose=True)
    err = capsys.readouterr().err
    assert re.search(r"min_tension outer +1: T in \[[0-9.e+-]+, [0-9.e+-]+\]  rel gap", err)


@pytest.mark.parametrize("e", [-1000, -600, 600, 1000])
def test_exact_power_of_two_rescale(rng, e):
    """T is positively homogeneous: T(2^e G) = 2^e T(G), and the certificates scale exactly."""
    G = centered(rng, 10, 3)
    r0 = hg.min_tension(G, tol=1e-10)
    Ge = np.ldexp(G, e)
    r = hg.min_tension(Ge, tol=1e-10)
    assert r.value == pytest.approx(math.ldexp(r0.value, e), rel=1e-9)
    assert r.value <= math.ldexp(r0.flow.cost, e) * (1 + 1e-12)
    assert math.ldexp(r0.value, e) <= r.flow.cost * (1 + 1e-12)
    np.testing.assert_array_equal(r.potential, r0.potential)


def test_huge_dynamic_range_and_top_of_range():
    """Rows from 1e-300 to 1e300 (the scaling is then inexact: the certificate is made
    on G itself), and entries near the top of float64: a certified answer, no hang."""
    g = np.array([1e300, 1e200, 1e-100, 1e-300])
    G = np.stack([g, -g, np.zeros(4)], axis=0)[:, :, None] * np.array([1.0, 0.5])
    G = G.reshape(-1, 2)
    G = G - G.mean(axis=0)
    res = hg.min_tension(G, tol=1e-9)
    assert res.status == "optimal" and res.value <= res.flow.cost
    # V = 2: T = ||g_1|| (I14), here about 1.5e308 * sqrt(1.25)
    G2 = np.array([[1.5e308, 0.75e308], [-1.5e308, -0.75e308]])
    r2 = hg.min_tension(G2)
    assert r2.value == pytest.approx(math.hypot(1.5e308, 0.75e308), rel=1e-9)
    assert r2.value <= r2.flow.cost and r2.status == "optimal"
    big = np.array([[1.5e308, 0.0], [1.5e308, 0.0], [-1.5e308, 0.0], [-1.5e308, 0.0]])
    with pytest.raises(ValueError, match="exceeds the float64 range"):
        hg.min_tension(big)  # T = 6e308


# ---------------------------------------------------------------- tension_bounds on near-ties
def near_tie_gradient(seed: int, tail: int = 1500, spread: float = 1e-9) -> np.ndarray:
    """20 large rows and a tail of rows equal up to a relative `spread` (the Zipf tail)."""
    rng = np.random.default_rng(seed)
    big = rng.standard_normal((20, 6))
    t = 1e-3 * (1.0 + rng.standard_normal(6))
    G = np.vstack([big, t + spread * 1e-3 * rng.standard_normal((tail, 6))])
    return G - G.mean(axis=0)


def brute_balanced(G: np.ndarray) -> float:
    """(1/V) sum_{i<j} ||g_i - g_j|| by direct float64 differences, in row blocks."""
    V = G.shape[0]
    total = 0.0
    for a in range(V):
        total += float(np.linalg.norm(G[a + 1 :] - G[a], axis=1).sum())
    return total / V


@pytest.mark.parametrize("tile", [64, 4096])
def test_balanced_flow_bound_on_massive_near_ties(tile):
    """The tiled balanced-flow upper bound is sound (above the direct sum) and tight
    (within 1e-9 of it) on a gradient with a tail of 1500 rows equal up to 1e-9,
    with no quadratic direct path; a one-block tile (every row in one block) too."""
    from hilbertgeom.tension.bounds import _balanced_flow_cost

    G = near_tie_gradient(0)
    exact = brute_balanced(G)
    up = _balanced_flow_cost(G, tile)
    k = tolerance("kernel", d=G.shape[1])
    assert up >= exact * (1 - k.rtol)
    assert up <= exact * (1 + 1e-9)


def far_spread_pairs(seed: int):
    """Rows spread over 1e3 with 60 partners at distance 1 + 3e-12 (the threshold of
    the test is 1): the GEMM's rounding (about u r^2 = 1e-10) decides such pairs."""
    rng = np.random.default_rng(seed)
    base = 1e3 * rng.standard_normal((60, 3))
    e = rng.standard_normal((60, 3))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    return np.vstack([base, base + (1 + 3e-12) * e])


def brute_pairs_beyond(X, thr):
    iu, ju = np.triu_indices(X.shape[0], 1)
    dist = np.linalg.norm(X[iu] - X[ju], axis=1)
    return set(zip(iu[dist > thr].tolist(), ju[dist > thr].tolist(), strict=True))


def found_pairs_beyond(X, thr, tile):
    from hilbertgeom._pairs import pairs_beyond

    i, j = pairs_beyond(X, np, thr, tile=tile)
    return set(zip(i.tolist(), j.tolist(), strict=True))


@pytest.mark.parametrize("tile", [16, 4096])
def test_pairs_beyond_exact_at_the_threshold(tile):
    """The screened pair search finds exactly the pairs a direct float64 brute force
    finds, including 60 pairs 3e-12 beyond the threshold that the GEMM cannot resolve."""
    X = far_spread_pairs(0)
    want = brute_pairs_beyond(X, 1.0)
    assert all((i, i + 60) in want for i in range(60))
    assert found_pairs_beyond(X, 1.0, tile) == want


@pytest.mark.parametrize("plant", ["E = 0", "no re-centring, E = 0"])
def test_planted_bug_in_the_tiles_is_caught(monkeypatch, plant):
    """Planted bugs in the shared tiled primitive: the error bound dropped (with or
    without the re-centring).  The pair search then misses pairs just beyond the
    threshold; the check above fails."""
    import hilbertgeom._pairs as pairs

    real = pairs.sq_distance_tiles

    def bugged(X, xp, **kw):
        if plant.startswith("no re-centring"):
            X = X + 0.0
            for blk in real(X, xp, **kw):
                A, B = X[blk.rows_a], X[blk.rows_b]
                D2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
                yield blk._replace(D2=D2, E=0.0 * blk.E)
        else:
            for blk in real(X, xp, **kw):
                yield blk._replace(E=0.0 * blk.E)

    X = far_spread_pairs(0)
    want = brute_pairs_beyond(X, 1.0)
    monkeypatch.setattr(pairs, "sq_distance_tiles", bugged)
    assert found_pairs_beyond(X, 1.0, 4096) != want


def test_planted_bug_no_recentring_is_caught(monkeypatch):
    """Planted bug: blocks not re-centred (each row's rounding then scales with its
    norm): the balanced-flow bound stays sound but loses its tightness on near-ties,
    and the 1e-9 check above fails."""
    import hilbertgeom._pairs as pairs
    from hilbertgeom.tension.bounds import _balanced_flow_cost

    G = near_tie_gradient(0)
    exact = brute_balanced(G)
    monkeypatch.setattr(pairs.np, "mean", lambda a, axis=None, **k: 0.0 * a[0] if axis == 0 else np.mean(a, axis))
    up = _balanced_flow_cost(G, 64)
    assert up >= exact
    assert up > exact * (1 + 1e-9)


def test_tension_bounds_near_ties_bracket_the_solve():
    G = near_tie_gradient(2, tail=200)
    b = hg.tension_bounds(G)
    res = hg.min_tension(G, tol=1e-8)
    check_certificate(G, res, tol=1e-8)
    assert b.lower <= res.flow.cost and res.value <= b.upper


def test_diagonal_preconditioner_path(monkeypatch):
    """Beyond the block budget the Newton-CG uses the Hessian's diagonal (O(V k)
    memory): same certified answer, here on a closed form (I14, regular simplex)."""
    from hilbertgeom.tension import solver

    monkeypatch.setattr(solver, "_BLOCK_BUDGET", 0)
    S = simplex_rows(5, 7) * 1.3
    G = np.vstack([S, np.zeros((4, 7))])
    res = hg.min_tension(G, tol=1e-10)
    check_certificate(G, res, tol=1e-10)
    assert res.value == pytest.approx(hg.jung_radius(5) * np.linalg.norm(G, axis=1).sum(), rel=1e-9)
