"""hilbertgeom.testing: assert_steepest, assert_decrease_ratio, cases, strategies, plugin.

The assertion is pinned from both sides by references it did not compute: a
cvxpy/CLARABEL solve of each primal problem (its optimal step passes, the
same step shortened by 1e-4 fails), closed forms (I14 rank one, I16 simplex),
and a table of plausible optimizer bugs, each of which must fail with the
message that names it.
"""

from __future__ import annotations

import doctest
import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import U64, default_of, gamma, kernel_rtol
from hypothesis import given, settings
from hypothesis import strategies as st

import hilbertgeom as hg
from hilbertgeom import testing as ht
from hilbertgeom.testing import (
    assert_decrease_ratio,
    assert_steepest,
    gradient_cases,
    steepest_step,
)
from hilbertgeom.testing.strategies import KINDS, head_gradients, zero_sum_gradients
from hilbertgeom.tolerances import tolerance

ROOT = Path(__file__).resolve().parents[1]
NORMS = sorted(ht.NORMS)
SEMINORMS = ("covering_radius", "diameter", "diameter_inf")
SOLVER = tolerance("solver")
U32 = 2.0**-24
CVXPY_GAP = 1e-10  # the gap and feasibility asked of CLARABEL in cvxpy_steepest (an input)
TENSION_TOL = 1e-10  # the certified gap of the shared solves (tension_of; an input)
PRINTED = 10  # assert_steepest prints ratios with 10 significant digits (".10g")

try:
    import torch
except ImportError:  # torch is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (optional: pip install torch)")


def _cupy_with_cuda():
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except (ImportError, RuntimeError):  # no driver, no device
        return None


# --------------------------------------------------------------------------- shared gradients and solves
_SOLVES: dict = {}


def tension_of(key, G):
    """One certified solve per gradient (min_tension takes seconds)."""
    if key not in _SOLVES:
        _SOLVES[key] = hg.min_tension(G, tol=TENSION_TOL)
    return _SOLVES[key]


@pytest.fixture(scope="module")
def cases():
    return {c.name: c.G for c in gradient_cases(20, 4, seed=3, real=False)}


def fails(S, G, pattern, **kw):
    """Assert that assert_steepest raises AssertionError whose message matches ``pattern``; return it."""
    with pytest.raises(AssertionError) as info:
        assert_steepest(S, G, **kw)
    msg = str(info.value)
    assert re.search(pattern, msg, flags=re.DOTALL), msg
    return msg


# --------------------------------------------------------------------------- brute force (cvxpy)
def cvxpy_steepest(G, norm, eta):
    """The primal problem min <G, S> s.t. N(S) <= eta, solved by CLARABEL: (S, value)."""
    import cvxpy as cp

    V, d = G.shape
    S = cp.Variable((V, d))
    cons = []
    if norm in SEMINORMS:
        cons.append(cp.sum(S, axis=0) == 0)
    if norm == "max_row":
        cons.append(cp.norm(S, 2, axis=1) <= eta)
    elif norm == "max_entry":
        cons.append(cp.abs(S) <= eta)
    elif norm == "spectral":
        cons.append(cp.sigma_max(S) <= eta)
    elif norm == "diameter_inf":
        cons.append(cp.max(S, axis=0) - cp.min(S, axis=0) <= eta)
    elif norm == "covering_radius":
        c = cp.Variable(d)
        cons.append(cp.norm(S - np.ones((V, 1)) @ cp.reshape(c, (1, d), order="C"), 2, axis=1) <= eta / 2)
    elif norm == "diameter":
        iu, ju = np.triu_indices(V, 1)
        cons.append(cp.norm(S[iu] - S[ju], 2, axis=1) <= eta)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(G, S))), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=CVXPY_GAP, tol_gap_rel=CVXPY_GAP, tol_feas=CVXPY_GAP)
    assert prob.status == "optimal", prob.status
    return np.asarray(S.value), prob.value


