"""ROS 2 messages of sim_node, built from core values (and back, for subscribers and tests).

Imports the ROS message packages but never rclpy: every function is a plain conversion that
unit tests call without a graph. Frames, topics and table layouts are those of
:mod:`ovman_ros.bundle` (REP 103 on the wire; AI2-THOR's world frame in the core).
"""

from __future__ import annotations

import array
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import (
    Point,
    Pose,
    PoseStamped,
    PoseWithCovariance,
    Quaternion,
    Transform,
    TransformStamped,
    Vector3,
)
from nav_msgs.msg import OccupancyGrid, Odometry
from rosgraph_msgs.msg import Clock
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header, String
from tf2_msgs.msg import TFMessage

from ovman_core.config import FramesConfig
from ovman_core.frames import Quaternion as QuaternionTuple
from ovman_core.frames import ros_to_thor_point, ros_yaw_to_thor, thor_to_ros_point, thor_yaw_to_ros, yaw_quaternion
from ovman_core.grid import OccupancyGridFields
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, WorldState
from ovman_interfaces.msg import CameraBundle
from ovman_ros import bundle

CAMERA_MESSAGES: dict[str, type] = {
    bundle.RGB_TOPIC: Image,
    bundle.DEPTH_TOPIC: Image,
    bundle.INSTANCES_TOPIC: Image,
    bundle.INSTANCE_LABELS_TOPIC: String,
    bundle.CAMERA_INFO_TOPIC: CameraInfo,
}
"""The message type of each topic of the camera bundle (:data:`ovman_ros.bundle.CAMERA_TOPICS`)."""
PLAIN_CAMERA_MESSAGES: dict[str, type] = {
    topic: kind
    for topic, kind in CAMERA_MESSAGES.items()
    if topic not in (bundle.INSTANCES_TOPIC, bundle.INSTANCE_LABELS_TOPIC)
}
"""The three topics a robot's RGB-D camera gives (colour, aligned depth, camera_info): what a
label-blind mapper reads, with the camera's pose from ``/tf``."""

_IMAGE_LAYOUTS = {
    bundle.RGB_ENCODING: (np.dtype(np.uint8), 3),
    bundle.DEPTH_ENCODING: (np.dtype("<f4"), 1),
    bundle.DEPTH_MM_ENCODING: (np.dtype("<u2"), 1),
    bundle.INSTANCES_ENCODING: (np.dtype("<i4"), 1),
    "mono16": (np.dtype("<u2"), 1),
}


class MessageError(ValueError):
    """A received message does not have the fields the stack expects."""


@dataclasses.dataclass(frozen=True)
class BundleMessages:
    """Everything sim_node publishes for one frame, all stamped ``stamp_ns``."""

    stamp_ns: int
    rgb: Image
    depth: Image
    instances: Image
    labels: String
    camera_info: CameraInfo
    tf: TFMessage
    odom: Odometry
    ground_truth: String
    clock: Clock


def time_msg(stamp_ns: int) -> Time:
    sec, nanosec = bundle.split_stamp(stamp_ns)
    return Time(sec=sec, nanosec=nanosec)


def stamp_of(header: Header) -> int:
    """Nanoseconds of a header's stamp."""
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def camera_item(topic: str, message: Any) -> tuple[Any, int]:
    """What a synchroniser holds of a camera topic's message, and its stamp (ns): the message, or the
    parsed labels table of ``camera/instances/labels``; bundle.BundleFormatError for a bad table."""
    if topic == bundle.INSTANCE_LABELS_TOPIC:
        table = bundle.parse_labels_json(message.data)
        return table, table.stamp_ns
    return message, stamp_of(message.header)


def header_msg(stamp_ns: int, frame_id: str) -> Header:
    return Header(stamp=time_msg(stamp_ns), frame_id=frame_id)


def image_msg(image: np.ndarray, encoding: str, header: Header) -> Image:
    """sensor_msgs/Image of an (H, W[, 3]) array in ``encoding`` (rgb8, 32FC1, 16UC1 or 32SC1), little-endian."""
    dtype, channels = _IMAGE_LAYOUTS[encoding]
    data = np.ascontiguousarray(image, dtype=dtype)
    expected_ndim = 3 if channels == 3 else 2
    if data.ndim != expected_ndim or (channels == 3 and data.shape[2] != 3):
        raise MessageError(f"{encoding} image must have shape (H, W{', 3' if channels == 3 else ''}), got {data.shape}")
    height, width = data.shape[:2]
    return Image(
        header=header,
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=width * channels * dtype.itemsize,
        data=array.array("B", data.tobytes()),
    )


