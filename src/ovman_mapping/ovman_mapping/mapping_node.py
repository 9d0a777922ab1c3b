"""mapping_node: the per-visit 3D instance map on the ROS 2 graph.

A thin node around :class:`ovman_mapping.visit_mapper.VisitMapper`: each camera frame (topics
synchronised by exact stamp, or one ``camera/bundle``, by ``node.camera_input``) waits for its optical
frame's pose in ``node.map_frame`` on the frame tree at its stamp (:class:`ovman_ros.pose_gate.PoseGate`),
becomes an Observation and is fused; ``mapping/finish_visit`` publishes the visit's map, latched, on
``ovman/map/visit<n>`` with its markers. Ground truth is never read; a frame's step is its stamp over
``node.step_dt``. Every order of service calls gets a reply; a bad frame, or one without a pose in
time, is dropped with a warning and counted. Parameters: ``node_parameters(config, "mapping_node")``.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Sequence
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from ovman_ros.messages import CAMERA_MESSAGES, PLAIN_CAMERA_MESSAGES, camera_item, stamp_of
from ovman_ros.pose_gate import Dropped, PoseGate
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from ovman_ros.tf_listener import transform_source
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.task import Future
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from ovman_core.config import ConfigError, OvmanConfig, load_config
from ovman_core.observation import Observation
from ovman_interfaces.msg import CameraBundle, Segments
from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
from ovman_interfaces.srv import MapVisit
from ovman_mapping.backprojection import FrameFormatError
from ovman_mapping.bundle_sync import StampSynchronizer
from ovman_mapping.encoders import FeatureEncoder, make_encoder
from ovman_mapping.frame_queue import FrameQueue
from ovman_mapping.instances import map_problem
from ovman_mapping.map_messages import (
    MapMessageError,
    MapNames,
    camera_bundle_frame,
    check_marker_style,
    instance_map_msg,
    map_markers,
    observation_from_camera,
    observation_from_topics,
)
from ovman_mapping.map_store import MapStore, store_dir
from ovman_mapping.segmenter import SegmenterError, TopicSegmenter, make_segmenter
from ovman_mapping.segments_messages import SegmentsError, segmentation_from_msg
from ovman_mapping.visit_mapper import VISITS, VisitError, VisitMapper
from ovman_ros import bundle, bundle_cdr, names, qos

NODE_NAME = "mapping_node"
STATUS_PERIOD_S = 1.0
"""(s, steady clock): how often the fusion status goes to /diagnostics."""
STATUS_WINDOW = 300
"""Fused frames whose latency the status's percentiles are taken over."""
FRAME, SEGMENTS = "frame", "segments"
"""The two halves of a frame paired by stamp with ``segmenter.kind: topic``."""
DRAIN_POLL_S = 0.02
"""(s): how often a finish_visit without a frame count looks whether the frames in flight are fused."""


def map_topic(visit: int) -> str:
    """The latched InstanceMap topic of ``visit``."""
    return names.VISIT_MAP.format(visit=visit)


def markers_topic(visit: int) -> str:
    """The latched MarkerArray topic of ``visit``."""
    return names.VISIT_MARKERS.format(visit=visit)


