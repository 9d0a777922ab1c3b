"""Recorded tours re-rendered under a stress condition (``ovman benchmark --condition low_light|texture``).

A stress condition changes what the camera sees, never the world: every recorded frame of a
baseline episode is re-rendered on the live world at the frame's objects and pose, with the
dataset's simulator configuration and the ideal camera, keeping the frame's step and its recorded
depth (invalid where the condition sees nothing). Ground truth stays the recording's, so a
condition and the baseline differ by the condition alone. Frames: AI2-THOR world (metres; floor (x, z)).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from pathlib import Path

import numpy as np

from ovman_core.config import ConfigError, OvmanConfig, SimConfig, stored_config
from ovman_core.observation import Observation
from ovman_core.world_state import WorldState
from ovman_eval.generation.dataset import MANIFEST, DatasetError, read_manifest
from ovman_eval.runs.fingerprint import source_fingerprint
from ovman_sim.recording import RecordedFrame, RecordingError
from ovman_sim.world import Condition, World

_RENDER_SOURCES = (("ovman_sim", None), ("ovman_eval.benchmark", "condition_frames.py"))
"""Source files whose content keys the maps built from re-rendered frames (None: every .py of the package)."""


@dataclasses.dataclass(frozen=True)
class StressCondition:
    """A stress condition (``low_light`` or ``texture``) and the seed of its draws for one episode."""

    name: str
    seed: int

    def __post_init__(self) -> None:
        valid = [c.value for c in Condition if c is not Condition.BASELINE]
        if self.name not in valid:
            raise ValueError(f"unknown stress condition {self.name!r}; expected one of {', '.join(valid)}")


def stress_condition(name: str, episode_seed: int) -> StressCondition:
    """The condition ``name`` of an episode: its seed derived from the episode's seed and the name
    (numpy SeedSequence, 31 bits), so every run re-renders the same frames."""
    sequence = np.random.SeedSequence([int(episode_seed), zlib.crc32(name.encode())])
    return StressCondition(name, int(sequence.generate_state(1)[0] >> 1))


def render_fingerprint() -> str:
    """sha256 over the simulator's source and this module (what re-rendered frames depend on)."""
    return source_fingerprint(_RENDER_SOURCES)


def recording_sim_config(dataset: Path, config: OvmanConfig) -> SimConfig:
    """The simulator configuration to re-render ``dataset``'s recordings with: ``config.sim_node``
    with the ``world``, ``camera`` and ``embedded`` sections of the configuration the dataset was
    generated with (its manifest; keys added to the configuration since are taken from ``config``),
    so that the homes and the camera are those of the recordings. ``config.sim_node`` itself when
    the manifest holds no configuration that loads with this code (:class:`ConditionSensor` then
    refuses frames of another camera)."""
    where = f"{Path(dataset) / MANIFEST} (config)"
    try:
        recorded = stored_config(read_manifest(dataset).get("config"), where, config)[0].sim_node
    except (DatasetError, ConfigError):
        return _ideal_camera(config.sim_node)
    world = dataclasses.replace(recorded.world, kind=config.sim_node.world.kind)
    return _ideal_camera(
        dataclasses.replace(config.sim_node, world=world, camera=recorded.camera, embedded=recorded.embedded)
    )


def _ideal_camera(sim: SimConfig) -> SimConfig:
    return dataclasses.replace(sim, sensor=dataclasses.replace(sim.sensor, enabled=False))


class ConditionSensor:
    """Re-renders the recorded frames of one scene under ``condition`` on ``world``: the world is reset
    to a frame's objects only when they differ from the previous frame's (e.g. while the mover carries
    an instance), else the agent is placed at the frame's pose. Call it with the frames of a visit in
    recording order; it returns the observation the mapper sees instead of the recorded one.
    ``where`` names the recordings in errors."""

    def __init__(self, world: World, scene: str, condition: StressCondition, where: str) -> None:
        self.world = world
        self.scene = scene
        self.condition = condition
        self.where = where
        self._objects: WorldState | None = None

    def __call__(self, frame: RecordedFrame) -> Observation:
        recorded = frame.observation
        world = self.world
        if self._objects is None or frame.objects != self._objects:
            world.set_condition(Condition(self.condition.name), self.condition.seed)
            try:
                world.reset(self.scene, frame.objects, recorded.pose)
            except ValueError as err:
                raise RecordingError(f"{self.where}: cannot re-render step {recorded.step}: {err}") from err
            self._objects = frame.objects
        else:
            # Placed, never stepped: the world's step stays 0, so a pose seen in both visits gets the
            # same low-light noise draw (``ovman generate --condition`` also varies it with the step).
            moved = world.teleport(recorded.pose)
            if not moved.success:
                raise RecordingError(f"{self.where}: cannot re-render step {recorded.step}: {moved.message}")
        observation = world.observe()
        if not _same_camera(observation, recorded):
            raise RecordingError(
                f"{self.where}: the configured camera renders {observation.rgb.shape[1]}x{observation.rgb.shape[0]} "
                f"frames but the recording holds {recorded.rgb.shape[1]}x{recorded.rgb.shape[0]} ones (or other "
                "intrinsics); run the stress conditions with the configuration the dataset was generated with "
                "(sim_node.camera)"
            )
        # The recorded depth is the camera's reading (sensor noise and dropouts included): keep it
        # where the condition still sees, so that a condition changes only what it should.
        depth = np.where(np.isnan(observation.depth), np.float32(np.nan), recorded.depth).astype(np.float32)
        return dataclasses.replace(observation, depth=depth, step=recorded.step)


def _same_camera(rendered: Observation, recorded: Observation) -> bool:
    a, b = rendered.intrinsics, recorded.intrinsics
    return (
        rendered.rgb.shape == recorded.rgb.shape
        and (a.width, a.height) == (b.width, b.height)
        and all(math.isclose(x, y, rel_tol=1e-9) for x, y in ((a.fx, b.fx), (a.fy, b.fy), (a.cx, b.cx), (a.cy, b.cy)))
    )


__all__ = ["ConditionSensor", "StressCondition", "recording_sim_config", "render_fingerprint", "stress_condition"]
