"""The OVMAN benchmark graph for ``ros2 launch`` on a ROS 2 workstation.

    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single
    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single arms:=two_visit,given_answer rviz:=true
    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single namespace:=run1   # beside another

Starts sim_node, the player (a second sim_node that plays the recorded tours, in the namespace
``player`` under the graph's), mapping_node, segmenter_node and a second mapping_node in
``sim_perception`` (the simulator's segments, for the arm sim_perception), query_node, nav_node and
benchmark_node as described by
:mod:`ovman_eval.graph.description` (the description ``ovman launch benchmark`` starts too), every node with
its parameters from the configuration (``config:=`` or the ovman.yaml installed in this package's
share directory, also exported as ``$OVMAN_CONFIG``; ``$FASTDDS_DEFAULT_PROFILES_FILE`` is the
share directory's ``config/fastdds.xml`` unless already set), and RViz with ``config/ovman.rviz`` when
``rviz:=true``. The launch shuts down when benchmark_node exits; the results are in
``output``/<UTC stamp> (or ``run_dir``). Every argument is listed by
``ros2 launch ovman_eval benchmark.launch.py --show-args``; ``dataset`` has no default, so launch
names it when it is missing.

The Node actions are static (``--print-description`` lists them). What they need from the
arguments is prepared by one OpaqueFunction that runs before them: it reads the configuration
and the dataset's world, checks the arguments (a bad one stops the launch before any node
starts, naming it), writes the graph's params file (one block per node, keyed by its full name:
:func:`ovman_eval.graph.description.params_file_document`, what ``ovman launch`` writes too) to
launch's log directory, and sets the launch configurations the Node actions read: ``namespace``
and ``rviz`` in their normal form, ``ovman_params_file``, ``ovman_rviz_layout`` and
``ovman_simulator_maps`` (whether the two nodes of the sim_perception arm's maps start).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
    SetLaunchConfiguration,
)
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.logging import launch_config
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ovman_core.config import CONFIG_ENV, load_config
from ovman_eval.graph import description as graph

PARAMS_FILE = "ovman_params_file"
RVIZ_LAYOUT = "ovman_rviz_layout"
SIMULATOR_MAPS = "ovman_simulator_maps"
"""Launch configurations that the OpaqueFunction sets for the static Node actions."""


def _prepare_graph(context) -> list:
    """The arguments checked, the params file written, the configurations and environment set."""
    values = {argument.name: LaunchConfiguration(argument.name).perform(context) for argument in graph.LAUNCH_ARGUMENTS}
    share = Path(get_package_share_directory(graph.PACKAGE))
    config_path = Path(values["config"]) if values["config"] else graph.share_path(share, graph.CONFIG_FILE)
    base = load_config(config_path)
    options = graph.BenchmarkOptions.from_arguments(values, base)
    config = graph.config_for_dataset(base, options.dataset)
    nodes = graph.benchmark_graph(config, options)
    simulator_maps = graph.builds_simulator_maps(options.arms, config.mapping_node.segmenter.kind)
    rviz_layout = graph.share_path(share, graph.RVIZ_FILE) if options.rviz else share / graph.RVIZ_FILE
    log_dir = Path(launch_config.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    handle, params_file = tempfile.mkstemp(prefix="ovman_graph_params_", suffix=".yaml", dir=log_dir)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        yaml.safe_dump(graph.params_file_document(nodes), out, sort_keys=False)
    dds = graph.node_environment(os.environ, graph.share_path(share, graph.DDS_PROFILE_FILE))
    return [
        SetEnvironmentVariable(CONFIG_ENV, str(config_path)),
        *(SetEnvironmentVariable(name, value) for name, value in dds.items()),
        SetLaunchConfiguration("namespace", options.namespace),
        SetLaunchConfiguration("rviz", "true" if options.rviz else "false"),
        SetLaunchConfiguration(PARAMS_FILE, params_file),
        SetLaunchConfiguration(RVIZ_LAYOUT, str(rviz_layout)),
        SetLaunchConfiguration(SIMULATOR_MAPS, "true" if simulator_maps else "false"),
    ]


def _node(template: graph.NodeTemplate) -> Node:
    """``template``'s static Node: its namespace under the graph's, its parameters from the params
    file, its remappings to the graph's names under the graph's namespace; the nodes of the
    simulator's maps only when the run builds them."""
    namespace = LaunchConfiguration("namespace")
    to_graph = [(source, [namespace, "/" + target]) for source, target in template.graph_remappings]
    return Node(
        package=template.package,
        executable=template.executable,
        name=template.name,
        namespace=[namespace, "/" + template.subnamespace] if template.subnamespace else namespace,
        exec_name=template.name,  # launch labels each process by its node name ([player-2], not [sim_node-2])
        parameters=[LaunchConfiguration(PARAMS_FILE)],
        remappings=[*template.remappings, *to_graph],
        output="screen",
        condition=IfCondition(LaunchConfiguration(SIMULATOR_MAPS)) if template.for_simulator_maps else None,
    )


def _rviz() -> Node:
    spec = graph.rviz_node("")  # its program, name and remappings; the layout and namespace come from configurations
    return Node(
        package=spec.package,
        executable=spec.executable,
        name=spec.name,
        namespace=LaunchConfiguration("namespace"),
        exec_name=spec.name,
        remappings=list(spec.remappings),
        arguments=["-d", LaunchConfiguration(RVIZ_LAYOUT)],
        output="screen",
        condition=IfCondition(LaunchConfiguration("rviz")),
    )


def generate_launch_description() -> LaunchDescription:
    # An argument without a default (dataset) is required: launch reports it missing by name.
    actions: list = [
        DeclareLaunchArgument(argument.name, description=argument.description)
        if argument.default is None
        else DeclareLaunchArgument(argument.name, default_value=argument.default, description=argument.description)
        for argument in graph.LAUNCH_ARGUMENTS
    ]
    actions.append(OpaqueFunction(function=_prepare_graph))
    for template in graph.BENCHMARK_NODES:
        node = _node(template)
        actions.append(node)
        if template.ends_graph:
            actions.append(
                RegisterEventHandler(
                    OnProcessExit(
                        target_action=node,
                        on_exit=[EmitEvent(event=Shutdown(reason=f"{template.name} finished"))],
                    )
                )
            )
    actions.append(_rviz())
    return LaunchDescription(actions)
