"""How every OVMAN node runs on the graph: its endpoints' QoS events, and spinning until shutdown.

:class:`GraphNode` is the base of every OVMAN node (and of OvmanCommander). Every node declares
its config keys as typed ROS parameters (:func:`declare_config_parameters`: a wrongly typed override
is a ConfigError naming the parameter, the node and both types), runs as :func:`run_node`, stops
quietly on Ctrl-C or an external shutdown (:func:`spin_until_shutdown`) and prints the CPU time its
process used as it exits (:func:`report_cpu_time`; :func:`cpu_time_reports` reads it back).
"""

from __future__ import annotations

import re
import resource
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy._rclpy_pybind11 import RCLError
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.exceptions import InvalidParameterTypeException, ParameterException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_policy_name_from_kind

from ovman_core.config import (
    ConfigError,
    OvmanConfig,
    describe,
    node_parameters,
    parameter_value,
    with_parameters,
)
from ovman_ros.node_main import install_first_interrupt


class GraphNode(Node):
    """A Node whose publishers and subscriptions warn of incompatible QoS while
    ``qos_event_warnings`` is true, and have no event handlers otherwise; explicit ``event_callbacks``
    win. rclpy gives each endpoint two handlers and an executor adds every handler to its wait set at
    each wake-up; the one kept warns of what stops a volatile subscriber from ever hearing a
    transient-local-only publisher, or a reliable one a best-effort camera. ``ros2 topic info -v``
    shows every endpoint's QoS either way."""

    qos_event_warnings = True
    """Set it (from ``ros.qos_event_warnings``) before creating endpoints; those created before keep theirs."""

    def refuse_parameter_changes(self, instead: str = "restart it") -> None:
        """Keep the parameter services (list, get, describe, dump) and refuse every set, with the
        reason: this node reads its parameters once, at start-up (``instead``: what to do instead)."""

        def refuse(parameters: list[Parameter]) -> SetParametersResult:
            changed = ", ".join(p.name for p in parameters)
            reason = f"{self.get_name()} reads its parameters at start-up; {instead} to change {changed}"
            return SetParametersResult(successful=False, reason=reason)

        self.add_on_set_parameters_callback(refuse)

    def _incompatible_qos(self, topic: str, other: str) -> Callable[[Any], None]:
        def warn(event: Any) -> None:
            self.get_logger().warning(
                f"{topic}: a {other} with incompatible QoS was discovered; no messages will pass between them "
                f"(last incompatible policy: {qos_policy_name_from_kind(event.last_policy_kind)}; "
                f"see ros2 topic info -v {topic})"
            )

        return warn

    def create_publisher(
        self,
        msg_type: Any,
        topic: str,
        *args: Any,
        event_callbacks: PublisherEventCallbacks | None = None,
        **kwargs: Any,
    ) -> Any:
        if event_callbacks is None:
            warn = self._incompatible_qos(topic, "subscription") if self.qos_event_warnings else None
            event_callbacks = PublisherEventCallbacks(incompatible_qos=warn, use_default_callbacks=False)
        return super().create_publisher(msg_type, topic, *args, event_callbacks=event_callbacks, **kwargs)

    def create_subscription(
        self,
        msg_type: Any,
        topic: str,
        *args: Any,
        event_callbacks: SubscriptionEventCallbacks | None = None,
        **kwargs: Any,
    ) -> Any:
        if event_callbacks is None:
            warn = self._incompatible_qos(topic, "publisher") if self.qos_event_warnings else None
            event_callbacks = SubscriptionEventCallbacks(incompatible_qos=warn, use_default_callbacks=False)
        return super().create_subscription(msg_type, topic, *args, event_callbacks=event_callbacks, **kwargs)


_TYPE_NAMES = {
    Parameter.Type.BOOL: "bool",
    Parameter.Type.INTEGER: "integer",
    Parameter.Type.DOUBLE: "double",
    Parameter.Type.STRING: "string",
    Parameter.Type.BYTE_ARRAY: "byte array",
    Parameter.Type.BOOL_ARRAY: "list of bools",
    Parameter.Type.INTEGER_ARRAY: "list of integers",
    Parameter.Type.DOUBLE_ARRAY: "list of doubles",
    Parameter.Type.STRING_ARRAY: "list of strings",
}
"""ROS parameter type -> what the errors call it."""


