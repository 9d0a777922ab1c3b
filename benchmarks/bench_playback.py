"""CPU to play a recorded visit in sim_node: decoded and published as a live frame, or as stored.

sim_node plays a loaded recording as stored (``ros2 bag play``: the recorded CDR bytes, only the
labels table decoded, :func:`ovman_sim.recording.read_visit_raw`); it decodes the frames and
publishes them as a live frame's only when it records them again. This script plays the same
recordings both ways, side by side in one process, through sim_node's own session and publishers
(no subscriber, so DDS delivery is not counted: what differs is reading, decoding and building the
messages), and prints the CPU per frame of each and their ratio.

Usage: python benchmarks/bench_playback.py [--dataset DIR] [--recordings 6]
(default dataset: the newest under data/default, from ``make benchmark``). Uses $ROS_DOMAIN_ID
(default 0: set your own) with localhost-only discovery.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import rclpy

from ovman_sim.session import SessionError
from ovman_sim.sim_node import SimNode


def newest_dataset() -> Path:
    datasets = sorted(Path("data/default").glob("*/recordings"), key=lambda p: p.stat().st_mtime)
    if not datasets:
        sys.exit("no dataset under data/default: run `make benchmark` first, or pass --dataset")
    return datasets[-1].parent


def play(node: SimNode, recordings: list[Path], stored: bool) -> tuple[float, int]:
    """(process CPU s, frames) to play ``recordings`` one after the other."""
    frames = 0
    start = time.process_time()
    for recording in recordings:
        node.session.load_recording(recording)
        if stored:
            for raw in node.session.play_recorded():
                node._publish_stored(raw)
                frames += 1
        else:
            for frame in node.session.play():
                node._publish(frame)
                frames += 1
    return time.process_time() - start, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=None)
    parser.add_argument("--recordings", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    dataset = args.dataset or newest_dataset()
    recordings = sorted(p.parent for p in (dataset / "recordings").glob("*/visit*/metadata.yaml"))
    recordings = recordings[: args.recordings]
    rclpy.init()
    node = SimNode()
    try:
        play(node, recordings[:1], stored=True)  # warm-up: imports, first reads
        decoded_s, frames = play(node, recordings, stored=False)
        stored_s, stored_frames = play(node, recordings, stored=True)
    except SessionError as err:
        sys.exit(f"{dataset}: {err}")
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    assert frames == stored_frames
    print(f"{dataset}: {len(recordings)} recordings, {frames} frames")
    print(f"decoded, published as a live frame  {decoded_s / frames * 1e3:6.2f} ms of CPU a frame")
    print(f"as stored (ros2 bag play)           {stored_s / frames * 1e3:6.2f} ms of CPU a frame")
    print(f"ratio decoded / stored              {decoded_s / stored_s:6.2f}x")


if __name__ == "__main__":
    main()
