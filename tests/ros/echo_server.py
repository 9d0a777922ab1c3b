"""Test helper process: serves ovman_interfaces Query and Navigate, echoing the request back.

Started by tests/ros/test_dds.py in its own process so that the test reaches it over DDS. The
replies are a fixed function of the request (see ``echo_query`` and ``echo_navigate``), so the
test can check that every field crossed the wire. Exits cleanly on SIGINT or SIGTERM, and also
when its stdin closes, so that it never outlives a test process that was killed.

Usage: python echo_server.py SERVICE_NAME ACTION_NAME
"""

from __future__ import annotations

import os
import sys
import threading

import rclpy
from rclpy.action import ActionServer
from rclpy.action.server import ServerGoalHandle
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from ovman_interfaces.action import Navigate
from ovman_interfaces.srv import Query


def echo_query(request: Query.Request, response: Query.Response) -> Query.Response:
    """Answer with the request's fields copied into the response (the test checks each)."""
    response.status = Query.Response.ANSWERED
    response.answered = True
    response.goal.header.frame_id = "map"
    response.goal.point.x = float(len(request.text))
    response.goal.point.y = float(len(request.exclude_ids))
    response.relation = request.relation
    response.noun_phrase = request.category
    response.instance_visit1 = -1
    response.instance_visit2 = int(request.exclude_ids[0]) if len(request.exclude_ids) else -1
    response.confidence = 0.5
    response.explanation = f"echo:{request.text}|{request.arm}"
    return response


def echo_navigate(goal_handle: ServerGoalHandle) -> Navigate.Result:
    """Publish one feedback, then succeed at the goal's target with the goal's numbers echoed."""
    goal: Navigate.Goal = goal_handle.request
    feedback = Navigate.Feedback(current_target=goal.target.point, steps_taken=1)
    goal_handle.publish_feedback(feedback)
    goal_handle.succeed()
    result = Navigate.Result(
        error_code=Navigate.Result.NONE,
        error_msg=f"echo:{goal.target_may_move}|{goal.has_region}",
        success=True,
        path_length=goal.success_radius,
        steps=goal.max_steps,
    )
    result.final_pose.header = goal.target.header
    result.final_pose.pose.position = goal.target.point
    result.final_pose.pose.orientation.w = 1.0
    return result


class EchoServer(Node):
    """The Query service and the Navigate action server, nothing else."""

    def __init__(self, service_name: str, action_name: str) -> None:
        super().__init__("ovman_echo_server")
        self.query_service = self.create_service(Query, service_name, echo_query)
        self.navigate_server = ActionServer(self, Navigate, action_name, echo_navigate)


def shutdown_when_stdin_closes() -> None:
    """Block until the parent closes our stdin (or dies), then stop spinning."""
    # os.read on the raw descriptor: sys.stdin.buffer.read() would hold the buffer's lock and
    # deadlock the interpreter's shutdown, which closes sys.stdin.
    while os.read(0, 4096):
        pass
    rclpy.try_shutdown()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} SERVICE_NAME ACTION_NAME", file=sys.stderr)
        return 2
    # The default context: rclpy.init() then installs its SIGINT/SIGTERM handlers, which wake
    # the executor's wait (a Context() of our own would get none, and SIGINT would be ignored
    # until the next callback).
    rclpy.init()
    threading.Thread(target=shutdown_when_stdin_closes, daemon=True).start()
    node = EchoServer(argv[1], argv[2])
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass  # asked to stop: fall through to the clean shutdown
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
