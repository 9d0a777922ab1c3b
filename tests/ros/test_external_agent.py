"""Bring-your-own agent: an external agent node, written here, through the whole benchmark graph.

The agent (tests/ros/external_agent.py, its own process, no OVMAN code but the message types)
keeps docs/external-agent.md: it maps each played visit from the player's standard camera topics
(remapped into its namespace ``byo``), serves ``byo/mapping/start_visit``,
``byo/mapping/finish_visit`` and ``byo/ovman/query``, and logs every answer it gives. The graph of
``ovman launch`` runs the arm ``external`` beside ``category_only`` on a three-episode dataset,
static and embodied. Every episode must get the agent's own answer, scored and navigated.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ovman_core.config import load_config, to_document
from ovman_core.frames import ros_to_thor_point
from ovman_core.relations import Relation
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import MapCache
from ovman_eval.benchmark.request import TIMING_KEYS, configured_for, dataset_hash
from ovman_eval.cli.launch import RunningGraph, run_graph
from ovman_eval.generation.dataset import generate_dataset
from ovman_eval.generation.plan import GenerationRequest
from ovman_eval.generation.validate import checked_episodes
from ovman_eval.graph.description import BenchmarkOptions, benchmark_graph, config_for_dataset
from ovman_eval.runs.results import FINISHED, RESULTS, RUN_FILE
from ovman_query.arms import Arm
from ovman_query.decisions import Prediction
from ovman_ros import names

from .conftest import ros_environment
from .processes import NodeProcess

pytestmark = pytest.mark.ros

AGENT_NAMESPACE = "byo"
RELATIONS = (Relation.APPEARED, Relation.REMOVED, Relation.STABLE)
ARMS = ("category_only", "external")
CAMERA_TOPICS = (names.DEPTH, names.CAMERA_INFO)
"""What the agent reads: the standard topics of an RGB-D driver (never the instance topics), with the
frame tree (/tf, /tf_static)."""


@dataclasses.dataclass(frozen=True)
class ExternalRun:
    exit_code: int
    directory: Path
    run_dir: Path
    results: list[dict[str, Any]]
    answers: list[dict[str, Any]]


@pytest.fixture(scope="module")
def external_run(tmp_path_factory: pytest.TempPathFactory) -> ExternalRun:
    directory = tmp_path_factory.mktemp("external_agent")
    config = load_config()
    config = dataclasses.replace(
        config,
        sim_node=dataclasses.replace(config.sim_node, tour=dataclasses.replace(config.sim_node.tour, max_waypoints=40)),
    )
    config_path = directory / "ovman.yaml"
    config_path.write_text(yaml.safe_dump(to_document(config), sort_keys=False), encoding="utf-8")
    dataset = directory / "dataset"
    generation = GenerationRequest(
        world="embedded", scenes=("embedded-1",), per_relation=1, seed=0, multi_change=False, relations=RELATIONS
    )
    generate_dataset(dataset, generation, config)
    run_dir = directory / "run"
    options = BenchmarkOptions(str(dataset), ARMS, (0,), run_dir=str(run_dir), agent_namespace=AGENT_NAMESPACE)
    nodes = benchmark_graph(config_for_dataset(config, dataset), options)
    answers = directory / "answers.jsonl"
    log_dir = directory / "logs"
    log_dir.mkdir()
    remaps = [arg for topic in CAMERA_TOPICS for arg in ("-r", f"{topic}:=/{names.PLAYER_NAMESPACE}/{topic}")]
    remaps += [arg for tf in ("tf", "tf_static") for arg in ("-r", f"/{tf}:=/{names.PLAYER_NAMESPACE}/{tf}")]
    agent_command = [sys.executable, str(Path(__file__).with_name("external_agent.py")), str(answers)]
    with pytest.MonkeyPatch.context() as env:
        for name, value in ros_environment(log_dir / "ros").items():
            env.setenv(name, value)
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("OMP_NUM_THREADS", "1")
        env.delenv("ROS_STATIC_PEERS", raising=False)
        agent = NodeProcess(
            [*agent_command, "--ros-args", "-r", f"__ns:=/{AGENT_NAMESPACE}", *remaps],
            log_dir / "external_agent.log",
            "external_agent",
        )
        try:
            code = run_graph(
                RunningGraph(
                    nodes, config_path, log_dir, shutdown_timeout_s=config.benchmark_node.node.shutdown_timeout_s
                )
            )
        finally:
            agent_code = agent.stop()
    if code != 0:
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(log_dir.glob("*.log"))
        )
        pytest.fail(f"the graph exited with {code}; node logs:\n{logs}")
    assert agent_code == 0, agent.diagnosis()
    results = [json.loads(line) for line in (run_dir / RESULTS).read_text().splitlines()]
    logged = [json.loads(line) for line in answers.read_text().splitlines()]
    return ExternalRun(code, directory, run_dir, results, logged)


def test_the_run_finishes_with_the_external_arm_beside_a_built_in_one(external_run: ExternalRun):
    assert external_run.exit_code == 0 and (external_run.run_dir / FINISHED).is_file()
    identity = json.loads((external_run.run_dir / RUN_FILE).read_text())["identity"]
    assert identity["external_agent"] == AGENT_NAMESPACE and identity["request"]["arms"] == list(ARMS)
    assert sorted(r["arm"] for r in external_run.results) == sorted(ARMS * len(RELATIONS))


def test_every_episode_gets_the_agents_own_answer_scored_as_in_process(external_run: ExternalRun):
    external = [r for r in external_run.results if r["arm"] == "external"]
    # One query per episode, in the order the graph asked them: the agent's answers, as it gave them.
    assert len(external_run.answers) == len(external) == len(RELATIONS)
    by_relation = {r["relation"]: r for r in external}
    config = load_config(external_run.directory / "ovman.yaml")
    dataset = external_run.directory / "dataset"
    records = checked_episodes(dataset)
    config = configured_for(config, records)
    evaluator = GroupEvaluator(config, dataset, records, MapCache(None), dataset_hash(dataset))
    for logged in external_run.answers:
        result = by_relation[logged["relation"]]
        if logged["point"] is None:
            assert result["static"]["point"] is None and result["embodied"]["error"] == "ABSTAINED"
            continue
        x, _, z = ros_to_thor_point((logged["point"][0], logged["point"][1], 0.0))
        assert result["static"]["point"] == pytest.approx([x, z], abs=1e-6)  # results keep 6 decimals
        assert result["static"]["distance"] == pytest.approx(math.dist((x, z), result["answer_point"]), abs=1e-5)
        assert result["diagnostics"] is None  # OVMAN's map diagnostics are not the agent's
        # Navigated in the graph exactly as the in-process evaluator navigates to that point.
        record = next(r for r in records if r.episode_id == result["episode_id"])
        maps = evaluator.group_maps([record], dict.fromkeys(TIMING_KEYS, 0.0))
        prediction = Prediction((x, z), record.query.relation, "", (), 0.5, "", "external")
        expected = json.loads(
            json.dumps(dataclasses.asdict(evaluator.embodied_result(Arm.EXTERNAL, record, maps, prediction)))
        )
        for field in ("success", "failure", "error", "steps", "collisions", "trajectory"):  # grid points: exact
            assert result["embodied"][field] == expected[field], field
        for field in ("stop", "path_length"):
            assert result["embodied"][field] == pytest.approx(expected[field], abs=1e-6), field
    evaluator.close()
    # It abstains where it has no rule (stable) and answers where the visits differ.
    assert by_relation["stable"]["static"]["point"] is None
    assert any(r["static"]["point"] is not None for r in external)
