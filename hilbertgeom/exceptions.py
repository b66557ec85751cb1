"""Exceptions raised by hilbertgeom, and the status words its solvers report.

A result's ``status`` and a :class:`SolverError`'s ``status`` are one of the
``STATUS_*`` strings below, or a conic solver's own status word passed through
(cvxpy's, such as ``"infeasible_inaccurate"``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "STATUS_DEGENERATE",
    "STATUS_INACCURATE",
    "STATUS_INFEASIBLE",
    "STATUS_ITERATION_LIMIT",
    "STATUS_NO_FEASIBLE_UPDATE",
    "STATUS_OPTIMAL",
    "STATUS_SOLVER_ERROR",
    "SolverError",
]

STATUS_OPTIMAL = "optimal"
"""The certificate meets its tolerance (primal, dual and gap)."""
STATUS_INACCURATE = "inaccurate"
"""A solve finished, but its certificate misses the requested tolerance."""
STATUS_INFEASIBLE = "infeasible"
"""The problem has no feasible point."""
STATUS_ITERATION_LIMIT = "iteration limit"
"""An iterative method reached its iteration budget before certifying."""
STATUS_DEGENERATE = "degenerate"
"""An active-set method cycled on degenerate (for example cospherical) data."""
STATUS_SOLVER_ERROR = "solver_error"
"""The underlying conic solver raised an error."""
STATUS_NO_FEASIBLE_UPDATE = "no feasible update found"
"""A heuristic found no point satisfying every constraint."""


class SolverError(RuntimeError):
    """A solver did not reach a certified answer.

    Parameters
    ----------
    message : str
        What failed and what to try; names the status.
    status : str
        The solver's status word (a ``STATUS_*`` constant of this module or a
        conic solver's own word).
    result : object, optional
        The best certificate reached before the failure, if any.

    Attributes
    ----------
    status : str
        The solver's own status word (for example ``"infeasible"`` or
        ``"iteration limit"``), also named in the message.
    result : object or None
        The best result reached before the failure (for example a
        ``TensionResult`` whose certificate misses its tolerance), or ``None``.

    Examples
    --------
    >>> err = SolverError("walk did not terminate (status 'iteration limit')", status=STATUS_ITERATION_LIMIT)
    >>> err.status, err.result
    ('iteration limit', None)
    """

    status: str
    result: Any

    def __init__(self, message: str, *, status: str, result: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.result = result
