"""tension/hubs.py: the weighted Laplacian of pairs that all touch a few hub rows.

References: the Laplacian built entry by entry in loops and solved densely
(``np.linalg.solve`` on the grounded rows), the pairs' distances from
``np.linalg.norm`` of each difference, and the minimal prefix of the rows by degree
found by trying every length."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import kernel_rtol

from hilbertgeom.tension import hubs as hb
from hilbertgeom.tension import refine as rf
from hilbertgeom.tension.hubs import Hubs


def hub_pairs(V, k, seed, hub_hub=3, isolated=0, tail_tail=0):
    """Pairs joining each tail row to one to three of ``k`` hubs, plus ``hub_hub`` pairs of
    hubs and ``tail_tail`` pairs of two tail rows (not isolated ones); the last ``isolated``
    rows only in pairs of weight 0.  Returns ``(I, J, w)``."""
    rng = np.random.default_rng(seed)
    I, J, w = [], [], []
    for t in range(k, V):
        for a in rng.choice(k, size=rng.integers(1, 4), replace=False):
            I.append(int(a))
            J.append(t)
            w.append(0.0 if t >= V - isolated else float(rng.uniform(0.1, 2.0)))
    for _ in range(hub_hub):
        a, b = rng.choice(k, size=2, replace=False)
        I.append(int(a))
        J.append(int(b))
        w.append(float(rng.uniform(0.1, 2.0)))
    for _ in range(tail_tail):
        a, b = rng.choice(np.arange(k, V - isolated), size=2, replace=False)
        I.append(int(a))
        J.append(int(b))
        w.append(float(rng.uniform(0.1, 2.0)))
    return np.array(I), np.array(J), np.array(w)


def dense_laplacian(I, J, w, V):
    L = np.zeros((V, V))
    for i, j, x in zip(I, J, w, strict=True):
        L[i, j] -= x
        L[j, i] -= x
        L[i, i] += x
        L[j, j] += x
    return L


def grounded_reference(L, X, ground):
    """The dense solve of the equations of the rows not in ``ground``, those rows at 0."""
    free = np.flatnonzero(~ground)
    Phi = np.zeros_like(X)
    Phi[free] = np.linalg.solve(L[np.ix_(free, free)], X[free])
    return Phi


def check_grounded_solve(hub, X, I, J, w):
    """The hub potential against the dense solve of the Laplacian built entry by entry (the
    first hub grounded), and ``apply`` against ``L @ Phi``: ``(Phi, L, ground)``."""
    V = X.shape[0]
    Phi = hub.potential(X, w)
    assert Phi is not None
    L = dense_laplacian(I, J, w, V)
    ground = np.zeros(V, bool)
    ground[hub.hubs[0]] = True
    ref = grounded_reference(L, X, ground)
    scale = float(np.abs(ref).max())
    assert np.abs(Phi - ref).max() <= np.linalg.cond(L[np.ix_(~ground, ~ground)]) * kernel_rtol(V) * scale
    assert np.abs(hub.apply(w, Phi) - L @ Phi).max() <= kernel_rtol(V) * float((np.abs(L) @ np.abs(Phi)).max())
    return Phi, L, ground


@pytest.mark.parametrize("tail_tail", [0, 9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hub_potential_is_the_grounded_dense_solve(seed, tail_tail, monkeypatch):
    """Connected pairs: the potential has the first hub at 0 and solves every other row's
    equation; it is the dense solve of those equations, and ``apply`` is ``L @ Phi``.  With
    pairs of two tail rows (and the dense hubs capped at the ``k`` true hubs) the rows that
    cover them are linked rows, eliminated with the hubs."""
    V, k, d = 70, 6, 4
    I, J, w = hub_pairs(V, k, seed, tail_tail=tail_tail)
    X = np.random.default_rng(10 + seed).standard_normal((V, d))
    X -= X.mean(axis=0)
    monkeypatch.setattr(hb, "_MAX_HUBS", k)
    hub = Hubs.of(I, J, V)
    assert hub is not None and hub.kd == k and hub.k > k if tail_tail else hub.k == k
    Phi, L, ground = check_grounded_solve(hub, X, I, J, w)
    assert np.array_equal(Phi[hub.hubs[0]], np.zeros(d))
    r = X - L @ Phi
    assert np.abs(r[~ground]).max() <= kernel_rtol(V * V) * float((np.abs(L) @ np.abs(Phi) + np.abs(X)).max())


def test_repeated_pairs_add_their_weights():
    """A pair given twice (once reversed) is one edge with the sum of the weights: the dense
    block adds them (it places each hub-tail pair at one entry), the potential is the grounded
    dense solve of the Laplacian built entry by entry, and each copy gets the pair's distance."""
    V, k, d = 50, 4, 3
    I, J, w = hub_pairs(V, k, seed=12)
    rep = np.arange(0, I.size, 5)
    I2, J2 = np.concatenate([I, J[rep]]), np.concatenate([J, I[rep]])
    w2 = np.concatenate([w, np.linspace(0.2, 1.5, rep.size)])
    X = np.random.default_rng(13).standard_normal((V, d))
    X -= X.mean(axis=0)
    hub = Hubs.of(I2, J2, V)
    assert hub is not None and hub.k == k
    Phi, _, _ = check_grounded_solve(hub, X, I2, J2, w2)
    sq = hub.sq_distances(Phi)
    want = np.array([np.linalg.norm(Phi[i] - Phi[j]) ** 2 for i, j in zip(I2, J2, strict=True)])
    assert np.abs(sq - want).max() <= kernel_rtol(d) / hb._RECHECK * float(np.abs(Phi).max()) ** 2


