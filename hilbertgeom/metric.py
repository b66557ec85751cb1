"""Hilbert's projective metric on the positive cone, and what it controls.

Identities I1--I5 of the reference list: the metric and its log-odds form (I1),
the softmax isometry (I2), the cross-entropy bound (I3), the total-variation
bound and its sharp two-point witness (I4) and the Birkhoff--Hopf contraction
(I5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from . import _validate as _v

__all__ = [
    "Contraction",
    "birkhoff_contraction",
    "hilbert_distance",
    "softmax_hilbert_distance",
    "total_variation",
    "tv_bound",
    "tv_extremal_pair",
    "variation_norm",
]


def _out(a):
    """0-d results come back as Python floats, others as float64 arrays."""
    a = np.asarray(a, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def _scale2(x, e, xp):
    """``x * 2**e`` for integer-valued float ``e`` in ``[-2100, 2100]`` (broadcast),
    in two steps so that neither power of two overflows; exact whenever the
    result (and the half-way product) is a normal number."""
    h = xp.floor(e / 2.0)
    two = xp.asarray(2.0, dtype=x.dtype)
    return (x * xp.pow(two, h)) * xp.pow(two, e - h)


def _exponent(m, xp):
    """The exponent ``e`` with ``2^e <= m < 2^(e+1)`` of each positive entry of ``m``
    (0 where ``m`` is 0), exactly: ``floor(log2 m)`` corrected by one step."""
    pos = m > 0
    ms = xp.where(pos, m, xp.ones_like(m))
    e = xp.floor(xp.log2(ms))
    t = _scale2(ms, -e, xp)
    e = xp.where(t >= 2.0, e + 1.0, xp.where(t < 1.0, e - 1.0, e))
    return xp.where(pos, e, xp.zeros_like(e))


def _unit_slices(a, pos, ax: int, xp):
    """Each slice along ``ax`` times the power of two ``2^-e`` that brings its
    largest entry to ``[1, 2)``, exactly.  Scaling up is always exact; a slice
    is scaled down only as far as keeps its smallest positive entry normal
    (``e <= max(0, e_low + 1022)``), so a slice spanning more than ``2^1022``
    keeps a larger top.  ``H`` is projective, so this changes no distance, and
    ``H(2^j p, 2^k q)`` is ``H(p, q)`` bit for bit."""
    top = xp.max(a, axis=ax, keepdims=True)
    low = xp.min(xp.where(pos, a, xp.full_like(a, math.inf)), axis=ax, keepdims=True)
    low = xp.where(xp.isfinite(low), low, xp.ones_like(low))
    keep = xp.maximum(_exponent(low, xp) + 1022.0, xp.zeros_like(low))
    return _scale2(a, -xp.minimum(_exponent(top, xp), keep), xp)


def _hilbert(a, b, ax: int, xp):
    """``H(a, b)`` along ``ax`` for validated, broadcast float64 arrays of namespace ``xp``
    (also used by :mod:`hilbertgeom.gpu`): ``inf`` where the supports differ.

    Each slice is first scaled by a power of two (:func:`_unit_slices`), so no
    magnitude of the input decides the answer.  Entry by entry the larger of
    ``p_i, q_i`` goes on top, ``rho_i = max/min >= 1`` (a ratio of two floats,
    rounded once).  ``H`` is the log of the ratio of the extreme ratios: with
    ``A, a`` the largest and smallest ``rho`` where ``p_i >= q_i`` and ``B, b``
    where ``p_i < q_i``, ``H = log(A B)`` when both kinds occur, else
    ``log(A / a)`` or ``log(B / b)``.  That is accurate to about ``3u`` absolutely
    plus ``u H`` (the difference ``log rho_top - log rho_bot`` would lose
    ``u |log rho|``).  Where that product overflows (``H`` above 709) or a ratio
    does, the differences of ``log(max) - log(min)`` are used, accurate to
    ``u H``.  Swapping ``p`` and ``q`` exchanges the two kinds and gives the
    same float operations, so ``H(p, q) == H(q, p)`` bit for bit.
    """
    pa, qa = a > 0, b > 0
    both = xp.logical_and(pa, qa)
    same = xp.all(pa == qa, axis=ax)
    a = _unit_slices(a, pa, ax, xp)
    b = _unit_slices(b, qa, ax, xp)
    one = xp.ones_like(a)
    ps = xp.where(both, a, one)
    qs = xp.where(both, b, one)
    flip = ps < qs
    hi = xp.where(flip, qs, ps)
    lo = xp.where(flip, ps, qs)
    inf = xp.full_like(a, math.inf)
    # NumPy only (other namespaces do not warn): ratios may overflow, inf / inf is caught below
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ratio = hi / lo  # >= 1
        ok = xp.isfinite(ratio)
        mag = xp.where(ok, xp.log(xp.where(ok, ratio, one)), xp.log(hi) - xp.log(lo))
        lr = xp.where(flip, -mag, mag)
        # same support means every slice has a shared positive entry: top and bot are finite there
        top = xp.max(xp.where(both, lr, -inf), axis=ax)
        bot = xp.min(xp.where(both, lr, inf), axis=ax)
        d = top - bot
        up = xp.logical_and(both, xp.logical_not(flip))
        dn = xp.logical_and(both, flip)
        A = xp.max(xp.where(up, ratio, one), axis=ax)
        a_ = xp.min(xp.where(up, ratio, inf), axis=ax)
        B = xp.max(xp.where(dn, ratio, one), axis=ax)
        b_ = xp.min(xp.where(dn, ratio, inf), axis=ax)
        hu, hd = xp.any(up, axis=ax), xp.any(dn, axis=ax)
        prod = xp.where(xp.logical_and(hu, hd), A * B, xp.where(hu, A / a_, B / b_))
        good = xp.logical_and(xp.isfinite(prod), prod >= 1.0)
        d = xp.where(good, xp.log(xp.where(good, prod, xp.ones_like(prod))), d)
    return xp.where(same, d, xp.full_like(d, math.inf))


def hilbert_distance(p: ArrayLike, q: ArrayLike, /, *, axis: int = -1) -> float | np.ndarray:
    r"""Hilbert's projective distance between positive vectors.

    .. math::

        H(p, q) = \max_i \log\frac{p_i}{q_i} - \min_i \log\frac{p_i}{q_i}
                = \max_{i,j} \Bigl|\log\frac{p_i}{p_j} - \log\frac{q_i}{q_j}\Bigr|

    The distance is projective, ``H(a p, b q) = H(p, q)`` for ``a, b > 0``, so the
    inputs need not be normalised.  It is a metric on rays of the open cone.

    Parameters
    ----------
    p, q : (..., n, ...) array_like
        Nonnegative, finite, broadcastable against each other.  Every slice
        along ``axis`` must have a positive entry.
    axis : int
        The axis holding the coordinates; other axes are batch axes.

    Returns
    -------
    float or ndarray
        The distance for each batch entry.  Where ``p`` and ``q`` have the same
        support (the same zero pattern) it is computed on that support and is
        finite; where the supports differ it is ``inf`` (the points lie on
        different faces of the cone).

    Raises
    ------
    ValueError
        If an entry is negative, NaN or inf, a slice is all zero, or the shapes
        do not broadcast.
    TypeError
        For complex or non-numeric input.

    References
    ----------
    Identity I1; D. Hilbert (1895); P. J. Bushell, "Hilbert's metric and
    positive contraction mappings in a Banach space", ARMA 52 (1973).

    Examples
    --------
    >>> hilbert_distance([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])   # log 4
    1.3862943611198906
    >>> hilbert_distance([1.0, 0.0], [3.0, 0.0])               # same support
    0.0
    >>> hilbert_distance([1.0, 0.0], [1.0, 1.0])
    inf
    """
    a = _v.nonnegative(_v.real_array(p, "p"), "p")
    b = _v.nonnegative(_v.real_array(q, "q"), "q")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"p and q must broadcast; got shapes {np.shape(a)} and {np.shape(b)}") from None
    if a.ndim == 0:
        raise ValueError("p and q must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("p and q must have at least one coordinate along axis")
    for arr, name in ((a, "p"), (b, "q")):
        if not (arr > 0).any(axis=ax).all():
            raise ValueError(f"{name} has an all-zero slice along axis {axis}: not a point of the cone")
    return _out(_hilbert(a, b, ax, np))


def variation_norm(x: ArrayLike, /, *, axis: int = -1) -> float | np.ndarray:
    r"""The variation seminorm ``var(x) = max_i x_i - min_i x_i``.

    Its kernel is the constant vectors: ``var(x + c 1) = var(x)``.

    Parameters
    ----------
    x : (..., n, ...) array_like
        Finite real values.
    axis : int
        The coordinate axis; others are batch axes.

    Returns
    -------
    float or ndarray

    Examples
    --------
    >>> variation_norm([3.0, -1.0, 2.0])
    4.0
    """
    a = _v.real_array(x, "x")
    if a.ndim == 0:
        raise ValueError("x must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("x must have at least one coordinate along axis")
    return _out(_variation(a, ax, np))


def _variation(a, ax: int, xp):
    """``max - min`` along ``ax`` in float64, for a validated array of any namespace (the
    kernel of :func:`variation_norm`, also run by :mod:`hilbertgeom.gpu`); a ValueError
    where it exceeds float64.  Max and min are entries of ``a``: promoting them to
    float64 afterwards is exact."""
    with np.errstate(over="ignore"):
        v = xp.astype(xp.max(a, axis=ax), xp.float64) - xp.astype(xp.min(a, axis=ax), xp.float64)
    return _finite(v, "x", "var(x) = max x - min x", xp)


def _finite(v, name: str, what: str, xp=np):
    """``v`` if every entry is finite, else the ValueError for an answer beyond float64."""
    if not bool(xp.all(xp.isfinite(v))):
        raise ValueError(f"{what} exceeds the float64 range (> {np.finfo(np.float64).max:.4g}) "
                         f"for this {name}: rescale {name}")
    return v


def softmax_hilbert_distance(z: ArrayLike, z2: ArrayLike, /, *, axis: int = -1) -> float | np.ndarray:
    r"""Hilbert distance between ``softmax(z)`` and ``softmax(z2)``, from the logits.

    .. math:: H(\operatorname{softmax} z, \operatorname{softmax} z') = \operatorname{var}(z - z')

    No exponential is taken, so logits of any finite size are handled exactly
    (identity I2); where ``z - z2`` overflows, both are halved first (exact).

    Parameters
    ----------
    z, z2 : (..., n, ...) array_like
        Finite logits, broadcastable against each other.
    axis : int
        The vocabulary axis.

    Examples
    --------
    >>> softmax_hilbert_distance([1e4, 0.0, -1e4], [0.0, 0.0, 0.0])
    20000.0
    """
    a = _v.real_array(z, "z")
    b = _v.real_array(z2, "z2")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"z and z2 must broadcast; got shapes {np.shape(a)} and {np.shape(b)}") from None
    if a.ndim == 0:
        raise ValueError("z and z2 must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError("z and z2 must have at least one coordinate along axis")
    return _out(_softmax_variation(a, b, ax, np))


def _softmax_variation(a, b, ax: int, xp):
    """``var(a - b)`` along ``ax`` for broadcast float64 arrays of any namespace (the kernel
    of :func:`softmax_hilbert_distance`, also run by :mod:`hilbertgeom.gpu`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        d = a - b
        v = xp.max(d, axis=ax) - xp.min(d, axis=ax)
        bad = xp.logical_not(xp.isfinite(v))
        if bool(xp.any(bad)):  # z - z2 or its range overflowed: the same in halves (exact), doubled
            h = 0.5 * a - 0.5 * b
            v = xp.where(bad, 2.0 * (xp.max(h, axis=ax) - xp.min(h, axis=ax)), v)
    return _finite(v, "z and z2", "var(z - z2)", xp)


def _normalized(a: np.ndarray, name: str, ax: int) -> np.ndarray:
    """``a / sum(a)`` along ``ax``: the same for ``2^k a``, bit for bit (a division by
    the sum is scale-equivariant wherever the sum does not overflow)."""
    try:
        with np.errstate(over="raise"):
            s = a.sum(axis=ax, keepdims=True)
    except FloatingPointError:
        # the sum overflows: largest entry to [1/2, 1) first (a power of two);
        # entries that become subnormal are below 2^-1022 of the largest, far
        # below the rounding of the sum
        a = np.ldexp(a, -np.frexp(a.max(axis=ax, keepdims=True))[1])
        s = a.sum(axis=ax, keepdims=True)
    if not (s > 0).all():
        raise ValueError(f"{name} has an all-zero slice along axis {ax}: not a distribution")
    return a / s


def total_variation(p: ArrayLike, q: ArrayLike, /, *, axis: int = -1) -> float | np.ndarray:
    r"""Total variation distance ``TV(p, q) = (1/2) sum_i |p_i - q_i|``.

    ``p`` and ``q`` are normalised to sum to one first (they are read as rays of
    the cone, as in :func:`hilbert_distance`).

    Parameters
    ----------
    p, q : (..., n, ...) array_like
        Nonnegative, finite, each slice with a positive entry.
    axis : int
        The coordinate axis.

    Examples
    --------
    >>> total_variation([1.0, 0.0], [0.5, 0.5])
    0.5
    """
    a = _v.nonnegative(_v.real_array(p, "p"), "p")
    b = _v.nonnegative(_v.real_array(q, "q"), "q")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"p and q must broadcast; got shapes {np.shape(a)} and {np.shape(b)}") from None
    if a.ndim == 0:
        raise ValueError("p and q must have at least one dimension (the coordinates)")
    ax = _v.axis_index(axis, a.ndim)
    a = _normalized(a, "p", ax)
    b = _normalized(b, "q", ax)
    return _out(0.5 * np.abs(a - b).sum(axis=ax))


