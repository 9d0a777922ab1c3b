"""The World protocol that both the embedded world and the AI2-THOR adapter implement.

Frame: AI2-THOR's world frame (metres, y up, left-handed; floor plane (x, z)); yaw in degrees
clockwise from above with 0 facing +z; camera horizon in degrees, positive looking down
(ovman_core.world_state). Everything a node or recorder needs from a simulator goes through this
protocol, so the ROS graph, the recorder and the generator never know which world runs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ovman_core.boxes import Vec2, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.world_state import AgentPose, ObjectState, WorldState


class Action(str, enum.Enum):
    """Primitive actions (AI2-THOR names). Stop ends an episode and does not move the agent."""

    MOVE_AHEAD = "MoveAhead"
    ROTATE_LEFT = "RotateLeft"
    ROTATE_RIGHT = "RotateRight"
    LOOK_UP = "LookUp"
    LOOK_DOWN = "LookDown"
    STOP = "Stop"


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """Outcome of an action or change: ``success``; ``collided`` when a move was blocked."""

    success: bool
    collided: bool = False
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Observation:
    """One synchronised camera bundle.

    - ``rgb``: uint8 (H, W, 3), row 0 at the top.
    - ``depth``: float32 (H, W), **planar** depth in metres along the optical axis; NaN where
      invalid (nothing in range, beyond the visibility distance).
    - ``segments``: int32 (H, W) per-frame segment ids, 0 = no object. Ids are only meaningful
      within this frame: mapping must fuse by geometry and features, never by id.
    - ``segment_labels``: segment id → category label (what a segmenter would output).
    - ``segment_instances``: segment id → ground-truth instance id. Reserved for the oracle arms,
      diagnostics and the ground-truth channel; the reference agent never reads it.
    - ``pose``: the agent pose; ``camera_position``: camera centre in the world frame (metres).
    - ``step``: the world's step counter when the frame was taken (sim time = step × dt).
    """

    rgb: np.ndarray
    depth: np.ndarray
    segments: np.ndarray
    segment_labels: Mapping[int, str]
    segment_instances: Mapping[int, str]
    pose: AgentPose
    camera_position: Vec3
    intrinsics: Intrinsics
    step: int


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


def pose_observation(pose: AgentPose, camera_position: Vec3, intrinsics: Intrinsics, step: int) -> Observation:
    """An Observation without images: pose, camera centre (world frame, metres), intrinsics and
    step as the rendered frame would hold them; rgb, depth and segments 0x0, no segments."""
    return Observation(
        rgb=np.zeros((0, 0, 3), dtype=np.uint8),
        depth=np.zeros((0, 0), dtype=np.float32),
        segments=np.zeros((0, 0), dtype=np.int32),
        segment_labels={},
        segment_instances={},
        pose=pose,
        camera_position=camera_position,
        intrinsics=intrinsics,
        step=step,
    )


def action_sequence(names: Sequence[str]) -> list[Action]:
    """Parse AI2-THOR action names; raises ValueError naming the first unknown one."""
    actions = []
    for index, name in enumerate(names):
        try:
            actions.append(Action(name))
        except ValueError:
            valid = ", ".join(a.value for a in Action)
            raise ValueError(f"action {index}: unknown action {name!r}; expected one of {valid}") from None
    return actions
