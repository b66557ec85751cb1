r"""Steepest descent under the row diameter, I10--I18: minimum tension, its
certificate, closed forms, projected RowNorm and the other norms.

Every library solve is re-certified here from its arrays alone: the lower
bound $\langle G, \Phi\rangle / D(\Phi)$ with $D$ by brute force over pairs,
the upper bound $\sum\|y_{ij}\| + \frac1V\sum_{i<j}\|r_i - r_j\|$ from the
flow and its residual $r = G - \operatorname{div} y$ (the residual routed by the
balanced flow of I11), both by brute force over pairs.

**I10.** Weak duality for general $V$: for an antisymmetric flow with
$\sum_j y_{ij} = g_i$,
$\sum_i\langle g_i,\phi_i\rangle = \sum_{i<j}\langle y_{ij},\phi_i-\phi_j\rangle
\le \sum_{i<j}\|y_{ij}\|\,D(\Phi)$.  Strong duality rests on conic duality
(cited: the flow program is feasible by I11 and $\Phi = 0$ is strictly
feasible for the potential program — Slater), and is checked numerically by
a vanishing certified gap and by two independent cvxpy programs.

**I11.** $\sum_{j\ne i}(g_i - g_j)/V = ((V-1)g_i - (\sum_j g_j - g_i))/V = g_i$
when $\sum_j g_j = 0$, for symbolic $V$.

**I12.** The gap splits into non-negative pair terms
$\|y_{ij}\| - \langle y_{ij}, \phi_i - \phi_j\rangle \ge 0$ (Cauchy--Schwarz,
$\|\phi_i - \phi_j\| \le 1$); a zero gap zeroes each, and equality in
Cauchy--Schwarz with $\|\phi_i - \phi_j\| \le 1$ forces
$\phi_i - \phi_j = y_{ij}/\|y_{ij}\|$:
$\|z - y/\|y\|\|^2 = \|z\|^2 - 2\langle z, y\rangle/\|y\| + 1 \le 2(1 - \langle z,y\rangle/\|y\|)$.

**I13.** $\phi_i - \bar\phi = \frac1V\sum_{j\ne i}(\phi_i - \phi_j)$, so
$\|\phi_i\| \le \frac{V-1}{V} \le 1$; sharp on the star gradient, whose optimal
potential has $\|\phi_1\| = \frac{V-1}{V}$.

**I14.** Rank one $G = g h^\top$: the potential $\operatorname{sign}(g_i)h/(2\|h\|)$
and the transport flow $y_{ij} = g_i^+ g_j^- h / m$ ($m = \|g\|_1/2$) have equal
value and cost $\|g\|_1\|h\|/2$ (general $V$, symbolic sums); $d = 1$ and
$V = 2$ are special cases; the regular simplex reaches Jung's bound (I17).

**I15.** For centred $S$ inside a ball of radius $\eta/2$ around $c$:
$\langle G, S\rangle = \langle G, S - \mathbf 1c^\top\rangle \ge -\frac\eta2\sum_i\|g_i\|$
(Cauchy--Schwarz per row), attained by $-\frac\eta2 P\,\mathrm{RN}(PG)$.

**I16.** $\frac{\text{RN decrease}}{\eta T} = \frac{\sum\|g_i\|/2}{T} \ge \frac{1}{2J_k}
= \sqrt{\frac{k+1}{2k}}$ by Jung's bound of I17; $\le 1$ since
$D(S_{RN}) \le 2\,\mathrm{rad} \le \eta$; sharp on the regular simplex.

**I17.** $\Phi = P\,\mathrm{RN}(G)/D$ gives $T \ge \sum\|g_i\|/D(P\,\mathrm{RN}(G)) \ge \sum\|g_i\|/2$;
Jung (cited) puts the rows of a feasible $\Phi$ in a ball of radius $J_k$, so
$\langle G, \Phi\rangle = \langle G, \Phi - \mathbf 1c^\top\rangle \le J_k\sum\|g_i\|$; I11 gives
the balanced-flow bound.  Sharp: $d = 1$ (lower), regular simplex and $V = 2$ (upper).

**I18.** Column separation: $D_\infty(S) \le \eta$ iff every column has range
$\le \eta$, and each column is the $d = 1$ problem with value $\frac\eta2\|g\|_1$,
attained by $-\frac\eta2 P\operatorname{sign}(g)$; $x\operatorname{sign}(x) = |x|$;
$\operatorname{tr}(G^\top UV^\top) = \sum\sigma$.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

import hilbertgeom as hg
from hilbertgeom.tolerances import tolerance

from ._core import (
    SCREENED,
    SOLVER,
    Proof,
    diameter,
    gradient_pool,
    gradients,
    pair_distances,
    rank,
    register,
    row_norms,
    solve,
)

__all__ = ["IDENTITIES"]

IDENTITIES: dict = {}


def _phi_bound(V):
    """The I13 constant: centred potentials with D(Phi) <= 1 have ||phi_i|| <= (V - 1)/V."""
    return (V - 1) / V


def _rownorm_ratio(k):
    """The I16 constant sqrt((k + 1)/(2k))."""
    if isinstance(k, sp.Basic):
        return sp.sqrt((k + 1) / (2 * k))
    return math.sqrt((k + 1) / (2 * k))


def _kern(G) -> float:
    """Rounding of a sum of V d products (the inner products and norms below)."""
    return tolerance("kernel", d=int(np.size(G)) + 2).rtol


def certificate(G, res):
    """Re-certify a TensionResult from its arrays: ``(lower, upper, D(Phi))`` by
    brute force (no library kernel)."""
    G = np.asarray(G, dtype=np.float64)
    Gc = G - G.mean(axis=0)
    V = G.shape[0]
    Phi = np.asarray(res.potential, dtype=np.float64)
    D = diameter(Phi)
    val = float(np.sum(Gc * Phi))
    lower = val / D if D > 0 else 0.0
    div = np.zeros_like(Gc)
    I, J = res.flow.pairs[:, 0], res.flow.pairs[:, 1]
    np.add.at(div, I, res.flow.vectors)
    np.add.at(div, J, -res.flow.vectors)
    r = Gc - div
    # the residual routed by the balanced flow of I11: (1/V) sum_{i<j} ||r_i - r_j||, brute force
    upper = float(row_norms(res.flow.vectors).sum()) + float(pair_distances(r).sum()) / V
    return lower, upper, D


def _check_certificate(pf: Proof, G, res, label: str):
    """The solve's claims against its re-certified bounds, both ways."""
    lo, up, D = certificate(G, res)
    T = max(lo, 1e-300)
    k = _kern(G)
    pf.le(f"potential feasible: D(Phi) <= 1/{label}", D, 1.0, tol=k)
    pf.le(f"potential centred/{label}", float(np.abs(res.potential.sum(axis=0)).max()), 0.0,
          scale=1.0 + float(np.abs(res.potential).sum()), tol=k)
    pf.le(f"weak duality lower <= upper/{label}", lo, up, scale=T, tol=k)
    pf.le(f"reported value <= flow cost/{label}", res.value, up, scale=T, tol=k)
    pf.le(f"lower bound <= reported flow cost/{label}", lo, res.flow.cost, scale=T, tol=k)
    pf.eq(f"reported value = <G, Phi>/D(Phi)/{label}", res.value, lo, scale=T, tol=k)
    pf.eq(f"strong duality: certified gap closes/{label}", up, lo, scale=T, tol=SOLVER)
    return lo, up


