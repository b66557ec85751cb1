"""Numeric verification of the identities (``hilbertgeom verify``).

Each check draws seeded random and adversarial instances, measures the worst
residual (for an equality) or violation (for an inequality), relative to the
scale of the quantities involved, and compares it with the tolerance policy of
:mod:`hilbertgeom.tolerances`.  A sharpness claim is checked on its witness:
the witness must attain the bound to within the tolerance.

The rows are registered in :data:`CHECKS`; later components add theirs with
:func:`register`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from .ball import jung_radius, minimum_enclosing_ball
from .head import (
    backward_bound,
    backward_change,
    backward_change_bound,
    backward_witness,
    cross_entropy_backward_bound,
    head_norm,
    worst_case_hidden,
)
from .metric import (
    birkhoff_contraction,
    hilbert_distance,
    softmax_hilbert_distance,
    total_variation,
    tv_bound,
    tv_extremal_pair,
    variation_norm,
)
from .rows import closest_pair, row_diameter
from .tolerances import tolerance

__all__ = ["CHECKS", "CheckResult", "register", "run_checks"]


@dataclass(frozen=True)
class CheckResult:
    """One row of the verification table.

    ``worst`` is the largest normalised residual or violation seen over
    ``trials`` instances; the row passes when ``worst <= tol``.
    """

    identity: str
    statement: str
    method: str
    trials: int
    worst: float
    tol: float
    passed: bool
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Acc:
    """Accumulates normalised residuals: ``|excess| / scale``."""

    worst: float = 0.0
    trials: int = 0
    where: str = ""
    notes: list[str] = field(default_factory=list)

    def eq(self, a: float, b: float, label: str = "", scale: float | None = None) -> None:
        """An equality ``a == b``."""
        s = max(1.0, abs(a), abs(b)) if scale is None else max(scale, 1e-300)
        r = abs(float(a) - float(b)) / s
        self._add(r, label)

    def le(self, a: float, b: float, label: str = "", scale: float | None = None) -> None:
        """An inequality ``a <= b``; records the violation ``max(a - b, 0)``."""
        s = max(1.0, abs(a), abs(b)) if scale is None else max(scale, 1e-300)
        r = max(float(a) - float(b), 0.0) / s
        if math.isnan(r):
            r = math.inf
        self._add(r, label)

    def _add(self, r: float, label: str) -> None:
        self.trials += 1
        if not r <= self.worst:
            self.worst = r
            self.where = label


@dataclass(frozen=True)
class _Check:
    identity: str
    statement: str
    method: str
    run: Callable[[np.random.Generator, bool], _Acc]
    tol: float


CHECKS: list[_Check] = []


def register(identity: str, statement: str, method: str, tol: float | None = None):
    """Decorator adding a check ``f(rng, quick) -> _Acc`` to :data:`CHECKS`."""

    def deco(f):
        CHECKS.append(_Check(identity, statement, method, f,
                             tolerance("exact").rtol if tol is None else tol))
        return f

    return deco


# --------------------------------------------------------------------------- instances
def _simplex_points(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "dirichlet":
        return rng.dirichlet(np.full(n, 0.5))
    if kind == "lognormal":  # heavy tails: ratios up to e^40
        return np.exp(rng.normal(0.0, 8.0, n))
    if kind == "tiny":  # entries near the bottom of float64
        return np.exp(rng.uniform(-700.0, -600.0, n))
    if kind == "near":  # nearly equal vectors are made by the caller
        return rng.uniform(0.5, 1.5, n)
    raise AssertionError(kind)


_KINDS = ("dirichlet", "lognormal", "tiny", "near")


def _pairs(rng, quick):
    reps = 6 if quick else 40
    for kind in _KINDS:
        for _ in range(reps):
            n = int(rng.integers(2, 12))
            p = _simplex_points(rng, n, kind)
            if kind == "near":
                q = p * (1.0 + 1e-9 * rng.standard_normal(n))
            else:
                q = _simplex_points(rng, n, kind)
            yield kind, p, q


def _clouds(rng, quick):
    """Random and adversarial row clouds: Gaussian, offset float32, near-duplicates,
    duplicates and zero rows, rank-deficient."""
    reps = 3 if quick else 12
    for _ in range(reps):
        V, d = int(rng.integers(2, 40)), int(rng.integers(1, 9))
        yield "gaussian", rng.standard_normal((V, d))
        X = (rng.standard_normal((V, d)) + 1e4).astype(np.float32)
        yield "offset-f32", X
        Y = rng.standard_normal((V, d))
        Y[1:] = Y[0] + 1e-7 * rng.standard_normal((V - 1, d))
        yield "near-duplicates", Y
        Z = rng.standard_normal((V, d))
        Z[: V // 2] = 0.0
        yield "zero-rows", Z
        k = int(rng.integers(1, d + 1))
        yield "low-rank", rng.standard_normal((V, k)) @ rng.standard_normal((k, d))


def _regular_simplex(k: int) -> np.ndarray:
    """Vertices of a regular k-simplex with unit edges, in R^(k+1)."""
    return np.eye(k + 1) / math.sqrt(2.0)


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


# --------------------------------------------------------------------------- I1-I5
@register("I1", "H(p,q) = max log(p/q) - min log(p/q) = max log-odds change; projective; metric",
          "numeric: brute-force log-odds, scaling, triangle")
def _i1(rng, quick):
    acc = _Acc()
    for kind, p, q in _pairs(rng, quick):
        h = hilbert_distance(p, q)
        lp, lq = np.log(p), np.log(q)
        brute = max(abs((lp[i] - lp[j]) - (lq[i] - lq[j])) for i in range(len(p)) for j in range(len(p)))
        acc.eq(h, brute, f"log-odds/{kind}", scale=1.0 + brute)
        lo = 0 if kind == "tiny" else -100  # keep a p and b q inside float64's range
        a, b = 10.0 ** rng.uniform(lo, 100, 2)
        # the logs of a p / b q carry the common offset log(a/b): rounding is relative to it
        shift = abs(math.log(a / b)) + float(np.abs(np.log(p / q)).max())
        acc.eq(hilbert_distance(a * p, b * q), h, f"projective/{kind}", scale=1.0 + shift)
        acc.eq(hilbert_distance(q, p), h, f"symmetry/{kind}", scale=1.0 + h)
        acc.eq(hilbert_distance(p, a * p), 0.0, f"identity/{kind}", scale=1.0 + abs(math.log(a)))
        r = _simplex_points(rng, len(p), "dirichlet")
        acc.le(hilbert_distance(p, r), h + hilbert_distance(q, r), f"triangle/{kind}", scale=1.0 + h)
    return acc


@register("I2", "H(softmax z, softmax z') = var(z - z'); var(x + c1) = var(x)",
          "numeric: probabilities vs logits; logits to 1e4")
def _i2(rng, quick):
    acc = _Acc()
    for _ in range(20 if quick else 200):
        n = int(rng.integers(2, 30))
        z, z2 = rng.normal(0, 10, n), rng.normal(0, 10, n)
        v = variation_norm(z - z2)
        acc.eq(hilbert_distance(_softmax(z), _softmax(z2)), v, "isometry", scale=1.0 + v)
        acc.eq(softmax_hilbert_distance(z, z2), v, "logit form", scale=1.0 + v)
        c = rng.normal(0, 1e3)
        acc.eq(variation_norm(z + c), variation_norm(z), "shift", scale=1.0 + abs(c))
        big = rng.uniform(-1e4, 1e4, n)
        exact = float(big.max() - big.min())
        acc.eq(softmax_hilbert_distance(big, np.zeros(n)), exact, "logits 1e4", scale=1.0 + exact)
    return acc


@register("I3", "min dl <= 0 <= max dl, H = max dl - min dl, |log p_c - log q_c| <= H",
          "numeric: all classes c")
def _i3(rng, quick):
    acc = _Acc()
    for kind, p, q in _pairs(rng, quick):
        p, q = p / p.sum(), q / q.sum()
        dl = np.log(q) - np.log(p)
        h = hilbert_distance(p, q)
        acc.eq(float(dl.max() - dl.min()), h, f"H form/{kind}", scale=1.0 + h)
        acc.le(float(dl.min()), 0.0, f"min<=0/{kind}")
        acc.le(0.0, float(dl.max()), f"max>=0/{kind}")
        for c in range(len(p)):
            acc.le(abs(float(np.log(p[c]) - np.log(q[c]))), h, f"class bound/{kind}", scale=1.0 + h)
    return acc


@register("I4", "TV(p,q) <= tanh(H/4), sharp on the two-point witness",
          "numeric: random pairs + witness h in [1e-8, 700]")
def _i4(rng, quick):
    acc = _Acc()
    for kind, p, q in _pairs(rng, quick):
        acc.le(total_variation(p, q), tv_bound(hilbert_distance(p, q)), f"bound/{kind}")
    hs = [1e-8, 1e-3, 0.5, 1.0, 4.0, 20.0, 100.0, 700.0] + list(rng.uniform(0, 50, 10 if quick else 100))
    for h in hs:
        p, q = tv_extremal_pair(h)
        acc.eq(hilbert_distance(p, q), h, f"witness H, h={h:g}", scale=1.0 + h)
        acc.eq(total_variation(p, q), tv_bound(h), f"witness TV, h={h:g}")
    return acc


@register("I5", "H(Ax, Ay) <= tanh(Delta(A)/4) H(x, y), Delta by cross-ratios",
          "numeric: brute-force cross-ratios, random x, y")
def _i5(rng, quick):
    acc = _Acc()
    for _ in range(10 if quick else 60):
        n, m = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        A = np.exp(rng.normal(0, 2, (n, m)))
        c = birkhoff_contraction(A)
        brute = 0.0
        for i, j, k, l in itertools.product(range(n), range(n), range(m), range(m)):
            brute = max(brute, math.log(A[i, k] * A[j, l] / (A[i, l] * A[j, k])))
        acc.eq(c.diameter, brute, "Delta vs cross-ratios", scale=1.0 + brute)
        for _ in range(10):
            x, y = np.exp(rng.normal(0, 3, m)), np.exp(rng.normal(0, 3, m))
            hxy = hilbert_distance(x, y)
            acc.le(hilbert_distance(A @ x, A @ y), c.ratio * hxy, "contraction", scale=1.0 + hxy)
    return acc


# --------------------------------------------------------------------------- I6-I9
_DUALS = ((2, 2), ("inf", 1), (1, "inf"))


@register("I6", "sup_{||h||<=R} H(p_{U+S}(h), p_U(h)) = R D(S), sharp; dual norms",
          "numeric: random h, U; worst-case h attains")
def _i6(rng, quick):
    acc = _Acc()
    for kind, S in _clouds(rng, quick):
        S = np.asarray(S, dtype=np.float64)
        V, d = S.shape
        U = rng.normal(0, 3, (V, d))
        R = float(rng.uniform(0.1, 5.0))
        for hn, rn in _DUALS:
            hn_val = {2: 2, "inf": np.inf, 1: 1}[hn]
            bound = head_norm(S, hidden_norm=hn, radius=R)
            acc.eq(bound, R * row_diameter(S, norm=rn), f"dual norm {hn}/{kind}", scale=1.0 + bound)
            h = worst_case_hidden(S, hidden_norm=hn, radius=R)
            acc.eq(float(np.linalg.norm(h, ord=hn_val)), R, f"witness norm {hn}/{kind}", scale=1.0 + R)
            attained = softmax_hilbert_distance((U + S) @ h, U @ h)
            acc.eq(attained, bound, f"sharp {hn}/{kind}", scale=1.0 + bound + R * float(np.abs(S).sum()))
            for _ in range(3):
                g = rng.standard_normal(d)
                g *= R * rng.uniform(0, 1) / max(np.linalg.norm(g, ord=hn_val), 1e-300)
                val = hilbert_distance(_softmax((U + S) @ g), _softmax(U @ g))
                acc.le(val, bound, f"bound {hn}/{kind}", scale=1.0 + bound + R * float(np.abs(S).sum()))
    return acc


@register("I7", "D(S + 1a^T) = D(S); D <= 2 rad <= 2 J_k D; rad = J_k D on the simplex",
          "numeric: minimum enclosing ball with certificate; regular simplex")
def _i7(rng, quick):
    acc = _Acc()
    for kind, S in _clouds(rng, quick):
        S = np.asarray(S, dtype=np.float64)
        D = row_diameter(S)
        a = rng.normal(0, 100, S.shape[1])
        acc.eq(row_diameter(S + a), D, f"shift/{kind}", scale=1.0 + D + float(np.abs(a).max()))
        ball = minimum_enclosing_ball(S)
        acc.le(ball.gap, 0.0, f"ball certificate/{kind}", scale=1.0 + ball.radius)
        acc.le(D, 2.0 * ball.radius, f"D <= 2 rad/{kind}", scale=1.0 + D)
        k = int(np.linalg.matrix_rank(S - S.mean(axis=0), tol=1e-9 * max(D, 1e-300))) if D > 0 else 0
        acc.le(ball.lower, jung_radius(k) * D, f"Jung/{kind}", scale=1.0 + D)
    for k in range(1, 7 if quick else 12):
        P = _regular_simplex(k) * rng.uniform(0.5, 3.0)
        D = row_diameter(P)
        ball = minimum_enclosing_ball(P)
        acc.eq(ball.radius, jung_radius(k) * D, f"simplex k={k}", scale=1.0 + D)
    return acc


@register("I8", "||S^T r|| <= D(S) ||r||_1 / 2 (1^T r = 0), sharp; CE: <= D(S)(1 - p_c)",
          "numeric: random zero-sum r, softmax gradients; e_i - e_j witness")
def _i8(rng, quick):
    acc = _Acc()
    for kind, S in _clouds(rng, quick):
        S = np.asarray(S, dtype=np.float64)
        V = S.shape[0]
        scale = 1.0 + row_diameter(S) + float(np.abs(S).max())
        for _ in range(3):
            r = rng.standard_normal(V)
            r -= r.mean()
            acc.le(float(np.linalg.norm(S.T @ r)), backward_bound(S, r), f"zero-sum/{kind}",
                   scale=scale * (1.0 + float(np.abs(r).sum())))
            p = _softmax(rng.normal(0, 4, V))
            c = int(rng.integers(V))
            e = p.copy()
            e[c] -= 1.0
            acc.le(float(np.linalg.norm(S.T @ e)), cross_entropy_backward_bound(S, p, c),
                   f"cross-entropy/{kind}", scale=scale)
        w = backward_witness(S)
        acc.eq(float(np.linalg.norm(S.T @ w)), backward_bound(S, w), f"witness/{kind}", scale=scale)
    return acc


@register("I9", "||b+ - b|| <= min{D(S)(1-q_c) + D(U) tanh(d/4), ...}; U-dependence example",
          "numeric: random U, S, h, c; V = d = 2 example")
def _i9(rng, quick):
    acc = _Acc()
    for kind, S in _clouds(rng, quick):
        S = np.asarray(S, dtype=np.float64)
        V, d = S.shape
        for _ in range(3):
            U = rng.normal(0, 2, (V, d))
            h = rng.standard_normal(d)
            c = int(rng.integers(V))
            actual = backward_change(U, S, h, c)
            bound = backward_change_bound(U, S, h, c)
            acc.le(actual, bound, f"bound/{kind}", scale=1.0 + bound + float(np.abs(U).max() + np.abs(S).max()))
    for M in (1.0, 10.0, 1e3, 1e6):
        for eta in (0.1, 1.0, 3.0):
            U = np.array([[0.0, M], [0.0, -M]])
            S = np.array([[eta / 2, 0.0], [-eta / 2, 0.0]])
            low = M * math.tanh(eta / 2.0)
            change = backward_change(U, S, [1.0, 0.0], 0)
            acc.le(low, change, f"U-dependence M={M:g}, eta={eta:g}", scale=1.0 + low)
    return acc


# --------------------------------------------------------------------------- I10-I17
_SOLVER_TOL = tolerance("solver").rtol


def _gradients(rng, quick):
    """Zero-sum gradients: Gaussian, low rank, cross-entropy (softmax(Z) - Y)^T-like, sparse rows."""
    reps = 2 if quick else 6
    for _ in range(reps):
        V, d = int(rng.integers(3, 13)), int(rng.integers(1, 6))
        G = rng.standard_normal((V, d))
        yield "gaussian", G - G.mean(axis=0)
        k = int(rng.integers(1, min(V - 1, d) + 1))
        L = rng.standard_normal((V, k)) @ rng.standard_normal((k, d))
        yield "low-rank", L - L.mean(axis=0)
        Z = rng.normal(0, 2, (d, V))
        Pm = np.exp(Z - Z.max(axis=1, keepdims=True))
        Pm /= Pm.sum(axis=1, keepdims=True)
        Y = np.eye(V)[rng.integers(0, V, d)]
        yield "cross-entropy", (Pm - Y).T  # columns are p - e_c: zero column sums
        S = rng.standard_normal((V, d))
        S[rng.random(V) < 0.5] = 0.0
        yield "zero-rows", S - S.mean(axis=0)


def _simplex_gradient(k: int) -> np.ndarray:
    E = np.eye(k + 1) - 1.0 / (k + 1)
    U, _, _ = np.linalg.svd(E)
    return E @ U[:, :k]


@register("I10", "min <G,S> s.t. D(S) <= eta = -eta T(G); flow min = potential max",
          "ALM certificate vs cvxpy flow and potential forms", tol=_SOLVER_TOL)
def _i10(rng, quick):
    from .tension import min_tension, steepest_descent

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        alm = min_tension(G, tol=1e-9)
        acc.le(alm.gap, 1e-9 * alm.value, f"ALM certified gap/{kind}", scale=max(alm.value, 1e-300))
        for form in ("cvxpy-flow", "cvxpy-potential"):
            ref = min_tension(G, method=form)
            acc.eq(ref.value, alm.value, f"{form} vs ALM/{kind}", scale=alm.value)
            acc.le(alm.value, ref.flow.cost, f"weak duality {form}/{kind}", scale=alm.value)
        eta = float(rng.uniform(0.1, 3.0))
        S = steepest_descent(G, eta=eta, tol=1e-9)
        acc.le(row_diameter(S), eta, f"D(S) <= eta/{kind}", scale=eta)
        acc.eq(-float(np.sum(G * S)), eta * alm.value, f"decrease = eta T/{kind}", scale=eta * alm.value)
    return acc


@register("I11", "balanced flow (g_i - g_j)/V balances G; T <= (1/V) sum ||g_i - g_j||",
          "numeric: divergence of the balanced flow; certified T", tol=tolerance("exact").rtol)
def _i11(rng, quick):
    from .tension import min_tension

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        V = G.shape[0]
        iu, ju = np.triu_indices(V, 1)
        Y = (G[iu] - G[ju]) / V
        div = np.zeros_like(G)
        np.add.at(div, iu, Y)
        np.add.at(div, ju, -Y)
        scale = 1.0 + float(np.abs(G).max())
        acc.eq(float(np.abs(div - G).max()), 0.0, f"balance/{kind}", scale=scale)
        cost = float(np.linalg.norm(Y, axis=1).sum())
        acc.le(min_tension(G, tol=1e-9).value, cost, f"T <= balanced cost/{kind}", scale=cost)
    return acc


@register("I12", "flow on (i,j) forces phi_i - phi_j = y_ij/||y_ij|| (full diameter)",
          "numeric: all flow-carrying pairs of the ALM solution", tol=_SOLVER_TOL)
def _i12(rng, quick):
    from .tension import min_tension

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        res = min_tension(G, tol=1e-10)
        if res.flow.vectors.size == 0:
            continue
        n = np.linalg.norm(res.flow.vectors, axis=1)
        big = n > 1e-4 * n.max()
        I, J = res.flow.pairs[big].T
        Z = res.potential[I] - res.potential[J]
        U = res.flow.vectors[big] / n[big, None]
        acc.eq(float(np.abs(Z - U).max()), 0.0, f"phi_i - phi_j = unit(y)/{kind}")
    return acc


@register("I13", "centred potentials with D(Phi) <= 1 have ||phi_i|| <= 1",
          "numeric: optimal and random feasible potentials")
def _i13(rng, quick):
    from .tension import min_tension

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        P = min_tension(G, tol=1e-9).potential
        acc.le(float(np.linalg.norm(P, axis=1).max()), 1.0, f"optimal/{kind}")
        Q = rng.standard_normal(G.shape)
        Q -= Q.mean(axis=0)
        D = row_diameter(Q)
        if D > 0:
            acc.le(float(np.linalg.norm(Q / D, axis=1).max()), 1.0, f"random/{kind}")
    return acc


@register("I14", "closed forms: rank one, d = 1, V = 2, regular simplex J_k sum ||g_i||",
          "ALM certified value vs closed form", tol=1e-8)
def _i14(rng, quick):
    from .tension import min_tension

    acc = _Acc()
    for _ in range(2 if quick else 6):
        V = int(rng.integers(2, 12))
        g = rng.standard_normal(V)
        g -= g.mean()
        h = rng.standard_normal(int(rng.integers(1, 5)))
        want = float(np.abs(g).sum() * np.linalg.norm(h) / 2)
        acc.eq(min_tension(np.outer(g, h), tol=1e-11).value, want, "rank one", scale=want)
        want = float(np.abs(g).sum() / 2)
        acc.eq(min_tension(g[:, None], tol=1e-11).value, want, "d = 1", scale=want)
        g1 = rng.standard_normal(int(rng.integers(1, 5)))
        want = float(np.linalg.norm(g1))
        acc.eq(min_tension(np.stack([g1, -g1]), tol=1e-11).value, want, "V = 2", scale=want)
    for k in range(1, 5 if quick else 8):
        S = _simplex_gradient(k) * rng.uniform(0.5, 2.0)
        want = jung_radius(k) * float(np.linalg.norm(S, axis=1).sum())
        acc.eq(min_tension(S, tol=1e-11).value, want, f"simplex k={k}", scale=want)
    return acc


@register("I15", "projected RowNorm minimises <G,S> over rad(S) <= eta/2; decrease (eta/2) sum ||g_i||",
          "closed-form decrease; cvxpy radius problem", tol=_SOLVER_TOL)
def _i15(rng, quick):
    import cvxpy as cp

    from .tension import projected_rownorm

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        V, d = G.shape
        eta = float(rng.uniform(0.1, 3.0))
        S = projected_rownorm(G, eta=eta)
        want = eta / 2 * float(np.linalg.norm(G, axis=1).sum())
        acc.eq(-float(np.sum(G * S)), want, f"decrease/{kind}", scale=max(want, 1e-300))
        acc.le(minimum_enclosing_ball(S).radius, eta / 2, f"rad <= eta/2/{kind}", scale=eta)
        X = cp.Variable((V, d))
        c = cp.Variable((1, d))
        prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(G, X))),
                          [cp.sum(X, axis=0) == 0, cp.norm(X - np.ones((V, 1)) @ c, 2, axis=1) <= eta / 2])
        prob.solve(solver=cp.CLARABEL)
        acc.eq(-float(prob.value), want, f"optimal vs cvxpy/{kind}", scale=max(want, 1e-300))
    return acc


@register("I16", "sqrt((k+1)/(2k)) <= RowNorm decrease / optimal <= 1, sharp on the simplex",
          "certified T (ALM); simplex + zero rows", tol=1e-8)
def _i16(rng, quick):
    from .tension import min_tension

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        k = int(np.linalg.matrix_rank(G))
        if k == 0:
            continue
        res = min_tension(G, tol=1e-10)
        rn = 0.5 * float(np.linalg.norm(G, axis=1).sum())
        acc.le(math.sqrt((k + 1) / (2 * k)), rn / res.flow.cost, f"lower/{kind}")
        acc.le(rn / res.value, 1.0, f"upper/{kind}")
    for k in range(1, 5 if quick else 8):
        G = np.vstack([_simplex_gradient(k), np.zeros((2, k))])
        res = min_tension(G, tol=1e-11)
        ratio = 0.5 * float(np.linalg.norm(G, axis=1).sum()) / res.value
        acc.eq(ratio, math.sqrt((k + 1) / (2 * k)), f"sharp k={k}")
    return acc


@register("I17", "sum ||g_i||/2 <= T(G) <= min(J_k sum ||g_i||, balanced-flow cost)",
          "tension_bounds vs certified T", tol=tolerance("exact").rtol)
def _i17(rng, quick):
    from .tension import min_tension, tension_bounds

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        b = tension_bounds(G)
        res = min_tension(G, tol=1e-10)
        total = float(np.linalg.norm(G, axis=1).sum())
        acc.le(total / 2, b.lower, f"sum/2 <= lower/{kind}", scale=total)
        acc.le(b.lower, res.flow.cost, f"lower <= T/{kind}", scale=total)
        acc.le(res.value, b.upper, f"T <= upper/{kind}", scale=total)
    return acc


@register("I18", "steepest directions: l_inf diameter -> centred column sign; RowNorm, Sign, polar",
          "dual-norm equalities; d = 1 solves per column", tol=1e-8)
def _i18(rng, quick):
    from .tension import min_tension
    from .updates import linf_steepest_descent, polar_update, rownorm_update, sign_update

    acc = _Acc()
    for kind, G in _gradients(rng, quick):
        eta = float(rng.uniform(0.1, 3.0))
        S = linf_steepest_descent(G, eta=eta)
        l1 = float(np.abs(G).sum())
        acc.le(row_diameter(S, norm="inf"), eta, f"D_inf(S) <= eta/{kind}", scale=eta)
        acc.eq(-float(np.sum(G * S)), eta / 2 * l1, f"l_inf-diameter decrease/{kind}", scale=max(l1, 1e-300))
        cols = sum(min_tension(G[:, k : k + 1], tol=1e-11).value for k in range(G.shape[1]) if np.any(G[:, k]))
        acc.eq(cols, l1 / 2, f"columns are d = 1 problems/{kind}", scale=max(l1, 1e-300))
        for name, rule, norm, dual in (
            ("Sign", sign_update, lambda X: float(np.abs(X).max()), l1),
            ("RowNorm", rownorm_update, lambda X: float(np.linalg.norm(X, axis=1).max()),
             float(np.linalg.norm(G, axis=1).sum())),
            ("polar", polar_update, lambda X: float(np.linalg.norm(X, 2)),
             float(np.linalg.svd(G, compute_uv=False).sum())),
        ):
            U = rule(G)
            acc.le(norm(U), 1.0, f"{name} unit norm/{kind}")
            acc.eq(-float(np.sum(G * U)), dual, f"{name} attains the dual norm/{kind}", scale=max(dual, 1e-300))
    return acc


# --------------------------------------------------------------------------- I19-I20
@register("I19", "at most d+1 equidistant points in R^d (regular simplex); delta*(V,d) < 1 beyond",
          "simplex distances; best found and proven bound for n = d+2")
def _i19(rng, quick):
    from .equalize import equidistant_limit, max_min_separation, regular_simplex

    acc = _Acc()
    for d in range(1, 6 if quick else 10):
        for n in range(2, d + 2):
            P = regular_simplex(n, d)
            acc.eq(row_diameter(P), 1.0, f"simplex D n={n} d={d}")
            acc.eq(closest_pair(P).distance, 1.0, f"simplex min n={n} d={d}")
        lim = equidistant_limit(d + 2, d)
        acc.le(float(lim.possible), 0.0, f"n = d+2 reported impossible, d={d}")
        acc.le(lim.upper, 1.0 - 1e-3 / (d + 2) ** 2, f"bound < 1 for n = d+2, d={d}", scale=1.0)
        if d <= 3:
            r = max_min_separation(d + 2, d, restarts=3 if quick else 8, seed=int(rng.integers(1 << 30)))
            acc.le(r.lower, r.upper, f"found <= bound, d={d}")
    return acc


@register("I20", "delta*(V,d)^2 <= V d'/((V-1)(d'+1)), d' = min(d, V-1), tight at V = d+1; "
          "packing: delta* <= 1/(V^(1/d) - 1)",
          "random clouds and grids vs min(I20, packing); reported floats rounded up (exact rationals)")
def _i20(rng, quick):
    from .equalize import equidistant_limit

    acc = _Acc()
    for _ in range(20 if quick else 200):
        n, d = int(rng.integers(2, 30)), int(rng.integers(1, 8))
        X = rng.standard_normal((n, d))
        D = row_diameter(X)
        if D == 0:
            continue
        ratio = closest_pair(X).distance / D
        dp = min(d, n - 1)
        bound = math.sqrt(n * dp / ((n - 1) * (dp + 1)))
        acc.le(ratio, bound, f"random n={n} d={d}")
        lim = equidistant_limit(n, d)
        acc.le(ratio, lim.upper, f"random n={n} d={d} vs reported bound")
        if not lim.possible and d > 1:
            pack = 1.0 / (n ** (1.0 / d) - 1.0)
            acc.eq(lim.upper, min(bound, pack), f"reported bound = min(I20, packing) n={n} d={d}")
    for d in range(1, 12):
        n = d + 1
        acc.eq(math.sqrt(n * d / ((n - 1) * (d + 1))), 1.0, f"tight at V = d+1, d={d}")
    # grids of k^d points (min/max = 1/((k-1) sqrt d)) come closer to the bounds than random clouds
    for k, d in ((3, 2), (5, 2), (3, 3), (4, 3), (2, 5)):
        g = np.stack(np.meshgrid(*[np.arange(k, dtype=float)] * d), -1).reshape(-1, d)
        acc.le(closest_pair(g).distance / row_diameter(g), equidistant_limit(k**d, d).upper, f"grid {k}^{d}")
    # the reported floats are at least the real bounds: residual = shortfall in exact rationals
    from fractions import Fraction

    for n, d in ((5, 2), (7, 2), (4, 2), (12, 3), (9232171, 3), (10**9, 4)):
        lim = equidistant_limit(n, d)
        c = Fraction(lim.upper)
        if lim.source == "isodiametric packing":
            short = (1 + c) ** d - n * c**d
        else:
            dp = min(d, n - 1)
            short = Fraction(n * dp, (n - 1) * (dp + 1)) - c**2
        acc.le(float(max(short, 0)), 0.0, f"rounded up n={n} d={d}", scale=1.0)
    return acc


@register("I21", "Shor SDP >= any feasible equalized update; exact at delta = 0; diameter exact for S",
          "SDP value vs feasible updates (exact re-checks); delta = 0 vs min_tension", tol=_SOLVER_TOL)
def _i21(rng, quick):
    from .equalize import _shor_sdp, equalized_descent
    from .tension import min_tension

    acc = _Acc()
    for _ in range(2 if quick else 5):
        V, d = int(rng.integers(3, 8)), int(rng.integers(1, 4))
        G = rng.standard_normal((V, d))
        G -= G.mean(axis=0)
        eta = float(rng.uniform(0.5, 2.0))
        T = min_tension(G, tol=1e-10)
        up0, S0 = _shor_sdp(G, 0.0, eta)
        acc.eq(up0, eta * T.value, f"SDP at delta = 0 vs eta T, V={V} d={d}", scale=eta * T.value)
        acc.le(row_diameter(S0), eta * (1 + 1e-6), f"SDP S diameter V={V} d={d}", scale=eta)
        for delta in (0.1, 0.3):
            r = equalized_descent(G, delta=delta, eta=eta, restarts=1, seed=int(rng.integers(1 << 30)))
            if r.update is None:
                continue
            acc.le(r.lower, r.upper, f"feasible <= SDP, delta={delta}", scale=max(abs(r.upper), 1e-300))
            acc.le(row_diameter(r.update), eta, f"D(update) <= eta, delta={delta}", scale=eta)
            acc.le(delta * eta, closest_pair(r.update).distance, f"separation floor, delta={delta}", scale=eta)
            acc.le(r.upper, eta * T.flow.cost, f"SDP <= eta T, delta={delta}", scale=eta * T.value)
    return acc


# --------------------------------------------------------------------------- runner
def run_checks(
    *,
    seed: int = 0,
    quick: bool = False,
    only: list[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run the registered checks and return one :class:`CheckResult` per identity.

    Parameters
    ----------
    seed : int
        Seed of the instance generator (each check gets its own stream).
    quick : bool
        Fewer instances per check.
    only : list of str, optional
        Identity ids to run (e.g. ``["I1", "I7"]``).
    on_result : callable, optional
        Called with each :class:`CheckResult` as soon as its check finishes
        (progress output); its return value is ignored.

    Returns
    -------
    list of CheckResult
        One row per check run, in registration order.

    Examples
    --------
    >>> from hilbertgeom.verify import run_checks
    >>> seen = []
    >>> rows = run_checks(quick=True, only=["I4"], on_result=seen.append)
    >>> [r.identity for r in seen] == [r.identity for r in rows] == ["I4"]
    True
    >>> rows[0].passed
    True
    """
    out = []
    wanted = None if not only else {s.strip().upper() for s in only}
    if wanted:
        known = {c.identity.upper() for c in CHECKS}
        unknown = sorted(wanted - known)
        if unknown:
            raise ValueError(f"unknown identity id(s) {unknown}; known: {sorted(known, key=_id_key)}")
    for idx, chk in enumerate(CHECKS):
        if wanted and chk.identity.upper() not in wanted:
            continue
        rng = np.random.default_rng([seed, _id_key(chk.identity)[0], idx])
        try:
            acc = chk.run(rng, quick)
            worst, trials, detail = acc.worst, acc.trials, acc.where
            passed = bool(trials > 0 and worst <= chk.tol)
        except Exception as exc:  # a crash is a failure, reported as such
            worst, trials, detail, passed = math.inf, 0, f"{type(exc).__name__}: {exc}", False
        row = CheckResult(chk.identity, chk.statement, chk.method, trials, worst, chk.tol, passed, detail)
        out.append(row)
        if on_result is not None:
            on_result(row)
    return out


def _id_key(identity: str) -> tuple[int, str]:
    digits = "".join(ch for ch in identity if ch.isdigit())
    return (int(digits) if digits else 0, identity)