@pytest.mark.parametrize("norm", NORMS)
def test_threshold_is_the_brute_force_optimum(norm, rng):
    """A generic conic solve of the primal problem (no closed form, no min_tension):
    its optimal step passes, and the same step shortened by 1e-4 fails on its
    decrease: the assertion's optimum is the true one to within 1e-4."""
    G = rng.standard_normal((7, 3))
    G -= G.mean(axis=0)
    eta = 0.7
    S, value = cvxpy_steepest(G, norm, eta)
    assert_steepest(S, G, norm=norm, eta=eta, rtol=SOLVER.rtol)  # a conic solve: the solver policy
    fails(S * (1 - 1e-4), G, r"decrease falls short.*ratio (in \[)?0\.9999", norm=norm, eta=eta, rtol=SOLVER.rtol)
    # and the library's own step agrees with the brute force value: CLARABEL's gap, min_tension's
    # (for the diameter), and the V d-term sum
    rel = CVXPY_GAP + default_of(hg.min_tension, "tol") + kernel_rtol(G.size)
    assert -np.sum(G * steepest_step(G, norm=norm, eta=eta)) == pytest.approx(-value, rel=rel, abs=0)


# --------------------------------------------------------------------------- correct steps pass
@pytest.mark.parametrize("case", ["gaussian", "low_rank", "cross_entropy", "cross_entropy_sharp", "rank_one",
                                  "simplex_worst_case"])
@pytest.mark.parametrize("norm", NORMS)
def test_exact_steps_pass(cases, case, norm):
    G = cases[case]
    tension = tension_of(case, G) if norm == "diameter" else None
    for eta in (1.0, 0.03):
        S = hg.steepest_descent(G, eta=eta, tension=tension) if norm == "diameter" else steepest_step(
            G, norm=norm, eta=eta)
        assert_steepest(S, G, norm=norm, eta=eta, tension=tension)


def independent_step(G, norm, eta):
    """The steepest steps written out from their definitions (I15, I18), not from the library."""
    if norm == "max_row":
        n = np.sqrt((G * G).sum(axis=1, keepdims=True))
        return -eta * np.divide(G, n, out=np.zeros_like(G), where=n > 0)
    if norm == "max_entry":
        return -eta * np.sign(G)
    if norm == "diameter_inf":
        Sg = np.sign(G)
        return -(eta / 2) * (Sg - Sg.mean(axis=0))
    if norm == "covering_radius":
        N = independent_step(G, "max_row", 1.0)
        return (eta / 2) * (N - N.mean(axis=0))
    U, _, Vt = np.linalg.svd(G, full_matrices=False)
    return -eta * U @ Vt


@pytest.mark.parametrize("norm", ["max_row", "max_entry", "diameter_inf", "covering_radius", "spectral"])
def test_float32_steps_pass_with_the_default_tolerance(cases, norm):
    """A step computed in float32 from a float32 gradient passes at the float32 default rtol."""
    for name in ("gaussian", "cross_entropy"):
        G32 = cases[name].astype(np.float32)
        G32 = G32 - G32.mean(axis=0)
        S = independent_step(G32, norm, np.float32(0.5)).astype(np.float32)
        assert S.dtype == np.float32
        assert_steepest(S, G32, norm=norm, eta=0.5)


# --------------------------------------------------------------------------- sharpness of the tolerance
@pytest.mark.parametrize("norm", ["max_row", "max_entry", "diameter_inf", "covering_radius", "spectral"])
def test_tolerance_is_sharp(cases, norm):
    """rtol means what it says: a step short (or long) by rtol/2 passes, by 2 rtol fails."""
    G = cases["gaussian"]
    rtol = 1e-5
    S = independent_step(G, norm, 1.0)
    assert_steepest(S * (1 - rtol / 2), G, norm=norm, rtol=rtol)
    assert_steepest(S * (1 + rtol / 2), G, norm=norm, rtol=rtol)
    fails(S * (1 - 2 * rtol), G, r"falls short", norm=norm, rtol=rtol)
    fails(S * (1 + 2 * rtol), G, r"exceeds eta", norm=norm, rtol=rtol)


def test_diameter_uses_the_upper_end_of_the_bracket(cases, monkeypatch):
    """With a loose certificate T in [0.9 T*, T*], a step of decrease 0.95 eta T* must fail
    (it is 5% short) and the exact step must pass: only the upper end decides."""
    import dataclasses

    from hilbertgeom.testing import _steepest

    G = cases["gaussian"]
    exact = tension_of("gaussian", G)
    loose = dataclasses.replace(exact, value=0.9 * exact.flow.cost, gap=0.1 * exact.flow.cost)
    monkeypatch.setattr(_steepest, "min_tension", lambda *a, **k: loose)
    S = hg.steepest_descent(G, eta=1.0, tension=exact)
    assert_steepest(S, G, norm="diameter")
    fails(0.95 * S + 0.0, G, r"falls short", norm="diameter")
    fails(0.95 * S + 0.0, G, r"S = 0\.95 x a steepest step", norm="diameter")


