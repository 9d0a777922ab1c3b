"""What one camera bundle costs to serialise and deserialise in rclpy, with glibc's default malloc
and with larger mmap and trim thresholds (the graph's nodes take ~19,000 bundles per default run).

One frame of the embedded world (shipped config: 320x240) becomes the bundle's messages
(:func:`ovman_ros.messages.bundle_messages`: three images, labels, camera_info, pose, tf, odom,
ground truth, clock, ~0.85 MB); each is serialised (what a publisher does) and deserialised (what a
subscription's take does, into the Python message) ``--repeats`` times. Both measurements run in
a child process of their own, once with the environment as it is and once with
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...:glibc.malloc.trim_threshold=...``: by default
glibc serves each allocation of more than 128 KB (growing with use) with fresh pages, and a
process that frees them gives them back, so every megabyte-sized message page-faults its buffers
anew. Prints milliseconds of CPU per bundle for both and their ratio.

Usage: python benchmarks/bench_bundle_transport.py [--repeats 300] [--mmap-threshold BYTES]
       [--trim-threshold BYTES]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from ovman_core.config import load_config


def measure(repeats: int) -> dict[str, float]:
    """CPU milliseconds per bundle to serialise and to deserialise its messages (this process)."""
    from ovman_ros.messages import bundle_messages
    from rclpy.serialization import deserialize_message, serialize_message

    from ovman_ros import bundle
    from ovman_sim.embedded import EmbeddedWorld

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-1")
    observation = world.observe()
    built = bundle_messages(observation, world.objects(), 1_000_000_000, config.frames, bundle.GroundTruthRecords())
    messages = [getattr(built, field) for field in built.__dataclass_fields__ if field != "stamp_ns"]
    raw = [(serialize_message(m), type(m)) for m in messages]
    for message in messages:  # warm up: imports, type support
        deserialize_message(serialize_message(message), type(message))
    started = time.process_time()
    for _ in range(repeats):
        for message in messages:
            serialize_message(message)
    serialise_ms = (time.process_time() - started) / repeats * 1e3
    started = time.process_time()
    for _ in range(repeats):
        for data, kind in raw:
            deserialize_message(data, kind)
    deserialise_ms = (time.process_time() - started) / repeats * 1e3
    return {"serialise_ms": serialise_ms, "deserialise_ms": deserialise_ms, "bytes": sum(len(d) for d, _ in raw)}


def child(repeats: int, tunables: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if tunables is None:
        env.pop("GLIBC_TUNABLES", None)
    else:
        env["GLIBC_TUNABLES"] = tunables
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--repeats", str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the measuring process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300, help="bundles serialised and deserialised per process")
    parser.add_argument("--mmap-threshold", type=int, default=8 << 20, help="bytes (glibc.malloc.mmap_threshold)")
    parser.add_argument("--trim-threshold", type=int, default=64 << 20, help="bytes (glibc.malloc.trim_threshold)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.repeats)))
        return
    tunables = f"glibc.malloc.mmap_threshold={args.mmap_threshold}:glibc.malloc.trim_threshold={args.trim_threshold}"
    default, tuned = child(args.repeats, None), child(args.repeats, tunables)
    print(f"one bundle: {default['bytes'] / 1e6:.2f} MB serialised; CPU ms per bundle, {args.repeats} bundles a run")
    print(f"{'malloc':42s} {'serialise':>10s} {'deserialise':>12s}")
    print(f"{'glibc default':42s} {default['serialise_ms']:10.3f} {default['deserialise_ms']:12.3f}")
    print(f"{tunables[:42]:42s} {tuned['serialise_ms']:10.3f} {tuned['deserialise_ms']:12.3f}")
    print(f"({tunables})")
    print(
        f"default / tuned: serialise {default['serialise_ms'] / tuned['serialise_ms']:.2f}x, "
        f"deserialise {default['deserialise_ms'] / tuned['deserialise_ms']:.2f}x"
    )


if __name__ == "__main__":
    main()
