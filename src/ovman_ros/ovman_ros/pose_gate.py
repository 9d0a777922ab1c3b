"""Frames held until the frame tree gives their camera's pose at their stamp, then released in order.

A node adds each camera frame with its stamp and optical frame id; :meth:`PoseGate.poll` hands out,
oldest first, every frame whose transform into the target frame is available, with that transform.
A frame waits (and so do the newer ones behind it) while the lookup fails in a way a later message
can mend; it is dropped, with the reason counted, once it has waited ``timeout_s``, at once when the
buffer's history no longer reaches back to it, or when more than ``max_pending`` frames wait. A frame
is never paired with another stamp's pose. Pure Python: ``now`` is the caller's steady clock (s).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Generic, TypeVar

from ovman_ros.bundle import Transform
from ovman_ros.tf_buffer import EXTRAPOLATION_PAST, TransformError, TransformLookup

T = TypeVar("T")
PENDING_FULL = "pending_full"
"""A drop reason besides :data:`ovman_ros.tf_buffer.REASONS`: more than ``max_pending`` frames waited."""


@dataclasses.dataclass(frozen=True)
class Dropped(Generic[T]):
    """A frame given up: its item, the reason (a :data:`ovman_ros.tf_buffer.REASONS` or
    :data:`PENDING_FULL`) and what the lookup said."""

    item: T
    stamp_ns: int
    reason: str
    message: str


@dataclasses.dataclass
class _Waiting(Generic[T]):
    stamp_ns: int
    frame: str
    item: T
    since: float
    last_error: TransformError | None = None


class PoseGate(Generic[T]):
    """Camera frames waiting for their pose in ``target`` (see the module docstring)."""

    def __init__(self, lookup: TransformLookup, target: str, timeout_s: float, max_pending: int) -> None:
        if not target:
            raise ValueError("the target frame of the camera poses must be a non-empty frame id")
        if not timeout_s > 0.0:
            raise ValueError(f"the pose timeout must be positive seconds, got {timeout_s}")
        if max_pending < 1:
            raise ValueError(f"at least one frame must be able to wait for its pose, got {max_pending}")
        self.lookup, self.target, self.timeout_s, self.max_pending = lookup, target, timeout_s, max_pending
        self._waiting: collections.deque[_Waiting[T]] = collections.deque()
        self.released = 0
        self.drops: collections.Counter[str] = collections.Counter()

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def reset(self) -> list[T]:
        """Forget the waiting frames (returned) and the counts."""
        items = [w.item for w in self._waiting]
        self._waiting.clear()
        self.released, self.drops = 0, collections.Counter()
        return items

    def add(self, stamp_ns: int, frame: str, item: T, now: float) -> list[Dropped[T]]:
        """Hold ``item`` (a frame in optical frame ``frame`` at ``stamp_ns``); the frames dropped to
        keep at most ``max_pending`` waiting (the oldest first)."""
        self._waiting.append(_Waiting(int(stamp_ns), frame, item, now))
        dropped = []
        while len(self._waiting) > self.max_pending:
            oldest = self._waiting.popleft()
            message = f"more than {self.max_pending} frames waited for their camera pose"
            dropped.append(self._drop(oldest, PENDING_FULL, message))
        return dropped

    def poll(self, now: float) -> tuple[list[tuple[T, Transform]], list[Dropped[T]]]:
        """The frames whose pose is now known, oldest first, each with its optical frame's pose in
        the target frame, and the frames given up meanwhile."""
        ready: list[tuple[T, Transform]] = []
        dropped: list[Dropped[T]] = []
        while self._waiting:
            oldest = self._waiting[0]
            try:
                pose = self.lookup.lookup(self.target, oldest.frame, oldest.stamp_ns)
            except TransformError as err:
                if err.reason == EXTRAPOLATION_PAST or now - oldest.since >= self.timeout_s:
                    self._waiting.popleft()
                    waited = "" if err.reason == EXTRAPOLATION_PAST else f" within {self.timeout_s:g} s"
                    dropped.append(self._drop(oldest, err.reason, f"no camera pose{waited}: {err}"))
                    continue
                oldest.last_error = err
                break
            self._waiting.popleft()
            self.released += 1
            ready.append((oldest.item, pose))
        return ready, dropped

    def _drop(self, waiting: _Waiting[T], reason: str, message: str) -> Dropped[T]:
        self.drops[reason] += 1
        return Dropped(waiting.item, waiting.stamp_ns, reason, f"frame at {waiting.stamp_ns} ns: {message}")
