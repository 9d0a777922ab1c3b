"""The in-process benchmark runner: the static gate and the embodied run of every arm (TASK.md §3, §6).

For each recorded group of a dataset (an episode, or the episodes of one multi-change group):

1. **Maps** of both visits from the recorded tours, built once per (recordings, encoder, mapping
   configuration, code) and cached (:mod:`ovman_eval.map_cache`).
2. **Static gate**, per (episode, arm, seed): the arm's predicted point against the answer point
   (within ``task.static_gate_radius``; abstaining fails), the failure class, and the
   category-only test (within the gate radius of any instance of the category at the end of
   visit 2). The single-visit arm also carries its exact per-episode success probability.
3. **Embodied run**, per (episode, arm, seed): the live world is reset to the evaluated world (the
   last frame of the visit-2 recording) with the agent at the episode's start pose, under the
   recording's condition, and the mover restarted with the episode's navigation seed. The arm
   navigates with the reference executor (:func:`ovman_nav.executor.navigate`) to its predicted
   point, stopping within R of the footprint of the instance its answer rests on (an ObjectNav
   agent stops by its object); a moving answer is re-targeted from the agent's latest estimate
   (:mod:`ovman_eval.tracking`; the oracle arms follow the ground truth). At Stop the Eq. 4 test
   is applied with the answer footprint at that moment; SPL uses l = the shortest path from the
   start to any position that passes the test (the executor's grid at the start of navigation).
   An arm that abstains never moves and fails. The given-answer arm navigates exactly as the
   certification oracle did.

Arms: ``two_visit``, ``two_visit_text`` (the same agent given the query's text, so the relation
is inferred by the parser), ``sim_perception`` (the same agent on maps built from the simulator's
segments, from the same reading of the recordings), ``single_visit`` (a seeded uniform pick among
the visit-2 grounded instances; its seed comes from ``query_node.seed``, the run seed and the
episode id), ``oracle_grounding`` (the agent's maps, grounded by the true category of each
instance's points: ``GroupMaps.shares``), ``oracle_positions``, ``given_answer`` and the
``category_only`` baseline (:mod:`ovman_query.arms`). Every arm but sim_perception reads the
agent's maps, built with ``mapping_node.segmenter`` (the learned segmenter by default: pixels
only), and its moving-target tracker segments the live frames with that segmenter.
The agent is given the category and the relation (the paper's default) except in two_visit_text.
Run seeds reseed the agents' stochastic choices, not the simulator: the mover always restarts with
the episode's seed.

Stress conditions (``conditions``, e.g. ``("low_light",)``): the baseline episodes are also
evaluated under each condition on the same episodes, every arm and seed. The recorded tours are
re-rendered under the condition (:mod:`ovman_eval.condition_frames`; same world, changes and poses,
the condition's seed derived from the episode's seed and its name), mapped into their own cache
entries, and the embodied run renders under the condition too. Work units are (group, condition);
records carry their condition, and the stress comparison is :mod:`ovman_eval.stress`.

An episode whose evaluated world cannot be set up (the world refuses its start pose: off the grid,
inside a wall, a yaw that is not a multiple of the rotation step; or the executor's grid does not
hold it) gets an embodied error result (:func:`error_result`: failure
:data:`ovman_eval.results.EMBODIED_ERROR` with the world's message) and the run goes on.

Run directory ``runs/<stamp>/`` (file layout in :mod:`ovman_eval.results`): results are appended
one line at a time with fsync and sorted into their final file at the end, so a rerun of the same
command (same dataset, configuration, code revision, arms, seeds) resumes the unfinished run and
does only the missing work; a damaged line of the partial files is reported (``warn``) and its
result recomputed. A benchmark holds the run directory's lock (:func:`run_dir_lock`) while it
works: a second one on the same directory stops at once. ``workers`` processes share the work by
unit; every result depends only on its episode, so any number of workers writes the same bytes.
A worker that dies (SIGKILL, the OOM killer) stops the run with :class:`WorkerDiedError`, naming
it, its signal or exit status and the unit it was computing; the finished units are kept.

Frames: AI2-THOR world (metres; floor (x, z)).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import fcntl
import hashlib
import json
import math
import multiprocessing
import os
import signal
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import OvmanConfig, SimConfig, TaskConfig, to_document
from ovman_core.files import atomic_write_text
from ovman_core.grid import Cell, GridError, NavGrid, grid_from_reachable
from ovman_core.relations import Relation
from ovman_core.success import embodied_success, spl, static_success
from ovman_core.world_state import AgentPose, WorldState
from ovman_eval.answers import Answer
from ovman_eval.condition_frames import (
    ConditionSensor,
    StressCondition,
    recording_sim_config,
    render_fingerprint,
    stress_condition,
)
from ovman_eval.dataset import EPISODES, DatasetError, code_revision, read_episodes, read_manifest
from ovman_eval.episodes import EpisodeRecord
from ovman_eval.failures import EpisodeOutcome, Gate, PartitionRadii, classify_failure, other_instance_footprints
from ovman_eval.map_cache import (
    SIMULATOR,
    UNAVAILABLE,
    CacheKeys,
    GroupMaps,
    MapCache,
    PhraseByPhraseEncoder,
    build_group_maps,
)
from ovman_eval.results import (
    ARM_ORDER,
    BASELINE,
    CONDITION_ORDER,
    EMBODIED_ERROR,
    FINISHED,
    FORMAT_VERSION,
    LOCK,
    PARTIAL_RESULTS,
    PARTIAL_SKETCHES,
    RESULTS,
    RUN_FILE,
    SKETCHES,
    TIMINGS,
    DamagedLine,
    EmbodiedResult,
    EpisodeSketch,
    LineAppender,
    ResultRecord,
    SketchInstance,
    SketchPair,
    StaticResult,
    read_checked_lines,
    record_from_dict,
    sketch_from_dict,
    sort_key,
    to_json_line,
)
from ovman_eval.tracking import LabelTracker
from ovman_eval.validate import checked_episodes
from ovman_mapping.instances import InstanceMap
from ovman_mapping.segmenter import Segmenter, make_segmenter, with_segmenter
from ovman_nav.astar import shortest_success_path_length
from ovman_nav.executor import NavError, NavSettings, NavTarget, navigate
from ovman_query import arms as arm_functions
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.arms import Arm
from ovman_query.association import Association
from ovman_query.decisions import Prediction
from ovman_sim.session import make_world
from ovman_sim.world import Condition, World

MAP_ARMS = {Arm.TWO_VISIT, Arm.TWO_VISIT_TEXT, Arm.SIM_PERCEPTION, Arm.ORACLE_GROUNDING}
"""Arms that read both maps and the agent's association (their diagnostics include memory)."""
VISIT2_ARMS = {Arm.SINGLE_VISIT, Arm.CATEGORY_ONLY}
"""Arms that read only the visit-2 map."""
THOR_WORLD, LEARNED, CLIP = "thor", "learned", "clip"
"""A dataset's world kind, and the agent's segmenter kinds it decides between (:func:`configured_for`)."""

ABSTAINED_ERROR = "ABSTAINED"
"""EmbodiedResult.error of an arm that abstained and so never navigated."""
SETUP_ERROR = "SETUP"
"""EmbodiedResult.error of an episode whose evaluated world could not be set up (:func:`error_result`)."""

TIMING_KEYS = ("maps_build_s", "maps_load_s", "static_s", "embodied_s", "sketch_s")
"""Cost split of the work (seconds, summed over workers)."""

