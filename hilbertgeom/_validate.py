"""Input checks, in one place.

Every public function validates its arguments here before computing.  Messages
name the argument and the rule that was broken, so that a user reading a
traceback knows what to change.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__: list[str] = []  # private module

NormLike = int | float | str
"""A norm choice as the public functions accept it: 2, 1, inf, or "2", "1", "inf"."""

try:  # array-api-compat is a declared dependency; keep the import local to here
    import array_api_compat as _aac
except ImportError:  # pragma: no cover - exercised only on broken installs
    _aac = None  # type: ignore[assignment]


def _is_device_array(x) -> bool:
    """True for arrays that live on an accelerator (CuPy, torch CUDA, ...)."""
    if _aac is None:
        return False
    if _aac.is_cupy_array(x):
        return True
    if _aac.is_array_api_obj(x) and not isinstance(x, np.ndarray):
        try:
            dev = _aac.device(x)
        except Exception:  # pragma: no cover - exotic array objects raise anything
            return False
        text = str(dev).lower()
        return not ("cpu" in text or text == "none")
    return False


def to_numpy(x, name: str) -> np.ndarray:
    """Return a NumPy view of ``x`` (array_like or a CPU array-API array).

    Device arrays raise ``TypeError``: the core never moves data off a device.
    """
    if isinstance(x, np.ndarray):
        if isinstance(x, np.ma.MaskedArray):
            raise TypeError(f"{name} is a masked array; pass {name}.filled(value) or drop the masked rows")
        # subclasses (np.matrix, memmap) are read as plain arrays: np.matrix would
        # otherwise turn * into a matrix product and keep rows 2-D
        return x if type(x) is np.ndarray else np.asarray(x)
    if _is_device_array(x):
        raise TypeError(
            f"{name} lives on an accelerator ({type(x).__module__}.{type(x).__name__}); "
            "the hilbertgeom core runs on the CPU and never copies device arrays to "
            "the host: use hilbertgeom.gpu, or move the array to the CPU yourself"
        )
    if hasattr(x, "__dlpack__") and not isinstance(x, (list, tuple)):
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError):
            pass
    try:
        return np.asarray(x)
    except Exception as exc:  # ragged lists and the like; re-raised as TypeError
        raise TypeError(f"{name} could not be read as an array: {exc}") from None


def real_array(x, name: str, *, keep_float32: bool = False) -> np.ndarray:
    """Validate dtype and finiteness; return float64 (or float32 if asked and given).

    Integers and booleans are promoted to float64.  Complex, object and string
    arrays raise ``TypeError``; NaN or inf entries raise ``ValueError``.
    """
    a = to_numpy(x, name)
    kind = a.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must be real; got complex dtype {a.dtype}")
    if kind not in "biuf":
        raise TypeError(f"{name} must have a real numeric dtype; got {a.dtype}")
    if kind == "f" and keep_float32 and a.dtype.itemsize <= 4:
        a = a.astype(np.float32, copy=False)
    else:
        a = a.astype(np.float64, copy=False)
    if a.size and not np.isfinite(a).all():
        bad = int(a.size - np.count_nonzero(np.isfinite(a)))
        raise ValueError(f"{name} must be finite; found {bad} NaN/inf entr{'y' if bad == 1 else 'ies'}")
    return a


def matrix_shape(a, name: str, min_rows: int = 1):
    """``a`` (any array library) if it is 2-D with at least ``min_rows`` rows and one column."""
    shape = tuple(a.shape)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (V, d); got shape {shape}")
    if shape[1] < 1:
        raise ValueError(f"{name} must have at least one column; got shape {shape}")
    if shape[0] < min_rows:
        what = "row" if min_rows == 1 else "rows"
        raise ValueError(f"{name} must have at least {min_rows} {what}; got shape {shape}")
    return a


def matrix(x, name: str, *, keep_float32: bool = False, min_rows: int = 1) -> np.ndarray:
    """A finite real 2-D array with at least ``min_rows`` rows and one column."""
    return matrix_shape(real_array(x, name, keep_float32=keep_float32), name, min_rows)


def vector(x, name: str, *, length: int | None = None) -> np.ndarray:
    """A finite real 1-D float64 array, optionally of a given length."""
    a = real_array(x, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}")
    if length is not None and a.shape[0] != length:
        raise ValueError(f"{name} must have length {length}; got {a.shape[0]}")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    return a


ZERO_SUM_RTOL = 1e-6  # |1^T G|_k <= 1e-6 sum_i |G_ik| counts as zero-sum (then projected)


def zero_sum_mean(G, xp, center: bool, rows: int | None = None, return_abs: bool = False):
    """Column means of ``G`` in float64 after the zero-sum rule: ``1^T G = 0`` to
    ``1e-6`` of each column's absolute sum (plus ``V`` times the smallest
    subnormal), else ``ValueError`` -- unless ``center``.

    ``G`` is a finite ``(V, d)`` array of any array namespace ``xp`` (float32
    or float64), read ``rows`` rows at a time (all at once by default; the
    device passes chunks within its tile budget), so no ``V x d`` float64 copy
    is made.  The one zero-sum rule of the library (:func:`zero_sum_matrix`,
    :mod:`hilbertgeom.gpu`).  ``return_abs``: also return the column sums of ``|G|``
    (computed for the rule anyway; :func:`hilbertgeom.tension.bounds.centring_noise`
    needs them).
    """
    V = G.shape[0]
    rows = V if rows is None else max(1, int(rows))
    col: Any = None  # (one chunk: the plain column sums, bit for bit)
    scale: Any = None
    for a in range(0, V, rows):
        C = xp.astype(G[a : min(a + rows, V), :], xp.float64, copy=False)
        s = xp.sum(C, axis=0)
        col = s if col is None else col + s
        if not center or return_abs:
            s = xp.sum(xp.abs(C), axis=0)
            scale = s if scale is None else scale + s
    mean = zero_sum_check(col, scale, V, center, xp)
    return (mean, scale) if return_abs else mean


def zero_sum_check(col, scale, V: int, center: bool, xp):
    """The zero-sum rule on column sums ``col`` and absolute column sums ``scale`` of a
    ``V``-row gradient (any namespace; ``scale`` unused when ``center``): the column
    means, or ``ValueError`` naming the worst column.  :func:`zero_sum_mean`, and the
    device's fused RowNorm, which computes the sums in its own pass."""
    # 1e-6 of the column's absolute sum: rounding in how G was computed (p_c - 1 for a
    # confident prediction, a centring) is far below it; a real non-zero-sum input is not
    if not center and float(xp.max(xp.abs(col) - ZERO_SUM_RTOL * scale - V * 2.0**-1074)) > 0:
        k = int(xp.argmax(xp.abs(col)))
        raise not_zero_sum(float(col[k]), k)
    return col / V


