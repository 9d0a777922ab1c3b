"""sim_node's message conversions (ovman_sim.messages), checked without a graph."""

from __future__ import annotations

import json

import numpy as np
import pytest

try:
    from geometry_msgs.msg import Pose

    from ovman_sim.messages import (
        MessageError,
        bundle_messages,
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
from ovman_core.world_state import AgentPose, WorldState
from ovman_sim import bundle
from ovman_sim.world import Observation

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


def test_an_image_whose_step_disagrees_with_its_data_is_rejected():
    message = image_msg(np.zeros((4, 4), np.float32), "32FC1", header_msg(0, "x"))
    message.step = 12
    with pytest.raises(MessageError, match="step 12"):
        image_array(message)
    message.encoding = "bgr8"
    with pytest.raises(MessageError, match="unsupported image encoding 'bgr8'"):
        image_array(message)


def test_a_bundle_stamps_every_message_alike_and_carries_the_intrinsics():
    k = Intrinsics.from_vertical_fov(8, 6, 90.0)
    obs = Observation(
        rgb=np.zeros((6, 8, 3), np.uint8),
        depth=np.ones((6, 8), np.float32),
        segments=np.ones((6, 8), np.int32),
        segment_labels={1: "Box"},
        segment_instances={1: "Box|1"},
        pose=AgentPose(0.5, 1.0, 90.0, 30.0),
        camera_position=(0.5, 1.5, 1.0),
        intrinsics=k,
        step=7,
    )
    stamp = 700_000_000
    messages = bundle_messages(obs, WorldState.of([]), stamp, FRAMES)
    headers = [messages.rgb.header, messages.depth.header, messages.instances.header, messages.camera_info.header]
    headers += [messages.camera_pose.header, messages.odom.header] + [t.header for t in messages.tf.transforms]
    assert {stamp_of(h) for h in headers} == {stamp}
    assert messages.clock.clock.sec * 10**9 + messages.clock.clock.nanosec == stamp
    assert json.loads(messages.labels.data)["stamp_ns"] == stamp
    assert json.loads(messages.ground_truth.data)["stamp_ns"] == stamp
    assert list(messages.camera_info.k) == list(k.matrix.ravel())
    assert messages.odom.header.frame_id == FRAMES.odom and messages.odom.child_frame_id == FRAMES.base
    p = messages.odom.pose.pose.position
    assert (p.x, p.y, p.z) == (1.0, -0.5, 0.0)


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