def image_array(message: Image) -> np.ndarray:
    """The array of an rgb8 / 32FC1 / 16UC1 / mono16 / 32SC1 sensor_msgs/Image (a copy, native byte order)."""
    if message.encoding not in _IMAGE_LAYOUTS:
        raise MessageError(f"unsupported image encoding {message.encoding!r}; expected one of {sorted(_IMAGE_LAYOUTS)}")
    dtype, channels = _IMAGE_LAYOUTS[message.encoding]
    if message.is_bigendian:
        dtype = dtype.newbyteorder(">")
    row = message.width * channels * dtype.itemsize
    if message.step != row or len(message.data) != row * message.height:
        raise MessageError(
            f"{message.encoding} image {message.width}x{message.height}: step {message.step} and "
            f"{len(message.data)} data bytes do not match (expected step {row})"
        )
    shape = (message.height, message.width, 3) if channels == 3 else (message.height, message.width)
    # The one copy: frombuffer views the message's own buffer (array.array from rclpy), astype copies.
    return np.frombuffer(message.data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def depth_array(message: Image) -> np.ndarray:
    """Planar depth in float32 metres (NaN = invalid) of a ``32FC1`` (m) or ``16UC1`` (mm, 0 =
    invalid) sensor_msgs/Image; MessageError for any other encoding."""
    if message.encoding not in bundle.DEPTH_ENCODINGS:
        raise MessageError(f"depth image encoding {message.encoding!r}; expected {' or '.join(bundle.DEPTH_ENCODINGS)}")
    pixels = image_array(message)
    return bundle.depth_metres(pixels) if message.encoding == bundle.DEPTH_MM_ENCODING else pixels


def camera_info_msg(observation: Observation, header: Header) -> CameraInfo:
    fields = bundle.camera_info_fields(observation.intrinsics)
    return CameraInfo(
        header=header,
        height=fields.height,
        width=fields.width,
        distortion_model=fields.distortion_model,
        d=list(fields.d),
        k=np.array(fields.k, dtype=np.float64),
        r=np.array(fields.r, dtype=np.float64),
        p=np.array(fields.p, dtype=np.float64),
    )


def quaternion_msg(q: QuaternionTuple) -> Quaternion:
    return Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])


def pose_msg(translation: tuple[float, float, float], rotation: QuaternionTuple) -> Pose:
    return Pose(
        position=Point(x=translation[0], y=translation[1], z=translation[2]), orientation=quaternion_msg(rotation)
    )


def tf_message(transforms: list[bundle.Transform], stamp_ns: int) -> TFMessage:
    return TFMessage(
        transforms=[
            TransformStamped(
                header=header_msg(stamp_ns, t.parent),
                child_frame_id=t.child,
                transform=Transform(
                    translation=Vector3(x=t.translation[0], y=t.translation[1], z=t.translation[2]),
                    rotation=quaternion_msg(t.rotation),
                ),
            )
            for t in transforms
        ]
    )


def base_pose_msg(observation: Observation, stamp_ns: int, frames: FramesConfig) -> PoseStamped:
    """base_link in ``map`` (= ``odom`` in simulation)."""
    return PoseStamped(header=header_msg(stamp_ns, frames.map), pose=pose_msg(*bundle.base_pose(observation)))


def odometry_msg(observation: Observation, stamp_ns: int, frames: FramesConfig) -> Odometry:
    """Ground-truth odometry: base_link in ``odom``; the agent moves in discrete steps, so the
    twist is zero."""
    return Odometry(
        header=header_msg(stamp_ns, frames.odom),
        child_frame_id=frames.base,
        pose=PoseWithCovariance(pose=pose_msg(*bundle.base_pose(observation))),
    )


def bundle_messages(
    observation: Observation,
    objects: WorldState,
    stamp_ns: int,
    frames: FramesConfig,
    records: bundle.GroundTruthRecords | None = None,
) -> BundleMessages:
    """All messages of one frame, stamped ``stamp_ns`` (images in the optical frame); the ground
    truth through ``records`` when the caller keeps a stream of them."""
    optical = header_msg(stamp_ns, frames.optical)
    truth = (records or bundle.GroundTruthRecords()).record(observation, objects, stamp_ns)
    return BundleMessages(
        stamp_ns=stamp_ns,
        rgb=image_msg(observation.rgb, bundle.RGB_ENCODING, optical),
        depth=image_msg(*reversed(bundle.depth_image(observation.depth)), optical),
        instances=image_msg(observation.segments, bundle.INSTANCES_ENCODING, optical),
        labels=String(data=bundle.labels_json(observation, stamp_ns)),
        camera_info=camera_info_msg(observation, optical),
        tf=tf_message(bundle.dynamic_transforms(observation, frames), stamp_ns),
        odom=odometry_msg(observation, stamp_ns, frames),
        ground_truth=String(data=truth),
        clock=Clock(clock=time_msg(stamp_ns)),
    )


