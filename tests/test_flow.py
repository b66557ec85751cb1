"""The two forms of :class:`~hilbertgeom.tension.Flow`: explicit vectors, and the
scalar-weighted form ``y_e = w_e (b_i - b_j)`` that ``refine`` returns (its pairs may
number millions, so its vectors are never stored).

References: the formula written out pair by pair, the divergence summed pair by pair,
``numpy.linalg.norm``, and the certificate of the same vectors in explicit form."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import kernel_rtol

from hilbertgeom.tension import Flow
from hilbertgeom.tension import _results as rs


def weighted(rng, V=12, d=3, m=30):
    I = rng.integers(0, V - 1, m)
    J = I + 1 + rng.integers(0, V - 1 - I)  # i < j
    w = rng.uniform(0.1, 2.0, m)
    B = rng.standard_normal((V, d))
    return I, J, w, B


def test_vectors_norms_and_divergence_of_the_weighted_form(rng):
    """``vectors``, ``norms`` and ``divergence`` against the formula pair by pair."""
    V, d = 12, 3
    I, J, w, B = weighted(rng, V, d)
    f = Flow(np.stack([I, J], axis=1), None, np.zeros((V, d)), 0.0, weights=w, base=B)
    Y = np.array([w[e] * (B[I[e]] - B[J[e]]) for e in range(I.size)])
    assert not f.explicit and np.array_equal(f.vectors, Y)  # the same formula: the same numbers
    np.testing.assert_allclose(f.norms(), np.linalg.norm(Y, axis=1), rtol=kernel_rtol(d), atol=0)
    div = np.zeros((V, d))
    for e in range(I.size):
        div[I[e]] += Y[e]
        div[J[e]] -= Y[e]
    scale = np.abs(Y).sum()
    assert np.abs(f.divergence(V) - div).max() <= kernel_rtol(I.size) * scale
    g = Flow(f.pairs, Y, f.residual, 0.0)
    assert g.explicit and np.array_equal(g.divergence(V), rs._divergence(I, J, Y, V))


def test_chunks_do_not_change_the_numbers(rng, monkeypatch):
    """Chunks of 6 entries (two pairs at d = 3) against one chunk: the same norms, the
    same vectors, the divergence to rounding."""
    V, d = 12, 3
    I, J, w, B = weighted(rng, V, d)
    f = Flow(np.stack([I, J], axis=1), None, np.zeros((V, d)), 0.0, weights=w, base=B)
    norms, div = f.norms(), f.divergence(V)
    monkeypatch.setattr(rs, "_NORM_CHUNK", 6)
    assert len(list(f.chunks())) == I.size // 2
    assert np.array_equal(f.norms(), norms)
    assert np.array_equal(np.concatenate([y for _, y in f.chunks()]), f.vectors)
    assert np.abs(f.divergence(V) - div).max() <= kernel_rtol(I.size) * np.abs(f.vectors).sum()


def test_certificate_of_the_weighted_form_is_the_explicit_one(rng):
    """``_flow_of`` on ``Weighted(w, B)`` and on the same vectors made explicit: the same
    residual and the same rounded-up cost (one chunk: the same sums in the same order)."""
    V, d = 12, 3
    I, J, w, B = weighted(rng, V, d)
    G = rng.standard_normal((V, d))
    G -= G.mean(axis=0)
    lean = rs._flow_of(G, I, J, rs.Weighted(w, B))
    full = rs._flow_of(G, I, J, w[:, None] * (B[I] - B[J]))
    assert not lean.explicit and full.explicit
    assert lean.cost == full.cost
    assert np.array_equal(lean.residual, full.residual) and np.array_equal(lean.vectors, full.vectors)


def test_scaled_is_exact_in_both_forms(rng):
    V, d = 12, 3
    I, J, w, B = weighted(rng, V, d)
    R = rng.standard_normal((V, d))
    for f in (Flow(np.stack([I, J], axis=1), None, R, 1.0, weights=w, base=B),
              Flow(np.stack([I, J], axis=1), w[:, None] * (B[I] - B[J]), R, 1.0)):
        for k in (-40, 7):
            s = f.scaled(k)
            assert s.explicit == f.explicit and s.cost == f.cost
            assert np.array_equal(s.vectors, np.ldexp(f.vectors, k)) and np.array_equal(s.residual, np.ldexp(R, k))
        assert replace(f, cost=3.0).cost == 3.0  # not a tolerance: set exactly


def test_flow_constructor_errors_and_immutability(rng):
    P, R = np.zeros((1, 2), np.intp), np.zeros((3, 2))
    with pytest.raises(ValueError, match="either vectors, or weights"):
        Flow(P, np.zeros((1, 2)), R, 0.0, weights=np.ones(1), base=R)
    with pytest.raises(ValueError, match="either vectors, or weights"):
        Flow(P, None, R, 0.0)
    with pytest.raises(ValueError, match="together with base"):
        Flow(P, None, R, 0.0, weights=np.ones(1))
    with pytest.raises(ValueError, match="residual"):
        Flow(P, np.zeros((1, 2)))
    f = Flow(P, np.zeros((1, 2)), R, 0.0)
    with pytest.raises(AttributeError, match="cannot assign"):
        f.cost = 1.0
    g = replace(f, cost=2.0)  # dataclasses.replace keeps the form
    assert g.cost == 2.0 and g.explicit and np.array_equal(g.vectors, f.vectors)  # not a tolerance: set exactly
    h = replace(Flow(P, None, R, 0.0, weights=np.ones(1), base=R), cost=3.0)
    assert h.cost == 3.0 and not h.explicit  # not a tolerance: set exactly
    assert "explicit" in repr(f) and "1 pairs" in repr(f)


def test_flows_pickle_and_copy(rng):
    """Both forms survive pickle and deepcopy."""
    import copy
    import pickle

    I, J, w, B = weighted(rng)
    R = rng.standard_normal(B.shape)
    for f in (Flow(np.stack([I, J], axis=1), None, R, 2.5, weights=w, base=B),
              Flow(np.stack([I, J], axis=1), w[:, None] * (B[I] - B[J]), R, 2.5)):
        for g in (pickle.loads(pickle.dumps(f)), copy.deepcopy(f)):
            assert g.explicit == f.explicit and g.cost == f.cost
            assert np.array_equal(g.vectors, f.vectors) and np.array_equal(g.residual, f.residual)
