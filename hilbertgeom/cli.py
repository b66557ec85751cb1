"""Command line: ``hilbertgeom verify``, ``bench-updates`` and ``separation``.

Options are written ``--name value`` or ``name=value`` (``hilbertgeom
separation n=8 d=2``).  Results go to stdout; progress goes to stderr.
Exit codes: 0 success, 1 a failed check or a solver that missed its
tolerance (one line on stderr with the best certified bracket), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time

from .tolerances import tolerance

__all__ = ["main"]

_EXIT_FAIL, _EXIT_USAGE = 1, 2
_SOLVER_TOL = tolerance("solver").rtol  # default certified relative gap of the bench's solves


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


# --------------------------------------------------------------------------- progress
def _progress_on(args) -> bool:
    """Progress on stderr: forced by --progress, off with --quiet, else only on a terminal."""
    if getattr(args, "quiet", False):
        return False
    if getattr(args, "progress", False):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class _Bar:
    """A plain-text progress bar on stderr: redrawn in place on a terminal, one line
    per step otherwise (logs stay readable)."""

    def __init__(self, total: int, label: str, enabled: bool):
        self.total, self.label, self.enabled = total, label, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.perf_counter()
        if enabled:
            self._draw(0, "starting")

    def _draw(self, done: int, what: str) -> None:
        width = 24
        fill = width * done // max(self.total, 1)
        text = (f"{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{self.total} {what}  "
                f"{time.perf_counter() - self.t0:.1f} s")
        if self.tty:
            print("\r" + text + "\033[K", end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)

    def step(self, done: int, what: str) -> None:
        if self.enabled:
            self._draw(done, what)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr, flush=True)


def _solver_failure(command: str, exc, tol: float | None = None) -> int:
    """One line on stderr for a SolverError: status, where, the best certified bracket."""
    where = "; ".join(getattr(exc, "__notes__", []))
    where = where.replace("bench_updates: ", "") + ": " if where else ""
    msg = f"hilbertgeom {command}: {where}solver failed (status {exc.status!r})"
    res = getattr(exc, "result", None)
    lo, hi = getattr(res, "value", None), getattr(getattr(res, "flow", None), "cost", None)
    if lo is not None and hi is not None:
        rel = (hi - lo) / lo if lo > 0 else math.inf
        msg += f"; best certified bracket T(G) in [{lo:.12g}, {hi:.12g}], relative gap {rel:.2e}"
        if tol is not None:
            msg += f" > --tol {tol:.1e}"
    msg += "; raise --max-iter or --tol"
    print(msg, file=sys.stderr)
    return _EXIT_FAIL


# --------------------------------------------------------------------------- verify
def _verify(args) -> int:
    only = [s for part in (args.only or []) for s in part.split(",") if s.strip()]
    t0 = time.perf_counter()
    try:
        try:
            from .proofs import IDENTITIES, run
        except ImportError:
            try:  # running from a source checkout: proofs/ is the top-level folder
                from proofs import IDENTITIES, run
            except ImportError:
                print("hilbertgeom verify: the proofs package is missing (hilbertgeom.proofs); "
                      "reinstall hilbertgeom", file=sys.stderr)
                return _EXIT_USAGE
        wanted = {s.strip().upper() for s in only}
        total = sum(1 for k in IDENTITIES if not wanted or k.upper() in wanted)
        show = _progress_on(args)
        state = {"done": 0, "t": time.perf_counter()}

        def report(r) -> None:  # each row on stderr as soon as it finishes
            state["done"] += 1
            now = time.perf_counter()
            if show:
                print(f"[{state['done']:>{len(str(total))}}/{total}] {r.identity:<4} "
                      f"{'PASS' if r.passed else 'FAIL'}  worst {_fmt(r.worst)}  ({now - state['t']:.1f} s)",
                      file=sys.stderr, flush=True)
            state["t"] = now

        if show:
            print(f"hilbertgeom verify: {total} identities{', quick' if args.quick else ''}",
                  file=sys.stderr, flush=True)
        rows = run(seed=args.seed, quick=args.quick, only=only or None, on_result=report)
    except ValueError as exc:
        print(f"hilbertgeom verify: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    elapsed = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"seed": args.seed, "quick": args.quick, "elapsed_s": elapsed,
                          "passed": all(r.passed for r in rows),
                          "rows": [r.as_dict() for r in rows]}, indent=2, default=str))
    else:
        print(f"hilbertgeom verify  (seed {args.seed}{', quick' if args.quick else ''})")
        print(_table(rows, elapsed))
    return 0 if rows and all(r.passed for r in rows) else _EXIT_FAIL


# --------------------------------------------------------------------------- bench-updates
def _bench_updates(args) -> int:
    from .exceptions import SolverError
    from .updates import bench_updates

    t0 = time.perf_counter()
    bar = _Bar(5, "bench-updates", _progress_on(args))  # the five cases of gradient_suite

    def step(done, total, name):
        bar.total = total
        bar.step(done, name)

    try:
        rows = bench_updates(V=args.V, d=args.d, seed=args.seed, tol=args.tol, max_iter=args.max_iter,
                             verbose=args.verbose, on_case=step)
    except SolverError as exc:
        bar.close()
        return _solver_failure("bench-updates", exc, args.tol)
    except (ValueError, TypeError) as exc:
        bar.close()
        print(f"hilbertgeom bench-updates: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    bar.close()
    if args.json:
        print(json.dumps([{"case": c, "rule": r, **rep.__dict__} for c, r, rep in rows], indent=2, default=str))
        return 0
    print(f"hilbertgeom bench-updates  (V = {args.V}, d = {args.d}, seed {args.seed}; "
          f"ratio = -<G,S> / (D(S) T(G)), T certified by min_tension to relative gap {args.tol:.0e})")
    digits = max(1, min(12, round(-math.log10(args.tol))))  # the digits the certificate backs
    head = f"{'case':<22} {'rule':<22} {'decrease ratio':>15} {'min/max sep':>12} {'D(S)':>10} {'|1^T S|':>9}"
    print(head)
    print("-" * len(head))
    last = None
    for case, rule, rep in rows:
        if last is not None and case != last:
            print()
        last = case
        print(f"{case:<22} {rule:<22} {rep.decrease_ratio:15.{digits}f} {rep.separation_ratio:12.4g} "
              f"{rep.diameter:10.4g} {rep.column_sum:9.1e}")
    print(f"\nRatios use the certified lower bound of T(G): each true ratio lies at most a relative "
          f"{args.tol:.0e} below the printed one.  ({time.perf_counter() - t0:.1f} s)")
    return 0


# --------------------------------------------------------------------------- separation
def _check_plot_target(path: str, d: int) -> str | None:
    """Why ``--plot path`` cannot work (checked before the search), or None."""
    if d not in (2, 3):
        return f"--plot draws d = 2 or 3 only; got d = {d}"
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return f"--plot needs matplotlib ({exc}); pip install 'hilbertgeom[plot]'"
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext:
        from matplotlib.backend_bases import FigureCanvasBase

        if ext not in FigureCanvasBase.get_supported_filetypes():
            return (f"--plot {path!r}: unknown image format {ext!r}; use one of "
                    f"{', '.join(sorted(FigureCanvasBase.get_supported_filetypes()))}")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"--plot {path!r} is a folder; give a file name such as out.png"
    if not os.path.isdir(folder):
        return f"--plot {path!r}: folder {folder!r} does not exist"
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"--plot {path!r}: not writable"
    return None


def _separation(args) -> int:
    from .equalize import max_min_separation

    missing = [k for k in ("n", "d") if getattr(args, k) is None]
    if missing:
        print(f"hilbertgeom separation: {' and '.join(missing)} required, e.g. "
              "`hilbertgeom separation --n 8 --d 2` (or n=8 d=2)", file=sys.stderr)
        return _EXIT_USAGE
    if args.plot:
        why = _check_plot_target(args.plot, args.d)
        if why:
            print(f"hilbertgeom separation: {why}", file=sys.stderr)
            return _EXIT_USAGE
    show = _progress_on(args)
    t0 = time.perf_counter()
    if show:
        print(f"hilbertgeom separation: n = {args.n}, d = {args.d}, {args.restarts} local searches ...",
              file=sys.stderr, flush=True)
    try:
        r = max_min_separation(args.n, args.d, restarts=args.restarts, seed=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"hilbertgeom separation: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    if show:
        print(f"hilbertgeom separation: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"n": args.n, "d": args.d, "lower": r.lower, "upper": r.upper,
                          "upper_source": r.upper_source, "exact": r.exact,
                          "points": r.points.tolist()}, indent=2))
    else:
        print(f"n = {args.n} points in R^{args.d}, diameter <= 1:")
        print(f"  smallest separation found  {r.lower:.12f}   (points re-checkable with closest_pair)")
        print(f"  proven upper bound         {r.upper:.12f}   ({r.upper_source})")
        verdict = "optimal (bounds meet)" if r.exact else f"gap {r.upper - r.lower:.3e}"
        print(f"  {verdict}; {r.restarts} local searches")
    if args.plot:
        from .plots import plot_configuration

        try:
            plot_configuration(r.points, args.plot, title=f"n = {args.n}, d = {args.d}: min distance {r.lower:.4f}")
        except (OSError, ValueError) as exc:  # e.g. an unknown image format, a full disk
            print(f"hilbertgeom separation: cannot write the plot to {args.plot!r}: {exc}", file=sys.stderr)
            return _EXIT_USAGE
        print(f"  plot written to {args.plot}")
    return 0


# --------------------------------------------------------------------------- parser
def _version() -> str:
    from . import __version__

    return f"hilbertgeom {__version__}"


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a positive finite number; got {text!r}")
    return x


def _positive_int(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {text!r}")
    return k


def _progress_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", action="store_true",
                   help="progress on stderr even when stderr is not a terminal (default: only on a terminal)")
    g.add_argument("--quiet", action="store_true", help="no progress output on stderr")


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="hilbertgeom", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Reference numerics for the update geometry of the language-model head.\n\n"
                    "Options are written --name value or name=value (hilbertgeom separation n=8 d=2).\n"
                    "Results go to stdout, progress to stderr.  Exit codes: 0 success; 1 a failed check,\n"
                    "or a solver that missed its tolerance (one line on stderr with the best\n"
                    "certified bracket); 2 bad input.")
    parser.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    v = sub.add_parser("verify", help="check the paper's identities on seeded random and adversarial instances",
                       description="Prove and check identities I1-I21 (hilbertgeom.proofs): one row per "
                                   "identity.  Exit code 1 if any row fails.")
    v.add_argument("--seed", type=int, default=0, help="instance seed (default 0)")
    v.add_argument("--quick", action="store_true", help="fewer instances per identity")
    v.add_argument("--json", action="store_true", help="print the results as JSON")
    v.add_argument("--only", action="append", metavar="ID[,ID...]",
                   help="run only these identities, e.g. I1,I7 (repeatable)")
    _progress_options(v)
    b = sub.add_parser("bench-updates", help="compare update rules with the exact steepest direction under D",
                       description="Run the update rules of hg.update_rules() over hg.gradient_suite(V, d) and "
                                   "print each rule's decrease ratio -<G,S> / (D(S) T(G)).")
    b.add_argument("--V", type=_positive_int, default=64, help="tokens, at least 3 (default 64)")
    b.add_argument("--d", type=_positive_int, default=8, help="hidden size (default 8)")
    b.add_argument("--seed", type=int, default=0, help="seed of the gradient suite (default 0)")
    b.add_argument("--tol", type=_positive_float, default=_SOLVER_TOL,
                   help=f"certified relative gap of min_tension per case (default {_SOLVER_TOL:g}, "
                        "the solver tolerance of hilbertgeom.tolerances)")
    b.add_argument("--max-iter", type=_positive_int, default=200,
                   help="outer iterations of min_tension per case (default 200)")
    b.add_argument("--verbose", action="store_true", help="print the solver's iterations on stderr")
    b.add_argument("--json", action="store_true", help="print the reports as JSON")
    _progress_options(b)
    sp = sub.add_parser("separation", help="n points of diameter 1 with the largest smallest distance found",
                        description="Search n points in R^d with diameter 1 and the largest smallest distance; "
                                    "print it with a proven upper bound.  Give n and d as --n 8 --d 2 or n=8 d=2.")
    sp.add_argument("--n", type=_positive_int, default=None, help="number of points (required)")
    sp.add_argument("--d", type=_positive_int, default=None, help="dimension (required)")
    sp.add_argument("--restarts", type=_positive_int, default=20, help="local searches from random starts (default 20)")
    sp.add_argument("--seed", type=int, default=0, help="seed of the starts (default 0)")
    sp.add_argument("--json", action="store_true", help="print the result (with the points) as JSON")
    sp.add_argument("--plot", metavar="FILE.png", help="draw the configuration (d = 2 or 3; needs matplotlib)")
    _progress_options(sp)
    return parser, {"verify": v, "bench-updates": b, "separation": sp}


_KEYWORD = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(.*)$")


def _apply_keywords(sub: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """``name=value`` tokens for the subcommand's ``--name value`` options."""
    options: dict[str, argparse.Action] = {}
    for act in sub._actions:
        for opt in act.option_strings:
            if opt.startswith("--") and act.nargs != 0:  # flags (--json) take no value
                options[opt[2:]] = act
                options[opt[2:].replace("-", "_")] = act
    known = ", ".join(sorted({a.option_strings[-1][2:] for a in options.values()}))
    for token in extra:
        m = _KEYWORD.match(token)
        action = options.get(m.group(1)) if m else None
        if m is None or action is None:
            sub.error(f"unrecognized argument {token!r}; {args.command} takes --name value "
                      f"(or name=value) for: {known}")
            return  # pragma: no cover  (error exits)
        convert = action.type if callable(action.type) else str
        try:
            value = convert(m.group(2))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            sub.error(f"argument {token!r}: {exc}")
        if action.dest == "only":
            value = [*(args.only or []), value]
        setattr(args, action.dest, value)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hilbertgeom`` command.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``hilbertgeom`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 success, 1 a failed check or solver, 2 bad input.

    Examples
    --------
    >>> main(["separation", "n=3", "d=2", "--quiet"])  # doctest: +ELLIPSIS
    n = 3 points in R^2, diameter <= 1:
      smallest separation found  1.000000000000 ...
      proven upper bound         1.000000000000 ...
      optimal (bounds meet)...
    0
    """
    parser, subs = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _apply_keywords(subs[args.command], args, extra)
    if args.command == "separation":
        return _separation(args)
    if args.command == "verify":
        return _verify(args)
    if args.command == "bench-updates":
        return _bench_updates(args)
    parser.error(f"unknown command {args.command}")  # pragma: no cover
    return _EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
