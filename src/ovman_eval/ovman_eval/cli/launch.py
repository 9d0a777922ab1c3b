"""``ovman launch benchmark``: the graph of :mod:`ovman_eval.graph.description` as processes, where
no ``ros2 launch`` exists (the same description ``benchmark.launch.py`` starts).

Each node is ``python -m <module> --ros-args ...`` with the graph's params file; signals are
forwarded, no node outlives the launcher (``PR_SET_PDEATHSIG``), and the exit code is
benchmark_node's (128 + the signal when stopped by one: 130 for Ctrl-C; 1 if another node died,
2 if the graph's nodes already run on the domain). docs/ros2-graph.md has the details.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

import yaml

from ovman_core.config import CONFIG_ENV, ConfigError, default_config_path, load_config
from ovman_eval.graph.description import (
    DDS_PROFILE_FILE,
    LAUNCH_ARGUMENTS,
    PACKAGE,
    RVIZ_FILE,
    BenchmarkOptions,
    GraphError,
    NodeSpec,
    benchmark_graph,
    config_for_dataset,
    node_environment,
    params_file_document,
    rviz_node,
    share_path,
)

PARAMS_FILE = "graph_params.yaml"
POLL_PERIOD_S = 0.2
"""(s): how often the launcher looks whether a node exited (it has nothing else to do)."""
LOG_TAIL_CHARS = 4000
"""How much of a failed node's log is shown."""
EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
PR_SET_PDEATHSIG = 1
"""prctl option of linux/prctl.h: the signal a process gets when its parent dies."""


def node_command(spec: NodeSpec, params_file: Path, python: str = sys.executable) -> list[str]:
    """The command line that starts ``spec``: ``python -m ovman_ros.node_main MODULE`` for Python
    nodes (:mod:`ovman_ros.node_main`), the program itself otherwise."""
    if spec.module is None:
        program = shutil.which(spec.executable)
        if program is None:
            raise GraphError(f"{spec.executable} is not installed (not on PATH); it is needed for node {spec.name}")
        command = [program, *spec.arguments, "--ros-args"]
    else:
        # Through ovman_ros.node_main: a Ctrl-C while the node still imports its modules ends it cleanly.
        command = [python, "-m", "ovman_ros.node_main", spec.module, *spec.arguments]
        command += ["--ros-args", "-r", f"__node:={spec.name}"]
    if spec.namespace:
        command += ["-r", f"__ns:={spec.namespace}"]
    for source, target in spec.remappings:
        command += ["-r", f"{source}:={target}"]
    if spec.parameters:
        command += ["--params-file", str(params_file)]
    return command


@dataclasses.dataclass
class NodeProcess:
    """A started node: its description, its process and where its output goes (None: the terminal)."""

    spec: NodeSpec
    process: subprocess.Popen[bytes]
    log_path: Path | None

    def log_tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return "(output went to the terminal)"
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]

    def describe(self) -> str:
        code = self.process.poll()
        if code is None:
            state = "running"
        elif code < 0:
            state = f"was killed by {signal.Signals(-code).name} (exit code {128 - code})"
        else:
            state = f"exited with code {code}"
        return f"{self.spec.name} (pid {self.process.pid}) {state}"


