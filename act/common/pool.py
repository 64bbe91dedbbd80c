"""Worker processes for episodes: the pool that recording and evaluation share (no torch here).

    with worker_pool(workers, init, settings) as executor:   # each worker ran init(settings, threads)
        futures = [executor.submit(run_one, seed) for seed in seeds]

``workers`` > 1 spawns that many fresh processes; otherwise the work runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator

from act.common.errors import InputError
from act.common.io import exit_with_parent


def threads_per_worker(workers: int) -> int:
    """This machine's cores shared out among ``workers`` processes (at least one each)."""
    if workers < 1:
        raise InputError(f"workers must be >= 1 to share out cores, got {workers}")
    return max(1, (os.cpu_count() or 1) // workers)


class InlineExecutor(Executor):
    """The executor interface, run in this process (workers <= 1): ``submit`` runs at once, ``map`` lazily."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future

    def map(self, fn, *iterables, timeout=None, chunksize=1) -> Iterator:
        return map(fn, *iterables)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def _start_worker(initializer: Callable[..., None], initargs: tuple, threads: int) -> None:
    exit_with_parent()  # a killed parent leaves no worker behind
    initializer(*initargs, threads)


@contextmanager
def worker_pool(workers: int, initializer: Callable[..., None], *initargs) -> Iterator[Executor]:
    """An executor whose workers each ran ``initializer(*initargs, threads)`` before any work.

    ``workers`` > 1: that many spawned processes (a fresh interpreter each: no GL context or
    thread pool inherited by fork), exiting with this one; ``threads`` is each one's share of
    the cores (``threads_per_worker``), for the initializer to limit its libraries to.
    ``workers`` <= 1: this process runs ``initializer(*initargs, None)`` now, then the work inline.
    ``initializer`` must be picklable (a module-level function). However the block ends (an
    interrupt included), queued work is cancelled and the workers are joined.
    """
    if workers <= 1:
        initializer(*initargs, None)
        executor: Executor = InlineExecutor()
    else:
        executor = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(initializer, initargs, threads_per_worker(workers)),
        )
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
