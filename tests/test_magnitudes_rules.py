"""Extreme magnitudes, part two: tension, the update rules, hilbertgeom.testing and
hilbertgeom.gradients ("Reliability and the house", deliverables 1-2).

The same two kinds of law as tests/test_magnitudes.py, over inputs ``2^a X`` with ``X``
a small integer matrix and ``a`` from ``-1071`` (subnormal, ``1e-322``) to ``1020``
(``1e307``, where column sums overflow).  Multiplying by a power of two is exact, so:

* a scale-free answer (an update rule, RowNorm, a potential, a verdict of
  ``assert_steepest``) is the *same bits* at every magnitude;
* a homogeneous one (a decrease, ``T(G)``, its bounds) is ``ldexp`` of the unit
  answer (one rounding where it is subnormal), or a ``ValueError`` naming the
  argument where that is beyond float64;
* the step size ``eta = 2^b`` scales an update exactly: ``f(G, eta=2^b) ==
  ldexp(f(G, eta=1), b)`` for ``b`` in ``[-1073, 1023]``.

Decimal scales (``10^p``, ``p`` in ``[-300, 300]``: a different rounding of the same
problem) are checked within the tolerance policy of :mod:`hilbertgeom.tolerances`.

:func:`test_every_public_function_has_a_magnitude_test` keeps a table of every public
callable with the test that checks its magnitudes, or the reason it has no magnitude to
check; a new public function fails it until it is added.
"""

from __future__ import annotations

import ast
import math
import pathlib
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg
from hilbertgeom import gradients as hgrad
from hilbertgeom import testing as ht
from hilbertgeom.tolerances import tolerance

EXACT = tolerance("exact")
SOLVER = tolerance("solver")

A_ALL = st.integers(-1071, 1020)      # subnormal .. 1e307 (capped per matrix, see cap)
B_ETA = st.integers(-1073, 1023)      # eta = 2^b: eta / 2 stays exact
P_DEC = st.integers(-300, 300)        # decimal scales 10^p


# ----------------------------------------------------------------------------- inputs
def ints(shape, lo=-7, hi=7):
    return hnp.arrays(np.float64, shape, elements=st.integers(lo, hi).map(float))


def _zero_sum(shape):
    """Rows 1..V-1 drawn, the last row minus their sum (entries up to 7 (V - 1))."""
    V, d = shape
    return ints((V - 1, d)).map(lambda A: np.vstack([A, -A.sum(axis=0)]))


def _mirrored(shape):
    """``[A; -A]``: zero column sums whose partial sums are large (they overflow near 1e308)."""
    V, d = shape
    return ints((V, d)).map(lambda A: np.vstack([A, -A]))


def zero_sum(V=(2, 5), d=(1, 3)):
    shapes = st.tuples(st.integers(*V), st.integers(*d))
    return st.one_of(shapes.flatmap(_zero_sum), shapes.flatmap(_mirrored))


ZS = zero_sum()
MATS = st.tuples(st.integers(2, 5), st.integers(1, 3)).flatmap(ints)

# columns of +-7 2^1020 whose running sums overflow float64 (2.4e308) though every
# entry, and the answer, is representable
OVER = np.array([[7.0, 1.0], [7.0, -2.0], [7.0, 3.0], [-7.0, -2.0], [-7.0, 1.0], [-7.0, -1.0]])
SMALL = np.array([[3.0, -1.0, 2.0], [-1.0, 2.0, 0.0], [0.0, -2.0, -1.0], [-2.0, 1.0, -1.0]])
# not zero-sum (center=True): its first column sums to 21 2^1020 (beyond float64), yet P G
# and T(P G) = 2^1020 are representable
SHIFTED = np.array([[7.0, 1.0], [7.0, 0.0], [7.0, -1.0]])
# zero-sum, T = 1.59e308 at 2^1020: the largest T of these tests
NEAR_TOP = np.array([[7.0, 1.0], [7.0, -1.0], [-7.0, -1.0], [-7.0, 1.0]])


def cap(X, a: int) -> int:
    """``a`` lowered so that ``2^a max |X| < 2^1023`` (every entry representable)."""
    top = float(np.abs(X).max())
    return a if top == 0 else min(a, 1023 - math.frexp(top)[1])


def x2(X, a: int):
    """``2^a X``, checked exact (integer matrices: exact for every ``a >= -1071``)."""
    Y = np.ldexp(np.asarray(X, dtype=np.float64), a)
    assert np.array_equal(np.ldexp(Y, -a), X)
    return Y


def scaled_or_none(v: float, a: int):
    """``ldexp(v, a)`` correctly rounded, or None where it is beyond float64."""
    try:
        return math.ldexp(v, a)
    except OverflowError:
        return None


def unit(fn, *args, **kw):
    """``fn(*args, **kw)`` on the unit-scale input; an example whose *unit* solve misses
    its tolerance is not a magnitude case and is rejected (see
    test_min_tension_merged_equal_rows_with_a_balanced_flow for the one known)."""
    try:
        return fn(*args, **kw)
    except hg.SolverError:
        assume(False)