def camera_bundle_msg(camera: Mapping[str, Any]) -> CameraBundle:
    """One ovman_interfaces/CameraBundle of a frame's five camera messages keyed by their standard
    topic (:data:`CAMERA_MESSAGES`), unchanged."""
    return CameraBundle(**{member: camera[topic] for member, topic in bundle.CAMERA_BUNDLE_MEMBERS})


def camera_messages(messages: BundleMessages) -> dict[str, Any]:
    """The five camera messages of a frame's bundle keyed by their standard topic."""
    return {
        bundle.RGB_TOPIC: messages.rgb,
        bundle.DEPTH_TOPIC: messages.depth,
        bundle.INSTANCES_TOPIC: messages.instances,
        bundle.INSTANCE_LABELS_TOPIC: messages.labels,
        bundle.CAMERA_INFO_TOPIC: messages.camera_info,
    }


def camera_bundle_items(message: Any) -> tuple[int, dict[str, Any]]:
    """The stamp (ns) of a CameraBundle (its colour image's) and its five messages keyed by their
    standard topic, the labels table parsed (:class:`ovman_ros.bundle.LabelTable`), as a
    synchroniser of the five topics hands them out. ``message``: rclpy's CameraBundle or one decoded
    by :func:`ovman_ros.bundle_cdr.decode` (same fields). MessageError when another message's stamp
    or the table's ``stamp_ns`` differs."""
    stamp = stamp_of(message.rgb.header)
    try:
        labels = bundle.parse_labels_json(message.labels.data)
    except bundle.BundleFormatError as err:
        raise MessageError(f"camera bundle at {stamp} ns: {err}") from None
    items: dict[str, Any] = {topic: getattr(message, member) for member, topic in bundle.CAMERA_BUNDLE_MEMBERS}
    items[bundle.INSTANCE_LABELS_TOPIC] = labels
    stamps = {topic: stamp_of(item.header) for topic, item in items.items() if topic != bundle.INSTANCE_LABELS_TOPIC}
    stamps[bundle.INSTANCE_LABELS_TOPIC] = labels.stamp_ns
    differing = {topic: s for topic, s in stamps.items() if s != stamp}
    if differing:
        parts = ", ".join(f"{topic} {s}" for topic, s in differing.items())
        raise MessageError(f"camera bundle at {stamp} ns holds messages stamped otherwise: {parts} ns")
    return stamp, items


def static_tf_message(frames: FramesConfig, stamp_ns: int) -> TFMessage:
    return tf_message(bundle.static_transforms(frames), stamp_ns)


def occupancy_grid_msg(fields: OccupancyGridFields, stamp_ns: int) -> OccupancyGrid:
    """nav_msgs/OccupancyGrid from the fields computed by ovman_core.grid."""
    message = OccupancyGrid(header=header_msg(stamp_ns, fields.frame_id))
    info = message.info
    info.map_load_time = time_msg(stamp_ns)
    info.resolution = float(fields.resolution)
    info.width = int(fields.width)
    info.height = int(fields.height)
    info.origin = pose_msg(fields.origin_position, fields.origin_orientation)
    message.data = array.array("b", np.asarray(fields.data, dtype=np.int8).tobytes())
    return message


def floor_pose_msg(pose: AgentPose) -> Pose:
    """base_link of an agent at ``pose`` (AI2-THOR world) in ``map`` (REP 103): on the floor, the
    agent's yaw; the inverse of :func:`start_pose_from_msg` but for the horizon."""
    return pose_msg(thor_to_ros_point((pose.x, 0.0, pose.z)), yaw_quaternion(thor_yaw_to_ros(pose.yaw_deg)))


def start_pose_from_msg(pose: Pose, horizon_deg: float) -> AgentPose:
    """An AgentPose (AI2-THOR world frame) from a base pose in ``map`` (REP 103): position x, y and
    the yaw about z; ``horizon_deg`` positive looks down."""
    q = pose.orientation
    return agent_pose_of((pose.position.x, pose.position.y, pose.position.z), (q.x, q.y, q.z, q.w), horizon_deg)


def base_pose_of(transform: bundle.Transform) -> AgentPose:
    """The robot's AgentPose from its base frame in ``map`` as TF gives it (horizon 0)."""
    return agent_pose_of(transform.translation, transform.rotation, 0.0)


def agent_pose_of(position: Sequence[float], rotation: Sequence[float], horizon_deg: float) -> AgentPose:
    """An AgentPose from a base position (m) and rotation (x, y, z, w) in ``map`` (REP 103)."""
    x, _, z = ros_to_thor_point(tuple(float(v) for v in position))
    yaw = float(Rotation.from_quat(tuple(float(v) for v in rotation)).as_euler("ZYX")[0])
    # Round off the float noise of the quaternion round trip (worlds snap yaws to their turn step).
    yaw_deg = round(ros_yaw_to_thor(yaw), 9) % 360.0
    return AgentPose(x=x, z=z, yaw_deg=yaw_deg, horizon_deg=float(horizon_deg))
