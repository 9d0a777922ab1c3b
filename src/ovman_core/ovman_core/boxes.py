"""Axis-aligned boxes in the simulator's world frame and their floor footprints.

World frame: AI2-THOR's (metres, y up, left-handed); the floor plane is (x, z). A footprint is the
box projected onto the floor plane, the region A of TASK.md §1.
"""

from __future__ import annotations

import dataclasses
import math

Vec3 = tuple[float, float, float]
"""A point or vector (x, y, z) in the world frame, metres."""

Vec2 = tuple[float, float]
"""A floor-plane point (x, z) in the world frame, metres."""


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Floor-plane rectangle ``[x_min, x_max] × [z_min, z_max]`` (metres, world frame)."""

    x_min: float
    z_min: float
    x_max: float
    z_max: float

    def __post_init__(self) -> None:
        if not (self.x_min <= self.x_max and self.z_min <= self.z_max):
            raise ValueError(f"footprint has min above max: {self}")

    @property
    def center(self) -> Vec2:
        return ((self.x_min + self.x_max) / 2.0, (self.z_min + self.z_max) / 2.0)

    def distance_to(self, point: Vec2) -> float:
        """Euclidean floor distance from ``point`` to the rectangle; 0 inside or on its edge."""
        dx = max(self.x_min - point[0], 0.0, point[0] - self.x_max)
        dz = max(self.z_min - point[1], 0.0, point[1] - self.z_max)
        return math.hypot(dx, dz)

    def distance_to_footprint(self, other: Footprint) -> float:
        """Smallest floor distance between two rectangles; 0 when they touch or overlap."""
        dx = max(self.x_min - other.x_max, 0.0, other.x_min - self.x_max)
        dz = max(self.z_min - other.z_max, 0.0, other.z_min - self.z_max)
        return math.hypot(dx, dz)


@dataclasses.dataclass(frozen=True)
class Box3:
    """Axis-aligned box with corners ``lo`` and ``hi`` (metres, world frame, y up)."""

    lo: Vec3
    hi: Vec3

    def __post_init__(self) -> None:
        if any(a > b for a, b in zip(self.lo, self.hi, strict=True)):
            raise ValueError(f"box has a min corner above its max corner: lo={self.lo} hi={self.hi}")

    @classmethod
    def from_center_size(cls, center: Vec3, size: Vec3) -> Box3:
        half = [s / 2.0 for s in size]
        return cls(
            (center[0] - half[0], center[1] - half[1], center[2] - half[2]),
            (center[0] + half[0], center[1] + half[1], center[2] + half[2]),
        )

    @property
    def center(self) -> Vec3:
        return tuple((a + b) / 2.0 for a, b in zip(self.lo, self.hi, strict=True))  # type: ignore[return-value]

    @property
    def size(self) -> Vec3:
        return tuple(b - a for a, b in zip(self.lo, self.hi, strict=True))  # type: ignore[return-value]

    @property
    def footprint(self) -> Footprint:
        return Footprint(self.lo[0], self.lo[2], self.hi[0], self.hi[2])

    def translated(self, delta: Vec3) -> Box3:
        return Box3(
            tuple(a + d for a, d in zip(self.lo, delta, strict=True)),  # type: ignore[arg-type]
            tuple(b + d for b, d in zip(self.hi, delta, strict=True)),  # type: ignore[arg-type]
        )


def floor_point(point: Vec3) -> Vec2:
    """π: project a world point onto the floor plane (x, z)."""
    return (point[0], point[2])


def floor_distance(a: Vec3, b: Vec3) -> float:
    """Distance between the floor projections of two world points (metres)."""
    return math.hypot(a[0] - b[0], a[2] - b[2])
