"""Projected L-BFGS on the scalar-weight dual over every pair (``tension/dual.py``).

References: the regular simplex (closed form: every pair active, ``T = c (m-1)/2``
for vertices at distance ``c``), the cvxpy reference program (an independent
interior-point solve), and brute-force checks of each certificate (pairwise
distances of the potential, the flow's divergence recomputed row by row).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import brute_pairs, kernel_rtol
from test_refine import check_certificate

import hilbertgeom as hg
from hilbertgeom.equalize import regular_simplex
from hilbertgeom.tension import dual as du
from hilbertgeom.tension import newton as nt
from hilbertgeom.tension import newton_cg as ncg

TOL = 1e-9  # the target gap asked of the solves, not a comparison tolerance


def random_start(m, seed):
    """A symmetric start far from the optimum (weights spread over four decades)."""
    rng = np.random.default_rng(seed)
    lam = 10.0 ** rng.uniform(-2, 2, (m, m))
    lam = np.triu(lam, 1)
    return lam + lam.T


def test_regular_simplex_is_the_closed_form():
    """Rows on a regular simplex of edge c, from a random start: the bracket holds the
    closed form ``T = c (m-1)/2`` to 1e-9 and every pair carries flow."""
    m, c = 12, 3.0
    S = c * regular_simplex(m, m - 1)
    T = c * (m - 1) / 2.0
    r = du.weight_dual(S, tol=TOL, lam0=random_start(m, 0))
    assert r.status == "optimal" and r.relative_gap <= TOL
    assert r.value <= T * (1 + kernel_rtol(S.size)) and T <= (r.value + r.gap) * (1 + kernel_rtol(S.size))
    assert r.flow.pairs.shape[0] == m * (m - 1) // 2
    check_certificate(r, S)


@pytest.mark.parametrize("newton", [True, False])
def test_full_rank_problem_agrees_with_the_cvxpy_reference(newton, monkeypatch):
    """A random problem of full rank (the groups' problem's shape): with the Newton
    polish the certificate meets 1e-9; without it (support cap 0: the L-BFGS alone) it
    meets 1e-7 (``f`` reaches rounding level first: its excess is second order in
    the weights' error, the potential's distances first order); either bracket
    overlaps the interior-point reference's."""
    if not newton:
        monkeypatch.setattr(nt, "_MAX_SUPPORT", 0)
        monkeypatch.setattr(ncg, "newton_cg", lambda *a, **k: 0)  # the support over the cap: nor Newton-CG
    calls = []
    polish = nt.support_newton

    def spy(*args, **kw):
        calls.append(1)
        return polish(*args, **kw)

    monkeypatch.setattr(nt, "support_newton", spy)
    rng = np.random.default_rng(5)
    G = rng.standard_normal((16, 20))
    S = G - G.mean(axis=0)
    tol = TOL if newton else 1e-7
    r = du.weight_dual(S, tol=tol)
    ref = hg.min_tension(S, method="cvxpy-flow")
    assert bool(calls) == newton
    assert r.relative_gap <= tol
    assert r.value <= ref.value + ref.gap and ref.value <= r.value + r.gap
    check_certificate(r, S)


def test_deadline_returns_a_rigorous_certificate():
    """A deadline already past: one check's worth of evaluations, then a certificate
    that is still rigorous (brute-force checked), its gap whatever it is."""
    rng = np.random.default_rng(1)
    S = rng.standard_normal((20, 24))
    S -= S.mean(axis=0)
    t0 = time.perf_counter()
    r = du.weight_dual(S, tol=TOL, deadline=t0)
    assert r.iterations <= du._CHECK
    check_certificate(r, S)


