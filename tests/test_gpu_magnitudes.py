"""Extreme magnitudes for hilbertgeom.gpu ("Reliability and the house"): every public
gpu function, run on host arrays (NumPy, array-api-strict) through the shared code
path, answers at ``2^a X`` what the core answers, at every ``a`` from subnormal
(``2^-1071``) to ``2^1020`` (where column sums of ``X`` overflow float64).

``X`` is a small integer matrix, so ``2^a X`` is exact.  The gpu wrappers bring a
gradient to unit size by an exact power of two at entry, as the core does, so:

* the answer equals the core's on the same input bit for bit (the same kernels, one
  row chunk in NumPy's summation order), or both raise the same ``ValueError`` where
  the answer is beyond float64;
* a scale-free answer (RowNorm's update, an equalized update, a ratio, a Hilbert
  distance, a worst-case hidden state) is the same bits at every ``a``; a homogeneous
  one (a decrease, ``T(G)``'s bounds, a diameter) is ``ldexp`` of the unit answer
  wherever that is a float64 with nothing rounded away.
"""

from __future__ import annotations

import dataclasses
import math

import array_api_strict
import numpy as np
import pytest
from helpers import kernel_rtol

import hilbertgeom as hg
import hilbertgeom.gpu as hgg
from hilbertgeom import _fp
from hilbertgeom.gpu._backend import accept_host_arrays

NAMESPACES = [pytest.param(np, id="numpy"), pytest.param(array_api_strict, id="array-api-strict")]
SCALES = [-1071, -1060, -500, 0, 500, 1020]

# zero-sum gradients: column running sums of OVER overflow at 2^1020 (and T(2^1020 OVER) is beyond
# float64: a ValueError on both sides); NEAR_TOP has T = 1.59e308 at 2^1020; SMALL is rank 2
# with a zero row
OVER = np.array([[7.0, 1.0], [7.0, -2.0], [7.0, 3.0], [-7.0, -2.0], [-7.0, 1.0], [-7.0, -1.0]])
NEAR_TOP = np.array([[7.0, 1.0], [7.0, -1.0], [-7.0, -1.0], [-7.0, 1.0]])
SMALL = np.array([[3.0, -1.0, 2.0], [-1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, -2.0, -1.0], [-2.0, 1.0, -1.0]])
# not zero-sum (center=True): its first column sums to 21 2^1020 at the top
SHIFTED = np.array([[7.0, 1.0], [7.0, 0.0], [7.0, -1.0]])
GRADIENTS = [("over", OVER, False), ("near_top", NEAR_TOP, False), ("small", SMALL, False),
             ("shifted", SHIFTED, True), ("small_centred", SMALL + 3.0, True)]
# rows (no zero-sum rule): offsets, duplicates, a wide spread of entries
ROWS = [("offset", np.array([[7.0, 5.0, -3.0], [6.0, 5.0, -2.0], [7.0, 4.0, -3.0], [-7.0, -1.0, 2.0]])),
        ("duplicates", np.array([[1.0, 2.0], [3.0, -1.0], [1.0, 2.0], [-4.0, 0.0]])),
        ("spread", np.array([[7.0, 0.0], [-7.0, 1.0], [1.0, -1.0]]))]


def x2(X, a: int) -> np.ndarray:
    """``2^a X``, checked exact (small integer matrices: exact for every ``a >= -1071``)."""
    Y = np.ldexp(np.asarray(X, dtype=np.float64), a)
    assert np.array_equal(np.ldexp(Y, -a), X)
    return Y


def _np(a):
    return np.asarray(a) if isinstance(a, (np.ndarray, float)) else np.from_dlpack(a)


