"""Projected RowNorm in four light passes over ``G``: CUDA kernels and their NumPy reference.

The core's array-API kernel (:func:`hilbertgeom.tension.bounds._projected_rownorm`)
builds ``chunk x d`` float64 temporaries for every step: the column sums, the
absolute column sums, the row norms (a maximum, then a sum), the column sums of
``RN(P G)``, the output.  Here each step is one kernel that reads ``G`` once in
its own precision and keeps nothing of size ``V x d`` but the result:

1. :func:`column_sums` -- the column sums of ``G`` and of ``|G|`` (float64),
   summed by row blocks into ``blocks x d`` partials, the partials then summed
   by one reduction: deterministic, no atomics.  For float32 input they also
   tell whether every entry is finite (see :func:`projected_rownorm`).
2. :func:`norms_and_sums` -- (a) one warp per row: the norm of ``x = g - m``
   (float64) and the zero-row rule; (b) the column sums of ``x / ||x||`` over
   the kept rows, by block partials as in 1.
3. :func:`output` -- ``S = eta * (-(1/2) (N - mean N) + 0) + 0``, elementwise,
   written once in float64 (a block takes a run of rows of one column tile, so
   no index is divided).

Every element is formed by the core's own operations in the core's order
(``float64(g) - m``, ``/ n``, the signs and the ``+ 0.0`` that folds ``-0.0``);
only the sums (column sums, row norms, column sums of ``N``) are taken in
another order, and float32 rows' norms without the core's scaling by the
largest entry (needless there: no square of a float32 difference leaves
float64's range).  The differences this makes are bounded in
:func:`hilbertgeom.gpu.check.rownorm_matches`.  The NumPy functions below are
the reference of each pass, run by the CPU tests; the device check compares
the CUDA kernels with the core on the device.
"""

from __future__ import annotations

import functools

import array_api_compat
import numpy as np

from hilbertgeom import _validate as _v
from hilbertgeom.tension._results import _rownorms
from hilbertgeom.tension.bounds import _centring_noise, _nonzero_rows, _normalize

from . import _backend as _b

__all__: list[str] = []  # private module

_THREADS = 256  # threads per block of every kernel here (a multiple of the warp, 32)
_COL_BLOCKS = 4096  # about this many blocks in the column-sum pass: enough to fill the device
_WARPS = _THREADS // 32  # rows per block of the norm kernel (one warp each)

