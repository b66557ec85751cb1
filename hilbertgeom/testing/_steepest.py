"""The steepest-descent assertions: definitions, certified optima, messages.

For a norm ``N`` and a gradient ``G`` the steepest step of size ``eta`` solves

.. math::

    \\min_S \\ \\langle G, S\\rangle \\quad \\text{s.t.} \\quad N(S) \\le \\eta

(over centred ``S`` for the three seminorms, which do not see a common row
shift), and its decrease ``-<G, S>`` is ``eta N^*(G)`` with ``N^*`` the dual
norm.  The table (identities I10, I15, I18 of arXiv 2608.22253):

===================  ====================================  ============  ==================================
``norm``             constraint                            centred       optimal decrease
===================  ====================================  ============  ==================================
``diameter``         ``D(S) = max ||s_i - s_j||_2 <= eta``  yes           ``eta T(G)`` (certified bracket)
``diameter_inf``     ``max_k range(S[:, k]) <= eta``        yes           ``(eta/2) sum_ik |g_ik|``
``covering_radius``  ``rad(S) <= eta/2``                    yes           ``(eta/2) sum_i ||g_i||_2``
``max_row``          ``max_i ||s_i||_2 <= eta``             no            ``eta sum_i ||g_i||_2``
``max_entry``        ``max_ij |s_ij| <= eta``               no            ``eta sum_ij |g_ij|``
``spectral``         ``||S||_2 <= eta``                     no            ``eta ||G||_*``
===================  ====================================  ============  ==================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .. import _fp
from .. import _validate as _v
from ..ball import minimum_enclosing_ball
from ..rows import row_diameter
from ..tension import TensionResult, min_tension
from ..tolerances import tolerance
from ._arrays import host_float64

__all__ = ["NORMS", "assert_decrease_ratio", "assert_steepest", "default_rtol", "steepest_step"]

_U64 = 2.0**-53
_SOLVER = tolerance("solver")  # relative gap 1e-6 of a certified solve
_WORST = 5  # rows (pairs, columns, directions) listed in a failure message


@dataclass(frozen=True)
class _Norm:
    title: str  # what the norm is, in the user's terms
    symbol: str  # how its value is printed
    budget: str  # the bound on it, in terms of eta
    half: bool  # the bound is eta/2 (covering radius) instead of eta
    centred: bool  # the problem is posed over centred S (a seminorm blind to common shifts)
    optimum: str  # the optimal decrease
    step: str  # the exact steepest step


NORMS: dict[str, _Norm] = {
    "diameter": _Norm(
        "row diameter D(S) = max_{i<j} ||s_i - s_j||_2", "D(S)", "eta", False, True,
        "eta T(G) (minimum tension, certified bracket of min_tension)",
        "-eta Phi, Phi the optimal potential (steepest_descent)"),
    "diameter_inf": _Norm(
        "row l_inf diameter D_inf(S) = max_k (max_i s_ik - min_i s_ik)", "D_inf(S)", "eta", False, True,
        "(eta/2) sum_ik |g_ik|", "-(eta/2) P sign(G) (linf_steepest_descent)"),
    "covering_radius": _Norm(
        "covering radius rad(S), the radius of the smallest ball holding the rows", "rad(S)", "eta/2",
        True, True, "(eta/2) sum_i ||g_i||_2",
        "-(eta/2) P RN(G), projected RowNorm (projected_rownorm)"),
    "max_row": _Norm(
        "largest row norm max_i ||s_i||_2 (RowNorm)", "max_i ||s_i||_2", "eta", False, False,
        "eta sum_i ||g_i||_2", "-eta RN(G), g_i / ||g_i|| per row (rownorm_update)"),
    "max_entry": _Norm(
        "largest entry max_ij |s_ij| (Sign)", "max_ij |s_ij|", "eta", False, False,
        "eta sum_ij |g_ij|", "-eta sign(G) (sign_update)"),
    "spectral": _Norm(
        "spectral norm ||S||_2, the largest singular value (Muon)", "||S||_2", "eta", False, False,
        "eta ||G||_* (nuclear norm, the sum of singular values)",
        "-eta U V^T from G = U Sigma V^T, the polar factor (polar_update)"),
}


# --------------------------------------------------------------------------- arguments
def _norm_name(norm) -> str:
    if not isinstance(norm, str) or norm not in NORMS:
        raise ValueError(f"norm must be one of {sorted(NORMS)}; got {norm!r}")
    return norm


def _eta(eta) -> float:
    return _v.scalar(eta, "eta", minimum=0.0, strict=True)


def default_rtol(norm: str, /, *, dtype: DTypeLike = "float64", shape: tuple[int, int] = (2, 1)) -> float:
    r"""The default relative tolerance of :func:`assert_steepest`.

    The tolerance covers the rounding a correct implementation commits, and
    nothing more:

    * float64 and float32 steps: the ``d``-term reductions of a row norm,
      ``tolerance("kernel", dtype, d=d).rtol = 4 (d + 2) u``; for
      ``norm="spectral"`` the reductions of an SVD or of matrix products run
      over ``max(V, d)`` terms, so ``d`` is replaced by ``max(V, d)``;
    * bfloat16 and float16 steps: ``8 u`` (``u = 2^-8`` and ``2^-11``).
      Optimizers accumulate these formats in float32, and the final rounding
      to the short format, at most ``u`` per entry, dominates;
    * ``norm="diameter"`` and ``norm="covering_radius"`` are certified by a
      solver (:func:`~hilbertgeom.min_tension`, the enclosing-ball walk), so
      their tolerance is at least ``tolerance("solver").rtol = 1e-6``.

    Parameters
    ----------
    norm : str
        One of :data:`NORMS`.
    dtype : str or dtype
        The lower of the precisions of ``S`` and ``G`` (``"bfloat16"`` is
        accepted by name).
    shape : (int, int)
        ``(V, d)``.

    Returns
    -------
    float

    Examples
    --------
    >>> default_rtol("max_row", dtype="float32", shape=(1000, 64))
    1.5735626220703125e-05
    >>> default_rtol("spectral", dtype="bfloat16", shape=(1000, 64))
    0.03125
    >>> default_rtol("diameter", dtype="float64", shape=(100, 8))
    1e-06
    """
    name = _norm_name(norm)
    from ._arrays import _UNIT, _dtype_name

    dt = _dtype_name(dtype) if not isinstance(dtype, np.dtype) else dtype.name
    if dt not in _UNIT:
        raise ValueError(f"dtype must be one of {sorted(_UNIT)}; got {dtype!r}")
    V, d = (int(shape[0]), int(shape[1]))
    if dt in ("float16", "bfloat16"):
        r = 8.0 * _UNIT[dt]
    else:
        r = tolerance("kernel", np.dtype(dt), d=max(V, d) if name == "spectral" else d).rtol
    if name in ("diameter", "covering_radius"):
        r = max(r, _SOLVER.rtol)
    return r


def _rtol(rtol, norm, S, G) -> float:
    if rtol is None:
        worst = S if S.unit >= G.unit else G
        return default_rtol(norm, dtype=worst.dtype, shape=S.array.shape)
    r = _v.scalar(rtol, "rtol", minimum=0.0)
    if not r < 1.0:
        raise ValueError(f"rtol must be < 1 (a relative tolerance); got {r:g}")
    return r


def _inputs(S, G, norm):
    """Host float64 copies of S and G, shapes checked; G projected for the seminorms.

    Returns ``(Sa, Ga, X, k)`` with ``X`` the (projected) ``G 2^k``: ``k`` brings a ``G``
    outside ``[2^-SAFE, 2^SAFE]`` to unit size (an exact power of two), so that no column
    sum overflows and no decrease ``-<G, S>`` underflows; 0 for ordinary magnitudes."""
    Sa = host_float64(S, "S")
    Ga = host_float64(G, "G")
    if Sa.array.shape != Ga.array.shape:
        raise ValueError(f"S must have the shape of G {Ga.array.shape}; got {Sa.array.shape}")
    k = _fp.unit_shift(_fp.max_abs(Ga.array))
    X = _fp.mul_pow2(Ga.array, k)
    if norm is None or NORMS[norm].centred:
        X = _zero_sum(X, Ga.unit, norm, k)
    return Sa, Ga, X, k


def _step_shift(S: np.ndarray, eta: float) -> int:
    """``k`` bringing ``S`` and ``eta`` to unit size together (the larger of the two in
    ``[1/2, 1)``) when that is outside ``[2^-SAFE, 2^SAFE]``; 0 for ordinary magnitudes."""
    return _fp.unit_shift(max(eta, _fp.max_abs(S)))


def _rescaled_line(kG: int, kS: int) -> list[str]:
    """The note of a failure message computed on a rescaled problem."""
    if kG == 0 and kS == 0:
        return []
    return [f"  rescaled: checked on G 2^{kG} and on S, eta 2^{kS} (exact powers of two, so that no "
            "overflow or underflow decides it); the values above are of the rescaled problem"]


def _zero_sum(X: np.ndarray, unit: float, norm, shift: int = 0) -> np.ndarray:
    """``P G``; ``ValueError`` unless ``1^T G = 0`` to the rounding of G's format
    (``X`` is ``G 2^shift``; the message gives ``G``'s own column sum).

    Over centred ``S`` the problem sees only ``P G``; a gradient whose columns
    do not sum to zero is not a softmax cross-entropy gradient, and an
    optimizer fed with it would have solved another problem.
    """
    if X.shape[0] < 2:
        raise ValueError(f"G must have at least 2 rows; got shape {X.shape}")
    col = X.sum(axis=0)
    scale = np.abs(X).sum(axis=0)
    rel = max(_v.ZERO_SUM_RTOL, 2.0 * unit)
    if np.any(np.abs(col) > rel * scale + X.shape[0] * 2.0**-1074):
        k = int(np.argmax(np.abs(col) - rel * scale))
        what = f"norm={norm!r}" if norm else "the row diameter"
        raise ValueError(
            f"G must have zero column sums for {what} (column {k} sums to {_fp.ldexp_inf(col[k], -shift):.3e}, "
            f"{abs(col[k]) / max(scale[k], 1e-300):.1e} of its absolute sum): the steepest step over "
            "centred S sees only P G; pass G - G.mean(axis=0)")
    return X - X.mean(axis=0)


# --------------------------------------------------------------------------- exact pieces
def _rownorms(X: np.ndarray) -> np.ndarray:
    """Row norms without overflow or underflow of the squares."""
    m = np.abs(X).max(axis=1)
    ms = np.where(m > 0, m, 1.0)
    return m * np.sqrt(np.einsum("ij,ij->i", X / ms[:, None], X / ms[:, None]))


def _decrease(G: np.ndarray, S: np.ndarray) -> float:
    """``-<G, S>``: products rounded once, summed exactly (relative error about u64)."""
    return -math.fsum((G * S).ravel())


def _circumcentre(Q: np.ndarray) -> np.ndarray:
    """Centre of the sphere through the rows of ``Q`` within their affine hull."""
    if Q.shape[0] == 1:
        return Q[0].copy()
    A = Q[1:] - Q[0]
    M = A @ A.T
    alpha = np.linalg.lstsq(M, 0.5 * np.diag(M), rcond=None)[0]
    return Q[0] + A.T @ alpha


@dataclass
class _Measure:
    value: float  # N(S) in float64; for the covering radius a certified upper bound
    lower: float  # a lower bound on N(S) (equal to value except for the covering radius)
    aux: dict


def _sphere_centre(Y: np.ndarray) -> np.ndarray:
    """Least-squares centre of a sphere through the rows: ``2 y_i.c + k = ||y_i||^2``.

    Exact (to rounding) when the rows are cospherical, as the rows of every
    RowNorm-type step are; any point gives a certified upper bound on the
    covering radius, ``max_i ||y_i - c||``.
    """
    A = np.hstack([2.0 * Y, np.ones((Y.shape[0], 1))])
    sol = np.linalg.lstsq(A, np.einsum("ij,ij->i", Y, Y), rcond=None)[0]
    return sol[:-1]


def _measure(norm: str, S: np.ndarray, limit: float = math.inf) -> _Measure:
    """The norm of ``S``, computed exactly or certified from above.

    For the covering radius, a cheap centre that already shows
    ``rad(S) <= limit`` is accepted (``lower`` is then NaN: not computed);
    otherwise the enclosing-ball walk certifies the radius from both sides.
    """
    if norm == "diameter":
        p = row_diameter(S, return_pair=True)
        return _Measure(p.distance, p.distance, {"pair": (p.i, p.j)})
    if norm == "diameter_inf":
        hi, lo = S.max(axis=0), S.min(axis=0)
        rng = hi - lo
        k = int(np.argmax(rng))
        return _Measure(float(rng[k]), float(rng[k]), {"ranges": rng, "mid": (hi + lo) / 2.0, "column": k})
    if norm == "covering_radius":
        m = S.mean(axis=0)
        Y = S - m
        amax = float(np.abs(Y).max())
        if amax == 0.0:
            return _Measure(0.0, 0.0, {"centre": m})
        c = _sphere_centre(Y / amax) * amax  # scaled: no overflow of the squares
        quick = float(_rownorms(Y - c).max())
        if quick <= limit:
            return _Measure(quick, math.nan, {"centre": c + m})
        ball = minimum_enclosing_ball(Y)
        best, centre = math.inf, None
        # the walk's centre, and the circumcentre of its support (exact to rounding
        # where the walk's dual QP stops at 1e-9 on cospherical rows)
        for c in (ball.center, _circumcentre(Y[ball.support])):
            r = float(_rownorms(Y - c).max())
            if r < best:
                best, centre = r, c
        return _Measure(best, min(ball.lower, best), {"centre": centre + m})
    if norm == "max_row":
        n = _rownorms(S)
        return _Measure(float(n.max()), float(n.max()), {"rownorms": n})
    if norm == "max_entry":
        a = float(np.abs(S).max())
        return _Measure(a, a, {})
    # spectral
    s = np.linalg.svd(S, compute_uv=False)
    top = float(s[0]) if s.size else 0.0
    return _Measure(top, top, {"singular": s})


@dataclass
class _Optimum:
    lower: float  # per unit eta: optimal decrease lies in [eta lower, eta upper]
    upper: float
    aux: dict


def _optimum(norm: str, G: np.ndarray, rtol: float, tension=None) -> _Optimum:
    """The dual norm of ``G``: a closed form in float64, or the certified bracket of T(G)."""
    if norm == "diameter":
        if tension is None:
            # a relative gap below rtol / 4: the exact step always passes, and
            # the upper end alone decides, so no step short of it can pass
            tension = min_tension(G, tol=max(rtol / 4.0, 1e-13))
        return _Optimum(tension.value, tension.flow.cost, {"tension": tension})
    if norm == "diameter_inf" or norm == "max_entry":
        f = 0.5 if norm == "diameter_inf" else 1.0
        total = f * math.fsum(np.abs(G).ravel())
        return _Optimum(total, total, {})
    if norm in ("covering_radius", "max_row"):
        n = _rownorms(G)
        f = 0.5 if norm == "covering_radius" else 1.0
        total = f * math.fsum(n)
        return _Optimum(total, total, {"rownorms": n})
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    total = math.fsum(s)
    return _Optimum(total, total, {"U": U, "s": s, "Vt": Vt})


# --------------------------------------------------------------------------- the assertion
def steepest_step(G: ArrayLike, /, *, norm: str, eta: float = 1.0) -> np.ndarray:
    r"""The exact steepest-descent step of size ``eta`` for ``norm``: the reference.

    .. math::

        S^\star = \arg\min_{N(S) \le \eta} \langle G, S\rangle

    Parameters
    ----------
    G : (V, d) array_like
        Gradient (zero column sums for the seminorms ``"diameter"``,
        ``"diameter_inf"``, ``"covering_radius"``); NumPy, torch or CuPy.
    norm : str
        One of :data:`NORMS`.
    eta : float
        Step size ``> 0``.

    Returns
    -------
    (V, d) float64 ndarray
        ``steepest_descent`` (``"diameter"``), ``linf_steepest_descent``,
        ``projected_rownorm``, ``rownorm_update``, ``sign_update`` or
        ``polar_update``.

    Examples
    --------
    >>> steepest_step([[3.0, 4.0], [-3.0, -4.0]], norm="max_row")
    array([[-0.6, -0.8],
           [ 0.6,  0.8]])
    """
    from ..tension import projected_rownorm, steepest_descent
    from ..updates import (
        linf_steepest_descent,
        polar_update,
        rownorm_update,
        sign_update,
    )

    name = _norm_name(norm)
    e = _eta(eta)
    Ga = host_float64(G, "G")
    # every step is scale-free in G: computed on G at unit size (an exact power of two), where
    # no column sum overflows and no mean rounds in the subnormal range
    k = _fp.unit_scale(Ga.array)
    X = _fp.mul_pow2(Ga.array, k)
    X = _zero_sum(X, Ga.unit, name, k) if NORMS[name].centred else X
    if name == "diameter":
        return steepest_descent(X, eta=e)
    steps: dict[str, Callable[..., np.ndarray]] = {
        "diameter_inf": linf_steepest_descent, "covering_radius": projected_rownorm,
        "max_row": rownorm_update, "max_entry": sign_update, "spectral": polar_update}
    return steps[name](X, eta=e)


def _centring(S: np.ndarray) -> float:
    """``||mean row|| / max_i ||s_i||`` (0 for S = 0)."""
    top = float(_rownorms(S).max())
    if top == 0.0:
        return 0.0
    return float(np.linalg.norm(S.mean(axis=0))) / top


def _mean_rounding(dtype: str, V: int) -> float:
    """What centring ``S - S.mean(axis=0)`` in ``dtype`` leaves of the mean, relative
    to the largest row: the pairwise-summation bound over ``log2 V`` levels
    (NumPy and torch sum pairwise), or ``2 u`` for the half formats (summed in
    float32, then rounded to the step's format)."""
    if dtype in ("float16", "bfloat16"):
        from ._arrays import _UNIT

        return 2.0 * _UNIT[dtype]
    return tolerance("kernel", np.dtype(dtype), d=max(1, math.ceil(math.log2(V)))).rtol


def _g(x: float) -> str:
    return f"{x:.6g}"


def assert_steepest(S: ArrayLike, G: ArrayLike, /, *, norm: str, eta: float = 1.0, rtol: float | None = None,
                    tension: TensionResult | None = None) -> None:
    r"""Assert that ``S`` is the steepest-descent step of size ``eta`` for ``norm`` on ``G``.

    ``S`` passes when it is feasible, ``N(S) <= eta (1 + rtol)`` (``eta/2``
    for the covering radius), when its decrease reaches the optimum,
    ``-<G, S> >= (1 - rtol) eta N^*(G)``, and, for the seminorms, when it is
    centred (``||mean row|| <= rtol`` times its largest row, to the rounding
    of the mean).  ``N(S)`` is computed exactly or bounded from above by a
    certificate (for the covering radius: a least-squares sphere centre, exact
    for the cospherical rows of RowNorm-type steps, else the certified
    enclosing ball), and the optimum is taken at the *upper* end
    of its certified bracket (``min_tension`` for the diameter), so a step that
    falls short can never pass; the bracket is solved to a quarter of
    ``rtol``, so the exact step always does.

    =====================  ==============================================  ==============================
    ``norm``               feasible set                                    optimal decrease
    =====================  ==============================================  ==============================
    ``"diameter"``         ``D(S) <= eta``, centred                        ``eta T(G)``
    ``"diameter_inf"``     ``max_k (max_i s_ik - min_i s_ik) <= eta``,     ``(eta/2) sum_ik |g_ik|``
                           centred (I18: centred column-wise sign)
    ``"covering_radius"``  ``rad(S) <= eta/2``, centred (I15: projected    ``(eta/2) sum_i ||g_i||``
                           RowNorm ``-(eta/2) P RN(G)``)
    ``"max_row"``          ``max_i ||s_i|| <= eta`` (RowNorm)              ``eta sum_i ||g_i||``
    ``"max_entry"``        ``max_ij |s_ij| <= eta`` (Sign)                 ``eta sum_ij |g_ij|``
    ``"spectral"``         ``||S||_2 <= eta`` (polar factor, Muon)         ``eta ||G||_*``
    =====================  ==============================================  ==============================

    The covering radius takes ``eta/2`` so that its step is feasible for the
    diameter at the same ``eta`` (``D(S) <= 2 rad(S)``): it is the
    projected RowNorm of identity I15.

    Parameters
    ----------
    S : (V, d) array_like
        The step to judge: NumPy, a torch tensor (CPU or CUDA; detached, and
        bfloat16/float16 widened exactly), a CuPy array, any DLPack exporter.
    G : (V, d) array_like
        The gradient the step was computed from (zero column sums for the
        three seminorms, to the rounding of its format).
    norm : {"diameter", "diameter_inf", "covering_radius", "max_row", "max_entry", "spectral"}
    eta : float
        Step size ``> 0``.
    rtol : float, optional
        Relative tolerance, ``0 <= rtol < 1``; default :func:`default_rtol`
        for the formats of ``S`` and ``G``.
    tension : TensionResult, optional
        A solve ``min_tension(G)`` to reuse for ``norm="diameter"`` (its
        relative gap should be below ``rtol``, or correct steps may fail).

    Raises
    ------
    AssertionError
        ``S`` is not the steepest step; the message gives the norm of ``S``
        against ``eta``, the decrease against the optimum and their ratio,
        whether ``S`` is centred, the scale factor if ``S`` is a multiple of
        a steepest step, and the worst rows.
    ValueError, TypeError
        Bad input, naming the argument: shapes that differ, non-finite
        entries, an unknown ``norm``, ``eta <= 0``, ``rtol`` outside
        ``[0, 1)``, a ``G`` without zero column sums for a seminorm.
    SolverError
        ``norm="diameter"``: ``min_tension`` could not certify the optimum
        to ``rtol / 4`` (possible for ``rtol`` below about ``1e-10``).

    References
    ----------
    arXiv 2608.22253, identities I10 (diameter), I15 (covering radius),
    I18 (the other norms).

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[3.0, 4.0], [-3.0, -4.0]])
    >>> assert_steepest(-G / 5.0, G, norm="max_row")            # RowNorm: passes
    >>> assert_steepest(-G / 10.0, G, norm="max_row")           # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: S is not the steepest step of norm='max_row' ...
    ...
      scale:    S = 0.5 x a steepest step (S / 0.5 has norm eta ...): its size is off, not its direction
    ...
    """
    name = _norm_name(norm)
    e = _eta(eta)
    Sa, Ga, X, kG = _inputs(S, G, name)
    r = _rtol(rtol, name, Sa, Ga)
    if tension is not None and not isinstance(tension, TensionResult):
        raise TypeError("tension must be a TensionResult from min_tension(G)")
    if tension is not None:
        tension = _fp.scaled_certificate(tension, kG)
    info = NORMS[name]
    # the verdict is the same for (2^k S, 2^k eta): S and eta at unit size when outside
    # [2^-SAFE, 2^SAFE], so that neither the norm of S nor -<G, S> over- or underflows
    kS = _step_shift(Sa.array, e)
    Sx = _fp.mul_pow2(Sa.array, kS)
    e = max(_fp.ldexp_inf(e, kS), 2.0**-1000)  # (an eta 2^1000 below S: S is too large either way)
    V = Sx.shape[0]
    budget = e / 2.0 if info.half else e
    meas = _measure(name, Sx, budget * (1.0 + r))
    opt = _optimum(name, X, r, tension if name == "diameter" else None)
    dec = _decrease(X, Sx)
    o_hi = e * opt.upper
    feasible = meas.value <= budget * (1.0 + r)
    enough = dec >= (1.0 - r) * o_hi
    cent = _centring(Sx)
    centred = cent <= r + _mean_rounding(Sa.dtype, V)
    if feasible and enough and (centred or not info.centred):
        return
    raise AssertionError("\n".join([_message(name, info, Sx, X, e, budget, r, meas, opt, dec, feasible, enough,
                                            cent, centred, Sa, Ga), *_rescaled_line(kG, kS)]))


def _message(name, info, S, G, eta, budget, rtol, meas, opt, dec, feasible, enough, cent, centred,
             Sa, Ga) -> str:
    V, d = S.shape
    o_lo, o_hi = eta * opt.lower, eta * opt.upper
    why = []
    if not enough:
        why.append("its decrease falls short of the optimum")
    if not feasible:
        why.append(f"{info.symbol} exceeds {info.budget}")
    if info.centred and not centred:
        why.append("it is not centred")
    fmt = f" (S {Sa.library} {Sa.dtype}, G {Ga.library} {Ga.dtype})" if (Sa.dtype, Ga.dtype) != (
        "float64", "float64") or Sa.library != "numpy" else ""
    lines = [f"S is not the steepest step of norm={name!r} with eta={_g(eta)}: " + "; ".join(why) + ".",
             f"  norm {name!r}: {info.title}; steepest step {info.step}",
             f"  V = {V}, d = {d}, rtol = {rtol:.2g}{fmt}"]
    # decrease
    certified = o_hi > o_lo * (1 + 4 * _U64) and name == "diameter"
    if o_hi > 0:
        if certified:
            ratio = f"ratio in [{dec / o_hi:.10g}, {dec / o_lo:.10g}]" if o_lo > 0 else f"ratio <= {dec / o_hi:.10g}"
            optimum = f"optimum {info.optimum} in [{o_lo:.10g}, {o_hi:.10g}]"
        else:
            ratio = f"ratio {dec / o_hi:.6g}"
            optimum = f"optimum {info.optimum} = {_g(o_hi)}"
    else:
        ratio, optimum = "G = 0", "optimum 0"
    cmp_ = ">=" if enough else "<"
    lines.append(f"  decrease: -<G, S> = {_g(dec)} {cmp_} (1 - rtol) x {optimum}; {ratio}"
                 f"   {'ok' if enough else 'FAILED'}")
    # feasibility
    if math.isnan(meas.lower):  # bounded from above only (enough to show feasibility)
        val = f"<= {_g(meas.value)}"
    elif meas.lower >= meas.value * (1 - 1e-12):
        val = f"= {_g(meas.value)}"
    else:  # the enclosing-ball certificate brackets the radius
        val = f"in [{_g(meas.lower)}, {_g(meas.value)}]"
    cmpf = "<=" if feasible else ">"
    lines.append(f"  norm:     {info.symbol} {val} = {meas.value / budget:.6g} x {info.budget}, "
                 f"{cmpf} {info.budget} = {_g(budget)} (1 + rtol)   {'ok' if feasible else 'FAILED'}")
    # centring
    if info.centred:
        state = "yes" if centred else "no"
        lines.append(f"  centred:  {state}, ||mean row of S|| = {cent:.3g} x its largest row "
                     f"(required: the steepest step for this seminorm is centred, 1^T S = 0)"
                     + ("" if centred else "; subtract S.mean(axis=0)") + f"   {'ok' if centred else 'FAILED'}")
    else:
        lines.append(f"  centred:  {'yes' if cent <= rtol else 'no'}, ||mean row of S|| = {cent:.3g} x its largest "
                     "row (not required for this norm)")
    # scale
    lines.append("  scale:    " + _scale_line(name, info, meas, budget, dec, o_hi, rtol, feasible and enough))
    lines.extend(_details(name, S, G, eta, budget, rtol, meas, opt, enough))
    return "\n".join(lines)


def _scale_line(name, info, meas, budget, dec, o_hi, rtol, right) -> str:
    if right:
        return "the size and the decrease are right (only the centring is off)"
    if meas.value == 0.0:
        return "S = 0"
    c = meas.value / budget
    passes = dec / c >= (1.0 - rtol) * o_hi
    if abs(c - 1.0) > rtol and passes and o_hi > 0:
        hint = ""
        if name == "covering_radius" and abs(c - 2.0) <= 2 * rtol + 1e-3:
            hint = " (norm='covering_radius' bounds rad(S) by eta/2: its step is -(eta/2) P RN(G))"
        if name == "diameter_inf" and abs(c - 2.0) <= 2 * rtol + 1e-3:
            hint = (" (norm='diameter_inf' bounds each column's range by eta: its step is "
                    "-(eta/2) P sign(G), entries of size about eta/2)")
        return (f"S = {c:.6g} x a steepest step (S / {c:.6g} has norm {info.budget} and the optimal decrease): "
                "its size is off, not its direction" + hint)
    if o_hi > 0 and dec < 0 and -dec / c >= (1.0 - rtol) * o_hi:
        return f"S = -{c:.6g} x a steepest step: it points uphill (the sign is flipped)"
    if abs(c - 1.0) <= rtol:
        return (f"{info.symbol} = {info.budget}: the size is right, the direction falls short "
                f"(ratio {dec / o_hi:.6g})" if o_hi > 0 else f"{info.symbol} = {info.budget}")
    if o_hi > 0:
        return (f"not a multiple of a steepest step: rescaled to {info.symbol} = {info.budget} "
                f"(S / {c:.6g}) it reaches ratio {dec / c / o_hi:.6g} of the optimum")
    return f"{info.symbol} = {c:.6g} x {info.budget}"


def _top(values: np.ndarray, k: int = _WORST) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first (ties: smaller index)."""
    k = min(k, values.size)
    idx = np.argsort(-values, kind="stable")[:k]
    return idx


def _worst(sf: np.ndarray, best: np.ndarray, k: int = _WORST) -> np.ndarray:
    """The ``k`` rows that lose the largest share of what they could give.

    ``sf`` is each row's shortfall, ``best`` its optimal contribution; rows
    are ranked by ``sf / best`` (to 9 digits), then by ``sf``.  A RowNorm
    epsilon costs each tiny row most of its share but little in absolute
    terms: the share finds those rows, the absolute loss alone would not.
    """
    rel = np.divide(sf, best, out=np.zeros_like(sf), where=best > 0)
    order = np.lexsort((-sf, -np.round(rel, 9)))
    return order[: min(k, sf.size)]


def _details(name, S, G, eta, budget, rtol, meas, opt, enough) -> list[str]:
    """Where S goes wrong: the rows (pairs, columns, directions) that break the
    bound, and, when the decrease falls short, those that lose the most."""
    V, d = S.shape
    out = []
    lim = budget * (1.0 + rtol)
    if name == "max_row":
        rn = meas.aux["rownorms"]
        gn = opt.aux["rownorms"]
        over = np.flatnonzero(rn > lim)
        if over.size:
            i = int(over[np.argmax(rn[over])])
            out.append(f"  too long: {over.size} of {V} rows have ||s_i|| > eta; the longest is row {i}, "
                       f"||s_i|| = {rn[i] / eta:.6g} eta")
        short = np.flatnonzero((gn > 0) & (rn < eta * (1.0 - rtol)))
        if short.size:
            out.append(f"  short rows: {short.size} of {np.count_nonzero(gn)} rows with g_i != 0 have "
                       "||s_i|| < eta (the steepest step puts every such row at length eta)")
        sf = eta * gn + np.einsum("ij,ij->i", G, S)
        cos = -np.einsum("ij,ij->i", G, S) / np.where(gn * rn > 0, gn * rn, 1.0)
        if enough:
            return out
        out.append(f"  worst rows (shortfall eta ||g_i|| + <g_i, s_i> as a share of eta ||g_i||; "
                   f"{_g(float(sf.sum()))} in all):")
        for i in _worst(sf, eta * gn):
            out.append(f"    row {i}: ||g_i|| = {gn[i]:.3g}, ||s_i|| = {rn[i] / eta:.4g} eta, "
                       f"cos(s_i, -g_i) = {cos[i]:.4f}, shortfall {sf[i]:.3g}")
    elif name == "max_entry":
        A = np.abs(S)
        over_ij = np.argwhere(A > lim)  # (k, 2): the (i, j) of each entry over eta
        if over_ij.size:
            i, j = (int(v) for v in over_ij[np.argmax(A[tuple(over_ij.T)])])
            out.append(f"  too large: {len(over_ij)} entries have |s_ij| > eta; the largest is "
                       f"S[{i}, {j}] = {S[i, j] / eta:.6g} eta")
        nz = G != 0
        short = nz & ((A < eta * (1.0 - rtol)) | (np.sign(S) != -np.sign(G)))
        if short.any():
            out.append(f"  short entries: {int(short.sum())} of {int(nz.sum())} entries with g_ij != 0 are not "
                       "-eta sign(g_ij)")
        sf = (eta * np.abs(G) + G * S).sum(axis=1)
        if enough:
            return out
        out.append(f"  worst rows (shortfall sum_j eta |g_ij| + g_ij s_ij as a share of eta sum_j |g_ij|; "
                   f"{_g(float(sf.sum()))} in all):")
        for i in _worst(sf, eta * np.abs(G).sum(axis=1)):
            wrong = int(np.sum(nz[i] & ((A[i] < eta * (1 - rtol)) | (np.sign(S[i]) != -np.sign(G[i])))))
            out.append(f"    row {i}: shortfall {sf[i]:.3g}, {wrong} of {int(nz[i].sum())} nonzero entries "
                       f"not at -eta sign(g_ij), max |s_ij| = {A[i].max() / eta:.4g} eta")
    elif name == "diameter_inf":
        rng, mid = meas.aux["ranges"], meas.aux["mid"]
        over = np.flatnonzero(rng > lim)
        if over.size:
            cols = ", ".join(f"{k} ({rng[k] / eta:.4g} eta)" for k in over[np.argsort(-rng[over])][:_WORST])
            out.append(f"  too wide: {over.size} of {d} columns have a range max_i s_ik - min_i s_ik > eta: {cols}")
        sf = (0.5 * eta * np.abs(G) + G * (S - mid)).sum(axis=1)
        if enough:
            return out
        out.append("  worst rows (shortfall sum_k (eta/2) |g_ik| + g_ik (s_ik - m_k), m_k the midrange "
                   f"of column k, as a share of (eta/2) sum_k |g_ik|; {_g(float(sf.sum()))} in all):")
        for i in _worst(sf, 0.5 * eta * np.abs(G).sum(axis=1)):
            off = np.abs(S[i] - mid) < 0.5 * eta * (1 - rtol)
            out.append(f"    row {i}: shortfall {sf[i]:.3g}, {int(np.sum(off & (G[i] != 0)))} of "
                       f"{int(np.count_nonzero(G[i]))} nonzero columns not at the end of their range")
    elif name == "covering_radius":
        c = meas.aux["centre"]
        R = S - c
        dist = _rownorms(R)
        gn = opt.aux["rownorms"]
        over = np.flatnonzero(dist > lim)
        if over.size:
            i = int(over[np.argmax(dist[over])])
            out.append(f"  outside: {over.size} of {V} rows lie farther than eta/2 from the centre of the "
                       f"smallest enclosing ball; the farthest is row {i} at {dist[i] / eta:.6g} eta")
        sf = 0.5 * eta * gn + np.einsum("ij,ij->i", G, R)
        cos = -np.einsum("ij,ij->i", G, R) / np.where(gn * dist > 0, gn * dist, 1.0)
        if enough:
            return out
        out.append("  worst rows (shortfall (eta/2) ||g_i|| + <g_i, s_i - c>, c the centre of the smallest "
                   f"enclosing ball, as a share of (eta/2) ||g_i||; {_g(float(sf.sum()))} in all):")
        for i in _worst(sf, 0.5 * eta * gn):
            out.append(f"    row {i}: ||g_i|| = {gn[i]:.3g}, ||s_i - c|| = {dist[i] / eta:.4g} eta, "
                       f"cos(s_i - c, -g_i) = {cos[i]:.4f}, shortfall {sf[i]:.3g}")
    elif name == "diameter":
        i, j = meas.aux["pair"]
        if meas.value > lim:
            out.append(f"  too far apart: the farthest rows are {i} and {j}, ||s_i - s_j|| = "
                       f"{meas.value / eta:.6g} eta")
        fl = opt.aux["tension"].flow
        if fl.pairs.shape[0] and not enough:
            I, J, Y = fl.pairs[:, 0], fl.pairs[:, 1], fl.vectors
            yn = _rownorms(Y)
            along = -np.einsum("ij,ij->i", Y, S[I] - S[J]) / np.where(yn > 0, yn, 1.0)
            sf = eta * yn - yn * along
            out.append("  worst pairs (an optimal flow y of min_tension carries g_i = sum_j y_ij; the steepest "
                       "step stretches each pair (i, j) with y_ij != 0 to distance eta along y_ij, I12; "
                       f"shortfall eta ||y_ij|| + <y_ij, s_i - s_j>, {_g(float(sf.sum()))} in all):")
            for e_ in _worst(sf, eta * yn):
                out.append(f"    rows ({I[e_]}, {J[e_]}): ||y_ij|| = {yn[e_]:.3g}, (s_j - s_i) along y_ij = "
                           f"{along[e_] / eta:.4g} eta, shortfall {sf[e_]:.3g}")
    else:  # spectral
        U, s, Vt = opt.aux["U"], opt.aux["s"], opt.aux["Vt"]
        sv = meas.aux["singular"]
        n_over = int(np.sum(sv > lim))
        if n_over:
            out.append(f"  too large: {n_over} singular values of S exceed eta; the largest is {sv[0] / eta:.6g} eta")
        t = -np.einsum("ik,ij,kj->k", U, S, Vt)  # u_k^T (-S) v_k
        sf = s * (eta - t)
        keep = s > (s[0] if s.size else 0.0) * max(V, d) * _U64
        rank = int(keep.sum())
        if rank:
            out.append(f"  singular directions of G (rank {rank}): u_k^T (-S) v_k should be eta for every "
                       f"sigma_k > 0; it ranges over [{t[keep].min() / eta:.4g}, {t[keep].max() / eta:.4g}] eta")
        if enough:
            return out
        out.append(f"  worst directions (shortfall sigma_k (eta - u_k^T (-S) v_k); {_g(float(sf.sum()))} in all):")
        for k in _worst(np.where(keep, sf, -np.inf), eta * s):
            if keep[k]:
                out.append(f"    k = {k}: sigma_k = {s[k]:.3g}, u_k^T (-S) v_k = {t[k] / eta:.4g} eta, "
                           f"shortfall {sf[k]:.3g}")
        Sx = -eta * (U[:, keep] @ Vt[keep])
        rows = np.einsum("ij,ij->i", G, S - Sx)
        out.append("  worst rows (shortfall <g_i, s_i - s*_i> against the exact polar step s* = -eta U V^T):")
        for i in _top(rows):
            out.append(f"    row {i}: shortfall {rows[i]:.3g}, ||s_i - s*_i|| = "
                       f"{float(np.linalg.norm(S[i] - Sx[i])) / eta:.3g} eta")
    return out


# --------------------------------------------------------------------------- the ratio
def assert_decrease_ratio(S: ArrayLike, G: ArrayLike, /, *, at_least: float,
                          tension: TensionResult | None = None) -> None:
    r"""Assert that ``S`` buys at least ``at_least`` of the best decrease at its diameter.

    .. math::

        \rho(S) = \frac{-\langle G, S\rangle}{D(S)\, T(G)}
        \in \left[\frac{-\langle G, S\rangle}{D(S)\, T_{\rm upper}},
                  \frac{-\langle G, S\rangle}{D(S)\, T_{\rm lower}}\right]

    ``rho = 1`` for the exact steepest direction (I10), at least
    ``sqrt((k+1)/(2k))`` for projected RowNorm (I16); it does not depend on
    the step size.  ``T(G)`` is bracketed by :func:`~hilbertgeom.min_tension`;
    the assertion passes only if the *lower* end of the bracket of ``rho``
    is at least ``at_least``.

    Parameters
    ----------
    S : (V, d) array_like
        The step (NumPy, torch, CuPy, DLPack).
    G : (V, d) array_like
        Gradient with zero column sums.
    at_least : float
        Required ratio, ``<= 1``.
    tension : TensionResult, optional
        A solve ``min_tension(G)`` to reuse.

    Raises
    ------
    AssertionError
        With the certified bracket of the ratio, ``D(S)`` and its farthest
        pair, the decrease and ``T(G)``, and whether ``S`` is centred.
    ValueError, TypeError
        Bad input, naming the argument.

    Examples
    --------
    >>> import numpy as np
    >>> from hilbertgeom import projected_rownorm
    >>> G = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    >>> assert_decrease_ratio(projected_rownorm(G), G, at_least=0.8)
    """
    a = _v.scalar(at_least, "at_least")
    if a > 1.0:
        raise ValueError(f"at_least must be <= 1 (no step beats the steepest one); got {a:g}")
    Sa, _, X, kG = _inputs(S, G, None)
    if tension is None:
        tension = min_tension(X)
    elif not isinstance(tension, TensionResult):
        raise TypeError("tension must be a TensionResult from min_tension(G)")
    else:
        tension = _fp.scaled_certificate(tension, kG)
    # rho is scale-free in S and in G: both at unit size when outside [2^-SAFE, 2^SAFE]
    kS = _fp.unit_shift(_fp.max_abs(Sa.array))
    Sx = _fp.mul_pow2(Sa.array, kS)
    p = row_diameter(Sx, return_pair=True)
    D = p.distance
    dec = _decrease(X, Sx)
    T_lo, T_hi = tension.value, tension.flow.cost
    if D > 0 and T_hi > 0:
        lo = dec / (D * T_hi)
        hi = dec / (D * T_lo) if T_lo > 0 else math.inf
    else:
        lo = hi = 0.0  # S is a common shift (or zero), or G = 0: no decrease to buy
    if lo >= a:
        return
    cent = _centring(Sx)
    where = "it cannot" if hi < a else "the certificate cannot place it"
    lines = [f"the decrease ratio of S under the row diameter is below at_least = {a:.6g}: {where} reach it.",
             (f"  ratio:    -<G, S> / (D(S) T(G)) in [{lo:.6g}, {hi:.6g}] (certified; 1 for the steepest step, "
              "I10)"),
             f"  decrease: -<G, S> = {_g(dec)}",
             f"  D(S):     {_g(D)}" + (f", farthest rows {p.i} and {p.j}" if D > 0 else " (S is a common shift)"),
             f"  T(G):     in [{_g(T_lo)}, {_g(T_hi)}] (min_tension, status {tension.status!r})",
             (f"  centred:  {'yes' if cent <= 1e-6 else 'no'}, ||mean row of S|| = {cent:.3g} x its largest row "
              "(the ratio does not depend on it)"), *_rescaled_line(kG, kS)]
    raise AssertionError("\n".join(lines))
