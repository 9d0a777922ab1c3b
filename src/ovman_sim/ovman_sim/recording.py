"""Recorded visits: one MCAP file in rosbag2 layout per visit, written and read without rclpy.

A recording (``metadata.yaml`` + ``<name>.mcap``, rosbag2 format 9, zstd chunks) replays with
``ros2 bag play`` on Jazzy or newer; a frame is one sim-time stamp on :data:`FRAME_TOPICS` (layouts
in :mod:`ovman_ros.bundle`; ``/ovman/ground_truth`` is evaluation only, the segments may be left out).
It is read back with chunk CRCs checked, so a damaged file fails loudly, and appears only complete.

Why one module: it is one file format, written (:class:`VisitWriter`) and read (:func:`read_visit`)
side by side so that the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import yaml
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import Reader, ReaderError
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_typestore

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdError
else:
    from backports.zstd import ZstdError

from ovman_ros.bundle import BundleFormatError, GroundTruthFrame, Transform
from ovman_ros.tf_buffer import TransformBuffer, TransformError

from ovman_core.camera import Intrinsics
from ovman_core.config import FramesConfig
from ovman_core.frames import camera_angles, ros_to_thor_point
from ovman_core.observation import Observation
from ovman_core.world_state import WorldState
from ovman_ros import bundle

FORMAT_VERSION = 2
"""Version of the topic layout below; readers reject recordings of other versions (version 1 had a
``/camera/pose`` topic; the camera's pose now comes from ``/tf`` as on a robot)."""
CUSTOM_DATA_KEY = "ovman.recording"
"""Where ``metadata.yaml``'s ``custom_data`` holds the visit's identity (scene, visit, step_dt, frame
names, frame count)."""
ROSBAG2_VERSION = 9
ROS_DISTRO = "kilted"
"""The distribution whose message definitions (and type hashes) the recording uses."""

# CDR, message definitions and type hashes from rosbags' typestore (the hashes equal the installed
# message packages'), so the recorder imports without ROS; the MCAP file is written by mcap, the
# format's reference library, as rosbag2's MCAP storage plugin writes it.
TYPESTORE = get_typestore(Stores.ROS2_KILTED)

IMAGE = "sensor_msgs/msg/Image"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
STRING = "std_msgs/msg/String"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"

FRAME_TOPICS: dict[str, str] = {
    bundle.RGB_TOPIC: IMAGE,
    bundle.DEPTH_TOPIC: IMAGE,
    bundle.INSTANCES_TOPIC: IMAGE,
    bundle.INSTANCE_LABELS_TOPIC: STRING,
    bundle.CAMERA_INFO_TOPIC: CAMERA_INFO,
    bundle.TF_TOPIC: TF_MESSAGE,
    bundle.GROUND_TRUTH_TOPIC: STRING,
}
"""Topics with exactly one message per frame, and their types."""
SEGMENT_TOPICS = (bundle.INSTANCES_TOPIC, bundle.INSTANCE_LABELS_TOPIC)
"""Frame topics a recording may lack, both together: the simulator's segments."""
STATIC_TOPICS: dict[str, str] = {bundle.TF_STATIC_TOPIC: TF_MESSAGE}
"""Topics written once, at the first frame's timestamp."""

POSE_CHECK_TOLERANCE = 1e-6
"""Metres (and quaternion units): the camera pose on /tf must agree with the ground-truth pose this well."""

_STORAGE_ERRORS = (ReaderError, ZstdError, struct.error, UnicodeDecodeError, OSError, EOFError)
"""What rosbags' reader raises on a damaged file: its own errors (bad CRC, magic, sizes), zstd
errors from a damaged chunk, and struct/Unicode errors from damaged record headers."""


class RecordingError(ValueError):
    """A recording is missing, corrupt, truncated or inconsistent, or a frame cannot be written."""


@dataclasses.dataclass(frozen=True)
class VisitInfo:
    """What a recording is: ``scene``, ``visit`` (1 or 2), ``step_dt`` (seconds of sim time per
    world step, see :class:`ovman_ros.bundle.FrameClock`) and the TF frame names used."""

    scene: str
    visit: int
    step_dt: float
    frames: FramesConfig


@dataclasses.dataclass(frozen=True)
class RecordedFrame:
    """One recorded frame: the observation exactly as the world gave it (no segments when the
    recording has no :data:`SEGMENT_TOPICS`), and the ground-truth state of every object at that
    step (evaluation only). A frame read back also has ``camera``: what a robot's camera gives of
    it, as mapping_node reads it from the recording's topics (:func:`ovman_ros.bundle.camera_frame`:
    colour, depth and camera_info, the pose looked up on ``/tf`` and ``/tf_static``, the step from the stamp, no
    segments; the label-blind agent's input). A frame to write needs no ``camera``."""

    observation: Observation
    objects: WorldState
    camera: Observation | None = None


@dataclasses.dataclass(frozen=True)
class RawFrame:
    """One recorded frame as stored (:func:`read_visit_raw`): its stamp (integer ns of sim time),
    its world step (from the labels table), and the CDR bytes (with the encapsulation header, as a
    serialised ROS 2 message) of every frame topic, and of the static topics at the first frame."""

    stamp_ns: int
    step: int
    messages: Mapping[str, bytes]


class VisitWriter:
    """Writes one visit, frame by frame; the recording appears at ``path`` only when closed.

    Use as a context manager: on an exception the partial recording is deleted and nothing
    appears at ``path``. Frames are stamped by :class:`ovman_ros.bundle.FrameClock` (one
    ``step_dt`` per world step, and at least one per frame), so every frame has its own stamp.
    ``segments`` False: the :data:`SEGMENT_TOPICS` are not written (a recording as a robot's
    camera gives it).
    """

    def __init__(
        self, path: str | os.PathLike[str], info: VisitInfo, *, overwrite: bool = False, segments: bool = True
    ) -> None:
        self.path = Path(path)
        self.info = info
        self._overwrite = overwrite
        self._segments = segments
        self._topics = {
            t: kind for t, kind in {**FRAME_TOPICS, **STATIC_TOPICS}.items() if segments or t not in SEGMENT_TOPICS
        }
        if self.path.exists() and not overwrite:
            raise RecordingError(f"{self.path}: already exists; not overwriting it (choose a new path or remove it)")
        if not info.step_dt > 0.0:
            raise RecordingError(f"{self.path}: VisitInfo.step_dt must be positive seconds, got {info.step_dt}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The bag is assembled in a hidden sibling directory and renamed into place when complete.
        self._tmp_dir = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent))
        self._storage_name = self.path.name + ".mcap"
        try:
            self._stream = (self._tmp_dir / self._storage_name).open("wb")
        except OSError as err:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            raise RecordingError(f"{self.path}: cannot create the recording: {err}") from err
        self._mcap = McapWriter(self._stream, compression=CompressionType.ZSTD, enable_crcs=True, enable_data_crcs=True)
        self._mcap.start(profile="ros2", library=f"ovman recording v{FORMAT_VERSION}")
        self._channels: dict[str, int] = {}
        schemas: dict[str, int] = {}
        for topic, msgtype in self._topics.items():
            if msgtype not in schemas:
                text, _ = TYPESTORE.generate_msgdef(msgtype, ros_version=2)
                schemas[msgtype] = self._mcap.register_schema(msgtype, "ros2msg", text.encode())
            qos = _qos_yaml(topic)
            metadata = {"offered_qos_profiles": qos, "topic_type_hash": TYPESTORE.hash_rihs01(msgtype)}
            self._channels[topic] = self._mcap.register_channel(topic, "cdr", schemas[msgtype], metadata)
        self._counts = dict.fromkeys(self._channels, 0)
        self._clock = bundle.FrameClock(info.step_dt)
        self._first_stamp: int | None = None
        self._frame_count = 0
        self._intrinsics: Intrinsics | None = None
        self._truth_records = bundle.GroundTruthRecords()
        self._closed = False

    @property
    def frame_count(self) -> int:
        return self._frame_count

    def write(self, observation: Observation, objects: WorldState) -> None:
        """Append one frame, stamped by the visit's FrameClock from ``observation.step``."""
        if self._closed:
            raise RecordingError(f"{self.path}: the writer is closed")
        _check_observation(observation, self.path)
        if self._intrinsics is not None and observation.intrinsics != self._intrinsics:
            raise RecordingError(
                f"{self.path}: frame {self._frame_count} changes the camera intrinsics "
                f"({self._intrinsics} -> {observation.intrinsics}); one visit has one camera"
            )
        stamp = self._clock.stamp(observation.step)
        frames = self.info.frames
        if self._frame_count == 0:
            self._first_stamp = stamp
            self._put(bundle.TF_STATIC_TOPIC, _tf_message(bundle.static_transforms(frames), stamp), stamp)
        header = _header(stamp, frames.optical)
        width = observation.intrinsics.width
        self._put(bundle.RGB_TOPIC, _image(header, observation.rgb, bundle.RGB_ENCODING, width * 3), stamp)
        encoding, depth = bundle.depth_image(observation.depth)
        self._put(bundle.DEPTH_TOPIC, _image(header, depth, encoding, width * depth.itemsize), stamp)
        if self._segments:
            segments = np.ascontiguousarray(observation.segments, dtype="<i4")
            self._put(bundle.INSTANCES_TOPIC, _image(header, segments, bundle.INSTANCES_ENCODING, width * 4), stamp)
            self._put(bundle.INSTANCE_LABELS_TOPIC, _string(bundle.labels_json(observation, stamp)), stamp)
        self._put(bundle.CAMERA_INFO_TOPIC, _camera_info(header, observation.intrinsics), stamp)
        self._put(bundle.TF_TOPIC, _tf_message(bundle.dynamic_transforms(observation, frames), stamp), stamp)
        self._put(bundle.GROUND_TRUTH_TOPIC, _string(self._truth_records.record(observation, objects, stamp)), stamp)
        self._frame_count += 1
        self._intrinsics = observation.intrinsics

    def close(self) -> Path:
        """Finish the file, write ``metadata.yaml`` and move the bag to ``path``; returns ``path``."""
        if self._closed:
            return self.path
        if self._frame_count == 0:
            self.abort()
            raise RecordingError(f"{self.path}: no frames were written; an empty visit is not a recording")
        metadata = self._rosbag2_metadata()
        try:
            self._mcap.add_metadata("rosbag2", {"serialized_metadata": yaml.safe_dump(metadata, sort_keys=False)})
            self._mcap.finish()
            self._stream.close()
            document = {"rosbag2_bagfile_information": metadata}
            (self._tmp_dir / "metadata.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
            self._tmp_dir.chmod(0o755)
        except OSError as err:
            self.abort()
            raise RecordingError(f"{self.path}: cannot finish the recording: {err}") from err
        self._closed = True
        old = None
        if self.path.exists():
            if not self._overwrite:
                shutil.rmtree(self._tmp_dir, ignore_errors=True)
                raise RecordingError(f"{self.path}: a recording appeared there while writing; not replacing it")
            old = self._tmp_dir.with_suffix(".old")
            os.rename(self.path, old)
        os.rename(self._tmp_dir, self.path)
        if old is not None:
            shutil.rmtree(old)
        return self.path

    def abort(self) -> None:
        """Drop the partial recording; nothing appears at ``path``."""
        self._closed = True
        self._stream.close()
        shutil.rmtree(self._tmp_dir, ignore_errors=True)

    def __enter__(self) -> VisitWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _put(self, topic: str, message: Any, stamp: int) -> None:
        try:
            data = TYPESTORE.serialize_cdr(message, message.__msgtype__)
        except SerdeError as err:
            raise RecordingError(f"{self.path}: topic {topic}: cannot serialise the message: {err}") from err
        self._mcap.add_message(self._channels[topic], log_time=stamp, data=bytes(data), publish_time=stamp)
        self._counts[topic] += 1

    def _rosbag2_metadata(self) -> dict[str, Any]:
        """rosbag2 ``metadata.yaml`` content (format version 9) for what was written."""
        start = self._first_stamp or 0
        duration = (self._clock.last_ns or 0) - start
        total = sum(self._counts.values())
        return {
            "version": ROSBAG2_VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": total,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": topic,
                        "type": msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": _qos_profiles(topic),
                        "type_description_hash": TYPESTORE.hash_rihs01(msgtype),
                    },
                    "message_count": self._counts[topic],
                }
                for topic, msgtype in self._topics.items()
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [self._storage_name],
            "files": [
                {
                    "path": self._storage_name,
                    "starting_time": {"nanoseconds_since_epoch": start},
                    "duration": {"nanoseconds": duration},
                    "message_count": total,
                }
            ],
            "custom_data": {CUSTOM_DATA_KEY: _info_json(self.info, self._frame_count)},
            "ros_distro": ROS_DISTRO,
        }


