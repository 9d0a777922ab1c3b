"""Map and memory diagnostics (AEC, PA, TBS, SIR, per-kind precision/recall) on hand-built maps."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ovman_core.boxes import Box3, Vec3
from ovman_core.config import load_config
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.analysis.diagnostics import (
    ChangeKind,
    DiagnosticsError,
    change_labels,
    change_scores,
    diagnose_map,
    diagnose_visits,
    environment_coverage,
    identity_resolution,
    match_to_ground_truth,
    positional_accuracy,
    temporal_stability,
)
from ovman_mapping.instances import Instance, InstanceMap, MapSnapshot, Sighting
from ovman_query.association import STAGE_RELOCATED, STAGE_STAYED, Association, MatchedPair

GATE = load_config().benchmark_node.diagnostics.match_gate
DELTA_MIN = load_config().task.min_displacement

# Visit 1: five objects at different heights (so the point set is not planar).
TRUTH1 = {
    "Chair_1": ("Chair", (1.0, 0.45, 0.0)),
    "Chair_2": ("Chair", (3.0, 0.45, 0.0)),
    "Mug_1": ("Mug", (0.0, 0.95, 2.0)),
    "Sofa_1": ("Sofa", (4.0, 0.40, 3.0)),
    "Lamp_1": ("Lamp", (2.0, 1.60, 5.0)),
}


def world(objects: dict[str, tuple[str, Vec3]]) -> WorldState:
    return WorldState.of(
        [ObjectState(i, c, p, Box3.from_center_size(p, (0.4, 0.4, 0.4))) for i, (c, p) in objects.items()]
    )


def instance(uid: str, label: str, position: Vec3) -> Instance:
    return Instance(
        uid=uid,
        position=position,
        box=Box3.from_center_size(position, (0.4, 0.4, 0.4)),
        points=np.array([position]),
        feature=np.array([1.0, 0.0]),
        colour=np.array([1.0]),
        labels={label: 1.0},
        sightings=(Sighting(0, 0, position, 100),),
    )


def stable_map(visit: int, instances: list[Instance], snapshots: int = 3) -> InstanceMap:
    """A map whose instances were all present, unmoved, from the first snapshot on."""
    positions = {i.uid: i.position for i in instances}
    history = tuple(MapSnapshot(t, t, positions) for t in range(snapshots))
    return InstanceMap(visit, tuple(instances), "test", snapshots, history, {i.uid: i.uid for i in instances})


def perfect_map(visit: int, objects: dict[str, tuple[str, Vec3]]) -> InstanceMap:
    return stable_map(visit, [instance(f"v{visit}:{i}", c, p) for i, (c, p) in objects.items()])


def shifted(position: Vec3, dx: float = 0.0, dy: float = 0.0, dz: float = 0.0) -> Vec3:
    return (position[0] + dx, position[1] + dy, position[2] + dz)


# -- per visit ------------------------------------------------------------------------------------


def test_perfect_map_scores_one_on_coverage_positional_accuracy_and_stability():
    result = diagnose_map(perfect_map(1, TRUTH1), world(TRUTH1), set(TRUTH1), GATE)
    assert result.coverage == 1.0
    assert result.matched_coverage == 1.0
    assert result.positional.score == pytest.approx(1.0)
    assert result.positional.rmse == pytest.approx(0.0, abs=1e-9)
    assert result.stability.mean == 1.0
    assert (result.duplicated, result.hallucinated) == (0, 0)
    assert result.match.truth_of == {f"v1:{i}": i for i in TRUTH1}


def test_rotated_and_translated_copy_scores_one_on_positional_accuracy():
    actual = np.array([p for _, p in TRUTH1.values()])
    motion = Rotation.from_euler("xyz", [10.0, 35.0, -20.0], degrees=True)
    estimated = motion.apply(actual) + np.array([2.0, -1.0, 5.0])
    result = positional_accuracy(estimated, actual, baseline=len(actual))
    assert result.score == pytest.approx(1.0)
    assert result.rmse == pytest.approx(0.0, abs=1e-9)
    assert result.rotation_deg == pytest.approx(np.degrees(motion.magnitude()))


def test_positional_accuracy_is_exp_of_rmse_over_spread_times_matched_share():
    # A copy scaled by 1.1 about its mean: no rigid motion reduces the residual, so RMSE = 0.1·L.
    actual = np.array([p for _, p in list(TRUTH1.values())[:4]])
    estimated = actual.mean(axis=0) + 1.1 * (actual - actual.mean(axis=0))
    result = positional_accuracy(estimated, actual, baseline=5)
    spread = math.sqrt(np.mean(np.sum((actual - actual.mean(axis=0)) ** 2, axis=1)))
    assert result.spread == pytest.approx(spread)
    assert result.rmse == pytest.approx(0.1 * spread)
    assert result.score == pytest.approx(math.exp(-0.1) * 4 / 5)


def test_positional_accuracy_of_two_matches_aligns_the_collinear_pair_exactly():
    actual = np.array([[0.0, 0.5, 0.0], [2.0, 0.5, 0.0]])
    estimated = Rotation.from_euler("y", 90.0, degrees=True).apply(actual) + 3.0
    assert positional_accuracy(estimated, actual, baseline=2).score == pytest.approx(1.0)


def test_positional_accuracy_of_no_match_is_zero_and_of_one_exact_match_is_its_share():
    assert positional_accuracy(np.empty((0, 3)), np.empty((0, 3)), baseline=3).score == 0.0
    one = positional_accuracy(np.array([[5.0, 0.0, 5.0]]), np.array([[1.0, 0.0, 1.0]]), baseline=4)
    assert one.score == 0.25


def test_missing_instance_lowers_coverage_and_accuracy_by_one_over_discoverable():
    mapped = {i: v for i, v in TRUTH1.items() if i != "Mug_1"}
    result = diagnose_map(perfect_map(1, mapped), world(TRUTH1), set(TRUTH1), GATE)
    assert result.coverage == pytest.approx(1.0 - 1 / 5)
    assert result.matched_coverage == pytest.approx(4 / 5)
    assert result.positional.score == pytest.approx(4 / 5)


def test_coverage_caps_each_category_at_its_discoverable_count():
    # Three chair instances on two chairs, and no mug: chairs count 2, not 3.
    labels = ["Chair", "Chair", "Chair", "Sofa", "Lamp"]
    assert environment_coverage(labels, world(TRUTH1), set(TRUTH1)) == pytest.approx(4 / 5)


def test_duplicated_and_hallucinated_instances_are_counted():
    instances = [
        *perfect_map(1, TRUTH1).instances,
        instance("dup", "Chair", shifted(TRUTH1["Chair_1"][1], dx=0.3)),
        instance("ghost", "Toaster", (9.0, 0.9, 9.0)),
        instance("far-mug", "Mug", (9.0, 0.9, 0.0)),
    ]
    result = diagnose_map(stable_map(1, instances), world(TRUTH1), set(TRUTH1), GATE)
    assert result.duplicated == 1
    assert result.match.duplicate_of == {"dup": "Chair_1"}
    assert result.hallucinated == 2
    assert set(result.match.hallucinated) == {"ghost", "far-mug"}
    assert result.coverage == 1.0
    assert result.positional.score == pytest.approx(1.0)


def test_matching_requires_the_label_to_equal_the_category():
    instances = [instance("wrong-label", "Mug", TRUTH1["Chair_1"][1])]
    match = match_to_ground_truth(stable_map(1, instances), world(TRUTH1), GATE)
    assert match.truth_of == {}
    assert match.hallucinated == ("wrong-label",)


def test_matching_maximises_pairs_before_minimising_distance():
    truth = world({"Chair_1": ("Chair", (0.0, 0.5, 0.0)), "Chair_2": ("Chair", (0.9, 0.5, 0.0))})
    # "a" is nearest Chair_1 but "b" can only reach Chair_1: both must be matched, a to Chair_2.
    instances = [instance("a", "Chair", (0.1, 0.5, 0.0)), instance("b", "Chair", (-0.5, 0.5, 0.0))]
    match = match_to_ground_truth(stable_map(1, instances), truth, gate=0.85)
    assert match.truth_of == {"a": "Chair_2", "b": "Chair_1"}
    assert match.distance["a"] == pytest.approx(0.8)


def test_undiscoverable_object_in_the_map_is_neither_counted_nor_hallucinated():
    discoverable = set(TRUTH1) - {"Lamp_1"}
    result = diagnose_map(perfect_map(1, TRUTH1), world(TRUTH1), discoverable, GATE)
    assert result.hallucinated == 0
    assert result.coverage == 1.0
    assert result.positional.matched == 4
    assert result.positional.score == pytest.approx(1.0)


def test_discoverable_ids_absent_from_the_ground_truth_are_rejected():
    with pytest.raises(DiagnosticsError, match="Table_9"):
        diagnose_map(perfect_map(1, TRUTH1), world(TRUTH1), {"Table_9"}, GATE)
    with pytest.raises(DiagnosticsError, match="no discoverable"):
        environment_coverage(["Chair"], world(TRUTH1), set())


# -- within a visit: temporal stability -----------------------------------------------------------


def test_stable_track_scores_one_and_drifting_track_loses_stability_with_its_drift():
    still, start = (0.0, 0.5, 0.0), (4.0, 0.5, 0.0)
    history = tuple(
        MapSnapshot(t, 10 * t, {"w0": still, "w1": shifted(start, dx=0.1 * t), "w9": (7.0, 0.5, 7.0)}) for t in range(4)
    )
    aliases = {"w0": "v1:0", "w1": "v1:1"}  # w9 was dropped: it counts nowhere
    result = temporal_stability(history, aliases, counted={"v1:0", "v1:1"}, spread=2.0, baseline=2)
    assert result.instances["v1:0"].drifts == (0.0, 0.0, 0.0, 0.0)
    assert result.instances["v1:0"].score == 1.0
    drifting = result.instances["v1:1"]
    assert drifting.drifts == pytest.approx((0.0, 0.1, 0.2, 0.3))
    assert drifting.max_drift == pytest.approx(0.3)
    assert drifting.score == pytest.approx(math.exp(-0.15 / 2.0))
    assert "v1:9" not in result.instances
    assert [s.drift for s in result.series] == pytest.approx([0.0, 0.05, 0.1, 0.15])
    assert [s.score for s in result.series] == pytest.approx([math.exp(-0.05 * t / 2.0) for t in range(4)])
    assert [s.step for s in result.series] == [0, 10, 20, 30]


def test_stability_counts_merged_fragments_once_and_grows_with_the_map():
    a, b = (0.0, 0.5, 0.0), (2.0, 0.5, 0.0)
    history = (
        MapSnapshot(0, 0, {"w0": a}),
        MapSnapshot(1, 1, {"w0": a, "w1": b, "w2": b}),
    )
    aliases = {"w0": "v1:0", "w1": "v1:1", "w2": "v1:1"}
    result = temporal_stability(history, aliases, counted={"v1:0", "v1:1"}, spread=1.0, baseline=4)
    assert [s.mapped for s in result.series] == [1, 2]
    assert [s.score for s in result.series] == [0.25, 0.5]
    assert result.mean == pytest.approx(0.375)


def test_stability_of_a_map_without_snapshots_is_an_error():
    with pytest.raises(DiagnosticsError, match="history"):
        temporal_stability((), {}, set(), 1.0, 1)


# -- across visits ---------------------------------------------------------------------------------

# Visit 2: Chair_2 moved 2 m, Mug_1 removed, Book_1 appeared.
TRUTH2 = {
    "Chair_1": TRUTH1["Chair_1"],
    "Chair_2": ("Chair", shifted(TRUTH1["Chair_2"][1], dz=2.0)),
    "Sofa_1": TRUTH1["Sofa_1"],
    "Lamp_1": TRUTH1["Lamp_1"],
    "Book_1": ("Book", (5.0, 0.8, 5.0)),
}


def pair(uid1: str, uid2: str, displacement: float) -> MatchedPair:
    stage = STAGE_RELOCATED if displacement >= DELTA_MIN else STAGE_STAYED
    return MatchedPair(uid1, uid2, stage, 0.0, 0.0, displacement, displacement)


def two_maps():
    return (
        match_to_ground_truth(perfect_map(1, TRUTH1), world(TRUTH1), GATE),
        match_to_ground_truth(perfect_map(2, TRUTH2), world(TRUTH2), GATE),
    )


PERFECT_ASSOCIATION = Association(
    pairs=(
        pair("v1:Chair_1", "v2:Chair_1", 0.0),
        pair("v1:Chair_2", "v2:Chair_2", 2.0),
        pair("v1:Sofa_1", "v2:Sofa_1", 0.0),
        pair("v1:Lamp_1", "v2:Lamp_1", 0.0),
    ),
    removed=("v1:Mug_1",),
    appeared=("v2:Book_1",),
)

# One wrong pair: the lamp's visit-1 instance is paired with the new book, the lamp's visit-2
# instance is then left over as an "appearance".
ONE_WRONG_PAIR = Association(
    pairs=(*PERFECT_ASSOCIATION.pairs[:3], pair("v1:Lamp_1", "v2:Book_1", 3.0)),
    removed=("v1:Mug_1",),
    appeared=("v2:Lamp_1",),
)


def test_ground_truth_change_labels_follow_the_world_states():
    assert change_labels(world(TRUTH1), world(TRUTH2), DELTA_MIN) == {
        "Chair_1": ChangeKind.STAYED,
        "Chair_2": ChangeKind.MOVED,
        "Mug_1": ChangeKind.REMOVED,
        "Sofa_1": ChangeKind.STAYED,
        "Lamp_1": ChangeKind.STAYED,
        "Book_1": ChangeKind.APPEARED,
    }


def test_perfect_maps_and_association_score_one_on_sir_and_every_change_kind():
    first = diagnose_map(perfect_map(1, TRUTH1), world(TRUTH1), set(TRUTH1), GATE)
    second = diagnose_map(perfect_map(2, TRUTH2), world(TRUTH2), set(TRUTH2), GATE)
    result = diagnose_visits(PERFECT_ASSOCIATION, first, second, world(TRUTH1), world(TRUTH2), DELTA_MIN)
    assert result.identity.score == 1.0
    for score in result.changes.values():
        assert (score.predicted, score.precision, score.recall) == (1 if score.kind != ChangeKind.STAYED else 3, 1, 1)


def test_sir_with_one_wrong_pair_is_the_resolved_share_anchored_by_coverage():
    first, second = two_maps()
    result = identity_resolution(ONE_WRONG_PAIR, first, second, world(TRUTH1), world(TRUTH2), coverage=0.8)
    assert (result.carried, result.resolved, result.wrong) == (4, 3, 1)
    assert result.ratio == 0.75
    assert result.score == pytest.approx(0.8 * 0.75)


def test_sir_counts_an_object_missing_from_the_visit_2_map_as_unresolved():
    first = match_to_ground_truth(perfect_map(1, TRUTH1), world(TRUTH1), GATE)
    second = match_to_ground_truth(
        perfect_map(2, {k: v for k, v in TRUTH2.items() if k != "Sofa_1"}), world(TRUTH2), GATE
    )
    association = Association(
        pairs=tuple(p for p in PERFECT_ASSOCIATION.pairs if p.uid1 != "v1:Sofa_1"),
        removed=("v1:Mug_1", "v1:Sofa_1"),
        appeared=("v2:Book_1",),
    )
    result = identity_resolution(association, first, second, world(TRUTH1), world(TRUTH2), coverage=1.0)
    assert (result.carried, result.resolved, result.score) == (4, 3, 0.75)


def test_precision_and_recall_per_change_kind_on_a_known_confusion():
    first, second = two_maps()
    labels = change_labels(world(TRUTH1), world(TRUTH2), DELTA_MIN)
    scores = change_scores(ONE_WRONG_PAIR, first, second, labels, DELTA_MIN)
    # Pairs: Chair_1 stayed (right), Chair_2 moved (right), Sofa stayed (right), Lamp->Book moved
    # (wrong); removed Mug (right); appeared Lamp (wrong: it stayed). The book was never "appeared".
    expected = {
        ChangeKind.STAYED: (2, 2, 3, 1.0, 2 / 3),
        ChangeKind.MOVED: (2, 1, 1, 0.5, 1.0),
        ChangeKind.REMOVED: (1, 1, 1, 1.0, 1.0),
        ChangeKind.APPEARED: (1, 0, 1, 0.0, 0.0),
    }
    for kind, (predicted, correct, relevant, precision, recall) in expected.items():
        score = scores[kind]
        assert (score.predicted, score.correct, score.relevant) == (predicted, correct, relevant), kind
        assert score.precision == pytest.approx(precision), kind
        assert score.recall == pytest.approx(recall), kind


def test_a_pair_displaced_less_than_delta_min_is_a_predicted_stay_even_for_a_moved_object():
    first, second = two_maps()
    association = Association(pairs=(pair("v1:Chair_2", "v2:Chair_2", DELTA_MIN / 2),), removed=(), appeared=())
    labels = change_labels(world(TRUTH1), world(TRUTH2), DELTA_MIN)
    scores = change_scores(association, first, second, labels, DELTA_MIN)
    assert (scores[ChangeKind.STAYED].predicted, scores[ChangeKind.STAYED].correct) == (1, 0)
    assert (scores[ChangeKind.MOVED].predicted, scores[ChangeKind.MOVED].recall) == (0, 0.0)
    assert scores[ChangeKind.MOVED].precision is None


def test_change_scores_reject_matched_objects_without_a_label():
    first, second = two_maps()
    with pytest.raises(DiagnosticsError, match="Mug_1"):
        change_scores(PERFECT_ASSOCIATION, first, second, {"Chair_1": ChangeKind.STAYED}, DELTA_MIN)