def _simplex_gradient(k: int, zeros: int = 0) -> np.ndarray:
    """Centred regular k-simplex, unit edge, in R^k (the library's regular_simplex), plus zero rows.

    Only an input here: every reference value is a closed form of the rows'
    own norms (J_k sum ||g_i||, I14/I16/I17), which a non-regular simplex
    would miss, and I19 checks regular_simplex itself against brute force."""
    return np.vstack([hg.regular_simplex(k + 1, k), np.zeros((zeros, k))])


# --------------------------------------------------------------------------- I10
@register(IDENTITIES, "I10", "min <G,S> s.t. D(S) <= eta, 1^T S = 0 is -eta T(G); T = min tension of a balancing "
          "flow = max <G,Phi> over centred D(Phi) <= 1 (strong duality)",
          "arXiv 2608.22253 (v2), the minimum-tension dual; conic duality (Slater) [cited theorem]",
          "sympy: weak duality for general pairs; cited: strong conic duality; numeric: certificates re-checked by "
          "brute force, two cvxpy programs, steepest_descent feasible and optimal")
def _i10(pf: Proof, rng, quick, seed):
    V = 4
    y = {(i, j): sp.Symbol(f"y{i}{j}", real=True) for i in range(V) for j in range(i + 1, V)}
    Y = lambda i, j: y[(i, j)] if i < j else -y[(j, i)]  # noqa: E731
    phi = sp.symbols(f"f1:{V + 1}", real=True)
    g = [sum(Y(i, j) for j in range(V) if j != i) for i in range(V)]
    pf.zero("sum_i g_i phi_i = sum_{i<j} y_ij (phi_i - phi_j)",
            sum(g[i] * phi[i] for i in range(V)) - sum(y[(i, j)] * (phi[i] - phi[j]) for (i, j) in y))
    pf.zero("a balancing flow forces sum_i g_i = 0", sum(g))
    n, dd = sp.symbols("n D", nonnegative=True)
    a = sp.Symbol("a", nonnegative=True)
    pf.nonneg("<y, z> <= ||y|| ||z|| <= ||y|| D for ||z|| = D - a", n * dd - n * (dd - a))
    for kind, G in gradient_pool(seed, quick):
        res = solve(G, tol=1e-10)
        lo, up = _check_certificate(pf, G, res, f"alm/{kind}")
        if kind != "extreme-scale":
            for form in ("cvxpy-flow",) if quick else ("cvxpy-flow", "cvxpy-potential"):
                ref = hg.min_tension(G, method=form)
                rlo, rup, _ = certificate(G, ref)
                pf.le(f"{form} lower <= ALM upper/{kind}", rlo, up, scale=lo, tol=_kern(G))
                pf.le(f"ALM lower <= {form} upper/{kind}", lo, rup, scale=lo, tol=_kern(G))
                pf.eq(f"{form} value = ALM value/{kind}", ref.value, res.value, scale=lo, tol=SOLVER)
        eta = float(rng.uniform(0.1, 3.0))
        S = hg.steepest_descent(G, eta=eta, tension=res)
        pf.le(f"D(S) <= eta (brute force)/{kind}", diameter(S), eta, scale=eta, tol=_kern(G))
        pf.le(f"1^T S = 0/{kind}", float(np.abs(S.sum(axis=0)).max()), 0.0, scale=eta * G.shape[0], tol=_kern(G))
        dec = -float(np.sum((G - G.mean(axis=0)) * S))
        pf.le(f"decrease <= eta T (weak duality)/{kind}", dec, eta * up, scale=eta * lo, tol=_kern(G))
        pf.eq(f"decrease = eta T/{kind}", dec, eta * lo, scale=eta * lo, tol=SOLVER)