def test_hub_potential_grounds_each_component_and_isolated_rows():
    """Two separate hub clusters (each with its own tail) and three tail rows whose pairs all
    have weight 0: the first hub of each cluster (in degree order) and the isolated rows are
    at 0, every other row's equation holds, and the result is the grounded dense solve."""
    d = 3
    I1, J1, w1 = hub_pairs(30, 3, seed=4, hub_hub=1)
    I2, J2, w2 = hub_pairs(33, 3, seed=5, hub_hub=1, isolated=3)
    # the second block's rows shifted past the first's
    I = np.concatenate([I1, I2 + 30])
    J = np.concatenate([J1, J2 + 30])
    w = np.concatenate([w1, w2])
    V = 63
    X = np.random.default_rng(6).standard_normal((V, d))
    hub = Hubs.of(I, J, V)
    assert hub is not None and set(hub.hubs) == {0, 1, 2, 30, 31, 32}
    Phi = hub.potential(X, w)
    assert Phi is not None
    first = [next(h for h in hub.hubs if h < 30), next(h for h in hub.hubs if h >= 30)]
    ground = np.zeros(V, bool)
    ground[first] = True
    ground[60:] = True
    L = dense_laplacian(I, J, w, V)
    ref = grounded_reference(L, X, ground)
    assert np.array_equal(Phi[ground], np.zeros((ground.sum(), d)))
    assert np.abs(Phi - ref).max() <= np.linalg.cond(L[np.ix_(~ground, ~ground)]) * kernel_rtol(V) * float(
        np.abs(ref).max())


def test_hub_potential_is_none_where_the_schur_complement_is_not_positive_definite():
    """A hub-hub weight so negative that the grounded Laplacian, and so its Schur complement
    on the hubs, has a negative eigenvalue (checked densely): the potential is ``None`` (the
    caller's sparse LU takes over), not an exception and not a solve of an indefinite
    system.  The same pairs with that weight positive give the dense solve."""
    I, J, w = hub_pairs(40, 3, seed=8, hub_hub=1)
    V = 40
    X = np.random.default_rng(9).standard_normal((V, 2))
    hub = Hubs.of(I, J, V)
    assert hub is not None and hub.hh.size == 1
    w = w.copy()
    e = int(hub.hh[0])
    w[e] = -1e3
    ground = np.zeros(V, bool)
    ground[hub.hubs[0]] = True
    L = dense_laplacian(I, J, w, V)
    assert np.linalg.eigvalsh(L[np.ix_(~ground, ~ground)]).min() < 0  # not a tolerance: indefinite
    assert hub.potential(X, w) is None
    w[e] = 1.0
    Phi = hub.potential(X, w)
    assert Phi is not None
    L = dense_laplacian(I, J, w, V)
    ref = grounded_reference(L, X, ground)
    assert np.abs(Phi - ref).max() <= np.linalg.cond(L[np.ix_(~ground, ~ground)]) * kernel_rtol(V) * float(
        np.abs(ref).max())


