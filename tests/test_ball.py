"""Minimum enclosing ball, covering radius and Jung's constant (I7)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import EXACT
from helpers import U64, kernel_rtol
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg


def brute_meb_radius(X: np.ndarray) -> float:
    """Smallest ball by enumerating every support set of at most d+1 points
    (the optimal ball is the circumball of such a set in its affine hull).

    Each candidate centre ``c`` (a circumcentre) gives the ball about ``c`` that holds
    every row, radius ``max_i ||x_i - c||``: never below the minimum, whatever the
    rounding of ``c``, and at it (up to that rounding) for the optimal support set.
    So the result is an upper bound on the minimum radius, with no containment slack."""
    V, d = X.shape
    best = math.inf
    for m in range(1, min(V, d + 1) + 1):
        for T in itertools.combinations(range(V), m):
            Q = X[list(T)]
            A = Q[1:] - Q[0]
            if m > 1:
                G = A @ A.T
                if not np.any(G) or np.linalg.matrix_rank(G) < m - 1:  # affinely dependent (numerically)
                    continue
                alpha = np.linalg.solve(G, 0.5 * np.diag(G))
                c = Q[0] + A.T @ alpha
            else:
                c = Q[0]
            best = min(best, float(np.sqrt(((X - c) ** 2).sum(axis=1)).max()))
    return best


@dataclass(frozen=True)
class BallCase:
    name: str
    points: tuple
    radius: float
    source: str


BALL_CASES = [
    BallCase("two points", ((0, 0), (6, 8)), 5.0, "half the distance"),
    BallCase("equilateral triangle", ((0, 0), (1, 0), (0.5, math.sqrt(3) / 2)), 1 / math.sqrt(3),
             "circumradius a/sqrt(3) = J_2 a"),
    BallCase("right triangle 3-4-5", ((0, 0), (3, 0), (0, 4)), 2.5, "Thales: half the hypotenuse"),
    BallCase("obtuse triangle", ((0, 0), (10, 0), (5, 1)), 5.0, "half the longest side"),
    BallCase("square", ((0, 0), (2, 0), (0, 2), (2, 2), (1, 1)), math.sqrt(2), "half the diagonal"),
    BallCase("regular pentagon", tuple((math.cos(2 * math.pi * k / 5), math.sin(2 * math.pi * k / 5))
                                       for k in range(5)), 1.0, "vertices on the unit circle"),
    BallCase("cube corners", tuple(itertools.product((0, 1), repeat=3)), math.sqrt(3) / 2, "half the space diagonal"),
]


@pytest.mark.parametrize("case", BALL_CASES, ids=lambda c: c.name)
def test_reference_table(case):
    b = hg.minimum_enclosing_ball(np.array(case.points, dtype=float))
    assert b.status == "optimal"
    assert abs(b.radius - case.radius) <= EXACT.bound(case.radius)
    assert 0.0 <= b.gap <= EXACT.bound(case.radius)
    assert abs(b.weights.sum() - 1.0) <= EXACT.bound(1.0) and np.all(b.weights >= 0)


@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 7), st.integers(1, 3)), elements=st.floats(-100, 100)))
def test_against_subset_enumeration(X):
    b = hg.minimum_enclosing_ball(X)
    want = brute_meb_radius(X)  # an upper bound on the minimum radius, at it for a well-conditioned support
    scale = 1.0 + float(np.abs(X).max())
    # the minimum radius lies in [lower, radius] (the certificate) and is at most want
    assert b.radius <= want + EXACT.bound(scale)
    assert b.lower <= want + EXACT.bound(scale)
    # certificate: every row inside, a gap of rounding (after a regular walk and after the dual QP)
    assert np.sqrt(((X - b.center) ** 2).sum(axis=1)).max() <= b.radius + EXACT.bound(scale)
    assert b.gap <= EXACT.bound(scale)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 20])
def test_jung_sharp_on_regular_simplex(k):
    P = np.eye(k + 1)  # regular k-simplex, edge sqrt(2)
    D = hg.row_diameter(P)
    assert D == pytest.approx(math.sqrt(2), rel=EXACT.rtol, abs=0)
    r, c = hg.covering_radius(P)
    assert abs(r - hg.jung_radius(k) * D) <= EXACT.bound(D)
    np.testing.assert_allclose(c, np.full(k + 1, 1 / (k + 1)), rtol=0, atol=EXACT.bound(1.0))


@given(hnp.arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(1, 4)), elements=st.floats(-10, 10)))
def test_i7_chain(X):
    """D/2 <= rad <= J_k D, with k the affine dimension of the rows."""
    D = hg.row_diameter(X)
    b = hg.minimum_enclosing_ball(X)
    tol = EXACT.bound(1.0 + D)
    assert D / 2 <= b.radius + tol
    # the affine dimension: singular values above the centring's rounding (V-term means)
    k = int(np.linalg.matrix_rank(X - X.mean(axis=0), tol=kernel_rtol(X.shape[0]) * D)) if D > 0 else 0
    assert b.lower <= hg.jung_radius(k) * D + tol


def test_large_common_offset_is_harmless():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 4))
    b0 = hg.minimum_enclosing_ball(X)
    b1 = hg.minimum_enclosing_ball(X + 1e8)
    # adding 1e8 rounds each entry by up to half its spacing, moving a row by sqrt(d) times that
    moved = math.sqrt(X.shape[1]) * float(np.spacing(np.abs(X + 1e8).max())) / 2
    assert abs(b0.radius - b1.radius) <= moved + EXACT.bound(b0.radius)
    assert b1.gap <= EXACT.bound(b1.radius)


def test_high_dimension_many_points():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((2000, 30))
    b = hg.minimum_enclosing_ball(X)
    assert b.status == "optimal" and b.gap <= EXACT.bound(b.radius)  # a regular walk: accurate to rounding
    assert len(b.support) <= 31


def test_single_point_and_duplicates():
    b = hg.minimum_enclosing_ball([[1.0, 2.0]])
    assert b.radius == 0.0 and b.center.tolist() == [1.0, 2.0]
    r, _ = hg.covering_radius([[1.0, 1.0]] * 4)
    assert r == 0.0


def test_jung_radius_values_and_errors():
    assert hg.jung_radius(0) == 0.0
    assert hg.jung_radius(1) == 0.5
    assert hg.jung_radius(3) == pytest.approx(math.sqrt(3 / 8), rel=EXACT.rtol, abs=0)
    with pytest.raises(ValueError, match="k must be >= 0"):
        hg.jung_radius(-1)
    with pytest.raises(TypeError, match="k must be an integer"):
        hg.jung_radius(1.5)


def test_iteration_limit_raises_solver_error():
    rng = np.random.default_rng(5)
    with pytest.raises(hg.SolverError, match="iteration limit") as info:
        hg.minimum_enclosing_ball(rng.standard_normal((50, 5)), max_iter=1)
    assert info.value.status == "iteration limit"


@pytest.mark.parametrize("seed", range(6))
def test_cospherical_points_do_not_cycle(seed):
    """Points on a sphere (and the RowNorm output, all rows at distance 1/2 from one
    centre) make the active-set walk degenerate; the dual-QP finish certifies them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((11 + seed, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    b = hg.minimum_enclosing_ball(X)
    assert b.status.startswith("optimal")
    assert b.lower <= b.radius and b.gap <= EXACT.rtol * b.radius
    assert len(b.support) <= X.shape[1] + 1 and (b.weights > 0).all()  # a basic support
    # every point inside (both distances: sqrt of d rounded squares, within (d/2 + 2) u each)
    d = X.shape[1]
    assert np.sqrt(((X - b.center) ** 2).sum(axis=1)).max() <= b.radius * (1 + (d + 4) * U64)
    # and the sphere's own radius (the largest row norm, d terms) is an upper bound on the minimum
    assert b.lower <= np.linalg.norm(X, axis=1).max() * (1 + kernel_rtol(d))


def test_rownorm_output_ball():
    G = np.random.default_rng(0).standard_normal((64, 8))
    G -= G.mean(axis=0)
    S = hg.projected_rownorm(G)
    b = hg.minimum_enclosing_ball(S)  # every row at 1/2 from the origin: cospherical, the dual QP finishes
    r = np.linalg.norm(S, axis=1).max()  # 1/2 up to a d-term rounding
    assert b.gap <= EXACT.rtol * b.radius and len(b.support) <= G.shape[1] + 1
    assert abs(b.radius - 0.5) <= kernel_rtol(G.shape[1]) * 0.5 and b.lower <= r * (1 + kernel_rtol(G.shape[1]))