def _bits(v):
    """A value with its float64 entries as bit patterns (``-0.0`` is not ``0.0``), recursively."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return tuple((f.name, _bits(getattr(v, f.name))) for f in dataclasses.fields(v))
    if isinstance(v, tuple):
        return tuple(_bits(x) for x in v)
    if isinstance(v, float):
        return ("f", np.float64(v).view(np.uint64).item())
    if isinstance(v, (int, str)) or v is None:
        return v
    A = _np(v)
    return ("a", A.shape, str(A.dtype), np.ascontiguousarray(A).tobytes())


def _finite(v) -> bool:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return all(_finite(getattr(v, f.name)) for f in dataclasses.fields(v))
    if isinstance(v, tuple):
        return all(_finite(x) for x in v)
    if isinstance(v, (str, int)) or v is None:
        return True
    return bool(np.isfinite(_np(v)).all())


def outcome(fn):
    """``("ok", value)`` or ``("ValueError", message)``."""
    try:
        return "ok", fn()
    except ValueError as exc:
        return "ValueError", str(exc)


def same_as_core(gpu_call, core_call):
    """The gpu answer is the core's bit for bit and finite, or both raise the same ValueError.
    Returns the gpu answer (``None`` after a ValueError)."""
    with accept_host_arrays():
        g = outcome(gpu_call)
    c = outcome(core_call)
    assert g[0] == c[0], (g, c)
    if g[0] == "ValueError":
        assert g[1] == c[1]
        return None
    assert _bits(g[1]) == _bits(c[1]), (g[1], c[1])
    assert _finite(g[1]), g[1]
    return g[1]


def ldexp_exact(v: float, a: int):
    """``v 2^a`` where it is a float64 with nothing rounded, else ``None``."""
    try:
        w = math.ldexp(v, a)
    except OverflowError:
        return None
    return w if math.ldexp(w, -a) == v else None


def check_law(unit: float, scaled: float, a: int):
    """A homogeneous answer is ``ldexp`` of the unit answer wherever that is exact."""
    w = ldexp_exact(unit, a)
    if w is not None:
        assert scaled == w, (unit, scaled, a)


# ----------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,G,center", GRADIENTS, ids=[g[0] for g in GRADIENTS])
@pytest.mark.parametrize("a", SCALES)
def test_projected_rownorm(xp, name, G, center, a):
    Ga = x2(G, a)
    got = same_as_core(lambda: hgg.projected_rownorm(xp.asarray(Ga), eta=0.7, center=center, return_decrease=True),
                       lambda: hg.projected_rownorm(Ga, eta=0.7, center=center, return_decrease=True))
    assert got is not None  # RowNorm is scale-free: always representable
    with accept_host_arrays():
        S0, d0 = hgg.projected_rownorm(xp.asarray(G), eta=0.7, center=center, return_decrease=True)
    assert _bits(got[0]) == _bits(S0)  # the same bits at every magnitude
    check_law(d0, got[1], a)


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,G,center", GRADIENTS, ids=[g[0] for g in GRADIENTS])
@pytest.mark.parametrize("a", SCALES)
def test_tension_bounds(xp, name, G, center, a):
    Ga = x2(G, a)
    with accept_host_arrays():
        g = outcome(lambda: hgg.tension_bounds(xp.asarray(Ga), center=center, tile=3))
        b0 = hgg.tension_bounds(xp.asarray(G), center=center, tile=3)
    c = outcome(lambda: hg.tension_bounds(Ga, center=center, tile=3))
    assert g[0] == c[0] and (g[0] == "ok" or g[1] == c[1]), (g, c)
    if g[0] == "ValueError":  # T(2^a G) beyond float64: the core's ValueError
        assert name == "over" and a == 1020
        return
    got, core = g[1], c[1]
    assert _finite(got)
    assert (got.lower_source, got.upper_source) == (core.lower_source, core.upper_source)
    assert got.lower == core.lower
    # the balanced flow's tiled distance sum runs in array_api_compat's namespace on the gpu
    # path and may round its last bit differently (as in tests/test_gpu.py)
    V = G.shape[0]
    assert got.upper == pytest.approx(core.upper, rel=kernel_rtol(V * (V - 1) // 2), abs=0)
    check_law(b0.lower, got.lower, a)
    check_law(b0.upper, got.upper, a)


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,G,center", GRADIENTS, ids=[g[0] for g in GRADIENTS])
@pytest.mark.parametrize("a", SCALES)
def test_evaluate_update_with_a_solve(xp, name, G, center, a):
    """With ``tension=`` a certificate for ``2^a G``, the report is the core's, bit for bit."""
    Ga = x2(G, a)
    U = hg.projected_rownorm(G, center=center) + np.arange(G.shape[1])  # a common row shift too
    try:
        t = _fp.scaled_certificate(hg.min_tension(G, center=center), a)
    except ValueError:  # T(2^a G) beyond float64
        assert name == "over" and a == 1020
        return
    got = same_as_core(lambda: hgg.evaluate_update(xp.asarray(Ga), xp.asarray(U), tension=t, center=center),
                       lambda: hg.evaluate_update(Ga, U, tension=t, center=center))
    assert got is not None


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,G,center", GRADIENTS, ids=[g[0] for g in GRADIENTS])
@pytest.mark.parametrize("a", SCALES)
def test_evaluate_update_with_the_device_bracket(xp, name, G, center, a):
    """``tension=None``: the core's formula on the device bracket of ``T`` (the core's
    ``tension_bounds``), at unit size and reported for ``2^a G``; scale-free ratios."""
    Ga = x2(G, a)
    U = hg.projected_rownorm(G, center=center)

    def core():  # the core's formula on P G at unit size, with the device bracket there
        Gs, X, _, k = _fp.zero_sum_at_unit(Ga, center)
        with accept_host_arrays():
            b = hgg.tension_bounds(xp.asarray(Gs), center=center)  # unit size: the same bits as inside
        if math.isinf(_fp.ldexp_inf(b.upper, -k)):
            raise ValueError("tension_bounds: the upper bound on T(G) exceeds the float64 range; scale G down")
        return hg.updates._update_report(X, U, b.upper, b.lower, b.upper, g_shift=k)

    got = same_as_core(lambda: hgg.evaluate_update(xp.asarray(Ga), xp.asarray(U), center=center), core)
    if got is None:
        assert name == "over" and a == 1020
        return
    with accept_host_arrays():
        r0 = hgg.evaluate_update(xp.asarray(G), xp.asarray(U), center=center)
    assert (got.decrease_ratio, got.decrease_ratio_bounds, got.diameter) == (
        r0.decrease_ratio, r0.decrease_ratio_bounds, r0.diameter)
    check_law(r0.decrease, got.decrease, a)
    check_law(r0.tension, got.tension, a)


