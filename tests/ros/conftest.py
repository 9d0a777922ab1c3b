"""Fixtures for tests that need rclpy: an isolated ROS environment, an rclpy context, a sim_node process.

Run with the venv's interpreter (``.venv/bin/python -m pytest tests/ros``) after
``scripts/build_interfaces.sh``: the ros-wheels bootstrapper then sets LD_LIBRARY_PATH itself.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ovman_eval.graph.description import DDS_PROFILE_ENV, DDS_PROFILE_FILE

from .processes import NodeProcess

DDS_PROFILE = Path(__file__).resolve().parents[2] / DDS_PROFILE_FILE
"""The repository's config/fastdds.xml."""

# The Ctrl-C tests send SIGINT to nodes in child processes. A shell without job control starts a
# background job with SIGINT ignored, and an ignored signal stays ignored across fork and exec, so
# the nodes would never see it: give this process Python's own handler, whose children then start
# with SIGINT's default action however the suite was started.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Fast DDS accepts domain ids 0..232; keep clear of 0 (the default every other ROS user shares).
_DOMAIN_ID_BASE = 100
_DOMAIN_ID_LIMIT = 232


def private_domain_id(pid: int) -> int:
    """ROS domain id for this test process: pid mod 100 + 100, always below 232."""
    return min(pid % 100 + _DOMAIN_ID_BASE, _DOMAIN_ID_LIMIT - 1)


def ros_environment(log_dir: Path) -> dict[str, str]:
    """The variables that isolate a test's ROS graph: loopback-only discovery, a private domain,
    logs in ``log_dir``, the graph's Fast DDS profile, and a map store of its own beside the logs
    (``XDG_DATA_HOME``). Unset ``ROS_STATIC_PEERS`` too."""
    return {
        "XDG_DATA_HOME": str(log_dir.parent / "data"),
        # Without this, DDS discovery multicasts on the real network interfaces (Kilted ignores
        # ROS_LOCALHOST_ONLY).
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_DOMAIN_ID": str(private_domain_id(os.getpid())),
        "ROS_LOG_DIR": str(log_dir),
        # Large camera bundles over shared memory, as both graph starters give it to the nodes.
        DDS_PROFILE_ENV: str(DDS_PROFILE),
    }


@pytest.fixture
def ros_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Isolate ROS for this test (:func:`ros_environment`, logs in tmp_path).

    Sets the variables in os.environ (undone after the test), so that an rclpy context created
    afterwards and any subprocess started with ``env=os.environ`` use them. Returns the values.
    """
    log_dir = tmp_path / "ros_log"
    log_dir.mkdir()
    values = ros_environment(log_dir)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    # A static peer list from the user's shell would defeat the isolation.
    monkeypatch.delenv("ROS_STATIC_PEERS", raising=False)
    return values


@pytest.fixture
def rclpy_context(ros_env: dict[str, str]) -> Iterator[object]:
    """An initialised rclpy Context (not the global one), shut down after the test."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        context.try_shutdown()


@pytest.fixture
def sim_parameters() -> list[str]:
    """sim_node's ``-p`` parameters for :func:`sim_node` (a module overrides this fixture)."""
    return []


@pytest.fixture
def sim_node(ros_env: dict[str, str], tmp_path: Path, sim_parameters: list[str]) -> Iterator[NodeProcess]:
    """sim_node (``python -m ovman_sim.sim_node``) started with ``sim_parameters``, stopped after the test."""
    log_path = tmp_path / "sim_node.log"
    command = [sys.executable, "-m", "ovman_sim.sim_node", "--ros-args"]
    for parameter in sim_parameters:
        command += ["-p", parameter]
    node = NodeProcess(command, log_path, "sim_node")
    try:
        yield node
    finally:
        node.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/ros runs a DDS graph or needs rclpy: it is of the ``ros`` tier."""
    here = Path(__file__).resolve().parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.ros)
