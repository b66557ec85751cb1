"""Equalization geometry (I19, I20): equidistant limits and max-min separation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg


@pytest.mark.parametrize("n,d", [(2, 1), (3, 2), (4, 3), (3, 5), (6, 5), (11, 10)])
def test_regular_simplex_is_equidistant(n, d):
    P = hg.regular_simplex(n, d)
    assert P.shape == (n, d)
    assert hg.row_diameter(P) == pytest.approx(1.0, abs=1e-15)
    assert hg.closest_pair(P).distance == pytest.approx(1.0, abs=1e-15)
    r = hg.max_min_separation(n, d)
    assert r.exact and r.upper == 1.0 and r.lower == pytest.approx(1.0, abs=1e-15)


def test_too_many_points_for_equidistance():
    with pytest.raises(ValueError, match=r"cannot be equidistant in R\^2"):
        hg.regular_simplex(4, 2)
    lim = hg.equidistant_limit(4, 2)
    assert not lim.possible and lim.upper < 1


@given(st.integers(2, 40), st.integers(1, 12))
def test_i20_bound_formula_and_tightness(n, d):
    lim = hg.equidistant_limit(n, d)
    dp = min(d, n - 1)
    if n <= d + 1:
        assert lim.possible and lim.upper == 1.0
    elif d == 1:
        assert lim.upper == 1.0 / (n - 1)
    else:
        assert lim.upper == pytest.approx(math.sqrt(n * dp / ((n - 1) * (dp + 1))), rel=1e-15)
        assert lim.upper < 1


@given(hnp.arrays(np.float64, st.tuples(st.integers(2, 25), st.integers(1, 5)), elements=st.floats(-5, 5)))
def test_i20_holds_for_any_cloud(X):
    D = hg.row_diameter(X)
    if D == 0:
        return
    ratio = hg.closest_pair(X).distance / D
    assert ratio <= hg.equidistant_limit(*X.shape).upper * (1 + 1e-12)


@dataclass(frozen=True)
class Construction:
    n: int
    d: int
    value: float
    source: str


# Explicit configurations (diameter 1): lower bounds any search must reach.
CONSTRUCTIONS = [
    Construction(4, 2, 1 / math.sqrt(2), "square with unit diagonal"),
    Construction(5, 2, 2 / (1 + math.sqrt(5)), "regular pentagon: side / diagonal = 1/phi"),
    Construction(7, 2, 0.5, "regular hexagon with its centre (Bateman-Erdos 1951)"),
    Construction(6, 3, 1 / math.sqrt(2), "regular octahedron: edge / diagonal"),
]


@pytest.mark.parametrize("c", CONSTRUCTIONS, ids=lambda c: f"n={c.n},d={c.d}")
def test_search_reaches_known_constructions(c):
    r = hg.max_min_separation(c.n, c.d, restarts=10, seed=0)
    assert r.lower >= c.value - 1e-9
    assert r.lower <= r.upper
    # the result is re-checkable
    assert hg.row_diameter(r.points) <= 1 + 1e-12
    assert hg.closest_pair(r.points).distance == r.lower


def test_line_is_exact():
    r = hg.max_min_separation(5, 1)
    assert r.exact and r.lower == pytest.approx(0.25, abs=1e-15) and r.upper == 0.25


def test_deterministic_for_a_seed():
    a = hg.max_min_separation(6, 2, restarts=4, seed=3)
    b = hg.max_min_separation(6, 2, restarts=4, seed=3)
    np.testing.assert_array_equal(a.points, b.points)


@pytest.mark.parametrize("n,d,exc,match", [
    (1, 2, ValueError, "n must be >= 2"),
    (3, 0, ValueError, "d must be >= 1"),
    (2.5, 2, TypeError, "n must be an integer"),
])
def test_bad_input(n, d, exc, match):
    with pytest.raises(exc, match=match):
        hg.max_min_separation(n, d)
    with pytest.raises(exc, match=match):
        hg.equidistant_limit(n, d)
