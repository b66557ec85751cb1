"""Row kernels against their peers, timed in the same run.

For each size: our time, the peer's time, their ratio (ours / peer, lower is
better) and the peak extra memory (tracemalloc) of each.

Peers
-----
* ``scipy.spatial.distance.pdist`` followed by ``max`` / ``min`` of its output
  (float64; the exact brute force a user would otherwise write);
* the product ``S @ S.T`` of the same shape and dtype (the arithmetic floor:
  the exact kernels do the symmetric half of it plus the re-check), computed
  as its lower half in blocks of 4096 rows, ``S[a:b] @ S[:b].T``, and the
  same into a preallocated ``V x V`` output (``out=``), which leaves out the
  cost of allocating and first touching the result.  Not one plain
  ``S @ S.T``: NumPy sends that to OpenBLAS's ``syrk``, which with the
  SkylakeX kernels that OpenBLAS 0.3.31 (NumPy 2.4.6's wheel) picks on AVX-512
  machines crashes with a segmentation fault from about V = 16,000 at
  d = 384 (float64) and at V = 30,000 (float32), numpy issue 19685.  Where it
  runs (V = 14,000, d = 384), the blocked half took 0.98 s against
  ``syrk``'s 1.16 s (float64) and 0.53 s against 0.76 s (float32): a peer at
  least as fast.

Times are the best of three runs (pdist: one run).

Targets (issue "core geometry"): ``>= 10x`` faster than pdist at V = 8192,
d = 512 (float64); ``<= 0.75x`` of one plain ``S @ S.T`` at V = 30,000,
d = 384 (float32).  That product is the one that crashes on AVX-512 machines
(above), so the second target is not judged here: the ratios against the
blocked half, which does the kernels' arithmetic without their ``V x V``
output, are printed instead.

``--real``: the same kernels on real head gradients instead of Gaussian rows:
the tied head of all-MiniLM-L6-v2 at full vocabulary (V = 30,522, d = 384;
``hilbertgeom.gradients.real_head_gradient``, as shipped and after 20
head-only training steps), float64 and float32.  A few hundred large rows and
tens of thousands of tiny, nearly equal ones: the closest pair lies among
near-ties, where screening has the least room.  Each answer is checked against
the brute force ``pdist`` (in float64, once per gradient and dtype: 3.5 GiB of output)
and each kernel is timed against the blocked half of ``S @ S.T`` (above) in the same dtype.

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


def sym_product(S, out=None, block: int = 4096):
    """``S @ S.T``'s lower half by row blocks (GEMM, never OpenBLAS's ``syrk``: see above)."""
    V = S.shape[0]
    for a in range(0, V, block):
        b = min(V, a + block)
        if out is None:
            S[a:b] @ S[:b].T
        else:
            np.matmul(S[a:b], S[:b].T, out=out[a:b, :b])


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
            gemm = functools.partial(sym_product, S)
            t_g, _ = timed(gemm, repeat=2)
            m_g = peak_mib(gemm)
            print(f"{np.dtype(dtype).name}: pdist {t_pd:.1f} s, S @ S.T (blocked half) {t_g:.2f} s")
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
    t_g, _ = timed(functools.partial(sym_product, S))
    row("row_diameter", timed(lambda: hg.row_diameter(S))[0], "GEMM", t_g,
        peak_mib(lambda: hg.row_diameter(S)), peak_mib(functools.partial(sym_product, S)))

    V, d = (4096, 128) if args.quick else (30000, 384)
    S32 = rng.standard_normal((V, d)).astype(np.float32)
    print(f"\n-- V = {V}, d = {d}, float32 input (pdist skipped: {V * (V - 1) // 2 * 8 / 2**30:.1f} GiB output) --")
    t_g, _ = timed(functools.partial(sym_product, S32), repeat=2)
    m_g = peak_mib(functools.partial(sym_product, S32))
    # the same products into a preallocated, already-touched output: arithmetic only
    buf = np.zeros((V, V), dtype=np.float32)
    t_o, _ = timed(functools.partial(sym_product, S32, buf), repeat=2)
    del buf
    for name, fn in (("row_diameter", hg.row_diameter), ("closest_pair", hg.closest_pair)):
        t, _ = timed(functools.partial(fn, S32))
        m = peak_mib(functools.partial(fn, S32))
        row(name, t, "GEMM", t_g, m, m_g)
        row(name, t, "GEMM(out=)", t_o, m, 0.0)


if __name__ == "__main__":
    main()
