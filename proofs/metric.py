r"""The metric identities I1--I5: Hilbert's projective metric, the softmax
isometry, cross-entropy, total variation, Birkhoff--Hopf.

**I1.** With $a_i = \log(p_i/q_i)$: $a_i - a_j = \log(p_i/p_j) - \log(q_i/q_j)$,
so $H = \max_i a_i - \min_i a_i = \max_{i,j}|a_i - a_j|$ is the largest change
of a pairwise log-odds; $a_i(\alpha p, \beta q) = a_i(p,q) + \log(\alpha/\beta)$
(projective invariance); the triangle inequality holds pair by pair:
$(a_i + b_i) - (a_j + b_j) = (a_i - a_j) + (b_i - b_j) \le H(p,r) + H(r,q)$
with $a = \log(p/r)$, $b = \log(r/q)$.

**I2.** For every $n$ and every pair $i, j$ (symbols $Z, W > 0$ for the
partition functions): $\log\frac{e^{z_i}/Z}{e^{w_i}/W} - \log\frac{e^{z_j}/Z}{e^{w_j}/W}
= (z_i - w_i) - (z_j - w_j)$, hence $H = \operatorname{var}(z - w)$; a
common shift cancels in every difference.

**I3.** Put $q_c = p_c e^{\delta_c}$.  Then
$\sum_c p_c(e^{\delta_c} - 1) = \sum_c q_c - \sum_c p_c = 0$; if every
$\delta_c > 0$ every term is positive (decided), a contradiction, and
likewise for $< 0$: so $m = \min\delta \le 0 \le M = \max\delta$, and
$M - m - \delta_c = (M - \delta_c) + (-m) \ge 0$, $\delta_c - m + M \ge 0$:
$|\delta_c| \le H$.  The constant 1 is sharp in the limit
$p = (1-\varepsilon, \varepsilon)$, $\delta = (x, -y)$ with $x \to 0$.

**I4.** For $r_i = q_i/p_i \in [a, b]$ with $a \le 1 \le b$ and $b/a = t^2 = e^H$:
the chord bound $(r - 1)^+ \le (b-1)(r-a)/(b-a)$ (on $[1, b]$ the excess is
$(b-r)(1-a)/(b-a) \ge 0$), summed with weights $p_i$, gives
$\mathrm{TV} \le (b-1)(1-a)/(b-a)$; then
$\frac{t-1}{t+1} - \frac{(b-1)(1-a)}{b-a} = \frac{(ta-1)^2}{(t^2-1)a} \ge 0$
and $\frac{t-1}{t+1} = \tanh(H/4)$.  Sharp on the two-point witness.

**I5.** Birkhoff--Hopf (cited: Birkhoff 1957, Hopf 1963) for general
matrices.  Proved here: $\Delta(A)$ is the largest cross-ratio logarithm
(the Hilbert distance of two columns), and for $2\times2$ matrices the
contraction is sharp: with $x = (1, e^u)$,
$\frac{d}{du}\log\frac{c + de^u}{a + be^u} = \frac{w(ad - bc)}{(c + dw)(a + bw)}$,
$w = e^u$, is at most $\frac{\sqrt{ad} - \sqrt{bc}}{\sqrt{ad} + \sqrt{bc}} = \tanh(\Delta/4)$
(AM--GM, decided) with equality at $w = \sqrt{ac/(bd)}$.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import sympy as sp

import hilbertgeom as hg

from ._core import Proof, exact_variation, log_odds_change, register, softmax

__all__ = ["IDENTITIES"]

IDENTITIES: dict = {}


def _pairs(rng, quick):
    """Probability pairs: Dirichlet(1/2), log-normal (ratios to e^40), entries near
    1e-300, nearly equal pairs, and pairs with exact ties of the log ratio."""
    for _ in range(5 if quick else 30):
        n = int(rng.integers(2, 12))
        yield "dirichlet", rng.dirichlet(np.full(n, 0.5)), rng.dirichlet(np.full(n, 0.5))
        yield "lognormal", np.exp(rng.normal(0, 8, n)), np.exp(rng.normal(0, 8, n))
        yield "tiny", np.exp(rng.uniform(-690, -600, n)), np.exp(rng.uniform(-690, -600, n))
        p = rng.uniform(0.5, 1.5, n)
        yield "near", p, p * (1.0 + 1e-9 * rng.standard_normal(n))
        q = p.copy()
        q[: n // 2 + 1] *= 3.0  # ties: many classes share the max and the min ratio
        yield "ties", p, q


# --------------------------------------------------------------------------- I1
@register(IDENTITIES, "I1", "H(p,q) = max_i a_i - min_i a_i (a = log p/q) = largest log-odds change; "
          "projective; a metric on the open simplex",
          "Hilbert (1895); arXiv 2608.22253 (v2), the metric",
          "sympy: log-odds, projective shift, pairwise triangle; numeric: brute force over all pairs")
def _i1(pf: Proof, rng, quick, seed):
    pi, pj, qi, qj, al, be = sp.symbols("p_i p_j q_i q_j alpha beta", positive=True)
    ai, aj = sp.log(pi / qi), sp.log(pj / qj)
    pf.zero("a_i - a_j = log(p_i/p_j) - log(q_i/q_j)",
            sp.expand_log(ai - aj - (sp.log(pi / pj) - sp.log(qi / qj))))
    pf.zero("a_i(alpha p, beta q) = a_i + log(alpha/beta)",
            sp.expand_log(sp.log(al * pi / (be * qi)) - ai - sp.log(al / be)))
    x, y, X, Y = sp.symbols("x y X Y", real=True)  # x = a_i - a_j <= X = H(p,r), y = b_i - b_j <= Y = H(r,q)
    u, v = sp.symbols("u v", nonnegative=True)
    pf.nonneg("triangle per pair: (X + Y) - (x + y) = (X - x) + (Y - y) >= 0",
              (X + Y - x - y).subs({X: x + u, Y: y + v}))
    for kind, p, q in _pairs(rng, quick):
        h = hg.hilbert_distance(p, q)
        brute = log_odds_change(p, q)
        pf.eq(f"H vs all pairs' log-odds/{kind}", h, brute, scale=1.0 + brute)
        a, b = 10.0 ** rng.uniform(-100 if kind != "tiny" else 0, 100, 2)
        shift = abs(math.log(a / b)) + float(np.abs(np.log(p / q)).max())
        pf.eq(f"projective/{kind}", hg.hilbert_distance(a * p, b * q), brute, scale=1.0 + shift)
        pf.eq(f"symmetry/{kind}", hg.hilbert_distance(q, p), brute, scale=1.0 + brute)
        pf.eq(f"H(p, a p) = 0/{kind}", hg.hilbert_distance(p, a * p), 0.0, scale=1.0 + abs(math.log(a)))
        r = rng.dirichlet(np.ones(len(p)))
        pf.le(f"triangle/{kind}", hg.hilbert_distance(p, q),
              log_odds_change(p, r) + log_odds_change(r, q), scale=1.0 + brute)
    # sharp on a two-class witness: H((1, t), (t, 1)) = 2 log t exactly
    for t in (1.5, 10.0, 1e100):
        pf.eq(f"two-class witness t={t:g}", hg.hilbert_distance([1.0, t], [t, 1.0]), 2 * math.log(t),
              scale=1.0 + 2 * math.log(t))


# --------------------------------------------------------------------------- I2
@register(IDENTITIES, "I2", "H(softmax z, softmax z') = var(z - z'); var(x + c1) = var(x)",
          "arXiv 2608.22253 (v2), the softmax isometry",
          "sympy: general n (partition functions as symbols); numeric: exact rationals, logits to 1e4")
def _i2(pf: Proof, rng, quick, seed):
    zi, zj, wi, wj, c = sp.symbols("z_i z_j w_i w_j c", real=True)
    Z, W = sp.symbols("Z W", positive=True)
    a = lambda z, w: sp.log((sp.exp(z) / Z) / (sp.exp(w) / W))  # noqa: E731
    pf.zero("a_i - a_j = (z_i - w_i) - (z_j - w_j), any n",
            sp.expand_log(a(zi, wi) - a(zj, wj)) - ((zi - wi) - (zj - wj)))
    pf.zero("shift cancels: (z_i + c) - (z_j + c) = z_i - z_j", (zi + c) - (zj + c) - (zi - zj))
    for _ in range(10 if quick else 80):
        n = int(rng.integers(2, 30))
        z, w = rng.normal(0, 10, n), rng.normal(0, 10, n)
        v = exact_variation(z - w)  # the exact variation of the rounded differences
        pf.eq("softmax_hilbert_distance = var(z - w)", hg.softmax_hilbert_distance(z, w), v, scale=1.0 + v)
        pf.eq("H(softmax z, softmax w) = var(z - w)", hg.hilbert_distance(softmax(z), softmax(w)), v,
              scale=1.0 + v + float(np.abs(z).max() + np.abs(w).max()))
        pf.eq("variation_norm = max - min (exact)", hg.variation_norm(z), exact_variation(z),
              scale=1.0 + float(np.abs(z).max()))
        c_ = float(rng.normal(0, 1e3))
        pf.eq("var(x + c1) = var(x)", hg.variation_norm(z + c_), exact_variation(z), scale=1.0 + abs(c_))
        big = rng.uniform(-1e4, 1e4, n)
        e = exact_variation(big)
        pf.eq("logits to 1e4", hg.softmax_hilbert_distance(big, np.zeros(n)), e, scale=1.0 + e)
    # sharp: a two-logit witness, var((x, 0) - (0, 0)) = x
    pf.eq("witness (x, 0)", hg.softmax_hilbert_distance([3.0, 0.0], [0.0, 0.0]), 3.0)


# --------------------------------------------------------------------------- I3
@register(IDENTITIES, "I3", "dl_c = log q_c - log p_c: H = max dl - min dl, min dl <= 0 <= max dl, "
          "|log p_c - log q_c| <= H (sharp constant)",
          "arXiv 2608.22253 (v2), cross-entropy change",
          "sympy: the mass balance and the sign argument, decided; numeric: mpmath over every class, limit witness")
def _i3(pf: Proof, rng, quick, seed):
    n = 4
    p = sp.symbols(f"p1:{n + 1}", positive=True)
    dl = sp.symbols(f"delta1:{n + 1}", real=True)
    q = [p[i] * sp.exp(dl[i]) for i in range(n)]  # the definition of delta_c, no log/exp simplification
    pf.zero("sum_c p_c (e^delta_c - 1) = sum q - sum p",
            sum(p[i] * (sp.exp(dl[i]) - 1) for i in range(n)) - (sum(q) - sum(p)))
    # e^x - 1 > 0 for x > 0: e^x - 1 = integral_0^x e^s ds, and e^s > 0
    s_, x_ = sp.symbols("s x", positive=True)
    pf.zero("e^x - 1 = int_0^x e^s ds", sp.exp(x_) - 1 - sp.integrate(sp.exp(s_), (s_, 0, x_)))
    pf.positive("e^s > 0 (the integrand)", sp.exp(s_))
    E = sp.symbols(f"E1:{n + 1}", positive=True)  # E_c = e^delta_c - 1 > 0 (all delta_c > 0), or 1 - e^delta_c
    pf.positive("all delta_c > 0 => sum_c p_c (e^delta_c - 1) > 0 (so sum q = sum p forbids it)",
                sum(p[i] * E[i] for i in range(n)))
    pf.positive("all delta_c < 0 => sum_c p_c (1 - e^delta_c) > 0", sum(p[i] * E[i] for i in range(n)))
    A, B = sp.symbols("A B", nonnegative=True)  # A = M - delta_c >= 0, B = -m >= 0
    M, m, d = sp.symbols("M m d", real=True)
    pf.nonneg("H - delta_c = (M - delta_c) + (-m) >= 0", (M - m - d).subs({M: d + A, m: -B}))
    pf.nonneg("H + delta_c = (delta_c - m) + M >= 0", (M - m + d).subs({m: d - A, M: B}))
    for kind, pv, qv in _pairs(rng, quick):
        pv, qv = pv / pv.sum(), qv / qv.sum()
        if not (np.all(pv > 0) and np.all(qv > 0)):
            continue
        pm = [mp.mpf(float(x)) for x in pv]
        qm = [mp.mpf(float(x)) for x in qv]
        sp_, sq_ = mp.fsum(pm), mp.fsum(qm)
        dlm = [mp.log(qm[i] / sq_) - mp.log(pm[i] / sp_) for i in range(len(pm))]
        H = float(max(dlm) - min(dlm))
        h = hg.hilbert_distance(pv, qv)
        pf.eq(f"H = max dl - min dl (mpmath)/{kind}", h, H, scale=1.0 + H)
        pf.le(f"min dl <= 0/{kind}", float(min(dlm)), 0.0)
        pf.le(f"max dl >= 0/{kind}", 0.0, float(max(dlm)))
        pf.le(f"|dl_c| <= H, every c/{kind}", float(max(abs(x) for x in dlm)), h, scale=1.0 + h)
    # sharpness of the constant 1: p = (1 - e, e), q_1 = p_1 e^x; |dl_2| / H = y / (x + y) -> 1
    # (|dl_2| / H = y / (x + y) = 1 - eps + O(eps^2) for x = eps/10): no constant below 1 holds
    for eps in (1e-2, 1e-4, 1e-6):
        p1, p2 = 1 - eps, eps
        with mp.workdps(40):
            q1 = mp.mpf(p1) * mp.exp(mp.mpf(eps) / 10)
            q2 = 1 - q1
            dl2 = abs(float(mp.log(q2 / mp.mpf(p2))))
        h = hg.hilbert_distance([p1, p2], [float(q1), float(q2)])
        pf.le(f"witness: |dl_2|/H >= 1 - 2 eps, eps={eps:g}", 1.0 - 2 * eps, dl2 / h)


# --------------------------------------------------------------------------- I4
@register(IDENTITIES, "I4", "TV(p,q) <= tanh(H(p,q)/4), sharp on the two-point likelihood ratio e^(+-H/2)",
          "arXiv 2608.22253 (v2); the (ta - 1)^2 reduction",
          "sympy: chord bound, (ta-1)^2 reduction and tanh form decided; "
          "numeric: mpmath TV, witness over H in [1e-8, 700]")
def _i4(pf: Proof, rng, quick, seed):
    a, t, r, H = sp.symbols("a t r H", positive=True)
    s, u, w = sp.symbols("s u w", positive=True)
    # chord: on [1, b], (b-1)(r-a)/(b-a) - (r-1) = (b-r)(1-a)/(b-a); a = 1 - s <= 1, b = 1 + w >= r = 1 + u
    b = 1 + w
    pf.zero("chord excess on [1, b] = (b - r)(1 - a)/(b - a)",
            (b - 1) * (r - a) / (b - a) - (r - 1) - (b - r) * (1 - a) / (b - a))
    pf.nonneg("chord excess >= 0 for a = 1 - s < 1 <= r = 1 + u <= b",
              ((b - r) * (1 - a) / (b - a)).subs({a: 1 - s, r: 1 + u}).subs(w, u + sp.Symbol("v", positive=True)))
    pf.nonneg("chord >= 0 on [a, 1]: (b - 1)(r - a)/(b - a), r = a + u, a = 1 - s",
              ((b - 1) * (r - a) / (b - a)).subs(r, a + u).subs(a, 1 - s))
    bb = t**2 * a
    gap = (t - 1) / (t + 1) - (bb - 1) * (1 - a) / (bb - a)
    pf.zero("(t-1)/(t+1) - (b-1)(1-a)/(b-a) = (ta-1)^2 / ((t^2-1)a), b = t^2 a",
            gap - (t * a - 1) ** 2 / ((t**2 - 1) * a))
    pf.nonneg("(ta-1)^2 / ((t^2-1)a) >= 0 for t = 1 + s > 1",
              ((t * a - 1) ** 2 / ((t**2 - 1) * a)).subs(t, 1 + s))
    pf.zero("(t-1)/(t+1) = tanh(H/4) at t = e^(H/2)",
            ((sp.exp(H / 2) - 1) / (sp.exp(H / 2) + 1) - sp.tanh(H / 4)).rewrite(sp.exp))
    for kind, p, q in _pairs(rng, quick):
        h = hg.hilbert_distance(p, q)
        pm, qm = [mp.mpf(float(x)) for x in p], [mp.mpf(float(x)) for x in q]
        sp_, sq_ = mp.fsum(pm), mp.fsum(qm)
        tv = float(mp.fsum(abs(pm[i] / sp_ - qm[i] / sq_) for i in range(len(pm))) / 2)
        pf.eq(f"total_variation vs mpmath/{kind}", hg.total_variation(p, q), tv)
        pf.le(f"TV <= tv_bound(H)/{kind}", tv, hg.tv_bound(h))
    hs = [1e-8, 1e-3, 0.5, 1.0, 4.0, 20.0, 100.0, 700.0, *rng.uniform(0, 50, 5 if quick else 40)]
    for h in hs:
        p, q = hg.tv_extremal_pair(h)
        want = float(mp.tanh(mp.mpf(h) / 4))
        pf.eq(f"tv_bound vs mpmath tanh(h/4), h={h:g}", hg.tv_bound(h), want)
        pf.eq(f"witness ratio q_2/p_2 = e^(h/2), h={h:g}", float(mp.log(mp.mpf(q[0]) / mp.mpf(p[0]))), h / 2,
              scale=1.0 + h)
        pm, qm = [mp.mpf(float(x)) for x in p], [mp.mpf(float(x)) for x in q]
        tv = float(mp.fsum(abs(pm[i] - qm[i]) for i in range(2)) / 2)
        pf.eq(f"witness attains: TV = tanh(h/4), h={h:g}", tv, want)
        pf.eq(f"witness attains the library bound, h={h:g}", tv, hg.tv_bound(hg.hilbert_distance(p, q)))


# --------------------------------------------------------------------------- I5
def _cross_ratio_delta(A) -> float:
    """``max log(a_ik a_jl / (a_il a_jk))`` in exact rationals (then one log)."""
    F = [[Fraction(x) for x in row] for row in A]
    n, m = len(F), len(F[0])
    best = Fraction(1)
    for i, j, k, l in itertools.product(range(n), range(n), range(m), range(m)):
        best = max(best, (F[i][k] * F[j][l]) / (F[i][l] * F[j][k]))
    return float(mp.log(mp.mpf(best.numerator) / best.denominator))


@register(IDENTITIES, "I5", "H(Ax, Ay) <= tanh(Delta(A)/4) H(x, y), Delta(A) = max cross-ratio log; sharp",
          "Birkhoff (1957), Hopf (1963) [cited theorem]; arXiv 2608.22253",
          "cited theorem; sympy: 2x2 derivative bound by AM-GM (decided) and its maximiser; "
          "numeric: exact-rational cross-ratios, contraction, mpmath sharpness witness")
def _i5(pf: Proof, rng, quick, seed):
    a, b, c, d, w = sp.symbols("a b c d w", positive=True)
    u = sp.Symbol("u", real=True)
    f = sp.log((c + d * sp.exp(u)) / (a + b * sp.exp(u)))
    deriv = sp.simplify(sp.diff(f, u)).subs(sp.exp(u), w)
    pf.zero("f'(u) = w (ad - bc) / ((c + dw)(a + bw)), w = e^u",
            deriv - w * (a * d - b * c) / ((c + d * w) * (a + b * w)))
    # AM-GM: (c + dw)(a + bw) >= (sqrt(ad) + sqrt(bc))^2 w, the excess is (sqrt(bd) w - sqrt(ac))^2
    pf.zero("(c + dw)(a + bw) - (sqrt(ad) + sqrt(bc))^2 w = (sqrt(bd) w - sqrt(ac))^2",
            (c + d * w) * (a + b * w) - (sp.sqrt(a * d) + sp.sqrt(b * c)) ** 2 * w
            - (sp.sqrt(b * d) * w - sp.sqrt(a * c)) ** 2)
    k = sp.Symbol("k", positive=True)  # k = sqrt(ad/bc) = e^(Delta/2)
    pf.zero("(sqrt(ad) - sqrt(bc))/(sqrt(ad) + sqrt(bc)) = tanh(Delta/4), Delta = log(ad/bc)",
            ((k - 1) / (k + 1) - sp.tanh(sp.log(k**2) / 4)).rewrite(sp.exp))
    pf.zero("cross-ratios are reciprocal: log(bc/ad) = -log(ad/bc)",
            sp.expand_log(sp.log(b * c / (a * d)) + sp.log(a * d / (b * c))))
    for _ in range(6 if quick else 40):
        A = rng.integers(1, 40, size=(int(rng.integers(1, 5)), int(rng.integers(1, 5))))
        con = hg.birkhoff_contraction(A)
        delta = _cross_ratio_delta(A.tolist())
        pf.eq("Delta vs exact cross-ratios", con.diameter, delta, scale=1.0 + delta)
        pf.eq("ratio = tanh(Delta/4) (mpmath)", con.ratio, float(mp.tanh(mp.mpf(delta) / 4)))
        for _ in range(4):
            x, y = np.exp(rng.normal(0, 2, A.shape[1])), np.exp(rng.normal(0, 2, A.shape[1]))
            hxy = log_odds_change(x, y)
            pf.le("contraction on random rays", log_odds_change(A @ x, A @ y), con.ratio * hxy, scale=1.0 + hxy)
    # sharp: 2x2 matrices at the maximiser w* = sqrt(ac/(bd)), x, y = (1, w* e^(-+e)), in mpmath
    for _ in range(3 if quick else 12):
        aa, bb, cc, dd = (int(v) for v in rng.integers(1, 30, 4))
        if aa * dd == bb * cc:
            continue
        A = np.array([[aa, bb], [cc, dd]], dtype=float)
        con = hg.birkhoff_contraction(A)
        with mp.workdps(50):  # |f'| is maximal at w* for either sign of ad - bc
            ws = mp.sqrt(mp.mpf(aa * cc) / (bb * dd))
            eps = mp.mpf("1e-15")

            def f_(t, a=aa, b=bb, c=cc, d=dd):  # this draw's entries, bound now (not the loop's last)
                return mp.log((c + d * t) / (a + b * t))

            ratio = abs(f_(ws * mp.exp(eps)) - f_(ws * mp.exp(-eps))) / (2 * eps)
        pf.eq("2x2 witness attains tanh(Delta/4)", con.ratio, float(ratio), scale=1.0)
