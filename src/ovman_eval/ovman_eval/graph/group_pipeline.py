"""benchmark_node's scheduler of recorded groups, without ROS: maps built ahead of the embodied runs.

:class:`GroupPipeline` prepares each group (both visits mapped, then its static gate) while the node
drives an earlier group's embodied runs, all in one thread: each group is a
:class:`~ovman_eval.graph.stepwise.Stepwise` run on whenever something it may wait for has happened.
A failure of the preparation is raised to the code that takes groups, never inside a callback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ovman_eval.benchmark.request import WorkUnit
from ovman_eval.graph.stepwise import StepsT, Stepwise, WaitTimeoutError
from ovman_eval.runs.run_dir import BenchmarkError

T = TypeVar("T")


class GraphCallError(RuntimeError):
    """A node of the graph is missing, refused a request, or did not answer in time (names which)."""


class GroupPipeline(Generic[T]):
    """Prepares ``units`` in order with ``steps_of(unit)``, at most ``ahead`` (≥ 1) beyond the last
    unit taken, one at a time (mapping_node maps one visit at a time and query_node holds one pair);
    :meth:`step` is called from the node's callbacks and waits, :meth:`check` raises a failure."""

    def __init__(self, units: Sequence[WorkUnit], steps_of: Callable[[WorkUnit], StepsT[T]], ahead: int) -> None:
        if ahead < 1:
            raise ValueError(f"ahead must be at least 1 group, got {ahead}")
        self.units = list(units)
        self.steps_of = steps_of
        self.ahead = ahead
        self.started = 0
        """How many units have started (the next to start is ``units[started]``)."""
        self.taken = 0
        self._job: tuple[WorkUnit, Stepwise[T]] | None = None
        self._ready: dict[str, T] = {}
        self._error: GraphCallError | BenchmarkError | None = None
        self.stopped = False
        """True once a failure was raised: nothing more is prepared."""

    def step(self) -> None:
        """Run the preparation on as far as it goes without waiting. A failure (a step's
        GraphCallError or BenchmarkError, or a wait past its deadline as a GraphCallError) is kept
        for :meth:`check` and ends the preparation."""
        if self._error is not None or self.stopped:
            return
        try:
            while True:
                if self._job is not None:
                    unit, job = self._job
                    if not job.advance():
                        return
                    self._ready[unit.group_id] = job.result
                    self._job = None
                if self.started >= min(len(self.units), self.taken + self.ahead):
                    return
                unit = self.units[self.started]
                self.started += 1
                self._job = (unit, Stepwise(self.steps_of(unit)))
        except WaitTimeoutError as err:
            self._error = GraphCallError(f"{err}: nothing in time (benchmark_node.node timeouts)")
        except (GraphCallError, BenchmarkError) as err:
            self._error = err

    def check(self) -> None:
        """Run the preparation on (its deadlines pass too) and raise what it failed with, once:
        the preparation then stops, and clean-up that waits afterwards is not interrupted again."""
        self.step()
        if self._error is not None:
            error, self._error, self.stopped = self._error, None, True
            raise error

    def take(self, unit: WorkUnit, wait: Callable[[], None]) -> T:
        """``unit``'s prepared result (units are taken in order), calling ``wait()`` (the node spins
        a while) until it is ready; raises what the preparation failed with."""
        if self.taken >= len(self.units) or self.units[self.taken].group_id != unit.group_id:
            raise ValueError(f"group {unit.group_id} taken out of order")
        self.taken += 1
        while unit.group_id not in self._ready:
            if self.stopped:
                raise GraphCallError(f"group {unit.group_id}: the preparation stopped after a failure")
            wait()
            self.check()
        self.check()
        return self._ready.pop(unit.group_id)


__all__ = ["GraphCallError", "GroupPipeline"]
