"""nav_node: the ``ovman/navigate`` action server (ovman_interfaces/action/Navigate).

A thin node: it converts goals, target updates and results between REP 103 ``map`` messages and
the core's AI2-THOR world frame (:mod:`ovman_nav.nav_messages`) and runs the builtin executor or
Nav2 (``navigation.backend``). One goal at a time; a running goal is re-targeted through
``ovman/target_update`` (the newest wins); there is no Nav2-style preemption. It publishes
``ovman/plan`` and, unless another node does, ``map`` (latched). It drives the world it is given, else
sim_node's over DDS (:class:`ovman_nav.sim_client.SimNodeWorld`): ovman_nav never imports the simulator.
Parameters: ``node_parameters(config, "nav_node")``, read at start-up. Every name is relative.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from builtin_interfaces.msg import Duration
from nav_msgs.msg import OccupancyGrid, Path
from ovman_ros.messages import base_pose_of, header_msg, occupancy_grid_msg, stamp_of
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from ovman_ros.tf_buffer import TransformError
from ovman_ros.tf_listener import transform_source
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.parameter import Parameter
from rclpy.task import Future

from ovman_core.config import (
    ConfigError,
    OvmanConfig,
    load_config,
    with_parameters,
)
from ovman_core.grid import (
    GridError,
    NavGrid,
    grid_from_reachable,
    to_occupancy_fields,
)
from ovman_core.world_state import AgentPose
from ovman_interfaces.action import Navigate
from ovman_interfaces.msg import TargetUpdate
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
from ovman_nav.goal_choice import nearest_success_cell
from ovman_nav.nav2_backend import Nav2Backend, Nav2Settings, basic_navigator
from ovman_nav.nav_messages import (
    GoalError,
    base_pose_stamped,
    goal_settings,
    goal_target,
    map_point,
    path_message,
    result_message,
    updated_target,
)
from ovman_nav.sim_client import SimNodeWorld
from ovman_ros import names, qos

NODE_NAME = "nav_node"

# Parameters that choose what the node owns; they cannot change while it runs.
_FIXED_PARAMETERS = (
    "navigation.backend",
    "navigation.scene",
    "navigation.sim_timeout_s",
    "navigation.sequence_position_tolerance",
    "navigation.sequence_yaw_tolerance_deg",
)


# --- the node ----------------------------------------------------------------------------------


class NavNode(GraphNode):
    """Navigate action server; see the module docstring.

    A target update carries no goal id and applies to the goal running when it arrives; one in
    another frame, non-finite or with an empty region is dropped with a warning, and those received
    before a goal starts are discarded. With the goal's ``update_every_step`` (sim_node as the world)
    the node waits before each action for the update of its previous action's frame (NO_TARGET after
    ``navigation.sim_timeout_s``), so a run does not depend on when updates arrive. A cancel takes
    effect once the running action sequence has been executed; a goal finding no world aborts with
    SIM_FAILURE."""

    sim: SimNodeWorld | None = None
    """sim_node's world over DDS (None until made, and when the node drives another world); a class
    default, so that rclpy's clean-up of a node that failed to start can destroy it."""

    def __init__(
        self,
        config: OvmanConfig,
        world_factory: Callable[[OvmanConfig], NavigableWorld] | None = None,
        **kwargs: Any,
    ) -> None:
        """``world_factory``: makes the world to drive from the node's config (its parameters
        applied) when ``navigation.scene`` is set; None: sim_node's world over DDS, and a scene is
        refused (ovman_nav never imports the simulator: ``python -m ovman_eval.graph.nav_in_world``)."""
        super().__init__(NODE_NAME, **kwargs)
        self.config = config_from_parameters(self, config, [(NODE_NAME, "")])
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        self.add_on_set_parameters_callback(self._on_set_parameters)
        nav = self.config.nav_node.navigation
        if nav.backend not in ("builtin", "nav2"):
            raise ConfigError(f"navigation.backend = {nav.backend!r}; expected builtin or nav2")
        group = ReentrantCallbackGroup()
        # The robot's own pose: its base frame in map on the frame tree, the latest there is.
        try:
            ros = self.config.shared.ros
            self.tf, tf_backend = transform_source(self, ros.tf_backend, ros.tf_cache_s)
        except ValueError as err:
            raise ConfigError(f"config /** ros.tf_backend: {err}") from None
        world: NavigableWorld | None = None
        if nav.scene:
            if world_factory is None:
                raise ConfigError(
                    f"navigation.scene = {nav.scene!r}: nav_node drives sim_node's world over DDS; to drive a world "
                    "in process, start `python -m ovman_eval.graph.nav_in_world` (nav_node with the simulator in its "
                    "process)"
                )
            world = world_factory(self.config)
            self.get_logger().info(f"driving its own {self.config.sim_node.world.kind} world, scene {nav.scene}")
        elif nav.backend == "builtin":
            self.sim = SimNodeWorld(self, group, nav, self.robot_pose)
            self.get_logger().info(f"driving sim_node's world through {names.SIM_ACT}")
        frames = self.config.frames
        self.get_logger().info(f"the robot's pose: {frames.base} in {frames.map} from {tf_backend}")
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

    def robot_pose(self) -> tuple[AgentPose, int] | None:
        """The robot's base (``frames.base``) in ``frames.map`` at the latest time the frame tree
        knows, and that stamp (ns); None while the tree does not connect them."""
        frames = self.config.frames
        try:
            transform, stamp = self.tf.latest(frames.map, frames.base)
        except TransformError:
            return None
        return base_pose_of(transform), stamp

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
            # One call site per severity: rclpy's logger raises when one call site changes severity.
            ended = f"Navigate ended: {result.error.name} {result.message} ({result.steps} steps)"
            if result.success:
                self.get_logger().info(ended)
            else:
                self.get_logger().warning(ended)
            return result_message(result, self._header())

    # navigation

    def _run(self, goal_handle: ServerGoalHandle, started: Any) -> NavResult:
        goal: Navigate.Goal = goal_handle.request
        target = goal_target(goal, self.config.frames.map)
        settings = goal_settings(goal, NavSettings.from_config(self.config))
        self._take_update()  # estimates from before this goal do not describe its target
        current = [target]
        lockstep = goal.target_may_move and goal.update_every_step and self.sim is not None
        goal_start_stamp = [0]
        """Stamp of sim_node's frame before this goal's first action: taken once the world is ready,
        since getting ready may itself publish a frame (the Stop that reads a missed pose)."""

        def updates() -> NavTarget | None:
            if lockstep and self.sim is not None and self.sim.last_stamp_ns > goal_start_stamp[0]:
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
            choose = nearest_success_cell(self.world, settings) if self.world is not None else None
            return self.nav2.navigate(
                target,
                choose_goal=choose,
                target_updates=updates,
                should_cancel=cancel,
                on_progress=progress,
                robot_pose=lambda: seen[0] if (seen := self.robot_pose()) is not None else None,
            )
        world = self.world
        if world is None and self.sim is not None:
            problem = self.sim.wait_ready()
            if problem:
                raise GoalError(
                    NavError.SIM_FAILURE,
                    f"nav_node has no world to drive: {problem}; run sim_node with a live visit, or start "
                    "`python -m ovman_eval.graph.nav_in_world` with navigation.scene set (e.g. embedded-3)",
                )
            if not goal.target_may_move:
                # A target that may move is followed by sight; a Stop would publish one more frame.
                problem = self.sim.refresh_pose()
                if problem:
                    raise GoalError(NavError.SIM_FAILURE, f"sim_node cannot report the agent's pose: {problem}")
            world = self.sim
            goal_start_stamp[0] = self.sim.last_stamp_ns
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