@pytest.mark.parametrize("bad", [None, "potential", "weights"])
def test_a_wrong_potential_or_weights_is_caught(bad, monkeypatch):
    """Planted bugs, kept as tests: the potential twice ``L^+ S`` (its flow no longer
    balances ``S``), or the weights squared where the variables are read (the
    gradient no longer that of ``f``), must keep the L-BFGS (the Newton polish off:
    it would repair both; nor Newton-CG) from 1e-7 on the simplex, which it meets without them."""
    monkeypatch.setattr(nt, "_MAX_SUPPORT", 0)
    monkeypatch.setattr(ncg, "newton_cg", lambda *a, **k: 0)
    m, c = 8, 2.0
    S = c * regular_simplex(m, m - 1)
    if bad == "potential":
        orig = du._potential
        monkeypatch.setattr(du, "_potential", lambda lam, S: 2.0 * orig(lam, S))
    elif bad == "weights":
        monkeypatch.setattr(du, "_weights_matrix", lambda x, iu, m: _squared(x, iu, m))
    r = du.weight_dual(S, tol=1e-7, lam0=random_start(m, 2), max_evals=2000)
    assert (r.relative_gap <= 1e-7) == (bad is None)


def _squared(x, iu, m):
    lam = np.zeros((m, m))
    lam[iu] = x * x
    return lam + lam.T


def test_refine_solves_high_rank_groups_with_the_dual(monkeypatch):
    """At high rank (forced here by lowering the rank threshold) every groups' problem
    of the cluster refinement goes to ``weight_dual``, the ALM to none."""
    from hilbertgeom import gradients as gr
    from hilbertgeom.tension import refine as rf
    from hilbertgeom.tension import solver as sv

    monkeypatch.setattr(sv, "_NEWTON_MIN_RANK", 1)
    monkeypatch.setattr(sv, "_NEWTON_RANK", 0.0)
    seen = {"dual": 0, "alm": 0}
    wd, ms = rf.weight_dual, rf._merged_solve

    def dual(*a, **k):
        seen["dual"] += 1
        return wd(*a, **k)

    def alm(*a, **k):
        seen["alm"] += 1
        return ms(*a, **k)

    monkeypatch.setattr(rf, "weight_dual", dual)
    monkeypatch.setattr(rf, "_merged_solve", alm)
    G = gr.synthetic_head_gradient(200, 6, batch=16, seed=0, logit_scale=0.1).G
    r = hg.min_tension(G, method="refine", tol=1e-6)
    assert seen["dual"] >= 1 and seen["alm"] == 0
    assert r.relative_gap <= 1e-6  # not a tolerance: the tol asked for
    check_certificate(r, G)


@pytest.mark.parametrize("newton_narrows", [True, False])
def test_lbfgs_goes_on_only_where_newton_did_not_narrow_the_bracket(newton_narrows, monkeypatch):
    """Where Newton narrows the bracket but stops short of ``tol`` (here: asked for
    1e-15), the L-BFGS is not run again (from its own iterate it trails Newton); where
    Newton does not narrow it (a Newton that does nothing), the L-BFGS goes on."""
    seen = {"newton": None, "after": 0}
    polish, real_lbfgs = nt.support_newton, du.projected_lbfgs

    def newton(S, I, J, lam, P, **kw):
        seen["newton"] = lam.copy()
        return polish(S, I, J, lam, P, **kw) if newton_narrows else 0

    def lbfgs(*a, **kw):
        assert kw["scaled"]  # the initial Hessian scaled by the weights (dual.py's measurements)
        seen["after"] += seen["newton"] is not None
        return real_lbfgs(*a, **kw)

    monkeypatch.setattr(nt, "support_newton", newton)
    monkeypatch.setattr(du, "projected_lbfgs", lbfgs)
    rng = np.random.default_rng(5)
    S = rng.standard_normal((16, 20))
    S -= S.mean(axis=0)
    r = du.weight_dual(S, tol=1e-15, max_evals=20_000)
    assert seen["newton"] is not None
    assert (seen["after"] == 0) == newton_narrows
    check_certificate(r, S)


