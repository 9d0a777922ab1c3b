"""The ovman_interfaces (and stand-in tf2_msgs) types: field contract, constants, CDR round trips.

Needs the interface packages built into the running venv (scripts/build_interfaces.sh); no ROS
graph is started.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

try:
    from builtin_interfaces.msg import Duration, Time
    from geometry_msgs.msg import Point, PointStamped, Pose, PoseStamped, Quaternion, TransformStamped
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import Header
    from tf2_msgs.msg import TFMessage
    from unique_identifier_msgs.msg import UUID

    from ovman_interfaces.action import Navigate
    from ovman_interfaces.msg import CameraBundle, ChangeSet, Instance, InstanceChange, InstanceMap, TargetUpdate
    from ovman_interfaces.srv import ActSequence, LoadVisits, MapVisit, Query
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

pytestmark = pytest.mark.ros

UINT32_MAX = 2**32 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def round_trip(message):
    """Serialise to CDR and back, through the C type support of the message's package."""
    data = serialize_message(message)
    assert isinstance(data, bytes) and data
    return deserialize_message(data, type(message))


def assert_round_trips(message) -> None:
    # A message equal to its default would not show that any field survives the trip.
    assert message != type(message)(), f"{type(message).__name__} example has only default values"
    assert round_trip(message) == message


# --- examples with every field set away from its default (floats exact in float32) ---


def header(sec: int = 12, nanosec: int = 500_000_000) -> Header:
    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id="map")


def point(x: float, y: float, z: float) -> Point:
    return Point(x=x, y=y, z=z)


def pose_stamped(x: float, y: float) -> PoseStamped:
    half_turn_z = Quaternion(x=0.0, y=0.0, z=math.sin(math.pi / 8), w=math.cos(math.pi / 8))
    return PoseStamped(header=header(), pose=Pose(position=point(x, y, 0.0), orientation=half_turn_z))


def example_instance(instance_id: int = 7) -> Instance:
    return Instance(
        id=instance_id,
        label="vase",
        label_candidates=["vase", "bottle", "cup"],
        label_probs=[0.75, 0.125, 0.0625],
        centroid=point(1.5, -2.25, 0.875),
        box_min=point(1.375, -2.375, 0.75),
        box_max=point(1.625, -2.125, 1.0),
        feature_dim=4,
        feature=[0.5, -0.5, 0.5, -0.5],
        first_seen=Time(sec=3, nanosec=250),
        last_seen=Time(sec=41, nanosec=999_999_999),
        num_observations=17,
        moving=True,
    )


def example_instance_map() -> InstanceMap:
    return InstanceMap(
        header=header(),
        map_id="1764770000000000000-2",
        follows="1764770000000000000-1",
        visit=InstanceMap.VISIT_2,
        encoder="clip:ViT-B-32",
        instances=[example_instance(0), example_instance(UINT32_MAX), Instance(id=3, label="chair")],
        cross_visit=True,
        gone_ids=[0, 7, UINT32_MAX],
        new_ids=[3],
    )


def example_change(kind: int = InstanceChange.MOVED) -> InstanceChange:
    return InstanceChange(
        kind=kind,
        label="laptop",
        id_visit1=4,
        id_visit2=11,
        position_visit1=point(0.5, 1.0, 0.75),
        position_visit2=point(3.5, -1.0, 0.5),
        displacement=3.5,
        cost=0.25,
    )


def example_change_set() -> ChangeSet:
    removed = InstanceChange(kind=InstanceChange.REMOVED, label="book", id_visit1=2, cost=1.5)
    appeared = InstanceChange(kind=InstanceChange.APPEARED, label="mug", id_visit2=9, cost=2.0)
    return ChangeSet(header=header(), changes=[example_change(), removed, appeared])


def example_query_request() -> Query.Request:
    return Query.Request(
        text="",
        category="vase",
        relation="former",
        arm="oracle_grounding",
        exclude_ids=[0, 5, UINT32_MAX],
    )