def exact_scale(v: float, a: int) -> bool:
    """Whether ``2^a v`` is a float64 with nothing rounded."""
    w = scaled_or_none(v, a)
    return w is not None and math.ldexp(w, -a) == v


def same(got, want):
    """Bit for bit (``-0.0 == 0.0``, as the rules fold signed zeros)."""
    np.testing.assert_array_equal(got, want)


def expect_scaled(fn, base: float, a: int, match: str):
    """``fn()`` is ``ldexp(base, a)`` exactly, or raises ValueError where that overflows."""
    want = scaled_or_none(base, a)
    if want is None:
        with pytest.raises(ValueError, match=match):
            fn()
        return None
    got = fn()
    assert got == want, (got, want, a)
    return got


# ============================================================================= tension
@given(st.one_of(ZS.map(lambda G: (G, False)), MATS.map(lambda G: (G, True))), A_ALL, B_ETA,
       st.sampled_from([0, 1, 3]))
@example((OVER, False), 1020, 0, 0)
@example((SHIFTED, True), 1020, 1023, 1)
@example((SMALL, False), -1071, -1073, 1)
@example((np.array([[7.0, 7.0], [7.0, 7.0], [-7.0, -7.0], [-7.0, -7.0]]), False), 1020, 1023, 0)  # decrease 4e308
def test_projected_rownorm(Gc, a, b, eps):
    """``S`` is scale-free in ``G`` (with ``eps`` scaled alike) and exactly linear in
    ``eta``; the decrease ``(eta/2) sum ||g_i||`` is homogeneous in both."""
    G, center = Gc
    a = cap(G, a)
    S0, dec0 = hg.projected_rownorm(G, eps=eps, center=center, return_decrease=True)
    Ga, eps_a = x2(G, a), math.ldexp(eps, a)
    same(hg.projected_rownorm(Ga, eps=eps_a, center=center), S0)
    expect_scaled(lambda: hg.projected_rownorm(Ga, eps=eps_a, center=center, return_decrease=True)[1],
                  dec0, a, "decrease")
    eta = math.ldexp(1.0, b)
    same(hg.projected_rownorm(Ga, eta=eta, eps=eps_a, center=center), np.ldexp(S0, b))
    expect_scaled(lambda: hg.projected_rownorm(Ga, eta=eta, eps=eps_a, center=center, return_decrease=True)[1],
                  dec0, a + b, "decrease")


@given(MATS, A_ALL, B_ETA, st.sampled_from([0, 1, 3]))
@example(np.array([[7.0, 7.0], [7.0, -7.0]]), 1020, 1023, 0)
@example(np.array([[1.0, 0.0], [0.0, 1.0]]), -1071, -1073, 0)
@example(SMALL, -1071, 0, 1)
@example(SMALL, -1060, -1073, 3)
def test_rownorm_and_rownorm_update(G, a, b, eps):
    a = cap(G, a)
    N0 = hg.rownorm(G, eps=eps)
    same(hg.rownorm(x2(G, a), eps=math.ldexp(eps, a)), N0)
    same(hg.rownorm_update(x2(G, a), eta=math.ldexp(1.0, b)), np.ldexp(hg.rownorm_update(G), b))


@given(MATS, st.lists(st.integers(-1071, 1016), min_size=5, max_size=5))
@example(np.array([[7.0, 7.0], [3.0, 4.0], [1.0, 0.0]]), [1016, -1071, 0, 0, 0])
@example(np.array([[1.0, 1.0], [1.0, 1.0]]), [-1071, 1016, 0, 0, 0])
def test_rownorm_row_by_row(G, rows):
    """RowNorm acts on each row alone: ``RN(D G) == RN(G)`` bit for bit for a
    power-of-two diagonal ``D`` whose entries span the whole range (rows at
    ``1e-322`` next to rows at ``1e306``)."""
    e = np.array(rows[: G.shape[0]]).reshape(-1, 1)
    DG = np.ldexp(G, e)
    assert np.array_equal(np.ldexp(DG, -e), G)
    same(hg.rownorm(DG), hg.rownorm(G))


@given(MATS, P_DEC)
def test_rownorm_decimal_scales(G, p):
    """``10^p G`` is ``G`` scaled and rounded once: each unit row moves by a kernel rounding."""
    N = hg.rownorm(G * 10.0**p)
    assert np.abs(N - hg.rownorm(G)).max() <= tolerance("kernel", d=G.shape[1]).rtol


