"""The ROS 2 benchmark graph, described once as plain data (no rclpy, no launch).

Two starters read it: ``launch/benchmark.launch.py`` (``launch_ros`` Node actions on a ROS 2
install) and ``ovman launch benchmark`` (``python -m <module>`` processes on pip-installed rclpy).
The graph (ARCHITECTURE.md "Data flow"): sim_node, the player (a second sim_node playing the recorded
tours under :data:`PLAYER_PREFIX`), mapping_node, query_node, nav_node and benchmark_node, whose exit
ends it. Every node's parameters come from :func:`ovman_core.config.node_parameters` of one
configuration, whose file every process gets as ``$OVMAN_CONFIG``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ovman_core.config import ConfigError, OvmanConfig, node_parameters
from ovman_eval.runs.results import ARM_ORDER, EXTERNAL_ARM, SIM_PERCEPTION_ARM, parse_seeds
from ovman_mapping.map_store import STORE_DIR_KEY
from ovman_mapping.segmenter import SEGMENTER_NODE_PARAMETERS, SIMULATOR, TOPIC
from ovman_ros import bundle, names

ParameterValue = bool | int | float | str | list[bool] | list[int] | list[float] | list[str]

SIM_NODE = "sim_node"
PLAYER_NODE = "player"
"""The second sim_node of the graph, which plays the recorded tours, in the namespace
:data:`ovman_ros.names.PLAYER_NAMESPACE` under the graph's (topics ``player/camera/bundle``...)."""
MAPPING_NODE = "mapping_node"
SEGMENTER_NODE = "segmenter_node"
SIM_PERCEPTION_NAMESPACE = "sim_perception"
"""Where the sim_perception arm's maps are built, under the graph's namespace: segmenter_node with the
simulator's segments publishing ``sim_perception/segmentation/segments``, and a second mapping_node
(``segmenter.kind: topic``) fusing them into ``sim_perception/ovman/map/visit<n>`` (the route a
robot's own segmenter takes). Both read the player's frames and tree."""
QUERY_NODE = "query_node"
NAV_NODE = "nav_node"
BENCHMARK_NODE = "benchmark_node"
RVIZ_NODE = "rviz2"

PACKAGE = "ovman_eval"
"""The package whose share directory holds the launch file, the configuration and the RViz layout."""
CONFIG_FILE = "config/ovman.yaml"
RVIZ_FILE = "config/ovman.rviz"
GRAPH_MAX_PENDING = 100_000
"""mapping_node's ``node.tf_max_pending`` in the benchmark graph: above any tour's frame count (a few
hundred), so no recorded frame is given up while it waits for its pose."""
DDS_PROFILE_FILE = "config/fastdds.xml"
"""Paths relative to the package share directory (and to the repository root of a checkout)."""
DDS_PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
"""The variable through which Fast DDS reads an XML profile (see config/fastdds.xml)."""

ENCODER_PREFIX = "encoder."
"""mapping_node's keys that query_node declares too (queries are embedded with the maps' encoder)."""

RUN_DATASET = "run.dataset"
RUN_OUTPUT = "run.output"
RUN_DIR = "run.run_dir"
RUN_STATIC_ONLY = "run.static_only"
RUN_AGENT_NAMESPACE = "run.agent_namespace"
"""benchmark_node's run inputs: not constants of the configuration, so not in config/ovman.yaml.
``run.agent_namespace``: where an external agent serves the services of docs/external-agent.md
(relative: under the graph's namespace), for the arm ``external``; empty without it."""
USE_SIM_TIME = "use_sim_time"
"""rclpy's own parameter: the node's clock follows the ``clock`` topic (``/clock`` remapped to it)."""


class GraphError(ValueError):
    """A launch argument or parameter that cannot describe a runnable graph (names it)."""


@dataclasses.dataclass(frozen=True)
class LaunchArgument:
    """A launch argument of ``benchmark.launch.py`` (and an option of ``ovman launch benchmark``)."""

    name: str
    default: str | None
    """None: required (launch reports it missing; ``ovman launch`` makes its option required)."""
    description: str


LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("dataset", None, "episode dataset directory (from `ovman generate`); required"),
    LaunchArgument("arms", "", "comma-separated arms, or all; empty: benchmark.arms of the configuration"),
    LaunchArgument(
        "seeds", "", "run seeds: a count (3 = seeds 0,1,2) or a comma-separated list; empty: benchmark.seeds"
    ),
    LaunchArgument("output", "runs", "folder of run directories: the run is written to OUTPUT/<UTC stamp>"),
    LaunchArgument("run_dir", "", "run (or resume) in exactly this directory instead of OUTPUT/<stamp>"),
    LaunchArgument("static_only", "false", "true: the static gate only, no embodied runs"),
    LaunchArgument("config", "", "configuration file; empty: config/ovman.yaml of the ovman_eval share directory"),
    LaunchArgument("rviz", "false", "true: also start RViz with config/ovman.rviz of the ovman_eval share directory"),
    LaunchArgument(
        "namespace", "", "the graph's namespace (e.g. run1): every node and name under it; empty: the root namespace"
    ),
    LaunchArgument(
        "use_sim_time",
        "true",
        "true: every node of the graph follows sim_node's clock topic",
    ),
    LaunchArgument(
        "agent_namespace",
        "",
        "namespace of an external agent (relative, e.g. my_agent) evaluated as the arm external "
        "(docs/external-agent.md); empty: none",
    ),
)
NAMESPACE_PATTERN = re.compile(r"(/?[A-Za-z_][A-Za-z0-9_]*)*")
"""A ROS namespace: tokens of letters, digits and underscores, none starting with a digit."""


@dataclasses.dataclass(frozen=True)
class BenchmarkOptions:
    """What benchmark_node runs: ``arms`` × ``seeds`` on ``dataset``, into ``output``/<stamp> (or ``run_dir``)."""

    dataset: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    output: str = "runs"
    run_dir: str = ""
    static_only: bool = False
    rviz: bool = False
    """RViz watches: sim_node keeps its real-time playback and camera after every action."""
    namespace: str = ""
    """The graph's namespace, absolute ("" or "/robot1"); every node's names resolve under it."""
    use_sim_time: bool = True
    """``use_sim_time`` of every node: each output is stamped in the ``clock`` time base (sim_node's).
    sim_node's clock stands still through a static run, so two visit maps may carry the same stamp:
    query_node pairs a visit-2 map with the visit-1 map it names (InstanceMap ``follows``)."""
    agent_namespace: str = ""
    """Where an external agent serves its services, relative to the graph's namespace: required
    with the arm ``external`` and refused without it (docs/external-agent.md)."""

    def __post_init__(self) -> None:
        if not self.dataset:
            raise GraphError("launch argument dataset: give the episode dataset directory (dataset:=DIR)")
        if not self.arms or len(set(self.arms)) != len(self.arms):
            raise GraphError(f"launch argument arms: give distinct arms, got {list(self.arms)}")
        unknown = [a for a in self.arms if a not in ARM_ORDER]
        if unknown:
            raise GraphError(
                f"launch argument arms: unknown {', '.join(unknown)}; expected {', '.join(ARM_ORDER)} or all"
            )
        external = EXTERNAL_ARM in self.arms
        if external != bool(self.agent_namespace):
            raise GraphError(
                "launch argument agent_namespace: give it exactly when the arms include external "
                f"(arms {', '.join(self.arms)}; agent_namespace {self.agent_namespace!r})"
            )
        if self.agent_namespace and (
            not NAMESPACE_PATTERN.fullmatch(self.agent_namespace) or self.agent_namespace.startswith("/")
        ):
            raise GraphError(
                "launch argument agent_namespace: expected a relative ROS namespace such as my_agent (letters, digits, "
                f"underscores; no token starting with a digit; no leading /), got {self.agent_namespace!r}"
            )
        if not self.seeds or any(s < 0 for s in self.seeds):
            raise GraphError(f"launch argument seeds: give non-negative integers, got {list(self.seeds)}")
        if not NAMESPACE_PATTERN.fullmatch(self.namespace) or self.namespace.endswith("/"):
            raise GraphError(
                f"launch argument namespace: expected a ROS namespace such as run1 or /lab/run1 (letters, digits, "
                f"underscores; no token starting with a digit), got {self.namespace!r}"
            )

    @classmethod
    def from_arguments(cls, values: Mapping[str, str], config: OvmanConfig) -> BenchmarkOptions:
        """Options from launch-argument strings (unset or empty: the defaults of :data:`LAUNCH_ARGUMENTS`
        and the configuration's ``benchmark.arms`` / ``benchmark.seeds``)."""
        defaults = {a.name: a.default for a in LAUNCH_ARGUMENTS}
        known = set(defaults)
        unknown = sorted(set(values) - known)
        if unknown:
            raise GraphError(f"unknown launch argument(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")

        def get(name: str) -> str:
            return str(values.get(name, defaults[name] or "")).strip()

        params = config.benchmark_node.benchmark
        arms = tuple(n.strip() for n in get("arms").split(",") if n.strip()) or tuple(params.arms)
        if arms == ("all",):
            arms = tuple(a for a in ARM_ORDER if a != EXTERNAL_ARM)
        try:
            seeds = parse_seeds(get("seeds")) if get("seeds") else tuple(params.seeds)
        except ValueError as err:
            raise GraphError(f"launch argument seeds: {err}") from None
        return cls(
            dataset=get("dataset"),
            arms=arms,
            seeds=seeds,
            output=get("output") or defaults["output"],
            run_dir=get("run_dir"),
            static_only=parse_bool(get("static_only"), "static_only"),
            rviz=parse_bool(get("rviz"), "rviz"),
            namespace=("/" + get("namespace").strip("/")) if get("namespace").strip("/") else "",
            use_sim_time=parse_bool(get("use_sim_time"), "use_sim_time"),
            agent_namespace=get("agent_namespace").rstrip("/"),
        )


