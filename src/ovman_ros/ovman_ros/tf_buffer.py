"""Transform lookups with tf2's semantics, and the buffer that serves them where tf2_ros is absent.

:class:`TransformLookup` is the small interface the nodes use; :class:`TransformBuffer` implements it
on pytransform3d's TemporalTransformManager (chaining along the frame tree), each edge's history
interpolated as tf2's TimeCache does (linear translation, shortest-path slerp, an exact stamp
returned as stored) and every refusal tf2 makes raised as :class:`TransformError`. Stamps are
integer nanoseconds; a stamp of None asks for the latest common time. No rclpy.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
from pytransform3d.rotations import quaternion_slerp
from pytransform3d.transform_manager import StaticTransform, TemporalTransformManager, TimeVaryingTransform
from pytransform3d.transformations import pq_from_transform, transform_from_pq

from ovman_ros.bundle import Transform

UNKNOWN_FRAME = "unknown_frame"
DISCONNECTED = "disconnected"
EXTRAPOLATION_FUTURE = "extrapolation_future"
EXTRAPOLATION_PAST = "extrapolation_past"
NO_DATA = "no_data"
REASONS = (UNKNOWN_FRAME, DISCONNECTED, EXTRAPOLATION_FUTURE, EXTRAPOLATION_PAST, NO_DATA)
"""Why a lookup fails; tf2's LookupException, ConnectivityException and the extrapolation ones."""


