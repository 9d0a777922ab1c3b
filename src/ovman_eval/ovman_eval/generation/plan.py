"""What a generation run is asked for and how it is planned: the request, its slots, a slot's
outcome, and every reason a candidate is rejected (TASK.md §4).

A run's plan is a list of slots (:func:`plan_slots`); :mod:`ovman_eval.generation.generator`
fills one slot at a time and :mod:`ovman_eval.generation.dataset` commits each outcome.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from ovman_core.relations import Relation
from ovman_eval.task.episodes import (
    EpisodeRecord,
)
from ovman_sim.homes import is_perception_scene
from ovman_sim.world import Condition

# ---- rejection reasons (in pipeline order) -------------------------------------------------------

NO_CATEGORY = "no_category"
"""The scene has no category with enough instances for the relation."""
NOT_MOVABLE = "not_movable"
NO_PLACEMENT = "no_placement"
"""The world offers no valid resting place (floor or furniture top) for the instance."""
BELOW_MIN_DISPLACEMENT = "below_min_displacement"
CANNOT_ADD = "cannot_add"
"""The world cannot make a new instance of the category."""
CHANGE_FAILED = "change_failed"
MOVER_FAILED = "mover_failed"
NO_UNIQUE_ANSWER = "no_unique_answer"
TOO_FEW_INSTANCES = "too_few_instances"
DISTRACTOR_NEAR_ANSWER = "distractor_near_answer"
NO_START_POSE = "no_start_pose"
ANSWER_UNREACHABLE = "answer_unreachable"
DRIFT = "drift"
ORACLE_FEASIBILITY = "oracle_feasibility"
ORACLE_CERTIFICATION = "oracle_certification"

REASONS: tuple[str, ...] = (
    NO_CATEGORY,
    NOT_MOVABLE,
    NO_PLACEMENT,
    BELOW_MIN_DISPLACEMENT,
    CANNOT_ADD,
    CHANGE_FAILED,
    MOVER_FAILED,
    NO_UNIQUE_ANSWER,
    TOO_FEW_INSTANCES,
    DISTRACTOR_NEAR_ANSWER,
    NO_START_POSE,
    ANSWER_UNREACHABLE,
    DRIFT,
    ORACLE_FEASIBILITY,
    ORACLE_CERTIFICATION,
)
"""Every rejection reason, in the order the pipeline checks them."""

SPLIT_CODES = {"single": 0, "multi_change": 1}
TIMING_KEYS = ("sampling_s", "render_s", "recording_s", "oracle_s")
"""Cost split of a slot (seconds): drawing and checking candidates (resets, changes, the
unrendered mover tour), rendering the tours, writing the recordings, the oracle runs."""


class CandidateRejectedError(Exception):
    """A candidate (or one query of it) failed a check; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# ---- the run's plan ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """What to generate: ``per_relation`` episodes of each relation in ``scenes`` of ``world``,
    from ``seed``; the multi-change split when ``multi_change``; recorded under ``condition``."""

    world: str
    scenes: tuple[str, ...]
    per_relation: int
    seed: int
    multi_change: bool = False
    condition: str = "baseline"
    relations: tuple[Relation, ...] = tuple(Relation)

    def __post_init__(self) -> None:
        if not self.scenes:
            raise ValueError("generation needs at least one scene")
        if len(set(self.scenes)) != len(self.scenes):
            raise ValueError(f"scenes are listed twice: {', '.join(self.scenes)}")
        held_back = [s for s in self.scenes if is_perception_scene(s)]
        if held_back:
            raise ValueError(
                f"scene {held_back[0]!r} is a perception home (ovman train-perception's own namespace); "
                "episodes use embedded-<seed> scenes"
            )
        if self.per_relation < 1:
            raise ValueError(f"--per-relation must be at least 1, got {self.per_relation}")
        if self.seed < 0:
            raise ValueError(f"--seed must be a non-negative integer, got {self.seed}")
        if not self.relations or len(set(self.relations)) != len(self.relations):
            raise ValueError("relations must be a non-empty list without repeats")
        try:
            Condition(self.condition)
        except ValueError:
            valid = ", ".join(c.value for c in Condition)
            raise ValueError(f"unknown condition {self.condition!r}; expected one of {valid}") from None

    @property
    def split(self) -> str:
        return "multi_change" if self.multi_change else "single"

    def to_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "scenes": list(self.scenes),
            "per_relation": self.per_relation,
            "seed": self.seed,
            "multi_change": self.multi_change,
            "condition": self.condition,
            "relations": [r.value for r in self.relations],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> GenerationRequest:
        return cls(
            world=str(doc["world"]),
            scenes=tuple(str(s) for s in doc["scenes"]),
            per_relation=int(doc["per_relation"]),
            seed=int(doc["seed"]),
            multi_change=bool(doc["multi_change"]),
            condition=str(doc["condition"]),
            relations=tuple(Relation.parse(r) for r in doc["relations"]),
        )


@dataclasses.dataclass(frozen=True)
class Slot:
    """One episode to fill: the ``number``-th of ``relation``, first drawn in scene ``scene_index``."""

    index: int
    relation: Relation
    number: int
    scene_index: int

    @property
    def key(self) -> str:
        return f"{self.relation.value}-{self.number:04d}"

    def group_id(self, split: str) -> str:
        """Id of the slot's episode (single) or of its group of episodes (multi-change)."""
        return self.key if split == "single" else f"mc-{self.key}"


def plan_slots(request: GenerationRequest) -> list[Slot]:
    """The slots of a run, interleaved by relation; relation ``r`` walks the scenes from an offset
    so that each relation visits every scene and each scene serves every relation."""
    n_scenes, n_relations = len(request.scenes), len(request.relations)
    stride = math.ceil(n_scenes / n_relations)
    slots = []
    for number in range(request.per_relation):
        for r, relation in enumerate(request.relations):
            slots.append(Slot(len(slots), relation, number, (number + r * stride) % n_scenes))
    return slots


@dataclasses.dataclass
class SlotOutcome:
    """What filling one slot produced.

    ``episodes``: the emitted records (empty when the slot was given up); ``recordings``: the
    staging directory holding ``visit1`` and ``visit2`` of the emitted group (None when given up);
    ``rejections``: relation → reason → count; ``timings``: :data:`TIMING_KEYS` → seconds.
    """

    slot: Slot
    episodes: list[EpisodeRecord]
    recordings: Path | None
    attempts: int
    rejections: dict[str, dict[str, int]]
    timings: dict[str, float]

    @property
    def filled(self) -> bool:
        return bool(self.episodes)
