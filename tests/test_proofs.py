"""proofs/: one runner, one result type; every identity proved and checked, and the
pieces that decide (symbolic steps, comparisons, references) can say no."""

from __future__ import annotations

import os

import numpy as np
import pytest
import sympy as sp

from hilbertgeom import proofs
from hilbertgeom.proofs import _core
from hilbertgeom.proofs._core import Identity, Proof
from hilbertgeom.tolerances import tolerance

EXACT = tolerance("exact")
KERNEL = tolerance("kernel", d=200)  # column sums of the gradients below (V <= 200 rows)


def test_every_identity_is_proved_and_checked():
    seen = []
    rows = proofs.run(quick=True, on_result=seen.append)
    assert [r.identity for r in rows] == [f"I{k}" for k in range(1, 22)]
    assert seen == rows  # the callback saw each row as it finished, in order
    for r in rows:
        assert r.passed, (r.identity, r.detail)
        assert r.steps and not r.failed, r.identity  # a symbolic part that held
        assert r.trials > len(r.steps), r.identity  # and a numeric part
        assert r.statement and r.source and r.method and r.claim == r.statement
        assert 0.0 <= r.worst <= r.tol


def test_only_filters_and_rejects_unknown_ids():
    assert [r.identity for r in proofs.run(only=["i4", " I2 "], quick=True)] == ["I2", "I4"]
    with pytest.raises(ValueError, match="unknown identity"):
        proofs.run(only=["I99"])


def test_cited_theorems_are_named():
    cited = {k for k, v in proofs.IDENTITIES.items() if "cited theorem" in v.source}
    assert {"I5", "I7", "I10", "I14", "I16", "I17", "I20", "I21"} <= cited
    assert "Birkhoff" in proofs.IDENTITIES["I5"].source and "Jung" in proofs.IDENTITIES["I7"].source
    assert "Bieberbach" in proofs.IDENTITIES["I20"].source


def test_steps_reject_false_and_undecided_claims():
    x = sp.Symbol("x", positive=True)
    y = sp.Symbol("y", real=True)
    pf = Proof()
    pf.zero("(x + 1)^2 = x^2 + 1", (x + 1) ** 2 - (x**2 + 1))
    pf.zero("(x + 1)^2 = x^2 + 2x + 1", (x + 1) ** 2 - (x**2 + 2 * x + 1))
    pf.nonneg("x - 1 >= 0 (undecided for x > 0)", x - 1)
    pf.nonneg("(y - 1)^2 >= 0", (y - 1) ** 2)
    pf.positive("y^2 > 0 (false at y = 0)", y**2)
    pf.true("sympy's undecided", sp.Gt(y, 0))
    pf.eq("a number", 1.0, 1.0)
    r = pf.result("T0", "test", "test", "test")
    assert not r.passed
    assert r.failed == ("(x + 1)^2 = x^2 + 1", "x - 1 >= 0 (undecided for x > 0)", "y^2 > 0 (false at y = 0)",
                        "sympy's undecided")
    assert r.steps == ("(x + 1)^2 = x^2 + 2x + 1", "(y - 1)^2 >= 0")


def test_comparisons_report_the_one_closest_to_failing():
    pf = Proof()
    pf.true("a step", True)
    pf.eq("close", 1.0, 1.0 + 1e-15)
    pf.le("violated", 2.0, 1.0, scale=1.0, tol=0.5)  # violation 1.0 > 0.5
    pf.le("fine", 1.0, 2.0)
    r = pf.result("T0", "test", "test", "test")
    assert not r.passed and r.detail == "violated" and r.worst == 1.0 and r.tol == 0.5
    pf = Proof()
    pf.true("a step", True)
    pf.eq("nan", float("nan"), 1.0)
    assert not pf.result("T0", "t", "t", "t").passed
    pf = Proof()
    pf.true("only symbolic", True)
    assert not pf.result("T0", "t", "t", "t").passed  # no numeric part: not a check


def test_a_crashing_identity_is_a_failed_row(monkeypatch):
    def boom(pf, rng, quick, seed):
        raise RuntimeError("sympy exploded")

    monkeypatch.setitem(proofs.IDENTITIES, "I2", Identity("I2", "x", "y", "z", boom))
    (r,) = proofs.run(only=["I2"], quick=True)
    assert not r.passed and "sympy exploded" in r.detail and r.trials == 0


def test_brute_force_references_against_hand_values():
    X = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0], [3.0, 4.0]])
    assert _core.diameter(X) == 5.0 and _core.separation(X) == 0.0
    assert _core.farthest(X)[:2] == (5.0, 0)
    assert _core.diameter(X, ord=1) == 7.0 and _core.diameter(X, ord=np.inf) == 4.0
    assert _core.exact_variation([0.1, 0.3, -0.2]) == 0.5
    assert abs(_core.log_odds_change([1.0, 2.0], [2.0, 1.0]) - np.log(4.0)) <= EXACT.bound(np.log(4.0))
    assert _core.rank(np.outer([1.0, -1.0, 0.0], [1.0, 2.0])) == 1
    big = np.array([[1e200, 0.0], [-1e200, 0.0]])
    assert _core.row_norms(big).tolist() == [1e200, 1e200] and _core.diameter(big) == 2e200


def test_instances_include_the_adversarial_shapes():
    rng = np.random.default_rng(0)
    kinds = {k for k, _ in _core.clouds(rng, True)}
    assert {"duplicates", "near-duplicates", "near-tie", "zero-rows", "tiny-scale", "huge-scale",
            "head-gradient", "offset-f32"} <= kinds
    G = _core.head_gradient(rng, V=200, d=4)
    n = np.linalg.norm(G, axis=1)
    assert np.abs(G.sum(axis=0)).max() <= KERNEL.bound(np.abs(G).sum()) and _core.rank(G) <= 4
    assert np.sort(n)[-5:].min() > 20 * np.median(n)  # a few large rows over a tail of tiny ones
    for kind, G in _core.gradients(rng, True):
        assert np.abs(G.sum(axis=0)).max() <= KERNEL.bound(np.abs(G).sum()), kind


@pytest.mark.slow
def test_no_false_alarm_over_seeds():
    """``hilbertgeom verify --seed s --quick`` passes on correct code.  CI runs seeds
    0..9; ``HILBERTGEOM_VERIFY_SEEDS=100`` runs all of 0..99."""
    n = int(os.environ.get("HILBERTGEOM_VERIFY_SEEDS", "10"))
    bad = []
    for s in range(n):
        bad += [(s, r.identity, r.detail) for r in proofs.run(seed=s, quick=True) if not r.passed]
    assert not bad


def test_runner_docstring_example_runs():
    import doctest

    res = doctest.testmod(proofs, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
