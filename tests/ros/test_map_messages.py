"""Message conversions of mapping_node and query_node (ovman_mapping.map_messages,
ovman_query.query_messages), checked without a graph."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

try:
    from builtin_interfaces.msg import Time
    from ovman_ros.messages import bundle_messages, camera_bundle_msg, camera_messages, header_msg, static_tf_message
    from rclpy.serialization import serialize_message
    from visualization_msgs.msg import Marker

    from ovman_interfaces.msg import InstanceChange
    from ovman_interfaces.srv import Query
    from ovman_mapping.map_messages import (
        BOX_NAMESPACE,
        LABEL_NAMESPACE,
        MapMessageError,
        MapNames,
        camera_bundle_frame,
        camera_from_transform,
        check_marker_style,
        instance_map_from_msg,
        instance_map_msg,
        map_markers,
        observation_from_bundle,
        observation_from_camera,
        observation_from_topics,
    )
    from ovman_query.query_messages import answer_markers, change_set_msg, check_answer_style, response_msg
    from ovman_ros import bundle_cdr
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_ros.tf_buffer import TransformBuffer

from ovman_core.boxes import Box3
from ovman_core.camera import Intrinsics
from ovman_core.config import ConfigError, load_config
from ovman_core.frames import thor_to_ros_point
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, WorldState
from ovman_mapping.instances import (
    CrossVisitEvidence,
    Instance,
    InstanceMap,
    Sighting,
    at_wire_precision,
    map_problem,
)
from ovman_query.change_set import Change, ChangeKind
from ovman_query.query_requests import QueryOutcome, Status
from ovman_ros import bundle

pytestmark = pytest.mark.ros

CONFIG = load_config()
FRAMES = CONFIG.frames
LIMITS = CONFIG.shared.limits
STEP_NS = round(CONFIG.mapping_node.node.step_dt * 1e9)
"""0.1 s: the test stamps (4.1 s) give the observation's step (41)."""
INTRINSICS = Intrinsics.from_vertical_fov(16, 12, 90.0)
STAMP = Time(sec=7, nanosec=5)


def observation(yaw_deg: float, horizon_deg: float, seed: int = 0) -> Observation:
    rng = np.random.default_rng(seed)
    h, w = INTRINSICS.height, INTRINSICS.width
    depth = rng.uniform(0.2, 6.0, (h, w)).astype(np.float32)
    depth[0, :3] = np.nan
    pose = AgentPose(x=1.0 / 3.0, z=-2.75, yaw_deg=yaw_deg, horizon_deg=horizon_deg)
    return Observation(
        rgb=rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
        depth=depth,
        segments=rng.integers(0, 3, (h, w), dtype=np.int32),
        segment_labels={1: "Vase", 2: "Chair"},
        segment_instances={1: "Vase_1", 2: "Chair_4"},
        pose=pose,
        camera_position=(pose.x, 1.576, pose.z),
        intrinsics=INTRINSICS,
        step=41,
    )


def tf_pose(messages) -> bundle.Transform:
    """The optical frame in ``map`` at the bundle's stamp, looked up on the tree its messages carry."""
    tree = TransformBuffer()
    tree.set_message(static_tf_message(FRAMES, 0), static=True)
    tree.set_message(messages.tf, static=False)
    return tree.lookup(FRAMES.map, messages.rgb.header.frame_id, messages.stamp_ns)


def from_bundle(messages) -> Observation:
    return observation_from_bundle(
        messages.rgb,
        messages.depth,
        messages.instances,
        bundle.parse_labels_json(messages.labels.data),
        messages.camera_info,
        tf_pose(messages),
        FRAMES.map,
        STEP_NS,
    )


@pytest.mark.parametrize(("yaw", "horizon"), [(0.0, 30.0), (90.0, 0.0), (180.0, -30.0), (270.0, 60.0)])
def test_a_bundle_becomes_the_observation_it_was_made_of_without_ground_truth(yaw, horizon):
    original = observation(yaw, horizon)
    got = from_bundle(bundle_messages(original, WorldState.of([]), 4_100_000_000, FRAMES))
    assert got.pose == original.pose and got.camera_position == original.camera_position
    assert got.intrinsics == original.intrinsics and got.step == original.step
    assert got.segment_labels == original.segment_labels and got.segment_instances == {}
    assert np.array_equal(got.rgb, original.rgb) and np.array_equal(got.segments, original.segments)
    assert np.array_equal(got.depth, original.depth, equal_nan=True) and got.depth.dtype == np.float32