def test_laplacian_potential_gives_one_flow_by_hubs_and_by_sparse_lu():
    """The refinement's solve by hubs and by sparse LU (grounding different rows) give the
    same pair differences on connected pairs, and so the same flow and cost."""
    V, k, d = 90, 7, 5
    I, J, w = hub_pairs(V, k, seed=7)
    X = np.random.default_rng(8).standard_normal((V, d))
    X -= X.mean(axis=0)
    P_hub = rf._laplacian_potential(X, I, J, w)
    P_lu = rf._laplacian_potential(X, I, J, w, hubs=False)
    D_hub, D_lu = P_hub[I] - P_hub[J], P_lu[I] - P_lu[J]
    cond = np.linalg.cond(dense_laplacian(I, J, w, V)[1:, 1:])
    assert np.abs(D_hub - D_lu).max() <= cond * kernel_rtol(V) * float(np.abs(D_lu).max())
    c_hub = rf._lean_flow(X, I, J, w, P_hub)[0]
    c_lu = rf._lean_flow(X, I, J, w, P_lu, hubs=False)[0]
    assert abs(c_hub - c_lu) <= cond * kernel_rtol(I.size * d) * c_lu


def test_sq_distances_against_each_difference_near_coincident_pairs_included():
    """The GEMM form ``|p|^2 + |q|^2 - 2 <p, q>`` loses the small distances of rows far from
    the centre; those are recomputed from the differences.  Two far clusters (at +-1e3),
    each tail row 1e-6 from its hub or at distance about 1: every squared distance to a few
    roundings of itself."""
    rng = np.random.default_rng(9)
    V, k, d = 200, 4, 6
    I, J, _ = hub_pairs(V, k, seed=9, hub_hub=2)
    hub = Hubs.of(I, J, V)
    assert hub is not None
    Phi = rng.standard_normal((V, d))
    Phi[hub.hubs[:2]] += 1e3
    Phi[hub.hubs[2:]] -= 1e3
    for t in range(k, V):
        a = I[np.flatnonzero(J == t)[0]]  # the first hub of row t
        Phi[t] = Phi[a] + (1e-6 if t % 2 else 1.0) * rng.standard_normal(d) / np.sqrt(d)
    sq = hub.sq_distances(Phi)
    ref = np.array([np.linalg.norm(Phi[i] - Phi[j]) ** 2 for i, j in zip(I, J, strict=True)])
    assert np.any(ref < 1e-10)  # not a tolerance: the near-coincident pairs exist
    # each difference is exact up to one rounding of its terms (of size 1e3): the relative
    # error of its square stays within a few roundings times 1e3 / |difference| for the close
    # pairs, the recomputed ones; the far pairs' GEMM form is within the recheck's bound
    err = np.abs(sq - ref) / ref
    close = ref < hb._RECHECK
    assert err[close].max() <= kernel_rtol(d) * 1e3 / np.sqrt(ref[close].min())
    assert err[~close].max() <= kernel_rtol(d) / hb._RECHECK * 8.0


def test_hubs_are_the_shortest_prefix_by_degree_or_none():
    """``Hubs.of`` takes the shortest prefix of the rows in degree order (ties by index) that
    touches every pair, found here by trying each length; pairs with no short prefix (a
    path) give ``None``."""
    V = 40
    I, J, _ = hub_pairs(V, 5, seed=11, hub_hub=4)
    hub = Hubs.of(I, J, V)
    deg = np.bincount(I, minlength=V) + np.bincount(J, minlength=V)
    order = sorted(range(V), key=lambda r: (-deg[r], r))
    k = next(k for k in range(1, V + 1) if all(i in order[:k] or j in order[:k] for i, j in zip(I, J, strict=True)))
    assert hub is not None and hub.k == k and list(hub.hubs) == order[:k]
    assert hub.kd == hub.k  # no pair left for linked rows


