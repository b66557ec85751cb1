"""pytest plugin: fixtures for testing head optimizers, no import needed.

Registered as the ``pytest11`` entry point ``hilbertgeom`` (loaded by pytest
wherever hilbertgeom is installed; ``-p no:hilbertgeom`` turns it off), or
load it by hand with ``-p hilbertgeom.testing.plugin``.

* ``assert_steepest`` -- the function :func:`hilbertgeom.testing.assert_steepest`;
* ``gradient_case`` -- a test that takes it runs once per
  :func:`hilbertgeom.testing.gradient_cases` case (the real-model case is
  skipped, with the reason, when the weights are not installed).  Sizes
  come from the marker ``@pytest.mark.gradient_cases(V, d, real=..., seed=...)``
  (default ``V = 64, d = 8``).

::

    def test_my_rownorm(gradient_case, assert_steepest):
        G = gradient_case.G
        assert_steepest(my_rownorm(G), G, norm="max_row")

Loading the plugin imports hilbertgeom (NumPy, SciPy), never Hypothesis or
torch; the gradient cases are listed only for tests that ask for them, and
each is made on first use.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

__all__ = ["assert_steepest", "pytest_configure", "pytest_generate_tests"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``gradient_cases`` marker (pytest hook).

    Parameters
    ----------
    config : pytest.Config
        The session's configuration, which gets the marker's line.
    """
    config.addinivalue_line(
        "markers", "gradient_cases(V=64, d=8, *, seed=0, real=True): sizes of the gradient_case fixture "
                   "(hilbertgeom.testing.gradient_cases)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize a test that takes ``gradient_case`` over the cases (pytest hook).

    The cases are :func:`hilbertgeom.testing.gradient_cases` called with the
    arguments of the test's closest ``gradient_cases`` marker (none: the
    defaults); each is a parameter with the case's name as its id, and an
    unavailable case is skipped with its reason.  Tests without the fixture
    are left alone.

    Parameters
    ----------
    metafunc : pytest.Metafunc
        The test function being collected.
    """
    if "gradient_case" not in metafunc.fixturenames:
        return
    from . import gradient_cases

    mark = metafunc.definition.get_closest_marker("gradient_cases")
    args, kwargs = (mark.args, dict(mark.kwargs)) if mark is not None else ((), {})
    params = [pytest.param(c, id=c.name, marks=() if c.available else pytest.mark.skip(reason=c.reason))
              for c in gradient_cases(*args, **kwargs)]
    metafunc.parametrize("gradient_case", params)


@pytest.fixture(name="assert_steepest")
def assert_steepest() -> Callable[..., None]:
    """:func:`hilbertgeom.testing.assert_steepest`."""
    from . import assert_steepest as fn

    return fn
