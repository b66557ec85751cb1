"""Projected RowNorm in three passes over ``G``: CUDA kernels and their NumPy reference.

The core's array-API kernel (:func:`hilbertgeom.tension.bounds._projected_rownorm`)
reads ``G`` many times: the column sums, the absolute column sums, the row
norms (a maximum, then a sum), the column sums of ``RN(P G)``, then the output,
each through ``chunk x d`` float64 temporaries.  Here the same arithmetic is
grouped into three passes over ``G``, each reading it once in its own precision:

1. :func:`column_sums` -- the column sums of ``G`` and of ``|G|`` (float64),
   summed by row blocks into ``blocks x d`` partials, the partials then summed
   by one reduction: deterministic, no atomics.
2. :func:`norms_and_sums` -- for each row ``x = g - m`` (float64), its norm as
   the core takes it (``s = max |x|``, then ``s sqrt(sum (x/s)^2)``), the
   zero-row rule, and the column sums of ``x / ||x||`` over the kept rows, again
   by block partials.  One thread block takes a run of rows; each row is read
   from memory once, its second and third reads come from the cache.
3. :func:`output` -- ``S = eta * (-(1/2) (N - mean N) + 0) + 0``, elementwise,
   written once in float64 (a block takes a run of rows of one column tile, so
   no index is divided).

Every element is formed by the core's own operations in the core's order
(``float64(g) - m``, ``/ s``, ``/ n``, the signs and the ``+ 0.0`` that folds
``-0.0``); only the order of the sums (column sums, row norms, column sums of
``N``) differs, so the result equals the core's to a few ulps.  The NumPy
functions below are the reference of each pass, run by the CPU tests; the
device check compares the CUDA kernels with the core on the device.
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
_ROW_BLOCKS = 2048  # blocks (runs of rows) in the norm pass; its partials are _ROW_BLOCKS x d
MAX_SHARED = 227 * 1024  # bytes of shared memory one block may use on Hopper (sm_90), opt-in
_STATIC_SHARED = 2048  # bytes reserved for the kernels' own shared arrays (4 x 33 doubles used)

_SOURCE = r"""
#define HG_R 4  // rows a block takes at once: 4x the loads in flight, a quarter of the barriers

// Reduce v[0..HG_R) over the block (max or sum); every thread gets the results.
__device__ __forceinline__ void hg_block_reduce(double* v, double* red, bool take_max) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int q = 0; q < HG_R; ++q)
        for (int o = 16; o > 0; o >>= 1) {
            double w = __shfl_down_sync(0xffffffffu, v[q], o);
            v[q] = take_max ? fmax(v[q], w) : v[q] + w;
        }
    __syncthreads();                       // red[] may still be read from the last call
    if (lane == 0)
        for (int q = 0; q < HG_R; ++q) red[q * 33 + wid] = v[q];
    __syncthreads();
    if (wid == 0) {
#pragma unroll
        for (int q = 0; q < HG_R; ++q) {
            double x = (lane < nw) ? red[q * 33 + lane] : 0.0;  // 0 is neutral: maxima of |x| >= 0
            for (int o = 16; o > 0; o >>= 1) {
                double w = __shfl_down_sync(0xffffffffu, x, o);
                x = take_max ? fmax(x, w) : x + w;
            }
            if (lane == 0) red[q * 33 + 32] = x;
        }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < HG_R; ++q) v[q] = red[q * 33 + 32];
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

