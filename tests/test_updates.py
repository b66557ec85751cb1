"""Other geometries (I18), evaluate_update and the update bench."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import U64, default_of, gamma, kernel_rtol
from hypothesis import given, settings
from hypothesis import strategies as st

import hilbertgeom as hg
from hilbertgeom import cli
from hilbertgeom.tolerances import tolerance

EXACT = tolerance("exact")


def centered(rng, V, d):
    G = rng.standard_normal((V, d))
    return G - G.mean(axis=0)


def test_linf_sign_descent_is_optimal_per_column(rng):
    """I18: under the row-l_inf diameter the problem separates by columns, each the
    d = 1 case with value ||g_k||_1 / 2 (closed form), attained by -(eta/2) P sign(G)."""
    G = centered(rng, 9, 4)
    eta = 0.8
    S = hg.linf_steepest_descent(G, eta=eta)
    assert hg.row_diameter(S, norm=np.inf) <= eta  # documented: each column's range at most eta
    # -<G, S> = (eta/2) (sum |G| - (1^T G) m): two V d-term sums (gamma_{Vd} each), G's column
    # sums (centred here: gamma_V of sum |G|), and S's entries (eta/2)(s - m) (3 roundings)
    rel = 2 * gamma(G.size) + gamma(G.shape[0]) + 3 * U64
    assert -np.sum(G * S) == pytest.approx(eta / 2 * np.abs(G).sum(), rel=rel, abs=0)
    tol = 1e-11
    for k in range(4):  # each column: the d = 1 closed form of min_tension, within its gap (V-term sums)
        want = np.abs(G[:, k]).sum() / 2
        assert hg.min_tension(G[:, k : k + 1], tol=tol).value == pytest.approx(want, rel=tol + kernel_rtol(9), abs=0)


@settings(max_examples=10, deadline=None)
@given(st.integers(3, 8), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_steepest_rules_beat_random_feasible_updates(V, d, seed):
    """Each rule is steepest for its norm: no random update of the same norm does better."""
    rng = np.random.default_rng(seed)
    G = centered(rng, V, d)
    rules = [
        (hg.sign_update, lambda S: np.abs(S).max()),
        (hg.rownorm_update, lambda S: np.linalg.norm(S, axis=1).max()),
        (hg.polar_update, lambda S: np.linalg.norm(S, 2)),
    ]
    k = kernel_rtol(V * d)  # a V d-term inner product; the norms: SVD or d-term sums, backward stable
    for rule, norm in rules:
        S = rule(G)
        best = -np.sum(G * S)
        assert norm(S) <= 1 + k
        for _ in range(20):
            R = rng.standard_normal((V, d))
            R /= norm(R)
            # <-G, R> <= N*(G) N(R) = best: equal only up to the rounding of both inner products
            assert -np.sum(G * R) <= best + k * (np.abs(G * R).sum() + np.abs(G * S).sum())


def test_polar_update_is_the_orthogonal_factor(rng):
    G = centered(rng, 6, 3)
    S = -hg.polar_update(G)
    # a backward-stable SVD: orthonormal factors and singular values to a few hundred ulps
    np.testing.assert_allclose(S.T @ S, np.eye(3), rtol=0, atol=EXACT.atol)
    np.testing.assert_allclose(-np.sum(G * -S), np.linalg.svd(G, compute_uv=False).sum(), rtol=EXACT.rtol, atol=0)


def test_evaluate_update_exact_and_rownorm(rng):
    G = centered(rng, 20, 3)
    tol = 1e-10
    ten = hg.min_tension(G, tol=tol)
    ex = hg.evaluate_update(G, hg.steepest_descent(G, eta=2.0, tol=tol), tension=ten)
    # the exact step against the same solve: 1 up to the rounding of -<G, S> (V d terms) and of D(S)
    assert ex.decrease_ratio == pytest.approx(1.0, rel=kernel_rtol(G.size), abs=0)
    lo, hi = ex.decrease_ratio_bounds
    assert lo <= ex.decrease_ratio <= hi  # hi is the ratio at the lower end of T
    rn = hg.evaluate_update(G, hg.projected_rownorm(G), tension=ten)
    k = np.linalg.matrix_rank(G)
    # at equal step eta, RowNorm achieves >= sqrt((k+1)/(2k)) of the optimum (I16); per unit diameter even more
    assert rn.decrease_ratio >= math.sqrt((k + 1) / (2 * k)) * (1 - tol - kernel_rtol(G.size))
    # centred: each column sum is a V-term sum of that column's entries
    S = hg.projected_rownorm(G)
    assert rn.column_sum <= kernel_rtol(G.shape[0]) * np.abs(S).sum(axis=0).max() / np.abs(S).sum()
    assert rn.max_separation == rn.diameter and 0 <= rn.separation_ratio <= 1


def test_evaluate_update_accepts_dlpack_and_checks_shape(rng):
    import array_api_strict as xp

    G = centered(rng, 5, 2)
    S = hg.projected_rownorm(G)
    a = hg.evaluate_update(G, S)
    b = hg.evaluate_update(xp.asarray(G), xp.asarray(S))
    assert a == b
    with pytest.raises(ValueError, match="S must have the shape of G"):
        hg.evaluate_update(G, S[:3])
    with pytest.raises(TypeError, match="tension must be a TensionResult"):
        hg.evaluate_update(G, S, tension=1.0)


def test_gradient_suite_is_zero_sum_and_seeded():
    a = hg.gradient_suite(16, 4, seed=3)
    b = hg.gradient_suite(16, 4, seed=3)
    assert set(a) == {"gaussian", "rank one", "low rank (4)", "cross-entropy (Zipf)", "simplex worst case"}
    for name, G in a.items():
        assert G.shape == (16, 4)
        # centred: each column sum is a V-term sum of that column's entries
        assert np.all(np.abs(G.sum(axis=0)) <= kernel_rtol(G.shape[0]) * np.abs(G).sum(axis=0)), name
        np.testing.assert_array_equal(G, b[name])


def test_bench_updates_with_a_user_rule():
    rows = hg.bench_updates(V=12, d=3, rules={"half RowNorm": lambda G: 0.5 * hg.projected_rownorm(G),
                                              "exact": lambda G: hg.steepest_descent(G, eta=1.0)})
    assert len(rows) == 2 * 5
    tol = default_of(hg.bench_updates, "tol")  # the bench's certified gap (and min_tension's)
    for case, rule, rep in rows:
        if rule == "exact":  # its own solve, so within its gap of the bench's (V d-term sums)
            assert rep.decrease_ratio == pytest.approx(1.0, rel=tol + kernel_rtol(12 * 3), abs=0), case
        else:  # rho <= 1 for the true T; the ratio uses the lower end of the bracket
            assert rep.decrease_ratio <= 1 + tol + kernel_rtol(12 * 3)
    with pytest.raises(TypeError, match="is not callable"):
        hg.bench_updates(V=4, d=2, rules={"bad": 3})


def test_bench_updates_cli(capsys):
    assert cli.main(["bench-updates", "--V", "10", "--d", "3"]) == 0
    out = capsys.readouterr().out
    assert "simplex worst case" in out and "polar (Muon)" in out and "exact (D steepest)" in out


# --------------------------------------------------------------------------- the worst-case row
@pytest.mark.parametrize("V, d", [(64, 8), (12, 3), (5, 8)])
def test_simplex_worst_case_projected_rownorm_row_closed_form(V, d):
    """The bench's "simplex worst case / projected RowNorm" row against its closed form.

    G: the k + 1 vertices of a centred regular simplex (k = min(d, V - 1), rows of
    norm sqrt(k/(k+1)), pairwise sqrt(2)) plus V - k - 1 zero rows.  Projected
    RowNorm at eta = 1 keeps the zero rows at 0 and sends vertex i to -u_i/2 with
    u_i = g_i/||g_i|| (the unit vertices already sum to 0).  Hence
      D(S)     = max(|u_i - u_j|/2, |u_i|/2) = sqrt(2 (k+1)/k)/2 = sqrt((k+1)/(2k)),
      decrease = sum_i ||g_i|| / 2 = sqrt(k (k+1))/2,
      T(G)     = J_k sum_i ||g_i|| = sqrt(k/(2(k+1))) sqrt(k (k+1)) = k/sqrt(2)  (I14,
                 zero rows sit at the circumcentre, within J_k <= 1 of every vertex),
    and the ratio decrease / (D T) = 1: per unit diameter projected RowNorm is the
    exact steepest direction here (at equal eta it keeps sqrt((k+1)/(2k)), I16).
    Zero rows whose centring noise is scaled to unit length (the bug of issue 10)
    give a larger D and a ratio below 1."""
    k = min(d, V - 1)
    case = {"simplex worst case": hg.gradient_suite(V, d)["simplex worst case"]}
    ((_, _, rep),) = hg.bench_updates(cases=case, rules={"projected RowNorm": hg.update_rules()["projected RowNorm"]})
    assert rep.diameter == pytest.approx(math.sqrt((k + 1) / (2 * k)), rel=EXACT.rtol, abs=0)
    assert rep.decrease == pytest.approx(math.sqrt(k * (k + 1)) / 2, rel=EXACT.rtol, abs=0)
    solver = default_of(hg.bench_updates, "tol")  # the bench's certified relative gap
    assert rep.tension == pytest.approx(k / math.sqrt(2), rel=solver, abs=0)
    assert rep.decrease_ratio == pytest.approx(1.0, rel=solver, abs=0)
    lo, hi = rep.decrease_ratio_bounds
    assert lo <= 1.0 + EXACT.rtol and hi >= 1.0 - EXACT.rtol  # the certified bracket holds the exact 1


def test_simplex_worst_case_row_in_the_cli_table(capsys):
    """The shipped table (defaults V = 64, d = 8, tol 1e-6): ratio 1.000000, D = 0.75 = sqrt(9/16)."""
    assert cli.main(["bench-updates"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("simplex worst case") and "projected RowNorm" in ln]
    cells = line.split()
    printed = 4  # D(S) is printed with 4 significant digits ("10.4g"): within half a unit of the last
    assert cells[-4] == "1.000000" and float(cells[-2]) == pytest.approx(0.75, rel=0.5 * 10.0 ** (1 - printed), abs=0)


# --------------------------------------------------------------------------- the bench's hygiene
def test_bench_rule_writing_into_its_argument_cannot_change_the_gradient():
    """A rule that scales its argument in place (and returns it) is judged against the
    untouched G: the same report as the rule that copies first (a ratio above 1, as
    the 1.43 of issue 14, is impossible)."""
    def in_place(G):
        G *= -0.5
        return G

    def copying(G):
        return G * -0.5

    cases = {n: G for n, G in hg.gradient_suite(10, 3, seed=2).items() if n in ("gaussian", "rank one")}
    kept = {name: G.copy() for name, G in cases.items()}
    a = hg.bench_updates(cases=cases, rules={"r": in_place})
    b = hg.bench_updates(cases=cases, rules={"r": copying})
    for (ca, _, ra), (cb, _, rb) in zip(a, b, strict=True):
        assert ca == cb and ra == rb, ca
        # rho <= 1 for the true T; the ratio uses the lower end of the bracket, within tol of T
        assert ra.decrease_ratio <= 1.0 + default_of(hg.bench_updates, "tol") + kernel_rtol(10 * 3)
    for name, G in cases.items():
        np.testing.assert_array_equal(G, kept[name])


def test_bench_solves_each_case_once(monkeypatch):
    """One certified min_tension per case: the exact rule reuses it (tension=), and so
    does every report; a solve per rule, or a second one for the exact rule, fails."""
    from hilbertgeom import tension as tension_pkg
    from hilbertgeom import updates

    calls = []
    real = tension_pkg.min_tension

    def counting(G, /, **kw):
        calls.append(G.shape)
        return real(G, **kw)

    monkeypatch.setattr(updates, "min_tension", counting)
    for mod in {tension_pkg, *(m for m in (getattr(tension_pkg, n, None) for n in dir(tension_pkg))
                                if getattr(m, "min_tension", None) is real and hasattr(m, "__file__"))}:
        monkeypatch.setattr(mod, "min_tension", counting)
    rows = hg.bench_updates(V=10, d=3)
    assert len(calls) == 5 == len({c for c, _, _ in rows})
    exact = [r for _, name, r in rows if name == "exact (D steepest)"]
    # the same solve on both sides: 1 up to the rounding of -<G, S> (V d terms) and of D(S)
    assert all(r.decrease_ratio == pytest.approx(1.0, rel=kernel_rtol(10 * 3), abs=0) for r in exact)


def test_bench_progress_callback_and_solver_options():
    seen = []
    hg.bench_updates(V=6, d=2, rules={"Sign": hg.sign_update}, on_case=lambda *a: seen.append(a))
    assert seen == [(1, 5, "gaussian"), (2, 5, "rank one"), (3, 5, "low rank (4)"),
                    (4, 5, "cross-entropy (Zipf)"), (5, 5, "simplex worst case")]
    with pytest.raises(hg.SolverError, match="inaccurate") as err:
        hg.bench_updates(V=40, d=6, tol=1e-15, max_iter=1, rules={"Sign": hg.sign_update})
    r = err.value.result
    assert r.value <= r.flow.cost  # the best certified bracket travels with the error


# --------------------------------------------------------------------------- the cross-entropy case
def _dense_cross_entropy(V, d, seed):
    """Brute force: the suite's draws, then the dense (B, V) softmax and one-hot."""
    rng = np.random.default_rng(seed)
    rng.standard_normal((V, d)), rng.standard_normal(V), rng.standard_normal(d)
    k = min(4, d, V - 1)
    rng.standard_normal((V, k)), rng.standard_normal((k, d))
    B = 4 * V
    H = rng.standard_normal((B, d))
    U = rng.standard_normal((V, d)) / math.sqrt(d)
    w = np.arange(1, V + 1) ** -1.1
    targets = rng.choice(V, size=B, p=w / w.sum())
    Z = H @ U.T
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    Y = np.zeros((B, V))
    Y[np.arange(B), targets] = 1.0
    G = (P - Y).T @ H / B
    return G - G.mean(axis=0)