def test_newton_certificates_repair_their_iterates_potential(monkeypatch):
    """Each Newton iterate's potential is repaired before it is certified, as the L-BFGS's
    are: its pairs outside the support lie beyond 1, so dividing by the diameter alone
    wastes the lower bound (on the shipped MiniLM's 291 groups, up to 5e-3 against 5e-7,
    ``docs/theory/tension.md``).  Independent check: the diameter of each iterate by
    brute force; some certificate's lower bound must be above ``<S, Phi> / D(Phi)`` of its
    iterate (the value of the plain division), and the final certificate stays rigorous."""
    rng = np.random.default_rng(5)
    G = rng.standard_normal((16, 20))
    S = G - G.mean(axis=0)
    made = []
    certify_orig = du._certify

    def certify_spy(*args, **kw):
        made.append(certify_orig(*args, **kw))
        return made[-1]

    ratios = []
    polish = nt.support_newton

    def newton_spy(*args, certify, **kw):
        def watched(Phi, I, J, Y):
            gap = certify(Phi, I, J, Y)
            plain = float(np.sum(S * Phi)) / float(brute_pairs(Phi)[0].max())
            ratios.append(made[-1].value / plain)
            return gap

        return polish(*args, certify=watched, **kw)

    monkeypatch.setattr(du, "_certify", certify_spy)
    monkeypatch.setattr(nt, "support_newton", newton_spy)
    r = du.weight_dual(S, tol=TOL)
    assert ratios, "the Newton polish did not run"
    assert max(ratios) > 1.0 + kernel_rtol(S.size)
    assert r.relative_gap <= TOL
    check_certificate(r, S)


def _dual_gradient(S, x, iu):
    """``f``'s gradient ``(1 - ||phi_a - phi_b||^2) / 2`` by dual.py's own potential (a dense
    solve of ``L + 11^T/m``), independent of newton_cg's state."""
    m = S.shape[0]
    Phi = du._potential(du._weights_matrix(x, iu, m), S)
    D2 = np.array([[float(np.sum((Phi[a] - Phi[b]) ** 2)) for b in range(m)] for a in range(m)])
    return 0.5 - 0.5 * D2[iu]


def test_hessian_product_is_the_gradients_derivative():
    """``H v`` by two m x m x m products against the central difference of the gradient
    along ``v`` (independent: dual.py's potential, distances pair by pair), and its
    diagonal ``R d2`` (the preconditioner) against ``e_k^T H e_k`` for each pair.  The
    difference's error is ``O(h^2)`` plus rounding over ``h``: 1e-6 relative holds with
    room at ``h = 1e-5`` on weights of order 1."""
    rng = np.random.default_rng(3)
    m = 9
    S = rng.standard_normal((m, 5))
    S -= S.mean(axis=0)
    iu = np.triu_indices(m, 1)
    x = rng.uniform(0.2, 2.0, iu[0].size)
    v = rng.standard_normal(iu[0].size)
    st = ncg._State(S, x, iu)
    h = 1e-5  # not a tolerance: the finite-difference step
    fd = (_dual_gradient(S, x + h * v, iu) - _dual_gradient(S, x - h * v, iu)) / (2 * h)
    hv = ncg.hessian_product(v, st, iu)
    assert np.abs(hv - fd).max() <= 1e-6 * np.abs(fd).max()  # not a tolerance: O(h^2) bound, see docstring
    E = np.eye(iu[0].size)
    diag = np.array([ncg.hessian_product(E[k], st, iu)[k] for k in range(iu[0].size)])
    np.testing.assert_allclose(st.R * st.d2, diag, rtol=kernel_rtol(m * m))


def _newton_system(seed, m=9, d=5):
    """A Newton-CG state at random weights, a barrier term ``bd`` spread over six decades
    (as near the bound: inactive pairs large, active small), and the Newton matrix
    ``H + diag(bd)`` column by column from ``hessian_product`` (itself checked against the
    gradient's finite differences above), independent of the preconditioner's own block."""
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((m, d))
    S -= S.mean(axis=0)
    iu = np.triu_indices(m, 1)
    st = ncg._State(S, rng.uniform(0.2, 2.0, iu[0].size), iu)
    bd = 10.0 ** rng.uniform(-3, 3, iu[0].size)
    E = np.eye(iu[0].size)
    N = np.column_stack([ncg.hessian_product(E[k], st, iu) for k in range(iu[0].size)]) + np.diag(bd)
    return st, bd, iu, N, rng