WorldFactory = Callable[[SimConfig], World]


class BenchmarkError(ValueError):
    """A benchmark run that cannot start or resume (bad arguments, a directory of another run)."""


class WorkerDiedError(BenchmarkError):
    """A worker process ended abruptly (a signal, the OOM killer, an exit); the message names it and
    its unit. The finished units are kept in ``run_dir``: the same command resumes the run."""

    def __init__(self, message: str, run_dir: Path) -> None:
        super().__init__(message)
        self.run_dir = run_dir


class _PoolBrokenError(Exception):
    """A worker of :func:`_run_pool` died; the message says which and what it was computing."""


class EpisodeSetupError(BenchmarkError):
    """The evaluated world of one episode cannot be set up (the world refused its start pose); the
    episode gets an embodied error result (:func:`error_result`) instead of ending the run."""


# ---- the request ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BenchmarkRequest:
    """What to run: ``arms`` × ``seeds`` on every episode of ``dataset``; embodied unless
    ``static_only``; also under each stress condition in ``conditions`` (``low_light``,
    ``texture``), compared with the baseline on the same episodes."""

    dataset: Path
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    static_only: bool = False
    conditions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.arms or len(set(self.arms)) != len(self.arms):
            raise BenchmarkError("arms must be a non-empty list without repeats")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or any(s < 0 for s in self.seeds):
            raise BenchmarkError(f"seeds must be distinct non-negative integers, got {list(self.seeds)}")
        object.__setattr__(self, "arms", tuple(sorted(self.arms, key=lambda a: ARM_ORDER.index(a.value))))
        object.__setattr__(self, "conditions", parse_conditions(self.conditions))

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "dataset": str(self.dataset),
            "arms": [a.value for a in self.arms],
            "seeds": list(self.seeds),
            "static_only": self.static_only,
        }
        if self.conditions:  # absent for baseline runs: their identity is what it was before conditions
            document["conditions"] = list(self.conditions)
        return document


def parse_conditions(text: str | Sequence[str]) -> tuple[str, ...]:
    """Stress conditions from a comma-separated string or names, in :data:`CONDITION_ORDER`
    (``baseline`` is always run and may be named; repeats are dropped)."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    stress = [c for c in CONDITION_ORDER if c != BASELINE]
    for name in names:
        if name not in CONDITION_ORDER:
            raise BenchmarkError(f"unknown condition {name!r}; expected one of {', '.join(stress)}")
    return tuple(c for c in stress if c in names)


def parse_arms(text: str | Sequence[str]) -> tuple[Arm, ...]:
    """Arms from a comma-separated string or names; ``all`` means every arm."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    if names == ["all"]:
        return tuple(Arm)
    arms = []
    for name in names:
        try:
            arms.append(Arm(name))
        except ValueError:
            raise BenchmarkError(f"unknown arm {name!r}; expected one of {', '.join(ARM_ORDER)} (or all)") from None
    return tuple(arms)


def pick_seed(config: OvmanConfig, run_seed: int, episode_id: str) -> int:
    """The single-visit arm's seed for one episode: ``query_node.seed``, the run seed and the id."""
    sequence = np.random.SeedSequence([config.query_node.seed, run_seed, zlib.crc32(episode_id.encode())])
    return int(sequence.generate_state(1)[0] >> 1)


def dataset_hash(dataset: Path) -> str:
    """sha256 of the dataset's ``episodes.jsonl`` (the recordings are keyed per group in the map cache)."""
    path = dataset / EPISODES
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise DatasetError(f"{path}: cannot read ({err.strerror})") from err


def configured_for(config: OvmanConfig, records: Sequence[EpisodeRecord]) -> OvmanConfig:
    """``config`` with the world kind of the dataset's episodes (all episodes must share it); on
    AI2-THOR a ``learned`` agent segmenter becomes ``clip``."""
    worlds = sorted({r.scene.world for r in records})
    if len(worlds) > 1:
        raise BenchmarkError(f"the dataset mixes worlds ({', '.join(worlds)}); run each world's episodes separately")
    if not worlds or worlds[0] == config.sim_node.world.kind:
        return config
    sim = dataclasses.replace(config.sim_node, world=dataclasses.replace(config.sim_node.world, kind=worlds[0]))
    configured = dataclasses.replace(config, sim_node=sim)
    if worlds[0] == THOR_WORLD and configured.mapping_node.segmenter.kind == LEARNED:
        # The learned network knows the embedded world's assets only: on AI2-THOR the agent's
        # segments come from its class-agnostic proposals labelled by open_clip.
        configured = segmented_by(configured, CLIP)
    return configured


# ---- one unit of work: a recorded group ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WorkUnit:
    """A recorded group under one condition: its episodes (dataset order), the (episode, arm, seed)
    keys still to run, whether its sketch is still missing, and the stress ``condition`` (None: the
    recordings as they are)."""

    group_id: str
    episode_ids: tuple[str, ...]
    pending: tuple[tuple[str, str, int], ...]
    need_sketch: bool
    condition: str | None = None

    @property
    def label(self) -> str:
        """The group, and its condition when there is one (progress lines)."""
        return self.group_id if self.condition is None else f"{self.group_id} ({self.condition})"


@dataclasses.dataclass
class UnitOutcome:
    """What one unit produced, and its cost split (:data:`TIMING_KEYS`). ``group_id``: the unit's
    :attr:`WorkUnit.label` (the group, and its condition when there is one)."""

    group_id: str
    records: list[ResultRecord]
    sketch: EpisodeSketch | None
    timings: dict[str, float]


