"""Result types and the certificate: :class:`Flow`, :class:`TensionResult`,
:class:`TensionBounds`, and the one function that turns any potential and any
explicit flow into a rigorous bracket on ``T(G)``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from .._fp import max_abs, scale_to_unit
from .._pairs import distance_sum_upper, equal_row_classes, pairs_beyond
from ..rows import row_diameter

__all__ = ["Flow", "TensionBounds", "TensionResult"]

_U64 = float(np.finfo(np.float64).eps) / 2.0
_NORM_CHUNK = 1 << 22
#: :func:`_flow_norms` sums the squares of a float64 row unscaled where their sum lies in this range:
#: no square overflows, and the squares that underflow, each wrong by less than ``2^-1022``, move a
#: sum of at least ``2^-900`` by less than ``d 2^-1022``, below its rounding for any ``d < 2^69``.
#: The scaled sums took 6-7 times as long (2048 rows of 384 entries: 3.1 ms against 0.43 ms)
_SQ_LOW, _SQ_HIGH = 2.0**-900, 2.0**900
#: :func:`_flow_of` bounds the residual's repair by the tiled balanced-flow cost only where the bound
#: ``(V - 1) / V sum ||r_i||`` is above this share of the explicit part's cost: the tiled cost is
#: never below half that bound (for centred residuals), so below it the gain is at most ``2^-41`` of
#: the cost.  On the shipped MiniLM gradient at full vocabulary the residual of the refinement's
#: flow is 3.9e-15 of the cost, and the tiled pass took 14 s of the certificate
_TILED_RESIDUAL = 2.0**-40


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Flow:
    """A flow on the complete graph of tokens that balances ``G`` exactly.

    The explicit part carries ``y_e`` from ``pairs[e, 0]`` to ``pairs[e, 1]``
    (``y_ij`` with ``i < j``, ``y_ji = -y_ij``).  It is kept in one of two forms:

    * explicit: ``vectors``, one ``d``-vector per pair;
    * scalar-weighted: ``y_e = weights[e] * (base[i] - base[j])`` for a ``(V, d)``
      array ``base`` (a weighted-Laplacian potential), ``O(pairs + V d)`` memory.
      The optimal flow has this form (``y_ij = lambda_ij (phi_i - phi_j)``), and
      ``min_tension(method="refine")`` returns it so, because its pairs may
      number millions.  ``vectors`` is then computed on demand by that formula
      (``pairs x d`` floats); :meth:`norms` and :meth:`divergence` work in chunks
      without it.

    What the explicit part leaves unbalanced, ``residual = G - div(y)`` (zero
    column sums, tiny at convergence), is carried by the balanced flow
    ``(r_i - r_j) / V`` on every pair (identity I11), kept implicit: its cost
    ``(1/V) sum_{i<j} ||r_i - r_j||`` is summed in tiles and rounded up, and
    capped by the bound ``(V - 1)/V * sum_i ||r_i||`` (that bound alone where it is
    below ``2^-40`` of the explicit part's cost).

    Immutable; ``dataclasses.replace`` works (for example on ``cost``).

    Parameters
    ----------
    pairs : (m, 2) int ndarray
    vectors : (m, d) float64 ndarray, optional
        The explicit form; give either ``vectors`` or ``weights`` and ``base``.
    residual : (V, d) float64 ndarray
    cost : float
    weights : (m,) float64 ndarray, optional
        The scalar-weighted form's weights.
    base : (V, d) float64 ndarray, optional
        The scalar-weighted form's potential.
    _vectors : ndarray, optional
        The stored vectors under their field name (what ``dataclasses.replace``
        passes); ``vectors`` wins when both are given.

    Attributes
    ----------
    pairs : (m, 2) int ndarray
    vectors : (m, d) float64 ndarray
        Explicit, or made from ``weights`` and ``base`` on each access.
    residual : (V, d) float64 ndarray
    cost : float
        ``sum_e ||y_e||`` plus the residual's balanced-flow cost (at most
        ``(V-1)/V sum_i ||residual_i||``), rounded up: an upper bound on
        ``T(G)``.
    weights : (m,) float64 ndarray or None
        The scalar weights of the scalar-weighted form, else ``None``.
    base : (V, d) float64 ndarray or None
        Its potential, else ``None``.
    """

    pairs: np.ndarray
    _vectors: np.ndarray | None
    residual: np.ndarray
    cost: float
    weights: np.ndarray | None
    base: np.ndarray | None

    def __init__(self, pairs: np.ndarray, vectors: np.ndarray | None = None, residual: np.ndarray | None = None,
                 cost: float = 0.0, *, weights: np.ndarray | None = None, base: np.ndarray | None = None,
                 _vectors: np.ndarray | None = None) -> None:
        if vectors is None:
            vectors = _vectors
        if (vectors is None) == (weights is None) or (weights is None) != (base is None):
            raise ValueError("Flow: give either vectors, or weights together with base")
        if residual is None:
            raise ValueError("Flow: residual is required")
        for name, val in (("pairs", pairs), ("_vectors", vectors), ("residual", residual), ("cost", cost),
                          ("weights", weights), ("base", base)):
            object.__setattr__(self, name, val)

    def __repr__(self) -> str:
        form = "explicit" if self.weights is None else "scalar-weighted"
        return (f"Flow({self.pairs.shape[0]} pairs, {form}, d={self.residual.shape[1]}, "
                f"cost={self.cost!r})")

    @property
    def explicit(self) -> bool:
        """True when the vectors are stored, False for the scalar-weighted form."""
        return self.weights is None

    @property
    def vectors(self) -> np.ndarray:
        """``(m, d)`` flow vectors: stored, or ``weights[e] * (base[i] - base[j])``
        made now (``m x d`` floats; prefer :meth:`norms` and :meth:`divergence`
        for large ``m``)."""
        if self._vectors is not None:
            return self._vectors
        return _pair_vectors(self.pairs[:, 0], self.pairs[:, 1], self.weights, self.base)

    def chunks(self) -> Iterator[tuple[slice, np.ndarray]]:
        """The flow vectors ``(slice, y)`` chunk by chunk (32 MiB each)."""
        d = self.residual.shape[1]
        I, J = self.pairs[:, 0], self.pairs[:, 1]
        for sl in _chunk_slices(I.size, d):
            if self._vectors is not None:
                yield sl, self._vectors[sl]
            else:
                yield sl, _pair_vectors(I, J, self.weights, self.base, sl)

    def norms(self) -> np.ndarray:
        """``||y_e||`` per pair, computed chunk by chunk."""
        if self.pairs.shape[0] == 0:
            return np.zeros(0)
        return np.concatenate([_flow_norms(y) for _, y in self.chunks()])

    def divergence(self, V: int) -> np.ndarray:
        """``sum_j y_ij`` of the explicit part, a ``(V, d)`` array.

        Parameters
        ----------
        V : int
            Number of tokens: the rows of ``G``.  The pairs index rows
            ``0 .. V-1``, so ``V`` must exceed every entry of ``pairs``.

        Returns
        -------
        (V, d) float64 ndarray
            Row ``i`` is ``sum_e y_e`` over the pairs leaving ``i`` minus the
            same sum over the pairs entering ``i``; zeros when the explicit part
            is empty.  Summed chunk by chunk for the scalar-weighted form.
        """
        if self._vectors is not None:
            return _divergence(self.pairs[:, 0], self.pairs[:, 1], self._vectors, V)
        div = np.zeros((V, self.residual.shape[1]))
        for sl, y in self.chunks():
            _add_divergence(div, self.pairs[sl, 0], self.pairs[sl, 1], y)
        return div

    def scaled(self, k: int) -> Flow:
        """This flow for ``G 2^k``: vectors (or ``base``) and residual times ``2^k``
        (exact, rounding once where a result is subnormal); ``cost`` is left as
        it is: the caller rounds it up.

        Parameters
        ----------
        k : int
            The power of two.

        Returns
        -------
        Flow
            In the same form as this one.
        """
        with np.errstate(over="ignore"):
            if self._vectors is not None:
                return Flow(self.pairs, np.ldexp(self._vectors, k), np.ldexp(self.residual, k), self.cost)
            return Flow(self.pairs, None, np.ldexp(self.residual, k), self.cost, weights=self.weights,
                        base=np.ldexp(cast(np.ndarray, self.base), k))


def _chunk_slices(n: int, d: int):
    step = max(1, _NORM_CHUNK // max(d, 1))
    return (slice(a, min(a + step, n)) for a in range(0, n, step))


def _pair_vectors(I, J, w, base, sl=slice(None)) -> np.ndarray:
    """``w_e (base_I[e] - base_J[e])`` for the pairs ``sl``: the one formula by which a
    scalar-weighted flow becomes vectors."""
    return w[sl, None] * (base[I[sl]] - base[J[sl]])


class Weighted(NamedTuple):
    """A scalar-weighted flow's ``(weights, base)``, passed where explicit vectors go."""

    weights: np.ndarray
    base: np.ndarray


