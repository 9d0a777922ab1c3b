"""Exact-stamp synchronisation of a camera bundle: one message per topic, all with one stamp.

ROS's exact-time policy (``message_filters.TimeSynchronizer``, not on PyPI): a bundle is complete
when every key has an item at its stamp. Completed bundles come out in stamp order; completing a
stamp drops every older incomplete one (with reliable, in-order delivery, a message of it was lost);
items no newer than the last completed stamp are stale; at most ``max_pending`` incomplete stamps
are held. Stamps are integer nanoseconds. Pure Python, no rclpy: the node feeds it from its callbacks.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclasses.dataclass
class SyncCounts:
    """What the synchroniser did with its input since the last reset."""

    completed: int = 0
    dropped_incomplete: int = 0
    dropped_stale: int = 0
    replaced: int = 0
    missing: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """Per key: incomplete stamps dropped without an item of it."""
    stale: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """Per key: its items dropped as stale."""


@dataclasses.dataclass(frozen=True)
class Bundle(Generic[T]):
    """A complete bundle: its stamp (ns) and one item per key."""

    stamp_ns: int
    items: Mapping[str, T]


class StampSynchronizer(Generic[T]):
    """Collects items by stamp and releases complete bundles (see the module docstring)."""

    def __init__(self, keys: Iterable[str], max_pending: int) -> None:
        self.keys = frozenset(keys)
        if not self.keys:
            raise ValueError("a synchroniser needs at least one key")
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1 (mapping_node node.sync_max_pending), got {max_pending}")
        self.max_pending = max_pending
        self.counts = SyncCounts()
        self._pending: dict[int, dict[str, T]] = {}
        self._last_completed: int | None = None

    @property
    def pending(self) -> int:
        """Stamps held with an incomplete bundle."""
        return len(self._pending)

    def holding(self, key: str) -> int:
        """Incomplete stamps that hold an item of ``key`` (waiting for the other keys)."""
        return sum(1 for slot in self._pending.values() if key in slot)

    def reset(self) -> None:
        """Forget every pending item, the last completed stamp and the counts (a new stream)."""
        self._pending.clear()
        self._last_completed = None
        self.counts = SyncCounts()

    def add(self, key: str, stamp_ns: int, item: T) -> Bundle[T] | None:
        """Add ``item`` of ``key`` at ``stamp_ns``; returns the bundle it completes, if any.

        A second item for the same key and stamp replaces the first (counted as ``replaced``).
        """
        if key not in self.keys:
            raise KeyError(f"unknown bundle key {key!r}; expected one of {', '.join(sorted(self.keys))}")
        if self._last_completed is not None and stamp_ns <= self._last_completed:
            self.counts.dropped_stale += 1
            self.counts.stale[key] += 1
            return None
        slot = self._pending.setdefault(stamp_ns, {})
        if key in slot:
            self.counts.replaced += 1
        slot[key] = item
        if len(slot) == len(self.keys):
            del self._pending[stamp_ns]
            for stamp in [s for s in self._pending if s < stamp_ns]:
                self._drop(stamp)
            self.counts.completed += 1
            self._last_completed = stamp_ns
            return Bundle(stamp_ns, slot)
        while len(self._pending) > self.max_pending:
            self._drop(min(self._pending))
        return None

    def _drop(self, stamp_ns: int) -> None:
        slot = self._pending.pop(stamp_ns)
        self.counts.dropped_incomplete += 1
        self.counts.missing.update(self.keys - slot.keys())
