"""One map maintained across both visits (DualMap's reading, issue 25) and what it answers."""

import dataclasses

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import segmented_by
from ovman_mapping.instances import CrossVisitEvidence
from ovman_query.agent import ReferenceAgent
from ovman_query.arms import ArmInputError, maintained_map, oracle_grounding
from ovman_query.association import associate
from ovman_query.maintained import Known, maintain
from ovman_query.parser import Query

from .maps import instance, instance_map
from .scenes import OneHotEncoder

CONFIG = segmented_by(load_config(), "simulator")
AGENT = ReferenceAgent(CONFIG, OneHotEncoder(["Vase", "Chair", "Box", "Sofa"]))


def truth(instance_map_):
    """Every instance's true category is its label (grounding handed over)."""
    return {i.uid: {i.label: 1.0} for i in instance_map_}


@pytest.fixture
def maps():
    """Vase a stays; vase b moves 4 m (its old place seen empty); vase c is removed (seen gone); vase
    e was never looked at again (neither re-observed nor seen gone); vase n appears; chair m moves
    about during visit 2."""
    map1 = instance_map(
        1,
        instance("a", "Vase", 0, 0, hue=1),
        instance("b", "Vase", 3, 0, hue=2),
        instance("c", "Vase", 0, 5, hue=3),
        instance("e", "Vase", -6, 6, hue=0),
    )
    map2 = instance_map(
        2,
        instance("a2", "Vase", 0.05, 0, hue=1),
        instance("b2", "Vase", 3, 4, hue=2),
        instance("n", "Vase", -3, 0, hue=7),
        instance("m", "Chair", 5, 5, moving=True, last_step=40),
    )
    evidence = CrossVisitEvidence(gone=frozenset({"b", "c"}), new=frozenset({"b2", "n"}))
    return map1, dataclasses.replace(map2, prior=evidence)


def test_the_maintained_map_updates_reobserved_keeps_new_removes_gone_and_retains_the_unseen(maps):
    map1, map2 = maps
    maintained = maintain(map1, map2, associate(map1, map2, CONFIG.query_node.association))
    known = {e.uid: e.known for e in maintained.entries}
    assert known == {"a2": Known.REOBSERVED, "b2": Known.NEW, "n": Known.NEW, "m": Known.NEW, "e": Known.STALE}
    # The relocated vase's old place and the removed vase are gone from the map: superseded, dropped.
    assert set(maintained.removed) == {"b", "c"}
    a2 = next(e for e in maintained.entries if e.uid == "a2")
    assert a2.visit == 2 and a2.floor == pytest.approx((0.05, 0.0))  # the position is the visit-2 observation


def test_without_evidence_nothing_is_seen_gone_and_unmatched_visit_1_instances_are_retained(maps):
    map1, map2 = maps
    bare = dataclasses.replace(map2, prior=None)
    maintained = maintain(map1, bare, associate(map1, bare, CONFIG.query_node.association))
    assert maintained.removed == ()
    assert {e.uid for e in maintained.entries if e.known is Known.STALE} >= {"c", "e"}


def ask(map1, map2, relation, category="Vase"):
    query = Query(category.lower(), relation, category)
    return maintained_map(AGENT, map1, map2, query, truth(map1), truth(map2))


def test_current_state_relations_are_answered_from_the_maintained_map(maps):
    map1, map2 = maps
    assert ask(map1, map2, Relation.STABLE).instance_ids == ("a2",)
    # A relocated object is new to a maintained map, so moved and appeared read the same entries.
    assert ask(map1, map2, Relation.MOVED).instance_ids[0] in {"b2", "n"}
    assert ask(map1, map2, Relation.APPEARED).instance_ids[0] in {"b2", "n"}
    moving = ask(map1, map2, Relation.MOVING, "Chair")
    assert moving.instance_ids == ("m",) and moving.point == pytest.approx((5.0, 5.0))


def test_former_and_removed_come_only_from_what_the_map_retains(maps):
    map1, map2 = maps
    # The two-visit reading answers from the relocation and the seen removal ...
    two_visit_former = oracle_grounding(
        AGENT, map1, map2, Query("vase", Relation.FORMER, "Vase"), truth(map1), truth(map2)
    )
    assert two_visit_former.instance_ids[0] == "b"
    # ... the maintained map dropped both; the only visit-1 vase it keeps is the stale one.
    for relation in (Relation.FORMER, Relation.REMOVED):
        prediction = ask(map1, map2, relation)
        assert prediction.instance_ids == ("e",) and prediction.arm == "maintained_map"
        assert "retained from visit 1" in prediction.explanation
    seen_again = dataclasses.replace(
        map2, prior=CrossVisitEvidence(gone=frozenset({"b", "c", "e"}), new=frozenset({"b2", "n"}))
    )
    removed = ask(map1, seen_again, Relation.REMOVED)
    assert removed.abstained and "no grounded entry of the maintained map" in removed.explanation


def test_grounding_is_handed_over_and_needs_the_category(maps):
    map1, map2 = maps
    # The chair's points are a vase's in truth: it is grounded as one, whatever its label.
    shares2 = {**truth(map2), "m": {"Vase": 1.0}}
    query = Query("vase", Relation.MOVING, "Vase")
    assert maintained_map(AGENT, map1, map2, query, truth(map1), shares2).instance_ids == ("m",)
    with pytest.raises(ArmInputError, match="maintained_map"):
        maintained_map(AGENT, map1, map2, Query("vase", Relation.MOVING), truth(map1), truth(map2))
