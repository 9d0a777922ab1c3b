"""Ground-truth world states and agent poses (TASK.md §1).

World frame: AI2-THOR's (metres, y up, left-handed); the floor plane is (x, z). Yaw is in degrees,
clockwise seen from above, 0 facing +z (AI2-THOR's ``rotation.y``); horizon is the camera pitch in
degrees, positive looking down (AI2-THOR's ``cameraHorizon``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping

from ovman_core.boxes import Box3, Vec2, Vec3, floor_point


@dataclasses.dataclass(frozen=True)
class ObjectState:
    """One object instance in one world state.

    ``instance_id`` is the persistent ground-truth id (the same object keeps it across visits);
    ``position`` is the box centre, metres in the world frame.
    """

    instance_id: str
    category: str
    position: Vec3
    box: Box3
    movable: bool = True

    @property
    def floor(self) -> Vec2:
        return floor_point(self.position)


@dataclasses.dataclass(frozen=True)
class WorldState:
    """The objects present in one visit's world, keyed by instance id."""

    objects: Mapping[str, ObjectState]

    def __post_init__(self) -> None:
        for key, obj in self.objects.items():
            if key != obj.instance_id:
                raise ValueError(f"world state key {key!r} holds object {obj.instance_id!r}")

    @classmethod
    def of(cls, objects: list[ObjectState] | tuple[ObjectState, ...]) -> WorldState:
        state: dict[str, ObjectState] = {}
        for obj in objects:
            if obj.instance_id in state:
                raise ValueError(f"duplicate instance id {obj.instance_id!r} in a world state")
            state[obj.instance_id] = obj
        return cls(state)

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self.objects

    def __getitem__(self, instance_id: str) -> ObjectState:
        return self.objects[instance_id]

    def __iter__(self) -> Iterator[ObjectState]:
        return iter(self.objects.values())

    def __len__(self) -> int:
        return len(self.objects)

    def with_object(self, obj: ObjectState) -> WorldState:
        """A copy with ``obj`` in place of the instance of the same id (added when absent)."""
        return WorldState({**self.objects, obj.instance_id: obj})

    def of_category(self, category: str) -> list[ObjectState]:
        """Instances of ``category``, sorted by instance id (deterministic order)."""
        return sorted((o for o in self if o.category == category), key=lambda o: o.instance_id)


@dataclasses.dataclass(frozen=True)
class AgentPose:
    """Agent pose on the floor: position (x, z) in metres, yaw and camera horizon in degrees."""

    x: float
    z: float
    yaw_deg: float = 0.0
    horizon_deg: float = 0.0

    @property
    def floor(self) -> Vec2:
        return (self.x, self.z)

    def deviation(self, other: AgentPose) -> tuple[float, float]:
        """Floor distance (m) and absolute yaw difference (deg, 0-180) from ``other``."""
        turn = abs(self.yaw_deg - other.yaw_deg) % 360.0
        return math.hypot(self.x - other.x, self.z - other.z), min(turn, 360.0 - turn)
