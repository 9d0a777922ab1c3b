"""segmenter.kind topic over DDS: mapping_node fusing another node's ovman_interfaces/Segments
builds the map it builds running that segmenter itself, with OVMAN's segmenter_node (simulator and
learned backends) and with a segmenter written here from the message types alone; a Segments message
of a stamp no frame has is dropped and counted.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import array
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import rclpy
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticArray
    from ovman_ros.messages import bundle_messages, camera_bundle_msg, camera_messages, static_tf_message
    from ovman_ros.qos import LATCHED
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    from tf2_msgs.msg import TFMessage

    from ovman_interfaces.msg import CameraBundle, InstanceMap, Segments
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
FRAMES = 12


def mapping(namespace: str, kind: str, tmp_path: Path) -> NodeProcess:
    return node_process("ovman_mapping.mapping_node", namespace, kind, tmp_path, "node.start_visit:=1")


def node_process(module: str, namespace: str, kind: str, tmp_path: Path, *extra: str) -> NodeProcess:
    arguments = [f"segmenter.kind:={kind}", "node.camera_input:=bundle", "node.frame_policy:=keep_all", *extra]
    if module.endswith("mapping_node"):
        arguments.append(f"node.tf_timeout_s:={TIMEOUT_S}")
    command = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:=/{namespace}"]
    for argument in arguments:
        command += ["-p", argument]
    name = module.rsplit(".", 1)[1]
    return NodeProcess(command, tmp_path / f"{namespace}-{name}.log", name)


def simulator_segments(frame, stamp_ns: int | None = None) -> Segments:
    """The simulator's masks as another project would publish them: one-hot, exact labels (at the
    frame's stamp, or ``stamp_ns``)."""
    instances, labels = frame.instances, frame.labels
    table = {int(k): v for k, v in json.loads(labels.data)["labels"].items()}
    ids = np.frombuffer(bytes(instances.data), dtype="<i4").reshape(instances.height, instances.width)
    present = [k for k in sorted(set(np.unique(ids).tolist()) - {0}) if k in table]
    vocabulary = sorted({table[k] for k in present})
    rows = np.zeros((len(present), len(vocabulary)))
    for i, k in enumerate(present):
        rows[i, vocabulary.index(table[k])] = 1.0
    kept = np.where(np.isin(ids, present), ids, 0).astype("<i4")
    stamp = frame.stamp_ns if stamp_ns is None else stamp_ns
    header = Header(stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=frame.rgb.header.frame_id)
    image = Image(
        header=header, height=kept.shape[0], width=kept.shape[1], encoding="32SC1", step=kept.shape[1] * 4,
        data=array.array("B", kept.tobytes()),
    )  # fmt: skip
    return Segments(
        header=header, ids=image, segment_ids=present, vocabulary=vocabulary,
        label_distribution=array.array("d", rows.ravel().tobytes()), confidence=[1.0] * len(present),
        exact_labels=True, segmenter="the test's simulator segments",
    )  # fmt: skip


def instances_of(message: InstanceMap) -> list[tuple]:
    return [
        (i.label, tuple(i.label_probs), i.centroid.x, i.centroid.y, i.centroid.z, tuple(i.points), i.num_observations)
        for i in message.instances
    ]


