"""nav_node in its own process drives an embedded home and reaches goals sent by OvmanCommander
over DDS; its plan and map arrive latched, bad goals get their error codes, a running goal is
canceled from a plain action client and from the commander, a target update redirects a running
goal, and query() reaches a Query service in another process.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .processes import NodeProcess

try:
    import rclpy
    from action_msgs.msg import GoalStatus
    from action_msgs.srv import CancelGoal
    from geometry_msgs.msg import Point, PointStamped
    from nav_msgs.msg import OccupancyGrid, Odometry
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.task import Future
    from std_msgs.msg import Header

    from ovman_interfaces.action import Navigate
    from ovman_interfaces.msg import TargetUpdate
    from ovman_interfaces.srv import Query
    from ovman_nav.commander import OvmanCommander, TaskResult
    from ovman_nav.nav_messages import (
        GoalError,
        goal_settings,
        goal_target,
        path_message,
        updated_target,
    )
    from ovman_ros import names, qos
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import load_config
from ovman_core.frames import thor_to_ros_point
from ovman_core.world_state import AgentPose
from ovman_nav.executor import NavError, NavSettings, NavTarget
from ovman_sim.embedded import EmbeddedWorld

pytestmark = pytest.mark.ros

SCENE = "embedded-0"
CONFIG = load_config()
R = CONFIG.task.success_radius
ECHO_SERVER = Path(__file__).with_name("echo_server.py")
# Discovery on loopback is usually ~40 ms but has tails of seconds (notes/ros2-from-pypi.md).
DISCOVERY_TIMEOUT_S = 30.0
NAVIGATION_TIMEOUT_S = 60.0
CANCEL_TIMEOUT_S = 10.0
"""(s) A canceled goal must answer within this: the executor polls the cancel request before every action."""


@pytest.fixture
def nav_node(ros_env: dict[str, str], tmp_path: Path) -> Iterator[NodeProcess]:
    args = [sys.executable, "-m", "ovman_eval.graph.nav_in_world", "--ros-args", "-p", f"navigation.scene:={SCENE}"]
    node = NodeProcess(args, tmp_path / "nav_node.log")
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def home() -> tuple[AgentPose, list[Vec2]]:
    """The start pose and reachable positions of SCENE, loaded here once to choose goals and check the map."""
    world = EmbeddedWorld(CONFIG.sim_node)
    world.reset(SCENE)
    return world.agent_pose(), world.reachable_positions()


def farthest(positions: list[Vec2], *origins: Vec2) -> Vec2:
    """The position whose Manhattan distance to the nearest of ``origins`` is largest (ties: the larger)."""
    return max(positions, key=lambda p: (min(abs(p[0] - o[0]) + abs(p[1] - o[1]) for o in origins), p))


@pytest.fixture
def commander(rclpy_context) -> Iterator[OvmanCommander]:
    client = OvmanCommander(context=rclpy_context)
    try:
        yield client
    finally:
        client.destroy_node()


class SimGraph:
    """sim_node with SCENE loaded and nav_node driving its world through the act service (no scene of its own).

    Every step renders and publishes a frame in sim_node, so a goal across the home runs for about
    a second: long enough to cancel or re-target it while it runs (nav_node's own embedded world
    steps in well under a millisecond, too fast for that).
    """

    def __init__(self, log_dir: Path, nav_parameters: Sequence[str] = (), start_nav: bool = True) -> None:
        self.sim = NodeProcess(
            [sys.executable, "-m", "ovman_sim.sim_node", "--ros-args", "-p", f"node.scene:={SCENE}"],
            log_dir / "sim.log",
            name="sim_node",
        )
        self._nav_args = [sys.executable, "-m", "ovman_nav.nav_node"]
        if nav_parameters:
            self._nav_args += ["--ros-args", *(a for p in nav_parameters for a in ("-p", p))]
        self._log_dir = log_dir
        self.nav: NodeProcess | None = None
        if start_nav:
            self.start_nav()

    def start_nav(self) -> None:
        self.nav = NodeProcess(self._nav_args, self._log_dir / "nav.log", name="nav_node")

    def diagnosis(self) -> str:
        nav = self.nav.diagnosis() if self.nav is not None else "nav_node not started"
        return f"{nav}\n{self.sim.diagnosis()}"

    def stop(self) -> None:
        if self.nav is not None:
            self.nav.stop()
        self.sim.stop()


@pytest.fixture
def sim_graph(request: pytest.FixtureRequest, ros_env: dict[str, str], tmp_path: Path) -> Iterator[SimGraph]:
    """The graph; ``request.param`` (indirect parametrisation): nav_node parameters (name:=value)."""
    graph = SimGraph(tmp_path, getattr(request, "param", ()))
    try:
        yield graph
    finally:
        graph.stop()


@pytest.fixture
def late_sim_graph(ros_env: dict[str, str], tmp_path: Path, rclpy_context: Any) -> Iterator[SimGraph]:
    """The graph with nav_node started after sim_node published its visit (its latched map): the
    visit's odometry (volatile) went out before nav_node subscribed, so nav_node reads the pose
    through a Stop, which publishes one more frame before the goal's first action."""
    graph = SimGraph(tmp_path, ["navigation.sim_timeout_s:=2.0"], start_nav=False)
    try:
        wait_for_latched_map(rclpy_context, graph.sim)
        graph.start_nav()
        yield graph
    finally:
        graph.stop()