def zero_sum_matrix(G, center: bool):
    """Validate ``1^T G = 0`` (to ``1e-6`` of each column's absolute sum) or project.

    An accepted ``G`` is still projected with ``P``: that changes it by rounding
    only, makes the balance equations exactly solvable, and leaves
    ``<G, Phi>`` unchanged for every centred ``Phi``.  Returns ``(P G, center)``.
    """
    X = matrix(G, "G", min_rows=2)
    return X - zero_sum_mean(X, np, center), center


def not_zero_sum(col_sum: float, k: int) -> ValueError:
    """The error for a gradient whose column ``k`` sums to ``col_sum`` (the largest)."""
    return ValueError(
        f"G must have zero column sums (max |1^T G| = {abs(col_sum):.2e} in column {k}); "
        "pass center=True to project it with P = I - 11^T/V (advisable for cross-entropy "
        "gradients of very confident predictions, whose p_c - 1 loses digits)"
    )


def nonnegative(a: np.ndarray, name: str) -> np.ndarray:
    if a.size and (a < 0).any():
        raise ValueError(f"{name} must be nonnegative; smallest entry is {a.min():.6g}")
    return a


def scalar(x, name: str, *, minimum: float | None = None, strict: bool = False,
           allow_inf: bool = False) -> float:
    """A real Python float, optionally bounded below."""
    real = not isinstance(x, (bool, np.bool_)) and isinstance(x, (numbers.Real, np.floating, np.integer))
    if not real and not (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf"):
        raise TypeError(f"{name} must be a real number; got {type(x).__name__}")
    v = float(x)
    if np.isnan(v) or (np.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be finite; got {v}")
    if minimum is not None:
        if strict and not v > minimum:
            raise ValueError(f"{name} must be > {minimum:g}; got {v:g}")
        if not strict and not v >= minimum:
            raise ValueError(f"{name} must be >= {minimum:g}; got {v:g}")
    return v


def integer(x, name: str, *, minimum: int | None = None) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(x).__name__}")
    v = int(x)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {v}")
    return v


def norm_choice(norm, name: str = "norm") -> float:
    """One of 2, 1, inf (given as numbers or the strings '2', '1', 'inf')."""
    table = {"2": 2.0, "1": 1.0, "inf": np.inf, "l2": 2.0, "l1": 1.0, "linf": np.inf}
    if isinstance(norm, str):
        key = norm.strip().lower()
        if key in table:
            return table[key]
    elif isinstance(norm, (numbers.Real, np.floating, np.integer)) and not isinstance(norm, bool):
        v = float(norm)
        if v in (1.0, 2.0) or (np.isinf(v) and v > 0):
            return v
    raise ValueError(f"{name} must be one of 2, 1 or inf; got {norm!r}")


def axis_index(axis, ndim: int, name: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(axis).__name__}")
    ax = int(axis)
    if not -ndim <= ax < ndim:
        raise ValueError(f"{name}={ax} is out of range for an array with {ndim} dimension(s)")
    return ax % ndim
