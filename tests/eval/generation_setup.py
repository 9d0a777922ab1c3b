"""Small generation runs for the generation, dataset and validate tests, and worlds that misbehave.

The test configuration keeps the task constants and the oracle of the shipped config but renders
64×48 frames on a three-waypoint tour, so a dataset of a few episodes takes seconds.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ovman_core.actions import Action, ActionResult
from ovman_core.config import OvmanConfig, SimConfig, load_config, to_document
from ovman_core.relations import Relation
from ovman_core.world_state import WorldState
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.generation.dataset import GenerationSummary, generate_dataset
from ovman_eval.generation.plan import GenerationRequest
from ovman_sim.embedded import EmbeddedWorld

SCENES = ("embedded-0", "embedded-1")


def small_config(**generation: Any) -> OvmanConfig:
    """The shipped config with a tiny camera and tour, and the agent on the simulator's segments
    (the learned segmenter needs its 320×240 frames; tests/eval/test_label_blind.py runs it);
    ``generation`` overrides generation keys."""
    config = segmented_by(load_config(), "simulator")
    sim = config.sim_node
    sim = dataclasses.replace(
        sim,
        camera=dataclasses.replace(sim.camera, width=64, height=48),
        tour=dataclasses.replace(sim.tour, max_waypoints=3),
    )
    bench = config.benchmark_node
    bench = dataclasses.replace(bench, generation=dataclasses.replace(bench.generation, **generation))
    return dataclasses.replace(config, sim_node=sim, benchmark_node=bench)


def config_file(config: OvmanConfig, directory: Path) -> Path:
    """``config`` written as a configuration file in ``directory`` (for the CLI's ``--config``)."""
    path = directory / "ovman.yaml"
    path.write_text(yaml.safe_dump(to_document(config), sort_keys=False), encoding="utf-8")
    return path


def request(
    relations: Sequence[Relation] = tuple(Relation),
    scenes: Sequence[str] = SCENES,
    per_relation: int = 1,
    seed: int = 0,
    multi_change: bool = False,
) -> GenerationRequest:
    return GenerationRequest(
        world="embedded",
        scenes=tuple(scenes),
        per_relation=per_relation,
        seed=seed,
        multi_change=multi_change,
        relations=tuple(relations),
    )


def generate(out: Path, req: GenerationRequest, config: OvmanConfig | None = None, **kwargs: Any) -> GenerationSummary:
    return generate_dataset(out, req, config or small_config(), **kwargs)


class WorldWrapper:
    """An EmbeddedWorld seen through a wrapper that tests override method by method."""

    def __init__(self, sim: SimConfig) -> None:
        self.inner = EmbeddedWorld(sim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MoverKillingWorld(WorldWrapper):
    """SIGKILLs its own process when a mover starts: the worker computing a moving episode dies."""

    def start_mover(self, instance_id: str, seed: int) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class DriftingWorld(WorldWrapper):
    """Reports one instance displaced by ``drift`` metres along x from the second frame rendered
    after a change on: the simulator "moved" an object the recordings had already described."""

    drift = 0.2

    def __init__(self, sim: SimConfig) -> None:
        super().__init__(sim)
        self.armed = False
        self.frames = 0
        self.carried: str | None = None

    def reset(self, scene, objects=None, pose=None):
        self.armed, self.frames, self.carried = False, 0, None
        return self.inner.reset(scene, objects, pose)

    def apply_change(self, change):
        self.armed = True
        return self.inner.apply_change(change)

    def start_mover(self, instance_id, seed):
        self.carried = instance_id
        return self.inner.start_mover(instance_id, seed)

    def observe(self):
        if self.armed:
            self.frames += 1
        return self.inner.observe()

    def objects(self) -> WorldState:
        state = self.inner.objects()
        if not (self.armed and self.frames >= 2):
            return state
        victim = next(o for o in state if o.instance_id != self.carried)
        moved = victim.box.translated((self.drift, 0.0, 0.0))
        objects = dict(state.objects)
        objects[victim.instance_id] = dataclasses.replace(victim, position=moved.center, box=moved)
        return WorldState(objects)


class SlightlyDriftingWorld(DriftingWorld):
    drift = 0.01


class BlockedWorld(WorldWrapper):
    """Every MoveAhead collides: the grid says the answer is reachable, the simulator does not let
    the agent walk there, as with an answer enclosed by something the grid does not know about.
    (Tours teleport and turn, so the visits are recorded as usual.)"""

    def step(self, action):
        if Action(action) is Action.MOVE_AHEAD:
            return ActionResult(False, True, "blocked by the test world")
        return self.inner.step(action)


class BlockedAfterFeasibilityWorld(WorldWrapper):
    """The first oracle run (feasibility) walks and stops; from then on every MoveAhead collides."""

    def __init__(self, sim: SimConfig) -> None:
        super().__init__(sim)
        self.stops = 0

    def step(self, action):
        if Action(action) is Action.STOP:
            self.stops += 1
        elif Action(action) is Action.MOVE_AHEAD and self.stops >= 1:
            return ActionResult(False, True, "blocked by the test world")
        return self.inner.step(action)


class InterruptingWorld(WorldWrapper):
    """Raises KeyboardInterrupt at the ``after``-th rendered frame (in the middle of a recording)."""

    after = 40

    def __init__(self, sim: SimConfig) -> None:
        super().__init__(sim)
        self.frames = 0

    def observe(self):
        self.frames += 1
        if self.frames == self.after:
            raise KeyboardInterrupt("interrupted by the test world")
        return self.inner.observe()


FAKE_PLAYER = Path(__file__).resolve().parents[1] / "sim" / "fake_thor_player.py"


def fake_thor_config(directory: Path) -> OvmanConfig:
    """The AI2-THOR world on the fake Unity player of the adapter tests (tests/sim/fake_thor_player.py).

    Its scene is one 4 m × 4 m room, so the distances of the task are scaled down to fit episodes in it.
    """
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "player.sh"
    command = [sys.executable, str(FAKE_PLAYER), "--log", str(directory / "actions.jsonl"), "--settle-frames", "3"]
    script.write_text("#!/bin/sh\nexec " + " ".join(map(shlex.quote, command)) + ' "$@"\n')
    script.chmod(0o755)
    config = small_config(min_start_distance=1.0, max_attempts_per_episode=30)
    task = dataclasses.replace(config.task, separation_radius=0.8, min_displacement=1.0, success_radius=0.5)
    sim = config.sim_node
    sim = dataclasses.replace(
        sim,
        world=dataclasses.replace(sim.world, kind="ai2thor"),
        ai2thor=dataclasses.replace(sim.ai2thor, local_executable_path=str(script), start_timeout_s=60.0),
    )
    return dataclasses.replace(config, shared=dataclasses.replace(config.shared, task=task), sim_node=sim)


def one_scene_dataset(tmp_path_factory: Any, relations: tuple[Relation, ...], config: OvmanConfig) -> Path:
    """A module fixture's dataset: ``relations`` generated on embedded-0 with ``config``."""
    out = tmp_path_factory.mktemp("dataset") / "ds"
    generate(out, request(relations, scenes=("embedded-0",)), config)
    return out
