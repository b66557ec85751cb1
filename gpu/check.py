"""Device check: parity with the core, then the full-size benchmarks, one table.

Run on a machine with a CUDA GPU and CuPy::

    python -m hilbertgeom.gpu.check                # parity + benchmarks (75-115 s on an H200)
    python -m hilbertgeom.gpu.check --parity-only
    python -m hilbertgeom.gpu.check --out table.md # also write the table as Markdown

``--dry-run`` runs the same code on the CPU through NumPy at small sizes
(``accept_host_arrays``): it checks the script, not a GPU, and its timings
mean nothing.

Parity compares every kernel with the core on identical inputs: extremal
pairs must be the core's (or tie with it within the float64 rounding of a
``d``-term sum, see :func:`pair_matches`) and their distances agree to that
rounding; quantities whose summation order differs (means, sums, norms)
must agree to the stated relative tolerance.  Benchmarks print our time, a peer's time
measured in the same run, and the ratio:

* ``row_diameter`` / ``closest_pair`` at V = 131,072, d = 4096 (float32)
  against one cuBLAS GEMM of the same shape (``V x d`` times ``d x V``,
  computed in row blocks so that its output need not fit; target <= 1.3x),
  and against ``cupyx.scipy.spatial.distance.cdist`` at the largest size
  whose ``V x V`` output fits (it needs pylibraft or cuVS, depending on the
  CuPy version; skipped with the reason if absent);
* ``projected_rownorm`` at V = 262,144, d = 8192 (float32) against a device
  copy of the same bytes (target <= 3x), with its traffic, each of its passes
  and the core's unfused kernel;
* ``row_diameter``, ``closest_pair``, ``tension_bounds`` and ``projected_rownorm`` on a head
  gradient's shape (the synthetic generator, V = 30,522, d = 384, float32)
  against the core on the CPU.

Each benchmark row also gives the call's peak device memory (the growth of
CuPy's pool from an emptied cache).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import math
import sys
import time
from typing import Any

import numpy as np

import hilbertgeom as core
import hilbertgeom.gradients
from hilbertgeom.tension.bounds import _projected_rownorm

from . import _backend as _b
from . import _fused, _kernels

__all__: list[str] = []


class _Dev:
    """The device namespace: CuPy, or NumPy for a dry run."""

    def __init__(self, dry: bool):
        self.dry = dry
        self.xp: Any  # NumPy or CuPy
        if dry:
            self.xp = np
            self.name = f"CPU dry run (NumPy {np.__version__}); timings are not GPU numbers"
        else:
            import cupy

            self.xp = cupy
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
            name = props["name"]
            self.name = name.decode() if isinstance(name, bytes) else str(name)
            self.name += f", {props['totalGlobalMem'] / 2**30:.0f} GiB, CuPy {cupy.__version__}"

    def put(self, a):
        return np.array(a) if self.dry else self.xp.asarray(a)

    def get(self, a):
        return np.asarray(a) if self.dry else self.xp.asnumpy(a)

    def normal(self, shape, seed: int):
        if self.dry:
            return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        return self.xp.random.RandomState(seed).standard_normal(shape, dtype=self.xp.float32)

    def sync(self):
        if not self.dry:
            self.xp.cuda.Device().synchronize()

    def free(self):
        if not self.dry:
            self.xp.get_default_memory_pool().free_all_blocks()

    def time(self, fn, repeat: int = 1) -> float:
        best = math.inf
        for _ in range(repeat):
            self.sync()
            t0 = time.perf_counter()
            fn()
            self.sync()
            best = min(best, time.perf_counter() - t0)
        return best

    def peak(self, fn) -> str:
        """Device memory one call of ``fn`` takes beyond what is allocated before it: the
        growth of CuPy's pool from an emptied cache (the pool keeps what it once held, so
        this is the call's peak, rounded up to the pool's blocks)."""
        if self.dry:
            return "-"
        pool = self.xp.get_default_memory_pool()
        pool.free_all_blocks()
        before = pool.used_bytes()
        fn()
        self.sync()
        return f"{(pool.total_bytes() - before) / 2**30:.2f} GiB"


# --------------------------------------------------------------------------- parity
def _core_distance(S, i: int, j: int, norm) -> float:
    """The core's float64 distance of rows ``i``, ``j`` (NumPy, host)."""
    return core.row_diameter(np.asarray(S, dtype=np.float64)[[i, j]], norm=norm)


