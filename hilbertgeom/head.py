"""Forward and backward geometry of an LM-head update (identities I6, I8, I9).

The head ``U`` (V x d) maps ``h`` to ``p = softmax(U h)``.  An update ``S``
moves the distribution by at most ``R D(S)`` in Hilbert's metric over the ball
``||h|| <= R`` (I6); the gradient it feeds back is bounded by the same diameter
(I8, I9).
"""

from __future__ import annotations

import math

import numpy as np

from . import _validate as _v
from .rows import row_diameter
from .tolerances import tolerance

__all__ = [
    "backward_bound",
    "backward_change",
    "backward_change_bound",
    "backward_witness",
    "cross_entropy_backward_bound",
    "head_norm",
    "worst_case_hidden",
]

_DUAL = {2.0: 2.0, math.inf: 1.0, 1.0: math.inf}


def head_norm(S, /, *, hidden_norm=2, radius=1.0):
    r"""Largest Hilbert change an update can cause over a hidden-state ball.

    .. math::

        \sup_{\|h\| \le R} H\bigl(\operatorname{softmax}((U+S)h),
        \operatorname{softmax}(Uh)\bigr) = R\, D_{*}(S)

    where ``D_*`` is the row diameter in the norm dual to ``hidden_norm``
    (``l2 -> l2``, ``l_inf -> l_1``, ``l_1 -> l_inf``).  The value does not
    depend on ``U`` (softmax isometry, I2).

    Parameters
    ----------
    S : (V, d) array_like
        The update.
    hidden_norm : {2, 1, inf}
        Norm of the hidden-state ball.
    radius : float
        Its radius ``R >= 0``.

    Returns
    -------
    float

    References
    ----------
    Identity I6.

    Examples
    --------
    >>> head_norm([[0.0, 0.0], [3.0, 4.0]], radius=2.0)
    10.0
    >>> head_norm([[0.0, 0.0], [3.0, 4.0]], hidden_norm="inf")   # l1 diameter
    7.0
    """
    hn = _v.norm_choice(hidden_norm, "hidden_norm")
    R = _v.scalar(radius, "radius", minimum=0.0)
    return R * row_diameter(S, norm=_DUAL[hn])


def worst_case_hidden(S, /, *, hidden_norm=2, radius=1.0):
    r"""A hidden state ``h`` with ``||h|| = R`` attaining :func:`head_norm`.

    For ``l2``: ``h = R (s_i - s_j) / ||s_i - s_j||`` on the farthest pair; for
    ``l_inf``: ``h = R sign(s_i - s_j)`` on the farthest ``l_1`` pair; for ``l_1``:
    ``h = R sign(s_ik - s_jk) e_k`` on the coordinate of the largest column
    range.  Then ``var(S h) = R D_*(S)``.  If ``D_*(S) = 0`` every ``h`` attains it
    and ``R e_0`` is returned.

    Parameters
    ----------
    S : (V, d) array_like
    hidden_norm : {2, 1, inf}
    radius : float

    Returns
    -------
    (d,) float64 ndarray

    Examples
    --------
    >>> worst_case_hidden([[0.0, 0.0], [3.0, 4.0]])
    array([-0.6, -0.8])
    """
    hn = _v.norm_choice(hidden_norm, "hidden_norm")
    R = _v.scalar(radius, "radius", minimum=0.0)
    X = _v.matrix(S, "S")
    d = X.shape[1]
    h = np.zeros(d)
    if X.shape[0] < 2:
        h[0] = R
        return h
    dist, i, j = row_diameter(X, norm=_DUAL[hn], return_pair=True)
    if dist == 0.0:
        h[0] = R
        return h
    diff = X[i] - X[j]
    diff = diff / np.abs(diff).max()  # scaled first: the norm of 1e-200 entries underflows
    if hn == 2.0:
        return R * diff / np.linalg.norm(diff)
    if hn == math.inf:
        return R * np.where(diff >= 0, 1.0, -1.0)
    k = int(np.argmax(np.abs(diff)))
    h[k] = R * math.copysign(1.0, diff[k])
    return h


def _zero_sum(r: np.ndarray, name: str) -> None:
    s = abs(float(r.sum()))
    # relative rounding of a V-term sum, plus its absolute floor among subnormals
    tol = tolerance("kernel", d=r.shape[0]).bound(float(np.abs(r).sum())) + r.shape[0] * 2.0**-1074
    if s > tol:
        raise ValueError(
            f"{name} must sum to zero (a logit gradient); |1^T {name}| = {s:.3e} exceeds "
            f"the rounding allowance {tol:.3e}"
        )


def backward_bound(S, r, /):
    r"""Bound on the backward signal ``||S^T r||_2`` for a zero-sum logit gradient.

    .. math:: \|S^\top r\|_2 \le \tfrac12 D(S)\, \|r\|_1 \qquad (1^\top r = 0)

    Sharp: :func:`backward_witness` attains it.

    Parameters
    ----------
    S : (V, d) array_like
    r : (V,) array_like
        Logit gradient with ``sum(r) = 0`` (to rounding).

    Returns
    -------
    float

    References
    ----------
    Identity I8.

    Examples
    --------
    >>> backward_bound([[0.0, 0.0], [3.0, 4.0]], [0.5, -0.5])
    2.5
    """
    X = _v.matrix(S, "S")
    rv = _v.vector(r, "r", length=X.shape[0])
    _zero_sum(rv, "r")
    return 0.5 * row_diameter(X) * float(np.abs(rv).sum())