# --------------------------------------------------------------------------- I11
@register(IDENTITIES, "I11", "the balanced flow y_ij = (g_i - g_j)/V balances a zero-sum G, so "
          "T(G) <= (1/V) sum_{i<j} ||g_i - g_j|| (equality at V = 2)",
          "arXiv 2608.22253 (v2)",
          "sympy: balance for symbolic V; numeric: divergence by scatter-add, brute-force cost vs tension_bounds "
          "and the certified T, V = 2 witness")
def _i11(pf: Proof, rng, quick, seed):
    Vs = sp.Symbol("V", positive=True, integer=True)
    gi, tot = sp.symbols("g_i Sigma", real=True)  # Sigma = sum_j g_j
    pf.zero("sum_{j != i} (g_i - g_j)/V = g_i - Sigma/V, symbolic V",
            ((Vs - 1) * gi - (tot - gi)) / Vs - (gi - tot / Vs))
    pf.zero("... = g_i when Sigma = 0", (((Vs - 1) * gi - (tot - gi)) / Vs - gi).subs(tot, 0))
    for kind, G in [*gradient_pool(seed, quick), *gradients(rng, True, small=False)]:
        V, _d = G.shape
        iu, ju = np.triu_indices(V, 1)
        Y = (G[iu] - G[ju]) / V
        div = np.zeros_like(G)
        np.add.at(div, iu, Y)
        np.add.at(div, ju, -Y)
        sc = float(np.abs(G).max()) * V
        pf.le(f"balance (scatter-add)/{kind}", float(np.abs(div - G).max()), 0.0, scale=sc, tol=_kern(G))
        cost = float(pair_distances(G).sum()) / V
        b = hg.tension_bounds(G)
        pf.le(f"tension_bounds upper <= balanced cost/{kind}", b.upper, cost, scale=cost, tol=SCREENED)
        if b.upper_source.startswith("balanced"):
            pf.eq(f"balanced-flow bound = brute-force cost/{kind}", b.upper, cost, scale=cost, tol=SCREENED)
    for kind, G in gradient_pool(seed, quick):
        cost = float(pair_distances(G).sum()) / G.shape[0]
        pf.le(f"T <= balanced cost/{kind}", certificate(G, solve(G, tol=1e-10))[0], cost, scale=cost, tol=_kern(G))
    # d >= V - 1 Gaussian rows: the balanced flow beats Jung, so tension_bounds must report it
    for _ in range(2 if quick else 6):
        V = int(rng.integers(3, 9))
        G = rng.standard_normal((V, V + 8))
        G -= G.mean(axis=0)
        cost = float(pair_distances(G).sum()) / V
        b = hg.tension_bounds(G)
        jung = math.sqrt(rank(G) / (2 * (rank(G) + 1))) * float(row_norms(G).sum())
        pf.eq(f"upper = min(Jung, balanced) (brute force), V={V}", b.upper, min(cost, jung), scale=cost, tol=SCREENED)
    for _ in range(1 if quick else 3):
        g1 = rng.standard_normal(int(rng.integers(1, 5)))
        G = np.stack([g1, -g1])
        res = solve(G, tol=1e-10)
        lo, _up, _ = certificate(G, res)
        pf.eq("V = 2: T = balanced cost = ||g_1||", lo, float(np.linalg.norm(2 * g1)) / 2, tol=SOLVER)


# --------------------------------------------------------------------------- I12
@register(IDENTITIES, "I12", "an optimal flow with y_ij != 0 forces phi_i - phi_j = y_ij/||y_ij|| "
          "(the pair is stretched to the full diameter)",
          "arXiv 2608.22253 (v2), complementary slackness",
          "sympy: gap splits into non-negative pair slacks, deviation <= 2 slack/||y||; numeric: slacks of the "
          "certified solve re-computed from its arrays, every flow-carrying pair")