def map_target(position: tuple[float, float]) -> PointStamped:
    x, y, z = thor_to_ros_point((position[0], 0.0, position[1]))
    return PointStamped(header=Header(frame_id=CONFIG.frames.map), point=Point(x=x, y=y, z=z))


def wait_until_complete(commander: OvmanCommander, node: NodeProcess | SimGraph) -> None:
    deadline = time.monotonic() + NAVIGATION_TIMEOUT_S
    while not commander.isTaskComplete():
        feedback = commander.getFeedback()
        if feedback is not None:
            assert feedback.current_pose.header.frame_id == CONFIG.frames.map
        assert time.monotonic() < deadline, (
            f"navigation did not end within {NAVIGATION_TIMEOUT_S} s; {node.diagnosis()}"
        )


def test_commander_reaches_a_far_goal_through_nav_node_over_dds(nav_node, commander, home) -> None:
    start, reachable = home
    target = map_target(farthest(reachable, start.floor))
    answer = Query.Response(status=Query.Response.ANSWERED, answered=True, goal=target, relation="moved")

    assert commander.goToAnswer(answer, timeout_sec=DISCOVERY_TIMEOUT_S), nav_node.diagnosis()
    wait_until_complete(commander, nav_node)

    assert commander.getResult() is TaskResult.SUCCEEDED, (commander.getTaskError(), nav_node.diagnosis())
    result = commander.getNavResult()
    assert result.error_code == Navigate.Result.NONE and result.success
    final = result.final_pose.pose.position
    assert result.final_pose.header.frame_id == CONFIG.frames.map
    assert math.hypot(final.x - target.point.x, final.y - target.point.y) <= R + 1e-6
    assert result.steps > 0 and result.path_length > 3.0 and result.collisions == 0

    plan = commander.getPath(timeout_sec=DISCOVERY_TIMEOUT_S)
    assert plan is not None and plan.header.frame_id == CONFIG.frames.map
    first, last = plan.poses[0].pose.position, plan.poses[-1].pose.position
    start_map = thor_to_ros_point((start.x, 0.0, start.z))
    assert (first.x, first.y) == pytest.approx(start_map[:2])
    assert (last.x, last.y) == pytest.approx((final.x, final.y))

    grid = wait_for_latched_map(commander.context, nav_node)
    assert grid.header.frame_id == CONFIG.frames.map
    assert sum(1 for v in grid.data if v == 0) == len(reachable)
    assert nav_node.stop() == 0, nav_node.diagnosis()


