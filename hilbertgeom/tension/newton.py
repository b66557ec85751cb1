"""Newton on the scalar-weight dual, restricted to a support: the exact polish
of a small minimum-tension problem.

At the optimum the flow is ``y_e = lambda_e (phi_i - phi_j)`` with scalar
``lambda_e >= 0`` on pairs at distance exactly 1, so

.. math::

    T(S) = \\min_{\\lambda \\ge 0}\\ f(\\lambda), \\qquad
    f(\\lambda) = \\tfrac12 \\sum_e \\lambda_e + \\tfrac12 \\operatorname{tr}(S^\\top L_\\lambda^+ S),

with ``Phi = L_lambda^+ S``, gradient ``(1 - ||phi_i - phi_j||^2) / 2`` and Hessian
``H = (B^T L^+ B) o (D D^T)`` (``B`` the incidence of the pairs, ``D = B^T Phi``
their differences, ``o`` the entrywise product).  On a support ``A`` of a few
thousand pairs (the ALM's flow identifies it) ``H`` is a dense ``|A| x |A|``
matrix: a log-barrier Newton method converges in a few dozen steps where the
ALM's convergence is linear.  Pairs of the complete graph that end up farther
apart than 1 join ``A`` and the solve goes on; every iterate's ``Phi`` and flow
are certified by the caller as usual (the lower bound divides by the exact
diameter over *all* pairs), so a wrong support costs time, never rigour.

Dense in the number of rows ``m`` (``m x m`` Laplacian): for the groups'
problem of the cluster refinement and for ``V <= 2048``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._results import _laplacian, _violated_pairs

__all__: list[str] = []  # reached through min_tension

#: pairs of the support at most (the Hessian is |A| x |A|: 8 * 16000^2 bytes = 2 GB, three such
#: arrays while a step is made; a step took about 7 s at 11,500 pairs on 2 cores).  The 291 groups
#: of the shipped MiniLM full vocabulary's second round have a support of 11,323 pairs: with the
#: cap at 6000, L-BFGS-B went on alone (2.7e-5 after 300 s); Newton reached 5.1e-7 in 437 s
#: (docs/theory/tension.md)
_MAX_SUPPORT = 16000
#: barrier parameter: divided by this factor once a Newton step is short
_MU_FACTOR = 10.0
#: centred when the squared Newton decrement is below this share of the barrier's gap mu |A|
_CENTRED = 0.1


def _laplacian_inverse(lam, I, J, m):
    """``(L_lambda + 11^T / m)^{-1}``: equal to ``L^+ + 11^T / m`` on a connected
    graph, so that ``B^T (.) B`` and ``(.) S`` for centred ``S`` are those of ``L^+``."""
    from scipy.linalg import cho_factor, cho_solve

    L = _laplacian(I, J, lam, m).toarray()
    L += 1.0 / m
    return cho_solve(cho_factor(L), np.eye(m))


def _state(S, I, J, lam, mu):
    m = S.shape[0]
    Linv = _laplacian_inverse(lam, I, J, m)
    Phi = Linv @ S
    Dv = Phi[I] - Phi[J]
    d2 = np.einsum("ij,ij->i", Dv, Dv)
    f = 0.5 * float(lam.sum()) + 0.5 * float(np.sum(S * Phi)) - mu * float(np.log(lam).sum())
    grad = 0.5 - 0.5 * d2 - mu / lam
    return f, grad, Linv, Phi, Dv


def _pair_hessian(Linv, Dv, I, J):
    """``f``'s Hessian on the pairs ``(I, J)``: ``(B^T L^+ B) o (Dv Dv^T)``, ``Dv`` the
    pairs' potential differences (the barrier's term not included)."""
    Qt = np.ascontiguousarray((Linv[I] - Linv[J]).T)  # (B^T L^+)^T, so that both gathers take rows
    H = Qt[I]
    H -= Qt[J]  # (B^T L^+ B)^T = B^T L^+ B
    H *= Dv @ Dv.T
    return H


def _newton_step(I, J, lam, mu, grad, Linv, Dv):
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    H = _pair_hessian(Linv, Dv, I, J)
    H[np.diag_indices_from(H)] += mu / (lam * lam)
    try:
        return -cho_solve(cho_factor(H, check_finite=False), grad, check_finite=False)
    except LinAlgError:  # numerically semidefinite: a ridge of the diagonal's scale
        H[np.diag_indices_from(H)] *= 1.0 + 1e-10
        return -np.linalg.lstsq(H, grad, rcond=None)[0]


def _connect(I, J, lam, P, m):
    """The support made connected (``L_lambda`` must be nonsingular on centred
    potentials): every row joined to its farthest row in ``P``, then each
    remaining component to the rest by its farthest pair, with weights at
    ``1e-3`` of the median."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    sq = np.einsum("ij,ij->i", P, P)
    D2 = sq[:, None] + sq[None, :] - 2.0 * (P @ P.T)
    small = 1e-3 * float(np.median(lam)) if lam.size else 1.0
    far = np.argmax(D2, axis=1)
    pairs = set(zip(np.minimum(I, J).tolist(), np.maximum(I, J).tolist(), strict=True))
    add = {(min(i, j), max(i, j)) for i, j in enumerate(far.tolist()) if i != j} - pairs
    pairs |= add
    while True:
        a = np.array(sorted(pairs)).reshape(-1, 2)
        ncomp, comp = connected_components(coo_matrix((np.ones(len(a)), (a[:, 0], a[:, 1])), shape=(m, m)),
                                           directed=False)
        if ncomp <= 1:
            break
        inside = comp == comp[0]
        sub = np.where(np.outer(inside, ~inside), D2, -np.inf)
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        add.add((min(i, j), max(i, j)))
        pairs.add((min(i, j), max(i, j)))
    if not add:
        return I, J, lam
    e = np.array(sorted(add)).reshape(-1, 2)
    return (np.concatenate([I, e[:, 0]]), np.concatenate([J, e[:, 1]]),
            np.concatenate([lam, np.full(len(e), small)]))


