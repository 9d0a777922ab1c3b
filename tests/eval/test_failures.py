"""The failure partition (TASK.md §7, Table V) and lost in navigation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ovman_core.boxes import Footprint
from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_core.success import ROUNDING_TOLERANCE, embodied_success, static_success
from ovman_eval.task.answers import compute_answer
from ovman_eval.task.failures import (
    EpisodeOutcome,
    FailureClass,
    Gate,
    PartitionRadii,
    classify_failure,
    lost_in_navigation,
    other_instance_footprints,
    tabulate_failures,
)

from .worlds import obj, state

TASK = load_config().task
RADII = PartitionRadii(static_gate_radius=1.0, success_radius=1.0, far_miss_distance=2.0)
ANSWER = (0.0, 0.0)
REGION = Footprint(-0.2, -0.2, 0.2, 0.2)
DISTRACTOR = Footprint(4.8, -0.2, 5.2, 0.2)  # another instance of the category, 5 m along +x


def outcome(point, others=(DISTRACTOR,)):
    return EpisodeOutcome(point=point, answer_point=ANSWER, answer_region=REGION, other_instances=others)


# --- one hand-built case per class ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ((0.5, 0.5), FailureClass.SUCCESS),
        (None, FailureClass.ABSTAINED),
        ((4.0, 0.0), FailureClass.WRONG_INSTANCE),  # 0.8 m from the distractor's footprint
        ((0.0, 3.0), FailureClass.FAR),
        ((0.0, 1.5), FailureClass.OTHER),  # missed the gate by 0.5 m, on nothing else
        ((0.0, 2.0), FailureClass.OTHER),  # exactly the far distance is not "more than" it
        ((0.0, 2.001), FailureClass.FAR),
    ],
)
def test_each_class_on_a_hand_built_static_case(point, expected):
    assert classify_failure(outcome(point), Gate.STATIC, RADII) is expected


def test_embodied_gate_measures_to_the_footprint_and_static_to_the_point():
    # 1.1 m from the answer point but 0.9 m from its box: the stop test passes, the static gate does not.
    assert classify_failure(outcome((1.1, 0.0)), Gate.STATIC, RADII) is FailureClass.OTHER
    assert classify_failure(outcome((1.1, 0.0)), Gate.EMBODIED, RADII) is FailureClass.SUCCESS


def test_success_takes_precedence_over_a_nearby_other_instance():
    close_distractor = Footprint(1.3, -0.2, 1.7, 0.2)
    assert classify_failure(outcome((0.8, 0.0), (close_distractor,)), Gate.STATIC, RADII) is FailureClass.SUCCESS


def test_wrong_instance_takes_precedence_over_far():
    case = outcome((5.9, 0.0))  # 5.9 m from the answer, 0.7 m from the distractor
    assert classify_failure(case, Gate.STATIC, RADII) is FailureClass.WRONG_INSTANCE
    assert classify_failure(outcome((5.9, 0.0), others=()), Gate.STATIC, RADII) is FailureClass.FAR


def test_embodied_run_that_never_stopped_is_abstained():
    assert classify_failure(outcome(None), Gate.EMBODIED, RADII) is FailureClass.ABSTAINED


def test_radii_come_from_the_task_config():
    radii = PartitionRadii.from_task(TASK)
    assert radii == PartitionRadii(TASK.static_gate_radius, TASK.success_radius, TASK.far_miss_distance)


def test_radii_reject_negative_or_non_float_distances():
    with pytest.raises(ValueError, match="far_miss_distance"):
        PartitionRadii(1.0, 1.0, -2.0)
    with pytest.raises(ValueError, match="success_radius"):
        PartitionRadii(1.0, 1, 2.0)


def test_outcome_rejects_a_distractor_that_is_not_a_footprint():
    with pytest.raises(TypeError, match=r"other_instances\[0\]"):
        EpisodeOutcome(point=None, answer_point=ANSWER, answer_region=REGION, other_instances=((1.0, 2.0),))


# --- the other instances of the category ----------------------------------------------------------


def test_other_instances_exclude_the_answer_unless_its_place_is_vacated():
    w1 = state(obj("Vase_1", 0, 0), obj("Vase_2", 10, 0), obj("Mug_1", 3, 3))
    w2 = state(obj("Vase_1", 0, 5), obj("Vase_2", 10, 0), obj("Mug_1", 3, 3))
    moved = compute_answer(w1, w2, "Vase", Relation.MOVED, TASK)
    former = compute_answer(w1, w2, "Vase", Relation.FORMER, TASK)
    assert other_instance_footprints(w2, moved) == (w2["Vase_2"].box.footprint,)
    # Stopping beside the moved vase at its new place is a wrong instance for "where the vase was".
    assert other_instance_footprints(w2, former) == (w2["Vase_1"].box.footprint, w2["Vase_2"].box.footprint)


# --- the partition property -----------------------------------------------------------------------

coordinate = st.floats(-4.0, 4.0, allow_nan=False)
offset = st.floats(-3.0, 3.0, allow_nan=False)


@st.composite
def footprints(draw):
    x, z = draw(coordinate), draw(coordinate)
    return Footprint(x, z, x + draw(st.floats(0.0, 1.5)), z + draw(st.floats(0.0, 1.5)))


@st.composite
def outcomes(draw):
    region = draw(footprints())
    centre = region.center
    # Points are drawn around the answer so that every class, "other" included, comes up often.
    point = draw(st.one_of(st.none(), st.tuples(offset, offset).map(lambda d: (centre[0] + d[0], centre[1] + d[1]))))
    return EpisodeOutcome(
        point=point,
        answer_point=centre,
        answer_region=region,
        other_instances=tuple(draw(st.lists(footprints(), max_size=4))),
    )


radii = st.builds(PartitionRadii, st.floats(0.1, 2.0), st.floats(0.1, 2.0), st.floats(0.5, 4.0))


def holds(cls, case, gate, r):
    """Each class's defining predicate, evaluated independently of the precedence."""
    if cls is FailureClass.SUCCESS:
        if gate is Gate.STATIC:
            return static_success(case.point, case.answer_point, r.static_gate_radius)
        return embodied_success(case.point, case.answer_region, r.success_radius)
    if cls is FailureClass.ABSTAINED:
        return case.point is None
    if case.point is None:
        return False
    if cls is FailureClass.WRONG_INSTANCE:
        return any(f.distance_to(case.point) <= r.success_radius + ROUNDING_TOLERANCE for f in case.other_instances)
    dx, dz = case.point[0] - case.answer_point[0], case.point[1] - case.answer_point[1]
    if cls is FailureClass.FAR:
        return (dx * dx + dz * dz) ** 0.5 > r.far_miss_distance
    return True  # OTHER: the rest


