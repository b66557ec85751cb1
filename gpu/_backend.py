"""Device arrays in, device arrays out: namespace, validation, tile budget.

Everything that decides *which* arrays :mod:`hilbertgeom.gpu` accepts lives
here, so that the kernels in :mod:`hilbertgeom.gpu._kernels` can be written
once against the array API and tested on the CPU (NumPy, array-api-strict)
through :func:`accept_host_arrays`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import warnings
from collections.abc import Iterator

import array_api_compat

__all__: list[str] = []  # private module

# DLPack device types (dlpack.h): kDLCUDA, kDLCUDAManaged, kDLROCM.
_DLPACK_DEVICE = {2: "CUDA", 13: "CUDA managed", 10: "ROCm"}
_DLPACK_HOST = {1: "CPU", 3: "CUDA pinned host"}

_ACCEPT_HOST: contextvars.ContextVar[bool] = contextvars.ContextVar("hilbertgeom_gpu_accept_host", default=False)

DEFAULT_TILE_BUDGET = 1 << 30  # bytes of device memory for one tile's temporaries
MIN_TILE = 128  # rows: below this a tile no longer keeps the GEMM busy
_budget: list[int] = [DEFAULT_TILE_BUDGET]


class TileWarning(RuntimeWarning):
    """A tile did not fit in device memory and was retried with fewer rows."""


# --------------------------------------------------------------------------- CuPy
def _cupy():
    """The ``cupy`` module, or ``None`` when it is not installed."""
    try:
        import cupy
    except Exception:  # ImportError, or a CuPy built against a missing CUDA
        return None
    return cupy


def cuda_available() -> bool:
    """True when CuPy is installed and sees at least one CUDA device.

    Examples
    --------
    >>> import hilbertgeom.gpu as hg
    >>> isinstance(hg.cuda_available(), bool)
    True
    """
    cp = _cupy()
    if cp is None:
        return False
    try:
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def cuda_unavailable_reason() -> str:
    """Why :func:`cuda_available` is False, in words (empty when it is True)."""
    cp = _cupy()
    if cp is None:
        return "CuPy is not installed (pip install 'hilbertgeom[gpu]')"
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CuPy cannot reach a CUDA driver ({type(exc).__name__}: {exc})"
    return "" if n > 0 else "CuPy sees no CUDA device"


# --------------------------------------------------------------------------- host arrays (tests)
@contextlib.contextmanager
def accept_host_arrays():
    """Let the kernels run on host array-API arrays (NumPy, array-api-strict).

    For testing the shared code path on machines without CUDA; the public
    functions otherwise refuse host arrays.
    """
    token = _ACCEPT_HOST.set(True)
    try:
        yield
    finally:
        _ACCEPT_HOST.reset(token)


def _host_error(x, name: str, fn: str) -> TypeError:
    kind = f"{type(x).__module__}.{type(x).__name__}"
    return TypeError(
        f"{name} is a host array ({kind}); hilbertgeom.gpu.{fn} takes device arrays "
        "(CuPy, or a CUDA tensor exporting DLPack) and never copies from the host: "
        f"use hilbertgeom.{fn} for host arrays, or move {name} with cupy.asarray first"
    )


def _widen_bfloat16(x):
    """A torch CUDA bfloat16 tensor widened to float32 on its device (exact).

    DLPack consumers such as CuPy have no bfloat16 dtype; every bfloat16 value
    is a float32 value, so the widening loses nothing.
    """
    if str(getattr(x, "dtype", "")) == "torch.bfloat16" and hasattr(x, "float"):
        return x.float()
    return x


def _detached(x):
    """A tensor that tracks gradients, detached (no copy): DLPack refuses to export it."""
    if getattr(x, "requires_grad", False) and hasattr(x, "detach"):
        return x.detach()
    return x


def _cuda_index(x):
    """The CUDA device id of a DLPack-exporting object on a CUDA device, else ``None``."""
    if hasattr(x, "__dlpack_device__") and not isinstance(x, type):
        try:
            kind, idx = x.__dlpack_device__()
        except Exception:
            return None
        if int(kind) in _DLPACK_DEVICE:
            return int(idx)
    return None


def on_device(*arrays):
    """Context manager making the first device array's GPU current (CuPy allocates there).

    CuPy creates arrays on the *current* device; for inputs on another GPU
    (``cuda:1``) every temporary must be made on theirs.  For host arrays
    (the CPU tests) it does nothing.
    """
    cp = _cupy()
    if cp is not None:
        for a in arrays:
            if isinstance(a, cp.ndarray):
                return a.device
            idx = _cuda_index(a)
            if idx is not None:
                return cp.cuda.Device(idx)
    return contextlib.nullcontext()


def as_device(x, name: str, fn: str):
    """``(array, xp)`` for a device array; ``TypeError`` for host data.

    CuPy arrays pass through; other objects that export DLPack on a CUDA
    device (torch CUDA tensors, JAX GPU arrays) are wrapped with
    ``cupy.from_dlpack`` (zero copy).  Inside :func:`accept_host_arrays`, host
    array-API arrays are returned with their own namespace.
    """
    cp = _cupy()
    if cp is not None and isinstance(x, cp.ndarray):
        return x, array_api_compat.array_namespace(x)
    dev = None
    if hasattr(x, "__dlpack_device__") and not isinstance(x, type):
        try:
            dev = int(x.__dlpack_device__()[0])
        except Exception:
            dev = None
    if dev in _DLPACK_DEVICE:
        if cp is None:
            raise TypeError(
                f"{name} lives on a {_DLPACK_DEVICE[dev]} device but CuPy is not installed: "
                "pip install 'hilbertgeom[gpu]'"
            )
        y = cp.from_dlpack(_widen_bfloat16(_detached(x)))
        return y, array_api_compat.array_namespace(y)
    if _ACCEPT_HOST.get() and array_api_compat.is_array_api_obj(x) and not isinstance(x, (list, tuple)):
        return x, array_api_compat.array_namespace(x)
    raise _host_error(x, name, fn)


def same_device(arrays: dict, xp) -> None:
    """``ValueError`` naming the arguments when arrays sit on different devices."""
    seen = {}
    for name, a in arrays.items():
        seen[name] = array_api_compat.device(a)
    devs = list(seen.values())
    if any(d != devs[0] for d in devs[1:]):
        where = ", ".join(f"{k} on {v}" for k, v in seen.items())
        raise ValueError(f"arrays must be on one device; got {where}")


def _is_contiguous(a) -> bool:
    flags = getattr(a, "flags", None)
    if flags is None:  # namespaces without strides (array-api-strict): nothing to check
        return True
    try:
        return bool(flags["C_CONTIGUOUS"])
    except (KeyError, TypeError):
        return bool(getattr(flags, "c_contiguous", True))


def real_float(a, xp, name: str, *, allow_float32: bool = True, min_ndim: int = 1, finite: bool = True):
    """Check dtype, layout and finiteness of a device array; return it (float32/64).

    Integers, booleans and complex arrays raise ``TypeError`` (converting them
    would hide a full-size device copy; pass ``a.astype(float)`` explicitly);
    float16 is widened to float32 (exact).  Non-contiguous arrays raise
    ``ValueError``; NaN/inf entries raise ``ValueError`` with their count
    (``finite=False``: not checked here, the caller checks them in a pass of its own).
    """
    dt = a.dtype
    f16 = getattr(xp, "float16", None)
    if f16 is not None and dt == f16:
        a = xp.astype(a, xp.float32)
        dt = a.dtype
    if dt not in (xp.float32, xp.float64):
        kind = str(dt).rsplit(".", 1)[-1]
        raise TypeError(
            f"{name} must be a real floating array (float32 or float64); got {kind}: "
            f"convert it explicitly, e.g. {name}.astype('float64')"
        )
    if dt == xp.float32 and not allow_float32:
        a = xp.astype(a, xp.float64)
    if a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s); got shape {tuple(a.shape)}")
    if not _is_contiguous(a):
        raise ValueError(
            f"{name} is not C-contiguous (a transposed or strided view); the kernels read rows "
            f"in tiles and would copy it per tile: pass an explicit contiguous copy "
            f"(cupy.ascontiguousarray({name}) or {name}.contiguous())"
        )
    if finite and math.prod(a.shape) and not bool(xp.all(xp.isfinite(a))):
        bad = int(xp.sum(xp.astype(xp.logical_not(xp.isfinite(a)), xp.int64)))
        raise ValueError(f"{name} must be finite; found {bad} NaN/inf entr{'y' if bad == 1 else 'ies'}")
    return a


def device_matrix(x, name: str, fn: str, *, min_rows: int = 1, keep_float32: bool = True, finite: bool = True):
    """A validated 2-D device matrix and its namespace (``finite``: see :func:`real_float`)."""
    from hilbertgeom._validate import matrix_shape

    a, xp = as_device(x, name, fn)
    return matrix_shape(real_float(a, xp, name, allow_float32=keep_float32, finite=finite), name, min_rows), xp


# --------------------------------------------------------------------------- tile budget
def tile_budget_bytes() -> int:
    """The current tile budget in bytes (see :func:`set_tile_budget`)."""
    return _budget[0]


def set_tile_budget(nbytes: int) -> int:
    """Set the device memory one tile's temporaries may use; return the old value.

    The pair kernels take ``tile = floor(sqrt(nbytes / bytes_per_entry))``
    rows per tile (rounded down to a multiple of 128, at least 128), where an
    entry of a ``tile x tile`` block costs 10 bytes in float32 screening and 18
    in float64.  Memory beyond the tile is a few ``V x d`` working copies (see
    the GPU page of the docs).  The default is 1 GiB.

    Parameters
    ----------
    nbytes : int
        Bytes of device memory for one tile's temporaries, at least one
        128-row float64 tile (294912).

    Returns
    -------
    int
        The previous budget, to restore it later.

    Examples
    --------
    >>> import hilbertgeom.gpu as hg
    >>> old = hg.set_tile_budget(256 * 2**20)
    >>> hg.tile_budget_bytes() == 256 * 2**20
    True
    >>> _ = hg.set_tile_budget(old)
    """
    import numbers

    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
        raise TypeError(f"nbytes must be an integer number of bytes; got {type(nbytes).__name__}")
    need = MIN_TILE * MIN_TILE * 18
    if int(nbytes) < need:
        raise ValueError(f"nbytes must be >= {need} (one {MIN_TILE}-row float64 tile); got {int(nbytes)}")
    old = _budget[0]
    _budget[0] = int(nbytes)
    return old


@contextlib.contextmanager
def tile_budget(nbytes: int) -> Iterator[None]:
    """Context manager form of :func:`set_tile_budget`.

    Parameters
    ----------
    nbytes : int
        The tile budget in bytes inside the ``with`` block; the previous one
        is restored on leaving it.

    Examples
    --------
    >>> import hilbertgeom.gpu as hg
    >>> with hg.tile_budget(64 * 2**20):
    ...     hg.tile_budget_bytes() == 64 * 2**20
    True
    """
    old = set_tile_budget(nbytes)
    try:
        yield
    finally:
        _budget[0] = old


def tile_rows(entry_bytes: int, V: int) -> int:
    """Rows per tile allowed by the budget for ``entry_bytes`` per tile entry."""
    B = math.isqrt(tile_budget_bytes() // max(1, entry_bytes))
    B = max(MIN_TILE, B - B % MIN_TILE)
    return max(1, min(B, V))


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    cp = _cupy()
    if cp is not None:
        oom = getattr(getattr(cp.cuda, "memory", None), "OutOfMemoryError", None)
        if oom is not None and isinstance(exc, oom):
            return True
    return "out of memory" in str(exc).lower() and isinstance(exc, RuntimeError)


def _free_cached() -> None:
    cp = _cupy()
    if cp is not None:
        with contextlib.suppress(Exception):
            cp.get_default_memory_pool().free_all_blocks()


def with_tile_fallback(run, tile: int, *, what: str, user_tile: bool):
    """Call ``run(tile)``; on device out-of-memory halve the tile and say so.

    A tile the user chose explicitly is not shrunk: the error is re-raised as
    ``MemoryError`` naming it.  Automatic tiles shrink down to ``MIN_TILE``
    rows; if that fails too, ``MemoryError`` names the budget.
    """
    while True:
        try:
            return run(tile)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            _free_cached()
            if user_tile:
                raise MemoryError(
                    f"{what}: a tile of {tile} rows did not fit in device memory; pass a smaller "
                    "tile= or leave it to the budget (hilbertgeom.gpu.set_tile_budget)"
                ) from exc
            if tile <= MIN_TILE:
                raise MemoryError(
                    f"{what}: even a {tile}-row tile did not fit in device memory (tile budget "
                    f"{tile_budget_bytes()} bytes); free device memory or lower the budget"
                ) from exc
            new = max(MIN_TILE, tile // 2)
            warnings.warn(
                f"{what}: a tile of {tile} rows did not fit in device memory "
                f"(budget {tile_budget_bytes()} bytes); retrying with {new} rows",
                TileWarning, stacklevel=3,
            )
            tile = new


def tf32_enabled(a=None) -> bool:
    """True when CuPy may run the float32 GEMMs on ``a`` on TF32 tensor cores.

    Asks CuPy for its compute type (set by ``CUPY_TF32=1`` or
    ``cupy._core.set_compute_type``); if that cannot be read, the environment
    variable decides.  Host arrays (the CPU tests) never use TF32.
    """
    cp = _cupy()
    if a is not None and (cp is None or not isinstance(a, cp.ndarray)):
        return False
    if cp is not None:
        try:
            from cupy._core import _routines_linalg as rl

            return rl.get_compute_type(cp.dtype("float32")) == rl.COMPUTE_TYPE_TF32
        except Exception:
            pass
    try:
        return int(os.environ.get("CUPY_TF32", "0").strip() or "0") > 0
    except ValueError:
        return False
