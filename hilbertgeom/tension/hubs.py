"""Weighted Laplacians whose pairs all touch a few rows (hubs).

The refinement's flows on a real head gradient join each row of the tail to the
few hundred large rows and almost never two tail rows (the shipped MiniLM gradient
at full vocabulary: 5,334,969 pairs, every one touching the 184 rows of largest
degree).  The tail rows are then an independent set of the pair graph: the
Laplacian's tail block ``D_T`` is diagonal and eliminating it (Kron reduction) leaves
a dense ``k x k`` Schur complement on the hubs,

    ``S = L_HH - B D_T^-1 B^T``,  ``B`` the ``k x t`` hub-tail weights,

so ``L_w Phi = X`` is solved exactly by one Cholesky factorization of ``S`` and two
GEMMs, and the pairs' squared distances ``||phi_i - phi_j||^2`` come from one GEMM
``Phi_H Phi_T^T`` instead of ``pairs x d`` gathered differences.  On that gradient:
a solve and the distances in about 1 s together, where the sparse LU took 10 s (4.8 of
them building the sparse matrix) and the gathered differences 13 s.

:meth:`Hubs.of` finds the hubs (the shortest prefix of the rows by degree that
touches every pair) and returns ``None`` when that prefix is too large for the
dense blocks; the callers then use the sparse LU and the gathered differences.
"""

from __future__ import annotations

import numpy as np

from ._results import _chunk_slices

__all__: list[str] = []  # used by tension/refine.py

#: the dense hub-tail block ``B`` (and the GEMM of the distances) has at most this many
#: entries (256 MiB in float64); more hubs go to the sparse LU
_MAX_BLOCK = 1 << 25
#: at most this many hubs (the Schur complement costs ``k^2 t`` multiply-adds: 1.1e10 at
#: ``k = 600``, ``t = 30000``, about as long as the sparse LU)
_MAX_HUBS = 600
#: a squared distance from the GEMM below this share of ``|phi_i|^2 + |phi_j|^2`` (both
#: centred) is recomputed from the difference: the GEMM form loses relative accuracy there
_RECHECK = 1e-3


