"""Regenerate the figures and the table of docs/theory/equalization.md.

    pip install '.[plot]' && python docs/scripts/make_figures.py

Writes docs/figures/*.png and prints the Markdown table of the equalization
frontier for a fixed gradient (deterministic: seeds are fixed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import hilbertgeom as hg
from hilbertgeom import plots

OUT = Path(__file__).resolve().parents[1] / "figures"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for n, d in ((7, 2), (8, 2), (12, 3)):
        r = hg.max_min_separation(n, d)
        plots.plot_configuration(r.points, OUT / f"separation_n{n}_d{d}.png",
                                 title=f"n = {n}, d = {d}: min distance {r.lower:.4f} (diameter 1)")
    G = np.random.default_rng(0).standard_normal((10, 3))
    G -= G.mean(axis=0)
    deltas = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    res = hg.equalization_frontier(G, deltas)
    plots.plot_frontier(res, OUT / "frontier_V10_d3.png", title="equalization frontier, V = 10, d = 3")
    plots.plot_separations(hg.projected_rownorm(G), OUT / "separations_rownorm.png",
                           title="projected RowNorm, V = 10, d = 3", bins=20)
    T = hg.min_tension(G).value
    print("| delta | lower (feasible) | upper (SDP) | relative gap | lower / T |")
    print("|---|---|---|---|---|")
    for r in res:
        low = f"{r.lower:.6f}" if np.isfinite(r.lower) else "none found"
        rel = f"{r.gap / r.upper:.2e}" if np.isfinite(r.lower) else "-"
        frac = f"{r.lower / T:.4f}" if np.isfinite(r.lower) else "-"
        print(f"| {r.delta:.1f} | {low} | {r.upper:.6f} | {rel} | {frac} |")


if __name__ == "__main__":
    main()
