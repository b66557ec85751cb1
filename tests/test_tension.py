"""Minimum tension / steepest descent under D (I10-I17): certificates, closed
forms, the cvxpy reference in both forms, projected RowNorm."""

from __future__ import annotations

import math
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
    E = np.eye(k + 1) - 1.0 / (k + 1)
    U, _, _ = np.linalg.svd(E)
    coords = E @ U[:, :k]  # k-dimensional coordinates, same distances
    Q, _ = np.linalg.qr(np.random.default_rng(k).standard_normal((d, d)))
    return np.hstack([coords, np.zeros((k + 1, d - k))]) @ Q.T


def check_certificate(G, res, tol=1e-6):
    """Everything a certificate promises, checked independently."""
    V = G.shape[0]
    P = res.potential
    # potential: centred, D <= 1, value = <G, P>
    assert np.abs(P.sum(axis=0)).max() <= 1e-12 * max(1.0, np.abs(P).sum())
    assert hg.row_diameter(P) <= 1.0 + 4 * np.finfo(float).eps
    assert res.value == pytest.approx(float(np.sum(G * P)), rel=1e-14, abs=1e-14)
    # I13: centred feasible potentials have ||phi_i|| <= 1
    assert np.linalg.norm(P, axis=1).max() <= 1.0 + 1e-12
    # flow: explicit part + residual balances G exactly
    div = res.flow.divergence(V)
    np.testing.assert_allclose(div + res.flow.residual, G, rtol=0, atol=1e-12 * (1 + np.abs(G).max()))
    cost = np.linalg.norm(res.flow.vectors, axis=1).sum() + (V - 1) / V * np.linalg.norm(res.flow.residual, axis=1).sum()
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
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(G, S))),
                      [cp.sum(S, axis=0) == 0, cp.norm(S - np.ones((8, 1)) @ cp.reshape(c, (1, 3), order="C"), 2, axis=1) <= eta / 2])
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
