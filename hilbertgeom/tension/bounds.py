"""Cheap certified pieces: RowNorm, projected RowNorm (I15) and the bounds of
I11 and I17 on ``T(G)``."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from .. import _fp
from .. import _validate as _v
from .._fp import ldexp_inf, max_abs, mul_pow2
from ..ball import jung_radius
from ..rows import Search, _extreme_pair
from ._results import _U64, TensionBounds, _balanced_flow_cost, _rownorms

__all__ = ["projected_rownorm", "rownorm", "tension_bounds"]


def rownorm(G: ArrayLike, /, *, eps: float = 0.0) -> np.ndarray:
    r"""Row normalisation ``RN(G)``: ``g_i / ||g_i||`` for ``||g_i|| > eps``, else 0.

    Rows that are exactly zero stay zero.  (:func:`projected_rownorm` also
    treats rows that are zero up to the rounding of the centring as zero.)

    Parameters
    ----------
    G : (V, d) array_like
        Any finite real matrix (no zero-sum condition).
    eps : float
        Rows with ``||g_i|| <= eps`` count as zero; ``>= 0`` (default 0:
        only exactly zero rows).

    Returns
    -------
    (V, d) float64 ndarray

    Examples
    --------
    >>> rownorm([[3.0, 4.0], [0.0, 0.0]])
    array([[0.6, 0.8],
           [0. , 0. ]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eps, "eps", minimum=0.0)
    # each row scaled by the power of two of its largest entry (exact): no norm over- or
    # underflows, and RN(D G) == RN(G) bit for bit for any power-of-two diagonal D
    k = np.frexp(np.max(np.abs(X), axis=1))[1]
    Xs = np.ldexp(X, -k[:, None])
    ns = np.sqrt(np.einsum("ij,ij->i", Xs, Xs))  # in [1/2, sqrt(d)) for a non-zero row
    with np.errstate(over="ignore"):
        n = np.ldexp(ns, k)  # ||g_i||; inf beyond float64, above any eps
    return _normalize(Xs, ns, (ns > 0) & (n > e))


def _normalize(X, n, nz, xp=np):
    """``x_i / n_i`` for the rows where ``nz``, 0 elsewhere (any array namespace)."""
    N = X / xp.reshape(xp.where(nz, n, xp.ones_like(n)), (-1, 1))
    return xp.where(xp.reshape(nz, (-1, 1)), N, xp.zeros_like(N))


def centring_noise(G0: np.ndarray) -> float:
    """A bound on what the centring ``P G`` leaves in a row that is zero up to rounding.

    The computed column mean of ``G`` differs from the exact one by at most
    ``gamma_V`` times the mean absolute column entry, and the column sums of
    an accepted zero-sum ``G`` are themselves rounding of that size; so a
    row of ``P G`` with norm at most ``4 u ||sum_i |g_i| ||_2`` (column
    absolute sums) cannot be told apart from a zero row moved by the centring.

    Parameters
    ----------
    G0 : (V, d) float64 ndarray
        The gradient as given, before the centring.

    Returns
    -------
    float
        ``4 u ||sum_i |g_i| ||_2`` with ``u = 2^-53``.
    """
    return _centring_noise(G0, np)


def _centring_noise(G0, xp, rows: int | None = None, absum=None) -> float:
    """:func:`centring_noise` for ``G0`` of any array namespace, read ``rows`` rows at a
    time (the norm of the column sums is taken scaled: no overflow); ``absum``: the
    column sums of ``|G0|`` when the caller has them already."""
    V = G0.shape[0]
    rows = V if rows is None else max(1, int(rows))
    if absum is None:
        for a in range(0, V, rows):
            s = xp.sum(xp.abs(xp.astype(G0[a : min(a + rows, V), :], xp.float64, copy=False)), axis=0)
            absum = s if absum is None else absum + s
    return 4.0 * _U64 * float(_rownorms(xp.reshape(absum, (1, -1)), xp)[0])


def _nonzero_rows(G0, n, cut: float, centered: bool, xp=np):
    """Rows of the centred gradient (row norms ``n``; ``G0`` the same rows as given)
    that count as non-zero: norm above ``cut`` (``max(eps, centring noise)``);
    without ``center``, rows that are exactly zero in ``G0`` stay zero whatever
    the centring left in them.  The zero-row rule of the core and the device."""
    nz = n > cut
    if not centered:
        nz = xp.logical_and(nz, xp.any(G0 != 0, axis=1))
    return nz


def _projected_rownorm(G0, xp, center: bool, eta: float, eps: float, return_decrease: bool,
                       rows: int | None = None):
    """``-(eta/2) P RN(P G)`` for a validated ``G0`` of any array namespace: the one
    kernel of :func:`projected_rownorm` and of :mod:`hilbertgeom.gpu`, which passes
    ``rows`` (chunks within its tile budget: memory is then ``G0``, the float64
    result and a few ``rows x d`` temporaries; ``G0`` is read in its own precision).
    With one chunk (the default) ``P RN(P G)`` is kept, not recomputed."""
    V, d = G0.shape
    rows = V if rows is None else max(1, int(rows))
    mean, absum = _v.zero_sum_mean(G0, xp, center, rows, return_abs=True)
    m = xp.reshape(mean, (1, d))
    cut = max(eps, _centring_noise(G0, xp, rows, absum=absum))

    def normalized(a: int, b: int):
        raw = G0[a:b, :]
        X = xp.astype(raw, xp.float64, copy=False) - m
        n = _rownorms(X, xp)
        nz = _nonzero_rows(raw, n, cut, center, xp)
        return _normalize(X, n, nz, xp), xp.where(nz, n, xp.zeros_like(n))

    sumN, dec, kept = None, 0.0, None
    for a in range(0, V, rows):
        N, n = normalized(a, min(a + rows, V))
        s = xp.sum(N, axis=0)
        sumN = s if sumN is None else sumN + s
        dec += float(xp.sum(n))
        if rows >= V:
            kept = N
    mN = xp.reshape(sumN / V, (1, d))
    if kept is not None:
        S = -(eta / 2.0) * (kept - mN) + 0.0  # + 0.0 folds -0.0 into 0.0
    else:
        S = xp.empty((V, d), dtype=xp.float64)
        for a in range(0, V, rows):
            b = min(a + rows, V)
            S[a:b, :] = -(eta / 2.0) * (normalized(a, b)[0] - mN) + 0.0
    return (S, eta / 2.0 * dec) if return_decrease else S



@overload
def projected_rownorm(G: ArrayLike, /, *, eta: float = ..., eps: float = ..., center: bool = ...,
                      return_decrease: Literal[False] = ...) -> np.ndarray: ...
@overload
def projected_rownorm(G: ArrayLike, /, *, eta: float = ..., eps: float = ..., center: bool = ...,
                      return_decrease: Literal[True]) -> tuple[np.ndarray, float]: ...
@overload
def projected_rownorm(G: ArrayLike, /, *, eta: float = ..., eps: float = ..., center: bool = ...,
                      return_decrease: bool = ...) -> np.ndarray | tuple[np.ndarray, float]: ...


def projected_rownorm(G: ArrayLike, /, *, eta: float = 1.0, eps: float = 0.0, center: bool = False,
                      return_decrease: bool = False) -> np.ndarray | tuple[np.ndarray, float]:
    r"""Projected RowNorm update ``S_RN = -(eta/2) P RN(P G)`` (identity I15).

    It minimises ``<G, S>`` over centred ``S`` with covering radius
    ``rad(S) <= eta/2``, with decrease ``-<G, S_RN> = (eta/2) sum_i ||g_i||``;
    since ``D(S) <= 2 rad(S)`` it is feasible for the diameter problem and
    achieves at least ``sqrt((k+1)/(2k))`` of its optimal decrease (I16).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``).
    eta : float
        Step size ``>= 0``.
    eps : float
        Rows with ``||g_i|| <= eps`` count as zero.  Rows that are zero up to
        the rounding of the centring (norm at most ``4 u ||sum_i |g_i| ||``)
        and, without ``center``, rows that are exactly zero in ``G`` always
        count as zero: RowNorm would otherwise scale rounding noise to unit
        length.
    center : bool
        Project ``G`` with ``P`` first instead of requiring zero column sums.
    return_decrease : bool
        Also return the decrease ``-<G, S_RN> = (eta/2) sum ||g_i||`` over the
        rows that count as non-zero.

    Returns
    -------
    (V, d) float64 ndarray, or (S, decrease)

    Examples
    --------
    >>> S = projected_rownorm([[1.0, 0.0], [-1.0, 0.0]], eta=2.0)
    >>> S
    array([[-1.,  0.],
           [ 1.,  0.]])
    """
    G0 = _v.matrix(G, "G", min_rows=2)
    e = _v.scalar(eta, "eta", minimum=0.0)
    eps = _v.scalar(eps, "eps", minimum=0.0)
    # scale-free in G: computed on G at unit size (an exact power of two 2^k, where no column
    # sum or row norm over- or underflows) at eta = 1, then times eta; the decrease is formed
    # from mantissas and exponents and rounded once (a ValueError where it exceeds float64)
    top = _fp.max_abs(G0)
    k = _fp.unit_scale(G0, np, top)
    # k = 0 with entries off unit size: the scaling would be inexact, G is used as given,
    # and an overflow there (a column sum, a mean) must not pass for an answer
    inexact = k == 0 and top != 0.0 and not 0.5 <= top < 1.0
    try:
        with (_fp.zero_sum_named(G0, center, k),
              np.errstate(over="raise", invalid="raise") if inexact else np.errstate(over="ignore", invalid="ignore")):
            S1, dec1 = _projected_rownorm(mul_pow2(G0, k), np, bool(center), 1.0, ldexp_inf(eps, k), True)
    except FloatingPointError:
        raise ValueError(_fp.SPAN) from None
    if k == 0 and not np.isfinite(S1).all():
        raise ValueError(_fp.SPAN)
    S = e * S1 + 0.0
    if not return_decrease:
        return S
    return S, _fp.product(e, dec1, shift=-k, what="the decrease (eta/2) sum ||g_i||", names="G or eta")


def tension_bounds(G: ArrayLike, /, *, center: bool = False, tile: int = 2048) -> TensionBounds:
    r"""Certified bounds on ``T(G)`` without solving (identities I11, I17).

    * lower: ``<G, Phi_RN> / D(Phi_RN)`` with ``Phi_RN = P RN(G)`` (the RowNorm
      potential, its diameter computed exactly), which is at least
      ``sum_i ||g_i|| / 2``;
    * upper: the smaller of Jung's ``J_k sum_i ||g_i||`` (``k = rank G``) and the
      balanced-flow cost ``(1/V) sum_{i<j} ||g_i - g_j||`` (computed in tiles,
      each distance rounded up by its error bound).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, ``V >= 2``, with zero column sums (or ``center=True``).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False).
    tile : int
        Rows per tile of the balanced-flow sum (memory ``tile^2``), ``>= 1``
        (default 2048).

    Returns
    -------
    TensionBounds

    Examples
    --------
    >>> b = tension_bounds([[1.0, 0.0], [-1.0, 0.0]])
    >>> round(b.lower, 12), round(b.upper, 12)
    (1.0, 1.0)
    """
    G0 = _v.matrix(G, "G", min_rows=2)
    # T is homogeneous: bounded at unit size (an exact power of two 2^k: no column sum
    # overflows, no centring rounds in the subnormal range), the bounds scaled back once
    Gs, X, centered, k = _fp.zero_sum_at_unit(G0, center)
    tile = _v.integer(tile, "tile", minimum=1)
    try:  # at unit size nothing overflows; where the scaling was inexact, an overflow is an error
        with np.errstate(over="raise"):
            b = _tension_bounds(Gs, X, centered, tile, np)
    except FloatingPointError:
        raise ValueError("tension_bounds: " + _fp.SPAN) from None
    upper = _fp.ldexp_up(b.upper, -k)  # outward where the bounds land below the normal range
    if math.isinf(upper):
        raise ValueError("tension_bounds: the upper bound on T(G) exceeds the float64 range; scale G down")
    return replace(b, lower=_fp.ldexp_down(b.lower, -k), upper=upper)


def _tension_bounds(G0, X, centered: bool, tile: int, xp, search: Search | None = None) -> TensionBounds:
    """The kernel of :func:`tension_bounds` for ``X = P G0`` (float64) of any array
    namespace: the one formula of the core and of :mod:`hilbertgeom.gpu`, which
    passes its tile-budgeted pair ``search`` for the diameter of the potential."""
    V, d = X.shape
    n = _rownorms(X, xp)
    total = float(xp.sum(n))
    if total == 0.0:
        return TensionBounds(0.0, 0.0, "G = 0", "G = 0")
    N = _normalize(X, n, _nonzero_rows(G0, n, _centring_noise(G0, xp), centered, xp), xp)
    Pn = N - xp.mean(N, axis=0)
    Dn = _extreme_pair(Pn, 2.0, "max", None, search=search).distance
    # everything below at unit size: an exact power of two, unless entries fall below
    # the normal range, which moves each entry by at most 2^-1074 (accounted for)
    e2 = math.frexp(max_abs(X, xp))[1]
    Xs = mul_pow2(X, -e2)
    exact = e2 <= 0 or bool(xp.all(mul_pow2(Xs, e2) == X))  # scaling up is exact
    slack = 0.0 if exact else _TINY_SUB * (V * d + V * V * math.sqrt(d))
    # Dn == 0 only when all rows of G are equal, i.e. G = 0 up to rounding: T = 0 then
    lower = 0.0
    if Dn > 0:
        lower = ldexp_inf(max((float(xp.sum(Xs * Pn)) * (1.0 - 4.0 * (V * d + 2) * _U64) - slack) / Dn, 0.0), e2)
    # Jung on the numerical row space (dimension k) plus Jung in full dimension on
    # what the truncation leaves out: <G, Phi> = <G W W^T, Phi> + <G (I - W W^T), Phi>
    # The bound holds for any orthonormal W; W only decides how tight it is.  The
    # eigenvectors of the d x d Gram matrix (one GEMM, no V x d factorisation)
    # resolve singular values down to about sqrt(d u) s_max; smaller ones go to E.
    lam, Q = xp.linalg.eigh(xp.matrix_transpose(Xs) @ Xs)
    lam, Q = xp.flip(lam), xp.flip(Q, axis=1)  # descending
    k = max(1, int(xp.sum(xp.astype(lam > float(lam[0]) * 4.0 * (d + 2) * _U64, xp.int64))))
    W = Q[:, :k]
    C = Xs @ W
    E = Xs - C @ xp.matrix_transpose(W)
    kfull = min(V - 1, d)
    jung = jung_radius(k) * float(xp.sum(_rownorms(C, xp))) + jung_radius(kfull) * float(xp.sum(_rownorms(E, xp)))
    jung = ldexp_inf(jung * (1.0 + 8.0 * (V + d) * _U64) + slack, e2)
    bal = ldexp_inf(_balanced_flow_cost(Xs, tile, xp) + slack, e2)
    if not (math.isfinite(jung) or math.isfinite(bal)):
        raise ValueError("tension_bounds: T(G) exceeds the float64 range; scale G down")
    if jung <= bal:
        return TensionBounds(lower, jung, "RowNorm potential (I17)", f"Jung J_{k} sum ||g_i|| (I17)")
    return TensionBounds(lower, bal, "RowNorm potential (I17)", "balanced flow (I11)")


_TINY_SUB = 2.0**-1074
