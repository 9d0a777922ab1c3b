"""Two-stage Hungarian association across visits (TASK.md §5.2)."""

import dataclasses

import numpy as np
import pytest

from ovman_core.boxes import Box3
from ovman_core.config import load_config
from ovman_mapping.instances import CrossVisitEvidence
from ovman_query.association import (
    CUES,
    STAGE_RELOCATED,
    STAGE_STAYED,
    STAGE_UNSEEN,
    AssociationError,
    appearance_cues,
    associate,
    feature_dissimilarity,
)

from .maps import instance, instance_map

CONFIG = load_config().query_node.association


def test_stayed_relocated_removed_and_appeared_instances():
    # Vase a stays, vase b (blue) moves 4 m, the chair is removed, a box appears.
    v1 = instance_map(
        1, instance("a", "Vase", 0, 0, hue=1), instance("b", "Vase", 3, 0, hue=2), instance("c", "Chair", 0, 5)
    )
    v2 = instance_map(
        2, instance("a2", "Vase", 0.05, 0, hue=1), instance("b2", "Vase", 3, 4, hue=2), instance("d", "Box", -3, 0)
    )
    result = associate(v1, v2, CONFIG)
    pairs = {(p.uid1, p.uid2): p for p in result.pairs}
    assert set(pairs) == {("a", "a2"), ("b", "b2")}
    assert pairs[("a", "a2")].stage == STAGE_STAYED
    assert pairs[("a", "a2")].displacement == pytest.approx(0.05)
    assert pairs[("b", "b2")].stage == STAGE_RELOCATED
    assert pairs[("b", "b2")].displacement == pytest.approx(4.0)
    assert result.removed == ("c",) and result.appeared == ("d",)
    assert result.partner_of_1("b").uid2 == "b2" and result.partner_of_2("d") is None


def test_stage_one_prefers_the_nearer_of_two_lookalikes():
    v1 = instance_map(1, instance("a", "Vase", 0, 0), instance("b", "Vase", 0.6, 0))
    v2 = instance_map(2, instance("x", "Vase", 0.58, 0), instance("y", "Vase", 0.02, 0))
    pairs = {(p.uid1, p.uid2) for p in associate(v1, v2, CONFIG).pairs}
    assert pairs == {("a", "y"), ("b", "x")}


def test_relocation_needs_similar_features():
    # A vase of another colour far away is not a relocation: one removal, one appearance.
    v1 = instance_map(1, instance("a", "Vase", 0, 0, hue=1))
    v2 = instance_map(2, instance("b", "Vase", 4, 0, hue=5))
    result = associate(v1, v2, CONFIG)
    assert result.pairs == () and result.removed == ("a",) and result.appeared == ("b",)
    loose = dataclasses.replace(CONFIG, relocation_max_dissimilarity=0.6)
    assert [(p.uid1, p.uid2) for p in associate(v1, v2, loose).pairs] == [("a", "b")]


def test_a_different_object_in_the_same_place_did_not_stay():
    v1 = instance_map(1, instance("a", "Chair", 0, 0))
    v2 = instance_map(2, instance("b", "Box", 0, 0))
    result = associate(v1, v2, CONFIG)
    assert result.pairs == () and result.removed == ("a",) and result.appeared == ("b",)


def test_dissimilarity_mixes_feature_cosine_and_colour():
    v1 = instance_map(1, instance("a", "Vase", 0, 0, hue=1))
    v2 = instance_map(2, instance("b", "Vase", 0, 0, hue=2), instance("c", "Chair", 0, 0, hue=1))
    d = feature_dissimilarity(v1, v2, colour_weight=0.5)
    assert np.allclose(d, [[0.5, 0.5]])
    assert np.allclose(feature_dissimilarity(v1, v2, colour_weight=0.0), [[0.0, 1.0]])


def test_empty_maps_give_an_empty_change_set_and_mismatched_encoders_raise():
    empty = associate(instance_map(1), instance_map(2, instance("b", "Vase", 0, 0)), CONFIG)
    assert empty.pairs == () and empty.removed == () and empty.appeared == ("b",)
    odd = instance_map(2, dataclasses.replace(instance("b", "Vase", 0, 0), feature=np.ones(3) / np.sqrt(3)))
    with pytest.raises(AssociationError, match="different encoders"):
        associate(instance_map(1, instance("a", "Vase", 0, 0)), odd, CONFIG)


def _seen(v2, gone=(), new=()):
    """``v2`` carrying cross-visit evidence: ``gone`` visit-1 uids, ``new`` visit-2 uids."""
    return dataclasses.replace(v2, prior=CrossVisitEvidence(frozenset(gone), frozenset(new)))


