"""The anti-shortcut admissibility rule (TASK.md §2).

An agent that only recognises the category must be at chance: every other instance of the queried
category present in visit 2 (every one, for vacated answers) must lie farther than R_sep from the
answer footprint, so that stopping within R of a distractor can never pass the success test when
R_sep ≥ 2R. Distances are between floor footprints (metres, AI2-THOR world frame). With an
instance carried during visit 2 the rule holds at every footprint it takes
(:func:`separation_violations`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ovman_core.boxes import Footprint
from ovman_core.config import TaskConfig
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.task.answers import Answer

TOO_FEW_INSTANCES = "too_few_instances"
DISTRACTOR_NEAR_ANSWER = "distractor_near_answer"


def admissibility_violations(
    w1: WorldState,
    w2: WorldState,
    answer: Answer,
    task: TaskConfig,
    answer_regions: Sequence[Footprint] = (),
) -> list[str]:
    """Reasons the episode is inadmissible (empty when admissible), one message per violation.

    Each message starts with a reason code (``too_few_instances``, ``distractor_near_answer``)
    followed by ``:`` and details, so rejections can be counted per reason. ``answer_regions``
    adds footprints the answer takes during the episode (the mover's path in moving episodes); the
    separation is checked against each of them as well as ``answer.region``.
    """
    category = answer.category
    ids = {o.instance_id for o in w1.of_category(category)} | {o.instance_id for o in w2.of_category(category)}
    problems: list[str] = []
    if len(ids) < 2:
        problems.append(f"{TOO_FEW_INSTANCES}: {len(ids)} instance(s) of {category} in both visits together")
    regions = [answer.region, *answer_regions]
    for other in w2.of_category(category):
        if other.instance_id == answer.instance_id and not answer.vacated:
            continue
        gap = min(other.box.footprint.distance_to_footprint(region) for region in regions)
        if gap <= task.separation_radius:
            problems.append(
                f"{DISTRACTOR_NEAR_ANSWER}: {other.instance_id} is {gap:.2f} m from the answer region "
                f"(needs > {task.separation_radius:.2f} m)"
            )
    return problems


def separation_violations(
    w1: WorldState,
    w2: WorldState,
    answer: Answer,
    task: TaskConfig,
    moving_id: str | None = None,
    carried: Sequence[ObjectState] = (),
) -> list[str]:
    """:func:`admissibility_violations` with the instance ``moving_id`` carried through the states
    ``carried`` during visit 2 (Algorithm 1 lines 8-9): its footprints are answer regions when it
    is the answer, and distractor positions (each state in turn) when it is another instance of the
    queried category. Without a mover it is :func:`admissibility_violations` on (w1, w2)."""
    if moving_id is not None and answer.instance_id == moving_id:
        regions = list(dict.fromkeys(s.box.footprint for s in carried))
        return admissibility_violations(w1, w2, answer, task, regions)
    if moving_id is not None and w2[moving_id].category == answer.category:
        problems: list[str] = []
        for state in {s.box: s for s in carried}.values():
            problems.extend(admissibility_violations(w1, w2.with_object(state), answer, task))
        return problems
    return admissibility_violations(w1, w2, answer, task)