@pytest.mark.parametrize("kind", ["simulator", "learned", "own"])
def test_a_map_from_another_nodes_segments_is_the_map_of_the_same_segmenter_in_mapping_node(
    ros_env, rclpy_context, tmp_path: Path, kind: str
):
    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset("embedded-2")
    observations = list(itertools.islice(tour_observations(world, sim.tour, sim.world), FRAMES))
    objects = world.objects()
    world.close()
    frames = [bundle_messages(o, objects, (k + 1) * 100_000_000, CONFIG.frames) for k, o in enumerate(observations)]
    reference_kind = "simulator" if kind == "own" else kind
    nodes = [mapping("reference", reference_kind, tmp_path), mapping("topic", "topic", tmp_path)]
    if kind != "own":
        nodes.append(node_process("ovman_mapping.segmenter_node", "topic", kind, tmp_path))
    probe = rclpy.create_node("robot", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    maps: dict[str, InstanceMap] = {}
    try:
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        cameras = [probe.create_publisher(CameraBundle, f"/{ns}/camera/bundle", qos) for ns in ("reference", "topic")]
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(CONFIG.frames, 0))
        segments = probe.create_publisher(Segments, "/topic/segmentation/segments", qos)
        for ns in ("reference", "topic"):
            probe.create_subscription(
                InstanceMap, f"/{ns}/ovman/map/visit1", lambda m, ns=ns: maps.__setitem__(ns, m), LATCHED
            )
        waiting: dict[str, int] = {}

        def keep_status(message: DiagnosticArray) -> None:
            for status in message.status:
                if status.name.startswith("/topic/mapping_node"):
                    values = {v.key: v.value for v in status.values}
                    waiting["frames"] = int(values["frames_waiting_for_segments"])
                    waiting["segments"] = int(values["segments_pending"])

        probe.create_subscription(DiagnosticArray, "/diagnostics", keep_status, 10)
        finishes = {ns: probe.create_client(MapVisit, f"/{ns}/mapping/finish_visit") for ns in ("reference", "topic")}

        def spin(seconds: float, condition, what: str) -> None:
            deadline = time.monotonic() + seconds
            while not condition():
                diagnosis = "\n".join(n.diagnosis() for n in nodes)
                assert time.monotonic() < deadline, f"{what} within {seconds} s; {diagnosis}"
                assert all(n.process.poll() is None for n in nodes), diagnosis
                executor.spin_once(timeout_sec=0.02)

        wanted = 3 if kind != "own" else 2
        spin(
            TIMEOUT_S,
            lambda: sum(c.get_subscription_count() for c in cameras) >= wanted and segments.get_subscription_count(),
            "matching",
        )
        segments.publish(simulator_segments(frames[0], 50_000_000))  # a stamp no frame has
        # Held before any frame comes: arriving after a later stamp had completed (segmenter_node is
        # another writer of the topic, with no order between the two) it would count as late instead.
        spin(TIMEOUT_S, lambda: waiting.get("segments", 0) >= 1, "the segments of a stamp no frame has to be held")
        for frame in frames:
            tf.publish(frame.tf)
            for camera in cameras:
                camera.publish(camera_bundle_msg(camera_messages(frame)))
        answers = {}
        if kind == "own":
            # A finish without a frame count waits for the frames still waiting for their segments:
            # asked once mapping_node holds every frame (its /diagnostics say so) and before any
            # segments are published (spun for a second so that the request has arrived).
            spin(TIMEOUT_S, lambda: waiting.get("frames", 0) >= FRAMES, "the frames waiting for their segments")
            future = finishes["topic"].call_async(MapVisit.Request(visit=1, expected_frames=0, timeout_s=TIMEOUT_S))
            end = time.monotonic() + 1.0
            spin(TIMEOUT_S, lambda: time.monotonic() > end or future.done(), "the finish request to go out")
            assert not future.done(), future.result().message
            for frame in frames:
                segments.publish(simulator_segments(frame))
            spin(TIMEOUT_S, future.done, "topic finish_visit's answer")
            answers["topic"] = future.result()
            assert answers["topic"].success and answers["topic"].frames == FRAMES, answers["topic"].message
        for ns, client in finishes.items():
            if ns in answers:
                continue
            future = client.call_async(MapVisit.Request(visit=1, expected_frames=FRAMES, timeout_s=TIMEOUT_S))
            spin(TIMEOUT_S, future.done, f"{ns} finish_visit's answer")
            answers[ns] = future.result()
            assert answers[ns].success, answers[ns].message
        spin(TIMEOUT_S, lambda: len(maps) == 2, "both maps")
        assert f"segments from segmentation/segments: {FRAMES} paired" in answers["topic"].message
        assert "1 for a stamp no frame has" in answers["topic"].message, answers["topic"].message
        reference, topic = instances_of(maps["reference"]), instances_of(maps["topic"])
        assert reference and topic == reference
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        executor.shutdown()
        for node in nodes:
            node.stop()