@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,G", [(n, G) for n, G, c in GRADIENTS if not c],
                         ids=[g[0] for g in GRADIENTS if not g[2]])
@pytest.mark.parametrize("a", SCALES)
def test_equalize_rows(xp, name, G, a):
    """The equalizer's update is scale-free (the same bits at every ``a``), its decreases
    homogeneous; and it is the core's run up to the order of the centring's sums."""
    Ga = x2(G, a)
    with accept_host_arrays():
        r = hgg.equalize_rows(xp.asarray(Ga), iters=8, tile=2)
        r0 = hgg.equalize_rows(xp.asarray(G), iters=8, tile=2)
    assert _bits(r.update) == _bits(r0.update)
    for f in ("decrease", "rownorm_decrease"):  # inf only where 2^a times the unit value is
        assert math.isfinite(getattr(r, f)) or ldexp_exact(getattr(r0, f), a) is None
    assert (r.separation_ratio, r.start_separation_ratio, r.diameter, r.rownorm_diameter, r.iterations,
            r.stop) == (r0.separation_ratio, r0.start_separation_ratio, r0.diameter, r0.rownorm_diameter,
                        r0.iterations, r0.stop)
    check_law(r0.decrease, r.decrease, a)
    check_law(r0.rownorm_decrease, r.rownorm_decrease, a)
    c = hg.equalize_rows(Ga, iters=8, tile=2)
    k = kernel_rtol(G.shape[0])  # G is centred once more on the gpu path, in its own order
    np.testing.assert_allclose(_np(r.update), c.update, rtol=0, atol=k)
    assert r.iterations == c.iterations
    assert r.decrease == pytest.approx(c.decrease, rel=k, abs=0) or r.decrease == c.decrease == math.inf


def test_a_gradient_that_spans_too_much_is_a_value_error():
    """Entries near 1e308 next to the smallest subnormal: no exact scaling exists and the
    column sums at k = 0 overflow, so the answer cannot be computed: a ValueError saying so
    (the core's tension_bounds says the same; its projected_rownorm returns zeros here)."""
    G = np.ldexp(OVER, 1020)
    G[:2, 1] = [2.0**-1074, -(2.0**-1074)]
    same_as_core(lambda: hgg.tension_bounds(G), lambda: hg.tension_bounds(G))
    for fn in (hgg.projected_rownorm, hgg.tension_bounds, lambda g: hgg.evaluate_update(g, g), hgg.equalize_rows):
        with accept_host_arrays(), pytest.raises(ValueError, match="spans more than the float64 range"):
            fn(G)


