"""The decision rules (Eq. 9) on hand-built change evidence: every relation, abstention, ties."""

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_query.association import STAGE_RELOCATED, STAGE_STAYED, STAGE_UNSEEN, Association, MatchedPair
from ovman_query.decisions import Candidate, ChangeEvidence, decide

TASK = load_config().task


def cand(uid, x, z, score=1.0, grounded=True, moving=False, last_step=0, support=3):
    return Candidate(uid, (x, 0.3, z), score, grounded, moving, last_step, support)


def pair(uid1, uid2, displacement, stage=STAGE_RELOCATED):
    return MatchedPair(uid1, uid2, stage, 0.1, 0.1, displacement, displacement)


# Visit 1: vases a (moves 3 m), b (moves 2 m), s (stays), r (removed); a chair c (stays).
# Visit 2: a2, b2, s2, new vase n, c2.
V1 = {
    "a": cand("a", 0, 0),
    "b": cand("b", 5, 0),
    "s": cand("s", 9, 9, score=0.97),
    "r": cand("r", -5, 5),
    "c": cand("c", 2, 2, score=0.2, grounded=False),
}
V2 = {
    "a2": cand("a2", 0, 3),
    "b2": cand("b2", 5, 2),
    "s2": cand("s2", 9.05, 9, score=0.97),
    "n": cand("n", -8, 0),
    "c2": cand("c2", 2, 2, score=0.2, grounded=False),
}
ASSOCIATION = Association(
    (
        pair("a", "a2", 3.0),
        pair("b", "b2", 2.0),
        pair("s", "s2", 0.05, STAGE_STAYED),
        pair("c", "c2", 0.0, STAGE_STAYED),
    ),
    removed=("r",),
    appeared=("n",),
)
EVIDENCE = ChangeEvidence(V1, V2, ASSOCIATION)


@pytest.mark.parametrize(
    ("relation", "point", "ids"),
    [
        (Relation.MOVED, (0, 3), ("a", "a2")),
        (Relation.FORMER, (0, 0), ("a", "a2")),
        (Relation.REMOVED, (-5, 5), ("r",)),
        (Relation.APPEARED, (-8, 0), ("n",)),
        (Relation.STABLE, (9.05, 9), ("s", "s2")),
    ],
)
def test_each_relation_selects_its_instance_and_visit(relation, point, ids):
    prediction = decide(relation, "vase", EVIDENCE, TASK)
    assert prediction.point == pytest.approx(point)
    assert prediction.instance_ids == ids
    assert not prediction.abstained
    assert ids[0] in prediction.explanation and relation.value in prediction.explanation


def test_moved_takes_the_largest_displacement_at_or_above_delta_min():
    short = ChangeEvidence(V1, V2, Association((pair("a", "a2", 1.49), pair("b", "b2", 1.5)), (), ()))
    assert decide(Relation.MOVED, "vase", short, TASK).instance_ids == ("b", "b2")
    too_short = ChangeEvidence(V1, V2, Association((pair("a", "a2", 1.49),), (), ()))
    prediction = decide(Relation.FORMER, "vase", too_short, TASK)
    assert prediction.abstained and "1.50 m" in prediction.explanation


def test_removed_and_appeared_abstain_without_a_grounded_unmatched_instance():
    nothing_changed = ChangeEvidence(V1, V2, Association((), removed=("c",), appeared=("c2",)))
    for relation in (Relation.REMOVED, Relation.APPEARED):
        prediction = decide(relation, "vase", nothing_changed, TASK)
        assert prediction.abstained and prediction.point is None and prediction.confidence == 0.0
        assert prediction.explanation.startswith(f"abstain ({relation.value} 'vase')")


def test_a_pair_counts_only_when_grounded_in_both_visits():
    v2 = {**V2, "a2": cand("a2", 0, 3, score=0.3, grounded=False), "b2": cand("b2", 5, 2, grounded=False)}
    assert decide(Relation.MOVED, "vase", ChangeEvidence(V1, v2, ASSOCIATION), TASK).abstained


