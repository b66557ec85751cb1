"""Equalization benchmarks: the scalable equalizer, the certified equalized
descent, and the memory model behind its size guard.

Default: `equalize_rows` at vocabulary-like size against its starting point,
projected RowNorm (the peer, the cheap rule it starts from), in the same run:
smallest/largest row separation ratio, decrease per unit diameter relative to
RowNorm, and time.  The peer's time is one projected-RowNorm evaluation plus
the two exact kernels that measure it.

`--exact`: `equalized_descent` (Shor SDP + convex-concave local search)
against the previous approach (the same SDP, then SLSQP from the relaxation,
RowNorm and four random starts) and against the cvxpy SDP alone, in the same
run: time, ratio and certified relative gap.

`--real`: `equalize_rows` on real head gradients (the tied head of
all-MiniLM-L6-v2, `hilbertgeom.gradients.real_head_gradient`, as shipped and
after 20 head-only training steps; `--rows` largest rows, default the full
vocabulary, at the model's d = 384), against projected RowNorm as above.
There RowNorm maps tens of thousands of tiny, nearly parallel tail rows to
nearly one point, the hardest start for the equalizer and its
nearest-neighbour search.

`--memory`: the size guard's estimate of the SDP's memory need against the
peak resident memory measured in a fresh process per size.

    python benchmarks/bench_equalizer.py            # V = 4096, d = 64 (~1 minute)
    python benchmarks/bench_equalizer.py --quick    # V = 512, d = 16
    python benchmarks/bench_equalizer.py --exact    # V = 10, 20 (~3 minutes)
    python benchmarks/bench_equalizer.py --memory   # V = 10..80 (~2 minutes)
    python benchmarks/bench_equalizer.py --real --iters 10   # V = 30522, d = 384
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

import hilbertgeom as hg
from hilbertgeom import equalize as eq


def machine() -> str:
    mem = eq._physical_memory()
    return (f"machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"{mem / 2**30:.0f} GiB; numpy {np.__version__}" if mem else f"machine: {platform.machine()}")


def bench_rows(quick: bool) -> None:
    V, d = (512, 16) if quick else (4096, 64)
    print(f"{machine()}; V = {V}, d = {d}")
    for name, G in hg.gradient_suite(V, d, seed=0).items():
        if name in ("simplex worst case", "rank one"):
            # rank one: RowNorm rows sit on two points (equal up to rounding), so every
            # pair is a near-tie for the exact kernels (slow) and equalizing costs decrease
            continue
        report(name, G, 40)


def bench_real(rows: int | None, iters: int) -> None:
    from hilbertgeom import gradients as gr

    ok, why = gr.minilm_available()
    if not ok:
        raise SystemExit(f"--real needs the MiniLM wheel: {why}")
    for steps in (0, 20):
        G = gr.real_head_gradient(batch=512, seed=0, train_steps=steps, verbose=False).G
        if rows is not None:
            G = gr.top_rows(G, rows)
        name = "shipped" if steps == 0 else f"trained ({steps} steps)"
        print(f"{machine()}; MiniLM head gradient, {name}, V = {G.shape[0]}, d = {G.shape[1]}", flush=True)
        report(name, G, iters)


def report(name: str, G, iters: int) -> None:
    """Projected RowNorm (the peer: one evaluation and the two exact kernels that measure
    it) against equalize_rows from it, in the same run."""
    t0 = time.perf_counter()
    S = hg.projected_rownorm(G)
    rn_ratio = hg.closest_pair(S).distance / hg.row_diameter(S)
    t_rn = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = hg.equalize_rows(G, iters=iters, keep=0.99)
    t_eq = time.perf_counter() - t0
    print(f"{name:<22} separation ratio {rn_ratio:.4g} -> {r.separation_ratio:.4g}   "
          f"efficiency {r.relative_efficiency:.4f}   time {t_eq:6.1f} s vs RowNorm {t_rn:5.2f} s "
          f"(ratio {t_eq / t_rn:.0f}x)   iterations {r.iterations}   stop {r.stop}", flush=True)


def _slsqp_repair(G, S0, delta):
    """The previous local search (SLSQP on squared pair distances, dense Jacobians)."""
    from scipy.optimize import minimize

    V, d = G.shape
    target = delta * (1 + 1e-6)
    sq, jac_sq = eq._pair_squares(V, d)
    cons = [
        {"type": "ineq", "fun": lambda x: 1.0 - sq(x), "jac": lambda x: -jac_sq(x)},
        {"type": "eq", "fun": lambda x: x.reshape(V, d).sum(axis=0), "jac": lambda x: np.tile(np.eye(d), (1, V))},
        {"type": "ineq", "fun": lambda x: sq(x) - target**2, "jac": jac_sq},
    ]
    res = minimize(lambda x: float(np.sum(G.ravel() * x)), S0.ravel(), jac=lambda x: G.ravel(),
                   method="SLSQP", constraints=cons, options={"maxiter": 500, "ftol": 1e-14})
    S = eq._fit_diameter(res.x.reshape(V, d), 1.0)
    if hg.row_diameter(S) <= 1.0 and hg.closest_pair(S).distance >= delta:
        return -float(np.sum(G * S))
    return None


def previous(G, delta):
    """The previous equalized_descent: SDP, then SLSQP from six starts."""
    X = G / np.ldexp(1.0, eq._pow2_exponent(float(np.abs(G).max())))
    up, S_sdp = eq._shor_sdp(X, delta, 1.0)
    rng = np.random.default_rng(0)
    starts = [S_sdp, hg.projected_rownorm(X, eta=1.0)]
    for _ in range(4):
        R = rng.standard_normal(X.shape)
        starts.append((R - R.mean(axis=0)) / hg.row_diameter(R))
    lows = [v for v in (_slsqp_repair(X, S0, delta) for S0 in starts) if v is not None]
    return up, max(lows) if lows else -np.inf


def bench_exact() -> None:
    print(f"{machine()}; equalized_descent (ours) vs the previous SLSQP local search and the SDP alone")
    W = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    hg.equalized_descent(W, delta=0.3)  # imports (cvxpy, Clarabel) outside the timings
    for V, d, delta in ((10, 3, 0.3), (10, 3, 0.5), (20, 16, 0.3), (20, 16, 0.85)):
        G = np.random.default_rng(1).standard_normal((V, d))
        G -= G.mean(axis=0)
        X = G / np.ldexp(1.0, eq._pow2_exponent(float(np.abs(G).max())))
        t0 = time.perf_counter()
        eq._shor_sdp(X, delta, 1.0)
        t_sdp = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = hg.equalized_descent(G, delta=delta, verbose=False)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        up, low = previous(G, delta)
        t_prev = time.perf_counter() - t0
        print(f"V = {V:3d}, d = {d:2d}, delta = {delta:.2f}:  ours {t_ours:6.1f} s (gap {r.gap / r.upper:.1e}, "
              f"{r.status})   previous {t_prev:6.1f} s (gap {(up - low) / up:.1e})   ratio {t_prev / t_ours:5.1f}x   "
              f"SDP alone {t_sdp:5.1f} s (ours / SDP {t_ours / t_sdp:.1f})", flush=True)


_MEASURE = """
import resource, sys, numpy as np
from hilbertgeom import equalize as eq
V, d = int(sys.argv[1]), int(sys.argv[2])
G = np.random.default_rng(1).standard_normal((V, d)); G -= G.mean(axis=0)
eq._shor_sdp(G[:2], 0.3, 1.0)  # imports and solver libraries loaded before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
eq._shor_sdp(G, 0.3, 1.0)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


