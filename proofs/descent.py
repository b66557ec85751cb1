r"""Identities I10, I12, I15, I17, I18, I21: duality, active edges, RowNorm,
the bounds on T, other steepest directions, the Shor relaxation.

* **I10** for antisymmetric $y$ with $\sum_j y_{ij} = g_i$:
  $\sum_i \langle g_i, \phi_i\rangle = \sum_{i<j}\langle y_{ij}, \phi_i - \phi_j\rangle$
  (weak duality); numeric agreement of the certified ALM with the cvxpy
  flow form (strong duality).
* **I12** equality in Cauchy--Schwarz: $\langle \lambda z, z\rangle = \|\lambda z\|\,\|z\|$ for $\lambda \ge 0$.
* **I15** $\langle g, -\tfrac\eta2\, g/\|g\|\rangle = -\tfrac\eta2\|g\|$ and
  $\langle G, \mathbf 1 c^\top\rangle = 0$ for zero-sum $G$.
* **I17** the same centring step gives $\langle G, \Phi\rangle = \langle G, \Phi - \mathbf 1c^\top\rangle$
  (the Jung bound); numeric bracket of the certified $T$.
* **I18** $g\,\operatorname{sign}(g) = |g|$; $\operatorname{tr}(G^\top UV^\top) = \sum\sigma$
  for $G = U\Sigma V^\top$.
* **I21** $(e_i - e_j)^\top(X - SS^\top)(e_i - e_j) = X_{ii} + X_{jj} - 2X_{ij} - \|s_i - s_j\|^2$,
  so $X \succeq SS^\top$ keeps the diameter bound exact for $S$.

Source: arXiv 2608.22253 (both versions).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from ._base import ProofResult, Steps

__all__ = ["check_i10", "check_i12", "check_i15", "check_i17", "check_i18", "check_i21"]


def check_i10(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    V = 4
    y = {(i, j): sp.Symbol(f"y{i}{j}", real=True) for i in range(V) for j in range(i + 1, V)}

    def Y(i, j):
        return y[(i, j)] if i < j else -y[(j, i)]

    phi = sp.symbols(f"f1:{V + 1}", real=True)
    g = [sum(Y(i, j) for j in range(V) if j != i) for i in range(V)]
    lhs = sum(g[i] * phi[i] for i in range(V))
    rhs = sum(y[(i, j)] * (phi[i] - phi[j]) for (i, j) in y)
    st.zero("sum_i <g_i, phi_i> = sum_{i<j} <y_ij, phi_i - phi_j>", lhs - rhs)
    st.zero("a balancing flow forces sum_i g_i = 0", sum(g))
    from hilbertgeom import min_tension

    rng = np.random.default_rng(seed)
    for _ in range(2 if quick else 6):
        G = rng.standard_normal((int(rng.integers(3, 9)), int(rng.integers(1, 4))))
        G -= G.mean(axis=0)
        a = min_tension(G, tol=1e-10)
        b = min_tension(G, method="cvxpy-flow")
        # weak duality both ways, the certified gap (strong duality: primal = dual), and agreement
        st.residual(max(a.value - b.flow.cost, 0.0) + max(b.value - a.flow.cost, 0.0), a.value)
        st.residual(a.gap, a.value)
        st.residual(a.value - b.value, a.value)
    # the numeric part compares solvers' outputs: the solver tolerance applies
    return st.result("I10", "max <G,Phi> over D(Phi) <= 1 = min tension of a balancing flow", "arXiv 2608.22253 (v2)",
                     tol=1e-6)


def check_i12(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    lam = sp.Symbol("lambda", nonnegative=True)
    z = sp.Matrix(sp.symbols("z1:4", real=True))
    n = sp.sqrt(z.dot(z))
    st.zero("<lambda z, z> = ||lambda z|| ||z||", sp.simplify((lam * z).dot(z) - sp.sqrt(sp.factor((lam * z).dot(lam * z))) * n))
    from hilbertgeom import min_tension

    rng = np.random.default_rng(seed)
    for _ in range(2 if quick else 6):
        G = rng.standard_normal((int(rng.integers(3, 12)), int(rng.integers(1, 4))))
        G -= G.mean(axis=0)
        r = min_tension(G, tol=1e-11)
        nrm = np.linalg.norm(r.flow.vectors, axis=1)
        big = nrm > 1e-4 * nrm.max()
        Z = r.potential[r.flow.pairs[big, 0]] - r.potential[r.flow.pairs[big, 1]]
        st.residual(float(np.abs(Z - r.flow.vectors[big] / nrm[big, None]).max()))
    # the numeric part compares a solver's output: the solver tolerance applies
    return st.result("I12", "flow on (i,j) forces phi_i - phi_j = y_ij/||y_ij||", "arXiv 2608.22253 (v2)", tol=1e-6)


def check_i15(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    g = sp.Matrix(sp.symbols("g1:4", real=True))
    eta = sp.Symbol("eta", positive=True)
    n = sp.sqrt(g.dot(g))
    st.zero("<g, -(eta/2) g/||g||> = -(eta/2)||g||", sp.simplify(g.dot(-(eta / 2) * g / n) + (eta / 2) * n))
    G = sp.Matrix(3, 2, sp.symbols("a1:7", real=True))
    G = G.row_insert(3, -(G.row(0) + G.row(1) + G.row(2)))  # zero column sums
    c = sp.Matrix(sp.symbols("c1:3", real=True))
    st.zero("<G, 1 c^T> = 0 for zero-sum G", (sp.ones(1, 4) * G * c)[0])
    from hilbertgeom import projected_rownorm

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        Gn = rng.standard_normal((int(rng.integers(2, 15)), int(rng.integers(1, 5))))
        Gn -= Gn.mean(axis=0)
        e = float(rng.uniform(0.1, 3))
        S = projected_rownorm(Gn, eta=e)
        want = e / 2 * np.linalg.norm(Gn, axis=1).sum()
        st.residual(-np.sum(Gn * S) - want, want)
        # rad(S) <= eta/2 by an explicit ball: S = -(eta/2)(N - mean N) puts every row at
        # distance exactly eta/2 from c = (eta/2) mean N (no enclosing-ball solver involved)
        N = Gn / np.linalg.norm(Gn, axis=1, keepdims=True)
        c = e / 2 * N.mean(axis=0)
        st.residual(max(float(np.linalg.norm(S - c, axis=1).max()) - e / 2, 0.0), e)
    return st.result("I15", "projected RowNorm solves min <G,S> over rad(S) <= eta/2, decrease (eta/2) sum ||g_i||",
                     "arXiv 2608.22253 (v2)")


def check_i17(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    G = sp.Matrix(2, 2, sp.symbols("a1:5", real=True))
    G = G.row_insert(2, -(G.row(0) + G.row(1)))
    P = sp.Matrix(3, 2, sp.symbols("f1:7", real=True))
    c = sp.Matrix(sp.symbols("c1:3", real=True))
    lhs = sum(G[i, j] * P[i, j] for i in range(3) for j in range(2))
    rhs = sum(G[i, j] * (P[i, j] - c[j]) for i in range(3) for j in range(2))
    st.zero("<G, Phi> = <G, Phi - 1 c^T> (zero-sum G)", lhs - rhs)
    from hilbertgeom import min_tension, tension_bounds

    rng = np.random.default_rng(seed)
    for _ in range(4 if quick else 12):
        Gn = rng.standard_normal((int(rng.integers(2, 12)), int(rng.integers(1, 4))))
        Gn -= Gn.mean(axis=0)
        b = tension_bounds(Gn)
        r = min_tension(Gn, tol=1e-10)
        st.residual(max(b.lower - r.flow.cost, 0.0) + max(r.value - b.upper, 0.0), r.value)
        st.residual(max(np.linalg.norm(Gn, axis=1).sum() / 2 - b.lower, 0.0), r.value)
    return st.result("I17", "sum ||g_i||/2 <= T(G) <= min(J_k sum ||g_i||, balanced-flow cost)", "arXiv 2608.22253 (v2)")


def check_i18(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    x = sp.Symbol("x", real=True)
    st.zero("g sign(g) = |g|", sp.simplify(x * sp.sign(x) - sp.Abs(x)))
    s1, s2, th, ph = sp.symbols("sigma1 sigma2 theta phi", real=True)
    Ur = sp.Matrix([[sp.cos(th), -sp.sin(th)], [sp.sin(th), sp.cos(th)]])
    Vr = sp.Matrix([[sp.cos(ph), -sp.sin(ph)], [sp.sin(ph), sp.cos(ph)]])
    G = Ur * sp.diag(s1, s2) * Vr.T
    st.zero("tr(G^T U V^T) = sigma1 + sigma2", sp.simplify((G.T * Ur * Vr.T).trace() - (s1 + s2)))
    from hilbertgeom import linf_steepest_descent, polar_update, row_diameter, rownorm_update, sign_update

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        Gn = rng.standard_normal((int(rng.integers(2, 12)), int(rng.integers(1, 5))))
        Gn -= Gn.mean(axis=0)
        l1 = np.abs(Gn).sum()
        S = linf_steepest_descent(Gn)
        st.residual(-np.sum(Gn * S) - l1 / 2, l1)
        st.residual(max(row_diameter(S, norm="inf") - 1.0, 0.0))
        st.residual(-np.sum(Gn * sign_update(Gn)) - l1, l1)
        st.residual(-np.sum(Gn * rownorm_update(Gn)) - np.linalg.norm(Gn, axis=1).sum(), l1)
        st.residual(-np.sum(Gn * polar_update(Gn)) - np.linalg.svd(Gn, compute_uv=False).sum(), l1)
    return st.result("I18", "Sign, RowNorm, polar and column sign are steepest for their norms", "arXiv 2608.22253 (v2)")


def check_i21(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    V, d = 3, 2
    S = sp.Matrix(V, d, sp.symbols(f"s1:{V * d + 1}", real=True))
    Xs = sp.symbols(f"x1:{V * V + 1}", real=True)
    X = sp.Matrix(V, V, lambda i, j: Xs[min(i, j) * V + max(i, j)])
    for i in range(V):
        for j in range(i + 1, V):
            e = sp.zeros(V, 1)
            e[i], e[j] = 1, -1
            form = (e.T * (X - S * S.T) * e)[0]
            diff = (S.row(i) - S.row(j))
            st.zero(f"(e_{i} - e_{j})^T (X - S S^T)(e_{i} - e_{j})",
                    form - (X[i, i] + X[j, j] - 2 * X[i, j] - diff.dot(diff)))
    from hilbertgeom import min_tension
    from hilbertgeom.equalize import _shor_sdp

    rng = np.random.default_rng(seed)
    for _ in range(1 if quick else 3):
        G = rng.standard_normal((int(rng.integers(3, 7)), int(rng.integers(1, 3))))
        G -= G.mean(axis=0)
        up, _ = _shor_sdp(G, 0.0, 1.0)
        T = min_tension(G, tol=1e-10).value
        st.residual((up - T) / T)
    # the numeric part compares an interior-point SDP value: the solver tolerance applies
    return st.result("I21", "X >= S S^T keeps D(S) <= eta exact; the Shor SDP is exact at delta = 0",
                     "arXiv 2608.22253 (v1)", tol=1e-6)
