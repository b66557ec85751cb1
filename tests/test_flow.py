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


def test_flow_norms_of_every_magnitude_against_hypot(rng):
    """``_flow_norms`` (the certificate's norms of a flow's vectors) against ``math.hypot``
    of each row (correctly scaled, independent of the library): rows whose sum of squares
    lies in ``[2^-900, 2^900]`` take the unscaled sum, the others -- squares that underflow
    to subnormals or to zero, or overflow -- the scaled one; both within one ``d``-term dot
    product's rounding and a root.  Also a row of zeros, one with a NaN, and a float32
    array (scaled throughout)."""
    import math

    d = 24
    scales = [1.0, 2.0**-440, 2.0**-530, 2.0**-560, 2.0**-1060, 2.0**440, 2.0**520, 2.0**600]
    X = np.vstack([rng.standard_normal((3, d)) * s for s in scales] + [np.zeros((1, d))])
    X[2, 5] = 5e-324  # a subnormal entry in an ordinary row
    out = rs._flow_norms(X)
    ref = np.array([math.hypot(*row) for row in X.tolist()])
    assert np.all(np.isfinite(out)) and out[-1] == 0.0
    np.testing.assert_allclose(out, ref, rtol=kernel_rtol(d), atol=0)
    bad = X[:2].copy()
    bad[0, 1] = np.nan
    nb = rs._flow_norms(bad)
    assert np.isnan(nb[0]) and nb[1] == pytest.approx(math.hypot(*bad[1]), rel=kernel_rtol(d), abs=0)
    x32 = (rng.standard_normal((4, d)) * 1e-25).astype(np.float32)  # squares underflow float32
    ref32 = [math.hypot(*map(float, r)) for r in x32]
    np.testing.assert_allclose(rs._flow_norms(x32), ref32, rtol=kernel_rtol(d, np.float32))


@pytest.mark.parametrize("large", [False, True])
def test_certificate_bounds_the_residual_by_tiles_only_where_it_counts(rng, monkeypatch, large):
    """``_flow_of`` carries the residual on the balanced flow: its tiled cost where the bound
    ``(V - 1)/V sum ||r_i||`` is above ``_TILED_RESIDUAL`` of the explicit part, that bound
    alone where it is below (the tiled pass is not made).  Checked against the residual's
    two costs summed pair by pair: with a residual on one row (``large``) the tiled cost,
    about half the bound, is what the certificate adds; with a residual of rounding size
    the bound is, and it is below ``2^-40`` of the cost."""
    V, d = 12, 3
    I, J, w, B = weighted(rng, V, d)
    Y = w[:, None] * (B[I] - B[J])
    G = rs._divergence(I, J, Y, V)
    G[0] += 0.5 if large else 1e-15 * np.abs(G).max()  # not a tolerance: a residual of rounding size
    G -= G.mean(axis=0)
    calls = []
    real = rs._balanced_flow_cost
    monkeypatch.setattr(rs, "_balanced_flow_cost", lambda *a: calls.append(1) or real(*a))
    f = rs._flow_of(G, I, J, Y)
    r = f.residual
    iu, ju = np.triu_indices(V, 1)
    tiled = np.linalg.norm(r[iu] - r[ju], axis=1).sum() / V
    bound = (V - 1) / V * np.linalg.norm(r, axis=1).sum()
    explicit = np.linalg.norm(Y, axis=1).sum()
    assert f.cost >= explicit + min(tiled, bound)
    if large:
        assert calls and tiled < 0.75 * bound
        assert f.cost <= (explicit + tiled) * (1 + kernel_rtol(I.size + V))
    else:
        assert not calls and 0 < bound <= rs._TILED_RESIDUAL * explicit
        assert f.cost <= (explicit + bound) * (1 + kernel_rtol(I.size + V))