def test_diameter_solves_to_a_quarter_of_rtol(cases, monkeypatch):
    from hilbertgeom.testing import _steepest

    seen = {}

    def spy(G, **kw):
        seen.update(kw)
        return tension_of("gaussian", cases["gaussian"])

    monkeypatch.setattr(_steepest, "min_tension", spy)
    S = hg.steepest_descent(cases["gaussian"], eta=1.0, tension=tension_of("gaussian", cases["gaussian"]))
    rtol = 4e-6
    assert_steepest(S, cases["gaussian"], norm="diameter", rtol=rtol)
    assert seen["tol"] == rtol / 4


# --------------------------------------------------------------------------- planted optimizer bugs
def rownorm_eps(G, eps):
    n = np.linalg.norm(G, axis=1, keepdims=True)
    return -G / (n + eps)


BUGS = [
    # (bug, norm, step, pattern the message must contain)
    ("half step", "max_row", lambda G: 0.5 * hg.rownorm_update(G), r"S = 0\.5 x a steepest step"),
    ("half step", "max_entry", lambda G: 0.5 * hg.sign_update(G), r"S = 0\.5 x a steepest step"),
    ("half step", "spectral", lambda G: 0.5 * hg.polar_update(G), r"S = 0\.5 x a steepest step"),
    ("half step", "diameter_inf", lambda G: 0.5 * hg.linf_steepest_descent(G), r"S = 0\.5 x a steepest step"),
    ("half step", "covering_radius", lambda G: hg.projected_rownorm(G, eta=0.5), r"S = 0\.5 x a steepest step"),
    ("half step", "diameter", lambda G: 0.5 * hg.steepest_descent(G, eta=1.0, tension=tension_of("cross_entropy", G)),
     r"S = 0\.5 x a steepest step"),
    ("forgotten centring", "diameter",
     lambda G: hg.steepest_descent(G, eta=1.0, tension=tension_of("cross_entropy", G)) + np.arange(G.shape[1]),
     r"it is not centred\.(.|\n)*only the centring is off"),
    ("double step", "max_row", lambda G: 2 * hg.rownorm_update(G),
     r"max_i \|\|s_i\|\|_2 exceeds eta(.|\n)*S = 2 x a steepest step(.|\n)*too long: 20 of 20 rows"),
    ("eta instead of eta/2", "covering_radius", lambda G: hg.projected_rownorm(G, eta=2.0),
     r"S = 2 x a steepest step.*bounds rad\(S\) by eta/2"),
    ("eta instead of eta/2", "diameter_inf", lambda G: 2 * hg.linf_steepest_descent(G),
     r"S = 2 x a steepest step.*-\(eta/2\) P sign\(G\)"),
    ("ascent", "max_entry", lambda G: -hg.sign_update(G), r"S = -1 x a steepest step: it points uphill"),
    ("forgotten centring", "covering_radius", lambda G: -0.5 * hg.rownorm(G),
     (r"it is not centred\.(.|\n)*centred:  no(.|\n)*subtract S\.mean\(axis=0\)   FAILED(.|\n)*"
      r"only the centring is off")),
    ("forgotten centring", "diameter_inf", lambda G: -0.5 * np.sign(G), r"it is not centred\."),
    ("RowNorm with eps", "max_row", lambda G: rownorm_eps(G, 1e-3),
     r"falls short(.|\n)*short rows: 20 of 20 rows(.|\n)*worst rows"),
    ("Sign for the diameter", "diameter", lambda G: hg.sign_update(G) - hg.sign_update(G).mean(axis=0),
     r"D\(S\) exceeds eta(.|\n)*not a multiple of a steepest step: rescaled to D\(S\) = eta"),
    ("RowNorm for the max entry", "max_entry", lambda G: hg.rownorm_update(G),
     r"falls short(.|\n)*short entries"),
    ("polar for the rows", "max_row", lambda G: hg.polar_update(G), r"falls short(.|\n)*short rows"),
]


@pytest.mark.parametrize("bug, norm, make, pattern", BUGS, ids=[f"{b[0]} ({b[1]})" for b in BUGS])
def test_planted_bugs_fail_with_their_message(cases, bug, norm, make, pattern):
    G = cases["cross_entropy"]
    tension = tension_of("cross_entropy", G) if norm == "diameter" else None
    fails(make(G), G, pattern, norm=norm, tension=tension)