def _i12(pf: Proof, rng, quick, seed):
    zv = sp.Matrix(sp.symbols("z1:3", real=True))
    yv = sp.Matrix(sp.symbols("y1:3", positive=True))
    ny = sp.sqrt(yv.dot(yv))
    pf.zero("||z - y/||y||||^2 = ||z||^2 - 2<z, y>/||y|| + 1",
            (zv - yv / ny).dot(zv - yv / ny) - (zv.dot(zv) - 2 * zv.dot(yv) / ny + 1))
    c = sp.Symbol("c", real=True)  # c = <z, y>/||y||
    z2 = sp.Symbol("z2", nonnegative=True)  # ||z||^2 <= 1: z2 = 1 - s
    s = sp.Symbol("s", nonnegative=True)
    pf.nonneg("2(1 - c) - (||z||^2 - 2c + 1) = 1 - ||z||^2 >= 0", (2 * (1 - c) - (z2 - 2 * c + 1)).subs(z2, 1 - s))
    pf.zero("sum of slacks n(1 - c) over pairs = cost - value (V = 3)", _slack_identity())
    for kind, G in gradient_pool(seed, quick):
        for method in ("alm",):
            res = solve(G, tol=1e-10)
            lo, up, _ = certificate(G, res)
            Yv = res.flow.vectors
            if Yv.size == 0:
                continue
            nrm = row_norms(Yv)
            big = nrm > 1e-3 * nrm.max()
            I, J = res.flow.pairs[big, 0], res.flow.pairs[big, 1]
            Z = res.potential[I] - res.potential[J]
            U = Yv[big] / nrm[big, None]
            slack = nrm[big] - np.sum(Yv[big] * Z, axis=1)
            kt = tolerance("kernel", d=len(nrm) + G.shape[1]).rtol
            pf.le(f"the flow is optimal: certified gap closes/{method}/{kind}", up - lo, 0.0, scale=lo, tol=SOLVER)
            # complementary slackness: the pair slacks add up to at most the certified gap ...
            pf.le(f"sum of slacks <= certified gap/{method}/{kind}", float(slack.sum()), up - lo, scale=lo, tol=kt)
            pf.le(f"every slack >= 0 (Cauchy-Schwarz, D(Phi) <= 1)/{method}/{kind}", -float(slack.min()), 0.0,
                  scale=float(nrm.max()), tol=kt)
            # ... and each slack pins its pair: |z - y/|y||^2 <= 2 slack/|y|, |z| >= 1 - slack/|y|
            dev2 = np.sum((Z - U) ** 2, axis=1)
            pf.le(f"phi_i - phi_j = y/||y|| up to 2 slack/||y||/{method}/{kind}",
                  float((dev2 - 2 * slack / nrm[big]).max()), 0.0, scale=1.0, tol=kt)
            pf.le(f"active pairs stretched: ||phi_i - phi_j|| >= 1 - slack/||y||/{method}/{kind}",
                  float((1 - slack / nrm[big] - row_norms(Z)).max()), 0.0, scale=1.0, tol=kt)
            pf.le(f"slacks vanish with the gap: max slack/||y|| <= gap/min||y||/{method}/{kind}",
                  float((slack / nrm[big]).max()), (up - lo) / float(nrm[big].min()), scale=1.0, tol=kt)

def _slack_identity():
    V = 3
    y = {(i, j): sp.Matrix(sp.symbols(f"y{i}{j}_1:3", real=True)) for i in range(V) for j in range(i + 1, V)}
    phi = [sp.Matrix(sp.symbols(f"f{i}_1:3", real=True)) for i in range(V)]
    nn = {e: sp.Symbol(f"n{e[0]}{e[1]}", positive=True) for e in y}  # the norms, as symbols
    g = [sum((y[(i, j)] if i < j else -y[(j, i)] for j in range(V) if j != i), sp.zeros(2, 1)) for i in range(V)]
    value = sum(g[i].dot(phi[i]) for i in range(V))
    cost = sum(nn.values())
    slacks = sum(nn[e] - y[e].dot(phi[e[0]] - phi[e[1]]) for e in y)
    return cost - value - slacks


# --------------------------------------------------------------------------- I13
@register(IDENTITIES, "I13", "centred potentials with D(Phi) <= 1 have ||phi_i|| <= (V-1)/V <= 1; "
          "sharp on the star gradient",
          "arXiv 2608.22253 (v2)",
          "sympy: centring identity, (V-1)/V <= constant <= 1 decided for symbolic V; numeric: optimal and random "
          "feasible potentials (brute-force D), star-gradient witness")
