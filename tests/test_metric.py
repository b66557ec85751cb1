"""Hilbert metric, softmax isometry, total variation, Birkhoff--Hopf (I1--I5)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from conftest import EXACT
from helpers import U64
from hypothesis import assume, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg

pos = st.floats(1e-6, 1e6)


def vec(n_min=2, n_max=8, elements=pos):
    return st.integers(n_min, n_max).flatmap(lambda n: hnp.arrays(np.float64, n, elements=elements))


def pair_of_vectors(elements=pos):
    return st.integers(2, 8).flatmap(
        lambda n: st.tuples(hnp.arrays(np.float64, n, elements=elements),
                            hnp.arrays(np.float64, n, elements=elements)))


def brute_log_odds(p, q):
    """max_{i,j} |log(p_i/p_j) - log(q_i/q_j)| by enumeration (I1, second form)."""
    n = len(p)
    return max(abs(math.log(p[i] / p[j]) - math.log(q[i] / q[j])) for i in range(n) for j in range(n))


# ---------------------------------------------------------------- I1
@given(pair_of_vectors())
@example((np.array([1.0, 2.0]), np.array([1.0, 2.0])))
def test_i1_log_odds_form(pq):
    p, q = pq
    h = hg.hilbert_distance(p, q)
    b = brute_log_odds(p, q)
    assert abs(h - b) <= EXACT.bound(1.0 + b)


@given(pair_of_vectors(), st.floats(-30, 30), st.floats(-30, 30))
def test_i1_projective(pq, la, lb):
    p, q = pq
    a, b = 10.0**la, 10.0**lb
    h = hg.hilbert_distance(p, q)
    shift = abs(math.log(a / b)) + float(np.abs(np.log(p / q)).max())
    assert abs(hg.hilbert_distance(a * p, b * q) - h) <= EXACT.bound(1.0 + shift)


@given(st.integers(2, 8).flatmap(lambda n: st.tuples(*[hnp.arrays(np.float64, n, elements=pos)] * 3)))
def test_i1_metric_axioms(pqr):
    p, q, r = pqr
    hpq, hqr, hpr = hg.hilbert_distance(p, q), hg.hilbert_distance(q, r), hg.hilbert_distance(p, r)
    assert hpq >= 0.0
    assert hpq == hg.hilbert_distance(q, p)
    assert hpr <= hpq + hqr + EXACT.bound(1.0 + hpq + hqr)
    assert hg.hilbert_distance(p, 3.0 * p) <= EXACT.bound(1.0)


def test_i1_separates_rays():
    # H = 0 exactly on one ray, > 0 off it
    assert hg.hilbert_distance([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == 0.0
    assert hg.hilbert_distance([1.0, 2.0, 3.0], [1.0, 2.0, 3.0000001]) > 0.0


def test_i1_near_equal_vectors_are_accurate():
    """log(p/q) keeps relative accuracy where log p - log q would not."""
    p = np.array([1e-30, 0.5, 0.5])
    q = p * np.array([1.0 + 1e-12, 1.0, 1.0])
    h = hg.hilbert_distance(p, q)
    # the inputs round 1 + 1e-12 and p_0 (1 + 1e-12) (their ratio by up to 2u), the library the ratio
    # p/q and its log (2u): h is exact to a few ulps of 1, i.e. 1e-12 to about 4e-4 relative
    assert abs(h - math.log1p(1e-12)) <= 4 * U64


def test_i1_zero_entries():
    assert hg.hilbert_distance([0.0, 1.0, 2.0], [0.0, 3.0, 3.0]) == pytest.approx(math.log(2.0), rel=EXACT.rtol, abs=0)
    assert hg.hilbert_distance([0.0, 1.0], [1.0, 1.0]) == math.inf
    assert hg.hilbert_distance([1.0, 0.0], [1.0, 0.0]) == 0.0


def test_i1_batched_and_axis():
    rng = np.random.default_rng(1)
    P = rng.uniform(0.1, 1, (4, 5))
    Q = rng.uniform(0.1, 1, (4, 5))
    rowwise = hg.hilbert_distance(P, Q)
    assert rowwise.shape == (4,)
    for k in range(4):
        assert rowwise[k] == hg.hilbert_distance(P[k], Q[k])
    colwise = hg.hilbert_distance(P.T, Q.T, axis=0)
    np.testing.assert_array_equal(colwise, rowwise)
    # broadcasting one q against many p
    b = hg.hilbert_distance(P, Q[0])
    assert b[2] == hg.hilbert_distance(P[2], Q[0])


@pytest.mark.parametrize("p,q,exc,match", [
    ([1.0, -1.0], [1.0, 1.0], ValueError, "p must be nonnegative"),
    ([1.0, 1.0], [np.nan, 1.0], ValueError, "q must be finite"),
    ([1.0, np.inf], [1.0, 1.0], ValueError, "p must be finite"),
    ([0.0, 0.0], [1.0, 1.0], ValueError, "p has an all-zero slice"),
    ([1.0, 2.0], [1.0, 2.0, 3.0], ValueError, "must broadcast"),
    ([1j, 1.0], [1.0, 1.0], TypeError, "p must be real"),
    (1.0, 2.0, ValueError, "at least one dimension"),
])
def test_i1_bad_input(p, q, exc, match):
    with pytest.raises(exc, match=match):
        hg.hilbert_distance(p, q)


def test_axis_errors():
    with pytest.raises(ValueError, match="out of range"):
        hg.hilbert_distance([1.0, 2.0], [1.0, 2.0], axis=3)
    with pytest.raises(TypeError, match="axis must be an integer"):
        hg.variation_norm([1.0, 2.0], axis=0.5)


# ---------------------------------------------------------------- I2
@given(st.integers(2, 10).flatmap(lambda n: st.tuples(
    hnp.arrays(np.float64, n, elements=st.floats(-30, 30)),
    hnp.arrays(np.float64, n, elements=st.floats(-30, 30)))), st.floats(-1e3, 1e3))
def test_i2_softmax_isometry(zz, c):
    z, z2 = zz
    sm = lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()  # noqa: E731
    v = hg.variation_norm(z - z2)
    assert abs(hg.hilbert_distance(sm(z), sm(z2)) - v) <= EXACT.bound(1.0 + v + np.abs(z).max() + np.abs(z2).max())
    assert hg.softmax_hilbert_distance(z, z2) == v
    assert abs(hg.variation_norm(z + c) - hg.variation_norm(z)) <= EXACT.bound(1.0 + abs(c) + np.abs(z).max())


def test_i2_huge_logits_no_overflow():
    z = np.array([1e4, -1e4, 3.0])
    assert hg.softmax_hilbert_distance(z, np.zeros(3)) == 2e4
    assert hg.softmax_hilbert_distance(np.array([[1e4, 0.0], [0.0, 0.0]]), np.zeros(2)).tolist() == [1e4, 0.0]


def test_i2_variation_errors():
    with pytest.raises(ValueError, match="x must be finite"):
        hg.variation_norm([1.0, np.nan])
    with pytest.raises(ValueError, match="at least one coordinate"):
        hg.variation_norm(np.zeros((3, 0)))


# ---------------------------------------------------------------- I3
@given(pair_of_vectors())
def test_i3_cross_entropy(pq):
    p, q = pq
    p, q = p / p.sum(), q / q.sum()
    dl = np.log(q) - np.log(p)
    h = hg.hilbert_distance(p, q)
    tol = EXACT.bound(1.0 + h)
    assert dl.min() <= tol and dl.max() >= -tol
    assert abs((dl.max() - dl.min()) - h) <= tol
    assert np.all(np.abs(np.log(p) - np.log(q)) <= h + tol)


# ---------------------------------------------------------------- I4
@given(pair_of_vectors())
def test_i4_tv_bound(pq):
    p, q = pq
    assert hg.total_variation(p, q) <= hg.tv_bound(hg.hilbert_distance(p, q)) + EXACT.bound(1.0)


@given(st.floats(0.0, 1400.0))
@example(0.0)
@example(1e-12)
@example(1400.0)
def test_i4_sharp_witness(h):
    p, q = hg.tv_extremal_pair(h)
    assert abs(p.sum() - 1.0) <= EXACT.bound(1.0)
    assert abs(hg.hilbert_distance(p, q) - h) <= EXACT.bound(1.0 + h)
    assert abs(hg.total_variation(p, q) - hg.tv_bound(h)) <= EXACT.bound(1.0)


def test_i4_witness_exact_rational():
    """At h = 2 log 3 (t = e^{h/2} = 3): p = (1/4, 3/4), TV = 1/2 = tanh(h/4) = (t-1)/(t+1)."""
    h = 2.0 * math.log(3.0)
    p, _ = hg.tv_extremal_pair(h)
    # h = 2 log 3 is rounded (2.2 u): t = e^(h/2) moves by 3.3 u relative, p = 1/(1 + t) by 3/16 of
    # that, plus the roundings of p (2u): 3u; tanh(h/4) moves by 0.19 of the error of h, plus its own
    # rounding and that of h/4: 4u
    np.testing.assert_allclose(p, [0.25, 0.75], rtol=0, atol=3 * U64)
    assert hg.tv_bound(h) == pytest.approx(0.5, rel=0, abs=4 * U64)
    assert Fraction(3 - 1, 3 + 1) == Fraction(1, 2)


def test_i4_bound_edges_and_errors():
    assert hg.tv_bound(math.inf) == 1.0
    assert hg.tv_bound(0.0) == 0.0
    np.testing.assert_allclose(hg.tv_bound(np.array([0.0, 4.0])), [0.0, math.tanh(1.0)], rtol=EXACT.rtol, atol=0)
    with pytest.raises(ValueError, match="h must be >= 0"):
        hg.tv_bound(-1.0)
    with pytest.raises(ValueError, match="h must be <= 1400"):
        hg.tv_extremal_pair(2000.0)
    with pytest.raises(ValueError, match="h must be >= 0"):
        hg.tv_extremal_pair(-0.5)
    with pytest.raises(ValueError, match="all-zero slice"):
        hg.total_variation([0.0, 0.0], [1.0, 0.0])


# ---------------------------------------------------------------- I5
@dataclass(frozen=True)
class BirkhoffCase:
    name: str
    A: tuple
    expected: float
    source: str


BIRKHOFF_CASES = [
    BirkhoffCase("2x2 symmetric", ((2, 1), (1, 2)), math.log(4.0), "closed form |log(ad/bc)|"),
    BirkhoffCase("rank one", ((1, 2), (3, 6)), 0.0, "rank one: all columns on one ray"),
    BirkhoffCase("2x2 general", ((1, 3), (2, 5)), abs(math.log(Fraction(5, 6))), "closed form |log(ad/bc)|"),
    BirkhoffCase("zero pattern differs", ((1, 0), (1, 1)), math.inf, "columns on different faces"),
    BirkhoffCase("shared zero row", ((0, 0), (1, 2), (2, 1)), math.log(4.0), "face of the cone: restricted metric"),
]


def _cross_ratio_brute(A) -> float:
    """Exact cross-ratio maximum with rational arithmetic (independent of the library)."""
    A = [[Fraction(x) for x in row] for row in A]
    n, m = len(A), len(A[0])
    best = Fraction(1)
    for i, j, k, l in itertools.product(range(n), range(n), range(m), range(m)):
        num, den = A[i][k] * A[j][l], A[i][l] * A[j][k]
        if num == 0 and den == 0:
            continue
        if den == 0:
            return math.inf
        best = max(best, num / den)
    return math.log(best)


@pytest.mark.parametrize("case", BIRKHOFF_CASES, ids=lambda c: c.name)
def test_i5_reference_table(case):
    c = hg.birkhoff_contraction(np.array(case.A, dtype=float))
    if math.isinf(case.expected):
        assert c.diameter == math.inf and c.ratio == 1.0
    else:
        assert c.diameter == pytest.approx(case.expected, abs=EXACT.atol, rel=EXACT.rtol)
        assert c.ratio == pytest.approx(math.tanh(case.expected / 4), abs=EXACT.atol, rel=EXACT.rtol)
    if not any(0 in row for row in case.A):
        assert c.diameter == pytest.approx(_cross_ratio_brute(case.A), abs=EXACT.atol, rel=EXACT.rtol)


@given(hnp.arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(1, 4)), elements=st.integers(1, 20)))
def test_i5_against_rational_brute_force(A):
    c = hg.birkhoff_contraction(A)
    want = _cross_ratio_brute(A.tolist())
    assert abs(c.diameter - want) <= EXACT.bound(1.0 + want)
    k, l = c.pair
    got = hg.hilbert_distance(A[:, k].astype(float), A[:, l].astype(float))
    assert abs(got - c.diameter) <= EXACT.bound(1.0 + want)


@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 5)), elements=st.floats(0.01, 100.0)),
       st.data())
def test_i5_contraction(A, data):
    m = A.shape[1]
    x = data.draw(hnp.arrays(np.float64, m, elements=st.floats(0.01, 100.0)))
    y = data.draw(hnp.arrays(np.float64, m, elements=st.floats(0.01, 100.0)))
    c = hg.birkhoff_contraction(A)
    hxy = hg.hilbert_distance(x, y)
    assume(hxy > 0)
    assert hg.hilbert_distance(A @ x, A @ y) <= c.ratio * hxy + EXACT.bound(1.0 + hxy)


def test_i5_bad_input():
    with pytest.raises(ValueError, match="all-zero column"):
        hg.birkhoff_contraction([[1.0, 0.0], [2.0, 0.0]])
    with pytest.raises(ValueError, match="A must be nonnegative"):
        hg.birkhoff_contraction([[1.0, -1.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="2-D"):
        hg.birkhoff_contraction([1.0, 2.0])
