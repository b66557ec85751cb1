r"""The pieces every identity module shares: the result type, the proof
accumulator (symbolic steps and numeric comparisons), the tolerances and the
independent references (brute force over pairs, exact rationals).

Tolerances
----------
Every numeric comparison names its tolerance kind; the kinds come from
:func:`hilbertgeom.tolerances.tolerance`, except two that belong to the proofs
and are derived here:

``EXACT``
    ``tolerance("exact").rtol`` = $256u \approx 2.8\times10^{-14}$: closed
    forms and brute force against the library's exact kernels; both sides are
    a few correctly rounded operations on the same data.
``SOLVER``
    ``tolerance("solver").rtol`` = $10^{-6}$: an interior-point solver (cvxpy /
    CLARABEL) or the ALM's certified gap compared with a closed form or with
    another solver.
``SCREENED``
    $10^{-6}$ relative: the balanced-flow cost of ``tension_bounds`` rounds
    each GEMM-screened distance up to $\sqrt{D^2 + \epsilon}$ with
    $\epsilon = 8(d+2)u\,\max_i\|x_i\|^2$, and recomputes pairs with
    $D^2 < 10^6\epsilon$ exactly; for the others
    $\sqrt{D^2+\epsilon} \le D(1 + \epsilon/(2D^2)) \le D(1 + 5\cdot10^{-7})$.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp

from hilbertgeom.tolerances import tolerance

__all__ = ["EXACT", "SCREENED", "SOLVER", "Identity", "Proof", "Result"]

EXACT = tolerance("exact").rtol
SOLVER = tolerance("solver").rtol
SCREENED = 1e-6


@dataclass(frozen=True)
class Result:
    """One row of ``hilbertgeom verify``: an identity, proved and checked.

    Attributes
    ----------
    identity : str
        ``"I1"`` ... ``"I21"``.
    statement : str
        The claim.
    method : str
        How it is established: the symbolic part, the cited theorem (if any)
        and the independent numeric reference.
    trials : int
        Symbolic steps plus numeric comparisons made.
    worst : float
        The residual (equality) or violation (inequality), relative to its
        scale, of the comparison closest to failing: the largest
        ``residual / tol`` over all comparisons.
    tol : float
        The tolerance of that comparison.
    passed : bool
        Every symbolic step decided true and every comparison within its
        tolerance (and at least one of each ran).
    detail : str
        Where the worst comparison was, and the failed steps if any.
    source : str
        The paper equation or the literature the claim comes from.
    steps, failed : tuple of str
        The symbolic steps that held, and those that did not.
    """

    identity: str
    statement: str
    method: str
    trials: int
    worst: float
    tol: float
    passed: bool
    detail: str = ""
    source: str = ""
    steps: tuple[str, ...] = field(default_factory=tuple)
    failed: tuple[str, ...] = field(default_factory=tuple)

    @property
    def claim(self) -> str:
        """The statement (alias)."""
        return self.statement

    def as_dict(self) -> dict:
        return asdict(self)


class Proof:
    """Accumulates the symbolic steps and the numeric comparisons of one identity."""

    def __init__(self):
        self.steps: list[str] = []
        self.failed: list[str] = []
        self.numeric = 0
        self.worst = 0.0  # residual of the comparison with the largest residual / tol
        self.worst_tol = EXACT
        self.ratio = -1.0
        self.where = ""

    # ------------------------------------------------------------------ symbolic
    def zero(self, name: str, expr) -> None:
        """A step that holds iff ``expr`` simplifies to 0 (no forced log expansion)."""
        ok = sp.simplify(sp.expand(expr)) == 0
        if not ok:
            ok = sp.simplify(sp.expand_log(sp.expand(expr)).rewrite(sp.exp)) == 0
        self._step(name, ok)

    def nonneg(self, name: str, expr) -> None:
        """A step that holds iff sympy decides ``expr >= 0`` from the symbols' assumptions."""
        e = sp.factor(sp.simplify(expr))
        self._step(name, e.is_nonnegative is True or sp.sympify(expr).is_nonnegative is True)

    def positive(self, name: str, expr) -> None:
        """A step that holds iff sympy decides ``expr > 0`` from the symbols' assumptions."""
        e = sp.factor(sp.simplify(expr))
        self._step(name, e.is_positive is True or sp.sympify(expr).is_positive is True)

    def true(self, name: str, cond) -> None:
        """A step that holds iff ``cond`` is True (sympy's undecided counts as false)."""
        self._step(name, cond is True or cond is sp.true or (isinstance(cond, (bool, np.bool_)) and bool(cond)))

    def _step(self, name: str, ok: bool) -> None:
        (self.steps if ok else self.failed).append(name)

    # ------------------------------------------------------------------ numeric
    def eq(self, label: str, actual, reference, *, scale=None, tol: float = EXACT) -> None:
        """``actual == reference`` to ``tol`` relative to ``scale`` (default ``max(1, |a|, |b|)``)."""
        a, b = float(actual), float(reference)
        s = max(1.0, abs(a), abs(b)) if scale is None else max(float(scale), 1e-300)
        self._add(label, abs(a - b) / s, tol)

    def le(self, label: str, small, large, *, scale=None, tol: float = EXACT) -> None:
        """``small <= large`` up to ``tol`` relative to ``scale``; records the violation."""
        a, b = float(small), float(large)
        s = max(1.0, abs(a), abs(b)) if scale is None else max(float(scale), 1e-300)
        self._add(label, max(a - b, 0.0) / s, tol)

    def ok(self, label: str, cond: bool) -> None:
        """A numeric fact that must hold exactly (a flag, an exception raised, a count)."""
        self._add(label, 0.0 if cond else math.inf, EXACT)

    def _add(self, label: str, r: float, tol: float) -> None:
        if math.isnan(r):
            r = math.inf
        self.numeric += 1
        ratio = r / tol
        if ratio > self.ratio:
            self.ratio, self.worst, self.worst_tol, self.where = ratio, r, tol, label

    def result(self, identity: str, statement: str, method: str, source: str) -> Result:
        passed = not self.failed and bool(self.steps) and self.numeric > 0 and self.ratio <= 1.0
        detail = self.where
        if self.failed:
            detail = "failed steps: " + "; ".join(self.failed) + (f"; worst at {self.where}" if self.where else "")
        return Result(identity, statement, method, len(self.steps) + len(self.failed) + self.numeric,
                      self.worst, self.worst_tol, passed, detail, source, tuple(self.steps), tuple(self.failed))


