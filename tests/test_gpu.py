"""hilbertgeom.gpu: same names as the core, device-only inputs, parity with the core.

Without CUDA the shared array-API code path runs here through NumPy and
array-api-strict (``accept_host_arrays``); the CuPy tests at the end skip with
the reason when no CUDA device is visible.
"""

from __future__ import annotations

import inspect
import math
import warnings

import array_api_strict
import numpy as np
import pytest
from helpers import U64, default_of, gamma, kernel_rtol
from hypothesis import given
from hypothesis import strategies as st

import hilbertgeom as hg
import hilbertgeom.gpu as hgg
from hilbertgeom.gpu import _backend, _kernels
from hilbertgeom.gpu._backend import accept_host_arrays
from hilbertgeom.gpu.check import rownorm_matches

NAMESPACES = [pytest.param(np, id="numpy"), pytest.param(array_api_strict, id="array-api-strict")]

# what issue "gpu: CuPy-backed equivalents" asks to mirror
REQUIRED = {"hilbert_distance", "variation_norm", "softmax_hilbert_distance", "row_diameter", "closest_pair",
            "head_norm", "worst_case_hidden", "center_rows", "projected_rownorm", "tension_bounds",
            "evaluate_update", "equalize_rows"}
GPU_ONLY = {"TileWarning", "cuda_available", "cuda_unavailable_reason", "set_tile_budget", "tile_budget",
            "tile_budget_bytes"}


def _np(a):
    return np.asarray(a) if isinstance(a, np.ndarray) else np.from_dlpack(a)


# --------------------------------------------------------------------------- API shape
def _unannotated(sig):
    """Names, kinds and defaults only (the core's annotations are not mirrored yet)."""
    return sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                       return_annotation=sig.empty)


def test_kernel_names_and_signatures_match_the_core():
    assert REQUIRED <= set(hgg.KERNELS)
    for name in hgg.KERNELS:
        assert name in hg.__all__, name
        got, want = (_unannotated(inspect.signature(getattr(m, name))) for m in (hgg, hg))
        assert got == want, name


def test_all_lists_core_names_plus_declared_gpu_helpers():
    assert set(hgg.__all__) - GPU_ONLY <= set(hg.__all__)
    for name in hgg.__all__:
        assert hasattr(hgg, name)
    for name in set(hgg.__all__) - GPU_ONLY - set(hgg.KERNELS):  # result types are the core's own
        assert getattr(hgg, name) is getattr(hg, name)


