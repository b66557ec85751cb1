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

:func:`blocks_in_threads` is the other way round: many independent small LAPACK
calls (a batch of a few hundred systems of order about 130 each, one NumPy call)
run on one core whatever the pool, since OpenBLAS does not split so small a
factorization.  There the blocks of the batch are run in as many Python threads as
there are cores, with every BLAS on one thread meanwhile: 256 systems of order 130
took 15.4 ms in two threads against 30.3-32.1 ms in one call, on 2 cores.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
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


#: the workers of :func:`blocks_in_threads` and a controller of the BLAS libraries, made on first
#: use (one pool for the process; making a controller reads every loaded library, 7 ms here,
#: where entering and leaving its limit take 26 us)
_POOL: list = []
_POOL_LOCK = threading.Lock()


#: at most this many threads: each block of tension/place.py's systems holds up to 128 MiB of
#: matrices and as much of gather indices while it runs, so the threads add at most 1 GiB
_MAX_WORKERS = 4


def _workers() -> int:
    """The cores this process may run on, at most ``_MAX_WORKERS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_WORKERS))


def blocks_in_threads(fn: Callable[[Any], None], blocks: Iterable[Any]) -> None:
    """``fn(b)`` for every ``b`` of ``blocks``, in one thread per core (at most ``_MAX_WORKERS``), every
    BLAS library on one thread meanwhile (see the module's note); in the calling thread where
    there is one core or one block.  ``fn`` returns nothing: each call writes its own part of
    the result (the blocks must be independent).  Where blocks raise, the exception of the
    first of them (in the order of ``blocks``) is raised here, after every block has run."""
    blocks = list(blocks)
    n = min(_workers(), len(blocks))
    if n <= 1:
        for b in blocks:
            fn(b)
        return
    from concurrent.futures import ThreadPoolExecutor

    import scipy.linalg  # noqa: F401  (SciPy's BLAS loaded, so that the controller finds it)
    from threadpoolctl import ThreadpoolController

    with _POOL_LOCK:
        if not _POOL:
            _POOL.extend([ThreadPoolExecutor(_workers(), thread_name_prefix="hilbertgeom"), ThreadpoolController()])
    pool, controller = _POOL
    with controller.limit(limits=1, user_api="blas"):
        futures = [pool.submit(fn, b) for b in blocks]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
