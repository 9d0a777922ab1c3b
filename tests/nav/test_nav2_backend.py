"""The nav2 backend against a fake with exactly BasicNavigator's API (Nav2 is not installable here)."""

import enum
import math
from types import SimpleNamespace

import pytest
from geometry_msgs.msg import PoseStamped

from ovman_core.boxes import Footprint
from ovman_core.config import load_config
from ovman_core.frames import ros_to_thor_point, thor_to_ros_point, yaw_quaternion
from ovman_core.world_state import AgentPose
from ovman_nav.executor import NavError, NavTarget
from ovman_nav.nav2_backend import Nav2Backend, Nav2Settings, Nav2UnavailableError, basic_navigator

SETTINGS = Nav2Settings.from_config(load_config())


class TaskResult(enum.Enum):
    """nav2_simple_commander.robot_navigator.TaskResult."""

    UNKNOWN = 0
    SUCCEEDED = 1
    CANCELED = 2
    FAILED = 3


class FakeBasicNavigator:
    """goToPose / isTaskComplete / getFeedback / getResult / cancelTask of BasicNavigator.

    The robot starts at map (0, 0) and drives straight to the goal, ``speed`` metres per
    isTaskComplete call; it ends with ``outcome`` (or CANCELED after cancelTask).
    """

    def __init__(self, speed: float = 0.5, outcome: TaskResult = TaskResult.SUCCEEDED, accept: bool = True) -> None:
        self.position = [0.0, 0.0]
        self.goal: PoseStamped | None = None
        self.goals: list[PoseStamped] = []
        self.speed = speed
        self.outcome = outcome
        self.accept = accept
        self.canceled = False
        self.complete = False

    def goToPose(self, pose: PoseStamped, behavior_tree: str = "") -> bool:
        assert isinstance(pose, PoseStamped)
        if not self.accept:
            return False
        self.goal, self.complete = pose, False
        self.goals.append(pose)
        return True

    def isTaskComplete(self) -> bool:
        if self.complete or self.canceled:
            return True
        gx, gy = self.goal.pose.position.x, self.goal.pose.position.y
        dx, dy = gx - self.position[0], gy - self.position[1]
        distance = math.hypot(dx, dy)
        if distance <= self.speed:
            self.position = [gx, gy]
            self.complete = True
        else:
            self.position = [
                self.position[0] + dx / distance * self.speed,
                self.position[1] + dy / distance * self.speed,
            ]
        return self.complete

    def getFeedback(self):
        pose = PoseStamped()
        pose.header.frame_id = "map"
        pose.pose.position.x, pose.pose.position.y = self.position
        q = yaw_quaternion(0.3)
        pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z, pose.pose.orientation.w = q
        gx, gy = self.goal.pose.position.x, self.goal.pose.position.y
        remaining = math.hypot(gx - self.position[0], gy - self.position[1])
        return SimpleNamespace(current_pose=pose, distance_remaining=remaining, number_of_recoveries=0)

    def getResult(self) -> TaskResult:
        return TaskResult.CANCELED if self.canceled else self.outcome

    def cancelTask(self) -> None:
        self.canceled = True


def backend(nav: FakeBasicNavigator, **overrides) -> Nav2Backend:
    ticks = iter(range(10**6))
    settings = Nav2Settings(**{**SETTINGS.__dict__, **overrides})
    return Nav2Backend(nav, settings, clock=lambda: float(next(ticks)), sleep=lambda s: None)


# World point (x, z) = (-4, 6) is map (6, 4).
FAR = NavTarget.at_point((-4.0, 6.0))


def test_goal_is_sent_in_the_map_frame_and_success_stops_nav2_early():
    nav = FakeBasicNavigator()
    result = backend(nav).navigate(FAR)
    assert result.error is NavError.NONE and result.success
    goal = nav.goals[0]
    assert goal.header.frame_id == "map"
    assert (goal.pose.position.x, goal.pose.position.y) == pytest.approx(thor_to_ros_point((-4.0, 0.0, 6.0))[:2])
    # R = 1 m: the run ends (and cancels Nav2's remaining approach) within 1 m of the point.
    assert nav.canceled
    assert FAR.region.distance_to(result.final_pose.floor) <= 1.0
    assert result.path_length == pytest.approx(math.hypot(6.0, 4.0) - 1.0, abs=0.5)