def _qos_profiles(topic: str) -> list[dict[str, Any]]:
    """Offered QoS of a topic in rosbag2 v9 layout: /tf_static is latched (transient local, depth 1);
    every other topic takes the player's default (reliable, volatile)."""
    if topic != bundle.TF_STATIC_TOPIC:
        return []
    zero = {"sec": 0, "nsec": 0}
    return [
        {
            "history": "keep_last",
            "depth": 1,
            "reliability": "reliable",
            "durability": "transient_local",
            "deadline": zero,
            "lifespan": zero,
            "liveliness": "automatic",
            "liveliness_lease_duration": zero,
            "avoid_ros_namespace_conventions": False,
        }
    ]


def _qos_yaml(topic: str) -> str:
    return yaml.safe_dump(_qos_profiles(topic), sort_keys=False).strip()


def write_visit(
    path: str | os.PathLike[str], info: VisitInfo, frames: Iterable[RecordedFrame], *, overwrite: bool = False
) -> Path:
    """Write a whole visit (see :class:`VisitWriter`); returns the recording's path."""
    with VisitWriter(path, info, overwrite=overwrite) as writer:
        for frame in frames:
            writer.write(frame.observation, frame.objects)
    return Path(path)


# ---- reading -------------------------------------------------------------------------------------


