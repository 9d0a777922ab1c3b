"""The answer of each relation (TASK.md §1) on hand-built world states."""

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.task.answers import NoAnswerError, changed_instances, compute_answer

from .worlds import obj, state

TASK = load_config().task

# Visit 1: two vases and a chair. Between the visits Vase_1 moves 5 m, Chair_1 is removed,
# Box_2 appears; Vase_2 and Box_1 stay.
W1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 8, 0), obj("Chair_1", 0, 6), obj("Chair_2", 9, 9), obj("Box_1", 4, 4))
W2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 8, 0), obj("Chair_2", 9, 9), obj("Box_1", 4, 4), obj("Box_2", -6, 0))


def test_moved_is_the_new_place_of_the_relocated_instance():
    answer = compute_answer(W1, W2, "Vase", Relation.MOVED, TASK)
    assert (answer.instance_id, answer.point) == ("Vase_1", (0, 5))
    assert not answer.vacated


def test_former_is_the_vacated_old_place():
    answer = compute_answer(W1, W2, "Vase", Relation.FORMER, TASK)
    assert (answer.instance_id, answer.point) == ("Vase_1", (0, 0))
    assert answer.vacated
    assert answer.region.distance_to((0, 0)) == 0.0


def test_removed_is_the_vacated_place_of_the_missing_instance():
    answer = compute_answer(W1, W2, "Chair", Relation.REMOVED, TASK)
    assert (answer.instance_id, answer.point, answer.vacated) == ("Chair_1", (0, 6), True)


def test_appeared_is_the_new_instance():
    answer = compute_answer(W1, W2, "Box", Relation.APPEARED, TASK)
    assert (answer.instance_id, answer.point) == ("Box_2", (-6, 0))


def test_stable_is_the_instance_that_stayed_while_another_changed():
    assert compute_answer(W1, W2, "Vase", Relation.STABLE, TASK).instance_id == "Vase_2"
    assert compute_answer(W1, W2, "Chair", Relation.STABLE, TASK).instance_id == "Chair_2"


def test_stable_needs_another_instance_of_the_category_to_change():
    w = state(obj("Vase_1", 0, 0), obj("Vase_2", 8, 0))
    with pytest.raises(NoAnswerError, match="no other instance"):
        compute_answer(w, w, "Vase", Relation.STABLE, TASK)


def test_moving_answer_is_taken_where_the_instance_is_at_stop():
    at_stop = state(obj("Vase_1", 3, 3), obj("Vase_2", 8, 0))
    answer = compute_answer(W1, W2, "Vase", Relation.MOVING, TASK, moving_id="Vase_1", w2_at_stop=at_stop)
    assert answer.point == (3, 3)
    with pytest.raises(NoAnswerError, match="no mover"):
        compute_answer(W1, W2, "Vase", Relation.MOVING, TASK)
    with pytest.raises(NoAnswerError, match="carries a Vase"):
        compute_answer(W1, W2, "Chair", Relation.MOVING, TASK, moving_id="Vase_1")


def test_a_small_move_is_neither_moved_nor_stable():
    w2 = state(obj("Vase_1", 0.5, 0), obj("Vase_2", 8, 0))  # 0.5 m: above τ, below Δmin
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 8, 0))
    assert changed_instances(w1, w2, "Vase", TASK) == {"Vase_1": "ambiguous"}
    with pytest.raises(NoAnswerError, match="no instance qualifies"):
        compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)


def test_relation_without_a_unique_instance_raises():
    with pytest.raises(NoAnswerError, match="no instance"):
        compute_answer(W1, W2, "Vase", Relation.REMOVED, TASK)
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 8, 5))
    with pytest.raises(NoAnswerError, match="2 instances qualify"):
        compute_answer(W1.__class__.of([obj("Vase_1", 0, 0), obj("Vase_2", 8, 0)]), w2, "Vase", Relation.MOVED, TASK)


def test_multi_change_episode_selects_one_instance_per_relation():
    # Three vases change under three relations; each (category, relation) query is unique.
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0), obj("Vase_3", 20, 0))
    w2 = state(obj("Vase_1", 0, 6), obj("Vase_3", 20, 0), obj("Vase_4", 30, 0))
    got = {r: compute_answer(w1, w2, "Vase", r, TASK).instance_id for r in Relation if r is not Relation.MOVING}
    assert got == {
        Relation.MOVED: "Vase_1",
        Relation.FORMER: "Vase_1",
        Relation.REMOVED: "Vase_2",
        Relation.APPEARED: "Vase_4",
        Relation.STABLE: "Vase_3",
    }


def test_relation_names_parse_and_unknown_names_fail():
    assert Relation.parse("former") is Relation.FORMER
    with pytest.raises(ValueError, match="expected one of moved"):
        Relation.parse("teleported")