def test_linked_rows_cover_the_pairs_no_hub_touches(monkeypatch):
    """A path has no short prefix by degree: its first ``_MAX_HUBS`` rows in degree order are
    dense hubs, and linked rows cover the pairs left, so the tail is an independent set (no
    pair joins two tail rows).  Beyond ``_MAX_LINKED`` linked rows: ``None``."""
    n = 2 * hb._MAX_HUBS + 4
    path = np.arange(n - 1)
    hub = Hubs.of(path, path + 1, n)
    assert hub is not None and hub.kd == hb._MAX_HUBS and hub.k > hub.kd
    tail = np.zeros(n, bool)
    tail[hub.tail] = True
    assert not np.any(tail[path] & tail[path + 1])
    assert sorted(np.concatenate([hub.hubs, hub.tail]).tolist()) == list(range(n))
    monkeypatch.setattr(hb, "_MAX_LINKED", hub.k - hub.kd - 1)
    assert Hubs.of(path, path + 1, n) is None


def test_linked_rows_ground_a_component_without_dense_hubs(monkeypatch):
    """A hub cluster and, apart from it, a path of five tail rows that no hub touches: the
    path's linked rows form a component of their own, whose first linked row is at 0; the
    potential is the grounded dense solve and the squared distances are each difference's."""
    d = 3
    I1, J1, w1 = hub_pairs(30, 3, seed=12, hub_hub=1, tail_tail=4)
    path = np.arange(30, 34)
    I = np.concatenate([I1, path])
    J = np.concatenate([J1, path + 1])
    w = np.concatenate([w1, np.random.default_rng(13).uniform(0.5, 1.5, path.size)])
    V = 35
    monkeypatch.setattr(hb, "_MAX_HUBS", 3)
    hub = Hubs.of(I, J, V)
    assert hub is not None and hub.kd == 3 and set(hub.hubs[:3]) == {0, 1, 2}
    X = np.random.default_rng(14).standard_normal((V, d))
    Phi = hub.potential(X, w)
    assert Phi is not None
    ground = np.zeros(V, bool)
    ground[hub.hubs[0]] = True
    ground[next(h for h in hub.hubs if h >= 30)] = True
    L = dense_laplacian(I, J, w, V)
    ref = grounded_reference(L, X, ground)
    assert np.array_equal(Phi[ground], np.zeros((2, d)))
    assert np.abs(Phi - ref).max() <= np.linalg.cond(L[np.ix_(~ground, ~ground)]) * kernel_rtol(V) * float(
        np.abs(ref).max())
    assert np.abs(hub.apply(w, Phi) - L @ Phi).max() <= kernel_rtol(V) * float((np.abs(L) @ np.abs(Phi)).max())
    sq = hub.sq_distances(Phi)
    want = np.array([np.sum((Phi[i] - Phi[j]) ** 2) for i, j in zip(I, J, strict=True)])
    assert np.abs(sq - want).max() <= kernel_rtol(d) / hb._RECHECK * float(np.abs(Phi).max()) ** 2


