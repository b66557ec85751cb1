r"""The head identities I6--I9: the forward head norm, the covering radius, the
backward bounds.

**I6.** $(U+S)h - Uh = Sh$, so $H(p_{U+S}(h), p_U(h)) = \operatorname{var}(Sh)
= \max_{i,j}\langle s_i - s_j, h\rangle$ (I2) for every $U$; Hölder
$\langle x, h\rangle \le \|x\|_*\|h\|$ (Cauchy--Schwarz through Lagrange's
identity for $\ell_2$; $\sum x_k y_k \le \max|y| \sum|x|$ for $\ell_1/\ell_\infty$)
bounds it by $R\,D_*(S)$; the witness $h = R\,x/\|x\|_2$ (resp.
$R\operatorname{sign}(x)$, $R\,e_k$) attains it.

**I7.** $(s_i + a) - (s_j + a) = s_i - s_j$.  Any ball of radius $\rho$ around
$c$ holds $\|s_i - s_j\| \le \|s_i - c\| + \|c - s_j\| \le 2\rho$, so
$D \le 2\,\mathrm{rad}$ (sharp for two points).  Jung's theorem (cited:
Jung 1901) gives $\mathrm{rad} \le J_k D$; its sharpness on the regular
$k$-simplex is proved here: the centred vertices $e_i - \mathbf 1/(k+1)$ have
norm$^2$ $k/(k+1)$ and edge$^2$ 2, so circumradius / edge $= J_k$.

**I8.** Split a zero-sum $r = r^+ - r^-$, $\sum r^+ = \sum r^- = m = \|r\|_1/2$:
$S^\top r = \frac1m\sum_{i,j} r^+_i r^-_j (s_i - s_j)$ (identity), so
$\|S^\top r\| \le \frac1m \sum_{ij} r_i^+ r_j^- D = mD$; sharp on
$r = e_i - e_j$ at the farthest pair.  For $r = p - e_c$:
$\|p - e_c\|_1 = 2(1 - p_c)$, with the absolute values decided by sympy
from $p \ge 0$, $\sum p = 1$; sharp on $p = (1-s)e_i + s e_j$, $c = j$.

**I9.** $b_+ - b = S^\top(q - e_c) + U^\top(q - p) = S^\top(p - e_c) + (U+S)^\top(q - p)$;
$\|U^\top(q - p)\| \le D(U)\,\mathrm{TV}(p,q) \le D(U)\tanh(\delta/4)$ by I8
and I4 with $H(p,q) = \operatorname{var}(Sh) = \delta$ (I2).  The example
$U = (\pm M e_2)$, $S = (\pm\frac\eta2 e_1)$, $h = e_1$, $c = 1$ has
$b_+ - b = (-\eta q_2,\ M\tanh(\eta/2))$ exactly, so the change grows with $M$
and $\text{change}/\text{bound} \to 1/(1 + \tanh^2(\eta/4))$ as $M \to \infty$.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import sympy as sp

import hilbertgeom as hg

from ._core import EXACT, Proof, clouds, diameter, farthest, rank, register, softmax, vnorm

__all__ = ["IDENTITIES"]

IDENTITIES: dict = {}

_NORMS = ((2, 2, 2), ("inf", 1, np.inf), (1, "inf", 1))  # (hidden norm, diameter norm, numpy ord of h)


# --------------------------------------------------------------------------- I6
@register(IDENTITIES, "I6", "sup_{||h|| <= R} H(p_{U+S}(h), p_U(h)) = R D(S), independent of U, sharp; "
          "l_inf hidden norm -> l_1 diameter, l_1 -> l_inf",
          "arXiv 2608.22253 (v2), the head norm",
          "sympy: U cancels, Lagrange's identity, Hölder witnesses; numeric: brute-force dual diameters, "
          "random h in the ball, the witness attains")
def _i6(pf: Proof, rng, quick, seed):
    U = sp.Matrix(3, 2, sp.symbols("u1:7", real=True))
    S = sp.Matrix(3, 2, sp.symbols("s1:7", real=True))
    h = sp.Matrix(sp.symbols("h1:3", real=True))
    pf.zero("(U+S)h - Uh = Sh", ((U + S) * h - U * h - S * h).norm() ** 2)
    x = sp.symbols("x1:4", real=True)
    y = sp.symbols("y1:4", real=True)
    pf.zero("Lagrange: |x|^2|y|^2 - (x.y)^2 = sum (x_i y_j - x_j y_i)^2",
            sum(t * t for t in x) * sum(t * t for t in y) - sum(x[i] * y[i] for i in range(3)) ** 2
            - sum((x[i] * y[j] - x[j] * y[i]) ** 2 for i in range(3) for j in range(i + 1, 3)))
    xp = sp.Symbol("x", positive=True)
    pf.zero("witness l_inf: x sign(x) = |x| (x > 0)", xp * sp.sign(xp) - sp.Abs(xp))
    pf.zero("witness l_inf: x sign(x) = |x| (x < 0)", -xp * sp.sign(-xp) - sp.Abs(-xp))
    z = sp.Matrix(sp.symbols("z1:4", positive=True))
    pf.zero("witness l_2: z.(z/||z||) = ||z||", z.dot(z) / sp.sqrt(z.dot(z)) - sp.sqrt(z.dot(z)))
    for kind, S_ in clouds(rng, quick):
        Sd = np.asarray(S_, dtype=np.float64)
        V, d = Sd.shape
        if V < 2 or kind == "huge-scale":
            continue
        Uf = rng.normal(0, 3, (V, d)) * rng.choice([1.0, 1e3])
        R = float(rng.uniform(0.1, 5.0))
        for hn, dn, ordh in _NORMS:
            D = diameter(Sd, ord={2: 2, 1: 1, "inf": np.inf}[dn])
            bound = hg.head_norm(S_, hidden_norm=hn, radius=R)
            pf.eq(f"head_norm = R D_dual (brute) {hn}/{kind}", bound, R * D, scale=1e-300 + R * D)
            hv = hg.worst_case_hidden(S_, hidden_norm=hn, radius=R)
            pf.le(f"witness in the ball {hn}/{kind}", float(np.linalg.norm(hv, ord=ordh)), R, scale=R)
            zs = Sd @ hv  # H = var(S h) for every U (I2); the witness attains R D
            # the products S h round relative to the rows' size, not to D (near-duplicate rows)
            pf.eq(f"witness attains R D {hn}/{kind}", float(zs.max() - zs.min()), R * D,
                  scale=1e-300 + R * D + R * float(np.abs(Sd).sum(axis=1).max()))
            scale = R * D + float((np.abs(Uf).max() + np.abs(Sd).max()) * R * d) + 1e-300
            pf.eq(f"attained with any U at the witness {hn}/{kind}",
                  hg.softmax_hilbert_distance((Uf + Sd) @ hv, Uf @ hv), bound, scale=scale)
            for _ in range(2):
                g = rng.standard_normal(d)
                g *= R * rng.uniform(0, 1) / max(float(np.linalg.norm(g, ord=ordh)), 1e-300)
                zz = Sd @ g
                pf.le(f"random h in the ball {hn}/{kind}", float(zz.max() - zz.min()), bound, scale=1e-300 + bound)


# --------------------------------------------------------------------------- I7
def _simplex(k: int, scale: float) -> np.ndarray:
    """Regular k-simplex, edge sqrt(2) * scale, in R^(k+1): the closed-form vertices
    e_i - 1/(k+1) whose circumradius the sympy lines of I7 prove.  Kept apart from
    hg.regular_simplex on purpose (an independent reference for the ball kernels,
    with no SVD rotation in between)."""
    return (np.eye(k + 1) - 1.0 / (k + 1)) * scale


@register(IDENTITIES, "I7", "D(S + 1a^T) = D(S); D(S) <= 2 rad(S) (sharp, two points) and rad(S) <= J_k D(S) "
          "in a k-dim span (Jung; sharp on the regular simplex)",
          "Jung (1901) [cited theorem]; arXiv 2608.22253 (v2)",
          "cited theorem (Jung); sympy: shift, triangle, simplex circumradius for general k; numeric: "
          "brute-force diameter, independent containment check of the ball, simplex and segment witnesses")
def _i7(pf: Proof, rng, quick, seed):
    si, sj, a = (sp.Matrix(sp.symbols(f"{n}1:4", real=True)) for n in ("s", "t", "a"))
    pf.zero("(s_i + a) - (s_j + a) = s_i - s_j", ((si + a) - (sj + a) - (si - sj)).norm() ** 2)
    r1, r2, rho = sp.symbols("r1 r2 rho", real=True)
    ga, gb = sp.symbols("a b", nonnegative=True)
    pf.nonneg("2 rho - (r1 + r2) >= 0 for r1 = rho - a, r2 = rho - b <= rho",
              (2 * rho - r1 - r2).subs({r1: rho - ga, r2: rho - gb}))
    k = sp.Symbol("k", positive=True, integer=True)
    norm2 = (1 - 1 / (k + 1)) ** 2 + k * (1 / (k + 1)) ** 2  # ||e_i - 1/(k+1)||^2 in R^(k+1)
    pf.zero("vertex norm^2 = k/(k+1), any k", norm2 - k / (k + 1))
    v = [sp.Matrix([sp.KroneckerDelta(i, j) - sp.Rational(1, 5) for j in range(5)]) for i in range(5)]
    pf.zero("edge^2 = 2 (k = 4, explicit vertices)", (v[0] - v[3]).dot(v[0] - v[3]) - 2)
    pf.zero("(circumradius / edge)^2 = k/(2(k+1)) = J_k^2, any k", norm2 / 2 - k / (2 * (k + 1)))
    pf.positive("J_k^2 < 1/2: 1/2 - k/(2(k+1)) = 1/(2(k+1)) > 0", sp.Rational(1, 2) - k / (2 * (k + 1)))
    for kk in range(0, 12):
        pf.eq(f"jung_radius({kk}) = sqrt(k/(2(k+1))) (mpmath)", hg.jung_radius(kk),
              float(mp.sqrt(mp.mpf(kk) / (2 * (kk + 1)))))
    for kind, S_ in clouds(rng, quick):
        Sd = np.asarray(S_, dtype=np.float64)
        D = diameter(Sd)
        pf.eq(f"row_diameter vs brute force/{kind}", hg.row_diameter(S_), D, scale=1e-300 + D)
        sh = rng.normal(0, 100, Sd.shape[1]) * (float(np.abs(Sd).max()) or 1.0)
        pf.eq(f"D(S + 1a^T) = D(S)/{kind}", hg.row_diameter(Sd + sh), D,
              scale=1e-300 + D + float(np.abs(sh).max() + np.abs(Sd).max()))
        if kind in ("tiny-scale", "huge-scale", "head-gradient"):
            continue
        ball = hg.minimum_enclosing_ball(Sd)
        reach = float(np.linalg.norm(Sd - ball.center, axis=1).max())  # independent containment
        # the centre's coordinates round relative to the rows' size, not to D
        pf.le(f"ball contains the rows/{kind}", reach, ball.radius, scale=1e-300 + D + float(np.abs(Sd).max()))
        pf.le(f"D <= 2 rad/{kind}", D, 2 * ball.radius, scale=1e-300 + D)
        kk = rank(Sd - Sd.mean(axis=0), rtol=1e-9) if D > 0 else 0
        pf.le(f"rad <= J_k D (Jung)/{kind}", ball.lower, hg.jung_radius(kk) * D, scale=1e-300 + D)
    for kk in range(1, 6 if quick else 11):
        P = _simplex(kk, float(rng.uniform(0.5, 3.0)))
        D = diameter(P)
        circ = float(np.linalg.norm(P[0] - P.mean(axis=0)))
        ball = hg.minimum_enclosing_ball(P)
        pf.eq(f"simplex circumradius = J_k D, k={kk}", circ, hg.jung_radius(kk) * D, scale=D)
        pf.le(f"sharp: J_k D <= radius on the simplex, k={kk}", hg.jung_radius(kk) * D, ball.radius, scale=D, tol=EXACT)
        pf.le(f"sharp: lower >= J_k D (1 - tol), k={kk}", hg.jung_radius(kk) * D, ball.lower, scale=D, tol=EXACT)
    seg = np.array([[0.0, 0.0], [3.0, 4.0]])
    ball = hg.minimum_enclosing_ball(seg)
    pf.eq("segment: D = 2 rad", 2 * ball.radius, 5.0, tol=EXACT)


# --------------------------------------------------------------------------- I8
@register(IDENTITIES, "I8", "||S^T r|| <= D(S) ||r||_1 / 2 for 1^T r = 0, sharp on e_i - e_j; "
          "cross-entropy: ||S^T (p - e_c)|| <= D(S)(1 - p_c), sharp",
          "arXiv 2608.22253 (v2), the backward bound",
          "sympy: transport split of r for general positions, ||p - e_c||_1 decided from p >= 0; "
          "numeric: brute-force D and ||S^T r||, witnesses attain")
def _i8(pf: Proof, rng, quick, seed):
    # S^T r = (1/m) sum_ij r+_i r-_j (s_i - s_j) when sum r+ = sum r- = m (3 + 2 supports, general positions)
    rp = sp.symbols("a1:4", positive=True)
    rm = sp.symbols("b1:3", positive=True)
    xs = sp.symbols("x1:4", real=True)
    ys = sp.symbols("y1:3", real=True)
    m = sum(rp)
    rm2 = [rm[0], m - rm[0]]  # sum r- = m
    lhs = sum(rp[i] * xs[i] for i in range(3)) - sum(rm2[j] * ys[j] for j in range(2))
    rhs = sum(rp[i] * rm2[j] * (xs[i] - ys[j]) for i in range(3) for j in range(2)) / m
    pf.zero("S^T r = (1/m) sum_ij r+_i r-_j (s_i - s_j)", lhs - rhs)
    pf.zero("sum_ij r+_i r-_j / m = m (the weights' total)",
            sum(rp[i] * rm2[j] for i in range(3) for j in range(2)) / m - m)
    # any supports: the double sum factors, sum_ij r+_i r-_j (s_i - t_j) = (sum_j r-_j) A - (sum_i r+_i) B
    mA, mB, mm = sp.symbols("A B m", real=True)  # A = sum r+_i s_i, B = sum r-_j t_j, m = both totals
    pf.zero("any supports: (1/m)(m A - m B) = A - B = S^T r", (mm * mA - mm * mB) / mm - (mA - mB))
    for V in (3, 5):
        p = sp.symbols(f"p1:{V}", nonnegative=True)  # the non-target probabilities; p_c = 1 - sum p
        pc = 1 - sum(p)
        l1 = sum(sp.Abs(pi - 0) for pi in p) + sp.Abs(pc - 1)
        pf.zero(f"||p - e_c||_1 = 2(1 - p_c), V={V} (Abs decided)", l1 - 2 * (1 - pc))
    for kind, S_ in clouds(rng, quick):
        Sd = np.asarray(S_, dtype=np.float64)
        V = Sd.shape[0]
        if V < 2:
            continue
        D, i, j = farthest(Sd)
        big = float(np.abs(Sd).max())
        for _ in range(2):
            r = rng.standard_normal(V) * rng.choice([1.0, 1e-8])
            r -= r.mean()
            l1 = float(np.abs(r).sum())
            pf.eq(f"backward_bound = D ||r||_1 / 2/{kind}", hg.backward_bound(Sd, r), D * l1 / 2, scale=1e-300 + D * l1)
            pf.le(f"||S^T r|| <= D ||r||_1/2/{kind}", vnorm(Sd.T @ r), D * l1 / 2,
                  scale=1e-300 + (D + big) * l1)
            p = softmax(rng.normal(0, 4, V))
            c = int(rng.integers(V))
            one_p = float(np.delete(p, c).sum())
            e = p.copy()
            e[c] = -one_p  # p_c - 1 without cancellation: exactly the negated rest
            pf.eq(f"cross_entropy_backward_bound = D (1 - p_c)/{kind}", hg.cross_entropy_backward_bound(Sd, p, c),
                  D * one_p, scale=1e-300 + D * one_p)
            pf.le(f"||S^T (p - e_c)|| <= D (1 - p_c)/{kind}", vnorm(Sd.T @ e), D * one_p,
                  scale=1e-300 + (D + big) * one_p)
        w = hg.backward_witness(Sd)
        pf.ok(f"witness is e_i - e_j/{kind}", sorted(w.tolist()).count(0.0) == V - 2 and w.max() == 1 and w.min() == -1)
        pf.eq(f"witness attains: ||S^T w|| = D/{kind}", vnorm(Sd.T @ w), D, scale=1e-300 + D + big)
        s = float(rng.uniform(0.05, 0.95))
        p = np.zeros(V)
        p[i], p[j] = 1 - s, s  # c = j: p - e_c = (1 - s)(e_i - e_j)
        pf.eq(f"cross-entropy witness attains D (1 - p_c)/{kind}", hg.cross_entropy_backward_bound(Sd, p, j),
              vnorm(Sd.T @ (p - np.eye(V)[j])), scale=1e-300 + (D + big))


# --------------------------------------------------------------------------- I9
def _sigma(x):
    return 1 / (1 + mp.exp(-x))


@register(IDENTITIES, "I9", "||b+ - b|| <= min{D(S)(1-q_c) + D(U) tanh(delta/4), D(S)(1-p_c) + D(U+S) tanh(delta/4)}, "
          "delta = var(Sh); the U-dependence is real",
          "arXiv 2608.22253 (v2), the backward change",
          "sympy: both splits of b+ - b, the V = d = 2 example in closed form; numeric: brute-force change and "
          "bound, mpmath example (change/bound -> 1/(1 + tanh^2(eta/4)))")
def _i9(pf: Proof, rng, quick, seed):
    V, d = 3, 2
    U = sp.Matrix(V, d, sp.symbols(f"u1:{V * d + 1}", real=True))
    S = sp.Matrix(V, d, sp.symbols(f"s1:{V * d + 1}", real=True))
    p = sp.Matrix(sp.symbols(f"p1:{V + 1}", real=True))
    q = sp.Matrix(sp.symbols(f"q1:{V + 1}", real=True))
    e = sp.Matrix([1, 0, 0])
    change = (U + S).T * (q - e) - U.T * (p - e)
    pf.zero("b+ - b = S^T(q - e_c) + U^T(q - p)", (change - (S.T * (q - e) + U.T * (q - p))).norm() ** 2)
    pf.zero("b+ - b = S^T(p - e_c) + (U+S)^T(q - p)", (change - (S.T * (p - e) + (U + S).T * (q - p))).norm() ** 2)
    M, eta = sp.symbols("M eta", positive=True)
    q1, q2 = 1 / (1 + sp.exp(-eta)), 1 / (1 + sp.exp(eta))  # softmax(eta/2, -eta/2)
    Ue = sp.Matrix([[0, M], [0, -M]])
    Se = sp.Matrix([[eta / 2, 0], [-eta / 2, 0]])
    ch = (Ue + Se).T * sp.Matrix([q1 - 1, q2]) - Ue.T * sp.Matrix([sp.Rational(-1, 2), sp.Rational(1, 2)])
    pf.zero("example: first coordinate = -eta q_2", (ch[0] + eta * q2).rewrite(sp.exp))
    pf.zero("example: second coordinate = M tanh(eta/2)", (ch[1] - M * sp.tanh(eta / 2)).rewrite(sp.exp))
    for kind, S_ in clouds(rng, quick):
        Sd = np.asarray(S_, dtype=np.float64)
        Vn, dn = Sd.shape
        if Vn < 2 or kind in ("huge-scale",):
            continue
        for _ in range(2):
            Un = rng.normal(0, 2, (Vn, dn)) * rng.choice([1.0, 1e3])
            h = rng.standard_normal(dn)
            c = int(rng.integers(Vn))
            pv, qv = softmax(Un @ h), softmax((Un + Sd) @ h)
            ec = np.eye(Vn)[c]
            change = vnorm((Un + Sd).T @ (qv - ec) - Un.T @ (pv - ec))
            z = Sd @ h
            t = math.tanh(float(z.max() - z.min()) / 4)
            dS = diameter(Sd)
            bound = min(dS * float(np.delete(qv, c).sum()) + diameter(Un) * t,
                        dS * float(np.delete(pv, c).sum()) + diameter(Un + Sd) * t)
            # delta = var(S h) rounds relative to |S| |h|_1 (offset rows cancel), and the bound
            # moves by D(U)/4 per unit of delta
            scale = 1e-300 + bound + (diameter(Un) + diameter(Un + Sd)) * float(np.abs(Sd).max() * np.abs(h).sum())
            pf.eq(f"backward_change vs brute force/{kind}", hg.backward_change(Un, Sd, h, c), change,
                  scale=scale + float(np.abs(Un).max() + np.abs(Sd).max()))
            pf.eq(f"backward_change_bound vs the formula/{kind}", hg.backward_change_bound(Un, Sd, h, c), bound,
                  scale=scale)
            pf.le(f"change <= bound/{kind}", change, bound, scale=scale + float(np.abs(Un).max() + np.abs(Sd).max()))
    # the example, exact in mpmath: change = sqrt(eta^2 q2^2 + M^2 tanh^2(eta/2)), bound in closed form
    for Mv in (1.0, 10.0, 1e3, 1e6):
        for ev in (0.05, 0.5, 1.0, 3.0):
            Mm, em = mp.mpf(Mv), mp.mpf(ev)
            q2m = _sigma(-em)
            change = mp.sqrt(em**2 * q2m**2 + Mm**2 * mp.tanh(em / 2) ** 2)
            t = mp.tanh(em / 4)
            bound = min(em * q2m + 2 * Mm * t, em / 2 + mp.sqrt(em**2 + 4 * Mm**2) * t)
            Un = np.array([[0.0, Mv], [0.0, -Mv]])
            Sn = np.array([[ev / 2, 0.0], [-ev / 2, 0.0]])
            lib_change = hg.backward_change(Un, Sn, [1.0, 0.0], 0)
            lib_bound = hg.backward_change_bound(Un, Sn, [1.0, 0.0], 0)
            pf.eq(f"example change (mpmath) M={Mv:g} eta={ev:g}", lib_change, float(change), scale=float(bound))
            pf.eq(f"example bound (mpmath) M={Mv:g} eta={ev:g}", lib_bound, float(bound), scale=float(bound))
            pf.le(f"example: M tanh(eta/2) <= change M={Mv:g} eta={ev:g}", float(Mm * mp.tanh(em / 2)), lib_change,
                  scale=float(bound))
            if Mv >= 1e3:  # sharp as M -> oo: change / bound -> 1/(1 + tanh^2(eta/4)) -> 1 as eta -> 0
                lim = float(1 / (1 + mp.tanh(em / 4) ** 2))
                pf.le(f"near-sharp: change/bound >= limit - 2/M, M={Mv:g} eta={ev:g}", lim - 2.0 / Mv * (1 + 1 / ev),
                      lib_change / lib_bound)
