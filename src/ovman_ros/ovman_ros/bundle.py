"""What one synchronised camera bundle carries on the wire: topics, the frame tree and the tables.

Pure Python (no rclpy): the recorder and sim_node build their messages from these values, so a
recorded visit and the live graph carry the same topics, frames and numbers. Wire frames are REP 103,
the tree REP 105 ``map → odom → base_link → camera_link → camera_color_optical_frame`` (the camera's
pose is looked up in it); every conversion from AI2-THOR's world frame goes through :mod:`ovman_core.frames`.

Why one module: it is one wire format, whose topics, frame tree, depth encoding and tables must
agree between the recorder, sim_node and the readers.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from typing import Any

import numba
import numpy as np
from scipy.spatial.transform import Rotation

from ovman_core.boxes import Box3, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.config import FramesConfig
from ovman_core.frames import (
    CAMERA_LINK_TO_OPTICAL,
    ROTATION_CACHE_SIZE,
    Quaternion,
    camera_link_quaternion,
    thor_to_ros_point,
    thor_yaw_to_ros,
    yaw_quaternion,
)
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_ros import names

# The topics as recordings store them (fully qualified from the root namespace, as ``ros2 bag
# record`` writes them); nodes use the relative names of :mod:`ovman_ros.names`.
RGB_TOPIC = names.recorded(names.RGB)
"""sensor_msgs/Image, ``rgb8``, frame ``camera_color_optical_frame``."""
DEPTH_TOPIC = names.recorded(names.DEPTH)
"""sensor_msgs/Image, planar depth registered to the colour image: ``16UC1`` millimetres (0 = invalid,
what RGB-D drivers publish) when that is lossless, else ``32FC1`` metres (NaN = invalid); see
:func:`depth_image`."""
INSTANCES_TOPIC = names.recorded(names.INSTANCES)
"""sensor_msgs/Image, ``32SC1`` per-frame segment ids (0 = no object)."""
INSTANCE_LABELS_TOPIC = names.recorded(names.INSTANCE_LABELS)
"""std_msgs/String, JSON ``{"stamp_ns": t, "step": n, "labels": {"<segment id>": "<category>"}}`` per
frame (String has no header: ``stamp_ns`` equals the images' header stamp in nanoseconds)."""
CAMERA_INFO_TOPIC = names.recorded(names.CAMERA_INFO)
"""sensor_msgs/CameraInfo shared by the three images (they are registered), plumb_bob, no distortion."""
TF_TOPIC = names.recorded(names.TF)
TF_STATIC_TOPIC = names.recorded(names.TF_STATIC)
GROUND_TRUTH_TOPIC = names.recorded(names.GROUND_TRUTH)
"""std_msgs/String, JSON, **evaluation only**: the stamp (as in the labels), the exact agent pose,
segment → instance table and every object's state per frame. The reference agent never
subscribes to it."""
CAMERA_TOPICS = (RGB_TOPIC, DEPTH_TOPIC, INSTANCES_TOPIC, INSTANCE_LABELS_TOPIC, CAMERA_INFO_TOPIC)
"""The camera bundle on the standard topics: what a robot's camera driver publishes (and the
simulator's segments); the camera's pose travels on ``/tf``."""
CAMERA_BUNDLE_MEMBERS = (
    ("camera_info", CAMERA_INFO_TOPIC),
    ("rgb", RGB_TOPIC),
    ("depth", DEPTH_TOPIC),
    ("instances", INSTANCES_TOPIC),
    ("labels", INSTANCE_LABELS_TOPIC),
)
"""CameraBundle's members in their order, each with the standard topic its message comes from."""

CAMERA_TOPICS_OUTPUT = "topics"
CAMERA_BUNDLE_OUTPUT = "bundle"
CAMERA_BOTH_OUTPUT = "both"
CAMERA_OUTPUTS = {
    CAMERA_TOPICS_OUTPUT: frozenset({CAMERA_TOPICS_OUTPUT}),
    CAMERA_BUNDLE_OUTPUT: frozenset({CAMERA_BUNDLE_OUTPUT}),
    CAMERA_BOTH_OUTPUT: frozenset({CAMERA_TOPICS_OUTPUT, CAMERA_BUNDLE_OUTPUT}),
}
"""Where a camera frame travels (sim_node ``node.camera_output``): the five standard topics
(:data:`CAMERA_TOPICS`), the one ``camera/bundle`` (:data:`ovman_ros.names.CAMERA_BUNDLE`), or both."""
CAMERA_INPUTS = (CAMERA_TOPICS_OUTPUT, CAMERA_BUNDLE_OUTPUT)
"""Where a camera consumer reads frames from (mapping_node ``node.camera_input``)."""

RGB_ENCODING = "rgb8"
DEPTH_ENCODING = "32FC1"
"""Planar depth in metres, NaN = invalid."""
DEPTH_MM_ENCODING = "16UC1"
"""Planar depth in millimetres, 0 = invalid (REP 118; what RealSense-class drivers publish)."""
DEPTH_ENCODINGS = (DEPTH_ENCODING, DEPTH_MM_ENCODING)
INSTANCES_ENCODING = "32SC1"
DISTORTION_MODEL = "plumb_bob"

IDENTITY_ROTATION: Quaternion = (0.0, 0.0, 0.0, 1.0)


def depth_image(depth: np.ndarray) -> tuple[str, np.ndarray]:
    """The encoding and pixels that carry planar ``depth`` (float32 m, NaN = invalid) exactly:
    ``16UC1`` millimetres when every valid depth is a millimetre reading in [0.001, 65.535] m
    (float32 ``k / 1000``, what the sensor model reports), so that :func:`depth_metres` gives
    back the same bits; otherwise ``32FC1`` metres (an ideal camera, ±inf)."""
    z = np.ascontiguousarray(depth, dtype="<f4")
    pixels = np.empty(z.shape, dtype="<u2")
    if _millimetres(z.reshape(-1), pixels.reshape(-1)):
        return DEPTH_MM_ENCODING, pixels
    return DEPTH_ENCODING, z


@numba.njit(cache=True)
def _millimetres(z: np.ndarray, out: np.ndarray) -> bool:
    """Fill ``out`` (uint16, flat) with the millimetres of ``z`` (float32 m, flat; NaN → 0); False
    as soon as a value is not exactly ``float32(k) / 1000`` for an integer k in [1, 65535]."""
    thousand = np.float32(1000.0)
    for i in range(z.size):
        value = z[i]
        if np.isnan(value):
            out[i] = 0
            continue
        mm = np.rint(value * thousand)
        if not (mm >= 1.0 and mm <= 65535.0) or np.float32(mm) / thousand != value:
            return False
        out[i] = np.uint16(mm)
    return True


def depth_metres(pixels: np.ndarray) -> np.ndarray:
    """Float32 metres (NaN = invalid) of a ``16UC1`` depth image in millimetres (0 = invalid)."""
    mm = np.asarray(pixels)
    depth = mm.astype(np.float32) / np.float32(1000.0)
    depth[mm == 0] = np.nan
    return depth


class BundleFormatError(ValueError):
    """A label or ground-truth table does not have the documented JSON layout."""


def camera_outputs(value: str, where: str) -> frozenset[str]:
    """What ``value`` of a camera-output setting (:data:`CAMERA_OUTPUTS`) publishes: a subset of
    {"topics", "bundle"}; ValueError naming ``where`` (the config key) for anything else."""
    try:
        return CAMERA_OUTPUTS[value]
    except KeyError:
        raise ValueError(f"{where} must be one of {', '.join(CAMERA_OUTPUTS)}, got {value!r}") from None


def camera_input(value: str, where: str) -> str:
    """``value`` of a camera-input setting, checked to be one of :data:`CAMERA_INPUTS`; ValueError
    naming ``where`` (the config key) otherwise."""
    if value not in CAMERA_INPUTS:
        raise ValueError(f"{where} must be one of {', '.join(CAMERA_INPUTS)}, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Transform:
    """``child`` in ``parent``: translation (metres) and rotation (x, y, z, w), REP 103."""

    parent: str
    child: str
    translation: Vec3
    rotation: Quaternion


def frame_step(stamp_ns: int, step_ns: int) -> int:
    """The step of a camera frame as the mapper counts it: its stamp in units of ``step_ns``
    (``mapping_node.node.step_dt``, in ns). The simulator's world steps are these while no
    teleport happens (:class:`FrameClock`); the mapper only orders frames by them,
    and a robot's camera gives nothing else."""
    if step_ns <= 0:
        raise ValueError(f"the step length must be positive nanoseconds, got {step_ns}")
    return int(stamp_ns) // int(step_ns)


class FrameClock:
    """Stamps (integer nanoseconds of sim time) for a sequence of frames.

    Sim time advances ``step_dt`` per world step: a frame taken ``n ≥ 1`` world steps after the
    previous one is stamped ``n · step_dt`` later. A frame taken with no world step since the
    previous one (after a teleport, which is not a step, or after a world reset) is stamped one
    ``step_dt`` later, so every frame has its own time: tf2 discards a transform whose stamp
    repeats, and a recording needs one timestamp per frame. The first frame is stamped
    ``step · step_dt``. Stamps therefore never decrease, even across visits.
    """

    def __init__(self, step_dt: float) -> None:
        if not step_dt > 0.0:
            raise ValueError(f"step_dt must be positive seconds (sim_node.node.step_dt), got {step_dt}")
        self.step_dt = step_dt
        self.dt_ns = round(step_dt * 1e9)
        self._stamp: int | None = None
        self._step: int | None = None

    @property
    def last_ns(self) -> int | None:
        """Stamp of the latest frame (None before the first)."""
        return self._stamp

    def stamp(self, step: int) -> int:
        """The stamp of the next frame, taken at world step ``step``."""
        if step < 0:
            raise ValueError(f"world step must be non-negative, got {step}")
        if self._stamp is None or self._step is None:
            stamp = step * self.dt_ns
        else:
            stamp = self._stamp + max(1, step - self._step) * self.dt_ns
        self._stamp, self._step = stamp, step
        return stamp


def split_stamp(stamp_ns: int) -> tuple[int, int]:
    """``(sec, nanosec)`` of a non-negative time in nanoseconds (builtin_interfaces/Time)."""
    return stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000


def static_transforms(frames: FramesConfig) -> list[Transform]:
    """Transforms that never change: ``map → odom`` (identity in simulation) and
    ``camera_link → camera_optical_frame`` (REP 103 optical rotation)."""
    return [
        Transform(frames.map, frames.odom, (0.0, 0.0, 0.0), IDENTITY_ROTATION),
        Transform(frames.camera, frames.optical, (0.0, 0.0, 0.0), CAMERA_LINK_TO_OPTICAL),
    ]


def base_pose(observation: Observation) -> tuple[Vec3, Quaternion]:
    """``base_link`` in ``odom`` (= ``map``): on the floor plane under the camera, the agent's yaw."""
    x, y, _ = thor_to_ros_point(observation.camera_position)
    return (x, y, 0.0), yaw_quaternion(thor_yaw_to_ros(observation.pose.yaw_deg))


def camera_mount(observation: Observation) -> tuple[Vec3, Quaternion]:
    """``camera_link`` in ``base_link``: up by the camera height, pitched by the horizon
    (positive horizon looks down, a positive rotation about the base's y axis)."""
    height = float(observation.camera_position[1])
    pitch = math.radians(observation.pose.horizon_deg)
    return (0.0, 0.0, height), (0.0, math.sin(pitch / 2.0), 0.0, math.cos(pitch / 2.0))


def dynamic_transforms(observation: Observation, frames: FramesConfig) -> list[Transform]:
    """The per-frame part of the tree: ``odom → base_link`` and ``base_link → camera_link``."""
    base_t, base_q = base_pose(observation)
    mount_t, mount_q = camera_mount(observation)
    return [
        Transform(frames.odom, frames.base, base_t, base_q),
        Transform(frames.base, frames.camera, mount_t, mount_q),
    ]


def optical_pose(observation: Observation) -> tuple[Vec3, Quaternion]:
    """The optical frame in ``map``: ``p_map = R · p_optical + t`` back-projects a depth pixel."""
    rotation = optical_quaternion(observation.pose.yaw_deg, observation.pose.horizon_deg)
    return thor_to_ros_point(observation.camera_position), rotation


def camera_frame(
    rgb: np.ndarray, depth: np.ndarray, intrinsics: Intrinsics, camera_position: Vec3, yaw_deg: float,
    horizon_deg: float, step: int,
) -> Observation:  # fmt: skip
    """What a robot's camera gives of one frame, as an Observation: colour, depth (metres),
    intrinsics, the camera pose (centre in AI2-THOR world metres, yaw and horizon in degrees, as
    :func:`ovman_core.frames.camera_angles` recovers them from the optical frame's pose) and the
    frame's step (:func:`frame_step`); no segments, no labels, no ground-truth ids. The mapper's
    input in every wiring (mapping_node, and the in-process runner from a recording)."""
    return Observation(
        rgb=rgb,
        depth=depth,
        segments=np.zeros(depth.shape, dtype=np.int32),
        segment_labels={},
        segment_instances={},
        pose=AgentPose(x=camera_position[0], z=camera_position[2], yaw_deg=yaw_deg, horizon_deg=horizon_deg),
        camera_position=camera_position,
        intrinsics=intrinsics,
        step=step,
    )


@functools.lru_cache(maxsize=ROTATION_CACHE_SIZE)
def optical_quaternion(yaw_deg: float, horizon_deg: float) -> Quaternion:
    """Orientation (x, y, z, w) of the optical frame in ``map`` for an AI2-THOR yaw and horizon
    (cached, as :func:`ovman_core.frames.camera_link_quaternion`)."""
    link = Rotation.from_quat(camera_link_quaternion(yaw_deg, horizon_deg))
    rotation = (link * Rotation.from_quat(CAMERA_LINK_TO_OPTICAL)).as_quat()
    return tuple(float(v) for v in rotation)  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class CameraInfoFields:
    """The sensor_msgs/CameraInfo fields of a pinhole camera without distortion."""

    width: int
    height: int
    k: tuple[float, ...]
    d: tuple[float, ...]
    r: tuple[float, ...]
    p: tuple[float, ...]
    distortion_model: str = DISTORTION_MODEL


def camera_info_fields(intrinsics: Intrinsics) -> CameraInfoFields:
    """CameraInfo fields for ``intrinsics`` (K from ovman_core.camera, plumb_bob with zero D)."""
    fx, fy, cx, cy = intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy
    return CameraInfoFields(
        width=intrinsics.width,
        height=intrinsics.height,
        k=(fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0),
        d=(0.0, 0.0, 0.0, 0.0, 0.0),
        r=(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
        p=(fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0),
    )


def intrinsics_from_camera_info(width: int, height: int, k: Any) -> Intrinsics:
    """Intrinsics back from CameraInfo ``width``, ``height`` and the row-major 3×3 ``k``.

    The mapper's camera is an ideal pinhole with square-grid pixels: ``k`` must be finite, with
    positive focal lengths, no skew, the principal point inside the image and a last row
    ``0 0 1``. An uncalibrated driver publishes all zeros; that is refused (BundleFormatError
    naming the field), never back-projected into non-finite points.
    """
    values = [float(v) for v in k]
    if len(values) != 9:
        raise BundleFormatError(f"CameraInfo.k must hold 9 values, got {len(values)}")
    if not (int(width) > 0 and int(height) > 0):
        raise BundleFormatError(f"CameraInfo width and height must be positive pixels, got {width}x{height}")
    fx, skew, cx, _, fy, cy, *last = values
    problems = [
        problem
        for ok, problem in (
            (all(math.isfinite(v) for v in values), "every value must be finite"),
            (fx > 0.0 and fy > 0.0, "fx = k[0] and fy = k[4] must be positive (an uncalibrated camera publishes 0)"),
            (skew == 0.0 and values[3] == 0.0, "k[1] and k[3] must be 0 (no skew)"),
            (0.0 <= cx <= width and 0.0 <= cy <= height, f"the principal point must lie in the {width}x{height} image"),
            (last == [0.0, 0.0, 1.0], "the last row k[6:9] must be 0 0 1"),
        )
        if not ok
    ]
    if problems:
        raise BundleFormatError(f"CameraInfo.k = {values} is not a pinhole camera matrix: {'; '.join(problems)}")
    return Intrinsics(int(width), int(height), fx, fy, cx, cy)


# ---- JSON tables ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LabelTable:
    """The segmenter's table of one frame: its stamp (ns of sim time, as in the images' headers),
    the world step, and segment id → category label."""

    stamp_ns: int
    step: int
    labels: Mapping[int, str]


def labels_json(observation: Observation, stamp_ns: int) -> str:
    """The INSTANCE_LABELS_TOPIC record of a frame stamped ``stamp_ns``:
    ``{"stamp_ns": ..., "step": ..., "labels": {"<segment id>": "<category>"}}``."""
    labels = {str(int(k)): str(v) for k, v in sorted(observation.segment_labels.items())}
    return json.dumps({"stamp_ns": int(stamp_ns), "step": int(observation.step), "labels": labels}, sort_keys=True)


def parse_labels_json(text: str) -> LabelTable:
    """The inverse of :func:`labels_json`; BundleFormatError if malformed."""
    doc = _load(text, "instance labels table")
    try:
        return LabelTable(int(doc["stamp_ns"]), int(doc["step"]), {int(k): str(v) for k, v in doc["labels"].items()})
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BundleFormatError(f"instance labels table: expected {{'stamp_ns', 'step', 'labels'}}: {err!r}") from None


@dataclasses.dataclass(frozen=True)
class GroundTruthFrame:
    """Evaluation-only record of one frame: its stamp (ns) and world step, the exact agent pose
    (AI2-THOR frame), camera centre, segment id → ground-truth instance id, and every object's
    state at that step."""

    stamp_ns: int
    step: int
    pose: AgentPose
    camera_position: Vec3
    segment_instances: Mapping[int, str]
    objects: WorldState


GROUND_TRUTH_HEADER = ("stamp_ns", "step", "agent_pose")
"""Fields a ground-truth record holds first, in this order, so that :func:`ground_truth_header`
reads them without decoding the objects (the bulk of the record)."""
_DECODER = json.JSONDecoder()


def objects_json(objects: WorldState) -> str:
    """The ``objects`` field of a ground-truth record: the JSON list of every object's state, by instance id."""
    return json.dumps([object_state_to_dict(obj) for obj in sorted(objects, key=lambda o: o.instance_id)])


def ground_truth_json(
    observation: Observation, objects: WorldState, stamp_ns: int, objects_text: str | None = None
) -> str:
    """The GROUND_TRUTH_TOPIC record of a frame stamped ``stamp_ns`` (floats in full precision):
    one JSON object, :data:`GROUND_TRUTH_HEADER` first, then the rest with keys sorted
    (camera_position, objects, segment_instances). ``objects_text``: ``objects_json(objects)``
    when the caller has it already (:class:`GroundTruthRecords`)."""
    pose = observation.pose
    head = {
        "stamp_ns": int(stamp_ns),
        "step": int(observation.step),
        "agent_pose": {
            "x": float(pose.x),
            "z": float(pose.z),
            "yaw_deg": float(pose.yaw_deg),
            "horizon_deg": float(pose.horizon_deg),
        },
        "camera_position": [float(v) for v in observation.camera_position],
    }
    tail = {"segment_instances": {str(int(k)): str(v) for k, v in sorted(observation.segment_instances.items())}}
    listed = objects_json(objects) if objects_text is None else objects_text
    return f'{json.dumps(head)[:-1]}, "objects": {listed}, {json.dumps(tail)[1:]}'


class GroundTruthRecords:
    """:func:`ground_truth_json` for a stream of frames, the objects' JSON (most of a record) kept
    from the previous frame while the objects are equal (a world publishes one record per step,
    and objects change only when something moves). Not thread-safe."""

    def __init__(self) -> None:
        self._objects: WorldState | None = None
        self._text = ""

    def record(self, observation: Observation, objects: WorldState, stamp_ns: int) -> str:
        if self._objects is None or (objects is not self._objects and objects != self._objects):
            self._objects, self._text = objects, objects_json(objects)
        return ground_truth_json(observation, objects, stamp_ns, self._text)


def ground_truth_header(text: str) -> tuple[int, AgentPose]:
    """Stamp (ns) and agent pose (AI2-THOR frame) of a ground-truth record, read from its leading
    :data:`GROUND_TRUTH_HEADER` fields without decoding the rest; a record in another layout
    (e.g. keys sorted, as recordings before this layout hold) is decoded whole.
    BundleFormatError if malformed."""
    values: dict[str, Any] = {}
    index = 1 if text.startswith("{") else -1
    for key in GROUND_TRUTH_HEADER if index > 0 else ():
        field = ('"' if not values else ', "') + key + '": '
        if not text.startswith(field, index):
            break
        try:
            values[key], index = _DECODER.raw_decode(text, index + len(field))
        except json.JSONDecodeError:
            break
    if len(values) < len(GROUND_TRUTH_HEADER):
        values = _load(text, "ground truth table")
    try:
        pose = values["agent_pose"]
        agent = AgentPose(float(pose["x"]), float(pose["z"]), float(pose["yaw_deg"]), float(pose["horizon_deg"]))
        return int(values["stamp_ns"]), agent
    except (KeyError, TypeError, ValueError) as err:
        raise BundleFormatError(
            f"ground truth: expected 'stamp_ns' and 'agent_pose' (x, z, yaw_deg, horizon_deg): {err!r}"
        ) from None


def parse_ground_truth_json(text: str) -> GroundTruthFrame:
    """The inverse of :func:`ground_truth_json`; BundleFormatError if malformed."""
    return GroundTruthParser().parse(text)


class GroundTruthParser:
    """:func:`parse_ground_truth_json` for a stream of records (the inverse of
    :class:`GroundTruthRecords`): while a record's objects are the previous record's, they are
    neither decoded nor rebuilt again, the previous frame's WorldState is returned (objects change
    only when something moves, and they are most of a record). A record in the layout
    :func:`ground_truth_json` writes is split at its ``objects`` field, and the objects' text is
    compared; any other record (keys sorted, as older recordings hold) is decoded whole and its
    decoded objects compared. Not thread-safe."""

    def __init__(self) -> None:
        self._key: tuple[str, Any] | None = None
        """The previous record's objects: ("text", their JSON) or ("list", them decoded)."""
        self._objects: WorldState | None = None

    def parse(self, text: str) -> GroundTruthFrame:
        """The record's frame; BundleFormatError if malformed."""
        split = _split_objects(text)
        doc = _load(text, "ground truth table") if split is None else split[0]
        try:
            pose = doc["agent_pose"]
            key = ("list", doc["objects"]) if split is None else ("text", split[1])
            if self._objects is None or key != self._key:
                listed = key[1] if split is None else _load(key[1], "ground truth objects", list)
                self._objects = WorldState.of([object_state_from_dict(o) for o in listed])
                self._key = key
            return GroundTruthFrame(
                stamp_ns=int(doc["stamp_ns"]),
                step=int(doc["step"]),
                pose=AgentPose(float(pose["x"]), float(pose["z"]), float(pose["yaw_deg"]), float(pose["horizon_deg"])),
                camera_position=_vec3(doc["camera_position"]),
                segment_instances={int(k): str(v) for k, v in doc["segment_instances"].items()},
                objects=self._objects,
            )
        except BundleFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BundleFormatError(f"ground truth record: missing or bad field: {err!r}") from None


_OBJECTS_FIELD = ', "objects": '
_SEGMENTS_FIELD = ', "segment_instances": '


def _split_objects(text: str) -> tuple[dict[str, Any], str] | None:
    """A record of :func:`ground_truth_json`'s layout as (every field but ``objects`` decoded, the
    objects' JSON text); None for a record in another layout (or one this cannot split)."""
    start = text.find(_OBJECTS_FIELD)
    end = text.rfind(_SEGMENTS_FIELD)
    if start < 0 or end < start:
        return None
    try:
        head = json.loads(text[:start] + "}")
        tail = json.loads("{" + text[end + 2 :])
    except json.JSONDecodeError:
        return None
    if not isinstance(head, dict) or not isinstance(tail, dict) or "objects" in head or "objects" in tail:
        return None
    return {**head, **tail}, text[start + len(_OBJECTS_FIELD) : end]


def object_state_to_dict(obj: ObjectState) -> dict[str, Any]:
    """A JSON-ready dict of one object's state (world frame, metres)."""
    return {
        "instance_id": obj.instance_id,
        "category": obj.category,
        "position": [float(v) for v in obj.position],
        "box_lo": [float(v) for v in obj.box.lo],
        "box_hi": [float(v) for v in obj.box.hi],
        "movable": bool(obj.movable),
    }


def object_state_from_dict(doc: Mapping[str, Any]) -> ObjectState:
    """The inverse of :func:`object_state_to_dict`."""
    return ObjectState(
        instance_id=str(doc["instance_id"]),
        category=str(doc["category"]),
        position=_vec3(doc["position"]),
        box=Box3(_vec3(doc["box_lo"]), _vec3(doc["box_hi"])),
        movable=bool(doc["movable"]),
    )


def _vec3(values: Any) -> Vec3:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


def _load(text: str, what: str, kind: type = dict) -> Any:
    """``text`` decoded as JSON of ``kind`` (dict: an object, list: a list); BundleFormatError
    naming ``what`` otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise BundleFormatError(f"{what} is not valid JSON: {err}") from None
    if not isinstance(doc, kind):
        expected = "a JSON object" if kind is dict else "a JSON list"
        raise BundleFormatError(f"{what} must be {expected}, got {type(doc).__name__}")
    return doc
