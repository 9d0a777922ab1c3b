"""Static gate time for 219 episodes from cached maps (issue 7: the paper takes 5 s on a laptop; goal ≤ 2 s).

The static gate answers every episode from the two visit maps already built: load the group's
cache entry (maps, ground truth, phrase embeddings), run every arm's decision, score the point.
Map building is done once beforehand and not timed (the paper: 1.9 s per episode, separately).

A dataset of ``--dataset`` (or, without it, a fresh one of one episode per relation on two embedded
homes with the shipped configuration) is mapped into a cache directory, then a new evaluator
(nothing in memory, no language model loaded) answers 219 episodes, cycling through the dataset's
episodes, each loading its cache entry from disk. Prints the total and per-episode times and the
ratio to the goal, in wall and CPU time (CPU time is what the work costs on a shared machine), for
all six arms and for the two-visit agent alone.

Usage: python benchmarks/bench_static_gate.py [--dataset DIR] [--episodes 219] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import MapCache
from ovman_eval.benchmark.request import WorkUnit, dataset_hash
from ovman_eval.generation.dataset import generate_dataset, read_episodes
from ovman_eval.generation.plan import GenerationRequest
from ovman_query.arms import Arm

GOAL_S = 2.0
PAPER_S = 5.0


def static_gate(evaluator: GroupEvaluator, records: list, episodes: int, arms: tuple[Arm, ...]) -> tuple[float, float]:
    """Wall and CPU seconds to answer ``episodes`` episodes (cycling through ``records``) with ``arms``."""
    timings = dict.fromkeys(("maps_build_s", "maps_load_s"), 0.0)
    began = time.perf_counter()
    cpu = time.process_time()
    for k in range(episodes):
        record = records[k % len(records)]
        maps = evaluator.group_maps([record], timings)
        for arm in arms:
            prediction = evaluator.predict(arm, record, maps, 0)
            evaluator.static_result(record, maps, prediction)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    if timings["maps_build_s"] > 0.0:
        raise RuntimeError("a map was built during the timed loop: the cache was not filled")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", help="episode dataset (default: generate 6 episodes into a temporary folder)")
    parser.add_argument("--episodes", type=int, default=219)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = load_config()
    with tempfile.TemporaryDirectory(prefix="bench-static-gate-") as scratch:
        if args.dataset:
            dataset = Path(args.dataset)
        else:
            dataset = Path(scratch) / "dataset"
            request = GenerationRequest("embedded", ("embedded-0", "embedded-1"), 1, 0, relations=tuple(Relation))
            clock = time.perf_counter()
            generate_dataset(dataset, request, config, workers=1)
            print(f"generated {len(read_episodes(dataset))} episodes in {time.perf_counter() - clock:.1f} s")
        records = read_episodes(dataset)
        cache = MapCache(Path(scratch) / "maps")
        digest = dataset_hash(dataset)
        builder = GroupEvaluator(config, dataset, records, cache, digest, static_only=True)
        clock = time.perf_counter()
        for record in records:
            builder.evaluate(WorkUnit(record.group_id, (record.episode_id,), (), False))
        build_s = time.perf_counter() - clock
        print(f"mapped {len(records)} episodes into the cache in {build_s:.1f} s ({build_s / len(records):.2f} s each)")
        for label, arms in (("all six arms", tuple(Arm)), ("two_visit only", (Arm.TWO_VISIT,))):
            walls, cpus = [], []
            for _ in range(args.repeats):
                evaluator = GroupEvaluator(config, dataset, records, cache, digest, static_only=True)
                wall, cpu = static_gate(evaluator, records, args.episodes, arms)
                walls.append(wall)
                cpus.append(cpu)
            median, cpu = statistics.median(walls), statistics.median(cpus)
            print(
                f"static gate, {label}: {args.episodes} episodes from cached maps in {median:.3f} s wall median "
                f"({min(walls):.3f} s best; CPU {cpu:.3f} s, {1000 * cpu / args.episodes:.2f} ms/episode); "
                f"goal {GOAL_S:.0f} s: wall {median / GOAL_S:.2f}x, CPU {cpu / GOAL_S:.2f}x of it; "
                f"paper {PAPER_S:.0f} s"
            )


if __name__ == "__main__":
    main()