def test_preconditioner_inverts_the_newton_matrix_on_its_most_active_pairs():
    """On the ``block`` pairs with the largest ``R d2 / bd`` (chosen here by a full sort),
    the preconditioner is the inverse of the Newton matrix's dense block; on the other
    pairs it divides by the diagonal.  With a block of every pair it is ``N^{-1}``
    itself, so conjugate gradients end in one step."""
    st, bd, iu, N, rng = _newton_system(11)
    npair = iu[0].size
    k = 10
    A = np.sort(np.argsort(-(st.R * st.d2) / bd)[:k])
    out = np.setdiff1d(np.arange(npair), A)
    r = rng.standard_normal(npair)
    z = ncg._preconditioner(st, bd, iu, block=k)(r)
    rtol = kernel_rtol(npair) * np.linalg.cond(N[np.ix_(A, A)])
    np.testing.assert_allclose(z[A], np.linalg.solve(N[np.ix_(A, A)], r[A]), rtol=rtol)
    np.testing.assert_allclose(z[out], r[out] / np.diag(N)[out], rtol=kernel_rtol(npair))
    full = ncg._preconditioner(st, bd, iu, block=npair)(r)
    np.testing.assert_allclose(full, np.linalg.solve(N, r), rtol=kernel_rtol(npair) * np.linalg.cond(N))
    steps = {"n": 0}

    def apply(v):
        steps["n"] += 1
        return N @ v

    x = ncg._pcg(apply, r, ncg._preconditioner(st, bd, iu, block=npair), 1e-9, float("inf"))
    assert steps["n"] == 1
    assert np.linalg.norm(N @ x - r) <= 1e-9 * np.linalg.norm(r)  # not a tolerance: the residual asked of _pcg


def test_preconditioner_falls_back_to_the_diagonal_where_the_block_is_not_positive_definite(monkeypatch):
    """A block whose Cholesky factorisation fails (made to fail here) leaves the diagonal
    preconditioner: never an error, never a non-finite step."""
    st, bd, iu, _, rng = _newton_system(12)

    def fail(M):
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(ncg.np.linalg, "cholesky", fail)
    r = rng.standard_normal(iu[0].size)
    np.testing.assert_array_equal(ncg._preconditioner(st, bd, iu, block=10)(r), r / (st.R * st.d2 + bd))


def test_preconditioner_is_the_diagonal_above_its_pairs_limit(monkeypatch):
    """Over ``_BLOCK_PAIRS`` pairs (measured slower there with the block: 424 groups) the
    preconditioner is the diagonal's inverse; at the limit, the block."""
    st, bd, iu, _, rng = _newton_system(13)
    r = rng.standard_normal(iu[0].size)
    monkeypatch.setattr(ncg, "_BLOCK_PAIRS", iu[0].size - 1)
    np.testing.assert_array_equal(ncg._preconditioner(st, bd, iu, block=10)(r), r / (st.R * st.d2 + bd))
    monkeypatch.setattr(ncg, "_BLOCK_PAIRS", iu[0].size)
    assert not np.array_equal(ncg._preconditioner(st, bd, iu, block=10)(r), r / (st.R * st.d2 + bd))


def test_projected_step_stops_each_weight_short_of_the_bound_alone():
    """A weight whose step crosses the bound stops at ``1 - _TO_BOUND`` of its value; every
    other weight takes ``t`` times its whole step (the fraction to the bound would have cut
    them all to the crossing pair's share)."""
    lam = np.array([1.0, 2.0, 0.5, 4.0])
    step = np.array([-3.0, 1.0, -0.25, -2.0])  # pair 0 would reach -2 at t = 1, pair 3 reaches 0 at t = 2
    keep = 1.0 - ncg._TO_BOUND
    np.testing.assert_array_equal(ncg._projected(lam, step, 1.0), [keep * 1.0, 3.0, 0.25, 2.0])
    np.testing.assert_array_equal(ncg._projected(lam, step, 0.25), [0.25, 2.25, 0.4375, 3.5])
    np.testing.assert_array_equal(ncg._projected(lam, step, 2.0), [keep * 1.0, 4.0, keep * 0.5, keep * 4.0])