def tv_bound(h: ArrayLike, /) -> float | np.ndarray:
    r"""The sharp bound ``TV(p, q) <= tanh(H(p, q) / 4)`` (identity I4).

    Parameters
    ----------
    h : float or array_like
        Hilbert distances, ``>= 0``; ``inf`` gives 1.

    Examples
    --------
    >>> round(tv_bound(4.0), 12)
    0.761594155956
    """
    a = _v.to_numpy(h, "h")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"h must be real; got dtype {a.dtype}")
    a = a.astype(np.float64)
    if np.isnan(a).any():
        raise ValueError("h must not be NaN")
    if (a < 0).any():
        raise ValueError(f"h must be >= 0 (a distance); smallest entry is {a.min():g}")
    return _out(np.tanh(a / 4.0))


def tv_extremal_pair(h: float, /) -> tuple[np.ndarray, np.ndarray]:
    r"""Two-point distributions at Hilbert distance ``h`` with ``TV = tanh(h/4)``.

    With ``t = e^{h/2}``: ``p = (1, t) / (1 + t)`` and ``q = (t, 1) / (1 + t)``.
    The likelihood ratio ``q/p`` takes the values ``e^{h/2}`` and ``e^{-h/2}``,
    which is the extremal case in the proof of I4.

    Parameters
    ----------
    h : float
        ``0 <= h <= 1400`` (beyond that ``p`` is not representable in float64).

    Returns
    -------
    (p, q) : tuple of two (2,) float64 arrays

    Examples
    --------
    >>> p, q = tv_extremal_pair(2.0)
    >>> bool(abs(total_variation(p, q) - tv_bound(2.0)) < 1e-15)
    True
    """
    v = _v.scalar(h, "h", minimum=0.0)
    if v > 1400.0:
        raise ValueError(f"h must be <= 1400 for a float64 witness (e^(-h/2) underflows); got {v:g}")
    small = 1.0 / (1.0 + np.exp(v / 2.0))  # expit(-h/2)
    large = 1.0 / (1.0 + np.exp(-v / 2.0))  # expit(h/2)
    return np.array([small, large]), np.array([large, small])