def parse_bool(text: str, name: str) -> bool:
    """A launch-argument boolean: true/false (any case), 1/0, yes/no."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no", ""):
        return False
    raise GraphError(f"launch argument {name}: expected true or false, got {text!r}")


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One process of the graph.

    ``package``/``executable``: what ``ros2 launch`` starts (the console script of the ament_python
    package); ``module``: what ``python -m`` starts (None for a non-Python program such as RViz);
    ``parameters``: flat dotted ROS parameters; ``remappings``: (from, to) topic pairs;
    ``arguments``: extra command-line arguments; ``ends_graph``: the graph stops when it exits.
    """

    name: str
    package: str
    executable: str
    module: str | None
    parameters: Mapping[str, ParameterValue]
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    ends_graph: bool = False
    namespace: str = ""
    """Absolute ("" = the root namespace)."""

    @property
    def full_name(self) -> str:
        """The fully qualified node name (``/robot1/sim_node``)."""
        return f"{self.namespace}/{self.name}"

    @property
    def log_name(self) -> str:
        """Its log's file name without the suffix: the full name, dotted (``robot1.sim_node``)."""
        return self.full_name.strip("/").replace("/", ".")

    def params_document(self) -> dict[str, Any]:
        """This node's block of a ROS 2 params file: ``{full name: {ros__parameters: {...}}}`` (nested)."""
        nested: dict[str, Any] = {}
        for dotted, value in self.parameters.items():
            *parents, leaf = dotted.split(".")
            target = nested
            for part in parents:
                target = target.setdefault(part, {})
            target[leaf] = list(value) if isinstance(value, (list, tuple)) else value
        return {self.full_name: {"ros__parameters": nested}}


@dataclasses.dataclass(frozen=True)
class NodeTemplate:
    """A node of the benchmark graph as far as it is known before the launch arguments: what
    ``benchmark.launch.py`` declares as a static Node action (``--print-description`` lists it).
    :func:`benchmark_graph` makes a :class:`NodeSpec` of each, with its parameters and namespace."""

    name: str
    package: str
    executable: str
    module: str | None
    remappings: tuple[tuple[str, str], ...] = ()
    subnamespace: str = ""
    """Relative, under the graph's namespace ("" = the graph's own)."""
    ends_graph: bool = False
    graph_remappings: tuple[tuple[str, str], ...] = ()
    """(from, to) pairs whose ``to`` is relative to the graph's namespace, not the node's (a node in a
    subnamespace reading the graph's topics): absolute once the graph's namespace is known."""
    for_simulator_maps: bool = False
    """In the graph only when the run builds the simulator's maps (:func:`builds_simulator_maps`)."""

    @property
    def key(self) -> str:
        """The node's name relative to the graph's namespace (``sim_perception/mapping_node``)."""
        return f"{self.subnamespace}/{self.name}" if self.subnamespace else self.name

    def namespace(self, graph_namespace: str) -> str:
        """The node's absolute namespace in a graph under ``graph_namespace`` ("" or "/run1")."""
        return f"{graph_namespace}/{self.subnamespace}" if self.subnamespace else graph_namespace

    def remappings_in(self, graph_namespace: str) -> tuple[tuple[str, str], ...]:
        """Every remapping of the node in a graph under ``graph_namespace``."""
        return self.remappings + tuple((a, f"{graph_namespace}/{b}") for a, b in self.graph_remappings)