@pytest.mark.parametrize("block", [None, 40])
@pytest.mark.parametrize("shape", ["simplex", "full rank", "head groups"])
def test_newton_cg_takes_a_large_support_to_tol(shape, block, monkeypatch):
    """Where the support is over the dense Hessian's cap (set to 0 here), Newton-CG over
    every pair takes the L-BFGS's bracket to 1e-9: on the regular simplex (closed form
    ``c (m-1)/2``), a random full-rank problem and the groups' sums of a synthetic head
    gradient (against the cvxpy interior-point reference); the L-BFGS is not run again.
    Its certificate keeps the flow scalar-weighted over all the pairs, not as vectors.
    With the default block every pair (66 to 276) is in the preconditioner's block; with
    ``block = 40`` the others are on its diagonal.  The bracket is checked at every
    evaluation, so that the L-BFGS hands over at ``1e-3`` (between two checks 100 apart it
    takes the simplex to 1e-9 by itself)."""
    from hilbertgeom import gradients as gr

    monkeypatch.setattr(du, "_DENSE_SUPPORT", 0)
    monkeypatch.setattr(du, "_CHECK", 1)
    if block is not None:
        monkeypatch.setattr(ncg, "_BLOCK", block)
    seen = {"cg": 0, "lbfgs_after": 0}
    run, real_lbfgs = ncg.newton_cg, du.projected_lbfgs

    def spy(*a, **k):
        seen["cg"] += 1
        return run(*a, **k)

    def lbfgs(*a, **k):
        seen["lbfgs_after"] += seen["cg"]
        return real_lbfgs(*a, **k)

    monkeypatch.setattr(ncg, "newton_cg", spy)
    monkeypatch.setattr(du, "projected_lbfgs", lbfgs)
    if shape == "simplex":
        m, c = 12, 3.0
        S = c * regular_simplex(m, m - 1)
        lam0 = random_start(m, 0)
    elif shape == "full rank":
        S = np.random.default_rng(5).standard_normal((16, 20))
        S -= S.mean(axis=0)
        lam0 = None
    else:
        G = gr.synthetic_head_gradient(400, 12, batch=16, seed=1).G
        labels = np.argsort(np.argsort(-np.linalg.norm(G, axis=1))) % 24  # 24 groups of mixed rows
        S = np.zeros((24, G.shape[1]))
        np.add.at(S, labels, G)
        S -= S.mean(axis=0)
        lam0 = None
    r = du.weight_dual(S, tol=TOL, lam0=lam0)
    assert seen["cg"] == 1 and seen["lbfgs_after"] == 0
    assert r.status == "optimal" and r.relative_gap <= TOL
    # after the barrier up to every pair has a weight: the flow stays scalar-weighted (pairs + m x d)
    assert not r.flow.explicit
    if shape == "simplex":
        T = c * (m - 1) / 2.0
        assert r.value <= T * (1 + kernel_rtol(S.size)) and T <= (r.value + r.gap) * (1 + kernel_rtol(S.size))
    else:
        ref = hg.min_tension(S, method="cvxpy-flow")
        assert r.value <= ref.value + ref.gap and ref.value <= r.value + r.gap
    check_certificate(r, S)


def test_newton_cg_keeps_to_max_evals(monkeypatch):
    """``max_evals`` bounds the evaluations of the whole solve, Newton-CG's included (one
    Cholesky per weights tried): the L-BFGS's own count is found first with Newton-CG
    switched off, then Newton-CG is given three evaluations more and must stop there,
    with the certificate of its best iterate (independent count: a spy on
    ``_State``, Newton-CG's only evaluation)."""
    monkeypatch.setattr(du, "_DENSE_SUPPORT", 0)
    S = np.random.default_rng(5).standard_normal((16, 20))
    S -= S.mean(axis=0)
    run = ncg.newton_cg
    monkeypatch.setattr(ncg, "newton_cg", lambda *a, **k: 0)
    before = du.weight_dual(S, tol=1e-12).iterations  # the L-BFGS to its hand-over point, then again
    monkeypatch.setattr(ncg, "newton_cg", run)
    states = {"n": 0}
    state = ncg._State

    def counted(*a, **k):
        states["n"] += 1
        return state(*a, **k)

    monkeypatch.setattr(ncg, "_State", counted)
    lbfgs_evals = du.weight_dual(S, tol=1e-12, max_evals=1).iterations  # the L-BFGS's first check only
    assert states["n"] == 0  # the budget spent: Newton-CG not started
    r = du.weight_dual(S, tol=1e-12, max_evals=before + 3)
    assert 0 < states["n"] <= before + 3
    assert r.iterations <= before + 3 and lbfgs_evals <= before
    check_certificate(r, S)