def declare_config_parameters(
    node: Node, defaults: dict[str, Any], descriptions: Mapping[str, ParameterDescriptor] | None = None
) -> None:
    """Declare ``defaults`` ({dotted name: value}) as parameters of ``node``, each typed by its
    default and described by ``descriptions[name]`` where given (what ``ros2 param describe``
    shows); a command-line or launch override replaces the default (read it with ``get_parameter``).

    Raises ConfigError naming the parameter and the node when an override has another type than the
    default (``expected a double, got the string 'abc'``), has no value (``:=[]``: an empty list has
    no ROS type) or rclpy refuses it otherwise.
    """
    for name, default in defaults.items():
        expected = _TYPE_NAMES[Parameter.Type.from_parameter_value(default)]
        try:
            declared = node.declare_parameter(name, default, (descriptions or {}).get(name, ParameterDescriptor()))
        except InvalidParameterTypeException:
            # rclpy keeps the override only privately: a dynamically typed declaration reads it.
            override = node.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True)).value
            got = _TYPE_NAMES[Parameter.Type.from_parameter_value(override)]
            raise ConfigError(
                f"parameter '{name}' of {node.get_name()}: expected {_article(expected)} {expected}, "
                f"got the {got} {parameter_value(override)!r}"
            ) from None
        except ParameterException as err:
            raise ConfigError(f"parameter '{name}' of {node.get_name()}: {err}") from None
        if declared.type_ == Parameter.Type.NOT_SET:
            raise ConfigError(
                f"parameter '{name}' of {node.get_name()}: expected {_article(expected)} {expected}, got no value "
                "(an empty list has no ROS type)"
            )


def config_from_parameters(
    node: Node,
    config: OvmanConfig,
    sections: Sequence[tuple[str, str]],
    extra: dict[str, Any] | None = None,
) -> OvmanConfig:
    """``config`` with ``node``'s ROS parameters applied: every key of each ``(owner, prefix)``
    section (the config keys of node ``owner`` that start with ``prefix``; ``""``: all of them) is
    declared as a parameter typed by its default, and so is every key of ``extra`` (parameters the
    node reads itself); then the values the node was started with replace the file's. ConfigError
    naming the node and the key for a value of the wrong type or out of range."""
    groups = [
        (owner, {name: value for name, value in node_parameters(config, owner).items() if name.startswith(prefix)})
        for owner, prefix in sections
    ]
    declare_config_parameters(
        node,
        {name: value for _, group in groups for name, value in group.items()} | (extra or {}),
        config_descriptions(config, {owner for owner, _ in sections}),
    )
    updated = config
    try:
        for owner, defaults in groups:
            values = {name: parameter_value(node.get_parameter(name).value) for name in defaults}
            updated = with_parameters(updated, owner, values)
    except ConfigError as err:
        raise ConfigError(f"{node.get_name()} parameters: {err}") from err
    return updated


def config_descriptions(config: OvmanConfig, owners: set[str]) -> dict[str, ParameterDescriptor]:
    """Dotted name -> descriptor (the key's explanation and its range, from the typed config) of
    every key that nodes ``owners`` declare, shared keys included."""
    return {
        key.name: ParameterDescriptor(description=key.explanation, additional_constraints="; ".join(key.constraints))
        for section in describe(config)
        for key in section.keys
        if key.node == "/**" or key.node in owners
    }


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def spin_until_shutdown(executor: Executor) -> None:
    """Spin ``executor`` and return once Ctrl-C or an external shutdown stops it; any other error,
    or an ``RCLError`` while the context is still valid, propagates."""
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        return
    except RCLError:
        # rclpy's SIGINT handler shuts the context down from the signal handler: an executor building
        # its wait set then fails with RCLError ("the given context is not valid"), the likelier the
        # more threads spin. After a shutdown that error is the normal end.
        if executor.context.ok():
            raise


