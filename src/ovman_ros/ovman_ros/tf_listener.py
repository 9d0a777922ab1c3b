"""A node's view of the frame tree: tf2_ros's Buffer and TransformListener where tf2_ros imports
(a ROS 2 workstation, the colcon route), else :class:`ovman_ros.tf_buffer.TransformBuffer` fed from
``/tf`` and ``/tf_static`` with tf2_ros's QoS (the pip route). Both answer
:class:`ovman_ros.tf_buffer.TransformLookup` with the same refusals.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile
from rclpy.time import Time
from tf2_msgs.msg import TFMessage

from ovman_ros.bundle import Transform
from ovman_ros.tf_buffer import (
    DISCONNECTED,
    EXTRAPOLATION_FUTURE,
    EXTRAPOLATION_PAST,
    NO_DATA,
    UNKNOWN_FRAME,
    TransformBuffer,
    TransformError,
    TransformLookup,
    transform_of,
)

AUTO, TF2_ROS, PYTRANSFORM3D = "auto", "tf2_ros", "pytransform3d"
BACKENDS = (AUTO, TF2_ROS, PYTRANSFORM3D)
TF_TOPIC, TF_STATIC_TOPIC = "/tf", "/tf_static"
"""tf2_ros's topics (absolute; a namespaced graph remaps them)."""
DYNAMIC_QOS = QoSProfile(depth=100, durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
STATIC_QOS = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
"""tf2_ros's TransformListener QoS (reliable by default)."""


def tf2_ros_available() -> bool:
    return importlib.util.find_spec("tf2_ros") is not None


def transform_source(
    node: Node, backend: str, cache_s: float, on_transform: Callable[[], None] | None = None, keep_all: bool = False
) -> tuple[TransformLookup, str]:
    """The lookup ``node`` reads the tree through, and its backend's name; ``on_transform`` is called
    after each /tf or /tf_static message where the backend lets it (the pip route; with tf2_ros
    the node polls). ValueError for an unknown ``backend`` or tf2_ros asked for and absent."""
    if backend not in BACKENDS:
        raise ValueError(f"the TF backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == TF2_ROS or (backend == AUTO and tf2_ros_available()):
        if not tf2_ros_available():
            raise ValueError("the TF backend tf2_ros was asked for, but tf2_ros does not import here")
        import tf2_ros

        buffer = tf2_ros.Buffer(cache_time=Duration(seconds=cache_s), node=node)
        lookup = Tf2RosLookup(buffer)
        lookup.listener = tf2_ros.TransformListener(buffer, node)
        return lookup, TF2_ROS
    return BufferListener(node, TransformBuffer(cache_s), on_transform, keep_all), PYTRANSFORM3D


class BufferListener:
    """A :class:`TransformBuffer` fed by ``node``'s subscriptions to /tf and /tf_static."""

    def __init__(
        self, node: Node, buffer: TransformBuffer, on_transform: Callable[[], None] | None, keep_all: bool = False
    ) -> None:
        self.buffer, self._node, self._on_transform = buffer, node, on_transform
        self._lock = threading.Lock()
        """The buffer is read and fed from any executor thread (nav_node reads it while a goal runs)."""
        self.refused = 0
        """Transforms refused as malformed (not finite, a zero quaternion, a frame its own parent)."""
        # keep_all: no transform lost while the node lags (frames kept by their own keep_all wait for them).
        dynamic = QoSProfile(depth=100, durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_ALL)
        node.create_subscription(
            TFMessage, TF_TOPIC, lambda m: self._on(m, False), dynamic if keep_all else DYNAMIC_QOS
        )
        node.create_subscription(TFMessage, TF_STATIC_TOPIC, lambda m: self._on(m, True), STATIC_QOS)
        # Unlike tf2_ros's Buffer, no clearing on a jump back of the node's clock: in the benchmark
        # graph that clock is the live simulator's, not the player's whose tree this is. The node
        # clears the history where its stream restarts (mapping_node: at every start_visit).

    def clear(self) -> None:
        with self._lock:
            self.buffer.clear()

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        with self._lock:
            return self.buffer.lookup(target, source, stamp_ns)

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        with self._lock:
            return self.buffer.latest(target, source)

    def _on(self, message: TFMessage, static: bool) -> None:
        for stamped in message.transforms:
            try:
                with self._lock:
                    self.buffer.set_transform(*transform_of(stamped), static=static)
            except ValueError as err:
                self.refused += 1
                self._node.get_logger().warning(f"refused a transform: {err}", throttle_duration_sec=5.0)
        if self._on_transform is not None:
            self._on_transform()


class Tf2RosLookup:
    """A tf2_ros Buffer (fed by its TransformListener, kept as ``listener``) behind :class:`TransformLookup`."""

    def __init__(self, buffer: Any) -> None:
        import tf2_ros

        self._tf2 = tf2_ros
        self.buffer = buffer
        self.listener: Any = None

    def clear(self) -> None:
        self.buffer.clear()

    def lookup(self, target: str, source: str, stamp_ns: int | None) -> Transform:
        transform, _ = self._lookup(target, source, Time() if stamp_ns is None else Time(nanoseconds=int(stamp_ns)))
        return transform

    def latest(self, target: str, source: str) -> tuple[Transform, int]:
        return self._lookup(target, source, Time())  # tf2 stamps it with the latest common time

    def _lookup(self, target: str, source: str, when: Time) -> tuple[Transform, int]:
        try:
            stamped = self.buffer.lookup_transform(target, source, when)
        except self._tf2.LookupException as err:
            raise TransformError(UNKNOWN_FRAME, str(err)) from None
        except self._tf2.ConnectivityException as err:
            raise TransformError(DISCONNECTED, str(err)) from None
        except self._tf2.ExtrapolationException as err:
            raise TransformError(_extrapolation_reason(str(err)), str(err)) from None
        return transform_of(stamped)


def _extrapolation_reason(message: str) -> str:
    """tf2's extrapolation exceptions share one Python class; the text says which it was."""
    text = message.lower()
    if "future" in text:
        return EXTRAPOLATION_FUTURE
    if "past" in text:
        return EXTRAPOLATION_PAST
    return NO_DATA
