"""The ``navigation.backend: nav2`` adapter: navigate through Nav2's BasicNavigator.

The goal goes to ``nav2_simple_commander``'s BasicNavigator instead of the built-in A* executor;
the result is the same :class:`~ovman_nav.executor.NavResult`. The success geometry (Eq. 4) stays
ours: the run ends once the feedback pose is within R of the target region, and a newer estimate
farther than ``retarget_distance`` preempts the goal. Targets and results: AI2-THOR world (floor
(x, z), metres); goals and feedback poses: ``map`` (REP 103). ``nav2_simple_commander`` and
``geometry_msgs`` are imported only when used; rclpy must be initialised before :func:`basic_navigator`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from scipy.spatial.transform import Rotation

from ovman_core.boxes import Vec2
from ovman_core.config import OvmanConfig
from ovman_core.frames import ros_to_thor_point, ros_yaw_to_thor, thor_to_ros_point, thor_yaw_to_ros, yaw_quaternion
from ovman_core.success import embodied_success
from ovman_core.world_state import AgentPose
from ovman_nav.executor import NavError, NavProgress, NavResult, NavTarget, TargetUpdates


class Nav2UnavailableError(RuntimeError):
    """``navigation.backend`` is ``nav2`` but nav2_simple_commander cannot be imported."""


class BasicNavigatorLike(Protocol):
    """The part of nav2_simple_commander.robot_navigator.BasicNavigator this adapter calls."""

    def goToPose(self, pose: Any, behavior_tree: str = "") -> bool: ...  # noqa: N802 - Nav2 API names

    def isTaskComplete(self) -> bool: ...  # noqa: N802 - Nav2 API names

    def getFeedback(self) -> Any: ...  # noqa: N802 - Nav2 API names

    def getResult(self) -> Any: ...  # noqa: N802 - Nav2 API names

    def cancelTask(self) -> None: ...  # noqa: N802 - Nav2 API names


def basic_navigator(node_name: str = "ovman_nav2_backend") -> BasicNavigatorLike:
    """A Nav2 BasicNavigator (lazy import). The caller waits for Nav2 to be active
    (``waitUntilNav2Active``) as their robot's localisation requires."""
    try:
        from nav2_simple_commander.robot_navigator import BasicNavigator
    except ImportError as err:
        raise Nav2UnavailableError(
            "navigation.backend is 'nav2' but nav2_simple_commander is not importable: install Nav2 "
            "(apt install ros-$ROS_DISTRO-nav2-simple-commander) and source the ROS 2 setup, "
            "or set navigation.backend: builtin"
        ) from err
    return BasicNavigator(node_name=node_name)


@dataclasses.dataclass(frozen=True)
class Nav2Settings:
    """``success_radius`` R (m), ``retarget_distance`` (m), polling period and time limit (s),
    and the frame of goals (``frames.map``)."""

    success_radius: float
    retarget_distance: float
    poll_period_s: float
    timeout_s: float
    frame_id: str

    def __post_init__(self) -> None:
        if not (self.success_radius > 0.0 and self.poll_period_s > 0.0 and self.timeout_s > 0.0):
            raise ValueError(
                "task.success_radius, navigation.nav2_poll_period_s and navigation.nav2_timeout_s must be "
                f"positive: {self}"
            )

    @classmethod
    def from_config(cls, config: OvmanConfig) -> Nav2Settings:
        nav = config.nav_node.navigation
        return cls(
            success_radius=config.task.success_radius,
            retarget_distance=nav.retarget_distance,
            poll_period_s=nav.nav2_poll_period_s,
            timeout_s=nav.nav2_timeout_s,
            frame_id=config.frames.map,
        )


GoalChooser = Callable[[NavTarget], Vec2]
"""Where to send the robot for a target (world (x, z)); the default is the target point. With a
grid, pass the nearest cell that passes the success test (an object centre is rarely free)."""


def goal_pose(position: Vec2, facing: Vec2, frame_id: str) -> Any:
    """geometry_msgs/PoseStamped in ``frame_id`` at world ``position`` (x, z), yawed towards
    world ``facing`` (identity yaw when they coincide)."""
    from geometry_msgs.msg import PoseStamped

    pose = PoseStamped()
    pose.header.frame_id = frame_id
    x, y, z = thor_to_ros_point((position[0], 0.0, position[1]))
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = x, y, z
    dx, dz = facing[0] - position[0], facing[1] - position[1]
    yaw = thor_yaw_to_ros(math.degrees(math.atan2(dx, dz))) if (dx or dz) else 0.0
    q = yaw_quaternion(yaw)
    o = pose.pose.orientation
    o.x, o.y, o.z, o.w = q
    return pose


def pose_from_feedback(feedback: Any) -> AgentPose:
    """The robot pose in the world frame from a NavigateToPose feedback's ``current_pose``."""
    p = feedback.current_pose.pose.position
    q = feedback.current_pose.pose.orientation
    x, _, z = ros_to_thor_point((p.x, p.y, p.z))
    yaw = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_euler("ZYX")[0]
    return AgentPose(x, z, ros_yaw_to_thor(float(yaw)), 0.0)


