"""Two complete benchmark graphs side by side, in two namespaces on one ROS domain.

Every name of the graph is relative (ovman_ros.names), so ``ovman launch benchmark --namespace run_a``
and ``--namespace run_b`` started at the same time on the same domain share no topic, service or
node: both runs finish, each with the in-process runner's static results. (Before names were
relative, the second graph's nodes answered the first's services.) One episode, two arms, the
static gate only: twelve processes on a small machine.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh)
and the label encoder's MiniLM package.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ovman_core.config import load_config, to_document
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import BenchmarkRequest, parse_arms
from ovman_eval.benchmark.runner import run_benchmark
from ovman_eval.generation.dataset import generate_dataset
from ovman_eval.generation.plan import GenerationRequest
from ovman_eval.runs.results import FINISHED, RESULTS, to_json_line

from .conftest import ros_environment

pytestmark = pytest.mark.ros

ARMS = "two_visit,given_answer"
NAMESPACES = ("run_a", "run_b")
GRAPH_TIMEOUT_S = 900.0
STATIC_FIELDS = ("point", "success", "distance", "failure", "category_success")


def test_two_graphs_in_two_namespaces_finish_side_by_side_with_the_in_process_results(tmp_path: Path):
    config = load_config()
    sim = config.sim_node
    config = dataclasses.replace(
        config, sim_node=dataclasses.replace(sim, tour=dataclasses.replace(sim.tour, max_waypoints=12))
    )
    config_path = tmp_path / "ovman.yaml"
    config_path.write_text(yaml.safe_dump(to_document(config), sort_keys=False), encoding="utf-8")
    dataset = tmp_path / "dataset"
    generation = GenerationRequest(
        world="embedded",
        scenes=("embedded-1",),
        per_relation=1,
        seed=0,
        multi_change=False,
        relations=(Relation.MOVED,),
    )
    generate_dataset(dataset, generation, config)
    summary = run_benchmark(BenchmarkRequest(dataset, parse_arms(ARMS), (0,)), config, run_dir=tmp_path / "in_process")
    reference = [json.loads(to_json_line(r)) for r in summary.records]

    env = {**os.environ, **ros_environment(tmp_path / "ros"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("ROS_STATIC_PEERS", None)
    launches = {
        space: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ovman_eval.cli.main",
                "launch",
                "benchmark",
                "--dataset",
                str(dataset),
                "--arms",
                ARMS,
                "--seeds",
                "1",
                "--static-only",
                "--config",
                str(config_path),
                "--namespace",
                space,
                "--run-dir",
                str(tmp_path / space),
                "--log-dir",
                str(tmp_path / f"logs_{space}"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for space in NAMESPACES
    }
    outputs = {
        space: launch.communicate(timeout=GRAPH_TIMEOUT_S)[0].decode(errors="replace")
        for space, launch in launches.items()
    }
    for space, launch in launches.items():
        assert launch.returncode == 0, f"graph {space} exited with {launch.returncode}:\n{outputs[space][-4000:]}"
        assert (tmp_path / space / FINISHED).is_file()
        results = [json.loads(line) for line in (tmp_path / space / RESULTS).read_text().splitlines()]
        assert [(r["episode_id"], r["arm"]) for r in results] == [(r["episode_id"], r["arm"]) for r in reference]
        for graph, expected in zip(results, reference, strict=True):
            for field in STATIC_FIELDS:
                assert graph["static"][field] == expected["static"][field], (space, graph["arm"], field)
    # Each graph's nodes lived in its own namespace: the player under it, nothing at the root.
    params = yaml.safe_load((tmp_path / "logs_run_a" / "graph_params.yaml").read_text())
    assert "/run_a/player/player" in params and all(name.startswith("/run_a/") for name in params)
