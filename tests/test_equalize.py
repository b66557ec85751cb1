"""Equalization geometry (I19, I20): equidistant limits and max-min separation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import U64, default_of, kernel_rtol
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg
from hilbertgeom.tolerances import EQUALIZER_RTOL, SDP_RTOL, tolerance

EXACT = tolerance("exact")
SOLVER = tolerance("solver")


def closed_form_rtol(n: int, d: int) -> float:
    """How far the float references of the equidistant bounds may sit from the library's
    certified (rounded-up) values.  I20: a rational rounded and its sqrt (<= 2u) on each side,
    the library's stepped up by at most an ulp (2u): 8u.  Packing, 1/(n^(1/d) - 1): the
    subtraction amplifies the ~2u error of n^(1/d) = e^x (x = log(n)/d) by about 1/x."""
    return (2 * d / math.log(n) + 8) * U64


@pytest.mark.parametrize("n,d", [(2, 1), (3, 2), (4, 3), (3, 5), (6, 5), (11, 10)])
def test_regular_simplex_is_equidistant(n, d):
    P = hg.regular_simplex(n, d)
    assert P.shape == (n, d)
    tol = kernel_rtol(n)  # the coordinates are n-term products E U (an SVD's U), distances "1 up to rounding"
    assert hg.row_diameter(P) == pytest.approx(1.0, rel=tol, abs=0)
    assert hg.closest_pair(P).distance == pytest.approx(1.0, rel=tol, abs=0)
    r = hg.max_min_separation(n, d)
    assert r.exact and r.upper == 1.0 and r.lower == pytest.approx(1.0, rel=tol, abs=0)


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
        jung = math.sqrt(n * dp / ((n - 1) * (dp + 1)))
        pack = 1.0 / (n ** (1.0 / d) - 1.0)
        assert lim.upper == pytest.approx(min(jung, pack), rel=closed_form_rtol(n, d), abs=0)
        assert lim.source == ("isodiametric packing" if pack < jung else "Jung + sum of squared distances (I20)")
        assert lim.upper < 1


@pytest.mark.parametrize("n,d", [(5, 2), (7, 2), (8925240, 2), (9232171, 3), (79 * 10**12, 4), (10**15, 3),
                                 (7, 3), (1301, 10), (12, 3)])
def test_reported_bounds_are_never_below_the_real_ones(n, d):
    """Exact rational check: the floats are rounded up, even where expm1/log lose ulps."""
    from fractions import Fraction

    from hilbertgeom.equalize import _i20_bound, _packing_bound

    c = _packing_bound(n, d)
    assert Fraction(n) * Fraction(c) ** d >= (1 + Fraction(c)) ** d  # c >= 1/(n^(1/d) - 1)
    assert c == pytest.approx(1.0 / (n ** (1.0 / d) - 1.0), rel=closed_form_rtol(n, d), abs=0)  # not far above it
    dp = min(d, n - 1)
    j = _i20_bound(n, d)
    assert Fraction(j) ** 2 >= Fraction(n * dp, (n - 1) * (dp + 1))
    assert j == pytest.approx(math.sqrt(n * dp / ((n - 1) * (dp + 1))), rel=8 * U64, abs=0)  # see closed_form_rtol


def test_packing_bound_crossover():
    """The packing bound is the smaller one from n = 5, 10, 20, 40, 80 for d = 2..6 (about 1.27 * 2^d)."""
    for d, first in ((2, 5), (3, 10), (4, 20), (5, 40), (6, 80)):
        sources = [hg.equidistant_limit(n, d).source for n in range(d + 2, first + 60)]
        k = sources.index("isodiametric packing")
        assert k + d + 2 == first
        assert set(sources[k:]) == {"isodiametric packing"}


def test_packing_bound_takes_over_for_many_points():
    # I20 never drops below sqrt(d/(d+1)); the packing bound decays like n^(-1/d)
    lim = hg.equidistant_limit(1000, 3)
    assert lim.source == "isodiametric packing"
    assert lim.upper == pytest.approx(1 / 9, rel=closed_form_rtol(1000, 3), abs=0)  # 1000^(1/3) = 10
    assert hg.equidistant_limit(5, 3).source == "Jung + sum of squared distances (I20)"
    # a uniform grid of k^d points with spacing 1/(k-1) has diameter sqrt(d); the bound must hold
    for k, d in ((3, 2), (4, 2), (3, 3)):
        g = np.stack(np.meshgrid(*[np.arange(k, dtype=float)] * d), -1).reshape(-1, d)
        ratio = hg.closest_pair(g).distance / hg.row_diameter(g)
        assert ratio <= hg.equidistant_limit(k**d, d).upper


@given(hnp.arrays(np.float64, st.tuples(st.integers(2, 25), st.integers(1, 5)), elements=st.floats(-5, 5)))
def test_i20_holds_for_any_cloud(X):
    D = hg.row_diameter(X)
    if D == 0:
        return
    ratio = hg.closest_pair(X).distance / D
    # I20 bounds the real ratio; each float64 distance is within a d-term rounding of the real one
    assert ratio <= hg.equidistant_limit(*X.shape).upper * (1 + 2 * kernel_rtol(X.shape[1]))


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


# Proven optima in the plane, delta*(n, 2) = 1 / (minimal diameter of n points with
# unit minimum distance): regular polygons (n <= 5), the regular pentagon with its
# centre (n = 6) and the regular hexagon with its centre (n = 7), Bateman and Erdos,
# "Geometrical extrema suggested by a lemma of Besicovitch", Amer. Math. Monthly 58
# (1951); n = 8: 2 sin(pi/14), Bezdek and Fodor, "Minimal diameter of certain sets in
# the plane", J. Combin. Theory A 85 (1999).
PLANE_OPTIMA = [
    (4, 1 / math.sqrt(2)),
    (5, 2 / (1 + math.sqrt(5))),
    (6, 1 / (2 * math.sin(2 * math.pi / 5))),
    (7, 0.5),
    (8, 2 * math.sin(math.pi / 14)),
]


@pytest.mark.slow
@pytest.mark.parametrize("n,value", PLANE_OPTIMA)
def test_search_finds_the_proven_plane_optima(n, value):
    r = hg.max_min_separation(n, 2)  # default restarts and seed
    # the local search polishes t = delta^2 to SLSQP's ftol = 1e-15 (equalize._local_search); the
    # optima are closed forms evaluated in float64 (EXACT)
    assert r.lower == pytest.approx(value, rel=EXACT.rtol, abs=0)
    assert r.lower <= value * (1 + EXACT.rtol)  # never above a proven optimum


# Best known values in three dimensions (none proven optimal): E. Friedman, "Minimizing
# the Ratio of Maximum to Minimum Distance in 3 Dimensions", Erich's Packing Center,
# https://erich-friedman.github.io/packing/maxmin3/ (configurations found by D. Cantrell,
# March 2009).  The page lists r^2 = (max/min)^2; delta = 1/r.  Closed forms where the page
# gives one; otherwise its truncated decimal ("2.293+"), i.e. r^2 in [value, value + 0.001).
@dataclass(frozen=True)
class Known3D:
    n: int
    r2: float
    closed_form: bool
    shape: str


BEST_KNOWN_3D = [
    Known3D(5, 12 / 7, True, "3-fold symmetric"),
    Known3D(6, 2.0, True, "regular octahedron"),
    Known3D(7, 2.293, False, "3-fold symmetric"),
    Known3D(8, 1 + math.sqrt(2), True, "square antiprism"),
    Known3D(9, (9 + math.sqrt(129)) / 8, True, "3-fold symmetric"),
    Known3D(10, 3.101, False, "4-fold symmetric"),
    Known3D(11, 3.384, False, "3-fold symmetric"),
    Known3D(12, (5 + math.sqrt(5)) / 2, True, "regular icosahedron"),
]


@pytest.mark.slow
@pytest.mark.parametrize("k", BEST_KNOWN_3D, ids=lambda k: f"n={k.n}")
def test_search_reaches_the_best_known_values_in_three_dimensions(k):
    r = hg.max_min_separation(k.n, 3)  # default restarts and seed
    r2 = 1.0 / r.lower**2
    if k.closed_form:  # polished to SLSQP's ftol = 1e-15; the reference is a closed form
        assert r2 == pytest.approx(k.r2, rel=EXACT.rtol, abs=0)
    else:  # the page's truncated decimal: r^2 in [value, value + 0.001) (reference data, not a tolerance)
        assert k.r2 <= r2 < k.r2 + 1e-3
    # the result is re-checkable (points X / D(X): one rounding per coordinate, d-term distances)
    assert hg.row_diameter(r.points) <= 1 + kernel_rtol(3)
    assert hg.closest_pair(r.points).distance == r.lower
    assert r.lower <= r.upper


@pytest.mark.parametrize("c", CONSTRUCTIONS, ids=lambda c: f"n={c.n},d={c.d}")
def test_search_reaches_known_constructions(c):
    r = hg.max_min_separation(c.n, c.d, restarts=10, seed=0)
    assert r.lower >= c.value * (1 - EXACT.rtol)  # polished to SLSQP's ftol = 1e-15; a closed form
    assert r.lower <= r.upper
    # the result is re-checkable (points X / D(X): one rounding per coordinate, d-term distances)
    assert hg.row_diameter(r.points) <= 1 + kernel_rtol(c.d)
    assert hg.closest_pair(r.points).distance == r.lower


def test_line_is_exact():
    r = hg.max_min_separation(5, 1)
    assert r.exact and r.lower == 0.25 and r.upper == 0.25  # k/4: every distance exact


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


# ---------------------------------------------------------------- I21
def _grad(seed, V, d):
    G = np.random.default_rng(seed).standard_normal((V, d))
    return G - G.mean(axis=0)


def test_delta_zero_reproduces_min_tension():
    G = _grad(1, 7, 2)
    r = hg.equalized_descent(G, delta=0.0, eta=1.5)
    tol = default_of(hg.min_tension, "tol")  # what equalized_descent asks of its solve, and this one
    t = hg.min_tension(G, tol=tol)
    assert r.status == "optimal"
    # two certified solves of the same T (of G, and of G projected and scaled: equal up to
    # rounding, so not the same iterates): the brackets overlap, and agree within the gaps
    assert r.lower <= 1.5 * t.flow.cost and 1.5 * t.value <= r.upper * (1 + kernel_rtol(G.size))
    assert r.lower == pytest.approx(1.5 * t.value, rel=tol + kernel_rtol(G.shape[1]), abs=0)
    assert r.upper == pytest.approx(1.5 * t.flow.cost, rel=tol, abs=0)


def test_shor_relaxation_is_exact_at_delta_zero():
    from hilbertgeom.equalize import _shor_sdp

    G = _grad(2, 6, 2)
    up, S = _shor_sdp(G, 0.0, 1.0)
    tol = 1e-10
    t = hg.min_tension(G, tol=tol)
    assert up >= t.value  # up is widened into an upper bound of T; value is below T
    assert up == pytest.approx(t.value, rel=2 * SDP_RTOL + tol, abs=0)
    assert hg.row_diameter(S) <= 1 + SDP_RTOL  # the diameter constraint is exact for S (X >= S S^T)


@pytest.mark.parametrize("delta", [0.15, 0.3])
def test_feasible_update_and_certified_bracket(delta):
    G = _grad(3, 7, 2)
    r = hg.equalized_descent(G, delta=delta, eta=2.0)
    assert r.update is not None and r.status in ("optimal", "feasible")
    S = r.update
    assert hg.row_diameter(S) <= 2.0
    assert hg.closest_pair(S).distance >= delta * 2.0
    assert np.all(np.abs(S.sum(axis=0)) <= kernel_rtol(S.shape[0]) * np.abs(S).sum(axis=0))  # centred
    assert r.lower == pytest.approx(-np.sum(G * S), rel=kernel_rtol(G.size), abs=0)
    assert r.lower <= r.upper
    # the relaxation at delta > 0 is below the delta = 0 optimum, both within the SDP's accuracy
    assert r.upper <= 2.0 * hg.min_tension(G).flow.cost * (1 + 2 * SDP_RTOL)
    assert r.gap == r.upper - r.lower  # both scaled back by the same power of two


def test_infeasible_delta_is_reported_not_raised():
    G = _grad(4, 6, 2)  # 6 points in the plane: I20 gives 0.894, packing 1/(sqrt(6) - 1) = 0.690
    for delta in (0.95, 0.8):  # 0.8 is ruled out by the packing bound only
        r = hg.equalized_descent(G, delta=delta)
        assert r.status == "infeasible" and r.update is None
        assert r.lower == -math.inf and r.upper == -math.inf and "isodiametric packing" in r.upper_source


def test_frontier_is_monotone_in_the_upper_bound():
    G = _grad(5, 6, 2)
    res = hg.equalization_frontier(G, [0.0, 0.2, 0.4])
    ups = [r.upper for r in res]
    slack = 2 * SDP_RTOL * abs(ups[0])  # two SDP values (or one and a certified flow cost)
    assert ups[0] >= ups[1] - slack and ups[1] >= ups[2] - slack
    assert [r.delta for r in res] == [0.0, 0.2, 0.4]


def test_max_separation_keeping_most_of_the_decrease():
    G = _grad(6, 6, 2)
    eps = 0.05
    good, bad = hg.max_separation_at_decrease(G, eps=eps, iters=5)
    T = hg.min_tension(G).value
    assert good.lower >= (1 - eps) * T * (1 - kernel_rtol(G.size))  # -<G, S>: a V d-term sum
    assert good.update is not None and hg.closest_pair(good.update).distance >= good.delta
    assert bad > good.delta


@pytest.mark.parametrize("kw,exc,match", [
    ({"delta": 1.5}, ValueError, r"delta must be in \[0, 1\]"),
    ({"delta": -0.1}, ValueError, "delta must be >= 0"),
    ({"delta": 0.1, "eta": 0.0}, ValueError, "eta must be > 0"),
])
def test_equalized_bad_input(kw, exc, match):
    with pytest.raises(exc, match=match):
        hg.equalized_descent(_grad(7, 4, 2), **kw)
    with pytest.raises(ValueError, match="zero column sums"):
        hg.equalized_descent(np.ones((4, 2)), delta=0.1)


def test_separation_cli_and_plot(tmp_path, capsys):
    from hilbertgeom import cli

    out = tmp_path / "conf.png"
    assert cli.main(["separation", "--n", "5", "--d", "2", "--restarts", "3", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "0.618033988" in text and out.exists() and out.stat().st_size > 1000
    assert cli.main(["separation", "--n", "1", "--d", "2"]) == 2


def test_plots(tmp_path):
    from hilbertgeom import plots

    G = _grad(8, 6, 2)
    plots.plot_separations(hg.projected_rownorm(G), tmp_path / "h.png")
    plots.plot_frontier(hg.equalization_frontier(G, [0.0, 0.2]), tmp_path / "f.png")
    plots.plot_configuration(hg.max_min_separation(6, 3, restarts=2).points, tmp_path / "c.png")
    for f in ("h.png", "f.png", "c.png"):
        assert (tmp_path / f).stat().st_size > 1000
    with pytest.raises(ValueError, match="to draw"):
        plots.plot_configuration(np.zeros((3, 4)), tmp_path / "x.png")


# ---------------------------------------------------------------- scalable equalizer
def test_equalize_rows_raises_separation_and_keeps_efficiency():
    G = _grad(9, 200, 6)
    r = hg.equalize_rows(G, eta=1.5, keep=0.97, iters=60)
    S = r.update
    assert hg.row_diameter(S) <= 1.5  # shrunk until D <= eta holds in float64, scaled by a power of two
    assert np.all(np.abs(S.sum(axis=0)) <= kernel_rtol(S.shape[0]) * np.abs(S).sum(axis=0))  # centred
    assert r.separation_ratio > r.start_separation_ratio
    assert r.relative_efficiency >= 0.97
    # the ratio is measured before the rescale to diameter eta (a rounding per coordinate)
    rel = 2 * kernel_rtol(S.shape[1])
    assert r.separation_ratio == pytest.approx(hg.closest_pair(S).distance / hg.row_diameter(S), rel=rel, abs=0)
    assert r.decrease == pytest.approx(-np.sum(G * S), rel=kernel_rtol(G.size), abs=0)


def test_equalize_rows_against_the_exact_frontier():
    """Validation for V <= 12: at the separation it reaches, its decrease is below
    the Shor SDP bound (it must be) and not far below the best feasible update."""
    G = _grad(10, 10, 3)
    r = hg.equalize_rows(G, iters=100, keep=0.95)
    delta = r.separation_ratio * 0.999
    ex = hg.equalized_descent(G, delta=delta, eta=r.diameter)
    assert r.decrease <= ex.upper * (1 + kernel_rtol(G.size))  # a certified bound; decrease: V d terms
    assert ex.update is not None and r.decrease >= 0.9 * ex.lower


def test_equalize_rows_in_a_strict_array_namespace():
    import array_api_strict as xp

    G = _grad(11, 40, 4)
    a = hg.equalize_rows(G, iters=10)
    b = hg.equalize_rows(xp.asarray(G), iters=10, xp=xp)
    # the same iteration; its reductions (V-term sums) in another order
    rel = kernel_rtol(G.shape[0])
    assert b.separation_ratio == pytest.approx(a.separation_ratio, rel=rel, abs=0)
    assert b.decrease == pytest.approx(a.decrease, rel=rel, abs=0)


def test_equalize_rows_reports_each_iteration_on_stderr(capsys):
    """One line per iteration, its best ratio the result's; silent when asked, and by
    default on a few hundred rows (the default turns on above 2048)."""
    G = _grad(9, 200, 6)
    r = hg.equalize_rows(G, iters=8, verbose=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("equalize_rows: 200 rows: projected RowNorm's separation ratio ")
    assert float(err[0].split("ratio ")[1].split()[0]) == float(f"{r.start_separation_ratio:.6g}")
    steps = [line for line in err if "equalize_rows: iteration " in line]
    assert r.stop == "iterations" and len(steps) == r.iterations == 8
    best = float(steps[-1].split("(best ")[1].split(")")[0])
    assert best == float(f"{r.separation_ratio:.6g}")  # the printed digits of the returned ratio
    assert all(line.endswith(" s]") for line in err)  # elapsed time on every line
    for verbose in (False, None):
        hg.equalize_rows(G, iters=3, verbose=verbose)
        assert capsys.readouterr().err == ""


def test_equalize_rows_bad_input():
    with pytest.raises(ValueError, match=r"keep must be in \(0, 1\]"):
        hg.equalize_rows(_grad(1, 5, 2), keep=1.5)
    with pytest.raises(ValueError, match="eta must be > 0"):
        hg.equalize_rows(_grad(1, 5, 2), eta=0.0)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
def test_equalized_descent_is_scale_free(scale):
    """Status and relative gap do not depend on the scale of G (the problem is homogeneous)."""
    G = _grad(3, 5, 2)
    ref = hg.equalized_descent(G, delta=0.3, restarts=3)
    r = hg.equalized_descent(G * scale, delta=0.3, restarts=3)
    assert r.status == ref.status
    # other roundings of the same problem: the conic solves agree to the solver policy
    assert r.gap / abs(r.upper) == pytest.approx(ref.gap / abs(ref.upper), rel=SOLVER.rtol, abs=0)
    # the relaxation at delta > 0 is below the delta = 0 optimum, within the SDP's accuracy
    assert r.upper <= scale * hg.min_tension(G).flow.cost * (1 + 2 * SDP_RTOL)


def test_updates_never_exceed_eta_by_rounding():
    for seed in range(30):
        G = _grad(100 + seed, 6, 2)
        eta = float(np.random.default_rng(seed).uniform(0.3, 3.0))
        assert hg.row_diameter(hg.equalized_descent(G, delta=0.0, eta=eta).update) <= eta
    G = _grad(7, 50, 3)
    r = hg.equalize_rows(G, eta=0.7, iters=15)
    assert hg.row_diameter(r.update) <= 0.7


# ---------------------------------------------------------------- size guard and local search
def _readme_grad():
    G = np.random.default_rng(1).standard_normal((500, 16))
    return G - G.mean(axis=0)


@pytest.mark.parametrize("call", [
    lambda G: hg.equalized_descent(G, delta=0.3),
    lambda G: hg.equalization_frontier(G, [0.0, 0.3]),
    lambda G: hg.max_separation_at_decrease(G, eps=0.05),
], ids=["equalized_descent", "equalization_frontier", "max_separation_at_decrease"])
def test_size_guard_raises_before_any_solve(call, monkeypatch):
    """The README's 500 x 16 gradient used to abort the interpreter (a 142 GB allocation
    inside the conic solver); now a ValueError names the need, the limit and the way out,
    and nothing is solved or allocated on the way."""
    import tracemalloc

    from hilbertgeom import equalize, tension

    def forbidden(*a, **k):
        raise AssertionError("a solver ran before the size guard")

    monkeypatch.setattr(equalize, "_shor_sdp", forbidden)
    monkeypatch.setattr(equalize, "_ccp", forbidden)
    monkeypatch.setattr(tension, "min_tension", forbidden)
    G = _readme_grad()
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"V = 500 rows \(rank 16\) is too large for the Shor SDP: "
                                             r"its 516-square PSD block .* need about 1\.07 TB, above the limit "
                                             r"of .*equalize_rows"):
            call(G)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # a few copies of G and an SVD, no solver workspace


def test_size_guard_follows_the_memory_model():
    """The estimate is the closed form 60 t^2 + 25 kB * pairs + 4 MiB, t = (V+r)(V+r+1)/2;
    max_memory moves the limit both ways."""
    from hilbertgeom.equalize import _shor_memory

    V, r = 500, 16
    t = (V + r) * (V + r + 1) // 2
    assert t == 133386 and 8 * t * t == 142334599968  # the allocation in the bug report: one dense block
    assert _shor_memory(V, r) == 60 * t * t + 25_000 * (V * (V - 1) // 2) + 4 * 2**20
    G = _grad(12, 12, 3)
    need = _shor_memory(12, 3)
    with pytest.raises(ValueError, match=r"need about 6\.71 MB, above the limit of 1 kB \(max_memory\)"):
        hg.equalized_descent(G, delta=0.3, max_memory=1000)
    with pytest.raises(ValueError, match="above the limit"):
        hg.equalized_descent(G, delta=0.3, max_memory=need - 1)
    assert hg.equalized_descent(G, delta=0.3, max_memory=need).update is not None
    # delta = 0 (min_tension) and a proven-infeasible delta need no SDP: no guard
    assert hg.equalized_descent(G, delta=0.0, max_memory=1).status == "optimal"
    assert hg.equalized_descent(G, delta=0.99, max_memory=1).status == "infeasible"
    with pytest.raises(ValueError, match="max_memory must be >= 1"):
        hg.equalized_descent(G, delta=0.3, max_memory=0)


def test_memory_estimate_against_measured_peak():
    """The estimate is checked against the peak resident memory of the solve in a
    fresh process (VmHWM, which sees the Rust solver's allocations; tracemalloc
    would not)."""
    import subprocess
    import sys

    from hilbertgeom.equalize import _shor_memory

    # Linux: writing 5 to clear_refs resets the peak (VmHWM) to the current resident
    # size, so the peak read after the solve is the solve's own, whatever the
    # imports' transient peak was before it
    code = (
        "import re, numpy as np\n"
        "from hilbertgeom import equalize as eq\n"
        "def kb(field):\n"
        "    return int(re.search(field + r':\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))\n"
        "G = np.random.default_rng(1).standard_normal((34, 14)); G -= G.mean(axis=0)\n"
        "eq._shor_sdp(G[:2], 0.3, 1.0)\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "base = kb('VmRSS')\n"
        "eq._shor_sdp(G, 0.3, 1.0)\n"
        "print((kb('VmHWM') - base) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    measured = int(out.stdout.split()[-1])
    assert measured > 0, out.stdout
    ratio = _shor_memory(34, 14) / measured
    assert 0.8 <= ratio <= 3.0, (measured, ratio)  # neither below the need nor wildly above it


def _exact_feasible(S, eta, delta):
    """D(S) <= eta and every pair >= delta eta, in exact rational arithmetic."""
    from fractions import Fraction

    F = [[Fraction(float(x)) for x in row] for row in np.asarray(S)]
    d2 = [sum((a - b) ** 2 for a, b in zip(F[i], F[j], strict=True)) for i in range(len(F)) for j in range(i)]
    return max(d2) <= Fraction(eta) ** 2 and min(d2) >= (Fraction(delta) * Fraction(eta)) ** 2


@pytest.mark.parametrize("V,d,delta,eta", [(12, 3, 0.3, 1.5), (12, 3, 0.45, 0.7), (16, 8, 0.6, 1.0)])
def test_mid_size_bracket_with_exact_rechecks(V, d, delta, eta):
    G = _grad(20 + V + d, V, d)
    r = hg.equalized_descent(G, delta=delta, eta=eta)
    assert r.update is not None and r.status in ("optimal", "feasible")
    S = r.update
    assert _exact_feasible(S, eta, delta)
    assert np.all(np.abs(S.sum(axis=0)) <= kernel_rtol(V) * np.abs(S).sum(axis=0))  # centred
    assert r.lower == pytest.approx(-math.fsum((G * S).ravel()), rel=kernel_rtol(G.size), abs=0)
    assert r.lower <= r.upper
    T = hg.min_tension(G, tol=1e-10)
    # the relaxation is below the delta = 0 optimum, within the SDP's accuracy
    assert r.upper <= eta * T.flow.cost * (1 + 2 * SDP_RTOL)
    assert r.separation == hg.closest_pair(S).distance


def test_bracket_closes_where_the_relaxation_is_tight():
    """Sharpness: V = 20 in R^16 at delta = 0.3 the relaxation's S is already separated,
    and the local search must reach the SDP bound (certified gap within tolerance)."""
    G = _grad(1, 20, 16)
    r = hg.equalized_descent(G, delta=0.3)
    assert r.status == "optimal"
    assert r.gap <= SOLVER.rtol * r.upper
    assert _exact_feasible(r.update, 1.0, 0.3)


def test_relaxation_in_the_row_space_equals_the_full_relaxation():
    """Reducing the SDP to the rank r of G (block V + r instead of V + d) loses nothing:
    compared with the Shor SDP written out in all d coordinates."""
    import cvxpy as cp

    from hilbertgeom.equalize import _rank_basis, _shor_sdp

    rng = np.random.default_rng(3)
    G = rng.standard_normal((8, 2)) @ rng.standard_normal((2, 6))
    G -= G.mean(axis=0)
    assert _rank_basis(G)[0] == 2
    delta, V, d = 0.4, 8, 6
    iu, ju = np.triu_indices(V, 1)
    S = cp.Variable((V, d))
    X = cp.Variable((V, V), symmetric=True)
    dist = cp.diag(X)[iu] + cp.diag(X)[ju] - 2 * X[iu, ju]
    full = cp.Problem(cp.Maximize(-cp.sum(cp.multiply(G, S))),
                      [cp.bmat([[np.eye(d), S.T], [S, X]]) >> 0, cp.sum(S, axis=0) == 0,
                       X @ np.ones(V) == 0, dist <= 1, dist >= delta**2])
    full.solve(solver=cp.CLARABEL)
    up, S_r = _shor_sdp(G, delta, 1.0)
    assert up == pytest.approx(full.value, rel=2 * SDP_RTOL, abs=0)  # two SDP values of one problem
    assert up >= full.value * (1 - SDP_RTOL)  # widened into an upper bound
    assert S_r.shape == (V, d) and hg.row_diameter(S_r) <= 1 + SDP_RTOL


def test_progress_lines_on_stderr(capsys):
    G = _grad(2, 8, 2)
    hg.equalized_descent(G, delta=0.3)  # small: quiet by default
    assert capsys.readouterr().err == ""
    hg.equalized_descent(G, delta=0.3, verbose=True)
    err = capsys.readouterr().err
    assert "Shor SDP with a 10-square PSD block" in err and "Shor SDP done: upper" in err
    assert "start 1/2 (relaxation): lower" in err



# ---------------------------------------------------------------- stops, namespaces, large n
def test_equalize_rows_stops_on_stagnation():
    """A huge budget with a low keep used to hang: the ratio stops improving long before."""
    G = _grad(0, 64, 4)
    r = hg.equalize_rows(G, iters=5000, keep=0.5, patience=20)
    assert r.stop == "stagnation" and r.iterations < 5000
    # nothing better than EQUALIZER_RTOL (relative) came in the last `patience` iterations
    earlier = hg.equalize_rows(G, iters=r.iterations - 20, keep=0.5, patience=10**6)
    assert earlier.stop == "iterations"
    assert r.separation_ratio <= earlier.separation_ratio * (1 + EQUALIZER_RTOL)
    assert hg.row_diameter(r.update) <= 1.0
    # the ratio is measured before the rescale to diameter eta (a rounding per coordinate)
    assert r.separation_ratio == pytest.approx(hg.closest_pair(r.update).distance / hg.row_diameter(r.update),
                                               rel=2 * kernel_rtol(G.shape[1]), abs=0)


def test_equalize_rows_reports_its_stop():
    G = _grad(9, 200, 6)
    assert hg.equalize_rows(G, iters=3).stop == "iterations"
    r = hg.equalize_rows(G, iters=500, keep=0.999)
    assert r.stop == "keep" and r.relative_efficiency >= 0.999
    assert hg.equalize_rows(G, iters=0).stop == "iterations"


def test_equalize_rows_namespace_argument():
    G = _grad(11, 40, 4)
    a = hg.equalize_rows(G, iters=10)
    b = hg.equalize_rows(G, iters=10, xp="numpy")
    c = hg.equalize_rows(G, iters=10, xp=np)
    np.testing.assert_array_equal(a.update, b.update)
    np.testing.assert_array_equal(a.update, c.update)
    with pytest.raises(ValueError, match=r"xp must be an array namespace .* got the string 'cupyx'"):
        hg.equalize_rows(G, xp="cupyx")
    with pytest.raises(ValueError, match=r"xp must be an array namespace .* lacks asarray"):
        hg.equalize_rows(G, xp=object())
    with pytest.raises(ValueError, match="patience must be >= 1"):
        hg.equalize_rows(G, patience=0)


@pytest.mark.parametrize("n,d", [(2 * 10**6, 10**6), (10**8, 10**7), (2**40, 40), (2**40 + 1, 40)])
def test_equidistant_limit_for_huge_dimension(n, d, monkeypatch):
    """For n <= 2^d the packing bound is >= 1 and is not certified (its exact check raises a
    float to the d-th power, which hung for d = 10^6); the I20 value is certified exactly."""
    from fractions import Fraction

    from hilbertgeom import equalize

    real = equalize._packing_bound

    called = []

    def packing(n_, d_):
        called.append((n_, d_))
        assert n_ > 2**d_, "packing bound certified where it cannot be below 1"
        return real(n_, d_)

    monkeypatch.setattr(equalize, "_packing_bound", packing)
    lim = hg.equidistant_limit(n, d)
    assert lim.source == "Jung + sum of squared distances (I20)" and not lim.possible
    q = Fraction(n * d, (n - 1) * (d + 1))
    assert Fraction(lim.upper) ** 2 >= q  # rounded up
    assert Fraction(math.nextafter(lim.upper, 0.0)) ** 2 < q  # by one ulp at most
    if n <= 2**d:
        # the packing bound 1 / (n^(1/d) - 1) is at least 1 here (n^(1/d) <= 2), so it cannot
        # decide and is never certified (its exact check hung for d = 10^6); I20's bound
        # from the library is below 1 and decides
        assert called == []
        assert lim.upper < 1.0
    else:  # just above 2^d the packing bound is certified, and still above I20
        assert equalize._packing_bound(n, d) > lim.upper


# ---------------------------------------------------------------- magnitudes (homogeneity)
def _same_result(a, b, k):
    """b is a computed at G 2^k: bounds scale by 2^k exactly, the update is identical."""
    assert b.status == a.status
    assert b.lower == math.ldexp(a.lower, k) and b.upper == math.ldexp(a.upper, k)
    assert b.gap == math.ldexp(a.gap, k)
    np.testing.assert_array_equal(b.update, a.update)


@pytest.mark.parametrize("k", [-1000, -996, -600, 600, 996, 1000])
def test_equalized_descent_is_exactly_homogeneous_in_powers_of_two(k):
    """G and G 2^k (magnitudes 1e-301 .. 1e301) give the same problem after the exact
    rescaling at entry: bounds scaled by 2^k exactly, the same update, lower <= upper."""
    G = _grad(3, 6, 2)
    for delta in (0.0, 0.3):
        ref = hg.equalized_descent(G, delta=delta)
        r = hg.equalized_descent(np.ldexp(G, k), delta=delta)
        _same_result(ref, r, k)
        assert math.isfinite(r.lower) and r.lower <= r.upper


@given(st.integers(-300, 300), st.floats(0.1, 0.5))
@settings(max_examples=6)
def test_equalized_descent_is_homogeneous_at_any_magnitude(p, delta):
    """Decimal scales 1e-300 .. 1e300 (not powers of two: a different rounding of the same
    problem): the bracket scales within the solver policy and stays ordered."""
    G = _grad(5, 6, 2)
    s = 10.0**p
    ref = hg.equalized_descent(G, delta=delta)
    r = hg.equalized_descent(G * s, delta=delta)
    assert r.lower <= r.upper and math.isfinite(r.lower) and math.isfinite(r.upper)
    assert r.upper / s == pytest.approx(ref.upper, rel=SOLVER.rtol, abs=0)
    assert r.lower / s == pytest.approx(ref.lower, rel=SOLVER.rtol, abs=0)
    assert _exact_feasible(r.update, 1.0, delta)


@pytest.mark.parametrize("scale", [1e-300, 5e-324 * 2**40, 1e300, 1.5e308])
def test_frontier_and_equalizer_at_extreme_magnitudes(scale):
    """No NaN or inf where the answer is representable: finite, ordered, feasible."""
    G = _grad(6, 8, 3)
    G /= 64 * np.abs(G).max()  # T(G) * 1.5e308 stays representable
    Gs = G * scale
    for r in hg.equalization_frontier(Gs, [0.0, 0.3], center=True):
        assert math.isfinite(r.lower) and math.isfinite(r.upper) and r.lower <= r.upper
        assert _exact_feasible(r.update, 1.0, r.delta)
        assert r.upper / scale == pytest.approx(hg.equalized_descent(G, delta=r.delta).upper, rel=SOLVER.rtol, abs=0)
    e = hg.equalize_rows(Gs, iters=20)
    ref = hg.equalize_rows(G, iters=20)
    # Gs is G rounded once more (a decimal scale; below the normal range each entry moves by up
    # to 2^-1075, so a row's direction by sqrt(d) 2^-1075 / ||gs_i||): the same iteration on it
    moved = math.sqrt(G.shape[1]) * 2.0**-1074 / (float(np.linalg.norm(G, axis=1).min()) * scale) / 2
    rel = kernel_rtol(G.size) + moved
    assert math.isfinite(e.decrease) and e.decrease / scale == pytest.approx(ref.decrease, rel=rel, abs=0)
    assert e.separation_ratio == pytest.approx(ref.separation_ratio, rel=rel, abs=0)
    assert hg.row_diameter(e.update) <= 1.0


@pytest.mark.parametrize("k", [-1000, 1000])
def test_equalize_rows_is_exactly_homogeneous_in_powers_of_two(k):
    G = _grad(7, 50, 3)
    a = hg.equalize_rows(G, eta=0.7, iters=15)
    b = hg.equalize_rows(np.ldexp(G, k), eta=0.7, iters=15)
    np.testing.assert_array_equal(a.update, b.update)
    assert b.decrease == math.ldexp(a.decrease, k) and b.separation_ratio == a.separation_ratio
    c = hg.equalize_rows(G, eta=math.ldexp(0.7, 1000), iters=15)  # eta ~ 7e300
    np.testing.assert_array_equal(c.update, np.ldexp(a.update, 1000))
    assert c.diameter == math.ldexp(a.diameter, 1000) <= math.ldexp(0.7, 1000)


def test_max_separation_at_decrease_is_scale_free():
    G = _grad(6, 6, 2)
    a, abad = hg.max_separation_at_decrease(G, eps=0.05, iters=4)
    b, bbad = hg.max_separation_at_decrease(np.ldexp(G, 990), eps=0.05, iters=4)
    assert b.delta == a.delta and bbad == abad
    assert b.lower == math.ldexp(a.lower, 990)
    np.testing.assert_array_equal(b.update, a.update)
