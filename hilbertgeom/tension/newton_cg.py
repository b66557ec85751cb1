"""Primal-dual Newton-CG on the scalar-weight dual over every pair: the groups'
problem of the cluster refinement where its support is too large for Newton's
dense Hessian.

.. math::

    T(S) = \\min_{\\lambda \\ge 0}\\ f(\\lambda), \\qquad
    f(\\lambda) = \\tfrac12 \\sum_{a<b} \\lambda_{ab} + \\tfrac12 \\operatorname{tr}(S^\\top L_\\lambda^+ S)

over all ``m (m - 1) / 2`` pairs of ``m`` rows (:mod:`hilbertgeom.tension.dual`).
Its Hessian ``H = (B^T L^+ B) o (D D^T)`` (:mod:`hilbertgeom.tension.newton`) has
``pairs^2`` entries, but a product with it needs none of them: with ``Phi = L^+ S``
and ``L_v`` the Laplacian of the weights ``v``,

.. math::

    (H v)_{ab} = b_{ab}^\\top M\\, b_{ab}, \\qquad M = L_\\lambda^+ L_v\\, \\Phi \\Phi^\\top,

two ``m x m x m`` products whatever the number of pairs (about 8 ms at ``m = 428``
on 2 cores), and its diagonal is ``R_ab ||phi_a - phi_b||^2`` (``R`` the effective
resistance, ``b^T L^+ b``).

The bound ``lambda >= 0`` is handled by a primal-dual barrier (as in IPOPT): a
multiplier ``z > 0`` with ``lambda_e z_e = mu``; each step solves
``(H + Z Lambda^{-1}) dl = -(grad f - mu / lambda)`` by conjugate gradients
preconditioned by the exact block of the ``_BLOCK`` most active pairs (the largest
Hessian diagonal against the barrier term ``z / lambda``) and by the diagonal on
the others (:func:`_preconditioner`), searches back on the barrier function
``f - mu sum log lambda`` (Armijo) along ``dl`` projected so that no weight falls below
a hundredth of its value (:func:`_projected`), moves ``z`` by its own step within 0.99 of
the distance to its bound and keeps it within ``[mu / (kappa lambda), kappa mu /
lambda]``; ``mu`` is divided by 10 once the Newton decrement falls below a tenth of
the barrier's own gap ``mu pairs``.  Every iterate is a certificate as
L-BFGS-B's are (the caller's ``check``): its weights are a flow, its ``Phi``
repaired a potential, so the method is judged by the bracket alone.

The preconditioner: inactive pairs (``lambda`` near the bound) have a barrier term
``z / lambda`` far above their Hessian diagonal, so the diagonal inverts their rows
well; the pairs that carry the flow couple through ``H``'s off-diagonal entries,
``(B^T L^+ B)_{ef} (B^T Phi Phi^T B)_{ef}``, and with the diagonal alone conjugate gradients took
1,000-4,400 steps per Newton step on round 1's groups' problem of the shipped MiniLM
gradient (256 groups), many at the 2,000-step cap.  The dense block of the 1,000 most
active pairs, inverted once per Newton step (0.05-0.1 s at 256 groups), cut those to
100-1,000 steps, and the whole solve to 1e-8 from 195 s to 124 s.  On 424 groups it made the
solve slower (665 s against 330 s) while the step was cut for every pair by the fraction to the
bound; with the projected step the two took about the same time on the 424 groups of a later
run (208 s and 215 s).  It is
used on problems of at most ``_BLOCK_PAIRS`` pairs (``docs/theory/tension.md``, *A block
preconditioner for Newton-CG* and *A projected step for Newton-CG*).

Measured on round 3's groups' problem of the shipped MiniLM gradient at full
vocabulary (428 groups at rank 384, their flow over 36,238 of the 91,378 pairs):
from L-BFGS-B's 5.2e-4 (800 evaluations, 40 s), 1.2e-7 after 191 s and 9.7e-10
after 303 s, where L-BFGS-B alone reached 2.9e-7 in 1500 s.  The primal barrier
(Hessian term ``mu / lambda^2`` in place of ``z / lambda``) took steps cut short by
the distance to the bound and got no further than 9.8e-8 in 263 s
(``docs/theory/tension.md``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from .dual import _flat_pairs, _weights_matrix
from .newton import _laplacian_inverse, _pair_hessian

__all__: list[str] = []  # reached through min_tension(method="refine")

#: conjugate-gradient steps at most per Newton step, and the largest relative residual asked
#: (smaller where the gradient is: ``min(_CG_RTOL, ||g||^(1/2))``).  On the 428 groups, with the
#: primal barrier, the steps cut by the bound were a few thousandths at 0.1 and 0.1-0.4 at 1e-3
_CG_MAX = 2000
_CG_RTOL = 1e-3
#: pairs in the preconditioner's dense block, the most active ones (largest ``R d2 lambda / z``):
#: on six Newton systems of the shipped MiniLM round-1 groups' problem (256 groups, 32,640 pairs,
#: 2,800-7,200 of them with ``R d2 > z / lambda``) blocks of 700, 1,000, 1,500 and 2,000 pairs took
#: conjugate gradients from 1,014-4,439 steps to 105-1,043 at 1,000 (its time least on two of the
#: six, within 0.6 s of least on all); the whole groups' solve to 1e-8 took 124 s at 1,000, 189 s at
#: 500, 168 s at 2,000 (each Newton step building the block in 0.9 s) and 195 s on the diagonal alone
_BLOCK = 1000
#: the block only on problems of at most this many pairs: on round 3's groups' problem of the same
#: gradient (424 groups, 89,676 pairs, to 1.2e-8) the solve took 665.1 s with the block (in the
#: full run) and 329.9 s on the diagonal alone; the cut lies between that and the 256 groups'
#: 32,640 pairs, where the block helped (more finely below).  Both times are
#: with the step cut for every pair (before :func:`_projected`); projected, on round 3's groups'
#: problem of a later run (also 424 groups) the block took 207.6 s and the diagonal 214.6 s.  On
#: round 2's groups' problem of the same gradient (291 groups, 42,195 pairs, to 3.2e-7; projected,
#: 2026-12-07) the block took 23,516 products and 114.5 s, the diagonal 21,505 and 99.7 s (109.4 s
#: again): the cut lies between 32,640 pairs and 42,195
_BLOCK_PAIRS = 40_000
#: fraction of the distance to the bound a step may cover (a weight's, :func:`_projected`; the
#: multiplier's), and the multiplier's band.  Where the fraction cut the whole step of ``lambda``
#: (``t = 0.99 min(-lambda / dl)``), on round 3's groups' problem of the shipped MiniLM gradient
#: (424 groups, 89,676 pairs, to 1.25e-8) the steps at the smallest ``mu`` were cut to 0.003-0.3
#: by a few pairs and the gap stood near 1.6e-6 for 40 s; the solve took 375.8 s in the full run.
#: Projected (each weight stopped short of the bound alone), its steps were whole but for two
#: halvings and it took 214.6 s to 1.3e-9 (the same problem alone); rounds 1 and 2's groups'
#: problems (256 and 284 groups) took 144.3 s and 113.5 s against 142.6 s and 103.5 s
_TO_BOUND = 0.99
_KAPPA = 1e10
#: ``mu`` divided by this once the squared Newton decrement is below ``_CENTRED mu pairs``
_MU_FACTOR = 10.0
_CENTRED = 0.1
#: Armijo's constant and the step's halvings at most in one line search
_ARMIJO = 1e-4
_HALVINGS = 40


class _State:
    """``L_lambda^+`` (as ``(L + 11^T/m)^{-1}``), ``Phi = L^+ S``, ``G = Phi Phi^T``, the
    pairs' squared distances ``d2`` and effective resistances ``R`` (``iu`` order)."""

    def __init__(self, S: np.ndarray, lam: np.ndarray, iu):
        self.Linv = _laplacian_inverse(lam, iu[0], iu[1], S.shape[0])
        self.Phi = self.Linv @ S
        self.G = self.Phi @ self.Phi.T
        self.d2 = np.maximum(_pair_form(self.G, iu), 0.0)
        self.R = _pair_form(self.Linv, iu)


