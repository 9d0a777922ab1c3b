"""The QoS of every OVMAN endpoint, defined once.

- :data:`LATCHED` (reliable, transient local, depth 1): state a late subscriber must still get:
  ``map``, ``tf_static``, the visit maps, the change set, the answer markers and the plan (what
  ``/map`` and ``/tf_static`` use everywhere in ROS 2).
- :data:`TF` (reliable, volatile, depth 100): tf2_ros' TransformBroadcaster and TransformListener.
- :func:`frames`: camera images, camera info, the camera bundle, odometry, ground truth and the
  clock: **reliable and volatile**, a documented choice instead of the sensor-data profile (best
  effort): the benchmark must not lose a frame, and a reliable publisher still serves best-effort
  subscribers (RViz's image display, a sensor-data subscriber). Volatile as drivers publish: a
  subscriber gets the frames published after it matched, not old ones. ``keep_all``
  (mapping_node in the benchmark graph) keeps every frame that arrived while fusing lags.

Every subscription here is volatile, so it matches volatile and transient-local publishers alike:
nav_node's ``odom`` takes an ordinary (volatile) odometry publisher, and mapping_node a camera
driver's reliable topics.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

LATCHED = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
TF = QoSProfile(
    depth=100,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)


def frames(depth: int, *, keep_all: bool = False) -> QoSProfile:
    """Per-frame topics (see the module docstring): reliable, volatile, the last ``depth`` kept
    (every frame with ``keep_all``)."""
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )
