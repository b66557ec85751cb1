"""Cheap certified pieces: RowNorm, projected RowNorm (I15) and the bounds of
I11 and I17 on ``T(G)``."""

from __future__ import annotations

import math
from typing import Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from .. import _validate as _v
from ..ball import jung_radius
from ..rows import row_diameter
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
    n = _rownorms(X)
    return _normalize(X, n, n > e)


def _normalize(X, n, nz):
    out = np.zeros_like(X)
    out[nz] = X[nz] / n[nz, None]
    return out


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
    return 4.0 * _U64 * float(np.linalg.norm(np.abs(G0).sum(axis=0)))


def _nonzero_rows(G0: np.ndarray, X: np.ndarray, n: np.ndarray, eps: float, centered: bool) -> np.ndarray:
    """Rows of the centred ``X`` (row norms ``n``) that count as non-zero: above ``eps``
    and above the centring noise; without ``center``, rows that are exactly zero in
    the input ``G0`` stay zero whatever the centring left in them."""
    nz = (n > eps) & (n > centring_noise(G0))
    if not centered:
        nz &= np.any(G0 != 0, axis=1)
    return nz



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
    X, centered = _v.zero_sum_matrix(G0, center)
    e = _v.scalar(eta, "eta", minimum=0.0)
    eps = _v.scalar(eps, "eps", minimum=0.0)
    n = _rownorms(X)
    nz = _nonzero_rows(G0, X, n, eps, centered)
    N = _normalize(X, n, nz)
    S = -(e / 2.0) * (N - N.mean(axis=0)) + 0.0  # + 0.0 folds -0.0 into 0.0
    if return_decrease:
        return S, e / 2.0 * float(n[nz].sum())
    return S


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
    X, centered = _v.zero_sum_matrix(G0, center)
    tile = _v.integer(tile, "tile", minimum=1)
    V, d = X.shape
    n = _rownorms(X)
    total = float(n.sum())
    if total == 0.0:
        return TensionBounds(0.0, 0.0, "G = 0", "G = 0")
    N = _normalize(X, n, _nonzero_rows(G0, X, n, 0.0, centered))
    Pn = N - N.mean(axis=0)
    Dn = row_diameter(Pn)
    # everything below at unit size: an exact power of two, unless entries fall below
    # the normal range, which moves each entry by at most 2^-1074 (accounted for)
    e2 = math.frexp(float(np.abs(X).max()))[1]
    Xs = np.ldexp(X, -e2)
    exact = bool(np.array_equal(np.ldexp(Xs, e2), X))
    slack = 0.0 if exact else _TINY_SUB * (V * d + V * V * math.sqrt(d))
    f = math.ldexp(1.0, e2)
    # Dn == 0 only when all rows of G are equal, i.e. G = 0 up to rounding: T = 0 then
    lower = max((float(np.sum(Xs * Pn)) * (1.0 - 4.0 * (V * d + 2) * _U64) - slack) / Dn, 0.0) * f if Dn > 0 else 0.0
    # Jung on the numerical row space (dimension k) plus Jung in full dimension on
    # what the truncation leaves out: <G, Phi> = <G W W^T, Phi> + <G (I - W W^T), Phi>
    # The bound holds for any orthonormal W; W only decides how tight it is.  The
    # eigenvectors of the d x d Gram matrix (one GEMM, no V x d factorisation)
    # resolve singular values down to about sqrt(d u) s_max; smaller ones go to E.
    lam, Q = np.linalg.eigh(Xs.T @ Xs)
    lam, Q = lam[::-1], Q[:, ::-1]
    k = max(1, int(np.sum(lam > lam[0] * 4.0 * (d + 2) * _U64)))
    W = Q[:, :k]
    C = Xs @ W
    E = Xs - C @ W.T
    kfull = min(V - 1, d)
    jung = (jung_radius(k) * float(_rownorms(C).sum()) + jung_radius(kfull) * float(_rownorms(E).sum()))
    jung = (jung * (1.0 + 8.0 * (V + d) * _U64) + slack) * f
    bal = (_balanced_flow_cost(Xs, tile) + slack) * f
    if not (math.isfinite(jung) or math.isfinite(bal)):
        raise ValueError("tension_bounds: T(G) exceeds the float64 range; scale G down")
    if jung <= bal:
        return TensionBounds(lower, jung, "RowNorm potential (I17)", f"Jung J_{k} sum ||g_i|| (I17)")
    return TensionBounds(lower, bal, "RowNorm potential (I17)", "balanced flow (I11)")


_TINY_SUB = 2.0**-1074