@dataclass(frozen=True)
class TensionResult:
    """Certified solution of the minimum-tension problem.

    Attributes
    ----------
    value : float
        ``<G, potential>``: the certified lower bound, reported as ``T(G)``.
    potential : (V, d) ndarray
        Centred, ``D(potential) <= 1`` (to rounding), ``<G, potential> = value``.
    flow : Flow
        Balances ``G`` exactly; ``flow.cost`` is the certified upper bound.
    gap : float
        ``flow.cost - value >= 0``; ``T(G)`` lies in ``[value, value + gap]``.
    status : str
        ``"optimal"`` (relative gap within ``tol``; ``max(tol, 1e-6)`` for the
        cvxpy reference), ``"inaccurate"`` (reference only), or ``"zero"``
        for ``G = 0``.
    method : str
        ``"alm"``, ``"cvxpy-potential"`` or ``"cvxpy-flow"``.
    centered : bool
        True when ``center=True`` projected ``G`` with ``P`` first.
    iterations : int
        Outer iterations (ALM) or solver iterations (cvxpy).
    diameter : float
        Exact ``D(potential)``.
    """

    value: float
    potential: np.ndarray
    flow: Flow
    gap: float
    status: str
    method: str
    centered: bool
    iterations: int
    diameter: float

    @property
    def relative_gap(self) -> float:
        """``gap / value`` (``value`` floored at the smallest normal float64)."""
        return self.gap / max(self.value, np.finfo(float).tiny)