class Nav2Backend:
    """Navigate to a :class:`NavTarget` with a BasicNavigator; see the module docstring.

    ``clock`` and ``sleep`` default to the monotonic wall clock; tests substitute their own.
    """

    def __init__(
        self,
        navigator: BasicNavigatorLike,
        settings: Nav2Settings,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.navigator = navigator
        self.settings = settings
        self.clock = clock
        self.sleep = sleep

    def navigate(
        self,
        target: NavTarget | None,
        *,
        choose_goal: GoalChooser | None = None,
        target_updates: TargetUpdates | None = None,
        should_cancel: Callable[[], bool] | None = None,
        on_progress: Callable[[NavProgress], None] | None = None,
        robot_pose: Callable[[], AgentPose | None] | None = None,
    ) -> NavResult:
        """``robot_pose``: the robot's pose now (nav_node: its base frame in ``map`` on TF), read
        at the start and at every poll; without it, or while it gives None, the feedback's pose."""
        run = _Nav2Run(self, choose_goal or (lambda t: t.point), robot_pose)
        return run.execute(target, target_updates, should_cancel, on_progress)


class _Nav2Run:
    def __init__(
        self, backend: Nav2Backend, choose_goal: GoalChooser, robot_pose: Callable[[], AgentPose | None] | None
    ) -> None:
        self.backend = backend
        self.robot_pose = robot_pose
        self.nav = backend.navigator
        self.settings = backend.settings
        self.choose_goal = choose_goal
        self.pose: AgentPose | None = None
        self.trajectory: list[Vec2] = []
        self.path_length = 0.0
        self.goals_sent = 0
        self.recoveries = 0

    def execute(
        self,
        target: NavTarget | None,
        target_updates: TargetUpdates | None,
        should_cancel: Callable[[], bool] | None,
        on_progress: Callable[[NavProgress], None] | None,
    ) -> NavResult:
        self.observe(None)  # where the robot starts, when the frame tree says
        if target is None or not target.finite:
            return self.finish(NavError.NO_TARGET, f"no usable target: {target}")
        if not self.send(target):
            return self.finish(NavError.INVALID_GOAL, "Nav2 rejected the goal")
        sent_for = target.point
        start = self.backend.clock()
        while not self.nav.isTaskComplete():
            if should_cancel is not None and should_cancel():
                self.nav.cancelTask()
                return self.finish(NavError.CANCELED, "navigation was canceled")
            feedback = self.nav.getFeedback()
            self.observe(feedback)
            if feedback is not None and on_progress is not None and self.pose is not None:
                on_progress(
                    NavProgress(self.pose, target.point, float(feedback.distance_remaining), 0, 0, self.replans)
                )
            if self.arrived(target):
                self.nav.cancelTask()  # our success geometry holds: no need to reach Nav2's goal pose
                return self.finish(NavError.NONE, "", success=True)
            if target_updates is not None:
                update = target_updates()
                if update is not None and update.finite:
                    target = update
                    moved = math.hypot(target.point[0] - sent_for[0], target.point[1] - sent_for[1])
                    if moved > self.settings.retarget_distance:
                        if not self.send(target):
                            return self.finish(NavError.INVALID_GOAL, "Nav2 rejected the updated goal")
                        sent_for = target.point
            if self.backend.clock() - start > self.settings.timeout_s:
                self.nav.cancelTask()
                return self.finish(
                    NavError.TIMEOUT, f"Nav2 did not finish within navigation.nav2_timeout_s={self.settings.timeout_s}"
                )
            self.backend.sleep(self.settings.poll_period_s)
        self.observe(self.nav.getFeedback())
        outcome = getattr(self.nav.getResult(), "name", "UNKNOWN")
        if outcome == "SUCCEEDED":
            if self.pose is None or self.arrived(target):
                return self.finish(NavError.NONE, "", success=True)
            distance = target.region.distance_to(self.pose.floor)
            return self.finish(
                NavError.UNKNOWN,
                f"Nav2 reached its goal but the robot is {distance:.2f} m from the target region "
                f"(more than R = {self.settings.success_radius} m)",
            )
        if outcome == "CANCELED":
            return self.finish(NavError.CANCELED, "Nav2 canceled the task")
        return self.finish(NavError.UNKNOWN, f"Nav2 reported {outcome}")

    @property
    def replans(self) -> int:
        """Goals re-sent for newer target estimates plus Nav2's own recoveries."""
        return max(self.goals_sent - 1, 0) + self.recoveries

    def send(self, target: NavTarget) -> bool:
        goal = self.choose_goal(target)
        self.goals_sent += 1
        return bool(self.nav.goToPose(goal_pose(goal, target.point, self.settings.frame_id)))

    def observe(self, feedback: Any | None) -> None:
        """The robot's pose now: from ``robot_pose`` when it gives one, else from ``feedback``."""
        pose = self.robot_pose() if self.robot_pose is not None else None
        if pose is None and feedback is not None:
            pose = pose_from_feedback(feedback)
        if feedback is not None:
            self.recoveries = int(feedback.number_of_recoveries)
        if pose is None:
            return
        if self.pose is not None:
            self.path_length += math.hypot(pose.x - self.pose.x, pose.z - self.pose.z)
        if not self.trajectory or self.trajectory[-1] != pose.floor:
            self.trajectory.append(pose.floor)
        self.pose = pose

    def arrived(self, target: NavTarget) -> bool:
        return self.pose is not None and embodied_success(self.pose.floor, target.region, self.settings.success_radius)

    def finish(self, error: NavError, message: str, success: bool = False) -> NavResult:
        return NavResult(
            error=error,
            message=message,
            success=success,
            final_pose=self.pose,
            path_length=self.path_length,
            steps=0,
            collisions=0,
            replans=self.replans,
            shortest_path_length=None,
            trajectory=tuple(self.trajectory),
        )