def pair_matches(got, want, S, norm=2) -> tuple[bool, str]:
    """Does a device extreme pair agree with the core's?

    Identical results pass.  Otherwise the device evaluated the float64
    distance with another summation order: its value may differ from NumPy's by
    the rounding of a ``d``-term sum, ``tol = 2 (d + 2) u`` relative.  Then
    the device's pair must be one whose core distance is within ``tol`` of the
    core's extreme (a tie within rounding), and its reported distance within
    ``tol`` of that pair's core distance.
    """
    if got == want:
        return True, "identical pair and distance"
    d = np.asarray(S).shape[1]
    tol = 2.0 * (d + 2) * 2.0**-53 * max(abs(want.distance), 1e-300)
    dd = _core_distance(S, got.i, got.j, norm)
    ok = abs(got.distance - dd) <= tol and abs(dd - want.distance) <= tol
    ulps = abs(got.distance - want.distance) / max(np.spacing(want.distance), 1e-320)
    what = "same pair" if (got.i, got.j) == (want.i, want.j) else "a pair tied within rounding"
    return ok, f"{what}, distance differs by {ulps:.0f} ulp (allowed: a {d}-term sum's rounding)"


def rownorm_matches(S, dec, Sc, dc, G, eta: float) -> tuple[bool, str]:
    """Does a device RowNorm update ``(S, dec)`` agree with the core's ``(Sc, dc)``?

    Both centre ``G`` with column means that each side sums in its own order; each
    mean is within ``gamma_V sum_i |g_ic| / V`` of the exact one, so the two centred
    rows differ by at most ``e = 2 gamma_V ||sum_i |g_i| || / V``.  A unit direction
    ``x / ||x||`` then moves by at most ``2 e / ||x||`` -- much more than an ulp for a
    row small against the mean -- and ``S_i = -(eta/2) (N_i - mean N)`` by half of
    that plus the mean of it.  Allowed for row ``i``: that, plus ``64 u eta`` for the
    rest of the arithmetic (norms in another order); the decrease ``(eta/2) sum ||x_i||``
    to ``1e-12`` relative.
    """
    G64 = np.asarray(G, dtype=np.float64)
    V = G64.shape[0]
    u = 2.0**-53
    e = 2.0 * (V * u / (1.0 - V * u)) * float(np.linalg.norm(np.abs(G64).sum(axis=0))) / V
    n = np.linalg.norm(G64 - G64.mean(axis=0), axis=1)
    r = np.minimum(2.0, 2.0 * e / np.where(n > 0, n, np.inf))
    allow = eta / 2.0 * (r + r.mean()) + 64 * u * eta
    diff = np.linalg.norm(np.asarray(S) - Sc, axis=1)
    worst = float(np.max(diff / allow))
    rel = abs(dec - dc) / dc if dc else abs(dec)
    ok = worst <= 1.0 and rel <= 1e-12
    return ok, (f"max row |diff| {float(diff.max()):.1e}, at most {worst:.2f} of its allowance "
                f"(the means' rounding over the row norm, + 64 u); decrease rel {rel:.1e} (<= 1e-12)")