# The conventionally absolute /clock, /tf and /tf_static resolve in each node's namespace.
_BASE = names.NAMESPACED_REMAPPINGS
_PLAYER_CAMERA = (
    ("/clock", names.CLOCK),
    ("/tf", f"{names.PLAYER_NAMESPACE}/{names.TF}"),
    ("/tf_static", f"{names.PLAYER_NAMESPACE}/{names.TF_STATIC}"),
    (names.CAMERA_BUNDLE, f"{names.PLAYER_NAMESPACE}/{names.CAMERA_BUNDLE}"),
)
"""The graph's clock, and the player's camera and frame tree (targets relative to the graph's namespace)."""
BENCHMARK_NODES: tuple[NodeTemplate, ...] = (
    NodeTemplate(SIM_NODE, "ovman_sim", "sim_node", "ovman_sim.sim_node", _BASE),
    NodeTemplate(
        PLAYER_NODE, "ovman_sim", "sim_node", "ovman_sim.sim_node", _BASE, subnamespace=names.PLAYER_NAMESPACE
    ),
    NodeTemplate(
        MAPPING_NODE,
        "ovman_mapping",
        "mapping_node",
        "ovman_mapping.mapping_node",
        _PLAYER_CAMERA,  # in the graph's namespace: relative targets resolve there
    ),
    NodeTemplate(
        SEGMENTER_NODE,
        "ovman_mapping",
        "segmenter_node",
        "ovman_mapping.segmenter_node",
        subnamespace=SIM_PERCEPTION_NAMESPACE,
        graph_remappings=_PLAYER_CAMERA,
        for_simulator_maps=True,
    ),
    NodeTemplate(
        MAPPING_NODE,
        "ovman_mapping",
        "mapping_node",
        "ovman_mapping.mapping_node",
        subnamespace=SIM_PERCEPTION_NAMESPACE,
        graph_remappings=_PLAYER_CAMERA,
        for_simulator_maps=True,
    ),
    NodeTemplate(QUERY_NODE, "ovman_query", "query_node", "ovman_query.query_node", _BASE),
    NodeTemplate(NAV_NODE, "ovman_nav", "nav_node", "ovman_nav.nav_node", _BASE),
    NodeTemplate(BENCHMARK_NODE, PACKAGE, "benchmark_node", "ovman_eval.graph.benchmark_node", _BASE, ends_graph=True),
)
"""The nodes of the benchmark graph, in start order; the player runs sim_node's program with
sim_node's parameters, mapping_node maps the player's camera, and so do the two nodes of
:data:`SIM_PERCEPTION_NAMESPACE` when the run builds the simulator's maps. With the tours on their
own node, benchmark_node maps the next group while sim_node and nav_node run the current one's
embodied runs; the two never share a topic, so the live camera never reaches the maps nor the tours
nav_node's pose."""


def builds_simulator_maps(arms: Sequence[str], agent_segmenter: str) -> bool:
    """Whether a graph running ``arms`` with the agent on ``agent_segmenter`` (``mapping_node.segmenter.kind``)
    builds maps of the simulator's segments: for sim_perception, unless the agent's maps are those."""
    return SIM_PERCEPTION_ARM in arms and agent_segmenter != SIMULATOR


def _checked(node: str, params: Mapping[str, Any]) -> dict[str, ParameterValue]:
    """Parameters a ROS params file and ``launch_ros`` can carry: scalars, non-empty uniform lists."""
    out: dict[str, ParameterValue] = {}
    for name, value in params.items():
        if isinstance(value, (list, tuple)):
            if not value:
                raise GraphError(f"{node} parameter {name}: an empty list has no ROS parameter type; give a value")
            kinds = {type(v) for v in value}
            if len(kinds) != 1 or kinds.pop() not in (bool, int, float, str):
                raise GraphError(f"{node} parameter {name}: a list parameter needs items of one type, got {value!r}")
            out[name] = list(value)
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            raise GraphError(f"{node} parameter {name}: {type(value).__name__} is not a ROS parameter type")
    return out


