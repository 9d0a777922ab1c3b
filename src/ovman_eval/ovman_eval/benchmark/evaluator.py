"""The evaluation of one recorded group: maps, predictions, static and embodied results, sketch (TASK.md §3, §6).

:class:`GroupEvaluator` is the in-process runner's worker (units of
:class:`ovman_eval.benchmark.request.WorkUnit`); benchmark_node uses its pieces around the graph's
nodes. Frames: AI2-THOR world (metres; floor (x, z)).

Why one module: it is one class whose methods are the steps of a group's evaluation, called by the
in-process runner and, one by one around the graph's nodes, by benchmark_node.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import OvmanConfig, SimConfig
from ovman_core.grid import GridError, grid_from_reachable
from ovman_core.relations import Relation
from ovman_core.success import static_success
from ovman_core.world_state import WorldState
from ovman_eval.benchmark.condition_frames import (
    ConditionSensor,
    StressCondition,
    recording_sim_config,
    render_fingerprint,
    stress_condition,
)
from ovman_eval.benchmark.map_cache import (
    SIMULATOR,
    UNAVAILABLE,
    CacheKeys,
    MapCache,
    PhraseByPhraseEncoder,
    build_group_maps,
)
from ovman_eval.benchmark.map_entry import GroupMaps
from ovman_eval.benchmark.navigation import (
    Follow,
    NavigationPlan,
    NavigationRecord,
    answer_of,
    error_result,
    score_navigation,
)
from ovman_eval.benchmark.request import (
    ABSTAINED_ERROR,
    MAP_ARMS,
    TIMING_KEYS,
    VISIT2_ARMS,
    EpisodeSetupError,
    UnitOutcome,
    WorkUnit,
    WorldFactory,
    configured_for,
    pick_seed,
    segmented_by,
)
from ovman_eval.benchmark.tracking import LabelTracker
from ovman_eval.runs.results import (
    FORMAT_VERSION,
    EmbodiedResult,
    EpisodeSketch,
    ResultRecord,
    SketchInstance,
    SketchPair,
    StaticResult,
)
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_eval.task.episodes import EpisodeRecord
from ovman_eval.task.failures import EpisodeOutcome, Gate, PartitionRadii, classify_failure, other_instance_footprints
from ovman_mapping.instances import InstanceMap
from ovman_mapping.segmenter import Segmenter, make_segmenter, with_segmenter
from ovman_nav.executor import NavError, NavSettings, NavTarget, navigate
from ovman_query import arms as arm_functions
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.arms import Arm
from ovman_query.association import Association
from ovman_query.decisions import Prediction
from ovman_sim.session import make_world
from ovman_sim.world import Condition, StopProbe, World


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


def _footprint(box_footprint: Any) -> tuple[float, float, float, float]:
    return (box_footprint.x_min, box_footprint.z_min, box_footprint.x_max, box_footprint.z_max)


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
        (:func:`ovman_eval.benchmark.condition_frames.recording_sim_config`)."""
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
        reading of the recordings (:func:`ovman_eval.benchmark.map_cache.build_group_maps`)."""
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

    def given_simulator_maps(self, records: Sequence[EpisodeRecord], entry: GroupMaps) -> None:
        """The maps of the simulator's segments of ``records``' group, built elsewhere (the graph's
        sim_perception mapping_node): what :meth:`arm_maps` gives sim_perception for that group."""
        self._simulator_maps = ((records[0].group_id, None), entry)

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
        if arm in (Arm.ORACLE_GROUNDING, Arm.MAINTAINED_MAP):
            if set(maps.shares) != {1, 2}:
                raise BenchmarkError(f"group {maps.group_id}: {arm.value} needs the true categories of both maps")
            read = arm_functions.oracle_grounding if arm is Arm.ORACLE_GROUNDING else arm_functions.maintained_map
            return read(agent, maps.map1, maps.map2, query, maps.shares[1], maps.shares[2])
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
        answer = answer_of(record)
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
        """The arm's navigation from the episode's start, scored; an error result
        (:func:`ovman_eval.benchmark.navigation.error_result`) when the evaluated world cannot be set
        up or its grid does not hold the start."""
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
            probe = StopProbe(world)
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