@pytest.mark.parametrize("V, d", [(3, 1), (50, 4), (301, 7)])
def test_cross_entropy_case_matches_the_dense_formula(V, d):
    G = hg.gradient_suite(V, d, seed=5)["cross-entropy (Zipf)"]
    R = _dense_cross_entropy(V, d, 5)
    np.testing.assert_allclose(G, R, rtol=0, atol=EXACT.rtol * np.abs(R).max())


def test_cross_entropy_case_in_tiles_of_the_batch(monkeypatch):
    """Many tiles (one batch row each) give the dense answer; memory stays far below
    the (B, V) matrices (V = 3000: B = 12,000, a dense P alone would be 288 MB)."""
    import tracemalloc

    from hilbertgeom import updates

    monkeypatch.setattr(updates, "_CE_TILE", 1)
    G = hg.gradient_suite(40, 3, seed=1)["cross-entropy (Zipf)"]
    np.testing.assert_allclose(G, _dense_cross_entropy(40, 3, 1), rtol=0, atol=EXACT.rtol * np.abs(G).max())
    monkeypatch.undo()
    tracemalloc.start()
    try:
        hg.gradient_suite(3000, 4, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


# --------------------------------------------------------------------------- evaluate_update is never NaN
def test_evaluate_update_is_scale_free_and_finite(rng):
    """rho(a G, b S) = rho(G, S) for powers of two a, b (rho is homogeneous of degree 0
    in each): the same number from subnormal to near-overflow magnitudes.  T(a G) =
    a T(G) is passed as the solve rescaled exactly, so only evaluate_update is tested;
    S is compared after its own rounding (a subnormal S keeps only a few bits)."""
    from dataclasses import replace

    G = centered(rng, 8, 3)
    S = hg.projected_rownorm(G)
    ten = hg.min_tension(G, tol=1e-10)
    for eg in (-1000, -300, 0, 300, 1000):
        Ga = np.ldexp(G, eg)
        tena = replace(ten, value=math.ldexp(ten.value, eg),
                       flow=replace(ten.flow, cost=math.ldexp(ten.flow.cost, eg)))
        for es in (-1070, -300, 0, 300, 1020):
            Sb = np.ldexp(S, es)
            ref = hg.evaluate_update(G, np.ldexp(Sb, -es), tension=ten)  # exact: S as rounded at 2^es
            rep = hg.evaluate_update(Ga, Sb, tension=tena)
            for x in (rep.decrease_ratio, *rep.decrease_ratio_bounds, rep.separation_ratio, rep.column_sum):
                assert math.isfinite(x), (eg, es)
            assert rep.decrease_ratio == pytest.approx(ref.decrease_ratio, rel=EXACT.rtol, abs=0), (eg, es)
            assert rep.decrease_ratio_bounds == pytest.approx(ref.decrease_ratio_bounds, rel=EXACT.rtol, abs=0)
            assert rep.separation_ratio == pytest.approx(ref.separation_ratio, rel=EXACT.rtol, abs=0), (eg, es)
            if abs(eg + es) < 1000:  # -<G,S> and D(S) themselves representable
                assert rep.decrease == pytest.approx(math.ldexp(ref.decrease, eg + es), rel=EXACT.rtol, abs=0)
            if abs(es) < 1000:
                assert rep.diameter == pytest.approx(math.ldexp(ref.diameter, es), rel=EXACT.rtol, abs=0)


def test_evaluate_update_shift_and_zero_cases(rng):
    G = centered(rng, 6, 2)
    ten = hg.min_tension(G, tol=1e-10)
    const = np.ones((6, 2)) * 1e300  # a common shift: D = 0, no decrease
    rep = hg.evaluate_update(G, const, tension=ten)
    assert rep.decrease_ratio == 0.0 and rep.diameter == 0.0 and rep.decrease_ratio_bounds == (0.0, 0.0)
    S = hg.steepest_descent(G, eta=1.0, tension=ten)
    shifted = hg.evaluate_update(G, S + 1e200, tension=ten)  # entries beyond 1e200 * 1e300 overflow in <G,S>
    assert math.isfinite(shifted.decrease_ratio) and math.isfinite(shifted.decrease)
    Z = np.zeros((6, 2))
    rep0 = hg.evaluate_update(Z, S)
    assert rep0.decrease_ratio == 0.0 and rep0.tension == 0.0
