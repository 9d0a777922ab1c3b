"""Nodes end quietly on Ctrl-C (also given twice, as under ros2 launch, and during their clean-up and
exit) or an external shutdown, including rclpy's wait-set race; their endpoints warn of
incompatible QoS unless turned off (ovman_ros.spinning.GraphNode); a parameter override of the
wrong type is a ConfigError naming it; the CPU time a node reports as it exits reads back from its
log."""

from __future__ import annotations

import resource
import signal
import threading

import pytest
from ovman_ros.spinning import (
    GraphNode,
    cpu_time_reports,
    declare_config_parameters,
    ignore_interrupts,
    report_cpu_time,
    spin_until_shutdown,
)
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter

from ovman_core.config import ConfigError, load_config


class RacingExecutor:
    """Spins by raising what rclpy raises when the context dies while a wait set is being built."""

    def __init__(self, context, shut_down_first: bool) -> None:
        self.context = context
        self.shut_down_first = shut_down_first

    def spin(self) -> None:
        if self.shut_down_first:
            self.context.shutdown()
        raise RCLError("failed to initialize wait set: the given context is not valid")


def test_an_external_shutdown_ends_the_spin(rclpy_context):
    executor = MultiThreadedExecutor(num_threads=2, context=rclpy_context)
    timer = threading.Timer(0.2, rclpy_context.shutdown)
    timer.start()
    try:
        spin_until_shutdown(executor)
    finally:
        timer.cancel()
    assert not rclpy_context.ok()


def test_the_wait_set_race_after_a_shutdown_is_a_normal_end_but_not_while_the_context_lives(rclpy_context):
    with pytest.raises(RCLError):
        spin_until_shutdown(RacingExecutor(rclpy_context, shut_down_first=False))
    spin_until_shutdown(RacingExecutor(rclpy_context, shut_down_first=True))
    assert not rclpy_context.ok()


def test_graph_node_endpoints_warn_of_incompatible_qos_with_one_handler_unless_turned_off(rclpy_context):
    from rclpy.event_handler import SubscriptionEventCallbacks
    from std_msgs.msg import String

    quiet = GraphNode("quiet_node", context=rclpy_context)
    quiet.qos_event_warnings = False
    loud = GraphNode("loud_node", context=rclpy_context)
    try:
        assert quiet.create_subscription(String, "/t", lambda _: None, 1).event_handlers == []
        assert quiet.create_publisher(String, "/t", 1).event_handlers == []
        # Explicit callbacks are kept; by default one handler, the incompatible-QoS warning.
        kept = SubscriptionEventCallbacks(incompatible_qos=lambda _: None, use_default_callbacks=False)
        assert len(quiet.create_subscription(String, "/t", lambda _: None, 1, event_callbacks=kept).event_handlers) == 1
        assert len(loud.create_subscription(String, "/t", lambda _: None, 1).event_handlers) == 1
        assert len(loud.create_publisher(String, "/t", 1).event_handlers) == 1
    finally:
        quiet.destroy_node()
        loud.destroy_node()


def test_a_node_that_reads_its_parameters_at_start_up_refuses_a_set_saying_why(rclpy_context):
    node = GraphNode("steady_node", context=rclpy_context)
    try:
        node.declare_parameter("task.success_radius", 1.0)
        node.refuse_parameter_changes("start a new run")
        (result,) = node.set_parameters([Parameter("task.success_radius", value=2.0)])
        assert not result.successful
        assert (
            result.reason
            == "steady_node reads its parameters at start-up; start a new run to change task.success_radius"
        )
        assert node.get_parameter("task.success_radius").value == 1.0
    finally:
        node.destroy_node()


