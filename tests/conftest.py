"""Shared test set-up: hypothesis profiles, the tolerance policy, slow-test scale.

Profiles: ``ci`` (deterministic, the default under CI=true) and ``dev``
(random, more examples).  Select with ``HYPOTHESIS_PROFILE``.

Slow, exhaustive tests are marked ``slow``; they always run, in a bounded
form unless ``HILBERTGEOM_FULL=1`` (see :func:`full`).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from hilbertgeom.tolerances import tolerance

settings.register_profile(
    "ci", derandomize=True, database=None, max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow], print_blob=True,
)
settings.register_profile(
    "dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

EXACT = tolerance("exact")


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)
