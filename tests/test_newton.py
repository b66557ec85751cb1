"""Newton on the scalar-weight dual restricted to a support (``tension/newton.py``).

References: the regular simplex (closed form: every pair active, ``T = c (m-1)/2``
for vertices at distance ``c``), and the cvxpy reference program (an independent
interior-point solve) on a random problem of full rank.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import kernel_rtol

import hilbertgeom as hg
from hilbertgeom.equalize import regular_simplex
from hilbertgeom.tension import newton as nt
from hilbertgeom.tension._results import _certify

TOL = 1e-9  # the target gap asked of the solves, not a comparison tolerance


def newton_certified(S, I, J, lam, P, tol=TOL, max_steps=200):
    """Run support_newton with the library's certificate and keep the best bracket."""
    best = {}

    def certify(Phi, Ic, Jc, Y):
        c = _certify(S, Phi, Ic, Jc, Y, method="alm", centered=False, iterations=0, tol=tol)
        if not best or c.relative_gap < best["c"].relative_gap:
            best["c"] = c
        return c.relative_gap

    steps = nt.support_newton(S, I, J, lam, P, tol=tol, certify=certify, max_steps=max_steps)
    return best["c"], steps


def test_regular_simplex_from_a_spanning_path():
    """Rows on a regular simplex of edge c: the optimum puts every pair at distance 1
    (closed form T = c (m-1)/2).  Started on a path (m-1 of the m(m-1)/2 pairs),
    Newton must add the other pairs and reach the closed form to 1e-9."""
    m, c = 12, 3.0
    S = c * regular_simplex(m, m - 1)
    T = c * (m - 1) / 2.0
    I, J = np.arange(m - 1), np.arange(1, m)
    rng = np.random.default_rng(0)
    P = rng.standard_normal((m, m - 1))
    cert, _ = newton_certified(S, I, J, np.ones(m - 1), P)
    assert cert.relative_gap <= TOL
    assert cert.value <= T * (1 + kernel_rtol(S.size)) and T <= (cert.value + cert.gap) * (1 + kernel_rtol(S.size))
    assert cert.flow.pairs.shape[0] == m * (m - 1) // 2  # every pair carries flow at the optimum


def test_full_rank_problem_agrees_with_the_cvxpy_reference():
    """A random problem of full rank (k = V - 1, where the ALM is slow): Newton from a
    support of the farthest pairs meets 1e-9 and overlaps the interior-point reference."""
    rng = np.random.default_rng(5)
    G = rng.standard_normal((16, 20))
    S = G - G.mean(axis=0)
    ref = hg.min_tension(S, method="cvxpy-flow")
    P = S / np.linalg.norm(S, axis=1, keepdims=True)
    sq = np.einsum("ij,ij->i", P, P)
    D2 = sq[:, None] + sq[None, :] - 2 * P @ P.T
    I, J = np.nonzero(np.triu(D2 > np.quantile(D2, 0.8), 1))
    cert, _ = newton_certified(S, I, J, np.ones(I.size), P)
    assert cert.relative_gap <= TOL
    assert cert.value <= ref.value + ref.gap and ref.value <= cert.value + cert.gap


def test_alm_calls_newton_at_high_rank(capsys, monkeypatch):
    """min_tension's ALM hands a full-rank problem to Newton once its gap is below 1e-2
    (progress line) and certifies 1e-9; its bracket overlaps the reference's.  (The rank
    floor, 64 in use, is lowered so that the reference stays quick.)"""
    from hilbertgeom.tension import solver

    monkeypatch.setattr(solver, "_NEWTON_MIN_RANK", 8)
    rng = np.random.default_rng(7)
    G = rng.standard_normal((24, 30))
    r = hg.min_tension(G, center=True, method="alm", tol=TOL, verbose=True)
    assert "Newton on the flow's support" in capsys.readouterr().err
    ref = hg.min_tension(G, center=True, method="cvxpy-flow")
    assert r.relative_gap <= TOL and r.value <= ref.value + ref.gap and ref.value <= r.value + r.gap


def test_connect_joins_every_component():
    """Three components: after _connect the support is connected, every row has a pair,
    and the added pairs are the farthest ones (each row's farthest row among them)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(3)
    P = rng.standard_normal((9, 4))
    I, J = np.array([0, 1, 3]), np.array([1, 2, 4])  # rows 5..8 have no pair
    I2, J2, lam = nt._connect(I, J, np.ones(3), P, 9)
    assert I2.size == J2.size == lam.size > 3 and (lam[3:] > 0).all()
    n, _ = connected_components(coo_matrix((np.ones(I2.size), (I2, J2)), shape=(9, 9)), directed=False)
    assert n == 1
    D = np.linalg.norm(P[:, None] - P[None, :], axis=2)
    pairs = set(zip(np.minimum(I2, J2).tolist(), np.maximum(I2, J2).tolist(), strict=True))
    for i in range(9):
        j = int(np.argmax(D[i]))
        assert (min(i, j), max(i, j)) in pairs


def test_deadline_and_step_budget_stop_it():
    m = 10
    S = regular_simplex(m, m - 1)
    I, J = np.arange(m - 1), np.arange(1, m)
    P = np.random.default_rng(1).standard_normal((m, m - 1))
    t0 = time.perf_counter()
    assert nt.support_newton(S, I, J, np.ones(m - 1), P, tol=TOL, deadline=t0) == 0
    assert nt.support_newton(S, I, J, np.ones(m - 1), P, tol=TOL, max_steps=2) == 2


@pytest.mark.parametrize("bad", ["hessian", "gradient"])
def test_a_wrong_derivative_is_caught(bad, monkeypatch):
    """Planted bugs, kept as tests: a Hessian without its D D^T factor, or a gradient
    with the wrong sign of the barrier term, must keep Newton from the closed form."""
    m, c = 8, 2.0
    S = c * regular_simplex(m, m - 1)
    I, J = np.arange(m - 1), np.arange(1, m)
    P = np.random.default_rng(2).standard_normal((m, m - 1))
    if bad == "hessian":
        monkeypatch.setattr(nt, "_newton_step", lambda I, J, lam, mu, grad, Linv, Dv: -grad)
    else:
        orig = nt._state

        def state(S, I, J, lam, mu):
            f, g, *rest = orig(S, I, J, lam, mu)
            return (f, g + 2 * mu / lam, *rest)

        monkeypatch.setattr(nt, "_state", state)
    cert, _ = newton_certified(S, I, J, np.ones(m - 1), P, max_steps=40)
    assert cert.relative_gap > TOL


def test_a_failing_newton_leaves_the_alm_to_finish(capsys, monkeypatch):
    """A singular system inside Newton is reported and the ALM certifies on its own."""
    from hilbertgeom.tension import solver

    def boom(*args, **kwargs):
        raise np.linalg.LinAlgError("planted: singular")

    monkeypatch.setattr(solver, "_NEWTON_MIN_RANK", 8)
    monkeypatch.setattr(nt, "support_newton", boom)
    G = np.random.default_rng(7).standard_normal((24, 30))
    r = hg.min_tension(G, center=True, method="alm", tol=TOL, verbose=True)
    assert "stopped (planted: singular)" in capsys.readouterr().err
    assert r.relative_gap <= TOL
