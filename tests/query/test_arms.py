"""The arms of the error budget (TASK.md §6)."""

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.task.answers import compute_answer
from ovman_query.agent import ReferenceAgent
from ovman_query.arms import (
    BACKGROUND,
    BUILT_IN_ARMS,
    PARSE_FAILED,
    Arm,
    ArmInputError,
    category_only,
    given_answer,
    oracle_grounding,
    oracle_positions,
    single_visit,
    true_category,
    two_visit,
    two_visit_text,
)
from ovman_query.parser import Query

from .maps import instance, instance_map
from .scenes import OneHotEncoder, on_floor, world_state

# These test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = segmented_by(load_config(), "simulator")
AGENT = ReferenceAgent(CONFIG, OneHotEncoder(["Vase", "Chair", "Box", "Sofa"]))


def q(noun, relation, category=None):
    return Query(noun, relation, category)


def test_arm_names_match_the_benchmark_config():
    assert [a.value for a in BUILT_IN_ARMS] == CONFIG.benchmark_node.benchmark.arms


def test_single_visit_picks_a_grounded_instance_with_its_exact_success_probability():
    map2 = instance_map(
        2,
        instance("a", "Vase", 0, 0),
        instance("b", "Vase", 0.5, 0),
        instance("c", "Vase", 6, 0),
        instance("d", "Vase", 9, 9),
        instance("e", "Chair", 0, 0.2),
    )
    picks = set()
    for seed in range(20):
        prediction = single_visit(AGENT, map2, q("vase", Relation.MOVED), seed, answer_point=(0.2, 0.0))
        assert prediction.success_probability == pytest.approx(0.5)  # a and b of the four vases
        assert prediction.instance_ids[0] in {"a", "b", "c", "d"}
        picks.add(prediction.instance_ids[0])
        again = single_visit(AGENT, map2, q("vase", Relation.MOVED), seed, answer_point=(0.2, 0.0))
        assert again.instance_ids == prediction.instance_ids
    assert picks == {"a", "b", "c", "d"}
    assert single_visit(AGENT, map2, q("vase", Relation.MOVED), 0).success_probability is None
    empty = single_visit(AGENT, instance_map(2), q("vase", Relation.MOVED), 0, answer_point=(0, 0))
    assert empty.abstained and empty.success_probability == 0.0


def test_oracle_grounding_uses_the_true_categories_where_the_encoder_and_the_labels_mislead():
    # The moved vase's features lean away from "vase" (as a bad crop would) and its segmenter label
    # says Chair, so the agent grounds only the distractor, which did not move; the true category
    # of its points (ground truth) still says Vase.
    map1 = instance_map(1, instance("a", "Chair", 0, 0, tilt=0.8), instance("b", "Vase", 8, 8))
    map2 = instance_map(2, instance("a2", "Chair", 0, 4, tilt=0.8), instance("b2", "Vase", 8, 8))
    shares1 = {"a": {"Vase": 0.7, BACKGROUND: 0.3}, "b": {"Vase": 0.9, "Chair": 0.1}}
    shares2 = {"a2": {"Vase": 0.6, "Table": 0.4}, "b2": {"Vase": 1.0}}
    query = q("vase", Relation.MOVED, "Vase")
    assert two_visit(AGENT, map1, map2, query).abstained
    prediction = oracle_grounding(AGENT, map1, map2, query, shares1, shares2)
    assert prediction.point == pytest.approx((0, 4)) and prediction.arm == "oracle_grounding"
    with pytest.raises(ArmInputError, match="category"):
        oracle_grounding(AGENT, map1, map2, q("vase", Relation.MOVED), shares1, shares2)
    # Mostly background, or no shares at all (no points): grounded by nothing.
    hollow = {"a2": {"Vase": 0.4, BACKGROUND: 0.6}, "b2": {"Vase": 1.0}}
    assert oracle_grounding(AGENT, map1, map2, query, shares1, hollow).abstained
    assert oracle_grounding(AGENT, map1, map2, query, shares1, {"b2": {"Vase": 1.0}}).abstained


