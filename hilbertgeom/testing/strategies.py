"""Hypothesis strategies for zero-sum head gradients.

Property-test an optimizer on the gradients it will meet::

    from hypothesis import given
    from hilbertgeom.testing import assert_steepest
    from hilbertgeom.testing.strategies import zero_sum_gradients

    @given(zero_sum_gradients(64, 8))
    def test_my_rownorm(G):
        assert_steepest(my_rownorm(G), G, norm="max_row")

Every strategy draws float64 ``(V, d)`` arrays whose columns sum to zero up
to the rounding of the centring (``|1^T G|_k <= 4 (V + 2) u sum_i |g_ik|``),
as the softmax cross-entropy gradient of the head has them.  The kinds:

====================  ==============================================================================
kind                  what is drawn
====================  ==============================================================================
``gaussian``          i.i.d. standard normal rows, centred (the easy case)
``rank_one``          ``g h^T``, ``1^T g = 0`` (``T = ||g||_1 ||h|| / 2`` in closed form, I14)
``low_rank``          rank ``r`` drawn in ``[1, min(d, V - 1)]``: product of standard normal factors
``cross_entropy``     :func:`hilbertgeom.gradients.synthetic_head_gradient`: Zipf targets, a batch
                      smaller than ``V`` (most rows are not targets), logit scale from ``1e-3`` to ``4``
``near_duplicate``    the shape of real head gradients: a cross-entropy block of a few large rows,
                      and a tail (at least half the rows) of tiny rows equal up to a relative
                      ``1e-12 .. 1e-4``
``rownorm_worst``     centred regular ``k``-simplex plus zero rows, ``k = min(d, V - 1)``, randomly
                      rotated: projected RowNorm reaches only ``sqrt((k+1)/(2k))`` of the optimum (I16)
====================  ==============================================================================

Each gradient is multiplied by a power of two drawn from ``2^-40 .. 2^8``
(exact: the column sums stay what they were), since real head gradients are
small.

This module imports Hypothesis (the ``test`` extra); :mod:`hilbertgeom.testing`
does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st

from .. import _validate as _v
from ._cases import simplex_worst_case

if TYPE_CHECKING:
    from ..gradients import HeadGradient

__all__ = ["KINDS", "head_gradients", "zero_sum_gradients"]

KINDS: tuple[str, ...] = ("gaussian", "rank_one", "low_rank", "cross_entropy", "near_duplicate", "rownorm_worst")


def _size(x, name: str, minimum: int):
    """An int (validated) or a strategy of ints, as a strategy."""
    if isinstance(x, st.SearchStrategy):
        return x.filter(lambda n: n >= minimum)
    return st.just(_v.integer(x, name, minimum=minimum))


_HEAD_V = st.integers(8, 48)
_HEAD_D = st.integers(1, 8)
_V = st.integers(3, 48)
_D = st.integers(1, 8)


def _seed():
    return st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def head_gradients(draw: st.DrawFn, V: int | st.SearchStrategy[int] = _HEAD_V,
                   d: int | st.SearchStrategy[int] = _HEAD_D) -> HeadGradient:
    """Draw a :class:`~hilbertgeom.gradients.HeadGradient` from :func:`~hilbertgeom.gradients.synthetic_head_gradient`.

    The batch is at most ``max(1, V // 2)`` positions, so most rows are not
    targets (tiny positive mixtures of hidden states); targets follow a Zipf
    law with exponent in ``[1.0, 1.6]``; the logit scale is log-uniform in
    ``[1e-3, 4]`` (small: near-uniform predictions, large: confident ones).

    Parameters
    ----------
    V, d : int or strategy of int
        Rows (``>= 2``) and columns (``>= 1``); default ``8..48`` and ``1..8``.
        Drawn sizes below the minimum are filtered out.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of HeadGradient
        (``draw`` is supplied by Hypothesis: call ``head_gradients(V, d)``.)
    """
    from ..gradients import synthetic_head_gradient

    Vn = draw(_size(V, "V", 2))
    dn = draw(_size(d, "d", 1))
    batch = draw(st.integers(1, max(1, Vn // 2)))
    zipf = draw(st.floats(1.0, 1.6))
    logit_scale = 10.0 ** draw(st.floats(-3.0, np.log10(4.0)))
    seed = draw(_seed())
    return synthetic_head_gradient(Vn, dn, batch=batch, zipf=zipf, seed=seed, logit_scale=logit_scale)


def _gaussian(rng, V, d, draw):
    return rng.standard_normal((V, d))


def _rank_one(rng, V, d, draw):
    g = rng.standard_normal(V)
    return np.outer(g - g.mean(), rng.standard_normal(d))


def _low_rank(rng, V, d, draw):
    r = draw(st.integers(1, max(1, min(d, V - 1))))
    return rng.standard_normal((V, r)) @ rng.standard_normal((r, d))


def _cross_entropy(rng, V, d, draw):
    return draw(head_gradients(V, d)).G


def _near_duplicate(rng, V, d, draw):
    n_head = draw(st.integers(2, max(2, V // 2)))
    head = draw(head_gradients(n_head, d)).G
    top = float(np.linalg.norm(head, axis=1).max())
    size = 10.0 ** -draw(st.integers(3, 8))  # the tail row's norm, relative to the largest row
    spread = 10.0 ** -draw(st.integers(4, 12))  # how far tail rows differ, relative to their norm
    t = rng.standard_normal(d)
    t *= size * top / np.linalg.norm(t)
    tail = t + spread * size * top / np.sqrt(d) * rng.standard_normal((V - n_head, d))
    G = np.empty((V, d))
    order = rng.permutation(V)
    # the head rows carry the tail's total with the opposite sign (as the target rows of a
    # cross-entropy gradient carry -sum of the others), so the tail keeps its vector t
    G[order[:n_head]] = head - (V - n_head) / n_head * t
    G[order[n_head:]] = tail
    return G


def _rownorm_worst(rng, V, d, draw):
    S = simplex_worst_case(V, d)
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    Q *= np.sign(np.diag(R))  # a Haar-distributed rotation
    return S[rng.permutation(V)] @ Q


_MAKERS = {"gaussian": _gaussian, "rank_one": _rank_one, "low_rank": _low_rank, "cross_entropy": _cross_entropy,
           "near_duplicate": _near_duplicate, "rownorm_worst": _rownorm_worst}


def zero_sum_gradients(V: int | st.SearchStrategy[int] = _V, d: int | st.SearchStrategy[int] = _D, *,
                       kind: str | Sequence[str] | None = None,
                       scale: bool = True) -> st.SearchStrategy[np.ndarray]:
    """A strategy of float64 ``(V, d)`` gradients with zero column sums.

    Parameters
    ----------
    V, d : int or strategy of int
        Rows (``>= 3``) and columns (``>= 1``); default ``3..48`` and ``1..8``.
    kind : str or sequence of str, optional
        One of :data:`KINDS` or several; default all of them.
    scale : bool
        Multiply by a power of two drawn from ``2^-40 .. 2^8`` (exact).

    Returns
    -------
    hypothesis.strategies.SearchStrategy of (V, d) float64 ndarray

    Examples
    --------
    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None)
    ... @given(zero_sum_gradients(12, 3, kind="rank_one"))
    ... def check(G):
    ...     assert np.linalg.matrix_rank(G) == 1
    >>> check()
    """
    if kind is None:
        kinds = KINDS
    else:
        kinds = (kind,) if isinstance(kind, str) else tuple(kind)
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise ValueError(f"kind must be one of {KINDS} (or a sequence of them); got {kind!r}")
    if not isinstance(scale, bool):
        raise TypeError(f"scale must be a bool; got {type(scale).__name__}")
    Vs = _size(V, "V", 3)
    ds = _size(d, "d", 1)

    @st.composite
    def draw_one(draw):
        k = draw(st.sampled_from(kinds))
        Vn, dn = draw(Vs), draw(ds)
        rng = np.random.default_rng(draw(_seed()))
        G = np.asarray(_MAKERS[k](rng, Vn, dn, draw), dtype=np.float64)
        G = G - G.mean(axis=0)
        if scale:
            G = G * 2.0 ** draw(st.integers(-40, 8))
        return G

    return draw_one()
