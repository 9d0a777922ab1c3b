"""Memory and time of query_node's work on large maps, up to and past ``limits.max_map_instances`` (issue 22).

For maps of N instances each (N = a quarter, half and all of the limit, then one past it), one
fresh process per N does what query_node does when the second map arrives: both maps go through
their messages (``instance_map_msg`` then ``instance_map_from_msg`` with the configured limits),
then the two-stage association and the change set. Every visit-2 instance is a visit-1 instance
displaced by up to 3 m with the same feature, so both Hungarian stages solve full-size matrices
(the worst case). Prints the peak RSS of each process and the time from messages to change set;
past the limit the map is refused before anything grows. The goal: peak RSS at most 2 GB at the
limit.

Usage: python benchmarks/bench_map_limit.py [--config config/ovman.yaml] [--feature-dim 384]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import time

import numpy as np


def measure(config_path: str | None, count: int, feature_dim: int) -> dict[str, object]:
    """One process's numbers for two maps of ``count`` instances (run in a fresh process)."""
    from builtin_interfaces.msg import Time

    from ovman_core.boxes import Box3
    from ovman_core.config import load_config
    from ovman_mapping.instances import Instance, InstanceMap, Sighting
    from ovman_mapping.map_messages import MapMessageError, instance_map_from_msg, instance_map_msg
    from ovman_query.association import associate
    from ovman_query.change_set import change_set

    config = load_config(config_path)
    rng = np.random.default_rng(count)

    def instance(k: int) -> Instance:
        centre = tuple(float(v) for v in rng.uniform(-20.0, 20.0, 3))
        feature = rng.normal(size=feature_dim)
        box = Box3.from_center_size(centre, (0.3, 0.3, 0.3))
        return Instance(
            f"v1:{k}",
            centre,  # type: ignore[arg-type]
            box,
            np.array([box.lo, box.hi]),
            feature / np.linalg.norm(feature),
            rng.dirichlet(np.ones(config.mapping_node.encoder.colour_bins**2)),
            {"Vase": 1.0},
            (Sighting(0, 0, centre, 10),),  # type: ignore[arg-type]
        )

    first = InstanceMap(1, tuple(instance(k) for k in range(count)), "bench")
    moved = []
    for i in first:
        position = tuple(float(v) for v in np.array(i.position) + rng.uniform(-3.0, 3.0, 3))
        box = Box3.from_center_size(position, (0.3, 0.3, 0.3))  # type: ignore[arg-type]
        moved.append(dataclasses.replace(i, uid="v2:" + i.uid[3:], position=position, box=box))
    second = InstanceMap(2, tuple(moved), "bench")
    messages = [instance_map_msg(m, [0], config.frames.map, Time()) for m in (first, second)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        (map1, _), (map2, _) = (instance_map_from_msg(m, config.shared.limits) for m in messages)
    except MapMessageError as err:
        outcome = f"refused: {err}"
    else:
        association = associate(map1, map2, config.query_node.association)
        changes = change_set(map1, map2, association, config.task, config.query_node.association)
        outcome = f"{len(association.pairs)} pairs, {len(changes)} changes"
    return {
        "instances": count,
        "seconds": time.perf_counter() - start,
        "rss_before_mb": before / 1024,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "outcome": outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None)
    parser.add_argument("--feature-dim", type=int, default=384)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.config, args.child, args.feature_dim)))
        return
    from ovman_core.config import load_config

    limit = load_config(args.config).shared.limits.max_map_instances
    print(f"limits.max_map_instances = {limit}; two maps of N instances, messages to change set, one process each")
    for count in (limit // 4, limit // 2, limit, limit + 1):
        command = [sys.executable, __file__, "--child", str(count), "--feature-dim", str(args.feature_dim)]
        if args.config:
            command += ["--config", args.config]
        row = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        print(
            f"N = {row['instances']:>6}: {row['seconds']:7.2f} s, peak RSS {row['peak_rss_mb']:7.0f} MB "
            f"(messages built: {row['rss_before_mb']:.0f} MB); {row['outcome'][:110]}"
        )


if __name__ == "__main__":
    main()
