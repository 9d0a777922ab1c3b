"""sim_node: the simulator (or a recorded visit) on the ROS 2 graph.

Owns one :class:`ovman_sim.session.SimSession` and only converts messages (ovman_ros.messages).
Every frame is one bundle with one sim-time stamp: the camera (six standard topics, one
``camera/bundle`` or both: ``node.camera_output``), ``tf``, ``odom``, ``clock`` and
``ovman/ground_truth`` (evaluation only), reliable and volatile; ``tf_static`` and ``map`` latched.
A loaded recording plays as stored, like ``ros2 bag play --clock`` (recorded bytes and stamps, no
``odom``). Services: ``sim/load_visit``, ``sim/act``, ``sim/act_sequence``, ``sim/play_tour``. Its
parameters are read at start-up. Frames: REP 103/105 on the wire, AI2-THOR world in the core.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from nav_msgs.msg import OccupancyGrid, Odometry
from ovman_ros.bundle import BundleFormatError, object_state_from_dict
from ovman_ros.messages import (
    CAMERA_MESSAGES,
    base_pose_msg,
    bundle_messages,
    camera_bundle_msg,
    camera_messages,
    occupancy_grid_msg,
    odometry_msg,
    start_pose_from_msg,
    static_tf_message,
    tf_message,
    time_msg,
)
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from rcl_interfaces.msg import SetParametersResult
from rclpy.duration import Duration
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from ovman_core.config import ConfigError, OvmanConfig, load_config, with_parameters
from ovman_core.world_state import WorldState
from ovman_interfaces.msg import CameraBundle
from ovman_interfaces.srv import Act, ActSequence, LoadVisit, PlayTour
from ovman_ros import bundle, bundle_cdr, names, qos
from ovman_sim.recording import RawFrame
from ovman_sim.session import Frame, Mode, SessionError, SimSession
from ovman_sim.world import Condition

NODE_NAME = "sim_node"
ACT_CAMERA_PARAMETER = "node.act_camera"
"""The parameter that may change while the node runs (bool): while false, the camera part of the
bundle after an Act or a LoadVisit is neither rendered nor published (clock, transforms, odometry and
ground truth always are), so embodied runs serialise no images nobody reads; a scene loaded at
start-up (``node.scene``) always publishes it."""


class SimNode(GraphNode):
    """Publishes the bundles of one SimSession and serves load_visit, act and play_tour."""

    def __init__(self, config: OvmanConfig | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.config = self._declare_parameters(config if config is not None else load_config())
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        self.session = SimSession(self.config)
        settings = self.config.sim_node.node
        depth = settings.qos_depth
        if depth < 1:
            raise ConfigError(f"config sim_node.node.qos_depth must be at least 1, got {depth}")
        if settings.play_period_s < 0.0 or not settings.play_ack_timeout_s > 0.0:
            raise ConfigError(
                "config sim_node.node: play_period_s must be >= 0 and play_ack_timeout_s > 0 seconds, got "
                f"{settings.play_period_s} and {settings.play_ack_timeout_s}"
            )
        try:
            outputs = bundle.camera_outputs(settings.camera_output, "config sim_node.node.camera_output")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        frames_qos = qos.frames(depth)
        self._camera: dict[str, Publisher] = (
            {
                topic: self.create_publisher(kind, names.relative(topic), frames_qos)
                for topic, kind in CAMERA_MESSAGES.items()
            }
            if bundle.CAMERA_TOPICS_OUTPUT in outputs
            else {}
        )
        """The standard camera topics' publishers (none unless node.camera_output has them)."""
        self._camera_bundle = (
            self.create_publisher(CameraBundle, names.CAMERA_BUNDLE, frames_qos)
            if bundle.CAMERA_BUNDLE_OUTPUT in outputs
            else None
        )
        self._odom = self.create_publisher(Odometry, names.ODOM, frames_qos)
        self._ground_truth = self.create_publisher(String, names.GROUND_TRUTH, frames_qos)
        self._tf = self.create_publisher(TFMessage, names.TF, qos.TF)
        self._tf_static = self.create_publisher(TFMessage, names.TF_STATIC, qos.LATCHED)
        self._truth_records = bundle.GroundTruthRecords()
        self._map = self.create_publisher(OccupancyGrid, names.MAP, qos.LATCHED)
        self._clock_publisher = self.create_publisher(Clock, names.CLOCK, frames_qos)
        self._frame_publishers = (
            self._clock_publisher,
            self._tf,
            self._odom,
            self._ground_truth,
            *self._camera.values(),
            *((self._camera_bundle,) if self._camera_bundle is not None else ()),
        )
        self._stored_publishers = {
            bundle.TF_STATIC_TOPIC: self._tf_static,
            bundle.TF_TOPIC: self._tf,
            bundle.GROUND_TRUTH_TOPIC: self._ground_truth,
            **self._camera,
        }
        """The publisher of every recorded topic that goes out as stored
        (:data:`ovman_sim.recording.FRAME_TOPICS` and the static ones), transforms first, as in a live
        frame."""
        self.create_service(LoadVisit, names.SIM_LOAD_VISIT, self._on_load_visit)
        self.create_service(Act, names.SIM_ACT, self._on_act)
        self.create_service(ActSequence, names.SIM_ACT_SEQUENCE, self._on_act_sequence)
        self.create_service(PlayTour, names.SIM_PLAY_TOUR, self._on_play_tour)
        # Static transforms hold for all time: stamp 0.
        self._tf_static.publish(static_tf_message(self.config.frames, 0))
        self._load_at_start()

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> OvmanConfig:
        updated = config_from_parameters(self, config, [(NODE_NAME, "")])
        self.add_on_set_parameters_callback(self._on_set_parameters)
        return updated

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        fixed = [p.name for p in parameters if p.name != ACT_CAMERA_PARAMETER]
        if fixed:
            return SetParametersResult(
                successful=False,
                reason=f"{NODE_NAME} reads {', '.join(fixed)} at start-up; restart it to change them "
                f"(only {ACT_CAMERA_PARAMETER} changes at run time)",
            )
        (parameter,) = parameters
        if not isinstance(parameter.value, bool):
            return SetParametersResult(successful=False, reason=f"{ACT_CAMERA_PARAMETER} must be true or false")
        self.config = with_parameters(self.config, NODE_NAME, {ACT_CAMERA_PARAMETER: parameter.value})
        return SetParametersResult(successful=True)

    def _load_at_start(self) -> None:
        node = self.config.sim_node.node
        try:
            if node.recording:
                count = self.session.load_recording(node.recording)
                self.get_logger().info(f"loaded recording {node.recording} ({count} frames); call play_tour")
            elif node.scene:
                self._publish_live_load(self.session.load_scene(node.scene))
                self.get_logger().info(f"loaded scene {node.scene}")
        except SessionError as err:
            raise SessionError(f"{NODE_NAME} start-up (node.scene / node.recording parameters): {err}") from err

    # ---------------------------------------------------------------- services

    def _on_load_visit(self, request: LoadVisit.Request, response: LoadVisit.Response) -> LoadVisit.Response:
        try:
            if request.recording:
                response.frame_count = self.session.load_recording(request.recording)
                response.message = f"recording {request.recording}: {response.frame_count} frames; call play_tour"
            else:
                objects = _objects_from_json(request.objects_json) if request.objects_json else None
                pose = (
                    start_pose_from_msg(request.start_pose, request.start_horizon_deg)
                    if request.use_start_pose
                    else None
                )
                mover = (request.mover_instance_id, int(request.mover_seed)) if request.mover_instance_id else None
                camera = self.config.sim_node.node.act_camera
                condition = (_condition(request.condition), int(request.condition_seed))
                frame = self.session.load_scene(request.scene, objects, pose, mover, camera, condition)
                self._publish_live_load(frame, camera)
                response.message = f"scene {request.scene} loaded at step {frame.observation.step}"
            response.success = True
        except SessionError as err:
            response.success, response.message = False, str(err)
            self.get_logger().warning(f"load_visit: {err}")
        return response

    def _on_act(self, request: Act.Request, response: Act.Response) -> Act.Response:
        camera = self.config.sim_node.node.act_camera
        try:
            result, frame = self.session.act(request.action, camera)
        except SessionError as err:
            response.success, response.message = False, str(err)
            return response
        self._publish(frame, camera=camera)
        response.success, response.collided, response.message = result.success, result.collided, result.message
        response.step = frame.observation.step
        response.pose = base_pose_msg(frame.observation, frame.stamp_ns, self.config.frames)
        return response

    def _on_act_sequence(self, request: ActSequence.Request, response: ActSequence.Response) -> ActSequence.Response:
        camera = self.config.sim_node.node.act_camera
        try:
            done, response.message = self.session.act_sequence(
                list(request.actions),
                [start_pose_from_msg(pose, 0.0) for pose in request.expected],
                request.position_tolerance,
                request.yaw_tolerance_deg,
                camera,
            )
        except SessionError as err:
            response.message = str(err)
            return response
        for result, frame in done:
            self._publish(frame, camera=camera)
            response.success.append(result.success)
            response.collided.append(result.collided)
            response.poses.append(base_pose_msg(frame.observation, frame.stamp_ns, self.config.frames))
        response.step = done[-1][1].observation.step if done else 0
        return response

    def _on_play_tour(self, request: PlayTour.Request, response: PlayTour.Response) -> PlayTour.Response:
        settings = self.config.sim_node.node
        period, ack_timeout = settings.play_period_s, Duration(seconds=settings.play_ack_timeout_s)
        problem = self._wait_matched(list(request.topics), list(request.min_subscriptions))
        if problem:
            response.success, response.message = False, problem
            self.get_logger().warning(f"play_tour: {problem}")
            return response
        # A recording plays as stored unless it is being recorded again (that needs the frames decoded).
        as_stored = self.session.mode is Mode.RECORDING and not request.record_path
        count = unchecked = 0
        try:
            frames = (
                self.session.play_recorded()
                if as_stored
                else self.session.play(request.record_path or None, int(request.visit) or 1)
            )
            for frame in frames:
                if count and period > 0.0:
                    time.sleep(period)  # real-time playback (wall time), for watching
                # Unpaced: acknowledgements are checked once per window of qos_depth frames (after every
                # frame is too costly); a subscriber's own depth must hold the frames it has not processed.
                elif unchecked >= settings.qos_depth:
                    self._wait_acknowledged(ack_timeout)  # the next frame could overwrite one not yet delivered
                    unchecked = 0
                if isinstance(frame, RawFrame):
                    self._publish_stored(frame)
                    response.step = frame.step
                else:
                    self._publish(frame)
                    response.step = frame.observation.step
                count, unchecked = count + 1, unchecked + 1
        except SessionError as err:
            response.success, response.message, response.frames = False, str(err), count
            self.get_logger().warning(f"play_tour: {err}")
            return response
        response.success, response.frames = True, count
        recorded = f"; recorded to {request.record_path}" if request.record_path else ""
        response.message = f"published {count} frames of {self.session.scene}{recorded}"
        return response

    # ---------------------------------------------------------------- publishing

    def _publish_live_load(self, frame: Frame, camera: bool = True) -> None:
        fields = self.session.occupancy()
        if fields is not None:
            self._map.publish(occupancy_grid_msg(fields, frame.stamp_ns))
        self._publish(frame, camera)

    def _wait_matched(self, topics: list[str], minimum: list[int]) -> str:
        """Wait until each of ``topics`` (this node's publishers, fully qualified) has ``minimum``
        matched subscriptions (PlayTour.srv), at most ``node.play_match_timeout_s``; the problem, or ""."""
        if len(topics) != len(minimum):
            return f"the request names {len(topics)} topics but {len(minimum)} subscription counts"
        mine = {publisher.topic_name: publisher for publisher in self.publishers}
        unknown = sorted(set(topics) - set(mine))
        if unknown:
            return f"this node publishes no {', '.join(unknown)} (topics must be fully qualified)"
        timeout = self.config.sim_node.node.play_match_timeout_s
        deadline = time.monotonic() + timeout
        for topic, wanted in zip(topics, minimum, strict=True):
            # Matching happens in the middleware's discovery threads: nothing to spin, poll the count.
            while (matched := mine[topic].get_subscription_count()) < wanted:
                if time.monotonic() >= deadline:
                    return (
                        f"{topic} has {matched} matched subscriptions of the {wanted} the caller sees after "
                        f"{timeout} s (node.play_match_timeout_s); nothing played"
                    )
                time.sleep(0.01)
        return ""

    def _wait_acknowledged(self, timeout: Duration) -> None:
        """Flow control of unpaced playback: block until every reliable subscriber has every frame."""
        for publisher in self._frame_publishers:
            if not publisher.wait_for_all_acked(timeout):
                self.get_logger().warning(
                    f"{publisher.topic_name}: a subscriber did not acknowledge a frame within "
                    f"{timeout.nanoseconds / 1e9:.1f} s (node.play_ack_timeout_s); it may miss frames",
                    throttle_duration_sec=5.0,
                )

    def _publish(self, frame: Frame, camera: bool = True) -> None:
        """The frame's bundle; without ``camera`` only clock, transforms, odometry and ground truth."""
        if not camera:
            observation, stamp, frames = frame.observation, frame.stamp_ns, self.config.frames
            self._clock_publisher.publish(Clock(clock=time_msg(stamp)))
            self._tf.publish(tf_message(bundle.dynamic_transforms(observation, frames), stamp))
            self._odom.publish(odometry_msg(observation, stamp, frames))
            self._ground_truth.publish(String(data=self._truth_records.record(observation, frame.objects, stamp)))
            return
        messages = bundle_messages(
            frame.observation, frame.objects, frame.stamp_ns, self.config.frames, self._truth_records
        )
        # Clock and transforms first, so a subscriber that gets the images can already look them up.
        self._clock_publisher.publish(messages.clock)
        self._tf.publish(messages.tf)
        self._odom.publish(messages.odom)
        self._ground_truth.publish(messages.ground_truth)
        camera = camera_messages(messages)
        for topic, publisher in self._camera.items():
            publisher.publish(camera[topic])
        if self._camera_bundle is not None:
            self._camera_bundle.publish(camera_bundle_msg(camera))

    def _publish_stored(self, frame: RawFrame) -> None:
        """A recorded frame's messages as stored (their bytes), after its /clock; its camera
        bundle, when published, is composed of the stored camera messages' bytes."""
        self._clock_publisher.publish(Clock(clock=time_msg(frame.stamp_ns)))
        for topic, publisher in self._stored_publishers.items():
            data = frame.messages.get(topic)
            if data is not None:
                publisher.publish(data)
        if self._camera_bundle is not None:
            try:
                self._camera_bundle.publish(bundle_cdr.compose(frame.messages))
            except bundle_cdr.CdrError as err:
                raise SessionError(f"recorded frame at {frame.stamp_ns} ns: {err}") from None

    def destroy_node(self) -> None:
        session = getattr(self, "session", None)  # absent when the constructor failed
        if session is not None:
            session.close()
        super().destroy_node()

    @property
    def mode(self) -> Mode:
        return self.session.mode


def _objects_from_json(text: str) -> WorldState:
    try:
        items = json.loads(text)
        if not isinstance(items, list):
            raise BundleFormatError(f"expected a JSON list of objects, got {type(items).__name__}")
        return WorldState.of([object_state_from_dict(item) for item in items])
    except (json.JSONDecodeError, BundleFormatError, KeyError, TypeError, ValueError) as err:
        raise SessionError(f"LoadVisit.objects_json: {err!r}") from None


def _condition(name: str) -> Condition:
    """LoadVisit.condition (empty: baseline); SessionError naming the field otherwise."""
    try:
        return Condition(name or Condition.BASELINE.value)
    except ValueError:
        expected = ", ".join(c.value for c in Condition)
        raise SessionError(f"LoadVisit.condition {name!r}: expected one of {expected} (or empty)") from None


def main(args: Sequence[str] | None = None) -> int:
    """Console script ``sim_node``: spin until Ctrl-C or an external shutdown. 0 then, 1 when it cannot start."""
    return run_node("sim_node", SimNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