@dataclass(frozen=True)
class Contraction:
    """Birkhoff--Hopf data of a nonnegative matrix.

    Attributes
    ----------
    diameter : float
        The projective diameter ``Delta(A)`` of the image cone (``inf`` when
        columns have different zero patterns).
    ratio : float
        The contraction ratio ``tanh(Delta / 4)`` (1 when ``Delta = inf``).
    pair : tuple of int
        Two columns ``(k, l)`` at Hilbert distance ``Delta``.
    """

    diameter: float
    ratio: float
    pair: tuple[int, int]


def birkhoff_contraction(A: ArrayLike, /) -> Contraction:
    r"""Projective diameter and Birkhoff--Hopf contraction ratio of ``A``.

    .. math::

        \Delta(A) = \max_{i,j,k,l} \log\frac{a_{ik} a_{jl}}{a_{il} a_{jk}}, \qquad
        H(Ax, Ay) \le \tanh\bigl(\Delta(A)/4\bigr)\, H(x, y)

    ``Delta(A)`` is the largest Hilbert distance between two columns, which is
    the diameter of the image cone ``A R^m_+`` (the distance is quasi-convex, so
    the diameter of a polyhedral cone is attained at its generators).

    Parameters
    ----------
    A : (n, m) array_like
        Nonnegative and finite, every column with a positive entry.

    Returns
    -------
    Contraction
        ``diameter``, ``ratio`` and the attaining column ``pair``.

    References
    ----------
    Identity I5; G. Birkhoff, "Extensions of Jentzsch's theorem", Trans. AMS 85
    (1957); E. Hopf, J. Math. Mech. 12 (1963).

    Examples
    --------
    >>> c = birkhoff_contraction([[2.0, 1.0], [1.0, 2.0]])   # Delta = log 4
    >>> round(c.diameter, 12), round(c.ratio, 12)            # tanh(log(4)/4) = 1/3
    (1.38629436112, 0.333333333333)
    """
    a = _v.nonnegative(_v.real_array(A, "A"), "A")
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"A must be a non-empty 2-D matrix; got shape {a.shape}")
    if not (a > 0).any(axis=0).all():
        k = int(np.flatnonzero(~(a > 0).any(axis=0))[0])
        raise ValueError(f"A has an all-zero column ({k}): it does not map the open cone into the cone")
    m = a.shape[1]
    best, pair = 0.0, (0, min(1, m - 1))
    for k in range(m - 1):
        d = hilbert_distance(a[:, k : k + 1], a[:, k + 1 :], axis=0)
        d = np.atleast_1d(d)
        l = int(np.argmax(d))
        if d[l] > best:
            best, pair = float(d[l]), (k, k + 1 + l)
    ratio = 1.0 if np.isinf(best) else float(np.tanh(best / 4.0))
    return Contraction(diameter=best, ratio=ratio, pair=pair)
