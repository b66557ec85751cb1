"""Decrease ratios of common update rules against the exact steepest direction, on
real LM-head gradients, with certified brackets.

For each gradient (the tied head of all-MiniLM-L6-v2 on CPython's documentation,
masked-LM cross-entropy, batch 512; optionally after a short head-only training
run so that predictions are confident) and each rule ``S``, the ratio

    rho(S) = -<G, S> / (D(S) T(G))

is 1 for the exact steepest direction under the row diameter ``D`` and at least
``sqrt((k+1)/(2k))`` for projected RowNorm (I16).  ``T(G)`` is bracketed by a
certified solve of ``min_tension`` (``[value, flow.cost]``; a ``--time-limit``
returns the best bracket so far), or on the full vocabulary by
``tension_bounds`` when no solve is asked for; the ratio's bracket is
``[decrease / (D upper), decrease / (D lower)]``.  Machine, sizes, times and
peak memory are printed with the table.

Usage::

    python benchmarks/bench_real_gradient.py                     # top 4096 rows, d = 32 (projected) and 384
    python benchmarks/bench_real_gradient.py --rows 1024 --dims 32
    python benchmarks/bench_real_gradient.py --full              # also V = 30522 with tension_bounds only
    python benchmarks/bench_real_gradient.py --synthetic         # no download: synthetic_head_gradient
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import time

import numpy as np

import hilbertgeom as hg
from hilbertgeom import gradients as gr

RULES = ["projected RowNorm", "RowNorm", "Sign", "polar (Muon)", "l_inf-diameter sign"]


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def project(G: np.ndarray, d: int) -> np.ndarray:
    """The rows in the gradient's ``d`` leading right singular directions (the
    largest share of G that fits in d columns), re-centred."""
    if d >= G.shape[1]:
        return G
    _, Q = np.linalg.eigh(G.T @ G)
    X = G @ Q[:, ::-1][:, :d]
    return X - X.mean(axis=0)


def load(args, steps: int):
    if args.synthetic:
        return gr.synthetic_head_gradient(30522, 384, batch=512, seed=0)
    ok, why = gr.minilm_available()
    if not ok:
        raise SystemExit(f"the real gradient needs the MiniLM wheel: {why}; run with --synthetic")
    return gr.real_head_gradient(batch=512, seed=0, train_steps=steps, verbose=False)


def table(G, bracket, label):
    lo, hi = bracket
    k = np.linalg.matrix_rank(G)
    rules = hg.update_rules()
    guarantee = math.sqrt((k + 1) / (2 * k))
    print(f"  {'rule':<22} {'ratio (certified bracket)':<30}  guarantee sqrt((k+1)/2k) = {guarantee:.4f} (k = {k})")
    for name in RULES:
        S = np.asarray(rules[name](G), dtype=np.float64)
        S = S - S.mean(axis=0)
        D = hg.row_diameter(S)
        dec = -float(np.sum(G * S))
        r_lo, r_hi = dec / (D * hi), dec / (D * lo)
        print(f"  {name:<22} [{r_lo:.4f}, {r_hi:.4f}]")
    print(f"  ({label})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--dims", type=int, nargs="+", default=[32, 384])
    ap.add_argument("--steps", type=int, nargs="+", default=[0, 20], help="head-only training steps")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per min_tension solve")
    ap.add_argument("--full", action="store_true", help="also the full vocabulary (tension_bounds bracket)")
    ap.add_argument("--only-full", action="store_true", help="the full vocabulary only")
    ap.add_argument("--synthetic", action="store_true")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; python {platform.python_version()}, numpy {np.__version__}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for steps in args.steps if not args.synthetic else [0]:
        hgrad = load(args, steps)
        print(f"\n== {hgrad.source}: V = {hgrad.G.shape[0]}, d = {hgrad.G.shape[1]}, batch {hgrad.batch}, "
              f"head steps {steps}, loss {hgrad.loss:.4f} ==")
        for d in [] if args.only_full else args.dims:
            G = project(gr.top_rows(hgrad.G, args.rows), d)
            print(f"\n-- top {G.shape[0]} rows, d = {G.shape[1]} --")
            t0 = time.perf_counter()
            b = hg.tension_bounds(G)
            t_b = time.perf_counter() - t0
            t0 = time.perf_counter()
            res = hg.min_tension(G, tol=1e-6, time_limit=args.time_limit, verbose=False)
            t_s = time.perf_counter() - t0
            print(f"  tension_bounds {t_b:.2f} s: T in [{b.lower:.8g}, {b.upper:.8g}]; min_tension {t_s:.1f} s, "
                  f"status {res.status}: T in [{res.value:.10g}, {res.flow.cost:.10g}] "
                  f"(rel gap {res.relative_gap:.1e}); peak RSS {peak_gib():.2f} GiB")
            lo, hi = max(res.value, b.lower), min(res.flow.cost, b.upper)
            table(G, (lo, hi), f"bracket T in [{lo:.8g}, {hi:.8g}]: min_tension and tension_bounds, both certified")
        if args.full or args.only_full:
            G = hgrad.G
            t0 = time.perf_counter()
            b = hg.tension_bounds(G)
            t_b = time.perf_counter() - t0
            t0 = time.perf_counter()
            for a in range(0, G.shape[0], 4096):  # G @ G.T in row blocks: the same flops, 1 GiB at a time
                G[a : a + 4096] @ G.T
            t_g = time.perf_counter() - t0
            print(f"\n-- full vocabulary V = {G.shape[0]}, d = {G.shape[1]} --")
            print(f"  tension_bounds {t_b:.1f} s, one float64 GEMM G @ G.T (in row blocks) {t_g:.1f} s, "
                  f"ratio {t_b / t_g:.2f}; "
                  f"T in [{b.lower:.8g}, {b.upper:.8g}] ({b.upper_source}); peak RSS {peak_gib():.2f} GiB")
            table(G, (b.lower, b.upper), "bracket from tension_bounds only: wide")


if __name__ == "__main__":
    main()
