"""The OVMAN benchmark graph for ``ros2 launch`` on a ROS 2 workstation.

    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single
    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single arms:=two_visit,given_answer rviz:=true
    ros2 launch ovman_eval benchmark.launch.py dataset:=/data/ovman-single namespace:=run1   # beside another

Starts sim_node, the player (a second sim_node that plays the recorded tours, in the namespace
``player`` under the graph's),
mapping_node, query_node, nav_node and benchmark_node as described by
:mod:`ovman_eval.graph.description` (the description ``ovman launch benchmark`` starts too), every node with
its parameters from the configuration (``config:=`` or the ovman.yaml installed in this package's
share directory, also exported as ``$OVMAN_CONFIG``; ``$FASTDDS_DEFAULT_PROFILES_FILE`` is the
share directory's ``config/fastdds.xml`` unless already set), and RViz with ``config/ovman.rviz`` when
``rviz:=true``. The launch shuts down when benchmark_node exits; the results are in
``output``/<UTC stamp> (or ``run_dir``). Every argument is listed by
``ros2 launch ovman_eval benchmark.launch.py --show-args``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ovman_core.config import CONFIG_ENV, load_config
from ovman_eval.graph import description as graph


def _node(spec: graph.NodeSpec) -> Node:
    return Node(
        package=spec.package,
        executable=spec.executable,
        name=spec.name,
        namespace=spec.namespace,
        exec_name=spec.name,  # launch labels each process by its node name ([player], not [sim_node-2])
        parameters=[dict(spec.parameters)] if spec.parameters else [],
        remappings=list(spec.remappings),
        arguments=list(spec.arguments),
        output="screen",
    )


def _graph_actions(context) -> list:
    """The graph's actions once the launch arguments are known (paths from the package share)."""
    values = {argument.name: LaunchConfiguration(argument.name).perform(context) for argument in graph.LAUNCH_ARGUMENTS}
    share = Path(get_package_share_directory(graph.PACKAGE))
    config_path = Path(values["config"]) if values["config"] else graph.share_path(share, graph.CONFIG_FILE)
    base = load_config(config_path)
    options = graph.BenchmarkOptions.from_arguments(values, base)
    config = graph.config_for_dataset(base, options.dataset)
    actions: list = [SetEnvironmentVariable(CONFIG_ENV, str(config_path))]
    dds = graph.node_environment(os.environ, graph.share_path(share, graph.DDS_PROFILE_FILE))
    actions += [SetEnvironmentVariable(name, value) for name, value in dds.items()]
    for spec in graph.benchmark_graph(config, options):
        node = _node(spec)
        actions.append(node)
        if spec.ends_graph:
            actions.append(
                RegisterEventHandler(
                    OnProcessExit(
                        target_action=node,
                        on_exit=[EmitEvent(event=Shutdown(reason=f"{spec.name} finished"))],
                    )
                )
            )
    if options.rviz:
        actions.append(_node(graph.rviz_node(graph.share_path(share, graph.RVIZ_FILE), options.namespace)))
    return actions


def generate_launch_description() -> LaunchDescription:
    # An argument without a default (dataset) is required: launch reports it missing by name.
    arguments = [
        DeclareLaunchArgument(argument.name, description=argument.description)
        if argument.default is None
        else DeclareLaunchArgument(argument.name, default_value=argument.default, description=argument.description)
        for argument in graph.LAUNCH_ARGUMENTS
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_graph_actions)])
