"""Forward and backward geometry of an LM-head update (identities I6, I8, I9).

The head ``U`` (V x d) maps ``h`` to ``p = softmax(U h)``.  An update ``S``
moves the distribution by at most ``R D(S)`` in Hilbert's metric over the ball
``||h|| <= R`` (I6); the gradient it feeds back is bounded by the same diameter
(I8, I9).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import array_api_compat
import numpy as np
from numpy.typing import ArrayLike

from . import _fp
from . import _validate as _v
from ._validate import NormLike
from .rows import Search, _extreme_scaled

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


def _diameter(X, norm: float = 2.0, search: Search | None = None) -> tuple[float, int]:
    """``(m, t)`` with ``D(X) = m 2^t`` (no overflow in ``m``); ``(0, 0)`` for one row.
    ``X`` is a validated matrix of any array-API namespace."""
    if X.shape[0] < 2:
        return 0.0, 0
    p, t = _extreme_scaled(X, norm, "max", None, up=True, search=search)
    return p.distance, t


def _head_norm(X, hn: float, R: float, search: Search | None = None) -> float:
    """``R D_*(X)`` without overflow in between (the kernel of :func:`head_norm`, any namespace)."""
    m, t = _diameter(X, _DUAL[hn], search)
    return _fp.product(R, m, shift=t, what="radius * D(S)", names="S or radius")


def _worst_case_hidden(X, hn: float, R: float, search: Search | None = None):
    """The kernel of :func:`worst_case_hidden`: a validated ``(V, d)`` matrix of any
    array-API namespace in, a float64 ``(d,)`` array of that namespace out."""
    xp = array_api_compat.array_namespace(X)
    X = xp.astype(X, xp.float64, copy=False)
    V, d = X.shape
    h = xp.zeros((d,), dtype=xp.float64)
    if V < 2:
        h[0] = R
        return h
    (dist, i, j), _ = _extreme_scaled(X, _DUAL[hn], "max", None, search=search)
    if dist == 0.0:
        h[0] = R
        return h
    with np.errstate(over="ignore"):
        diff = X[i, :] - X[j, :]
    if not bool(xp.all(xp.isfinite(diff))):  # rows near +-1.8e308: the same direction from halves (exact)
        diff = 0.5 * X[i, :] - 0.5 * X[j, :]
    diff = diff / xp.max(xp.abs(diff))  # scaled first: the norm of 1e-200 entries underflows
    if hn == 2.0:
        return R * diff / xp.sqrt(xp.sum(diff * diff))
    if hn == math.inf:
        return R * xp.where(diff >= 0, xp.ones_like(diff), -xp.ones_like(diff))
    k = int(xp.argmax(xp.abs(diff)))
    h[k] = R * math.copysign(1.0, float(diff[k]))
    return h


def head_norm(S: ArrayLike, /, *, hidden_norm: NormLike = 2, radius: float = 1.0) -> float:
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
    return _head_norm(_v.matrix(S, "S", keep_float32=True), hn, R)


def worst_case_hidden(S: ArrayLike, /, *, hidden_norm: NormLike = 2, radius: float = 1.0) -> np.ndarray:
    r"""A hidden state ``h`` with ``||h|| = R`` attaining :func:`head_norm`.

    For ``l2``: ``h = R (s_i - s_j) / ||s_i - s_j||`` on the farthest pair; for
    ``l_inf``: ``h = R sign(s_i - s_j)`` on the farthest ``l_1`` pair; for ``l_1``:
    ``h = R sign(s_ik - s_jk) e_k`` on the coordinate of the largest column
    range.  Then ``var(S h) = R D_*(S)``.  If ``D_*(S) = 0`` every ``h`` attains it
    and ``R e_0`` is returned.

    Parameters
    ----------
    S : (V, d) array_like
        The update (finite, any magnitude: ``h`` depends only on the direction
        of the farthest pair, so ``S`` and ``2^k S`` give the same ``h``).
    hidden_norm : {2, 1, inf}
        Norm of the hidden-state ball.
    radius : float
        Its radius ``R >= 0``.

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
    return _worst_case_hidden(_v.matrix(S, "S"), hn, R)


def _unit_vector(r: np.ndarray) -> tuple[np.ndarray, int]:
    """``(r 2^k, k)`` with the largest entry in ``[1/2, 1)`` (``k = 0`` for ``r = 0``)."""
    top = _fp.max_abs(r)
    k = -math.frexp(top)[1] if top > 0 else 0
    return _fp.ldexp(r, k), k


