"""Episode generation and certification: Algorithm 1 of TASK.md §4, one slot at a time.

A run's plan is a list of slots (``per_relation`` per relation, spread over the home scenes); a slot
draws candidates until one is certified and emitted or ``generation.max_attempts_per_episode`` were
rejected. A candidate's draws depend only on its slot and attempt, so a run is deterministic, can be
split over workers and resumes slot by slot. Frames: AI2-THOR world (metres; floor (x, z)).

Why one module: it is one class, :class:`EpisodeGenerator`, whose methods are Algorithm 1's steps,
sharing the candidate under construction and the live world (the plan is :mod:`ovman_eval.generation.plan`).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Vec2, Vec3, floor_distance
from ovman_core.config import OvmanConfig
from ovman_core.grid import GridError, grid_from_reachable
from ovman_core.relations import Relation
from ovman_core.success import embodied_success
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_eval.generation.plan import (
    ANSWER_UNREACHABLE,
    BELOW_MIN_DISPLACEMENT,
    CANNOT_ADD,
    CHANGE_FAILED,
    DRIFT,
    MOVER_FAILED,
    NO_CATEGORY,
    NO_PLACEMENT,
    NO_START_POSE,
    NO_UNIQUE_ANSWER,
    NOT_MOVABLE,
    ORACLE_CERTIFICATION,
    ORACLE_FEASIBILITY,
    SPLIT_CODES,
    TIMING_KEYS,
    CandidateRejectedError,
    GenerationRequest,
    Slot,
    SlotOutcome,
)
from ovman_eval.task.admissibility import separation_violations
from ovman_eval.task.answers import Answer, NoAnswerError, compute_answer
from ovman_eval.task.episodes import (
    FORMAT_VERSION,
    AnswerRecord,
    Certification,
    ChangeRecord,
    DriftCheck,
    EpisodeRecord,
    InstanceIds,
    OracleRun,
    QueryRecord,
    Recordings,
    SceneSpec,
    SeedRecord,
)
from ovman_nav.astar import plan_to_region
from ovman_nav.executor import NavError, NavSettings, NavTarget, navigate
from ovman_query.surface_forms import PHRASINGS, phrase, surface_names
from ovman_sim.recording import VisitInfo, VisitWriter
from ovman_sim.tours import tour_observations
from ovman_sim.world import AddObject, Change, Condition, MoveObject, RemoveObject, StopProbe, World

# The change kinds, and the relations each kind defines a query for.
MOVE, REMOVE, ADD, MOVING = "move", "remove", "add", "moving"
_KIND_QUERIES: dict[str, tuple[Relation, ...]] = {
    MOVE: (Relation.MOVED, Relation.FORMER),
    REMOVE: (Relation.REMOVED,),
    ADD: (Relation.APPEARED,),
    MOVING: (Relation.MOVING,),
}
_PRIMARY_KIND: dict[Relation, str | None] = {
    Relation.MOVED: MOVE,
    Relation.FORMER: MOVE,
    Relation.REMOVED: REMOVE,
    Relation.APPEARED: ADD,
    Relation.MOVING: MOVING,
    Relation.STABLE: None,
}
_APPLY_ORDER = (REMOVE, MOVE, ADD, MOVING)
"""Order in which a candidate's changes are applied (the mover starts last, at visit 2)."""

# ---- candidates ----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Candidate:
    """A sampled candidate: the category, its changes in application order, the mover (instance,
    seed) and the queries, the slot's own relation first."""

    category: str
    kinds: dict[str, str]  # instance id -> change kind
    changes: list[Change]
    mover: tuple[str, int] | None
    queries: list[Relation]


@dataclasses.dataclass
class _Query:
    """One query of a candidate while it is checked."""

    relation: Relation
    answer: Answer | None = None
    runs: list[OracleRun] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _Visit:
    """The ground truth of a recorded (or dry-run) visit: the objects at every frame."""

    states: list[WorldState]

    @property
    def first(self) -> WorldState:
        return self.states[0]

    @property
    def last(self) -> WorldState:
        return self.states[-1]