def test_rownorm_eps_points_at_the_tiny_rows():
    """The epsilon of a RowNorm only matters on tiny rows -- which real head gradients
    have by the ten thousand: the message lists them as the worst rows."""
    rng = np.random.default_rng(5)
    G = np.vstack([rng.standard_normal((4, 3)), 1e-9 * rng.standard_normal((16, 3))])
    G -= G.mean(axis=0)
    tiny = set(range(4, 20))
    msg = fails(rownorm_eps(G, 1e-8), G, r"falls short", norm="max_row")
    worst = [int(i) for i in re.findall(r"    row (\d+):", msg)]
    assert worst and set(worst) <= tiny
    assert_steepest(rownorm_eps(G, 0.0), G, norm="max_row")


def test_simplex_witness_reports_the_I16_ratio():
    """I16 is sharp on the simplex: projected RowNorm at step eta (feasible, D <= 2 rad <= eta)
    reaches exactly sqrt((k+1)/(2k)) of eta T(G) (T = J_k sum ||g_i||, I14); there it is the
    steepest direction, only short, and the message says by how much."""
    V, d = 9, 3
    k = 3
    G = ht._cases.simplex_worst_case(V, d)
    ten = tension_of("simplex 9x3", G)
    S = hg.projected_rownorm(G, eta=1.0)
    msg = fails(S, G, r"falls short", norm="diameter", tension=ten)
    lo, hi = (float(x) for x in re.search(r"ratio in \[([0-9.e-]+), ([0-9.e-]+)\]", msg).groups())
    want = math.sqrt((k + 1) / (2 * k))
    printed = 0.5 * 10.0 ** (1 - PRINTED)  # relative rounding of a printed bound
    assert lo <= want * (1 + printed) and want <= hi * (1 + printed)
    # the bracket is the certified one of tension_of's solve (relative gap <= its tol), as printed
    assert hi - lo <= (TENSION_TOL + 2 * printed) * hi
    assert re.search(r"S = 0\.81649\d* x a steepest step", msg), msg


def test_rank_one_closed_form_bounds_the_diameter_threshold():
    """I14: T(g h^T) = ||g||_1 ||h|| / 2, attained by phi_i = sign(g_i) h / (2 ||h||) centred.
    That step passes; shortened by 1e-4 it fails."""
    rng = np.random.default_rng(11)
    g = rng.standard_normal(9)
    g -= g.mean()
    h = rng.standard_normal(3)
    G = np.outer(g, h)
    s = np.sign(g)
    Phi = np.outer(s - s.mean(), h / (2 * np.linalg.norm(h)))
    Phi /= hg.row_diameter(Phi)  # D = 1 (it is 1 up to rounding)
    # -<G, -Phi> = ||h|| / 2 (sum |g_i| - mean(s) sum g_i): two V d-term sums (gamma each), g's sum
    # (centred: gamma_V), and Phi's entries (outer product, / (2 ||h||), / D: a few roundings)
    rel = 2 * gamma(G.size) + gamma(9) + 6 * U64
    assert -np.sum(G * -Phi) == pytest.approx(np.abs(g).sum() * np.linalg.norm(h) / 2, rel=rel, abs=0)
    ten = tension_of("rank one 9x3", G)
    assert_steepest(-Phi, G, norm="diameter", tension=ten)
    fails(-(1 - 1e-4) * Phi, G, r"S = 0\.9999 x a steepest step", norm="diameter", tension=ten)


# --------------------------------------------------------------------------- assert_decrease_ratio
def test_decrease_ratio_closed_form_witness():
    """d = 1 (I14): T(g) = ||g||_1 / 2.  For g = (3, -1, -2) the gradient step S = -G has
    decrease 14, diameter 5 and T = 3: ratio 14/15 exactly, whatever the step size."""
    G = np.array([[3.0], [-1.0], [-2.0]])
    tol = 1e-11
    ten = hg.min_tension(G, tol=tol)
    want = 14 / 15
    # the ratio is known to the certified gap of the solve and the rounding of its sums
    sharp = tol + kernel_rtol(G.size)
    for S in (-G, -0.01 * G):
        assert_decrease_ratio(S, G, at_least=want * (1 - sharp), tension=ten)
        with pytest.raises(AssertionError, match=r"ratio: .* in \[0\.933333") as info:
            assert_decrease_ratio(S, G, at_least=want * (1 + sharp), tension=ten)
        assert "below at_least" in str(info.value) and "farthest rows 0 and 2" in str(info.value)
    S = hg.steepest_descent(G, eta=2.0, tension=ten)
    assert_decrease_ratio(S, G, at_least=1 - sharp, tension=ten)


