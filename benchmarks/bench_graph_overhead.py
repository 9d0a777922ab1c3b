"""ROS-graph wall time over in-process wall time on the same episodes (issue 7; goal <= 1.3x).

Runs the same benchmark twice on one dataset and configuration, each as the user would, in its
own process: ``ovman benchmark`` (the in-process runner, no map cache) and ``ovman launch
benchmark`` (sim_node, mapping_node, query_node, nav_node and benchmark_node as processes). Prints
both end-to-end wall times (process start to exit: imports, model loading and node start-up
included) and their ratio, the same for the work alone (the runs' timings.json: maps, static gate,
embodied runs), and how many result lines agree (predicted point, static and embodied success, stop),
with the machine's load average before and after (other work on a small machine skews the ratio).

Without ``--dataset`` a dataset is generated first (embedded homes, one episode per relation per
home, 160x120 frames on an eight-waypoint tour, as tests/ros/test_benchmark_graph.py uses).

Usage: python benchmarks/bench_graph_overhead.py [--dataset DIR --config FILE] [--scenes 2] [--arms all]
Uses $ROS_DOMAIN_ID (default 0: set your own) with localhost-only discovery.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from ovman_core.config import load_config, to_document
from ovman_core.relations import Relation
from ovman_eval.dataset import generate_dataset
from ovman_eval.generation import GenerationRequest
from ovman_eval.results import RESULTS, TIMINGS

GOAL_RATIO = 1.3
WORK_KEYS = ("maps_build_s", "maps_load_s", "static_s", "embodied_s", "sketch_s")


def generated(directory: Path, scenes: int) -> tuple[Path, Path]:
    config = load_config()
    sim = config.sim_node
    sim = dataclasses.replace(
        sim,
        camera=dataclasses.replace(sim.camera, width=160, height=120),
        tour=dataclasses.replace(sim.tour, max_waypoints=8),
    )
    config = dataclasses.replace(config, sim_node=sim)
    config_path = directory / "ovman.yaml"
    config_path.write_text(yaml.safe_dump(to_document(config), sort_keys=False), encoding="utf-8")
    dataset = directory / "dataset"
    request = GenerationRequest(
        world="embedded",
        scenes=tuple(f"embedded-{k}" for k in range(1, scenes + 1)),
        per_relation=1,
        seed=0,
        multi_change=False,
        relations=tuple(Relation),
    )
    generate_dataset(dataset, request, config)
    return dataset, config_path


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return wall


def work_seconds(run_dir: Path) -> float:
    work = json.loads((run_dir / TIMINGS).read_text())["work"]
    return sum(float(work.get(k, 0.0)) for k in WORK_KEYS)


def outcome(line: dict[str, Any]) -> tuple[Any, ...]:
    embodied = line["embodied"] or {}
    return (line["static"]["point"], line["static"]["success"], embodied.get("success"), embodied.get("stop"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", help="episode dataset (default: generate one)")
    parser.add_argument("--config", help="configuration of the dataset (required with --dataset)")
    parser.add_argument("--scenes", type=int, default=2, help="homes of the generated dataset (6 episodes each)")
    parser.add_argument("--arms", default="all", help="comma-separated arms, or all")
    args = parser.parse_args()
    if bool(args.dataset) != bool(args.config):
        parser.error("give --dataset and --config together")
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    ovman = [sys.executable, "-m", "ovman_eval.cli"]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        work = Path(tmp)
        if args.dataset:
            dataset, config_path = Path(args.dataset), Path(args.config)
        else:
            dataset, config_path = generated(work, args.scenes)
        episodes = sum(1 for _ in (dataset / "episodes.jsonl").open())
        # Run seed 0 only: "1" is one seed for both commands (--seeds is a count or a list).
        common = ["--dataset", str(dataset), "--arms", args.arms, "--seeds", "1", "--config", str(config_path)]
        in_dir, graph_dir = work / "in_process", work / "graph"
        in_run = [*ovman, "benchmark", *common, "--run-dir", str(in_dir), "--no-report", "--quiet"]
        in_wall = timed(in_run, env)
        graph_run = [*ovman, "launch", "benchmark", *common, "--run-dir", str(graph_dir)]
        graph_wall = timed([*graph_run, "--log-dir", str(work / "logs")], env)
        in_lines = [json.loads(x) for x in (in_dir / RESULTS).read_text().splitlines()]
        graph_lines = [json.loads(x) for x in (graph_dir / RESULTS).read_text().splitlines()]
        agree = sum(outcome(a) == outcome(b) for a, b in zip(in_lines, graph_lines, strict=True))
        in_work, graph_work = work_seconds(in_dir), work_seconds(graph_dir)
    ratio = graph_wall / in_wall
    print(f"{episodes} episodes, {len(in_lines)} results (arms {args.arms}); {agree}/{len(in_lines)} agree")
    print(f"end to end:  in-process {in_wall:7.1f} s   ROS graph {graph_wall:7.1f} s   ratio {ratio:.2f}x")
    print(
        f"work alone:  in-process {in_work:7.1f} s   ROS graph {graph_work:7.1f} s   ratio {graph_work / in_work:.2f}x"
    )
    load_after = os.getloadavg()
    print(
        f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} on {os.cpu_count()} CPUs"
    )
    verdict = "meets" if ratio <= GOAL_RATIO else "misses"
    print(f"the end-to-end ratio {verdict} the goal of <= {GOAL_RATIO}x")


if __name__ == "__main__":
    main()