def test_a_bundle_keyed_by_topic_gives_the_same_observation():
    messages = bundle_messages(observation(90.0, 30.0), WorldState.of([]), 4_100_000_000, FRAMES)
    items = {
        bundle.RGB_TOPIC: messages.rgb,
        bundle.DEPTH_TOPIC: messages.depth,
        bundle.INSTANCES_TOPIC: messages.instances,
        bundle.INSTANCE_LABELS_TOPIC: bundle.parse_labels_json(messages.labels.data),
        bundle.CAMERA_INFO_TOPIC: messages.camera_info,
    }
    got, expected = observation_from_topics(items, tf_pose(messages), FRAMES.map, STEP_NS), from_bundle(messages)
    assert (got.pose, got.step, got.segment_labels) == (expected.pose, expected.step, expected.segment_labels)
    assert np.array_equal(got.rgb, expected.rgb) and np.array_equal(got.depth, expected.depth, equal_nan=True)


def test_a_camera_bundle_message_gives_the_same_observation_as_rclpy_or_as_bundle_cdr_reads_it():
    messages = bundle_messages(observation(90.0, 30.0), WorldState.of([]), 4_100_000_000, FRAMES)
    expected = from_bundle(messages)
    combined = camera_bundle_msg(camera_messages(messages))
    for message in (combined, bundle_cdr.decode(serialize_message(combined))):
        stamp, frame, items = camera_bundle_frame(message)
        assert (stamp, frame) == (4_100_000_000, FRAMES.optical)
        got = observation_from_topics(items, tf_pose(messages), FRAMES.map, STEP_NS)
        assert (got.pose, got.step, got.segment_labels, got.intrinsics) == (
            expected.pose,
            expected.step,
            expected.segment_labels,
            expected.intrinsics,
        )
        assert np.array_equal(got.rgb, expected.rgb) and np.array_equal(got.segments, expected.segments)
        assert np.array_equal(got.depth, expected.depth, equal_nan=True)
        assert got.rgb.flags.writeable and got.depth.flags.writeable  # copies, not views of the received bytes
    combined.depth.header = header_msg(4_100_000_001, FRAMES.optical)  # the images shared one header object
    with pytest.raises(MapMessageError, match=f"{bundle.DEPTH_TOPIC} 4100000001"):
        camera_bundle_frame(combined)


def test_any_level_camera_pose_is_recovered_to_float_precision():
    for yaw, horizon in ((12.345678, 17.5), (359.9, -29.0), (200.0, 45.25)):
        messages = bundle_messages(observation(yaw, horizon), WorldState.of([]), 1, FRAMES)
        position, got_yaw, got_horizon = camera_from_transform(tf_pose(messages), FRAMES.map)
        assert got_yaw == pytest.approx(yaw, abs=1e-8) and got_horizon == pytest.approx(horizon, abs=1e-8)
        assert position == (1.0 / 3.0, 1.576, -2.75)


