"""ROS messages of ovman_mapping, built from core values and back; never imports rclpy.

The only module of the package that imports message packages, so every conversion is unit-testable
without a graph: camera bundle (five topics or one ``ovman_interfaces/CameraBundle``, the pose looked
up on ``/tf``) → Observation;
core InstanceMap ⇄ ``ovman_interfaces/InstanceMap``; InstanceMap → MarkerArray for RViz. Frames: the
core's AI2-THOR world (metres, y up, left-handed) ⇄ REP 103 ``map``, every point through
:mod:`ovman_core.frames`. Wire ids: an instance's ``id`` is its index in the core map (0..N-1); a
received map's instances get uids ``v<visit>:<id>``. Points, features and histograms go as float32.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from ovman_ros.messages import MessageError, camera_bundle_items, depth_array, image_array, stamp_of, time_msg
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from ovman_core.boxes import Box3, Vec3
from ovman_core.config import ConfigError, LimitsConfig, MapMarkersConfig
from ovman_core.frames import (
    camera_angles,
    ros_to_thor_point,
    ros_to_thor_points,
    thor_to_ros_point,
    thor_to_ros_points,
)
from ovman_core.observation import Observation
from ovman_interfaces.msg import Instance as InstanceMsg
from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
from ovman_mapping.instances import CrossVisitEvidence, Instance, InstanceMap, Sighting, map_problem
from ovman_ros import bundle

MAX_CAMERA_ROLL_RAD = 1e-6
"""The core's camera has yaw and pitch only; a larger roll is rejected."""
BOX_NAMESPACE = "visit{visit}/boxes"
LABEL_NAMESPACE = "visit{visit}/labels"
MIN_MARKER_SIZE = 0.01
"""(m): box markers are at least this thick, so a flat instance stays visible."""
TEXT_ALPHA = 1.0
"""Label texts are opaque."""


class MapMessageError(ValueError):
    """A message cannot be converted: a field is missing, inconsistent or in the wrong frame."""


# ---- the camera bundle -------------------------------------------------------------------------


def camera_from_transform(pose: bundle.Transform, map_frame: str) -> tuple[Vec3, float, float]:
    """``(camera centre (AI2-THOR world, m), yaw_deg, horizon_deg)`` of the optical frame's pose
    in ``map`` (REP 103; a lookup of the image's frame in ``map_frame`` on the frame tree).

    Inverts :func:`ovman_ros.bundle.optical_pose`: the optical rotation is ``camera_link`` times
    the fixed optical rotation, and ``camera_link`` is yaw about z then pitch about y (down positive).
    """
    if pose.parent != map_frame:
        raise MapMessageError(f"camera pose is in frame '{pose.parent}'; expected '{map_frame}'")
    (x, y, z), q = pose.translation, pose.rotation
    values = (x, y, z, *q)
    if not all(math.isfinite(v) for v in values) or not any(q):
        raise MapMessageError(f"camera pose has a non-finite position or an invalid quaternion: {values}")
    yaw_deg, horizon_deg, roll = camera_angles(q)
    if abs(roll) > MAX_CAMERA_ROLL_RAD:
        raise MapMessageError(f"camera pose is rolled by {math.degrees(roll):.4f} deg; mapping needs a level camera")
    return ros_to_thor_point((x, y, z)), yaw_deg, horizon_deg


def observation_from_bundle(
    rgb: Image,
    depth: Image,
    instances: Image,
    labels: bundle.LabelTable,
    camera_info: CameraInfo,
    camera_pose: bundle.Transform | None,
    map_frame: str,
    step_ns: int,
) -> Observation:
    """The Observation of one synchronised bundle (see :mod:`ovman_ros.bundle` for the topics) whose
    optical frame is at ``camera_pose`` in ``map_frame``:
    :func:`observation_from_camera` at :func:`ovman_ros.bundle.frame_step` of its stamp, with the simulator's
    segments and labels; ``segment_instances`` is empty: ground-truth ids never reach the mapping.
    """
    where = f"camera bundle at {labels.stamp_ns} ns"
    step = bundle.frame_step(labels.stamp_ns, step_ns)
    observation = observation_from_camera(rgb, depth, camera_info, camera_pose, map_frame, step, where)
    try:
        segments = image_array(instances)
    except (MessageError, ValueError) as err:
        raise MapMessageError(f"{where}: {err}") from None
    _check_image(where, "instances", instances, (bundle.INSTANCES_ENCODING,), observation.depth.shape)
    return dataclasses.replace(observation, segments=segments, segment_labels=dict(labels.labels))