def test_decrease_ratio_uses_the_lower_end(cases, monkeypatch):
    import dataclasses

    from hilbertgeom.testing import _steepest

    G = cases["gaussian"]
    exact = tension_of("gaussian", G)
    loose = dataclasses.replace(exact, value=0.5 * exact.flow.cost)
    monkeypatch.setattr(_steepest, "min_tension", lambda *a, **k: loose)
    S = hg.projected_rownorm(G)
    r = -np.sum(G * S) / (hg.row_diameter(S) * exact.flow.cost)
    k = kernel_rtol(G.size)  # the library's ratio: the same V d-term sum, in its own order
    assert_decrease_ratio(S, G, at_least=r * (1 - k))
    with pytest.raises(AssertionError, match="certificate cannot place it"):
        assert_decrease_ratio(S, G, at_least=r * (1 + k))  # inside the loose bracket [r, 2 r]


def test_decrease_ratio_of_a_common_shift_is_zero(cases):
    G = cases["gaussian"]
    shift = np.ones_like(G) * np.arange(G.shape[1])
    assert_decrease_ratio(shift, G, at_least=0.0, tension=tension_of("gaussian", G))
    with pytest.raises(AssertionError, match="common shift"):
        assert_decrease_ratio(shift, G, at_least=0.1, tension=tension_of("gaussian", G))


# --------------------------------------------------------------------------- bad input
BAD = [
    (dict(S=np.zeros((3, 2)), G=np.zeros((4, 2)), norm="max_row"), ValueError, r"S must have the shape of G"),
    (dict(S=np.full((4, 2), np.nan), G=np.zeros((4, 2)), norm="max_row"), ValueError, r"S must be finite"),
    (dict(S=np.zeros((4, 2)), G=np.array([[np.inf, 0]] * 4), norm="max_row"), ValueError, r"G must be finite"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="l2"), ValueError, r"norm must be one of"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm=2), ValueError, r"norm must be one of"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", eta=0.0), ValueError, r"eta must be > 0"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", eta=-1), ValueError, r"eta must be > 0"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", eta="1"), TypeError, r"eta must be a real"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", rtol=1.0), ValueError,  # not a tolerance: bad input
     r"rtol must be < 1"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", rtol=-1e-3), ValueError,  # not a tolerance: bad input
     r"rtol must be >= 0"),
    (dict(S=np.zeros((4,)), G=np.zeros((4,)), norm="max_row"), ValueError, r"S must be 2-D"),
    (dict(S=np.zeros((4, 2), complex), G=np.zeros((4, 2)), norm="max_row"), TypeError, r"S must be real"),
    (dict(S=np.zeros((4, 2)), G=np.ones((4, 2)), norm="covering_radius"), ValueError,
     r"G must have zero column sums for norm='covering_radius'"),
    (dict(S=np.zeros((4, 2)), G=np.zeros((4, 2)), norm="max_row", tension=3), TypeError, r"tension must be"),
]


@pytest.mark.parametrize("kw, exc, pattern", BAD)
def test_bad_input_names_the_argument(kw, exc, pattern):
    S, G = kw.pop("S"), kw.pop("G")
    with pytest.raises(exc, match=pattern) as info:
        assert_steepest(S, G, **kw)
    assert not isinstance(info.value, AssertionError)


def test_bad_input_of_the_ratio_and_the_reference():
    G = np.array([[1.0, 0.0], [-1.0, 0.0]])
    with pytest.raises(ValueError, match="at_least must be <= 1"):
        assert_decrease_ratio(G, G, at_least=1.5)
    with pytest.raises(ValueError, match="G must have zero column sums"):
        assert_decrease_ratio(G, G + 1.0, at_least=0.5)
    with pytest.raises(ValueError, match="norm must be one of"):
        steepest_step(G, norm="frobenius")
    with pytest.raises(ValueError, match="eta must be > 0"):
        steepest_step(G, norm="max_row", eta=0)


def test_non_zero_sum_gradient_is_fine_for_the_norms_that_do_not_centre():
    G = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])  # column sums 4.5, 1.5
    for norm in ("max_row", "max_entry", "spectral"):
        assert_steepest(steepest_step(G, norm=norm), G, norm=norm)


def test_zero_gradient():
    G = np.zeros((5, 2))
    for norm in NORMS:
        assert_steepest(np.zeros((5, 2)), G, norm=norm)  # nothing to gain: any feasible step is steepest
    fails(np.full((5, 2), 3.0), G, r"exceeds eta", norm="max_entry")