def test_unusable_camera_poses_and_images_are_refused():
    messages = bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES)
    pose = tf_pose(messages)
    with pytest.raises(MapMessageError, match="expected 'map'"):
        camera_from_transform(dataclasses.replace(pose, parent="odom"), FRAMES.map)
    # Turn the camera about its own viewing axis (optical z): a roll.
    rolled = Rotation.from_quat(pose.rotation) * Rotation.from_rotvec((0.0, 0.0, 0.2))
    with pytest.raises(MapMessageError, match="rolled"):
        camera_from_transform(dataclasses.replace(pose, rotation=tuple(rolled.as_quat())), FRAMES.map)
    messages = bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES)
    messages.camera_info.width = 32
    with pytest.raises(MapMessageError, match="expected rgb8 32x12"):
        from_bundle(messages)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("k", "why"),
    [
        ([0.0] * 9, "fx = k"),  # what an uncalibrated driver publishes
        ([NAN] * 9, "finite"),
        ([8.0, 0.0, 7.5, 0.0, 8.0, 5.5, 0.0, 0.0, NAN], "finite"),
        ([INF, 0.0, 7.5, 0.0, 8.0, 5.5, 0.0, 0.0, 1.0], "finite"),
        ([-8.0, 0.0, 7.5, 0.0, 8.0, 5.5, 0.0, 0.0, 1.0], "must be positive"),
        ([8.0, 0.5, 7.5, 0.0, 8.0, 5.5, 0.0, 0.0, 1.0], "no skew"),
        ([8.0, 0.0, 70.5, 0.0, 8.0, 5.5, 0.0, 0.0, 1.0], "principal point"),
        ([8.0, 0.0, 7.5, 0.0, 8.0, 5.5, 0.0, 0.0, 0.0], "last row"),
    ],
)
def test_a_camera_info_that_is_not_a_pinhole_matrix_is_refused_naming_k(k, why):
    messages = bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES)
    messages.camera_info.k = np.array(k, dtype=np.float64)
    with pytest.raises(MapMessageError, match=rf"CameraInfo\.k = .*{why}"):
        observation_from_camera(messages.rgb, messages.depth, messages.camera_info, tf_pose(messages), FRAMES.map, 1)


def test_a_camera_info_of_zero_size_is_refused():
    messages = bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES)
    messages.camera_info.width = 0
    with pytest.raises(MapMessageError, match="width and height must be positive"):
        from_bundle(messages)


@pytest.mark.parametrize(
    "position", [(NAN, 0.0, 1.0), (0.0, INF, 1.0), (0.0, 0.0, -INF)], ids=["nan-x", "inf-y", "-inf-z"]
)
def test_a_non_finite_camera_pose_is_refused(position):
    pose = tf_pose(bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES))
    with pytest.raises(MapMessageError, match="non-finite position"):
        camera_from_transform(dataclasses.replace(pose, translation=position), FRAMES.map)


def test_a_zero_quaternion_is_refused():
    pose = tf_pose(bundle_messages(observation(0.0, 30.0), WorldState.of([]), 1, FRAMES))
    with pytest.raises(MapMessageError, match="invalid quaternion"):
        camera_from_transform(dataclasses.replace(pose, rotation=(0.0, 0.0, 0.0, 0.0)), FRAMES.map)


def _set(message, path: str, value) -> None:
    *parents, leaf = path.split(".")
    target = message
    for part in parents:
        target = getattr(target, part)
    setattr(target, leaf, value)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("centroid.x", NAN, "position holds nan"),
        ("centroid.y", INF, "position holds -?inf"),  # REP 103 y is the world -x
        ("centroid.z", 1e308, "position holds 1e"),
        ("centroid.x", -1e308, "position holds -1e"),
        ("box_min.x", NAN, "box holds nan"),
        ("box_max.z", INF, "box holds inf"),
        ("box_max.y", 1e12, "box holds -?1"),
        ("points", [1e30, 0.0, 0.0], "points holds"),
        ("feature", [NAN, 0.0, 0.8], "feature holds a non-finite"),
        ("feature", [INF, 0.0, 0.8], "feature holds a non-finite"),
        ("colour_histogram", [NAN, 0.5, 0.5, 0.0], "colour_histogram holds a non-finite"),
        ("colour_histogram", [-0.5, 0.5, 0.5, 0.5], "colour_histogram holds a negative"),
        ("label_probs", [-5.0, 0.25], "label probabilities"),
        ("label_probs", [NAN, 0.25], "label probabilities"),
        ("label_probs", [0.75, 1.5], "label probabilities"),
        ("label_probs", [0.75, 0.75], "label probabilities"),
        ("label_probs", [0.0, 0.0], "label probabilities"),
    ],
)
def test_an_instance_map_with_a_non_finite_or_out_of_range_field_is_refused_naming_it(field, value, why):
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    _set(message.instances[1], field, value)
    with pytest.raises(MapMessageError, match=f"visit-2 map: instance v2:1: {why}"):
        instance_map_from_msg(message, LIMITS)