def observation_from_camera(
    rgb: Image,
    depth: Image,
    camera_info: CameraInfo,
    camera_pose: bundle.Transform | None,
    map_frame: str,
    step: int,
    where: str = "",
) -> Observation:
    """The Observation of a plain RGB-D frame (what a robot's camera gives: colour, depth in 32FC1
    metres or 16UC1 millimetres, camera_info, and the optical frame's pose in ``map_frame`` from TF) at
    world step ``step``; no segments (a label-blind segmenter makes its own). ``camera_pose`` None:
    the camera at the origin, level, for a segmenter alone (segmenter_node), which reads pixels only."""
    where = where or f"camera frame at {stamp_of(rgb.header)} ns"
    try:
        intrinsics = bundle.intrinsics_from_camera_info(camera_info.width, camera_info.height, camera_info.k)
        colour, planar_depth = image_array(rgb), depth_array(depth)
    except (bundle.BundleFormatError, MessageError, ValueError) as err:
        raise MapMessageError(f"{where}: {err}") from None
    size = (intrinsics.height, intrinsics.width)
    _check_image(where, "rgb", rgb, (bundle.RGB_ENCODING,), size)
    _check_image(where, "depth", depth, bundle.DEPTH_ENCODINGS, size)
    position, yaw_deg, horizon_deg = (
        ((0.0, 0.0, 0.0), 0.0, 0.0) if camera_pose is None else camera_from_transform(camera_pose, map_frame)
    )
    return bundle.camera_frame(colour, planar_depth, intrinsics, position, yaw_deg, horizon_deg, step)


def _check_image(where: str, name: str, image: Image, encodings: tuple[str, ...], size: tuple[int, int]) -> None:
    if image.encoding not in encodings or (image.height, image.width) != size:
        raise MapMessageError(
            f"{where}: {name} image is {image.encoding} {image.width}x{image.height}; "
            f"expected {' or '.join(encodings)} {size[1]}x{size[0]} (camera_info)"
        )


# ---- instance maps -----------------------------------------------------------------------------


def observation_from_topics(
    items: Mapping[str, Any], camera_pose: bundle.Transform | None, map_frame: str, step_ns: int
) -> Observation:
    """:func:`observation_from_bundle` of a bundle keyed by topic (a synchroniser's complete
    items: the three images, the parsed labels table and camera_info) with its camera's pose."""
    return observation_from_bundle(
        items[bundle.RGB_TOPIC],
        items[bundle.DEPTH_TOPIC],
        items[bundle.INSTANCES_TOPIC],
        items[bundle.INSTANCE_LABELS_TOPIC],
        items[bundle.CAMERA_INFO_TOPIC],
        camera_pose,
        map_frame,
        step_ns,
    )


def camera_bundle_frame(message: Any) -> tuple[int, str, dict[str, Any]]:
    """The stamp (ns), optical frame id (the colour image's) and items keyed by topic of one
    ovman_interfaces/CameraBundle (the five messages that :func:`observation_from_topics` takes
    from a synchroniser, in one message: rclpy's, or as :func:`ovman_ros.bundle_cdr.decode` reads
    it); MapMessageError when its messages' stamps differ or its table is malformed."""
    try:
        stamp, items = camera_bundle_items(message)
    except MessageError as err:
        raise MapMessageError(str(err)) from None
    return stamp, message.rgb.header.frame_id, items


def _point(p: Vec3) -> Point:
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))


def _ros_box(box: Box3) -> tuple[Vec3, Vec3]:
    a, b = np.array(thor_to_ros_point(box.lo)), np.array(thor_to_ros_point(box.hi))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return (float(lo[0]), float(lo[1]), float(lo[2])), (float(hi[0]), float(hi[1]), float(hi[2]))


def _thor_box(lo: Point, hi: Point) -> Box3:
    a = np.array(ros_to_thor_point((lo.x, lo.y, lo.z)))
    b = np.array(ros_to_thor_point((hi.x, hi.y, hi.z)))
    low, high = np.minimum(a, b), np.maximum(a, b)
    return Box3(tuple(float(v) for v in low), tuple(float(v) for v in high))  # type: ignore[arg-type]


