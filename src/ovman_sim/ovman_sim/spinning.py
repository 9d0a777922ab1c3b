"""How every OVMAN node runs on the graph: its endpoints' QoS events, and spinning until shutdown.

:class:`GraphNode` is the base of every OVMAN node (and of OvmanCommander). rclpy gives each
publisher and subscription two event handlers that log incompatible QoS or types of a topic's
other endpoints, and an executor adds every handler to its wait set at each wake-up: measured on
these machines, one wake-up of a node with nine subscriptions costs 0.33 ms of CPU with them and
0.12 ms without, and the benchmark graph's CPU drops from 325 s to 292 s on the default set. A
GraphNode creates its endpoints without those handlers unless its ``qos_event_warnings`` is true
(config ``ros.qos_event_warnings``, shared by every node: turn it on to debug the topics of a new
robot); ``ros2 topic info -v`` shows every endpoint's QoS either way.

:func:`spin_until_shutdown`: rclpy's SIGINT handler shuts the context down from the signal handler. An executor that is
building its wait set at that moment fails with ``RCLError`` ("the given context is not valid")
instead of raising ``ExternalShutdownException``; the more threads spin (MultiThreadedExecutor),
the likelier. After a shutdown that error is the normal end, not a failure of the node.
"""

from __future__ import annotations

from typing import Any

from rclpy._rclpy_pybind11 import RCLError
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node


class GraphNode(Node):
    """A Node whose publishers and subscriptions get rclpy's default QoS event callbacks only while
    ``qos_event_warnings`` is true (see the module docstring); explicit ``event_callbacks`` win."""

    qos_event_warnings = False
    """Set it (from ``ros.qos_event_warnings``) before creating endpoints; those created before keep theirs."""

    def create_publisher(
        self, *args: Any, event_callbacks: PublisherEventCallbacks | None = None, **kwargs: Any
    ) -> Any:
        if event_callbacks is None and not self.qos_event_warnings:
            event_callbacks = PublisherEventCallbacks(use_default_callbacks=False)
        return super().create_publisher(*args, event_callbacks=event_callbacks, **kwargs)

    def create_subscription(
        self, *args: Any, event_callbacks: SubscriptionEventCallbacks | None = None, **kwargs: Any
    ) -> Any:
        if event_callbacks is None and not self.qos_event_warnings:
            event_callbacks = SubscriptionEventCallbacks(use_default_callbacks=False)
        return super().create_subscription(*args, event_callbacks=event_callbacks, **kwargs)


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
