"""min_tension's cluster refinement against its ALM on real head gradients.

For each case: ``min_tension(G, method="refine", tol=1e-6)``, then the ALM
(``method="alm"``) given the same wall-clock time, in the same run.  Printed:
each certified bracket, its relative gap, the time, peak RSS, and the ratio of
the two gaps at equal time.  Gradient: the tied head of all-MiniLM-L6-v2 on
CPython's reference documentation (``hilbertgeom.gradients.real_head_gradient``),
as shipped and after 20 head-only steps; its 4096 largest rows, re-centred, in
the gradient's ``d`` leading right singular directions.

With ``--bracket`` the peer is :func:`hilbertgeom.tension_bracket` instead of
the ALM (where the ALM cannot run: the full vocabulary): its certified width
beside refine's, and their ratio.

Usage::

    python benchmarks/bench_refine.py                # d = 32, both gradients
    python benchmarks/bench_refine.py --d 384 --time-limit 300 --no-alm
    python benchmarks/bench_refine.py --rows 30522 --d 384 --time-limit 3600 --bracket --steps 20 --verbose
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

import numpy as np

import hilbertgeom as hg
from hilbertgeom import gradients as gr
from hilbertgeom.exceptions import SolverError


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def project(G: np.ndarray, d: int) -> np.ndarray:
    """The rows in the gradient's ``d`` leading right singular directions, re-centred."""
    if d >= G.shape[1]:
        return G
    _, Q = np.linalg.eigh(G.T @ G)
    X = G @ Q[:, ::-1][:, :d]
    return X - X.mean(axis=0)


def solve(G, method, tol, limit, verbose=False):
    t0 = time.perf_counter()
    try:
        r = hg.min_tension(G, method=method, tol=tol, time_limit=limit, verbose=verbose)
    except SolverError as err:
        r = err.result
    return r, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds for refine (default 600)")
    ap.add_argument("--steps", type=int, nargs="+", default=[0, 20], help="head-only training steps")
    ap.add_argument("--no-alm", action="store_true", help="refine alone (the ALM's gap at d = 384 is in the docs)")
    ap.add_argument("--bracket", action="store_true", help="tension_bracket as the peer instead of the ALM")
    ap.add_argument("--verbose", action="store_true", help="refine's progress lines (one per round) on stderr")
    args = ap.parse_args()
    ok, why = gr.minilm_available()
    if not ok:
        raise SystemExit(f"the real gradient needs the MiniLM wheel: {why}")
    print(f"# {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}, numpy {np.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    peer = "tension_bracket" if args.bracket else "ALM, same time"
    print(f"| gradient | refine: T in | gap | time | {peer}: T in | gap | gap ratio {peer.split(',')[0]}/refine "
          "| peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for steps in args.steps:
        hgrad = gr.real_head_gradient(batch=512, seed=0, train_steps=steps, verbose=False)
        G = project(gr.top_rows(hgrad.G, args.rows), args.d)
        r, t = solve(G, "refine", args.tol, args.time_limit, args.verbose)
        case = f"{G.shape[0]} rows, d = {G.shape[1]}, steps {steps}"
        ref = (f"[{r.value:.9f}, {r.value + r.gap:.9f}] | {r.relative_gap:.1e} ({r.status}, {r.iterations} rounds) "
               f"| {t:.1f} s")
        if args.bracket:
            t0 = time.perf_counter()
            b = hg.tension_bracket(G, verbose=False)
            tb = time.perf_counter() - t0
            other = (f"[{b.lower:.6f}, {b.upper:.6f}] | {b.relative_gap:.1e} ({tb:.1f} s) | "
                    f"{b.relative_gap / max(r.relative_gap, 1e-300):.0f}")
        elif args.no_alm:
            other = "- | - | -"
        else:
            a, ta = solve(G, "alm", args.tol, t)
            case = f"{'shipped' if steps == 0 else f'trained ({steps} steps)'}, top {G.shape[0]}, d = {G.shape[1]}"
            other = (f"[{a.value:.6f}, {a.value + a.gap:.6f}] | {a.relative_gap:.1e} ({ta:.1f} s) | "
                    f"{a.relative_gap / max(r.relative_gap, 1e-300):.0f}")
        print(f"| {case} | {ref} | {other} | {peak_gib():.1f} GiB |", flush=True)


if __name__ == "__main__":
    main()