def test_commander_goes_on_when_the_goal_response_is_lost(nav_node, commander, home, monkeypatch) -> None:
    """A known DDS race can drop an action server's goal response (rclpy#1123): the commander then
    reads the goal's acceptance from the action's status topic instead of failing."""
    start, reachable = home
    send = commander.nav_client.send_goal_async

    def lost_response(*args: Any, **kwargs: Any) -> Future:
        send(*args, **kwargs)
        return Future()  # the server answers, but the answer never reaches the caller

    monkeypatch.setattr(commander.nav_client, "send_goal_async", lost_response)
    assert commander.goToPoint(map_target(farthest(reachable, start.floor)), timeout_sec=DISCOVERY_TIMEOUT_S)
    wait_until_complete(commander, nav_node)
    assert commander.getResult() is TaskResult.SUCCEEDED, (commander.getTaskError(), nav_node.diagnosis())


def wait_for_latched_map(context: Any, node: NodeProcess) -> OccupancyGrid:
    """The latched map, through a probe node of its own (a node added to another executor leaves
    its own: the commander's would stop serving its goals)."""
    received: list[OccupancyGrid] = []
    probe = rclpy.create_node("map_probe", context=context)
    probe.create_subscription(OccupancyGrid, names.MAP, received.append, qos.LATCHED)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    try:
        deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
        while not received and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.remove_node(probe)
        executor.shutdown()
        probe.destroy_node()
    assert received, f"no latched {names.MAP} within {DISCOVERY_TIMEOUT_S} s; {node.diagnosis()}"
    return received[-1]


def test_nav_node_drives_sim_node_over_dds_to_a_goal(sim_graph, commander, home) -> None:
    start, reachable = home
    target = map_target(farthest(reachable, start.floor))
    assert commander.goToPoint(target, timeout_sec=DISCOVERY_TIMEOUT_S), sim_graph.diagnosis()
    wait_until_complete(commander, sim_graph)
    result = commander.getNavResult()
    assert commander.getResult() is TaskResult.SUCCEEDED, (commander.getTaskError(), sim_graph.diagnosis())
    final = result.final_pose.pose.position
    assert math.hypot(final.x - target.point.x, final.y - target.point.y) <= R + 1e-6
    assert result.collisions == 0 and result.path_length > 3.0
    assert sim_graph.nav.stop() == 0, sim_graph.diagnosis()


def test_a_commander_on_a_given_executor_serves_the_other_nodes_while_it_waits(sim_graph, rclpy_context, home):
    start, reachable = home
    executor = SingleThreadedExecutor(context=rclpy_context)
    watcher = rclpy.create_node("odom_watcher", context=rclpy_context)
    executor.add_node(watcher)
    poses: list[Odometry] = []
    odom = watcher.create_subscription(Odometry, "/odom", poses.append, 100)
    shared = OvmanCommander("shared_commander", executor=executor, context=rclpy_context)
    try:
        # Odometry published before the subscription is matched never arrives.
        deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
        while odom.get_publisher_count() == 0:
            assert time.monotonic() < deadline, f"/odom is not matched; {sim_graph.diagnosis()}"
            time.sleep(0.05)  # matching runs in the middleware, nothing to spin: poll the count
        assert shared.goToPoint(map_target(farthest(reachable, start.floor)), timeout_sec=DISCOVERY_TIMEOUT_S)
        before = len(poses)
        wait_until_complete(shared, sim_graph)
        assert shared.getResult() is TaskResult.SUCCEEDED, (shared.getTaskError(), sim_graph.diagnosis())
        assert len(poses) - before >= shared.getNavResult().steps  # one /odom per step, handled in the waits
    finally:
        shared.destroy_node()
    assert executor.get_nodes() == [watcher]  # the shared executor is left running for its other nodes
    executor.spin_once(timeout_sec=0.0)
    executor.remove_node(watcher)
    watcher.destroy_node()
    executor.shutdown()


