"""hilbertgeom: the update geometry of the language-model head.

A numerical reference library for "Toward a First-Principles Update Geometry
for the Language-Model Head" (arXiv 2608.22253): Hilbert's projective metric,
the row-diameter head norm and its backward bounds, with exact kernels and a
``hilbertgeom verify`` command that checks the paper's identities.
"""

# the concept modules as attributes (hg.rows, hg.tension, ...), and two public subpackages:
# hilbertgeom.gradients (head-gradient generators) and hilbertgeom.testing (assertions for
# optimizer authors; no Hypothesis import)
from . import (  # noqa: F401
    ball,
    equalize,
    gradients,
    head,
    metric,
    rows,
    tension,
    testing,
    tolerances,
    updates,
)
from .ball import EnclosingBall, covering_radius, jung_radius, minimum_enclosing_ball
from .equalize import (
    EqualizationRun,
    EqualizedResult,
    EquidistantLimit,
    SeparationResult,
    equalization_frontier,
    equalize_rows,
    equalized_descent,
    equidistant_limit,
    max_min_separation,
    max_separation_at_decrease,
    regular_simplex,
)
from .exceptions import SolverError
from .head import (
    backward_bound,
    backward_change,
    backward_change_bound,
    backward_witness,
    cross_entropy_backward_bound,
    head_norm,
    worst_case_hidden,
)
from .metric import (
    Contraction,
    birkhoff_contraction,
    hilbert_distance,
    softmax_hilbert_distance,
    total_variation,
    tv_bound,
    tv_extremal_pair,
    variation_norm,
)
from .rows import Pair, center_rows, closest_pair, row_diameter
from .tension import (
    Flow,
    TensionBounds,
    TensionBracket,
    TensionResult,
    min_tension,
    projected_rownorm,
    rownorm,
    steepest_descent,
    tension_bounds,
    tension_bracket,
)
from .tolerances import Tolerance, tolerance
from .updates import (
    UpdateReport,
    bench_updates,
    evaluate_update,
    gradient_suite,
    linf_steepest_descent,
    polar_update,
    rownorm_update,
    sign_update,
    update_rules,
)

__version__ = "0.1.0"

__all__ = [
    # metric
    "Contraction",
    "birkhoff_contraction",
    "hilbert_distance",
    "softmax_hilbert_distance",
    "total_variation",
    "tv_bound",
    "tv_extremal_pair",
    "variation_norm",
    # rows
    "Pair",
    "center_rows",
    "closest_pair",
    "row_diameter",
    # ball
    "EnclosingBall",
    "covering_radius",
    "jung_radius",
    "minimum_enclosing_ball",
    # head
    "backward_bound",
    "backward_change",
    "backward_change_bound",
    "backward_witness",
    "cross_entropy_backward_bound",
    "head_norm",
    "worst_case_hidden",
    # tension
    "Flow",
    "TensionBounds",
    "TensionBracket",
    "TensionResult",
    "min_tension",
    "projected_rownorm",
    "rownorm",
    "steepest_descent",
    "tension_bounds",
    "tension_bracket",
    # updates
    "UpdateReport",
    "bench_updates",
    "evaluate_update",
    "gradient_suite",
    "linf_steepest_descent",
    "polar_update",
    "rownorm_update",
    "sign_update",
    "update_rules",
    # equalize
    "EqualizationRun",
    "EqualizedResult",
    "EquidistantLimit",
    "SeparationResult",
    "equalization_frontier",
    "equalize_rows",
    "equalized_descent",
    "equidistant_limit",
    "max_min_separation",
    "max_separation_at_decrease",
    "regular_simplex",
    # tolerances, exceptions
    "Tolerance",
    "tolerance",
    "SolverError",
    "__version__",
]
