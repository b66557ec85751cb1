"""Extreme magnitudes: metric, rows, head, ball, tolerances (issue 14).

Two kinds of checks:

* a property test per public function, over inputs ``2^a X`` with ``X`` a small
  integer matrix and ``a`` from about ``-1070`` (subnormal, ``1e-322``) to ``1000``
  (``1e301``).  Multiplying by a power of two is exact, so the homogeneity laws
  hold *exactly*: ``f(2^a X) == ldexp(f(X), a)`` for a function of degree one
  (``ldexp`` rounds once, as the library must when the answer is subnormal), and
  ``f(2^a X) == f(X)`` for degree zero.  Where ``ldexp`` overflows the answer is
  not representable, and the library must raise a ``ValueError`` naming the
  argument.
* a table of the inputs reported in the issue (``1e300``, ``1.5e308``, ``1e-310``,
  ``5e-324``, ``np.matrix``, ``10**400``), each with a reference computed in
  mpmath (unbounded exponent, 60 digits) directly on the extreme input.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from helpers import U64, kernel_rtol
from hypothesis import assume, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg
from hilbertgeom.tolerances import tolerance

EXACT = tolerance("exact")
TINY = 2.0**-1074

# 2^a * (integers of at most 3 bits) is exact for every a in [-1071, 1020]
A_ALL = st.integers(-1071, 1000)       # subnormal .. 1e301
A_NORMAL = st.integers(-1000, 1000)    # every entry stays normal
PINS = (-1071, -1060, -1030, -1000, -997, 0, 997, 1000)


def ints(shape, lo=-7, hi=7):
    return hnp.arrays(np.float64, shape, elements=st.integers(lo, hi).map(float))


mats = st.tuples(st.integers(2, 7), st.integers(1, 4)).flatmap(ints)


def scaled_or_none(v: float, a: int):
    """``ldexp(v, a)`` correctly rounded, or ``None`` where it is not representable."""
    try:
        return math.ldexp(v, a)
    except OverflowError:
        return None


def expect_scaled(fn, base: float, a: int, match: str):
    """``fn()`` equals ``ldexp(base, a)`` exactly, or raises ValueError if that overflows."""
    want = scaled_or_none(base, a)
    if want is None:
        with pytest.raises(ValueError, match=match):
            fn()
    else:
        got = fn()
        assert got == want, (got, want, a)


def x2(X, a):
    """``2^a X`` (exact for the integer matrices drawn here)."""
    Y = np.ldexp(np.asarray(X, dtype=np.float64), a)
    assert np.array_equal(np.ldexp(Y, -a), X)
    return Y


# ================================================================ metric
pos_vec = st.integers(2, 6).flatmap(lambda n: st.tuples(ints(n, 1, 7), ints(n, 1, 7)))


@given(pos_vec, A_ALL, A_ALL, ints(6, -1068, 1016))
@example((np.array([1.0, 7.0]), np.array([7.0, 1.0])), -1071, 1000, np.zeros(6))
@example((np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 2.0])), 1000, -1071, np.arange(6.0))
@example((np.array([1.0, 7.0]), np.array([7.0, 1.0])), 0, 0, np.array([1016.0, -1068.0, 0, 0, 0, 0]))
def test_hilbert_distance_projective(pq, a, b, rows):
    p, q = pq
    h = hg.hilbert_distance(p, q)
    # H(2^a p, 2^b q) == H(p, q) bit for bit, at every magnitude
    assert hg.hilbert_distance(x2(p, a), x2(q, b)) == h
    assert hg.hilbert_distance(x2(q, b), x2(p, a)) == h
    # a power-of-two diagonal D (entries 2^-1068 .. 2^1016: slices spanning the whole range)
    # leaves every ratio p_i / q_i as it is: H(Dp, Dq) = H(p, q) up to about 3u absolutely
    e = rows[: p.size].astype(int)
    assert abs(hg.hilbert_distance(np.ldexp(p, e), np.ldexp(q, e)) - h) <= EXACT.bound(h)
    with mp.workdps(40):
        r = [mp.mpf(float(x)) / mp.mpf(float(y)) for x, y in zip(p, q, strict=True)]
        assert abs(h - float(mp.log(max(r) / min(r)))) <= 4 * U64 * (1 + h)


@pytest.mark.parametrize("p, q", [
    ([1e308, 5e-324], [1.0, 1.0]),                  # entries of p span 2^2097
    ([1e308, 5e-324, 1.0], [1.0, 1.0, 5e-324]),
    ([1e-10, 5e-324], [1.0, 1.0]),
    ([1.5e308, 1e-300, 3.0], [1e-300, 1.5e308, 2.0]),
])
def test_hilbert_distance_of_slices_spanning_the_whole_range(p, q):
    with mp.workdps(40):
        r = [mp.mpf(x) / mp.mpf(y) for x, y in zip(p, q, strict=True)]
        want = float(mp.log(max(r) / min(r)))
    got = hg.hilbert_distance(p, q)
    assert abs(got - want) <= EXACT.bound(want)
    assert hg.hilbert_distance(q, p) == got


@given(st.integers(1, 6).flatmap(lambda n: ints(n, -7, 7)), A_ALL)
@example(np.array([7.0, -7.0]), 1020)
@example(np.array([1.0, 0.0]), -1074)
def test_variation_norm_homogeneous(x, a):
    expect_scaled(lambda: hg.variation_norm(x2(x, a)), hg.variation_norm(x), a, "x")


@given(st.integers(1, 6).flatmap(lambda n: st.tuples(ints(n), ints(n))), A_ALL)
@example((np.array([7.0, 7.0]), np.array([-7.0, -7.0])), 1020)   # z - z2 overflows, var = 0
@example((np.array([7.0, 1.0]), np.array([-7.0, 0.0])), 1020)
def test_softmax_hilbert_distance_homogeneous(zz, a):
    z, z2 = zz
    expect_scaled(lambda: hg.softmax_hilbert_distance(x2(z, a), x2(z2, a)),
                  hg.softmax_hilbert_distance(z, z2), a, "z")


@given(pos_vec, A_ALL, A_ALL)
@example((np.array([7.0, 7.0, 7.0]), np.array([1.0, 2.0, 3.0])), 1020, -1071)  # sum of p overflows
def test_total_variation_scale_invariant(pq, a, b):
    p, q = pq
    assert hg.total_variation(x2(p, a), x2(q, b)) == hg.total_variation(p, q)


@given(st.integers(1, 7), st.integers(-1074, 1020))
@example(1, -1074)
@example(7, 1020)
def test_tv_bound_matches_mpmath(m, a):
    """``tanh(h/4)`` at every magnitude of ``h``; for ``h <= 2^-30`` it is ``h/4``
    correctly rounded, which makes it homogeneous there."""
    h = math.ldexp(m, a)
    with mp.workdps(60):
        want = float(mp.tanh(mp.mpf(h) / 4))
    got = hg.tv_bound(h)
    assert abs(got - want) <= max(2 * U64 * want, TINY)  # one ulp
    if h <= 2.0**-30:
        assert got == math.ldexp(h, -2)


@given(st.integers(1, 7), st.integers(-1074, 7))
@example(1, -1074)
@example(5, 8)     # h = 1280
def test_tv_extremal_pair_at_every_magnitude(m, a):
    h = math.ldexp(m, a)
    assume(h <= 1400.0)
    p, q = hg.tv_extremal_pair(h)
    assert abs(hg.total_variation(p, q) - hg.tv_bound(h)) <= EXACT.bound(1.0)
    assert abs(hg.hilbert_distance(p, q) - h) <= EXACT.bound(h)


@given(st.tuples(st.integers(2, 5), st.integers(2, 5)).flatmap(lambda s: ints(s, 1, 7)), A_ALL,
       st.lists(st.integers(-60, 60), min_size=5, max_size=5))
@example(np.array([[1.0, 7.0], [7.0, 1.0]]), -1071, [1000, -1000, 0, 0, 0])
def test_birkhoff_contraction_invariant(A, a, rows):
    c = hg.birkhoff_contraction(A)
    assert hg.birkhoff_contraction(x2(A, a)) == c           # bit for bit
    e = np.array(rows[: A.shape[0]]).reshape(-1, 1)
    got = hg.birkhoff_contraction(np.ldexp(A, e))          # D A: the same cone up to a diagonal
    assert abs(got.diameter - c.diameter) <= EXACT.bound(c.diameter)


# ================================================================ rows
@given(mats, A_ALL)
@example(np.array([[7.0], [-7.0], [-7.0]]), 1020)   # the centred rows overflow
@example(np.array([[7.0], [-7.0], [-5.0]]), 1020)   # they do not, but the sum does
@example(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), -1074)
@example(np.array([[1.0], [0.0]]), -1074)   # mean 2^-1075: x - fl(mean) rounds twice
def test_center_rows_homogeneous(S, a):
    C = hg.center_rows(S)
    if scaled_or_none(float(np.abs(C).max()), a) is None:
        with pytest.raises(ValueError, match="S"):
            hg.center_rows(x2(S, a))
    else:
        np.testing.assert_array_equal(hg.center_rows(x2(S, a)), np.ldexp(C, a))


@pytest.mark.parametrize("norm", [2, 1, math.inf])
@given(S=mats, a=A_ALL)
@example(S=np.array([[7.0, 7.0], [-7.0, -7.0]]), a=1020)
@example(S=np.array([[7.0, 7.0], [-7.0, -7.0], [1.0, 0.0]]), a=1018)
@example(S=np.array([[1.0, 0.0], [0.0, 1.0]]), a=-1074)
def test_row_diameter_and_closest_pair_homogeneous(norm, S, a):
    D = hg.row_diameter(S, norm=norm, return_pair=True)
    Y = x2(S, a)
    expect_scaled(lambda: hg.row_diameter(Y, norm=norm), D.distance, a, "S")
    m = hg.closest_pair(S, norm=norm)
    expect_scaled(lambda: hg.closest_pair(Y, norm=norm).distance, m.distance, a, "S")
    if -1000 <= a <= 1000 and scaled_or_none(D.distance, a) is not None:  # normal values: same ties
        assert hg.row_diameter(Y, norm=norm, return_pair=True)[1:] == D[1:]
        assert hg.closest_pair(Y, norm=norm)[1:] == m[1:]


# ================================================================ head
@pytest.mark.parametrize("hidden_norm", [2, 1, "inf"])
@given(S=mats, a=A_ALL, b=st.integers(-60, 60))
@example(S=np.array([[7.0, 7.0], [-7.0, -7.0]]), a=1020, b=-8)   # D overflows, R D does not
def test_head_norm_homogeneous(hidden_norm, S, a, b):
    expect_scaled(lambda: hg.head_norm(x2(S, a), hidden_norm=hidden_norm, radius=math.ldexp(1.0, b)),
                  hg.head_norm(S, hidden_norm=hidden_norm), a + b, "S")


@pytest.mark.parametrize("hidden_norm", [2, 1, "inf"])
@given(S=mats, a=A_NORMAL, b=st.integers(-1000, 1000))
@example(S=np.array([[7.0, 7.0], [-7.0, -7.0]]), a=1020, b=0)
def test_worst_case_hidden_scale_free(hidden_norm, S, a, b):
    h = hg.worst_case_hidden(S, hidden_norm=hidden_norm)
    got = hg.worst_case_hidden(x2(S, a), hidden_norm=hidden_norm, radius=math.ldexp(1.0, b))
    np.testing.assert_array_equal(got, np.ldexp(h, b))


def zero_sum(r):
    r = np.asarray(r, dtype=np.float64).copy()
    r[-1] = -r[:-1].sum()
    return r


@given(mats, st.data(), A_ALL, A_ALL)
@example(np.array([[7.0, 7.0], [-7.0, -7.0]]), None, 1020, -3)
@example(np.array([[7.0, 0.0], [0.0, 0.0], [-7.0, 7.0]]), None, 1000, 1000)
def test_backward_bound_homogeneous(S, data, a, b):
    r = zero_sum(data.draw(ints(S.shape[0])) if data is not None else np.arange(S.shape[0], dtype=float))
    expect_scaled(lambda: hg.backward_bound(x2(S, a), x2(r, b)), hg.backward_bound(S, r), a + b, "S")


@given(mats, A_NORMAL)
@example(np.array([[7.0, 7.0], [-7.0, -7.0], [0.0, 7.0]]), 1020)
def test_backward_witness_scale_free(S, a):
    np.testing.assert_array_equal(hg.backward_witness(x2(S, a)), hg.backward_witness(S))


@given(mats, st.data(), A_ALL, A_ALL)
@example(np.array([[7.0, 7.0], [-7.0, -7.0]]), None, 1020, 1020)
def test_cross_entropy_backward_bound_homogeneous(S, data, a, b):
    V = S.shape[0]
    p = data.draw(ints(V, 0, 7)) if data is not None else np.full(V, 7.0)
    assume(p.sum() > 0)
    c = data.draw(st.integers(0, V - 1)) if data is not None else 0
    expect_scaled(lambda: hg.cross_entropy_backward_bound(x2(S, a), x2(p, b), c),
                  hg.cross_entropy_backward_bound(S, p, c), a, "S")


def _head_case(data):
    V = data.draw(st.integers(2, 5))
    d = data.draw(st.integers(1, 3))
    return data.draw(ints((V, d))), data.draw(ints((V, d))), data.draw(ints(d)), data.draw(st.integers(0, V - 1))


@given(st.data(), A_ALL, st.integers(-60, 3))
@example(None, 1020, 0)
@example(None, -1071, -50)
def test_backward_change_and_bound_homogeneous(data, a, t):
    """The logits ``U h`` stay put when ``U, S`` scale by ``2^a`` and ``h`` by ``2^-a``;
    the change and its bound then scale by ``2^a``: ``f(2^a U, 2^a S, 2^(t-a) h) ==
    2^a f(U, S, 2^t h)``."""
    if data is None:
        U = np.array([[7.0, 0.0], [-7.0, 7.0], [0.0, -7.0]])
        S = np.array([[-7.0, 7.0], [7.0, 7.0], [7.0, -7.0]])
        h, c = np.array([1.0, -1.0]), 0
    else:
        U, S, h, c = _head_case(data)
    b = t - a
    assume(-1022 <= b <= 1020)
    h0 = x2(h, t)
    for fn in (hg.backward_change, hg.backward_change_bound):
        expect_scaled(lambda fn=fn: fn(x2(U, a), x2(S, a), x2(h, b), c), fn(U, S, h0, c), a, "U|S")


# ================================================================ ball
@given(mats, A_ALL)
@example(np.array([[7.0, 7.0], [-7.0, -7.0], [7.0, -7.0]]), 1020)
@example(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), -1074)
@example(np.array([[1.0], [0.0], [-1.0]]), -1074)
def test_minimum_enclosing_ball_homogeneous(S, a):
    b = hg.minimum_enclosing_ball(S)
    Y = x2(S, a)
    want = scaled_or_none(b.radius, a)
    if want is None:
        with pytest.raises(ValueError, match="S"):
            hg.minimum_enclosing_ball(Y)
        return
    got = hg.minimum_enclosing_ball(Y)
    assert got.radius == want
    assert got.lower == math.ldexp(b.lower, a)
    np.testing.assert_array_equal(got.support, b.support)
    np.testing.assert_array_equal(got.weights, b.weights)
    assert got.status == b.status
    if -1000 <= a:
        np.testing.assert_array_equal(got.center, np.ldexp(b.center, a))
    r, c = hg.covering_radius(Y)
    assert r == got.radius
    np.testing.assert_array_equal(c, got.center)
    # every row inside, measured in rows rescaled to unit size (exact)
    k = -a
    dist = np.sqrt(((np.ldexp(Y, k) - np.ldexp(c, k)) ** 2).sum(axis=1)).max()
    # the centre is rounded to the float64 grid (subnormal: spacing 2^-1074)
    slack = math.sqrt(S.shape[1]) * math.ldexp(TINY, k) + EXACT.bound(b.radius)
    assert dist <= b.radius + slack


@given(st.one_of(st.integers(0, 2**64), st.integers(0, 10**400)))
@example(10**400)
@example(2**1100 - 1)
def test_jung_radius_every_size(k):
    with mp.workprec(200):
        want = float(mp.sqrt(mp.mpf(k) / (2 * (mp.mpf(k) + 1))))
    assert abs(hg.jung_radius(k) - want) <= math.ulp(want)  # sqrt of a rounded quotient: 1 ulp
    assert hg.jung_radius(k) <= hg.jung_radius(k + 1) <= math.sqrt(0.5)


@given(st.one_of(st.integers(1, 2**64), st.integers(1, 10**400)))
@example(10**400)
@example(2**1076)
@example(2**1030)   # float(4 (d + 2)) overflows, 4 (d + 2) u does not
def test_tolerance_every_d(d):
    for dtype, bits in ((np.float64, 53), (np.float32, 24)):
        rtol = Fraction(4 * (d + 2), 2**bits)
        try:
            want = float(rtol)
        except OverflowError:
            with pytest.raises(ValueError, match="d"):
                tolerance("kernel", dtype, d=d)
            continue
        assert tolerance("kernel", dtype, d=d).rtol == want
    assert tolerance("exact", d=d) == tolerance("exact")


# ================================================================ the reported inputs
def mp_rows(X):
    return [[mp.mpf(float(v)) for v in row] for row in np.asarray(X)]


def mp_norm(v):
    return mp.sqrt(mp.fsum(x * x for x in v))


def mp_diameter(X):
    R = mp_rows(X)
    return max(mp_norm([a - b for a, b in zip(R[i], R[j], strict=True)]) for i in range(len(R)) for j in range(i))


def mp_softmax(z):
    m = max(z)
    e = [mp.exp(x - m) for x in z]
    s = mp.fsum(e)
    return [x / s for x in e]


def mp_backward_change(U, S, h, c):
    Um, Sm, hv = mp_rows(U), mp_rows(S), [mp.mpf(float(x)) for x in h]
    V, d = len(Um), len(hv)
    z = [mp.fsum(Um[i][k] * hv[k] for k in range(d)) for i in range(V)]
    z2 = [mp.fsum((Um[i][k] + Sm[i][k]) * hv[k] for k in range(d)) for i in range(V)]
    p, q = mp_softmax(z), mp_softmax(z2)
    ep = [p[i] - (1 if i == c else 0) for i in range(V)]
    eq = [q[i] - (1 if i == c else 0) for i in range(V)]
    b = [mp.fsum(Um[i][k] * ep[i] for i in range(V)) for k in range(d)]
    b2 = [mp.fsum((Um[i][k] + Sm[i][k]) * eq[i] for i in range(V)) for k in range(d)]
    return mp_norm([x - y for x, y in zip(b2, b, strict=True)])


BASE = np.array([[0.5, -0.25, 0.75], [-1.0, 0.5, 0.25], [0.25, 1.0, -0.5], [0.75, -0.75, -0.5]])
BASE_U = np.array([[0.25, 0.5, -0.5], [0.5, -0.25, 0.75], [-0.75, 0.25, 0.5], [0.5, 0.5, -0.25]])
R = np.array([0.125, -0.0625, 0.25, -0.3125])   # sums to 0, ||R||_1 = 3/4
H = np.array([0.5, -1.0, 0.25])
MAGS = [1e300, 1.5e308, 1e-300, 1e-310, 5e-324 * 64]   # largest entry m; the last two subnormal
REPORTED = [pytest.param(m, id=f"{m:.3g}") for m in MAGS]


def close(got, want, rel, ulps_abs=4):
    """``|got - want| <= rel |want| + ulps_abs 2^-1074`` (the absolute part: subnormal results)."""
    want = float(want)
    assert math.isfinite(got)
    assert abs(got - want) <= rel * abs(want) + ulps_abs * TINY, (got, want)


@pytest.mark.parametrize("m", REPORTED)
def test_reported_center_rows(m):
    S = BASE * m
    C = hg.center_rows(S)
    with mp.workdps(60):
        R_ = mp_rows(S)
        for k in range(S.shape[1]):
            mean = mp.fsum(r[k] for r in R_) / len(R_)
            for i in range(S.shape[0]):
                # the entry (rounded once), the mean of V = 4 rounded entries, the subtraction: 3u
                close(float(C[i, k]), R_[i][k] - mean, rel=3 * U64, ulps_abs=2)


@pytest.mark.parametrize("m", REPORTED)
def test_reported_backward_bound(m):
    S = BASE * m
    with mp.workdps(60):
        want = mp_diameter(S) * mp.fsum(abs(mp.mpf(x)) for x in R) / 2
    close(hg.backward_bound(S, R), want, rel=kernel_rtol(S.shape[1]))  # D(S): a d-term distance, then exact


@pytest.mark.parametrize("m", REPORTED)
def test_reported_backward_change(m):
    """``U, S`` at magnitude ``m`` and ``h`` at ``1/m``: logits of order one."""
    U, S = BASE_U * m, BASE * m
    h = np.ldexp(H, min(-math.frexp(m)[1], 1020))
    check_change(U, S, h)
    check_change(U, S / 2, h)


FMAX = float(np.finfo(np.float64).max)


def check_change(U, S, h):
    """backward_change against mpmath; where the true value is beyond float64, a ValueError."""
    with mp.workdps(60):
        want = mp_backward_change(U, S, h, 1)
    if want > FMAX:
        with pytest.raises(ValueError, match="rescale U and S"):
            hg.backward_change(U, S, h, 1)
        return
    V, d = S.shape
    rel = kernel_rtol(V + d)  # softmax over V logits of d-term dot products, a d-term norm
    close(hg.backward_change(U, S, h, 1), want, rel=rel)
    try:
        bound = hg.backward_change_bound(U, S, h, 1)
    except ValueError as exc:  # the bound itself may exceed float64 where the change does not
        assert "rescale U and S" in str(exc)
        return
    assert math.isfinite(bound) and bound >= float(want) * (1 - rel)


@pytest.mark.parametrize("m", [pytest.param(1e300, id="1e300"), pytest.param(1e308, id="1e308"),
                               pytest.param(1.5e308, id="1.5e308")])
def test_reported_backward_change_large_logits(m):
    """``h`` of order one: logits of order ``m``; softmax is then one-hot and the change
    is ``||(U + S)^T (q - e_c) - U^T (p - e_c)||`` with 0/1 vectors."""
    for sS in (1.0, 0.25):
        check_change(BASE_U * m, BASE * m * sS, H)


@pytest.mark.parametrize("m", REPORTED)
def test_reported_covering_radius_and_ball(m):
    S = BASE * m
    with mp.workdps(60):
        base = mp.mpf(hg.minimum_enclosing_ball(BASE).radius)   # checked against brute force in test_ball
    b = hg.minimum_enclosing_ball(S)
    assert b.status == "optimal"
    close(b.radius, base * mp.mpf(m), rel=EXACT.rtol)  # BASE m is BASE rounded once; a regular walk
    r, c = hg.covering_radius(S)
    assert r == b.radius and r > 0
    k = -math.frexp(m)[1]
    dist = np.sqrt(((np.ldexp(S, k) - np.ldexp(c, k)) ** 2).sum(axis=1)).max()
    # both distances: sqrt of d rounded squares, within (d/2 + 2) u each
    assert dist <= math.ldexp(r, k) * (1 + (S.shape[1] + 4) * U64) + math.sqrt(3) * math.ldexp(TINY, k)


def test_reported_subnormal_ball_is_not_a_point():
    for S in (np.array([[1e-310, 0.0], [0.0, 0.0], [0.0, 1e-310]]), np.array([[5e-324], [0.0], [1.5e-323]])):
        r, c = hg.covering_radius(S)
        assert r > 0
        d = np.abs(S - c).max(axis=1)
        # |x - c|_inf <= |x - c*|_2 + TINY/2 (each coordinate of c rounded) <= r* + TINY/2, and r* <= r +
        # TINY/2 (r rounded once after a walk accurate to rounding at unit size)
        assert d.max() <= r * (1 + EXACT.rtol) + TINY


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_reported_np_matrix_is_read_as_an_array():
    M = np.matrix(BASE)
    r, c = hg.covering_radius(M)
    assert (r, c.tolist()) == (hg.covering_radius(BASE)[0], hg.covering_radius(BASE)[1].tolist())
    assert type(c) is np.ndarray and c.shape == (3,)
    assert hg.row_diameter(M) == hg.row_diameter(BASE)
    assert type(hg.center_rows(M)) is np.ndarray


def test_reported_jung_radius_and_tolerance_of_huge_integers():
    assert hg.jung_radius(10**400) == math.sqrt(0.5)
    rtol = tolerance("kernel", d=10**300).rtol
    assert rtol == float(Fraction(4 * (10**300 + 2), 2**53))
    with pytest.raises(ValueError, match="d is too large"):
        tolerance("kernel", d=10**400)
    with pytest.raises(ValueError, match="d must be >= 1"):
        tolerance("kernel", d=0)


@pytest.mark.parametrize("fn, args, match", [
    (hg.row_diameter, (np.array([[1.5e308, 1.5e308], [-1.5e308, -1.5e308]]),), "row diameter of S"),
    (hg.variation_norm, (np.array([1.5e308, -1.5e308]),), "x"),
    (hg.center_rows, (np.array([[1.5e308], [-1.5e308], [-1.5e308]]),), "S"),
    (hg.backward_bound, (np.array([[1.5e308], [-1.5e308]]), np.array([1.0, -1.0])), "S"),
])
def test_unrepresentable_answers_raise_value_error(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_mean_of_many_huge_rows_does_not_overflow():
    """2000 rows near 2^1018: the column sums overflow, the distances do not."""
    from helpers import brute_extreme

    rng = np.random.default_rng(7)
    X = np.ldexp(rng.integers(1, 8, size=(2000, 2)).astype(float), 1018)
    X[::2] *= -1
    for mode, fn in (("max", hg.row_diameter), ("min", hg.closest_pair)):
        got = fn(X, return_pair=True) if mode == "max" else fn(X)
        assert tuple(got) == brute_extreme(X, mode)
    C = hg.center_rows(X)
    np.testing.assert_array_equal(np.ldexp(C, -1018), hg.center_rows(np.ldexp(X, -1018)))
    b = hg.minimum_enclosing_ball(X)
    assert b.radius == math.ldexp(hg.minimum_enclosing_ball(np.ldexp(X, -1018)).radius, 1018)


def test_masked_arrays_are_refused_clearly():
    M = np.ma.masked_array(BASE, mask=np.zeros_like(BASE, dtype=bool))
    with pytest.raises(TypeError, match="S is a masked array"):
        hg.covering_radius(M)