def test_zero_sum_error_names_the_input_as_given():
    """The zero-sum rule runs at unit size; its message gives G's own column sums."""
    G = x2(SHIFTED, 500)
    with pytest.raises(ValueError) as core:
        hg.projected_rownorm(G)
    for fn in (hgg.projected_rownorm, hgg.tension_bounds, hgg.equalize_rows):
        with accept_host_arrays(), pytest.raises(ValueError) as err:
            fn(G)
        assert str(err.value) == str(core.value) and f"{21.0 * 2.0**500:.2e}" in str(err.value)


# ----------------------------------------------------------------------------- rows and head
@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("name,S", ROWS + [(n, G) for n, G, _ in GRADIENTS],
                         ids=[r[0] for r in ROWS] + [g[0] for g in GRADIENTS])
@pytest.mark.parametrize("a", SCALES)
def test_row_functions(xp, name, S, a):
    Sa = x2(S, a)
    with accept_host_arrays():
        C0 = _np(hgg.center_rows(xp.asarray(S)))
    C = same_as_core(lambda: hgg.center_rows(xp.asarray(Sa)), lambda: hg.center_rows(Sa))
    if C is not None:
        with np.errstate(over="ignore"):
            W = np.ldexp(C0, a)
            exact = np.ldexp(W, -a) == C0  # 2^a C0 is a float64 with nothing rounded
        np.testing.assert_array_equal(_np(C)[exact], W[exact])
    for norm in (2, 1, math.inf):
        same_as_core(lambda n=norm: hgg.row_diameter(xp.asarray(Sa), norm=n, return_pair=True),
                     lambda n=norm: hg.row_diameter(Sa, norm=n, return_pair=True))
        same_as_core(lambda n=norm: hgg.closest_pair(xp.asarray(Sa), norm=n),
                     lambda n=norm: hg.closest_pair(Sa, norm=n))
        h = same_as_core(lambda n=norm: hgg.worst_case_hidden(xp.asarray(Sa), hidden_norm=n, radius=3.0),
                         lambda n=norm: hg.worst_case_hidden(Sa, hidden_norm=n, radius=3.0))
        with accept_host_arrays():
            h0 = hgg.worst_case_hidden(xp.asarray(S), hidden_norm=norm, radius=3.0)
        assert _bits(h) == _bits(h0)  # the direction of the farthest pair: scale-free
        v = same_as_core(lambda n=norm: hgg.head_norm(xp.asarray(Sa), hidden_norm=n, radius=3.0),
                         lambda n=norm: hg.head_norm(Sa, hidden_norm=n, radius=3.0))
        with accept_host_arrays():
            check_law(hgg.head_norm(xp.asarray(S), hidden_norm=norm, radius=3.0), v, a)


# ----------------------------------------------------------------------------- metric
@pytest.mark.parametrize("xp", NAMESPACES)
@pytest.mark.parametrize("a", SCALES)
@pytest.mark.parametrize("b", [-1071, 0, 1020])
def test_metric_functions(xp, a, b):
    p = np.array([[1.0, 7.0, 3.0, 0.0], [2.0, 2.0, 5.0, 1.0]])
    q = np.array([[6.0, 1.0, 2.0, 0.0], [1.0, 3.0, 4.0, 7.0]])
    z = np.array([[7.0, -7.0, 1.0], [0.0, 3.0, -5.0]])
    z2 = np.array([[-7.0, 7.0, 2.0], [1.0, 1.0, 6.0]])
    pa, qb, za, z2a = x2(p, a), x2(q, b), x2(z, a), x2(z2, a)
    H = same_as_core(lambda: hgg.hilbert_distance(xp.asarray(pa), xp.asarray(qb)),
                     lambda: hg.hilbert_distance(pa, qb))
    assert _bits(H) == _bits(hg.hilbert_distance(p, q))  # degree 0 in p and in q
    v = same_as_core(lambda: hgg.variation_norm(xp.asarray(za)), lambda: hg.variation_norm(za))
    s = same_as_core(lambda: hgg.softmax_hilbert_distance(xp.asarray(za), xp.asarray(z2a)),
                     lambda: hg.softmax_hilbert_distance(za, z2a))
    for got, unit in ((v, hg.variation_norm(z)), (s, hg.softmax_hilbert_distance(z, z2))):
        if got is not None:
            for g, u in zip(_np(got).ravel().tolist(), _np(unit).ravel().tolist(), strict=True):
                check_law(u, g, a)