def benchmark_graph(config: OvmanConfig, options: BenchmarkOptions) -> tuple[NodeSpec, ...]:
    """The six nodes of the benchmark graph with their parameters (query_node also gets
    mapping_node's ``encoder.*``, which it must share; the launch arguments ``arms`` and ``seeds``
    override ``benchmark.arms`` / ``benchmark.seeds``).

    ``config`` is the configuration the nodes run with (its file is ``$OVMAN_CONFIG`` of every
    process); use :func:`config_for_dataset` first so that sim_node simulates the dataset's world.
    """
    try:
        encoder = {k: v for k, v in node_parameters(config, MAPPING_NODE).items() if k.startswith(ENCODER_PREFIX)}
        sim = node_parameters(config, SIM_NODE)
        mapping = node_parameters(config, MAPPING_NODE)
        # query_node embeds with the maps' encoder and reads mapping_node's map store.
        query = {**node_parameters(config, QUERY_NODE), **encoder, STORE_DIR_KEY: mapping[STORE_DIR_KEY]}
        nav = node_parameters(config, NAV_NODE)
        bench = node_parameters(config, BENCHMARK_NODE)
    except ConfigError as err:
        raise GraphError(f"the configuration cannot describe the graph: {err}") from err
    # The graph's wiring, whatever the file says: sim_node waits for benchmark_node's load_visit,
    # mapping_node for its start_visit, and nav_node drives sim_node's world over DDS.
    sim.update({"node.scene": "", "node.recording": ""})
    mapping["node.start_visit"] = 0
    mapping["node.frame_policy"] = "keep_all"  # every recorded frame is mapped, as in process
    mapping["node.store_maps"] = False  # a run's visits stay out of the robot's map store
    query["load_stored_visits"] = False  # ... and query_node answers from this run's maps only
    # A recorded tour's /tf is complete, but under load DDS may repair a lost /tf sample only after a
    # writer heartbeat (seconds, measured 1.9 s) while the images flow on: a frame then waits for its
    # pose as long as finish_visit waits for it, instead of a robot's tf_timeout_s, and any number may
    # wait (they are the frames qos_keep_all would hold in DDS anyway). Extrapolation stays refused.
    mapping["node.tf_timeout_s"] = max(config.mapping_node.node.tf_timeout_s, config.mapping_node.node.finish_timeout_s)
    mapping["node.tf_max_pending"] = GRAPH_MAX_PENDING
    agent_segmenter = config.mapping_node.segmenter.kind
    simulator_maps = builds_simulator_maps(options.arms, agent_segmenter)
    # Frames travel as one CameraBundle each (one take instead of six); RViz also gets the
    # standard camera topics when it watches.
    sim["node.camera_output"] = bundle.CAMERA_BOTH_OUTPUT if options.rviz else bundle.CAMERA_BUNDLE_OUTPUT
    mapping["node.camera_input"] = bundle.CAMERA_BUNDLE_OUTPUT
    if not options.rviz:
        # Nobody watches: tours as fast as mapping_node keeps up, the camera after an action on demand.
        # keep_all: an acknowledgement says a frame arrived, not that it was fused, so a bounded history
        # would overwrite frames whenever fusing lags behind the tour.
        window = config.mapping_node.node.qos_depth
        sim.update({"node.play_period_s": 0.0, "node.act_camera": False, "node.qos_depth": window})
        mapping["node.qos_keep_all"] = True
    by_node: dict[str, dict[str, Any]] = {}
    if simulator_maps:
        # sim_perception's maps: the simulator's segments from segmenter_node, fused by a mapping_node
        # of kind topic wired as the agent's; a frame may wait for its segments as for its pose.
        sim_mapping = {**mapping, "segmenter.kind": TOPIC, "node.sync_max_pending": GRAPH_MAX_PENDING}
        segmenter_keys = [k for k in mapping if k.startswith(SEGMENTER_NODE_PARAMETERS)]
        segmenter = {k: mapping[k] for k in segmenter_keys} | {"segmenter.kind": SIMULATOR}
        by_node[f"{SIM_PERCEPTION_NAMESPACE}/{SEGMENTER_NODE}"] = segmenter
        by_node[f"{SIM_PERCEPTION_NAMESPACE}/{MAPPING_NODE}"] = sim_mapping
    nav["navigation.scene"] = ""
    bench.update(
        {
            "benchmark.arms": list(options.arms),
            "benchmark.seeds": list(options.seeds),
            RUN_DATASET: options.dataset,
            RUN_OUTPUT: options.output,
            RUN_DIR: options.run_dir,
            RUN_STATIC_ONLY: options.static_only,
            RUN_AGENT_NAMESPACE: options.agent_namespace,
        }
    )
    by_node.update({SIM_NODE: sim, MAPPING_NODE: mapping, QUERY_NODE: query, NAV_NODE: nav, BENCHMARK_NODE: bench})
    for params in by_node.values():  # and the player, which runs with sim_node's
        params[USE_SIM_TIME] = options.use_sim_time
    checked = {name: _checked(name, params) for name, params in by_node.items()}
    player = f"{names.PLAYER_NAMESPACE}/{PLAYER_NODE}"
    checked[player] = checked[SIM_NODE]  # the player plays the recordings of sim_node's world
    if options.agent_namespace:
        # An external agent maps the played visits from the standard camera topics.
        checked[player] = {**checked[SIM_NODE], "node.camera_output": bundle.CAMERA_BOTH_OUTPUT}
    return tuple(
        NodeSpec(
            t.name,
            t.package,
            t.executable,
            t.module,
            checked[t.key],
            t.remappings_in(options.namespace),
            ends_graph=t.ends_graph,
            namespace=t.namespace(options.namespace),
        )
        for t in BENCHMARK_NODES
        if simulator_maps or not t.for_simulator_maps
    )


