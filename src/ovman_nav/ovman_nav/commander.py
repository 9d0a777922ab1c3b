"""OvmanCommander: drive the OVMAN stack from a script, in the manner of nav2_simple_commander.

``query`` calls ``ovman/query``; ``goToAnswer`` sends the answer's goal to nav_node's
``ovman/navigate`` and returns once it is accepted or rejected; then ``isTaskComplete``,
``getFeedback``, ``getResult`` (SUCCEEDED / CANCELED / FAILED, like BasicNavigator),
``getTaskError``, ``getNavResult``, ``getPath``, ``cancelTask`` and ``updateTarget`` (a moving
target's newer estimate). Positions are in ``map`` (REP 103), metres. rclpy must be initialised
before a commander is created; it spins its own executor, or the ``executor`` it is given.
"""

from __future__ import annotations

import enum
import time
import uuid
from typing import Any

from action_msgs.msg import GoalStatus, GoalStatusArray
from geometry_msgs.msg import Point, PointStamped
from nav_msgs.msg import Path
from ovman_ros.spinning import GraphNode
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.qos import qos_profile_action_status_default
from rclpy.task import Future
from unique_identifier_msgs.msg import UUID

from ovman_interfaces.action import Navigate
from ovman_interfaces.msg import TargetUpdate
from ovman_interfaces.srv import Query
from ovman_ros import names, qos

MOVING_RELATION = "moving"
STATUS_TOPIC = f"{names.NAVIGATE}/_action/status"
"""The action's goal status topic (rcl_action's naming), read to recover a lost goal response."""


class TaskResult(enum.Enum):
    """How the last navigation ended (the values of nav2_simple_commander's TaskResult)."""

    UNKNOWN = 0
    SUCCEEDED = 1
    CANCELED = 2
    FAILED = 3


_STATUS_RESULT = {
    GoalStatus.STATUS_SUCCEEDED: TaskResult.SUCCEEDED,
    GoalStatus.STATUS_CANCELED: TaskResult.CANCELED,
    GoalStatus.STATUS_ABORTED: TaskResult.FAILED,
}


