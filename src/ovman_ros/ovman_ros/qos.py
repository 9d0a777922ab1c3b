"""The QoS of every OVMAN endpoint, defined once.

:data:`LATCHED` (reliable, transient local, depth 1): state a late subscriber must still get
(``map``, ``tf_static``, the visit maps, the change set, the answer markers, the plan); :data:`TF`:
tf2_ros's; :func:`frames`: every per-frame topic, reliable and volatile. Every subscription here is
volatile, so it matches volatile and transient-local publishers alike.
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
    """Per-frame topics (camera, camera info, bundle, odometry, ground truth, clock): reliable,
    volatile, the last ``depth`` kept (every frame with ``keep_all``).

    Reliable instead of the sensor-data profile, a documented choice: the benchmark must not lose a
    frame, and a reliable publisher still serves best-effort subscribers (RViz's image display).
    Volatile as drivers publish: a subscriber gets the frames published after it matched."""
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )
