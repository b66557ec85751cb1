"""One tolerance policy, keyed by dtype and by method.

Every comparison that hilbertgeom makes (in ``hilbertgeom verify`` and in the
test suite) takes its tolerance from here, so that no check quietly loosens a
bound to get a pass.

The numbers follow from the unit roundoff ``u`` of the dtype:

* ``exact``  -- closed-form arithmetic on O(1) quantities: a few hundred ulps,
  ``rtol = atol = 256 u`` (absolute for quantities near zero, such as the
  distance of a point to itself).
* ``kernel`` -- tiled reductions over ``d``-term dot products: the standard
  ``gamma_d`` bound, ``rtol = 4 (d + 2) u`` (see ``hilbertgeom.rows``).
* ``solver`` -- interior-point conic solvers (cvxpy): relative gap ``1e-6``.

Two methods state an accuracy of their own, named here so that a check
compares against the method's promise rather than a literal (they are not in
``__all__``; import them from ``hilbertgeom.tolerances``):

* :data:`SDP_RTOL` -- the Shor SDP bound of ``equalized_descent``;
* :data:`EQUALIZER_RTOL` -- what ``equalize_rows`` counts as an improvement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from . import _validate as _v

__all__ = ["Tolerance", "tolerance", "unit_roundoff"]


def unit_roundoff(dtype: DTypeLike) -> float:
    """Unit roundoff ``u = eps / 2`` of a floating dtype (float64 for non-floats).

    Parameters
    ----------
    dtype : numpy dtype or dtype-like
        The working precision.

    Examples
    --------
    >>> unit_roundoff("float32") == 2.0**-24
    True
    """
    dt = np.dtype(dtype)
    if dt.kind != "f":
        dt = np.dtype(np.float64)
    return float(np.finfo(dt).eps) / 2.0


@dataclass(frozen=True)
class Tolerance:
    """A relative and an absolute tolerance: ``|a - b| <= atol + rtol * scale``."""

    rtol: float
    atol: float

    def bound(self, scale: float) -> float:
        """The allowed error for quantities of magnitude ``scale``: ``atol + rtol |scale|``.

        Parameters
        ----------
        scale : float
            Magnitude of the quantity (or of the terms it was computed from).

        Returns
        -------
        float

        Examples
        --------
        >>> Tolerance(rtol=0.5, atol=1.0).bound(-4.0)
        3.0
        """
        return self.atol + self.rtol * abs(float(scale))

    def close(self, a: float, b: float, scale: float | None = None) -> bool:
        """Whether ``|a - b| <= bound(scale)``.

        Parameters
        ----------
        a, b : float
            The two values.
        scale : float, optional
            Magnitude for the relative part; default ``max(|a|, |b|)``.

        Returns
        -------
        bool

        Examples
        --------
        >>> Tolerance(rtol=1e-3, atol=0.0).close(1000.0, 1000.5)
        True
        >>> Tolerance(rtol=1e-3, atol=0.0).close(1000.0, 1000.5, scale=1.0)
        False
        """
        s = max(abs(float(a)), abs(float(b))) if scale is None else scale
        return abs(float(a) - float(b)) <= self.bound(s)


def tolerance(kind: str = "exact", dtype: DTypeLike = np.float64, *, d: int = 1) -> Tolerance:
    """The tolerance for a kind of computation in a dtype.

    Parameters
    ----------
    kind : {"exact", "kernel", "solver"}
        ``exact`` for closed forms, ``kernel`` for d-term reductions, ``solver``
        for conic solvers.
    dtype : numpy dtype
        The working precision.
    d : int
        Length of the inner products (``kernel`` only), ``>= 1``; integers of
        any size (``4 (d + 2) u`` is formed exactly and rounded once).

    Raises
    ------
    ValueError
        For an unknown ``kind``, ``d < 1``, or ``4 (d + 2) u`` beyond float64.

    Examples
    --------
    >>> tolerance("exact").rtol
    2.842170943040401e-14
    """
    if kind not in ("exact", "kernel", "solver"):
        raise ValueError(f"kind must be 'exact', 'kernel' or 'solver'; got {kind!r}")
    n = _v.integer(d, "d", minimum=1)
    u = unit_roundoff(dtype)
    if kind == "exact":
        return Tolerance(rtol=256 * u, atol=256 * u)
    if kind == "kernel":
        # 4 (d + 2) u as int / int (u = 2^-p): correctly rounded for d of any size
        p = -math.frexp(u)[1] + 1
        try:
            rtol = (4 * (n + 2)) / (1 << p)
        except OverflowError:
            raise ValueError(f"d is too large: the kernel tolerance 4 (d + 2) u exceeds the float64 range "
                             f"(d has {n.bit_length()} bits)") from None
        return Tolerance(rtol=rtol, atol=0.0)
    return Tolerance(rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- named accuracies
SDP_RTOL = 1e-7
"""Relative accuracy of the Shor SDP value (``hilbertgeom.equalize._shor_sdp``, the upper
bound of :func:`hilbertgeom.equalized_descent` for ``delta > 0``).  CLARABEL stops at a
relative duality gap of ``1e-8`` (its default ``tol_gap_rel``, feasibility ``1e-8``); the
value is widened by ten times that, ``1e-7`` of itself, to be an upper bound.  Two such
values of the same problem agree to ``2 SDP_RTOL``; the relaxation's ``S`` satisfies the
diameter constraint to ``SDP_RTOL``."""

EQUALIZER_RTOL = 1e-9
"""The smallest relative gain of the separation ratio that :func:`hilbertgeom.equalize_rows`
counts as an improvement (its ``patience`` rule): a ratio within ``1 + 1e-9`` of the best
so far is stagnation."""
