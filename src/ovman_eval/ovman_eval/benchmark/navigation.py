"""An arm's navigation as planned and as scored: the first target, how a moving target is followed,
the embodied result of a run (Eq. 4 at Stop, SPL) or of a run that could not be made.

Shared by the in-process runner and the ROS graph's benchmark. Frames: AI2-THOR world (metres;
floor (x, z)).
"""

from __future__ import annotations

import dataclasses
import enum

from ovman_core.boxes import Vec2
from ovman_core.config import TaskConfig
from ovman_core.grid import Cell, NavGrid
from ovman_core.success import embodied_success, spl
from ovman_core.world_state import WorldState
from ovman_eval.benchmark.request import SETUP_ERROR
from ovman_eval.runs.results import (
    EMBODIED_ERROR,
    EmbodiedResult,
)
from ovman_eval.task.answers import Answer
from ovman_eval.task.episodes import EpisodeRecord
from ovman_eval.task.failures import EpisodeOutcome, Gate, PartitionRadii, classify_failure, other_instance_footprints
from ovman_nav.astar import shortest_success_path_length
from ovman_nav.executor import NavTarget


def answer_of(record: EpisodeRecord) -> Answer:
    """The answer an episode record holds."""
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
    answer = answer_of(record)
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
    :data:`ovman_eval.runs.results.EMBODIED_ERROR` with ``message``, not a success, no stop, SPL 0."""
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


class Follow(enum.Enum):
    """How a moving target is re-estimated while the agent navigates."""

    NONE = "none"
    TRUTH = "truth"
    """The oracle arms: the instance's ground-truth position."""
    SIGHTINGS = "sightings"
    """The map arms: the agent's own sightings of the label (:class:`ovman_eval.benchmark.tracking.LabelTracker`)."""


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
