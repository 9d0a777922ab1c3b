"""The anti-shortcut rule (TASK.md §2)."""

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_core.success import embodied_success
from ovman_eval.task.admissibility import (
    DISTRACTOR_NEAR_ANSWER,
    TOO_FEW_INSTANCES,
    admissibility_violations,
    separation_violations,
)
from ovman_eval.task.answers import compute_answer

from .worlds import obj, state

TASK = load_config().task


def test_far_distractor_is_admissible():
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 10, 0))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    assert admissibility_violations(w1, w2, answer, TASK) == []


def test_distractor_within_R_sep_of_the_answer_is_rejected():
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 1.5, 5))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 1.5, 5))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    problems = admissibility_violations(w1, w2, answer, TASK)
    assert len(problems) == 1 and problems[0].startswith(DISTRACTOR_NEAR_ANSWER)
    assert "Vase_2" in problems[0]


def test_vacated_answer_counts_the_moved_instance_itself_as_a_distractor():
    # The vase moved only 1.6 m: standing beside it at its new place would pass "former".
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0))
    w2 = state(obj("Vase_1", 0, 1.6), obj("Vase_2", 10, 0))
    answer = compute_answer(w1, w2, "Vase", Relation.FORMER, TASK)
    problems = admissibility_violations(w1, w2, answer, TASK)
    assert any("Vase_1" in p for p in problems)


def test_a_single_instance_of_the_category_is_rejected():
    w1 = state(obj("Vase_1", 0, 0))
    w2 = state(obj("Vase_1", 0, 5))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    assert admissibility_violations(w1, w2, answer, TASK)[0].startswith(TOO_FEW_INSTANCES)


def test_answer_regions_along_a_path_are_checked_too():
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 10, 0))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    passing_by = obj("Vase_1", 9, 0).box.footprint
    assert admissibility_violations(w1, w2, answer, TASK, answer_regions=[passing_by])


def test_admissible_episode_defeats_a_category_only_agent():
    # Anywhere within R of a distractor's footprint fails the success test for the answer.
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 2.9, 5))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 2.9, 5))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    assert admissibility_violations(w1, w2, answer, TASK) == []
    fp = w2["Vase_2"].box.footprint
    for point in [(fp.x_min - 1.0, 5.0), (fp.x_min, 5.0), fp.center]:
        if fp.distance_to(point) <= TASK.success_radius:
            assert not embodied_success(point, answer.region, TASK.success_radius)


def test_a_carried_distractor_is_checked_at_every_state_it_takes():
    # Vase_2 is carried past the moved vase's new place: admissible where it starts, not on its way.
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 10, 0))
    answer = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    far = [obj("Vase_2", 10, 0), obj("Vase_2", 10, 3)]
    assert separation_violations(w1, w2, answer, TASK, "Vase_2", far) == []
    passing = [*far, obj("Vase_2", 1, 5)]
    problems = separation_violations(w1, w2, answer, TASK, "Vase_2", passing)
    assert len(problems) == 1 and problems[0].startswith(DISTRACTOR_NEAR_ANSWER)
    # Carried as the answer itself, its states are answer regions instead.
    moving = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    assert separation_violations(w1, w2, moving, TASK, "Vase_1", [obj("Vase_1", 9, 0)])
    assert separation_violations(w1, w2, answer, TASK) == admissibility_violations(w1, w2, answer, TASK)