@given(st.one_of(ZS.map(lambda G: (G, False)), MATS.map(lambda G: (G, True))), A_ALL)
@example((OVER, False), 1020)
@example((SHIFTED, True), 1020)
@example((NEAR_TOP, False), 1020)
@example((SMALL, False), -1060)
def test_tension_bounds(Gc, a):
    """Both bounds are ``2^a`` times the unit bounds (same sources), or a ValueError
    naming ``G`` where the upper bound is beyond float64."""
    G, center = Gc
    a = cap(G, a)
    b0 = hg.tension_bounds(G, center=center)
    if scaled_or_none(b0.upper, a) is None:
        with pytest.raises(ValueError, match="G"):
            hg.tension_bounds(x2(G, a), center=center)
        return
    b = hg.tension_bounds(x2(G, a), center=center)
    # 2^a times the unit bounds, rounded outward where they are subnormal (exact elsewhere)
    lo, hi = Fraction(b0.lower) * Fraction(2) ** a, Fraction(b0.upper) * Fraction(2) ** a
    assert Fraction(b.lower) <= lo < Fraction(np.nextafter(b.lower, math.inf))
    assert Fraction(np.nextafter(b.upper, -math.inf)) < hi <= Fraction(b.upper)
    assert (b.lower_source, b.upper_source) == (b0.lower_source, b0.upper_source)


@given(ZS, P_DEC)
def test_tension_bounds_decimal_scales(G, p):
    """``10^p G`` (rounded once): its bracket and ``10^p`` times the unit bracket overlap,
    to a kernel rounding of the ``V d`` entries."""
    s = 10.0**p
    b0, b = hg.tension_bounds(G), hg.tension_bounds(G * s, center=True)
    k = tolerance("kernel", d=G.size).rtol
    assert b.lower <= b.upper and math.isfinite(b.upper)
    assert b.lower <= s * b0.upper * (1 + k) and s * b0.lower <= b.upper * (1 + k)


@settings(max_examples=25)
@given(ZS, A_ALL)
@example(OVER, 1020)
@example(SMALL, -1060)
def test_tension_bracket(G, a):
    """The bracket of ``2^a G`` is ``2^a`` times the unit bracket, rounded outward (the
    grouping and the reduced solve run at unit size; only the two bounds are scaled),
    or a ValueError naming ``G`` where the upper bound is beyond float64."""
    a = cap(G, a)
    b0 = hg.tension_bracket(G, rows=2, keep=1, steps=5)
    if scaled_or_none(b0.upper, a) is None:
        with pytest.raises(ValueError, match="G"):
            hg.tension_bracket(x2(G, a), rows=2, keep=1, steps=5)
        return
    b = hg.tension_bracket(x2(G, a), rows=2, keep=1, steps=5)
    # 2^a times the unit bounds, rounded outward: exact in the normal range; in the
    # subnormal range the largest float below (lower) and the smallest above (upper)
    lo, hi = Fraction(b0.lower) * Fraction(2) ** a, Fraction(b0.upper) * Fraction(2) ** a
    assert Fraction(b.lower) <= lo < Fraction(np.nextafter(b.lower, math.inf))
    assert Fraction(np.nextafter(b.upper, -math.inf)) < hi <= Fraction(b.upper)
    assert np.array_equal(b.potential, b0.potential) and np.array_equal(b.labels, b0.labels)


SOLVED = zero_sum(V=(2, 4), d=(1, 2))


@settings(max_examples=15)
@given(SOLVED, A_ALL)
@example(NEAR_TOP, 1020)   # T = 1.59e308
@example(OVER, 1020)       # T beyond float64
@example(SMALL, -1071)       # the cost, rounded to nearest, would fall below 2^a times the unit cost
@example(SMALL, -1070)       # the value, rounded to nearest, would rise above 2^a times the unit value
def test_min_tension(G, a):
    """``T(2^a G)``: the same solve at unit size, its certificate scaled back: the same
    potential, ``value`` and ``flow.cost`` equal to ``2^a`` times the unit ones (rounded
    outward where they are subnormal), or a ValueError naming ``G`` where the bracket is
    beyond float64."""
    a = cap(G, a)
    r0 = unit(hg.min_tension, G)
    if scaled_or_none(r0.flow.cost, a) is None:
        with pytest.raises(ValueError, match="G"):
            hg.min_tension(x2(G, a))
        return
    r = hg.min_tension(x2(G, a))
    # 2^a times the unit bounds, rounded outward: exact in the normal range; in the
    # subnormal range the largest float below (value) and the smallest above (cost)
    lo, hi = Fraction(r0.value) * Fraction(2) ** a, Fraction(r0.flow.cost) * Fraction(2) ** a
    assert Fraction(r.value) <= lo < Fraction(np.nextafter(r.value, math.inf))
    assert Fraction(np.nextafter(r.flow.cost, -math.inf)) < hi <= Fraction(r.flow.cost)
    assert r.value + r.gap >= r.flow.cost and r.status == r0.status
    same(r.potential, r0.potential)


@settings(max_examples=10)
@given(SOLVED, P_DEC)
def test_min_tension_decimal_scales(G, p):
    """``T(10^p G)`` within the two certified brackets, to a kernel rounding of the entries."""
    s = 10.0**p
    r0 = unit(hg.min_tension, G)
    r = hg.min_tension(G * s, center=True)
    k = tolerance("kernel", d=G.size).rtol
    assert math.isfinite(r.flow.cost) and r.value <= r.flow.cost
    assert r.value <= s * r0.flow.cost * (1 + k) and s * r0.value <= r.flow.cost * (1 + k)


