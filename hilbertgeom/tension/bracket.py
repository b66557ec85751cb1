"""A certified bracket on ``T(G)`` at full vocabulary: :func:`tension_bracket`.

The rows are reduced to a few thousand (the largest rows kept as they are, the
rest grouped by direction), the reduced problem is solved by reweighted least
squares on the scalar-weight dual, and both halves of its certificate are
lifted back to the rows of ``G`` with the error of the grouping bounded
explicitly.  See ``docs/theory/tension.md``, "A bracket at full vocabulary".
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .. import _fp
from .. import _validate as _v
from .._fp import ldexp_inf
from .._pairs import cross_distance_upper, sq_distance_tiles
from ..ball import jung_radius
from ..rows import row_diameter
from ._results import _U64, _rownorms

__all__ = ["TensionBracket", "tension_bracket"]


@dataclass(frozen=True)
class TensionBracket:
    """A certified bracket ``lower <= T(G) <= upper`` from a reduced solve.

    Attributes
    ----------
    lower : float
        ``<G, potential>`` rounded down: a feasible value of the potential form.
    upper : float
        The cost of a flow that balances ``G``, rounded up: the reduced flow
        lifted to the rows, plus Jung's bound on what the lift leaves unbalanced.
    potential : (V, d) float64 ndarray
        Centred, exact ``D(potential) <= 1``; every row is one of the reduced
        solve's points (each row takes the point that serves it best).
    labels : (V,) int ndarray
        The reduced row each row of ``G`` belongs to (``0 .. reduced_rows - 1``).
    reduced_rows : int
        Rows of the reduced problem (``V`` when no reduction was needed).
    reduced_cost : float
        The reduced flow's cost (upper bound on ``T`` of the reduced problem),
        at the scale of ``G``.
    spread : float
        The part of ``upper`` that bounds what the lift leaves unbalanced:
        ``J sum_i ||rho_i||`` (0 when no row was grouped).
    steps : int
        Reweighted least-squares steps taken.
    status : str
        ``"optimal"`` (relative gap within ``tol``), ``"step_limit"`` or
        ``"time_limit"``; the bracket is rigorous in every case.
    upper_source : str
        Which flow gave ``upper``: the reduced flow spread over the groups (plus
        ``spread``), or the flow on the pairs of the hub rows (the ``keep``
        largest) with all rows, refined on ``G`` itself.
    """

    lower: float
    upper: float
    potential: np.ndarray
    labels: np.ndarray
    reduced_rows: int
    reduced_cost: float
    spread: float
    steps: int
    status: str
    upper_source: str

    @property
    def relative_gap(self) -> float:
        """``(upper - lower) / lower`` (``inf`` when ``lower = 0 < upper``)."""
        return _relative_gap(self.lower, self.upper)


def _relative_gap(lower: float, upper: float) -> float:
    if lower == 0.0:
        return math.inf if upper > 0.0 else 0.0
    return (upper - lower) / lower


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _best_match(A, B):
    """``argmax_j <a_i, b_j>`` for every row of ``A``, in chunks of rows (memory about
    ``2^24`` entries at a time)."""
    out = np.empty(A.shape[0], np.intp)
    chunk = max(1, (1 << 24) // max(B.shape[0], 1))
    for a in range(0, A.shape[0], chunk):
        out[a : a + chunk] = np.argmax(A[a : a + chunk] @ B.T, axis=1)
    return out


def _direction_groups(X, n, keep: int, groups: int, iters: int, seed: int):
    """Labels ``0 .. keep + groups - 1``: the ``keep`` rows of largest norm alone, the
    others grouped by direction (spherical k-means weighted by norm, ``iters`` Lloyd
    steps from a norm-weighted sample; a heuristic: any grouping is certified)."""
    V = X.shape[0]
    order = np.argsort(-n, kind="stable")
    labels = np.empty(V, np.intp)
    labels[order[:keep]] = np.arange(keep)
    rest = order[keep:]
    nz = rest[n[rest] > 0]
    labels[rest] = keep  # zero rows: any group (they carry nothing)
    if groups <= 0 or nz.size == 0:
        return labels
    U = X[nz] / n[nz, None]
    p = n[nz] / n[nz].max()  # the largest weight is 1: only weights below 2^-1074 of it vanish
    p /= p.sum()
    m = min(groups, int(np.count_nonzero(p)))
    rng = np.random.default_rng(seed)
    C = U[rng.choice(nz.size, m, replace=False, p=p)]
    for _ in range(iters + 1):
        lab = _best_match(U, C)
        S = _group_sums(X[nz], lab, m)
        s = np.sqrt(np.einsum("ij,ij->i", S, S))
        ok = s > 0
        C[ok] = S[ok] / s[ok, None]
    _, lab = np.unique(lab, return_inverse=True)  # numbered 0 .. groups used - 1
    labels[nz] = keep + lab
    return labels


def _reduction(X, n, rows: int, keep: int, seed: int):
    """``(labels, m, R)``: no reduction when ``V <= rows``, else the ``keep`` largest rows
    alone and the rest in ``rows - keep`` direction groups; ``R`` the ``m`` group sums."""
    V = X.shape[0]
    labels = np.arange(V) if V <= rows else _direction_groups(X, n, keep, rows - keep, iters=10, seed=seed)
    m = int(labels.max()) + 1
    return labels, m, _group_sums(X, labels, m)


def _group_sums(X, labels, m):
    """``R[c] = sum_{labels_i = c} x_i``, an ``(m, d)`` array (a sparse one-hot product)."""
    import scipy.sparse as sp

    V = X.shape[0]
    A = sp.csr_matrix((np.ones(V), (labels, np.arange(V))), shape=(m, V))
    return np.asarray(A @ X)


def _lift_weights(X, labels, R):
    """``w_i >= 0`` with ``sum_{i in c} w_i = 1`` (up to rounding) per group ``c`` of
    reduced row ``s_c``: proportional to ``max(<x_i, s_c>, 0)`` (the share of ``s_c``
    nearest to ``x_i``), uniform where that is zero for the whole group.  Returns the
    shares and the group sizes."""
    a = np.maximum(np.einsum("ij,ij->i", X, R[labels]), 0.0)
    tot = np.bincount(labels, weights=a, minlength=R.shape[0])
    cnt = np.bincount(labels, minlength=R.shape[0])
    w = np.where(tot[labels] > 0, a / np.where(tot[labels] > 0, tot[labels], 1.0), 1.0 / cnt[labels])
    return w, cnt


_POWER = 1.5
"""Over-relaxed reweighting in tension_bracket, ``lambda <- lambda dist^1.5``: the same fixed
points (``dist = 1`` on the support), and 30--35% narrower brackets after 100 steps on
the MiniLM gradients of ``docs/theory/tension.md`` than the plain step (``1.75`` was
slightly better still, ``2`` unstable on one of them)."""


def _irls_weights(S: np.ndarray, steps: int, deadline: float, *, verbose: bool = False, t0: float = 0.0,
                 scale: float = 1.0, power: float = 1.0):
    """Reweighted least squares on the scalar-weight dual of ``T(S)``.

    ``T(S) = min_{lambda >= 0} (1/2) sum_e lambda_e + (1/2) tr(S^T L_lambda^+ S)``
    over the pairs of the complete graph; ``Phi = L_lambda^+ S`` and the flow
    ``y_e = lambda_e (phi_i - phi_j)`` balances ``S``.  Each step sets
    ``lambda_e <- lambda_e ||phi_i - phi_j||^power`` (normalised), one dense Cholesky
    factorisation shared by all columns.  Returns ``(lambda, Phi, steps done)``
    at the dual's optimal scaling (``sum lambda / 2 = <S, Phi>``); ``scale`` multiplies the
    costs in the progress lines."""
    from scipy.linalg import cho_factor, cho_solve

    V = S.shape[0]
    lam = np.ones((V, V))
    np.fill_diagonal(lam, 0.0)

    def potential(lam):
        L = -lam
        L[np.diag_indices(V)] = lam.sum(axis=1)
        L += 1.0 / V  # L + 11^T/V is nonsingular for a connected graph; Phi is the same for centred S
        try:
            return cho_solve(cho_factor(L, overwrite_a=False), S)
        except np.linalg.LinAlgError:  # weights underflowed to a disconnected graph: a ridge reconnects it
            L[np.diag_indices(V)] += 1e-12 * float(np.abs(L).max()) + 1e-300
            return cho_solve(cho_factor(L, overwrite_a=True), S)

    done = 0
    for done in range(1, steps + 1):
        Phi = potential(lam.copy())
        sq = np.einsum("ij,ij->i", Phi, Phi)
        dist = sq[:, None] + sq[None, :] - 2.0 * (Phi @ Phi.T)
        np.maximum(dist, 0.0, out=dist)
        np.sqrt(dist, out=dist)
        np.fill_diagonal(dist, 0.0)
        if verbose and (done % 10 == 0 or done == 1):
            cost = 0.5 * float(np.sum(lam * dist))  # the flow's cost (its residual aside), at any scale of lam
            _progress(f"  tension_bracket: step {done:4d}  reduced flow cost ~ {cost * scale:.10g}  "
                      f"{time.perf_counter() - t0:.1f} s")
        lam *= dist if power == 1.0 else dist**power
        lam /= lam.sum()
        np.maximum(lam, 1e-15 * float(lam.max()), out=lam)  # no weight vanishes: the graph stays connected
        np.fill_diagonal(lam, 0.0)
        if time.perf_counter() > deadline:
            break
    Phi = potential(lam.copy())
    c = math.sqrt(max(float(np.sum(S * Phi)), 0.0) / (lam.sum() / 2.0))
    if c > 0:
        lam *= c
        Phi /= c
    return lam, Phi, done


def _pull(Phi: np.ndarray, rounds: int = 60) -> np.ndarray:
    """Rows farther than 1 from some row pulled toward the centroid by ``1/sqrt(their
    largest distance)``, repeatedly."""
    Q = Phi - Phi.mean(axis=0)
    for _ in range(rounds):
        sq = np.einsum("ij,ij->i", Q, Q)
        dist = sq[:, None] + sq[None, :] - 2.0 * (Q @ Q.T)
        far = np.sqrt(np.maximum(dist.max(axis=1), 0.0))
        if far.max() <= 1.0:
            break
        c = Q.mean(axis=0)
        f = np.where(far > 1.0, 1.0 / np.sqrt(np.where(far > 1.0, far, 1.0)), 1.0)
        Q = c + (Q - c) * f[:, None]
    return Q


def _shake(Phi: np.ndarray, weight: np.ndarray, rounds: int = 100) -> np.ndarray:
    """Each pair farther apart than 1 is brought to distance 1 along its own direction,
    the row with the smaller ``weight`` (gradient row norm: the cheaper one to move)
    moving more (shares ``w_j / (w_i + w_j)`` and ``w_i / (w_i + w_j)``); every row
    moves by the average of its pairs' corrections, repeatedly."""
    Q = Phi - Phi.mean(axis=0)
    share = weight[None, :] / np.maximum(weight[:, None] + weight[None, :], np.finfo(float).tiny)
    for _ in range(rounds):
        sq = np.einsum("ij,ij->i", Q, Q)
        dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Q @ Q.T), 0.0))
        np.fill_diagonal(dist, 0.0)
        viol = dist > 1.0
        if not viol.any():
            break
        W = np.where(viol, (dist - 1.0) / np.where(viol, dist, 1.0), 0.0) * share
        cnt = np.maximum(viol.sum(axis=1), 1)[:, None]
        Q = Q + (W @ Q - W.sum(axis=1)[:, None] * Q) / cnt
    return Q


