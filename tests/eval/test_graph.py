"""The benchmark graph described once (ovman_eval.graph.description), and its two starters' view of it.

- the description: six nodes (eight when the run builds the simulator's maps), each a module with
  a console script, parameters from the config;
- ``launch/benchmark.launch.py`` run against a recording fake of the ``launch``/``launch_ros`` API
  surface it uses (those packages are not installable here): its arguments, Node actions,
  parameters, shutdown handler and RViz must be exactly the description's;
- ``ovman launch``'s process starter on stand-in nodes: exit codes, signal forwarding;
- ``config/ovman.rviz``: fixed frame ``map`` and the graph's topics.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from ovman_core.config import CONFIG_ENV, load_config, node_parameters, to_document
from ovman_core.relations import Relation
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.cli.launch import RunningGraph, node_command, nodes_environment, run_graph
from ovman_eval.graph import description as graph
from ovman_mapping.segmenter import with_segmenter
from ovman_query.arms import BUILT_IN_ARMS
from ovman_ros import node_main

from .generation_setup import generate, request, small_config

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "launch" / "benchmark.launch.py"
NODES = ("sim_node", "player", "mapping_node", "query_node", "nav_node", "benchmark_node")
"""The graph of a run without sim_perception."""
TEMPLATES = (
    "sim_node",
    "player/player",
    "mapping_node",
    "sim_perception/segmenter_node",
    "sim_perception/mapping_node",
    "query_node",
    "nav_node",
    "benchmark_node",
)
"""Every node the launch file declares, by its name under the graph's namespace."""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("graph") / "dataset"
    generate(out, request(relations=(Relation.REMOVED,), scenes=("embedded-0",)))
    return out