def test_true_category_is_the_majority_of_the_points_with_ties_alphabetical():
    assert true_category({"Vase": 0.5, "Chair": 0.5}) == "Chair"
    assert true_category({"Vase": 0.4, BACKGROUND: 0.6}) == BACKGROUND
    assert true_category({}) == BACKGROUND


# Ground truth: Vase_1 moves 5 m, Chair_1 is removed, Box_2 appears, Vase_2 stays.
W1 = world_state(
    [
        on_floor("Vase_1", "Vase", 0, 0),
        on_floor("Vase_2", "Vase", 8, 0),
        on_floor("Chair_1", "Chair", 0, 6),
        on_floor("Chair_2", "Chair", 9, 9),
        on_floor("Box_1", "Box", 4, 4),
    ]
)
W2 = world_state(
    [
        on_floor("Vase_1", "Vase", 0, 5),
        on_floor("Vase_2", "Vase", 8, 0),
        on_floor("Chair_2", "Chair", 9, 9),
        on_floor("Box_1", "Box", 4, 4),
        on_floor("Box_2", "Box", -6, 0),
    ]
)


@pytest.mark.parametrize(
    ("category", "relation"),
    [
        ("Vase", Relation.MOVED),
        ("Vase", Relation.FORMER),
        ("Vase", Relation.STABLE),
        ("Chair", Relation.REMOVED),
        ("Box", Relation.APPEARED),
    ],
)
def test_oracle_positions_reproduce_the_ground_truth_answer(category, relation):
    prediction = oracle_positions(AGENT, W1, W2, q(category.lower(), relation, category))
    answer = compute_answer(W1, W2, category, relation, CONFIG.task)
    assert prediction.point == pytest.approx(answer.point)
    assert answer.instance_id in prediction.instance_ids


def test_oracle_positions_follow_the_mover_and_abstain_like_the_rules():
    moving = oracle_positions(AGENT, W1, W2, q("box", Relation.MOVING, "Box"), moving_id="Box_1")
    assert moving.point == pytest.approx((4, 4)) and moving.instance_ids == ("Box_1",)
    assert oracle_positions(AGENT, W1, W2, q("vase", Relation.REMOVED, "Vase")).abstained


def test_given_answer_returns_the_true_point():
    prediction = given_answer(q("vase", Relation.FORMER, "Vase"), (1.0, 2.0), "Vase_1")
    assert prediction.point == (1.0, 2.0) and prediction.instance_ids == ("Vase_1",) and prediction.confidence == 1.0


def test_category_only_goes_to_the_best_instance_whatever_the_relation():
    map2 = instance_map(
        2, instance("a", "Vase", 0, 0, tilt=0.2), instance("b", "Vase", 5, 5), instance("c", "Box", 1, 1)
    )
    for relation in Relation:
        prediction = category_only(AGENT, map2, q("vase", relation))
        assert prediction.instance_ids == ("b",) and prediction.point == (5, 5)
    assert category_only(AGENT, instance_map(2), q("vase", Relation.MOVED)).abstained


def test_two_visit_text_answers_the_parsed_query_and_abstains_on_a_parse_failure():
    map1 = instance_map(1, instance("a", "Vase", 0, 0), instance("c", "Chair", 3, 3))
    map2 = instance_map(2, instance("b", "Vase", 4, 0), instance("d", "Chair", 3, 3))
    text = two_visit_text(AGENT, map1, map2, "where was the vase before it was moved", Relation.FORMER)
    supplied = two_visit(AGENT, map1, map2, q("vase", Relation.FORMER, "Vase"))
    assert text.relation is Relation.FORMER and text.arm == Arm.TWO_VISIT_TEXT.value
    assert text.point == supplied.point and text.instance_ids == supplied.instance_ids
    failed = two_visit_text(AGENT, map1, map2, "vase", Relation.MOVED)
    assert failed.abstained and failed.explanation.startswith(PARSE_FAILED)
