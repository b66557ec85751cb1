"""A NumPy-only reader for the safetensors format (no torch, no safetensors package).

Layout (https://github.com/huggingface/safetensors, "Format"): an 8-byte
little-endian unsigned header length ``N``; ``N`` bytes of UTF-8 JSON mapping
each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
relative to the first byte after the header) plus an optional ``__metadata__``
dict of strings; then the raw little-endian, C-ordered tensor bytes.
"""

from __future__ import annotations

import json
import struct

import numpy as np

# safetensors dtype names -> little-endian NumPy dtypes (BF16 is widened by hand)
_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "?", "BF16": "<u2",
}

_MAX_HEADER = 100_000_000  # the format's own limit on the JSON header


def parse_header(buf) -> tuple[dict, int]:
    """The JSON header of a safetensors buffer and the offset where the data start."""
    mv = memoryview(buf)
    if len(mv) < 8:
        raise ValueError(f"safetensors data too short ({len(mv)} bytes) to hold the 8-byte header length")
    (n,) = struct.unpack("<Q", mv[:8])
    if n > _MAX_HEADER or 8 + n > len(mv):
        raise ValueError(f"safetensors header length {n} is invalid for a buffer of {len(mv)} bytes")
    try:
        header = json.loads(bytes(mv[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"safetensors header is not valid UTF-8 JSON: {exc}") from None
    if not isinstance(header, dict):
        raise TypeError("safetensors header must be a JSON object")
    return header, 8 + n


def read_safetensors(buf, names=None) -> dict[str, np.ndarray]:
    """Tensors of a safetensors buffer (``bytes``, ``memoryview`` or ``np.memmap``).

    Parameters
    ----------
    buf : bytes-like
        The whole file.
    names : iterable of str, optional
        Read only these tensors (all by default).

    Returns
    -------
    dict
        ``name -> ndarray`` in native byte order (``BF16`` widened to float32),
        copied out of ``buf``.
    """
    header, start = parse_header(buf)
    data = memoryview(buf)[start:]
    wanted = None if names is None else set(names)
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or (wanted is not None and name not in wanted):
            continue
        try:
            dt, shape, (lo, hi) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"safetensors entry {name!r} lacks dtype/shape/data_offsets") from None
        if dt not in _DTYPES:
            raise ValueError(f"safetensors entry {name!r} has unsupported dtype {dt!r}")
        np_dt = np.dtype(_DTYPES[dt])
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= lo <= hi <= len(data)) or hi - lo != count * np_dt.itemsize:
            raise ValueError(f"safetensors entry {name!r}: offsets [{lo}, {hi}) do not fit "
                             f"shape {shape} of {dt} in {len(data)} data bytes")
        a = np.frombuffer(data[lo:hi], dtype=np_dt, count=count).reshape(shape)
        if dt == "BF16":  # the upper half of a float32
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np_dt.newbyteorder("=") if dt != "BF16" else np.float32, copy=True)
    if wanted is not None and wanted - out.keys():
        raise KeyError(f"safetensors buffer has no tensor(s) {sorted(wanted - out.keys())}")
    return out
