"""Spinning a node's executor until Ctrl-C or an external shutdown, the same way in every node.

rclpy's SIGINT handler shuts the context down from the signal handler. An executor that is
building its wait set at that moment fails with ``RCLError`` ("the given context is not valid")
instead of raising ``ExternalShutdownException``; the more threads spin (MultiThreadedExecutor),
the likelier. After a shutdown that error is the normal end, not a failure of the node.
"""

from __future__ import annotations

from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import Executor, ExternalShutdownException


def spin_until_shutdown(executor: Executor) -> None:
    """Spin ``executor`` and return once Ctrl-C or an external shutdown stops it; any other error,
    or an ``RCLError`` while the context is still valid, propagates."""
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        return
    except RCLError:
        if executor.context.ok():
            raise
