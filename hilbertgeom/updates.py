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

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import array_api_compat
import numpy as np
from numpy.typing import ArrayLike

from . import _fp
from . import _validate as _v
from .equalize import regular_simplex
from .exceptions import SolverError
from .rows import Search, _extreme_pair
from .tension import (
    TensionResult,
    min_tension,
    projected_rownorm,
    rownorm,
    steepest_descent,
)

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


def linf_steepest_descent(G: ArrayLike, /, *, eta: float = 1.0, center: bool = False) -> np.ndarray:
    r"""Steepest descent under the row-``l_inf`` diameter (hidden-state ``l_1`` ball).

    ``D_inf(S) = max_k (max_i s_ik - min_i s_ik)`` separates by columns, and in
    each column the problem is the ``d = 1`` case: ``S = -(eta/2) P sign(G)``,
    with decrease ``(eta/2) sum_ik |g_ik|`` (identity I18).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, ``V >= 2``, with zero column sums (or ``center=True``).
    eta : float
        Step size ``>= 0``: the ``l_inf`` diameter of the update (default 1).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums (default False).  Only the signs of the centred
        ``G`` enter the update.

    Returns
    -------
    (V, d) float64 ndarray
        ``-(eta/2) P sign(P G)``: centred, each column's range at most ``eta``.

    Raises
    ------
    ValueError
        Non-zero column sums (without ``center``), non-finite or malformed
        ``G``, ``V < 2``, ``eta < 0``.

    Examples
    --------
    >>> linf_steepest_descent([[2.0, -1.0], [-2.0, 1.0]])
    array([[-0.5,  0.5],
           [ 0.5, -0.5]])
    """
    # sign(P G) is scale-free: centred at unit size (an exact power of two), where no column
    # sum overflows and no mean rounds in the subnormal range
    _, X, _, _ = _fp.zero_sum_at_unit(_v.matrix(G, "G", min_rows=2), center)
    e = _v.scalar(eta, "eta", minimum=0.0)
    Sg = np.sign(X)
    return -(e / 2.0) * (Sg - Sg.mean(axis=0)) + 0.0


def rownorm_update(G: ArrayLike, /, *, eta: float = 1.0) -> np.ndarray:
    r"""RowNorm ``-eta RN(G)``: steepest under ``max_i ||s_i||_2`` (Scion's head rule).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, any finite real matrix (no zero-sum condition: the norm is
        not blind to a common row shift).  Zero rows stay zero.
    eta : float
        Step size ``>= 0``: the largest row norm of the update (default 1).

    Returns
    -------
    (V, d) float64 ndarray
        ``-eta g_i / ||g_i||`` for every non-zero row.

    Examples
    --------
    >>> rownorm_update([[3.0, 4.0], [-3.0, -4.0]])
    array([[-0.6, -0.8],
           [ 0.6,  0.8]])
    """
    e = _v.scalar(eta, "eta", minimum=0.0)
    return -e * rownorm(G) + 0.0


