"""The ray backend of :class:`ovman_eval.runs.backend.Backend`: one Ray task per unit.

:func:`run_ray` keeps :func:`ovman_eval.runs.pool.run_pool`'s contract on a Ray cluster: the worker
state is shipped once (``ray.put``) and built once per Ray worker process; only the driver (this
process) commits results, in submission order among those finished together, so a retried unit is
committed once. Ray is imported here only; the local backend never imports it.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ovman_eval.runs.pool import BackendError, PoolBrokenError

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

_RUNS = itertools.count()


class _WorkerState:
    """This Ray worker process's state: the run it was built for, and its unit function."""

    run: str | None = None
    work: Callable[[Any], Any] | None = None


def _do_unit(run: str, packed: tuple[Callable[..., Callable[[Any], Any]], tuple[Any, ...]], item: Any) -> Any:
    """One unit in a Ray worker: build the run's worker state on the first task of the run here."""
    if _WorkerState.run != run:
        setup, args = packed
        _WorkerState.work, _WorkerState.run = None, None
        _WorkerState.work = setup(*args)
        _WorkerState.run = run
    assert _WorkerState.work is not None
    return _WorkerState.work(item)


def _probe(address: str, timeout_s: float) -> None:
    """BackendError unless something accepts a TCP connection at ``address`` (``HOST:PORT``, or
    ``ray://HOST:PORT`` for Ray Client) within ``timeout_s``: Ray itself retries an unreachable
    head for minutes before it gives up."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise BackendError(f"the Ray address {address!r} is not HOST:PORT (or auto)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise BackendError(
            f"cannot connect to the Ray cluster at {address}: {err} (is `ray start --head` running there, and is "
            "the port reachable from this machine?)"
        ) from None


def connect(address: str | None, timeout_s: float = 20.0) -> None:
    """Connect this process to the Ray cluster at ``address`` (``HOST:PORT`` of a head, ``auto``: the
    cluster this machine belongs to, ``ray://HOST:PORT``: Ray Client, None: a Ray instance started
    here without a dashboard), once, waiting at most about ``timeout_s`` for its head; BackendError
    when it cannot. The connection stays for the rest of the process (a second run reuses it)."""
    if address is not None and address != "auto":
        _probe(address, timeout_s)
    # Ray reads these when it is imported: each GCS connection attempt, and the attempts, bounded.
    wait = str(max(1, math.ceil(timeout_s)))
    os.environ.setdefault("RAY_py_gcs_connect_timeout_s", wait)
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", wait)
    import ray

    if ray.is_initialized():
        return
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        options.update(include_dashboard=False, num_cpus=os.cpu_count())
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as err:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise BackendError(f"cannot connect to {where}: {err}") from None


def run_ray(
    items: Sequence[ItemT],
    workers: int,
    setup: Callable[..., Callable[[ItemT], ResultT]],
    args: tuple[Any, ...],
    commit: Callable[[ResultT], None],
    label: Callable[[ItemT], str] = str,
    address: str | None = None,
    retries: int = 3,
    connect_timeout_s: float = 20.0,
) -> None:
    """Do ``items`` as Ray tasks, committing each result here as it arrives.

    At most ``workers`` tasks are in flight, so ``--workers N`` runs N units at a time however many
    CPUs the cluster has. A task whose worker dies is retried up to ``retries`` times, then
    PoolBrokenError names the unit; an exception of the unit's own code is not retried and
    propagates as itself."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if retries < 0:
        raise ValueError(f"retries must be at least 0, got {retries}")
    import ray
    from ray.exceptions import RayTaskError

    connect(address, connect_timeout_s)
    run = f"{os.getpid()}-{next(_RUNS)}"
    task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(_do_unit)
    packed = ray.put((setup, args))
    queue = list(items)
    order: dict[Any, int] = {}
    labels: dict[Any, str] = {}
    pending: list[Any] = []
    try:
        while queue or pending:
            while queue and len(pending) < workers:
                item = queue.pop(0)
                ref = task.remote(run, packed, item)
                order[ref], labels[ref] = len(order), label(item)
                pending.append(ref)
            finished, pending = ray.wait(pending, num_returns=1)
            more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)  # those finished too
            for ref in sorted([*finished, *more], key=order.__getitem__):
                try:
                    result = ray.get(ref)
                except RayTaskError as err:
                    cause = err.cause if isinstance(err.cause, BaseException) else None
                    if cause is not None:
                        raise cause from None  # the unit's own error, as the local pool raises it
                    raise
                except ray.exceptions.RayError as err:
                    raise PoolBrokenError(
                        f"the Ray task of {labels[ref]} failed after {retries} retries ({type(err).__name__}: {err})"
                    ) from None
                commit(result)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


__all__ = ["connect", "run_ray"]