def _repair(Phi: np.ndarray, S: np.ndarray) -> np.ndarray:
    """A potential of diameter 1 near ``Phi`` (dividing ``Phi`` by its diameter alone
    loses the most to a few outlying pairs): the better for ``<S, .>`` of
    :func:`_shake` (pairs brought to distance 1, the cheaper row moving more) and
    :func:`_pull` (far rows pulled toward the centroid), each then divided by its
    exact diameter."""
    if Phi.shape[0] < 2:
        return Phi - Phi.mean(axis=0)
    best, top = Phi, -math.inf
    for Q in (_shake(Phi, _rownorms(S)), _pull(Phi)):
        Q = Q - Q.mean(axis=0)
        D = row_diameter(Q)
        Q = Q / D if D > 0 else Q
        v = float(np.sum(S * Q))
        if v > top:
            best, top = Q, v
    return best


def _flow_bound(lam, Phi, u=_U64):
    """For the flow ``y_ab = lam_ab (phi_a - phi_b)``: an upper bound on its cost
    ``sum_{a<b} lam_ab ||phi_a - phi_b||`` and, per row, on ``sum_b lam_ab ||phi_a - phi_b||``
    (GEMM-screened distances of the shared tiled primitive, each raised by its
    error bound), and its divergence ``L Phi`` with an elementwise error bound."""
    V = Phi.shape[0]
    out = np.zeros(V)
    total, nblocks = 0.0, 0
    for blk in sq_distance_tiles(Phi, np):
        Dt = np.sqrt(np.maximum(blk.D2, 0.0) + blk.E)
        Lb = lam[np.ix_(blk.rows_a, blk.rows_b)] * Dt
        if blk.keep is not None:  # a block with itself: each pair once
            Lb = np.where(blk.keep, Lb, 0.0)
        np.add.at(out, blk.rows_a, Lb.sum(axis=1))
        np.add.at(out, blk.rows_b, Lb.sum(axis=0))
        total += float(Lb.sum())
        nblocks += 1
    grow = 1.0 + (2.0 * math.log2(max(V * V, 2)) + nblocks + 8.0) * u
    deg = lam.sum(axis=1)
    Div = deg[:, None] * Phi - lam @ Phi
    # |fl(L Phi) - L Phi| <= gamma_{V+2} (|L| |Phi|), |L| |Phi| = deg |phi_a| + lam |Phi|
    g = (V + 2) * u / (1.0 - (V + 2) * u)
    Err = g * (deg[:, None] * np.abs(Phi) + lam @ np.abs(Phi)) * (1.0 + 4.0 * u)
    return total * grow, out * grow, Div, Err