def test_a_subscription_that_can_never_hear_its_publisher_says_why(rclpy_context, capfd):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    listener = GraphNode("latched_listener", context=rclpy_context)
    talker = GraphNode("volatile_talker", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(listener)
    executor.add_node(talker)
    try:
        listener.create_subscription(
            String, "/incompatible", lambda _: None, QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        )
        talker.create_publisher(String, "/incompatible", QoSProfile(depth=1, durability=DurabilityPolicy.VOLATILE))
        seen = ""
        for _ in range(200):
            executor.spin_once(timeout_sec=0.05)
            seen += capfd.readouterr().err
            if "incompatible QoS" in seen and seen.count("/incompatible:") >= 2:
                break
        assert "/incompatible: a publisher with incompatible QoS" in seen and "DURABILITY" in seen
        assert "/incompatible: a subscription with incompatible QoS" in seen
    finally:
        executor.shutdown()
        listener.destroy_node()
        talker.destroy_node()


def test_every_node_is_a_graph_node_that_follows_ros_qos_event_warnings(rclpy_context):
    import dataclasses

    from ovman_eval.graph.benchmark_node import BenchmarkNode
    from ovman_mapping.mapping_node import MappingNode
    from ovman_nav.commander import OvmanCommander
    from ovman_nav.nav_node import NavNode
    from ovman_query.query_node import QueryNode
    from ovman_sim.sim_node import SimNode

    for kind in (SimNode, MappingNode, QueryNode, NavNode, BenchmarkNode, OvmanCommander):
        assert issubclass(kind, GraphNode), kind.__name__
    config = load_config()
    assert config.shared.ros.qos_event_warnings is True
    quiet = dataclasses.replace(
        config,
        shared=dataclasses.replace(config.shared, ros=dataclasses.replace(config.shared.ros, qos_event_warnings=False)),
    )
    for chosen in (config, quiet):
        node = SimNode(chosen, context=rclpy_context)
        try:
            assert node.qos_event_warnings is chosen.shared.ros.qos_event_warnings
        finally:
            node.destroy_node()


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("grounding.delta_g:=abc", "expected a double, got the string 'abc'"),
        ("grounding.delta_g:=1", "expected a double, got the integer 1"),
        ("benchmark.seeds:=[0.5]", "expected a list of integers, got the list of doubles [0.5]"),
        ("benchmark.seeds:=[]", "expected a list of integers, got no value (an empty list has no ROS type)"),
        ("ros.qos_event_warnings:=3", "expected a bool, got the integer 3"),
    ],
)
def test_a_command_line_override_of_the_wrong_type_is_a_config_error(ros_env, override, expected):
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    context = Context()
    rclpy.init(context=context, args=["test", "--ros-args", "-p", override])
    node = Node("query_node", context=context)
    defaults = {"grounding.delta_g": 0.05, "benchmark.seeds": [0], "ros.qos_event_warnings": False}
    try:
        with pytest.raises(ConfigError) as err:
            declare_config_parameters(node, defaults)
        assert str(err.value) == f"parameter '{override.split(':=')[0]}' of query_node: {expected}"
    finally:
        node.destroy_node()
        context.try_shutdown()


def test_query_node_refuses_a_wrong_type_or_out_of_range_override_with_a_config_error(rclpy_context):

    from ovman_query.query_node import QueryNode

    config = load_config()
    with pytest.raises(ConfigError) as err:
        QueryNode(config, context=rclpy_context, parameter_overrides=[Parameter("grounding.delta_g", value="abc")])
    assert str(err.value) == "parameter 'grounding.delta_g' of query_node: expected a double, got the string 'abc'"
    with pytest.raises(ConfigError) as err:
        QueryNode(config, context=rclpy_context, parameter_overrides=[Parameter("grounding.delta_g", value=-1.0)])
    assert str(err.value) == (
        f"query_node parameters: {config.source} + parameters of query_node: "
        "'query_node.ros__parameters.grounding.delta_g' = -1.0: expected >= 0"
    )


def test_ignoring_interrupts_survives_the_first_ctrl_c_handled_late(monkeypatch):
    """The first Ctrl-C's Python handler can run inside the clean-up's signal.signal call (CPython
    checks pending signals there): that KeyboardInterrupt must not escape the clean-up."""
    installed = []

    def late_handler(signum, handler):
        if not installed:
            installed.append(None)  # the pending handler runs before the new one is installed
            raise KeyboardInterrupt
        installed.append(handler)

    monkeypatch.setattr(signal, "signal", late_handler)
    ignore_interrupts()
    assert installed == [None, signal.SIG_IGN]


