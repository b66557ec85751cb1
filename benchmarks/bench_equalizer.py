"""The scalable equalizer at vocabulary-like size, against its starting point.

Projected RowNorm (the peer, the cheap rule the equalizer starts from) and
`equalize_rows` in the same run: smallest/largest row separation ratio,
decrease per unit diameter relative to RowNorm, and time.  The peer's time
is one projected-RowNorm evaluation plus the two exact kernels that measure it.

    python benchmarks/bench_equalizer.py          # V = 4096, d = 64 (~1 minute)
    python benchmarks/bench_equalizer.py --quick  # V = 512, d = 16
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import hilbertgeom as hg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    V, d = (512, 16) if args.quick else (4096, 64)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; numpy {np.__version__}; V = {V}, d = {d}")
    for name, G in hg.gradient_suite(V, d, seed=0).items():
        if name in ("simplex worst case", "rank one"):
            # rank one: RowNorm rows sit on two points (equal up to rounding), so every
            # pair is a near-tie for the exact kernels (slow) and equalizing costs decrease
            continue
        t0 = time.perf_counter()
        S = hg.projected_rownorm(G)
        rn_ratio = hg.closest_pair(S).distance / hg.row_diameter(S)
        t_rn = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = hg.equalize_rows(G, iters=40, keep=0.99)
        t_eq = time.perf_counter() - t0
        print(f"{name:<22} separation ratio {rn_ratio:.4f} -> {r.separation_ratio:.4f}   "
              f"efficiency {r.relative_efficiency:.4f}   time {t_eq:6.1f} s vs RowNorm {t_rn:5.2f} s "
              f"(ratio {t_eq / t_rn:.0f}x)   iterations {r.iterations}")


if __name__ == "__main__":
    main()
