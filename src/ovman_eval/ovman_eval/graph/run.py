"""What benchmark_node computes, without ROS: the ground truth, the navigation goal, the scores, the run directory.

benchmark_node only converts messages; everything it decides or scores is here, built from the
in-process runner's own pieces (:class:`ovman_eval.benchmark.evaluator.GroupEvaluator`), so the two
wirings score alike. Graph maps carry no point clouds or history, so graph results have
``diagnostics: null``; a graph run's identity carries ``"wiring": "ros_graph"``, so graph and
in-process runs never resume each other. Frames: AI2-THOR world (metres; floor (x, z)).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

from ovman_ros.bundle import GROUND_TRUTH_TOPIC, BundleFormatError, GroundTruthParser

from ovman_core.boxes import Vec2
from ovman_core.config import OvmanConfig
from ovman_core.grid import GridError, grid_from_reachable
from ovman_core.world_state import WorldState
from ovman_eval.benchmark.map_cache import TruthCollector, lean_map
from ovman_eval.benchmark.map_entry import CACHE_FORMAT, GroupMaps, GroupTruth
from ovman_eval.benchmark.navigation import NavigationRecord, score_navigation
from ovman_eval.benchmark.request import (
    ABSTAINED_ERROR,
    TIMING_KEYS,
    BenchmarkRequest,
    WorkUnit,
    dataset_hash,
)
from ovman_eval.benchmark.runner import (
    RunSummary,
    expected_keys,
    generation_summary,
    group_order,
    plan_units,
    run_identity,
)
from ovman_eval.benchmark.truth_shares import true_shares
from ovman_eval.generation.dataset import code_revision
from ovman_eval.runs.results import (
    EmbodiedResult,
    EpisodeSketch,
    ResultRecord,
)
from ovman_eval.runs.run_dir import BenchmarkError, RunFiles, find_resumable, new_run_dir
from ovman_eval.task.episodes import EpisodeRecord
from ovman_eval.task.failures import PartitionRadii
from ovman_mapping.instances import InstanceMap
from ovman_query.arms import Arm
from ovman_sim.recording import RecordingError

WIRING = "ros_graph"
"""Added to the run identity of graph runs."""
QUERY_ARMS = frozenset({Arm.TWO_VISIT, Arm.TWO_VISIT_TEXT, Arm.CATEGORY_ONLY})
"""Arms benchmark_node asks query_node for (``/ovman/query``). The others run in benchmark_node
from the received maps and the episode record: oracle_grounding and maintained_map (given the true
category of every received instance, from its points), oracle_positions and given_answer are given ground truth,
sim_perception reads the maps of the ``sim_perception`` mapping_node (segmenter_node's simulator
segments of the played recordings), and single_visit is seeded per
episode and scored with its exact success probability, which needs the answer point; query_node
never receives either."""
NO_DIAGNOSTICS = {"visit1": {}, "visit2": {}, "memory": {}}


# ---- ground truth and maps ---------------------------------------------------------------------------


class PlayedTruth:
    """The ground truth of ``record``'s group from the ground-truth records (JSON, one per frame)
    that sim_node publishes while it plays the group's recordings, visit 1 then visit 2, each in
    publication order: the same :class:`GroupTruth` the map cache collects from the files, without
    reading them again (a reader decompresses every chunk, images included: ~1 s per group on a
    core the playing and mapping nodes need)."""

    def __init__(self, dataset: Path, record: EpisodeRecord) -> None:
        self.record = record
        self.recordings = {1: dataset / record.recordings.visit1, 2: dataset / record.recordings.visit2}
        self.counts = {1: 0, 2: 0}
        """Records received of each visit."""
        self._collector = TruthCollector(record.moving_id)
        self._parsers = {1: GroundTruthParser(), 2: GroundTruthParser()}

    def add(self, visit: int, text: str) -> None:
        """One published record of ``visit``; BenchmarkError naming the recording if malformed."""
        try:
            frame = self._parsers[visit].parse(text)
        except BundleFormatError as err:
            raise BenchmarkError(
                f"{GROUND_TRUTH_TOPIC} while {self.recordings[visit]} played (frame {self.counts[visit]}): {err}"
            ) from None
        self._collector.add(visit, frame.objects, frame.segment_instances.values())
        self.counts[visit] += 1

    def truth(self) -> GroupTruth:
        """The group's truth; BenchmarkError naming the recording of a visit that gave no frame."""
        try:
            for visit, recording in self.recordings.items():
                self._collector.check(visit, recording, self.record.episode_id)
        except RecordingError as err:
            raise BenchmarkError(str(err)) from err
        return self._collector.truth()


def graph_group_maps(
    group_id: str, map1: InstanceMap, map2: InstanceMap, truth: GroupTruth, truth_margin: float
) -> GroupMaps:
    """The group's maps as received from mapping_node, with the recordings' ground truth and the
    true categories of their instances (``truth_margin``: ``benchmark_node.diagnostics.truth_margin``)."""
    if map1.encoder != map2.encoder:
        raise BenchmarkError(
            f"group {group_id}: the visit maps were built with encoders {map1.encoder!r} and {map2.encoder!r}"
        )
    return GroupMaps(
        format_version=CACHE_FORMAT,
        group_id=group_id,
        encoder=map1.encoder,
        map1=lean_map(map1),
        map2=lean_map(map2),
        truth=truth,
        diagnostics=dict(NO_DIAGNOSTICS),
        phrases={},
        shares={1: true_shares(map1, truth.boxes[1], truth_margin), 2: true_shares(map2, truth.boxes[2], truth_margin)},
    )