@dataclass(frozen=True)
class Identity:
    """A registered identity: its claim, source, method and its check ``run(proof, rng, quick, seed)``."""

    identity: str
    statement: str
    source: str
    method: str
    run: Callable[[Proof, np.random.Generator, bool, int], None]


def register(table: dict, identity: str, statement: str, source: str, method: str):
    """Decorator adding a check to a module's table."""

    def deco(f):
        table[identity] = Identity(identity, statement, source, method, f)
        return f

    return deco


# --------------------------------------------------------------------- references
def pair_distances(X, ord=2) -> np.ndarray:
    """All ``||x_i - x_j||`` for ``i < j``, by direct differences (no GEMM), in float64."""
    X = np.asarray(X, dtype=np.float64)
    iu, ju = np.triu_indices(X.shape[0], 1)
    diff = X[iu] - X[ju]
    if ord == 2:
        m = np.abs(diff).max(axis=1, initial=0.0)
        ms = np.where(m > 0, m, 1.0)
        return m * np.linalg.norm(diff / ms[:, None], axis=1)
    return np.linalg.norm(diff, ord=ord, axis=1)


def diameter(X, ord=2) -> float:
    """Brute-force row diameter ``max_{i<j} ||x_i - x_j||``."""
    d = pair_distances(X, ord)
    return float(d.max()) if d.size else 0.0


def farthest(X, ord=2) -> tuple[float, int, int]:
    X = np.asarray(X, dtype=np.float64)
    iu, ju = np.triu_indices(X.shape[0], 1)
    d = pair_distances(X, ord)
    k = int(np.argmax(d))
    return float(d[k]), int(iu[k]), int(ju[k])


def separation(X) -> float:
    """Brute-force smallest pairwise distance."""
    d = pair_distances(X)
    return float(d.min()) if d.size else math.inf


