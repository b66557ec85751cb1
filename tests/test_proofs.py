"""proofs/: every derivation checks, and the checker can say no."""

from __future__ import annotations

import sympy as sp

from hilbertgeom import proofs
from hilbertgeom.proofs import metric, tension
from hilbertgeom.proofs._base import Steps


def test_every_proof_passes():
    results = proofs.run_proofs(quick=True)
    assert {r.identity for r in results} == set(proofs.PROOFS)
    for r in results:
        assert r.verdict, (r.identity, r.failed)
        assert r.steps and not r.failed
        assert r.claim and r.source and r.method in ("symbolic", "symbolic+numeric")


def test_only_filters():
    assert [r.identity for r in proofs.run_proofs(only=["i4"], quick=True)] == ["I4"]


def test_wrong_constant_in_the_tv_bound_fails():
    r = metric.check_i4(quick=True, constant=8)
    assert not r.verdict
    assert any("tanh(d/8)" in f for f in r.failed)
    assert r.worst > r.tol  # the numeric part says no as well


def test_wrong_rownorm_ratio_fails():
    r = tension.check_i16(half=sp.Rational(1, 3))
    assert not r.verdict and r.failed


def test_steps_reject_false_algebra():
    x = sp.Symbol("x", positive=True)
    st = Steps()
    st.zero("(x + 1)^2 = x^2 + 1", (x + 1) ** 2 - (x**2 + 1))
    st.zero("(x + 1)^2 = x^2 + 2x + 1", (x + 1) ** 2 - (x**2 + 2 * x + 1))
    r = st.result("T0", "test", "test")
    assert not r.verdict and r.failed == ("(x + 1)^2 = x^2 + 1",) and len(r.steps) == 1


def test_a_crashing_proof_is_a_failure(monkeypatch):
    def boom(**kw):
        raise RuntimeError("sympy exploded")

    monkeypatch.setitem(proofs.PROOFS, "I2", boom)
    r = [x for x in proofs.run_proofs(quick=True) if x.identity == "I2"][0]
    assert not r.verdict and "sympy exploded" in r.failed[0]