def _i13(pf: Proof, rng, quick, seed):
    f = sp.symbols("f1:6", real=True)
    mean = sum(f) / 5
    for i in range(5):
        pf.zero(f"phi_{i} - mean = (1/V) sum_j (phi_i - phi_j), V = 5",
                (f[i] - mean) - sum(f[i] - f[j] for j in range(5)) / 5)
    _V, w = sp.symbols("V w", positive=True)
    Vv = 2 + w  # V >= 2
    pf.nonneg("constant - (V-1)/V >= 0 (the triangle bound (1/V) sum_{j != i} 1)", _phi_bound(Vv) - (Vv - 1) / Vv)
    pf.nonneg("1 - constant >= 0", 1 - _phi_bound(Vv))
    for kind, G in gradient_pool(seed, quick):
        Vn = G.shape[0]
        res = solve(G, tol=1e-10)
        P = res.potential
        D = diameter(P)
        pf.le(f"optimal potential: max ||phi_i|| <= (V-1)/V D(Phi)/{kind}", float(row_norms(P).max()),
              float(_phi_bound(Vn)) * D, tol=_kern(G))
        Z = rng.integers(-50, 50, G.shape).astype(float)
        Z[rng.integers(0, Vn, Vn // 2)] = Z[0]
        Q = Vn * Z - Z.sum(axis=0)  # centred exactly (integers), duplicates included
        DQ = diameter(Q)
        if DQ > 0:
            pf.le(f"random centred potential/{kind}", float(row_norms(Q).max()) / DQ, float(_phi_bound(Vn)),
                  tol=_kern(G))
    for Vn in (3, 6) if quick else (2, 3, 5, 9):
        for d in (2,) if quick else (1, 3):
            h = rng.standard_normal(d)
            G = np.tile(-h, (Vn, 1))
            G[0] = (Vn - 1) * h  # the star: every token pushes against token 0
            res = solve(G, tol=1e-10)
            ph = float(np.linalg.norm(res.potential[0]))
            pf.eq(f"star witness attains (V-1)/V, V={Vn} d={d}", ph, float(_phi_bound(Vn)), tol=SOLVER)


# --------------------------------------------------------------------------- I14
@register(IDENTITIES, "I14", "closed forms: rank one T(g h^T) = ||g||_1 ||h|| / 2; d = 1: ||g||_1/2; V = 2: ||g_1||; "
          "regular simplex: T = J_k sum ||g_i||",
          "arXiv 2608.22253 (v2); Jung (1901) for the simplex [cited theorem]",
          "sympy: matching potential and transport flow for symbolic sums, simplex values for general k; "
          "numeric: re-certified min_tension bracket vs the closed forms, tension_bounds sharp on the simplex")
def _i14(pf: Proof, rng, quick, seed):
    m, hn = sp.symbols("m h", positive=True)  # m = sum g+ = sum g- = ||g||_1/2, h = ||h||
    gi, _gj = sp.symbols("g_i g_j", positive=True)  # g_i = g+_i > 0, g_j = g-_j > 0
    pf.zero("flow y_ij = g+_i g-_j h/m: out of i, sum_j g-_j = m, gives g+_i h", gi * m * hn / m - gi * hn)
    pf.zero("flow cost sum_ij g+_i g-_j ||h||/m = m ||h|| (sum_i g+_i = m)", m * m * hn / m - m * hn)
    pf.zero("potential value: sum g+ h/2 + sum g- h/2 = m ||h||", m * hn / 2 + m * hn / 2 - m * hn)
    pf.zero("potential diameter: ||h/(2||h||) + h/(2||h||)|| = 1", hn / (2 * hn) * 2 - 1)
    k = sp.Symbol("k", positive=True, integer=True)
    nrm = sp.sqrt(k / (k + 1))  # ||v_i|| for the centred simplex with edge sqrt(2)
    pf.zero("simplex: <G, G/edge> = (k+1) ||v||^2/sqrt(2) = J_k (k+1) ||v||, any k",
            (k + 1) * nrm**2 / sp.sqrt(2) - sp.sqrt(k / (2 * (k + 1))) * (k + 1) * nrm)
    for _ in range(1 if quick else 3):
        V = int(rng.integers(2, 12))
        g = rng.standard_normal(V)
        g -= g.mean()
        h = rng.standard_normal(int(rng.integers(1, 5)))
        for name, G, want in (("rank one", np.outer(g, h), float(np.abs(g).sum() * np.linalg.norm(h) / 2)),
                              ("d = 1", g[:, None], float(np.abs(g).sum() / 2)),
                              ("V = 2", np.stack([h, -h]), float(np.linalg.norm(h)))):
            res = solve(G, tol=1e-10)
            lo, up, _ = certificate(G, res)
            pf.le(f"{name}: certified lower <= closed form", lo, want, scale=want, tol=_kern(G))
            pf.le(f"{name}: closed form <= certified upper", want, up, scale=want, tol=_kern(G))
            pf.eq(f"{name}: value = closed form", res.value, want, scale=want, tol=SOLVER)
    for kk in range(1, 4 if quick else 8):
        S = _simplex_gradient(kk, zeros=2)
        want = math.sqrt(kk / (2 * (kk + 1))) * float(row_norms(S).sum())
        res = solve(S, tol=1e-10)
        lo, up, _ = certificate(S, res)
        pf.le(f"simplex k={kk}: certified lower <= J_k sum", lo, want, scale=want, tol=_kern(S))
        pf.le(f"simplex k={kk}: J_k sum <= certified upper", want, up, scale=want, tol=_kern(S))
        pf.eq(f"simplex k={kk}: value = J_k sum", res.value, want, scale=want, tol=SOLVER)
        pf.eq(f"simplex k={kk}: tension_bounds upper attains", hg.tension_bounds(S).upper, want, scale=want,
              tol=SCREENED)


# --------------------------------------------------------------------------- I15
def _projected_rownorm_reference(G, eta, center):
    """-(eta/2) P RN(P G) from the documented rule, independently: rows of P G that
    are zero up to the centring's rounding (norm <= 4u ||sum_i |g_i| ||), or zero in
    G without ``center``, count as zero."""
    G = np.asarray(G, dtype=np.float64)
    X = G - G.mean(axis=0)
    n = row_norms(X)
    noise = 4.0 * 2.0**-53 * float(np.linalg.norm(np.abs(G).sum(axis=0)))
    nz = n > noise
    if not center:
        nz &= np.any(G != 0, axis=1)
    N = np.zeros_like(X)
    N[nz] = X[nz] / n[nz, None]
    return -(eta / 2.0) * (N - N.mean(axis=0)), N, float(n[nz].sum())


@register(IDENTITIES, "I15", "projected RowNorm S = -(eta/2) P RN(P G) minimises <G,S> over centred S with "
          "rad(S) <= eta/2; decrease (eta/2) sum ||g_i||",
          "arXiv 2608.22253 (v2)",
          "sympy: the Cauchy-Schwarz lower bound per row and the shift; numeric: the rule recomputed, centring, "
          "an explicit ball, cvxpy radius program (centred and uncentred G)")
def _i15(pf: Proof, rng, quick, seed):
    g = sp.Matrix(sp.symbols("g1:4", real=True))
    eta = sp.Symbol("eta", positive=True)
    nrm = sp.sqrt(g.dot(g))
    pf.zero("<g, -(eta/2) g/||g||> = -(eta/2) ||g||", g.dot(-(eta / 2) * g / nrm) + (eta / 2) * nrm)
    G = sp.Matrix(3, 2, sp.symbols("a1:7", real=True))
    G = G.row_insert(3, -(G.row(0) + G.row(1) + G.row(2)))
    c = sp.Matrix(sp.symbols("c1:3", real=True))
    pf.zero("<G, 1 c^T> = 0 for zero-sum G", (sp.ones(1, 4) * G * c)[0])
    n_, _r, t = sp.symbols("n r t", nonnegative=True)  # <g, x> >= -||g|| ||x|| >= -||g|| eta/2 for ||x|| = eta/2 - t
    pf.nonneg("-||g|| ||x|| + ||g|| eta/2 >= 0 for ||x|| <= eta/2", -n_ * (eta / 2 - t) + n_ * eta / 2)
    import cvxpy as cp

    for kind, G in gradient_pool(seed, quick):
        for center in (False, True):
            Gin = G + (rng.standard_normal(G.shape[1]) if center else 0.0)  # uncentred input, projected by the call
            e = float(rng.uniform(0.1, 3.0))
            S = hg.projected_rownorm(Gin, eta=e, center=center)
            ref, N, tot = _projected_rownorm_reference(Gin, e, center)
            pf.eq(f"S = -(eta/2) P RN(P G) (recomputed), center={center}/{kind}", float(np.abs(S - ref).max()), 0.0,
                  scale=e, tol=_kern(G))
            pf.le(f"1^T S = 0, center={center}/{kind}", float(np.abs(S.sum(axis=0)).max()), 0.0,
                  scale=e * G.shape[0], tol=_kern(G))
            Gc = Gin - Gin.mean(axis=0)
            want = e / 2 * tot
            # <P G, 1 m^T> vanishes up to the centring's rounding, relative to the input's entries
            pf.eq(f"decrease = (eta/2) sum ||g_i||, center={center}/{kind}", -float(np.sum(Gc * S)), want,
                  scale=1e-300 + want + e / 2 * float(np.abs(Gin).sum()), tol=_kern(G))
            ctr = e / 2 * N.mean(axis=0)  # every row is at distance eta/2 from this centre, or closer
            pf.le(f"rad(S) <= eta/2 by an explicit ball, center={center}/{kind}",
                  float(row_norms(S - ctr).max()), e / 2, scale=e, tol=_kern(G))
        if kind == "extreme-scale" or not np.any(G):  # G = 0: S = 0 above, nothing to optimise
            continue
        V, d = G.shape
        Gs = G / float(np.abs(G).max())
        e = 1.0
        X = cp.Variable((V, d))
        cc = cp.Variable((1, d))
        prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(Gs, X))),
                          [cp.sum(X, axis=0) == 0, cp.norm(X - np.ones((V, 1)) @ cc, 2, axis=1) <= e / 2])
        prob.solve(solver=cp.CLARABEL)
        want = e / 2 * float(row_norms(Gs).sum())
        S = hg.projected_rownorm(Gs, eta=e)
        pf.eq(f"optimal: cvxpy radius program = projected RowNorm/{kind}", -float(prob.value),
              -float(np.sum(Gs * S)), scale=1e-300 + want, tol=SOLVER)