def strip_segments(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Copy the recording at ``source`` to ``target`` without the simulator's segments
    (:data:`SEGMENT_TOPICS`); every other message is written again exactly. Returns ``target``."""
    info, _ = read_visit_info(source)
    with VisitWriter(target, info, segments=False) as writer:
        for frame in read_visit(source):
            writer.write(frame.observation, frame.objects)
    return Path(target)


def read_visit_info(path: str | os.PathLike[str]) -> tuple[VisitInfo, int]:
    """``(VisitInfo, frame count)`` of a recording, from its metadata only."""
    path = Path(path)
    reader = _open_reader(path)
    try:
        return _info_of(reader, path)
    finally:
        reader.close()


def read_visit(path: str | os.PathLike[str]) -> Iterator[RecordedFrame]:
    """Iterate the frames of a recording in order, rebuilding exactly the Observations written.

    The metadata is checked now (missing or corrupt recordings raise RecordingError at once);
    frames are decoded lazily. Raises RecordingError naming the file and topic for a corrupt,
    truncated or inconsistent recording.
    """
    path = Path(path)
    reader, info, frame_count, connections = _opened(path)
    topics = {**_frame_topics(connections), **STATIC_TOPICS}
    return _frames(_grouped(reader, path, frame_count, connections, topics), path, info)


def read_visit_raw(path: str | os.PathLike[str]) -> Iterator[RawFrame]:
    """Iterate the frames of a recording as stored: CDR bytes and recorded stamps, what ``ros2 bag
    play`` publishes (the first frame also carries the static topics).

    Checks what playing needs without decoding the images: the metadata (now, as
    :func:`read_visit`), the storage (chunk CRCs), one message of every frame topic per frame,
    and each frame's labels table (decoded for its world step: its stamp must be the message
    time; the ground truth record's, when the recording has no labels table). The images, the
    transforms and the ground truth are not decoded; their consumers check them. RecordingError naming
    the file and topic otherwise.
    """
    path = Path(path)
    reader, _, frame_count, connections = _opened(path)
    topics = {**_frame_topics(connections), **STATIC_TOPICS}
    return _raw_frames(_grouped(reader, path, frame_count, connections, topics), path)


def has_segments(path: str | os.PathLike[str]) -> bool:
    """Whether the recording at ``path`` holds the simulator's segments (:data:`SEGMENT_TOPICS`)."""
    path = Path(path)
    reader, _, _, connections = _opened(path)
    reader.close()
    return bundle.INSTANCES_TOPIC in connections


def _frame_topics(connections: Mapping[str, Any]) -> dict[str, str]:
    """The frame topics of a recording whose checked connections are ``connections``."""
    return {t: kind for t, kind in FRAME_TOPICS.items() if t in connections}


def _frames(groups: Iterator[_Group], path: Path, info: VisitInfo) -> Iterator[RecordedFrame]:
    clock = bundle.FrameClock(info.step_dt)
    parser = bundle.GroundTruthParser()
    tree = TransformBuffer()
    types = {**FRAME_TOPICS, **STATIC_TOPICS}
    for group in groups:
        stamp = group.stamp_ns
        messages = {topic: _decode(data, types[topic], path, topic, stamp) for topic, data in group.items.items()}
        for topic in (bundle.TF_STATIC_TOPIC, bundle.TF_TOPIC):
            if topic in messages:
                try:
                    tree.set_message(messages[topic], static=topic == bundle.TF_STATIC_TOPIC)
                except ValueError as err:
                    raise RecordingError(f"{path}: frame at stamp {stamp} ns: topic {topic}: {err}") from None
        yield _assemble(messages, stamp, path, info, clock, parser, tree)


def _raw_frames(groups: Iterator[_Group], path: Path) -> Iterator[RawFrame]:
    for raw in groups:
        topic = bundle.INSTANCE_LABELS_TOPIC if bundle.INSTANCE_LABELS_TOPIC in raw.items else bundle.GROUND_TRUTH_TOPIC
        text = _decode(raw.items[topic], STRING, path, topic, raw.stamp_ns).data
        try:
            table = bundle.parse_labels_json(text) if topic == bundle.INSTANCE_LABELS_TOPIC else _truth_step(text)
        except BundleFormatError as err:
            raise RecordingError(f"{path}: frame at stamp {raw.stamp_ns} ns: topic {topic}: {err}") from None
        if table.stamp_ns != raw.stamp_ns:
            raise RecordingError(
                f"{path}: frame at stamp {raw.stamp_ns} ns: topic {topic}: stamp "
                f"{table.stamp_ns} ns does not match the message time"
            )
        yield RawFrame(raw.stamp_ns, table.step, raw.items)


def _truth_step(text: str) -> GroundTruthFrame:
    """The ground-truth record of a frame without a labels table (its step and stamp)."""
    return bundle.GroundTruthParser().parse(text)


@dataclasses.dataclass(frozen=True)
class _Group:
    """The messages stored at one timestamp (ns): topic -> CDR bytes."""

    stamp_ns: int
    items: dict[str, bytes]


def _opened(path: Path) -> tuple[Reader, VisitInfo, int, dict[str, Any]]:
    """An open reader of ``path``, its VisitInfo, frame count and checked connections by topic."""
    reader = _open_reader(path)
    try:
        info, frame_count = _info_of(reader, path)
        return reader, info, frame_count, _connections_of(reader, path, frame_count)
    except BaseException:
        reader.close()
        raise


def _grouped(
    reader: Reader, path: Path, frame_count: int, connections: dict[str, Any], topics: Mapping[str, str]
) -> Iterator[_Group]:
    """The stored messages of ``topics``, one group per timestamp (a frame), in order; each group
    has every frame topic once (static topics only where written). Closes ``reader``."""
    wanted = [c for topic, c in connections.items() if topic in topics]
    topic_of = {c.id: c.topic for c in wanted}
    pending: dict[str, bytes] = {}
    stamp: int | None = None
    produced = 0
    frame_topics = [t for t in FRAME_TOPICS if t in topics]
    try:
        for connection, timestamp, data in reader.messages(connections=wanted):
            topic = topic_of[connection.id]
            if stamp is not None and timestamp != stamp:
                yield _complete(pending, stamp, path, frame_topics)
                produced += 1
                pending = {}
            stamp = timestamp
            if topic in pending:
                raise RecordingError(f"{path}: topic {topic}: two messages at stamp {timestamp} ns (one frame each)")
            pending[topic] = data
        if stamp is not None:
            yield _complete(pending, stamp, path, frame_topics)
            produced += 1
    except _STORAGE_ERRORS as err:
        # A damaged chunk holds several topics: name those the current frame still lacks.
        complete = all(t in pending for t in frame_topics)
        frame, have = (produced + 1, {}) if complete else (produced, pending)
        lacking = ", ".join(t for t in frame_topics if t not in have)
        raise RecordingError(
            f"{path}: cannot read frame {frame} (topics {lacking}): the file is corrupt or truncated: "
            f"{type(err).__name__}: {err}"
        ) from err
    finally:
        reader.close()
    if produced != frame_count:
        raise RecordingError(f"{path}: truncated: metadata promises {frame_count} frames, the file holds {produced}")


def _complete(messages: dict[str, bytes], stamp: int, path: Path, frame_topics: list[str]) -> _Group:
    missing = sorted(set(frame_topics) - set(messages))
    if missing:
        raise RecordingError(f"{path}: frame at stamp {stamp} ns lacks topic(s) {', '.join(missing)}")
    return _Group(stamp, messages)


def _assemble(
    messages: dict[str, Any],
    stamp: int,
    path: Path,
    info: VisitInfo,
    clock: bundle.FrameClock,
    parser: bundle.GroundTruthParser,
    tree: TransformBuffer,
) -> RecordedFrame:
    where = f"{path}: frame at stamp {stamp} ns"
    info_msg = messages[bundle.CAMERA_INFO_TOPIC]
    segmented = bundle.INSTANCES_TOPIC in messages
    try:
        intrinsics = bundle.intrinsics_from_camera_info(info_msg.width, info_msg.height, info_msg.k)
    except BundleFormatError as err:
        raise RecordingError(f"{where}: topic {bundle.CAMERA_INFO_TOPIC}: {err}") from None
    try:
        truth = parser.parse(messages[bundle.GROUND_TRUTH_TOPIC].data)
    except BundleFormatError as err:
        raise RecordingError(f"{where}: topic {bundle.GROUND_TRUTH_TOPIC}: {err}") from None
    table = bundle.LabelTable(truth.stamp_ns, truth.step, {})
    if segmented:
        try:
            table = bundle.parse_labels_json(messages[bundle.INSTANCE_LABELS_TOPIC].data)
        except BundleFormatError as err:
            raise RecordingError(f"{where}: topic {bundle.INSTANCE_LABELS_TOPIC}: {err}") from None
    step = table.step
    expected_stamp = clock.stamp(step)
    if truth.step != step or expected_stamp != stamp or table.stamp_ns != stamp or truth.stamp_ns != stamp:
        raise RecordingError(
            f"{where}: world step {step} / stamp {table.stamp_ns} ns (labels), step {truth.step} / stamp "
            f"{truth.stamp_ns} ns (ground truth) do not match the message time (the frame clock with step_dt "
            f"{info.step_dt} s gives {expected_stamp} ns)"
        )
    size = (intrinsics.height, intrinsics.width)
    rgb = _image_array(messages[bundle.RGB_TOPIC], bundle.RGB_ENCODING, np.uint8, (*size, 3), where, bundle.RGB_TOPIC)
    depth_msg = messages[bundle.DEPTH_TOPIC]
    if depth_msg.encoding == bundle.DEPTH_MM_ENCODING:
        mm = _image_array(depth_msg, bundle.DEPTH_MM_ENCODING, "<u2", size, where, bundle.DEPTH_TOPIC)
        depth = bundle.depth_metres(mm)
    else:
        depth = _image_array(depth_msg, bundle.DEPTH_ENCODING, "<f4", size, where, bundle.DEPTH_TOPIC)
    if segmented:
        segments = _image_array(
            messages[bundle.INSTANCES_TOPIC], bundle.INSTANCES_ENCODING, "<i4", size, where, bundle.INSTANCES_TOPIC
        )
    else:
        segments = np.zeros(size, dtype=np.int32)
    observation = Observation(
        rgb=rgb,
        depth=depth.astype(np.float32, copy=False),
        segments=segments.astype(np.int32, copy=False),
        segment_labels=table.labels,
        segment_instances=truth.segment_instances if segmented else {},
        pose=truth.pose,
        camera_position=truth.camera_position,
        intrinsics=intrinsics,
        step=step,
    )
    optical = messages[bundle.RGB_TOPIC].header.frame_id
    try:
        pose = tree.lookup(info.frames.map, optical, stamp)
    except TransformError as err:
        raise RecordingError(
            f"{where}: topics {bundle.TF_TOPIC} and {bundle.TF_STATIC_TOPIC}: no pose of the camera's frame "
            f"{optical!r} in {info.frames.map!r}: {err}"
        ) from None
    _check_pose(pose, observation, where)
    yaw_deg, horizon_deg, _ = camera_angles(pose.rotation)
    camera = bundle.camera_frame(
        observation.rgb,
        observation.depth,
        intrinsics,
        ros_to_thor_point(pose.translation),
        yaw_deg,
        horizon_deg,
        bundle.frame_step(stamp, clock.dt_ns),
    )
    return RecordedFrame(observation=observation, objects=truth.objects, camera=camera)


def _check_pose(pose: Transform, observation: Observation, where: str) -> None:
    translation, rotation = bundle.optical_pose(observation)
    got_t = pose.translation
    got_q = np.array(pose.rotation)
    err_t = float(np.max(np.abs(np.subtract(got_t, translation))))
    # q and -q are the same rotation.
    err_q = float(min(np.max(np.abs(got_q - rotation)), np.max(np.abs(got_q + rotation))))
    if err_t > POSE_CHECK_TOLERANCE or err_q > POSE_CHECK_TOLERANCE:
        raise RecordingError(
            f"{where}: topic {bundle.TF_TOPIC}: the camera pose on the frame tree disagrees with the ground-truth "
            f"agent pose (translation error {err_t:.3g} m, quaternion error {err_q:.3g})"
        )


def _image_array(message: Any, encoding: str, dtype: Any, shape: tuple[int, ...], where: str, topic: str) -> np.ndarray:
    height, width = shape[0], shape[1]
    itemsize = np.dtype(dtype).itemsize * (shape[2] if len(shape) == 3 else 1)
    problems = []
    if message.encoding != encoding:
        problems.append(f"encoding {message.encoding!r}, expected {encoding!r}")
    if (message.height, message.width) != (height, width):
        problems.append(f"size {message.width}x{message.height}, CameraInfo says {width}x{height}")
    if message.is_bigendian:
        problems.append("big-endian data")
    if message.step != width * itemsize:
        problems.append(f"row step {message.step}, expected {width * itemsize}")
    if len(message.data) != height * width * itemsize:
        problems.append(f"{len(message.data)} data bytes, expected {height * width * itemsize}")
    if problems:
        raise RecordingError(f"{where}: topic {topic}: {'; '.join(problems)}")
    return np.frombuffer(np.asarray(message.data, dtype=np.uint8).tobytes(), dtype=dtype).reshape(shape)


def _open_reader(path: Path) -> Reader:
    if not path.exists():
        raise RecordingError(f"{path}: no recording there (the directory does not exist)")
    if not path.is_dir():
        raise RecordingError(f"{path}: a recording is a rosbag2 directory (metadata.yaml + .mcap), got a file")
    if not (path / "metadata.yaml").is_file():
        raise RecordingError(f"{path}: not a rosbag2 recording: metadata.yaml is missing")
    try:
        reader = Reader(path)
        reader.open()
    except _STORAGE_ERRORS as err:
        raise RecordingError(
            f"{path}: cannot open the recording (corrupt or truncated): {type(err).__name__}: {err}"
        ) from err
    return reader


def _info_of(reader: Reader, path: Path) -> tuple[VisitInfo, int]:
    custom = getattr(reader.storage, "metadata", None)
    text = (getattr(custom, "custom", None) or {}).get(CUSTOM_DATA_KEY)
    if text is None:
        raise RecordingError(f"{path}/metadata.yaml: custom_data has no '{CUSTOM_DATA_KEY}' entry: not an OVMAN visit")
    try:
        doc = json.loads(text)
        version = int(doc["format_version"])
        if version != FORMAT_VERSION:
            raise RecordingError(
                f"{path}: recording format version {version}; this reader understands version {FORMAT_VERSION}"
            )
        frames = FramesConfig(**{k: str(v) for k, v in doc["frames"].items()})
        info = VisitInfo(scene=str(doc["scene"]), visit=int(doc["visit"]), step_dt=float(doc["step_dt"]), frames=frames)
        return info, int(doc["frame_count"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        if isinstance(err, RecordingError):
            raise
        raise RecordingError(f"{path}/metadata.yaml: bad '{CUSTOM_DATA_KEY}' entry: {err!r}") from None


def _connections_of(reader: Reader, path: Path, frame_count: int) -> dict[str, Any]:
    by_topic = {c.topic: c for c in reader.connections}
    stripped = not any(t in by_topic for t in SEGMENT_TOPICS)
    for topic, msgtype in {**FRAME_TOPICS, **STATIC_TOPICS}.items():
        connection = by_topic.get(topic)
        if connection is None and not (stripped and topic in SEGMENT_TOPICS):
            together = " (the segment topics come together or not at all)" if topic in SEGMENT_TOPICS else ""
            raise RecordingError(f"{path}: topic {topic} is missing from the recording{together}")
        if connection is None:
            continue
        if connection.msgtype != msgtype:
            raise RecordingError(f"{path}: topic {topic} has type {connection.msgtype}, expected {msgtype}")
        if topic in FRAME_TOPICS and connection.msgcount != frame_count:
            raise RecordingError(
                f"{path}: topic {topic} has {connection.msgcount} messages for {frame_count} frames (truncated?)"
            )
    return by_topic


def _decode(raw: bytes, msgtype: str, path: Path, topic: str, stamp: int) -> Any:
    try:
        return TYPESTORE.deserialize_cdr(raw, msgtype)
    except (SerdeError, ValueError, IndexError, TypeError) as err:
        raise RecordingError(f"{path}: topic {topic}: message at stamp {stamp} ns is corrupt: {err}") from err


def _info_json(info: VisitInfo, frame_count: int) -> str:
    return json.dumps(
        {
            "format_version": FORMAT_VERSION,
            "scene": info.scene,
            "visit": info.visit,
            "step_dt": info.step_dt,
            "frames": dataclasses.asdict(info.frames),
            "frame_count": frame_count,
        },
        sort_keys=True,
    )


# ---- message construction (rosbags' message classes; the same fields as the rclpy ones) ---------


def _check_observation(observation: Observation, path: Path) -> None:
    k = observation.intrinsics
    expect = (k.height, k.width)
    checks = (
        ("rgb", observation.rgb, np.uint8, (*expect, 3)),
        ("depth", observation.depth, np.float32, expect),
        ("segments", observation.segments, np.int32, expect),
    )
    for name, array, dtype, shape in checks:
        if not isinstance(array, np.ndarray) or array.dtype != dtype or array.shape != shape:
            got = f"{array.dtype} {array.shape}" if isinstance(array, np.ndarray) else type(array).__name__
            raise RecordingError(
                f"{path}: observation at step {observation.step}: {name} must be {np.dtype(dtype)} {shape} "
                f"(from the intrinsics), got {got}"
            )


def _msg(msgtype: str) -> Any:
    return TYPESTORE.types[msgtype]


def _header(stamp: int, frame_id: str) -> Any:
    sec, nanosec = bundle.split_stamp(stamp)
    time = _msg("builtin_interfaces/msg/Time")(sec=sec, nanosec=nanosec)
    return _msg("std_msgs/msg/Header")(stamp=time, frame_id=frame_id)


def _image(header: Any, array: np.ndarray, encoding: str, step: int) -> Any:
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return _msg(IMAGE)(
        header=header,
        height=array.shape[0],
        width=array.shape[1],
        encoding=encoding,
        is_bigendian=0,
        step=step,
        data=data,
    )


def _string(text: str) -> Any:
    return _msg(STRING)(data=text)


def _camera_info(header: Any, intrinsics: Intrinsics) -> Any:
    fields = bundle.camera_info_fields(intrinsics)
    roi = _msg("sensor_msgs/msg/RegionOfInterest")(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    return _msg(CAMERA_INFO)(
        header=header,
        height=fields.height,
        width=fields.width,
        distortion_model=fields.distortion_model,
        d=np.array(fields.d, dtype=np.float64),
        k=np.array(fields.k, dtype=np.float64),
        r=np.array(fields.r, dtype=np.float64),
        p=np.array(fields.p, dtype=np.float64),
        binning_x=0,
        binning_y=0,
        roi=roi,
    )


def _tf_message(transforms: list[Transform], stamp: int) -> Any:
    stamped = _msg("geometry_msgs/msg/TransformStamped")
    transform = _msg("geometry_msgs/msg/Transform")
    vector = _msg("geometry_msgs/msg/Vector3")
    quaternion = _msg("geometry_msgs/msg/Quaternion")
    return _msg(TF_MESSAGE)(
        transforms=[
            stamped(
                header=_header(stamp, t.parent),
                child_frame_id=t.child,
                transform=transform(translation=vector(*t.translation), rotation=quaternion(*t.rotation)),
            )
            for t in transforms
        ]
    )


__all__ = [
    "CUSTOM_DATA_KEY",
    "FORMAT_VERSION",
    "GroundTruthFrame",
    "RecordedFrame",
    "RecordingError",
    "VisitInfo",
    "VisitWriter",
    "read_visit",
    "read_visit_info",
    "write_visit",
]