def instance_msg(instance: Instance, wire_id: int, frame_stamps_ns: Sequence[int]) -> InstanceMsg:
    """One core instance as a message; ``frame_stamps_ns[k]`` is the stamp of the visit's frame k."""
    labels = sorted(instance.labels.items(), key=lambda item: (-item[1], item[0]))
    box_min, box_max = _ros_box(instance.box)
    try:
        first = frame_stamps_ns[instance.sightings[0].frame_index]
        last = frame_stamps_ns[instance.sightings[-1].frame_index]
    except IndexError:
        raise MapMessageError(
            f"instance {instance.uid}: sighting frames {instance.sightings[0].frame_index}.."
            f"{instance.sightings[-1].frame_index} but only {len(frame_stamps_ns)} frame stamps were given"
        ) from None
    return InstanceMsg(
        id=wire_id,
        label=instance.label,
        label_candidates=[name for name, _ in labels],
        label_probs=[float(share) for _, share in labels],
        centroid=_point(thor_to_ros_point(instance.position)),
        box_min=_point(box_min),
        box_max=_point(box_max),
        points=thor_to_ros_points(np.asarray(instance.points, dtype=float).reshape(-1, 3)).astype(np.float32).ravel(),
        feature_dim=len(instance.feature),
        feature=np.asarray(instance.feature, dtype=np.float32),
        colour_histogram=np.asarray(instance.colour, dtype=np.float32),
        first_seen=time_msg(first),
        last_seen=time_msg(last),
        num_observations=len(instance.sightings),
        moving=bool(instance.moving),
    )


def instance_map_msg(
    instance_map: InstanceMap,
    frame_stamps_ns: Sequence[int],
    frame_id: str,
    stamp: Time,
    map_id: str = "",
    follows: str = "",
) -> InstanceMapMsg:
    """The InstanceMap message of a core map; wire ids are the instances' indices. ``map_id`` names
    the map and ``follows`` (a visit-2 map) the visit-1 map it is the second visit of (:class:`MapNames`)."""
    if instance_map.visit not in (InstanceMapMsg.VISIT_1, InstanceMapMsg.VISIT_2):
        raise MapMessageError(f"InstanceMap.visit must be 1 or 2, got {instance_map.visit}")
    evidence = instance_map.prior
    index = {instance.uid: n for n, instance in enumerate(instance_map.instances)}
    return InstanceMapMsg(
        header=Header(stamp=stamp, frame_id=frame_id),
        map_id=map_id,
        follows=follows,
        visit=instance_map.visit,
        encoder=instance_map.encoder,
        instances=[instance_msg(i, n, frame_stamps_ns) for n, i in enumerate(instance_map.instances)],
        cross_visit=evidence is not None,
        gone_ids=[] if evidence is None else sorted(_index_in_uid(uid, 1) for uid in evidence.gone),
        new_ids=[] if evidence is None else sorted(index[uid] for uid in evidence.new),
    )


def _index_in_uid(uid: str, visit: int) -> int:
    """n of a mapper's uid ``v<visit>:<n>``: the n-th instance of its map, its wire id there."""
    prefix, _, number = uid.partition(":")
    if prefix != f"v{visit}" or not number.isdigit():
        raise MapMessageError(f"cross-visit evidence names {uid!r}, not an instance of a visit-{visit} map")
    return int(number)


class MapNames:
    """Names for a mapper's maps (InstanceMap ``map_id``, ``follows``): ``<session>-<n>``, n counting
    the maps named; a visit-2 map follows the latest visit-1 map named before it ("" when none).
    ``session`` tells this mapper's maps from those of an earlier run of it (mapping_node: its start
    time on the wall clock, ns)."""

    def __init__(self, session: int) -> None:
        self.session = session
        self.count = 0
        self.visit1 = ""

    def name(self, visit: int) -> tuple[str, str]:
        """(map_id, follows) of the next map, of ``visit``."""
        self.count += 1
        map_id = f"{self.session}-{self.count}"
        if visit == InstanceMapMsg.VISIT_1:
            self.visit1 = map_id
            return map_id, ""
        return map_id, self.visit1


def _ns(time: Time) -> int:
    return int(time.sec) * 1_000_000_000 + int(time.nanosec)


def map_uid(visit: int, wire_id: int) -> str:
    """The core uid given to instance ``wire_id`` of a received visit-``visit`` map."""
    return f"v{visit}:{wire_id}"


