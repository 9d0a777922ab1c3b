"""segmenter_node: a segmenter as a node of its own, publishing each frame's ovman_interfaces/Segments.

A thin node around :func:`ovman_mapping.segmenter.make_segmenter`: each camera frame (the colour,
depth and camera_info topics synchronised by exact stamp, or one ``camera/bundle``, by
``node.camera_input``; read while the segments have a subscriber) is segmented, its segments go out
on ``segmentation/segments`` with the colour image's header for a mapping_node of ``segmenter.kind:
topic`` (how a robot's own segmenter plugs in). Parameters: mapping_node's ``segmenter.*``,
``encoder.*`` and camera input keys (one parameter file serves both; ``kind: topic`` refused). No
pose; no ground truth but the simulator backend's masks (the sim_perception route).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ovman_ros.messages import CAMERA_MESSAGES, PLAIN_CAMERA_MESSAGES, camera_item, header_msg
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from rclpy.clock import Clock, ClockType

from ovman_core.config import ConfigError, OvmanConfig, load_config
from ovman_interfaces.msg import CameraBundle, Segments
from ovman_mapping.backprojection import FrameFormatError
from ovman_mapping.bundle_sync import StampSynchronizer
from ovman_mapping.map_messages import (
    MapMessageError,
    camera_bundle_frame,
    observation_from_camera,
    observation_from_topics,
)
from ovman_mapping.segmenter import (
    SEGMENTER_NODE_PARAMETERS,
    TOPIC,
    SegmenterError,
    check_frame,
    make_segmenter,
)
from ovman_mapping.segments_messages import segments_msg
from ovman_ros import bundle, bundle_cdr, names, qos

NODE_NAME = "segmenter_node"
OWNER = "mapping_node"
"""The config section whose keys this node declares (the segmenter mapping_node would run)."""
LAZY_PERIOD_S = 0.05
"""(s, steady clock): how often the node looks whether its segments have a subscriber."""


class SegmenterNode(GraphNode):
    """Segments every camera frame it receives and publishes the segments."""

    def __init__(self, config: OvmanConfig | None = None, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        config = config if config is not None else load_config()
        self.config = config_from_parameters(self, config, [(OWNER, prefix) for prefix in SEGMENTER_NODE_PARAMETERS])
        self.refuse_parameter_changes()
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        mapping = self.config.mapping_node
        if mapping.segmenter.kind == TOPIC:
            raise ConfigError(
                "config mapping_node segmenter.kind topic: segmenter_node runs a segmenter itself "
                "(learned, clip or simulator); topic is mapping_node's way to read this node"
            )
        try:
            self.camera_input = bundle.camera_input(mapping.node.camera_input, "config mapping_node node.camera_input")
            self.segmenter = make_segmenter(mapping.segmenter, encoder=mapping.encoder)
        except (ValueError, SegmenterError) as err:
            raise ConfigError(str(err)) from None
        self.segmenter.warm_up()
        self._step_ns = round(mapping.node.step_dt * 1e9)
        plain = not self.segmenter.reads_simulator_segments
        self.topics = PLAIN_CAMERA_MESSAGES if plain else CAMERA_MESSAGES
        self.sync: StampSynchronizer[Any] = StampSynchronizer(self.topics, mapping.node.sync_max_pending)
        self.published = self.rejected = 0
        self._frames_qos = qos.frames(mapping.node.qos_depth, keep_all=mapping.node.qos_keep_all)
        self._segments = self.create_publisher(Segments, names.SEGMENTS, self._frames_qos)
        self._camera: list[Any] = []
        """The camera subscriptions, made while the segments have a subscriber (:meth:`_lazy`)."""
        self.create_timer(LAZY_PERIOD_S, self._lazy, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(
            f"segmenter {self.segmenter.description}; publishing {names.SEGMENTS}, reading the camera while "
            "it has a subscriber"
        )

    def _lazy(self) -> None:
        """Read the camera only while a subscriber is matched to the segments (image_proc's lazy
        subscription): no frame is segmented for nobody, and none goes out before its reader matched."""
        wanted = self._segments.get_subscription_count() > 0
        if wanted and not self._camera:
            if self.camera_input == bundle.CAMERA_BUNDLE_OUTPUT:
                self._camera = [
                    self.create_subscription(
                        CameraBundle, names.CAMERA_BUNDLE, self._on_camera_bundle, self._frames_qos, raw=True
                    )
                ]
            else:
                self._camera = [
                    self.create_subscription(
                        kind, names.relative(topic), functools.partial(self._on_message, topic), self._frames_qos
                    )
                    for topic, kind in self.topics.items()
                ]
        elif not wanted and self._camera:
            for subscription in self._camera:
                self.destroy_subscription(subscription)
            self._camera = []
            self.sync.reset()

    def _on_message(self, topic: str, message: Any) -> None:
        try:
            item, stamp = camera_item(topic, message)
        except bundle.BundleFormatError as err:
            self._reject(f"{topic}: {err}")
            return
        complete = self.sync.add(topic, stamp, item)
        if complete is not None:
            self._segment(complete.stamp_ns, dict(complete.items))

    def _on_camera_bundle(self, data: bytes) -> None:
        try:
            stamp, _, items = camera_bundle_frame(bundle_cdr.decode(data))
        except (bundle_cdr.CdrError, MapMessageError) as err:
            self._reject(f"{names.CAMERA_BUNDLE}: {err}")
            return
        self._segment(stamp, items)

    def _segment(self, stamp_ns: int, items: dict[str, Any]) -> None:
        """Segment one complete frame and publish its segments with the colour image's header."""
        rgb = items[bundle.RGB_TOPIC]
        try:
            if self.segmenter.reads_simulator_segments:
                observation = observation_from_topics(items, None, "", self._step_ns)
            else:
                step = bundle.frame_step(stamp_ns, self._step_ns)
                depth, info = items[bundle.DEPTH_TOPIC], items[bundle.CAMERA_INFO_TOPIC]
                observation = observation_from_camera(rgb, depth, info, None, "", step)
            check_frame(observation.rgb, observation.depth, observation.intrinsics)
            segmentation = self.segmenter.segment(observation)
        except (MapMessageError, FrameFormatError, SegmenterError, ValueError) as err:
            self._reject(f"camera frame at {stamp_ns} ns: {err}")
            return
        header = header_msg(stamp_ns, rgb.header.frame_id)  # the colour image's (a decoded bundle's is not a Header)
        self._segments.publish(
            segments_msg(segmentation, header, self.segmenter.description, self.segmenter.exact_labels)
        )
        self.published += 1

    def _reject(self, reason: str) -> None:
        self.rejected += 1
        self.get_logger().warning(f"dropped a camera message: {reason}", throttle_duration_sec=5.0)


def main(args: Sequence[str] | None = None) -> int:
    """Console script ``segmenter_node``: spin until Ctrl-C; 0 then, 1 when it cannot start."""
    return run_node(NODE_NAME, SegmenterNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