@dataclass(frozen=True)
class TensionBounds:
    """Cheap certified bounds ``lower <= T(G) <= upper`` with their sources."""

    lower: float
    upper: float
    lower_source: str
    upper_source: str


# --------------------------------------------------------------------------- helpers
def _incidence(I, J, V):
    """Sparse ``V x m`` incidence matrix: column ``e`` is ``e_I[e] - e_J[e]``."""
    import scipy.sparse as sp

    m = len(I)
    rows = np.concatenate([I, J])
    cols = np.concatenate([np.arange(m), np.arange(m)])
    data = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csr_matrix((data, (rows, cols)), shape=(V, m))


def _laplacian(I, J, w, V):
    """Sparse ``V x V`` weighted graph Laplacian ``B diag(w) B^T`` of the pairs ``(I, J)``
    (built from its entries: twice as fast as the product at 0.7 million pairs)."""
    import scipy.sparse as sp

    w = np.asarray(w, dtype=np.float64)
    return sp.coo_matrix((np.concatenate([-w, -w, w, w]), (np.concatenate([I, J, I, J]), np.concatenate([J, I, I, J]))),
                         shape=(V, V)).tocsr()


def _divergence(I, J, Y, V):
    """``sum_j y_ij`` for the flow ``Y`` on pairs ``(I, J)``: ``B Y``."""
    if len(I) == 0:
        return np.zeros((V, Y.shape[1]))
    return np.asarray(_incidence(I, J, V) @ Y)


def _add_divergence(div: np.ndarray, I, J, Y) -> None:
    """``div += B Y``, the divergence of the flow ``Y`` on the pairs ``(I, J)``, made on the rows
    the pairs touch only (the incidence of those rows; each row's sum as :func:`_divergence`
    makes it, in the same order).  A chunk of the refinement's flow at full vocabulary (10,922
    pairs at d = 384) touches a third of the 30,522 rows or fewer, and a ``V x d`` result made
    and added for each of its 511 chunks took 21 s of the certificate."""
    if len(I) == 0:
        return
    m = len(I)
    rows, at = np.unique(np.concatenate([I, J]), return_inverse=True)
    div[rows] += np.asarray(_incidence(at[:m], at[m:], rows.size) @ Y)