def _pair_form(M: np.ndarray, iu) -> np.ndarray:
    """``b_ab^T M b_ab = M_aa + M_bb - M_ab - M_ba`` for every pair ``a < b``, taken at the
    pairs' flat positions (no ``m x m`` temporaries; the same sums in the same order)."""
    d = np.diag(M)
    up, lo = _flat_pairs(iu, M.shape[0])
    out = d[iu[0]] + d[iu[1]]
    out -= M.take(up)
    out -= M.take(lo)
    return out


def hessian_product(v: np.ndarray, st: _State, iu) -> np.ndarray:
    """``H v`` for ``f``'s Hessian at the state ``st``: ``b^T L^+ L_v G b`` per pair (``L_v``
    made in place of its weights' matrix)."""
    Lv = _weights_matrix(v, iu, st.G.shape[0])
    deg = Lv.sum(axis=1)
    np.negative(Lv, out=Lv)
    Lv[np.diag_indices_from(Lv)] = deg
    return _pair_form(st.Linv @ (Lv @ st.G), iu)


def _pcg(apply, b: np.ndarray, precondition, rtol: float, deadline: float) -> np.ndarray:
    """Conjugate gradients for ``A x = b`` (``A`` positive definite, ``precondition(r)`` a
    positive definite approximation of ``A^{-1} r``): to a residual of ``rtol ||b||``,
    ``_CG_MAX`` steps or ``deadline``."""
    x = np.zeros_like(b)
    r = b.copy()
    zr = precondition(r)
    p = zr.copy()
    rz = float(r @ zr)
    goal = rtol * math.sqrt(float(b @ b))
    for _ in range(_CG_MAX):
        Ap = apply(p)
        pAp = float(p @ Ap)
        if not pAp > 0:  # rounding level (or a non-finite product): the step so far
            break
        a = rz / pAp
        x += a * p
        r -= a * Ap
        if math.sqrt(float(r @ r)) <= goal or time.perf_counter() > deadline:
            break
        zr = precondition(r)
        rz, rz_old = float(r @ zr), rz
        p = zr + (rz / rz_old) * p
    return x


