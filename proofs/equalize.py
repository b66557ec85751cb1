r"""Equalization, I19--I21: equidistant points, the separation bounds, the Shor
relaxation of gradient-aligned equalization.

**I19.** Polarization: for unit-equidistant $x_1,\dots,x_n$ the vectors
$v_i = x_{i+1} - x_1$ have $\langle v_i, v_j\rangle = \frac12(\|v_i\|^2 + \|v_j\|^2 - \|v_i - v_j\|^2)$,
i.e. the Gram matrix $\frac12(I + \mathbf 1\mathbf 1^\top)$ of size $m = n - 1$.
Its eigenvalues are $\frac12$ (on $\mathbf 1^\perp$) and $\frac{m+1}2$ (on
$\mathbf 1$), positive for every $m$: the $v_i$ are independent, so
$n - 1 \le d$.  The regular simplex attains $n = d + 1$.

**I20.** By induction on $n$, $\sum_{i<j}\|x_i - x_j\|^2 = n\sum\|x_i\|^2 - \|\sum x_i\|^2
= n\sum\|x_i - c\|^2$ ($c$ the centroid, which minimises $\sum\|x_i - y\|^2$ with
excess $n\|y - c\|^2$).  With Jung (cited) $\|x_i - c_J\| \le J_{d'}D$, so
$\binom n2\delta^2 \le n\cdot n J_{d'}^2 D^2$, i.e.
$\delta^2/D^2 \le \frac{n d'}{(n-1)(d'+1)}$; equality at $n = d+1$ and
$1 - \text{bound} = \frac{n - d - 1}{(n-1)(d+1)} > 0$ beyond.  Isodiametric
packing (cited: Bieberbach 1915, Urysohn 1924): $n$ disjoint balls of radius
$\delta/2$ lie in a set of diameter $1 + \delta$, so
$n(\delta/2)^d \le ((1+\delta)/2)^d$, i.e. $\delta \le 1/(n^{1/d} - 1)$ (every
rearrangement step decided).

**I21.** $(e_i - e_j)^\top(X - SS^\top)(e_i - e_j) = X_{ii} + X_{jj} - 2X_{ij} - \|s_i - s_j\|^2$,
and $[[I, S^\top],[S, X]] \succeq 0 \iff X - SS^\top \succeq 0$ (Schur
complement, cited), so the lifted diameter constraint bounds $D(S)$ exactly
and only the separation floor is relaxed: the SDP value bounds every
feasible update, and at $\delta = 0$ it is $\eta T(G)$ (I10).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import sympy as sp

import hilbertgeom as hg

from ._core import EXACT, SOLVER, Proof, diameter, register, separation, solve
from .tension import certificate

__all__ = ["IDENTITIES"]

IDENTITIES: dict = {}


# --------------------------------------------------------------------------- I19
@register(IDENTITIES, "I19", "at most d+1 points of R^d are pairwise equidistant (regular simplex); "
          "delta*(V,d) < 1 for V > d+1",
          "classical; arXiv 2608.22253 (v1)",
          "sympy: polarization, Gram eigenvalues for symbolic m; numeric: regular_simplex brute-force distances, "
          "rejection at d+2, reported bound < 1")
def _i19(pf: Proof, rng, quick, seed):
    a, b = (sp.Matrix(sp.symbols(f"{n}1:4", real=True)) for n in ("a", "b"))
    pf.zero("polarization: <a, b> = (|a|^2 + |b|^2 - |a - b|^2)/2",
            a.dot(b) - (a.dot(a) + b.dot(b) - (a - b).dot(a - b)) / 2)
    m = sp.Symbol("m", positive=True, integer=True)
    j, sv = sp.Symbol("j", integer=True), sp.Symbol("sigma", real=True)
    # (I + J) 1 = (1 + m) 1 and (I + J) v = v + (1^T v) 1 = v for 1^T v = 0: eigenvalues 1/2, (m + 1)/2
    pf.zero("(I + 11^T) 1 = (1 + m) 1: 1 + sum_{j<=m} 1 = 1 + m", 1 + sp.Sum(1, (j, 1, m)).doit() - (1 + m))
    pf.zero("(I + 11^T) v = v + sigma 1 = v at sigma = 1^T v = 0", (sv * 1).subs(sv, 0))
    pf.positive("eigenvalue (m + 1)/2 > 0", (m + 1) / 2)
    pf.positive("eigenvalue 1/2 > 0", sp.Rational(1, 2))
    for mm in range(1, 8 if quick else 12):
        Gm = (sp.eye(mm) + sp.ones(mm, mm)) / 2
        pf.zero(f"m={mm}: det = (m+1)/2^m", Gm.det() - sp.Rational(mm + 1, 2**mm))
    for d in range(1, 6 if quick else 10):
        for n in range(2, d + 2):
            P = hg.regular_simplex(n, d)
            dist = np.array([np.linalg.norm(P[i] - P[j]) for i in range(n) for j in range(i + 1, n)])
            pf.eq(f"regular_simplex: all distances 1, n={n} d={d}", float(np.abs(dist - 1).max()), 0.0)
            pf.ok(f"regular_simplex shape, n={n} d={d}", P.shape == (n, d))
        try:
            hg.regular_simplex(d + 2, d)
            pf.ok(f"n = d+2 rejected, d={d}", False)
        except ValueError:
            pf.ok(f"n = d+2 rejected, d={d}", True)
        for n in (d + 2, d + 5):
            lim = hg.equidistant_limit(n, d)
            pf.ok(f"n = {n} reported impossible, d={d}", not lim.possible)
            pf.le(f"bound < 1 for n = {n}, d={d}", lim.upper, 1.0 - 1e-6 / n**2, tol=EXACT)
        pf.ok(f"n = d+1 reported possible, d={d}", hg.equidistant_limit(d + 1, d).possible)


# --------------------------------------------------------------------------- I20
def _i20_exact(n: int, d: int) -> Fraction:
    """delta*^2 <= n d'/((n-1)(d'+1)) as an exact rational."""
    dp = min(d, n - 1)
    return Fraction(n * dp, (n - 1) * (dp + 1))


def _reference_bound(n: int, d: int) -> float:
    """min(I20, packing) to 30 digits (mpmath), for n > d + 1, d >= 2."""
    with mp.workdps(30):
        i20 = mp.sqrt(mp.mpf(_i20_exact(n, d).numerator) / _i20_exact(n, d).denominator)
        pack = 1 / (mp.mpf(n) ** (mp.mpf(1) / d) - 1)
        return float(min(i20, pack))


@register(IDENTITIES, "I20", "delta*(V,d)^2 <= V d'/((V-1)(d'+1)), d' = min(d, V-1), tight at V = d+1; "
          "isodiametric packing delta* <= 1/(V^(1/d) - 1)",
          "Jung (1901), isodiametric inequality (Bieberbach 1915, Urysohn 1924) [cited theorems]; "
          "arXiv 2608.22253 (v1)",
          "cited theorems; sympy: sum of squares by induction on n, every rearrangement decided; numeric: reported "
          "bound vs mpmath both ways, exact-rational rounding, clouds, grids and proven plane optima")
def _i20(pf: Proof, rng, quick, seed):
    n = sp.Symbol("n", positive=True, integer=True)
    x, A, B = sp.symbols("x A B", real=True)  # the new point, sum |x_i|^2, sum x_i (per coordinate)
    Q = n * A - B**2  # the claim for n points
    pf.zero("induction: Q_n + sum_i (x - x_i)^2 = (n+1) A_{n+1} - B_{n+1}^2",
            (Q + n * x**2 - 2 * x * B + A) - ((n + 1) * (A + x**2) - (B + x) ** 2))
    pf.zero("base n = 1: 0 = x^2 - x^2", x**2 - x**2)
    xs = sp.symbols("x1:4", real=True)
    y = sp.Symbol("y", real=True)
    c = sum(xs) / 3
    pf.zero("centroid: sum |x_i - y|^2 = sum |x_i - c|^2 + n |y - c|^2",
            sum((t - y) ** 2 for t in xs) - sum((t - c) ** 2 for t in xs) - 3 * (y - c) ** 2)
    dp = sp.Symbol("d'", positive=True)
    J2 = dp / (2 * (dp + 1))
    pf.zero("(n/binom(n,2)) n J^2 = n d'/((n-1)(d'+1))", n * n * J2 / (n * (n - 1) / 2) - n * dp / ((n - 1) * (dp + 1)))
    d = sp.Symbol("d", positive=True)
    pf.zero("tight at n = d + 1", ((d + 1) * d / (d * (d + 1))) - 1)
    w = sp.Symbol("w", positive=True)  # n = d + 1 + w
    pf.positive("1 - bound = (n - d - 1)/((n-1)(d+1)) > 0 for n > d + 1",
                (1 - n * d / ((n - 1) * (d + 1))).subs(n, d + 1 + w))
    delta, t = sp.symbols("delta t", positive=True)
    dd = sp.Symbol("d", positive=True, integer=True)
    pf.zero("volume ratio ((1+delta)/2)^d / (delta/2)^d = ((1+delta)/delta)^d",
            ((1 + delta) / 2) ** dd / (delta / 2) ** dd - ((1 + delta) / delta) ** dd)
    pf.zero("delta ((1+delta)/delta - t) = 1 - delta (t - 1)",
            delta * ((1 + delta) / delta - t) - (1 - delta * (t - 1)))
    s = sp.Symbol("s", positive=True)  # t = n^(1/d) = 1 + s > 1
    pf.zero("1/(t-1) - delta = (1 - delta(t-1))/(t-1)", 1 / (t - 1) - delta - (1 - delta * (t - 1)) / (t - 1))
    pf.positive("t - 1 > 0 for t = 1 + s", (t - 1).subs(t, 1 + s))
    nn = sp.Symbol("n", positive=True)
    pf.true("n^(1/d) > 1 for n > 1", sp.ask(sp.Q.positive(sp.log(nn) / dd), sp.Q.gt(nn, 1)) is True)
    # the library's reported bound, both ways
    for n_ in range(3, 16):
        for d_ in range(1, 6):
            lim = hg.equidistant_limit(n_, d_)
            if n_ <= d_ + 1:
                pf.eq(f"n <= d+1: bound 1, n={n_} d={d_}", lim.upper, 1.0)
                continue
            want = 1.0 / (n_ - 1) if d_ == 1 else _reference_bound(n_, d_)
            pf.le(f"reported >= the bound (valid), n={n_} d={d_}", want, lim.upper)
            pf.le(f"reported <= the bound (sharp), n={n_} d={d_}", lim.upper, want)
    for n_, d_ in ((5, 2), (7, 2), (4, 2), (12, 3), (40, 2), (9232171, 3), (10**9, 4), (1301, 10)):
        lim = hg.equidistant_limit(n_, d_)
        cf = Fraction(lim.upper)
        if lim.source == "isodiametric packing":
            ok = n_ * cf**d_ >= (1 + cf) ** d_
        else:
            ok = cf**2 >= _i20_exact(n_, d_)
        pf.ok(f"rounded up (exact rationals), n={n_} d={d_}", ok)
    # valid on clouds and grids; tight at n = d + 1 on the regular simplex
    for _ in range(10 if quick else 80):
        n_, d_ = int(rng.integers(3, 30)), int(rng.integers(1, 6))
        X = rng.standard_normal((n_, d_))
        if rng.random() < 0.3:
            X[1] = X[0]  # a duplicate: separation 0
        D = diameter(X)
        pf.le(f"cloud min/max <= bound, n={n_} d={d_}", separation(X) / D, hg.equidistant_limit(n_, d_).upper)
    for k, d_ in ((3, 2), (5, 2), (3, 3), (4, 3), (2, 5)):
        g = np.stack(np.meshgrid(*[np.arange(k, dtype=float)] * d_), -1).reshape(-1, d_)
        pf.le(f"grid {k}^{d_}", separation(g) / diameter(g), hg.equidistant_limit(k**d_, d_).upper)
    for d_ in range(1, 8):
        P = hg.regular_simplex(d_ + 1, d_)
        pf.eq(f"tight at n = d+1: simplex ratio = bound, d={d_}", separation(P) / diameter(P),
              hg.equidistant_limit(d_ + 1, d_).upper)
    # proven plane optima (Bateman-Erdos 1951, Bezdek-Fodor 1999) lie below the bound
    for n_, opt in ((5, 2 / (1 + math.sqrt(5))), (6, 1 / (2 * math.sin(2 * math.pi / 5))), (7, 0.5),
                    (8, 2 * math.sin(math.pi / 14))):
        pf.le(f"plane optimum n={n_} <= bound", opt, hg.equidistant_limit(n_, 2).upper)
    pf.eq("d = 1: equal spacing attains 1/(n-1), n = 6",
          separation(np.arange(6.0)[:, None]) / 5.0, hg.equidistant_limit(6, 1).upper)


# --------------------------------------------------------------------------- I21
@register(IDENTITIES, "I21", "Shor SDP ([[I, S^T],[S, X]] >= 0) bounds every equalized update; its S keeps "
          "D(S) <= eta exactly; at delta = 0 it equals eta T(G) (I10)",
          "arXiv 2608.22253 (v1); Schur complement [cited theorem]",
          "cited theorem (Schur complement); sympy: the lifted distance identity; numeric: feasible updates "
          "re-checked by brute force, SDP vs re-certified eta T at delta = 0")
def _i21(pf: Proof, rng, quick, seed):
    V, d = 3, 2
    S = sp.Matrix(V, d, sp.symbols(f"s1:{V * d + 1}", real=True))
    Xs = sp.symbols(f"x1:{V * V + 1}", real=True)
    X = sp.Matrix(V, V, lambda i, j: Xs[min(i, j) * V + max(i, j)])
    for i in range(V):
        for j in range(i + 1, V):
            e = sp.zeros(V, 1)
            e[i], e[j] = 1, -1
            diff = S.row(i) - S.row(j)
            pf.zero(f"(e_{i} - e_{j})^T (X - S S^T)(e_{i} - e_{j}) = X_ii + X_jj - 2 X_ij - |s_i - s_j|^2",
                    (e.T * (X - S * S.T) * e)[0] - (X[i, i] + X[j, j] - 2 * X[i, j] - diff.dot(diff)))
    q, r = sp.symbols("q r", nonnegative=True)  # q = e^T (X - SS^T) e >= 0
    pf.nonneg("|s_i - s_j|^2 <= X_ii + X_jj - 2 X_ij <= eta^2", q)
    for _ in range(1 if quick else 3):
        Vn, dn = int(rng.integers(3, 7)), int(rng.integers(1, 3))
        G = rng.standard_normal((Vn, dn))
        G -= G.mean(axis=0)
        eta = float(rng.uniform(0.5, 2.0))
        res = solve(G, tol=1e-10)
        lo, up, _ = certificate(G, res)
        r0 = hg.equalized_descent(G, delta=0.0, eta=eta, restarts=1, seed=int(rng.integers(1 << 30)))
        pf.eq(f"delta = 0: value = eta T, V={Vn} d={dn}", r0.upper, eta * lo, scale=eta * lo, tol=SOLVER)
        pf.le(f"delta = 0: feasible <= eta T (weak duality), V={Vn} d={dn}", r0.lower, eta * up, scale=eta * lo)
        up0, S0 = hg.equalize._shor_sdp(G, 0.0, eta)
        pf.eq(f"Shor SDP at delta = 0 = eta T, V={Vn} d={dn}", up0, eta * lo, scale=eta * lo, tol=SOLVER)
        pf.le(f"Shor S: D(S) <= eta (brute force), V={Vn} d={dn}", diameter(S0), eta, scale=eta, tol=SOLVER)
        for delta in (0.1, 0.3):
            r = hg.equalized_descent(G, delta=delta, eta=eta, restarts=1, seed=int(rng.integers(1 << 30)))
            if r.update is None:
                continue
            U = np.asarray(r.update)
            pf.le(f"D(update) <= eta (brute force), delta={delta}", diameter(U), eta, scale=eta)
            pf.le(f"separation floor (brute force), delta={delta}", delta * eta, separation(U), scale=eta)
            pf.le(f"1^T update = 0, delta={delta}", float(np.abs(U.sum(axis=0)).max()), 0.0, scale=eta * Vn)
            dec = -float(np.sum(G * U))
            pf.eq(f"reported lower = decrease of the update, delta={delta}", r.lower, dec, scale=eta * lo)
            pf.le(f"feasible <= SDP bound, delta={delta}", dec, r.upper, scale=eta * lo)
            pf.le(f"SDP bound <= eta T, delta={delta}", r.upper, eta * up, scale=eta * lo, tol=SOLVER)
