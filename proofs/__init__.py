"""hilbertgeom.proofs: machine-checked derivations of the identities.

Installed from the top-level ``proofs/`` folder as ``hilbertgeom.proofs``; the
core never imports it (``hilbertgeom verify`` runs it through the CLI).  Each
``check_iN()`` states the claim, cites its source, proves the algebraic steps
with sympy and, where the claim is about the library's numbers, runs a
seeded numeric check; it returns a :class:`ProofResult`.

One entry per identity I1--I21: ``proofs.metric`` (I1, I2, I4),
``proofs.head`` (I3, I5, I6, I7, I9), ``proofs.tension`` (I8, I11, I13, I14,
I16, I19, I20) and ``proofs.descent`` (I10, I12, I15, I17, I18, I21).
"""

from __future__ import annotations

from . import descent, head, metric, tension
from ._base import ProofResult

__all__ = ["PROOFS", "ProofResult", "run_proofs"]

PROOFS = {
    "I1": metric.check_i1,
    "I2": metric.check_i2,
    "I3": head.check_i3,
    "I4": metric.check_i4,
    "I5": head.check_i5,
    "I6": head.check_i6,
    "I7": head.check_i7,
    "I8": tension.check_i8,
    "I9": head.check_i9,
    "I10": descent.check_i10,
    "I11": tension.check_i11,
    "I12": descent.check_i12,
    "I13": tension.check_i13,
    "I14": tension.check_i14,
    "I15": descent.check_i15,
    "I16": tension.check_i16,
    "I17": descent.check_i17,
    "I18": descent.check_i18,
    "I19": tension.check_i19,
    "I20": tension.check_i20,
    "I21": descent.check_i21,
}


def run_proofs(*, seed: int = 0, quick: bool = False, only=None, on_result=None) -> list[ProofResult]:
    """Run the proof checks (optionally only some identities); a crash is a failure.

    ``on_result``, if given, is called with each :class:`ProofResult` as soon
    as its proof finishes (progress output).
    """
    out = []
    wanted = None if not only else {s.strip().upper() for s in only}
    for ident, fn in PROOFS.items():
        if wanted and ident not in wanted:
            continue
        try:
            out.append(fn(seed=seed, quick=quick))
        except Exception as exc:  # reported, never hidden
            out.append(ProofResult(ident, "", "", "symbolic", 0, float("inf"), 0.0, False, (),
                                   (f"{type(exc).__name__}: {exc}",)))
        if on_result is not None:
            on_result(out[-1])
    return out
