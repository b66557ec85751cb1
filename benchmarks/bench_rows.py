"""Row kernels against their peers, timed in the same run.

For each size: our time, the peer's time, their ratio (ours / peer, lower is
better) and the peak extra memory (tracemalloc) of each.

Peers
-----
* ``scipy.spatial.distance.pdist`` followed by ``max`` / ``min`` of its output
  (float64; the exact brute force a user would otherwise write);
* one plain GEMM ``S @ S.T`` of the same shape and dtype (the arithmetic floor:
  the exact kernels do the symmetric half of it plus the re-check), and the
  same GEMM into a preallocated output (``out=``), which leaves out the cost
  of allocating and first touching the ``V x V`` result.

Times are the best of three runs (pdist: one run).

Targets (issue "core geometry"): ``>= 10x`` faster than pdist at V = 8192,
d = 512 (float64); ``<= 0.75x`` of one GEMM at V = 30,000, d = 384 (float32).

Usage::

    python benchmarks/bench_rows.py            # the issue's sizes (~2 minutes)
    python benchmarks/bench_rows.py --quick    # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import time
import tracemalloc

import numpy as np
from scipy.spatial.distance import pdist

import hilbertgeom as hg


def timed(fn, repeat: int = 3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def row(name, ours, peer_name, peer, mem_ours, mem_peer, target=None):
    ratio = ours / peer
    verdict = "" if target is None else f"  target <= {target:.2f}: {'met' if ratio <= target else 'MISSED'}"
    print(f"{name:<28} ours {ours:8.2f} s  {peer_name:<10} {peer:8.2f} s  ratio {ratio:6.3f}"
          f"  peak MiB ours {mem_ours:8.1f} / peer {mem_peer:8.1f}{verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}, numpy {np.__version__}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '-')}")

    V, d = (1024, 64) if args.quick else (8192, 512)
    S = rng.standard_normal((V, d))
    print(f"\n-- V = {V}, d = {d}, float64 --")
    t_pd, D = timed(lambda: pdist(S), repeat=1)
    m_pd = peak_mib(lambda: pdist(S))
    for name, fn, red in (("row_diameter", hg.row_diameter, np.max), ("closest_pair", hg.closest_pair, np.min)):
        t, val = timed(functools.partial(fn, S))
        ref = float(red(D))
        got = val if isinstance(val, float) else val.distance
        assert got == ref or abs(got - ref) <= 1e-13 * ref, (name, got, ref)
        row(name, t, "pdist", t_pd, peak_mib(functools.partial(fn, S)), m_pd, target=None if args.quick else 0.1)
    del D
    t_g, _ = timed(lambda: S @ S.T)
    row("row_diameter", timed(lambda: hg.row_diameter(S))[0], "GEMM", t_g,
        peak_mib(lambda: hg.row_diameter(S)), peak_mib(lambda: S @ S.T))

    V, d = (4096, 128) if args.quick else (30000, 384)
    S32 = rng.standard_normal((V, d)).astype(np.float32)
    print(f"\n-- V = {V}, d = {d}, float32 input (pdist skipped: {V * (V - 1) // 2 * 8 / 2**30:.1f} GiB output) --")
    t_g, _ = timed(lambda: S32 @ S32.T, repeat=2)
    m_g = peak_mib(lambda: S32 @ S32.T)
    # the same GEMM into a preallocated, already-touched output: arithmetic only
    buf = np.empty((V, V), dtype=np.float32)
    np.matmul(S32, S32.T, out=buf)
    t_o, _ = timed(functools.partial(np.matmul, S32, S32.T, out=buf), repeat=2)
    del buf
    for name, fn in (("row_diameter", hg.row_diameter), ("closest_pair", hg.closest_pair)):
        t, _ = timed(functools.partial(fn, S32))
        m = peak_mib(functools.partial(fn, S32))
        row(name, t, "GEMM", t_g, m, m_g, target=None if args.quick else 0.75)
        row(name, t, "GEMM(out=)", t_o, m, 0.0)


if __name__ == "__main__":
    main()
