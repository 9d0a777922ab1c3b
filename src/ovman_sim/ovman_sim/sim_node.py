"""sim_node: the simulator (or a recorded visit) on the ROS 2 graph.

Owns one :class:`ovman_sim.session.SimSession` and only converts messages (ovman_sim.messages).
For every frame it publishes one bundle, all with the same stamp (sim time, advancing
``node.step_dt`` per world step):

- ``/camera/color/image_raw`` (rgb8), ``/camera/depth/image_raw`` (32FC1 m, NaN invalid),
  ``/camera/instances/image_raw`` (32SC1 segment ids) + ``/camera/instances/labels`` (JSON),
  ``/camera/color/camera_info``: reliable, transient local (a late subscriber that asks for
  transient local gets the latest ``node.qos_depth`` frames);
- ``/tf`` (``odom → base_link → camera_link``), ``/camera/pose`` (optical frame in ``map``),
  ``/odom`` (nav_msgs/Odometry), ``/clock``, also transient local;
- ``/ovman/ground_truth`` (JSON, evaluation only).

Latched (transient local): ``/tf_static`` (``map → odom``, ``camera_link → camera_optical_frame``)
and ``/map`` (nav_msgs/OccupancyGrid of the reachable grid, published when a live visit loads).

Services (ovman_interfaces/srv): ``~/load_visit`` (LoadVisit), ``~/act`` (Act),
``~/play_tour`` (PlayTour). Parameters: every key of ``sim_node`` and ``/**`` in
config/ovman.yaml under its dotted name (e.g. ``node.scene``, ``tour.max_waypoints``), read at
start-up. Frames: REP 103/105 on the wire; the core works in AI2-THOR's world frame.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import rclpy
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import OccupancyGrid, Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from ovman_core.config import ConfigError, OvmanConfig, load_config, node_parameters, parameter_value, with_parameters
from ovman_core.world_state import WorldState
from ovman_interfaces.srv import Act, LoadVisit, PlayTour
from ovman_sim import bundle
from ovman_sim.bundle import BundleFormatError, object_state_from_dict
from ovman_sim.messages import (
    base_pose_msg,
    bundle_messages,
    occupancy_grid_msg,
    start_pose_from_msg,
    static_tf_message,
)
from ovman_sim.session import Frame, Mode, SessionError, SimSession

NODE_NAME = "sim_node"
LOAD_VISIT_SERVICE = "~/load_visit"
ACT_SERVICE = "~/act"
PLAY_TOUR_SERVICE = "~/play_tour"

TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""tf2_ros' TransformBroadcaster QoS, but transient local: tf2 listeners (volatile) match it, and a
late subscriber that asks for transient local also gets the transforms of the frames it missed."""
LATCHED_QOS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


