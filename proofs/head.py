r"""Identities I3, I5, I6, I7, I9: cross-entropy, Birkhoff--Hopf, the head norm,
the covering radius, the backward change.

* **I3** $\sum_c p_c(e^{\delta_c} - 1) = \sum_c q_c - \sum_c p_c = 0$ with
  $\delta_c = \log(q_c/p_c)$: the $\delta_c$ cannot all have one sign, so
  $\min_c \delta_c \le 0 \le \max_c \delta_c$ and $|\delta_c| \le H$.
* **I5** For $2\times 2$ matrices the two cross-ratios are reciprocal, so
  $\Delta = |\log(a_{11}a_{22}/(a_{12}a_{21}))|$; contraction checked against
  exact rational cross-ratios.
* **I6** $(U+S)h - Uh = Sh$ (no $U$); Cauchy--Schwarz through Lagrange's
  identity; the witness $h = (s_i - s_j)/\|s_i - s_j\|$ attains it.
* **I7** $(s_i + a) - (s_j + a) = s_i - s_j$; numeric
  $D \le 2\,\mathrm{rad} \le 2 J_k D$.
* **I9** $b_+ - b = S^\top(q - e_c) + U^\top(q - p) = S^\top(p - e_c) + (U+S)^\top(q - p)$
  as matrix identities; for the $V = d = 2$ example,
  $U^\top(q - p) = M\tanh(\eta/2)\,e_2$ exactly.

Source: arXiv 2608.22253 (v2); Birkhoff (1957); Jung (1901).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp

from ._base import ProofResult, Steps

__all__ = ["check_i3", "check_i5", "check_i6", "check_i7", "check_i9"]


def check_i3(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    p = sp.symbols("p1:4", positive=True)
    q = sp.symbols("q1:4", positive=True)
    expr = sum(p[i] * (sp.exp(sp.log(q[i] / p[i])) - 1) for i in range(3)) - (sum(q) - sum(p))
    st.zero("sum_c p_c (e^delta_c - 1) = sum q - sum p", expr)
    from hilbertgeom import hilbert_distance

    rng = np.random.default_rng(seed)
    for _ in range(20 if quick else 200):
        pv, qv = rng.dirichlet(np.full(6, 0.3)), rng.dirichlet(np.full(6, 0.3))
        dl = np.log(qv) - np.log(pv)
        h = hilbert_distance(pv, qv)
        st.residual(max(dl.min(), 0.0) + max(-dl.max(), 0.0), 1.0 + h)
        st.residual(max(np.abs(dl).max() - h, 0.0), 1.0 + h)
    return st.result("I3", "min_c dl_c <= 0 <= max_c dl_c, so |log p_c - log q_c| <= H(p,q)", "arXiv 2608.22253")


def _cross_ratio_delta(A) -> float:
    A = [[Fraction(x) for x in row] for row in A]
    best = Fraction(1)
    n, m = len(A), len(A[0])
    for i, j, k, l in itertools.product(range(n), range(n), range(m), range(m)):
        best = max(best, (A[i][k] * A[j][l]) / (A[i][l] * A[j][k]))
    return math.log(best)


def check_i5(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    a, b, c, d = sp.symbols("a b c d", positive=True)
    # the cross-ratios of a 2x2 matrix are 1, ad/(bc) and bc/(ad): their logs are 0 and +-log(ad/bc)
    st.zero("log(bc/(ad)) = -log(ad/(bc))", sp.expand_log(sp.log(b * c / (a * d)) + sp.log(a * d / (b * c))))
    from hilbertgeom import birkhoff_contraction, hilbert_distance

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        A = rng.integers(1, 30, size=(int(rng.integers(1, 5)), int(rng.integers(1, 5))))
        c_ = birkhoff_contraction(A)
        exact = _cross_ratio_delta(A.tolist())  # rational arithmetic
        st.residual(c_.diameter - exact, 1.0 + exact)
        for _ in range(5):
            x, y = np.exp(rng.normal(0, 2, A.shape[1])), np.exp(rng.normal(0, 2, A.shape[1]))
            hxy = hilbert_distance(x, y)
            st.residual(max(hilbert_distance(A @ x, A @ y) - c_.ratio * hxy, 0.0), 1.0 + hxy)
    return st.result("I5", "H(Ax, Ay) <= tanh(Delta(A)/4) H(x, y); Delta = max cross-ratio log",
                     "Birkhoff (1957), Hopf (1963)")


def check_i6(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    U = sp.Matrix(3, 2, sp.symbols("u1:7", real=True))
    S = sp.Matrix(3, 2, sp.symbols("s1:7", real=True))
    h = sp.Matrix(sp.symbols("h1:3", real=True))
    st.zero("(U+S)h - Uh = Sh", ((U + S) * h - U * h - S * h).norm() ** 2)
    x = sp.symbols("x1:4", real=True)
    y = sp.symbols("y1:4", real=True)
    lagrange = (sum(t * t for t in x) * sum(t * t for t in y) - sum(x[i] * y[i] for i in range(3)) ** 2
                - sum((x[i] * y[j] - x[j] * y[i]) ** 2 for i in range(3) for j in range(i + 1, 3)))
    st.zero("Lagrange's identity (Cauchy-Schwarz)", lagrange)
    z = sp.Matrix(sp.symbols("z1:4", real=True))
    st.zero("witness: z.(z/||z||) = ||z||", sp.simplify((z.dot(z) / sp.sqrt(z.dot(z))) - sp.sqrt(z.dot(z))))
    from hilbertgeom import head_norm, softmax_hilbert_distance, worst_case_hidden

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        Sn = rng.standard_normal((int(rng.integers(2, 20)), int(rng.integers(1, 6))))
        Un = rng.standard_normal(Sn.shape)
        R = float(rng.uniform(0.1, 3))
        for hn in (2, "inf", 1):
            b = head_norm(Sn, hidden_norm=hn, radius=R)
            hv = worst_case_hidden(Sn, hidden_norm=hn, radius=R)
            st.residual(softmax_hilbert_distance((Un + Sn) @ hv, Un @ hv) - b, 1.0 + b + R * np.abs(Sn).sum())
    return st.result("I6", "sup_{||h||<=R} H(p_{U+S}(h), p_U(h)) = R D(S), independent of U, sharp",
                     "arXiv 2608.22253 (v2)")


def check_i7(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    si, sj, a = (sp.Matrix(sp.symbols(f"{n}1:4", real=True)) for n in ("s", "t", "a"))
    st.zero("(s_i + a) - (s_j + a) = s_i - s_j", ((si + a) - (sj + a) - (si - sj)).norm() ** 2)
    k = sp.Symbol("k", positive=True)
    st.zero("simplex circumradius^2 / edge^2 = J_k^2", ((1 - 1 / (k + 1)) ** 2 + k / (k + 1) ** 2) / 2 - k / (2 * (k + 1)))
    from hilbertgeom import jung_radius, minimum_enclosing_ball, row_diameter

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        X = rng.standard_normal((int(rng.integers(2, 25)), int(rng.integers(1, 5))))
        D = row_diameter(X)
        ball = minimum_enclosing_ball(X)
        kk = int(np.linalg.matrix_rank(X - X.mean(axis=0)))
        st.residual(max(D - 2 * ball.radius, 0.0), 1.0 + D)
        st.residual(max(ball.lower - jung_radius(kk) * D, 0.0), 1.0 + D)
    return st.result("I7", "D(S + 1a^T) = D(S); D <= 2 rad <= 2 J_k D, sharp on the simplex", "Jung (1901)")


def check_i9(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    V, d = 3, 2
    U = sp.Matrix(V, d, sp.symbols(f"u1:{V * d + 1}", real=True))
    S = sp.Matrix(V, d, sp.symbols(f"s1:{V * d + 1}", real=True))
    p = sp.Matrix(sp.symbols(f"p1:{V + 1}", real=True))
    q = sp.Matrix(sp.symbols(f"q1:{V + 1}", real=True))
    e = sp.Matrix([1, 0, 0])
    change = (U + S).T * (q - e) - U.T * (p - e)
    st.zero("b+ - b = S^T(q - e_c) + U^T(q - p)", (change - (S.T * (q - e) + U.T * (q - p))).norm() ** 2)
    st.zero("b+ - b = S^T(p - e_c) + (U+S)^T(q - p)", (change - (S.T * (p - e) + (U + S).T * (q - p))).norm() ** 2)
    M, eta = sp.symbols("M eta", positive=True)
    q1 = 1 / (1 + sp.exp(-eta))  # softmax(eta/2, -eta/2)
    q2 = 1 / (1 + sp.exp(eta))
    st.zero("example: M (q1 - q2) = M tanh(eta/2)", (M * (q1 - q2) - M * sp.tanh(eta / 2)).rewrite(sp.exp))
    from hilbertgeom import backward_change, backward_change_bound

    rng = np.random.default_rng(seed)
    for _ in range(10 if quick else 60):
        Vn, dn = int(rng.integers(2, 10)), int(rng.integers(1, 5))
        Un, Sn = rng.normal(0, 2, (Vn, dn)), rng.standard_normal((Vn, dn))
        hv, c = rng.standard_normal(dn), int(rng.integers(Vn))
        bnd = backward_change_bound(Un, Sn, hv, c)
        st.residual(max(backward_change(Un, Sn, hv, c) - bnd, 0.0), 1.0 + bnd + np.abs(Un).max())
    return st.result("I9", "||b+ - b|| <= min{D(S)(1-q_c) + D(U) tanh(d/4), ...}; U-dependence example",
                     "arXiv 2608.22253 (v2)")
