"""nav_node: the ``/ovman/navigate`` action server (ovman_interfaces/action/Navigate).

A thin node: it converts goals, target updates and results between REP 103 messages (``map``
frame) and the core's AI2-THOR world frame, and calls :func:`ovman_nav.executor.navigate`
(``navigation.backend: builtin``) or :class:`ovman_nav.nav2_backend.Nav2Backend` (``nav2``).

Interfaces:
- action ``/ovman/navigate`` (Navigate): one goal at a time (a goal sent while one runs is
  rejected); cancellable; Nav2-style feedback after an action, at most once per
  ``navigation.feedback_period_s``; enumerated error codes.
- ``/ovman/target_update`` (ovman_interfaces/TargetUpdate, ``map``): newer estimates of a moving
  target, used while the current goal has ``target_may_move``. This is how a running goal is
  re-targeted (OvmanCommander.updateTarget publishes here): an update carries no goal id and
  applies to the goal running when it arrives (one at a time); the newest one wins, its region
  (``has_region``) becomes the target's footprint, or else the goal's region follows the point;
  one farther than ``navigation.retarget_distance`` triggers a replan. An update in another
  frame, or with a non-finite point or an empty region, is dropped with a warning.
  Updates received before a goal starts are discarded. With the goal's ``update_every_step`` (and
  sim_node as the world) the client sends one update per frame, stamped with the frame's stamp,
  and nav_node waits before each action for the update of its previous action's frame (NO_TARGET
  after ``navigation.sim_timeout_s``), so the run does not depend on when updates arrive. There is
  no Nav2-style preemption: to change to an unrelated goal, cancel the running one and send the
  new goal.
- ``/ovman/plan`` (nav_msgs/Path, ``map``, transient local): every new plan.
- ``/map`` (nav_msgs/OccupancyGrid, transient local): the reachable grid at each goal, published
  only when no other node (sim_node) publishes ``/map``.

The World the builtin backend drives: the one it is given (``python -m ovman_eval.nav_in_world``
gives it a world of ``sim_node.world.kind`` with ``navigation.scene`` loaded: ovman_nav never imports
the simulator), else sim_node's over DDS (:class:`SimNodeWorld`: actions through ``/sim_node/act``, or, for a
fixed target, the predicted actions of the plan through ``/sim_node/act_sequence``, up to
``navigation.sequence_actions`` per round trip; the reachable grid from sim_node's latched
``/map``, the pose from ``/odom``). A goal finding neither aborts with SIM_FAILURE. A cancel
takes effect once the running sequence has been executed.

Parameters: every key of ``ovman_core.config.node_parameters(config, "nav_node")`` under the
same dotted name; the config file is ``$OVMAN_CONFIG`` or the default one.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, Pose, PoseStamped
from nav_msgs.msg import OccupancyGrid, Odometry, Path
from ovman_ros.messages import floor_pose_msg, header_msg, occupancy_grid_msg, pose_msg, stamp_of, start_pose_from_msg
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import (
    ConfigError,
    NavigationParams,
    OvmanConfig,
    load_config,
    with_parameters,
)
from ovman_core.frames import ros_to_thor_point, thor_to_ros_point, thor_yaw_to_ros, yaw_quaternion
from ovman_core.grid import (
    GridError,
    NavGrid,
    OccupancyGridFields,
    from_occupancy_fields,
    grid_from_reachable,
    to_occupancy_fields,
)
from ovman_core.world_state import AgentPose
from ovman_interfaces.action import Navigate
from ovman_interfaces.msg import TargetUpdate
from ovman_interfaces.srv import Act, ActSequence
from ovman_nav.astar import plan_to_region
from ovman_nav.executor import (
    NavError,
    NavigableWorld,
    NavProgress,
    NavResult,
    NavSettings,
    NavTarget,
    TargetLostError,
    navigate,
)
from ovman_nav.nav2_backend import GoalChooser, Nav2Backend, Nav2Settings, basic_navigator
from ovman_ros import names, qos

NODE_NAME = "nav_node"
ACT_CLIENT_NODE = "_nav_node_act"
"""Hidden node (leading underscore) holding :class:`SimNodeWorld`'s Act client."""

