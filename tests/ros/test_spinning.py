"""Nodes end quietly on Ctrl-C or an external shutdown, including rclpy's wait-set race."""

from __future__ import annotations

import threading

import pytest
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import MultiThreadedExecutor

from ovman_sim.spinning import spin_until_shutdown


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