class MappingNode(GraphNode):
    """Synchronises the camera bundle, fuses it into the open visit, publishes finished maps."""

    def __init__(self, config: OvmanConfig | None = None, encoder: FeatureEncoder | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.config = self._declare_parameters(config if config is not None else load_config())
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        settings = self.config.mapping_node.node
        if settings.qos_depth < 1:
            raise ConfigError(f"config mapping_node node.qos_depth must be at least 1, got {settings.qos_depth}")
        if settings.start_visit not in (0, *VISITS):
            raise ConfigError(f"config mapping_node node.start_visit must be 0, 1 or 2, got {settings.start_visit}")
        if not settings.step_dt > 0.0:
            raise ConfigError(f"config mapping_node node.step_dt must be positive seconds, got {settings.step_dt}")
        if not settings.map_frame:
            raise ConfigError("config mapping_node node.map_frame must be a frame id, got an empty string")
        if not settings.finish_timeout_s > 0.0:
            raise ConfigError(
                f"config mapping_node node.finish_timeout_s must be positive seconds, got {settings.finish_timeout_s}"
            )
        try:
            self.camera_input = bundle.camera_input(settings.camera_input, "config mapping_node node.camera_input")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        check_marker_style(self.config.mapping_node.markers)
        self.encoder = encoder if encoder is not None else make_encoder(self.config.mapping_node.encoder)
        self.encoder.warm_up()  # a model loads now, not during the first finish_visit
        try:
            segmenter = make_segmenter(self.config.mapping_node.segmenter, encoder=self.config.mapping_node.encoder)
        except SegmenterError as err:
            raise ConfigError(str(err)) from None
        segmenter.warm_up()  # a network loads now, not at the first frame
        store = MapStore(store_dir(self.config.mapping_node.mapping.store_dir)) if settings.store_maps else None
        try:
            self.mapper = VisitMapper(
                self.config.mapping_node,
                self.encoder,
                segmenter,
                self.config.shared.limits.max_coordinate,
                store,
                settings.map_frame,
            )
        except VisitError as err:
            raise ConfigError(str(err)) from None
        self.mapper.warm_up()
        # A label-blind segmenter on the topics reads a robot's four: no instance masks, no labels table.
        self.plain = self.camera_input == bundle.CAMERA_TOPICS_OUTPUT and not segmenter.reads_simulator_segments
        self.topics = PLAIN_CAMERA_MESSAGES if self.plain else CAMERA_MESSAGES
        self._step_ns = round(settings.step_dt * 1e9)
        self.sync: StampSynchronizer[Any] = StampSynchronizer(self.topics, settings.sync_max_pending)
        # segmenter.kind topic: each complete frame waits (as the synchroniser holds it) for the
        # Segments message of its stamp from another node, and the pair goes on to its pose.
        self.segments: TopicSegmenter | None = segmenter if isinstance(segmenter, TopicSegmenter) else None
        self.segments_sync: StampSynchronizer[Any] = StampSynchronizer((FRAME, SEGMENTS), settings.sync_max_pending)
        try:
            self.tf, tf_backend = transform_source(
                self,
                self.config.shared.ros.tf_backend,
                self.config.shared.ros.tf_cache_s,
                self._release,
                keep_all=settings.qos_keep_all,
            )
        except ValueError as err:
            raise ConfigError(f"config /** ros.tf_backend: {err}") from None
        self.poses: PoseGate[dict[str, Any]] = PoseGate(
            self.tf, settings.map_frame, settings.tf_timeout_s, settings.tf_max_pending
        )
        # Frames waiting for their pose are given up on the steady clock, whatever /clock does.
        self.create_timer(
            min(0.05, settings.tf_timeout_s / 4), self._release, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        try:
            self.queue: FrameQueue[tuple[dict[str, Any], bundle.Transform]] = FrameQueue(
                settings.frame_policy, settings.max_rate_hz
            )
        except ValueError as err:
            raise ConfigError(f"config mapping_node node: {err}") from None
        # Frames are received (decoded, synchronised, given their pose) by the default group and fused by
        # this one, so that on two executor threads a frame arriving while another is fused is queued by
        # node.frame_policy instead of waiting in DDS; the lock keeps the mapper to one thread at a time.
        fusion = MutuallyExclusiveCallbackGroup()
        self._mapper_lock = threading.Lock()
        self._fuse_signal = self.create_guard_condition(self._fuse_queued, callback_group=fusion)
        self._fusing = False
        self.fused = 0
        """Frames fused into the open visit, or into the last one finished while none is open."""
        self._latencies_ms: collections.deque[float] = collections.deque(maxlen=STATUS_WINDOW)
        self._fused_at: collections.deque[float] = collections.deque(maxlen=STATUS_WINDOW)
        self._diagnostics = self.create_publisher(DiagnosticArray, names.DIAGNOSTICS, qos.frames(10))
        self.create_timer(STATUS_PERIOD_S, self._publish_status, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.rejected = 0
        self.outside_visit = 0
        self._finishing: tuple[int, Future[bool]] | None = None
        self.map_names = MapNames(time.time_ns())  # this run's maps, told from an earlier run's
        """The bundle count a running finish_visit waits for, and its future (True: reached)."""
        # keep_all: lossless when a tour is published faster than it is fused, at the cost of buffering
        # the frames not yet fused.
        frames_qos = qos.frames(settings.qos_depth, keep_all=settings.qos_keep_all)
        if self.camera_input == bundle.CAMERA_BUNDLE_OUTPUT:
            self.create_subscription(CameraBundle, names.CAMERA_BUNDLE, self._on_camera_bundle, frames_qos, raw=True)
        else:
            for topic, kind in self.topics.items():
                self.create_subscription(
                    kind, names.relative(topic), functools.partial(self._on_message, topic), frames_qos
                )
        if self.segments is not None:
            self.create_subscription(Segments, names.SEGMENTS, self._on_segments, frames_qos)
        self._map_publishers = {v: self.create_publisher(InstanceMapMsg, map_topic(v), qos.LATCHED) for v in VISITS}
        self._marker_publishers = {v: self.create_publisher(MarkerArray, markers_topic(v), qos.LATCHED) for v in VISITS}
        self.create_service(MapVisit, names.MAPPING_START_VISIT, self._on_start_visit, callback_group=fusion)
        # Its own group: while a finish waits, the default group's bundles and timers keep running.
        self.create_service(
            MapVisit, names.MAPPING_FINISH_VISIT, self._on_finish_visit, callback_group=MutuallyExclusiveCallbackGroup()
        )
        if settings.start_visit:
            self.mapper.start(settings.start_visit)
        self.get_logger().info(
            f"segmenter {segmenter.description}; encoder {self.encoder.description}; camera poses from "
            f"{tf_backend} in {settings.map_frame}; open visit: {self.mapper.visit or 'none'}"
        )

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> OvmanConfig:
        updated = config_from_parameters(self, config, [(NODE_NAME, "")])
        self.refuse_parameter_changes()
        return updated

    # ---------------------------------------------------------------- frames

    def _on_message(self, topic: str, message: Any) -> None:
        # No visit open: counted and dropped before it is synchronised or decoded (a robot's camera
        # keeps publishing between visits).
        if self.mapper.visit is None:
            if topic == bundle.RGB_TOPIC:
                self.outside_visit += 1
            return
        try:
            item, stamp = camera_item(topic, message)
        except bundle.BundleFormatError as err:
            self._reject(f"{topic}: {err}")
            return
        complete = self.sync.add(topic, stamp, item)
        if complete is not None:
            self._await_pose(complete.stamp_ns, complete.items[bundle.RGB_TOPIC].header.frame_id, dict(complete.items))

    def _on_camera_bundle(self, data: bytes) -> None:
        """A CameraBundle as received (its CDR), read without copying the images (bundle_cdr.decode)."""
        if self.mapper.visit is None:
            self.outside_visit += 1
            return
        try:
            stamp, frame, items = camera_bundle_frame(bundle_cdr.decode(data))
        except (bundle_cdr.CdrError, MapMessageError) as err:
            self._reject(f"{names.CAMERA_BUNDLE}: {err}")
            return
        self._await_pose(stamp, frame, items)

    def _on_segments(self, message: Segments) -> None:
        """Another node's segments of one frame: paired with the frame of the same stamp."""
        if self.mapper.visit is None:
            return
        complete = self.segments_sync.add(SEGMENTS, stamp_of(message.header), message)
        if complete is not None and self._pair(complete.stamp_ns, complete.items):
            self._fuse_signal.trigger()

    def _pair(self, stamp_ns: int, items: Any) -> bool:
        """A posed frame and its segments, paired: queued to be fused (False: the segments refused)."""
        frame_items, pose = items[FRAME]
        rgb = frame_items[bundle.RGB_TOPIC]
        try:
            segmentation = segmentation_from_msg(items[SEGMENTS], rgb.width, rgb.height, rgb.header.frame_id)
        except SegmentsError as err:
            self._reject(f"{names.SEGMENTS} at {stamp_ns} ns: {err}")
            return False
        message = items[SEGMENTS]
        frame_items[SEGMENTS] = (segmentation, bool(message.exact_labels), message.segmenter)
        self.queue.put(stamp_ns, (frame_items, pose))
        return True

    def _await_pose(self, stamp_ns: int, image_frame: str, items: dict[str, Any]) -> None:
        """A complete frame (items keyed by topic) waits for its camera pose, then (``segmenter.kind:
        topic``) for its segments: the pose first, as the frame tree keeps only ``tf_cache_s`` of history."""
        frame = self.config.mapping_node.node.optical_frame or image_frame
        if not frame:
            self._reject(
                f"camera frame at {stamp_ns} ns: the colour image has no header.frame_id to look its pose up "
                "by (set mapping_node node.optical_frame)"
            )
            return
        self._dropped(self.poses.add(stamp_ns, frame, items, time.monotonic()))
        self._release()

    def _release(self) -> None:
        """Fuse, in order, every waiting frame whose pose is now known; count those given up."""
        if not self.poses.pending:
            return
        ready, dropped = self.poses.poll(time.monotonic())
        self._dropped(dropped)
        queued = False
        for items, pose in ready:
            stamp = stamp_of(items[bundle.RGB_TOPIC].header)
            if self.segments is None:
                self.queue.put(stamp, (items, pose))
                queued = True
            elif (complete := self.segments_sync.add(FRAME, stamp, (items, pose))) is not None:
                queued = self._pair(complete.stamp_ns, complete.items) or queued
        if queued:
            self._fuse_signal.trigger()

    def _fuse_queued(self) -> None:
        """Fuse the frames the queue holds, oldest first (the fusion group's callback)."""
        while (job := self.queue.take()) is not None:
            stamp, (items, pose) = job
            self._fusing = True
            try:
                if self.plain:
                    observation = observation_from_camera(
                        items[bundle.RGB_TOPIC],
                        items[bundle.DEPTH_TOPIC],
                        items[bundle.CAMERA_INFO_TOPIC],
                        pose,
                        self.poses.target,
                        bundle.frame_step(stamp, self._step_ns),
                    )
                else:
                    observation = observation_from_topics(items, pose, self.poses.target, self._step_ns)
                with self._mapper_lock:
                    if self.segments is not None:
                        self.segments.give(observation, *items[SEGMENTS])
                    self._fuse(observation, stamp)
                self.fused += 1
                self._latencies_ms.append((self.get_clock().now().nanoseconds - stamp) / 1e6)
                self._fused_at.append(time.monotonic())
            except (MapMessageError, FrameFormatError, VisitError, SegmenterError) as err:
                self._reject(str(err))
            finally:
                self._fusing = False

    def _dropped(self, dropped: list[Dropped[dict[str, Any]]]) -> None:
        for frame in dropped:
            self.get_logger().warning(
                f"dropped a camera frame ({frame.reason}): {frame.message}", throttle_duration_sec=5.0
            )

    def _fuse(self, observation: Observation, stamp_ns: int) -> None:
        """Fuse one frame into the open visit; a waiting finish_visit learns when its count is reached."""
        self.mapper.add(observation, stamp_ns)
        if self._finishing is not None and self.mapper.frames >= self._finishing[0]:
            self._finishing[1].set_result(True)

    def _reject(self, reason: str) -> None:
        self.rejected += 1
        self.get_logger().warning(f"dropped a camera message: {reason}", throttle_duration_sec=5.0)

    def _state(self) -> str:
        counts = self.sync.counts
        drops = ", ".join(f"{n} {reason}" for reason, n in sorted(self.poses.drops.items())) or "none"
        return (
            f"{self.mapper.frames} bundles fused; synchroniser: {counts.completed} complete, "
            f"{counts.dropped_incomplete} incomplete and {counts.dropped_stale} stale dropped, {self.sync.pending} "
            f"pending; {self._segments_state()}camera poses: {self.poses.released} found, "
            f"{self.poses.pending} waiting, dropped: {drops}; "
            f"{self.queue.policy}: {self.queue.counts.skipped_busy} skipped while fusing, "
            f"{self.queue.counts.skipped_rate} over max_rate_hz, {len(self.queue)} queued; "
            f"{self.rejected} messages rejected; {self.outside_visit + self.mapper.unassigned} bundles outside a visit"
        )

    def _segment_counts(self) -> dict[str, int]:
        """segmenter.kind topic: what became of frames and Segments messages (empty otherwise)."""
        if self.segments is None:
            return {}
        counts = self.segments_sync.counts
        return {
            "segments_paired": counts.completed,
            "frames_without_segments": counts.missing[SEGMENTS],
            "segments_without_frame": counts.missing[FRAME],
            "segments_late": counts.stale[SEGMENTS],
            "frames_late": counts.stale[FRAME],
            "segments_pending": self.segments_sync.pending,
            "frames_waiting_for_segments": self.segments_sync.holding(FRAME),
        }

    def _segments_state(self) -> str:
        counts = self._segment_counts()
        if not counts:
            return ""
        return (
            f"segments from {names.SEGMENTS}: {counts['segments_paired']} paired with their frame, dropped: "
            f"{counts['frames_without_segments']} frames without segments, {counts['segments_without_frame']} "
            f"for a stamp no frame has, {counts['segments_late'] + counts['frames_late']} late, "
            f"{counts['segments_pending']} stamps pending; "
        )

    # ---------------------------------------------------------------- services

    def _on_start_visit(self, request: MapVisit.Request, response: MapVisit.Response) -> MapVisit.Response:
        if self._finishing is not None:
            response.success = False
            response.message = (
                f"cannot start visit {request.visit}: finish_visit of visit {self.mapper.visit} is waiting for "
                f"{self._finishing[0]} bundles; call start_visit after it returns"
            )
            return response
        try:
            with self._mapper_lock:
                self.mapper.start(int(request.visit))
        except VisitError as err:
            response.success, response.message = False, str(err)
            return response
        self.sync.reset()
        self.segments_sync.reset()
        if self.segments is not None:
            self.segments.reset()
        self.poses.reset()
        # A visit is a new stream: a played recording starts its clock again (static transforms stay).
        self.tf.clear()
        self.queue.reset()
        self.fused = 0
        self.rejected = 0
        response.success, response.frames = True, 0
        stored = self.mapper.prior_id if request.visit == 2 else None
        response.message = f"visit {request.visit} is open" + (f" (against stored visit 1 {stored})" if stored else "")
        self.get_logger().info(response.message)
        return response

    async def _on_finish_visit(self, request: MapVisit.Request, response: MapVisit.Response) -> MapVisit.Response:
        """Waits (without holding the executor, which goes on fusing bundles) for the expected bundles."""
        visit, expected = int(request.visit) or (self.mapper.visit or 0), int(request.expected_frames)
        timeout = request.timeout_s if request.timeout_s > 0.0 else self.config.mapping_node.node.finish_timeout_s
        if not visit or self.mapper.visit != visit:
            open_visit = f"visit {self.mapper.visit} is open" if self.mapper.visit else "no visit is open"
            response.success, response.message = False, f"cannot finish visit {visit}: {open_visit}"
            return response
        if expected and self.mapper.frames < expected:
            await self._bundles(expected, timeout)
        elif not expected:
            await self._drained(timeout)
        if not expected and not self.mapper.frames:
            response.success = False
            response.message = (
                f"visit {visit} stays open: it fused no frame (is the camera publishing?); {self._state()}"
            )
            self.get_logger().warning(response.message)
            return response
        if expected and self.mapper.frames != expected:
            response.success, response.frames = False, self.mapper.frames
            why = "timed out" if self.mapper.frames < expected else "more bundles than expected arrived"
            response.message = (
                f"visit {visit} stays open: {why} after {timeout:.1f} s waiting for {expected} bundles; {self._state()}"
            )
            self.get_logger().warning(response.message)
            return response
        summary = self._state()
        counts = self.queue.counts
        response.skipped = counts.skipped_busy + counts.skipped_rate
        try:
            with self._mapper_lock:
                instance_map, stamps = self.mapper.finish(visit, counts.skipped_busy + counts.skipped_rate)
            problem = map_problem(instance_map, self.config.shared.limits.max_coordinate)
            if problem is not None:
                raise MapMessageError(f"visit {visit} was closed but its map is not published: {problem}")
            now = self.get_clock().now().to_msg()
            message = instance_map_msg(instance_map, stamps, self.poses.target, now, *self._wire_names(visit))
        except (VisitError, MapMessageError) as err:
            response.success, response.message = False, str(err)
            self.get_logger().error(response.message)
            return response
        self._map_publishers[visit].publish(message)
        self._marker_publishers[visit].publish(map_markers(message, self.config.mapping_node.markers))
        response.success, response.frames, response.instances = True, len(stamps), len(instance_map)
        response.map_id = self.mapper.stored_id or ""
        stored = ""
        if self.mapper.store is not None:
            problem = self.mapper.store_problem
            response.success = problem is None
            stored = f"; NOT stored: {problem}" if problem else f"; stored as {response.map_id}"
        response.message = f"visit {visit}: {len(instance_map)} instances on {map_topic(visit)}{stored}; {summary}"
        (self.get_logger().info if response.success else self.get_logger().error)(response.message)
        return response

    def _wire_names(self, visit: int) -> tuple[str, str]:
        """(map_id, follows) of the map just finished: its map store ids when it was stored (a
        visit 2 then follows the stored visit 1 it was mapped against), else this run's names."""
        if self.mapper.stored_id is None:
            return self.map_names.name(visit)
        return self.mapper.stored_id, (self.mapper.prior_id or "") if visit == 2 else ""

    async def _bundles(self, expected: int, timeout_s: float) -> None:
        """Return once ``expected`` bundles are fused or ``timeout_s`` (s) has passed."""
        future: Future[bool] = Future(executor=self.executor)
        self._finishing = (expected, future)
        # A steady clock: with use_sim_time a stalled simulated clock must not stall the timeout.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        timer = self.create_timer(timeout_s, lambda: future.done() or future.set_result(False), clock=steady)
        try:
            await future
        finally:
            self._finishing = None
            self.destroy_timer(timer)

    def _in_flight(self) -> bool:
        """Whether a received frame still waits for its segments, its pose or to be fused."""
        waiting_for_segments = self._segment_counts().get("frames_waiting_for_segments", 0)
        return bool(waiting_for_segments or self.poses.pending or len(self.queue) or self._fusing)

    async def _drained(self, timeout_s: float) -> None:
        """Return once no received frame is in flight (:meth:`_in_flight`), or ``timeout_s`` (s) has passed."""
        deadline = time.monotonic() + timeout_s
        while self._in_flight() and time.monotonic() < deadline:
            future: Future[bool] = Future(executor=self.executor)
            steady = Clock(clock_type=ClockType.STEADY_TIME)
            timer = self.create_timer(DRAIN_POLL_S, lambda f=future: f.done() or f.set_result(True), clock=steady)
            try:
                await future
            finally:
                self.destroy_timer(timer)

    def _publish_status(self) -> None:
        """The frames' fate on /diagnostics (diagnostic_msgs, as diagnostic_updater publishes it)."""
        now = time.monotonic()
        recent = [t for t in self._fused_at if now - t <= STATUS_PERIOD_S]
        latencies = sorted(self._latencies_ms)
        counts = self.queue.counts
        kept, stride = self.mapper.frames_kept

        def quantile(q: float) -> str:
            return f"{latencies[min(len(latencies) - 1, int(q * len(latencies)))]:.1f}" if latencies else ""

        values = {
            "visit": str(self.mapper.visit or 0),
            "fused": str(self.fused),
            "fused_rate_hz": f"{len(recent) / STATUS_PERIOD_S:.1f}",
            "skipped_while_fusing": str(counts.skipped_busy),
            "skipped_over_max_rate": str(counts.skipped_rate),
            "queued": str(len(self.queue)),
            "waiting_for_pose": str(self.poses.pending),
            **{f"dropped_{reason}": str(n) for reason, n in sorted(self.poses.drops.items())},
            **{key: str(n) for key, n in self._segment_counts().items()},
            "rejected": str(self.rejected),
            "latency_p50_ms": quantile(0.5),
            "latency_p95_ms": quantile(0.95),
            "frames_kept_for_evidence": str(kept),
            "kept_frame_stride": str(stride),
        }
        lost = counts.skipped_busy + counts.skipped_rate + sum(self.poses.drops.values()) + self.rejected
        lost += self._segment_counts().get("frames_without_segments", 0)
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if lost else DiagnosticStatus.OK,
            name=f"{self.get_fully_qualified_name()}: camera frames",
            message=f"{self.fused} fused, {lost} skipped or dropped this visit",
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        header = Header(stamp=self.get_clock().now().to_msg())
        self._diagnostics.publish(DiagnosticArray(header=header, status=[status]))


def main(args: Sequence[str] | None = None) -> int:
    """Console script ``mapping_node``: spin (frames received on one executor thread, fused on the
    other) until Ctrl-C; 0 then, 1 when it cannot start."""
    return run_node("mapping_node", MappingNode, args, threads=2)


if __name__ == "__main__":
    raise SystemExit(main())
