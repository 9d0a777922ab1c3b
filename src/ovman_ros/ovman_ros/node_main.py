"""A node process's first code: Ctrl-C ends it cleanly from its first instant, while it still loads.

Every OVMAN node starts here before its module is imported (which takes seconds): :func:`start`
puts :class:`FirstInterrupt` in place of Python's SIGINT handler, then runs the node's ``main``.
``python -m ovman_ros.node_main MODULE [ARGS...]`` is how ``ovman launch`` starts a node; the
nodes' console scripts are all :func:`console_script`, which finds the module by the name it was
started as (:data:`NODE_MODULES`). Only the standard library is imported here, so nothing slow runs
before the handler is in place.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any

NODE_MODULES = {
    "sim_node": "ovman_sim.sim_node",
    "mapping_node": "ovman_mapping.mapping_node",
    "segmenter_node": "ovman_mapping.segmenter_node",
    "query_node": "ovman_query.query_node",
    "nav_node": "ovman_nav.nav_node",
    "benchmark_node": "ovman_eval.graph.benchmark_node",
}
"""Console script name -> the module whose ``main()`` it runs (names only: nothing is imported
until a node starts)."""


class FirstInterrupt:
    """A SIGINT handler: the first SIGINT raises KeyboardInterrupt (as Python's default does), every
    later one is ignored, so that a second SIGINT (``ros2 launch`` forwards its own after the
    terminal's) cannot cut a node's loading or clean-up short with a traceback. rclpy's handler,
    once rclpy is initialised, runs before it on every SIGINT (it shuts the context down)."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: Any) -> None:
        if not self.received:
            self.received = True
            raise KeyboardInterrupt


def install_first_interrupt() -> None:
    """:class:`FirstInterrupt` as the SIGINT handler, in the main thread and only in place of
    Python's default handler (a handler set by the caller, e.g. a test runner's, is kept)."""
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, FirstInterrupt())


def start(module: str) -> int:
    """Run ``module``'s ``main()`` with :class:`FirstInterrupt` in place first; its exit status, or
    0 when Ctrl-C ends the process before the node's main takes over, or 2 (one line on stderr)
    when ``module`` does not exist or has no ``main()``."""
    install_first_interrupt()
    try:
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name is None or not module.startswith(err.name):
                raise  # a module the node itself imports is missing: its own traceback says which
            print(f"{module}: no such module (expected a node module such as ovman_sim.sim_node)", file=sys.stderr)
            return 2
        node_main = getattr(loaded, "main", None)
        if not callable(node_main):
            print(f"{module}: not a node module (it has no main())", file=sys.stderr)
            return 2
        return node_main()
    except KeyboardInterrupt:
        return 0


def console_script() -> int:
    """A node's console script: the node named by the executable's own name (:data:`NODE_MODULES`)."""
    name = Path(sys.argv[0]).name
    if name not in NODE_MODULES:
        print(f"{name}: not an OVMAN node; the nodes are {', '.join(NODE_MODULES)}", file=sys.stderr)
        return 2
    return start(NODE_MODULES[name])


def main() -> int:
    """``python -m ovman_ros.node_main MODULE [ARGS...]``: ``MODULE``'s main with ``ARGS`` as its arguments."""
    if len(sys.argv) < 2:
        print("usage: python -m ovman_ros.node_main MODULE [ARGS...]", file=sys.stderr)
        return 2
    module = sys.argv.pop(1)
    return start(module)


if __name__ == "__main__":
    sys.exit(main())