_SOURCE = r"""
// One warp per row: its norm as the core takes it, and the zero-row rule; no block barrier.
// HG_SCALED (float64 input): s = max |x| first, then s sqrt(sum (x/s)^2), as the core (squares of a
// float64 row could underflow).  float32 input: sqrt(sum x^2) in one read -- the squares of
// differences of float32 values and a float64 mean lie far inside float64's range.
extern "C" __global__ void hg_row_norms(const T* __restrict__ G, const double* __restrict__ m,
                                        long long V, int d, double cut, int centered,
                                        double* __restrict__ norms) {
    long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= V) return;                    // the whole warp leaves together
    const T* g = G + r * d;
    int raw = 0;
    double s = 0.0, n;
#if HG_SCALED
    double mx = 0.0;
#pragma unroll 8
    for (int c = lane; c < d; c += 32) {
        T v = g[c];
        raw |= (v != (T)0);
        mx = fmax(mx, fabs((double)v - m[c]));
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    double ms = mx > 0.0 ? mx : 1.0;
#pragma unroll 8
    for (int c = lane; c < d; c += 32) {
        double y = ((double)g[c] - m[c]) / ms;
        s += y * y;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    n = mx * sqrt(s);
#else
#pragma unroll 8
    for (int c = lane; c < d; c += 32) {
        T v = g[c];
        raw |= (v != (T)0);
        double x = (double)v - m[c];
        s += x * x;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    n = sqrt(s);
#endif
    raw = __any_sync(0xffffffffu, raw);
    if (lane == 0) norms[r] = (n > cut && (centered || raw)) ? n : 0.0;  // 0: the row counts as zero
}

extern "C" __global__ void hg_column_sums(const T* __restrict__ G, long long V, int d, long long rows,
                                          double* __restrict__ psum, double* __restrict__ pabs) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    long long r0 = (long long)blockIdx.y * rows, r1 = min(V, r0 + rows);
    double s = 0.0, a = 0.0;
#pragma unroll 8
    for (long long r = r0; r < r1; ++r) {
        double v = (double)G[r * d + c];
        s += v;
        a += fabs(v);
    }
    psum[(long long)blockIdx.y * d + c] = s;
    pabs[(long long)blockIdx.y * d + c] = a;
}

// Column sums of N = (g - m) / n over the kept rows (n > 0), by row blocks as hg_column_sums.
extern "C" __global__ void hg_sums_of_n(const T* __restrict__ G, const double* __restrict__ m,
                                        const double* __restrict__ norms, long long V, int d, long long rows,
                                        double* __restrict__ pN) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    long long r0 = (long long)blockIdx.y * rows, r1 = min(V, r0 + rows);
    double mc = m[c], a = 0.0;
#pragma unroll 8
    for (long long r = r0; r < r1; ++r) {
        double n = norms[r];
        if (n > 0.0) a += ((double)G[r * d + c] - mc) / n;
    }
    pN[(long long)blockIdx.y * d + c] = a;
}

// S = eta * (-(1/2) (N - mean N) + 0) + 0 with N = (g - m) / n on kept rows (n > 0), 0 elsewhere: the
// core's expression, operation for operation (a product plus 0.0 is that product, also when fused).
// Block (x, y): columns x*blockDim + tid of rows y*rows ... (no index division).
extern "C" __global__ void hg_output(const T* __restrict__ G, const double* __restrict__ m,
                                     const double* __restrict__ norms, const double* __restrict__ mN,
                                     long long V, int d, int rows, double eta, double* __restrict__ S) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    double mc = m[c], mnc = mN[c];
    long long r0 = (long long)blockIdx.y * rows, r1 = min(V, r0 + rows);
#pragma unroll 4
    for (long long r = r0; r < r1; ++r) {
        double n = norms[r];
        double N = n > 0.0 ? ((double)G[r * d + c] - mc) / n : 0.0;
        double s1 = -0.5 * (N - mnc) + 0.0;
        S[r * d + c] = eta * s1 + 0.0;
    }
}
"""

_OUT_ROWS = 16  # rows per block of the output pass (the grid's y extent stays below 65,536 up to V = 2^20)


@functools.cache
def _kernels(dtype_name: str):
    """The compiled kernels for one input precision (compiled once per process)."""
    cp = _b._cupy()  # the module itself (the namespace may be array-api-compat's wrapper)
    ctype, scaled = {"float32": ("float", 0), "float64": ("double", 1)}[dtype_name]
    head = f"#define T {ctype}\n#define HG_SCALED {scaled}\n"
    mod = cp.RawModule(code=head + _SOURCE, options=("-std=c++14",))
    return {f: mod.get_function(f) for f in ("hg_column_sums", "hg_row_norms", "hg_sums_of_n", "hg_output")}


def _is_cupy(xp) -> bool:
    """CuPy itself or array-api-compat's wrapper of it (what :mod:`hilbertgeom.gpu` gets)."""
    return array_api_compat.is_cupy_namespace(xp)


def fits(X, xp) -> bool:
    """Can the fused path take ``X``: a C-contiguous CuPy matrix."""
    return _is_cupy(xp) and X.ndim == 2 and X.flags.c_contiguous