# Parameters that choose what the node owns; they cannot change while it runs.
_FIXED_PARAMETERS = (
    "navigation.backend",
    "navigation.scene",
    "navigation.sim_timeout_s",
    "navigation.sequence_position_tolerance",
    "navigation.sequence_yaw_tolerance_deg",
)


class GoalError(ValueError):
    """A Navigate goal that cannot be executed; ``code`` is its Navigate error code."""

    def __init__(self, code: NavError, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- message conversions (no graph needed) -----------------------------------------------------


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


class SimNodeWorld:
    """The world sim_node simulates, seen over DDS (a NavigableWorld).

    Actions go through sim_node's Act service; the reachable positions are the free cells of
    sim_node's latched ``/map`` (recomputed by sim_node whenever a visit loads); the pose is the
    last Act reply, or ``odom`` (volatile) before the first action (``odom`` = ``map`` in simulation).

    The Act clients live on a private hidden node that only :meth:`step` and :meth:`step_sequence`
    spin, with its own single-threaded executor, in the thread running the goal: a synchronous
    call completed by a MultiThreadedExecutor was measured to wait up to 3.6 s for some replies
    that sim_node had sent within milliseconds (71 of ~1,500 calls over 0.1 s in one benchmark
    run; none with the private executor).
    """

    def __init__(self, node: Node, group: Any, navigation: NavigationParams) -> None:
        self.timeout_s = navigation.sim_timeout_s
        self.position_tolerance = navigation.sequence_position_tolerance
        self.yaw_tolerance_deg = navigation.sequence_yaw_tolerance_deg
        # A bare helper: no parameters (so no parameter services to wait on) and no endpoint events.
        self._act_node = GraphNode(
            ACT_CLIENT_NODE,
            namespace=node.get_namespace(),
            context=node.context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        self._act_executor = SingleThreadedExecutor(context=node.context)
        self._act_executor.add_node(self._act_node)
        self.client = self._act_node.create_client(Act, names.SIM_ACT)
        self.sequence_client = self._act_node.create_client(ActSequence, names.SIM_ACT_SEQUENCE)
        self.last_stamp_ns = 0
        """Stamp (ns) of the frame sim_node published after the last action sent from here."""
        self._lock = threading.Lock()
        self._map: OccupancyGrid | None = None
        self._pose: AgentPose | None = None
        self._odom_pose: Pose | None = None
        """The latest /odom pose not yet converted: converted only when read (/odom arrives after
        every action, the pose is read far less often, and an Act reply also gives it)."""
        self._have_map = threading.Event()
        self._have_pose = threading.Event()
        node.create_subscription(OccupancyGrid, names.MAP, self._on_map, qos.LATCHED, callback_group=group)
        # Volatile, as odometry is published: it matches any odometry publisher (volatile or latched).
        node.create_subscription(Odometry, names.ODOM, self._on_odom, qos.frames(1), callback_group=group)

    def wait_ready(self) -> str:
        """Wait up to ``timeout_s`` for the act service, a map and a pose; the reason when missing."""
        if not self.client.wait_for_service(timeout_sec=self.timeout_s):
            return f"sim_node's {names.SIM_ACT} service is not available"
        if not self._have_map.wait(self.timeout_s):
            return f"no {names.MAP} from sim_node (is a live visit loaded?)"
        if not self._have_pose.wait(self.timeout_s):
            # The visit's odometry went out before this subscription matched: ask through a Stop.
            problem = self.refresh_pose()
            if problem:
                return f"no {names.ODOM} from sim_node, and a Stop failed: {problem}"
        return ""

    def agent_pose(self) -> AgentPose:
        with self._lock:
            if self._odom_pose is not None:
                self._pose, self._odom_pose = start_pose_from_msg(self._odom_pose, 0.0), None
            if self._pose is None:
                raise RuntimeError(f"no agent pose from sim_node yet ({names.ODOM})")
            return self._pose

    def reachable_positions(self) -> list[Vec2]:
        with self._lock:
            message = self._map
        if message is None:
            raise RuntimeError(f"no {names.MAP} from sim_node yet")
        return from_occupancy_fields(occupancy_fields(message)).free_positions()

    def refresh_pose(self) -> str:
        """Read the agent's pose now through a Stop (it moves nothing and advances no time): the
        latched ``/odom`` of a visit loaded just before the goal may not have been handled yet.
        Returns the problem, or "" when the pose is current."""
        result = self.step(Action.STOP)
        return "" if result.success else result.message

    def step(self, action: Action) -> ActionResult:
        """One action through sim_node (called by one goal's thread at a time)."""
        reply = self._call(self.client, Act.Request(action=action.value), action.value)
        if reply is None:
            return ActionResult(False, message=f"sim_node did not answer {action.value} within {self.timeout_s} s")
        with self._lock:
            self._pose, self._odom_pose = start_pose_from_msg(reply.pose.pose, 0.0), None
            self.last_stamp_ns = stamp_of(reply.pose.header)
        self._have_pose.set()
        return ActionResult(reply.success, reply.collided, reply.message)

    def step_sequence(
        self, actions: Sequence[Action], expected: Sequence[AgentPose]
    ) -> list[tuple[ActionResult, AgentPose]]:
        """Several actions in one round trip (sim_node's act_sequence); see
        :class:`ovman_nav.executor.SequenceWorld`."""
        request = ActSequence.Request(
            actions=[a.value for a in actions],
            expected=[floor_pose_msg(p) for p in expected],
            position_tolerance=self.position_tolerance,
            yaw_tolerance_deg=self.yaw_tolerance_deg,
        )
        what = f"a sequence of {len(actions)} actions"
        reply = self._call(self.sequence_client, request, what)
        if reply is None:
            return [
                (
                    ActionResult(False, message=f"sim_node did not answer {what} within {self.timeout_s} s"),
                    self.agent_pose(),
                )
            ]
        if not reply.success:
            return [(ActionResult(False, message=f"sim_node refused {what}: {reply.message}"), self.agent_pose())]
        done = [
            (ActionResult(ok, collided), start_pose_from_msg(pose.pose, 0.0))
            for ok, collided, pose in zip(reply.success, reply.collided, reply.poses, strict=True)
        ]
        last, pose = done[-1]
        if not last.success:
            done[-1] = (dataclasses.replace(last, message=reply.message), pose)
        with self._lock:
            self._pose, self._odom_pose = pose, None
            self.last_stamp_ns = stamp_of(reply.poses[len(done) - 1].header)
        return done

    def _call(self, client: Client, request: Any, what: str) -> Any:
        """sim_node's reply, spinning the private executor; None after ``timeout_s``."""
        future = client.call_async(request)
        self._act_executor.spin_until_future_complete(future, timeout_sec=self.timeout_s)
        if not future.done():
            client.remove_pending_request(future)
            return None
        return future.result()

    def _on_map(self, message: OccupancyGrid) -> None:
        with self._lock:
            self._map = message
        self._have_map.set()

    def _on_odom(self, message: Odometry) -> None:
        with self._lock:
            self._odom_pose = message.pose.pose
        self._have_pose.set()

    def destroy(self) -> None:
        self._act_executor.remove_node(self._act_node)
        self._act_executor.shutdown()
        self._act_node.destroy_node()


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


# --- the node ----------------------------------------------------------------------------------


class NavNode(GraphNode):
    """Navigate action server; see the module docstring."""

    def __init__(
        self,
        config: OvmanConfig,
        world_factory: Callable[[OvmanConfig], NavigableWorld] | None = None,
        **kwargs: Any,
    ) -> None:
        """``world_factory``: makes the world to drive from the node's config (its parameters
        applied) when ``navigation.scene`` is set; None: sim_node's world over DDS, and a scene is
        refused (ovman_nav never imports the simulator: ``python -m ovman_eval.nav_in_world``)."""
        super().__init__(NODE_NAME, **kwargs)
        self.config = config_from_parameters(self, config, [(NODE_NAME, "")])
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        self.add_on_set_parameters_callback(self._on_set_parameters)
        nav = self.config.nav_node.navigation
        if nav.backend not in ("builtin", "nav2"):
            raise ConfigError(f"navigation.backend = {nav.backend!r}; expected builtin or nav2")
        group = ReentrantCallbackGroup()
        self.sim: SimNodeWorld | None = None
        world: NavigableWorld | None = None
        if nav.scene:
            if world_factory is None:
                raise ConfigError(
                    f"navigation.scene = {nav.scene!r}: nav_node drives sim_node's world over DDS; to drive a world "
                    "in process, start `python -m ovman_eval.nav_in_world` (nav_node with the simulator in its process)"
                )
            world = world_factory(self.config)
            self.get_logger().info(f"driving its own {self.config.sim_node.world.kind} world, scene {nav.scene}")
        elif nav.backend == "builtin":
            self.sim = SimNodeWorld(self, group, nav)
            self.get_logger().info(f"driving sim_node's world through {names.SIM_ACT}")
        self.world = world
        self.nav2 = (
            Nav2Backend(basic_navigator(), Nav2Settings.from_config(self.config)) if nav.backend == "nav2" else None
        )
        self._busy = threading.Lock()
        self._update_lock = threading.Condition()
        self._latest_update: TargetUpdate | None = None
        self._update_stamp_ns = 0
        """Stamp of the newest target update received (its header's)."""
        self.plan_pub = self.create_publisher(Path, names.PLAN, qos.LATCHED)
        self.map_pub = None  # created when no other node publishes /map
        self._published_grid: NavGrid | None = None
        self.create_subscription(TargetUpdate, names.TARGET_UPDATE, self._on_target_update, 10, callback_group=group)
        self.action_server = ActionServer(
            self,
            Navigate,
            names.NAVIGATE,
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda request: CancelResponse.ACCEPT,
            callback_group=group,
        )

    # parameters

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        fixed = [p.name for p in params if p.name in _FIXED_PARAMETERS]
        if fixed:
            return SetParametersResult(successful=False, reason=f"{', '.join(fixed)}: restart nav_node to change")
        try:
            config = with_parameters(self.config, NODE_NAME, {p.name: p.value for p in params})
            NavSettings.from_config(config)
        except (ConfigError, ValueError) as err:
            return SetParametersResult(successful=False, reason=str(err))
        self.config = config
        return SetParametersResult(successful=True)

    # callbacks

    def _on_target_update(self, message: TargetUpdate) -> None:
        if message.header.frame_id != self.config.frames.map:
            self.get_logger().warning(
                f"ignoring target update in frame '{message.header.frame_id}'; expected '{self.config.frames.map}'"
            )
            return
        try:
            updated_target(NavTarget.at_point((0.0, 0.0)), message)  # the checks the running goal applies
        except GoalError as err:
            self.get_logger().warning(f"ignoring target update: {err}")
            return
        with self._update_lock:
            self._latest_update = message
            self._update_stamp_ns = max(self._update_stamp_ns, stamp_of(message.header))
            self._update_lock.notify_all()

    def _take_update(self) -> TargetUpdate | None:
        with self._update_lock:
            update, self._latest_update = self._latest_update, None
        return update

    def _wait_for_update(self, stamp_ns: int, timeout_s: float) -> None:
        """Wait until a target update stamped ``stamp_ns`` or later has arrived (update_every_step)."""
        with self._update_lock:
            if not self._update_lock.wait_for(lambda: self._update_stamp_ns >= stamp_ns, timeout_s):
                raise TargetLostError(
                    f"no target update for the frame stamped {stamp_ns} ns within {timeout_s} s "
                    "(the goal asked for one update per frame: update_every_step)"
                )

    def _on_goal(self, goal: Navigate.Goal) -> GoalResponse:
        if self._busy.locked():
            self.get_logger().warning("rejecting a Navigate goal: another goal is running")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, goal_handle: ServerGoalHandle) -> Navigate.Result:
        """Run the goal in its own thread and wait for it without holding the executor, which goes
        on serving cancel requests, target updates, /map and /odom, and rejecting other goals."""
        done: Future[Navigate.Result] = Future(executor=self.executor)
        done.add_done_callback(lambda _: None)  # a done callback makes the thread's set_result wake the executor
        threading.Thread(target=self._execute_in_thread, args=(goal_handle, done), name="navigate", daemon=True).start()
        result = await done
        assert result is not None
        return result

    def _execute_in_thread(self, goal_handle: ServerGoalHandle, done: Future[Navigate.Result]) -> None:
        try:
            done.set_result(self._execute_goal(goal_handle))
        except BaseException as err:  # handed to the awaiting executor task
            done.set_exception(err)

    def _execute_goal(self, goal_handle: ServerGoalHandle) -> Navigate.Result:
        with self._busy:
            started = self.get_clock().now()
            try:
                result = self._run(goal_handle, started)
            except GoalError as err:
                result = NavResult.failure(err.code, str(err))
            except Exception as err:  # the action must answer; the traceback goes to the log
                self.get_logger().error(f"navigation failed unexpectedly:\n{traceback.format_exc()}")
                result = NavResult.failure(NavError.UNKNOWN, f"{type(err).__name__}: {err}")
            if result.error is NavError.CANCELED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif result.success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            level = self.get_logger().info if result.success else self.get_logger().warning
            level(f"Navigate ended: {result.error.name} {result.message} ({result.steps} steps)")
            return result_message(result, self._header())

    # navigation

    def _run(self, goal_handle: ServerGoalHandle, started: Any) -> NavResult:
        goal: Navigate.Goal = goal_handle.request
        target = goal_target(goal, self.config.frames.map)
        settings = goal_settings(goal, NavSettings.from_config(self.config))
        self._take_update()  # estimates from before this goal do not describe its target
        current = [target]
        lockstep = goal.target_may_move and goal.update_every_step and self.sim is not None
        goal_start_stamp = self.sim.last_stamp_ns if self.sim is not None else 0

        def updates() -> NavTarget | None:
            if lockstep and self.sim is not None and self.sim.last_stamp_ns > goal_start_stamp:
                # The estimate from the frame of this goal's previous action, as in process.
                self._wait_for_update(self.sim.last_stamp_ns, self.config.nav_node.navigation.sim_timeout_s)
            update = self._take_update() if goal.target_may_move else None
            if update is None:
                return None
            current[0] = updated_target(current[0], update)
            return current[0]

        period_ns = int(self.config.nav_node.navigation.feedback_period_s * 1e9)
        last_feedback = [None]

        def progress(p: NavProgress) -> None:
            now = self.get_clock().now()
            # Publishing costs more than a simulated step: at most one feedback per period.
            if last_feedback[0] is not None and (now - last_feedback[0]).nanoseconds < period_ns:
                return
            last_feedback[0] = now
            feedback = Navigate.Feedback(
                current_pose=base_pose_stamped(p.pose, self._header()),
                current_target=map_point(p.target),
                distance_remaining=p.distance_remaining,
                number_of_replans=p.replans,
                steps_taken=p.steps,
                collisions=p.collisions,
            )
            elapsed = (now - started).nanoseconds
            feedback.navigation_time = Duration(sec=elapsed // 1_000_000_000, nanosec=elapsed % 1_000_000_000)
            goal_handle.publish_feedback(feedback)

        cancel = lambda: goal_handle.is_cancel_requested  # noqa: E731 - polled by the core
        if self.nav2 is not None:
            choose = self._nearest_success_cell(self.world, settings) if self.world is not None else None
            return self.nav2.navigate(
                target, choose_goal=choose, target_updates=updates, should_cancel=cancel, on_progress=progress
            )
        world = self.world
        if world is None and self.sim is not None:
            problem = self.sim.wait_ready()
            if problem:
                raise GoalError(
                    NavError.SIM_FAILURE,
                    f"nav_node has no world to drive: {problem}; run sim_node with a live visit, or start "
                    "`python -m ovman_eval.nav_in_world` with navigation.scene set (e.g. embedded-3)",
                )
            if not goal.target_may_move:
                # A target that may move is followed by sight; a Stop would publish one more frame.
                problem = self.sim.refresh_pose()
                if problem:
                    raise GoalError(NavError.SIM_FAILURE, f"sim_node cannot report the agent's pose: {problem}")
            world = self.sim
        if world is None:
            raise GoalError(NavError.SIM_FAILURE, "nav_node has no world to drive")
        self._publish_map(settings)
        return navigate(
            world,
            target,
            settings,
            target_may_move=goal.target_may_move,
            target_updates=updates if goal.target_may_move else None,
            should_cancel=cancel,
            on_progress=progress,
            on_plan=lambda points: self.plan_pub.publish(path_message(points, self._header())),
        )

    def _nearest_success_cell(self, world: NavigableWorld, settings: NavSettings) -> GoalChooser:
        def choose(target: NavTarget) -> Vec2:
            grid = grid_from_reachable(world.reachable_positions(), settings.resolution)
            start = grid.cell_of(world.agent_pose().floor)
            plan = plan_to_region(grid, start, target.region, settings.success_radius - settings.approach_margin)
            if not plan.path:
                plan = plan_to_region(grid, start, target.region, settings.success_radius)
            return grid.world_of(plan.path[-1]) if plan.path else target.point

        return choose

    def _publish_map(self, settings: NavSettings) -> None:
        """Publish the reachable grid on /map unless another node publishes it."""
        own = 1 if self.map_pub is not None else 0
        if self.world is None or self.count_publishers(names.MAP) > own:
            return  # sim_node publishes the map of the world it simulates
        try:
            grid = grid_from_reachable(self.world.reachable_positions(), settings.resolution)
        except GridError as err:
            raise GoalError(NavError.SIM_FAILURE, f"the world's reachable grid is unusable: {err}") from err
        if self.map_pub is None:
            self.map_pub = self.create_publisher(OccupancyGrid, names.MAP, qos.LATCHED)
        elif grid == self._published_grid:
            return  # latched: subscribers already hold this grid
        self._published_grid = grid
        fields = to_occupancy_fields(grid, self.config.frames.map)
        self.map_pub.publish(occupancy_grid_msg(fields, self.get_clock().now().nanoseconds))

    def _header(self) -> Any:
        return header_msg(self.get_clock().now().nanoseconds, self.config.frames.map)

    def destroy_node(self) -> None:
        if self.sim is not None:
            self.sim.destroy()
        super().destroy_node()


def main(args: Sequence[str] | None = None) -> int:
    """Start nav_node; 0 after Ctrl-C or an external shutdown, 1 when it cannot start (a bad
    config, no Nav2, a scene that fails to load). One thread serves every callback; a running goal
    has its own (NavNode._execute): a MultiThreadedExecutor was measured to accept some goals
    seconds late."""
    return run_node(
        "nav_node", lambda: NavNode(load_config()), args, startup_errors=(ConfigError, ValueError, RuntimeError)
    )


if __name__ == "__main__":
    raise SystemExit(main())