@settings(max_examples=15)
@given(SOLVED, A_ALL, B_ETA)
@example(SMALL, -1071, -1073)
@example(NEAR_TOP, 1020, 1023)
def test_steepest_descent(G, a, b):
    """``S = -eta Phi`` is scale-free in ``G`` and exactly linear in ``eta`` wherever
    ``T(2^a G)`` is representable (and where it is not: the test below)."""
    a = cap(G, a)
    r0 = unit(hg.min_tension, G)
    assume(scaled_or_none(r0.flow.cost, a) is not None)
    S0 = hg.steepest_descent(G, tension=r0)
    same(hg.steepest_descent(x2(G, a)), S0)
    same(hg.steepest_descent(x2(G, a), eta=math.ldexp(1.0, b)), np.ldexp(S0, b))


def test_steepest_descent_where_T_overflows():
    """S = -eta Phi is scale-free and representable where T(G) itself overflows: the solve
    runs at unit size."""
    same(hg.steepest_descent(x2(OVER, 1020)), hg.steepest_descent(OVER))


def test_min_tension_merged_equal_rows_with_a_balanced_flow():
    """Merging the equal rows (classes 2 x 3, 6, -2 x 3, -6 become four rows +-6) leaves a
    flow whose residual, balanced over the classes, costs more spread over the rows (15
    against T = 12): the solve falls back to the rows as given.  Closed form (I14, d = 1):
    T = ||g||_1 / 2 = 12."""
    G = np.array([[2.0], [2.0], [2.0], [6.0], [-2.0], [-2.0], [-2.0], [-6.0]])
    r = hg.min_tension(G)
    assert r.status == "optimal" and r.value <= 12.0 <= r.flow.cost


# ============================================================================= update rules
@given(st.one_of(ZS.map(lambda G: (G, False)), MATS.map(lambda G: (G, True))), A_ALL, B_ETA)
@example((OVER, False), 1020, 1023)
@example((SHIFTED, True), 1020, 0)
@example((SMALL, False), -1071, -1073)
def test_linf_steepest_descent(Gc, a, b):
    G, center = Gc
    a = cap(G, a)
    S0 = hg.linf_steepest_descent(G, center=center)
    same(hg.linf_steepest_descent(x2(G, a), eta=math.ldexp(1.0, b), center=center), np.ldexp(S0, b))


@given(MATS, A_ALL, B_ETA)
@example(OVER, 1020, 0)
@example(SMALL, -1071, 1023)
@example(np.array([[7.0, 0.0], [0.0, 1.0]]), -1060, -1073)
def test_polar_and_sign_update(G, a, b):
    a = cap(G, a)
    eta = math.ldexp(1.0, b)
    same(hg.polar_update(x2(G, a), eta=eta), np.ldexp(hg.polar_update(G), b))
    same(hg.sign_update(x2(G, a), eta=eta), np.ldexp(hg.sign_update(G), b))


@given(MATS, P_DEC)
def test_sign_update_decimal_scales(G, p):
    same(hg.sign_update(G * 10.0**p), hg.sign_update(G))


REPORT_FREE = ("decrease_ratio", "decrease_ratio_bounds", "column_sum", "separation_ratio",
               "diameter", "min_separation", "max_separation")


def check_report(rep, rep0, a: int, rule: str = ""):
    """``evaluate_update(2^a G, S)`` against ``evaluate_update(G, S)``: every scale-free
    field the same bits, ``tension`` and ``decrease`` scaled by ``2^a`` (``inf`` only
    where the value is beyond float64, as documented)."""
    for f in REPORT_FREE:
        assert getattr(rep, f) == getattr(rep0, f), (rule, f)
    assert rep.tension == math.ldexp(rep0.tension, a), rule
    want = scaled_or_none(rep0.decrease, a)
    assert rep.decrease == (want if want is not None else math.copysign(math.inf, rep0.decrease)), rule


def scaled_tension(ten, a: int):
    """The certificate of ``min_tension(G)`` as that of ``2^a G`` (exact)."""
    return replace(ten, value=math.ldexp(ten.value, a), flow=replace(ten.flow, cost=math.ldexp(ten.flow.cost, a)))


@settings(max_examples=25)
@given(st.one_of(zero_sum(V=(2, 4), d=(1, 2)).map(lambda G: (G, False)),
                 st.tuples(st.integers(2, 4), st.integers(1, 2)).flatmap(ints).map(lambda G: (G, True))),
       A_ALL, st.integers(-1000, 1000))