def _flow_of(G: np.ndarray, I, J, Y) -> Flow:
    """Any flow on pairs ``(I, J)`` as a :class:`Flow` of ``G``: its residual
    ``G - div Y`` and a cost rounded up that includes the residual's repair.
    ``Y``: explicit vectors, or :class:`Weighted` ``(w, base)`` for the flow
    ``w_e (base_i - base_j)``, kept so (its vectors made and summed chunk by chunk,
    by the formula :attr:`Flow.vectors` uses: the same numbers)."""
    V, d = G.shape
    I = np.asarray(I, dtype=np.intp)
    J = np.asarray(J, dtype=np.intp)
    if isinstance(Y, Weighted):
        w = np.asarray(Y.weights, dtype=np.float64)
        lean = Flow(np.stack([I, J], axis=1), None, G, 0.0, weights=w, base=np.asarray(Y.base, dtype=np.float64))
        parts, div = [np.zeros(0)], np.zeros((V, d))
        for sl, y in lean.chunks():  # one pass: each chunk's vectors made once, as Flow.divergence sums them
            parts.append(_flow_norms(y))
            _add_divergence(div, I[sl], J[sl], y)
        norms = np.concatenate(parts)
        r = G - div
    else:
        Y = np.asarray(Y, dtype=np.float64).reshape(len(I), d)
        r = G - _divergence(I, J, Y, V)
        norms = _flow_norms(Y) if len(I) else np.zeros(0)  # no under/overflow of squares
    # the residual is carried by the balanced flow (r_i - r_j)/V (I11): its cost, summed in
    # tiles and rounded up, or the cheaper bound (V-1)/V sum ||r_i|| on it (alone where it is
    # negligible: _TILED_RESIDUAL)
    explicit = float(norms.sum()) * (1.0 + 4.0 * (len(I) + d) * _U64)
    res_cost = (V - 1) / V * float(_rownorms(r).sum()) * (1.0 + 4.0 * V * _U64)
    if res_cost > _TILED_RESIDUAL * explicit:
        res_cost = min(res_cost, _balanced_flow_cost(r, 2048))
    raw = explicit + res_cost
    cost = raw * (1.0 + 4.0 * _U64)  # rounding of the sums
    keep = norms > 0
    pairs = np.stack([I[keep], J[keep]], axis=1)
    if isinstance(Y, Weighted):
        return Flow(pairs, None, r, cost, weights=w[keep], base=lean.base)
    return Flow(pairs, Y[keep], r, cost)


def _feasible_value(G: np.ndarray, Phi: np.ndarray):
    """The lower bound of a certificate: ``Phi`` centred and divided by its exact
    diameter, ``(value <G, Pc>, Pc, D(Pc))`` (the zero potential when the value
    would be negative)."""
    Pc = Phi - Phi.mean(axis=0)
    D = row_diameter(Pc) if G.shape[0] > 1 else 0.0
    if D > 0:
        Pc = Pc / D
        D = row_diameter(Pc)
    value = float(np.sum(G * Pc))
    if value < 0:  # only possible for a useless potential; the zero potential is better
        return 0.0, np.zeros_like(Pc), 0.0
    return value, Pc, D


def _certify(G: np.ndarray, Phi: np.ndarray, I, J, Y, *, method, centered, iterations, tol,
             flow: Flow | None = None) -> TensionResult:
    """Build the certificate from any potential and any explicit flow (``flow``: that
    flow already made by :func:`_flow_of`, not made again)."""
    value, Pc, D = _feasible_value(G, Phi)
    if flow is None:
        flow = _flow_of(G, I, J, Y)
    cost = flow.cost
    # the value <G, potential> is itself rounded (V d products): widen the gap by that
    gap = max(cost - value, 0.0) + 4.0 * (G.size + 2) * _U64 * abs(value)
    status = "optimal" if gap <= tol * max(value, 1e-300) else "inaccurate"
    return TensionResult(value=value, potential=Pc, flow=flow, gap=gap, status=status, method=method,
                         centered=centered, iterations=iterations, diameter=D)