def row_norms(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    m = np.abs(X).max(axis=1, initial=0.0)
    ms = np.where(m > 0, m, 1.0)
    return m * np.linalg.norm(X / ms[:, None], axis=1)


def vnorm(v) -> float:
    """Euclidean norm of a vector, scaled first (no underflow of squares at 1e-160)."""
    v = np.asarray(v, dtype=np.float64).ravel()
    m = float(np.abs(v).max(initial=0.0))
    return m * float(np.linalg.norm(v / m)) if m > 0 else 0.0


def softmax(z) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def exact_variation(x) -> float:
    """``max x - min x`` of float64 entries, rounded once (exact rationals)."""
    v = [Fraction(float(t)) for t in np.asarray(x, dtype=np.float64).ravel()]
    return float(max(v) - min(v))


def exact_sum(x) -> Fraction:
    return sum((Fraction(float(t)) for t in np.asarray(x, dtype=np.float64).ravel()), Fraction(0))


def log_odds_change(p, q) -> float:
    """``max_{i,j} |log(p_i/p_j) - log(q_i/q_j)|`` over all pairs (brute force)."""
    a = np.log(np.asarray(p, dtype=np.float64)) - np.log(np.asarray(q, dtype=np.float64))
    return float(np.abs(a[:, None] - a[None, :]).max())


def rank(X, rtol: float | None = None) -> int:
    X = np.asarray(X, dtype=np.float64)
    if not np.any(X):
        return 0
    s = np.linalg.svd(X, compute_uv=False)
    r = max(X.shape) * np.finfo(float).eps if rtol is None else rtol
    return int(np.sum(s > r * s[0]))


# --------------------------------------------------------------------- instances
def clouds(rng: np.random.Generator, quick: bool):
    """Random and adversarial row clouds ``(name, X)``: Gaussian, float32 with a
    common offset, near-duplicate and exact duplicate rows, zero rows, low rank,
    extreme scales, near-ties of the farthest pair, and the real head-gradient
    shape (a few large rows, many tiny nearly equal ones, rank about d)."""
    for _ in range(2 if quick else 6):
        V, d = int(rng.integers(2, 30)), int(rng.integers(1, 7))
        yield "gaussian", rng.standard_normal((V, d))
        yield "offset-f32", (rng.standard_normal((V, d)) + 1e4).astype(np.float32)
        Y = rng.standard_normal((V, d))
        Y[1:] = Y[0] + 1e-7 * rng.standard_normal((V - 1, d))
        yield "near-duplicates", Y
        Z = rng.standard_normal((V, d))
        Z[rng.integers(0, V, V)] = Z[0]
        yield "duplicates", Z
        W = rng.standard_normal((V, d))
        W[: V // 2] = 0.0
        yield "zero-rows", W
        k = int(rng.integers(1, d + 1))
        yield "low-rank", rng.standard_normal((V, k)) @ rng.standard_normal((k, d))
        yield "tiny-scale", rng.standard_normal((V, d)) * 1e-150
        yield "huge-scale", rng.standard_normal((V, d)) * 1e150
        T = rng.standard_normal((max(V, 3), d))
        T[1] = -T[0]  # two antipodal rows: the farthest pair is nearly tied with its rotations
        T[2] = T[0] * (1 - 1e-12)
        yield "near-tie", T
        yield "head-gradient", head_gradient(rng, V=int(rng.integers(40, 120)), d=d)


def head_gradient(rng: np.random.Generator, V: int, d: int) -> np.ndarray:
    """A cross-entropy head gradient ``sum_t (p_t - e_{c_t}) h_t^T`` over a few
    tokens with Zipf targets: a few large rows (the targets), a long tail of
    tiny, nearly equal rows, rank at most d, zero column sums."""
    n = max(2, d)
    H = rng.standard_normal((n, d))
    logits = rng.normal(0.0, 1.0, (n, V)) - 3.0 * np.log1p(np.arange(V))[None, :] * 0.3
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    targets = np.minimum(rng.zipf(1.3, n) - 1, V - 1)
    R = P.copy()
    R[np.arange(n), targets] -= 1.0
    G = R.T @ H
    return G - G.mean(axis=0)


_CACHE: dict = {}


def clear_cache() -> None:
    """Forget the solves of the previous run (the runner calls it first)."""
    _CACHE.clear()


def solve(G, **kw):
    """``hilbertgeom.min_tension(G, **kw)``, solved once per run for each distinct G
    (several identities check the same solve)."""
    import hilbertgeom as hg

    G = np.ascontiguousarray(G, dtype=np.float64)
    key = (G.shape, G.tobytes(), tuple(sorted(kw.items())))
    if key not in _CACHE:
        _CACHE[key] = hg.min_tension(G, **kw)
    return _CACHE[key]


def gradient_pool(seed: int, quick: bool) -> list:
    """The zero-sum gradients shared by the tension identities (one solve each per run)."""
    key = ("pool", seed, quick)
    if key not in _CACHE:
        _CACHE[key] = list(gradients(np.random.default_rng([seed, 1000]), quick))
    return _CACHE[key]


def gradients(rng: np.random.Generator, quick: bool, *, small: bool = True):
    """Zero-sum gradients ``(name, G)`` for the tension identities: Gaussian, low
    rank, cross-entropy, half the rows zero, duplicate rows, extreme scale and
    the head-gradient shape.  ``small``: V <= 12 (for the cvxpy references)."""
    for _ in range(1 if quick else 3):
        V, d = int(rng.integers(3, 13 if small else 40)), int(rng.integers(1, 6))
        G = rng.standard_normal((V, d))
        yield "gaussian", G - G.mean(axis=0)
        k = int(rng.integers(1, min(V - 1, d) + 1))
        L = rng.standard_normal((V, k)) @ rng.standard_normal((k, d))
        yield "low-rank", L - L.mean(axis=0)
        yield "cross-entropy", head_gradient(rng, V, d)
        Z = rng.standard_normal((V, d))
        Z[rng.random(V) < 0.5] = 0.0
        yield "zero-rows", Z - Z.mean(axis=0)
        D = rng.standard_normal((V, d))
        D[rng.integers(0, V, V // 2)] = D[0]
        yield "duplicates", D - D.mean(axis=0)
        E = rng.standard_normal((V, d)) * 10.0 ** rng.choice([-100, 100])
        yield "extreme-scale", E - E.mean(axis=0)