class _StopProbe:
    """Passes the executor's calls to the world and keeps the objects at the moment of Stop (t_stop)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.at_stop: WorldState | None = None

    def agent_pose(self) -> AgentPose:
        return self.world.agent_pose()

    def reachable_positions(self) -> list[Vec2]:
        return self.world.reachable_positions()

    def step(self, action: Action) -> ActionResult:
        if action is Action.STOP:
            self.at_stop = self.world.objects()
        return self.world.step(action)


def _answer_of(record: EpisodeRecord) -> Answer:
    return Answer(
        record.query.category,
        record.query.relation,
        record.answer.instance_id,
        record.answer.point,
        record.answer.region,
    )


@dataclasses.dataclass(frozen=True)
class NavigationRecord:
    """What one navigation did, as scored: the executor's error name (or ``ABSTAINED_ERROR``), the
    walked path length (m), steps, collisions, floor trajectory (x, z) and moving-target updates."""

    error: str
    path_length: float
    steps: int
    collisions: int
    trajectory: tuple[Vec2, ...]
    retargets: int


def score_navigation(
    record: EpisodeRecord,
    final_state: WorldState,
    stop: Vec2 | None,
    grid: NavGrid,
    start_cell: Cell,
    task: TaskConfig,
    radii: PartitionRadii,
    navigation: NavigationRecord,
) -> EmbodiedResult:
    """The embodied result of one navigation, shared by the in-process runner and the ROS graph.

    ``final_state``: the world when the agent stopped (the moving answer is taken there);
    ``stop``: the floor point of a successful Stop, None when the agent never stopped;
    ``grid``/``start_cell``: the evaluated world's reachable grid, for SPL's shortest path.
    """
    answer = _answer_of(record)
    if record.moving_id is not None and record.answer.instance_id == record.moving_id:
        carried = final_state[record.answer.instance_id]
        region, answer_point = carried.box.footprint, carried.floor
    else:
        region, answer_point = answer.region, answer.point
    moved_answer = dataclasses.replace(answer, point=answer_point, region=region)
    success = embodied_success(stop, region, task.success_radius)
    outcome = EpisodeOutcome(stop, answer_point, region, other_instance_footprints(final_state, moved_answer))
    shortest = shortest_success_path_length(grid, start_cell, region, task.success_radius)
    category = stop is not None and any(
        embodied_success(stop, o.box.footprint, task.success_radius) for o in final_state.of_category(answer.category)
    )
    return EmbodiedResult(
        stop=None if stop is None else (float(stop[0]), float(stop[1])),
        success=success,
        stop_distance=None if stop is None else region.distance_to(stop),
        failure=classify_failure(outcome, Gate.EMBODIED, radii).value,
        category_success=category,
        spl=spl(success, shortest, navigation.path_length) if shortest is not None else 0.0,
        path_length=float(navigation.path_length),
        shortest_path=shortest,
        steps=int(navigation.steps),
        collisions=int(navigation.collisions),
        error=navigation.error,
        answer_point=(float(answer_point[0]), float(answer_point[1])),
        trajectory=tuple((float(x), float(z)) for x, z in navigation.trajectory),
        retargets=int(navigation.retargets),
    )


def error_result(record: EpisodeRecord, message: str) -> EmbodiedResult:
    """The embodied result of an episode whose run could not be made: failure
    :data:`ovman_eval.results.EMBODIED_ERROR` with ``message``, not a success, no stop, SPL 0."""
    return EmbodiedResult(
        stop=None,
        success=False,
        stop_distance=None,
        failure=EMBODIED_ERROR,
        category_success=False,
        spl=0.0,
        path_length=0.0,
        shortest_path=None,
        steps=0,
        collisions=0,
        error=SETUP_ERROR,
        answer_point=(float(record.answer.point[0]), float(record.answer.point[1])),
        trajectory=(),
        retargets=0,
        message=message,
    )


def _footprint(box_footprint: Any) -> tuple[float, float, float, float]:
    return (box_footprint.x_min, box_footprint.z_min, box_footprint.x_max, box_footprint.z_max)


class Follow(enum.Enum):
    """How a moving target is re-estimated while the agent navigates."""

    NONE = "none"
    TRUTH = "truth"
    """The oracle arms: the instance's ground-truth position."""
    SIGHTINGS = "sightings"
    """The map arms: the agent's own sightings of the label (:class:`ovman_eval.tracking.LabelTracker`)."""


@dataclasses.dataclass(frozen=True)
class NavigationPlan:
    """The first target, and how it is followed: ``instance`` (TRUTH) or ``label`` (SIGHTINGS)."""

    target: NavTarget
    follow: Follow = Follow.NONE
    instance: str = ""
    label: str = ""
    segmenter: str = ""
    """SIGHTINGS: the ``mapping_node.segmenter.kind`` that segments the live frames (the one the
    arm's maps were built with)."""


def segmented_by(config: OvmanConfig, kind: str) -> OvmanConfig:
    """``config`` with ``mapping_node.segmenter.kind`` set to ``kind``."""
    return dataclasses.replace(config, mapping_node=with_segmenter(config.mapping_node, kind))


class _MapsAgent(ReferenceAgent):
    """The reference agent, answering the association of a group's maps from its cache entry
    (it depends only on the maps and the configuration; several arms need it)."""

    _known: tuple[GroupMaps, ...] = ()

    def remember(self, *entries: GroupMaps) -> None:
        """The entries of the group at work (its agent's maps, and those sim_perception reads)."""
        self._known = entries

    def associate(self, map1: InstanceMap, map2: InstanceMap) -> Association:
        for known in self._known:
            if known.association is not None and map1 is known.map1 and map2 is known.map2:
                return known.association
        return super().associate(map1, map2)


