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
A few pairs of two tail rows (660 of 1.1 million on the trained MiniLM gradient)
would make that prefix the whole vocabulary: those pairs are covered by *linked*
rows instead, eliminated with the hubs through a sparse block of their weights to
the tail (:class:`Hubs`).
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
#: pairs that no hub touches are covered by "linked" rows (a vertex cover of those pairs, made
#: greedily): at most this many such pairs, and at most this many linked rows
_MAX_REST = 1 << 14
_MAX_LINKED = 1024
#: a squared distance from the GEMM below this share of ``|phi_i|^2 + |phi_j|^2`` (both
#: centred) is recomputed from the difference: the GEMM form loses relative accuracy there
_RECHECK = 1e-3


def _work(work: dict | None, name: str, shape: tuple[int, ...], dtype=np.float64) -> np.ndarray:
    """An uninitialised array of ``shape``: the one kept under ``name`` in ``work`` (made there
    on first use, or again where the shape changed), or a new one where ``work`` is ``None``.
    glibc maps each array of more than 32 MB afresh and the kernel faults its pages in one by
    one: on a full dense block of the shipped MiniLM gradient at full vocabulary (184 hubs,
    30,338 tail rows) a solve and its distances took 0.29 s with their ``t x d`` and ``k x t``
    arrays kept, against 0.32-0.34 s with them made afresh (twelve of each, alternately)."""
    if work is None:
        return np.empty(shape, dtype)
    buf = work.get(name)
    if buf is None or buf.shape != shape or buf.dtype != dtype:
        buf = work[name] = np.empty(shape, dtype)
    return buf


def _cover(a: np.ndarray, b: np.ndarray, deg: np.ndarray) -> list[int]:
    """A vertex cover of the pairs ``(a, b)``, greedily: each pair not yet covered takes its
    end with more of these pairs (ties: the end of larger ``deg``, then the smaller index)."""
    n = np.bincount(np.concatenate([a, b]))
    chosen: set[int] = set()
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        if x in chosen or y in chosen:
            continue
        chosen.add(max((x, y), key=lambda r: (n[r], deg[r], -r)))
    return sorted(chosen, key=lambda r: (-deg[r], r))