def test_the_robots_pose_from_tf_wins_over_the_feedback_from_the_start_pose_on():
    # The frame tree (nav_node's TF) says where the robot is; Nav2's feedback lags a step behind.
    nav = FakeBasicNavigator()
    seen = []

    def robot_pose() -> AgentPose:
        x, _, z = ros_to_thor_point((nav.position[0], nav.position[1], 0.0))
        seen.append((x, z))
        return AgentPose(x, z, 0.0, 0.0)

    result = backend(nav).navigate(FAR, robot_pose=robot_pose)
    assert result.success and result.trajectory[0] == pytest.approx((0.0, 0.0))  # the start, before any feedback
    assert result.final_pose.floor == pytest.approx(seen[-1])
    # A tree that does not connect the frames yet: the feedback's pose, as without one.
    without = backend(FakeBasicNavigator()).navigate(FAR, robot_pose=lambda: None)
    assert without.success and without.trajectory[0] != pytest.approx((0.0, 0.0))


def test_goal_chooser_sends_the_robot_to_a_free_cell_facing_the_target():
    nav = FakeBasicNavigator()
    target = NavTarget(point=(0.0, 5.0), region=Footprint(-0.5, 4.5, 0.5, 5.5))
    backend(nav).navigate(target, choose_goal=lambda t: (0.0, 3.75))
    goal = nav.goals[0].pose
    assert (goal.position.x, goal.position.y) == pytest.approx((3.75, 0.0))
    # Facing +z in the world is facing +x in map: identity yaw.
    assert (goal.orientation.z, goal.orientation.w) == pytest.approx((0.0, 1.0))


def test_cancel_cancels_the_nav2_task():
    nav = FakeBasicNavigator(speed=0.1)
    calls = iter(range(100))
    result = backend(nav).navigate(FAR, should_cancel=lambda: next(calls) >= 3)
    assert result.error is NavError.CANCELED
    assert nav.canceled


def test_failed_and_rejected_goals_map_to_error_codes():
    far_goal = NavTarget.at_point((-40.0, 60.0))
    failing = FakeBasicNavigator(speed=100.0, outcome=TaskResult.FAILED)
    # Nav2 stops short: the success test decides, not Nav2's own goal checker.
    failing.isTaskComplete = lambda: True
    result = backend(failing).navigate(far_goal)
    assert result.error is NavError.UNKNOWN and "FAILED" in result.message
    assert backend(FakeBasicNavigator(accept=False)).navigate(FAR).error is NavError.INVALID_GOAL
    assert backend(FakeBasicNavigator()).navigate(None).error is NavError.NO_TARGET


def test_succeeded_far_from_the_region_is_not_a_success():
    nav = FakeBasicNavigator(speed=100.0)
    result = backend(nav).navigate(FAR, choose_goal=lambda t: (10.0, 10.0))
    assert result.error is NavError.UNKNOWN and not result.success
    assert "from the target region" in result.message


def test_timeout_cancels_the_task():
    nav = FakeBasicNavigator(speed=0.01)
    result = backend(nav, timeout_s=5.0).navigate(FAR)
    assert result.error is NavError.TIMEOUT
    assert nav.canceled


def test_a_moved_target_preempts_the_goal():
    nav = FakeBasicNavigator(speed=0.25)
    estimates = iter([None, None, NavTarget.at_point((4.0, 6.0))])
    result = backend(nav).navigate(FAR, target_updates=lambda: next(estimates, None))
    assert result.success
    assert len(nav.goals) == 2 and result.replans == 1
    assert (nav.goals[1].pose.position.x, nav.goals[1].pose.position.y) == pytest.approx((6.0, -4.0))
    assert NavTarget.at_point((4.0, 6.0)).region.distance_to(result.final_pose.floor) <= 1.0


def test_without_nav2_installed_the_error_says_how_to_fix_it():
    with pytest.raises(Nav2UnavailableError, match=r"navigation\.backend: builtin"):
        basic_navigator()
