"""Frames handed from the thread that receives them to the one that fuses them, by a stated policy.

``keep_all``: every frame is fused, in order (the benchmark, a recorded tour). ``keep_newest``: at
most one frame waits; a newer one replaces it, and the replaced frame is counted as skipped (a
robot's camera that publishes faster than the mapper fuses). ``max_rate_hz`` > 0 also skips every
frame stamped less than ``1 / max_rate_hz`` after the last frame let through, by image stamp, so
the same tour gives the same map whatever the machine. Thread-safe; no rclpy.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Generic, TypeVar

T = TypeVar("T")
KEEP_ALL, KEEP_NEWEST = "keep_all", "keep_newest"
POLICIES = (KEEP_ALL, KEEP_NEWEST)


@dataclasses.dataclass
class QueueCounts:
    """What the queue did since the last reset."""

    accepted: int = 0
    skipped_busy: int = 0
    """Replaced by a newer frame while the fuser was busy (keep_newest)."""
    skipped_rate: int = 0
    """Stamped too soon after the previous frame let through (max_rate_hz)."""


class FrameQueue(Generic[T]):
    """See the module docstring."""

    def __init__(self, policy: str, max_rate_hz: float) -> None:
        if policy not in POLICIES:
            raise ValueError(f"the frame policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if not max_rate_hz >= 0.0:
            raise ValueError(f"max_rate_hz must be 0 (no limit) or positive frames a second, got {max_rate_hz}")
        self.policy = policy
        self._min_gap_ns = round(1e9 / max_rate_hz) if max_rate_hz > 0.0 else 0
        self._lock = threading.Lock()
        self._items: collections.deque[tuple[int, T]] = collections.deque()
        self._last_ns: int | None = None
        self.counts = QueueCounts()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, stamp_ns: int, item: T) -> bool:
        """Queue ``item``; False when it is skipped at once by the rate limit."""
        with self._lock:
            if self._min_gap_ns and self._last_ns is not None and stamp_ns - self._last_ns < self._min_gap_ns:
                self.counts.skipped_rate += 1
                return False
            self._last_ns = stamp_ns
            if self.policy == KEEP_NEWEST and self._items:
                self._items.clear()
                self.counts.skipped_busy += 1
            self._items.append((stamp_ns, item))
            self.counts.accepted += 1
            return True

    def take(self) -> tuple[int, T] | None:
        """The oldest waiting frame (its stamp and item), or None."""
        with self._lock:
            return self._items.popleft() if self._items else None

    def reset(self) -> None:
        with self._lock:
            self._items.clear()
            self._last_ns = None
            self.counts = QueueCounts()