def test_default_rtol_policy():
    assert ht.default_rtol("max_row", dtype="float64", shape=(10, 6)) == tolerance("kernel", np.float64, d=6).rtol
    assert ht.default_rtol("max_row", dtype="float32", shape=(10, 6)) == tolerance("kernel", np.float32, d=6).rtol
    assert ht.default_rtol("spectral", dtype="float32", shape=(100, 6)) == tolerance("kernel", np.float32,
                                                                                     d=100).rtol
    assert ht.default_rtol("max_row", dtype="bfloat16", shape=(10, 6)) == 8 * 2.0**-8
    assert ht.default_rtol("max_row", dtype="float16", shape=(10, 6)) == 8 * 2.0**-11
    assert ht.default_rtol("diameter", dtype="float64", shape=(10, 6)) == tolerance("solver").rtol
    with pytest.raises(ValueError, match="dtype must be one of"):
        ht.default_rtol("max_row", dtype="int8")


# --------------------------------------------------------------------------- array libraries
@needs_torch
def test_torch_tensors(cases):
    G = cases["cross_entropy"]
    Gt = torch.tensor(G, dtype=torch.float32)
    St = -torch.nn.functional.normalize(Gt, dim=1, eps=0.0)  # float32 RowNorm
    assert_steepest(St, Gt, norm="max_row")
    # a tensor that requires grad (a parameter's step, say) is detached, not refused
    Sg = St.clone().requires_grad_(True)
    assert_steepest(Sg, Gt.clone().requires_grad_(True), norm="max_row")
    with pytest.raises(AssertionError, match=r"S = 0\.5 x.*\n?"):
        assert_steepest(0.5 * Sg, Gt, norm="max_row")
    msg = fails(0.5 * St, Gt, r"S torch float32, G torch float32", norm="max_row")
    assert "S = 0.5 x" in msg


@needs_torch
@pytest.mark.parametrize("dtype, unit", [("bfloat16", 2.0**-8), ("float16", 2.0**-11)])
def test_torch_half_formats_are_widened_exactly(cases, dtype, unit):
    G = cases["gaussian"]
    tdt = getattr(torch, dtype)
    Gt = torch.tensor(G, dtype=tdt)
    G_exact = Gt.float().double().numpy()  # the values the assertion must see, bit for bit
    St = (-torch.sign(Gt)).to(tdt)
    assert_steepest(St, Gt, norm="max_entry")
    from hilbertgeom.testing._arrays import host_float64

    h = host_float64(Gt, "G")
    assert h.dtype == dtype and h.unit == unit and np.array_equal(h.array, G_exact)
    # a RowNorm rounded to the format passes at the format's default tolerance...
    Sr = (-torch.nn.functional.normalize(Gt.double(), dim=1)).to(tdt)
    assert_steepest(Sr, Gt, norm="max_row")
    # ... and a half step still fails
    fails((0.5 * Sr.double()).to(tdt), Gt, r"S = 0\.5\d* x a steepest step", norm="max_row")


@pytest.mark.skipif(_cupy_with_cuda() is None, reason="CuPy with a CUDA device is not available")
def test_cupy_arrays(cases):  # pragma: no cover - needs a GPU
    cp = _cupy_with_cuda()
    G = cases["gaussian"]
    assert_steepest(cp.asarray(hg.rownorm_update(G)), cp.asarray(G), norm="max_row")
    fails(cp.asarray(0.5 * hg.rownorm_update(G)), cp.asarray(G), r"S = 0\.5 x", norm="max_row")


def test_dlpack_cpu_exporter(cases):
    """Any CPU array exporting DLPack (here a NumPy array behind a thin wrapper) is read as is."""

    class Exporter:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    G = cases["gaussian"]
    assert_steepest(Exporter(hg.sign_update(G)), Exporter(G), norm="max_entry")


def test_device_exporter_that_cannot_reach_the_host_is_a_type_error():
    class OnDevice:
        def __dlpack__(self, **kw):
            raise BufferError("no cross-device copy")

        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    G = np.array([[1.0, 0.0], [-1.0, 0.0]])
    with pytest.raises(TypeError, match=r"S lives on a device \(DLPack device type 2\)"):
        assert_steepest(OnDevice(), G, norm="max_row")