def test_with_cross_visit_evidence_only_seen_changes_are_claimed():
    # Vase b moved (its place seen empty in visit 2, its new place seen empty in visit 1); chair c
    # is unmatched but visit 2 saw its place occupied (a spurious instance): unconfirmed, not removed;
    # box d appeared where visit 1 saw nothing; box e is unmatched and was never looked at.
    v1 = instance_map(
        1, instance("a", "Vase", 0, 0, hue=1), instance("b", "Vase", 3, 0, hue=2), instance("c", "Chair", 0, 5)
    )
    v2 = instance_map(
        2,
        instance("a2", "Vase", 0.05, 0, hue=1),
        instance("b2", "Vase", 3, 4, hue=2),
        instance("d", "Box", -3, 0),
        instance("e", "Box", -6, 0),
    )
    result = associate(v1, _seen(v2, gone={"b"}, new={"b2", "d"}), CONFIG)
    assert {(p.uid1, p.uid2, p.stage) for p in result.pairs} == {
        ("a", "a2", STAGE_STAYED),
        ("b", "b2", STAGE_RELOCATED),
    }
    assert result.removed == () and result.appeared == ("d",) and result.unconfirmed == ("c", "e")
    # The evidence is ignored when the config says so, and absent evidence changes nothing.
    ignored = associate(v1, _seen(v2), dataclasses.replace(CONFIG, require_seen_change=False))
    assert ignored == associate(v1, v2, CONFIG)
    assert ignored.removed == ("c",) and ignored.appeared == ("d", "e") and ignored.unconfirmed == ()


def test_a_place_seen_empty_did_not_stay_and_a_relocation_needs_both_places_seen():
    # a's place was seen empty in visit 2 although a lookalike a2 stands 0.1 m away: a left and a2
    # arrived (visit 1 saw a2's place empty) -- a short move, not a stay.
    v1 = instance_map(1, instance("a", "Vase", 0, 0, hue=1))
    v2 = instance_map(2, instance("a2", "Vase", 0.1, 0, hue=1))
    both = associate(v1, _seen(v2, gone={"a"}, new={"a2"}), CONFIG)
    assert [(p.uid1, p.uid2, p.stage) for p in both.pairs] == [("a", "a2", STAGE_RELOCATED)]
    # Only a's place seen empty: a was removed; a2 is unconfirmed (visit 1 did not see its place empty).
    one = associate(v1, _seen(v2, gone={"a"}), CONFIG)
    assert one.pairs == () and one.removed == ("a",) and one.appeared == () and one.unconfirmed == ("a2",)


def test_unmatched_instances_not_seen_to_change_pair_as_unseen_relocations():
    # A small apple: visit 2 did not see its old place empty (too small to judge), visit 1 saw its
    # new place empty. No seen relocation, but stage three pairs them as an unseen one; the change
    # set itself keeps the apple's visit-2 instance as appeared and the visit-1 one unconfirmed.
    v1 = instance_map(1, instance("a", "Vase", 0, 0, hue=1), instance("c", "Chair", 0, 5))
    v2 = instance_map(2, instance("a2", "Vase", 4, 0, hue=1), instance("c2", "Chair", 0, 5.05))
    result = associate(v1, _seen(v2, new={"a2"}), CONFIG)
    assert [(p.uid1, p.uid2, p.stage) for p in result.pairs] == [("c", "c2", STAGE_STAYED)]
    assert result.removed == () and result.appeared == ("a2",) and result.unconfirmed == ("a",)
    assert [(p.uid1, p.uid2, p.stage) for p in result.unseen] == [("a", "a2", STAGE_UNSEEN)]
    assert result.unseen[0].displacement == pytest.approx(4.0)
    # Without evidence there is no stage three: stage two pairs them as a relocation.
    plain = associate(v1, v2, CONFIG)
    assert plain.unseen == () and ("a", "a2", STAGE_RELOCATED) in [(p.uid1, p.uid2, p.stage) for p in plain.pairs]


def test_appearance_cues_and_the_extent_variant():
    small = dataclasses.replace(instance("a", "Vase", 0, 0, hue=1))
    big = instance("b", "Vase", 3, 0, hue=1)
    big = dataclasses.replace(big, box=Box3.from_center_size(big.position, (0.8, 1.2, 0.8)))
    v1, v2 = instance_map(1, small), instance_map(2, instance("c", "Vase", 0, 0, hue=1), big)
    cues = appearance_cues(v1, v2)
    assert set(cues) == set(CUES)
    assert cues["extent"][0, 0] == pytest.approx(1.0)  # the same box sizes
    expected = np.exp(-np.mean(np.abs(np.log((np.array([0.4, 0.4, 0.6]) + 0.01) / (np.array([0.8, 0.8, 1.2]) + 0.01)))))
    assert cues["extent"][0, 1] == pytest.approx(expected)
    # The default weights give what they gave before the extent cue; extent alone is 1 − extent.
    assert np.array_equal(feature_dissimilarity(v1, v2, 0.5), feature_dissimilarity(v1, v2, 0.5, 0.0))
    assert np.allclose(feature_dissimilarity(v1, v2, 0.0, 1.0), 1.0 - cues["extent"])
    assert np.allclose(feature_dissimilarity(v1, v2, 1.0, 0.0), 1.0 - cues["colour"])
