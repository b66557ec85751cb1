"""hilbertgeom/_threads.py: one multi-threaded BLAS at a time.

Reference: threadpoolctl's own report of each loaded BLAS library's thread count
(read from the library, not from this module's bookkeeping)."""

from __future__ import annotations

import os

import numpy as np
import scipy.linalg  # noqa: F401  (SciPy's BLAS loaded)
from threadpoolctl import threadpool_info

from hilbertgeom import _threads as th
from hilbertgeom import min_tension
from hilbertgeom.tension import solver


def _blas_threads() -> dict[str, int]:
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def _numpy_blas(paths) -> list[str]:
    dirs = th._numpy_dirs()
    return [p for p in paths if os.path.realpath(p).startswith(dirs)]


def test_only_numpys_blas_keeps_its_threads_inside_and_all_come_back():
    """Inside the block every BLAS library but NumPy's reports one thread and NumPy's
    keeps its count; after it, each has its count from before.  Where NumPy's library is
    the only one loaded (a shared BLAS), nothing changes."""
    before = _blas_threads()
    ours = _numpy_blas(before)
    with th.numpy_blas_threads_only():
        inside = _blas_threads()
    assert _blas_threads() == before
    for p, n in inside.items():
        if not ours:
            assert n == before[p]  # not a tolerance: NumPy's library not recognised, nothing limited
        elif p in ours:
            assert n == before[p]  # not a tolerance: NumPy's products keep their threads
        else:
            assert n == 1  # not a tolerance: SciPy's (and any other) BLAS on one thread


def test_wheels_with_two_openblas_are_told_apart():
    """NumPy's and SciPy's wheels (as CI installs them) each load their own OpenBLAS: the
    one in NumPy's folders is NumPy's, the other is limited."""
    paths = list(_blas_threads())
    if len(paths) < 2:  # one shared BLAS: nothing to tell apart here
        assert th._foreign_blas(_controller()) == []
        return
    ours = _numpy_blas(paths)
    assert len(ours) == 1  # not a tolerance: exactly one library is NumPy's
    assert sorted(th._foreign_blas(_controller())) == sorted(set(paths) - set(ours))


def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def test_min_tension_solves_with_scipys_blas_on_one_thread(monkeypatch):
    """The refinement and the ALM run inside the block (checked from within the solve),
    and the limits are restored when ``min_tension`` returns, also where it raises."""
    before = _blas_threads()
    ours = _numpy_blas(before)
    seen: list[dict[str, int]] = []
    real = solver._refine_solve

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(solver, "_refine_solve", spy)
    G = np.random.default_rng(0).standard_normal((40, 3))
    res = min_tension(G, center=True, method="refine", tol=1e-6)
    assert res.status == "optimal" and len(seen) >= 1  # not a tolerance: the spy ran inside the solve
    for p, n in seen[0].items():
        if ours and p not in ours:
            assert n == 1  # not a tolerance: limited inside the solve
    assert _blas_threads() == before

    def fail(*args, **kwargs):
        raise RuntimeError("stop")

    monkeypatch.setattr(solver, "_refine_solve", fail)
    try:
        min_tension(G, center=True, method="refine", tol=1e-6)
    except RuntimeError:
        pass
    assert _blas_threads() == before


def test_blocks_in_threads_runs_each_block_once_with_every_blas_on_one_thread(monkeypatch):
    """With two workers, each block runs once, in the pool's threads, while every BLAS library
    reports one thread (threadpoolctl's report, read from within the blocks); after it each has
    its count from before.  With one worker the blocks run in the calling thread, limits untouched.
    An exception in one block is raised once every block has run."""
    import threading

    before = _blas_threads()
    for workers in (2, 1):
        monkeypatch.setattr(th, "_workers", lambda w=workers: w)
        seen: list[tuple[int, str, dict[str, int]]] = []
        lock = threading.Lock()

        def record(b, seen=seen, lock=lock):
            info = _blas_threads()
            with lock:
                seen.append((b, threading.current_thread().name, info))

        th.blocks_in_threads(record, range(6))
        assert sorted(b for b, _, _ in seen) == list(range(6))
        names = {name for _, name, _ in seen}
        if workers == 2:
            assert all(name.startswith("hilbertgeom") for name in names)
            assert all(n == 1 for _, _, info in seen for n in info.values())  # not a tolerance: a thread count
        else:
            assert names == {threading.current_thread().name}
            assert all(info == before for _, _, info in seen)
        assert _blas_threads() == before
    monkeypatch.setattr(th, "_workers", lambda: 2)
    ran: list[int] = []

    def fail_on_2(b):
        if b == 2:
            raise ValueError("block 2")
        ran.append(b)

    try:
        th.blocks_in_threads(fail_on_2, range(5))
    except ValueError as err:
        assert str(err) == "block 2"
    else:
        raise AssertionError("the block's exception was not raised")
    assert sorted(ran) == [0, 1, 3, 4]
    assert _blas_threads() == before


def test_blocks_in_threads_uses_at_most_max_workers_threads(monkeypatch):
    """One thread per core the process may run on, but never more than ``_MAX_WORKERS`` (each
    block of the placement's systems holds up to 256 MiB while it runs)."""
    for cores, expected in ((64, th._MAX_WORKERS), (3, min(3, th._MAX_WORKERS)), (1, 1)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, c=cores: set(range(c)), raising=False)
        assert th._workers() == expected
