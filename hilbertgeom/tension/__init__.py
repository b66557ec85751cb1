"""Steepest descent under the row diameter: the minimum-tension problem (I10--I17).

.. math::

    \\min_{S}\\ \\langle G, S\\rangle \\ \\text{s.t.}\\ D(S) \\le \\eta,\\ 1^\\top S = 0
    \\quad = \\quad -\\eta\\, T(G),

    T(G) = \\max_{1^\\top\\Phi = 0,\\ D(\\Phi) \\le 1} \\langle G, \\Phi\\rangle
         = \\min_{y \\text{ antisymmetric},\\ \\sum_{j} y_{ij} = g_i}\\ \\sum_{i<j} \\|y_{ij}\\|_2 .

Every solve returns a *certificate*: a centred potential ``Phi`` with
``D(Phi) <= 1`` (checked with the exact :func:`~hilbertgeom.row_diameter`),
whose value ``<G, Phi>`` is a lower bound on ``T(G)``, and a flow that balances
``G`` exactly, whose cost is an upper bound.  ``gap`` is their difference.

The package is split by concept: :mod:`._results` (result types and the
certificate), :mod:`.bounds` (RowNorm, projected RowNorm, cheap bounds), :mod:`.bracket`
(a certified bracket at full vocabulary from a reduced solve),
:mod:`.solver` (the scalable solver, :func:`min_tension`,
:func:`steepest_descent`), :mod:`.refine` (its cluster refinement for head
gradients, with :mod:`.hubs` for the Laplacians of its flows, whose pairs all
touch a few rows, :mod:`.lbfgs` for the descent of their weights and :mod:`.place`
for the rows' placement), :mod:`.newton` and :mod:`.dual` (Newton on a support and L-BFGS-B
over every pair, both on the scalar-weight dual: the small problems at high
rank) and :mod:`.reference` (the CPU-only cvxpy reference programs).
"""

from __future__ import annotations

from ._results import Flow, TensionBounds, TensionResult
from .bounds import centring_noise, projected_rownorm, rownorm, tension_bounds  # noqa: F401 (centring_noise: shared rule)
from .bracket import TensionBracket, tension_bracket
from .solver import min_tension, steepest_descent

__all__ = [
    "Flow",
    "TensionBounds",
    "TensionBracket",
    "TensionResult",
    "min_tension",
    "projected_rownorm",
    "rownorm",
    "steepest_descent",
    "tension_bounds",
    "tension_bracket",
]