# --------------------------------------------------------------------------- cases and strategies
def test_gradient_cases_are_zero_sum_and_named():
    cs = gradient_cases(30, 5, real=True)
    names = [c.name for c in cs]
    assert names[:6] == ["gaussian", "rank_one", "low_rank", "cross_entropy", "cross_entropy_sharp",
                         "simplex_worst_case"]
    assert names[-1] == "real_minilm"
    for c in cs[:-1]:
        G = c.G
        assert G.shape == (30, 5) and G.dtype == np.float64
        assert np.all(np.abs(G.sum(axis=0)) <= kernel_rtol(G.shape[0]) * np.abs(G).sum(axis=0))  # centred
        assert c.G is G  # made once
    assert np.linalg.matrix_rank(cs[1].G) == 1
    assert np.linalg.matrix_rank(cs[2].G) == 4
    real = cs[-1]
    from hilbertgeom.gradients import minilm_available

    assert real.available == minilm_available()[0]
    if not real.available:
        with pytest.raises(FileNotFoundError, match="not available"):
            _ = real.G


def settle(n=25):
    return settings(max_examples=n, deadline=None, database=None)


@settle()
@given(st.data())
def test_strategy_kinds_keep_their_promises(data):
    kind = data.draw(st.sampled_from(KINDS))
    G = data.draw(zero_sum_gradients(st.integers(3, 24), st.integers(1, 6), kind=kind))
    V, d = G.shape
    assert G.dtype == np.float64 and np.isfinite(G).all()
    assert np.all(np.abs(G.sum(axis=0)) <= kernel_rtol(V) * np.abs(G).sum(axis=0))
    rank = np.linalg.matrix_rank(G)
    if kind == "rank_one":
        assert rank == 1
    if kind == "gaussian":
        assert rank == min(V - 1, d)
    if kind == "rownorm_worst":
        k = min(d, V - 1)
        n = np.linalg.norm(G, axis=1)
        big = np.flatnonzero(n > 0.5 * n.max())
        # zero rows, up to the centring (V-term sums) and rotation (d-term) of the simplex
        assert big.size == k + 1 and np.all(n[np.setdiff1d(np.arange(V), big)] <= kernel_rtol(V + d) * n.max())
        D = np.linalg.norm(G[big][:, None] - G[big][None], axis=2)[np.triu_indices(k + 1, 1)]
        # equidistant (a regular simplex), up to its construction and rotation (V- and d-term sums)
        np.testing.assert_allclose(D, D[0], rtol=kernel_rtol(V + d), atol=0)
    if kind == "near_duplicate":
        n = np.linalg.norm(G, axis=1)
        tail = n < 1e-2 * n.max()
        assert tail.sum() >= V / 2 - 1
        T = G[tail]
        spread = np.linalg.norm(T - T.mean(axis=0), axis=1).max()
        # the strategy's spread (at most 1e-4 of the tail's norm, times a Gaussian factor: data, not
        # a tolerance), plus the rounding of the tail mean (a V-term sum)
        assert spread <= 1e-3 * np.linalg.norm(T.mean(axis=0)) + kernel_rtol(V) * np.linalg.norm(T, axis=1).max()


@settle(15)
@given(head_gradients(st.integers(4, 30), st.integers(1, 5)))
def test_head_gradients_are_cross_entropy_gradients(hgrad):
    """Rank at most min(d, batch) (G = (P - Y)^T H / B), and most rows are not targets."""
    G = hgrad.G
    V, d = G.shape
    assert np.linalg.matrix_rank(G) <= min(d, hgrad.batch)
    assert hgrad.batch <= max(1, V // 2)
    assert np.unique(hgrad.targets).size <= hgrad.batch < V


@settle(10)
@given(zero_sum_gradients(st.integers(3, 12), st.integers(1, 4), kind=("gaussian", "cross_entropy", "near_duplicate")))
def test_property_exact_rownorm_and_sign_pass(G):
    """The example an optimizer author would write: exact steps pass on every drawn gradient."""
    assert_steepest(hg.rownorm_update(G), G, norm="max_row")
    assert_steepest(hg.sign_update(G), G, norm="max_entry")
    assert_steepest(hg.projected_rownorm(G, eta=1.0), G, norm="covering_radius")


def test_strategy_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="kind must be one of"):
        zero_sum_gradients(kind="uniform")
    with pytest.raises(ValueError, match="V must be >= 3"):
        zero_sum_gradients(2, 3)