def _column_grid(V: int, d: int) -> tuple[int, int, int]:
    """``(column tiles, rows per block, row blocks)`` of the column passes: ``d`` columns in
    tiles of a block's threads, ``V`` rows in about ``_COL_BLOCKS / tiles`` runs."""
    tiles = -(-d // _THREADS)
    rows = max(1, -(-V // max(1, _COL_BLOCKS // tiles)))
    return tiles, rows, -(-V // rows)


# --------------------------------------------------------------------------- pass 1
def column_sums(X, xp):
    """Column sums of ``X`` and of ``|X|`` in float64 (pass 1)."""
    V, d = X.shape
    xb, rows, nb = _column_grid(V, d)
    if not _is_cupy(xp):  # the NumPy reference: the same row blocks, the same partials
        C = [np.asarray(X[a : a + rows], dtype=np.float64) for a in range(0, V, rows)]
        return (np.sum([np.sum(c, axis=0) for c in C], axis=0),
                np.sum([np.sum(np.abs(c), axis=0) for c in C], axis=0))
    k_sum = _kernels(X.dtype.name)["hg_column_sums"]
    psum = xp.empty((nb, d), dtype=xp.float64)
    pabs = xp.empty((nb, d), dtype=xp.float64)
    k_sum((xb, nb), (_THREADS,), (X, np.int64(V), np.int32(d), np.int64(rows), psum, pabs))
    return xp.sum(psum, axis=0), xp.sum(pabs, axis=0)


# --------------------------------------------------------------------------- pass 2
def norms_and_sums(X, m, cut: float, centered: bool, xp):
    """``(n, sum N)``: the row norms of ``X - m`` (0 on rows that count as zero) and the
    column sums of ``N = (X - m) / n`` over the kept rows (pass 2)."""
    V, d = X.shape
    xb, rows, nb = _column_grid(V, d)
    if not _is_cupy(xp):
        n_all, parts = [], []
        for a in range(0, V, rows):
            raw = X[a : a + rows]
            x = np.asarray(raw, dtype=np.float64) - m
            n = _rownorms(x)
            keep = _nonzero_rows(raw, n, cut, centered)
            n = np.where(keep, n, 0.0)
            parts.append(np.sum(x[keep] / n[keep, None], axis=0) if keep.any() else np.zeros(d))
            n_all.append(n)
        return np.concatenate(n_all), np.sum(parts, axis=0)
    k = _kernels(X.dtype.name)
    norms = xp.empty(V, dtype=xp.float64)
    k["hg_row_norms"]((-(-V // _WARPS),), (_THREADS,),
                      (X, m, np.int64(V), np.int32(d), np.float64(cut), np.int32(bool(centered)), norms))
    pN = xp.empty((nb, d), dtype=xp.float64)
    k["hg_sums_of_n"]((xb, nb), (_THREADS,), (X, m, norms, np.int64(V), np.int32(d), np.int64(rows), pN))
    return norms, xp.sum(pN, axis=0)


# --------------------------------------------------------------------------- pass 3
def output(X, m, n, mN, eta: float, xp):
    """``eta (-(1/2) (N - mean N) + 0) + 0``, float64 (pass 3)."""
    if not _is_cupy(xp):
        N = _normalize(np.asarray(X, dtype=np.float64) - m[None, :], n, n > 0)
        return eta * (-0.5 * (N - mN[None, :]) + 0.0) + 0.0
    k_out = _kernels(X.dtype.name)["hg_output"]
    V, d = X.shape
    rows = max(_OUT_ROWS, -(-V // 65535))  # the grid's y extent is at most 65,535
    S = xp.empty((V, d), dtype=xp.float64)
    k_out((-(-d // _THREADS), -(-V // rows)), (_THREADS,),
          (X, m, n, mN, np.int64(V), np.int32(d), np.int32(rows), np.float64(eta), S))
    return S


def projected_rownorm(X, xp, center: bool, eta: float, eps: float, check=None):
    """``(S, (1/2) sum_i ||g_i||)`` for a validated unit-size ``X``: the core's
    ``_projected_rownorm(X, xp, center, 1.0, eps, True)`` then times ``eta``, in the
    passes above (the zero-sum rule, the centring noise and the zero-row rule
    are the core's).

    ``check``: the finiteness check of ``X``, run only when a column sum is not
    finite.  For float32 ``X`` that is exact: a float64 sum of ``V < 2^60``
    float32 magnitudes (each below ``2^128``) cannot overflow, so the sums are
    finite exactly when every entry is; the caller may then skip its own pass
    over ``X``."""
    V = X.shape[0]
    col, absum = column_sums(X, xp)
    if check is not None and not bool(xp.all(xp.isfinite(absum))):
        check()  # raises the usual error, with the count of NaN/inf entries
    mean = _v.zero_sum_check(col, absum, V, center, xp)
    cut = max(eps, _centring_noise(X, xp, absum=absum))
    n, sumN = norms_and_sums(X, mean, cut, center, xp)
    S = output(X, mean, n, sumN / V, eta, xp)
    return S, 0.5 * float(xp.sum(n))


def expected_traffic(V: int, d: int, itemsize: int) -> float:
    """Bytes moved from and to device memory by the passes: ``G`` read four times, the
    float64 result written once (the partials are ``O(blocks d)``)."""
    return float((4 * itemsize + 8) * V * d)
