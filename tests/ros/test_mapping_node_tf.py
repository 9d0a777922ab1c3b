"""mapping_node takes each frame's camera pose from /tf and /tf_static over DDS: a frame without a
tree, one inside a gap of the tree, and one older than the tree's history are dropped and counted
with their reason; a frame whose transform comes after it waits and is fused.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pytest

try:
    import rclpy
    from ovman_ros.messages import bundle_messages, camera_bundle_msg, camera_messages, static_tf_message
    from ovman_ros.qos import LATCHED
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage

    from ovman_interfaces.msg import CameraBundle
    from ovman_interfaces.srv import MapVisit
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations

from .processes import NodeProcess

pytestmark = pytest.mark.ros

CONFIG = load_config()
TIMEOUT_S = 60.0
WAIT_S = 3.0
"""mapping_node's node.tf_timeout_s in this test: long enough that a transform published WAIT_S / 3
after its image arrives in time on a loaded machine (DDS has been seen to deliver /tf 1.9 s late)."""


def test_frames_without_a_pose_in_time_are_dropped_with_the_reason_and_a_late_transform_is_waited_for(
    ros_env, rclpy_context, tmp_path: Path
):
    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset("embedded-2")
    observations = list(itertools.islice(tour_observations(world, sim.tour, sim.world), 9))
    objects = world.objects()
    world.close()
    offset = 20_000_000_000  # 20 s: room for a frame older than the tree's history
    frames = [bundle_messages(o, objects, offset + k * 100_000_000, CONFIG.frames) for k, o in enumerate(observations)]
    node = NodeProcess(
        [
            sys.executable,
            "-m",
            "ovman_mapping.mapping_node",
            "--ros-args",
            "-p",
            "segmenter.kind:=simulator",
            "-p",
            "node.camera_input:=bundle",
            "-p",
            f"node.tf_timeout_s:={WAIT_S}",
            "-p",
            "node.start_visit:=1",
            "-p",
            "node.frame_policy:=keep_all",
        ],
        tmp_path / "mapping.log",
        "mapping_node",
    )
    probe = rclpy.create_node("robot", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    try:
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        camera = probe.create_publisher(CameraBundle, "camera/bundle", qos)
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        finish = probe.create_client(MapVisit, "mapping/finish_visit")

        def spin(seconds: float, condition=lambda: False, what: str = "") -> None:
            deadline = time.monotonic() + seconds
            while not condition():
                if time.monotonic() > deadline:
                    assert not what, f"{what} within {seconds} s; {node.diagnosis()}"
                    return
                assert node.process.poll() is None, node.diagnosis()
                executor.spin_once(timeout_sec=0.02)

        def send(k: int, with_tf: bool = True) -> None:
            if with_tf:
                tf.publish(frames[k].tf)
            camera.publish(camera_bundle_msg(camera_messages(frames[k])))

        spin(TIMEOUT_S, lambda: camera.get_subscription_count() > 0 and tf.get_subscription_count() > 0, "matching")
        for k in (0, 1, 2):  # no tree at all yet: not even the camera's frame is known
            send(k)
        spin(3 * WAIT_S)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        spin(1.0)
        for k in (3, 4, 5):
            send(k)
        for k in (6, 7):  # the robot's TF stalls: these never get a pose in time
            send(k, with_tf=False)
        spin(3 * WAIT_S)
        send(8, with_tf=False)  # the images before their transform, which comes late but in time
        spin(WAIT_S / 3)
        tf.publish(frames[8].tf)
        old = bundle_messages(observations[0], objects, 5_000_000_000, CONFIG.frames)
        camera.publish(camera_bundle_msg(camera_messages(old)))  # older than the 10 s the tree keeps
        spin(1.0)
        future = finish.call_async(MapVisit.Request(visit=1, expected_frames=4, timeout_s=TIMEOUT_S))
        spin(TIMEOUT_S, future.done, "finish_visit's answer")
        done = future.result()
        assert done.success and done.frames == 4, f"{done.message}\n{node.diagnosis()}"
        assert "camera poses: 4 found, 0 waiting" in done.message, done.message
        assert "dropped: 2 extrapolation_future, 1 extrapolation_past, 3 unknown_frame" in done.message, done.message
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        node.stop()


def test_frames_faster_than_the_rate_or_the_fuser_are_skipped_counted_and_reported_on_diagnostics(
    ros_env, rclpy_context, tmp_path: Path
):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset("embedded-2")
    observations = list(itertools.islice(tour_observations(world, sim.tour, sim.world), 20))
    objects = world.objects()
    world.close()
    frames = [bundle_messages(o, objects, (k + 1) * 100_000_000, CONFIG.frames) for k, o in enumerate(observations)]
    node = NodeProcess(
        [
            sys.executable,
            "-m",
            "ovman_mapping.mapping_node",
            "--ros-args",
            "-p",
            "segmenter.kind:=simulator",
            "-p",
            "node.camera_input:=bundle",
            "-p",
            "node.start_visit:=1",
            "-p",
            "node.frame_policy:=keep_newest",
            "-p",
            "node.max_rate_hz:=5.0",
            "-p",  # this test counts skips, not TF timeouts: under load /tf_static may match late
            f"node.tf_timeout_s:={TIMEOUT_S}",
        ],
        tmp_path / "mapping.log",
        "mapping_node",
    )
    probe = rclpy.create_node("robot", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    statuses: list = []
    try:
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        camera = probe.create_publisher(CameraBundle, "camera/bundle", qos)
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        probe.create_subscription(DiagnosticArray, "/diagnostics", statuses.append, 10)
        finish = probe.create_client(MapVisit, "mapping/finish_visit")

        def spin(seconds: float, condition, what: str) -> None:
            deadline = time.monotonic() + seconds
            while not condition():
                assert time.monotonic() < deadline, f"{what} within {seconds} s; {node.diagnosis()}"
                assert node.process.poll() is None, node.diagnosis()
                executor.spin_once(timeout_sec=0.02)

        spin(TIMEOUT_S, lambda: camera.get_subscription_count() > 0 and statuses, "matching and a first status")
        for frame in frames:  # 10 Hz of stamps, all at once: every other one is over the 5 Hz limit
            tf.publish(frame.tf)
            camera.publish(camera_bundle_msg(camera_messages(frame)))

        def values() -> dict[str, str]:
            return {kv.key: kv.value for kv in statuses[-1].status[0].values}

        def all_counted() -> bool:
            v = values()
            return int(v["fused"]) + int(v["skipped_while_fusing"]) + int(v["skipped_over_max_rate"]) == len(frames)

        spin(TIMEOUT_S, all_counted, "every frame fused or skipped")
        status, values = statuses[-1].status[0], values()
        future = finish.call_async(MapVisit.Request(visit=1, expected_frames=0, timeout_s=TIMEOUT_S))
        spin(TIMEOUT_S, future.done, "finish_visit's answer")
        done = future.result()
        assert done.success, f"{done.message}\n{node.diagnosis()}"
        assert status.name == "/mapping_node: camera frames" and status.level == DiagnosticStatus.WARN, str(values)
        assert values["skipped_over_max_rate"] == "10", values
        # The other ten are fused, or replaced by a newer one while the fuser was busy: none is lost uncounted.
        fused, busy = int(values["fused"]), int(values["skipped_while_fusing"])
        assert fused >= 1 and fused + busy == 10 and done.frames == fused, (values, done.message)
        assert f"keep_newest: {busy} skipped while fusing, 10 over max_rate_hz" in done.message, done.message
        assert float(values["latency_p95_ms"]) >= float(values["latency_p50_ms"])
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        node.stop()