class TransformError(LookupError):
    """A lookup that tf2 refuses too; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class TransformLookup(Protocol):
    """What a node asks of its TF source (tf2_ros's Buffer or :class:`TransformBuffer`)."""

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        """``source`` in ``target`` at ``stamp_ns`` (None: the latest common time); TransformError."""
        ...

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        """``source`` in ``target`` at the latest common time, and that time (ns; 0 when every
        transform on the way is static); TransformError."""
        ...

    def clear(self) -> None:
        """Forget the moving transforms' history (tf2's ``clear``); static transforms stay."""
        ...


@dataclasses.dataclass(frozen=True)
class _OutOfRangeError(Exception):
    """An edge has no sample at or around the asked time (raised through pytransform3d's chaining)."""

    parent: str
    child: str
    stamp_ns: int
    first_ns: int | None
    last_ns: int | None


class _EdgeHistory(TimeVaryingTransform):
    """One edge's samples, newest last, as tf2's TimeCache keeps and interpolates them."""

    def __init__(self, parent: str, child: str, cache_ns: int) -> None:
        self.parent, self.child, self.cache_ns = parent, child, cache_ns
        self.stamps: list[int] = []
        self.pqs: list[np.ndarray] = []  # (x, y, z, qw, qx, qy, qz), pytransform3d's order

    def insert(self, stamp_ns: int, pq: np.ndarray) -> bool:
        """Insert a sample; False (and nothing stored) for one older than the cache keeps."""
        if self.stamps and stamp_ns < self.stamps[-1] - self.cache_ns:
            return False
        k = bisect.bisect_left(self.stamps, stamp_ns)
        if k < len(self.stamps) and self.stamps[k] == stamp_ns:
            self.pqs[k] = pq  # a repeated stamp: the newer message wins
        else:
            self.stamps.insert(k, stamp_ns)
            self.pqs.insert(k, pq)
        drop = bisect.bisect_left(self.stamps, self.stamps[-1] - self.cache_ns)
        del self.stamps[:drop], self.pqs[:drop]
        return True

    def as_matrix(self, query_time: Any) -> np.ndarray:
        t = int(query_time)
        k = bisect.bisect_left(self.stamps, t)
        if k < len(self.stamps) and self.stamps[k] == t:
            return transform_from_pq(self.pqs[k])
        if k == 0 or k == len(self.stamps):
            first, last = (self.stamps[0], self.stamps[-1]) if self.stamps else (None, None)
            raise _OutOfRangeError(self.parent, self.child, t, first, last)
        t0, t1 = self.stamps[k - 1], self.stamps[k]
        ratio = (t - t0) / (t1 - t0)
        p0, p1 = self.pqs[k - 1], self.pqs[k]
        position = p0[:3] + ratio * (p1[:3] - p0[:3])
        rotation = quaternion_slerp(p0[3:], p1[3:], ratio, shortest_path=True)
        return transform_from_pq(np.concatenate([position, rotation]))

    def check_transforms(self) -> _EdgeHistory:
        return self


class TransformBuffer:
    """tf2's Buffer on pytransform3d: ``set_transform`` feeds it (from ``/tf`` and ``/tf_static``),
    ``lookup`` chains the tree. Dynamic edges keep ``cache_s`` seconds of history (tf2's default
    is 10 s); static edges hold at every time. A frame has one parent, as in tf2."""

    def __init__(self, cache_s: float = 10.0) -> None:
        if not (math.isfinite(cache_s) and cache_s > 0.0):
            raise ValueError(f"the TF cache must be a positive number of seconds, got {cache_s}")
        self.cache_ns = round(cache_s * 1e9)
        self._manager = TemporalTransformManager(strict_check=True, check=True)
        self._dynamic: dict[str, _EdgeHistory] = {}  # child -> its edge
        self._parent: dict[str, str] = {}
        self._static: dict[str, np.ndarray] = {}  # child -> its pq

    @property
    def frames(self) -> frozenset[str]:
        return frozenset(self._manager.nodes)

    def set_transform(self, transform: Transform, stamp_ns: int, static: bool = False) -> bool:
        """Store ``transform`` (child in parent) at ``stamp_ns``; False when it is refused as too old.

        ValueError for a transform that is not finite, a zero quaternion, a frame that is its own
        parent, or an empty frame id: tf2 refuses those too."""
        parent, child = transform.parent.lstrip("/"), transform.child.lstrip("/")
        values = (*transform.translation, *transform.rotation)
        if not parent or not child or parent == child:
            raise ValueError(f"transform {parent!r} -> {child!r}: frame ids must be non-empty and differ")
        norm = math.sqrt(sum(q * q for q in transform.rotation)) if all(map(math.isfinite, values)) else 0.0
        if not norm > 0.0:
            raise ValueError(f"transform {parent!r} -> {child!r}: not finite or a zero quaternion: {values}")
        x, y, z, w = (q / norm for q in transform.rotation)
        pq = np.array([*transform.translation, w, x, y, z], dtype=np.float64)
        if self._parent.get(child, parent) != parent:  # re-parented: the old edge goes, as in tf2
            self._manager.remove_transform(child, self._parent[child])
            self._dynamic.pop(child, None)
            self._static.pop(child, None)
        self._parent[child] = parent
        if static:
            if child in self._static and np.array_equal(self._static[child], pq):
                return True  # republished unchanged (latched /tf_static): the graph stays as it is
            self._dynamic.pop(child, None)
            self._static[child] = pq
            self._manager.add_transform(child, parent, StaticTransform(transform_from_pq(pq)))
            return True
        edge = self._dynamic.get(child)
        if edge is None:
            self._static.pop(child, None)
            edge = self._dynamic[child] = _EdgeHistory(parent, child, self.cache_ns)
            self._manager.add_transform(child, parent, edge)
        return edge.insert(int(stamp_ns), pq)

    def clear(self) -> None:
        for edge in self._dynamic.values():
            edge.stamps.clear()
            edge.pqs.clear()

    def set_message(self, message: Any, static: bool) -> int:
        """Store every transform of a tf2_msgs/TFMessage (rclpy's or rosbags'); the number stored."""
        return sum(self.set_transform(*transform_of(t), static=static) for t in message.transforms)

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        target, source = target.lstrip("/"), source.lstrip("/")
        if target == source:
            return Transform(target, source, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        for name in (target, source):
            if not self._manager.has_frame(name):
                raise TransformError(UNKNOWN_FRAME, f'"{name}" passed to lookup does not exist')
        path = self._path(target, source)
        if stamp_ns is None:
            stamp_ns = self._latest_common(path)
        try:
            matrix = self._manager.get_transform_at_time(source, target, int(stamp_ns))
        except _OutOfRangeError as gap:
            raise _extrapolation(gap, target, source) from None
        pq = pq_from_transform(matrix)
        w, x, y, z = (float(v) for v in pq[3:])
        return Transform(target, source, (float(pq[0]), float(pq[1]), float(pq[2])), (x, y, z, w))

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        target, source = target.lstrip("/"), source.lstrip("/")
        stamp = 0
        if target != source and self._manager.has_frame(target) and self._manager.has_frame(source):
            stamp = self._latest_common(self._path(target, source))
        return self.lookup(target, source, stamp), stamp

    def _path(self, target: str, source: str) -> list[str]:
        nodes = self._manager.nodes
        i, j = nodes.index(source), nodes.index(target)
        if not np.isfinite(self._manager.dist[i, j]):
            raise TransformError(
                DISCONNECTED,
                f'could not find a connection between "{target}" and "{source}" because they are not part '
                "of the same tree",
            )
        return list(self._manager._shortest_path(i, j))  # frame names; pytransform3d 3.17

    def _latest_common(self, path: Iterable[str]) -> int:
        """tf2's latest common time: the oldest of the newest samples of the dynamic edges on the
        path (0 when all are static)."""
        newest = [self._dynamic[f].stamps[-1] for f in path if f in self._dynamic and self._dynamic[f].stamps]
        return min(newest, default=0)


def transform_of(stamped: Any) -> tuple[Transform, int]:
    """``(Transform, stamp_ns)`` of a geometry_msgs/TransformStamped (rclpy's or rosbags')."""
    t, q = stamped.transform.translation, stamped.transform.rotation
    stamp = stamped.header.stamp.sec * 1_000_000_000 + stamped.header.stamp.nanosec
    transform = Transform(
        stamped.header.frame_id, stamped.child_frame_id, (float(t.x), float(t.y), float(t.z)),
        (float(q.x), float(q.y), float(q.z), float(q.w)),
    )  # fmt: skip
    return transform, int(stamp)


def _extrapolation(gap: _OutOfRangeError, target: str, source: str) -> TransformError:
    edge = f'"{gap.child}" in "{gap.parent}" (on the way from "{source}" to "{target}")'
    if gap.last_ns is None or gap.first_ns is None:
        return TransformError(NO_DATA, f"no data for {edge} at {gap.stamp_ns} ns")
    if gap.stamp_ns > gap.last_ns:
        return TransformError(
            EXTRAPOLATION_FUTURE,
            f"lookup would require extrapolation into the future: {gap.stamp_ns} ns is after the latest data "
            f"for {edge}, {gap.last_ns} ns",
        )
    return TransformError(
        EXTRAPOLATION_PAST,
        f"lookup would require extrapolation into the past: {gap.stamp_ns} ns is before the earliest data for "
        f"{edge}, {gap.first_ns} ns",
    )