@pytest.fixture
def share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ament prefix with ovman_eval installed as colcon would: marker, config/ and launch/."""
    prefix = tmp_path / "install"
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / "ovman_eval"
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    share = prefix / "share" / "ovman_eval"
    (share / "config").mkdir(parents=True)
    (share / "config" / "ovman.yaml").write_text(yaml.safe_dump(to_document(small_config())), encoding="utf-8")
    (share / "config" / "ovman.rviz").write_text((REPO / "config" / "ovman.rviz").read_text())
    (share / "config" / "fastdds.xml").write_text((REPO / "config" / "fastdds.xml").read_text())
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    monkeypatch.delenv(graph.DDS_PROFILE_ENV, raising=False)
    return share


# ---- the description ---------------------------------------------------------------------------


def options(dataset: Path, **changes: Any) -> graph.BenchmarkOptions:
    return dataclasses.replace(graph.BenchmarkOptions(str(dataset), ("two_visit",), (0,)), **changes)


def test_the_graph_is_six_nodes_each_a_module_with_its_console_script(dataset: Path):
    nodes = graph.benchmark_graph(load_config(), options(dataset))
    assert tuple(n.name for n in nodes) == NODES
    assert [n.name for n in nodes if n.ends_graph] == ["benchmark_node"]
    every = graph.benchmark_graph(load_config(), options(dataset, arms=("sim_perception",)))
    for node in every:
        assert importlib.util.find_spec(node.module) is not None, node.module
        # Every console script starts through ovman_ros.node_main (Ctrl-C is clean while the node loads).
        setup = (REPO / "src" / node.package / "setup.py").read_text()
        assert f"{node.executable} = ovman_ros.node_main:console_script" in setup, (node.package, node.executable)
        assert node_main.NODE_MODULES[node.executable] == node.module


def test_the_graph_is_its_static_templates_with_parameters_and_the_graphs_namespace(dataset: Path):
    # benchmark.launch.py declares one static Node per template; the specs must be those nodes.
    assert tuple(t.key for t in graph.BENCHMARK_NODES) == TEMPLATES
    for space, arms in itertools.product(("", "/run1"), (("two_visit",), ("two_visit", "sim_perception"))):
        nodes = graph.benchmark_graph(load_config(), options(dataset, namespace=space, arms=arms))
        templates = [t for t in graph.BENCHMARK_NODES if "sim_perception" in arms or not t.for_simulator_maps]
        for node, template in zip(nodes, templates, strict=True):
            assert (node.name, node.package, node.executable, node.module) == (
                template.name,
                template.package,
                template.executable,
                template.module,
            )
            assert (node.ends_graph, node.arguments) == (template.ends_graph, ())
            assert node.remappings == template.remappings_in(space)
            assert node.namespace == template.namespace(space)
    player = graph.BENCHMARK_NODES[1]
    assert (player.namespace(""), player.namespace("/run1")) == ("/player", "/run1/player")


def test_the_player_plays_the_tours_in_its_own_namespace_and_mapping_node_maps_those(dataset: Path):
    from ovman_ros import names

    nodes = {n.name: n for n in graph.benchmark_graph(load_config(), options(dataset))}
    player, sim = nodes["player"], nodes["sim_node"]
    assert (player.module, player.parameters) == (sim.module, sim.parameters)  # a second sim_node
    assert player.namespace == "/player" and sim.namespace == ""  # nothing on sim_node's topics
    # mapping_node takes the player's frames as one CameraBundle each, their poses on the player's tree.
    extra = {k: v for k, v in nodes["mapping_node"].remappings if (k, v) not in names.NAMESPACED_REMAPPINGS}
    assert extra == {
        "camera/bundle": "player/camera/bundle",
        "/tf": "player/tf",
        "/tf_static": "player/tf_static",
    }
    assert nodes["mapping_node"].parameters["node.camera_input"] == "bundle"
    assert player.parameters["node.camera_output"] == "bundle"
    assert all(n.remappings == names.NAMESPACED_REMAPPINGS for n in nodes.values() if n.name != "mapping_node")


@pytest.mark.parametrize("space", ["", "/run1"])
def test_sim_perception_maps_come_from_segmenter_node_through_a_mapping_node_of_kind_topic(dataset: Path, space: str):
    from ovman_mapping.segmenter import SEGMENTER_NODE_PARAMETERS

    config = load_config()
    arms = ("two_visit", "sim_perception")
    nodes = {n.full_name: n for n in graph.benchmark_graph(config, options(dataset, arms=arms, namespace=space))}
    segmenter = nodes[f"{space}/sim_perception/segmenter_node"]
    sim_mapping = nodes[f"{space}/sim_perception/mapping_node"]
    mapping = nodes[f"{space}/mapping_node"]
    assert (segmenter.module, sim_mapping.module) == ("ovman_mapping.segmenter_node", "ovman_mapping.mapping_node")
    # Both read the player's frames and tree and the graph's clock, named under the graph's namespace.
    player = {
        "/clock": f"{space}/clock",
        "/tf": f"{space}/player/tf",
        "/tf_static": f"{space}/player/tf_static",
        "camera/bundle": f"{space}/player/camera/bundle",
    }
    assert dict(segmenter.remappings) == dict(sim_mapping.remappings) == player
    # The simulator's segments go to a mapping_node wired as the agent's, but reading them as a topic.
    assert segmenter.parameters["segmenter.kind"] == "simulator"
    assert {k for k in segmenter.parameters if k != "use_sim_time"} <= {
        k for k in mapping.parameters if k.startswith(SEGMENTER_NODE_PARAMETERS)
    }
    assert segmenter.parameters["node.qos_keep_all"] is True and segmenter.parameters["node.camera_input"] == "bundle"
    differ = {k for k in mapping.parameters if sim_mapping.parameters[k] != mapping.parameters[k]}
    assert differ == {"segmenter.kind", "node.sync_max_pending"}
    assert sim_mapping.parameters["segmenter.kind"] == "topic"
    assert sim_mapping.parameters["node.sync_max_pending"] == graph.GRAPH_MAX_PENDING
    # Without sim_perception, or with an agent whose maps are the simulator's, no such nodes.
    for other_arms, kind in ((("two_visit",), config.mapping_node.segmenter.kind), (arms, "simulator")):
        mapped = dataclasses.replace(config, mapping_node=with_segmenter(config.mapping_node, kind))
        names_ = [n.full_name for n in graph.benchmark_graph(mapped, options(dataset, arms=other_arms))]
        assert not [n for n in names_ if "sim_perception" in n], names_
    assert graph.builds_simulator_maps(arms, "learned") and not graph.builds_simulator_maps(arms, "simulator")


def test_a_namespaced_graph_puts_every_node_under_it_and_the_absolute_conventions_too(dataset: Path):
    nodes = graph.benchmark_graph(load_config(), options(dataset, namespace="/run1"))
    assert {n.full_name for n in nodes} == {
        "/run1/sim_node",
        "/run1/player/player",
        "/run1/mapping_node",
        "/run1/query_node",
        "/run1/nav_node",
        "/run1/benchmark_node",
    }
    assert all(("/clock", "clock") in n.remappings for n in nodes)
    tree = {n.name: dict(n.remappings)["/tf"] for n in nodes}  # resolved in the node's namespace
    assert tree == {n.name: "player/tf" if n.name == "mapping_node" else "tf" for n in nodes}
    document = graph.params_file_document(nodes)
    assert set(document) == {n.full_name for n in nodes}
    command = node_command(nodes[0], Path("params.yaml"))
    assert command[command.index("__ns:=/run1") - 1] == "-r"


@pytest.mark.parametrize("namespace", ["1run", "run-1", "run 1", "/a//b", "a/2b"])
def test_a_namespace_that_ros_refuses_is_refused_naming_the_argument(dataset: Path, namespace: str):
    values = {"dataset": str(dataset), "namespace": namespace}
    with pytest.raises(graph.GraphError, match="launch argument namespace"):
        graph.BenchmarkOptions.from_arguments(values, load_config())


def test_with_rviz_sim_node_keeps_real_time_playback_and_the_camera_after_every_action(dataset: Path):
    config = load_config()
    watched = {n.name: n for n in graph.benchmark_graph(config, options(dataset, rviz=True))}["sim_node"].parameters
    assert watched["node.play_period_s"] == config.sim_node.node.play_period_s > 0.0
    assert watched["node.act_camera"] is config.sim_node.node.act_camera is True
    assert watched["node.qos_depth"] == config.sim_node.node.qos_depth
    assert watched["node.camera_output"] == "both"  # RViz shows the standard camera topics
    mapping = {n.name: n for n in graph.benchmark_graph(config, options(dataset, rviz=True))}["mapping_node"]
    assert mapping.parameters["node.qos_keep_all"] is config.mapping_node.node.qos_keep_all is False
    arguments = {a.name: a.default for a in graph.LAUNCH_ARGUMENTS} | {"dataset": str(dataset), "rviz": "true"}
    assert graph.BenchmarkOptions.from_arguments(arguments, config).rviz is True


def test_an_external_agent_gets_the_players_standard_camera_topics_and_benchmark_node_its_namespace(
    dataset: Path,
):
    config = load_config()
    values = {"dataset": str(dataset), "arms": "two_visit,external", "agent_namespace": "my_agent/"}
    run = graph.BenchmarkOptions.from_arguments(values, config)
    assert run.agent_namespace == "my_agent"
    nodes = {n.name: n for n in graph.benchmark_graph(config, run)}
    assert nodes["player"].parameters["node.camera_output"] == "both"  # the bundle and the standard topics
    assert nodes["sim_node"].parameters["node.camera_output"] == "bundle"
    assert nodes["benchmark_node"].parameters[graph.RUN_AGENT_NAMESPACE] == "my_agent"
    assert nodes["benchmark_node"].parameters["benchmark.arms"] == ["two_visit", "external"]
    plain = {n.name: n for n in graph.benchmark_graph(config, options(dataset))}
    assert plain["benchmark_node"].parameters[graph.RUN_AGENT_NAMESPACE] == ""


def test_node_parameters_are_the_configs_with_the_graph_wiring_and_the_run_inputs(dataset: Path):
    config = load_config()
    run = options(dataset, arms=("two_visit", "given_answer"), seeds=(3, 4), output="out", static_only=True)
    nodes = {n.name: n for n in graph.benchmark_graph(config, run)}
    wiring = {
        # Nobody watches: unpaced playback (a window of mapping_node's depth), the camera on demand.
        "sim_node": {
            "node.scene": "",
            "node.recording": "",
            "node.play_period_s": 0.0,
            "node.act_camera": False,
            "node.qos_depth": config.mapping_node.node.qos_depth,
            "node.camera_output": "bundle",
            "use_sim_time": True,
        },
        # Lossless: sim_node's acknowledgements say a frame arrived, not that it was fused.
        "mapping_node": {
            "node.start_visit": 0,
            "node.camera_input": "bundle",
            "node.qos_keep_all": True,
            "node.frame_policy": "keep_all",
            # A replayed tour's frames wait for a /tf sample that DDS repairs late, not a robot's timeout.
            "node.tf_timeout_s": max(config.mapping_node.node.tf_timeout_s, config.mapping_node.node.finish_timeout_s),
            "node.tf_max_pending": graph.GRAPH_MAX_PENDING,
            "node.store_maps": False,  # a run's visits stay out of the robot's map store
            "use_sim_time": True,
        },
        "query_node": {"load_stored_visits": False, "use_sim_time": True},
        "nav_node": {"navigation.scene": "", "use_sim_time": True},
    }
    wiring["player"] = wiring["sim_node"]
    for name, overrides in wiring.items():
        expected = {**node_parameters(config, "sim_node" if name == "player" else name), **overrides}
        if name == "query_node":
            mapping = node_parameters(config, "mapping_node")
            expected |= {k: v for k, v in mapping.items() if k.startswith("encoder.") or k == "mapping.store_dir"}
        assert dict(nodes[name].parameters) == expected, name
    bench = dict(nodes["benchmark_node"].parameters)
    assert bench["benchmark.arms"] == ["two_visit", "given_answer"] and bench["benchmark.seeds"] == [3, 4]
    assert bench[graph.RUN_DATASET] == str(dataset) and bench[graph.RUN_OUTPUT] == "out"
    assert bench[graph.RUN_STATIC_ONLY] is True and bench[graph.RUN_DIR] == ""
    assert bench[graph.USE_SIM_TIME] is True
    skip = ("run.", "benchmark.arms", "benchmark.seeds", graph.USE_SIM_TIME)
    assert {k: v for k, v in bench.items() if not k.startswith(skip)} == {
        k: v
        for k, v in node_parameters(config, "benchmark_node").items()
        if k not in ("benchmark.arms", "benchmark.seeds")
    }


def test_use_sim_time_is_a_launch_argument_true_by_default_given_to_every_node(dataset: Path):
    config = load_config()
    defaults = {a.name: a.default for a in graph.LAUNCH_ARGUMENTS}
    assert defaults["use_sim_time"] == "true"
    for value in (True, False):
        arguments = {"dataset": str(dataset), "use_sim_time": str(value).lower()}
        nodes = graph.benchmark_graph(config, graph.BenchmarkOptions.from_arguments(arguments, config))
        timed = {n.full_name: n.parameters.get(graph.USE_SIM_TIME) for n in nodes}
        assert len(nodes) == len(TEMPLATES)  # the shipped arms include sim_perception
        assert timed == dict.fromkeys(timed, value)
    with pytest.raises(graph.GraphError, match="use_sim_time"):
        graph.BenchmarkOptions.from_arguments({"dataset": str(dataset), "use_sim_time": "maybe"}, config)


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_params_file_has_one_block_per_node_whose_nested_keys_are_the_dotted_parameters(dataset: Path):
    nodes = graph.benchmark_graph(load_config(), options(dataset))
    document = yaml.safe_load(yaml.safe_dump(graph.params_file_document(nodes), sort_keys=False))
    assert list(document) == ["/player/player" if n == "player" else f"/{n}" for n in NODES]
    for node in nodes:
        assert set(document[node.full_name]) == {"ros__parameters"}
        assert _flatten(document[node.full_name]["ros__parameters"]) == dict(node.parameters)


def test_options_default_to_the_config_and_name_the_bad_argument(dataset: Path):
    config = load_config()
    parsed = graph.BenchmarkOptions.from_arguments({"dataset": str(dataset)}, config)
    assert parsed.arms == tuple(config.benchmark_node.benchmark.arms)
    assert parsed.seeds == tuple(config.benchmark_node.benchmark.seeds)
    assert (parsed.output, parsed.run_dir, parsed.static_only) == ("runs", "", False)
    every = graph.BenchmarkOptions.from_arguments({"dataset": "d", "arms": "all"}, config).arms
    assert every == tuple(a.value for a in BUILT_IN_ARMS) == graph.ARM_ORDER[:-1]  # external is named on its own
    assert graph.BenchmarkOptions.from_arguments({"dataset": "d", "seeds": "3"}, config).seeds == (0, 1, 2)
    assert graph.BenchmarkOptions.from_arguments({"dataset": "d", "seeds": "4,7"}, config).seeds == (4, 7)
    for values, name in (
        ({}, "dataset"),
        ({"dataset": "d", "seeds": "1,x"}, "seeds"),
        ({"dataset": "d", "seeds": "0"}, "seeds"),
        ({"dataset": "d", "arms": "two_visit,psychic"}, "arms"),
        ({"dataset": "d", "static_only": "maybe"}, "static_only"),
        ({"dataset": "d", "colour": "red"}, "colour"),
        ({"dataset": "d", "arms": "two_visit,external"}, "agent_namespace"),
        ({"dataset": "d", "arms": "two_visit", "agent_namespace": "mine"}, "agent_namespace"),
        ({"dataset": "d", "arms": "external", "agent_namespace": "/abs"}, "agent_namespace"),
        ({"dataset": "d", "arms": "external", "agent_namespace": "9lives"}, "agent_namespace"),
    ):
        with pytest.raises(graph.GraphError, match=name):
            graph.BenchmarkOptions.from_arguments(values, config)


def test_a_missing_dataset_is_refused_before_anything_starts(tmp_path: Path):
    with pytest.raises(graph.GraphError, match="dataset"):
        graph.config_for_dataset(load_config(), tmp_path / "nowhere")


def test_the_dataset_world_sets_the_simulated_world(dataset: Path):
    config = load_config()
    thor = dataclasses.replace(
        config,
        sim_node=dataclasses.replace(config.sim_node, world=dataclasses.replace(config.sim_node.world, kind="ai2thor")),
    )
    adjusted = graph.config_for_dataset(thor, dataset)
    sim = next(n for n in graph.benchmark_graph(adjusted, options(dataset)) if n.name == "sim_node")
    assert sim.parameters["world.kind"] == "embedded"


def test_empty_list_parameters_are_refused_with_the_node_and_name(dataset: Path):
    config = load_config()
    bad = dataclasses.replace(
        config,
        sim_node=dataclasses.replace(
            config.sim_node, ai2thor=dataclasses.replace(config.sim_node.ai2thor, structural_types=[])
        ),
    )
    with pytest.raises(graph.GraphError, match=r"sim_node parameter ai2thor\.structural_types"):
        graph.benchmark_graph(bad, options(dataset))


# ---- the launch file against a fake launch API --------------------------------------------------


class Recorded:
    """Keeps its keyword arguments, like the real actions keep their configuration."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class LaunchDescription:
    def __init__(self, initial_entities: list[Any] | None = None) -> None:
        self.entities = list(initial_entities or [])