def without_diagnostics(record: ResultRecord) -> ResultRecord:
    """A graph result line: the wire maps carry no point clouds or history, so no diagnostics."""
    return dataclasses.replace(record, diagnostics=None)


# ---- navigation ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NavigationOutcome:
    """One navigation as the graph reported it: the Navigate result (``error``: the NavError name;
    ``stop``: the final pose's floor point when the agent stopped by itself), the trajectory from
    sim_node's frames, and every object's state when it ended (t_stop)."""

    error: str
    stop: Vec2 | None
    path_length: float
    steps: int
    collisions: int
    trajectory: tuple[Vec2, ...]
    final_state: WorldState
    retargets: int


def score_embodied(
    config: OvmanConfig,
    record: EpisodeRecord,
    reachable: Sequence[Vec2],
    outcome: NavigationOutcome | None,
    final_state: WorldState,
) -> EmbodiedResult:
    """The embodied result of one navigation (``outcome`` None: the arm abstained and never moved;
    ``final_state`` is then the loaded world). ``reachable``: free positions of the evaluated
    world when navigation started (sim_node's ``/map``). Scored by the in-process runner's
    :func:`ovman_eval.benchmark.navigation.score_navigation`."""
    start = record.start_pose.floor
    try:
        grid = grid_from_reachable(reachable, config.sim_node.world.grid_size)
        start_cell = grid.cell_of(start)
    except GridError as err:
        raise BenchmarkError(f"episode {record.episode_id}: the evaluated world's grid is unusable: {err}") from err
    if outcome is None:
        stop, navigation = None, NavigationRecord(ABSTAINED_ERROR, 0.0, 0, 0, (start,), 0)
    else:
        stop, final_state = outcome.stop, outcome.final_state
        navigation = NavigationRecord(
            outcome.error,
            outcome.path_length,
            outcome.steps,
            outcome.collisions,
            outcome.trajectory,
            outcome.retargets,
        )
    task = config.task
    return score_navigation(
        record, final_state, stop, grid, start_cell, task, PartitionRadii.from_task(task), navigation
    )


def trajectory_of(poses: Sequence[Vec2]) -> tuple[Vec2, ...]:
    """Floor positions visited, start first, from one position per frame (consecutive repeats dropped)."""
    out: list[Vec2] = []
    for point in poses:
        if not out or out[-1] != point:
            out.append(point)
    return tuple(out)


# ---- the run directory ---------------------------------------------------------------------------------


class GraphRun(RunFiles):
    """A run directory in the runner's layout (:mod:`ovman_eval.runs.results`), written by benchmark_node.

    Opens ``run_dir`` or the newest unfinished graph run with the same identity under ``out_root``
    (else a new ``out_root/<UTC stamp>``); :attr:`units` is the work still to do, group by group.
    ``external_agent``: the namespace of the external agent evaluated as the arm external, part of
    the identity (a run resumes only with the agent of that namespace; which program answers
    there is the user's to keep the same).
    """

    def __init__(
        self,
        request: BenchmarkRequest,
        config: OvmanConfig,
        records: Sequence[EpisodeRecord],
        encoder_description: str,
        *,
        out_root: Path | None = None,
        run_dir: Path | None = None,
        external_agent: str = "",
    ) -> None:
        if (out_root is None) == (run_dir is None):
            raise BenchmarkError("give exactly one of out_root (a folder of runs) and run_dir (one run)")
        self.request = request
        self.records = list(records)
        dataset = Path(request.dataset)
        digest = dataset_hash(dataset)
        identity = {**run_identity(request, config, digest, code_revision(), encoder_description), "wiring": WIRING}
        if external_agent:  # absent otherwise: the identity of runs without one is what it was
            identity["external_agent"] = external_agent
        if run_dir is None:
            assert out_root is not None
            run_dir = find_resumable(out_root, identity) or new_run_dir(out_root)
        super().__init__(Path(run_dir), identity, {"generation": generation_summary(dataset)}, TIMING_KEYS)
        seen = {r.key for r in self.previous.records}
        self.units: list[WorkUnit] = plan_units(self.records, request, seen, set(self.previous.sketches))
        self.total_groups = len({r.group_id for r in self.records})
        self.done = self.total_groups - len(self.units)

    def commit(self, records: Iterable[ResultRecord], sketch: EpisodeSketch | None, timings: dict[str, float]) -> None:
        """Append one finished group's records (and sketch) and add its timings."""
        super().commit(records, sketch, timings)
        self.done += 1

    def complete(self) -> RunSummary:
        """Sort the partial files into ``results.jsonl``/``sketches.jsonl`` and write the finish marker."""
        order = {r.episode_id: k for k, r in enumerate(self.records)}
        ordered = self.finish(expected_keys(self.records, self.request), order, group_order(self.records), workers=1)
        return RunSummary(self.run_dir, ordered, dict(self.timings))


__all__ = [
    "QUERY_ARMS",
    "WIRING",
    "GraphRun",
    "NavigationOutcome",
    "PlayedTruth",
    "graph_group_maps",
    "score_embodied",
    "trajectory_of",
    "without_diagnostics",
]
