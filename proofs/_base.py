"""Shared pieces of the proof modules: the result type and symbolic checks."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import sympy as sp

__all__ = ["ProofResult", "Steps"]


@dataclass(frozen=True)
class ProofResult:
    """The outcome of one proof module's ``check()``.

    ``worst`` is the largest normalised residual of the numeric part (0 when
    the proof is purely symbolic); ``verdict`` is True only if every
    symbolic step reduced to zero (or to a true inequality) and the numeric
    part stayed within ``tol``.
    """

    identity: str
    claim: str
    source: str
    method: str
    trials: int
    worst: float
    tol: float
    verdict: bool
    steps: tuple[str, ...] = field(default_factory=tuple)
    failed: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return asdict(self)


class Steps:
    """Collects named symbolic steps and numeric residuals."""

    def __init__(self):
        self.steps: list[str] = []
        self.failed: list[str] = []
        self.worst = 0.0
        self.trials = 0

    def zero(self, name: str, expr) -> None:
        """A step that holds iff ``expr`` simplifies to 0."""
        ok = sp.simplify(sp.expand(expr)) == 0
        if not ok:  # logs expanded only as the symbols' assumptions allow (no force=True)
            ok = sp.simplify(sp.expand_log(sp.expand(expr)).rewrite(sp.exp)) == 0
        (self.steps if ok else self.failed).append(name)

    def true(self, name: str, cond) -> None:
        """A step that holds iff ``cond`` is Python/sympy True (undecided counts as false)."""
        ok = (cond is True) or (cond is sp.true) or (isinstance(cond, bool) and cond)
        (self.steps if ok else self.failed).append(name)

    def residual(self, value: float, scale: float = 1.0) -> None:
        self.trials += 1
        r = abs(float(value)) / max(1.0, abs(float(scale)))
        if math.isnan(r):
            r = math.inf
        self.worst = max(self.worst, r)

    def result(self, identity: str, claim: str, source: str, tol: float = 2.8421709430404007e-14) -> ProofResult:
        method = "symbolic+numeric" if self.trials else "symbolic"
        verdict = not self.failed and self.worst <= tol and (self.steps or self.trials)
        return ProofResult(identity, claim, source, method, self.trials + len(self.steps) + len(self.failed),
                           self.worst, tol, bool(verdict), tuple(self.steps), tuple(self.failed))