def sign_update(G: ArrayLike, /, *, eta: float = 1.0) -> np.ndarray:
    r"""Sign descent ``-eta sign(G)``: steepest under ``max_ij |s_ij|``.

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, any finite real matrix.  Zero entries give zero entries.
    eta : float
        Step size ``>= 0``: the largest entry of the update (default 1).

    Returns
    -------
    (V, d) float64 ndarray

    Examples
    --------
    >>> sign_update([[3.0, -4.0], [-3.0, 0.0]])
    array([[-1.,  1.],
           [ 1.,  0.]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eta, "eta", minimum=0.0)
    return -e * np.sign(X) + 0.0


def polar_update(G: ArrayLike, /, *, eta: float = 1.0) -> np.ndarray:
    r"""Polar factor ``-eta U V^T`` of ``G = U Sigma V^T``: steepest under the
    spectral norm (Muon's update, computed exactly by SVD; zero singular
    values are dropped).

    Parameters
    ----------
    G : (V, d) array_like
        Gradient, any finite real matrix.  Singular values at most
        ``max(V, d) eps`` times the largest count as zero.
    eta : float
        Step size ``>= 0``: the spectral norm of the update (default 1).

    Returns
    -------
    (V, d) float64 ndarray

    Examples
    --------
    >>> polar_update([[2.0, 0.0], [0.0, -3.0]])
    array([[-1.,  0.],
           [ 0.,  1.]])
    """
    X = _v.matrix(G, "G")
    e = _v.scalar(eta, "eta", minimum=0.0)
    # scale-free: the SVD of G at unit size (an exact power of two), the same at every magnitude
    U, s, Vt = np.linalg.svd(_fp.mul_pow2(X, _fp.unit_scale(X)), full_matrices=False)
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
        ``-<G, S>``, evaluated on ``S`` minus its column means (the same
        number when ``1^T G = 0``).
    decrease_ratio : float
        ``-<G, S> / (D(S) T(G))``: 1 for the exact steepest direction, at least
        ``sqrt((k+1)/(2k))`` for projected RowNorm; scale-free, never NaN
        (0 when ``G = 0`` or ``D(S) = 0``).
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


def evaluate_update(G: ArrayLike, S: ArrayLike, /, *, tension: TensionResult | None = None,
                    center: bool = False) -> UpdateReport:
    r"""Measure an update ``S`` for the gradient ``G`` against the exact oracle.

    .. math::

        \rho(S) = \frac{-\langle G, S\rangle}{D(S)\, T(G)}

    Parameters
    ----------
    G : (V, d) array_like
        Gradient with zero column sums (or ``center=True``); NumPy or any CPU
        array exporting DLPack (e.g. a torch CPU tensor).
    S : (V, d) array_like
        The update to judge.
    tension : TensionResult, optional
        A solve of ``min_tension(G)`` to reuse (computed if omitted).
    center : bool
        Project ``G`` with ``P = I - 11^T/V`` first instead of raising on
        non-zero column sums.

    Returns
    -------
    UpdateReport
        Every field is finite for finite inputs (``diameter`` and
        ``decrease`` are ``inf`` only when their value exceeds float64).  The
        ratio is computed on ``S`` with its column means removed and both
        factors rescaled by powers of two, so neither a common row shift nor
        the magnitude of ``G`` or ``S`` decides it; ``D(S) = 0`` (an update
        the softmax does not see) has ratio 0.

    References
    ----------
    arXiv 2608.22253 (v2), the minimum-tension dual (I10) and I18.

    Examples
    --------
    >>> G = [[1.0, 0.0], [-1.0, 0.0]]
    >>> r = evaluate_update(G, [[-0.5, 0.0], [0.5, 0.0]])
    >>> round(r.decrease_ratio, 9), r.separation_ratio
    (1.0, 1.0)
    """
    # P G at unit size, X = P G 2^k (an exact power of two): no column sum overflows, no
    # mean rounds in the subnormal range; T is taken at that size too, the report scaled back
    _, X, _, k = _fp.zero_sum_at_unit(_v.matrix(G, "G", min_rows=2), center)
    U = _v.matrix(S, "S")
    if U.shape != X.shape:
        raise ValueError(f"S must have the shape of G {X.shape}; got {U.shape}")
    if tension is None:
        tension = min_tension(X)
        if math.isinf(_fp.ldexp_inf(tension.flow.cost, -k)):
            raise ValueError(_fp.T_OVERFLOW)
        t = (tension.value, tension.flow.cost)
    elif not isinstance(tension, TensionResult):
        raise TypeError("tension must be a TensionResult from min_tension(G)")
    else:
        t = (_fp.ldexp_inf(tension.value, k), _fp.ldexp_inf(tension.flow.cost, k))
    return _update_report(X, U, t[0], t[0], t[1], g_shift=k)


def _update_report(X, U, t_value: float, t_lower: float, t_upper: float,
                   search: Search | None = None, g_shift: int = 0) -> UpdateReport:
    """The measurements of :func:`evaluate_update`, for ``X = P G`` (float64) and the
    update ``U`` (validated, the shape of ``X``) of any one array namespace, given
    ``T(G)`` as ``t_value`` (the ratio's) and a bracket ``t_lower <= T <= t_upper``.
    With ``g_shift = k``, ``X`` is ``P G 2^k`` and the ``t`` are ``T(P G 2^k)``; the
    decrease and the tension are reported for ``G`` (each rounded once).

    The one formula of the core (``t_value = t_lower`` = a certified solve) and
    of :mod:`hilbertgeom.gpu` (its device bracket of :func:`tension_bounds`,
    ``t_value = t_upper``, and its tile-budgeted pair ``search``).
    """
    xp = array_api_compat.array_namespace(X, U)
    U = xp.astype(U, xp.float64, copy=False)
    # exact power-of-two rescales (G to max |g| in [1/2, 1), S likewise), so that neither
    # overflow nor underflow decides a number
    eG = math.frexp(_fp.max_abs(X, xp))[1]
    Xs = _fp.mul_pow2(X, -eG)
    eU = math.frexp(_fp.max_abs(U, xp))[1]
    Us = _fp.mul_pow2(U, -eU)
    D_s = _extreme_pair(Us, 2.0, "max", None, search=search).distance
    lo_s = _extreme_pair(Us, 2.0, "min", None, search=search).distance
    # the ratio on the centred S, rescaled again: D(Uc) >= max_i ||uc_i|| >= 1/2 unless Uc = 0
    Uc = Us - xp.mean(Us, axis=0)
    eC = math.frexp(_fp.max_abs(Uc, xp))[1]
    Uc = _fp.mul_pow2(Uc, -eC)
    Dc = _extreme_pair(Uc, 2.0, "max", None, search=search).distance
    dec_c = -float(xp.sum(Xs * Uc))
    Ts, Tlo, Thi = (_fp.ldexp_inf(t, -eG) for t in (t_value, t_lower, t_upper))
    if Dc > 0 and Ts > 0:
        ratio = dec_c / (Dc * Ts)
        bounds = (dec_c / (Dc * Thi), dec_c / (Dc * Tlo) if Tlo > 0 else math.inf)
    else:  # G = 0, or S is a common row shift: no decrease, no change of the softmax
        ratio, bounds = 0.0, (0.0, 0.0)
    D = _fp.ldexp_inf(D_s, eU)
    dec = _fp.ldexp_inf(dec_c, eG + eU + eC - g_shift)
    colsum = float(xp.max(xp.abs(xp.sum(Us, axis=0)))) / max(_fp.ldexp_inf(1.0, -eU), float(xp.sum(xp.abs(Us))))
    return UpdateReport(diameter=D, decrease=dec, decrease_ratio=ratio, decrease_ratio_bounds=bounds,
                        column_sum=colsum, min_separation=_fp.ldexp_inf(lo_s, eU), max_separation=D,
                        separation_ratio=(lo_s / D_s) if D_s > 0 else 1.0, tension=_fp.ldexp_inf(t_value, -g_shift))


def _exact_rule(G, *, tension=None):
    """The exact steepest direction at ``eta = 1``, reusing a solve when given."""
    return steepest_descent(G, eta=1.0, tension=tension)


def update_rules() -> dict[str, Callable[..., np.ndarray]]:
    """The registry used by :func:`bench_updates`: name -> ``G -> S`` (unit step).

    A rule that accepts a keyword argument ``tension`` (the exact rule does)
    is handed the bench's certified solve of ``min_tension(G)`` instead of
    solving again.

    Returns
    -------
    dict
        Rule name -> callable ``rule(G) -> S``.

    Examples
    --------
    >>> sorted(update_rules())[:3]
    ['RowNorm', 'Sign', 'exact (D steepest)']
    """
    return {
        "exact (D steepest)": _exact_rule,
        "projected RowNorm": lambda G: projected_rownorm(G, eta=1.0),
        "RowNorm": rownorm_update,
        "Sign": sign_update,
        "polar (Muon)": polar_update,
        "l_inf-diameter sign": linf_steepest_descent,
    }


_CE_TILE = 1 << 16  # logits per batch tile of the cross-entropy case (512 KiB in float64, cache-sized)


def _cross_entropy_gradient(H: np.ndarray, U: np.ndarray, targets: np.ndarray, *, tile: int = _CE_TILE):
    """``(softmax(H U^T) - Y)^T H / B`` with one-hot ``Y`` from ``targets``, without
    forming the ``(B, V)`` probability or one-hot matrices: ``P^T H`` is
    accumulated over row tiles of the batch, ``Y^T H`` is a scatter-add."""
    B, d = H.shape
    V = U.shape[0]
    out = np.zeros((V, d))
    rows = max(1, tile // V)
    # |z| <= max ||h|| max ||u||: below 700 no exponential can overflow, so the
    # per-row shift by the largest logit (one more pass over the tile) is not needed
    shift = float(np.linalg.norm(H, axis=1).max() * np.linalg.norm(U, axis=1).max()) > 700.0
    for b0 in range(0, B, rows):
        Ht = H[b0 : b0 + rows]
        Zt = U @ Ht.T  # logits, one column per batch row (the faster GEMM layout for small d)
        if shift:
            Zt -= Zt.max(axis=0)
        np.exp(Zt, out=Zt)
        out += Zt @ (Ht / Zt.sum(axis=0)[:, None])  # softmax normalisation folded into H
    np.add.at(out, targets, -H)
    return out / B


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
        Seed of the generator; the same seed gives the same cases.

    Returns
    -------
    dict name -> (V, d) ndarray

    Notes
    -----
    The cross-entropy case is accumulated over tiles of the batch, in memory
    ``O((V + B) d)`` plus a tile of 65,536 logits (no ``(B, V)`` matrix); its
    time is that of ``B V = 4 V^2`` exponentials: ``V = 20000`` (1.6e9 logits)
    takes about 20 s of CPU time.

    Examples
    --------
    >>> cases = gradient_suite(16, 4, seed=1)
    >>> list(cases)
    ['gaussian', 'rank one', 'low rank (4)', 'cross-entropy (Zipf)', 'simplex worst case']
    >>> bool(abs(cases["cross-entropy (Zipf)"].sum(axis=0)).max() < 1e-15)
    True
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
    ranks = np.arange(1, V + 1)
    w = ranks ** -1.1
    targets = rng.choice(V, size=B, p=w / w.sum())
    CE = _cross_entropy_gradient(H, U, targets)
    cases["cross-entropy (Zipf)"] = CE - CE.mean(axis=0)  # zero column sums exactly, not just to rounding
    kk = min(d, V - 1)
    simplex = np.zeros((V, d))
    # edge sqrt(2) (rows of norm sqrt(k/(k+1)), as the vertices e_i - 1/(k+1) of the standard simplex)
    simplex[: kk + 1] = math.sqrt(2.0) * regular_simplex(kk + 1, d)
    cases["simplex worst case"] = simplex
    return cases


def _takes_tension(rule) -> bool:
    try:
        params = inspect.signature(rule).parameters
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False
    p = params.get("tension")
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)


def bench_updates(*, rules: Mapping[str, Callable[..., ArrayLike]] | None = None,
                  cases: Mapping[str, ArrayLike] | None = None, V: int = 64, d: int = 8, seed: int = 0,
                  tol: float = 1e-9, max_iter: int = 200, verbose: bool | None = False,
                  on_case: Callable[[int, int, str], object] | None = None) -> list[tuple[str, str, UpdateReport]]:
    """Run update rules over gradient cases; one :class:`UpdateReport` per pair.

    ``min_tension`` is solved once per case; the report of every rule reuses
    it, and so does a rule that accepts a ``tension`` keyword (the exact
    rule of :func:`update_rules`).  Each rule is called on its own copy of
    the gradient, so a rule that writes into its argument cannot change the
    gradient it is judged against.

    Parameters
    ----------
    rules : dict name -> callable, optional
        ``G -> S`` rules; defaults to :func:`update_rules`.  User callables may
        return NumPy arrays or CPU DLPack arrays (torch tensors).
    cases : dict name -> (V, d) array, optional
        Zero-sum gradients; defaults to :func:`gradient_suite` ``(V, d, seed)``.
    V, d, seed : int
        Passed to :func:`gradient_suite` when ``cases`` is not given.
    tol, max_iter, verbose
        Passed to :func:`min_tension` (certified relative gap, outer
        iterations, solver progress on stderr); a miss raises its
        :class:`SolverError`, with the best certificate as ``.result`` and
        the case named in a note (``exc.__notes__``).
    on_case : callable, optional
        Called as ``on_case(done, total, name)`` after each case (progress).

    Returns
    -------
    list of (case, rule, UpdateReport)

    Raises
    ------
    TypeError
        A rule is not callable.
    SolverError
        ``min_tension`` missed ``tol`` within ``max_iter`` on a case.

    Examples
    --------
    >>> rows = bench_updates(V=6, d=2, rules={"RowNorm": rownorm_update})
    >>> [(case, rule) for case, rule, _ in rows][:2]
    [('gaussian', 'RowNorm'), ('rank one', 'RowNorm')]
    """
    rules = update_rules() if rules is None else dict(rules)
    for rname, rule in rules.items():
        if not callable(rule):
            raise TypeError(f"rule {rname!r} is not callable")
    cases = gradient_suite(V, d, seed=seed) if cases is None else dict(cases)
    out = []
    for done, (cname, G) in enumerate(cases.items(), start=1):
        Gn = _v.matrix(G, f"cases[{cname!r}]").copy()
        Gn.setflags(write=False)  # the bench's own copy, read-only
        # T and the reports at unit size (X = P G 2^k, an exact power of two), so that no
        # underflow of a subnormal T decides a ratio; the rules get the solve of G itself
        _, X, _, k = _fp.zero_sum_at_unit(Gn, False)
        try:
            ten_k = min_tension(X, tol=tol, max_iter=max_iter, verbose=verbose)
            ten = _fp.scaled_certificate(ten_k, -k)
        except (SolverError, ValueError) as exc:
            exc.add_note(f"bench_updates: case {cname!r}")
            raise
        for rname, rule in rules.items():
            Gr = Gn.copy()  # the rule's own, writable copy
            S = rule(Gr, tension=ten) if _takes_tension(rule) else rule(Gr)
            U = _v.matrix(_v.to_numpy(S, f"rule {rname!r} output"), "S")
            if U.shape != X.shape:
                raise ValueError(f"S must have the shape of G {X.shape}; got {U.shape} (rule {rname!r})")
            out.append((cname, rname, _update_report(X, U, ten_k.value, ten_k.value, ten_k.flow.cost, g_shift=k)))
        if on_case is not None:
            on_case(done, len(cases), cname)
    return out