class _Unrendered:
    """A world whose ``observe`` renders nothing: the visit-2 tour run only to learn the mover's path."""

    def __init__(self, world: World) -> None:
        self._world = world

    def observe(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


class _OracleProbe(StopProbe):
    """A :class:`ovman_sim.world.StopProbe` that also keeps the carried instance's states after
    every step."""

    def __init__(self, world: World, carried: str | None) -> None:
        super().__init__(world)
        self.carried = carried
        self.path: list[ObjectState] = []
        if carried is not None:
            self.path.append(world.objects()[carried])

    def step(self, action: Action) -> ActionResult:
        result = super().step(action)
        if self.carried is not None:
            self.path.append(self.world.objects()[self.carried])
        return result


def _derive_seed(*keys: int) -> int:
    """A 31-bit seed from integer keys (numpy SeedSequence: stable across platforms and runs)."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0] >> 1)


def _drift(a: WorldState, b: WorldState, exclude: str | None) -> float:
    """Largest 3-D box-centre distance between two states (m); infinite when the instance sets differ."""
    ids_a = {i for i in a.objects if i != exclude}
    ids_b = {i for i in b.objects if i != exclude}
    if ids_a != ids_b:
        return math.inf
    return max((math.dist(a[i].position, b[i].position) for i in ids_a), default=0.0)


def _visit_drift(visit: _Visit, exclude: str | None) -> float:
    return max((_drift(visit.first, state, exclude) for state in visit.states[1:]), default=0.0)


def _placed(template: ObjectState, centre: Vec3) -> ObjectState:
    delta = tuple(c - b for c, b in zip(centre, template.box.center, strict=True))
    box = template.box.translated(delta)  # type: ignore[arg-type]
    return dataclasses.replace(template, position=box.center, box=box)


# ---- the generator -------------------------------------------------------------------------------


class EpisodeGenerator:
    """Fills slots on one world (not thread-safe: one slot at a time)."""

    def __init__(self, world: World, config: OvmanConfig, request: GenerationRequest) -> None:
        self.world = world
        self.config = config
        self.request = request
        self.task = config.task
        self.params = config.benchmark_node.generation
        self.nav = NavSettings.from_config(config)
        self._check_params()
        self.timings: dict[str, float] = dict.fromkeys(TIMING_KEYS, 0.0)

    def _check_params(self) -> None:
        p = self.params
        checks = {
            "generation.max_attempts_per_episode": p.max_attempts_per_episode >= 1,
            "generation.attempts_per_scene": p.attempts_per_scene >= 1,
            "generation.held_out_phrase_fraction": 0.0 <= p.held_out_phrase_fraction <= 1.0,
            "generation.min_start_distance": p.min_start_distance >= 0.0,
            "generation.multi_change_min": 2 <= p.multi_change_min <= p.multi_change_max <= len(_KIND_QUERIES),
            "task.certification_runs": self.task.certification_runs >= 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"config benchmark_node.{key} (or task.*) has an invalid value: {p}")

    # ------------------------------------------------------------------ slots

    def fill_slot(self, slot: Slot, staging: Path) -> SlotOutcome:
        """Draw candidates for ``slot`` until one is emitted or the attempts run out.

        Recordings are written under ``staging`` (created, and emptied of earlier attempts).
        """
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        rejections: dict[str, Counter[str]] = {}
        self.timings = dict.fromkeys(TIMING_KEYS, 0.0)
        began = time.perf_counter()
        scenes = self.request.scenes
        for attempt in range(self.params.max_attempts_per_episode):
            scene = scenes[(slot.scene_index + attempt // self.params.attempts_per_scene) % len(scenes)]
            # Seeded by (run seed, split, relation, slot number, attempt) only: a slot's outcome does not
            # depend on the other slots, so workers and resumes give the same dataset.
            seed = _derive_seed(
                self.request.seed,
                SPLIT_CODES[self.request.split],
                list(Relation).index(slot.relation),
                slot.number,
                attempt,
            )
            folder = staging / f"attempt-{attempt:04d}"
            try:
                episodes, dropped = self._attempt(slot, scene, seed, folder)
            except CandidateRejectedError as rejection:
                rejections.setdefault(slot.relation.value, Counter())[rejection.reason] += 1
                if folder.exists():
                    shutil.rmtree(folder)
                continue
            for relation, reason in dropped:
                rejections.setdefault(relation.value, Counter())[reason] += 1
            return SlotOutcome(slot, episodes, folder, attempt + 1, _plain_counts(rejections), self._split(began))
        attempts = self.params.max_attempts_per_episode
        return SlotOutcome(slot, [], None, attempts, _plain_counts(rejections), self._split(began))

    def _split(self, began: float) -> dict[str, float]:
        """The slot's cost split; everything not rendering, recording or the oracle is sampling."""
        total = time.perf_counter() - began
        timings = dict(self.timings)
        timings["sampling_s"] = max(total - sum(v for k, v in timings.items() if k != "sampling_s"), 0.0)
        return timings

    def _timed(self, key: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[key] += now - since
        return now

    # ------------------------------------------------------------------ one candidate

    def _attempt(
        self, slot: Slot, scene: str, seed: int, folder: Path
    ) -> tuple[list[EpisodeRecord], list[tuple[Relation, str]]]:
        """One candidate; returns the emitted records and the (relation, reason) of queries dropped
        on the way. Raises CandidateRejectedError when the slot's own query fails."""
        rng = np.random.default_rng(seed)
        world = self.world
        # 1. Sample and check, on the live world, without rendering.
        world.reset(scene)
        start0 = world.agent_pose()
        w1 = world.objects()
        candidate = self._sample(slot.relation, w1, rng)
        self._apply(candidate, rng)
        nav_mover = _derive_seed(seed, 1) if candidate.mover else None
        cert_movers = [
            _derive_seed(seed, 2 + k) if candidate.mover else None for k in range(self.task.certification_runs)
        ]
        # The visit-2 tour once without rendering: the mover's path, and how knocked objects settle, so
        # drift rejects a candidate before anything is rendered (the recorded check, 6-7, stays the authority).
        visit2 = _Visit([world.objects(), *self._dry_tour()])
        moving_id = candidate.mover[0] if candidate.mover else None
        settling = _visit_drift(visit2, moving_id)
        if settling > self.task.drift_tolerance:
            raise CandidateRejectedError(
                DRIFT, f"visit2 drift {settling:.3f} m > {self.task.drift_tolerance} m (settling, seen on the dry run)"
            )
        queries = [_Query(r) for r in candidate.queries]
        dropped: list[tuple[Relation, str]] = []
        queries = self._keep(queries, dropped, slot.relation, lambda q: self._check_answer(q, candidate, w1, visit2))
        start = self._start_pose(queries, candidate, visit2, rng)
        queries = self._keep(queries, dropped, slot.relation, lambda q: self._check_reachable(q, start))

        # 2-4. Record visit 1, apply the change, record visit 2.
        world.reset(scene)
        condition_seed = _derive_seed(seed, 0)
        world.set_condition(Condition(self.request.condition), condition_seed)
        visit1 = self._record(folder / "visit1", scene, 1)
        if not world.teleport(start0).success:
            raise RuntimeError(f"{scene}: cannot put the agent back at the scene's start {start0} after visit 1")
        self._apply(candidate)
        visit2 = self._record(folder / "visit2", scene, 2)
        reread = world.objects()
        world.stop_mover()

        # 5. Answers and the anti-shortcut rule on the recorded ground truth.
        queries = self._keep(
            queries, dropped, slot.relation, lambda q: self._check_answer(q, candidate, visit1.first, visit2)
        )
        # 6-7. Drift.
        drift = {
            "visit1": _visit_drift(visit1, None),
            "visit2": _visit_drift(visit2, moving_id),
            "reread": _drift(visit2.last, reread, moving_id),
        }
        self._reset_evaluated(scene, visit2.last, start)
        drift["reset"] = _drift(visit2.last, world.objects(), None)
        worst = max(drift, key=lambda k: drift[k])
        if drift[worst] > self.task.drift_tolerance:
            raise CandidateRejectedError(DRIFT, f"{worst} drift {drift[worst]:.3f} m > {self.task.drift_tolerance} m")
        clock = time.perf_counter()

        # 8-9. Oracle feasibility and certification.
        def certify(query: _Query) -> None:
            seeds = [(nav_mover, "feasibility"), *((s, "certification") for s in cert_movers)]
            for mover_seed, kind in seeds:
                run, carried_path = self._oracle_run(scene, visit2.last, start, query, moving_id, mover_seed, kind)
                query.runs.append(run)
                if not run.success:
                    reason = ORACLE_FEASIBILITY if kind == "feasibility" else ORACLE_CERTIFICATION
                    raise CandidateRejectedError(reason, f"{query.relation.value}: {run.error} after {run.steps} steps")
                self._check_separation(query, visit1.first, visit2, moving_id, carried_path)

        try:
            queries = self._keep(queries, dropped, slot.relation, certify)
        finally:
            self._timed("oracle_s", clock)
        # 10. Emit.
        scene_spec = SceneSpec(self.request.world, scene, self.request.condition, condition_seed)
        changes = self._change_records(candidate, visit1.first, visit2.first)
        group = slot.group_id(self.request.split)
        records = [
            self._record_of(
                slot, group, q, seed, scene_spec, start, changes, candidate, visit1, visit2, drift, nav_mover
            )
            for q in queries
        ]
        return records, dropped

    def _keep(
        self,
        queries: list[_Query],
        dropped: list[tuple[Relation, str]],
        primary: Relation,
        check: Callable[[_Query], None],
    ) -> list[_Query]:
        """The queries passing ``check``; the others are dropped, or the candidate is rejected when
        the slot's own query fails."""
        kept = []
        for query in queries:
            try:
                check(query)
            except CandidateRejectedError as rejection:
                if query.relation is primary:
                    raise
                dropped.append((query.relation, rejection.reason))
                continue
            kept.append(query)
        return kept

    # ------------------------------------------------------------------ sampling

    def _sample(self, relation: Relation, w1: WorldState, rng: np.random.Generator) -> _Candidate:
        """Choose the category, the changed instances and the change kinds (nothing applied yet)."""
        by_category: dict[str, list[str]] = {}
        for obj in w1:
            by_category.setdefault(obj.category, []).append(obj.instance_id)
        for ids in by_category.values():
            ids.sort()
        primary = _PRIMARY_KIND[relation]
        if self.request.multi_change:
            # Several instances of the category change under different kinds; every query they define is
            # certified on its own and emitted as an episode sharing the group's recordings.
            count = int(rng.integers(self.params.multi_change_min, self.params.multi_change_max + 1))
            others = [k for k in _KIND_QUERIES if k != primary]
            drawn = [others[i] for i in rng.permutation(len(others))[: count - (primary is not None)]]
            kinds = sorted([primary, *drawn] if primary is not None else drawn, key=_APPLY_ORDER.index)
        elif relation is Relation.STABLE:
            kinds = []  # decided with the category below
        else:
            kinds = [primary]  # type: ignore[list-item]
        if relation is Relation.STABLE and not self.request.multi_change:
            # One other instance changes: a category of two (move, remove or carry the other) or of
            # one (add a second), so that exactly one instance stays.
            eligible = sorted(c for c, ids in by_category.items() if len(ids) in (1, 2))
            if not eligible:
                raise CandidateRejectedError(NO_CATEGORY, "no category with one or two instances")
            category = eligible[int(rng.integers(len(eligible)))]
            ids = by_category[category]
            kinds = [ADD] if len(ids) == 1 else [(MOVE, REMOVE, MOVING)[int(rng.integers(3))]]
        else:
            existing = sum(k != ADD for k in kinds)
            stays = 1 if relation is Relation.STABLE else 0
            # W1 ∪ W2 must hold two instances: a lone instance only with an added one.
            least = max(existing + stays, 2 - (ADD in kinds))
            eligible = sorted(
                c
                for c, ids in by_category.items()
                if len(ids) >= least and (relation is not Relation.STABLE or len(ids) == existing + stays)
            )
            if not eligible:
                raise CandidateRejectedError(NO_CATEGORY, f"no category with {least} or more instances")
            category = eligible[int(rng.integers(len(eligible)))]
            ids = by_category[category]
        order = [ids[i] for i in rng.permutation(len(ids))]
        assigned: dict[str, str] = {}
        new_count = 0
        for kind in kinds:
            if kind == ADD:
                new_id = f"{category}_new{new_count + 1}"
                while new_id in w1:
                    new_count += 1
                    new_id = f"{category}_new{new_count + 1}"
                new_count += 1
                assigned[new_id] = ADD
            else:
                assigned[order.pop(0)] = kind
        queries = [relation]
        for kind in kinds:
            queries.extend(r for r in _KIND_QUERIES[kind] if r not in queries and self.request.multi_change)
        unchanged = len(ids) - sum(k != ADD for k in kinds)
        if self.request.multi_change and unchanged == 1 and Relation.STABLE not in queries:
            queries.append(Relation.STABLE)
        queries = [queries[0], *sorted(queries[1:], key=list(Relation).index)]
        queries = [q for q in queries if q in self.request.relations]
        return _Candidate(category, assigned, [], None, queries)

    def _apply(self, candidate: _Candidate, rng: np.random.Generator | None = None) -> None:
        """Apply the candidate's changes to the live world, drawing destinations, new instances and
        the mover's seed from ``rng`` the first time and replaying the same changes afterwards
        (``rng`` None); then start its mover."""
        world = self.world
        if rng is None:
            for change in candidate.changes:
                result = world.apply_change(change)
                if not result.success:
                    raise CandidateRejectedError(CHANGE_FAILED, result.message)
            if candidate.mover is not None:
                self._start_mover(*candidate.mover)
            return
        for instance_id, kind in sorted(candidate.kinds.items(), key=lambda kv: (_APPLY_ORDER.index(kv[1]), kv[0])):
            state = world.objects()
            if kind == ADD:
                change = self._draw_addition(candidate.category, instance_id, rng)
            elif kind == REMOVE:
                if not state[instance_id].movable:
                    raise CandidateRejectedError(NOT_MOVABLE, instance_id)
                change = RemoveObject(instance_id)
            elif kind == MOVE:
                change = self._draw_move(state, instance_id, rng)
            else:
                if not state[instance_id].movable:
                    raise CandidateRejectedError(NOT_MOVABLE, instance_id)
                candidate.mover = (instance_id, int(rng.integers(2**31)))
                continue
            result = world.apply_change(change)
            if not result.success:
                raise CandidateRejectedError(CHANGE_FAILED, result.message)
            candidate.changes.append(change)
        if candidate.mover is not None:
            self._start_mover(*candidate.mover)

    def _draw_move(self, state: WorldState, instance_id: str, rng: np.random.Generator) -> MoveObject:
        obj = state[instance_id]
        if not obj.movable:
            raise CandidateRejectedError(NOT_MOVABLE, instance_id)
        placements = self.world.candidate_placements(instance_id)
        if not placements:
            raise CandidateRejectedError(NO_PLACEMENT, instance_id)
        destination = placements[int(rng.integers(len(placements)))]
        d = floor_distance(obj.position, destination)
        if d < self.task.min_displacement:
            raise CandidateRejectedError(BELOW_MIN_DISPLACEMENT, f"{instance_id}: {d:.2f} m")
        return MoveObject(instance_id, destination)

    def _draw_addition(self, category: str, instance_id: str, rng: np.random.Generator) -> AddObject:
        template = self.world.new_instance(category, instance_id)
        if template is None:
            raise CandidateRejectedError(CANNOT_ADD, category)
        placements = self.world.candidate_placements(instance_id)
        if not placements:
            raise CandidateRejectedError(NO_PLACEMENT, instance_id)
        return AddObject(_placed(template, placements[int(rng.integers(len(placements)))]))

    def _start_mover(self, instance_id: str, seed: int) -> None:
        try:
            self.world.start_mover(instance_id, seed)
        except ValueError as err:
            raise CandidateRejectedError(MOVER_FAILED, str(err)) from None

    def _reset_evaluated(self, scene: str, evaluated: WorldState, start: AgentPose) -> None:
        """Reset the world to the evaluated world (the end of visit 2) with the agent at ``start``."""
        try:
            self.world.reset(scene, evaluated, start)
        except ValueError as err:  # the simulator refuses the object set or the start pose
            raise CandidateRejectedError(ORACLE_FEASIBILITY, f"cannot reset the evaluated world: {err}") from None

    def _dry_tour(self) -> list[WorldState]:
        """The visit-2 tour without rendering: the objects at every frame after the first."""
        sim = self.config.sim_node
        return [self.world.objects() for _ in tour_observations(_Unrendered(self.world), sim.tour, sim.world)]

    # ------------------------------------------------------------------ checks

    def _check_answer(self, query: _Query, candidate: _Candidate, w1: WorldState, visit2: _Visit) -> None:
        """§1 (a unique answer) and §2 (anti-shortcut) on ``w1`` and the visit-2 states."""
        moving_id = candidate.mover[0] if candidate.mover else None
        try:
            query.answer = compute_answer(
                w1, visit2.first, candidate.category, query.relation, self.task, moving_id, visit2.last
            )
        except NoAnswerError as err:
            raise CandidateRejectedError(NO_UNIQUE_ANSWER, str(err)) from None
        carried = [state[moving_id] for state in visit2.states] if moving_id else []
        self._check_separation(query, w1, visit2, moving_id, carried)

    def _check_separation(
        self, query: _Query, w1: WorldState, visit2: _Visit, moving_id: str | None, carried: Sequence[ObjectState]
    ) -> None:
        """The anti-shortcut rule against every footprint the carried instance takes in ``carried``
        (its answer regions when it is the answer, distractor positions when it is another
        instance of the category)."""
        assert query.answer is not None
        problems = separation_violations(w1, visit2.first, query.answer, self.task, moving_id, carried)
        if problems:
            raise CandidateRejectedError(problems[0].split(":", 1)[0], "; ".join(dict.fromkeys(problems)))

    def _start_pose(
        self, queries: list[_Query], candidate: _Candidate, visit2: _Visit, rng: np.random.Generator
    ) -> AgentPose:
        """A reachable pose of the evaluated world at least ``min_start_distance`` from every
        answer region (and from the carried instance), with a random heading."""
        regions = [q.answer.region for q in queries if q.answer is not None]
        if candidate.mover is not None:
            regions.append(visit2.last[candidate.mover[0]].box.footprint)
        cells = [
            c
            for c in self.world.reachable_positions()
            if all(r.distance_to(c) >= self.params.min_start_distance for r in regions)
        ]
        if not cells:
            raise CandidateRejectedError(
                NO_START_POSE, f"no reachable position {self.params.min_start_distance} m from the answers"
            )
        x, z = cells[int(rng.integers(len(cells)))]
        turns = round(360.0 / self.config.sim_node.world.rotate_step_deg)
        yaw = float(int(rng.integers(turns)) * self.config.sim_node.world.rotate_step_deg)
        return AgentPose(float(x), float(z), yaw, 0.0)

    def _check_reachable(self, query: _Query, start: AgentPose) -> None:
        """A success position of the answer region is reachable from ``start`` on the post-change grid."""
        assert query.answer is not None
        try:
            grid = grid_from_reachable(self.world.reachable_positions(), self.nav.resolution)
            plan = plan_to_region(grid, grid.cell_of(start.floor), query.answer.region, self.task.success_radius)
        except GridError as err:
            raise CandidateRejectedError(ANSWER_UNREACHABLE, str(err)) from None
        if not plan.reachable:
            raise CandidateRejectedError(ANSWER_UNREACHABLE, f"{query.relation.value}: no reachable position within R")

    # ------------------------------------------------------------------ recording and the oracle

    def _record(self, path: Path, scene: str, visit: int) -> _Visit:
        """Record the coverage tour of the live world at ``path``; returns the objects per frame."""
        sim = self.config.sim_node
        info = VisitInfo(scene, visit, sim.node.step_dt, self.config.frames)
        states: list[WorldState] = []
        writer = VisitWriter(path, info)
        tour = tour_observations(self.world, sim.tour, sim.world)
        try:
            clock = time.perf_counter()
            for observation in tour:
                clock = self._timed("render_s", clock)
                objects = self.world.objects()
                writer.write(observation, objects)
                states.append(objects)
                clock = self._timed("recording_s", clock)
            writer.close()
            self._timed("recording_s", clock)
        except BaseException:
            writer.abort()
            raise
        return _Visit(states)

    def _oracle_run(
        self,
        scene: str,
        evaluated: WorldState,
        start: AgentPose,
        query: _Query,
        moving_id: str | None,
        mover_seed: int | None,
        kind: str,
    ) -> tuple[OracleRun, list[ObjectState]]:
        """One oracle run from a fresh reset of the evaluated world; also the carried instance's states."""
        answer = query.answer
        assert answer is not None
        world = self.world
        self._reset_evaluated(scene, evaluated, start)
        if moving_id is not None:
            assert mover_seed is not None
            self._start_mover(moving_id, mover_seed)
        probe = _OracleProbe(world, moving_id)
        follows = moving_id is not None and answer.instance_id == moving_id

        def truth() -> NavTarget:
            obj = world.objects()[answer.instance_id]
            return NavTarget(obj.floor, obj.box.footprint)

        target = truth() if follows else NavTarget(answer.point, answer.region)
        result = navigate(
            probe,
            target,
            self.nav,
            target_may_move=moving_id is not None,
            target_updates=truth if follows else None,
        )
        world.stop_mover()
        stop: Vec2 | None = None
        distance: float | None = None
        success = False
        if result.error is NavError.NONE and result.final_pose is not None and probe.at_stop is not None:
            stop = result.final_pose.floor
            region = probe.at_stop[answer.instance_id].box.footprint if follows else answer.region
            distance = region.distance_to(stop)
            success = embodied_success(stop, region, self.task.success_radius)
        path = tuple(_dedupe([s.floor for s in probe.path]))
        run = OracleRun(
            kind=kind,
            mover_seed=mover_seed,
            success=success,
            error=result.error.name,
            steps=result.steps,
            path_length=result.path_length,
            shortest_path_length=result.shortest_path_length,
            stop=stop,
            stop_distance=distance,
            target_path=path,
        )
        return run, probe.path

    # ------------------------------------------------------------------ records

    def _change_records(self, candidate: _Candidate, w1: WorldState, w2: WorldState) -> tuple[ChangeRecord, ...]:
        records = []
        for instance_id, kind in sorted(candidate.kinds.items(), key=lambda kv: (_APPLY_ORDER.index(kv[1]), kv[0])):
            before = w1.objects.get(instance_id)
            after = w2.objects.get(instance_id)
            size = (before or after).box.size  # type: ignore[union-attr]
            records.append(
                ChangeRecord(
                    kind=kind,
                    instance_id=instance_id,
                    category=candidate.category,
                    before=before.position if before else None,
                    after=after.position if after else None,
                    size=size,
                    mover_seed=candidate.mover[1] if kind == MOVING and candidate.mover else None,
                )
            )
        return tuple(records)

    def _record_of(
        self,
        slot: Slot,
        group: str,
        query: _Query,
        seed: int,
        scene: SceneSpec,
        start: AgentPose,
        changes: tuple[ChangeRecord, ...],
        candidate: _Candidate,
        visit1: _Visit,
        visit2: _Visit,
        drift: dict[str, float],
        nav_mover: int | None,
    ) -> EpisodeRecord:
        answer = query.answer
        assert answer is not None
        category = candidate.category
        rng = np.random.default_rng(_derive_seed(seed, 100 + list(Relation).index(query.relation)))
        names = surface_names(category)
        noun = names[int(rng.integers(len(names)))]
        split = "held_out" if float(rng.random()) < self.params.held_out_phrase_fraction else "train"
        forms = PHRASINGS[query.relation]
        templates = forms.held_out if split == "held_out" else forms.train
        template = templates[int(rng.integers(len(templates)))]
        episode_id = group if self.request.split == "single" else f"{group}-{query.relation.value}"
        return EpisodeRecord(
            format_version=FORMAT_VERSION,
            episode_id=episode_id,
            split=self.request.split,
            group_id=group,
            scene=scene,
            start_pose=start,
            changes=changes,
            query=QueryRecord(category, query.relation, noun, template, phrase(template, noun), split),
            answer=AnswerRecord(answer.instance_id, answer.point, answer.region, answer.vacated),
            instances=InstanceIds(
                tuple(o.instance_id for o in visit1.first.of_category(category)),
                tuple(o.instance_id for o in visit2.first.of_category(category)),
            ),
            seeds=SeedRecord(seed, nav_mover),
            certification=Certification(self.task.success_radius, tuple(query.runs)),
            recordings=Recordings(
                f"recordings/{group}/visit1", f"recordings/{group}/visit2", len(visit1.states), len(visit2.states)
            ),
            drift=DriftCheck(
                self.task.drift_tolerance, drift["visit1"], drift["visit2"], drift["reread"], drift["reset"]
            ),
        )


def _dedupe(points: Sequence[Vec2]) -> list[Vec2]:
    """Consecutive repeats removed."""
    out: list[Vec2] = []
    for p in points:
        if not out or out[-1] != p:
            out.append(p)
    return out


def _plain_counts(counts: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {relation: dict(sorted(c.items())) for relation, c in sorted(counts.items())}


__all__ = ["EpisodeGenerator"]