def support_newton(S: np.ndarray, I, J, lam, P, *, tol: float, deadline: float = math.inf, certify=None,
                   max_steps: int = 200, gap: float | None = None):
    """Log-barrier Newton on ``f`` over the pairs ``(I, J)`` (``lam > 0`` a start,
    ``P`` the potential they came with), the pairs farther apart than 1 added as
    they appear.

    ``certify(Phi, I, J, Y)`` is called on every candidate (``Y = lam (phi_i -
    phi_j)``) and returns the certificate's relative gap; the solve stops when
    it is within ``tol``, at ``deadline``, after ``max_steps`` Newton steps, or
    when the support outgrows ``_MAX_SUPPORT``.  ``gap``: the start's relative gap,
    which sets the first barrier parameter.  Returns the number of steps."""
    m = S.shape[0]
    I = np.asarray(I, np.intp)
    J = np.asarray(J, np.intp)
    lam = np.asarray(lam, float)
    lam = np.maximum(lam, 1e-9 * float(np.max(lam, initial=1.0)))
    I, J, lam = _connect(I, J, lam, P, m)
    f0 = 0.5 * float(lam.sum())
    mu = (gap if gap is not None else 1e-3) * f0 / max(I.size, 1)  # the barrier's gap mu |A| at the start's
    f, grad, Linv, Phi, Dv = _state(S, I, J, lam, mu)
    steps = 0
    while steps < max_steps and time.perf_counter() < deadline:
        step = _newton_step(I, J, lam, mu, grad, Linv, Dv)
        dec = -float(grad @ step)  # the squared Newton decrement: twice the predicted decrease
        if dec <= _CENTRED * mu * I.size:
            # centred for this mu (the barrier's own gap is about mu |A|): certify, add the
            # pairs farther apart than 1, or go on with a smaller mu
            gap = certify(Phi, I, J, lam[:, None] * Dv) if certify is not None else math.inf
            if gap <= tol:
                break
            fi, fj = _violated_pairs(Phi, I, J)  # the pairs beyond 1 the support lacks
            if fi.size:
                if I.size + fi.size > _MAX_SUPPORT:
                    break
                I = np.concatenate([I, fi])
                J = np.concatenate([J, fj])
                lam = np.concatenate([lam, np.full(fi.size, mu)])
            else:
                mu /= _MU_FACTOR
            f, grad, Linv, Phi, Dv = _state(S, I, J, lam, mu)
            continue
        steps += 1
        neg = step < 0
        t = min(1.0, 0.99 * float(np.min(-lam[neg] / step[neg]))) if neg.any() else 1.0
        for _ in range(40):
            lam_t = lam + t * step
            try:
                ft, gt, Lt, Pt, Dt = _state(S, I, J, lam_t, mu)
            except np.linalg.LinAlgError:
                t *= 0.5
                continue
            if ft <= f - 1e-4 * t * dec:
                break
            t *= 0.5
        else:
            break  # no decrease measurable: rounding level
        lam, f, grad, Linv, Phi, Dv = lam_t, ft, gt, Lt, Pt, Dt
    return steps