class SimNode(Node):
    """Publishes the bundles of one SimSession and serves load_visit, act and play_tour."""

    def __init__(self, config: OvmanConfig | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.config = self._declare_parameters(config if config is not None else load_config())
        self.session = SimSession(self.config)
        depth = self.config.sim_node.node.qos_depth
        if depth < 1:
            raise ConfigError(f"config sim_node.node.qos_depth must be at least 1, got {depth}")
        frames_qos = QoSProfile(
            depth=depth,
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self._rgb = self.create_publisher(Image, bundle.RGB_TOPIC, frames_qos)
        self._depth = self.create_publisher(Image, bundle.DEPTH_TOPIC, frames_qos)
        self._instances = self.create_publisher(Image, bundle.INSTANCES_TOPIC, frames_qos)
        self._labels = self.create_publisher(String, bundle.INSTANCE_LABELS_TOPIC, frames_qos)
        self._camera_info = self.create_publisher(CameraInfo, bundle.CAMERA_INFO_TOPIC, frames_qos)
        self._camera_pose = self.create_publisher(PoseStamped, bundle.CAMERA_POSE_TOPIC, frames_qos)
        self._odom = self.create_publisher(Odometry, bundle.ODOM_TOPIC, frames_qos)
        self._ground_truth = self.create_publisher(String, bundle.GROUND_TRUTH_TOPIC, frames_qos)
        self._tf = self.create_publisher(TFMessage, bundle.TF_TOPIC, TF_QOS)
        self._tf_static = self.create_publisher(TFMessage, bundle.TF_STATIC_TOPIC, LATCHED_QOS)
        self._map = self.create_publisher(OccupancyGrid, bundle.MAP_TOPIC, LATCHED_QOS)
        self._clock = self.create_publisher(Clock, bundle.CLOCK_TOPIC, frames_qos)
        self.create_service(LoadVisit, LOAD_VISIT_SERVICE, self._on_load_visit)
        self.create_service(Act, ACT_SERVICE, self._on_act)
        self.create_service(PlayTour, PLAY_TOUR_SERVICE, self._on_play_tour)
        # Static transforms hold for all time: stamp 0.
        self._tf_static.publish(static_tf_message(self.config.frames, 0))
        self._load_at_start()

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> OvmanConfig:
        defaults = node_parameters(config, NODE_NAME)
        self.declare_parameters("", [(name, value) for name, value in defaults.items()])
        values = {name: parameter_value(self.get_parameter(name).value) for name in defaults}
        try:
            updated = with_parameters(config, NODE_NAME, values)
        except ConfigError as err:
            raise ConfigError(f"{NODE_NAME} parameters: {err}") from err
        self.add_on_set_parameters_callback(self._on_set_parameters)
        return updated

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        names = ", ".join(p.name for p in parameters)
        return SetParametersResult(
            successful=False, reason=f"{NODE_NAME} reads its parameters at start-up; restart it to change {names}"
        )

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
                frame = self.session.load_scene(request.scene, objects, pose, mover)
                self._publish_live_load(frame)
                response.message = f"scene {request.scene} loaded at step {frame.observation.step}"
            response.success = True
        except SessionError as err:
            response.success, response.message = False, str(err)
            self.get_logger().warning(f"load_visit: {err}")
        return response

    def _on_act(self, request: Act.Request, response: Act.Response) -> Act.Response:
        try:
            result, frame = self.session.act(request.action)
        except SessionError as err:
            response.success, response.message = False, str(err)
            return response
        self._publish(frame)
        response.success, response.collided, response.message = result.success, result.collided, result.message
        response.step = frame.observation.step
        response.pose = base_pose_msg(frame.observation, frame.stamp_ns, self.config.frames)
        return response

    def _on_play_tour(self, request: PlayTour.Request, response: PlayTour.Response) -> PlayTour.Response:
        period = self.config.sim_node.node.play_period_s
        count = 0
        try:
            for frame in self.session.play(request.record_path or None, int(request.visit) or 1):
                if count and period > 0.0:
                    time.sleep(period)  # pace playback (wall time) so subscribers keep up
                self._publish(frame)
                count += 1
                response.step = frame.observation.step
        except SessionError as err:
            response.success, response.message, response.frames = False, str(err), count
            self.get_logger().warning(f"play_tour: {err}")
            return response
        response.success, response.frames = True, count
        recorded = f"; recorded to {request.record_path}" if request.record_path else ""
        response.message = f"published {count} frames of {self.session.scene}{recorded}"
        return response

    # ---------------------------------------------------------------- publishing

    def _publish_live_load(self, frame: Frame) -> None:
        fields = self.session.occupancy()
        if fields is not None:
            self._map.publish(occupancy_grid_msg(fields, frame.stamp_ns))
        self._publish(frame)

    def _publish(self, frame: Frame) -> None:
        messages = bundle_messages(frame.observation, frame.objects, frame.stamp_ns, self.config.frames)
        # Clock and transforms first, so a subscriber that gets the images can already look them up.
        self._clock.publish(messages.clock)
        self._tf.publish(messages.tf)
        self._camera_info.publish(messages.camera_info)
        self._camera_pose.publish(messages.camera_pose)
        self._odom.publish(messages.odom)
        self._ground_truth.publish(messages.ground_truth)
        self._labels.publish(messages.labels)
        self._instances.publish(messages.instances)
        self._depth.publish(messages.depth)
        self._rgb.publish(messages.rgb)

    def destroy_node(self) -> None:
        self.session.close()
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


def main(args: Sequence[str] | None = None) -> None:
    """Console script ``sim_node``: spin until Ctrl-C or an external shutdown."""
    rclpy.init(args=list(args) if args is not None else sys.argv)
    node = None
    try:
        node = SimNode()
        # Ctrl-C and an external shutdown are the normal ways to stop.
        with contextlib.suppress(KeyboardInterrupt, ExternalShutdownException):
            rclpy.spin(node)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