@given(st.lists(outcomes(), max_size=30), st.sampled_from(Gate), radii)
def test_every_episode_lands_in_the_first_class_whose_predicate_holds_and_counts_sum_to_n(cases, gate, r):
    classes = [classify_failure(case, gate, r) for case in cases]
    for case, cls in zip(cases, classes, strict=True):
        first = next(c for c in FailureClass if holds(c, case, gate, r))
        assert cls is first
    table = tabulate_failures(classes)
    assert list(table.counts) == list(FailureClass)
    assert sum(table.counts.values()) == table.total == len(cases)
    if cases:
        assert sum(table.fractions.values()) == pytest.approx(1.0)


# --- lost in navigation and the table ---------------------------------------------------------------


def test_lost_in_navigation_is_static_success_with_embodied_failure():
    static = [True, True, False, False]
    embodied = [True, False, True, False]
    assert lost_in_navigation(static, embodied) == [False, True, False, False]
    with pytest.raises(ValueError, match="3 and 2"):
        lost_in_navigation([True, False, True], [True, False])


def test_table_counts_fractions_and_lost_in_navigation():
    S, A, W, F, R = (
        FailureClass.SUCCESS,
        FailureClass.ABSTAINED,
        FailureClass.WRONG_INSTANCE,
        FailureClass.FAR,
        FailureClass.OTHER,  # "the rest"
    )
    classes = [S, S, S, A, A, W, F, F, F, R]
    lost = [False, True, False, False, False, False, False, False, False, False]
    table = tabulate_failures(classes, lost)
    assert table.counts == {S: 3, A: 2, W: 1, F: 3, R: 1}
    assert table.total == 10
    assert table.fractions[F] == 0.3
    assert table.lost_in_navigation == 1
    assert table.lost_in_navigation_fraction == 0.1
    assert tabulate_failures(classes).lost_in_navigation is None


def test_table_without_lost_flags_reports_no_lost_fraction():
    assert tabulate_failures([FailureClass.SUCCESS]).lost_in_navigation_fraction is None


def test_table_refuses_lost_flags_on_static_failures_or_of_the_wrong_length():
    with pytest.raises(ValueError, match="episode 1 is lost in navigation but classed abstained"):
        tabulate_failures([FailureClass.SUCCESS, FailureClass.ABSTAINED], [False, True])
    with pytest.raises(ValueError, match="2 flags for 1 episodes"):
        tabulate_failures([FailureClass.SUCCESS], [True, False])
    with pytest.raises(TypeError, match=r"classes\[0\]"):
        tabulate_failures(["success"])


def test_empty_table_has_zero_counts_and_no_fractions():
    table = tabulate_failures([])
    assert table.total == 0 and set(table.counts.values()) == {0}
    with pytest.raises(ValueError, match="no episodes"):
        _ = table.fractions
