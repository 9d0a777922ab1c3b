"""A tour published as a robot publishes it, at five camera sizes, to one mapping_node over DDS.

Only what a RealSense driver and a robot's TF give: ``sensor_msgs/Image`` colour and aligned depth
and ``sensor_msgs/CameraInfo`` on the driver's topic names (mapping_node's remapped to them, as a
launch file remaps), ``/tf`` and ``/tf_static``. One visit per size; each map's confident instances
must lie where the 320x240 map of the same tour puts them (tests/mapping/test_any_camera.py holds
the same check in process, and how its thresholds were measured).

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import rclpy
    from ovman_ros.messages import PLAIN_CAMERA_MESSAGES, bundle_messages, camera_messages, static_tf_message
    from ovman_ros.qos import LATCHED
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage

    from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
    from ovman_interfaces.srv import MapVisit
    from ovman_mapping.mapping_node import map_topic
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_ros import bundle, names
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations

from .processes import NodeProcess

pytestmark = pytest.mark.ros

CONFIG = load_config()
SCENE = "embedded-5"
FRAMES = 16
SIZES = ((320, 240), (640, 480), (848, 480), (1280, 720), (640, 400))
REALSENSE = {
    names.RGB: "/camera/camera/color/image_raw",
    names.DEPTH: "/camera/camera/aligned_depth_to_color/image_raw",
    names.CAMERA_INFO: "/camera/camera/color/camera_info",
}
"""realsense2_camera's topics (namespace and name ``camera``, ``align_depth.enable: true``)."""
MATCH_RADIUS, MIN_MATCHED, MAX_MEDIAN = 0.5, 0.7, 0.2
"""As in tests/mapping/test_any_camera.py: metres, share of confident instances, metres."""
TIMEOUT_S = 120.0


def rendered(width: int, height: int) -> tuple[list, object]:
    sim = CONFIG.sim_node
    sim = dataclasses.replace(sim, camera=dataclasses.replace(sim.camera, width=width, height=height))
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    frames = list(itertools.islice(tour_observations(world, sim.tour, sim.world), FRAMES))
    objects = world.objects()
    world.close()
    return frames, objects


def test_a_robot_published_tour_maps_alike_at_five_camera_sizes(ros_env, rclpy_context, tmp_path: Path):
    remaps = [arg for ours, theirs in REALSENSE.items() for arg in ("-r", f"{ours}:={theirs}")]
    node = NodeProcess(
        [sys.executable, "-m", "ovman_mapping.mapping_node", "--ros-args", *remaps,
         "-p", "segmenter.kind:=learned", "-p", "node.camera_input:=topics", "-p", "node.frame_policy:=keep_all",
         # maps compared, not TF timeouts: under load DDS may deliver a /tf sample seconds late
         "-p", f"node.tf_timeout_s:={TIMEOUT_S}"],
        tmp_path / "mapping.log",
        "mapping_node",
    )  # fmt: skip
    probe = rclpy.create_node("robot", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    maps: list[InstanceMapMsg] = []
    try:
        qos = QoSProfile(depth=FRAMES, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        topics = {ours: REALSENSE[names.relative(ours)] for ours in PLAIN_CAMERA_MESSAGES}
        publishers = {ours: probe.create_publisher(PLAIN_CAMERA_MESSAGES[ours], t, qos) for ours, t in topics.items()}
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        probe.create_subscription(InstanceMapMsg, map_topic(1), maps.append, LATCHED)
        start = probe.create_client(MapVisit, "mapping/start_visit")
        finish = probe.create_client(MapVisit, "mapping/finish_visit")

        def spin_until(condition, what: str) -> None:
            deadline = time.monotonic() + TIMEOUT_S
            while not condition():
                assert time.monotonic() < deadline, f"{what} within {TIMEOUT_S} s; {node.diagnosis()}"
                assert node.process.poll() is None, f"{what}: {node.diagnosis()}"
                executor.spin_once(timeout_sec=0.05)

        def call(client, request):
            spin_until(client.service_is_ready, client.srv_name)
            future = client.call_async(request)
            spin_until(future.done, f"{client.srv_name} answer")
            return future.result()

        spin_until(lambda: all(p.get_subscription_count() for p in [*publishers.values(), tf]), "the subscriptions")
        clock = bundle.FrameClock(CONFIG.sim_node.node.step_dt)
        by_size = {}
        for size in SIZES:
            frames, objects = rendered(*size)
            assert call(start, MapVisit.Request(visit=1)).success
            for observation in frames:
                messages = bundle_messages(observation, objects, clock.stamp(observation.step + 10_000), CONFIG.frames)
                tf.publish(messages.tf)
                camera = camera_messages(messages)
                for topic, publisher in publishers.items():
                    publisher.publish(camera[topic])
            seen = len(maps)
            done = call(finish, MapVisit.Request(visit=1, expected_frames=FRAMES, timeout_s=TIMEOUT_S))
            assert done.success, f"{size}: {done.message}\n{node.diagnosis()}"
            spin_until(lambda seen=seen: len(maps) > seen, f"the {size} map")
            by_size[size] = maps[-1].instances
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        node.stop()

    def point(instance) -> tuple[float, float, float]:
        return (instance.centroid.x, instance.centroid.y, instance.centroid.z)

    reference = [i for i in by_size[SIZES[0]] if max(i.label_probs, default=0.0) >= 0.5 and i.num_observations >= 2]
    assert len(reference) >= 10
    for size in SIZES[1:]:
        other = by_size[size]
        distances = np.array(
            [
                min((math.dist(point(i), point(j)) for j in other if j.label == i.label), default=math.inf)
                for i in reference
            ]
        )
        matched = distances <= MATCH_RADIUS
        assert matched.mean() >= MIN_MATCHED, (size, np.round(np.sort(distances), 2).tolist())
        assert np.median(distances[matched]) <= MAX_MEDIAN, (size, np.round(np.sort(distances), 2).tolist())
