"""bench_mapping.py's robot mode: a tour published over DDS as a robot's RGB-D driver and TF tree
publish it, to a mapping_node process on one core; what its /diagnostics report (see bench_mapping)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from ovman_core.config import OvmanConfig
from ovman_eval.graph.description import DDS_PROFILE_FILE, node_environment
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations

SCENE = "embedded-0"
REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0


def rendered_tour(config: OvmanConfig, width: int, height: int) -> tuple[list, object]:
    """One visit's tour of :data:`SCENE` rendered at ``width`` x ``height`` (the configured
    vertical field of view), and the world's objects."""
    camera = dataclasses.replace(config.sim_node.camera, width=width, height=height)
    sim = dataclasses.replace(config.sim_node, camera=camera)
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    frames = list(tour_observations(world, sim.tour, sim.world))
    objects = world.objects()
    world.close()
    return frames, objects


def rss_gb(pid: int, field: str = "VmHWM") -> float:
    """A process's peak (``VmHWM``) or current (``VmRSS``) resident memory (GB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def run_robot_mode(config: OvmanConfig, width: int, height: int, rate_hz: float, seconds: float) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from ovman_ros.messages import PLAIN_CAMERA_MESSAGES, bundle_messages, camera_messages, static_tf_message
    from ovman_ros.qos import LATCHED
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage

    from ovman_interfaces.srv import MapVisit

    print(f"rendering the tour of {SCENE} at {width}x{height} (not timed) ...", flush=True)
    frames, objects = rendered_tour(config, width, height)
    count = round(rate_hz * seconds)
    print(f"{len(frames)} frames, published {count} times at {rate_hz:g} Hz ({seconds:g} s, the tour looping)")
    cores = sorted(os.sched_getaffinity(0))
    node_core, bench_cores = cores[0], set(cores[1:]) or {cores[0]}
    os.sched_setaffinity(0, bench_cores)
    # Large images over shared memory, as the graph's starters give it (config/fastdds.xml): without
    # it a 848x480 frame travels as UDP fragments (measured: p50 56 ms against 26 ms end to end).
    os.environ.update(node_environment(os.environ, REPO / DDS_PROFILE_FILE))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    node = subprocess.Popen(
        ["taskset", "-c", str(node_core), sys.executable, "-m", "ovman_mapping.mapping_node", "--ros-args",
         "-p", "segmenter.kind:=learned", "-p", "node.camera_input:=topics", "-p", "node.frame_policy:=keep_newest",
         "-p", "node.start_visit:=1"],
        env=env,
    )  # fmt: skip
    rclpy.init()
    probe = rclpy.create_node("robot_camera_bench")
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    statuses: list = []
    try:
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        publishers = {t: probe.create_publisher(kind, t, qos) for t, kind in PLAIN_CAMERA_MESSAGES.items()}
        tf = probe.create_publisher(TFMessage, "/tf", qos)
        probe.create_publisher(TFMessage, "/tf_static", LATCHED).publish(static_tf_message(config.frames, 0))
        probe.create_subscription(DiagnosticArray, "/diagnostics", statuses.append, 10)
        finish = probe.create_client(MapVisit, "mapping/finish_visit")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (all(p.get_subscription_count() for p in publishers.values()) and statuses):
            if time.monotonic() > deadline or node.poll() is not None:
                raise SystemExit("mapping_node did not come up")
            executor.spin_once(timeout_sec=0.05)
        period = 1.0 / rate_hz
        start = time.monotonic()
        by_minute = []
        for k, observation in enumerate(itertools.islice(itertools.cycle(frames), count)):
            if k % round(60 * rate_hz) == 0:
                by_minute.append(rss_gb(node.pid, "VmRSS"))
            while time.monotonic() < start + k * period:
                executor.spin_once(timeout_sec=max(0.0, start + k * period - time.monotonic()))
            stamp = probe.get_clock().now().nanoseconds
            messages = bundle_messages(observation, objects, stamp, config.frames)
            tf.publish(messages.tf)
            camera = camera_messages(messages)
            for topic, publisher in publishers.items():
                publisher.publish(camera[topic])
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            executor.spin_once(timeout_sec=0.05)
        during = {kv.key: kv.value for kv in statuses[-1].status[0].values}
        future = finish.call_async(MapVisit.Request(visit=1, expected_frames=0, timeout_s=10.0))
        while not future.done():
            executor.spin_once(timeout_sec=0.05)
        values = {kv.key: kv.value for kv in statuses[-1].status[0].values}
        print(f"mapping_node on core {node_core}: {future.result().message}")
        fused, skipped = int(values["fused"]), int(values["skipped_while_fusing"])
        print(
            f"published {count}, fused {fused}, skipped while fusing {skipped}, over max_rate "
            f"{values['skipped_over_max_rate']}; fused {fused / seconds:.1f} frames/s over the run; latency "
            f"(image stamp to fused) p50 {values['latency_p50_ms']} ms, p95 {values['latency_p95_ms']} ms "
            f"(last {min(fused, 300)} frames); peak RSS {rss_gb(node.pid):.2f} GB"
        )
        print(
            f"RSS at each minute's start (GB): {', '.join(f'{gb:.2f}' for gb in by_minute)}; frames kept for the "
            f"evidence {during['frames_kept_for_evidence']} (every {during['kept_frame_stride']}th)"
        )
        met = skipped == 0 and fused == count and float(values["latency_p95_ms"]) <= 100.0
        print(f"goal (every frame fused at {rate_hz:g} Hz, p95 <= 100 ms): {'met' if met else 'missed'}")
    finally:
        executor.remove_node(probe)
        probe.destroy_node()
        rclpy.shutdown()
        node.terminate()
        node.wait(timeout=20)
    return 0