class OvmanCommander(GraphNode):
    """Query and navigate client; see the module docstring. Not thread-safe: one caller.

        commander = OvmanCommander()
        answer = commander.query("where was the vase before?")
        if answer is not None and commander.goToAnswer(answer):
            while not commander.isTaskComplete():
                feedback = commander.getFeedback()
            print(commander.getResult(), commander.getNavResult())

    A program with nodes of its own passes its executor, so that one wait serves all of them. Set
    ``OvmanCommander.qos_event_warnings = False`` before creating one for no QoS event handlers.
    """

    def __init__(
        self,
        node_name: str = "ovman_commander",
        namespace: str = "",
        executor: Executor | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        self.query_client = self.create_client(Query, names.QUERY)
        self.nav_client = ActionClient(self, Navigate, names.NAVIGATE)
        self.update_pub = self.create_publisher(TargetUpdate, names.TARGET_UPDATE, 10)
        self.create_subscription(Path, names.PLAN, self._on_plan, qos.LATCHED)
        self.create_subscription(GoalStatusArray, STATUS_TOPIC, self._on_status, qos_profile_action_status_default)
        self._own_executor = executor is None
        self._executor = SingleThreadedExecutor(context=self.context) if executor is None else executor
        self._executor.add_node(self)
        self._goal_handle: Any = None
        self._result_future: Future | None = None
        self._status: int | None = None
        self._result: Navigate.Result | None = None
        self._feedback: Navigate.Feedback | None = None
        self._path: Path | None = None
        self._goal_sent_ns = 0
        self._pending_goal: bytes | None = None
        self._pending_accepted: Any = None

    # --- query -------------------------------------------------------------------------------

    def query(self, text: str, arm: str = "", timeout_sec: float = 10.0) -> Query.Response | None:
        """Ask the query node; the response (check ``answered``), or None when it is unavailable
        or does not answer within ``timeout_sec``."""
        if not self.query_client.wait_for_service(timeout_sec=timeout_sec):
            self.get_logger().error(f"{names.QUERY} is not available; is query_node running?")
            return None
        future = self.query_client.call_async(Query.Request(text=text, arm=arm))
        self._executor.spin_until_future_complete(future, timeout_sec=timeout_sec)
        if not future.done():
            self.get_logger().error(f"{names.QUERY} did not answer within {timeout_sec} s")
            return None
        return future.result()

    # --- navigation --------------------------------------------------------------------------

    def goToAnswer(  # noqa: N802 - nav2_simple_commander naming
        self,
        answer: Query.Response,
        target_may_move: bool | None = None,
        success_radius: float = 0.0,
        max_steps: int = 0,
        timeout_sec: float = 10.0,
    ) -> bool:
        """Navigate to a Query answer; True when nav_node accepted the goal. A ``moving`` answer
        is followed (target updates accepted) unless ``target_may_move`` says otherwise."""
        if not answer.answered:
            self.get_logger().error(f"the query was not answered (status {answer.status}): {answer.explanation}")
            return False
        may_move = answer.relation == MOVING_RELATION if target_may_move is None else target_may_move
        return self.goToPoint(answer.goal, may_move, None, success_radius, max_steps, timeout_sec)

    def goToPoint(  # noqa: N802 - nav2_simple_commander naming
        self,
        target: PointStamped,
        target_may_move: bool = False,
        region: tuple[Point, Point] | None = None,
        success_radius: float = 0.0,
        max_steps: int = 0,
        timeout_sec: float = 10.0,
        update_every_step: bool = False,
    ) -> bool:
        """Navigate to ``target`` (``map``); ``region`` = (min, max) corners of the answer box.
        ``success_radius`` 0 and ``max_steps`` 0 mean nav_node's configured values;
        ``update_every_step``: this client sends a target update per frame (Navigate.action)."""
        if not self.nav_client.wait_for_server(timeout_sec=timeout_sec):
            self.get_logger().error(f"{names.NAVIGATE} is not available; is nav_node running?")
            return False
        goal = Navigate.Goal(
            target=target,
            target_may_move=target_may_move,
            update_every_step=update_every_step and target_may_move,
            success_radius=success_radius,
            max_steps=max_steps,
        )
        if region is not None:
            goal.has_region, goal.region_min, goal.region_max = True, region[0], region[1]
        self._goal_handle = self._result_future = self._result = self._status = None
        self._feedback = self._path = None
        self._goal_sent_ns = self.get_clock().now().nanoseconds
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        self._pending_goal, self._pending_accepted = bytes(goal_id.uuid), None
        future = self.nav_client.send_goal_async(goal, feedback_callback=self._on_feedback, goal_uuid=goal_id)
        deadline = time.monotonic() + timeout_sec
        while not future.done() and self._pending_accepted is None and (left := deadline - time.monotonic()) > 0:
            self._executor.spin_once(timeout_sec=min(0.1, left))
        self._pending_goal = None
        if future.done():
            handle = future.result()
            if not handle.accepted:
                self.get_logger().error("nav_node rejected the goal")
                return False
        elif self._pending_accepted is not None:
            # The server accepted the goal but its response never arrived: a known DDS service
            # race (the response writer had not yet matched this client's reader; rclpy#1123,
            # rmw_fastrtps#418). The status topic saw the goal, so go on with a handle of our own.
            future.cancel()
            response = Navigate.Impl.SendGoalService.Response(accepted=True, stamp=self._pending_accepted)
            handle = ClientGoalHandle(self.nav_client, goal_id, response)
            self.get_logger().warning("nav_node's goal response was lost; the goal status shows it accepted")
        else:
            future.cancel()
            self.get_logger().error(f"nav_node did not answer the goal within {timeout_sec} s")
            return False
        self._goal_handle = handle
        self._result_future = handle.get_result_async()
        return True

    def updateTarget(  # noqa: N802 - nav2_simple_commander naming
        self, target: PointStamped, region: tuple[Point, Point] | None = None
    ) -> None:
        """Send a newer estimate of a moving target (``map``, with its header's stamp) to the running
        goal; ``region``: the target's footprint box now (min and max corners, ``map``), else the
        goal's region follows the point.

        Fire and forget, like any topic: an update published before nav_node's subscription has
        matched ``update_pub`` (``update_pub.get_subscription_count()``) is lost, and nav_node
        ignores updates for goals sent without ``target_may_move``."""
        update = TargetUpdate(header=target.header, point=target.point, has_region=region is not None)
        if region is not None:
            update.region_min, update.region_max = region
        self.update_pub.publish(update)

    def isTaskComplete(self, spin_sec: float = 0.1) -> bool:  # noqa: N802 - nav2_simple_commander naming
        """Spin up to ``spin_sec``; True when the current navigation has ended (or none runs)."""
        if self._result_future is None:
            return True
        self._executor.spin_until_future_complete(self._result_future, timeout_sec=spin_sec)
        if not self._result_future.done():
            return False
        outcome = self._result_future.result()
        self._status, self._result = outcome.status, outcome.result
        return True

    def getFeedback(self) -> Navigate.Feedback | None:  # noqa: N802 - nav2_simple_commander naming
        """The latest feedback of the current goal (None before the first arrives)."""
        return self._feedback

    def getResult(self) -> TaskResult:  # noqa: N802 - nav2_simple_commander naming
        """How the last navigation ended; UNKNOWN while it runs."""
        return _STATUS_RESULT.get(self._status, TaskResult.UNKNOWN) if self._status is not None else TaskResult.UNKNOWN

    def getTaskError(self) -> tuple[int, str]:  # noqa: N802 - nav2_simple_commander naming
        """(Navigate error code, message) of the last navigation; (UNKNOWN, ...) while none ended."""
        if self._result is None:
            return Navigate.Result.UNKNOWN, "no navigation has ended"
        return self._result.error_code, self._result.error_msg

    def getNavResult(self) -> Navigate.Result | None:  # noqa: N802 - nav2_simple_commander naming
        """The full Navigate result (final pose, path length, steps, collisions, replans)."""
        return self._result

    def cancelTask(self, timeout_sec: float = 10.0) -> None:  # noqa: N802 - nav2_simple_commander naming
        """Cancel the running navigation and wait for the server to acknowledge."""
        if self._goal_handle is None or (self._result_future is not None and self._result_future.done()):
            return
        future = self._goal_handle.cancel_goal_async()
        self._executor.spin_until_future_complete(future, timeout_sec=timeout_sec)

    def getPath(self, timeout_sec: float = 0.0) -> Path | None:  # noqa: N802 - nav2_simple_commander naming
        """The latest plan nav_node published for the current goal, waiting up to ``timeout_sec``."""
        deadline = time.monotonic() + timeout_sec
        self._executor.spin_once(timeout_sec=0.0)
        while self._path is None and (remaining := deadline - time.monotonic()) > 0.0:
            self._executor.spin_once(timeout_sec=min(0.1, remaining))
        return self._path

    def destroy_node(self) -> None:
        self.nav_client.destroy()
        self._executor.remove_node(self)
        if self._own_executor:
            self._executor.shutdown()
        super().destroy_node()

    # --- callbacks ---------------------------------------------------------------------------

    def _on_feedback(self, message: Any) -> None:
        self._feedback = message.feedback

    def _on_status(self, message: GoalStatusArray) -> None:
        if self._pending_goal is None:
            return
        for status in message.status_list:
            known = status.status != GoalStatus.STATUS_UNKNOWN
            if known and bytes(status.goal_info.goal_id.uuid) == self._pending_goal:
                self._pending_accepted = status.goal_info.stamp

    def _on_plan(self, path: Path) -> None:
        # The plan topic is latched: ignore a plan stamped before the current goal was sent.
        stamp = path.header.stamp.sec * 1_000_000_000 + path.header.stamp.nanosec
        if stamp >= self._goal_sent_ns:
            self._path = path
