"""sim_node's world seen over DDS, as nav_node's builtin backend drives it (a NavigableWorld).

Actions through sim_node's ``sim/act`` (or, for a fixed target, the plan's predicted actions
through ``sim/act_sequence``), the reachable grid from sim_node's latched ``map``, the pose from
the last Act reply or ``odom``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import Pose
from nav_msgs.msg import OccupancyGrid, Odometry
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


class SimNodeWorld:
    """The world sim_node simulates, seen over DDS (a NavigableWorld).

    Actions go through sim_node's Act service; the reachable positions are the free cells of
    sim_node's latched ``map`` (recomputed by sim_node whenever a visit loads); the pose is the
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
        latched ``odom`` of a visit loaded just before the goal may not have been handled yet.
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
