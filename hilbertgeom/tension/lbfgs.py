"""Projected L-BFGS for ``min f(x)`` subject to ``x >= lower`` on millions of variables.

SciPy's L-BFGS-B finds a generalized Cauchy point on every iteration, which sorts
the breakpoints of all variables: on the 5,334,969 pair weights of the shipped
MiniLM gradient at full vocabulary (d = 384) that cost about 1.8 s an iteration
(measured with a free objective), twice the objective itself (0.84 s, tension/hubs.py).
This is the projected variant (Bertsekas' active set, the L-BFGS direction on the
free variables, a backtracking Armijo search along the projected path): each
iteration is ``O(maxcor n)`` vector work.  That work is most of an iteration besides the
objective, so it is done in place: the work vectors are made once a call, the memory's
dropped pair is reused for the next, and the two-loop's updates are BLAS ``axpy`` (glibc maps
each array of more than 32 MB afresh, so one made per operation costs its page faults: at full
vocabulary a quarter of an iteration's own time went to them).  The weights' descent
(:func:`~hilbertgeom.tension.refine._descend_weights`) uses it as a heuristic: its
result is certified afterwards, so only its speed is at stake here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
from scipy.linalg.blas import daxpy as _daxpy
from scipy.linalg.blas import ddot as _ddot

__all__: list[str] = []  # used by tension/refine.py

#: Armijo's sufficient-decrease constant, and the largest backtracking factor (the step is
#: cut to the minimum of the quadratic through the two values and the slope, at least by 10)
_ARMIJO = 1e-4
_SHRINK = 0.5
#: in one iteration a variable's distance to ``lower`` falls at most to this share of itself and
#: rises by at most itself over this share plus the mean distance: near the bound the objective can
#: rise steeply (weights of a graph Laplacian nearly cut), and full projected steps there and
#: far above wasted a dozen cuts of the step in each line search
_FALL = 0.1
#: a variable this close to ``lower`` (relative to the mean distance of all) whose gradient
#: points outward is held at ``lower`` (Bertsekas' epsilon-active set): the box above lets a
#: variable only approach its bound, and one left free there spoils the direction
_ACTIVE = 1e-6
#: a pair ``(s, y)`` joins the memory only where ``s'y`` exceeds this share of ``y'y`` (positive
#: curvature along ``s``; the inverse Hessian it builds stays positive definite)
_CURVED = 1e-12
#: at most this many cuts of the step in one line search (then the search has failed)
_MAX_HALVINGS = 40
#: with ``scaled``, the initial Hessian's diagonal is each variable's distance to the bound plus
#: this share of the mean distance.  For the weights of a Laplacian's pairs the curvature of
#: ``F`` in ``w_e`` is about ``R_e d_e^2`` (effective resistance times squared distance), at
#: most ``d_e^2 / w_e``: its inverse scales with the weight, and the weights span ten orders of
#: magnitude (on the shipped MiniLM gradient at full vocabulary, round 1: 18% at the floor,
#: the largest 2000 times the mean).  There, from round 1's descended and priced flow, ``F`` after
#: 125 evaluations was 3.0e-7 of itself lower than with ``gamma I``, and 150 evaluations took the
#: upper bound from 53.94160868 to 53.94154201 (solver units), where ``gamma I`` needed 300 to
#: reach 53.94153666.  The share keeps variables at the bound (pairs just added by pricing) free
#: to grow
_SCALE_FLOOR = 1e-2


def projected_lbfgs(fg: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, lower: float, *,
                    maxcor: int = 20, max_evals: int = 1000, scaled: bool = False,
                    memory: deque | None = None) -> tuple[np.ndarray, float, int]:
    """Minimize ``f`` (``fg(x) -> (f, gradient)``) over ``x >= lower`` from ``x0``.

    A variable at or within ``_ACTIVE`` of its bound whose gradient points outward is set
    to the bound and held there for the iteration; the others move along the L-BFGS direction (``maxcor`` pairs; reset
    when it is not a descent direction), the step is projected onto the bound and
    halved until Armijo's condition holds along the projected path.  The L-BFGS initial
    Hessian is ``gamma I``, or with ``scaled`` ``gamma D`` with ``D`` each variable's
    distance to the bound plus ``_SCALE_FLOOR`` of the mean distance (``gamma`` fitted to
    the last pair in that metric; see :data:`_SCALE_FLOOR`).  ``memory``, where given, is the
    deque of ``(s, y, 1 / s'y)`` pairs the method starts from and updates in place (kept even
    where ``fg`` raises; :func:`new_memory`): a second call from the last point a first one
    accepted, given the first's memory, takes the steps the first would have taken next, where
    the first stopped between two steps (a restart without it begins again from steepest
    descent).  Stops after
    ``max_evals`` evaluations, when a line search fails or the projected gradient
    vanishes; ``fg`` may also raise to stop.  The ``x`` given to ``fg`` is a work vector that a
    later step overwrites: ``fg`` copies what it keeps of it.  Returns ``(x, f, evaluations)``: the
    last accepted point."""
    x = np.maximum(np.asarray(x0, dtype=np.float64), lower)
    f, g = fg(x)
    evals = 1
    mem = new_memory(maxcor) if memory is None else memory
    if mem.maxlen != maxcor:
        raise ValueError(f"the memory holds {mem.maxlen} pairs where maxcor is {maxcor}")
    # work vectors made once (at full vocabulary each is 44 MB, and one made afresh is mapped
    # anew, page by page: see the module's note); xn and x trade places on each accepted step;
    # spare holds the next pair's (s, y), which a full memory's oldest pair gives back when dropped
    gap, q, low, high, xn, buf = (np.empty_like(x) for _ in range(6))
    spare: list[np.ndarray] = [np.empty_like(x), np.empty_like(x)]
    while evals < max_evals:
        np.subtract(x, lower, out=gap)
        mean_gap = float(gap.mean())
        active = (g > 0) & (gap <= _ACTIVE * mean_gap)
        free = ~active
        np.negative(g, out=q)
        q[active] = 0.0
        if not np.any(q):
            break
        scale = None
        if scaled:
            scale = np.add(gap, _SCALE_FLOOR * mean_gap, out=low)  # low is set below, after its use here
        d = _two_loop(q, mem, free, scale, overwrite=True, buf=buf)
        slope = float(g @ d)
        if not slope < 0:  # the memory does not give a descent direction: start it again
            mem.clear()
            np.negative(g, out=q)
            q[active] = 0.0
            d, slope = q, float(g @ q)
        t = 1.0 if mem else min(1.0, 1.0 / float(np.linalg.norm(d)))  # SciPy's first step
        # a step is a move inside a box around x (_FALL); the variables held go to lower
        np.multiply(gap, _FALL, out=low)
        low += lower
        low[active] = lower
        np.divide(gap, _FALL, out=high)
        high += x
        high += mean_gap
        high[active] = lower
        s, y = spare
        for _ in range(_MAX_HALVINGS):
            np.multiply(d, t, out=xn)
            xn += x
            np.clip(xn, low, high, out=xn)
            fn, gn = fg(xn)
            evals += 1
            pred = float(g @ np.subtract(xn, x, out=s))
            if fn <= f + _ARMIJO * pred or evals >= max_evals:
                break
            # the minimum of the quadratic through f, its slope and fn, kept in [0.1 t, 0.5 t]
            curv = fn - f - pred
            t *= min(_SHRINK, max(0.1, -pred / (2.0 * curv))) if curv > 0 else _SHRINK
        else:
            break
        if not fn <= f:
            break
        pair = _curved_pair(s, np.subtract(gn, g, out=y))
        if pair is not None:
            if len(mem) == mem.maxlen:
                s_old, y_old, _ = mem.popleft()
                spare = [s_old, y_old] if s_old.size == x.size else [np.empty_like(x), np.empty_like(x)]
            else:
                spare = [np.empty_like(x), np.empty_like(x)]
            mem.append(pair)
        x, xn = xn, x
        f, g = fn, gn
    return x, f, evals


def new_memory(maxcor: int) -> deque:
    """An empty L-BFGS memory of ``maxcor`` pairs for :func:`projected_lbfgs`."""
    return deque(maxlen=maxcor)


def resize_memory(mem: deque, n: int) -> None:
    """The memory ``mem`` made to hold ``n`` variables, in place: pairs of a longer problem
    (pairs joining a flow at the floor weight are appended) get zeros for the new variables,
    so ``s'y`` is kept and the new variables start on the initial Hessian alone (their
    curvature is not known); pairs of a shorter one lose their last variables, and with them
    their share of ``s'y`` (a pair left without positive curvature is dropped).  One pair is
    copied at a time (at full vocabulary a pair of vectors is 90 MB)."""
    for _ in range(len(mem)):
        s, y, rho = mem.popleft()
        if s.size < n:
            s, y = np.concatenate([s, np.zeros(n - s.size)]), np.concatenate([y, np.zeros(n - y.size)])
        elif s.size > n:
            pair = _curved_pair(s[:n], y[:n])
            if pair is not None:
                mem.append(pair)
            continue
        mem.append((s, y, rho))


def _curved_pair(s: np.ndarray, y: np.ndarray):
    """``(s, y, 1 / s'y)`` for the memory, or ``None`` where ``s'y`` is not above ``_CURVED``
    of ``y'y`` (no positive curvature along ``s``)."""
    sy = float(s @ y)
    return (s, y, 1.0 / sy) if sy > _CURVED * float(y @ y) else None


def _two_loop(q: np.ndarray, mem, free: np.ndarray, scale: np.ndarray | None = None, *,
              overwrite: bool = False, buf: np.ndarray | None = None) -> np.ndarray:
    """The L-BFGS product ``H q`` on the free variables (the pairs restricted to them),
    from the initial Hessian ``gamma I``, or ``gamma diag(scale)`` where ``scale`` is given.
    ``q`` is zero off ``free``; each update is made on every variable and the held ones are
    set back to zero, which is ``q - a (y restricted to free)`` (to rounding: BLAS's ``axpy``
    may fuse the multiply and add), without a masked copy of each memory vector.  The updates
    are SciPy's BLAS ``axpy`` in place (one pass where NumPy's multiply and subtract made
    three) and the products its ``dot``: at full vocabulary (5.5 million variables, ten pairs)
    0.20 s a product with SciPy's OpenBLAS on two threads, where NumPy's element-wise
    operations took 0.31 s.  Inside ``min_tension`` that pool is on one thread
    (hilbertgeom/_threads.py), and 30 evaluations of the weights' descent took as long
    either way.  With ``overwrite`` the product is made in ``q`` itself; ``buf`` is a work
    vector of ``q``'s size for ``scale``."""
    if not mem:
        return q
    if not overwrite or q.dtype != np.float64 or not q.flags.c_contiguous:
        q = np.array(q, dtype=np.float64, order="C")
    held = np.flatnonzero(~free)
    alphas = []
    for s, y, rho in reversed(mem):
        a = rho * _ddot(s, q)
        _daxpy(y, q, a=-a)  # in place: q is contiguous float64
        q[held] = 0.0
        alphas.append(a)
    s, y, rho = mem[-1]
    if scale is None:
        q *= 1.0 / (rho * _ddot(y, y))  # the initial Hessian gamma I, gamma = s'y / y'y
    else:
        buf = np.multiply(scale, y, out=buf)
        q *= scale
        q *= 1.0 / (rho * _ddot(y, buf))  # gamma D, gamma = s'y / y'Dy
    for (s, y, rho), a in zip(mem, reversed(alphas), strict=True):
        b = rho * _ddot(y, q)
        _daxpy(s, q, a=a - b)
        q[held] = 0.0
    return q