def _rownorms(X, xp=np):
    """Euclidean row norms, each row divided by its largest entry first (no under- or
    overflow of the squares); any array namespace ``xp`` (also :mod:`hilbertgeom.gpu`).
    NumPy arrays of more than ``2^22`` entries go by chunks of rows (the temporaries
    stay at 32 MiB; the norms are the same).  The one kernel of the core and of
    :mod:`hilbertgeom.gpu`: both give the same bits."""
    if xp is np and X.ndim == 2 and X.size > _NORM_CHUNK:
        return np.concatenate([_rownorms(X[sl]) for sl in _chunk_slices(X.shape[0], X.shape[1])])
    m = xp.max(xp.abs(X), axis=1)
    ms = xp.where(m > 0, m, xp.ones_like(m))
    Y = X / xp.reshape(ms, (-1, 1))
    return m * xp.sqrt(xp.sum(Y * Y, axis=1))


def _flow_norms(Y: np.ndarray) -> np.ndarray:
    """The norms of a flow's vectors (:meth:`Flow.norms`, the certificate's cost): a float64
    row whose sum of squares lies in ``[_SQ_LOW, _SQ_HIGH]`` takes the root of that sum (one
    pass), any other row :func:`_rownorms` (scaled).  Both within a ``d``-term dot product's
    rounding and a root of the norm."""
    if Y.ndim != 2 or Y.dtype != np.float64:
        return _rownorms(Y)
    if Y.size > _NORM_CHUNK:
        return np.concatenate([_flow_norms(Y[sl]) for sl in _chunk_slices(Y.shape[0], Y.shape[1])])
    sq = np.einsum("ij,ij->i", Y, Y)
    out = np.sqrt(sq)
    odd = ~((sq >= _SQ_LOW) & (sq <= _SQ_HIGH))  # NaN too
    if odd.any():
        out[odd] = _rownorms(Y[odd])
    return out


def _balanced_flow_cost(X, tile: int, xp=np) -> float:
    """``(1/V) sum_{i<j} ||x_i - x_j||`` rounded up, in tiles (no V x V array), for a
    float64 ``X`` of any array namespace ``xp`` (also run by :mod:`hilbertgeom.gpu`).

    One pass of the shared tiled-distance primitive
    (:func:`hilbertgeom._pairs.distance_sum_upper`): blocks of rows sorted by
    norm, re-centred on their mean before the GEMM, each squared distance
    raised by its own error bound.  Exactly equal rows are merged
    (:func:`hilbertgeom._pairs.equal_row_classes`; weights: multiplicities);
    near-coincident rows (the Zipf tail of a head gradient) get a tight bound
    from the re-centring, with no direct recomputation: the cost is one half
    ``V x V x d`` GEMM plus ``O(V^2)`` elementwise work.
    """
    V = X.shape[0]
    C = X - xp.mean(X, axis=0)
    m = max_abs(C, xp)
    if m == 0.0:
        return 0.0
    C, k = scale_to_unit(C, m)  # exact rescaling: no under/overflow of squares
    # exactly equal rows are at distance 0: merge them, weight pairs by multiplicities
    reps, _, counts = equal_row_classes(C, xp)
    w = None
    if reps.shape[0] < V:
        C, w = xp.take(C, reps, axis=0), xp.astype(counts, xp.float64)
    return math.ldexp(distance_sum_upper(C, xp, tile=tile, weights=w), -k) / V * (1.0 + 2.0 * _U64)


def _violated_pairs(P: np.ndarray, I: np.ndarray, J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``i < j`` of rows of ``P`` farther apart than 1 (in float64, screened by
    :func:`~hilbertgeom._pairs.pairs_beyond`, the shared tiled-distance primitive) that are
    not among the pairs ``(I, J)`` (in either order): the ALM's new support edges, and, where
    ``P = L_w^+ X``, the pairs whose weight, raised from 0, lowers the refinement's descent
    ``F`` (its gradient there is ``(1 - ||p_i - p_j||^2) / 2 < 0``)."""
    V = P.shape[0]
    # sorted, not made unique: np.unique took 8.1 s on a flow of 5.6 million pairs, the sort 0.5 s
    have = np.sort(np.minimum(I, J).astype(np.int64) * V + np.maximum(I, J)) if I.size else None
    a, b = pairs_beyond(P, np, 1.0, skip=have)  # the flow's own pairs are not confirmed
    return a.astype(np.intp), b.astype(np.intp)
