"""Other update geometries (I18) and ground truth for fast optimizers.

Each update rule below is the steepest-descent direction of some norm:

==========================  ==========================================  =====================================
rule                        norm it is steepest for                     used by
==========================  ==========================================  =====================================
``steepest_descent``        row diameter ``D`` (hidden ``l_2`` ball)     this library (exact, certified)
``linf_steepest_descent``   row-``l_inf`` diameter (hidden ``l_1``)       centred column-wise sign descent
``projected_rownorm``       covering radius (I15)                       the paper's cheap rule
``rownorm_update``          max row norm ``max_i ||s_i||``               Scion (RowNorm head)
``sign_update``             max entry ``max_ij |s_ij|``                  Scion (Sign head), signSGD
``polar_update``            spectral norm                               Muon
==========================  ==========================================  =====================================

:func:`evaluate_update` measures any update against the exact oracle, and
:func:`bench_updates` runs a registry of rules over a suite of gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import _validate as _v
from .rows import closest_pair, row_diameter
from .tension import TensionResult, min_tension, projected_rownorm, rownorm, steepest_descent

__all__ = [
    "UpdateReport",
    "bench_updates",
    "evaluate_update",
    "gradient_suite",
    "linf_steepest_descent",
    "polar_update",
    "rownorm_update",
    "sign_update",
    "update_rules",
]


def linf_steepest_descent(G, /, *, eta=1.0, center=False):
    r"""Steepest descent under the row-``l_inf`` diameter (hidden-state ``l_1`` ball).

    ``D_inf(S) = max_k (max_i s_ik - min_i s_ik)`` separates by columns, and in
    each column the problem is the ``d = 1`` case: ``S = -(eta/2) P sign(G)``,
    with decrease ``(eta/2) sum_ik |g_ik|`` (identity I18).

    Examples
    --------
    >>> linf_steepest_descent([[2.0, -1.0], [-2.0, 1.0]])
    array([[-0.5,  0.5],
           [ 0.5, -0.5]])
    """
    X, _ = _v.zero_sum_matrix(G, center)
    e = _v.scalar(eta, "eta", minimum=0.0)
    Sg = np.sign(X)
    return -(e / 2.0) * (Sg - Sg.mean(axis=0)) + 0.0


def rownorm_update(G, /, *, eta=1.0):
    r"""RowNorm ``-eta RN(G)``: steepest under ``max_i ||s_i||_2`` (Scion's head rule).

    Examples
    --------
    >>> rownorm_update([[3.0, 4.0], [-3.0, -4.0]])
    array([[-0.6, -0.8],
           [ 0.6,  0.8]])
    """
    e = _v.scalar(eta, "eta", minimum=0.0)
    return -e * rownorm(G) + 0.0


def sign_update(G, /, *, eta=1.0):
    r"""Sign descent ``-eta sign(G)``: steepest under ``max_ij |s_ij|``.

    Examples
    --------
    >>> sign_update([[3.0, -4.0], [-3.0, 0.0]])
    array([[-1.,  1.],
           [ 1.,  0.]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eta, "eta", minimum=0.0)
    return -e * np.sign(X) + 0.0


def polar_update(G, /, *, eta=1.0):
    r"""Polar factor ``-eta U V^T`` of ``G = U Sigma V^T``: steepest under the
    spectral norm (Muon's update, computed exactly by SVD; zero singular
    values are dropped).

    Examples
    --------
    >>> polar_update([[2.0, 0.0], [0.0, -3.0]])
    array([[-1.,  0.],
           [ 0.,  1.]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eta, "eta", minimum=0.0)
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    keep = s > (s[0] if s.size else 0.0) * max(X.shape) * np.finfo(float).eps
    return -e * (U[:, keep] @ Vt[keep]) + 0.0


@dataclass(frozen=True)
class UpdateReport:
    """An update measured against the exact steepest-descent oracle.

    Attributes
    ----------
    diameter : float
        ``D(S)`` (exact).
    decrease : float
        ``-<G, S>``.
    decrease_ratio : float
        ``-<G, S> / (D(S) T(G))``: 1 for the exact steepest direction, at least
        ``sqrt((k+1)/(2k))`` for projected RowNorm; scale-free.
    decrease_ratio_bounds : (float, float)
        The ratio with ``T(G)`` replaced by the certified upper and lower
        bounds of the solve (the true ratio lies between them).
    column_sum : float
        ``max_k |1^T S|_k / max(1, sum |S|)``: 0 for a centred update (the
        head's softmax does not see the common shift, so ``D`` ignores it too).
    min_separation, max_separation : float
        Smallest and largest row distance (exact); the max is ``D(S)``.
    separation_ratio : float
        ``min / max`` (1 only for an equidistant set, impossible once V > d+1).
    tension : float
        ``T(G)`` used (certified lower bound of the solve).
    """

    diameter: float
    decrease: float
    decrease_ratio: float
    decrease_ratio_bounds: tuple[float, float]
    column_sum: float
    min_separation: float
    max_separation: float
    separation_ratio: float
    tension: float


def evaluate_update(G, S, /, *, tension=None, center=False):
    r"""Measure an update ``S`` for the gradient ``G`` against the exact oracle.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``); NumPy or any CPU
        array exporting DLPack (e.g. a torch CPU tensor).
    S : (V, d) array_like
        The update to judge.
    tension : TensionResult, optional
        A solve of ``min_tension(G)`` to reuse (computed if omitted).

    Returns
    -------
    UpdateReport

    Examples
    --------
    >>> G = [[1.0, 0.0], [-1.0, 0.0]]
    >>> r = evaluate_update(G, [[-0.5, 0.0], [0.5, 0.0]])
    >>> round(r.decrease_ratio, 9), r.separation_ratio
    (1.0, 1.0)
    """
    X, _ = _v.zero_sum_matrix(G, center)
    U = _v.matrix(S, "S")
    if U.shape != X.shape:
        raise ValueError(f"S must have the shape of G {X.shape}; got {U.shape}")
    if tension is None:
        tension = min_tension(X)
    elif not isinstance(tension, TensionResult):
        raise TypeError("tension must be a TensionResult from min_tension(G)")
    D = row_diameter(U)
    dec = -float(np.sum(X * U))
    T, Tu = tension.value, tension.flow.cost
    if D > 0 and T > 0:
        ratio = dec / (D * T)
        bounds = (dec / (D * Tu), ratio)
    else:
        ratio = 0.0 if dec == 0 else math.copysign(math.inf, dec)
        bounds = (ratio, ratio)
    lo = closest_pair(U).distance
    colsum = float(np.abs(U.sum(axis=0)).max()) / max(1.0, float(np.abs(U).sum()))
    return UpdateReport(diameter=D, decrease=dec, decrease_ratio=ratio, decrease_ratio_bounds=bounds,
                        column_sum=colsum, min_separation=lo, max_separation=D,
                        separation_ratio=(lo / D) if D > 0 else 1.0, tension=T)


def update_rules() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The registry used by :func:`bench_updates`: name -> ``G -> S`` (unit step).

    Examples
    --------
    >>> sorted(update_rules())[:3]
    ['RowNorm', 'Sign', 'exact (D steepest)']
    """
    return {
        "exact (D steepest)": lambda G: steepest_descent(G, eta=1.0),
        "projected RowNorm": lambda G: projected_rownorm(G, eta=1.0),
        "RowNorm": rownorm_update,
        "Sign": sign_update,
        "polar (Muon)": polar_update,
        "l_inf-diameter sign": linf_steepest_descent,
    }


def gradient_suite(V: int = 64, d: int = 8, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Zero-sum gradient cases for :func:`bench_updates`.

    Gaussian; rank one; rank four; the softmax cross-entropy gradient
    ``(softmax(Z) - Y)^T H / B`` of a random head on ``B = 4V`` random hidden
    states with targets drawn from a Zipf(1.1) law over the vocabulary; and the
    RowNorm worst case (a centred regular simplex plus zero rows, I16).

    Parameters
    ----------
    V, d : int
        Vocabulary and hidden size (``V >= 3``).
    seed : int

    Returns
    -------
    dict name -> (V, d) ndarray
    """
    V = _v.integer(V, "V", minimum=3)
    d = _v.integer(d, "d", minimum=1)
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((V, d))
    cases = {"gaussian": G - G.mean(axis=0)}
    g = rng.standard_normal(V)
    cases["rank one"] = np.outer(g - g.mean(), rng.standard_normal(d))
    k = min(4, d, V - 1)
    L = rng.standard_normal((V, k)) @ rng.standard_normal((k, d))
    cases["low rank (4)"] = L - L.mean(axis=0)
    # softmax cross-entropy: G = (softmax(Z) - Y)^T H, targets ~ Zipf(1.1) over the vocabulary
    B = 4 * V
    H = rng.standard_normal((B, d))
    U = rng.standard_normal((V, d)) / math.sqrt(d)
    Z = H @ U.T
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    ranks = np.arange(1, V + 1)
    w = ranks ** -1.1
    targets = rng.choice(V, size=B, p=w / w.sum())
    Y = np.zeros((B, V))
    Y[np.arange(B), targets] = 1.0
    CE = (P - Y).T @ H / B
    cases["cross-entropy (Zipf)"] = CE - CE.mean(axis=0)  # zero column sums exactly, not just to rounding
    kk = min(d, V - 1)
    E = np.eye(kk + 1) - 1.0 / (kk + 1)
    Us, _, _ = np.linalg.svd(E)
    simplex = np.zeros((V, d))
    simplex[: kk + 1, :kk] = E @ Us[:, :kk]
    cases["simplex worst case"] = simplex
    return cases


def bench_updates(*, rules=None, cases=None, V=64, d=8, seed=0, tol=1e-9):
    """Run update rules over gradient cases; one :class:`UpdateReport` per pair.

    Parameters
    ----------
    rules : dict name -> callable, optional
        ``G -> S`` rules; defaults to :func:`update_rules`.  User callables may
        return NumPy arrays or CPU DLPack arrays (torch tensors).
    cases : dict name -> (V, d) array, optional
        Zero-sum gradients; defaults to :func:`gradient_suite` ``(V, d, seed)``.

    Returns
    -------
    list of (case, rule, UpdateReport)
    """
    rules = update_rules() if rules is None else dict(rules)
    cases = gradient_suite(V, d, seed=seed) if cases is None else dict(cases)
    out = []
    for cname, G in cases.items():
        Gn = _v.matrix(G, f"cases[{cname!r}]")
        ten = min_tension(Gn, tol=tol)
        for rname, rule in rules.items():
            if not callable(rule):
                raise TypeError(f"rule {rname!r} is not callable")
            S = _v.to_numpy(rule(Gn), f"rule {rname!r} output")
            out.append((cname, rname, evaluate_update(Gn, S, tension=ten)))
    return out