def _core_imports():
    """Every module name imported anywhere in the core's source (also inside functions)."""
    import ast
    import pathlib

    # the source tree next to tests/, else (tests/ run against an installed wheel) the
    # installed package, which also holds gpu/ and proofs/ as subpackages: those are left out
    root = pathlib.Path(__file__).resolve().parent.parent / "hilbertgeom"
    if not root.is_dir():
        root = pathlib.Path(hg.__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in ("gpu", "proofs"):
            continue
        pkg = ["hilbertgeom", *path.relative_to(root).parent.parts]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found += [(path.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = pkg[: len(pkg) - node.level + 1] if node.level else []
                mod = ".".join([*base, node.module] if node.module else base)
                found += [(path.name, mod)] + [(path.name, f"{mod}.{a.name}") for a in node.names]
    return found


def test_core_never_imports_gpu():
    """Data flows one way: the core (hilbertgeom/, except the command line, which sits
    on top of everything) imports neither hilbertgeom.gpu, nor hilbertgeom.proofs,
    nor CuPy -- not even lazily inside a function."""
    imports = [(f, m) for f, m in _core_imports() if f != "cli.py"]
    assert ("rows.py", "hilbertgeom._pairs") in imports  # the scan resolves relative imports
    bad = [(f, m) for f, m in imports
           if m.split(".")[0] == "cupy" or m.startswith(("hilbertgeom.gpu", "hilbertgeom.proofs"))]
    assert bad == []


def test_import_without_cuda_reports_why():
    if hgg.cuda_available():
        assert hgg.cuda_unavailable_reason() == ""
    else:
        assert "CuPy" in hgg.cuda_unavailable_reason()


# --------------------------------------------------------------------------- host arrays refused
HOST_CALLS = [
    ("hilbert_distance", lambda a: hgg.hilbert_distance(a, a)),
    ("variation_norm", lambda a: hgg.variation_norm(a)),
    ("softmax_hilbert_distance", lambda a: hgg.softmax_hilbert_distance(a, a)),
    ("row_diameter", lambda a: hgg.row_diameter(a)),
    ("closest_pair", lambda a: hgg.closest_pair(a)),
    ("head_norm", lambda a: hgg.head_norm(a)),
    ("worst_case_hidden", lambda a: hgg.worst_case_hidden(a)),
    ("center_rows", lambda a: hgg.center_rows(a)),
    ("projected_rownorm", lambda a: hgg.projected_rownorm(a, center=True)),
    ("tension_bounds", lambda a: hgg.tension_bounds(a, center=True)),
    ("evaluate_update", lambda a: hgg.evaluate_update(a, a, center=True)),
    ("equalize_rows", lambda a: hgg.equalize_rows(a)),
]


@pytest.mark.parametrize("fn,call", HOST_CALLS, ids=[c[0] for c in HOST_CALLS])
@pytest.mark.parametrize("host", [np.ones((4, 3)), [[1.0, 2.0], [3.0, 4.0]], array_api_strict.ones((4, 3))],
                         ids=["numpy", "list", "array-api-strict"])
def test_host_arrays_raise_type_error_naming_the_core_function(fn, call, host):
    with pytest.raises(TypeError, match=rf"host array .* use hilbertgeom\.{fn} for host arrays"):
        call(host)


class _FakeDeviceArray:
    """Exports DLPack on a CUDA device (like a torch CUDA tensor)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kw):  # pragma: no cover - never consumed without CuPy
        raise BufferError


@pytest.mark.skipif(_backend._cupy() is not None, reason="checks the message shown when CuPy is absent")
def test_device_array_without_cupy_says_how_to_install():
    with pytest.raises(TypeError, match=r"CUDA device but CuPy is not installed: pip install 'hilbertgeom\[gpu\]'"):
        hgg.row_diameter(_FakeDeviceArray())


def test_bfloat16_tensors_are_widened_exactly():
    class Bf16:
        dtype = "torch.bfloat16"

        def float(self):
            return "widened"

    assert _backend._widen_bfloat16(Bf16()) == "widened"
    a = np.ones(2, dtype=np.float32)  # anything that is not a torch bfloat16 tensor passes unchanged
    assert _backend._widen_bfloat16(a) is a


# --------------------------------------------------------------------------- bad input (shared path)
@pytest.mark.parametrize("xp", NAMESPACES)
def test_bad_input_is_named(xp):
    with accept_host_arrays():
        with pytest.raises(TypeError, match=r"S must be a real floating array .* got int64"):
            hgg.row_diameter(xp.asarray([[1, 2], [3, 4]], dtype=xp.int64))
        bad = xp.asarray([[0.0, math.nan], [1.0, math.inf], [2.0, 3.0]])
        with pytest.raises(ValueError, match=r"S must be finite; found 2 NaN/inf entries"):
            hgg.closest_pair(bad)
        with pytest.raises(ValueError, match=r"S must be 2-D"):
            hgg.row_diameter(xp.asarray([1.0, 2.0]))
        with pytest.raises(ValueError, match=r"S must have at least 2 rows"):
            hgg.closest_pair(xp.asarray([[1.0, 2.0]]))
        with pytest.raises(ValueError, match=r"norm must be one of 2, 1 or inf"):
            hgg.row_diameter(xp.asarray([[1.0], [2.0]]), norm=3)
        with pytest.raises(ValueError, match=r"G must have zero column sums .* pass center=True"):
            hgg.projected_rownorm(xp.asarray([[1.0, 0.0], [2.0, 0.0]]))
        with pytest.raises(ValueError, match=r"p must be nonnegative"):
            hgg.hilbert_distance(xp.asarray([-1.0, 1.0]), xp.asarray([1.0, 1.0]))
        with pytest.raises(ValueError, match=r"all-zero slice"):
            hgg.hilbert_distance(xp.asarray([0.0, 0.0]), xp.asarray([1.0, 1.0]))
        with pytest.raises(ValueError, match=r"p and q must broadcast"):
            hgg.hilbert_distance(xp.ones((3,)), xp.ones((4,)))
        with pytest.raises(ValueError, match=r"S must have the shape of G"):
            hgg.evaluate_update(xp.asarray([[1.0], [-1.0]]), xp.asarray([[1.0], [-1.0], [0.0]]))
        with pytest.raises(ValueError, match=r"xp must be the namespace of G"):
            hgg.equalize_rows(xp.asarray([[1.0], [-1.0]]), xp=object())


def test_non_contiguous_and_mixed_libraries_are_refused():
    with accept_host_arrays():
        A = np.arange(12.0).reshape(3, 4)
        with pytest.raises(ValueError, match=r"S is not C-contiguous .* contiguous copy"):
            hgg.row_diameter(A.T)
        with pytest.raises(ValueError, match=r"p and q must come from one array library"):
            hgg.hilbert_distance(np.ones(3), array_api_strict.ones((3,)))


def test_mixed_devices_are_named():
    class Arr:
        def __init__(self, dev):
            self.device = dev

    with pytest.raises(ValueError, match=r"arrays must be on one device; got p on .*, q on"):
        dev = array_api_strict.Device("device1")
        a = array_api_strict.ones((2,))
        b = array_api_strict.asarray(a, device=dev)
        _backend.same_device({"p": a, "q": b}, array_api_strict)


def test_float16_is_widened_to_float32():
    with accept_host_arrays():
        S = np.array([[0.0, 0.0], [3.0, 4.0]], dtype=np.float16)
        assert hgg.row_diameter(S) == 5.0


# --------------------------------------------------------------------------- parity (shared path)
def _cloud(draw_dtype, V, d, seed, dup):
    rng = np.random.default_rng(seed)
    S = (rng.standard_normal((V, d)) * 3 + 50).astype(draw_dtype)
    if dup and V > 3:
        S[V - 1] = S[1]
    return S


@pytest.mark.parametrize("xp", NAMESPACES)
@given(dtype=st.sampled_from([np.float32, np.float64]), V=st.integers(2, 60), d=st.integers(1, 9),
       seed=st.integers(0, 2**31), dup=st.booleans(), norm=st.sampled_from([2, 1, math.inf]))
def test_pair_kernels_equal_the_core(xp, dtype, V, d, seed, dup, norm):
    S = _cloud(dtype, V, d, seed, dup)
    with accept_host_arrays():
        A = xp.asarray(S)
        assert hgg.row_diameter(A, norm=norm, return_pair=True) == hg.row_diameter(S, norm=norm, return_pair=True)
        assert hgg.closest_pair(A, norm=norm) == hg.closest_pair(S, norm=norm)


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,S", [
    ("rank one (V^2/4 farthest pairs)", np.outer(np.tile([1.0, -1.0, 1.0, 1.0], 16), [0.3, -2.0, 1.0])),
    ("sign matrix (every column attains the l_inf diameter)",
     np.where(np.random.default_rng(3).random((40, 6)) < 0.5, -1.0, 1.0)),
    ("integer grid", np.stack(np.meshgrid(np.arange(5.0), np.arange(4.0)), -1).reshape(-1, 2)),
    ("all rows equal", np.ones((7, 3))),
    ("rounding ties in l_inf", np.array([[-2.0**53, 0.0], [0.0, 0.0], [1.0, 0.0], [-2.0**53 + 2, 0.0]])),
])
def test_tie_heavy_clouds_equal_the_core(xp, name, S):
    with accept_host_arrays():
        A = xp.asarray(S)
        for norm in (2, 1, math.inf):
            assert hgg.row_diameter(A, norm=norm, return_pair=True) == hg.row_diameter(S, norm=norm, return_pair=True)
            assert hgg.closest_pair(A, norm=norm) == hg.closest_pair(S, norm=norm)


def test_explicit_tiles_and_budgets_give_the_same_answer(rng):
    S = rng.standard_normal((300, 5)).astype(np.float32)
    want = hg.row_diameter(S, return_pair=True)
    with accept_host_arrays():
        for tile in (1, 7, 128, 1000):
            assert hgg.row_diameter(S, return_pair=True, tile=tile) == want
            assert hgg.closest_pair(S, tile=tile) == hg.closest_pair(S)
        with hgg.tile_budget(128 * 128 * 18):
            assert _backend.tile_rows(18, 10**6) == 128
            assert hgg.row_diameter(S, return_pair=True) == want
    assert hgg.tile_budget_bytes() == _backend.DEFAULT_TILE_BUDGET


def test_tile_budget_validation():
    with pytest.raises(ValueError, match=r"nbytes must be >= 294912"):
        hgg.set_tile_budget(1000)
    with pytest.raises(TypeError, match=r"nbytes must be an integer"):
        hgg.set_tile_budget(1e9)
    assert _backend.tile_rows(10, 50) == 50  # never more rows than the matrix has


def test_out_of_memory_tiles_shrink_and_say_so():
    calls = []

    def run(tile):
        calls.append(tile)
        if tile > 256:
            raise MemoryError("out of memory allocating a tile")
        return tile

    with pytest.warns(hgg.TileWarning) as seen:
        assert _backend.with_tile_fallback(run, 1024, what="row_diameter", user_tile=False) == 256
    assert calls == [1024, 512, 256]
    assert [str(w.message).split(" did not")[0] for w in seen] == ["row_diameter: a tile of 1024 rows",
                                                                    "row_diameter: a tile of 512 rows"]
    assert "retrying with 512 rows" in str(seen[0].message)
    with pytest.raises(MemoryError, match=r"a tile of 1024 rows did not fit .* pass a smaller tile="):
        _backend.with_tile_fallback(run, 1024, what="row_diameter", user_tile=True)

    def never(tile):
        raise MemoryError("out of memory")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hgg.TileWarning)
        with pytest.raises(MemoryError, match=r"even a 128-row tile did not fit .*tile budget \d+ bytes"):
            _backend.with_tile_fallback(never, 512, what="closest_pair", user_tile=False)

    def other(tile):
        raise RuntimeError("a different failure")

    with pytest.raises(RuntimeError, match="a different failure"):
        _backend.with_tile_fallback(other, 512, what="x", user_tile=False)


@pytest.mark.parametrize("d", [16, 2046, 4096])
def test_tf32_screening_keeps_the_answer_exact(d, rng):
    """With TF32 operand rounding assumed, the window widens but the pair is the same,
    also where d u_TF32 >= 1 (the bound keeps float32 accumulation separate)."""
    from hilbertgeom._pairs import extreme_pair_l2

    S = rng.standard_normal((120, d)).astype(np.float32)
    for mode in ("max", "min"):
        a = extreme_pair_l2(S, mode=mode, xp=np, tile=64)
        b = extreme_pair_l2(S, mode=mode, xp=np, tile=64, operand_u=2.0**-10)
        assert a == b == (hg.row_diameter(S, return_pair=True) if mode == "max" else hg.closest_pair(S))


def test_tf32_detection(monkeypatch):
    assert not _backend.tf32_enabled(np.ones((2, 2), dtype=np.float32))  # host arrays never use TF32
    if _backend._cupy() is None:
        monkeypatch.setenv("CUPY_TF32", "1")
        assert _backend.tf32_enabled()
        monkeypatch.setenv("CUPY_TF32", "0")
        assert not _backend.tf32_enabled()
        monkeypatch.setenv("CUPY_TF32", "yes")
        assert not _backend.tf32_enabled()


def test_tensors_that_track_gradients_are_detached_without_copy():
    class Param:
        requires_grad = True

        def detach(self):
            return "detached view"

    assert _backend._detached(Param()) == "detached view"
    plain = np.ones(2)
    assert _backend._detached(plain) is plain


def test_device_scope_is_a_no_op_for_host_arrays():
    with _backend.on_device(np.ones(2), [1.0]):
        pass
    assert _backend._cuda_index(_FakeDeviceArray()) == 0
    assert _backend._cuda_index(np.ones(2)) is None


def test_huge_explicit_tile_on_a_small_matrix_is_capped(rng):
    S = rng.standard_normal((50, 3))
    with accept_host_arrays():
        assert hgg.row_diameter(S, tile=10**6, return_pair=True) == hg.row_diameter(S, return_pair=True)
        assert hgg.closest_pair(S, tile=10**6, norm=1) == hg.closest_pair(S, norm=1)


@pytest.mark.parametrize("xp", NAMESPACES)
def test_metric_kernels_equal_the_core(xp, rng):
    P = rng.random((6, 9)) + 1e-3
    Q = rng.random((6, 9)) + 1e-3
    P[0, 2] = 0.0
    Q[0, 2] = 0.0  # same support: finite
    P[1, 3] = 0.0  # different support: inf
    Q[2, :] = Q[2, :] * 1e300
    with accept_host_arrays():
        for axis in (-1, 0):
            got = _np(hgg.hilbert_distance(xp.asarray(P), xp.asarray(Q), axis=axis))
            np.testing.assert_array_equal(got, hg.hilbert_distance(P, Q, axis=axis))
        assert hgg.hilbert_distance(xp.asarray([1.0, 2.0, 4.0]), xp.asarray([2.0, 2.0, 2.0])) == math.log(4.0)
        Z = rng.standard_normal((5, 7)).astype(np.float32) * 1e3
        Z2 = rng.standard_normal((1, 7)) * 1e3
        np.testing.assert_array_equal(_np(hgg.softmax_hilbert_distance(xp.asarray(Z), xp.asarray(Z2))),
                                      hg.softmax_hilbert_distance(Z, Z2))
        np.testing.assert_array_equal(_np(hgg.variation_norm(xp.asarray(Z), axis=0)), hg.variation_norm(Z, axis=0))
        assert isinstance(hgg.variation_norm(xp.asarray([3.0, -1.0, 2.0])), float)
        # the core's kernels (metric._variation, _softmax_variation) at the top of the range:
        # z - z2 overflows and is taken in halves; a range beyond float64 is the same ValueError
        z = np.array([[1.7e308, 1.6e308, 1.5e308], [1.0, 2.0, 3.0]])
        np.testing.assert_array_equal(_np(hgg.softmax_hilbert_distance(xp.asarray(z), xp.asarray(-z))),
                                      hg.softmax_hilbert_distance(z, -z))
        big = np.array([1.7e308, -1.7e308])
        for name, args in (("variation_norm", (big,)), ("softmax_hilbert_distance", (big, -big))):
            with pytest.raises(ValueError) as want:
                getattr(hg, name)(*args)
            with pytest.raises(ValueError) as got:
                getattr(hgg, name)(*(xp.asarray(a) for a in args))
            assert str(got.value) == str(want.value)


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("hidden_norm", [2, 1, math.inf])
def test_head_kernels_equal_the_core(xp, hidden_norm, rng):
    S = rng.standard_normal((40, 6))
    with accept_host_arrays():
        A = xp.asarray(S)
        assert hgg.head_norm(A, hidden_norm=hidden_norm, radius=2.5) == hg.head_norm(S, hidden_norm=hidden_norm,
                                                                                     radius=2.5)
        h = hgg.worst_case_hidden(A, hidden_norm=hidden_norm, radius=2.5)
        assert type(h) is type(A)  # stays in the input's namespace
        np.testing.assert_array_equal(_np(h), hg.worst_case_hidden(S, hidden_norm=hidden_norm, radius=2.5))
        Z = xp.zeros((3, 4))
        np.testing.assert_array_equal(_np(hgg.worst_case_hidden(Z)), hg.worst_case_hidden(np.zeros((3, 4))))


@pytest.mark.parametrize("xp", NAMESPACES)
def test_center_rows_and_rownorm_equal_the_core(xp, rng):
    S = (rng.standard_normal((50, 8)) + 1e4).astype(np.float32)
    G = rng.standard_normal((50, 8))
    G[3] = 0.0
    with accept_host_arrays():
        C = hgg.center_rows(xp.asarray(S))
        assert C.dtype == xp.float64
        # one kernel: NumPy-backed namespaces sum in NumPy's order, so the bits agree
        np.testing.assert_array_equal(_np(C), hg.center_rows(S))
        Sg, dg = hgg.projected_rownorm(xp.asarray(G), eta=0.7, center=True, return_decrease=True)
        Sc, dc = hg.projected_rownorm(G, eta=0.7, center=True, return_decrease=True)
        np.testing.assert_allclose(_np(Sg), Sc, rtol=0, atol=16 * U64)  # entries <= eta: a few roundings
        # the decrease (eta/2) sum ||g_i||: a V-term sum of d-term norms on each side (gamma each) and the product
        V, d = G.shape
        assert dg == pytest.approx(dc, rel=2 * gamma(V + d) + 2 * U64, abs=0)
        assert not np.signbit(_np(Sg)[3][_np(Sg)[3] == 0]).any()  # no -0.0


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("center", [False, True])
def test_one_kernel_for_rownorm_bounds_and_update_report(xp, center, rng):
    """projected_rownorm, tension_bounds and evaluate_update run the core's array-API
    kernels (tension.bounds._projected_rownorm / _tension_bounds, updates._update_report,
    _validate.zero_sum_mean): on a NumPy-backed namespace, in one row chunk, the
    numbers are the core's bit for bit -- the zero-row rule and the rounding
    constants included (rows that are zero, or zero up to the centring's rounding)."""
    H = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 6)) * 1e3  # rank 3: Jung is the upper bound
    G = np.vstack([H - H.mean(axis=0), np.zeros((2, 6))])  # two exactly zero rows
    if center:
        G += 7.0  # projected by P on both sides: the last rows are then zero up to rounding
    with accept_host_arrays():
        A = xp.asarray(G)
        Sg, dg = hgg.projected_rownorm(A, eta=0.7, center=center, return_decrease=True)
        Sc, dc = hg.projected_rownorm(G, eta=0.7, center=center, return_decrease=True)
        np.testing.assert_array_equal(_np(Sg), Sc)
        assert dg == dc
        bg, bc = hgg.tension_bounds(A, center=center), hg.tension_bounds(G, center=center)
        assert bc.upper_source.startswith("Jung") and (bg.lower, bg.upper, bg.upper_source) == (
            bc.lower, bc.upper, bc.upper_source)
        t = hg.min_tension(G, center=center)
        rg = hgg.evaluate_update(A, xp.asarray(Sc), tension=t, center=center)
        assert rg == hg.evaluate_update(G, Sc, tension=t, center=center)
        cheap = hgg.evaluate_update(A, xp.asarray(Sc), center=center)  # the device bracket, same formula
        Xc = G - G.mean(axis=0)
        want = hg.updates._update_report(Xc, Sc, bc.upper, bc.lower, bc.upper)
        assert cheap == want and cheap.tension == bc.upper
        assert cheap.decrease_ratio == cheap.decrease_ratio_bounds[0]


@pytest.mark.parametrize("xp", NAMESPACES)
def test_tension_bounds_and_evaluate_update_equal_the_core(xp, rng):
    G = rng.standard_normal((30, 4)) @ rng.standard_normal((4, 6))  # rank 4
    G -= G.mean(axis=0)
    with accept_host_arrays():
        bg = hgg.tension_bounds(xp.asarray(G), tile=7)
        bc = hg.tension_bounds(G)
        assert bg.upper_source == bc.upper_source and bg.lower_source == bc.lower_source
        V, d = G.shape
        k = kernel_rtol(G.size)  # <G, Phi> and the other V d-term sums, in each side's order
        assert bg.lower == pytest.approx(bc.lower, rel=k, abs=0)
        # Jung's (sums of V norms) or the balanced flow's (tile 7 against one tile: the per-pair
        # bounds differ by about kernel(d), then V (V - 1) / 2 of them are summed)
        assert bg.upper == pytest.approx(bc.upper, rel=kernel_rtol(d) + kernel_rtol(V * (V - 1) // 2), abs=0)
        tol = default_of(hg.min_tension, "tol")
        t = hg.min_tension(G, tol=tol)
        assert bg.lower <= t.value * (1 + tol) and t.value <= bg.upper * (1 + k)  # certified, within the gap
        U = hg.projected_rownorm(G)
        rc = hg.evaluate_update(G, U, tension=t)
        rg = hgg.evaluate_update(xp.asarray(G), xp.asarray(U), tension=t)
        assert rg.diameter == rc.diameter and rg.min_separation == rc.min_separation
        assert rg.decrease == pytest.approx(rc.decrease, rel=k, abs=0)
        assert rg.decrease_ratio == pytest.approx(rc.decrease_ratio, rel=k, abs=0)
        cheap = hgg.evaluate_update(xp.asarray(G), xp.asarray(U))  # T bracketed on the device
        lo, hi = cheap.decrease_ratio_bounds
        # lo uses an upper bound of T, hi the RowNorm lower bound, which the solve's value never
        # falls below (the ALM starts from that potential)
        assert cheap.decrease_ratio == lo <= rc.decrease_ratio * (1 + k) <= hi * (1 + k) ** 2
        with pytest.raises(TypeError, match=r"tension must be a TensionResult"):
            hgg.evaluate_update(xp.asarray(G), xp.asarray(U), tension=1.0)


@pytest.mark.parametrize("xp", NAMESPACES)
def test_equalizer_runs_in_the_namespace_and_matches_the_core(xp, rng):
    G = rng.standard_normal((48, 4))
    G -= G.mean(axis=0)
    with accept_host_arrays():
        r = hgg.equalize_rows(xp.asarray(G), iters=15, tile=16)
    c = hg.equalize_rows(G, iters=15, tile=16)
    assert type(r.update) is type(xp.asarray(G))
    # the same iteration; G is projected on each side in its own summation order (V-term sums,
    # entries of the update at most eta = 1)
    k = kernel_rtol(G.shape[0])
    np.testing.assert_allclose(_np(r.update), c.update, rtol=0, atol=k)
    assert r.iterations == c.iterations
    assert r.separation_ratio == pytest.approx(c.separation_ratio, rel=k, abs=0)
    assert r.separation_ratio >= r.start_separation_ratio
    assert hg.row_diameter(_np(r.update)) <= 1.0


def test_equalizer_separates_duplicate_rows_on_the_device_path():
    G = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.5], [-1.0, -0.5]])
    G -= G.mean(axis=0)
    with accept_host_arrays():
        r = hgg.equalize_rows(array_api_strict.asarray(G), iters=30)
    assert r.start_separation_ratio == 0.0 < r.separation_ratio


def _classes(X, xp):
    from hilbertgeom._pairs import equal_row_classes

    return tuple(np.asarray(a).tolist() for a in equal_row_classes(X, xp))


@pytest.mark.parametrize("xp", NAMESPACES)
def test_equal_row_classes_in_order_of_first_occurrence(xp):
    """The one duplicate-row kernel (hilbertgeom._pairs), as the device runs it."""
    X = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [-0.0, 1.0], [0.0, 1.0], [3.0, 4.0]])
    assert _classes(xp.asarray(X), xp) == ([0, 1, 3], [0, 1, 0, 2, 2, 1], [2, 2, 2])
    assert _classes(xp.asarray(np.eye(3)), xp) == ([0, 1, 2], [0, 1, 2], [1, 1, 1])
    assert _classes(xp.asarray(np.ones((1, 2))), xp) == ([0], [0], [1])