def test_truncated_label_distributions_are_accepted():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    message.instances[0].label_probs = [0.6, 0.1]  # a producer sending its top candidates only
    instance_map_from_msg(message, LIMITS)


def test_a_map_over_the_instance_limit_is_refused_before_it_is_converted():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    limits = dataclasses.replace(LIMITS, max_map_instances=1)
    with pytest.raises(MapMessageError, match=r"2 instances; at most 1 .*limits\.max_map_instances"):
        instance_map_from_msg(message, limits)
    instance_map_from_msg(message, dataclasses.replace(LIMITS, max_map_instances=2))


def core_instance(uid: str, centre: tuple[float, float, float], moving: bool = False) -> Instance:
    box = Box3.from_center_size(centre, (0.3, 0.5, 0.4))
    return Instance(
        uid=uid,
        position=centre,
        box=box,
        points=np.array([box.lo, box.hi]),
        feature=np.array([0.6, 0.0, 0.8]),
        colour=np.array([0.25, 0.75, 0.0, 0.0]),
        labels={"Vase": 0.75, "Bottle": 0.25},
        sightings=(Sighting(0, 3, centre, 50), Sighting(2, 9, centre, 80)),
        moving=moving,
    )


MAP = InstanceMap(
    visit=2,
    instances=(core_instance("v2:0", (1.0 / 3.0, 0.25, -2.0)), core_instance("v2:1", (4.0, 0.7, 0.1), moving=True)),
    encoder="label:test",
)
FRAME_STAMPS = [1_000_000_000, 1_100_000_000, 1_300_000_000]


def test_an_instance_map_round_trips_through_its_message_in_rep103():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    assert message.header.frame_id == FRAMES.map and message.visit == 2 and message.encoder == "label:test"
    item = message.instances[0]
    assert item.id == 0 and item.label == "Vase" and list(item.label_candidates) == ["Vase", "Bottle"]
    assert (item.centroid.x, item.centroid.y, item.centroid.z) == thor_to_ros_point(MAP.instances[0].position)
    assert item.box_min.x <= item.box_max.x and item.box_min.y <= item.box_max.y
    assert (item.first_seen.sec, item.first_seen.nanosec, item.last_seen.nanosec) == (1, 0, 300_000_000)
    assert item.num_observations == 2 and list(item.colour_histogram) == [0.25, 0.75, 0.0, 0.0]
    back, ids = instance_map_from_msg(message, LIMITS)
    assert ids == {"v2:0": 0, "v2:1": 1} and back.visit == 2 and back.encoder == "label:test"
    for got, sent in zip(back, MAP, strict=True):
        assert got.position == sent.position and got.box == sent.box
        assert got.labels == sent.labels and got.moving == sent.moving and len(got.sightings) == 2
        assert np.allclose(got.feature, sent.feature, atol=1e-7) and np.allclose(got.colour, sent.colour)
    assert back.instances[0].last_step > back.instances[0].first_step  # stamps keep the order of sightings


def test_an_instance_at_wire_precision_holds_exactly_what_its_message_gives_back():
    rng = np.random.default_rng(7)
    feature = rng.normal(size=384)
    sent = dataclasses.replace(
        core_instance("v1:0", (0.1, 0.2, 0.3)),
        feature=feature / np.linalg.norm(feature),
        colour=rng.dirichlet(np.ones(64)),
        labels={"Bottle": 0.1, "Vase": 0.6, "Cup": 0.3},
    )
    message = instance_map_msg(
        InstanceMap(visit=1, instances=(sent,), encoder="label:test"), FRAME_STAMPS, "map", STAMP
    )
    (got,), _ = instance_map_from_msg(message, LIMITS)
    wire = at_wire_precision(sent)
    assert np.array_equal(got.feature, wire.feature) and np.array_equal(got.colour, wire.colour)
    assert np.array_equal(got.points, wire.points) and len(message.instances[0].points) == 3 * len(sent.points)
    assert list(got.labels.items()) == list(wire.labels.items())
    assert not np.array_equal(wire.feature, sent.feature), "float64 values change at float32 precision"
    assert wire.label == sent.label and wire.position == sent.position