# --------------------------------------------------------------------------- I16
@register(IDENTITIES, "I16", "sqrt((k+1)/(2k)) <= RowNorm decrease / optimal decrease <= 1, k = rank G; "
          "sharp on the centred regular k-simplex (plus zero rows)",
          "arXiv 2608.22253 (v2); Jung (1901) through I17 [cited theorem]",
          "sympy: (1/2)/J_k = constant, decided decreasing in k with limit 1/sqrt(2); numeric: re-certified T, "
          "projected_rownorm decrease, simplex witnesses")
def _i16(pf: Proof, rng, quick, seed):
    k = sp.Symbol("k", positive=True, integer=True)
    J = sp.sqrt(k / (2 * (k + 1)))
    pf.zero("constant^2 = ((1/2)/J_k)^2", _rownorm_ratio(k) ** 2 - (sp.Rational(1, 2) / J) ** 2)
    pf.positive("constant > 0", _rownorm_ratio(k))
    pf.nonneg("constant <= 1: 1 - (k+1)/(2k) = (k-1)/(2k) >= 0", 1 - _rownorm_ratio(k) ** 2)
    pf.true("constant -> 1/sqrt(2) as k -> oo", sp.limit(_rownorm_ratio(k), k, sp.oo) == 1 / sp.sqrt(2))
    for kind, G in gradient_pool(seed, quick):
        kk = rank(G, rtol=1e-10)
        if kk == 0:
            continue
        res = solve(G, tol=1e-10)
        lo, up, _ = certificate(G, res)
        eta = float(rng.uniform(0.1, 2.0))
        S = hg.projected_rownorm(G, eta=eta)
        ratio_lo = -float(np.sum(G * S)) / (eta * up)
        ratio_hi = -float(np.sum(G * S)) / (eta * lo)
        pf.le(f"ratio >= constant/{kind}", _rownorm_ratio(kk), ratio_hi, tol=_kern(G))
        pf.le(f"ratio <= 1/{kind}", ratio_lo, 1.0, tol=_kern(G))
    for kk in range(1, 5 if quick else 8):
        G = np.vstack([_simplex_gradient(kk), np.zeros((2, kk))])
        res = solve(G, tol=1e-10)
        lo, up, _ = certificate(G, res)
        S = hg.projected_rownorm(G, eta=1.0)
        dec = -float(np.sum(G * S))
        pf.eq(f"sharp on the simplex + zero rows, k={kk}", dec / lo, float(_rownorm_ratio(kk)), tol=SOLVER)


