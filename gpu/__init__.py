"""hilbertgeom.gpu: the core's array kernels on CUDA devices, at vocabulary size.

Installed from the top-level ``gpu/`` folder as ``hilbertgeom.gpu`` (extra
``hilbertgeom[gpu]`` pulls CuPy); the core never imports it, and importing it
never requires CUDA.

The functions have the core's names and signatures and return the core's
answers: the same extremal pairs, with float64 distances (float32 input is
screened in float32 and re-checked in float64) that agree with NumPy's to
the rounding of a ``d``-term sum (the device adds in another order), and
the same validation rules.
They take device arrays -- CuPy arrays, or anything exporting DLPack on a CUDA
device such as a torch CUDA tensor (bfloat16 tensors are widened to float32 on
the device, which is exact) -- and keep them there: arrays come back on the
same device, only scalars and indices reach the host.  A host array raises
``TypeError`` pointing to the core function of the same name.

Device memory for the ``tile x tile`` temporaries of the pair kernels is set
with :func:`set_tile_budget` (default 1 GiB); a tile that does not fit is
retried with half the rows (a :class:`TileWarning` says so).

See the "GPU" page of the docs for the tiles, precision and measured numbers.

Examples
--------
On a machine with CUDA (the lines need a GPU, so they are not run here):

>>> import cupy, hilbertgeom.gpu as hgg                      # doctest: +SKIP
>>> S = cupy.random.standard_normal((131072, 4096), dtype=cupy.float32)  # doctest: +SKIP
>>> hgg.row_diameter(S, return_pair=True)                    # doctest: +SKIP
Pair(distance=..., i=..., j=...)

Without one, the module still imports and says why it cannot run:

>>> import hilbertgeom.gpu as hgg
>>> hgg.cuda_available() or "CuPy" in hgg.cuda_unavailable_reason()
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import numpy as np

from hilbertgeom import _fp
from hilbertgeom import _validate as _v
from hilbertgeom import head as _head
from hilbertgeom import rows as _rows
from hilbertgeom._pairs import Pair
from hilbertgeom._validate import NormLike
from hilbertgeom.equalize import EqualizationRun
from hilbertgeom.tension import TensionBounds, TensionResult
from hilbertgeom.tension.bounds import _projected_rownorm, _tension_bounds
from hilbertgeom.updates import UpdateReport, _update_report

from . import _backend as _b
from . import _fused
from . import _kernels as _k
from ._backend import (
    TileWarning,
    cuda_available,
    cuda_unavailable_reason,
    set_tile_budget,
    tile_budget,
    tile_budget_bytes,
)

__all__ = [
    "EqualizationRun",
    "Pair",
    "TensionBounds",
    "TileWarning",
    "UpdateReport",
    "center_rows",
    "closest_pair",
    "cuda_available",
    "cuda_unavailable_reason",
    "equalize_rows",
    "evaluate_update",
    "head_norm",
    "hilbert_distance",
    "projected_rownorm",
    "row_diameter",
    "set_tile_budget",
    "softmax_hilbert_distance",
    "tension_bounds",
    "tile_budget",
    "tile_budget_bytes",
    "variation_norm",
    "worst_case_hidden",
]

#: The gpu functions that mirror a core function of the same name and signature.
KERNELS = (
    "center_rows", "closest_pair", "equalize_rows", "evaluate_update", "head_norm", "hilbert_distance",
    "projected_rownorm", "row_diameter", "softmax_hilbert_distance", "tension_bounds", "variation_norm",
    "worst_case_hidden",
)


def _scoped(fn):
    """Run ``fn`` with the GPU of its first device argument current.

    CuPy allocates on the current device; an input on another GPU (a torch
    ``cuda:1`` tensor) must have every temporary made on its own device.
    """

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _b.on_device(*args):
            return fn(*args, **kwargs)

    return run


def _array(x, name, fn):
    a, xp = _b.as_device(x, name, fn)
    return _b.real_float(a, xp, name), xp


def _pair_of(a, b, names, fn):
    (x, xp), (y, xq) = _array(a, names[0], fn), _array(b, names[1], fn)
    if xp is not xq:
        raise ValueError(f"{names[0]} and {names[1]} must come from one array library; "
                         f"got {xp.__name__} and {xq.__name__}")
    _b.same_device({names[0]: x, names[1]: y}, xp)
    return x, y, xp


# --------------------------------------------------------------------------- metric
@_scoped
def hilbert_distance(p: Any, q: Any, /, *, axis: int = -1) -> float | Any:
    r"""Hilbert's projective distance between positive vectors, on the device.

    .. math:: H(p, q) = \max_i \log\frac{p_i}{q_i} - \min_i \log\frac{p_i}{q_i}

    Same rules and values as :func:`hilbertgeom.hilbert_distance` (``inf``
    where the supports differ).

    Parameters
    ----------
    p, q : device arrays
        Nonnegative float32 or float64 vectors (or batches that broadcast),
        each slice with a positive entry.
    axis : int
        The coordinate axis.

    Returns
    -------
    float or float64 device array
        A Python float for one pair, a float64 device array for a batch.
    """
    x, y, xp = _pair_of(p, q, ("p", "q"), "hilbert_distance")
    return _k.hilbert_distance(x, y, xp, axis)


@_scoped
def variation_norm(x: Any, /, *, axis: int = -1) -> float | Any:
    r"""The variation seminorm ``max_i x_i - min_i x_i`` (float64), on the device.

    Parameters
    ----------
    x : device array
        Finite float32 or float64 entries, at least one along ``axis``.
    axis : int
        The coordinate axis.

    Returns
    -------
    float or float64 device array
        A Python float for a vector, a device array for a batch.
    """
    a, xp = _array(x, "x", "variation_norm")
    return _k.variation_norm(a, xp, axis)


@_scoped
def softmax_hilbert_distance(z: Any, z2: Any, /, *, axis: int = -1) -> float | Any:
    r"""``H(softmax z, softmax z2) = var(z - z2)`` from logits, on the device (I2).

    The difference is taken in float64, as in the core.

    Parameters
    ----------
    z, z2 : device arrays
        Finite logits (float32 or float64) that broadcast.
    axis : int
        The vocabulary axis.

    Returns
    -------
    float or float64 device array
        A Python float for one pair, a device array for a batch.
    """
    a, b, xp = _pair_of(z, z2, ("z", "z2"), "softmax_hilbert_distance")
    return _k.softmax_hilbert_distance(a, b, xp, axis)


# --------------------------------------------------------------------------- rows
# The formulas (centring, the power-of-two scaling near the ends of the range,
# the hidden state) are the core's array-API kernels; here only device
# acceptance and the tile-budgeted pair search (:func:`_kernels.extreme`).
def _search(xp):
    """The device's extreme-pair search for the core's scaling wrapper: tiles from the budget."""
    return lambda X, nrm, mode, tile: _k.extreme(X, xp, nrm, mode, tile)


@_scoped
def center_rows(S: Any, /) -> Any:
    r"""``P S = S - 1 mean(S)`` in float64, on the device.

    The core's kernel (:func:`hilbertgeom.center_rows`) run in the array's
    namespace: the same answer to the last bit for the same summation order,
    the same exact power-of-two path where a column sum would overflow or a
    column mean be subnormal, and the same ``ValueError`` where the centred
    rows exceed float64.

    Parameters
    ----------
    S : (V, d) device array
        Finite float32 or float64 rows (CuPy, or a CUDA tensor exporting DLPack).

    Returns
    -------
    (V, d) float64 device array, on the device of ``S``.
    """
    X, _ = _b.device_matrix(S, "S", "center_rows")
    return _rows._center(X)


def _extreme(S, norm, mode, tile, fn, min_rows):
    X, xp = _b.device_matrix(S, "S", fn, min_rows=min_rows)
    _v.norm_choice(norm)
    if tile is not None:
        tile = _v.integer(tile, "tile", minimum=1)
    if X.shape[0] == 1:
        return None
    return _rows._extreme_pair(X, norm, mode, tile, search=_search(xp))


@_scoped
def row_diameter(S: Any, /, *, norm: NormLike = 2, return_pair: bool = False,
                 tile: int | None = None) -> float | Pair:
    r"""Exact diameter of the rows of a device matrix: ``max_{i<j} ||s_i - s_j||``.

    The float64 distance of the farthest pair, ties to the smallest ``(i, j)``
    -- the answer of :func:`hilbertgeom.row_diameter` on the same rows, up to
    the rounding of the ``d``-term sum in the distance, which the device adds
    in its own order (relative ``2 (d+2) 2^-53``; pairs tied within it may
    swap).
    ``norm=2`` screens all pairs with one GEMM per ``tile x tile`` block (in
    float32 for float32 input) and re-checks the candidates in float64;
    ``norm=inf`` is the largest column range;
    ``norm=1`` a tiled ``O(V^2 d)`` float64 search whose sums may round
    differently from NumPy's pairwise summation (relative ``d 2^-53``).
    Rows near the top of the float64 range are scaled by a power of two first,
    as in the core (the same code).

    Parameters
    ----------
    S : (V, d) device array
        Finite float32 or float64 rows (CuPy, or a CUDA tensor exporting DLPack).
    norm : {2, 1, inf}
        Row norm.
    return_pair : bool
        Also return the attaining pair.
    tile : int, optional
        Rows per tile; ``None`` takes the largest tile the budget allows
        (:func:`set_tile_budget`).

    Returns
    -------
    float, or Pair(distance, i, j) if ``return_pair``

    Raises
    ------
    ValueError
        If the diameter exceeds the float64 range.
    """
    p = _extreme(S, norm, "max", tile, "row_diameter", 1)
    if p is None:
        if return_pair:
            raise ValueError("S has a single row: its diameter is 0 but there is no pair to return")
        return 0.0
    return p if return_pair else p.distance


@_scoped
def closest_pair(S: Any, /, *, norm: NormLike = 2, tile: int | None = None) -> Pair:
    r"""Exact closest pair of rows of a device matrix (see :func:`row_diameter`).

    Parameters
    ----------
    S : (V, d) device array
        At least two finite float32 or float64 rows.
    norm : {2, 1, inf}
        Row norm.
    tile : int, optional
        Rows per tile (default from the tile budget).

    Returns
    -------
    Pair(distance, i, j)
    """
    return _extreme(S, norm, "min", tile, "closest_pair", 2)


# --------------------------------------------------------------------------- head
@_scoped
def head_norm(S: Any, /, *, hidden_norm: NormLike = 2, radius: float = 1.0) -> float:
    r"""``R D_*(S)``: the largest Hilbert change over a hidden ball (I6), on the device.

    The core's formula (:func:`hilbertgeom.head_norm`: mantissas and exponents
    multiplied, no overflow in between) on the device's pair search.

    Parameters
    ----------
    S : (V, d) device array
        The update.
    hidden_norm : {2, 1, inf}
        Norm of the hidden-state ball.
    radius : float
        Its radius ``R >= 0``.

    Returns
    -------
    float
    """
    hn = _v.norm_choice(hidden_norm, "hidden_norm")
    R = _v.scalar(radius, "radius", minimum=0.0)
    X, xp = _b.device_matrix(S, "S", "head_norm")
    return _head._head_norm(X, hn, R, search=_search(xp))


@_scoped
def worst_case_hidden(S: Any, /, *, hidden_norm: NormLike = 2, radius: float = 1.0) -> Any:
    r"""A hidden state attaining :func:`head_norm`, on the device.

    The core's kernel (:func:`hilbertgeom.worst_case_hidden`) on the device's
    pair search.

    Parameters
    ----------
    S : (V, d) device array
        The update.
    hidden_norm : {2, 1, inf}
        Norm of the hidden-state ball.
    radius : float
        Its radius ``R >= 0``.

    Returns
    -------
    (d,) float64 device array
    """
    hn = _v.norm_choice(hidden_norm, "hidden_norm")
    R = _v.scalar(radius, "radius", minimum=0.0)
    X, xp = _b.device_matrix(S, "S", "worst_case_hidden")
    return _head._worst_case_hidden(X, hn, R, search=_search(xp))


# --------------------------------------------------------------------------- tension
def _gradient_input(G, center, fn, finite: bool = True):
    """The validated gradient, not yet projected, and its namespace (``finite``: see
    :func:`hilbertgeom.gpu._backend.real_float`)."""
    if not isinstance(center, bool):
        raise TypeError(f"center must be a bool; got {type(center).__name__}")
    return _b.device_matrix(G, "G", fn, min_rows=2, finite=finite)


def _unit(G0, xp) -> tuple[int, bool]:
    """``(k, span)``: the exact power of two ``2^k`` that brings ``G0`` to unit size, as
    the core's :func:`hilbertgeom._fp.unit_scale` (only a Python scalar, the largest
    magnitude, comes to the host).  Where ``max |G0|`` lies in ``[2^-SAFE, 2^SAFE]``
    (float32 input always) nothing over- or underflows and the kernels' arithmetic is
    scale-free already, so ``k = 0`` and no copy of ``G0`` is made.  ``span``: the
    scaling was needed but is inexact (``G0`` spans more than float64 allows)."""
    if G0.dtype == xp.float32:  # float32 magnitudes lie in [2^-149, 2^128]: never rescaled, no pass over G0
        return 0, False
    top = _fp.max_abs(G0, xp)
    if _fp.unit_shift(top) == 0:
        return 0, False
    k = _fp.unit_scale(G0, xp, top)
    return k, k == 0


def _gradient(G, center, fn):
    """``(Gs, P Gs, k, xp)``: the validated gradient at unit size ``Gs = G 2^k`` (see
    :func:`_unit`), ``P Gs`` in float64 after the core's zero-sum rule (read in row
    chunks within the tile budget; an error names ``G``'s own column sums), and the
    namespace.  No column sum overflows (entries near ``1e308``) and no mean rounds in
    the subnormal range; where ``G`` spans too much for an exact scaling and its
    centring overflows, a ``ValueError`` says so."""
    G0, xp = _gradient_input(G, center, fn)
    k, span = _unit(G0, xp)
    Gs = _fp.mul_pow2(G0, k)
    rows = _k._row_chunk(*G0.shape)
    with _fp.zero_sum_named(G0, center, k, xp, rows), np.errstate(over="ignore", invalid="ignore"):
        m = _v.zero_sum_mean(Gs, xp, center, rows)
        X = xp.astype(Gs, xp.float64) - xp.reshape(m, (1, -1))
    if span and not bool(xp.all(xp.isfinite(X))):
        raise ValueError(_fp.SPAN)
    return Gs, X, k, xp


@_scoped
def projected_rownorm(G: Any, /, *, eta: float = 1.0, eps: float = 0.0, center: bool = False,
                      return_decrease: bool = False) -> Any | tuple[Any, float]:
    r"""Projected RowNorm ``-(eta/2) P RN(P G)`` on the device (I15), float64.

    ``G`` is read in row chunks, in its own precision (float32 stays float32
    in memory); beyond ``G`` and the result, memory is a few chunks within the
    tile budget.  The core's kernel (:func:`hilbertgeom.projected_rownorm`:
    the same zero-sum and zero-row rules), so it agrees with the core up to
    the summation order of the means (a few ulps; bit for bit in one chunk
    of a NumPy-backed namespace).

    Parameters
    ----------
    G : (V, d) device array
        Gradient, ``V >= 2``, finite float32 or float64 (CuPy, or a CUDA
        tensor exporting DLPack), with zero column sums (the core's rule) or
        ``center=True``.
    eta : float
        Step size ``>= 0`` (default 1).
    eps : float
        Rows with ``||g_i|| <= eps`` count as zero, ``>= 0`` (default 0).  As
        in the core, rows within the rounding of the centring and, without
        ``center``, rows that are exactly zero in ``G`` always count as zero.
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False; must be a bool).
    return_decrease : bool
        Also return the decrease ``(eta/2) sum ||g_i||`` over the rows that
        count as non-zero (default False).

    Returns
    -------
    (V, d) float64 device array, or (update, decrease)
        The update on the device of ``G``; the decrease is a Python float.

    Notes
    -----
    The update is scale-free in ``G``, the decrease homogeneous.  Magnitudes
    outside ``[2^-400, 2^400]`` (entries near ``1e308``, whose column sums
    overflow, or subnormal ones, whose row norms underflow) are handled by an
    exact power-of-two rescale of ``G`` at entry, as in the core: the update
    is the same bits at every scale of ``G``, the decrease rounds once
    (``ValueError`` where it exceeds float64). Only the largest magnitude, a
    Python float, reaches the host for it.
    """
    X, xp = _gradient_input(G, center, "projected_rownorm", finite=False)
    fused = _fused.fits(X, xp)  # CuPy: one kernel per step (gpu/_fused.py)
    # float32 there: finiteness is read off the fused column sums (one pass over G less)
    check: Any = functools.partial(_b.real_float, X, xp, "G")
    if not (fused and X.dtype == xp.float32):
        check()
        check = None
    e = _v.scalar(eta, "eta", minimum=0.0)
    ep = _v.scalar(eps, "eps", minimum=0.0)
    # the core's kernel, G read in row chunks within the tile budget; as in the core, at unit
    # size (G 2^k, exact) and eta = 1, then times eta, the decrease rounded once
    k, span = _unit(X, xp)
    rows = _k._row_chunk(*X.shape)
    with _fp.zero_sum_named(X, center, k, xp, rows), np.errstate(over="ignore", invalid="ignore"):
        if span and not bool(xp.all(xp.isfinite(_v.zero_sum_mean(X, xp, center, rows)))):
            raise ValueError(_fp.SPAN)  # an overflowing mean would leave every row "zero"
        if fused:
            S, dec1 = _fused.projected_rownorm(_fp.mul_pow2(X, k), xp, center, e, _fp.ldexp_inf(ep, k), check=check)
        else:
            S1, dec1 = _projected_rownorm(_fp.mul_pow2(X, k), xp, center, 1.0, _fp.ldexp_inf(ep, k), True,
                                          rows=rows)
            S = e * S1 + 0.0
    if span and not bool(xp.all(xp.isfinite(S))):
        raise ValueError(_fp.SPAN)
    if not return_decrease:
        return S
    return S, _fp.product(e, dec1, shift=-k, what="the decrease (eta/2) sum ||g_i||", names="G or eta")


@_scoped
def tension_bounds(G: Any, /, *, center: bool = False, tile: int = 2048) -> TensionBounds:
    r"""Certified ``lower <= T(G) <= upper`` on the device (I11, I17).

    The core's kernel (:func:`hilbertgeom.tension_bounds`) with the device's
    pair search: the lower bound is the RowNorm potential with its exact
    diameter; the upper the smaller of Jung's bound (rank from the
    eigenvalues of the ``d x d`` Gram matrix) and the balanced-flow cost
    summed in ``tile x tile`` blocks, exactly equal rows merged.  Values agree
    with the core up to the summation order.

    Parameters
    ----------
    G : (V, d) device array
        Gradient, ``V >= 2``, finite float32 or float64, with zero column
        sums (the core's rule) or ``center=True``.
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False; must be a bool).
    tile : int
        Rows per tile of the balanced-flow sum, ``>= 1`` (default 2048).

    Returns
    -------
    TensionBounds
        Python floats, with the sources of the two bounds.

    Notes
    -----
    ``T`` is homogeneous in ``G``.  Magnitudes outside ``[2^-400, 2^400]``
    (entries near ``1e308``, whose column sums overflow, or subnormal ones,
    whose row norms underflow) are handled by an exact power-of-two rescale of
    ``G`` at entry, as in the core: the bounds are computed at unit size and
    scaled back once (``ValueError`` where the upper bound exceeds float64).
    Only the largest magnitude, a Python float, reaches the host for it.
    """
    Gs, X, k, xp = _gradient(G, center, "tension_bounds")
    t = _v.integer(tile, "tile", minimum=1)
    return _bounds_of_g(Gs, X, center, t, xp, k)


def _bounds_of_g(Gs, X, center, tile, xp, k) -> TensionBounds:
    """The core's kernel on ``Gs = G 2^k`` (``X = P Gs``), the bounds scaled back to ``G``
    (rounded outward where they land below the normal range, as the core does)."""
    b = _unit_bounds(Gs, X, center, tile, xp, k)
    return replace(b, lower=_fp.ldexp_down(b.lower, -k), upper=_fp.ldexp_up(b.upper, -k))


def _unit_bounds(Gs, X, center, tile, xp, k) -> TensionBounds:
    """The bounds on ``T(Gs)``, ``Gs = G 2^k`` (``X = P Gs``); a ``ValueError`` where the
    upper bound on ``T(G)`` exceeds float64."""
    b = _tension_bounds(Gs, X, center, tile, xp, search=_search(xp))
    if math.isinf(_fp.ldexp_inf(b.upper, -k)):
        raise ValueError("tension_bounds: the upper bound on T(G) exceeds the float64 range; scale G down")
    return b


# --------------------------------------------------------------------------- updates
@_scoped
def evaluate_update(G: Any, S: Any, /, *, tension: TensionResult | None = None,
                    center: bool = False) -> UpdateReport:
    r"""Measure an update on the device: exact diameter and separations, decrease.

    The exact minimum tension ``T(G)`` needs the CPU solver; here

    * ``tension=None`` (default): ``T(G)`` is bracketed by
      :func:`tension_bounds` computed on the device; ``decrease_ratio`` is the
      certified *lower* end ``-<G,S> / (D(S) * upper)``,
      ``decrease_ratio_bounds`` the bracket, and ``tension`` the upper bound.
    * ``tension=`` a :class:`~hilbertgeom.TensionResult` of
      ``hilbertgeom.min_tension`` on the same ``G`` (copied to the host by
      you): the ratio is the core's.

    Parameters
    ----------
    G : (V, d) device array
        Gradient, ``V >= 2``, finite float32 or float64, with zero column
        sums (the core's rule) or ``center=True``.
    S : (V, d) device array
        The update to judge: the shape of ``G``, from the same array library
        and on the same device.
    tension : TensionResult, optional
        A solve of ``hilbertgeom.min_tension(G)`` to use instead of the
        device bracket (see above).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False; must be a bool).

    Returns
    -------
    UpdateReport

    Notes
    -----
    The report is formed at unit size of ``G``.  Magnitudes outside
    ``[2^-400, 2^400]`` (entries near ``1e308``, whose column sums overflow, or subnormal
    ones, whose row norms underflow) are handled by an exact power-of-two
    rescale of ``G`` at entry, as in the core: ``P G`` and the bracket
    of ``T`` are taken there, the decrease and ``tension`` scaled back once. Only
    the largest magnitude, a Python float, reaches the host for it.
    """
    Gs, X, k, xp = _gradient(G, center, "evaluate_update")
    U, xq = _b.device_matrix(S, "S", "evaluate_update")
    if xq is not xp:
        raise ValueError("G and S must come from one array library")
    _b.same_device({"G": X, "S": U}, xp)
    if tuple(U.shape) != tuple(X.shape):
        raise ValueError(f"S must have the shape of G {tuple(X.shape)}; got {tuple(U.shape)}")
    # X = P G 2^k at unit size (as the core): T is taken at that size too, the report scaled back
    if tension is None:  # T(G) bracketed on the device; the ratio is the bracket's lower end
        b = _unit_bounds(Gs, X, center, 2048, xp, k)  # at unit size: nothing rounded in the subnormal range
        T, Tl, Tu = b.upper, b.lower, b.upper
    elif isinstance(tension, TensionResult):
        T, Tl, Tu = (_fp.ldexp_inf(t, k) for t in (tension.value, tension.value, tension.flow.cost))
    else:
        raise TypeError("tension must be a TensionResult from hilbertgeom.min_tension(G) or None")
    return _update_report(X, U, T, Tl, Tu, search=_search(xp), g_shift=k)  # the core's formula


# --------------------------------------------------------------------------- equalizer
@_scoped
def equalize_rows(G: Any, /, *, eta: float = 1.0, keep: float = 0.95, iters: int = 200, step: float = 0.5,
                  tile: int = 2048, xp: Any = None, patience: int = 20,
                  verbose: bool | None = None) -> EqualizationRun:
    r"""The scalable equalizer of :func:`hilbertgeom.equalize_rows`, on the device.

    ``G`` is validated and projected on the device; the iterations run in its
    namespace (``xp``, if given, must be that namespace).  The update in the
    result stays on the device.

    Parameters
    ----------
    G : (V, d) device array
        The gradient, zero column sums (float32 or float64).
    eta, keep, iters, step, tile, patience, verbose
        As in :func:`hilbertgeom.equalize_rows`.
    xp : array namespace, optional
        ``None`` or the namespace of ``G``.

    Returns
    -------
    EqualizationRun

    Notes
    -----
    The update is scale-free in ``G``.  Magnitudes outside ``[2^-400, 2^400]``
    (entries near ``1e308``, whose column sums overflow, or subnormal ones,
    whose row norms underflow) are handled by an exact power-of-two rescale of
    ``G`` at entry, as in the core: the run is made at unit size, its
    decreases scaled back once. Only the largest magnitude, a Python float,
    reaches the host for it.
    """
    from hilbertgeom.equalize import equalize_rows as core

    _, X, k, ns = _gradient(G, False, "equalize_rows")
    if xp is not None and xp is not ns:
        raise ValueError(f"xp must be the namespace of G ({ns.__name__}) or None")
    # the update is scale-free in G: run at unit size (X = P G 2^k), the decreases scaled back
    run = core(X, eta=eta, keep=keep, iters=iters, step=step, tile=tile, xp=ns, patience=patience, verbose=verbose)
    return run if k == 0 else replace(run, decrease=_fp.ldexp_inf(run.decrease, -k),
                                      rownorm_decrease=_fp.ldexp_inf(run.rownorm_decrease, -k))