class Hubs:
    """The hub structure of the pairs ``(I, J)`` of ``V`` rows: ``hubs`` (the rows of
    largest degree, ``k`` of them, that touch every pair), ``tail`` (the other rows), and
    for each pair its hub's position ``a`` in ``hubs`` and its other end, as a tail
    position ``t`` (``-1`` for a pair of two hubs, whose other hub is ``b``)."""

    def __init__(self, I: np.ndarray, J: np.ndarray, V: int, order: np.ndarray, k: int):
        rank = np.empty(V, np.intp)
        rank[order] = np.arange(V)
        rI, rJ = rank[I], rank[J]
        lo, hi = np.minimum(rI, rJ), np.maximum(rI, rJ)
        self.V, self.k = V, k
        self.hubs, self.tail = order[:k], order[k:]
        self.I, self.J = I, J
        self.ht = np.flatnonzero(hi >= k)  # hub-tail pairs
        self.hh = np.flatnonzero(hi < k)  # hub-hub pairs
        self.a, self.t = lo[self.ht], hi[self.ht] - k
        self.ha, self.hb = lo[self.hh], hi[self.hh]
        self.by_tail = np.argsort(self.t, kind="stable")  # the hub-tail pairs in tail order

    @classmethod
    def of(cls, I: np.ndarray, J: np.ndarray, V: int) -> Hubs | None:
        """The structure, or ``None`` where no short prefix of the rows by degree touches
        every pair (at most ``_MAX_HUBS`` rows, and ``k (V - k) <= _MAX_BLOCK``)."""
        if I.size == 0:
            return None
        deg = np.bincount(I, minlength=V) + np.bincount(J, minlength=V)
        order = np.argsort(-deg, kind="stable")
        rank = np.empty(V, np.intp)
        rank[order] = np.arange(V)
        k = int(np.minimum(rank[I], rank[J]).max()) + 1
        if k > _MAX_HUBS or k * (V - k) > _MAX_BLOCK:
            return None
        return cls(I, J, V, order, k)

    def _blocks(self, w: np.ndarray):
        """``(B, dT, A, degH)``: hub-tail weights ``k x t``, tail degrees, hub-hub
        weights ``k x k`` (symmetric) and hub degrees."""
        k, nT = self.k, self.V - self.k
        wt = w[self.ht]
        B = np.bincount(self.a * nT + self.t, wt, k * nT).reshape(k, nT)
        dT = np.bincount(self.t, wt, nT)
        A = np.zeros((k, k))
        np.add.at(A, (self.ha, self.hb), w[self.hh])
        A += A.T
        return B, dT, A, B.sum(axis=1) + A.sum(axis=1)

    def potential(self, X: np.ndarray, w: np.ndarray) -> np.ndarray | None:
        """``Phi`` solving ``L_w Phi = X`` with the first hub of each connected component
        at 0 and isolated tail rows at 0 (the equations of those rows are dropped: their
        part of ``X`` is the residual), by elimination of the tail; ``None`` where the
        Schur complement is not numerically positive definite (the caller solves sparse)."""
        from scipy.linalg import LinAlgError, cho_factor, cho_solve
        from scipy.sparse.csgraph import connected_components

        B, dT, A, degH = self._blocks(w)
        inv = np.divide(1.0, dT, out=np.zeros_like(dT), where=dT > 0)
        Bs = B * inv
        S = np.diag(degH) - A - Bs @ B.T
        link = S != 0
        np.fill_diagonal(link, False)
        _, comp = connected_components(link, directed=False)
        free = np.ones(self.k, bool)
        free[np.unique(comp, return_index=True)[1]] = False
        XT = X[self.tail]
        PH = np.zeros((self.k, X.shape[1]))
        if free.any():
            try:
                fac = cho_factor(S[np.ix_(free, free)])
            except LinAlgError:
                return None
            PH[free] = cho_solve(fac, (X[self.hubs] + Bs @ XT)[free])
        Phi = np.empty_like(X)
        Phi[self.hubs] = PH
        Phi[self.tail] = (XT + B.T @ PH) * inv[:, None]
        return Phi

    def apply(self, w: np.ndarray, Phi: np.ndarray) -> np.ndarray:
        """``L_w Phi``."""
        B, dT, A, degH = self._blocks(w)
        PH, PT = Phi[self.hubs], Phi[self.tail]
        out = np.empty_like(Phi)
        out[self.hubs] = degH[:, None] * PH - A @ PH - B @ PT
        out[self.tail] = dT[:, None] * PT - B.T @ PH
        return out

    def sq_distances(self, Phi: np.ndarray) -> np.ndarray:
        """``||phi_i - phi_j||^2`` for every pair: hub-tail pairs by ``|p_a|^2 + |p_t|^2 -
        2 <p_a, p_t>`` of the centred rows (the inner products one GEMM, in column tiles of
        at most ``_MAX_BLOCK`` entries), those below ``_RECHECK`` of ``|p_a|^2 + |p_t|^2``
        and the hub-hub pairs from their differences."""
        P = Phi - Phi.mean(axis=0)
        nrm = np.einsum("ij,ij->i", P, P)
        PH = P[self.hubs]
        sq = np.zeros(self.I.size)
        hub_n, tail_n = nrm[self.hubs], nrm[self.tail]
        order = self.by_tail
        ts = self.t[order]
        step = max(1, _MAX_BLOCK // max(self.k, 1))
        for lo in range(0, self.V - self.k, step):
            hi = min(lo + step, self.V - self.k)
            e0, e1 = np.searchsorted(ts, [lo, hi])
            sel = order[e0:e1]
            Gm = PH @ P[self.tail[lo:hi]].T
            a, t = self.a[sel], self.t[sel]
            sq[self.ht[sel]] = hub_n[a] + tail_n[t] - 2.0 * Gm[a, t - lo]
        np.maximum(sq, 0.0, out=sq)
        again = np.flatnonzero(sq < _RECHECK * (nrm[self.I] + nrm[self.J]))
        again = np.union1d(again, self.hh)
        for sl in _chunk_slices(again.size, P.shape[1]):
            e = again[sl]
            D = P[self.I[e]] - P[self.J[e]]
            sq[e] = np.einsum("ij,ij->i", D, D)
        return sq