# --------------------------------------------------------------------------- I17
@register(IDENTITIES, "I17", "sum ||g_i||/2 <= T(G) <= min(J_k sum ||g_i||, balanced-flow cost); sharp: "
          "d = 1 (lower), regular simplex and V = 2 (upper)",
          "arXiv 2608.22253 (v2); Jung (1901) [cited theorem]",
          "cited theorem (Jung); sympy: the shift step and the RowNorm potential; numeric: tension_bounds against "
          "brute-force formulas and the re-certified T, sharp witnesses")
def _i17(pf: Proof, rng, quick, seed):
    G = sp.Matrix(2, 2, sp.symbols("a1:5", real=True))
    G = G.row_insert(2, -(G.row(0) + G.row(1)))
    P = sp.Matrix(3, 2, sp.symbols("f1:7", real=True))
    c = sp.Matrix(sp.symbols("c1:3", real=True))
    pf.zero("<G, Phi> = <G, Phi - 1 c^T> (zero-sum G)",
            sum(G[i, j] * P[i, j] for i in range(3) for j in range(2))
            - sum(G[i, j] * (P[i, j] - c[j]) for i in range(3) for j in range(2)))
    n_ = sp.Symbol("n", positive=True)
    t = sp.Symbol("t", nonnegative=True)
    pf.nonneg("RowNorm potential: n/D - n/2 >= 0 for D = 2/(1 + t) <= 2 (unit rows)", n_ / (2 / (1 + t)) - n_ / 2)
    for kind, G in gradient_pool(seed, quick):
        b = hg.tension_bounds(G)
        res = solve(G, tol=1e-10)
        lo, up, _ = certificate(G, res)
        tot = float(row_norms(G).sum())
        # Jung with a rank that counts every singular value the library's rule could count
        kk = rank(G, rtol=max(G.shape) * 2.0**-55)
        N = np.zeros_like(G)
        nz = row_norms(G) > 0
        N[nz] = G[nz] / row_norms(G)[nz, None]
        Pn = N - N.mean(axis=0)
        Dn = diameter(Pn)
        rn_lower = float(np.sum(G * Pn)) / Dn if Dn > 0 else 0.0
        cost = float(pair_distances(G).sum()) / G.shape[0]
        jung = math.sqrt(kk / (2 * (kk + 1))) * tot
        pf.le(f"sum/2 <= lower/{kind}", tot / 2, b.lower, scale=tot, tol=_kern(G))
        pf.eq(f"lower = <G, P RN(G)>/D (brute force)/{kind}", b.lower, rn_lower, scale=tot, tol=_kern(G))
        pf.le(f"lower <= T/{kind}", b.lower, up, scale=tot, tol=_kern(G))
        pf.le(f"T <= upper/{kind}", lo, b.upper, scale=tot, tol=_kern(G))
        pf.le(f"upper <= min(Jung, balanced)/{kind}", b.upper, min(jung, cost), scale=tot, tol=SCREENED)
    for _ in range(3):
        g = rng.standard_normal(int(rng.integers(3, 10)))
        g -= g.mean()
        b = hg.tension_bounds(g[:, None])
        want = float(np.abs(g).sum()) / 2
        pf.eq("d = 1: lower = sum |g_i| / 2 = T (sharp)", b.lower, want, scale=2 * want, tol=_kern(g))
    for kk in range(1, 4 if quick else 8):
        S = _simplex_gradient(kk)
        want = math.sqrt(kk / (2 * (kk + 1))) * float(row_norms(S).sum())
        pf.eq(f"simplex k={kk}: upper = J_k sum (sharp)", hg.tension_bounds(S).upper, want, scale=want, tol=SCREENED)
    h = rng.standard_normal(3)
    b = hg.tension_bounds(np.stack([h, -h]))
    pf.eq("V = 2: upper = ||g_1|| (sharp)", b.upper, float(np.linalg.norm(h)), tol=SCREENED)


