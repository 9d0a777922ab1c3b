"""Answering /ovman/query requests from held maps (query_node's core), and the change set it publishes."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import segmented_by
from ovman_query import arms
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.change_set import ChangeKind, change_set
from ovman_query.query_requests import (
    CachingAgent,
    QueryRequest,
    RejectedMap,
    Status,
    VisitMap,
    answer_query,
    resolve_category,
    second_visit_of,
)
from ovman_query.surface_forms import category_vocabulary

from .maps import AXES, instance, instance_map
from .scenes import OneHotEncoder

# These test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = segmented_by(load_config(), "simulator")
# Visit 1: two vases, a chair. Visit 2: vase v1:0 moved 4 m, vase v1:1 stayed, the chair gone, a sofa new.
MAP1 = instance_map(
    1,
    instance("v1:0", "Vase", 0.0, 0.0, hue=0),
    instance("v1:1", "Vase", 5.0, 5.0, hue=1),
    instance("v1:2", "Chair", 3.0, 0.0, hue=2),
)
MAP2 = instance_map(
    2,
    instance("v2:0", "Vase", 0.0, 4.0, hue=0),
    instance("v2:1", "Vase", 5.0, 5.0, hue=1),
    instance("v2:2", "Sofa", 3.0, 3.0, hue=3),
)
# Wire ids deliberately differ from the uids' numbers: the outcome must use the wire ids.
VISIT1 = VisitMap(MAP1, {"v1:0": 10, "v1:1": 11, "v1:2": 12}, stamp_ns=100)
VISIT2 = VisitMap(MAP2, {"v2:0": 20, "v2:1": 21, "v2:2": 22}, stamp_ns=200)
SEED = 3


@pytest.fixture(scope="module")
def agent():
    return ReferenceAgent(CONFIG, OneHotEncoder(AXES))


def ask(agent, visit1=VISIT1, visit2=VISIT2, **fields):
    return answer_query(agent, visit1, visit2, QueryRequest(**fields), SEED)


def test_a_category_query_is_answered_with_the_point_and_wire_ids_of_the_reference_agent(agent):
    outcome = ask(agent, category="Vase", relation="moved")
    expected = agent.answer(MAP1, MAP2, query_of("vase", Relation.MOVED, "Vase"))
    assert outcome.status is Status.ANSWERED and outcome.point == expected.point == (0.0, 4.0)
    assert (outcome.instance_visit1, outcome.instance_visit2) == (10, 20)
    assert (outcome.relation, outcome.noun_phrase, outcome.arm) == ("moved", "vase", "two_visit")
    assert 0.0 <= outcome.confidence <= 1.0 and outcome.explanation == expected.explanation


def test_free_text_is_parsed_and_an_unparseable_text_fails(agent):
    outcome = ask(agent, text="go to where the vase used to be")
    assert outcome.status is Status.ANSWERED and outcome.point == (0.0, 0.0) and outcome.relation == "former"
    failed = ask(agent, text="flibber the jabberwock")
    assert failed.status is Status.PARSE_FAILED and failed.point is None and "cannot parse" in failed.explanation


def test_the_text_arm_answers_free_text_as_its_function_in_arms(agent):
    text = "go to where the vase used to be"
    outcome = ask(agent, text=text, arm="two_visit_text")
    assert outcome.status is Status.ANSWERED and outcome.arm == "two_visit_text"
    assert outcome.prediction == arms.two_visit_text(agent, MAP1, MAP2, text, Relation.FORMER)


def test_nothing_of_the_kind_changed_is_an_abstention(agent):
    outcome = ask(agent, category="Vase", relation="removed")
    assert outcome.status is Status.ABSTAINED and outcome.point is None
    assert (outcome.instance_visit1, outcome.instance_visit2) == (-1, -1)


def test_removed_and_appeared_name_the_instance_of_their_own_visit(agent):
    removed = ask(agent, category="chair", relation="removed")
    appeared = ask(agent, category="couch", relation="appeared")
    assert (removed.instance_visit1, removed.instance_visit2, removed.point) == (12, -1, (3.0, 0.0))
    assert (appeared.instance_visit1, appeared.instance_visit2, appeared.point) == (-1, 22, (3.0, 3.0))


def test_every_served_arm_is_its_function_in_arms(agent):
    query = query_of("vase", Relation.MOVED, "Vase")
    expected = {
        "two_visit": arms.two_visit(agent, MAP1, MAP2, query),
        "single_visit": arms.single_visit(agent, MAP2, query, SEED),
        "category_only": arms.category_only(agent, MAP2, query),
    }
    for arm, prediction in expected.items():
        outcome = ask(agent, category="Vase", relation="moved", arm=arm)
        assert outcome.prediction == prediction and outcome.arm == arm


def test_visit2_only_arms_need_only_the_visit2_map(agent):
    assert ask(agent, visit1=None, category="Vase", relation="moved", arm="category_only").status is Status.ANSWERED
    outcome = ask(agent, visit1=None, category="Vase", relation="moved")
    assert outcome.status is Status.NO_MAP and "visit-1 map" in outcome.explanation


def test_maps_that_cannot_belong_together_are_no_map(agent):
    stale = dataclasses.replace(VISIT2, stamp_ns=50)
    assert "not newer" in ask(agent, visit2=stale, category="Vase", relation="moved").explanation
    # Named maps pair by name, not by stamp: equal stamps (a clock standing still) are answered,
    # a visit-2 map of another visit 1 is not.
    named1 = dataclasses.replace(VISIT1, map_id="m-1", stamp_ns=7)
    paired = dataclasses.replace(VISIT2, map_id="m-2", follows="m-1", stamp_ns=7)
    assert ask(agent, visit1=named1, visit2=paired, category="Vase", relation="moved").status is Status.ANSWERED
    foreign = dataclasses.replace(paired, follows="m-0", stamp_ns=900)
    outcome = ask(agent, visit1=named1, visit2=foreign, category="Vase", relation="moved")
    assert outcome.status is Status.NO_MAP and "not the second visit" in outcome.explanation
    other = VisitMap(dataclasses.replace(MAP2, encoder="clip:ViT-B-32"), VISIT2.ids, 200)
    outcome = ask(agent, visit2=other, category="Vase", relation="moved")
    assert outcome.status is Status.NO_MAP and "same encoder" in outcome.explanation
    assert ask(agent, visit1=None, visit2=None, category="Vase", relation="moved").status is Status.NO_MAP


def test_a_refused_map_replaces_the_older_one_and_the_reply_says_why(agent):
    refused = RejectedMap("/ovman/map/visit2: visit-2 map: instance v2:1: position holds nan")
    for arm in ("two_visit", "category_only", "single_visit"):
        outcome = ask(agent, visit2=refused, category="Vase", relation="moved", arm=arm)
        assert outcome.status is Status.NO_MAP and outcome.point is None
        assert "latest one received was refused" in outcome.explanation and "position holds nan" in outcome.explanation
    outcome = ask(agent, visit1=RejectedMap("too large"), category="Vase", relation="moved")
    assert outcome.status is Status.NO_MAP and "visit-1 map" in outcome.explanation
    assert "too large" in outcome.explanation
    # The visit-2-only arms do not need visit 1.
    outcome = ask(agent, visit1=RejectedMap("too large"), category="Vase", relation="moved", arm="category_only")
    assert outcome.status is Status.ANSWERED


def test_a_non_finite_point_is_never_an_answer(agent):
    broken = instance("v2:0", "Vase", float("nan"), 4.0, hue=0)
    held = VisitMap(dataclasses.replace(MAP2, instances=(broken, MAP2.instances[2])), VISIT2.ids, 200)
    outcome = ask(agent, visit2=held, category="Vase", relation="moved", arm="category_only")
    assert outcome.status is not Status.ANSWERED and outcome.point is None


@pytest.mark.parametrize(
    "fields",
    [
        {"category": "Vase", "relation": "teleported"},
        {"category": "Vase", "relation": "moved", "arm": "psychic"},
        {"category": "Vase", "relation": "moved", "arm": "oracle_positions"},
        {"category": "Vase", "relation": "moved", "arm": "given_answer"},
        {"category": "Vase", "relation": "moved", "arm": "oracle_grounding"},
        {"category": "Vase", "relation": "moved", "arm": "sim_perception"},
        {"category": "Vase", "relation": "moved", "arm": "external"},
        {"category": "Vase", "relation": "moved", "arm": "two_visit_text"},
        {"text": "where was the vase", "relation": "former"},
        {"category": "Vase"},
        {},
        {"category": "Vase", "relation": "moved", "exclude_ids": (99,)},
    ],
)
def test_malformed_requests_are_invalid_with_a_reason(agent, fields):
    outcome = ask(agent, **fields)
    assert outcome.status is Status.INVALID_REQUEST and outcome.point is None and outcome.explanation


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("", Status.INVALID_REQUEST),
        ("   \t\n  ", Status.INVALID_REQUEST),
        ("\u200b\u200b", Status.PARSE_FAILED),
        ("🙂🚀🔥", Status.PARSE_FAILED),
        ("\x00\x01 go", Status.PARSE_FAILED),
        ("\u202egnivom esav eht\u202c", Status.PARSE_FAILED),
        ("the vase that was moved " * 5000, Status.INVALID_REQUEST),
        ("y" * 100_000, Status.INVALID_REQUEST),
    ],
)
def test_bad_text_gets_a_status_and_a_message_never_a_crash(agent, text, status):
    outcome = ask(agent, text=text)
    assert outcome.status is status and outcome.point is None and outcome.explanation
    if len(text) > CONFIG.query_node.parser.max_text_length:
        assert "parser.max_text_length" in outcome.explanation


def test_unusual_unicode_around_a_query_still_parses(agent):
    outcome = ask(agent, text="🙂 Ｇｏ to where the VASE’s used to be!! ✨")
    assert outcome.status is Status.ANSWERED and outcome.relation == "former" and outcome.noun_phrase == "vase"


def test_a_noun_phrase_that_matches_nothing_is_abstained_with_an_explanation_not_a_parse_failure(agent):
    for fields in ({"text": "go to the guitar that moved"}, {"category": "Guitar", "relation": "moved"}):
        outcome = ask(agent, **fields)
        assert outcome.status is Status.ABSTAINED and outcome.point is None, fields
        assert "nothing in the maps matches 'guitar'" in outcome.explanation
        assert "grounding.min_score" in outcome.explanation
    for arm in ("single_visit", "category_only"):
        assert ask(agent, text="go to the guitar that moved", arm=arm).status is Status.ABSTAINED


def test_couch_sofa_and_settee_ground_the_same_instances(agent):
    outcomes = [ask(agent, text=f"go to the {name} that appeared") for name in ("couch", "sofa", "settee")]
    assert {(o.status, o.point, o.instance_visit2) for o in outcomes} == {(Status.ANSWERED, (3.0, 3.0), 22)}
    assert [o.noun_phrase for o in outcomes] == ["couch", "sofa", "settee"]


def test_excluded_instances_are_never_the_answer(agent):
    # The moved pair is excluded: no other vase moved, so the two-visit arm abstains.
    assert ask(agent, category="Vase", relation="moved", exclude_ids=(20,)).status is Status.ABSTAINED
    stable = ask(agent, category="Vase", relation="stable", exclude_ids=(20,))
    assert stable.instance_visit2 == 21
    assert ask(agent, category="Vase", relation="stable", exclude_ids=(21,)).status is Status.ABSTAINED
    for arm in ("category_only", "single_visit"):
        outcome = ask(agent, category="Vase", relation="moved", arm=arm, exclude_ids=(21,))
        assert outcome.instance_visit2 == 20, arm


def test_requested_categories_resolve_by_label_or_surface_name():
    vocabulary = category_vocabulary()
    assert resolve_category(vocabulary, "CoffeeTable") == ("coffee table", "CoffeeTable")
    assert resolve_category(vocabulary, "  Couch ") == ("couch", "Sofa")
    assert resolve_category(vocabulary, "Gizmo") == ("gizmo", "Gizmo")


def test_the_change_set_classifies_every_pair_and_unmatched_instance(agent):
    moving = dataclasses.replace(MAP2, instances=(*MAP2.instances, instance("v2:3", "Box", 8.0, 8.0, moving=True)))
    association = agent.associate(MAP1, moving)
    changes = {
        (c.uid1, c.uid2): c for c in change_set(MAP1, moving, association, CONFIG.task, CONFIG.query_node.association)
    }
    assert changes[("v1:0", "v2:0")].kind is ChangeKind.MOVED and changes[("v1:0", "v2:0")].displacement == 4.0
    assert changes[("v1:1", "v2:1")].kind is ChangeKind.STAYED
    assert changes[("v1:2", None)].kind is ChangeKind.REMOVED and changes[("v1:2", None)].position2 is None
    assert changes[(None, "v2:2")].kind is ChangeKind.APPEARED and changes[(None, "v2:2")].label == "Sofa"
    assert changes[(None, "v2:3")].kind is ChangeKind.MOVING
    assert changes[("v1:2", None)].cost == CONFIG.query_node.association.relocation_max_dissimilarity


def test_the_caching_agent_answers_like_the_reference_agent_and_associates_once_per_map_pair(agent):
    caching = CachingAgent(CONFIG, OneHotEncoder(AXES))
    calls = []
    original = ReferenceAgent.associate

    def counting(self, map1, map2):
        calls.append((map1.visit, map2.visit))
        return original(self, map1, map2)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReferenceAgent, "associate", counting)
        for relation in Relation:
            request = QueryRequest(category="Vase", relation=relation.value)
            assert answer_query(caching, VISIT1, VISIT2, request, SEED) == answer_query(
                agent, VISIT1, VISIT2, request, SEED
            )
        caching_calls = len(calls) - len(Relation)  # the reference agent associates on every query
        assert caching_calls == 1
        other = dataclasses.replace(MAP2, instances=MAP2.instances[:2])
        caching.associate(MAP1, other)
        assert len(calls) == len(Relation) + 2


REQUEST_TEXT = st.text(max_size=60) | st.sampled_from(["", " ", "go to where the vase was", "🦄" * 30, "x" * 5000])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    text=REQUEST_TEXT,
    category=st.sampled_from(["", "Vase", "vase", "sofa", "Teapot", "\u0000", "椅子"]) | st.text(max_size=10),
    relation=st.sampled_from(["", "moved", "former", "removed", "appeared", "stable", "moving", "teleported"]),
    arm=st.sampled_from(["", "two_visit", "two_visit_text", "single_visit", "category_only", "oracle_positions", "x"]),
    exclude=st.lists(st.integers(min_value=-(2**31), max_value=2**31), max_size=3),
)
def test_any_query_request_gets_a_status_and_never_a_non_finite_goal(text, category, relation, arm, exclude):
    """A bounded fuzz (issue 22): whatever the fields, a status and an explanation, no exception."""
    request = QueryRequest(text=text, category=category, relation=relation, arm=arm, exclude_ids=tuple(exclude))
    outcome = answer_query(FUZZ_AGENT, VISIT1, VISIT2, request, SEED)
    assert isinstance(outcome.status, Status) and outcome.explanation
    if outcome.status is Status.ANSWERED:
        assert outcome.point is not None and all(math.isfinite(v) for v in outcome.point)
    else:
        assert outcome.point is None


FUZZ_AGENT = ReferenceAgent(CONFIG, OneHotEncoder(AXES))


def test_a_visit_2_map_is_paired_with_the_visit_1_map_it_follows_whatever_the_stamps():
    first = dataclasses.replace(VISIT1, map_id="run-1", stamp_ns=500)
    assert second_visit_of(first, dataclasses.replace(VISIT2, map_id="run-2", follows="run-1", stamp_ns=500))
    assert second_visit_of(first, dataclasses.replace(VISIT2, map_id="run-2", follows="run-1", stamp_ns=1))
    # The next group's visit-1 map is newer than the held visit-2 map, which does not follow it.
    assert not second_visit_of(first, dataclasses.replace(VISIT2, map_id="run-0", follows="run-x", stamp_ns=900))
    assert not second_visit_of(first, dataclasses.replace(VISIT2, stamp_ns=900))  # says nothing: not paired
    assert not second_visit_of(VISIT1, dataclasses.replace(VISIT2, follows="run-1"))


def test_maps_that_carry_no_ids_are_ordered_by_their_stamps():
    assert second_visit_of(VISIT1, VISIT2)
    assert not second_visit_of(VISIT1, dataclasses.replace(VISIT2, stamp_ns=VISIT1.stamp_ns))
