"""hilbertgeom.proofs: every identity I1--I21, proved and checked in one place.

Installed from the top-level ``proofs/`` folder as ``hilbertgeom.proofs``; the
core never imports it (``hilbertgeom verify`` runs it through the CLI).  For
each identity one function states the claim and its source, proves it with
sympy (inequalities decided, general dimension where a finite family would
not do, cited theorems named with every step around them proved) and checks
the library's numbers against independent ones (brute force over pairs,
mpmath, exact rationals, closed forms), both ways: valid on random and
adversarial instances, and sharp on a witness.

Modules follow the concepts: :mod:`.metric` (I1--I5), :mod:`.head`
(I6--I9), :mod:`.tension` (I10--I18), :mod:`.equalize` (I19--I21).  One
runner, :func:`run`, and one result type, :class:`Result`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import mpmath as mp
import numpy as np

from . import equalize, head, metric, tension
from ._core import Identity, Proof, Result, clear_cache

__all__ = ["IDENTITIES", "Result", "run"]

IDENTITIES: dict[str, Identity] = {**metric.IDENTITIES, **head.IDENTITIES, **tension.IDENTITIES,
                                   **equalize.IDENTITIES}


def _key(ident: str) -> int:
    return int("".join(ch for ch in ident if ch.isdigit()) or 0)


def run(*, seed: int = 0, quick: bool = False, only: Iterable[str] | None = None,
        on_result: Callable[[Result], None] | None = None) -> list[Result]:
    """Prove and check the identities; one :class:`Result` per identity.

    Parameters
    ----------
    seed : int
        Seed of the instances (each identity draws its own stream).
    quick : bool
        Fewer instances.
    only : iterable of str, optional
        Identity ids to run, e.g. ``["I1", "I7"]`` (case-insensitive).
    on_result : callable, optional
        Called with each :class:`Result` as soon as its identity finishes.

    Returns
    -------
    list of Result
        In the order I1, ..., I21.  A check that raises is a failed row
        naming the exception.

    Raises
    ------
    ValueError
        An unknown identity id in ``only``.

    Examples
    --------
    >>> [r.passed for r in run(only=["I2"], quick=True)]
    [True]
    """
    wanted = None
    if only:
        names = {k.upper(): k for k in IDENTITIES}
        asked = {str(s).strip().upper() for s in only if str(s).strip()}
        unknown = sorted(asked - set(names), key=_key)
        if unknown:
            raise ValueError(f"unknown identity id(s) {unknown}; known: {', '.join(sorted(IDENTITIES, key=_key))}")
        wanted = {names[a] for a in asked}
    out = []
    clear_cache()
    for ident in sorted(IDENTITIES, key=_key):
        if wanted and ident not in wanted:
            continue
        spec = IDENTITIES[ident]
        rng = np.random.default_rng([seed, _key(ident)])
        pf = Proof()
        try:
            with mp.workdps(40):
                spec.run(pf, rng, quick, seed)
            res = pf.result(ident, spec.statement, spec.method, spec.source)
        except Exception as exc:  # a crash is a failure, reported with its exception
            res = Result(ident, spec.statement, spec.method, 0, math.inf, 0.0, False,
                         f"{type(exc).__name__}: {exc}", spec.source)
        out.append(res)
        if on_result is not None:
            on_result(res)
    return out

