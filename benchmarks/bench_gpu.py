"""GPU kernels against their peers, timed in the same run (needs CUDA and CuPy).

Sizes, peers and targets (issue "gpu"):

* ``row_diameter`` and ``closest_pair`` at V = 131,072, d = 4096, float32,
  against one cuBLAS GEMM of the same shape (``V x d`` times ``d x V``, in row
  blocks of 16,384 so that the ``V x V`` output need not exist; target
  <= 1.3x), and against ``cupyx.scipy.spatial.distance.cdist`` + ``max`` at the
  largest V whose ``V x V`` float64 output fits in a quarter of free memory;
* ``projected_rownorm`` at V = 262,144, d = 8192, float32, against a device
  copy of the same bytes (target <= 3x).

Also: RowNorm's traffic and each of its passes, the core's unfused kernel,
and ``row_diameter``, ``tension_bounds`` and ``projected_rownorm`` on a head
gradient's shape (V = 30,522, d = 384) against the core on the CPU.

Each line prints our time, the peer's, the ratio (ours / peer) and the peak
device memory of our call.  This is the benchmark half of
``python -m hilbertgeom.gpu.check``; the measured table, with the GPU model
and date, is kept on the GPU page of the docs.

Usage::

    python benchmarks/bench_gpu.py              # on a CUDA machine (about a minute on an H200)
    python benchmarks/bench_gpu.py --dry-run    # the same code on the CPU via NumPy, small sizes
"""

from __future__ import annotations

import sys

from hilbertgeom.gpu import check

if __name__ == "__main__":
    sys.exit(check.main(["--bench-only", *sys.argv[1:]]))
