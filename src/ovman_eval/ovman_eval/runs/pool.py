"""The worker pool shared by dataset generation, the benchmark runner and its map builds.

``workers`` spawned processes (never forked: a worker starts from a clean interpreter, without the
parent's ROS context or threads) each build their state once with ``setup(*args)``, a module-level
function. Each result is committed in the parent as it arrives; a dead worker (a signal, the OOM
killer, an exit) breaks the pool with a :class:`PoolBrokenError` naming it and its item.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from typing import Any, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

QUEUED_PER_WORKER = 2
"""Items submitted ahead per worker."""


class PoolBrokenError(Exception):
    """A worker of :func:`run_pool` died; the message says which, how and what it was computing."""


class BackendError(ValueError):
    """A backend (:mod:`ovman_eval.runs.backend`) that cannot be used as given: a bad option, or a
    Ray cluster that cannot be reached (names what and why)."""


class _Worker:
    """This process's worker state (one per spawned process)."""

    work: Callable[[Any], Any] | None = None
    started: SimpleQueue[tuple[int, str]] | None = None


def _init(setup: Callable[..., Callable[[Any], Any]], args: tuple[Any, ...], started: SimpleQueue) -> None:
    _Worker.work = setup(*args)
    _Worker.started = started


def _do(item: Any, label: str) -> Any:
    assert _Worker.work is not None and _Worker.started is not None, "worker not initialised"
    _Worker.started.put((os.getpid(), label))  # so the parent can name the item of a worker that dies
    return _Worker.work(item)


def run_pool(
    items: Sequence[ItemT],
    workers: int,
    setup: Callable[..., Callable[[ItemT], ResultT]],
    args: tuple[Any, ...],
    commit: Callable[[ResultT], None],
    label: Callable[[ItemT], str] = str,
) -> None:
    """Do ``items`` in ``workers`` spawned processes, calling ``commit`` in this process with each
    result as it arrives. ``label(item)`` names an item in the error of a dead worker.

    PoolBrokenError when a worker dies (the results committed so far stay committed); any other
    exception of a worker or of ``commit`` cancels the queued items and propagates."""
    context = multiprocessing.get_context("spawn")
    started: SimpleQueue[tuple[int, str]] = context.SimpleQueue()
    computing: dict[int, str] = {}
    committed: set[str] = set()
    processes: dict[int, BaseProcess] = {}
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init, initargs=(setup, args, started))
    with pool:
        order: dict[Future[ResultT], int] = {}
        labels: dict[Future[ResultT], str] = {}
        futures: set[Future[ResultT]] = set()
        queue = list(items)
        try:
            while queue or futures:
                # Few items handed out at a time, so an interruption loses little finished work.
                while queue and len(futures) < QUEUED_PER_WORKER * workers:
                    item = queue.pop(0)
                    future = pool.submit(_do, item, label(item))
                    order[future], labels[future] = len(order), label(item)
                    futures.add(future)
                finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                _drain(started, computing)  # at every completion, so the pipe never fills
                for future in sorted(finished, key=order.__getitem__):
                    commit(future.result())
                    committed.add(labels[future])
        except BrokenProcessPool:
            # The pool's own PID -> process map (private: concurrent.futures does not say which worker died).
            processes = dict(pool._processes)  # type: ignore[attr-defined]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    if processes:  # the pool is shut down: every worker has ended and has its exit code
        _drain(started, computing)
        raise PoolBrokenError(dead_workers(processes, computing, committed))


def _drain(started: SimpleQueue[tuple[int, str]], computing: dict[int, str]) -> None:
    """Read the items the workers said they started into ``computing`` (PID -> the latest item's label)."""
    while not started.empty():
        pid, label = started.get()
        computing[pid] = label


def dead_workers(processes: dict[int, BaseProcess], computing: dict[int, str], committed: set[str]) -> str:
    """Which worker died, how (signal or exit status), and the item it was computing.

    When one worker dies the pool terminates the others (SIGTERM), so the dead are those that ended
    otherwise, or, when every worker ended by SIGTERM, all of them."""

    def doing(pid: int) -> str:
        if pid not in computing:
            return "before its first unit"
        return "between units" if computing[pid] in committed else f"while computing {computing[pid]}"

    ended = {pid: p.exitcode for pid, p in processes.items() if p.exitcode is not None}
    dead = {pid: code for pid, code in ended.items() if code != -signal.SIGTERM} or ended
    return "; ".join(
        f"worker process {pid} died ({exit_text(code)}) {doing(pid)}" for pid, code in sorted(dead.items())
    )


def exit_text(code: int) -> str:
    """A process exit code as words: ``killed by SIGKILL``, ``exit status 1``."""
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"
