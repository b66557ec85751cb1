"""Planted bugs: each row of the table breaks the library (or a proof's constant) in
one plausible way, by monkeypatching, and the runner behind ``hilbertgeom verify``
must report FAIL for the identity the bug falsifies.

A library function is replaced everywhere the core binds it (``hilbertgeom``,
its modules and sub-packages), so that internal callers see the bug too.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable

import numpy as np
import pytest

import hilbertgeom as hg
from hilbertgeom import proofs
from hilbertgeom.proofs import tension as tension_proofs


def _everywhere(monkeypatch, original, replacement) -> int:
    """Rebind every core name that refers to ``original``; returns how many."""
    n = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "hilbertgeom" or name.startswith("hilbertgeom.")):
            continue
        if name.startswith("hilbertgeom.proofs") or name.startswith("hilbertgeom.gpu"):
            continue
        for attr, value in list(vars(mod).items()):
            if value is original:
                monkeypatch.setattr(mod, attr, replacement)
                n += 1
    assert n > 0, f"{original!r} is bound nowhere in the core"
    return n


def _wrap(name: str, make: Callable[[Callable], Callable]):
    """A mutation that replaces ``hilbertgeom.<name>`` by ``make(original)``."""

    def apply(monkeypatch):
        orig = getattr(hg, name)
        _everywhere(monkeypatch, orig, make(orig))

    return apply


def _wrap_private(module: str, name: str, make):
    def apply(monkeypatch):
        import importlib

        orig = getattr(importlib.import_module(module), name)
        _everywhere(monkeypatch, orig, make(orig))

    return apply


def _proof_constant(name: str, value: Callable):
    def apply(monkeypatch):
        monkeypatch.setattr(tension_proofs, name, value)

    return apply


# ----------------------------------------------------------------------------- the bugs
def _h_one_pair(orig):
    """H from the log-odds of the first and last class only (a wrong index mapping)."""

    def h(p, q, /, *, axis=-1):
        a = np.log(np.asarray(p, float)) - np.log(np.asarray(q, float))
        a = np.moveaxis(a, axis, -1)
        out = np.abs(a[..., 0] - a[..., -1])
        return float(out) if out.ndim == 0 else out

    return h


def _h_max_abs(orig):
    """H as the largest |log p_c - log q_c| of the normalised vectors (the I3 bound taken as H)."""

    def h(p, q, /, *, axis=-1):
        p, q = np.asarray(p, float), np.asarray(q, float)
        a = np.log(p / p.sum(axis=axis, keepdims=True)) - np.log(q / q.sum(axis=axis, keepdims=True))
        out = np.abs(a).max(axis=axis)
        return float(out) if out.ndim == 0 else out

    return h


def _softmax_h_no_min(orig):
    def h(z, w, /, *, axis=-1):
        out = np.abs(np.asarray(z, float) - np.asarray(w, float)).max(axis=axis)
        return float(out) if out.ndim == 0 else out

    return h


def _tv_bound_half(orig):
    return lambda h, /: orig(h) if np.ndim(h) else math.tanh(float(h) / 2.0)


def _tv_pair_quarter(orig):
    return lambda h, /: orig(h / 2.0)  # t = e^(h/4): the witness sits at distance h/2


def _birkhoff_looser(orig):
    def b(A, /):
        c = orig(A)
        return dataclasses.replace(c, ratio=1.0 if math.isinf(c.diameter) else math.tanh(c.diameter / 2.0))

    return b


def _head_norm_wrong_dual(orig):
    def hn(S, /, *, hidden_norm=2, radius=1.0):
        if hidden_norm in ("inf", np.inf, math.inf):
            return float(radius) * hg.row_diameter(S, norm="inf")  # should be the l_1 diameter
        return orig(S, hidden_norm=hidden_norm, radius=radius)

    return hn


def _jung_sqrt2(orig):
    return lambda k, /: math.sqrt(2.0) * orig(k)


def _doubled(orig):
    return lambda *a, **k: 2.0 * orig(*a, **k)


def _backward_change_bound_half_angle(orig):
    def bound(U, S, h, c, /):
        U, S, h = (np.asarray(x, float) for x in (U, S, h))

        def sm(z):
            e = np.exp(z - z.max())
            return e / e.sum()

        p, q = sm(U @ h), sm((U + S) @ h)
        t = math.tanh(float(np.ptp(S @ h)) / 2.0)  # tanh(delta/2) for tanh(delta/4)
        dS = hg.row_diameter(S)
        return min(dS * (1 - q[c]) + hg.row_diameter(U) * t, dS * (1 - p[c]) + hg.row_diameter(U + S) * t)

    return bound


def _half_step(orig):
    return lambda *a, **k: 0.5 * orig(*a, **k)


def _reversed_pairs(orig):
    def mt(*a, **k):
        r = orig(*a, **k)
        return dataclasses.replace(r, flow=dataclasses.replace(r.flow, pairs=r.flow.pairs[:, ::-1].copy()))

    return mt


def _value_off(orig):
    def mt(*a, **k):
        r = orig(*a, **k)
        return dataclasses.replace(r, value=r.value * (1 + 1e-4))

    return mt


def _uncentred_potential(orig):
    def mt(*a, **k):
        r = orig(*a, **k)
        return dataclasses.replace(r, potential=r.potential + 0.25 * r.potential[:1])

    return mt


def _prn_no_centring(orig):
    def prn(G, /, *, eta=1.0, eps=0.0, center=False, return_decrease=False):
        X = np.asarray(G, float)
        N = hg.rownorm(X - X.mean(axis=0))
        S = -(eta / 2.0) * N  # P dropped from -(eta/2) P RN(P G)
        if return_decrease:
            return S, eta / 2.0 * float(np.linalg.norm(X - X.mean(axis=0), axis=1).sum())
        return S

    return prn


def _bounds_lower_too_big(orig):
    def tb(G, /, **k):
        b = orig(G, **k)
        total = float(np.linalg.norm(np.asarray(G, float), axis=1).sum())
        return dataclasses.replace(b, lower=max(b.lower, total * 0.75))

    return tb


def _linf_no_centring(orig):
    def lsd(G, /, *, eta=1.0, center=False):
        return -(eta / 2.0) * np.sign(np.asarray(G, float))

    return lsd


def _polar_top_only(orig):
    def pu(G, /, *, eta=1.0):
        U, _s, Vt = np.linalg.svd(np.asarray(G, float), full_matrices=False)
        return -eta * np.outer(U[:, 0], Vt[0])

    return pu


def _simplex_edge_sqrt2(orig):
    return lambda n, d, /: math.sqrt(2.0) * orig(n, d)


def _limit_d_plus_2_possible(orig):
    def lim(n, d, /):
        r = orig(n, d)
        return dataclasses.replace(r, possible=True, upper=1.0) if n == d + 2 else r

    return lim


def _i20_no_sqrt(orig):
    def lim(n, d, /):
        r = orig(n, d)
        return dataclasses.replace(r, upper=r.upper**2) if r.source.startswith("Jung") else r

    return lim


def _shor_looser(orig):
    def sdp(G, delta, eta):
        v, S = orig(G, delta, eta)
        return 2.0 * v, S

    return sdp


MUTATIONS = [
    # (id, identity that must FAIL, apply)
    ("H from one fixed pair of classes", "I1", _wrap("hilbert_distance", _h_one_pair)),
    ("softmax distance as max |z - z'| (no min)", "I2", _wrap("softmax_hilbert_distance", _softmax_h_no_min)),
    ("H as max_c |log p_c - log q_c|", "I3", _wrap("hilbert_distance", _h_max_abs)),
    ("tv_bound with tanh(H/2)", "I4", _wrap("tv_bound", _tv_bound_half)),
    ("tv_extremal_pair at half the distance", "I4", _wrap("tv_extremal_pair", _tv_pair_quarter)),
    ("Birkhoff ratio tanh(Delta/2)", "I5", _wrap("birkhoff_contraction", _birkhoff_looser)),
    ("head_norm: l_inf hidden norm with the l_inf diameter", "I6", _wrap("head_norm", _head_norm_wrong_dual)),
    ("head_norm doubled", "I6", _wrap("head_norm", _doubled)),
    ("Jung constant too large by sqrt 2", "I7", _wrap("jung_radius", _jung_sqrt2)),
    ("cross_entropy_backward_bound doubled", "I8", _wrap("cross_entropy_backward_bound", _doubled)),
    ("backward_bound without the 1/2", "I8", _wrap("backward_bound", _doubled)),
    ("backward_change_bound with tanh(delta/2)", "I9",
     _wrap("backward_change_bound", _backward_change_bound_half_angle)),
    ("steepest_descent half step", "I10", _wrap("steepest_descent", _half_step)),
    ("balanced-flow cost doubled", "I11", _wrap_private("hilbertgeom.tension.bounds", "_balanced_flow_cost", _doubled)),
    ("min_tension flow pairs reversed (index mapping)", "I12", _wrap("min_tension", _reversed_pairs)),
    ("I13 false variant (V-2)/V", "I13", _proof_constant("_phi_bound", lambda V: (V - 2) / V)),
    ("min_tension potential not centred", "I13", _wrap("min_tension", _uncentred_potential)),
    ("min_tension value off by 1e-4", "I14", _wrap("min_tension", _value_off)),
    ("Jung constant too large by sqrt 2 (simplex closed form)", "I14", _wrap("jung_radius", _jung_sqrt2)),
    ("projected_rownorm without centring", "I15", _wrap("projected_rownorm", _prn_no_centring)),
    ("projected_rownorm half step", "I16", _wrap("projected_rownorm", _half_step)),
    ("I16 constant 1/sqrt(2) for every k", "I16", _proof_constant("_rownorm_ratio", lambda k: 2**-0.5)),
    ("tension_bounds lower too big", "I17", _wrap("tension_bounds", _bounds_lower_too_big)),
    ("Jung constant too large by sqrt 2 (tension bounds)", "I17", _wrap("jung_radius", _jung_sqrt2)),
    ("linf_steepest_descent without centring", "I18", _wrap("linf_steepest_descent", _linf_no_centring)),
    ("polar_update keeps the top singular pair only", "I18", _wrap("polar_update", _polar_top_only)),
    ("regular_simplex with edge sqrt 2", "I19", _wrap("regular_simplex", _simplex_edge_sqrt2)),
    ("equidistant_limit: d+2 points possible", "I19", _wrap("equidistant_limit", _limit_d_plus_2_possible)),
    ("I20 bound without the square root", "I20", _wrap("equidistant_limit", _i20_no_sqrt)),
    ("Shor SDP value doubled", "I21", _wrap_private("hilbertgeom.equalize", "_shor_sdp", _shor_looser)),
]


def test_every_identity_has_a_planted_bug():
    assert {ident for _, ident, _ in MUTATIONS} == set(proofs.IDENTITIES)


@pytest.mark.parametrize("name,identity,apply", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_planted_bug_fails_its_identity(monkeypatch, name, identity, apply):
    apply(monkeypatch)
    (row,) = proofs.run(only=[identity], quick=True, seed=0)
    assert not row.passed, f"{name}: {identity} still passes ({row.detail})"
    assert row.worst > row.tol or row.failed or row.trials == 0


def test_the_unmutated_library_passes_the_same_rows():
    """The control: without a plant, the same quick rows pass (so a FAIL above is the plant's)."""
    rows = proofs.run(only=sorted({ident for _, ident, _ in MUTATIONS}), quick=True, seed=0)
    assert all(r.passed for r in rows), [(r.identity, r.detail) for r in rows if not r.passed]


def test_hilbertgeom_verify_exits_nonzero_on_a_planted_bug(monkeypatch, capsys):
    from hilbertgeom import cli

    _wrap("cross_entropy_backward_bound", _doubled)(monkeypatch)
    assert cli.main(["verify", "--quick", "--only", "I8"]) == 1
    assert "FAIL I8" in capsys.readouterr().out
