"""sim_node's world seen over DDS, as nav_node's builtin backend drives it (a NavigableWorld).

Actions through sim_node's ``sim/act`` (or, for a fixed target, the plan's predicted actions
through ``sim/act_sequence``), the reachable grid from sim_node's latched ``map``, the pose from
the last Act reply or, when newer, the base frame in ``map`` on the frame tree (nav_node's TF).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from nav_msgs.msg import OccupancyGrid
from ovman_ros.messages import floor_pose_msg, stamp_of, start_pose_from_msg
from ovman_ros.spinning import GraphNode
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Vec2
from ovman_core.config import NavigationParams
from ovman_core.grid import from_occupancy_fields
from ovman_core.world_state import AgentPose
from ovman_interfaces.srv import Act, ActSequence
from ovman_nav.nav_messages import occupancy_fields
from ovman_ros import names, qos

ACT_CLIENT_NODE = "_nav_node_act"
"""Hidden node (leading underscore) holding :class:`SimNodeWorld`'s Act client."""
POSE_POLL_S = 0.01
"""(s): how often :meth:`SimNodeWorld.wait_ready` looks for the robot's pose on the frame tree."""
RobotPose = Callable[[], tuple[AgentPose, int] | None]
"""The robot's pose now as the frame tree gives it, and its stamp (ns); None while it gives none."""


class SimNodeWorld:
    """The world sim_node simulates, seen over DDS (a NavigableWorld).

    Actions go through sim_node's Act service; the reachable positions are the free cells of
    sim_node's latched ``map`` (recomputed by sim_node whenever a visit loads); the pose is the
    last Act reply, or ``robot_pose`` (the base frame on the frame tree) when that is newer: before
    the first action, and after a visit loads.

    The Act clients live on a private hidden node that only :meth:`step` and :meth:`step_sequence`
    spin, with its own single-threaded executor, in the thread running the goal: a synchronous
    call completed by a MultiThreadedExecutor was measured to wait up to 3.6 s for some replies
    that sim_node had sent within milliseconds (71 of ~1,500 calls over 0.1 s in one benchmark
    run; none with the private executor).
    """

    def __init__(self, node: Node, group: Any, navigation: NavigationParams, robot_pose: RobotPose) -> None:
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
        self._pose_stamp_ns = -1
        """Stamp of ``_pose``: a pose on the frame tree replaces it only when newer."""
        self._robot_pose = robot_pose
        self._have_map = threading.Event()
        node.create_subscription(OccupancyGrid, names.MAP, self._on_map, qos.LATCHED, callback_group=group)

    def wait_ready(self) -> str:
        """Wait up to ``timeout_s`` for the act service, a map and a pose; the reason when missing."""
        if not self.client.wait_for_service(timeout_sec=self.timeout_s):
            return f"sim_node's {names.SIM_ACT} service is not available"
        if not self._have_map.wait(self.timeout_s):
            return f"no {names.MAP} from sim_node (is a live visit loaded?)"
        deadline = time.monotonic() + self.timeout_s
        while self._pose is None and self._robot_pose() is None and time.monotonic() < deadline:
            time.sleep(POSE_POLL_S)  # the frame tree is fed on the node's other executor thread
        if self._pose is None and self._robot_pose() is None:
            # No pose on the frame tree yet (sim_node's transforms not matched): ask through a Stop.
            problem = self.refresh_pose()
            if problem:
                return f"no pose of the robot's base on {names.TF} from sim_node, and a Stop failed: {problem}"
        return ""

    def agent_pose(self) -> AgentPose:
        with self._lock:
            seen = self._robot_pose()
            if seen is not None and seen[1] > self._pose_stamp_ns:
                self._pose, self._pose_stamp_ns = seen
            if self._pose is None:
                raise RuntimeError(f"no agent pose yet: none on {names.TF} and no action taken")
            return self._pose

    def reachable_positions(self) -> list[Vec2]:
        with self._lock:
            message = self._map
        if message is None:
            raise RuntimeError(f"no {names.MAP} from sim_node yet")
        return from_occupancy_fields(occupancy_fields(message)).free_positions()

    def refresh_pose(self) -> str:
        """Read the agent's pose now through a Stop (it moves nothing and advances no time): the
        transforms of a visit loaded just before the goal may not have been received yet.
        Returns the problem, or "" when the pose is current."""
        result = self.step(Action.STOP)
        return "" if result.success else result.message

    def step(self, action: Action) -> ActionResult:
        """One action through sim_node (called by one goal's thread at a time)."""
        reply = self._call(self.client, Act.Request(action=action.value), action.value)
        if reply is None:
            return ActionResult(False, message=f"sim_node did not answer {action.value} within {self.timeout_s} s")
        with self._lock:
            self._pose = start_pose_from_msg(reply.pose.pose, 0.0)
            self._pose_stamp_ns = self.last_stamp_ns = stamp_of(reply.pose.header)
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
            self._pose = pose
            self._pose_stamp_ns = self.last_stamp_ns = stamp_of(reply.poses[len(done) - 1].header)
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

    def destroy(self) -> None:
        self._act_executor.remove_node(self._act_node)
        self._act_executor.shutdown()
        self._act_node.destroy_node()
