"""The reference agent end to end on rendered two-visit scenes with known answers."""

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.task.answers import compute_answer
from ovman_mapping.encoders import LabelEncoder
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.parser import ParseError

from .scenes import OneHotEncoder, look_around, on_floor, render, tour, world_state

# These test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = segmented_by(load_config(), "simulator")

VASE_1 = on_floor("Vase_1", "Vase", 0.0, 3.0, size=(0.3, 0.5, 0.3), colour=(220, 200, 30))
VASE_2 = on_floor("Vase_2", "Vase", -4.0, -3.0, size=(0.3, 0.5, 0.3), colour=(30, 60, 220))
CHAIR_1 = on_floor("Chair_1", "Chair", 3.0, -3.0, colour=(200, 30, 30))
CHAIR_2 = on_floor("Chair_2", "Chair", -3.0, 3.0, colour=(30, 200, 30))
SOFA_1 = on_floor("Sofa_1", "Sofa", 4.0, 2.0, size=(1.6, 0.8, 0.8), colour=(200, 100, 200))
SOFA_2 = on_floor("Sofa_2", "Sofa", -4.0, 0.0, size=(1.6, 0.8, 0.8), colour=(100, 200, 200))
# Between the visits Vase_1 moves 4 m, Chair_1 is removed and Sofa_2 appears; the rest stay.
VISIT_1 = [VASE_1, VASE_2, CHAIR_1, CHAIR_2, SOFA_1]
VISIT_2 = [VASE_1.moved_to(3.5, 4.5), VASE_2, CHAIR_2, SOFA_1, SOFA_2]
POSES = [p for x, z in ((0, 0), (2.5, 0), (-2.5, 0), (0, -2.5), (0, 2.5)) for p in look_around(x, z)]

CASES = [
    ("vase", Relation.MOVED, "Vase"),
    ("vase", Relation.FORMER, "Vase"),
    ("vase", Relation.STABLE, "Vase"),
    ("chair", Relation.REMOVED, "Chair"),
    ("sofa", Relation.APPEARED, "Sofa"),
]


@pytest.fixture(scope="module")
def onehot_agent():
    return ReferenceAgent(CONFIG, OneHotEncoder(["Vase", "Chair", "Sofa"]))


@pytest.fixture(scope="module")
def maps(onehot_agent):
    return onehot_agent.build_map(tour(VISIT_1, POSES), 1), onehot_agent.build_map(tour(VISIT_2, POSES, 100), 2)


def distance_to_answer(prediction, category, relation):
    answer = compute_answer(world_state(VISIT_1), world_state(VISIT_2), category, relation, CONFIG.task)
    return ((prediction.point[0] - answer.point[0]) ** 2 + (prediction.point[1] - answer.point[1]) ** 2) ** 0.5


@pytest.mark.parametrize(("noun", "relation", "category"), CASES)
def test_two_visit_agent_answers_every_static_relation(onehot_agent, maps, noun, relation, category):
    prediction = onehot_agent.answer(*maps, query_of(noun, relation))
    assert distance_to_answer(prediction, category, relation) < 0.3, prediction.explanation


@pytest.mark.parametrize(("noun", "relation"), [("vase", Relation.REMOVED), ("chair", Relation.APPEARED)])
def test_removed_and_appeared_abstain_when_nothing_of_the_kind_changed(onehot_agent, maps, noun, relation):
    prediction = onehot_agent.answer(*maps, query_of(noun, relation))
    assert prediction.abstained and prediction.explanation.startswith("abstain")


def test_free_text_queries_are_parsed_and_gibberish_fails(onehot_agent, maps):
    prediction = onehot_agent.answer(*maps, "go to where the vase used to be")
    assert prediction.relation is Relation.FORMER
    assert distance_to_answer(prediction, "Vase", Relation.FORMER) < 0.3
    with pytest.raises(ParseError):
        onehot_agent.answer(*maps, "flibber the jabberwock")


def test_moving_object_is_found_at_its_latest_observed_place(onehot_agent):
    frames = []
    for place in ((0.0, 3.0), (-3.0, 0.0), (-3.0, -1.5)):
        boxes = [CHAIR_2, VASE_1.moved_to(*place), VASE_2]
        frames += [render(boxes, pose, len(frames) + n) for n, pose in enumerate(look_around(0.0, 0.0))]
    visit_1 = onehot_agent.build_map(tour([CHAIR_2, VASE_1, VASE_2], look_around(0.0, 0.0)), 1)
    visit_2 = onehot_agent.build_map(frames, 2)
    prediction = onehot_agent.answer(visit_1, visit_2, query_of("vase", Relation.MOVING))
    assert prediction.point == pytest.approx((-3.0, -1.5), abs=0.15), prediction.explanation


def test_label_encoder_agent_grounds_synonyms_with_minilm(maps):
    # The same frames with the real offline text model: the synonym "couch" grounds the sofas.
    agent = ReferenceAgent(CONFIG, LabelEncoder(CONFIG.mapping_node.encoder))
    map1, map2 = agent.build_map(tour(VISIT_1, POSES), 1), agent.build_map(tour(VISIT_2, POSES, 100), 2)
    assert map1.encoder.startswith("label:")
    appeared = agent.answer(map1, map2, "the couch that wasn't there before")
    assert distance_to_answer(appeared, "Sofa", Relation.APPEARED) < 0.3, appeared.explanation
    moved = agent.answer(map1, map2, query_of("vase", Relation.MOVED))
    assert distance_to_answer(moved, "Vase", Relation.MOVED) < 0.3, moved.explanation
