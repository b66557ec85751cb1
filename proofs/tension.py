r"""Algebraic content of I8, I11, I13, I14, I16, I19, I20.

* **I8** $\|p - e_c\|_1 = 2(1 - p_c)$ when $\sum_i p_i = 1$, so
  $\|S^\top(p - e_c)\| \le D(S)(1 - p_c)$.
* **I11** $\sum_{j \ne i} (g_i - g_j)/V = g_i$ when $\sum_j g_j = 0$.
* **I13** $\phi_i - \bar\phi = \frac1V\sum_j(\phi_i - \phi_j)$.
* **I14** the centred regular $k$-simplex $v_i = e_i - \mathbf 1/(k+1)$ has
  $\|v_i\|^2 = k/(k+1)$ and edge$^2 = 2$, so circumradius / edge $= J_k$.
* **I16** $\frac{1/2}{J_k} = \sqrt{\frac{k+1}{2k}}$.
* **I19** the Gram matrix of $x_j - x_1$ for $n$ unit-equidistant points is
  $\frac12(I + \mathbf 1\mathbf 1^\top)$, positive definite, so $n - 1 \le d$.
* **I20** $\frac{n d'}{(n-1)(d'+1)} = 1$ at $n = d + 1$, and $< 1$ beyond;
  the isodiametric packing bound $\delta^* \le 1/(n^{1/d} - 1)$ from
  $n (\delta/2)^d \le ((1+\delta)/2)^d$.

Source: arXiv 2608.22253 (both versions); Jung (1901).
"""

from __future__ import annotations

import sympy as sp

from ._base import ProofResult, Steps

__all__ = ["check_i8", "check_i11", "check_i13", "check_i14", "check_i16", "check_i19", "check_i20"]