@pytest.mark.parametrize("tail_tail", [0, 9])
def test_pair_products_against_each_pair_of_differences(tail_tail, monkeypatch):
    """``<p_i - p_j, q_i - q_j>`` for every pair (hub-tail pairs by the GEMM form, hub-hub and
    linked-tail pairs from the differences) against ``np.dot`` of each pair's two differences,
    within ``4 (d + 2) u (|a_i| + |a_j|) (|b_i| + |b_j|)`` of the centred rows (the bound the
    method states), on rows shifted by +-10 from the origin (uncentred, the GEMM form's terms
    would be 25 times larger); and the excess per row of :func:`_lean_flow` by hubs against that by the
    differences (``hubs=False``), within the same bound summed over each row's pairs.  With
    ``tail_tail`` pairs of two tail rows, those are covered by linked rows (``_MAX_HUBS = k``)."""
    rng = np.random.default_rng(11)
    V, k, d = 150, 6, 7
    I, J, w = hub_pairs(V, k, seed=11, tail_tail=tail_tail)
    monkeypatch.setattr(hb, "_MAX_HUBS", k)  # the pairs of two tail rows go to linked rows
    hub = Hubs.of(I, J, V)
    assert hub is not None and (hub.k > hub.kd) == (tail_tail > 0)
    P = rng.standard_normal((V, d)) + 10.0
    Q = rng.standard_normal((V, d)) - 10.0
    got = hub.pair_products(P, Q)
    ref = np.array([np.dot(P[i] - P[j], Q[i] - Q[j]) for i, j in zip(I, J, strict=True)])
    A, B = P - P.mean(axis=0), Q - Q.mean(axis=0)
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    bound = kernel_rtol(d) * (na[I] + na[J]) * (nb[I] + nb[J])
    assert np.all(np.abs(got - ref) <= bound)
    assert np.median(np.abs(ref)) > 100 * bound.max()  # not a tolerance: the bound is far below the products
    X = rng.standard_normal((V, d))
    X -= X.mean(axis=0)
    Phi = rf._laplacian_potential(X, I, J, w, hub)
    Pn = rng.standard_normal((V, d)) * 0.3
    _, ex_hub = rf._lean_flow(X, I, J, w, Phi, Pn, hubs=hub)
    _, ex_dif = rf._lean_flow(X, I, J, w, Phi, Pn, hubs=False)
    A, B = Phi - Phi.mean(axis=0), Pn - Pn.mean(axis=0)
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    per_pair = w * kernel_rtol(d) * ((na[I] + na[J]) * (nb[I] + nb[J]) + (na[I] + na[J]) ** 2)
    row_bound = np.bincount(I, per_pair, V) + np.bincount(J, per_pair, V)
    L = dense_laplacian(I, J, w, V)  # each path forms its own residual X - L Phi: within this of each other
    resid = kernel_rtol(V) * (np.linalg.norm(X, axis=1) + np.linalg.norm(np.abs(L) @ np.abs(Phi), axis=1))
    assert np.all(np.abs(ex_hub - ex_dif) <= row_bound + 2 * resid)


def test_block_order_puts_the_dense_pairs_first_in_their_places():
    """``block_order``: a permutation of the pairs after which the dense-hub-tail pairs come
    first, their places in the block increasing, and the others (hub-hub) after them; ``None``
    once the pairs are in that order.  The hubs and the distances are those of the pairs in any
    order (each pair's own)."""
    rng = np.random.default_rng(4)
    V, k, d = 60, 4, 3
    I, J, w = hub_pairs(V, k, seed=4, hub_hub=3)
    shuffle = rng.permutation(I.size)
    I, J, w = I[shuffle], J[shuffle], w[shuffle]
    hub = Hubs.of(I, J, V)
    perm = hub.block_order()
    assert perm is not None and np.array_equal(np.sort(perm), np.arange(I.size))
    ordered = Hubs.of(I[perm], J[perm], V)
    assert np.array_equal(ordered.hubs, hub.hubs) and ordered.block_order() is None
    assert np.array_equal(ordered.ht, np.arange(ordered.ht.size))  # the dense pairs first
    assert np.all(np.diff(ordered.flat) > 0)
    Phi = rng.standard_normal((V, d))
    np.testing.assert_array_equal(ordered.sq_distances(Phi), hub.sq_distances(Phi)[perm])


