"""Head geometry: forward sup (I6), backward bounds (I8, I9)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import EXACT
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hilbertgeom as hg

clouds = hnp.arrays(np.float64, st.tuples(st.integers(2, 10), st.integers(1, 5)), elements=st.floats(-10, 10))
HIDDEN = ((2, 2, 2), ("inf", 1, np.inf), (1, "inf", 1))  # hidden norm, row norm, numpy ord


def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


@given(clouds, st.floats(0.0, 5.0), st.data())
def test_i6_sup_is_attained_and_not_exceeded(S, R, data):
    V, d = S.shape
    U = data.draw(hnp.arrays(np.float64, (V, d), elements=st.floats(-5, 5)))
    for hn, rn, ordv in HIDDEN:
        bound = hg.head_norm(S, hidden_norm=hn, radius=R)
        assert bound == R * hg.row_diameter(S, norm=rn)
        h = hg.worst_case_hidden(S, hidden_norm=hn, radius=R)
        assert abs(np.linalg.norm(h, ord=ordv) - R) <= EXACT.bound(1.0 + R)
        scale = 1.0 + bound + R * float(np.abs(S).sum() + np.abs(U).sum())
        # attained (through the softmax, for any U)
        got = hg.hilbert_distance(softmax((U + S) @ h), softmax(U @ h))
        assert abs(got - bound) <= EXACT.bound(scale)
        # not exceeded at random points of the ball
        g = data.draw(hnp.arrays(np.float64, d, elements=st.floats(-1, 1)))
        n = np.linalg.norm(g, ord=ordv)
        if n > 1e-100:  # R / n must not overflow
            g = g * (R / n)
            assert hg.hilbert_distance(softmax((U + S) @ g), softmax(U @ g)) <= bound + EXACT.bound(scale)


def test_i6_worked_example():
    S = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, -1.0]])
    assert hg.head_norm(S) == math.sqrt(29.0)          # rows 1, 2: (2, 5)
    assert hg.head_norm(S, hidden_norm="inf") == 7.0   # l1 diameter, tie (0,1)/(1,2)
    assert hg.row_diameter(S, norm=1, return_pair=True) == (7.0, 0, 1)
    assert hg.head_norm(S, hidden_norm=1) == 5.0       # l_inf diameter: column 1 ranges 4 - (-1)
    np.testing.assert_array_equal(hg.worst_case_hidden(S, hidden_norm=1), [0.0, 1.0])
    np.testing.assert_array_equal(hg.worst_case_hidden(S, hidden_norm="inf"), [-1.0, -1.0])


def test_i6_zero_update_and_single_row():
    assert hg.head_norm(np.zeros((4, 3))) == 0.0
    h = hg.worst_case_hidden(np.zeros((4, 3)), radius=2.0)
    assert np.linalg.norm(h) == 2.0
    assert hg.worst_case_hidden([[1.0, 2.0]]).tolist() == [1.0, 0.0]


def test_i6_errors():
    with pytest.raises(ValueError, match="hidden_norm must be one of"):
        hg.head_norm(np.eye(2), hidden_norm=3)
    with pytest.raises(ValueError, match="radius must be >= 0"):
        hg.head_norm(np.eye(2), radius=-1.0)
    with pytest.raises(ValueError, match="radius must be finite"):
        hg.worst_case_hidden(np.eye(2), radius=np.inf)


@given(clouds, st.data())
def test_i8_backward_bound(S, data):
    V = S.shape[0]
    r0 = data.draw(hnp.arrays(np.float64, V, elements=st.floats(-5, 5)))
    r = r0 - r0.mean()
    # centring a constant vector leaves rounding noise that is not zero-sum relative to itself
    assume(np.abs(r).sum() > 1e-8 * np.abs(r0).sum())
    b = hg.backward_bound(S, r)
    assert np.linalg.norm(S.T @ r) <= b + EXACT.bound(1.0 + b + np.abs(S).max() * np.abs(r).sum())
    # cross-entropy form
    p = softmax(data.draw(hnp.arrays(np.float64, V, elements=st.floats(-5, 5))))
    c = data.draw(st.integers(0, V - 1))
    e = p.copy()
    e[c] -= 1.0
    ce = hg.cross_entropy_backward_bound(S, p, c)
    assert np.linalg.norm(S.T @ e) <= ce + EXACT.bound(1.0 + ce + np.abs(S).max())


@given(clouds)
def test_i8_witness_is_sharp(S):
    w = hg.backward_witness(S)
    assert w.sum() == 0.0 and np.abs(w).sum() == 2.0
    b = hg.backward_bound(S, w)
    assert abs(np.linalg.norm(S.T @ w) - b) <= EXACT.bound(1.0 + b)


def test_i8_errors():
    S = np.eye(3)
    with pytest.raises(ValueError, match="r must sum to zero"):
        hg.backward_bound(S, [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="r must have length 3"):
        hg.backward_bound(S, [1.0, -1.0])
    with pytest.raises(ValueError, match=r"c must be a token index in \[0, 3\)"):
        hg.cross_entropy_backward_bound(S, [0.2, 0.3, 0.5], 3)
    with pytest.raises(ValueError, match="p must be nonnegative"):
        hg.cross_entropy_backward_bound(S, [-0.2, 0.7, 0.5], 0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        hg.backward_witness([[1.0, 2.0]])


@given(clouds, st.data())
def test_i9_backward_change_bound(S, data):
    V, d = S.shape
    U = data.draw(hnp.arrays(np.float64, (V, d), elements=st.floats(-5, 5)))
    h = data.draw(hnp.arrays(np.float64, d, elements=st.floats(-2, 2)))
    c = data.draw(st.integers(0, V - 1))
    actual = hg.backward_change(U, S, h, c)
    bound = hg.backward_change_bound(U, S, h, c)
    assert actual <= bound + EXACT.bound(1.0 + bound + np.abs(U).max() + np.abs(S).max())


@pytest.mark.parametrize("M", [1.0, 10.0, 1e4])
@pytest.mark.parametrize("eta", [0.1, 1.0, 2.5])
def test_i9_u_dependence_example(M, eta):
    """V = d = 2, rows of U at +-M e_2: the change is at least M tanh(eta/2),
    unbounded in M although D(S) = eta is fixed (closed form)."""
    U = np.array([[0.0, M], [0.0, -M]])
    S = np.array([[eta / 2, 0.0], [-eta / 2, 0.0]])
    assert hg.row_diameter(S) == eta
    change = hg.backward_change(U, S, [1.0, 0.0], 0)
    assert change >= M * math.tanh(eta / 2) * (1 - EXACT.rtol)
    assert change <= hg.backward_change_bound(U, S, [1.0, 0.0], 0) * (1 + EXACT.rtol)


def test_i9_shape_errors():
    with pytest.raises(ValueError, match="S must have the shape of U"):
        hg.backward_change(np.eye(2), np.eye(3), [1.0, 0.0], 0)
    with pytest.raises(ValueError, match="h must have length 2"):
        hg.backward_change_bound(np.eye(2), np.eye(2), [1.0, 0.0, 0.0], 0)