def example_query_response() -> Query.Response:
    return Query.Response(
        status=Query.Response.ANSWERED,
        answered=True,
        goal=PointStamped(header=header(), point=point(2.0, -1.5, 0.0)),
        relation="moved",
        noun_phrase="the red vase",
        instance_visit1=3,
        instance_visit2=INT32_MAX,
        confidence=0.875,
        explanation="vase 3 (visit 1) matched vase 12 (visit 2), moved 2.4 m",
    )


def example_navigate_goal() -> Navigate.Goal:
    return Navigate.Goal(
        target=PointStamped(header=header(), point=point(4.0, 2.5, 0.0)),
        target_may_move=True,
        has_region=True,
        region_min=point(3.75, 2.25, 0.0),
        region_max=point(4.25, 2.75, 1.25),
        success_radius=1.5,
        max_steps=500,
    )


def example_target_update() -> TargetUpdate:
    return TargetUpdate(
        header=header(),
        point=point(4.5, 2.0, 0.0),
        has_region=True,
        region_min=point(4.25, 1.75, 0.0),
        region_max=point(4.75, 2.25, 0.5),
    )


def example_navigate_result() -> Navigate.Result:
    return Navigate.Result(
        error_code=Navigate.Result.COLLISION_LIMIT,
        error_msg="20 collisions on the way",
        success=False,
        final_pose=pose_stamped(3.0, 1.0),
        path_length=12.75,
        steps=213,
        collisions=20,
        replans=4,
    )


def example_navigate_feedback() -> Navigate.Feedback:
    return Navigate.Feedback(
        current_pose=pose_stamped(1.0, 0.5),
        current_target=point(4.0, 2.5, 0.0),
        distance_remaining=6.25,
        navigation_time=Duration(sec=8, nanosec=125_000_000),
        number_of_replans=2,
        steps_taken=37,
        collisions=1,
    )


def example_tf_message() -> TFMessage:
    transform = TransformStamped(header=header(), child_frame_id="odom")
    transform.transform.translation.x = 0.25
    transform.transform.rotation.w = 1.0
    return TFMessage(transforms=[transform, TransformStamped(child_frame_id="base_link")])


EXAMPLES = {
    "Instance": example_instance,
    "InstanceMap": example_instance_map,
    "InstanceChange": example_change,
    "ChangeSet": example_change_set,
    "Query.Request": example_query_request,
    "Query.Response": example_query_response,
    "Navigate.Goal": example_navigate_goal,
    "Navigate.Result": example_navigate_result,
    "Navigate.Feedback": example_navigate_feedback,
    "TargetUpdate": example_target_update,
    "TFMessage": example_tf_message,
}


