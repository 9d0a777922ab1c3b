"""An embedded world at a scene, for the simulator tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator

from ovman_core.config import SimConfig
from ovman_sim.embedded import EmbeddedWorld


def world_at(sim: SimConfig, scene: str) -> Iterator[EmbeddedWorld]:
    """A fixture's body: an embedded world reset to ``scene``, closed after the test."""
    world = EmbeddedWorld(sim)
    world.reset(scene)
    yield world
    world.close()