def rviz_node(rviz_config: Path | str, namespace: str = "") -> NodeSpec:
    """RViz 2 with the OVMAN layout (``rviz2 -d <share>/config/ovman.rviz``) in the graph's namespace."""
    return NodeSpec(
        RVIZ_NODE,
        "rviz2",
        "rviz2",
        None,
        {},
        names.NAMESPACED_REMAPPINGS,
        arguments=("-d", str(rviz_config)),
        namespace=namespace,
    )


def params_file_document(nodes: Sequence[NodeSpec]) -> dict[str, Any]:
    """One ROS 2 params document for the whole graph: one top-level key per node."""
    document: dict[str, Any] = {}
    for node in nodes:
        if node.full_name in document:
            raise GraphError(f"two nodes are named {node.full_name}")
        document.update(node.params_document())
    return document


def config_for_dataset(config: OvmanConfig, dataset: Path | str) -> OvmanConfig:
    """``config`` with sim_node's world kind set to the world of the dataset's episodes (as the
    in-process runner does); raises GraphError for a missing or unreadable dataset."""
    from ovman_eval.benchmark.request import configured_for
    from ovman_eval.generation.dataset import DatasetError, read_episodes
    from ovman_eval.runs.run_dir import BenchmarkError

    path = Path(dataset)
    try:
        records = read_episodes(path)
        if not records:
            raise GraphError(f"{path}: the dataset holds no episodes")
        return configured_for(config, records)
    except (DatasetError, BenchmarkError, ValueError) as err:
        if isinstance(err, GraphError):
            raise
        raise GraphError(f"launch argument dataset: {err}") from err


def node_environment(environ: Mapping[str, str], dds_profile: Path | str) -> dict[str, str]:
    """What a starter adds to the nodes' environment: :data:`DDS_PROFILE_ENV` naming ``dds_profile``
    (the graph's Fast DDS profile: large messages over shared memory), unless ``environ`` names a
    profile already, which is then kept. Without it, camera bundles larger than the built-in
    shared-memory segment travel as UDP fragments whose losses wait for the writer's next heartbeat."""
    if environ.get(DDS_PROFILE_ENV):
        return {}
    return {DDS_PROFILE_ENV: str(Path(dds_profile).resolve())}


def share_path(share_directory: Path | str, relative: str) -> Path:
    """A file of the package share directory (e.g. :data:`CONFIG_FILE`), which must exist."""
    path = Path(share_directory) / relative
    if not path.is_file():
        raise GraphError(f"{path}: missing from the {PACKAGE} share directory; rebuild and install {PACKAGE}")
    return path


__all__ = [
    "BENCHMARK_NODE",
    "BENCHMARK_NODES",
    "LAUNCH_ARGUMENTS",
    "BenchmarkOptions",
    "GraphError",
    "LaunchArgument",
    "NodeSpec",
    "NodeTemplate",
    "benchmark_graph",
    "config_for_dataset",
    "node_environment",
    "params_file_document",
    "parse_bool",
    "rviz_node",
    "share_path",
]
