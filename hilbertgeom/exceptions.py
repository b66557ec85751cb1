"""Exceptions raised by hilbertgeom."""

from __future__ import annotations

__all__ = ["SolverError"]


class SolverError(RuntimeError):
    """A solver did not reach a certified answer.

    Attributes
    ----------
    status : str
        The solver's own status word (for example ``"infeasible"`` or
        ``"iteration limit"``), also named in the message.
    """

    def __init__(self, message: str, *, status: str):
        super().__init__(message)
        self.status = status
