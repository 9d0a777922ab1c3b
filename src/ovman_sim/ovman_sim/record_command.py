"""``ovman record-visit``: drive a scene along its coverage tour and write it as a recorded visit.

The recording (rosbag2 directory with one MCAP file, :mod:`ovman_sim.recording`) can be replayed by
sim_node (``node.recording`` or the load_visit service) or by ``ros2 bag play`` on a workstation.
"""

from __future__ import annotations

import argparse
import sys
import time

from ovman_core.config import ConfigError, load_config
from ovman_sim.recording import RecordingError
from ovman_sim.session import SessionError, SimSession


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--scene", required=True, help="scene of the configured world, e.g. embedded-3")
    parser.add_argument("--out", required=True, help="recording directory to create (must not exist)")
    parser.add_argument("--visit", type=int, default=1, choices=(1, 2), help="visit number stored in the recording")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"ovman record-visit: {err}", file=sys.stderr)
        return 1
    session = SimSession(config)
    start = time.monotonic()
    try:
        session.load_scene(args.scene)
        count = 0
        for count, _frame in enumerate(session.play(args.out, visit=args.visit), start=1):
            if count % 40 == 0:
                print(f"  {count} frames", file=sys.stderr)
    except (SessionError, RecordingError) as err:
        print(f"ovman record-visit: {err}", file=sys.stderr)
        return 1
    finally:
        session.close()
    print(f"{args.out}: {count} frames of {args.scene} (visit {args.visit}) in {time.monotonic() - start:.1f} s")
    return 0