def wait_for_first_step(commander: OvmanCommander, node: NodeProcess | SimGraph) -> Navigate.Feedback:
    """Spin until the running goal reports a step; fails if it ends first or no feedback comes."""
    deadline = time.monotonic() + NAVIGATION_TIMEOUT_S
    while (feedback := commander.getFeedback()) is None or feedback.steps_taken == 0:
        assert not commander.isTaskComplete(), f"the goal ended before its first step: {commander.getTaskError()}"
        assert time.monotonic() < deadline, f"no feedback within {NAVIGATION_TIMEOUT_S} s; {node.diagnosis()}"
    return feedback


def spin_until_done(
    executor: SingleThreadedExecutor, future: Future, timeout_s: float, node: NodeProcess | SimGraph
) -> Any:
    executor.spin_until_future_complete(future, timeout_sec=timeout_s)
    assert future.done(), f"no answer within {timeout_s} s; {node.diagnosis()}"
    return future.result()


def distance(a: Point, b: Point) -> float:
    return math.hypot(a.x - b.x, a.y - b.y)


# A cancel takes effect once the running action sequence has been executed: keep them short.
@pytest.mark.parametrize("sim_graph", [["navigation.sequence_actions:=2"]], indirect=True, ids=["sequences_of_2"])
def test_running_goals_cancel_over_dds_and_the_agent_stays_where_it_stopped(sim_graph, commander, home) -> None:
    start, reachable = home
    target = map_target(farthest(reachable, start.floor))

    # A plain rclpy action client: cancel once the agent moves; the result is CANCELED, short of the goal.
    client_node = rclpy.create_node("cancel_test_client", context=commander.context)
    executor = SingleThreadedExecutor(context=commander.context)
    executor.add_node(client_node)
    client = ActionClient(client_node, Navigate, names.NAVIGATE)
    try:
        assert client.wait_for_server(timeout_sec=DISCOVERY_TIMEOUT_S), sim_graph.diagnosis()
        feedback: list[Navigate.Feedback] = []
        sent = client.send_goal_async(Navigate.Goal(target=target), lambda m: feedback.append(m.feedback))
        handle = spin_until_done(executor, sent, DISCOVERY_TIMEOUT_S, sim_graph)
        assert handle.accepted, sim_graph.diagnosis()
        result_future = handle.get_result_async()
        deadline = time.monotonic() + NAVIGATION_TIMEOUT_S
        while not any(f.steps_taken for f in feedback):
            executor.spin_once(timeout_sec=0.1)
            assert not result_future.done(), f"the goal ended before it could be canceled: {result_future.result()}"
            assert time.monotonic() < deadline, f"no feedback within {NAVIGATION_TIMEOUT_S} s; {sim_graph.diagnosis()}"
        cancel = spin_until_done(executor, handle.cancel_goal_async(), CANCEL_TIMEOUT_S, sim_graph)
        assert cancel.return_code == CancelGoal.Response.ERROR_NONE
        assert [g.goal_id.uuid.tolist() for g in cancel.goals_canceling] == [handle.goal_id.uuid.tolist()]
        outcome = spin_until_done(executor, result_future, CANCEL_TIMEOUT_S, sim_graph)
    finally:
        client.destroy()
        executor.remove_node(client_node)
        executor.shutdown()
        client_node.destroy_node()
    assert outcome.status == GoalStatus.STATUS_CANCELED
    canceled = outcome.result
    assert (canceled.error_code, canceled.success) == (Navigate.Result.CANCELED, False), canceled.error_msg
    assert canceled.steps >= max(f.steps_taken for f in feedback)
    stopped_at = canceled.final_pose.pose.position
    assert distance(stopped_at, target.point) > R, "canceled after the first step, the agent must be short of the goal"

    # The commander: isTaskComplete is False while the goal runs, cancelTask ends it as CANCELED.
    assert commander.goToPoint(target, timeout_sec=DISCOVERY_TIMEOUT_S), sim_graph.diagnosis()
    assert not commander.isTaskComplete()
    assert commander.getResult() is TaskResult.UNKNOWN
    wait_for_first_step(commander, sim_graph)
    commander.cancelTask(timeout_sec=CANCEL_TIMEOUT_S)
    deadline = time.monotonic() + CANCEL_TIMEOUT_S
    while not commander.isTaskComplete():
        assert time.monotonic() < deadline, (
            f"no result within {CANCEL_TIMEOUT_S} s of cancelTask; {sim_graph.diagnosis()}"
        )
    assert commander.getResult() is TaskResult.CANCELED, commander.getTaskError()
    assert commander.getTaskError()[0] == Navigate.Result.CANCELED
    assert distance(commander.getNavResult().final_pose.pose.position, target.point) > R
    # The second goal's plan starts where the first cancel left the agent: it did not move in between.
    plan = commander.getPath(timeout_sec=DISCOVERY_TIMEOUT_S)
    assert plan is not None, sim_graph.diagnosis()
    first = plan.poses[0].pose.position
    assert (first.x, first.y) == pytest.approx((stopped_at.x, stopped_at.y))


