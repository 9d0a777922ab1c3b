"""The interfaces work over a real DDS graph: a Query service and a Navigate action served by
another process (tests/ros/echo_server.py) are discovered and called from this one.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ovman_eval.graph.description import DDS_PROFILE_ENV

from .conftest import DDS_PROFILE
from .processes import NodeProcess

try:
    import rclpy
    from action_msgs.msg import GoalStatus
    from geometry_msgs.msg import Point, PointStamped
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Header

    from ovman_interfaces.action import Navigate
    from ovman_interfaces.srv import Query
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

pytestmark = pytest.mark.ros

ECHO_SERVER = Path(__file__).with_name("echo_server.py")
SERVICE_NAME = "/ovman_test/query"
ACTION_NAME = "/ovman_test/navigate"
# Discovery on loopback is usually ~40 ms but has tails of seconds (notes/ros2-from-pypi.md).
DISCOVERY_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 10.0


@pytest.fixture
def echo_server(ros_env: dict[str, str], tmp_path: Path) -> Iterator[NodeProcess]:
    """Start tests/ros/echo_server.py with the test's ROS environment; always stop it."""
    # The server exits when its stdin pipe closes, i.e. also when this process dies.
    server = NodeProcess(
        [sys.executable, str(ECHO_SERVER), SERVICE_NAME, ACTION_NAME], tmp_path / "echo_server.log", "echo server"
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client_node(rclpy_context) -> Iterator[Node]:
    node = rclpy.create_node("ovman_dds_test_client", context=rclpy_context)
    try:
        yield node
    finally:
        node.destroy_node()


def spin_until_done(node, future, what: str, server: NodeProcess):
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        executor.spin_until_future_complete(future, timeout_sec=CALL_TIMEOUT_S)
    finally:
        executor.remove_node(node)
        executor.shutdown()
    assert future.done(), f"{what} got no answer within {CALL_TIMEOUT_S} s; {server.diagnosis()}"
    return future.result()


def test_query_service_in_another_process_answers_over_dds(echo_server, client_node) -> None:
    client = client_node.create_client(Query, SERVICE_NAME)
    assert client.wait_for_service(timeout_sec=DISCOVERY_TIMEOUT_S), (
        f"{SERVICE_NAME} not discovered within {DISCOVERY_TIMEOUT_S} s; {echo_server.diagnosis()}"
    )

    request = Query.Request(text="where was the vase?", category="vase", relation="former", arm="single_visit")
    request.exclude_ids = [12, 4000000000]
    response = spin_until_done(client_node, client.call_async(request), "Query", echo_server)

    assert response.status == Query.Response.ANSWERED and response.answered
    assert response.goal.header.frame_id == "map"
    assert (response.goal.point.x, response.goal.point.y) == (len(request.text), 2.0)
    assert (response.relation, response.noun_phrase) == ("former", "vase")
    assert (response.instance_visit1, response.instance_visit2) == (-1, 12)
    assert response.explanation == "echo:where was the vase?|single_visit"

    # The server shuts down cleanly on SIGINT, as every OVMAN node's main() must.
    assert echo_server.stop() == 0, echo_server.diagnosis()


def test_navigate_action_in_another_process_succeeds_over_dds(echo_server, client_node) -> None:
    client = ActionClient(client_node, Navigate, ACTION_NAME)
    try:
        assert client.wait_for_server(timeout_sec=DISCOVERY_TIMEOUT_S), (
            f"{ACTION_NAME} not discovered within {DISCOVERY_TIMEOUT_S} s; {echo_server.diagnosis()}"
        )
        goal = Navigate.Goal(
            target=PointStamped(header=Header(frame_id="map"), point=Point(x=2.5, y=-1.0)),
            target_may_move=True,
            has_region=False,
            success_radius=0.75,
            max_steps=321,
        )
        feedback: list[Navigate.Feedback] = []
        goal_handle = spin_until_done(
            client_node,
            client.send_goal_async(goal, feedback_callback=lambda message: feedback.append(message.feedback)),
            "Navigate goal",
            echo_server,
        )
        assert goal_handle.accepted, echo_server.diagnosis()
        outcome = spin_until_done(client_node, goal_handle.get_result_async(), "Navigate result", echo_server)
    finally:
        client.destroy()

    assert outcome.status == GoalStatus.STATUS_SUCCEEDED
    result = outcome.result
    assert result.success and result.error_code == Navigate.Result.NONE
    assert result.error_msg == "echo:True|False"
    assert result.final_pose.header.frame_id == "map"
    assert (result.final_pose.pose.position.x, result.final_pose.pose.position.y) == (2.5, -1.0)
    assert (result.path_length, result.steps) == (0.75, 321)
    # Feedback is a topic: the server may publish it before it has discovered our subscription,
    # so it is not guaranteed to arrive; when it does, it must be intact.
    for message in feedback:
        assert (message.current_target.x, message.steps_taken) == (2.5, 1)


def test_private_domain_id_is_isolated_from_the_default(ros_env: dict[str, str]) -> None:
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    assert 100 <= domain_id < 232
    assert ros_env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert os.environ["ROS_LOG_DIR"] == ros_env["ROS_LOG_DIR"]


PROBE = "import rclpy; rclpy.init(); rclpy.create_node('profile_probe').destroy_node(); rclpy.shutdown(); print('ok')"


def probe_participant(profile: Path) -> subprocess.CompletedProcess[str]:
    """A process that creates one node with ``profile`` as its Fast DDS profile."""
    env = {**os.environ, DDS_PROFILE_ENV: str(profile)}
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=DISCOVERY_TIMEOUT_S
    )


def test_the_graphs_fast_dds_profile_loads_without_an_error(ros_env: dict[str, str], tmp_path: Path) -> None:
    assert ros_env[DDS_PROFILE_ENV] == str(DDS_PROFILE)
    loaded = probe_participant(DDS_PROFILE)
    assert loaded.stdout.strip() == "ok" and "Error" not in loaded.stderr, loaded.stderr
    # Fast DDS only logs a profile it cannot read and goes on with its defaults: the check above
    # must see such a log.
    broken = tmp_path / "broken.xml"
    broken.write_text(DDS_PROFILE.read_text().replace("segment_size>", "segment_bytes>"))
    assert "XMLPARSER" in probe_participant(broken).stderr
