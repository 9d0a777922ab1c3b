"""The answer of each change relation from two ground-truth world states (TASK.md §1, Eq. 1).

World frame: AI2-THOR's; answers are floor points (x, z) and floor footprints, metres.
"""

from __future__ import annotations

import dataclasses

from ovman_core.boxes import Footprint, Vec2, floor_distance
from ovman_core.config import TaskConfig
from ovman_core.relations import Relation
from ovman_core.world_state import ObjectState, WorldState


class NoAnswerError(ValueError):
    """The relation selects no instance, or more than one, for the queried category."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """The ground-truth answer of one (category, relation) query.

    ``point`` is a, ``region`` is A (TASK.md §1); ``vacated`` is True when nothing is at the
    answer at the end of visit 2 (former, removed).
    """

    category: str
    relation: Relation
    instance_id: str
    point: Vec2
    region: Footprint

    @property
    def vacated(self) -> bool:
        return self.relation.vacated


def displacement(w1: WorldState, w2: WorldState, instance_id: str) -> float:
    """d(o): floor distance between the instance's centre in visit 1 and in visit 2 (metres)."""
    return floor_distance(w1[instance_id].position, w2[instance_id].position)


def changed_instances(
    w1: WorldState, w2: WorldState, category: str, task: TaskConfig, moving_id: str | None = None
) -> dict[str, str]:
    """Instances of ``category`` that changed, mapped to how: moved, removed, appeared, moving.

    Instances displaced by more than τ but less than Δmin are reported as ``"ambiguous"``: they
    changed, but under no relation.
    """
    changes: dict[str, str] = {}
    ids = {o.instance_id for o in w1.of_category(category)} | {o.instance_id for o in w2.of_category(category)}
    for instance_id in sorted(ids):
        if instance_id == moving_id:
            changes[instance_id] = "moving"
        elif instance_id not in w2:
            changes[instance_id] = "removed"
        elif instance_id not in w1:
            changes[instance_id] = "appeared"
        else:
            d = displacement(w1, w2, instance_id)
            if d >= task.min_displacement:
                changes[instance_id] = "moved"
            elif d > task.stable_tolerance:
                changes[instance_id] = "ambiguous"
    return changes


def compute_answer(
    w1: WorldState,
    w2: WorldState,
    category: str,
    relation: Relation,
    task: TaskConfig,
    moving_id: str | None = None,
    w2_at_stop: WorldState | None = None,
) -> Answer:
    """The unique instance selected by ``relation`` for ``category`` and its answer point/region.

    ``moving_id`` names the instance the mover carries during visit 2 (moving episodes); for the
    moving relation the answer is taken in ``w2_at_stop`` (the world when the agent stops; the end
    of the visit-2 recording for the static gate), defaulting to ``w2``.
    Raises :class:`NoAnswerError` when no instance, or more than one, is selected.
    """
    if relation is Relation.MOVING:
        return _moving_answer(w2_at_stop or w2, category, moving_id)
    changes = changed_instances(w1, w2, category, task, moving_id)
    if relation in (Relation.MOVED, Relation.FORMER):
        selected = [i for i, kind in changes.items() if kind == "moved"]
    elif relation is Relation.REMOVED:
        selected = [i for i, kind in changes.items() if kind == "removed"]
    elif relation is Relation.APPEARED:
        selected = [i for i, kind in changes.items() if kind == "appeared"]
    else:  # STABLE
        if not any(kind in ("moved", "removed", "appeared", "moving") for kind in changes.values()):
            raise NoAnswerError(f"stable {category}: no other instance of {category} changed")
        selected = [
            o.instance_id
            for o in w1.of_category(category)
            if o.instance_id in w2
            and o.instance_id not in changes
            and displacement(w1, w2, o.instance_id) <= task.stable_tolerance
        ]
    obj = _single(selected, category, relation)
    state = w1 if relation.answer_visit == 1 else w2
    return _answer_of(state[obj], relation)


def _moving_answer(w2: WorldState, category: str, moving_id: str | None) -> Answer:
    if moving_id is None:
        raise NoAnswerError(f"moving {category}: the episode has no mover")
    if moving_id not in w2:
        raise NoAnswerError(f"moving {category}: the carried instance {moving_id!r} is not in visit 2")
    obj = w2[moving_id]
    if obj.category != category:
        raise NoAnswerError(f"moving {category}: the mover carries a {obj.category}, not a {category}")
    return _answer_of(obj, Relation.MOVING)


def _single(selected: list[str], category: str, relation: Relation) -> str:
    if not selected:
        raise NoAnswerError(f"{relation.value} {category}: no instance qualifies")
    if len(selected) > 1:
        raise NoAnswerError(f"{relation.value} {category}: {len(selected)} instances qualify ({', '.join(selected)})")
    return selected[0]


def _answer_of(obj: ObjectState, relation: Relation) -> Answer:
    return Answer(obj.category, relation, obj.instance_id, obj.floor, obj.box.footprint)