def test_instance_points_travel_in_rep103_and_non_finite_or_partial_ones_are_refused():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    sent = MAP.instances[0].points
    wire = np.asarray(message.instances[0].points).reshape(-1, 3)
    assert np.allclose(wire, np.array([thor_to_ros_point(p) for p in sent]), atol=1e-6)
    for bad, why in (([1.0, 2.0], "triples"), ([1.0, float("nan"), 3.0], "non-finite")):
        message.instances[0].points = bad
        with pytest.raises(MapMessageError, match=why):
            instance_map_from_msg(message, LIMITS)


def test_maps_the_query_cannot_use_are_refused():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    message.instances[1].id = 0
    with pytest.raises(MapMessageError, match="appears twice"):
        instance_map_from_msg(message, LIMITS)
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    message.instances[0].feature = []
    with pytest.raises(MapMessageError, match="needs every feature"):
        instance_map_from_msg(message, LIMITS)
    with pytest.raises(MapMessageError, match="frame stamps"):
        instance_map_msg(MAP, FRAME_STAMPS[:2], FRAMES.map, STAMP)


def test_map_markers_start_with_deleteall_and_give_each_instance_a_box_and_a_label():
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    style = CONFIG.mapping_node.markers
    markers = map_markers(message, style).markers
    assert markers[0].action == Marker.DELETEALL and len(markers) == 5
    boxes = [m for m in markers if m.ns == BOX_NAMESPACE.format(visit=2)]
    labels = [m for m in markers if m.ns == LABEL_NAMESPACE.format(visit=2)]
    assert [m.id for m in boxes] == [m.id for m in labels] == [0, 1]
    assert boxes[0].scale.z == pytest.approx(0.5) and labels[0].pose.position.z > message.instances[0].box_max.z
    assert [boxes[0].color.r, boxes[1].color.r] == pytest.approx([style.visit2_rgb[0], style.moving_rgb[0]])
    assert labels[1].text.endswith("(moving)")
    with pytest.raises(ConfigError, match="moving_rgb"):
        check_marker_style(dataclasses.replace(style, moving_rgb=[1.0, 0.0]))


def test_query_outcomes_fill_the_response_and_the_answer_markers():
    answered = QueryOutcome(Status.ANSWERED, "why", "two_visit", "moved", "vase", (1.5, -2.0), 3, 4, 0.9)
    response = response_msg(answered, FRAMES.map, STAMP, Query.Response())
    assert response.status == Query.Response.ANSWERED and response.answered
    assert (response.goal.point.x, response.goal.point.y, response.goal.point.z) == thor_to_ros_point((1.5, 0.0, -2.0))
    assert response.goal.header.frame_id == FRAMES.map and (response.instance_visit1, response.instance_visit2) == (
        3,
        4,
    )
    markers = answer_markers(answered, 1.0, CONFIG.query_node.markers, FRAMES.map, STAMP).markers
    assert [m.action for m in markers] == [Marker.DELETEALL, Marker.ADD, Marker.ADD]
    assert markers[1].scale.x == 2.0 and markers[1].pose.position.x == response.goal.point.x

    abstained = QueryOutcome(Status.ABSTAINED, "nothing fits", "two_visit", "removed", "vase")
    response = response_msg(abstained, FRAMES.map, STAMP, Query.Response())
    assert response.status == Query.Response.ABSTAINED and not response.answered and response.goal.header.frame_id == ""
    assert (response.instance_visit1, response.instance_visit2) == (-1, -1)
    assert len(answer_markers(abstained, 1.0, CONFIG.query_node.markers, FRAMES.map, STAMP).markers) == 1
    with pytest.raises(ConfigError, match=r"markers\.rgb"):
        check_answer_style(dataclasses.replace(CONFIG.query_node.markers, rgb=[2.0, 0.0, 0.0]))


