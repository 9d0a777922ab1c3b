"""Every node's main (ovman_ros.spinning.run_node), started as ``ovman launch`` starts it (through
ovman_ros.node_main): Ctrl-C ends it with exit code 0 and no traceback, also when it comes twice as
under ``ros2 launch`` (the terminal's SIGINT to the process group, then launch's) and while the
node still loads; a bad parameter stops it at start-up with one line and exit code 1."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from .processes import NodeProcess

NODES = ["ovman_query.query_node", "ovman_mapping.mapping_node", "ovman_sim.sim_node", "ovman_nav.nav_node"]
UP_TIMEOUT_S = 60.0


def _wait_for_node(name: str, context, timeout: float) -> None:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    probe = Node("test_node_mains_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name in probe.get_node_names():
                return
            executor.spin_once(timeout_sec=0.2)
        raise AssertionError(f"{name} did not appear within {timeout} s")
    finally:
        executor.shutdown()
        probe.destroy_node()


@pytest.mark.parametrize("module", NODES)
def test_ctrl_c_ends_a_node_with_exit_code_0_and_no_traceback(module, rclpy_context, tmp_path):
    # A name of this process's own: another test's node of the default name may still be in the
    # graph (discovery forgets a node late), and a SIGINT sent before Python has started kills the
    # new process with -2.
    name = f"{module.rsplit('.', 1)[1]}_ctrl_c_{os.getpid()}"
    command = [sys.executable, "-m", "ovman_ros.node_main", module, "--ros-args", "-r", f"__node:={name}"]
    node = NodeProcess(command, tmp_path / f"{name}.log", name)
    try:
        _wait_for_node(name, rclpy_context, UP_TIMEOUT_S)
    except AssertionError:
        node.stop()
        raise AssertionError(node.diagnosis()) from None
    # A terminal's Ctrl-C under ros2 launch: SIGINT to the process group, then launch's own.
    node.process.send_signal(signal.SIGINT)
    code = node.stop()
    log = node.log_path.read_text(errors="replace")
    assert code == 0, node.diagnosis()
    assert "Traceback" not in log, log
    assert ": process CPU" in log  # by the node's name, or its default one while it still loads


SLOW_NODE = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text("loading")
time.sleep(60)  # a node's imports (rclpy, numpy, torch...) take seconds


def main():
    raise AssertionError("a Ctrl-C while loading ends the process before main")
"""


def test_ctrl_c_while_a_node_still_loads_ends_it_with_exit_code_0_and_no_traceback(tmp_path, monkeypatch):
    (tmp_path / "slow_node.py").write_text(SLOW_NODE)
    marker = tmp_path / "loading"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    args = [sys.executable, "-m", "ovman_ros.node_main", "slow_node", str(marker)]
    node = NodeProcess(args, tmp_path / "slow.log", "slow_node")
    deadline = time.monotonic() + UP_TIMEOUT_S
    while not marker.exists():
        assert node.process.poll() is None and time.monotonic() < deadline, node.diagnosis()
        time.sleep(0.05)
    node.process.send_signal(signal.SIGINT)
    node.process.send_signal(signal.SIGINT)  # launch's, after the terminal's
    code = node.stop()
    log = node.log_path.read_text(errors="replace")
    assert code == 0, node.diagnosis()
    assert "Traceback" not in log, log


def test_a_console_script_of_no_known_node_says_which_nodes_there_are(monkeypatch, capsys):
    from ovman_ros import node_main

    monkeypatch.setattr(sys, "argv", ["/opt/ws/lib/ovman_sim/simnode"])
    assert node_main.console_script() == 2
    assert "simnode: not an OVMAN node; the nodes are sim_node, mapping_node" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("module", "why"),
    [("ovman_sim.no_such_node", "no such module"), ("ovman_sim.world", "not a node module (it has no main())")],
)
def test_a_module_that_is_not_a_node_is_named_in_one_line(module, why, tmp_path):
    node = NodeProcess([sys.executable, "-m", "ovman_ros.node_main", module], tmp_path / "bad.log", "bad")
    code = node.process.wait(timeout=UP_TIMEOUT_S)
    log = node.log_path.read_text(errors="replace")
    assert code == 2 and f"{module}: {why}" in log and "Traceback" not in log, log


@pytest.mark.parametrize("module", NODES)
def test_a_bad_parameter_stops_a_node_at_start_up_with_one_line(module, ros_env, tmp_path):
    name = module.rsplit(".", 1)[1]
    args = [sys.executable, "-m", module, "--ros-args", "-p", "ros.qos_event_warnings:=3"]
    node = NodeProcess(args, tmp_path / f"{name}.log", name)
    try:
        code = node.process.wait(timeout=UP_TIMEOUT_S)
    finally:
        node.stop()
    log = node.log_path.read_text(errors="replace")
    assert code == 1, node.diagnosis()
    assert f"{name}: cannot start: " in log and "ros.qos_event_warnings" in log, log
    assert "Traceback" not in log, log


def test_nav_node_never_drives_a_simulator_itself_and_says_what_does(ros_env, tmp_path):
    args = [sys.executable, "-m", "ovman_nav.nav_node", "--ros-args", "-p", "navigation.scene:=embedded-3"]
    node = NodeProcess(args, tmp_path / "nav_node.log", "nav_node")
    try:
        code = node.process.wait(timeout=UP_TIMEOUT_S)
    finally:
        node.stop()
    log = node.log_path.read_text(errors="replace")
    assert code == 1 and "python -m ovman_eval.graph.nav_in_world" in log, node.diagnosis()
