"""Frame conversions between AI2-THOR and REP 103, pinned by round trips and the notes' values."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from ovman_core.frames import (
    CAMERA_LINK_TO_OPTICAL,
    THOR_TO_ROS,
    camera_link_quaternion,
    optical_axes_thor,
    ros_quaternion_to_thor,
    ros_to_thor_point,
    ros_yaw_to_thor,
    thor_euler_to_quaternion,
    thor_quaternion_to_ros,
    thor_to_ros_point,
    thor_to_ros_points,
    thor_yaw_to_ros,
)

coord = st.floats(-100, 100, allow_nan=False)
angle = st.floats(-720, 720, allow_nan=False)


def test_axes_map_as_in_the_notes():
    # x_ros = z_thor, y_ros = -x_thor, z_ros = y_thor; det C = -1 (handedness flip)
    assert thor_to_ros_point((1.0, 2.0, 3.0)) == (3.0, -1.0, 2.0)
    assert np.isclose(np.linalg.det(THOR_TO_ROS), -1.0)


@given(coord, coord, coord)
def test_point_round_trip(x, y, z):
    assert np.allclose(ros_to_thor_point(thor_to_ros_point((x, y, z))), (x, y, z))


@given(st.lists(st.tuples(coord, coord, coord), min_size=1, max_size=8))
def test_vectorised_points_equal_scalar(points):
    expected = [thor_to_ros_point(p) for p in points]
    assert np.allclose(thor_to_ros_points(np.array(points)), expected)


def test_yaw_known_values():
    # RotateRight from 0 gives rotation.y = 90: facing THOR +x = ROS -y, a ROS yaw of -90 degrees.
    assert math.isclose(thor_yaw_to_ros(90.0), -math.pi / 2)
    assert math.isclose(thor_yaw_to_ros(270.0), math.pi / 2)  # RotateLeft
    assert thor_yaw_to_ros(0.0) == 0.0


@given(angle)
def test_yaw_round_trip_and_heading(yaw_deg):
    back = ros_yaw_to_thor(thor_yaw_to_ros(yaw_deg))
    assert math.isclose(math.cos(math.radians(back)), math.cos(math.radians(yaw_deg)), abs_tol=1e-9)
    assert math.isclose(math.sin(math.radians(back)), math.sin(math.radians(yaw_deg)), abs_tol=1e-9)
    # The THOR heading (sin, 0, cos) maps to the ROS heading (cos, sin) of the converted yaw.
    heading_ros = thor_to_ros_point((math.sin(math.radians(yaw_deg)), 0.0, math.cos(math.radians(yaw_deg))))
    yaw_ros = thor_yaw_to_ros(yaw_deg)
    assert np.allclose(heading_ros, (math.cos(yaw_ros), math.sin(yaw_ros), 0.0), atol=1e-9)


@given(angle, angle, angle)
def test_quaternion_shortcut_equals_the_matrix_form(rx, ry, rz):
    q_thor = thor_euler_to_quaternion(rx, ry, rz)
    r_thor = Rotation.from_quat(q_thor).as_matrix()
    expected = THOR_TO_ROS @ r_thor @ THOR_TO_ROS.T
    assert np.allclose(Rotation.from_quat(thor_quaternion_to_ros(q_thor)).as_matrix(), expected, atol=1e-9)
    assert np.allclose(ros_quaternion_to_thor(thor_quaternion_to_ros(q_thor)), q_thor)


def test_optical_frame_quaternion_is_rpy_minus_half_pi_0_minus_half_pi():
    expected = Rotation.from_euler("xyz", [-math.pi / 2, 0.0, -math.pi / 2]).as_quat()
    q = np.array(CAMERA_LINK_TO_OPTICAL)
    assert np.allclose(q, expected) or np.allclose(q, -expected)


@given(st.floats(0, 360), st.floats(-30, 60))
def test_optical_axes_agree_with_the_ros_camera_chain(yaw_deg, horizon_deg):
    # THOR optical axes, mapped to ROS, equal R(map<-camera_link) * R(camera_link<-optical).
    axes_thor = optical_axes_thor(yaw_deg, horizon_deg)
    link = Rotation.from_quat(camera_link_quaternion(yaw_deg, horizon_deg))
    optical = Rotation.from_quat(CAMERA_LINK_TO_OPTICAL)
    assert np.allclose(THOR_TO_ROS @ axes_thor, (link * optical).as_matrix(), atol=1e-9)


def test_positive_horizon_looks_down():
    forward = optical_axes_thor(0.0, 30.0)[:, 2]
    assert forward[1] < 0  # THOR y is up
    link = Rotation.from_quat(camera_link_quaternion(0.0, 30.0))
    assert link.apply([1.0, 0.0, 0.0])[2] < 0  # ROS z is up