def test_a_cpu_time_report_reads_back_as_this_process_cpu_seconds(capsys):
    sum(k * k for k in range(200_000))  # some CPU time to report
    before = resource.getrusage(resource.RUSAGE_SELF)
    report_cpu_time("mapping_node")
    after = resource.getrusage(resource.RUSAGE_SELF)
    log = "[INFO] [mapping_node]: visit 1 is open\n" + capsys.readouterr().err + "[INFO] shutting down\n"
    (seconds,) = cpu_time_reports(log).values()
    assert list(cpu_time_reports(log)) == ["mapping_node"]
    low, high = (u.ru_utime + u.ru_stime for u in (before, after))
    assert low - 0.01 <= seconds <= high + 0.01 and seconds > 0.0


def test_cpu_time_reports_keep_each_nodes_last_line_and_ignore_other_text():
    log = (
        "player: process CPU 1.50 s user + 0.25 s system\n"
        "sim_node: process CPU 3.00 s user + 1.00 s system\n"
        "[WARN] player: process CPU unknown\n"
        "player: process CPU 2.00 s user + 0.50 s system\n"
    )
    assert cpu_time_reports(log) == {"player": 2.5, "sim_node": 4.0}
    assert cpu_time_reports("no reports here") == {}


RUN_NODE_SCRIPT = """
import sys, time
from rclpy.node import Node
from ovman_ros.spinning import run_node

mode = sys.argv[1]


class SlowToDestroy(Node):
    def destroy_node(self):
        print("cleaning up", flush=True)
        time.sleep(1.0)  # a second SIGINT arrives meanwhile
        print("cleaned up", flush=True)
        super().destroy_node()


def make():
    node = SlowToDestroy("run_node_probe")
    timer = node.create_timer(0.05, lambda: (print("spinning", flush=True), timer.cancel()))
    return node


def run(node):
    print("spinning", flush=True)
    while True:
        time.sleep(0.01)


code = run_node("run_node_probe", make, ["probe"], run=run if mode == "run" else None)
print(f"returned {code}", flush=True)
time.sleep(1.0)  # as a large process's finalisation: a late SIGINT arrives meanwhile
sys.exit(code)
"""


@pytest.mark.parametrize("mode", ["spin", "run"])
def test_ctrl_c_twice_under_launch_ends_a_node_with_0_and_no_traceback(ros_env, tmp_path, mode):
    """A terminal's Ctrl-C under ros2 launch: SIGINT to the group, then launch's own, then (a slow
    clean-up or finalisation) more: the first ends the node, every later one is ignored."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(RUN_NODE_SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []

    def wait_for(line: str) -> None:
        for text in process.stdout:
            seen.append(text)
            if text.startswith(line):
                return
        raise AssertionError(f"no {line!r} in {''.join(seen)}")

    try:
        wait_for("spinning")
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGINT)  # launch forwards the terminal's Ctrl-C at once
        wait_for("cleaning up")
        process.send_signal(signal.SIGINT)  # during the node's clean-up
        wait_for("returned")
        process.send_signal(signal.SIGINT)  # while the process exits
        seen += process.stdout.readlines()
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = "".join(seen)
    assert code == 0, log
    assert "returned 0" in log and "cleaned up" in log and "run_node_probe: process CPU" in log, log
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log


def test_every_config_parameter_is_described_with_its_explanation_and_range(rclpy_context):
    from ovman_core.config import describe
    from ovman_query.query_node import QueryNode

    config = load_config()
    node = QueryNode(config, context=rclpy_context)
    try:
        docs = {key.name: key for section in describe(config) for key in section.keys}
        names = [name for name in node.list_parameters([], 0).names if "." in name]
        assert "task.success_radius" in names and "grounding.delta_g" in names and "encoder.kind" in names
        for name in names:
            (descriptor,) = node.describe_parameters([name])
            assert descriptor.description == docs[name].explanation != "", name
            assert descriptor.additional_constraints == "; ".join(docs[name].constraints), name
        (radius,) = node.describe_parameters(["task.success_radius"])
        assert radius.additional_constraints == "> 0"
    finally:
        node.destroy_node()
