"""tension/lbfgs.py: projected L-BFGS for ``min f(x)`` over ``x >= lower``.

References: the closed form of a separable bounded quadratic (``x* = max(b, l)``), and
SciPy's NNLS (Lawson-Hanson active set, an independent algorithm) for a non-separable
one."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import kernel_rtol
from scipy.optimize import nnls

from hilbertgeom.tension.lbfgs import _two_loop, new_memory, projected_lbfgs, resize_memory
from hilbertgeom.tolerances import tolerance

SOLVER = tolerance("solver")


def _nnls_problem():
    """``1/2 ||A x - y||^2`` over ``x >= 0``, a quarter of the bounds active at the optimum:
    ``(A, y, fg)``."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((80, 40))
    y = A @ np.where(rng.random(40) < 0.35, 0.0, rng.uniform(0.5, 2.0, 40)) - A @ rng.uniform(0, 0.3, 40)

    def fg(x):
        r = A @ x - y
        return 0.5 * float(r @ r), A.T @ r

    return A, y, fg


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
    A, y, fg = _nnls_problem()
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
    after the evaluations it allowed.  The quadratic has ten distinct curvatures, so the
    descent does not end on its own within six evaluations (checked first: ``x @ x`` from
    ``ones`` reached exactly 0 in four evaluations on one machine's BLAS and not on another's)."""
    c = np.geomspace(1.0, 100.0, 10)

    def quad(x):
        return float(c @ (x * x)), 2.0 * c * x

    assert projected_lbfgs(quad, np.ones(10), -1.0, max_evals=100)[2] > 6
    calls = []

    class StopError(Exception):
        pass

    def fg(x):
        calls.append(1)
        if len(calls) > 5:
            raise StopError
        return quad(x)

    with pytest.raises(StopError):
        projected_lbfgs(fg, np.ones(10), -1.0, max_evals=100)
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


def test_a_restart_given_the_memory_takes_the_steps_of_one_run():
    """A run cut by its objective raising after an accepted step, then restarted from that
    point with the memory it left, evaluates the same points, bit for bit, as one run that
    was never cut (after the restart's evaluation of its start).  Without the memory the
    restart's first step is steepest descent and leaves that path.  Bounds are active here
    (the non-negative least squares above)."""
    _, _, fg = _nnls_problem()
    seen: list[np.ndarray] = []

    def record(x):
        seen.append(x.copy())
        return fg(x)

    projected_lbfgs(record, np.ones(40), 0.0, maxcor=5, max_evals=60)
    whole = seen[:]

    class CutError(Exception):
        pass

    restarts = 0
    for k in range(15, 45):
        mem = new_memory(5)
        seen.clear()

        def cut(x, k=k):
            if len(seen) == k:
                raise CutError
            return record(x)

        try:
            projected_lbfgs(cut, np.ones(40), 0.0, maxcor=5, max_evals=60, memory=mem)
        except CutError:
            pass
        s_last = mem[-1][0]
        # evaluation k was accepted where it is an earlier point plus the memory's last step
        if not any(np.array_equal(whole[k - 1] - p, s_last) for p in whole[: k - 1]):
            continue
        restarts += 1
        seen.clear()
        projected_lbfgs(record, whole[k - 1], 0.0, maxcor=5, max_evals=60 - k + 1, memory=mem)
        assert np.array_equal(seen[0], whole[k - 1])
        assert all(np.array_equal(a, b) for a, b in zip(seen[1:], whole[k:], strict=True))
        seen.clear()
        projected_lbfgs(record, whole[k - 1], 0.0, maxcor=5, max_evals=3)
        assert not np.array_equal(seen[1], whole[k])  # not a tolerance: without it, another step
    assert restarts >= 10  # not a tolerance: most evaluations end a step here


def test_resized_memory_gives_the_new_variables_the_initial_hessian():
    """Padded with zeros for appended variables, the memory's product ``H q`` is the old
    product on the old variables and ``gamma q`` on the new ones (``gamma = s'y / y'y`` of
    the last pair, unchanged); cut back, each pair's ``1 / s'y`` is recomputed on the
    variables kept, and a pair without positive curvature there is dropped."""
    rng = np.random.default_rng(5)
    n, extra = 30, 7
    mem = new_memory(4)
    for _ in range(4):
        s = rng.standard_normal(n)
        y = s + 0.3 * rng.standard_normal(n)
        mem.append((s, y, 1.0 / float(s @ y)))
    q = rng.standard_normal(n + extra)
    free = np.ones(n + extra, bool)
    old = _two_loop(q[:n], mem, free[:n])
    _, y0, rho0 = mem[-1]
    gamma = 1.0 / (rho0 * float(y0 @ y0))
    resize_memory(mem, n + extra)
    assert len(mem) == 4 and all(s.size == y.size == n + extra for s, y, _ in mem)
    new = _two_loop(q, mem, free)
    # the same sums, with zeros added (BLAS may block them differently: rounding only)
    assert np.abs(new[:n] - old).max() <= kernel_rtol(n + extra) * float(np.abs(old).max())
    assert np.abs(new[n:] - gamma * q[n:]).max() <= kernel_rtol(n + extra) * float(np.abs(gamma * q[n:]).max())
    # cut back to 20 variables; one pair made to curve the wrong way there
    s, y, rho = mem[1]
    y = y.copy()
    y[:20] = -s[:20]
    mem[1] = (s, y, rho)
    resize_memory(mem, 20)
    assert len(mem) == 3
    for s, y, rho in mem:
        assert s.size == y.size == 20
        assert rho == 1.0 / float(s @ y)


@pytest.mark.parametrize("scaled", [False, True])
def test_two_loop_is_the_bfgs_matrix_on_the_free_variables(scaled):
    """The two-loop product against the textbook matrix form of the same memory, built
    explicitly: ``H_0 = gamma diag(c)`` (``c`` ones or the scale, ``gamma = s'y / y'c y`` of the
    last pair), then for each pair in order ``H <- (I - rho s y') H (I - rho y s') + rho s s'``,
    with ``s`` and ``y`` restricted to the free variables (zero on the held ones) and ``rho`` the
    stored ``1 / s'y``.  A third of the variables are held: their entries are exactly zero."""
    rng = np.random.default_rng(11)
    n, m = 40, 6
    mem = new_memory(m)
    for _ in range(m):
        s = rng.standard_normal(n)
        y = s + 0.3 * rng.standard_normal(n)
        mem.append((s, y, 1.0 / float(s @ y)))
    free = rng.random(n) > 1.0 / 3.0
    q = np.where(free, rng.standard_normal(n), 0.0)
    c = rng.uniform(0.1, 10.0, n) if scaled else np.ones(n)
    got = _two_loop(q, mem, free, c if scaled else None)
    _, y_last, rho_last = mem[-1]
    H = np.diag(c / (rho_last * float(y_last @ (c * y_last))))
    eye = np.eye(n)
    for s, y, rho in mem:
        sf, yf = s * free, y * free
        H = (eye - rho * np.outer(sf, yf)) @ H @ (eye - rho * np.outer(yf, sf)) + rho * np.outer(sf, sf)
    want = H @ q
    assert np.all(got[~free] == 0.0)  # not a tolerance: held variables do not move
    assert np.abs(got - want).max() <= kernel_rtol(n * m) * float(np.abs(H).max() * np.abs(q).sum())


def test_work_vectors_reused_in_place_are_never_shared():
    """The iteration works in place (its work vectors made once, the memory's dropped pair
    reused for the next): the point returned is the one whose value is returned, the start is
    not written, and no two vectors of the memory, nor the point returned, share storage.
    Checked on the non-negative least squares above, with the memory full and cycling."""
    _, _, fg = _nnls_problem()
    x0 = np.ones(40)
    mem = new_memory(5)
    x, f, evals = projected_lbfgs(fg, x0, 0.0, maxcor=5, max_evals=60, memory=mem)
    assert evals == 60  # not a tolerance: the memory was full and dropped pairs on most steps
    assert np.array_equal(x0, np.ones(40))
    assert fg(x)[0] == f  # not a tolerance: the same point, evaluated again
    vectors = [v for s, y, _ in mem for v in (s, y)] + [x]
    assert len(mem) == 5  # not a tolerance: a full memory
    for i, a in enumerate(vectors):
        for b in vectors[i + 1:]:
            assert not np.shares_memory(a, b)
    for s, y, rho in mem:
        assert rho == 1.0 / float(s @ y)  # not a tolerance: each pair's curvature is its own