class GroupEvaluator:
    """Evaluates work units in one process: its agent, its encoder, its world (made on first use)."""

    def __init__(
        self,
        config: OvmanConfig,
        dataset: Path,
        records: Sequence[EpisodeRecord],
        cache: MapCache,
        dataset_digest: str,
        world_factory: WorldFactory = make_world,
        *,
        static_only: bool = False,
    ) -> None:
        self.config = configured_for(config, records)
        self.static_only = static_only
        self.dataset = dataset
        self.records = {r.episode_id: r for r in records}
        self.cache = cache
        self.dataset_digest = dataset_digest
        self.world_factory = world_factory
        self.encoder = PhraseByPhraseEncoder(self.config)
        self.agent = _MapsAgent(self.config, encoder=self.encoder)
        self._keys: dict[str, CacheKeys] = {}
        self._segmenters: dict[str, Segmenter] = {}
        self._simulator_maps: tuple[tuple[str, str | None], GroupMaps] | None = None
        self.nav = NavSettings.from_config(self.config)
        self.radii = PartitionRadii.from_task(self.config.task)
        self._world: World | None = None
        self._render_sim: SimConfig | None = None
        self._render_world: World | None = None

    @property
    def world(self) -> World:
        if self._world is None:
            self._world = self.world_factory(self.config.sim_node)
        return self._world

    @property
    def render_sim(self) -> SimConfig:
        """The simulator configuration stress conditions re-render the recordings with
        (:func:`ovman_eval.condition_frames.recording_sim_config`)."""
        if self._render_sim is None:
            self._render_sim = recording_sim_config(self.dataset, self.config)
        return self._render_sim

    @property
    def render_world(self) -> World:
        """The world that re-renders recordings: the live world when it renders alike, else its own."""
        if self.render_sim == self.config.sim_node:
            return self.world
        if self._render_world is None:
            self._render_world = self.world_factory(self.render_sim)
        return self._render_world

    def close(self) -> None:
        for world in (self._world, self._render_world):
            if world is not None:
                world.close()
        self._world = self._render_world = None

    # ------------------------------------------------------------------ maps

    @property
    def agent_segmenter(self) -> str:
        """The ``mapping_node.segmenter.kind`` of the agent's maps (every arm but sim_perception)."""
        return self.config.mapping_node.segmenter.kind

    def segmenter(self, kind: str) -> Segmenter:
        """The ``kind`` segmenter (made once) that a map arm's tracker segments live frames with."""
        if kind not in self._segmenters:
            mapping = with_segmenter(self.config.mapping_node, kind)
            self._segmenters[kind] = make_segmenter(mapping.segmenter, encoder=mapping.encoder)
        return self._segmenters[kind]

    def group_maps(
        self,
        records: Sequence[EpisodeRecord],
        timings: dict[str, float],
        condition: StressCondition | None = None,
        segmenter: str | None = None,
    ) -> GroupMaps:
        """The group's maps from the cache, or built from the recordings (re-rendered under
        ``condition`` when given) and cached; ``segmenter``: the ``mapping_node.segmenter.kind``
        they are built with (None: the agent's)."""
        return self.group_maps_of(records, timings, condition, (segmenter,))[0]

    def group_maps_of(
        self,
        records: Sequence[EpisodeRecord],
        timings: dict[str, float],
        condition: StressCondition | None,
        segmenters: Sequence[str | None],
    ) -> list[GroupMaps]:
        """:meth:`group_maps` for each of ``segmenters``; those not cached are built from one
        reading of the recordings (:func:`ovman_eval.map_cache.build_group_maps`)."""
        clock = time.perf_counter()
        first = records[0]
        rendering = None
        if condition is not None:
            rendering = {
                "name": condition.name,
                "seed": condition.seed,
                "sim": dataclasses.asdict(self.render_sim),
                "code": render_fingerprint(),
            }
        configs, keys, entries = [], [], []
        for segmenter in segmenters:
            kind = self.agent_segmenter if segmenter is None else segmenter
            config = self.config if kind == self.agent_segmenter else segmented_by(self.config, kind)
            if kind not in self._keys:
                self._keys[kind] = CacheKeys(config, self.encoder.description, self.dataset_digest)
            configs.append(config)
            keys.append(self._keys[kind].of(self.dataset, first, rendering))
            entries.append(self.cache.get(keys[-1]))
        for entry in entries:
            if entry is not None:
                self.encoder.known.update(entry.phrases)
        missing = [k for k, entry in enumerate(entries) if entry is None]
        if not missing:
            timings["maps_load_s"] += time.perf_counter() - clock
            return entries  # type: ignore[return-value]
        sensor = None
        if condition is not None:
            where = f"{self.dataset / first.recordings.visit1} (and visit 2) under {condition.name}"
            sensor = ConditionSensor(self.render_world, first.scene.name, condition, where)
        phrases = [r.query.noun_phrase for r in records]
        built = build_group_maps(self.dataset, first, phrases, [configs[k] for k in missing], self.encoder, sensor)
        for k, entry in zip(missing, built, strict=True):
            self.cache.put(keys[k], entry)
            entries[k] = entry
        timings["maps_build_s"] += time.perf_counter() - clock
        return entries  # type: ignore[return-value]

    def arm_maps(
        self,
        arm: Arm,
        records: Sequence[EpisodeRecord],
        agent_maps: GroupMaps,
        timings: dict[str, float],
        condition: StressCondition | None = None,
    ) -> GroupMaps:
        """The maps ``arm`` reads: those built from the simulator's segments for sim_perception
        (made once per group and condition), ``agent_maps`` for every other arm."""
        if arm is not Arm.SIM_PERCEPTION or self.agent_segmenter == SIMULATOR:
            return agent_maps
        key = (records[0].group_id, None if condition is None else condition.name)
        if self._simulator_maps is None or self._simulator_maps[0] != key:
            self._simulator_maps = (key, self.group_maps(records, timings, condition, SIMULATOR))
        entry = self._simulator_maps[1]
        self.agent.remember(agent_maps, entry)
        return entry

    def arm_segmenter(self, arm: Arm) -> str:
        """The ``mapping_node.segmenter.kind`` of the maps ``arm`` reads."""
        return SIMULATOR if arm is Arm.SIM_PERCEPTION else self.agent_segmenter

    def stress_condition(self, record: EpisodeRecord, condition: str | None) -> StressCondition | None:
        """The stress condition of ``record``'s group (its seed from the episode's seed), or None."""
        return None if condition is None else stress_condition(condition, record.seeds.episode)

    # ------------------------------------------------------------------ the unit

    def evaluate(self, unit: WorkUnit) -> UnitOutcome:
        timings = dict.fromkeys(TIMING_KEYS, 0.0)
        records = [self.records[e] for e in unit.episode_ids]
        condition = self.stress_condition(records[0], unit.condition)
        simulator = any(Arm(a) is Arm.SIM_PERCEPTION for _, a, _ in unit.pending) and self.agent_segmenter != SIMULATOR
        entries = self.group_maps_of(records, timings, condition, (None, SIMULATOR) if simulator else (None,))
        maps = entries[0]
        if simulator:
            self._simulator_maps = ((records[0].group_id, unit.condition), entries[1])
        self.agent.remember(maps)
        out: list[ResultRecord] = []
        reachable: tuple[Vec2, ...] = ()
        for episode_id, arm_name, seed in unit.pending:
            record = self.records[episode_id]
            arm = Arm(arm_name)
            read = self.arm_maps(arm, records, maps, timings, condition)
            clock = time.perf_counter()
            prediction = self.predict(arm, record, read, seed)
            static = self.static_result(record, read, prediction)
            clock2 = time.perf_counter()
            timings["static_s"] += clock2 - clock
            embodied = None
            if not self.static_only:
                embodied = self.embodied_result(arm, record, read, prediction, condition)
                timings["embodied_s"] += time.perf_counter() - clock2
            out.append(self.result_record(record, arm, seed, static, embodied, read, unit.condition))
        sketch = None
        if unit.need_sketch and condition is None:
            clock = time.perf_counter()
            if not self.static_only:
                reachable = self.reachable_of(records[0], maps)
            sketch = self.sketch(records[0], maps, reachable)
            timings["sketch_s"] += time.perf_counter() - clock
        return UnitOutcome(unit.label, out, sketch, timings)

    # ------------------------------------------------------------------ static gate

    def predict(self, arm: Arm, record: EpisodeRecord, maps: GroupMaps, seed: int) -> Prediction:
        """The arm's answer from the maps it reads (:meth:`arm_maps`): the agent is given the
        category and the relation, except two_visit_text, which is given the query's text."""
        query = query_of(record.query.noun_phrase, record.query.relation, record.query.category)
        agent = self.agent
        if arm is Arm.TWO_VISIT:
            return arm_functions.two_visit(agent, maps.map1, maps.map2, query)
        if arm is Arm.TWO_VISIT_TEXT:
            return arm_functions.two_visit_text(agent, maps.map1, maps.map2, record.query.phrase, query.relation)
        if arm is Arm.SINGLE_VISIT:
            return arm_functions.single_visit(
                agent, maps.map2, query, pick_seed(self.config, seed, record.episode_id), record.answer.point
            )
        if arm is Arm.SIM_PERCEPTION:
            return arm_functions.sim_perception(agent, maps.map1, maps.map2, query)
        if arm is Arm.ORACLE_GROUNDING:
            if set(maps.shares) != {1, 2}:
                raise BenchmarkError(f"group {maps.group_id}: oracle_grounding needs the true categories of both maps")
            return arm_functions.oracle_grounding(agent, maps.map1, maps.map2, query, maps.shares[1], maps.shares[2])
        if arm is Arm.ORACLE_POSITIONS:
            truth = maps.truth
            return arm_functions.oracle_positions(agent, truth.visit1, truth.visit2_end, query, record.moving_id)
        if arm is Arm.GIVEN_ANSWER:
            return arm_functions.given_answer(query, record.answer.point, record.answer.instance_id)
        if arm is Arm.CATEGORY_ONLY:
            return arm_functions.category_only(agent, maps.map2, query)
        raise BenchmarkError(f"no arm {arm!r}")

    def static_result(self, record: EpisodeRecord, maps: GroupMaps, prediction: Prediction) -> StaticResult:
        task = self.config.task
        point = prediction.point
        answer = _answer_of(record)
        final = maps.truth.visit2_end
        outcome = EpisodeOutcome(point, answer.point, answer.region, other_instance_footprints(final, answer))
        distance = None if point is None else math.dist(point, answer.point)
        category = point is not None and any(
            static_success(point, o.floor, task.static_gate_radius) for o in final.of_category(answer.category)
        )
        return StaticResult(
            point=None if point is None else (float(point[0]), float(point[1])),
            success=static_success(point, answer.point, task.static_gate_radius),
            distance=distance,
            failure=classify_failure(outcome, Gate.STATIC, self.radii).value,
            category_success=category,
            success_probability=prediction.success_probability,
            instance_ids=tuple(prediction.instance_ids),
            confidence=float(prediction.confidence),
            explanation=prediction.explanation,
        )

    # ------------------------------------------------------------------ embodied run

    def reset_world(self, record: EpisodeRecord, maps: GroupMaps, condition: StressCondition | None = None) -> World:
        """The evaluated world: visit-2's last frame, the start pose, the recording's condition (or
        the stress ``condition``), the mover. EpisodeSetupError with the world's message when it
        refuses the episode (its reset raises ValueError, e.g. a start pose it cannot place)."""
        world = self.world
        if condition is None:
            world.set_condition(Condition(record.scene.condition), record.scene.condition_seed)
        else:
            world.set_condition(Condition(condition.name), condition.seed)
        try:
            world.reset(record.scene.name, maps.truth.visit2_end, record.start_pose)
        except ValueError as err:
            raise EpisodeSetupError(str(err)) from err
        if record.moving_id is not None:
            assert record.seeds.navigation_mover is not None
            world.start_mover(record.moving_id, record.seeds.navigation_mover)
        return world

    def reachable_of(self, record: EpisodeRecord, maps: GroupMaps) -> tuple[Vec2, ...]:
        """Free positions of ``record``'s evaluated world (for the sketch); none when it cannot be set up."""
        try:
            world = self.reset_world(record, maps)
        except EpisodeSetupError:
            return ()
        cells = tuple((float(x), float(z)) for x, z in world.reachable_positions())
        world.stop_mover()
        return cells

    def answer_footprint(self, arm: Arm, relation: Relation, prediction: Prediction, maps: GroupMaps) -> Footprint:
        """The floor footprint of the instance the arm's answer rests on, in the visit its answer
        is read from (a map box, or the ground-truth box for the oracle arms); the point itself
        when the answer rests on no known instance."""
        assert prediction.point is not None
        ids = prediction.instance_ids
        point = NavTarget.at_point(prediction.point).region
        if not ids:
            return point
        past = relation.answer_visit == 1
        if arm is Arm.ORACLE_POSITIONS:
            state = maps.truth.visit1 if past else maps.truth.visit2_end
            uid = ids[0] if past else ids[-1]
            return state[uid].box.footprint if uid in state else point
        if arm in MAP_ARMS and past:
            instance_map, uid = maps.map1, ids[0]
        else:
            instance_map, uid = maps.map2, ids[-1]
        try:
            return instance_map[uid].box.footprint
        except KeyError:
            return point

    def navigation_plan(
        self,
        arm: Arm,
        record: EpisodeRecord,
        maps: GroupMaps,
        prediction: Prediction,
        objects_at_start: WorldState,
    ) -> NavigationPlan:
        """Where the arm navigates and how a moving target is followed (both wirings ask this).

        Agents navigate to the footprint of the instance their answer rests on (stopping within R
        of it, as an ObjectNav agent stops by its object); the given answer navigates to the true
        answer region exactly as the certification oracle. A moving answer is followed: the oracle
        arms follow the instance's ground truth, the map arms their own sightings of its label.
        ``objects_at_start``: the evaluated world once loaded (mover started)."""
        assert prediction.point is not None, "an abstaining arm does not navigate"
        moving = record.moving_id
        if arm is Arm.GIVEN_ANSWER:
            if moving is not None and record.answer.instance_id == moving:
                obj = objects_at_start[moving]
                return NavigationPlan(NavTarget(obj.floor, obj.box.footprint), Follow.TRUTH, instance=moving)
            return NavigationPlan(NavTarget(record.answer.point, record.answer.region))
        target = NavTarget(prediction.point, self.answer_footprint(arm, prediction.relation, prediction, maps))
        if prediction.relation is not Relation.MOVING or moving is None or not prediction.instance_ids:
            return NavigationPlan(target)
        chosen = prediction.instance_ids[-1]
        if arm is Arm.ORACLE_POSITIONS:
            if chosen not in objects_at_start:
                return NavigationPlan(target)
            return NavigationPlan(target, Follow.TRUTH, instance=chosen)
        label = maps.map2[chosen].label
        return NavigationPlan(target, Follow.SIGHTINGS, label=label, segmenter=self.arm_segmenter(arm))

    def navigation_target(
        self, arm: Arm, record: EpisodeRecord, maps: GroupMaps, prediction: Prediction, world: World
    ) -> tuple[NavTarget, Callable[[], NavTarget | None] | None, LabelTracker | None]:
        """The arm's first target (:meth:`navigation_plan`), the update callable polled before every
        action (None for a fixed target) and the tracker of a map arm following by sight. An update
        is the instance's floor position and footprint now (the oracle arms) or the latest sighting's
        (the map arms)."""
        plan = self.navigation_plan(arm, record, maps, prediction, world.objects())
        if plan.follow is Follow.NONE:
            return plan.target, None, None
        if plan.follow is Follow.TRUTH:

            def ground_truth() -> NavTarget | None:
                objects = world.objects()
                if plan.instance not in objects:
                    return None
                obj = objects[plan.instance]
                return NavTarget(obj.floor, obj.box.footprint)

            return plan.target, ground_truth, None
        tracker = LabelTracker(
            label=plan.label,
            estimate=plan.target.point,
            gate=self.config.benchmark_node.benchmark.track_gate,
            mapping=self.config.mapping_node,
            segmenter=self.segmenter(plan.segmenter),
        )
        return plan.target, lambda: tracker.observe(world.observe()), tracker

    def embodied_result(
        self,
        arm: Arm,
        record: EpisodeRecord,
        maps: GroupMaps,
        prediction: Prediction,
        condition: StressCondition | None = None,
    ) -> EmbodiedResult:
        """The arm's navigation from the episode's start, scored; an error result (:func:`error_result`)
        when the evaluated world cannot be set up or its grid does not hold the start."""
        task = self.config.task
        start = record.start_pose.floor
        try:
            world = self.reset_world(record, maps, condition)
        except EpisodeSetupError as err:
            return error_result(record, str(err))
        try:
            grid = grid_from_reachable(world.reachable_positions(), self.nav.resolution)
            start_cell = grid.cell_of(start)
        except GridError as err:
            world.stop_mover()
            return error_result(record, f"the evaluated world's grid is unusable: {err}")
        stop: Vec2 | None = None
        retargets = 0
        if prediction.point is None:
            final_state = world.objects()
            error, path_length, steps, collisions, trajectory = ABSTAINED_ERROR, 0.0, 0, 0, (start,)
        else:
            probe = _StopProbe(world)
            target, updates, tracker = self.navigation_target(arm, record, maps, prediction, world)
            result = navigate(
                probe, target, self.nav, target_may_move=record.moving_id is not None, target_updates=updates
            )
            final_state = probe.at_stop if probe.at_stop is not None else world.objects()
            if result.error is NavError.NONE and result.final_pose is not None and probe.at_stop is not None:
                stop = result.final_pose.floor
            error, path_length = result.error.name, result.path_length
            steps, collisions, trajectory = result.steps, result.collisions, result.trajectory
            retargets = tracker.updates if tracker is not None else 0
        world.stop_mover()
        return score_navigation(
            record,
            final_state,
            stop,
            grid,
            start_cell,
            task,
            self.radii,
            NavigationRecord(error, path_length, steps, collisions, tuple(trajectory), retargets),
        )

    # ------------------------------------------------------------------ records

    def result_record(
        self,
        record: EpisodeRecord,
        arm: Arm,
        seed: int,
        static: StaticResult,
        embodied: EmbodiedResult | None,
        maps: GroupMaps,
        condition: str | None = None,
    ) -> ResultRecord:
        """The record of one (episode, arm, seed) under the stress ``condition`` (None: the recording's own)."""
        if arm in MAP_ARMS or (arm in VISIT2_ARMS and UNAVAILABLE in maps.diagnostics):
            diagnostics: dict[str, Any] | None = dict(maps.diagnostics)
        elif arm in VISIT2_ARMS:
            diagnostics = {"visit2": maps.diagnostics["visit2"]}
        else:
            diagnostics = None
        return ResultRecord(
            format_version=FORMAT_VERSION,
            episode_id=record.episode_id,
            group_id=record.group_id,
            split=record.split,
            scene=record.scene.name,
            relation=record.query.relation.value,
            category=record.query.category,
            instances=len(set(record.instances.visit1) | set(record.instances.visit2)),
            phrase=record.query.phrase,
            answer_instance=record.answer.instance_id,
            answer_point=(float(record.answer.point[0]), float(record.answer.point[1])),
            answer_region=_footprint(record.answer.region),
            start=(float(record.start_pose.x), float(record.start_pose.z)),
            arm=arm.value,
            seed=seed,
            static=static,
            embodied=embodied,
            diagnostics=diagnostics,
            condition=record.scene.condition if condition is None else condition,
        )

    def sketch(self, record: EpisodeRecord, maps: GroupMaps, reachable: Sequence[Vec2]) -> EpisodeSketch:
        association = self.agent.associate(maps.map1, maps.map2)

        def of_map(instance_map: Any) -> tuple[SketchInstance, ...]:
            return tuple(
                SketchInstance(i.uid, i.label, i.floor, _footprint(i.box.footprint), bool(i.moving))
                for i in instance_map
            )

        def of_truth(state: WorldState) -> tuple[SketchInstance, ...]:
            return tuple(
                SketchInstance(o.instance_id, o.category, o.floor, _footprint(o.box.footprint), False) for o in state
            )

        return EpisodeSketch(
            format_version=FORMAT_VERSION,
            group_id=record.group_id,
            scene=record.scene.name,
            map1=of_map(maps.map1),
            map2=of_map(maps.map2),
            pairs=tuple(SketchPair(p.uid1, p.uid2, p.stage, p.displacement) for p in association.pairs),
            removed=tuple(association.removed),
            appeared=tuple(association.appeared),
            truth1=of_truth(maps.truth.visit1),
            truth2=of_truth(maps.truth.visit2_end),
            reachable=tuple(reachable),
            grid_size=self.config.sim_node.world.grid_size,
        )


