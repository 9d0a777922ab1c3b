"""Label-blind by construction (issue 21): the agent's arms read only what a robot's camera gives.

The shipped configuration (the learned segmenter, at its 320×240 frames) on a small dataset: the
same dataset with the simulator's segments stripped from every recording gives the non-oracle arms
(and oracle_grounding, which reads the agent's own map and the ground-truth boxes) exactly the
same predictions; its map diagnostics say why they are unavailable, and the arm that runs the
agent on the simulator's segments refuses it with the reason.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.map_cache import UNAVAILABLE
from ovman_eval.benchmark.request import BenchmarkRequest
from ovman_eval.benchmark.runner import run_benchmark
from ovman_eval.generation.dataset import generate_dataset, read_episodes
from ovman_eval.generation.plan import GenerationRequest
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_query.arms import Arm
from ovman_sim.recording import has_segments, read_visit, strip_segments

AGENT_ARMS = (Arm.TWO_VISIT, Arm.TWO_VISIT_TEXT, Arm.SINGLE_VISIT, Arm.CATEGORY_ONLY)
TRUTH_ARMS = (Arm.ORACLE_GROUNDING, Arm.ORACLE_POSITIONS, Arm.GIVEN_ANSWER)


def config():
    """The shipped configuration with short tours (the learned segmenter needs the full frames)."""
    shipped = load_config()
    sim = shipped.sim_node
    sim = dataclasses.replace(sim, tour=dataclasses.replace(sim.tour, max_waypoints=12))
    return dataclasses.replace(shipped, sim_node=sim)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> tuple[Path, Path]:
    """A dataset, and its copy with the simulator's segments stripped from every recording."""
    root = tmp_path_factory.mktemp("label_blind")
    full = root / "full"
    request = GenerationRequest(
        world="embedded",
        scenes=("embedded-0",),
        per_relation=1,
        seed=0,
        multi_change=False,
        relations=(Relation.MOVED, Relation.REMOVED, Relation.MOVING),
    )
    generate_dataset(full, request, config())
    stripped = root / "stripped"
    shutil.copytree(full, stripped, ignore=shutil.ignore_patterns("recordings"))
    for record in read_episodes(full):
        for relative in (record.recordings.visit1, record.recordings.visit2):
            if not (stripped / relative).exists():
                strip_segments(full / relative, stripped / relative)
    return full, stripped


def predictions(dataset: Path, arms, out: Path) -> dict[tuple[str, str], object]:
    request = BenchmarkRequest(dataset, tuple(arms), (0,), static_only=True)
    summary = run_benchmark(request, config(), out_root=out, cache_dir=out / "maps")
    return {(r.episode_id, r.arm): r for r in summary.records}


def test_stripping_leaves_only_what_a_robots_camera_gives(datasets):
    full, stripped = datasets
    episode = read_episodes(full)[0]
    source, target = full / episode.recordings.visit2, stripped / episode.recordings.visit2
    assert has_segments(source) and not has_segments(target)
    for before, after in zip(read_visit(source), read_visit(target), strict=True):
        b, a = before.camera, after.camera
        assert (a.pose, a.camera_position, a.intrinsics, a.step) == (b.pose, b.camera_position, b.intrinsics, b.step)
        assert np.array_equal(a.rgb, b.rgb) and np.array_equal(a.depth, b.depth, equal_nan=True)
        assert not after.observation.segments.any() and after.observation.segment_labels == {}
        assert after.observation.segment_instances == {} and after.objects == before.objects
        assert not before.camera.segments.any() and before.camera.segment_labels == {}


def test_without_the_simulators_segments_every_agent_arm_answers_exactly_the_same(datasets, tmp_path):
    full, stripped = datasets
    arms = (*AGENT_ARMS, *TRUTH_ARMS)
    with_segments = predictions(full, arms, tmp_path / "full")
    without = predictions(stripped, arms, tmp_path / "stripped")
    assert with_segments.keys() == without.keys() and len(with_segments) == len(read_episodes(full)) * len(arms)
    for key, record in with_segments.items():
        other = without[key]
        assert other.static.point == record.static.point, key
        assert other.static.instance_ids == record.static.instance_ids, key
        assert other.static.explanation == record.static.explanation, key
        assert other.static.success == record.static.success, key
    answered = [r for r in with_segments.values() if r.arm == Arm.TWO_VISIT.value and r.static.point is not None]
    assert answered, "the agent answers something, so the comparison is not vacuous"
    for (_, arm), record in without.items():
        if arm in (Arm.TWO_VISIT.value, Arm.ORACLE_GROUNDING.value, Arm.CATEGORY_ONLY.value):
            assert UNAVAILABLE in record.diagnostics and "/camera/instances" in record.diagnostics[UNAVAILABLE]
    for (_, arm), record in with_segments.items():
        if arm == Arm.TWO_VISIT.value:
            assert "visit1" in record.diagnostics and UNAVAILABLE not in record.diagnostics


def test_sim_perception_reads_the_simulators_segments_and_refuses_a_dataset_without_them(datasets, tmp_path):
    full, stripped = datasets
    records = predictions(full, (Arm.TWO_VISIT, Arm.SIM_PERCEPTION), tmp_path / "full")
    agent = [r for r in records.values() if r.arm == Arm.TWO_VISIT.value]
    simulator = [r for r in records.values() if r.arm == Arm.SIM_PERCEPTION.value]
    # Other maps: the simulator's segments give one instance per object seen, the learned segmenter more.
    assert [r.diagnostics["visit1"]["instances"] for r in agent] != [
        r.diagnostics["visit1"]["instances"] for r in simulator
    ]
    with pytest.raises((BenchmarkError, ValueError), match="simulator segments"):
        predictions(stripped, (Arm.SIM_PERCEPTION,), tmp_path / "stripped")
