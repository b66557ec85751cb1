"""Figures for the docs (optional: needs matplotlib, ``pip install 'hilbertgeom[plot]'``).

The core never imports this module; :mod:`hilbertgeom.cli` does on request.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .rows import closest_pair, row_diameter

if TYPE_CHECKING:
    from .equalize import EqualizedResult

__all__ = ["plot_configuration", "plot_frontier", "plot_separations"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_configuration(points: ArrayLike, path: str | os.PathLike[str], /, *, title: str | None = None) -> None:
    """Draw a 2-D or 3-D point configuration with its closest and farthest pairs.

    The points are drawn black; the closest pair (:func:`~hilbertgeom.closest_pair`)
    is joined in blue and the farthest pair (:func:`~hilbertgeom.row_diameter`) in
    red, each labelled with its distance.

    Parameters
    ----------
    points : (n, 2) or (n, 3) array_like
        The points, one per row, ``n >= 2`` (the configuration of
        :func:`~hilbertgeom.max_min_separation`, say).
    path : str or path-like
        Output file; the format follows the extension (PNG, SVG, PDF, ... as
        matplotlib writes them).
    title : str, optional
        Title above the figure (none by default).

    Raises
    ------
    ValueError
        ``points`` is not ``(n, 2)`` or ``(n, 3)``.
    """
    P = np.asarray(points, dtype=float)
    if P.ndim != 2 or P.shape[1] not in (2, 3):
        raise ValueError(f"points must be (n, 2) or (n, 3) to draw; got shape {P.shape}")
    plt = _plt()
    fig = plt.figure(figsize=(4.5, 4.5))
    ax = fig.add_subplot(projection="3d" if P.shape[1] == 3 else None)
    ax.scatter(*P.T, s=40, color="k", zorder=3)
    lo = closest_pair(P)
    hi = row_diameter(P, return_pair=True)
    for pair, colour, label in ((lo, "tab:blue", f"min {lo.distance:.4f}"), (hi, "tab:red", f"max {hi.distance:.4f}")):
        seg = P[[pair.i, pair.j]]
        ax.plot(*seg.T, color=colour, lw=2, label=label)
    if P.shape[1] == 2:
        ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_separations(S: ArrayLike, path: str | os.PathLike[str], /, *, bins: int = 50,
                     title: str | None = None) -> None:
    """Histogram of all pairwise row distances of ``S`` divided by its diameter.

    Every pair is formed (``V (V - 1) / 2`` distances, in memory at once): for
    small ``V``.

    Parameters
    ----------
    S : (V, d) array_like
        An update (or any rows), ``V >= 2`` rows not all equal.
    path : str or path-like
        Output file; the format follows the extension (PNG, SVG, PDF, ...).
    bins : int
        Number of histogram bins over ``[0, 1]`` (default 50).
    title : str, optional
        Title above the figure (none by default).

    Raises
    ------
    ValueError
        ``S`` is not 2-D with at least two rows, or all its rows are equal.
    """
    X = np.asarray(S, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"S must be (V, d) with V >= 2 rows to draw; got shape {X.shape}")
    iu, ju = np.triu_indices(X.shape[0], 1)
    D = np.linalg.norm(X[iu] - X[ju], axis=1)
    if not D.max() > 0:
        raise ValueError("S has all rows equal (diameter 0): no distances to draw against it")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.hist(D / D.max(), bins=bins, color="tab:blue")
    ax.set_xlabel("pairwise distance / diameter")
    ax.set_ylabel("pairs")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_frontier(results: Iterable[EqualizedResult], path: str | os.PathLike[str], /, *,
                  title: str | None = None) -> None:
    """The equalization frontier: decrease bracket ``[lower, upper]`` against delta.

    Parameters
    ----------
    results : iterable of EqualizedResult
        One result per separation floor, as :func:`~hilbertgeom.equalization_frontier`
        returns them (read once); a non-finite bound (``-inf``: no feasible
        update known, or ``delta`` proven infeasible) is left out of its curve.
    path : str or path-like
        Output file; the format follows the extension (PNG, SVG, PDF, ...).
    title : str, optional
        Title above the figure (none by default).
    """
    results = list(results)  # read three times below: an iterator would be spent after the first
    plt = _plt()
    ds = [r.delta for r in results]
    lo = [r.lower if np.isfinite(r.lower) else np.nan for r in results]
    up = [r.upper if np.isfinite(r.upper) else np.nan for r in results]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(ds, up, "o-", color="tab:red", label="upper (Shor SDP)")
    ax.plot(ds, lo, "s-", color="tab:blue", label="lower (feasible update)")
    ax.set_xlabel("separation floor delta (fraction of eta)")
    ax.set_ylabel("decrease -<G, S>")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