# --------------------------------------------------------------------------- I18
@register(IDENTITIES, "I18", "steepest directions: row-l_inf diameter -> centred column sign -(eta/2) P sign(G), "
          "decrease (eta/2) ||G||_1; RowNorm, Sign and the polar factor attain their dual norms",
          "arXiv 2608.22253 (v2); Scion, Muon",
          "sympy: x sign(x) = |x|, tr(G^T U V^T) = sum sigma; numeric: formulas recomputed, brute-force l_inf "
          "diameter and centring, dual norms by SVD, random feasible competitors")
def _i18(pf: Proof, rng, quick, seed):
    x = sp.Symbol("x", real=True)
    pf.zero("g sign(g) = |g|", sp.simplify(x * sp.sign(x) - sp.Abs(x)))
    s1, s2, th, ph = sp.symbols("sigma1 sigma2 theta phi", real=True)
    Ur = sp.Matrix([[sp.cos(th), -sp.sin(th)], [sp.sin(th), sp.cos(th)]])
    Vr = sp.Matrix([[sp.cos(ph), -sp.sin(ph)], [sp.sin(ph), sp.cos(ph)]])
    Gm = Ur * sp.diag(s1, s2) * Vr.T
    pf.zero("tr(G^T U V^T) = sigma1 + sigma2", sp.simplify((Gm.T * Ur * Vr.T).trace() - (s1 + s2)))
    a, b, _r = sp.symbols("a b r", real=True)
    u = sp.Symbol("u", nonnegative=True)
    pf.nonneg("column range <= eta: a_i - a_j <= max - min", (b - a).subs(b, a + u))
    for kind, G in gradients(rng, quick, small=False):
        eta = float(rng.uniform(0.1, 3.0))
        l1 = float(np.abs(G).sum())
        S = hg.linf_steepest_descent(G, eta=eta)
        sg = np.sign(G)
        pf.eq(f"S = -(eta/2) P sign(G)/{kind}", float(np.abs(S + eta / 2 * (sg - sg.mean(axis=0))).max()), 0.0,
              scale=eta)
        pf.le(f"1^T S = 0/{kind}", float(np.abs(S.sum(axis=0)).max()), 0.0, scale=eta * G.shape[0], tol=_kern(G))
        pf.le(f"D_inf(S) <= eta (column ranges)/{kind}", float((S.max(axis=0) - S.min(axis=0)).max()), eta,
              scale=eta)
        pf.le(f"D_inf(S) <= eta (brute force over pairs)/{kind}", diameter(S, ord=np.inf), eta, scale=eta)
        dec = -float(np.sum(G * S))
        pf.eq(f"decrease = (eta/2) ||G||_1/{kind}", dec, eta / 2 * l1, scale=1e-300 + eta * l1, tol=_kern(G))
        for _ in range(3):  # any centred competitor with D_inf <= eta decreases less
            C = rng.standard_normal(G.shape)
            C -= C.mean(axis=0)
            C *= eta / max(diameter(C, ord=np.inf), 1e-300)
            pf.le(f"competitor decrease <= (eta/2)||G||_1/{kind}", -float(np.sum(G * C)), eta / 2 * l1,
                  scale=1e-300 + eta * l1, tol=_kern(G))
        for name, rule, norm, dual in (
            ("Sign", hg.sign_update, lambda X: float(np.abs(X).max()), l1),
            ("RowNorm", hg.rownorm_update, lambda X: float(row_norms(X).max()), float(row_norms(G).sum())),
            ("polar", hg.polar_update, lambda X: float(np.linalg.norm(X, 2)),
             float(np.linalg.svd(G, compute_uv=False).sum())),
        ):
            Up = rule(G, eta=eta)
            pf.le(f"{name}: norm <= eta/{kind}", norm(Up), eta, scale=eta, tol=_kern(G))
            pf.eq(f"{name}: attains eta x dual norm/{kind}", -float(np.sum(G * Up)), eta * dual,
                  scale=1e-300 + eta * dual, tol=_kern(G))
