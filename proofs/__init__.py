"""hilbertgeom.proofs: machine-checked derivations of the identities.

Installed from the top-level ``proofs/`` folder as ``hilbertgeom.proofs``; the
core never imports it.  One module per identity (or tight group), each with
the claim, its source and a ``check()`` (symbolic with sympy where the claim is
algebraic).

Status: the derivations are not written yet; ``hilbertgeom verify`` currently
checks identities I1--I9 numerically (see :mod:`hilbertgeom.verify`).
"""

__all__: list[str] = []
