"""Reading the arrays an optimizer author hands to the assertions.

An assertion is not a kernel: it may copy a device array to the host once
(the checks run in float64 on the CPU).  Every value is widened exactly:
bfloat16 and float16 are subsets of float32, which is a subset of float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as _v

__all__: list[str] = []  # private module

# unit roundoff u = 2^-p of the formats an optimizer stores steps in
_UNIT = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
_DLPACK_CPU = 1


@dataclass(frozen=True)
class HostArray:
    """A float64 host copy (or view) of an input, and the format it came in."""

    array: np.ndarray
    dtype: str  # "float64", "float32", "float16", "bfloat16" (integers and bools count as exact: "float64")
    unit: float  # unit roundoff of ``dtype``
    library: str  # "numpy", "torch", "cupy", ...


def _dtype_name(dt) -> str:
    text = str(dt).replace("torch.", "")
    for name in ("bfloat16", "float16", "float32", "float64"):
        if text == name:
            return name
    if text in ("half",):
        return "float16"
    if text in ("float", "single"):
        return "float32"
    if text in ("double",):
        return "float64"
    return text


def _torch_to_numpy(x, name: str):
    """A torch tensor on any device: detached, widened exactly, on the host."""
    if x.is_complex():
        raise TypeError(f"{name} must be real; got complex dtype {x.dtype}")
    if getattr(x, "is_sparse", False) or str(getattr(x, "layout", "torch.strided")) != "torch.strided":
        raise TypeError(f"{name} must be a dense (strided) tensor; got layout {x.layout}")
    t = x.detach()  # a tensor that tracks gradients refuses to export its data
    if t.device.type != "cpu":
        t = t.cpu()  # one copy to the host: the checks run in float64 on the CPU
    if t.dtype.is_floating_point and t.dtype.itemsize < 4:
        t = t.float()  # bfloat16/float16 values are float32 values: exact
    t = t.resolve_conj().resolve_neg()
    return t.numpy()


def host_float64(x: Any, name: str) -> HostArray:
    """``x`` as a finite, real 2-D float64 NumPy array, with its original format.

    NumPy arrays and array_likes, torch tensors (CPU or CUDA; tensors that
    require grad are detached), CuPy arrays and other DLPack exporters.
    ``TypeError`` for complex or non-numeric data, ``ValueError`` (naming
    ``name``) for non-finite entries or a shape that is not ``(V, d)``.

    Parameters
    ----------
    x : (V, d) array_like, tensor or DLPack exporter
        The array, on the host or on a device (copied to the host once).
    name : str
        The argument's name, for the error messages.

    Returns
    -------
    HostArray
    """
    lib = type(x).__module__.split(".")[0]
    dtname = _dtype_name(getattr(x, "dtype", "float64"))
    if lib == "torch":
        a = _torch_to_numpy(x, name)
    elif lib == "cupy":
        try:  # DLPack 1.0: the producer copies to the host
            a = np.from_dlpack(x, device="cpu", copy=True)
        except (TypeError, ValueError, BufferError, RuntimeError, NotImplementedError):
            a = x.get()  # older CuPy: its own device-to-host copy
    elif isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        a = x
        if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":  # ml_dtypes
            a = x.astype(np.float32)
    else:
        dev = None
        try:
            dev = int(x.__dlpack_device__()[0])
        except (AttributeError, TypeError, ValueError, IndexError):
            dev = None
        if dev is not None and dev != _DLPACK_CPU:
            try:  # DLPack 1.0: ask the producer for a host copy
                a = np.from_dlpack(x, device="cpu", copy=True)
            except (TypeError, ValueError, BufferError, RuntimeError, NotImplementedError) as exc:
                raise TypeError(f"{name} lives on a device (DLPack device type {dev}) and could not be "
                                f"copied to the host ({exc}); move it to the CPU first") from None
        else:
            a = x
    if isinstance(a, np.ndarray) and a.dtype.kind not in "biufc":
        raise TypeError(f"{name} must have a real numeric dtype; got {a.dtype}")
    arr = _v.matrix(a, name)  # real, finite, 2-D, widened to float64 (exact)
    if isinstance(a, np.ndarray) and a.dtype.kind in "biu":
        dtname = "float64"
    unit = _UNIT.get(dtname, _UNIT["float64"])
    if dtname not in _UNIT:
        dtname = "float64"
    return HostArray(array=arr, dtype=dtname, unit=unit, library=lib)