def _hub_flow(X, hubs, rest, MAA, MBA, steps, deadline, power, verbose, t0, scale):
    """Reweighted least squares on the pairs hub-hub and other-hub only (no pair of
    two non-hub rows): ``L = [[L_AA, -M_BA^T], [-M_BA, diag(M_BA 1)]]``, solved through
    its Schur complement on the hubs (``a x a``, one Cholesky factorisation), so a
    step costs ``O(b a^2 + b a d)`` for ``b`` other rows and ``a`` hubs.  Starts from
    the weights given (the reduced flow spread over the members).  Returns the
    weights and the potentials of the hubs and of the other rows."""
    from scipy.linalg import cho_factor, cho_solve

    XA, XB = X[hubs], X[rest]
    a = XA.shape[0]

    def potential(MAA, MBA):
        DB = MBA.sum(axis=1)
        K = -MAA
        K[np.diag_indices(a)] += MAA.sum(axis=1) + MBA.sum(axis=0)
        Mq = MBA / DB[:, None]
        K -= Mq.T @ MBA
        K += 1.0 / a  # the Schur complement of a connected Laplacian is one: fix its translation
        rhs = XA + Mq.T @ XB
        try:
            PA = cho_solve(cho_factor(K, overwrite_a=False), rhs)
        except np.linalg.LinAlgError:
            K[np.diag_indices(a)] += 1e-12 * float(np.abs(K).max()) + 1e-300
            PA = cho_solve(cho_factor(K, overwrite_a=True), rhs)
        PB = (XB + MBA @ PA) / DB[:, None]
        return PA, PB

    top = max(float(MAA.max()), float(MBA.max()))
    floor = 1e-15 * top if top > 0 else 1.0  # every row keeps a weight to every hub
    np.maximum(MAA, floor, out=MAA)
    np.fill_diagonal(MAA, 0.0)
    np.maximum(MBA, floor, out=MBA)
    PA, PB = potential(MAA.copy(), MBA)
    for step in range(1, steps + 1):
        sq = np.einsum("ij,ij->i", PA, PA)
        dAA = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (PA @ PA.T), 0.0))
        np.fill_diagonal(dAA, 0.0)
        sb = np.einsum("ij,ij->i", PB, PB)
        dBA = PB @ PA.T
        dBA *= -2.0
        dBA += sb[:, None]
        dBA += sq[None, :]
        np.maximum(dBA, 0.0, out=dBA)
        np.sqrt(dBA, out=dBA)
        if verbose and (step % 10 == 0 or step == 1):
            cost = 0.5 * float(np.sum(MAA * dAA)) + float(np.sum(MBA * dBA))
            _progress(f"  tension_bracket: hub step {step:4d}  flow cost ~ {cost * scale:.10g}  "
                      f"{time.perf_counter() - t0:.1f} s")
        MAA *= dAA**power
        MBA *= dBA**power
        tot = 0.5 * float(MAA.sum()) + float(MBA.sum())
        MAA /= tot
        MBA /= tot
        floor = 1e-15 * max(float(MAA.max()), float(MBA.max()))
        np.maximum(MAA, floor, out=MAA)
        np.fill_diagonal(MAA, 0.0)
        np.maximum(MBA, floor, out=MBA)
        PA, PB = potential(MAA.copy(), MBA)
        if time.perf_counter() > deadline:
            break
    return MAA, MBA, PA, PB