def test_stable_needs_displacement_within_tau_and_prefers_the_higher_score():
    stable_pairs = Association((pair("s", "s2", 0.05, STAGE_STAYED), pair("b", "b2", 0.08, STAGE_STAYED)), (), ())
    v1 = {**V1, "b": cand("b", 5, 0, score=0.99)}
    v2 = {**V2, "b2": cand("b2", 5, 0.08, score=0.99)}
    assert decide(Relation.STABLE, "vase", ChangeEvidence(v1, v2, stable_pairs), TASK).instance_ids == ("b", "b2")
    drifted = Association((pair("s", "s2", 0.11, STAGE_STAYED),), (), ())
    assert decide(Relation.STABLE, "vase", ChangeEvidence(V1, V2, drifted), TASK).abstained


def test_moving_picks_the_most_recently_seen_grounded_moving_instance():
    v2 = {
        **V2,
        "m1": cand("m1", 1, 1, moving=True, last_step=40),
        "m2": cand("m2", 4, 4, moving=True, last_step=90),
        "m3": cand("m3", 6, 6, moving=True, last_step=120, grounded=False, score=0.1),
    }
    prediction = decide(Relation.MOVING, "vase", ChangeEvidence(V1, v2, ASSOCIATION), TASK)
    assert prediction.point == (4, 4) and prediction.instance_ids == ("m2",)
    assert "step 90" in prediction.explanation
    assert decide(Relation.MOVING, "vase", EVIDENCE, TASK).abstained


def test_ties_break_by_score_then_support_then_uid():
    v1 = {"r1": cand("r1", 0, 0, support=2), "r2": cand("r2", 5, 5, support=7), "r3": cand("r3", 9, 9, support=7)}
    tie = ChangeEvidence(v1, {}, Association((), removed=("r1", "r2", "r3"), appeared=()))
    assert decide(Relation.REMOVED, "vase", tie, TASK).instance_ids == ("r2",)
    v1["r1"] = cand("r1", 0, 0, score=1.01, support=1)
    assert decide(Relation.REMOVED, "vase", tie, TASK).instance_ids == ("r1",)


def test_explanation_lists_grounded_instances_with_scores():
    prediction = decide(Relation.STABLE, "vase", EVIDENCE, TASK)
    assert "visit 1 grounded [a 1.000, b 1.000, r 1.000, s 0.970]" in prediction.explanation
    assert "c " not in prediction.explanation.split("grounded")[1]


def test_seen_changes_come_first_and_unseen_ones_are_the_fallback():
    # With cross-visit evidence: u (visit 1) and u2 (visit 2) are unconfirmed; u -> u2 is an unseen
    # relocation (stage three). The seen changes answer while there are any.
    v1 = {**V1, "u": cand("u", 20, 0)}
    v2 = {**V2, "u2": cand("u2", 20, 6)}
    seen = Association(
        ASSOCIATION.pairs,
        removed=("r",),
        appeared=("n",),
        unconfirmed=("u", "u2"),
        unseen=(pair("u", "u2", 6.0, STAGE_UNSEEN),),
    )
    assert decide(Relation.MOVED, "vase", ChangeEvidence(v1, v2, seen), TASK).instance_ids == ("a", "a2")
    assert decide(Relation.REMOVED, "vase", ChangeEvidence(v1, v2, seen), TASK).instance_ids == ("r",)
    # No seen change of the kind: the unseen one answers, and the explanation says so.
    none_seen = Association(ASSOCIATION.pairs[2:], (), (), unconfirmed=("u", "u2"), unseen=seen.unseen)
    evidence = ChangeEvidence(v1, v2, none_seen)
    moved = decide(Relation.MOVED, "vase", evidence, TASK)
    assert moved.instance_ids == ("u", "u2") and moved.point == (20, 6) and "no seen relocation" in moved.explanation
    removed = decide(Relation.REMOVED, "vase", evidence, TASK)
    assert removed.instance_ids == ("u",) and "none seen gone" in removed.explanation
    appeared = decide(Relation.APPEARED, "vase", evidence, TASK)
    assert appeared.instance_ids == ("u2",) and "none seen arrive" in appeared.explanation
    # Without any unconfirmed instance or unseen pair: abstain, as before.
    assert decide(Relation.MOVED, "vase", ChangeEvidence(v1, v2, Association((), (), ())), TASK).abstained