class RunningGraph:
    """The nodes of a graph started as processes (see the module docstring).

    ``echo``: names of the nodes whose output goes to this process's stdout/stderr instead of a log
    file; ``env``: the environment of every node (default: this process's), to which
    ``$OVMAN_CONFIG`` is added. ``interrupted``: the first signal forwarded to the nodes
    (:func:`forwarded_signals`), None while none was.
    """

    interrupted: int | None = None

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        config_path: Path,
        log_dir: Path,
        *,
        echo: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        shutdown_timeout_s: float = 10.0,
        python: str = sys.executable,
    ) -> None:
        ends = [n for n in nodes if n.ends_graph]
        if len(ends) != 1:
            raise GraphError(f"a graph needs exactly one node that ends it, got {[n.name for n in ends]}")
        self.shutdown_timeout_s = shutdown_timeout_s
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.params_file = self.log_dir / PARAMS_FILE
        document = params_file_document(nodes)
        self.params_file.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        environment = dict(os.environ if env is None else env)
        environment[CONFIG_ENV] = str(Path(config_path).resolve())
        commands = [(spec, node_command(spec, self.params_file, python)) for spec in nodes]
        self.nodes: list[NodeProcess] = []
        try:
            for spec, command in commands:
                self.nodes.append(self._start(spec, command, environment, spec.name in echo))
        except BaseException:
            self.stop()
            raise
        self.main = next(n for n in self.nodes if n.spec.ends_graph)

    def _start(self, spec: NodeSpec, command: list[str], env: dict[str, str], echo: bool) -> NodeProcess:
        # Own session: a terminal's Ctrl-C reaches the nodes once, through signal forwarding; and
        # the node gets SIGTERM if this process dies without stopping it (no orphans on the domain).
        arm = _die_with_parent(os.getpid())
        if echo:
            process = subprocess.Popen(command, env=env, start_new_session=True, preexec_fn=arm)
            return NodeProcess(spec, process, None)
        log_path = self.log_dir / f"{spec.log_name}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=arm,
            )
        return NodeProcess(spec, process, log_path)

    def signal_all(self, sig: int) -> None:
        """Send ``sig`` to every node still running."""
        for node in self.nodes:
            if node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(sig)

    def failed_node(self) -> NodeProcess | None:
        """A node other than the main one that has exited (the graph cannot finish without it)."""
        return next((n for n in self.nodes if n is not self.main and n.process.poll() is not None), None)

    def wait(self) -> int | None:
        """Wait until the main node exits (its code, named on stderr unless 0) or another node dies
        (1, after printing its log). Once the nodes were asked to stop (``interrupted``), the others
        may exit first; then None if the main node has not exited ``shutdown_timeout_s`` later."""
        interrupted_at: float | None = None
        while True:
            try:
                code = self.main.process.wait(timeout=POLL_PERIOD_S)
            except subprocess.TimeoutExpired:
                pass
            else:
                if code != 0:
                    print(f"ovman launch: {self.main.describe()}", file=sys.stderr)
                return code
            if self.interrupted is not None:
                interrupted_at = time.monotonic() if interrupted_at is None else interrupted_at
                if time.monotonic() - interrupted_at > self.shutdown_timeout_s:
                    return None
                continue
            failed = self.failed_node()
            if failed is not None:
                print(
                    f"ovman launch: {failed.describe()} before {self.main.spec.name} finished; its log:\n"
                    f"{failed.log_tail()}",
                    file=sys.stderr,
                )
                return 1

    def stop(self) -> None:
        """SIGINT to every node, then SIGTERM, then SIGKILL, waiting ``shutdown_timeout_s`` between."""
        for sig in EXIT_SIGNALS:
            self.signal_all(sig)
            deadline = time.monotonic() + self.shutdown_timeout_s
            for node in self.nodes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
            if all(n.process.poll() is not None for n in self.nodes):
                return


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` (run in the child between fork and exec) that asks Linux to send the child
    SIGTERM when the launcher dies (``prctl(PR_SET_PDEATHSIG)``), and exits at once if the launcher
    is already gone. Elsewhere than Linux it does nothing: there a SIGKILLed launcher leaves its nodes."""

    def arm() -> None:
        if not sys.platform.startswith("linux"):
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return arm


def nodes_on_domain(names: Sequence[str], wait_s: float) -> list[str]:
    """The nodes of fully qualified ``names`` (``/sim_node``, ``/run1/sim_node``) already on this
    process's ROS domain (``$ROS_DOMAIN_ID``, with the discovery range of the environment), found
    within ``wait_s`` (s) of discovery. A graph started beside them, in the same namespace, would
    have two of each node answering the same services; another namespace is no conflict."""
    import rclpy  # the graph itself never needs rclpy in the launcher; only this check does

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        probe = rclpy.create_node(
            f"ovman_launch_probe_{os.getpid()}", context=context, start_parameter_services=False, enable_rosout=False
        )
        deadline = time.monotonic() + wait_s
        wanted = set(names)
        while True:
            on_domain = {f"{space.rstrip('/')}/{name}" for name, space in probe.get_node_names_and_namespaces()}
            found = sorted(on_domain & wanted)
            if found or time.monotonic() >= deadline:
                probe.destroy_node()
                return found
            time.sleep(POLL_PERIOD_S / 4)
    finally:
        rclpy.try_shutdown(context=context)


@contextlib.contextmanager
def forwarded_signals(graph: RunningGraph) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM received by this process go to every node instead."""

    def forward(signum: int, frame: FrameType | None) -> None:
        if graph.interrupted is None:
            graph.interrupted = signum
        graph.signal_all(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_graph(graph: RunningGraph) -> int:
    """Wait for the started ``graph``'s main node, then stop the rest; the main node's exit code, or
    128 + the signal that interrupted the graph (see the module docstring)."""
    try:
        with forwarded_signals(graph):
            code = graph.wait()
    finally:
        graph.stop()
    if code is None:  # interrupted, and the main node outlived its shutdown timeout: stop() ended it
        code = graph.main.process.returncode
        print(f"ovman launch: {graph.main.describe()}", file=sys.stderr)
    if code == 0 and graph.interrupted is not None:
        # The main node stopped cleanly because it was asked to: the run is not complete.
        name = signal.Signals(graph.interrupted).name
        print(f"ovman launch: interrupted by {name}; {graph.main.describe()}", file=sys.stderr)
        return 128 + graph.interrupted
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


def packaged_file(relative: str) -> Path:
    """``relative`` (e.g. config/ovman.rviz) of this source checkout, else of the ovman_eval share
    directory (colcon installs)."""
    checkout = Path(__file__).resolve().parents[4] / relative
    if checkout.is_file():
        return checkout
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        raise GraphError(f"{checkout}: missing, and ament_index_python is not importable") from None
    try:
        return share_path(get_package_share_directory(PACKAGE), relative)
    except PackageNotFoundError as err:
        raise GraphError(f"{checkout}: missing, and {PACKAGE} is not installed: {err}") from err


def nodes_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the graph's additions (:func:`ovman_eval.graph.description.node_environment`)."""
    return {**environ, **node_environment(environ, packaged_file(DDS_PROFILE_FILE))}


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("graph", choices=["benchmark"], help="the graph to start")
    descriptions = {a.name: a.description for a in LAUNCH_ARGUMENTS}
    parser.add_argument("--dataset", required=True, help=descriptions["dataset"])
    parser.add_argument("--arms", default="", help=descriptions["arms"])
    parser.add_argument("--seeds", default="", help=descriptions["seeds"])
    parser.add_argument("--out", default="runs", help=descriptions["output"])
    parser.add_argument("--run-dir", default="", help=descriptions["run_dir"])
    parser.add_argument("--static-only", action="store_true", help="the static gate only, no embodied runs")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    parser.add_argument("--rviz", action="store_true", help="also start rviz2 with config/ovman.rviz")
    parser.add_argument("--namespace", default="", help=descriptions["namespace"])
    parser.add_argument("--agent-namespace", default="", help=descriptions["agent_namespace"])
    parser.add_argument(
        "--use-sim-time",
        default="true",
        choices=["true", "false"],
        help=descriptions["use_sim_time"] + " (default: true)",
    )

    parser.add_argument(
        "--log-dir", help="where the node logs and the params file go (default: a new temporary folder)"
    )
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config_path = Path(args.config) if args.config else default_config_path()
        base = load_config(config_path)
        values = {
            "dataset": args.dataset,
            "arms": args.arms,
            "seeds": args.seeds,
            "output": args.out,
            "run_dir": args.run_dir,
            "static_only": "true" if args.static_only else "false",
            "rviz": "true" if args.rviz else "false",
            "namespace": args.namespace,
            "use_sim_time": args.use_sim_time,
            "agent_namespace": args.agent_namespace,
        }
        options = BenchmarkOptions.from_arguments(values, base)
        nodes = benchmark_graph(config_for_dataset(base, options.dataset), options)
        if options.rviz:
            nodes = (*nodes, rviz_node(packaged_file(RVIZ_FILE), options.namespace))
        environment = nodes_environment(os.environ)
        log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="ovman-launch-"))
    except (ConfigError, GraphError) as err:
        print(f"ovman launch: {err}", file=sys.stderr)
        return 2
    running = nodes_on_domain([n.full_name for n in nodes], base.benchmark_node.node.discovery_wait_s)
    if running:
        domain = os.environ.get("ROS_DOMAIN_ID", "0")
        print(
            f"ovman launch: ROS_DOMAIN_ID={domain} already has node(s) {', '.join(running)} of a benchmark graph "
            f"running (another run, or one orphaned by a killed launcher); stop them, or set another ROS_DOMAIN_ID "
            f"or --namespace",
            file=sys.stderr,
        )
        return 2
    print(f"ovman launch: node logs and parameters in {log_dir}", file=sys.stderr)
    main_node = next(n.name for n in nodes if n.ends_graph)
    try:
        timeout_s = base.benchmark_node.node.shutdown_timeout_s
        graph = RunningGraph(
            nodes, config_path, log_dir, echo=(main_node,), env=environment, shutdown_timeout_s=timeout_s
        )
        return run_graph(graph)
    except GraphError as err:
        print(f"ovman launch: {err}", file=sys.stderr)
        return 2