def check_i8(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    for V in (2, 3, 5):
        p = sp.symbols(f"p1:{V + 1}", nonnegative=True)
        for c in range(V):
            # ||p - e_c||_1 = sum_{i != c} p_i + (1 - p_c), with sum p = 1
            l1 = sum(p[i] for i in range(V) if i != c) + (1 - p[c])
            st.zero(f"V={V}, c={c}: ||p - e_c||_1 = 2(1 - p_c)", (l1 - 2 * (1 - p[c])).subs(p[c], 1 - sum(p[i] for i in range(V) if i != c)))
    return st.result("I8", "||p - e_c||_1 = 2 (1 - p_c): the cross-entropy form of the backward bound",
                     "arXiv 2608.22253")


def check_i11(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    for V in (2, 3, 4, 6):
        g = sp.symbols(f"g1:{V + 1}")
        last = -sum(g[:-1])  # sum g = 0
        gg = list(g[:-1]) + [last]
        for i in range(V):
            st.zero(f"V={V}: balance at {i}", sum((gg[i] - gg[j]) / V for j in range(V) if j != i) - gg[i])
    return st.result("I11", "the balanced flow (g_i - g_j)/V balances a zero-sum G", "arXiv 2608.22253")


def check_i13(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    for V in (2, 3, 5):
        f = sp.symbols(f"f1:{V + 1}")
        mean = sum(f) / V
        for i in range(V):
            st.zero(f"V={V}: phi_{i} - mean = (1/V) sum_j (phi_i - phi_j)", (f[i] - mean) - sum(f[i] - f[j] for j in range(V)) / V)
    Vs = sp.Symbol("V", positive=True)
    st.true("(V-1)/V - 1 = -1/V < 0 for V > 0", sp.simplify((Vs - 1) / Vs - 1).is_negative)
    return st.result("I13", "centred potentials: phi_i = (1/V) sum_j (phi_i - phi_j), so ||phi_i|| <= (V-1)/V",
                     "arXiv 2608.22253")


def check_i14(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    k = sp.Symbol("k", positive=True, integer=True)
    norm2 = (1 - 1 / (k + 1)) ** 2 + k * (1 / (k + 1)) ** 2
    st.zero("||v_i||^2 = k/(k+1)", norm2 - k / (k + 1))
    st.zero("(circumradius / edge)^2 = J_k^2", norm2 / 2 - k / (2 * (k + 1)))
    for kk in range(1, 7 if quick else 10):  # explicit vertices
        V = kk + 1
        v = [sp.Matrix([sp.KroneckerDelta(i, j) - sp.Rational(1, V) for j in range(V)]) for i in range(V)]
        st.zero(f"k={kk}: ||v_0||^2", v[0].dot(v[0]) - sp.Rational(kk, kk + 1))
        st.zero(f"k={kk}: edge^2", (v[0] - v[1]).dot(v[0] - v[1]) - 2)
        st.zero(f"k={kk}: T = J_k sum ||g_i|| via Phi = G / edge",
                sum(vi.dot(vi) for vi in v) / sp.sqrt(2) - sp.sqrt(sp.Rational(kk, 2 * (kk + 1))) * V * sp.sqrt(sp.Rational(kk, kk + 1)))
    # rank one, G = g h^T with sum g = 0: the potential phi_i = sign(g_i) h / (2||h||) has
    # diameter 1 and value ||g||_1 ||h|| / 2 (here g = (g1, g2, -(g1 + g2)), g1, g2 > 0)
    g1, g2 = sp.symbols("g1 g2", positive=True)
    h = sp.Matrix(sp.symbols("h1:3", real=True))
    hn = sp.sqrt(h.dot(h))
    g = [g1, g2, -(g1 + g2)]
    phi = [sp.sign(gi) * h / (2 * hn) for gi in g]
    value = sum((g[i] * h).dot(phi[i]) for i in range(3))
    st.zero("rank one: <g h^T, Phi> = ||g||_1 ||h|| / 2", sp.simplify(value - (g1 + g2 + (g1 + g2)) * hn / 2))
    st.zero("rank one: ||phi_1 - phi_3|| = 1", sp.simplify((phi[0] - phi[2]).dot(phi[0] - phi[2]) - 1))
    return st.result("I14", "closed forms: regular simplex T = J_k sum ||g_i||; rank one T = ||g||_1 ||h|| / 2",
                     "Jung (1901); arXiv 2608.22253")


def check_i16(*, seed: int = 0, quick: bool = False, half: sp.Rational = sp.Rational(1, 2)) -> ProofResult:
    st = Steps()
    k = sp.Symbol("k", positive=True)
    J = sp.sqrt(k / (2 * (k + 1)))
    st.zero("(1/2) / J_k = sqrt((k+1)/(2k))", sp.simplify((half / J) ** 2 - (k + 1) / (2 * k)))
    st.true("sqrt((k+1)/(2k)) -> 1/sqrt(2) as k -> oo", sp.limit(sp.sqrt((k + 1) / (2 * k)), k, sp.oo) == 1 / sp.sqrt(2))
    return st.result("I16", "RowNorm ratio sqrt((k+1)/(2k)) = (1/2)/J_k, sharp on the simplex", "arXiv 2608.22253 (v2)")


def check_i19(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    for n in range(2, 8 if quick else 12):
        Gm = (sp.eye(n - 1) + sp.ones(n - 1, n - 1)) / 2
        st.true(f"n={n}: Gram (I + 11^T)/2 positive definite", Gm.is_positive_definite)
        st.zero(f"n={n}: det = n / 2^(n-1)", Gm.det() - sp.Rational(n, 2 ** (n - 1)))
    return st.result("I19", "n unit-equidistant points span n-1 dimensions: at most d+1 in R^d", "classical; arXiv 2608.22253 (v1)")


def check_i20(*, seed: int = 0, quick: bool = False) -> ProofResult:
    st = Steps()
    d = sp.Symbol("d", positive=True)
    st.zero("tight at n = d + 1", ((d + 1) * d / (d * (d + 1))) - 1)
    n = sp.Symbol("n", positive=True)
    # for n > d+1 (d' = d): 1 - n d/((n-1)(d+1)) = (n - d - 1)/((n-1)(d+1)) > 0
    st.zero("1 - bound = (n - d - 1)/((n-1)(d+1))", 1 - n * d / ((n - 1) * (d + 1)) - (n - d - 1) / ((n - 1) * (d + 1)))
    for n_ in (3, 4, 5):
        st.zero(f"sum of squares: n sum |x_i - c|^2 = sum_(i<j) |x_i - x_j|^2 (n = {n_}, per coordinate)",
                _sum_squares_identity(n_))
    x = sp.symbols("x1:4", real=True)
    yv = sp.Symbol("y", real=True)
    c = sum(x) / 3
    st.zero("the centroid minimises sum |x_i - y|^2: excess = n |y - c|^2",
            sum((xi - yv) ** 2 for xi in x) - sum((xi - c) ** 2 for xi in x) - 3 * (yv - c) ** 2)
    # the isodiametric packing bound: n balls of volume w (delta/2)^d, disjoint, inside a set of
    # diameter 1 + delta, of volume <= w ((1 + delta)/2)^d
    delta, t = sp.symbols("delta t", positive=True)
    dd = sp.Symbol("d", positive=True, integer=True)
    st.zero("volume ratio ((1+delta)/2)^d / (delta/2)^d = ((1+delta)/delta)^d",
            ((1 + delta) / 2) ** dd / (delta / 2) ** dd - ((1 + delta) / delta) ** dd)
    # n <= ((1+delta)/delta)^d  <=>  t = n^(1/d) <= (1+delta)/delta  <=>  delta (t - 1) <= 1
    st.zero("delta * ((1+delta)/delta - t) = 1 - delta (t - 1)", delta * ((1 + delta) / delta - t) - (1 - delta * (t - 1)))
    nn = sp.Symbol("n", positive=True)
    st.true("t = n^(1/d) > 1 for n > 1 (log n / d > 0)",
            sp.ask(sp.Q.positive(sp.log(nn) / dd), sp.Q.gt(nn, 1)) is True)
    # with t - 1 > 0, 1/(t-1) - delta has the sign of 1 - delta (t - 1)
    st.zero("1/(t-1) - delta = (1 - delta (t - 1)) / (t - 1)", 1 / (t - 1) - delta - (1 - delta * (t - 1)) / (t - 1))
    from hilbertgeom import equidistant_limit
    from hilbertgeom.equalize import _packing_bound

    for n_ in range(3, 15):
        for d_ in range(1, 6):
            lim = equidistant_limit(n_, d_)
            dp = min(d_, n_ - 1)
            want = 1.0 if n_ <= d_ + 1 else (1.0 / (n_ - 1) if d_ == 1 else
                                             min((n_ * dp / ((n_ - 1) * (dp + 1))) ** 0.5, 1.0 / (n_ ** (1 / d_) - 1)))
            st.residual(lim.upper - want)
    # the reported floats are rounded up: exact rational check of the defining inequalities
    from fractions import Fraction

    for n_, d_ in ((5, 2), (8925240, 2), (9232171, 3), (10**15, 3), (1301, 10)):
        c = _packing_bound(n_, d_)
        st.true(f"packing bound rounded up, n={n_} d={d_}", Fraction(n_) * Fraction(c) ** d_ >= (1 + Fraction(c)) ** d_)
    # the proven plane optima (Bateman-Erdos 1951, Bezdek-Fodor 1999) lie below the packing bound
    import math

    for n_, opt in ((5, 2 / (1 + math.sqrt(5))), (6, 1 / (2 * math.sin(2 * math.pi / 5))), (7, 0.5),
                    (8, 2 * math.sin(math.pi / 14))):
        st.true(f"plane optimum n={n_} <= packing bound", opt <= _packing_bound(n_, 2))
    return st.result("I20", "delta*(n,d)^2 <= n d'/((n-1)(d'+1)), tight at n = d+1; and delta* <= 1/(n^(1/d) - 1)",
                     "Jung (1901); isodiametric inequality (Bieberbach 1915, Urysohn 1924); arXiv 2608.22253 (v1)")


def _sum_squares_identity(n: int):
    x = sp.symbols(f"x1:{n + 1}", real=True)
    c = sum(x) / n
    return n * sum((xi - c) ** 2 for xi in x) - sum((x[i] - x[j]) ** 2 for i in range(n) for j in range(i + 1, n))
