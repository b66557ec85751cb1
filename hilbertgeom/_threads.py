"""One multi-threaded BLAS at a time.

NumPy's and SciPy's wheels each carry their own OpenBLAS, and each OpenBLAS keeps
its own pool of threads, which spin for a while after a call before they sleep.
Where calls into the two alternate -- SciPy's L-BFGS-B, whose Fortran calls SciPy's
BLAS, around an objective made of NumPy's products, as in the groups' problem of
:func:`~hilbertgeom.min_tension`'s refinement -- the spinning threads of one pool
take the cores the other needs.  On 2 cores, the first groups' problem of the
shipped MiniLM gradient at full vocabulary (256 groups, ``tol = 1e-6``) took
199.8 s with both pools at 2 threads and 133.2 s with SciPy's at 1, in the same run
(its first 400 evaluations: 11.5-13.3 s against 3.8-4.3 s).  NumPy's pool keeps its
threads: the products at full vocabulary are NumPy's GEMMs (30 evaluations of the
weights' descent took 36.3-42.0 s with NumPy's OpenBLAS on one thread, 30.9-34.8 s
on two).  SciPy's BLAS and LAPACK calls in the solvers are on small blocks (L-BFGS-B's
vectors, Cholesky factors of a few hundred rows), where a second thread gains little.

:func:`numpy_blas_threads_only` limits every BLAS library other than NumPy's to one
thread while it is entered, through threadpoolctl, and restores them on leaving.
Where only one BLAS library is loaded (NumPy and SciPy built against one shared
BLAS, as in conda), or NumPy's cannot be told apart by its path, it does nothing.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

__all__: list[str] = []  # used by the solvers' entry points

F = TypeVar("F", bound=Callable[..., Any])


def _numpy_dirs() -> tuple[str, ...]:
    """Folders whose libraries are NumPy's own: its package folder (macOS wheels put
    their libraries in ``numpy/.dylibs``) and its sibling ``numpy.libs`` (Linux and
    Windows wheels)."""
    pkg = os.path.dirname(os.path.realpath(np.__file__))
    return (pkg + os.sep, pkg + ".libs" + os.sep)


def _foreign_blas(controller) -> list[str]:
    """Paths of the loaded BLAS libraries other than NumPy's, or none where NumPy's is
    not among them (one shared BLAS, or a layout not recognised)."""
    blas = [lc.filepath for lc in controller.lib_controllers if lc.user_api == "blas" and lc.filepath]
    dirs = _numpy_dirs()
    ours = [p for p in blas if os.path.realpath(p).startswith(dirs)]
    if not ours:
        return []
    return [p for p in blas if p not in ours]


@contextmanager
def numpy_blas_threads_only() -> Iterator[None]:
    """Within the block, every BLAS library loaded besides NumPy's runs on one thread
    (see the module's note); their former limits come back after it."""
    import scipy.linalg  # noqa: F401  (SciPy's BLAS loaded, so that it is found and limited)
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    foreign = _foreign_blas(controller)
    if not foreign:
        yield
        return
    with controller.select(filepath=foreign).limit(limits=1):
        yield


def numpy_blas_threads(fn: F) -> F:
    """``fn`` run inside :func:`numpy_blas_threads_only`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with numpy_blas_threads_only():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
