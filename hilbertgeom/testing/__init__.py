"""Ground truth for people who write fast head optimizers.

What :mod:`numpy.testing` and :mod:`torch.testing` give array code, for the
update rules of the language-model head: one line tells whether a step is the
steepest-descent step of a norm, and if not, why.

* :func:`assert_steepest` -- ``S`` is the steepest step of size ``eta`` for a
  norm: the row diameter (exact, certified), its ``l_inf`` variant, the
  covering radius (projected RowNorm), the largest row norm (RowNorm), the
  largest entry (Sign) or the spectral norm (Muon's polar factor).
* :func:`assert_decrease_ratio` -- ``S`` buys at least a given share of the
  best decrease at its diameter (certified).
* :func:`steepest_step` -- the exact step for each norm, the reference.
* :func:`gradient_cases` -- named gradients to run an optimizer on, including
  a real model's head gradient where its weights are installed.
* :mod:`hilbertgeom.testing.strategies` -- Hypothesis strategies for
  zero-sum gradients (needs the ``test`` extra; this package does not).

A pytest plugin (``hilbertgeom.testing.plugin``, registered as an entry
point) provides the fixtures ``assert_steepest`` and ``gradient_case``.
"""

from __future__ import annotations

from ._cases import GradientCase, gradient_cases
from ._steepest import (
           NORMS,
           assert_decrease_ratio,
           assert_steepest,
           default_rtol,
           steepest_step,
)

__all__ = ["NORMS", "GradientCase", "assert_decrease_ratio", "assert_steepest", "default_rtol",
           "gradient_cases", "steepest_step"]