def _off_zero_sum(X, u=_U64) -> float:
    """An upper bound on ``||sum_i x_i||``: the centred ``X`` sums to zero only up to
    rounding.  Jung's bound ``T(rho) <= J sum_i ||rho_i||`` holds for zero-sum ``rho``;
    the rest of a balancing flow sums to ``sum_i x_i``, and its projection moves the rows
    by ``||sum_i x_i||`` in all, so that is added to ``sum_i ||rho_i||``."""
    V = X.shape[0]
    g = V * u / (1.0 - V * u)
    col = _rownorms(X.sum(axis=0)[None, :])[0]
    err = _rownorms(np.abs(X).sum(axis=0)[None, :])[0] * g
    return float(col + err) * (1.0 + (X.shape[1] + 4) * u)


def _hub_bound(X, n, hubs, rest, MAA, MBA, PA, PB, off: float, u=_U64):
    """An upper bound on ``T(X)`` from the hub flow ``y_ij = M_ij (phi_i - phi_j)``: its
    cost (distances raised by their error bounds), plus Jung on its residual
    ``X - L Phi`` with the elementwise error of ``L Phi`` added (``off``: see
    :func:`_off_zero_sum`)."""
    V, d = X.shape
    a, b = len(hubs), len(rest)
    cAA, _, DivAA, ErrAA = _flow_bound(MAA, PA)
    dBA = cross_distance_upper(PB, PA)
    cBA = float(np.sum(MBA * dBA)) * (1.0 + (2.0 * math.log2(max(a * b, 2)) + 8.0) * u)
    degA, degB = MBA.sum(axis=0), MBA.sum(axis=1)
    Div = np.empty((V, d))
    Div[hubs] = DivAA + degA[:, None] * PA - MBA.T @ PB
    Div[rest] = degB[:, None] * PB - MBA @ PA
    g = (a + b + 2) * u / (1.0 - (a + b + 2) * u)
    Err = np.empty((V, d))
    Err[hubs] = ErrAA + g * (degA[:, None] * np.abs(PA) + MBA.T @ np.abs(PB)) * (1.0 + 4.0 * u)
    Err[rest] = g * (degB[:, None] * np.abs(PB) + MBA @ np.abs(PA)) * (1.0 + 4.0 * u)
    rho = X - Div
    rn = _rownorms(rho) * (1.0 + (d + 4) * u) + 2.0 * u * (n + _rownorms(Div)) + _rownorms(Err) * (1.0 + (d + 4) * u)
    rest_cost = jung_radius(min(V - 1, d)) * (float(rn.sum()) + off) * (1.0 + (V + 4) * u)
    return (cAA + cBA + rest_cost) * (1.0 + 4.0 * u)