def _zero_sum(rs: np.ndarray, k: int, name: str) -> np.ndarray:
    """``rs = r 2^k`` checked for ``1^T r = 0`` by the library's zero-sum rule, and projected.

    As for gradient matrices (:func:`hilbertgeom._validate.zero_sum_matrix`),
    ``|1^T r| <= 1e-6 sum |r_i|`` counts as zero-sum: a logit gradient
    ``p - e_c`` of a confident prediction carries the rounding of ``p_c - 1``,
    which is relative to 1, not to the small entries of ``r``.  An accepted
    ``r`` with a non-zero computed sum is read as its projection ``P r`` (the
    zero-sum vector it rounds), which the bound then uses.
    """
    s = abs(float(rs.sum()))
    tol = _v.ZERO_SUM_RTOL * float(np.abs(rs).sum()) + _fp.ldexp_inf(rs.shape[0], k - 1074)
    if s > tol:
        raise ValueError(
            f"{name} must sum to zero (a logit gradient); |1^T {name}| = {_fp.ldexp_inf(s, -k):.3e} "
            f"exceeds the allowance {_fp.ldexp_inf(tol, -k):.3e} (1e-6 of sum |{name}_i|)"
        )
    return rs - rs.mean() if s > 0 else rs


def backward_bound(S: ArrayLike, r: ArrayLike, /) -> float:
    r"""Bound on the backward signal ``||S^T r||_2`` for a zero-sum logit gradient.

    .. math:: \|S^\top r\|_2 \le \tfrac12 D(S)\, \|r\|_1 \qquad (1^\top r = 0)

    Sharp: :func:`backward_witness` attains it.

    Parameters
    ----------
    S : (V, d) array_like
        The update.
    r : (V,) array_like
        Logit gradient with ``sum(r) = 0``: ``|sum(r)| <= 1e-6 sum |r_i|`` is
        accepted as rounding and ``r`` is then read as its projection ``P r``.

    Returns
    -------
    float
        Formed from mantissas and exponents (one final rounding), so ``D(S)``
        or ``||r||_1`` may exceed float64 while the bound does not.

    Raises
    ------
    ValueError
        If ``r`` does not sum to zero, or the bound exceeds the float64 range.

    References
    ----------
    Identity I8.

    Examples
    --------
    >>> backward_bound([[0.0, 0.0], [3.0, 4.0]], [0.5, -0.5])
    2.5
    """
    X = _v.matrix(S, "S")
    rs, k = _unit_vector(_v.vector(r, "r", length=X.shape[0]))
    rs = _zero_sum(rs, k, "r")
    m, t = _diameter(X)
    return _fp.product(0.5, m, float(np.abs(rs).sum()), shift=t - k, what="D(S) ||r||_1 / 2", names="S or r")


def backward_witness(S: ArrayLike, /) -> np.ndarray:
    r"""The logit gradient ``r = e_i - e_j`` on the farthest pair: ``||S^T r|| = D(S)``.

    With ``||r||_1 = 2`` it attains :func:`backward_bound` with equality.

    Parameters
    ----------
    S : (V, d) array_like
        The update, ``V >= 2`` rows.

    Returns
    -------
    (V,) float64 ndarray

    Examples
    --------
    >>> backward_witness([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    array([ 1., -1.,  0.])
    """
    X = _v.matrix(S, "S", min_rows=2)
    (_, i, j), _ = _extreme_scaled(X, 2.0, "max", None)
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


