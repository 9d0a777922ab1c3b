"""The World protocol that both the embedded world and the AI2-THOR adapter implement.

Frame: AI2-THOR's world frame (metres, y up, left-handed; floor plane (x, z)); yaw in degrees
clockwise from above with 0 facing +z; camera horizon in degrees, positive looking down
(ovman_core.world_state). Everything a node or recorder needs from a simulator goes through this
protocol, so the ROS graph, the recorder and the generator never know which world runs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Vec2, Vec3
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState


@dataclasses.dataclass(frozen=True)
class MoveObject:
    """Change: move ``instance_id`` so that its box centre is at ``position`` (world frame)."""

    instance_id: str
    position: Vec3


@dataclasses.dataclass(frozen=True)
class RemoveObject:
    """Change: remove ``instance_id`` from the world."""

    instance_id: str


@dataclasses.dataclass(frozen=True)
class AddObject:
    """Change: add a new instance (its id must be new to the scene)."""

    obj: ObjectState


Change = MoveObject | RemoveObject | AddObject


class Condition(str, enum.Enum):
    """Stress conditions of the second seed, set per run (values from config ``conditions``)."""

    BASELINE = "baseline"
    LOW_LIGHT = "low_light"
    TEXTURE = "texture"


@runtime_checkable
class World(Protocol):
    """A simulator the stack can drive. Implementations: EmbeddedWorld, ThorWorld."""

    def reset(self, scene: str, objects: WorldState | None = None, pose: AgentPose | None = None) -> None:
        """Load ``scene``; if ``objects`` is given, set exactly these object states (the visit's
        world); place the agent at ``pose`` (default: the scene's start pose). Stops any mover and
        resets the step counter to 0."""

    def objects(self) -> WorldState:
        """Re-read the ground-truth state of every object from the simulator."""

    def agent_pose(self) -> AgentPose:
        """The agent's current pose."""

    def observe(self) -> Observation:
        """Render the current camera bundle (does not advance time)."""

    def observe_pose(self) -> Observation:
        """The current frame without its images (see :func:`pose_observation`): what a step's
        odometry, transforms and ground truth need when nobody reads the camera."""

    def step(self, action: Action) -> ActionResult:
        """Execute one primitive action; advances the step counter and the mover by one tick.

        Stop is the exception: it ends the episode at this moment (t_stop) and advances nothing,
        so the answer of a moving target is taken where the agent decided to stop."""

    def teleport(self, pose: AgentPose) -> ActionResult:
        """Place the agent at a reachable pose (fails without moving it otherwise)."""

    def reachable_positions(self) -> list[Vec2]:
        """Grid positions (x, z) the agent can stand on now, recomputed from the current objects
        (moved furniture is carved); sorted for determinism."""

    def apply_change(self, change: Change) -> ActionResult:
        """Apply a move, removal or addition and let the world settle."""

    def candidate_placements(self, instance_id: str) -> list[Vec3]:
        """Box-centre positions where ``instance_id`` could rest (on the floor or a furniture top)
        without overlapping anything, sorted for determinism."""

    def new_instance(self, category: str, instance_id: str) -> ObjectState | None:
        """A template for a new instance of ``category`` (placed later by AddObject), or None
        when the world cannot create one."""

    def start_mover(self, instance_id: str, seed: int) -> None:
        """Start carrying ``instance_id`` along reachable positions with a seeded random policy,
        one hop per ``mover.steps_per_move`` steps."""

    def stop_mover(self) -> None:
        """Stop the mover (the carried instance stays where it is)."""

    def set_condition(self, condition: Condition, seed: int = 0) -> None:
        """Render under a stress condition from now on (seeded for noise and texture draws)."""

    def close(self) -> None:
        """Release the simulator."""


R = TypeVar("R")


def apply_by_kind(
    change: Change,
    move: Callable[[MoveObject], R],
    remove: Callable[[RemoveObject], R],
    add: Callable[[AddObject], R],
) -> R:
    """A World's ``apply_change``: ``change`` handed to the function for its kind; TypeError for
    anything that is not a :data:`Change`."""
    if isinstance(change, MoveObject):
        return move(change)
    if isinstance(change, RemoveObject):
        return remove(change)
    if isinstance(change, AddObject):
        return add(change)
    raise TypeError(f"apply_change expects MoveObject, RemoveObject or AddObject, got {type(change).__name__}")


class StopProbe:
    """A world as the navigation executor drives it (:func:`ovman_nav.executor.navigate`): passes its
    calls to ``world`` and keeps the objects at the moment Stop is issued (``at_stop``: t_stop of
    the embodied success test, TASK.md Eq. 4)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.at_stop: WorldState | None = None

    def agent_pose(self) -> AgentPose:
        return self.world.agent_pose()

    def reachable_positions(self) -> list[Vec2]:
        return self.world.reachable_positions()

    def step(self, action: Action) -> ActionResult:
        if action is Action.STOP:
            self.at_stop = self.world.objects()
        return self.world.step(action)