def _preconditioner(st: _State, bd: np.ndarray, iu, block: int | None = None):
    """``r -> P^{-1} r`` for the Newton matrix ``H + diag(bd)`` at ``st``: on the ``block``
    pairs with the largest ratio of ``H``'s diagonal ``R d2`` to ``bd``, the inverse of that
    matrix's dense block ``(K_1 o K_2)_{AA} + diag(bd_A)``, ``K_1 = B^T L^+ B`` and
    ``K_2 = B^T Phi Phi^T B`` (``H = K_1 o K_2``); on the others its diagonal's inverse.
    Where that block is not numerically positive definite, or the problem has more than
    ``_BLOCK_PAIRS`` pairs, the diagonal alone."""
    hd = st.R * st.d2  # H's diagonal
    diag = hd + bd

    def diagonal(r):
        return r / diag

    npair = diag.size
    k = min(_BLOCK if block is None else block, npair)
    if k < 2 or npair > _BLOCK_PAIRS:
        return diagonal
    A = np.argpartition(-hd / bd, k - 1)[:k] if k < npair else np.arange(npair)
    a, b = iu[0][A], iu[1][A]
    HA = _pair_hessian(st.Linv, st.Phi[a] - st.Phi[b], a, b)
    HA[np.diag_indices(k)] += bd[A]
    try:
        Lc = np.linalg.cholesky(HA)  # NumPy's: between NumPy's GEMMs SciPy's stalls (tension/hubs.py)
    except np.linalg.LinAlgError:
        return diagonal
    Li = np.linalg.inv(Lc)
    Binv = Li.T @ Li
    if not np.all(np.isfinite(Binv)):
        return diagonal

    def apply(r):
        z = r / diag
        z[A] = Binv @ r[A]
        return z

    return apply


