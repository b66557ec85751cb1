"""Decrease ratios of common update rules against the exact steepest direction, on
real LM-head gradients, with certified brackets.

For each gradient (the tied head of all-MiniLM-L6-v2 on CPython's documentation,
masked-LM cross-entropy, batch 512; optionally after a short head-only training
run so that predictions are confident) and each rule ``S``, the ratio

    rho(S) = -<G, S> / (D(S) T(G))

is 1 for the exact steepest direction under the row diameter ``D`` and at least
``sqrt((k+1)/(2k))`` for projected RowNorm (I16).  ``T(G)`` is bracketed by
``tension_bracket`` (a reduced solve, lifted with certified bounds) and by the
cheap ``tension_bounds``, which runs beside it as the peer: the script prints
both brackets, their widths' ratio, and ``tension_bounds``' time against one
float64 GEMM ``G G^T`` at full vocabulary.  ``--min-tension SECONDS`` also runs
the exact solver on the 4096-row cases with that time limit.  The ratio's
bracket is ``[decrease / (D upper), decrease / (D lower)]`` with the
intersection of all brackets.  Machine, sizes, times and peak memory are
printed with the table.

Usage::

    python benchmarks/bench_real_gradient.py                  # top 4096 rows (d = 32, 384) and V = 30522
    python benchmarks/bench_real_gradient.py --rows 1024 --dims 32 --no-full
    python benchmarks/bench_real_gradient.py --synthetic      # no download: synthetic_head_gradient
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


def bracket_line(G, args, label, gemm_s=None):
    """Both certified brackets on T(G), timed; returns their intersection."""
    t0 = time.perf_counter()
    b = hg.tension_bounds(G)
    t_b = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = hg.tension_bracket(G, rows=args.reduced, steps=args.steps, verbose=False)
    t_r = time.perf_counter() - t0
    vs_gemm = f"; {t_b / gemm_s:.2f}x one float64 GEMM G @ G.T ({gemm_s:.1f} s, same run)" if gemm_s else ""
    print(f"  tension_bounds {t_b:.1f} s: T in [{b.lower:.8g}, {b.upper:.8g}] (rel width "
          f"{(b.upper - b.lower) / b.lower:.1e}){vs_gemm}")
    print(f"  tension_bracket (reduced to {r.reduced_rows} rows, {r.steps} steps) {t_r:.1f} s: "
          f"T in [{r.lower:.8g}, {r.upper:.8g}] (rel width {r.relative_gap:.1e}; reduced flow "
          f"{r.reduced_cost:.8g}, spread {r.spread:.3g}); widths' ratio "
          f"{(b.upper - b.lower) / (r.upper - r.lower):.1f}; peak RSS {peak_gib():.2f} GiB")
    lo, hi = max(b.lower, r.lower), min(b.upper, r.upper)
    if args.min_tension and G.shape[0] <= 4096:
        t0 = time.perf_counter()
        res = hg.min_tension(G, tol=1e-6, time_limit=args.min_tension, verbose=False)
        print(f"  min_tension {time.perf_counter() - t0:.1f} s, status {res.status}: T in "
              f"[{res.value:.10g}, {res.flow.cost:.10g}] (rel gap {res.relative_gap:.1e})")
        lo, hi = max(lo, res.value), min(hi, res.flow.cost)
    table(G, (lo, hi), f"{label}: T in [{lo:.8g}, {hi:.8g}], rel width {(hi - lo) / lo:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096, help="the largest rows kept for the projected cases")
    ap.add_argument("--dims", type=int, nargs="+", default=[32, 384])
    ap.add_argument("--steps", type=int, default=200, help="reweighting steps of tension_bracket")
    ap.add_argument("--reduced", type=int, default=2048, help="rows of tension_bracket's reduced problem")
    ap.add_argument("--train-steps", type=int, nargs="+", default=[0, 20], help="head-only training steps")
    ap.add_argument("--min-tension", type=float, default=0.0, metavar="SECONDS",
                    help="also run min_tension on the 4096-row cases with this time limit")
    ap.add_argument("--no-full", action="store_true", help="skip the full vocabulary")
    ap.add_argument("--synthetic", action="store_true")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; python {platform.python_version()}, numpy {np.__version__}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for steps in args.train_steps if not args.synthetic else [0]:
        hgrad = load(args, steps)
        print(f"\n== {hgrad.source}: V = {hgrad.G.shape[0]}, d = {hgrad.G.shape[1]}, batch {hgrad.batch}, "
              f"head steps {steps}, loss {hgrad.loss:.4f} ==")
        for d in args.dims:
            G = project(gr.top_rows(hgrad.G, args.rows), d)
            print(f"\n-- top {G.shape[0]} rows, d = {G.shape[1]} --")
            bracket_line(G, args, "certified bracket")
        if not args.no_full:
            G = hgrad.G
            print(f"\n-- full vocabulary V = {G.shape[0]}, d = {G.shape[1]} --")
            t0 = time.perf_counter()
            for a in range(0, G.shape[0], 4096):  # G @ G.T in row blocks: the same flops, 1 GiB at a time
                G[a : a + 4096] @ G.T
            bracket_line(G, args, "certified bracket", gemm_s=time.perf_counter() - t0)


if __name__ == "__main__":
    main()