@pytest.mark.parametrize("make_example", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_every_interface_type_round_trips_through_cdr(make_example) -> None:
    assert_round_trips(make_example())


def test_navigate_feedback_message_with_goal_id_round_trips() -> None:
    # The action's wire type for feedback wraps Feedback with the goal's UUID.
    message = Navigate.Impl.FeedbackMessage(goal_id=UUID(uuid=list(range(1, 17))), feedback=example_navigate_feedback())
    assert_round_trips(message)


def test_default_instance_map_round_trips_with_empty_arrays() -> None:
    assert round_trip(InstanceMap()) == InstanceMap()
    assert round_trip(Instance()).feature.tolist() == []


# --- property-based round trips ---

# ROS strings are UTF-8 without NUL (the C string is NUL-terminated); no lone surrogates.
ros_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
float32 = st.floats(width=32, allow_nan=False)
uint32 = st.integers(0, UINT32_MAX)
time_msg = st.builds(Time, sec=st.integers(INT32_MIN, INT32_MAX), nanosec=st.integers(0, 999_999_999))
point_msg = st.builds(Point, x=st.floats(allow_nan=False), y=st.floats(allow_nan=False), z=st.floats(allow_nan=False))


@st.composite
def instances(draw) -> Instance:
    labels = draw(st.lists(ros_text, max_size=5))
    feature = draw(st.lists(float32, max_size=16))
    return Instance(
        id=draw(uint32),
        label=draw(ros_text),
        label_candidates=labels,
        label_probs=draw(st.lists(st.floats(0.0, 1.0, width=32), min_size=len(labels), max_size=len(labels))),
        centroid=draw(point_msg),
        box_min=draw(point_msg),
        box_max=draw(point_msg),
        feature_dim=len(feature),
        feature=feature,
        first_seen=draw(time_msg),
        last_seen=draw(time_msg),
        num_observations=draw(uint32),
        moving=draw(st.booleans()),
    )


@settings(max_examples=60, deadline=None)
@given(instance=instances())
def test_any_instance_round_trips(instance: Instance) -> None:
    assert round_trip(instance) == instance


@settings(max_examples=60, deadline=None)
@given(
    text=ros_text,
    category=ros_text,
    relation=st.sampled_from(["", "moved", "former", "removed", "appeared", "stable", "moving"]),
    arm=st.sampled_from(
        ["", "two_visit", "single_visit", "oracle_grounding", "oracle_positions", "given_answer", "category_only"]
    ),
    exclude_ids=st.lists(uint32, max_size=20),
)
def test_any_query_request_round_trips(
    text: str, category: str, relation: str, arm: str, exclude_ids: list[int]
) -> None:
    request = Query.Request(text=text, category=category, relation=relation, arm=arm, exclude_ids=exclude_ids)
    assert round_trip(request) == request


@settings(max_examples=40, deadline=None)
@given(
    kind=st.integers(0, 4),
    ids=st.tuples(st.integers(-1, INT32_MAX), st.integers(-1, INT32_MAX)),
    displacement=st.floats(0.0, 100.0, width=32),
    cost=float32,
)
def test_any_instance_change_round_trips(kind: int, ids: tuple[int, int], displacement: float, cost: float) -> None:
    change = InstanceChange(
        kind=kind, label="x", id_visit1=ids[0], id_visit2=ids[1], displacement=displacement, cost=cost
    )
    assert round_trip(change) == change


# --- constants and defaults ---


def type_id(value) -> str | None:
    """Test id for a message type parameter; None lets pytest number the other parameters."""
    return value.__name__ if isinstance(value, type) else None


CONSTANTS = [
    (InstanceMap, {"VISIT_1": 1, "VISIT_2": 2}),
    (InstanceChange, {"STAYED": 0, "MOVED": 1, "REMOVED": 2, "APPEARED": 3, "MOVING": 4}),
    (Query.Response, {"ANSWERED": 0, "ABSTAINED": 1, "PARSE_FAILED": 2, "NO_MAP": 3, "INVALID_REQUEST": 4}),
    (
        Navigate.Result,
        {
            "NONE": 0,
            "UNKNOWN": 1,
            "UNREACHABLE": 2,
            "TIMEOUT": 3,
            "CANCELED": 4,
            "NO_TARGET": 5,
            "INVALID_GOAL": 6,
            "COLLISION_LIMIT": 7,
            "SIM_FAILURE": 8,
        },
    ),
]


@pytest.mark.parametrize(("message_type", "expected"), CONSTANTS, ids=type_id)
def test_constants_have_the_documented_values(message_type, expected: dict[str, int]) -> None:
    for name, value in expected.items():
        assert getattr(message_type, name) == value, f"{message_type.__name__}.{name}"


def test_absent_instance_ids_default_to_minus_one() -> None:
    change = InstanceChange()
    assert (change.id_visit1, change.id_visit2) == (-1, -1)
    response = Query.Response()
    assert (response.instance_visit1, response.instance_visit2) == (-1, -1)
    assert response.status == Query.Response.ANSWERED and not response.answered


# --- the field contract the nodes and the core rely on ---

FIELDS = {
    Instance: {
        "id": "uint32",
        "label": "string",
        "label_candidates": "sequence<string>",
        "label_probs": "sequence<float>",
        "centroid": "geometry_msgs/Point",
        "box_min": "geometry_msgs/Point",
        "box_max": "geometry_msgs/Point",
        "feature_dim": "uint32",
        "points": "sequence<float>",
        "feature": "sequence<float>",
        "colour_histogram": "sequence<float>",
        "first_seen": "builtin_interfaces/Time",
        "last_seen": "builtin_interfaces/Time",
        "num_observations": "uint32",
        "moving": "boolean",
    },
    InstanceMap: {
        "header": "std_msgs/Header",
        "map_id": "string",
        "follows": "string",
        "visit": "uint8",
        "encoder": "string",
        "instances": "sequence<ovman_interfaces/Instance>",
        "cross_visit": "boolean",
        "gone_ids": "sequence<uint32>",
        "new_ids": "sequence<uint32>",
    },
    InstanceChange: {
        "kind": "uint8",
        "label": "string",
        "id_visit1": "int32",
        "id_visit2": "int32",
        "position_visit1": "geometry_msgs/Point",
        "position_visit2": "geometry_msgs/Point",
        "displacement": "float",
        "cost": "float",
    },
    ChangeSet: {"header": "std_msgs/Header", "changes": "sequence<ovman_interfaces/InstanceChange>"},
    MapVisit.Request: {"visit": "uint8", "expected_frames": "uint32", "timeout_s": "double"},
    MapVisit.Response: {
        "success": "boolean",
        "message": "string",
        "frames": "uint32",
        "instances": "uint32",
        "skipped": "uint32",
        "map_id": "string",
    },
    LoadVisits.Request: {"visit2": "string"},
    LoadVisits.Response: {"success": "boolean", "message": "string", "visit1": "string", "visit2": "string"},
    Query.Request: {
        "text": "string",
        "category": "string",
        "relation": "string",
        "arm": "string",
        "exclude_ids": "sequence<uint32>",
    },
    Query.Response: {
        "status": "uint8",
        "answered": "boolean",
        "goal": "geometry_msgs/PointStamped",
        "relation": "string",
        "noun_phrase": "string",
        "instance_visit1": "int32",
        "instance_visit2": "int32",
        "confidence": "float",
        "explanation": "string",
    },
    Navigate.Goal: {
        "target": "geometry_msgs/PointStamped",
        "target_may_move": "boolean",
        "update_every_step": "boolean",
        "has_region": "boolean",
        "region_min": "geometry_msgs/Point",
        "region_max": "geometry_msgs/Point",
        "success_radius": "float",
        "max_steps": "uint32",
    },
    Navigate.Result: {
        "error_code": "uint16",
        "error_msg": "string",
        "success": "boolean",
        "final_pose": "geometry_msgs/PoseStamped",
        "path_length": "float",
        "steps": "uint32",
        "collisions": "uint32",
        "replans": "uint32",
    },
    Navigate.Feedback: {
        "current_pose": "geometry_msgs/PoseStamped",
        "current_target": "geometry_msgs/Point",
        "distance_remaining": "float",
        "navigation_time": "builtin_interfaces/Duration",
        "number_of_replans": "uint32",
        "steps_taken": "uint32",
        "collisions": "uint32",
    },
    TargetUpdate: {
        "header": "std_msgs/Header",
        "point": "geometry_msgs/Point",
        "has_region": "boolean",
        "region_min": "geometry_msgs/Point",
        "region_max": "geometry_msgs/Point",
    },
    ActSequence.Request: {
        "actions": "sequence<string>",
        "expected": "sequence<geometry_msgs/Pose>",
        "position_tolerance": "double",
        "yaw_tolerance_deg": "double",
    },
    ActSequence.Response: {
        "success": "sequence<boolean>",
        "collided": "sequence<boolean>",
        "poses": "sequence<geometry_msgs/PoseStamped>",
        "message": "string",
        "step": "uint64",
    },
    TFMessage: {"transforms": "sequence<geometry_msgs/TransformStamped>"},
    # The members with 8-byte fields first (ovman_ros.bundle_cdr composes it from recorded CDR).
    CameraBundle: {
        "camera_info": "sensor_msgs/CameraInfo",
        "rgb": "sensor_msgs/Image",
        "depth": "sensor_msgs/Image",
        "instances": "sensor_msgs/Image",
        "labels": "std_msgs/String",
    },
}


@pytest.mark.parametrize(("message_type", "expected"), FIELDS.items(), ids=type_id)
def test_fields_match_the_interface_contract(message_type, expected: dict[str, str]) -> None:
    assert message_type.get_fields_and_field_types() == expected