def backward_witness(S, /):
    r"""The logit gradient ``r = e_i - e_j`` on the farthest pair: ``||S^T r|| = D(S)``.

    With ``||r||_1 = 2`` it attains :func:`backward_bound` with equality.

    Parameters
    ----------
    S : (V, d) array_like, ``V >= 2``.

    Returns
    -------
    (V,) float64 ndarray

    Examples
    --------
    >>> backward_witness([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    array([ 1., -1.,  0.])
    """
    X = _v.matrix(S, "S", min_rows=2)
    _, i, j = row_diameter(X, return_pair=True)
    r = np.zeros(X.shape[0])
    r[i], r[j] = 1.0, -1.0
    return r


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _class_index(c, V: int) -> int:
    k = _v.integer(c, "c", minimum=0)
    if k >= V:
        raise ValueError(f"c must be a token index in [0, {V}); got {k}")
    return k


def cross_entropy_backward_bound(S, p, c, /):
    r"""``||S^T (p - e_c)||_2 <= D(S) (1 - p_c)`` for a distribution ``p`` (I8).

    Parameters
    ----------
    S : (V, d) array_like
    p : (V,) array_like
        Nonnegative; normalised to sum to one.
    c : int
        Target token.

    Returns
    -------
    float
        ``D(S) (1 - p_c)``, with ``1 - p_c`` computed as ``sum_{i != c} p_i``.

    Examples
    --------
    >>> cross_entropy_backward_bound([[0.0, 0.0], [3.0, 4.0]], [0.25, 0.75], 1)
    1.25
    """
    X = _v.matrix(S, "S")
    pv = _v.nonnegative(_v.vector(p, "p", length=X.shape[0]), "p")
    tot = float(pv.sum())
    if tot <= 0.0:
        raise ValueError("p must have a positive entry")
    k = _class_index(c, X.shape[0])
    rest = float(np.delete(pv, k).sum()) / tot
    return row_diameter(X) * rest


def _backward_parts(U, S, h, c):
    Um = _v.matrix(U, "U")
    Sm = _v.matrix(S, "S")
    if Sm.shape != Um.shape:
        raise ValueError(f"S must have the shape of U {Um.shape}; got {Sm.shape}")
    hv = _v.vector(h, "h", length=Um.shape[1])
    k = _class_index(c, Um.shape[0])
    z = Um @ hv
    z2 = (Um + Sm) @ hv
    return Um, Sm, hv, k, _softmax(z), _softmax(z2)


def backward_change(U, S, h, c, /):
    r"""The change ``||b_+ - b||_2`` of the head's backward signal.

    ``b = U^T (p - e_c)`` with ``p = softmax(U h)`` and
    ``b_+ = (U + S)^T (q - e_c)`` with ``q = softmax((U + S) h)``.

    Parameters
    ----------
    U, S : (V, d) array_like
    h : (d,) array_like
    c : int

    Returns
    -------
    float
    """
    Um, Sm, _, k, p, q = _backward_parts(U, S, h, c)
    ep = p.copy()
    ep[k] -= 1.0
    eq = q.copy()
    eq[k] -= 1.0
    return float(np.linalg.norm((Um + Sm).T @ eq - Um.T @ ep))


def backward_change_bound(U, S, h, c, /):
    r"""Bound on :func:`backward_change` (identity I9).

    .. math::

        \|b_+ - b\| \le \min\{ D(S)(1-q_c) + D(U)\tanh(\delta/4),\;
                              D(S)(1-p_c) + D(U+S)\tanh(\delta/4) \},
        \quad \delta = \operatorname{var}(S h)

    from ``b_+ - b = S^T(q - e_c) + U^T(q - p)`` (and the symmetric split), the
    backward bound I8 and ``TV(p, q) <= tanh(H(p, q)/4)`` with ``H(p, q) = var(S h)``.
    The dependence on ``U`` cannot be removed (see the docs' worked example).

    Parameters
    ----------
    U, S : (V, d) array_like
    h : (d,) array_like
    c : int

    Returns
    -------
    float

    Examples
    --------
    >>> U = [[0.0, 1.0], [0.0, -1.0]]; S = [[0.5, 0.0], [-0.5, 0.0]]
    >>> backward_change(U, S, [1.0, 0.0], 0) <= backward_change_bound(U, S, [1.0, 0.0], 0)
    True
    """
    Um, Sm, hv, k, p, q = _backward_parts(U, S, h, c)
    t = math.tanh(float(np.ptp(Sm @ hv)) / 4.0)
    dS = row_diameter(Sm)
    one_p = float(np.delete(p, k).sum())
    one_q = float(np.delete(q, k).sum())
    return min(dS * one_q + row_diameter(Um) * t, dS * one_p + row_diameter(Um + Sm) * t)