def cross_entropy_backward_bound(S: ArrayLike, p: ArrayLike, c: int, /) -> float:
    r"""``||S^T (p - e_c)||_2 <= D(S) (1 - p_c)`` for a distribution ``p`` (I8).

    Parameters
    ----------
    S : (V, d) array_like
        The update.
    p : (V,) array_like
        Nonnegative; normalised to sum to one (any positive multiple gives
        the same bound).
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
    pv, _ = _unit_vector(_v.nonnegative(_v.vector(p, "p", length=X.shape[0]), "p"))  # p is a ray
    tot = float(pv.sum())
    if tot <= 0.0:
        raise ValueError("p must have a positive entry")
    k = _class_index(c, X.shape[0])
    rest = float(np.delete(pv, k).sum()) / tot
    m, t = _diameter(X)
    return _fp.product(m, rest, shift=t, what="D(S) (1 - p_c)", names="S")


class _Parts(NamedTuple):
    """Validated inputs of the I9 functions, scaled: ``U = Us 2^-k``, ``S = Ss 2^-k``,
    ``h = hs 2^-j``, ``z = zs 2^-(k+j)``; ``p, q`` are the two softmax distributions."""

    Us: np.ndarray
    Ss: np.ndarray
    k: int
    j: int
    zs: np.ndarray
    dzs: np.ndarray  # S h, scaled as zs
    c: int
    p: np.ndarray
    q: np.ndarray


def _softmax_scaled(zs: np.ndarray, shift: int) -> np.ndarray:
    """``softmax(zs 2^shift)`` (``zs`` finite); logits that overflow when scaled
    back are ``-inf`` below the largest and get probability 0."""
    with np.errstate(over="ignore"):
        w = _fp.ldexp(zs - zs.max(), shift)
    e = np.exp(w)
    return e / e.sum()


def _backward_parts(U, S, h, c) -> _Parts:
    Um = _v.matrix(U, "U")
    Sm = _v.matrix(S, "S")
    if Sm.shape != Um.shape:
        raise ValueError(f"S must have the shape of U {Um.shape}; got {Sm.shape}")
    hv = _v.vector(h, "h", length=Um.shape[1])
    c = _class_index(c, Um.shape[0])
    # b_+ - b is linear in (U, S) at fixed logits: one power of two for both, one for h
    k = _fp.unit_shift(max(_fp.max_abs(Um), _fp.max_abs(Sm)))
    j = _fp.unit_shift(_fp.max_abs(hv))
    Us, Ss, hs = _fp.ldexp(Um, k), _fp.ldexp(Sm, k), _fp.ldexp(hv, j)
    zs = Us @ hs
    dzs = Ss @ hs
    z2s = zs + dzs  # (U + S) h without forming U + S
    return _Parts(Us, Ss, k, j, zs, dzs, c, _softmax_scaled(zs, -(k + j)), _softmax_scaled(z2s, -(k + j)))


def backward_change(U: ArrayLike, S: ArrayLike, h: ArrayLike, c: int, /) -> float:
    r"""The change ``||b_+ - b||_2`` of the head's backward signal.

    ``b = U^T (p - e_c)`` with ``p = softmax(U h)`` and
    ``b_+ = (U + S)^T (q - e_c)`` with ``q = softmax((U + S) h)``.

    Parameters
    ----------
    U : (V, d) array_like
        The head.
    S : (V, d) array_like
        The update, of the shape of ``U``.
    h : (d,) array_like
        The hidden state.
    c : int
        The target token, ``0 <= c < V``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the change exceeds the float64 range.

    Notes
    -----
    Computed as ``S^T (q - e_c) + U^T (q - p)`` (no cancellation of ``b_+``
    against ``b``).  The answer is not homogeneous in ``U`` (the softmax sees
    the logits), but it is linear in ``(U, S)`` at fixed logits: ``U, S`` are
    scaled by one power of two and ``h`` by another so that nothing overflows
    or underflows, logits beyond float64 give a one-hot softmax, and
    ``backward_change(2^k U, 2^k S, 2^-k h, c) == 2^k backward_change(U, S, h, c)``.

    Examples
    --------
    >>> U = [[0.0, 1.0], [0.0, -1.0]]; S = [[0.5, 0.0], [-0.5, 0.0]]
    >>> t = 1 / (1 + math.e)                    # q = (1 - t, t), p = (1/2, 1/2)
    >>> bool(abs(backward_change(U, S, [1.0, 0.0], 0) - math.hypot(t, 1 - 2 * t)) < 1e-15)
    True
    """
    P = _backward_parts(U, S, h, c)
    eq = P.q.copy()
    eq[P.c] -= 1.0
    # b_+ - b = S^T (q - e_c) + U^T (q - p): no cancellation of b_+ against b
    w = P.Ss.T @ eq + P.Us.T @ (P.q - P.p)
    ws, kw = _unit_vector(w)
    return _fp.product(float(np.sqrt(ws @ ws)), shift=-(P.k + kw), what="||b_+ - b||", names="U and S")


def backward_change_bound(U: ArrayLike, S: ArrayLike, h: ArrayLike, c: int, /) -> float:
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
    U : (V, d) array_like
        The head.
    S : (V, d) array_like
        The update, of the shape of ``U``.
    h : (d,) array_like
        The hidden state.
    c : int
        The target token, ``0 <= c < V``.

    Returns
    -------
    float
        Scaled as :func:`backward_change` (the same law under ``2^k``).

    Raises
    ------
    ValueError
        If the bound exceeds the float64 range.

    Examples
    --------
    >>> U = [[0.0, 1.0], [0.0, -1.0]]; S = [[0.5, 0.0], [-0.5, 0.0]]
    >>> backward_change(U, S, [1.0, 0.0], 0) <= backward_change_bound(U, S, [1.0, 0.0], 0)
    True
    """
    P = _backward_parts(U, S, h, c)
    t = math.tanh(_fp.ldexp_inf(float(np.ptp(P.dzs)), -(P.k + P.j)) / 4.0)  # delta = var(S h)
    # diameters of the scaled matrices (entries below 2^401 in magnitude: finite)
    dS, dU, dUS = (_fp.product(m, shift=t) for m, t in map(_diameter, (P.Ss, P.Us, P.Us + P.Ss)))
    one_p = float(np.delete(P.p, P.c).sum())
    one_q = float(np.delete(P.q, P.c).sum())
    bound = min(dS * one_q + dU * t, dS * one_p + dUS * t)
    return _fp.product(bound, shift=-P.k, what="the bound of I9", names="U and S")