def test_target_update_redirects_a_running_goal_over_dds(sim_graph, commander, home) -> None:
    start, reachable = home
    first = farthest(reachable, start.floor)
    second = farthest(reachable, start.floor, first)
    first_target, second_target = map_target(first), map_target(second)
    assert distance(first_target.point, second_target.point) > 2.0 * R
    # An update sent before nav_node's subscription matched the commander's publisher would be lost.
    deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
    while commander.update_pub.get_subscription_count() == 0:
        assert time.monotonic() < deadline, f"nav_node does not subscribe to target updates; {sim_graph.diagnosis()}"
        time.sleep(0.05)  # matching runs in the middleware, nothing to spin: poll the count

    assert commander.goToPoint(first_target, target_may_move=True, timeout_sec=DISCOVERY_TIMEOUT_S)
    wait_for_first_step(commander, sim_graph)
    commander.updateTarget(second_target)
    wait_until_complete(commander, sim_graph)

    assert commander.getResult() is TaskResult.SUCCEEDED, (commander.getTaskError(), sim_graph.diagnosis())
    result = commander.getNavResult()
    final = result.final_pose.pose.position
    assert distance(final, second_target.point) <= R + 1e-6, "the goal ends at the updated target"
    assert distance(final, first_target.point) > R
    assert result.replans >= 1, "the update triggers a replan"
    feedback = commander.getFeedback()
    assert (feedback.current_target.x, feedback.current_target.y) == pytest.approx(
        (second_target.point.x, second_target.point.y)
    )


def check_a_lockstep_goal_without_updates_fails_after_one_step(graph: SimGraph, commander, home) -> None:
    start, reachable = home
    target = map_target(farthest(reachable, start.floor))
    assert commander.goToPoint(target, target_may_move=True, update_every_step=True, timeout_sec=DISCOVERY_TIMEOUT_S), (
        graph.diagnosis()
    )
    wait_until_complete(commander, graph)
    code, message = commander.getTaskError()
    assert code == Navigate.Result.NO_TARGET and "no target update for the frame stamped" in message
    assert commander.getNavResult().steps == 1, "the first action needs no update; the second waits for one"


@pytest.mark.parametrize("sim_graph", [["navigation.sim_timeout_s:=2.0"]], indirect=True, ids=["timeout_2s"])
def test_a_goal_asking_for_an_update_every_step_waits_for_it_and_fails_without(sim_graph, commander, home) -> None:
    check_a_lockstep_goal_without_updates_fails_after_one_step(sim_graph, commander, home)