@example((SHIFTED, True), 1020, 0)
@example((NEAR_TOP, False), 1020, 0)
@example((SMALL, False), -1071, -1000)
def test_evaluate_update(Gc, a, c):
    """``evaluate_update(2^a G, 2^c S)`` with the unit solve scaled by ``2^a``: the
    scale-free fields the same, the rest scaled (tests/test_updates.py checks fixed
    scales; this one every scale, and column sums beyond float64)."""
    G, center = Gc
    a = cap(G, a)
    S = hg.projected_rownorm(G, center=center)
    ten = unit(hg.min_tension, G, center=center)
    # a solve passed in is taken as it is: its value and cost must be those of 2^a G exactly
    # (bench_updates below solves at every magnitude itself)
    assume(all(exact_scale(v, a) for v in (ten.value, ten.flow.cost)))
    Sc = np.ldexp(S, c)
    assume(np.array_equal(np.ldexp(Sc, -c), S))
    rep0 = hg.evaluate_update(G, Sc, tension=ten, center=center)
    check_report(hg.evaluate_update(x2(G, a), Sc, tension=scaled_tension(ten, a), center=center), rep0, a)


def test_evaluate_update_solves_at_unit_size():
    """Without ``tension``: column sums beyond float64 (``SHIFTED``, centred) and
    ``T = 1.59e308`` (``NEAR_TOP``): the same report as at unit size."""
    for G, center in ((SHIFTED, True), (NEAR_TOP, False)):
        S = hg.projected_rownorm(G, center=center)
        rep0 = hg.evaluate_update(G, S, center=center)
        check_report(hg.evaluate_update(x2(G, 1020), S, center=center), rep0, 1020)


@settings(max_examples=8)
@given(zero_sum(V=(3, 4), d=(1, 2)), A_ALL)
@example(NEAR_TOP, 1020)
@example(SMALL, -1071)
def test_bench_updates(G, a):
    """Every rule on ``2^a G``: the same reports up to the scaled fields, or the solve's
    ValueError naming ``G`` where ``T(2^a G)`` is beyond float64."""
    a = cap(G, a)
    rows0 = unit(hg.bench_updates, cases={"g": G})
    if scaled_or_none(hg.min_tension(G).flow.cost, a) is None:
        with pytest.raises(ValueError, match="G"):
            hg.bench_updates(cases={"g": x2(G, a)})
        return
    rows = hg.bench_updates(cases={"g": x2(G, a)})
    assert [r[:2] for r in rows] == [r[:2] for r in rows0]
    for (_, rule, rep), (_, _, rep0) in zip(rows, rows0, strict=True):
        check_report(rep, rep0, a, rule)


# ============================================================================= hilbertgeom.testing
NORM_NAMES = sorted(ht.NORMS)


@pytest.mark.parametrize("norm", NORM_NAMES)
@settings(max_examples=12)
@given(G=zero_sum(V=(2, 4), d=(1, 2)), a=A_ALL, b=B_ETA)
@example(G=OVER, a=1020, b=0)
@example(G=SMALL, a=-1071, b=-1073)
def test_steepest_step(norm, G, a, b):
    a = cap(G, a)
    S0 = unit(ht.steepest_step, G, norm=norm)
    same(ht.steepest_step(x2(G, a), norm=norm, eta=math.ldexp(1.0, b)), np.ldexp(S0, b))


def verdict(fn, *args, **kw) -> bool:
    try:
        fn(*args, **kw)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("norm", NORM_NAMES)
@settings(max_examples=8)
@given(G=zero_sum(V=(2, 4), d=(1, 2)), a=A_ALL, k=st.integers(-900, 900))
@example(G=OVER, a=1020, k=0)
@example(G=SMALL, a=-1071, k=-900)
@example(G=SMALL, a=-1060, k=900)
def test_assert_steepest_verdict(norm, G, a, k):
    """The verdict on ``(2^k S, 2^a G, eta = 2^k)`` is the verdict on ``(S, G, 1)``: the
    exact step passes at every magnitude, a step short by ``4 rtol`` fails."""
    a = cap(G, a)
    S0 = unit(ht.steepest_step, G, norm=norm)
    r = ht.default_rtol(norm, shape=G.shape)
    Ga, eta = x2(G, a), math.ldexp(1.0, k)
    for S, passes in ((S0, True), (S0 * (1 - 4 * r), None)):
        Sk = np.ldexp(S, k)
        assume(np.array_equal(np.ldexp(Sk, -k), S))
        at_unit = unit(verdict, ht.assert_steepest, S, G, norm=norm)
        if passes is not None:
            assert at_unit is passes
        assert verdict(ht.assert_steepest, Sk, Ga, norm=norm, eta=eta) is at_unit, (norm, a, k)


