"""sim_node's message conversions (ovman_ros.messages), checked without a graph."""

from __future__ import annotations

import json

import numpy as np
import pytest

try:
    from geometry_msgs.msg import Pose
    from ovman_ros.messages import (
        CAMERA_MESSAGES,
        MessageError,
        bundle_messages,
        camera_bundle_items,
        camera_bundle_msg,
        camera_messages,
        depth_array,
        header_msg,
        image_array,
        image_msg,
        occupancy_grid_msg,
        stamp_of,
        start_pose_from_msg,
    )
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.camera import Intrinsics
from ovman_core.config import load_config
from ovman_core.grid import from_occupancy_fields, grid_from_reachable, to_occupancy_fields
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, WorldState
from ovman_ros import bundle

pytestmark = pytest.mark.ros

FRAMES = load_config().frames
RNG = np.random.default_rng(3)


@pytest.mark.parametrize(
    ("encoding", "array"),
    [
        ("rgb8", RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)),
        ("32FC1", np.where(RNG.random((5, 7)) < 0.2, np.nan, RNG.uniform(0, 9, (5, 7))).astype(np.float32)),
        ("32SC1", RNG.integers(-3, 2**31 - 1, (5, 7), dtype=np.int32)),
    ],
)
def test_images_round_trip_through_sensor_msgs_image(encoding, array):
    message = image_msg(array, encoding, header_msg(1_500_000_007, FRAMES.optical))
    assert (message.height, message.width, message.is_bigendian) == (5, 7, 0)
    assert message.step == 7 * array.itemsize * (3 if array.ndim == 3 else 1)
    assert stamp_of(message.header) == 1_500_000_007
    back = image_array(message)
    assert back.dtype == array.dtype and np.array_equal(back, array, equal_nan=True)


def test_depth_reads_from_32fc1_metres_and_from_a_drivers_16uc1_millimetres():
    mm = np.array([[0, 1, 1500], [65535, 250, 0]], dtype=np.uint16)
    metres = depth_array(image_msg(mm, "16UC1", header_msg(0, FRAMES.optical)))
    expected = np.array([[np.nan, 0.001, 1.5], [65.535, 0.25, np.nan]], dtype=np.float32)
    assert metres.dtype == np.float32 and np.allclose(metres, expected, equal_nan=True, rtol=0, atol=1e-7)
    planar = np.array([[np.nan, 0.5]], dtype=np.float32)
    assert np.array_equal(depth_array(image_msg(planar, "32FC1", header_msg(0, "x"))), planar, equal_nan=True)
    with pytest.raises(MessageError, match="depth image encoding 'rgb8'; expected 32FC1 or 16UC1"):
        depth_array(image_msg(np.zeros((2, 2, 3), np.uint8), "rgb8", header_msg(0, "x")))


def test_an_image_whose_step_disagrees_with_its_data_is_rejected():
    message = image_msg(np.zeros((4, 4), np.float32), "32FC1", header_msg(0, "x"))
    message.step = 12
    with pytest.raises(MessageError, match="step 12"):
        image_array(message)
    message.encoding = "bgr8"
    with pytest.raises(MessageError, match="unsupported image encoding 'bgr8'"):
        image_array(message)


def small_observation() -> Observation:
    """An 8x6 frame of one segment at step 7."""
    return Observation(
        rgb=np.zeros((6, 8, 3), np.uint8),
        depth=np.ones((6, 8), np.float32),
        segments=np.ones((6, 8), np.int32),
        segment_labels={1: "Box"},
        segment_instances={1: "Box|1"},
        pose=AgentPose(0.5, 1.0, 90.0, 30.0),
        camera_position=(0.5, 1.5, 1.0),
        intrinsics=Intrinsics.from_vertical_fov(8, 6, 90.0),
        step=7,
    )


def test_a_bundle_stamps_every_message_alike_and_carries_the_intrinsics():
    obs = small_observation()
    k = obs.intrinsics
    stamp = 700_000_000
    messages = bundle_messages(obs, WorldState.of([]), stamp, FRAMES)
    headers = [messages.rgb.header, messages.depth.header, messages.instances.header, messages.camera_info.header]
    headers += [messages.odom.header] + [t.header for t in messages.tf.transforms]
    assert {stamp_of(h) for h in headers} == {stamp}
    assert messages.clock.clock.sec * 10**9 + messages.clock.clock.nanosec == stamp
    assert json.loads(messages.labels.data)["stamp_ns"] == stamp
    assert json.loads(messages.ground_truth.data)["stamp_ns"] == stamp
    assert list(messages.camera_info.k) == list(k.matrix.ravel())
    assert messages.odom.header.frame_id == FRAMES.odom and messages.odom.child_frame_id == FRAMES.base
    p = messages.odom.pose.pose.position
    assert (p.x, p.y, p.z) == (1.0, -0.5, 0.0)