extern "C" __global__ void hg_norms_and_sums(const T* __restrict__ G, const double* __restrict__ m,
                                             long long V, int d, long long rows, double cut, int centered,
                                             double* __restrict__ norms, double* __restrict__ pN) {
    extern __shared__ double acc[];        // d column sums of N for this block's rows
    __shared__ double red[HG_R * 33];
    int tid = threadIdx.x, nt = blockDim.x;
    for (int c = tid; c < d; c += nt) acc[c] = 0.0;  // each thread owns the columns c = tid mod nt
    long long r0 = (long long)blockIdx.x * rows, r1 = min(V, r0 + rows);
    for (long long r = r0; r < r1; r += HG_R) {
        int nr = (int)min((long long)HG_R, r1 - r);
        const T* g = G + r * d;
        double mx[HG_R], raw[HG_R], s[HG_R], n[HG_R];
#pragma unroll
        for (int q = 0; q < HG_R; ++q) mx[q] = raw[q] = s[q] = 0.0;
        for (int c = tid; c < d; c += nt) {
            double mc = m[c];
#pragma unroll
            for (int q = 0; q < HG_R; ++q)
                if (q < nr) {
                    T v = g[(long long)q * d + c];
                    raw[q] = (v != (T)0) ? 1.0 : raw[q];
                    mx[q] = fmax(mx[q], fabs((double)v - mc));
                }
        }
        hg_block_reduce(mx, red, true);
        hg_block_reduce(raw, red, true);
        double ms[HG_R];
#pragma unroll
        for (int q = 0; q < HG_R; ++q) ms[q] = mx[q] > 0.0 ? mx[q] : 1.0;
        for (int c = tid; c < d; c += nt) {
            double mc = m[c];
#pragma unroll
            for (int q = 0; q < HG_R; ++q)
                if (q < nr) {
                    double y = ((double)g[(long long)q * d + c] - mc) / ms[q];
                    s[q] += y * y;
                }
        }
        hg_block_reduce(s, red, false);
#pragma unroll
        for (int q = 0; q < HG_R; ++q) {
            double nq = mx[q] * sqrt(s[q]);
            n[q] = (q < nr && nq > cut && (centered || raw[q] > 0.0)) ? nq : 0.0;  // 0: the row counts as zero
            if (tid == 0 && q < nr) norms[r + q] = n[q];
        }
        for (int c = tid; c < d; c += nt) {
            double mc = m[c], a = acc[c];
#pragma unroll
            for (int q = 0; q < HG_R; ++q)
                if (n[q] > 0.0) a += ((double)g[(long long)q * d + c] - mc) / n[q];
            acc[c] = a;
        }
    }
    for (int c = tid; c < d; c += nt) pN[(long long)blockIdx.x * d + c] = acc[c];
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
    ctype = {"float32": "float", "float64": "double"}[dtype_name]
    mod = cp.RawModule(code="#define T " + ctype + "\n" + _SOURCE, options=("-std=c++14",))
    return tuple(mod.get_function(f) for f in ("hg_column_sums", "hg_norms_and_sums", "hg_output"))


def _is_cupy(xp) -> bool:
    """CuPy itself or array-api-compat's wrapper of it (what :mod:`hilbertgeom.gpu` gets)."""
    return array_api_compat.is_cupy_namespace(xp)


def fits(X, xp) -> bool:
    """Can the fused path take ``X``: CuPy, C-contiguous, and ``d`` float64 column sums
    of one block within the shared memory of a block."""
    return (_is_cupy(xp) and X.ndim == 2 and X.flags.c_contiguous
            and X.shape[1] * 8 + _STATIC_SHARED <= MAX_SHARED)


def _blocks(n: int, target: int) -> tuple[int, int]:
    """``(rows per block, blocks)`` splitting ``n`` rows into about ``target`` runs."""
    rows = max(1, -(-n // max(1, target)))
    return rows, -(-n // rows)


# --------------------------------------------------------------------------- pass 1
def column_sums(X, xp):
    """Column sums of ``X`` and of ``|X|`` in float64 (pass 1)."""
    V, d = X.shape
    if not _is_cupy(xp):  # the NumPy reference: the same row blocks, the same partials
        rows, _ = _blocks(V, max(1, _COL_BLOCKS // -(-d // _THREADS)))
        C = [np.asarray(X[a : a + rows], dtype=np.float64) for a in range(0, V, rows)]
        return (np.sum([np.sum(c, axis=0) for c in C], axis=0),
                np.sum([np.sum(np.abs(c), axis=0) for c in C], axis=0))
    k_sum = _kernels(X.dtype.name)[0]
    xb = -(-d // _THREADS)
    rows, nb = _blocks(V, max(1, _COL_BLOCKS // xb))
    psum = xp.empty((nb, d), dtype=xp.float64)
    pabs = xp.empty((nb, d), dtype=xp.float64)
    k_sum((xb, nb), (_THREADS,), (X, np.int64(V), np.int32(d), np.int64(rows), psum, pabs))
    return xp.sum(psum, axis=0), xp.sum(pabs, axis=0)


# --------------------------------------------------------------------------- pass 2
def norms_and_sums(X, m, cut: float, centered: bool, xp):
    """``(n, sum N)``: the row norms of ``X - m`` (0 on rows that count as zero) and the
    column sums of ``N = (X - m) / n`` over the kept rows (pass 2)."""
    V, d = X.shape
    if not _is_cupy(xp):
        rows, _ = _blocks(V, _ROW_BLOCKS)
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
    k_norm = _kernels(X.dtype.name)[1]
    rows, nb = _blocks(V, _ROW_BLOCKS)
    shared = 8 * d
    k_norm.max_dynamic_shared_size_bytes = shared  # above 48 KiB a block must opt in (sm_70 and later)
    norms = xp.empty(V, dtype=xp.float64)
    pN = xp.empty((nb, d), dtype=xp.float64)
    k_norm((nb,), (_THREADS,), (X, m, np.int64(V), np.int32(d), np.int64(rows), np.float64(cut),
                               np.int32(bool(centered)), norms, pN), shared_mem=shared)
    return norms, xp.sum(pN, axis=0)


# --------------------------------------------------------------------------- pass 3
def output(X, m, n, mN, eta: float, xp):
    """``eta (-(1/2) (N - mean N) + 0) + 0``, float64 (pass 3)."""
    if not _is_cupy(xp):
        N = _normalize(np.asarray(X, dtype=np.float64) - m[None, :], n, n > 0)
        return eta * (-0.5 * (N - mN[None, :]) + 0.0) + 0.0
    k_out = _kernels(X.dtype.name)[2]
    V, d = X.shape
    rows = max(_OUT_ROWS, -(-V // 65535))  # the grid's y extent is at most 65,535
    S = xp.empty((V, d), dtype=xp.float64)
    k_out((-(-d // _THREADS), -(-V // rows)), (_THREADS,),
          (X, m, n, mN, np.int64(V), np.int32(d), np.int32(rows), np.float64(eta), S))
    return S


def projected_rownorm(X, xp, center: bool, eta: float, eps: float, check=None):
    """``(S, (1/2) sum_i ||g_i||)`` for a validated unit-size ``X``: the core's
    ``_projected_rownorm(X, xp, center, 1.0, eps, True)`` then times ``eta``, in the
    three passes above (the zero-sum rule, the centring noise and the zero-row rule
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
    """Bytes moved from and to device memory by the three passes: ``G`` read three
    times, the float64 result written once (the partials are ``O(blocks d)``)."""
    return float((3 * itemsize + 8) * V * d)
