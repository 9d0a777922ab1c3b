"""mapping_node on a robot's plain RGB-D topics over DDS: with the learned segmenter it subscribes to
colour, depth (16UC1 millimetres, as RealSense-class drivers publish) and camera_info only, with the
camera's pose from /tf and /tf_static, and its map equals the in-process one built from the same frames stripped of the
simulator's segments and labels, a frame's step being its stamp divided by ``node.step_dt``. The
frames come from a camera twice the model's size (read at the model's resolution); frames of
another camera in the same visit are dropped and counted, and the node goes on.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import dataclasses
import itertools
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
    from ovman_mapping.map_messages import instance_map_from_msg
    from ovman_mapping.mapping_node import map_topic
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.camera import Intrinsics
from ovman_core.config import load_config
from ovman_core.frames import thor_to_ros_point
from ovman_mapping.encoders import make_encoder
from ovman_mapping.fusion import build_map
from ovman_mapping.map_store import MapStore, default_store_dir
from ovman_mapping.segmenter import make_segmenter
from ovman_ros import bundle
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations

from .processes import NodeProcess

pytestmark = pytest.mark.ros

CONFIG = load_config()
SCENE = "embedded-11"
FRAMES = 30
TIMEOUT_S = 90.0


def scaled(observation, k: int):
    """``observation`` from a camera ``k`` times as large: each pixel a k x k block, the same rays."""
    c, shift = observation.intrinsics, (k - 1) / 2
    return dataclasses.replace(
        observation,
        rgb=observation.rgb.repeat(k, 0).repeat(k, 1),
        depth=observation.depth.repeat(k, 0).repeat(k, 1),
        intrinsics=Intrinsics(k * c.width, k * c.height, k * c.fx, k * c.fy, k * c.cx + shift, k * c.cy + shift),
    )


def scaled_down(observation):
    """``observation`` as a camera 1.5 times the model's size would see it (480x360 for 320x240)."""
    twice = scaled(observation, 3)
    c = twice.intrinsics
    return dataclasses.replace(
        twice,
        rgb=twice.rgb[::2, ::2],
        depth=twice.depth[::2, ::2],
        intrinsics=Intrinsics(c.width // 2, c.height // 2, c.fx / 2, c.fy / 2, c.cx / 2, c.cy / 2),
    )


def test_mapping_node_maps_plain_rgbd_topics_like_the_in_process_mapper(ros_env, rclpy_context, tmp_path: Path):
    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    clock = bundle.FrameClock(sim.node.step_dt)
    frames, rendered = [], []
    for observation in itertools.islice(tour_observations(world, sim.tour, sim.world), FRAMES):
        # A camera twice the model's size (a robot's 640x480): read at 320x240, without resampling.
        frames.append((clock.stamp(observation.step), scaled(observation, 2), world.objects()))
        rendered.append(observation)
    world.close()
    # Two frames of another camera (1.5 times the model's size) between frames 4 and 5: one camera
    # per visit, so each is dropped and counted (VisitError), and the node goes on.
    unreadable = [(frames[4][0] + n, scaled_down(rendered[4]), frames[4][2]) for n in (1, 2)]

    # The frames go out in one burst, more than the 30 the synchroniser and the pose gate hold by
    # default: under load the colour images or the poses arrive well ahead of the rest, and the
    # oldest frames would be dropped (counted) before their last part came.
    burst = str(2 * (FRAMES + len(unreadable)))
    command = [sys.executable, "-m", "ovman_mapping.mapping_node", "--ros-args",
               "-p", "segmenter.kind:=learned", "-p", "node.camera_input:=topics", "-p", "node.frame_policy:=keep_all",
               "-p", f"node.sync_max_pending:={burst}", "-p", f"node.tf_max_pending:={burst}"]  # fmt: skip
    node = NodeProcess(command, tmp_path / "mapping.log", "mapping_node")
    probe = rclpy.create_node("plain_camera", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    try:
        # Every message published stays in the writer's history until acknowledged: a depth below the
        # messages published at once (the frames and the unreadable ones) loses the oldest when the
        # transport lags (KEEP_LAST overwrites them), and the visit never completes.
        sent = FRAMES + len(unreadable)
        qos = QoSProfile(depth=sent, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        publishers = {topic: probe.create_publisher(kind, topic, qos) for topic, kind in PLAIN_CAMERA_MESSAGES.items()}
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        maps: list[InstanceMapMsg] = []
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
            spin_until(lambda: client.service_is_ready(), f"{client.srv_name}")
            future = client.call_async(request)
            spin_until(future.done, f"{client.srv_name} answer")
            return future.result()

        assert call(start, MapVisit.Request(visit=1)).success
        readers = [*publishers.values(), tf]
        spin_until(lambda: all(p.get_subscription_count() > 0 for p in readers), "the subscriptions")
        for stamp, observation, objects in [*frames[:5], *unreadable, *frames[5:]]:
            frame = bundle_messages(observation, objects, stamp, CONFIG.frames)
            messages = camera_messages(frame)
            assert messages[bundle.DEPTH_TOPIC].encoding == bundle.DEPTH_MM_ENCODING
            tf.publish(frame.tf)
            for topic, publisher in publishers.items():
                publisher.publish(messages[topic])
        done = call(finish, MapVisit.Request(visit=1, expected_frames=FRAMES, timeout_s=TIMEOUT_S))
        assert done.success, f"{done.message}\n{node.diagnosis()}"
        assert "2 messages rejected" in done.message, done.message
        assert f"stored as {done.map_id}" in done.message, done.message
        spin_until(lambda: maps, "the latched visit-1 map")
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        node.stop()

    step_ns = round(CONFIG.mapping_node.node.step_dt * 1e9)
    stripped = [
        dataclasses.replace(o, segments=np.zeros_like(o.segments), segment_labels={}, step=stamp // step_ns)
        for stamp, o, _ in frames
    ]
    segmenter = make_segmenter(dataclasses.replace(CONFIG.mapping_node.segmenter, kind="learned", model=""))
    reference = build_map(stripped, CONFIG.mapping_node, make_encoder(CONFIG.mapping_node.encoder), 1, segmenter)
    received, _ = instance_map_from_msg(maps[-1], CONFIG.shared.limits)
    assert len(reference) > 0 and len(received) == len(reference)
    # The visit is in the node's map store (the test's XDG_DATA_HOME), as it was built.
    stored = MapStore(default_store_dir()).load(done.map_id)
    assert stored.visit == 1 and stored.fused == FRAMES and stored.camera == frames[0][1].intrinsics
    assert [(i.label, i.position) for i in stored.map] == [(i.label, i.position) for i in reference]
    for item, instance in zip(maps[-1].instances, reference, strict=True):
        assert item.label == instance.label
        assert (item.centroid.x, item.centroid.y, item.centroid.z) == thor_to_ros_point(instance.position)
        assert item.num_observations == len(instance.sightings)
