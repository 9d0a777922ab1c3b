"""With ``use_sim_time`` a node stamps its outputs in the time base of the graph's ``clock`` topic.

query_node (in this process, as the benchmark graph starts it: use_sim_time true and ``/clock``
remapped to the relative ``clock``) gets a simulated time from a probe's clock publisher under a
namespace, and answers a query stamped with that time (its answer markers), not the system clock's.
"""

from __future__ import annotations

import pytest

try:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.task import Future
    from rosgraph_msgs.msg import Clock
    from visualization_msgs.msg import MarkerArray

    from ovman_interfaces.srv import Query
    from ovman_query.query_node import QueryNode
    from ovman_ros import names, qos
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from builtin_interfaces.msg import Time

from ovman_core.config import load_config

pytestmark = pytest.mark.ros

TIMEOUT_S = 30.0
SIM_SECONDS = 1234
NAMESPACE = "/sim_time_test"


def test_query_node_on_sim_time_stamps_its_answer_with_the_namespaced_clock(rclpy_context) -> None:
    node = QueryNode(
        load_config(),
        context=rclpy_context,
        namespace=NAMESPACE,
        cli_args=["--ros-args", "-r", f"/clock:={names.CLOCK}"],
        parameter_overrides=[Parameter("use_sim_time", value=True)],
    )
    probe = rclpy.create_node("clock_probe", namespace=NAMESPACE, context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    executor.add_node(probe)
    try:
        clock = probe.create_publisher(Clock, names.CLOCK, qos.frames(1))
        assert probe.get_publishers_info_by_topic(f"{NAMESPACE}/clock")
        sim_ns = SIM_SECONDS * 1_000_000_000
        future = None
        client = probe.create_client(Query, names.QUERY)  # /sim_time_test/ovman/query
        assert client.wait_for_service(timeout_sec=TIMEOUT_S)
        for _ in range(int(TIMEOUT_S / 0.1)):
            clock.publish(Clock(clock=Time(sec=SIM_SECONDS)))
            executor.spin_once(timeout_sec=0.1)
            if node.get_clock().now().nanoseconds == sim_ns:
                break
        assert node.get_clock().now().nanoseconds == sim_ns, "query_node never took the namespaced clock"
        shown: Future = Future()
        probe.create_subscription(MarkerArray, names.ANSWER_MARKERS, shown.set_result, qos.LATCHED)
        future = client.call_async(Query.Request(category="vase", relation="former", arm="two_visit"))
        executor.spin_until_future_complete(future, timeout_sec=TIMEOUT_S)
        response = future.result()
        assert response is not None and response.status == Query.Response.NO_MAP
        # The answer's markers (a DELETEALL when not answered) carry the answer's stamp.
        executor.spin_until_future_complete(shown, timeout_sec=TIMEOUT_S)
        (marker,) = shown.result().markers
        assert (marker.header.stamp.sec, marker.header.stamp.nanosec) == (SIM_SECONDS, 0)
    finally:
        executor.shutdown()
        probe.destroy_node()
        node.destroy_node()