def instance_from_msg(message: InstanceMsg, visit: int) -> Instance:
    """A core instance from its message (its points float32 values): ``centroid`` is the core's
    position (the box centre of its fused points; of its latest fragment for a moving instance), and
    the sensor stamps stand in for world steps (``first_seen``/``last_seen`` in ns: only their order
    is used)."""
    uid = map_uid(visit, message.id)
    flat = np.asarray(message.points, dtype=np.float32)
    if len(flat) % 3 or not np.all(np.isfinite(flat)):
        raise MapMessageError(
            f"visit-{visit} instance {message.id}: points must be finite x y z triples, got {len(flat)} values"
            + ("" if np.all(np.isfinite(flat)) else " with a non-finite one")
        )
    points = ros_to_thor_points(flat.astype(float).reshape(-1, 3))
    feature = np.asarray(message.feature, dtype=float)
    if message.feature_dim == 0 or len(feature) != message.feature_dim:
        raise MapMessageError(
            f"visit-{visit} instance {message.id}: feature has {len(feature)} values, feature_dim is "
            f"{message.feature_dim}; the query needs every feature"
        )
    if len(message.label_candidates) != len(message.label_probs):
        raise MapMessageError(
            f"visit-{visit} instance {message.id}: {len(message.label_candidates)} label_candidates but "
            f"{len(message.label_probs)} label_probs"
        )
    if message.num_observations < 1:
        raise MapMessageError(f"visit-{visit} instance {message.id}: num_observations must be at least 1")
    labels = {str(name): float(p) for name, p in zip(message.label_candidates, message.label_probs, strict=True)}
    if not labels:
        labels = {message.label: 1.0}
    centroid = ros_to_thor_point((message.centroid.x, message.centroid.y, message.centroid.z))
    first, last = _ns(message.first_seen), _ns(message.last_seen)
    steps = [first] * (message.num_observations - 1) + [last]
    return Instance(
        uid=uid,
        position=centroid,
        box=_thor_box(message.box_min, message.box_max),
        points=points,
        feature=feature,
        colour=np.asarray(message.colour_histogram, dtype=float),
        labels=labels,
        sightings=tuple(Sighting(k, step, centroid, 0) for k, step in enumerate(steps)),
        moving=bool(message.moving),
        motion_evidence="moving in the received map" if message.moving else "",
    )


def instance_map_from_msg(message: InstanceMapMsg, limits: LimitsConfig) -> tuple[InstanceMap, dict[str, int]]:
    """The core map of an InstanceMap message (instances in message order) and each uid's wire id.

    MapMessageError naming the instance and the field unless the map is usable as a whole: at most
    ``limits.max_map_instances`` instances, unique ids, consistent feature and histogram lengths,
    and every instance finite and in range (:func:`ovman_mapping.instances.map_problem` with
    ``limits.max_coordinate``). Nothing of a refused map is kept."""
    if message.visit not in (InstanceMapMsg.VISIT_1, InstanceMapMsg.VISIT_2):
        raise MapMessageError(f"InstanceMap.visit must be 1 or 2, got {message.visit}")
    if len(message.instances) > limits.max_map_instances:
        raise MapMessageError(
            f"visit-{message.visit} map: {len(message.instances)} instances; at most {limits.max_map_instances} "
            f"are accepted (limits.max_map_instances bounds the association's memory)"
        )
    seen: set[int] = set()
    for item in message.instances:
        if item.id in seen:
            raise MapMessageError(f"visit-{message.visit} map: instance id {item.id} appears twice")
        seen.add(item.id)
    instances = tuple(instance_from_msg(item, message.visit) for item in message.instances)
    dims = {len(i.feature) for i in instances}
    colours = {len(i.colour) for i in instances}
    if len(dims) > 1 or len(colours) > 1:
        raise MapMessageError(
            f"visit-{message.visit} map: instances disagree on feature ({sorted(dims)}) or colour histogram "
            f"({sorted(colours)}) lengths"
        )
    core = InstanceMap(
        visit=message.visit, instances=instances, encoder=message.encoder, prior=_cross_visit_of(message, seen)
    )
    problem = map_problem(core, limits.max_coordinate)
    if problem is not None:
        raise MapMessageError(problem)
    return core, {i.uid: int(item.id) for i, item in zip(instances, message.instances, strict=True)}


