"""Command line: ``hilbertgeom verify``, ``bench-updates`` and ``separation``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

__all__ = ["main"]


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return "0" if x == 0 else f"{x:.1e}"


def _table(rows, elapsed: float) -> str:
    head = ("id", "statement", "method", "trials", "worst", "tol", "verdict")
    body = [
        (r.identity, r.statement, r.method, str(r.trials), _fmt(r.worst), _fmt(r.tol),
         "PASS" if r.passed else "FAIL")
        for r in rows
    ]
    width = [max(len(h), *(len(b[k]) for b in body)) if body else len(h) for k, h in enumerate(head)]
    width[1] = min(width[1], 60)
    width[2] = min(width[2], 44)

    def line(cells):
        out = []
        for k, c in enumerate(cells):
            c = c if len(c) <= width[k] else c[: width[k] - 1] + "~"
            out.append(c.rjust(width[k]) if k in (3, 4, 5) else c.ljust(width[k]))
        return "  ".join(out).rstrip()

    lines = [line(head), line(["-" * w for w in width])]
    lines += [line(b) for b in body]
    failed = [r for r in rows if not r.passed]
    lines.append("")
    for r in failed:
        lines.append(f"FAIL {r.identity}: worst {_fmt(r.worst)} > tol {_fmt(r.tol)} at {r.detail}")
    lines.append(f"{len(rows) - len(failed)} passed, {len(failed)} failed  ({elapsed:.1f} s; "
                 "worst = largest residual or violation relative to the scale of the instance)")
    return "\n".join(lines)


def _verify(args) -> int:
    only = [s for part in (args.only or []) for s in part.split(",") if s.strip()]
    t0 = time.perf_counter()
    try:
        try:
            from .proofs import run
        except ImportError:
            try:  # running from a source checkout: proofs/ is the top-level folder
                from proofs import run
            except ImportError:
                print("hilbertgeom verify: the proofs package is missing (hilbertgeom.proofs); "
                      "reinstall hilbertgeom", file=sys.stderr)
                return 2
        rows = run(seed=args.seed, quick=args.quick, only=only or None)
    except ValueError as exc:
        print(f"hilbertgeom verify: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"seed": args.seed, "quick": args.quick, "elapsed_s": elapsed,
                          "passed": all(r.passed for r in rows),
                          "rows": [r.as_dict() for r in rows]}, indent=2, default=str))
    else:
        print(f"hilbertgeom verify  (seed {args.seed}{', quick' if args.quick else ''})")
        print(_table(rows, elapsed))
    return 0 if rows and all(r.passed for r in rows) else 1


def _bench_updates(args) -> int:
    from .updates import bench_updates

    t0 = time.perf_counter()
    rows = bench_updates(V=args.V, d=args.d, seed=args.seed)
    if args.json:
        print(json.dumps([{"case": c, "rule": r, **rep.__dict__} for c, r, rep in rows], indent=2, default=str))
        return 0
    print(f"hilbertgeom bench-updates  (V = {args.V}, d = {args.d}, seed {args.seed}; "
          "ratio = -<G,S> / (D(S) T(G)), T certified by min_tension)")
    head = f"{'case':<22} {'rule':<22} {'decrease ratio':>15} {'min/max sep':>12} {'D(S)':>10} {'|1^T S|':>9}"
    print(head)
    print("-" * len(head))
    last = None
    for case, rule, rep in rows:
        if last is not None and case != last:
            print()
        last = case
        print(f"{case:<22} {rule:<22} {rep.decrease_ratio:15.9f} {rep.separation_ratio:12.4g} "
              f"{rep.diameter:10.4g} {rep.column_sum:9.1e}")
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0


def _separation(args) -> int:
    from .equalize import max_min_separation

    try:
        r = max_min_separation(args.n, args.d, restarts=args.restarts, seed=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"hilbertgeom separation: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"n": args.n, "d": args.d, "lower": r.lower, "upper": r.upper,
                          "upper_source": r.upper_source, "exact": r.exact,
                          "points": r.points.tolist()}, indent=2))
    else:
        print(f"n = {args.n} points in R^{args.d}, diameter <= 1:")
        print(f"  smallest separation found  {r.lower:.12f}   (points re-checkable with closest_pair)")
        print(f"  proven upper bound         {r.upper:.12f}   ({r.upper_source})")
        print(f"  {'optimal (bounds meet)' if r.exact else f'gap {r.upper - r.lower:.3e}'}; {r.restarts} local searches")
    if args.plot:
        try:
            from .plots import plot_configuration
        except ImportError as exc:
            print(f"hilbertgeom separation: --plot needs matplotlib ({exc}); "
                  "pip install 'hilbertgeom[plot]'", file=sys.stderr)
            return 2
        plot_configuration(r.points, args.plot, title=f"n = {args.n}, d = {args.d}: min distance {r.lower:.4f}")
        print(f"  plot written to {args.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hilbertgeom`` command."""
    parser = argparse.ArgumentParser(prog="hilbertgeom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the paper's identities on seeded random and adversarial instances")
    v.add_argument("--seed", type=int, default=0, help="instance seed (default 0)")
    v.add_argument("--quick", action="store_true", help="fewer instances per identity")
    v.add_argument("--json", action="store_true", help="print the results as JSON")
    v.add_argument("--only", action="append", metavar="ID[,ID...]", help="run only these identities, e.g. I1,I7")
    b = sub.add_parser("bench-updates", help="compare update rules with the exact steepest direction under D")
    b.add_argument("--V", type=int, default=64, help="tokens (default 64)")
    b.add_argument("--d", type=int, default=8, help="hidden size (default 8)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    sp = sub.add_parser("separation", help="n points of diameter 1 with the largest smallest distance found")
    sp.add_argument("--n", type=int, required=True)
    sp.add_argument("--d", type=int, required=True)
    sp.add_argument("--restarts", type=int, default=20)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--plot", metavar="FILE.png", help="draw the configuration (d = 2 or 3; needs matplotlib)")
    args = parser.parse_args(argv)
    if args.command == "separation":
        return _separation(args)
    if args.command == "verify":
        return _verify(args)
    if args.command == "bench-updates":
        return _bench_updates(args)
    parser.error(f"unknown command {args.command}")  # pragma: no cover
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
