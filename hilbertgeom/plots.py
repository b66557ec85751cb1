"""Figures for the docs (optional: needs matplotlib, ``pip install 'hilbertgeom[plot]'``).

The core never imports this module; :mod:`hilbertgeom.cli` does on request.
"""

from __future__ import annotations

import numpy as np

from .rows import closest_pair, row_diameter

__all__ = ["plot_configuration", "plot_frontier", "plot_separations"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_configuration(points, path, /, *, title=None):
    """Draw a 2-D or 3-D point configuration with its closest and farthest pairs.

    Parameters
    ----------
    points : (n, 2) or (n, 3) array_like
    path : str
        Output file (PNG, SVG, PDF by extension).
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


def plot_separations(S, path, /, *, bins=50, title=None):
    """Histogram of all pairwise row distances of ``S`` divided by its diameter (small V)."""
    X = np.asarray(S, dtype=float)
    iu, ju = np.triu_indices(X.shape[0], 1)
    D = np.linalg.norm(X[iu] - X[ju], axis=1)
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


def plot_frontier(results, path, /, *, title=None):
    """The equalization frontier: decrease bracket ``[lower, upper]`` against delta."""
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