# --------------------------------------------------------------------------- package shape, docs, plugin
def test_testing_does_not_import_hypothesis():
    code = "import sys, hilbertgeom.testing; print('hypothesis' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_all_and_docstring_examples():
    from hilbertgeom.testing import _cases, _steepest, plugin, strategies

    for mod in (ht, strategies, plugin):
        for name in mod.__all__:
            assert hasattr(mod, name), name
    for mod in (_steepest, _cases, strategies):
        res = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_tutorial_messages_are_what_the_code_prints():
    """docs/tutorials/testing.md shows assertion messages; its examples run as doctests,
    so each message shown is the one the code prints now."""
    res = doctest.testfile(str(ROOT / "docs" / "tutorials" / "testing.md"), module_relative=False,
                           optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted >= 6


def test_pytest_plugin(tmp_path):
    (tmp_path / "test_user.py").write_text(
        "import numpy as np, pytest\n"
        "def my_rownorm(G):\n"
        "    return -G / np.linalg.norm(G, axis=1, keepdims=True)\n"
        "@pytest.mark.gradient_cases(12, 3, real=False)\n"
        "def test_mine(gradient_case, assert_steepest):\n"
        "    G = gradient_case.G\n"
        "    if gradient_case.name == 'simplex_worst_case':\n"
        "        pytest.skip('zero rows')\n"
        "    assert_steepest(my_rownorm(G), G, norm='max_row')\n"
        "def test_half(assert_steepest):\n"
        "    G = np.array([[3.0, 4.0], [-3.0, -4.0]])\n"
        "    assert_steepest(-G / 10, G, norm='max_row')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "hilbertgeom.testing.plugin", "-p",
                          "no:cacheprovider", "-p", "no:hilbertgeom", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert "5 passed, 1 skipped" in out.stdout or "1 failed, 5 passed, 1 skipped" in out.stdout, out.stdout
    assert "1 failed" in out.stdout and "S = 0.5 x a steepest step" in out.stdout, out.stdout


def test_covering_radius_certificate_on_a_closed_form_ball():
    """Two antipodal rows at distance 2R with every other row strictly inside: rad(S) = R
    exactly.  The rows are not cospherical, so the quick sphere fit does not settle it and
    the enclosing-ball certificate must: feasible at eta = 2R, infeasible at eta = 2R (1 - 1e-3)."""
    rng = np.random.default_rng(9)
    R, d = 0.25, 3
    inner = rng.standard_normal((12, d))
    inner *= (0.9 * R * rng.random((12, 1))) / np.linalg.norm(inner, axis=1, keepdims=True)
    e = np.eye(d)[0] * R
    S = np.vstack([e, -e, inner])
    S -= S.mean(axis=0)
    G = rng.standard_normal(S.shape)
    G -= G.mean(axis=0)
    fails(S, G, r"norm:     rad\(S\) (= 0\.25|in \[0\.2499\d*, 0\.25\d*\]) = 1 x eta/2, <= eta/2 = 0\.25 .*ok",
          norm="covering_radius", eta=2 * R)
    fails(S, G, r"rad\(S\) exceeds eta/2(.|\n)*outside: ", norm="covering_radius", eta=2 * R * (1 - 1e-3))


def test_plugin_entry_point_is_declared():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"hilbertgeom": "hilbertgeom.testing.plugin"}
    assert "hilbertgeom.testing" in meta["tool"]["setuptools"]["packages"]


def test_real_gradient_case():
    """The real all-MiniLM-L6-v2 head gradient (largest 48 rows, d = 384): exact steps pass,
    a RowNorm with epsilon and a forgotten centring fail with their messages."""
    from hilbertgeom.gradients import minilm_available

    ok, why = minilm_available()
    if not ok:
        pytest.skip(f"all-MiniLM-L6-v2 weights not installed: {why}")
    case = gradient_cases(48, 8, seed=0)[-1]
    G = case.G
    assert G.shape == (48, 384)
    assert np.all(np.abs(G.sum(axis=0)) <= kernel_rtol(G.shape[0]) * np.abs(G).sum(axis=0))  # centred
    for norm in ("max_row", "max_entry", "spectral", "diameter_inf", "covering_radius"):
        assert_steepest(steepest_step(G, norm=norm), G, norm=norm)
    eps = 1e-2 * float(np.linalg.norm(G, axis=1).min())
    fails(rownorm_eps(G, eps), G, r"falls short(.|\n)*short rows", norm="max_row")
    fails(-0.5 * hg.rownorm(G), G, r"it is not centred", norm="covering_radius")
