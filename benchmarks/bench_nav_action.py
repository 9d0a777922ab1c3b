"""Navigate action round trip through DDS versus calling the navigation core directly (issue 4).

Runs the same sequence of goals twice in one embedded home: once by calling
``ovman_nav.executor.navigate`` on an in-process EmbeddedWorld, once through nav_node (its own
process, driving its own copy of the home) with OvmanCommander (goToPoint, then isTaskComplete
until the result arrives). The goals alternate between the two reachable positions farthest
apart, so every navigation walks the same long path in both runs. Prints the median time per
goal of each and the overhead of the action round trip.

Usage: python benchmarks/bench_nav_action.py [--goals 20] [--scene embedded-0]
Uses $ROS_DOMAIN_ID (default 0: set your own) with localhost-only discovery.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rclpy
from geometry_msgs.msg import Point, PointStamped
from std_msgs.msg import Header

from ovman_core.config import load_config
from ovman_core.frames import thor_to_ros_point
from ovman_nav.commander import OvmanCommander, TaskResult
from ovman_nav.executor import NavError, NavSettings, NavTarget, navigate
from ovman_sim.embedded import EmbeddedWorld

TIMEOUT_S = 60.0


def far_pair(world: EmbeddedWorld) -> list[tuple[float, float]]:
    """The agent's start and the reachable position farthest from it (Manhattan)."""
    start = world.agent_pose().floor
    far = max(world.reachable_positions(), key=lambda p: (abs(p[0] - start[0]) + abs(p[1] - start[1]), p))
    return [far, start]


def direct_times(scene: str, goals: int) -> list[float]:
    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset(scene)
    settings = NavSettings.from_config(config)
    ends = far_pair(world)
    times = []
    for index in range(goals):
        start = time.perf_counter()
        result = navigate(world, NavTarget.at_point(ends[index % 2]), settings)
        times.append(time.perf_counter() - start)
        if result.error is not NavError.NONE:
            raise RuntimeError(f"direct navigation {index} failed: {result.error.name} {result.message}")
    return times


def dds_times(scene: str, goals: int) -> list[float]:
    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset(scene)
    ends = far_pair(world)
    log = Path(tempfile.gettempdir()) / f"bench_nav_action_{os.getpid()}.log"
    with log.open("wb") as out:
        node = subprocess.Popen(
            [sys.executable, "-m", "ovman_nav.nav_node", "--ros-args", "-p", f"navigation.scene:={scene}"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    rclpy.init()
    commander = OvmanCommander()
    times = []
    try:
        for index in range(goals):
            x, y, z = thor_to_ros_point((ends[index % 2][0], 0.0, ends[index % 2][1]))
            target = PointStamped(header=Header(frame_id=config.frames.map), point=Point(x=x, y=y, z=z))
            start = time.perf_counter()
            if not commander.goToPoint(target, timeout_sec=TIMEOUT_S):
                raise RuntimeError(f"goal {index} was not accepted; nav_node log: {log}")
            # isTaskComplete returns as soon as the result arrives (the spin time is only a bound).
            if not commander.isTaskComplete(spin_sec=TIMEOUT_S):
                raise RuntimeError(f"goal {index} did not end within {TIMEOUT_S} s; nav_node log: {log}")
            times.append(time.perf_counter() - start)
            if commander.getResult() is not TaskResult.SUCCEEDED:
                raise RuntimeError(f"goal {index} failed: {commander.getTaskError()}; nav_node log: {log}")
    finally:
        commander.destroy_node()
        rclpy.try_shutdown()
        node.send_signal(signal.SIGINT)
        node.wait(timeout=TIMEOUT_S)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=20)
    parser.add_argument("--scene", default="embedded-0")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    direct = direct_times(args.scene, args.goals)
    dds = dds_times(args.scene, args.goals)
    # The first DDS goal includes discovery; report it apart.
    steady = dds[1:] or dds
    d_ms, r_ms = statistics.median(direct) * 1e3, statistics.median(steady) * 1e3
    print(f"scene {args.scene}, {args.goals} goals between the two farthest-apart reachable positions")
    print(f"load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"core called directly      median {d_ms:8.2f} ms per goal")
    print(
        f"Navigate action over DDS  median {r_ms:8.2f} ms per goal (first goal, with discovery: {dds[0] * 1e3:.1f} ms)"
    )
    print(f"round-trip overhead       {r_ms - d_ms:8.2f} ms per goal ({r_ms / d_ms:.2f}x the direct call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