def test_a_lockstep_goal_waits_for_no_update_for_the_frame_that_reading_a_missed_pose_published(
    late_sim_graph, commander, home
) -> None:
    # The Stop that reads the pose nav_node missed publishes a frame before the goal's first action;
    # the first action must not wait for an update stamped with that frame (nobody sends one).
    check_a_lockstep_goal_without_updates_fails_after_one_step(late_sim_graph, commander, home)


def test_bad_and_unreachable_goals_fail_with_their_error_codes(nav_node, commander, home) -> None:
    # A success first: nav_node then reports failures (each logged at another severity) all the same.
    start, reachable = home
    assert commander.goToPoint(map_target(farthest(reachable, start.floor)), timeout_sec=DISCOVERY_TIMEOUT_S)
    wait_until_complete(commander, nav_node)
    assert commander.getResult() is TaskResult.SUCCEEDED, (commander.getTaskError(), nav_node.diagnosis())

    wrong_frame = map_target((2.0, 2.0))
    wrong_frame.header.frame_id = "odom"
    assert commander.goToPoint(wrong_frame, timeout_sec=DISCOVERY_TIMEOUT_S), nav_node.diagnosis()
    wait_until_complete(commander, nav_node)
    assert commander.getResult() is TaskResult.FAILED
    assert commander.getTaskError()[0] == Navigate.Result.INVALID_GOAL

    assert commander.goToPoint(map_target((500.0, 500.0)), timeout_sec=DISCOVERY_TIMEOUT_S)
    wait_until_complete(commander, nav_node)
    assert commander.getResult() is TaskResult.FAILED
    code, message = commander.getTaskError()
    assert code == Navigate.Result.UNREACHABLE, message
    assert commander.getNavResult().steps == 0


def test_query_reaches_the_query_service_in_another_process(ros_env, tmp_path, commander) -> None:
    server = NodeProcess([sys.executable, str(ECHO_SERVER), names.QUERY, "/ovman_test/unused"], tmp_path / "echo.log")
    try:
        response = commander.query("where was the vase?", arm="two_visit", timeout_sec=DISCOVERY_TIMEOUT_S)
        assert response is not None, server.diagnosis()
        # The echo server answers with the text length as goal x and echoes the arm.
        assert response.answered and response.goal.point.x == len("where was the vase?")
        assert response.explanation == "echo:where was the vase?|two_visit"
    finally:
        server.stop()