def _projected(lam: np.ndarray, step: np.ndarray, t: float) -> np.ndarray:
    """The point ``t`` along ``step`` from ``lam``, each weight kept at or above ``1 -
    _TO_BOUND`` of its own value: a weight whose step would cross the bound stops short of
    it, and the others take the whole step (a projected search, as in Bertsekas's projected
    Newton method, where the fraction to the bound would cut every weight's step alike)."""
    return np.maximum(lam + t * step, (1.0 - _TO_BOUND) * lam)


def newton_cg(S: np.ndarray, x: np.ndarray, *, check: Callable[[np.ndarray, np.ndarray, np.ndarray], bool],
              gap: float, deadline: float = math.inf, max_steps: int = 1000, max_evals: int = 100_000) -> int:
    """Primal-dual Newton-CG on ``f`` over every pair of the centred rows ``S`` from
    the weights ``x`` (``iu`` order of ``np.triu_indices(m, 1)``; zeros are raised to
    ``1e-9`` of the largest), whose certificate's relative gap is ``gap``: the first
    ``mu`` puts the barrier's gap ``mu pairs`` at that share of ``sum x / 2``.
    ``check(lam, Phi, d2)`` certifies each iterate and returns True to stop.  Stops
    there, at ``deadline``, after ``max_steps`` steps or ``max_evals`` weights evaluated,
    or when a line search fails (rounding level).  Returns the number of weights
    evaluated (one Cholesky each, at most ``max(max_evals, 1)``)."""
    from scipy.linalg import LinAlgError

    m = S.shape[0]
    iu = np.triu_indices(m, 1)
    npair = iu[0].size
    lam = np.asarray(x, dtype=np.float64)
    top = float(lam.max(initial=0.0))
    lam = np.maximum(lam, 1e-9 * top if top > 0 else 1.0)
    st = _State(S, lam, iu)
    evals = 1
    mu = min(max(gap, 1e-16), 1.0) * 0.5 * float(lam.sum()) / npair  # an infinite gap (no lower bound yet): 1

    def barrier(lam, st):
        return 0.5 * float(lam.sum()) + 0.5 * float(np.sum(S * st.Phi)) - mu * float(np.log(lam).sum())

    f = barrier(lam, st)
    z = mu / lam
    for k in range(max_steps + 1):
        if check(lam, st.Phi, st.d2) or time.perf_counter() > deadline or k == max_steps or evals >= max_evals:
            break
        grad = 0.5 - 0.5 * st.d2 - mu / lam
        bd = z / lam
        eta = min(_CG_RTOL, math.sqrt(math.sqrt(float(grad @ grad))))
        cur = st
        step = _pcg(lambda v, s=cur, b=bd: hessian_product(v, s, iu) + b * v, -grad, _preconditioner(st, bd, iu),
                    eta, deadline)
        dec = -float(grad @ step)
        if not dec > 0:
            break
        t = 1.0
        dz = mu / lam - z - bd * step
        nz = dz < 0
        z = z + (min(1.0, _TO_BOUND * float(np.min(-z[nz] / dz[nz]))) if nz.any() else 1.0) * dz
        for _ in range(_HALVINGS):
            if evals >= max_evals:
                return evals
            lam_t = _projected(lam, step, t)
            dec_t = -float(grad @ (lam_t - lam))  # the decrease the model promises on the bent path
            if not dec_t > 0:
                t *= 0.5
                continue
            try:
                st_t = _State(S, lam_t, iu)
            except LinAlgError:
                t *= 0.5
                continue
            evals += 1
            f_t = barrier(lam_t, st_t)
            if f_t <= f - _ARMIJO * dec_t:
                break
            t *= 0.5
        else:
            break  # no decrease measurable: rounding level
        lam, st, f = lam_t, st_t, f_t
        z = np.clip(z, mu / (_KAPPA * lam), _KAPPA * mu / lam)
        if dec <= _CENTRED * mu * npair:  # centred for this mu
            mu /= _MU_FACTOR
            f = barrier(lam, st)
    return evals