class Hubs:
    """The hub structure of the pairs ``(I, J)`` of ``V`` rows.

    ``hubs`` (``k`` rows) touch every pair, so the other rows, the ``tail``, are an
    independent set of the pair graph.  Its first ``kd`` rows are the rows of largest degree
    (the dense hubs: their pairs with the tail form the dense block ``B``); the others, if any,
    are *linked* rows, a vertex cover of the few pairs that no dense hub touches (on the
    trained MiniLM gradient at full vocabulary, 660 of 1,137,418 pairs join two tail rows, and
    79 rows cover them); their pairs with the tail are kept sparse.  For each pair: ``ht`` the
    dense-hub-tail pairs with the hub's position ``a`` and the tail position ``t``; ``lt`` the
    linked-tail pairs (positions ``la`` among the linked rows, ``lt_t`` in the tail); ``hh``
    the pairs of two hubs (positions ``ha``, ``hb``)."""

    def __init__(self, I: np.ndarray, J: np.ndarray, V: int, hubs: np.ndarray, kd: int):
        k = hubs.size
        self.V, self.k, self.kd = V, k, kd
        in_hubs = np.zeros(V, bool)
        in_hubs[hubs] = True
        self.hubs, self.tail = hubs, np.flatnonzero(~in_hubs)
        pos = np.full(V, -1, np.intp)
        pos[hubs] = np.arange(k)
        pos[self.tail] = np.arange(self.tail.size)
        self.pos, self.in_hubs = pos, in_hubs  # each row's place among the hubs or in the tail
        self.I, self.J = I, J
        hI, hJ = in_hubs[I], in_hubs[J]
        both = hI & hJ
        self.hh = np.flatnonzero(both)
        self.ha, self.hb = pos[I[self.hh]], pos[J[self.hh]]
        one = np.flatnonzero(~both)  # every pair touches the hubs: exactly one end is a hub here
        hub_end = np.where(hI[one], I[one], J[one])
        tail_end = np.where(hI[one], J[one], I[one])
        ph = pos[hub_end]
        dense = ph < kd
        self.ht, self.a, self.t = one[dense], ph[dense], pos[tail_end[dense]]
        self.lt, self.la, self.lt_t = one[~dense], ph[~dense] - kd, pos[tail_end[~dense]]
        nT = V - k
        # each dense-hub-tail pair's place in the dense block (kd x nT, row-major); where two pairs
        # share a place (the same rows twice), their weights are added by bincount instead
        self.flat = self.a * nT + self.t
        self.shared = bool(self.flat.size) and int(np.bincount(self.flat, minlength=kd * nT).max()) > 1
        # the dense-hub-tail pairs are the first ones, in the dense block's order (Hubs.block_order):
        # their weights and distances are read and written as one slice
        self.prefix = bool(np.array_equal(self.ht, np.arange(self.ht.size)))
        self.again = np.union1d(self.hh, self.lt)  # pairs whose distance is taken from the difference

    @classmethod
    def of(cls, I: np.ndarray, J: np.ndarray, V: int) -> Hubs | None:
        """The structure, or ``None`` where the hubs would be too many: the dense hubs are the
        shortest prefix of the rows by degree (ties by index) that touches every pair touched by
        the first ``_MAX_HUBS`` rows, with ``kd (V - kd) <= _MAX_BLOCK``; the pairs left (at
        most ``_MAX_REST``) are covered by at most ``_MAX_LINKED`` linked rows (:func:`_cover`)."""
        if I.size == 0:
            return None
        deg = np.bincount(I, minlength=V) + np.bincount(J, minlength=V)
        order = np.argsort(-deg, kind="stable")
        rank = np.empty(V, np.intp)
        rank[order] = np.arange(V)
        lo = np.minimum(rank[I], rank[J])
        near = lo < _MAX_HUBS
        if not near.any():
            return None
        kd = int(lo[near].max()) + 1
        if kd * (V - kd) > _MAX_BLOCK:
            return None
        rest = np.flatnonzero(lo >= kd)
        linked: list[int] = []
        if rest.size:
            if rest.size > _MAX_REST:
                return None
            linked = _cover(I[rest], J[rest], deg)
            if len(linked) > _MAX_LINKED:
                return None
        return cls(I, J, V, np.concatenate([order[:kd], np.asarray(linked, np.intp)]), kd)

    def _blocks(self, w: np.ndarray, work: dict | None = None):
        """``(B, BL, dT, A, degH)``: dense-hub-tail weights ``kd x t``, linked-tail weights
        (sparse, ``(k - kd) x t``; ``None`` without linked rows), tail degrees, hub-hub weights
        ``k x k`` (symmetric) and hub degrees.  ``work``: as in :meth:`solve` (``B`` is then
        one of its arrays)."""
        k, kd, nT = self.k, self.kd, self.V - self.k
        n = self.ht.size
        wt = w[:n] if self.prefix else np.take(w, self.ht, out=_work(work, "wt", (n,)))
        flat: np.ndarray
        if self.shared:
            flat = np.bincount(self.flat, wt, kd * nT)
        else:
            flat = _work(work, "flat", (kd * nT,))
            flat.fill(0.0)
            flat[self.flat] = wt
        B = flat.reshape(kd, nT)
        dT = B.sum(axis=0)
        A = np.zeros((k, k))
        np.add.at(A, (self.ha, self.hb), w[self.hh])
        A += A.T
        degH = A.sum(axis=1)
        degH[:kd] += B.sum(axis=1)
        BL = None
        if k > kd:
            from scipy.sparse import csr_matrix

            wl = w[self.lt]
            BL = csr_matrix((wl, (self.la, self.lt_t)), shape=(k - kd, nT))
            dT += np.bincount(self.lt_t, wl, nT)
            degH[kd:] += np.bincount(self.la, wl, k - kd)
        return B, BL, dT, A, degH

    def potential(self, X: np.ndarray, w: np.ndarray) -> np.ndarray | None:
        """``Phi`` solving ``L_w Phi = X`` with the first hub of each connected component
        at 0 and isolated tail rows at 0 (the equations of those rows are dropped: their
        part of ``X`` is the residual), by elimination of the tail; ``None`` where the
        Schur complement is not numerically positive definite (the caller solves sparse)."""
        parts = self.solve(X[self.hubs], X[self.tail], w)
        return None if parts is None else self.assemble(*parts)

    def solve(self, XH: np.ndarray, XT: np.ndarray, w: np.ndarray, work: dict | None = None,
              out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`potential` in parts: ``(PH, PT)``, its hub rows and its tail rows (in the
        orders of ``hubs`` and ``tail``), from ``XH = X[hubs]`` and ``XT = X[tail]`` (not
        changed); ``None`` as there.  A caller that solves many times with one ``X`` gathers
        ``XH`` and ``XT`` once, and :meth:`sq_of_parts` takes the parts as they are.  Such a
        caller may also pass ``work``, a dict in which the dense block's work arrays are kept
        from one call to the next (:func:`_work`), and ``out``, a C-contiguous float64 array of
        ``XT``'s shape that receives ``PT`` (the same numbers)."""
        from scipy.sparse.csgraph import connected_components

        kd = self.kd
        B, BL, dT, A, degH = self._blocks(w, work)
        inv = np.divide(1.0, dT, out=np.zeros_like(dT), where=dT > 0)
        Bs = np.multiply(B, inv, out=_work(work, "Bs", B.shape))
        S = np.diag(degH) - A
        S[:kd, :kd] -= Bs @ B.T
        rhs = np.array(XH, dtype=np.float64, copy=True)
        rhs[:kd] += Bs @ XT
        if BL is not None:
            BLs = BL.multiply(inv[None, :]).tocsr()
            C = BL @ Bs.T  # linked x dense hubs
            S[kd:, :kd] -= C
            S[:kd, kd:] -= C.T
            S[kd:, kd:] -= (BLs @ BL.T).toarray()
            rhs[kd:] += BLs @ XT
        link = S != 0
        np.fill_diagonal(link, False)
        _, comp = connected_components(link, directed=False)
        free = np.ones(self.k, bool)
        free[np.unique(comp, return_index=True)[1]] = False
        PH = np.zeros((self.k, XH.shape[1]))
        if free.any():
            try:
                PH[free] = _spd_solve(S[np.ix_(free, free)], rhs[free])
            except np.linalg.LinAlgError:
                return None
        PT = B.T @ PH[:kd] if out is None else np.matmul(B.T, PH[:kd], out=out)
        PT += XT
        if BL is not None:
            PT += BL.T @ PH[kd:]
        PT *= inv[:, None]
        return PH, PT

    def assemble(self, PH: np.ndarray, PT: np.ndarray) -> np.ndarray:
        """The ``V x d`` potential whose hub rows are ``PH`` and tail rows ``PT``."""
        Phi = np.empty((self.V, PH.shape[1]))
        Phi[self.hubs] = PH
        Phi[self.tail] = PT
        return Phi

    def block_order(self) -> np.ndarray | None:
        """A permutation of the pairs that puts the dense-hub-tail pairs first, in the order of
        their places in the dense block, the others after them; ``None`` where they are in
        that order already.  With the pairs so ordered (their weights too), building the block
        and reading the distances off it go through memory in order: on the shipped MiniLM
        gradient's round-2 flow at full vocabulary (5.6 million pairs) the distances took
        224 ms against 286 ms and the solve 387 ms against 414 ms."""
        key = np.full(self.I.size, np.iinfo(np.int64).max, np.int64)
        key[self.ht] = self.flat
        if np.all(key[:-1] <= key[1:]):
            return None
        return np.argsort(key, kind="stable")

    def apply(self, w: np.ndarray, Phi: np.ndarray) -> np.ndarray:
        """``L_w Phi``."""
        kd = self.kd
        B, BL, dT, A, degH = self._blocks(w)
        PH, PT = Phi[self.hubs], Phi[self.tail]
        out = np.empty_like(Phi)
        OH = degH[:, None] * PH - A @ PH
        OH[:kd] -= B @ PT
        OT = dT[:, None] * PT - B.T @ PH[:kd]
        if BL is not None:
            OH[kd:] -= BL @ PT
            OT -= BL.T @ PH[kd:]
        out[self.hubs] = OH
        out[self.tail] = OT
        return out

    def sq_distances(self, Phi: np.ndarray) -> np.ndarray:
        """``||phi_i - phi_j||^2`` for every pair: dense-hub-tail pairs by ``|p_a|^2 + |p_t|^2 -
        2 <p_a, p_t>`` of the centred rows (the inner products one GEMM ``P_H P_T^T``, the dense
        block's shape), those below ``_RECHECK`` of ``|p_a|^2 + |p_t|^2``, the hub-hub pairs and
        the linked-tail pairs from their differences."""
        return self.sq_of_parts(Phi[self.hubs], Phi[self.tail])

    def sq_of_parts(self, PH: np.ndarray, PT: np.ndarray, work: dict | None = None) -> np.ndarray:
        """:meth:`sq_distances` of the potential whose hub rows are ``PH`` and tail rows ``PT``
        (:meth:`solve`), which are not changed; ``work`` as in :meth:`solve`."""
        mu = (PH.sum(axis=0) + PT.sum(axis=0)) / self.V
        PD = PH[: self.kd] - mu
        PC = np.subtract(PT, mu, out=_work(work, "PC", PT.shape))
        hub_n, tail_n = np.einsum("ij,ij->i", PD, PD), np.einsum("ij,ij->i", PC, PC)
        shape = (self.kd, PT.shape[0])
        R = np.add(hub_n[:, None], tail_n[None, :], out=_work(work, "R", shape))  # |p_a|^2 + |p_t|^2
        D2 = np.matmul(PD, PC.T, out=_work(work, "D2", shape))
        del PC
        D2 *= -2.0
        D2 += R
        sq = np.zeros(self.I.size)
        if self.prefix:
            np.take(D2.ravel(), self.flat, out=sq[: self.ht.size])
        else:
            sq[self.ht] = D2.ravel()[self.flat]
        np.maximum(sq, 0.0, out=sq)
        R *= _RECHECK
        close = np.less(D2, R, out=_work(work, "close", shape, bool)).ravel()[self.flat]
        del D2, R
        again = np.union1d(self.ht[close], self.again)
        for sl in _chunk_slices(again.size, PH.shape[1]):
            e = again[sl]
            D = self._rows(PH, PT, self.I[e])
            D -= self._rows(PH, PT, self.J[e])
            sq[e] = np.einsum("ij,ij->i", D, D)
        return sq

    def _rows(self, PH: np.ndarray, PT: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Rows ``r`` of the potential whose hub rows are ``PH`` and tail rows ``PT``."""
        out = np.empty((r.size, PH.shape[1]))
        h = self.in_hubs[r]
        out[h] = PH[self.pos[r[h]]]
        out[~h] = PT[self.pos[r[~h]]]
        return out

    def pair_products(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """``<p_i - p_j, q_i - q_j>`` for every pair: dense-hub-tail pairs by ``<a_h, b_h> + <a_t,
        b_t> - <a_h, b_t> - <a_t, b_h>`` of the centred rows ``a = P - mean P``, ``b = Q - mean Q``
        (the cross terms two GEMMs of the dense block's shape), each within ``4 (d + 2) u (|a_h| +
        |a_t|) (|b_h| + |b_t|)`` of the exact product; the hub-hub and linked-tail pairs from their
        differences.  With ``Q = P`` these are the squared distances, which :meth:`sq_distances`
        gives to a few roundings of themselves."""
        A, B = P - P.mean(axis=0), Q - Q.mean(axis=0)
        hubs = self.hubs[: self.kd]
        AH, BH, AT, BT = A[hubs], B[hubs], A[self.tail], B[self.tail]
        own_h, own_t = np.einsum("ij,ij->i", AH, BH), np.einsum("ij,ij->i", AT, BT)
        D = AH @ BT.T
        D += BH @ AT.T
        D *= -1.0
        D += own_h[:, None]
        D += own_t[None, :]
        out = np.zeros(self.I.size)
        out[self.ht] = D.ravel()[self.flat]
        del D
        for sl in _chunk_slices(self.again.size, P.shape[1]):
            e = self.again[sl]
            out[e] = np.einsum("ij,ij->i", P[self.I[e]] - P[self.J[e]], Q[self.I[e]] - Q[self.J[e]])
        return out


def _spd_solve(A: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``A^-1 R`` for a symmetric positive definite ``A`` by its Cholesky factor ``C``
    (``np.linalg.LinAlgError`` where ``A`` is not numerically positive definite), the two
    triangular systems by LU.  NumPy's LAPACK, not SciPy's: the wheels of the two each
    carry their own OpenBLAS, each with its own pool of threads, and a SciPy call between
    NumPy's GEMMs waited for NumPy's threads to stop spinning: on the shipped MiniLM flow
    at full vocabulary (184 hubs) ``cho_factor`` took from 0.5 to 110 ms, 59 ms on average,
    and the GEMM after it twice its time alone.  This takes 3.5 ms there."""
    C = np.linalg.cholesky(A)
    return np.linalg.solve(C.T, np.linalg.solve(C, R))