def run_node(
    name: str,
    make_node: Callable[[], Node],
    args: Sequence[str] | None = None,
    *,
    startup_errors: tuple[type[Exception], ...] = (ConfigError,),
    cannot_start: int = 1,
    run: Callable[[Any], int] | None = None,
    threads: int = 1,
) -> int:
    """Every OVMAN node's main (its process's): init rclpy with ``args`` (None: ``sys.argv``),
    make the node, then spin it on ``threads`` executor threads until Ctrl-C or an external shutdown, or, given
    ``run``, return ``run(node)``. Ctrl-C (SIGINT) or SIGTERM ends either with exit status 0, as
    ``ros2 launch`` expects of a node it stops: a run that it cuts short leaves its partial
    results for a resume, and the command that was interrupted says so with its own status
    (``ovman launch`` exits with 130).

    A node that cannot start (one of ``startup_errors``: a bad config file or parameter, a scene
    that fails to load) prints ``<name>: cannot start: <why>`` with no traceback and returns
    ``cannot_start``. However it ends, the node is destroyed and its process's CPU time reported
    (:func:`report_cpu_time`). Signals: a terminal's Ctrl-C under ``ros2 launch`` reaches a node
    twice (the terminal signals the whole process group, then launch forwards its own SIGINT).
    The first SIGINT ends the node; every later one is ignored
    (:class:`ovman_ros.node_main.FirstInterrupt`), then and for the rest of the
    process (from the clean-up on, SIGINT stays ignored: the process is exiting, and Python would
    otherwise restore the default action while it finalises, so a late SIGINT would kill it
    with -2). SIGTERM keeps rclpy's handler (an external shutdown) until rclpy is shut down, then
    its default action, so launch's escalation still ends a node stuck in its clean-up."""
    main_thread = threading.current_thread() is threading.main_thread()
    # Before rclpy.init: rclpy's handler chains to the Python handler it finds installed (already
    # this one when the process started through ovman_ros.node_main, as every node does).
    install_first_interrupt()
    rclpy.init(args=list(args) if args is not None else sys.argv)
    node = None
    try:
        try:
            node = make_node()
        except startup_errors as err:
            print(f"{name}: cannot start: {err}", file=sys.stderr, flush=True)
            return cannot_start
        if run is not None:
            return run(node)
        executor = SingleThreadedExecutor() if threads == 1 else MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        spin_until_shutdown(executor)
        return 0
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        if main_thread:
            ignore_interrupts()
        report_cpu_time(name if node is None else node.get_name())
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def ignore_interrupts() -> None:
    """Ignore SIGINT from now on (a node's clean-up). The first Ctrl-C's Python handler
    (:class:`~ovman_ros.node_main.FirstInterrupt`) may run only now, late, inside this call: rclpy's
    handler already ended the spin, so that KeyboardInterrupt is the one already handled, not a
    second request, and the handler is installed again."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


CPU_REPORT = "{name}: process CPU {user:.2f} s user + {system:.2f} s system"
_CPU_REPORT_LINE = re.compile(
    r"^(?P<name>\S+): process CPU (?P<user>[0-9]+\.[0-9]+) s user \+ (?P<system>[0-9]+\.[0-9]+) s system$",
    re.MULTILINE,
)


def report_cpu_time(name: str) -> None:
    """Print to stderr the CPU time this process has used so far: user and system seconds of all
    its threads (DDS and executor threads included), as :data:`CPU_REPORT` with the node's ``name``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(CPU_REPORT.format(name=name, user=usage.ru_utime, system=usage.ru_stime), file=sys.stderr, flush=True)


def cpu_time_reports(text: str) -> dict[str, float]:
    """Node name -> CPU seconds (user + system) of the :func:`report_cpu_time` lines in ``text`` (a
    node's log); the last line of a name wins."""
    return {m["name"]: float(m["user"]) + float(m["system"]) for m in _CPU_REPORT_LINE.finditer(text)}