class DeclareLaunchArgument(Recorded):
    def __init__(self, name: str, *, default_value: str | None = None, description: str | None = None, **kwargs: Any):
        super().__init__(default_value=default_value, description=description, **kwargs)
        self.name = name


class OpaqueFunction(Recorded):
    def __init__(self, *, function: Any, args: list[Any] | None = None, kwargs: dict[str, Any] | None = None):
        super().__init__()
        self.function, self.args, self.fn_kwargs = function, args or [], kwargs or {}

    def execute(self, context: Any) -> list[Any]:
        return self.function(context, *self.args, **self.fn_kwargs)


class SetEnvironmentVariable(Recorded):
    def __init__(self, name: str, value: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.name, self.value = name, value


class SetLaunchConfiguration(Recorded):
    def __init__(self, name: str, value: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.name, self.value = name, value


class RegisterEventHandler(Recorded):
    def __init__(self, event_handler: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.event_handler = event_handler


class EmitEvent(Recorded):
    def __init__(self, *, event: Any, **kwargs: Any):
        super().__init__(event=event, **kwargs)


class OnProcessExit(Recorded):
    def __init__(self, *, target_action: Any = None, on_exit: Any, **kwargs: Any):
        super().__init__(target_action=target_action, on_exit=on_exit, **kwargs)


class Shutdown(Recorded):
    def __init__(self, *, reason: str = "reason not given"):
        super().__init__(reason=reason)


class LaunchConfiguration:
    def __init__(self, variable_name: str, *, default: str | None = None) -> None:
        self.name, self.default = variable_name, default

    def perform(self, context: Any) -> str:
        if self.name in context.launch_configurations:
            return context.launch_configurations[self.name]
        if self.default is None:
            raise LookupError(f"launch configuration '{self.name}' does not exist")
        return self.default


def perform(value: Any, context: Any) -> str:
    """A substitution's value as launch computes it: a list of substitutions and strings is concatenated."""
    if isinstance(value, list):
        return "".join(perform(item, context) for item in value)
    return value.perform(context) if isinstance(value, LaunchConfiguration) else value


class IfCondition:
    """launch's IfCondition: only 'true' or 'false' (any case), '1' or '0'."""

    def __init__(self, predicate_expression: Any) -> None:
        self.predicate = predicate_expression

    def evaluate(self, context: Any) -> bool:
        value = perform(self.predicate, context).lower()
        if value not in ("true", "false", "1", "0"):
            raise ValueError(f"invalid condition expression {value!r}")
        return value in ("true", "1")


class Node(Recorded):
    """launch_ros.actions.Node's keyword-only signature; the rest goes to ExecuteProcess."""

    def __init__(
        self,
        *,
        executable: str,
        package: str | None = None,
        name: str | None = None,
        namespace: Any = None,
        exec_name: str | None = None,
        parameters: list[Any] | None = None,
        remappings: list[Any] | None = None,
        ros_arguments: list[Any] | None = None,
        arguments: list[Any] | None = None,
        condition: IfCondition | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.executable, self.package, self.name = executable, package, name
        self.namespace, self.exec_name = namespace, exec_name
        self.parameters, self.remappings, self.arguments = parameters, remappings, arguments
        self.condition = condition


@dataclasses.dataclass
class Started:
    """A Node action as launch executes it: its substitutions performed (params files read)."""

    action: Node
    namespace: str
    params_files: list[Path]
    arguments: list[str]
    remappings: list[tuple[str, str]]


@pytest.fixture
def fake_launch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The fake launch API in place of the real one; returns launch's log directory."""
    log_dir = tmp_path / "launch_log"
    modules = {
        "launch": {"LaunchDescription": LaunchDescription},
        "launch.actions": {
            "DeclareLaunchArgument": DeclareLaunchArgument,
            "EmitEvent": EmitEvent,
            "OpaqueFunction": OpaqueFunction,
            "RegisterEventHandler": RegisterEventHandler,
            "SetEnvironmentVariable": SetEnvironmentVariable,
            "SetLaunchConfiguration": SetLaunchConfiguration,
        },
        "launch.conditions": {"IfCondition": IfCondition},
        "launch.event_handlers": {"OnProcessExit": OnProcessExit},
        "launch.events": {"Shutdown": Shutdown},
        "launch.logging": {"launch_config": types.SimpleNamespace(log_dir=str(log_dir))},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
    }
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)
    return log_dir


def launch_description() -> LaunchDescription:
    """The launch file's description (built against the fake launch API)."""
    spec = importlib.util.spec_from_file_location("benchmark_launch", LAUNCH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def launch(arguments: dict[str, str]) -> tuple[LaunchDescription, list[Any]]:
    """The description, and what launch executes with ``arguments`` applied over the declared
    defaults, in order: environment settings, a :class:`Started` per Node whose condition holds,
    event handlers. A required argument missing fails as launch does."""
    description = launch_description()
    context = types.SimpleNamespace(launch_configurations=dict(arguments))
    executed: list[Any] = []

    def visit(entity: Any) -> None:
        if isinstance(entity, DeclareLaunchArgument):
            if entity.kwargs["default_value"] is None and entity.name not in context.launch_configurations:
                raise LookupError(f"Included launch description missing required argument '{entity.name}'")
            context.launch_configurations.setdefault(entity.name, entity.kwargs["default_value"])
        elif isinstance(entity, OpaqueFunction):
            for action in entity.execute(context):
                visit(action)
        elif isinstance(entity, SetLaunchConfiguration):
            context.launch_configurations[entity.name] = perform(entity.value, context)
        elif isinstance(entity, Node):
            if entity.condition is None or entity.condition.evaluate(context):
                files = [Path(perform(p, context)) for p in entity.parameters or []]
                assert all(f.is_file() for f in files), files  # launch_ros skips a missing file
                arguments = [perform(a, context) for a in entity.arguments or []]
                remaps = [(perform(a, context), perform(b, context)) for a, b in entity.remappings or []]
                executed.append(Started(entity, perform(entity.namespace, context), files, arguments, remaps))
        else:
            executed.append(entity)

    for entity in description.entities:
        visit(entity)
    return description, executed


def test_launch_file_declares_every_argument_of_the_description_with_its_description(fake_launch: Path):
    description = launch_description()
    declared = [e for e in description.entities if isinstance(e, DeclareLaunchArgument)]
    assert [(d.name, d.kwargs["default_value"], d.kwargs["description"]) for d in declared] == [
        (a.name, a.default, a.description) for a in graph.LAUNCH_ARGUMENTS
    ]
    assert all(a.description for a in graph.LAUNCH_ARGUMENTS)
    assert {"dataset", "arms", "rviz", "namespace"} <= {d.name for d in declared}
    # dataset has no default, so launch itself reports it missing.
    assert next(d for d in declared if d.name == "dataset").kwargs["default_value"] is None


def test_the_nodes_are_static_actions_that_print_description_lists(fake_launch: Path):
    # Built without any argument and nothing executed: what --print-description shows.
    entities = launch_description().entities
    nodes = [e for e in entities if isinstance(e, Node)]
    assert [(n.package, n.executable, n.name, n.exec_name) for n in nodes] == [
        *((t.package, t.executable, t.name, t.name) for t in graph.BENCHMARK_NODES),
        ("rviz2", "rviz2", "rviz2", "rviz2"),
    ]
    for node, template in zip(nodes, graph.BENCHMARK_NODES, strict=False):
        assert node.remappings[: len(template.remappings)] == list(template.remappings)
        assert isinstance(node.condition, IfCondition) == template.for_simulator_maps
    assert isinstance(nodes[-1].condition, IfCondition)
    # The OpaqueFunction that writes their params file comes before every node.
    (prepare,) = [i for i, e in enumerate(entities) if isinstance(e, OpaqueFunction)]
    assert prepare < entities.index(nodes[0])


def test_launch_file_starts_the_description_with_share_directory_paths(fake_launch: Path, share: Path, dataset: Path):
    _, executed = launch({"dataset": str(dataset), "arms": "two_visit,given_answer", "seeds": "0,1"})
    config_path = share / "config" / "ovman.yaml"
    environment = {a.name: a.value for a in executed if isinstance(a, SetEnvironmentVariable)}
    assert environment == {CONFIG_ENV: str(config_path), graph.DDS_PROFILE_ENV: str(share / "config" / "fastdds.xml")}
    expected = graph.benchmark_graph(
        graph.config_for_dataset(load_config(config_path), dataset),
        options(dataset, arms=("two_visit", "given_answer"), seeds=(0, 1)),
    )
    started = [a for a in executed if isinstance(a, Started)]
    assert [(n.action.package, n.action.executable, n.action.name) for n in started] == [
        (s.package, s.executable, s.name) for s in expected
    ]
    (params_file,) = {f for n in started for f in n.params_files}
    assert params_file.parent == fake_launch  # launch's log directory, beside launch.log
    # One params file, the one ovman launch writes: every node's block under its full name.
    assert yaml.safe_load(params_file.read_text()) == graph.params_file_document(expected)
    for node, spec in zip(started, expected, strict=True):
        assert node.remappings == list(spec.remappings) and node.arguments == list(spec.arguments)
        assert (node.namespace, node.action.exec_name) == (spec.namespace, spec.name)
    # The shipped small config (64x48 camera) is what the nodes get, not the repository's.
    assert yaml.safe_load(params_file.read_text())["/sim_node"]["ros__parameters"]["camera"]["width"] == 64


def test_a_namespaced_launch_puts_the_nodes_and_their_parameter_blocks_under_it(
    fake_launch: Path, share: Path, dataset: Path
):
    _, executed = launch({"dataset": str(dataset), "namespace": "run1/"})
    started = [a for a in executed if isinstance(a, Started)]
    assert [n.namespace for n in started] == ["/run1", "/run1/player", "/run1", "/run1", "/run1", "/run1"]
    document = yaml.safe_load(started[0].params_files[0].read_text())
    assert set(document) == {f"{n.namespace}/{n.action.name}" for n in started}


def test_the_simulator_maps_nodes_start_only_for_sim_perception_with_the_descriptions_remappings(
    fake_launch: Path, share: Path, dataset: Path
):
    # The agent on the learned segmenter (the share's config has it on the simulator's segments).
    learned = share / "config" / "learned.yaml"
    learned.write_text(yaml.safe_dump(to_document(segmented_by(small_config(), "learned"))), encoding="utf-8")
    arms = "two_visit,sim_perception"
    _, executed = launch({"dataset": str(dataset), "namespace": "run1", "arms": arms, "config": str(learned)})
    started = {f"{n.namespace}/{n.action.name}": n for n in executed if isinstance(n, Started)}
    expected = graph.benchmark_graph(
        graph.config_for_dataset(load_config(learned), dataset),
        options(dataset, arms=("two_visit", "sim_perception"), namespace="/run1"),
    )
    assert list(started) == [s.full_name for s in expected]
    for spec in expected:
        assert started[spec.full_name].remappings == list(spec.remappings)
    camera = dict(started["/run1/sim_perception/mapping_node"].remappings)["camera/bundle"]
    assert camera == "/run1/player/camera/bundle"
    _, without = launch({"dataset": str(dataset), "arms": "two_visit", "config": str(learned)})
    assert [n.action.name for n in without if isinstance(n, Started)] == list(NODES)


def test_a_fast_dds_profile_the_user_set_is_kept(
    fake_launch: Path, share: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(graph.DDS_PROFILE_ENV, "/etc/mine.xml")
    _, executed = launch({"dataset": str(dataset)})
    assert [a.name for a in executed if isinstance(a, SetEnvironmentVariable)] == [CONFIG_ENV]
    assert graph.node_environment({graph.DDS_PROFILE_ENV: "/etc/mine.xml"}, share / "config" / "fastdds.xml") == {}
    # An empty variable names no profile.
    profile = share / "config" / "fastdds.xml"
    assert graph.node_environment({graph.DDS_PROFILE_ENV: ""}, profile) == {graph.DDS_PROFILE_ENV: str(profile)}


def test_launch_ends_when_benchmark_node_exits(fake_launch: Path, share: Path, dataset: Path):
    _, executed = launch({"dataset": str(dataset)})
    (handler,) = [a for a in executed if isinstance(a, RegisterEventHandler)]
    exit_handler = handler.event_handler
    assert isinstance(exit_handler, OnProcessExit)
    assert exit_handler.kwargs["target_action"].name == "benchmark_node"
    (emit,) = exit_handler.kwargs["on_exit"]
    assert isinstance(emit.kwargs["event"], Shutdown)


@pytest.mark.parametrize("shown", ["true", "True", "yes", "1"])
def test_rviz_starts_only_when_asked_with_the_installed_layout(fake_launch: Path, share: Path, dataset: Path, shown):
    _, headless = launch({"dataset": str(dataset), "rviz": "false"})
    assert "rviz2" not in [a.action.executable for a in headless if isinstance(a, Started)]
    _, watched = launch({"dataset": str(dataset), "rviz": shown, "namespace": "run1"})
    (rviz,) = [a for a in watched if isinstance(a, Started) and a.action.executable == "rviz2"]
    assert rviz.action.package == "rviz2" and rviz.arguments == ["-d", str(share / "config" / "ovman.rviz")]
    assert rviz.namespace == "/run1" and rviz.params_files == []


def test_launch_without_a_dataset_names_the_argument(fake_launch: Path, share: Path):
    with pytest.raises(LookupError, match="required argument 'dataset'"):
        launch({})


def test_a_bad_argument_stops_the_launch_before_any_node_starts(fake_launch: Path, share: Path, dataset: Path):
    with pytest.raises(graph.GraphError, match="launch argument seeds"):
        launch({"dataset": str(dataset), "seeds": "x"})
    assert not fake_launch.exists() or not list(fake_launch.iterdir())  # no params file either


# ---- ovman launch: the process starter -----------------------------------------------------------


def test_each_python_node_runs_as_a_module_with_its_name_remappings_and_the_params_file(dataset: Path, tmp_path: Path):
    for spec in graph.benchmark_graph(load_config(), options(dataset)):
        command = node_command(spec, tmp_path / "p.yaml", python="py")
        remaps = [item for source, target in spec.remappings for item in ("-r", f"{source}:={target}")]
        assert command == [
            "py",
            "-m",
            "ovman_ros.node_main",
            spec.module,
            "--ros-args",
            "-r",
            f"__node:={spec.name}",
            *(["-r", f"__ns:={spec.namespace}"] if spec.namespace else []),
            *remaps,
            "--params-file",
            str(tmp_path / "p.yaml"),
        ]


STAND_IN = """
import pathlib, signal, sys
HERE = pathlib.Path(__file__)
def on_signal(signum, frame):
    HERE.with_suffix(".signal").write_text(str(signum))
    sys.exit(0)
def main():
    signal.signal(signal.SIGINT, on_signal)
    HERE.with_suffix(".ready").write_text("")
{body}
"""
"""A stand-in node: a module with a main(), as ovman_ros.node_main runs it; ``body`` is main's rest."""


WAIT_FOR_WAITER = "import time\nwhile not HERE.with_name('waiter.ready').exists():\n    time.sleep(0.01)\n"


def stand_ins(directory: Path, **bodies: str) -> None:
    for name, body in bodies.items():
        indented = "\n".join("    " + line for line in body.splitlines())
        (directory / f"{name}.py").write_text(STAND_IN.format(body=indented))


def spec(name: str, ends: bool = False) -> graph.NodeSpec:
    return graph.NodeSpec(name, "pkg", name, name, {"x": 1}, ends_graph=ends)


def test_the_graph_exits_with_the_main_nodes_code_and_the_others_get_sigint(tmp_path: Path, monkeypatch):
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    stand_ins(
        code_dir,
        waiter="signal.pause()",
        # Exits once the waiter can take SIGINT: its handler is installed before it writes waiter.ready.
        main=WAIT_FOR_WAITER + "sys.exit(3)",
    )
    env = {"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"}
    code = run_graph(
        RunningGraph(
            [spec("waiter"), spec("main", ends=True)], REPO / "config" / "ovman.yaml", tmp_path / "logs", env=env
        )
    )
    assert code == 3
    assert (code_dir / "waiter.signal").read_text() == "2"  # SIGINT, a clean stop
    params = yaml.safe_load((tmp_path / "logs" / "graph_params.yaml").read_text())
    assert params == {"/waiter": {"ros__parameters": {"x": 1}}, "/main": {"ros__parameters": {"x": 1}}}


def test_a_node_dying_first_stops_the_graph_with_code_1_and_shows_its_log(tmp_path: Path, capsys):
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    stand_ins(code_dir, crasher="print('crasher: out of cheese'); sys.exit(7)", main="signal.pause()")
    env = {"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"}
    code = run_graph(
        RunningGraph(
            [spec("crasher"), spec("main", ends=True)], REPO / "config" / "ovman.yaml", tmp_path / "logs", env=env
        )
    )
    assert code == 1
    err = capsys.readouterr().err
    assert re.search(r"crasher \(pid \d+\) exited with code 7", err) and "out of cheese" in err
    assert (code_dir / "main.signal").read_text() == "2"


def test_a_graph_needs_exactly_one_node_that_ends_it(tmp_path: Path):
    with pytest.raises(graph.GraphError, match="exactly one"):
        RunningGraph([spec("a"), spec("b")], REPO / "config" / "ovman.yaml", tmp_path)


# ---- the RViz layout ---------------------------------------------------------------------------------


def test_rviz_layout_shows_map_markers_answer_plan_cameras_and_tf_in_the_map_frame():
    from ovman_ros import names

    layout = yaml.safe_load((REPO / "config" / "ovman.rviz").read_text())
    manager = layout["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == load_config().frames.map
    shown = {d["Class"]: [] for d in manager["Displays"]}
    for display in manager["Displays"]:
        if "Topic" in display:
            shown[display["Class"]].append(display["Topic"]["Value"])
    # Relative names: RViz started in the graph's namespace shows that graph.
    assert shown["rviz_default_plugins/Map"] == [names.MAP]
    assert shown["rviz_default_plugins/MarkerArray"] == [
        names.VISIT_MARKERS.format(visit=1),
        names.VISIT_MARKERS.format(visit=2),
        names.ANSWER_MARKERS,
    ]
    assert shown["rviz_default_plugins/Path"] == [names.PLAN]
    # The live camera (embodied runs) and the tours' (the player's, which mapping_node maps).
    assert shown["rviz_default_plugins/Image"] == [names.RGB, f"{names.PLAYER_NAMESPACE}/{names.RGB}"]
    assert "rviz_default_plugins/TF" in shown


def test_ovman_launch_gives_the_nodes_the_checkouts_fast_dds_profile_unless_one_is_set():
    profile = REPO / "config" / "fastdds.xml"
    assert nodes_environment({"PATH": "/bin"}) == {"PATH": "/bin", graph.DDS_PROFILE_ENV: str(profile)}
    assert nodes_environment({graph.DDS_PROFILE_ENV: "/etc/mine.xml"}) == {graph.DDS_PROFILE_ENV: "/etc/mine.xml"}


def test_ovman_launch_refuses_a_missing_dataset_before_starting_nodes(tmp_path: Path, capsys):
    from ovman_eval.cli.main import main

    assert main(["launch", "benchmark", "--dataset", str(tmp_path / "none"), "--log-dir", str(tmp_path / "logs")]) == 2
    assert "dataset" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_a_main_node_killed_by_a_signal_is_named_with_the_signal_and_the_shells_exit_code(tmp_path: Path, capsys):
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    stand_ins(code_dir, waiter="signal.pause()", main=WAIT_FOR_WAITER + "import os\nos.kill(os.getpid(), 9)")
    env = {"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"}
    code = run_graph(
        RunningGraph(
            [spec("waiter"), spec("main", ends=True)], REPO / "config" / "ovman.yaml", tmp_path / "logs", env=env
        )
    )
    assert code == 137
    assert re.search(r"main \(pid \d+\) was killed by SIGKILL \(exit code 137\)", capsys.readouterr().err)


def test_a_graph_that_a_forwarded_sigint_stopped_exits_130_though_its_nodes_exit_0(tmp_path: Path, capsys):
    import os
    import signal
    import threading
    import time

    code_dir = tmp_path / "code"
    code_dir.mkdir()
    # Both stand-ins exit 0 on SIGINT, as every node does when asked to stop.
    stand_ins(code_dir, waiter="signal.pause()", main="signal.pause()")
    env = {"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"}

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 60.0
        while not all((code_dir / f"{n}.ready").exists() for n in ("waiter", "main")):
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # to ovman launch, which forwards it

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        code = run_graph(
            RunningGraph(
                [spec("waiter"), spec("main", ends=True)], REPO / "config" / "ovman.yaml", tmp_path / "logs", env=env
            )
        )
    finally:
        presser.join()
    assert code == 130
    assert (code_dir / "main.signal").read_text() == "2" and (code_dir / "waiter.signal").read_text() == "2"
    assert re.search(r"interrupted by SIGINT; main \(pid \d+\) exited with code 0", capsys.readouterr().err)


LAUNCHER = """
import sys
from pathlib import Path
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.graph import description as graph
from ovman_mapping.segmenter import with_segmenter
from ovman_eval.cli.launch import RunningGraph, run_graph
code_dir, logs, config = map(Path, sys.argv[1:4])
nodes = [graph.NodeSpec(n, "pkg", n, n, {{"x": 1}}, ends_graph=n == "main") for n in ("waiter", "main")]
run_graph(RunningGraph(nodes, config, logs, env={{"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"}}))
"""


def test_a_sigkilled_launcher_leaves_no_orphan_nodes(tmp_path: Path):
    import os
    import signal
    import subprocess
    import time

    code_dir = tmp_path / "code"
    code_dir.mkdir()
    pid_body = "import os\nHERE.with_suffix('.pid').write_text(str(os.getpid()))\nsignal.pause()"
    stand_ins(code_dir, waiter=pid_body, main=pid_body)
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER.format())
    process = subprocess.Popen(
        [sys.executable, str(launcher), str(code_dir), str(tmp_path / "logs"), str(REPO / "config" / "ovman.yaml")]
    )
    pids = [code_dir / "waiter.pid", code_dir / "main.pid"]
    deadline = time.monotonic() + 60.0
    while not all(p.exists() and p.read_text() for p in pids):
        assert time.monotonic() < deadline and process.poll() is None, "the stand-in nodes never started"
        time.sleep(0.05)
    nodes = [int(p.read_text()) for p in pids]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A zombie is dead: its parent (init, after the launcher died) has not reaped it yet.
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"

    deadline = time.monotonic() + 30.0
    while any(alive(pid) for pid in nodes):
        assert time.monotonic() < deadline, f"nodes {nodes} outlived their SIGKILLed launcher"
        time.sleep(0.05)


@pytest.mark.ros
def test_nodes_of_the_graph_already_on_the_domain_are_found(tmp_path: Path):
    import rclpy

    from ovman_eval.cli.launch import nodes_on_domain

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        orphan = rclpy.create_node("query_node", context=context)
        assert nodes_on_domain([f"/{n}" for n in NODES], 20.0) == ["/query_node"]
        orphan.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_ovman_launch_refuses_to_start_beside_a_graph_already_on_the_domain(
    dataset: Path, tmp_path: Path, capsys, monkeypatch
):
    from ovman_eval.cli import launch as launch_command
    from ovman_eval.cli.main import main

    seen: list[list[str]] = []
    monkeypatch.setattr(launch_command, "nodes_on_domain", lambda names, wait: seen.append(names) or ["sim_node"])
    monkeypatch.setattr(launch_command, "run_graph", lambda *a, **k: pytest.fail("the graph must not start"))
    monkeypatch.setenv("ROS_DOMAIN_ID", "142")
    assert main(["launch", "benchmark", "--dataset", str(dataset), "--log-dir", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert "ROS_DOMAIN_ID=142 already has node(s) sim_node" in err and "another ROS_DOMAIN_ID" in err
    assert {"/sim_node", "/player/player", "/benchmark_node"} <= set(seen[0])
