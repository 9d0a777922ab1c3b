"""``ovman visit start|finish`` against a running mapping_node on a robot's plain topics: a finish
with no frame is refused and the visit stays open; a finish after frames needs no count and says,
in JSON, what was fused, skipped and stored; a visit 2 in the same store is mapped against it.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from ovman_ros.messages import PLAIN_CAMERA_MESSAGES, bundle_messages, camera_messages, static_tf_message
    from ovman_ros.qos import LATCHED
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_mapping.map_store import MapStore, default_store_dir
from ovman_ros import bundle
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations

from .processes import NodeProcess

pytestmark = pytest.mark.ros

CONFIG = load_config()
FRAMES = 8
TIMEOUT_S = 90.0


def ovman(*argv: str) -> subprocess.CompletedProcess:
    """``ovman ARGV`` as a user runs it (this environment: the test's ROS domain and store)."""
    command = [sys.executable, "-m", "ovman_eval.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=3 * TIMEOUT_S, check=False)


def test_visits_are_opened_and_finished_from_the_command_line_and_stored(ros_env, rclpy_context, tmp_path: Path):
    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset("embedded-2")
    clock = bundle.FrameClock(sim.node.step_dt)
    frames = [
        bundle_messages(o, world.objects(), clock.stamp(o.step), CONFIG.frames)
        for o in itertools.islice(tour_observations(world, sim.tour, sim.world), FRAMES)
    ]
    world.close()
    node = NodeProcess(
        [sys.executable, "-m", "ovman_mapping.mapping_node", "--ros-args", "-p", "node.frame_policy:=keep_all"],
        tmp_path / "mapping.log",
        "mapping_node",
    )
    probe = rclpy.create_node("robot", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    fused: list[int] = []

    def keep_status(message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name.startswith("/mapping_node"):
                fused.append(int({v.key: v.value for v in status.values}["fused"]))

    try:
        qos = QoSProfile(depth=FRAMES, reliability=ReliabilityPolicy.RELIABLE)
        publishers = {topic: probe.create_publisher(kind, topic, qos) for topic, kind in PLAIN_CAMERA_MESSAGES.items()}
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        probe.create_subscription(DiagnosticArray, "/diagnostics", keep_status, 10)

        def spin_until(condition, what: str) -> None:
            deadline = time.monotonic() + TIMEOUT_S
            while not condition():
                assert time.monotonic() < deadline, f"{what} within {TIMEOUT_S} s; {node.diagnosis()}"
                assert node.process.poll() is None, f"{what}: {node.diagnosis()}"
                executor.spin_once(timeout_sec=0.05)

        started = ovman("visit", "start", "1", "--timeout", str(TIMEOUT_S))
        assert started.returncode == 0 and "visit 1 is open" in started.stdout, started.stdout + started.stderr
        empty = ovman("visit", "finish", "--json", "--timeout", "5")
        assert empty.returncode == 1, empty.stdout + empty.stderr
        refused = json.loads(empty.stdout)
        assert not refused["success"] and "visit 1 stays open: it fused no frame" in refused["message"]
        spin_until(lambda: all(p.get_subscription_count() > 0 for p in [*publishers.values(), tf]), "subscriptions")
        for frame in frames:
            tf.publish(frame.tf)
            messages = camera_messages(frame)  # a robot's four topics of them
            for topic, publisher in publishers.items():
                publisher.publish(messages[topic])
        spin_until(lambda: fused and fused[-1] == FRAMES, "every frame fused")
        done = ovman("visit", "finish", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert (result["fused"], result["skipped"]) == (FRAMES, 0) and result["instances"] > 0
        stored = MapStore(default_store_dir()).load(result["map_id"])
        assert stored.visit == 1 and len(stored.map) == result["instances"] and stored.fused == FRAMES
        second = ovman("visit", "start", "2")
        assert second.returncode == 0 and f"against stored visit 1 {result['map_id']}" in second.stdout, second.stdout
        listed = json.loads(ovman("maps", "list", "--json").stdout)
        assert [m["map_id"] for m in listed["maps"]] == [result["map_id"]]
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        node.stop()
    missing = ovman("visit", "start", "1", "--timeout", "1")
    assert missing.returncode == 1 and "no mapping_node answers /mapping/start_visit within 1 s" in missing.stdout
