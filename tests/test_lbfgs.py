"""tension/lbfgs.py: projected L-BFGS for ``min f(x)`` over ``x >= lower``.

References: the closed form of a separable bounded quadratic (``x* = max(b, l)``), and
SciPy's NNLS (Lawson-Hanson active set, an independent algorithm) for a non-separable
one."""

from __future__ import annotations

import numpy as np
from helpers import kernel_rtol
from scipy.optimize import nnls

from hilbertgeom.tension.lbfgs import projected_lbfgs
from hilbertgeom.tolerances import tolerance

SOLVER = tolerance("solver")


def test_separable_quadratic_reaches_its_closed_form():
    """``1/2 sum c_i (x_i - b_i)^2`` over ``x >= l``: the minimizer is ``max(b, l)``, half of
    the variables at the bound; reached to rounding, with a value never above the start's."""
    rng = np.random.default_rng(0)
    n = 500
    c = rng.uniform(0.5, 20.0, n)
    b = rng.standard_normal(n)
    low = 0.1

    def fg(x):
        r = x - b
        return 0.5 * float(np.sum(c * r * r)), c * r

    x0 = np.full(n, 3.0)
    x, f, evals = projected_lbfgs(fg, x0, low, max_evals=300)
    ref = np.maximum(b, low)
    assert np.abs(x - ref).max() <= kernel_rtol(n) * float(np.abs(ref).max())
    assert f <= fg(x0)[0]
    assert f - fg(ref)[0] <= kernel_rtol(n) * fg(x0)[0]
    assert evals <= 300


def test_nonnegative_least_squares_matches_nnls():
    """``1/2 ||A x - y||^2`` over ``x >= 0`` (coupled variables, a quarter active at the
    optimum): the value of SciPy's NNLS, an active-set method of its own, to rounding, the
    same active set, and the (unique) minimizer to the solver tolerance."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((80, 40))
    y = A @ np.where(rng.random(40) < 0.35, 0.0, rng.uniform(0.5, 2.0, 40)) - A @ rng.uniform(0, 0.3, 40)

    def fg(x):
        r = A @ x - y
        return 0.5 * float(r @ r), A.T @ r

    x_ref, res = nnls(A, y)
    f_ref = 0.5 * res * res
    x, f, _ = projected_lbfgs(fg, np.ones(40), 0.0, max_evals=2000)
    assert x.min() >= 0.0
    assert np.count_nonzero(x_ref == 0) >= 5  # not a tolerance: the bound is active at the optimum
    assert np.array_equal(x == 0, x_ref == 0)
    assert f - f_ref <= kernel_rtol(A.size) * f_ref
    assert np.abs(x - x_ref).max() <= SOLVER.rtol * float(np.abs(x_ref).max())


def test_memory_beats_steepest_descent_on_an_ill_conditioned_quadratic():
    """A quadratic with condition number 1e3 (eigenvalues spread geometrically, no bound
    active): within 200 evaluations the value is within the solver tolerance of the
    closed-form minimum ``-1/2 b' Q^-1 b``.  Steepest descent needs about ``cond log(1/rtol)``,
    some 14,000: so does the method with its memory's direction wrong (it falls back to
    steepest descent)."""
    rng = np.random.default_rng(2)
    n = 100
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q = (Qm * np.geomspace(1.0, 1e3, n)) @ Qm.T
    b = rng.standard_normal(n)
    f_min = -0.5 * float(b @ np.linalg.solve(Q, b))

    def fg(x):
        return 0.5 * float(x @ Q @ x) - float(b @ x), Q @ x - b

    _, f, _ = projected_lbfgs(fg, np.zeros(n), -1e300, maxcor=10, max_evals=200)
    assert f - f_min <= SOLVER.rtol * abs(f_min)


def test_stops_when_the_objective_raises():
    """The objective may leave the descent by raising; the exception reaches the caller
    after the evaluations it allowed."""
    calls = []

    class StopError(Exception):
        pass

    def fg(x):
        calls.append(1)
        if len(calls) > 5:
            raise StopError
        return float(x @ x), 2 * x

    try:
        projected_lbfgs(fg, np.ones(10), -1.0, max_evals=100)
    except StopError:
        pass
    assert len(calls) == 6


def test_scaled_memory_solves_weights_spread_over_orders_of_magnitude():
    """``sum a_i / w_i + w_i`` over ``w >= 0`` (a star graph's dual in its edge weights:
    ``1/2 <X, L_w^+ X>`` is ``sum |x_i|^2 / w_i``), minimized at ``w* = sqrt(a)`` with value
    ``2 sum sqrt(a)``; ``w*`` spans four orders of magnitude and the curvature at the
    minimum is ``2 / w*``.  With the initial Hessian scaled by the weights the closed form
    is reached to the solver tolerance in 100 evaluations; with ``gamma I`` the value is
    still more than 1e-3 above it after 400."""
    rng = np.random.default_rng(4)
    ws = np.geomspace(1e-4, 1.0, 2000)
    rng.shuffle(ws)
    a = ws * ws
    f_min = 2.0 * float(ws.sum())

    def fg(w):
        return float(np.sum(a / w + w)), 1.0 - a / (w * w)

    x0 = np.full(ws.size, ws.mean())
    _, f, _ = projected_lbfgs(fg, x0, 1e-12 * ws.mean(), maxcor=10, max_evals=100, scaled=True)
    assert f - f_min <= SOLVER.rtol * f_min
    _, f_plain, _ = projected_lbfgs(fg, x0, 1e-12 * ws.mean(), maxcor=10, max_evals=400)
    assert f_plain - f_min > 1e-3 * f_min  # not a tolerance: the unscaled memory's distance, measured 1.6e-3
