"""Where the units of a run are computed: this machine's process pool, or tasks on a Ray cluster.

``local`` (the default, :func:`ovman_eval.runs.pool.run_pool`) never imports Ray; ``ray``
(:func:`ovman_eval.runs.ray_pool.run_ray`) runs one task per unit, at most ``workers`` at a time.
Either way each result is committed in this process as it arrives, so a run's files, resume and
results are byte-identical wherever a unit ran. With ``ray``, the dataset, run directory and map
cache must be on a filesystem every node shares at the same path: tasks carry paths, not files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ovman_eval.runs.pool import BackendError, run_pool

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

LOCAL, RAY = "local", "ray"
BACKENDS = (LOCAL, RAY)


@dataclasses.dataclass(frozen=True)
class Backend:
    """``kind`` one of :data:`BACKENDS`; ``address``: the Ray cluster's (``HOST:PORT``, or ``auto``),
    only with ``ray``; None starts a local Ray instance; ``retries``: Ray's retries of a task whose
    worker died (``benchmark_node.benchmark.ray_task_retries``); ``connect_timeout_s``: how long the
    cluster's head may take to answer (``ray_connect_timeout_s``)."""

    kind: str = LOCAL
    address: str | None = None
    retries: int = 3
    connect_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        if self.kind not in BACKENDS:
            raise BackendError(f"unknown backend {self.kind!r}; expected one of {', '.join(BACKENDS)}")
        if self.address is not None and self.kind != RAY:
            raise BackendError("a Ray address needs the ray backend (--backend ray)")
        if self.address is not None and not self.address.strip():
            raise BackendError("the Ray address is empty; give HOST:PORT or auto")
        if self.retries < 0:
            raise BackendError(f"Ray task retries must be at least 0, got {self.retries}")
        if not self.connect_timeout_s > 0.0:
            raise BackendError(f"the Ray connect timeout must be positive, got {self.connect_timeout_s}")

    def in_process(self, workers: int, units: int) -> bool:
        """Whether the units run in this process: the local backend with one worker or one unit."""
        return self.kind == LOCAL and (workers == 1 or units <= 1)

    def run(
        self,
        items: Sequence[ItemT],
        workers: int,
        setup: Callable[..., Callable[[ItemT], ResultT]],
        args: tuple[Any, ...],
        commit: Callable[[ResultT], None],
        label: Callable[[ItemT], str] = str,
    ) -> None:
        """Do ``items`` with ``setup(*args)``'s function, committing each result here as it arrives
        (:func:`ovman_eval.runs.pool.run_pool`'s contract; PoolBrokenError when a worker is lost for good)."""
        if self.kind == LOCAL:
            run_pool(items, workers, setup, args, commit, label)
            return
        from ovman_eval.runs.ray_pool import run_ray  # only the ray backend imports Ray

        run_ray(items, workers, setup, args, commit, label, self.address, self.retries, self.connect_timeout_s)

    def describe(self) -> str:
        """``local`` or ``ray (ADDRESS)``, for logs and timings."""
        if self.kind == LOCAL:
            return LOCAL
        return f"{RAY} ({self.address or 'a local instance'})"


LOCAL_BACKEND = Backend()
"""This machine's process pool (the default)."""

__all__ = ["BACKENDS", "LOCAL", "LOCAL_BACKEND", "RAY", "Backend", "BackendError"]
