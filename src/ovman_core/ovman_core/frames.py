"""The one place that converts between AI2-THOR's world frame and ROS REP 103.

AI2-THOR / Unity world: x right, y up, z forward, metres, **left-handed**; yaw (``rotation.y``) in
degrees grows clockwise seen from above with 0 facing +z; the camera horizon is a pitch in degrees,
positive looking down. REP 103 (``map``, ``base_link``, ``camera_link``): x forward, y left, z up,
right-handed; optical frames (REP 103 ``*_optical_frame``): z forward, x right, y down.

``p_ros = C · p_thor`` with ``C = [[0,0,1],[-1,0,0],[0,1,0]]`` (det C = −1, the handedness flip).
Quaternions are (x, y, z, w) throughout, as in geometry_msgs and scipy.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.spatial.transform import Rotation

from ovman_core.boxes import Vec3

ROTATION_CACHE_SIZE = 4096
"""Most (yaw, horizon) orientations kept by the cached conversions (a frame per step asks for one)."""

THOR_TO_ROS = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
"""C: maps an AI2-THOR world vector to REP 103 (x_ros = z, y_ros = −x, z_ros = y)."""

CAMERA_LINK_TO_OPTICAL = (-0.5, 0.5, -0.5, 0.5)
"""Quaternion (x, y, z, w) of ``camera_optical_frame`` in ``camera_link``: rpy (−π/2, 0, −π/2)."""

Quaternion = tuple[float, float, float, float]

ANGLE_DECIMALS = 9
"""Camera yaw and pitch (degrees) recovered from a quaternion are rounded to this many decimals:
the float noise of the round trip goes, so a recorded 90.0 comes back as exactly 90.0."""


def thor_to_ros_point(p: Vec3) -> Vec3:
    """AI2-THOR world point (x, y up, z) → REP 103 point (x forward, y left, z up)."""
    return (float(p[2]), float(-p[0]), float(p[1]))


def ros_to_thor_point(p: Vec3) -> Vec3:
    """REP 103 point → AI2-THOR world point; the inverse of :func:`thor_to_ros_point`."""
    return (float(-p[1]), float(p[2]), float(p[0]))


def thor_to_ros_points(points: np.ndarray) -> np.ndarray:
    """Vectorised :func:`thor_to_ros_point` for an (N, 3) array."""
    return np.asarray(points, dtype=float) @ THOR_TO_ROS.T


def ros_to_thor_points(points: np.ndarray) -> np.ndarray:
    """Vectorised :func:`ros_to_thor_point` for an (N, 3) array."""
    return np.asarray(points, dtype=float) @ THOR_TO_ROS


def thor_yaw_to_ros(yaw_deg: float) -> float:
    """AI2-THOR yaw (degrees, clockwise from above, 0 = +z) → REP 103 yaw (radians in (−π, π])."""
    return _wrap_pi(-math.radians(yaw_deg))


def ros_yaw_to_thor(yaw_rad: float) -> float:
    """REP 103 yaw (radians) → AI2-THOR yaw in degrees in [0, 360)."""
    return (-math.degrees(yaw_rad)) % 360.0


def thor_quaternion_to_ros(q: Quaternion) -> Quaternion:
    """A Unity rotation quaternion (x, y, z, w) → the same rotation expressed in REP 103."""
    x, y, z, w = q
    return (-z, x, -y, w)


def ros_quaternion_to_thor(q: Quaternion) -> Quaternion:
    """Inverse of :func:`thor_quaternion_to_ros`."""
    x, y, z, w = q
    return (y, -z, -x, w)


def thor_euler_to_quaternion(rx_deg: float, ry_deg: float, rz_deg: float) -> Quaternion:
    """Unity Euler angles (applied z, then x, then y) → Unity quaternion (x, y, z, w)."""
    q = Rotation.from_euler("zxy", [rz_deg, rx_deg, ry_deg], degrees=True).as_quat()
    return tuple(float(v) for v in q)  # type: ignore[return-value]


def yaw_quaternion(yaw_rad: float) -> Quaternion:
    """Quaternion (x, y, z, w) of a rotation by ``yaw_rad`` about +z (REP 103)."""
    return (0.0, 0.0, math.sin(yaw_rad / 2.0), math.cos(yaw_rad / 2.0))


@functools.lru_cache(maxsize=ROTATION_CACHE_SIZE)
def camera_link_quaternion(yaw_deg: float, horizon_deg: float) -> Quaternion:
    """Orientation (x, y, z, w) of ``camera_link`` in ``map`` for an AI2-THOR yaw and horizon.

    R = Rz(yaw_ros) · Ry(+horizon): a positive horizon pitches the camera down in both frames.
    Cached: an agent's yaws and horizons take few values, and every published frame needs this.
    """
    rot = Rotation.from_euler("ZY", [thor_yaw_to_ros(yaw_deg), math.radians(horizon_deg)])
    return tuple(float(v) for v in rot.as_quat())  # type: ignore[return-value]


def optical_axes_thor(yaw_deg: float, horizon_deg: float) -> np.ndarray:
    """(3, 3) matrix whose columns are the optical x (right), y (down), z (forward) axes in the
    AI2-THOR world frame, for a camera at ``yaw_deg`` with pitch ``horizon_deg`` (down positive).

    A point with optical coordinates ``q`` (metres) sits at ``camera_position + axes @ q``.
    """
    yaw, pitch = math.radians(yaw_deg), math.radians(horizon_deg)
    forward = np.array([math.sin(yaw) * math.cos(pitch), -math.sin(pitch), math.cos(yaw) * math.cos(pitch)])
    right = np.array([math.cos(yaw), 0.0, -math.sin(yaw)])
    up = np.array([math.sin(yaw) * math.sin(pitch), math.cos(pitch), math.cos(yaw) * math.sin(pitch)])
    return np.column_stack([right, -up, forward])


def _wrap_pi(angle: float) -> float:
    wrapped = math.remainder(angle, 2.0 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped


@functools.lru_cache(maxsize=ROTATION_CACHE_SIZE)
def camera_angles(quaternion: tuple[float, float, float, float]) -> tuple[float, float, float]:
    """``(yaw_deg, horizon_deg, roll_rad)`` of the camera whose optical frame has orientation
    ``quaternion`` (x, y, z, w) in ``map`` (cached: an agent's orientations take few values)."""
    link = Rotation.from_quat(quaternion) * Rotation.from_quat(CAMERA_LINK_TO_OPTICAL).inv()
    # Columns of R = Rz(yaw)·Ry(pitch): forward, left = (−sin yaw, cos yaw, 0), up. A level camera
    # keeps its left axis horizontal; yaw comes from that axis, so it is defined at any pitch.
    r = link.as_matrix()
    roll = math.asin(max(-1.0, min(1.0, float(r[2, 1]))))
    yaw = math.atan2(-float(r[0, 1]), float(r[1, 1]))
    pitch = math.atan2(-float(r[2, 0]), float(r[2, 2]))
    yaw_deg = round(ros_yaw_to_thor(float(yaw)), ANGLE_DECIMALS) % 360.0
    horizon_deg = round(math.degrees(float(pitch)), ANGLE_DECIMALS) + 0.0
    return yaw_deg, horizon_deg, roll