def _certified_value(X, P):
    """``(<X, Pc> / D(Pc) rounded down, Pc / D)`` for ``Pc = P`` centred, ``D`` its exact
    diameter (``(0, 0)`` for a useless potential)."""
    V, d = X.shape
    Pc = P - P.mean(axis=0)
    D = row_diameter(Pc)
    lower = 0.0
    if D > 0:
        lower = max(float(np.sum(X * Pc)) * (1.0 - 4.0 * (V * d + 2) * _U64) / D, 0.0)
        Pc = Pc / D
    if lower == 0.0:
        Pc = np.zeros_like(Pc)
    return lower, Pc


def tension_bracket(G: ArrayLike, /, *, center: bool = False, rows: int = 2048, keep: int | None = None,
                    steps: int = 200, hub_steps: int = 10, tol: float = 1e-3, time_limit: float | None = None,
                    seed: int = 0, verbose: bool | None = None) -> TensionBracket:
    r"""A certified bracket on ``T(G)`` for gradients of any vocabulary size.

    Between :func:`~hilbertgeom.tension_bounds` (no solve, brackets 10--30%
    wide on head gradients) and :func:`~hilbertgeom.min_tension` (exact, small
    ``V``): the rows are reduced to at most ``rows``, the reduced problem is
    solved approximately, and both halves of its certificate are lifted back:

    * reduction: the ``keep`` rows of largest norm stay as they are; the other
      rows are grouped by direction (spherical k-means weighted by norm), each
      group ``c`` replaced by its sum ``s_c``;
    * reduced solve: ``steps`` reweighted least-squares steps on the
      scalar-weight dual ``min_{lambda>=0} (1/2) sum lambda + (1/2) tr(S^T
      L_lambda^+ S)`` (dense in the reduced rows: memory a few ``rows^2``
      float64 arrays);
    * lower bound: the reduced potential, brought to diameter 1, is a point set
      of diameter 1; each row of ``G`` takes the point of largest ``<g_i, p>``,
      which keeps the diameter; ``<G, Phi>`` is computed on ``G`` itself and
      the diameter by the exact kernel;
    * upper bound: a member ``i`` of group ``c`` takes the share ``w_i s_c``
      (``w_i >= 0``, summing to 1 over the group), so the reduced flow spread
      over the members by these shares balances ``G - rho`` at the same cost;
      the rest ``rho`` (the members' parts off their group's direction, and
      the reduced flow's own residual) is bounded by Jung:
      ``T(rho) <= J_k sum_i ||rho_i||`` (subadditivity of ``T``);
    * a second upper bound, with no such rest: the spread flow is refined on
      ``G`` itself over the pairs of the ``keep`` largest rows (the hubs) with
      all rows, ``hub_steps`` reweighting steps through the Schur complement on
      the hubs; ``upper`` is the smaller of the two.

    Every rounding is bounded and added.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, ``V >= 2``, with zero column sums (or ``center=True``).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False).
    rows : int
        Size of the reduced problem, ``>= 1`` (default 2048; memory about
        ``6 rows^2`` float64).  No reduction when ``V <= rows``.  With
        ``rows=1`` every row is in one group: no solve, and ``upper`` is
        Jung's bound of :func:`~hilbertgeom.tension_bounds`.
    keep : int, optional
        Rows of largest norm kept alone, ``0 <= keep < rows`` (default
        ``rows // 4``); the other ``rows - keep`` reduced rows are groups.
    steps : int
        Reweighted least-squares steps on the reduced problem, ``>= 1``
        (default 200).
    hub_steps : int
        When rows were grouped: reweighted least-squares steps on ``G``
        itself over the pairs of the ``keep`` largest rows (the hubs) with all
        rows, started from the reduced flow spread over the members, ``>= 0``
        (default 10; 0 skips it).  Its flow needs no spread; ``upper`` is the
        smaller of the two.
    tol : float
        Relative gap for status ``"optimal"`` (default ``1e-3``); the steps
        do not stop early, the status only reports it.
    time_limit : float, optional
        Seconds for the reweighting steps (checked after each step).
    seed : int
        Seed of the grouping's initial sample (default 0).
    verbose : bool, optional
        Progress on stderr (default: on when ``V > 4096``).

    Returns
    -------
    TensionBracket

    Raises
    ------
    ValueError
        Non-finite or malformed ``G``, ``V < 2``, non-zero column sums without
        ``center``, bad parameters, a bracket beyond the float64 range, or
        entries near ``1e308`` next to subnormal ones (no exact scaling to unit
        size exists).

    References
    ----------
    arXiv 2608.22253 (v2), the minimum-tension dual (I10--I13) and Jung's
    bound (I17).

    Examples
    --------
    >>> G = [[1.0, 0.0], [0.5, 0.0], [0.5, 0.0], [-2.0, 0.0]]
    >>> b = tension_bracket(G, rows=2, keep=1)    # two parallel rows grouped: no loss
    >>> round(b.lower, 9), round(b.upper, 9), b.reduced_rows
    (2.0, 2.0, 2)
    """
    G0 = _v.matrix(G, "G", min_rows=2)
    V, d = G0.shape
    rows = _v.integer(rows, "rows", minimum=1)
    keep = rows // 4 if keep is None else _v.integer(keep, "keep", minimum=0)
    if keep >= rows:
        raise ValueError(f"keep must be below rows ({rows}); got {keep}")
    steps = _v.integer(steps, "steps", minimum=1)
    hub_steps = _v.integer(hub_steps, "hub_steps", minimum=0)
    tol = _v.scalar(tol, "tol", minimum=0.0, strict=True)
    seed = _v.integer(seed, "seed", minimum=0)
    if time_limit is not None:
        time_limit = _v.scalar(time_limit, "time_limit", minimum=0.0, strict=True)
    if verbose is None:
        verbose = V > 4096
    t0 = time.perf_counter()
    deadline = t0 + time_limit if time_limit is not None else math.inf
    _, X, _, k = _fp.zero_sum_at_unit(G0, center)
    if k == 0 and float(np.abs(G0).max()) >= 1.0:  # no exact scaling to unit size: G spans the float64 range
        raise ValueError("tension_bracket: " + _fp.SPAN)
    n = _rownorms(X)
    if float(n.sum()) == 0.0:
        Z = np.zeros((V, d))
        return TensionBracket(0.0, 0.0, Z, np.zeros(V, np.intp), 1, 0.0, 0.0, 0, "optimal", "G = 0")
    # 1. reduction
    labels, m, R = _reduction(X, n, rows, keep, seed)
    if verbose:
        _progress(f"  tension_bracket: {V} rows reduced to {m} ({min(keep, m)} kept alone)  "
                  f"{time.perf_counter() - t0:.1f} s")
    # 2. reduced solve (on the reduced rows centred; their sum is the rounding of sum G)
    S = R - R.mean(axis=0)
    unit = ldexp_inf(1.0, -k)  # the scale of G: for the progress lines
    if m > 1:
        lam, Phi, done = _irls_weights(S, steps, deadline, verbose=verbose, t0=t0, scale=unit, power=_POWER)
    else:  # one group: no flow, one point
        lam, Phi, done = np.zeros((1, 1)), np.zeros((1, d)), 0
    # 3. upper bound: lifted flow plus Jung on the rest rho
    cost, out, Div, Err = _flow_bound(lam, Phi)
    w, cnt = _lift_weights(X, labels, R)
    W = np.bincount(labels, weights=w, minlength=m)
    delta = float(np.max(np.abs(W - 1.0) + cnt * _U64 * W))  # |sum w - 1|, summation error included
    wD = w[:, None] * Div[labels]
    rho = X - wD
    # ||rho_i|| for the exact lifted divergence w_i sum_b W_b y_ab: the computed part, its
    # rounding (2u per entry of the difference and product), the divergence's error, and
    # the shares' sums W_b != 1
    rn = _rownorms(rho) * (1.0 + (d + 4) * _U64)
    rn += 2.0 * _U64 * (n + _rownorms(wD)) * (1.0 + (d + 4) * _U64)
    rn += w * (_rownorms(Err)[labels] * (1.0 + (d + 4) * _U64) + delta * out[labels])
    jung = jung_radius(min(V - 1, d))
    off = _off_zero_sum(X)
    spread = jung * (float(rn.sum()) + off) * (1.0 + (V + 4) * _U64)
    upper = (cost * (1.0 + delta) ** 2 + spread) * (1.0 + 4.0 * _U64)
    upper_source = "reduced flow, spread over the groups, plus the spread"
    hubs = np.flatnonzero(labels < keep)
    rest = np.flatnonzero(labels >= keep)
    if V > rows and hub_steps > 0 and hubs.size and rest.size and time.perf_counter() <= deadline:
        # 3b. the flow on the hub pairs and the other-hub pairs of G itself (no grouping, so no
        # spread), started from the reduced flow spread over the members
        MAA = lam[np.ix_(labels[hubs], labels[hubs])].copy()
        MBA = w[rest, None] * lam[np.ix_(labels[rest], labels[hubs])]
        MAA, MBA, PA, PB = _hub_flow(X, hubs, rest, MAA, MBA, hub_steps, deadline, _POWER, verbose, t0, unit)
        hub_upper = _hub_bound(X, n, hubs, rest, MAA, MBA, PA, PB, off)
        if verbose:
            _progress(f"  tension_bracket: hub flow {ldexp_inf(hub_upper, -k):.10g} against the spread reduced flow "
                      f"{ldexp_inf(upper, -k):.10g}  {time.perf_counter() - t0:.1f} s")
        if hub_upper < upper:
            upper, upper_source = hub_upper, f"flow on the pairs of {hubs.size} hub rows with all rows"
    # 4. lower bound: the reduced points at diameter 1, each row on its best point
    P = _repair(Phi, S)
    lower, Pc = _certified_value(X, P[_best_match(X, P)])
    lo, hi = _fp.ldexp_down(lower, -k), _fp.ldexp_up(upper, -k)
    if math.isinf(hi):
        raise ValueError("tension_bracket: " + _fp.T_OVERFLOW)
    gap = _relative_gap(lo, hi)
    status = "optimal" if gap <= tol else ("time_limit" if time.perf_counter() > deadline else "step_limit")
    if verbose:
        _progress(f"  tension_bracket: T in [{lo:.10g}, {hi:.10g}]  rel gap {gap:.2e}  (reduced flow "
                  f"{ldexp_inf(cost, -k):.10g}, spread {ldexp_inf(spread, -k):.3g})  {time.perf_counter() - t0:.1f} s")
    return TensionBracket(lower=lo, upper=hi, potential=Pc, labels=labels, reduced_rows=m,
                          reduced_cost=ldexp_inf(cost, -k), spread=ldexp_inf(spread, -k), steps=done,
                          status=status, upper_source=upper_source)
