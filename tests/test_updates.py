"""Other geometries (I18), evaluate_update and the update bench."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hilbertgeom as hg
from hilbertgeom import cli


def centered(rng, V, d):
    G = rng.standard_normal((V, d))
    return G - G.mean(axis=0)


def test_linf_sign_descent_is_optimal_per_column(rng):
    """I18: under the row-l_inf diameter the problem separates by columns, each the
    d = 1 case with value ||g_k||_1 / 2 (closed form), attained by -(eta/2) P sign(G)."""
    G = centered(rng, 9, 4)
    eta = 0.8
    S = hg.linf_steepest_descent(G, eta=eta)
    assert hg.row_diameter(S, norm=np.inf) <= eta * (1 + 1e-15)
    assert -np.sum(G * S) == pytest.approx(eta / 2 * np.abs(G).sum(), rel=1e-14)
    for k in range(4):  # each column: the d = 1 closed form of min_tension
        assert hg.min_tension(G[:, k : k + 1], tol=1e-11).value == pytest.approx(np.abs(G[:, k]).sum() / 2, rel=1e-9)


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
    for rule, norm in rules:
        S = rule(G)
        best = -np.sum(G * S)
        assert norm(S) <= 1 + 1e-12
        for _ in range(20):
            R = rng.standard_normal((V, d))
            R /= norm(R)
            assert -np.sum(G * R) <= best + 1e-12 * (1 + abs(best))


def test_polar_update_is_the_orthogonal_factor(rng):
    G = centered(rng, 6, 3)
    S = -hg.polar_update(G)
    np.testing.assert_allclose(S.T @ S, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(-np.sum(G * -S), np.linalg.svd(G, compute_uv=False).sum(), rtol=1e-12)


def test_evaluate_update_exact_and_rownorm(rng):
    G = centered(rng, 20, 3)
    ten = hg.min_tension(G, tol=1e-10)
    ex = hg.evaluate_update(G, hg.steepest_descent(G, eta=2.0, tol=1e-10), tension=ten)
    assert ex.decrease_ratio == pytest.approx(1.0, abs=1e-9)
    lo, hi = ex.decrease_ratio_bounds
    assert lo <= ex.decrease_ratio <= hi + 1e-15
    rn = hg.evaluate_update(G, hg.projected_rownorm(G), tension=ten)
    k = np.linalg.matrix_rank(G)
    # at equal step eta, RowNorm achieves >= sqrt((k+1)/(2k)) of the optimum (I16); per unit diameter even more
    assert rn.decrease_ratio >= math.sqrt((k + 1) / (2 * k)) - 1e-9
    assert rn.column_sum <= 1e-15
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
        assert np.abs(G.sum(axis=0)).max() <= 1e-13 * (1 + np.abs(G).sum()), name
        np.testing.assert_array_equal(G, b[name])


def test_bench_updates_with_a_user_rule():
    rows = hg.bench_updates(V=12, d=3, rules={"half RowNorm": lambda G: 0.5 * hg.projected_rownorm(G),
                                              "exact": lambda G: hg.steepest_descent(G, eta=1.0)})
    assert len(rows) == 2 * 5
    for case, rule, rep in rows:
        if rule == "exact":
            assert rep.decrease_ratio == pytest.approx(1.0, abs=1e-8), case
        else:
            assert rep.decrease_ratio <= 1 + 1e-8
    with pytest.raises(TypeError, match="is not callable"):
        hg.bench_updates(V=4, d=2, rules={"bad": 3})


def test_bench_updates_cli(capsys):
    assert cli.main(["bench-updates", "--V", "10", "--d", "3"]) == 0
    out = capsys.readouterr().out
    assert "simplex worst case" in out and "polar (Muon)" in out and "exact (D steepest)" in out