@settings(max_examples=10)
@given(G=zero_sum(V=(2, 4), d=(1, 2)), a=A_ALL, c=st.integers(-1000, 1000))
@example(G=OVER, a=1020, c=0)
@example(G=SMALL, a=-1071, c=-1000)
def test_assert_decrease_ratio_verdict(G, a, c):
    """``rho(S)`` is degree 0 in ``S`` and ``G``: the verdicts at ``(2^c S, 2^a G)``
    are those at ``(S, G)``, with the solve made here or passed scaled."""
    a = cap(G, a)
    S = hg.projected_rownorm(G)
    ten = unit(hg.min_tension, G)
    Sc = np.ldexp(S, c)
    assume(np.array_equal(np.ldexp(Sc, -c), S))
    Ga = x2(G, a)
    lo = hg.evaluate_update(G, S, tension=ten).decrease_ratio_bounds[0]
    assert verdict(ht.assert_decrease_ratio, Sc, Ga, at_least=lo * (1 - EXACT.rtol))   # solved here
    if not all(exact_scale(v, a) for v in (ten.value, ten.flow.cost)):
        return   # a solve passed in is taken as it is: it must be that of 2^a G exactly
    ten_a = scaled_tension(ten, a)
    for at_least in (0.5, lo * (1 - EXACT.rtol), 1.0):
        at_unit = verdict(ht.assert_decrease_ratio, S, G, at_least=at_least, tension=ten)
        assert verdict(ht.assert_decrease_ratio, Sc, Ga, at_least=at_least, tension=ten_a) is at_unit, at_least


# ============================================================================= hilbertgeom.gradients
@given(st.tuples(st.integers(2, 6), st.integers(1, 3)).flatmap(lambda s: ints(s, -7, 7)), A_ALL,
       st.integers(2, 6))
@example(OVER, 1020, 4)
@example(np.array([[3.0, 4.0], [5.0, 0.0], [4.0, 3.0], [0.0, 1.0]]), -1071, 3)   # three rows of norm 5
@example(np.array([[1.0, 0.0], [1.0, 0.0], [7.0, 7.0]]), -1074 + 3, 2)
def test_top_rows(G, a, n):
    """The rows kept are the same at every magnitude (ties towards the smaller index,
    by exact norms), and the re-centred rows scale by ``2^a`` exactly (or a
    ValueError naming ``G`` where they are beyond float64)."""
    from fractions import Fraction

    assume(n <= G.shape[0])
    a = cap(G, a)
    G0, idx0 = hgrad.top_rows(G, n, return_index=True)
    norms = [sum(Fraction(float(v)) ** 2 for v in row) for row in G]
    want = sorted(sorted(range(len(norms)), key=lambda i: (-norms[i], i))[:n])
    assert idx0.tolist() == want
    C = np.ldexp(G0, a)
    if not np.isfinite(C).all():
        with pytest.raises(ValueError, match="G"):
            hgrad.top_rows(x2(G, a), n)
        return
    Ga, idx = hgrad.top_rows(x2(G, a), n, return_index=True)
    same(idx, idx0)
    same(Ga, C)   # centred at unit size, rounded once


@settings(max_examples=12)
@given(st.integers(3, 30), st.integers(2, 4), st.integers(2, 12), st.integers(0, 2**16), st.integers(-1074, 1023))
@example(20, 3, 8, 0, 1023)
@example(20, 3, 8, 0, -1074)
def test_synthetic_head_gradient_logit_scale(V, d, batch, seed, b):
    """``logit_scale = 2^b``: a finite gradient (zero column sums to rounding) at every
    scale.  Below ``2^-80`` every softmax is uniform to the last bit, so ``G`` and
    the loss are those of ``2^-80``; above ``2^64`` every softmax is one-hot, so ``G``
    is that of ``2^64`` and the loss (a max logit minus a target logit, exactly
    ``2^b`` times that of ``2^0`` logits) is ``2^(b - 64)`` times that of ``2^64`` --
    or a ValueError naming ``logit_scale`` where the logits leave float64."""
    def make(e):
        return hgrad.synthetic_head_gradient(V, d, batch=batch, seed=seed, logit_scale=math.ldexp(1.0, e))

    try:
        g = make(b)
    except ValueError as exc:
        assert "logit_scale" in str(exc) and b > 64
        return
    assert np.isfinite(g.G).all() and math.isfinite(g.loss)
    colsum = np.abs(g.G.sum(axis=0)).max()
    assert colsum <= tolerance("kernel", d=V).rtol * np.abs(g.G).sum(axis=0).max()
    if b <= -80:
        small = make(-80)
        same(g.G, small.G)
        assert g.loss == small.loss
    if b >= 64:
        big = make(64)
        same(g.G, big.G)
        assert g.loss == math.ldexp(big.loss, b - 64)


# ============================================================================= coverage
def _t(*names: str) -> tuple[str, ...]:
    return names


NO_SCALE = "no magnitude to check: "

