"""nav_node driving a world in its own process: ``python -m ovman_eval.graph.nav_in_world``.

The same node as ``ovman_nav.nav_node`` (the Navigate action, target updates, /ovman/plan), given a
world of ``sim_node.world.kind`` with ``navigation.scene`` (e.g. ``embedded-3``) loaded at start-up
instead of driving sim_node over DDS: a graph of one node for trying navigation, and for its tests.
It lives here because ovman_nav never imports the simulator (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from ovman_ros.spinning import run_node

from ovman_core.config import ConfigError, OvmanConfig, load_config
from ovman_nav.executor import NavigableWorld
from ovman_nav.nav_node import NODE_NAME, NavNode
from ovman_sim.session import SessionError, make_world


def scene_world(config: OvmanConfig) -> NavigableWorld:
    """A world of ``sim_node.world.kind`` with ``navigation.scene`` loaded (the node's parameters applied)."""
    world = make_world(config.sim_node)
    world.reset(config.nav_node.navigation.scene)
    return world


def in_world_node() -> NavNode:
    """nav_node given :func:`scene_world`: ``navigation.scene`` (a parameter) names the scene."""
    node = NavNode(load_config(), world_factory=scene_world)
    if node.world is None:
        node.destroy_node()
        raise ConfigError("navigation.scene is empty: name the scene to drive (-p navigation.scene:=embedded-3)")
    return node


def main(args: Sequence[str] | None = None) -> int:
    """0 after Ctrl-C or an external shutdown, 1 when it cannot start (a bad config, an unknown scene)."""
    return run_node(
        NODE_NAME, in_world_node, args, startup_errors=(ConfigError, SessionError, ValueError, RuntimeError)
    )


if __name__ == "__main__":
    raise SystemExit(main())