def test_solve_in_parts_is_the_potential(monkeypatch):
    """``solve`` from the hub and tail rows of ``X`` gives the potential's hub and tail rows
    (the same numbers: ``potential`` assembles them), and ``sq_of_parts`` on them the squared
    distances of the assembled potential, each against its own pair's difference."""
    rng = np.random.default_rng(5)
    V, k, d = 80, 5, 4
    I, J, w = hub_pairs(V, k, seed=5, hub_hub=2, tail_tail=3)
    monkeypatch.setattr(hb, "_MAX_HUBS", k)  # the tail-tail pairs go to linked rows
    hub = Hubs.of(I, J, V)
    assert hub.k > hub.kd  # linked rows too
    X = rng.standard_normal((V, d))
    X -= X.mean(axis=0)
    PH, PT = hub.solve(X[hub.hubs], X[hub.tail], w)
    Phi = hub.potential(X, w)
    np.testing.assert_array_equal(Phi[hub.hubs], PH)
    np.testing.assert_array_equal(Phi[hub.tail], PT)
    sq = hub.sq_of_parts(PH, PT)
    ref = np.array([np.linalg.norm(Phi[i] - Phi[j]) ** 2 for i, j in zip(I, J, strict=True)])
    np.testing.assert_allclose(sq, ref, rtol=kernel_rtol(d) / hb._RECHECK * 8.0, atol=0)


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("ordered", [False, True])
def test_work_arrays_give_the_same_numbers_call_after_call(ordered, linked, monkeypatch):
    """``solve`` and ``sq_of_parts`` with one ``work`` dict kept over calls (and ``out`` for the
    tail rows) give, for a second set of weights, the same numbers bit for bit as without them:
    nothing of the first call's weights is left in the reused arrays (each tail row here has one
    to three of the hubs, so most of the dense block is empty), in the dense block's order
    (``prefix``) and out of it, with linked rows and without."""
    rng = np.random.default_rng(7)
    V, k, d = 90, 6, 5
    I, J, w1 = hub_pairs(V, k, seed=7, hub_hub=3, tail_tail=4 if linked else 0)
    if linked:
        monkeypatch.setattr(hb, "_MAX_HUBS", k)
    hub = Hubs.of(I, J, V)
    assert (hub.k > hub.kd) == linked
    # in the dense block's order, or shuffled (the dense-hub-tail pairs not first: no prefix)
    perm = hub.block_order() if ordered else rng.permutation(I.size)
    I, J, w1 = I[perm], J[perm], w1[perm]
    hub = Hubs(I, J, V, hub.hubs, hub.kd)
    assert hub.prefix == ordered
    w2 = w1 * rng.uniform(0.5, 2.0, w1.size)
    X = rng.standard_normal((V, d))
    X -= X.mean(axis=0)
    XH, XT = X[hub.hubs], X[hub.tail]
    work: dict = {}
    out = np.full_like(XT, np.nan)
    first = hub.solve(XH, XT, w1, work=work, out=out)
    hub.sq_of_parts(*first, work=work)
    assert work and first[1] is out
    PH, PT = hub.solve(XH, XT, w2, work=work, out=out)
    sq = hub.sq_of_parts(PH, PT, work=work)
    RH, RT = hub.solve(XH, XT, w2)
    np.testing.assert_array_equal(PH, RH)
    np.testing.assert_array_equal(PT, RT)
    np.testing.assert_array_equal(sq, hub.sq_of_parts(RH, RT))


def test_descent_returns_the_potential_of_its_weights(monkeypatch):
    """``_descend_weights`` on pairs with hubs keeps the cheapest evaluation's weights and tail
    potential in arrays that later evaluations do not write (two of each, taken in turn): after
    the descent one more evaluation, at its (costlier) start, writes its arrays, and still the
    potential returned is the hub solve of the weights returned, bit for bit, and its cost that
    flow's."""
    rng = np.random.default_rng(3)
    V, k, d = 120, 6, 5
    I, J, w = hub_pairs(V, k, seed=3, hub_hub=4)
    X = rng.standard_normal((V, d))
    X -= X.mean(axis=0)
    real = rf.projected_lbfgs
    seen = []

    def and_once_more(fg, x0, *a, **kw):
        start = np.array(x0, copy=True)
        try:
            return real(fg, x0, *a, **kw)
        finally:
            try:
                seen.append(fg(start)[0])  # F at the start: not the cheapest flow
            except rf._DescentStopError:
                seen.append(None)

    monkeypatch.setattr(rf, "projected_lbfgs", and_once_more)
    cost, wb, Phi = rf._descend_weights(X, I, J, w, 1e-12, np.inf, evals=40, stall=0.0)
    assert len(seen) == 1
    hub = Hubs.of(I, J, V)
    np.testing.assert_array_equal(Phi, hub.potential(X, wb))
    assert cost == rf._lean_flow(X, I, J, wb, Phi, hubs=hub)[0]
