"""What a played frame's camera costs to send and to take over DDS: the six standard topics, one
CameraBundle built by rclpy, and one CameraBundle composed from the recorded bytes and read with
rosbags (what the benchmark graph's player and mapping_node do, ovman_ros.bundle_cdr).

One frame of the embedded world (shipped config: 320x240) is serialised once per topic, as a
recording stores it. A publisher process then sends it ``--frames`` times and a subscriber process
takes it, each with one SingleThreadedExecutor or plain publishers, over the graph's Fast DDS
profile (config/fastdds.xml), in three ways:

- ``topics``: the six stored messages published as they are (raw bytes, as the player publishes a
  recording to a robot-style consumer), taken typed on six subscriptions (mapping_node
  ``node.camera_input: topics``, without the synchroniser);
- ``bundle_rclpy``: the six decoded by rclpy and published as one CameraBundle, taken typed;
- ``bundle_cdr``: the bundle composed from the six stored byte strings (:func:`compose`), published
  raw, taken raw and read with :func:`ovman_ros.bundle_cdr.decode`.

The publisher waits for every subscriber's acknowledgement after each 100 frames (the player's
flow control). Prints CPU milliseconds per frame of both processes for each way (the subscriber's
counted from its first frame to its last) and their ratio to ``topics``.

Usage: python benchmarks/bench_camera_bundle.py [--frames 1000]
Uses $ROS_DOMAIN_ID (default 0: set your own) with localhost-only discovery.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

WAYS = ("topics", "bundle_rclpy", "bundle_cdr")
WINDOW = 100
"""Frames between two waits for acknowledgements (as sim_node's unpaced playback)."""
REPO = Path(__file__).resolve().parents[1]


def stored_frame() -> dict[str, bytes]:
    """The six camera messages of one embedded frame, serialised as a recording stores them."""
    from ovman_ros.messages import bundle_messages, camera_messages
    from rclpy.serialization import serialize_message

    from ovman_core.config import load_config
    from ovman_ros import bundle
    from ovman_sim.embedded import EmbeddedWorld

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-1")
    built = bundle_messages(world.observe(), world.objects(), 1_000_000_000, config.frames, bundle.GroundTruthRecords())
    return {topic: serialize_message(message) for topic, message in camera_messages(built).items()}


def qos(keep_all: bool):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=WINDOW,
        history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


def publish(way: str, frames: int) -> dict[str, float]:
    import rclpy
    from ovman_ros.messages import CAMERA_MESSAGES, camera_bundle_msg
    from rclpy.duration import Duration
    from rclpy.serialization import deserialize_message

    from ovman_interfaces.msg import CameraBundle
    from ovman_ros import bundle_cdr, names

    stored = stored_frame()
    rclpy.init()
    node = rclpy.create_node("bench_camera_publisher")
    if way == "topics":
        publishers = {t: node.create_publisher(kind, t, qos(False)) for t, kind in CAMERA_MESSAGES.items()}
    else:
        topic = names.CAMERA_BUNDLE
        publishers = {topic: node.create_publisher(CameraBundle, topic, qos(False))}
    deadline = time.monotonic() + 30.0
    while any(p.get_subscription_count() == 0 for p in publishers.values()):
        if time.monotonic() > deadline:
            raise SystemExit("no subscriber matched within 30 s")
        time.sleep(0.05)
    time.sleep(0.5)  # the subscriber's reply endpoints too
    started = time.process_time()
    for k in range(frames):
        if way == "topics":
            for topic, publisher in publishers.items():
                publisher.publish(stored[topic])
        elif way == "bundle_rclpy":
            camera = {t: deserialize_message(data, CAMERA_MESSAGES[t]) for t, data in stored.items()}
            publishers[names.CAMERA_BUNDLE].publish(camera_bundle_msg(camera))
        else:
            publishers[names.CAMERA_BUNDLE].publish(bundle_cdr.compose(stored))
        if (k + 1) % WINDOW == 0:
            for publisher in publishers.values():
                publisher.wait_for_all_acked(Duration(seconds=10.0))
    cpu_ms = (time.process_time() - started) / frames * 1e3
    node.destroy_node()
    rclpy.shutdown()
    return {"cpu_ms": cpu_ms}


def subscribe(way: str, frames: int) -> dict[str, float]:
    import rclpy
    from ovman_ros.messages import CAMERA_MESSAGES
    from rclpy.executors import SingleThreadedExecutor

    from ovman_interfaces.msg import CameraBundle
    from ovman_ros import bundle_cdr, names

    rclpy.init()
    node = rclpy.create_node("bench_camera_subscriber")
    taken = [0]
    started = [0.0]

    def count(_: object) -> None:
        if taken[0] == 0:
            started[0] = time.process_time()
        taken[0] += 1

    def read(data: bytes) -> None:
        bundle_cdr.decode(data)
        count(data)

    if way == "topics":
        for topic, kind in CAMERA_MESSAGES.items():
            node.create_subscription(kind, topic, count, qos(True))
        expected = len(CAMERA_MESSAGES) * frames
    elif way == "bundle_rclpy":
        node.create_subscription(CameraBundle, names.CAMERA_BUNDLE, count, qos(True))
        expected = frames
    else:
        node.create_subscription(CameraBundle, names.CAMERA_BUNDLE, read, qos(True), raw=True)
        expected = frames
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + 120.0
    while taken[0] < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"took {taken[0]} of {expected} messages within 120 s")
        executor.spin_once(timeout_sec=0.5)
    cpu_ms = (time.process_time() - started[0]) / frames * 1e3
    node.destroy_node()
    rclpy.shutdown()
    return {"cpu_ms": cpu_ms}


def run_way(way: str, frames: int) -> tuple[float, float]:
    """(publisher, subscriber) CPU ms per frame of one way, each in its own process."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds.xml"))
    role = [sys.executable, __file__, "--way", way, "--frames", str(frames), "--role"]
    subscriber = subprocess.Popen([*role, "subscribe"], env=env, stdout=subprocess.PIPE, text=True)
    publisher = subprocess.run([*role, "publish"], env=env, capture_output=True, text=True, check=False)
    out, _ = subscriber.communicate(timeout=180)
    if publisher.returncode or subscriber.returncode:
        codes = f"publisher {publisher.returncode}, subscriber {subscriber.returncode}"
        raise SystemExit(f"{way}: {codes}\n{publisher.stderr}")
    return json.loads(publisher.stdout.splitlines()[-1])["cpu_ms"], json.loads(out.splitlines()[-1])["cpu_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000, help="frames sent per way")
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--role", choices=("publish", "subscribe"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        measure = publish if args.role == "publish" else subscribe
        print(json.dumps(measure(args.way, args.frames)))
        return
    results = {way: run_way(way, args.frames) for way in WAYS}
    base_publisher, base_subscriber = results["topics"]
    print(f"CPU ms per frame, {args.frames} frames a way (one 320x240 embedded frame, ~0.85 MB)")
    print(f"{'way':14s} {'publisher':>10s} {'subscriber':>11s} {'both':>8s}   vs topics (subscriber, both)")
    for way, (publisher, subscriber) in results.items():
        both = publisher + subscriber
        print(
            f"{way:14s} {publisher:10.3f} {subscriber:11.3f} {both:8.3f}   "
            f"{subscriber / base_subscriber:.2f}x, {both / (base_publisher + base_subscriber):.2f}x"
        )


if __name__ == "__main__":
    main()