def _parity(dev: _Dev, hg, rows: list, small: bool) -> bool:
    rng = np.random.default_rng(20261202)
    ok_all = True

    def record(name, good, detail):
        nonlocal ok_all
        ok_all &= bool(good)
        rows.append(("parity", name, "PASS" if good else "FAIL", detail))
        print(f"  {'PASS' if good else 'FAIL'}  {name}: {detail}", flush=True)

    V, d = (256, 16) if small else (16384, 512)
    for dtype in (np.float32, np.float64):
        S = rng.standard_normal((V, d)).astype(dtype) * 3 + 100  # a common offset: centring matters
        S[V // 3] = S[7]  # an exact duplicate
        Sd = dev.put(S)
        for fn in ("row_diameter", "closest_pair"):
            kw = {"return_pair": True} if fn == "row_diameter" else {}
            want = getattr(core, fn)(S, **kw)
            got = getattr(hg, fn)(Sd, **kw)
            ok, why = pair_matches(got, want, S)
            record(f"{fn} {np.dtype(dtype).name} V={V} d={d}", ok, f"{got} vs core {want}: {why}")
    Vs, ds = (64, 8) if small else (512, 32)
    S = rng.standard_normal((Vs, ds))
    for nrm in (1, math.inf):
        for fn in ("row_diameter", "closest_pair"):
            kw = {"return_pair": True} if fn == "row_diameter" else {}
            want = getattr(core, fn)(S, norm=nrm, **kw)
            got = getattr(hg, fn)(dev.put(S), norm=nrm, **kw)
            ok, why = pair_matches(got, want, S, nrm)
            record(f"{fn} norm={nrm} V={Vs} d={ds}", ok, f"{got} vs core {want}: {why}")
    R1 = np.outer(rng.choice([-1.0, 1.0], size=V), rng.standard_normal(d))  # rank one: many ties
    ok, why = pair_matches(hg.row_diameter(dev.put(R1), return_pair=True), core.row_diameter(R1, return_pair=True), R1)
    record("row_diameter rank-one ties", ok, why)
    P, Q = rng.random((64, 1000)) + 1e-3, rng.random((64, 1000)) + 1e-3
    P[0, 5] = 0.0  # a different support: inf on both sides
    got = dev.get(hg.hilbert_distance(dev.put(P), dev.put(Q)))
    want = core.hilbert_distance(P, Q)
    want = np.asarray(want)
    fin = np.isfinite(want)
    # log on the device and in NumPy may differ by an ulp or two
    good = np.array_equal(np.isfinite(got), fin) and np.allclose(got[fin], want[fin], rtol=8 * 2.0**-52, atol=0)
    record("hilbert_distance batch", good, "within 8 ulp; inf where the supports differ")
    Z1, Z2 = rng.standard_normal((64, 1000)) * 30, rng.standard_normal((64, 1000)) * 30
    got = dev.get(hg.softmax_hilbert_distance(dev.put(Z1), dev.put(Z2)))
    record("softmax_hilbert_distance batch", np.array_equal(got, core.softmax_hilbert_distance(Z1, Z2)), "bitwise")
    G = rng.standard_normal((V, d))
    G -= G.mean(axis=0)
    Sg, dg = hg.projected_rownorm(dev.put(G), return_decrease=True)
    Sc, dc = core.projected_rownorm(G, return_decrease=True)
    record("projected_rownorm", *rownorm_matches(dev.get(Sg), dg, Sc, dc, G, 1.0))
    # the fused passes (gpu/_fused.py) at a wide d that is no multiple of the block; zero rows:
    # exactly zero (kept zero without center) and zero up to the centring's rounding (an offset
    # removed by center=True)
    Vw, dw = (300, 70) if small else (4096, 8200)

    def wide(dtype, center):
        W = rng.standard_normal((Vw, dw)) * 10.0 ** rng.uniform(-3, 3, size=(Vw, 1))
        W[[5, 9]] = 0.0
        rest = np.arange(Vw) != 9
        W[rest] -= W[rest].mean(axis=0)  # row 9 stays exactly zero, the column sums within the rule
        W = (W + 7.0 if center else W).astype(dtype)
        Sg, dg = hg.projected_rownorm(dev.put(W), eta=0.3, center=center, return_decrease=True)
        Sc, dc = core.projected_rownorm(W, eta=0.3, center=center, return_decrease=True)
        record(f"projected_rownorm {np.dtype(dtype).name} center={center} V={Vw} d={dw}",
               *rownorm_matches(dev.get(Sg), dg, Sc, dc, W, 0.3))

    for dtype, center in ((np.float32, True), (np.float64, False)):
        ok_all &= _guarded(rows, f"projected_rownorm {np.dtype(dtype).name} center={center}",
                           functools.partial(wide, dtype, center))
    Gs = G[:Vs, :ds] - G[:Vs, :ds].mean(axis=0)
    bg, bc = hg.tension_bounds(dev.put(Gs)), core.tension_bounds(Gs)
    rel = max(abs(bg.lower - bc.lower) / bc.lower, abs(bg.upper - bc.upper) / bc.upper)
    record("tension_bounds", rel <= 1e-10 and bg.upper_source == bc.upper_source, f"rel {rel:.1e} (<= 1e-10)")
    rg = hg.evaluate_update(dev.put(Gs), dev.put(core.projected_rownorm(Gs)))
    rc = core.evaluate_update(Gs, core.projected_rownorm(Gs))
    tol = 2.0 * (ds + 2) * 2.0**-53
    good = (abs(rg.diameter - rc.diameter) <= tol * rc.diameter
            and abs(rg.min_separation - rc.min_separation) <= tol * rc.min_separation
            and rg.decrease_ratio_bounds[0] <= rc.decrease_ratio * (1 + 1e-9))
    record("evaluate_update", good, f"D {rg.diameter:.6g}, min sep {rg.min_separation:.6g}, "
           f"ratio >= {rg.decrease_ratio:.4f} (core {rc.decrease_ratio:.4f})")
    e = hg.equalize_rows(dev.put(Gs), iters=10)
    record("equalize_rows", e.separation_ratio >= e.start_separation_ratio and e.relative_efficiency >= 0.95,
           f"ratio {e.start_separation_ratio:.3f} -> {e.separation_ratio:.3f}")
    if not dev.dry:
        try:
            import torch
        except ImportError:
            rows.append(("parity", "torch DLPack input", "SKIP", "torch not installed"))
        else:
            T = torch.randn(V, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            host = T.detach().float().cpu().numpy()
            want = core.row_diameter(host, return_pair=True)
            ok, why = pair_matches(hg.row_diameter(T, return_pair=True), want, host)
            record("torch bfloat16 (requires_grad) via DLPack", ok, why)
    return ok_all


# --------------------------------------------------------------------------- benchmarks
def _guarded(rows: list, name: str, fn) -> bool:
    """Run one section; an exception becomes a FAIL row (the other sections still run)."""
    try:
        fn()
    except Exception as exc:  # a kernel that fails to compile or run on this device
        import traceback

        traceback.print_exc()
        rows.append(("error", name, "FAIL", f"{type(exc).__name__}: {exc}"))
        return False
    return True


def _bench(dev: _Dev, hg, rows: list, small: bool) -> None:
    xp = dev.xp
    V, d = (2048, 64) if small else (131072, 4096)

    def line(name, ours, peer_name, peer, target=None, peak="-"):
        ratio = ours / peer if peer > 0 else math.inf
        verdict = "" if target is None else f" (target <= {target:.1f}x: {'met' if ratio <= target else 'MISSED'})"
        detail = f"{ours:.4f} s vs {peer_name} {peer:.4f} s: {ratio:.2f}x{verdict}; peak {peak}"
        rows.append(("bench", name, f"{ratio:.2f}x", detail))
        print(f"  {name}: {detail}", flush=True)

    _guarded(rows, "pair kernels", lambda: _bench_pairs(dev, hg, xp, V, d, line, rows))
    dev.free()
    _guarded(rows, "projected_rownorm", lambda: _bench_rownorm(dev, hg, xp, small, line, rows))
    dev.free()
    _guarded(rows, "head gradient", lambda: _bench_gradient(dev, hg, small, line))


def _bench_pairs(dev, hg, xp, V, d, line, rows) -> None:
    S = dev.normal((V, d), 1)
    hg.row_diameter(S[:1024])  # warm up (compile) the kernels of both paths, and the pool
    hg.closest_pair(S[:1024])
    t_diam = dev.time(lambda: hg.row_diameter(S))
    t_close = dev.time(lambda: hg.closest_pair(S))
    p_diam, p_close = dev.peak(lambda: hg.row_diameter(S)), dev.peak(lambda: hg.closest_pair(S))
    blk = min(V, 16384)

    def gemm():
        for a in range(0, V, blk):
            S[a : a + blk] @ S.T

    gemm()
    t_gemm = dev.time(gemm)
    line(f"row_diameter V={V} d={d} float32", t_diam, "GEMM V x d x V", t_gemm, 1.3, p_diam)
    line(f"closest_pair V={V} d={d} float32", t_close, "GEMM V x d x V", t_gemm, 1.3, p_close)
    dev.free()

    # cdist where its V x V float64 output fits in a quarter of the memory
    try:
        if dev.dry:
            raise ImportError("dry run")
        from cupyx.scipy.spatial.distance import cdist

        free = xp.cuda.runtime.memGetInfo()[0]
        Vc = int(min(V, math.isqrt(int(free / 4 / 8))))
        Vc -= Vc % 1024
        Sc = S[:Vc]
        cdist(Sc[:256], Sc[:256])
        t_cd = dev.time(lambda: float(xp.max(cdist(Sc, Sc))))
        t_ours = dev.time(lambda: hg.row_diameter(Sc))
        line(f"row_diameter V={Vc} d={d} float32", t_ours, "cupyx cdist + max", t_cd)
    except Exception as exc:  # pylibraft missing, or the dry run
        rows.append(("bench", "cdist comparison", "SKIP", f"{type(exc).__name__}: {exc}"))
        print(f"  cdist comparison skipped: {type(exc).__name__}: {exc}", flush=True)


def _bench_rownorm(dev, hg, xp, small, line, rows) -> None:
    Vr, dr = (4096, 128) if small else (262144, 8192)
    G = dev.normal((Vr, dr), 2)
    G -= G.mean(axis=0)
    hg.projected_rownorm(G[:1024], center=True)
    t_rn = dev.time(lambda: hg.projected_rownorm(G, center=True), repeat=3)
    t_cp = dev.time(lambda: G.copy(), repeat=3)
    line(f"projected_rownorm V={Vr} d={dr} float32", t_rn, "device copy of G", t_cp, 3.0,
         dev.peak(lambda: hg.projected_rownorm(G, center=True)))
    gbs = _fused.expected_traffic(Vr, dr, 4) / t_rn / 1e9
    D = xp.empty_like(G)
    t_into = dev.time(lambda: xp.copyto(D, G), repeat=3)
    D = None
    copy_gbs, into_gbs = 2 * 4 * Vr * dr / t_cp / 1e9, 2 * 4 * Vr * dr / t_into / 1e9
    rows.append(("bench", "projected_rownorm traffic", f"{gbs:.0f} GB/s",
                 f"4 reads of G + the float64 write in {t_rn:.4f} s; G.copy() moves {copy_gbs:.0f} GB/s, "
                 f"a copy into an allocated array {into_gbs:.0f} GB/s ({t_into:.4f} s: {t_rn / t_into:.2f}x)"))
    print(f"  projected_rownorm: {gbs:.0f} GB/s of the passes' traffic", flush=True)
    if _fused.fits(G, xp):  # each pass alone: which one holds the time
        col = _fused.column_sums(G, xp)[0]
        m = col / Vr
        n, sN = _fused.norms_and_sums(G, m, 0.0, True, xp)
        times = [dev.time(lambda: _fused.column_sums(G, xp), repeat=3),
                 dev.time(lambda: _fused.norms_and_sums(G, m, 0.0, True, xp), repeat=3),
                 dev.time(lambda: _fused.output(G, m, n, sN / Vr, 1.0, xp), repeat=3)]
        detail = ", ".join(f"{w} {t * 1e3:.2f} ms" for w, t in zip(("column sums", "row norms + sums of N", "output"),
                                                                     times, strict=True))
        rows.append(("bench", "projected_rownorm passes", f"{sum(times) * 1e3:.2f} ms", detail))
        print(f"  passes: {detail}", flush=True)
    unfused = functools.partial(_projected_rownorm, G, xp, True, 1.0, 0.0, True, rows=_kernels._row_chunk(Vr, dr))
    line(f"projected_rownorm V={Vr} d={dr}, the core's array-API kernel", dev.time(unfused), "device copy of G",
         t_cp, None, dev.peak(unfused))


def _bench_gradient(dev, hg, small, line) -> None:
    # a head gradient's shape (a few hundred large rows, a near-duplicate tail, rank d), float32
    # on the device against the core on this machine's CPU
    Vg, dg = (2000, 32) if small else (30522, 384)
    H = core.gradients.synthetic_head_gradient(Vg, dg, seed=3).G
    H32 = H.astype(np.float32)
    Hd = dev.put(H32)
    for name, fd, fc in (("row_diameter", hg.row_diameter, core.row_diameter),
                         ("closest_pair", hg.closest_pair, core.closest_pair),
                         ("tension_bounds", lambda a: hg.tension_bounds(a, center=True),
                          lambda a: core.tension_bounds(a, center=True)),
                         ("projected_rownorm", lambda a: hg.projected_rownorm(a, center=True),
                          lambda a: core.projected_rownorm(a, center=True))):
        fd(Hd)
        ours, peer = functools.partial(fd, Hd), functools.partial(fc, H32)
        line(f"{name}, head gradient V={Vg} d={dg} float32", dev.time(ours), "the core on the CPU",
             dev.time(peer), None, dev.peak(ours))


def _table(rows, dev: _Dev) -> str:
    today = datetime.date.today().isoformat()
    out = [f"Device: {dev.name}; date {today}", "", "| part | check | result | detail |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hilbertgeom.gpu.check", description=__doc__.splitlines()[0])
    ap.add_argument("--parity-only", action="store_true")
    ap.add_argument("--bench-only", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="run on the CPU through NumPy, small sizes")
    ap.add_argument("--out", help="also write the table (Markdown) to this file")
    args = ap.parse_args(argv)
    if not args.dry_run and not _b.cuda_available():
        print(f"no CUDA device: {_b.cuda_unavailable_reason()}; use --dry-run to check the script on the CPU",
              file=sys.stderr)
        return 2
    import hilbertgeom.gpu as hg

    dev = _Dev(args.dry_run)
    print(f"hilbertgeom.gpu device check on {dev.name}", flush=True)
    rows: list = []
    ok = True
    ctx = _b.accept_host_arrays() if args.dry_run else contextlib.nullcontext()
    t0 = time.perf_counter()
    with ctx:
        if not args.bench_only:
            print("parity with the core:", flush=True)
            ok = _parity(dev, hg, rows, args.dry_run)
        if not args.parity_only:
            print("benchmarks:", flush=True)
            _bench(dev, hg, rows, args.dry_run)
    table = _table(rows, dev)
    print(f"\n{table}\n\ntotal {time.perf_counter() - t0:.1f} s", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(table + "\n")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
