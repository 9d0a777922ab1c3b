"""Every topic, service and action name of the OVMAN graph, defined once, each a relative name.

A relative name resolves in the node's namespace (``camera/bundle`` is ``/robot1/camera/bundle``
under ``__ns:=/robot1``), so one graph runs under a namespace without remapping and two run side by
side on one domain. Services are named for what they do (``sim/act``), not for the node serving
them. ``/clock``, ``/tf`` and ``/tf_static`` stay absolute by convention; a namespaced graph remaps
them (:data:`NAMESPACED_REMAPPINGS`). Recordings store root-namespace names (:func:`recorded`).
"""

from __future__ import annotations

# ---- the camera (what a robot's RGB-D driver publishes, and the simulator's extras) -------------
RGB = "camera/color/image_raw"
"""sensor_msgs/Image, ``rgb8``, frame ``camera_color_optical_frame``."""
DEPTH = "camera/depth/image_raw"
"""sensor_msgs/Image, planar depth registered to the colour image (:func:`ovman_ros.bundle.depth_image`)."""
INSTANCES = "camera/instances/image_raw"
"""sensor_msgs/Image, ``32SC1`` per-frame segment ids of the simulator (0 = no object)."""
INSTANCE_LABELS = "camera/instances/labels"
"""std_msgs/String, JSON segment id → category of the simulator's segments, per frame."""
CAMERA_INFO = "camera/color/camera_info"
"""sensor_msgs/CameraInfo shared by the three images (they are registered)."""
CAMERA_BUNDLE = "camera/bundle"
"""ovman_interfaces/CameraBundle: the five camera messages of one frame in one message."""
SEGMENTS = "segmentation/segments"
"""ovman_interfaces/Segments: a frame's segments from a segmenter node (segmenter_node, or a robot's
own), which mapping_node fuses with ``segmenter.kind: topic``."""

# ---- the robot -----------------------------------------------------------------------------
TF = "tf"
"""tf2_msgs/TFMessage: the moving part of the frame tree; the camera's pose is looked up in it."""
TF_STATIC = "tf_static"
"""tf2_msgs/TFMessage, latched: the parts of the frame tree that never move."""
ODOM = "odom"
"""nav_msgs/Odometry: ``base_link`` in ``odom``."""
MAP = "map"
"""nav_msgs/OccupancyGrid of the reachable grid (latched)."""
DIAGNOSTICS = "/diagnostics"
"""diagnostic_msgs/DiagnosticArray: a node's health (mapping_node: frames fused, skipped, dropped,
latency), absolute as diagnostic_updater and the aggregator have it."""
CLOCK = "clock"
"""rosgraph_msgs/Clock: the simulator's time, the graph's time base with ``use_sim_time``."""
GROUND_TRUTH = "ovman/ground_truth"
"""std_msgs/String, JSON, evaluation only: the simulator's state per frame. No agent reads it."""

# ---- OVMAN's interfaces -------------------------------------------------------------------------
VISIT_MAP = "ovman/map/visit{visit}"
"""ovman_interfaces/InstanceMap of one visit, latched (``.format(visit=1)``)."""
VISIT_MARKERS = "ovman/map/visit{visit}/markers"
"""visualization_msgs/MarkerArray of one visit's map, latched."""
CHANGES = "ovman/changes"
"""ovman_interfaces/ChangeSet between the latest visit maps, latched."""
ANSWER_MARKERS = "ovman/answer/markers"
"""visualization_msgs/MarkerArray of the latest answer, latched."""
QUERY = "ovman/query"
"""ovman_interfaces/srv/Query, served by query_node."""
QUERY_LOAD_VISITS = "query/load_visits"
"""ovman_interfaces/srv/LoadVisits, served by query_node: a stored visit pair to answer from."""
NAVIGATE = "ovman/navigate"
"""ovman_interfaces/action/Navigate, served by nav_node."""
TARGET_UPDATE = "ovman/target_update"
"""ovman_interfaces/TargetUpdate: a moving target's new estimate, to nav_node."""
PLAN = "ovman/plan"
"""nav_msgs/Path: nav_node's current plan, latched."""

# ---- the simulator's and the mapper's services -------------------------------------------------
SIM_LOAD_VISIT = "sim/load_visit"
SIM_ACT = "sim/act"
SIM_ACT_SEQUENCE = "sim/act_sequence"
SIM_PLAY_TOUR = "sim/play_tour"
MAPPING_START_VISIT = "mapping/start_visit"
MAPPING_FINISH_VISIT = "mapping/finish_visit"

PLAYER_NAMESPACE = "player"
"""The benchmark graph's tour player (a second sim_node) runs in this namespace under the graph's:
its topics and services are ``player/camera/bundle``, ``player/sim/play_tour``... relative to the
other nodes, and never meet the live simulator's."""

NAMESPACED_REMAPPINGS = (("/clock", CLOCK), ("/tf", TF), ("/tf_static", TF_STATIC))
"""What a node of a namespaced graph is started with (``-r /clock:=clock``...): the conventionally
absolute names then resolve in its namespace too (in the root namespace they change nothing)."""


def recorded(name: str) -> str:
    """The name a recording stores for ``name``: fully qualified from the root namespace."""
    return "/" + name


def relative(recorded_name: str) -> str:
    """The relative name of a recorded (root-namespace) name: ``/camera/bundle`` → ``camera/bundle``."""
    return recorded_name.lstrip("/")
