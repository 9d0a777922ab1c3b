"""nav_node's message conversions: Navigate goals, target updates, results, plans and occupancy
grids between REP 103 messages (``map`` frame, metres) and the core's AI2-THOR world frame.

No graph: plain functions of messages, unit-tested without DDS.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import OccupancyGrid, Path
from ovman_ros.messages import pose_msg

from ovman_core.boxes import Footprint, Vec2
from ovman_core.frames import ros_to_thor_point, thor_to_ros_point, thor_yaw_to_ros, yaw_quaternion
from ovman_core.grid import OccupancyGridFields
from ovman_core.world_state import AgentPose
from ovman_interfaces.action import Navigate
from ovman_interfaces.msg import TargetUpdate
from ovman_nav.executor import NavError, NavResult, NavSettings, NavTarget


class GoalError(ValueError):
    """A Navigate goal that cannot be executed; ``code`` is its Navigate error code."""

    def __init__(self, code: NavError, message: str) -> None:
        super().__init__(message)
        self.code = code


def world_point(point: Point) -> Vec2:
    """Floor position (x, z) in the AI2-THOR world of a ``map`` point (metres)."""
    x, _, z = ros_to_thor_point((point.x, point.y, point.z))
    return (x, z)


def map_point(position: Vec2) -> Point:
    """``map`` point (z = 0, the floor) of a world floor position (x, z)."""
    x, y, z = thor_to_ros_point((position[0], 0.0, position[1]))
    return Point(x=x, y=y, z=z)


def goal_target(goal: Navigate.Goal, map_frame: str) -> NavTarget:
    """The NavTarget of a goal; GoalError(NO_TARGET / INVALID_GOAL) when it is unusable."""
    frame = goal.target.header.frame_id
    p = goal.target.point
    if not frame or not all(math.isfinite(v) for v in (p.x, p.y, p.z)):
        raise GoalError(NavError.NO_TARGET, f"goal target has no frame_id or a non-finite point: '{frame}' {p}")
    if frame != map_frame:
        raise GoalError(NavError.INVALID_GOAL, f"goal target is in frame '{frame}'; expected '{map_frame}'")
    point = world_point(p)
    if not goal.has_region:
        return NavTarget.at_point(point)
    return NavTarget(point=point, region=region_between(goal.region_min, goal.region_max, "goal region"))


def region_between(lo: Point, hi: Point, what: str) -> Footprint:
    """The floor footprint (world frame) of the ``map`` box [lo, hi]; GoalError (INVALID_GOAL)
    unless it is finite with lo <= hi."""
    values = (lo.x, lo.y, lo.z, hi.x, hi.y, hi.z)
    if not all(math.isfinite(v) for v in values) or lo.x > hi.x or lo.y > hi.y or lo.z > hi.z:
        raise GoalError(NavError.INVALID_GOAL, f"{what} must have finite region_min <= region_max, got {values}")
    corners = [world_point(lo), world_point(hi)]
    xs, zs = sorted(c[0] for c in corners), sorted(c[1] for c in corners)
    return Footprint(xs[0], zs[0], xs[1], zs[1])


def updated_target(target: NavTarget, update: TargetUpdate) -> NavTarget:
    """``target`` after ``update``: its point, with its region (``has_region``) or else with the
    target's region carried along (:meth:`ovman_nav.executor.NavTarget.moved_to`); GoalError for an
    unusable update."""
    p = update.point
    if not all(math.isfinite(v) for v in (p.x, p.y, p.z)):
        raise GoalError(NavError.NO_TARGET, f"target update with a non-finite point {p}")
    point = world_point(p)
    if update.has_region:
        return NavTarget(point, region_between(update.region_min, update.region_max, "target update region"))
    return target.moved_to(point)


def goal_settings(goal: Navigate.Goal, settings: NavSettings) -> NavSettings:
    """Settings with the goal's success radius and step budget (0 = the configured default)."""
    radius = float(goal.success_radius)
    if not math.isfinite(radius) or radius < 0.0:
        raise GoalError(NavError.INVALID_GOAL, f"success_radius must be >= 0 metres, got {radius}")
    return dataclasses.replace(
        settings,
        success_radius=radius or settings.success_radius,
        max_steps=int(goal.max_steps) or settings.max_steps,
    )


def base_pose_stamped(pose: AgentPose, header: Any) -> PoseStamped:
    """base_link in ``map`` for an agent pose: on the floor, yawed as the agent."""
    translation = thor_to_ros_point((pose.x, 0.0, pose.z))
    return PoseStamped(header=header, pose=pose_msg(translation, yaw_quaternion(thor_yaw_to_ros(pose.yaw_deg))))


def path_message(points: Sequence[Vec2], header: Any) -> Path:
    """nav_msgs/Path through world floor positions, each pose yawed along the next segment."""
    poses = []
    for index, point in enumerate(points):
        # Face along the segment leaving this point; the last point keeps the last heading.
        if index + 1 < len(points):
            a, b = point, points[index + 1]
        else:
            a, b = points[index - 1] if index else point, point
        yaw_deg = math.degrees(math.atan2(b[0] - a[0], b[1] - a[1])) if a != b else 0.0
        poses.append(base_pose_stamped(AgentPose(point[0], point[1], yaw_deg), header))
    return Path(header=header, poses=poses)


def result_message(result: NavResult, header: Any) -> Navigate.Result:
    message = Navigate.Result(
        error_code=int(result.error),
        error_msg=result.message,
        success=result.success,
        path_length=float(result.path_length),
        steps=result.steps,
        collisions=result.collisions,
        replans=result.replans,
    )
    if result.final_pose is not None:
        message.final_pose = base_pose_stamped(result.final_pose, header)
    else:
        message.final_pose.header = header
    return message


def occupancy_fields(message: OccupancyGrid) -> OccupancyGridFields:
    """The plain fields of a nav_msgs/OccupancyGrid (ovman_core.grid reads them)."""
    info = message.info
    o = info.origin
    return OccupancyGridFields(
        frame_id=message.header.frame_id,
        resolution=float(info.resolution),
        width=int(info.width),
        height=int(info.height),
        origin_position=(o.position.x, o.position.y, o.position.z),
        origin_orientation=(o.orientation.x, o.orientation.y, o.orientation.z, o.orientation.w),
        data=np.asarray(message.data, dtype=np.int8),
    )