def test_the_change_set_message_carries_wire_ids_and_minus_one_where_absent():
    changes = [
        Change(ChangeKind.MOVED, "Vase", "v1:0", "v2:5", (0.0, 0.3, 0.0), (0.0, 0.3, 4.0), 4.0, 0.01),
        Change(ChangeKind.REMOVED, "Chair", "v1:1", None, (3.0, 0.3, 0.0), None, 0.0, 0.3),
    ]
    message = change_set_msg(changes, {"v1:0": 0, "v1:1": 1}, {"v2:5": 5}, FRAMES.map, STAMP)
    moved, removed = message.changes
    assert (moved.kind, moved.id_visit1, moved.id_visit2) == (InstanceChange.MOVED, 0, 5)
    assert moved.position_visit2.x == pytest.approx(4.0) and moved.displacement == pytest.approx(4.0)
    assert (removed.kind, removed.id_visit1, removed.id_visit2) == (InstanceChange.REMOVED, 1, -1)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    field=st.sampled_from(("centroid", "box_min", "box_max")),
    axis=st.sampled_from("xyz"),
    value=st.floats(allow_nan=True, allow_infinity=True),
    probs=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=2),
)
def test_an_instance_map_with_any_geometry_is_refused_or_finite_and_in_range(field, axis, value, probs):
    """A bounded fuzz (issue 22): a received map is refused naming it, or every instance passes."""
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    setattr(getattr(message.instances[0], field), axis, value)
    message.instances[1].label_probs = probs
    try:
        received, _ = instance_map_from_msg(message, LIMITS)
    except MapMessageError as err:
        assert "visit-2 map" in str(err)
    else:
        assert map_problem(received, LIMITS.max_coordinate) is None


def test_map_names_count_the_maps_and_a_visit_2_map_names_the_latest_visit_1_map():
    names_ = MapNames(session=77)
    assert names_.name(2) == ("77-1", "")  # a visit 2 before any visit 1 follows nothing
    assert names_.name(1) == ("77-2", "")
    assert names_.name(2) == ("77-3", "77-2")
    assert names_.name(1) == ("77-4", "")
    assert names_.name(2) == ("77-5", "77-4")
    message = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP, "77-5", "77-4")
    assert (message.map_id, message.follows) == ("77-5", "77-4")


def test_cross_visit_evidence_round_trips_by_wire_id_and_inconsistent_evidence_is_refused():
    evidence = CrossVisitEvidence(gone=frozenset({"v1:4", "v1:12"}), new=frozenset({"v2:1"}))
    message = instance_map_msg(dataclasses.replace(MAP, prior=evidence), FRAME_STAMPS, FRAMES.map, STAMP)
    assert message.cross_visit and list(message.gone_ids) == [4, 12] and list(message.new_ids) == [1]
    back, _ = instance_map_from_msg(message, LIMITS)
    assert back.prior == evidence
    plain = instance_map_msg(MAP, FRAME_STAMPS, FRAMES.map, STAMP)
    assert not plain.cross_visit and instance_map_from_msg(plain, LIMITS)[0].prior is None
    unknown = instance_map_msg(dataclasses.replace(MAP, prior=evidence), FRAME_STAMPS, FRAMES.map, STAMP)
    unknown.new_ids = [7]
    with pytest.raises(MapMessageError, match=r"new_ids names \[7\]"):
        instance_map_from_msg(unknown, LIMITS)
    plain.gone_ids = [3]
    with pytest.raises(MapMessageError, match="cross_visit is false"):
        instance_map_from_msg(plain, LIMITS)
    first = instance_map_msg(dataclasses.replace(MAP, visit=1), FRAME_STAMPS, FRAMES.map, STAMP)
    first.cross_visit = True
    with pytest.raises(MapMessageError, match="visit-2 map only"):
        instance_map_from_msg(first, LIMITS)
    with pytest.raises(MapMessageError, match="not an instance of a visit-1 map"):
        instance_map_msg(
            dataclasses.replace(MAP, prior=CrossVisitEvidence(gone=frozenset({"x"}))), FRAME_STAMPS, "map", STAMP
        )