def _cross_visit_of(message: InstanceMapMsg, ids: set[int]) -> CrossVisitEvidence | None:
    """The cross-visit evidence of a received map (None when ``cross_visit`` is false); a visit-1
    map cannot carry any, and ``new_ids`` must name instances of the map (MapMessageError)."""
    where = f"visit-{message.visit} map"
    if not message.cross_visit:
        if len(message.gone_ids) or len(message.new_ids):
            raise MapMessageError(f"{where}: gone_ids or new_ids are given but cross_visit is false")
        return None
    if message.visit != InstanceMapMsg.VISIT_2:
        raise MapMessageError(f"{where}: cross_visit evidence is for a visit-2 map only")
    unknown = sorted(set(int(i) for i in message.new_ids) - ids)
    if unknown:
        raise MapMessageError(f"{where}: new_ids names {unknown[:5]}, which are not instance ids of the map")
    return CrossVisitEvidence(
        gone=frozenset(map_uid(1, int(i)) for i in message.gone_ids),
        new=frozenset(map_uid(message.visit, int(i)) for i in message.new_ids),
    )


# ---- markers -----------------------------------------------------------------------------------


def colour_msg(rgb: Sequence[float], alpha: float, key: str) -> ColorRGBA:
    """std_msgs/ColorRGBA of a config colour; ConfigError naming ``key`` unless it is three
    values in [0, 1] and ``alpha`` is in [0, 1]."""
    if len(rgb) != 3 or not all(0.0 <= v <= 1.0 for v in (*rgb, alpha)):
        raise ConfigError(f"config {key} must be three values in [0, 1] (opacity too), got {list(rgb)}, {alpha}")
    return ColorRGBA(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=float(alpha))


def check_marker_style(style: MapMarkersConfig) -> None:
    """ConfigError unless the marker colours, opacity and sizes are usable."""
    for name in ("visit1_rgb", "visit2_rgb", "moving_rgb"):
        colour_msg(getattr(style, name), style.box_alpha, f"mapping_node markers.{name} / box_alpha")
    if not style.text_height > 0.0:
        raise ConfigError(f"config mapping_node markers.text_height must be positive metres, got {style.text_height}")


def map_markers(message: InstanceMapMsg, style: MapMarkersConfig) -> MarkerArray:
    """RViz markers of a map: DELETEALL first, then per instance a box (namespace
    ``visit<n>/boxes``) and a label text above it (``visit<n>/labels``), both with marker id =
    instance id, so a republished map replaces its markers one for one."""
    visit = message.visit
    key = "mapping_node markers"
    base = colour_msg(style.visit1_rgb if visit == 1 else style.visit2_rgb, style.box_alpha, f"{key}.visit{visit}_rgb")
    moving = colour_msg(style.moving_rgb, style.box_alpha, f"{key}.moving_rgb")
    markers = [Marker(header=message.header, action=Marker.DELETEALL)]
    for item in message.instances:
        lo, hi = item.box_min, item.box_max
        centre = Point(x=(lo.x + hi.x) / 2.0, y=(lo.y + hi.y) / 2.0, z=(lo.z + hi.z) / 2.0)
        box = Marker(header=message.header, ns=BOX_NAMESPACE.format(visit=visit), id=int(item.id), type=Marker.CUBE)
        box.pose.position = centre
        box.pose.orientation.w = 1.0
        box.scale.x = max(hi.x - lo.x, MIN_MARKER_SIZE)
        box.scale.y = max(hi.y - lo.y, MIN_MARKER_SIZE)
        box.scale.z = max(hi.z - lo.z, MIN_MARKER_SIZE)
        box.color = moving if item.moving else base
        text = Marker(
            header=message.header,
            ns=LABEL_NAMESPACE.format(visit=visit),
            id=int(item.id),
            type=Marker.TEXT_VIEW_FACING,
            text=f"{item.label} #{item.id}{' (moving)' if item.moving else ''}",
        )
        text.pose.position = Point(x=centre.x, y=centre.y, z=hi.z + style.text_offset)
        text.pose.orientation.w = 1.0
        text.scale.z = style.text_height
        text.color = ColorRGBA(r=base.r, g=base.g, b=base.b, a=TEXT_ALPHA)
        markers += [box, text]
    return MarkerArray(markers=markers)