def test_sim_node_world_steps_through_its_private_client_and_reports_a_silent_sim(rclpy_context) -> None:
    """SimNodeWorld.step spins only its own hidden client node: it gets the reply of an Act server
    that another executor runs, and a server that never answers becomes a failed action."""
    import threading

    from ovman_ros.messages import pose_msg
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node

    from ovman_core.actions import Action
    from ovman_interfaces.srv import Act
    from ovman_nav.sim_client import ACT_CLIENT_NODE, SimNodeWorld

    answer = threading.Event()
    answer.set()

    def on_act(request: Act.Request, response: Act.Response) -> Act.Response:
        if not answer.is_set():
            time.sleep(1.0)  # longer than the client's timeout: the reply comes too late
        response.success = request.action == Action.MOVE_AHEAD.value
        response.pose.pose = pose_msg((1.0, -2.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        return response

    sim = Node("sim_node", context=rclpy_context)
    sim.create_service(Act, names.SIM_ACT, on_act)
    nav = Node("nav_node", context=rclpy_context)
    navigation = dataclasses.replace(CONFIG.nav_node.navigation, sim_timeout_s=0.3)
    world = SimNodeWorld(nav, ReentrantCallbackGroup(), navigation, lambda: None)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(sim)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert world.client.wait_for_service(timeout_sec=DISCOVERY_TIMEOUT_S)
        assert ACT_CLIENT_NODE in sim.get_node_names()
        result = world.step(Action.MOVE_AHEAD)
        assert result.success and not result.collided
        # map (1, -2) is AI2-THOR floor (x, z) = (2, 1)
        assert world.agent_pose().floor == pytest.approx((2.0, 1.0))
        answer.clear()
        late = world.step(Action.MOVE_AHEAD)
        assert not late.success and "did not answer" in late.message
    finally:
        executor.shutdown()
        spinner.join(timeout=5.0)
        world.destroy()
        nav.destroy_node()
        sim.destroy_node()


# --- message conversions of nav_node (no graph) ------------------------------------------------


def navigate_goal(x: float, y: float, frame: str = "map", **fields) -> Navigate.Goal:
    return Navigate.Goal(target=PointStamped(header=Header(frame_id=frame), point=Point(x=x, y=y)), **fields)


def test_goal_region_in_map_becomes_the_world_footprint() -> None:
    goal = navigate_goal(3.0, -1.0, has_region=True, region_min=Point(x=2.5, y=-1.5), region_max=Point(x=3.5, y=-0.25))
    target = goal_target(goal, "map")
    # map (x, y) -> world (x = -y, z = x)
    assert target.point == pytest.approx((1.0, 3.0))
    r = target.region
    assert (r.x_min, r.x_max, r.z_min, r.z_max) == pytest.approx((0.25, 1.5, 2.5, 3.5))


def test_unusable_goals_map_to_no_target_and_invalid_goal() -> None:
    cases = [
        (navigate_goal(1.0, 1.0, frame=""), NavError.NO_TARGET),
        (navigate_goal(math.nan, 1.0), NavError.NO_TARGET),
        (navigate_goal(1.0, 1.0, frame="odom"), NavError.INVALID_GOAL),
        (
            navigate_goal(1.0, 1.0, has_region=True, region_min=Point(x=2.0), region_max=Point(x=1.0)),
            NavError.INVALID_GOAL,
        ),
    ]
    for goal, code in cases:
        with pytest.raises(GoalError) as caught:
            goal_target(goal, "map")
        assert caught.value.code is code
    with pytest.raises(GoalError) as caught:
        goal_settings(navigate_goal(1.0, 1.0, success_radius=-1.0), NavSettings.from_config(CONFIG))
    assert caught.value.code is NavError.INVALID_GOAL


def test_goal_overrides_and_defaults_of_radius_and_step_budget() -> None:
    defaults = NavSettings.from_config(CONFIG)
    assert goal_settings(navigate_goal(0.0, 0.0), defaults) == defaults
    custom = goal_settings(navigate_goal(0.0, 0.0, success_radius=0.5, max_steps=7), defaults)
    assert (custom.success_radius, custom.max_steps) == (0.5, 7)


def test_a_target_update_without_a_region_carries_the_goals_region_along() -> None:
    target = NavTarget(point=(1.0, 3.0), region=Footprint(0.5, 2.5, 1.5, 3.5))
    moved = updated_target(target, TargetUpdate(header=Header(frame_id="map"), point=Point(x=5.0, y=-2.0)))
    assert moved.point == pytest.approx((2.0, 5.0))
    r = moved.region
    assert (r.x_min, r.z_min, r.x_max, r.z_max) == pytest.approx((1.5, 4.5, 2.5, 5.5))


def test_a_target_update_with_a_region_replaces_the_footprint() -> None:
    target = NavTarget(point=(1.0, 3.0), region=Footprint(0.5, 2.5, 1.5, 3.5))
    update = TargetUpdate(
        header=Header(frame_id="map"),
        point=Point(x=5.0, y=-2.0),
        has_region=True,
        region_min=Point(x=4.9, y=-2.3),
        region_max=Point(x=5.1, y=-1.9),
    )
    moved = updated_target(target, update)
    # map (x, y) -> world (x = -y, z = x)
    assert moved.point == pytest.approx((2.0, 5.0))
    r = moved.region
    assert (r.x_min, r.z_min, r.x_max, r.z_max) == pytest.approx((1.9, 4.9, 2.3, 5.1))
    not_finite = TargetUpdate(header=update.header, point=Point(x=math.nan))
    empty = TargetUpdate(header=update.header, point=update.point, has_region=True, region_min=Point(x=6.0))
    for bad, code in ((not_finite, NavError.NO_TARGET), (empty, NavError.INVALID_GOAL)):
        with pytest.raises(GoalError) as caught:
            updated_target(target, bad)
        assert caught.value.code is code


def test_plan_path_poses_face_along_the_path_in_map() -> None:
    path = path_message([(0.0, 0.0), (0.0, 0.25), (0.25, 0.25)], Header(frame_id="map"))
    positions = [c for p in path.poses for c in (p.pose.position.x, p.pose.position.y)]
    assert positions == pytest.approx([0.0, 0.0, 0.25, 0.0, 0.25, -0.25])
    yaws = [2.0 * math.atan2(p.pose.orientation.z, p.pose.orientation.w) for p in path.poses]
    # World +z is map +x (yaw 0); world +x is map -y (yaw -pi/2); the last pose keeps its heading.
    assert yaws == pytest.approx([0.0, -math.pi / 2, -math.pi / 2])


def test_nav_node_reads_the_robots_pose_from_tf_and_its_world_takes_the_newest(rclpy_context) -> None:
    from ovman_ros.bundle import Transform
    from ovman_ros.messages import static_tf_message, tf_message
    from tf2_msgs.msg import TFMessage

    from ovman_core.frames import thor_yaw_to_ros, yaw_quaternion
    from ovman_nav.nav_node import NavNode

    frames = CONFIG.frames
    node = NavNode(CONFIG, context=rclpy_context)  # the builtin backend on sim_node's world: none runs
    probe = rclpy.create_node("robot_tree", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    for each in (node, probe):
        executor.add_node(each)
    try:
        assert node.robot_pose() is None and node.sim is not None
        with pytest.raises(RuntimeError, match="no agent pose yet"):
            node.sim.agent_pose()
        probe.create_publisher(TFMessage, "/tf_static", qos.LATCHED).publish(static_tf_message(frames, 0))
        tf = probe.create_publisher(TFMessage, "/tf", qos.TF)

        def base(pose: AgentPose) -> Transform:
            at = thor_to_ros_point((pose.x, 0.0, pose.z))
            return Transform(frames.odom, frames.base, at, yaw_quaternion(thor_yaw_to_ros(pose.yaw_deg)))

        def spin_until(condition, what: str) -> None:
            deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
            while not condition():
                assert time.monotonic() < deadline, f"{what} within {DISCOVERY_TIMEOUT_S} s"
                executor.spin_once(timeout_sec=0.02)

        spin_until(lambda: tf.get_subscription_count() > 0, "nav_node's /tf subscription")
        first, later = AgentPose(1.25, -2.0, 90.0, 0.0), AgentPose(0.5, 3.0, 270.0, 0.0)
        tf.publish(tf_message([base(first)], 2_000_000_000))
        spin_until(lambda: node.robot_pose() is not None, "the robot's pose from /tf")
        pose, stamp = node.robot_pose()
        assert stamp == 2_000_000_000
        assert (pose.x, pose.z, pose.yaw_deg) == pytest.approx((first.x, first.z, first.yaw_deg))
        assert node.sim.agent_pose().floor == pytest.approx(first.floor)
        tf.publish(tf_message([base(later)], 3_000_000_000))
        spin_until(lambda: node.robot_pose()[1] == 3_000_000_000, "the newer pose")
        assert node.sim.agent_pose().floor == pytest.approx(later.floor)
        assert node.sim.agent_pose().yaw_deg == pytest.approx(270.0)
    finally:
        executor.shutdown()
        probe.destroy_node()
        node.destroy_node()