# every public callable -> the tests that check its magnitudes ("file::test"), or why none
MAGNITUDE_TESTS: dict[str, tuple[str, ...] | str] = {
    # metric
    "hilbertgeom.hilbert_distance": _t("test_magnitudes.py::test_hilbert_distance_projective",
                                       "test_magnitudes.py::test_hilbert_distance_of_slices_spanning_the_whole_range"),
    "hilbertgeom.variation_norm": _t("test_magnitudes.py::test_variation_norm_homogeneous"),
    "hilbertgeom.softmax_hilbert_distance": _t("test_magnitudes.py::test_softmax_hilbert_distance_homogeneous"),
    "hilbertgeom.total_variation": _t("test_magnitudes.py::test_total_variation_scale_invariant"),
    "hilbertgeom.tv_bound": _t("test_magnitudes.py::test_tv_bound_matches_mpmath"),
    "hilbertgeom.tv_extremal_pair": _t("test_magnitudes.py::test_tv_extremal_pair_at_every_magnitude"),
    "hilbertgeom.birkhoff_contraction": _t("test_magnitudes.py::test_birkhoff_contraction_invariant"),
    # rows
    "hilbertgeom.center_rows": _t("test_magnitudes.py::test_center_rows_homogeneous"),
    "hilbertgeom.row_diameter": _t("test_magnitudes.py::test_row_diameter_and_closest_pair_homogeneous"),
    "hilbertgeom.closest_pair": _t("test_magnitudes.py::test_row_diameter_and_closest_pair_homogeneous"),
    # ball
    "hilbertgeom.minimum_enclosing_ball": _t("test_magnitudes.py::test_minimum_enclosing_ball_homogeneous"),
    "hilbertgeom.covering_radius": _t("test_magnitudes.py::test_minimum_enclosing_ball_homogeneous",
                                      "test_magnitudes.py::test_reported_covering_radius_and_ball"),
    "hilbertgeom.jung_radius": _t("test_magnitudes.py::test_jung_radius_every_size"),  # an integer of any size
    # head
    "hilbertgeom.head_norm": _t("test_magnitudes.py::test_head_norm_homogeneous"),
    "hilbertgeom.worst_case_hidden": _t("test_magnitudes.py::test_worst_case_hidden_scale_free"),
    "hilbertgeom.backward_bound": _t("test_magnitudes.py::test_backward_bound_homogeneous"),
    "hilbertgeom.backward_witness": _t("test_magnitudes.py::test_backward_witness_scale_free"),
    "hilbertgeom.cross_entropy_backward_bound": _t("test_magnitudes.py::test_cross_entropy_backward_bound_homogeneous"),
    "hilbertgeom.backward_change": _t("test_magnitudes.py::test_backward_change_and_bound_homogeneous"),
    "hilbertgeom.backward_change_bound": _t("test_magnitudes.py::test_backward_change_and_bound_homogeneous"),
    # tension
    "hilbertgeom.min_tension": _t("test_magnitudes_rules.py::test_min_tension",
                                  "test_magnitudes_rules.py::test_min_tension_decimal_scales",
                                  "test_tension.py::test_exact_power_of_two_rescale",
                                  "test_tension.py::test_huge_dynamic_range_and_top_of_range"),
    "hilbertgeom.projected_rownorm": _t("test_magnitudes_rules.py::test_projected_rownorm"),
    "hilbertgeom.rownorm": _t("test_magnitudes_rules.py::test_rownorm_and_rownorm_update",
                              "test_magnitudes_rules.py::test_rownorm_row_by_row",
                              "test_magnitudes_rules.py::test_rownorm_decimal_scales"),
    "hilbertgeom.steepest_descent": _t("test_magnitudes_rules.py::test_steepest_descent",
                                       "test_magnitudes_rules.py::test_steepest_descent_where_T_overflows"),
    "hilbertgeom.tension_bounds": _t("test_magnitudes_rules.py::test_tension_bounds",
                                     "test_magnitudes_rules.py::test_tension_bounds_decimal_scales"),
    "hilbertgeom.tension_bracket": _t("test_magnitudes_rules.py::test_tension_bracket"),
    # updates
    "hilbertgeom.evaluate_update": _t("test_magnitudes_rules.py::test_evaluate_update",
                                      "test_magnitudes_rules.py::test_evaluate_update_solves_at_unit_size",
                                      "test_updates.py::test_evaluate_update_is_scale_free_and_finite"),
    "hilbertgeom.bench_updates": _t("test_magnitudes_rules.py::test_bench_updates"),
    "hilbertgeom.linf_steepest_descent": _t("test_magnitudes_rules.py::test_linf_steepest_descent"),
    "hilbertgeom.polar_update": _t("test_magnitudes_rules.py::test_polar_and_sign_update"),
    "hilbertgeom.rownorm_update": _t("test_magnitudes_rules.py::test_rownorm_and_rownorm_update"),
    "hilbertgeom.sign_update": _t("test_magnitudes_rules.py::test_polar_and_sign_update",
                                  "test_magnitudes_rules.py::test_sign_update_decimal_scales"),
    "hilbertgeom.gradient_suite": NO_SCALE + "V, d, seed are sizes and a seed; the cases are unit-scale",
    "hilbertgeom.update_rules": NO_SCALE + "no arguments (the rules it returns are tested above)",
    # equalize
    "hilbertgeom.equalized_descent": _t(
        "test_equalize.py::test_equalized_descent_is_exactly_homogeneous_in_powers_of_two",
        "test_equalize.py::test_equalized_descent_is_homogeneous_at_any_magnitude"),
    "hilbertgeom.equalization_frontier": _t("test_equalize.py::test_frontier_and_equalizer_at_extreme_magnitudes"),
    "hilbertgeom.equalize_rows": _t("test_equalize.py::test_equalize_rows_is_exactly_homogeneous_in_powers_of_two",
                                    "test_equalize.py::test_frontier_and_equalizer_at_extreme_magnitudes"),
    "hilbertgeom.max_separation_at_decrease": _t("test_equalize.py::test_max_separation_at_decrease_is_scale_free"),
    "hilbertgeom.max_min_separation": NO_SCALE + "n points in R^d of diameter 1 (two integers and a seed)",
    "hilbertgeom.equidistant_limit": NO_SCALE + "two integers n, d (test_equalize checks huge d)",
    "hilbertgeom.regular_simplex": NO_SCALE + "two integers n, d; the simplex has unit edge",
    # tolerances
    "hilbertgeom.tolerance": _t("test_magnitudes.py::test_tolerance_every_d"),  # d of any size
    # hilbertgeom.testing
    "hilbertgeom.testing.steepest_step": _t("test_magnitudes_rules.py::test_steepest_step"),
    "hilbertgeom.testing.assert_steepest": _t("test_magnitudes_rules.py::test_assert_steepest_verdict"),
    "hilbertgeom.testing.assert_decrease_ratio": _t("test_magnitudes_rules.py::test_assert_decrease_ratio_verdict"),
    "hilbertgeom.testing.default_rtol": NO_SCALE + "a norm name, a dtype and a shape",
    "hilbertgeom.testing.gradient_cases": NO_SCALE + "sizes and a seed; the cases are unit-scale",
    # hilbertgeom.gradients
    "hilbertgeom.gradients.top_rows": _t("test_magnitudes_rules.py::test_top_rows"),
    "hilbertgeom.gradients.synthetic_head_gradient": _t(
        "test_magnitudes_rules.py::test_synthetic_head_gradient_logit_scale"),
    "hilbertgeom.gradients.real_head_gradient": NO_SCALE + "a fixed model on fixed text (sizes, seed, steps)",
    "hilbertgeom.gradients.minilm_available": NO_SCALE + "a path; no numbers",
}

