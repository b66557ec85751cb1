"""Named gradients to run an optimizer on, from Gaussian to a real model's head."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as _v
from ..equalize import regular_simplex

__all__ = ["GradientCase", "gradient_cases", "simplex_worst_case"]


@dataclass(frozen=True)
class GradientCase:
    """A named gradient, made on first use.

    Attributes
    ----------
    name : str
        Short identifier, usable as a pytest id.
    source : str
        How the gradient is made (the call that makes it) and what it stands for.
    available : bool
        False when the case needs something that is not installed (the real
        model's weights); then ``G`` raises ``FileNotFoundError``.
    reason : str
        Why not available ("" when available).
    """

    name: str
    source: str
    make: Callable[[], np.ndarray] = field(repr=False)
    available: bool = True
    reason: str = ""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def G(self) -> np.ndarray:
        """The ``(V, d)`` float64 gradient, zero column sums (made once, then cached)."""
        if not self.available:
            raise FileNotFoundError(f"gradient case {self.name!r} is not available: {self.reason}")
        if "G" not in self._cache:
            G = np.asarray(self.make(), dtype=np.float64)
            G = G - G.mean(axis=0)
            G.setflags(write=False)
            self._cache["G"] = G
        return self._cache["G"]

    def __str__(self) -> str:
        return self.name


def simplex_worst_case(V: int, d: int, /) -> np.ndarray:
    """The RowNorm worst case: a centred regular ``k``-simplex plus zero rows (I16).

    ``k = min(d, V - 1)``; the ``k + 1`` simplex rows have unit norm and the
    projected RowNorm step attains exactly ``sqrt((k+1)/(2k))`` of the optimal
    decrease under the diameter (I16 is sharp here).

    Parameters
    ----------
    V : int
        Rows, ``>= 2``: the first ``k + 1`` are the simplex, the others zero.
    d : int
        Columns, ``>= 1``: the simplex lies in the first ``k``, the others
        are zero.

    Returns
    -------
    (V, d) float64 ndarray
        Zero column sums (to rounding).

    Examples
    --------
    >>> G = simplex_worst_case(4, 2)
    >>> G.round(6).tolist()[3], float(abs(G.sum(axis=0)).max()) < 1e-15
    ([0.0, 0.0], True)
    """
    V = _v.integer(V, "V", minimum=2)
    d = _v.integer(d, "d", minimum=1)
    k = min(d, V - 1)
    C = regular_simplex(k + 1, k)  # centred, in k coordinates
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    C -= C.mean(axis=0)
    out = np.zeros((V, d))
    out[: k + 1, :k] = C
    return out


def gradient_cases(V: int = 64, d: int = 8, /, *, seed: int = 0, real: bool = True,
                   real_rows: int | None = None) -> list[GradientCase]:
    """Named zero-sum gradients: the easy cases, the shapes users have, the worst case.

    ========================  ==========================================================================
    name                      gradient
    ========================  ==========================================================================
    ``gaussian``              i.i.d. standard normal, centred (the easy case)
    ``rank_one``              ``g h^T`` with ``1^T g = 0`` (closed form ``T = ||g||_1 ||h|| / 2``, I14)
    ``low_rank``              rank ``min(4, d)``, centred
    ``cross_entropy``         ``synthetic_head_gradient(V, d, zipf=1.1)``: Zipf targets, a few large
                              rows, a tail of tiny near-equal rows, rank about ``d``
    ``cross_entropy_sharp``   the same with logits of standard deviation 4 (confident predictions)
    ``simplex_worst_case``    :func:`simplex_worst_case`, where projected RowNorm is worst (I16)
    ``real_minilm``           ``real_head_gradient(rows=...)``: the masked-LM head gradient of
                              all-MiniLM-L6-v2 on real text (``d = 384``), its largest rows
    ========================  ==========================================================================

    Parameters
    ----------
    V, d : int
        Rows and columns of the synthetic cases (``V >= 3``, ``d >= 1``;
        default 64 and 8).
    seed : int
        Seed of every synthetic case, ``>= 0`` (default 0); the same seed
        gives the same gradients.  The real case passes it to
        :func:`hilbertgeom.gradients.real_head_gradient`.
    real : bool
        Include ``real_minilm`` (marked unavailable, with the reason, when the
        model's weights are not installed; see :func:`hilbertgeom.gradients.minilm_available`).
    real_rows : int, optional
        Rows kept of the real gradient (default ``V``): the largest ones,
        re-centred (:func:`hilbertgeom.gradients.top_rows`).

    Returns
    -------
    list of GradientCase
        Gradients are made on first access of ``case.G``.

    Examples
    --------
    >>> cases = gradient_cases(32, 4, real=False)
    >>> [c.name for c in cases][:3]
    ['gaussian', 'rank_one', 'low_rank']
    >>> cases[0].G.shape
    (32, 4)
    """
    V = _v.integer(V, "V", minimum=3)
    d = _v.integer(d, "d", minimum=1)
    seed = _v.integer(seed, "seed", minimum=0)
    rows = V if real_rows is None else _v.integer(real_rows, "real_rows", minimum=2)

    def gaussian():
        return np.random.default_rng(seed).standard_normal((V, d))

    def rank_one():
        rng = np.random.default_rng([seed, 1])
        g = rng.standard_normal(V)
        return np.outer(g - g.mean(), rng.standard_normal(d))

    def low_rank():
        rng = np.random.default_rng([seed, 2])
        k = min(4, d)
        return rng.standard_normal((V, k)) @ rng.standard_normal((k, d))

    def cross_entropy(scale):
        def make():
            from ..gradients import synthetic_head_gradient

            return synthetic_head_gradient(V, d, batch=max(64, 2 * V), zipf=1.1, seed=seed, logit_scale=scale).G
        return make

    def worst():
        return simplex_worst_case(V, d)

    batch = max(64, 2 * V)
    cases = [
        GradientCase("gaussian", f"standard normal ({V} x {d}, numpy default_rng({seed})), centred", gaussian),
        GradientCase("rank_one", "g h^T, g centred, g and h standard normal; T = ||g||_1 ||h||_2 / 2 (I14)",
                     rank_one),
        GradientCase("low_rank", f"rank {min(4, d)}: standard normal factors, centred", low_rank),
        GradientCase("cross_entropy",
                     f"synthetic_head_gradient({V}, {d}, batch={batch}, zipf=1.1, seed={seed}): softmax "
                     "cross-entropy head gradient, Zipf targets, tail of tiny near-equal rows", cross_entropy(1.0)),
        GradientCase("cross_entropy_sharp",
                     f"synthetic_head_gradient({V}, {d}, batch={batch}, zipf=1.1, seed={seed}, logit_scale=4.0): "
                     "confident predictions", cross_entropy(4.0)),
        GradientCase("simplex_worst_case", f"centred regular {min(d, V - 1)}-simplex plus zero rows (I16 sharp)",
                     worst),
    ]
    if real:
        from ..gradients import minilm_available

        ok, why = minilm_available()

        def real_minilm():
            from ..gradients import real_head_gradient

            return real_head_gradient(seed=seed, rows=rows).G

        cases.append(GradientCase(
            "real_minilm", f"real_head_gradient(seed={seed}, rows={rows}): all-MiniLM-L6-v2 masked-LM head "
            f"gradient on CPython's documentation, its {rows} largest rows, d = 384", real_minilm,
            available=ok, reason="" if ok else why))
    return cases