def bench_memory() -> None:
    print(f"{machine()}; Shor SDP memory: size-guard estimate vs measured peak (ru_maxrss, fresh process)")
    for V, d in ((10, 16), (20, 16), (30, 3), (30, 16), (40, 16), (20, 64), (60, 16), (80, 16)):
        G = np.random.default_rng(1).standard_normal((V, d))
        r, _ = eq._rank_basis(G - G.mean(axis=0))
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _MEASURE, str(V), str(d)], capture_output=True, text=True,
                             check=True)
        peak = int(out.stdout.split()[-1])
        est = eq._shor_memory(V, r)
        print(f"V = {V:3d}, d = {d:2d} (rank {r:2d}, block {V + r:3d}):  estimate {eq._bytes(est):>8}   "
              f"measured {eq._bytes(peak):>8}   estimate / measured {est / max(peak, 1):.2f}   "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="V = 512, d = 16 for the scalable equalizer")
    ap.add_argument("--exact", action="store_true", help="equalized_descent vs the previous local search")
    ap.add_argument("--memory", action="store_true", help="size-guard estimate vs measured peak memory")
    ap.add_argument("--real", action="store_true", help="equalize_rows on the MiniLM head gradients")
    ap.add_argument("--rows", type=int, default=None, help="with --real: the largest rows only")
    ap.add_argument("--iters", type=int, default=40, help="with --real: equalize_rows' iteration budget")
    args = ap.parse_args()
    if args.real:
        bench_real(args.rows, args.iters)
    elif args.exact:
        bench_exact()
    elif args.memory:
        bench_memory()
    else:
        bench_rows(args.quick)


if __name__ == "__main__":
    main()