def test_a_camera_bundle_holds_the_five_camera_messages_and_gives_them_back_by_topic():
    obs = small_observation()
    stamp = 700_000_000

    def fresh() -> dict:
        return camera_messages(bundle_messages(obs, WorldState.of([]), stamp, FRAMES))

    camera = fresh()
    assert set(camera) == set(CAMERA_MESSAGES) and all(type(m) is CAMERA_MESSAGES[t] for t, m in camera.items())
    got_stamp, items = camera_bundle_items(camera_bundle_msg(camera))
    assert got_stamp == stamp
    assert items[bundle.INSTANCE_LABELS_TOPIC] == bundle.parse_labels_json(camera[bundle.INSTANCE_LABELS_TOPIC].data)
    assert {t: m for t, m in items.items() if t != bundle.INSTANCE_LABELS_TOPIC} == {
        t: m for t, m in camera.items() if t != bundle.INSTANCE_LABELS_TOPIC
    }
    # Every message must carry the bundle's (its colour image's) stamp; the one that does not is named.
    for topic in (bundle.CAMERA_INFO_TOPIC, bundle.DEPTH_TOPIC, bundle.INSTANCES_TOPIC):
        shifted = camera_bundle_msg(fresh())
        member = {
            bundle.CAMERA_INFO_TOPIC: shifted.camera_info,
            bundle.DEPTH_TOPIC: shifted.depth,
            bundle.INSTANCES_TOPIC: shifted.instances,
        }[topic]
        member.header = header_msg(stamp + 1_000_000_000, member.header.frame_id)  # headers may be shared
        with pytest.raises(MessageError, match=f"stamped otherwise: {topic} 1700000000 ns"):
            camera_bundle_items(shifted)
    relabelled = camera_bundle_msg(fresh())
    relabelled.labels.data = json.dumps({"stamp_ns": stamp + 1, "step": 7, "labels": {}})
    with pytest.raises(MessageError, match=f"{bundle.INSTANCE_LABELS_TOPIC} {stamp + 1} ns"):
        camera_bundle_items(relabelled)
    relabelled.labels.data = "{not json"
    with pytest.raises(MessageError, match=f"camera bundle at {stamp} ns: .*labels table"):
        camera_bundle_items(relabelled)


def test_occupancy_grid_message_carries_the_fields_of_the_reachable_grid():
    positions = [(0.0, 0.0), (0.25, 0.0), (0.25, 0.25), (1.0, 0.5)]
    fields = to_occupancy_fields(grid_from_reachable(positions, 0.25), FRAMES.map)
    message = occupancy_grid_msg(fields, 42)
    assert (message.info.width, message.info.height, message.info.resolution) == (3, 5, 0.25)
    assert np.array_equal(np.asarray(message.data, dtype=np.int8), fields.data)
    origin = message.info.origin.position
    assert (origin.x, origin.y, origin.z) == fields.origin_position
    assert stamp_of(message.header) == 42 and message.header.frame_id == FRAMES.map
    assert sorted(from_occupancy_fields(fields).free_positions()) == sorted(positions)


@pytest.mark.parametrize("yaw", [0.0, 90.0, 180.0, 270.0])
def test_a_start_pose_in_map_converts_to_the_agent_pose(yaw):
    obs_pose = AgentPose(1.25, -0.5, yaw, 0.0)
    translation, rotation = bundle.base_pose(
        Observation(
            np.zeros((1, 1, 3), np.uint8),
            np.zeros((1, 1), np.float32),
            np.zeros((1, 1), np.int32),
            {},
            {},
            obs_pose,
            (1.25, 1.5, -0.5),
            Intrinsics.from_vertical_fov(1, 1, 90.0),
            0,
        )
    )
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = translation
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = rotation
    agent = start_pose_from_msg(pose, 30.0)
    assert (agent.x, agent.z, agent.horizon_deg) == pytest.approx((1.25, -0.5, 30.0))
    assert (agent.yaw_deg - yaw + 180.0) % 360.0 - 180.0 == pytest.approx(0.0, abs=1e-9)