def test_equal_row_classes_are_exact_on_a_key_collision(monkeypatch):
    import hilbertgeom._pairs as pairs

    monkeypatch.setattr(pairs, "row_keys", lambda X, xp: xp.zeros((X.shape[0],), dtype=xp.float64))
    X = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]])
    for xp in (np, array_api_strict):
        assert _classes(xp.asarray(X), xp) == ([0, 1], [0, 1, 0], [2, 1])
    with accept_host_arrays():  # and the diameter is still the core's
        assert hgg.row_diameter(X, return_pair=True) == hg.row_diameter(X, return_pair=True)


def test_running_minimum_scan():
    a = np.array([5, 3, 8, 1, 9, 0, 7], dtype=np.int64)
    from hilbertgeom._pairs import _cummin

    np.testing.assert_array_equal(_cummin(a, np), np.minimum.accumulate(a))


def test_device_check_dry_run(tmp_path, capsys):
    from hilbertgeom.gpu import check

    out = tmp_path / "table.md"
    assert check.main(["--dry-run", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| parity |" in text and "FAIL" not in text and "| bench |" in text
    assert "CPU dry run" in capsys.readouterr().out


def test_device_check_without_cuda_exits_with_the_reason(capsys):
    from hilbertgeom.gpu import check

    if hgg.cuda_available():
        pytest.skip("a CUDA device is present: the check would run for real")
    assert check.main(["--parity-only"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


# --------------------------------------------------------------------------- CuPy (CUDA only)
requires_cuda = pytest.mark.skipif(not hgg.cuda_available(), reason=f"no CUDA: {hgg.cuda_unavailable_reason()}")


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cupy_pair_kernels_equal_the_core(dtype, rng):  # pragma: no cover - needs a GPU
    import cupy

    S = (rng.standard_normal((3000, 40)) + 30).astype(dtype)
    S[2999] = S[5]
    D = cupy.asarray(S)
    for norm in (2, 1, math.inf):
        assert hgg.row_diameter(D, norm=norm, return_pair=True) == hg.row_diameter(S, norm=norm, return_pair=True)
    assert hgg.closest_pair(D) == hg.closest_pair(S)
    C = hgg.center_rows(D)
    assert isinstance(C, cupy.ndarray) and C.device == D.device


@requires_cuda
def test_cupy_parity_script():  # pragma: no cover - needs a GPU
    from hilbertgeom.gpu import check

    assert check.main(["--parity-only"]) == 0


@pytest.mark.parametrize("modname", ["hilbertgeom.gpu", "hilbertgeom.gpu._backend", "hilbertgeom.gpu.check"])
def test_gpu_docstring_examples_run(modname):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(modname), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0


def _tf32(a, nearest: bool):
    """float32 cut to TF32's 10 mantissa bits: rounded to nearest, or truncated (both occur
    in hardware, depending on how the operands reach the tensor cores)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    if nearest:
        b = b + np.uint32(0x1000)
    return (b & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("nearest", [True, False], ids=["round-to-nearest", "truncate"])
def test_tf32_allowance_is_needed_and_sufficient_under_emulated_tf32(nearest):
    """Emulate TF32 GEMMs (operands cut to 10 bits, float32 accumulation) on clouds
    with near-ties: with the allowance the pair is always exact; without it, some is not."""
    from hilbertgeom._pairs import extreme_pair_l2
    from hilbertgeom.gpu._kernels import TF32_OPERAND_U

    def mm(A, B):
        return _tf32(A, nearest) @ _tf32(B, nearest)

    rng = np.random.default_rng(0)
    wrong_without = 0
    for _ in range(40):
        X = rng.standard_normal((200, 64))
        X /= np.linalg.norm(X, axis=1, keepdims=True)  # near a sphere: many near-tied distances
        X = (X * (1 + 1e-4 * rng.standard_normal((200, 1)))).astype(np.float32)
        for mode in ("max", "min"):
            want = hg.row_diameter(X, return_pair=True) if mode == "max" else hg.closest_pair(X)
            assert extreme_pair_l2(X, mode=mode, xp=np, tile=64, operand_u=TF32_OPERAND_U, _matmul=mm) == want
            wrong_without += extreme_pair_l2(X, mode=mode, xp=np, tile=64, _matmul=mm) != want
    assert wrong_without >= 1


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_projected_rownorm_in_several_row_chunks_equals_the_core(xp, dtype, rng):
    G = (rng.standard_normal((300, 64)) * 10.0**rng.uniform(-3, 3, size=(300, 1))).astype(dtype)
    G[7] = 0.0
    with accept_host_arrays(), hgg.tile_budget(128 * 128 * 18):
        assert _kernels._row_chunk(300, 64) < 300  # really chunked (96 rows)
        Sg, dg = hgg.projected_rownorm(xp.asarray(G), eta=0.3, eps=1e-12, center=True, return_decrease=True)
        with pytest.raises(ValueError, match=r"G must have zero column sums .* in column"):
            hgg.projected_rownorm(xp.asarray(G + 1.0))
    Sc, dc = hg.projected_rownorm(G.astype(np.float64), eta=0.3, eps=1e-12, center=True, return_decrease=True)
    np.testing.assert_allclose(_np(Sg), Sc, rtol=0, atol=64 * U64)  # entries <= eta: a few roundings
    # the decrease (eta/2) sum ||g_i||: a V-term sum of d-term norms on each side, in row chunks on one
    V, d = G.shape
    assert dg == pytest.approx(dc, rel=2 * gamma(V + d) + 2 * U64, abs=0)


def test_pair_matching_rule_of_the_device_check():
    from hilbertgeom.gpu.check import pair_matches

    S = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0], [0.0, 0.0]])
    want = hg.row_diameter(S, return_pair=True)  # Pair(5.0, 0, 1)
    assert pair_matches(want, want, S) == (True, "identical pair and distance")
    ok, why = pair_matches(hg.Pair(np.nextafter(5.0, 6.0), 0, 1), want, S)
    assert ok and "same pair" in why and "1 ulp" in why
    ok, _ = pair_matches(hg.Pair(5.0, 1, 3), want, S)  # (1, 3) ties exactly with (0, 1)
    assert ok
    assert not pair_matches(hg.Pair(5.0 * (1 + 1e-12), 0, 1), want, S)[0]  # far beyond rounding
    assert not pair_matches(hg.Pair(np.sqrt(13.0), 1, 2), want, S)[0]  # not the farthest pair


def test_kernels_in_a_namespace_that_sums_in_another_order():
    """torch (CPU) sums in another order than NumPy, as a GPU does: pairs and distances
    must still match the core under the device check's rule."""
    torch = pytest.importorskip("torch", reason="torch is not a test dependency; this runs where it is installed")
    from hilbertgeom.gpu.check import pair_matches

    rng = np.random.default_rng(5)
    with accept_host_arrays():
        for _ in range(20):
            V, d = int(rng.integers(2, 80)), int(rng.integers(1, 40))
            S = rng.standard_normal((V, d)) * 3 + 50
            T = torch.from_numpy(S.copy())
            for norm in (2, 1, math.inf):
                ok, why = pair_matches(hgg.row_diameter(T, norm=norm, return_pair=True),
                                       hg.row_diameter(S, norm=norm, return_pair=True), S, norm)
                assert ok, why
                if V >= 2:
                    ok, why = pair_matches(hgg.closest_pair(T, norm=norm), hg.closest_pair(S, norm=norm), S, norm)
                    assert ok, why


# --------------------------------------------------------------------------- one kernel, every magnitude
# The gpu functions run the core's array-API kernels (rows._center, rows._extreme_pair,
# head._head_norm, head._worst_case_hidden) with the device's tile-budgeted pair search:
# on a host namespace they must give the core's answers bit for bit, also where the
# core's power-of-two scaling decides the answer (the cases of test_magnitudes).
from test_magnitudes import A_ALL, BASE, MAGS, mats, x2  # noqa: E402


def _same_or_same_error(gpu_call, core_call):
    """Equal answers (bit for bit, arrays or Pairs), or the same ValueError message."""
    try:
        want = core_call()
    except ValueError as exc:
        with pytest.raises(ValueError) as got:
            gpu_call()
        assert str(got.value) == str(exc)
        return
    got = gpu_call()
    if isinstance(want, np.ndarray):
        g = _np(got)
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(g, want)
        assert np.array_equal(np.signbit(g), np.signbit(want))
    else:
        assert got == want and type(got) is type(want)


def _all_kernels_agree(xp, S):
    A = xp.asarray(S)
    _same_or_same_error(lambda: hgg.center_rows(A), lambda: hg.center_rows(S))
    for norm in (2, 1, math.inf):
        _same_or_same_error(lambda n=norm: hgg.row_diameter(A, norm=n, return_pair=True),
                            lambda n=norm: hg.row_diameter(S, norm=n, return_pair=True))
        _same_or_same_error(lambda n=norm: hgg.closest_pair(A, norm=n), lambda n=norm: hg.closest_pair(S, norm=n))
        for radius in (1.0, 2.0**-60, 3.0):
            kw = {"hidden_norm": norm, "radius": radius}
            _same_or_same_error(lambda kw=kw: hgg.head_norm(A, **kw), lambda kw=kw: hg.head_norm(S, **kw))
            _same_or_same_error(lambda kw=kw: hgg.worst_case_hidden(A, **kw),
                                lambda kw=kw: hg.worst_case_hidden(S, **kw))


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("m", [pytest.param(m, id=f"{m:.3g}") for m in [*MAGS, 1.0]])
def test_row_and_head_kernels_equal_the_core_at_reported_magnitudes(xp, m):
    with accept_host_arrays():
        _all_kernels_agree(xp, BASE * m)
        _all_kernels_agree(xp, -BASE * m)


@given(S=mats, a=A_ALL)
def test_row_and_head_kernels_equal_the_core_at_every_magnitude(S, a):
    with accept_host_arrays():
        _all_kernels_agree(np, x2(S, a))


@pytest.mark.parametrize("xp", NAMESPACES)
def test_pair_search_of_many_rows_near_the_top_goes_through_the_core_scaling(xp):
    """2000 rows near 2^1018: V max|S| >= 2^1024, so the pair kernel's column mean
    would overflow if the device called it directly; the core's pre-scaling keeps
    it finite (the pairs are checked against brute force)."""
    from helpers import brute_extreme

    rng = np.random.default_rng(7)
    X = np.ldexp(rng.integers(1, 8, size=(2000, 2)).astype(float), 1018)
    X[::2] *= -1
    with accept_host_arrays():
        A = xp.asarray(X)
        assert tuple(hgg.row_diameter(A, return_pair=True)) == brute_extreme(X, "max")
        assert tuple(hgg.closest_pair(A)) == brute_extreme(X, "min")
        np.testing.assert_array_equal(_np(hgg.center_rows(A)), hg.center_rows(X))
        assert hgg.head_norm(A, radius=0.5) == hg.head_norm(X, radius=0.5)
        np.testing.assert_array_equal(_np(hgg.worst_case_hidden(A)), hg.worst_case_hidden(X))


# --------------------------------------------------------------------------- fused RowNorm (gpu/_fused.py)
def _rownorm_case(rng, dtype, center, V=300, d=70):
    """Rows at magnitudes 1e-3..1e3, one row exactly zero (it must stay zero without
    ``center``), one zero up to the centring's rounding (an offset removed with it)."""
    W = rng.standard_normal((V, d)) * 10.0 ** rng.uniform(-3, 3, size=(V, 1))
    W[[5, 9]] = 0.0
    rest = np.arange(V) != 9
    W[rest] -= W[rest].mean(axis=0)
    return (W + 7.0 if center else W).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("center", [False, True])
def test_fused_rownorm_reference_equals_the_core(dtype, center, rng, monkeypatch):
    """The passes of the device's fused RowNorm, run through their NumPy
    reference in many row blocks (partial sums), against the core's kernel: the
    same update to the rounding of the reordered sums, the same decrease, the
    same zero rows, the same zero-sum error."""
    from hilbertgeom.gpu import _fused

    monkeypatch.setattr(_fused, "_COL_BLOCKS", 5)
    G = _rownorm_case(rng, dtype, center)
    S, dec = _fused.projected_rownorm(G, np, center, 0.3, 1e-12)
    Sc, dc = hg.projected_rownorm(G, eta=0.3, eps=1e-12, center=center, return_decrease=True)
    np.testing.assert_allclose(S, Sc, rtol=0, atol=64 * U64)  # entries <= eta: a few roundings
    V, d = G.shape
    assert 0.3 * dec == pytest.approx(dc, rel=2 * gamma(V + d) + 2 * U64, abs=0)
    if not center:  # row 9 of G is exactly zero: S_9 = (eta/2) mean N, so every unit row lies at eta/2 from it
        gaps = np.delete(np.linalg.norm(S - S[9], axis=1), [5, 9])
        np.testing.assert_allclose(gaps, 0.15, rtol=64 * U64)
    assert not np.signbit(S[S == 0]).any()  # no -0.0
    if not center:
        with pytest.raises(ValueError, match=r"G must have zero column sums .* in column"):
            _fused.projected_rownorm(G + 1.0, np, False, 1.0, 0.0)


def test_rownorm_matching_rule_of_the_device_check(rng):
    """The device check's RowNorm rule: a row small against the column means may move
    by the means' rounding over its norm, no more; other rows by a few ulps."""
    from hilbertgeom.gpu.check import rownorm_matches

    G = rng.standard_normal((200, 8)).astype(np.float32) + 1e3
    G[3] = G.mean(axis=0) + 1e-4  # near the mean: norm 0.014 once rounded to float32, the others ~3
    S, dec = hg.projected_rownorm(G, center=True, return_decrease=True)
    assert rownorm_matches(S, dec, S, dec, G, 1.0)[0]
    T = S.copy()
    T[3] += 1e-9  # within this row's allowance (the means' rounding, ~1e-10, over its norm 0.014)
    assert rownorm_matches(T, dec, S, dec, G, 1.0)[0]
    T = S.copy()
    T[4] += 1e-9  # a row of norm 3.5: 1e-9 is far beyond its allowance
    ok, why = rownorm_matches(T, dec, S, dec, G, 1.0)
    assert not ok and "of its allowance" in why
    assert not rownorm_matches(S, dec * (1 + 1e-9), S, dec, G, 1.0)[0]


def test_fused_rownorm_checks_finiteness_through_its_sums(rng):
    """float32 input skips the device's separate NaN/inf pass: the fused column sums
    are finite exactly when every entry is, and a non-finite sum runs the check."""
    from hilbertgeom.gpu import _fused

    G = rng.standard_normal((50, 6)).astype(np.float32)
    calls = []
    _fused.projected_rownorm(G, np, True, 1.0, 0.0, check=lambda: calls.append(1))
    assert calls == []
    for bad in (np.inf, -np.inf, np.nan):
        H = G.copy()
        H[7, 2] = bad
        with pytest.raises(ValueError, match="checked"):
            _fused.projected_rownorm(H, np, True, 1.0, 0.0, check=lambda: (_ for _ in ()).throw(ValueError("checked")))
    H = np.full((4, 2), np.finfo(np.float32).max)  # the largest float32 entries: sums stay finite
    assert np.isfinite(_fused.column_sums(H.astype(np.float32), np)[1]).all()


def test_fused_rownorm_only_on_cupy():
    """The fused path is CUDA code: NumPy arrays keep the core's array-API kernel."""
    from hilbertgeom.gpu import _fused

    assert not _fused.fits(np.zeros((4, 3)), np)
    assert not _fused.fits(np.zeros((4, 3)), array_api_strict)


@requires_cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("d", [70, 8200])  # 8200: wide, no multiple of the block
def test_cupy_fused_rownorm_equals_the_core(dtype, center, d, rng):  # pragma: no cover - needs a GPU
    import cupy

    from hilbertgeom.gpu import _fused

    G = _rownorm_case(rng, dtype, center, V=3000, d=d)
    A = cupy.asarray(G)
    assert _fused.fits(A, cupy)
    S, dec = hgg.projected_rownorm(A, eta=0.3, center=center, return_decrease=True)
    Sc, dc = hg.projected_rownorm(G, eta=0.3, center=center, return_decrease=True)
    ok, why = rownorm_matches(cupy.asnumpy(S), dec, Sc, dc, G, 0.3)
    assert ok, why
    bad = G.copy()
    bad[17, 3] = np.nan
    with pytest.raises(ValueError, match="G must be finite; found 1 NaN/inf entry"):
        hgg.projected_rownorm(cupy.asarray(bad), center=True)
