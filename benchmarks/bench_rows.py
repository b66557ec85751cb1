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

``--real``: the same kernels on real head gradients instead of Gaussian rows:
the tied head of all-MiniLM-L6-v2 at full vocabulary (V = 30,522, d = 384;
``hilbertgeom.gradients.real_head_gradient``, as shipped and after 20
head-only training steps), float64 and float32.  A few hundred large rows and
tens of thousands of tiny, nearly equal ones: the closest pair lies among
near-ties, where screening has the least room.  Each answer is checked against
the brute force ``pdist`` (float64, run once per gradient: 3.5 GiB of output)
and each kernel is timed against one GEMM ``S @ S.T`` of the same dtype.

Usage::

    python benchmarks/bench_rows.py            # the issue's sizes (~2 minutes)
    python benchmarks/bench_rows.py --quick    # small sizes, a smoke run
    python benchmarks/bench_rows.py --real     # the MiniLM gradients, full vocabulary (~10 minutes)
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


def _gemm_shape(S):
    return np.matmul(S, S.T).shape


def real(steps_list) -> None:
    """The kernels on the full-vocabulary MiniLM head gradients, checked against pdist."""
    from hilbertgeom import gradients as gr

    ok, why = gr.minilm_available()
    if not ok:
        raise SystemExit(f"--real needs the MiniLM wheel: {why}")
    for steps in steps_list:
        G = gr.real_head_gradient(batch=512, seed=0, train_steps=steps, verbose=False).G
        n = np.linalg.norm(G, axis=1)
        V, d = G.shape
        print(f"\n-- MiniLM head gradient, {'shipped' if steps == 0 else f'after {steps} training steps'}: "
              f"V = {V}, d = {d}; row norms {n.min():.2e} .. {n.max():.2e}, "
              f"{int(np.sum(n > 1e-2 * n.max()))} rows above 1% of the largest --")
        for dtype in (np.float64, np.float32):
            S = G.astype(dtype)
            # the brute force on the same rows (float32 ones widened exactly), once
            t_pd, D = timed(functools.partial(pdist, S.astype(np.float64)), repeat=1)
            want = {"row_diameter": float(D.max()), "closest_pair": float(D.min())}
            del D
            gemm = functools.partial(_gemm_shape, S)  # the V x V product, freed at once
            t_g, _ = timed(gemm, repeat=2)
            m_g = peak_mib(gemm)
            print(f"{np.dtype(dtype).name}: pdist {t_pd:.1f} s, GEMM S @ S.T {t_g:.2f} s")
            for name, fn in (("row_diameter", hg.row_diameter), ("closest_pair", hg.closest_pair)):
                t, val = timed(functools.partial(fn, S))
                got = val if isinstance(val, float) else val.distance
                # both are float64 distances of one pair, summed in different orders: a few ulps apart
                # unless the kernel missed the pair (not a tolerance: the same check as the Gaussian case)
                err = abs(got - want[name]) / max(want[name], np.finfo(float).tiny)
                print(f"  {name}: {got:.17g}  pdist {want[name]:.17g}  relative difference {err:.1e}")
                assert err <= 1e-13, (name, got, want[name])
                row(f"{name} {np.dtype(dtype).name}", t, "GEMM", t_g, peak_mib(functools.partial(fn, S)), m_g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--real", action="store_true", help="the MiniLM head gradients at full vocabulary")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}, numpy {np.__version__}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '-')}")
    if args.real:
        real((0, 20))
        return

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