# result and value types: constructed by the functions above, no computation of their own
# (Tolerance.bound is atol + rtol |scale|, checked by the tolerance tests)
RESULT_TYPES = {"Contraction", "Pair", "EnclosingBall", "Flow", "TensionBounds", "TensionBracket", "TensionResult",
                "UpdateReport", "EqualizationRun", "EqualizedResult", "EquidistantLimit", "SeparationResult",
                "Tolerance", "SolverError", "GradientCase", "HeadGradient"}


def public_callables() -> dict[str, object]:
    """Every callable named in ``__all__`` of hilbertgeom, hilbertgeom.testing and
    hilbertgeom.gradients (classes under their bare name)."""
    out = {}
    for mod in (hg, ht, hgrad):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj):
                continue
            out[name if isinstance(obj, type) else f"{mod.__name__}.{name}"] = obj
    return out


def _test_names(file: str) -> set[str]:
    tree = ast.parse((pathlib.Path(__file__).parent / file).read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_public_function_has_a_magnitude_test():
    found = public_callables()
    classes = {k for k, v in found.items() if isinstance(v, type)}
    functions = set(found) - classes
    assert classes == RESULT_TYPES, "a public class was added or removed: list it in RESULT_TYPES or give it a test"
    assert functions - set(MAGNITUDE_TESTS) == set(), "public functions without a magnitude test (or a reason)"
    assert set(MAGNITUDE_TESTS) - functions == set(), "stale entries"
    for name, tests in MAGNITUDE_TESTS.items():
        if isinstance(tests, str):
            assert tests.startswith(NO_SCALE) and len(tests) > len(NO_SCALE) + 10, name
            continue
        for ref in tests:
            file, test = ref.split("::")
            assert test in _test_names(file), f"{name}: {ref} does not exist"


@pytest.mark.parametrize("fn", [hg.projected_rownorm, hg.tension_bounds])
def test_spanning_the_whole_range_is_a_clear_error(fn):
    """Entries near 2^1023 next to 2^-1074: no exact power-of-two scaling exists, G is used
    as given, and its column sums overflow; that must be the documented ValueError, not a
    warning or an update of zeros taken for an answer."""
    t = math.ldexp(1.0, -1074)
    big = 7 * math.ldexp(1.0, 1020)
    G = np.array([[big, t], [big, -t], [-big, 0.0], [-big, 0.0]])
    with pytest.raises(ValueError, match="spans more than the float64 range"):
        fn(G)