# ---- the run -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """Units (groups, times conditions) ``done`` of ``total`` (``resumed`` of them finished by an
    earlier invocation); ``last``: the unit just finished."""

    done: int
    total: int
    resumed: int
    elapsed_s: float
    last: str


ProgressCallback = Callable[[RunProgress], None]


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """A finished run: its directory and records (sorted as in ``results.jsonl``)."""

    run_dir: Path
    records: list[ResultRecord]
    timings: dict[str, float]


_WORKER: GroupEvaluator | None = None
_STARTED: SimpleQueue[tuple[int, str]] | None = None
"""Where a worker says which unit it starts (its PID and the unit's label), so that the parent can
name the unit of a worker that dies."""


def _init_worker(
    config: OvmanConfig,
    dataset: Path,
    records: list[EpisodeRecord],
    cache_dir: Path | None,
    digest: str,
    static_only: bool,
    world_factory: WorldFactory,
    started: SimpleQueue[tuple[int, str]],
) -> None:
    global _WORKER, _STARTED
    _WORKER = GroupEvaluator(
        config, dataset, records, MapCache(cache_dir), digest, world_factory, static_only=static_only
    )
    _STARTED = started


def _evaluate_in_worker(unit: WorkUnit) -> UnitOutcome:
    assert _WORKER is not None and _STARTED is not None, "worker not initialised"
    _STARTED.put((os.getpid(), unit.label))
    return _WORKER.evaluate(unit)


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")


def _identity(
    request: BenchmarkRequest, config: OvmanConfig, digest: str, revision: str, encoder: str
) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "request": request.to_dict(),
        "dataset_sha256": digest,
        "code_revision": revision,
        "encoder": encoder,
        "config": to_document(config),
    }


def _find_resumable(out_root: Path, identity: dict[str, Any]) -> Path | None:
    """The newest unfinished run directory under ``out_root`` with the same identity."""
    if not out_root.is_dir():
        return None
    for candidate in sorted((p for p in out_root.iterdir() if p.is_dir()), reverse=True):
        run_file = candidate / RUN_FILE
        if not run_file.is_file() or (candidate / FINISHED).exists():
            continue
        try:
            stored = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if stored.get("identity") == identity:
            return candidate
    return None


def _new_run_dir(out_root: Path) -> Path:
    stamp = _stamp()
    path = out_root / stamp
    suffix = 1
    while path.exists():
        suffix += 1
        path = out_root / f"{stamp}-{suffix}"
    return path


def run_benchmark(
    request: BenchmarkRequest,
    config: OvmanConfig,
    *,
    out_root: Path | None = None,
    run_dir: Path | None = None,
    workers: int = 1,
    cache_dir: Path | None = None,
    world_factory: WorldFactory = make_world,
    progress: ProgressCallback | None = None,
    warn: Callable[[str], None] | None = None,
    full_validation: bool = False,
) -> RunSummary:
    """Run (or resume) the benchmark of ``request``; see the module docstring.

    The dataset must pass :func:`ovman_eval.validate.checked_episodes` first (the cheap checks, or
    every check with ``full_validation``): a dataset that fails is refused (DatasetError) before
    anything runs.

    The run directory is ``run_dir`` when given (resumed when it holds the same run, refused when
    it holds another), else the newest unfinished run with the same identity under ``out_root``,
    else a new ``out_root/<UTC stamp>``; it is locked for the run (:func:`run_dir_lock`: a
    BenchmarkError at once when another benchmark holds it). ``cache_dir`` keeps the maps (None:
    not cached). ``warn`` is told of each damaged line of the resumed files (its result is computed
    again). WorkerDiedError when a worker process dies (the finished units are kept).
    """
    if workers < 1:
        raise BenchmarkError(f"workers must be at least 1, got {workers}")
    if (out_root is None) == (run_dir is None):
        raise BenchmarkError("give exactly one of out_root (a folder of runs) and run_dir (one run)")
    dataset = Path(request.dataset)
    records = checked_episodes(dataset, full=full_validation)
    if not records:
        raise BenchmarkError(f"{dataset}: the dataset holds no episodes")
    config = configured_for(config, records)
    recorded = sorted({r.scene.condition for r in records} - {BASELINE})
    if request.conditions and recorded:
        raise BenchmarkError(
            f"{dataset}: stress conditions are re-rendered from baseline recordings, but this dataset was recorded "
            f"under {', '.join(recorded)}; run --condition on a dataset generated without --condition"
        )
    digest = dataset_hash(dataset)
    encoder = PhraseByPhraseEncoder(config).description
    identity = _identity(request, config, digest, code_revision(), encoder)
    if run_dir is None:
        assert out_root is not None
        run_dir = _find_resumable(out_root, identity) or _new_run_dir(out_root)
    run_dir = Path(run_dir)
    with run_dir_lock(run_dir):
        started = time.monotonic()
        previous = _open_run_dir(run_dir, identity)
        if warn is not None:
            for line in previous.damaged:
                warn(f"{line}; skipped, any result it held is computed again")
        episode_order = {r.episode_id: k for k, r in enumerate(records)}
        seen = {r.key for r in previous.records}
        sketched = set(previous.sketches)
        units = _plan_units(records, request, seen, sketched)
        total_units = len({r.group_id for r in records}) * (1 + len(request.conditions))
        resumed = total_units - len(units)
        results_out = LineAppender(run_dir / PARTIAL_RESULTS)
        sketches_out = LineAppender(run_dir / PARTIAL_SKETCHES)
        timings = dict.fromkeys(TIMING_KEYS, 0.0)
        timings.update({k: v for k, v in previous.timings.items() if k in timings})
        done = resumed

        def commit(outcome: UnitOutcome) -> None:
            nonlocal done
            results_out.append(to_json_line(r) for r in outcome.records)
            if outcome.sketch is not None:
                sketches_out.append([to_json_line(outcome.sketch)])
            for key, value in outcome.timings.items():
                timings[key] += value
            done += 1
            _write_timings(run_dir, timings, time.monotonic() - started + previous.wall_s, complete=False)
            if progress is not None:
                progress(RunProgress(done, total_units, resumed, time.monotonic() - started, outcome.group_id))

        try:
            if workers == 1 or len(units) <= 1:
                evaluator = GroupEvaluator(
                    config,
                    dataset,
                    records,
                    MapCache(cache_dir),
                    digest,
                    world_factory,
                    static_only=request.static_only,
                )
                try:
                    for unit in units:
                        commit(evaluator.evaluate(unit))
                finally:
                    evaluator.close()
            else:
                initargs = (config, dataset, records, cache_dir, digest, request.static_only, world_factory)
                try:
                    _run_pool(units, workers, initargs, commit)
                except _PoolBrokenError as err:
                    raise WorkerDiedError(
                        f"{run_dir}: {err}; the {done} of {total_units} units finished are kept, and the run "
                        "resumes from them",
                        run_dir,
                    ) from None
        finally:
            results_out.close()
            sketches_out.close()
        wall = time.monotonic() - started + previous.wall_s
        return _finish(run_dir, request, records, episode_order, timings, wall, workers)


def _run_pool(
    units: list[WorkUnit], workers: int, initargs: tuple[Any, ...], commit: Callable[[UnitOutcome], None]
) -> None:
    """Evaluate ``units`` in ``workers`` spawned processes, committing each outcome as it arrives.
    _PoolBrokenError (naming the dead worker and its unit, see :func:`_dead_workers`) when one dies."""
    context = multiprocessing.get_context("spawn")
    started: SimpleQueue[tuple[int, str]] = context.SimpleQueue()
    computing: dict[int, str] = {}
    committed: set[str] = set()
    processes: dict[int, BaseProcess] = {}
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(*initargs, started))
    with pool:
        futures: set[Future[UnitOutcome]] = set()
        queue = list(units)
        try:
            # At most two queued units per worker, so an interruption loses little finished work.
            while queue or futures:
                while queue and len(futures) < 2 * workers:
                    futures.add(pool.submit(_evaluate_in_worker, queue.pop(0)))
                finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                _drain(started, computing)  # every completion, so the pipe never fills
                for future in finished:
                    outcome = future.result()
                    commit(outcome)
                    committed.add(outcome.group_id)
        except BrokenProcessPool:
            # The pool's own PID -> process map (private: concurrent.futures does not say which worker died).
            processes = dict(pool._processes)  # type: ignore[attr-defined]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    if processes:  # the pool is shut down: every worker has ended and has its exit code
        _drain(started, computing)
        raise _PoolBrokenError(_dead_workers(processes, computing, committed))


def _drain(started: SimpleQueue[tuple[int, str]], computing: dict[int, str]) -> None:
    """Read the units the workers said they started into ``computing`` (PID -> the latest unit's label)."""
    while not started.empty():
        pid, label = started.get()
        computing[pid] = label


def _dead_workers(processes: dict[int, BaseProcess], computing: dict[int, str], committed: set[str]) -> str:
    """Which worker died, how (signal or exit status), and the unit it was computing.

    When one worker dies the pool terminates the others (SIGTERM), so the dead are those that ended
    otherwise, or, when every worker ended by SIGTERM, all of them."""

    def doing(pid: int) -> str:
        if pid not in computing:
            return "before its first unit"
        return "between units" if computing[pid] in committed else f"while computing {computing[pid]}"

    ended = {pid: p.exitcode for pid, p in processes.items() if p.exitcode is not None}
    dead = {pid: code for pid, code in ended.items() if code != -signal.SIGTERM} or ended
    return "; ".join(
        f"worker process {pid} died ({_exit_text(code)}) {doing(pid)}" for pid, code in sorted(dead.items())
    )


def _exit_text(code: int) -> str:
    """A process exit code as words: ``killed by SIGKILL``, ``exit status 1``."""
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold the lock of ``run_dir`` (:data:`ovman_eval.results.LOCK`) for the ``with`` block.

    An advisory ``fcntl.flock`` on the lock file, which then holds this process's PID; the kernel
    releases it when the process ends, however it ends, so a killed run leaves no stale lock.
    BenchmarkError at once (naming the holder's PID) when another process holds it, or when
    ``run_dir`` is a non-empty directory of something else."""
    _refuse_foreign(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    with open(path, "a+", encoding="utf-8") as stream:
        try:
            fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            stream.seek(0)
            holder = stream.read().strip()
            by = f" (PID {holder})" if holder.isdigit() else ""
            raise BenchmarkError(
                f"{run_dir}: another benchmark{by} is running in this run directory (it holds {path}); "
                "wait for it to finish or stop it, then run this command again"
            ) from None
        stream.truncate(0)
        stream.write(f"{os.getpid()}\n")
        stream.flush()
        try:
            yield
        finally:
            stream.truncate(0)  # a released lock names nobody


def _refuse_foreign(run_dir: Path) -> None:
    """BenchmarkError when ``run_dir`` holds files but no run (a directory of something else)."""
    if not (run_dir / RUN_FILE).is_file() and run_dir.is_dir() and any(p.name != LOCK for p in run_dir.iterdir()):
        raise BenchmarkError(f"{run_dir}: not empty and holds no {RUN_FILE}; choose a new run directory")


@dataclasses.dataclass
class _Previous:
    """What a run directory held: its intact records and sketches, its timings, and the damaged
    lines skipped (their results are computed again)."""

    records: list[ResultRecord]
    sketches: dict[str, EpisodeSketch]
    timings: dict[str, float]
    wall_s: float
    damaged: tuple[DamagedLine, ...]


def _generation_summary(dataset: Path) -> dict[str, Any] | None:
    """What the report needs of the dataset's generation (its request, counts, rejections per
    relation and reason, shortfall), or None when the dataset has no readable manifest."""
    try:
        manifest = read_manifest(dataset)
    except DatasetError:
        return None
    keys = ("request", "counts", "rejections", "shortfall")
    return {k: manifest[k] for k in keys} if all(k in manifest for k in keys) else None


def _open_run_dir(run_dir: Path, identity: dict[str, Any]) -> _Previous:
    """Create the run directory, or check and load the run in it: an unfinished run from its partial
    files; a finished run given again from its final files, which then become the partial ones it
    is refinished from (the finish marker goes only once they are read). Damaged lines are skipped
    and returned (:attr:`_Previous.damaged`), never fatal."""
    run_file = run_dir / RUN_FILE
    finished = False
    if run_file.is_file():
        try:
            stored = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise BenchmarkError(f"{run_file}: unreadable ({err}); choose another run directory") from err
        if stored.get("identity") != identity:
            differences = sorted(k for k in identity if stored.get("identity", {}).get(k) != identity[k])
            raise BenchmarkError(
                f"{run_dir}: holds a different run (differs in {', '.join(differences) or 'format'}); "
                "resume it with the same dataset, arms, seeds, configuration and code, or choose another directory"
            )
        finished = (run_dir / FINISHED).exists()
    else:
        _refuse_foreign(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        document = {
            "identity": identity,
            "started_utc": _stamp(),
            "generation": _generation_summary(Path(identity["request"]["dataset"])),
        }
        atomic_write_text(run_file, json.dumps(document, sort_keys=True, indent=1) + "\n")
    files = ((RESULTS, PARTIAL_RESULTS), (SKETCHES, PARTIAL_SKETCHES))
    results_file, sketches_file = (final if finished else partial for final, partial in files)
    records, damaged = read_checked_lines(run_dir / results_file, record_from_dict, partial=not finished)
    sketches, damaged_sketches = read_checked_lines(run_dir / sketches_file, sketch_from_dict, partial=not finished)
    if finished:
        for final, partial in files:
            if (run_dir / final).is_file():
                os.replace(run_dir / final, run_dir / partial)
        (run_dir / FINISHED).unlink()
    timings: dict[str, float] = {}
    wall = 0.0
    if (run_dir / TIMINGS).is_file():
        try:
            stored_timings = json.loads((run_dir / TIMINGS).read_text(encoding="utf-8"))
            timings = {k: float(v) for k, v in stored_timings.get("work", {}).items()}
            wall = float(stored_timings.get("wall_s", 0.0))
        except (OSError, json.JSONDecodeError, ValueError, AttributeError):
            timings, wall = {}, 0.0
    unique: dict[tuple[str, str, int, str], ResultRecord] = {}
    for record in records:
        unique.setdefault(record.key, record)
    return _Previous(
        list(unique.values()), {s.group_id: s for s in sketches}, timings, wall, (*damaged, *damaged_sketches)
    )


def _plan_units(
    records: Sequence[EpisodeRecord],
    request: BenchmarkRequest,
    seen: set[tuple[str, str, int, str]],
    sketched: set[str],
) -> list[WorkUnit]:
    """The work still to do: per group, the recordings as they are (and the group's sketch), then
    each stress condition of the request; ``seen`` holds the keys of the records already written."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        groups.setdefault(record.group_id, []).append(record)
    units = []
    for group_id, members in groups.items():
        for condition in (None, *request.conditions):
            pending = tuple(
                (r.episode_id, arm.value, seed)
                for r in members
                for arm in request.arms
                for seed in request.seeds
                if (r.episode_id, arm.value, seed, r.scene.condition if condition is None else condition) not in seen
            )
            need_sketch = condition is None and group_id not in sketched
            if pending or need_sketch:
                episodes = tuple(r.episode_id for r in members)
                units.append(WorkUnit(group_id, episodes, pending, need_sketch, condition))
    return units


def _expected_keys(records: Sequence[EpisodeRecord], request: BenchmarkRequest) -> set[tuple[str, str, int, str]]:
    """The keys of every record a finished run holds."""
    return {
        (r.episode_id, a.value, s, c)
        for r in records
        for c in (r.scene.condition, *request.conditions)
        for a in request.arms
        for s in request.seeds
    }


def _write_timings(run_dir: Path, timings: dict[str, float], wall: float, complete: bool, workers: int = 0) -> None:
    document = {
        "complete": complete,
        "wall_s": round(wall, 3),
        "work": {k: round(v, 3) for k, v in timings.items()},
    }
    if workers:
        document["workers"] = workers
    atomic_write_text(run_dir / TIMINGS, json.dumps(document, sort_keys=True, indent=1) + "\n")


def _finish(
    run_dir: Path,
    request: BenchmarkRequest,
    records: Sequence[EpisodeRecord],
    episode_order: dict[str, int],
    timings: dict[str, float],
    wall: float,
    workers: int,
) -> RunSummary:
    """Sort the partial files into the final ones, check completeness, write the marker. Damaged
    lines are skipped (:func:`_open_run_dir` reported those it found; their results were computed again)."""
    results: dict[tuple[str, str, int, str], ResultRecord] = {}
    for record in read_checked_lines(run_dir / PARTIAL_RESULTS, record_from_dict, partial=True)[0]:
        results.setdefault(record.key, record)
    expected = _expected_keys(records, request)
    missing = sorted(expected - set(results))
    if missing:
        raise BenchmarkError(f"{run_dir}: {len(missing)} results missing after the run (first {missing[0]}); rerun")
    ordered = sorted((results[k] for k in expected), key=lambda r: sort_key(r, episode_order, ARM_ORDER))
    sketches: dict[str, EpisodeSketch] = {}
    for sketch in read_checked_lines(run_dir / PARTIAL_SKETCHES, sketch_from_dict, partial=True)[0]:
        sketches.setdefault(sketch.group_id, sketch)
    group_order = list(dict.fromkeys(r.group_id for r in records))
    atomic_write_text(run_dir / RESULTS, "".join(to_json_line(r) + "\n" for r in ordered))
    atomic_write_text(
        run_dir / SKETCHES, "".join(to_json_line(sketches[g]) + "\n" for g in group_order if g in sketches)
    )
    _write_timings(run_dir, timings, wall, complete=True, workers=workers)
    atomic_write_text(
        run_dir / FINISHED,
        json.dumps({"finished_utc": _stamp(), "results": len(ordered), "wall_s": round(wall, 3)}, sort_keys=True)
        + "\n",
    )
    for name in (PARTIAL_RESULTS, PARTIAL_SKETCHES):
        (run_dir / name).unlink(missing_ok=True)
    return RunSummary(run_dir, ordered, dict(timings))


def evaluate_episode(
    dataset: Path,
    episode_id: str,
    config: OvmanConfig,
    arms: Sequence[Arm] = tuple(Arm),
    seed: int = 0,
    *,
    static_only: bool = False,
    cache_dir: Path | None = None,
    world_factory: WorldFactory = make_world,
) -> tuple[list[ResultRecord], EpisodeSketch]:
    """One episode's records (every arm in ``arms``, one seed) and its sketch, without a run directory
    (``ovman show``)."""
    records = read_episodes(dataset)
    by_id = {r.episode_id: r for r in records}
    if episode_id not in by_id:
        known = ", ".join(sorted(by_id)[:8])
        raise BenchmarkError(f"{dataset}: no episode {episode_id!r} (episodes include {known})")
    record = by_id[episode_id]
    evaluator = GroupEvaluator(
        config, dataset, records, MapCache(cache_dir), dataset_hash(dataset), world_factory, static_only=static_only
    )
    try:
        unit = WorkUnit(record.group_id, (episode_id,), tuple((episode_id, a.value, seed) for a in arms), True)
        outcome = evaluator.evaluate(unit)
    finally:
        evaluator.close()
    assert outcome.sketch is not None
    return outcome.records, outcome.sketch


__all__ = [
    "ARM_ORDER",
    "BenchmarkError",
    "BenchmarkRequest",
    "EpisodeSetupError",
    "Follow",
    "GroupEvaluator",
    "NavigationPlan",
    "RunProgress",
    "RunSummary",
    "WorkUnit",
    "WorkerDiedError",
    "error_result",
    "evaluate_episode",
    "parse_arms",
    "parse_conditions",
    "pick_seed",
    "run_benchmark",
    "run_dir_lock",
]
